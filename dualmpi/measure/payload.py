"""Rank-level buffers of one collective call made of block patterns, for dualmpi's clients."""

import numpy as np

from ..engine.patterns import block_pattern

__all__ = ["block_pattern", "rank_buffers"]


def rank_buffers(collective, ranks, rank, root, nbytes, salt=0):
    """Return ``(send, want)``: a rank's send buffer and the receive buffer it must end with.

    Rank-level patterns for a client of :class:`dualmpi.Comm`: piece ``(a, b)`` (from rank
    ``a`` for rank ``b``; ``b = -1`` for data meant for all) is ``block_pattern(a, b)``.
    ``bcast``: ``send`` is the buffer (the root's pattern, zeros elsewhere);
    ``nbytes`` is the bytes of one piece (of the whole buffer for ``bcast``).

    >>> send, want = rank_buffers("alltoall", 2, 1, 0, 3)
    >>> bool((want[3:] == block_pattern(1, 1, 3)).all()), send.size
    (True, 6)
    """
    def pieces(pairs):
        out = np.empty(len(pairs) * nbytes, dtype=np.uint8)
        for i, (a, b) in enumerate(pairs):
            block_pattern(a, b, nbytes, salt, out[i * nbytes:(i + 1) * nbytes])
        return out

    if collective == "bcast":
        want = block_pattern(root, -1, nbytes, salt)
        return (want.copy() if rank == root else np.zeros(nbytes, np.uint8)), want
    if collective == "scatter":
        send = pieces([(root, d) for d in range(ranks)]) if rank == root else None
        return send, block_pattern(root, rank, nbytes, salt)
    if collective == "allgather":
        return block_pattern(rank, -1, nbytes, salt), pieces([(s, -1) for s in range(ranks)])
    if collective == "alltoall":
        return (pieces([(rank, d) for d in range(ranks)]),
                pieces([(s, rank) for s in range(ranks)]))
    if collective == "allreduce":  # segment j of every rank, summed mod 256
        send = pieces([(rank, j) for j in range(ranks)])
        want = np.zeros(ranks * nbytes, dtype=np.uint8)
        for s in range(ranks):
            want += pieces([(s, j) for j in range(ranks)])
        return send, want
    raise ValueError(f"unknown collective {collective!r}")
