"""MPI tests of issue 17's networks and schedules: CCC collectives, the RH's own ring (8/32 ranks)."""

import pytest

from dualmpi.collectives import COLLECTIVES, build_schedule
from dualmpi.topology import from_spec

MPI = pytest.importorskip("mpi4py.MPI")


def _agree(ok):
    return bool(MPI.COMM_WORLD.allreduce(1 if ok else 0, op=MPI.MIN))


def _run(spec, collective, size, root=0, algorithms=None):
    from dualmpi import Comm
    from dualmpi.measure.collective import run_collective

    net = Comm(MPI.COMM_WORLD, from_spec(spec), algorithms=algorithms)
    row = run_collective(net, collective, size, root, 1, 0)
    net.Free()
    return row


@pytest.mark.mpi(min_size=8)
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_ccc_collectives(collective):
    """CCC(3), 24 nodes on 8 ranks (3 per rank): the generic greedy schedules, verified."""
    if MPI.COMM_WORLD.Get_size() != 8:
        pytest.skip("CCC(3) is checked at 8 ranks")
    row = _run("ccc:n=3", collective, 16, 1)
    sched = build_schedule(collective, from_spec("ccc:n=3"), 3)
    assert _agree(row["verified"] and row["messages"] == sched.num_messages), row


@pytest.mark.mpi(min_size=8)
def test_rh_ring_allgather_on_its_own_ring():
    """The ring all-to-all broadcast on RH's dilation-1 ring: p - 1 rounds, p messages each."""
    spec = {8: "rh:k=1,n=1", 32: "rh:k=3,n=1"}.get(MPI.COMM_WORLD.Get_size())
    if spec is None:
        pytest.skip("RH rings are checked at 8 and 32 ranks")
    p = from_spec(spec).num_nodes
    row = _run(spec, "ring-allgather", 8, algorithms={"allgather": "ring"})
    assert _agree(row["verified"] and row["hop_rounds"] == p - 1 and row["messages"] == p * (p - 1)), row
