"""Algorithm 2 of the hierarchical dual-net paper: one-to-all broadcast as rounds of link sends."""

from itertools import zip_longest

__all__ = ["broadcast_rounds", "theorem3_steps"]


def theorem3_steps(topo):
    """Return Theorem 3's step count ``2^k T(B) - sum_i 2^i T(SN^(k-i)) + 2^(k+1) - 2``.

    ``T`` of a product is the sum of its factors' one-port broadcast steps
    (dimension by dimension; docs/errata.md, H6).

    >>> from dualmpi.topology import HDN
    >>> theorem3_steps(HDN("2x3x5", 2, "2x3/3x5"))
    19
    """
    return topo.theorem_form(topo.base.formulas()["bcast_steps"], topo.sn_bcast_steps)


def broadcast_rounds(topo, root):
    """Return the broadcast from ``root`` on an HDN as rounds of ``(sender, receiver)`` pairs.

    Phase 1 broadcasts in the root's super-node SN^k (``broadcast(SN^k)``), phase 2
    runs ``HDN_broadcast(HDN(B, k, S), SN^k)``: fill the root's cluster (level by
    level: the super-node of the level below, then recursively), send every
    node's copy over its cross-edge of level k, fill each cluster of the other
    class from the super-node that received it, and send back over the
    cross-edges into the clusters of the root's class.  A broadcast inside B
    goes one factor at a time (a ring from both ends of the informed arc, K_a by
    doubling); factors whose coordinates are already all informed are skipped.
    One-port: a node sends at most one message per round.

    Parameters
    ----------
    topo : HDN
        The network.
    root : int
        The source node.

    Returns
    -------
    list of list of tuple
        Round ``t`` lists the ``(sender, receiver)`` links used in it; every node
        but the root receives exactly once.

    References
    ----------
    Li, Peng, Chu, "Hierarchical Dual-Net", Section 5, Algorithm 2 and Theorem 3.

    Examples
    --------
    >>> from dualmpi.topology import HDN
    >>> h = HDN("2x3x5", 1, "2x3")
    >>> rounds = broadcast_rounds(h, 0)
    >>> len(rounds), sum(map(len, rounds)) == h.num_nodes - 1
    (11, True)
    """
    k = topo.k
    rounds, holders = _spread(topo, [root], topo.J[k - 1])
    more, _ = _level(topo, k, holders, frozenset(topo.J[k - 1]))
    return [pairs for pairs in rounds + more if pairs]


def _spread(topo, holders, factors):
    """Broadcast inside B along ``factors`` in turn; return ``(rounds, all holders)``."""
    rounds, holders = [], list(holders)
    for j in sorted(factors):
        f, w = topo.base.factors[j], topo.weight[("x", j)]
        for offsets in f.bcast_rounds():
            pairs = []
            for h in holders:
                x = topo._digit(h, ("x", j))
                pairs += [(h + ((x + a) % f.size - x) * w, h + ((x + b) % f.size - x) * w)
                          for a, b in offsets]
            rounds.append(pairs)
        holders = [h + ((topo._digit(h, ("x", j)) + t) % f.size - topo._digit(h, ("x", j))) * w
                   for h in holders for t in range(f.size)]
    return rounds, holders


def _fill(topo, level, holders, known):
    """Inform a whole cluster of ``level`` (an HDN(B, level-1, S)) from a B-sub-product over ``known``."""
    if level == 1:
        rest = [j for j in range(len(topo.base.sizes)) if j not in known]
        return _spread(topo, holders, rest)
    first = [j for j in topo.J[level - 2] if j not in known]
    rounds, holders = _spread(topo, holders, first)
    more, holders = _level(topo, level - 1, holders, known | frozenset(first))
    return rounds + more, holders


def _level(topo, level, holders, known):
    """HDN_broadcast(HDN(B, level, S), SN^level): fill, cross, fill the other class, cross back."""
    dim = topo.d0 + level
    rounds, cluster = _fill(topo, level, holders, known)
    here = _cluster_key(topo, level, cluster[0])
    cross = [(u, int(topo.neighbor(u, dim))) for u in cluster]
    groups = {}
    for _, v in cross:
        groups.setdefault(_cluster_key(topo, level, v), []).append(v)
    filled = [_fill(topo, level, group, frozenset(topo.J[level - 1])) for group in groups.values()]
    parallel = [sum(pairs, []) for pairs in zip_longest(*(r for r, _ in filled), fillvalue=[])]
    back = [(u, int(topo.neighbor(u, dim))) for _, nodes in filled for u in nodes]
    back = [(u, v) for u, v in back if _cluster_key(topo, level, v) != here]
    everyone = cluster + [u for _, nodes in filled for u in nodes] + [v for _, v in back]
    return rounds + [cross] + parallel + [back], everyone


def _cluster_key(topo, level, u):
    """Return ``(class, cluster id)`` of ``u`` at ``level``."""
    return (topo._digit(u, ("c", level)), topo._digit(u, ("U", level)))
