"""MPI tests of ``dualmpi.Comm``'s nonblocking collectives against MPI.COMM_WORLD's own.

Every ``I*`` method returns a :class:`dualmpi.Request`; several are started at once and
completed in another order than they were started (``Waitall`` in reverse, ``Test``
loops, ``Waitany``), and each result must equal the blocking MPI call's on the same
buffers.  Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi
tests/mpi/test_icollectives_mpi.py`` at N = 1, 2, 4, 8, 32.
"""

import time

import numpy as np
import pytest

import dualmpi
from dualmpi.errors import DualmpiError, InputError

MPI = pytest.importorskip("mpi4py.MPI")

WORLD = MPI.COMM_WORLD
SIZE = WORLD.Get_size()
RANK = WORLD.Get_rank()

#: (spec, nodes per rank) by rank count: one node per rank and several.
NETS = {1: [("hypercube:n=0", 1), ("dualcube:r=1", 2)],
        2: [("dualcube:r=1", 1), ("dualcube:r=2", 4)],
        4: [("hypercube:n=2", 1), ("dualcube:r=2", 2)],
        8: [("dualcube:r=2", 1), ("dualcube:r=3", 4)],
        16: [("hypercube:n=4", 1)],
        32: [("dualcube:r=3", 1)],
        64: [("metacube:k=2,m=1", 1)]}.get(SIZE, [])

_NETS = {}

#: Elements (int64 or float64) a block from which a repeat runs zero-copy (ZERO_COPY_ABOVE bytes)
LARGE = 5000


def _net(i):
    if i >= len(NETS):
        pytest.skip(f"no network {i} at {SIZE} ranks")
    if i not in _NETS:
        spec, q = NETS[i]
        _NETS[i] = dualmpi.Comm(WORLD, spec, nodes_per_rank=q)
    return _NETS[i]


def teardown_module():
    for net in _NETS.values():
        net.Free()


def _agree(ok):
    return bool(WORLD.allreduce(int(bool(ok)), op=MPI.MIN))


def _cases(root):
    """name -> (start(net) -> (request, result), reference() -> result) on fresh buffers."""
    rng = np.random.default_rng(RANK + 17)
    n = 3
    vec = rng.integers(-50, 50, 5).astype(np.int64)
    piece = rng.standard_normal(n * SIZE)
    counts = (np.arange(SIZE) % 3).astype(np.int64)  # zeros included
    mine = np.full(int(counts[RANK]), RANK + 0.5)
    displs = np.concatenate([[0], np.cumsum(counts[:-1] + 1)])  # a gap of one element
    total = int(displs[-1] + counts[-1] + 1)
    bc = rng.standard_normal(4) if RANK == root else np.zeros(4)
    rs = rng.integers(0, 9, 2 * SIZE).astype(np.int32)

    def two(fn, shape, dtype=float, fill=0):
        """Run ``fn(recvbuf)`` on a dualmpi buffer and a reference buffer (sentinel-filled)."""
        return np.full(shape, fill, dtype)

    cases = {
        "Ibcast": (lambda net: _keep(net.Ibcast(x := bc.copy(), root), x),
                   lambda: _keep(WORLD.Bcast(x := bc.copy(), root), x)),
        "Iscatter": (lambda net: _keep(net.Iscatter(piece, x := two(0, n), root), x),
                     lambda: _keep(WORLD.Scatter(piece, x := two(0, n), root), x)),
        "Igather": (lambda net: _keep(net.Igather(vec, x := two(0, 5 * SIZE, np.int64), root), x),
                    lambda: _keep(WORLD.Gather(vec, x := two(0, 5 * SIZE, np.int64), root), x)),
        "Igatherv": (lambda net: _keep(net.Igatherv(mine, [x := two(0, total, fill=-1),
                                                            (counts, displs)], root), x),
                     lambda: _keep(WORLD.Gatherv(mine, [x := two(0, total, fill=-1),
                                                        (counts, displs)], root), x)),
        "Iscatterv": (lambda net: _keep(net.Iscatterv([np.arange(total, dtype=float),
                                                       (counts, displs)], x := two(0, mine.size),
                                                      root), x),
                      lambda: _keep(WORLD.Scatterv([np.arange(total, dtype=float),
                                                    (counts, displs)], x := two(0, mine.size),
                                                   root), x)),
        "Iallgather": (lambda net: _keep(net.Iallgather(vec, x := two(0, 5 * SIZE, np.int64)), x),
                       lambda: _keep(WORLD.Allgather(vec, x := two(0, 5 * SIZE, np.int64)), x)),
        "Iallgatherv": (lambda net: _keep(net.Iallgatherv(mine, [x := two(0, total, fill=-1),
                                                                 (counts, displs)]), x),
                        lambda: _keep(WORLD.Allgatherv(mine, [x := two(0, total, fill=-1),
                                                              (counts, displs)]), x)),
        "Ialltoall": (lambda net: _keep(net.Ialltoall(piece, x := two(0, n * SIZE)), x),
                      lambda: _keep(WORLD.Alltoall(piece, x := two(0, n * SIZE)), x)),
        "Ialltoallv": (lambda net: _keep(net.Ialltoallv([piece, [n] * SIZE],
                                                        [x := two(0, n * SIZE), [n] * SIZE]), x),
                       lambda: _keep(WORLD.Alltoallv([piece, [n] * SIZE],
                                                     [x := two(0, n * SIZE), [n] * SIZE]), x)),
        "Ireduce": (lambda net: _keep(net.Ireduce(vec, x := two(0, 5, np.int64), MPI.SUM, root), x),
                    lambda: _keep(WORLD.Reduce(vec, x := two(0, 5, np.int64), MPI.SUM, root), x)),
        "Iallreduce": (lambda net: _keep(net.Iallreduce(vec, x := two(0, 5, np.int64), MPI.MAX), x),
                       lambda: _keep(WORLD.Allreduce(vec, x := two(0, 5, np.int64), MPI.MAX), x)),
        "Ireduce_scatter_block": (
            lambda net: _keep(net.Ireduce_scatter_block(rs, x := two(0, 2, np.int32)), x),
            lambda: _keep(WORLD.Reduce_scatter_block(rs, x := two(0, 2, np.int32)), x)),
        "Ireduce_scatter": (
            lambda net: _keep(net.Ireduce_scatter(rs, x := two(0, 2, np.int32), [2] * SIZE), x),
            lambda: _keep(WORLD.Reduce_scatter(rs, x := two(0, 2, np.int32), [2] * SIZE), x)),
        "Iscan": (lambda net: _keep(net.Iscan(vec, x := two(0, 5, np.int64)), x),
                  lambda: _keep(WORLD.Scan(vec, x := two(0, 5, np.int64)), x)),
        "Iexscan": (lambda net: _keep(net.Iexscan(vec, x := two(0, 5, np.int64)), x),
                    lambda: _keep(WORLD.Exscan(vec, x := two(0, 5, np.int64)), x)),
        "Ibarrier": (lambda net: _keep(net.Ibarrier(), np.zeros(0)),
                     lambda: _keep(None, np.zeros(0))),
    }
    return cases


def _keep(request, result):
    return request, result


def _same(a, b):
    return a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1])
@pytest.mark.parametrize("order", ["reverse", "test-loop", "waitany"])
def test_every_icollective_in_flight_at_once_matches_mpi(net_i, order):
    """All sixteen started back to back, completed in another order, each equal to MPI's."""
    net = _net(net_i)
    root = SIZE - 1
    cases = _cases(root)
    started = {name: start(net) for name, (start, _) in cases.items()}
    reqs = [req for req, _ in started.values()]
    if order == "reverse":
        dualmpi.Request.Waitall(reqs[::-1])
    elif order == "test-loop":
        pending = list(reqs)
        while pending:
            pending = [r for r in pending if not r.Test()]
    else:
        for _ in reqs:
            i = dualmpi.Request.Waitany(reqs)
            assert i != MPI.UNDEFINED
    exscan_zero = RANK == 0  # MPI leaves rank 0's Exscan result undefined
    bad = []
    for name, (_, ref) in cases.items():
        _, want = ref()
        got = started[name][1]
        if name == "Exscan" and exscan_zero:
            continue
        if name in ("Iexscan",) and exscan_zero:
            continue
        if name in ("Igather", "Igatherv", "Ireduce") and RANK != root:
            continue
        if not _same(got, want):
            bad.append(name)
    assert _agree(not bad and all(not r for r in reqs)), bad


@pytest.mark.mpi
def test_a_forwarding_rank_that_waits_last_still_completes():
    """The ranks wait for their broadcasts in opposite orders: progress in every wait."""
    net = _net(0)
    a, b = np.zeros(3), np.zeros(3)
    if RANK == 0:
        a[:] = 1
    if RANK == SIZE - 1:
        b[:] = 2
    r1 = net.Ibcast(a, 0)
    r2 = net.Ibcast(b, SIZE - 1)
    if RANK % 2:
        r1.Wait()
        r2.Wait()
    else:
        r2.Wait()
        r1.Wait()
    assert _agree((a == 1).all() and (b == 2).all())


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1])
def test_bad_arguments_fail_every_rank_at_completion(net_i):
    """Rank 0's receive buffer does not divide: InputError from every rank's Wait, and the
    communicator keeps working (a v-variant too)."""
    net = _net(net_i)
    errs = []
    for start in (lambda: net.Iallgather(np.zeros(3), np.zeros(3 * SIZE + (RANK == 0))),
                  lambda: net.Iallgatherv(np.zeros(2), [np.zeros(2 * SIZE),
                                                        [2] * (SIZE - 1) + [2 + (RANK == 0)]])):
        try:
            start().Wait()
            errs.append(None)
        except InputError as exc:
            errs.append(str(exc))
    ok = all(e is not None for e in errs)
    x, y = np.arange(4.0), np.zeros(4)
    net.Iallreduce(x, y).Wait()
    assert _agree(ok and np.allclose(y, np.arange(4.0) * SIZE)), errs


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1])
def test_thousands_of_requests_held_then_waited(net_i):
    """MPI lets a program hold any number of requests: 2500 broadcasts (1500 in place of 2500
    at 8 ranks, 300 above) started before any is waited for, the root's rank fastest (the
    others start late: the root is that many calls ahead, its notices noted by call number,
    not kept as messages), then ``Waitall``; every buffer holds the root's data, as
    ``MPI.COMM_WORLD``'s own ``Ibcast`` gives."""
    net = _net(net_i)
    many = 2500 if SIZE <= 4 else 1500 if SIZE <= 8 else 300
    mine = [np.full(2, i + 1 if RANK == 0 else -1, np.int64) for i in range(many)]
    ref = [b.copy() for b in mine]
    if RANK != 0:
        time.sleep(0.3)
    reqs = [net.Ibcast(b, 0) for b in mine]
    err = None
    try:
        dualmpi.Request.Waitall(reqs)
    except DualmpiError as exc:  # agreed on below
        err = exc
    MPI.Request.Waitall([WORLD.Ibcast(b, 0) for b in ref])
    ok = err is None and all(np.array_equal(a, b) for a, b in zip(mine, ref))
    assert _agree(ok), err


@pytest.mark.mpi
def test_rank_0_runs_ahead_until_a_synchronous_mode():
    """Rank 0 sends the mode of a repeat synchronously every ``MODE_SYNC``-th request only: a
    loop of broadcasts from rank 0, each waited for, while the other ranks sleep, runs ahead
    to the next request whose number is a multiple of ``MODE_SYNC`` and waits there until
    they start it (so rank 0 is never more than ``MODE_SYNC`` calls ahead); every buffer then
    holds rank 0's data, as ``MPI.COMM_WORLD``'s ``Ibcast`` gives.  One node per rank: the
    root's rank only sends (with several, the tree may come back through another rank)."""
    from dualmpi.engine.nonblocking import MODE_SYNC

    if SIZE == 1:
        pytest.skip("one rank: no mode to send")
    net = _net(0)
    x = np.zeros(2)
    net.Ibcast(x, 0).Wait()  # agreed: its repeats skip the agreement
    n = 2 * MODE_SYNC
    ref = np.zeros((n, 2))
    if RANK == 0:
        ref[:] = np.arange(n)[:, None]
    WORLD.Barrier()
    first = net._nb._seq
    free = (-first) % MODE_SYNC  # the requests before the next synchronous one
    t0, done, got = time.monotonic(), [], np.zeros((n, 2))
    if RANK != 0:
        time.sleep(1.0)
    for k in range(n):
        x[:] = k if RANK == 0 else -1
        net.Ibcast(x, 0).Wait()
        done.append(time.monotonic() - t0)
        got[k] = x
    WORLD.Bcast(ref, 0)
    ok = np.array_equal(got, ref)
    if RANK == 0:  # ran ahead to the synchronous request, and waited there
        ok = ok and (free == 0 or done[free - 1] < 0.9) and done[free] >= 0.9
    assert _agree(ok), (first, free, done[:2], done[max(free - 1, 0):free + 1])


def _repeats(root, n=3):
    """name -> (start(net), reference()) on buffers made once: every call repeats the last
    (``n`` elements a block: from :data:`LARGE` the fixed-count repeats run zero-copy)."""
    send = np.zeros(n * SIZE)
    ints = np.zeros(n * SIZE, np.int64)
    small = np.zeros(n, np.int64)
    got = {name: (np.full(shape, -7, dtype), np.full(shape, -7, dtype)) for name, shape, dtype in (
        ("Ibcast", n, float), ("Iscatter", n, float), ("Igather", n * SIZE, np.int64),
        ("Iallgather", n * SIZE, np.int64), ("Ialltoall", n * SIZE, float),
        ("Ireduce", n, np.int64), ("Iallreduce", n, np.int64),
        ("Ireduce_scatter_block", n, np.int64), ("Iscan", n, np.int64),
        ("Iexscan", n, np.int64), ("Iallgatherv", n * SIZE + 1, np.int64),
        ("Igatherv", n * SIZE + 1, np.int64), ("Iscatterv", n, float),
        ("Ialltoallv", n * SIZE, float), ("Ireduce_scatter", n, np.int64))}
    vcounts, vdispls = [n] * SIZE, [n * i + 1 for i in range(SIZE)]  # one element before
    bc = got["Ibcast"]
    cases = {
        "Ibcast": (lambda net: net.Ibcast(bc[0], root), lambda: WORLD.Bcast(bc[1], root)),
        "Iscatter": (lambda net: net.Iscatter(send, got["Iscatter"][0], root),
                     lambda: WORLD.Scatter(send, got["Iscatter"][1], root)),
        "Igather": (lambda net: net.Igather(small, got["Igather"][0], root),
                    lambda: WORLD.Gather(small, got["Igather"][1], root)),
        "Iallgather": (lambda net: net.Iallgather(small, got["Iallgather"][0]),
                       lambda: WORLD.Allgather(small, got["Iallgather"][1])),
        "Ialltoall": (lambda net: net.Ialltoall(send, got["Ialltoall"][0]),
                      lambda: WORLD.Alltoall(send, got["Ialltoall"][1])),
        "Ireduce": (lambda net: net.Ireduce(small, got["Ireduce"][0], MPI.SUM, root),
                    lambda: WORLD.Reduce(small, got["Ireduce"][1], MPI.SUM, root)),
        "Iallreduce": (lambda net: net.Iallreduce(small, got["Iallreduce"][0], MPI.MAX),
                       lambda: WORLD.Allreduce(small, got["Iallreduce"][1], MPI.MAX)),
        "Ireduce_scatter_block": (
            lambda net: net.Ireduce_scatter_block(ints, got["Ireduce_scatter_block"][0]),
            lambda: WORLD.Reduce_scatter_block(ints, got["Ireduce_scatter_block"][1])),
        "Iscan": (lambda net: net.Iscan(small, got["Iscan"][0]),
                  lambda: WORLD.Scan(small, got["Iscan"][1])),
        "Iexscan": (lambda net: net.Iexscan(small, got["Iexscan"][0]),
                    lambda: WORLD.Exscan(small, got["Iexscan"][1])),
        "Iallgatherv": (
            lambda net: net.Iallgatherv(small, [got["Iallgatherv"][0], (vcounts, vdispls)]),
            lambda: WORLD.Allgatherv(small, [got["Iallgatherv"][1], (vcounts, vdispls)])),
        "Igatherv": (
            lambda net: net.Igatherv(small, [got["Igatherv"][0], (vcounts, vdispls)], root),
            lambda: WORLD.Gatherv(small, [got["Igatherv"][1], (vcounts, vdispls)], root)),
        "Iscatterv": (
            lambda net: net.Iscatterv([send, vcounts], got["Iscatterv"][0], root),
            lambda: WORLD.Scatterv([send, vcounts], got["Iscatterv"][1], root)),
        "Ialltoallv": (
            lambda net: net.Ialltoallv([send, vcounts], [got["Ialltoallv"][0], vcounts]),
            lambda: WORLD.Alltoallv([send, vcounts], [got["Ialltoallv"][1], vcounts])),
        "Ireduce_scatter": (
            lambda net: net.Ireduce_scatter(ints, got["Ireduce_scatter"][0], vcounts),
            lambda: WORLD.Reduce_scatter(ints, got["Ireduce_scatter"][1], vcounts)),
    }

    def refill(k):
        """New contents (not new buffers) for repeat ``k``."""
        send[:] = np.arange(n * SIZE) + 100 * RANK + k
        ints[:] = send
        small[:] = np.arange(n) * (RANK + 1) + k
        if RANK == root:
            bc[0][:] = bc[1][:] = np.arange(n) + k

    return cases, got, refill


def _equal(got, name, root):
    """True when the rank's result of ``name`` (:func:`_repeats`) equals MPI's, or MPI
    defines none there (``Iexscan`` on rank 0, the rooted gathers and reduction elsewhere)."""
    if name == "Iexscan" and RANK == 0 or \
            name in ("Igather", "Igatherv", "Ireduce") and RANK != root:
        return True
    mine, want = got[name]
    return np.array_equal(mine, want)


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1])
def test_repeated_calls_skip_the_agreement_and_match_mpi(net_i):
    """The same buffer objects with new contents, four times: each call equals MPI's, the
    arguments are agreed once per method (rank 0 says so; the calls after it compare with
    rank 0's), and two barriers in flight at once both complete."""
    if net_i >= len(NETS):
        pytest.skip(f"no network {net_i} at {SIZE} ranks")
    net = dualmpi.Comm(WORLD, NETS[net_i][0], nodes_per_rank=NETS[net_i][1])  # nothing agreed
    root = SIZE - 1
    cases, got, refill = _repeats(root)
    progress = net._progress()
    before = progress.agreements
    bad = []
    for k in range(4):
        refill(k)
        reqs = [start(net) for start, _ in cases.values()]
        reqs += [net.Ibarrier(), net.Ibarrier()]
        dualmpi.Request.Waitall(reqs[::-1])
        for name, (_, ref) in cases.items():
            ref()
            if not _equal(got, name, root):
                bad.append((k, name))
    # one call at a time, after a barrier of MPI's (rank 0's request then ends on the
    # synchronous send of its mode, the last message to complete)
    x = np.zeros(2)
    for k in range(200 if SIZE <= 8 else 20):  # (a call takes milliseconds on 32 ranks)
        WORLD.Barrier()
        if RANK == 0:
            x[:] = k
        net.Ibcast(x, 0).Wait()
        if not (x == k).all():
            bad.append((k, "Ibcast after a barrier"))
    agreed = progress.agreements - before
    net.Free()
    # one agreement per method, the barrier's (one, or one per barrier of the first pair:
    # both started before rank 0 had the first's verdict) and the last broadcast's
    ok = not bad and len(cases) + 1 < agreed <= len(cases) + 3 if SIZE > 1 else not bad
    assert _agree(ok), (bad, agreed)


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1])
def test_repeated_v_variants_follow_a_table_that_changes(net_i):
    """Igatherv and Iallgatherv repeated on the same argument objects on most ranks while the
    last rank's count changes (its new buffer, and the new counts of the ranks that receive
    it): the repeating ranks see another count table and plan for it; every result equals
    MPI's, and the gaps stay untouched."""
    net = _net(net_i)
    root = 0
    counts = [2] * SIZE
    send = np.full(2, RANK + 1.0)
    displs = [3 * i for i in range(SIZE)]
    bad = []
    for k, last in enumerate((2, 2, 1, 1, 2)):
        mine_send = send if RANK != SIZE - 1 or last == 2 else np.full(last, RANK + 1.0)
        cnt = counts if last == 2 else counts[:-1] + [last]
        for name in ("Igatherv", "Iallgatherv"):
            got = np.full(3 * SIZE, -1.0)
            want = got.copy()
            if name == "Igatherv":
                net.Igatherv(mine_send, [got, (cnt, displs)] if RANK == root else None,
                             root).Wait()
                WORLD.Gatherv(mine_send, [want, (cnt, displs)] if RANK == root else None, root)
            else:
                net.Iallgatherv(mine_send, [got, (cnt, displs)]).Wait()
                WORLD.Allgatherv(mine_send, [want, (cnt, displs)])
            if not np.array_equal(got, want):
                bad.append((k, name, got.tolist()))
    assert _agree(not bad), bad


@pytest.mark.mpi
@pytest.mark.parametrize("n", [3, LARGE])
@pytest.mark.parametrize("net_i", [0, 1])
def test_repeated_in_place_empty_and_derived_calls_match_mpi(net_i, n):
    """Repeats on the same argument objects of ``MPI.IN_PLACE``, a count of 0 and derived
    datatypes (contiguous: remembered, and from :data:`LARGE` elements bound to the buffer;
    strided: packed, read every call), the buffers refilled in between: every result equals
    MPI's, the gaps untouched."""
    net = _net(net_i)
    root = SIZE - 1
    cont = MPI.DOUBLE.Create_contiguous(n).Commit()
    strided = MPI.DOUBLE.Create_vector(n, 1, 2).Commit()
    try:
        mine, ref = np.zeros(n + 2), np.zeros(n + 2)            # in place
        e_send, e_mine, e_ref = np.zeros(0), np.zeros(0), np.zeros(0)  # count 0
        c_mine, c_ref = np.full(n + 1, -1.0), np.full(n + 1, -1.0)  # contiguous, a gap after
        s_mine, s_ref = np.full(2 * n, -1.0), np.full(2 * n, -1.0)  # strided, gaps between
        c_spec, s_spec = [c_mine, 1, cont], [s_mine, 1, strided]
        bad = []
        for k in range(3):
            mine[:] = ref[:] = np.arange(n + 2) + RANK + k
            if RANK == root:
                c_mine[:n] = c_ref[:n] = np.arange(n) + k
                s_mine[::2] = s_ref[::2] = np.arange(n) + 10 * k
            reqs = [net.Iallreduce(MPI.IN_PLACE, mine), net.Iallgather(e_send, e_mine),
                    net.Ibcast(c_spec, root), net.Ibcast(s_spec, root)]
            dualmpi.Request.Waitall(reqs)
            WORLD.Allreduce(MPI.IN_PLACE, ref)
            WORLD.Allgather(e_send, e_ref)
            WORLD.Bcast([c_ref, 1, cont], root)
            WORLD.Bcast([s_ref, 1, strided], root)
            for name, x, y in (("in place", mine, ref), ("count 0", e_mine, e_ref),
                               ("contiguous", c_mine, c_ref), ("strided", s_mine, s_ref)):
                if not np.array_equal(x, y):
                    bad.append((k, name, x[:8].tolist(), y[:8].tolist()))
    finally:
        cont.Free()
        strided.Free()
    assert _agree(not bad), bad


@pytest.mark.mpi
def test_a_repeat_bound_to_its_buffers_in_flight_twice_copies_the_second():
    """``Igather`` of :data:`LARGE` elements: every rank but the root sends the same buffer in
    two requests in flight at once (legal: a send buffer is only read), the root gathers into
    two buffers.  A rank's first request runs bound to its buffer, the second (that run busy)
    through a store of its own; both results equal MPI's."""
    net = _net(0)
    root = SIZE - 1
    send = np.arange(LARGE, dtype=np.int64) + 1000 * RANK
    first, second, ref = (np.full(LARGE * SIZE, -1, np.int64) for _ in range(3))
    progress = net._progress()
    mine = lambda buf: buf if RANK == root else None  # noqa: E731 (recvbuf: the root's only)
    for _ in range(2):  # the call agreed, then repeated from C (bound to the buffer)
        net.Igather(send, mine(first), root).Wait()
    restarts, zero = progress.restarts, progress.zero_copy
    reqs = [net.Igather(send, mine(first), root), net.Igather(send, mine(second), root)]
    dualmpi.Request.Waitall(reqs)
    restarts, zero = progress.restarts - restarts, progress.zero_copy - zero
    WORLD.Gather(send, mine(ref), root)
    ok = RANK != root or (np.array_equal(first, ref) and np.array_equal(second, ref))
    if RANK != root and net.q == 1 and _compiled_start(net):
        ok = ok and restarts == 2 and zero == 1
    assert _agree(ok), (restarts, zero)


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1])
def test_repeated_in_place_v_variants_match_mpi(net_i):
    """``Iallgatherv`` and the root's ``Igatherv`` with ``MPI.IN_PLACE``, repeated on the same
    objects with new contents (the count table and the data's request restarted in C, on a
    send side that is the receive buffer): each call equals ``MPI.COMM_WORLD``'s."""
    net = _net(net_i)
    counts = [r + 2 for r in range(SIZE)]
    displs = [sum(counts[:r]) for r in range(SIZE)]
    total = sum(counts)
    mine, ref = np.zeros(total), np.zeros(total)
    gmine, gref = np.zeros(total), np.zeros(total)
    spec, gspec = [mine, (counts, displs), MPI.DOUBLE], [gmine, (counts, displs), MPI.DOUBLE]
    send = np.zeros(counts[RANK])
    bad = []
    for k in range(4):
        for buf in (mine, ref):
            buf[:] = -1
            buf[displs[RANK]:displs[RANK] + counts[RANK]] = 10 * k + RANK
        send[:] = 10 * k + RANK
        gmine[:], gref[:] = -1, -1
        if RANK == 0:
            gmine[:counts[0]] = gref[:counts[0]] = send
        net.Iallgatherv(MPI.IN_PLACE, spec).Wait()
        net.Igatherv(MPI.IN_PLACE if RANK == 0 else send, gspec if RANK == 0 else None,
                     0).Wait()
        WORLD.Allgatherv(MPI.IN_PLACE, [ref, (counts, displs), MPI.DOUBLE])
        WORLD.Gatherv(MPI.IN_PLACE if RANK == 0 else send,
                      [gref, (counts, displs), MPI.DOUBLE] if RANK == 0 else None, 0)
        if not np.array_equal(mine, ref) or not np.array_equal(gmine, gref):
            bad.append(k)
    assert _agree(not bad), bad


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1])
def test_a_v_variant_repeat_in_flight_twice_takes_its_own_table(net_i):
    """``Igatherv`` from every rank but the root on the same objects in two requests in flight
    at once (legal: a send buffer is only read; the root gathers into two buffers): the first
    repeat's count table restarts in C on the memo's table (``_IMemo.table_buf``), the second,
    that table busy, exchanges its own; both results equal MPI's, and the memo's table is free
    again after (the next repeat restarts in C)."""
    net = _net(net_i)
    root = 0
    send = np.arange(RANK + 1, dtype=np.int64) + 100 * RANK
    counts = [r + 1 for r in range(SIZE)]
    displs = [sum(counts[:r]) for r in range(SIZE)]
    bufs = [np.full(sum(counts), -1, np.int64) for _ in range(3)]
    spec = lambda b: [b, (counts, displs), MPI.INT64_T] if RANK == root else None  # noqa: E731
    specs = [spec(b) for b in bufs]
    progress = net._progress()
    for _ in range(2):  # agreed, then repeated (its count table from C)
        net.Igatherv(send, specs[0], root).Wait()
    before = progress.restarts
    reqs = [net.Igatherv(send, specs[0], root), net.Igatherv(send, specs[1], root)]
    dualmpi.Request.Waitall(reqs[::-1])
    busy = RANK != root and net._i_memo["Igatherv"].table_busy
    net.Igatherv(send, specs[0], root).Wait()
    restarts = progress.restarts - before
    WORLD.Gatherv(send, spec(bufs[2]), root)
    ok = not busy and (RANK != root or all(np.array_equal(b, bufs[2]) for b in bufs[:2]))
    if RANK != root and _compiled_start(net) and SIZE > 1:
        # (the tables of the first in flight and the last, not the second's; the three data)
        ok = ok and restarts == 5
    assert _agree(ok), (busy, restarts)


@pytest.mark.mpi
@pytest.mark.parametrize("n", [4, LARGE])
def test_a_repeated_call_with_other_arguments_on_one_rank_raises_the_alarm(n):
    """Rank 0 repeats a call the ranks agreed on, so none agrees again (from :data:`LARGE`
    elements the others' repeats run bound to their buffers); the last rank passes another
    count: it raises what it differs on, the others the alarm (no hang), and the
    communicator is unusable afterwards, on every rank."""
    if SIZE == 1:
        pytest.skip("one rank: nobody to differ from")
    from dualmpi.errors import DualmpiError

    net = dualmpi.Comm(WORLD, NETS[0][0], nodes_per_rank=NETS[0][1])
    try:
        x, y = np.ones(n), np.zeros(n)
        for _ in range(3):
            net.Iallreduce(x, y).Wait()
        ok = np.allclose(y, SIZE)
        odd = RANK == SIZE - 1
        msg = ""
        try:
            net.Iallreduce(np.ones(n + 1) if odd else x, np.zeros(n + 1) if odd else y).Wait()
        except DualmpiError as exc:  # (InputError is one)
            msg = str(exc)
        after = ""
        try:
            net.Iallreduce(x, y).Wait()
        except DualmpiError as exc:
            after = str(exc)
        if odd:
            ok = ok and "disagree on the" in msg
        else:  # the others fail in the call, or (nothing left to wait for) at their next
            ok = ok and ("differ from those of rank 0" in msg or not msg)
        ok = ok and "unusable" in after and f"rank {SIZE - 1}'s arguments" in after
    finally:
        net.Free()
    assert _agree(ok), (msg, after)


def _compiled_start(net):
    """True when the communicator's repeats can start in C (the compiled step is there)."""
    return net._progress()._istart is not None


@pytest.mark.mpi
@pytest.mark.parametrize("n", [3, LARGE])
@pytest.mark.parametrize("net_i", [0, 1])
def test_repeats_start_in_c_and_match_mpi(net_i, n):
    """A fixed-count call repeated on the same objects starts in one C call (Progress.restart:
    the notices, rank 0's mode, the copies in, the first round; the result copied out in C;
    a v-variant's count table likewise, on the memo's table: ``_IMemo.count_table``;
    with blocks of ``calls.ZERO_COPY_ABOVE`` or more and one node per rank, bound to the user's
    buffers: no copy in or out but the rank's own block, copied once round 0 is posted, nothing
    before it): alone, and beside a request in flight that another path waits for; each
    call equals MPI's."""
    net = _net(net_i)
    root = SIZE - 1
    cases, got, refill = _repeats(root, n)
    progress = net._progress()
    before, zero = progress.restarts, progress.zero_copy
    bad = []
    for k in range(3):
        refill(k)
        for name, (start, ref) in cases.items():
            if k == 2:  # beside a barrier in flight (the waits then go through Python)
                other = net.Ibarrier()
                dualmpi.Request.Waitall([start(net), other])
            else:
                start(net).Wait()
            ref()
            if not _equal(got, name, root):
                bad.append((k, name))
    vector = ("Iallgatherv", "Igatherv", "Iscatterv", "Ialltoallv", "Ireduce_scatter")
    fixed = [name for name in cases if name not in vector]
    started = progress.restarts - before
    # the first round of calls agrees; the two after it start in C, the fixed-count ones and
    # the v-variants' count tables and data (plain: no agreement), and so do the barriers
    # beside them (one a case); on one rank a plan may have no round (one node: nothing to
    # start in C). A fixed-count call of the first round starts in C too when an earlier
    # test's call of its shape is remembered (a repeat for its new arrays:
    # calls._shaped_repeat)
    most = 2 * (len(cases) + len(vector))
    want = most if _compiled_start(net) and SIZE > 1 else 0
    ok = not bad and want <= started <= most + 2 * len(cases)
    # zero-copy, when one node per rank: every fixed-count repeat started in C, and every
    # v-variant's data (each rank moves ZERO_COPY_ABOVE or more: calls._zero_bound)
    zero, bound = progress.zero_copy - zero, n == LARGE and net.q == 1
    ok = ok and zero == (2 * (len(fixed) + len(vector)) if bound and want else 0)
    # and such a repeat copies nothing before its first round: the rank's own block is
    # copied once round 0 is posted (Engine.bind_buffers' own, Repeat.z_c's M_MID), and no
    # reduction has a seed to copy first (plan.received_seeds)
    early = [name for name, memo in net._i_memo.items()
             if getattr(memo, "repeat", None) is not None and memo.repeat.z_c is not None
             and len(memo.repeat._zin) > 1]
    own = [name for name, memo in net._i_memo.items()
           if getattr(memo, "repeat", None) is not None and memo.repeat.z_c is not None
           and len(memo.repeat._zmid) > 1]
    # (without the compiled start, DUALMPI_CLOOP=0, the repeats are made but never started)
    ok = ok and (not want or not early and ("Iallgather" in own) == bool(bound))
    assert _agree(ok), (bad, started, want, zero, early, own)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("net_i", [0, 1])
def test_a_start_after_rank_0s_sends_no_notice(net_i):
    """A rank other than 0 whose repeat starts in C after rank 0's mode for the call is in (rank
    0 started it, then a barrier of MPI's own) sends rank 0 no nonblocking notice (rank 0 made
    the call a nonblocking one: it sends a mode only then); nor does rank 0, whose mode the
    others probe for (``Progress.probed``; without the probe rank 0 sends every rank its
    notice).  ``Progress._x[_X_SENT]`` counts the notices sent in C.  Results equal MPI's.
    Then twelve requests started before any is stepped (more than the pool of four a call's
    notices had at 2 ranks): every one starts in C (a rank keeps a request of its pool for each
    notice it owes, ``NOTES_OWED``)."""
    from dualmpi.engine import nonblocking

    net = _net(net_i)
    if not _compiled_start(net):
        pytest.skip("no start in C")
    x = net._progress()._x
    buf, ref = np.zeros(5), np.zeros(5)
    calls = 6
    for k in range(3 + calls):
        if k == 3:
            before = int(x[nonblocking._X_SENT])
        if RANK == 0:
            buf[:] = ref[:] = np.arange(5) + 10 * k
            req = net.Ibcast(buf, 0)
        WORLD.Barrier()  # (MPI's own: rank 0's mode is in before the others start)
        if RANK != 0:
            req = net.Ibcast(buf, 0)
        req.Wait()
        WORLD.Bcast(ref, 0)
        if not np.array_equal(buf, ref):
            before = -10 ** 6
    sent = int(x[nonblocking._X_SENT]) - before
    want = calls * (SIZE - 1) if RANK == 0 and not net._progress().probed else 0
    # more requests started before a step than a call's pool of four: still started in C (a
    # rank keeps a request of its pool for each notice it owes, NOTES_OWED of them)
    many = 12
    bufs = [np.zeros(5) for _ in range(many)]
    for _ in range(3):
        for b in bufs:
            net.Ibcast(b, 0).Wait()
    progress = net._progress()
    restarts = progress.restarts
    reqs = [net.Ibcast(b, 0) for b in bufs]
    dualmpi.Request.Waitall(reqs)
    started = progress.restarts - restarts
    assert _agree(sent == want and started == many), (sent, want, started)


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1])
def test_a_repeat_waited_for_in_c_ends_as_mpi_says(net_i):
    """With the extension, ``Request.Wait`` is ``recall.c``'s (``request.use_c_wait``): a
    repeat it waits for ends in C (``IRestart.close``), inactive after, equal to
    ``MPI.REQUEST_NULL``, its data MPI's and the call counted once in ``stats()`` (its finish:
    ``Tally.adder``'s ``Tick``); a wait with a status (positional or keyword), of an inactive
    request or of one whose rounds did not end in C is the Python wait's, with the empty
    status MPI gives."""
    from dualmpi import request as dreq
    from dualmpi.engine import nonblocking, recall

    net = _net(net_i)
    root = SIZE - 1
    buf, ref = np.zeros(5), np.zeros(5)
    in_c = recall.load() is not None and _compiled_start(net)
    ok = not in_c or type(dualmpi.Request.__dict__["Wait"]) is not type(dreq._PYTHON_WAIT)
    progress = net._progress()
    net.reset_stats()
    before = progress.restarts
    # (the starts with notices, counted in C: the line is drained at every 16th: rounds.c)
    x_starts = nonblocking._X_STARTS
    drained_before = int(progress._x[x_starts]) if in_c else 0
    calls = 0
    for k in range(6):
        if RANK == root:
            buf[:] = ref[:] = np.arange(5) + 10 * k
        req = net.Ibcast(buf, root)
        calls += 1
        if k % 3 == 1:  # a status: the Python wait, the empty status
            st = MPI.Status()
            st.source, st.tag = 3, 7
            ok = ok and req.Wait(st) is True and st.source == MPI.ANY_SOURCE and \
                st.tag == MPI.ANY_TAG and st.Get_count(MPI.BYTE) == 0
        elif k % 3 == 2:
            st = MPI.Status()
            st.tag = 5
            ok = ok and req.Wait(status=st) is True and st.tag == MPI.ANY_TAG
        else:
            ok = ok and req.Wait() is True
        ok = ok and not req and req == MPI.REQUEST_NULL and req.Wait() is True
        WORLD.Bcast(ref, root)
        ok = ok and np.array_equal(buf, ref)
    # beside a barrier in flight: not alone, so the Python wait (IRestart.close declines)
    other = net.Ibarrier()
    req = net.Ibcast(buf, root)
    calls += 2
    ok = ok and req.Wait() is True and other.Wait() is True and not req and not other
    started = progress.restarts - before
    ok = ok and net.stats()["collectives"] == calls
    ok = ok and (started >= 5 if in_c and SIZE > 1 else True)
    if in_c:  # every start in C of this test sent notices (none on one rank)
        counted = int(progress._x[x_starts]) - drained_before
        ok = ok and counted == (started if SIZE > 1 else 0)
    assert _agree(ok), (started, net.stats()["collectives"], calls)


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1])
def test_v_variant_repeats_are_matched_and_started_in_c(net_i, monkeypatch):
    """A nonblocking v-variant repeated on the same objects is matched in C (``Comm._m<name>``:
    ``calls._install_vstart``) and both its parts start in C (``IRestart`` with a sequence
    number: the count table, then the data with the number reserved for it), so neither
    ``calls.icollective`` nor ``Progress.restart`` runs for it; waited for alone, its parts are
    closed in C one after the other (``recall.c``'s ``wait_parts``: ``Progress.wait`` does not
    run) and the request is inactive after; the table in, its data's part starts in C
    (``VSizes``: ``_Chain._sizes`` does not run); alone and with a barrier in flight beside it
    (the Python wait), each call equals MPI's."""
    from dualmpi import calls
    from dualmpi.engine import recall

    net = _net(net_i)
    root = SIZE - 1
    cases, got, refill = _repeats(root)
    vector = [name for name in cases if name in calls.vector_nonblocking()]
    progress = net._progress()
    for k in range(3):  # agreed, then repeated (the parts' plans compiled by Progress.restart)
        refill(k)
        for name in vector:
            dualmpi.Request.Waitall([cases[name][0](net)] + ([net.Ibarrier()] if k % 2 else []))
            cases[name][1]()
    python = []
    icollective, restart = calls.icollective, progress.restart
    # (the barrier's repeat may start in Python: a C start declines when the line holds a
    # message about a later call, as it may here with ranks sharing cores)
    monkeypatch.setattr(calls, "icollective", lambda *a, **kw: (
        a[1] != "Ibarrier" and python.append(a[1])) or icollective(*a, **kw))
    monkeypatch.setattr(progress, "restart", lambda *a, **kw: (
        a[1] != "Ibarrier" and python.append(a[1])) or restart(*a, **kw))
    waits, wait = [], progress.wait
    monkeypatch.setattr(progress, "wait", lambda req: waits.append(req.what) or wait(req))
    # (the table in, the data's part started in C: recall.c's VSizes, not _Chain._sizes)
    sizes, real_sizes = [], calls._Chain._sizes
    monkeypatch.setattr(calls._Chain, "_sizes",
                        lambda self: sizes.append(self.what) or real_sizes(self))
    bad, alone = [], []
    for k in range(3, 7):
        refill(k)
        for name in vector:
            if k % 2:
                other = net.Ibarrier()  # (not a v-variant: matched in C too)
                dualmpi.Request.Waitall([cases[name][0](net), other])
            else:
                req = cases[name][0](net)
                alone.append(req.Wait() is True and not req and req == MPI.REQUEST_NULL)
            cases[name][1]()
            if not _equal(got, name, root):
                bad.append((k, name))
    monkeypatch.undo()
    in_c = recall.load() is not None and _compiled_start(net) and SIZE > 1
    ok = not bad and all(alone) and (not python or not in_c)
    # (Waitall, beside a barrier, takes its own path: dualmpi.engine.nonblocking.block)
    ok = ok and (len(waits) == 0 and not sizes if in_c else True)
    assert _agree(ok), (bad, python[:8], waits[:8], sizes[:8], alone, in_c)


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1])
def test_a_v_variant_repeat_with_a_bad_count_fails_in_its_wait_on_every_rank(net_i):
    """``Ialltoallv`` repeated (waited for part by part in C: ``recall.c``'s ``wait_parts``),
    then the last rank's recvcounts do not match what rank 0 sends it, the others repeating:
    every rank's ``Wait`` raises the count table's one InputError, the request is inactive
    after it, and the calls after it equal MPI's."""
    if SIZE == 1:
        pytest.skip("one rank: nobody to disagree with")
    net = _net(net_i)
    n, last = 3, SIZE - 1
    counts = [n] * SIZE
    send = np.arange(n * SIZE, dtype=float) + 100 * RANK
    got, ref = np.full(n * SIZE, -1.0), np.full(n * SIZE, -1.0)
    ok = True
    for k in range(4):
        if k == 2:  # (a repeat on every rank but the last)
            bad = [n - 1] + counts[1:] if RANK == last else counts
            req = net.Ialltoallv([send, counts], [got, bad])
            try:
                req.Wait()
                text = None
            except InputError as exc:
                text = str(exc)
            texts = WORLD.allgather(text)
            ok = ok and not req and texts[0] is not None and texts.count(texts[0]) == SIZE and \
                f"rank {last}'s recvcounts do not match" in texts[0]
            continue
        send += 1
        net.Ialltoallv([send, counts], [got, counts]).Wait()
        WORLD.Alltoallv([send, counts], [ref, counts])
        ok = ok and np.array_equal(got, ref)
    assert _agree(ok), (got[:6], ref[:6])


@pytest.mark.mpi
def test_a_repeat_rank_0_agrees_again_is_agreed_by_every_rank(monkeypatch):
    """Rank 0 keeps no agreed vector (KNOWN_SIZE 0), so it agrees every call while the others
    start their repeats in C: their compiled step hears rank 0's mode "agree" and hands the
    request to the agreement; the results equal MPI's, and every call is agreed."""
    from dualmpi.engine import nonblocking

    monkeypatch.setattr(nonblocking, "KNOWN_SIZE", 0)
    net = dualmpi.Comm(WORLD, NETS[0][0], nodes_per_rank=NETS[0][1])
    try:
        progress = net._progress()
        x, y = np.zeros(6), np.zeros(6)
        bad = []
        before, restarted = progress.agreements, progress.restarts
        for k in range(5):
            x[:] = RANK + k
            net.Iallreduce(x, y).Wait()
            if not np.array_equal(y, WORLD.allreduce(x)):
                bad.append(k)
        agreed, restarted = progress.agreements - before, progress.restarts - restarted
        compiled = _compiled_start(net)
    finally:
        net.Free()
    ok = not bad and (agreed == 5 or SIZE == 1)
    if SIZE > 1 and compiled:
        ok = ok and restarted == (0 if RANK == 0 else 4)
    assert _agree(ok), (bad, agreed, restarted)


@pytest.mark.mpi
def test_rank_0_passing_other_arguments_to_a_repeat_fails_every_rank_alike():
    """The others repeat in C; rank 0 passes another count (a vector it has not seen agreed,
    so it asks for the agreement): every rank raises the same InputError, and the
    communicator stays usable."""
    if SIZE == 1:
        pytest.skip("one rank: nobody to differ from")
    net = dualmpi.Comm(WORLD, NETS[0][0], nodes_per_rank=NETS[0][1])
    try:
        x, y = np.ones(4), np.zeros(4)
        for _ in range(2):
            net.Iallreduce(x, y).Wait()
        msg = ""
        try:
            if RANK == 0:
                net.Iallreduce(np.ones(5), np.zeros(5)).Wait()
            else:
                net.Iallreduce(x, y).Wait()
        except InputError as exc:
            msg = str(exc)
        x[:] = RANK
        net.Iallreduce(x, y).Wait()
        ok = "disagree on the" in msg and np.allclose(y, SIZE * (SIZE - 1) / 2)
    finally:
        net.Free()
    msgs = WORLD.allgather(msg)
    assert _agree(ok and len(set(msgs)) == 1), msgs


@pytest.mark.mpi
@pytest.mark.parametrize("n", [3, LARGE])
def test_a_repeat_posts_round_0_before_rank_0s_mode(n):
    """A repeat started in C on a rank other than 0 posts its round 0 at once, while rank 0's
    mode comes (compared before round 0's messages are read): right after the start its run
    is in round 0 with the mode still due.  With blocks of ``LARGE`` elements round 0 sends
    its payloads apart from their trailers, and such a run waits for the mode before it posts
    anything (a failed agreement never receives them).  Every result equals MPI's."""
    from dualmpi.engine import nonblocking as nb

    net = _net(0)
    x, y = np.zeros(n, np.int64), np.zeros(n * SIZE, np.int64)
    seen, bad = [], []
    for k in range(4):
        x[:] = 10 * RANK + k
        req = net.Iallgather(x, y)
        state = req._plan.c_state
        seen.append(None if state is None else (int(state[nb._S_K]), int(state[nb._S_MODE_DUE])))
        req.Wait()
        if not np.array_equal(y, np.concatenate(WORLD.allgather(x))):
            bad.append(k)
    ok = not bad
    if SIZE > 1 and _compiled_start(net) and RANK != 0:  # calls 2 and 3 are repeats in C
        want = (0, nb._MODE_EARLY) if n == 3 else (-1, nb._MODE_FIRST)
        ok = ok and seen[2:] == [want, want]
    assert _agree(ok), (bad, seen)


@pytest.mark.mpi
def test_rank_0_repeating_other_agreed_arguments_fails_every_rank():
    """Rank 0 passes arguments the ranks agreed on earlier (so its mode says "skip") while the
    others repeat their last call in C, which posts round 0 before the mode is in: those
    messages are another call's to rank 0 (cut short there: ``MPI_ERR_TRUNCATE``).  No hang,
    no result: every rank raises in the call, the alarm reaches every rank by its next call at
    the latest, and the communicator is unusable afterwards."""
    if SIZE == 1:
        pytest.skip("one rank: nobody to differ from")
    net = dualmpi.Comm(WORLD, NETS[0][0], nodes_per_rank=NETS[0][1])
    try:
        x4, y4, x5, y5 = np.ones(4), np.zeros(4), np.ones(5), np.zeros(5)
        for x, y in ((x4, y4), (x4, y4), (x5, y5), (x5, y5)):
            net.Iallreduce(x, y).Wait()
        ok = np.allclose(y4, SIZE) and np.allclose(y5, SIZE)
        y4[:] = y5[:] = -1
        msgs = []
        for _ in range(3):
            try:
                if RANK == 0:
                    net.Iallreduce(x4, y4).Wait()
                else:
                    net.Iallreduce(x5, y5).Wait()
                msgs.append("")
            except DualmpiError as exc:
                msgs.append(str(exc))
        ok = ok and all(msgs) and "unusable" in msgs[2]
        ok = ok and not np.allclose(y4 if RANK == 0 else y5, SIZE)  # no result
    finally:
        net.Free()
    assert _agree(ok), (msgs, y4, y5)


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1])
def test_large_v_variant_repeats_run_zero_copy_and_match_mpi(net_i):
    """Nonblocking v-variants of :data:`LARGE`-element blocks with gaps between them, repeated
    on the same buffers with new contents: from the second call, with one node per rank, the
    data's plan runs bound to the buffers (``calls._zero_bound``: no copy in or out but the
    rank's own block; a reduction's blocks into where they are combined), in place it copies
    (the buffers overlap).  Every call equals ``MPI.COMM_WORLD``'s, the gaps untouched."""
    net = _net(net_i)
    root = SIZE - 1
    n = LARGE
    counts = [n - r for r in range(SIZE)]
    displs = [sum(counts[:r]) + 3 * r + 1 for r in range(SIZE)]  # gaps before and between
    span = displs[-1] + counts[-1] + 2
    wdispls = [8 * d for d in displs]  # Ialltoallw's are in bytes
    rwdispls = [8 * ((counts[RANK] + 3) * r + 1) for r in range(SIZE)]
    types = [MPI.DOUBLE] * SIZE
    send = np.zeros(span)
    rs_send = np.zeros(sum(counts), np.int64)
    got = {name: (np.full(shape, -7.0), np.full(shape, -7.0)) for name, shape in (
        ("Ialltoallw", SIZE * (counts[RANK] + 3) + 1), ("Iscatterv", counts[RANK] + 2), ("Igatherv", span),
        ("Iallgatherv in place", span))}
    got["Ireduce_scatter"] = (np.full(counts[RANK], -7, np.int64),
                              np.full(counts[RANK], -7, np.int64))
    cases = {
        "Ialltoallw": lambda c, out: c.Ialltoallw(
            [send, (counts, wdispls), types], [out, ([counts[RANK]] * SIZE, rwdispls), types]),
        "Iscatterv": lambda c, out: c.Iscatterv([send, (counts, displs), MPI.DOUBLE],
                                                [inner[id(out)], MPI.DOUBLE], root),
        "Igatherv": lambda c, out: c.Igatherv(mine_part, [out, (counts, displs), MPI.DOUBLE],
                                              root),
        "Ireduce_scatter": lambda c, out: c.Ireduce_scatter(rs_send, out, counts, MPI.MAX),
        "Iallgatherv in place": lambda c, out: c.Iallgatherv(
            MPI.IN_PLACE, [out, (counts, displs), MPI.DOUBLE]),
    }
    # views made once: a repeat is a call on the same objects
    inner = {id(out): out[1:-1] for out in got["Iscatterv"]}
    mine_part = send[displs[RANK]:displs[RANK] + counts[RANK]]
    progress = net._progress()
    bad, zeros = [], {name: 0 for name in cases}
    for k in range(4):
        send[:] = np.arange(span) + 1000 * RANK + k
        rs_send[:] = (np.arange(sum(counts)) * (RANK + 3 + k)) % 977
        for name, start in cases.items():
            mine, ref = got[name]
            if name == "Iallgatherv in place":
                for buf in (mine, ref):
                    buf[displs[RANK]:displs[RANK] + counts[RANK]] = np.arange(counts[RANK]) + k
            zero = progress.zero_copy
            start(net, mine).Wait()
            zeros[name] += progress.zero_copy - zero
            start(WORLD, ref).Wait()
            if not (name == "Igatherv" and RANK != root) and not np.array_equal(mine, ref):
                bad.append((k, name, np.flatnonzero(mine != ref)[:5].tolist()))
    # the second call on bind the data's plan (the first binds it for its table; a rank
    # whose plan has no round starts nothing in C)
    bound = net.q == 1 and SIZE > 1 and _compiled_start(net)
    want = {name: 3 if bound and name != "Iallgatherv in place" else 0 for name in cases}
    assert _agree(not bad and zeros == want), (bad, zeros, want)
