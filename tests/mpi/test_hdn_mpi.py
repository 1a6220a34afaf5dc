"""MPI tests of the hierarchical dual-net: Algorithm 2's broadcast (and the scatter down its tree)
on real ranks, one HDN node per rank, for every HDN below whose node count equals the job size
(8, 32 or 64 ranks).  All ranks finish communicating, then agree on the verdict (allreduce)."""

import pytest

from dualmpi.collectives import build_schedule, paper_steps
from dualmpi.topology import from_spec

MPI = pytest.importorskip("mpi4py.MPI")

#: Networks by node count: rings, K_2 factors, levels 1 and 2, super-nodes nested, disjoint or whole.
SPECS = {
    8: ["rdn:base=2,k=1", "hdn:base=4,k=1,s=4"],
    32: ["hdn:base=4,k=1,s=1", "hdn:base=2x4,k=1,s=4", "hdn:base=2x2,k=2,s=2x2/2x2"],
    64: ["hdn:base=2,k=2,s=1/2", "hdn:base=2x4,k=1,s=2", "hdn:base=2x2,k=2,s=2x2/2"],
}


def _agree(ok, comm=None):
    """Return True when ``ok`` holds on every rank (collective)."""
    comm = comm or MPI.COMM_WORLD
    return bool(comm.allreduce(1 if ok else 0, op=MPI.MIN))


@pytest.mark.mpi(min_size=8)
@pytest.mark.parametrize("collective", ["bcast", "scatter"])
@pytest.mark.parametrize("size", [0, 4096])
def test_hdn_broadcast_on_ranks(collective, size):
    """Algorithm 2 delivers byte for byte over links only, in at most Theorem 3's steps."""
    from dualmpi import Comm
    from dualmpi.measure.collective import run_collective

    world = MPI.COMM_WORLD
    specs = SPECS.get(world.Get_size())
    if not specs:
        pytest.skip("HDN networks are tested at 8, 32 and 64 ranks")
    for spec in specs:
        topo = from_spec(spec)
        for root in (0, topo.num_nodes - 1):
            sched = build_schedule(collective, topo, root)
            net = Comm(world, topo)
            row = run_collective(net, collective, size, root, 1, 0)
            net.Free()
            ok = (row["verified"] and row["link_violations"] == 0
                  and row["messages"] == sched.num_messages == topo.num_nodes - 1
                  and row["delivered"] == row["expected"]
                  and row["rounds"] == sched.steps <= paper_steps(collective, topo))
            assert _agree(ok), (spec, root, row)
