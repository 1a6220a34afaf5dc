"""MPI tests of MPI's progress rule: a rank blocked in a call still forwards its requests in flight.

Every rank starts a nonblocking collective; then the odd ranks wait for it and make a
blocking call, the even ranks make the blocking call first and wait after.  That is a legal
MPI program (every rank makes the same collectives in the same order), and it completes
only if a rank blocked in the blocking call still advances the nonblocking one: on the
dual-cube the even ranks forward the broadcast the odd ranks wait for.  The same program
runs on ``MPI.COMM_WORLD``, and the results must be equal.  Each pattern runs three times on
the same buffers: the first call agrees on its arguments, the repeats run in the compiled
loop (``rounds.c``'s wait calls back into Python: :mod:`dualmpi.engine.inflight`).

A stop here is the watchdog's (``watchdog=`` below): the job ends with its message.
Run at N = 1, 2, 4, 8, 32 ranks.
"""

import numpy as np
import pytest

import dualmpi
from collective_cases import agree
from dualmpi.errors import DualmpiError

MPI = pytest.importorskip("mpi4py.MPI")

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
SIZE = WORLD.Get_size()
RANK = WORLD.Get_rank()

#: (spec, nodes per rank, Comm options) by rank count: one node per rank and several, and the
#: round loop in Python (``verify``: every message checksummed).
NETS = {1: [("hypercube:n=0", 1, {}), ("dualcube:r=1", 2, {})],
        2: [("dualcube:r=1", 1, {}), ("dualcube:r=2", 4, {}),
            ("dualcube:r=1", 1, {"verify": True})],
        4: [("hypercube:n=2", 1, {}), ("dualcube:r=2", 2, {})],
        8: [("dualcube:r=2", 1, {}), ("dualcube:r=3", 4, {}),
            ("dualcube:r=2", 1, {"verify": True})],
        32: [("dualcube:r=3", 1, {})]}.get(SIZE, [])

#: calls per pattern (the first agrees, the others repeat it)
REPEATS = 3
#: Above 8 ranks only the small cases are made (the time of the 32-rank tier: a case that is
#: made and skipped costs a tenth of a second there, 64 ranks sharing 2 cores).
SMALL = SIZE > 8
#: The networks' indices (none at this size: one case, which skips).
NET_IS = range(max(len(NETS), 1))

_NETS = {}
_KEEP = []


def _net(i):
    if i >= len(NETS):
        pytest.skip(f"no network {i} at {SIZE} ranks")
    if i not in _NETS:
        spec, q, options = NETS[i]
        _NETS[i] = dualmpi.Comm(WORLD, spec, nodes_per_rank=q, watchdog=60, **options)
    return _NETS[i]


@pytest.fixture(scope="module", autouse=True)
def _free_nets():
    """Free the networks at the end (in the same order on every rank)."""
    yield
    for i in sorted(_NETS):
        _NETS.pop(i).Free()


def _nonblocking(kind, comm, n):
    """Start the nonblocking collective ``kind`` on ``comm``; return ``(request, result)``."""
    if kind == "Ibcast":
        buf = np.arange(n, dtype=np.int32) + 1 if RANK == 0 else np.zeros(n, np.int32)
        return comm.Ibcast(buf, 0), buf
    # (the send buffers live as long as the request: _KEEP)
    if kind == "Iallreduce":
        out = np.zeros(n, np.int64)
        _KEEP.append(np.arange(n, dtype=np.int64) * (RANK + 1))
        return comm.Iallreduce(_KEEP[-1], out, MPI.SUM), out
    if kind == "Ialltoall":
        out = np.full(2 * SIZE, -1, np.float64)
        _KEEP.append(np.arange(2 * SIZE, dtype=np.float64) + 100 * RANK)
        return comm.Ialltoall(_KEEP[-1], out), out
    raise AssertionError(kind)


def _blocking(kind, comm, n):
    """Make the blocking call ``kind`` on ``comm``; return its result (an array or object)."""
    if kind == "Bcast":
        buf = np.arange(n, dtype=np.float64) - 5 if RANK == SIZE - 1 else np.zeros(n)
        comm.Bcast(buf, SIZE - 1)
        return buf
    if kind == "Allreduce":
        out = np.zeros(n, np.int32)
        comm.Allreduce(np.full(n, RANK + 1, np.int32), out, MPI.MAX)
        return out
    if kind == "Allreduce-ufunc":  # combined in Python between segments of rounds
        out = np.zeros(n, np.int64)
        comm.Allreduce(np.full(n, RANK + 2, np.int64), out,
                       np.multiply if isinstance(comm, dualmpi.Comm) else MPI.PROD)
        return out
    if kind == "Allreduce-inplace":
        buf = np.full(n, RANK + 1, np.int32)
        comm.Allreduce(MPI.IN_PLACE, buf, MPI.SUM)
        return buf
    if kind == "Bcast-vector":  # a derived datatype: every other element, the gaps untouched
        buf = np.arange(2 * n, dtype=np.int32) if RANK == SIZE - 1 else np.full(2 * n, -7, np.int32)
        vector = MPI.INT32_T.Create_vector(n, 1, 2).Commit()
        try:
            comm.Bcast([buf, 1, vector], SIZE - 1)
        finally:
            vector.Free()
        return buf
    if kind == "Alltoall-empty":  # count 0
        out = np.zeros(0, np.int32)
        comm.Alltoall(np.zeros(0, np.int32), out)
        return out
    if kind == "Alltoall":
        out = np.zeros(3 * SIZE, np.int16)
        comm.Alltoall(np.arange(3 * SIZE, dtype=np.int16) + 7 * RANK, out)
        return out
    if kind == "Allgatherv":
        counts = [1 + r % 3 for r in range(SIZE)]
        out = np.full(sum(counts), -1.0)
        comm.Allgatherv(np.full(counts[RANK], RANK + 0.25), [out, counts])
        return out
    if kind == "Gather":
        out = np.full(2 * SIZE, -1, np.int64) if RANK == 0 else None
        comm.Gather(np.array([RANK, -RANK], np.int64), out, 0)
        return out
    if kind == "Barrier":
        comm.Barrier()
        return None
    if kind == "bcast":
        return comm.bcast({"n": n, "from": RANK} if RANK == 0 else None, 0)
    raise AssertionError(kind)


def _pattern(comm, ikind, bkind, n, warm=False):
    """The program: a nonblocking call, then (odd ranks) wait before or (even ranks) after
    the blocking one; REPEATS times on the same sizes.  Returns every result.  ``warm``: the
    blocking call is made once alone before, so every call beside a request is a repeat
    (the compiled loop's wait calls back into Python)."""
    out = []
    if warm:
        out.append((None, _blocking(bkind, comm, n)))
    for _ in range(REPEATS):
        req, got = _nonblocking(ikind, comm, n)
        if RANK % 2:
            req.Wait()
            blocked = _blocking(bkind, comm, n)
        else:
            blocked = _blocking(bkind, comm, n)
            req.Wait()
        out.append((got, blocked))
    _KEEP.clear()
    return out


def _same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return a is not None and b is not None and a.dtype == b.dtype and np.array_equal(a, b)
    return a == b


@pytest.mark.parametrize("net_i", NET_IS)
@pytest.mark.parametrize("ikind", ["Ibcast"] if SMALL else ["Ibcast", "Iallreduce", "Ialltoall"])
@pytest.mark.parametrize("bkind", [k for k in ("Bcast", "Allreduce", "Allreduce-ufunc", "Alltoall",
                                               "Allgatherv", "Gather", "Barrier", "bcast",
                                               "Allreduce-inplace", "Bcast-vector",
                                               "Alltoall-empty")
                                   if not (SMALL and k.startswith("Allreduce-"))])
@pytest.mark.parametrize("n", [5] if SMALL else [5, 40000])
@pytest.mark.parametrize("warm", [False, True], ids=["first", "warm"])
def test_a_blocking_call_beside_a_request_in_flight_matches_mpi(net_i, ikind, bkind, n, warm):
    net = _net(net_i)
    got = _pattern(net, ikind, bkind, n, warm)
    want = _pattern(WORLD, ikind, bkind, n, warm)
    ok = len(got) == len(want) and all(_same(a, b) and _same(c, d)
                                       for (a, c), (b, d) in zip(got, want))
    assert agree(ok), f"rank {RANK}: {got} != {want}"


@pytest.mark.parametrize("net_i", NET_IS)
def test_several_requests_in_flight_beside_blocking_calls(net_i):
    """Two requests in flight, waited for in reverse order by half the ranks, around three
    blocking calls (a neighbourhood one among them)."""
    def program(comm, neighbours):
        a, x = _nonblocking("Ibcast", comm, 300)
        b, y = _nonblocking("Iallreduce", comm, 7)
        blocked = []
        if RANK % 2:
            b.Wait()
            blocked.append(_blocking("Allreduce", comm, 3))
            a.Wait()
        else:
            blocked.append(_blocking("Allreduce", comm, 3))
        blocked.append(_blocking("Bcast", comm, 9))
        mine = np.full(2, RANK, np.int32)
        around = np.full(2 * len(neighbours), -1, np.int32)
        neighbour_comm = comm if isinstance(comm, dualmpi.Comm) else graph
        neighbour_comm.Neighbor_allgather(mine, around)
        blocked.append(around)
        if not RANK % 2:
            a.Wait()
            b.Wait()
        return [x, y] + blocked

    net = _net(net_i)
    topo, q = net.topology, net.q  # (the neighbourhood's order: the topology's, one node a rank)
    neighbours = [int(v) for v in topo.neighbors(RANK)] if q == 1 else \
        sorted({int(v) // q for u in range(RANK * q, RANK * q + q) for v in topo.neighbors(u)}
               - {RANK})
    graph = WORLD.Create_dist_graph_adjacent(neighbours, neighbours, reorder=False)
    try:
        got = program(net, neighbours)
        want = program(WORLD, neighbours)
    finally:
        graph.Free()
    ok = all(_same(a, b) for a, b in zip(got, want))
    assert agree(ok), f"rank {RANK}: {got} != {want}"


def _point_to_point(kind, comm, partner, n):
    """One exchange ``kind`` with ``partner`` (odd ranks send, even ranks receive; Sendrecv
    both); returns what this rank received."""
    mine = np.arange(n, dtype=np.int32) + 1000 * RANK
    got = np.full(n, -1, np.int32)
    if kind == "Sendrecv":
        comm.Sendrecv(mine, partner, 4, got, partner, 4)
    elif RANK % 2:
        {"Send": comm.Send, "Ssend": comm.Ssend, "Probe": comm.Send,
         "object": lambda buf, dest, tag: comm.send(buf.tolist(), dest, tag)}[kind](
            mine, partner, 4)
    elif kind == "Probe":
        status = MPI.Status()
        comm.Probe(partner, 4, status)
        comm.Recv(got[:status.Get_count(MPI.INT32_T)], partner, 4)
    elif kind == "object":
        return comm.recv(None, partner, 4)
    else:
        comm.Recv(got, partner, 4)
    return got


@pytest.mark.parametrize("net_i", NET_IS)
@pytest.mark.parametrize("kind", ["Send", "Sendrecv", "object"] if SMALL else
                         ["Send", "Ssend", "Sendrecv", "Probe", "object"])
@pytest.mark.parametrize("distance", [1, 3])
@pytest.mark.parametrize("n", [3] if SMALL else [3, 70000])
def test_point_to_point_beside_a_request_in_flight_matches_mpi(net_i, kind, distance, n):
    """The odd ranks wait for a broadcast, then send to their partner; the even ranks
    receive first (one link away or routed, by the lane or the router) and wait after."""
    net = _net(net_i)
    if SIZE < 2 or distance >= SIZE:
        pytest.skip(f"no partner at distance {distance} among {SIZE} rank(s)")
    partner = RANK ^ distance

    def program(comm):
        out = []
        for _ in range(REPEATS):
            req, got = _nonblocking("Ibcast", comm, 1000)
            if RANK % 2:
                req.Wait()
                out.append(_point_to_point(kind, comm, partner, n))
            else:
                out.append(_point_to_point(kind, comm, partner, n))
                req.Wait()
            out.append(got)
        return out

    got, want = program(net), program(WORLD)
    ok = all(_same(a, b) for a, b in zip(got, want))
    assert agree(ok), f"rank {RANK}: {got} != {want}"


@pytest.mark.parametrize("net_i", NET_IS)
@pytest.mark.parametrize("bkind", ["Bcast"] if SMALL else ["Bcast", "Allreduce", "Alltoall",
                                                           "Barrier"])
def test_a_derived_communicators_call_beside_a_request_in_flight_matches_mpi(net_i, bkind):
    """The blocking call is made on a communicator split from the network (ranks reversed:
    its collectives are routed point-to-point) while the network's broadcast is in flight."""
    net = _net(net_i)
    sub, ref = net.Split(0, SIZE - 1 - RANK), WORLD.Split(0, SIZE - 1 - RANK)

    def program(comm, other):
        out = []
        for _ in range(REPEATS):
            req, got = _nonblocking("Ibcast", comm, 2000)
            if RANK % 2:
                req.Wait()
                out.append(_blocking(bkind, other, 6))
            else:
                out.append(_blocking(bkind, other, 6))
                req.Wait()
            out.append(got)
        return out

    try:
        got, want = program(net, sub), program(WORLD, ref)
    finally:
        sub.Free()
        ref.Free()
    ok = all(_same(a, b) for a, b in zip(got, want))
    assert agree(ok), f"rank {RANK}: {got} != {want}"


def test_an_alarm_of_another_communicator_fails_its_requests_not_the_blocking_call():
    """Rank 1 starts a repeated ``Ibcast`` on communicator B with another root than rank 0's
    (rank 0 skips the agreement: rank 1 raises B's alarm, and never forwards the broadcast).
    Every rank then makes a blocking ``Bcast`` on communicator A beside B's request (the ranks
    that wait for rank 1's forwarding hear the alarm there): it completes with MPI's result,
    B's request fails at its ``Wait`` on rank 1 (elsewhere where it had not completed, or at
    its start on a rank that heard the alarm first), and A stays usable."""
    spec = {4: "hypercube:n=2", 8: "dualcube:r=2", 32: "dualcube:r=3"}.get(SIZE)
    if spec is None:
        pytest.skip(f"no network of {SIZE} ranks here")
    a, b = dualmpi.Comm(WORLD, spec, watchdog=60), dualmpi.Comm(WORLD, spec, watchdog=60)
    try:
        x = np.zeros(4, np.int64)
        for _ in range(2):  # known to rank 0: its next repeat skips the agreement
            b.Ibcast(x, 0).Wait()
        errors, req = [], None
        try:  # (a rank that hears the alarm before it starts the call raises here)
            req = b.Ibcast(x, 1 if RANK == 1 else 0)
        except DualmpiError as exc:
            errors.append(str(exc))
        y = np.arange(6.0) if RANK == 0 else np.zeros(6)
        a.Bcast(y, 0)
        try:
            if req is not None:
                req.Wait()
        except DualmpiError as exc:
            errors.append(str(exc))
        z = np.full(3, RANK)
        a.Allreduce(np.full(3, RANK), z, MPI.MAX)
        ok = np.array_equal(y, np.arange(6.0)) and len(errors) == (1 if RANK == 1 else
                                                                   len(errors)) and \
            np.array_equal(z, np.full(3, SIZE - 1))
    finally:
        a.Free()
        b.Free()
    assert agree(ok), f"rank {RANK}: {y}, {errors}, {z}"


class _ReadyExchange:
    """A compiled neighbourhood exchange whose posted messages are all done (``posted`` empty):
    the interface ``nonblocking.block`` reads (``neighbor._CExchange``'s)."""

    handed, done = True, False

    def posted(self):
        return [], []

    def handed_back(self, objs, at):
        pass


@pytest.mark.parametrize("kind", ["plan", "exchange"])
def test_a_request_ready_for_a_step_is_not_left_behind_a_wait_on_another(kind):
    """``nonblocking.block`` waits on the posted messages of every request in flight; a plan
    request with nothing posted (its rounds ended in its start in C, as a v-variant's data part
    started from a finish may), or a compiled neighbourhood exchange whose messages are all
    done, waits only for a step, so ``block`` returns at once for the caller to poll, instead of
    waiting on another request, whose messages may come from ranks that finished the waited
    call and left (a hang before).  Here the other request is a receive that only a timer
    thread completes, 10 s later: ``block`` must return before it."""
    import threading

    from dualmpi.engine import nonblocking

    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        pytest.skip("the timer thread calls MPI")
    if NETS:
        net, made = _net(0), None
    elif SIZE & (SIZE - 1) == 0:  # (a rank count this file has no network for: Q_n)
        net = made = dualmpi.Comm(WORLD, f"hypercube:n={SIZE.bit_length() - 1}", watchdog=60)
    else:
        pytest.skip(f"no network of {SIZE} ranks here")
    progress, own = net._progress(), WORLD.Dup()
    stuck = nonblocking.PlanRequest()
    box = np.zeros(1, np.int64)
    stuck.reqs, stuck.stage, stuck.done = [own.Irecv(box, RANK, 7)], nonblocking._MODE, False
    if kind == "plan":
        ready = nonblocking.PlanRequest()
        ready.reqs, ready.stage, ready.done = [], nonblocking._START, False
    else:
        ready = _ReadyExchange()
    fired = []
    timer = threading.Timer(10, lambda: fired.append(1) or own.Send(box, RANK, 7))
    progress.active += [stuck, ready]
    try:
        timer.start()
        got = nonblocking.block()
        late = bool(fired)
    finally:
        progress.active.remove(stuck)
        progress.active.remove(ready)
        timer.cancel()
        timer.join()
        if not fired:  # (the receive completed here instead)
            own.Send(box, RANK, 7)
        stuck.reqs[0].Wait()
        own.Free()
        if made is not None:
            made.Free()
    assert agree(got == -1 and not late), (got, late)
