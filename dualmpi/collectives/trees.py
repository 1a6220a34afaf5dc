"""Spanning trees built from binomial trees and cross-edges, shared by broadcast and scatter."""

from .schedule import ALL, Round, Transfer

__all__ = ["binomial_pairs", "tree_schedule_rounds", "descendants"]


def binomial_pairs(topo, holders, dim):
    """Return the ``(sender, receiver)`` pairs when every node in ``holders`` sends along ``dim``."""
    return [(u, int(topo.neighbor(u, dim))) for u in holders]


def descendants(tree_rounds):
    """Return ``{node: set of nodes in its subtree}`` for a tree given as rounds of (parent, child)."""
    children = {}
    for pairs in tree_rounds:
        for u, v in pairs:
            children.setdefault(u, []).append(v)
    memo = {}

    def below(u):
        if u not in memo:
            out = {u}
            for v in children.get(u, ()):
                out |= below(v)
            memo[u] = out
        return memo[u]

    for pairs in tree_rounds:
        for u, v in pairs:
            below(u)
            below(v)
    return memo


def tree_schedule_rounds(tree_rounds, root, personalized):
    """Return :class:`Round` objects moving the root's data down a spanning tree.

    For a broadcast every edge carries the one block ``(root, ALL)``; for a scatter
    the edge ``parent -> child`` carries the blocks ``(root, x)`` of every ``x`` in the
    child's subtree, so message sizes shrink down the tree.
    """
    below = descendants(tree_rounds) if personalized else None
    rounds = []
    for step, pairs in enumerate(tree_rounds):
        rnd = Round(step=step, hop=0)
        for u, v in pairs:
            if personalized:
                blocks = tuple((root, x) for x in sorted(below[v]))
            else:
                blocks = ((root, ALL),)
            rnd.transfers.append(Transfer(u, v, blocks))
        rounds.append(rnd)
    return rounds
