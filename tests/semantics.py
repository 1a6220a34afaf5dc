"""MPI's semantics of the rooted and all-to-all collectives spelled out per collective: the
oracle the layouts and the clients' buffers are checked against (pure, independent of them)."""

import numpy as np

from dualmpi.engine.patterns import block_pattern

__all__ = ["rank_buffers"]


def rank_buffers(collective, ranks, rank, root, nbytes):
    """Return ``(send, want)`` of one rank by MPI's semantics, spelled out per collective.

    The oracle the layouts are checked against (independent of them): piece ``(a, b)``
    (from rank ``a`` for rank ``b``; ``b = -1``: for all) is ``block_pattern(a, b)``;
    ``nbytes`` is one piece (the whole buffer of ``bcast``, which is ``send``).
    """
    def pieces(pairs):
        return np.concatenate([block_pattern(a, b, nbytes) for a, b in pairs] or
                              [np.zeros(0, np.uint8)])

    if collective == "bcast":
        want = block_pattern(root, -1, nbytes)
        return (want.copy() if rank == root else np.zeros(nbytes, np.uint8)), want
    if collective == "scatter":
        send = pieces([(root, d) for d in range(ranks)]) if rank == root else None
        return send, block_pattern(root, rank, nbytes)
    if collective == "gather":
        want = pieces([(s, root) for s in range(ranks)]) if rank == root else None
        return block_pattern(rank, root, nbytes), want
    if collective == "allgather":
        return block_pattern(rank, -1, nbytes), pieces([(s, -1) for s in range(ranks)])
    if collective == "alltoall":
        return (pieces([(rank, d) for d in range(ranks)]),
                pieces([(s, rank) for s in range(ranks)]))
    raise ValueError(collective)
