"""Calls on new buffers: zero-copy from the first call against copying through the store.

Run under mpiexec, one rank per node, e.g.::

    mpiexec -n 8 python -m mpi4py benchmarks/new_buffers.py dualcube:r=2 \\
        --json benchmarks/results/new_buffers_d2_np8.json

Every timed call is made on buffers the communicator has not seen just before (a pool of
distinct arrays, filled before anything is timed, taken in turn), as a program does that
allocates its buffers per call.  For every collective and piece size it times, interleaved
within each repeat and starting each repeat with the next variant:

* ``dualmpi``: ``dualmpi.Comm`` as shipped: a call whose rank moves at least
  :data:`dualmpi.calls.ZERO_COPY_FIRST` bytes runs on a runner bound to its buffers for that
  call alone (:meth:`dualmpi.Comm._runner`), made and released around the call;
* ``copied``: the same communicator with ``ZERO_COPY_FIRST`` out of reach, so every call
  copies into the working buffer and out of it (the cached runner of its size): what
  dualmpi did before;
* ``native``: the MPI library's own collective on the same buffers.

A repeat times ``k`` calls, each after a barrier, and keeps the largest per-rank mean; the
table gives the median over repeats, the ratios, and the bytes the rank moves.  The results
of both variants are checked against ``native`` first.
"""

import argparse
import os
import statistics
import sys

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dualmpi  # noqa: E402
from dualmpi import calls  # noqa: E402
from engine import time_calls  # noqa: E402
from results_io import run_meta, write_results  # noqa: E402

COLLECTIVES = ("alltoall", "allgather", "bcast", "scatter", "gather", "alltoallv",
               "allgatherv")


def pool(coll, ranks, size, rng, k):
    """Return ``k`` distinct ``(send, recv)`` pairs of one collective and piece size (filled)."""
    out = []
    for _ in range(k):
        if coll == "bcast":
            send, recv = rng.integers(0, 255, size, dtype=np.uint8), None
        elif coll == "scatter":
            send, recv = rng.integers(0, 255, size * ranks, dtype=np.uint8), np.ones(size,
                                                                                    np.uint8)
        elif coll in ("allgather", "allgatherv", "gather"):
            send = rng.integers(0, 255, size, dtype=np.uint8)
            recv = np.ones(size * ranks, np.uint8)
        else:
            send = rng.integers(0, 255, size * ranks, dtype=np.uint8)
            recv = np.ones(size * ranks, np.uint8)
        out.append((send, recv))
    return out


def call_of(target, coll, pairs):
    """Return a function calling ``coll`` on ``target``, on the next pair of ``pairs`` each time.

    Each call gets new array objects (views of the pair's memory, filled before anything is
    timed), kept alive for the next 64 calls so that no id comes back: a call never looks like
    a repeat of the previous one (``dualmpi.Comm`` binds a runner to keep on a repeat).
    """
    ranks = target.Get_size()
    at, alive = [0], []

    def call():
        send, recv = pairs[at[0] % len(pairs)]
        at[0] += 1
        send, recv = send[:], None if recv is None else recv[:]
        alive.append((send, recv))
        del alive[:-64]
        if coll == "bcast":
            target.Bcast(send, 0)
        elif coll == "scatter":
            target.Scatter(send, recv, 0)
        elif coll == "gather":
            target.Gather(send, recv, 0)
        elif coll == "allgather":
            target.Allgather(send, recv)
        elif coll == "alltoall":
            target.Alltoall(send, recv)
        elif coll == "allgatherv":
            target.Allgatherv(send, [recv, [send.size] * ranks])
        else:
            counts = [send.size // ranks] * ranks
            target.Alltoallv([send, counts], [recv, counts])
    return call


def moved(coll, ranks, size, rank):
    """Bytes of the rank's send and receive buffers (what the threshold is compared with)."""
    if coll == "bcast":
        return size
    if coll == "scatter":
        return size * ranks + size if rank == 0 else size
    if coll == "gather":
        return size + size * ranks if rank == 0 else size
    if coll in ("allgather", "allgatherv"):
        return size + size * ranks
    return 2 * size * ranks


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec")
    parser.add_argument("--json", required=True)
    parser.add_argument("--sizes", default="131072,524288,2097152")
    parser.add_argument("--collectives", default=",".join(COLLECTIVES))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=4, help="timed calls per repeat")
    parser.add_argument("--zero-copy-first", type=int, default=calls.ZERO_COPY_FIRST,
                        metavar="BYTES", help="the 'dualmpi' variant's threshold (default: "
                        "dualmpi.calls.ZERO_COPY_FIRST, %(default)s)")
    args = parser.parse_args()
    world = MPI.COMM_WORLD
    me, ranks = world.Get_rank(), world.Get_size()
    load = [os.getloadavg()]
    net = dualmpi.Comm(world, args.spec)
    shipped = calls.ZERO_COPY_FIRST
    first = args.zero_copy_first
    rng = np.random.default_rng(me)
    rows = []
    for coll in args.collectives.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            pairs = pool(coll, ranks, size, rng, args.calls + 1)
            refs = pool(coll, ranks, size, rng, 1)
            variants = {"dualmpi": first, "copied": 1 << 62}
            ok, transient = True, {}
            for name, limit in variants.items():  # check first: both against native
                calls.ZERO_COPY_FIRST = limit
                send, recv = pairs[0]
                if recv is not None:
                    recv[:] = 7
                    refs[0][1][:] = 9
                else:
                    send[:] = 3 + me
                    refs[0][0][:] = 3 + me
                call_of(net, coll, [(send, recv)])()
                transient[name] = bool(getattr(net._last_runner, "transient", False))
                call_of(world, coll, [(send.copy() if recv is not None else refs[0][0],
                                       refs[0][1])])()
                got, want = (recv, refs[0][1]) if recv is not None else (send, refs[0][0])
                ok = ok and (coll in ("gather",) and me != 0 or np.array_equal(got, want))
            calls.ZERO_COPY_FIRST = shipped
            if not world.allreduce(ok, op=MPI.LAND):
                raise SystemExit(f"{coll} {size}: results differ from MPI's")
            fns = {"dualmpi": call_of(net, coll, pairs), "copied": call_of(net, coll, pairs),
                   "native": call_of(world, coll, pairs)}
            names = list(fns)
            times = {n: [] for n in names}
            for rep in range(args.repeats):
                for j in range(len(names)):
                    name = names[(rep + j) % len(names)]
                    calls.ZERO_COPY_FIRST = variants.get(name, shipped)
                    times[name].append(time_calls(fns[name], args.calls, world))
            calls.ZERO_COPY_FIRST = shipped
            med = {n: statistics.median(t) for n, t in times.items()}
            most = world.allreduce(moved(coll, ranks, size, me), op=MPI.MAX)
            row = {"collective": coll, "size": size, "moved_max": most,
                   "zero_copy": world.allreduce(transient["dualmpi"], op=MPI.LOR),
                   "zero_copy_copied": world.allreduce(transient["copied"], op=MPI.LOR),
                   "calls_per_repeat": args.calls, "times": times, "median": med,
                   "dualmpi/copied": med["dualmpi"] / med["copied"],
                   "dualmpi/native": med["dualmpi"] / med["native"],
                   "copied/native": med["copied"] / med["native"]}
            rows.append(row)
            if me == 0:
                print(f"{coll:10s} {size:>8} moved {most / 2**20:7.2f} MiB "
                      f"{'zero-copy' if row['zero_copy'] else 'copies   '}  dualmpi "
                      f"{med['dualmpi'] * 1e6:9.1f} us  copied {med['copied'] * 1e6:9.1f}  "
                      f"native {med['native'] * 1e6:9.1f}  dualmpi/copied "
                      f"{row['dualmpi/copied']:5.2f}  dualmpi/native {row['dualmpi/native']:5.2f}",
                      flush=True)
    net.Free()
    load.append(os.getloadavg())
    if me == 0:
        write_results(args.json, "dualmpi-new-buffers-bench/1",
                      run_meta(args.spec, load, args.repeats, zero_copy_first=first,
                               shipped=shipped), rows)


if __name__ == "__main__":
    main()
