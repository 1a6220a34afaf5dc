"""Application benchmark: the four kernels of ``dualmpi app`` on D_2, D_3 and MC(2,1).

One command runs every job, then writes the tables (docs/applications.md quotes them) and
the figure::

    python benchmarks/apps.py            # runs 12 mpiexec jobs (each under the timing lock)
    python benchmarks/apps.py --no-run   # tables and figure from the stored JSON only

Each job is ``mpiexec -n R python -m mpi4py -m dualmpi app KERNEL SPEC --json
benchmarks/results/apps_TAG_KERNEL.json`` (the network, the hypercube with as many nodes
and native MPI on the same ranks, in one job), wrapped in ``flock`` on a lock file (``$TIMING_LOCK``, default
``dualmpi-timing.lock`` in the temporary folder) so no other timing run shares the cores.  The load averages before
and after each job go into ``benchmarks/results/apps_load.json``.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
FIGURE = os.path.join(ROOT, "docs", "img", "applications.png")
KERNELS = ("fft", "sort", "summa", "cg")

#: (tag, spec, ranks, caption).
CONFIGS = [
    ("d2_np8", "dualcube:r=2", 8, "D_2 vs Q_3, 8 ranks, 1 node each"),
    ("d3_np32", "dualcube:r=3", 32, "D_3 vs Q_5, 32 ranks, 1 node each"),
    ("mc21_np8", "metacube:k=2,m=1", 8, "MC(2,1) vs Q_6, 8 ranks, 8 nodes each"),
]


def run(tag, spec, ranks, kernel, repeats):
    """Run one ``dualmpi app`` job under the timing lock; return its exit code."""
    py = os.path.join(ROOT, ".venv", "bin", "python")
    mpiexec = os.environ.get("MPIEXEC", os.path.join(ROOT, ".venv", "bin", "mpiexec"))
    out = os.path.join(RESULTS, f"apps_{tag}_{kernel}.json")
    lock = os.environ.get("TIMING_LOCK", os.path.join(tempfile.gettempdir(), "dualmpi-timing.lock"))
    cmd = (f'. "{ROOT}/launch/ompi-env.sh" && flock "{lock}" timeout 1800 "{mpiexec}" -n {ranks} '
           f'"{py}" -m mpi4py -m dualmpi app {kernel} {spec} --repeats {repeats} --json "{out}"')
    before = os.getloadavg()
    rc = subprocess.call(["bash", "-c", cmd], cwd=ROOT)
    return rc, before, os.getloadavg()


def load(tag, kernel):
    """Return the stored JSON of one job, or None."""
    path = os.path.join(RESULTS, f"apps_{tag}_{kernel}.json")
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return json.load(fh)


def tables():
    """Return the markdown tables of every stored job."""
    lines = []
    for tag, spec, ranks, caption in CONFIGS:
        lines += [f"### {caption}", "",
                  "| kernel | N | network | verified | time ms | time / native | link messages | "
                  "link MB | hop rounds | model ms | model / hypercube | load avg |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for kernel in KERNELS:
            doc = load(tag, kernel)
            if doc is None:
                lines.append(f"| {kernel} | - | (not run) |||||||||")
                continue
            meta = doc["meta"]
            for row in doc["rows"]:
                def f(key, fmt, scale=1.0, r=row):
                    v = r.get(key)
                    return "-" if v is None else format(v if fmt == "d" else v * scale, fmt)
                lines.append(
                    f"| {kernel} | {meta['size']} | {row['spec']} | "
                    f"{'yes' if row['verified'] else 'NO'} | {f('time', '.2f', 1e3)} | "
                    f"{f('time_over_native', '.2f')} | {f('messages', 'd')} | "
                    f"{f('bytes', '.2f', 1e-6)} | {f('rounds', 'd')} | "
                    f"{f('model_time', '.4f', 1e3)} | {f('model_over_hypercube', '.3f')} | "
                    f"{meta['load_average'][0]:.1f} |")
        lines.append("")
    return "\n".join(lines)


def figure():
    """Draw measured time / native and model time / hypercube per kernel and configuration."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 6.5))
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, len(CONFIGS), sharey="row")
    width = 0.38
    docs = [load(t, k) for t, _, _, _ in CONFIGS for k in KERNELS]
    docs = [d for d in docs if d]
    repeats = "/".join(sorted({str(d["meta"]["repeats"]) for d in docs}))
    lo = min(d["meta"]["load_average"][0] for d in docs)
    hi = max(d["meta"]["load_average"][0] for d in docs)
    for col, (tag, spec, ranks, caption) in enumerate(CONFIGS):
        top, bottom = axes[0][col], axes[1][col]
        for i, kernel in enumerate(KERNELS):
            doc = load(tag, kernel)
            if doc is None:
                continue
            rows = {r["network"]: r for r in doc["rows"]}
            emu, hyp = rows["emulated"], rows.get("hypercube")
            top.bar(i - width / 2, emu["time_over_native"], width, color="tab:red",
                    label=spec if i == 0 else None)
            if hyp:
                top.bar(i + width / 2, hyp["time_over_native"], width, color="tab:blue",
                        label=hyp["spec"] if i == 0 else None)
                bottom.bar(i - width / 2, emu["model_time"] * 1e3, width, color="tab:red",
                           label=spec if i == 0 else None)
                bottom.bar(i + width / 2, hyp["model_time"] * 1e3, width, color="tab:blue",
                           label=hyp["spec"] if i == 0 else None)
                bottom.text(i, max(emu["model_time"], hyp["model_time"]) * 1e3 * 1.05,
                            f"x{emu['model_over_hypercube']:.2f}", ha="center", fontsize=8)
        top.axhline(1.0, color="k", lw=0.8)
        top.set_title(caption, fontsize=10)
        for ax in (top, bottom):
            ax.set_xticks(range(len(KERNELS)))
            ax.set_xticklabels(KERNELS)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
        bottom.set_yscale("log")
        top.set_yscale("log")
    axes[0][0].set_ylabel("measured time / native MPI")
    axes[1][0].set_ylabel("model time, ms (t_s 2 us, t_w 1 ns/B, t_h 50 ns)")
    fig.suptitle("Application kernels: emulated network vs hypercube vs native MPI "
                 f"(median of {repeats} runs, slowest rank; load average {lo:.0f}-{hi:.0f})",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(FIGURE, dpi=110)


def main():
    """Run the jobs (unless --no-run), then print the tables and draw the figure."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--no-run", action="store_true", help="only tables and figure")
    p.add_argument("--only", default=None, help="comma-separated tags (d2_np8, d3_np32, mc21_np8)")
    p.add_argument("--kernels", default=",".join(KERNELS))
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    if not args.no_run:
        loads = {}
        path = os.path.join(RESULTS, "apps_load.json")
        if os.path.exists(path):
            with open(path) as fh:
                loads = json.load(fh)
        only = set(args.only.split(",")) if args.only else None
        for tag, spec, ranks, _ in CONFIGS:
            if only and tag not in only:
                continue
            for kernel in args.kernels.split(","):
                print(f"==> {kernel} on {spec}, {ranks} ranks", flush=True)
                rc, before, after = run(tag, spec, ranks, kernel, args.repeats)
                loads[f"{tag}_{kernel}"] = {"exit": rc, "load_before": before, "load_after": after}
                with open(path, "w") as fh:
                    json.dump(loads, fh, indent=2)
                if rc:
                    print(f"apps.py: {kernel} on {spec} exited {rc}", file=sys.stderr)
    print(tables())
    figure()
    print(f"figure written to {FIGURE}")


if __name__ == "__main__":
    main()
