"""C = A B by 1-D SUMMA: in step k rank k broadcasts its block row of B (net.Bcast(root=k)).

Run: mpiexec -n 8 python -m mpi4py examples/summa.py [SPEC [N]]
Without SPEC: the dual-cube D_2 on 8 ranks, D_3 on 32, else the hypercube; N: 16 rows a rank.
"""
import sys

import numpy as np
from mpi4py import MPI

import dualmpi
from dualmpi.apps import summa

world = MPI.COMM_WORLD
R, r = world.Get_size(), world.Get_rank()
args = sys.argv[1:] + [None, None]
spec = args[0] or {8: "dualcube:r=2", 32: "dualcube:r=3"}.get(R, f"hypercube:n={R.bit_length() - 1}")
N = int(args[1] or 16 * R)
a, b = summa.make_input(N, R, r)                # block rows r*N/R .. of A and of B
with dualmpi.Comm(world, spec) as net:
    t = MPI.Wtime()
    c = summa.summa(net, a, b)                  # was: summa.summa(world, a, b)
    t = world.allreduce(MPI.Wtime() - t, op=MPI.MAX)
    messages = world.allreduce(net.stats()["messages"])
whole = world.gather(c)
ok = world.bcast(r == 0 and np.allclose(np.vstack(whole), summa.reference(N, R)))
if r == 0:
    print(f"summa {N}x{N} float64 on {spec} ({R} ranks): {'OK' if ok else 'WRONG'} "
          f"(equals A @ B), {R} broadcasts, {messages} link messages, {t * 1e3:.2f} ms")
sys.exit(0 if ok else 1)
