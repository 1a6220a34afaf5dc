"""One collective through :class:`dualmpi.Comm` on pattern buffers: timed (OSU method), verified.

The row :func:`run_collective` returns is what ``dualmpi run``, ``bench`` and ``soak``
report per collective and size (same dict on every rank).
"""

import numpy as np

from ..collectives.schedule import base_collective
from .payload import rank_buffers

__all__ = ["run_collective", "link_violations", "total_avg", "engine_key", "streamed_runner",
           "round_counts", "algorithm_name", "packets_for", "verify_blocks"]


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
    delivered, expected, missing = verify_blocks(net, base, recv, want, root, size)
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
    hop_rounds, steps = round_counts(net, coll, root, piece)
    n = max(iters, 1)
    return {
        "collective": coll,
        "algorithm": algorithm_name(net, coll, root, piece),
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
        "switching": "cut-through" if packets_for(net, coll, piece) > 1 else "store-and-forward",
        "packets": packets_for(net, coll, piece),
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


# -- what the engine ran, and what the rank's nodes hold (from dualmpi.Comm's state) ----------
def engine_key(net, coll):
    """Return ``(collective, algorithm)`` of a CLI collective name."""
    if coll == "ring-allgather":
        return "allgather", "ring"
    if coll == "ring-allreduce":
        return "allreduce-ring", None
    return coll, net.algorithms.get(coll)


def streamed_runner(net, coll, root, nbytes):
    """Return the streamed runner of ``coll`` at ``nbytes`` (no array schedule), or None."""
    if nbytes is None or coll != "alltoall":
        return None
    run = net._runner(coll, root, nbytes)
    return run if run.bound is None else None


def round_counts(net, coll, root=0, nbytes=None):
    """Return ``(hop rounds, steps)`` of collective ``coll`` (root a rank)."""
    run = streamed_runner(net, coll, root, nbytes)
    if run is not None:
        return run.hop_rounds, run.steps_count
    name, algorithm = engine_key(net, coll)
    return net._engine.counts(name, root * net.q, net.variant, algorithm)


def algorithm_name(net, coll, root=0, nbytes=None):
    """Return the name of the algorithm that runs ``coll``."""
    if streamed_runner(net, coll, root, nbytes) is not None:
        from ..engine.arrays import alltoall_name

        return alltoall_name(net.topology) + " (streamed)"
    name, algorithm = engine_key(net, coll)
    return net._engine.schedule(name, root * net.q, net.variant, algorithm).algorithm


def packets_for(net, coll, nbytes, root=0):
    """Return the pieces each block of ``coll`` is cut into at ``nbytes``."""
    name, _ = engine_key(net, coll)
    if name.startswith("allreduce"):
        return 1  # a combined block moves whole
    run = net._runner(name, root, nbytes)
    return 1 if run.bound is None else run.bound.packets


def verify_blocks(net, base, got, want, root=0, block=None):
    """Count the node-level blocks this rank's nodes hold correctly after a collective.

    ``got`` is the user-visible result (the buffer of ``bcast``), ``want`` what it must
    be, ``block`` the node-level block size.  Returns ``(delivered, expected, missing)``
    counting, as the papers do, each block a node must end with but did not start
    with; on a network with faults only the blocks that can still arrive.  With
    several nodes per rank the other nodes' copies (bcast, allgather) are checked in
    the engine's store too.
    """
    from ..collectives.schedule import expected_blocks
    from ..engine.layout import Layout

    topo, q, me, R = net.topology, net.q, net.rank, net.size
    p = topo.num_nodes
    piece = {"bcast": want.size, "scatter": want.size, "allreduce": want.size // max(p, 1)}.get(
        base, want.size // R)
    lay = Layout(base, p, q, piece, root)
    faulty = hasattr(topo, "alive")
    if not faulty:
        mine_root = int(me == root)
        expected = {"bcast": q - mine_root, "scatter": q - mine_root,
                    "allreduce": q * p}.get(base, q * (p - 1))
        if np.array_equal(got, want):
            bad = 0
        elif block and got.size % block == 0 and base in ("alltoall", "allgather"):
            rows = (got.reshape(-1, block) != want.reshape(-1, block)).any(axis=1)
            bad = int(np.count_nonzero(rows))
        else:
            bad = _bad_rows(net, lay, got, want, None)
        wanted = None
    else:
        wanted = [{k for k in expected_blocks(base, topo, root * q, u) if k[0] != u}
                  for u in net.nodes]
        expected = sum(map(len, wanted))
        bad = _bad_rows(net, lay, got, want, wanted)
    if q > 1 and base in ("bcast", "allgather"):
        bad += _node_copies_differ(net, base, piece, root, lay, wanted)
    return expected - bad, expected, bad


def _bad_rows(net, lay, got, want, wanted):
    """Return how many expected node-level blocks of the user's buffer differ."""
    me = net.rank
    node, origin, target, off = lay.outputs(me)
    if lay.collective == "bcast" and me == lay.root:
        node, origin, target, off = lay.inputs(me)
    size = lay.size(origin, target)
    bad = 0
    for u, o, t, a, n in zip(node.tolist(), origin.tolist(), target.tolist(), off.tolist(),
                             size.tolist()):
        if o == u:
            continue
        if wanted is not None and (o, t) not in wanted[u - net.nodes[0]]:
            continue
        if not np.array_equal(got[a:a + n], want[a:a + n]):
            bad += 1
    return bad


def _node_copies_differ(net, base, piece, root, lay, wanted):
    """Return how many blocks the rank's other nodes hold differently from its first node."""
    run = net._runner(base, root, piece)
    plan, bound, store = run.plan, run.bound, run.store
    _, origin, target, _ = lay.outputs(net.rank) if not (base == "bcast" and
                                                           net.rank == root) \
        else lay.inputs(net.rank)
    first = net.nodes[0]
    ref = plan.find(np.full(origin.size, first), origin, target)
    bad = 0
    for i, u in enumerate(net.nodes):
        if u == first:
            continue
        slots = plan.find(np.full(origin.size, u), origin, target)
        for k, (s, r) in enumerate(zip(slots.tolist(), ref.tolist())):
            key = (int(origin[k]), int(target[k]))
            if key[0] == u or (wanted is not None and key not in wanted[i]):
                continue
            if s < 0 or r < 0:
                bad += 1
                continue
            a, b, n = int(bound.slot_offset[s]), int(bound.slot_offset[r]), \
                int(bound.slot_size[s])
            if not np.array_equal(store[a:a + n], store[b:b + n]):
                bad += 1
    return bad

