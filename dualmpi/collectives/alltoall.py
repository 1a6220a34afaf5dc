"""All-to-all personalized communication (total exchange): p-1 steps, one routed message each.

In step ``t`` every node ``s`` sends one message to ``order(s, t)``; the message is
forwarded hop by hop along the topology's route, one round per hop index, as under
cut-through routing.
"""

from ..topology import DualCube, Hypercube
from .schedule import Round, Schedule, Transfer

__all__ = ["build", "paper_steps", "destination_order"]


def paper_steps(topo):
    """Return the paper's step count, p - 1."""
    return topo.num_nodes - 1


def destination_order(topo):
    """Return a function ``dest(s, t)`` giving node ``s``'s destination in step ``t`` (0-based)."""
    if isinstance(topo, DualCube):
        return _dualcube_order(topo)
    if isinstance(topo, Hypercube):
        return lambda s, t: s ^ (t + 1)
    raise TypeError(f"no total exchange for {topo.spec}")


def build(topo, root=None):
    """Return the total-exchange schedule (``root`` is ignored)."""
    dest = destination_order(topo)
    p = topo.num_nodes
    rounds = []
    for t in range(p - 1):
        paths = [topo.route(s, dest(s, t)) for s in range(p)]
        hops = max(len(path) - 1 for path in paths)
        step_rounds = [Round(step=t, hop=h) for h in range(hops)]
        for path in paths:
            key = (path[0], path[-1])
            for h, (a, b) in enumerate(zip(path, path[1:])):
                step_rounds[h].transfers.append(Transfer(a, b, (key,), header=key))
        rounds += step_rounds
    if isinstance(topo, DualCube):
        name = "dual-cube Algorithms 3+4"
    else:
        name = "e-cube total exchange"
    return Schedule("alltoall", name, topo, None, rounds, p - 1)


def _dualcube_order(topo):
    """Return Algorithm 3's sending rule: stage 1 in-cluster, stage 2 other class, stage 3 same class.

    Fields are read in the *sender's* layout: in stage 2 the partner is
    ``(class XOR 1, cluster_id XOR j, node_id XOR i)`` with cluster and node positions
    those of the sender's class, which reproduces the paper's example (00000 sends to
    10100 and receives from 10001 in step i=0, j=1).
    """
    h = 1 << topo.half
    steps = [(1, i, 0) for i in range(1, h)]
    steps += [(2, i, j) for i in range(h) for j in range(h)]
    steps += [(3, i, j) for i in range(1, h) for j in range(h)]
    cross = 1 << topo.class_bit

    def dest(s, t):
        stage, i, j = steps[t]
        c = topo.class_of(s)
        node_sh, clus_sh = topo.node_shift(c), topo.node_shift(1 - c)
        if stage == 1:
            return s ^ (i << node_sh)
        if stage == 2:
            return s ^ cross ^ (j << clus_sh) ^ (i << node_sh)
        return s ^ (i << clus_sh) ^ (j << node_sh)

    return dest
