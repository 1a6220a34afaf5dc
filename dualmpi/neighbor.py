"""Neighbourhood collectives whose neighbours are the ranks a node's links lead to."""

# The argument rules mirror mpi4py 4.1.2 (src/mpi4py/MPI.src/msgbuffer.pxi: for_neighbor_allgather,
# for_neighbor_alltoall, for_neighbor_alltoallw; msgpickle.pxi: PyMPI_neighbor_allgather and
# PyMPI_neighbor_alltoall; Comm.pyx: Distgraphcomm.Get_dist_neighbors(_count)).  mpi4py is
# imported lazily: importing this module does not initialize MPI.

import ctypes
import time
import weakref

import numpy as np

from . import msgbuffer
from .engine import recall
from .engine.inflight import IN_FLIGHT
from .errors import DualmpiError, InputError

__all__ = [
    "neighbors",
    "Get_topology",
    "Get_dist_neighbors",
    "Get_dist_neighbors_count",
    "Neighbor_allgather",
    "Neighbor_allgatherv",
    "Neighbor_alltoall",
    "Neighbor_alltoallv",
    "Neighbor_alltoallw",
    "Ineighbor_allgather",
    "Ineighbor_allgatherv",
    "Ineighbor_alltoall",
    "Ineighbor_alltoallv",
    "Ineighbor_alltoallw",
    "neighbor_allgather",
    "neighbor_alltoall",
    "attach",
    "free",
    "REMEMBERED",
    "IREMEMBERED",
    "NX_MAX",
]

#: Every message starts with this many int64 words: the call's code (negated when the sender
#: rejected its arguments), the bytes and the type-signature key the sender expects from the
#: receiver (-1 and 0: anything), and the bytes and type-signature key of the payload that
#: follows.
HEADER_WORDS = 5
_HEADER_BYTES = 8 * HEADER_WORDS
_ANY = -1
#: A blocking buffer call's payload of this many bytes or more goes as a message of its own,
#: right after its header (same tag, so MPI delivers them in that order): contiguous, where
#: header and payload in one hindexed message are copied through Open MPI's buffers.  Measured
#: on 2 ranks of one machine (load 0.0, medians of 9 × 400 exchanges, a send and a receive each
#: way): one hindexed message against header and payload apart 4.3 against 4.3 µs at 8 KiB, 5.9
#: against 4.8 at 16 KiB, 13.2 against 6.6 at 64 KiB, 40.3 against 13.5 at 256 KiB (a plain
#: contiguous message: 3.3, 3.7, 5.8, 12.1); below 8 KiB one message is faster (3.9 against
#: 4.2 at 4 KiB).  The header says so (its code plus :data:`_ALONE`); the receiver posts one
#: receive for both and, when the header that came announces a payload of its own
#: (:func:`_follows`), the payload's.  The same for a nonblocking call, whose repeats post
#: that receive in C as soon as the header is in (``rounds.c``'s ``dualmpi_ntest`` and
#: ``dualmpi_nwait``): until they did, a nonblocking receiver posted it at its next test or
#: wait from Python, and nonblocking calls split from 256 KiB; from 64 KiB then, on Q_1 their
#: 64- and 128-KiB rows took 0.61-0.78 of that time, on D_2 0.46-0.72 (docs/performance.md).
#: From 4 KiB since the runs of 2026-12-07: Open MPI moved one hindexed message of 4-32 KiB
#: 2-3x slower in some jobs than in others, most of them in some hours (C loops of one
#: exchange: a 16-KiB payload and an 8-byte block in 2 hindexed segments, 11.2-12.2 us in 11
#: of 31 jobs, 4.0-4.3 in the others; contiguous, 5.0-6.0 in every job), and the
#: neighbourhood rows at 4-16 KiB with it (1.9-2.1x native in 5 of 7 jobs); apart from 4 KiB
#: they read 0.92-1.14x native at 4-32 KiB on Q_1 (docs/performance.md, "Mid-sized
#: messages apart").
SPLIT = 4096
#: A header's code is the call's plus this when its payload follows as a message of its own.
_ALONE = 16

#: Tags cycle through this many values: call ``k`` of a communicator uses tag ``1 + k % TAGS``
#: (every rank counts its neighbourhood calls alike, as MPI requires collectives to be called
#: in the same order), so a call never takes a message of another call still in flight.
TAGS = 32000

#: The most neighbours a compiled exchange (:class:`_Fast`) takes; the fields of its argument
#: array and its three codes other than an MPI error (``rounds.c``: ``dualmpi_nexchange``).
NX_MAX = 30
_NX_FIELDS = 25
_NX_BUSY, _NX_CHECK, _NX_PENDING = -1, -2, -3
_INT_MAX = 2 ** 31 - 1  # (the compiled exchange counts a payload sent alone in bytes, an int)

_CODES = {
    "Neighbor_allgather": 1,
    "Neighbor_allgatherv": 2,
    "Neighbor_alltoall": 3,
    "Neighbor_alltoallv": 4,
    "Neighbor_alltoallw": 5,
    "neighbor_allgather": 6,
    "neighbor_alltoall": 7,
}
_NAMES = {code: name for name, code in _CODES.items()}
#: The buffer calls' codes are 1..``_BUFFER_CODES`` (the object calls never split a message).
_BUFFER_CODES = 5
#: The buffer methods whose blocking repeats :class:`dualmpi.Comm` matches in C
#: (``net._m<method>``, installed by :func:`_fast`).
REMEMBERED = ("Neighbor_allgather", "Neighbor_allgatherv", "Neighbor_alltoall",
              "Neighbor_alltoallv", "Neighbor_alltoallw")
#: The nonblocking methods whose repeats :class:`dualmpi.Comm` starts from a matcher in C
#: (``net._m<method>``, installed by :func:`_ifast`; it returns the request, or None when the
#: call is not the remembered one).
IREMEMBERED = tuple("I" + m[0].lower() + m[1:] for m in REMEMBERED)


_MPI = []


def _mpi():
    """Return ``mpi4py.MPI`` (imported on first use)."""
    if not _MPI:
        from mpi4py import MPI

        _MPI.append(MPI)
    return _MPI[0]


# --------------------------------------------------------------------------------------------
# Who the neighbours are (pure: no communication)


def neighbors(topo, q, rank):
    """Return the neighbour ranks of ``rank`` and, per neighbour, the link its messages count on.

    With one node per rank (``q == 1``) the neighbours are the node's links in the
    topology's dimension order, ``topo.neighbors(rank)`` (dimension 1 first, as the papers
    number them; duplicates and the node itself dropped).  With ``q > 1`` nodes per rank
    they are the ranks that play a neighbour of one of this rank's nodes, in ascending
    order (:func:`dualmpi.engine.mpi.rank_graph`); each such rank's messages are counted
    on the first link leading to it: this rank's lowest node with a neighbour there, and
    that node's first such neighbour in dimension order.

    Parameters
    ----------
    topo : Topology
    q : int
        Nodes per rank.
    rank : int

    Returns
    -------
    ranks : tuple of int
        Sources and destinations alike (every link joins its ends both ways).
    links : tuple of (int, int)
        ``(u, v)`` per neighbour: the directed node link of :meth:`dualmpi.Comm.stats`.

    Examples
    --------
    >>> from dualmpi.topology import from_spec
    >>> neighbors(from_spec("hypercube:n=3"), 1, 2)
    ((3, 0, 6), ((2, 3), (2, 0), (2, 6)))
    >>> neighbors(from_spec("dualcube:r=2"), 2, 2)
    ((0, 3), ((4, 0), (4, 6)))
    """
    ranks, links = [], {}
    for u in range(rank * q, (rank + 1) * q):
        for v in topo.neighbors(u):
            r = int(v) // q
            if r != rank and r not in links:
                links[r] = (u, int(v))
                ranks.append(r)
    if q > 1:
        ranks.sort()
    return tuple(ranks), tuple(links[r] for r in ranks)


def _peers(net):
    """Return ``(ranks, links)`` of ``net`` (a :class:`dualmpi.Comm`), computed once."""
    got = net.__dict__.get("_neighbor_peers")
    if got is None:
        got = net._neighbor_peers = neighbors(net.topology, net.q, net.rank)
    return got


def Get_topology(net):
    """Return ``MPI.DIST_GRAPH``: the neighbourhood is a distributed graph (as mpi4py's)."""
    return _mpi().DIST_GRAPH


def Get_dist_neighbors_count(net):
    """Return ``(indegree, outdegree, weighted)``: ``(d, d, False)``, as mpi4py's
    ``Distgraphcomm.Get_dist_neighbors_count`` (``d`` neighbours, see :func:`neighbors`)."""
    d = len(_peers(net)[0])
    return (d, d, False)


def Get_dist_neighbors(net):
    """Return ``(sources, destinations, None)``, as mpi4py's ``Distgraphcomm.Get_dist_neighbors``
    for an unweighted graph: the same list twice (see :func:`neighbors` for its order)."""
    ranks = list(_peers(net)[0])
    return (ranks, list(ranks), None)


# --------------------------------------------------------------------------------------------
# The wire: a duplicate of the graph communicator, made with the communicator


class _Wire:
    """This rank's neighbourhood channel: a communicator whose edges are links, and a call count
    (``count[0]``, an array: a compiled exchange, :class:`_Fast`, advances it too)."""

    __slots__ = ("comm", "count")

    def __init__(self, comm):
        self.comm, self.count = comm, np.zeros(1, dtype=np.int64)

    def tag(self):
        """Return ``(sequence number, tag)`` of the next call (see :data:`TAGS`)."""
        seq = int(self.count[0])
        self.count[0] = seq + 1
        return seq, 1 + seq % TAGS


def attach(net):
    """Make ``net``'s neighbourhood communicator: a duplicate of the graph communicator.

    Collective over the ranks, under the watchdog; meant for the end of
    :class:`dualmpi.Comm`'s set-up (once made, it is kept until :func:`free`).  Made
    later, by the first neighbourhood call, it would make that call wait until every rank
    makes it, even an ``Ineighbor_*`` call, and a rank still waiting for a nonblocking
    collective that needs this rank then never gets there.
    """
    if net._engine is None:
        raise DualmpiError("dualmpi.Comm: the communicator was freed")
    wire = net.__dict__.get("_neighbor_wire")
    if wire is None:
        tr = net._transport
        wire = net._neighbor_wire = _Wire(tr.control(
            "the neighbourhood communicator's set-up", tr.graph.Dup))
    return wire


def _wire(net, method):
    """Return ``net``'s :class:`_Wire` (made now by :func:`attach` if the set-up did not)."""
    if net._engine is None:
        raise DualmpiError(f"{method}: the communicator was freed")
    wire = net.__dict__.get("_neighbor_wire")
    return wire if wire is not None else attach(net)


def free(net):
    """Finish ``net``'s exchanges in flight and free its neighbourhood communicator (collective).

    To be called by :meth:`dualmpi.Comm.Free` before the transport is freed.
    """
    prog = net.__dict__.pop("_neighbor_progress", None)
    if prog is not None:
        prog.free()
    for memo in net.__dict__.pop("_neighbor_memos", {}).values():
        memo.free()
    wire = net.__dict__.pop("_neighbor_wire", None)
    if wire is not None:
        wire.comm.Free()


# --------------------------------------------------------------------------------------------
# Progress: exchanges in flight advance with (and alongside) dualmpi's nonblocking collectives


class _Progress:
    """The exchanges in flight of one communicator.

    It joins the engine's list of live progress engines
    (:data:`dualmpi.engine.nonblocking._LIVE`), with the interface those lists are read
    through (``active`` exchanges with their posted ``reqs``, ``poll``, ``_fail``,
    ``_mpi_error``, ``transport``), so any test or wait of any dualmpi request advances
    the exchanges too, and a rank that must block waits (``MPI_Waitany``) on every posted
    message at once, under the watchdog (:func:`dualmpi.engine.nonblocking.block`).
    """

    def __init__(self, transport):
        from .engine import nonblocking

        self.nb = nonblocking
        self.transport, self.rank = transport, transport.rank
        self.active = []
        self._busy = False
        #: the start and the head of the wait of a nonblocking repeat in C (the extension's
        #: NStart, made with the first compiled nonblocking exchange: :class:`_Fast`)
        self.cstart = self.cclose = None
        nonblocking._LIVE.append(self)

    def poll(self):
        """Advance every exchange in flight without blocking."""
        if self._busy:
            return
        self._busy = True
        try:
            for ex in tuple(self.active):
                ex.poll()
        finally:
            self._busy = False

    def test(self, ex):
        """Advance every request; return whether ``ex`` is done."""
        self.nb.poll_all()
        return ex.done

    def wait(self, ex):
        """Advance the requests until ``ex`` is done, blocking when nothing moves.

        Alone in flight (no other exchange or nonblocking collective), ``ex`` blocks in
        MPI (``MPI_Mprobe``, ``MPI_Waitall``); else every request keeps moving: posted
        messages are waited for together (:func:`~dualmpi.engine.nonblocking.block`), a
        message of unknown size is probed for with a short pause in between.
        """
        if self.cclose is not None and self.cclose(ex):
            return True  # (a compiled exchange, the only request in flight: waited for in C)
        nb = self.nb
        ex.since = time.monotonic()  # the watchdog times the wait, not the computing before it
        while not ex.done:
            nb.poll_all()
            if ex.done:
                break
            alone = self.active == [ex] and not any(p.active for p in nb._LIVE if p is not self)
            if alone:
                ex.block()
            elif ex.pending:
                wd = self.transport.watchdog
                where, peers, since, grace = ex.waiting()
                wd.state = (since, where, peers, grace)  # as Watchdog.arm, from the wait's start
                time.sleep(PAUSE)
                wd.disarm()
            else:
                nb.block((), ex)
        return True

    def _mpi_error(self, ex, exc):
        """The error of a message of ``ex`` that failed in someone's wait (see :meth:`_fail`)."""
        return exc

    def _fail(self, ex, exc):
        """A message of ``ex`` failed in a wait of the engine's: ``ex`` records it and goes on."""
        ex.failed(exc)

    def free(self):
        """Finish the exchanges in flight; leave the engine's list."""
        for ex in tuple(self.active):
            self.wait(ex)
        self.cstart = self.cclose = None  # (they hold this engine: no cycle left behind)
        if self in self.nb._LIVE:
            self.nb._LIVE.remove(self)


#: Seconds between probes for a message of unknown size while other requests are in flight.
PAUSE = 2e-4


def _progress(net):
    """Return ``net``'s :class:`_Progress` (local: made on first use)."""
    prog = net.__dict__.get("_neighbor_progress")
    if prog is None:
        prog = net._neighbor_progress = _Progress(net._transport)
    return prog


# --------------------------------------------------------------------------------------------
# One exchange: one message to and one from every neighbour


def _sigkey(sig, nbytes):
    """Return a nonzero int64 key of a block's type signature, or 0 (matches anything)."""
    if sig is None or nbytes == 0:
        return 0
    h, length = sig
    return 1 + (h * 1000003 + length) % ((1 << 61) - 1)


class _Exchange:
    """One neighbourhood call in flight on this rank (also the plan of its :class:`Request`).

    Each neighbour ``j`` gets one message on the wire, ``[header | payload]``: the header
    (:data:`HEADER_WORDS` words) says which call it is, what this rank sends ``j`` and what
    it expects from ``j``, so both ends of a link check both directions and a mismatch is
    found by both ranks.  A receive of known size is posted at once, into the user's
    buffer (a longer message is truncated by MPI, its header intact, and reported; never
    written past: :func:`_sink`); one of
    unknown size (objects) is probed for.  A rank whose arguments were rejected sends a
    header alone (its code negated) and takes every neighbour's message whatever its size;
    so every rank takes exactly one message from every neighbour and no rank is left
    waiting.  :meth:`outcome` raises the call's error or returns its result.

    Parameters
    ----------
    net : dualmpi.Comm
    method : str
        The mpi4py method name (for messages and the call's code).
    sends : list of (numpy.ndarray, int)
        Per neighbour: the payload (uint8, contiguous) and its type-signature key.
    recvs : list of (numpy.ndarray or None, int, int)
        Per neighbour: where the payload lands (uint8; None: any size, in a buffer of its
        own), the bytes expected (-1: any) and the type-signature key expected.
    error : Exception or None
        This rank's rejected arguments: sent to every neighbour, raised at the end.
    finish : callable, optional
        ``finish(payloads)`` once the exchange checked out; its value is the result.
    what : str, optional
        How diagnostics name the call.
    """

    def __init__(self, net, method, sends, recvs, error=None, finish=None, what=None, memo=None):
        MPI = _mpi()
        self.net, self.method, self.error, self.finish = net, method, error, finish
        self.what = what or method
        self.code = _CODES[method]
        self.wire = _wire(net, method)
        self.progress = _progress(net)
        self.ranks, self.links = _peers(net)
        n = len(self.ranks)
        self.memo = memo
        if memo is not None:  # a repeat (see _Memo): its headers and messages made before
            self.sends, self.recvs, self.out, self.inp = memo.sends, memo.recvs, memo.out, \
                memo.inp
            memo.busy = True
        else:
            self.sends, self.recvs = sends, recvs
            self.out = np.zeros((n, HEADER_WORDS), dtype=np.int64)
            self.inp = _headers(n)
        self.spare = [None] * n     # a message of unknown size, header included
        self.reqs, self.req_peer = [], []
        self.follow = {}            # receives of a header whose payload may come on its own
        self.pending = []           # neighbours whose message is probed for
        self.fault = None           # an MPI error other than a truncation
        self.done, self.result, self.failure = False, None, None
        self.seq, self.tag = self.wire.tag()
        self.since = time.monotonic()
        self._post(MPI)
        self.progress.active.append(self)
        self.progress.nb.IN_FLIGHT[0] += 1

    def _post(self, MPI):
        comm, out, tag, inp = self.wire.comm, self.out, self.tag, self.inp
        router = self.net._router
        memo = self.memo
        if memo is not None:
            for j, peer in enumerate(self.ranks):
                for spec in memo.send_specs[j]:  # (a large payload after its header)
                    self.reqs.append(comm.Isend(spec, peer, tag))
                    self.req_peer.append(peer)
                router.count_main((self.links[j],), memo.sends[j][0].size, 1)
            for i, peer in enumerate(self.ranks):
                self.follow[len(self.reqs)] = i
                self.reqs.append(comm.Irecv(memo.recv_specs[i], peer, tag))
                self.req_peer.append(peer)
            return
        for j, peer in enumerate(self.ranks):
            if self.error is not None:
                out[j] = (-self.code, _ANY, 0, 0, 0)
                payload, alone = None, False
            else:
                payload = self.sends[j][0]
                alone = _split(self.code, payload.size)
                out[j] = _header(self.code, self.sends[j], self.recvs[j], alone)
            if alone:
                self.reqs += [comm.Isend([out[j], MPI.BYTE], peer, tag),
                              comm.Isend([payload, MPI.BYTE], peer, tag)]
                self.req_peer += [peer, peer]
            else:
                self.reqs.append(_message(comm.Isend, MPI, out[j], payload, peer, tag))
                self.req_peer.append(peer)
            # one message over one link (stats()'s links and the messages this rank sent)
            router.count_main((self.links[j],), 0 if payload is None else payload.size, 1)
        for i, peer in enumerate(self.ranks):
            target = None if self.error is not None else self.recvs[i][0]
            if target is None:
                self.pending.append(i)
            else:
                self.follow[len(self.reqs)] = i
                self.reqs.append(_message(comm.Irecv, MPI, inp[i], target, peer, tag,
                                          receive=True))
                self.req_peer.append(peer)

    # -- progress --------------------------------------------------------------------------------
    def _take(self, MPI, i, msg, status):
        """Receive the probed message ``msg`` of neighbour ``i`` whole, into a buffer of its own."""
        spare = self.spare[i] = np.empty(status.Get_count(MPI.BYTE), dtype=np.uint8)
        self.follow[len(self.reqs)] = i
        self.reqs.append(msg.Irecv([spare, MPI.BYTE]))
        self.req_peer.append(self.ranks[i])

    def _followups(self):
        """For each first message in (a receive of ``follow`` done), post the receive of its
        payload when its header says that it comes on its own (:func:`_follows`)."""
        MPI = None
        for k, i in tuple(self.follow.items()):
            if self.reqs[k]:
                continue
            del self.follow[k]
            spare = self.spare[i]
            header = self.inp[i] if spare is None else \
                spare[:_HEADER_BYTES].view(np.int64) if spare.size >= _HEADER_BYTES else None
            if header is None or self.fault is not None or \
                    not _follows(header[0]):
                continue
            MPI = MPI or _mpi()
            peer = self.ranks[i]
            if spare is None:  # into the place the receive gave it
                target = self.recvs[i][0]
                if int(header[3]) > target.size:  # longer: cut short in the sink (_sink)
                    target = [MPI.BOTTOM, 1, _sink(MPI)[1]]
            else:  # a probed message: header and payload in a buffer of their own
                whole = self.spare[i] = np.empty(_HEADER_BYTES + int(header[3]), np.uint8)
                whole[:_HEADER_BYTES] = spare[:_HEADER_BYTES]
                target = whole[_HEADER_BYTES:]
            if not isinstance(target, list):
                target = [target, MPI.BYTE]
            self.reqs.append(self.wire.comm.Irecv(target, peer, self.tag))
            self.req_peer.append(peer)

    def posted(self):
        """True while a posted message of this exchange has not completed."""
        return any(self.reqs)

    def block(self):
        """Block in MPI until every message of this exchange is in (one at a time, so the
        watchdog names the neighbours still waited for, timed from the wait's start)."""
        MPI = _mpi()
        wd = self.net._transport.watchdog
        comm, status = self.wire.comm, MPI.Status()
        try:
            while self.pending:
                where, peers, since, grace = self.waiting()
                wd.state = (since, where, peers, grace)
                i = self.pending[0]
                msg = comm.Mprobe(self.ranks[i], self.tag, status)
                self.pending.pop(0)
                self._take(MPI, i, msg, status)
            self._followups()
            while self.posted():
                where, peers, since, grace = self.waiting()
                wd.state = (since, where, peers, grace)
                active = [bool(r) for r in self.reqs]
                try:
                    MPI.Request.Waitany(self.reqs)
                except MPI.Exception as exc:  # the failed message's request became null
                    for k, req in enumerate(self.reqs):
                        if active[k] and not req:
                            self.failed(exc)
                self._followups()
        finally:
            wd.disarm()

    def poll(self):
        """Advance without blocking; return True once done (its outcome then settled)."""
        if self.done:
            return True
        MPI = _mpi()
        if self.pending:
            comm, status = self.wire.comm, MPI.Status()
            for i in tuple(self.pending):
                msg = comm.Improbe(self.ranks[i], self.tag, status)
                if msg is not None:
                    self.pending.remove(i)
                    self._take(MPI, i, msg, status)
        for k, req in enumerate(self.reqs):
            if req:
                try:
                    req.Test()
                except MPI.Exception as exc:
                    self.reqs[k] = MPI.REQUEST_NULL
                    self.failed(exc)
        self._followups()
        if self.pending or self.posted():
            return False
        self._settle()
        return True

    def failed(self, exc):
        """Record a failed message: a truncation is reported from the header; else the error."""
        MPI = _mpi()
        if exc.Get_error_class() != MPI.ERR_TRUNCATE and self.fault is None:
            self.fault = exc

    def waiting(self):
        """Return ``(where, peers, since, grace)`` of what this exchange waits for (watchdog)."""
        peers = {p for req, p in zip(self.reqs, self.req_peer) if req}
        peers.update(self.ranks[i] for i in self.pending)
        return (f"{self.what} (neighbourhood call {self.seq})", tuple(sorted(peers)),
                self.since, 1.0)

    def _settle(self):
        """Every message is in: check, then keep the result or the error; leave the active list."""
        self.done = True
        if self.memo is not None:
            self.memo.busy = False
        try:
            self.progress.active.remove(self)
            self.progress.nb.IN_FLIGHT[0] -= 1
        except ValueError:
            pass
        try:
            payloads = self._check()
            self.result = None if self.finish is None else self.finish(payloads)
        except Exception as exc:  # noqa: BLE001 - raised by outcome(), from the wait
            self.failure = exc

    def outcome(self):
        """Return the result of a finished exchange, or raise its error."""
        if self.failure is not None:
            raise self.failure
        return self.result

    def _check(self):
        """Check what arrived; raise the call's error on this rank or return the payloads."""
        if self.error is not None:
            raise self.error
        for i, spare in enumerate(self.spare):
            if spare is not None and spare.size >= _HEADER_BYTES:
                self.inp[i] = spare[:_HEADER_BYTES].view(np.int64)
                self.recvs[i] = (spare[_HEADER_BYTES:],) + tuple(self.recvs[i][1:])
        if self.fault is not None:
            raise _fault(self.method, self.net.rank, self.fault)
        memo = self.memo
        # (a repeat that got the headers of the last call that checked out needs no check)
        if memo is None or self.inp.tobytes() != memo.good.tobytes():
            _verdict(self.method, self.net.rank, self.ranks, self.inp, self.sends, self.recvs)
            if memo is not None:  # (the headers its repeats, in C too, expect)
                memo.good[...] = self.inp
        return [self.recvs[i][0] for i in range(len(self.ranks))]


def _fault(method, me, exc):
    """The error of a message that failed (``exc``: an ``MPI.Exception``), not by truncation."""
    return DualmpiError(f"{method}: rank {me}: {exc.Get_error_string()} in a message from a "
                        "neighbour")


def _verdict(method, me, ranks, inp, sends, recvs):
    """Check the headers ``inp`` received from the neighbours ``ranks`` against what this rank
    sent them (``sends``) and expects (``recvs``); raise :class:`InputError` naming the first
    problem."""
    problems = []
    mine = _CODES[method]
    for i, peer in enumerate(ranks):
        code, expect, expect_key, got, key = (int(x) for x in inp[i])
        if code < 0:
            problems.append(f"{method}: arguments rejected on rank {peer}, a neighbour of "
                            f"rank {me} (see its message)")
            continue
        if _follows(code):
            code -= _ALONE
        if code != mine:
            other = _NAMES.get(code, f"a call coded {code}")
            problems.append(f"{method}: rank {me} called {method} but its neighbour rank "
                            f"{peer} called {other}")
            continue
        sent, sent_key = sends[i]
        _, want, want_key = recvs[i]
        if want >= 0 and got != want:
            problems.append(_mismatch(method, peer, me, got, want))
        elif expect >= 0 and expect != sent.size:
            problems.append(_mismatch(method, me, peer, sent.size, expect))
        elif want_key and key and want_key != key:
            problems.append(_typesig(method, peer, me))
        elif expect_key and sent_key and expect_key != sent_key:
            problems.append(_typesig(method, me, peer))
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InputError(problems[0] + more)


def _split(code, nbytes):
    """True when a message of call ``code`` with a payload of ``nbytes`` sends the payload as a
    message of its own after its header (a buffer call, :data:`SPLIT` bytes or more).

    >>> _split(3, SPLIT), _split(3, SPLIT - 1), _split(6, SPLIT)
    (True, False, False)
    """
    return 1 <= code <= _BUFFER_CODES and nbytes >= SPLIT


def _follows(code):
    """True when a header's ``code`` says that its payload follows as a message of its own.

    >>> _follows(3 + _ALONE), _follows(3), _follows(-3)
    (True, False, False)
    """
    return code > _ALONE


def _header(code, send, recv, alone=False):
    """The header of a message to a neighbour: the call's ``code`` (plus :data:`_ALONE` when the
    payload follows on its own: ``alone``), the bytes and type-signature key expected from it
    (``recv``: ``(target, bytes, key)``), and those of the payload (``send``: ``(payload,
    key)``)."""
    (payload, key), (_, expect, expect_key) = send, recv
    return (code + (_ALONE if alone else 0), expect, expect_key, payload.size, key)


def _mismatch(method, sender, receiver, sent, expected):
    """The one message both ends of a link give for a count mismatch."""
    return (f"{method}: counts differ between neighbours: rank {sender} sends {sent} bytes to "
            f"rank {receiver}, which expects {expected}")


def _typesig(method, sender, receiver):
    return (f"{method}: datatypes differ between neighbours: what rank {sender} sends does not "
            f"match the type signature rank {receiver} receives")


def _headers(n):
    """Zeroed room for ``n`` received headers, one row each, followed by a word never received
    into: a receive's payload block can never start where a header ends (two adjacent blocks
    are one contiguous block to MPI: see :func:`_sink`).

    >>> h = _headers(2); h.shape, h.base.size
    ((2, 5), 11)
    """
    return np.zeros(n * HEADER_WORDS + 1, dtype=np.int64)[:n * HEADER_WORDS].reshape(
        n, HEADER_WORDS)


def _sink(MPI):
    """Return ``(words, datatype)``: where a message nobody reads is cut short (made once).

    Open MPI 5.0 writes a message longer than a contiguous receive buffer past its end above
    its eager limit (docs/reliability.md: a 64-KiB payload into a neighbour's receive of
    none wrote 65,536 bytes past it); a receive of two blocks apart is cut short instead
    (``MPI_ERR_TRUNCATE``).  So every receive of a neighbourhood message has two blocks
    apart: a header with a payload (:func:`_headers` keeps them apart), a header alone with
    the 8 bytes at ``words[2]``, and a payload announced longer than its place goes whole
    to ``datatype`` (8 bytes at ``words[0]`` and ``words[2]``, ``MPI.BOTTOM``): the call
    fails from the headers (counts differ), nothing of the user's written past.
    """
    if not _SINK:
        words = np.zeros(4, dtype=np.int64)
        dtype = MPI.BYTE.Create_hindexed([8, 8], [words.ctypes.data,
                                                  words.ctypes.data + 16]).Commit()
        _SINK.extend((words, dtype))
    return _SINK[0], _SINK[1]


_SINK = []


def _two(MPI, header, payload, always=False, receive=False):
    """Return ``(spec, datatype)``: an mpi4py buffer spec of ``header`` then ``payload``.

    Zero-copy: a hindexed datatype at absolute addresses (``MPI.BOTTOM``), which the
    caller frees (MPI keeps it for the messages posted); ``None`` when there is no
    payload, unless ``always`` (then the datatype holds the header alone).  A ``receive``
    without a payload takes the sink's 8 bytes as its second block (:func:`_sink`).
    """
    empty = payload is None or payload.size == 0
    if receive and empty:
        words = _sink(MPI)[0]
        payload, empty = words[2:3].view(np.uint8), False
    if empty and not always:
        return [header, MPI.BYTE], None
    dtype = MPI.BYTE.Create_hindexed(
        [_HEADER_BYTES] + ([] if empty else [payload.size]),
        [header.ctypes.data] + ([] if empty else [payload.ctypes.data])).Commit()
    return [MPI.BOTTOM, 1, dtype], dtype


def _message(call, MPI, header, payload, *args, receive=False):
    """Post ``call(spec, *args)`` on ``header`` + ``payload``; return its request."""
    spec, dtype = _two(MPI, header, payload, receive=receive)
    try:
        return call(spec, *args)
    finally:
        if dtype is not None:
            dtype.Free()


# --------------------------------------------------------------------------------------------
# Reading the arguments as mpi4py does


def _vector(spec, n, *, role, what):
    """``msgbuffer.vector`` that also takes zero blocks (a rank without neighbours)."""
    if n:
        return msgbuffer.vector(spec, n, role=role, what=what)
    try:
        return msgbuffer.vector(spec, 0, role=role, what=what)
    except ZeroDivisionError:  # counts inferred over no block: mpi4py only reads the buffer
        msgbuffer.vector(spec, 1, role=role, what=what)
        return _NoBlocks()


class _NoBlocks:
    """The read message of a rank without neighbours whose counts mpi4py would infer."""

    data = np.zeros(0, dtype=np.uint8)
    packed = False
    byte_counts = byte_displs = np.zeros(0, dtype=np.int64)

    def pack(self):
        return self.data


def _blocks(m, n):
    """Split a read message into ``n`` blocks: ``[(bytes, type-signature key)]``."""
    data = m.data
    if isinstance(m, msgbuffer.Message):
        size = m.nbytes
        k = _sigkey(m.typesig, size)
        return [(data[i * size:(i + 1) * size], k) for i in range(n)]
    out = []
    for i in range(n):
        a, size = int(m.byte_displs[i]), int(m.byte_counts[i])
        out.append((data[a:a + size], _sigkey(m.block_typesig(i), size)))
    return out


def _overlap(send, recv, method):
    if send.data.size and recv.data.size and not (send.packed or recv.packed) and \
            np.may_share_memory(send.data, recv.data):
        raise InputError(f"{method}: sendbuf and recvbuf overlap (MPI forbids it; neighbourhood "
                         "collectives have no MPI.IN_PLACE)")


def _read(net, method, sendbuf, recvbuf):
    """Read a buffer call's arguments; return ``(send, recv, sends, recvs)``."""
    n = len(_peers(net)[0])
    s_what, r_what = f"{method} sendbuf", f"{method} recvbuf"
    if method == "Neighbor_allgather":
        send = msgbuffer.simple(sendbuf, role="send", what=s_what)
        recv = msgbuffer.simple(recvbuf, blocks=n, role="recv", what=r_what)
        one = (send.data, _sigkey(send.typesig, send.nbytes))
        sends = [one] * n
    elif method == "Neighbor_allgatherv":
        send = msgbuffer.simple(sendbuf, role="send", what=s_what)
        recv = _vector(recvbuf, n, role="recv", what=r_what)
        one = (send.data, _sigkey(send.typesig, send.nbytes))
        sends = [one] * n
    elif method == "Neighbor_alltoall":
        send = msgbuffer.simple(sendbuf, blocks=n, role="send", what=s_what)
        recv = msgbuffer.simple(recvbuf, blocks=n, role="recv", what=r_what)
        sends = _blocks(send, n)
    elif method == "Neighbor_alltoallv":
        send = _vector(sendbuf, n, role="send", what=s_what)
        recv = _vector(recvbuf, n, role="recv", what=r_what)
        sends = _blocks(send, n)
    else:  # Neighbor_alltoallw: mpi4py reads the receive side first
        recv = msgbuffer.wvector(recvbuf, n, role="recv", what=r_what)
        send = msgbuffer.wvector(sendbuf, n, role="send", what=s_what)
        sends = _blocks(send, n)
    _overlap(send, recv, method)
    recvs = [(block, block.size, key) for block, key in _blocks(recv, n)]
    return send, recv, sends, recvs


class _Memo:
    """A buffer call's messages, kept for its repeats (:func:`_start`).

    A call made with the argument objects of the method's last call
    (:func:`dualmpi.calls.same`: the same arrays, counts and datatypes) sends and receives
    exactly what that call did, so its headers (``out``, ``inp``: one row per neighbour)
    and the datatypes of its messages (header and payload at absolute addresses,
    committed once, ``send_specs`` and ``recv_specs``) are made once, and the arguments
    are not read again.  The messages on the wire are those of any call (the call's own
    tag and header): a rank that repeats and one that does not still match.  Not for a
    packed datatype (its bytes are packed per call) nor while an exchange of the memo is
    in flight (``busy``: a repeat then runs as a new call).  A payload of :data:`SPLIT` bytes
    or more is sent after its header, two specs in ``send_specs`` (blocking or not).  ``good``
    holds the headers the last call that checked out received: a blocking repeat that gets
    them again needs no check (:class:`_Fast`, made on the memo's first blocking repeat:
    ``fast``; its nonblocking form on the first nonblocking repeat: ``ifast``).
    """

    __slots__ = ("template", "args", "sends", "recvs", "out", "inp", "send_specs",
                 "recv_specs", "types", "send_types", "busy", "good", "fast", "ifast")

    def __init__(self, template, args, code, sends, recvs):
        MPI = _mpi()
        n = len(sends)
        self.template, self.args, self.sends, self.recvs = template, args, sends, recvs
        self.out = np.zeros((n, HEADER_WORDS), dtype=np.int64)
        self.inp = _headers(n)
        self.good = np.full((n, HEADER_WORDS), -3, dtype=np.int64)  # (no header is that)
        self.send_specs, self.recv_specs, self.types, self.busy = [], [], [], False
        self.send_types, self.fast, self.ifast = [], None, None
        for j in range(n):
            payload, target = sends[j][0], recvs[j][0]
            alone = _split(code, payload.size)
            self.out[j] = _header(code, sends[j], recvs[j], alone)
            # (a datatype even for a header alone: the compiled exchange posts every message as
            # one datatype at MPI_BOTTOM, but a large payload, which goes after its header: SPLIT)
            send = self._absolute(MPI, self.out[j], payload)
            self.send_types.append(send[2])
            self.send_specs.append([[self.out[j], MPI.BYTE], [payload, MPI.BYTE]]
                                   if alone else [send])
            self.recv_specs.append(self._absolute(MPI, self.inp[j], target, receive=True))

    def _absolute(self, MPI, header, data, receive=False):
        """The spec of ``header`` then ``data`` as one message (:func:`_two`'s datatype, freed
        with the memo)."""
        spec, dtype = _two(MPI, header, data, always=True, receive=receive)
        self.types.append(dtype)
        return spec

    def free(self):
        """Free the datatypes (MPI keeps them for messages still in flight) and the compiled
        exchanges (their counts join the hub's)."""
        for fast in (self.fast, self.ifast):
            if fast:
                fast.free()
        self.fast = self.ifast = False
        for dtype in self.types:
            dtype.Free()
        self.types = []


class _Fast:
    """A memo's repeats in C: ``rounds.c``'s ``dualmpi_nexchange`` (blocking) run by the
    remembered-call extension's bound call (:mod:`dualmpi.engine.recall`), matched in C by
    ``net._m<method>`` (``Recall.like`` on the memo's template); made ``nonblocking``, the
    requests of ``Ineighbor_*`` repeats (:class:`_CExchange`: ``dualmpi_npost``,
    ``dualmpi_ntest`` and ``dualmpi_nwait``, matched by ``net._mI<method>``: ``Recall.start``).

    The same messages as a Python repeat (the memo's datatypes, the headers of its blocking or
    nonblocking form, the call's tag from the wire's count), waited for one at a time under
    the watchdog, which names the neighbours still waited for; the link counts kept in an
    array that joins the hub's (:class:`~dualmpi.engine.router._Links`' lanes) until
    :meth:`free` adds them to its dict.  The blocking C call returns at once when other
    requests are in flight on the rank (:data:`~dualmpi.engine.inflight.IN_FLIGHT`: they must
    advance while it waits), and when a header differs from the memo's ``good`` ones;
    :meth:`failed` then runs the call in Python, or checks the headers.  One exchange of a
    memo is in flight at a time (the memo is ``busy`` meanwhile): its requests are ``reqs``
    (handles), its state ``state`` (``rounds.c``).
    """

    def __init__(self, net, method, memo, lib, module, nonblocking=False):
        from .engine.watchdog import Watchdog

        MPI = _mpi()
        ranks, links = _peers(net)
        n = len(ranks)
        self.method, self.memo, self.ranks = method, memo, ranks
        self.net = weakref.ref(net)  # (no cycle through the C objects, which are not collected)
        wire, hub = _wire(net, method), net._router.hub
        self.peers = np.array(ranks, dtype=np.int64)
        out, split = memo.out, SPLIT
        self.stypes = np.array([t.handle for t in memo.send_types], dtype=np.int64)
        self.rtypes = np.array([spec[2].handle for spec in memo.recv_specs], dtype=np.int64)
        # a large payload after its header (SPLIT), and the receives of such payloads
        self.saddr = np.array([memo.sends[j][0].ctypes.data for j in range(n)], dtype=np.int64)
        self.raddr = np.array([memo.recvs[j][0].ctypes.data for j in range(n)], dtype=np.int64)
        self.rsize = np.array([memo.recvs[j][0].size for j in range(n)], dtype=np.int64)
        self.sizes = np.array([memo.sends[j][0].size for j in range(n)], dtype=np.int64)
        self.slots, self.paddr, self.plen = _packed(out, self.sizes)
        self.counts = np.zeros((n, 2), dtype=np.int64)
        self.track = np.zeros(2, dtype=np.int64)
        self.reqs = np.full(4 * n, MPI.REQUEST_NULL.handle, dtype=np.int64)
        self.state = np.zeros(2 + n, dtype=np.int64)
        self.hops = [(links[j],) for j in range(n)]
        self.hub = hub
        hub.links.lanes.append((self.counts, self.hops))
        x = self.x = np.array((
            wire.comm.handle, wire.count.ctypes.data, TAGS, n, self.peers.ctypes.data,
            self.stypes.ctypes.data, self.rtypes.ctypes.data, self.track.ctypes.data,
            memo.inp.ctypes.data, memo.good.ctypes.data, self.counts.ctypes.data,
            self.sizes.ctypes.data, IN_FLIGHT.ctypes.data, out.ctypes.data,
            self.saddr.ctypes.data, self.raddr.ctypes.data, self.rsize.ctypes.data,
            MPI.BYTE.handle, split, _ALONE, self.reqs.ctypes.data, self.state.ctypes.data,
            _sink(MPI)[1].handle, self.paddr.ctypes.data, self.plen.ctypes.data),
            dtype=np.int64)
        assert x.size == _NX_FIELDS
        self.xaddr = x.ctypes.data
        fn = lib.dualmpi_nwait if nonblocking else lib.dualmpi_nexchange
        wd = net._transport.watchdog
        me = weakref.ref(self)
        #: the code of the last wait in C (nonblocking: its exchange settles with it)
        self.last = 0
        self.nonblocking = nonblocking

        def failed(err):
            fast = me()
            if fast is not None:
                fast.failed(err)
        keep = (fn, x, wire, memo, out, self.peers, self.stypes, self.rtypes, self.sizes,
                self.counts, self.track, IN_FLIGHT, self.saddr, self.raddr, self.rsize,
                self.reqs, self.state, self.slots, self.paddr, self.plen)
        self.call = module.Recall(ctypes.cast(fn, ctypes.c_void_p).value, x.ctypes.data, keep,
                                  wd if wd.deadline > 0 else None,
                                  Watchdog.tracker(self.track, _Waited(
                                      "I" + method[0].lower() + method[1:] if nonblocking
                                      else method, ranks, self.track)),
                                  failed)
        if nonblocking:
            self.track_addr = self.track.ctypes.data
            self.test = module.CFunc(ctypes.cast(lib.dualmpi_ntest, ctypes.c_void_p).value, 1,
                                     False)
            prog = self.progress = _progress(net)
            if prog.cstart is None:
                prog.cstart = module.NStart(prog, _CExchange, _request_class(), prog.active,
                                            IN_FLIGHT,
                                            ctypes.cast(lib.dualmpi_npost, ctypes.c_void_p).value)
                prog.cclose = prog.cstart.close

    def failed(self, err):
        """The C call did not settle the call: ``err`` says why (see :class:`_Fast`)."""
        if self.nonblocking:  # (the exchange settles with it: _CExchange.block)
            self.last = err
            return
        net, memo, method = self.net(), self.memo, self.method
        if err == _NX_BUSY:  # other requests in flight: the call in Python (advancing them)
            if memo.busy:  # (one of them runs on the memo: this call with messages of its own)
                _blocking(_Exchange(net, method, memo.sends, list(memo.recvs)))
            else:
                _blocking(_Exchange(net, method, None, None, None, None, None, memo))
        elif err == _NX_CHECK:  # a header differs from the last call's (or a message was cut)
            _verdict(method, net.rank, self.ranks, memo.inp, memo.sends, memo.recvs)
            memo.good[...] = memo.inp
        else:
            raise _fault(method, net.rank, _mpi().Exception(err))

    def free(self):
        """Add the counts to the hub's link dict, leave its lanes, uninstall the matcher."""
        self.hub.retire_lane(self.counts)
        net = self.net()
        if net is not None:
            from .calls import no_match, no_start

            if self.nonblocking:
                setattr(net, "_mI" + self.method[0].lower() + self.method[1:], no_start)
            else:
                setattr(net, "_m" + self.method, no_match)


def _packed(out, sizes):
    """Return ``(slots, addresses, lengths)``: the compiled exchange's small messages packed.

    A message to neighbour ``j`` whose header (``out[j]``) and payload (``sizes[j]`` bytes,
    not sent on its own: :data:`SPLIT`) come to at most
    :data:`~dualmpi.engine.mpi.IMMEDIATE` bytes leaves contiguous from a slot of ``slots``
    (the header written once, the payload copied in by ``rounds.c``'s ``nx_post``), not as
    the hindexed datatype of the two: Open MPI sends a contiguous message that small straight
    into the receiver's queue and takes a derived datatype through its convertor (as the
    plans' small messages: :data:`~dualmpi.engine.mpi.PACK_SMALL`).  The same bytes on the
    wire.  ``addresses[j]`` is 0 for a message not packed.

    >>> out = np.arange(2 * HEADER_WORDS, dtype=np.int64).reshape(2, HEADER_WORDS)
    >>> slots, at, length = _packed(out, np.array([8, 4096]))
    >>> length.tolist(), int(at[1]), slots[:40].view(np.int64).tolist()
    ([48, 0], 0, [0, 1, 2, 3, 4])
    >>> int(at[0]) == slots.ctypes.data
    True
    """
    from .engine.mpi import IMMEDIATE, PACK_SMALL

    length = np.array([_HEADER_BYTES + int(m) if PACK_SMALL and m < SPLIT and
                       _HEADER_BYTES + m <= IMMEDIATE else 0 for m in sizes], dtype=np.int64)
    slots = np.zeros(max(1, int(length.sum())), dtype=np.uint8)
    at, offset = np.zeros(len(sizes), dtype=np.int64), 0
    for j, m in enumerate(length.tolist()):
        if m:
            slots[offset:offset + _HEADER_BYTES] = out[j].view(np.uint8)
            at[j] = slots.ctypes.data + offset
            offset += m
    return slots, at, length


class _CExchange:
    """A nonblocking repeat of a memo in flight, its messages posted, advanced and waited for in
    C (a nonblocking :class:`_Fast`; the plan of its :class:`~dualmpi.request.Request`).

    Made in C with its request (the extension's ``NStart``, ``_Progress.cstart``: the memo
    busy, the messages posted by ``rounds.c``'s ``dualmpi_npost``, the exchange in the progress
    engine's ``active`` list and counted in :data:`~dualmpi.engine.inflight.IN_FLIGHT`); a
    wait for it alone in flight runs in C too (``_Progress.cclose``).

    What :class:`_Exchange` offers the progress engines: :meth:`poll` (``dualmpi_ntest``),
    :meth:`block` (``dualmpi_nwait``, under the watchdog: the only request in flight, by
    ``NStart.close``),
    :meth:`posted` and :meth:`handed_back` (its requests as ``MPI.Request`` objects for a
    wait with the others: :func:`dualmpi.engine.nonblocking.block`), :meth:`failed`,
    :meth:`waiting` and :meth:`outcome`.
    """

    __slots__ = ("fast", "progress", "what", "seq", "since", "done", "failure", "fault")
    #: (no message of unknown size: nothing is probed for)
    pending = ()
    error = None
    #: its requests are handles (:meth:`posted`), not a list of ``MPI.Request`` objects
    handed = True

    def posted(self):
        """Return the requests not done as ``MPI.Request`` objects on their handles, and where
        they are in the exchange's handles."""
        MPI = _mpi()
        null = MPI.REQUEST_NULL.handle
        handles = self.fast.reqs.tolist()
        at = [i for i, h in enumerate(handles) if h != null]
        return [MPI.Request.fromhandle(handles[i]) for i in at], at

    def handed_back(self, objs, at):
        """Write the handles of :meth:`posted`'s requests back after a wait."""
        for obj, i in zip(objs, at):
            self.fast.reqs[i] = obj.handle

    def poll(self):
        """Advance without blocking; return True once done (its outcome then settled)."""
        if self.done:
            return True
        code = self.fast.test(self.fast.xaddr)
        if code == _NX_PENDING:
            return False
        self._settle(code)
        return True

    def block(self):
        """Wait in C for every message of the exchange, the only request in flight (the
        watchdog naming the neighbours), and end it: ``_Progress.cclose``."""
        self.progress.cclose(self)

    def failed(self, exc):
        """A message failed in a wait from Python (``exc``): a truncation is found by the header
        check; another error is the exchange's (``rounds.c``'s state)."""
        MPI = _mpi()
        if exc.Get_error_class() == MPI.ERR_TRUNCATE:
            self.fast.state[1] = 1
        elif self.fault is None:
            self.fault = exc
            if not self.fast.state[0]:
                self.fast.state[0] = exc.Get_error_code() or MPI.ERR_OTHER

    def waiting(self):
        """Return ``(where, peers, since, grace)`` of what this exchange waits for (watchdog)."""
        fast, null = self.fast, _mpi().REQUEST_NULL.handle
        n = len(fast.ranks)
        peers = sorted({fast.ranks[i % n] for i, h in enumerate(fast.reqs.tolist()) if h != null})
        return (f"{self.what} (neighbourhood call {self.seq})", tuple(peers), self.since, 1.0)

    def _settle(self, code):
        """Every message is in: keep the outcome of ``code`` (``rounds.c``); leave the lists."""
        fast = self.fast
        memo = fast.memo
        self.done, memo.busy = True, False
        try:
            self.progress.active.remove(self)
            IN_FLIGHT[0] -= 1
        except ValueError:
            pass
        try:
            rank = self.progress.rank
            if code == _NX_CHECK:  # a header differs from the last good call's, or was cut
                _verdict(fast.method, rank, fast.ranks, memo.inp, memo.sends, memo.recvs)
                memo.good[...] = memo.inp
            elif code:
                raise _fault(fast.method, rank, self.fault or _mpi().Exception(code))
        except Exception as exc:  # noqa: BLE001 - raised by outcome(), from the wait
            self.failure = exc

    def outcome(self):
        """Return None (a buffer call) once done, or raise its error."""
        if self.failure is not None:
            raise self.failure


class _Waited:
    """What a compiled exchange waits for, as the watchdog's tracker reads it: position
    ``1 + mask`` (bit ``j``: the send to neighbour ``j``, bit ``n + j``: the receive from it)
    gives ``(where, peers, grace)``; ``track[1]`` is the call's number."""

    __slots__ = ("what", "ranks", "track")

    def __init__(self, what, ranks, track):
        self.what, self.ranks, self.track = what, ranks, track

    def __len__(self):
        return 1 << 62

    def __getitem__(self, mask):
        n = len(self.ranks)
        peers = sorted({self.ranks[j % n] for j in range(2 * n) if mask >> j & 1})
        return (f"{self.what} (neighbourhood call {int(self.track[1])})", tuple(peers), 1.0)


def _compiled(net, method, memo, nonblocking):
    """Return ``memo``'s compiled exchange (:class:`_Fast`), or False when there is none (no
    compiled loop or extension, more neighbours than it takes, a message over an int)."""
    lib = getattr(net._transport, "cloop", None)
    module = recall.load()
    if lib is not None and module is not None and \
            lib.dualmpi_nx_fields() == _NX_FIELDS * 10000 + NX_MAX * 10 + HEADER_WORDS and \
            len(memo.sends) <= NX_MAX and \
            all(b[0].size <= _INT_MAX for b in (*memo.sends, *memo.recvs)):
        return _Fast(net, method, memo, lib, module, nonblocking)
    return False


def _fast(net, method, memo):
    """Run a blocking repeat of ``memo`` by its compiled exchange (made now on the first
    repeat, its matcher installed); return False when there is none (no compiled loop or
    extension, or more neighbours than it takes)."""
    if memo.fast is None:
        memo.fast = _compiled(net, method, memo, False)
    if not memo.fast:
        return False
    # (a lease of no runner: a neighbourhood call runs none of the engine's)
    setattr(net, "_m" + method, recall.load().Recall.like(memo.fast.call, memo.template,
                                                          net._engine.lease(), 0))
    memo.fast.call()
    return True


def _ifast(net, method, memo, what):
    """Start a nonblocking repeat of ``memo`` (not busy) in C (the nonblocking :class:`_Fast`
    made now on the first one, ``net._m<what>`` installed: ``Recall.start`` of the progress
    engine's ``cstart``, which returns NotImplemented, the Python path then, while the memo's
    last exchange is in flight); return its :class:`~dualmpi.request.Request`, or None when
    there is no compiled exchange (no compiled loop or extension, or too many neighbours)."""
    if memo.ifast is None:
        memo.ifast = _compiled(net, method, memo, True)
    if not memo.ifast:
        return None
    start = memo.ifast.progress.cstart
    setattr(net, "_m" + what, recall.load().Recall.start(
        start, memo.ifast, what, net._transport.alarm, memo.template, net._engine.lease(), 0))
    return start(memo.ifast, what)


_REQUEST = []


def _request_class():
    """Return :class:`dualmpi.request.Request` (imported once, on first use)."""
    if not _REQUEST:
        from .request import Request

        _REQUEST.append(Request)
    return _REQUEST[0]


def _start(net, method, sendbuf, recvbuf, what=None):
    """Read the arguments and post the messages; return the :class:`_Exchange`.

    A buffer call (not packed) is remembered per method (:class:`_Memo`): a repeat on the
    same argument objects posts the remembered messages without reading its arguments.
    """
    from .calls import same, template_of

    _wire(net, method)  # made at set-up (attach); if not, now, before anything can fail
    memos = net.__dict__.setdefault("_neighbor_memos", {})
    memo = memos.get(method)
    if memo is not None and not memo.busy and same(memo.template, (sendbuf, recvbuf)):
        if what is None and _fast(net, method, memo):  # a blocking repeat, run in C
            return None
        req = None if what is None else _ifast(net, method, memo, what)  # a nonblocking one
        if req is not None:  # (its request, started in C)
            return req
        return _Exchange(net, method, None, None, None, None, what, memo)
    sends = recvs = finish = error = None
    try:
        send, recv, sends, recvs = _read(net, method, sendbuf, recvbuf)
        send.pack()
        if recv.packed and sends:  # without neighbours the packed bytes are not data
            def finish(payloads):
                recv.unpack()
    except Exception as exc:  # noqa: BLE001 - every neighbour hears of it, then it is raised
        error = exc
    if error is None and not (send.packed or recv.packed):
        template = template_of((sendbuf, recvbuf))
        if template is not None:
            if memo is not None:
                memo.free()
            memo = memos[method] = _Memo(template, (sendbuf, recvbuf), _CODES[method], sends,
                                         recvs)
            return _Exchange(net, method, None, None, None, None, what, memo)
    return _Exchange(net, method, sends, recvs, error, finish, what)


def _blocking(ex):
    """Wait for ``ex`` (advancing every request meanwhile); return its result or raise (None
    for a call already run: :func:`_fast`)."""
    if ex is None:
        return None
    ex.progress.wait(ex)
    return ex.outcome()


def _nonblocking(ex):
    """Return the :class:`~dualmpi.request.Request` of ``ex`` (``ex`` itself when it is one: a
    repeat started in C).

    A rank whose arguments were rejected takes its neighbours' messages first (so none is
    left waiting) and raises here, at the call, as mpi4py does.
    """
    request = _request_class()
    if type(ex) is request:
        return ex
    if ex.error is not None:
        _blocking(ex)
    return request(ex.progress, ex)


def Neighbor_allgather(net, sendbuf, recvbuf):
    """Gather one block from every neighbour (mirrors ``Topocomm.Neighbor_allgather``).

    Block ``i`` of ``recvbuf`` comes from neighbour ``i`` of :func:`Get_dist_neighbors`;
    this rank's ``sendbuf`` goes to every neighbour, one message per link.
    """
    _blocking(_start(net, "Neighbor_allgather", sendbuf, recvbuf))


def Neighbor_allgatherv(net, sendbuf, recvbuf):
    """Gather a block of one size per neighbour (mirrors ``Topocomm.Neighbor_allgatherv``)."""
    _blocking(_start(net, "Neighbor_allgatherv", sendbuf, recvbuf))


def Neighbor_alltoall(net, sendbuf, recvbuf):
    """Block ``j`` of ``sendbuf`` to neighbour ``j``, block ``i`` of ``recvbuf`` from neighbour
    ``i`` (mirrors ``Topocomm.Neighbor_alltoall``)."""
    _blocking(_start(net, "Neighbor_alltoall", sendbuf, recvbuf))


def Neighbor_alltoallv(net, sendbuf, recvbuf):
    """The neighbourhood exchange with a count per neighbour (mirrors
    ``Topocomm.Neighbor_alltoallv``)."""
    _blocking(_start(net, "Neighbor_alltoallv", sendbuf, recvbuf))


def Neighbor_alltoallw(net, sendbuf, recvbuf):
    """The neighbourhood exchange with a count, byte displacement and datatype per neighbour
    (mirrors ``Topocomm.Neighbor_alltoallw``)."""
    _blocking(_start(net, "Neighbor_alltoallw", sendbuf, recvbuf))


def Ineighbor_allgather(net, sendbuf, recvbuf):
    """Start :func:`Neighbor_allgather`; return a :class:`~dualmpi.request.Request`."""
    return _nonblocking(_start(net, "Neighbor_allgather", sendbuf, recvbuf, "Ineighbor_allgather"))


def Ineighbor_allgatherv(net, sendbuf, recvbuf):
    """Start :func:`Neighbor_allgatherv`; return a :class:`~dualmpi.request.Request`."""
    return _nonblocking(_start(net, "Neighbor_allgatherv", sendbuf, recvbuf,
                               "Ineighbor_allgatherv"))


def Ineighbor_alltoall(net, sendbuf, recvbuf):
    """Start :func:`Neighbor_alltoall`; return a :class:`~dualmpi.request.Request`."""
    return _nonblocking(_start(net, "Neighbor_alltoall", sendbuf, recvbuf, "Ineighbor_alltoall"))


def Ineighbor_alltoallv(net, sendbuf, recvbuf):
    """Start :func:`Neighbor_alltoallv`; return a :class:`~dualmpi.request.Request`."""
    return _nonblocking(_start(net, "Neighbor_alltoallv", sendbuf, recvbuf,
                               "Ineighbor_alltoallv"))


def Ineighbor_alltoallw(net, sendbuf, recvbuf):
    """Start :func:`Neighbor_alltoallw`; return a :class:`~dualmpi.request.Request`."""
    return _nonblocking(_start(net, "Neighbor_alltoallw", sendbuf, recvbuf,
                               "Ineighbor_alltoallw"))


# --------------------------------------------------------------------------------------------
# Object forms


def _object_start(net, method, sendobj):
    """Pickle and post; return the exchange (see :func:`neighbor_allgather`)."""
    MPI = _mpi()
    _wire(net, method)
    n = len(_peers(net)[0])
    sends = recvs = error = None
    try:
        if method == "neighbor_allgather":
            one = np.frombuffer(MPI.pickle.dumps(sendobj), dtype=np.uint8)
            sends = [(one, 0)] * n
        else:
            items = [None] * n if sendobj is None else list(sendobj)
            if len(items) != n:
                raise InputError(f"{method}: expecting {n} items (one per neighbour), got "
                                 f"{len(items)}")
            sends = [(np.frombuffer(MPI.pickle.dumps(x), dtype=np.uint8), 0) for x in items]
        recvs = [(None, _ANY, 0)] * n
    except InputError as exc:
        error = exc
    except Exception as exc:  # noqa: BLE001 - pickling raises many kinds; neighbours hear first
        error = InputError(f"{method}: could not pickle the object ({type(exc).__name__}: {exc})")
        error.__cause__ = exc
    return _Exchange(net, method, sends, recvs, error, _loads)


def _loads(payloads):
    """Unpickle the payloads (an empty one is ``None``, as in mpi4py)."""
    MPI = _mpi()
    return [MPI.pickle.loads(p) if p.size else None for p in payloads]


def neighbor_allgather(net, sendobj):
    """Return the list of every neighbour's ``sendobj``, in :func:`Get_dist_neighbors` order
    (mirrors ``Topocomm.neighbor_allgather``; one pickle per link, no size message first)."""
    return _blocking(_object_start(net, "neighbor_allgather", sendobj))


def neighbor_alltoall(net, sendobj):
    """Send item ``j`` of ``sendobj`` (``None``: all None) to neighbour ``j``; return the items
    received, one per neighbour (mirrors ``Topocomm.neighbor_alltoall``)."""
    return _blocking(_object_start(net, "neighbor_alltoall", sendobj))
