"""Calls repeated on new arrays of the same shape run from C, as MPI.COMM_WORLD computes them.

A program that slices its buffers in the call (``net.Bcast(a[i:j])``) or makes its receive
buffer anew (``net.Allreduce(x, np.empty_like(x))``) passes new array objects every call.
From the second such call a blocking fixed-count collective is remembered *by shape*
(``Comm._remember``, ``Recall.shape``): any arrays of that dtype, shape and strides run the
plan bound once, their addresses written into its copies.  Each case here slices every
call's buffers out of larger arrays at a new offset (what lies around a slice must stay
untouched), runs it beside ``MPI.COMM_WORLD``'s own method on equal buffers, and checks the
calls really were matched by shape; every rank finishes its calls, then the ranks agree.
"""

import numpy as np
import pytest

from collective_cases import MPI, NETS, RANK, SIZE, WORLD, agree, network
from dualmpi.calls import SEQ, SHAPE
from dualmpi.engine import cloop, recall
from collective_cases import free_networks  # noqa: F401 - frees the module's communicators

#: The repeats by shape run a runner's bound call in C (``Recall.shape``): without the
#: compiled loop or the extension (``DUALMPI_CLOOP=0``, ``DUALMPI_RECALL=0``, no compiler)
#: every call takes the full path, whose results the other modules check.
pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(cloop.load() is None or recall.load() is None,
                                 reason="no compiled loop: calls on new arrays take the full "
                                        "path")]

#: Elements of a piece: the call's blocks, small enough to run on copies through the store.
K = 5
#: Calls per case: the first is read in Python, the second remembers the shape, the rest
#: repeat it from C.
CALLS = 6
SENTINEL = -7.0


def _case(name, k):
    """Return ``(send length, recv length, call(target, send, recv))`` of a collective whose
    pieces have ``k`` doubles."""
    root = SIZE - 1
    table = {
        "Bcast": (k, 0, lambda t, s, r: t.Bcast(s, root)),
        "Scatter": (k * SIZE, k, lambda t, s, r: t.Scatter(s, r, root)),
        "Gather": (k, k * SIZE, lambda t, s, r: t.Gather(s, r, root)),
        "Allgather": (k, k * SIZE, lambda t, s, r: t.Allgather(s, r)),
        "Alltoall": (k * SIZE, k * SIZE, lambda t, s, r: t.Alltoall(s, r)),
        "Reduce": (k, k, lambda t, s, r: t.Reduce(s, r, MPI.SUM, root)),
        "Allreduce": (k, k, lambda t, s, r: t.Allreduce(s, r, MPI.SUM)),
        "Allreduce-max": (k, k, lambda t, s, r: t.Allreduce(s, r, MPI.MAX)),
        "Scan": (k, k, lambda t, s, r: t.Scan(s, r, MPI.SUM)),
        "Exscan": (k, k, lambda t, s, r: t.Exscan(s, r, MPI.SUM)),
        "Reduce_scatter_block": (k * SIZE, k, lambda t, s, r: t.Reduce_scatter_block(s, r)),
        "Allreduce-in-place": (0, k, lambda t, s, r: t.Allreduce(MPI.IN_PLACE, r)),
        "Allgather-in-place": (0, k * SIZE, lambda t, s, r: t.Allgather(MPI.IN_PLACE, r)),
    }
    return table[name]


NAMES = ["Bcast", "Scatter", "Gather", "Allgather", "Alltoall", "Reduce", "Allreduce",
         "Allreduce-max", "Scan", "Exscan", "Reduce_scatter_block", "Allreduce-in-place",
         "Allgather-in-place"]


def _pair(n, call, where):
    """Two equal big arrays and the slice of each at offset ``where`` (``n`` doubles)."""
    rng = np.random.default_rng([RANK, n, call])
    big = np.full(4 * max(n, 1) + 16, SENTINEL)
    big[where:where + n] = rng.integers(-50, 50, n)
    return big, big.copy()


@pytest.mark.parametrize("index", NETS)
@pytest.mark.parametrize("name", NAMES)
def test_calls_on_new_arrays_of_one_shape_equal_mpi(index, name):
    net = network(index)
    ns, nr, run = _case(name, K)
    method = name.split("-")[0]
    problems = []
    for call in range(CALLS):
        where = 3 + 5 * call  # a new slice every call, at a new place in its array
        sbig, sref = _pair(ns, call, where)
        rbig, rref = _pair(nr, call + 100, where)
        if name == "Bcast":
            rbig = rref = None
        send = sbig[where:where + ns] if ns else None
        recv = rbig[where:where + nr] if nr else None
        if name == "Bcast":
            run(net, send, None)
            run(WORLD, sref[where:where + ns], None)
        else:
            run(net, send, recv)
            run(WORLD, None if send is None else sref[where:where + ns], rref[where:where + nr])
        if not np.array_equal(sbig, sref) or (rbig is not None and not np.array_equal(rbig, rref)):
            problems.append(call)
    entries = net._recalls.get(method, ())
    shaped = any(e.by_shape_ for e in entries)
    assert agree(not problems and shaped), (problems, [e.by_shape_ for e in entries])


@pytest.mark.parametrize("index", NETS)
@pytest.mark.parametrize("name", ["Bcast", "Allgather", "Alltoall", "Allreduce", "Gather",
                                  "Scatter", "Allreduce-in-place"])
def test_buffer_specs_on_new_arrays_repeat_by_shape_as_mpi_computes(index, name, monkeypatch):
    """Buffer specs made for every call on new arrays (``[np.empty(n), MPI.DOUBLE]``, ``[x, n,
    MPI.DOUBLE]``): from the third call on they repeat by shape without the Python path
    (``calls.collective`` not entered; from the fourth when the size is new to the engine, whose
    first call runs once without a plan), every result equal to COMM_WORLD's on the same specs
    and the bytes around each slice untouched."""
    from dualmpi import calls

    net = network(index)
    ns, nr, run = _case(name, K)
    method = name.split("-")[0]
    entered = []
    real = calls.collective
    monkeypatch.setattr(calls, "collective",
                        lambda *a, **k: entered.append(a[1]) or real(*a, **k))
    problems = []
    earlier = list(net._recalls.get(method, ()))  # (held: no id reused)
    for call in range(CALLS):
        where = 2 + 3 * call
        sbig, sref = _pair(ns, call, where)
        rbig, rref = _pair(nr, call + 100, where)

        def spec(big, n):
            if not n:
                return MPI.IN_PLACE
            piece = big[where:where + n]  # (a count in a spec is per block: K elements)
            return [piece, MPI.DOUBLE] if call % 2 else [piece, K, MPI.DOUBLE]

        if name == "Bcast":
            run(net, spec(sbig, ns), None)
            run(WORLD, spec(sref, ns), None)
        else:
            run(net, spec(sbig, ns), spec(rbig, nr))
            run(WORLD, spec(sref, ns), spec(rref, nr))
        if not np.array_equal(sbig, sref) or not np.array_equal(rbig, rref):
            problems.append(call)
    entries = net._recalls.get(method, ())
    shaped = sum(e.by_shape_ and all(e is not x for x in earlier) and
                 any(k[0] == SEQ for k in e.shape) for e in entries)
    # (the two spec forms alternate: each is read twice, then repeats by shape; a size the
    # engine has no plan for yet runs once first, without one (Engine.once): one read more; a
    # method keeps its last few calls, so older entries may have gone)
    assert agree(not problems and shaped >= 1 and len(entered) <= 5), \
        (problems, shaped, entered)


@pytest.mark.parametrize("index", NETS)
def test_new_arrays_alternating_shapes_and_arrays_that_share_memory(index):
    """Two shapes in turn (each remembered by shape), an np.empty_like every call, a send
    slice that overlaps its receive slice (mpi4py: in place when they start together, so
    never matched by shape), and a read-only receive array (the Python path's error)."""
    net = network(index)
    problems = []
    for call in range(8):
        k = 3 if call % 2 else 4
        x = np.arange(k, dtype=np.float64) + RANK + call
        mine, ref = np.empty_like(x), np.empty_like(x)
        net.Allreduce(x, mine, MPI.SUM)
        WORLD.Allreduce(x, ref, MPI.SUM)
        if not np.array_equal(mine, ref):
            problems.append(("alternating", call))
    shapes = {k[2] for e in net._recalls.get("Allreduce", ()) if e.by_shape_
              for k in e.shape if k[0] == SHAPE}
    for call in range(3):  # a send buffer at the receive buffer's address: in place
        both, ref = np.arange(4.0) + RANK + call, np.arange(4.0) + RANK + call
        net.Allreduce(both[:4], both[:4], MPI.SUM)
        WORLD.Allreduce(MPI.IN_PLACE, ref, MPI.SUM)
        if not np.array_equal(both, ref):
            problems.append(("aliased", call))
    ro = np.zeros(4)
    ro.flags.writeable = False
    try:
        net.Allreduce(np.ones(4), ro, MPI.SUM)
        problems.append("read-only recvbuf accepted")
    except Exception as exc:  # noqa: BLE001 - the verdict below names it
        if "read-only" not in str(exc):
            problems.append(("read-only", str(exc)))
    assert agree(not problems and {(3,), (4,)} <= shapes), (problems, shapes)


@pytest.mark.mpi(min_size=2)
def test_one_rank_passing_another_shape_among_repeats_by_shape_fails_every_rank():
    """Every rank repeats an Allgather by shape on new slices; then rank 0's slice is one
    element longer: rank 0 is read in Python (a new signature), the others repeat from C, and
    every rank raises promptly (the alarm line), as for repeats on the same objects."""
    import dualmpi
    from dualmpi.errors import DualmpiError

    spec, q = {2: ("hypercube:n=1", 1), 4: ("hypercube:n=2", 1), 8: ("dualcube:r=2", 1),
               32: ("dualcube:r=3", 1), 64: ("metacube:k=2,m=1", 1)}[SIZE]
    net = dualmpi.Comm(WORLD, spec, nodes_per_rank=q, watchdog=60)
    big = np.arange(64.0)
    err = None
    try:
        for call in range(4):
            net.Allgather(big[call:call + 2], np.empty(2 * SIZE))
        n = 3 if RANK == 0 else 2
        net.Allgather(big[:n], np.empty(n * SIZE))
    except DualmpiError as exc:
        err = str(exc)
    try:
        net.Barrier()
        after = "usable"
    except DualmpiError as exc:
        after = str(exc)
    net.Free()
    assert agree(err is not None or "unusable" in after), (err, after)


@pytest.mark.parametrize("index", NETS)
@pytest.mark.parametrize("name", ["Allgather", "Allreduce", "Bcast"])
def test_large_pieces_on_new_arrays_run_by_shape_and_arrays_passed_again_bind(index, name):
    """Pieces of ``calls.ZERO_COPY_ABOVE`` bytes and more: calls on new slices are
    remembered by shape from their second call (on copies through the store); arrays passed
    again among them are declined by it, so the Python path binds a plan to them (zero-copy,
    one node per rank) as it did before; every result equals COMM_WORLD's."""
    from dualmpi.calls import ZERO_COPY_ABOVE

    net = network(index)
    k = ZERO_COPY_ABOVE // 8
    ns, nr, run = _case(name, k)
    problems = []
    kept = _pair(ns, 0, 0)[0][:ns], _pair(nr, 1, 0)[0][:nr]  # passed again and again
    for call in range(8):
        again = call % 2 == 1
        where = 1 + call
        sbig, sref = _pair(ns, call, where)
        rbig, rref = _pair(nr, call + 100, where)
        if again:
            sbig[where:where + ns] = kept[0]
            sref[where:where + ns] = kept[0]
            send, recv = kept
        else:
            send, recv = sbig[where:where + ns], rbig[where:where + nr]
        before = kept[1].copy()
        run(net, send, None if name == "Bcast" else recv)
        run(WORLD, sref[where:where + ns], None if name == "Bcast" else rref[where:where + nr])
        got = recv if again else rbig[where:where + nr]
        if name == "Bcast":
            ok = np.array_equal(send, sref[where:where + ns])
        else:
            ok = np.array_equal(got, rref[where:where + nr])
            if not again:
                ok = ok and np.array_equal(rbig, rref) and np.array_equal(kept[1], before)
        if not ok:
            problems.append(call)
    entries = net._recalls.get(name, ())
    shaped = any(e.by_shape_ for e in entries)
    bound = any(e.pins for e in entries)
    assert agree(not problems and shaped and (bound or not net._zero_copy)), \
        (problems, shaped, bound, net._zero_copy)


#: The collectives of the recurring-address test (from 32 ranks on two: the pieces are large).
RECURRING = ["Allgather", "Allreduce", "Bcast", "Alltoall"] if SIZE < 32 else ["Allgather",
                                                                             "Bcast"]


@pytest.mark.parametrize("index", NETS)
@pytest.mark.parametrize("name", RECURRING)
@pytest.mark.parametrize("form", ["views", "temporaries", "cycle"])
def test_large_pieces_at_recurring_addresses_run_bound_there(index, name, form, monkeypatch):
    """Pieces of ``calls.ZERO_COPY_ABOVE`` bytes and more on new arrays at addresses the
    program comes back to: new
    views of the same arrays every call (``views``), a receive array made for every call and
    dropped after it (``temporaries``: the allocator often puts it where the last one was),
    slices at three offsets in turn (``cycle``).  Every result equals COMM_WORLD's with the
    bytes around each slice untouched; with one node per rank the calls at a recurring
    address set run on a runner bound to that memory (``Comm._at``: zero-copy) from C, the
    Python path not entered in the last calls, and no array made for a call outlives it (no
    garbage collection asked for: a reference cycle would keep it, and the next temporary
    would not find its place)."""
    import weakref

    from dualmpi import calls
    from dualmpi.calls import ZERO_COPY_ABOVE

    net = network(index)
    k = ZERO_COPY_ABOVE // 8
    ns, nr, run = _case(name, k)
    entered, step = [], [0]
    real = calls.collective
    monkeypatch.setattr(calls, "collective",
                        lambda *a, **kw: entered.append(step[0]) or real(*a, **kw))
    send = _pair(ns, 0, 0)[0][:ns]
    m = ns if name == "Bcast" else nr  # the piece written: the broadcast's buffer, else recv
    big, ref_big = np.full(3 * m + 8, SENTINEL), np.full(3 * m + 8, SENTINEL)
    problems, dead = [], []
    calls_made = 16
    for call in range(calls_made):
        step[0] = call
        where = 2 + (call % 3) * m if form == "cycle" else 2
        if name == "Bcast":
            piece, ref = big[where:where + m], ref_big[where:where + m]
            if RANK == SIZE - 1:
                piece[:] = ref[:] = send + call
            run(net, piece, None)
            run(WORLD, ref, None)
        else:
            if form == "temporaries":
                piece, ref = np.empty(m), np.empty(m)
                dead.append(weakref.ref(piece))
            else:
                piece, ref = big[where:where + m], ref_big[where:where + m]
            run(net, send, piece)
            run(WORLD, send.copy(), ref)
        if not np.array_equal(piece, ref) or not np.array_equal(big, ref_big):
            problems.append(call)
        del piece, ref  # (no cycle holds them: freed here when nothing else does)
    bound = len(net._at) > 0
    alive = [r for r in dead if r() is not None]
    # (one node per rank: the calls at a recurring address set bind there, after which the
    # Python path is not entered)
    late = [i for i in entered if i >= calls_made - 4]
    fast = not net._zero_copy or (bound and not late)
    assert agree(not problems and fast and not alive), (problems, entered, bound, len(alive))


#: The nonblocking forms of the fixed-count collectives (their blocking twins as in _case).
INAMES = ["Bcast", "Scatter", "Gather", "Allgather", "Alltoall", "Reduce", "Allreduce", "Scan",
          "Exscan", "Reduce_scatter_block", "Allreduce-in-place"]


class _Started:
    """``target`` whose collective methods start its nonblocking ones (``Ibcast`` for
    ``Bcast``) and return their requests."""

    def __init__(self, target):
        self.target = target

    def __getattr__(self, name):
        return getattr(self.target, _nonblocking(name))


def _nonblocking(name):
    """``Ibcast`` for ``Bcast``."""
    return "I" + name[0].lower() + name[1:]


@pytest.mark.parametrize("index", NETS)
@pytest.mark.parametrize("name", INAMES)
def test_nonblocking_calls_on_new_arrays_of_one_shape_equal_mpi(index, name):
    """A nonblocking fixed-count call on new slices every time (``calls._shaped_repeat``: the
    remembered call's repeat for their addresses), two of them in flight at once on different
    slices and waited for in reverse order: every result equals COMM_WORLD's, the bytes around
    each slice untouched, and the calls after the first ran as repeats for their addresses."""
    net = network(index)
    ns, nr, run = _case(name, K)
    started = _Started(net)
    problems = []
    for call in range(CALLS):
        pairs = []
        for lane in range(2):  # two calls in flight, each on slices of its own arrays
            where = 3 + 5 * call + lane
            sbig, sref = _pair(ns, 2 * call + lane, where)
            rbig, rref = _pair(nr, 2 * call + lane + 100, where)
            if name == "Bcast":
                rbig = rref = None
            send = sbig[where:where + ns] if ns else None
            recv = rbig[where:where + nr] if nr else None
            req = run(started, send, recv)
            pairs.append((req, sbig, sref, rbig, rref, where))
        for req, *_ in reversed(pairs):
            req.Wait()
        for _, sbig, sref, rbig, rref, where in pairs:
            if name == "Bcast":
                run(WORLD, sref[where:where + ns], None)
            else:
                run(WORLD, None if not ns else sref[where:where + ns], rref[where:where + nr])
            if not np.array_equal(sbig, sref) or \
                    (rbig is not None and not np.array_equal(rbig, rref)):
                problems.append(call)
    memo = net._i_memo.get(_nonblocking(name.split("-")[0]))
    shaped = memo is not None and len(memo.shaped) > 0
    assert agree(not problems and (shaped or SIZE == 1)), (problems, shaped)


@pytest.mark.parametrize("index", NETS)
def test_a_nonblocking_call_holds_its_new_arrays_until_it_ends(index):
    """``net.Iallgather(x, np.empty(n))``: nothing but the request holds the receive array,
    whose address the repeat copies the result to (``PlanRequest.keep``); it stays alive until
    the request is done and is released with it."""
    import weakref

    net = network(index)
    x = np.arange(3.0) + RANK
    ok = True
    refs = []
    for call in range(4):
        req = net.Iallgather(x, np.empty(3 * SIZE))
        refs.append(weakref.ref(req._plan.keep[1]) if getattr(req._plan, "keep", None) else None)
        alive = refs[-1] is None or refs[-1]() is not None
        req.Wait()
        got = refs[-1]() if refs[-1] is not None else None
        want = np.empty(3 * SIZE)
        WORLD.Allgather(x, want)
        ok = ok and alive and (got is None or np.array_equal(got, want))
        del req, got
    # (no gc.collect(): the arrays are in no cycle, freed as their last reference goes; a
    # collection costs seconds in a process that has run the whole tier)
    held = sum(1 for r in refs if r is not None)
    freed = all(r() is None for r in refs if r is not None)
    assert agree(ok and freed and (held >= 2 or SIZE == 1)), (ok, freed, held)


@pytest.mark.parametrize("index", NETS)
def test_empty_slices_repeat_by_shape_as_mpi_does(index):
    """Count 0 (``big[i:i]``, a new empty view every call): blocking and nonblocking calls
    repeat by shape, receive nothing, and leave the receive array's bytes alone."""
    net = network(index)
    big = np.arange(20.0) + RANK
    problems = []
    for call in range(5):
        mine, ref = np.full(4, SENTINEL), np.full(4, SENTINEL)
        net.Allgather(big[call:call], mine[call % 3:call % 3])
        net.Iallgather(big[call:call], mine[1:1]).Wait()
        WORLD.Allgather(big[call:call], ref[:0])
        if not np.array_equal(mine, ref):
            problems.append(call)
    shaped = any(e.by_shape_ for e in net._recalls.get("Allgather", ()))
    memo = net._i_memo.get("Iallgather")
    ishaped = memo is not None and len(memo.shaped) > 0
    assert agree(not problems and shaped and (ishaped or SIZE == 1)), (problems, shaped, ishaped)
