"""``dualmpi soak``: many back-to-back collectives, checking every message (under mpiexec)."""

import json

from ..collectives import COLLECTIVES, build_schedule
from ..errors import InputError
from .common import load_topology, topology_arg
from .run import check_runnable, metadata

__all__ = ["add_parser", "main", "soak"]


def add_parser(sub):
    """Register the ``soak`` subcommand."""
    p = sub.add_parser(
        "soak",
        help="run many back-to-back collectives and count corrupted/lost/duplicated/misrouted blocks",
        description="Run ITERATIONS collectives back to back, cycling through bcast, scatter, "
        "allgather and alltoall with rotating roots and a fresh data pattern per iteration; "
        "every payload carries a CRC-32 checked at the receiver. Reports the messages and "
        "blocks checked and the corrupted (checksum), lost (missing), duplicated and "
        "misrouted (intact but wrong contents) ones; exits 1 if any.",
        epilog="example: mpiexec -n 8 python -m mpi4py -m dualmpi soak dualcube:r=2 "
        "--iterations 1000 --json soak.json",
    )
    p.add_argument("spec", type=topology_arg, help="topology spec; one rank per node")
    p.add_argument("--iterations", type=int, default=1000, help="collectives to run (default 1000)")
    p.add_argument("--size", type=int, default=64, help="block size in bytes (default 64)")
    p.add_argument("--json", metavar="FILE", help="write the report as JSON")
    p.set_defaults(func=main)


def soak(link, topo, iterations, size, progress=None):
    """Run the soak on ``link``; return the totals (same dict on every rank)."""
    p = topo.num_nodes
    schedules = {}
    totals = dict(iterations=0, messages=0, blocks=0, corrupted=0, lost=0, duplicated=0,
                  misrouted=0)
    from ..executors.mpi import run_schedule

    for i in range(iterations):
        coll = COLLECTIVES[i % len(COLLECTIVES)]
        root = (i * 5 + i // len(COLLECTIVES)) % p
        key = (coll, root if coll in ("bcast", "scatter") else None)
        if key not in schedules:
            schedules[key] = build_schedule(coll, topo, root)
        row = run_schedule(link, schedules[key], size, 1, 0, salt=i + 1)
        totals["iterations"] += 1
        totals["messages"] += row["messages"]
        totals["blocks"] += row["expected"]
        totals["corrupted"] += row["checksum_failures"]
        totals["lost"] += row["missing"]
        totals["duplicated"] += row["duplicates"]
        totals["misrouted"] += max(0, row["corrupt"] - row["checksum_failures"])
        if progress and (i + 1) % max(1, iterations // 10) == 0:
            progress(f"soak {i + 1}/{iterations}: {totals['messages']} messages, "
                     f"{totals['blocks']} blocks checked")
    return totals


def main(args):
    """Run the soak; exit 0 when nothing was corrupted, lost, duplicated or misrouted."""
    topo = load_topology(args.spec)
    check_runnable(topo)
    if args.iterations < 1 or args.size < 0:
        raise InputError("--iterations must be >= 1 and --size >= 0")
    from mpi4py import MPI

    from ..executors.mpi import LinkComm

    comm = MPI.COMM_WORLD
    link = LinkComm(comm, topo)
    say = (lambda text: print(text, flush=True)) if comm.Get_rank() == 0 else None
    totals = soak(link, topo, args.iterations, args.size, say)
    link.free()
    bad = totals["corrupted"] + totals["lost"] + totals["duplicated"] + totals["misrouted"]
    if comm.Get_rank() == 0:
        print(" ".join(f"{k}={v}" for k, v in totals.items()))
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"meta": metadata(comm, topo, args), "soak": totals}, fh, indent=2)
                fh.write("\n")
    return 1 if bad else 0
