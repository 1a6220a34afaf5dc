"""One-to-all broadcast: the dual-cube's Algorithm 1 and the hypercube's binomial tree."""

from ..topology import DualCube, Hypercube
from .schedule import Schedule
from .trees import binomial_pairs, tree_schedule_rounds

__all__ = ["build", "spanning_tree", "paper_steps", "VARIANTS"]

#: ``corrected`` is what dualmpi runs; ``as-printed`` follows the printed conditions of
#: Algorithm 1 literally (see docs/errata.md) and exists to show why they were corrected.
VARIANTS = ("corrected", "as-printed")


def spanning_tree(topo, root, variant="corrected"):
    """Return the broadcast tree from ``root`` as rounds of ``(sender, receiver)`` pairs."""
    if isinstance(topo, DualCube):
        if variant == "as-printed":
            return _dualcube_as_printed(topo, root)
        return _dualcube_tree(topo, root)
    if isinstance(topo, Hypercube):
        return _binomial_tree(topo, [root], range(1, topo.degree + 1))
    raise TypeError(f"no broadcast tree for {topo.spec}")


def paper_steps(topo):
    """Return the number of steps the paper states: 2r (dual-cube), n = log p (hypercube)."""
    return 2 * topo.r if isinstance(topo, DualCube) else topo.degree


def build(topo, root=0, variant="corrected"):
    """Return the broadcast :class:`~dualmpi.collectives.schedule.Schedule` from ``root``."""
    tree = spanning_tree(topo, root, variant)
    name = "dual-cube Algorithm 1" if isinstance(topo, DualCube) else "binomial tree"
    return Schedule("bcast", name, topo, root, tree_schedule_rounds(tree, root, False), len(tree))


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
