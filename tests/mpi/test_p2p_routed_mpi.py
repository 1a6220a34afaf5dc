"""MPI tests of point-to-point to any rank, routed over the links (issue 24, item 1).

Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi/test_p2p_routed_mpi.py``
at N = 1, 2, 4, 8, 32 or 64.  Every rank sends to every rank (D_2 on 8 ranks, D_3 on 32, MC(2,1)
with 8 nodes per rank and with one on 64, hypercubes at 1, 2, 4): the bytes are MPI.COMM_WORLD's
on the same buffers and ``stats()`` counts exactly the hops of the route between the pair's
nodes (the route ``dualmpi route`` prints).  Then MPI's guarantees: no overtaking with many
messages in flight, ANY_SOURCE, a rank on the route that computes or waits in a collective while
a message must pass it, synchronous sends, probes, statuses, the object forms, requests in
``MPI.Request.Waitall``, and a ``Free`` that waits for the messages in flight.  Every rank
finishes its communication, then the ranks agree on the verdict before asserting.
"""

import os
import pickle
import time

import numpy as np
import pytest

import dualmpi
from dualmpi.commands.route import describe_route
from dualmpi.engine.router import node_pair
from dualmpi.errors import DualmpiError
from dualmpi.topology import from_spec
from dualmpi.topology.faults import FaultyTopology

MPI = pytest.importorskip("mpi4py.MPI")

WORLD = MPI.COMM_WORLD
SIZE = WORLD.Get_size()
RANK = WORLD.Get_rank()

#: ``(spec, nodes per rank)`` by rank count.
NETWORKS = {
    1: [("hypercube:n=1", 2)],
    2: [("hypercube:n=1", 1), ("hypercube:n=2", 2)],
    4: [("hypercube:n=2", 1), ("dualcube:r=2", 2)],
    8: [("dualcube:r=2", 1), ("metacube:k=2,m=1", 8), ("dualcube:r=2 without 0-4", 1)],
    32: [("dualcube:r=3", 1), ("metacube:k=2,m=1", 2)],
    64: [("metacube:k=2,m=1", 1)],
}
SLOTS = ["net0", "net1"]
#: Whether a rank has a progress thread (MPI_THREAD_MULTIPLE): forwarding while it is busy.
THREADED = MPI.Query_thread() >= MPI.THREAD_MULTIPLE

_NETS = {}


def _agree(ok):
    """Return True when ``ok`` holds on every rank (collective).

    A buffer ``Allreduce``: mpi4py's object ``allreduce`` (like its ``reduce``, ``bcast``
    and ``scatter``) keeps the GIL while it waits, so this rank's router thread could not
    forward the messages a rank still waiting for one needs (docs/p2p.md).
    """
    out = np.zeros(1, np.int64)
    WORLD.Allreduce(np.array([1 if ok else 0], np.int64), out, op=MPI.MIN)
    return bool(out[0])


def _sum(value):
    """Return the sum of ``value`` over the ranks (a buffer Allreduce, see :func:`_agree`)."""
    out = np.zeros(1, np.int64)
    WORLD.Allreduce(np.array([value], np.int64), out, op=MPI.SUM)
    return int(out[0])


def _net(slot):
    """Return the (cached) ``dualmpi.Comm`` of ``slot`` at this rank count (or skip)."""
    nets = NETWORKS.get(SIZE, [])
    i = int(slot[-1])
    if i >= len(nets):
        pytest.skip(f"no {slot} network at {SIZE} rank(s)")
    if nets[i] not in _NETS:
        spec, q = nets[i]
        _NETS[nets[i]] = dualmpi.Comm(WORLD, _topology(spec), nodes_per_rank=q, watchdog=90)
    return _NETS[nets[i]]


def _topology(spec):
    """A spec, or ``"<spec> without u-v"``: the network with link u-v failed (routes detour)."""
    if " without " not in spec:
        return spec
    base, link = spec.split(" without ")
    u, v = (int(x) for x in link.split("-"))
    return FaultyTopology(from_spec(base), failed_links=[(u, v)])


@pytest.fixture(scope="module", autouse=True)
def _free_nets():
    """Free every cached communicator at the end of the module (same order on every rank)."""
    yield
    for key in sorted(_NETS):
        _NETS.pop(key).Free()


def _attempt(body):
    """Run ``body()`` (this rank's communication); return its problems, an error as one."""
    try:
        return list(body() or [])
    except Exception as exc:  # noqa: BLE001 - reported through the agreement
        return [f"{type(exc).__name__}: {exc}"]


def _payload(src, dst, n, salt=0):
    """Return ``n`` reproducible bytes of the message ``src -> dst``."""
    return np.random.default_rng([src, dst, n, salt]).integers(0, 256, n, dtype=np.uint8)


def _route(net, a, b):
    """The node path of messages ``a -> b``: the documented pair's route, as dualmpi route prints it."""
    u, v = node_pair(net.topology, net.q, a, b)
    return describe_route(net.topology, u, v)["path"]


def _expected_links(net, pairs, nbytes):
    """``{(u, v): (messages, bytes)}`` of this rank's nodes for one message per pair."""
    want = {}
    for a, b in pairs:
        path = _route(net, a, b)
        for u, v in zip(path, path[1:]):
            if u // net.q == RANK:
                m, n = want.get((u, v), (0, 0))
                want[(u, v)] = (m + 1, n + nbytes)
    return want


def _far(net, a):
    """Return the rank whose messages from ``a`` cross the most ranks (ties: the lowest)."""
    best = max(range(SIZE), key=lambda b: (len(net._router.route(a, b).via), -b))
    return best


def _rounds_against_world(net, round_of, rounds):
    """Run ``round_of(comm, k)`` once on MPI.COMM_WORLD, then ``rounds`` times on ``net``
    (every rank sends to :func:`_far` and receives from the ranks whose farthest it is);
    return the first rounds whose result differs from the world's, after it."""

    def body():
        dest = _far(net, RANK)
        src = [s for s in range(SIZE) if _far(net, s) == RANK]
        want = round_of(WORLD, 0, dest, src)
        problems = [(k, g) for k in range(rounds)
                    if (g := round_of(net, k, dest, src)) != want]
        return [("MPI", want)] + problems[:3] if problems else []

    return _attempt(body)


# -- every pair ----------------------------------------------------------------------------------


@pytest.mark.mpi
@pytest.mark.parametrize("size", [1, 1000, 70000])
@pytest.mark.parametrize("slot", SLOTS + ["net2"])
def test_every_pair_gets_its_bytes_over_the_route(slot, size):
    """Irecv from every rank, Send to every rank: MPI's bytes, and stats() counts the routes
    (on D_2 with link 0-4 failed: the detours)."""
    net = _net(slot)

    def body():
        net.reset_stats()
        WORLD.Barrier()  # no rank forwards this test's messages before it counts from zero
        got = {s: np.zeros(size, np.uint8) for s in range(SIZE)}
        reqs = [net.Irecv(got[s], s, 7) for s in range(SIZE)]
        for d in range(SIZE):
            net.Send(_payload(RANK, d, size), d, 7)
        MPI.Request.Waitall(reqs)
        ref = {s: np.zeros(size, np.uint8) for s in range(SIZE)}
        wreqs = [WORLD.Irecv(ref[s], s, 7) for s in range(SIZE)]
        for d in range(SIZE):
            WORLD.Send(_payload(RANK, d, size), d, 7)
        MPI.Request.Waitall(wreqs)
        problems = [s for s in range(SIZE)
                    if not np.array_equal(got[s], ref[s])
                    or not np.array_equal(got[s], _payload(s, RANK, size))]
        want = _expected_links(net, [(a, b) for a in range(SIZE) for b in range(SIZE)], size)
        st = net.stats()
        if st["links"] != want:
            problems.append(("links", st["links"], want))
        return problems

    problems = _attempt(body)
    hops = sum(len(_route(net, a, b)) - 1 for a in range(SIZE) for b in range(SIZE))
    total = _sum(net.stats()["messages"])
    assert _agree(not problems and total == hops), (problems, total, hops)


@pytest.mark.mpi
@pytest.mark.parametrize("slot", SLOTS)
def test_blocking_recv_in_order_of_sources(slot):
    """Isend to every rank, then a blocking Recv from each source in turn (status checked)."""
    net = _net(slot)

    def body():
        sends = [net.Isend(_payload(RANK, d, 24, 1), d, d % 5) for d in range(SIZE)]
        problems = []
        for s in range(SIZE):
            buf, st = np.zeros(3, np.float64), MPI.Status()
            net.Recv(buf, s, MPI.ANY_TAG, st)
            if not np.array_equal(buf.view(np.uint8), _payload(s, RANK, 24, 1)) or \
                    (st.source, st.tag, st.Get_count(MPI.DOUBLE), st.Get_count(MPI.BYTE),
                     st.Get_elements(MPI.DOUBLE), st.error) != (s, RANK % 5, 3, 24, 3, 0):
                problems.append((s, st.source, st.tag, st.Get_count(MPI.BYTE)))
        MPI.Request.Waitall(sends)
        return problems

    problems = _attempt(body)
    assert _agree(not problems), problems


# -- MPI's ordering ------------------------------------------------------------------------------


@pytest.mark.mpi
@pytest.mark.parametrize("slot", SLOTS)
def test_no_overtaking_with_many_messages_in_flight(slot):
    """200 tagged messages (small and 64 KiB ones mixed) to the farthest rank, Isend all at
    once: ANY_TAG receives see them in the order sent, and ANY_SOURCE ones per sender."""
    net = _net(slot)
    count = 200
    dest = _far(net, RANK)
    sources = [s for s in range(SIZE) if _far(net, s) == RANK]

    def message(i, src):
        n = 65536 if i % 17 == 3 else 8 + i % 5
        out = np.full(n, i % 251, np.uint8)
        out[:4] = np.frombuffer(np.int32(i).tobytes(), np.uint8)
        out[4:8] = np.frombuffer(np.int32(src).tobytes(), np.uint8)
        return out

    def body():
        sends = [net.Isend(message(i, RANK), dest, i % 7) for i in range(count)]
        problems, seen = [], {s: -1 for s in sources}
        buf, st = np.zeros(65536, np.uint8), MPI.Status()
        for _ in range(count * len(sources)):
            if len(sources) == 1:
                net.Recv(buf, sources[0], MPI.ANY_TAG, st)
            else:
                net.Recv(buf, MPI.ANY_SOURCE, MPI.ANY_TAG, st)
            i, src = int(buf[:4].view(np.int32)[0]), int(buf[4:8].view(np.int32)[0])
            n = st.Get_count(MPI.BYTE)
            if src != st.source or i != seen.get(src, -2) + 1 or st.tag != i % 7 or \
                    not np.array_equal(buf[:n], message(i, src)):
                problems.append((src, st.source, i, seen.get(src), st.tag, n))
            seen[src] = i
        MPI.Request.Waitall(sends)
        return problems[:5]

    problems = _attempt(body)
    assert _agree(not problems), problems


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("slot", SLOTS)
def test_posted_receives_match_in_order(slot):
    """Irecv(ANY_TAG), Irecv(tag 2), Irecv(tag 5), Irecv(ANY_TAG) from one source that sends
    tags 2, 5, 2, 5: each message goes to the earliest posted receive that matches it, as
    MPI.COMM_WORLD matches the same program, in every one of many rounds (the receives are
    posted while the router's progress takes messages: a race that once gave the first
    receive the second message).  A wrong match completes every receive with the wrong
    message, so the rounds never hang on it."""

    def round_of(comm, k, dest, src):
        sends = [comm.Isend(np.full(4, 10 * k + j, np.int32), dest, tag) for j, tag in
                 enumerate((2, 5, 2, 5))]
        got = []
        for s in src:
            bufs = [np.zeros(4, np.int32) for _ in range(4)]
            sts = [MPI.Status() for _ in range(4)]
            reqs = [comm.Irecv(b, s, t) for b, t in zip(bufs, (MPI.ANY_TAG, 2, 5, MPI.ANY_TAG))]
            MPI.Request.Waitall(reqs, sts)
            got.append((s, [int(b[0]) - 10 * k for b in bufs], [st.tag for st in sts]))
        MPI.Request.Waitall(sends)
        WORLD.Barrier()  # (the rounds start together: messages arrive while receives post)
        return got

    problems = _rounds_against_world(_net(slot), round_of, 3000 if SIZE <= 2 else 5)
    assert _agree(not problems), problems


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("slot", SLOTS)
def test_a_probe_never_sees_a_message_a_posted_receive_takes(slot):
    """With an Irecv(ANY_TAG) posted, Iprobe(tag 2) never reports the one message (tag 2)
    that the receive takes when it arrives, as on MPI.COMM_WORLD, in every one of many
    rounds; then Improbe finds nothing either."""

    def round_of(comm, k, dest, src):
        reqs = [comm.Irecv(np.zeros(1, np.int32), s, MPI.ANY_TAG) for s in src]
        req = comm.Isend(np.full(1, k, np.int32), dest, 2)
        seen = 0
        while not MPI.Request.Testall(reqs):
            seen += sum(bool(comm.Iprobe(s, 2)) for s in src)
        stolen = sum(comm.Improbe(s, 2) is not None for s in src)
        req.Wait()
        WORLD.Barrier()  # (no round's message is in flight when the next one posts)
        return seen, stolen

    problems = _rounds_against_world(_net(slot), round_of, 200 if SIZE <= 2 else 5)
    assert _agree(not problems), problems


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("slot", SLOTS)
def test_any_source_master_worker(slot):
    """A task farm: rank 0 hands out 6 tasks per worker, one at a time, and takes each
    result with ANY_SOURCE/ANY_TAG (status.source names the worker); the results are the
    tasks' squares and each worker's count is what it was sent."""
    net = _net(slot)
    tasks = list(range(6 * (SIZE - 1)))
    stop = 99

    def body():
        problems = []
        if RANK == 0:
            todo, results, given = list(tasks), {}, {w: 0 for w in range(1, SIZE)}
            for w in range(1, SIZE):
                net.send(todo.pop(), w, 1)
                given[w] += 1
            while len(results) < len(tasks):
                st = MPI.Status()
                task, value = net.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st)
                if st.tag != 2 or value != task * task or st.Get_count(MPI.BYTE) <= 0:
                    problems.append((st.source, st.tag, task, value))
                results[task] = (value, st.source)
                if todo:
                    net.send(todo.pop(), st.source, 1)
                    given[st.source] += 1
            for w in range(1, SIZE):
                net.send(None, w, stop)
            done = {w: sum(1 for _, src in results.values() if src == w) for w in given}
            if done != given or sorted(results) != tasks:
                problems.append(("counts", done, given))
        else:
            while True:
                st = MPI.Status()
                task = net.recv(source=0, tag=MPI.ANY_TAG, status=st)
                if st.tag == stop:
                    break
                net.send((task, task * task), 0, 2)
        return problems

    problems = _attempt(body)
    assert _agree(not problems), problems


# -- progress while the ranks in between do something else ---------------------------------------


def _middle_pair(net):
    """Return ``(a, b, via)``: the pair of ranks whose route crosses the most other ranks."""
    router = net._router
    best = max(((a, b) for a in range(SIZE) for b in range(SIZE)),
               key=lambda p: (len(router.route(*p).via), -p[0], -p[1]))
    return best[0], best[1], router.route(*best).via


@pytest.mark.mpi(min_size=4)
@pytest.mark.parametrize("busy", ["sleep", "loop"])
@pytest.mark.parametrize("slot", SLOTS)
def test_a_computing_rank_on_the_route_forwards(slot, busy):
    """The ranks in the middle of a route compute for 2 s before their next MPI call; the
    message (1 MiB) still arrives, long before they are done."""
    net = _net(slot)
    a, b, via = _middle_pair(net)
    if not via:
        pytest.skip("no route crosses another rank")
    if not THREADED:
        pytest.skip("no progress thread (MPI_THREAD_MULTIPLE missing): forwarding needs calls")
    data = _payload(a, b, 1 << 20)
    WORLD.Barrier()

    def body():
        if RANK in via:
            start = time.monotonic()
            if busy == "sleep":
                time.sleep(2.0)
            else:
                x = 0
                while time.monotonic() - start < 2.0:
                    x += 1
            return []
        if RANK == a:
            net.Send(data, b, 3)
        elif RANK == b:
            start = time.monotonic()
            got = np.zeros(data.size, np.uint8)
            net.Recv(got, a, 3)
            took = time.monotonic() - start
            if not np.array_equal(got, data) or took > 1.5:
                return [("took", took)]
        return []

    problems = _attempt(body)
    assert _agree(not problems), (a, b, via, problems)


@pytest.mark.mpi(min_size=4)
@pytest.mark.parametrize("slot", SLOTS)
def test_a_rank_waiting_in_a_collective_forwards(slot):
    """The ranks in the middle enter a dualmpi Barrier first; the routed message must pass
    them before the sender and receiver join it (and then a user Recv in the middle)."""
    net = _net(slot)
    a, b, via = _middle_pair(net)
    if not via:
        pytest.skip("no route crosses another rank")
    if not THREADED:
        pytest.skip("no progress thread (MPI_THREAD_MULTIPLE missing): forwarding needs calls")
    data = _payload(a, b, 100000, 2)
    m = via[0]

    def body():
        problems = []
        if RANK in via:
            net.Barrier()
        elif RANK == a:
            net.Send(data, b, 4)
            net.Barrier()
        elif RANK == b:
            got = np.zeros(data.size, np.uint8)
            net.Recv(got, a, 4)
            if not np.array_equal(got, data):
                problems.append("barrier: wrong bytes")
            net.Barrier()
        else:
            net.Barrier()
        # now the first rank in the middle waits in a Recv for b's answer, which b sends only
        # once a's second message has passed through that very rank
        if RANK == m:
            ans = np.zeros(1, np.int64)
            net.Recv(ans, b, 5)
            if ans[0] != 42:
                problems.append(("answer", ans[0]))
        elif RANK == a:
            net.Send(data[:1000], b, 6)
        elif RANK == b:
            got = np.zeros(1000, np.uint8)
            net.Recv(got, a, 6)
            net.Send(np.array([42 if np.array_equal(got, data[:1000]) else 0]), m, 5)
        return problems

    problems = _attempt(body)
    assert _agree(not problems), (a, b, via, problems)


# -- the other calls -----------------------------------------------------------------------------


@pytest.mark.mpi
@pytest.mark.parametrize("slot", SLOTS)
def test_sendrecv_ring_matches_mpi(slot):
    """Sendrecv and Sendrecv_replace around the ring of ranks equal MPI.COMM_WORLD's."""
    net = _net(slot)

    def body():
        right, left = (RANK + 1) % SIZE, (RANK - 1) % SIZE
        send = np.arange(5, dtype=np.float64) + RANK
        got, ref = np.zeros(5), np.zeros(5)
        st, wst = MPI.Status(), MPI.Status()
        net.Sendrecv(send, right, 11, got, left, 11, st)
        WORLD.Sendrecv(send, right, 11, ref, left, 11, wst)
        mine, theirs = send.copy(), send.copy()
        net.Sendrecv_replace(mine, left, 12, right, 12)
        WORLD.Sendrecv_replace(theirs, left, 12, right, 12)
        problems = []
        if not (np.array_equal(got, ref) and np.array_equal(mine, theirs)):
            problems.append(("data", got, ref, mine, theirs))
        if (st.source, st.tag, st.Get_count(MPI.DOUBLE)) != \
                (wst.source, wst.tag, wst.Get_count(MPI.DOUBLE)):
            problems.append(("status", st.source, st.tag, wst.source, wst.tag))
        return problems

    problems = _attempt(body)
    assert _agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("slot", SLOTS)
def test_object_forms_match_mpi(slot):
    """send/recv, isend/irecv, sendrecv, ssend/issend, mprobe/improbe with objects."""
    net = _net(slot)
    right, left = (RANK + 1) % SIZE, (RANK - 1) % SIZE

    def obj(src, k):
        return {"from": src, "k": k, "data": list(range(src + k)), "arr": np.arange(src + 3.0)}

    def same(x, y):
        return pickle.dumps(x) == pickle.dumps(y)

    def body():
        problems = []
        net.send(obj(RANK, 0), right, 1)
        got = net.recv(None, left, 1)
        req = net.irecv(source=MPI.ANY_SOURCE, tag=2)
        sreq = net.isend(obj(RANK, 1), right, 2)
        got2 = req.wait()
        sreq.wait()
        got3 = net.sendrecv(obj(RANK, 2), left, 3, None, right, 3)
        sreq = net.issend(obj(RANK, 3), right, 4)
        st = MPI.Status()
        msg = net.mprobe(left, 4, st)
        got4 = msg.recv()
        sreq.wait()
        net.isend(obj(RANK, 4), right, 5)
        msg = None
        while msg is None:
            msg = net.improbe(left, 5)
        got5 = msg.recv()
        req = net.irecv(source=left, tag=6)  # posted first: the ring of ssends completes
        net.ssend(obj(RANK, 5), right, 6)
        got6 = req.wait()
        ref = [WORLD.sendrecv(obj(RANK, k), right, 20 + k, None, left, 20 + k)
               for k in (0, 1, 3, 4, 5)]
        ref.insert(2, WORLD.sendrecv(obj(RANK, 2), left, 23, None, right, 23))
        for k, (mine, theirs) in enumerate(zip([got, got2, got3, got4, got5, got6], ref)):
            if not same(mine, theirs):
                problems.append((k, mine, theirs))
        if (st.source, st.tag) != (left, 4):
            problems.append(("status", st.source, st.tag))
        return problems

    problems = _attempt(body)
    assert _agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("slot", SLOTS)
def test_a_one_link_isend_is_waited_for_by_its_wait(slot, monkeypatch):
    """``isend(obj, ...).wait()`` to a rank one link away (a direct MPI send the router tracks)
    waits for that send's MPI request itself (``Router._wait_direct``) instead of for the
    progress thread's next test of it: with those tests taken out, every wait still returns
    and the objects arrive as MPI's do (without ``_wait_direct`` the waits would hang)."""
    net = _net(slot)
    router = net._router
    monkeypatch.setattr(type(router), "_test_direct_sends", lambda self: False)
    near = [p for p in range(SIZE) if p != RANK and router.route(RANK, p).direct]

    def body():
        reqs = [net.isend({"from": RANK, "to": p, "pad": "x" * p}, p, 31) for p in near]
        got = [net.recv(None, p, 31) for p in near]
        for req in reqs:
            req.wait()
        want = [WORLD.sendrecv({"from": RANK, "to": p, "pad": "x" * p}, p, 32, None, p, 32)
                for p in near]
        return [] if got == want else [("got", got, "want", want)]

    problems = _attempt(body)
    assert _agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("slot", SLOTS)
def test_probe_and_mprobe_match_mpi(slot):
    """Probe/Iprobe report the message (source, tag, count) as MPI does; Mprobe/Improbe
    match it so that only their Message receives it."""
    net = _net(slot)
    dest, src = _far(net, RANK), [s for s in range(SIZE) if _far(net, s) == RANK]

    def body():
        problems = []
        sends = [net.Isend(np.arange(6, dtype=np.int32) + RANK, dest, 8),
                 net.Isend(np.arange(3, dtype=np.int32) - RANK, dest, 9)]
        wsends = [WORLD.Isend(np.arange(6, dtype=np.int32) + RANK, dest, 8),
                  WORLD.Isend(np.arange(3, dtype=np.int32) - RANK, dest, 9)]
        for s in src:
            st, wst = MPI.Status(), MPI.Status()
            net.Probe(s, 8, st)
            WORLD.Probe(s, 8, wst)
            if (st.source, st.tag, st.Get_count(MPI.INT32_T)) != \
                    (wst.source, wst.tag, wst.Get_count(MPI.INT32_T)):
                problems.append(("probe", st.source, st.tag, st.Get_count(MPI.INT32_T)))
            while not net.Iprobe(s, 9, st):
                pass
            if (st.source, st.tag, st.Get_count(MPI.INT32_T)) != (s, 9, 3):
                problems.append(("iprobe", st.source, st.tag))
            msg = net.Mprobe(s, 9, st)
            other = net.Improbe(s, 9)  # matched already: no other receive sees it
            if other is not None:
                problems.append("improbe saw a matched message")
            got = np.zeros(3, np.int32)
            msg.Recv(got)
            msg2 = None
            while msg2 is None:
                msg2 = net.Improbe(s, MPI.ANY_TAG, st)
            got2 = np.zeros(6, np.int32)
            msg2.Recv(got2)
            ref, ref2 = np.zeros(3, np.int32), np.zeros(6, np.int32)
            WORLD.Mprobe(s, 9).Recv(ref)
            WORLD.Recv(ref2, s, 8)
            if not (np.array_equal(got, ref) and np.array_equal(got2, ref2)) or st.tag != 8:
                problems.append(("mprobe", got, ref, got2, ref2, st.tag))
        MPI.Request.Waitall(sends + wsends)
        return problems

    problems = _attempt(body)
    assert _agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("slot", SLOTS)
def test_proc_null_as_mpi(slot):
    """MPI.PROC_NULL: sends do nothing, receives and probes return MPI's empty status."""
    net = _net(slot)

    def body():
        problems = []
        for comm in (net, WORLD):
            buf, st = np.full(3, 7.0), MPI.Status()
            comm.Send(np.zeros(3), MPI.PROC_NULL, 1)
            comm.Recv(buf, MPI.PROC_NULL, 1, st)
            MPI.Request.Waitall([comm.Isend(np.zeros(3), MPI.PROC_NULL),
                                 comm.Irecv(buf, MPI.PROC_NULL)])
            comm.Sendrecv(np.zeros(3), MPI.PROC_NULL, 0, buf, MPI.PROC_NULL, 0)
            flag = comm.Iprobe(MPI.PROC_NULL)
            problems.append((buf.tolist(), st.source, st.tag, st.Get_count(MPI.BYTE), flag,
                             comm.recv(None, MPI.PROC_NULL)))
        return [] if problems[0] == problems[1] else [problems]

    problems = _attempt(body)
    assert _agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("slot", SLOTS)
def test_derived_datatypes_are_packed(slot):
    """A vector datatype sent to the farthest rank, received into a strided one."""
    net = _net(slot)
    dest, src = _far(net, RANK), [s for s in range(SIZE) if _far(net, s) == RANK]
    vec = MPI.DOUBLE.Create_vector(4, 1, 3).Commit()

    def body():
        send = np.arange(12, dtype=np.float64) + 100 * RANK
        sends = [net.Isend([send, 1, vec], dest, 3), WORLD.Isend([send, 1, vec], dest, 30)]
        problems = []
        for s in src:
            got, ref = np.full(12, -1.0), np.full(12, -1.0)
            st, wst = MPI.Status(), MPI.Status()
            net.Recv([got, 1, vec], s, 3, st)
            WORLD.Recv([ref, 1, vec], s, 30, wst)
            mine = (st.Get_elements(vec), st.Get_count(vec), st.Get_count(MPI.DOUBLE))
            theirs = (wst.Get_elements(vec), wst.Get_count(vec), wst.Get_count(MPI.DOUBLE))
            if not np.array_equal(got, ref) or mine != theirs:
                problems.append((s, got, ref, mine, theirs))
        MPI.Request.Waitall(sends)
        return problems

    problems = _attempt(body)
    vec.Free()
    assert _agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("slot", SLOTS)
def test_a_buffer_too_small_is_refused(slot):
    """A message longer than the receive buffer: a DualmpiError that is MPI's ERR_TRUNCATE,
    the message consumed; the communicator keeps working (routed and direct, 1 MiB)."""
    net = _net(slot)
    dest, src = _far(net, RANK), [s for s in range(SIZE) if _far(net, s) == RANK]

    def body():
        sends = [net.Isend(np.zeros(1 << 17), dest, 13), net.Isend(np.arange(2.0), dest, 14)]
        problems = []
        for s in src:
            try:
                net.Recv(np.zeros(16), s, 13)
                problems.append("no error")
            except DualmpiError as exc:
                if not isinstance(exc, MPI.Exception) or \
                        exc.Get_error_class() != MPI.ERR_TRUNCATE or \
                        f"rank {RANK}: receive buffer too small: rank {s} sent 1048576 bytes, " \
                        "the buffer has 128" not in str(exc):
                    problems.append(str(exc))
            got = np.zeros(2)
            net.Recv(got, s, 14)
            if got.tolist() != [0.0, 1.0]:
                problems.append(("next message", got))
        MPI.Request.Waitall(sends)
        return problems

    problems = _attempt(body)
    assert _agree(not problems), problems


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("slot", SLOTS)
def test_ssend_completes_only_once_matched(slot):
    """Issend to the farthest rank is not complete while the receiver has not received
    (it waits in MPI.COMM_WORLD's barrier); after the receive, it completes."""
    net = _net(slot)
    dest, src = _far(net, RANK), [s for s in range(SIZE) if _far(net, s) == RANK]

    def body():
        req = net.Issend(np.arange(4.0), dest, 21)
        time.sleep(0.2)
        early = req.Test()
        WORLD.Barrier()
        for s in src:
            net.Recv(np.zeros(4), s, 21)
        req.Wait()
        return ["complete before the receive"] if early else []

    problems = _attempt(body)
    assert _agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("slot", SLOTS)
def test_a_posted_receive_can_be_cancelled(slot):
    """Irecv from every rank with a tag nobody sends, then Cancel: the waits return with a
    cancelled status (MPI.Request.Cancel, the router's cancel callback)."""
    net = _net(slot)

    def body():
        reqs = [net.Irecv(np.zeros(1), s, 88) for s in range(SIZE)]
        reqs.append(net.Irecv(np.zeros(1), MPI.ANY_SOURCE, 88))
        for r in reqs:
            r.Cancel()
        statuses = [MPI.Status() for _ in reqs]
        MPI.Request.Waitall(reqs, statuses)
        return [i for i, st in enumerate(statuses) if not st.Is_cancelled()]

    problems = _attempt(body)
    assert _agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("slot", SLOTS)
def test_requests_mix_with_mpi4py_and_dualmpi_requests(slot):
    """The requests go in MPI.Request.Waitall/Waitany/Testall lists with mpi4py's own, and
    in dualmpi.Request.Waitall with a nonblocking collective's."""
    net = _net(slot)
    dest, src = _far(net, RANK), [s for s in range(SIZE) if _far(net, s) == RANK]

    def body():
        problems = []
        got = {s: np.zeros(2, np.int64) for s in src}
        wgot = np.zeros(1, np.int64)
        reqs = [net.Irecv(got[s], s, 31) for s in src]
        reqs.append(WORLD.Irecv(wgot, (RANK - 1) % SIZE, 32))
        reqs += [net.Isend(np.array([RANK, 7]), dest, 31),
                 WORLD.Isend(np.array([RANK]), (RANK + 1) % SIZE, 32)]
        done = set()
        while len(done) < len(reqs):
            i = MPI.Request.Waitany(reqs)
            if i == MPI.UNDEFINED:
                break
            done.add(i)
        if any(got[s].tolist() != [s, 7] for s in src) or wgot[0] != (RANK - 1) % SIZE:
            problems.append(("waitany", got, wgot))
        total = np.zeros(1)
        coll = net.Iallreduce(np.ones(1), total)
        got2 = {s: np.zeros(1, np.int64) for s in src}
        reqs = [coll] + [net.Irecv(got2[s], s, 33) for s in src]
        reqs.append(net.Isend(np.array([RANK]), dest, 33))
        dualmpi.Request.Waitall(reqs)
        if total[0] != SIZE or any(got2[s][0] != s for s in src):
            problems.append(("dualmpi waitall", total, got2))
        reqs = [net.irecv(source=s, tag=34) for s in src] + [net.isend(("obj", RANK), dest, 34)]
        objs = dualmpi.Request.waitall(reqs)
        if objs != [("obj", s) for s in src] + [None]:
            problems.append(("object waitall", objs))
        return problems

    problems = _attempt(body)
    assert _agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("slot", SLOTS)
def test_free_waits_for_messages_in_flight(slot):
    """Receives posted, 64 KiB messages sent, then Free at once: the receives complete (the
    ranks kept forwarding until every message arrived)."""
    spec, q = (NETWORKS.get(SIZE, []) + [None, None])[int(slot[-1])] or (None, None)
    if spec is None:
        pytest.skip(f"no {slot} network at {SIZE} rank(s)")

    def body():
        net = dualmpi.Comm(WORLD, spec, nodes_per_rank=q, watchdog=90)
        dest = _far(net, RANK)
        src = [s for s in range(SIZE) if _far(net, s) == RANK]
        got = {s: np.zeros(65536, np.uint8) for s in src}
        reqs = [net.Irecv(got[s], s, 41) for s in src]
        net.Send(_payload(RANK, dest, 65536, 4), dest, 41)
        net.Free()
        problems = [s for s in src if not np.array_equal(got[s], _payload(s, RANK, 65536, 4))]
        if not all(r.Test() for r in reqs):
            problems.append("a receive not complete after Free")
        return problems

    problems = _attempt(body)
    assert _agree(not problems), problems


def _unthreaded(spec, q):
    """Return a ``dualmpi.Comm`` whose router has no progress thread."""
    old = os.environ.get("DUALMPI_PROGRESS_THREAD")
    os.environ["DUALMPI_PROGRESS_THREAD"] = "0"
    try:
        return dualmpi.Comm(WORLD, _topology(spec), nodes_per_rank=q, watchdog=90)
    finally:
        if old is None:
            del os.environ["DUALMPI_PROGRESS_THREAD"]
        else:
            os.environ["DUALMPI_PROGRESS_THREAD"] = old


@pytest.mark.mpi(min_size=4)
def test_without_a_progress_thread_free_still_forwards():
    """No progress thread: the ranks in the middle of a route call Free at once, the sender
    sends 1 s later; their drain keeps forwarding, so the receiver gets the message and
    every Free returns."""
    spec, q = NETWORKS[SIZE][0]
    net = _unthreaded(spec, q)
    a, b, via = _middle_pair(net)
    if not via:
        net.Free()
        pytest.skip("no route crosses another rank")

    def body():
        problems = []
        if RANK == a:
            time.sleep(1.0)
            net.Send(np.arange(3.0), b, 9)
        elif RANK == b:
            got = np.zeros(3)
            net.Recv(got, a, 9)
            if got.tolist() != [0.0, 1.0, 2.0]:
                problems.append(got)
        net.Free()
        return problems

    problems = _attempt(body)
    assert _agree(not problems), (a, b, via, problems)


@pytest.mark.mpi
def test_without_a_progress_thread_every_pair_still_arrives():
    """DUALMPI_PROGRESS_THREAD=0: progress only inside dualmpi calls, every pair delivered."""
    nets = NETWORKS.get(SIZE, [])
    if not nets:
        pytest.skip(f"no network at {SIZE} rank(s)")
    net = _unthreaded(*nets[0])

    def body():
        problems = [] if net._router.thread is None else ["a thread was started"]
        got = {s: np.zeros(100, np.uint8) for s in range(SIZE)}
        reqs = [net.Irecv(got[s], s, 51) for s in range(SIZE)]
        sends = [net.Isend(_payload(RANK, d, 100, 5), d, 51) for d in range(SIZE)]
        dualmpi.Request.Waitall(reqs + sends)
        problems += [s for s in range(SIZE) if not np.array_equal(got[s], _payload(s, RANK, 100, 5))]
        return problems

    problems = _attempt(body)
    net.Free()
    assert _agree(not problems), problems
