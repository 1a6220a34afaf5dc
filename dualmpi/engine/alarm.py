"""The alarm line: every rank agrees on a call's arguments, and hears at once of another's error.

A blocking collective of :class:`dualmpi.Comm` checks its arguments with the other ranks
the first time its signature is seen; a repeated call skips that check (it costs a
control-plane round trip) and relies on its messages' trailers, which carry the call's
signature mixed with the communicator's *call number* (advanced by every rank at the
start of every call: ``seq``).  Skipping is only safe when every rank skips, so the
check is made such that a rank which skips notices a rank which does not, wherever it
waits:

* **agreement** (:meth:`Alarm.agree`) runs on a communicator of its own, through rank 0:
  rank 0 first sends every rank a *notice* (call ``t``), every rank sends rank 0 its
  *vector*, rank 0 answers with the *verdict* (elementwise max and min).  A rank that
  repeats a known call instead runs its plan, whose every round also waits on this
  line (a persistent receive from any rank: :mod:`dualmpi.engine.rounds.c`), so it
  hears rank 0's notice — or rank 0 hears its vector — for a call it runs without
  agreement: the ranks disagree;
* **alarm** (:meth:`Alarm.raise_alarm`): a rank that finds a disagreement — a message
  of another call in a round, a notice for a call it ran without agreement, its own bad
  arguments in a call the others repeat — sends every rank an alarm and raises; every
  rank waiting in a round or an agreement of that call (or a later one) raises at once,
  the others at their next call.  A rank still finishing an earlier call finishes it
  first: the ranks that are ahead have sent everything that call needs.

* **nonblocking calls** take a call number too (:meth:`Alarm.nonblocking`), and say so:
  every other rank sends rank 0 a *nonblocking notice* — for a repeat started in C, only
  when rank 0's mode for the call is not in by the request's first step
  (:mod:`dualmpi.engine.nonblocking`: rank 0 sends a mode, with the call number, only from a
  nonblocking call, so then rank 0 made the call nonblocking too).  Rank 0's own mode,
  tagged with its call number, is its notice: a rank waiting in dualmpi probes for the first
  mode it has not taken (the watchdog's thread, a few times a second:
  :meth:`dualmpi.engine.nonblocking.Progress._probe`) and, when that names its current call
  or an earlier one that it made blocking, puts rank 0's notice on its own line
  (:meth:`Alarm.tell`).  Without that thread (no watchdog, or less than
  ``MPI_THREAD_MULTIPLE`` on some rank: :attr:`Alarm.probed` false) rank 0 sends every rank
  its notice.  MPI never matches a nonblocking collective with a blocking one, so a rank
  that hears such a notice for a call it makes blocking raises the alarm (rank 0 in every
  case, and every rank when rank 0 is the one that starts the nonblocking call).  A rank
  drops the notices about its own nonblocking calls: it remembers the last :data:`HISTORY`
  of them (older notices are dropped unread: the rank they came from then still waits in the
  agreement of its call, under the watchdog).  A notice about a call the rank has not
  reached yet is *noted* by its call number (:data:`FUTURE` of them, with the sender), not
  kept as a message: a program may hold thousands of requests, and the rank that starts them
  first is that many calls ahead.  Reaching a noted call as a blocking one raises the alarm
  as a notice heard in it does; a rank more than :data:`FUTURE` calls behind loses the older
  notes (a mixed call there is then found by the watchdog, not at once).  The line is
  drained at every nonblocking start, and a rank waiting for a nonblocking request also
  waits on the line (:func:`dualmpi.engine.nonblocking.block`), so it hears an alarm at
  once.  A nonblocking call's arguments are agreed the first time rank 0 sees them; on a
  repeat rank 0 says so and every other rank compares its arguments with rank 0's
  (:mod:`dualmpi.engine.nonblocking`): a rank whose arguments differ raises the alarm.

After an alarm the communicator is *unusable* (every later call raises the first
error's text): ranks stopped mid-plan, with messages in flight.  An error found by the
agreement itself leaves it usable: no rank has sent anything.

Messages are ``WORDS`` int64s: ``[kind, call number, sender, reason, peer, round,
payload...]``; a notice or vector about a later call than the current one, heard while
waiting in a round, is kept in the ring (``[count, capacity, messages...]``) for the
agreement of that call.
"""

import numpy as np
from mpi4py import MPI

from ..errors import DualmpiError
from .inflight import waitall, waitany

__all__ = ["Alarm", "WORDS", "NOTICE", "VECTOR", "VERDICT", "ALARM", "NONBLOCKING", "HISTORY",
           "FUTURE"]

#: int64 words of a message on the alarm line.
WORDS = 24
#: Kinds of message.
NOTICE, VECTOR, VERDICT, ALARM, NONBLOCKING = 1, 2, 3, 4, 5
#: Reasons of an alarm.
MISMATCH, DISAGREE, MPI_FAILED, MIXED, MIXED_HERE, ARGS = 1, 2, 3, 4, 5, 6
#: A rank's nonblocking call numbers remembered (notices about them are dropped).
HISTORY = 4096
#: Another rank's nonblocking calls this rank has not reached yet, noted by call number
#: (``rounds.c``'s ``FUTURE``): a rank may be any number of calls behind the others (a program
#: that holds thousands of requests), so their notices are not kept as messages.
FUTURE = 16384
#: Messages about later calls kept while a round waits.
RING = 1024
#: Offset of a message's payload (a vector, or a verdict's max then min).
PAYLOAD = 6
_TAG = 9


class Alarm:
    """The alarm line of one communicator (see the module docstring).

    Parameters
    ----------
    ctl : mpi4py.MPI.Intracomm
        dualmpi's control communicator (duplicated: the line has its own context).
    watchdog : Watchdog
        Every wait of the line is watched.
    """

    def __init__(self, ctl, watchdog):
        self.comm = ctl.Dup()
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.watchdog = watchdog
        #: the communicator's call number: plan runs so far (the compiled loop advances it)
        self.seq = np.zeros(1, dtype=np.int64)
        #: the message the line received last
        self.buf = np.zeros(WORDS, dtype=np.int64)
        #: ``[count, capacity, messages...]``: notices and vectors about later calls
        self.ring = np.zeros(2 + RING * WORDS, dtype=np.int64)
        self.ring[1] = RING
        #: ``history[t % HISTORY] == t`` when call ``t`` was a nonblocking one of this rank
        self.history = np.full(HISTORY, -1, dtype=np.int64)
        #: ``future[2 * (t % FUTURE)] == t`` when another rank (``future[2 * (t % FUTURE) + 1]``)
        #: said call ``t`` is nonblocking there and this rank has not reached it yet
        self.future = np.full(2 * FUTURE, -1, dtype=np.int64)
        #: nonblocking notices in flight (request, message)
        self._notices = []
        #: rank 0 sends no nonblocking notice: the others probe for its modes
        #: (:meth:`dualmpi.engine.nonblocking.Progress._probe`)
        self.probed = False
        #: the first error's text once the line has carried an alarm (the communicator is
        #: then unusable), else None
        self.broken = None
        #: called with the text when the communicator becomes unusable
        self.listeners = []
        self.line = None
        if self.size > 1:
            self.line = self.comm.Recv_init([self.buf, MPI.INT64_T], MPI.ANY_SOURCE, _TAG)
            self.line.Start()

    @property
    def handle(self):
        """The line's request handle (an int) for the compiled loop, or that of REQUEST_NULL."""
        return (self.line if self.line is not None else MPI.REQUEST_NULL).handle

    @property
    def watching(self):
        """True when rounds must wait on the line (more than one rank)."""
        return self.line is not None

    # -- the agreement ------------------------------------------------------------------------
    def agree(self, flat, what):
        """Return ``(hi, lo)``: the elementwise max and min of every rank's ``flat`` (int64).

        For the call the rank runs next (call number ``seq + 1``); raises
        :class:`~dualmpi.errors.DualmpiError` on every rank when a rank repeats a call
        instead (or the line carries an alarm).
        """
        self.check()
        flat = np.asarray(flat, dtype=np.int64)
        if self.size == 1:
            return flat.copy(), flat.copy()
        t = int(self.seq[0]) + 1
        n = flat.size
        sender = self.noted(t)
        if sender >= 0:  # another rank made this call a nonblocking one
            self.raise_alarm(MIXED, sender, what=what, seq=t)
        if self.rank == 0:
            sends = [self._send(NOTICE, t, r) for r in range(1, self.size)]
            parts = {0: flat}
            for msg in self._kept(t):
                if msg[0] == VECTOR:
                    parts[int(msg[2])] = msg[PAYLOAD:PAYLOAD + n].copy()
            while len(parts) < self.size:
                msg = self._hear(what, tuple(r for r in range(self.size) if r not in parts))
                if msg[0] == VECTOR and msg[1] == t:
                    parts[int(msg[2])] = msg[PAYLOAD:PAYLOAD + n].copy()
                else:
                    self._unexpected(msg, t, what)
            hi = np.maximum.reduce(list(parts.values()))
            lo = np.minimum.reduce(list(parts.values()))
            self._finish(sends, what)
            payload = np.concatenate([hi, lo])
            self._finish([self._send(VERDICT, t, r, payload=payload)
                          for r in range(1, self.size)], what)
            return hi, lo
        sends = [self._send(VECTOR, t, 0, payload=flat)]
        noticed = any(msg[0] == NOTICE for msg in self._kept(t))
        while True:
            msg = self._hear(f"{what} (waiting for rank 0's verdict)", (0,))
            if msg[0] == NOTICE and msg[1] == t and not noticed:
                noticed = True
            elif msg[0] == VERDICT and msg[1] == t:
                self._finish(sends, what)
                return msg[PAYLOAD:PAYLOAD + n].copy(), msg[PAYLOAD + n:PAYLOAD + 2 * n].copy()
            else:
                self._unexpected(msg, t, what)

    def _kept(self, t):
        """Remove and return the kept messages about call ``t`` (alarm on earlier calls' ones)."""
        count = int(self.ring[0])
        if not count:
            return []
        kept = self.ring[2:2 + count * WORDS].reshape(count, WORDS).copy()
        seqs, kinds = kept[:, 1].tolist(), kept[:, 0].tolist()  # (few: lists beat masks)
        if min(seqs) > t:
            return []
        for i, seq in enumerate(seqs):
            if kinds[i] == ALARM and seq <= t:
                self._alarmed(kept[i], "the argument check")
        for i, seq in enumerate(seqs):
            if seq < t:
                self._unexpected(kept[i], t, "the argument check")
        later = [i for i, seq in enumerate(seqs) if seq > t]
        self.ring[0] = len(later)
        if later:
            self.ring[2:2 + len(later) * WORDS] = kept[later].reshape(-1)
        return [kept[i] for i, seq in enumerate(seqs) if seq == t]

    def _keep(self, msg):
        """Keep a message about a later call (note it, when it is a nonblocking notice)."""
        if msg[0] == NONBLOCKING:
            at = 2 * (int(msg[1]) % FUTURE)
            self.future[at], self.future[at + 1] = msg[1], msg[2]
            return
        count = int(self.ring[0])
        if count >= RING:
            self.raise_alarm(DISAGREE, int(msg[2]), what="the alarm line",
                             text=f"more than {RING} agreements of later calls are pending")
        self.ring[2 + count * WORDS:2 + (count + 1) * WORDS] = msg
        self.ring[0] = count + 1

    def _unexpected(self, msg, t, what):
        """Handle a message the agreement of call ``t`` did not wait for: keep it, or alarm."""
        kind, seq = int(msg[0]), int(msg[1])
        if kind == NONBLOCKING and self.ours(seq):
            return
        if seq > t and kind in (NOTICE, VECTOR, ALARM, NONBLOCKING):  # a later call's
            self._keep(msg)
            return
        self._disagree(msg, what)

    def _disagree(self, msg, what):
        """Raise what message ``msg`` about a call this rank has made means (an alarm)."""
        kind, seq, src = int(msg[0]), int(msg[1]), int(msg[2])
        if kind == ALARM:
            self._alarmed(msg, what)
        if kind in (NOTICE, VECTOR) and self.history[seq % HISTORY] == seq:
            # another rank's agreement of a blocking call this rank made nonblocking
            self.raise_alarm(MIXED_HERE, src, what=what, seq=seq)
        # a notice or vector about a call this rank has run without agreement, or a
        # nonblocking notice about a call it made blocking
        self.raise_alarm(MIXED if kind == NONBLOCKING else DISAGREE, src, what=what, seq=seq)

    def noted(self, t):
        """Return the rank that said call ``t`` is nonblocking there (noted before this rank
        reached it), or -1."""
        at = 2 * (t % FUTURE)
        return int(self.future[at + 1]) if self.future[at] == t else -1

    def ours(self, seq):
        """True when call ``seq`` was a nonblocking call of this rank (or too old to tell)."""
        return bool(self.history[seq % HISTORY] == seq) or seq <= self.seq[0] - HISTORY

    # -- nonblocking calls --------------------------------------------------------------------
    def nonblocking(self, what):
        """Take the next call number for a nonblocking collective and send its notices
        (another rank to rank 0; rank 0 to every rank unless they probe for its modes).

        Drains the line first (dropping notices about this rank's earlier nonblocking
        calls, keeping those about later calls); raises the alarm when another rank has
        made this call a blocking one (its agreement's notice or vector is here).
        """
        self.check()
        t = int(self.seq[0]) + 1
        if self.size == 1:
            self.seq[0] = t
            return t
        self.drain(what)
        self.seq[0] = t
        self.history[t % HISTORY] = t
        if self.future[2 * (t % FUTURE)] == t:  # (another rank's notice of this call: agreed)
            self.future[2 * (t % FUTURE)] = -1
        for msg in self._kept(t):
            if msg[0] == ALARM:
                self._alarmed(msg, what)
            if msg[0] != NONBLOCKING:  # another rank's agreement of a blocking call t
                self.raise_alarm(MIXED_HERE, int(msg[2]), what=what, seq=t)
        self._notices = [(req, m) for req, m in self._notices if not req.Test()]
        for dest in (() if self.probed else range(1, self.size)) if self.rank == 0 else (0,):
            self._notices.append(self._send(NONBLOCKING, t, dest, keep=True))
        return t

    def tell(self, seq, sender):
        """Put rank ``sender``'s nonblocking notice of call ``seq`` on this rank's own line
        (the probe for rank 0's modes); return the send's request and its message."""
        return self._send(NONBLOCKING, seq, self.rank, keep=True, sender=sender)

    def drain(self, what):
        """Handle every message the line holds now, without waiting."""
        line = self.line
        if line is None:
            return
        while line.Test():
            msg = self.buf.copy()
            line.Start()
            self.take(msg, what)

    def take(self, msg, what):
        """Take a message heard outside an agreement: drop, keep (a later call's) or alarm."""
        kind, seq = int(msg[0]), int(msg[1])
        if kind == NONBLOCKING and self.ours(seq):
            return
        if seq > self.seq[0]:  # about a later call: this one's data is not in question
            self._keep(msg)
            return
        self._disagree(msg, what)

    def _hear(self, what, waiting_for):
        """Wait (watched) for the line's next message; return it and listen again."""
        wd = self.watchdog
        wd.arm(what, waiting_for)
        try:
            waitany([self.line])  # (MPI's Wait, keeping the requests in flight moving)
        finally:
            wd.disarm()
        msg = self.buf.copy()
        self.line.Start()
        return msg

    def _send(self, kind, seq, dest, reason=0, peer=0, where=0, payload=(), keep=False,
              sender=None):
        """Start sending one message on the line; return its request (``keep``: and the message).

        ``sender``: the rank the message names as its sender (this rank's by default)."""
        msg = np.zeros(WORDS, dtype=np.int64)
        msg[:PAYLOAD] = (kind, seq, self.rank if sender is None else sender, reason, peer, where)
        msg[PAYLOAD:PAYLOAD + len(payload)] = payload
        req = self.comm.Isend([msg, MPI.INT64_T], dest, _TAG)
        return (req, msg) if keep else req

    def _finish(self, sends, what):
        """Wait (watched) for sends of the line."""
        wd = self.watchdog
        wd.arm(f"{what} (sending on the alarm line)", ())
        try:
            waitall(sends)
        finally:
            wd.disarm()

    # -- alarms -------------------------------------------------------------------------------
    def check(self):
        """Raise the first error's text when the communicator is unusable."""
        if self.broken is not None:
            raise DualmpiError(f"the communicator is unusable after an earlier error: "
                               f"{self.broken}")

    def raise_alarm(self, reason, peer, what, where=0, seq=None, text=None):
        """Tell every rank of a disagreement this rank found, then raise it here."""
        seq = int(self.seq[0]) if seq is None else seq
        if self.broken is None:
            sends = [self._send(ALARM, seq, r, reason, peer, where)
                     for r in range(self.size) if r != self.rank]
            self._break(text or describe(reason, self.rank, peer, where, seq))
            self._finish(sends, what)
        raise DualmpiError(f"{what}: {self.broken}")

    def kept_before(self):
        """True when a kept message is about the current call or an earlier one, or another
        rank made the current call a nonblocking one (noted)."""
        count = int(self.ring[0])
        return (bool(count) and bool(
            (self.ring[2:2 + count * WORDS].reshape(count, WORDS)[:, 1] <= self.seq[0]).any())) \
            or self.noted(int(self.seq[0])) >= 0

    def heard(self, what):
        """The compiled loop stopped on the line: raise what it brought (or what a kept
        message about the current call means)."""
        seq = int(self.seq[0])
        sender = self.noted(seq)
        if sender >= 0:  # another rank made this call a nonblocking one (its notice noted)
            self.raise_alarm(MIXED, sender, what=what, seq=seq)
        count = int(self.ring[0])
        kept = self.ring[2:2 + count * WORDS].reshape(count, WORDS)
        stale = kept[kept[:, 1] <= seq]
        if stale.size:
            msg = stale[0].copy()
        else:
            msg = self.buf.copy()
            if self.line is not None:
                self.line.Start()
        self._disagree(msg, what)

    def poll(self, what):
        """Handle what the line brought while a round waited in Python (as the compiled loop does)."""
        msg = self.buf.copy()
        self.line.Start()
        self.take(msg, what)

    def _alarmed(self, msg, what):
        """An alarm arrived: the communicator is unusable; raise its text."""
        if self.broken is None:
            self._break(describe(int(msg[3]), int(msg[2]), int(msg[4]), int(msg[5]),
                                 int(msg[1])))
        raise DualmpiError(f"{what}: {self.broken}")

    def _break(self, text):
        self.broken = text
        for listener in self.listeners:
            listener(text)

    def free(self):
        """Stop listening and free the line's communicator."""
        if self._notices:
            self._finish([req for req, _ in self._notices], "freeing the communicator")
            self._notices = []
        if self.line is not None:
            try:
                self.line.Cancel()
                self.line.Wait()
            except MPI.Exception:  # pragma: no cover - a line already completed
                pass
            self.line.Free()
            self.line = None
        self.comm.Free()


def describe(reason, finder, peer, where, seq):
    """Return the text of an alarm: what rank ``finder`` found about rank ``peer`` in call ``seq``.

    >>> describe(MISMATCH, 3, 1, 2, 17)  # doctest: +ELLIPSIS
    'rank 3 got a message of another call from rank 1 in round 2 of call 17 (the ranks ...'
    """
    if reason == MISMATCH:
        return (f"rank {finder} got a message of another call from rank {peer} in round "
                f"{where} of call {seq} (the ranks called different collectives or passed "
                "different arguments); the received data is not used")
    if reason == MIXED:
        return (f"rank {peer} started a nonblocking collective as call {seq} where rank "
                f"{finder} made a blocking one (MPI never matches the two: the ranks called "
                "different collectives)")
    if reason == MIXED_HERE:
        return (f"rank {finder} started a nonblocking collective as call {seq} where rank "
                f"{peer} made a blocking one (MPI never matches the two: the ranks called "
                "different collectives)")
    if reason == ARGS:
        return (f"rank {finder}'s arguments for call {seq}, a nonblocking collective, differ "
                "from those of rank 0, which repeated a call the ranks had agreed on (the ranks "
                f"called different collectives or passed different arguments: see rank "
                f"{finder}'s message)")
    if reason == MPI_FAILED:
        return (f"rank {finder} failed in round {where} of call {seq}: "
                f"{MPI.Get_error_string(peer)} (the ranks called different collectives or "
                "passed buffers of different sizes)")
    return (f"rank {peer} checked its arguments for call {seq} (a new signature or arguments "
            f"it rejected: see its message) while rank {finder} ran a call it had checked "
            "before: the ranks called different collectives or passed different arguments")
