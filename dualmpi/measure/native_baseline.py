"""Baseline: the MPI library's own collective on the same ranks, timed like the emulation.

This is the only module that calls native MPI collectives on user data; the emulated
collectives never do.  The buffers are those of the emulated run
(:mod:`dualmpi.measure.payload`), passed to MPI's method of the description by its
parameter names, and the result is verified against the same expected bytes.
"""

import numpy as np
from mpi4py import MPI

from .payload import call_of, layout_for, rank_buffers

__all__ = ["run_native"]


def run_native(net, collective, size, root=0, iters=1, warmup=0):
    """Time the native MPI collective (OSU method) and verify its result; same dict on every rank.

    ``net`` is the :class:`dualmpi.Comm` of the emulated run: the native collective runs on
    its communicator (``net.comm``); barriers, verdicts and timings go through dualmpi's
    control plane and every wait is under its watchdog.  ``collective`` is a registered
    collective the emulation runs (its MPI method: the description's, or that of the
    collective it is an algorithm of), ``size`` its node-level block, ``root`` a rank.
    Reductions combine with ``MPI_BXOR``: ``MPI_SUM`` on 8-bit types may not wrap
    (overflow is undefined; Open MPI's AVX kernels saturate, ompi #8045), and XOR is the
    same traffic and per-byte work.
    """
    comm = net.comm
    root = root or 0
    desc, _ = call_of(collective)
    lay = layout_for(collective, comm.Get_size(), net.q, size, root)
    bufs = rank_buffers(lay, comm.Get_rank(), desc.mpi, combine=np.bitwise_xor)
    method = getattr(comm, desc.mpi)
    args = bufs.args(desc.mpi, root, MPI.BXOR)
    times = []
    control = net._transport.control
    for it in range(warmup + iters):
        if bufs.one:
            bufs.reset()
        net._control_barrier()
        t0 = MPI.Wtime()
        control(f"the native MPI_{desc.mpi} (baseline)", lambda: method(**args))
        t1 = MPI.Wtime()
        if it >= warmup:
            times.append(t1 - t0)
    got, want = bufs.got, bufs.want
    avg = float(np.mean(times)) if times else 0.0
    mine = np.array([0 if got is None or np.array_equal(got, want) else 1, avg, -avg])
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
