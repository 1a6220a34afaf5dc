"""The compiled round loop (dualmpi/engine/cloop.py): built where it can be, the same results
without it, and the Python loop still correct when it is off (``DUALMPI_CLOOP=0``)."""

import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from dualmpi.engine import cloop
from mpi_helpers import REPO, dualmpi_cmd, mpi_cmd, needs_mpiexec, ompi_env, run_job

#: A job that runs every collective through dualmpi.Comm on 8 ranks, checks it against
#: mpi4py's own and prints whether the compiled loop ran it.
CHECK = """
import json, sys
import numpy as np
from mpi4py import MPI
import dualmpi
w = MPI.COMM_WORLD
net = dualmpi.Comm(w, "dualcube:r=2", nodes_per_rank=int(sys.argv[1]), watchdog=60)
R = w.Get_size()
ok = True
compiled, stepped = [], []
ADD = MPI.Op.Create(lambda a, b, t: np.add(np.frombuffer(a, np.int64), np.frombuffer(b, np.int64),
                                           out=np.frombuffer(b, np.int64)), commute=True)
for n in (1, 300, 40000):
    a = np.arange(R * n, dtype=np.int64) * (w.rank + 1)
    mine, ref = np.zeros_like(a), np.zeros_like(a)
    net.Alltoall(a, mine); w.Alltoall(a, ref); ok &= np.array_equal(mine, ref)
    compiled.append(net._last_runner._c is not None)
    net.Allgather(a[:n], mine); w.Allgather(a[:n], ref); ok &= np.array_equal(mine, ref)
    b = a[:n].copy() if w.rank == 0 else np.zeros(n, np.int64)
    net.Bcast(b, 0); ok &= np.array_equal(b, np.arange(n, dtype=np.int64))
    net.Scatter(a if w.rank == 0 else None, mine[:n], 0)
    w.Scatter(a if w.rank == 0 else None, ref[:n], 0); ok &= np.array_equal(mine[:n], ref[:n])
    # reductions (rounds in C between the combines) and repeated calls on the same buffers
    x, got, want = a[:n].copy(), np.zeros(n, np.int64), np.zeros(n, np.int64)
    for i in range(3):
        x += i
        net.Allreduce(x, got); w.Allreduce(x, want); ok &= np.array_equal(got, want)
        net.Scan(x, got); w.Scan(x, want); ok &= np.array_equal(got, want)
        net.Reduce(x, got, root=R - 1); w.Reduce(x, want, root=R - 1)
        ok &= w.rank != R - 1 or np.array_equal(got, want)
        net.Alltoall(a, mine); w.Alltoall(a, ref); ok &= np.array_equal(mine, ref)
    # nonblocking (rounds advanced by the compiled step), two in flight, repeated; a user
    # operation's combines stay in Python
    for i in range(3):
        x += i
        reqs = [net.Ialltoall(a, mine), net.Iallreduce(x, got, MPI.MAX)]
        w.Alltoall(a, ref); w.Allreduce(x, want, MPI.MAX)
        dualmpi.Request.Waitall(reqs)
        ok &= np.array_equal(mine, ref) and np.array_equal(got, want)
        net.Iscan(x, got, op=ADD).Wait(); w.Scan(x, want); ok &= np.array_equal(got, want)
    stepped.append(net._progress()._step is not None)
ok = w.allreduce(int(ok), op=MPI.MIN)
if w.rank == 0:
    print(json.dumps({"ok": ok, "compiled": compiled, "stepped": stepped}))
net.Free()
"""


def _job(tmp_path, env_extra, q="1", np_=8):
    script = tmp_path / "check.py"
    script.write_text(CHECK)
    env = ompi_env(120)
    env.update(env_extra)
    job = run_job(mpi_cmd(np_, script, q), env, timeout=180)
    assert job.returncode == 0 and not job.timed_out, job.stdout + job.stderr
    return json.loads(job.stdout.strip().splitlines()[-1])


def test_off_switch_and_reason(monkeypatch):
    """``DUALMPI_CLOOP=0`` keeps the Python loop and says why."""
    monkeypatch.setattr(cloop, "_loaded", {})
    monkeypatch.setenv("DUALMPI_CLOOP", "0")
    assert cloop.load() is None and cloop.reason() == "DUALMPI_CLOOP=0"


def test_no_compiler_falls_back(monkeypatch, tmp_path):
    """Without mpicc (or when it fails) the engine runs in Python; nothing raises."""
    monkeypatch.setattr(cloop, "_loaded", {})
    monkeypatch.setattr(cloop, "_mpicc", lambda: None)
    assert cloop.load() is None and cloop.reason() == "no mpicc"
    monkeypatch.setattr(cloop, "_loaded", {})
    monkeypatch.setattr(cloop, "_mpicc", lambda: "/bin/false")
    monkeypatch.setenv("DUALMPI_CACHE", str(tmp_path / "cache"))
    assert cloop.load("another library") is None and cloop.reason().startswith("mpicc failed")


@needs_mpiexec
@pytest.mark.parametrize("q", ["1", "2"])
def test_compiled_and_python_loops_agree_with_mpi(tmp_path, q):
    """8 ranks (4 with two nodes each): every collective and reduction, repeated on the same
    buffers, blocking and nonblocking, equals mpi4py's with the compiled loop and step (where
    they build) and with the Python loop; the compiled loop and step really ran when built."""
    np_ = 8 // int(q)
    cache = str(tmp_path / "cache")
    fast = _job(tmp_path, {"DUALMPI_CACHE": cache}, q, np_)
    slow = _job(tmp_path, {"DUALMPI_CACHE": cache, "DUALMPI_CLOOP": "0"}, q, np_)
    assert fast["ok"] and slow["ok"]
    assert not any(slow["compiled"]) and not any(slow["stepped"])
    monkey = dict(cloop._loaded)
    cloop._loaded.clear()
    try:
        built = cloop.load() is not None
    finally:
        cloop._loaded.clear()
        cloop._loaded.update(monkey)
    assert all(fast["compiled"]) == built and all(fast["stepped"]) == built


@needs_mpiexec
def test_the_watchdog_names_a_stall_in_the_compiled_loop(tmp_path):
    """A rank that skips its sends (``--inject-drop``) is named by the waiting rank's
    watchdog, round and peer, as with the Python loop."""
    env = ompi_env(60)
    env["DUALMPI_CACHE"] = str(tmp_path / "cache")
    job = run_job(dualmpi_cmd(8, "run", "dualcube:r=2", "--collective", "bcast", "--sizes", "8",
                              "--iters", "1", "--inject-drop", "0:0", "--watchdog", "3"),
                  env, timeout=90)
    assert job.returncode != 0 and not job.timed_out, job.stdout + job.stderr
    assert "watchdog" in job.stderr and "in round 0 for rank 0 to send" in job.stderr


# -- a damaged cache (issue 23, item 8) -----------------------------------------------------------
#: Loads the compiled loop in a fresh process (a SIGBUS inside dlopen must not kill pytest) with
#: ``mpicc`` given by argv[1] (a wrapper that can be broken), and prints what it got.
LOAD = """
import json, sys
from dualmpi.engine import cloop
cloop._mpicc = lambda: sys.argv[1]
lib = cloop.load("issue 23 test")
print(json.dumps({"built": lib is not None, "reason": cloop.reason(),
                  "works": lib is not None and lib.dualmpi_fields() > 0}))
"""

needs_mpicc = pytest.mark.skipif(cloop._mpicc() is None, reason="no mpicc to build the loop")


@pytest.fixture
def cache(tmp_path):
    """A cache folder and an ``mpicc`` wrapper that fails once ``<wrapper>.broken`` exists."""
    wrapper = tmp_path / "mpicc"
    wrapper.write_text(f'#!/bin/sh\n[ -e "$0.broken" ] && {{ echo "mpicc: broken" >&2; exit 1; }}\n'
                       f'exec {shlex.quote(cloop._mpicc())} "$@"\n')
    wrapper.chmod(0o755)
    return tmp_path / "cache", wrapper


def _load(cache):
    """Load the loop in a new process; return ``(its report or None, CompletedProcess)``."""
    folder, wrapper = cache
    env = dict(os.environ, DUALMPI_CACHE=str(folder), PYTHONPATH=str(REPO))
    env.pop("DUALMPI_CLOOP", None)
    proc = subprocess.run([sys.executable, "-c", LOAD, str(wrapper)], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=180)
    lines = proc.stdout.strip().splitlines()
    return (json.loads(lines[-1]) if proc.returncode == 0 and lines else None), proc


def _library(cache):
    """Return the one compiled library in the cache folder."""
    (lib,) = cache[0].glob("rounds-*.so")
    return lib


@needs_mpicc
def test_truncated_library_is_rebuilt_not_loaded(cache):
    """A library cut short (full disk, racing jobs) crashed every later process with SIGBUS
    inside dlopen and was never rebuilt; now it is rebuilt, with one warning line."""
    got, proc = _load(cache)
    assert got == {"built": True, "reason": "", "works": True} and proc.stderr == "", proc.stderr
    lib = _library(cache)
    size = lib.stat().st_size
    with open(lib, "r+b") as fh:
        fh.truncate(size // 4)
    got, proc = _load(cache)
    shown = f"exit {proc.returncode}\n{proc.stderr[-2000:]}"
    assert got == {"built": True, "reason": "", "works": True}, shown
    (line,) = proc.stderr.splitlines()
    assert line.startswith("dualmpi: warning: compiled round loop") and "rebuilt" in line, line
    assert _library(cache).stat().st_size == size
    got, proc = _load(cache)  # and the next process loads it quietly
    assert got["works"] and proc.stderr == "", proc.stderr


@needs_mpicc
@pytest.mark.parametrize("recorded", [False, True], ids=["foreign", "foreign-with-record"])
def test_foreign_library_is_rebuilt(cache, recorded):
    """Another shared object at the library's path (an AttributeError traceback before): never
    used as the loop; rebuilt, also when its record was rewritten to match it."""
    _load(cache)
    lib = _library(cache)
    import _ctypes

    shutil.copyfile(_ctypes.__file__, lib)
    if recorded:
        lib.with_name(lib.name + ".sha256").write_text(cloop._record(lib) + "\n")
    got, proc = _load(cache)
    shown = f"exit {proc.returncode}\n{proc.stderr[-2000:]}"
    assert got == {"built": True, "reason": "", "works": True}, shown
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1, shown
    assert ("is not the round loop" if recorded else "does not match its record") in proc.stderr


@needs_mpicc
def test_damaged_library_that_cannot_be_rebuilt_falls_back(cache):
    """When the rebuild fails too, the rounds run in Python: one warning line, no crash."""
    _load(cache)
    lib = _library(cache)
    lib.write_bytes(lib.read_bytes()[:4096])
    cache[1].with_name("mpicc.broken").touch()
    got, proc = _load(cache)
    shown = f"exit {proc.returncode}\n{proc.stderr[-2000:]}"
    assert got is not None and not got["built"], shown
    assert got["reason"] == "mpicc failed: mpicc: broken", got
    (line,) = proc.stderr.splitlines()
    assert "rebuilding it failed (mpicc failed: mpicc: broken): rounds run in Python" in line, line
