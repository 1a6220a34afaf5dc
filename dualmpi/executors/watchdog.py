"""A per-rank deadline on every executor round: a node stuck waiting aborts the whole job."""

import sys
import threading
import time

__all__ = ["Watchdog", "DEFAULT_DEADLINE"]

#: Seconds a node may wait in one round before the job is aborted (``--watchdog``).
DEFAULT_DEADLINE = 120.0


class Watchdog:
    """Watch one rank's waits; past the deadline print one diagnostic and abort every rank.

    The main thread only stores what it is waiting for (:meth:`arm` / :meth:`disarm`);
    a daemon thread checks the time and calls ``abort(code)`` (``MPI_Abort`` on the
    job's communicator), which ends every rank at once.
    """

    def __init__(self, node, deadline, abort, stream=None):
        self.node, self.deadline, self.abort = node, deadline, abort
        self.stream = stream or sys.stderr
        self.state = None
        self.fired = False
        self.closed = False
        self._thread = None
        if deadline and deadline > 0:
            self._thread = threading.Thread(target=self._watch, name="dualmpi-watchdog",
                                            daemon=True)
            self._thread.start()

    def arm(self, round_index, waiting_for):
        """Start the clock: this node now waits in ``round_index`` for ``waiting_for`` (node ids)."""
        self.state = (time.monotonic(), round_index, tuple(waiting_for))

    def disarm(self):
        """The wait is over."""
        self.state = None

    def close(self):
        """Stop watching (the thread ends at its next tick)."""
        self.state = None
        self.closed = True

    def diagnostic(self, state, now):
        """Return the one-line diagnostic for a wait that passed the deadline."""
        start, rnd, peers = state
        who = ", ".join(map(str, peers)) or "its own sends to complete"
        return (f"dualmpi: watchdog: node {self.node} has waited {now - start:.1f} s "
                f"(deadline {self.deadline:g} s) in round {rnd} for node {who}; aborting the job")

    def limit(self, state):
        """Return when a wait fires: the deadline plus 0.1 s per round (at most 5 s).

        A stall spreads: nodes in later rounds end up waiting for the stuck one.  The
        grace lets the wait that started the stall fire first, so the diagnostic names it.
        """
        return state[0] + self.deadline + 0.1 * min(state[1], 50)

    def _watch(self):
        """Thread body: sleep until the armed wait's limit (re-checking a few times a second)."""
        tick = min(0.25, self.deadline / 8)
        while not self.closed:
            state = self.state
            now = time.monotonic()
            wait = tick if state is None else max(0.0, min(tick, self.limit(state) - now))
            time.sleep(wait)
            state = self.state
            now = time.monotonic()
            if state is not None and now >= self.limit(state) and not self.fired:
                self.fired = True
                print(self.diagnostic(state, now), file=self.stream, flush=True)
                self.abort(3)
                return
