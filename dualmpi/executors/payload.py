"""Deterministic block contents, so every receiver can verify every byte it gets."""

import numpy as np

__all__ = ["block_pattern", "expected_value", "rank_buffers"]

#: Bytes generated per chunk, so a pattern needs little more memory than its payload.
_CHUNK = 1 << 16

#: Same value as :data:`dualmpi.collectives.schedule.REDUCED` (kept here to stay import-light).
_REDUCED = -2

_MIX = np.uint64(0x9E3779B97F4A7C15)


def block_pattern(origin, target, size, salt=0, out=None):
    """Return the ``size`` bytes of block ``(origin, target)`` as a uint8 array.

    The bytes depend on origin, target, position and ``salt`` (a per-iteration
    pattern), so a misrouted, swapped, stale or truncated block fails verification.
    Generated in chunks into ``out`` (a uint8 array of ``size``) when given.

    >>> block_pattern(3, -1, 4).tolist() == block_pattern(3, -1, 4).tolist()
    True
    >>> bool((block_pattern(3, 5, 64) != block_pattern(5, 3, 64)).any())
    True
    """
    seed = ((origin & 0xFFFFFFFF) << 32 ^ (target + 1) & 0xFFFFFFFF) * int(_MIX) % (1 << 64)
    seed = np.uint64((seed + salt * 0xD1B54A32D192ED03) % (1 << 64))
    out = np.empty(size, dtype=np.uint8) if out is None else out
    for start in range(0, size, _CHUNK):
        x = np.arange(start, min(size, start + _CHUNK), dtype=np.uint64) + seed
        x ^= x >> np.uint64(29)
        x *= _MIX
        x ^= x >> np.uint64(32)
        out[start:start + x.size] = x & np.uint64(0xFF)
    return out


def expected_value(key, num_nodes, size, salt=0):
    """Return the bytes block ``key`` must hold at the end (a reduction: the sum mod 256)."""
    if key[0] == _REDUCED:
        total = np.zeros(size, dtype=np.uint8)
        for u in range(num_nodes):
            total += block_pattern(u, key[1], size, salt)
        return total
    return block_pattern(*key, size, salt)


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
