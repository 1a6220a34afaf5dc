"""Plan set-up per rank under MPI: schedule, compile, bind and persistent requests, CPU time.

The issue-13 target: the MC(2,2) total exchange (1,024 nodes, 512 per rank on 2 ranks)
ready to run in under 2 s of CPU per rank.  Run from the repository root::

    python benchmarks/plan_setup.py --jobs 10 --json benchmarks/results/plan_setup_mc22_np2.json

It launches ``--jobs`` separate 2-rank jobs (fresh processes: no cache, memory as a user
starts it), one after the other; in each, both ranks build their plan at the same time as
``dualmpi.Comm`` does and report the CPU time (user + system, ``getrusage``) of each stage.
The JSON keeps every rank's figures, the medians and the load average.
(``benchmarks/plan_compile.py`` times the pure stages in one process against the compiler
before issue 13.)
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys

STAGES = ("schedule", "compile", "bind", "requests")


def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_stime


def child(spec, block):
    """One job: every rank builds its plan; rank 0 prints every rank's stage times (JSON)."""
    from mpi4py import MPI

    import dualmpi
    from dualmpi.engine.layout import Layout, layout_kind

    world = MPI.COMM_WORLD
    net = dualmpi.Comm(world, spec)
    eng, q = net._engine, net.q
    world.Barrier()
    marks = [_cpu()]
    eng.schedule("alltoall")
    marks.append(_cpu())
    plan = eng.rank_plan(world.rank, "alltoall")
    marks.append(_cpu())
    layout = Layout(layout_kind("alltoall"), net.topology.num_nodes, q, block * q * q)
    bound = plan.bind(layout, 1)
    marks.append(_cpu())
    run = eng.transport.prepare(bound, plan, signature=1)
    marks.append(_cpu())
    mine = {name: marks[i + 1][0] - marks[i][0] for i, name in enumerate(STAGES)}
    mine["total"] = marks[-1][0] - marks[0][0]
    mine["system"] = marks[-1][1] - marks[0][1]
    every = world.gather(mine, root=0)
    run.free()
    net.Free()
    if world.rank == 0:
        print(json.dumps(every))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="metacube:k=2,m=2")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--block", type=int, default=64, help="bytes per node pair")
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--json")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.spec, args.block)
        return
    if not args.json:
        parser.error("--json is required")
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    env = dict(os.environ)
    out = subprocess.run(["bash", "-c", '. "$1" && env -0', "bash",
                          os.path.join(root, "launch", "ompi-env.sh")],
                         check=True, capture_output=True).stdout
    env.update(item.split("=", 1) for item in out.decode().split("\0") if "=" in item)
    ranks, load = [], [os.getloadavg()]
    for job in range(args.jobs):
        proc = subprocess.run([mpiexec, "-n", str(args.ranks), sys.executable, "-m", "mpi4py",
                               os.path.abspath(__file__), "--child", "--spec", args.spec,
                               "--block", str(args.block)],
                              env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode:
            raise SystemExit(f"job {job} failed: {proc.stderr.strip()[-500:]}")
        every = json.loads(proc.stdout.strip().splitlines()[-1])
        ranks += every
        print(f"job {job}: " + "; ".join(
            f"rank {r}: " + " ".join(f"{k} {v:.2f}" for k, v in t.items())
            for r, t in enumerate(every)), flush=True)
    load.append(os.getloadavg())
    med = {k: statistics.median(t[k] for t in ranks) for k in ranks[0]}
    totals = sorted(t["total"] for t in ranks)
    result = {"format": "dualmpi-plan-setup/1", "argv": sys.argv, "spec": args.spec,
              "ranks": args.ranks, "jobs": args.jobs, "loadavg_start": load[0],
              "loadavg_end": load[1], "median": med, "total_range": [totals[0], totals[-1]],
              "under_2s": sum(t < 2.0 for t in totals), "rank_runs": len(totals),
              "per_rank": ranks}
    with open(args.json, "w") as fh:
        json.dump(result, fh, indent=2)
        fh.write("\n")
    print("median " + " ".join(f"{k} {v:.2f}" for k, v in med.items()) +
          f"; total {totals[0]:.2f}-{totals[-1]:.2f} s, {result['under_2s']} of {len(totals)} "
          f"under 2 s; results written to {args.json}")


if __name__ == "__main__":
    main()
