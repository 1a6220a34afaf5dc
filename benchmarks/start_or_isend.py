"""A small send started from its persistent request or made with ``MPI_Isend``, on 2 ranks.

Run under mpiexec on an even number of ranks (each pair of ranks ``r``, ``r ^ 1`` exchanges),
e.g.::

    mpiexec -n 2 python -m mpi4py benchmarks/start_or_isend.py \\
        --json benchmarks/results/start_or_isend_np2.json

Builds ``benchmarks/start_or_isend.c`` with the MPI library's ``mpicc`` (the engine's own
build, :func:`dualmpi.engine.cloop.build`) and, for every message size and segment count,
times ``--iters`` exchanges in C — ``MPI_Start`` of a persistent receive, the send
(``MPI_Start`` of a persistent send, or ``MPI_Isend``), ``MPI_Waitall`` — the two ways
alternating (``start isend``, ``isend start``, ...), ``--repeats`` times; the table gives
the median time of an exchange (the slowest rank's) and ``isend/start``.  A message of
several segments is a hindexed datatype at absolute addresses, its last segment 8 bytes
(the engine's message of a payload and its trailer).  This is what
``dualmpi.engine.mpi.IMMEDIATE`` (sends up to which the compiled loop uses ``MPI_Isend``)
was chosen from: docs/performance.md, "Small sends made with MPI_Isend".

With ``--packed`` it times instead, for segment counts of 2 or more, the message sent as its
hindexed datatype against packed (its segments copied into one contiguous slot and sent as
bytes, received whole into a slot and copied out to the segments), both with ``MPI_Isend``,
alternating; the table gives ``packed/hindexed``: what ``dualmpi.engine.mpi.PACK_SMALL`` rests
on (docs/performance.md, "Small messages packed")::

    mpiexec -n 2 python -m mpi4py benchmarks/start_or_isend.py --packed \\
        --json benchmarks/results/packed_small_np2.json
"""

import argparse
import ctypes
import os
import statistics
from pathlib import Path

from mpi4py import MPI

from dualmpi.engine import cloop
from results_io import run_meta, write_results

SOURCE = Path(__file__).with_name("start_or_isend.c")


def load():
    """Return the built ``start_or_isend.c`` (ctypes), or raise SystemExit saying why not."""
    lib, why = cloop.build(cloop.Library("start_or_isend", SOURCE,
                                         ("bench_exchange", "bench_packed"),
                                         "start-or-isend benchmark", "nothing to time"))
    if lib is None:
        raise SystemExit(f"start_or_isend.py: cannot build {SOURCE.name}: {why}")
    lib.bench_exchange.restype = ctypes.c_double
    lib.bench_exchange.argtypes = (ctypes.c_int,) * 4
    lib.bench_packed.restype = ctypes.c_double
    lib.bench_packed.argtypes = (ctypes.c_int,) * 4
    return lib


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--sizes", default="8,64,128,248,256,264,512,1024,4096",
                        help="message bytes (at least 8 per segment)")
    parser.add_argument("--segments", default="1,2,9")
    parser.add_argument("--iters", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--packed", action="store_true",
                        help="time hindexed against packed messages (segments of 2 or more)")
    args = parser.parse_args()
    world = MPI.COMM_WORLD
    if world.Get_size() % 2:
        raise SystemExit("start_or_isend.py: run on an even number of ranks (pairs exchange)")
    lib = load()
    load_avg = [os.getloadavg()]
    rows = []
    for segments in (int(s) for s in args.segments.split(",")):
        for size in (int(s) for s in args.sizes.split(",")):
            if size < 8 * segments:
                continue
            if args.packed and segments < 2:
                continue
            ways = ("hindexed", "packed") if args.packed else ("start", "isend")
            bench = lib.bench_packed if args.packed else lib.bench_exchange
            times = {way: [] for way in ways}
            for k in range(args.repeats):
                order = ways if k % 2 == 0 else ways[::-1]
                for way in order:
                    t = bench(size, segments, args.iters, way == ways[1])
                    worst = world.allreduce(t, op=MPI.MAX)
                    if world.allreduce(t, op=MPI.MIN) < 0:
                        raise SystemExit(f"start_or_isend.py: MPI failed at {size} bytes")
                    times[way].append(worst)
            med = {way: statistics.median(ts) for way, ts in times.items()}
            ratio = f"{ways[1]}/{ways[0]}"
            rows.append({"bytes": size, "segments": segments, "times": times, "median": med,
                         ratio: med[ways[1]] / med[ways[0]]})
            if world.rank == 0:
                print(f"{size:>6} B {segments:>2} segments  {ways[0]} "
                      f"{med[ways[0]] * 1e6:6.3f} us  {ways[1]} {med[ways[1]] * 1e6:6.3f} us  "
                      f"{ratio} {med[ways[1]] / med[ways[0]]:5.2f}", flush=True)
    load_avg.append(os.getloadavg())
    if world.rank == 0:
        write_results(args.json, "dualmpi-start-or-isend/1",
                      run_meta(None, load_avg, args.repeats, iters=args.iters,
                               packed=args.packed), rows)


if __name__ == "__main__":
    main()
