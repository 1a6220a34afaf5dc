"""Helper threads kept for reuse (``dualmpi/engine/threads.py``, issue 23): work handed to a
waiting thread runs, ``join`` waits for the work, errors are reported as a thread's, and a
forked child starts threads of its own."""

import os
import sys
import threading

import pytest

from dualmpi.engine import threads


def test_a_waiting_thread_takes_the_next_work():
    """The second piece of work runs on the thread of the first, under its own name."""
    seen = []

    def note():
        seen.append((threading.get_ident(), threading.current_thread().name))
    threads.start(note, "one").join(5)
    for _ in range(50):  # the thread parks right after its work's end is signalled
        if threads._idle:
            break
        threading.Event().wait(0.01)
    threads.start(note, "two").join(5)
    assert [n for _, n in seen] == ["one", "two"] and seen[0][0] == seen[1][0]


def test_join_waits_for_the_work_and_errors_are_reported(capsys):
    """``join`` returns when the work has ended; an exception goes to threading.excepthook."""
    gate = threading.Event()
    work = threads.start(gate.wait, "waits")
    work.join(0.05)
    assert work.is_alive()
    gate.set()
    work.join(5)
    assert not work.is_alive()
    caught = []
    old, threading.excepthook = threading.excepthook, caught.append
    try:
        threads.start(lambda: 1 / 0, "fails").join(5)
    finally:
        threading.excepthook = old
    assert caught and caught[0].exc_type is ZeroDivisionError
    assert caught[0].thread.name == "fails"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_threads_of_its_own():
    """Threads waiting in the parent are not in a forked child: its work must still run."""
    threads.start(lambda: None, "parent").join(5)
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if the work ran
        done = threading.Event()
        threads.start(done.set, "child")
        os._exit(0 if done.wait(5) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
