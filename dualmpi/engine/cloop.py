"""The compiled round loop: ``rounds.c`` built with the MPI library's ``mpicc``, or nothing.

:func:`load` compiles ``dualmpi/engine/rounds.c`` once per machine (cached by a hash
of the source, the compiler and the MPI library) and returns the loaded library, or
``None`` when it cannot — no ``mpicc``, no C compiler, ``DUALMPI_CLOOP=0`` — in which
case the engine runs its rounds in Python (:class:`~dualmpi.engine.mpi.MPIRunner`),
with the same requests and the same messages.  Ranks that start together compile
once: a file lock serialises them and the library is renamed into place atomically.
"""

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["load", "reason", "SOURCE", "cache_dir"]

#: The C source of the loop.
SOURCE = Path(__file__).with_name("rounds.c")

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
            lib, why = _build(library_version)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        lib, why = None, f"{type(exc).__name__}: {exc}"
    if lib is not None:
        lib.dualmpi_request_size.restype = ctypes.c_int
        lib.dualmpi_fields.restype = ctypes.c_int
        lib.dualmpi_run.restype = ctypes.c_int
        lib.dualmpi_run.argtypes = [ctypes.c_void_p]
    _loaded.update(lib=lib, reason=why)
    return lib


def _build(library_version):
    """Compile (or find) the library; return ``(CDLL or None, reason)``."""
    cc = _mpicc()
    if cc is None:
        return None, "no mpicc"
    source = SOURCE.read_bytes()
    key = hashlib.sha256(b"\0".join([source, cc.encode(), library_version.encode(),
                                     platform.machine().encode()])).hexdigest()[:16]
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".probe"
        probe.touch()
    except OSError:
        folder = Path(tempfile.gettempdir()) / f"dualmpi-{os.getuid()}"
        folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"rounds-{key}.so"
    if not target.exists():
        import fcntl

        with open(folder / "build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not target.exists():
                tmp = folder / f".rounds-{key}-{os.getpid()}.so"
                proc = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(tmp), str(SOURCE)],
                                      capture_output=True, text=True, timeout=120)
                if proc.returncode != 0:
                    tmp.unlink(missing_ok=True)
                    last = (proc.stderr.strip().splitlines() or ["?"])[-1]
                    return None, f"mpicc failed: {last}"
                os.replace(tmp, target)
    return ctypes.CDLL(str(target)), ""
