"""MPI tests of the nonblocking collectives' engine and :class:`dualmpi.Request`.

Plans are built as :class:`dualmpi.Comm` builds them (its engine's rank plan, a
:class:`~dualmpi.engine.layout.Layout`, ``bind``) and run as requests by a
:class:`~dualmpi.engine.nonblocking.Progress`; results are compared with
``MPI.COMM_WORLD``'s own ``Bcast``/``Scatter``/``Allgather``/``Alltoall``/``Allreduce``
on the same buffers.  Several requests are in flight at once, started in one order and
waited for in another on some ranks; a dual-cube broadcast whose forwarding ranks wait
last still completes.  Run at N = 1, 2, 4, 8 (one and two nodes per rank) and 32 ranks; every
rank finishes its communication, then the ranks agree on the verdict.
"""

import time

import numpy as np
import pytest

import dualmpi
from dualmpi.engine.layout import Layout, layout_kind
from dualmpi.engine.nonblocking import Progress
from dualmpi.errors import DualmpiError, InputError
from dualmpi.ops import resolve
from dualmpi.request import Request

MPI = pytest.importorskip("mpi4py.MPI")

# (the MPI tier: every test here runs under mpiexec, at the rank counts NETS has networks for)
pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
SIZE = WORLD.Get_size()
RANK = WORLD.Get_rank()

#: Networks by rank count: (spec, nodes per rank).
NETS = {
    1: [("hypercube:n=0", 1), ("hypercube:n=1", 2)],
    2: [("hypercube:n=1", 1), ("dualcube:r=1", 1), ("hypercube:n=2", 2)],
    4: [("hypercube:n=2", 1), ("hypercube:n=3", 2), ("dualcube:r=2", 2)],
    8: [("dualcube:r=2", 1), ("hypercube:n=3", 1), ("hypercube:n=4", 2)],
    32: [("dualcube:r=3", 1)],
}
SPECS = NETS.get(SIZE, [])
COLLECTIVES = ("bcast", "scatter", "allgather", "alltoall", "allreduce", "allreduce-tree")

_ENVS = {}


def _agree(ok):
    """True when ``ok`` holds on every rank (collective)."""
    return bool(WORLD.allreduce(1 if ok else 0, op=MPI.MIN))


def _env(i):
    """Return ``(net, progress)`` of network ``i`` (made once, in the same order on every rank)."""
    if not 0 <= i < len(SPECS):
        pytest.skip(f"no network {i} at {SIZE} rank(s)")
    if i not in _ENVS:
        spec, q = SPECS[i]
        net = dualmpi.Comm(WORLD, spec, q, watchdog=60)
        _ENVS[i] = (net, Progress(net._transport))
    return _ENVS[i]


@pytest.fixture(scope="module", autouse=True)
def _free_envs():
    """Free the progress engines and communicators at the end (same order on every rank)."""
    yield
    for i in sorted(_ENVS):
        net, prog = _ENVS.pop(i)
        prog.free()
        net.Free()


def _bound(net, coll, nbytes, root=0, itemsize=1, packets=1):
    """This rank's bound plan of ``coll``, built as ``dualmpi.Comm`` builds it."""
    plan = net._engine.rank_plan(net.rank, coll, root, net.variant)
    layout = Layout(layout_kind(coll), net.topology.num_nodes, net.q, nbytes, root, None, None,
                    itemsize)
    return plan.bind(layout, packets)


def _start(net, prog, coll, n=5, seed=0, packets=1, **kw):
    """Start ``coll`` on rank-distinct int32 data; return ``(request, got, want)``.

    ``want`` is what ``MPI.COMM_WORLD``'s own collective gives on the same buffers,
    computed before the request starts (so the two never overlap on the wire).
    """
    rng = np.random.default_rng([RANK, n, seed, len(coll)])
    data = lambda k: rng.integers(-1000, 1000, size=k).astype(np.int32)  # noqa: E731
    if coll == "bcast":
        root = SIZE - 1
        buf = data(n) if RANK == root else np.zeros(n, np.int32)
        want = buf.copy()
        WORLD.Bcast(want, root)
        send, recv = (buf, None) if RANK == root else (None, buf)
        b = _bound(net, coll, buf.nbytes, root, packets=packets)
        req = prog.start(b, _u8(send), _u8(recv), **kw)
        return Request.from_plan(prog, req), buf, want
    if coll == "scatter":
        root = 0
        send = data(n * SIZE) if RANK == root else None
        got, want = np.zeros(n, np.int32), np.zeros(n, np.int32)
        WORLD.Scatter(send, want, root)
        b = _bound(net, coll, got.nbytes, root, packets=packets)
        req = prog.start(b, _u8(send), _u8(got), **kw)
        return Request.from_plan(prog, req), got, want
    if coll in ("allgather", "alltoall"):
        send = data(n if coll == "allgather" else n * SIZE)
        got, want = np.zeros(n * SIZE, np.int32), np.zeros(n * SIZE, np.int32)
        getattr(WORLD, coll.capitalize())(send, want)
        b = _bound(net, coll, n * 4)
        req = prog.start(b, _u8(send), _u8(got), **kw)
        return Request.from_plan(prog, req), got, want
    # allreduce: the algorithm dualmpi.Comm would choose, or the one named
    vec = rng.integers(-1000, 1000, size=n).astype(np.int64)
    got, want = np.zeros(n, np.int64), np.zeros(n, np.int64)
    WORLD.Allreduce(vec, want, MPI.SUM)
    name = coll if "-" in coll else "allreduce-" + net._allreduce_algorithm(vec.nbytes)
    _, _, combine = resolve(MPI.SUM, vec.dtype, "Iallreduce", MPI)
    b = _bound(net, name, vec.nbytes, 0, vec.itemsize)
    req = prog.start(b, _u8(vec), _u8(got), combine=combine, **kw)
    return Request.from_plan(prog, req), got, want


def _u8(a):
    return None if a is None else a.view(np.uint8).reshape(-1)


def _failure(req):
    """Wait for ``req``; return the ``DualmpiError`` it raised, as text ("" when none)."""
    try:
        req.Wait()
    except DualmpiError as exc:
        return str(exc)
    return ""


# -- one request at a time ---------------------------------------------------------------------
@pytest.mark.parametrize("coll", COLLECTIVES)
@pytest.mark.parametrize("net_i", range(3))
@pytest.mark.parametrize("n", [0, 1, 37])
def test_one_request_matches_mpi(net_i, coll, n):
    net, prog = _env(net_i)
    req, got, want = _start(net, prog, coll, n)
    err = None
    try:
        assert req.Wait() is True
    except Exception as exc:  # noqa: BLE001 - agreed on below
        err = exc
    ok = err is None and np.array_equal(got, want) and req == MPI.REQUEST_NULL and not req
    assert _agree(ok), (err, got, want)


@pytest.mark.parametrize("coll", ["bcast", "scatter"])
@pytest.mark.parametrize("net_i", range(3))
def test_pipelined_plans(net_i, coll):
    """Blocks cut in pieces that follow each other a round apart (``packets``), as
    ``dualmpi.Comm`` cuts large broadcasts and scatters."""
    net, prog = _env(net_i)
    runs = [_start(net, prog, coll, 301, seed, packets=3) for seed in (16, 17)]
    Request.Waitall([r for r, _, _ in runs])
    assert _agree(all(np.array_equal(g, w) for _, g, w in runs))


@pytest.mark.parametrize("net_i", range(3))
def test_two_runs_of_one_plan_in_flight(net_i):
    """Two requests of the very same bound plan, each with its own store and tag."""
    net, prog = _env(net_i)
    runs = [_start(net, prog, coll, 9, seed) for coll in ("alltoall", "allreduce")
            for seed in (1, 2)]
    Request.Waitall([r for r, _, _ in runs])
    assert _agree(all(np.array_equal(g, w) for _, g, w in runs))


@pytest.mark.parametrize("net_i", range(3))
def test_rounds_run_in_the_compiled_step_or_in_python_alike(net_i):
    """With the compiled loop loaded, a request's rounds run in C (``rounds.c``'s
    ``dualmpi_istep``), a reduction's combines too when its operation is MPI's own; a combine
    MPI does not have keeps the rounds in Python.  Both give MPI's results, and a run of a plan
    done with is reused (its store and requests) by the plan's next request."""
    net, prog = _env(net_i)
    stepped = prog._step is not None
    ok, why = True, []
    for coll in COLLECTIVES:
        req, got, want = _start(net, prog, coll, 13, 21)
        plan = req._plan
        req.Wait()
        in_c = bool(plan.compiled.pool)  # (a run of the compiled step goes back to its pool)
        if not np.array_equal(got, want) or in_c != stepped:
            ok, why = False, why + [f"{coll}: MPI's result {np.array_equal(got, want)}, "
                                    f"compiled step {in_c}, loaded {stepped}"]
    b = _bound(net, "alltoall", 4)  # one plan run twice: the second run reuses the first's
    for i in range(2):
        send = np.arange(4 * SIZE, dtype=np.uint8) + RANK + i
        got, want = np.zeros_like(send), np.zeros_like(send)
        WORLD.Alltoall(send, want)
        plan = prog.start(b, send, got, signature=5)
        Request.from_plan(prog, plan).Wait()
        ok = ok and np.array_equal(got, want) and len(plan.compiled.pool) == int(stepped)
    # a combine MPI does not have: the rounds run in Python, with MPI's result all the same
    vec = np.arange(13, dtype=np.int64) * (RANK + 1)
    got, want = np.zeros(13, np.int64), np.zeros(13, np.int64)
    WORLD.Allreduce(vec, want, MPI.SUM)

    def add(src, dst):
        dst.view(np.int64)[:] += src.view(np.int64)

    b = _bound(net, "allreduce-" + net._allreduce_algorithm(vec.nbytes), vec.nbytes, 0, 8)
    plan = prog.start(b, _u8(vec), _u8(got), combine=add)
    has_combines = any(rnd.combines[0].size for rnd in b.rounds)
    in_c = plan.c_state is not None
    Request.from_plan(prog, plan).Wait()
    ok = ok and np.array_equal(got, want) and not (in_c and has_combines)
    assert _agree(ok), why


@pytest.mark.mpi(min_size=2)
def test_a_message_cut_short_is_caught_on_a_reused_run():
    """A run of a plan is reused with its store: a message shorter than the receive (a rank
    with another size) must not find the last run's trailer there, so the trailers are cleared:
    the receiver fails ("another call") instead of taking the last run's bytes."""
    if SIZE != 2:
        pytest.skip("one link: rank 1 sends rank 0 less than it expects")
    net, prog = _env(0)
    full = _bound(net, "allgather", 16)
    send, got = np.full(16, RANK + 1, np.uint8), np.zeros(32, np.uint8)
    Request.from_plan(prog, prog.start(full, send, got, signature=77)).Wait()
    ok = np.array_equal(got, np.repeat([1, 2], 16).astype(np.uint8))
    mine = full if RANK == 0 else _bound(net, "allgather", 8)
    got[:] = 0
    req = Request.from_plan(prog, prog.start(mine, send[:mine.nbytes // 2 if RANK else 16],
                                             got[:32 if RANK == 0 else 16], signature=77,
                                             what="Iallgather"))
    msg = _failure(req)
    if RANK == 0:  # 8 bytes and the trailer where 16 and the trailer were due
        ok = ok and "another call" in msg and not got.any()
    else:  # 16 bytes and the trailer where 8 and the trailer were due: cut short, or (a
        # small message received into a slot and the spare block apart: mpi.PACK_SMALL) its
        # last 8 bytes in the spare block and a trailer of payload bytes
        ok = ok and ("TRUNCATE" in msg or "another call" in msg)
    r2, g2, w2 = _start(net, prog, "alltoall", 3, 14)
    r2.Wait()
    assert _agree(ok and np.array_equal(g2, w2)), msg



@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("cloop", [True, False], ids=["rounds-in-c", "rounds-in-python"])
@pytest.mark.parametrize("coll", ["allgather", "reduce"])
def test_a_payload_apart_of_another_call_is_cut_short_safely(cloop, coll):
    """Payloads of ``APART`` bytes or more travel apart from their trailers, the payload's
    receive posted once its trailer is in.  Two ranks on one link start all-gathers (or
    reductions to rank 0 of doubles, whose payloads go one way) of different sizes (40 and
    48 KiB pieces, so other signatures): the trailer names another call, so the payload's
    receive is posted with a spare block apart from it — the longer payload is cut short
    there (``ERR_TRUNCATE``), the shorter one lands and the receiver fails ("another call")
    — and nothing is written past either receive buffer (padding of its own on each side,
    as Open MPI 5.0 writes past a contiguous receive); a rank that only sends (the
    reduction's rank 1) may finish, as a sender does in MPI.  Then the same sizes on both
    ranks run and match ``COMM_WORLD``, the payloads apart (their receives counted on the
    plan), in the compiled step and in the Python loop alike."""
    if SIZE != 2:
        pytest.skip("one link: each rank sends the other one message a round")
    from dualmpi.engine.mpi import APART
    net, prog = _env(0)
    step = prog._step
    if not cloop:
        prog._step = None  # (the rounds in Python: posted and tested from Progress._advance)
    reduce = coll == "reduce"
    _, _, add = resolve(MPI.SUM, np.dtype(np.float64), "Ireduce", MPI)
    kw = dict(combine=add) if reduce else {}
    out = (lambda n: n) if reduce else (lambda n: 2 * n)  # (bytes received of n sent)
    try:
        pad = 64
        sizes = (40 * 1024, 48 * 1024)
        mine = sizes[RANK]
        send = np.full(mine, RANK + 1, np.uint8)
        whole = np.full(out(max(sizes)) + 2 * pad, 0xEE, np.uint8)
        got = whole[pad:pad + out(mine)]
        b = _bound(net, coll, mine, itemsize=8 if reduce else 1)
        preq = prog.start(b, send, got, signature=mine, what="I" + coll, **kw)
        late = sum(len(rnd[7]) for rnd in preq.compiled.rounds)  # (the plan the request ran)
        msg = _failure(Request.from_plan(prog, preq))
        if RANK == 0:  # rank 1's 48 KiB where 40 were due: cut short in the spare block
            ok = "TRUNCATE" in msg or "another call" in msg
        elif reduce:  # rank 1 only sends
            ok = msg == "" or "another call" in msg
        else:  # rank 0's 40 KiB where 48 were due: its trailer names another call
            ok = "another call" in msg
        ok = ok and late == (RANK == 0 or not reduce) and np.all(whole[:pad] == 0xEE) and \
            np.all(whole[pad + out(mine):] == 0xEE)
        # the ranks are in step again: equal sizes, the payloads apart, equal to COMM_WORLD's
        if reduce:
            send = np.arange(APART // 8, dtype=np.float64) * (RANK + 1)
            got, want = np.zeros_like(send), np.zeros_like(send)
            WORLD.Reduce(send, want, MPI.SUM, root=0)
        else:
            send = np.arange(APART, dtype=np.uint8) + RANK
            got, want = np.zeros(2 * APART, np.uint8), np.zeros(2 * APART, np.uint8)
            WORLD.Allgather(send, want)
        b = _bound(net, coll, APART, itemsize=8 if reduce else 1)
        preq = prog.start(b, _u8(send), _u8(got), signature=APART, **kw)
        Request.from_plan(prog, preq).Wait()
        ok = ok and (RANK != 0 or np.array_equal(got, want)) and \
            sum(len(rnd[7]) for rnd in preq.compiled.rounds) == (RANK == 0 or not reduce)
    finally:
        prog._step = step
    assert _agree(ok), msg

# -- several in flight, waited for in different orders ------------------------------------------
@pytest.mark.parametrize("net_i", range(3))
def test_many_in_flight_waited_in_reverse_on_some_ranks(net_i):
    net, prog = _env(net_i)
    runs = [_start(net, prog, coll, 11, 3) for coll in COLLECTIVES]
    runs.append(_start(net, prog, "bcast", 11, 4))  # a second run of the first plan
    order = runs[::-1] if RANK % 2 else runs
    for req, _, _ in order:
        req.Wait()
    ok = all(np.array_equal(g, w) for _, g, w in runs) and not prog.active
    assert _agree(ok)


def _forwards(net, b):
    """True when this rank sends in a round after one in which it receives."""
    first_recv = min((r.index for r in b.rounds if r.recvs), default=None)
    return first_recv is not None and any(r.sends and r.index > first_recv for r in b.rounds)


@pytest.mark.parametrize("delay", [False, True])
@pytest.mark.parametrize("net_i", range(3))
def test_forwarding_ranks_wait_last(net_i, delay):
    """A broadcast that ranks forward completes when the forwarders wait for it last: they
    first wait for another request (an all-gather the others wait for second) or sleep."""
    net, prog = _env(net_i)
    a, got_a, want_a = _start(net, prog, "bcast", 64, 5)
    b, got_b, want_b = _start(net, prog, "allgather", 3, 5)
    forwarder = _forwards(net, _bound(net, "bcast", 256, SIZE - 1))
    if forwarder:
        if delay:
            time.sleep(0.3)
        b.Wait()
        a.Wait()
    else:
        a.Wait()
        b.Wait()
    anyone = WORLD.allreduce(1 if forwarder else 0, op=MPI.SUM)
    ok = np.array_equal(got_a, want_a) and np.array_equal(got_b, want_b)
    assert _agree(ok)
    if net.topology.spec.startswith("dualcube:r=2") and net.q == 1:
        assert anyone > 0  # the dual-cube broadcast does forward


def test_cross_waits_complete():
    """Rank r waits B then A while its neighbours wait A then B (every rank polls both)."""
    net, prog = _env(0)
    a, ga, wa = _start(net, prog, "allgather", 4, 6)
    b, gb, wb = _start(net, prog, "alltoall", 4, 6)
    first, second = (b, a) if RANK % 2 else (a, b)
    first.Wait()
    second.Wait()
    assert _agree(np.array_equal(ga, wa) and np.array_equal(gb, wb))


# -- the Request conventions -------------------------------------------------------------------
def test_inactive_requests():
    statuses = []
    empty = [None, MPI.REQUEST_NULL, Request()]
    ok = (Request.Waitall([]) is True and Request.Waitall(empty, statuses) is True
          and len(statuses) == 3 and Request.Testall(empty) is True
          and Request.Waitany(empty) == MPI.UNDEFINED
          and Request.Testany(empty) == (MPI.UNDEFINED, True)
          and Request.Waitsome(empty) is None and Request.Testsome(empty) is None
          and Request() == MPI.REQUEST_NULL and not Request() and Request().Test()
          and Request().test() == (True, None) and Request().wait() is None
          and Request.waitall(empty) == [None, None, None]
          and Request.testany(empty) == (MPI.UNDEFINED, True, None)
          and Request.waitsome(empty) == (None, None)
          and Request.Get_status_all(empty) is True
          and Request.Get_status_any(empty) == (MPI.UNDEFINED, True)
          and Request.Get_status_some(empty) is None)
    st = MPI.Status()
    Request().Wait(st)
    ok = ok and (st.source, st.tag, st.error) == (MPI.ANY_SOURCE, MPI.ANY_TAG, MPI.SUCCESS)
    with pytest.raises(InputError, match="not active"):
        Request().Free()
    with pytest.raises(InputError, match="cancel"):
        Request().Cancel()
    with pytest.raises(InputError, match="not a request"):
        Request.Waitall([3])
    assert _agree(ok)


def _self_pair(tag):
    """A real mpi4py send/receive pair of this rank with itself (and its buffers)."""
    out, back = np.arange(3, dtype=np.int64) + RANK, np.zeros(3, np.int64)
    return [WORLD.Isend(out, RANK, tag), WORLD.Irecv(back, RANK, tag)], (out, back)


@pytest.mark.parametrize("net_i", range(2))
def test_waitsome_reports_each_once_and_mixes_mpi_requests(net_i):
    net, prog = _env(net_i)
    runs = [_start(net, prog, c, 6, 7) for c in ("bcast", "alltoall", "allreduce")]
    real, (out, back) = _self_pair(11)
    reqs = [runs[0][0], None, runs[1][0], real[0], MPI.REQUEST_NULL, runs[2][0], real[1]]
    seen, statuses = [], []
    while True:
        got = Request.Waitsome(reqs, statuses)
        if got is None:
            break
        seen.extend(got)
        ok_status = len(statuses) >= len(got)
    want = [0, 2, 3, 5, 6]
    ok = sorted(seen) == want and len(set(seen)) == len(seen) and ok_status
    ok = ok and all(r == MPI.REQUEST_NULL for r in reqs if r is not None)
    ok = ok and all(np.array_equal(g, w) for _, g, w in runs) and np.array_equal(out, back)
    assert _agree(ok), seen


@pytest.mark.parametrize("net_i", range(2))
def test_testany_and_testall_conventions(net_i):
    net, prog = _env(net_i)
    runs = [_start(net, prog, c, 6, 8) for c in ("scatter", "allgather")]
    reqs = [r for r, _, _ in runs] + [None]
    seen, flags = [], set()
    while True:
        index, flag = Request.Testany(reqs)
        flags.add((index == MPI.UNDEFINED, flag))
        if index == MPI.UNDEFINED and flag:
            break
        if flag:
            seen.append(index)
        else:
            time.sleep(0.001)
    # an index with flag False never happens; (UNDEFINED, False): none done yet
    ok = sorted(seen) == [0, 1] and (False, False) not in flags
    # Testall: False until every one is done, then True with one status per request
    runs2 = [_start(net, prog, c, 6, 9) for c in ("bcast", "alltoall")]
    real, (out, back) = _self_pair(12)
    reqs = [r for r, _, _ in runs2] + real
    statuses = []
    while not Request.Testall(reqs, statuses):
        ok = ok and all(bool(r) for r in reqs)  # False: none of them was completed
        time.sleep(0.001)
    ok = ok and len(statuses) == 4 and statuses[0].source == MPI.ANY_SOURCE
    ok = ok and statuses[3].source == RANK and statuses[3].tag == 12
    ok = ok and all(np.array_equal(g, w) for _, g, w in runs + runs2)
    ok = ok and np.array_equal(out, back)
    assert _agree(ok), (seen, flags)


@pytest.mark.parametrize("net_i", range(2))
def test_waitany_and_waitall_with_statuses(net_i):
    net, prog = _env(net_i)
    runs = [_start(net, prog, c, 5, 10) for c in ("allreduce", "bcast", "scatter")]
    real, (out, back) = _self_pair(13)
    reqs = [runs[0][0], real[1], runs[1][0], real[0], runs[2][0]]
    first = Request.Waitany(reqs)
    statuses = []
    Request.Waitall(reqs, statuses)
    ok = 0 <= first < 5 and not reqs[first] and len(statuses) == 5
    ok = ok and (statuses[0].source, statuses[0].tag, statuses[0].error) == (
        MPI.ANY_SOURCE, MPI.ANY_TAG, MPI.SUCCESS)
    ok = ok and (first == 1 or (statuses[1].source, statuses[1].tag) == (RANK, 13))
    ok = ok and all(np.array_equal(g, w) for _, g, w in runs) and np.array_equal(out, back)
    ok = ok and Request.Waitany(reqs) == MPI.UNDEFINED
    assert _agree(ok), first


@pytest.mark.parametrize("net_i", range(2))
def test_get_status_forms_complete_nothing(net_i):
    net, prog = _env(net_i)
    runs = [_start(net, prog, c, 4, 14) for c in ("allgather", "bcast")]
    real, (out, back) = _self_pair(14)
    reqs = [runs[0][0], None, real[1], runs[1][0], real[0]]
    some = []
    while not Request.Get_status_all(reqs):
        got = Request.Get_status_some(reqs)
        some.append(got is not None and all(reqs[i] for i in got))
        index, flag = Request.Get_status_any(reqs)
        some.append(flag == (index != MPI.UNDEFINED))
    ok = all(some) and all(reqs[i] for i in (0, 2, 3, 4))  # done, yet still active
    ok = ok and Request.Get_status_some(reqs) == [0, 2, 3, 4]
    statuses = []
    Request.Waitall(reqs, statuses)
    ok = ok and not any(reqs[i] for i in (0, 2, 3, 4)) and statuses[2].tag == 14
    ok = ok and all(np.array_equal(g, w) for _, g, w in runs) and np.array_equal(out, back)
    assert _agree(ok)


def test_object_forms_return_what_finish_returns():
    net, prog = _env(0)
    reqs = []
    for k in range(3):
        b = _bound(net, "bcast", 4, 0)
        buf = np.full(4, k + 1 if RANK == 0 else 0, np.uint8)
        send, recv = (buf, None) if RANK == 0 else (None, buf)
        plan = prog.start(b, send, recv, finish=lambda buf=buf: ("got", int(buf.sum())))
        reqs.append(Request.from_plan(prog, plan))
    first = reqs[0].wait()
    flag, second = reqs[1].test()
    while not flag:
        flag, second = reqs[1].test()
    rest = Request.waitall(reqs)
    ok = first == ("got", 4) and second == ("got", 8) and rest == [None, None, ("got", 12)]
    assert _agree(ok), (first, second, rest)


def test_free_and_cancel():
    """Freeing a request in flight and cancelling any request are refused; a done one frees."""
    net, prog = _env(0)
    b = _bound(net, "bcast", 64, 0)
    buf = np.full(64, 5 if RANK == 0 else 0, np.uint8)
    send, recv = (buf, None) if RANK == 0 else (None, buf)
    refused, req = True, None
    if RANK != 0:  # the broadcast cannot be done before the root has started it
        req = Request.from_plan(prog, prog.start(b, send, recv, what="Ibcast"))
        try:
            req.Free()
            refused = False
        except InputError as exc:
            refused = "in flight" in str(exc)
    WORLD.Barrier()
    if RANK == 0:
        req = Request.from_plan(prog, prog.start(b, send, recv, what="Ibcast"))
    with pytest.raises(InputError, match="cannot be cancelled"):
        req.Cancel()
    req.Wait()
    b2 = _bound(net, "allgather", 2)
    req2 = Request.from_plan(prog, prog.start(b2, np.zeros(2, np.uint8),
                                              np.zeros(2 * SIZE, np.uint8)))
    while not req2.Get_status():
        pass
    req2.Free()  # done: frees
    ok = refused and int(buf.sum()) == 5 * 64 and not req2 and req2.Test()
    assert _agree(ok)


# -- agreement, signatures and errors ---------------------------------------------------------
def _check(hi, lo):
    if np.any(hi != lo):
        i = int(np.flatnonzero(hi != lo)[0])
        raise InputError(f"Ibcast: ranks disagree on field {i} (from {lo[i]} to {hi[i]})")


@pytest.mark.parametrize("net_i", range(2))
def test_disagreement_fails_on_every_rank_and_moves_nothing(net_i):
    net, prog = _env(net_i)
    b = _bound(net, "allgather", 8)
    send = np.full(8, RANK + 1, np.uint8)
    got = np.full(8 * SIZE, 99, np.uint8)
    vec = [7, 1 if RANK == SIZE - 1 else 0]  # the last rank disagrees (alone: no one does)
    always = _check if SIZE > 1 else lambda hi, lo: _check(hi, lo - [0, 1])
    req = Request.from_plan(prog, prog.start(b, send, got, agree=vec, check=always,
                                             what="Iallgather"))
    ok_req, ok_got, ok_want = _start(net, prog, "allgather", 3, 11)  # started after: unaffected
    msg = ""
    try:
        req.Wait()
    except InputError as exc:
        msg = str(exc)
    ok_req.Wait()
    ok = "disagree on field 1" in msg and np.all(got == 99) and not req
    ok = ok and np.array_equal(ok_got, ok_want)
    # an agreement that holds: the rounds run
    req = Request.from_plan(prog, prog.start(b, send, got, agree=[7, 3], check=_check))
    req.Wait()
    ok = ok and np.array_equal(got.reshape(SIZE, 8), np.repeat(np.arange(1, SIZE + 1), 8)
                               .reshape(SIZE, 8))
    assert _agree(ok), msg


def test_a_rank_without_a_plan_fails_every_rank():
    """A rank whose arguments are bad starts its request without a plan and a flag in the
    agreed vector: every rank's request fails alike, before any data moves."""
    net, prog = _env(0)
    bad = RANK == SIZE - 1
    b = None if bad else _bound(net, "allgather", 4)
    got = np.full(4 * SIZE, 7, np.uint8)

    def check(hi, lo):
        if hi[1]:
            raise InputError(f"Iallgather: arguments rejected on rank {hi[1] - 1}")

    req = Request.from_plan(prog, prog.start(b, np.zeros(4, np.uint8), got,
                                             agree=[3, RANK + 1 if bad else 0], check=check))
    msg = ""
    try:
        req.Wait()
    except InputError as exc:
        msg = str(exc)
    with pytest.raises(DualmpiError, match="needs an agreement"):
        prog.start(None)
    ok = msg == f"Iallgather: arguments rejected on rank {SIZE - 1}" and np.all(got == 7)
    r2, g2, w2 = _start(net, prog, "alltoall", 2, 15)
    r2.Wait()
    assert _agree(ok and np.array_equal(g2, w2)), msg


@pytest.mark.parametrize("net_i", range(2))
def test_signature_trailer(net_i):
    """With a signature, messages carry it; a rank with another one is caught by receivers,
    which still finish every round (no rank is left waiting)."""
    net, prog = _env(net_i)
    b = _bound(net, "allgather", 8)
    send = np.full(8, RANK + 1, np.uint8)
    got = np.zeros(8 * SIZE, np.uint8)
    Request.from_plan(prog, prog.start(b, send, got, signature=1234)).Wait()
    ok = np.array_equal(got, np.repeat(np.arange(1, SIZE + 1), 8).astype(np.uint8))
    got[:] = 0
    sig = 1234 if RANK != SIZE - 1 or SIZE == 1 else 4321
    req = Request.from_plan(prog, prog.start(b, send, got, signature=sig, what="Iallgather"))
    caught = False
    try:
        req.Wait()
    except DualmpiError as exc:
        caught = "another call" in str(exc) and "Iallgather" in str(exc)
        ok = ok and not got.any()  # nothing copied out
    total = WORLD.allreduce(int(caught), op=MPI.SUM)
    ok = ok and (total >= 1 if SIZE > 1 else total == 0)
    # the ranks are still in step: the next request runs
    r2, g2, w2 = _start(net, prog, "alltoall", 3, 12)
    r2.Wait()
    assert _agree(ok and np.array_equal(g2, w2)), total


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("late", [0, 1])
def test_mpi_error_is_raised_from_wait(late):
    """Ranks that disagree on a single-hop broadcast's size: the receiver's message is
    truncated; the error (MPI's own) is raised from Wait and the request is then done,
    whether the message is there when the receiver starts (rank 1 late: found by a test
    of the round) or comes while it blocks in Wait (rank 0 late: by the blocking wait)."""
    if SIZE != 2:
        pytest.skip("a single-hop broadcast: 2 ranks")
    net, prog = _env(0)
    n = 64 if RANK == 0 else 32
    b = _bound(net, "bcast", n, 0)
    buf = np.ones(n, np.uint8) if RANK == 0 else np.zeros(n, np.uint8)
    send, recv = (buf, None) if RANK == 0 else (None, buf)
    if RANK == late:
        time.sleep(0.3)
    req = Request.from_plan(prog, prog.start(b, send, recv, what="Ibcast"))
    msg = ""
    try:
        req.Wait()
    except DualmpiError as exc:
        msg = str(exc)
    ok = (msg == "" and not req) if RANK == 0 else (
        "Ibcast" in msg and "TRUNCATE" in msg and not req and not prog.active)
    r2, g2, w2 = _start(net, prog, "allgather", 3, 13)
    r2.Wait()
    assert _agree(ok and np.array_equal(g2, w2)), msg


def test_datatypes_are_cached_per_plan():
    """A plan's hindexed datatypes are made once and reused by later runs (a bounded cache)."""
    if not SPECS or SPECS[-1][1] < 2:
        pytest.skip(f"no network of two nodes per rank at {SIZE} rank(s)")
    net, prog = _env(len(SPECS) - 1)  # two nodes per rank: messages of several segments
    b = _bound(net, "alltoall", 12)
    reqs = []
    for _ in range(3):
        send = np.arange(12 * SIZE, dtype=np.uint8)
        reqs.append(Request.from_plan(prog, prog.start(b, send, np.zeros_like(send))))
    key = (id(b), False, False)  # (no trailer; not a reduction whose ranks exchange payloads)
    comp = prog._cache.get(key)
    types = list(comp.types) if comp is not None else None
    Request.Waitall(reqs)
    ok = comp is not None and comp.users == 0 and prog._cache[key] is comp and comp.types == types
    ok = ok and (len(types) > 0 or SIZE == 1)  # several segments per message: hindexed types
    assert _agree(ok)
