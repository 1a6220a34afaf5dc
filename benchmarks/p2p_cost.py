"""Routed point-to-point's cost: ping-pong latency at 1..d hops against raw MPI, idle CPU.

Run under mpiexec (docs/p2p.md has the figures)::

    mpiexec -n 8 python benchmarks/p2p_cost.py lat [ROUNDS [JSON]]   # D_2 (2 ranks: Q_1)
    mpiexec -n 8 python benchmarks/p2p_cost.py idle thread 5         # or raw, nothread

``lat``: one-way time of a ping-pong between rank 0 and the first rank 1, 2, ... hops away,
through ``dualmpi.Comm`` and (1 hop) through ``MPI.COMM_WORLD`` and through a ``dualmpi.Comm``
whose one-link lane is closed (the Python path, dualmpi/engine/lane.py) between the same ranks,
sizes 1 B - 1 MiB, median of ROUNDS (default 9) interleaved rounds (raw, 1 hop, no lane,
2 hops, ... in each);
rank 0 prints one row per size, with each d-hop time over d x the 1-hop time, and writes them
to JSON when a path is given.  ``idle``: the
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
from dualmpi import p2p

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


def latency(rounds=9, path=None):
    """Print one row per size: raw at 1 hop, dualmpi at 1, 2, ... hops (JSON to ``path``)."""
    net = dualmpi.Comm(WORLD, _spec())
    py = dualmpi.Comm(WORLD, _spec())  # the same network without its one-link lane
    p2p.stop_lane(py)
    router = net._router
    peers = {}
    for b in range(1, SIZE):
        peers.setdefault(len(router.route(0, b).path) - 1, b)
    res = {}
    load0 = os.getloadavg()[0]
    for size in SIZES:
        buf = np.zeros(size, np.uint8)
        for _ in range(rounds):
            for h, peer in sorted(peers.items()):
                for name, comm in (("raw", WORLD), ("dualmpi", net), ("python", py)):
                    if name != "dualmpi" and h > 1:
                        continue
                    _pingpong(comm, peer, buf, 3)
                    t = _pingpong(comm, peer, buf, REPS[size])
                    if t is not None:
                        res.setdefault((size, h, name), []).append(t)
    if RANK == 0:
        load1 = os.getloadavg()[0]
        print(f"{_spec()}, {SIZE} ranks, load {load0:.2f}-{load1:.2f}; one-way latency, "
              f"median of {rounds} interleaved rounds")
        rows = []
        for size in SIZES:
            raw = float(np.median(res[(size, 1, "raw")]))
            one = float(np.median(res[(size, 1, "dualmpi")]))
            slow = float(np.median(res[(size, 1, "python")]))
            row = [f"{size:>8} B", f"raw 1 hop {raw * 1e6:8.1f} us",
                   f"no lane {slow * 1e6:8.1f} us ({slow / raw:.2f}x raw)"]
            rows.append({"bytes": size, "raw_1hop_s": raw, "python_path_1hop_s": slow,
                         "python_path_over_raw": slow / raw, "hops": {}})
            for h in sorted(peers):
                t = float(np.median(res[(size, h, "dualmpi")]))
                rows[-1]["hops"][h] = {"peer": peers[h], "dualmpi_s": t, "over_raw": t / raw,
                                       "over_d_times_1hop": t / (h * one)}
                row.append(f"{h} hop(s) {t * 1e6:8.1f} us ({t / raw:.2f}x raw, "
                           f"{t / (h * one):.2f}x {h}x1-hop)")
            print(" | ".join(row))
        if path:
            import json

            with open(path, "w") as fh:
                json.dump({"format": "dualmpi-bench-p2p-latency/1",
                           "meta": {"spec": _spec(), "ranks": SIZE, "rounds": rounds,
                                    "loadavg_start": load0, "loadavg_end": load1,
                                    "mpi_library": MPI.Get_library_version().splitlines()[0],
                                    "argv": sys.argv}, "rows": rows}, fh, indent=2)
                fh.write("\n")
            print(f"results written to {path}")
    py.Free()
    net.Free()


if __name__ == "__main__":
    if sys.argv[1] == "idle":
        idle(sys.argv[2], float(sys.argv[3]))
    else:
        latency(int(sys.argv[2]) if len(sys.argv) > 2 else 9,
                sys.argv[3] if len(sys.argv) > 3 else None)
