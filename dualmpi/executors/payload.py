"""Deterministic block contents, so every receiver can verify every byte it gets."""

import numpy as np

__all__ = ["block_pattern", "pack_blocks", "unpack_blocks"]

_MIX = np.uint64(0x9E3779B97F4A7C15)


def block_pattern(origin, target, size):
    """Return the ``size`` bytes of block ``(origin, target)`` as a uint8 array.

    The bytes depend on origin, target and position, so a misrouted, swapped or
    truncated block fails verification.

    >>> block_pattern(3, -1, 4).tolist() == block_pattern(3, -1, 4).tolist()
    True
    >>> bool((block_pattern(3, 5, 64) != block_pattern(5, 3, 64)).any())
    True
    """
    seed = ((origin & 0xFFFFFFFF) << 32 ^ (target + 1) & 0xFFFFFFFF) * int(_MIX) % (1 << 64)
    x = np.arange(size, dtype=np.uint64) + np.uint64(seed)
    x ^= x >> np.uint64(29)
    x *= _MIX
    x ^= x >> np.uint64(32)
    return (x & np.uint64(0xFF)).astype(np.uint8)


def pack_blocks(store, blocks, size, out=None):
    """Concatenate the blocks of ``store`` (dict key -> uint8 array) into one message buffer."""
    buf = np.empty(len(blocks) * size, dtype=np.uint8) if out is None else out
    for n, key in enumerate(blocks):
        buf[n * size:(n + 1) * size] = store[key]
    return buf


def unpack_blocks(store, blocks, size, buf):
    """Split a received message buffer into its blocks and put them into ``store``."""
    for n, key in enumerate(blocks):
        store[key] = buf[n * size:(n + 1) * size]
