"""The total exchange streamed step by step over node blocks, for very many nodes per rank (pure).

A per-row plan of MC(2, 3)'s total exchange on 2 ranks would hold 1.25 G rows per rank.
The papers' total exchange needs far less: in step ``t`` every source ``s`` of class
group ``g`` is at node ``s XOR offs[g][h]`` after ``h`` hops (renaming, see
:func:`~dualmpi.collectives.alltoall.step_offsets`), so an aligned *chunk* of ``z``
sources of one group (``z = min(q, group size)``) is always held by ``z`` nodes of one
rank, and a hop moves the whole chunk from one rank to one rank.  A
:class:`StepPlan` therefore keeps, per step, only the groups' XOR offsets; the
executor moves chunk buffers (``z`` blocks, in source order) hop by hop — a message to
the rank that plays the next nodes, or a copy between two nodes of the same rank.

Every step's route is checked against the topology's router for ``checks`` random
sources, and every hop's links are checked: for these networks whether ``u`` and
``u XOR x`` are linked depends only on ``u``'s class (tested exhaustively in the pure
tier), and all nodes holding one chunk share a class, so one check per chunk and hop
covers its ``z`` transfers.
"""

import numpy as np

from ..errors import DualmpiError, LinkError

__all__ = ["StepPlan", "class_link"]


def class_link(topo, u, x):
    """Return True when node ``u`` and ``u XOR x`` are joined by a link."""
    return bool(topo.is_link(int(u), int(u) ^ int(x)))


class StepPlan:
    """The total exchange of ``topo`` with ``q`` nodes per rank, step by step.

    Parameters
    ----------
    topo : Hypercube, DualCube or MetaCube
    q : int
        Nodes per rank, a power of two.
    variant : str
        ``"corrected"`` or ``"as-printed"`` (MC(2, m) classPath table).

    Examples
    --------
    >>> from dualmpi.topology import DualCube
    >>> sp = StepPlan(DualCube(3), 8)
    >>> sp.chunk, sp.num_chunks
    (8, 4)
    >>> table, lengths = sp.step(0)
    >>> int(lengths.max()), sp.hop_rounds(), sp.link_transfers()
    (1, 104, 3328)
    """

    def __init__(self, topo, q, variant="corrected", checks=2, seed=0):
        from ..collectives.alltoall import class_groups, destination_order, route_function

        if q & (q - 1):
            raise DualmpiError(f"the streamed total exchange needs a power-of-two block, got {q}")
        self.topo, self.q, self.p = topo, q, topo.num_nodes
        self.dest = destination_order(topo)
        self.route = route_function(topo, variant)
        _, self.groups = class_groups(topo)
        self.group_size = int(self.groups[0].size)
        self.chunk = min(q, self.group_size)
        self.num_chunks = self.p // self.chunk
        self.chunk_base = np.arange(self.num_chunks, dtype=np.int64) * self.chunk
        self.chunk_group = self.chunk_base // self.group_size
        self.checks, self.rng = checks, np.random.default_rng(seed)
        self._links_ok = set()
        self._steps = {}

    def step(self, t):
        """Return ``(table, lengths)``: per group the XOR offsets after each hop, and the hops."""
        from ..collectives.alltoall import step_offsets

        offsets = step_offsets(self.topo, self.groups, t, self.dest, self.route)
        lengths = np.array([len(o) - 1 for o in offsets], dtype=np.int64)
        table = np.zeros((len(offsets), int(lengths.max()) + 1), dtype=np.int64)
        for g, offs in enumerate(offsets):
            table[g, :len(offs)] = offs
        for s in self.rng.choice(self.p, size=min(self.checks, self.p), replace=False):
            s = int(s)
            g = s // self.group_size
            if list(self.route(s, int(self.dest(s, t)))) != [s ^ int(o) for o in offsets[g]]:
                raise DualmpiError(f"step {t}: the route of node {s} is not its class's renamed "
                                   "route")
        return table, lengths

    def holders(self, table):
        """Return ``(nodes, ranks)``: per chunk and hop, its first holding node and that rank."""
        nodes = self.chunk_base[:, None] ^ table[self.chunk_group]
        return nodes, nodes // self.q

    def check_hop(self, node, x):
        """Raise :class:`LinkError` unless ``node`` and ``node XOR x`` are linked (cached per class)."""
        key = (self._class_of(node), int(x))
        if key in self._links_ok:
            return
        if not class_link(self.topo, node, x):
            raise LinkError(int(node), int(node) ^ int(x), self.topo.spec)
        self._links_ok.add(key)

    def _class_of(self, node):
        """Return the bits that decide which dimensions a node's links have (its class)."""
        return int(node) >> self._class_shift()

    def _class_shift(self):
        from ..collectives.alltoall import class_groups

        if not hasattr(self, "_shift"):
            self._shift = class_groups(self.topo)[0]
        return self._shift

    def hop_rounds(self):
        """Return the hop rounds of the whole exchange (the sum of each step's longest route)."""
        return sum(int(self._lengths(t).max()) for t in range(self.p - 1))

    def link_transfers(self):
        """Return the link transfers of the whole exchange."""
        return sum(int(self._lengths(t).sum()) * self.group_size for t in range(self.p - 1))

    def _lengths(self, t):
        if t not in self._steps:
            self._steps[t] = self.step(t)[1]
        return self._steps[t]
