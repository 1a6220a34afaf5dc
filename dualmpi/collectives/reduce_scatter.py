"""Reduce-scatter: the first half of the allreduce, the all-to-all broadcast run backwards (pure).

The vector is cut into ``p`` segments, one per node; segment ``j`` is reduced towards
node ``j`` along the all-to-all broadcast (:mod:`dualmpi.collectives.allgather`) run
backwards: every first arrival of block ``(j, ALL)`` in the forward pattern becomes a
send of a partial of segment ``j`` the other way, combined by the receiver
(:func:`dualmpi.collectives.reduce.reverse_rounds`).  After ``S`` steps (the all-to-all
broadcast's: ``2r`` on the dual-cube D_r, ``n`` on Q_n) node ``j`` holds segment ``j``
of the reduction.  It is the ``rsag`` allreduce without its second half
(:mod:`dualmpi.collectives.allreduce`); every node sends ``(p - 1) m / p`` words on the
dual-cube, metacube and hypercube.

``MPI_Reduce_scatter_block`` gives rank ``r`` the segments of its nodes, ``recvcount``
elements; ``MPI_Reduce_scatter`` the same with ``recvcounts[r]`` elements per rank
(:class:`dualmpi.engine.layout.Layout`, kind ``reduce-scatter``).

References
----------
R. Thakur, R. Rabenseifner, W. Gropp, "Optimization of collective communication
operations in MPICH", IJHPCA 19 (2005): reduce-scatter as the first half of
reduce-scatter + allgather.  Y. Li, S. Peng, W. Chu, "Efficient collective
communications in dual-cube", J. Supercomputing 28 (2004): Algorithm 2.
"""

from .reduce import contributors, reverse_rounds
from .registry import Collective
from .schedule import REDUCED, Schedule

__all__ = ["COLLECTIVES", "build", "reduce_scatter_rounds"]


def reduce_scatter_rounds(forward, q=1):
    """Return ``(rounds, initial)``: all-to-all broadcast ``forward`` run backwards.

    Segment ``(REDUCED, j)`` is reduced towards node ``j`` along the first arrivals of
    block ``(j, ALL)``; ``initial`` gives the segments every ``q``-th node starts with
    (the first node of each rank holds the rank's vector).
    """
    p = forward.topo.num_nodes
    givers = contributors(p, q)
    defined = {u: set() for u in range(p)}
    segments = [(REDUCED, j) for j in range(p)]
    for c in givers:
        defined[c].update(segments)
    back = [r for r in reverse_rounds(forward, lambda b: (REDUCED, b[0]), defined) if r.transfers]
    return back, {c: list(segments) for c in givers}


def build(topo, q=1, variant="corrected"):
    """Return the reduce-scatter of the contributions of every ``q``-th node.

    Examples
    --------
    >>> from dualmpi.topology import DualCube, Hypercube
    >>> s = build(DualCube(2))
    >>> s.collective, s.steps, s.num_messages
    ('reduce_scatter', 4, 32)
    >>> build(Hypercube(3)).steps
    3
    """
    from . import build_schedule

    forward = build_schedule("allgather", topo, None, variant)
    rounds, initial = reduce_scatter_rounds(forward, q)
    for step, rnd in enumerate(rounds):
        rnd.step = step
    return Schedule("reduce_scatter", f"reversed {forward.algorithm}", topo, None, rounds,
                    len(rounds), forward.router, initial=initial)


def _build(topo, root, variant, q, algorithm):
    return build(topo, q, variant)


def _expected(topo, root, u):
    return [(REDUCED, u)]


#: ``MPI_Reduce_scatter_block`` (one count for every rank) and ``MPI_Reduce_scatter``.
COLLECTIVES = (
    Collective("reduce_scatter_block", "Reduce_scatter_block", "reduce-scatter", _build,
               combines=True, emulated=False, expected=_expected),
    Collective("reduce_scatter", "Reduce_scatter", "reduce-scatter", schedule="reduce_scatter_block",
               counts="rank", combines=True, emulated=False),
)
