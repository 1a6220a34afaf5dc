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
take different paths, whatever order their requests complete in.  The mode carries rank 0's call
number: a rank whose request of that number is another call (one of the two made a call
blocking that the other made nonblocking) raises the alarm at once, before it reads a message of
that request.  Tagged with that number, on a communicator of its own, the mode is rank 0's
nonblocking notice too: a rank that waits in dualmpi probes for the first mode none of its
requests has taken (:meth:`Progress._probe`, from the watchdog's thread), so a rank that made
blocking a call rank 0 made nonblocking hears of it without a message of its own from rank 0.

With the compiled loop (:mod:`dualmpi.engine.cloop`) a request's rounds run in C
(``rounds.c``'s ``dualmpi_istep``: test the round's messages, check their trailers, combine
with ``MPI_Reduce_local`` when the operation is MPI's own on a predefined type, post the
next round and do its moves, as far as it goes without blocking), on a *run* of the plan —
its store and request array — that goes back to the plan's pool when the request ends, so
the next request of that plan allocates nothing.  A combine MPI does not have (a numpy
ufunc, a user ``MPI.Op``), a message longer than an ``int`` count or no compiled loop: the
same rounds and messages are posted and tested from Python.

A fixed-count call repeated on the same argument objects, whose vector rank 0 has seen agreed,
starts in one C call (:meth:`Progress.restart`, ``rounds.c``'s ``dualmpi_istart``): the alarm
line drained (at every ``LINE_EVERY``-th start, 16: a test of the line that finds nothing costs
a round of MPI's progress, a ``sched_yield`` with ``mpi_yield_when_idle``; a wait in C has the
line among its requests), the call number and the nonblocking notices, the copies in, rank 0's
mode sent (by rank 0) or its receive posted (by the others, which compare it in C before they
read round 0's messages: round 0 leaves at once, not one message later, unless it sends a
payload apart from its trailer, or the tag bound is below :data:`EARLY_TAG_UB`), the first round
posted (its test left to the next step or wait: a test just after the post
finds nothing as often as not); the result is copied out in C too. The messages are those of
the Python path, so ranks on either path match; whatever the C call cannot do (a mode that is
not "skip" with the rank's own vector, a line message Python must read) goes back to Python.
With the extension (:mod:`dualmpi.engine.recall`) the rest of that path is C too:
:attr:`Progress.crestart` (``recall.c``'s ``IRestart``) does what :meth:`Progress.restart` does
and makes the request's objects, and the head of :meth:`Progress.wait` (``IRestart.close``)
steps the only request in flight and ends it when its rounds are done; ``Request.Wait`` of such
a request is C too (:func:`dualmpi.request.use_c_wait`), and the rest of the wait, when the
close did not end it, :meth:`Progress._wait_on`. Rank 0 sends every :data:`MODE_SYNC`-th mode
synchronously, the others as plain sends.

Any test or wait of any request advances every active request of every live
:class:`Progress` (:func:`poll_all`), so a rank waiting on one request still forwards
the rounds of the others; a rank that must block waits (``MPI_Waitany``) on the
posted requests of every active request at once, under the transport's watchdog,
which names the round and the ranks waited for.  So does every blocking call of dualmpi
(MPI's progress rule: :func:`beside`, through :mod:`dualmpi.engine.inflight`): a rank
blocked in a collective, an agreement or a point-to-point call still forwards the rounds of
the requests it has started.  A wait for the only request in flight
on the rank waits in C (``dualmpi_iwait``: ``MPI_Waitany`` on the round's messages and the
alarm line, the next round posted without a return to Python), the watchdog reading the
round from the run.  Nothing here spins.

Messages carry exactly the plan's bytes.  With ``signature=`` a request's messages
also carry the 8-byte call signature as a trailer, mixed with the communicator's call number
when the request has one (as the blocking runner's do: :func:`~dualmpi.engine.mpi.call_signature`;
a v-variant's data, whose request takes no call number, carries the signature alone): a
receiver that gets another signature finishes the plan's rounds (so no rank is left
waiting) and then fails without copying the data out.  The call number is what tells two
calls of one signature at one request number apart: a rank whose request of number ``k`` is
its call ``t`` while rank 0's is its call ``t + 1`` sends its first round before it compares
rank 0's mode, and rank 0's request must not take those messages for its own.  A payload of
:data:`~dualmpi.engine.mpi.APART` bytes or more (:data:`~dualmpi.engine.mpi.APART_EXCHANGE`
in a reduction whose ranks exchange payloads in a round) travels apart from its trailer, as
in the blocking plans (Open MPI sends a message of payload and trailer through its own
buffers): its receive is posted once the trailer is in (:class:`_Compiled`).
"""

import ctypes
import time
import weakref
from collections import OrderedDict

import numpy as np
from mpi4py import MPI

from ..errors import DualmpiError
from .core import copy_segments
from .plan import SPARE
from . import recall
from .alarm import ARGS, FUTURE, MIXED, MIXED_HERE, WORDS as LINE_WORDS
from .inflight import ADVANCE, BESIDE, IN_FLIGHT
from .mpi import (APART, IMMEDIATE, OTHER_GRACE, PACK_SMALL, ROOT_GRACE, _mpi_op, _runs,
                  _small_bytes, apart_from, call_signature, handle_dtype, joined)
from .watchdog import Watchdog

__all__ = ["Progress", "PlanRequest", "Repeat", "poll_all", "block", "beside", "CACHE_SIZE",
           "POOL_SIZE", "MODE_WORDS", "MODE_SYNC", "NOTES_OWED", "IN_FLIGHT"]

#: Bound plans whose message datatypes a :class:`Progress` keeps (least recently used first out).
CACHE_SIZE = 64
#: Runs of one bound plan (their stores and request arrays) a :class:`Progress` keeps for the
#: plan's next requests, once they are done.
POOL_SIZE = 4
#: Words of a run's mode message (:meth:`Progress.restart`: ``[skip, call number, vector]``, an
#: argument vector of at most 14).
MODE_WORDS = 16
#: Rank 0 sends the mode of every ``MODE_SYNC``-th request synchronously (``rounds.c``'s
#: ``MODE_SYNC``): it ends once every rank has started it, so rank 0 runs at most this many
#: calls ahead of a rank beyond the requests the program holds; the others' modes cost no
#: round trip.
MODE_SYNC = 64
#: A rank other than 0 owes rank 0 the nonblocking notice of a repeat started in C until the
#: request's first step (``rounds.c``: sent then only if rank 0's mode is not in), and keeps a
#: request of its pool free for each: at most this many such requests started and not yet
#: stepped (more are started by the Python path, which sends the notice at once).
NOTES_OWED = 64
#: Agreed vectors rank 0 remembers (a vector it has not kept is agreed again: only rank 0
#: decides, so forgetting one costs an agreement and changes nothing else).
KNOWN_SIZE = 4096


#: Every :class:`Progress` not yet freed, in creation order (any wait advances them all).
_LIVE = []
#: Messages of failed requests still in MPI's hands when their Progress was freed (the
#: buffers must outlive them).
_ABANDONED = []

# stages of a request: rank 0's mode (_MODE, on the other ranks), the agreement, a gather to
# rank 0 (_AGREE) and its answers (_ANSWER), the rounds (in Python, or in C: _CROUNDS, then
# rank 0's mode messages, _CLOSE)
_START, _MODE, _AGREE, _ANSWER, _ROUNDS, _DONE, _CROUNDS, _CLOSE = 0, 5, 1, 2, 3, 4, 6, 7

# the fields of the compiled step's plan, run and round rows (rounds.c: dualmpi_istep)
_P_NROUNDS, _P_ROUNDS, _P_MSGS, _P_MOVES, _P_COMBS, _P_TRAILS, _P_COMM, _P_BYTE, _P_APART, \
    _P_PACKS, _P_UNPACKS, _P_FIELDS = range(12)
_S_K, _S_STORE, _S_TAG, _S_REQS, _S_SIGNATURE, _S_BAD_ROUND, _S_BAD_PEER, _S_OP, _S_TYPE, \
    _S_ITEM, _S_POS, _S_RUN, _S_NMODE, _S_MODE_AT, _S_MODE, _S_VEC, _S_NVEC, _S_NCOUT, _S_COUT, \
    _S_LATE, _S_NMID, _S_MID, _S_MODE_DUE, _S_CALL, _S_OWED, _S_X, _S_FIELDS = range(27)
# a run's S_MODE_DUE: rank 0's mode compared before round 0's messages are read (round 0 posted
# first), before round 0 is posted, or heard and not yet read here (rounds.c: MODE_*)
_MODE_NONE, _MODE_EARLY, _MODE_FIRST, _MODE_HEARD = range(4)
# the fields of a start in C (rounds.c: dualmpi_istart): the Progress's, the remembered call's
_X_RANK, _X_SIZE, _X_ACOMM, _X_CTL, _X_I64, _X_LONG, _X_NOTES, _X_NOTE_REQS, _X_NOTE_BUF, \
    _X_STARTS, _X_EARLY, _X_SENT, _X_OWED, _X_PROBED, _X_MODE_TAGS, _X_FIELDS = range(16)
#: A run started in C on a rank other than 0 posts its round 0 before rank 0's mode is in (and
#: compares the mode before it reads round 0's messages) when the tag bound is at least this:
#: the round-0 messages of a call whose agreement then fails (a rank passed other arguments) are
#: never received, and stay unmatched by any later request for ``tag_ub`` requests.
EARLY_TAG_UB = 1 << 20
_M_VEC, _M_NVEC, _M_CIN, _M_NCIN, _M_COUT, _M_NCOUT, _M_SIG, _M_SIGAT, _M_SIZE, _M_OP, \
    _M_TYPE, _M_ITEM, _M_PLAIN, _M_MID, _M_NMID, _M_FIELDS = range(16)
_R_FIELDS = 16
# a message row's kinds (rounds.c: [peer, offset, length, datatype, kind, safe datatype])
_M_RECV, _M_SEND, _M_SEND_APART, _M_RECV_APART = range(4)
_MSG_FIELDS = 6
_W_WBUF, _W_RING, _W_SEQ, _W_HIST, _W_LINE, _W_FUTURE, _W_FIELDS = range(7)
_STEP_FIELDS = _MSG_FIELDS * 1000000 + _W_FIELDS * 10000 + _P_FIELDS * 1000 + _S_FIELDS * 10 + \
    _R_FIELDS
#: the largest message the compiled step posts as a count of bytes (an int)
_INT_MAX = 2 ** 31 - 1


class _Compiled:
    """What every run of one bound plan shares: per round the message specs, moves and combines.

    Offsets are relative to a run's store, so the hindexed datatypes made here serve every
    run of the plan (each run's store has the same layout) — but for a plan bound to the
    user's buffers (:meth:`Engine.bind_buffers <dualmpi.engine.core.Engine.bind_buffers>`),
    whose offsets are addresses and whose one run has the store ``at`` that address (its
    signature and trailers there too; the run's store address is 0).

    With trailers a message whose payload has ``limit`` bytes or more
    (:func:`~dualmpi.engine.mpi.apart_from`: the :class:`Progress`'s, from
    :data:`~dualmpi.engine.mpi.APART_EXCHANGE` in a reduction whose ranks exchange payloads in
    a round, :meth:`Engine.exchanges <dualmpi.engine.core.Engine.exchanges>`) goes as two, as the
    blocking runner's do: the payload alone, with the request's tag plus the
    :class:`Progress`'s ``apart_tag``, and the trailer with the request's tag.  Its receiver
    posts the trailer's receive first in the round (the trailer and a spare block 8 bytes
    apart from every trailer, so a whole message there is cut short safely) and the
    payload's receive (``late``, after the round's requests) only once that trailer is in: the
    contiguous receive when the trailer carries the call's signature, else the payload
    with a spare block apart (a longer message of another call is cut short there: Open
    MPI 5.0 writes past a contiguous receive).  Every rank of a call decides alike (the
    collective, the message's length).  Each round is ``(index, recvs, sends, moves,
    combines, peers, trails, late)``: ``recvs`` ``(peer, start, stop, datatype)``, the lone
    trailers' first; ``sends`` with their kind appended (``_M_SEND``, or
    ``_M_SEND_APART`` for a payload); ``late`` the payloads' receives with their safe
    datatype appended; ``peers`` those of the round's requests in order (recvs, sends,
    late); ``trails`` ``(offset, peer)``, the lone trailers' first; ``packs`` and ``unpacks``
    the copies ``(destination, source, length)`` of its small messages packed.

    A copying plan's small messages whose segments are not one run of memory travel packed,
    as the blocking loop's do (:data:`~dualmpi.engine.mpi.PACK_SMALL`): a send of at most
    :data:`~dualmpi.engine.mpi.IMMEDIATE` bytes with its trailer leaves from a slot after the
    spare block (8 bytes apart from it) its segments are copied to as the round is posted
    (``packs``), a receive that small lands whole in such a slot, copied to its segments and
    trailer once the round's messages are in (``unpacks``).  A plan bound to the user's
    buffers (``at`` given) sends its messages as they are.  Every receive with a trailer has
    two blocks apart, so that a longer message of another call is cut short, not written past
    (Open MPI 5.0 writes past a contiguous receive above its eager limit): its payload and
    trailer, or the slot and the spare block, or a trailer alone and the spare block.
    """

    __slots__ = ("bound", "users", "retired", "types", "sig_at", "size", "rounds", "copy_in",
                 "copy_out", "c_table", "c_addr", "_c_keep", "width", "trailer", "combines", "pool")

    def __init__(self, bound, trailer, at=0, limit=APART):
        self.bound = bound
        self.users = 0        # requests running it
        self.retired = False  # left the cache: free the datatypes when the last user ends
        self.types = []
        nrecv = sum(len(rnd.recvs) for rnd in bound.rounds)
        self.sig_at = at + bound.nbytes
        self.size = bound.nbytes + (8 + 8 * nrecv + SPARE if trailer else 0)
        trail_at = self.sig_at + 8
        spare_at = trail_at + 8 * nrecv + 8
        # (the small messages' slots 8 bytes after the spare block: a copying plan's only)
        pack = PACK_SMALL and trailer and at == 0
        if pack:
            self.size += 8
        small_at = self.size
        self.rounds = []
        for rnd in bound.rounds:
            recvs, sends, trails, late = [], [], [], []
            packs, unpacks = [], []
            first, lone = [], []  # (the lone trailers' receives and trailers come first)
            # (each message's segments as lists, its trailer appended)
            for peer, offs, lens in rnd.recvs:
                at, n = offs.tolist(), lens.tolist()
                if trailer and sum(n) >= limit:
                    lone.append((trail_at, peer))
                    first.append((peer, *self._spec([trail_at, spare_at], [8, 8])))
                    late.append((peer, *self._spec(at, n),
                                 self._spec(at + [spare_at], n + [8])[2]))
                    trail_at += 8
                    continue
                if trailer:
                    trails.append((trail_at, peer))
                    at.append(trail_at)
                    n.append(8)
                    trail_at += 8
                    size = sum(n)
                    if pack and 8 < size <= IMMEDIATE:  # (received whole, then copied out)
                        src = small_at
                        for a, m in zip(at, n):
                            unpacks.append((a, src, m))
                            src += m
                        # (the slot and the spare block apart: a longer message of another
                        # call is cut short, never written past the slot)
                        recvs.append((peer, *self._spec([small_at, spare_at], [size, 8])))
                        small_at += size
                        continue
                    if _runs(at, n) == 1:  # (a trailer alone: the spare block apart too)
                        at.append(spare_at)
                        n.append(8)
                recvs.append((peer, *self._spec(at, n)))
            recvs, trails = first + recvs, lone + trails
            for peer, offs, lens in rnd.sends:
                at, n = offs.tolist(), lens.tolist()
                if trailer and sum(n) >= limit:
                    sends.append((peer, *self._spec(at, n), _M_SEND_APART))
                    sends.append((peer, *self._spec([self.sig_at], [8]), _M_SEND))
                    continue
                if trailer:
                    at.append(self.sig_at)
                    n.append(8)
                    size = sum(n)
                    if pack and size <= IMMEDIATE and _runs(at, n) > 1:  # (from a slot)
                        dst = small_at
                        for a, m in zip(at, n):
                            packs.append((dst, a, m))
                            dst += m
                        sends.append((peer, small_at, small_at + size, None, _M_SEND))
                        small_at += size
                        continue
                sends.append((peer, *self._spec(at, n), _M_SEND))
            src, dst, lens = rnd.combines
            combines = [(a, b, n) for a, b, n in zip(src.tolist(), dst.tolist(), lens.tolist())
                        if n]
            peers = tuple(m[0] for m in recvs) + tuple(m[0] for m in sends) + \
                tuple(m[0] for m in late)
            self.rounds.append((rnd.index, recvs, sends, _moves(rnd.copies), combines, peers,
                                trails, late, packs, unpacks))
        self.size = small_at
        user, at, length = bound.copy_in
        self.copy_in = list(zip(at.tolist(), user.tolist(), length.tolist()))
        self.copy_out = list(zip(*(c.tolist() for c in bound.copy_out)))
        #: the plan of the compiled step (:meth:`c_plan`), its address, and what it points to
        self.c_table, self.c_addr, self._c_keep = None, 0, ()
        #: the most messages of a round (a run's request array)
        self.width = max([len(rnd[5]) for rnd in self.rounds] + [1])
        self.trailer = bool(trailer)
        self.combines = any(rnd[4] for rnd in self.rounds)
        #: runs of the compiled step done with (store, state, requests, state's address): the
        #: next request of the plan reuses one
        self.pool = []

    def c_plan(self, comm, apart_tag):
        """Build the plan of the compiled step (``rounds.c``'s ``dualmpi_istep``) for messages on
        ``comm`` (payloads apart with the tag plus ``apart_tag``); return False when a message
        is too long for it (the rounds then run in Python).
        """
        if self.c_addr:
            return True
        rows, msgs, moves, combs, trails, packs, unpacks = [], [], [], [], [], [], []
        for k, (_, recvs, sends, _, combines, _, trail, late, pack, unpack) in \
                enumerate(self.rounds):
            src, dst, lens = self.bound.rounds[k].copies
            first = len(msgs)
            # (the round's messages, then its payloads' receives: the lone trailers' are the
            # first len(late) receives, rounds.c's R_NFIRST)
            group = [(*m, _M_RECV, None) for m in recvs] + [(*m, None) for m in sends] + \
                [(*m[:4], _M_RECV_APART, m[4]) for m in late]
            for peer, a, b, dtype, kind, safe in group:
                if b - a > _INT_MAX:
                    return False
                msgs.append((peer, a, b - a, 0 if dtype is None else dtype.handle, kind,
                             0 if safe is None else safe.handle))
            rows.append((len(recvs) + len(sends), len(recvs), first, src.size, len(moves),
                         len(combines), len(combs), len(trail), len(trails), len(late),
                         len(late), first + len(recvs) + len(sends), len(pack), len(packs),
                         len(unpack), len(unpacks)))
            moves += zip(dst.tolist(), src.tolist(), lens.tolist())
            combs += combines
            trails += trail
            packs += pack
            unpacks += unpack
        keep = [np.array(rows + [(0,) * _R_FIELDS], dtype=np.int64)]
        for table, width in ((msgs, _MSG_FIELDS), (moves, 3), (combs, 3), (trails, 2),
                             (packs, 3), (unpacks, 3)):
            keep.append(np.array(table + [(0,) * width], dtype=np.int64))
        plan = np.zeros(_P_FIELDS, dtype=np.int64)
        plan[_P_NROUNDS] = len(self.rounds)
        for field, table in zip((_P_ROUNDS, _P_MSGS, _P_MOVES, _P_COMBS, _P_TRAILS, _P_PACKS,
                                 _P_UNPACKS), keep):
            plan[field] = table.ctypes.data
        plan[_P_COMM], plan[_P_BYTE] = comm.handle, MPI.BYTE.handle
        plan[_P_APART] = apart_tag
        self._c_keep = keep
        self.c_table, self.c_addr = plan, plan.ctypes.data
        return True

    def _spec(self, offs, lens):
        """Return ``(start, stop, datatype)`` of segments ``(offs, lens)`` (lists of ints): a
        slice of the store, or the store with a datatype (adjacent segments joined)."""
        offs, lens = joined(offs, lens)
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


class Repeat:
    """What :meth:`Progress.restart` starts a repeated fixed-count call with (made once per
    remembered call: :class:`dualmpi.calls._IMemo`).

    ``bound`` is the call's plan, ``flat`` its argument vector (``key``: its bytes, which
    rank 0 looks up among the vectors agreed), ``check`` its verdict, ``signature`` its
    trailer's word, ``send``/``recv`` the user's bytes, ``combine``, ``finish`` and
    ``exchanges`` as :meth:`Progress.start` takes them.  ``c`` is the array ``dualmpi_istart`` reads (the
    vector, the copies in and out at absolute addresses, the signature, the combine's MPI
    handles), or None when the compiled step cannot start it (a combine MPI does not have,
    a plan with no round).

    ``zero`` (:meth:`Engine.bind_buffers <dualmpi.engine.core.Engine.bind_buffers>`: the plan
    at the user's buffers' addresses, its store, the seeds to copy before the first round and
    the rank's own blocks) makes the repeat zero-copy: ``z_c`` is that plan's array (copies
    in: the seeds; none out; the rank's own blocks once round 0 is posted, while its messages
    fly, as the blocking loop's — an ``Iscan``'s rank 0 copied its 4 MiB block before sending
    it to rank 1: 1.50x the blocking ``Scan``'s time, its floor), ``z_comp`` its
    :class:`_Compiled` with its one run (made by :meth:`Progress.restart`).  A repeat started
    while that run is busy (another request of the same call in flight, legal where the rank
    only sends) copies through a store of its own.
    ``comp`` is the :class:`_Compiled` a copying start last ran (``comp_key`` its key in the
    cache), which the start in C (:class:`~dualmpi.engine.recall` ``IRestart``) takes a run of.
    A ``plain`` repeat is of a request without an agreement (``flat`` empty: a v-variant's
    data), started by :meth:`Progress.restart` with the number reserved for it.
    """

    __slots__ = ("bound", "flat", "key", "check", "signature", "send", "recv", "combine",
                 "finish", "c", "c_addr", "_cin", "_cout", "zero", "z_c", "z_addr", "z_comp",
                 "_zin", "_zout", "_zmid", "comp", "comp_key", "plain", "exchanges")

    def __init__(self, bound, flat, check, signature, send=None, recv=None, combine=None,
                 finish=None, zero=None, plain=False, exchanges=False):
        self.bound, self.check, self.finish, self.plain = bound, check, finish, bool(plain)
        self.flat = np.ascontiguousarray(flat, dtype=np.int64).reshape(-1)
        self.key = self.flat.tobytes()
        sig = signature & ((1 << 64) - 1)
        self.signature = np.uint64(sig)
        self.send, self.recv, self.combine = send, recv, combine or _add_bytes
        #: a reduction whose ranks exchange payloads in a round: its payloads go apart from
        #: a larger size (:class:`_Compiled`; as :meth:`Progress.start`)
        self.exchanges = bool(exchanges)
        self.c = self._cin = self._cout = self.zero = self.z_c = self.z_comp = None
        self.c_addr = self.z_addr = 0
        #: the _Compiled the last copying start used and its cache key (the C start's)
        self.comp, self.comp_key = None, (id(bound), True, self.exchanges)
        c_op = (0, 0, 0)
        if any((rnd.combines[2] > 0).any() for rnd in bound.rounds):  # (as _Compiled.combines)
            c_op = _mpi_op(combine) if combine is not None else None
        if c_op is None or self.flat.size + 2 > MODE_WORDS or not bound.rounds:
            return
        # (as start and _finish: no buffer, no copies)
        user, at, length = bound.copy_in
        cin = [] if send is None else [
            (a, send.ctypes.data + u, n)
            for a, u, n in zip(at.tolist(), user.tolist(), length.tolist()) if n]
        user, at, length = bound.copy_out
        cout = [] if recv is None else [
            (recv.ctypes.data + u, a, n)
            for u, a, n in zip(user.tolist(), at.tolist(), length.tolist()) if n]
        self.c, self._cin, self._cout, _ = self._table(bound, 0, cin, cout, sig, c_op)
        self.c_addr = self.c.ctypes.data
        if zero is not None:  # (Engine.bind_buffers: the plan at addresses, store, seeds, own)
            self.zero = zero
            self.z_c, self._zin, self._zout, self._zmid = self._table(
                zero[0], zero[1].ctypes.data, list(zero[2]), [], sig, c_op, list(zero[3]))
            self.z_addr = self.z_c.ctypes.data

    def rebased(self, old, new):
        """Return this repeat for other arrays: ``new[k]`` (C-contiguous, of ``old[k]``'s size)
        in place of ``old[k]``, or None.

        Every address of its copies in and out that lies in ``old[k]`` moves with it (None
        when one lies in none of them); it copies through the plan's stores (not zero-copy,
        whose plan is bound to ``old``'s addresses) and holds no buffer (``send``, ``recv``
        None: a start reads only its copies' table).  A repeat of a call on new arrays of the
        shape the call was made on (``dualmpi.calls._shaped_repeat``); the rest is shared
        with this one.
        """
        spans = [(a.ctypes.data, a.nbytes) for a in old]
        bases = [a.ctypes.data for a in new]

        def moved(v):
            for k, (lo, n) in enumerate(spans):
                if lo <= v <= lo + n:
                    return k, v - lo
            raise LookupError(v)

        if self.c is None:
            return None
        cin, cout = self._cin.copy(), self._cout.copy()
        try:
            for row, col in [(r, 1) for r in cin[:-1]] + [(r, 0) for r in cout[:-1]]:
                k, at = moved(int(row[col]))
                row[col] = bases[k] + at
        except LookupError:
            return None
        out = Repeat.__new__(Repeat)
        for name in Repeat.__slots__:
            if hasattr(self, name):
                setattr(out, name, getattr(self, name))
        out.zero = out.z_c = out.z_comp = out._zin = out._zout = out._zmid = out.send = \
            out.recv = None
        out.z_addr = 0
        out.c, out._cin, out._cout = self.c.copy(), cin, cout
        out.c[_M_CIN], out.c[_M_COUT] = cin.ctypes.data, cout.ctypes.data
        out.c_addr = out.c.ctypes.data
        return out

    def _table(self, bound, at, cin, cout, sig, c_op, mid=()):
        """Return ``dualmpi_istart``'s array for ``bound`` (its store at ``at``: 0 for a run's
        own store, whose offsets are relative) and its copies in, out and ``mid`` (absolute
        ``(destination, source, length)``, made once round 0 is posted), kept alive."""
        cin = np.array(cin + [(0,) * 3], dtype=np.int64)
        cout = np.array(cout + [(0,) * 3], dtype=np.int64)
        mid = np.array(list(mid) + [(0,) * 3], dtype=np.int64)
        c = np.zeros(_M_FIELDS, dtype=np.int64)
        c[_M_VEC], c[_M_NVEC] = self.flat.ctypes.data, self.flat.size
        c[_M_CIN], c[_M_NCIN] = cin.ctypes.data, len(cin) - 1
        c[_M_COUT], c[_M_NCOUT] = cout.ctypes.data, len(cout) - 1
        c[_M_SIG] = sig - (1 << 64) if sig >> 63 else sig
        c[_M_SIGAT] = at + bound.nbytes
        nrecv = sum(len(rnd.recvs) for rnd in bound.rounds)
        # (cleared at each start: the trailers, the spare block and a copying plan's slots of
        # its small messages packed, so a message cut short finds no trailer of the last run)
        c[_M_SIZE] = at + bound.nbytes + 8 + 8 * nrecv + SPARE + \
            (8 + _small_bytes(bound, bound.nbytes) if PACK_SMALL and at == 0 else 0)
        c[_M_OP], c[_M_TYPE], c[_M_ITEM] = c_op
        c[_M_PLAIN] = self.plain
        c[_M_MID], c[_M_NMID] = mid.ctypes.data, len(mid) - 1
        return c, cin, cout, mid


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
    signature : numpy.uint64 or None
        The word its messages' trailers carry (the call's signature, its call number mixed
        in), which its rounds in Python compare; None for a request started in C (its rounds
        are C's, which compare the run's own word: ``rounds.c``'s ``S_SIGNATURE``).
    keep : tuple or None
        A repeat's on new arrays of its call's shape (``dualmpi.calls._shaped_repeat``): the
        call's arguments, held until the request ends, as mpi4py's request holds its
        buffers: the repeat's copies address them, and a program may pass arrays nothing
        else holds (``net.Iallgather(x, np.empty(n)).Wait()``).
    """

    __slots__ = ("progress", "compiled", "store", "tag", "seq", "what", "recv", "combine", "check",
                 "finish", "stage", "k", "reqs", "peers", "since", "done", "error", "result",
                 "agree_in", "agree_out", "bad", "signature", "call", "known", "modes",
                 "store_mode", "c_state", "c_addr", "c_reqs", "c_mode", "c_call", "keep", "late")

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
        if self.stage == _CROUNDS:
            null = MPI.REQUEST_NULL.handle
            peers = tuple(sorted({peer for h, peer in zip(self.c_reqs.tolist(), self.peers)
                                  if h != null}))
        else:
            peers = tuple(sorted({peer for req, peer in zip(self.reqs, self.peers) if req}))
        name = f"{self.what} (nonblocking request {self.seq})"
        state = self.c_state
        if self.stage == _MODE or (self.stage == _CROUNDS and state is not None and
                                   state[_S_MODE_DUE]):
            return f"rank 0's mode for {name}", (0,), self.since, OTHER_GRACE
        if self.stage in (_AGREE, _ANSWER):
            grace = ROOT_GRACE if self.progress.rank == 0 else OTHER_GRACE
            return f"the argument agreement of {name}", peers, self.since, grace
        where, _, grace = self.round_wait(self.k)
        return where, peers, self.since, grace

    def round_wait(self, i):
        """Return ``(where, peers, grace)`` of a wait in the plan's ``i``-th round (its peers all
        of the round's): 0.1 s of grace per round, as the blocking runner's; ``i`` one past the
        last round: the wait of a run started in C for rank 0's mode."""
        if i == len(self.compiled.rounds):
            return (f"rank 0's mode for {self.what} (nonblocking request {self.seq})", (0,),
                    OTHER_GRACE)
        k, peers = self.compiled.rounds[i][0], self.compiled.rounds[i][5]
        return (f"round {k} of {self.what} (nonblocking request {self.seq})", peers,
                0.1 * min(k, 50))

    def posted(self):
        """Return the requests of the round the compiled step posted and of rank 0's mode when
        the run was started in C (``MPI.Request`` objects on their handles, for a wait from
        Python) and where they are in its request array.

        The round is the one the step's state names, not :attr:`k`: a wait in C
        (``dualmpi_iwait``) posts rounds that Python has not read yet (:meth:`Progress._c_moved`),
        and a request failed then must still cancel them and keep their buffers."""
        null = MPI.REQUEST_NULL.handle
        k = int(self.c_state[_S_K])
        rnd = self.compiled.rounds[k] if 0 <= k < len(self.compiled.rounds) else None
        n = len(rnd[5]) if rnd is not None else 0  # (its messages and payloads' receives)
        handles = self.c_reqs.tolist()
        at = [i for i, h in enumerate(handles[:n]) if h != null]
        nmode = int(self.c_state[_S_NMODE])
        if nmode:
            first = int(self.c_state[_S_MODE_AT])
            at += [i for i in range(first, first + nmode) if handles[i] != null]
        return [MPI.Request.fromhandle(handles[i]) for i in at], at

    def handed_back(self, objs, at):
        """Write the handles of :meth:`posted`'s requests back after a wait (MPI frees a request
        it completes: its object's handle is then ``MPI_REQUEST_NULL``)."""
        for obj, i in zip(objs, at):
            self.c_reqs[i] = obj.handle


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
    wrap : type, optional
        The class of the user's requests (``wrap(progress, plan_request)``: a class with the
        slots ``_progress``, ``_plan`` and ``_active``, as :class:`dualmpi.Request`): with it
        and the compiled extension (:mod:`dualmpi.engine.recall`), :attr:`crestart` starts a
        repeat and returns its request in one C call.
    """

    def __init__(self, transport, cache_size=CACHE_SIZE, wrap=None):
        self.transport = transport
        self.rank = transport.rank
        wd = transport.watchdog
        wd.arm("building the nonblocking collectives' communicators", ())
        try:
            #: the data: nonblocking rounds never match the blocking plans' requests
            self.data = transport.graph.Dup()
            #: the argument agreements (nonblocking control-plane reductions)
            self.ctl = transport.ctl.Dup()
            #: rank 0's modes alone, tagged with their call numbers (:meth:`_probe`)
            self.modes = transport.ctl.Dup()
            #: a request's tag is its number modulo this; a payload sent apart from its trailer
            #: (:class:`_Compiled`) goes with that tag plus :attr:`apart_tag` (the upper half);
            #: a mode's tag is its call number modulo this
            self.tag_ub = self.apart_tag = (int(self.data.Get_attr(MPI.TAG_UB)) + 1) // 2
            #: the others probe for rank 0's modes when every rank's watchdog listens and
            #: a mode's tag tells a call behind from one ahead (:meth:`_probe`); else rank 0
            #: sends its nonblocking notices
            self.probed = bool(self.ctl.allreduce(
                int(wd.comm is not None and self.tag_ub >= EARLY_TAG_UB), op=MPI.MIN))
        finally:
            wd.disarm()
        #: payloads of this many bytes or more go apart (:func:`~dualmpi.engine.mpi.apart_from`),
        #: first in the plans whose ranks do not exchange payloads in a round, then in those that do
        self.apart_from = tuple(apart_from(getattr(transport, "q", 1), e) for e in (False, True))
        #: the compiled step (``rounds.c``'s ``dualmpi_istep``), or None: rounds run in Python
        self._step = self._iwait = self._istart = None
        lib = getattr(transport, "cloop", None)
        if lib is not None and lib.dualmpi_step_fields() == _STEP_FIELDS and \
                lib.dualmpi_future() == FUTURE and \
                lib.dualmpi_start_fields() == _X_FIELDS * 100 + _M_FIELDS and \
                lib.dualmpi_mode_sync() == MODE_SYNC:
            self._step, self._iwait = lib.dualmpi_istep, lib.dualmpi_iwait
            self._istart = lib.dualmpi_istart
            ext = recall.load()
            if ext is not None:  # (called without ctypes' conversions: a microsecond less each)
                def c(fn, nargs, release):
                    return ext.CFunc(ctypes.cast(fn, ctypes.c_void_p).value, nargs, release)

                addrs = tuple(ctypes.cast(fn, ctypes.c_void_p).value
                              for fn in (self._istart, self._step, self._iwait))
                self._step, self._istart = c(self._step, 2, False), c(self._istart, 7, False)
                self._iwait = c(self._iwait, 3, True)  # (it blocks: the watchdog's thread runs)
            self._alarm_code = lib.dualmpi_alarm_code()
            self._mode_code = lib.dualmpi_mode_code()
            self._python_code = lib.dualmpi_python_code()
        self._handles = handle_dtype(lib) if self._step is not None else None
        if self._handles is None:  # pragma: no cover - no such MPI
            self._step = self._iwait = self._istart = None
        size = self.ctl.Get_size()
        #: the mode messages a run started in C holds (rank 0 sends one to every rank)
        self._nmode = size - 1
        if self._step is not None:
            # what dualmpi_iwait hears on the alarm line with (the arrays live with the alarm)
            alarm = transport.alarm
            self._w = np.zeros(_W_FIELDS, dtype=np.int64)
            for field, arr in ((_W_WBUF, alarm.buf), (_W_RING, alarm.ring), (_W_SEQ, alarm.seq),
                               (_W_HIST, alarm.history), (_W_FUTURE, alarm.future)):
                self._w[field] = arr.ctypes.data
            self._w[_W_LINE] = alarm.line.handle if alarm.line is not None else 0
            self._w_addr = self._w.ctypes.data
            # what dualmpi_istart starts a repeat with: the nonblocking notices' own requests
            # and messages (rank 0 sends one to every rank a call; the older ones are done
            # long before a pool of four calls' is used up, else the start is Python's; another
            # rank keeps one for each request whose notice it owes until its first step:
            # NOTES_OWED of them, more started before a step are Python's)
            notes = max(4 * (size - 1), NOTES_OWED)
            self._notes = np.full(notes, MPI.REQUEST_NULL.handle, dtype=self._handles)
            self._note_buf = np.zeros((notes, LINE_WORDS), dtype=np.int64)
            self._x = np.zeros(_X_FIELDS, dtype=np.int64)
            self._x[_X_RANK], self._x[_X_SIZE] = self.rank, size
            self._x[_X_ACOMM], self._x[_X_CTL] = alarm.comm.handle, self.modes.handle
            self._x[_X_I64] = MPI.INT64_T.handle
            self._x[_X_LONG] = MPI._typedict[np.dtype(np.int64).char].handle  # (mpi4py's)
            self._x[_X_NOTES] = notes
            self._x[_X_NOTE_REQS], self._x[_X_NOTE_BUF] = (self._notes.ctypes.data,
                                                          self._note_buf.ctypes.data)
            self._x[_X_EARLY] = self.tag_ub >= EARLY_TAG_UB
            self._x[_X_PROBED], self._x[_X_MODE_TAGS] = self.probed, self.tag_ub
            self._x_addr = self._x.ctypes.data
        self.cache_size = int(cache_size)
        self._cache = OrderedDict()
        #: the request numbers taken (:attr:`_seq`), the repeats started in C and those of them
        #: bound to the user's buffers (:attr:`restarts`, :attr:`zero_copy`): what ``IRestart``
        #: counts in
        self._counts = np.zeros(3, dtype=np.int64)
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
        #: a repeat started in C, its request returned (``recall.c``'s ``IRestart``: what
        #: :meth:`restart` and ``wrap`` do; NotImplemented when :meth:`restart` must), and the
        #: head of :meth:`wait` in C (``IRestart.close``), or None
        self.crestart = self._close = None
        ext = recall.load() if self._istart is not None and wrap is not None else None
        if ext is not None and isinstance(self._istart, ext.CFunc):
            self.crestart = ext.IRestart(
                self, PlanRequest, wrap, self.active, self.known if self.rank == 0 else None,
                IN_FLIGHT, transport.alarm.seq, transport.alarm, transport.watchdog, *addrs,
                self._w_addr, self._x_addr, self.tag_ub,
                (self._python_code, self._alarm_code, self._mode_code, _CROUNDS, _DONE,
                 _S_K, _S_BAD_ROUND, _S_POS),
                POOL_SIZE, Repeat, _Compiled, self._cache, self._counts)
            self._close = self.crestart.close
        # an alarm leaves the communicator unusable: its requests fail with the alarm's text
        transport.alarm.listeners.append(self._alarmed)
        #: the last call number :meth:`_probe` told this rank's line of, and its messages
        self._probed_call, self._told = None, []
        if self.probed:  # rank 0 sends no nonblocking notice: its modes say it
            transport.alarm.probed = True
            if self.rank != 0:
                wd.probes.append(weakref.WeakMethod(self._probe))
        _LIVE.append(self)

    def _count(i, doc):  # (a field of _counts as an int attribute)
        def get(self):
            return int(self._counts[i])

        def put(self, value):
            self._counts[i] = value

        return property(get, put, doc=doc)

    _seq = _count(0, "The next request's number (its messages' tag modulo the tag bound).")
    restarts = _count(1, "Repeats started in C (:meth:`restart`).")
    zero_copy = _count(2, "Repeats started in C bound to the user's buffers.")
    del _count

    def _alarmed(self, text):
        """The communicator became unusable (:mod:`dualmpi.engine.alarm`): fail every request."""
        for req in tuple(self.active):
            self._fail(req, DualmpiError(f"{req.what}: the communicator is unusable: {text}"))

    # -- starting ----------------------------------------------------------------------------
    def start(self, bound, send=None, recv=None, combine=None, agree=None, check=None,
              finish=None, signature=None, what="a nonblocking collective", seq=None,
              call=None, exchanges=False):
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
        exchanges : bool, optional
            A reduction whose ranks exchange payloads in a round: its payloads travel apart
            from their trailers from :data:`~dualmpi.engine.mpi.APART_EXCHANGE` bytes, the
            others' from :data:`~dualmpi.engine.mpi.APART` (:class:`_Compiled`; every rank of
            the call must pass the same: :meth:`Engine.exchanges
            <dualmpi.engine.core.Engine.exchanges>`).
        """
        req = PlanRequest()
        if seq is None:
            seq = self.reserve()
        req.seq = seq
        req.progress, req.what = self, what
        req.tag = req.seq % self.tag_ub
        if bound is None and agree is None:
            raise DualmpiError(f"{what}: a request without a plan needs an agreement")
        comp = req.store = req.signature = req.c_state = req.c_reqs = req.c_mode = None
        req.c_call = None
        if bound is not None:
            comp = self._compiled(bound, signature is not None, bool(exchanges))
            comp.users += 1
            run = self._c_run(comp, combine) if self._step is not None else None
            if run is None:
                store = np.zeros(comp.size, dtype=np.uint8)
            else:  # the compiled step runs the rounds on a run of the plan's pool
                store, req.c_state, req.c_reqs, req.c_addr, req.c_mode = run
            req.store = store
            if signature is not None:
                sig = signature & ((1 << 64) - 1)
                if call is not None:  # (the call number mixed in, as the blocking plans do)
                    sig = call_signature(sig, call)
                req.signature = np.uint64(sig)
                store[comp.sig_at:comp.sig_at + 8].view(np.uint64)[0] = req.signature
                if run is not None:
                    req.c_state[_S_SIGNATURE] = sig - (1 << 64) if sig >> 63 else sig
            if run is not None:
                req.c_state[_S_TAG], req.c_state[_S_RUN] = req.tag, req.seq
            if send is not None:
                for a, b, n in comp.copy_in:
                    store[a:a + n] = send[b:b + n]
        req.compiled = comp
        req.recv, req.combine, req.check, req.finish = recv, combine or _add_bytes, check, finish
        req.done, req.error, req.result, req.bad = False, None, None, None
        req.k, req.reqs, req.peers, req.agree_in, req.late = -1, [], (), None, None
        req.call, req.known, req.modes, req.store_mode, req.keep = call, None, (), None, None
        req.agree_out = None if agree is None else np.asarray(agree, dtype=np.int64).reshape(-1)
        req.stage, req.since = _START, time.monotonic()
        self.active.append(req)
        IN_FLIGHT[0] += 1
        self._advance(req)
        return req

    def restart(self, call, what, seq=None):
        """Start a repeat of a fixed-count call in one C call (``rounds.c``'s ``dualmpi_istart``);
        return its :class:`PlanRequest`, or None when it must start in Python (nothing done).

        With ``seq`` (a number taken with :meth:`reserve`; ``call`` a plain :class:`Repeat`)
        it starts a request without an agreement, as :meth:`start` does without ``agree``:
        no call number, notices nor mode, the copies in and the first round only (a
        v-variant's data).

        ``call`` is a :class:`Repeat` of the call (the plan, argument vector, buffers).  What
        :meth:`~dualmpi.engine.alarm.Alarm.nonblocking`, :meth:`start` and :meth:`_open` do
        for arguments rank 0 has seen agreed, with the same messages (so the ranks may take
        either path): the line drained, the call number taken, the nonblocking notices sent
        (rank 0's only when the others do not probe for its modes: :meth:`_probe`),
        the user's bytes copied in, rank 0's mode sent (rank 0) or its receive posted, and
        the run stepped.  Python starts it instead when there is no compiled step or no C
        combine, when rank 0 has not seen the vector agreed (the agreement), when the line
        holds messages about later calls or brought one Python must read (read here: it may
        raise), or when the notices of earlier calls are not done yet.
        """
        if self._istart is None or call.c is None or (seq is None) == call.plain:
            return None
        if self.rank == 0 and seq is None:
            if call.key not in self.known:
                return None
            self.known.move_to_end(call.key)
        comp = self._zero(call) if call.z_c is not None else None
        if comp is not None and comp.pool:  # zero-copy: the plan bound to the user's buffers
            run, c_addr = comp.pool.pop(), call.z_addr
        else:
            comp, c_addr = self._compiled(call.bound, True, call.exchanges), call.c_addr
            call.comp = comp
            if comp.pool:
                run = comp.pool.pop()
            elif comp.c_plan(self.data, self.apart_tag):
                run = self._new_run(comp)
            else:
                return None
        plain = seq is not None
        seq = self._seq if seq is None else seq
        tag = seq % self.tag_ub
        err = self._istart(comp.c_addr, run[3], self._w_addr, self._x_addr, c_addr, seq, tag)
        if err == self._python_code or err == self._alarm_code:
            if len(comp.pool) < POOL_SIZE:
                comp.pool.append(run)
            if err == self._alarm_code:
                self.transport.alarm.poll(what)
            return None
        if not plain:
            self._seq = seq + 1
        self.restarts += 1
        if c_addr == call.z_addr:
            self.zero_copy += 1
        req = PlanRequest()
        req.seq, req.tag, req.progress, req.what, req.compiled = seq, tag, self, what, comp
        req.store, req.c_state, req.c_reqs, req.c_addr, req.c_mode = run
        # (the compiled step copies the result out: dualmpi_istep; its trailers' word is the
        # run's, which dualmpi_istart mixed with the call number)
        req.signature, req.recv, req.combine = None, None, call.combine
        req.check, req.finish = call.check, call.finish
        req.agree_out = None if plain else call.flat
        req.c_call = call
        req.done = False
        req.error = req.result = req.bad = req.agree_in = req.known = req.store_mode = None
        req.keep = None
        req.reqs, req.peers, req.modes, req.late = [], (), (), None
        req.call = None if plain else int(self.transport.alarm.seq[0])
        req.stage, req.since = _CROUNDS, time.monotonic()
        req.k = None
        comp.users += 1
        self.active.append(req)
        IN_FLIGHT[0] += 1
        self._c_moved(req)
        if err == self._mode_code:
            self._advance(req)
        elif err:
            self._restart_failed(req, err)
        return req

    def part(self, call, what, seq=None):
        """Start a part of a request of several (:class:`dualmpi.calls._Chain`: a v-variant's
        count table, ``seq`` None, or its data, ``call`` a plain :class:`Repeat` with the number
        ``seq`` reserved for it) as :meth:`restart` does, in C when it can (:attr:`crestart`
        with ``seq``: the :class:`PlanRequest` made there too); return its request, or None
        when it must start in Python (nothing done)."""
        if self.crestart is not None:
            req = self.crestart(call, what, seq)
            if req is not NotImplemented:
                return req
        return self.restart(call, what, seq=seq)

    def _restart_failed(self, req, err):
        """The start in C of ``req`` returned the MPI error ``err``: the request fails."""
        self._fail(req, self._mpi_error(req, MPI.Exception(err)))

    def _zero(self, call):
        """Return the :class:`_Compiled` of ``call``'s plan bound to the user's buffers (made
        with its one run on first use, kept in the cache so that its datatypes are freed), or
        None when it left the cache or the compiled step cannot run it (``call`` then copies)."""
        comp = call.z_comp
        if comp is not None:
            if not comp.retired:
                return comp
            call.z_c, call.z_comp = None, None
            return None
        bound, store = call.zero[:2]
        comp = _Compiled(bound, True, store.ctypes.data, self.apart_from[call.exchanges])
        if self.cache_size <= 0 or not comp.c_plan(self.data, self.apart_tag):
            comp.free()
            call.z_c = None
            return None
        comp.pool.append(self._new_run(comp, store))
        self._keep((id(bound), True, call.exchanges), comp)
        call.z_comp = comp
        return comp

    def reserve(self):
        """Take the next sequence number (a request's tag): every rank takes them in one order."""
        counts = self._counts  # (_seq's field, without its property's two frames)
        seq = int(counts[0])
        counts[0] = seq + 1
        return seq

    def _compiled(self, bound, trailer, exchanges):
        """Return the (cached) :class:`_Compiled` of ``bound`` (``exchanges``: its ranks
        exchange payloads in a round, which go apart from their trailers from a larger size)."""
        key = (id(bound), trailer, exchanges)
        comp = self._cache.get(key)
        if comp is not None and comp.bound is bound:
            self._cache.move_to_end(key)
            return comp
        comp = _Compiled(bound, trailer, limit=self.apart_from[exchanges])
        if self.cache_size > 0:
            self._keep(key, comp)
        else:
            comp.retired = True
        return comp

    def _keep(self, key, comp):
        """Cache ``comp`` under ``key`` (the one it replaces and the least recently used past
        :attr:`cache_size` retire: their datatypes are freed once no request runs them)."""
        old = self._cache.pop(key, None)
        if old is not None:
            self._retire(old)
        self._cache[key] = comp
        while len(self._cache) > self.cache_size:
            self._retire(self._cache.popitem(last=False)[1])

    def _c_run(self, comp, combine):
        """Return ``(store, state, requests, state's address, mode)`` of a run of ``comp`` by the
        compiled step (from its pool, else new), or None when its rounds run in Python (a
        message too long for an int count, or combines by an operation MPI does not have).

        The request array has a round's messages, a spare slot (the alarm line, in
        ``dualmpi_iwait``) and the mode messages of a run started in C (:meth:`restart`);
        ``mode`` is where such a run receives rank 0's mode or sends its own."""
        c_op = None
        if comp.combines:
            c_op = _mpi_op(combine) if combine is not None else None
            if c_op is None:
                return None
        if comp.pool:
            run = comp.pool.pop()
            store, state = run[0], run[1]
            if comp.trailer:  # a message cut short must not find the last run's trailers
                store[comp.sig_at + 8:] = 0
        elif comp.c_plan(self.data, self.apart_tag):
            run = self._new_run(comp)
            state = run[1]
        else:
            return None
        state[_S_K], state[_S_BAD_ROUND], state[_S_NMODE], state[_S_NCOUT] = -1, -1, 0, 0
        state[_S_NMID] = state[_S_MODE_DUE] = 0
        if c_op is not None:
            state[_S_OP], state[_S_TYPE], state[_S_ITEM] = c_op
        return run

    def _new_run(self, comp, at=None):
        """Return a new run of ``comp`` (see :meth:`_c_run`); ``at``: the store of a plan bound
        to the user's buffers, whose offsets are addresses (the run's store address is 0)."""
        store = np.zeros(comp.size, dtype=np.uint8) if at is None else at
        state = np.zeros(_S_FIELDS, dtype=np.int64)
        reqs = np.full(comp.width + 1 + self._nmode, MPI.REQUEST_NULL.handle,
                       dtype=self._handles)
        mode = np.zeros(MODE_WORDS, dtype=np.int64)
        state[_S_STORE] = store.ctypes.data if at is None else 0
        state[_S_REQS] = reqs.ctypes.data
        state[_S_MODE_AT], state[_S_MODE] = comp.width + 1, mode.ctypes.data
        return store, state, reqs, state.ctypes.data, mode

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
        _, recvs, sends, move, _, peers, _, late, packs, _ = comp.rounds[i]
        store, data, tag = req.store, self.data, req.tag
        reqs = []
        if req.modes and i == len(comp.rounds) - 1:
            reqs += req.modes
            peers = tuple(range(1, len(req.modes) + 1)) + peers
            req.modes = ()
        for peer, a, b, dtype in recvs:
            reqs.append(data.Irecv([store[a:b], MPI.BYTE] if dtype is None else [store, 1, dtype],
                                   peer, tag))
        for dst, src, n in packs:  # (the small sends' segments into their slots)
            store[dst:dst + n] = store[src:src + n]
        for peer, a, b, dtype, kind in sends:
            reqs.append(data.Isend([store[a:b], MPI.BYTE] if dtype is None else [store, 1, dtype],
                                   peer, tag if kind == _M_SEND else tag + self.apart_tag))
        # (the payloads sent apart: their receives once their trailers, the first, are in)
        req.late = (len(reqs) - len(recvs) - len(sends), late) if late else None
        req.reqs, req.peers = reqs, peers
        req.since = time.monotonic()
        if move is not None:
            _move(store, move)

    def _advance(self, req, stepped=None):
        """Advance ``req`` as far as it goes without blocking; return True once it is done.

        ``stepped``: what the compiled step (or wait) of ``req`` just returned, so that its
        first step here is not made again."""
        try:
            while not req.done:
                if req.late is not None and not self._late(req):
                    return False
                if req.reqs and not MPI.Request.Testall(req.reqs, self._statuses):
                    return False
                stage = req.stage
                if stage == _CROUNDS:
                    if not self._c_rounds(req, stepped):
                        return False
                    stepped = None
                elif stage == _CLOSE:  # (rank 0's mode messages are done too)
                    self._finish(req)
                elif stage == _ROUNDS:
                    rnd = req.compiled.rounds[req.k]
                    combines, trails, store = rnd[4], rnd[6], req.store
                    for dst, src, n in rnd[9]:  # (the small receives' slots, copied out)
                        store[dst:dst + n] = store[src:src + n]
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

    def _late(self, req):
        """Post the receives of ``req``'s payloads sent apart once their trailers (the round's
        first receives, after rank 0's mode messages) are in; return False until then.

        A trailer of the call gets the contiguous receive, another the payload's safe datatype
        (a spare block apart: a longer message is cut short there, not written past)."""
        at, late = req.late
        if not MPI.Request.Testall(req.reqs[at:at + len(late)], self._statuses):
            return False
        store, trails = req.store, req.compiled.rounds[req.k][6]
        for (trail_at, _), (peer, a, b, dtype, safe) in zip(trails, late):
            if store[trail_at:trail_at + 8].view(np.uint64)[0] != req.signature:
                spec = [store, 1, safe]
            else:
                spec = [store[a:b], MPI.BYTE] if dtype is None else [store, 1, dtype]
            req.reqs.append(self.data.Irecv(spec, peer, req.tag + self.apart_tag))
        req.late = None
        return True

    def _rounds(self, req):
        """The arguments hold: post the first round (in C when the request has a compiled step;
        a run started in C may have posted it before rank 0's mode came)."""
        if req.c_state is not None:
            req.stage, req.k, req.peers = _CROUNDS, -1, ()
            self._c_moved(req)
            return
        req.stage = _ROUNDS
        self._post(req, 0)

    def _c_rounds(self, req, err=None):
        """Advance ``req``'s rounds in C (``dualmpi_istep``, unless ``err`` is what the step just
        returned); return True once they are done (or rank 0's mode, heard in C, moved the
        request to another stage)."""
        if err is None:
            err = self._step(req.compiled.c_addr, req.c_addr)
        if err == self._mode_code:
            self._c_mode(req)
            return True
        self._c_moved(req)
        if err:
            raise MPI.Exception(err)
        state, comp, k = req.c_state, req.compiled, req.k
        if k < len(comp.rounds):
            return False
        if state[_S_BAD_ROUND] >= 0 and req.bad is None:
            req.bad = (comp.rounds[int(state[_S_BAD_ROUND])][0], int(state[_S_BAD_PEER]))
        req.k, req.stage, req.peers = len(comp.rounds) - 1, _CLOSE, ()
        if req.modes:  # rank 0: the request ends with its mode messages
            req.reqs, req.peers = list(req.modes), tuple(range(1, len(req.modes) + 1))
            req.modes = ()
        return True

    def _c_moved(self, req):
        """Read where the compiled step left ``req``: its round, that round's peers."""
        k = int(req.c_state[_S_K])
        if k != req.k:  # a round was posted (or the last one ended, or the mode came)
            req.k, req.since = k, time.monotonic()
            comp = req.compiled
            if 0 <= k < len(comp.rounds):
                req.peers = comp.rounds[k][5]

    def _c_mode(self, req):
        """Rank 0's mode, heard by the compiled step of a run started in C, is not "skip" with
        this rank's vector: read it as :meth:`_heard_mode` does (the agreement after all, or
        the alarm); the run's next step goes on from where it is (round 0 posted, or not yet)."""
        req.c_state[_S_MODE_DUE] = 0
        req.agree_in, req.stage = req.c_mode[:2 + req.agree_out.size].copy(), _MODE
        self._heard_mode(req)

    def _open(self, req):
        """Begin the argument check: rank 0 sends every rank its mode (1: skip the agreement,
        its vector known; 0: agree) with the call's number and its vector; the others wait for it.

        On a communicator of rank 0's modes alone (:attr:`modes`), tagged with the call
        number (modulo :attr:`tag_ub`; :attr:`tag_ub` itself for a request without one) and
        received with any tag: rank 0 sends its modes in request order and every other rank
        posts their receives in that order, so a rank's n-th mode is rank 0's n-th, and
        the first one no request of a rank has taken is visible to :meth:`_probe` by its tag.
        The call number tells a rank whose request of that number is another call (one rank
        made a call blocking that the other made nonblocking) at once (:meth:`_heard_mode`).
        """
        vec = req.agree_out
        if self.rank != 0:
            req.agree_in = np.empty(2 + vec.size, dtype=np.int64)
            req.reqs, req.peers = [self.modes.Irecv(req.agree_in, 0, MPI.ANY_TAG)], (0,)
            req.stage, req.since = _MODE, time.monotonic()
            return
        key = vec.tobytes()
        skip = key in self.known
        mode = np.empty(2 + vec.size, dtype=np.int64)
        mode[0], mode[1], mode[2:] = skip, -1 if req.call is None else req.call, vec
        ranks = range(1, self.ctl.Get_size())
        tag = self.tag_ub if req.call is None else req.call % self.tag_ub
        if not skip:
            req.known = key
            self._gather(req, [self.modes.Isend(mode, r, tag) for r in ranks])
            return
        # every MODE_SYNC-th synchronous: that request ends once every rank has started the
        # call (as the agreement's answer ensures), so rank 0 is never more than MODE_SYNC
        # calls ahead beyond the requests the program holds (MPI holds its modes of calls the
        # others have not reached); the others cost no round trip (as rounds.c)
        send = self.modes.Isend if req.seq % MODE_SYNC else self.modes.Issend
        sends = [send(mode, r, tag) for r in ranks]
        self.known.move_to_end(key)
        if req.compiled.rounds:  # waited for with the last round's messages (only there: a
            req.modes = sends    # request whose messages another test completed would wait on)
            req.store_mode = mode
        else:
            self._modes.append((sends, mode))
        self._rounds(req)

    def _probe(self, waiting):
        """Tell this rank's own line of rank 0's nonblocking call that this rank made blocking.

        Called by the watchdog's thread (:meth:`~dualmpi.engine.watchdog.Watchdog.listen`)
        a few times a second while the rank waits in dualmpi (``waiting``: the watchdog's
        state then), on ranks other than 0: rank 0 sends no nonblocking notice (its mode
        says as much), so a rank that made blocking a call rank 0 made nonblocking would
        wait in it for rank 0's messages.  The first of rank 0's modes that no request of
        this rank has taken (``MPI_Iprobe`` with any tag: modes are received in request
        order) names rank 0's call in its tag; when that call is this rank's current call
        or an earlier one, not one of its own nonblocking calls, and the rank was in the
        same wait and call before and after the probe (no start took the mode meanwhile),
        this rank made that call blocking: a nonblocking notice from rank 0 is put on the
        rank's own line, which its wait hears as it heard rank 0's notices (the alarm,
        naming rank 0's call), within a tick or two of the watchdog's thread.
        """
        alarm = self.transport.alarm
        if alarm.broken is not None or self.modes == MPI.COMM_NULL:
            return
        before = int(alarm.seq[0])
        status = MPI.Status()
        if not self.modes.Iprobe(0, MPI.ANY_TAG, status):
            return
        tag = status.Get_tag()
        now = self.transport.watchdog.waiting()
        if tag >= self.tag_ub or int(alarm.seq[0]) != before or now is None or \
                now[:2] != waiting[:2]:
            return
        behind = (before - tag) % self.tag_ub  # (rank 0's call, this many before this rank's)
        t = before - behind
        if behind >= self.tag_ub // 2 or t <= 0 or alarm.ours(t) or t == self._probed_call:
            return  # (rank 0 is ahead, or the call was nonblocking here, or told already)
        self._probed_call = t
        self._told = [(r, m) for r, m in self._told if not r.Test()]
        self._told.append(alarm.tell(t, 0))

    def _heard_mode(self, req):
        """Rank 0's mode is in (a rank other than 0): agree, or compare and run the rounds;
        the alarm when it is rank 0's mode of another call (a call one of the two made blocking)."""
        mode, mine = req.agree_in, req.agree_out
        req.reqs, req.agree_in = [], None
        theirs = int(mode[1])
        if req.call is not None and theirs != req.call:  # (rank 0's request of this number is
            # its call ``theirs``; a request started without a call number compares none)
            alarm = self.transport.alarm
            if theirs > req.call:  # rank 0 made this call a blocking one
                alarm.raise_alarm(MIXED_HERE, 0, what=req.what, seq=req.call)
            alarm.raise_alarm(MIXED, 0, what=req.what, seq=theirs)
        if not mode[0]:
            self._gather(req)
        elif mode[2:].tobytes() == mine.tobytes():
            self._rounds(req)
        else:
            self._differs(req, mode[2:])

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
        if req.c_state is not None:  # every message is done: the run goes back to the pool
            comp = req.compiled
            if not comp.retired and len(comp.pool) < POOL_SIZE:
                comp.pool.append((req.store, req.c_state, req.c_reqs, req.c_addr, req.c_mode))
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
            IN_FLIGHT[0] -= 1
        except ValueError:
            pass
        comp = req.compiled
        if comp is not None:
            comp.users -= 1
            if comp.retired and comp.users == 0:
                comp.free()
        req.store = req.recv = req.finish = req.check = req.combine = req.agree_in = None
        req.c_state = req.c_reqs = req.c_mode = req.c_call = req.keep = None

    def _fail(self, req, exc):
        """End ``req`` with error ``exc``; its posted messages are cancelled or left to finish."""
        pending = [r for r in list(req.reqs) + list(req.modes) if r]
        if req.c_state is not None:  # (a run started in C posts round 0 before rank 0's mode)
            pending += req.posted()[0]
        req.modes = ()
        for r in pending:
            try:
                r.Cancel()
            except MPI.Exception:
                pass
        if pending:  # MPI may still touch the buffers: keep them until they are done (a
            # repeat bound to the user's buffers, c_call, sends and receives there)
            self._orphans.append((pending, (req.store, req.agree_in, req.agree_out,
                                            req.store_mode, req.c_mode, req.c_call)))
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
        rounds = req.compiled.rounds if req.compiled is not None else ()
        where = f"round {rounds[min(req.k, len(rounds) - 1)][0]}" if 0 <= req.k and rounds else \
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
        """Advance the requests until ``req`` is done (blocking meanwhile: :func:`block`, or in C
        when ``req`` is the only request in flight: :meth:`_c_wait`)."""
        return self._wait_rest(req, self._alone(req))

    def _wait_on(self, req, err):
        """The rest of :meth:`wait` after ``IRestart.close`` stepped ``req`` and returned
        ``err`` without ending it (``recall.c``'s ``Request.Wait``: the head of
        :meth:`wait` and :meth:`_alone` in C)."""
        return self._wait_rest(req, self._after_close(req, err))

    def _wait_rest(self, req, alone):
        """:meth:`wait` after :meth:`_alone` returned ``alone``."""
        if alone is True:
            return True
        while type(req) is not PlanRequest and not req.done:
            # (a request of several parts alone in flight: each part waited for and ended in C
            # in turn, the next started by the last one's finish)
            now = getattr(req, "current", None)
            if type(now) is not PlanRequest or now.done or self._alone(now) is not True:
                break
        while not req.done:
            # (a request of several parts, e.g. a v-variant's count table then its data, names
            # the part it runs now: ``current``; the only request in flight on the rank needs
            # no round of progress for the others first)
            now = req if type(req) is PlanRequest else getattr(req, "current", None)
            if IN_FLIGHT[0] != 1 or type(now) is not PlanRequest or now.stage != _CROUNDS or \
                    self.active != [now]:
                poll_all()
                if req.done:
                    break
                now = req if type(req) is PlanRequest else getattr(req, "current", None)
            if type(now) is PlanRequest and now.stage == _CROUNDS and self.active == [now] and \
                    not any(prog.active for prog in _LIVE if prog is not self):
                if self._alone(now) is None:
                    self._c_wait(now)
            else:
                block((), req)
        return req.done

    def _alone(self, req):
        """When ``req`` is the only request in flight, in its compiled rounds: step it, then wait
        for its rounds in C and end it (in C where it can: ``IRestart.close``); return True
        when it ended in C, None when it was not stepped (not alone), else False."""
        err = self._close(req) if self._close is not None else self._first_step(req)
        return self._after_close(req, err)

    def _after_close(self, req, err):
        """:meth:`_alone` after its step of ``req`` returned ``err``."""
        if err is None or err is True or err is False:  # (False: waited for in C, not ended)
            return err
        if err or req.c_state[_S_K] >= len(req.compiled.rounds):
            self._advance(req, err)
        else:
            self._c_wait(req)
        return False

    def _first_step(self, req):
        """Step ``req`` when it is the only request in flight, in its compiled rounds; return
        what the step returned, or None (no step): :meth:`wait`'s head without the extension."""
        if IN_FLIGHT[0] == 1 and type(req) is PlanRequest and req.stage == _CROUNDS and \
                not req.done:
            return self._step(req.compiled.c_addr, req.c_addr)
        return None

    def _c_wait(self, req):
        """Wait for ``req``'s rounds in C (``rounds.c``'s ``dualmpi_iwait``: no Python between
        rounds), under the watchdog, which names the round waited in; then advance it."""
        wd = self.transport.watchdog
        wd.state = self._tracker(req)
        try:
            err = self._iwait(req.compiled.c_addr, req.c_addr, self._w_addr)
        finally:
            wd.disarm()
        self._waited(req, err)

    @staticmethod
    def _tracker(req):
        """The watchdog's state while ``req``'s rounds are waited for in C: it names the round."""
        return Watchdog.tracker(req.c_state[_S_POS:_S_POS + 2], _Rounds(req))

    def _waited(self, req, err):
        """``req``'s rounds were waited for in C (``dualmpi_iwait`` returned ``err``): advance it."""
        self._c_moved(req)  # (the rounds posted meanwhile: a failure must cancel them)
        if err == self._alarm_code:  # the line brought what Python reads (it may raise)
            self.transport.alarm.poll(req.what)
            self._advance(req)
        else:  # (the rounds done, rank 0's mode to read, or an MPI error)
            self._advance(req, err)

    def free(self):
        """Wait for the active requests (their errors stay with them), free the communicators."""
        for req in tuple(self.active):
            try:
                self.wait(req)
            except DualmpiError:
                if self.transport.alarm.broken is None:
                    raise
                # the line brought an alarm: every request has failed with its text
        self.crestart = self._close = None  # (they hold this Progress)
        for comp in self._cache.values():
            comp.retired = True
            if comp.users == 0:
                comp.free()
        self._cache.clear()
        if self in _LIVE:
            _LIVE.remove(self)
        if self._istart is not None:  # the notices sent by dualmpi_istart
            null = MPI.REQUEST_NULL.handle
            notes = [MPI.Request.fromhandle(h) for h in self._notes.tolist() if h != null]
            if notes:
                self.transport.alarm._finish(notes, "freeing the communicator")
                self._notes[:] = null
        # messages cancelled or never matched (requests that failed) keep their buffers alive
        _ABANDONED.extend(orphan for orphan in self._orphans + self._modes
                          if not _quiet_testall(orphan[0]))
        self._orphans, self._modes = [], []
        self.transport.watchdog.unprobe(self._probe)  # (before its communicator goes)
        _ABANDONED.extend(([r], m) for r, m in self._told if not r.Test())
        self._told = []
        if self.data != MPI.COMM_NULL:
            self.data.Free()
            self.ctl.Free()
            self.modes.Free()


class _Rounds:
    """The rounds of a request waited for in C, as the watchdog's tracker reads them:
    ``(where, peers, grace)`` per position (made when read: the watchdog reads one)."""

    __slots__ = ("req",)

    def __init__(self, req):
        self.req = req

    def __len__(self):
        return len(self.req.compiled.rounds) + 1  # (one past the rounds: rank 0's mode)

    def __getitem__(self, i):
        return self.req.round_wait(i)


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

    A plan request or compiled neighbourhood exchange with nothing posted (its rounds ended in
    the start in C, or every message it posted done: its next round, or a payload sent after
    its header, still to be posted) waits for nothing but a step: then this returns -1 at once,
    so the caller's next :func:`poll_all` advances it, rather than waiting for the other
    requests (which may wait for ranks that have left, having finished the one waited for).
    """
    reqs, owners, alarms, handed = [], [], [], []
    # (a line among ``extra`` is the caller's: a blocking call waits on it, and reads it)
    lines = {req.handle for req in extra} if extra else ()
    for prog in _LIVE:
        for req in prog.active:
            if type(req) is PlanRequest and req.stage == _CROUNDS or \
                    getattr(req, "handed", False):  # (its round's requests, made from the
                # compiled step's handles, or a compiled neighbourhood exchange's; other kinds of
                # request hold a list)
                objs, at = req.posted()
                handed.append((req, objs, at))
                reqs += objs
                owners += [req] * len(objs)
                ready = not objs
            else:
                objs = req.reqs
                reqs += objs
                owners += [req] * len(objs)
                ready = not objs and type(req) is PlanRequest
            if ready and not req.done and not prog._busy:
                for own, objs, at in handed:  # ready for a step: none of it is waited for
                    own.handed_back(objs, at)
                return -1
        alarm = prog.transport.alarm
        if prog.active and alarm.line is not None and alarm not in alarms and \
                alarm.line.handle not in lines:
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
        try:
            i = MPI.Request.Waitany(reqs, status)
        finally:
            for req, objs, at in handed:
                req.handed_back(objs, at)
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


def beside(reqs, status=None):
    """Wait for one of ``reqs`` as ``MPI_Waitany`` does, advancing every request in flight.

    For a blocking call's own waits (:func:`dualmpi.engine.inflight.waitany`, installed in
    :data:`~dualmpi.engine.inflight.BESIDE`): MPI's progress rule, so a rank that blocks in a
    collective, an agreement or a point-to-point call still forwards the rounds of the
    nonblocking requests it has started.  Returns the index in ``reqs`` of the request that
    completed (its status in ``status``), or ``MPI.UNDEFINED`` when none of them is active.
    The caller's watchdog state stays as it is: the wait is the caller's.  An alarm heard on
    another communicator's line fails that communicator's requests, not the caller's call.
    """
    while True:
        i, done = MPI.Request.Testany(reqs, status)
        if done:
            return i
        poll_all()
        if not IN_FLIGHT[0]:
            return MPI.Request.Waitany(reqs, status)
        try:
            i = block(reqs, None, status)
        except DualmpiError:
            # an alarm on the line of another communicator with requests in flight (the
            # caller's own line is among ``reqs``): that one is unusable now and its requests
            # have failed (their Wait raises); the caller's call goes on
            continue
        if i >= 0:
            return i


BESIDE[0], ADVANCE[0] = beside, poll_all
