"""Collectives on a network with failed links or nodes: the same algorithms, detouring (pure).

* bcast / scatter: the broadcast tree is grown along the fault-free dimension sequence
  over working links only; nodes it misses are reached in completion rounds (each
  holder sends to one working neighbour that lacks the data).
* allgather: exchanges along the fault-free sequence over working links, then rounds
  over every dimension until no node learns anything new.
* alltoall: the same destination order; every message follows the base route while
  it survives, else a shortest detour (:meth:`FaultyTopology.route`).

Failed nodes take no part; pairs the faults cut off are listed as ``undeliverable``.
"""

from .dimorder import broadcast_sequence, gather_sequence, greedy_tree, spread
from .schedule import ALL, Round, Schedule, Transfer
from .trees import tree_schedule_rounds

__all__ = ["build_faulty", "undeliverable"]


def undeliverable(collective, topo, root):
    """Return the ``(source, destination)`` pairs of surviving nodes the faults cut off."""
    alive = [u for u in range(topo.num_nodes) if topo.alive(u)]
    if collective in ("bcast", "scatter"):
        if not topo.alive(root):
            return [(root, v) for v in alive]
        return [(root, v) for v in alive if v != root and not topo.reachable(root, v)]
    return [(s, d) for s in alive for d in alive if s != d and not topo.reachable(s, d)]


def build_faulty(collective, topo, root, base_schedule):
    """Return the fault-tolerant schedule of ``collective`` on the :class:`FaultyTopology`."""
    name = base_schedule.algorithm + " with detours"
    if collective in ("bcast", "scatter"):
        tree = _tree(topo, root, broadcast_sequence(topo.base))
        rounds = tree_schedule_rounds(tree, root, collective == "scatter")
        return Schedule(collective, name, topo, root, rounds, len(rounds))
    if collective == "allgather":
        rounds = _gather(topo, gather_sequence(topo.base))
        return Schedule(collective, name, topo, None, rounds, len(rounds))
    return _alltoall(topo, base_schedule, name)


def _tree(topo, root, dims):
    """Return tree rounds over working links: the dimension sequence, then completion rounds."""
    if not topo.alive(root):
        return []
    rounds = greedy_tree(topo, root, dims)
    held = {root} | {v for pairs in rounds for _, v in pairs}
    while True:
        taken, pairs = set(), []
        for u in sorted(held):
            for v in topo.neighbors(u):
                if v not in held and v not in taken:
                    pairs.append((u, v))
                    taken.add(v)
                    break
        if not pairs:
            return rounds
        held |= taken
        rounds.append(pairs)


def _gather(topo, dims):
    """Return all-to-all broadcast rounds over working links, completed until nothing changes."""
    p = topo.num_nodes
    know = [(1 << u) if topo.alive(u) else 0 for u in range(p)]
    rounds = []

    def exchange(dim):
        pairs = ((u, int(topo.neighbor(u, dim))) for u in range(p))
        sends = spread(know, ((u, v) for u, v in pairs if topo.is_link(u, v)))
        if sends:
            rounds.append(Round(len(rounds), 0, [
                Transfer(u, v, tuple((o, ALL) for o in origins)) for u, v, origins in sends]))
        return bool(sends)

    for dim in dims:
        exchange(dim)
    changed = True
    while changed:
        changed = False
        for dim in range(1, topo.degree + 1):
            changed |= exchange(dim)
    return rounds


def _alltoall(topo, base, name):
    """Re-route the base total exchange's messages over the surviving links, step by step."""
    firsts = {}
    for rnd in base.rounds:
        if rnd.hop == 0:
            firsts.setdefault(rnd.step, []).extend(tr.header for tr in rnd.transfers)
    rounds = []
    for step in sorted(firsts):
        paths = []
        for s, d in firsts[step]:
            if topo.alive(s) and topo.alive(d) and topo.reachable(s, d):
                paths.append(topo.route(s, d))
        if not paths:
            continue
        hops = max(len(path) - 1 for path in paths)
        step_rounds = [Round(step=step, hop=h) for h in range(hops)]
        for path in paths:
            key = (path[0], path[-1])
            for h, (a, b) in enumerate(zip(path, path[1:])):
                step_rounds[h].transfers.append(Transfer(a, b, (key,), header=key))
        rounds += step_rounds
    return Schedule("alltoall", name, topo, None, rounds, base.steps)
