"""What the point-to-point progress thread costs the collectives on an oversubscribed host.

Every :class:`dualmpi.Comm` starts a progress thread per rank (``dualmpi-router``,
docs/p2p.md) that forwards routed point-to-point messages; when idle it sleeps up to
``cold`` seconds (``DUALMPI_POLL``, default 2 ms) between polls.  With more ranks than
cores each wake-up takes a core from a rank in a collective.  The thread lives in the
process, so a timing with and without it cannot share a job: this runs
``benchmarks/engine.py`` in fresh jobs, alternated::

    on:      the default (cold = 2 ms)
    cold10:  DUALMPI_POLL=cold=1e-2 (the idle thread wakes 5 times less often)
    off:     DUALMPI_PROGRESS_THREAD=0 (no thread: a routed message moves only inside
             dualmpi calls, docs/p2p.md)

on, cold10, off, on, ... (``--jobs`` of each) and reports, per collective and size, the
median over the jobs of each job's medians of ``dualmpi``, ``floor`` (the compiled plan
in the smallest C loop, in the same process as the thread) and ``native`` (MPI's own
collective, in that process too), their ratios to ``on``, the load
average before every job, and what each job ran with (``progress_thread``, ``poll_cold_s``:
``benchmarks/engine.py`` records them).  Run from the repository root, one timing benchmark at a
time::

    .venv/bin/python benchmarks/progress_thread.py dualcube:r=2 --ranks 8 --jobs 7 \\
        --json benchmarks/results/progress_thread_d2_np8.json
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: The variants: the environment each job runs with.
VARIANTS = {"on": {"DUALMPI_PROGRESS_THREAD": "1", "DUALMPI_POLL": "cold=2e-3"},
            "cold10": {"DUALMPI_PROGRESS_THREAD": "1", "DUALMPI_POLL": "cold=1e-2"},
            "off": {"DUALMPI_PROGRESS_THREAD": "0", "DUALMPI_POLL": "cold=2e-3"}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=7, help="jobs of each variant")
    parser.add_argument("--collectives", default="bcast,gather,reduce,allreduce,alltoall")
    parser.add_argument("--sizes", default="8,65536")
    parser.add_argument("--repeats", type=int, default=7, help="repeats within each job")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    venv = os.path.dirname(sys.executable)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for j in range(args.jobs):
            for name, env in VARIANTS.items():
                out = os.path.join(tmp, f"{name}-{j}.json")
                passed = " ".join(f"-x {k}" for k in env)
                cmd = (f'. "{ROOT}/launch/ompi-env.sh" && exec timeout 900 "{venv}/mpiexec" '
                       f'{passed} -n {args.ranks} "{sys.executable}" -m mpi4py '
                       f'"{ROOT}/benchmarks/engine.py" {args.spec} --collectives '
                       f'{args.collectives} --sizes {args.sizes} --repeats {args.repeats} '
                       f'--json "{out}"')
                load = os.getloadavg()
                res = subprocess.run(["bash", "-c", cmd], cwd=ROOT, capture_output=True,
                                     text=True, env={**os.environ, **env})
                if res.returncode:
                    raise SystemExit(f"{name} job {j} failed ({res.returncode}):\n"
                                     f"{res.stdout[-2000:]}{res.stderr[-2000:]}")
                with open(out) as fh:
                    got = json.load(fh)
                rows, meta = got["rows"], got["meta"]
                runs.append({"variant": name, "job": j, "loadavg_before": load,
                             "progress_thread": meta["progress_thread"],
                             "poll_cold_s": meta["poll_cold_s"],
                             "medians": {f"{r['collective']}:{r['size']}": r["median"]
                                         for r in rows}})
                print(f"job {j} {name:7s} load {load[0]:.2f}", flush=True)
    table = []
    for key in runs[0]["medians"]:
        row = {"collective": key.split(":")[0], "size": int(key.split(":")[1])}
        for what in ("dualmpi", "floor", "native"):
            if what not in runs[0]["medians"][key]:  # (a neighbourhood collective: no floor)
                continue
            med = {name: statistics.median(r["medians"][key][what] for r in runs
                                           if r["variant"] == name) for name in VARIANTS}
            row[what] = med
            for name in ("cold10", "off"):
                row[f"{what} {name}/on"] = med[name] / med["on"]
        table.append(row)
        print(f"{row['collective']:10s} {row['size']:>8}  dualmpi on {row['dualmpi']['on'] * 1e6:8.1f} us"
              f"  cold10/on {row['dualmpi cold10/on']:.2f}  off/on {row['dualmpi off/on']:.2f}"
              + (f"  | floor cold10/on {row['floor cold10/on']:.2f}"
                 f"  off/on {row['floor off/on']:.2f}" if "floor" in row else "  | (no floor)")
              + f"  | native off/on {row['native off/on']:.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"format": "progress-thread/1",
                       "meta": {"spec": args.spec, "ranks": args.ranks, "cores": os.cpu_count(),
                                "jobs": args.jobs, "repeats": args.repeats, "argv": sys.argv,
                                "variants": VARIANTS},
                       "rows": table, "runs": runs}, fh, indent=2)
            fh.write("\n")
        print(f"results written to {args.json}")


if __name__ == "__main__":
    main()
