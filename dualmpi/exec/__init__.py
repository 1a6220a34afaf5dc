"""``dualmpi exec``: an unmodified mpi4py program with ``MPI.COMM_WORLD`` standing for a network.

Under ``mpiexec -n R python -m mpi4py -m dualmpi exec SPEC -- prog.py args...`` the program
runs as ``python prog.py args...`` would, except that what it sends through
``MPI.COMM_WORLD`` travels over SPEC's links (:mod:`dualmpi.exec.world`), every other road
to MPI between its processes is refused with one line naming the call (the guard,
:mod:`dualmpi.engine.guard`), and at the end rank 0 prints on stderr what crossed which
links and what it would cost (:mod:`dualmpi.exec.report`).  docs/user-guide.md, "Your own
program", walks through it.
"""

import argparse

from ..commands.common import add_fault_args
from ..errors import InputError

__all__ = ["add_parser", "main", "FORMAT", "compare_refusal"]

#: Format tag of the ``--report`` file (docs/results.md).
FORMAT = "dualmpi-exec/2"


def add_parser(sub):
    """Register the ``exec`` subcommand."""
    p = sub.add_parser(
        "exec",
        help="run an unmodified mpi4py program with MPI.COMM_WORLD standing for the network "
        "(under mpiexec)",
        description="Run PROGRAM (an ordinary mpi4py program, unchanged) with MPI.COMM_WORLD "
        "standing for SPEC: its collectives (buffer, object, nonblocking), point-to-point calls, "
        "Dup()s and the communicators derived from it (Split, Create_cart, ...) travel over the "
        "network's links through dualmpi.Comm, one node (or a block of nodes) per rank; "
        "MPI.COMM_SELF, Wtime and the local queries behave as before. Every other road to MPI "
        "between the program's processes -- an MPI.Intracomm or mpi4py.util.pkl5 communicator "
        "made from MPI.COMM_WORLD, C code calling libmpi, windows, files, spawned or connected "
        "processes -- stops with one line naming the call (a guard on MPI's profiling "
        "interface, built with the MPI library's mpicc). The program's output, exit code and "
        "exceptions are its own (an unhandled exception or a non-zero exit ends the whole job, "
        "as under python -m mpi4py). At the end rank 0 prints on stderr the calls per method "
        "(and per derived communicator), the link messages and bytes, the busiest links, the "
        "hop rounds, the point-to-point messages and the model time: per rank, each collective "
        "call's schedule (steps*t_s + step bytes*t_w + hop rounds*t_h) plus each message it "
        "sent (t_s + m*t_w + d*t_h), the slowest rank's; --report writes it as JSON (format "
        "dualmpi-exec/2).",
        epilog="example: mpiexec -n 8 python -m mpi4py -m dualmpi exec dualcube:r=2 "
        "--report run.json -- prog.py --steps 10",
    )
    p.add_argument("spec", help="topology spec; one rank per node, or a divisor of the node count")
    p.add_argument("program", metavar="PROGRAM", help="the mpi4py program (a .py file)")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                   help="the program's arguments (put -- before PROGRAM when they start with -)")
    p.add_argument("--nodes-per-rank", type=int, default=None, metavar="Q",
                   help="nodes played by each rank (default nodes/ranks)")
    p.add_argument("--report", metavar="FILE", help="write the report as JSON (dualmpi-exec/2)")
    p.add_argument("--model", metavar="ts=S,tw=S,th=S",
                   help="link parameters of the report's model time (seconds, seconds per byte, "
                   "seconds; default ts=2e-6,tw=1e-9,th=5e-8, README's)")
    p.add_argument("--shape", metavar="ts=S,tw=S,th=S",
                   help="shape the links: each message holds its sending port t_s + n*t_w and "
                   "each hop t_h, so wall time follows the model (dualmpi.Comm's shape)")
    p.add_argument("--watchdog", type=float, default=120.0, metavar="SECONDS",
                   help="abort the job when a dualmpi call waits longer than this (default 120; "
                   "0: off)")
    p.add_argument("--compare", action="store_true",
                   help="compare with the hypercube of as many nodes: says why one job cannot "
                   "run the program twice and gives the two commands (see --compare-with)")
    p.add_argument("--compare-with", metavar="FILE",
                   help="the --report of the same program on another network (e.g. the "
                   "hypercube): rank 0 prints both side by side with their ratios")
    p.add_argument("--no-guard", action="store_true",
                   help="run without the guard below mpi4py (when it cannot be built): roads "
                   "around MPI.COMM_WORLD's methods are then not checked")
    add_fault_args(p)
    p.set_defaults(func=main)


def compare_refusal(topo, ranks_hint="R"):
    """Return the :class:`InputError` that ``--compare`` raises: why not in one job, and how.

    >>> from dualmpi.topology import from_spec
    >>> "hypercube:n=3" in str(compare_refusal(from_spec("dualcube:r=2")))
    True
    """
    p = topo.num_nodes
    if p & (p - 1):
        return InputError(f"--compare: no hypercube has {p} nodes (a power of two); run the "
                          "program on another network with --report FILE, then here with "
                          "--compare-with FILE")
    cube = f"hypercube:n={p.bit_length() - 1}"
    return InputError(
        f"--compare: an unmodified program cannot run twice in one job (its output, files, "
        f"module state and exit happen once), so compare in two jobs: first `mpiexec -n "
        f"{ranks_hint} python -m mpi4py -m dualmpi exec {cube} --report {cube.replace(':', '-')}"
        f".json -- PROGRAM ARGS`, then this command with --compare-with "
        f"{cube.replace(':', '-')}.json instead of --compare")


def main(args):
    """Run the program on the network; return its exit status (0 after the report)."""
    from ..apps.record import DEFAULT_CLOCK
    from ..commands.common import apply_faults, check_output_path, load_topology
    from ..commands.run import check_runnable
    from . import report, runner

    topo = load_topology(args.spec)
    check_runnable(topo)  # before the faults: --fail-random lists every link
    topo = apply_faults(topo, args)
    runner.check_program(args.program)
    if args.nodes_per_rank is not None and args.nodes_per_rank < 1:
        raise InputError(f"--nodes-per-rank must be at least 1, got {args.nodes_per_rank}")
    if args.watchdog < 0:
        raise InputError(f"--watchdog must be >= 0 seconds, got {args.watchdog:g}")
    clock = dict(DEFAULT_CLOCK)
    if args.model is not None:
        from ..model.clock import parse_shape

        try:
            clock = parse_shape(args.model)
        except ValueError as exc:
            raise InputError(f"--model: {exc}") from None
    if args.shape is not None:
        from ..model.clock import parse_shape

        try:
            parse_shape(args.shape)
        except ValueError as exc:
            raise InputError(f"--shape: {exc}") from None
    check_output_path(args.report, "--report")
    if args.compare:
        raise compare_refusal(topo, _ranks_hint(topo, args.nodes_per_rank))
    other = report.read(args.compare_with) if args.compare_with else None
    return runner.run(args, topo, clock, other)


def _ranks_hint(topo, q):
    """Return the rank count to suggest for the other job (the same ranks as this one)."""
    import os

    size = os.environ.get("OMPI_COMM_WORLD_SIZE") or os.environ.get("PMI_SIZE")
    if size:
        return size
    return str(topo.num_nodes // q) if q else str(topo.num_nodes)
