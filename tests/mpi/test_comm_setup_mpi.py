"""MPI tests of ``dualmpi.Comm``'s set-up: its traffic never touches the user's, and the ranks agree.

Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi/test_comm_setup_mpi.py``.
"""

import time

import numpy as np
import pytest

import dualmpi
from dualmpi.errors import InputError

MPI = pytest.importorskip("mpi4py.MPI")

WORLD = MPI.COMM_WORLD
SIZE = WORLD.Get_size()
RANK = WORLD.Get_rank()

#: Two networks with the same node count (8) but other links.
SAME_SIZE = ("hypercube:n=3", "dualcube:r=2")


def _agree(ok):
    return bool(WORLD.allreduce(int(bool(ok)), op=MPI.MIN))


def _spec():
    return {1: "hypercube:n=0", 2: "hypercube:n=1", 4: "hypercube:n=2", 8: "dualcube:r=2",
            16: "hypercube:n=4", 32: "dualcube:r=3", 64: "metacube:k=2,m=1"}[SIZE]


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("tag", [32000, 77, 0])
def test_user_messages_in_flight_are_not_taken_by_the_set_up(tag):
    """Rank 1's messages to rank 0 (an int and 8 bytes) sent before the constructor, and rank
    0's pending ANY_SOURCE/ANY_TAG receive: the set-up takes none of them."""
    pending = None
    if RANK == 0:
        pending = WORLD.Irecv(np.zeros(1, np.int32), MPI.ANY_SOURCE, MPI.ANY_TAG)
    if RANK == 1:
        WORLD.Send(np.array([42], np.int32), 0, tag)
        WORLD.Send(np.arange(8, dtype=np.int8), 0, tag)
    net = dualmpi.Comm(WORLD, "hypercube:n=0" if SIZE == 1 else _spec())
    ok = True
    if RANK == 0:
        status = MPI.Status()
        got = np.zeros(1, np.int32)
        pending.Wait(status)
        ok = status.Get_source() == 1 and status.Get_tag() == tag
        got8 = np.zeros(8, np.int8)
        WORLD.Recv(got8, 1, tag)
        ok = ok and got8.tolist() == list(range(8))
        del got
    net.Free()
    assert _agree(ok)


@pytest.mark.mpi(min_size=8)
def test_ranks_given_other_networks_fail_alike_at_once():
    """One rank builds Q_3, the others D_2 (8 nodes each): InputError on every rank in the
    constructor, not a hang in the first collective."""
    if SIZE != 8:
        pytest.skip("the two networks have 8 nodes")
    t0 = time.monotonic()
    err = None
    try:
        dualmpi.Comm(WORLD, SAME_SIZE[RANK == 0])
    except InputError as exc:
        err = str(exc)
    took = time.monotonic() - t0
    errs = WORLD.allgather(err)
    ok = all(e is not None and "given different networks or options" in e for e in errs)
    assert _agree(ok and took < 30), (errs, took)


@pytest.mark.mpi(min_size=2)
def test_ranks_given_other_options_fail_alike():
    """One rank asks for another allgather algorithm: InputError on every rank."""
    if SIZE > 8:
        pytest.skip("sampled below 16 ranks")
    err = None
    try:
        dualmpi.Comm(WORLD, _spec(), packets=1 if RANK == 0 else "auto")
    except InputError as exc:
        err = str(exc)
    errs = WORLD.allgather(err)
    assert _agree(all(e is not None and "options" in e for e in errs)), errs


@pytest.mark.mpi(min_size=1)
def test_communicators_made_again_start_no_thread():
    """Helper threads outlive the communicators that used them (issue 23: starting a thread is
    where one rank's stalls were): two communicators alive at once, freed, then made again and
    used, start no new thread on any rank."""
    from dualmpi.engine import threads

    spec = "hypercube:n=0" if SIZE == 1 else _spec()
    ok = True
    for round_ in range(3):
        idle, before = len(threads._idle), threads.started()
        nets = [dualmpi.Comm(WORLD, spec) for _ in range(2)]
        got = [net.allreduce(RANK + 1) for net in nets]
        ok = ok and got == [SIZE * (SIZE + 1) // 2] * 2
        for net in nets:
            net.Free()
        if round_:  # the first round may start them
            ok = ok and threads.started() == before
        # the freed communicators' threads end their work on their own: wait for them
        back = min(threads.KEEP, idle + threads.started() - before)
        until = time.monotonic() + 10
        while len(threads._idle) < back and time.monotonic() < until:
            time.sleep(0.01)
    assert _agree(ok)
