"""The papers' step cost of what ran: collectives' schedules at their real message sizes, and
point-to-point messages (pure numpy).

A collective's schedule is a sequence of paper steps; in a step every node sends at most one
message, over ``d`` links (one hop round each).  The papers price a step at ``t_s + m t_w +
d t_h`` with ``m`` its largest message and ``d`` its longest path, and a collective at the sum
over its steps::

    T = steps * t_s + step_bytes * t_w + hop_rounds * t_h

``steps`` and ``hop_rounds`` are what :meth:`dualmpi.Comm.stats` counts (``steps``,
``rounds``); ``step_bytes`` (:func:`step_bytes`) sums each step's largest message in bytes,
every block at the size the call gave it -- the ``tw`` of ``dualmpi simulate``'s ``model``
times the block size when blocks are equal, and exact for the v-variants.  A point-to-point
message of ``m`` bytes over a route of ``d`` links costs ``t_s + m t_w + d t_h``
(cut-through), :func:`p2p_time`.

References
----------
Y. Li, S. Peng, W. Chu, "Efficient Collective Communications in Dual-cube", Section 3
(one-port, cut-through, T = t_s + m t_w + d t_h).
"""

import numpy as np

__all__ = ["step_bytes", "collective_time", "p2p_time"]


def step_bytes(bounds, steps, msg, sizes):
    """Return the sum over a schedule's steps of the step's largest message, in bytes.

    Parameters
    ----------
    bounds : array_like of int
        ``num_rounds + 1`` offsets: round ``k`` is rows ``bounds[k]:bounds[k + 1]``.
    steps : sequence of int
        The paper step of each round.
    msg : numpy.ndarray of int
        Per row, the message it belongs to within its round (rows of one message move
        together over one link).
    sizes : numpy.ndarray of int
        Per row, the bytes of its block.

    Returns
    -------
    int

    Examples
    --------
    Two rounds of step 0 (messages of 3 and 5 bytes, then one of 4) and one of step 1
    (two blocks of 2 bytes in one message):

    >>> step_bytes([0, 2, 3, 5], [0, 0, 1], np.array([0, 1, 0, 0, 0]),
    ...            np.array([3, 5, 4, 2, 2]))
    9
    """
    bounds = np.asarray(bounds, dtype=np.int64)
    msg = np.asarray(msg, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    largest = {}
    for k, step in enumerate(steps):
        a, b = int(bounds[k]), int(bounds[k + 1])
        if a == b:
            continue
        per_message = np.bincount(msg[a:b], weights=sizes[a:b])
        top = int(per_message.max())
        if top > largest.get(step, -1):
            largest[step] = top
    return int(sum(largest.values()))


def collective_time(steps, step_bytes_, hop_rounds, clock):
    """Return ``steps*t_s + step_bytes*t_w + hop_rounds*t_h`` in seconds (``clock``: ``{ts, tw,
    th}``).

    >>> collective_time(3, 3000, 3, {"ts": 1e-6, "tw": 1e-9, "th": 1e-7}) * 1e6
    6.3
    """
    return steps * clock["ts"] + step_bytes_ * clock["tw"] + hop_rounds * clock["th"]


def p2p_time(messages, nbytes, hops, clock):
    """Return the cost of point-to-point messages one after another: each ``t_s + m t_w + d t_h``,
    so ``messages*t_s + nbytes*t_w + hops*t_h`` with ``nbytes`` and ``hops`` summed over them.

    >>> round(p2p_time(2, 1000, 3, {"ts": 2e-6, "tw": 1e-9, "th": 5e-8}) * 1e6, 6)
    5.15
    """
    return messages * clock["ts"] + nbytes * clock["tw"] + hops * clock["th"]
