"""What a blocking collective costs beside a nonblocking one in flight (MPI's progress rule).

Each call of a repeat is ``req = comm.Ibcast(x, 0)`` and a blocking ``Bcast`` (or
``Allreduce``) on other buffers, made either *after* ``req.Wait()`` or *beside* the request
(the blocking call first, then ``req.Wait()``): beside, every wait of the blocking call also
advances the broadcast (``dualmpi/engine/inflight.py``; the compiled loop calls back into
Python).  The same program runs on ``MPI.COMM_WORLD`` (native).  The four variants are
interleaved in each repeat; a repeat times ``--calls`` calls (the slowest rank's mean);
medians over ``--repeats``.  Results are checked against native MPI's.

    mpiexec -n 2 python -m mpi4py benchmarks/beside.py hypercube:n=1 --repeats 9 \\
        --json benchmarks/results/beside_q1_np2.json
"""

import argparse
import json
import os
import sys

import numpy as np
from mpi4py import MPI

import dualmpi

WORLD = MPI.COMM_WORLD
RANK = WORLD.Get_rank()


def _run(comm, coll, size, beside, calls):
    """Time ``calls`` calls of the pattern on ``comm``; return (slowest rank's mean, results)."""
    x = np.full(size, 3 if RANK == 0 else 0, np.uint8)
    y = np.full(size, 5 if RANK == 0 else 0, np.uint8)
    z = np.zeros(size, np.uint8)
    send = np.full(size, RANK % 251, np.uint8)

    def blocking():
        if coll == "Bcast":
            comm.Bcast(y, 0)
        else:
            comm.Allreduce(send, z, MPI.MAX)

    WORLD.Barrier()
    t = MPI.Wtime()
    for _ in range(calls):
        req = comm.Ibcast(x, 0)
        if beside:
            blocking()
            req.Wait()
        else:
            req.Wait()
            blocking()
    t = (MPI.Wtime() - t) / calls
    return WORLD.allreduce(t, op=MPI.MAX), (x.copy(), y.copy(), z.copy())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", help="the network, e.g. hypercube:n=1 or dualcube:r=2")
    parser.add_argument("--sizes", default="8,1024,65536", help="bytes, comma-separated")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=50, help="calls timed per repeat")
    parser.add_argument("--json", required=True, help="where the results go")
    args = parser.parse_args()
    net = dualmpi.Comm(WORLD, args.spec)
    rows, ok = [], True
    for coll in ("Bcast", "Allreduce"):
        for size in (int(s) for s in args.sizes.split(",")):
            variants = [(name, comm, beside) for name, comm in (("dualmpi", net), ("native", WORLD))
                        for beside in (False, True)]
            times = {f"{name}/{'beside' if beside else 'after'}": [] for name, _, beside in variants}
            results = {}
            for name, comm, beside in variants:  # warm, and the results compared
                results[name, beside] = _run(comm, coll, size, beside, 2)[1]
            for key in results:
                ok &= all(np.array_equal(a, b) for a, b in zip(results[key],
                                                                results["native", key[1]]))
            for _ in range(args.repeats):
                for name, comm, beside in variants:
                    times[f"{name}/{'beside' if beside else 'after'}"].append(
                        _run(comm, coll, size, beside, args.calls)[0])
            med = {k: float(np.median(v)) for k, v in times.items()}
            row = {"collective": coll, "size": size, "times": times, "median": med,
                   "dualmpi beside/after": med["dualmpi/beside"] / med["dualmpi/after"],
                   "native beside/after": med["native/beside"] / med["native/after"],
                   "dualmpi/native after": med["dualmpi/after"] / med["native/after"],
                   "dualmpi/native beside": med["dualmpi/beside"] / med["native/beside"]}
            rows.append(row)
            if RANK == 0:
                print(f"{coll:9} {size:>7} B  after: dualmpi {med['dualmpi/after'] * 1e6:8.1f} "
                      f"native {med['native/after'] * 1e6:7.1f} us   beside: dualmpi "
                      f"{med['dualmpi/beside'] * 1e6:8.1f} native {med['native/beside'] * 1e6:7.1f}"
                      f" us   beside/after: dualmpi {row['dualmpi beside/after']:.2f} native "
                      f"{row['native beside/after']:.2f}", flush=True)
    ok = bool(WORLD.allreduce(int(ok), op=MPI.MIN))
    if RANK == 0:
        load = [round(x, 2) for x in os.getloadavg()]
        with open(args.json, "w") as f:
            json.dump({"format": "dualmpi-beside-bench/1", "spec": args.spec,
                       "ranks": WORLD.Get_size(), "repeats": args.repeats, "calls": args.calls,
                       "load": load, "results_match_native": ok, "rows": rows}, f, indent=1)
        print(f"results written to {args.json}" + ("" if ok else " (RESULTS DIFFER FROM MPI'S)"))
    net.Free()
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
