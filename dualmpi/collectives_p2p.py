"""The collectives of derived communicators: MPI's algorithms over routed point-to-point.

A communicator derived from a network (:mod:`dualmpi.derived`: ``Split``, ``Create_cart``,
...) has ranks that need not be the network's, so the papers' schedules do not apply to it;
its collectives run the algorithms of Open MPI's ``ompi/mca/coll/base`` as messages on its
own collective context (:class:`dualmpi.engine.router.Router`: one hop on a link between
network neighbours, else routed, the ranks in between -- members or not -- forwarding):

=================================================  ============================================
``Bcast``                                          binomial tree (``bcast_intra_binomial``)
``Reduce``                                         binomial tree, the partial results up it
``Gather``/``Gatherv``                             binomial tree, subtrees' blocks concatenated
``Scatter``/``Scatterv``                           binomial tree (Scatterv: sizes in a header)
``Allgather``                                      recursive doubling (2^k ranks), else ring
``Allgatherv``                                     ring (``allgatherv_intra_ring``)
``Allreduce``                                      recursive doubling (``allreduce_intra_recursive
                                                   doubling``, extra ranks folded in); above
                                                   :data:`RING_ALLREDUCE_ABOVE` bytes, ring
                                                   (reduce-scatter ring then allgather ring)
``Reduce_scatter_block``/``Reduce_scatter``        ring (``reduce_scatter_intra_ring``)
``Alltoall``/``Alltoallv``/``Alltoallw``           pairwise exchange (``alltoall_intra_pairwise``)
``Barrier``                                        dissemination (``barrier_intra_bruck``)
``Scan``/``Exscan``                                recursive doubling (``scan_intra_recursive
                                                   doubling``), order preserved
``Neighbor_*``                                     one message per neighbour, Open MPI's tags
=================================================  ============================================

Buffers are read exactly as mpi4py reads them (:mod:`dualmpi.arguments`: counts, IN_PLACE,
derived datatypes packed and unpacked); reductions combine with :func:`dualmpi.ops.resolve`
(MPI's predefined operations, numpy ufuncs, commutative ``MPI.Op``).  Before the data move
the ranks agree in the control plane (one small ``Allreduce`` on the communicator's MPI
twin; for the v-variants first one ``Alltoall`` of the byte counts each rank sends each
other): a rank's own bad argument, ranks that disagree on the root, sizes, datatype or
operation, counts that do not match between two ranks -- every rank raises the same
:class:`~dualmpi.errors.InputError` instead of waiting.  Only control data (verdicts and
counts) ever moves by MPI directly; user data moves over the links.

The nonblocking forms (``Ibcast``, ..., ``Ineighbor_*``) run the same functions in a
:class:`Worker` thread of the communicator, in the order they were started, with a control
communicator and a tag range of their own.
"""

import queue
import time
import zlib

import numpy as np

from . import arguments
from .engine import inflight, threads
from .errors import DualmpiError, InputError

__all__ = [
    "Barrier", "Bcast", "Scatter", "Scatterv", "Gather", "Gatherv", "Allgather", "Allgatherv",
    "Alltoall", "Alltoallv", "Alltoallw", "Reduce", "Allreduce", "Reduce_scatter_block",
    "Reduce_scatter", "Scan", "Exscan", "Neighbor_allgather", "Neighbor_allgatherv",
    "Neighbor_alltoall", "Neighbor_alltoallv", "Neighbor_alltoallw", "neighbor_allgather",
    "neighbor_alltoall", "RING_ALLREDUCE_ABOVE", "ALGORITHMS", "control", "Worker",
]

#: An Allreduce of at least this many bytes (and one element per rank) runs the ring.
RING_ALLREDUCE_ABOVE = 1 << 16

#: The algorithm each call runs (docs/derived.md shows this table).
ALGORITHMS = {
    "Bcast": "binomial tree", "Reduce": "binomial tree", "Gather": "binomial tree",
    "Gatherv": "binomial tree", "Scatter": "binomial tree", "Scatterv": "binomial tree",
    "Allgather": "recursive doubling (2^k ranks), else ring", "Allgatherv": "ring",
    "Allreduce": f"recursive doubling; ring from {RING_ALLREDUCE_ABOVE} bytes",
    "Reduce_scatter_block": "ring", "Reduce_scatter": "ring", "Alltoall": "pairwise exchange",
    "Alltoallv": "pairwise exchange", "Alltoallw": "pairwise exchange",
    "Barrier": "dissemination", "Scan": "recursive doubling", "Exscan": "recursive doubling",
}

_EMPTY = np.zeros(0, np.uint8)
def _mpi():
    from mpi4py import MPI

    return MPI


# -- control plane and waits ----------------------------------------------------------------------
def control(net, comm, name, args, what, watch=True):
    """Run MPI collective ``name`` (``Allreduce``, ``Alltoall``, ``Allgather``) of control data
    on ``comm``, under the watchdog (``watch``), while this rank keeps forwarding the
    network's messages.

    Always MPI's nonblocking form.  With the router's progress thread it is waited for in
    MPI (mpi4py releases the GIL: the thread forwards meanwhile; the rank's nonblocking
    requests in flight are advanced too: :mod:`dualmpi.engine.inflight`); without it the
    request is tested, the hub advanced in between -- a member waiting for the others must
    still forward the messages they wait for.
    """
    hub = net._router.hub
    wd = net._transport.watchdog
    if watch:
        wd.arm(f"{what} on a derived communicator (the ranks' agreement: has every rank of "
               "the communicator called it?)", ())
    try:
        # the nonblocking form on every rank (MPI never matches it with the blocking one),
        # waited for as this rank can: with the progress thread in MPI (the requests in flight
        # advanced meanwhile, when there are: inflight.py), else tested, the hub advanced
        req = getattr(comm, "I" + name.lower())(*args)
        if hub.threaded:
            inflight.waitall([req])
        else:
            _poll(hub, req.Test)
        return None
    finally:
        if watch:
            wd.disarm()


def _poll(hub, done):
    """Return once ``done()``: sleeping while the progress thread works, else advancing the
    hub between tests (no watchdog: the caller's wait, if any, has it)."""
    delay = 1e-5
    while not done():
        moved = False
        if not hub.threaded:
            with hub.lock:
                moved = hub.step()
        inflight.advance()  # (MPI's progress rule: the requests in flight move too)
        if moved:
            delay = 1e-5
        else:
            time.sleep(delay)
            delay = min(2 * delay, 2e-4 if hub.threaded else 1e-3)


# -- the messages of one call ---------------------------------------------------------------------
class _Wire:
    """One collective call's messages on a communicator's collective context (ranks: its own).

    ``send`` starts a message (one MPI message to a network neighbour, else a routed one the
    router buffers at once); ``post``/``post_any`` post a receive of a known size or of any
    size; ``wait`` waits for one; ``finish`` for the sends still in MPI.  Every exchange of
    the algorithms below posts its receives, starts its sends, then waits for both, so no
    order of arrival can deadlock.
    """

    __slots__ = ("comm", "ep", "tag", "rank", "reqs", "what", "MPI", "worker")

    def __init__(self, comm, what, tags=1):
        self.comm, self.ep, self.what = comm, comm._coll, f"{what} on a derived communicator"
        self.tag = comm._next_tag(tags)
        self.rank = comm.rank
        self.reqs = []
        self.MPI = _mpi()
        #: run by a nonblocking collective's worker thread (:class:`Worker`): links counted
        #: under the hub's lock, waits that poll and arm no watchdog
        self.worker = getattr(comm, "worker", False)

    def send(self, data, dest):
        """Start sending uint8 array ``data`` to rank ``dest``."""
        ep, MPI = self.ep, self.MPI
        if dest == self.rank:
            ep.send_self(data, self.tag)
            return
        r = ep.route(self.rank, dest)
        if r.direct:
            if self.worker:
                with ep.hub.lock:
                    ep.hub.count_sent(r.first[0], data.size)
            else:
                ep.count_main(r.first[0], data.size)
            self.reqs.append(ep.direct.Isend([data, MPI.BYTE], dest, self.tag))
        else:
            ep.send_routed(data, dest, self.tag)

    def post(self, buf, source):
        """Post a receive into uint8 array ``buf`` (the message must fill it)."""
        return self.ep.post(source, self.tag, buf, what=self.what)

    def post_any(self, source):
        """Post a receive of a message of any size (its bytes: :meth:`wait`'s result)."""
        return self.ep.post(source, self.tag, keep_payload=True, what=self.what)

    def wait(self, state):
        """Wait for a posted receive; return its bytes (a uint8 array) or None.

        Without the router's progress thread this rank advances the hub while it waits
        (never a blocking MPI wait: the messages of others may have to pass through it).
        """
        ep = self.ep
        if self.worker:
            _poll(ep.hub, lambda: state.done)
        elif ep.hub.threaded:
            ep.wait_for(state)
        elif not state.done:
            where, peers = ep.describe(state.what, state.source)
            ep.hub.wait_until(lambda: state.done, where, peers)
        if state.error is not None:
            raise state.error
        if state.keep_payload:
            payload = state.payload
            state.payload = None
            return np.frombuffer(payload, np.uint8) if len(payload) else _EMPTY
        if state.nbytes != state.buf.size:
            raise DualmpiError(f"{self.what}: rank {state.src} sent {state.nbytes} bytes where "
                               f"{state.buf.size} were expected")
        return None

    def finish(self):
        """Wait for the sends still in MPI (their buffers may change afterwards; without the
        progress thread, advancing the hub meanwhile)."""
        if not self.reqs:
            return
        hub, MPI, reqs = self.ep.hub, self.MPI, self.reqs
        if self.worker:
            _poll(hub, lambda: MPI.Request.Testall(reqs))
        elif hub.threaded:
            wd = hub.wd
            wd.arm(f"{self.what} (its sends)", ())
            try:
                inflight.waitall(reqs)
            finally:
                wd.disarm()
        else:
            hub.wait_until(lambda: MPI.Request.Testall(reqs), f"{self.what} (its sends)", ())
        self.reqs = []

    def exchange(self, data, dest, buf, source):
        """Send ``data`` to ``dest`` and receive ``buf`` from ``source`` (MPI's Sendrecv)."""
        st = self.post(buf, source)
        self.send(data, dest)
        self.wait(st)
        self.finish()


# -- the agreement before data move ----------------------------------------------------------
def _read(read):
    """Return ``(call, problem)``: the reader's result, or this rank's own mistake."""
    try:
        return read(), None
    except InputError as exc:
        return None, exc


def _agree(comm, method, sig, problem, out=None, inn=None):
    """Agree on a call in the control plane; raise the same error on every rank, or return.

    ``sig``: what every rank must pass alike; ``out[j]``/``inn[j]`` (v-variants): bytes
    this rank sends to / expects from rank ``j`` (one ``Alltoall`` compares them).
    """
    MPI = _mpi()
    n = comm.size
    mismatch = 0
    if out is not None:
        mine = np.zeros(n, np.int64) if problem is not None else \
            np.ascontiguousarray(out, np.int64)
        got = np.zeros(n, np.int64)
        comm._control("Alltoall", mine, got, what=f"{method} (its counts)")
        if problem is None and not np.array_equal(got, np.asarray(inn, np.int64)):
            mismatch = 1
    if sig is not None:  # a count may be a Python int on one rank, a numpy one on another
        sig = tuple(int(x) if isinstance(x, (int, np.integer)) else x for x in sig)
    code = 0 if problem is not None else \
        (zlib.crc32(repr((method, sig)).encode()) << 16) + 1
    vec = np.array([code, -code if problem is None else -(1 << 60),
                    comm.rank + 1 if problem is not None else 0,
                    comm.rank + 1 if mismatch else 0], np.int64)
    total = np.zeros(4, np.int64)
    comm._control("Allreduce", vec, total, MPI.MAX, what=method)
    if problem is not None:
        raise problem
    if total[2]:
        raise InputError(f"{method}: rank {total[2] - 1} passed arguments it could not use "
                         "(its error is raised there)")
    if total[0] != -total[1]:
        raise InputError(f"{method}: the ranks disagree on the call's root, sizes, datatype or "
                         "operation")
    if total[3]:
        raise InputError(f"{method}: the counts do not match between ranks (rank "
                         f"{total[3] - 1} expects other sizes than its senders send)")


def _op(call, op, name):
    """Resolve a reduction's operator for ``call``: its combine, its code in the signature."""
    from .ops import resolve

    MPI = _mpi()
    call.op = resolve(MPI.SUM if op is None else op, call.dtype, name, MPI)
    return call


def _reduction(comm, name, read, op):
    """Read and agree on a reduction; return ``(call, combine)``."""
    call, problem = _read(lambda: _op(read(), op, name))
    _agree(comm, name, () if call is None else tuple(call.sig) + (call.op[1],), problem)
    return call, call.op[2]


# -- tree arithmetic ----------------------------------------------------------------------------
def _low(v):
    """The lowest set bit of ``v`` (0 for 0)."""
    return v & -v


def _top(n):
    """The largest power of two below ``n`` (0 for n <= 1)."""
    return 1 << (n - 1).bit_length() - 1 if n > 1 else 0


def _children(v, n):
    """The children of relative rank ``v`` in the binomial tree of ``n``, largest subtree
    first: ``[(child, subtree size)]``."""
    m = _top(n) if v == 0 else _low(v) >> 1
    out = []
    while m >= 1:
        c = v + m
        if c < n:
            out.append((c, min(m, n - c)))
        m >>= 1
    return out


def _subtree(v, n):
    """Size of relative rank ``v``'s subtree."""
    return n if v == 0 else min(_low(v), n - v)


def _offsets(sizes):
    out = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=out[1:])
    return out


# -- one-to-all and all-to-one ---------------------------------------------------------------------
def _bcast(w, data, root, n):
    """Binomial tree broadcast of ``data`` (the root's bytes, the others' buffer)."""
    v = (w.rank - root) % n
    if v:
        w.wait(w.post(data, (v - _low(v) + root) % n))
    for c, _ in _children(v, n):
        w.send(data, (c + root) % n)
    w.finish()


def Bcast(comm, buf, root=0):
    """Broadcast ``buf`` from ``root`` (mirrors ``Comm.Bcast``): binomial tree."""
    call, problem = _read(lambda: arguments.bcast(buf, root, comm.rank, comm.size))
    _agree(comm, "Bcast", None if call is None else call.sig, problem)
    call.pack()
    data = call.send if comm.rank == call.root else call.recv
    if comm.size > 1 and data.size:
        _bcast(_Wire(comm, "Bcast"), data, call.root, comm.size)
    call.unpack()


def _scatter(w, root, n, tmp, sizes, header):
    """Binomial scatter: ``tmp`` holds the blocks of this subtree in relative order
    (``sizes`` each; None below the root when ``header``: they come first in the message).
    Return this rank's block."""
    v = (w.rank - root) % n
    if v:
        parent = (v - _low(v) + root) % n
        sub = _subtree(v, n)
        if header:
            got = w.wait(w.post_any(parent))
            sizes = got[:8 * sub].copy().view(np.int64)
            tmp = got[8 * sub:]
        else:
            tmp = np.empty(int(sum(sizes[:sub])), np.uint8)
            w.wait(w.post(tmp, parent))
    off = _offsets(sizes)
    for c, sub in _children(v, n):
        a, b = int(off[c - v]), int(off[c - v + sub])
        if header:
            msg = np.concatenate([np.asarray(sizes[c - v:c - v + sub], np.int64).view(np.uint8),
                                  tmp[a:b]])
        else:
            msg = tmp[a:b]
        w.send(msg, (c + root) % n)
    w.finish()
    return tmp[:int(off[1])]


def _scatter_call(comm, method, call, v):
    n, r, root = comm.size, comm.rank, call.root
    vec = call.vector
    if r == root:
        if v:
            counts, displs = vec["send"], vec["sdispls"]
        else:
            counts = np.full(n, call.nbytes, np.int64)
            displs = np.arange(n, dtype=np.int64) * call.nbytes
        order = [(i + root) % n for i in range(n)]
        sizes = np.array([counts[j] for j in order], np.int64)
        tmp = np.concatenate([call.send[int(displs[j]):int(displs[j] + counts[j])]
                              for j in order]) if n else _EMPTY
    else:
        sizes = None if v else np.full(n, call.nbytes, np.int64)
        tmp = None
    mine = _scatter(_Wire(comm, method), root, n, tmp, sizes, v) if n > 1 else tmp
    if call.recv is not None:
        call.recv[:mine.size] = mine


def Scatter(comm, sendbuf, recvbuf, root=0):
    """Scatter ``root``'s pieces (mirrors ``Comm.Scatter``): binomial tree."""
    call, problem = _read(lambda: arguments.scatter(sendbuf, recvbuf, root, comm.rank,
                                                    comm.size))
    _agree(comm, "Scatter", None if call is None else call.sig, problem)
    call.pack()
    _scatter_call(comm, "Scatter", call, False)
    call.unpack()


def Scatterv(comm, sendbuf, recvbuf, root=0):
    """Scatter pieces of one size per rank (mirrors ``Comm.Scatterv``): binomial tree."""
    n, r = comm.size, comm.rank
    call, problem = _read(lambda: arguments.scatter(sendbuf, recvbuf, root, r, n, v=True))
    out = inn = None
    if call is not None:
        vec = call.vector
        out, inn = np.zeros(n, np.int64), np.zeros(n, np.int64)
        if r == call.root:
            out[:] = vec["send"]
        inn[call.root] = vec["recv"] if vec["recv"] is not None else vec["send"][r]
    _agree(comm, "Scatterv", None if call is None else (call.root, call.vector["typesig"]),
           problem, out, inn)
    call.pack()
    _scatter_call(comm, "Scatterv", call, True)
    call.unpack()


def _gather(w, root, n, mine, sizes):
    """Binomial gather of ``mine``; return the blocks in relative order at the root (else
    None).  ``sizes``: every rank's bytes (known everywhere), or None (any size)."""
    v = (w.rank - root) % n
    parts, states = [mine], []
    for c, sub in reversed(_children(v, n)):
        src = (c + root) % n
        if sizes is None:
            states.append((w.post_any(src), None))
        else:
            buf = np.empty(int(sum(sizes[(c + k + root) % n] for k in range(sub))), np.uint8)
            states.append((w.post(buf, src), buf))
    for st, buf in states:
        got = w.wait(st)
        parts.append(buf if got is None else got)
    whole = np.concatenate(parts) if len(parts) > 1 else mine
    if v:
        w.send(whole, (v - _low(v) + root) % n)
        w.finish()
        return None
    return whole


def _gather_call(comm, method, call, v):
    n, r, root = comm.size, comm.rank, call.root
    if v:
        counts = call.vector["recv"] if r == root else None
        displs = call.vector["rdispls"] if r == root else None
        sizes = None
    else:
        counts = sizes = np.full(n, call.nbytes, np.int64)
        displs = np.arange(n, dtype=np.int64) * call.nbytes
    mine = np.array(call.send, np.uint8, copy=True) if r == root else call.send
    whole = _gather(_Wire(comm, method), root, n, mine, sizes) if n > 1 else mine
    if whole is not None:
        pos = 0
        for i in range(n):
            j = (i + root) % n
            c = int(counts[j])
            call.recv[int(displs[j]):int(displs[j]) + c] = whole[pos:pos + c]
            pos += c


def Gather(comm, sendbuf, recvbuf, root=0):
    """Gather every rank's piece at ``root`` (mirrors ``Comm.Gather``): binomial tree."""
    call, problem = _read(lambda: arguments.gather(sendbuf, recvbuf, root, comm.rank,
                                                   comm.size))
    _agree(comm, "Gather", None if call is None else call.sig, problem)
    call.pack()
    _gather_call(comm, "Gather", call, False)
    call.unpack()


def Gatherv(comm, sendbuf, recvbuf, root=0):
    """Gather pieces of one size per rank (mirrors ``Comm.Gatherv``): binomial tree."""
    n, r = comm.size, comm.rank
    call, problem = _read(lambda: arguments.gather(sendbuf, recvbuf, root, r, n, v=True))
    out = inn = None
    if call is not None:
        vec = call.vector
        out, inn = np.zeros(n, np.int64), np.zeros(n, np.int64)
        out[call.root] = vec["send"]
        if r == call.root:
            inn[:] = vec["recv"]
    _agree(comm, "Gatherv", None if call is None else (call.root, call.vector["typesig"]),
           problem, out, inn)
    call.pack()
    _gather_call(comm, "Gatherv", call, True)
    call.unpack()


# -- all to all ---------------------------------------------------------------------------------
def _ring(w, n, data, counts, displs):
    """Ring allgather in place: block ``i`` of ``data`` at ``displs[i]`` (``counts[i]``
    bytes), this rank's block filled in."""
    r = w.rank
    right, left = (r + 1) % n, (r - 1) % n
    for k in range(n - 1):
        sb, rb = (r - k) % n, (r - k - 1) % n
        a, b = int(displs[sb]), int(displs[rb])
        w.exchange(data[a:a + int(counts[sb])], right, data[b:b + int(counts[rb])], left)


def _doubling(w, n, data, nb):
    """Recursive doubling allgather (``n`` a power of two, blocks of ``nb`` bytes)."""
    r, d = w.rank, 1
    while d < n:
        partner = r ^ d
        mine, theirs = (r // d) * d, (partner // d) * d
        w.exchange(data[mine * nb:(mine + d) * nb], partner,
                   data[theirs * nb:(theirs + d) * nb], partner)
        d <<= 1


def Allgather(comm, sendbuf, recvbuf):
    """Gather every piece at every rank (mirrors ``Comm.Allgather``): recursive doubling on
    2^k ranks, else ring."""
    n, r = comm.size, comm.rank
    call, problem = _read(lambda: arguments.allgather(sendbuf, recvbuf, r, n))
    _agree(comm, "Allgather", None if call is None else call.sig, problem)
    call.pack()
    nb = call.nbytes
    data = call.recv
    data[r * nb:(r + 1) * nb] = call.send
    if n > 1 and nb:
        w = _Wire(comm, "Allgather")
        if n & (n - 1) == 0:
            _doubling(w, n, data, nb)
        else:
            _ring(w, n, data, np.full(n, nb, np.int64), np.arange(n, dtype=np.int64) * nb)
    call.unpack()


def Allgatherv(comm, sendbuf, recvbuf):
    """Allgather with one size per rank (mirrors ``Comm.Allgatherv``): ring."""
    n, r = comm.size, comm.rank
    call, problem = _read(lambda: arguments.allgather(sendbuf, recvbuf, r, n, v=True))
    out = inn = None
    if call is not None:
        out, inn = np.full(n, call.vector["send"], np.int64), call.vector["recv"]
    _agree(comm, "Allgatherv", None if call is None else (call.vector["typesig"],), problem,
           out, inn)
    call.pack()
    counts, displs = call.vector["recv"], call.vector["rdispls"]
    a = int(displs[r])
    call.recv[a:a + int(counts[r])] = call.send
    if n > 1:
        _ring(_Wire(comm, "Allgatherv"), n, call.recv, counts, displs)
    call.unpack()


def _pairwise(comm, method, send, scounts, sdispls, recv, rcounts, rdispls):
    """Pairwise exchange: at step ``k`` this rank sends to ``rank + k``, receives from
    ``rank - k``."""
    n, r = comm.size, comm.rank
    a, b = int(sdispls[r]), int(rdispls[r])
    recv[b:b + int(rcounts[r])] = send[a:a + int(scounts[r])]
    w = _Wire(comm, method) if n > 1 else None
    for k in range(1, n):
        dst, src = (r + k) % n, (r - k) % n
        a, b = int(sdispls[dst]), int(rdispls[src])
        w.exchange(send[a:a + int(scounts[dst])], dst, recv[b:b + int(rcounts[src])], src)


def Alltoall(comm, sendbuf, recvbuf):
    """Piece ``j`` to rank ``j`` (mirrors ``Comm.Alltoall``): pairwise exchange."""
    n, r = comm.size, comm.rank
    call, problem = _read(lambda: arguments.alltoall(sendbuf, recvbuf, r, n))
    _agree(comm, "Alltoall", None if call is None else call.sig, problem)
    call.pack()
    nb = call.nbytes
    send = call.send.copy() if call.send is call.recv or \
        np.may_share_memory(call.send, call.recv) else call.send
    counts, displs = np.full(n, nb, np.int64), np.arange(n, dtype=np.int64) * nb
    _pairwise(comm, "Alltoall", send, counts, displs, call.recv, counts, displs)
    call.unpack()


def _alltoall_v(comm, method, read):
    call, problem = _read(read)
    vec = None if call is None else call.vector
    _agree(comm, method, None if call is None else (vec["typesig"],), problem,
           None if call is None else vec["send"], None if call is None else vec["recv"])
    call.pack()
    send = call.send.copy() if np.may_share_memory(call.send, call.recv) else call.send
    _pairwise(comm, method, send, vec["send"], vec["sdispls"], call.recv, vec["recv"],
              vec["rdispls"])
    call.unpack()


def Alltoallv(comm, sendbuf, recvbuf):
    """The total exchange with a count per pair (mirrors ``Comm.Alltoallv``): pairwise."""
    _alltoall_v(comm, "Alltoallv", lambda: arguments.alltoall(sendbuf, recvbuf, comm.rank,
                                                              comm.size, v=True))


def Alltoallw(comm, sendbuf, recvbuf):
    """The total exchange with a datatype per pair (mirrors ``Comm.Alltoallw``): pairwise."""
    _alltoall_v(comm, "Alltoallw", lambda: arguments.alltoallw(sendbuf, recvbuf, comm.rank,
                                                               comm.size))


def Barrier(comm):
    """Synchronise the ranks (mirrors ``Comm.Barrier``): dissemination, empty messages to
    ``rank + 2^k`` from ``rank - 2^k``."""
    n = comm.size
    if n == 1:
        return
    w = _Wire(comm, "Barrier")
    r, d = w.rank, 1
    while d < n:
        w.exchange(_EMPTY, (r + d) % n, np.empty(0, np.uint8), (r - d) % n)
        d <<= 1


# -- reductions -----------------------------------------------------------------------------------
def Reduce(comm, sendbuf, recvbuf, op=None, root=0):
    """Reduce at ``root`` (mirrors ``Comm.Reduce``): binomial tree, partial results up it."""
    n, r = comm.size, comm.rank
    call, combine = _reduction(comm, "Reduce", lambda: arguments.reduce(sendbuf, recvbuf, root,
                                                                         r, n), op)
    call.pack()
    root = call.root
    acc = np.array(call.send, np.uint8, copy=True)
    if n > 1 and acc.size:
        w = _Wire(comm, "Reduce")
        v = (r - root) % n
        tmp = np.empty_like(acc)
        m = 1
        while m < n:
            if v & m:
                w.send(acc, (v - m + root) % n)
                w.finish()
                break
            if v + m < n:
                w.wait(w.post(tmp, (v + m + root) % n))
                combine(acc, tmp)  # tmp = acc (lower ranks) op child's
                acc, tmp = tmp, acc
            m <<= 1
    if r == root:
        call.recv[:] = acc
    call.unpack()


def _doubling_allreduce(w, n, acc, combine):
    """Open MPI's recursive doubling allreduce on ``acc`` (in place); extra ranks folded in."""
    r = w.rank
    adj = 1 << (n.bit_length() - 1)
    extra = n - adj
    tmp = np.empty_like(acc)
    if r < 2 * extra:
        if r % 2 == 0:
            w.send(acc, r + 1)
            w.finish()
            new = -1
        else:
            w.wait(w.post(tmp, r - 1))
            combine(tmp, acc)  # acc = left's op acc
            new = r >> 1
    else:
        new = r - extra
    d = 1
    while new >= 0 and d < adj:
        nr = new ^ d
        remote = nr * 2 + 1 if nr < extra else nr + extra
        w.exchange(acc, remote, tmp, remote)
        if r < remote:
            combine(acc, tmp)
            acc[:] = tmp
        else:
            combine(tmp, acc)
        d <<= 1
    if r < 2 * extra:
        if r % 2 == 0:
            w.wait(w.post(acc, r + 1))
        else:
            w.send(acc, r - 1)
            w.finish()


def _ring_reduce_scatter(w, n, acc, counts, combine):
    """Ring reduce-scatter in place on ``acc`` (``n`` blocks of ``counts`` bytes): at step
    ``k`` block ``rank - k - 1`` goes right and block ``rank - k - 2`` comes from the left and
    is combined; after ``n - 1`` steps this rank holds its block ``rank`` reduced over every
    rank."""
    r = w.rank
    right, left = (r + 1) % n, (r - 1) % n
    off = _offsets(counts)
    tmp = np.empty(int(max(counts)) if n else 0, np.uint8)
    for k in range(n - 1):
        sb, rb = (r - k - 1) % n, (r - k - 2) % n
        rc = int(counts[rb])
        w.exchange(acc[int(off[sb]):int(off[sb + 1])], right, tmp[:rc], left)
        combine(tmp[:rc], acc[int(off[rb]):int(off[rb + 1])])


def _split(nelems, n, item):
    """Byte counts of ``n`` blocks of ``nelems`` elements split as evenly as possible."""
    counts = np.full(n, nelems // n, np.int64)
    counts[:nelems % n] += 1
    return counts * item


def Allreduce(comm, sendbuf, recvbuf, op=None):
    """Reduce at every rank (mirrors ``Comm.Allreduce``): recursive doubling; from
    :data:`RING_ALLREDUCE_ABOVE` bytes (and one element per rank) the ring."""
    n = comm.size
    call, combine = _reduction(comm, "Allreduce", lambda: arguments.allreduce(sendbuf, recvbuf),
                               op)
    call.pack()
    acc = np.array(call.send, np.uint8, copy=True)
    if n > 1 and acc.size:
        w = _Wire(comm, "Allreduce")
        item = call.itemsize
        if acc.size >= RING_ALLREDUCE_ABOVE and acc.size // item >= n:
            counts = _split(acc.size // item, n, item)
            _ring_reduce_scatter(w, n, acc, counts, combine)
            _ring(w, n, acc, counts, _offsets(counts)[:-1])
        else:
            _doubling_allreduce(w, n, acc, combine)
    call.recv[:] = acc
    call.unpack()


def Reduce_scatter_block(comm, sendbuf, recvbuf, op=None):
    """Reduce, then block ``r`` to rank ``r`` (mirrors ``Comm.Reduce_scatter_block``): ring."""
    n, r = comm.size, comm.rank
    call, combine = _reduction(comm, "Reduce_scatter_block",
                               lambda: arguments.reduce_scatter_block(sendbuf, recvbuf, r, n), op)
    call.pack()
    counts = np.full(n, call.nbytes, np.int64)
    acc = np.array(call.send, np.uint8, copy=True)
    if n > 1 and call.nbytes:
        _ring_reduce_scatter(_Wire(comm, "Reduce_scatter_block"), n, acc, counts, combine)
    call.recv[:] = acc[r * call.nbytes:(r + 1) * call.nbytes]
    call.unpack()


def Reduce_scatter(comm, sendbuf, recvbuf, recvcounts=None, op=None):
    """Reduce, then ``recvcounts[r]`` elements to rank ``r`` (mirrors ``Comm.Reduce_scatter``):
    ring.  Without ``recvcounts`` every rank's receive count is learned first (control plane)."""
    n, r = comm.size, comm.rank
    name = "Reduce_scatter"
    call, problem = _read(lambda: _op(arguments.reduce_scatter(sendbuf, recvbuf, recvcounts,
                                                               r, n), op, name))
    mine = np.array([-1 if call is None else call.vector["recv"]], np.int64)
    every = np.zeros(n, np.int64)
    comm._control("Allgather", mine, every, what=f"{name} (its counts)")
    out = inn = counts = None
    if call is not None:
        given = call.vector["counts"] is not None
        counts = call.vector["counts"] if given else every
        inn = np.full(n, call.vector["recv"], np.int64)
        out = counts
        if (every < 0).any():
            out = inn  # another rank failed: the verdict says so
        elif int(np.sum(counts)) != call.send.size:  # counts learned that do not fit
            out = np.where(np.arange(n) == r, -1, inn)
    sig = None if call is None else (call.vector["item"], call.vector["typesig"], call.op[1])
    _agree(comm, name, sig, problem, out, inn)
    call.pack()
    acc = np.array(call.send, np.uint8, copy=True)
    if n > 1 and acc.size:
        _ring_reduce_scatter(_Wire(comm, name), n, acc, counts, call.op[2])
    off = _offsets(counts)
    call.recv[:] = acc[int(off[r]):int(off[r + 1])]
    call.unpack()


def _scan(comm, name, sendbuf, recvbuf, op, exclusive):
    n, r = comm.size, comm.rank
    call, combine = _reduction(comm, name, lambda: arguments.scan(sendbuf, recvbuf, exclusive),
                               op)
    call.pack()
    psend = np.array(call.send, np.uint8, copy=True)
    result = None if exclusive else psend.copy()
    if n > 1 and psend.size:
        w = _Wire(comm, name)
        precv = np.empty_like(psend)
        m = 1
        while m < n:
            remote = r ^ m
            if remote < n:
                w.exchange(psend, remote, precv, remote)
                if r > remote:
                    if result is None:
                        result = precv.copy()
                    else:
                        combine(precv, result)  # result = precv op result
                    combine(precv, psend)
                else:
                    combine(psend, precv)  # precv = psend op precv (order kept)
                    psend, precv = precv, psend
            m <<= 1
    if result is not None:
        call.recv[:] = result
        call.unpack()


def Scan(comm, sendbuf, recvbuf, op=None):
    """Inclusive prefix reduction (mirrors ``Comm.Scan``): recursive doubling."""
    _scan(comm, "Scan", sendbuf, recvbuf, op, False)


def Exscan(comm, sendbuf, recvbuf, op=None):
    """Exclusive prefix reduction (mirrors ``Comm.Exscan``; rank 0's ``recvbuf`` untouched):
    recursive doubling."""
    _scan(comm, "Exscan", sendbuf, recvbuf, op, True)


# -- neighbourhood collectives ----------------------------------------------------------------------
def _neighbour_read(comm, method, sendbuf, recvbuf, nin, nout):
    """Read a neighbourhood call's buffers: ``(send blocks, recv blocks, messages)``."""
    from . import msgbuffer

    def vector(spec, k, role, what):
        if k:
            return msgbuffer.vector(spec, k, role=role, what=what)
        return None

    s_what, r_what = f"{method} sendbuf", f"{method} recvbuf"
    if method in ("Neighbor_allgather", "Neighbor_allgatherv"):
        send = msgbuffer.simple(sendbuf, role="send", what=s_what)
        if method == "Neighbor_allgather":
            recv = msgbuffer.simple(recvbuf, blocks=max(nin, 1), role="recv", what=r_what)
            rblocks = [(i * recv.nbytes, recv.nbytes) for i in range(nin)]
        else:
            recv = vector(recvbuf, nin, "recv", r_what)
            rblocks = [] if recv is None else \
                [(int(recv.byte_displs[i]), int(recv.byte_counts[i])) for i in range(nin)]
        sblocks = [(0, send.nbytes)] * nout
    elif method == "Neighbor_alltoall":
        send = msgbuffer.simple(sendbuf, blocks=max(nout, 1), role="send", what=s_what)
        recv = msgbuffer.simple(recvbuf, blocks=max(nin, 1), role="recv", what=r_what)
        sblocks = [(i * send.nbytes, send.nbytes) for i in range(nout)]
        rblocks = [(i * recv.nbytes, recv.nbytes) for i in range(nin)]
    else:
        if method == "Neighbor_alltoallv":
            send = vector(sendbuf, nout, "send", s_what)
            recv = vector(recvbuf, nin, "recv", r_what)
        else:  # mpi4py reads the receive side first
            recv = msgbuffer.wvector(recvbuf, nin, role="recv", what=r_what) if nin else None
            send = msgbuffer.wvector(sendbuf, nout, role="send", what=s_what) if nout else None
        sblocks = [] if send is None else \
            [(int(send.byte_displs[i]), int(send.byte_counts[i])) for i in range(nout)]
        rblocks = [] if recv is None else \
            [(int(recv.byte_displs[i]), int(recv.byte_counts[i])) for i in range(nin)]
    return send, recv, sblocks, rblocks


def _neighbour_run(comm, method, sends, recvs):
    """One message per edge: ``sends``/``recvs`` ``[(rank, tag offset, data or buffer)]``
    (``recvs``' buffer None: any size); returns the received bytes per receive."""
    MPI = _mpi()
    w = _Wire(comm, method, comm._neighbour_tags())
    base = w.tag
    states = []
    for rank, off, buf in recvs:
        if rank == MPI.PROC_NULL:
            states.append(None)
            continue
        w.tag = base + off
        states.append(w.post(buf, rank) if buf is not None else w.post_any(rank))
    for rank, off, data in sends:
        if rank != MPI.PROC_NULL:
            w.tag = base + off
            w.send(data, rank)
    got = [None if st is None else w.wait(st) for st in states]
    w.finish()
    return got


def _neighbour_counts(comm, ins, outs, in_bytes, out_bytes):
    """``out[j]``, ``inn[j]``: bytes this rank sends to / expects from rank ``j``."""
    MPI = _mpi()
    out, inn = np.zeros(comm.size, np.int64), np.zeros(comm.size, np.int64)
    for (rank, _), nb in zip(outs, out_bytes):
        if rank != MPI.PROC_NULL:
            out[rank] += nb
    for (rank, _), nb in zip(ins, in_bytes):
        if rank != MPI.PROC_NULL:
            inn[rank] += nb
    return out, inn


def _neighbour(comm, method, sendbuf, recvbuf):
    ins, outs = comm._neighbour_edges()
    got, problem = _read(lambda: _neighbour_read(comm, method, sendbuf, recvbuf, len(ins),
                                                 len(outs)))
    out = inn = None
    if got is not None:
        _, _, sblocks, rblocks = got
        out, inn = _neighbour_counts(comm, ins, outs, [b for _, b in rblocks],
                                     [b for _, b in sblocks])
    _agree(comm, method, None, problem, out, inn)
    send, recv, sblocks, rblocks = got
    if send is not None:
        send.pack()
    sdata = send.data if send is not None else _EMPTY
    rdata = recv.data if recv is not None else _EMPTY
    sends = [(rank, off, sdata[a:a + nb]) for (rank, off), (a, nb) in zip(outs, sblocks)]
    recvs = [(rank, off, rdata[a:a + nb]) for (rank, off), (a, nb) in zip(ins, rblocks)]
    _neighbour_run(comm, method, sends, recvs)
    if recv is not None and ins:
        recv.unpack()


def Neighbor_allgather(comm, sendbuf, recvbuf):
    """Gather one block from every in-neighbour (mirrors ``Topocomm.Neighbor_allgather``)."""
    _neighbour(comm, "Neighbor_allgather", sendbuf, recvbuf)


def Neighbor_allgatherv(comm, sendbuf, recvbuf):
    """Gather a block of one size per in-neighbour (``Topocomm.Neighbor_allgatherv``)."""
    _neighbour(comm, "Neighbor_allgatherv", sendbuf, recvbuf)


def Neighbor_alltoall(comm, sendbuf, recvbuf):
    """Block ``j`` to out-neighbour ``j``, block ``i`` from in-neighbour ``i``
    (mirrors ``Topocomm.Neighbor_alltoall``)."""
    _neighbour(comm, "Neighbor_alltoall", sendbuf, recvbuf)


def Neighbor_alltoallv(comm, sendbuf, recvbuf):
    """The neighbourhood exchange with a count per neighbour (``Topocomm.Neighbor_alltoallv``)."""
    _neighbour(comm, "Neighbor_alltoallv", sendbuf, recvbuf)


def Neighbor_alltoallw(comm, sendbuf, recvbuf):
    """The neighbourhood exchange with a datatype per neighbour (``Topocomm.Neighbor_alltoallw``)."""
    _neighbour(comm, "Neighbor_alltoallw", sendbuf, recvbuf)


def _neighbour_objects(comm, method, sendobj):
    MPI = _mpi()
    ins, outs = comm._neighbour_edges()
    pickles, problem = None, None
    try:
        if method == "neighbor_allgather":
            pickles = [MPI.pickle.dumps(sendobj)] * len(outs)
        else:
            items = [None] * len(outs) if sendobj is None else list(sendobj)
            if len(items) != len(outs):
                raise InputError(f"{method}: expecting {len(outs)} items (one per neighbour), "
                                 f"got {len(items)}")
            pickles = [MPI.pickle.dumps(x) for x in items]
    except InputError as exc:
        problem = exc
    except Exception as exc:  # noqa: BLE001 - pickling raises many kinds; every rank hears
        problem = InputError(f"{method}: could not pickle the object ({type(exc).__name__}: "
                             f"{exc})")
        problem.__cause__ = exc
    _agree(comm, method, None, problem)
    sends = [(rank, off, np.frombuffer(p, np.uint8)) for (rank, off), p in zip(outs, pickles)]
    recvs = [(rank, off, None) for rank, off in ins]
    got = _neighbour_run(comm, method, sends, recvs)
    return [None if g is None or not g.size else MPI.pickle.loads(g) for g in got]


def neighbor_allgather(comm, sendobj):
    """Every in-neighbour's object, in neighbour order (``Topocomm.neighbor_allgather``)."""
    return _neighbour_objects(comm, "neighbor_allgather", sendobj)


def neighbor_alltoall(comm, sendobj):
    """Item ``j`` to out-neighbour ``j``; one item per in-neighbour (``neighbor_alltoall``)."""
    return _neighbour_objects(comm, "neighbor_alltoall", sendobj)


# -- nonblocking collectives ------------------------------------------------------------------------
class _View:
    """A communicator as its nonblocking collectives' worker sees it: a control communicator
    and a tag sequence of their own (the upper half of the tags; blocking calls use the lower
    half), waits that poll (the user's ``Wait`` has the watchdog)."""

    worker = True

    def __init__(self, target):
        self._target = target
        self.comm = target._nbctl
        self._tag = target._tag_ub // 2

    def __getattr__(self, name):
        return getattr(self._target, name)

    def _control(self, name, *args, what):
        self._target._live(what)
        return control(self._target.net, self.comm, name, args, what, watch=False)

    def _next_tag(self, span=1):
        t = self._tag
        if t + span >= self._target._tag_ub:
            t = self._target._tag_ub // 2
        self._tag = t + span
        return t


class Worker:
    """Runs a derived communicator's nonblocking collectives, one after another in the order
    they were started (every rank starts them in the same order, as MPI requires), in a
    thread of its own, while the caller goes on; each is the blocking algorithm, its
    agreement on a control communicator of its own.  Needs ``MPI_THREAD_MULTIPLE``.

    Parameters
    ----------
    comm : dualmpi.derived.Intracomm
    """

    def __init__(self, comm):
        self.comm = comm
        self.view = _View(comm)
        self.jobs = queue.Queue()
        self.thread = None

    def submit(self, method, run):
        """Queue ``run(view)`` (the collective); return its request (an ``MPI.Request``:
        ``Wait``/``Test`` raise the collective's error, if any)."""
        from .engine.router import _State

        ep = self.comm._coll
        state = _State(ep, False, what=f"{method} on a derived communicator", request=True)
        if self.thread is None:
            self.thread = threads.start(self._loop, "dualmpi-collectives")
        self.jobs.put((run, state))
        return ep.request(state)

    def _loop(self):
        ep = self.comm._coll
        while True:
            job = self.jobs.get()
            if job is None:
                return
            run, state = job
            try:
                run(self.view)
            except Exception as exc:  # noqa: BLE001 - raised by the request's Wait/Test
                state.error = exc
            with ep.hub.lock:
                ep._complete(state)

    def close(self):
        """Wait until every queued collective has run, then stop the thread."""
        if self.thread is not None:
            self.jobs.put(None)
            self.thread.join()
            self.thread = None
