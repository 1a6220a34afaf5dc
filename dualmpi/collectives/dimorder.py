"""Dimension sequences for the metacube's broadcast-type collectives (pure).

The dual-cube's Algorithms 1 and 2 generalise to MC(k, m) as a fixed sequence of
dimensions, one per round: a node can change field ``m[c]`` only inside a cluster
of class ``c``, so the sequence walks the classes in Gray-code order with a
binomial tree (all ``m`` cluster dimensions) in each.  For k = 1 it is exactly the
dual-cube's sequence (cross-edge, r-1 cluster dimensions, cross-edge, r-1 cluster
dimensions); for k = 0 it is the hypercube's binomial tree.
"""

__all__ = [
    "spread",
    "gray_walk_dims",
    "allgather_dims",
    "broadcast_sequence",
    "gather_sequence",
    "greedy_tree",
    "exchange_rounds",
]


def gray_walk_dims(topo):
    """Return the broadcast dimension sequence of MC(k, m).

    First a binomial tree over the class k-cube (dimensions ``m+1 .. m+k``), so a
    copy sits in every class; then the cluster dimensions ``1 .. m``; then, for each
    Gray-code step ``j = 1 .. 2^k - 1``, the cross dimension it flips followed by the
    cluster dimensions again.  Every class's copy walks the classes in Gray order, so
    every field is varied once: ``log2(p) + 2^k - 1`` rounds in all.
    """
    m, k = topo.m, topo.k
    cluster = list(range(1, m + 1))
    dims = [m + 1 + b for b in range(k)] + cluster
    for j in range(1, 1 << k):
        flipped = (j ^ (j >> 1)) ^ ((j - 1) ^ ((j - 1) >> 1))
        dims += [m + flipped.bit_length()] + cluster
    return dims


def allgather_dims(topo):
    """Return the all-to-all broadcast sequence: :func:`gray_walk_dims` with its segments reversed.

    A block reaches a node along a time-respecting path, so running the broadcast
    sequence backwards gathers instead of spreading.  Inside a segment (all cluster
    dimensions, or all class dimensions) the order does not matter and stays
    ascending, which for k = 1 gives the dual-cube's Algorithm 2 exactly: cluster
    dimensions, cross-edge, cluster dimensions, cross-edge.
    """
    m, k = topo.m, topo.k
    cluster = list(range(1, m + 1))
    dims = list(cluster)
    for j in reversed(range(1, 1 << k)):
        flipped = (j ^ (j >> 1)) ^ ((j - 1) ^ ((j - 1) >> 1))
        dims += [m + flipped.bit_length()] + cluster
    return dims + [m + 1 + b for b in range(k)]


def broadcast_sequence(topo):
    """Return the dimension sequence whose greedy tree is the topology's broadcast tree.

    Dual-cube: Algorithm 1 (cross-edge, cluster dimensions, cross-edge, cluster
    dimensions); hypercube: dimensions 1..n; metacube: :func:`gray_walk_dims`.
    """
    from ..topology import DualCube, MetaCube

    if isinstance(topo, DualCube):
        cluster = list(range(1, topo.r))
        return [topo.r] + cluster + [topo.r] + cluster
    if isinstance(topo, MetaCube):
        return gray_walk_dims(topo)
    return list(range(1, topo.degree + 1))


def gather_sequence(topo):
    """Return the all-to-all broadcast dimension sequence (Algorithm 2 for the dual-cube)."""
    from ..topology import DualCube, MetaCube

    if isinstance(topo, DualCube):
        cluster = list(range(1, topo.r))
        return cluster + [topo.r] + cluster + [topo.r]
    if isinstance(topo, MetaCube):
        return allgather_dims(topo)
    return list(range(1, topo.degree + 1))


def greedy_tree(topo, root, dims):
    """Return tree rounds: along each dim in turn, every holder sends to a neighbour lacking the data.

    Rounds that would send nothing are dropped.  Each node receives at most once.  Only
    working links are used (:meth:`Topology.is_link`), so the same code grows the tree on
    a network with failed links.
    """
    held = {root}
    rounds = []
    for dim in dims:
        pairs = []
        for u in sorted(held):
            v = int(topo.neighbor(u, dim))
            if v not in held and topo.is_link(u, v):  # a failed link (faults) carries nothing
                pairs.append((u, v))
        held.update(v for _, v in pairs)
        if pairs:
            rounds.append(pairs)
    return rounds


def exchange_rounds(topo, dims):
    """Return all-to-all broadcast rounds: along each dim every node sends what its neighbour lacks.

    Each round is a list of ``(sender, receiver, origins)``; ``origins`` are the nodes
    whose blocks the message carries.  Knowledge is kept as integer bit sets.
    """
    p = topo.num_nodes
    know = [1 << u for u in range(p)]
    rounds = []
    for dim in dims:
        sends = spread(know, ((u, int(topo.neighbor(u, dim))) for u in range(p)))
        if sends:
            rounds.append(sends)
    missing = [u for u in range(p) if know[u] != (1 << p) - 1]
    if missing:
        raise ValueError(f"dimension sequence leaves node {missing[0]} without every block")
    return rounds


def spread(know, pairs):
    """One exchange round: over each ``(u, v)`` of ``pairs`` node ``u`` sends what ``v`` lacks.

    ``know`` (a list of integer bit sets, one per node) is updated after the whole round;
    returns the round as ``(sender, receiver, origins)``, messages that carry nothing left out.

    >>> know = [0b01, 0b10]
    >>> spread(know, [(0, 1), (1, 0)]), know
    ([(0, 1, [0]), (1, 0, [1])], [3, 3])
    """
    sends = []
    for u, v in pairs:
        extra = know[u] & ~know[v]
        if extra:
            sends.append((u, v, extra))
    for u, v, extra in sends:
        know[v] |= extra
    return [(u, v, _bits(extra)) for u, v, extra in sends]


def _bits(x):
    """Return the positions of the one bits of ``x``, ascending."""
    out = []
    base = 0
    while x:
        chunk = x & 0xFFFFFFFFFFFFFFFF
        while chunk:
            low = chunk & -chunk
            out.append(base + low.bit_length() - 1)
            chunk ^= low
        x >>= 64
        base += 64
    return out
