"""A fixed set of calls on a communicator, for checking ``dualmpi exec``'s report against
``dualmpi.Comm.stats()`` (tests/exec_programs/calls_on_net.py runs ``main`` on a dualmpi.Comm)."""
import numpy as np
from mpi4py import MPI


def main(comm):
    rank, size = comm.Get_rank(), comm.Get_size()
    a = np.arange(64, dtype="d") + rank
    b = np.empty_like(a)
    comm.Allreduce(a, b)
    s = np.arange(16 * size, dtype="i") + rank
    r = np.empty_like(s)
    comm.Alltoall(s, r)
    comm.Bcast(b, root=size - 1)
    comm.allgather(rank)
    comm.Scatter(s if rank == 0 else None, r[:16], root=0)
    comm.Barrier()
    return int(r.sum())


if __name__ == "__main__":
    sums = MPI.COMM_WORLD.gather(main(MPI.COMM_WORLD), root=0)
    if MPI.COMM_WORLD.rank == 0:
        print(sums)
