"""The soak: 100 back-to-back collectives with rotating roots and fresh patterns, all intact."""

import pytest

from dualmpi.topology import from_spec

MPI = pytest.importorskip("mpi4py.MPI")


@pytest.mark.mpi(min_size=8)
def test_soak_100_iterations():
    from dualmpi import Comm
    from dualmpi.commands.soak import soak

    world = MPI.COMM_WORLD
    if world.Get_size() != 8:
        pytest.skip("the CI soak runs at 8 ranks")
    topo = from_spec("dualcube:r=2")
    net = Comm(world, topo, verify=True)
    totals = soak(net, 100, [48, 5])
    net.Free()
    ok = (totals["iterations"] == 100 and totals["blocks"] > 3000
          and totals["corrupted"] == totals["lost"] == 0)
    assert bool(world.allreduce(1 if ok else 0, op=MPI.MIN)), totals
