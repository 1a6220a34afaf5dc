"""Where the user's buffers meet the network's blocks: sizes and offsets per collective (pure).

A communicator of ``R`` ranks runs a collective of the network's ``p = R*q`` nodes;
rank ``r`` plays nodes ``r*q .. r*q + q - 1`` (block mapping).  The user's buffers are
those of the matching MPI call on the ranks; a :class:`Layout` says which bytes of
them each node-level block is:

* ``bcast``: the block ``(root node, ALL)`` is the whole buffer; the root node is the
  root rank's first node; every rank copies the result out of its first node.
* ``scatter``: rank ``d``'s piece of the root's send buffer is split over ``d``'s
  ``q`` nodes, as evenly as bytes allow (:func:`split_sizes`).
* ``gather``: rank ``s``'s piece is split over its ``q`` nodes, block ``(u, root
  node)`` of node ``u``; the root's first node delivers every block.
* ``allgather``: a rank's contribution is split over its ``q`` nodes.

``scatter``, ``gather`` and ``allgather`` take a byte count per rank too (the
v-variants): ``nbytes`` an array of ``R`` sizes, with the byte displacements of the
pieces in the root's (``scatter``: ``sdispls``; ``gather``: ``rdispls``) or every
rank's (``allgather``: ``rdispls``) buffer; default packed.
* ``alltoall`` / ``alltoallv``: the piece rank ``a`` sends rank ``b`` is split into
  ``q*q`` sub-blocks, sub-block ``i*q + j`` going from node ``a*q + i`` to node
  ``b*q + j``.
* ``allreduce``: ``p`` segments of the vector, segment ``j`` a reduction block
  ``(REDUCED, j)`` (the ``ring-allreduce`` schedule of ``dualmpi run``).
* ``reduce``, ``reduce-all``, ``exscan``: the typed reductions.  Rank ``r``'s vector
  is the block ``(REDUCED, ALL)`` of its first node (its other nodes start with
  nothing); the result is read from the same block of the root's first node
  (``reduce``), of every rank's first node (``reduce-all``: allreduce by a tree or
  recursive doubling, scan), or from block ``(REDUCED, 0)`` of every rank but 0
  (``exscan``).
* ``reduce-segments``: as ``reduce-all``, the vector cut into ``p`` segments of whole
  elements, ``(REDUCED, j)`` (reduce-scatter + allgather).
* ``reduce-scatter``: rank ``r``'s vector holds one block per rank (``nbytes`` bytes
  each, or an array of ``R`` sizes), packed; rank ``d``'s block is split over its
  nodes in whole elements, segment ``(REDUCED, j)`` of node ``j``, which delivers it.

With ``q = 1`` every block is exactly the piece of the MPI call.
"""

import numpy as np

from ..collectives.registry import get
from ..collectives.schedule import ALL, REDUCED

__all__ = ["split_sizes", "split_offsets", "Layout", "COLLECTIVE_LAYOUTS", "PER_RANK", "layout_kind",
           "describe", "pieces_per_rank"]

#: Collectives whose user buffers a :class:`Layout` describes.
COLLECTIVE_LAYOUTS = ("bcast", "scatter", "gather", "allgather", "alltoall", "alltoallv",
                      "allreduce", "reduce", "reduce-all", "exscan", "reduce-segments",
                      "reduce-scatter")

#: Layouts whose ``nbytes`` may be a size per rank (v-variants, reduce-scatter).
PER_RANK = ("scatter", "gather", "allgather", "reduce-scatter")

def layout_kind(collective, algorithm=None):
    """Return the layout of an engine collective (``"allreduce-rsag"`` -> ``"reduce-segments"``).

    Read from the collective's description (:mod:`dualmpi.collectives.registry`); an
    engine name ``"allreduce-<algorithm>"`` names the allreduce's algorithm.

    >>> layout_kind("scan"), layout_kind("bcast"), layout_kind("allreduce-tree")
    ('reduce-all', 'bcast', 'reduce-all')
    """
    desc, algorithm = describe(collective, algorithm)
    return desc.layout_for(algorithm)


def describe(collective, algorithm=None):
    """Return ``(description, algorithm)`` of an engine collective name.

    >>> desc, alg = describe("allreduce-rsag")
    >>> desc.name, alg
    ('allreduce', 'rsag')
    """
    if collective.startswith("allreduce-"):
        return get("allreduce"), collective[len("allreduce-"):]
    return get(collective), algorithm


def pieces_per_rank(kind, q):
    """Return how many node-level blocks one rank's piece of layout ``kind`` is split into.

    >>> pieces_per_rank("alltoall", 4), pieces_per_rank("gather", 4), pieces_per_rank("bcast", 4)
    (16, 4, 1)
    """
    return {"scatter": q, "gather": q, "allgather": q, "alltoall": q * q}.get(kind, 1)


def split_sizes(total, parts, index):
    """Return the size of part ``index`` when ``total`` bytes are split into ``parts``.

    The first ``total % parts`` parts are one byte longer.  Elementwise on arrays.

    >>> [int(split_sizes(10, 4, i)) for i in range(4)]
    [3, 3, 2, 2]
    """
    total = np.asarray(total, dtype=np.int64)
    index = np.asarray(index, dtype=np.int64)
    return total // parts + (index < total % parts)


def split_offsets(total, parts, index):
    """Return where part ``index`` starts when ``total`` bytes are split into ``parts``.

    >>> [int(split_offsets(10, 4, i)) for i in range(4)]
    [0, 3, 6, 8]
    """
    total = np.asarray(total, dtype=np.int64)
    index = np.asarray(index, dtype=np.int64)
    return index * (total // parts) + np.minimum(index, total % parts)


class Layout:
    """The byte layout of one collective call on ``R`` ranks of ``q`` nodes each.

    Parameters
    ----------
    collective : str
        One of :data:`COLLECTIVE_LAYOUTS`.
    p, q : int
        Network nodes and nodes per rank.
    nbytes : int or numpy.ndarray
        ``bcast``: the buffer's bytes; ``scatter``, ``gather``, ``allgather``,
        ``alltoall``: the bytes of one rank's piece (or, :data:`PER_RANK`, an array of
        ``R``: rank ``r``'s piece); ``allreduce``: the bytes of one segment;
        ``alltoallv``: the ``R x R`` matrix of bytes rank ``a`` sends rank ``b``;
        ``reduce-scatter``: the bytes of one rank's block (or an array of ``R``);
        the other reductions: the bytes of the vector.
    root : int
        The root *rank* of bcast, scatter, gather and reduce.
    sdispls, rdispls : numpy.ndarray, optional
        This rank's byte displacements of each rank's piece in the send (``alltoallv``,
        ``scatter``) or receive (``alltoallv``, ``gather``, ``allgather``) buffer
        (default: packed).
    itemsize : int
        ``reduce-segments``, ``reduce-scatter``: segments hold whole elements of this
        many bytes.

    Examples
    --------
    >>> lay = Layout("alltoall", p=4, q=2, nbytes=8)
    >>> lay.size(np.array([0, 1]), np.array([2, 3])).tolist()
    [2, 2]
    >>> nodes, origin, target, offset = lay.inputs(0)
    >>> offset[:4].tolist()
    [0, 2, 8, 10]
    """

    def __init__(self, collective, p, q, nbytes, root=0, sdispls=None, rdispls=None, itemsize=1):
        self.collective, self.p, self.q = collective, p, q
        self.itemsize = itemsize
        self.ranks = p // q
        self.root = root
        self.root_node = root * q
        self.sdispls, self.rdispls = sdispls, rdispls
        #: per-rank sizes (an int64 array of R) of a v-variant, else None
        self.counts = None
        if collective == "alltoallv":
            self.matrix = np.asarray(nbytes, dtype=np.int64).reshape(self.ranks, self.ranks)
        elif collective in PER_RANK and not isinstance(nbytes, (int, np.integer)):
            self.counts = np.asarray(nbytes, dtype=np.int64).reshape(self.ranks)
            self.nbytes = int(self.counts.max()) if self.counts.size else 0
        else:
            self.nbytes = int(nbytes)

    # -- sizes -------------------------------------------------------------------------------
    def size(self, origin, target):
        """Return the bytes of blocks ``(origin, target)`` (arrays of node ids)."""
        origin = np.asarray(origin, dtype=np.int64)
        target = np.asarray(target, dtype=np.int64)
        q, coll = self.q, self.collective
        if coll == "bcast":
            return np.full(origin.shape, self.nbytes, dtype=np.int64)
        if self.counts is not None:
            if coll == "scatter":
                if q == 1:
                    return self.counts[target]
                return split_sizes(self.counts[target // q], q, target % q)
            if coll == "reduce-scatter":
                return split_sizes(self.counts[target // q] // self.itemsize, q,
                                   target % q) * self.itemsize
            if q == 1:  # (one node per rank: the counts)
                return self.counts[origin]
            return split_sizes(self.counts[origin // q], q, origin % q)
        if coll == "reduce-scatter":
            return split_sizes(self.nbytes // self.itemsize, q, target % q) * self.itemsize
        parts = pieces_per_rank(coll, q)
        if coll in ("scatter", "gather", "allgather", "alltoall") and self.nbytes % parts == 0:  # equal pieces: no index needed
            shape = {"scatter": target.shape, "allgather": origin.shape,
                     "gather": origin.shape}.get(coll, np.broadcast(origin, target).shape)
            return np.full(shape, self.nbytes // parts, dtype=np.int64)
        if coll == "scatter":
            return split_sizes(self.nbytes, q, target % q)
        if coll in ("allgather", "gather"):
            return split_sizes(self.nbytes, q, origin % q)
        if coll in ("allreduce", "reduce", "reduce-all", "exscan"):
            return np.full(origin.shape, self.nbytes, dtype=np.int64)
        if coll == "reduce-segments":
            n = self.nbytes // self.itemsize
            return np.where(target < 0, self.nbytes, split_sizes(n, self.p, target) * self.itemsize)
        if coll == "alltoall":
            return split_sizes(self.nbytes, q * q, (origin % q) * q + target % q)
        if q == 1:  # (one node per rank: the matrix's entries)
            return self.matrix[origin, target]
        return split_sizes(self.matrix[origin // q, target // q], q * q,
                           (origin % q) * q + target % q)

    def largest(self):
        """Return the bytes of the call's largest block (the same on every rank).

        Pipelined plans cut every block at multiples of one piece length derived from it
        (:meth:`dualmpi.engine.plan.RankPlan.bind`).

        >>> Layout("alltoall", p=4, q=2, nbytes=10).largest()
        3
        >>> Layout("scatter", p=4, q=2, nbytes=np.array([5, 9])).largest()
        5
        """
        coll, q = self.collective, self.q
        if coll == "reduce-segments":
            return self.nbytes
        if coll == "alltoallv":
            top = int(self.matrix.max(initial=0))
        elif self.counts is not None:
            top = int(self.counts.max(initial=0))
        else:
            top = self.nbytes
        if coll == "reduce-scatter":
            return -(-(top // self.itemsize) // q) * self.itemsize
        parts = q * q if coll == "alltoallv" else pieces_per_rank(coll, q)
        return -(-top // parts)

    # -- the user's buffers ------------------------------------------------------------------
    def inputs(self, rank):
        """Return ``(node, origin, target, offset)`` of the blocks rank ``rank`` copies in.

        ``offset`` is the block's first byte in the user's send buffer (the buffer of
        ``bcast``).  Empty where the rank contributes nothing (a non-root rank).
        """
        q, p, coll = self.q, self.p, self.collective
        mine = np.arange(rank * q, (rank + 1) * q, dtype=np.int64)
        every = np.arange(p, dtype=np.int64)
        if coll == "bcast":
            if rank != self.root:
                return _none()
            return _rows([self.root_node], [self.root_node], [ALL], [0])
        if coll == "scatter":
            if rank != self.root:
                return _none()
            off = self._pieces(every, self.sdispls)
            return _rows(np.full(p, self.root_node), np.full(p, self.root_node), every, off)
        if coll in ("allgather", "gather"):
            target = np.full(q, ALL if coll == "allgather" else self.root_node)
            return _rows(mine, mine, target, split_offsets(self._count(rank), q, mine % q))
        if coll == "reduce-scatter":
            off = self._pieces(every, None, self.itemsize)
            return _rows(np.full(p, rank * q), np.full(p, REDUCED), every, off)
        if coll == "allreduce":
            node = np.repeat(mine, p)
            seg = np.tile(every, q)
            return _rows(node, np.full(node.size, REDUCED), seg, seg * self.nbytes)
        if coll in ("reduce", "reduce-all", "exscan"):
            return _rows([rank * q], [REDUCED], [ALL], [0])
        if coll == "reduce-segments":
            return self._segments(rank)
        if q == 1 and coll == "alltoallv":  # one node per rank: the row's displacements
            return _rows(np.full(p, rank), np.full(p, rank), every,
                         _displs(self.matrix[rank], self.sdispls)[every])
        node = np.repeat(mine, p)
        target = np.tile(every, q)
        sub = (node % q) * q + target % q
        if coll == "alltoall":
            base = (target // q) * self.nbytes
            off = base + split_offsets(self.nbytes, q * q, sub)
        else:
            row = self.matrix[rank]
            displs = _displs(row, self.sdispls)
            off = displs[target // q] + split_offsets(row[target // q], q * q, sub)
        return _rows(node, node, target, off)

    def outputs(self, rank):
        """Return ``(node, origin, target, offset)`` of the blocks rank ``rank`` copies out.

        ``offset`` is the block's first byte in the user's receive buffer (the buffer
        of ``bcast``; nothing at the root, whose buffer already holds the data).
        """
        q, p, coll = self.q, self.p, self.collective
        mine = np.arange(rank * q, (rank + 1) * q, dtype=np.int64)
        every = np.arange(p, dtype=np.int64)
        if coll == "bcast":
            if rank == self.root:
                return _none()
            return _rows([rank * q], [self.root_node], [ALL], [0])
        if coll == "scatter":
            return _rows(mine, np.full(q, self.root_node), mine,
                         split_offsets(self._count(rank), q, mine % q))
        if coll == "allgather":
            off = self._pieces(every, self.rdispls)
            return _rows(np.full(p, rank * q), every, np.full(p, ALL), off)
        if coll == "gather":
            if rank != self.root:
                return _none()
            off = self._pieces(every, self.rdispls)
            return _rows(np.full(p, self.root_node), every, np.full(p, self.root_node), off)
        if coll == "reduce-scatter":
            n = self._count(rank) // self.itemsize
            return _rows(mine, np.full(q, REDUCED), mine,
                         split_offsets(n, q, mine % q) * self.itemsize)
        if coll == "allreduce":
            node = np.full(p, rank * q)
            return _rows(node, np.full(p, REDUCED), every, every * self.nbytes)
        if coll == "reduce":
            return _rows([rank * q], [REDUCED], [ALL], [0]) if rank == self.root else _none()
        if coll == "reduce-all":
            return _rows([rank * q], [REDUCED], [ALL], [0])
        if coll == "exscan":
            return _rows([rank * q], [REDUCED], [0], [0]) if rank else _none()
        if coll == "reduce-segments":
            return self._segments(rank)
        if q == 1 and coll == "alltoallv":  # one node per rank: the column's displacements
            node = np.full(p, rank)
            return _rows(node, every, node, _displs(self.matrix[:, rank], self.rdispls)[every])
        node = np.tile(mine, p)
        origin = np.repeat(every, q)
        sub = (origin % q) * q + node % q
        if coll == "alltoall":
            off = (origin // q) * self.nbytes + split_offsets(self.nbytes, q * q, sub)
        else:
            col = self.matrix[:, rank]
            displs = _displs(col, self.rdispls)
            off = displs[origin // q] + split_offsets(col[origin // q], q * q, sub)
        return _rows(node, origin, node, off)

    def _count(self, rank):
        """Return the bytes of rank ``rank``'s piece."""
        return self.nbytes if self.counts is None else int(self.counts[rank])

    def _pieces(self, nodes, displs, itemsize=None):
        """Return where node-level blocks of ``nodes`` start in a buffer of every rank's piece.

        Rank ``r``'s piece starts at ``displs[r]`` (default: packed) and is split over
        its ``q`` nodes (``itemsize``: in whole elements).
        """
        q = self.q
        counts = self.counts if self.counts is not None else np.full(self.ranks, self.nbytes,
                                                                     dtype=np.int64)
        if q == 1 and itemsize is None:  # one node per rank: the pieces' displacements
            return _displs(counts, displs)[nodes]
        start = _displs(counts, displs)[nodes // q]
        if itemsize is None:
            return start + split_offsets(counts[nodes // q], q, nodes % q)
        return start + split_offsets(counts[nodes // q] // itemsize, q, nodes % q) * itemsize

    def _segments(self, rank):
        """The ``p`` segments of the vector, held by rank ``rank``'s first node."""
        every = np.arange(self.p, dtype=np.int64)
        off = split_offsets(self.nbytes // self.itemsize, self.p, every) * self.itemsize
        return _rows(np.full(self.p, rank * self.q), np.full(self.p, REDUCED), every, off)


def _displs(counts, displs):
    """Return byte displacements: ``displs`` when given, else the packed prefix sums."""
    if displs is not None:
        return np.asarray(displs, dtype=np.int64)
    out = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=out[1:])
    return out


def _rows(node, origin, target, offset):
    """Return the four columns as int64 arrays."""
    return tuple(np.asarray(c, dtype=np.int64) for c in (node, origin, target, offset))


def _none():
    """Return four empty int64 columns."""
    return _rows([], [], [], [])
