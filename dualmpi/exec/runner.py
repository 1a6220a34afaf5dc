"""Run an unmodified mpi4py program, ``MPI.COMM_WORLD`` standing for a network (``dualmpi exec``).

The order matters: the guard (:mod:`dualmpi.engine.guard`) is loaded before mpi4py's MPI
module; then dualmpi's own duplicate of the world carries the network
(:class:`dualmpi.Comm`), another duplicate marked as the program's is the handle of the
stand-in (:class:`dualmpi.exec.world.World`), which becomes ``MPI.COMM_WORLD``; the guard is
armed and the program runs as ``python prog.py`` would run it (``runpy.run_path``,
``__name__ == "__main__"``, ``sys.argv`` and ``sys.path[0]`` as it expects).  When it ends
normally every rank sends its counts to rank 0, which prints the report on stderr (the
program's stdout is left alone) and writes it with ``--report``.  A program that exits with
a non-zero code or raises ends the whole job as under ``python -m mpi4py``: the same
traceback, the same exit code (``MPI_Abort`` with the program's status, at once).
"""

import os
import runpy
import sys
import traceback

from ..errors import InputError
from . import report as _report

__all__ = ["Session", "run", "run_program"]


class Session:
    """What the stand-ins of one run share: the counts, the network's options, ``Dup`` and ``Free``.

    Parameters
    ----------
    MPI : module
        mpi4py's MPI module.
    guard : dualmpi.engine.guard.Guard or None
        The guard (None with ``--no-guard``).
    own : mpi4py.MPI.Intracomm
        dualmpi's duplicate of the world: every network of the run is built on it.
    topo, q, options
        The network, nodes per rank and :class:`dualmpi.Comm` options of every network.
    """

    def __init__(self, MPI, guard, own, topo, q, options):
        self.MPI, self.guard, self.own = MPI, guard, own
        self.topo, self.q, self.options = topo, q, dict(options)
        self.calls = {}
        #: the same per communicator kind: ``{kind: {method: count}}`` (dualmpi.exec.world.count)
        self.kinds = {}
        self.nets = []            # live networks (the primary one first)
        self.freed = _report.empty_stats()  # counts of networks the program freed
        self.finalized = False

    def network(self):
        """Return a new :class:`dualmpi.Comm` of the run's network (collective)."""
        from ..comm import Comm

        net = Comm(self.own, self.topo, self.q, **self.options)
        self.nets.append(net)
        return net

    def dup(self, world):
        """Return a new stand-in: a marked duplicate of ``world``'s handle, a new network."""
        from .world import World

        MPI = self.MPI
        if self.guard is not None:
            with self.guard.internal():
                handle = MPI.Intracomm(world).Dup()
            self.guard.mark(handle, "a Dup of MPI.COMM_WORLD")
        else:
            handle = MPI.Intracomm(world).Dup()
        return World(handle, self.network(), self)

    def free(self, world):
        """Free a stand-in made by :meth:`dup`: keep its network's counts, free the network and
        the handle."""
        net = world._net
        if net in self.nets:
            _report.add_stats(self.freed, net.stats())
            self.nets.remove(net)
            net.Free()
        self.MPI.Intracomm.Free(world)

    def stats(self):
        """Return this rank's counts over every network of the run (freed ones included)."""
        total = _report.add_stats(_report.empty_stats(), self.freed)
        for net in self.nets:
            _report.add_stats(total, net.stats())
        return total

    def finalize(self):
        """``MPI.Finalize`` of the program: noted; MPI ends after the report (mpi4py's exit)."""
        self.finalized = True

    def is_finalized(self):
        """``MPI.Is_finalized`` of the program: True once it called ``MPI.Finalize``."""
        return self.finalized


def run_program(path, args):
    """Run the program at ``path`` with ``args`` as ``python path args...`` would.

    Returns the exit status (0 when it ends normally; ``sys.exit(n)``: ``n``).  An exception
    the program does not handle is printed as Python prints it (from the program's first
    frame) and the status is 1 (130 for ``KeyboardInterrupt``), as under
    ``python -m mpi4py``.
    """
    saved = sys.argv[:], sys.path[0] if sys.path else None
    sys.argv[:] = [str(path), *args]
    folder = os.path.dirname(os.path.realpath(path))
    if sys.path:
        sys.path[0] = folder
    else:  # pragma: no cover - an interpreter without sys.path
        sys.path.append(folder)
    try:
        runpy.run_path(str(path), run_name="__main__")
        return 0
    except SystemExit as exc:
        return _exit_status(exc.code)
    except BaseException as exc:  # noqa: BLE001 - the program's: printed as Python would
        _print_exception(exc, os.path.realpath(path))
        return 130 if isinstance(exc, KeyboardInterrupt) else 1
    finally:
        sys.stdout.flush()
        sys.argv[:] = saved[0]
        if saved[1] is not None:
            sys.path[0] = saved[1]


def _exit_status(code):
    """Return the exit status of ``sys.exit(code)`` (a text is printed on stderr: status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr, flush=True)
    return 1


def _print_exception(exc, program):
    """Print ``exc``'s traceback from the program's first frame (runpy and dualmpi left out)."""
    tb = exc.__traceback__
    while tb is not None and os.path.realpath(tb.tb_frame.f_code.co_filename) != program:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb if tb is not None else exc.__traceback__)
    sys.stderr.flush()


def run(args, topo, clock, other=None):
    """Run the program of ``args`` on ``topo`` under mpiexec; return the exit status.

    ``clock`` prices the report's model time; ``other``: the report of the run to compare
    with (``--compare-with``), read by the caller.
    """
    program = args.program
    guard = None
    if not args.no_guard:
        from ..engine import guard as _guard

        guard = _guard.load()  # before mpi4py's MPI module: raises if it cannot
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    if guard is not None:
        guard.bind_python(MPI.__file__)
    own = world.Dup()   # dualmpi's: every network is built on it
    handle = world.Dup()  # the program's: the stand-in's handle
    handle.Set_name("MPI_COMM_WORLD")
    options = {"watchdog": args.watchdog}
    if args.shape:
        options["shape"] = args.shape
    from ..comm import _nodes_per_rank

    q = _nodes_per_rank(topo, world.Get_size(), args.nodes_per_rank)
    session = Session(MPI, guard, own, topo, q, options)
    net = session.network()
    from .world import World, install

    standin = World(handle, net, session, primary=True)
    if guard is None:
        print("dualmpi exec: warning: --no-guard: calls below mpi4py "
              "(MPI.Intracomm(MPI.COMM_WORLD), mpi4py.util.pkl5, C extensions, windows, files) are "
              "not checked and may move data directly", file=sys.stderr, flush=True)
    else:
        guard.mark(handle, "MPI.COMM_WORLD's handle")
    install(standin)
    MPI.Finalize, MPI.Is_finalized = session.finalize, session.is_finalized
    if guard is not None:
        guard.arm()

    status = run_program(program, args.args)
    if status != 0:
        # the whole job ends with the program's status, as under python -m mpi4py -- at once:
        # exit handlers (a router's collective close) would wait for ranks that went on
        sys.stdout.flush()
        sys.stderr.flush()
        own.Abort(status)

    rank = own.Get_rank()
    record = {"calls": dict(session.calls),
              "kinds": {kind: dict(calls) for kind, calls in session.kinds.items()},
              "stats": _report.record_stats(session.stats()),
              "refusals": 0 if guard is None else guard.refusals,
              "refusal": None if guard is None or not guard.refusals else guard.last}
    records = own.gather(record, root=0)
    if rank == 0:
        from ..commands.run import metadata

        meta = metadata(own, topo, args)
        meta.update(guard=guard is not None, nodes_per_rank=q, load_average=list(os.getloadavg()))
        rep = _report.build(records, topo, q, clock, meta, program=program, args=args.args)
        lines = _report.text(rep)
        if other is not None:
            rep["compare"] = {"path": str(args.compare_with), "spec": other["spec"],
                              "report": {k: other[k] for k in ("spec", "nodes", "messages",
                                                               "bytes", "hop_rounds", "model")}}
            lines += _report.compare(rep, other, args.compare_with)
        sys.stdout.flush()
        print("\n".join(lines), file=sys.stderr, flush=True)
        if args.report:
            from ..commands.common import write_json_atomic

            write_json_atomic(rep, args.report, "--report")
            print(f"dualmpi exec: report written to {args.report}", file=sys.stderr, flush=True)
    for net in list(session.nets):
        net.Free()
    session.nets.clear()
    return 0


def check_program(path):
    """Raise :class:`InputError` unless ``path`` is a readable file (before MPI starts)."""
    if not os.path.exists(path):
        raise InputError(f"program {path}: no such file")
    if not os.path.isfile(path):
        raise InputError(f"program {path}: not a file")
    if not os.access(path, os.R_OK):
        raise InputError(f"program {path}: not readable")
