"""MPI tests of the one-link lane (dualmpi/engine/lane.c): one-hop messages sent in C.

Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi/test_p2p_lane_mpi.py``
at N = 2, 4, 8, 32 or 64 (one node per rank: the lane's case).  Two communicators of the same
network run the same program, one with its lane and one with the lane closed (the Python path,
:mod:`dualmpi.p2p`), and ``MPI.COMM_WORLD`` runs it too: ``Send``/``Recv``, ``Ssend``,
``Sendrecv``, statuses, ``ANY_SOURCE``/``ANY_TAG``, every size class and several dtypes between
every pair of neighbours.  The bytes, statuses and ``stats()`` must agree, and the lane must
have carried the calls.  Then what the lane refuses (truncation) and what it leaves to Python
(strided buffers, numpy ints, a posted receive).  The ranks agree on the verdict at the end.
"""

import numpy as np
import pytest

import dualmpi
from dualmpi import p2p
from dualmpi.engine import lane
from dualmpi.errors import DualmpiError

MPI = pytest.importorskip("mpi4py.MPI")

WORLD = MPI.COMM_WORLD
SIZE = WORLD.Get_size()
RANK = WORLD.Get_rank()

#: A network with one node per rank, by rank count.
SPECS = {2: "hypercube:n=1", 4: "hypercube:n=2", 8: "dualcube:r=2", 32: "dualcube:r=3",
         64: "metacube:k=2,m=1"}
#: message lengths (elements) with a dtype each: empty, eager and rendezvous messages
CASES = [(0, "uint8"), (1, "float64"), (1000, "int32"), (70000, "complex128")]

_NETS = {}


def _nets():
    """Return ``(with the lane, without it)``: two communicators of this rank count's network."""
    if SIZE not in SPECS:
        pytest.skip(f"no network with one node per rank at {SIZE} rank(s)")
    if not _NETS:
        _NETS["lane"] = dualmpi.Comm(WORLD, SPECS[SIZE], watchdog=90)
        _NETS["python"] = dualmpi.Comm(WORLD, SPECS[SIZE], watchdog=90)
        p2p.stop_lane(_NETS["python"])
    return _NETS["lane"], _NETS["python"]


@pytest.fixture(scope="module", autouse=True)
def _free_nets():
    yield
    for key in sorted(_NETS):
        _NETS.pop(key).Free()


def _agree(ok):
    out = np.zeros(1, np.int64)
    WORLD.Allreduce(np.array([1 if ok else 0], np.int64), out, op=MPI.MIN)
    return bool(out[0])


def _attempt(body):
    try:
        return list(body() or [])
    except Exception as exc:  # noqa: BLE001 - reported through the agreement
        return [f"{type(exc).__name__}: {exc}"]


def _pairs(net):
    """Every pair of ranks one link apart, in one order on every rank."""
    router = net._router
    return [(a, b) for a in range(SIZE) for b in range(a + 1, SIZE)
            if router.route(a, b).direct]


def _payload(src, dst, n, dtype, salt=0):
    rng = np.random.default_rng([src, dst, n, salt])
    return rng.integers(0, 200, n * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype)


def _program(comm, pairs, n, dtype):
    """One message each way per pair (Send/Recv, Ssend/Recv with a status, Sendrecv); return
    what arrived and the statuses, as comparable lists."""
    out = []
    for k, (a, b) in enumerate(pairs):
        if RANK not in (a, b):
            continue
        peer = b if RANK == a else a
        st = MPI.Status()
        got = np.zeros(n, dtype)
        if RANK == a:
            comm.Send(_payload(a, b, n, dtype), b, 3)
            comm.Recv(got, b, 3)
        else:
            comm.Recv(got, a, 3)
            comm.Send(_payload(b, a, n, dtype), a, 3)
        out.append(got.tobytes())
        got2 = np.zeros(n, dtype)
        if RANK == a:
            comm.Ssend(_payload(a, b, n, dtype, 1), b, 5 + k % 7)
            comm.Recv(got2, b, MPI.ANY_TAG, st)
        else:
            comm.Recv(got2, a, MPI.ANY_TAG, st)
            comm.Ssend(_payload(b, a, n, dtype, 1), a, 5 + k % 7)
        out.append((got2.tobytes(), st.Get_source(), st.Get_tag(), st.Get_count(MPI.BYTE),
                    st.Get_error()))
        got3 = np.zeros(n, dtype)
        st3 = MPI.Status()
        comm.Sendrecv(_payload(RANK, peer, n, dtype, 2), peer, 9, got3, peer, 9, st3)
        out.append((got3.tobytes(), st3.Get_source(), st3.Get_tag(), st3.Get_count(MPI.BYTE)))
    return out


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("n, dtype", CASES)
def test_lane_equals_python_path_and_mpi(n, dtype):
    """The same program on the lane, on the Python path and on MPI.COMM_WORLD: equal bytes and
    statuses; equal stats() on both networks; the lane carried the calls."""
    net, py = _nets()
    pairs = _pairs(net)

    def body():
        problems = []
        results, stats = {}, {}
        for name, comm in (("lane", net), ("python", py), ("mpi", WORLD)):
            if name != "mpi":
                comm.reset_stats()
            WORLD.Barrier()
            results[name] = _program(comm, pairs, n, dtype)
            if name != "mpi":
                st = comm.stats()
                stats[name] = (st["links"], st["p2p_messages"], st["p2p_bytes"], st["p2p_hops"])
        for name in ("lane", "python"):
            if results[name] != results["mpi"]:
                problems.append(f"{name}: results differ from MPI's")
        if stats["lane"] != stats["python"]:
            problems.append(("stats", stats["lane"], stats["python"]))
        if lane.reason() == "" and type(net._lane).__name__ != "Lane":
            problems.append(f"the lane was not built: {type(net._lane).__name__}")
        if type(py._lane).__name__ == "Lane":
            problems.append("the Python path used a lane")
        return problems

    problems = _attempt(body)
    assert _agree(not problems), problems


@pytest.mark.mpi(min_size=2)
def test_lane_is_built_where_mpicc_is():
    """Where the round loop compiles, so does the lane: CI must not test the Python path only
    while believing it tests the lane."""
    from dualmpi.engine import cloop

    net, _ = _nets()
    problems = []
    try:
        peer = 1 - RANK if RANK < 2 else None
        if peer is not None and net._router.route(RANK, peer).direct:
            net.Sendrecv(np.zeros(1), peer, 1, np.zeros(1), peer, 1)
        if cloop.mpicc() is not None and lane.load() is None:
            problems.append(f"mpicc is there but the lane did not build: {lane.reason()}")
    except Exception as exc:  # noqa: BLE001
        problems.append(repr(exc))
    assert _agree(not problems), problems


@pytest.mark.mpi(min_size=2)
def test_lane_any_source_where_every_rank_is_one_link_away():
    """ANY_SOURCE through the lane when every other rank is a neighbour (Q_1, Q_2), else
    through the router; either way MPI's sources and bytes."""
    net, _ = _nets()
    router = net._router

    def body():
        problems = []
        nbrs = [s for s in range(SIZE) if s != RANK and router.route(s, RANK).direct]
        # every rank sends to its neighbours, then receives from any source as many times
        sends = [net.Isend(_payload(RANK, d, 10, "int32"), d, 21) for d in nbrs]
        seen = []
        for _ in nbrs:
            st = MPI.Status()
            got = np.zeros(10, np.int32)
            net.Recv(got, MPI.ANY_SOURCE, 21, st)
            s = st.Get_source()
            seen.append(s)
            if not np.array_equal(got, _payload(s, RANK, 10, "int32")):
                problems.append(("bytes from", s))
        MPI.Request.Waitall(sends)
        if sorted(seen) != nbrs:
            problems.append(("sources", seen, nbrs))
        return problems

    problems = _attempt(body)
    assert _agree(not problems), problems


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("which", ["lane", "python"])
def test_truncation_through_the_lane(which):
    """A message longer than the buffer, over one link: the same ERR_TRUNCATE DualmpiError on
    both paths, the message consumed, the next one right."""
    nets = dict(zip(("lane", "python"), _nets()))
    net = nets[which]
    pairs = _pairs(net)

    def body():
        problems = []
        for a, b in pairs:
            if RANK == a:
                net.Send(np.arange(1 << 17, dtype=np.float64), b, 13)
                net.Send(np.arange(2.0), b, 14)
            elif RANK == b:
                try:
                    net.Recv(np.zeros(16), a, 13)
                    problems.append("no error")
                except DualmpiError as exc:
                    if not isinstance(exc, MPI.Exception) or \
                            exc.Get_error_class() != MPI.ERR_TRUNCATE or \
                            f"rank {RANK}: receive buffer too small: rank {a} sent 1048576 " \
                            "bytes, the buffer has 128" not in str(exc):
                        problems.append(str(exc))
                got = np.zeros(2)
                net.Recv(got, a, 14)
                if got.tolist() != [0.0, 1.0]:
                    problems.append(("next message", got))
        return problems

    problems = _attempt(body)
    assert _agree(not problems), problems


@pytest.mark.mpi(min_size=2)
def test_what_the_lane_leaves_to_python():
    """Fortran-ordered, strided and read-only buffers, numpy ints as ranks, a list buffer spec
    and a posted receive take the Python path: MPI's results and MPI's errors."""
    net, _ = _nets()
    pairs = _pairs(net)

    def body():
        problems = []
        for a, b in pairs:
            if RANK not in (a, b):
                continue
            peer = np.int64(b if RANK == a else a)
            # Fortran order: contiguous, not C-contiguous (mpi4py sends its memory as it lies)
            fortran = np.asfortranarray(np.arange(12.0).reshape(3, 4) + RANK)
            got = np.zeros((3, 4), order="F")
            ref = np.zeros((3, 4), order="F")
            for comm, into in ((net, got), (WORLD, ref)):
                if RANK == a:
                    comm.Send(fortran, peer, 2)
                    comm.Recv(into, peer, 2)
                else:
                    comm.Recv(into, peer, 2)
                    comm.Send(fortran, peer, 2)
            if not np.array_equal(got, ref) or not np.array_equal(got, fortran - RANK + peer):
                problems.append(("fortran", got, ref))
            # strided: refused by both, before anything is sent
            for comm in (net, WORLD):
                try:
                    comm.Send(np.arange(20.0)[::2], int(peer), 2)
                    problems.append((comm is net, "strided buffer sent"))
                except Exception as exc:  # noqa: BLE001
                    if "contiguous" not in str(exc):
                        problems.append(("strided", str(exc)))
            spec = np.zeros(4, np.int32)
            net.Sendrecv([np.full(4, RANK, np.int32), MPI.INT], int(peer), 4,
                         [spec, MPI.INT], int(peer), 4)
            if spec.tolist() != [int(peer)] * 4:
                problems.append(("list spec", spec))
            ro = np.zeros(3)
            ro.flags.writeable = False
            try:
                net.Recv(ro, int(peer), 99)
                problems.append("read-only buffer taken")
            except Exception as exc:  # noqa: BLE001 - the Python path's error, before waiting
                if "read-only" not in str(exc) and "writ" not in str(exc):
                    problems.append(("read-only", str(exc)))
            # a posted receive for tag 31: the blocking receive of tag 30 must not take its
            # message, and the two complete in MPI's order
            early = np.zeros(1)
            req = net.Irecv(early, int(peer), 31)
            late = np.zeros(1)
            if RANK == a:
                net.Send(np.array([31.0]), int(peer), 31)
                net.Send(np.array([30.0]), int(peer), 30)
                net.Recv(late, int(peer), 30)
            else:
                net.Send(np.array([31.0]), int(peer), 31)
                net.Send(np.array([30.0]), int(peer), 30)
                net.Recv(late, int(peer), 30)
            req.Wait()
            if (early[0], late[0]) != (31.0, 30.0):
                problems.append(("posted", early, late))
        return problems

    problems = _attempt(body)
    assert _agree(not problems), problems
