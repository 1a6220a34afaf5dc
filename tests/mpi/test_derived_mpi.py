"""MPI tests of derived communicators (issue 24, item 2): their traffic stays on the network.

Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi/test_derived_mpi.py`` at
N = 1, 2, 4, 8 (32 and 64 once; at 64 the default pass runs the tests tests/mpi/conftest.py
names, ``-m slow`` the rest).  A network (D_2 on 8 ranks, MC(2,1) with 8 nodes per rank on 8 and
with one on 64, hypercubes on 1, 2 and 4) is ``Split`` into halves and into odd/even ranks (keys
reversed); every collective on each part -- buffer and object forms, IN_PLACE, derived
datatypes, v and w variants -- equals ``MPI.COMM_WORLD.Split``'s on the same buffers.  Then
routed messages inside a part whose route crosses a non-member (counted on the non-member's
links), contexts that never match each other, a Cartesian grid's queries and ``Sendrecv`` halos,
a distributed graph's neighbourhood collectives, ``Dup`` of the network keeping the papers'
schedules, ``Split_type``, ``COMM_NULL``, ``Compare``, bad arguments raised on every rank, and
``Free`` with messages in flight.  Every rank finishes its communication, then the ranks agree
on the verdict before asserting.
"""

import numpy as np
import pytest

import dualmpi
from dualmpi.engine.router import node_pair
from dualmpi.errors import DualmpiError, InputError
from dualmpi.support import UnsupportedError

MPI = pytest.importorskip("mpi4py.MPI")

WORLD = MPI.COMM_WORLD
SIZE = WORLD.Get_size()
RANK = WORLD.Get_rank()

#: ``(spec, nodes per rank)`` by rank count.
NETWORKS = {
    1: [("hypercube:n=1", 2)],
    2: [("hypercube:n=1", 1)],
    4: [("hypercube:n=2", 1)],
    8: [("dualcube:r=2", 1), ("metacube:k=2,m=1", 8)],
    32: [("dualcube:r=3", 1)],
    64: [("metacube:k=2,m=1", 1)],
}
SLOTS = ["net0", "net1"]
#: ``(color, key)`` of this rank per split: halves, and odd/even ranks in reverse order.
SPLITS = {"halves": lambda r, n: (r * 2 // n, r), "odd-even": lambda r, n: (r % 2, -r)}

_NETS, _PARTS = {}, {}


def _agree(ok):
    """True when ``ok`` holds on every rank (a buffer Allreduce: the router keeps forwarding)."""
    out = np.zeros(1, np.int64)
    WORLD.Allreduce(np.array([1 if ok else 0], np.int64), out, op=MPI.MIN)
    return bool(out[0])


def _sum(value):
    out = np.zeros(1, np.int64)
    WORLD.Allreduce(np.array([value], np.int64), out, op=MPI.SUM)
    return int(out[0])


def _attempt(body):
    """Run ``body()`` (this rank's communication); return its problems, an error as one."""
    try:
        return list(body() or [])
    except Exception as exc:  # noqa: BLE001 - reported through the agreement
        return [f"{type(exc).__name__}: {exc}"]


def _net(slot):
    nets = NETWORKS.get(SIZE, [])
    i = int(slot[-1])
    if i >= len(nets):
        pytest.skip(f"no {slot} network at {SIZE} rank(s)")
    if nets[i] not in _NETS:
        spec, q = nets[i]
        _NETS[nets[i]] = dualmpi.Comm(WORLD, spec, nodes_per_rank=q, watchdog=90)
    return _NETS[nets[i]]


def _part(slot, split):
    """Return ``(derived part, MPI's part)`` of ``split`` on ``slot``'s network (cached)."""
    key = (slot, split)
    if key not in _PARTS:
        net = _net(slot)
        color, k = SPLITS[split](RANK, SIZE)
        _PARTS[key] = (net.Split(color, k), WORLD.Split(color, k))
    return _PARTS[key]


@pytest.fixture(scope="module", autouse=True)
def _free_all():
    """Free the parts, then the networks, at the end of the module (same order everywhere)."""
    yield
    for key in sorted(_PARTS):
        part, ref = _PARTS.pop(key)
        part.Free()
        ref.Free()
    for key in sorted(_NETS):
        _NETS.pop(key).Free()


# -- every collective equals MPI's -------------------------------------------------------------------
def _ints(comm, n, dtype=np.int64, salt=0):
    """``n`` reproducible values of this rank (small integers: exact in every dtype)."""
    r = comm.Get_rank()
    return ((np.arange(n) * 7 + r * 13 + salt) % 50).astype(dtype)


def c_bcast(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    buf = _ints(comm, 7, np.int32) if r == n - 1 else np.zeros(7, np.int32)
    comm.Bcast(buf, root=n - 1)
    return [buf]


def c_bcast_vector_type(comm):
    t = MPI.INT.Create_vector(3, 1, 2).Commit()
    buf = _ints(comm, 6, np.int32) if comm.Get_rank() == 0 else np.full(6, -1, np.int32)
    comm.Bcast([buf, 1, t], root=0)
    t.Free()
    return [buf]


def c_bcast_mixed_specs(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    buf = _ints(comm, 7, np.int32) if r == 0 else np.zeros(7, np.int32)
    comm.Bcast([buf, np.int64(7), MPI.INT] if r % 2 else buf, root=0)  # the same message
    return [buf]


def c_scatter(comm):
    n = comm.Get_size()
    send = np.arange(n * 5, dtype=np.float64) * 3 if comm.Get_rank() == 0 else None
    recv = np.zeros(5)
    comm.Scatter(send, recv, root=0)
    return [recv]


def c_scatter_in_place(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    root = n // 2
    send = np.arange(n * 3, dtype=np.int64) + 5
    recv = MPI.IN_PLACE if r == root else np.zeros(3, np.int64)
    comm.Scatter(send if r == root else None, recv, root=root)
    return [send if r == root else recv]


def c_scatterv(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    counts = [i % 3 + 1 for i in range(n)]
    displs = list(np.cumsum([0] + counts[::-1])[:-1][::-1])  # blocks in reverse order
    send = [np.arange(sum(counts), dtype=np.int32) * 2, (counts, displs), MPI.INT] \
        if r == n // 2 else None
    recv = np.zeros(counts[r], np.int32)
    comm.Scatterv(send, recv, root=n // 2)
    return [recv]


def c_gather(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    recv = np.zeros((n, 3), np.int64) if r == n - 1 else None
    comm.Gather(_ints(comm, 3), recv, root=n - 1)
    return [recv if recv is not None else np.zeros(0)]


def c_gather_in_place(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    if r == 0:
        recv = np.full((n, 2), -1, np.int64)
        recv[0] = _ints(comm, 2)
        comm.Gather(MPI.IN_PLACE, recv, root=0)
        return [recv]
    comm.Gather(_ints(comm, 2), None, root=0)
    return []


def c_gatherv(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    counts = [(i * 2) % 5 for i in range(n)]
    recv = [np.full(sum(counts) + 2, -1, np.float32), (counts, [c + 1 for c in
            np.cumsum([0] + counts)[:-1]]), MPI.FLOAT] if r == 0 else None
    comm.Gatherv(_ints(comm, counts[r], np.float32), recv, root=0)
    return [recv[0] if recv else np.zeros(0)]


def c_allgather(comm):
    recv = np.zeros((comm.Get_size(), 4), np.int16)
    comm.Allgather(_ints(comm, 4, np.int16), recv)
    return [recv]


def c_allgather_in_place(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    recv = np.full((n, 3), -1, np.int64)
    recv[r] = _ints(comm, 3)
    comm.Allgather(MPI.IN_PLACE, recv)
    return [recv]


def c_allgather_vector_type(comm):
    t = MPI.DOUBLE.Create_vector(2, 1, 3)
    rt = t.Create_resized(0, 48).Commit()
    n = comm.Get_size()
    send = _ints(comm, 2, np.float64)
    recv = np.full(n * 6, -1.0)
    comm.Allgather([send, MPI.DOUBLE], [recv, 1, rt])
    rt.Free()
    t.Free()
    return [recv]


def c_allgatherv(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    counts = [i % 3 for i in range(n)]
    recv = np.full(sum(counts), -1, np.int32)
    comm.Allgatherv(_ints(comm, counts[r], np.int32), [recv, counts])
    return [recv]


def c_alltoall(comm):
    n = comm.Get_size()
    recv = np.zeros((n, 2), np.int64)
    comm.Alltoall(_ints(comm, 2 * n), recv)
    return [recv]


def c_alltoall_in_place(comm):
    n = comm.Get_size()
    buf = _ints(comm, 3 * n, np.int32)
    comm.Alltoall(MPI.IN_PLACE, buf)
    return [buf]


def c_alltoallv(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    sc = [(r + j) % 3 for j in range(n)]
    rc = [(i + r) % 3 for i in range(n)]
    recv = np.full(sum(rc), -1, np.int64)
    comm.Alltoallv([_ints(comm, sum(sc)), sc], [recv, rc])
    return [recv]


def c_alltoallw(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    types = [MPI.INT if (r + j) % 2 else MPI.DOUBLE for j in range(n)]
    counts = [(r + j) % 3 + 1 for j in range(n)]
    send = np.zeros(8 * sum(counts), np.uint8)
    recv = np.zeros(8 * sum(counts), np.uint8)
    displs = list(np.cumsum([0] + [8 * c for c in counts])[:-1])
    for j in range(n):
        dt = np.int32 if types[j] == MPI.INT else np.float64
        a = displs[j]
        send[a:a + counts[j] * np.dtype(dt).itemsize] = \
            (np.arange(counts[j]) + 10 * r + j).astype(dt).view(np.uint8)
    comm.Alltoallw([send, (counts, displs), types], [recv, (counts, displs), types])
    return [recv]


def c_reduce_sum(comm):
    recv = np.zeros(6, np.int64) if comm.Get_rank() == 0 else None
    comm.Reduce(_ints(comm, 6), recv, op=MPI.SUM, root=0)
    return [recv if recv is not None else np.zeros(0)]


def c_reduce_max_in_place(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    if r == n - 1:
        buf = _ints(comm, 5, np.float64)
        comm.Reduce(MPI.IN_PLACE, buf, op=MPI.MAX, root=n - 1)
        return [buf]
    comm.Reduce(_ints(comm, 5, np.float64), None, op=MPI.MAX, root=n - 1)
    return []


def c_allreduce(comm):
    recv = np.zeros(9, np.int32)
    comm.Allreduce(_ints(comm, 9, np.int32), recv, op=MPI.SUM)
    return [recv]


def c_allreduce_ring(comm):
    send = _ints(comm, 20000, np.float64)  # 160 KB: the ring
    recv = np.zeros_like(send)
    comm.Allreduce(send, recv, op=MPI.SUM)
    return [recv]


def c_allreduce_in_place_prod(comm):
    buf = _ints(comm, 5) % 3 + 1
    comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.PROD)
    return [buf]


def c_allreduce_maxloc(comm):
    dt = np.dtype([("v", np.float64), ("i", np.int32)], align=True)
    send = np.zeros(3, dt)
    send["v"] = _ints(comm, 3, np.float64) % 7
    send["i"] = comm.Get_rank()
    recv = np.zeros(3, dt)
    comm.Allreduce([send, MPI.DOUBLE_INT], [recv, MPI.DOUBLE_INT], op=MPI.MAXLOC)
    return [recv["v"], recv["i"]]


def c_reduce_scatter_block(comm):
    n = comm.Get_size()
    recv = np.zeros(3, np.int64)
    comm.Reduce_scatter_block(_ints(comm, 3 * n), recv, op=MPI.SUM)
    return [recv]


def c_reduce_scatter(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    counts = [i % 3 + 1 for i in range(n)]
    recv = np.zeros(counts[r], np.int32)
    comm.Reduce_scatter(_ints(comm, sum(counts), np.int32), recv, counts, op=MPI.BXOR)
    return [recv]


def c_reduce_scatter_no_counts(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    counts = [(i + 1) % 3 for i in range(n)]
    recv = np.zeros(counts[r], np.int64)
    comm.Reduce_scatter(_ints(comm, sum(counts)), recv, None, op=MPI.SUM)
    return [recv]


def c_scan(comm):
    recv = np.zeros(4, np.int64)
    comm.Scan(_ints(comm, 4), recv, op=MPI.SUM)
    return [recv]


def c_scan_in_place(comm):
    buf = _ints(comm, 3, np.int32)
    comm.Scan(MPI.IN_PLACE, buf, op=MPI.MAX)
    return [buf]


def c_exscan(comm):
    recv = np.full(4, -1, np.int64)
    comm.Exscan(_ints(comm, 4), recv, op=MPI.SUM)
    return [recv] if comm.Get_rank() else []  # rank 0's is undefined in MPI


def c_barrier(comm):
    comm.Barrier()
    comm.barrier()
    return []


def c_objects(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    out = [comm.bcast({"r": r, "x": [1, 2]} if r == 0 else None, root=0),
           comm.scatter([("s", i) for i in range(n)] if r == n - 1 else None, root=n - 1),
           comm.gather((r, "g"), root=0), comm.allgather(r * r),
           comm.alltoall([(r, j) for j in range(n)]), comm.reduce(r + 1, root=0),
           comm.allreduce(r, op=MPI.MAX), comm.scan(r + 1), comm.exscan(r + 1)]
    return [np.array(repr(out))]


CASES = {name[2:]: fn for name, fn in sorted(globals().items()) if name.startswith("c_")}


@pytest.mark.mpi
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("split", sorted(SPLITS))
@pytest.mark.parametrize("slot", SLOTS)
def test_collective_on_a_part_equals_mpi(slot, split, case):
    """The collective on the derived part gives MPI's results on MPI's part, same buffers."""
    part, ref = _part(slot, split)
    fn = CASES[case]

    def body():
        want = fn(ref)  # MPI's first: a rank waiting in some of mpi4py's calls holds the GIL,
        got = fn(part)  # and its router could not forward the derived part's messages
        if len(got) != len(want) or not all(np.array_equal(a, b) for a, b in zip(got, want)):
            return [("differs", case, got, want)]
        return []

    problems = _attempt(body)
    assert _agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("split", sorted(SPLITS))
def test_part_is_mpis(split):
    """Ranks, size, group and ``Compare`` are MPI's; ``ranks`` are the network ranks."""
    part, ref = _part("net0", split)

    def body():
        problems = []
        g, gr = part.Get_group(), ref.Get_group()
        if (part.Get_rank(), part.Get_size()) != (ref.Get_rank(), ref.Get_size()) or \
                MPI.Group.Compare(g, gr) != MPI.IDENT or \
                part.ranks != tuple(MPI.Group.Translate_ranks(
                    g, list(range(part.size)), WORLD.Get_group())):
            problems.append(("ranks", part.ranks, part.rank, ref.Get_rank()))
        if (part.Compare(ref), part.Compare(part), part.Compare(WORLD) == MPI.UNEQUAL) != \
                (MPI.CONGRUENT, MPI.IDENT, part.size != SIZE):
            problems.append(("compare", part.Compare(ref), part.Compare(WORLD)))
        if part.Get_topology() != MPI.UNDEFINED or part.is_topo or part.is_inter:
            problems.append("topology")
        return problems

    problems = _attempt(body)
    assert _agree(not problems), problems


# -- point-to-point inside a part ---------------------------------------------------------------------
def _path(net, a, b):
    u, v = node_pair(net.topology, net.q, a, b)
    return net.topology.route(u, v)


@pytest.mark.mpi
@pytest.mark.parametrize("split", sorted(SPLITS))
@pytest.mark.parametrize("slot", SLOTS)
def test_routed_send_recv_inside_a_part(slot, split):
    """Every rank of a part sends to every other: MPI's bytes and statuses in part ranks, and
    every hop counted on the links of the ranks it crossed (non-members forward)."""
    net = _net(slot)
    part, _ = _part(slot, split)
    n, r = part.size, part.rank

    def payload(a, b):
        return np.random.default_rng([a, b, 3]).integers(0, 256, 300 + 17 * a, dtype=np.uint8)

    def body():
        net.reset_stats()
        WORLD.Barrier()
        got = {s: np.zeros(300 + 17 * s, np.uint8) for s in range(n)}
        reqs = [part.Irecv(got[s], s, 9) for s in range(n)]
        for d in range(n):
            part.Send(payload(r, d), d, 9)
        sts = [MPI.Status() for _ in reqs]
        MPI.Request.Waitall(reqs, sts)
        problems = [s for s in range(n) if not np.array_equal(got[s], payload(s, r))
                    or sts[s].source != s or sts[s].tag != 9]
        st = MPI.Status()
        part.Send(np.array([r], np.int64), (r + 1) % n, 11)
        x = np.zeros(1, np.int64)
        part.Recv(x, MPI.ANY_SOURCE, 11, st)
        if (x[0], st.source) != ((r - 1) % n, (r - 1) % n):
            problems.append(("any source", x[0], st.source))
        WORLD.Barrier()  # every message arrived: every forwarder counted its hops
        # the hops this rank's nodes sent, over every part of the split
        want = {}
        for s in range(SIZE):
            for d in range(SIZE):
                if SPLITS[split](s, SIZE)[0] != SPLITS[split](d, SIZE)[0]:
                    continue
                ps, pd = _rank_in_part(split, s), _rank_in_part(split, d)
                nbytes = [300 + 17 * ps, 8 if pd == (ps + 1) % _part_size(split, s) else None]
                for nb in nbytes:
                    if nb is None:
                        continue
                    path = _path(net, s, d)
                    for u, v in zip(path, path[1:]):
                        if u // net.q == RANK:
                            m, b = want.get((u, v), (0, 0))
                            want[(u, v)] = (m + 1, b + nb)
        if net.stats()["links"] != want:
            problems.append(("links", net.stats()["links"], want))
        return problems

    problems = _attempt(body)
    crossing = sum(1 for s in range(SIZE) for d in range(SIZE)
                   if SPLITS[split](s, SIZE)[0] == SPLITS[split](d, SIZE)[0] and
                   _non_members(net, split, s, d))
    ok = not problems and (SIZE not in (8, 32, 64) or split != "halves" or crossing > 0)
    assert _agree(ok), (problems, crossing)


def _members(split, s):
    color = SPLITS[split](s, SIZE)[0]
    return sorted((SPLITS[split](x, SIZE)[1], x) for x in range(SIZE)
                  if SPLITS[split](x, SIZE)[0] == color)


def _rank_in_part(split, s):
    return [x for _, x in _members(split, s)].index(s)


def _part_size(split, s):
    return len(_members(split, s))


def _non_members(net, split, s, d):
    """The ranks the route ``s -> d`` crosses that are not in their part."""
    members = {x for _, x in _members(split, s)}
    path = _path(net, s, d)
    return {u // net.q for u in path} - members


@pytest.mark.mpi
@pytest.mark.parametrize("slot", SLOTS)
def test_contexts_never_match_each_other(slot):
    """The same pair and tag on the network, a part and the part's Dup: each receive gets its
    own communicator's message, whatever the order they were sent in."""
    net = _net(slot)
    part, _ = _part(slot, "odd-even")
    dup = part.Dup()
    n, r = part.size, part.rank

    def body():
        problems = []
        dest, src = (r + 1) % n, (r - 1) % n
        wdest, wsrc = part.ranks[dest], part.ranks[src]
        sends = [dup.Isend(np.array([3], np.int64), dest, 5),
                 net.Isend(np.array([1], np.int64), wdest, 5),
                 part.Isend(np.array([2], np.int64), dest, 5)]
        a, b, c = (np.zeros(1, np.int64) for _ in range(3))
        part.Recv(a, src, 5)
        net.Recv(b, wsrc, 5)
        dup.Recv(c, MPI.ANY_SOURCE, MPI.ANY_TAG)
        MPI.Request.Waitall(sends)
        if (a[0], b[0], c[0]) != (2, 1, 3):
            problems.append((a[0], b[0], c[0]))
        x = dup.allreduce(r)
        if x != n * (n - 1) // 2:
            problems.append(("dup allreduce", x))
        return problems

    problems = _attempt(body)
    dup.Free()
    assert _agree(not problems), problems


# -- topology communicators -------------------------------------------------------------------------
@pytest.mark.mpi
@pytest.mark.parametrize("slot", SLOTS)
def test_cartesian_grid_as_mpi(slot):
    """A 2-D grid (periodic in one dimension): MPI's topology queries, and Sendrecv halos and
    Neighbor_alltoall equal MPI's on the same buffers (grid neighbours routed when they are
    no network neighbours)."""
    net = _net(slot)
    dims = MPI.Compute_dims(SIZE, 2)
    cart = net.Create_cart(dims, periods=[True, False])
    ref = WORLD.Create_cart(dims, periods=[True, False])

    def body():
        problems = []
        if cart.Get_topo() != ref.Get_topo() or cart.Get_topology() != MPI.CART or \
                cart.dims != dims or cart.ndim != 2 or \
                [cart.Get_coords(x) for x in range(SIZE)] != \
                [ref.Get_coords(x) for x in range(SIZE)] or \
                cart.Get_cart_rank(cart.coords) != RANK or cart.inoutedges != ref.inoutedges:
            problems.append(("queries", cart.Get_topo(), ref.Get_topo()))
        field = np.arange(20, dtype=np.float64).reshape(4, 5) + 100 * RANK
        for comm in (ref, cart):  # MPI's first (see test_collective_on_a_part_equals_mpi)
            halos = []
            for d in (0, 1):
                for disp in (1, -1):
                    src, dst = comm.Shift(d, disp)
                    edge = np.ascontiguousarray(field[0] if disp > 0 else field[-1])
                    halo = np.full(5, -1.0)
                    comm.Sendrecv(edge, dst, 7, halo, src, 7)
                    halos.append((src, dst, halo))
            if comm is ref:
                theirs = halos
            elif [(s, t) for s, t, _ in theirs] != [(s, t) for s, t, _ in halos] or \
                    not all(np.array_equal(a[2], b[2]) for a, b in zip(theirs, halos)):
                problems.append(("halos", halos, theirs))
        send = np.arange(4 * 3, dtype=np.int32) + 10 * RANK
        got, want = np.full(12, -1, np.int32), np.full(12, -1, np.int32)
        ref.Neighbor_alltoall(send, want)
        cart.Neighbor_alltoall(send, got)
        if not np.array_equal(got, want):
            problems.append(("neighbor_alltoall", got, want))
        want = ref.neighbor_allgather(RANK)
        if cart.neighbor_allgather(RANK) != want:
            problems.append("neighbor_allgather")
        sub, rsub = cart.Sub([False, True]), ref.Sub([False, True])
        want = rsub.allreduce(RANK)
        if (sub.rank, sub.size, sub.Get_topo()) != (rsub.Get_rank(), rsub.Get_size(),
                                                    rsub.Get_topo()) or \
                sub.allreduce(RANK) != want:
            problems.append(("sub", sub.Get_topo(), rsub.Get_topo()))
        sub.Free()
        rsub.Free()
        return problems

    problems = _attempt(body)
    cart.Free()
    ref.Free()
    assert _agree(not problems), problems


def _ring_graph(n, r):
    """Sources and destinations of edges ``i -> i+1`` and ``i -> i+n/2`` (no duplicates)."""
    def uniq(xs):
        out = []
        for x in xs:
            if x % n != r and x % n not in out:
                out.append(x % n)
        return out
    return uniq([r - 1, r - n // 2]), uniq([r + 1, r + n // 2])


@pytest.mark.mpi
@pytest.mark.parametrize("slot", SLOTS)
def test_dist_graph_neighbourhood_collectives_as_mpi(slot):
    """Create_dist_graph_adjacent with neighbours that are no network neighbours:
    Neighbor_allgather(v), Neighbor_alltoall and the object forms equal MPI's."""
    net = _net(slot)
    sources, dests = _ring_graph(SIZE, RANK)
    g = net.Create_dist_graph_adjacent(sources, dests)
    ref = WORLD.Create_dist_graph_adjacent(sources, dests, reorder=False)

    def body():
        problems = []
        if g.Get_dist_neighbors() != ref.Get_dist_neighbors() or \
                g.Get_topology() != MPI.DIST_GRAPH or g.degrees != (len(sources), len(dests)):
            problems.append(("neighbours", g.Get_dist_neighbors(), ref.Get_dist_neighbors()))
        send = np.arange(5, dtype=np.int64) + 100 * RANK
        for comm in (ref, g):  # MPI's first (see test_collective_on_a_part_equals_mpi)
            out = np.full(5 * len(sources), -1, np.int64)
            comm.Neighbor_allgather(send, out)
            a2a = np.full(2 * len(sources), -1, np.int32)
            comm.Neighbor_alltoall((np.arange(2 * len(dests)) + 10 * RANK).astype(np.int32),
                                   a2a)
            counts = [s % 3 + 1 for s in sources]
            v = np.full(sum(counts), -1, np.int64)
            comm.Neighbor_allgatherv(np.full(RANK % 3 + 1, RANK, np.int64), [v, counts])
            objs = (comm.neighbor_allgather(("x", RANK)),
                    comm.neighbor_alltoall([(RANK, d) for d in dests]))
            res = (out, a2a, v, objs)
            if comm is ref:
                theirs = res
        if not all(np.array_equal(a, b) for a, b in zip(theirs[:3], res[:3])) or \
                theirs[3] != res[3]:
            problems.append(("results", res, theirs))
        return problems

    problems = _attempt(body)
    g.Free()
    ref.Free()
    assert _agree(not problems), problems


@pytest.mark.mpi
def test_graph_communicator_as_mpi():
    """Create_graph: MPI's queries and Neighbor_allgather."""
    net = _net("net0")
    index, edges = [], []
    for r in range(SIZE):
        edges += _ring_graph(SIZE, r)[1] + [x for x in _ring_graph(SIZE, r)[0]
                                           if x not in _ring_graph(SIZE, r)[1]]
        index.append(len(edges))
    g = net.Create_graph(index, edges)
    ref = WORLD.Create_graph(index, edges, reorder=False)
    if ref == MPI.COMM_NULL:  # Open MPI: a graph without edges (one rank)
        assert _agree(g is MPI.COMM_NULL), g
        return

    def body():
        problems = []
        if g.Get_topo() != ref.Get_topo() or g.neighbors != ref.Get_neighbors(RANK) or \
                g.Get_topology() != MPI.GRAPH:
            problems.append(("queries", g.Get_topo(), ref.Get_topo()))
        k = len(g.neighbors)
        got, want = np.full(2 * k, -1, np.int64), np.full(2 * k, -1, np.int64)
        ref.Neighbor_allgather(np.array([RANK, -RANK], np.int64), want)
        g.Neighbor_allgather(np.array([RANK, -RANK], np.int64), got)
        if not np.array_equal(got, want):
            problems.append(("allgather", got, want))
        return problems

    problems = _attempt(body)
    g.Free()
    ref.Free()
    assert _agree(not problems), problems


# -- Dup, Split_type, COMM_NULL, nesting --------------------------------------------------------------
@pytest.mark.mpi
@pytest.mark.parametrize("slot", SLOTS)
def test_dup_of_the_network_keeps_the_papers_schedules(slot):
    """``net.Dup()`` is another dualmpi.Comm: the same Alltoall results and the same link
    messages as the parent's collective."""
    net = _net(slot)
    dup = net.Dup()

    def body():
        problems = []
        if not isinstance(dup, dualmpi.Comm) or dup.topology.spec != net.topology.spec or \
                dup.q != net.q or dup.Compare(net) != MPI.CONGRUENT:
            problems.append("not a network duplicate")
        send = np.arange(SIZE * 4, dtype=np.int64) + 1000 * RANK
        a, b = np.zeros_like(send), np.zeros_like(send)
        net.reset_stats()
        dup.reset_stats()
        net.Alltoall(send, a)
        dup.Alltoall(send, b)
        sa, sb = net.stats(), dup.stats()
        if not np.array_equal(a, b) or sa["links"] != sb["links"] or \
                (sa["collectives"], sa["rounds"]) != (sb["collectives"], sb["rounds"]):
            problems.append(("differs", sa, sb))
        return problems

    problems = _attempt(body)
    dup.Free()
    assert _agree(not problems), problems


@pytest.mark.mpi
def test_split_type_shared_as_mpi():
    """Split_type(COMM_TYPE_SHARED): MPI's members, and an Allreduce on them."""
    net = _net("net0")
    sh = net.Split_type(MPI.COMM_TYPE_SHARED, key=RANK)
    ref = WORLD.Split_type(MPI.COMM_TYPE_SHARED, key=RANK)

    def body():
        x, y = np.zeros(3, np.int64), np.zeros(3, np.int64)
        ref.Allreduce(np.arange(3) + RANK, y)
        sh.Allreduce(np.arange(3) + RANK, x)
        if (sh.rank, sh.size, sh.Compare(ref)) != (ref.Get_rank(), ref.Get_size(),
                                                    MPI.CONGRUENT) or not np.array_equal(x, y):
            return [(sh.rank, sh.size, x, y)]
        return []

    problems = _attempt(body)
    sh.Free()
    ref.Free()
    assert _agree(not problems), problems


@pytest.mark.mpi
def test_undefined_color_and_nested_parts():
    """Split with MPI.UNDEFINED gives MPI.COMM_NULL; Split of a part, Create and Create_group
    give MPI's members; their collectives equal MPI's."""
    net = _net("net0")
    color = MPI.UNDEFINED if RANK == 0 and SIZE > 1 else 0
    part, ref = net.Split(color, 0), WORLD.Split(color, 0)
    problems = []
    if (part is MPI.COMM_NULL) != (ref == MPI.COMM_NULL):
        problems.append(("COMM_NULL", part, ref))
    comms = []
    if part is not MPI.COMM_NULL:
        comms.append((part.Split(part.rank % 2, 0), ref.Split(ref.Get_rank() % 2, 0)))
    group = WORLD.Get_group().Incl(list(range(0, SIZE, 2)))
    comms.append((net.Create(group), WORLD.Create(group)))
    if RANK % 2 == 0:
        comms.append((net.Create_group(group, 3), WORLD.Create_group(group, 3)))

    def body():
        out = []
        for mine, theirs in comms:
            if (mine is MPI.COMM_NULL) != (theirs == MPI.COMM_NULL):
                out.append(("null", mine, theirs))
            elif mine is not MPI.COMM_NULL:
                a, b = np.zeros(2, np.int64), np.zeros(2, np.int64)
                theirs.Allreduce(np.array([RANK, 1]), b)
                mine.Allreduce(np.array([RANK, 1]), a)
                if not np.array_equal(a, b) or mine.rank != theirs.Get_rank():
                    out.append((a, b))
        return out

    problems += _attempt(body)
    for mine, theirs in comms:
        if mine is not MPI.COMM_NULL:
            mine.Free()
            theirs.Free()
    if part is not MPI.COMM_NULL:
        part.Free()
        ref.Free()
    group.Free()
    assert _agree(not problems), problems


# -- errors and the end ---------------------------------------------------------------------------------
@pytest.mark.mpi
def test_bad_arguments_raise_on_every_rank():
    """One rank's wrong buffer size, a mismatched Alltoallv count, and ranks that disagree on
    the root: every rank raises InputError, none waits (a nonblocking collective: at its
    Wait); persistent ones say why not."""
    part, _ = _part("net0", "halves")
    n, r = part.size, part.rank
    problems = []

    def expect(call, what):
        try:
            call()
        except InputError:
            return
        except Exception as exc:  # noqa: BLE001 - recorded
            problems.append((what, f"{type(exc).__name__}: {exc}"))
            return
        if n > 1 or what == "size":
            problems.append((what, "no error"))

    expect(lambda: part.Allgather(np.zeros(3), np.zeros(3 * n + (r == n - 1))), "size")
    expect(lambda: part.Bcast(np.zeros(2), root=r % 2 if n > 1 else 0), "root")
    counts = [1] * n
    rc = [1 + (r == 0 and j == n - 1) for j in range(n)]
    expect(lambda: part.Alltoallv([np.zeros(n), counts], [np.zeros(sum(rc)), rc]), "counts")
    try:
        part.Neighbor_alltoall_init(np.zeros(1), np.zeros(1))
        problems.append("Neighbor_alltoall_init did not raise")
    except UnsupportedError as exc:
        if "Neighbor_alltoall_init" not in str(exc):
            problems.append(str(exc))
    req = part.Iallgather(np.zeros(3), np.zeros(3 * n + (r == n - 1)))
    try:  # a nonblocking collective's error is raised by the Wait that completes it
        req.Wait()
        problems.append("Iallgather: no error")
    except InputError:
        pass
    x = np.zeros(1, np.int64)
    part.Allreduce(np.ones(1, np.int64), x)  # still usable afterwards
    if x[0] != n:
        problems.append(("after", x))
    assert _agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("slot", SLOTS)
def test_free_with_messages_in_flight(slot):
    """Receives posted, then every rank frees the part: they complete with MPI's bytes; the
    messages nobody received are dropped; nothing of the part stays on the network."""
    net = _net(slot)
    part = net.Split(RANK % 2, -RANK)
    n, r = part.size, part.rank
    ctx = part.context
    problems = []
    big = np.arange(50000, dtype=np.int64) + r
    got = np.zeros(50000, np.int64)
    rreq = part.Irecv(got, (r - 1) % n, 4)
    sreq = part.Isend(big, (r + 1) % n, 4)
    part.Send(np.ones(3, np.int64), (r + 1) % n, 99)  # nobody receives it
    part.Free()
    try:
        MPI.Request.Waitall([rreq, sreq])
        if not np.array_equal(got, np.arange(50000, dtype=np.int64) + (r - 1) % n):
            problems.append("bytes")
        try:
            part.Send(np.ones(1), 0)
            problems.append("Send after Free")
        except DualmpiError:
            pass
    except Exception as exc:  # noqa: BLE001 - reported through the agreement
        problems.append(f"{type(exc).__name__}: {exc}")
    WORLD.Barrier()
    hub = net._router.hub
    with hub.lock:
        left = [c for c in (ctx, ctx + 1) if c in hub.unclaimed or
                (c in hub.endpoints and (hub.endpoints[c].mailbox or hub.endpoints[c].posted))]
    if left:
        problems.append(("left behind", left))
    assert _agree(not problems), problems


def _unthreaded(spec, q):
    """Return a ``dualmpi.Comm`` whose router has no progress thread."""
    import os

    old = os.environ.get("DUALMPI_PROGRESS_THREAD")
    os.environ["DUALMPI_PROGRESS_THREAD"] = "0"
    try:
        return dualmpi.Comm(WORLD, spec, nodes_per_rank=q, watchdog=90)
    finally:
        if old is None:
            del os.environ["DUALMPI_PROGRESS_THREAD"]
        else:
            os.environ["DUALMPI_PROGRESS_THREAD"] = old


@pytest.mark.mpi
def test_without_a_progress_thread_parts_still_work():
    """DUALMPI_PROGRESS_THREAD=0: a part's control plane and waits advance the router (a member
    waiting for the others still forwards), so collectives on halves whose routes cross the
    other half equal MPI's; Free and the network's Free drain every message."""
    spec, q = NETWORKS[SIZE][0]
    net = _unthreaded(spec, q)
    color, key = SPLITS["halves"](RANK, SIZE)
    part, ref = net.Split(color, key), WORLD.Split(color, key)
    cases = ("allreduce", "allreduce_ring", "alltoallv", "bcast", "gatherv", "scan",
             "reduce_scatter_no_counts", "objects")

    def body():
        problems = [] if net._router.thread is None else ["a thread was started"]
        want = [CASES[c](ref) for c in cases]  # MPI's first: it blocks without forwarding
        got = [CASES[c](part) for c in cases]
        for c, a, b in zip(cases, got, want):
            if len(a) != len(b) or not all(np.array_equal(x, y) for x, y in zip(a, b)):
                problems.append((c, a, b))
        return problems

    problems = _attempt(body)
    part.Free()
    net.Free()  # its drain forwards the other part's last messages too
    ref.Free()
    assert _agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("split", sorted(SPLITS))
@pytest.mark.parametrize("slot", SLOTS)
def test_nonblocking_collectives_equal_mpi(slot, split):
    """Nonblocking collectives on a part, several in flight at once and a blocking one in
    between, waited for together: MPI's results on the same buffers."""
    part, ref = _part(slot, split)

    def run(comm):
        n, r = comm.Get_size(), comm.Get_rank()
        a, b = _ints(comm, 6), np.zeros(6, np.int64)
        c = np.full(5, -1, np.int32) if r else _ints(comm, 5, np.int32)
        d = np.zeros((n, 2), np.int16)
        sc = [(r + j) % 3 for j in range(n)]
        rc = [(i + r) % 3 for i in range(n)]
        e = np.full(sum(rc), -1, np.int64)
        f = np.zeros(4, np.int64)
        counts = [(i + 1) % 3 for i in range(n)]
        g = np.zeros(counts[r], np.int64)
        # every buffer referenced until the Waitall (mpi4py does not keep all of them alive)
        keep = [_ints(comm, 2, np.int16), _ints(comm, sum(sc)), _ints(comm, 4),
                _ints(comm, sum(counts))]
        reqs = [comm.Iallreduce(a, b, op=MPI.MAX), comm.Ibcast(c, root=0),
                comm.Iallgather(keep[0], d), comm.Ialltoallv([keep[1], sc], [e, rc]),
                comm.Iexscan(keep[2], f), comm.Ibarrier(),
                comm.Ireduce_scatter(keep[3], g, counts)]
        h = np.zeros(3, np.int64)
        comm.Allreduce(_ints(comm, 3), h)  # a blocking one while those are in flight
        MPI.Request.Waitall(reqs)
        return [b, c, d, e, f if r else np.zeros(0), g, h]

    def body():
        want = run(ref)
        got = run(part)
        if not all(np.array_equal(x, y) for x, y in zip(got, want)):
            return [("differs", got, want)]
        return []

    problems = _attempt(body)
    assert _agree(not problems), problems


@pytest.mark.mpi
def test_nonblocking_neighbourhood_on_a_grid_equals_mpi():
    """Ineighbor_alltoall and Ineighbor_allgather on a periodic Cartesian grid: the results of
    MPI's blocking neighbourhood collectives (Open MPI's nonblocking ones, libnbc, match a
    periodic dimension of 2 ranks by posting order instead of by direction: they differ)."""
    net = _net("net0")
    dims = MPI.Compute_dims(SIZE, 2)
    cart = net.Create_cart(dims, periods=[True, True])
    ref = WORLD.Create_cart(dims, periods=[True, True])

    def run(comm):
        a, b = np.full(12, -1, np.int32), np.full(4, -1, np.int64)
        keep = [np.arange(12, dtype=np.int32) + 10 * RANK, np.array([RANK], np.int64)]
        if comm is ref:
            comm.Neighbor_alltoall(keep[0], a)
            comm.Neighbor_allgather(keep[1], b)
            return [a, b]
        reqs = [comm.Ineighbor_alltoall(keep[0], a), comm.Ineighbor_allgather(keep[1], b)]
        MPI.Request.Waitall(reqs)
        return [a, b]

    def body():
        want = run(ref)
        got = run(cart)
        if not all(np.array_equal(x, y) for x, y in zip(got, want)):
            return [("differs", got, want)]
        return []

    problems = _attempt(body)
    cart.Free()
    ref.Free()
    assert _agree(not problems), problems


@pytest.mark.mpi
def test_every_carried_method_of_intracomm_is_there():
    """Each method dualmpi.Comm carries (support.STATUS) exists on a derived communicator too;
    an unsupported one raises UnsupportedError naming it."""
    from dualmpi import derived
    from dualmpi.support import STATUS

    part, _ = _part("net0", "halves")
    missing = [name for name, (status, _) in STATUS.items()
               if status != "unsupported" and not hasattr(part, name)]
    wrong = []
    for name, (status, _) in STATUS.items():
        if status == "unsupported":
            try:
                getattr(part, name)
                wrong.append(name)
            except UnsupportedError as exc:
                if name not in str(exc):
                    wrong.append(name)
    topo = [name for cls, names in ((derived.Cartcomm, "Get_topo Shift Sub Neighbor_alltoall"),
                                    (derived.Graphcomm, "Get_neighbors Neighbor_allgather"),
                                    (derived.Distgraphcomm, "Get_dist_neighbors Ineighbor_alltoallw"))
            for name in names.split() if not hasattr(cls, name)]
    assert _agree(not missing and not wrong and not topo), (missing, wrong, topo)
