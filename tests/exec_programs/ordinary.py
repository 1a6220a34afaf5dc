"""An ordinary mpi4py program (no dualmpi in it) for the ``dualmpi exec`` tests.

Collectives (buffer, object, nonblocking with ``MPI.Request.Waitall``), a ``Dup`` with its own
calls, and the local queries; rank 0 prints every rank's results, so the output is the same
under ``mpiexec python ordinary.py`` and under ``dualmpi exec``.  ``ordinary.py exit N`` ends
with ``sys.exit(N)``, ``ordinary.py raise`` with an exception on the last rank,
``ordinary.py finalize`` with ``MPI.Finalize()``; ``ordinary.py stdin`` reads a line on rank 0.
"""
import array
import mmap
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
lines = []

a = np.arange(5.0) * (rank + 1)
b = np.empty(5)
comm.Allreduce(a, b, op=MPI.SUM)
lines.append(f"Allreduce {b.tolist()}")
table = np.arange(3 * size, dtype="i") if rank == 0 else None
part = np.empty(3, dtype="i")
comm.Scatter(table, part, root=0)
lines.append(f"Scatter {part.tolist()}")
both = np.empty(3 * size, dtype="i")
comm.Allgather(part * 2, both)
lines.append(f"Allgather {both.tolist()}")
send = np.arange(2 * size, dtype="l") + 100 * rank
recv = np.empty_like(send)
comm.Alltoall(send, recv)
lines.append(f"Alltoall {recv.tolist()}")
top = np.zeros(2)
comm.Reduce(np.array([rank, -rank], dtype="d"), top, op=MPI.MAX, root=size - 1)
lines.append(f"Reduce {top.tolist()}")
pre = np.zeros(1, dtype="i")
comm.Exscan(np.array([rank + 1], dtype="i"), pre)
lines.append(f"Exscan {pre.tolist() if rank else None}")
comm.Barrier()

lines.append(f"bcast {comm.bcast({'k': [1, 2]} if rank == 0 else None, root=0)}")
lines.append(f"allgather {comm.allgather(rank * rank)}")
lines.append(f"allreduce {comm.allreduce(rank + 1, op=MPI.PROD)}")
lines.append(f"alltoall {comm.alltoall([f'{rank}>{j}' for j in range(size)])}")
lines.append(f"scatter {comm.scatter(list(range(10, 10 + size)) if rank == 0 else None)}")

x, y = np.full(2, float(rank)), np.empty(2 * size)
s, t = np.array([rank], dtype="i"), np.zeros(1, dtype="i")
reqs = [comm.Iallgather(x, y), comm.Iallreduce(s, t, op=MPI.SUM), comm.Ibarrier()]
MPI.Request.Waitall(reqs)
lines.append(f"Iallgather {y.tolist()} Iallreduce {t.tolist()}")

dup = comm.Dup()
z = np.array([rank], dtype="i") if rank == 0 else np.array([-1], dtype="i")
dup.Bcast(z, root=0)
lines.append(f"Dup: rank {dup.Get_rank()}/{dup.Get_size()} Bcast {z.tolist()} "
             f"allreduce {dup.allreduce(rank)}")
dup.Free()

ints, total = array.array("i", [rank, 1]), array.array("i", [0, 0])
comm.Allreduce(ints, total)
mine, region = mmap.mmap(-1, 8), mmap.mmap(-1, 8 * size)  # bytes, both of them
mine[:] = array.array("d", [rank + 0.5]).tobytes()
comm.Allgather(mine, region)
lines.append(f"array.array {total.tolist()} mmap {list(memoryview(region).cast('d'))}")
mine.close()
region.close()

lines.append(f"self {MPI.COMM_SELF.allreduce(rank)} name {comm.Get_name()} "
             f"wtime {MPI.Wtime() > 0} host {bool(MPI.Get_processor_name())} "
             f"tag_ub {comm.Get_attr(MPI.TAG_UB) >= 32767}")

everyone = comm.gather(lines, root=0)
if rank == 0:
    for r, mine in enumerate(everyone):
        for line in mine:
            print(f"rank {r}: {line}")
sys.stdout.flush()
if sys.argv[1:2] == ["stdin"]:  # rank 0 reads standard input, every rank prints it
    text = comm.bcast(sys.stdin.readline().strip() if rank == 0 else None, root=0)
    print(f"rank {rank} read {text!r}", flush=True)
if sys.argv[1:2] == ["finalize"]:
    MPI.Finalize()
    print(f"rank {rank} finalized: {MPI.Is_finalized()}", flush=True)
if sys.argv[1:2] == ["exit"]:
    sys.exit(int(sys.argv[2]))
if sys.argv[1:2] == ["raise"] and rank == size - 1:
    raise ValueError(f"raised on rank {rank} of {size}")
