"""One-to-all personalized communication (scatter) down the broadcast trees, halving messages."""

from ..topology import DualCube
from .bcast import spanning_tree
from .schedule import Schedule
from .trees import tree_schedule_rounds

__all__ = ["build", "paper_steps"]


def paper_steps(topo):
    """Return the paper's step count: 2r (dual-cube, Section 4), log p (hypercube)."""
    return 2 * topo.r if isinstance(topo, DualCube) else topo.degree


def build(topo, root=0):
    """Return the scatter schedule: each tree edge carries the blocks of the child's subtree."""
    tree = spanning_tree(topo, root)
    name = "dual-cube Section 4 (personalized)" if isinstance(topo, DualCube) else "binomial scatter"
    return Schedule("scatter", name, topo, root, tree_schedule_rounds(tree, root, True), len(tree))
