"""Baseline: the MPI library's own collectives on the same ranks, timed like the emulation.

This is the only module that calls native MPI collectives on user data; the emulated
collectives never do.  Results are verified with the same block patterns.
"""

import numpy as np
from mpi4py import MPI

from .payload import block_pattern

__all__ = ["run_native"]


def _buffers(collective, comm, root, size):
    """Return ``(send, recv, expected_recv)`` numpy buffers for one native collective."""
    p, me = comm.Get_size(), comm.Get_rank()
    if collective == "bcast":
        send = block_pattern(root, -1, size) if me == root else np.zeros(size, np.uint8)
        return send, None, block_pattern(root, -1, size)
    if collective == "scatter":
        send = (np.concatenate([block_pattern(root, d, size) for d in range(p)])
                if me == root else None)
        return send, np.zeros(size, np.uint8), block_pattern(root, me, size)
    if collective == "allgather":
        want = np.concatenate([block_pattern(s, -1, size) for s in range(p)])
        return block_pattern(me, -1, size), np.zeros(p * size, np.uint8), want
    if collective == "alltoall":
        send = np.concatenate([block_pattern(me, d, size) for d in range(p)])
        want = np.concatenate([block_pattern(s, me, size) for s in range(p)])
        return send, np.zeros(p * size, np.uint8), want
    if collective == "allreduce":  # segment j of every rank, combined by XOR (see _call)
        send = np.concatenate([block_pattern(me, j, size) for j in range(p)])
        want = np.zeros(p * size, np.uint8)
        for s in range(p):
            want ^= np.concatenate([block_pattern(s, j, size) for j in range(p)])
        return send, np.zeros(p * size, np.uint8), want
    raise ValueError(f"unknown collective {collective!r}")


def _call(collective, comm, root, send, recv):
    """Invoke the native collective once."""
    if collective == "bcast":
        comm.Bcast([send, MPI.BYTE], root=root)
    elif collective == "scatter":
        comm.Scatter(None if send is None else [send, MPI.BYTE], [recv, MPI.BYTE], root=root)
    elif collective == "allgather":
        comm.Allgather([send, MPI.BYTE], [recv, MPI.BYTE])
    elif collective == "allreduce":
        # MPI_SUM on 8-bit types may not wrap (overflow is undefined; Open MPI's AVX kernels
        # saturate, ompi #8045): time MPI_BXOR on bytes, the same traffic and per-byte work.
        comm.Allreduce([send, MPI.BYTE], [recv, MPI.BYTE], op=MPI.BXOR)
    else:
        comm.Alltoall([send, MPI.BYTE], [recv, MPI.BYTE])


def run_native(net, collective, size, root=0, iters=1, warmup=0):
    """Time the native MPI collective (OSU method) and verify its result; same dict on every rank.

    ``net`` is the :class:`dualmpi.Comm` of the emulated run: the native collective runs on
    its communicator (``net.comm``); barriers, verdicts and timings go through dualmpi's
    control plane and every wait is under its watchdog.
    """
    comm = net.comm
    root = root or 0
    times = []
    send, recv, want = _buffers(collective, comm, root, size)
    control = net._transport.control
    for it in range(warmup + iters):
        if collective == "bcast" and comm.Get_rank() != root:
            send[:] = 0
        net._control_barrier()
        t0 = MPI.Wtime()
        control(f"the native MPI_{collective.capitalize()} (baseline)", _call, collective, comm,
                root, send, recv)
        t1 = MPI.Wtime()
        if it >= warmup:
            times.append(t1 - t0)
    got = send if collective == "bcast" else recv
    avg = float(np.mean(times)) if times else 0.0
    mine = np.array([0 if np.array_equal(got, want) else 1, avg, -avg])
    top = np.zeros(3)
    net._control_allreduce(mine, top, MPI.MAX)
    total = np.zeros(1)
    net._control_allreduce(np.array([avg]), total, MPI.SUM)
    return {
        "collective": collective,
        "size": size,
        "native_verified": bool(top[0] == 0),
        "native_t_min": float(-top[2]),
        "native_t_avg": float(total[0]) / comm.Get_size(),
        "native_t_max": float(top[1]),
    }
