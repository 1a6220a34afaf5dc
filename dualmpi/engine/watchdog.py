"""A deadline on every blocking wait of the engine: a rank stuck waiting aborts the whole job."""

import gc
import os
import stat
import sys
import threading
import time
import weakref

import numpy as np

from . import threads

__all__ = ["Watchdog", "last_words", "threads_of", "DEFAULT_DEADLINE", "ASK_SECONDS"]

#: Seconds between the two looks at a silent rank's threads (:meth:`Watchdog._on_this_host`).
SAMPLE_SECONDS = 1.0

#: Seconds a rank may wait in one round (or one control-plane call) before the job is aborted.
DEFAULT_DEADLINE = 120.0

#: Seconds a watchdog that fires waits for the answers of the ranks it asks (at most; less for
#: a deadline under 8 s): a rank whose watchdog does not answer in time has stopped answering.
ASK_SECONDS = 4.0

#: Tags of the watchdogs' own communicator: a question, its answer.
_QUESTION, _ANSWER = 1, 2
#: int64 words of an answer: question number, waiting (0/1), round (-1: elsewhere), peers
#: waited for (count, then up to 60 of them).
_WORDS = 64


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
    stream : file, optional
        Where the diagnostic goes; default: :func:`last_words` (file descriptor 2, where
        the line outlives the abort that follows it).

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
        #: the ranks the last :meth:`trace` found silent (their threads: :func:`threads_of`)
        self.silent = []
        self.stream = stream
        self.state = None
        self.fired = False
        self.closed = False
        #: the watchdogs' own communicator (:meth:`listen`), or None
        self.comm = None
        self._question = None
        self._replies, self._number = [], 0
        self._mpi = threading.Lock()  # the thread's MPI calls against :meth:`close`
        #: called (weak methods) with the wait's state by the listening thread while the rank
        #: waits (:meth:`listen`): the nonblocking engine's probe for rank 0's modes
        self.probes = []
        self._wake = threading.Event()
        self._thread = None
        if deadline and deadline > 0:
            self._thread = threads.start(self._watch, "dualmpi-watchdog")

    def listen(self, comm):
        """Answer the other ranks' watchdogs on ``comm`` and ask them before aborting.

        ``comm`` (a communicator of the watchdogs' own, made collectively; freed by
        :meth:`close`) joins the ranks' watchdogs: each answers, from its thread, a
        question of another rank's with what its rank is waiting for (while it waits in
        dualmpi: the thread's MPI calls progress the rank's messages, and must not do so
        for a rank that has stopped progressing them).  A watchdog that fires asks the
        ranks its rank waits for, then the ranks those wait for, and so on, and names
        the end of the chain — a rank that does not answer within :data:`ASK_SECONDS`
        (stopped, or busy outside dualmpi), or one that answers it is not waiting (in no
        watched wait) — so the diagnostic names the rank that stopped answering,
        whichever rank's deadline passes first.  While the rank waits the thread also
        calls the :attr:`probes` (the nonblocking engine's probe for rank 0's modes).  Needs
        ``MPI_THREAD_MULTIPLE`` (mpi4py's default); with less, or with no deadline, the
        watchdog does not listen (``comm`` is freed).
        """
        from mpi4py import MPI

        if self._thread is None or MPI.Query_thread() != MPI.THREAD_MULTIPLE:
            comm.Free()
            return
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self._status = MPI.Status()
        self._qbuf = np.zeros(2, dtype=np.int64)
        with self._mpi:
            self._question = comm.Recv_init(self._qbuf, MPI.ANY_SOURCE, _QUESTION)
            self._question.Start()
            self.comm = comm
        _LISTENING.add(self)
        _stop_at_finalize(MPI)
        threads.start(self._listen, "dualmpi-watchdog-answers")

    def arm(self, where, waiting_for, grace=None):
        """Start the clock: waiting in ``where`` (a round index or a text) for ``waiting_for``.

        ``grace`` (seconds) replaces the default grace (see :meth:`limit`).
        """
        self.state = (time.monotonic(), where, waiting_for) if grace is None else \
            (time.monotonic(), where, waiting_for, grace)

    @staticmethod
    def tracker(counter, rounds):
        """Return the state that watches a compiled round loop (:mod:`dualmpi.engine.cloop`).

        ``counter[0]`` is the 1-based position in ``rounds`` (``(round, peers)`` pairs, or
        ``(where, peers, grace)``: see :meth:`arm`) of the round being waited in (0: none),
        ``counter[1]`` counts the calls (or names the run); the thread
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

    def waiting(self):
        """Return the current wait's ``(start, where, waiting_for, ...)``, or None."""
        return _current(self.state)

    def unprobe(self, probe):
        """Stop calling ``probe`` (a bound method in :attr:`probes`; it has returned, if running)."""
        with self._mpi:
            self.probes = [p for p in self.probes if p() is not None and p() != probe]

    def close(self, free=True):
        """Stop watching (the thread ends at once) and stop listening (``free``: free ``comm``)."""
        self.state = None
        self.closed = True
        self._wake.set()
        if self.comm is None or not self._mpi.acquire(timeout=5.0):
            return  # (not acquired: a question blocked in MPI, the job is being aborted)
        try:
            comm, self.comm = self.comm, None
            if comm is None:
                return
            _LISTENING.discard(self)
            self._question.Cancel()
            self._question.Wait()
            self._question.Free()
            self._replies = []  # sends complete on their own (or die with MPI_Finalize)
            if free:
                comm.Free()
        finally:
            self._mpi.release()

    def diagnostic(self, state, now, chain=""):
        """Return the one-line diagnostic for a wait that passed the deadline.

        ``chain``: what the ranks waited for answered (see :meth:`trace`), put before
        "aborting the job".
        """
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
                f"(deadline {self.deadline:g} s) {place}{whom}{chain}; aborting the job")

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
            self._wake.wait(wait)
            state = _current(self.state)
            now = time.monotonic()
            if self.closed or state is None or now < self.limit(state) or self.fired:
                continue
            self.fired = True
            chain = self._trace_at_most(state)
            if self.closed or _current(self.state) is None or \
                    _current(self.state)[:2] != state[:2]:
                self.fired = False  # the wait ended while the others were asked
                continue
            line = self.diagnostic(state, time.monotonic(), chain)
            line += "".join("\n" + text for text in self._on_this_host(self.silent))
            if self.stream is None:
                last_words(line)
            else:
                print(line, file=self.stream, flush=True)
            time.sleep(0.5)  # let the launcher forward the line before the job is killed
            self.abort(3)
            return

    # -- asking the other ranks' watchdogs (see :meth:`listen`) ---------------------------------
    def _listen(self):
        """Thread body: answer questions while the rank waits (a thread of its own, so that an
        MPI call that blocks never keeps :meth:`_watch` from aborting the job).

        Only while the rank waits in dualmpi: MPI calls from this thread progress the rank's
        messages, which must not hide a rank that has stopped progressing them.
        """
        tick = min(0.25, self.deadline / 8)
        while not self.closed:
            self._wake.wait(tick)
            state = _current(self.state)
            if state is not None:
                self.answer()
                if self.probes:
                    self._probe(state)

    def _probe(self, state):
        """Call the probes (thread; while the rank waits in ``state``)."""
        if not self._mpi.acquire(timeout=0.1):
            return
        try:
            for probe in tuple(self.probes):
                fn = probe()
                if fn is None or self.comm is None:
                    continue
                try:
                    fn(state)
                except Exception:  # (not again: the thread must go on answering)
                    self.probes.remove(probe)
        finally:
            self._mpi.release()

    def answer(self):
        """Answer every question that has arrived with what this rank waits for (thread)."""
        if not self._mpi.acquire(timeout=0.1):
            return
        try:
            if self.comm is None:
                return
            while self._question.Test(self._status):
                asker = self._status.Get_source()
                reply = self._state_words(int(self._qbuf[0]))
                self._replies.append((self.comm.Isend(reply, asker, _ANSWER), reply))
                self._question.Start()
            self._replies = [(r, b) for r, b in self._replies if not r.Test()]
        finally:
            self._mpi.release()

    def _state_words(self, number):
        """Return the answer to question ``number``: this rank's wait, as int64 words."""
        words = np.zeros(_WORDS, dtype=np.int64)
        words[0] = number
        state = _current(self.state)
        if state is not None:
            where, peers = state[1], tuple(state[2])[:_WORDS - 4]
            words[1] = 1
            words[2] = where if isinstance(where, int) else -1
            words[3] = len(peers)
            words[4:4 + len(peers)] = peers
        return words

    def ask(self, ranks, seconds):
        """Ask ``ranks`` what they wait for; return ``{rank: (round, peers) or () or None}``.

        ``(round, peers)``: waiting (round -1: elsewhere than in a plan's round); ``()``:
        not waiting in dualmpi; ``None``: no answer within ``seconds`` (questions from the
        other ranks are answered meanwhile).
        """
        with self._mpi:
            if self.comm is None:
                return {r: None for r in ranks}
            self._number += 1
            number, comm = self._number, self.comm
            question = np.array([number, 0], dtype=np.int64)
            bufs = {r: np.zeros(_WORDS, dtype=np.int64) for r in ranks}
            reqs = {r: comm.Irecv(bufs[r], r, _ANSWER) for r in ranks}
            self._replies += [(comm.Isend(question, r, _QUESTION), question) for r in ranks]
        got, until = {}, time.monotonic() + seconds
        while len(got) < len(ranks) and time.monotonic() < until and not self.closed:
            self.answer()
            with self._mpi:
                if self.comm is None:
                    break
                for r, req in reqs.items():
                    if r in got or not req.Test():
                        continue
                    words = bufs[r]
                    if words[0] != number:  # a late answer to an earlier question
                        reqs[r] = comm.Irecv(words, r, _ANSWER)
                        continue
                    got[r] = (int(words[2]), tuple(int(p) for p in words[4:4 + words[3]])) \
                        if words[1] else ()
            time.sleep(0.02)
        with self._mpi:
            for r, req in reqs.items():
                if r not in got and self.comm is not None:
                    req.Cancel()
                    req.Wait()
        return {r: got.get(r) for r in ranks}

    def trace(self, state):
        """Return what ends the chain of waits from this rank's (text for :meth:`diagnostic`).

        Asks the ranks this rank waits for (every other rank when the wait names none),
        then those they wait for, and so on (each rank once).  The end: the ranks that do
        not answer; else a rank that answers it is not waiting, and any other rank that
        does not answer (the rest are asked then).  Empty when the ranks wait for one
        another (a rank that skipped a send and moved on: the wait names it) or when not
        listening.
        """
        if self.comm is None:
            return ""
        peers = tuple(state[2]) or tuple(range(self.size))
        seconds = min(ASK_SECONDS, max(1.0, self.deadline / 2))
        parent, answers, frontier = {}, {}, [p for p in peers if p != self.rank]
        seen = set(frontier) | {self.rank}
        while frontier and not self.closed:
            heard = self.ask(frontier, seconds)
            answers.update(heard)
            silent = [r for r in frontier if heard[r] is None]
            if silent:
                self.silent = silent
                return _path(silent, parent, answers) + _silent(silent)
            nxt = []
            for r in frontier:
                for p in heard[r][1] if heard[r] else ():
                    if p not in seen:
                        seen.add(p)
                        parent[p] = r
                        nxt.append(p)
            frontier = nxt
        idle = [r for r, a in answers.items() if a == ()]
        end = _path(idle, parent, answers) + f"; rank {idle[0]} answers it is not waiting" \
            if idle else ""
        rest = [r for r in range(self.size) if r not in seen]
        if rest and not self.closed:  # the chain ends at a live rank: is another one silent?
            heard = self.ask(rest, seconds)
            silent = [r for r in rest if heard[r] is None]
            if silent:
                self.silent = silent
                return end + _silent(silent)
        return end  # empty: the ranks wait for one another, the wait itself says most

    def _on_this_host(self, ranks):
        """Return a line per rank of ``ranks`` (silent ones) that runs on this host: its threads.

        Evidence for a rank that stopped answering (issue 23): whether its main thread was
        running, stopped or asleep, and where.  Never raises: the job is being aborted.
        """
        lines = []
        if not ranks or self.comm is None:
            return lines
        try:
            from mpi4py import MPI

            world = MPI.Group.Translate_ranks(self.comm.Get_group(), list(ranks),
                                              MPI.COMM_WORLD.Get_group())
            found = {}
            for rank, world_rank in zip(ranks, world):
                pid = _process_of(world_rank)
                if pid is not None:
                    found[rank] = (pid, _threads(pid))
            if found:  # a second look a second later: who used CPU meanwhile
                start = time.monotonic()
                time.sleep(SAMPLE_SECONDS)
                seconds = time.monotonic() - start
            for rank, (pid, before) in found.items():
                text = threads_of(pid, before, seconds)
                if text is not None:
                    lines.append(f"dualmpi: watchdog: rank {rank} (pid {pid}, this host): {text}")
        except Exception:  # noqa: BLE001 - evidence only; the abort comes first
            return lines
        return lines

    def _trace_at_most(self, state):
        """:meth:`trace` in a thread of its own, given up (empty) when it takes too long.

        Questions are MPI calls: were one to block, the watchdog still aborts the job.
        """
        out = []
        helper = threads.start(lambda: out.append(self.trace(state)), "dualmpi-watchdog-trace")
        helper.join(4 * min(ASK_SECONDS, max(1.0, self.deadline / 2)) + 2.0)
        return out[0] if out else ""


def last_words(text):
    """Write ``text`` (one line or more) where it outlives an ``MPI_Abort`` that follows at once.

    ``os.write`` to file descriptor 2: no Python stream, so nothing waits in a buffer that
    the abort discards.  When file descriptor 2 is a capture's temporary file -- pytest's
    default ``--capture=fd`` keeps a test's output there until the test ends, and the abort
    kills the process before that -- the line also goes to the descriptor the capture saved
    (the process's standard error before pytest started): a job that ends under pytest
    still says why.  ``sys.stderr`` is flushed first, so earlier lines come first.
    """
    data = (text.rstrip("\n") + "\n").encode("utf-8", "replace")
    try:
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):  # no stderr, or closed
        pass
    seen = set()
    for fd in [2] + (_saved_stderr() if _is_capture(2) else []):
        try:
            info = os.fstat(fd)
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError:  # closed, or a full pipe at the end of a job: the others still
            continue


def _is_capture(fd):
    """True when ``fd`` is an unlinked regular file (a capture's temporary file)."""
    try:
        info = os.fstat(fd)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_nlink == 0


def _saved_stderr():
    """Return the descriptors pytest's fd captures of fd 2 saved that are not captures too.

    pytest keeps them in its capture objects only (``FDCaptureBase.targetfd_save``, the
    descriptor that ``writeorg`` writes to); they are found among the live objects once,
    on the way out.  Empty when pytest is not loaded or its objects look different.
    """
    capture = sys.modules.get("_pytest.capture")
    base = getattr(capture, "FDCaptureBase", None)
    if not isinstance(base, type):
        return []
    fds = []
    for obj in gc.get_objects():
        if isinstance(obj, base) and getattr(obj, "targetfd", None) == 2 and \
                getattr(obj, "_state", None) in ("started", "suspended"):
            fd = getattr(obj, "targetfd_save", None)
            if isinstance(fd, int) and not _is_capture(fd):
                fds.append(fd)
    return fds


def _threads(pid):
    """Return ``[(tid, state, CPU seconds, wchan, queued seconds)]`` of process ``pid``, main first.

    From ``/proc``; ``queued`` is the time the thread has spent runnable but waiting for a
    CPU (``schedstat``), None where the kernel does not keep it.
    """
    tick = os.sysconf("SC_CLK_TCK")
    out = []
    for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=lambda t: (t != str(pid), int(t))):
        base = f"/proc/{pid}/task/{tid}"
        with open(f"{base}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        try:
            with open(f"{base}/wchan") as f:
                wchan = f.read().strip()
        except OSError:
            wchan = "?"
        try:
            with open(f"{base}/schedstat") as f:
                queued = int(f.read().split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            queued = None
        out.append((tid, fields[0], (int(fields[11]) + int(fields[12])) / tick,
                    "-" if wchan in ("", "0") else wchan, queued))
    return out


def threads_of(pid, before=None, seconds=None):
    """Return what the threads of process ``pid`` are doing, from ``/proc`` (Linux), or None.

    Per thread: its state (R running or runnable, S sleeping, D waiting on the disk, T
    stopped, ...), its CPU time and the kernel function it sleeps in (``wchan``); the main
    thread first.  With ``before`` (an earlier ``_threads(pid)``, ``seconds`` ago) also the CPU
    time each thread used since and the time it waited runnable for a CPU: a runnable thread
    that used none while it waited was not scheduled.

    >>> text = threads_of(os.getpid())
    >>> text is None or text.startswith("main ")
    True
    """
    try:
        earlier = {t[0]: t for t in before or ()}
        out = []
        for tid, state, cpu, wchan, queued in _threads(pid):
            who = "main" if tid == str(pid) else f"thread {tid}"
            since = ""
            if tid in earlier and seconds:
                since = f" (+{cpu - earlier[tid][2]:.2f} s"
                if queued is not None and earlier[tid][4] is not None:
                    since += f", queued +{queued - earlier[tid][4]:.2f} s"
                since += f" in {seconds:.1f} s)"
            out.append(f"{who} {state} {cpu:.2f} s CPU{since} in {wchan}")
        return ", ".join(out)
    except (OSError, ValueError, IndexError):
        return None


def _process_of(world_rank):
    """Return the pid of this job's rank ``world_rank`` when it runs on this host, else None.

    Found by the launcher's environment (``PMIX_NAMESPACE`` and ``PMIX_RANK``, Open MPI and
    other PMIx launchers) in ``/proc/*/environ``: no exchange between the ranks is needed.
    """
    namespace = os.environ.get("PMIX_NAMESPACE")
    if namespace is None or not os.path.isdir("/proc"):
        return None
    want = {f"PMIX_NAMESPACE={namespace}".encode(), f"PMIX_RANK={world_rank}".encode()}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = set(f.read().split(b"\0"))
        except OSError:
            continue
        if want <= env:
            return int(name)
    return None


def _silent(ranks):
    """Return ``"; rank r does not answer"`` (or ranks ...)."""
    if len(ranks) == 1:
        return f"; rank {ranks[0]} does not answer"
    return f"; ranks {', '.join(map(str, ranks))} do not answer"


def _path(ends, parent, answers):
    """Return ``"; rank a waits in round k for rank b, ..."``: the chain to ``ends[0]``."""
    steps, r = [], ends[0]
    while r in parent:
        p = parent[r]
        where = answers[p][0]
        steps.append(f"rank {p} waits{f' in round {where}' if where >= 0 else ''} for rank {r}")
        r = p
    return "; " + ", ".join(reversed(steps)) if steps else ""


#: The watchdogs that listen (stopped before MPI_Finalize: their threads call MPI).
_LISTENING = weakref.WeakSet()
_FINALIZE_HOOK = []


def _stop_at_finalize(MPI):
    """Close every listening watchdog when MPI_Finalize starts (once per process).

    MPI_Finalize first deletes ``MPI_COMM_SELF``'s attributes: the delete callback of
    one set here stops the threads before MPI is gone (explicit ``MPI.Finalize()`` or
    mpi4py's at exit).
    """
    if _FINALIZE_HOOK:
        return

    def stop(comm, keyval, value):
        for dog in list(_LISTENING):
            dog.close(free=False)

    keyval = MPI.Comm.Create_keyval(delete_fn=stop)
    MPI.COMM_SELF.Set_attr(keyval, True)
    _FINALIZE_HOOK.append(keyval)


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
        return (self.since, *self.rounds[pos - 1])  # (where, peers[, grace])


def _current(state):
    """Return a wait's ``(start, where, peers[, grace])`` tuple (reading a tracked loop), or None."""
    return state.current() if isinstance(state, _Tracked) else state
