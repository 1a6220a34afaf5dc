"""Estimate a ``dualmpi simulate`` run's memory and time from the network alone, and refuse
what cannot fit or finish (pure: no MPI)."""

from .collectives.schedule import COLLECTIVES as PAPER_COLLECTIVES
import sys

from .resources import MiB, format_bytes, format_seconds, require_memory, require_time
from .simulator import STREAM_ABOVE, VECTOR_ABOVE
from .topology import HDN, DualCube, Hypercube, MetaCube

__all__ = ["estimate", "check_simulation", "COSTS", "BASE_BYTES", "ANNOUNCE_S"]

#: Measured cost per unit of work of each simulation, on 2 busy cores (Python 3.11):
#: (bytes per unit, seconds per unit).  Schedule replay of alltoall and rings: per message
#: (its route and block) and per link transfer -- hypercube:n=11 took 186 s and 6.5 GB for
#: 4.2 M messages and 23 M transfers; allgather: per (node, block) pair held --
#: hypercube:n=13 took 125 s and 9.0 GB; stream: per (source, destination) pair --
#: dualcube:r=8 took 138 s and 1.07 GB for 2^30 pairs; bcast and scatter replayed: per node and
#: round (scatter on hypercube:n=13: 0.23 s); the vector method: per node and round for bcast
#: and scatter (hypercube:n=20: 2.6 s, 80 MB), per pair for allgather (hypercube:n=15: 30 s, 1.2 GB).
COSTS = {
    "message": (700, 0.0),
    "transfer": (200, 8e-6),
    "held": (140, 2e-6),
    "tree": (400, 3e-6),
    "pair": (1, 1.3e-7),
    "vtree": (5, 2.5e-7),
    "vpair": (1.2, 3e-8),
}
#: The interpreter, numpy and the topology before any simulation.
BASE_BYTES = 64 * MiB


def _method(topo, collective, variant, method):
    """Return the method ``simulate`` picks for ``method="auto"`` (see dualmpi.simulator.simulate)."""
    if method != "auto":
        return method
    symmetric = type(topo) in (Hypercube, DualCube, MetaCube)
    if hasattr(topo, "failed_links") or collective not in PAPER_COLLECTIVES or not symmetric:
        return "schedule"
    if collective == "alltoall":
        return "stream" if topo.num_nodes > STREAM_ABOVE else "schedule"
    vector = topo.num_nodes > VECTOR_ABOVE and variant == "corrected" and not isinstance(topo, HDN)
    return "vector" if vector else "schedule"


def estimate(topo, collective, variant="corrected", method="auto"):
    """Return ``(method, bytes, seconds)``: the simulation's estimated peak memory and run time.

    Schedule replay keeps every message and link transfer (alltoall, rings: ``p(p-1)``
    messages over ``avg_distance`` links each) or every (node, block) pair it holds
    (allgather: ``p^2``); the stream method keeps a ``p x p`` delivery table and does
    ``p(p-1)`` pair updates; bcast, scatter and the vector method are linear in ``p``
    per round.  Constants: :data:`COSTS`.

    Examples
    --------
    >>> from dualmpi.topology import from_spec
    >>> method, need, secs = estimate(from_spec("hypercube:n=11"), "alltoall", method="schedule")
    >>> method, round(need / 2**30, 1), round(secs)
    ('schedule', 7.1, 185)
    """
    method = _method(topo, collective, variant, method)
    p = topo.num_nodes
    formulas = topo.formulas() if hasattr(topo, "formulas") else {}
    avg = formulas.get("avg_distance") or formulas.get("diameter") or max(p - 1, 1).bit_length()
    if hasattr(topo, "failed_links"):
        avg *= 2  # detours
    work = {}
    if method == "stream":
        work["pair"] = p * p
    elif method == "schedule" and (collective == "alltoall" or collective not in PAPER_COLLECTIVES):
        work["message"] = p * (p - 1)
        work["transfer"] = p * p * avg if collective == "alltoall" else p * (p - 1)
    elif method == "schedule" and collective == "allgather":
        work["held"] = p * p
    elif method == "vector" and collective == "allgather":
        work["vpair"] = p * p
    elif method == "vector":
        work["vtree"] = p * max(p - 1, 1).bit_length()
    else:  # bcast and scatter replayed
        work["tree"] = p * max(p - 1, 1).bit_length()
    need = BASE_BYTES + sum(COSTS[k][0] * n for k, n in work.items())
    seconds = sum(COSTS[k][1] * n for k, n in work.items())
    return method, need, seconds


#: Runs estimated longer than this (seconds) are announced on stderr before they start.
ANNOUNCE_S = 10.0


def check_simulation(topo, collective, variant="corrected", method="auto"):
    """Raise :class:`~dualmpi.resources.ResourceError` when the simulation cannot fit or finish.

    A run that fits but takes longer than :data:`ANNOUNCE_S` is announced on stderr
    with its estimate, so a long silence is not taken for a hang.
    """
    method, need, seconds = estimate(topo, collective, variant, method)
    what = f"simulate {collective} on {topo.spec} ({topo.num_nodes:,} nodes, {method} method)"
    require_memory(need, what)
    require_time(seconds, what, hint=f"`dualmpi model {topo.spec}` predicts it from closed forms")
    if seconds > ANNOUNCE_S:
        print(f"dualmpi: {what}: estimated {format_seconds(seconds)} and {format_bytes(need)}",
              file=sys.stderr, flush=True)


