"""All-to-all personalized communication (total exchange): p-1 steps, one routed message each.

In step ``t`` every node ``s`` sends one message to ``order(s, t)``; the message is
forwarded hop by hop along the topology's route, one round per hop index, as under
cut-through routing.
"""

from functools import lru_cache

from ..topology import CubeConnectedCycles, DualCube, Hypercube, MetaCube
from ..topology.metacube import CLASS_PATH_TABLE_PRINTED
from .greedy import shift_destination
from .registry import Collective
from .schedule import Round, Schedule, Transfer

__all__ = [
    "COLLECTIVES",
    "build",
    "paper_steps",
    "destination_order",
    "route_function",
    "class_groups",
    "step_offsets",
    "VARIANTS",
]

#: ``as-printed`` routes MC(2, m) with the classPath table exactly as printed (docs/errata.md, M1).
VARIANTS = ("corrected", "as-printed")


def paper_steps(topo):
    """Return the paper's step count, p - 1."""
    return topo.num_nodes - 1


def destination_order(topo):
    """Return a function ``dest(s, t)`` giving node ``s``'s destination in step ``t`` (0-based)."""
    if isinstance(topo, DualCube):
        return _dualcube_order(topo)
    if isinstance(topo, MetaCube):
        return _metacube_order(topo)
    if isinstance(topo, Hypercube):
        return lambda s, t: s ^ (t + 1)
    if isinstance(topo, CubeConnectedCycles):
        return shift_destination(topo)
    raise TypeError(f"no total exchange for {topo.spec}")


def route_function(topo, variant="corrected"):
    """Return ``route(s, d)`` for the total exchange: the topology's route, or the printed table's."""
    if variant == "corrected":
        return topo.route
    if variant == "as-printed" and isinstance(topo, MetaCube) and topo.k == 2:
        return lambda s, d: topo.walk_route(
            s, d, topo.table_class_path(s, d, CLASS_PATH_TABLE_PRINTED))
    raise ValueError(f"variant {variant!r} exists only for the total exchange on MC(2, m)")


def class_groups(topo):
    """Return ``(class_shift, groups)``: the nodes of each class as int64 arrays.

    Sources of one class route alike in the total exchange: node renaming (XOR with
    the source) maps the route of the class's first node onto every other member.
    """
    import numpy as np

    if isinstance(topo, MetaCube):
        shift = topo.class_shift
    elif isinstance(topo, DualCube):
        shift = topo.class_bit
    elif isinstance(topo, Hypercube):
        shift = topo.n
    else:
        raise TypeError(f"no total exchange for {topo.spec}")
    per = 1 << shift
    count = topo.num_nodes // per
    return shift, [np.arange(c * per, (c + 1) * per, dtype=np.int64) for c in range(count)]


def step_offsets(topo, groups, t, dest, route):
    """Return, per class group, the route of step ``t`` as XOR offsets from the source.

    The group's first node is routed by ``route`` (the topology's router); member ``s``
    of the group is at ``s ^ offs[h]`` after ``h`` hops.
    """
    out = []
    for members in groups:
        rep = int(members[0])
        path = route(rep, int(dest(rep, t)))
        out.append([a ^ rep for a in path])
    return out


def build(topo, root=None, variant="corrected"):
    """Return the total-exchange schedule (``root`` is ignored)."""
    dest = destination_order(topo)
    route = route_function(topo, variant)
    p = topo.num_nodes
    rounds = []
    for t in range(p - 1):
        paths = [route(s, dest(s, t)) for s in range(p)]
        hops = max(len(path) - 1 for path in paths)
        step_rounds = [Round(step=t, hop=h) for h in range(hops)]
        for path in paths:
            key = (path[0], path[-1])
            for h, (a, b) in enumerate(zip(path, path[1:])):
                step_rounds[h].transfers.append(Transfer(a, b, (key,), header=key))
        rounds += step_rounds
    if isinstance(topo, DualCube):
        name = "dual-cube Algorithms 3+4"
    elif isinstance(topo, MetaCube):
        name = "metacube Algorithms 1-4" + (" (classPath table as printed)" if variant != "corrected"
                                            else "")
    elif isinstance(topo, CubeConnectedCycles):
        name = "shift-order total exchange on shortest routes (dualmpi)"
    else:
        name = "e-cube total exchange"
    router = None
    if variant != "corrected":
        router = _path_router(route)
    return Schedule("alltoall", name, topo, None, rounds, p - 1, router)


def _path_router(route):
    """Return ``next_hop(current, s, d)`` for a route function (the router of a variant)."""
    cached = lru_cache(maxsize=1 << 16)(lambda s, d: tuple(route(s, d)))

    def next_hop(current, s, d):
        path = cached(s, d)
        return path[path.index(current) + 1]

    return next_hop


def _metacube_order(topo):
    """Return the metacube paper's Algorithm 1 order, for every k.

    Step ``t`` read as an address gives the loop variables: class field ``c[2^k]`` and
    fields ``c[i]``.  With ``x = c[2^k] XOR c_s`` the destination has class ``x`` and
    field ``i`` equal to ``m_s[i] XOR c[i XOR x]``, so ``c[0]`` lands in the node-id
    field of the destination's class and every source's step-t destination is at
    the same distance.
    """
    m, fields, shift = topo.m, topo.num_fields, topo.class_shift
    mask = topo.field_mask

    def dest(s, t):
        t += 1  # step 0 of the paper's loop is the source itself
        cs = s >> shift
        x = (t >> shift) ^ cs
        d = x << shift
        for i in range(fields):
            d |= (((s >> (m * i)) ^ (t >> (m * (i ^ x)))) & mask) << (m * i)
        return d

    return dest


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


def _build(topo, root, variant, q, algorithm):
    return build(topo, None, variant)


#: ``MPI_Alltoall`` (the papers' total exchange), ``MPI_Alltoallv`` and ``MPI_Alltoallw``
#: (a size per pair: the w-variant's datatypes are packed to bytes by the caller).
COLLECTIVES = (
    Collective("alltoall", "Alltoall", "alltoall", _build, faults=True, variants=VARIANTS,
               paper_steps=paper_steps,
               initial=lambda topo, root, u: [(u, d) for d in range(topo.num_nodes) if d != u],
               expected=lambda topo, root, u: [(s, u) for s in range(topo.num_nodes) if s != u]),
    Collective("alltoallv", "Alltoallv", "alltoallv", schedule="alltoall", counts="pair",
               variants=VARIANTS, paper_steps=paper_steps),
    Collective("alltoallw", "Alltoallw", "alltoallv", schedule="alltoall", counts="pair",
               variants=VARIANTS, paper_steps=paper_steps),
)
