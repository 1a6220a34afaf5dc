"""The compiled round loop: ``rounds.c`` built with the MPI library's ``mpicc``, or nothing.

:func:`load` compiles ``dualmpi/engine/rounds.c`` once per machine (cached by a hash
of the source, the compiler and the MPI library) and returns the loaded library, or
``None`` when it cannot — no ``mpicc``, no C compiler, ``DUALMPI_CLOOP=0`` — in which
case the engine runs its rounds in Python (:class:`~dualmpi.engine.mpi.MPIRunner`),
with the same requests and the same messages.  Ranks that start together compile
once: a file lock serialises them and the library is renamed into place atomically.

The cache is checked before it is loaded: beside ``rounds-<key>.so`` a record
``rounds-<key>.so.sha256`` holds its size and SHA-256, written when it was built.  A
library that does not match its record (cut short by a full disk, or a foreign file at
that path) is never opened: it is rebuilt, and when that fails the rounds run in
Python, with one line on stderr saying why.

:func:`build` is that machinery for any C source of the package built with ``mpicc``
(``dualmpi exec``'s guard, :mod:`dualmpi.engine.guard`, is the other one).
"""

import ctypes
import hashlib
import os
import platform
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["load", "reason", "build", "extension", "Library", "SOURCE", "cache_dir", "mpicc"]

#: The C source of the loop.
SOURCE = Path(__file__).with_name("rounds.c")

#: The functions the engine calls; a library without them is not this loop.
SYMBOLS = ("dualmpi_request_size", "dualmpi_fields", "dualmpi_run", "dualmpi_step_fields",
           "dualmpi_istart", "dualmpi_start_fields", "dualmpi_mode_code", "dualmpi_python_code",
           "dualmpi_istep", "dualmpi_iwait", "dualmpi_alarm_code", "dualmpi_hook_code",
           "dualmpi_future", "dualmpi_nx_fields", "dualmpi_nexchange",
           "dualmpi_npost", "dualmpi_ntest", "dualmpi_nwait", "dualmpi_combine",
           "dualmpi_kernel_ops", "dualmpi_kernel_types", "dualmpi_once", "dualmpi_once_fields")


class Library:
    """A C source of the package built with ``mpicc`` into the cache (see :func:`build`).

    ``name`` prefixes the cached file (``<name>-<key>.so``), ``symbols`` are functions the
    library must have, ``what`` names it in warnings ("compiled round loop") and
    ``instead`` says what happens without it ("rounds run in Python"); ``flags`` are extra
    compiler arguments (include directories: part of the cache key).
    """

    def __init__(self, name, source, symbols, what, instead, flags=()):
        self.name, self.source, self.symbols = name, Path(source), tuple(symbols)
        self.what, self.instead, self.flags = what, instead, tuple(flags)


#: The round loop, as :func:`build` makes it.
ROUNDS = Library("rounds", SOURCE, SYMBOLS, "compiled round loop", "rounds run in Python")

_loaded = {}


def reason():
    """Return why the compiled loop is not in use ("" when it is, None before :func:`load`)."""
    return _loaded.get("reason")


def cache_dir():
    """Return the directory for the compiled library (``DUALMPI_CACHE``, else the user's cache)."""
    env = os.environ.get("DUALMPI_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dualmpi"


def mpicc():
    """Return the ``mpicc`` of the MPI library mpi4py uses (see :func:`_mpicc`), or None."""
    return _mpicc()


def _mpicc():
    """Return the ``mpicc`` of the MPI library mpi4py uses: next to the interpreter, else PATH."""
    here = Path(sys.executable).parent / "mpicc"
    if here.exists() and os.environ.get("DUALMPI_SYSTEM_MPI", "0") != "1":
        return str(here)
    return shutil.which("mpicc")


def load(library_version=""):
    """Return the compiled loop (a :class:`ctypes.CDLL`), or None with :func:`reason` set.

    ``library_version`` (``MPI.Get_library_version()``) is part of the cache key.
    """
    if "lib" in _loaded:
        return _loaded["lib"]
    lib, why = None, ""
    try:
        if os.environ.get("DUALMPI_CLOOP", "1") == "0":
            why = "DUALMPI_CLOOP=0"
        else:
            lib, why = build(ROUNDS, library_version)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        lib, why = None, f"{type(exc).__name__}: {exc}"
    if lib is not None:
        lib.dualmpi_request_size.restype = ctypes.c_int
        lib.dualmpi_fields.restype = ctypes.c_int
        lib.dualmpi_run.restype = ctypes.c_int
        lib.dualmpi_run.argtypes = [ctypes.c_void_p]
        lib.dualmpi_step_fields.restype = ctypes.c_int
        lib.dualmpi_istep.restype = ctypes.c_int
        lib.dualmpi_istep.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.dualmpi_iwait.restype = ctypes.c_int
        lib.dualmpi_iwait.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        lib.dualmpi_istart.restype = ctypes.c_int
        lib.dualmpi_istart.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64] * 2
        lib.dualmpi_start_fields.restype = ctypes.c_int
        lib.dualmpi_mode_code.restype = ctypes.c_int
        lib.dualmpi_python_code.restype = ctypes.c_int
        lib.dualmpi_alarm_code.restype = ctypes.c_int
        lib.dualmpi_hook_code.restype = ctypes.c_int
        lib.dualmpi_future.restype = ctypes.c_int
        lib.dualmpi_nx_fields.restype = ctypes.c_int
        for fn in (lib.dualmpi_nexchange, lib.dualmpi_npost, lib.dualmpi_ntest, lib.dualmpi_nwait):
            fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_void_p]
        lib.dualmpi_combine.restype = ctypes.c_int
        lib.dualmpi_combine.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int64] * 4
        lib.dualmpi_kernel_ops.restype = lib.dualmpi_kernel_types.restype = ctypes.c_int
    _loaded.update(lib=lib, reason=why)
    return lib


def build(library, library_version="", mode=None):
    """Compile (or find and verify) ``library``; return ``(CDLL or None, reason)``.

    ``library`` is a :class:`Library`; ``library_version`` joins the cache key (the
    source, the compiler's path and the machine are always in it); ``mode`` is passed to
    :class:`ctypes.CDLL` (e.g. ``os.RTLD_GLOBAL``, so that libraries loaded later resolve
    their symbols against it).  ``reason`` is "" when the library is in use, else why not.
    """
    cc = _mpicc()
    if cc is None:
        return None, "no mpicc"
    source = library.source.read_bytes()
    key = hashlib.sha256(b"\0".join([source, cc.encode(), library_version.encode(),
                                     platform.machine().encode(),
                                     *(f.encode() for f in library.flags)])).hexdigest()[:16]
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".probe"
        probe.touch()
    except OSError:
        folder = Path(tempfile.gettempdir()) / f"dualmpi-{os.getuid()}"
        folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{library.name}-{key}.so"
    lib, problem = _open_verified(target, library, mode)
    if lib is not None:
        return lib, ""
    import fcntl

    with open(folder / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lib, problem = _open_verified(target, library, mode)  # built meanwhile by another rank?
        if lib is not None:
            return lib, ""
        why = _compile(cc, key, target, library)
        if why:
            if problem:
                _warn(library, f"{target}: {problem}; rebuilding it failed ({why}): "
                      f"{library.instead}")
            return None, why
        lib, again = _open_verified(target, library, mode)
    if lib is None:
        _warn(library, f"{target}: rebuilt, but {again}: {library.instead}")
        return None, again
    if problem:
        _warn(library, f"{target}: {problem}; rebuilt")
    return lib, ""


def extension(make, init, switch, memo):
    """Load a CPython extension of the package once per process; return its module or None.

    ``make()`` returns its :class:`Library`, ``init`` is its ``PyInit_`` function's name,
    ``switch`` the environment variable that turns it off (``=0``); ``memo`` (a dict of the
    caller's) keeps ``module`` and ``reason`` ("" when in use, else why not) for the process.
    """
    if "module" in memo:
        return memo["module"]
    module, why = None, ""
    if os.environ.get(switch, "1") == "0":
        why = f"{switch}=0"
    else:
        from mpi4py import MPI

        try:
            lib, why = build(make(), MPI.Get_library_version())
            if lib is not None:
                module = ctypes.PYFUNCTYPE(ctypes.py_object)((init, lib))()
        except (OSError, ValueError, ImportError, AttributeError) as exc:
            module, why = None, f"{type(exc).__name__}: {exc}"
    memo.update(module=module, reason=why)
    return module


def _record(path):
    """Return the record of ``path``: ``"<size> <sha256>"``."""
    data = Path(path).read_bytes()
    return f"{len(data)} {hashlib.sha256(data).hexdigest()}"


def _open_verified(target, library=ROUNDS, mode=None):
    """Return ``(CDLL, "")`` when ``target`` matches its record and has ``library``'s functions.

    Otherwise ``(None, problem)``; ``problem`` is "" when there is nothing to repair
    (no library yet, or one without a record: a cache from before records, rebuilt
    silently), else what is wrong.  A library that does not match its record is never
    opened: ``dlopen`` of a file cut short crashes the process (SIGBUS).
    """
    try:
        expected = Path(f"{target}.sha256").read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None, ""
    try:
        found = _record(target)
    except OSError as exc:
        return None, f"unreadable ({exc.strerror or exc})" if target.exists() else ""
    if found != expected:
        size = found.split()[0]
        return None, (f"does not match its record ({size} bytes, recorded "
                      f"{expected.split()[0] if expected.split() else '?'}; cut short or replaced)")
    try:
        lib = ctypes.CDLL(str(target)) if mode is None else ctypes.CDLL(str(target), mode=mode)
    except OSError as exc:
        return None, f"cannot be loaded ({exc})"
    missing = [name for name in library.symbols if not hasattr(lib, name)]
    if missing:
        import _ctypes

        _ctypes.dlclose(lib._handle)  # so that a rebuilt file at this path is loaded afresh
        kind = "the round loop" if library is ROUNDS else f"the {library.what}"
        return None, f"is not {kind} (no {', '.join(missing)})"
    return lib, ""


def _compile(cc, key, target, library=ROUNDS):
    """Build ``target`` and its record through temporary files and renames; return "" or why not."""
    tmp = note = None
    try:
        # a name of its own (another host may share the folder); the linker creates the file
        tmp = target.parent / f".{library.name}-{key}-{os.getpid()}-{secrets.token_hex(4)}.so"
        note = Path(f"{tmp}.sha256")
        proc = subprocess.run([cc, "-O2", "-shared", "-fPIC", *library.flags, "-o", str(tmp),
                               str(library.source)],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["?"])[-1]
            return f"mpicc failed: {last}"
        note.write_text(_record(tmp) + "\n", encoding="ascii")
        os.replace(tmp, target)
        os.replace(note, f"{target}.sha256")
        return ""
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        for path in (tmp, note):
            if path is not None:
                path.unlink(missing_ok=True)


def _warn(library, text):
    """Print one warning line about ``library`` on stderr."""
    print(f"dualmpi: warning: {library.what} {text}", file=sys.stderr, flush=True)
