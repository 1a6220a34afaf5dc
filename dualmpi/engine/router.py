"""The router: point-to-point messages between any two ranks, forwarded hop by hop over the links.

A message from rank ``a`` to rank ``b`` travels the network's route between a node of ``a``
and a node of ``b`` (:func:`node_pair`; ``topology.route(u, v)``, the detour under faults).
Two channels, both duplicates of the graph communicator (edges: the ranks joined by a link):

*direct*
    When the route leaves ``a`` once and enters ``b`` (one hop between the ranks, e.g.
    neighbours with one node per rank), the message is one MPI message on the transport's
    ``p2p`` communicator, without header, the user's tag as MPI tag.
*routed*
    Otherwise a 64-byte header (kind, source rank, tag, route's nodes, position,
    identifier, context) and the packed payload travel as one MPI message per rank-to-rank
    hop on a communicator of the router's own; every rank on the way receives it and sends
    it on to the rank playing the route's next node.  Hops between two nodes of one rank
    are local.

Contexts: the communicators derived from the network (:mod:`dualmpi.derived`: ``Split``,
``Create_cart``, ...) share its :class:`Hub` -- routed channel, progress and link counts --
each as a :class:`Router` of its own under a context id in the header (MPI's contexts: a
message matches receives of its own communicator only), its ranks translated to the
network's, its direct channel an MPI communicator of its own ranks.

Receives follow MPI's matching: posted receives in the order posted, arrived messages in the
order they arrived (per sender the send order: the route is fixed and every hop FIFO), a
message taken by the earliest posted receive that matches it.  Routed messages arrive
through the router's progress (:meth:`Hub.step`); direct ones stay in MPI until a
receive takes them (``Mprobe`` then ``Mrecv``: a message longer than the buffer is
received into scratch and refused, never truncated by MPI -- Open MPI's wheel corrupts
its heap on a truncated rendezvous message).

Progress: with ``MPI_THREAD_MULTIPLE`` (mpi4py's default) a daemon thread forwards and
delivers while the rank's own thread computes or waits anywhere (in a collective's
compiled loop, in MPI); it polls with ``Improbe`` and sleeps between polls, longer the
longer nothing happens (:data:`POLL`).  A rank's own waits in dualmpi poll too, or block
in ``MPI_Mprobe`` when nothing else can take the message.  Without it, messages move only
inside dualmpi calls.  docs/p2p.md has the design, its costs and the measurements.
"""

import atexit
import os
import sys
import threading
import time
import traceback

import numpy as np
from mpi4py import MPI

from ..errors import DualmpiError, mpi_error
from . import inflight, threads
from .mpi import OTHER_GRACE, ROOT_GRACE
from .watchdog import last_words

__all__ = ["Hub", "Router", "Request", "Arrival", "node_pair", "POLL", "HEADER_BYTES"]

#: Bytes of a routed message's header: 8 int64 words.
HEADER_BYTES = 64
#: Header words: kind, source (network) rank, tag, the route's nodes, the position on it,
#: a sync send's identifier, the context (the communicator: 0 is the network's own).
_KIND, _SRC, _TAG, _U, _V, _POS, _IDENT, _CTX = range(8)
#: Kinds of routed message: data, data whose sender waits for the match (Ssend), the ack.
DATA, SYNC, ACK = 1, 2, 3

#: Polling of the progress thread (seconds): after traffic it yields (``sleep(0)``) for
#: ``spin``, then sleeps from ``first`` doubling up to ``hot`` while this rank has receives
#: posted, sends unacknowledged, a thread waiting in dualmpi or saw traffic within ``warm``,
#: else up to ``cold``, and after ``quiet`` with none of these ``idle`` at a time (a sleep that a
#: new send, posted receive or waiter of the rank ends at once: only a message another rank
#: routes through this one waits for it).  A rank's own waits sleep until the progress
#: thread delivers (at most ``hot``), or, without the thread, poll with the same schedule.
#: ``DUALMPI_POLL`` (e.g. ``spin=1e-3,cold=5e-3``) changes them; docs/p2p.md has the
#: measured trade-off.
POLL = {"spin": 1e-3, "first": 2e-5, "hot": 2e-4, "warm": 0.05, "cold": 2e-3, "quiet": 1.0,
        "idle": 2e-2}
ENV_POLL = "DUALMPI_POLL"


def _poll_from_env():
    """Apply ``DUALMPI_POLL`` (``key=seconds,...``) to :data:`POLL`."""
    text = os.environ.get(ENV_POLL, "").strip()
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, _, value = item.partition("=")
        if key not in POLL:
            raise DualmpiError(f"{ENV_POLL}: unknown key {key!r} (keys: {', '.join(POLL)})")
        try:
            POLL[key] = float(value)
        except ValueError:
            raise DualmpiError(f"{ENV_POLL}: {key}={value!r} is not a number of seconds") \
                from None


def _fine_timer():
    """Ask Linux for 1 us timer slack in this thread (default 50 us), so its short sleeps
    end when asked; elsewhere (or refused) nothing changes."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        pass

#: Tag of the drain's sums (:meth:`Hub.control_sum`) on the transport's control communicator.
DRAIN_TAG = 7900

#: Pairs of nodes tried per rank pair (the first ``PAIR_NODES`` nodes of each rank).
PAIR_NODES = 32

#: Environment switch: ``DUALMPI_PROGRESS_THREAD=0`` runs without the progress thread.
ENV_THREAD = "DUALMPI_PROGRESS_THREAD"

_LIVE = []  # routers not yet closed, in creation order (closed at exit, collectively)
_HOOKED = []


def node_pair(topo, q, a, b, limit=PAIR_NODES):
    """Return ``(u, v)``: the nodes of ranks ``a`` and ``b`` whose route carries ``a -> b``.

    Among the first ``limit`` nodes of each rank (every node when ``q <= limit``), the pair
    with the fewest hops on its route, then the fewest hops between ranks, then the smallest
    ``(u, v)``; dead nodes (under faults) are skipped.  A rank to itself is ``(a*q, a*q)``.

    >>> from dualmpi.topology import from_spec
    >>> node_pair(from_spec("dualcube:r=2"), 1, 0, 5)
    (0, 5)
    >>> node_pair(from_spec("hypercube:n=3"), 2, 0, 3)   # nodes 0, 1 and 6, 7: 2 hops each
    (0, 6)
    >>> node_pair(from_spec("hypercube:n=3"), 2, 0, 2)   # nodes 0, 1 and 4, 5: 0 -> 4 is 1 hop
    (0, 4)
    """
    if a == b:
        return a * q, a * q
    alive = getattr(topo, "alive", None)
    best = None
    k = min(q, limit)
    for u in range(a * q, a * q + k):
        if alive is not None and not alive(u):
            continue
        for v in range(b * q, b * q + k):
            if alive is not None and not alive(v):
                continue
            try:
                path = topo.route(u, v)
            except DualmpiError:
                continue
            changes = sum(1 for x, y in zip(path, path[1:]) if x // q != y // q)
            key = (len(path) - 1, changes, u, v)
            if best is None or key < best:
                best = key
    if best is None:
        raise DualmpiError(f"rank {b} cannot be reached from rank {a} on {topo.spec}: the "
                           "faults cut every route off")
    return best[2], best[3]


class Arrival:
    """A message that arrived at this rank and waits for a receive (routed or to itself):
    ``src`` its communicator's source rank, ``origin`` the network rank a sync send's
    acknowledgement goes back to."""

    __slots__ = ("src", "tag", "payload", "sync", "origin")

    def __init__(self, src, tag, payload, sync, origin):
        self.src, self.tag, self.payload, self.sync = src, tag, payload, sync
        self.origin = origin


class _State:
    """What a request of the router is: a posted receive, or a send (waiting for its ack)."""

    __slots__ = ("router", "source", "tag", "buf", "finish", "done", "error", "src", "rtag",
                 "nbytes", "cancelled", "greq", "payload", "keep_payload", "recv", "what", "req",
                 "__weakref__")

    def __init__(self, router, recv, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, buf=None,
                 finish=None, keep_payload=False, what="", request=False):
        self.router, self.recv, self.what = router, recv, what
        self.source, self.tag, self.buf, self.finish = source, tag, buf, finish
        self.keep_payload = keep_payload
        self.done, self.error, self.cancelled = False, None, False
        self.greq = self.payload = None
        self.src, self.rtag, self.nbytes = MPI.ANY_SOURCE, MPI.ANY_TAG, 0
        #: the MPI request (made before the state is published: the progress completes it)
        self.req = _new_request(self) if request else None

    def matches(self, src, tag):
        return (self.source == MPI.ANY_SOURCE or self.source == src) and \
            (self.tag == MPI.ANY_TAG or self.tag == tag)


def _overlap(state, source, tag):
    """True when posted receive ``state`` and a receive ``(source, tag)`` could take one
    message (wildcards overlap everything)."""
    return (state.source == MPI.ANY_SOURCE or source == MPI.ANY_SOURCE or
            state.source == source) and \
        (state.tag == MPI.ANY_TAG or tag == MPI.ANY_TAG or state.tag == tag)


class _Earlier:
    """The ``(source, tag)`` patterns of some posted receives, for :meth:`overlap` in
    constant time (a scan only for a wildcard pattern asked about)."""

    __slots__ = ("pairs", "states")

    def __init__(self, states=()):
        self.states = list(states)
        self.pairs = {(p.source, p.tag) for p in self.states}

    def add(self, state):
        self.states.append(state)
        self.pairs.add((state.source, state.tag))

    def overlap(self, source, tag):
        """True when one of the receives overlaps ``(source, tag)`` (:func:`_overlap`)."""
        if not self.pairs:
            return False
        if source == MPI.ANY_SOURCE or tag == MPI.ANY_TAG:
            return any(_overlap(p, source, tag) for p in self.states)
        pairs, anys, anyt = self.pairs, MPI.ANY_SOURCE, MPI.ANY_TAG
        return (source, tag) in pairs or (anys, tag) in pairs or (source, anyt) in pairs or \
            (anys, anyt) in pairs


def _query(status, state):
    status.source, status.tag = state.src, state.rtag
    status.error = MPI.ERR_TRUNCATE if state.error is not None else MPI.SUCCESS
    status.Set_elements(MPI.BYTE, state.nbytes)
    status.Set_cancelled(state.cancelled)


def _free(state):
    state.greq = None


def _cancel(completed, state):
    if not completed:
        state.router.cancel(state)


class Request(MPI.Grequest):
    """A point-to-point request of the router: an MPI generalized request.

    It is an ``MPI.Request``, so it goes in the lists of ``MPI.Request.Waitall`` and the
    other class methods, and in ``dualmpi.Request``'s; the progress (thread or call) that
    delivers its message completes it.  ``Wait``/``Test`` on the request itself advance the
    router in this thread, and a failed receive (a buffer too small) raises dualmpi's error
    (also an ``MPI.Exception`` of class ``ERR_TRUNCATE``).  ``wait``/``test`` return the
    received object of an ``irecv``.
    """

    def _done(self):
        state = getattr(self, "_state", None)
        return state is None or state.done

    def Wait(self, status=None):
        """Wait for completion (this thread advances the router meanwhile); return True."""
        state = getattr(self, "_state", None)
        if state is not None and not state.done:
            state.router.wait_for(state)
        return self._finish(MPI.Grequest.Wait, status)

    def Test(self, status=None):
        """Return True once complete (the request is then inactive)."""
        state = getattr(self, "_state", None)
        if state is not None and not state.done:
            state.router.poke()
            if not state.done:
                return False
        return self._finish(MPI.Grequest.Test, status)

    def _finish(self, call, status):
        state = getattr(self, "_state", None)
        try:
            return call(self, status)
        except MPI.Exception:
            if state is not None and state.error is not None:
                raise state.error from None
            raise

    def wait(self, status=None):
        """Wait for completion; return the received object (an ``irecv``) or None."""
        self.Wait(status)
        return self._object()

    def test(self, status=None):
        """Return ``(flag, object)``: the received object of an ``irecv`` once complete."""
        if not self.Test(status):
            return False, None
        return True, self._object()

    def _object(self):
        state = getattr(self, "_state", None)
        if state is None or not state.keep_payload or state.payload is None:
            return None
        payload, state.payload = state.payload, None
        return MPI.pickle.loads(payload)

    def Get_status(self, status=None):
        """Return whether the request is complete, without completing it."""
        state = getattr(self, "_state", None)
        if state is not None and not state.done:
            state.router.poke()
        return MPI.Grequest.Get_status(self, status)

    cancel = MPI.Grequest.Cancel
    get_status = Get_status


def _new_request(state):
    greq = MPI.Grequest.Start(_query, _free, _cancel, args=(state,))
    state.greq = greq
    req = Request(greq)
    req._state = state
    return req


class _Links(dict):
    """Link counts ``{(u, v): (messages, bytes)}``: this thread's in the dict, the router's
    progress's in :attr:`moved` (read under its lock), the one-link lanes' in :attr:`lanes`
    (``(counts, hops)``: messages and bytes per destination, the links each crosses;
    :mod:`dualmpi.engine.lane`); :meth:`items` merges them."""

    def __init__(self, lock):
        super().__init__()
        self.lock = lock
        self.moved = {}
        self.lanes = []

    def items(self):
        with self.lock:
            moved = [(k, tuple(v)) for k, v in self.moved.items()]
        for counts, hops in self.lanes:
            for d in np.flatnonzero(counts[:, 0]):
                moved.extend((k, (int(counts[d, 0]), int(counts[d, 1]))) for k in hops[d])
        out = dict(dict.items(self))
        for k, (m, n) in moved:
            m0, n0 = out.get(k, (0, 0))
            out[k] = (m0 + m, n0 + n)
        return list(out.items())

    def lane_totals(self):
        """Return ``[messages, bytes, route hops]`` the one-link lanes sent."""
        out = [0, 0, 0]
        for counts, hops in self.lanes:
            for d in np.flatnonzero(counts[:, 0]):
                m = int(counts[d, 0])
                out[0] += m
                out[1] += int(counts[d, 1])
                out[2] += m * len(hops[d])
        return out


class _Route:
    """One ordered rank pair's route: its nodes, its first leg and how it ends."""

    __slots__ = ("u", "v", "path", "direct", "first", "tail", "via")

    def __init__(self, hub, a, b):
        topo, q = hub.topo, hub.q
        self.u, self.v = node_pair(topo, q, a, b)
        self.path = hub.path(self.u, self.v)
        hops, nxt, j = hub.walk(self.u, self.v, 0)
        #: this rank's hops and the next rank (and position), from the start of the route
        self.first = (tuple(hops), nxt, j)
        ranks = [a] + [y // q for x, y in zip(self.path, self.path[1:]) if x // q != y // q]
        self.via = tuple(ranks[1:-1])
        self.direct = a != b and len(ranks) == 2
        #: the receiving rank's local hops after a direct message enters it
        self.tail = tuple(hub.walk(self.u, self.v, j)[0]) if self.direct else ()


class Hub:
    """What the point-to-point of one :class:`~dualmpi.engine.mpi.MPITransport` shares: the
    routed channel, the progress thread, the link counts and the routes.

    Every communicator on the network -- the network's own (context 0) and those derived
    from it (:mod:`dualmpi.derived`) -- is a :class:`Router` attached to the hub under a
    context id that the routed header carries (word :data:`_CTX`), as MPI's contexts:
    a message is delivered to its context's receives only.  Creating the hub is
    collective over the transport's ranks (it duplicates the graph communicator); so is
    :meth:`close`, which waits until every routed message in flight has arrived.

    Parameters
    ----------
    transport : MPITransport
        Its ``topo``, ``q``, ``rank``, ``graph``, ``ctl`` (the termination's reductions)
        and ``watchdog``.
    threaded : bool, optional
        Run the progress thread (default: when MPI gives ``MPI_THREAD_MULTIPLE`` and
        ``DUALMPI_PROGRESS_THREAD`` is not ``0``).
    """

    def __init__(self, transport, threaded=None):
        self.transport = transport
        self.topo, self.q, self.rank = transport.topo, transport.q, transport.rank
        self.size = transport.ctl.Get_size()
        self.wd = transport.watchdog
        self.wd.arm("building the point-to-point router's communicator", ())
        try:
            self.routed = transport.graph.Dup()
        finally:
            self.wd.disarm()
        self.peers = transport._peer_set
        #: the largest tag (MPI's TAG_UB, an attribute of the world and its duplicates only)
        self.tag_ub = int(transport.p2p.Get_attr(MPI.TAG_UB) or 32767)
        self.lock = threading.Lock()
        self.links = _Links(self.lock)
        #: the communicators attached, by context id; messages of a context not (yet)
        #: attached here wait in ``unclaimed`` (a rank may send on a new communicator
        #: before another has finished making it)
        self.endpoints, self.unclaimed = {}, {}
        #: the next context id this rank may give a new communicator (:meth:`agree_context`)
        self.next_context = 1
        self._out_reqs, self._out_bufs = [], []
        self.acks = {}  # ident -> state of a sync send waiting for its ack
        self.originated = self.arrived = 0
        #: the messages this rank originated, ``[messages, payload bytes, route hops]``: those
        #: counted by the rank's own thread (:meth:`count_main`) and under the lock
        #: (:meth:`message`, :meth:`count_sent`); :meth:`sent_totals` adds them up
        self.sent_main, self.sent = [0, 0, 0], [0, 0, 0]
        self._ident = 0
        self._routes, self._paths, self._walks = {}, {}, {}
        self._status = MPI.Status()
        self._last = time.monotonic()
        self.failure = None
        self._stop = threading.Event()
        #: set to end the progress thread's idle sleep (:meth:`wake`), while ``asleep``
        self._wake = threading.Event()
        self.asleep = False
        #: idle sleeps the progress thread has begun (it wakes this often when nothing moves)
        self.naps = 0
        #: a rank's own waits sleep on this until the progress thread has moved something
        self._moved = threading.Condition(threading.Lock())
        self._generation = 0
        self.waiters = 0
        _poll_from_env()
        level = MPI.Query_thread()
        if threaded is None:
            threaded = level >= MPI.THREAD_MULTIPLE and os.environ.get(ENV_THREAD, "1") != "0"
        elif threaded and level < MPI.THREAD_MULTIPLE:
            raise DualmpiError("the router's progress thread needs MPI_THREAD_MULTIPLE "
                               f"(MPI gives thread level {level})")
        self.threaded = bool(threaded)
        self.thread = None
        if self.threaded:
            self.thread = threads.start(self._run, "dualmpi-router")
        _LIVE.append(self)
        _hook()

    # -- routes ------------------------------------------------------------------------------
    def path(self, u, v):
        """Return the route ``u -> v`` as a tuple of nodes (cached)."""
        key = (u, v)
        p = self._paths.get(key)
        if p is None:
            p = self._paths[key] = tuple(int(x) for x in self.topo.route(u, v))
        return p

    def walk(self, u, v, i):
        """Return ``(hops, next_rank, j)``: from position ``i`` of route ``u -> v``, the hops
        leaving this rank's nodes, the rank the message goes to next (None: it has arrived)
        and its position there."""
        key = (u, v, i)
        w = self._walks.get(key)
        if w is None:
            path, q = self.path(u, v), self.q
            r, hops, j, nxt = path[i] // q, [], i, None
            while j < len(path) - 1:
                hops.append((path[j], path[j + 1]))
                j += 1
                if path[j] // q != r:
                    nxt = path[j] // q
                    break
            if r == self.rank and nxt is not None and nxt not in self.peers:  # pragma: no cover
                raise DualmpiError(f"rank {self.rank} would forward to rank {nxt}, which plays "
                                   "no neighbour of its nodes")
            w = self._walks[key] = (tuple(hops), nxt, j)
        return w

    def route(self, a, b):
        """Return the :class:`_Route` of network ranks ``a -> b`` (cached)."""
        key = (a, b)
        r = self._routes.get(key)
        if r is None:
            r = self._routes[key] = _Route(self, a, b)
        return r

    # -- contexts ----------------------------------------------------------------------------
    def attach(self, router):
        """Attach ``router`` under its context; hand it the messages that came first."""
        with self.lock:
            if router.ctx in self.endpoints:  # pragma: no cover - contexts are agreed
                raise DualmpiError(f"rank {self.rank}: context {router.ctx} is in use")
            self.endpoints[router.ctx] = router
            for arrival in self.unclaimed.pop(router.ctx, ()):
                router._deliver_from(arrival)

    def agree_context(self, allreduce, count=1):
        """Return ``count`` context ids free on every rank of a new communicator.

        ``allreduce(send, recv)`` takes the MAX over the new communicator's ranks (its
        control plane): the largest next id any of them may give, so no rank has a
        communicator under those ids yet.
        """
        mine = np.array([self.next_context], np.int64)
        out = np.zeros(1, np.int64)
        allreduce(mine, out)
        ctx = int(out[0])
        self.next_context = ctx + count
        return ctx

    # -- counting ----------------------------------------------------------------------------
    def count_main(self, hops, nbytes, route_hops=None):
        """Count a message this rank sends directly: its ``hops`` on this thread's links and
        the message in :attr:`sent_main` (the caller's thread only).

        ``route_hops``: the links of its whole route (default: the route to the rank the
        last of ``hops`` enters, whose local hops that rank counts).
        """
        links = self.links
        for key in hops:
            m, n = dict.get(links, key, (0, 0))
            dict.__setitem__(links, key, (m + 1, n + nbytes))
        sent = self.sent_main
        sent[0] += 1
        sent[1] += nbytes
        sent[2] += route_hops if route_hops is not None else self._route_hops(hops)

    def retire_lane(self, counts):
        """Move the counts of the lane whose array is ``counts`` (:class:`_Links`' lanes: a
        one-link message per row, the caller's thread only) into the link dict and
        :attr:`sent_main`, and drop the lane (its array is zeroed)."""
        lanes = self.links.lanes
        for k, (lane, hops) in enumerate(lanes):
            if lane is counts:
                del lanes[k]
                break
        else:
            return
        links, sent = self.links, self.sent_main
        for (m, b), keys in zip(counts.tolist(), hops):
            if m:
                for key in keys:
                    m0, b0 = dict.get(links, key, (0, 0))
                    dict.__setitem__(links, key, (m0 + m, b0 + b))
                sent[0] += m
                sent[1] += b
                sent[2] += m * len(keys)
        counts[...] = 0

    def count_sent(self, hops, nbytes):
        """Count a message this rank sends directly from another thread (under the lock)."""
        self._count(hops, nbytes)
        sent = self.sent
        sent[0] += 1
        sent[1] += nbytes
        sent[2] += self._route_hops(hops)

    def _route_hops(self, hops):
        """The links of the route of a direct message whose first ``hops`` leave this rank."""
        if self.q == 1:
            return len(hops)
        return len(self.route(self.rank, hops[-1][1] // self.q).path) - 1

    def sent_totals(self):
        """Return ``[messages, payload bytes, route hops]`` of the messages this rank
        originated (forwarded ones not included; a message to itself crosses no link and is
        not one of them)."""
        with self.lock:
            locked = list(self.sent)
        return [a + b + c for a, b, c in zip(self.sent_main, locked, self.links.lane_totals())]

    def _count(self, hops, nbytes):
        moved = self.links.moved
        for key in hops:
            c = moved.get(key)
            if c is None:
                moved[key] = [1, nbytes]
            else:
                c[0] += 1
                c[1] += nbytes

    # -- sending -----------------------------------------------------------------------------
    def message(self, kind, dest, tag, payload, ident=0, ctx=0):
        """Return a routed message ``[header | payload]`` from this rank to network rank
        ``dest``, counted in :attr:`sent` (under the lock)."""
        r = self.route(self.rank, dest)
        n = 0 if payload is None else payload.size
        sent = self.sent
        sent[0] += 1
        sent[1] += n
        sent[2] += len(r.path) - 1
        buf = np.empty(HEADER_BYTES + n, dtype=np.uint8)
        buf[:HEADER_BYTES].view(np.int64)[:] = (kind, self.rank, tag, r.u, r.v, 0, ident, ctx)
        if n:
            buf[HEADER_BYTES:] = payload
        return buf

    def launch(self, buf):
        """Send routed message ``buf`` from position ``buf``'s header on (under the lock)."""
        hdr = buf[:HEADER_BYTES].view(np.int64)
        u, v, i = int(hdr[_U]), int(hdr[_V]), int(hdr[_POS])
        hops, nxt, j = self.walk(u, v, i)
        self._count(hops, buf.size - HEADER_BYTES)
        if nxt is None:
            return False
        hdr[_POS] = j
        self._out_reqs.append(self.routed.Isend([buf, MPI.BYTE], nxt, 0))
        self._out_bufs.append(buf)
        self.wake()
        return True

    def ack(self, router, origin, ident):
        """Tell network rank ``origin`` its sync message ``ident`` on ``router``'s context was
        matched (under the lock)."""
        if origin == self.rank:
            self._acked(ident)
            return
        self.originated += 1
        router.originated += 1
        self.launch(self.message(ACK, origin, 0, None, ident, router.ctx))

    def _acked(self, ident):
        state = self.acks.pop(ident, None)
        if state is not None:
            state.router._complete(state)

    def wake(self):
        """End the progress thread's idle sleep: the rank has work for it (a send, a posted
        receive, a thread waiting)."""
        if self.asleep:
            self._wake.set()

    def new_ident(self, state):
        """Number a sync send whose ack ``state`` waits for (under the lock)."""
        self.wake()
        self._ident += 1
        self.acks[self._ident] = state
        return self._ident

    # -- progress ----------------------------------------------------------------------------
    def step(self):
        """Advance once: finished sends, routed arrivals, direct messages for posted
        receives (under the lock).  Return True when something moved."""
        did = False
        if self._out_reqs:
            done = MPI.Request.Testsome(self._out_reqs)
            if done:
                keep = set(range(len(self._out_reqs))) - set(done)
                self._out_reqs = [self._out_reqs[i] for i in sorted(keep)]
                self._out_bufs = [self._out_bufs[i] for i in sorted(keep)]
                did = True
        st = self._status
        routed = self.routed
        while True:
            msg = routed.Improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, st)
            if msg is None:
                break
            buf = np.empty(st.Get_count(MPI.BYTE), dtype=np.uint8)
            msg.Recv([buf, MPI.BYTE])
            self._arrive(buf)
            did = True
        for router in tuple(self.endpoints.values()):
            if router.posted:
                did = router._pull_direct() or did
            if router._direct_sends:
                did = router._test_direct_sends() or did
        if did:
            self._last = time.monotonic()
        return did

    def _arrive(self, buf):
        """A routed message came in: forward it, or it has arrived here."""
        if self.launch(buf):
            return
        self.arrived += 1
        hdr = buf[:HEADER_BYTES].view(np.int64)
        kind, src, tag, ident, ctx = (int(hdr[_KIND]), int(hdr[_SRC]), int(hdr[_TAG]),
                                      int(hdr[_IDENT]), int(hdr[_CTX]))
        router = self.endpoints.get(ctx)
        if kind == ACK:
            if router is not None:
                router.arrived += 1
            self._acked(ident)
            return
        arrival = Arrival(src, tag, buf[HEADER_BYTES:], ident if kind == SYNC else 0, src)
        if router is None:
            self.unclaimed.setdefault(ctx, []).append(arrival)
            return
        router._deliver_from(arrival)

    def poke(self):
        """Advance once from this thread."""
        self.check()
        with self.lock:
            self.step()

    def check(self):
        """Raise the progress thread's failure, if it failed."""
        if self.failure is not None:
            raise DualmpiError(f"rank {self.rank}: the point-to-point router failed: "
                               f"{self.failure}")

    def wait_until(self, done, where, peers):
        """Wait until ``done()``, under the watchdog.

        With the progress thread this thread sleeps until the thread has moved something
        (or ``hot`` seconds: ``done()`` may look at MPI itself), without it it advances the
        hub itself, polling.
        """
        if done():
            return
        self.check()
        wd = self.wd
        wd.arm(where, peers)
        try:
            if self.threaded:
                self._sleep_until(done)
                return
            delay, last = 0.0, time.monotonic()
            spin, first, cap = POLL["spin"], POLL["first"], POLL["hot"]
            while True:
                with self.lock:
                    did = self.step()
                if done():
                    return
                self.check()
                inflight.advance()  # (MPI's progress rule: the requests in flight move too)
                now = time.monotonic()
                if did:
                    last, delay = now, 0.0
                elif now - last > spin:
                    delay = min(cap, max(first, delay * 2))
                time.sleep(delay)
        finally:
            wd.disarm()

    def _sleep_until(self, done):
        """Sleep on :attr:`_moved` until ``done()`` (the progress thread runs hot meanwhile)."""
        moved, cap = self._moved, POLL["hot"]
        delay = POLL["first"]
        self.waiters += 1
        self.wake()
        try:
            while True:
                generation = self._generation
                if done():
                    return
                self.check()
                inflight.advance()  # (MPI's progress rule: the requests in flight move too)
                with moved:
                    if generation == self._generation:
                        moved.wait(delay)
                delay = min(cap, delay * 2)
        finally:
            self.waiters -= 1

    # -- the progress thread ---------------------------------------------------------------------
    def _busy(self):
        # (a copy taken in one C call: the rank's thread attaches and detaches endpoints as
        # derived communicators come and go, and iterating the dict itself could fail)
        return self._out_reqs or self.acks or any(r.posted or r._direct_sends
                                                  for r in list(self.endpoints.values()))

    def _run(self):
        spin, first, hot, warm, cold, quiet, asleep = (
            POLL[k] for k in ("spin", "first", "hot", "warm", "cold", "quiet", "idle"))
        delay = 0.0
        lock, stop, moved, wake = self.lock, self._stop, self._moved, self._wake
        _fine_timer()
        try:
            while not stop.is_set():
                did = False
                if lock.acquire(blocking=False):
                    try:
                        did = self.step()
                    finally:
                        lock.release()
                if did:
                    delay = 0.0
                    if self.waiters:
                        with moved:
                            self._generation += 1
                            moved.notify_all()
                else:
                    idle = time.monotonic() - self._last
                    if idle > spin:
                        busy = idle < warm or self.waiters or self._busy()
                        if busy or idle < quiet:
                            delay = min(hot if busy else cold, max(first, delay * 2))
                        else:  # quiet: the idle sleep at once
                            delay = asleep
                if delay > cold:  # idle: a sleep the rank's new work (wake) or the end ends
                    self.asleep = True
                    if not (self.waiters or self._busy() or stop.is_set()):
                        self.naps += 1
                        wake.wait(delay)
                    self.asleep = False
                    wake.clear()
                    delay = min(delay, cold) if self.waiters or self._busy() else delay
                else:
                    time.sleep(delay)
        except Exception as exc:  # noqa: BLE001 - reported to the rank's thread, then abort
            self.failure = f"{type(exc).__name__}: {exc}"
            last_words(f"dualmpi: rank {self.rank}: the point-to-point router's progress "
                       f"thread failed:\n{traceback.format_exc()}")
            self.wd.abort(3)

    # -- the end -----------------------------------------------------------------------------------
    def drain(self, counts, allreduce, what):
        """Return once the routed messages ``counts()`` numbers have all arrived (collective).

        A loop of sums (``allreduce(send, recv)``) of the messages the ranks originated and
        those that arrived, forwarding meanwhile; when they are equal no message is on its
        way (every rank has stopped sending: it is in this call).
        """
        mine, total = np.zeros(2, np.int64), np.zeros(2, np.int64)
        rounds = 0
        while True:
            if not self.threaded:
                with self.lock:
                    while self.step():
                        pass
            with self.lock:
                mine[:] = counts()
            allreduce(mine, total, f"{what} (round {rounds}: every routed message must arrive "
                                   "before the communicator is freed)")
            if total[0] == total[1]:
                return
            rounds += 1
            time.sleep(min(1e-3 * rounds, 0.02))

    def control_sum(self, send, recv, what):
        """Sum the int64 vectors ``send`` of the ranks into ``recv`` (control data), through
        rank 0 on the transport's control communicator, advancing this hub meanwhile.

        Nonblocking, unlike the transport's own reduction: without the progress thread a
        rank that waits here must still forward the messages of the ranks that have not
        arrived yet.  Under the watchdog: rank 0 names the ranks that have not sent.
        """
        ctl, size = self.transport.ctl, self.size
        send = np.ascontiguousarray(send, dtype=np.int64)
        if self.rank == 0:
            parts = np.zeros((max(size - 1, 0), send.size), np.int64)
            reqs = [ctl.Irecv(parts[r - 1], r, DRAIN_TAG) for r in range(1, size)]
            self._progress_until(reqs, list(range(1, size)), what, ROOT_GRACE)
            recv[...] = send + parts.sum(axis=0)
            reqs = [ctl.Isend(recv, r, DRAIN_TAG) for r in range(1, size)]
            self._progress_until(reqs, list(range(1, size)), f"{what} (sending the sums)",
                                 ROOT_GRACE)
        else:
            reqs = [ctl.Isend(send, 0, DRAIN_TAG), ctl.Irecv(recv, 0, DRAIN_TAG)]
            self._progress_until(reqs, [0, 0], f"{what} (waiting for rank 0's answer)",
                                 OTHER_GRACE)

    def _progress_until(self, reqs, peers, what, grace):
        """Test ``reqs`` (``peers[i]``: whom request ``i`` waits for) until all are done,
        advancing the hub when it has no thread; the watchdog names the peers left."""
        wd = self.wd
        start, delay = time.monotonic(), POLL["first"]
        left = list(range(len(reqs)))
        try:
            while left:
                wd.state = (start, what, tuple(sorted({peers[i] for i in left})), grace)
                done = MPI.Request.Testsome([reqs[i] for i in left]) or []
                if done:
                    left = [i for j, i in enumerate(left) if j not in set(done)]
                    continue
                if not self.threaded:
                    with self.lock:
                        if self.step():
                            delay = POLL["first"]
                            continue
                inflight.advance()
                time.sleep(delay)
                delay = min(POLL["hot"], delay * 2)
        finally:
            wd.disarm()

    def close(self):
        """Wait (collectively) until every routed message in flight has arrived, then stop.

        Then the progress thread stops, and the router's communicator and the direct
        channels of the communicators still attached are freed.
        """
        if self in _LIVE:
            _LIVE.remove(self)
        if self.routed == MPI.COMM_NULL:
            return
        self.drain(lambda: (self.originated, self.arrived), self.control_sum,
                   "the end of point-to-point")
        self._stop.set()
        self._wake.set()
        if self.thread is not None:
            self.thread.join()
        self.wd.arm("the end of point-to-point (the last forwarded sends)", ())
        try:
            MPI.Request.Waitall(self._out_reqs)
        finally:
            self.wd.disarm()
        self._out_reqs, self._out_bufs = [], []
        self.routed.Free()
        for router in self.endpoints.values():
            router._retire()
        self.endpoints, self.unclaimed = {}, {}


class Router:
    """Point-to-point between the ranks of one communicator on the network: MPI's matching.

    ``Router(transport)`` makes the network's own (context 0, network ranks, the
    transport's ``p2p`` communicator as its direct channel) with its :class:`Hub`;
    :meth:`derive` one of a communicator made from it (:mod:`dualmpi.derived`), whose
    ranks are translated to the network's: its ``ranks[i]`` is the network rank of its
    rank ``i``, and its direct channel an MPI communicator of its own ranks in its order.
    Ranks in every method are the communicator's.

    Parameters
    ----------
    transport : MPITransport
        The network's transport (a new hub is made: collective over its ranks).
    threaded : bool, optional
        See :class:`Hub`.
    """

    def __init__(self, transport=None, threaded=None, *, hub=None, ctx=0, ranks=None,
                 direct=None):
        if hub is None:
            hub = Hub(transport, threaded)
            ranks = range(hub.size)
            direct = transport.p2p
        self.hub, self.ctx, self.direct = hub, int(ctx), direct
        self.ranks = tuple(int(r) for r in ranks)
        self.index = {r: i for i, r in enumerate(self.ranks)}
        self.rank, self.size = self.index[hub.rank], len(self.ranks)
        self.posted, self.mailbox = [], []
        #: routed messages of this context this rank sent and received (:meth:`release`)
        self.originated = self.arrived = 0
        self._routes = {}
        self._main_status = MPI.Status()
        self._direct_in = self._all_direct = None
        self._described = {}
        #: per destination and per source, what a message needs (:meth:`send_plan`,
        #: :meth:`recv_plan`): the one-hop path looks it up once
        self.sends, self.recvs = {}, {}
        #: (mpi4py request, state, data) of direct sends whose request is the router's
        #: (:meth:`track`), tested by the hub's progress
        self._direct_sends = []
        self.freed = False
        hub.attach(self)

    def derive(self, ctx, ranks, direct):
        """Return the router of a communicator on the same network: context ``ctx`` (agreed
        by its ranks: :meth:`Hub.agree_context`), network ranks ``ranks`` in its rank order
        (this rank among them) and ``direct``, an MPI communicator of those ranks in that
        order (the one-hop messages' channel)."""
        return Router(hub=self.hub, ctx=ctx, ranks=ranks, direct=direct)

    # the hub's, for the network's callers
    thread = property(lambda self: self.hub.thread, doc="The progress thread, or None.")
    threaded = property(lambda self: self.hub.threaded, doc="True with a progress thread.")
    links = property(lambda self: self.hub.links, doc="Link counts (every context's).")
    lock = property(lambda self: self.hub.lock, doc="The hub's lock.")
    wd = property(lambda self: self.hub.wd, doc="The transport's watchdog.")
    topo = property(lambda self: self.hub.topo, doc="The network.")
    q = property(lambda self: self.hub.q, doc="Nodes per rank.")
    tag_ub = property(lambda self: self.hub.tag_ub, doc="The largest tag (MPI's TAG_UB).")

    # -- routes ------------------------------------------------------------------------------
    def route(self, a, b):
        """Return the :class:`_Route` of this communicator's ranks ``a -> b`` (cached; its
        nodes and ``via`` are the network's)."""
        key = (a, b)
        r = self._routes.get(key)
        if r is None:
            r = self._routes[key] = self.hub.route(self.ranks[a], self.ranks[b])
        return r

    def is_direct(self, a, b):
        """True when messages ``a -> b`` cross one link between the two ranks (no header)."""
        return self.route(a, b).direct

    def send_plan(self, dest):
        """Return (and cache in :attr:`sends`) ``(kind, hops, where)`` of messages to ``dest``:
        kind 0 to this rank itself, 1 direct, 2 routed; this rank's hops on the route; the
        watchdog's text for a blocking direct send."""
        r = self.route(self.rank, dest)
        kind = 0 if dest == self.rank else (1 if r.direct else 2)
        plan = self.sends[dest] = (kind, r.first[0], f"a send to rank {dest} (until rank "
                                   f"{dest} receives it)")
        return plan

    def recv_plan(self, source):
        """Return (and cache in :attr:`recvs`) ``(direct, where, peers)`` of messages from
        ``source`` (``ANY_SOURCE``: direct when every other rank sends directly)."""
        if source == MPI.ANY_SOURCE:
            direct = self.all_direct_in()
        else:
            direct = self.route(source, self.rank).direct
        where, peers = self.describe("Recv", source)
        plan = self.recvs[source] = (direct, where, peers)
        return plan

    def track(self, req, data, what):
        """Return a router request completed when mpi4py request ``req`` (a direct send of
        ``data``) completes (tested by the hub's progress)."""
        state = _State(self, False, what=what, request=True)
        with self.hub.lock:
            self._direct_sends.append((req, state, data))
        self.hub.wake()
        return self.request(state)

    def _wait_direct(self, state):
        """Wait here for ``state`` when it is a tracked direct send (:meth:`track`): taken out
        of the hub's list, its MPI request waited for under the watchdog (the requests in
        flight moving meanwhile), then completed; False for any other request.  The progress
        thread would complete it at its next test, a thread hand-off later (about 0.1 ms of
        a one-link ``isend(...).wait()`` on two ranks: docs/performance.md)."""
        hub = self.hub
        with hub.lock:
            entry = next((x for x in self._direct_sends if x[1] is state), None)
            if entry is None:
                return False
            self._direct_sends = [x for x in self._direct_sends if x is not entry]
        hub.wd.arm(f"{state.what} (until a receive matches it)", ())
        try:
            inflight.waitall([entry[0]])
        except BaseException as exc:  # (the request's wait raises it: Request._finish)
            state.error = exc
            raise
        finally:
            hub.wd.disarm()
            with hub.lock:
                self._complete(state)
        return True

    def _test_direct_sends(self):
        """Complete the tracked direct sends that are done (under the hub's lock)."""
        done = MPI.Request.Testsome([r for r, _, _ in self._direct_sends])
        if not done:
            return False
        finished = set(done)
        for i in done:
            self._complete(self._direct_sends[i][1])
        self._direct_sends = [x for i, x in enumerate(self._direct_sends) if i not in finished]
        return True

    def direct_in(self):
        """True when some rank sends to this one directly (ANY_SOURCE looks at the channel)."""
        if self._direct_in is None:
            index = self.index
            self._direct_in = any(self.route(index[p], self.rank).direct
                                  for p in sorted(self.hub.peers) if p in index)
        return self._direct_in

    # -- counting ----------------------------------------------------------------------------
    def count_main(self, hops, nbytes, route_hops=None):
        """Count a direct message (the caller's thread only; see :meth:`Hub.count_main`)."""
        self.hub.count_main(hops, nbytes, route_hops)

    def check(self):
        """Raise the progress thread's failure, if it failed."""
        self.hub.check()

    def poke(self):
        """Advance once from this thread."""
        self.hub.poke()

    # -- sending -----------------------------------------------------------------------------
    def send_routed(self, payload, dest, tag, sync=False, request=False):
        """Start a routed message (``payload``: uint8 array, copied) to rank ``dest``.

        Returns the state of the send: done at once (buffered), or for ``sync`` once the
        receiver matched the message; with ``request`` its MPI request is ``state.req``.
        """
        hub = self.hub
        state = _State(self, False, what=f"Ssend to rank {dest}", request=request)
        with hub.lock:
            ident = hub.new_ident(state) if sync else 0
            buf = hub.message(SYNC if sync else DATA, self.ranks[dest], tag, payload, ident,
                              self.ctx)
            hub.originated += 1
            self.originated += 1
            hub.launch(buf)
            if not sync:
                self._complete(state)
        return state

    def send_self(self, payload, tag, sync=False, request=False):
        """A message to this rank itself (copied): delivered now, no link used; returns the
        state of the send (see :meth:`send_routed`)."""
        hub = self.hub
        state = _State(self, False, what="Ssend to this rank", request=request)
        with hub.lock:
            ident = hub.new_ident(state) if sync else 0
            self._deliver(Arrival(self.rank, tag, np.array(payload, dtype=np.uint8, copy=True),
                                  ident, hub.rank))
            if not sync:
                self._complete(state)
        return state

    # -- matching ----------------------------------------------------------------------------
    def _deliver_from(self, arrival):
        """A routed message of this context arrived (its ``src`` a network rank)."""
        self.arrived += 1
        arrival.src = self.index[arrival.src]
        self._deliver(arrival)

    def _deliver(self, arrival):
        """Give an arrived message to the earliest posted receive matching it, else keep it."""
        for state in self.posted:
            if state.matches(arrival.src, arrival.tag):
                self.posted.remove(state)
                self._fill(state, arrival)
                return
        if not self.freed:
            self.mailbox.append(arrival)

    def take(self, source, tag):
        """Remove and return the earliest kept message matching ``(source, tag)``, or None
        (under the lock)."""
        for i, a in enumerate(self.mailbox):
            if (source == MPI.ANY_SOURCE or a.src == source) and \
                    (tag == MPI.ANY_TAG or a.tag == tag):
                del self.mailbox[i]
                return a
        return None

    def peek(self, source, tag):
        """Return the earliest kept message matching ``(source, tag)`` without removing it."""
        for a in self.mailbox:
            if (source == MPI.ANY_SOURCE or a.src == source) and \
                    (tag == MPI.ANY_TAG or a.tag == tag):
                return a
        return None

    def matched(self, arrival):
        """A kept message was taken by a receive: acknowledge a sync send (under the lock)."""
        if arrival.sync:
            self.hub.ack(self, arrival.origin, arrival.sync)

    def _fill(self, state, arrival):
        """Complete posted receive ``state`` with an arrived message."""
        payload = arrival.payload
        n = payload.size
        state.src, state.rtag, state.nbytes = arrival.src, arrival.tag, n
        if state.keep_payload:
            state.payload = payload
        elif n > state.buf.size:
            state.error = truncated(self.hub.rank, arrival.src, n, state.buf.size)
        else:
            state.buf[:n] = payload
        self.matched(arrival)
        self._complete(state)

    def _pull_direct(self):
        """Take direct messages for posted receives, each by the earliest that matches it.

        A receive takes the earliest message that matches it, and only when no receive
        posted before it matches that message (MPI's order: a message that arrives goes to
        the earliest posted receive that matches it).  When an earlier receive overlaps it,
        the message is looked at first (``Iprobe``) and taken (``Improbe`` of its exact
        source and tag: under the hub's lock no other thread takes direct messages a posted
        receive could match) only if it is this receive's; otherwise the earlier receive
        goes first: it found nothing when it was probed, and a message came since.
        """
        did = False
        st = self.hub._status
        posted, count = self.posted, self.hub._count
        earlier = _Earlier()  # the patterns of posted[:i]
        i = 0
        while i < len(posted):
            state = posted[i]
            src, tag = state.source, state.tag
            if state.done or not self._direct_from(src):
                earlier.add(state)
                i += 1
                continue
            if not earlier.overlap(src, tag):
                msg = self.direct.Improbe(src, tag, st)
                if msg is None:
                    earlier.add(state)
                    i += 1
                    continue
            else:
                if not self.direct.Iprobe(src, tag, st):
                    earlier.add(state)
                    i += 1
                    continue
                s, t = st.source, st.tag
                first = next(p for p in posted if p.matches(s, t))
                if first is not state:
                    i = posted.index(first)
                    earlier = _Earlier(posted[:i])
                    continue
                msg = self.direct.Improbe(s, t, st)
            del posted[i]
            self.take_direct(state, msg, st, count)
            did = True
        return did

    def _direct_from(self, source):
        """True when messages from ``source`` (or ANY_SOURCE) may come on the direct channel."""
        if source == MPI.ANY_SOURCE:
            return self.direct_in()
        return self.route(source, self.rank).direct

    def take_direct(self, state, msg, st, count):
        """Receive direct message ``msg`` (probed: ``st``) for ``state``; count its last hops."""
        s = st.source
        n = st.Get_count(MPI.BYTE)
        state.src, state.rtag, state.nbytes = s, st.tag, n
        if state.keep_payload:
            state.payload = bytearray(n)
            msg.Recv([state.payload, MPI.BYTE])
        elif n > state.buf.size:
            msg.Recv([np.empty(n, np.uint8), MPI.BYTE])
            state.error = truncated(self.hub.rank, s, n, state.buf.size)
        else:
            msg.Recv([state.buf, n, MPI.BYTE])
        tail = self.route(s, self.rank).tail
        if tail:
            count(tail, n)
        self._complete(state)

    def _complete(self, state):
        """Mark ``state`` done: unpack (its ``finish``), complete its MPI request."""
        if state.done:
            return
        if state.finish is not None and state.error is None and not state.cancelled:
            try:
                state.finish()
            except Exception as exc:  # noqa: BLE001 - reported by the request's wait
                state.error = exc
        state.done = True
        if state.greq is not None:
            state.greq.Complete()

    def cancel(self, state):
        """Cancel a posted receive not yet matched (``MPI.Request.Cancel``)."""
        with self.hub.lock:
            if state.done or state not in self.posted:
                return
            self.posted.remove(state)
            state.cancelled = True
            self._complete(state)

    # -- receiving -----------------------------------------------------------------------------
    def post(self, source, tag, buf=None, finish=None, keep_payload=False, what="Irecv",
             request=False):
        """Post a receive into ``buf`` (uint8, writable) and return its state (with
        ``request``, its MPI request is ``state.req``); a kept message that matches
        completes it at once."""
        state = _State(self, True, source, tag, buf, finish, keep_payload, what, request)
        with self.hub.lock:
            arrival = self.take(source, tag)
            if arrival is not None:
                self._fill(state, arrival)
            else:
                self.posted.append(state)
        self.hub.wake()
        return state

    @staticmethod
    def request(state):
        """Return (and forget) the MPI request of ``state``."""
        req, state.req = state.req, None
        return req

    def done_request(self, src=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, nbytes=0, payload=None):
        """Return a request that is already complete (a received message, ``payload``: an
        object's pickle)."""
        state = _State(self, payload is not None, keep_payload=payload is not None,
                       request=True)
        state.src, state.rtag, state.nbytes, state.payload = src, tag, nbytes, payload
        self._complete(state)
        return self.request(state)

    def intersects(self, source, tag):
        """True when a posted receive could take a message ``(source, tag)``."""
        return any(_overlap(p, source, tag) for p in self.posted)

    def recv(self, buf, source, tag, status=None, what="Recv", keep_payload=False):
        """Blocking receive into ``buf`` (uint8, writable), or of an object's pickle.

        Returns ``(nbytes, payload)`` (``payload``: the pickle with ``keep_payload``);
        ``status`` gets the source, tag and count.  A message from one direct source that
        no posted receive could take is probed and received here in MPI (``Mprobe``, then
        ``Mrecv``), as a plain ``Recv``; any other waits for the router's progress.
        """
        plan = self.recvs.get(source)
        if plan is None:
            plan = self.recv_plan(source)
        direct, where, peers = plan
        if direct and (not self.posted or not self.intersects(source, tag)) and \
                (source != MPI.ANY_SOURCE or self.peek(source, tag) is None):
            st = status if status is not None else self._main_status
            wd = self.hub.wd
            wd.arm(where if what == "Recv" else self.describe(what, source)[0], peers)
            try:
                msg = inflight.mprobe(self.direct, source, tag, st)
            finally:
                wd.disarm()
            n = st.Get_count(MPI.BYTE)
            payload = None
            if keep_payload:
                payload = bytearray(n)
                msg.Recv([payload, MPI.BYTE])
            elif n == buf.size:
                msg.Recv(buf)
            elif n < buf.size:
                msg.Recv([buf, n, MPI.BYTE])
            else:
                msg.Recv([np.empty(n, np.uint8), MPI.BYTE])
                raise truncated(self.hub.rank, st.source, n, buf.size)
            if self.hub.q > 1:
                self.count_tail(st.source, n)
            return n, payload
        state = self.post(source, tag, buf, keep_payload=keep_payload, what=what)
        self.wait_for(state)
        if status is not None:
            fill_status(status, state.src, state.rtag, state.nbytes)
        if state.error is not None:
            raise state.error
        return state.nbytes, state.payload

    def all_direct_in(self):
        """True when every other rank sends to this one directly (ANY_SOURCE needs no router)."""
        if self._all_direct is None:
            self._all_direct = all(self.route(s, self.rank).direct
                                   for s in range(self.size) if s != self.rank)
        return self._all_direct

    def iprobe(self, source, tag, status=None, remove=False):
        """Look for a message ``(source, tag)`` (after one step of progress).

        Returns None, or the arrival kept here, or ``(MPI.Message, nbytes)`` of a direct
        one when ``remove`` (then matched: no other receive can take it), or True.  The
        status gets its source, tag and count.  A direct message that a posted receive
        matches is that receive's (MPI matches it on arrival): it is taken for it, and
        the probe looks again.
        """
        st = status if status is not None else MPI.Status()
        with self.hub.lock:
            self.hub.step()
            a = self.take(source, tag) if remove else self.peek(source, tag)
            if a is not None:
                if remove:
                    self.matched(a)
                fill_status(st, a.src, a.tag, a.payload.size)
                return a
            if not self._direct_from(source):
                return None
            while self.direct.Iprobe(source, tag, st):
                s, t = st.source, st.tag
                if not any(p.matches(s, t) for p in self.posted):
                    if not remove:
                        return True
                    msg = self.direct.Improbe(s, t, st)
                    return msg, st.Get_count(MPI.BYTE), s, t
                if not self._pull_direct():  # (it takes one: the receive's probe sees it)
                    return None
            return None

    def probe(self, source, tag, status=None, remove=False, what="Probe"):
        """Wait for a message ``(source, tag)``: see :meth:`iprobe`."""
        if source != MPI.ANY_SOURCE and self.route(source, self.rank).direct and \
                not self.intersects(source, tag):
            st = status if status is not None else MPI.Status()
            where, peers = self.describe(what, source)
            wd = self.hub.wd
            wd.arm(where, peers)
            try:
                if remove:
                    msg = inflight.mprobe(self.direct, source, tag, st)
                    return msg, st.Get_count(MPI.BYTE), st.source, st.tag
                inflight.probe(self.direct, source, tag, st)
                return True
            finally:
                wd.disarm()
        found = []

        def done():
            got = self.iprobe(source, tag, status, remove)
            if got is not None:
                found.append(got)
            return bool(found)

        where, peers = self.describe(what, source)
        self.hub.wait_until(done, where, peers)
        return found[0]

    def count_tail(self, src, nbytes):
        """Count the hops inside this rank of a direct message from ``src`` it received."""
        if self.hub.q > 1:
            tail = self.route(src, self.rank).tail
            if tail:
                with self.hub.lock:
                    self.hub._count(tail, nbytes)

    def describe(self, what, source):
        """Return ``(where, peers)`` for the watchdog of a wait for ``source`` (cached)."""
        key = (what, source)
        got = self._described.get(key)
        if got is None:
            got = self._described[key] = self._describe(what, source)
        return got

    def _describe(self, what, source):
        note = "" if self.hub.threaded else (
            " (no progress thread: MPI gives less than MPI_THREAD_MULTIPLE, so a routed "
            "message moves only while the ranks on its route are inside dualmpi calls)")
        where = "" if self.ctx == 0 else f" on a derived communicator (context {self.ctx})"
        if source in (MPI.ANY_SOURCE, None):
            return f"{what} from any source{where}{note}", ()
        r = self.route(source, self.rank)
        via = f", routed via network ranks {', '.join(map(str, r.via))}" if r.via else ""
        name = f"rank {source}" if self.ctx == 0 else \
            f"rank {source} (network rank {self.ranks[source]})"
        return f"{what} from {name}{where}{via}{note}", (self.ranks[source],)

    def wait_until(self, done, where, peers):
        """Advance from this thread until ``done()``, under the watchdog."""
        self.hub.wait_until(done, where, peers)

    def wait_for(self, state):
        """Wait until request ``state`` is done (this thread advancing the router).

        A receive from one direct source that no other posted receive could take is
        received here with a blocking ``MPI_Mprobe``, as a plain ``Recv`` would.
        """
        if state.done:
            return
        hub = self.hub
        if not state.recv and self._direct_sends and self._wait_direct(state):
            return
        src = state.source
        if state.recv and src != MPI.ANY_SOURCE and self.route(src, self.rank).direct:
            with hub.lock:
                mine = state in self.posted and not any(
                    p is not state and _overlap(p, src, state.tag) for p in self.posted)
                if mine:
                    self.posted.remove(state)
            if mine:
                st = MPI.Status()
                where, peers = self.describe(state.what, src)
                hub.wd.arm(where, peers)
                try:
                    msg = inflight.mprobe(self.direct, src, state.tag, st)
                finally:
                    hub.wd.disarm()
                with hub.lock:
                    self.take_direct(state, msg, st, hub._count)
                return
        if state.recv:
            where, peers = self.describe(state.what, src)
        else:
            where, peers = f"{state.what} (until a receive matches it)", ()
        hub.wait_until(lambda: state.done, where, peers)

    # -- the end -----------------------------------------------------------------------------------
    def close(self):
        """The network's router: close its :class:`Hub` (collective over the network)."""
        self.hub.close()

    def release(self, allreduce):
        """Free a derived communicator's router (collective over its ranks).

        Waits until every routed message of this context has arrived (``allreduce(send,
        recv, what)``: a sum over the communicator's ranks, its control plane); then the
        messages no receive took are dropped.  Receives posted (and tracked direct sends
        started) before and not yet complete keep the router attached and its direct channel
        alive (MPI's ``Comm_free``: pending operations complete); it is freed with the hub.
        """
        hub = self.hub
        hub.drain(lambda: (self.originated, self.arrived), allreduce,
                  "freeing a derived communicator")
        with hub.lock:
            self.freed = True
            self.mailbox = []
            if not self.posted and not self._direct_sends:
                hub.endpoints.pop(self.ctx, None)
                self._retire()

    def _retire(self):
        """Free the direct channel (a derived communicator's own)."""
        if self.ctx != 0 and self.direct is not None and self.direct != MPI.COMM_NULL:
            self.direct.Free()
        self.direct = None
        self.posted, self.mailbox = [], []


def fill_status(status, src, tag, nbytes, cancelled=False):
    """Set an ``MPI.Status`` as MPI reports a received message."""
    status.source, status.tag, status.error = src, tag, MPI.SUCCESS
    status.Set_elements(MPI.BYTE, nbytes)
    status.Set_cancelled(cancelled)


def truncated(rank, src, n, room):
    """Return the error of a message longer than its receive buffer (consumed, not used)."""
    return mpi_error(f"rank {rank}: receive buffer too small: rank {src} sent {n} bytes, the "
                     f"buffer has {room}", "ERR_TRUNCATE", DualmpiError)


def _close_all():
    """Close the routers still open (at exit or ``MPI.Finalize``), in creation order.

    Not after an uncaught exception (``sys.last_value``): under ``python -m mpi4py`` the job
    is aborted next, and this rank must not wait for the others first.
    """
    if not MPI.Is_initialized() or MPI.Is_finalized():
        return
    if getattr(sys, "last_value", None) is not None or getattr(sys, "last_exc", None) is not None:
        for router in tuple(_LIVE):
            router._stop.set()
            router._wake.set()
        return
    for router in tuple(_LIVE):
        router.close()


def _hook():
    """Close the routers before MPI is finalized: at exit, or in an explicit ``MPI.Finalize``
    (the delete callback of an attribute on ``COMM_SELF``)."""
    if _HOOKED:
        return
    atexit.register(_close_all)
    keyval = MPI.Comm.Create_keyval(delete_fn=lambda *args: _close_all())
    MPI.COMM_SELF.Set_attr(keyval, True)
    _HOOKED.append(keyval)
