"""What ``dualmpi exec`` adds to a program that only computes (issue 24: target < 0.3 s).

Runs the same mpi4py program (``examples``-style, written without dualmpi in mind: it imports
mpi4py, computes for a fixed amount of work, prints one line from rank 0, and makes no MPI call
but ``Get_rank``/``Get_size``) in fresh jobs, interleaved::

    native:  mpiexec -n R python -m mpi4py prog.py
    exec:    mpiexec -n R python -m mpi4py -m dualmpi exec SPEC -- prog.py

native, exec, native, exec, ... (``--jobs`` of each), and reports the medians of the whole
job's wall time (from ``mpiexec`` to its exit) and of the children's CPU time, the median of
the per-pair differences exec - native, and the load average before every job.  The outputs
of the two are compared (the report ``dualmpi exec`` prints on stderr aside).  The jobs run
with ``PYTHONDONTWRITEBYTECODE`` unset, so that Python keeps the modules' bytecode as it does
for a user (with it set, every job compiles dualmpi's modules again: ~0.15 s of CPU per rank).
Run from the repository root, one timing benchmark at a time::

    .venv/bin/python benchmarks/exec_overhead.py --spec hypercube:n=1 --ranks 2 --jobs 9 \\
        --json benchmarks/results/exec_overhead_q1_np2.json
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = '''\
import sys
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
n = int(sys.argv[1])
acc = 0
for i in range(rank, n, size):
    acc += (i * i) % 7
if rank == 0:
    print(f"rank 0 of {size}: {acc}")
'''


def job(cmd, cwd):
    """Run ``cmd`` (bash); return (wall s, children's CPU s, stdout, load average before)."""
    load = os.getloadavg()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    res = subprocess.run(["bash", "-c", cmd], cwd=cwd, capture_output=True, text=True,
                         timeout=600, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode:
        raise SystemExit(f"job failed ({res.returncode}): {cmd}\n{res.stdout[-2000:]}"
                         f"{res.stderr[-2000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, res.stdout, load


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="hypercube:n=1")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=9, help="jobs of each kind (>= 7)")
    parser.add_argument("--work", type=int, default=2_000_000,
                        help="loop iterations the program computes (split over the ranks)")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    venv = os.path.dirname(sys.executable)
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "compute.py")
        with open(prog, "w") as fh:
            fh.write(PROGRAM)
        head = (f'. "{ROOT}/launch/ompi-env.sh" && exec timeout 500 "{venv}/mpiexec" '
                f'-n {args.ranks} "{sys.executable}" -m mpi4py')
        cmds = {"native": f'{head} "{prog}" {args.work}',
                "exec": f'{head} -m dualmpi exec {args.spec} -- "{prog}" {args.work}'}
        job(cmds["native"], tmp)  # warm the file cache (and dualmpi's, for exec) first
        job(cmds["exec"], tmp)
        runs = {"native": [], "exec": []}
        for j in range(args.jobs):
            for kind in ("native", "exec"):
                wall, cpu, out, load = job(cmds[kind], tmp)
                runs[kind].append({"wall_s": wall, "cpu_s": cpu, "loadavg": list(load),
                                   "stdout": out})
                print(f"job {j + 1}/{args.jobs} {kind:6s} load {load[0]:5.2f}: wall "
                      f"{wall:6.3f} s, CPU {cpu:6.3f} s", flush=True)
    same = all(r["stdout"] == runs["native"][0]["stdout"] for rs in runs.values() for r in rs)
    med = {k: {f: statistics.median(r[f] for r in rs) for f in ("wall_s", "cpu_s")}
           for k, rs in runs.items()}
    diffs = [e["wall_s"] - n["wall_s"] for n, e in zip(runs["native"], runs["exec"])]
    cpu_diffs = [e["cpu_s"] - n["cpu_s"] for n, e in zip(runs["native"], runs["exec"])]
    loads = [r["loadavg"][0] for rs in runs.values() for r in rs]
    summary = {"native_wall_s": med["native"]["wall_s"], "exec_wall_s": med["exec"]["wall_s"],
               "overhead_wall_s": statistics.median(diffs),
               "overhead_cpu_s_per_rank": statistics.median(cpu_diffs) / args.ranks,
               "outputs_equal": same, "load_min": min(loads), "load_max": max(loads)}
    print(f"{args.spec}, {args.ranks} ranks, {args.jobs} jobs each, interleaved, load "
          f"{min(loads):.2f}-{max(loads):.2f}: native {med['native']['wall_s']:.3f} s, exec "
          f"{med['exec']['wall_s']:.3f} s; exec - native (median of pairs) "
          f"{summary['overhead_wall_s']:+.3f} s wall, "
          f"{summary['overhead_cpu_s_per_rank']:+.3f} s CPU per rank; outputs equal: {same}")
    if not same:
        raise SystemExit("the program's output differs under dualmpi exec")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"format": "dualmpi-bench-exec-overhead/1",
                       "meta": {"spec": args.spec, "ranks": args.ranks, "jobs": args.jobs,
                                "work": args.work, "cores": os.cpu_count(), "argv": sys.argv},
                       "summary": summary, "runs": runs}, fh, indent=2)
            fh.write("\n")
        print(f"results written to {args.json}")


if __name__ == "__main__":
    main()
