"""Pipelining benchmark: each collective with its blocks cut into 1, 2, 4, 8 and 16 pieces.

Run under mpiexec, one rank per node, e.g.::

    mpiexec -n 8 python -m mpi4py benchmarks/packets.py dualcube:r=2 --size 1048576 \\
        --json benchmarks/results/packets_dualcube_r2_1MiB.json

For every collective it builds one ``dualmpi.Comm`` per piece count (``packets=P``) and
times them interleaved, each repeat starting with the next piece count (1 2 4 8 16,
2 4 8 16 1, ...): ``calls`` calls, each after a barrier, the largest per-rank mean kept;
the table gives the median over
repeats relative to whole blocks (P=1).  The results are checked against mpi4py's
before anything is timed.  This is what ``packets="auto"`` (``dualmpi.comm.PACKETS_ABOVE``,
``PACKET_BYTES``, ``PIPELINED``) was chosen from: docs/performance.md.
"""

import argparse
import os
import statistics

import numpy as np
from mpi4py import MPI

import dualmpi
from results_io import run_meta, write_results

PIECES = (1, 2, 4, 8, 16)


def calls_for(net, coll, size, ranks, rng):
    """Return ``(call, check)``: a call of ``coll`` on ``net`` and a check against mpi4py's."""
    world = MPI.COMM_WORLD
    if coll == "bcast":
        buf = rng.integers(0, 255, size, dtype=np.uint8)
        ref = buf.copy()
        return (lambda: net.Bcast(buf, 0)), (lambda: (world.Bcast(ref, 0),
                                                      np.array_equal(buf, ref))[1])
    if coll == "scatter":
        send = rng.integers(0, 255, size * ranks, dtype=np.uint8)
        recv, ref = np.zeros(size, np.uint8), np.zeros(size, np.uint8)
        return (lambda: net.Scatter(send, recv, 0)), (lambda: (world.Scatter(send, ref, 0),
                                                               np.array_equal(recv, ref))[1])
    if coll == "allgather":
        send = rng.integers(0, 255, size, dtype=np.uint8)
        recv, ref = np.zeros(size * ranks, np.uint8), np.zeros(size * ranks, np.uint8)
        return (lambda: net.Allgather(send, recv)), (lambda: (world.Allgather(send, ref),
                                                              np.array_equal(recv, ref))[1])
    send = rng.integers(0, 255, size * ranks, dtype=np.uint8)
    recv, ref = np.zeros(size * ranks, np.uint8), np.zeros(size * ranks, np.uint8)
    return (lambda: net.Alltoall(send, recv)), (lambda: (world.Alltoall(send, ref),
                                                         np.array_equal(recv, ref))[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec")
    parser.add_argument("--size", type=int, required=True, help="block size in bytes")
    parser.add_argument("--json", required=True)
    parser.add_argument("--collectives", default="bcast,scatter,allgather,alltoall")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=4)
    args = parser.parse_args()
    world = MPI.COMM_WORLD
    me, ranks = world.Get_rank(), world.Get_size()
    load = [os.getloadavg()]
    nets = {p: dualmpi.Comm(world, args.spec, packets=p) for p in PIECES}
    rng = np.random.default_rng(me)
    rows = []
    for coll in args.collectives.split(","):
        calls = {}
        for p, net in nets.items():
            call, check = calls_for(net, coll, args.size, ranks, rng)
            call()
            if not world.allreduce(int(check()), op=MPI.MIN):
                raise SystemExit(f"{coll} with {p} pieces differs from native MPI")
            call()
            calls[p] = call
        times = {p: [] for p in calls}
        order = list(calls.items())
        for rep in range(args.repeats):
            for p, call in order[rep % len(order):] + order[:rep % len(order)]:
                total = 0.0
                for _ in range(args.calls):
                    world.Barrier()
                    t0 = MPI.Wtime()
                    call()
                    total += MPI.Wtime() - t0
                times[p].append(world.allreduce(total / args.calls, op=MPI.MAX))
        med = {p: statistics.median(ts) for p, ts in times.items()}
        rows.append({"collective": coll, "size": args.size, "times": times, "median": med,
                     "relative": {p: med[p] / med[1] for p in med},
                     "packets": {p: nets[p]._last_runner.bound.packets for p in med}})
        if me == 0:
            rel = "  ".join(f"{p}: {med[p] / med[1]:.2f}" for p in med)
            print(f"{args.spec} {coll:9s} {args.size:>8}  whole blocks {med[1] * 1e6:8.1f} us  "
                  f"{rel}", flush=True)
    for net in nets.values():
        net.Free()
    load.append(os.getloadavg())
    if me == 0:
        write_results(args.json, "dualmpi-packets-bench/1",
                      run_meta(args.spec, load, args.repeats, calls=args.calls), rows)


if __name__ == "__main__":
    main()
