"""Helper threads kept for reuse: a thread whose work ends waits for the next one.

Every :class:`dualmpi.Comm` runs up to three helper threads (the watchdog's clock and its
answers, :mod:`dualmpi.engine.watchdog`; the progress thread, :mod:`dualmpi.engine.router`),
which end when it is freed.  A program (or a test suite) that makes and frees communicators
one after another would start new threads each time; :func:`start` hands the work to a
thread that has finished its previous work and waits (at most :data:`KEEP` of them, for the
life of the process), and starts a thread only when none waits: a process starts as many
helper threads as it ever runs at once (:func:`started` counts them).

A new thread is started with :func:`_thread.start_new_thread`, which returns once the thread
exists, not, as :meth:`threading.Thread.start` does, once it has begun to run: the caller
never waits for the scheduler.  Starting threads is where the stalls of one rank seen in the
test tiers were (issue 23: the new thread had not run its first instruction 50 s after
``pthread_create`` returned, while its rank waited in ``Thread.start`` and the others in a
new communicator's set-up).

Examples
--------
>>> import threading
>>> seen = []
>>> start(lambda: seen.append(threading.current_thread().name), "first").join(5)
>>> start(lambda: seen.append(threading.current_thread().name), "second").join(5)
>>> seen
['first', 'second']
"""

import _thread
import os
import sys
import threading

__all__ = ["start", "started", "Work", "KEEP"]

#: At most this many threads wait for work (a thread finishing work when as many wait ends).
KEEP = 16

_lock = threading.Lock()
_idle = []  # the waiting threads' _Slot, most recent last
_started = [0]  # threads started by this process (reset in a forked child)
_new_thread = _thread.start_new_thread  # replaced by the tests


class Work:
    """What :func:`start` returns: one piece of work running on a helper thread.

    ``join(timeout)`` waits for the work to end (not the thread, which may wait for more);
    ``is_alive()`` is True until it has.
    """

    __slots__ = ("_done",)

    def __init__(self):
        self._done = threading.Event()

    def join(self, timeout=None):
        """Wait until the work has ended, or ``timeout`` seconds."""
        self._done.wait(timeout)

    def is_alive(self):
        """True while the work runs."""
        return not self._done.is_set()


class _Slot:
    """A waiting thread's mailbox: the next ``(target, name, work)``, handed under ``_lock``."""

    __slots__ = ("ready", "next")

    def __init__(self):
        self.ready = threading.Condition(_lock)
        self.next = None


def _run(slot, job):
    """A helper thread: run ``job``, then wait for the next one (or end)."""
    me = threading.current_thread()
    while job is not None:
        target, name, work = job
        me.name = name
        try:
            target()
        except BaseException:  # reported as threading.Thread reports it
            threading.excepthook(threading.ExceptHookArgs([*sys.exc_info(), me]))
        finally:
            work._done.set()
        with _lock:
            if len(_idle) >= KEEP:
                return
            slot.next = None
            _idle.append(slot)
            slot.ready.wait_for(lambda: slot.next is not None)
            job = slot.next


def _after_fork():
    """In a forked child: the waiting threads did not come along (nor may the lock be free)."""
    global _lock
    _lock = threading.Lock()
    _idle.clear()
    _started[0] = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def start(target, name):
    """Run ``target()`` on a helper thread (daemon) named ``name``; return its :class:`Work`.

    A thread whose previous work has ended takes it if one waits; else a new thread starts
    (and this returns without waiting for it to run).
    """
    work = Work()
    job = (target, name, work)
    with _lock:
        if _idle:
            slot = _idle.pop()
            slot.next = job
            slot.ready.notify()
            return work
        _started[0] += 1
    _new_thread(_run, (_Slot(), job))
    return work


def started():
    """How many helper threads this process has started (a forked child counts its own).

    >>> before = started()
    >>> start(lambda: None, "counted").join(5)
    >>> started() - before in (0, 1)  # 0: a waiting thread took the work
    True
    """
    return _started[0]
