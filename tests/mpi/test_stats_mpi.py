"""MPI tests of ``dualmpi.Comm.stats()``: nonblocking collectives count as the blocking ones.

A completed ``Iallreduce``, ``Ibcast``, ``Ialltoall``, ``Ialltoallv``, ... counts exactly what
the same blocking call counts: the same per-link messages and bytes, one collective (two for a
v-variant: the all-gather of its counts, then the data), the same hop rounds, steps and step
bytes; ``reset_stats()`` zeroes them.  The results equal ``MPI.COMM_WORLD``'s on the same
buffers.  Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi
tests/mpi/test_stats_mpi.py`` at N = 1, 2, 4, 8.
"""

import numpy as np
import pytest

import dualmpi
from dualmpi.engine import cloop

MPI = pytest.importorskip("mpi4py.MPI")

WORLD = MPI.COMM_WORLD
SIZE = WORLD.Get_size()
RANK = WORLD.Get_rank()

#: (spec, nodes per rank, options) by rank count: one node per rank and several; the Hamiltonian
#: ring allgather (``algorithms``) where the network has a ring.
NETS = {1: [("hypercube:n=0", 1, {}), ("dualcube:r=1", 2, {}),
            ("hypercube:n=3", 8, {"algorithms": {"allgather": "ring"}})],
        2: [("dualcube:r=1", 1, {}), ("dualcube:r=2", 4, {}),
            ("hypercube:n=2", 2, {"algorithms": {"allgather": "ring"}})],
        4: [("hypercube:n=2", 1, {"algorithms": {"allgather": "ring"}}),
            ("dualcube:r=2", 2, {})],
        8: [("dualcube:r=2", 1, {"algorithms": {"allgather": "ring"}}),
            ("metacube:k=1,m=2", 4, {})]}.get(SIZE, [])

#: Calls of each kind per test.
N = 3


def _agree(ok):
    return bool(WORLD.allreduce(int(bool(ok)), op=MPI.MIN))


def _calls(root):
    """name -> (blocking(comm), nonblocking(net) -> request): each fills and returns its own
    buffers, ``comm`` a dualmpi.Comm or MPI.COMM_WORLD."""
    rng = np.random.default_rng(RANK + 5)
    vec = rng.integers(-50, 50, 6).astype(np.int64)
    piece = rng.standard_normal(4 * SIZE)
    counts = (np.arange(SIZE) % 3 + 1).astype(np.int64)  # this rank sends counts[j] to rank j
    scounts = counts
    rcounts = np.full(SIZE, counts[RANK], dtype=np.int64)
    sdispls = np.concatenate([[0], np.cumsum(scounts[:-1])])
    rdispls = np.concatenate([[0], np.cumsum(rcounts[:-1])])
    vsend = rng.standard_normal(int(scounts.sum()))
    mine = np.full(int(counts[RANK]), RANK + 0.25)
    bc = rng.standard_normal(5) if RANK == root else np.zeros(5)

    def allreduce(comm, start=False):
        out = np.zeros(6, np.int64)
        return ((comm.Iallreduce if start else comm.Allreduce)(vec, out, MPI.SUM), out)

    def bcast(comm, start=False):
        out = bc.copy()
        return ((comm.Ibcast if start else comm.Bcast)(out, root), out)

    def alltoall(comm, start=False):
        out = np.zeros(4 * SIZE)
        return ((comm.Ialltoall if start else comm.Alltoall)(piece, out), out)

    def alltoallv(comm, start=False):
        out = np.zeros(int(rcounts.sum()))
        return ((comm.Ialltoallv if start else comm.Alltoallv)(
            [vsend, (scounts, sdispls)], [out, (rcounts, rdispls)]), out)

    def allgather(comm, start=False):
        out = np.zeros(6 * SIZE, np.int64)
        return ((comm.Iallgather if start else comm.Allgather)(vec, out), out)

    def allgatherv(comm, start=False):
        out = np.zeros(int(counts.sum()))
        return ((comm.Iallgatherv if start else comm.Allgatherv)(
            mine, [out, (counts, np.concatenate([[0], np.cumsum(counts[:-1])]))]), out)

    def scan(comm, start=False):
        out = np.zeros(6, np.int64)
        return ((comm.Iscan if start else comm.Scan)(vec, out), out)

    def barrier(comm, start=False):
        return ((comm.Ibarrier if start else comm.Barrier)(), np.zeros(0))

    return {"Allreduce": allreduce, "Bcast": bcast, "Alltoall": alltoall,
            "Alltoallv": alltoallv, "Allgather": allgather, "Allgatherv": allgatherv,
            "Scan": scan, "Barrier": barrier}


def _net(i):
    if i >= len(NETS):
        pytest.skip(f"no network {i} at {SIZE} ranks")
    spec, q, options = NETS[i]
    return dualmpi.Comm(WORLD, spec, nodes_per_rank=q, **options)


def _same_stats(a, b):
    return {k: a[k] for k in sorted(a)} == {k: b[k] for k in sorted(b)}


def _same_but_merged(nonblocking, blocking):
    """The same figures, but the blocking calls' messages may be fewer: a repeated v-variant
    call carries its count table in its plan's messages where the two share a link and round
    (``dualmpi.engine.plan.merge``); the same bytes go over every link."""
    skip = ("messages", "links")
    if {k: v for k, v in nonblocking.items() if k not in skip} != \
            {k: v for k, v in blocking.items() if k not in skip}:
        return False
    a, b = nonblocking["links"], blocking["links"]
    return a.keys() == b.keys() and all(a[k][1] == b[k][1] and a[k][0] >= b[k][0] for k in a) \
        and blocking["messages"] == sum(m for m, _ in b.values())


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1, 2])
@pytest.mark.parametrize("name", ["Allreduce", "Bcast", "Alltoall", "Alltoallv", "Allgather",
                                  "Allgatherv", "Scan", "Barrier"])
def test_nonblocking_calls_count_as_blocking_ones(net_i, name):
    """N blocking calls on a fresh communicator and N nonblocking ones (in flight together) on
    another count the same figures; reset_stats() zeroes them; every result equals MPI's."""
    root = SIZE - 1
    call = _calls(root)[name]
    want = [call(WORLD)[1] for _ in range(N)]
    blocking = _net(net_i)
    got_b = [call(blocking)[1] for _ in range(N)]
    stats_b = blocking.stats()
    blocking.Free()
    nonblocking = _net(net_i)
    started = [call(nonblocking, start=True) for _ in range(N)]
    dualmpi.Request.Waitall([req for req, _ in started[::-1]])
    stats_n = nonblocking.stats()
    nonblocking.reset_stats()
    zero = nonblocking.stats()
    again = [call(nonblocking, start=True) for _ in range(N)]
    for req, _ in again:
        req.Wait()
    stats_again = nonblocking.stats()
    nonblocking.Free()
    problems = []
    per_call = 2 if name in ("Alltoallv", "Allgatherv") else 1  # the counts' all-gather
    if stats_b["collectives"] != per_call * N:
        problems.append(("blocking collectives", stats_b["collectives"]))
    same = _same_stats if per_call == 1 else _same_but_merged
    if not same(stats_n, stats_b):
        problems.append(("nonblocking", stats_n, "blocking", stats_b))
    if not same(stats_again, stats_b):
        problems.append(("after reset_stats", stats_again))
    if any(zero[k] for k in zero if k != "links") or zero["links"]:
        problems.append(("reset_stats", zero))
    # Allgatherv's plan is its table's allgather: every repeat's messages merge (one node a
    # rank, the compiled loop: calls._can_speculate)
    _, q, _ = NETS[net_i]
    if name == "Allgatherv" and q == 1 and SIZE > 1 and N > 1 and cloop.load() is not None and \
            WORLD.allreduce(stats_b["messages"]) >= WORLD.allreduce(stats_n["messages"]):
        problems.append(("no messages merged", stats_b["messages"], stats_n["messages"]))
    total = WORLD.allreduce(stats_n["messages"])
    if SIZE > 1 and total == 0:  # (one rank's reductions combine within it: no message)
        problems.append(("no link messages", total))
    results = got_b + [got for _, got in started] + [got for _, got in again]
    ref = want[0]
    for got in results:
        if not (got.dtype == ref.dtype and np.array_equal(got, ref)):
            problems.append(("result", got.tolist(), ref.tolist()))
    assert _agree(not problems), problems


# -- point-to-point: the messages a rank sent, their bytes and their routes' links ---------------
def _hops(topo, q, a, b):
    """Links of the route between ranks a and b: the shortest route between their nodes."""
    return min(len(topo.route(u, v)) - 1 for u in range(a * q, (a + 1) * q)
               for v in range(b * q, (b + 1) * q))


def _exchange(comm, ranks, me, topo, q):
    """Every rank of ``comm`` sends every other one ``8*(its rank + 1) + dest`` bytes at once
    (Isend/Irecv), then a Sendrecv around the ring; return this rank's expected
    ``(messages, bytes, hops)`` (ranks: the network rank of each rank of ``comm``)."""
    size = len(ranks)
    want = [0, 0, 0]
    recvs, reqs = {}, []
    for b in range(size):
        if b == me:
            continue
        n = 8 * (ranks[b] + 1) + ranks[me]
        recvs[b] = np.zeros(n, np.uint8)
        reqs.append(comm.Irecv(recvs[b], b, 5))
    for b in range(size):
        if b == me:
            continue
        n = 8 * (ranks[me] + 1) + ranks[b]
        reqs.append(comm.Isend(np.full(n, ranks[me], np.uint8), b, 5))
        want[0] += 1
        want[1] += n
        want[2] += _hops(topo, q, ranks[me], ranks[b])
    dualmpi.Request.Waitall(reqs)
    ok = all((buf == ranks[b]).all() for b, buf in recvs.items())
    right, left = (me + 1) % size, (me - 1) % size
    got = np.zeros(3)
    comm.Sendrecv(np.full(3, float(me)), right, 7, got, left, 7)
    ok = ok and (got == left).all()
    if right != me:
        want[0] += 1
        want[1] += 24
        want[2] += _hops(topo, q, ranks[me], ranks[right])
    return want, ok


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1])
def test_point_to_point_counts_the_messages_a_rank_sent(net_i):
    """p2p_messages, p2p_bytes and p2p_hops: every message this rank sent (routed or direct,
    on the network and on a Split of it), its bytes and the links of its route (the shortest
    route between the two ranks' nodes); over the ranks the hops are the link messages;
    Neighbor_allgather sends one message per neighbour over one link; reset_stats zeroes them."""
    net = _net(net_i)
    topo, q = net.topology, net.q
    problems = []
    net.reset_stats()
    WORLD.Barrier()  # (no rank forwards another's message before this rank's reset)
    want, ok = _exchange(net, list(range(SIZE)), RANK, topo, q)
    half = net.Split(RANK % 2, RANK)
    members = [r for r in range(SIZE) if r % 2 == RANK % 2]
    more, ok2 = _exchange(half, members, members.index(RANK), topo, q)
    want = [a + b for a, b in zip(want, more)]
    WORLD.Barrier()  # every message has arrived: every rank on its way has counted its hop
    st = net.stats()
    got = [st["p2p_messages"], st["p2p_bytes"], st["p2p_hops"]]
    if not (ok and ok2):
        problems.append("data")
    if got != want:
        problems.append(("sent", got, "expected", want))
    if WORLD.allreduce(st["p2p_hops"]) != WORLD.allreduce(st["messages"]):
        problems.append(("hops over the ranks differ from the link messages", st))
    if (st["collectives"], st["rounds"], st["step_bytes"]) != (0, 0, 0):
        problems.append(("collectives", st))
    half.Free()
    net.reset_stats()
    WORLD.Barrier()
    zero = net.stats()
    if (zero["p2p_messages"], zero["p2p_bytes"], zero["p2p_hops"]) != (0, 0, 0):
        problems.append(("reset", zero))
    indegree, outdegree, _ = net.Get_dist_neighbors_count()
    block = np.full(5, float(RANK))
    out = np.zeros(5 * indegree)
    net.Neighbor_allgather(block, out)
    st = net.stats()
    if [st["p2p_messages"], st["p2p_bytes"], st["p2p_hops"]] != \
            [outdegree, 40 * outdegree, outdegree]:
        problems.append(("neighbourhood", st, outdegree))
    net.Free()
    assert _agree(not problems), problems
