"""Deterministic contents of node-level blocks, so every receiver can verify every byte (pure).

A block ``(origin, target)`` (:mod:`dualmpi.collectives.schedule`) is filled with
:func:`block_pattern`; a reduction block ``(REDUCED, j)`` must end as the sum modulo
256 of every node's contribution (:func:`expected_value`).  The engine's in-process
transport (:func:`dualmpi.engine.local.run_inprocess`) verifies with them; the clients'
rank-level buffers (:mod:`dualmpi.measure.payload`) are made of them.  Nothing here
depends on a client, so the engine layer may use it.
"""

import numpy as np

from ..collectives.schedule import REDUCED

__all__ = ["block_pattern", "fill_blocks", "expected_value"]

#: Bytes generated per chunk, so a pattern needs little more memory than its payload.
_CHUNK = 1 << 16

_LOW = 0xFFFFFFFF
_SALT = 0xD1B54A32D192ED03

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


def fill_blocks(out, origin, target, offset, size, salt=0):
    """Write :func:`block_pattern` of every block ``(origin[i], target[i])`` into
    ``out[offset[i]:offset[i] + size[i]]`` (numpy over blocks of one size at a time).

    >>> out = np.zeros(7, np.uint8)
    >>> fill_blocks(out, [1, 2], [-1, 5], [0, 3], [3, 4], salt=2)
    >>> out.tolist() == block_pattern(1, -1, 3, 2).tolist() + block_pattern(2, 5, 4, 2).tolist()
    True
    """
    origin, target, offset, size = (np.asarray(c, dtype=np.int64).ravel()
                                    for c in (origin, target, offset, size))
    with np.errstate(over="ignore"):
        seed = ((origin & _LOW) << 32 ^ (target + 1) & _LOW).astype(np.uint64) * _MIX
        seed += np.uint64(salt * _SALT % (1 << 64))
    for n in np.unique(size).tolist():
        if n == 0:
            continue
        rows = np.flatnonzero(size == n)
        step = max(1, _CHUNK // n)
        for i in range(0, rows.size, step):
            part = rows[i:i + step]
            x = seed[part, None] + np.arange(n, dtype=np.uint64)
            x ^= x >> np.uint64(29)
            x *= _MIX
            x ^= x >> np.uint64(32)
            out[offset[part, None] + np.arange(n)] = x & np.uint64(0xFF)


def expected_value(key, num_nodes, size, salt=0):
    """Return the bytes block ``key`` must hold at the end (a reduction: the sum mod 256).

    >>> expected_value((REDUCED, 0), 2, 3).tolist() == (
    ...     block_pattern(0, 0, 3) + block_pattern(1, 0, 3)).tolist()
    True
    """
    if key[0] == REDUCED:
        total = np.zeros(size, dtype=np.uint8)
        for u in range(num_nodes):
            total += block_pattern(u, key[1], size, salt)
        return total
    return block_pattern(*key, size, salt)
