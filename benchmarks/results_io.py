"""What the MPI benchmarks (``engine.py``, ``packets.py``) write: one JSON file per run."""

import json
import os
import sys

from mpi4py import MPI

__all__ = ["run_meta", "write_results"]


def run_meta(spec, load, repeats, **extra):
    """Return a run's metadata: network, ranks, host, MPI library, load averages, command."""
    return {"spec": spec, "ranks": MPI.COMM_WORLD.Get_size(), "cores": os.cpu_count(),
            "mpi_library": MPI.Get_library_version().splitlines()[0],
            "loadavg_start": load[0], "loadavg_end": load[1], "repeats": repeats,
            "argv": sys.argv, **extra}


def write_results(path, fmt, meta, rows):
    """Write ``{"format", "meta", "rows"}`` to ``path`` and say so."""
    with open(path, "w") as fh:
        json.dump({"format": fmt, "meta": meta, "rows": rows}, fh, indent=2)
        fh.write("\n")
    print(f"results written to {path}")
