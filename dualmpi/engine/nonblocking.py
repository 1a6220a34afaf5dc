"""Nonblocking collectives: bound plans run as requests, round by round, several in flight.

A :class:`Progress` (one per :class:`~dualmpi.engine.mpi.MPITransport`) runs a
:class:`~dualmpi.engine.plan.BoundPlan` as a :class:`PlanRequest`: a state machine with
its own store (so several runs of one plan may be in flight), copied in when it starts,
whose rounds are posted as ``Irecv``/``Isend`` on a duplicate of the graph communicator
(nonblocking traffic never matches a blocking plan's persistent requests) with a tag of
its own: the request's sequence number, which agrees across the ranks because every
rank starts its nonblocking collectives in the same order (as MPI requires).  When all
of a round's requests are done, its combines run and the next round is posted; the
round's local copies run as soon as it is posted, while its messages fly (as in
:class:`~dualmpi.engine.mpi.MPIRunner`).  After the last round the result is copied out
and the caller's ``finish()`` runs.  A request may first agree on a vector of the
ranks' arguments on the control plane (through rank 0, nonblocking too) and fail on
every rank alike, before any data moves, when they differ.  Rank 0 decides whether that
agreement is needed and says so first (its *mode*, with its vector): a vector rank 0 has
seen agreed before is not agreed again; every other rank compares its own vector with
rank 0's and runs the rounds at once when they are equal, or raises the alarm
(:mod:`dualmpi.engine.alarm`: the communicator becomes unusable, as after a blocking call
repeated with other arguments) when they differ.  Only rank 0 decides, so the ranks never
take different paths, whatever order their requests complete in.

Any test or wait of any request advances every active request of every live
:class:`Progress` (:func:`poll_all`), so a rank waiting on one request still forwards
the rounds of the others; a rank that must block waits (``MPI_Waitany``) on the
posted requests of every active request at once, under the transport's watchdog,
which names the round and the ranks waited for.  Nothing here spins.

Messages carry exactly the plan's bytes.  With ``signature=`` a request's messages
also carry the 8-byte call signature as a trailer (as the blocking runner's do): a
receiver that gets another signature finishes the plan's rounds (so no rank is left
waiting) and then fails without copying the data out.
"""

import time
from collections import OrderedDict

import numpy as np
from mpi4py import MPI

from ..errors import DualmpiError
from .core import copy_segments
from .alarm import ARGS
from .mpi import OTHER_GRACE, ROOT_GRACE

__all__ = ["Progress", "PlanRequest", "poll_all", "block", "CACHE_SIZE"]

#: Bound plans whose message datatypes a :class:`Progress` keeps (least recently used first out).
CACHE_SIZE = 64
#: Agreed vectors rank 0 remembers (a vector it has not kept is agreed again: only rank 0
#: decides, so forgetting one costs an agreement and changes nothing else).
KNOWN_SIZE = 4096


#: Every :class:`Progress` not yet freed, in creation order (any wait advances them all).
_LIVE = []
#: Messages of failed requests still in MPI's hands when their Progress was freed (the
#: buffers must outlive them).
_ABANDONED = []

# stages of a request: rank 0's mode (_MODE, on the other ranks), the agreement, a gather to
# rank 0 (_AGREE) and its answers (_ANSWER), the rounds
_START, _MODE, _AGREE, _ANSWER, _ROUNDS, _DONE = 0, 5, 1, 2, 3, 4


class _Compiled:
    """What every run of one bound plan shares: per round the message specs, moves and combines.

    Offsets are relative to a run's store, so the hindexed datatypes made here serve every
    run of the plan (each run's store has the same layout).
    """

    def __init__(self, bound, trailer):
        self.bound = bound
        self.users = 0        # requests running it
        self.retired = False  # left the cache: free the datatypes when the last user ends
        self.types = []
        nrecv = sum(len(rnd.recvs) for rnd in bound.rounds)
        self.sig_at = bound.nbytes
        self.size = bound.nbytes + (8 + 8 * nrecv if trailer else 0)
        trail_at = bound.nbytes + 8
        self.rounds = []
        for rnd in bound.rounds:
            recvs, sends, trails = [], [], []
            # (each message's segments as lists, its trailer appended)
            for peer, offs, lens in rnd.recvs:
                at, n = offs.tolist(), lens.tolist()
                if trailer:
                    trails.append((trail_at, peer))
                    at.append(trail_at)
                    n.append(8)
                    trail_at += 8
                recvs.append((peer, *self._spec(at, n)))
            for peer, offs, lens in rnd.sends:
                at, n = offs.tolist(), lens.tolist()
                if trailer:
                    at.append(self.sig_at)
                    n.append(8)
                sends.append((peer, *self._spec(at, n)))
            src, dst, lens = rnd.combines
            combines = [(a, b, n) for a, b, n in zip(src.tolist(), dst.tolist(), lens.tolist())
                        if n]
            peers = tuple(peer for peer, _, _, _ in recvs) + tuple(peer for peer, _, _, _ in sends)
            self.rounds.append((rnd.index, recvs, sends, _moves(rnd.copies), combines, peers,
                                trails))
        user, at, length = bound.copy_in
        self.copy_in = list(zip(at.tolist(), user.tolist(), length.tolist()))
        self.copy_out = list(zip(*(c.tolist() for c in bound.copy_out)))

    def _spec(self, offs, lens):
        """Return ``(start, stop, datatype)`` of segments ``(offs, lens)`` (lists of ints): a
        slice of the store, or the store with a datatype."""
        if not offs:
            return 0, 0, None
        if len(offs) == 1:
            a = offs[0]
            return a, a + lens[0], None
        dtype = MPI.BYTE.Create_hindexed(lens, offs).Commit()
        self.types.append(dtype)
        return 0, 0, dtype

    def free(self):
        """Free the datatypes."""
        for dtype in self.types:
            dtype.Free()
        self.types = []


def _moves(copies):
    """Return a round's local moves ``(width, src rows, dst rows)`` or ``(0, segments)``, or None.

    Moves of equal-length blocks at multiples of that length (the usual case) are one
    row copy on a 2-D view of the store (see :func:`dualmpi.engine.mpi._mover`).
    """
    src, dst, lens = copies
    if src.size == 0:
        return None
    width = int(lens[0])
    if src.size > 2 and width and np.all(lens == width) and not (src % width).any() and \
            not (dst % width).any():
        return width, src // width, dst // width
    return 0, (dst, src, lens)


def _move(store, move):
    """Do a round's local moves (see :func:`_moves`) in ``store``."""
    width = move[0]
    if width:
        rows = store[:store.size - store.size % width].reshape(-1, width)
        rows[move[2]] = rows[move[1]]
    else:
        copy_segments(store, store, move[1])


def _add_bytes(src, dst):
    """The default combine: bytes added modulo 256 (as the blocking runner's)."""
    np.add(dst, src, out=dst)


class PlanRequest:
    """One run of a bound plan in flight (made by :meth:`Progress.start`).

    Attributes
    ----------
    seq : int
        Its sequence number in its :class:`Progress` (and its messages' tag).
    what : str
        How diagnostics name it.
    done : bool
        True once it has finished, well or not.
    error : Exception or None
        Why it failed (raised by :meth:`outcome`).
    result : object
        What ``finish()`` returned.
    """

    __slots__ = ("progress", "compiled", "store", "tag", "seq", "what", "recv", "combine", "check",
                 "finish", "stage", "k", "reqs", "peers", "since", "done", "error", "result",
                 "agree_in", "agree_out", "bad", "signature", "call", "known", "modes",
                 "store_mode")

    def outcome(self):
        """Return the result of a finished request, or raise its error."""
        if self.error is not None:
            raise self.error
        return self.result

    def waiting(self):
        """Return ``(where, peers, since, grace)`` of what the request waits for (for the watchdog).

        A wait in round ``k`` has 0.1 s of grace per round (as the blocking runner's), so
        the wait that started a stall fires first; in the agreement rank 0, which names
        the ranks that have not sent, fires before the ranks waiting for its answer.
        """
        peers = tuple(sorted({peer for req, peer in zip(self.reqs, self.peers) if req}))
        name = f"{self.what} (nonblocking request {self.seq})"
        if self.stage == _MODE:
            return f"rank 0's mode for {name}", peers, self.since, OTHER_GRACE
        if self.stage in (_AGREE, _ANSWER):
            grace = ROOT_GRACE if self.progress.rank == 0 else OTHER_GRACE
            return f"the argument agreement of {name}", peers, self.since, grace
        k = self.compiled.rounds[self.k][0]
        return f"round {k} of {name}", peers, self.since, 0.1 * min(k, 50)


class Progress:
    """Runs bound plans as nonblocking requests over one transport's links.

    Creating one is collective over the transport's ranks (it duplicates the graph and
    control communicators); so is :meth:`free`.

    Parameters
    ----------
    transport : MPITransport
        Its ``graph`` (duplicated for the data), ``ctl`` (duplicated for the agreements),
        ``watchdog`` and ``rank`` are used.
    cache_size : int
        Bound plans whose message datatypes are kept for later runs (0: made per run).
    """

    def __init__(self, transport, cache_size=CACHE_SIZE):
        self.transport = transport
        self.rank = transport.rank
        wd = transport.watchdog
        wd.arm("building the nonblocking collectives' communicators", ())
        try:
            #: the data: nonblocking rounds never match the blocking plans' requests
            self.data = transport.graph.Dup()
            #: the argument agreements (nonblocking control-plane reductions)
            self.ctl = transport.ctl.Dup()
        finally:
            wd.disarm()
        self.tag_ub = int(self.data.Get_attr(MPI.TAG_UB))
        self.cache_size = int(cache_size)
        self._cache = OrderedDict()
        self._seq = 0
        #: the active requests, in start order
        self.active = []
        self._orphans = []
        #: rank 0: the vectors agreed so far (their bytes; a repeat skips the agreement)
        self.known = OrderedDict()
        #: agreements run (rank 0 counts every one; the others those rank 0 asked for)
        self.agreements = 0
        #: rank 0's mode messages still in MPI's hands (with their buffers)
        self._modes = []
        self._busy = False
        #: statuses of a round's Testall, reused: a failed message's error is read from them
        self._statuses = []
        # an alarm leaves the communicator unusable: its requests fail with the alarm's text
        transport.alarm.listeners.append(self._alarmed)
        _LIVE.append(self)

    def _alarmed(self, text):
        """The communicator became unusable (:mod:`dualmpi.engine.alarm`): fail every request."""
        for req in tuple(self.active):
            self._fail(req, DualmpiError(f"{req.what}: the communicator is unusable: {text}"))

    # -- starting ----------------------------------------------------------------------------
    def start(self, bound, send=None, recv=None, combine=None, agree=None, check=None,
              finish=None, signature=None, what="a nonblocking collective", seq=None,
              call=None):
        """Start running ``bound`` as a request; return its :class:`PlanRequest`.

        Parameters
        ----------
        bound : BoundPlan or None
            This rank's plan (every rank starts its own plan of the same collective).
            None only with ``agree`` on a rank whose arguments are bad (it cannot build
            a plan): its vector must make ``check`` raise on every rank.
        send, recv : numpy.ndarray of uint8, optional
            The user's bytes: ``send`` is copied in now, ``recv`` filled when it ends.
        combine : callable, optional
            ``combine(src, dst)`` on byte views for a reduction's combines (default:
            bytes added modulo 256).
        agree : array_like of int, optional
            A vector (the same length on every rank) agreed first: its elementwise
            maximum ``hi`` and minimum ``lo`` over the ranks are computed on the control
            plane (every rank's ``[v, -v]`` to rank 0, which sends the maximum back:
            nonblocking, and a wait names the ranks that have not sent), then
            ``check(hi, lo)`` runs on every rank; when it raises, the request fails with
            that error on every rank alike and no data moves.  When rank 0's vector was
            agreed before, rank 0 skips the agreement and every other rank compares its
            vector with rank 0's instead: equal, the rounds run; else the rank raises the
            alarm (the request fails with what ``check`` raises for the two vectors, every
            other rank's with the alarm, and the communicator becomes unusable).
        finish : callable, optional
            Called with no argument after the copy out; what it returns is the
            request's result (e.g. an unpickled object).
        signature : int, optional
            Carry this 64-bit call signature as an 8-byte trailer on every message and
            check it on arrival (see the module docstring).
        what : str
            How diagnostics name the call (e.g. ``"Ibcast"``).
        seq : int, optional
            A sequence number taken earlier with :meth:`reserve` (a request started later
            than its place in the ranks' common order, e.g. once its sizes are known).
        call : int, optional
            The communicator's call number of the collective
            (:meth:`~dualmpi.engine.alarm.Alarm.nonblocking`), which an alarm names.
        """
        req = PlanRequest()
        if seq is None:
            seq = self.reserve()
        req.seq = seq
        req.progress, req.what = self, what
        req.tag = req.seq % self.tag_ub
        if bound is None and agree is None:
            raise DualmpiError(f"{what}: a request without a plan needs an agreement")
        comp = req.store = req.signature = None
        if bound is not None:
            comp = self._compiled(bound, signature is not None)
            comp.users += 1
            req.store = store = np.zeros(comp.size, dtype=np.uint8)
            if signature is not None:
                req.signature = np.uint64(signature & ((1 << 64) - 1))
                store[comp.sig_at:comp.sig_at + 8].view(np.uint64)[0] = req.signature
            if send is not None:
                for a, b, n in comp.copy_in:
                    store[a:a + n] = send[b:b + n]
        req.compiled = comp
        req.recv, req.combine, req.check, req.finish = recv, combine or _add_bytes, check, finish
        req.done, req.error, req.result, req.bad = False, None, None, None
        req.k, req.reqs, req.peers, req.agree_in = -1, [], (), None
        req.call, req.known, req.modes, req.store_mode = call, None, (), None
        req.agree_out = None if agree is None else np.asarray(agree, dtype=np.int64).reshape(-1)
        req.stage, req.since = _START, time.monotonic()
        self.active.append(req)
        self._advance(req)
        return req

    def reserve(self):
        """Take the next sequence number (a request's tag): every rank takes them in one order."""
        seq = self._seq
        self._seq += 1
        return seq

    def _compiled(self, bound, trailer):
        """Return the (cached) :class:`_Compiled` of ``bound``."""
        key = (id(bound), trailer)
        comp = self._cache.get(key)
        if comp is not None and comp.bound is bound:
            self._cache.move_to_end(key)
            return comp
        comp = _Compiled(bound, trailer)
        if self.cache_size > 0:
            old = self._cache.pop(key, None)
            if old is not None:
                self._retire(old)
            self._cache[key] = comp
            while len(self._cache) > self.cache_size:
                self._retire(self._cache.popitem(last=False)[1])
        else:
            comp.retired = True
        return comp

    @staticmethod
    def _retire(comp):
        comp.retired = True
        if comp.users == 0:
            comp.free()

    # -- the state machine -------------------------------------------------------------------
    def _post(self, req, i):
        """Post round ``i`` of ``req``'s plan (its local moves too); past the last, finish."""
        comp = req.compiled
        if i == len(comp.rounds):
            self._finish(req)
            return
        req.k = i
        _, recvs, sends, move, _, peers, _ = comp.rounds[i]
        store, data, tag = req.store, self.data, req.tag
        reqs = []
        if req.modes and i == len(comp.rounds) - 1:
            reqs += req.modes
            peers = tuple(range(1, len(req.modes) + 1)) + peers
            req.modes = ()
        for peer, a, b, dtype in recvs:
            reqs.append(data.Irecv([store[a:b], MPI.BYTE] if dtype is None else [store, 1, dtype],
                                   peer, tag))
        for peer, a, b, dtype in sends:
            reqs.append(data.Isend([store[a:b], MPI.BYTE] if dtype is None else [store, 1, dtype],
                                   peer, tag))
        req.reqs, req.peers = reqs, peers
        req.since = time.monotonic()
        if move is not None:
            _move(store, move)

    def _advance(self, req):
        """Advance ``req`` as far as it goes without blocking; return True once it is done."""
        try:
            while not req.done:
                if req.reqs and not MPI.Request.Testall(req.reqs, self._statuses):
                    return False
                stage = req.stage
                if stage == _ROUNDS:
                    _, _, _, _, combines, _, trails = req.compiled.rounds[req.k]
                    store = req.store
                    for at, peer in trails:
                        if req.bad is None and \
                                store[at:at + 8].view(np.uint64)[0] != req.signature:
                            req.bad = (req.compiled.rounds[req.k][0], peer)
                    if combines:
                        op = req.combine
                        for a, b, n in combines:
                            op(store[a:a + n], store[b:b + n])
                    self._post(req, req.k + 1)
                elif stage == _START and req.agree_out is not None:
                    self._open(req)
                elif stage == _MODE:
                    self._heard_mode(req)
                elif stage == _AGREE and self.rank == 0:
                    self._answer(req)
                else:  # start, or the agreement is in: run the check, post the first round
                    if stage != _START:
                        n = req.agree_out.size // 2
                        hi, lo = req.agree_out[:n], -req.agree_out[n:]
                        req.reqs, req.agree_in = [], None
                        if req.check is not None:
                            req.check(hi, lo)
                        if req.compiled is None:
                            raise DualmpiError(f"rank {self.rank}: {req.what} was started without "
                                               "a plan, yet its agreement passed")
                        if req.known is not None:  # rank 0: a repeat of it skips the agreement
                            self._remember(req.known)
                    self._rounds(req)
        except MPI.Exception as exc:
            self._fail(req, self._mpi_error(req, exc))
        except Exception as exc:  # a failed check, combine or finish: raised from Test/Wait
            self._fail(req, exc)
        return True

    def _rounds(self, req):
        """The arguments hold: post the first round."""
        req.stage = _ROUNDS
        self._post(req, 0)

    def _open(self, req):
        """Begin the argument check: rank 0 sends every rank its mode (1: skip the agreement,
        its vector known; 0: agree) with its vector; the others wait for it.

        On the control communicator's duplicate, with the request's tag (so the mode is
        the first message from rank 0 a rank gets with that tag, the verdict the second).
        """
        vec = req.agree_out
        if self.rank != 0:
            req.agree_in = np.empty(1 + vec.size, dtype=np.int64)
            req.reqs, req.peers = [self.ctl.Irecv(req.agree_in, 0, req.tag)], (0,)
            req.stage, req.since = _MODE, time.monotonic()
            return
        key = vec.tobytes()
        skip = key in self.known
        mode = np.empty(1 + vec.size, dtype=np.int64)
        mode[0], mode[1:] = skip, vec
        ranks = range(1, self.ctl.Get_size())
        if not skip:
            req.known = key
            self._gather(req, [self.ctl.Isend(mode, r, req.tag) for r in ranks])
            return
        # synchronous: the request ends once every rank has started the call (as the
        # agreement's answer ensures), so rank 0 is never more calls ahead than requests
        # the program holds (the others keep its notices about calls they have not reached)
        sends = [self.ctl.Issend(mode, r, req.tag) for r in ranks]
        self.known.move_to_end(key)
        if req.compiled.rounds:  # waited for with the last round's messages (only there: a
            req.modes = sends    # request whose messages another test completed would wait on)
            req.store_mode = mode
        else:
            self._modes.append((sends, mode))
        self._rounds(req)

    def _heard_mode(self, req):
        """Rank 0's mode is in (a rank other than 0): agree, or compare and run the rounds."""
        mode, mine = req.agree_in, req.agree_out
        req.reqs, req.agree_in = [], None
        if not mode[0]:
            self._gather(req)
        elif mode[1:].tobytes() == mine.tobytes():
            self._rounds(req)
        else:
            self._differs(req, mode[1:])

    def _differs(self, req, theirs):
        """This rank's vector differs from that of rank 0, which skipped the agreement: raise
        the alarm (every rank's requests fail), then what ``check`` says of the two."""
        mine = req.agree_out
        error = DualmpiError(f"rank {self.rank}: the arguments of {req.what} differ from rank 0's")
        try:
            if req.check is not None:
                req.check(np.maximum(mine, theirs), np.minimum(mine, theirs))
        except Exception as exc:  # (the rank's own mistake, or the field the ranks differ on)
            error = exc
        try:
            self.transport.alarm.raise_alarm(ARGS, self.rank, what=req.what, seq=req.call)
        except DualmpiError:
            pass
        raise error

    def _remember(self, key):
        """Rank 0: the vector ``key`` was agreed."""
        self.known[key] = None
        if len(self.known) > KNOWN_SIZE:
            self.known.popitem(last=False)

    def _gather(self, req, sends=()):
        """Start the agreement: every rank sends ``[v, -v]`` to rank 0 (which posts the receives).

        Through rank 0, as the transport's control plane, so a wait names the ranks that
        have not sent; on the control communicator's duplicate, with the request's tag.
        ``sends``: rank 0's mode messages, waited for with the vectors.
        """
        vec = req.agree_out
        both = np.concatenate([vec, -vec])
        ctl, tag, size = self.ctl, req.tag, self.ctl.Get_size()
        req.stage, req.since = _AGREE, time.monotonic()
        self.agreements += 1
        if self.rank == 0:
            req.agree_out = both
            req.agree_in = np.empty((size - 1, both.size), dtype=np.int64)
            req.reqs = [ctl.Irecv(req.agree_in[r - 1], r, tag) for r in range(1, size)] + \
                list(sends)
            req.peers = tuple(range(1, size)) * 2
        else:
            req.agree_in, req.agree_out = both, np.empty_like(both)
            req.reqs = [ctl.Isend(both, 0, tag), ctl.Irecv(req.agree_out, 0, tag)]
            req.peers = (0, 0)

    def _answer(self, req):
        """Rank 0 has every rank's vector: combine (maximum) and send the result back."""
        out = req.agree_out
        if req.agree_in.size:
            np.maximum(out, req.agree_in.max(axis=0), out=out)
        size = self.ctl.Get_size()
        req.stage, req.since = _ANSWER, time.monotonic()
        req.reqs = [self.ctl.Isend(out, r, req.tag) for r in range(1, size)]
        req.peers = tuple(range(1, size))

    def _finish(self, req):
        """Copy the result out, run ``finish``, retire the request."""
        req.reqs, req.peers = [], ()
        if req.bad is not None:
            k, peer = req.bad
            self._end(req)
            req.error = DualmpiError(
                f"rank {self.rank}: in round {k} of {req.what} rank {peer} sent a message of "
                "another call (the ranks started different nonblocking collectives or passed "
                "buffers of different sizes); the received data is not used")
            return
        recv, store, finish = req.recv, req.store, req.finish
        if recv is not None:
            for a, b, n in req.compiled.copy_out:
                recv[a:a + n] = store[b:b + n]
        self._end(req)
        if finish is not None:
            req.result = finish()

    def _end(self, req):
        """Mark ``req`` done and release what it held."""
        req.done, req.stage = True, _DONE
        try:
            self.active.remove(req)
        except ValueError:
            pass
        comp = req.compiled
        if comp is not None:
            comp.users -= 1
            if comp.retired and comp.users == 0:
                comp.free()
        req.store = req.recv = req.finish = req.check = req.combine = req.agree_in = None

    def _fail(self, req, exc):
        """End ``req`` with error ``exc``; its posted messages are cancelled or left to finish."""
        pending = [r for r in list(req.reqs) + list(req.modes) if r]
        req.modes = ()
        for r in pending:
            try:
                r.Cancel()
            except MPI.Exception:
                pass
        if pending:  # MPI may still touch the buffers: keep them until they are done
            self._orphans.append((pending, (req.store, req.agree_in, req.agree_out,
                                            req.store_mode)))
        req.reqs, req.peers = [], ()
        if not req.done:
            self._end(req)
        req.error = exc

    def _mpi_error(self, req, exc, statuses=None):
        """Return the error of a failed MPI call of ``req`` (the message's own error when a wait
        of several reported ``MPI_ERR_IN_STATUS``)."""
        code = exc.Get_error_code()
        if code == MPI.ERR_IN_STATUS:
            statuses = self._statuses if statuses is None else statuses
            code = next((st.error for st in statuses[:len(req.reqs)]
                         if st.error not in (MPI.SUCCESS, MPI.ERR_PENDING)), code)
        where = f"round {req.compiled.rounds[req.k][0]}" if req.k >= 0 else \
            "the argument agreement"
        return DualmpiError(f"rank {self.rank}: {MPI.Get_error_string(code)} in "
                            f"{where} of {req.what} (the ranks started different nonblocking "
                            "collectives or passed buffers of different sizes)")

    # -- progress ----------------------------------------------------------------------------
    def poll(self):
        """Advance every active request as far as possible without blocking (in start order)."""
        if self._busy:
            return
        self._busy = True
        try:
            for req in tuple(self.active):
                self._advance(req)
            if self._orphans:
                self._orphans = [(reqs, store) for reqs, store in self._orphans
                                 if not _quiet_testall(reqs)]
            if self._modes:
                self._modes = [(reqs, mode) for reqs, mode in self._modes
                               if not _quiet_testall(reqs)]
        finally:
            self._busy = False

    def test(self, req):
        """Advance every request (:func:`poll_all`); return whether ``req`` is done."""
        poll_all()
        return req.done

    def wait(self, req):
        """Advance the requests until ``req`` is done (blocking meanwhile: :func:`block`)."""
        while not req.done:
            poll_all()
            if req.done:
                break
            block((), req)
        return req.done

    def free(self):
        """Wait for the active requests (their errors stay with them), free the communicators."""
        for req in tuple(self.active):
            try:
                self.wait(req)
            except DualmpiError:
                if self.transport.alarm.broken is None:
                    raise
                # the line brought an alarm: every request has failed with its text
        for comp in self._cache.values():
            comp.retired = True
            if comp.users == 0:
                comp.free()
        self._cache.clear()
        if self in _LIVE:
            _LIVE.remove(self)
        # messages cancelled or never matched (requests that failed) keep their buffers alive
        _ABANDONED.extend(orphan for orphan in self._orphans + self._modes
                          if not _quiet_testall(orphan[0]))
        self._orphans, self._modes = [], []
        if self.data != MPI.COMM_NULL:
            self.data.Free()
            self.ctl.Free()


def _quiet_testall(reqs):
    """Testall that treats an error as done (requests of a failed request)."""
    try:
        return MPI.Request.Testall(reqs)
    except MPI.Exception:
        return True


def poll_all():
    """Advance every active request of every live :class:`Progress`."""
    for prog in _LIVE:
        prog.poll()


def block(extra=(), watch=None, status=None):
    """Block until one posted request of an active nonblocking collective, or of ``extra``, is done.

    Waits on all of them at once with ``MPI_Waitany`` (and on the alarm lines of their
    communicators: :mod:`dualmpi.engine.alarm`; no spinning; with
    ``mpi_yield_when_idle`` the rank yields its core), under the watchdog of ``watch``'s
    transport, naming what ``watch`` (a :class:`PlanRequest`) waits for.  Returns the
    index in ``extra`` (the caller's own ``MPI.Request`` objects) of the request that
    completed, its status in ``status``, or -1.  One request at a time, not
    ``MPI_Waitsome``: Open MPI frees a request that failed in a wait of several and
    reports only ``MPI_ERR_IN_STATUS``, so the failed one (the request that became null)
    could not be told from those that succeeded; its plan request fails here, an error
    of a request of ``extra`` is raised.
    """
    reqs, owners, alarms = [], [], []
    for prog in _LIVE:
        for req in prog.active:
            reqs += req.reqs
            owners += [req] * len(req.reqs)
        alarm = prog.transport.alarm
        if prog.active and alarm.line is not None and alarm not in alarms:
            alarms.append(alarm)
    n = len(reqs)
    if extra:
        reqs += extra
    if not reqs:
        return -1
    # the alarm lines of the communicators whose requests are waited for: a rank waiting for
    # a nonblocking call hears at once that another made it a blocking one (alarm.py)
    m = len(reqs)
    reqs += [alarm.line for alarm in alarms]
    wd = None
    if watch is not None and not watch.done:
        wd = watch.progress.transport.watchdog
        where, peers, since, grace = watch.waiting()
        wd.state = (since, where, peers, grace)
    active = [bool(r) for r in reqs]
    try:
        i = MPI.Request.Waitany(reqs, status)
    except MPI.Exception as exc:
        failed = [j for j, r in enumerate(reqs) if active[j] and not r]
        if failed and failed[0] >= n:
            raise
        for j in failed:
            req = owners[j]
            if not req.done:
                req.progress._fail(req, req.progress._mpi_error(req, exc))
        return -1  # (a failed request not freed fails when next tested)
    finally:
        if wd is not None:
            wd.disarm()
    if i != MPI.UNDEFINED and i >= m:
        alarm = alarms[i - m]
        alarm.poll(getattr(watch, "what", None) or "a nonblocking collective")
        return -1
    return i - n if i != MPI.UNDEFINED and i >= n else -1
