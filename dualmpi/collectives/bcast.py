"""One-to-all broadcast: the dual-cube's Algorithm 1, its metacube generalisation, binomial trees."""

from ..topology import HDN, CubeConnectedCycles, DualCube, Hypercube, MetaCube
from . import hdn_tree
from .greedy import greedy_broadcast_tree
from .dimorder import gray_walk_dims, greedy_tree
from .registry import Collective
from .schedule import ALL, Schedule
from .trees import binomial_pairs, tree_schedule_rounds

__all__ = ["COLLECTIVES", "build", "spanning_tree", "paper_steps", "VARIANTS"]

#: ``corrected`` is what dualmpi runs; ``as-printed`` follows the printed conditions of
#: Algorithm 1 literally (see docs/errata.md) and exists to show why they were corrected;
#: ``sat`` is a fewest-round broadcast found by a SAT solver (needs python-sat, up to 4,096 nodes).
VARIANTS = ("corrected", "as-printed", "sat")


def spanning_tree(topo, root, variant="corrected"):
    """Return the broadcast tree from ``root`` as rounds of ``(sender, receiver)`` pairs."""
    if variant == "sat":
        from .bcast_search import minimum_tree

        return minimum_tree(topo, root)
    if isinstance(topo, DualCube):
        if variant == "as-printed":
            return _dualcube_as_printed(topo, root)
        return _dualcube_tree(topo, root)
    if variant != "corrected":
        raise ValueError(f"variant {variant!r} exists only for the dual-cube broadcast")
    if isinstance(topo, MetaCube):
        return greedy_tree(topo, root, gray_walk_dims(topo))
    if isinstance(topo, HDN):
        return hdn_tree.broadcast_rounds(topo, root)
    if isinstance(topo, CubeConnectedCycles):
        return greedy_broadcast_tree(topo, root)
    if isinstance(topo, Hypercube):
        return _binomial_tree(topo, [root], range(1, topo.degree + 1))
    raise TypeError(f"no broadcast tree for {topo.spec}")


def paper_steps(topo):
    """Return the stated step count: 2r (dual-cube), log p (hypercube), log p + 2^k - 1 (metacube).

    The metacube figure is dualmpi's own design (:mod:`dualmpi.collectives.dimorder`);
    the metacube paper gives no broadcast.
    """
    if isinstance(topo, DualCube):
        return 2 * topo.r
    if isinstance(topo, MetaCube):
        return topo.bits + (1 << topo.k) - 1
    if isinstance(topo, HDN):
        return hdn_tree.theorem3_steps(topo)
    if isinstance(topo, CubeConnectedCycles):  # no paper algorithm: the greedy tree's rounds
        return len(greedy_broadcast_tree(topo, 0))
    return topo.degree


def algorithm_name(topo):
    """Return the name of the broadcast algorithm used on ``topo``."""
    if isinstance(topo, DualCube):
        return "dual-cube Algorithm 1"
    if isinstance(topo, MetaCube):
        return "metacube Gray-walk broadcast (dualmpi)"
    if isinstance(topo, HDN):
        return "hierarchical dual-net Algorithm 2"
    if isinstance(topo, CubeConnectedCycles):
        return "greedy one-port broadcast tree (dualmpi)"
    return "binomial tree"


def build(topo, root=0, variant="corrected"):
    """Return the broadcast :class:`~dualmpi.collectives.schedule.Schedule` from ``root``."""
    tree = spanning_tree(topo, root, variant)
    rounds = tree_schedule_rounds(tree, root, False)
    name = ("fewest-round one-port broadcast found by SAT (dualmpi)" if variant == "sat"
            else algorithm_name(topo))
    return Schedule("bcast", name, topo, root, rounds, len(tree))


def _binomial_tree(topo, roots, dims):
    """Return binomial-tree rounds: along each dim in turn, every current holder sends once."""
    holders = list(roots)
    rounds = []
    for dim in dims:
        pairs = binomial_pairs(topo, holders, dim)
        holders += [v for _, v in pairs]
        if pairs:
            rounds.append(pairs)
    return rounds


def _dualcube_tree(topo, s):
    """Return Algorithm 1's 2r rounds (stage 1: C_s and C_s'; stage 2: every other cluster).

    Each binomial tree is rooted at its own cluster's root: s and s' in stage 1, the
    node reached over the cross-edge in stage 2 (see docs/errata.md, dual-cube E2).
    """
    r = topo.r
    s2 = topo.neighbor(s, r)
    rounds = [[(s, s2)]]
    first = _binomial_tree(topo, [s, s2], range(1, r))
    rounds += first
    stage1 = [s, s2] + [v for pairs in first for _, v in pairs]
    cross = [(u, topo.neighbor(u, r)) for u in stage1 if u not in (s, s2)]
    if cross:
        rounds.append(cross)
        rounds += _binomial_tree(topo, [v for _, v in cross], range(1, r))
    return rounds


def _dualcube_as_printed(topo, s):
    """Return the rounds Algorithm 1's printed conditions give, taken literally.

    Every node whose ids satisfy a printed condition sends, whether or not it holds
    the message; the executor then reports senders without data and nodes left
    without the message.
    """
    r, p = topo.r, topo.num_nodes
    mask = lambda i: (1 << (r - i)) - 1  # noqa: E731 - "the right r-i bits"
    cl, nd = topo.cluster_id, topo.node_id
    rounds = [[(s, topo.neighbor(s, r))]]
    for i in range(1, r):
        rounds.append([(u, topo.neighbor(u, i)) for u in range(p)
                       if cl(u) == cl(s) and nd(u) & mask(i) == nd(s) & mask(i)])
    rounds.append([(u, topo.neighbor(u, r)) for u in range(p) if cl(u) == cl(s) and nd(u) != nd(s)])
    for i in range(1, r):
        rounds.append([(u, topo.neighbor(u, i)) for u in range(p)
                       if cl(u) != cl(s) and nd(u) & mask(i) == nd(s) & mask(i)])
    return [pairs for pairs in rounds if pairs]


def _build(topo, root, variant, q, algorithm):
    return build(topo, root, variant)


#: The broadcast (``MPI_Bcast``): one block ``(root, ALL)`` that every node must end with.
COLLECTIVES = (Collective("bcast", "Bcast", "bcast", _build, rooted=True, faults=True,
                          pipelined=True, variants=VARIANTS, networks=(HDN,),
                          paper_steps=paper_steps,
                          initial=lambda topo, root, u: [(root, ALL)] if u == root else [],
                          expected=lambda topo, root, u: [(root, ALL)]),)
