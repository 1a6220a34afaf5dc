"""Balanced cuts: the bisection width, exact on small networks and bounded above on larger ones.

The bisection width is the fewest links whose removal splits the nodes into two halves of
``floor(p/2)`` and ``ceil(p/2)``.  :func:`best_bisection` finds balanced cuts with the
Fiduccia-Mattheyses refinement of Kernighan and Lin's swap heuristic, restarted from random and
from breadth-first halves: any cut it reports is a real cut (an **upper bound** on the
width), checked by counting its links.  :func:`exact_bisection` proves the minimum by branch
and bound for networks of a few dozen nodes.
"""

import random

from .analysis import neighbor_table

__all__ = ["cut_size", "fm_refine", "best_bisection", "exact_bisection"]


def _adjacency(topo):
    """Return the neighbour lists (without self-loops; repeated links kept once)."""
    table = neighbor_table(topo).tolist()
    return [sorted({v for v in row if v != u}) for u, row in enumerate(table)]


def cut_size(adj, side):
    """Return the number of links whose ends lie on different sides."""
    return sum(side[u] != side[v] for u in range(len(adj)) for v in adj[u] if u < v)


def fm_refine(adj, side, max_passes=50):
    """Improve a balanced partition in place by Fiduccia-Mattheyses passes; return its cut.

    A pass moves every node once, alternating between the sides (so the halves stay
    balanced after every second move), each time the unlocked node of largest gain, then
    keeps the best balanced prefix of the moves.  Passes repeat while they improve.
    """
    p = len(adj)
    dmax = max((len(a) for a in adj), default=0)
    cut = cut_size(adj, side)
    for _ in range(max_passes):
        gain = [sum(1 if side[v] != side[u] else -1 for v in adj[u]) for u in range(p)]
        buckets = [[set() for _ in range(2 * dmax + 1)] for _ in range(2)]
        for u in range(p):
            buckets[side[u]][gain[u] + dmax].add(u)
        top = [2 * dmax, 2 * dmax]
        locked = [False] * p
        counts = [side.count(0), side.count(1)]
        moves, cur, best, best_len = [], cut, cut, 0
        turn = 0 if counts[0] >= counts[1] else 1
        while True:
            b = buckets[turn]
            while top[turn] >= 0 and not b[top[turn]]:
                top[turn] -= 1
            if top[turn] < 0:
                break
            u = b[top[turn]].pop()
            locked[u] = True
            cur -= gain[u]
            old = side[u]
            side[u] = 1 - old
            counts[old] -= 1
            counts[1 - old] += 1
            moves.append(u)
            for v in adj[u]:
                if locked[v]:
                    continue
                buckets[side[v]][gain[v] + dmax].discard(v)
                gain[v] += 2 if side[v] == old else -2
                buckets[side[v]][gain[v] + dmax].add(v)
                top[side[v]] = max(top[side[v]], gain[v] + dmax)
            if abs(counts[0] - counts[1]) <= 1 and cur < best:
                best, best_len = cur, len(moves)
            turn = 0 if counts[0] > counts[1] else 1 if counts[1] > counts[0] else 1 - turn
        for u in moves[best_len:]:
            side[u] = 1 - side[u]
        if best >= cut:
            return cut
        cut = best
    return cut


def _bfs_order(adj, start):
    """Return every node in breadth-first order from ``start`` (unreached nodes last)."""
    order, seen = [start], {start}
    for u in order:
        for v in adj[u]:
            if v not in seen:
                seen.add(v)
                order.append(v)
    return order + [u for u in range(len(adj)) if u not in seen]


def _bfs_half(adj, start):
    """Return the side vector whose side 0 is the first half of a BFS order from ``start``."""
    p = len(adj)
    order = _bfs_order(adj, start)
    side = [1] * p
    for u in order[: p // 2]:
        side[u] = 0
    return side


def best_bisection(topo, restarts=20, seed=0, starts=()):
    """Return ``(cut, side)``: the smallest balanced cut found (an upper bound on the bisection width).

    Parameters
    ----------
    topo : Topology
        The network.
    restarts : int
        Random balanced starting partitions, each refined by :func:`fm_refine`; breadth-first
        halves from a few nodes are refined too.
    seed : int
        Seed of the random starts (the result is reproducible).
    starts : iterable of sequences
        Further starting partitions (0/1 per node), e.g. a paper's own partition.

    Returns
    -------
    tuple
        The cut size (counted on the returned partition) and the partition (0/1 per node,
        halves of ``floor(p/2)`` and ``ceil(p/2)`` nodes).

    References
    ----------
    B. W. Kernighan, S. Lin, "An efficient heuristic procedure for partitioning graphs",
    Bell Syst. Tech. J. 49 (1970); C. M. Fiduccia, R. M. Mattheyses, "A linear-time
    heuristic for improving network partitions", DAC 1982.

    Examples
    --------
    >>> from dualmpi.topology import Hypercube
    >>> best_bisection(Hypercube(5), restarts=4)[0]
    16
    """
    adj = _adjacency(topo)
    p = len(adj)
    rng = random.Random(seed)
    best = None
    candidates = [list(s) for s in starts]
    candidates += [_bfs_half(adj, u) for u in sorted({0, p // 3, p // 2, p - 1})]
    for _ in range(restarts):
        side = [0] * (p // 2) + [1] * (p - p // 2)
        rng.shuffle(side)
        candidates.append(side)
    for side in candidates:
        if sorted(side) != [0] * (p // 2) + [1] * (p - p // 2) and sorted(side) != (
                [0] * (p - p // 2) + [1] * (p // 2)):
            raise ValueError("a starting partition is not balanced")
        cut = fm_refine(adj, side)
        if best is None or cut < best[0]:
            best = (cut, side)
    cut, side = best
    if cut != cut_size(adj, side):
        raise AssertionError("cut bookkeeping disagrees with the count")  # pragma: no cover
    return best


def exact_bisection(topo, upper=None, budget=5_000_000):
    """Return the exact bisection width by branch and bound, or None when ``budget`` is exceeded.

    Nodes are placed in breadth-first order (node 0 fixed on side 0); a branch is cut when
    the links already cut reach the best cut known (``upper``, by default
    :func:`best_bisection`'s).

    >>> from dualmpi.topology import Hypercube
    >>> exact_bisection(Hypercube(4))
    8
    """
    adj = _adjacency(topo)
    p = len(adj)
    if p < 2:
        return 0
    if upper is None:
        upper = best_bisection(topo, restarts=10)[0]
    order = _bfs_order(adj, 0)
    pos = {u: i for i, u in enumerate(order)}
    earlier = [[v for v in adj[u] if pos[v] < pos[u]] for u in order]
    half = (p // 2, p - p // 2)
    side = [None] * p
    best = [upper + 1]
    steps = [0]

    def place(i, counts, cut):
        steps[0] += 1
        if steps[0] > budget:
            raise TimeoutError
        if cut >= best[0]:
            return
        if i == p:
            best[0] = cut
            return
        u = order[i]
        for s in (0, 1):
            if counts[s] < max(half):
                extra = sum(side[v] != s for v in earlier[i])
                side[u] = s
                counts[s] += 1
                if counts[0] <= max(half) and counts[1] <= max(half):
                    place(i + 1, counts, cut + extra)
                counts[s] -= 1
                side[u] = None

    side[0] = 0
    try:
        place(1, [1, 0], 0)
    except TimeoutError:
        return None
    return best[0] if best[0] <= upper else upper
