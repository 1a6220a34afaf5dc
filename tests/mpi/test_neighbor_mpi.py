"""dualmpi's neighbourhood collectives against Open MPI's on a dist-graph communicator of the same
neighbours (built from COMM_WORLD, reorder=False), on the same buffers.

For every network and nodes per rank the job's size allows (1, 2 or 4 nodes per rank), the
test derives each rank's neighbours from the topology itself (the node's links in dimension
order with one node per rank; the ranks playing a neighbour of one of its nodes, ascending,
with several), builds ``WORLD.Create_dist_graph_adjacent(nbrs, nbrs, reorder=False)`` and runs
each call there and on :class:`dualmpi.Comm` on receive buffers that start as the same
sentinel: the buffer, object and nonblocking forms (Ineighbor_* with Test, Wait and
Request.Waitall, in flight beside a blocking call and beside a broadcast request of the
engine), the queries and the link statistics.  Error cases: counts (fewer, more: truncated)
or datatypes that differ between two neighbours raise InputError on both ends, a rank with a
bad buffer makes its neighbours raise too, and the communicator works afterwards (no message
is left behind).  Every rank communicates in every test, then the ranks agree on the verdict.
Run at 1, 2, 4, 8 (and once at 32: D_3 with one node per rank, sampled).
"""

import numpy as np
import pytest

MPI = pytest.importorskip("mpi4py.MPI")

import dualmpi  # noqa: E402
from dualmpi import calls, neighbor as nb  # noqa: E402
from dualmpi.engine import recall  # noqa: E402
from dualmpi.errors import InputError  # noqa: E402
from dualmpi.topology import from_spec  # noqa: E402
from collective_cases import blocks_of  # noqa: E402

WORLD = MPI.COMM_WORLD
SIZE = WORLD.Get_size()
RANK = WORLD.Get_rank()
SENTINEL = -7

pytestmark = pytest.mark.mpi(min_size=1)

SPECS = ("hypercube:n=0", "hypercube:n=1", "dualcube:r=1", "hypercube:n=2", "dualcube:r=2",
         "hypercube:n=3", "dualcube:r=3")
#: Many ranks on two cores are slow: fewer cases there.
SAMPLED = SIZE > 8


def _configs():
    out = []
    for spec in SPECS:
        p = from_spec(spec).num_nodes
        if p % SIZE == 0 and p // SIZE in (1, 2, 4):
            out.append((spec, p // SIZE))
    return out


CONFIGS = _configs()
DTYPES = [np.int32] if SAMPLED else [np.int32, np.float64]
#: MID (32,568 bytes of int32, 65,136 of float64): past Open MPI's eager limits (the rendezvous
#: protocol), header and payload still one message (under neighbor.SPLIT).
MID = nb.SPLIT // 8 - 50
#: BIG (64 KiB and more): payloads a call, blocking or not, sends after their headers, on their
#: own (neighbor.SPLIT).
BIG = nb.SPLIT // 4 + 7
COUNTS = [0, 3, BIG] if SAMPLED else [0, 1, 3, MID, BIG]


def _expected_neighbours(topo, q, rank):
    """The neighbour list, derived here from the topology (not from dualmpi.neighbor)."""
    if q == 1:
        return [int(v) for v in topo.neighbors(rank)]
    return sorted({int(v) // q for u in range(rank * q, rank * q + q) for v in topo.neighbors(u)}
                  - {rank})


class Net:
    """A dualmpi.Comm and Open MPI's dist-graph communicator of the same neighbours."""

    def __init__(self, spec, q):
        self.spec, self.q = spec, q
        self.topo = from_spec(spec)
        self.net = dualmpi.Comm(WORLD, spec, nodes_per_rank=q)
        self.nbrs = _expected_neighbours(self.topo, q, RANK)
        self.ref = WORLD.Create_dist_graph_adjacent(self.nbrs, self.nbrs, reorder=False)

    def free(self):
        self.ref.Free()
        self.net.Free()


@pytest.fixture(scope="module", params=CONFIGS, ids=[f"{s}-q{q}" for s, q in CONFIGS])
def net(request):
    n = Net(*request.param)
    yield n
    n.free()


def _agree(ok):
    """True when ``ok`` holds on every rank (collective)."""
    return bool(WORLD.allreduce(1 if ok else 0, op=MPI.MIN))


def _attempt(fn):
    """Run ``fn``; return ``(result, exception)`` (so every rank reaches the verdict)."""
    try:
        return fn(), None
    except Exception as exc:  # noqa: BLE001 - judged by the caller, on every rank together
        return None, exc


def _fail_unless(ok, what):
    """Fail on every rank together unless ``ok`` holds on every rank."""
    bad = [msg for msg in WORLD.allgather(None if ok else f"rank {RANK}: {what}") if msg]
    if bad:
        pytest.fail("; ".join(bad[:4]))


def _data(n, dtype, salt=0):
    return (np.arange(n) * 7 + 1000 * RANK + salt).astype(dtype)


def _compare(ref_call, our_call, a, b, what):
    """Run Open MPI's call on ``a`` and ours on ``b``; fail on every rank unless they agree."""
    ref_call(a)
    _, exc = _attempt(lambda: our_call(b))
    ok = exc is None and np.array_equal(a, b)
    _fail_unless(ok, f"{what}: " + (f"{type(exc).__name__}: {exc}" if exc else
                                    f"got {b.tolist()}, Open MPI {a.tolist()}"))


# -- queries -----------------------------------------------------------------------------------

def test_queries(net):
    """Get_dist_neighbors(_count) and Get_topology as Open MPI's dist-graph communicator's."""
    ours = (net.net.Get_dist_neighbors(), net.net.Get_dist_neighbors_count(),
            net.net.Get_topology())
    ref = (net.ref.Get_dist_neighbors(), net.ref.Get_dist_neighbors_count(),
           net.ref.Get_topology())
    ok = ours == ref and ours[0][0] == net.nbrs and ours[2] == MPI.DIST_GRAPH
    _fail_unless(ok, f"ours {ours}, Open MPI {ref}")


# -- buffer forms ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", COUNTS)
def test_allgather(net, dtype, count):
    d = len(net.nbrs)
    send = _data(count, dtype)
    a = np.full(d * count, SENTINEL, dtype)
    b = a.copy()
    _compare(lambda r: net.ref.Neighbor_allgather(send, r),
             lambda r: net.net.Neighbor_allgather(send, r), a, b, "Neighbor_allgather")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", COUNTS)
def test_alltoall(net, dtype, count):
    d = len(net.nbrs)
    send = _data(d * count, dtype)
    a = np.full(d * count, SENTINEL, dtype)
    b = a.copy()
    _compare(lambda r: net.ref.Neighbor_alltoall(send, r),
             lambda r: net.net.Neighbor_alltoall(send, r), a, b, "Neighbor_alltoall")


def _own_count(rank):
    """How many elements ``rank`` sends in the v-variants (0 included, uneven)."""
    return rank % 3 + (rank // 3) % 2


def _pair_count(src, dst):
    """Elements ``src`` sends ``dst`` in Neighbor_alltoallv (0 included, uneven, asymmetric)."""
    return (src + 2 * dst) % 4


@pytest.mark.parametrize("dtype", DTYPES)
def test_allgatherv(net, dtype):
    """Uneven counts, blocks out of order with gaps the call must leave untouched."""
    counts = np.array([_own_count(s) for s in net.nbrs], dtype=np.int64)
    d = len(counts)
    spans = counts + 1
    displs = np.zeros(d, dtype=np.int64)
    if d:
        order = np.arange(d)[::-1]  # last neighbour's block first
        displs[order] = np.concatenate([[0], np.cumsum(spans[order])[:-1]])
    send = _data(_own_count(RANK), dtype)
    a = np.full(int(spans.sum()), SENTINEL, dtype)
    b = a.copy()
    _compare(lambda r: net.ref.Neighbor_allgatherv(send, [r, (counts, displs)]),
             lambda r: net.net.Neighbor_allgatherv(send, [r, (counts, displs)]),
             a, b, "Neighbor_allgatherv")


@pytest.mark.parametrize("dtype", DTYPES)
def test_alltoallv(net, dtype):
    scounts = np.array([_pair_count(RANK, s) for s in net.nbrs], dtype=np.int64)
    rcounts = np.array([_pair_count(s, RANK) for s in net.nbrs], dtype=np.int64)
    sdispls = np.cumsum(scounts) - scounts
    rdispls = np.cumsum(rcounts + 2) - (rcounts + 2) + 1  # gaps of 2, one element before
    send = _data(int(scounts.sum()), dtype)
    a = np.full(int((rcounts + 2).sum()) + 1, SENTINEL, dtype)
    b = a.copy()
    _compare(lambda r: net.ref.Neighbor_alltoallv([send, (scounts, sdispls)],
                                                   [r, (rcounts, rdispls)]),
             lambda r: net.net.Neighbor_alltoallv([send, (scounts, sdispls)],
                                             [r, (rcounts, rdispls)]),
             a, b, "Neighbor_alltoallv")


def test_derived_datatype(net):
    """Strided blocks (MPI vector type) on both sides: only the typemap's bytes change."""
    d = len(net.nbrs)
    vec = MPI.INT.Create_vector(2, 1, 3).Commit()  # 2 ints 3 apart: extent 16 bytes
    try:
        send = _data(4 * 2 * max(d, 1), np.int32)
        a = np.full(4 * 2 * max(d, 1), SENTINEL, np.int32)
        b = a.copy()
        _compare(lambda r: net.ref.Neighbor_alltoall([send, 2, vec], [r, 2, vec]),
                 lambda r: net.net.Neighbor_alltoall([send, 2, vec], [r, 2, vec]),
                 a, b, "Neighbor_alltoall with a vector datatype")
        a = np.full(4 * 2 * max(d, 1), SENTINEL, np.int32)
        b = a.copy()
        _compare(lambda r: net.ref.Neighbor_allgather([send, 1, vec], [r, 1, vec]),
                 lambda r: net.net.Neighbor_allgather([send, 1, vec], [r, 1, vec]),
                 a, b, "Neighbor_allgather with a vector datatype")
    finally:
        vec.Free()


def test_alltoallw(net):
    """A datatype, count and byte displacement per neighbour: int32, float64 and a vector."""
    vec = MPI.DOUBLE.Create_vector(2, 1, 2).Commit()  # extent 24 bytes
    types = [MPI.INT32_T, MPI.DOUBLE, vec]

    def kind(x, y):
        return types[(x + y) % 3]

    def count(src, dst):
        return (src + 3 * dst) % 3  # 0 included

    try:
        stypes = [kind(RANK, s) for s in net.nbrs]
        rtypes = [kind(s, RANK) for s in net.nbrs]
        scounts = [count(RANK, s) for s in net.nbrs]
        rcounts = [count(s, RANK) for s in net.nbrs]

        def layout(counts, dtypes, gap):
            displs, at = [], gap
            for c, t in zip(counts, dtypes):
                displs.append(at)
                at += c * t.Get_extent()[1] + gap
            return displs, at

        sdispls, slen = layout(scounts, stypes, 0)
        rdispls, rlen = layout(rcounts, rtypes, 8)
        send = ((np.arange(max(slen, 1)) * 13 + RANK) % 251).astype(np.uint8)
        a = np.full(max(rlen, 1), 0xA5, np.uint8)
        b = a.copy()
        _compare(lambda r: net.ref.Neighbor_alltoallw([send, (scounts, sdispls), stypes],
                                                       [r, (rcounts, rdispls), rtypes]),
                 lambda r: net.net.Neighbor_alltoallw([send, (scounts, sdispls), stypes],
                                                 [r, (rcounts, rdispls), rtypes]),
                 a, b, "Neighbor_alltoallw")
    finally:
        vec.Free()


# -- nonblocking forms ------------------------------------------------------------------------

def test_nonblocking_forms(net):
    """Ineighbor_* against Open MPI's, all five in flight at once, completed by Waitall."""
    d = len(net.nbrs)
    send = _data(3 * d, np.float64)
    one = _data(3, np.float64, 1)
    counts = np.array([_own_count(s) for s in net.nbrs], dtype=np.int64)
    vsend = _data(_own_count(RANK), np.float64)
    scounts = np.array([_pair_count(RANK, s) for s in net.nbrs], dtype=np.int64)
    rcounts = np.array([_pair_count(s, RANK) for s in net.nbrs], dtype=np.int64)
    wsend = _data(2 * d, np.int32)
    wdispls = 8 * np.arange(d)
    wtypes = [MPI.INT32_T] * d

    def calls(comm, start):
        bufs = [np.full(3 * d, SENTINEL, np.float64), np.full(3 * d, SENTINEL, np.float64),
                np.full(int(counts.sum()), SENTINEL, np.float64),
                np.full(int(rcounts.sum()), SENTINEL, np.float64),
                np.full(2 * d, SENTINEL, np.int32)]
        reqs = [start(comm, "Ineighbor_allgather")(one, bufs[0]),
                start(comm, "Ineighbor_alltoall")(send, bufs[1]),
                start(comm, "Ineighbor_allgatherv")(vsend, [bufs[2], counts]),
                start(comm, "Ineighbor_alltoallv")([send, scounts], [bufs[3], rcounts]),
                start(comm, "Ineighbor_alltoallw")([wsend, (np.full(d, 2), wdispls), wtypes],
                                                   [bufs[4], (np.full(d, 2), wdispls), wtypes])]
        return bufs, reqs

    ref, reqs = calls(net.ref, lambda c, name: getattr(c, name))
    MPI.Request.Waitall(reqs)
    ours, exc = _attempt(lambda: calls(net.net, lambda c, name: (
        lambda s, r: getattr(nb, name)(c, s, r))))
    if exc is None:
        bufs, reqs = ours
        _, exc = _attempt(lambda: dualmpi.Request.Waitall(reqs))
        ok = exc is None and all(np.array_equal(x, y) for x, y in zip(ref, bufs)) and \
            not any(reqs)
    else:
        ok = False
    _fail_unless(ok, f"{exc!r}" if exc else "the buffers differ from Open MPI's")


def test_nonblocking_interleaved(net):
    """A blocking call and Test polling while a nonblocking one is in flight (tags per call)."""
    d = len(net.nbrs)
    first = _data(2 * d, np.int32, 3)
    second = _data(2, np.int32, 4)
    a1, a2 = np.full(2 * d, SENTINEL, np.int32), np.full(2 * d, SENTINEL, np.int32)
    r = net.ref.Ineighbor_alltoall(first, a1)
    net.ref.Neighbor_allgather(second, a2)
    r.Wait()
    b1, b2 = np.full(2 * d, SENTINEL, np.int32), np.full(2 * d, SENTINEL, np.int32)

    def ours():
        req = net.net.Ineighbor_alltoall(first, b1)
        net.net.Neighbor_allgather(second, b2)
        while not req.Test():
            pass
        return req

    req, exc = _attempt(ours)
    ok = exc is None and not req and np.array_equal(a1, b1) and np.array_equal(a2, b2)
    _fail_unless(ok, f"{exc!r} {b1.tolist()} {b2.tolist()} vs {a1.tolist()} {a2.tolist()}")


@pytest.mark.parametrize("form", ["blocking", "nonblocking"])
def test_alongside_a_nonblocking_collective(net, form):
    """A broadcast request of the engine in flight with a neighbourhood call (rendezvous sizes).

    The ranks that forward the broadcast make the neighbourhood call (blocking, or Ineighbor
    and Wait) before they wait for the broadcast, the others after: a rank waiting for the
    broadcast needs a forwarder that is busy in the neighbourhood call, whose wait must
    advance the broadcast meanwhile.
    """
    from dualmpi.engine.layout import Layout, layout_kind
    from dualmpi.engine.nonblocking import Progress

    d = len(net.nbrs)
    n = 5000
    send = _data(n * d, np.float64)
    a = np.full(n * d, SENTINEL, np.float64)
    net.ref.Neighbor_alltoall(send, a)
    prog = Progress(net.net._transport)
    try:
        piece = 8 * n
        bound = net.net._engine.rank_plan(RANK, "bcast", 0).bind(
            Layout(layout_kind("bcast"), net.topo.num_nodes, net.q, piece, 0), 1)
        first = min((r.index for r in bound.rounds if r.recvs), default=None)
        forwards = first is not None and any(r.sends and r.index > first for r in bound.rounds)
        data = np.arange(piece, dtype=np.uint64).astype(np.uint8)
        got = data.copy() if RANK == 0 else np.zeros(piece, np.uint8)
        b = np.full(n * d, SENTINEL, np.float64)

        def neighbourhood():
            if form == "blocking":
                net.net.Neighbor_alltoall(send, b)
            else:
                net.net.Ineighbor_alltoall(send, b).Wait()

        # made once before: the blocking call in flight with the broadcast is a repeat, which
        # the compiled exchange hands back to Python (it would not advance the broadcast)
        _, exc = _attempt(neighbourhood)
        _fail_unless(exc is None and np.array_equal(a, b), f"the first call: {exc!r}")
        b[:] = SENTINEL

        def run():
            bcast = dualmpi.Request.from_plan(prog, prog.start(
                bound, got if RANK == 0 else None, None if RANK == 0 else got, what="Ibcast"))
            if forwards:
                neighbourhood()
                bcast.Wait()
            else:
                bcast.Wait()
                neighbourhood()

        _, exc = _attempt(run)
    finally:
        prog.free()
    ok = exc is None and np.array_equal(a, b) and np.array_equal(got, data)
    _fail_unless(ok, f"{exc!r}" if exc else "wrong data")


def test_nonblocking_bad_arguments(net):
    """A rank's bad buffer raises at its Ineighbor call; its neighbours' Wait raises."""
    if _pair(net) is None:
        pytest.skip("rank 0 has no neighbour here")
    d = len(net.nbrs)
    send = _data(2 * d, np.int32)
    recv = np.zeros(2 * d, np.int32)
    if RANK == 0:
        recv.flags.writeable = False
    _, exc = _attempt(lambda: net.net.Ineighbor_alltoall(send, recv).Wait())
    raised = _raised(exc)
    zero_nbrs = WORLD.bcast(net.nbrs if RANK == 0 else None, root=0)
    _fail_unless(raised == {0} | set(zero_nbrs), f"raised on {sorted(raised)}; here {exc!r}")
    _still_works(net)


# -- object forms ------------------------------------------------------------------------------

def test_objects(net):
    obj = {"rank": RANK, "payload": list(range(RANK % 5)), "text": "x" * (RANK % 3)}
    items = [(RANK, s, "y" * ((RANK + s) % 4)) for s in net.nbrs]
    ref = (net.ref.neighbor_allgather(obj), net.ref.neighbor_alltoall(items),
           net.ref.neighbor_alltoall(None))
    ours, exc = _attempt(lambda: (net.net.neighbor_allgather(obj),
                                  net.net.neighbor_alltoall(items),
                                  net.net.neighbor_alltoall(None)))
    _fail_unless(exc is None and ours == ref, f"ours {ours!r} ({exc!r}), Open MPI {ref!r}")


# -- statistics --------------------------------------------------------------------------------

def _compiled(net):
    """True when a blocking repeat can run in C (compiled loop and extension)."""
    return net.net._transport.cloop is not None and recall.load() is not None


@pytest.mark.parametrize("nonblocking", [False, True], ids=["blocking", "nonblocking"])
def test_stats_of_repeated_calls(net, nonblocking):
    """Repeats counted as the first call (those run in C too), and kept when the remembered
    call is replaced: one link message per neighbour per call."""
    d = len(net.nbrs)
    net.net.reset_stats()
    send = _data(3 * d, np.float64)
    recv, other = np.zeros(3 * d), np.zeros(3 * d)
    _, links = nb.neighbors(net.topo, net.q, RANK)
    got = []

    def call(r):
        if nonblocking:
            net.net.Ineighbor_alltoall(send, r).Wait()
        else:
            net.net.Neighbor_alltoall(send, r)

    def calls_():
        for _ in range(5):
            call(recv)
        got.append(net.net.stats())
        call(other)  # another buffer: the memo is replaced
        got.append(net.net.stats())
        call(other)
        got.append(net.net.stats())

    _, exc = _attempt(calls_)
    ok = exc is None and len(got) == 3
    for st, k in zip(got, (5, 6, 7)):
        ok = ok and st["messages"] == k * d and st["bytes"] == 24 * k * d and \
            st["links"] == {link: (k, 24 * k) for link in links}
    _fail_unless(ok, f"{exc!r} stats {got}")


def test_stats(net):
    """One link message per neighbour per call, the payload bytes counted on its link."""
    d = len(net.nbrs)
    net.net.reset_stats()
    send = _data(3 * d, np.float64)
    recv = np.zeros(3 * d)
    _, exc = _attempt(lambda: net.net.Neighbor_alltoall(send, recv))
    st = net.net.stats()
    _, links = nb.neighbors(net.topo, net.q, RANK)
    ok = exc is None and st["messages"] == d and st["bytes"] == 24 * d and \
        st["links"] == {link: (1, 24) for link in links} and \
        all(net.topo.is_link(u, v) for u, v in links)
    _fail_unless(ok, f"{exc!r} stats {st}")


# -- errors ------------------------------------------------------------------------------------

def _pair(net):
    """Two neighbouring ranks ``(a, b)``: rank 0 and its first neighbour, or None."""
    first = WORLD.bcast(net.nbrs[0] if RANK == 0 and net.nbrs else None, root=0)
    return None if first is None else (0, first)


def _raised(exc):
    """The ranks where the call raised InputError (every rank gets the list)."""
    flags = WORLD.allgather(isinstance(exc, InputError))
    return {r for r, f in enumerate(flags) if f}


def _still_works(net):
    """A correct call after an error: every message of the failed one was taken."""
    d = len(net.nbrs)
    send = _data(2 * d, np.int32, 5)
    a = np.full(2 * d, SENTINEL, np.int32)
    b = a.copy()
    _compare(lambda r: net.ref.Neighbor_alltoall(send, r),
             lambda r: net.net.Neighbor_alltoall(send, r), a, b, "the call after the error")


#: (elements every rank sends and expects, what rank b expects from rank a instead), of the
#: int32 elements ``s`` from which the call's form splits a payload (:func:`_split_at`)
MISMATCHES = {"fewer": lambda s: (2, 3), "more": lambda s: (2, 1),
              "more-large": lambda s: (MID, MID - 1), "datatype": lambda s: (2, 2),
              # a's payload sent on its own (neighbor.SPLIT bytes and more), or b expecting one
              "split-more": lambda s: (s, s - 1), "split-fewer": lambda s: (s - 1, s),
              "split-fewer-both": lambda s: (s + 7, s + 8)}


def _split_at():
    """The int32 elements from which a call sends a payload on its own."""
    return nb.SPLIT // 4


def _mismatch_call(net, kind, a, b, nonblocking=False):
    """A call where only the pair ``a -> b`` disagrees (``kind``): Neighbor_alltoallv on counts
    (a sends fewer or more than b expects), Neighbor_alltoallw on the datatype (float32 in
    place of int32: same size)."""
    d = len(net.nbrs)
    each, other = MISMATCHES[kind](_split_at())
    counts = np.full(d, each, dtype=np.int64)
    send = _data(each * d, np.int32)
    rbuf = np.zeros((each + 1) * d, np.int32)
    if kind != "datatype":
        rcounts = counts.copy()
        if RANK == b:
            rcounts[net.nbrs.index(a)] = other
        args = [send, counts, MPI.INT32_T], [rbuf, rcounts, MPI.INT32_T]
        if nonblocking:
            return net.net.Ineighbor_alltoallv(*args).Wait()
        return net.net.Neighbor_alltoallv(*args)
    displs = 4 * each * np.arange(d)
    rtypes = [MPI.INT32_T] * d
    if RANK == b:
        rtypes[net.nbrs.index(a)] = MPI.FLOAT
    args = ([send, (counts, displs), [MPI.INT32_T] * d], [rbuf, (counts, displs), rtypes])
    if nonblocking:
        return net.net.Ineighbor_alltoallw(*args).Wait()
    return net.net.Neighbor_alltoallw(*args)


@pytest.mark.parametrize("nonblocking", [False, True], ids=["blocking", "nonblocking"])
@pytest.mark.parametrize("kind", list(MISMATCHES))
def test_mismatch_between_neighbours(net, kind, nonblocking):
    """Rank b expects another count (or type) from neighbour a: InputError on both, nowhere else
    (the nonblocking forms raise it from Wait)."""
    pair = _pair(net)
    if pair is None:
        pytest.skip("rank 0 has no neighbour here")
    a, b = pair
    _, exc = _attempt(lambda: _mismatch_call(net, kind, a, b, nonblocking))
    raised = _raised(exc)
    word = "datatypes differ" if kind == "datatype" else "counts differ"
    ok = raised == {a, b} and (RANK not in (a, b) or
                               (word in str(exc) and f"rank {a}" in str(exc)
                                and f"rank {b}" in str(exc)))
    _fail_unless(ok, f"raised on {sorted(raised)}, expected {[a, b]}; here {exc!r}")
    _still_works(net)


@pytest.mark.parametrize("bad", ["toolarge", "readonly", "unpicklable", "readonly-split"])
def test_bad_arguments_on_one_rank(net, bad):
    """Rank 0's arguments are rejected: it raises its own error, its neighbours raise too
    ("-split": their payloads come after their headers, and rank 0 takes them too)."""
    if _pair(net) is None:
        pytest.skip("rank 0 has no neighbour here")
    d = len(net.nbrs)
    each = BIG if bad.endswith("split") else 2
    send = _data(each * d, np.int32)
    recv = np.zeros(each * d, np.int32)
    if bad == "unpicklable":
        obj = (lambda: 0) if RANK == 0 else RANK
        _, exc = _attempt(lambda: net.net.neighbor_allgather(obj))
    else:
        if RANK == 0 and bad == "toolarge":
            recv = [recv, 2 * d + 1, MPI.INT32_T]  # d blocks of 2d + 1: past the end
        if RANK == 0 and bad.startswith("readonly"):
            recv.flags.writeable = False
        _, exc = _attempt(lambda: net.net.Neighbor_alltoall(send, recv))
    raised = _raised(exc)
    zero_nbrs = WORLD.bcast(net.nbrs if RANK == 0 else None, root=0)
    expected = {0} | set(zero_nbrs)
    ok = raised == expected and (RANK not in zero_nbrs or "rejected on rank 0" in str(exc))
    _fail_unless(ok, f"raised on {sorted(raised)}, expected {sorted(expected)}; here {exc!r}")
    _still_works(net)


@pytest.mark.parametrize("kind", ["small", "split", "object-split"])
def test_different_calls(net, kind):
    """Rank 0 calls Neighbor_allgather (or neighbor_allgather, objects) while the rest call
    Neighbor_alltoall (same sizes; "split": blocks of SPLIT bytes and more, which go after
    their headers)."""
    if _pair(net) is None:
        pytest.skip("rank 0 has no neighbour here")
    d = len(net.nbrs)
    each = 1 if kind == "small" else BIG
    send = _data(each * d, np.int32)
    recv = np.zeros(each * d, np.int32)
    if RANK == 0 and kind == "object-split":
        _, exc = _attempt(lambda: net.net.neighbor_allgather(RANK))
    elif RANK == 0:
        _, exc = _attempt(lambda: net.net.Neighbor_allgather(send[:each], recv))
    else:
        _, exc = _attempt(lambda: net.net.Neighbor_alltoall(send, recv))
    raised = _raised(exc)
    zero_nbrs = WORLD.bcast(net.nbrs if RANK == 0 else None, root=0)
    expected = {0} | set(zero_nbrs)
    _fail_unless(raised == expected, f"raised on {sorted(raised)}, expected {sorted(expected)}; "
                                     f"here {exc!r}")
    _still_works(net)


def test_overlapping_buffers(net):
    """The same array as sendbuf and recvbuf (MPI forbids aliasing): InputError on every rank."""
    d = len(net.nbrs)
    buf = _data(2 * max(d, 1), np.int32)
    _, exc = _attempt(lambda: net.net.Neighbor_alltoall(buf, buf))
    _fail_unless(isinstance(exc, InputError) and "overlap" in str(exc), repr(exc))
    _still_works(net)


def _packed_problems(m, memo, fast):
    """[] when the compiled exchange ``fast`` sends every message of at most 256 bytes, header
    included, from a slot of its own holding the header (``rounds.c``: N_PADDR), the others not
    so; else what differs."""
    out = []
    for j, (payload, _) in enumerate(memo.sends):
        want = nb._HEADER_BYTES + payload.size
        want = want if want <= 256 and payload.size < nb.SPLIT else 0
        at = int(fast.paddr[j]) - fast.slots.ctypes.data
        if int(fast.plen[j]) != want or (want and (
                int(fast.paddr[j]) == 0 or
                fast.slots[at:at + nb._HEADER_BYTES].tobytes() != memo.out[j].tobytes())):
            out.append(f"{m}: message {j} of {payload.size} bytes packed as "
                       f"{int(fast.plen[j])} bytes, expected {want}")
    return out


@pytest.mark.parametrize("nonblocking", [False, True], ids=["blocking", "nonblocking"])
def test_repeated_calls_on_the_same_buffers(net, nonblocking):
    """Each buffer form three times on the same argument objects, the send buffers refilled in
    between: every result equals Open MPI's, the repeats run the remembered messages (one
    memo per method, kept across the repeats), and a call on other buffers replaces it."""
    d = len(net.nbrs)
    counts = np.array([_own_count(s) for s in net.nbrs], dtype=np.int64)
    scounts = [int(_pair_count(RANK, s)) for s in net.nbrs]
    rcounts = [int(_pair_count(s, RANK)) for s in net.nbrs]
    one, send = np.zeros(3, np.float64), np.zeros(3 * d, np.float64)
    vsend, wsend = np.zeros(_own_count(RANK), np.float64), np.zeros(2 * d, np.int32)
    wdispls, wtypes = 8 * np.arange(d), [MPI.INT32_T] * d
    shapes = {"Neighbor_allgather": (3 * d, np.float64), "Neighbor_alltoall": (3 * d, np.float64),
              "Neighbor_allgatherv": (int(counts.sum()), np.float64),
              "Neighbor_alltoallv": (sum(rcounts), np.float64),
              "Neighbor_alltoallw": (2 * d, np.int32)}
    mine = {m: np.full(n, SENTINEL, t) for m, (n, t) in shapes.items()}
    refs = {m: np.full(n, SENTINEL, t) for m, (n, t) in shapes.items()}
    w2 = (np.full(d, 2), wdispls)

    def args(m, r):
        return {"Neighbor_allgather": (one, r), "Neighbor_alltoall": (send, r),
                "Neighbor_allgatherv": (vsend, [r, counts]),
                "Neighbor_alltoallv": ([send, scounts], [r, rcounts]),
                "Neighbor_alltoallw": ([wsend, w2, wtypes], [r, w2, wtypes])}[m]

    bad, memos = [], {}
    for k in range(3):
        for buf in (one, send, vsend, wsend):
            buf[:] = np.arange(buf.size) + 100 * RANK + 10 * k
        for m in shapes:
            getattr(net.ref, m)(*args(m, refs[m]))
            _, exc = _attempt(lambda: getattr(net.net, "I" + m.lower()[0] + m[1:])(
                *args(m, mine[m])).Wait() if nonblocking else getattr(net.net, m)(
                *args(m, mine[m])))
            if exc is not None or not np.array_equal(mine[m], refs[m]):
                bad.append(f"{m} repeat {k}: {exc!r}" if exc else f"{m} repeat {k} differs")
            memo = net.net.__dict__.get("_neighbor_memos", {}).get(m)
            if memo is None or memos.setdefault(m, memo) is not memo:
                bad.append(f"{m} repeat {k}: not the remembered call")
            # a repeat runs in C when it can (the compiled exchange, matched in C)
            elif k > 0 and not nonblocking and _compiled(net) and \
                    (not memo.fast or getattr(net.net, "_m" + m) is calls.no_match):
                bad.append(f"{m} repeat {k}: not run by the compiled exchange")
            elif k > 0 and nonblocking and _compiled(net) and (not memo.ifast or getattr(
                    net.net, "_mI" + m[0].lower() + m[1:]) is calls.no_start):
                bad.append(f"{m} repeat {k}: not started by the compiled exchange")
            elif k > 0 and _compiled(net):
                bad += _packed_problems(m, memo, memo.ifast if nonblocking else memo.fast)
    other = np.full(3 * d, SENTINEL, np.float64)
    net.ref.Neighbor_alltoall(send, refs["Neighbor_alltoall"])
    net.net.Neighbor_alltoall(send, other)
    if not np.array_equal(other, refs["Neighbor_alltoall"]) or \
            net.net._neighbor_memos["Neighbor_alltoall"] is memos["Neighbor_alltoall"]:
        bad.append("Neighbor_alltoall on another receive buffer")
    _fail_unless(not bad, "; ".join(bad[:3]))


@pytest.mark.parametrize("nonblocking", [False, True], ids=["blocking", "nonblocking"])
def test_a_compiled_repeat_sends_its_packed_slot(net, nonblocking):
    """A small message of a compiled repeat leaves from its slot: rank a writes another call's
    code into the header of its slot for neighbour b, and b (only b) fails naming that call;
    the next call works."""
    pair = _pair(net)
    if pair is None or not _compiled(net):
        pytest.skip("rank 0 has no neighbour here, or no compiled exchange")
    a, b = pair
    d = len(net.nbrs)
    send, recv = _data(2 * d, np.int32), np.zeros(2 * d, np.int32)

    def call():
        if nonblocking:
            return net.net.Ineighbor_alltoall(send, recv).Wait()
        return net.net.Neighbor_alltoall(send, recv)

    bad = []
    for _ in range(2):
        _, exc = _attempt(call)
        if exc is not None:
            bad.append(f"the call before: {exc!r}")
    memo = net.net._neighbor_memos["Neighbor_alltoall"]
    fast = memo.ifast if nonblocking else memo.fast
    j = net.nbrs.index(b) if RANK == a else None
    slot = RANK == a and int(fast.paddr[j]) != 0
    if RANK == a and not slot:
        bad.append(f"no slot for the message to rank {b}")
    if slot:
        at = int(fast.paddr[j]) - fast.slots.ctypes.data
        fast.slots[at:at + 8] = np.array([nb._CODES["Neighbor_allgather"]],
                                         np.int64).view(np.uint8)
    _, exc = _attempt(call)
    if slot:
        fast.slots[at:at + 8] = memo.out[j][:1].view(np.uint8)
    raised = _raised(exc)
    if raised != {b} or (RANK == b and "called Neighbor_allgather" not in str(exc)):
        bad.append(f"raised on {sorted(raised)}, expected {[b]}; here {exc!r}")
    _fail_unless(not bad, "; ".join(bad[:3]))
    _still_works(net)


@pytest.mark.parametrize("nonblocking", [False, True], ids=["blocking", "nonblocking"])
def test_repeated_large_calls_match_mpi(net, nonblocking):
    """Payloads of 64 KiB and more go after their headers, as messages of their own: the five
    buffer forms three times on the same objects (refilled in between; in C from the second
    blocking call), every result equal to Open MPI's, the gaps of the receive buffers untouched."""
    d = len(net.nbrs)
    each = BIG  # int32: over neighbor.SPLIT per neighbour
    counts = np.full(d, each, dtype=np.int64)
    displs = (each + 3) * np.arange(d, dtype=np.int64) + 1  # gaps between the blocks
    send, one = np.zeros(each * d, np.int32), np.zeros(each, np.int32)
    wtypes, wdispls = [MPI.INT32_T] * d, 4 * displs
    size = int(displs[-1] + each + 2) if d else 1

    def args(m, r):
        return {"Neighbor_allgather": (one, r),
                "Neighbor_allgatherv": (one, [r, (counts, displs), MPI.INT32_T]),
                "Neighbor_alltoall": (send, r),
                "Neighbor_alltoallv": ([send, counts], [r, (counts, displs)]),
                "Neighbor_alltoallw": ([send, (counts, 4 * each * np.arange(d)), wtypes],
                                       [r, (counts, wdispls), wtypes])}[m]

    sizes = {m: each * d if m in ("Neighbor_allgather", "Neighbor_alltoall") else size
             for m in nb.REMEMBERED}
    mine = {m: np.full(sizes[m], SENTINEL, np.int32) for m in nb.REMEMBERED}
    refs = {m: np.full(sizes[m], SENTINEL, np.int32) for m in nb.REMEMBERED}
    bad = []
    for k in range(3):
        send[:] = np.arange(send.size) + 100 * RANK + 10 * k
        one[:] = np.arange(one.size) + 100 * RANK + 10 * k + 5
        for m in nb.REMEMBERED:
            getattr(net.ref, m)(*args(m, refs[m]))
            _, exc = _attempt(lambda: getattr(net.net, "I" + m.lower()[0] + m[1:])(
                *args(m, mine[m])).Wait() if nonblocking else getattr(net.net, m)(
                *args(m, mine[m])))
            if exc is not None or not np.array_equal(mine[m], refs[m]):
                bad.append(f"{m} call {k}: {exc!r}" if exc else f"{m} call {k} differs")
            memo = net.net.__dict__.get("_neighbor_memos", {}).get(m)
            if k > 0 and _compiled(net) and \
                    (memo is None or not (memo.ifast if nonblocking else memo.fast)):
                bad.append(f"{m} call {k}: not run by the compiled exchange")
    _fail_unless(not bad, "; ".join(bad[:3]))


@pytest.mark.parametrize("large", [False, True], ids=["small", "split"])
def test_nonblocking_repeats_in_flight_together(net, large):
    """The five Ineighbor forms repeated on the same objects, all in flight at once, completed
    by Test polling and by Waitall in turn: every result equal to Open MPI's, the repeats
    started by the compiled exchange (and advanced, or waited for with the others, from
    Python).  "split": payloads of SPLIT bytes and more, whose receive is posted once their
    header is in."""
    d = len(net.nbrs)
    each = BIG if large else 3
    counts = np.full(d, each, dtype=np.int64)
    send, one = np.zeros(each * d, np.int32), np.zeros(each, np.int32)
    wtypes, wdispls = [MPI.INT32_T] * d, 4 * each * np.arange(d)

    def args(m, r):
        return {"Neighbor_allgather": (one, r), "Neighbor_allgatherv": (one, [r, counts]),
                "Neighbor_alltoall": (send, r),
                "Neighbor_alltoallv": ([send, counts], [r, counts]),
                "Neighbor_alltoallw": ([send, (counts, wdispls), wtypes],
                                       [r, (counts, wdispls), wtypes])}[m]

    mine = {m: np.full(each * d, SENTINEL, np.int32) for m in nb.REMEMBERED}
    refs = {m: np.full(each * d, SENTINEL, np.int32) for m in nb.REMEMBERED}
    bad = []
    for k in range(4):
        send[:] = np.arange(send.size) + 100 * RANK + 10 * k
        one[:] = np.arange(one.size) + 100 * RANK + 10 * k + 5
        reqs = [getattr(net.ref, "I" + m[0].lower() + m[1:])(*args(m, refs[m]))
                for m in nb.REMEMBERED]
        MPI.Request.Waitall(reqs)

        def ours():
            reqs = [getattr(net.net, "I" + m[0].lower() + m[1:])(*args(m, mine[m]))
                    for m in nb.REMEMBERED]
            if k % 2:
                while not dualmpi.Request.Testall(reqs):
                    pass
            else:
                dualmpi.Request.Waitall(reqs)
            return reqs

        reqs, exc = _attempt(ours)
        if exc is not None or any(reqs) or \
                not all(np.array_equal(mine[m], refs[m]) for m in nb.REMEMBERED):
            bad.append(f"round {k}: {exc!r}" if exc else f"round {k} differs")
        memos = net.net.__dict__.get("_neighbor_memos", {})
        if k > 0 and _compiled(net) and not all(memos[m].ifast for m in nb.REMEMBERED):
            bad.append(f"round {k}: not started by the compiled exchange")
    _fail_unless(not bad, "; ".join(bad[:3]))
    _still_works(net)


def test_blocking_and_nonblocking_repeats_split_alike(net):
    """One remembered call made blocking and nonblocking by turns on the same objects, with
    payloads of neighbor.SPLIT bytes and more: both forms send them after their headers, from
    the memo's messages (the headers received by a nonblocking call say so; until the
    nonblocking forms split at SPLIT too, they sent them with their headers below 256 KiB),
    every result equal to Open MPI's and the gaps untouched."""
    d = len(net.nbrs)
    each = BIG
    counts = np.full(d, each, dtype=np.int64)
    displs = (each + 3) * np.arange(d, dtype=np.int64) + 1
    send = np.zeros(each * d, np.int32)
    size = int(displs[-1] + each + 2) if d else 1
    mine, ref = np.full(size, SENTINEL, np.int32), np.full(size, SENTINEL, np.int32)
    sargs, rargs = [send, counts], [mine, (counts, displs)]
    bad = []
    for k in range(4):
        send[:] = np.arange(send.size) + 100 * RANK + 10 * k
        net.ref.Neighbor_alltoallv([send, counts], [ref, (counts, displs)])
        if k % 2:
            _, exc = _attempt(lambda: net.net.Ineighbor_alltoallv(sargs, rargs).Wait())
        else:
            _, exc = _attempt(lambda: net.net.Neighbor_alltoallv(sargs, rargs))
        if exc is not None or not np.array_equal(mine, ref):
            bad.append(f"call {k}: {exc!r}" if exc else f"call {k} differs")
        memo = net.net.__dict__.get("_neighbor_memos", {}).get("Neighbor_alltoallv")
        if k % 2 and d and (memo is None or
                            not all(nb._follows(int(h[0])) for h in memo.inp[:d])):
            bad.append(f"call {k}: the nonblocking call's payloads came with their headers")
    if d and (memo is None or any(len(x) != 2 for x in memo.send_specs)):
        bad.append("the remembered messages are not split at SPLIT")
    _fail_unless(not bad, "; ".join(bad[:3]))


@pytest.mark.parametrize("size", ["small", "split"])
@pytest.mark.parametrize("nonblocking", [False, True], ids=["blocking", "nonblocking"])
def test_a_remembered_call_against_other_counts(net, nonblocking, size):
    """Every rank repeats Neighbor_alltoallv on the same objects (the repeat is the remembered
    call, run in C when blocking); then rank b expects one element fewer from neighbour a,
    which repeats its remembered call: InputError on both ends, nowhere else, and the next
    call works.  "split": a's payload goes after its header, on its own (SPLIT / 4 int32)."""
    pair = _pair(net)
    if pair is None:
        pytest.skip("rank 0 has no neighbour here")
    a, b = pair
    each = 2 if size == "small" else _split_at()
    d = len(net.nbrs)
    counts = [each] * d
    send, rbuf = _data(each * d, np.int32), np.zeros(each * d, np.int32)
    args = ([send, counts, MPI.INT32_T], [rbuf, counts, MPI.INT32_T])

    def call(x):
        if nonblocking:
            return net.net.Ineighbor_alltoallv(*x).Wait()
        return net.net.Neighbor_alltoallv(*x)

    for _ in range(2):
        call(args)
    remembered = net.net._neighbor_memos["Neighbor_alltoallv"]
    if RANK == b:
        fewer = list(counts)
        fewer[net.nbrs.index(a)] = each - 1
        args = ([send, counts, MPI.INT32_T], [rbuf, fewer, MPI.INT32_T])
    _, exc = _attempt(lambda: call(args))
    raised = _raised(exc)
    ok = raised == {a, b} and (RANK not in (a, b) or "counts differ" in str(exc))
    ok = ok and (RANK == b or net.net._neighbor_memos["Neighbor_alltoallv"] is remembered)
    _fail_unless(ok, f"raised on {sorted(raised)}, expected {[a, b]}; here {exc!r}")
    _still_works(net)


#: Elements (int32) of the longer message in :func:`test_a_longer_message_is_never_written_past`:
#: 64 KiB, over Open MPI's eager limit, where it writes past a contiguous receive.
LONGER = 1 << 14


@pytest.mark.parametrize("repeat", [False, True], ids=["first", "remembered"])
@pytest.mark.parametrize("kind", ["none", "some", "object"])
@pytest.mark.parametrize("nonblocking", [False, True], ids=["blocking", "nonblocking"])
def test_a_longer_message_is_never_written_past(net, nonblocking, kind, repeat):
    """Rank a sends rank b 64 KiB where b expects none or ("some") 8 int32 ("object": a calls
    neighbor_alltoall with a 64-KiB object, b Neighbor_alltoallv expecting none): the call
    fails named on a's side of the link and b's (every neighbour of a's: "object"), nothing
    past b's receive buffer is written (a's block last in it; Open MPI 5.0 writes a longer
    message past a contiguous receive above its eager limit: the payload sent on its own was
    received so), the receive of a header alone has two blocks apart (it was one: a write
    past it lands in dualmpi's memory, out of this test's sight), and the next call works.
    "remembered": b repeats a call it made twice before (in C where it is built)."""
    pair = _pair(net)
    if pair is None:
        pytest.skip("rank 0 has no neighbour here")
    a, b = pair
    d = len(net.nbrs)
    other = 8 if kind == "some" else 0
    counts = np.full(d, 2, dtype=np.int64)
    if RANK == b:
        counts[net.nbrs.index(a)] = other
    displs = np.zeros(d, dtype=np.int64)
    order = sorted(range(d), key=lambda i: net.nbrs[i] == a)  # (a's block last)
    at = 0
    for i in order:
        displs[i], at = at, at + int(counts[i])
    guarded = np.full(at + LONGER, SENTINEL, np.int32)
    rbuf = guarded[:at]
    method = "Neighbor_alltoallv"

    def call(sargs):
        rargs = [rbuf, (counts, displs), MPI.INT32_T]
        if nonblocking:
            return net.net.Ineighbor_alltoallv(sargs, rargs).Wait()
        return getattr(net.net, method)(sargs, rargs)

    scounts = np.full(d, 2, dtype=np.int64)
    if RANK == a:
        scounts[net.nbrs.index(b)] = other
    sargs = [_data(int(scounts.sum()), np.int32), scounts, MPI.INT32_T]
    bad = []
    for _ in range(2 if repeat else 0):
        _, exc = _attempt(lambda: call(sargs))
        if exc is not None:
            bad.append(f"the call before: {exc!r}")
    if RANK == a:
        longer = scounts.copy()
        longer[net.nbrs.index(b)] = LONGER
        sargs = [_data(int(longer.sum()), np.int32), longer, MPI.INT32_T]
    if RANK == a and kind == "object":
        objs = [bytes(4 * LONGER) if p == b else 2 for p in net.nbrs]
        _, exc = _attempt(lambda: net.net.neighbor_alltoall(objs))
    else:
        _, exc = _attempt(lambda: call(sargs))
    a_nbrs = WORLD.bcast(net.nbrs if RANK == a else None, root=a)
    expected = {a} | set(a_nbrs) if kind == "object" else {a, b}
    memo = net.net.__dict__.get("_neighbor_memos", {}).get(method)
    if repeat and RANK == b and _compiled(net) and \
            (memo is None or not (memo.ifast if nonblocking else memo.fast)):
        bad.append("b's repeat was not run by the compiled exchange")
    raised = _raised(exc)
    if raised != expected:
        bad.append(f"raised on {sorted(raised)}, expected {sorted(expected)}; here {exc!r}")
    if RANK == b and other == 0:  # (a header alone: a write past it is not in `guarded`)
        _, problem = _attempt(lambda: _alone_apart(memo if repeat else None,
                                                   net.nbrs.index(a)))
        bad += [] if problem is None else [repr(problem)]
    past = int(np.count_nonzero(guarded[at:] != SENTINEL))
    if past:
        bad.append(f"{past} int32 written past the receive buffer")
    _fail_unless(not bad, "; ".join(bad[:3]))
    _still_works(net)


def _alone_apart(memo, i):
    """Raise unless the receive of a header alone has two blocks apart, made new and (``memo``,
    the call's own: a repeat's) remembered for neighbour ``i``."""
    spec, dtype = nb._two(MPI, nb._headers(1)[0], np.zeros(0, np.uint8), receive=True)
    if dtype is None:
        raise AssertionError(f"a header alone's receive: one contiguous block {spec}")
    try:
        _apart("a header alone's receive", dtype)
    finally:
        dtype.Free()
    if memo is not None:
        _apart("a remembered header alone's receive", memo.recv_specs[i][2])


def _apart(what, dtype):
    """Raise unless ``dtype`` is blocks at absolute addresses, two or more, none where another
    ends (MPI would take two such blocks for one contiguous block)."""
    blocks = sorted(blocks_of(dtype))
    if len(blocks) < 2 or any(x + n == y for (x, n), (y, _) in zip(blocks, blocks[1:])):
        raise AssertionError(f"{what}: blocks {blocks}, not two apart")


def test_a_freed_communicator_leaves_no_neighbourhood_engine():
    """Nonblocking repeats (started in C, their engine's start and wait held by the engine),
    then Free: the communicator's neighbourhood progress engine is collected, on every rank."""
    import gc
    import weakref

    spec = CONFIGS[0][0]
    comm = dualmpi.Comm(WORLD, spec, nodes_per_rank=CONFIGS[0][1])
    d = len(comm.Get_dist_neighbors()[0])
    send, recv = _data(2 * d, np.int32), np.zeros(2 * d, np.int32)
    _, exc = _attempt(lambda: [comm.Ineighbor_alltoall(send, recv).Wait() for _ in range(3)])
    engine = weakref.ref(comm.__dict__["_neighbor_progress"])
    comm.Free()
    del comm
    gc.collect()
    _fail_unless(exc is None and engine() is None,
                 f"{exc!r}" if exc else "the neighbourhood progress engine outlived Free")
