"""Routed point-to-point's cost: ping-pong latency at 1..d hops against raw MPI, idle CPU.

Run under mpiexec (docs/p2p.md has the figures)::

    mpiexec -n 8 python benchmarks/p2p_cost.py lat             # D_2 (2 ranks: Q_1)
    mpiexec -n 8 python benchmarks/p2p_cost.py idle thread 5   # or raw, nothread

``lat``: one-way time of a ping-pong between rank 0 and the first rank 1, 2, ... hops away,
through ``dualmpi.Comm`` and (1 hop) through ``MPI.COMM_WORLD`` between the same ranks, sizes
1 B - 1 MiB, median of 5 interleaved rounds; rank 0 prints one row per size.  ``idle``: the
CPU time of every process (``time.process_time``, every thread) over a ``time.sleep`` of the
given seconds, with a ``dualmpi.Comm`` and its progress thread (``thread``), without the
thread (``nothread``: ``DUALMPI_PROGRESS_THREAD=0``) or without dualmpi (``raw``).
"""

import os
import sys
import time

import numpy as np
from mpi4py import MPI

import dualmpi

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.Get_rank(), WORLD.Get_size()
SIZES = [1, 1024, 65536, 1 << 20]
REPS = {1: 200, 1024: 200, 65536: 60, 1 << 20: 12}


def _spec():
    return "dualcube:r=2" if SIZE == 8 else f"hypercube:n={SIZE.bit_length() - 1}"


def idle(which, seconds):
    """Print the CPU share per rank over ``seconds`` of sleep."""
    if which == "nothread":
        os.environ["DUALMPI_PROGRESS_THREAD"] = "0"
    net = None if which == "raw" else dualmpi.Comm(WORLD, _spec())
    WORLD.Barrier()
    t0, c0 = time.monotonic(), time.process_time()
    time.sleep(seconds)
    share = (time.process_time() - c0) / (time.monotonic() - t0)
    shares = WORLD.gather(share)
    if RANK == 0:
        print(f"idle {which}: CPU per rank {100 * np.mean(shares):.2f}% "
              f"(max {100 * max(shares):.2f}%) over {seconds:g} s, "
              f"load {os.getloadavg()[0]:.2f}")
    if net is not None:
        net.Free()


def _pingpong(comm, peer, buf, n):
    """Return the one-way time of ``n`` round trips between rank 0 and ``peer`` (rank 0)."""
    WORLD.Barrier()
    if RANK == 0:
        t = time.perf_counter()
        for _ in range(n):
            comm.Send(buf, peer, 1)
            comm.Recv(buf, peer, 1)
        return (time.perf_counter() - t) / n / 2
    if RANK == peer:
        for _ in range(n):
            comm.Recv(buf, 0, 1)
            comm.Send(buf, 0, 1)
    return None


def latency():
    """Print one row per size: raw at 1 hop, dualmpi at 1, 2, ... hops."""
    net = dualmpi.Comm(WORLD, _spec())
    router = net._router
    peers = {}
    for b in range(1, SIZE):
        peers.setdefault(len(router.route(0, b).path) - 1, b)
    res = {}
    for size in SIZES:
        buf = np.zeros(size, np.uint8)
        for _ in range(5):
            for h, peer in sorted(peers.items()):
                for name, comm in (("raw", WORLD), ("dualmpi", net)):
                    if name == "raw" and h > 1:
                        continue
                    _pingpong(comm, peer, buf, 3)
                    t = _pingpong(comm, peer, buf, REPS[size])
                    if t is not None:
                        res.setdefault((size, h, name), []).append(t)
    if RANK == 0:
        print(f"{_spec()}, {SIZE} ranks, load {os.getloadavg()[0]:.2f}; one-way latency, "
              "median of 5 interleaved rounds")
        for size in SIZES:
            raw = np.median(res[(size, 1, "raw")])
            row = [f"{size:>8} B", f"raw 1 hop {raw * 1e6:8.1f} us"]
            for h in sorted(peers):
                t = np.median(res[(size, h, "dualmpi")])
                row.append(f"{h} hop(s) {t * 1e6:8.1f} us ({t / raw:.2f}x)")
            print(" | ".join(row))
    net.Free()


if __name__ == "__main__":
    if sys.argv[1] == "idle":
        idle(sys.argv[2], float(sys.argv[3]))
    else:
        latency()
