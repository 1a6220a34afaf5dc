"""One collective through :class:`dualmpi.Comm` on pattern buffers: timed (OSU method), verified.

The row :func:`run_collective` returns is what ``dualmpi run``, ``bench`` and ``soak``
report per collective and size (same dict on every rank).
"""

import numpy as np

from ..collectives.schedule import base_collective
from .payload import rank_buffers

__all__ = ["run_collective", "link_violations", "total_avg"]


def run_collective(net, coll, size, root=0, iters=1, warmup=0, salt=0):
    """Time ``coll`` on ``net`` with pattern buffers and verify every byte; same dict on every rank.

    OSU method: warm-up calls, a barrier before each timed call (outside the timer);
    the receive buffer is cleared before the last call, whose result is checked.
    ``t_min``/``t_avg``/``t_max`` are over ranks of each rank's mean time; ``t_calls``
    has, per timed call, the slowest rank's time (when that call was complete) and
    ``t_med`` is their median.
    """
    from mpi4py import MPI

    R, me = net.Get_size(), net.Get_rank()
    base = base_collective(coll)
    # ``size`` is the node-level block; a rank's piece holds q (q * q) of them
    q = net.q
    piece = size * {"scatter": q, "allgather": q, "alltoall": q * q}.get(base, 1)
    send, want = rank_buffers(base, R, me, root, piece, salt)
    if base == "bcast":
        recv, call = send, (lambda: net.Bcast(send, root))
    else:
        recv = np.zeros(want.size, dtype=np.uint8)
        call = {"scatter": lambda: net.Scatter(send, recv, root),
                "allgather": lambda: net.Allgather(send, recv),
                "alltoall": lambda: net.Alltoall(send, recv),
                "allreduce": lambda: net.Allreduce(send, recv)}[base]
    pristine = send.copy() if base == "bcast" and me == root else None
    times = []
    for it in range(warmup + iters):
        if it == warmup:
            net.reset_stats()
        if it == warmup + iters - 1:
            if base == "bcast":
                send[:] = pristine if me == root else 0
            else:
                recv[:] = 0
        net._control_barrier()
        t0 = MPI.Wtime()
        call()
        t1 = MPI.Wtime()
        if it >= warmup:
            times.append(t1 - t0)
    st = net.stats()
    delivered, expected, missing = net._verify_blocks(base, recv, want, root, size)
    bad_links = link_violations(net.topology, st["links"])
    local = np.array([delivered, expected, missing, st["messages"], st["bytes"],
                      st["checksum_failures"], bad_links or 0, bad_links is None], dtype=np.int64)
    total = np.zeros_like(local)
    net._control_allreduce(local, total, MPI.SUM)
    avg = float(np.mean(times)) if times else 0.0
    spread = np.array([avg, -avg, avg])
    top = np.zeros(3)
    net._control_allreduce(spread, top, MPI.MAX)
    # per timed call, the slowest rank: when that call of the collective was complete
    slowest = np.zeros(len(times))
    net._control_allreduce(np.asarray(times, dtype=float), slowest, MPI.MAX)
    hop_rounds, steps = net._counts(coll, root, piece)
    n = max(iters, 1)
    return {
        "collective": coll,
        "algorithm": net._algorithm(coll, root, piece),
        "spec": net.topology.spec,
        "root": root * net.q if base in ("bcast", "scatter") else None,
        "size": size,
        "ranks": R,
        "nodes_per_rank": net.q,
        "verified": bool(total[0] == total[1] and total[2] == 0 and total[5] == 0),
        "delivered": int(total[0]),
        "expected": int(total[1]),
        "missing": int(total[2]),
        "checksum_failures": int(total[5]),
        # per iteration, rounded up; None when some rank's engine kept totals only
        "link_violations": None if total[7] else -(-int(total[6]) // n),
        "rounds": steps,
        "hop_rounds": hop_rounds,
        "messages": int(total[3]) // n,
        "bytes": int(total[4]) // n,
        "iters": iters,
        "t_min": float(-top[1]),
        "t_avg": float(total_avg(net, avg)),
        "t_max": float(top[0]),
        "t_calls": [float(t) for t in slowest],
        "t_med": float(np.median(slowest)) if len(times) else 0.0,
        "switching": "cut-through" if net._packets_for(coll, piece) > 1 else "store-and-forward",
        "packets": net._packets_for(coll, piece),
        "shape": None if net.options["shape"] is None else dict(zip(("ts", "tw", "th"),
                                                                    net.options["shape"])),
    }


def total_avg(net, avg):
    """Return the mean over ranks of each rank's mean time."""
    from mpi4py import MPI

    out = np.zeros(1)
    net._control_allreduce(np.array([avg]), out, MPI.SUM)
    return out[0] / net.Get_size()


def link_violations(topo, links):
    """Return the messages in ``links`` between nodes that are not linked in ``topo``, or None.

    ``links`` is :meth:`dualmpi.Comm.stats`'s ``{(u, v): (messages, bytes)}``: what the
    engine sent per directed pair of nodes.  A pair that is not a working link of ``topo``
    (failed links included) is a violation.  None when the engine kept totals only (a
    streamed total exchange counts under ``("all", "all")``): then nothing was checked.

    >>> from dualmpi.topology import DualCube
    >>> link_violations(DualCube(2), {(0, 1): (2, 16), (0, 7): (3, 24)})
    3
    >>> link_violations(DualCube(2), {("all", "all"): (5, 40)}) is None
    True
    """
    if ("all", "all") in links:
        return None
    return sum(m for (u, v), (m, _) in links.items() if m and not topo.is_link(u, v))
