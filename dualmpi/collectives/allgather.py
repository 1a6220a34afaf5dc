"""All-to-all broadcast: the dual-cube's Algorithm 2, its metacube generalisation, recursive doubling."""

from ..topology import CubeConnectedCycles, DualCube, Hypercube, MetaCube
from .dimorder import allgather_dims, exchange_rounds
from .greedy import cycling_exchange_rounds
from .registry import Collective
from .schedule import ALL, Round, Schedule, Transfer

__all__ = ["COLLECTIVES", "build", "paper_steps", "initial", "expected"]


#: CCC(n) exchange: cube link, next on the ring, previous on the ring, repeated.
CCC_DIMS = (1, 2, 3)


def paper_steps(topo):
    """Return the stated step count: 2r (dual-cube, Algorithm 2), log p, log p + 2^k - 1 (metacube);
    on CCC(n), which has no paper algorithm, the rounds of the cycling exchange."""
    if isinstance(topo, CubeConnectedCycles):
        return len(cycling_exchange_rounds(topo, CCC_DIMS))
    if isinstance(topo, DualCube):
        return 2 * topo.r
    if isinstance(topo, MetaCube):
        return topo.bits + (1 << topo.k) - 1
    return topo.degree


def build(topo, root=None):
    """Return the all-to-all broadcast schedule (``root`` is ignored)."""
    if isinstance(topo, DualCube):
        rounds = _dualcube_rounds(topo)
        name = "dual-cube Algorithm 2"
    elif isinstance(topo, MetaCube):
        rounds = [
            Round(0, 0, [Transfer(u, v, _blocks(origins)) for u, v, origins in pairs])
            for pairs in exchange_rounds(topo, allgather_dims(topo))
        ]
        name = "metacube reversed Gray-walk exchange (dualmpi)"
    elif isinstance(topo, CubeConnectedCycles):
        rounds = [
            Round(0, 0, [Transfer(u, v, _blocks(origins)) for u, v, origins in pairs])
            for pairs in cycling_exchange_rounds(topo, CCC_DIMS)
        ]
        name = "dimension-cycling exchange: cube, ring +1, ring -1 (dualmpi)"
    elif isinstance(topo, Hypercube):
        held = {u: {u} for u in range(topo.num_nodes)}
        rounds = [_exchange(topo, held, held, dim) for dim in range(1, topo.degree + 1)]
        name = "recursive doubling"
    else:
        raise TypeError(f"no all-to-all broadcast for {topo.spec}")
    rounds = [r for r in rounds if r.transfers]
    for step, rnd in enumerate(rounds):
        rnd.step = step
    return Schedule("allgather", name, topo, None, rounds, len(rounds))


def _blocks(origins):
    """Return the broadcast blocks of a set of origins, sorted."""
    return tuple((o, ALL) for o in sorted(origins))


def _exchange(topo, send, merge_into, dim):
    """Every node sends ``send[u]`` to its ``dim`` neighbour and merges what it gets into ``merge_into``.

    Returns the :class:`Round`; empty sets are not sent.
    """
    rnd = Round(step=0, hop=0)
    incoming = {}
    for u in range(topo.num_nodes):
        v = int(topo.neighbor(u, dim))
        incoming[v] = send[u]
        if send[u]:
            rnd.transfers.append(Transfer(u, v, _blocks(send[u])))
    for v, got in incoming.items():
        merge_into[v] = merge_into[v] | got
    return rnd


def _dualcube_rounds(topo):
    """Return Algorithm 2's rounds: in-cluster doubling, cross exchange, doubling, cross exchange."""
    r, p = topo.r, topo.num_nodes
    m = {u: {u} for u in range(p)}
    rounds = [_exchange(topo, m, m, i) for i in range(1, r)]  # stage 1
    partner = {u: int(topo.neighbor(u, r)) for u in range(p)}
    sent = dict(m)
    rounds.append(_exchange(topo, sent, {u: set() for u in range(p)}, r))  # stage 2, line 9
    result = {u: set(m[u]) for u in range(p)}  # line 11
    temp = {u: m[partner[u]] for u in range(p)}  # line 12
    m = {u: set(temp[u]) for u in range(p)}  # line 13
    rounds += [_exchange(topo, m, m, i) for i in range(1, r)]  # lines 14-19
    for u in range(p):
        result[u] |= m[u]  # line 20
    m = {u: m[u] - temp[u] for u in range(p)}  # line 21
    rounds.append(_exchange(topo, m, result, r))  # stage 3
    return rounds


def _build(topo, root, variant, q, algorithm):
    if algorithm not in (None, "default"):
        raise ValueError(f"no algorithm {algorithm!r} for allgather (choose default or ring)")
    return build(topo)


def initial(topo, root, u):
    """Return the blocks node ``u`` starts an all-to-all broadcast with: its own."""
    return [(u, ALL)]


def expected(topo, root, u):
    """Return the blocks node ``u`` ends an all-to-all broadcast with: every node's."""
    return [(s, ALL) for s in range(topo.num_nodes)]


#: ``MPI_Allgather`` (the papers' all-to-all broadcast) and ``MPI_Allgatherv``.
COLLECTIVES = (
    Collective("allgather", "Allgather", "allgather", _build, faults=True,
               paper_steps=paper_steps, initial=initial, expected=expected),
    Collective("allgatherv", "Allgatherv", "allgather", schedule="allgather", counts="rank",
               paper_steps=paper_steps),
)
