"""A deadline on every blocking wait of the engine: a rank stuck waiting aborts the whole job."""

import sys
import threading
import time

__all__ = ["Watchdog", "DEFAULT_DEADLINE"]

#: Seconds a rank may wait in one round (or one control-plane call) before the job is aborted.
DEFAULT_DEADLINE = 120.0


class Watchdog:
    """Watch one rank's waits; past the deadline print one diagnostic and abort every rank.

    The waiting thread only stores what it waits for (:meth:`arm` / :meth:`disarm`: one
    tuple, no system call but a clock read); a daemon thread checks the time and calls
    ``abort(code)`` (``MPI_Abort``), which ends every rank at once.

    Parameters
    ----------
    who : str or int
        How the diagnostic names this waiter, e.g. ``"rank 3 (node 3)"`` (an int ``u``
        reads ``"node u"``).
    deadline : float
        Seconds (0 or less: never fire; no thread is started).
    abort : callable
        Called once with the exit code 3.

    Examples
    --------
    >>> import io
    >>> dog = Watchdog("rank 5", 0, print)
    >>> dog.diagnostic((0.0, 7, (4,)), 2.5)
    'dualmpi: watchdog: rank 5 has waited 2.5 s (deadline 0 s) in round 7 for rank 4 to send; aborting the job'
    """

    def __init__(self, who, deadline, abort, stream=None):
        self.who = f"node {who}" if isinstance(who, int) else str(who)
        self.deadline, self.abort = deadline, abort
        self.stream = stream or sys.stderr
        self.state = None
        self.fired = False
        self.closed = False
        self._thread = None
        if deadline and deadline > 0:
            self._thread = threading.Thread(target=self._watch, name="dualmpi-watchdog",
                                            daemon=True)
            self._thread.start()

    def arm(self, where, waiting_for, grace=None):
        """Start the clock: waiting in ``where`` (a round index or a text) for ``waiting_for``.

        ``grace`` (seconds) replaces the default grace (see :meth:`limit`).
        """
        self.state = (time.monotonic(), where, waiting_for) if grace is None else \
            (time.monotonic(), where, waiting_for, grace)

    @staticmethod
    def tracker(counter, rounds):
        """Return the state that watches a compiled round loop (:mod:`dualmpi.engine.cloop`).

        ``counter[0]`` is the 1-based position in ``rounds`` (``(round, peers)`` pairs) of
        the round being waited in (0: none), ``counter[1]`` counts the calls; the thread
        starts a wait's clock when it first sees the pair change.  Storing the returned
        object in :attr:`state` arms the watchdog for every round of the loop at once.

        >>> import numpy as np
        >>> counter = np.array([2, 7])
        >>> start, k, peers = Watchdog.tracker(counter, [(0, (1,)), (3, (4,))]).current()
        >>> k, peers
        (3, (4,))
        """
        return _Tracked(counter, rounds)

    def disarm(self):
        """The wait is over."""
        self.state = None

    def close(self):
        """Stop watching (the thread ends at its next tick)."""
        self.state = None
        self.closed = True

    def diagnostic(self, state, now):
        """Return the one-line diagnostic for a wait that passed the deadline."""
        start, where, peers = state[:3]
        place = f"in round {where}" if isinstance(where, int) else f"in {where}"
        if peers:
            who = "rank" if isinstance(self.who, str) and self.who.startswith("rank") else "node"
            names = ", ".join(map(str, peers))
            whom = f" for {who} {names} to send" if len(peers) == 1 else \
                f" for {who}s {names} to send"
        else:
            whom = " for the other ranks to join"
        return (f"dualmpi: watchdog: {self.who} has waited {now - start:.1f} s "
                f"(deadline {self.deadline:g} s) {place}{whom}; aborting the job")

    def limit(self, state):
        """Return when a wait fires: the deadline plus 0.1 s per round (at most 5 s).

        A stall spreads: ranks in later rounds end up waiting for the stuck one.  The
        grace lets the wait that started the stall fire first, so the diagnostic names it.
        """
        where = state[1]
        if len(state) > 3:
            grace = state[3]
        else:
            grace = 0.1 * min(where, 50) if isinstance(where, int) else 5.0
        return state[0] + self.deadline + grace

    def _watch(self):
        """Thread body: sleep until the armed wait's limit (re-checking a few times a second)."""
        tick = min(0.25, self.deadline / 8)
        while not self.closed:
            state = _current(self.state)
            now = time.monotonic()
            wait = tick if state is None else max(0.0, min(tick, self.limit(state) - now))
            time.sleep(wait)
            state = _current(self.state)
            now = time.monotonic()
            if state is not None and now >= self.limit(state) and not self.fired:
                self.fired = True
                print(self.diagnostic(state, now), file=self.stream, flush=True)
                time.sleep(0.5)  # let the launcher forward the line before the job is killed
                self.abort(3)
                return


class _Tracked:
    """The state of a compiled loop's wait, read from its counter (see :meth:`Watchdog.track`)."""

    def __init__(self, counter, rounds):
        self.counter, self.rounds = counter, rounds
        self.key, self.since = None, 0.0

    def current(self):
        """Return ``(start, round, peers)`` of the wait in progress, or None."""
        pos, call = int(self.counter[0]), int(self.counter[1])
        if pos <= 0 or pos > len(self.rounds):
            return None
        if (call, pos) != self.key:
            self.key, self.since = (call, pos), time.monotonic()
        k, peers = self.rounds[pos - 1]
        return (self.since, k, peers)


def _current(state):
    """Return a wait's ``(start, where, peers[, grace])`` tuple (reading a tracked loop), or None."""
    return state.current() if isinstance(state, _Tracked) else state
