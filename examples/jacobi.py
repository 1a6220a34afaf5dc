"""2-D Jacobi iteration on a grid of ranks: an ordinary mpi4py program (no dualmpi in it).

The Laplace equation on an N x N grid, the top edge held at 1 and the others at 0, solved by
Jacobi sweeps.  The ranks form a px x py grid (``MPI.Compute_dims``); each owns a block with a
one-cell halo, exchanges its edge rows and columns with its four grid neighbours by ``Sendrecv``
every sweep (``MPI.PROC_NULL`` at the borders) and agrees on convergence with an ``allreduce``
of the largest change.  Rank 0 gathers the blocks and prints one line.

Run it as it is, or on an emulated network (the grid neighbours are not the network's: their
halos are routed over its links)::

    mpiexec -n 8 python -m mpi4py examples/jacobi.py [N] [SWEEPS]
    mpiexec -n 8 python -m mpi4py -m dualmpi exec dualcube:r=2 -- examples/jacobi.py [N] [SWEEPS]
"""
import sys

import numpy as np
from mpi4py import MPI


def split(n, parts, index):
    """Return (start, length) of part ``index`` of ``n`` cells cut into ``parts``."""
    base, extra = divmod(n, parts)
    return index * base + min(index, extra), base + (index < extra)


def main(n=48, sweeps=500, tol=1e-5):
    comm = MPI.COMM_WORLD
    size, rank = comm.Get_size(), comm.Get_rank()
    px, py = MPI.Compute_dims(size, 2)
    i, j = divmod(rank, py)
    up = rank - py if i > 0 else MPI.PROC_NULL
    down = rank + py if i < px - 1 else MPI.PROC_NULL
    left = rank - 1 if j > 0 else MPI.PROC_NULL
    right = rank + 1 if j < py - 1 else MPI.PROC_NULL
    (r0, nr), (c0, nc) = split(n, px, i), split(n, py, j)

    u = np.zeros((nr + 2, nc + 2))
    if i == 0:
        u[0, :] = 1.0  # the top edge of the grid, held fixed
    send, recv = np.empty(nr), np.empty(nr)
    change, done = np.inf, 0
    for done in range(1, sweeps + 1):
        # halo rows (contiguous) and columns (through a copy), up/down then left/right
        comm.Sendrecv(u[1, 1:-1].copy(), up, 0, u[-1, 1:-1], down, 0)
        comm.Sendrecv(u[-2, 1:-1].copy(), down, 1, u[0, 1:-1], up, 1)
        if i == 0:
            u[0, :] = 1.0
        send[:] = u[1:-1, 1]
        comm.Sendrecv(send, left, 2, recv, right, 2)
        if right != MPI.PROC_NULL:
            u[1:-1, -1] = recv
        send[:] = u[1:-1, -2]
        comm.Sendrecv(send, right, 3, recv, left, 3)
        if left != MPI.PROC_NULL:
            u[1:-1, 0] = recv
        new = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        mine = float(np.abs(new - u[1:-1, 1:-1]).max()) if new.size else 0.0
        u[1:-1, 1:-1] = new
        change = comm.allreduce(mine, op=MPI.MAX)
        if change < tol:
            break

    blocks = comm.gather((r0, c0, u[1:-1, 1:-1].copy()), root=0)
    if rank == 0:
        grid = np.zeros((n, n))
        for a, b, block in blocks:
            grid[a:a + block.shape[0], b:b + block.shape[1]] = block
        print(f"jacobi {n}x{n} on {px}x{py} ranks: {done} sweeps, last change {change:.6e}, "
              f"sum {grid.sum():.12f}, centre {grid[n // 2, n // 2]:.12f}")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    main(*args)
