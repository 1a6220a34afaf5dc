"""MPI tests of ``dualmpi.Comm.Alltoall``, ``Alltoallv`` and ``Alltoallw`` against COMM_WORLD's.

Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi/test_coll_alltoall_mpi.py``
at N = 1, 2, 4, 8, 32 or 64 (the networks: :data:`collective_cases.NETWORKS`).  Receive
buffers start as a sentinel, so bytes MPI leaves alone (the gaps between pieces) must stay
so; every rank finishes its communication, then the ranks agree on the verdict.  At one
rank Open MPI's own Alltoallw (coll/self) scales byte displacements by the extent, so
there the reference is MPI's ``Sendrecv`` to itself, block by block.
"""

import numpy as np
import pytest

from collective_cases import (COUNTS, DTYPES, ERROR_NETS, EVERY, MPI, NETS, RANK, SIZE, WORLD,
                              agree, bound_then_copied, check_bad_call, data, expect_error, freed,
                              fresh, mpi_type, network, same, sentinel, v_counts, v_displs)
from collective_cases import free_networks  # noqa: F401 - frees the module's communicators

LAST = SIZE - 1


def _alltoall(net, dtype, n, in_place):
    """Alltoall ``n`` elements a pair (``in_place``: False, None or MPI.IN_PLACE)."""
    send = data(dtype, n * SIZE)
    if in_place is not False:
        mine, ref = send.copy(), send.copy()
        net.Alltoall(in_place, mine)
        WORLD.Alltoall(in_place, ref)
        return same(mine, ref)
    mine, ref = sentinel(dtype, n * SIZE), sentinel(dtype, n * SIZE)
    net.Alltoall(send, mine)
    WORLD.Alltoall(send.copy(), ref)
    return same(mine, ref) and same(send, data(dtype, n * SIZE))


@pytest.mark.mpi
@pytest.mark.parametrize("index", NETS)
def test_alltoall_matches_mpi(index):
    """Every dtype and count (0 included), and in place (``MPI.IN_PLACE`` and ``None``),
    equal MPI_Alltoall."""
    net = network(index)
    problems = [(name, n) for name, dtype, n in EVERY if not _alltoall(net, dtype, n, False)]
    for k, (name, dtype) in enumerate(DTYPES.items()):
        in_place = (MPI.IN_PLACE, None)[k % 2]
        n = COUNTS[k % len(COUNTS)]
        if not _alltoall(net, dtype, n, in_place):
            problems.append((name, n, in_place))
    assert agree(not problems), problems


#: Alltoallv buffer forms.
V_FORMS = ("counts", "counts-displs", "counts-displs-datatype", "four-items")


def _alltoallv(net, dtype, matrix, form, in_place=False):
    """Alltoallv with ``matrix[i, j]`` elements from rank i to j; True when it equals MPI's."""
    scounts, rcounts = matrix[RANK], matrix[:, RANK]
    dt = mpi_type(dtype)
    if form == "counts":
        sd, rd, slen, rlen = None, None, int(scounts.sum()), int(rcounts.sum())
    else:  # send in reverse rank order, receive rotated, gaps of 3 elements
        sd, slen = v_displs(scounts, 3, range(SIZE - 1, -1, -1))
        rd, rlen = v_displs(rcounts, 3, np.roll(np.arange(SIZE), RANK))
    send = data(dtype, slen, int(matrix.sum()))

    def spec(buf, counts, displs):
        return {"counts": lambda: [buf, counts],
                "counts-displs": lambda: [buf, (counts, displs)],
                "counts-displs-datatype": lambda: [buf, (counts, displs), dt],
                "four-items": lambda: [buf, counts, displs, dt]}[form]()

    if in_place is not False:  # MPI takes the send counts from the receive side: symmetric
        mine, ref = sentinel(dtype, rlen), sentinel(dtype, rlen)
        fill = data(dtype, rlen, 3)
        mine[:], ref[:] = fill, fill
        net.Alltoallv(in_place, spec(mine, rcounts, rd))
        WORLD.Alltoallv(in_place, spec(ref, rcounts, rd))
        return same(mine, ref)
    mine, ref = sentinel(dtype, rlen), sentinel(dtype, rlen)
    net.Alltoallv(spec(send, scounts, sd), spec(mine, rcounts, rd))
    WORLD.Alltoallv(spec(send.copy(), scounts, sd), spec(ref, rcounts, rd))
    return same(mine, ref) and same(send, data(dtype, slen, int(matrix.sum())))


@pytest.mark.mpi
@pytest.mark.parametrize("form", V_FORMS)
@pytest.mark.parametrize("index", NETS)
def test_alltoallv_matches_mpi(index, form):
    """Uneven counts (zeros included, all zero too) in every buffer form, several dtypes, in
    place too (a symmetric count matrix), equal MPI_Alltoallv."""
    net = network(index)
    problems = []
    for k, (scale, seed) in enumerate(((0, 0), (1, 1), (9, 2), (60, 3))):
        name, dtype, _ = EVERY[(7 * V_FORMS.index(form) + 5 * k) % len(EVERY)]
        matrix = v_counts(scale, seed, (SIZE, SIZE)) if scale else \
            np.zeros((SIZE, SIZE), np.int64)
        if not _alltoallv(net, dtype, matrix, form):
            problems.append((name, scale))
    sym = v_counts(7, 4, (SIZE, SIZE))
    sym = np.triu(sym) + np.triu(sym, 1).T
    for in_place in (MPI.IN_PLACE, None):
        if not _alltoallv(net, np.int64, sym, form, in_place):
            problems.append(("in place", in_place))
    assert agree(not problems), problems


def _w_types():
    """Datatype pairs ``(send type, send count per unit, recv type, recv count per unit)`` of
    equal signatures: predefined, and derived on one side against predefined on the other."""
    INT, DOUBLE = MPI.INT, MPI.DOUBLE
    pair_s = MPI.Datatype.Create_struct([1, 1], [0, 8], [INT, DOUBLE]).Commit()
    pair_r = MPI.Datatype.Create_struct([1, 1], [4, 16], [INT, DOUBLE]).Commit()
    every_other = INT.Create_vector(3, 1, 2).Commit()
    return [(DOUBLE, 1, DOUBLE, 1), (INT, 1, INT, 1), (every_other, 1, INT, 3),
            (MPI.SIGNED_CHAR, 3, MPI.SIGNED_CHAR, 3), (pair_s, 1, pair_r, 1)]


W_TYPES = _w_types()


def _w_layout(counts, types, order, gap):
    """Byte displacements placing ``counts[r]`` elements of ``types[r]`` in rank order ``order``."""
    displs = np.zeros(SIZE, np.int64)
    at = gap
    for r in order:
        displs[r] = at
        _, extent = types[r].Get_extent()
        true_lb, true_extent = types[r].Get_true_extent()
        if counts[r]:
            at += true_lb + (int(counts[r]) - 1) * extent + true_extent
        at += gap
        at += (-at) % 8  # keep every block 8-byte aligned
    return displs, at


def _alltoallw(net, units, kinds, in_place=False):
    """Alltoallw: ``units[i, j]`` units of type pair ``kinds[i, j]`` from rank i to j."""
    stypes = [W_TYPES[kinds[RANK, j]][0] for j in range(SIZE)]
    scounts = np.array([units[RANK, j] * W_TYPES[kinds[RANK, j]][1] for j in range(SIZE)])
    rtypes = [W_TYPES[kinds[i, RANK]][2] for i in range(SIZE)]
    rcounts = np.array([units[i, RANK] * W_TYPES[kinds[i, RANK]][3] for i in range(SIZE)])
    sd, slen = _w_layout(scounts, stypes, range(SIZE - 1, -1, -1), 8)
    rd, rlen = _w_layout(rcounts, rtypes, np.roll(np.arange(SIZE), RANK), 8)
    send = data(np.uint8, slen, int(units.sum()))
    mine, ref = sentinel(np.uint8, rlen), sentinel(np.uint8, rlen)
    if in_place is not False:
        mine[:] = ref[:] = data(np.uint8, rlen, 5)
        net.Alltoallw(in_place, [mine, (rcounts, rd), rtypes])
        _reference_w(in_place, None, [ref, (rcounts, rd), rtypes], (rcounts, rd, rtypes))
        return same(mine, ref)
    net.Alltoallw([send, (scounts, sd), stypes], [mine, (rcounts, rd), rtypes])
    _reference_w([send.copy(), (scounts, sd), stypes], (scounts, sd, stypes),
                 [ref, (rcounts, rd), rtypes], (rcounts, rd, rtypes))
    return same(mine, ref) and same(send, data(np.uint8, slen, int(units.sum())))


def _reference_w(sendspec, s, recvspec, r):
    """MPI's Alltoallw; at one rank its Sendrecv to itself (coll/self misplaces blocks)."""
    if SIZE > 1:
        WORLD.Alltoallw(sendspec, recvspec)
        return
    rbuf = recvspec[0]
    counts, displs, types = r
    if s is None:  # in place: the block is already where it belongs
        return
    sbuf = sendspec[0]
    scounts, sdispls, stypes = s
    WORLD.Sendrecv([sbuf[int(sdispls[0]):], int(scounts[0]), stypes[0]], 0, 0,
                   [rbuf[int(displs[0]):], int(counts[0]), types[0]], 0, 0)


@pytest.mark.mpi
@pytest.mark.parametrize("index", NETS)
def test_alltoallw_matches_mpi(index):
    """Per-pair counts (zeros included) and datatypes (predefined, vector, struct, a
    derived type against a predefined one), byte displacements with gaps, in place too,
    equal MPI_Alltoallw."""
    net = network(index)
    problems = []
    rng = np.random.default_rng([SIZE, 11])
    for k, scale in enumerate((0, 1, 5, 60)):
        units = v_counts(scale, k, (SIZE, SIZE)) if scale else np.zeros((SIZE, SIZE), np.int64)
        kinds = rng.integers(0, len(W_TYPES), size=(SIZE, SIZE))
        if not _alltoallw(net, units, kinds):
            problems.append(scale)
    units = v_counts(4, 9, (SIZE, SIZE))
    units = np.triu(units) + np.triu(units, 1).T
    kinds = rng.integers(0, 2, size=(SIZE, SIZE))  # the same type on both sides
    kinds = np.triu(kinds) + np.triu(kinds, 1).T
    for in_place in (MPI.IN_PLACE, None):
        if not _alltoallw(net, units, kinds, in_place):
            problems.append(("in place", in_place))
    assert agree(not problems), problems


def _cases():
    """Bad calls: name -> (call(net), words, the bad rank, None for every rank alike, or
    "any": every rank an InputError of its own with ``words``).

    Sizes are ones no other test of this module uses: a signature a rank has already
    agreed on skips the check on that rank (a known limitation).
    """
    first = RANK == 0
    ones = [1] * SIZE
    dbl = [MPI.DOUBLE] * SIZE

    def a2av(scounts, rcounts, n=None):
        n = n or max(sum(scounts), sum(rcounts), 1)
        return lambda net: net.Alltoallv([np.zeros(n), scounts], [np.zeros(n), rcounts])

    return {
        "count-disagrees": (lambda net: net.Alltoall(np.zeros((181 + first) * SIZE),
                                                     np.zeros((181 + first) * SIZE)),
                            "Alltoall: ranks disagree on the piece size (from 1448 to 1456)",
                            None),
        "datatype-disagrees": (lambda net: net.Alltoall(
            np.zeros(191 * SIZE, np.int64 if first else np.float64),
            np.zeros(191 * SIZE, np.int64 if first else np.float64)),
            "Alltoall: ranks disagree on the datatype", None),
        "collective-disagrees": (lambda net: net.Alltoall(np.zeros(193 * SIZE),
                                                          np.zeros(193 * SIZE)) if first else
                                 net.Bcast(np.zeros(193), root=0),
                                 "the ranks called different collectives", "any"),
        "send-recv-dtypes": (lambda net: net.Alltoall(
            np.zeros(197 * SIZE, np.int64 if RANK == LAST else np.float64),
            np.zeros(197 * SIZE)),
            "Alltoall: the send and receive datatypes do not match", LAST),
        "too-small-sendbuf": (lambda net: net.Alltoall(
            [np.zeros(199 * SIZE - (RANK == LAST)), 199, MPI.DOUBLE], np.zeros(199 * SIZE)),
            "Alltoall sendbuf: count 199", LAST),
        "not-committed": (lambda net: freed(MPI.INT.Create_contiguous(2), lambda t: net.Alltoall(
            [np.zeros(2 * 211 * SIZE, np.int32), 211, t], np.zeros(2 * 211 * SIZE, np.int32))),
                          "Alltoall sendbuf: MPI refuses the datatype", None),
        "v-recvcounts-disagree": (a2av([2] * SIZE, [2] * SIZE if RANK != LAST else
                                       [3] * SIZE, 3 * SIZE),
                                  f"Alltoallv: rank {LAST}'s recvcounts do not match what the "
                                  "ranks send it", None),
        "v-collective-disagrees": (lambda net: a2av([5] * SIZE, [5] * SIZE)(net) if first
                                   else net.Alltoallw([np.zeros(5 * SIZE), ([5] * SIZE, [
                                       40 * r for r in range(SIZE)]), dbl],
                                       [np.zeros(5 * SIZE), ([5] * SIZE, [
                                           40 * r for r in range(SIZE)]), dbl]),
                                   "the ranks called different collectives", "any"),
        "v-counts-length": (a2av([1] * (SIZE + (RANK == LAST)), ones, SIZE + 1),
                            f"Alltoallv sendbuf: counts has {SIZE + 1} items, expecting {SIZE}",
                            LAST),
        "v-negative-count": (a2av([-1 if RANK == LAST else 1] * SIZE, ones, SIZE),
                             "Alltoallv sendbuf: negative count", LAST),
        "v-too-small-recvbuf": (lambda net: net.Alltoallv(
            [np.zeros(2 * SIZE), [2] * SIZE],
            [np.zeros(2 * SIZE - (RANK == LAST)), [2] * SIZE]),
            "Alltoallv recvbuf: rank", LAST),
        "w-datatypes-disagree": (lambda net: net.Alltoallw(
            [np.zeros(SIZE), (ones, [8 * r for r in range(SIZE)]), dbl],
            [np.zeros(SIZE, np.int64), (ones, [8 * r for r in range(SIZE)]),
             [MPI.INT64_T if RANK == LAST else MPI.DOUBLE] * SIZE]),
            f"Alltoallw: the datatypes rank {LAST} receives do not match", None),
        "w-types-length": (lambda net: net.Alltoallw(
            [np.zeros(SIZE), (ones, [8 * r for r in range(SIZE)]), dbl],
            [np.zeros(SIZE), (ones, [8 * r for r in range(SIZE)]),
             dbl + [MPI.DOUBLE] * (RANK == LAST)]),
            f"Alltoallw recvbuf: expecting {SIZE} datatypes", LAST),
        "w-not-committed": (lambda net: freed(MPI.DOUBLE.Create_contiguous(1), lambda t:
                                              net.Alltoallw(
            [np.zeros(SIZE), (ones, [8 * r for r in range(SIZE)]), [t] * SIZE],
            [np.zeros(SIZE), (ones, [8 * r for r in range(SIZE)]), dbl])),
            "Alltoallw sendbuf: MPI refuses the datatype", None),
        "w-too-small": (lambda net: net.Alltoallw(
            [np.zeros(SIZE), (ones, [8 * r for r in range(SIZE)]), dbl],
            [np.zeros(SIZE), (ones, [8 * r + 8 * (RANK == LAST) for r in range(SIZE)]), dbl]),
            f"Alltoallw recvbuf: rank {LAST}'s block", LAST),
    }


@pytest.mark.mpi
@pytest.mark.parametrize("case", list(_cases()))
@pytest.mark.parametrize("index", ERROR_NETS)
def test_alltoall_bad_calls(index, case):
    """A rank-divergent or invalid Alltoall(v/w): one InputError on every rank (or the bad
    rank's own and "rejected on rank N" elsewhere); the communicator still works."""
    method = {"v-": "Alltoallv", "w-": "Alltoallw"}.get(case[:2], "Alltoall")
    check_bad_call(index, case, _cases(), method)


@pytest.mark.mpi
@pytest.mark.parametrize("index", ERROR_NETS)
def test_alltoallv_repeated_then_one_rank_changes_its_counts(index):
    """A repeated Alltoallv reuses the verdict of the same count table; a later call in which
    one rank's recvcounts change is one error on every rank, and the calls after it are MPI's."""
    net = network(index)
    counts = [3] * SIZE
    ok = True
    for k in range(4):
        send, got, ref = data(np.float64, 3 * SIZE, k), np.zeros(3 * SIZE), np.zeros(3 * SIZE)
        net.Alltoallv([send, counts], [got, counts])
        WORLD.Alltoallv([send, counts], [ref, counts])
        ok = ok and same(got, ref)
    if SIZE > 1:
        bad = [4] * SIZE if RANK == LAST else counts
        ok_err, errs = expect_error(net, lambda: net.Alltoallv(
            [np.zeros(4 * SIZE), counts], [np.zeros(4 * SIZE), bad]),
            f"Alltoallv: rank {LAST}'s recvcounts do not match what the ranks send it")
        ok = ok and ok_err
    send, got, ref = data(np.float64, 3 * SIZE, 9), np.zeros(3 * SIZE), np.zeros(3 * SIZE)
    net.Alltoallv([send, counts], [got, counts])
    WORLD.Alltoallv([send, counts], [ref, counts])
    assert agree(ok and same(got, ref))


@pytest.mark.mpi
@pytest.mark.parametrize("index", ERROR_NETS)
def test_alltoallv_same_objects_changed_in_place(index):
    """The very argument objects of the previous call, their counts and displacements
    changed in place (the same lists, the same arrays; on every rank alike): the call reads
    them again, and every result equals MPI's -- a remembered call is only taken for the
    same values."""
    net = network(index)
    counts, displs = [2] * SIZE, [2 * r for r in range(SIZE)]
    rcounts, rdispls = [2] * SIZE, [2 * r for r in range(SIZE)]
    send, got, ref = data(np.float64, 3 * SIZE, 1), np.zeros(3 * SIZE), np.zeros(3 * SIZE)
    sspec, rspec = [send, counts, displs, MPI.DOUBLE], [got, rcounts, rdispls, MPI.DOUBLE]
    ok = True
    for step in range(5):
        if step == 2:  # one element more per pair, in the same list objects
            counts[:], rcounts[:] = [3] * SIZE, [3] * SIZE
            displs[:], rdispls[:] = [3 * r for r in range(SIZE)], [3 * r for r in range(SIZE)]
        if step == 4:  # reversed blocks: other displacements, the same counts
            displs[:] = [3 * (SIZE - 1 - r) for r in range(SIZE)]
        send[:] = data(np.float64, 3 * SIZE, step)
        got[:], ref[:] = -1.0, -1.0
        net.Alltoallv(sspec, rspec)
        WORLD.Alltoallv([send, counts, displs, MPI.DOUBLE], [ref, rcounts, rdispls, MPI.DOUBLE])
        ok = ok and same(got, ref)
    assert agree(ok)


@pytest.mark.mpi
@pytest.mark.parametrize("index", ERROR_NETS)
def test_v_calls_repeated_while_one_rank_changes_its_arguments(index, monkeypatch):
    """A Gatherv and an Alltoallv repeated on the same objects; then the last rank sends a
    longer piece (new objects: its send buffer and counts, the root's receive counts), the
    other ranks repeat theirs.  Those ranks' remembered call (matched and run in C, a
    ``VRecall``, where the extension is built, from the first repeat on) exchanges the count
    table, finds it changed and goes on with it: every result equals MPI's, the gaps
    untouched."""
    from dualmpi import calls
    from dualmpi.engine import recall

    net = fresh(index)  # no call before: the first one's table lets the repeats speculate
    module = recall.load()
    ok, kinds, handed = True, [], []
    python_path = calls._vector_call

    def vector_call(comm, method, desc, read, args, exchanged=False):
        if method == "Gatherv":
            handed.append(exchanged)
        return python_path(comm, method, desc, read, args, exchanged)
    monkeypatch.setattr(calls, "_vector_call", vector_call)
    c = [2 + r for r in range(SIZE)]
    d = [int(sum(c[:r])) + 3 * r for r in range(SIZE)]
    send = data(np.float64, c[RANK], 1)
    mine = sentinel(np.float64, d[-1] + c[-1] + 3)
    gspec = [mine, c, d, MPI.DOUBLE]
    a_counts = [RANK + 1] * SIZE  # rank i sends i + 1 to each: receives j + 1 from j
    a_send = data(np.float64, (RANK + 1) * SIZE, 2)
    r_counts = [j + 1 for j in range(SIZE)]
    a_mine = sentinel(np.float64, sum(r_counts))
    aspec = ([a_send, a_counts], [a_mine, r_counts])
    for step in range(5):
        if step == 3:
            c2 = c[:LAST] + [c[LAST] + 4]
            if RANK == LAST:
                send = data(np.float64, c2[LAST], 5)
            if RANK == 0:
                mine = sentinel(np.float64, d[-1] + c2[-1] + 3)
                gspec = [mine, c2, d, MPI.DOUBLE]
            c = c2
        send[:] = data(np.float64, send.size, step)
        mine[:] = sentinel(np.float64, mine.size)
        ref = sentinel(np.float64, mine.size)
        net.Gatherv(send, gspec, root=0)
        WORLD.Gatherv(send, [ref, c, d, MPI.DOUBLE], root=0)
        ok = ok and (RANK != 0 or same(mine, ref))
        a_send[:] = data(np.float64, a_send.size, step)
        a_ref = sentinel(np.float64, a_mine.size)
        net.Alltoallv(*aspec)
        WORLD.Alltoallv([a_send, a_counts], [a_ref, r_counts])
        ok = ok and same(a_mine, a_ref)
        kinds.append(type(net._mGatherv).__name__)
    compiled = net._transport.cloop is not None  # (without it no call is matched in C)
    flips = net._engine.q == 1 and compiled  # it speculates
    net.Free()
    if module is not None and compiled:
        # remembered from the first call, bound on the first repeat (no zero-copy rebinding
        # for pieces this small) and from then on matched in C; at step 3 the ranks whose
        # objects are the same hand the changed table on, the others read their call afresh;
        # at step 4 the repeat finds the table changed again where the call speculates: the
        # ranks that changed their counts at step 3 said it should not speculate next time,
        # and say it can now (``calls._CAN``)
        ok = ok and kinds == ["function", "VRecall", "VRecall", "function",
                              "function" if flips else "VRecall"]
        ok = ok and handed == [False, False, RANK not in (0, LAST), False]
    assert agree(ok), (kinds, handed)


@pytest.mark.mpi
@pytest.mark.parametrize("index", ERROR_NETS)
def test_alltoallv_repeated_with_a_derived_datatype_then_freed(index):
    """A repeated Alltoallv of pairs (a committed contiguous datatype) equals MPI's; the same
    call once that datatype is freed is refused on every rank, not run as before."""
    net = network(index)
    pair = MPI.DOUBLE.Create_contiguous(2).Commit()
    counts = [1] * SIZE
    send, got, ref = data(np.float64, 2 * SIZE, 3), np.zeros(2 * SIZE), np.zeros(2 * SIZE)
    sspec, rspec = [send, counts, pair], [got, counts, pair]
    ok = True
    for _ in range(3):
        got[:] = -1.0
        net.Alltoallv(sspec, rspec)
        WORLD.Alltoallv([send, counts, pair], [ref, counts, pair])
        ok = ok and same(got, ref)
    pair.Free()
    ok_err, errs = expect_error(net, lambda: net.Alltoallv(sspec, rspec),
                                "Alltoallv recvbuf: the datatype is MPI.DATATYPE_NULL")
    assert agree(ok and ok_err), errs



@pytest.mark.mpi
@pytest.mark.parametrize("index", ERROR_NETS)
def test_large_v_calls_repeated_run_zero_copy(index):
    """Alltoallv, Alltoallw, Allgatherv, Gatherv and Scatterv of at least
    ``calls.ZERO_COPY_ABOVE`` bytes per rank,
    repeated on the same objects with the contents changed in place: every result equals MPI's,
    the gaps stay untouched, and from the third call on (one node per rank, no option) the plan
    runs bound to the buffers themselves (zero-copy: ``calls._zero_copy``); Allgatherv in place
    never does."""
    from dualmpi.calls import ZERO_COPY_ABOVE

    net = fresh(index)  # no call before: each method's first call is one it then repeats
    n = ZERO_COPY_ABOVE // 8 + 3  # doubles a block: every rank moves more than ZERO_COPY_ABOVE
    c = [n + r for r in range(SIZE)]
    gap = 2
    d = [int(sum(c[:r])) + gap * r for r in range(SIZE)]
    total = d[-1] + c[-1] + gap
    ok, kinds = True, {}
    mine = {"Alltoallv": sentinel(np.float64, total), "Alltoallw": sentinel(np.float64, total),
            "Allgatherv": sentinel(np.float64, total),
            "Gatherv": sentinel(np.float64, total), "Scatterv": sentinel(np.float64, c[RANK]),
            "inplace": sentinel(np.float64, total)}
    send = {"Alltoallv": data(np.float64, SIZE * (c[RANK] + gap)),
            "Allgatherv": data(np.float64, c[RANK]), "Gatherv": data(np.float64, c[RANK]),
            "Scatterv": data(np.float64, total)}
    a2a_counts = [c[RANK]] * SIZE  # rank i sends c[i] to everyone: receives c[j] from j
    a2a_displs = [k * (c[RANK] + gap) for k in range(SIZE)]
    for step in range(5):
        for key, buf in send.items():
            buf[:] = data(np.float64, buf.size, step)
        ref = {k: sentinel(np.float64, v.size) for k, v in mine.items()}
        for k in mine:
            mine[k][:] = sentinel(np.float64, mine[k].size)
        a2a_send = [send["Alltoallv"], a2a_counts, a2a_displs, MPI.DOUBLE]
        net.Alltoallv(a2a_send, [mine["Alltoallv"], c, d, MPI.DOUBLE])
        WORLD.Alltoallv(a2a_send, [ref["Alltoallv"], c, d, MPI.DOUBLE])
        types = [MPI.DOUBLE] * SIZE
        w_send = [send["Alltoallv"], a2a_counts, [8 * x for x in a2a_displs], types]
        net.Alltoallw(w_send, [mine["Alltoallw"], c, [8 * x for x in d], types])
        WORLD.Alltoallw(w_send, [ref["Alltoallw"], c, [8 * x for x in d], types])
        net.Allgatherv(send["Allgatherv"], [mine["Allgatherv"], c, d, MPI.DOUBLE])
        WORLD.Allgatherv(send["Allgatherv"], [ref["Allgatherv"], c, d, MPI.DOUBLE])
        net.Gatherv(send["Gatherv"], [mine["Gatherv"], c, d, MPI.DOUBLE], root=LAST)
        WORLD.Gatherv(send["Gatherv"], [ref["Gatherv"], c, d, MPI.DOUBLE], root=LAST)
        net.Scatterv([send["Scatterv"], c, d, MPI.DOUBLE], mine["Scatterv"], root=0)
        WORLD.Scatterv([send["Scatterv"], c, d, MPI.DOUBLE], ref["Scatterv"], root=0)
        for buf in (mine["inplace"], ref["inplace"]):
            buf[d[RANK]:d[RANK] + c[RANK]] = data(np.float64, c[RANK], step, 7)
        net.Allgatherv(MPI.IN_PLACE, [mine["inplace"], c, d, MPI.DOUBLE])
        WORLD.Allgatherv(MPI.IN_PLACE, [ref["inplace"], c, d, MPI.DOUBLE])
        ok = ok and all(same(mine[k], ref[k]) for k in mine)
        for method in ("Alltoallv", "Alltoallw", "Allgatherv", "Gatherv", "Scatterv"):
            memo = net._v_memo.get(method)
            kinds.setdefault(method, []).append(bool(memo and getattr(memo.run, "absolute", 0)))
    for method, seen in kinds.items():
        if method == "Allgatherv":
            continue  # the in-place call after it takes its memory
        # bound at the end of the second call, run so from the third on
        want = [False] + [net._zero_copy] * 4
        ok = ok and seen == want
    net.Free()
    assert agree(ok), kinds


@pytest.mark.mpi
@pytest.mark.parametrize("index", ERROR_NETS)
def test_first_calls_of_new_buffers_run_zero_copy(index, monkeypatch):
    """Fixed-count and v-variant calls made each time on new buffers (pieces of
    ``calls.ZERO_COPY_ABOVE``; the
    threshold ``calls.ZERO_COPY_FIRST`` out of the way) run on a runner bound to those buffers
    for that call alone (one node per rank, no option), released after it, an in-place
    ``Allgather`` too (its own piece already in place): every result equals MPI's, the gaps
    stay untouched, the send buffers too, derived-datatype calls that pack copy as before, and
    the link counts equal those of the same calls copied through the working buffer."""
    from dualmpi import calls

    net = fresh(index)  # no call speculated before: the two passes' messages compare
    n = calls.ZERO_COPY_ABOVE // 8 + 5  # doubles a piece
    c = [n + r for r in range(SIZE)]
    gap = 3
    d = [int(sum(c[:r])) + gap * r for r in range(SIZE)]
    total = d[-1] + c[-1] + gap
    vec = MPI.DOUBLE.Create_vector(n, 1, 2).Commit()  # every other double: packed, copied

    def rounds():
        ok, kinds = True, []
        for step in range(3):
            send = data(np.float64, n * SIZE, step)
            big = data(np.float64, max(total, c[RANK] * SIZE), step)
            pairs = data(np.float64, 2 * n, step)  # every other one sent
            cases = {
                "Alltoall": lambda b, out: b.Alltoall(send, out),
                "Allgather": lambda b, out: b.Allgather(send[:n], out),
                "Gather": lambda b, out: b.Gather(send[:n], out, root=LAST),
                "Scatter": lambda b, out: b.Scatter(send, out, root=0),
                "Alltoallv": lambda b, out: b.Alltoallv(
                    [big[:c[RANK] * SIZE], [c[RANK]] * SIZE,
                     [k * c[RANK] for k in range(SIZE)], MPI.DOUBLE], [out, c, d, MPI.DOUBLE]),
                "Allgatherv": lambda b, out: b.Allgatherv(big[:c[RANK]], [out, c, d, MPI.DOUBLE]),
                "Scatterv": lambda b, out: b.Scatterv([big, c, d, MPI.DOUBLE], out, root=0),
                "Gatherv": lambda b, out: b.Gatherv(big[:c[RANK]], [out, c, d, MPI.DOUBLE],
                                                    root=LAST),
                "Allgather-vector": lambda b, out: b.Allgather([pairs, 1, vec], [out, 1, vec]),
            }
            sizes = {"Scatter": n, "Scatterv": c[RANK], "Allgather-vector": (2 * n - 1) * SIZE}
            for name, run in cases.items():
                size = sizes.get(name, total if name.endswith("v") else n * SIZE)
                mine, ref = sentinel(np.float64, size), sentinel(np.float64, size)
                before = send.copy(), big.copy(), pairs.copy()
                run(net, mine)  # new buffers each time
                kinds.append((name, bool(getattr(net._last_runner, "transient", False))))
                run(WORLD, ref)
                ok = ok and same(mine, ref) and same(send, before[0]) and \
                    same(big, before[1]) and same(pairs, before[2])
            mine = sentinel(np.float64, n * SIZE)
            mine[RANK * n:(RANK + 1) * n] = send[:n]
            ref = mine.copy()
            net.Allgather(MPI.IN_PLACE, mine)
            WORLD.Allgather(MPI.IN_PLACE, ref)
            kinds.append(("Allgather-in-place",
                          bool(getattr(net._last_runner, "transient", False))))
            ok = ok and same(mine, ref)
        return ok, kinds

    def copy_instead():
        monkeypatch.setattr(calls, "ZERO_COPY_FIRST", 1 << 62)
        # (as in the bound pass, where a call on a runner of its own does not speculate: the
        # v-variants' count tables apart from their plans, the same messages)
        monkeypatch.setattr(calls, "_can_speculate", lambda comm, call: 0)

    monkeypatch.setattr(calls, "ZERO_COPY_FIRST", 1)
    try:
        (ok, kinds), links, (ok_copied, copied), links_copied = bound_then_copied(
            net, rounds, copy_instead)
        zero = net._zero_copy
    finally:
        vec.Free()
        net.Free()
    copies = ("Allgather-vector",)  # packed; in place, the own piece is where it belongs
    want = [(name, zero and name not in copies) for name, _ in kinds]
    assert agree(ok and ok_copied and kinds == want and not any(t for _, t in copied)
                 and links == links_copied), (kinds, links, links_copied)
