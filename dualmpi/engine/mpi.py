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

import ctypes
import dataclasses
import time
import zlib

import numpy as np
from mpi4py import MPI

from ..errors import DualmpiError
from . import inflight, recall
from .alarm import FUTURE, MISMATCH, MPI_FAILED, Alarm
from .core import copy_segments
from .layout import describe
from .plan import SPARE, held_slots, relocated
from .watchdog import Watchdog

__all__ = ["MPITransport", "MPIRunner", "StreamRunner", "rank_graph", "pair",
           "handle_dtype", "APART", "APART_SHARED", "APART_EXCHANGE",
           "apart_from"]

_TAG_MOD = 1 << 15

#: A message whose payload has this many bytes or more travels as two: the payload alone
#: (contiguous when it is one segment, where payload and trailer in one hindexed message are
#: copied through Open MPI's buffers), with the round's tag plus :data:`_TAG_MOD`, and its
#: 8-byte trailer with the round's tag.  The receiver starts the payload's receive only once
#: the trailer is in and carries the call's signature (``rounds.c``: ``A_NFIRST``,
#: ``A_NLATE``), so a payload is received only from a rank in the same call, whose length is
#: the one expected: a longer message cut short by MPI is written past a contiguous receive
#: buffer by Open MPI 5.0 above its eager limit (measured: a 32,000-byte message into an
#: 8-byte receive wrote 31,992 bytes past it), and the trailer's own receive has room for 8
#: bytes more in a second block apart from it (two blocks: no such write; two adjacent blocks
#: are one to MPI, and were written past).  Ranks that disagree on a message's length fail,
#: named: a trailer alone where a whole message was due leaves that message's trailer stale
#: ("another call"), a whole message where a trailer was due is cut short
#: (``MPI_ERR_TRUNCATE``).  The rule is the payload's length, which sender and receiver agree
#: on (not its segments, which differ between their stores), in every plan (from
#: :data:`APART_EXCHANGE` in a reduction whose ranks exchange in a round; in :func:`pair`'s
#: merged plans the payload is the second plan's segments, the first's travel with the
#: trailer).
#: Measured on 2 ranks of one machine (Sendrecv, medians of 9 × 20, load 7.6): a payload and
#: its trailer in one hindexed message 9.3, 20.0 and 238.8 µs at 16 KiB, 64 KiB and 1 MiB;
#: apart 10.4, 14.3 and 131.5; the payload alone 6.8, 10.7 and 122.7 (received into two
#: blocks: as slow as one hindexed message).  From 32 KiB at first; since 4 KiB, Open MPI's
#: shared-memory eager limit (``btl_sm_eager_limit``: a longer contiguous message is copied
#: once, by the receiver), with the repeats bound to the user's buffers from there too
#: (``dualmpi.calls.ZERO_COPY_ABOVE``): on Q_1 the fixed-count calls of 4-24 KiB took
#: 1.2-2.2x MPI's time as one message from the store, 0.7-1.1x apart from the user's
#: buffers (docs/performance.md, "Payloads apart from their trailers").  The nonblocking
#: plans send theirs apart alike (:class:`dualmpi.engine.nonblocking.Progress`: the payload
#: with the request's tag plus ``apart_tag``; a payload whose trailer names another call is
#: received with a spare block apart from it, so it is cut short there).
APART = 1 << 12

#: :data:`APART` with several nodes per rank, where no repeat is bound to the user's buffers
#: and a message of several blocks leaves the store as several segments, hindexed apart or
#: not: 32 KiB, as before the change to 4 KiB (measured on 2 ranks of ``dualcube:r=2``, 16
#: nodes each, blocks of 4 KiB: 1.07-1.30x the time of whole messages).
APART_SHARED = 1 << 15

#: :data:`APART` for a reduction whose ranks exchange payloads in a round (``Allreduce`` by
#: recursive doubling or reduce-scatter and allgather, ``Reduce_scatter_block``:
#: :meth:`ArraySchedule.exchanges <dualmpi.engine.arrays.ArraySchedule.exchanges>`), where
#: both ends of a link wait for a trailer before they start the payload's receive: measured on
#: Q_1 (``benchmarks/engine.py``, ``Allreduce``, ``Reduce_scatter_block`` and their
#: nonblocking forms, three jobs of each alternating with whole messages, 15 repeats, load
#: 0.8-1.0), split against whole 1.17-1.30x the time at 4 KiB, 0.84-1.09x at 32 KiB,
#: 0.67-0.82x at 64 KiB, 0.61-0.74x at 256 KiB, 0.44-0.50x at 1 MiB (docs/performance.md,
#: "An exchange's payloads apart").
APART_EXCHANGE = 1 << 15


#: The bytes up to which the compiled loop sends a message with ``MPI_Isend`` instead of
#: starting its persistent request: Open MPI sends a message that small from ``MPI_Isend``
#: straight into the receiver's shared-memory queue (its BTL's inline send, up to
#: ``btl_sm_max_inline_send``: 256 bytes), which a persistent request's ``MPI_Start`` does
#: not.  Measured on 2 ranks (``benchmarks/start_or_isend.py``: a C loop of ``MPI_Start`` of a
#: receive, the send, ``MPI_Waitall``; docs/performance.md, "Small sends made with
#: MPI_Isend"): an exchange of 8-256 contiguous bytes took 0.53-0.69 of its time with
#: ``MPI_Isend``, of 64-256 bytes in 2 or 9 hindexed segments 0.84-0.93; from 264 bytes
#: 0.99-1.12, the two alike.
IMMEDIATE = 256

#: Messages of at most :data:`IMMEDIATE` bytes whose segments (the payload's and the trailer's)
#: are not one run of memory travel packed: the compiled loop copies a send's segments into a
#: slot of the runner's ``_small`` array and sends that with ``MPI_Isend``, and a receive lands
#: whole in such a slot, copied to its segments (the trailer too) once the round's messages are
#: in.  Open MPI sends a contiguous message that small straight into the receiver's queue and
#: takes a derived datatype through its convertor: measured in C on 2 ranks (an exchange each
#: way, copies included: ``benchmarks/start_or_isend.py --packed``), 0.78-0.86x the time of the
#: hindexed message at 16-256 bytes in 2 or 9 segments, 0.92-0.99x at 0.5-1 KiB, where the
#: sends are persistent and stay as they are (docs/performance.md, "Small messages packed").
#: Local to each end: the bytes on the wire are the same.
PACK_SMALL = True


def _runs(at, n):
    """Return how many runs of memory the segments ``(at, n)`` (lists) make, adjacent ones
    joined.

    >>> _runs([0, 8], [8, 8]), _runs([0, 16], [8, 8]), _runs([8], [8])
    (1, 2, 1)
    """
    return sum(1 for i in range(len(at)) if i == 0 or at[i] != at[i - 1] + n[i - 1])


def joined(at, n):
    """Return the segments ``(at, n)`` (lists) with adjacent ones joined: a message of a
    payload and the trailer right after it is one contiguous run, not a derived datatype.

    >>> joined([0, 8, 32], [8, 8, 4])
    ([0, 32], [16, 4])
    """
    if len(at) < 2 or _runs(at, n) == len(at):
        return at, n
    out, size = [at[0]], [n[0]]
    for a, m in zip(at[1:], n[1:]):
        if a == out[-1] + size[-1]:
            size[-1] += m
        else:
            out.append(a)
            size.append(m)
    return out, size


def apart_from(q, exchanges=False):
    """Return the payload bytes from which a message travels apart from its trailer with
    ``q`` nodes per rank (the same on every rank), in a plan whose ranks exchange payloads in
    a round when ``exchanges`` (a reduction: :data:`APART_EXCHANGE`).

    >>> apart_from(1), apart_from(4), apart_from(1, exchanges=True)
    (4096, 32768, 32768)
    """
    limit = APART if q == 1 else APART_SHARED
    return max(limit, APART_EXCHANGE) if exchanges else limit

#: Memory of runners freed after an alarm, which started receives may still write into.
ABANDONED = []

# The compiled loop's argument array (dualmpi/engine/rounds.c: the enum of its fields).
(_A_NROUNDS, _A_NREQ, _A_REQS, _A_NMOVE, _A_MOVES, _A_STORE, _A_PROGRESS, _A_BASE, _A_NRECV,
 _A_TRAIL, _A_SIGNATURE, _A_FLAGS, _A_NPRE, _A_PRE, _A_NPOST, _A_POST, _A_CALLS, _A_NMID, _A_MID,
 _A_SEQ, _A_SIGWORD, _A_WBUF, _A_RING, _A_INDEX, _A_TBASE, _A_NCOMB, _A_COMBS, _A_OP, _A_TYPE,
 _A_ITEM, _A_HIST, _A_FUTURE, _A_INFLIGHT, _A_HOOK, _A_NFIRST, _A_NLATE, _A_TFIRST, _A_SCRATCH,
 _A_NIMM, _A_IMM, _A_COMM, _A_NPACK, _A_PACK, _A_NUNPACK, _A_UNPACK, _A_FIELDS) = range(46)
#: Flags of a compiled call: its first segment (advance the call number, write the signature),
#: check the trailers after each round, count the call, wait on the alarm line too.
_F_START, _F_CHECK, _F_COUNT, _F_WATCH = 1, 2, 4, 8
#: What the compiled loop returns when the alarm line brought a message (rounds.c), and when
#: its wait beside requests in flight raised (:mod:`dualmpi.engine.inflight`).
_ALARM, _HOOK = -2147483647, -2147483646
#: Mixes the call number into a call's signature (rounds.c: call_signature).
_MIX = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1


def call_signature(base, seq):
    """Return the trailer of call number ``seq`` of a plan whose signature is ``base``.

    >>> call_signature(0, 1) == _MIX
    True
    """
    return (base ^ (seq * _MIX)) & _MASK

#: Graces past the deadline (s): a rank waiting in a round fires first (0.1 s per round, at most
#: 5 s: it knows whom it waits for), then rank 0 waiting in the control plane (it lists the ranks
#: that have not answered), last the other ranks waiting for rank 0.
ROOT_GRACE, OTHER_GRACE = 5.5, 8.0

#: Grace past the deadline (s) for the ranks to arrive at a communicator's set-up: ranks start
#: at different times (imports, a loaded or oversubscribed host), and the set-up is the first
#: wait that spans them all.  A rank that never arrives still ends the job, later.
STARTUP_GRACE = 30.0

#: Tag of the roll call on dualmpi's control communicator when a :class:`MPITransport` is built.
ROLL_TAG = 32000


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
        label = f"rank {self.rank}" + (f" (nodes {self.rank * q}..{self.rank * q + q - 1})"
                                       if q > 1 else f" (node {self.rank})")
        self.watchdog = Watchdog(label, watchdog, comm.Abort)
        # every message of dualmpi travels on communicators of its own, never on the user's:
        # a user's message in flight (any tag, ANY_SOURCE receives) is never taken for ours
        self.watchdog.arm("the set-up of dualmpi.Comm (duplicating the ranks' communicator: "
                          "has every rank called dualmpi.Comm?)", (), grace=STARTUP_GRACE)
        #: the control plane (barriers, verdicts, timings): messages through rank 0, so a wait
        #: can always name the ranks that have not answered
        self.ctl = comm.Dup()
        self.watchdog.listen(self.ctl.Dup())  # the watchdogs ask each other before aborting
        self.watchdog.disarm()
        self._roll_call(self.ctl)
        self.watchdog.arm("building the graph communicator", ())
        #: the alarm line (:mod:`dualmpi.engine.alarm`): argument checks and errors that wake
        #: the ranks waiting in a round
        self.alarm = Alarm(self.ctl, self.watchdog)
        self.graph = self.ctl.Create_dist_graph_adjacent(self.peers, self.peers, reorder=False)
        if self.graph.Get_rank() != self.rank:  # pragma: no cover - reorder=False guarantees it
            raise DualmpiError("the graph communicator renumbered the ranks")
        #: the tag added to a round's for a payload sent apart from its trailer (:data:`APART`),
        #: or None when the MPI library's tags do not reach that far (MPI promises 32767)
        self.apart_tag = _TAG_MOD if int(self.graph.Get_attr(MPI.TAG_UB)) >= 2 * _TAG_MOD - 1 \
            else None
        self._peer_set = frozenset(self.peers)
        #: point-to-point calls of the user get their own context: they never match the plans'
        self.p2p = self.graph.Dup()
        host = self.ctl.Split_type(MPI.COMM_TYPE_SHARED)
        #: ranks sharing this rank's host (and its memory)
        self.host_ranks = host.Get_size()
        host.Free()
        self.watchdog.disarm()
        from . import cloop

        #: the compiled round loop (:mod:`dualmpi.engine.cloop`), or None: rounds run in Python
        self.cloop = cloop.load(MPI.Get_library_version())
        #: the compiled loop's position and call count, read by the watchdog thread
        self.progress = np.zeros(2, dtype=np.int64)
        #: the fields of a compiled loop's argument block every runner shares (:func:`_shared_row`)
        self.shared_row = _shared_row(self.alarm, self.progress, self.cloop)

    def _roll_call(self, comm):
        """Every rank checks in with rank 0 before the collective set-up, so a rank that never
        arrives is named (tag :data:`ROLL_TAG` on dualmpi's own duplicate of the user's
        communicator: no user message can match it)."""
        wd, size = self.watchdog, comm.Get_size()
        token = np.zeros(1, dtype=np.int8)
        if self.rank == 0:
            reqs = [comm.Irecv(np.zeros(1, dtype=np.int8), r, ROLL_TAG) for r in range(1, size)]
            pending = list(range(1, size))
            while pending:
                wd.arm("the set-up of dualmpi.Comm", tuple(pending), grace=ROOT_GRACE)
                for i in MPI.Request.Waitsome(reqs) or []:
                    pending.remove(i + 1)
            wd.disarm()
            MPI.Request.Waitall([comm.Isend(token, r, ROLL_TAG) for r in range(1, size)])
        else:
            wd.arm("the set-up of dualmpi.Comm (checking in with rank 0)", (0,), grace=OTHER_GRACE)
            comm.Send(token, 0, ROLL_TAG)
            comm.Recv(token, 0, ROLL_TAG)
            wd.disarm()

    def prepare(self, bound, plan, verify=False, shape=None, drop=None, signature=0,
                layout=None, buffers=None, combine=None, store=None, exchanges=False):
        """Return an :class:`MPIRunner` of ``bound`` (options: see :class:`MPIRunner`).

        ``buffers=(send, recv)`` (uint8 arrays, with ``layout``) binds the plan to those
        buffers: see :class:`MPIRunner`.  ``combine(src, dst)`` applies a reduction's
        operator (default: bytes added modulo 256).  ``store(n)``: where the runner's store
        of ``n`` bytes comes from (default: new zeroed memory).  ``exchanges``: a reduction whose
        ranks exchange payloads in a round, which travel apart from their trailers from
        :data:`APART_EXCHANGE` bytes (:func:`apart_from`).
        """
        for rnd in bound.rounds:
            for peer, _, _ in rnd.sends + rnd.recvs:
                if peer not in self._peer_set:  # pragma: no cover - plans follow the links
                    raise DualmpiError(f"rank {self.rank} would exchange with rank {peer}, "
                                       "which plays no neighbour of its nodes")
        return MPIRunner(self, bound, plan, verify, shape, drop, signature, layout, buffers,
                         combine, store, exchanges=exchanges)

    def run_once(self, plan, layout, signature, send, recv, combine=None, exchanges=False):
        """Run one call of ``plan`` without a runner (:func:`dualmpi.engine.once.run_once`,
        which says what it returns); None when it cannot (the plan keeps no shape, no compiled
        loop, a combine the loop does not apply)."""
        from .once import Once, run_once

        once = Once.of(plan)
        if once is None:
            return None
        return run_once(self, once, layout, signature, send, recv, combine,
                        apart_from(plan.q, exchanges))

    def prepare_stream(self, plan, nbytes):
        """Return a :class:`StreamRunner` of the streamed total exchange."""
        return StreamRunner(self, plan, nbytes)

    def control(self, what, call, *args):
        """Run a blocking call (a point-to-point wait) under the watchdog."""
        self.watchdog.arm(what, ())
        try:
            return call(*args)
        finally:
            self.watchdog.disarm()

    def allreduce(self, send, recv, op, what="a control-plane reduction"):
        """Combine numpy array ``send`` over the ranks into ``recv`` (control data only).

        Rank 0 gathers every rank's array, waiting under the watchdog with the list of
        ranks that have not sent yet (so a stopped rank is named), combines them and
        sends the result back; the other ranks wait for rank 0 with a longer grace, so
        rank 0's diagnostic is the one printed.  ``op``: ``MPI.SUM``, ``MAX`` or ``MIN``.
        """
        ctl, wd, me = self.ctl, self.watchdog, self.rank
        size = ctl.Get_size()
        send = np.ascontiguousarray(send)
        if op == MPI.SUM:
            combine = np.add
        elif op == MPI.MAX:
            combine = np.maximum
        elif op == MPI.MIN:
            combine = np.minimum
        else:
            raise DualmpiError(f"control-plane reductions take MPI.SUM, MAX or MIN, not {op}")
        tag = 77
        if me == 0:
            parts = [np.empty_like(send) for _ in range(size - 1)]
            reqs = [ctl.Irecv(parts[r - 1], r, tag) for r in range(1, size)]
            pending = list(range(1, size))
            while pending:
                wd.arm(what, tuple(pending), grace=ROOT_GRACE)
                if inflight.IN_FLIGHT[0]:  # (keeps the requests in flight moving)
                    done = (inflight.waitany(reqs),)
                else:
                    done = MPI.Request.Waitsome(reqs) or []
                wd.disarm()
                for i in done:
                    pending.remove(i + 1)
            out = send.copy()
            for part in parts:
                combine(out, part, out=out)
            wd.arm(f"{what} (sending the result)", tuple(range(1, size)), grace=ROOT_GRACE)
            inflight.waitall([ctl.Isend(out, r, tag) for r in range(1, size)])
            wd.disarm()
            recv[...] = out.reshape(recv.shape)
        else:
            wd.arm(f"{what} (sending to rank 0)", (0,), grace=OTHER_GRACE)
            if inflight.IN_FLIGHT[0]:
                out = np.empty_like(recv)
                inflight.waitall([ctl.Isend(send, 0, tag), ctl.Irecv(out, 0, tag)])
                recv[...] = out
            else:
                ctl.Send(send, 0, tag)
                wd.arm(f"{what} (waiting for rank 0's answer)", (0,), grace=OTHER_GRACE)
                ctl.Recv(recv, 0, tag)
            wd.disarm()

    def barrier(self, what="a barrier"):
        """Synchronise the ranks through rank 0 (see :meth:`allreduce`)."""
        one = np.zeros(1, dtype=np.int8)
        self.allreduce(one, one.copy(), MPI.MAX, what)

    def free(self):
        """Stop the watchdog and free the graph communicator."""
        self.watchdog.close()
        if self.graph != MPI.COMM_NULL:
            self.alarm.free()
            self.ctl.Free()
            self.p2p.Free()
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

    Every message also carries the call's ``signature`` (8 bytes, from one word of the
    store shared by all sends); a receiver that gets another signature — ranks running
    different calls, e.g. one rank passing a buffer of another size — raises
    :class:`~dualmpi.errors.DualmpiError` instead of returning wrong data.

    With ``buffers=(send, recv)`` (one node per rank) the runner is *zero-copy*: the slots
    of the blocks the rank starts with are the user's send buffer, those it delivers are
    the receive buffer, and the requests address them directly (``MPI_BOTTOM`` and
    absolute addresses), so nothing is copied in or out but a rank's own block; its store
    holds only the other slots (:func:`~dualmpi.engine.plan.held_slots`) and :attr:`bound` is
    the plan it runs (segments at absolute addresses, ``slot_offset`` the slots' offsets in the
    store, -1 for those in the user's buffers).  It runs only with those very buffers (the
    engine caches it by their addresses).  ``absolute=True`` without ``buffers``: ``bound`` is already at
    absolute addresses (a zero-copy runner's plan merged with another, :func:`pair`); the
    store holds the call's signature and trailers only.

    A message whose payload has :data:`APART` bytes or more (:data:`APART_SHARED` with several
    nodes per rank) goes as its payload and its trailer apart; with ``exchanges`` (a reduction
    whose ranks exchange payloads in a round: :meth:`Engine.exchanges
    <dualmpi.engine.core.Engine.exchanges>`) from :data:`APART_EXCHANGE` bytes
    (:func:`apart_from`).
    ``heads``: ``{(round index, peer, is_send): n}``, the last ``n`` segments of a message
    travel with its trailer, not with the payload, which goes apart as any other from
    :func:`apart_from`'s bytes (:func:`pair`: the count table's rows in a merged plan's
    messages, so the payload apart is the plan's blocks alone; with the rows in it, several
    segments, the merged v-variants took 1.3–1.6 of the time whole).  Every rank
    of a call decides alike (its collective, its schedule, the payload's length).
    """

    #: True once the engine has dropped it from its cache or freed it (:meth:`Engine.lease
    #: <dualmpi.engine.core.Engine.lease>`)
    ended = False

    def __init__(self, transport, bound, plan, verify=False, shape=None, drop=None, signature=0,
                 layout=None, buffers=None, combine=None, store=None, absolute=False,
                 exchanges=False, heads=None):
        self.transport, self.bound, self.plan = transport, bound, plan
        #: a reduction's ``combine(src, dst)`` (None: no reduction)
        self.combine = combine
        self._c_fn = None
        #: collectives one run counts as in the statistics (a merged pair's: two)
        self.parts = 1
        #: ``{id(first): (first, merged runner or None)}``: this runner's plan merged with
        #: another's (:func:`pair`), freed with it
        self.companions = {}
        self.checksum_failures = 0
        self.verify, self.shape = verify, shape
        graph = transport.graph
        nmsg = sum(len(r.sends) + len(r.recvs) for r in bound.rounds)
        nrecv = sum(len(r.recvs) for r in bound.rounds)
        extra = 8 * nmsg if verify else 0
        sig_at = bound.nbytes + extra
        if buffers is not None:  # the store holds only the slots not in the user's buffers
            where, seeded, held_at, held = held_slots(bound, plan, *buffers)
            sig_at = held
        # (and 8 bytes 8 after the trailers: the second block of a lone trailer's receive,
        # apart from every trailer, else MPI takes the two blocks for one)
        size = sig_at + 8 + 8 * nrecv + SPARE
        # every byte is written before it is read: a call's signature, the trailers and
        # slots received into (a zero-copy store has no block the rank starts with)
        self.store = np.zeros(size, dtype=np.uint8) if store is None else store(size)[:size]
        #: the plan's signature; a call's messages carry it mixed with the call number
        self.signature = signature & _MASK
        self._sig_word = self.store[sig_at:sig_at + 8].view(np.uint64)
        self._sig_addr = self.store.ctypes.data + sig_at
        self._trailers = self.store[sig_at + 8:].view(np.uint64)
        #: trailers received per round (they follow one another in the trailer array)
        self._nrecv = [len(rnd.recvs) for rnd in bound.rounds]
        self.alarm = transport.alarm
        self._senders = []
        trail_at = sig_at + 8
        self.absolute = buffers is not None or absolute
        self._own, self._seeds = [], []
        #: the user's (send, recv) uint8 arrays a zero-copy runner is bound to (None between
        #: calls for a runner its caller runs only on arrays at their addresses:
        #: dualmpi.Comm's runners at an address set), and their data addresses
        self.buffers = buffers
        self.bound_at = None if buffers is None else tuple(
            None if b is None else b.ctypes.data for b in buffers)
        #: other runners' stores this one's segments address (a merged zero-copy runner's)
        self.stores = ()
        if buffers is not None:
            bound, self._own, self._seeds = relocated(bound, plan, layout, *buffers, where,
                                                      seeded, held_at, self.store.ctypes.data)
            # what runs: segments at absolute addresses; slots at their offsets in the store
            self.bound = dataclasses.replace(bound, nbytes=held, slot_offset=held_at)
        if self.absolute:
            base = self.store.ctypes.data
            sig_at, trail_at = base + sig_at, base + trail_at
        self._types, self._reqs, self._loop, self._checks = [], [], [], []
        crc_at = bound.nbytes
        drop_round = None
        if drop is not None and drop[1] // plan.q == plan.rank:
            drop_round = drop[0]
        movers = _movers(self.store, bound)
        limit = apart_from(plan.q, exchanges)
        apart = getattr(transport, "apart_tag", None)
        #: the tag added to a payload's sent apart from its trailer (None: every message whole)
        self.apart_tag = apart
        #: the payload bytes from which a message travels apart from its trailer
        self.apart_limit = limit
        spare_at = trail_at + 8 * nrecv + 8
        #: per round: the receives of lone trailers first, of payloads sent apart last (their
        #: counts), and those trailers' places among the round's (:data:`APART`)
        self._apart = []
        #: per round: the sends of at most :data:`IMMEDIATE` bytes (the last of the round's
        #: before its late receives), ``(address, count, datatype, peer, tag)``, which the
        #: compiled loop makes with ``MPI_Isend`` (their persistent requests are the Python
        #: loop's), and their persistent requests (by id)
        self._imm, self._imm_reqs = [], set()
        #: small messages packed (:data:`PACK_SMALL`): per round the copies of the sends'
        #: segments into their slots of :attr:`_small` (before they leave) and of the
        #: receives' slots to their segments (once the round's messages are in, before the
        #: trailers are read), ``(destination, source, length)`` at addresses
        self._pack, self._unpack = [], []
        pack = PACK_SMALL and not verify
        self._small = np.empty(_small_bytes(bound, sig_at, drop_round) if pack else 0,
                               dtype=np.uint8)
        small_at, small = 0, self._small.ctypes.data
        store_at = 0 if self.absolute else self.store.ctypes.data
        for rnd, move in zip(bound.rounds, movers):
            reqs, checks, crcs, immediate, imm_rows = [], [], [], [], []
            packs, unpacks = [], []
            first, late, places = [], [], []
            tag = rnd.index % _TAG_MOD
            peers = tuple(peer for peer, _, _ in rnd.recvs)
            # (each message's segments as lists, its checksum's and trailer's appended)
            for j, (peer, offs, lens) in enumerate(rnd.recvs):
                at, n = offs.tolist(), lens.tolist()
                if verify:
                    checks.append((offs, lens, crc_at))
                    at.append(crc_at)
                    n.append(4)
                    crc_at += 8
                self._senders.append((rnd.index, peer))
                h = len(at) - heads.get((rnd.index, peer, False), 0) if heads else len(at)
                if apart is not None and not verify and sum(n[:h]) >= limit:
                    places.append(j)
                    first.append(graph.Recv_init(
                        self._spec(at[h:] + [trail_at, spare_at], n[h:] + [8, 8]), peer, tag))
                    late.append(graph.Recv_init(self._spec(at[:h], n[:h]), peer, tag + apart))
                else:
                    at.append(trail_at)
                    n.append(8)
                    size = sum(n)
                    if pack and 8 < size <= IMMEDIATE:  # (received whole, then copied out)
                        src = small + small_at
                        for a, m in zip(at, n):
                            unpacks.append((store_at + a, src, m))
                            src += m
                        # (the slot and the spare block apart: a longer message of another
                        # call is cut short, never written past the slot)
                        spec = self._spec([small + small_at, store_at + spare_at], [size, 8],
                                          absolute=True)
                        small_at += size
                    elif _runs(at, n) == 1:  # (a trailer alone: the spare block apart too)
                        spec = self._spec(at + [spare_at], n + [8])
                    else:
                        spec = self._spec(at, n)
                    reqs.append(graph.Recv_init(spec, peer, tag))
                trail_at += 8
            for peer, offs, lens in rnd.sends:
                if rnd.index == drop_round:
                    continue
                at, n = offs.tolist(), lens.tolist()
                if verify:
                    crcs.append((offs, lens, crc_at))
                    at.append(crc_at)
                    n.append(4)
                    crc_at += 8
                h = len(at) - heads.get((rnd.index, peer, True), 0) if heads else len(at)
                whole = not (apart is not None and not verify and sum(n[:h]) >= limit)
                if not whole:
                    reqs.append(graph.Send_init(self._spec(at[:h], n[:h]), peer, tag + apart))
                    at, n = at[h:] + [sig_at], n[h:] + [8]  # the trailer's message
                else:
                    at.append(sig_at)
                    n.append(8)
                spec = self._spec(at, n)
                req = graph.Send_init(spec, peer, tag)
                size = sum(n)
                if size <= IMMEDIATE:  # (the compiled loop sends it with MPI_Isend)
                    immediate.append(req)
                    # (packed: from a slot its segments are copied to; _small_bytes' rule)
                    if pack and whole and _runs(at, n) > 1:
                        dst = small + small_at
                        imm_rows.append((dst, size, MPI.BYTE.handle, peer, tag))
                        for a, m in zip(at, n):
                            packs.append((dst, store_at + a, m))
                            dst += m
                        small_at += size
                    else:
                        imm_rows.append(_raw(spec) + (peer, tag))
                else:
                    reqs.append(req)
            self._apart.append((len(first), len(late), places))
            self._pack.append(packs)
            self._unpack.append(unpacks)
            self._imm.append(imm_rows)
            self._imm_reqs.update(id(req) for req in immediate)
            reqs = first + reqs + immediate + late
            hold = 0.0
            if shape is not None:
                ts, tw, th = shape
                hold = sum(ts + tw * int(lens.sum()) + th for _, _, lens in rnd.sends)
            self._reqs += reqs
            self._loop.append((rnd.index, reqs, move,
                               _combiner(self.store, rnd.combines, combine, self.absolute),
                               peers, crcs,
                               hold))
            self._checks.append(checks)
        #: the reduction's (MPI_Op, MPI_Datatype, itemsize) handles when the compiled loop
        #: combines (MPI's own operation on a predefined type), else None
        self._c_op = _mpi_op(combine) if any(rnd.combines[0].size for rnd in bound.rounds) \
            else None
        self._fast = not (verify or shape is not None)
        #: calls so far (a counter the compiled loop increments too)
        self._ncalls = np.zeros(1, dtype=np.int64)
        user, at, length = bound.copy_in
        # (destination, source, length) as Python ints: no numpy scalar in the call path
        self.copy_in = list(zip(at.tolist(), user.tolist(), length.tolist()))
        self.copy_out = list(zip(*(c.tolist() for c in bound.copy_out)))
        self._c = None
        if self._fast and transport.cloop is not None:
            self._c = self._compiled(transport, bound)

    @property
    def calls(self):
        """How many times the plan has run."""
        return int(self._ncalls[0])

    def _compiled(self, transport, bound):
        """Set up the compiled loop (:mod:`dualmpi.engine.cloop`); return ``(fn, arg)`` of a call.

        A reduction with MPI's own operation on a predefined type combines in C too
        (``MPI_Reduce_local`` after the round where blocks meet), so a call is one C call,
        as a plan without combines is.  Other reductions are cut into segments that end
        where blocks are combined (in Python, between two C calls).
        """
        lib = transport.cloop
        handles = handle_dtype(lib)
        if handles is None or lib.dualmpi_fields() != _A_FIELDS or \
                lib.dualmpi_future() != FUTURE:  # pragma: no cover - another rounds.c
            return None
        loop = self._loop
        line = self.alarm.handle  # after each round's requests: the alarm line (rounds.c)
        null = MPI.REQUEST_NULL.handle
        self._c_arrays = (
            np.array([len(reqs) for _, reqs, _, _, _, _, _ in loop], dtype=np.intc),
            # (a send the loop makes with MPI_Isend: MPI_REQUEST_NULL between calls)
            np.array([h for _, reqs, _, _, _, _, _ in loop
                      for h in [null if id(req) in self._imm_reqs else req.handle
                                for req in reqs] + [line]], dtype=handles),
            np.array([rnd.copies[0].size for rnd in bound.rounds], dtype=np.intc),
            _move_table(bound),
            np.array(self._nrecv + [0], dtype=np.intc),
            np.zeros(max([len(reqs) for _, reqs, _, _, _, _, _ in loop] + [0]) + 1,
                     dtype=np.intc),
            np.array([rnd.combines[0].size for rnd in bound.rounds] + [0], dtype=np.intc),
            _combine_table(bound),
            # payloads apart from their trailers (APART): per round the lone trailers'
            # receives (first) and the payloads' (last), the trailers' places, and room to
            # wait for the first with the alarm line
            np.array([f for f, _, _ in self._apart] + [0], dtype=np.intc),
            np.array([n for _, n, _ in self._apart] + [0], dtype=np.intc),
            np.array([j for _, _, places in self._apart for j in places] + [0], dtype=np.intc),
            np.zeros(max([f for f, _, _ in self._apart] + [0]) + 1, dtype=handles),
            # the sends made with MPI_Isend (IMMEDIATE): their count per round, their rows
            np.array([len(rows) for rows in self._imm] + [0], dtype=np.intc),
            np.array([x for rows in self._imm for row in rows for x in row] + [0] * 5,
                     dtype=np.int64),
            # the small messages packed (PACK_SMALL): the sends' copies into their slots and
            # the receives' out of theirs, their count per round and their rows
            np.array([len(rows) for rows in self._pack] + [0], dtype=np.intc),
            np.array([x for rows in self._pack for row in rows for x in row] + [0] * 3,
                     dtype=np.int64),
            np.array([len(rows) for rows in self._unpack] + [0], dtype=np.intc),
            np.array([x for rows in self._unpack for row in rows for x in row] + [0] * 3,
                     dtype=np.int64))
        #: the watchdog's view of the loop: (round, peers) per position
        self._tracked = Watchdog.tracker(transport.progress,
                                         [(k, peers) for k, _, _, _, peers, _, _ in loop])
        # segments: (first round, rounds, the combine that ends it or None); one without
        # combines is the whole plan
        self._segments, first = [], 0
        for i, (_, _, _, combine, _, _, _) in enumerate(loop):
            if self._c_op is not None:
                combine = None  # combined inside the loop
            if combine is not None or i == len(loop) - 1:
                self._segments.append((first, i + 1 - first, combine))
                first = i + 1
        if not self._segments or self._segments[-1][2] is not None:
            # the call's end (trailer check, copies out, count) comes after the last combine
            self._segments.append((len(loop), 0, None))
        self._combining = len(self._segments) > 1
        self._c_fn = lib.dualmpi_run
        #: each segment's argument block per flags (:meth:`_segment_rows`)
        self._c_rows = {}
        fn, arg, self._c_keep = self.c_call(_F_START | _F_CHECK | _F_COUNT)
        #: the plan run once in C on the store (copies in and out are the caller's)
        self._c_run = self._closure(fn, arg)
        return fn, arg

    def c_call(self, flags, pre=(), post=(), mid=()):
        """Return ``(fn, args, keep)``: ``fn(args)`` runs the whole plan once in C, or None.

        ``flags``: :data:`_F_START` (advance the call number and write the call's
        signature), :data:`_F_CHECK` (check the trailers after each round),
        :data:`_F_COUNT` (count the call) — with :data:`_F_START`, the rounds also wait on
        the alarm line (:mod:`dualmpi.engine.alarm`); ``pre``/``post``: copies
        ``(destination, source, length)`` at absolute addresses before and after the
        rounds; ``mid``: copies that touch no message's bytes (a rank's own block), done
        while the first round's messages are in flight.  ``args`` is one pointer per
        segment of the plan; with several the
        caller combines in between (see :meth:`_call_segments`).  ``flags=0`` and no
        copies is the bare loop, the floor of ``benchmarks/floor.py``.  ``keep`` holds the
        arrays the pointers address: keep it as long as ``args``.
        """
        if self._c_fn is None:
            return None
        if flags & _F_START and self.alarm.watching:
            flags |= _F_WATCH
        rows = self._c_rows.get(flags)
        if rows is None:
            rows = self._c_rows[flags] = self._segment_rows(flags)
        keep, args = [], []
        pre = np.asarray(pre, dtype=np.int64).reshape(-1, 3)
        post = np.asarray(post, dtype=np.int64).reshape(-1, 3)
        mid = np.asarray(mid, dtype=np.int64).reshape(-1, 3)
        last = len(rows) - 1
        for i, row in enumerate(rows):
            a = row.copy()
            if i == 0 and pre.size:
                a[_A_NPRE], a[_A_PRE] = len(pre), pre.ctypes.data
            if i == last and post.size:
                a[_A_NPOST], a[_A_POST] = len(post), post.ctypes.data
            if i == 0 and mid.size:
                a[_A_NMID], a[_A_MID] = len(mid), mid.ctypes.data
            keep.append(a)
            args.append(ctypes.c_void_p(a.ctypes.data))
        return (self._c_fn, (args[0] if len(args) == 1 else tuple(args)),
                (keep, pre, post, mid))

    def _segment_rows(self, flags):
        """Return the argument block of each segment of the plan for ``flags`` (see
        :meth:`c_call`), without copies: the same for every call of the runner, so made
        once per ``flags`` (every address in it is of an array the runner holds)."""
        nreq, reqs, nmove, moves, nrecv, index, ncomb, combs, nfirst, nlate, tfirst, scratch, \
            nimm, imm, npack, packs, nunpack, unpacks = self._c_arrays
        width = reqs.itemsize
        # (each array's address read once: a plan whose count table is new builds a runner
        # on every call)
        a_nreq, a_reqs, a_nmove, a_moves, a_nrecv, a_index, a_trail = (
            x.ctypes.data for x in (nreq, reqs, nmove, moves, nrecv, index, self._trailers))
        template = self.transport.shared_row.copy()
        # a zero-copy plan's offsets are absolute addresses: the store's base is 0
        template[_A_STORE] = 0 if self.absolute else self.store.ctypes.data
        template[_A_SIGNATURE] = self.signature - (1 << 64) if self.signature >> 63 else \
            self.signature
        template[_A_SIGWORD] = self._sig_addr
        template[_A_INDEX] = a_index
        template[_A_CALLS] = self._ncalls.ctypes.data
        template[_A_COMM] = self.transport.graph.handle
        if self._c_op is not None:
            a_ncomb, a_combs = ncomb.ctypes.data, combs.ctypes.data
            template[_A_OP], template[_A_TYPE], template[_A_ITEM] = self._c_op
        rows = []
        last = len(self._segments) - 1
        for i, (first, count, _) in enumerate(self._segments):
            a = template.copy()
            a[_A_NROUNDS] = count
            a[_A_NREQ] = a_nreq + first * nreq.itemsize
            a[_A_REQS] = a_reqs + (int(nreq[:first].sum()) + first) * width
            a[_A_NMOVE] = a_nmove + first * nmove.itemsize
            a[_A_MOVES] = a_moves + 3 * 8 * int(nmove[:first].sum())
            a[_A_BASE] = first
            tbase = sum(self._nrecv[:first])
            a[_A_NRECV] = a_nrecv + first * nrecv.itemsize
            a[_A_TRAIL] = a_trail + 8 * tbase
            a[_A_TBASE] = tbase
            if self._c_op is not None:
                a[_A_NCOMB] = a_ncomb + first * ncomb.itemsize
                a[_A_COMBS] = a_combs + 3 * 8 * int(ncomb[:first].sum())
            if nimm.any():
                a[_A_NIMM] = nimm.ctypes.data + first * nimm.itemsize
                a[_A_IMM] = imm.ctypes.data + 5 * 8 * int(nimm[:first].sum())
            if npack.any():
                a[_A_NPACK] = npack.ctypes.data + first * npack.itemsize
                a[_A_PACK] = packs.ctypes.data + 3 * 8 * int(npack[:first].sum())
            if nunpack.any():
                a[_A_NUNPACK] = nunpack.ctypes.data + first * nunpack.itemsize
                a[_A_UNPACK] = unpacks.ctypes.data + 3 * 8 * int(nunpack[:first].sum())
            if nlate.any():
                a[_A_NFIRST] = nfirst.ctypes.data + first * nfirst.itemsize
                a[_A_NLATE] = nlate.ctypes.data + first * nlate.itemsize
                a[_A_TFIRST] = tfirst.ctypes.data + int(nfirst[:first].sum()) * tfirst.itemsize
                a[_A_SCRATCH] = scratch.ctypes.data
            a[_A_FLAGS] = (flags & (_F_CHECK | _F_WATCH)) | (flags & _F_START if i == 0 else 0) \
                | (flags & _F_COUNT if i == last else 0)
            rows.append(a)
        return rows

    def bind_call(self, send, recv):
        """Return a function of no argument running the plan on these very buffers.

        For a call repeated with the same buffers (:class:`dualmpi.Comm` remembers it):
        with the compiled loop the copies in and out (or, zero-copy, a rank's own
        block) are done in the same C call as the rounds, the trailers checked there
        too; without it the function is :meth:`run` on the buffers.
        """
        if self._c is None:
            return lambda: self.run(send, recv)
        fn, arg, keep = self.bound_args(send, recv)
        return self._closure(fn, arg, keep)

    def bind_shape(self, send, recv, arrays):
        """Return ``(call, patches)``: :meth:`bind_call` on these buffers, and where it holds
        their addresses; None for a runner without the compiled loop or bound to buffers.

        ``arrays`` are the user's arrays the byte buffers ``send`` and ``recv`` view (apart
        from each other).  ``patches`` (int64, three columns) names each address of a copy in
        or out that lies in one of them: ``(slot, k, offset)``, the int64 at address ``slot``
        holds the data address of ``arrays[k]`` plus ``offset``.  A call on other arrays of
        the same dtype, shape and strides runs the same C call once each slot is rewritten
        with its arrays' addresses (``Recall.shape``, :mod:`dualmpi.engine.recall`): the
        plan copies through the runner's store, which no other address names.
        """
        if self._c is None or self.absolute:
            return None
        fn, arg, keep = self.bound_args(send, recv)
        spans = [(a.ctypes.data, a.nbytes) for a in arrays]
        patches = []
        for table in keep[2][1:]:  # the copies before, after and beside the rounds
            for i in range(len(table)):
                for col in (0, 1):
                    v = int(table[i, col])
                    k = next((k for k, (lo, n) in enumerate(spans) if lo <= v < lo + n), None)
                    if k is None:  # the end of a buffer (a copy of no byte)
                        k = next((k for k, (lo, n) in enumerate(spans) if v == lo + n), None)
                    if k is not None:
                        patches.append((table.ctypes.data + 8 * (3 * i + col), k, v - spans[k][0]))
        # (not the buffers themselves: every call writes its own arrays' addresses first)
        return (self._closure(fn, arg, (None, None, keep[2])),
                np.array(patches, dtype=np.int64).reshape(-1, 3))

    def bind_addresses(self, send, recv):
        """Return :meth:`bind_call`'s call on these buffers holding none of them, or None for a
        runner that is not bound to buffers or runs in more than one C call.

        For a runner bound to the memory at the buffers' addresses (zero-copy) that the caller
        runs only on arrays at those very addresses (``dualmpi.Comm``'s runners at an address
        set): the call's copies (a rank's own block, a reduction's seeds) are at absolute
        addresses, so any arrays there are the ones it reads and writes.
        """
        if not (self.single and self.absolute and self.buffers is not None):
            return None
        fn, arg, keep = self.bound_args(send, recv)
        return self._closure(fn, arg, (None, None, keep[2]))

    def bound_args(self, send, recv, pre=(), post=()):
        """Return ``(fn, arg, keep)`` of the C call :meth:`bind_call` makes (compiled loop).

        ``send`` and ``recv`` None: the plan runs on its store alone, nothing copied in or
        out (a rank that takes part in a call's messages with no buffer of its own to give:
        :func:`pair`).  ``pre``/``post``: more copies before and after the rounds, as for
        :meth:`c_call` (a merged plan's other part: :func:`pair`).
        """
        mid = ()
        pre, post = list(pre), list(post)
        if self.absolute:
            pre, mid = self.seed_copies() + pre, self.own_copies(send, recv)
        else:
            base = self.store.ctypes.data
            if send is not None:
                pre += [(base + a, send.ctypes.data + b, n) for a, b, n in self.copy_in]
            if recv is not None:
                post += [(recv.ctypes.data + a, base + b, n) for a, b, n in self.copy_out]
        fn, arg, keep = self.c_call(_F_START | _F_CHECK | _F_COUNT, pre, post, mid)
        return fn, arg, (send, recv, keep)

    @property
    def single(self):
        """True when the plan runs in one C call (compiled, no combine left to Python)."""
        return self._c is not None and not self._combining

    def _closure(self, fn, arg, keep=None):
        """Return a function of no argument making the C call(s) ``fn(arg)`` under the watchdog.

        ``keep`` (what ``arg`` addresses) is held by the function.  A plan that runs in one
        C call gets the compiled bound call (:mod:`dualmpi.engine.recall`) when there is one.
        """
        wd = self.transport.watchdog
        tracked, failed = self._tracked, self._failed
        module = None if self._combining else recall.load()
        kind = None if module is None else module.Recall
        if kind is not None:
            return kind(ctypes.cast(fn, ctypes.c_void_p).value, arg.value, (fn, arg, keep),
                        wd if wd.deadline > 0 else None, tracked, failed)
        if self._combining:
            def call():
                self._call_segments(fn, arg)
        elif wd.deadline > 0:
            def call():
                wd.state = tracked
                err = fn(arg)
                wd.state = None
                if err:
                    failed(err)
        else:
            def call():
                err = fn(arg)
                if err:
                    failed(err)
        call.keep = keep
        return call

    def seed_copies(self):
        """Return a zero-copy runner's copies before the first round (none for any other).

        ``(destination, source, length)`` at absolute addresses: the input blocks that the
        rounds write, from the send buffer to where the result builds up (the receive
        buffer, or the store for a block the rank does not keep: :meth:`RankPlan.placement
        <dualmpi.engine.plan.RankPlan.placement>`) — but for those a round receives into
        first (:func:`~dualmpi.engine.plan.received_seeds`), every one in the papers'
        reductions with one node per rank.
        """
        return list(self._seeds)

    def own_copies(self, send=None, recv=None):
        """Return a zero-copy runner's copies of the rank's own block, send to receive buffer.

        ``(destination, source, length)`` at absolute addresses (default: the buffers the
        runner is bound to); none for a runner that copies through its store.
        """
        if not self.absolute:
            return []
        if send is None and recv is None:
            at = self.bound_at
        else:
            at = tuple(None if b is None else b.ctypes.data for b in (send, recv))
        if at is None or at[1] is None:
            return []
        return [(at[1] + a, at[0] + b, n) for a, b, n in self._own]

    def _call_segments(self, fn, args):
        """Run the plan's segments in C, combining in between (reductions)."""
        wd = self.transport.watchdog
        watched = wd.deadline > 0
        for arg, (_, _, combine) in zip(args, self._segments):
            if watched:
                wd.state = self._tracked
            err = fn(arg)
            if watched:
                wd.state = None
            if err:
                self._failed(err)
            if combine is not None:
                combine()

    def _failed(self, err):
        """Raise the error of a failed call (:func:`failed`)."""
        failed(self.transport, err, self._what(), self._senders)

    def _what(self):
        """Name the plan's collective as the user called it (its MPI method)."""
        return plan_method(self.plan)

    def _spec(self, offs, lens, absolute=False):
        """Return an mpi4py buffer spec for the segments ``(offs, lens)`` (lists of ints:
        offsets in the store, or addresses when the runner is, or ``absolute``), adjacent
        segments joined."""
        offs, lens = joined(offs, lens)
        if self.absolute or absolute:
            if not offs:
                return [MPI.BOTTOM, 0, MPI.BYTE]
            dtype = MPI.BYTE.Create_hindexed(lens, offs).Commit()
            self._types.append(dtype)
            return [MPI.BOTTOM, 1, dtype]
        if not offs:
            return [self.store[0:0], MPI.BYTE]
        if len(offs) == 1:
            a = offs[0]
            return [self.store[a:a + lens[0]], MPI.BYTE]
        dtype = MPI.BYTE.Create_hindexed(lens, offs).Commit()
        self._types.append(dtype)
        return [self.store, 1, dtype]

    def run(self, send=None, recv=None):
        """Run the plan once: copy ``send`` in, every round, copy ``recv`` out (uint8 arrays)."""
        store = self.store
        if send is not None and not self.absolute:
            for a, b, n in self.copy_in:
                store[a:a + n] = send[b:b + n]
        for dst, src, n in self._seeds:  # zero-copy: the input blocks the rounds combine into
            ctypes.memmove(dst, src, n)
        if self._c is not None:
            self._c_run()
        else:
            alarm = self.alarm
            alarm.check()
            alarm.seq[0] += 1
            if alarm.kept_before():  # as rounds.c does at a call's start
                self._failed(_ALARM)
            sig = call_signature(self.signature, int(alarm.seq[0]))
            self._sig_word[0] = sig
            try:
                self._rounds(sig)
            except MPI.Exception as exc:
                self._failed(exc.Get_error_code())
            self._ncalls[0] += 1
        if recv is not None:
            if self.absolute:
                for a, b, n in self._own:
                    recv[a:a + n] = send[b:b + n]
            else:
                for a, b, n in self.copy_out:
                    recv[a:a + n] = store[b:b + n]

    def _rounds(self, sig):
        """The round loop in Python (no compiled loop, or checksums and link shaping on)."""
        wd = self.transport.watchdog
        watched = wd.deadline > 0
        store, trailers = self.store, self._trailers
        startall = MPI.Prequest.Startall
        t = 0
        for (k, reqs, move, combine, peers, crcs, hold), checks, n, (first, late, places), \
                unpacks in zip(self._loop, self._checks, self._nrecv, self._apart, self._unpack):
            if hold:
                time.sleep(hold)
            for offs, lens, at in crcs:
                store[at:at + 4].view(np.uint32)[0] = _crc(store, offs, lens)
            startall(reqs[:len(reqs) - late])
            if move is not None:
                move()
            if watched:
                wd.arm(k, peers)
            if late:  # the lone trailers first, then the payloads' receives (APART)
                self._wait(reqs[:first])
                for j in places:
                    if trailers[t + j] != sig:
                        self._failed(-1 - (t + j))
                startall(reqs[len(reqs) - late:])
                self._wait(reqs[first:])
            else:
                self._wait(reqs)
            if watched:
                wd.disarm()
            for dst, src, m in unpacks:  # (small messages received whole: PACK_SMALL)
                ctypes.memmove(dst, src, m)
            for offs, lens, at in checks:
                if store[at:at + 4].view(np.uint32)[0] != _crc(store, offs, lens):
                    self.checksum_failures += 1
            if n:
                wrong = np.flatnonzero(trailers[t:t + n] != sig)
                if wrong.size:
                    self._failed(-1 - (t + int(wrong[0])))
                t += n
            if combine is not None:
                combine()

    def _wait(self, reqs):
        """Wait for a round's requests and, meanwhile, on the alarm line (as rounds.c does)."""
        line = self.alarm.line
        if not reqs:
            return
        if line is None:
            inflight.waitall(reqs)
            return
        watch, left = reqs + [line], len(reqs)
        while left:
            if inflight.IN_FLIGHT[0]:  # (keeps the requests in flight moving: inflight.py)
                done = (inflight.waitany(watch),)
            else:
                done = MPI.Request.Waitsome(watch) or ()
            for i in done:
                if i == len(reqs):
                    self.alarm.poll(self._what())
                elif i != MPI.UNDEFINED:
                    left -= 1

    def free(self):
        """Free the persistent requests and datatypes.

        After an alarm (:mod:`dualmpi.engine.alarm`) a round may have been left with its
        receives started: MPI still writes into them when the messages come, so the store
        and the buffers the requests address are kept alive (:data:`ABANDONED`), never
        returned to the allocator.
        """
        for _, other in self.companions.values():
            if other is not None:
                other.free()
        self.companions = {}
        if self.alarm.broken is not None and self._reqs:
            ABANDONED.append((self.store, self.buffers, self.stores, self._small))
        for req in self._reqs:
            if req != MPI.REQUEST_NULL:
                req.Free()
        for dtype in self._types:
            dtype.Free()
        self._reqs, self._types, self._loop = [], [], []


def _small_bytes(bound, sig_at, drop_round=None):
    """Return the bytes of a runner's slots for its small messages packed
    (:data:`PACK_SMALL`): every receive of a payload whose message (payload and 8-byte
    trailer) has at most :data:`IMMEDIATE` bytes, and every such send whose segments and the
    signature at ``sig_at`` are not one run (the sends of round ``drop_round`` left out).

    >>> from types import SimpleNamespace as NS
    >>> seg = lambda *pairs: (np.array([p[0] for p in pairs], dtype=np.int64),
    ...                       np.array([p[1] for p in pairs], dtype=np.int64))
    >>> rnd = NS(index=0, recvs=[(1, *seg((8, 8)))],                  # 16 bytes: packed
    ...          sends=[(1, *seg((0, 8))), (2, *seg((16, 8)))])       # the second only
    >>> _small_bytes(NS(rounds=[rnd]), sig_at=8)
    32
    """
    total = 0
    for rnd in bound.rounds:
        for _, offs, lens in rnd.recvs:
            size = int(lens.sum()) + 8
            if 8 < size <= IMMEDIATE:
                total += size
        if rnd.index == drop_round:
            continue
        for _, offs, lens in rnd.sends:
            size = int(lens.sum()) + 8
            if size <= IMMEDIATE and _runs(offs.tolist() + [sig_at], lens.tolist() + [8]) > 1:
                total += size
    return total


def pair(first, first_buffers, second, second_buffers):
    """Return a function of no argument running two runners' calls as one call, or None.

    The two plans merge (:func:`dualmpi.engine.plan.merge`): round k of both in one round,
    and where both send to the same rank in the same round, one message carries both
    plans' segments — a call costs the longer plan's rounds and, where the plans share a
    link, its messages, not the sum.  The merged runner is made once per pair and kept with
    ``second`` (:attr:`MPIRunner.companions`, counted in the statistics as the two
    collectives it runs).  ``*_buffers`` are ``(send, recv)`` as for
    :meth:`MPIRunner.bind_call` (``(None, None)``: that plan runs on the store, nothing
    copied).  For runners of one node per rank that run in one C call
    (:attr:`MPIRunner.single`), the first without combines and not zero-copy (the second
    may be: the merged runner then addresses its buffers and the first's store directly);
    None for others.  A v-variant's
    count table exchanged in its plan's messages (:func:`dualmpi.calls._vector_call`).
    """
    if not (isinstance(first, MPIRunner) and isinstance(second, MPIRunner)
            and first.single and second.single and not first.absolute
            and second.plan.q == 1):
        return None
    hit = second.companions.get(id(first))
    if hit is None:
        from .plan import merge

        # a zero-copy second: first's segments at their addresses in first's own store
        shift = first.store.ctypes.data if second.absolute else None
        parts = merge(first.bound, second.bound, second.plan.rank, shift)
        run = None
        if parts is not None:
            bound, copy_in, copy_out = parts
            signature = (first.signature * _MIX + second.signature) & _MASK
            if second.absolute:
                bound = dataclasses.replace(bound, nbytes=0)
            # the payload apart (APART) is second's segments alone: first's (the count
            # table's rows, the last segments of a merged message) travel with the trailer
            heads = {(rnd.index, peer, kind == "sends"): len(offs) for rnd in first.bound.rounds
                     for kind in ("sends", "recvs") for peer, offs, _ in getattr(rnd, kind)}
            run = MPIRunner(second.transport, bound, second.plan, signature=signature,
                            combine=second.combine, absolute=second.absolute, heads=heads)
            if second.absolute:  # its own block and seeds, and the stores its segments address
                run._own, run._seeds, run.buffers = second._own, second._seeds, second.buffers
                run.bound_at = second.bound_at
                run.stores = (first.store, second.store)
            run.parts = first.parts + second.parts
            run.hop_rounds = first.hop_rounds + second.hop_rounds
            run.steps = first.steps + second.steps
            run.step_bytes = first.step_bytes + second.step_bytes
            run.copy_in_first = list(zip(copy_in[1].tolist(), copy_in[0].tolist(),
                                         copy_in[2].tolist()))
            run.copy_out_first = list(zip(*(c.tolist() for c in copy_out)))
            if not run.single:  # pragma: no cover - both plans ran in one C call
                run.free()
                run = None
        # (first kept alive with it: its id names no other runner while the entry lives)
        hit = second.companions[id(first)] = (first, run)
    run = hit[1]
    if run is None:
        return None
    send, recv = first_buffers
    base = 0 if run.absolute else run.store.ctypes.data
    pre = [] if send is None else [(base + a, send.ctypes.data + b, n)
                                   for a, b, n in run.copy_in_first]
    post = [] if recv is None else [(recv.ctypes.data + a, base + b, n)
                                    for a, b, n in run.copy_out_first]
    fn, arg, keep = run.bound_args(*second_buffers, pre=pre, post=post)
    return run._closure(fn, arg, (keep, first_buffers))


def handle_dtype(lib):
    """Return the numpy dtype of an ``MPI_Request`` handle in the compiled loop ``lib`` (an
    array of them is what its functions wait on), or None for a size it does not know."""
    return {4: np.uint32, 8: np.uint64}.get(lib.dualmpi_request_size())


#: The orders of the compiled loop's own kernels (rounds.c: K_OPS, K_TYPES): MPI's predefined
#: operations, and the numpy type codes of int8, uint8, int16, uint16 and bool.
_KERNEL_OPS = ("SUM", "PROD", "MIN", "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR")
_KERNEL_TYPES = "bBhH?"


def _mpi_op(combine):
    """Return ``(op, datatype, itemsize)`` of a reduction the compiled loop applies, or None.

    For an operator :func:`dualmpi.ops.resolve` marked ``predefined`` (MPI's own operation
    on a numeric type): on C types of 32 bits and more, float and double (complex too) the
    ``MPI_Op`` and ``MPI_Datatype`` handles, which the loop passes to ``MPI_Reduce_local``;
    on 8- and 16-bit integers and bools datatype 0 and the code of the loop's own kernel
    (``rounds.c``: the Open MPI 5.0.11 wheel's ``MPI_SUM`` on those saturates from 16
    elements on, uint8 200 + 100 giving 255, not C's 44, which MPI defines and numpy
    computes). None for anything else (float16, long double, pair types, numpy ufuncs,
    user ops: numpy or ``Op.Reduce_local`` combines in Python).

    >>> from dualmpi.ops import resolve
    >>> _mpi_op(resolve(MPI.SUM, np.dtype(np.uint8), "Allreduce", MPI)[2])
    (2, 0, 1)
    >>> _mpi_op(resolve(MPI.BXOR, np.dtype(np.int16), "Allreduce", MPI)[2])
    (75, 0, 2)
    >>> _mpi_op(resolve(MPI.SUM, np.dtype(np.float16), "Allreduce", MPI)[2]) is None
    True
    """
    predefined = getattr(combine, "predefined", None)
    if predefined is None:
        return None
    name, dtype = predefined
    if dtype.isnative and dtype.char in _KERNEL_TYPES:
        return 1 + 8 * _KERNEL_OPS.index(name) + _KERNEL_TYPES.index(dtype.char), 0, \
            dtype.itemsize
    mpitype = MPI._typedict.get(dtype.char) if dtype.isnative and \
        dtype.char in "iIlLqQfdFD" else None
    if mpitype is None or not mpitype.is_predefined or mpitype.Get_size() != dtype.itemsize:
        return None  # no named MPI type: numpy combines
    return getattr(MPI, name).handle, mpitype.handle, dtype.itemsize


def _raw(spec):
    """Return ``(address, count, datatype handle)`` of a buffer spec of
    :meth:`MPIRunner._spec` (``[MPI.BOTTOM or an array, count, datatype]`` or ``[array,
    datatype]``): what ``MPI_Isend`` takes (``MPI_BOTTOM``: address 0).

    >>> import numpy as np
    >>> a = np.zeros(16, dtype=np.uint8)
    >>> _raw([a[4:12], MPI.BYTE])[1:] == (8, MPI.BYTE.handle)
    True
    >>> _raw([MPI.BOTTOM, 1, MPI.INT64_T])[:2]
    (0, 1)
    """
    if len(spec) == 2:
        (buf, dtype), count = spec, None
    else:
        buf, count, dtype = spec
    if buf is MPI.BOTTOM:
        return 0, count, dtype.handle
    return buf.ctypes.data, (buf.nbytes // dtype.Get_size() if count is None else count), \
        dtype.handle


def plan_method(plan):
    """Name a plan's collective as the user called it (its MPI method)."""
    name = getattr(plan, "collective", None)
    try:
        return describe(name, None)[0].mpi or name
    except DualmpiError:
        return name or "a collective"


def failed(transport, err, what, senders):
    """Raise the error of a failed compiled call of ``what`` (a collective's MPI name): an MPI
    error code, -(trailer + 1) (``senders[trailer]`` is its ``(round, peer)``), or the alarm.

    A message of another call or an MPI error is told to every rank on the alarm line
    (:meth:`Alarm.raise_alarm <dualmpi.engine.alarm.Alarm.raise_alarm>`): the ranks
    waiting in a round raise at once, the others at their next call.
    """
    transport.watchdog.disarm()
    alarm = transport.alarm
    if err == _HOOK:  # the wait beside requests in flight raised: an MPI error of a round's
        exc = inflight.pending()  # message is this call's, anything else raised as it is
        if exc is None:  # pragma: no cover - the callback keeps what it raised
            exc = MPI.Exception(MPI.ERR_OTHER)
        if not isinstance(exc, MPI.Exception):
            raise exc
        err = exc.Get_error_code()
    if err == _ALARM:
        alarm.heard(what)
    if err < 0:
        k, peer = senders[-err - 1]
        alarm.raise_alarm(MISMATCH, peer, what, where=k)
    alarm.raise_alarm(MPI_FAILED, err, what)


def _shared_row(alarm, progress, lib=None):
    """Return the fields of a compiled loop's argument block that every runner of a transport
    shares: the progress counter and the alarm's arrays (:mod:`dualmpi.engine.alarm`), their
    addresses read once (both live as long as the transport), and the wait beside requests in
    flight (:mod:`dualmpi.engine.inflight`: the counter and the callback) for ``lib``'s
    handles."""
    row = np.zeros(_A_FIELDS, dtype=np.int64)
    handles = handle_dtype(lib) if lib is not None else None
    if handles is not None:
        row[_A_INFLIGHT] = inflight.IN_FLIGHT.ctypes.data
        row[_A_HOOK] = inflight.c_hook(np.dtype(handles).itemsize)
    row[_A_PROGRESS] = progress.ctypes.data
    row[_A_SEQ] = alarm.seq.ctypes.data
    row[_A_WBUF] = alarm.buf.ctypes.data
    row[_A_RING] = alarm.ring.ctypes.data
    row[_A_HIST] = alarm.history.ctypes.data
    row[_A_FUTURE] = alarm.future.ctypes.data
    return row


def _combine_table(bound):
    """Return every round's combines as one int64 table of ``(src, dst, length)`` rows."""
    rows = [np.stack(rnd.combines, axis=1) for rnd in bound.rounds if rnd.combines[0].size]
    table = np.concatenate(rows + [np.zeros((1, 3), dtype=np.int64)]).astype(np.int64)
    return table.reshape(-1)


def _move_table(bound):
    """Return every round's local moves as one int64 table of ``(dst, src, length)`` rows."""
    if getattr(bound, "moves", None) is not None:  # the table bind made
        return bound.moves.reshape(-1)
    copies = bound.copies_all
    if copies is None:  # a plan bound without the joined table: join the rounds'
        copies = tuple(np.concatenate([rnd.copies[i] for rnd in bound.rounds] +
                                      [np.zeros(0, dtype=np.int64)]) for i in range(3))
    table = np.zeros((copies[0].size + 1, 3), dtype=np.int64)  # a spare row: never empty
    table[:-1, 0], table[:-1, 1], table[:-1, 2] = copies[1], copies[0], copies[2]
    return table.reshape(-1)


def _crc(store, offs, lens):
    """Return the CRC-32 of the segments of ``store``."""
    crc = 0
    for a, n in zip(offs.tolist(), lens.tolist()):
        crc = zlib.crc32(store[a:a + n], crc)
    return crc


def _mover(store, copies):
    """Return a function doing a round's local moves (between a rank's own nodes), or None.

    Moves of equal-length blocks at offsets that are multiples of that length (the usual
    case) become one row copy on a 2-D view of the store; others copy segment by segment.
    """
    src, dst, lens = copies
    if src.size == 0:
        return None
    width = int(lens[0])
    if src.size > 2 and width and np.all(lens == width) and not (src % width).any() and \
            not (dst % width).any():
        rows = store[:store.size - store.size % width].reshape(-1, width)
        return _row_mover(rows, src // width, dst // width)
    segs = (dst, src, lens)

    def move():
        copy_segments(store, store, segs)
    return move


def _movers(store, bound):
    """Return :func:`_mover` of every round of ``bound`` (decided once for the whole plan).

    When every local move of the plan has one length and offsets that are multiples of it
    (the usual case), the row indices are computed once and each round's mover takes its
    slice of them; otherwise each round's mover is :func:`_mover`'s.
    """
    counts = [rnd.copies[0].size for rnd in bound.rounds]
    copies = bound.copies_all
    if copies is None or copies[0].size != sum(counts):  # not every round's in one table
        return [_mover(store, rnd.copies) for rnd in bound.rounds]
    src, dst, lens = copies
    width = int(lens[0]) if lens.size else 0
    if not width or (lens != width).any() or (src % width).any() or (dst % width).any():
        return [_mover(store, rnd.copies) for rnd in bound.rounds]
    rows = store[:store.size - store.size % width].reshape(-1, width)
    s_idx, d_idx = src // width, dst // width
    out, at = [], 0
    for rnd, n in zip(bound.rounds, counts):
        out.append(_row_mover(rows, s_idx[at:at + n], d_idx[at:at + n]) if n > 2 else
                   _mover(store, rnd.copies))
        at += n
    return out


def _row_mover(rows, s_idx, d_idx):
    """Return a function copying rows ``s_idx`` of the 2-D view ``rows`` onto rows ``d_idx``."""
    def move():
        rows[d_idx] = rows[s_idx]
    return move


def _combiner(store, combines, op=None, absolute=False):
    """Return a function combining a round's reduction blocks into their slots, or None.

    ``op(src, dst)`` combines byte views (default: bytes added modulo 256).  With
    ``absolute`` the offsets are addresses (a zero-copy runner, whose owner keeps the
    memory they point into alive).  None when there is nothing to combine: no block, or
    only empty ones (a barrier's), so the round does not end a segment of the C loop.
    """
    src, dst, lens = combines
    if not lens.size or not lens.any():
        return None
    if absolute:
        def view(a, n):
            return np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(a))
    else:
        def view(a, n):
            return store[a:a + n]
    pairs = [(view(a, n), view(b, n))
             for a, b, n in zip(src.tolist(), dst.tolist(), lens.tolist()) if n]
    if op is None:
        def op(x, y):
            np.add(y, x, out=y)

    def combine():
        for x, y in pairs:
            op(x, y)
    return combine


class StreamRunner:
    """The total exchange run step by step over chunks (:class:`~dualmpi.engine.stream.StepPlan`).

    For very many nodes per rank (MC(2, 3) on 2 ranks: 8,192 nodes each), where a per-row
    plan would not fit in memory.  Each step gathers this rank's sources' blocks from the
    user's send buffer into chunk buffers, moves every chunk hop by hop (a message to the
    rank that plays the next nodes, or a copy between two of this rank's nodes) and
    scatters the chunks that arrive into the receive buffer.  Needs pieces that split
    evenly into ``q * q`` blocks.
    """

    #: True once the engine has dropped it from its cache or freed it
    ended = False

    def __init__(self, transport, plan, nbytes):
        q, p = plan.q, plan.p
        if nbytes % (q * q):
            raise DualmpiError(f"the streamed total exchange needs pieces of a multiple of "
                               f"{q * q} bytes (q x q blocks), got {nbytes}")
        self.transport, self.plan = transport, plan
        self.bound = None
        self.calls = 0
        self.checksum_failures = 0
        self.rank = transport.rank
        self.block = b = nbytes // (q * q)
        self.nbytes = nbytes
        z = plan.chunk
        self.transit = np.zeros((2, plan.num_chunks, z * b), dtype=np.uint8)
        self.steps, sent = plan.rank_steps(self.rank)
        self.hop_rounds, self.steps_count = plan.hop_rounds(), p - 1
        self.messages_per_call = sent * z
        self.bytes_per_call = sent * z * b

    def run(self, send, recv):
        """One total exchange of the user's uint8 buffers (``MPI.IN_PLACE``: the same array).

        Blocks leave the send buffer step by step while others arrive in the receive
        buffer, so a send buffer that shares memory with the receive buffer is copied
        first (as MPI's own in-place total exchange does).
        """
        plan, me, b = self.plan, self.rank, self.block
        self.transport.alarm.check()
        if send is recv or np.shares_memory(send, recv):
            send = send.copy()
        q, z = plan.q, plan.chunk
        graph = self.transport.graph
        wd = self.transport.watchdog
        watched = wd.deadline > 0
        srows = send.reshape(-1, b) if b else send.reshape(0, 0)
        rrows = recv.reshape(-1, b) if b else recv.reshape(0, 0)
        mine = np.arange(me * q, (me + 1) * q, dtype=np.int64)
        own = me * q * q + (mine % q) * (q + 1)  # block (u, u): row of piece me, sub-block (i, i)
        rrows[own] = srows[own]
        span = np.arange(z, dtype=np.int64)
        transit = self.transit
        waitall = inflight.waitall
        base = plan.chunk_base.tolist()
        # source s = base[j] + i of chunk j goes to d = s XOR last[j] (its class's renamed
        # route ends there): send row (d // q) q^2 + (s % q) q + d % q, receive row
        # (s // q) q^2 + (s % q) q + d % q; with the chunk aligned to z | q, the part of
        # d above z is one number per chunk and the low part is i XOR (last[j] mod z)
        spanq = span * q
        low = z - 1
        for t, start, hops, last in self.steps:
            for j in start:
                hi = base[j] ^ (last[j] & ~low)
                rows = span ^ (last[j] & low)
                rows += spanq
                rows += (hi // q) * q * q + (base[j] % q) * q + hi % q
                transit[0, j] = srows[rows].reshape(-1)
            for h, (acts, done) in enumerate(hops):
                src, dst = transit[h % 2], transit[(h + 1) % 2]
                reqs, peers = [], []
                for j, a, c in acts:
                    if a == me and c == me:
                        dst[j] = src[j]
                    elif a == me:
                        reqs.append(graph.Isend([src[j], MPI.BYTE], c, j))
                    else:
                        reqs.append(graph.Irecv([dst[j], MPI.BYTE], a, j))
                        peers.append(a)
                if reqs:
                    if watched:
                        wd.arm(f"step {t}, hop {h} of the total exchange", tuple(peers))
                    waitall(reqs)
                    if watched:
                        wd.disarm()
                for j in done:
                    hi = base[j] ^ (last[j] & ~low)
                    rows = span ^ (last[j] & low)
                    rows += spanq
                    rows += (base[j] // q) * q * q + (base[j] % q) * q + hi % q
                    rrows[rows] = dst[j].reshape(z, b)
        self.calls += 1

    def free(self):
        """Nothing beyond memory to release."""
        self.transit = None
