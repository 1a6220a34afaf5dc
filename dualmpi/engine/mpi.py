"""The engine's MPI transport: bound plans as persistent requests on the graph communicator.

Only this module (and the native baseline) imports :mod:`mpi4py`.  The wire traffic
goes over a distributed-graph communicator whose edges are exactly the pairs of
ranks joined by a link of the network (with one node per rank: the links).  A round
of a plan is one ``Startall``/``Waitall`` over persistent requests created once per
plan and size; a message made of several segments of the store uses an
``MPI_Type_create_hindexed`` datatype, so received blocks land in their slots and
forwarded blocks leave from where they arrived.  Nothing in the round loop
allocates or builds a Python object per message.
"""

import time
import zlib

import numpy as np
from mpi4py import MPI

from ..errors import DualmpiError
from .core import copy_segments
from .watchdog import Watchdog

__all__ = ["MPITransport", "MPIRunner", "rank_graph"]

_TAG_MOD = 1 << 15


def rank_graph(topo, q, rank):
    """Return the ranks adjacent to ``rank``: those playing a neighbour of one of its nodes.

    >>> from dualmpi.topology import Hypercube
    >>> rank_graph(Hypercube(3), 1, 0), rank_graph(Hypercube(3), 2, 0)
    ([1, 2, 4], [1, 2])
    """
    peers = set()
    for u in range(rank * q, (rank + 1) * q):
        peers.update(int(v) // q for v in topo.neighbors(u))
    peers.discard(rank)
    return sorted(peers)


class MPITransport:
    """Builds :class:`MPIRunner` objects over the graph communicator of one mapping.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The ranks that play the network (the user's communicator; not modified).
    topo : Topology
        The network.
    q : int
        Nodes per rank.
    watchdog : float
        Seconds any blocking wait may last before the job is aborted (0: never).
    """

    def __init__(self, comm, topo, q, watchdog=120.0):
        self.topo, self.q = topo, q
        self.rank = comm.Get_rank()
        self.peers = rank_graph(topo, q, self.rank)
        self.graph = comm.Create_dist_graph_adjacent(self.peers, self.peers, reorder=False)
        if self.graph.Get_rank() != self.rank:  # pragma: no cover - reorder=False guarantees it
            raise DualmpiError("the graph communicator renumbered the ranks")
        self._peer_set = frozenset(self.peers)
        label = f"rank {self.rank}" + (f" (nodes {self.rank * q}..{self.rank * q + q - 1})"
                                       if q > 1 else f" (node {self.rank})")
        self.watchdog = Watchdog(label, watchdog, self.graph.Abort)

    def prepare(self, bound, plan, verify=False, shape=None, drop=None):
        """Return an :class:`MPIRunner` of ``bound`` (options: see :class:`MPIRunner`)."""
        for rnd in bound.rounds:
            for peer, _, _ in rnd.sends + rnd.recvs:
                if peer not in self._peer_set:  # pragma: no cover - plans follow the links
                    raise DualmpiError(f"rank {self.rank} would exchange with rank {peer}, "
                                       "which plays no neighbour of its nodes")
        return MPIRunner(self, bound, plan, verify, shape, drop)

    def control(self, what, call, *args):
        """Run a blocking control-plane call (barrier, reduction) under the watchdog."""
        self.watchdog.arm(what, ())
        try:
            return call(*args)
        finally:
            self.watchdog.disarm()

    def free(self):
        """Stop the watchdog and free the graph communicator."""
        self.watchdog.close()
        if self.graph != MPI.COMM_NULL:
            self.graph.Free()


class MPIRunner:
    """One bound plan ready to run: its store, persistent requests and local moves.

    Options (all free when off):

    ``verify``
        Every message carries a CRC-32 of its payload in a trailer; receivers check it
        and count failures (:attr:`checksum_failures`).
    ``shape``
        ``(ts, tw, th)`` seconds: before sending, a rank holds its port for
        ``ts + n*tw`` per message (``th`` more per forwarded one).
    ``drop``
        ``(round, node)``: that node's rank skips the sends of that round (a fault to
        show the watchdog at work).
    """

    def __init__(self, transport, bound, plan, verify=False, shape=None, drop=None):
        self.transport, self.bound, self.plan = transport, bound, plan
        self.calls = 0
        self.checksum_failures = 0
        self.verify, self.shape = verify, shape
        graph = transport.graph
        nmsg = sum(len(r.sends) + len(r.recvs) for r in bound.rounds)
        extra = 8 * nmsg if verify else 0
        self.store = np.zeros(bound.nbytes + extra, dtype=np.uint8)
        self._types, self._reqs, self._loop, self._checks = [], [], [], []
        crc_at = bound.nbytes
        drop_round = None
        if drop is not None and drop[1] // plan.q == plan.rank:
            drop_round = drop[0]
        for rnd in bound.rounds:
            reqs, checks, crcs = [], [], []
            tag = rnd.index % _TAG_MOD
            peers = tuple(peer for peer, _, _ in rnd.recvs)
            for peer, offs, lens in rnd.recvs:
                if verify:
                    checks.append((offs, lens, crc_at))
                    offs, lens, crc_at = np.r_[offs, crc_at], np.r_[lens, 4], crc_at + 8
                reqs.append(graph.Recv_init(self._spec(offs, lens), peer, tag))
            for peer, offs, lens in rnd.sends:
                if rnd.index == drop_round:
                    continue
                if verify:
                    crcs.append((offs, lens, crc_at))
                    offs, lens, crc_at = np.r_[offs, crc_at], np.r_[lens, 4], crc_at + 8
                reqs.append(graph.Send_init(self._spec(offs, lens), peer, tag))
            hold = 0.0
            if shape is not None:
                ts, tw, th = shape
                hold = sum(ts + tw * int(lens.sum()) + th for _, _, lens in rnd.sends)
            self._reqs += reqs
            self._loop.append((rnd.index, reqs, _mover(self.store, rnd.copies),
                               _combiner(self.store, rnd.combines), peers, crcs, hold))
            self._checks.append(checks)
        self._fast = not (verify or shape is not None)
        user, at, length = bound.copy_in
        self.copy_in = (at, user, length)  # (destination, source, length) for copy_segments
        self.copy_out = bound.copy_out

    def _spec(self, offs, lens):
        """Return an mpi4py buffer spec for the segments ``(offs, lens)`` of the store."""
        if offs.size == 0:
            return [self.store[0:0], MPI.BYTE]
        if offs.size == 1:
            a = int(offs[0])
            return [self.store[a:a + int(lens[0])], MPI.BYTE]
        dtype = MPI.BYTE.Create_hindexed(lens.tolist(), offs.tolist()).Commit()
        self._types.append(dtype)
        return [self.store, 1, dtype]

    def run(self, send=None, recv=None):
        """Run the plan once: copy ``send`` in, every round, copy ``recv`` out (uint8 arrays)."""
        store = self.store
        if send is not None:
            copy_segments(store, send, self.copy_in)
        wd = self.transport.watchdog
        watched = wd.deadline > 0
        startall, waitall = MPI.Prequest.Startall, MPI.Request.Waitall
        if self._fast and not watched:
            for _, reqs, move, combine, _, _, _ in self._loop:
                startall(reqs)
                if move is not None:
                    move()
                waitall(reqs)
                if combine is not None:
                    combine()
        else:
            for (k, reqs, move, combine, peers, crcs, hold), checks in zip(self._loop,
                                                                         self._checks):
                if hold:
                    time.sleep(hold)
                for offs, lens, at in crcs:
                    store[at:at + 4].view(np.uint32)[0] = _crc(store, offs, lens)
                if watched:
                    wd.arm(k, peers)
                startall(reqs)
                if move is not None:
                    move()
                waitall(reqs)
                if watched:
                    wd.disarm()
                for offs, lens, at in checks:
                    if store[at:at + 4].view(np.uint32)[0] != _crc(store, offs, lens):
                        self.checksum_failures += 1
                if combine is not None:
                    combine()
        if recv is not None:
            copy_segments(recv, store, self.copy_out)
        self.calls += 1

    def free(self):
        """Free the persistent requests and datatypes."""
        for req in self._reqs:
            if req != MPI.REQUEST_NULL:
                req.Free()
        for dtype in self._types:
            dtype.Free()
        self._reqs, self._types, self._loop = [], [], []


def _crc(store, offs, lens):
    """Return the CRC-32 of the segments of ``store``."""
    crc = 0
    for a, n in zip(offs.tolist(), lens.tolist()):
        crc = zlib.crc32(store[a:a + n], crc)
    return crc


def _mover(store, copies):
    """Return a function doing a round's local moves (between a rank's own nodes), or None."""
    src, dst, lens = copies
    if src.size == 0:
        return None
    if src.size > 4 and np.all(lens == lens[0]) and lens[0] <= 256:
        width = int(lens[0])
        span = np.arange(width, dtype=np.int64)
        s_idx = src[:, None] + span
        d_idx = dst[:, None] + span

        def move():
            store[d_idx] = store[s_idx]
        return move
    segs = (dst, src, lens)

    def move():
        copy_segments(store, store, segs)
    return move


def _combiner(store, combines, op=None):
    """Return a function adding received reduction blocks into their slots (bytes mod 256)."""
    src, dst, lens = combines
    if src.size == 0:
        return None
    pairs = list(zip(src.tolist(), dst.tolist(), lens.tolist()))

    def combine():
        for a, b, n in pairs:
            target = store[b:b + n]
            np.add(target, store[a:a + n], out=target)
    return combine
