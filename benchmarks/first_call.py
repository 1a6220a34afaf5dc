"""The first call with many nodes per rank: the whole 2-rank job and the parts of its first call.

Issue 25, item 5: the total exchange of MC(2,2) (1,024 nodes, 512 per rank) and MC(2,3)
(16,384 nodes, 8,192 per rank) on 2 ranks, from ``mpiexec`` to the verified result.
Each job runs, in a fresh ``mpiexec -n 2`` (no cache, as a user starts it)::

    net = dualmpi.Comm(MPI.COMM_WORLD, spec, nodes_per_rank=q)
    net.Alltoall(send, recv)            # the first call: plan (or stream) built, then run
    MPI.COMM_WORLD.Alltoall(send, ref)  # the answer, compared on every rank

and times, per rank, the parts of the first call by wrapping the engine's stages:
``schedule`` (``core.array_schedule``), ``compile`` (``core.compile_rank``), ``bind``
(``RankPlan.bind``), ``setup`` (the transport's ``prepare``: persistent requests and
datatypes, or ``prepare_stream``), and ``run`` (the rest of the first call); then the
median of ``--calls`` repeated calls.  The parent times the whole job (wall, from
``mpiexec`` to its exit) and records the load average before every job.

``--against COMMIT`` runs the package of that commit (``git archive``) in jobs
interleaved with the working tree's (against, now, against, now, ...), so both see the
same load; the table gives medians and the ratio now/against of each.  ``--stream
True,False`` runs the streamed and the compiled total exchange in interleaved jobs (the
ratio streamed/compiled: what choosing one for a first call trades).  Run from the
repository root, one timing benchmark at a time::

    .venv/bin/python benchmarks/first_call.py \\
        --spec metacube:k=2,m=2 --jobs 7 --against <commit> \\
        --json benchmarks/results/first_call_mc22_np2.json
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
PARTS = ("schedule", "compile", "bind", "setup", "run")


def child(spec, block, stream, calls):
    """One job (under mpiexec): the first call's parts, repeated calls, the check; rank 0 prints."""
    start = time.perf_counter()
    load = os.getloadavg()[0]
    import numpy as np
    from mpi4py import MPI

    import dualmpi
    from dualmpi.engine import core, mpi, plan
    from dualmpi.topology import from_spec

    spent = dict.fromkeys(PARTS[:-1], 0.0)
    cpu = dict.fromkeys(PARTS[:-1], 0.0)
    clock = time.process_time

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            t0, c0 = time.perf_counter(), clock()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - t0
                cpu[name] += clock() - c0
        return wrapper

    core.array_schedule = timed("schedule", core.array_schedule)
    core.compile_rank = timed("compile", core.compile_rank)
    plan.RankPlan.bind = timed("bind", plan.RankPlan.bind)
    mpi.MPITransport.prepare = timed("setup", mpi.MPITransport.prepare)
    mpi.MPITransport.prepare_stream = timed("setup", mpi.MPITransport.prepare_stream)

    world = MPI.COMM_WORLD
    size, rank = world.Get_size(), world.Get_rank()
    imported = time.perf_counter()
    topo = from_spec(spec)
    q = topo.num_nodes // size
    piece = block * q * q  # bytes from one rank to one rank
    rng = np.random.default_rng(rank)
    send = rng.integers(0, 256, size * piece, dtype=np.uint8)
    recv = np.zeros_like(send)
    ref = np.zeros_like(send)
    t0 = time.perf_counter()
    net = dualmpi.Comm(world, spec, nodes_per_rank=q, stream=stream)
    t1, c1 = time.perf_counter(), clock()
    net.Alltoall(send, recv)
    t2, c2 = time.perf_counter(), clock()
    world.Alltoall(send, ref)
    ok = bool(np.array_equal(recv, ref))
    times = []
    extra = time.perf_counter()
    for _ in range(calls):
        recv[:] = 0
        world.Barrier()
        a = time.perf_counter()
        net.Alltoall(send, recv)
        times.append(time.perf_counter() - a)
        ok &= bool(np.array_equal(recv, ref))
    native = []
    for _ in range(calls):
        world.Barrier()
        a = time.perf_counter()
        world.Alltoall(send, ref)
        native.append(time.perf_counter() - a)
    extra = time.perf_counter() - extra
    ok = world.allreduce(int(ok), op=MPI.MIN) == 1
    streamed = net._engine._streams(piece)
    net.Free()
    first = t2 - t1
    mine = {"rank": rank, "load_at_start": load, "import_s": imported - start,
            "comm_s": t1 - t0, "first_s": first, **{k + "_s": v for k, v in spent.items()}}
    mine["run_s"] = first - sum(spent.values())
    mine.update({k + "_cpu": v for k, v in cpu.items()})
    mine["first_cpu"] = c2 - c1
    mine["run_cpu"] = c2 - c1 - sum(cpu.values())
    mine["script_cpu"] = clock()
    mine["repeat_s"] = statistics.median(times) if times else None
    mine["native_s"] = statistics.median(native) if native else None
    mine["script_s"] = time.perf_counter() - start
    mine["extra_s"] = extra  # the repeated and native calls after the first
    every = world.gather(mine, root=0)
    if rank == 0:
        print(json.dumps({"ok": ok, "streamed": bool(streamed), "piece_bytes": piece,
                          "package": os.path.dirname(dualmpi.__file__), "ranks": every}))


def job(folder, args, stream):
    """Run one 2-rank job with the package in ``folder``; return its record."""
    venv = os.path.dirname(sys.executable)
    cmd = (f'. "{ROOT}/launch/ompi-env.sh" && exec timeout 900 "{venv}/mpiexec" -n {args.ranks} '
           f'-x PYTHONPATH "{sys.executable}" -m mpi4py "{os.path.abspath(__file__)}" --child '
           f'--spec {args.spec} --block {args.block} --stream {stream} --calls {args.calls}')
    env = dict(os.environ, PYTHONPATH=folder)
    load = os.getloadavg()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(["bash", "-c", cmd], cwd=folder, env=env, capture_output=True,
                         text=True, timeout=1000)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode:
        raise SystemExit(f"job failed ({res.returncode}):\n{res.stdout[-2000:]}"
                         f"{res.stderr[-2000:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    if not out["ok"]:
        raise SystemExit(f"the total exchange differs from MPI's: {out}")
    out.update(wall_s=wall, loadavg=list(load),
               wall_one_call_s=wall - max(x["extra_s"] for x in out["ranks"]),
               job_cpu=after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return out


def slowest(run):
    """The figures of a job's rank whose first call took longest."""
    return max(run["ranks"], key=lambda x: x["first_s"])


def summary(runs):
    """Medians over jobs (each job: its rank with the slowest first call) of every figure.

    ``*_s`` are wall seconds, ``*_cpu`` CPU seconds of that rank (``job_cpu``: every
    process of the job, mpiexec included); ``plan_*``: the parts before the run, summed;
    ``wall_one_call_s``: the job less the repeated and native calls after the first.
    """
    keys = ["comm_s", "first_s"] + [p + "_s" for p in PARTS] + ["repeat_s", "native_s",
                                                                "first_cpu"] + \
        [p + "_cpu" for p in PARTS]
    out = {"wall_s": statistics.median(r["wall_s"] for r in runs),
           "wall_one_call_s": statistics.median(r["wall_one_call_s"] for r in runs),
           "job_cpu": statistics.median(r["job_cpu"] for r in runs)}
    for k in keys:
        out[k] = statistics.median(slowest(r)[k] or 0.0 for r in runs)
    for unit in ("s", "cpu"):
        plan = [sum(slowest(r)[f"{p}_{unit}"] for p in PARTS[:-1]) for r in runs]
        out[f"plan_{unit}"] = statistics.median(plan)
        out[f"plan_{unit}_share"] = statistics.median(
            x / slowest(r)[f"first_{unit}"] for x, r in zip(plan, runs))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="metacube:k=2,m=2")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--block", type=int, default=1, help="bytes per node pair")
    parser.add_argument("--stream", default="auto",
                        help="auto, True or False (dualmpi.Comm's); several, comma-separated, "
                             "run interleaved")
    parser.add_argument("--calls", type=int, default=5, help="repeated calls after the first")
    parser.add_argument("--jobs", type=int, default=7, help="jobs per variant")
    parser.add_argument("--against", help="a commit (or folder) whose package runs interleaved")
    parser.add_argument("--now", help="a commit (or folder) to run instead of the working tree")
    parser.add_argument("--json")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        stream = {"auto": "auto", "True": True, "False": False}[args.stream]
        child(args.spec, args.block, stream, args.calls)
        return
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        def package(what, name):
            """The folder holding the package: the working tree, a folder, or a commit's."""
            if what is None or os.path.isdir(what):
                return what or ROOT
            folder = os.path.join(tmp, name)
            os.mkdir(folder)
            archive = subprocess.run(["git", "-C", ROOT, "archive", what, "dualmpi"],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
            return folder

        packages = {"now": package(args.now, "now")}
        if args.against:
            packages = {"against": package(args.against, "against"), **packages}
        modes = args.stream.split(",")
        variants = {(name if len(modes) == 1 else f"{name}/stream={mode}"): (folder, mode)
                    for name, folder in packages.items() for mode in modes}
        runs = {v: [] for v in variants}
        for j in range(args.jobs):
            for v, (folder, mode) in variants.items():
                r = job(folder, args, mode)
                runs[v].append(r)
                slow = slowest(r)
                print(f"job {j + 1}/{args.jobs} {v:7s} load {r['loadavg'][0]:5.1f}: wall "
                      f"{r['wall_s']:.2f} s (one call {r['wall_one_call_s']:.2f}, CPU "
                      f"{r['job_cpu']:.2f}), first call "
                      f"{slow['first_s']:.3f} s, CPU " + " ".join(
                          f"{k} {slow[k + '_cpu']:.3f}" for k in ("first",) + PARTS) +
                      f"; repeated {slow['repeat_s'] or 0.0:.4f} s, streamed {r['streamed']}",
                      flush=True)
    med = {v: summary(r) for v, r in runs.items()}
    result = {"format": "dualmpi-first-call/1", "command": " ".join(sys.argv), "head": head,
              "against": args.against, "now": args.now or "working tree", "spec": args.spec,
              "ranks": args.ranks,
              "block_bytes": args.block, "stream": args.stream, "jobs": args.jobs,
              "cores": os.cpu_count(),
              "method": "fresh mpiexec per job, variants interleaved; per job the slower rank; "
                        "medians over jobs; wall = mpiexec start to exit",
              "loadavg": {v: [r["loadavg"] for r in rs] for v, rs in runs.items()},
              "median": med, "runs": runs}
    pairs = [(v, v.replace("now", "against", 1)) for v in med if v.startswith("now")]
    if len(modes) == 2:
        pairs += [(v, v.replace(f"stream={modes[0]}", f"stream={modes[1]}"))
                  for v in med if v.endswith(f"stream={modes[0]}")]
    result["ratios"] = {f"{a} / {b}": {k: (med[a][k] / med[b][k] if med[b][k] else None)
                                       for k in med[a] if "share" not in k}
                        for a, b in pairs if b in med and a != b}
    for v, m in med.items():
        loads = [r["loadavg"][0] for r in runs[v]]
        print(f"{v}: median of {len(runs[v])} jobs (load {min(loads):.1f}-{max(loads):.1f}): "
              + ", ".join(f"{k} {m[k]:.3f}" for k in m if m[k] is not None))
    for name, ratio in result["ratios"].items():
        print(f"{name}: " + ", ".join(f"{k} {x:.2f}" for k, x in ratio.items() if x is not None))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
            fh.write("\n")
        print(f"results written to {args.json}")


if __name__ == "__main__":
    main()
