"""An ordinary mpi4py program that relies on MPI's progress rule: a nonblocking collective is
completed after blocking calls on some ranks and before them on others (a collective, a
point-to-point exchange, an object collective).  Natively MPI keeps the request moving while a
rank blocks; under ``dualmpi exec`` the ranks that forward the broadcast must do so too."""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
partner = rank ^ 1 if (rank ^ 1) < size else rank
out = []
for step in range(3):
    a = np.full(1000, 7.0 + step if rank == 0 else 0.0)
    req = comm.Ibcast(a, root=0)
    b, c = np.full(10, rank + step, dtype="i"), np.empty(10, dtype="i")
    if rank % 2:
        req.Wait()
        comm.Allreduce(b, c, op=MPI.SUM)
    else:
        comm.Allreduce(b, c, op=MPI.SUM)
        req.Wait()
    req = comm.Iallreduce(np.full(3, rank + 1.0), d := np.empty(3), op=MPI.MAX)
    got = np.full(5, -1, dtype="i")
    if partner == rank:
        got[:] = rank
    elif rank % 2:
        req.Wait()
        comm.Send(np.full(5, rank, dtype="i"), dest=partner, tag=step)
    else:
        comm.Recv(got, source=partner, tag=step)
    req.Wait()
    everyone = comm.allgather(rank * step)
    out.append((float(a.sum()), int(c.sum()), float(d.sum()), int(got.sum()), sum(everyone)))
lines = comm.gather(out, root=0)
if rank == 0:
    for r, line in enumerate(lines):
        print(r, line)
