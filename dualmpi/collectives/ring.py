"""Ring collectives along an embedded Hamiltonian cycle: all-to-all broadcast and allreduce.

Every ring hop is a link of the network, because the ring is a Hamiltonian cycle of
it (dual-cube: Theorem 4.1 of Wu and Wu; hypercube: the Gray code; reduced hypercube:
:func:`~dualmpi.topology.rh_embeddings.rh_ring`, dilation 1, instead of the emulated
hypercube's Gray code).
"""

from ..errors import DualmpiError
from ..topology import DualCube, Hypercube, ReducedHypercube
from ..topology.hamiltonian import gray_code, hamiltonian_cycle, is_ring
from ..topology.rh_embeddings import rh_ring
from . import allgather, allreduce
from .registry import Collective
from .schedule import ALL, Round, Schedule, Transfer

__all__ = [
    "default_cycle",
    "ring_allgather",
    "ring_allreduce",
    "COLLECTIVES",
]


def default_cycle(topo):
    """Return the Hamiltonian cycle the ring collectives use on ``topo``.

    Dual-cube ``r >= 2``: Theorem 4.1's cycle from the binary reflected Gray code;
    hypercube ``n >= 2``: the Gray code itself; reduced hypercube with at least 4 nodes: its
    own Hamiltonian ring (every hop one link).

    >>> default_cycle(Hypercube(2))
    [0, 1, 3, 2]
    """
    if isinstance(topo, DualCube) and topo.r >= 2:
        return hamiltonian_cycle(topo)
    if isinstance(topo, Hypercube) and topo.n >= 2:
        return gray_code(topo.n)
    if isinstance(topo, ReducedHypercube) and topo.num_nodes >= 4:
        return rh_ring(topo)
    raise DualmpiError(f"the ring collectives need a Hamiltonian cycle: available on dualcube "
                       f"(r >= 2), hypercube (n >= 2) and rh (4 nodes or more), not on {topo.spec}")


def _check_cycle(topo, cycle):
    """Return ``cycle`` as a list after checking it is a Hamiltonian cycle of ``topo``."""
    cycle = [int(u) for u in cycle]
    if len(cycle) != topo.num_nodes or not is_ring(topo, cycle):
        raise DualmpiError(f"not a Hamiltonian cycle of {topo.spec}: every node once, "
                           "consecutive nodes (and the last and first) linked")
    return cycle


def ring_allgather(topo, cycle):
    """Return the ring all-to-all broadcast along ``cycle``: ``p - 1`` rounds, one block per link.

    In round ``t`` the node at position ``i`` passes the block of the node at position
    ``i - t`` to position ``i + 1``.

    Parameters
    ----------
    topo : Topology
        The network.
    cycle : sequence of int
        A Hamiltonian cycle of ``topo``.

    Returns
    -------
    Schedule
        Collective ``ring-allgather`` (the blocks of ``allgather``).

    References
    ----------
    C. Wu, J. Wu, "On Self-Similarity and Hamiltonicity of Dual-Cubes", Section 4
    (ring embedding; "ring-based multicast algorithms").

    Examples
    --------
    >>> s = ring_allgather(DualCube(2), default_cycle(DualCube(2)))
    >>> s.num_rounds, s.num_messages
    (7, 56)
    """
    cycle = _check_cycle(topo, cycle)
    p = len(cycle)
    rounds = [
        Round(t, 0, [Transfer(cycle[i], cycle[(i + 1) % p], ((cycle[(i - t) % p], ALL),))
                     for i in range(p)])
        for t in range(p - 1)
    ]
    return Schedule("ring-allgather", "ring all-to-all broadcast on a Hamiltonian cycle", topo,
                    None, rounds, p - 1)


def ring_allreduce(topo, cycle):
    """Return the ring allreduce along ``cycle``: reduce-scatter then allgather, ``2(p - 1)`` rounds.

    The data is cut into ``p`` segments ``(REDUCED, j)``, one per node ``j``.  The
    reduce-scatter is :func:`ring_allgather` run backwards: in its round ``t`` position
    ``i`` sends its partial result of the segment of position ``i + t + 1`` to position
    ``i - 1``, which combines it with its own, so after ``p - 1`` rounds every node holds
    its own segment reduced; then :func:`ring_allgather` passes the reduced segments
    around (:func:`dualmpi.collectives.allreduce.reduce_scatter_allgather`, the same
    construction as every network's ``rsag`` allreduce).

    Parameters
    ----------
    topo : Topology
        The network.
    cycle : sequence of int
        A Hamiltonian cycle of ``topo``.

    Returns
    -------
    Schedule
        Collective ``ring-allreduce`` (the blocks of ``allreduce``).

    References
    ----------
    C. Wu, J. Wu, "On Self-Similarity and Hamiltonicity of Dual-Cubes", Section 4.

    Examples
    --------
    >>> s = ring_allreduce(Hypercube(3), default_cycle(Hypercube(3)))
    >>> s.num_rounds, s.num_messages, s.rounds[0].transfers[0].reduce
    (14, 112, (True,))
    """
    from .allreduce import reduce_scatter_allgather

    forward = ring_allgather(topo, cycle)
    rounds, _ = reduce_scatter_allgather(forward)
    for t, rnd in enumerate(rounds):
        rnd.step = t
    return Schedule("ring-allreduce", "ring allreduce (reduce-scatter, allgather) on a Hamiltonian "
                    "cycle", topo, None, rounds, len(rounds))


#: ``ring-allgather`` and ``ring-allreduce`` (``dualmpi run``'s names; ``dualmpi.Comm`` runs
#: them as the ``"ring"`` algorithm of the allgather and the allreduce).
COLLECTIVES = (
    Collective("ring-allgather", None, "allgather",
               lambda topo, root, variant, q, algorithm: ring_allgather(topo, default_cycle(topo)),
               emulated=False, networks="any", paper_steps=lambda topo: topo.num_nodes - 1,
               initial=allgather.initial, expected=allgather.expected,
               runs_as=("allgather", "ring")),
    Collective("ring-allreduce", None, "allreduce",
               lambda topo, root, variant, q, algorithm: ring_allreduce(topo, default_cycle(topo)),
               emulated=False, networks="any", paper_steps=lambda topo: 2 * (topo.num_nodes - 1),
               initial=allreduce.segments, expected=allreduce.segments,
               runs_as=("allreduce", "ring")),
)
