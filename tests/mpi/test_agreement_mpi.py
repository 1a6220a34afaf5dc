"""Repeated calls skip the argument check, yet every disagreement is one clear error (issues 22, 23).

Each case runs on a communicator of its own (an alarm leaves it unusable, by design) and
checks, on every rank, what the rank got — an error naming the cause within seconds, never
the watchdog (set to 60 s: a case that took it would fail the job's timeout, not pass) —
then the ranks agree on the verdict.
"""

import time

import numpy as np
import pytest
from mpi4py import MPI

import dualmpi
from dualmpi.errors import DualmpiError

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.Get_rank(), WORLD.Get_size()

#: (spec, nodes per rank) per rank count: one node per rank, then several.
NETS = {
    2: [("hypercube:n=1", 1), ("dualcube:r=2", 4)],
    4: [("hypercube:n=2", 1), ("metacube:k=2,m=1", 16)],
    8: [("dualcube:r=2", 1), ("dualcube:r=3", 4)],
    32: [("dualcube:r=3", 1)],
    64: [("metacube:k=2,m=1", 1)],
}

#: Seconds within which every rank must have its error (the watchdog is at 60), counted from
#: the call where the ranks part (:func:`_mark`; the program's start when it has no mark): on
#: 64 ranks sharing 2 cores the correct calls before it took up to 50 s in CI.
PROMPT = 10.0 if SIZE <= 8 else 30.0

#: when the current program's ranks part (see :func:`_mark`)
_PARTED = [0.0]


def _mark():
    """Note that the program's ranks part at its next call (what PROMPT is counted from)."""
    _PARTED[0] = time.monotonic()


def _nets():
    return NETS.get(SIZE, [])


def _agree(flag):
    return bool(WORLD.allreduce(int(bool(flag)), op=MPI.MIN))


def _outcome(net, program):
    """Run ``program(net)``; return ``(error type or None, message, seconds, unusable after)``."""
    _PARTED[0] = time.monotonic()
    err = None
    try:
        program(net)
    except DualmpiError as exc:
        err = (type(exc).__name__, str(exc))
    spent = time.monotonic() - _PARTED[0]
    try:
        net.Barrier()
        after = "usable"
    except DualmpiError as exc:
        after = str(exc)
    return err, spent, after


def _run(spec, q, program, watchdog=60):
    net = dualmpi.Comm(WORLD, spec, nodes_per_rank=q, watchdog=watchdog)
    try:
        return WORLD.allgather(_outcome(net, program))
    finally:
        net.Free()


def _every_rank_raised(outs, words=""):
    """Every rank raised within PROMPT seconds (or, its part done, at its next call), naming
    ``words``, and the communicator says it is unusable afterwards."""
    for rank, (err, spent, after) in enumerate(outs):
        if err is None:  # its part was over: the next call raises (the alarm, or its echo)
            if after == "usable":
                return _failed(rank, "returned, and the communicator is still usable")
            continue
        if spent > PROMPT:
            return _failed(rank, f"raised after {spent:.1f} s (more than {PROMPT} s)")
        if words not in err[1] and "unusable" not in err[1]:
            return _failed(rank, f"raised {err}, which does not name {words!r}")
        if "unusable after an earlier error" not in after:
            return _failed(rank, f"then its Barrier said {after!r}")
    return any(err is not None for err, _, _ in outs)


def _failed(rank, why):
    """Say why :func:`_every_rank_raised` fails (pytest shows it above the assertion)."""
    print(f"rank {rank} {why}")
    return False


def _allreduce(net, dtype=np.float64, op=MPI.SUM, n=3, scale=1):
    a = np.arange(n, dtype=dtype) * scale + RANK
    b = np.zeros_like(a)
    net.Allreduce(a, b, op=op)
    return b


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("case", range(2))
def test_a_new_signature_on_one_rank_among_repeated_ones(case):
    """Both ranks Barrier; then rank 0 repeats the Barrier while the others make a first Bcast
    (the reproduction of issue 22): the ranks that skip the check hear the ones that check
    on the alarm line, and every rank raises at once (before: the watchdog, 120 s)."""
    if case >= len(_nets()):
        pytest.skip("no network")
    spec, q = _nets()[case]

    def program(net):
        net.Barrier()
        if RANK == 0:
            net.Barrier()
        else:
            net.Bcast(np.zeros(3), root=0)

    outs = _run(spec, q, program)
    assert _agree(_every_rank_raised(outs, "checked its arguments")), outs


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("case", range(2))
def test_bad_arguments_on_one_rank_in_a_repeated_call(case):
    """One rank's receive buffer too small for an Alltoall every rank has run before: that
    rank raises its own InputError, every other rank an error naming it, in well under a
    second (before: the bad rank waited in the check, the others in the rounds, 120 s)."""
    if case >= len(_nets()):
        pytest.skip("no network")
    spec, q = _nets()[case]
    bad = SIZE - 1

    def program(net):
        s, r = np.zeros(2 * SIZE), np.zeros(2 * SIZE)
        net.Alltoall(s, r)
        _mark()
        net.Alltoall(s, np.zeros(2 * SIZE - (1 if RANK == bad else 0)))

    outs = _run(spec, q, program)
    mine = outs[bad][0] is not None and outs[bad][0][0] == "InputError" and \
        "Alltoall recvbuf" in outs[bad][0][1]
    others = _every_rank_raised(outs[:bad] + outs[bad + 1:], f"rank {bad} checked its arguments")
    assert _agree(mine and others), outs


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("what", ["dtype", "op", "method", "scatter-root-none", "spec-count",
                                  "alternating-dtype"])
def test_repeated_calls_that_differ_are_caught(what):
    """Item 3 of issue 23: after a signature has been agreed, one rank's call differs in
    what its plan does not show — a dtype of the same size, another operation, another
    method whose plan has the same shape — and no rank returns the mixed data.  Also where
    the others repeat a remembered call from C: buffer specs written in the call (rank 0's
    count differs) and one of two sets of buffers in turn (rank 0's viewed as int64)."""
    if not _nets():
        pytest.skip(f"no network for {SIZE} ranks")
    spec, q = _nets()[0]

    if what == "scatter-root-none":
        # mpi4py reads recvbuf=None at the root as IN_PLACE: correct, repeated, no error
        net = dualmpi.Comm(WORLD, spec, nodes_per_rank=q, watchdog=60)
        ok = True
        for i in range(3):
            send = np.arange(2 * SIZE, dtype=np.float64) + i if RANK == 0 else None
            recv = None if RANK == 0 else np.zeros(2)
            net.Scatter(send, recv, root=0)
            ref_send = np.arange(2 * SIZE, dtype=np.float64) + i if RANK == 0 else None
            ref = None if RANK == 0 else np.zeros(2)
            WORLD.Scatter(ref_send, ref if RANK else MPI.IN_PLACE, root=0)
            ok = ok and (RANK == 0 or np.array_equal(recv, ref))
        net.Free()
        assert _agree(ok)
        return

    sets = [(np.zeros(4 * SIZE), np.zeros(4 * SIZE)) for _ in range(2)]

    def program(net):
        for _ in range(2):
            _allreduce(net)
            _allreduce(net, op=MPI.MAX)
            net.Allgather(np.zeros(1), np.zeros(SIZE))
        for i in range(6):
            a, b = sets[i % 2]
            if what == "spec-count":
                net.Alltoall([a, MPI.DOUBLE], [b, MPI.DOUBLE])
            else:
                net.Alltoall(a, b)
        _mark()
        a, b = sets[0]
        if what == "spec-count":
            count = 3 if RANK == 0 else 4  # per block
            net.Alltoall([a, count, MPI.DOUBLE], [b, count, MPI.DOUBLE])
        elif what == "alternating-dtype":
            net.Alltoall(*((a.view(np.int64), b.view(np.int64)) if RANK == 0 else (a, b)))
        elif what == "dtype":
            _allreduce(net, dtype=np.int64 if RANK == 0 else np.float64)
        elif what == "op":
            _allreduce(net, op=MPI.MAX if RANK == 0 else MPI.SUM)
        else:  # rank 0's Alltoallv exchanges its count table as an allgather of the same size
            if RANK == 0:
                net.Alltoallv([np.zeros(SIZE), [1] * SIZE], [np.zeros(SIZE), [1] * SIZE])
            else:
                net.Allgather(np.zeros(1), np.zeros(SIZE))

    outs = _run(spec, q, program)
    assert _agree(_every_rank_raised(outs)), outs


@pytest.mark.mpi(min_size=2)
def test_a_rank_that_skips_a_call_of_a_loop():
    """One rank skips one Allreduce of a loop: calls are matched in order, as MPI matches
    them, so the ranks combine call k with call k; where the counts part, every rank raises
    (before: four calls of wrong sums, then the watchdog)."""
    if not _nets():
        pytest.skip(f"no network for {SIZE} ranks")
    spec, q = _nets()[0]

    def program(net):
        for i in range(6):
            if i == 2:
                _mark()
            if RANK == 1 and i == 2:
                continue
            _allreduce(net, scale=i)

    outs = _run(spec, q, program)
    assert _agree(_every_rank_raised(outs)), outs


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("case", range(2))
@pytest.mark.parametrize("who", ["first", "last", "first-no-watchdog"])
@pytest.mark.parametrize("when", [2, 0])
def test_a_nonblocking_call_among_repeated_blocking_ones(case, who, when):
    """The last item of issue 22: after two Allreduces, one rank starts an Iallreduce and
    waits for it where the others make a third Allreduce (a repeated signature: no argument
    check).  MPI never matches the two; every rank raises at once, naming the nonblocking
    call (before: the watchdog).  Rank 0 hears every other rank's nonblocking notice; the
    others find rank 0's call by probing for its mode while they wait (the watchdog's thread:
    within a fraction of a second), or, with no watchdog (``first-no-watchdog``: no thread to
    probe), hear rank 0's notice.  ``when=0``: the first call, where the blocking ranks check
    their arguments through rank 0."""
    if case >= len(_nets()):
        pytest.skip("no network")
    dog = 0 if who.endswith("no-watchdog") else 60
    spec, q = _nets()[case]
    odd = SIZE - 1 if who == "last" else 0

    def program(net):
        for _ in range(3):
            if _ == when:
                _mark()
            if RANK == odd and _ == when:
                a = np.arange(3.0) + RANK
                net.Iallreduce(a, np.zeros(3)).Wait()
            else:
                _allreduce(net)

    outs = _run(spec, q, program, watchdog=dog)
    assert _agree(_every_rank_raised(outs, "nonblocking")), outs


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("case", range(2))
def test_rank_0_ahead_of_a_rank_waiting_in_an_earlier_call(case):
    """Rank 0 runs ahead into a nonblocking call while the last rank still waits in the
    blocking call before it (a broadcast from rank 0 that the ranks between are late to
    forward): the last rank's probe finds rank 0's mode of a later call, which is no error.
    Three rounds of it; every result equals MPI's, no rank raises."""
    if case >= len(_nets()):
        pytest.skip("no network")
    spec, q = _nets()[case]
    net = dualmpi.Comm(WORLD, spec, nodes_per_rank=q, watchdog=60)
    got, want, error = [], [], None

    def program(comm, out):
        for k in range(3):
            a = np.arange(4.0) + 10 * k if RANK == 0 else np.zeros(4)
            b = np.arange(3.0) - k if RANK == 0 else np.zeros(3)
            if comm is net and RANK not in (0, SIZE - 1):
                time.sleep(0.6)  # (the last rank waits in the broadcast meanwhile)
            comm.Bcast(a, 0)
            comm.Ibcast(b, 0).Wait()
            out.append((a.copy(), b.copy()))

    try:
        program(net, got)
    except DualmpiError as exc:
        error = str(exc)
    finally:
        net.Free()
    program(WORLD, want)
    ok = error is None and len(got) == len(want) == 3 and \
        all(np.array_equal(x, y) for g, w in zip(got, want) for x, y in zip(g, w))
    assert _agree(ok), (error, got, want)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("case", range(2))
@pytest.mark.parametrize("many", [1, 1500])
def test_a_noted_nonblocking_call_reached_as_a_blocking_one(case, many):
    """The last rank runs ahead: ``many`` nonblocking calls, then one more where the others
    make a blocking one (a repeated signature: no argument check), while the others sleep.
    Its notices reach them before they reach those calls, so they are *noted* (not kept as
    messages: 1500 of them would overflow the ring of kept messages); the blocking call then
    raises the alarm on every rank at once, naming the nonblocking call."""
    if case >= len(_nets()) or (many > 1 and SIZE > 8):
        pytest.skip("no network" if case >= len(_nets()) else "the long run: at most 8 ranks")
    spec, q = _nets()[case]
    odd = SIZE - 1

    def program(net):
        _allreduce(net)
        _allreduce(net)  # (the signature is known: the third call repeats it)
        a = np.arange(3.0) + RANK
        reqs = [net.Iallreduce(a, np.zeros(3)) for _ in range(many)]
        if RANK != odd:
            time.sleep(0.5)  # the odd rank's notices arrive first
        dualmpi.Request.Waitall(reqs)
        _mark()
        if RANK == odd:
            net.Iallreduce(a, np.zeros(3)).Wait()
        else:
            _allreduce(net)

    outs = _run(spec, q, program)
    assert _agree(_every_rank_raised(outs, "nonblocking")), outs


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("case", range(2))
def test_a_nonblocking_call_numbered_as_rank_0s_next_one(case):
    """Rank 0 makes call t a blocking broadcast of its own (which waits for no one) and call t+1
    an Ibcast, where the others make call t that Ibcast: their nonblocking request of that
    number meets rank 0's of call t+1, whose mode carries its call number, so they raise at
    once, naming the call made blocking, and rank 0 (its calls done) at its next call at the
    latest (before, on one node per rank: no rank raised, the others took rank 0's data of call
    t+1 for their call t and went on)."""
    if case >= len(_nets()):
        pytest.skip("no network")
    spec, q = _nets()[case]

    def program(net):
        buf = np.arange(4.0) if RANK == 0 else np.zeros(4)
        for _ in range(2):  # (both remembered: the repeats below skip every check)
            net.Bcast(buf, 0)
            net.Ibcast(buf, 0).Wait()
        _mark()
        if RANK == 0:
            net.Bcast(buf, 0)
        net.Ibcast(buf, 0).Wait()

    outs = _run(spec, q, program)
    assert _agree(_every_rank_raised(outs, "blocking")), outs


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("case", range(2))
def test_rank_0s_request_takes_no_data_of_another_call(case):
    """As above with an Iallreduce: the others' request of call t sends its round 0 before it
    compares rank 0's mode, and those messages reach rank 0's request of the same number, which
    is its call t+1.  Their trailers carry the call number, so rank 0's request fails in its
    Wait (or rank 0 hears the others' alarm first) instead of combining the others' call t into
    its result (before, on one node per rank, rank 0's Wait returned a result)."""
    if case >= len(_nets()):
        pytest.skip("no network")
    spec, q = _nets()[case]

    def program(net):
        a, b = np.arange(4.0) + RANK, np.zeros(4)
        for _ in range(2):  # (both remembered: the repeats below skip every check)
            net.Bcast(a, 0)
            net.Iallreduce(a, b).Wait()
        _mark()
        if RANK == 0:
            net.Bcast(a, 0)
        net.Iallreduce(a, b).Wait()

    outs = _run(spec, q, program)
    ok = True
    for rank, (err, spent, after) in enumerate(outs):
        if err is None:
            ok = _failed(rank, "returned the result of its Iallreduce")
        elif spent > PROMPT:
            ok = _failed(rank, f"raised after {spent:.1f} s (more than {PROMPT} s)")
        elif after == "usable":
            ok = _failed(rank, "raised, and the communicator is still usable")
    assert _agree(ok), outs


@pytest.mark.mpi
def test_nonblocking_and_blocking_calls_mixed_correctly():
    """A correct program mixing nonblocking and blocking calls of one signature, requests
    left open across blocking calls, ranks at different speeds: the nonblocking notices are
    dropped by the ranks that made those calls nonblocking too, no rank raises, every result
    equals MPI's."""
    ok = True
    for spec, q in _nets() or ([("hypercube:n=0", 1)] if SIZE == 1 else []):
        net = dualmpi.Comm(WORLD, spec, nodes_per_rank=q, watchdog=60)
        for i in range(4):
            if RANK == 0 and i % 2:
                time.sleep(0.05)
            a = np.arange(4, dtype=np.float64) + RANK + i
            early, mine, late, ref = (np.zeros(4) for _ in range(4))
            req = net.Iallreduce(a, early)
            net.Allreduce(a, mine)
            req2 = net.Iallreduce(a * 2, late)
            buf = np.arange(3.0) if RANK == 0 else np.zeros(3)
            net.Bcast(buf, root=0)
            req.Wait()
            req2.Wait()
            WORLD.Allreduce(a, ref)
            ok = ok and np.array_equal(early, ref) and np.array_equal(mine, ref)
            ok = ok and np.array_equal(late, 2 * ref) and np.array_equal(buf, np.arange(3.0))
        net.Barrier()
        net.Free()
    assert _agree(ok)


@pytest.mark.mpi
def test_correct_programs_are_not_disturbed():
    """A correct program mixing new and repeated signatures of every kind, with ranks at
    different speeds (rank 0 sleeps): ranks ahead send notices and vectors about later calls,
    which the others keep for their turn; every result equals MPI's."""
    ok = True
    for spec, q in _nets() or ([("hypercube:n=0", 1)] if SIZE == 1 else []):
        net = dualmpi.Comm(WORLD, spec, nodes_per_rank=q, watchdog=60)
        for i in range(4):
            if RANK == 0 and i % 2:
                time.sleep(0.05)
            for n in (3, 3 + i):
                a = np.arange(n, dtype=np.float64) + RANK + i
                mine, ref = np.zeros(n), np.zeros(n)
                net.Allreduce(a, mine)
                WORLD.Allreduce(a, ref)
                ok = ok and np.array_equal(mine, ref)
                buf = np.arange(n, dtype=np.int32) if RANK == i % SIZE else np.zeros(n, np.int32)
                ref = buf.copy()
                net.Bcast(buf, root=i % SIZE)
                WORLD.Bcast(ref, root=i % SIZE)
                ok = ok and np.array_equal(buf, ref)
            net.Barrier()
        net.Free()
    assert _agree(ok)

