"""Allreduce: every rank gets the reduction of all contributions (pure).

Four algorithms, each built from a schedule the network already has:

``tree``
    The reduction to node 0 (:mod:`dualmpi.collectives.reduce`, the broadcast tree
    reversed), then node 0's broadcast of the result: ``2 B`` steps for a broadcast
    of ``B`` steps, each moving the whole vector (``2 B m t_w``).
``exchange``
    Recursive doubling on the hypercube: along each dimension both ends swap their
    partial results and combine them: ``n`` steps of ``m`` words (``n m t_w``).  Only
    where the all-to-all broadcast swaps whole, disjoint sets (the hypercube).
``rsag``
    Reduce-scatter then allgather along the all-to-all broadcast: the vector is cut
    into ``p`` segments, segment ``j`` is reduced towards node ``j`` along the
    all-to-all broadcast run backwards (every first arrival of block ``j`` turned into
    a combining send), then the all-to-all broadcast spreads the reduced segments.
    ``2 S`` steps for an all-to-all broadcast of ``S`` steps; every node sends
    ``(p - 1) m / p`` words in each half on the dual-cube, metacube and hypercube.
``ring``
    The same on the ring all-to-all broadcast along a Hamiltonian cycle:
    ``2 (p - 1)`` steps of ``m / p`` words.

:func:`choose` picks by the cost model T = steps t_s + words t_w (a rule documented
with the step and word counts in docs/algorithms.md).

References
----------
Y. Li, S. Peng, W. Chu, "Efficient collective communications in dual-cube", J.
Supercomputing 28 (2004), section on all-to-all broadcast (Algorithm 2) and its use for
reduction.  R. Thakur, R. Rabenseifner, W. Gropp, "Optimization of collective
communication operations in MPICH", IJHPCA 19 (2005): reduce-scatter + allgather and
recursive doubling.
"""

from ..topology import Hypercube
from .reduce import build as build_reduce
from .reduce import contributors
from .registry import Collective
from .schedule import ALL, REDUCED, Round, Schedule, Transfer

__all__ = ["COLLECTIVES", "ALGORITHMS", "segments", "build", "available", "choose", "cost", "costs", "MODEL_TS",
           "MODEL_TW", "reduce_scatter_allgather", "table"]

#: The allreduce algorithms (see the module docstring).
ALGORITHMS = ("tree", "exchange", "rsag", "ring")

#: Start-up and per-byte time :func:`choose` prices the algorithms with: the order of a
#: message on one shared-memory host (docs/algorithms.md, "Allreduce").
MODEL_TS = 20e-6
MODEL_TW = 1e-9


def available(topo):
    """Return the allreduce algorithms that run on ``topo``.

    >>> from dualmpi.topology import DualCube, Hypercube
    >>> available(Hypercube(3)), available(DualCube(2))
    (('tree', 'exchange', 'rsag', 'ring'), ('tree', 'rsag', 'ring'))
    """
    from .ring import default_cycle
    from ..errors import DualmpiError

    from . import SUPPORTED

    out = ["tree"]
    if type(topo) is Hypercube:
        out.append("exchange")
    if isinstance(topo, SUPPORTED):  # the networks with an all-to-all broadcast
        out.append("rsag")
    try:
        default_cycle(topo)
        out.append("ring")
    except (DualmpiError, ValueError):
        pass
    return tuple(out)


def build(topo, algorithm="rsag", q=1, variant="corrected"):
    """Return the allreduce schedule of ``algorithm`` for the contributions of every ``q``-th node.

    Blocks: ``(REDUCED, ALL)`` (the whole vector) for ``tree`` and ``exchange``,
    segments ``(REDUCED, j)`` for ``rsag`` and ``ring``.

    Examples
    --------
    >>> from dualmpi.topology import DualCube, Hypercube
    >>> s = build(DualCube(2), "rsag")
    >>> s.num_rounds, s.steps
    (8, 8)
    >>> build(Hypercube(3), "exchange").num_messages
    24
    """
    from ..errors import DualmpiError

    if algorithm not in available(topo):
        raise DualmpiError(f"no allreduce algorithm {algorithm!r} on {topo.spec} (choose from "
                           f"{', '.join(available(topo))})")
    p = topo.num_nodes
    givers = contributors(p, q)
    if algorithm == "tree":
        down = build_reduce(topo, 0, q, variant)
        from . import build_schedule

        up = build_schedule("bcast", topo, 0, variant)
        rounds = down.rounds + [_renamed(r, lambda b: (REDUCED, ALL)) for r in up.rounds]
        name = f"reduce to node 0 and broadcast ({up.algorithm})"
        initial = {c: [(REDUCED, ALL)] for c in givers}
        router = up.router
    elif algorithm == "exchange":
        rounds = _exchange(topo, givers)
        name = "recursive doubling"
        router = None
        initial = {c: [(REDUCED, ALL)] for c in givers}
    else:
        from . import build_schedule

        if algorithm == "rsag":
            forward = build_schedule("allgather", topo, None, variant)
        else:
            forward = build_schedule("ring-allgather", topo)
        rounds, initial = reduce_scatter_allgather(forward, q)
        name = f"reduce-scatter and allgather along the {forward.algorithm}"
        router = forward.router
    rounds = [r for r in rounds if r.transfers]
    for step, rnd in enumerate(rounds):
        rnd.step = step
    return Schedule(f"allreduce-{algorithm}", name, topo, None, rounds, len(rounds), router,
                    initial=initial)


def reduce_scatter_allgather(forward, q=1):
    """Return ``(rounds, initial)``: all-to-all broadcast ``forward`` run backwards, then forwards.

    Backwards it is a reduce-scatter
    (:func:`~dualmpi.collectives.reduce_scatter.reduce_scatter_rounds`), forwards it
    spreads the reduced segments; ``initial`` gives the segments every ``q``-th node
    starts with.
    """
    from .reduce_scatter import reduce_scatter_rounds

    back, initial = reduce_scatter_rounds(forward, q)
    return back + [_renamed(r, lambda b: (REDUCED, b[0])) for r in forward.rounds], initial


def cost(schedule):
    """Return ``(steps, words)``: the cost model's counts, ``words`` per byte of the vector.

    ``words`` sums, over the rounds, the largest share of the vector one node sends in
    the round (a segment of ``rsag``/``ring`` is ``1/p`` of it), so a vector of ``m``
    bytes costs ``steps t_s + words m t_w``.

    >>> from dualmpi.topology import Hypercube
    >>> cost(build(Hypercube(3), "exchange")), cost(build(Hypercube(3), "rsag"))
    ((3, 3.0), (6, 1.75))
    """
    p = schedule.topo.num_nodes
    steps, words = 0, 0.0
    for rnd in schedule.rounds:
        if not rnd.transfers:
            continue
        steps += 1
        sent = {}
        for tr in rnd.transfers:
            share = sum(1.0 if b[1] == ALL else 1.0 / p for b in tr.blocks)
            sent[tr.src] = sent.get(tr.src, 0.0) + share
        words += max(sent.values())
    return steps, words


def costs(topo, q=1):
    """Return ``{algorithm: (steps, words)}`` of every algorithm :func:`choose` considers.

    >>> from dualmpi.topology import DualCube
    >>> costs(DualCube(2))
    {'tree': (8, 8.0), 'rsag': (8, 1.75)}
    """
    return {alg: cost(build(topo, alg, q)) for alg in available(topo) if alg != "ring"}


def choose(nbytes, table, ts=MODEL_TS, tw=MODEL_TW):
    """Return the algorithm of ``table`` (:func:`costs`) with the least ``steps ts + words m tw``.

    The ring is only run when asked for by name (its step count grows with ``p``).

    >>> from dualmpi.topology import DualCube, Hypercube
    >>> q3, d2 = costs(Hypercube(3)), costs(DualCube(2))
    >>> choose(8, q3), choose(1 << 20, q3), choose(8, d2), choose(1 << 20, d2)
    ('exchange', 'rsag', 'rsag', 'rsag')
    """
    best = None
    for alg, (steps, words) in table.items():
        t = steps * ts + words * nbytes * tw
        if best is None or t < best[0] - 1e-15:
            best = (t, alg)
    return best[1]


def _renamed(rnd, rename):
    """Return a copy of forward round ``rnd`` with its blocks renamed (plain stores)."""
    return Round(rnd.step, rnd.hop, [Transfer(tr.src, tr.dst, tuple(rename(b) for b in tr.blocks),
                                              tr.header) for tr in rnd.transfers])


def _exchange(topo, givers):
    """Recursive doubling: along each dimension both ends swap and combine their partials."""
    p = topo.num_nodes
    defined = set(givers)
    rounds = []
    for dim in range(1, topo.degree + 1):
        rnd = Round(step=0, hop=0)
        got = set()
        for u in range(p):
            v = int(topo.neighbor(u, dim))
            if u in defined:
                rnd.transfers.append(Transfer(u, v, ((REDUCED, ALL),), reduce=v in defined))
                got.add(v)
        defined |= got
        rounds.append(rnd)
    return rounds



def table(specs):
    """Return markdown rows: per network, the steps and words of every algorithm and of scan.

    Each cell is ``steps / words`` (``words`` per byte of the vector); reduce and scan
    give their paper steps and, for scan, the hop rounds its routes take.
    """
    from ..topology import from_spec
    from . import reduce as reduce_mod
    from . import scan as scan_mod

    rows = ["| network | p | reduce | tree | exchange | rsag | ring | scan (hop rounds) |",
            "|---|---|---|---|---|---|---|---|"]
    for spec in specs:
        topo = from_spec(spec)
        cells = []
        red = reduce_mod.build(topo, 0)
        cells.append("%d / %d" % cost(red))
        for alg in ALGORITHMS:
            if alg in available(topo):
                steps, words = cost(build(topo, alg))
                cells.append(f"{steps} / {words:.3g}")
            else:
                cells.append("—")
        sc = scan_mod.build(topo)
        cells.append(f"{sc.steps} ({sc.num_rounds})")
        rows.append(f"| {spec} | {topo.num_nodes} | " + " | ".join(cells) + " |")
    return rows


if __name__ == "__main__":  # pragma: no cover - prints docs/algorithms.md's table
    import sys

    print("\n".join(table(sys.argv[1:] or ["hypercube:n=3", "dualcube:r=2", "hypercube:n=5",
                                           "dualcube:r=3", "hypercube:n=6", "metacube:k=2,m=1",
                                           "ccc:n=3"])))


def _build(topo, root, variant, q, algorithm):
    return build(topo, algorithm or "rsag", q, variant)


def segments(topo, root, u):
    """Return the ``p`` segments ``(REDUCED, j)`` every node holds when every node contributes.

    The blocks of a schedule that gives no ``initial`` (``ring-allreduce``): every node
    starts with its contribution to each segment and ends with each segment reduced.
    """
    return [(REDUCED, j) for j in range(topo.num_nodes)]


#: ``MPI_Allreduce``, by one of :data:`ALGORITHMS` (the engine's ``allreduce-<algorithm>``).
#: Its layout depends on the algorithm; without one (a schedule built by hand, every node
#: contributing to every segment) it is ``allreduce``.
COLLECTIVES = (Collective("allreduce", "Allreduce", "allreduce", _build, combines=True,
                          emulated=False, networks="any", initial=segments, expected=segments,
                          layouts={"tree": "reduce-all", "exchange": "reduce-all",
                                   "rsag": "reduce-segments", "ring": "reduce-segments"}),)
