"""dualmpi.apps without MPI: the kernels on a threaded in-process communicator, the cost pricing."""

import doctest
import threading

import numpy as np
import pytest

from dualmpi import apps
from dualmpi.apps import cg, fft, record, sort, summa
from dualmpi.simulator import simulate
from dualmpi.topology import from_spec


class _World:
    """Shared state of R threads that play R ranks."""

    def __init__(self, size):
        self.size = size
        self.barrier = threading.Barrier(size, timeout=30)
        self.slots = [None] * size
        self.mail = {}
        self.cond = threading.Condition()


class _Done:
    def Wait(self):
        pass


class _Pending:
    def __init__(self, world, key, buf):
        self.world, self.key, self.buf = world, key, buf

    def Wait(self):
        with self.world.cond:
            assert self.world.cond.wait_for(lambda: self.world.mail.get(self.key), timeout=30)
            data = self.world.mail[self.key].pop(0)
        np.copyto(self.buf, data)


class ThreadComm:
    """mpi4py's buffer methods for one thread-rank; with ``topology``, p2p only along links."""

    def __init__(self, world, rank, topology=None, q=1):
        self.w, self.rank = world, rank
        if topology is not None:
            self.topology, self.q = from_spec(topology), q

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.w.size

    def _exchange(self, item):
        """Publish ``item``; return every rank's item."""
        self.w.slots[self.rank] = item
        self.w.barrier.wait()
        items = list(self.w.slots)
        self.w.barrier.wait()
        return items

    def Bcast(self, buf, root=0):
        np.copyto(buf, self._exchange(buf.copy())[root])

    def Allgather(self, send, recv):
        recv.reshape(self.w.size, -1)[...] = np.stack([a.ravel() for a in self._exchange(send.copy())])

    def Alltoall(self, send, recv):
        parts = self._exchange(send.reshape(self.w.size, -1).copy())
        recv.reshape(self.w.size, -1)[...] = np.stack([p[self.rank] for p in parts])

    def Alltoallv(self, send, recv):
        (sbuf, (sc, sd)), (rbuf, (rc, rd)) = send, recv
        every = self._exchange((sbuf.copy(), np.asarray(sc), np.asarray(sd)))
        for src, (buf, counts, displs) in enumerate(every):
            n = counts[self.rank]
            assert n == rc[src], "send and receive counts disagree"
            rbuf[rd[src]:rd[src] + n] = buf[displs[self.rank]:displs[self.rank] + n]

    def Allreduce(self, send, recv):
        recv[...] = sum(self._exchange(send.copy()))

    def _link(self, peer):
        if hasattr(self, "topology"):
            assert self.q == 1 and peer in self.topology.neighbors(self.rank), \
                f"p2p between non-neighbours {self.rank} and {peer}"

    def Isend(self, buf, dest, tag=0):
        self._link(dest)
        with self.w.cond:
            self.w.mail.setdefault((self.rank, dest, tag), []).append(np.array(buf, copy=True))
            self.w.cond.notify_all()
        return _Done()

    def Irecv(self, buf, source, tag=0):
        self._link(source)
        return _Pending(self.w, (source, self.rank, tag), buf)


def run_ranks(size, fn, topology=None, q=1, recorder=False):
    """Run ``fn(comm)`` on ``size`` thread-ranks; return the results in rank order."""
    world = _World(size)
    out, errors = [None] * size, []

    def body(r):
        try:
            comm = ThreadComm(world, r, topology, q)
            out[r] = fn(record.Recorder(comm) if recorder else comm)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)
            world.barrier.abort()

    threads = [threading.Thread(target=body, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    return out


@pytest.mark.parametrize("module", [record, fft, sort, summa, cg, apps])
def test_doctests(module):
    """Every docstring example of dualmpi.apps runs."""
    assert doctest.testmod(module).failed == 0


@pytest.mark.parametrize("ranks, n", [(1, 4), (2, 8), (4, 16), (8, 16)])
@pytest.mark.parametrize("back", [True, False])
def test_fft_equals_numpy_fft2(ranks, n, back):
    """The distributed FFT's blocks are numpy.fft.fft2's rows (or its transpose's)."""
    got = np.vstack(run_ranks(ranks, lambda c: fft.fft2(c, fft.make_input(n, ranks, c.Get_rank()),
                                                         transpose_back=back)))
    want = fft.reference(n, ranks)
    assert np.allclose(got, want if back else want.T, atol=1e-9)


@pytest.mark.parametrize("ranks, n", [(1, 1), (2, 4), (4, 64), (8, 512)])
def test_sample_sort_sorts_a_permutation(ranks, n):
    """The buckets in rank order are the sorted input, and no bucket is more than 2 N / R."""
    parts = run_ranks(ranks, lambda c: sort.sample_sort(c, sort.make_input(n, ranks, c.Get_rank())))
    keys = np.concatenate([sort.make_input(n, ranks, r) for r in range(ranks)])
    assert np.array_equal(np.concatenate(parts), np.sort(keys))
    assert max(p.size for p in parts) <= 2 * n // ranks


def test_sample_sort_with_many_equal_keys():
    """Keys from a tiny range (splitters repeat) still come out sorted and complete."""
    rng = np.random.default_rng(5)
    data = [rng.integers(0, 3, size=32, dtype=np.uint64) for _ in range(4)]
    parts = run_ranks(4, lambda c: sort.sample_sort(c, data[c.Get_rank()]))
    assert np.array_equal(np.concatenate(parts), np.sort(np.concatenate(data)))


def test_sample_sort_extreme_keys():
    """The largest 64-bit keys sort as unsigned (no wrap to negative)."""
    data = [np.array([2**64 - 1, 0, 2**63, 1], dtype=np.uint64) for _ in range(2)]
    parts = run_ranks(2, lambda c: sort.sample_sort(c, data[c.Get_rank()]))
    assert np.concatenate(parts).tolist() == sorted([0, 1, 2**63, 2**64 - 1] * 2)


@pytest.mark.parametrize("ranks, n", [(1, 3), (2, 6), (4, 16), (8, 24)])
def test_summa_equals_matmul(ranks, n):
    """1-D SUMMA gives A @ B."""
    got = np.vstack(run_ranks(ranks, lambda c: summa.summa(c, *summa.make_input(n, ranks,
                                                                                c.Get_rank()))))
    assert np.allclose(got, summa.reference(n, ranks))


@pytest.mark.parametrize("ranks, spec, q, halo", [
    (4, "hypercube:n=2", 1, "p2p"),            # Gray code 0 1 3 2
    (8, "dualcube:r=2", 1, "p2p"),             # Theorem 4.1's cycle
    (8, "metacube:k=1,m=2", 1, "alltoallv"),   # no Hamiltonian cycle in default_cycle
    (4, "dualcube:r=2", 2, "alltoallv"),       # several nodes per rank
    (4, None, 1, "p2p"),                       # a plain communicator: rank order
])
def test_cg_converges_like_the_serial_solver(ranks, spec, q, halo):
    """CG on block rows along the partition's path: the serial solver's iterations and x."""
    n = 16
    rhs = np.vstack([cg.make_rhs(n, ranks, i) for i in range(ranks)])
    x0, it0, res0 = cg.cg_serial(rhs)

    def solve(c):
        part = cg.partition(c)
        i = part.block(c.Get_rank())
        return (part, i) + cg.cg_solve(c, cg.make_rhs(n, ranks, i), part)

    out = run_ranks(ranks, solve, spec, q)
    part = out[0][0]
    assert part.halo == halo
    if spec is not None and halo == "p2p":  # halo partners are neighbours
        topo = from_spec(spec)
        assert all(b in topo.neighbors(a) for a, b in zip(part.path, part.path[1:]))
    x = np.vstack([x for _, _, x, _, _ in sorted(out, key=lambda o: o[1])])
    assert {o[3] for o in out} == {it0}
    assert np.allclose(x, x0, rtol=1e-10, atol=1e-12)
    assert abs(out[0][4] - res0) <= 1e-6 * np.linalg.norm(rhs)
    assert np.linalg.norm(cg.poisson_matvec(x, np.zeros(n), np.zeros(n)) - rhs) <= \
        1.01e-8 * np.linalg.norm(rhs)


def test_cg_forced_alltoallv_halo_same_iterations():
    """halo="alltoallv" on a network with a cycle: the same iterations as point to point."""
    n, ranks = 16, 4
    its = {}
    for halo in ("p2p", "alltoallv"):
        its[halo] = run_ranks(ranks, lambda c: cg.cg_solve(
            c, cg.make_rhs(n, ranks, cg.partition(c, halo).block(c.Get_rank())),
            cg.partition(c, halo))[1], "hypercube:n=2")
    assert its["p2p"] == its["alltoallv"]


@pytest.mark.parametrize("check, n, ranks", [
    (fft.check_size, 12, 8), (fft.check_size, 0, 1), (summa.check_size, 9, 2),
    (sort.check_size, 63, 8), (cg.check_size, 10, 4),
])
def test_sizes_refused(check, n, ranks):
    """Sizes that do not split over the ranks are refused with the kernel's name."""
    with pytest.raises(ValueError, match=f"N = {n}"):
        check(n, ranks)


def test_partition_refuses_forced_p2p_without_a_path():
    """halo="p2p" on a metacube (no cycle here) is an error, not a send over a non-link."""
    with pytest.raises(ValueError, match="no path of links"):
        run_ranks(2, lambda c: cg.partition(c, "p2p"), "metacube:k=1,m=1", 2)


def test_recorder_notes_each_kernel_call():
    """The recorder notes the sort's calls in order with their piece sizes (bytes)."""
    calls = run_ranks(4, lambda c: (sort.sample_sort(c, sort.make_input(64, 4, c.Get_rank())),
                                    c.calls)[1], recorder=True)
    kinds = [k for k, _, _ in calls[0]]
    assert kinds == ["allgather", "alltoall", "alltoallv"]
    assert calls[0][0][1] == 4 * 8 and calls[0][1][1] == 8  # 4 samples; one count per pair


@pytest.mark.parametrize("spec, q", [("dualcube:r=2", 1), ("metacube:k=2,m=1", 8),
                                     ("hypercube:n=5", 1)])
def test_model_time_prices_each_call_with_the_simulator(spec, q):
    """Each call costs its schedule's ts*t_s + tw*m*t_w + th*t_h at its node-level block."""
    topo = from_spec(spec)
    c = record.DEFAULT_CLOCK

    def formula(coll, m, root=0):
        k = simulate(topo, coll, root)["model"]
        return k["ts"] * c["ts"] + k["tw"] * m * c["tw"] + k["th"] * c["th"]

    ranks = topo.num_nodes // q
    calls = [("alltoall", 64 * q * q, None), ("bcast", 4096, 1), ("allgather", 8 * q, None)]
    total, parts = record.model_time(calls, topo, q)
    assert parts["alltoall"] == pytest.approx(formula("alltoall", 64))
    assert parts["bcast"] == pytest.approx(formula("bcast", 4096, q))
    assert parts["allgather"] == pytest.approx(formula("allgather", 8))
    assert total == pytest.approx(sum(parts.values()))
    v, _ = record.model_time([("alltoallv", 64 * q * q, None)], topo, q)
    counts = -(-8 * (2 * ranks + 2) // q)
    assert v == pytest.approx(formula("alltoall", 64) + formula("allgather", counts))


def test_model_time_merges_a_halo_exchange_into_one_step():
    """Consecutive sends are one step; a collective in between starts a new one."""
    topo = from_spec("hypercube:n=3")
    one = 2e-6 + 800e-9 + 5e-8
    t, parts = record.model_time([("send", 800, 1), ("send", 400, 2)], topo)
    assert t == pytest.approx(one)
    t2, _ = record.model_time([("send", 800, 1), ("allreduce", 8, None), ("send", 800, 1)], topo)
    assert t2 == pytest.approx(2 * one + record.model_time([("allreduce", 8, None)], topo)[0])
    with pytest.raises(ValueError, match="unknown call kind"):
        record.model_time([("gather", 1, None)], topo)


def test_hypercube_costs_less_than_the_dualcube_for_the_same_calls():
    """The same alltoall calls: D_3 (31 steps, 104 hops) costs more than Q_5 (80 hops)."""
    calls = [("alltoall", 1024, None)] * 2
    d3, _ = record.model_time(calls, from_spec("dualcube:r=3"))
    q5, _ = record.model_time(calls, from_spec("hypercube:n=5"))
    assert d3 > q5


def test_allreduce_priced_as_the_engine_runs_it():
    """An allreduce costs the chosen algorithm's steps (one hop each) and words of the vector."""
    topo = from_spec("dualcube:r=2")
    c = record.DEFAULT_CLOCK
    t, _ = record.model_time([("allreduce", 8, None)], topo)
    try:
        from dualmpi.collectives.allreduce import choose, costs
    except ImportError:  # before the engine's reductions: the allgather pattern, whole vector
        k = simulate(topo, "allgather")["model"]
        steps, words, hops = k["ts"], k["ts"], k["th"]
    else:
        table = costs(topo)
        steps, words = table[choose(8, table)]
        hops = steps
    assert t == pytest.approx(steps * c["ts"] + words * 8 * c["tw"] + hops * c["th"])


#: The one line each example prints on rank 0 at 8 ranks (default spec dualcube:r=2).
EXAMPLE_LINES = {
    "fft": r"fft2 128x128 complex128 on dualcube:r=2 \(8 ranks\): OK \(equals numpy\.fft\.fft2 "
           r"and native MPI\), 256 link messages, [0-9.]+ ms",
    "sort": r"sort 32768 uint64 keys on dualcube:r=2 \(8 ranks\): OK \(sorted permutation of the "
            r"input\), largest bucket \d+, 320 link messages, [0-9.]+ ms",
    "summa": r"summa 128x128 float64 on dualcube:r=2 \(8 ranks\): OK \(equals A @ B\), 8 "
             r"broadcasts, 56 link messages, [0-9.]+ ms",
    "cg": r"cg on the 32x32 Poisson grid on dualcube:r=2 \(8 ranks, halo p2p\): OK \(\d+ "
          r"iterations as native MPI, residual [0-9.e+-]+\), \d+ link messages, [0-9.]+ ms",
}


@pytest.mark.parametrize("kernel", sorted(EXAMPLE_LINES))
def test_example_at_8_ranks(kernel):
    """examples/KERNEL.py runs on D_2 and prints its one OK line (rank 0 only)."""
    import re

    import dualmpi
    from mpi_helpers import (REPO, assert_no_traceback, mpi_cmd, needs_mpiexec, ompi_env,
                             run_job)

    if needs_mpiexec.args[0]:
        pytest.skip(needs_mpiexec.kwargs["reason"])
    if kernel == "cg" and not hasattr(dualmpi.Comm, "Allreduce"):
        pytest.skip("examples/cg.py needs dualmpi.Comm.Allreduce")
    job = run_job(mpi_cmd(8, REPO / "examples" / f"{kernel}.py"), ompi_env(240), timeout=300)
    assert not job.timed_out and job.returncode == 0, job.stdout + job.stderr[-3000:]
    assert_no_traceback(job)
    lines = job.stdout.splitlines()
    assert len(lines) == 1 and re.fullmatch(EXAMPLE_LINES[kernel], lines[0]), job.stdout
