"""Ping-pong along a d-hop chain of real links, forwarded by the ranks in between (MPI).

The chain is the topology's route from one node to another; every rank on it relays
the message, store-and-forward (whole message per hop) or cut-through (packets
forwarded as they arrive).  The same loop with plain ``comm.Send``/``Recv`` and no
link checks is the raw mpi4py baseline.  A chain may visit a rank more than once:
:func:`bounce` is the d-hop chain between the two ends of one link (0, 1, 0, 1, ...),
which measures the forwarding cost per hop on two ranks, without oversubscription.
"""

import time

import numpy as np
from mpi4py import MPI

from ..engine.patterns import block_pattern

__all__ = ["chain", "bounce", "pingpong"]


def chain(topo, hops, src=0):
    """Return the route from ``src`` to the lowest-numbered node at distance ``hops``."""
    for v in range(topo.num_nodes):
        if topo.distance(src, v) == hops:
            return topo.route(src, v)
    raise ValueError(f"no node at distance {hops} from {src} in {topo.spec}")


def bounce(a, b, hops):
    """Return the ``hops``-link chain that goes back and forth over the link ``a``-``b``.

    Every inner node receives the whole message and sends it on, as a forwarding node
    of a routed message does, so two ranks measure ``hops`` forwarding steps.

    >>> bounce(0, 1, 3)
    [0, 1, 0, 1]
    """
    if hops < 1:
        raise ValueError(f"a chain has at least one hop, got {hops}")
    return [a if i % 2 == 0 else b for i in range(hops + 1)]


def _hold(seconds):
    """Sleep ``seconds`` (a shaped link's port time)."""
    if seconds > 0:
        time.sleep(seconds)


class _Ends:
    """Point-to-point calls of one ping-pong flavour: over the links of ``net``, or raw on ``world``."""

    def __init__(self, net, world):
        self.net, self.world = net, world

    def send(self, buf, dst):
        """Blocking send of ``buf`` to ``dst``."""
        if self.world is not None:
            self.world.Send(buf, dst, 7)
        else:
            self.net.Send(buf, dst, 7)

    def recv(self, buf, src):
        """Blocking receive into ``buf`` from ``src``."""
        if self.world is not None:
            self.world.Recv(buf, src, 7)
        else:
            self.net.Recv(buf, src, 7)


def _pieces(buf, packets):
    """Return the packet views of ``buf``."""
    n = buf.nbytes
    count = max(1, min(packets, n))
    cuts = [n * k // count for k in range(count + 1)]
    return [buf[a:b] for a, b in zip(cuts, cuts[1:])]


def _leg(ends, buf, me, path, forward, shape, switching, packets):
    """Move ``buf`` one way along ``path`` (``forward`` or back), as this rank's part of it."""
    seq = path if forward else path[::-1]
    for i in [k for k, node in enumerate(seq) if node == me]:  # in order: a rank may recur
        _position(ends, buf, seq, i, shape, switching, packets)


def _position(ends, buf, seq, i, shape, switching, packets):
    """Play position ``i`` of the chain ``seq``: send, receive, or receive and forward."""
    last = len(seq) - 1
    n = buf.nbytes
    ct = switching == "cut-through"
    if i == 0:
        if shape is not None:
            _hold(shape.ts + n * shape.tw + (shape.th if ct else 0.0))
        for piece in _pieces(buf, packets if ct else 1):
            ends.send(piece, seq[1])
    elif i == last:
        for piece in _pieces(buf, packets if ct else 1):
            ends.recv(piece, seq[i - 1])
    else:
        if ct:
            for k, piece in enumerate(_pieces(buf, packets)):
                ends.recv(piece, seq[i - 1])
                if k == 0 and shape is not None:
                    _hold(shape.th)
                ends.send(piece, seq[i + 1])
        else:
            ends.recv(buf, seq[i - 1])
            if shape is not None:
                _hold(shape.ts + n * shape.tw)
            ends.send(buf, seq[i + 1])


def pingpong(net, path, size, iters, reps=3, warmup=2, raw=None, shape=None,
             switching="store-and-forward", packets=8):
    """Return one-way times over ``path`` (seconds, min/avg/max over ``reps`` timed blocks).

    OSU method: warm-up round trips, a barrier before each timed block (outside the
    timer), ``iters`` round trips per block, one-way time = round trip / 2.  The
    bytes that come back are checked against what was sent.  ``raw`` is a plain
    communicator (e.g. ``COMM_WORLD``) for the unchecked baseline.  Same dict on
    every rank.  ``net`` is a :class:`dualmpi.Comm` with one node per rank.
    """
    if len(set(path)) < len(path) and switching == "cut-through":
        # a rank would have to send on while it still receives its own earlier pieces
        raise ValueError("a chain that visits a rank twice is timed store-and-forward only")
    comm, me = net.comm, net.Get_rank()
    ends = _Ends(net, raw)
    on_chain = me in path
    buf = block_pattern(path[0], path[-1], size) if me == path[0] else np.zeros(size, np.uint8)
    sent = buf.copy()
    blocks = []
    for rep in range(reps + 1):
        net._control_barrier()
        count = warmup if rep == 0 else iters
        t0 = MPI.Wtime()
        for _ in range(count if on_chain else 0):
            _leg(ends, buf, me, path, True, shape, switching, packets)
            _leg(ends, buf, me, path, False, shape, switching, packets)
        if rep and me == path[0]:
            blocks.append((MPI.Wtime() - t0) / (2 * count))
    ok = 1 if me != path[0] or np.array_equal(buf, sent) else 0
    verdict = np.zeros(1, dtype=np.int64)
    net._control_allreduce(np.array([1 - ok], dtype=np.int64), verdict, MPI.MAX)
    ok = int(verdict[0] == 0)
    mine = np.array([min(blocks), np.mean(blocks), max(blocks)] if me == path[0] else [0.0] * 3)
    stats = np.zeros(3)
    net._control_allreduce(mine, stats, MPI.MAX)  # only the chain's first rank has non-zero times
    return {"kind": "emulated" if raw is None else "raw", "src": path[0], "dst": path[-1],
            "hops": len(path) - 1, "size": size, "iters": iters, "reps": reps,
            "verified": bool(ok), "t_min": float(stats[0]), "t_avg": float(stats[1]),
            "t_max": float(stats[2])}
