"""Prefix reductions (scan and exclusive scan) by recursive doubling over routed messages (pure).

Rank ``i`` must end with the reduction of the contributions of ranks ``0..i``
(``scan``) or ``0..i-1`` (``exscan``).  Recursive doubling (Hillis and Steele): in
step ``d`` the node of rank ``i`` sends its partial result to the node of rank
``i + 2^d``, which combines it into its own, so after ``ceil(log2 R)`` steps rank
``i`` holds ranks ``max(0, i - 2^d + 1) .. i``.  Ranks ``i`` and ``i + 2^d`` are rarely
neighbours: each message travels the topology's own route, carried hop by hop by
the nodes in between in transit buffers (they do not combine it), so a step takes as
many hop rounds as its longest route.  The exclusive scan first shifts every
contribution one rank up (one routed step), then scans the shifted values of ranks
``1..R-1``: ``1 + ceil(log2 (R - 1))`` steps.

The operator must be commutative and associative: a rank combines what arrives in
the order it arrives.

References
----------
W. D. Hillis, G. L. Steele, "Data parallel algorithms", CACM 29 (1986): the doubling
prefix sum.  Y. Li, S. Peng, W. Chu, "Efficient collective communications in
dual-cube", J. Supercomputing 28 (2004): prefix sums on these networks.
"""

from .reduce import contributors
from .registry import Collective
from .schedule import ALL, REDUCED, Round, Schedule, Transfer

__all__ = ["COLLECTIVES", "build", "steps"]

#: The block a rank's own contribution starts in, and (exscan) the one its result ends in.
INPUT, RESULT = (REDUCED, ALL), (REDUCED, 0)


def steps(ranks, exclusive=False):
    """Return the doubling steps of a scan over ``ranks`` ranks.

    >>> steps(8), steps(8, exclusive=True), steps(1), steps(2, exclusive=True)
    (3, 4, 0, 1)
    """
    if exclusive:
        return 0 if ranks < 2 else 1 + steps(ranks - 1)
    return max(0, (ranks - 1).bit_length())


def build(topo, q=1, exclusive=False):
    """Return the (exclusive) scan over the ranks of ``q`` nodes each.

    Examples
    --------
    >>> from dualmpi.topology import DualCube
    >>> s = build(DualCube(2))
    >>> s.collective, s.steps, s.num_rounds
    ('scan', 3, 8)
    >>> build(DualCube(2), exclusive=True).collective
    'exscan'
    """
    p = topo.num_nodes
    nodes = list(contributors(p, q))
    R = len(nodes)
    rounds = []
    step = 0
    if exclusive:
        # every contribution one rank up, into the receiver's result block
        pairs = [(nodes[i], nodes[i + 1]) for i in range(R - 1)]
        rounds += _routed(topo, pairs, step, INPUT, RESULT, reduce=False)
        step += 1
        ranks, block = nodes[1:], RESULT
    else:
        ranks, block = nodes, INPUT
    d = 1
    while d < len(ranks):
        pairs = [(ranks[i], ranks[i + d]) for i in range(len(ranks) - d)]
        rounds += _routed(topo, pairs, step, block, block, reduce=True)
        step += 1
        d *= 2
    initial = {c: [INPUT] for c in nodes}
    name = ("exclusive " if exclusive else "") + "recursive-doubling scan over routed messages"
    return Schedule("exscan" if exclusive else "scan", name, topo, None, rounds, step,
                    initial=initial)


def _routed(topo, pairs, step, block, into, reduce):
    """Return the hop rounds of one step: each ``(a, b)`` sends ``block`` along its route."""
    paths = [_path(topo, a, b) for a, b in pairs]
    hops = max((len(path) - 1 for path in paths), default=0)
    rounds = [Round(step=step, hop=h) for h in range(hops)]
    for path, (a, b) in zip(paths, pairs):
        for h in range(len(path) - 1):
            last = h == len(path) - 2
            rounds[h].transfers.append(Transfer(
                path[h], path[h + 1], (block,), header=(a, b, step),
                reduce=reduce and last, into=(into,), transit=True))
    return rounds


def _path(topo, a, b):
    """Return the topology's route from ``a`` to ``b`` (node list, both ends included)."""
    path = [a]
    while path[-1] != b:
        path.append(int(topo.next_hop(path[-1], a, b)))
        if len(path) > topo.num_nodes:
            raise ValueError(f"{topo.spec}: no route from {a} to {b}")
    return path


#: ``MPI_Scan`` and ``MPI_Exscan``: recursive doubling over routed messages.
COLLECTIVES = (
    Collective("scan", "Scan", "reduce-all", lambda topo, root, variant, q, algorithm:
               build(topo, q), combines=True, emulated=False, networks="any"),
    Collective("exscan", "Exscan", "exscan", lambda topo, root, variant, q, algorithm:
               build(topo, q, exclusive=True), combines=True, emulated=False, networks="any"),
)
