"""Helper threads kept for reuse: a thread whose work ends waits for the next one.

Every :class:`dualmpi.Comm` runs up to three helper threads (the watchdog's clock and its
answers, :mod:`dualmpi.engine.watchdog`; the progress thread, :mod:`dualmpi.engine.router`),
which end when it is freed.  A program (or a test suite) that makes and frees communicators
one after another would start new threads each time; :func:`start` hands the work to a
thread that has finished its previous work and waits (at most :data:`KEEP` of them, each for
:data:`IDLE_SECONDS`), and starts a thread only when none waits.  Starting threads is where
two of the three stalls of one rank seen in the 32-rank test tier were (issue 23: a
``pthread_create`` that had not returned after 50 s, in a new communicator's set-up).

Examples
--------
>>> import threading
>>> seen = []
>>> start(lambda: seen.append(threading.current_thread().name), "first").join(5)
>>> start(lambda: seen.append(threading.current_thread().name), "second").join(5)
>>> seen
['first', 'second']
"""

import os
import sys
import threading

__all__ = ["start", "Work", "KEEP", "IDLE_SECONDS"]

#: At most this many threads wait for work.
KEEP = 8
#: How long (seconds) a thread with no work waits for some before it ends.
IDLE_SECONDS = 60.0

_lock = threading.Lock()
_idle = []  # the waiting threads' _Slot, most recent last


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
            slot.ready.wait_for(lambda: slot.next is not None, IDLE_SECONDS)
            job = slot.next
            if job is None:
                _idle.remove(slot)


def _after_fork():
    """In a forked child: the waiting threads did not come along (nor may the lock be free)."""
    global _lock
    _lock = threading.Lock()
    _idle.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def start(target, name):
    """Run ``target()`` on a helper thread (daemon) named ``name``; return its :class:`Work`.

    A thread whose previous work has ended takes it if one waits; else a new thread starts.
    """
    work = Work()
    job = (target, name, work)
    with _lock:
        if _idle:
            slot = _idle.pop()
            slot.next = job
            slot.ready.notify()
            return work
    threading.Thread(target=_run, args=(_Slot(), job), name=name, daemon=True).start()
    return work
