"""A known sequence of calls (no dualmpi in it), for checking ``dualmpi exec``'s model time.

On ``MPI.COMM_WORLD``: a ``Bcast`` of 1000 bytes from rank 0, an ``Alltoall`` of 24 bytes per
pair of ranks, an ``Allgather`` of 32 bytes per rank, a ``Sendrecv`` around the ring (rank r
sends ``64 * (r + 1)`` bytes to rank r + 1); then on the halves of a ``Split`` (even and odd
ranks) an ``Allreduce`` of 40 bytes (recursive doubling: partners h ^ 1, h ^ 2, ... of half rank
h, one message of 40 bytes each), and on a periodic 1-D ``Create_cart`` a ``Sendrecv`` of 16
bytes to the next rank (``Shift``).  Every rank prints one line of results.
"""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

buf = np.arange(125, dtype="d") if rank == 0 else np.zeros(125)
comm.Bcast(buf, root=0)
pieces = np.arange(6 * size, dtype="i4") + 100 * rank
got = np.empty_like(pieces)
comm.Alltoall(pieces, got)
everyone = np.empty(4 * size, dtype="i8")
comm.Allgather(np.full(4, rank, dtype="i8"), everyone)
right, left = (rank + 1) % size, (rank - 1) % size
ring = np.empty(8 * (left + 1))
comm.Sendrecv(np.full(8 * (rank + 1), float(rank)), right, 3, ring, left, 3)
half = comm.Split(rank % 2, rank)
mine = np.full(5, rank, dtype="i8")
total = np.empty_like(mine)
half.Allreduce(mine, total)
half.Free()
cart = comm.Create_cart([size], [True])
source, dest = cart.Shift(0, 1)
around = np.empty(2, dtype="i8")
cart.Sendrecv(np.full(2, rank, dtype="i8"), dest, 4, around, source, 4)
cart.Free()
print(f"rank {rank}: bcast {buf.sum():g} alltoall {got.sum()} allgather {everyone.sum()} "
      f"ring {ring.sum():g} halves {total.tolist()} cart {around.tolist()}", flush=True)
