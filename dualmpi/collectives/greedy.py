"""Generic one-port schedules for networks without a paper algorithm (cube-connected cycles).

Three constructions that need only the topology's links and routes:

* :func:`greedy_broadcast_tree` — a broadcast tree grown round by round: every
  informed node, nearest to the root first, sends to an uninformed neighbour not yet
  chosen in that round, preferring the one with the most uninformed neighbours.
  The scatter moves personalized blocks down the same tree.
* :func:`cycling_exchange_rounds` — all-to-all broadcast: round ``t`` uses dimension
  ``dims[t mod len(dims)]``, and every node sends its neighbour along it every block
  the neighbour lacks, until every node holds every block.
* :func:`shift_destination` — total exchange: in step ``t`` node ``s`` sends to
  ``(s + t + 1) mod p`` along the topology's shortest route.
"""

from ..topology.analysis import distances_from, neighbor_table
from .dimorder import spread

__all__ = ["greedy_broadcast_tree", "cycling_exchange_rounds", "shift_destination"]


def greedy_broadcast_tree(topo, root):
    """Return broadcast tree rounds of ``(sender, receiver)`` pairs, one send per node per round.

    Parameters
    ----------
    topo : Topology
        A connected network.
    root : int
        The node that holds the data.

    Returns
    -------
    list of list of tuple
        Round ``t`` lists the pairs of round ``t``; every node but the root receives once.

    References
    ----------
    Y. Li, S. Peng, W. Chu, "Hierarchical Dual-Net", Table 2 (CCC as a compared network);
    the tree is dualmpi's own greedy construction, not a paper's algorithm.

    Examples
    --------
    >>> from dualmpi.topology import CubeConnectedCycles
    >>> rounds = greedy_broadcast_tree(CubeConnectedCycles(3), 0)
    >>> len(rounds), sum(len(r) for r in rounds)
    (7, 23)
    """
    nbr = neighbor_table(topo).tolist()
    dist = distances_from(topo, root).tolist()
    held = {root}
    rounds = []
    while len(held) < topo.num_nodes:
        taken = set()
        pairs = []
        for u in sorted(held, key=lambda x: (dist[x], x)):
            cands = [v for v in nbr[u] if v not in held and v not in taken]
            if cands:
                v = max(cands, key=lambda c: sum(w not in held and w not in taken for w in nbr[c]))
                taken.add(v)
                pairs.append((u, v))
        if not pairs:
            raise ValueError(f"{topo.spec} is not connected: the broadcast cannot reach every node")
        held |= taken
        rounds.append(pairs)
    return rounds


def cycling_exchange_rounds(topo, dims):
    """Return all-to-all broadcast rounds ``(sender, receiver, origins)`` cycling through ``dims``.

    Knowledge is kept as integer bit sets; a round sends only what the receiver lacks, and
    rounds in which nothing moves are dropped.

    >>> from dualmpi.topology import CubeConnectedCycles
    >>> rounds = cycling_exchange_rounds(CubeConnectedCycles(3), (1, 2, 3))
    >>> len(rounds), max(len(o) for _, _, o in rounds[-1])
    (8, 2)
    """
    p = topo.num_nodes
    nbr = neighbor_table(topo).tolist()
    full = (1 << p) - 1
    know = [1 << u for u in range(p)]
    rounds = []
    idle = 0
    t = 0
    while any(k != full for k in know):
        d = dims[t % len(dims)]
        t += 1
        sends = spread(know, ((u, nbr[u][d - 1]) for u in range(p)))
        if sends:
            rounds.append(sends)
            idle = 0
        else:
            idle += 1
            if idle > len(dims):
                raise ValueError(f"{topo.spec}: the dimensions {dims} do not spread every block")
    return rounds


def shift_destination(topo):
    """Return ``dest(s, t) = (s + t + 1) mod p``: every node sends once to every other in p-1 steps.

    >>> from dualmpi.topology import CubeConnectedCycles
    >>> shift_destination(CubeConnectedCycles(3))(23, 0)
    0
    """
    p = topo.num_nodes
    return lambda s, t: (s + t + 1) % p
