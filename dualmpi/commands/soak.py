"""``dualmpi soak``: many back-to-back collectives, checking every message (under mpiexec)."""

from ..collectives import COLLECTIVES
from ..errors import InputError
from .common import (agreed_memory, check_output_path, load_topology, topology_arg,
                     write_json_atomic)
from .run import check_runnable, estimate_memory, metadata, parse_sizes

__all__ = ["add_parser", "main", "soak"]


def add_parser(sub):
    """Register the ``soak`` subcommand."""
    p = sub.add_parser(
        "soak",
        help="run many back-to-back collectives and count corrupted and lost blocks",
        description="Run ITERATIONS collectives back to back through dualmpi.Comm, cycling through "
        "bcast, scatter, allgather and alltoall with rotating roots and sizes and a fresh data "
        "pattern per iteration; every message carries a CRC-32 checked at the receiver and every "
        "delivered block is compared byte by byte with its pattern. Reports the messages and "
        "blocks checked and the corrupted (checksum) and lost (not delivered intact) ones; "
        "exits 1 if any.",
        epilog="example: mpiexec -n 8 python -m mpi4py -m dualmpi soak dualcube:r=2 "
        "--iterations 1000 --json soak.json",
    )
    p.add_argument("spec", type=topology_arg, help="topology spec; one rank per node or a divisor")
    p.add_argument("--iterations", type=int, default=1000, help="collectives to run (default 1000)")
    p.add_argument("--sizes", default="64", help="block sizes in bytes, rotated (default 64)")
    p.add_argument("--nodes-per-rank", type=int, default=None, help="see dualmpi run")
    p.add_argument("--watchdog", type=float, default=120.0, metavar="SECONDS",
                   help="abort the job when a rank waits longer than this (default 120; 0: off)")
    p.add_argument("--json", metavar="FILE", help="write the report as JSON")
    p.set_defaults(func=main)


def soak(net, iterations, sizes, progress=None):
    """Run the soak on ``net`` (a :class:`dualmpi.Comm`); return the totals (same on every rank)."""
    from ..measure.collective import run_collective

    ranks = net.Get_size()
    totals = dict(iterations=0, messages=0, blocks=0, corrupted=0, lost=0)
    for i in range(iterations):
        coll = COLLECTIVES[i % len(COLLECTIVES)]
        root = (i * 5 + i // len(COLLECTIVES)) % ranks
        size = sizes[(i // len(COLLECTIVES)) % len(sizes)]
        row = run_collective(net, coll, size, root, 1, 0, salt=i + 1)
        totals["iterations"] += 1
        totals["messages"] += row["messages"]
        totals["blocks"] += row["expected"]
        totals["corrupted"] += row["checksum_failures"]
        totals["lost"] += row["missing"]
        if progress and (i + 1) % max(1, iterations // 10) == 0:
            progress(f"soak {i + 1}/{iterations}: {totals['messages']} messages, "
                     f"{totals['blocks']} blocks checked")
    return totals


def main(args):
    """Run the soak; exit 0 when nothing was corrupted or lost."""
    topo = load_topology(args.spec)
    check_runnable(topo)
    sizes = parse_sizes(args.sizes)
    if args.iterations < 1:
        raise InputError("--iterations must be >= 1")
    if args.nodes_per_rank is not None and args.nodes_per_rank < 1:
        raise InputError(f"--nodes-per-rank must be at least 1, got {args.nodes_per_rank}")
    check_output_path(args.json)
    from mpi4py import MPI

    from ..comm import Comm, _nodes_per_rank

    comm = MPI.COMM_WORLD
    q = _nodes_per_rank(topo, comm.Get_size(), args.nodes_per_rank)  # every rank alike
    estimate_memory(COLLECTIVES, sizes, comm.Get_size(), q, available=agreed_memory(comm))
    net = Comm(comm, topo, args.nodes_per_rank, watchdog=args.watchdog, verify=True)
    say = (lambda text: print(text, flush=True)) if comm.Get_rank() == 0 else None
    totals = soak(net, args.iterations, sizes, say)
    net.Free()
    bad = totals["corrupted"] + totals["lost"]
    if comm.Get_rank() == 0:
        print(" ".join(f"{k}={v}" for k, v in totals.items()))
        if args.json:
            write_json_atomic({"format": "dualmpi-soak/1", "meta": metadata(comm, topo, args),
                               "soak": totals}, args.json)
    return 1 if bad else 0
