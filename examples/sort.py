"""Sample sort of random 64-bit keys (Allgather of samples, Alltoallv of buckets) on a network.

Run: mpiexec -n 8 python -m mpi4py examples/sort.py [SPEC [KEYS_PER_RANK]]
(SPEC defaults from the rank count: 8 -> dualcube:r=2, 32 -> dualcube:r=3.)
"""
import sys

import numpy as np
from mpi4py import MPI

import dualmpi
from dualmpi.apps import sort

world = MPI.COMM_WORLD
R, r = world.Get_size(), world.Get_rank()
spec = sys.argv[1] if len(sys.argv) > 1 else {8: "dualcube:r=2", 32: "dualcube:r=3"}.get(
    R, f"hypercube:n={R.bit_length() - 1}")
per_rank = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
keys = np.random.default_rng([7, r]).integers(0, 2**64, size=per_rank, dtype=np.uint64)
with dualmpi.Comm(world, spec) as net:
    t = MPI.Wtime()
    mine = sort.sample_sort(net, keys)          # was: sort.sample_sort(world, keys)
    t = world.allreduce(MPI.Wtime() - t, op=MPI.MAX)
    messages = world.allreduce(net.stats()["messages"])
got, given = world.gather(mine), world.gather(keys)
ok = world.bcast(r == 0 and np.array_equal(np.concatenate(got), np.sort(np.concatenate(given))))
if r == 0:
    print(f"sort {R * per_rank} uint64 keys on {spec} ({R} ranks): {'OK' if ok else 'WRONG'} "
          f"(sorted permutation of the input), largest bucket {max(map(len, got))}, "
          f"{messages} link messages, {t * 1e3:.2f} ms")
sys.exit(0 if ok else 1)
