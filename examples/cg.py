"""Conjugate gradient on the N x N Poisson grid: halos between linked ranks, net.Allreduce dots.

Run: mpiexec -n 8 python -m mpi4py examples/cg.py [SPEC [N]]
(SPEC defaults from the rank count: 8 -> dualcube:r=2, 32 -> dualcube:r=3; N to 4 per rank.)
The grid's row blocks follow the network's Hamiltonian cycle, so the halo partners are
neighbours; on the same ranks the solver runs again on MPI.COMM_WORLD for comparison.
"""
import sys

from mpi4py import MPI

import dualmpi
from dualmpi.apps import cg

world = MPI.COMM_WORLD
R, r = world.Get_size(), world.Get_rank()
spec = sys.argv[1] if len(sys.argv) > 1 else {8: "dualcube:r=2", 32: "dualcube:r=3"}.get(
    R, f"hypercube:n={R.bit_length() - 1}")
N = int(sys.argv[2]) if len(sys.argv) > 2 else 4 * R
with dualmpi.Comm(world, spec) as net:
    part = cg.partition(net)                    # block i of grid rows on rank part.path[i]
    t = MPI.Wtime()
    x, its, res = cg.cg_solve(net, cg.make_rhs(N, R, part.block(r)), part)
    t = world.allreduce(MPI.Wtime() - t, op=MPI.MAX)
    messages = world.allreduce(net.stats()["messages"])
_, native_its, native_res = cg.cg_solve(world, cg.make_rhs(N, R, r))  # rank order on native MPI
ok = its == native_its and abs(res - native_res) <= 1e-6 * max(native_res, 1e-300)
ok = bool(world.allreduce(int(ok), op=MPI.MIN))
if r == 0:
    print(f"cg on the {N}x{N} Poisson grid on {spec} ({R} ranks, halo {part.halo}): "
          f"{'OK' if ok else 'WRONG'} ({its} iterations as native MPI, residual {res:.3e}), "
          f"{messages} link messages, {t * 1e3:.2f} ms")
sys.exit(0 if ok else 1)
