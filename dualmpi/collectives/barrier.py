"""Barrier: an allreduce of nothing, so that no node leaves before every node has arrived (pure).

A barrier is any pattern in which every node's last arrival depends on every node's
first departure.  dualmpi runs the cheapest allreduce the network has with empty
blocks (:mod:`dualmpi.collectives.allreduce`): recursive doubling on the hypercube
(``n`` steps, as MPI's dissemination barrier on ``2^n`` ranks), elsewhere the
reduction to node 0 along the broadcast tree reversed and the broadcast back
(``2B`` steps for a broadcast of ``B`` steps: ``4r`` on the dual-cube D_r).  Every
message is a real (empty) link message: the data plane synchronises, not MPI's own
barrier.

References
----------
D. Hensgen, R. Finkel, U. Manber, "Two algorithms for barrier synchronization",
IJPP 17 (1988): the dissemination barrier.  Y. Li, S. Peng, W. Chu, "Efficient
collective communications in dual-cube", J. Supercomputing 28 (2004): the broadcast trees.
"""

from ..topology import Hypercube
from . import allreduce
from .registry import Collective

__all__ = ["COLLECTIVES", "algorithm", "build"]


def algorithm(topo):
    """Return the allreduce algorithm the barrier runs on ``topo``.

    >>> from dualmpi.topology import DualCube, Hypercube
    >>> algorithm(Hypercube(3)), algorithm(DualCube(2))
    ('exchange', 'tree')
    """
    return "exchange" if type(topo) is Hypercube else "tree"


def build(topo, q=1, variant="corrected"):
    """Return the barrier's schedule on ``topo`` (ranks of ``q`` nodes).

    >>> from dualmpi.topology import DualCube
    >>> s = build(DualCube(2))
    >>> s.collective, s.steps, s.num_messages
    ('barrier', 8, 14)
    """
    sched = allreduce.build(topo, algorithm(topo), q, variant)
    sched.collective = "barrier"
    return sched


#: ``MPI_Barrier`` over the links.
COLLECTIVES = (Collective("barrier", "Barrier", "reduce-all",
                          lambda topo, root, variant, q, alg: build(topo, q, variant),
                          combines=True, emulated=False, networks="any"),)
