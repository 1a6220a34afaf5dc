"""``dualmpi exec``'s guard: ``guard.c`` on MPI's profiling interface, loaded before mpi4py's MPI.

The guard (``dualmpi/engine/guard.c``) defines MPI's communication functions -- point to
point, every collective, the calls that make communicators, windows and files, and those
that join processes -- and refuses each one made on a *program* communicator while it is
armed: ``MPI_COMM_WORLD`` and the handles :meth:`Guard.mark` names (the stand-in for
``MPI.COMM_WORLD``, :mod:`dualmpi.exec.world`).  A call through mpi4py gets an error whose
string is one line naming the call (mpi4py raises it as ``MPI.Exception``); a call from
anywhere else (C code, ctypes) prints that line and aborts the job (exit code 2).
dualmpi's own communicators pass: duplicates of the world made under :meth:`Guard.internal`.

:func:`load` builds the library with the MPI library's ``mpicc`` and caches it exactly as
the compiled round loop is (:func:`dualmpi.engine.cloop.build`), then loads it with
``RTLD_GLOBAL`` and registers it with ``mpi4py.profile``, before ``from mpi4py import MPI``:
mpi4py's MPI extension, loaded after it, binds its ``MPI_*`` symbols to the guard's, and
the guard hands every call it lets pass to ``PMPI_*``.
"""

import contextlib
import ctypes
import os
import sys
from pathlib import Path

from ..errors import DualmpiError
from . import cloop

__all__ = ["SOURCE", "LIBRARY", "Guard", "load", "EXIT_CODE"]

#: The C source of the guard.
SOURCE = Path(__file__).with_name("guard.c")

#: What the guard must export (a library without them is not the guard).
SYMBOLS = ("dualmpi_guard_arm", "dualmpi_guard_internal", "dualmpi_guard_mark",
           "dualmpi_guard_is_program", "dualmpi_guard_set_python", "dualmpi_guard_refusals",
           "dualmpi_guard_last", "dualmpi_guard_handle_size")

#: The guard, as :func:`dualmpi.engine.cloop.build` makes it.
LIBRARY = cloop.Library("guard", SOURCE, SYMBOLS, "dualmpi exec guard",
                        "dualmpi exec cannot guard the program")

#: Exit code of a job ended by a refused call made outside mpi4py (``GUARD_EXIT`` in guard.c).
EXIT_CODE = 2


class Guard:
    """The loaded guard: arm it, mark the program's communicators, read what it refused.

    Parameters
    ----------
    lib : ctypes.CDLL
        The guard library (:func:`load`).
    """

    def __init__(self, lib):
        self.lib = lib
        handle = ctypes.c_void_p if lib.dualmpi_guard_handle_size() == 8 else ctypes.c_int
        self._handle = handle
        lib.dualmpi_guard_arm.argtypes = [ctypes.c_int]
        lib.dualmpi_guard_internal.argtypes = [ctypes.c_int]
        lib.dualmpi_guard_mark.argtypes = [handle, ctypes.c_char_p]
        lib.dualmpi_guard_is_program.argtypes = [handle]
        lib.dualmpi_guard_set_python.argtypes = [ctypes.c_char_p]
        lib.dualmpi_guard_last.restype = ctypes.c_char_p

    def arm(self, on=True):
        """Refuse calls on program communicators from now on (``on=False``: let them pass)."""
        self.lib.dualmpi_guard_arm(1 if on else 0)

    @contextlib.contextmanager
    def internal(self):
        """Within the block, communicators made from program ones are dualmpi's (they pass)."""
        self.lib.dualmpi_guard_internal(1)
        try:
            yield
        finally:
            self.lib.dualmpi_guard_internal(-1)

    def mark(self, comm, label):
        """Mark ``comm`` (an ``MPI.Comm``) as the program's; ``label`` names it in refusals."""
        if self.lib.dualmpi_guard_mark(comm.handle, label.encode()[:63]) != 0:
            raise DualmpiError("dualmpi exec: the guard's table of program communicators is "
                               "full (256)")

    def is_program(self, comm):
        """True when calls on ``comm`` are refused while the guard is armed."""
        return bool(self.lib.dualmpi_guard_is_program(comm.handle))

    def bind_python(self, path):
        """Name mpi4py's MPI extension (``MPI.__file__``): its calls get an exception."""
        if self.lib.dualmpi_guard_set_python(os.fsencode(path)) != 0:
            raise DualmpiError(f"dualmpi exec: cannot read mpi4py's MPI extension {path}")

    @property
    def refusals(self):
        """How many calls the guard refused so far."""
        return int(self.lib.dualmpi_guard_refusals())

    @property
    def last(self):
        """The line of the last refused call ("" before any)."""
        return self.lib.dualmpi_guard_last().decode(errors="replace")


def _mpi_identity():
    """Return what identifies the MPI library before it is loaded: its ``mpicc`` and that file's
    size and modification time (a reinstalled library rebuilds the guard)."""
    cc = cloop.mpicc()
    if cc is None:
        return ""
    try:
        st = os.stat(os.path.realpath(cc))
    except OSError:
        return cc
    return f"{os.path.realpath(cc)} {st.st_size} {st.st_mtime_ns}"


def load():
    """Build (or find in the cache) and load the guard before mpi4py's MPI; return a :class:`Guard`.

    Raises
    ------
    DualmpiError
        mpi4py's MPI module is loaded already (its symbols are bound: the guard would see
        nothing), or the guard cannot be built (no ``mpicc``, the compiler failed: the reason).
    """
    if "mpi4py.MPI" in sys.modules:
        raise DualmpiError("dualmpi exec: mpi4py's MPI module was imported before the guard "
                           "could be loaded; run `python -m mpi4py -m dualmpi exec ...` and "
                           "import nothing before it")
    lib, why = cloop.build(LIBRARY, _mpi_identity(), mode=os.RTLD_GLOBAL | os.RTLD_NOW)
    if lib is None:
        raise DualmpiError(f"dualmpi exec: cannot build its guard {SOURCE.name} with the MPI "
                           f"library's mpicc ({why}); without it a program's calls below mpi4py "
                           "are unguarded (--no-guard runs it so, at your risk)")
    import mpi4py

    path = Path(lib._name)
    mpi4py.profile(path.name, path=[str(path.parent)])
    return Guard(lib)
