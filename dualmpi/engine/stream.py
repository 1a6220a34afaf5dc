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
tier), and all nodes holding one chunk share a class, so one check per class and XOR
offset covers every chunk's ``z`` transfers.  A chunk's sources end at their
destinations: source ``s`` of step ``t`` reaches ``s XOR offs[g][-1]``, which is
``dest(s, t)`` (what the route checks confirm).
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
        self._tables = None

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

    def tables(self):
        """Return ``(lengths, table)`` of every step: ``lengths[t, g]`` hops, ``table[t, g, h]``.

        :meth:`step` for all steps at once (computed once): each step's routes come from
        the router, and ``checks`` random sources per step are routed directly and must
        agree.

        >>> from dualmpi.topology import DualCube
        >>> sp = StepPlan(DualCube(2), 2)
        >>> lengths, table = sp.tables()
        >>> lengths.shape, table.shape
        ((7, 2), (7, 2, 5))
        >>> all((sp.step(t)[1] == lengths[t]).all() for t in range(7))
        True
        """
        if self._tables is not None:
            return self._tables
        from ..collectives.alltoall import step_offsets

        steps, p, route, dest = self.p - 1, self.p, self.route, self.dest
        routes = [step_offsets(self.topo, self.groups, t, dest, route) for t in range(steps)]
        lengths = np.array([[len(o) - 1 for o in offs] for offs in routes], dtype=np.int64)
        lengths = lengths.reshape(steps, len(self.groups))
        span = int(lengths.max()) + 1 if steps else 1
        table = np.zeros((steps, len(self.groups), span), dtype=np.int64)
        for t, offs in enumerate(routes):
            for g, o in enumerate(offs):
                table[t, g, :len(o)] = o
        picks = self.rng.integers(0, p, size=(steps, min(self.checks, p))).tolist()
        per = self.group_size
        for t, sources in enumerate(picks):
            for s in sources:
                want = [s ^ int(o) for o in routes[t][s // per]]
                if list(self.route(s, int(dest(s, t)))) != want:
                    raise DualmpiError(f"step {t}: the route of node {s} is not its class's "
                                       "renamed route")
        self._tables = lengths, table
        return self._tables

    def rank_steps(self, rank):
        """Return what rank ``rank`` does in every step (:class:`~dualmpi.engine.mpi.StreamRunner`).

        Returns ``(steps, sent)``: per step ``(t, start, hops, last)`` — the chunks this
        rank's nodes start with, per hop ``(acts, done)`` (``acts``: ``(chunk, from
        rank, to rank)`` of the moves this rank takes part in, ``done``: the chunks
        that arrive here at their destination), and per chunk the XOR offset from a
        source to its destination (``table[t, g, lengths[t, g]]``); ``sent`` counts the
        chunk moves that leave one of this rank's nodes.  Every hop of every chunk is
        link-checked (once per class and offset, see the module docstring).

        >>> from dualmpi.topology import DualCube
        >>> steps, sent = StepPlan(DualCube(2), 2).rank_steps(0)
        >>> len(steps), steps[0][1], steps[0][2]
        (7, [0], [([(0, 0, 0)], [0])])
        """
        lengths, table = self.tables()
        q, me = self.q, rank
        glen = lengths[:, self.chunk_group]                            # (steps, chunks)
        offs = table[:, self.chunk_group, :]                           # (steps, chunks, span)
        nodes = self.chunk_base[None, :, None] ^ offs
        ranks = nodes // q
        hop = np.arange(offs.shape[2] - 1, dtype=np.int64)
        live = hop[None, None, :] < glen[:, :, None]                   # (steps, chunks, hops)
        # every hop's link: u and u XOR x are linked depending on u's class only
        x = (offs[:, :, :-1] ^ offs[:, :, 1:])[live]
        u = nodes[:, :, :-1][live]
        shift = self._class_shift()
        _, first = np.unique((u >> shift) * self.p + x, return_index=True)
        for node, step in zip(u[first].tolist(), x[first].tolist()):
            self.check_hop(node, step)
        a, c = ranks[:, :, :-1], ranks[:, :, 1:]
        sent = int((live & (a == me)).sum())
        acts = live & ((a == me) | (c == me))
        done = live & (hop[None, None, :] + 1 == glen[:, :, None]) & (c == me)
        last = np.take_along_axis(offs, glen[:, :, None], axis=2)[:, :, 0].tolist()
        widths = lengths.max(axis=1).tolist()
        out = [(t, [], [([], []) for _ in range(w)], row) for t, (w, row) in
               enumerate(zip(widths, last))]
        for t, j in zip(*(i.tolist() for i in np.nonzero(ranks[:, :, 0] == me))):
            out[t][1].append(j)
        at, ah, aj = np.nonzero(acts.transpose(0, 2, 1))                # by step, hop, chunk
        for t, h, j, f, g in zip(at.tolist(), ah.tolist(), aj.tolist(),
                                 a[at, aj, ah].tolist(), c[at, aj, ah].tolist()):
            out[t][2][h][0].append((j, f, g))
        dt, dh, dj = np.nonzero(done.transpose(0, 2, 1))
        for t, h, j in zip(dt.tolist(), dh.tolist(), dj.tolist()):
            out[t][2][h][1].append(j)
        return out, sent

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
        return int(self.tables()[0].max(axis=1).sum()) if self.p > 1 else 0

    def link_transfers(self):
        """Return the link transfers of the whole exchange."""
        return int(self.tables()[0].sum()) * self.group_size
