"""Deterministic block contents, so every receiver can verify every byte it gets."""

import numpy as np

__all__ = ["block_pattern", "initial_value", "expected_value", "pack_blocks", "unpack_blocks"]

#: Same value as :data:`dualmpi.collectives.schedule.REDUCED` (kept here to stay import-light).
_REDUCED = -2

_MIX = np.uint64(0x9E3779B97F4A7C15)


def block_pattern(origin, target, size, salt=0):
    """Return the ``size`` bytes of block ``(origin, target)`` as a uint8 array.

    The bytes depend on origin, target, position and ``salt`` (a per-iteration
    pattern), so a misrouted, swapped, stale or truncated block fails verification.

    >>> block_pattern(3, -1, 4).tolist() == block_pattern(3, -1, 4).tolist()
    True
    >>> bool((block_pattern(3, 5, 64) != block_pattern(5, 3, 64)).any())
    True
    """
    seed = ((origin & 0xFFFFFFFF) << 32 ^ (target + 1) & 0xFFFFFFFF) * int(_MIX) % (1 << 64)
    seed = (seed + salt * 0xD1B54A32D192ED03) % (1 << 64)
    x = np.arange(size, dtype=np.uint64) + np.uint64(seed)
    x ^= x >> np.uint64(29)
    x *= _MIX
    x ^= x >> np.uint64(32)
    return (x & np.uint64(0xFF)).astype(np.uint8)


def initial_value(key, u, size, salt=0):
    """Return the bytes node ``u`` starts with for block ``key``.

    A reduction segment ``(REDUCED, j)`` starts as node ``u``'s own contribution
    ``block_pattern(u, j)``; every other block is its pattern.
    """
    if key[0] == _REDUCED:
        return block_pattern(u, key[1], size, salt)
    return block_pattern(*key, size, salt)


def expected_value(key, num_nodes, size, salt=0):
    """Return the bytes block ``key`` must hold at the end (a reduction: the sum mod 256)."""
    if key[0] == _REDUCED:
        total = np.zeros(size, dtype=np.uint8)
        for u in range(num_nodes):
            total += block_pattern(u, key[1], size, salt)
        return total
    return block_pattern(*key, size, salt)


def pack_blocks(store, blocks, size, out=None):
    """Concatenate the blocks of ``store`` (dict key -> uint8 array) into one message buffer."""
    buf = np.empty(len(blocks) * size, dtype=np.uint8) if out is None else out
    for n, key in enumerate(blocks):
        buf[n * size:(n + 1) * size] = store[key]
    return buf


def unpack_blocks(store, blocks, size, buf, reduce=False):
    """Split a received message buffer into its blocks and put (or, reducing, add) them into ``store``."""
    for n, key in enumerate(blocks):
        part = buf[n * size:(n + 1) * size]
        if reduce:
            store[key] = store[key] + part  # uint8 arithmetic wraps: the sum mod 256
        else:
            store[key] = part
