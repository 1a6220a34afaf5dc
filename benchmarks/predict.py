"""Predict, then measure: the collectives on 8 and 32 ranks from a two-rank calibration.

From the repository root (the lock keeps other timing runs off the cores meanwhile)::

    .venv/bin/python benchmarks/predict.py \\
        --json benchmarks/results/predict.json --plot docs/img/predict.png

1. **Calibrate** (``mpiexec -n 2``, one rank per core): ping-pongs through
   ``dualmpi.Comm`` on the 2-node hypercube, over chains of d = 1..4 hops that go back
   and forth over its link (every inner hop received whole and sent on, as a
   forwarding node does), sizes from 8 B to 256 KiB; t_s, t_w, t_h fitted per protocol
   regime (:func:`dualmpi.model.predict.calibrate`).
2. **Predict** every collective and size on every network from the calibration and the
   schedules alone: the formula (schedule coefficients x cut-through fit) and the
   contention-aware virtual clock.  The predictions are written to the JSON file
   *before* anything else is measured.
3. **Measure** with ``dualmpi run`` (``launch/run``: one rank per node), and compare:
   relative error of the median call (the slowest rank's time per call).  The 2-node
   hypercube on 2 ranks comes first: one step per collective, no oversubscription — the
   calibration checked against the engine itself.

The runs with more ranks than usable cores are flagged ``oversubscribed`` in the
output, the JSON and on the figure: their wall times include waiting for a core.
Nothing is fitted to them.  ``--replot FILE`` redraws the figure from a stored file.
The JSON format (``dualmpi-predict/1``) is documented in docs/results.md.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dualmpi.model.predict import (  # noqa: E402
    PREDICT_FORMAT, calibrate, check_document, compare, measured_rows, oversubscription,
    predict_collective, usable_cores)

#: Q_1 on 2 ranks is the one run without oversubscription on a 2-core machine (one step each).
SPECS = ("hypercube:n=1", "dualcube:r=2", "hypercube:n=3", "dualcube:r=3", "hypercube:n=5")
COLLECTIVES = ("bcast", "scatter", "allgather", "alltoall")
SIZES = (8, 1024, 65536)
CAL_SIZES = (8, 64, 1024, 4096, 8192, 16384, 32768, 65536, 131072, 262144)
CAL_HOPS = (1, 2, 3, 4)
ENV = ROOT / "launch" / "ompi-env.sh"
PYTHON = ROOT / ".venv" / "bin" / "python"
MPIEXEC = ROOT / ".venv" / "bin" / "mpiexec"


def _ints(text):
    """Parse a comma-separated list of integers."""
    return tuple(int(x) for x in text.split(",") if x.strip())


def parse_args(argv=None):
    """Return the command-line arguments."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", default="benchmarks/results/predict.json",
                   help="results file (format dualmpi-predict/1)")
    p.add_argument("--plot", default="docs/img/predict.png", help="figure (PNG)")
    p.add_argument("--specs", default=",".join(SPECS), help="networks, comma-separated")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="block sizes (bytes)")
    p.add_argument("--iters", type=int, default=7, help="timed calls per size (>= 5)")
    p.add_argument("--cal-sizes", default=",".join(map(str, CAL_SIZES)))
    p.add_argument("--cal-hops", default=",".join(map(str, CAL_HOPS)))
    p.add_argument("--reps", type=int, default=15,
                   help="timed ping-pong blocks per point (their minimum is fitted)")
    p.add_argument("--kind", default="emulated", choices=("emulated", "raw"),
                   help="ping-pongs that calibrate: through dualmpi.Comm (default) or plain MPI")
    p.add_argument("--replot", metavar="FILE", help="only redraw --plot from a stored file")
    p.add_argument("--worker", choices=("calibrate",), help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    return p.parse_args(argv)


# -- the calibration job (under mpiexec -n 2) -------------------------------------------------
def worker_calibrate(args):
    """Time the bounce chains on two ranks; rank 0 writes a dualmpi-bench/1 file to ``--out``."""
    from mpi4py import MPI

    import dualmpi
    from dualmpi.commands.common import write_json_atomic
    from dualmpi.measure.pingpong import bounce, pingpong
    from dualmpi.model.results import BENCH_FORMAT

    world = MPI.COMM_WORLD
    net = dualmpi.Comm(world, "hypercube:n=1")
    rows = []
    for d in _ints(args.cal_hops):
        for size in _ints(args.cal_sizes):
            iters = 100 if size <= 8192 else 20
            for raw in (None, world):
                rows.append(pingpong(net, bounce(0, 1, d), size, iters, args.reps, warmup=3,
                                     raw=raw))
    net.Free()
    if world.Get_rank() == 0:
        meta = {"spec": "hypercube:n=1", "nodes": 2, "ranks": world.Get_size(),
                "mpi_library": MPI.Get_library_version().splitlines()[0].strip(),
                "chains": "bounce: d hops back and forth over one link"}
        write_json_atomic({"format": BENCH_FORMAT, "meta": meta, "pingpong": rows,
                           "collectives": []}, args.out)


# -- the driver ---------------------------------------------------------------------------------
def _launch(cmd, log):
    """Run ``cmd`` with launch/ompi-env.sh applied; append its output to ``log``; raise on failure."""
    full = ["bash", "-c", '. "$1"; shift; exec "$@"', "bash", str(ENV), *map(str, cmd)]
    proc = subprocess.run(full, cwd=ROOT, capture_output=True, text=True, timeout=900)
    log.append({"command": " ".join(map(str, cmd)), "exit": proc.returncode,
                "stdout_tail": proc.stdout.splitlines()[-3:]})
    if proc.returncode != 0:
        sys.exit(f"predict: {' '.join(map(str, cmd))} failed ({proc.returncode}):\n"
                 f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return proc


def _now():
    """UTC time, ISO 8601."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _write(doc, path):
    """Write ``doc`` atomically (checked first)."""
    from dualmpi.commands.common import write_json_atomic

    write_json_atomic(check_document(doc, path), path)


def run_experiment(args):
    """Calibrate, predict, write the predictions, measure, compare; return the document."""
    from dualmpi import __version__
    from dualmpi.simulator import simulate
    from dualmpi.topology import from_spec

    specs = [s for s in args.specs.split(",") if s]
    sizes = _ints(args.sizes)
    if args.iters < 5:
        sys.exit("predict: --iters must be at least 5 (medians of 5 calls or more)")
    cores = usable_cores()
    log = []
    meta = {"dualmpi": __version__, "host": os.uname().nodename, "cores": cores,
            "cpu_count": os.cpu_count(), "python": sys.version.split()[0], "argv": sys.argv,
            "date": _now(), "loadavg": {"start": list(os.getloadavg())}, "commands": log}
    # 1. calibration on two ranks
    with tempfile.TemporaryDirectory() as tmp:
        bench = Path(tmp) / "calibration.json"
        load = list(os.getloadavg())
        _launch([MPIEXEC, "-n", 2, PYTHON, "-m", "mpi4py", Path(__file__).resolve(),
                 "--worker", "calibrate", "--out", bench, "--cal-sizes", args.cal_sizes,
                 "--cal-hops", args.cal_hops, "--reps", args.reps], log)
        cal_doc = json.loads(bench.read_text())
    rows = [r for r in cal_doc["pingpong"] if r["kind"] == args.kind and r["verified"]]
    cal = calibrate(rows)
    over = oversubscription(2, cores, load[0])
    cal.update(kind=args.kind, ranks=2, **{k: v for k, v in over.items() if k != "ranks"},
               loadavg=load, mpi_library=cal_doc["meta"]["mpi_library"],
               pingpong=[r for r in cal_doc["pingpong"] if r["kind"] == args.kind],
               other_kind={"kind": "raw" if args.kind == "emulated" else "emulated",
                           **calibrate([r for r in cal_doc["pingpong"]
                                        if r["kind"] != args.kind], resamples=0)})
    meta["mpi_library"] = cal_doc["meta"]["mpi_library"]
    # 2. predictions, written before any collective is measured
    runs = []
    for spec in specs:
        topo = from_spec(spec)
        sims = {c: simulate(topo, c) for c in COLLECTIVES}
        over = oversubscription(topo.num_nodes, cores)
        preds = [dict(predict_collective(topo, c, m, cal, sim=sims[c]), measured=None,
                      spread=None, error=None) for c in COLLECTIVES for m in sizes]
        runs.append({"spec": spec, **over, "rows": preds})
    meta["predicted_at"] = _now()
    doc = {"format": PREDICT_FORMAT, "meta": meta, "calibration": cal, "runs": runs}
    _write(doc, args.json)
    print(f"predictions written to {args.json} before measuring")
    _say_calibration(cal)
    if cal["contended"]:
        print(f"calibration CONTENDED: load average {load[0]:.2f} before 2 ranks on {cores} cores: "
              "other work shared the cores, the ping-pongs are noisy")
    # 3. measurements
    for run in runs:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run.json"
            run["loadavg"] = {"before": list(os.getloadavg())}
            run.update(oversubscription(run["ranks"], cores, run["loadavg"]["before"][0]))
            cmd = ["bash", ROOT / "launch" / "run", run["spec"], "--collective", "all",
                   "--sizes", args.sizes, "--iters", args.iters, "--warmup", 2, "--json", out]
            _launch(cmd, log)
            run["loadavg"]["after"] = list(os.getloadavg())
            run["command"] = " ".join(map(str, cmd[1:])).replace(str(ROOT) + "/", "")
            measured = measured_rows(json.loads(out.read_text())["rows"])
        run["rows"] = [compare({k: v for k, v in r.items()
                                if k not in ("measured", "spread", "error")},
                               measured[(r["collective"], r["size"])]) for r in run["rows"]]
        if run["contended"] and not run["oversubscribed"]:
            print(f"{run['spec']}: CONTENDED, load average {run['load']:.2f} before "
                  f"{run['ranks']} ranks on {run['cores']} cores")
        if run["oversubscribed"]:
            print(f"{run['spec']}: OVERSUBSCRIBED, {run['ranks']} ranks on {run['cores']} "
                  "cores: the wall times include waiting for a core (reported, not fitted)")
    meta["measured_at"] = _now()
    meta["loadavg"]["end"] = list(os.getloadavg())
    _write(doc, args.json)
    return doc


def _say_calibration(cal):
    """Print the calibration's parameters per regime."""
    sw = cal["switching"]
    print(f"calibration ({cal['kind']} ping-pongs, 2 ranks on {cal['cores']} cores, load "
          f"{cal['loadavg'][0]:.2f}): {sw or 'cut-through'} fits better")
    for reg in cal["regimes"]:
        for model in ("cut-through", "store-and-forward"):
            fit = reg[model]
            if fit is None:
                continue
            p = fit["params"]
            th = "-" if p.get("th") is None else f"{p['th'] * 1e6:.2f} us"
            print(f"  {reg['label']:22s} {model:17s} t_s {p['ts'] * 1e6:7.2f} us  t_w "
                  f"{p['tw'] * 1e9:6.3f} ns/B  t_h {th:>9s}  R2 {fit['r2']:.3f}"
                  + (f"  ({'; '.join(fit['warnings'])})" if fit["warnings"] else ""))


def table(doc):
    """Return the predicted-vs-measured table as Markdown."""
    def us(x):
        return "-" if x is None else f"{x * 1e6:,.0f}"

    def pct(x):
        return "-" if x is None else f"{x * 100:+.0f} %"

    def ratio(r):
        return "-" if not (r["clock"] and r["measured"]) else f"{r['measured'] / r['clock']:.2f}"

    lines = ["| network | ranks / cores | collective | m (B) | link sharing | formula us | "
             "clock us | measured us (min-max) | error formula | error clock | measured / clock |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for run in doc["runs"]:
        flag = (" (oversubscribed)" if run["oversubscribed"] else
                f" (contended: load {run['load']:.1f})" if run.get("contended") else "")
        for r in run["rows"]:
            share = r["link_sharing"]
            share = "-" if share is None else f"{share['max']} ({share['steps_shared']}/{share['steps']})"
            spread = "" if r["spread"] is None else f" ({us(r['spread'][0])}-{us(r['spread'][1])})"
            lines.append(f"| {run['spec']} | {run['ranks']} / {run['cores']}{flag} | "
                         f"{r['collective']} | {r['size']} | {share} | {us(r['formula'])} | "
                         f"{us(r['clock'])} | {us(r['measured'])}{spread} | "
                         f"{pct(r['error'] and r['error']['formula'])} | "
                         f"{pct(r['error'] and r['error']['clock'])} | {ratio(r)} |")
    return "\n".join(lines)


def main(argv=None):
    """Entry point."""
    args = parse_args(argv)
    if args.worker == "calibrate":
        return worker_calibrate(args)
    from dualmpi.plotting import plot_predictions

    if args.replot:
        doc = check_document(json.loads(Path(args.replot).read_text()), args.replot)
    else:
        doc = run_experiment(args)
    print(table(doc))
    plot_predictions(doc, args.plot)
    print(f"figure written to {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
