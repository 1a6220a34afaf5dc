"""MPI tests of the ring collectives (dual-cube Hamiltonian cycle) and of the hypercube's
collectives emulated on the reduced hypercube; one node per rank.

Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi -m mpi tests/mpi`` (N = 8, 32
for the dual-cube; 8, 16, 32, 64 for the reduced hypercube).  Every rank finishes its
communication before the ranks agree on the verdict, so a failure cannot hang the job.
"""

import pytest

from dualmpi.collectives import build_schedule, paper_steps
from dualmpi.topology import DualCube, Hypercube, ReducedHypercube

MPI = pytest.importorskip("mpi4py.MPI")


def _agree(ok):
    """Return True when ``ok`` holds on every rank (collective)."""
    return bool(MPI.COMM_WORLD.allreduce(1 if ok else 0, op=MPI.MIN))


def _ring_topologies(size):
    """Return the networks with ``size`` nodes that have a Hamiltonian cycle: F_r, Q_n."""
    n = size.bit_length() - 1
    if size < 4 or 1 << n != size:
        return []
    out = [Hypercube(n)]
    if n % 2 == 1:
        out.insert(0, DualCube((n + 1) // 2))
    return out


def _rh_topologies(size):
    """Return the reduced hypercubes RH(k, n), n >= 1, with ``size`` nodes."""
    out = []
    for n in (1, 2, 3):
        k = size.bit_length() - 1 - 2**n
        if k >= n and 1 << (k + 2**n) == size:
            out.append(ReducedHypercube(k, n))
    return out


def _run(topo, sched, size):
    """Run ``sched``'s collective twice through dualmpi.Comm; return the verified result row."""
    from dualmpi import Comm
    from dualmpi.measure.collective import run_collective

    coll, root = sched.collective, sched.root or 0
    ring = {"ring-allgather": {"allgather": "ring"}, "ring-allreduce": {"allreduce": "ring"}}
    net = Comm(MPI.COMM_WORLD, topo, 1, algorithms=ring.get(coll))
    row = run_collective(net, coll, size, root, 2, 1)
    net.Free()
    return row


@pytest.mark.mpi(min_size=8)
@pytest.mark.parametrize("collective", ["ring-allgather", "ring-allreduce"])
@pytest.mark.parametrize("size", [1, 4096])
def test_ring_collective_verified(collective, size):
    """Ring allgather and allreduce along a Hamiltonian cycle: verified, every hop a link."""
    topos = _ring_topologies(MPI.COMM_WORLD.Get_size())
    if not topos:
        pytest.skip("run with a power-of-two number of ranks")
    for topo in topos:
        sched = build_schedule(collective, topo)
        row = _run(topo, sched, size)
        p = topo.num_nodes
        ok = (row["verified"] and row["link_violations"] == 0
              and row["rounds"] == paper_steps(collective, topo) == sched.num_rounds
              and row["messages"] == sched.num_messages == p * sched.num_rounds)
        assert _agree(ok), (topo.spec, row)


@pytest.mark.mpi(min_size=8)
def test_ring_against_algorithm_2_on_the_same_ranks():
    """Ring all-to-all broadcast (p-1 rounds) and Algorithm 2 (2r rounds) on the same ranks:
    both verified, the same blocks delivered, the ring with one block per message."""
    size = MPI.COMM_WORLD.Get_size()
    topos = [t for t in _ring_topologies(size) if isinstance(t, DualCube)]
    if not topos:
        pytest.skip("a dual-cube needs 8, 32, 128 ... ranks")
    dc = topos[0]
    ring = _run(dc, build_schedule("ring-allgather", dc), 1024)
    alg2 = _run(dc, build_schedule("allgather", dc), 1024)
    p = dc.num_nodes
    ok = (ring["verified"] and alg2["verified"] and ring["delivered"] == alg2["delivered"]
          and ring["rounds"] == p - 1 and alg2["rounds"] == 2 * dc.r
          and ring["bytes"] == p * (p - 1) * 1024 and alg2["bytes"] >= ring["bytes"])
    assert _agree(ok), (ring, alg2)


@pytest.mark.mpi(min_size=8)
@pytest.mark.parametrize("collective", ["bcast", "scatter", "allgather", "alltoall"])
def test_hypercube_collectives_emulated_on_rh(collective):
    """The hypercube's schedules on RH(k, n) ranks, every dilated edge forwarded by real nodes."""
    topos = _rh_topologies(MPI.COMM_WORLD.Get_size())
    if not topos:
        pytest.skip("no reduced hypercube with this many nodes")
    for rh in topos:
        if collective == "alltoall" and rh.num_nodes > 32:
            continue  # 64 nodes: hundreds of hop rounds on two oversubscribed cores
        sched = build_schedule(collective, rh, rh.num_nodes - 1)
        row = _run(rh, sched, 64)
        ok = (row["verified"] and row["link_violations"] == 0
              and row["rounds"] == paper_steps(collective, rh)
              and row["hop_rounds"] == sched.num_rounds and row["messages"] == sched.num_messages)
        assert _agree(ok), (rh.spec, row)
