"""MPI tests of the many-nodes-per-rank executor (block mapping)."""

import pytest

from dualmpi.collectives import COLLECTIVES, build_schedule
from dualmpi.errors import RankCountError
from dualmpi.topology import from_spec

MPI = pytest.importorskip("mpi4py.MPI")


def _agree(ok):
    return bool(MPI.COMM_WORLD.allreduce(1 if ok else 0, op=MPI.MIN))


SPECS = ["dualcube:r=3", "metacube:k=2,m=1"]


def _skip_unless_several_nodes_per_rank(topo, world):
    """These tests need several nodes per rank; beyond 8 oversubscribed ranks they only slow CI."""
    size = world.Get_size()
    if topo.num_nodes % size or topo.num_nodes == size or size > 8:
        pytest.skip("run at 2 and 8 ranks (several nodes on every rank)")


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_schedules_with_many_nodes_per_rank(spec, collective):
    from dualmpi.executors.multi import BlockMap, run_schedule_multi

    world = MPI.COMM_WORLD
    topo = from_spec(spec)
    _skip_unless_several_nodes_per_rank(topo, world)
    sched = build_schedule(collective, topo, 5)
    row = run_schedule_multi(BlockMap(world, topo), sched, 24)
    ok = row["verified"] and row["messages"] == sched.num_messages and row["delivered"] > 0
    assert _agree(ok), row


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("spec", SPECS + ["dualcube:r=4", "hypercube:n=6"])
def test_vectorised_total_exchange(spec):
    from dualmpi.executors.multi import BlockMap, run_alltoall_vector
    from dualmpi.simulator import simulate

    world = MPI.COMM_WORLD
    topo = from_spec(spec)
    _skip_unless_several_nodes_per_rank(topo, world)
    row = run_alltoall_vector(BlockMap(world, topo), 40)
    sim = simulate(topo, "alltoall")
    p = topo.num_nodes
    ok = (row["verified"] and row["delivered"] == p * (p - 1)
          and row["messages"] == sim["link_transfers"] and row["hop_rounds"] == sim["model"]["th"])
    assert _agree(ok), row


@pytest.mark.mpi(min_size=2)
def test_uneven_block_mapping_is_refused_on_every_rank():
    from dualmpi.executors.multi import BlockMap

    world = MPI.COMM_WORLD
    topo = from_spec(f"hypercube:n={world.Get_size().bit_length() + 1}")  # at least 2 nodes a rank
    try:
        BlockMap(world, topo, nodes_per_rank=3)
        raised = False
    except RankCountError as exc:
        raised = "nodes each play" in str(exc)
    assert _agree(raised)
