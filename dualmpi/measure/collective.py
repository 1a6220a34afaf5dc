"""One collective through :class:`dualmpi.Comm` on pattern buffers: timed (OSU method), verified.

The row :func:`run_collective` returns is what ``dualmpi run``, ``bench`` and ``soak``
report per collective and size (same dict on every rank).  Any registered collective of
:func:`runnable` runs: its buffers come from its layout (:mod:`dualmpi.measure.payload`)
and the blocks each node must end with from its description
(:func:`~dualmpi.collectives.schedule.expected_blocks`).
"""

import numpy as np

from ..collectives.registry import get, names
from ..collectives.schedule import expected_blocks
from ..engine.layout import COLLECTIVE_LAYOUTS
from .payload import call_of, layout_for, rank_buffers

__all__ = ["runnable", "run_collective", "link_violations", "total_avg", "engine_key",
           "round_counts", "algorithm_name", "packets_of", "verify_blocks"]


def runnable():
    """Return the registered collectives :func:`run_collective` runs, in registration order.

    A fixed-count call of ``dualmpi.Comm`` (or an algorithm of one: ``runs_as``) whose
    buffers a layout describes, that combines nothing and whose description says which
    blocks each node ends with.  (The reductions' results depend on the operator and,
    for scans, on the rank: not yet here.)

    >>> runnable()
    ('bcast', 'scatter', 'gather', 'allgather', 'alltoall', 'ring-allgather', 'ring-allreduce')
    """
    out = []
    for name in names():
        desc, (call, _) = get(name), call_of(name)
        if (call.mpi is not None and desc.counts == "fixed" and not desc.combines
                and desc.expected is not None and desc.layout in COLLECTIVE_LAYOUTS):
            out.append(name)
    return tuple(out)


def run_collective(net, coll, size, root=0, iters=1, warmup=0, salt=0):
    """Time ``coll`` on ``net`` with pattern buffers and verify every byte; same dict on every rank.

    ``coll`` is one of :func:`runnable`, ``size`` the node-level block (a rank's piece
    holds as many blocks as its nodes take part in), ``root`` a rank.  OSU method:
    warm-up calls, a barrier before each timed call (outside the timer); the receive
    buffer is cleared before the last call, whose result is checked.
    ``t_min``/``t_avg``/``t_max`` are over ranks of each rank's mean time; ``t_calls``
    has, per timed call, the slowest rank's time (when that call was complete) and
    ``t_med`` is their median.  Every call runs on a runner (never once without one:
    :meth:`Engine.once <dualmpi.engine.core.Engine.once>`), whose store holds the blocks of
    the rank's other nodes that the check reads.
    """
    engine = net._engine
    engine.runs_once, before = False, engine.runs_once
    try:
        return _run_collective(net, coll, size, root, iters, warmup, salt)
    finally:
        engine.runs_once = before


def _run_collective(net, coll, size, root, iters, warmup, salt):
    """:func:`run_collective`'s calls, timing and check."""
    from mpi4py import MPI

    R, me = net.Get_size(), net.Get_rank()
    desc, _ = call_of(coll)
    lay = layout_for(coll, R, net.q, size, root)
    bufs = rank_buffers(lay, me, desc.mpi, salt)
    method, args = getattr(net, desc.mpi), bufs.args(desc.mpi, root)
    times = []
    for it in range(warmup + iters):
        if it == warmup:
            net.reset_stats()
        if it == warmup + iters - 1:
            bufs.reset()
        net._control_barrier()
        t0 = MPI.Wtime()
        method(**args)
        t1 = MPI.Wtime()
        if it >= warmup:
            times.append(t1 - t0)
    run = net._last_runner  # the runner of the calls just made
    st = net.stats()
    delivered, expected, missing = verify_blocks(net, coll, lay, bufs, run)
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
    hop_rounds, steps = round_counts(run)
    packets = packets_of(run)
    n = max(iters, 1)
    return {
        "collective": coll,
        "algorithm": algorithm_name(net, coll, root, run),
        "spec": net.topology.spec,
        "root": root * net.q if get(coll).rooted else None,
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
        "switching": "cut-through" if packets > 1 else "store-and-forward",
        "packets": packets,
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
    """Return ``(engine collective, algorithm)`` running registered collective ``coll`` on ``net``.

    A collective that is another one's algorithm (``runs_as``) runs as that one; an
    algorithm that maps the buffers its own way (the description's ``layouts``) is named
    in the engine's collective (``allreduce-ring``).
    """
    desc, algorithm = call_of(coll)
    if algorithm is None:
        algorithm = net.algorithms.get(desc.name)
    if desc.layouts and algorithm is not None:
        return f"{desc.name}-{algorithm}", None
    return desc.name, algorithm


def round_counts(run):
    """Return ``(hop rounds, steps)`` of the collective ``run`` (an engine runner) runs."""
    if run.bound is None:  # streamed: counted when it was set up
        return run.hop_rounds, run.steps_count
    return run.hop_rounds, run.steps


def algorithm_name(net, coll, root, run):
    """Return the name of the algorithm that runs ``coll`` (``root`` a rank) by ``run``."""
    if run.bound is None:  # the engine streams only the total exchange
        from ..engine.arrays import alltoall_name

        return alltoall_name(net.topology) + " (streamed)"
    name, algorithm = engine_key(net, coll)
    return net._engine.schedule(name, root * net.q, net.variant, algorithm).algorithm


def packets_of(run):
    """Return the pieces each block is cut into by ``run`` (1: whole; a streamed run: 1)."""
    return 1 if run.bound is None else int(run.bound.packets)


def verify_blocks(net, coll, lay, bufs, run):
    """Count the node-level blocks this rank's nodes hold correctly after a call of ``coll``.

    Returns ``(delivered, expected, missing)``, counting, as the papers do, each block a
    node must end with but did not start with (``expected_blocks`` of the description;
    on a network with faults only the blocks that can still arrive).  A block in the
    user's buffer (``lay``'s rows of this rank, ``bufs.got``) is compared with
    ``bufs.want``; a block a node holds only in the engine's store (the copies of a
    broadcast block on a rank's other nodes) is compared there, in ``run``'s store, with
    what the user's buffer must hold for the rank's first node.
    """
    me, first = net.rank, net.nodes[0]
    topo = net.topology
    got, want = bufs.got, bufs.want
    code = _Keys(topo.num_nodes)
    # the blocks each node must end with, besides its own
    wanted = []
    for u in net.nodes:
        keys = np.asarray(expected_blocks(coll, topo, lay.root_node, u), dtype=np.int64)
        keys = keys.reshape(-1, 2)
        keys = keys[keys[:, 0] != u]
        wanted.append(code(np.full(len(keys), u), keys[:, 0], keys[:, 1]))
    wanted = np.concatenate(wanted) if wanted else np.zeros(0, np.int64)
    # where the user's buffer holds blocks of this rank's nodes
    parts = [lay.outputs(me)] + ([lay.inputs(me)] if bufs.one else [])
    node, origin, target, offset = (np.concatenate(c) for c in zip(*parts))
    size = lay.size(origin, target)
    rows = code(node, origin, target)
    at = code.find(rows, wanted)
    bad = 0
    if not (got is not None and not hasattr(topo, "alive") and np.array_equal(got, want)):
        i = at[at >= 0]
        bad += _differ(got, offset[i], want, offset[i], size[i])
    store = wanted[at < 0]  # held only in the engine's store: compare with the first node's
    if store.size:
        u, o, t = code.split(store)
        ref = code.find(rows, code(np.full(u.size, first), o, t))
        if run is None or run.bound is None or want is None:
            return wanted.size - store.size - bad, wanted.size, bad + store.size
        slots = run.plan.find(u, o, t)
        ok = (slots >= 0) & (ref >= 0)
        ok[ok] = run.bound.slot_size[slots[ok]] == size[ref[ok]]
        bad += int(np.count_nonzero(~ok))
        bad += _differ(run.store, run.bound.slot_offset[slots[ok]], want, offset[ref[ok]],
                       size[ref[ok]])
    return wanted.size - bad, wanted.size, bad


class _Keys:
    """Blocks ``(node, origin, target)`` of a network of ``p`` nodes as one int64 each."""

    def __init__(self, p):
        self.w = p + 2  # origin and target run from REDUCED (-2) to p - 1

    def __call__(self, node, origin, target):
        node, origin, target = (np.asarray(c, dtype=np.int64) for c in (node, origin, target))
        return (node * self.w + origin + 2) * self.w + target + 2

    def split(self, keys):
        """Return ``(node, origin, target)`` of ``keys``."""
        rest, target = np.divmod(keys, self.w)
        node, origin = np.divmod(rest, self.w)
        return node, origin - 2, target - 2

    @staticmethod
    def find(rows, keys):
        """Return, per key, the index of the row that holds it, or -1."""
        order = np.argsort(rows, kind="stable")
        pos = np.searchsorted(rows[order], keys)
        hit = pos < rows.size
        hit[hit] = rows[order][pos[hit]] == keys[hit]
        out = np.full(keys.size, -1, dtype=np.int64)
        out[hit] = order[pos[hit]]
        return out


#: Bytes compared per numpy step (rows of one size at a time).
_COMPARE_CHUNK = 1 << 20


def _differ(a, a_off, b, b_off, size):
    """Return how many ``a[a_off[i]:+size[i]]`` differ from ``b[b_off[i]:+size[i]]``."""
    a_off, b_off, size = (np.asarray(c, dtype=np.int64) for c in (a_off, b_off, size))
    bad = 0
    for n in np.unique(size).tolist():
        if n == 0:
            continue
        rows = np.flatnonzero(size == n)
        step = max(1, _COMPARE_CHUNK // n)
        for i in range(0, rows.size, step):
            part = rows[i:i + step]
            span = np.arange(n)
            differ = (a[a_off[part, None] + span] != b[b_off[part, None] + span]).any(axis=1)
            bad += int(np.count_nonzero(differ))
    return bad
