"""One-to-all personalized communication (scatter) down the broadcast trees, halving messages."""

from ..topology import HDN, CubeConnectedCycles, DualCube, MetaCube
from . import bcast
from .bcast import spanning_tree
from .registry import Collective
from .schedule import Schedule
from .trees import tree_schedule_rounds

__all__ = ["COLLECTIVES", "build", "paper_steps"]


def paper_steps(topo):
    """Return the stated step count, the broadcast's: 2r (dual-cube, Section 4), log p (hypercube)."""
    return bcast.paper_steps(topo)


def build(topo, root=0):
    """Return the scatter schedule: each tree edge carries the blocks of the child's subtree."""
    tree = spanning_tree(topo, root)
    if isinstance(topo, DualCube):
        name = "dual-cube Section 4 (personalized)"
    elif isinstance(topo, MetaCube):
        name = "metacube Gray-walk scatter (dualmpi)"
    elif isinstance(topo, HDN):
        name = "hierarchical dual-net Algorithm 2 tree (personalized)"
    elif isinstance(topo, CubeConnectedCycles):
        name = "greedy one-port broadcast tree, personalized (dualmpi)"
    else:
        name = "binomial scatter"
    return Schedule("scatter", name, topo, root, tree_schedule_rounds(tree, root, True), len(tree))


def _build(topo, root, variant, q, algorithm):
    return build(topo, root)


def _initial(topo, root, u):
    return [(root, d) for d in range(topo.num_nodes)] if u == root else []


#: ``MPI_Scatter`` and ``MPI_Scatterv`` (the same tree, a size per destination rank).
COLLECTIVES = (
    Collective("scatter", "Scatter", "scatter", _build, rooted=True, faults=True, pipelined=True,
               networks=(HDN,), paper_steps=paper_steps, initial=_initial,
               expected=lambda topo, root, u: [(root, u)]),
    Collective("scatterv", "Scatterv", "scatter", schedule="scatter", rooted=True, counts="rank",
               paper_steps=paper_steps),
)
