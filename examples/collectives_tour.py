"""An ordinary mpi4py program that runs unchanged on a network: only ``comm`` differs.

Run: mpiexec -n 8 python -m mpi4py examples/collectives_tour.py            (MPI.COMM_WORLD)
     mpiexec -n 8 python -m mpi4py examples/collectives_tour.py dualcube:r=2   (over D_2's links)

Every line it prints is the same either way; with a SPEC the data travel over the network's
links (``dualmpi.Comm``) and a last line, on stderr, says how many link messages they took.
"""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
if len(sys.argv) > 1:  # the one change: the program's communicator is the network
    import dualmpi

    comm = dualmpi.Comm(MPI.COMM_WORLD, sys.argv[1])

size, rank = comm.Get_size(), comm.Get_rank()
lines = []

# buffer collectives, with counts per rank, derived datatypes and IN_PLACE
data = np.arange(6, dtype="i") if rank == 0 else np.full(6, -1, dtype="i")
every_other = MPI.INT.Create_vector(3, 1, 2).Commit()
comm.Bcast([data, 1, every_other], root=0)  # writes elements 0, 2 and 4 only
every_other.Free()
lines.append(f"Bcast of every other int: {data.tolist()}")
counts = np.arange(size) + 1
displs = np.concatenate([[0], np.cumsum(counts[:-1])])
table = np.arange(counts.sum(), dtype="d") * 10
mine = np.empty(rank + 1)
comm.Scatterv([table, (counts, displs), MPI.DOUBLE], mine, root=0)
back = np.zeros(int(counts.sum())) if rank == size - 1 else None
comm.Gatherv(mine * 2, [back, (counts, displs), MPI.DOUBLE], root=size - 1)
lines.append(f"Gatherv at the last rank: {back.tolist() if back is not None else None}")
total = np.array([rank, rank * rank], dtype="l")
comm.Allreduce(MPI.IN_PLACE, total, op=MPI.SUM)
lines.append(f"Allreduce in place: {total.tolist()}")
blocks = np.arange(2 * size, dtype="f") + 100 * rank
part = np.empty(2, dtype="f")
comm.Reduce_scatter_block(blocks, part, op=MPI.MAX)
lines.append(f"Reduce_scatter_block: {part.tolist()}")
pairs = np.repeat(np.arange(size, dtype="h"), 2) + rank
got = np.empty_like(pairs)
comm.Alltoall([pairs, 2, MPI.SHORT], [got, 2, MPI.SHORT])
lines.append(f"Alltoall of shorts: {got.tolist()}")
prefix = np.array([rank + 1.0])
out = np.zeros(1)
comm.Scan(prefix, out)
lines.append(f"Scan: {out.tolist()}")

# nonblocking, several in flight
a, b = np.full(3, rank, dtype="d"), np.empty(3 * size)
c, d = np.array([float(rank)]), np.zeros(1)
reqs = [comm.Iallgather(a, b), comm.Iallreduce(c, d, op=MPI.MAX), comm.Ibarrier()]
for req in reqs:
    req.Wait()
lines.append(f"Iallgather, Iallreduce: {b[::3].tolist()} {d.tolist()}")

# Python objects
lines.append(f"bcast: {comm.bcast({'answer': 42} if rank == 0 else None, root=0)}")
lines.append(f"allgather: {comm.allgather((rank, 'r' + str(rank)))}")
lines.append(f"allreduce (string concatenation, rank order): "
             f"{comm.allreduce(str(rank), op=lambda x, y: x + y)}")
lines.append(f"alltoall: {comm.alltoall([rank * 10 + j for j in range(size)])}")
comm.barrier()

everyone = comm.gather(lines, root=0)
if rank == 0:
    for r, mine in enumerate(everyone):
        for line in mine:
            print(f"rank {r}: {line}")
if comm is not MPI.COMM_WORLD:
    messages = MPI.COMM_WORLD.allreduce(comm.stats()["messages"])
    if rank == 0:
        print(f"{messages} link messages on {sys.argv[1]}", file=sys.stderr)
    comm.Free()
