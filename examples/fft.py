"""Distributed 2-D FFT (rows per rank, transposes by net.Alltoall), checked against native MPI.

Run: mpiexec -n 8 python -m mpi4py examples/fft.py [SPEC [N]]
(SPEC defaults from the rank count: 8 -> dualcube:r=2, 32 -> dualcube:r=3; N to 16 per rank.)
"""
import sys

import numpy as np
from mpi4py import MPI

import dualmpi
from dualmpi.apps import fft

world = MPI.COMM_WORLD
R, r = world.Get_size(), world.Get_rank()
spec = sys.argv[1] if len(sys.argv) > 1 else {8: "dualcube:r=2", 32: "dualcube:r=3"}.get(
    R, f"hypercube:n={R.bit_length() - 1}")
N = int(sys.argv[2]) if len(sys.argv) > 2 else 16 * R
rows = fft.make_input(N, R, r)                  # rows r*N/R .. of a random complex N x N array
with dualmpi.Comm(world, spec) as net:
    t = MPI.Wtime()
    out = fft.fft2(net, rows)                   # was: fft.fft2(world, rows)
    t = world.allreduce(MPI.Wtime() - t, op=MPI.MAX)
    messages = world.allreduce(net.stats()["messages"])
same = world.allreduce(int(np.array_equal(out, fft.fft2(world, rows))), op=MPI.MIN)
whole = world.gather(out)
ok = world.bcast(bool(same) and r == 0 and np.allclose(np.vstack(whole), fft.reference(N, R)))
if r == 0:
    print(f"fft2 {N}x{N} complex128 on {spec} ({R} ranks): {'OK' if ok else 'WRONG'} "
          f"(equals numpy.fft.fft2 and native MPI), {messages} link messages, {t * 1e3:.2f} ms")
sys.exit(0 if ok else 1)
