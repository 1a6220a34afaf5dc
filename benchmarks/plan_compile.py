"""Plan compilation benchmark: CPU time and memory per stage, the compiler before and after issue 13.

One rank's share of a collective is built in three stages, each timed with
``time.process_time`` (user + system CPU of the process):

* ``schedule``: the array schedule (``dualmpi.engine.core.array_schedule``);
* ``compile``: the rank's structural plan (``dualmpi.engine.plan.compile_rank``);
* ``bind``: byte offsets and segments for one message size (``RankPlan.bind``).

(The MPI requests a transport then creates from the bound plan are not timed here.)
Every repeat runs each variant in a fresh subprocess, interleaved (before, after,
before, after, ...), so caches and memory start clean; the table gives the medians.
``before`` is the package as of commit ``56e2dd2`` (extracted with ``git archive``),
``after`` the working tree; ``after-nohuge`` is the working tree with
``NUMPY_MADVISE_HUGEPAGE=0`` (numpy then does not ask the kernel for huge pages, which
trades more page faults for system times that vary less on a loaded machine).  Each
child also reports its peak resident memory and page faults, and a summary of the
bound plan (store size, rounds, segments, link messages and bytes) that must be the
same for every variant.

``--wall N`` adds what a user sees: ``N`` interleaved pairs of the 2-rank job
:data:`WALL_COMMAND` (wall time, and the CPU time of all its processes), ``before``
being the working tree with the compiler's files (:data:`COMPILER_FILES`) as of
``56e2dd2`` and ``after`` the working tree, so the rest of the engine is the same.

``--before COMMIT`` and ``--after COMMIT`` compare two other commits' packages the same way
(issue 25: the schedule computed when read, against the commit before it).

Run from the repository root::

    .venv/bin/python benchmarks/plan_compile.py \\
        --repeats 5 --wall 5 --json benchmarks/results/plan_compile_mc22.json
"""

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

BEFORE = "56e2dd2"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: (name, spec, collective, nodes per rank, rank, bytes of one node-level block)
CASES = [
    ("MC(2,2) alltoall, one rank of 2", "metacube:k=2,m=2", "alltoall", 512, 0, 64),
    ("MC(2,1) alltoall, one rank of 8", "metacube:k=2,m=1", "alltoall", 8, 0, 64),
]

STAGES = ("schedule", "compile", "bind")

#: The files of the schedule arrays and the plan compiler (replaced for ``before`` of ``--wall``).
COMPILER_FILES = ("dualmpi/engine/plan.py", "dualmpi/engine/arrays.py", "dualmpi/engine/layout.py")

#: The user's job of ``--wall`` (run from the package's folder, after launch/ompi-env.sh).
WALL_COMMAND = ("{venv}/mpiexec -n 2 -x PYTHONPATH {venv}/python -m mpi4py -m dualmpi run "
                "metacube:k=2,m=2 --collective alltoall --sizes 64 --iters 3 --warmup 1 "
                "--json {out}")


def child(spec, collective, q, rank, block):
    """Build, compile and bind one rank's plan; print the measurements as JSON."""
    import numpy as np

    from dualmpi.engine.core import array_schedule
    from dualmpi.engine.layout import Layout, layout_kind
    from dualmpi.engine.plan import compile_rank
    from dualmpi.topology import from_spec

    def usage():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return time.process_time(), r.ru_maxrss, r.ru_minflt, r.ru_utime, r.ru_stime

    topo = from_spec(spec)
    out = {}
    marks = [usage()]
    sched = array_schedule(topo, collective, None, "corrected", None, q)
    marks.append(usage())
    plan = compile_rank(sched, q, rank, 0)
    marks.append(usage())
    layout = Layout(layout_kind(collective), topo.num_nodes, q, block * q * q)
    bound = plan.bind(layout, 1)
    marks.append(usage())
    for name, a, b in zip(STAGES, marks, marks[1:]):
        out[name] = {"cpu_s": b[0] - a[0], "user_s": b[3] - a[3], "sys_s": b[4] - a[4],
                     "page_faults": b[2] - a[2], "maxrss_mb": b[1] / 1024}
    import dualmpi

    out["package"] = os.path.dirname(dualmpi.__file__)
    out["total_cpu_s"] = marks[-1][0] - marks[0][0]
    out["maxrss_mb"] = marks[-1][1] / 1024
    segs = sum(len(o) for r in bound.rounds for _, o, _ in r.sends + r.recvs)
    out["plan"] = {"nbytes": int(bound.nbytes), "rounds": len(bound.rounds),
                   "slots": int(plan.num_slots), "segments": int(segs),
                   "copies": int(sum(r.copies[0].size for r in bound.rounds)),
                   "link_messages": int(np.sum(bound.link_messages)),
                   "link_bytes": int(np.sum(bound.link_bytes)),
                   "links": int(bound.link_src.size)}
    print(json.dumps(out))


def extract_before(folder, commit=None):
    """Extract the package as of ``commit`` (default :data:`BEFORE`) into ``folder``; return it."""
    os.makedirs(folder, exist_ok=True)
    archive = subprocess.run(["git", "-C", ROOT, "archive", commit or BEFORE, "dualmpi"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
    return folder


def tree_with_old_compiler(folder):
    """Copy the working tree's package into ``folder`` with :data:`COMPILER_FILES` as of BEFORE."""
    import shutil

    shutil.copytree(os.path.join(ROOT, "dualmpi"), os.path.join(folder, "dualmpi"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in COMPILER_FILES:
        text = subprocess.run(["git", "-C", ROOT, "show", f"{BEFORE}:{name}"], check=True,
                              capture_output=True, text=True).stdout
        with open(os.path.join(folder, name), "w") as fh:
            fh.write(text)
    return folder


def wall_run(folder, tmp):
    """Run :data:`WALL_COMMAND` with the package in ``folder``; return wall and CPU seconds."""
    out = os.path.join(tmp, "run.json")
    cmd = (f". {ROOT}/launch/ompi-env.sh && exec timeout 600 "
           + WALL_COMMAND.format(venv=os.path.dirname(sys.executable), out=out))
    env = dict(os.environ, PYTHONPATH=folder)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    res = subprocess.run(["bash", "-c", cmd], cwd=folder, env=env, capture_output=True,
                         text=True, timeout=700)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0 or " ok rounds" not in res.stdout + res.stderr:
        raise SystemExit(f"the user's job failed ({res.returncode}):\n{res.stdout}{res.stderr}")
    return {"wall_s": wall, "user_s": after.ru_utime - before.ru_utime,
            "sys_s": after.ru_stime - before.ru_stime}


def run_child(variant, case, before_dir, after_dir=ROOT):
    """Run one measurement in a fresh interpreter; return its JSON."""
    _, spec, collective, q, rank, block = case
    env = dict(os.environ)
    path = before_dir if variant == "before" else after_dir
    env["PYTHONPATH"] = path
    if variant == "after-nohuge":
        env["NUMPY_MADVISE_HUGEPAGE"] = "0"
    else:
        env.pop("NUMPY_MADVISE_HUGEPAGE", None)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", spec, collective, str(q),
           str(rank), str(block)]
    res = subprocess.run(cmd, env=env, cwd=path, capture_output=True, text=True, check=True,
                         timeout=600)
    return json.loads(res.stdout.strip().splitlines()[-1])


def summarise(runs):
    """Return the medians (and ranges) of the stage times and memory of a list of runs."""
    out = {}
    for stage in STAGES:
        out[stage] = {key: statistics.median(r[stage][key] for r in runs)
                      for key in ("cpu_s", "user_s", "sys_s", "page_faults")}
        cpu = [r[stage]["cpu_s"] for r in runs]
        out[stage]["cpu_s_range"] = [min(cpu), max(cpu)]
    total = [r["total_cpu_s"] for r in runs]
    out["total_cpu_s"] = statistics.median(total)
    out["total_cpu_s_range"] = [min(total), max(total)]
    out["maxrss_mb"] = statistics.median(r["maxrss_mb"] for r in runs)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per variant")
    parser.add_argument("--variants", default="before,after,after-nohuge",
                        help="comma-separated: before, after, after-nohuge")
    parser.add_argument("--cases", default="all", help="'all' or indices into CASES, e.g. 0")
    parser.add_argument("--wall", type=int, default=0, metavar="N",
                        help="also time N interleaved pairs of the user's 2-rank job")
    parser.add_argument("--before", default=BEFORE,
                        help=f"the commit of variant 'before' (default {BEFORE})")
    parser.add_argument("--after", help="a commit for variant 'after' (default: the working tree)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    cases = CASES if args.cases == "all" else [CASES[int(i)] for i in args.cases.split(",")]
    result = {"command": " ".join([os.path.relpath(sys.executable, ROOT)] + sys.argv),
              "before": args.before,
              "after": args.after or "working tree at " + subprocess.run(
                  ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                  text=True).stdout.strip(),
              "python": platform.python_version(), "cpus": os.cpu_count(),
              "method": "time.process_time per stage in a fresh process per variant and "
                        "repeat, variants interleaved; medians over repeats",
              "cases": []}
    with tempfile.TemporaryDirectory() as tmp:
        before_dir = extract_before(os.path.join(tmp, "before"), args.before) \
            if "before" in variants else None
        after_dir = extract_before(os.path.join(tmp, "after"), args.after) if args.after else ROOT
        for case in cases:
            runs = {v: [] for v in variants}
            loads = []
            for rep in range(args.repeats):
                loads.append(os.getloadavg())
                for v in variants:
                    runs[v].append(run_child(v, case, before_dir, after_dir))
                print(f"{case[0]}: repeat {rep + 1}/{args.repeats}, load {loads[-1][0]:.1f}: "
                      + ", ".join(f"{v} {runs[v][-1]['total_cpu_s']:.2f} s" for v in variants),
                      file=sys.stderr)
            plans = {json.dumps(r["plan"], sort_keys=True) for v in variants for r in runs[v]}
            if len(plans) != 1:
                raise SystemExit(f"{case[0]}: the variants' plans differ: {plans}")
            entry = {"case": case[0], "spec": case[1], "collective": case[2], "q": case[3],
                     "rank": case[4], "block_bytes": case[5], "repeats": args.repeats,
                     "loadavg": [list(x) for x in loads], "plan": runs[variants[0]][0]["plan"],
                     "median": {v: summarise(runs[v]) for v in variants},
                     "runs": runs}
            result["cases"].append(entry)
        if args.wall:
            old = tree_with_old_compiler(os.path.join(tmp, "old-compiler"))
            runs, loads = {"before": [], "after": []}, []
            for rep in range(args.wall):
                loads.append(os.getloadavg())
                for v, folder in (("before", old), ("after", ROOT)):
                    runs[v].append(wall_run(folder, tmp))
                print(f"user's job: repeat {rep + 1}/{args.wall}, load {loads[-1][0]:.1f}: "
                      + ", ".join(f"{v} {runs[v][-1]['wall_s']:.2f} s" for v in runs),
                      file=sys.stderr)
            result["user_job"] = {
                "command": WALL_COMMAND.format(venv=".venv/bin", out="<tmp>.json"),
                "before": f"working tree with {', '.join(COMPILER_FILES)} as of {BEFORE}",
                "repeats": args.wall, "loadavg": [list(x) for x in loads],
                "median": {v: {k: statistics.median(r[k] for r in runs[v]) for k in runs[v][0]}
                           for v in runs},
                "runs": runs}
    for entry in result["cases"]:
        print(f"\n{entry['case']} (median of {entry['repeats']}, load "
              f"{min(x[0] for x in entry['loadavg']):.1f}-{max(x[0] for x in entry['loadavg']):.1f})")
        print(f"{'variant':14s} " + " ".join(f"{s + ' s':>10s}" for s in STAGES)
              + f" {'total s':>10s} {'range':>13s} {'maxrss MB':>10s}")
        for v, m in entry["median"].items():
            print(f"{v:14s} " + " ".join(f"{m[s]['cpu_s']:10.3f}" for s in STAGES)
                  + f" {m['total_cpu_s']:10.3f} {m['total_cpu_s_range'][0]:6.3f}-"
                  f"{m['total_cpu_s_range'][1]:<6.3f} {m['maxrss_mb']:10.0f}")
    if "user_job" in result:
        job = result["user_job"]
        print(f"\nthe user's job (median of {job['repeats']}): " + "; ".join(
            f"{v} wall {m['wall_s']:.2f} s, CPU {m['user_s'] + m['sys_s']:.2f} s (both ranks)"
            for v, m in job["median"].items()))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
            fh.write("\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        spec, collective, q, rank, block = sys.argv[2:7]
        child(spec, collective, int(q), int(rank), int(block))
    else:
        main()
