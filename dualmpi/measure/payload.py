"""A rank's buffers of one collective call, filled with block patterns, built from its layout.

Nothing here names a collective: the description (:mod:`dualmpi.collectives.registry`)
gives the layout and the MPI method, the :class:`~dualmpi.engine.layout.Layout` says
which bytes of the user's buffers each node-level block is, and the method's own
parameter names (mpi4py's, which :class:`dualmpi.Comm` mirrors: ``buf``, ``sendbuf``,
``recvbuf``, ``root``, ``op``) say how the buffers are passed.  A block ``(origin,
target)`` holds :func:`~dualmpi.engine.patterns.block_pattern` ``(origin, target)``;
a rank's contribution to a reduction block ``(REDUCED, j)`` holds the pattern ``(rank,
j)`` and the result is every rank's combined (added modulo 256, or XOR-ed).
"""

import inspect
from dataclasses import dataclass

import numpy as np

from ..collectives.registry import get
from ..collectives.schedule import REDUCED
from ..engine.layout import Layout, pieces_per_rank
from ..engine.patterns import block_pattern, fill_blocks

__all__ = ["block_pattern", "RankBuffers", "call_of", "layout_for", "parameters", "rank_buffers"]


def call_of(name):
    """Return ``(description, algorithm)`` of the call that runs registered collective ``name``.

    >>> desc, alg = call_of("ring-allgather")
    >>> desc.mpi, alg, call_of("gather")[0].mpi
    ('Allgather', 'ring', 'Gather')
    """
    desc = get(name)
    if desc.runs_as:
        return get(desc.runs_as[0]), desc.runs_as[1]
    return desc, None


def layout_for(name, ranks, q, size, root=0):
    """Return the :class:`Layout` of ``name`` on ``ranks`` ranks of ``q`` nodes, blocks of ``size``.

    ``size`` is the node-level block; a rank's piece holds
    :func:`~dualmpi.engine.layout.pieces_per_rank` of them.  ``root`` is a rank.

    >>> layout_for("alltoall", 2, 2, 3).nbytes, layout_for("bcast", 2, 2, 3).nbytes
    (12, 3)
    """
    kind = get(name).layout
    return Layout(kind, ranks * q, q, size * pieces_per_rank(kind, q), root)


def parameters(method):
    """Return the parameter names of ``dualmpi.Comm``'s (and mpi4py's) method ``method``.

    >>> parameters("Bcast"), parameters("Gather")
    (('buf', 'root'), ('sendbuf', 'recvbuf', 'root'))
    """
    from ..comm import Comm

    return tuple(p for p in inspect.signature(getattr(Comm, method)).parameters if p != "self")


@dataclass
class RankBuffers:
    """One rank's buffers of a call: what goes in, where the result lands, what it must be.

    ``send``/``recv`` are None where the rank passes no buffer (a non-root's send buffer
    of a scatter, receive buffer of a gather); with one buffer for both (``buf``, the
    broadcast) they are the same array.  ``want`` is what ``got`` must hold after the
    call; :meth:`reset` restores the state before a call (the receive buffer cleared,
    a shared buffer back to its input).
    """

    send: np.ndarray
    recv: np.ndarray
    want: np.ndarray
    initial: np.ndarray = None

    @property
    def one(self):
        """True when the call has one buffer, in and out."""
        return self.send is not None and self.send is self.recv

    @property
    def got(self):
        """Where the result lands."""
        return self.recv

    def reset(self):
        """Clear what the last call wrote."""
        if self.one:
            self.recv[:] = self.initial
        elif self.recv is not None:
            self.recv[:] = 0

    def args(self, method, root=0, op=None):
        """Return the keyword arguments of ``method`` (its parameter names) for these buffers."""
        given = {"buf": self.recv, "sendbuf": self.send, "recvbuf": self.recv, "root": root,
                 "op": op}
        return {k: given[k] for k in parameters(method) if k in given and
                not (k == "op" and op is None)}


def _extent(lay, rows):
    """Return the bytes a buffer holding ``rows`` needs, or None when there are none."""
    _, origin, target, offset = rows
    if offset.size == 0:
        return None
    return int((offset + lay.size(origin, target)).max())


def _fill(buf, lay, rows, rank, salt, ranks, combine):
    """Write each block of ``rows`` into ``buf`` (reduction blocks: contribution or result)."""
    _, origin, target, offset = rows
    size = lay.size(origin, target)
    plain = origin != REDUCED
    fill_blocks(buf, origin[plain], target[plain], offset[plain], size[plain], salt)
    reduced = ~plain
    if combine is None:  # this rank's contribution
        fill_blocks(buf, np.full(int(reduced.sum()), rank), target[reduced], offset[reduced],
                    size[reduced], salt)
        return
    for t, a, n in zip(target[reduced].tolist(), offset[reduced].tolist(),
                       size[reduced].tolist()):
        total = np.zeros(n, dtype=np.uint8)
        for r in range(ranks):
            combine(total, block_pattern(r, t, n, salt), out=total)
        buf[a:a + n] = total


def rank_buffers(lay, rank, method, salt=0, combine=np.add):
    """Return rank ``rank``'s :class:`RankBuffers` of a call of ``method`` with layout ``lay``.

    ``combine`` (``np.add`` or ``np.bitwise_xor`` on uint8) is how reduction blocks
    combine.  ``salt`` changes every pattern (a fresh one per iteration).

    >>> lay = layout_for("gather", 2, 1, 3, root=1)
    >>> root, other = rank_buffers(lay, 1, "Gather"), rank_buffers(lay, 0, "Gather")
    >>> root.send.tolist() == block_pattern(1, 1, 3).tolist(), other.recv is None
    (True, True)
    >>> root.want[:3].tolist() == block_pattern(0, 1, 3).tolist()
    True
    >>> b = rank_buffers(layout_for("bcast", 2, 1, 4), 1, "Bcast")
    >>> b.one, b.recv.tolist(), b.want.tolist() == block_pattern(0, -1, 4).tolist()
    (True, [0, 0, 0, 0], True)
    """
    inputs, outputs = lay.inputs(rank), lay.outputs(rank)
    ins, outs = _extent(lay, inputs), _extent(lay, outputs)
    send = None if ins is None else np.zeros(ins, dtype=np.uint8)
    if send is not None:
        _fill(send, lay, inputs, rank, salt, lay.ranks, None)
    if "buf" in parameters(method):  # one buffer, in and out (the broadcast)
        buf = np.zeros(max(ins or 0, outs or 0), dtype=np.uint8)
        if send is not None:
            buf[:send.size] = send
        want = buf.copy()
        _fill(want, lay, outputs, rank, salt, lay.ranks, combine)
        return RankBuffers(buf, buf, want, buf.copy())
    if outs is None:
        return RankBuffers(send, None, None)
    want = np.zeros(outs, dtype=np.uint8)
    _fill(want, lay, outputs, rank, salt, lay.ranks, combine)
    return RankBuffers(send, np.zeros(outs, dtype=np.uint8), want)
