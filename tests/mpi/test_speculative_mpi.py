"""MPI tests of the v-variants' speculative repeats against ``MPI.COMM_WORLD``'s own calls.

A v-variant call repeated on every rank runs its last plan while the count table is
exchanged (``dualmpi.calls._vector_call``; zero-copy from its second repeat where the rank
moves ``calls.ZERO_COPY_ABOVE`` bytes or more); when the table shows a change (new counts,
new buffer objects on some ranks, a rank's mistake) every rank runs the call again.  Each test
runs a script of calls on a fresh communicator — repeats, counts that change on every rank,
new buffers on some ranks only, a root that moves, a call another method interrupts, a
rank's mistake — and compares every result with MPI's, gaps included.  Every rank finishes
its communication, then the ranks agree on the verdict.  A network of several nodes per
rank does not speculate (its plans do not merge with the table's:
``dualmpi.engine.plan.merge``), nor does a run without the compiled loop
(``DUALMPI_CLOOP=0``: ``calls._can_speculate``): there every call must be a full one.

Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi/test_speculative_mpi.py``
at N = 1, 2, 4, 8, 32 or 64.
"""

import numpy as np
import pytest

from dualmpi.engine import cloop
from collective_cases import (MPI, NETS, NETWORKS, RANK, SIZE, WORLD, agree, data, error_of,
                              errors_everywhere, fresh, operands, sentinel, v_counts, v_displs)

LAST = SIZE - 1
#: (step, what): counts change at 4 and 8; odd ranks pass new buffer objects (same values)
#: at 6, rank 0 alone at 10; the root moves at 12; an Allgatherv interrupts at 9; the
#: last rank passes a count no other rank agrees with at 13.
STEPS = 16
METHODS = ("Scatterv", "Gatherv", "Allgatherv", "Alltoallv", "Reduce_scatter")


def speculates(index):
    """True when the network of ``index`` speculates: one node per rank, and the compiled
    loop (which runs the plan merged with the count table's in one C call)."""
    return NETWORKS[SIZE][index][1] == 1 and cloop.load() is not None


class _Case:
    """One method's buffers for one counts seed (remade when ``renew`` asks); ``scale``
    multiplies every count."""

    def __init__(self, method, seed, root, scale=1):
        self.method, self.seed, self.root = method, seed, root
        if method == "Alltoallv":
            m = v_counts(5, seed, (SIZE, SIZE)) * scale
            self.scounts = m[RANK].copy()
            self.sdispls = np.concatenate(([0], np.cumsum(self.scounts)[:-1])).astype(np.int64)
            self.rcounts = m[:, RANK].copy()
            self.rdispls, self.length = v_displs(self.rcounts, 1, range(SIZE - 1, -1, -1))
        else:
            self.counts = v_counts(6, seed) * scale
            self.displs, self.length = v_displs(self.counts, 1, range(SIZE - 1, -1, -1))
        self.make()

    def make(self):
        """New buffer objects with the same values."""
        m, seed = self.method, self.seed
        if m == "Scatterv":
            self.send = data(np.float64, self.length, seed) if RANK == self.root else None
            self.recv = sentinel(np.float64, int(self.counts[RANK]))
        elif m in ("Gatherv", "Allgatherv"):
            self.send = data(np.float64, int(self.counts[RANK]), seed)
            size = self.length if m == "Allgatherv" or RANK == self.root else 0
            self.recv = sentinel(np.float64, size)
        elif m == "Alltoallv":
            self.send = data(np.int32, int(self.scounts.sum()), seed)
            self.recv = sentinel(np.int32, self.length)
        else:
            self.send = operands(np.int64, int(self.counts.sum()), "SUM", seed)
            self.recv = sentinel(np.int64, int(self.counts[RANK]))

    def call(self, comm, recv, mistake=False):
        """Run the method on ``comm`` into ``recv`` (``mistake``: with one element too many
        in this rank's receive or send count, which no other rank agrees with)."""
        m, root, d = self.method, self.root, MPI.DOUBLE
        if m == "Scatterv":
            send = None if self.send is None else [self.send, (self.counts, self.displs), d]
            comm.Scatterv(send, sentinel(np.float64, recv.size + 1) if mistake else recv,
                          root=root)
        elif m in ("Gatherv", "Allgatherv"):
            send = data(np.float64, self.send.size + 1) if mistake else self.send
            spec = [recv, (self.counts, self.displs), d]
            if m == "Gatherv":
                comm.Gatherv(send, spec if RANK == root else None, root=root)
            else:
                comm.Allgatherv(send, spec)
        elif m == "Alltoallv":
            rcounts = self.rcounts + (np.arange(SIZE) == 0) if mistake else self.rcounts
            comm.Alltoallv([self.send, (self.scounts, self.sdispls), MPI.INT32_T],
                           [recv, (rcounts, self.rdispls), MPI.INT32_T])
        else:
            comm.Reduce_scatter(self.send, sentinel(np.int64, recv.size + 1) if mistake
                                else recv, self.counts, MPI.SUM)


def _merged_apart(run):
    """The messages of ``run``'s merged plans whose payload travels apart from its trailer
    (``engine.mpi.APART``: the count table's rows go with the trailer, the plan's blocks alone)."""
    return sum(late for _, merged in run.companions.values() if merged is not None
               for _, late, _ in merged._apart)


def _script(net, method, scale=1, apart=None):
    """Run the script (every count times ``scale``); return ``(problems, speculated,
    zero)`` on this rank, ``zero`` the calls made when the method's remembered call ran
    zero-copy, its plan merged with the count table's (``apart``, a list: those calls'
    messages sent apart from their trailers appended)."""
    problems, speculated, zero, case = [], 0, 0, None
    other = _Case("Allgatherv", 99, 0)
    for step in range(STEPS):
        seed = 1 + (step >= 4) + (step >= 8)
        root = LAST if step < 12 else 0
        if case is None or case.seed != seed or case.root != root:
            case = _Case(method, seed, root, scale)
        elif (step == 6 and RANK % 2) or (step == 10 and RANK == 0):
            case.make()
        if step == 9:
            other.recv[...] = sentinel(np.float64, other.recv.size)
            other.call(net, other.recv)
            ref = sentinel(np.float64, other.recv.size)
            other.call(WORLD, ref)
            if other.recv.tobytes() != ref.tobytes():
                problems.append((step, "the Allgatherv between"))
        if step == 13:  # the last rank's mistake: every rank hears of it
            err = error_of(lambda: case.call(net, case.recv, mistake=(RANK == LAST)))
            errs = errors_everywhere(err)
            if not all(e is not None and e[0] == "InputError" for e in errs):
                problems.append((step, errs))
            continue
        case.recv[...] = sentinel(case.recv.dtype, case.recv.size)
        was = method in net._v_spec
        memo = net._v_memo.get(method)
        merged = memo is not None and memo.pair is not None and memo.run.absolute
        zero += merged
        case.call(net, case.recv)
        if merged and apart is not None:
            apart.append(_merged_apart(memo.run))
        speculated += was
        ref = sentinel(case.recv.dtype, case.recv.size)
        case.call(WORLD, ref)
        if case.recv.tobytes() != ref.tobytes():
            problems.append((step, "differs from MPI"))
    return problems, speculated, zero


@pytest.mark.mpi
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("index", NETS)
def test_speculative_repeats_match_mpi(index, method):
    """Every call of the script equals MPI's, and most calls ran speculatively."""
    net = fresh(index)
    try:
        problems, speculated, _ = _script(net, method)
    finally:
        net.Free()
    # the first call of each counts seed and root, and the call after the mistake, are
    # full calls; the others (repeats, new buffers, after the Allgatherv) speculate
    enough = speculated >= STEPS - 7 if speculates(index) else speculated == 0
    assert agree(not problems and enough), (problems, speculated)


def _counted(net, case, step, problems):
    """Run ``case`` on ``net``; return how many collectives that was (``stats()``), and add
    ``step`` to ``problems`` when the result is not MPI's."""
    case.recv[...] = sentinel(case.recv.dtype, case.recv.size)
    before = net.stats()["collectives"]
    case.call(net, case.recv)
    count = net.stats()["collectives"] - before
    ref = sentinel(case.recv.dtype, case.recv.size)
    case.call(WORLD, ref)
    if case.recv.tobytes() != ref.tobytes():
        problems.append((step, "differs from MPI"))
    return count


@pytest.mark.mpi
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("index", NETS)
def test_new_buffers_with_the_same_counts_run_once(index, method):
    """Calls with new buffer objects on every rank, their counts unchanged, run the plan once
    beside the table (two collectives a call: the table's and the plan's, as a first call),
    not again after a speculative run; every result equals MPI's."""
    net = fresh(index)
    problems, per_call = [], []
    try:
        case = _Case(method, 3, LAST)
        for step in range(4):
            case.make()  # new objects, the same values and counts
            per_call.append(_counted(net, case, step, problems))
        speculating = method in net._v_spec
    finally:
        net.Free()
    # (without speculation, each call is a full one: the table's and the plan's too)
    assert agree(not problems and per_call == [2] * 4 and speculating == speculates(index)), \
        (problems, per_call)


@pytest.mark.mpi
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("index", NETS)
def test_counts_that_change_every_call_stop_the_speculation(index, method):
    """Calls with counts A, A, then B, A, B, A, A, A, A: the speculative run of step 2 fails
    (new counts), and the calls that do not repeat their predecessor's counts do not
    speculate (steps 3-5: the table and the plan, two collectives a call, not the last plan
    run again beside the table first); a repeat speculates again from the call after it
    (steps 7 and 8).  Every result equals MPI's."""
    net = fresh(index)
    problems, was, per_call = [], [], []
    try:
        cases = {"A": _Case(method, 30, LAST), "B": _Case(method, 31, LAST)}
        for step, name in enumerate("AABABAAAA"):
            was.append(method in net._v_spec)
            per_call.append(_counted(net, cases[name], step, problems))
    finally:
        net.Free()
    want = [False, True, True, False, False, False, False, True, True] if speculates(index) \
        else [False] * 9
    assert agree(not problems and was == want and per_call[3:6] == [2, 2, 2]), \
        (problems, was, per_call)


@pytest.mark.mpi
@pytest.mark.parametrize("other", ["counts", "buffers"])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("index", NETS)
def test_calls_that_alternate_are_repeated_from_memory(monkeypatch, index, method, other):
    """A program that alternates two calls of a method, with other counts (A B A B ...) or
    the same counts on other buffers: every result equals MPI's, and from the fourth call on
    no call reads its arguments (each repeats one of the method's remembered calls, its row
    and then its plan or both at once, whatever the others do)."""
    import dualmpi.calls

    reads = []
    full = dualmpi.calls._read
    monkeypatch.setattr(dualmpi.calls, "_read", lambda read: reads.append(1) or full(read))
    net = fresh(index)
    problems, late = [], []
    try:
        cases = [_Case(method, 30, LAST), _Case(method, 31 if other == "counts" else 30, LAST)]
        for step in range(8):
            reads.clear()
            _counted(net, cases[step % 2], step, problems)
            if step >= 3:
                late.append(len(reads))
    finally:
        net.Free()
    assert agree(not problems and not any(late)), (problems, late)


@pytest.mark.mpi
@pytest.mark.parametrize("scale", (1, 1024))
@pytest.mark.parametrize("index", NETS)
def test_in_place_repeats_with_a_derived_datatype_match_mpi(index, scale):
    """``Allgatherv(MPI.IN_PLACE, [recv, (counts, displs), pair])`` with a derived datatype of
    two doubles, repeated, its counts (times ``scale``: blocks of up to 64 KiB, which copy
    through the store, in place) changed at step 3 and new buffers at step 5: every result
    equals MPI's (gaps included), and the repeats ran speculatively."""
    pair = MPI.DOUBLE.Create_contiguous(2).Commit()
    net = fresh(index)
    problems, speculated = [], 0
    try:
        for step in range(7):
            counts = v_counts(4, 20 + (step >= 3)) * scale
            displs, length = v_displs(counts, 1, range(SIZE - 1, -1, -1))
            if step in (0, 3, 5):
                mine = data(np.float64, 2 * int(counts[RANK]), step >= 3)
            spec = lambda buf: [buf, (counts, displs), pair]  # noqa: E731
            recv, ref = sentinel(np.float64, 2 * length), sentinel(np.float64, 2 * length)
            at = 2 * int(displs[RANK])
            recv[at:at + mine.size] = ref[at:at + mine.size] = mine
            was = "Allgatherv" in net._v_spec
            net.Allgatherv(MPI.IN_PLACE, spec(recv))
            speculated += was
            WORLD.Allgatherv(MPI.IN_PLACE, spec(ref))
            if recv.tobytes() != ref.tobytes():
                problems.append((step, "differs from MPI"))
    finally:
        net.Free()
        pair.Free()
    assert agree(not problems and (speculated >= 4 if speculates(index) else speculated == 0)), \
        (problems, speculated)


@pytest.mark.mpi
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("index", NETS)
def test_large_speculative_repeats_run_zero_copy_and_match_mpi(index, method):
    """The script with every count 2048 times larger (blocks of up to 96 KiB; from 32 ranks,
    where a rank receives from more, 16384 / ranks times: still over 32 KiB, and over
    ``calls.ZERO_COPY_ABOVE``): a rank that
    moves ``calls.ZERO_COPY_ABOVE`` bytes or more runs its repeats zero-copy, its plan merged
    with the count table's, while a rank whose arguments changed runs the store's merged plan
    beside it (the same messages).  Every call equals MPI's (gaps untouched), as many calls
    speculate as at the small size, and somewhere calls were made with the zero-copy merged
    plan remembered (``Reduce_scatter`` too: its blocks start as one copy from the send
    buffer to where they are combined; not on one rank: its only block is its own), whose
    messages of blocks over ``engine.mpi.APART`` bytes travel apart from their trailers (the
    count table's rows with the trailer: a payload and trailer in one hindexed message are
    copied through Open MPI's buffers)."""
    net = fresh(index)
    apart = []
    try:
        problems, speculated, zero = _script(net, method, scale=min(2048, 16384 // SIZE),
                                             apart=apart)
    finally:
        net.Free()
    enough = speculated >= STEPS - 7 if speculates(index) else speculated == 0
    some = WORLD.allreduce(zero) > 0 or not speculates(index) or SIZE == 1
    split = WORLD.allreduce(sum(apart)) > 0 or not speculates(index) or SIZE == 1
    assert agree(not problems and enough and some and split), (problems, speculated, zero,
                                                              apart)
