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


def test_start_does_not_wait_for_a_new_thread_to_run(monkeypatch):
    """A new thread that the scheduler has not run yet does not hold up :func:`start`.

    Here the thread begins to run only when the test lets it (as a thread the kernel never
    scheduled, issue 23); ``threading.Thread.start`` would wait for it forever.
    """
    gate, pending = threading.Event(), []

    def held(function, args):
        pending.append((function, args))
        return threading.Thread(target=lambda: (gate.wait(), function(*args)), daemon=True).start()
    monkeypatch.setattr(threads, "_idle", [])  # no waiting thread: a new one must start
    monkeypatch.setattr(threads, "_new_thread", held)
    before = threads.started()
    done = threading.Event()
    work = threads.start(done.set, "held")
    assert pending and threads.started() == before + 1
    assert work.is_alive() and not done.is_set()  # start returned; the work has not run
    gate.set()
    work.join(5)
    assert done.is_set() and not work.is_alive()


def test_a_second_round_of_work_starts_no_thread():
    """Threads that finished their work wait for more for as long as the process lives."""
    gates = [threading.Event() for _ in range(3)]
    for gate in gates:  # three at once, so that three threads exist
        threads.start(gate.wait, "first round")
    for gate in gates:
        gate.set()
    for _ in range(500):
        if len(threads._idle) >= 3:
            break
        threading.Event().wait(0.01)
    before = threads.started()
    again = [threading.Event() for _ in range(3)]
    works = [threads.start(gate.wait, "second round") for gate in again]
    for gate in again:
        gate.set()
    for work in works:
        work.join(5)
    assert threads.started() == before
