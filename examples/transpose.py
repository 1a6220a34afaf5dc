"""Distributed transpose of an N x N float64 matrix (a block of rows per rank) with net.Alltoall.

Run: mpiexec -n 8 python -m mpi4py examples/transpose.py [SPEC [N]]
(SPEC defaults from the rank count: 8 -> dualcube:r=2, 32 -> dualcube:r=3; N to 64 per rank.)
"""
import sys

import numpy as np
from mpi4py import MPI

import dualmpi

world = MPI.COMM_WORLD
R, r = world.Get_size(), world.Get_rank()
DEFAULT = {1: "hypercube:n=0", 2: "dualcube:r=1", 8: "dualcube:r=2", 32: "dualcube:r=3",
           64: "metacube:k=2,m=1"}
spec = sys.argv[1] if len(sys.argv) > 1 else DEFAULT.get(R, f"hypercube:n={R.bit_length() - 1}")
N = int(sys.argv[2]) if len(sys.argv) > 2 else 64 * R
b = N // R                                                  # rows per rank (R must divide N)
rows = np.arange(r * b * N, (r + 1) * b * N, dtype=np.float64).reshape(b, N)  # A[i, k] = i*N + k
send = np.ascontiguousarray(rows.reshape(b, R, b).transpose(1, 2, 0))  # piece s: A[mine, s's]^T
recv, ref = np.empty_like(send), np.empty_like(send)
with dualmpi.Comm(world, spec) as net:
    net.Alltoall(send, recv)                                # compiles the plan (cached)
    net.reset_stats()
    t = MPI.Wtime()
    net.Alltoall(send, recv)                                # was: world.Alltoall(send, recv)
    t = world.allreduce(MPI.Wtime() - t, op=MPI.MAX)
    messages = world.allreduce(net.stats()["messages"])
world.Alltoall(send, ref)
mine = recv.transpose(1, 0, 2).reshape(b, N)                # rows r*b.. of the transpose
want = np.arange(N) * N + (r * b + np.arange(b))[:, None]   # A^T[j, c] = A[c, j] = c*N + j
ok = world.allreduce(int(np.array_equal(recv, ref) and np.array_equal(mine, want)), op=MPI.MIN)
if r == 0:
    print(f"transpose {N}x{N} float64 on {spec} ({R} ranks): "
          f"{'OK' if ok else 'WRONG'} (equals MPI_Alltoall and A^T), "
          f"{messages} link messages, {t * 1e3:.2f} ms")
sys.exit(0 if ok else 1)
