"""The total exchange with many nodes per rank, streamed and compiled, equals MPI's (issue 25)."""

import numpy as np
import pytest
from mpi4py import MPI

import dualmpi

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.Get_rank(), WORLD.Get_size()

#: Per rank count, networks whose class groups are larger, equal to and smaller than a rank's
#: nodes (the streamed runner's chunks are the smaller of the two).
NETS = {
    1: [("metacube:k=2,m=1", 64)],
    2: [("metacube:k=2,m=1", 32), ("dualcube:r=3", 16), ("metacube:k=1,m=2", 16)],
    4: [("metacube:k=2,m=1", 16), ("dualcube:r=3", 8)],
    8: [("metacube:k=2,m=1", 8), ("hypercube:n=5", 4)],
}


@pytest.mark.mpi
@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("which", [0, 1, 2])
def test_many_nodes_per_rank_alltoall_equals_mpi(which, stream):
    nets = NETS.get(SIZE, [])
    if which >= len(nets):
        pytest.skip(f"no network {which} for {SIZE} ranks")
    spec, q = nets[which]
    net = dualmpi.Comm(WORLD, spec, nodes_per_rank=q, stream=stream, watchdog=60)
    rng = np.random.default_rng(RANK)
    ok = True
    for block in (1, 3):  # bytes per node pair: two calls of two sizes, then a repeat
        send = rng.integers(0, 256, SIZE * q * q * block, dtype=np.uint8)
        recv, ref = np.zeros_like(send), np.zeros_like(send)
        for _ in range(2):
            recv[:] = 0
            net.Alltoall(send, recv)
            WORLD.Alltoall(send, ref)
            ok &= bool(np.array_equal(recv, ref))
    streamed = [run.bound is None for run in net._engine.runners()]
    net.Free()
    ok &= streamed == [stream] * len(streamed) and len(streamed) == 2
    assert WORLD.allreduce(int(ok), op=MPI.MIN) == 1
