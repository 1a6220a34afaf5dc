"""Helpers for pure-tier tests that launch their own small mpiexec jobs (no MPI in pytest itself).

Each job runs with the venv's ``mpiexec`` and the Open MPI settings of ``launch/ompi-env.sh``,
limited twice: ``MPIEXEC_TIMEOUT`` (mpiexec kills its ranks) and a subprocess timeout after
which the job's whole process group is killed, so a hang fails a test instead of stalling the
suite or leaving orphaned ranks behind.
"""

import os
import re
import signal
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path

import pytest

__all__ = [
    "REPO", "PYTHON", "MPIEXEC", "needs_mpiexec", "Job", "ompi_env", "run_job", "mpi_cmd",
    "dualmpi_cmd", "error_lines", "split_rank", "assert_no_traceback",
    "assert_every_rank_reports",
]

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
MPIEXEC = Path(PYTHON).parent / "mpiexec"

#: Skip marker for modules that need the Open MPI wheel's ``mpiexec`` next to the interpreter.
needs_mpiexec = pytest.mark.skipif(
    not MPIEXEC.exists(), reason=f"no mpiexec next to {PYTHON} (the Open MPI wheel's)"
)

#: A finished (or killed) job: exit code, both streams as text, wall time, whether it was killed.
Job = namedtuple("Job", "returncode stdout stderr elapsed timed_out")

#: What Open MPI prints when MPIEXEC_TIMEOUT ends a job.
_MPIEXEC_TIMED_OUT = "time limit for job execution has been reached"

_RANK_SUFFIX = re.compile(r" \[rank (\d+)/(\d+)\]$")


def ompi_env(mpiexec_timeout):
    """Return the environment with ``launch/ompi-env.sh`` applied and ``MPIEXEC_TIMEOUT`` set."""
    out = subprocess.run(
        ["bash", "-c", '. "$1" && env -0', "bash", str(REPO / "launch" / "ompi-env.sh")],
        check=True, capture_output=True, timeout=30,
    ).stdout
    env = dict(item.split("=", 1) for item in out.decode().split("\0") if "=" in item)
    env["MPIEXEC_TIMEOUT"] = str(mpiexec_timeout)
    return env


def run_job(cmd, env, timeout, cwd=None):
    """Run ``cmd`` in its own session; kill its process group after ``timeout`` seconds."""
    start = time.monotonic()
    proc = subprocess.Popen([str(c) for c in cmd], env=env, cwd=cwd or REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        timed_out = True
    elapsed = time.monotonic() - start
    # Open MPI's output forwarding sometimes puts NUL bytes where the ranks' lines meet (seen at
    # the start of a line under load; launch/test strips them from its logs too)
    out, err = out.replace(b"\0", b""), err.replace(b"\0", b"")
    return Job(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"),
               elapsed, timed_out or _MPIEXEC_TIMED_OUT in err.decode(errors="replace"))


def mpi_cmd(np, *args):
    """Return ``mpiexec -n np python -m mpi4py args...`` as a list."""
    return [MPIEXEC, "-n", np, PYTHON, "-m", "mpi4py", *args]


def dualmpi_cmd(np, *args):
    """Return ``dualmpi args...`` under mpiexec with ``np`` ranks, or plain when ``np`` is None."""
    if np is None:
        return [PYTHON, "-m", "dualmpi", *args]
    return mpi_cmd(np, "-m", "dualmpi", *args)


def error_lines(stderr):
    """Return the ``dualmpi: error:`` lines of ``stderr``."""
    return [line for line in stderr.splitlines() if line.startswith("dualmpi: error:")]


def split_rank(line):
    """Split an error line into its text and ``(rank, size)`` (``None`` without the suffix)."""
    m = _RANK_SUFFIX.search(line)
    if m is None:
        return line, None
    return line[:m.start()], (int(m.group(1)), int(m.group(2)))


def assert_no_traceback(job):
    """Neither stream of ``job`` shows a Python traceback."""
    assert "Traceback" not in job.stderr, job.stderr
    assert "Traceback" not in job.stdout, job.stdout


def assert_every_rank_reports(job, ranks, pattern, limit):
    """``job`` failed within ``limit`` s, no traceback, one identical error line per rank.

    ``ranks`` is the job's rank count (1 for a plain process).  Lines printed before MPI is
    initialised carry no ``[rank i/N]`` suffix; either every line has one (and they name the
    ranks ``0..N-1``) or none has.  ``pattern`` is searched in the common text.
    """
    shown = f"exit {job.returncode} after {job.elapsed:.1f} s\n--- stderr:\n{job.stderr[-4000:]}"
    assert not job.timed_out, f"hung: killed after {job.elapsed:.1f} s\n{shown}"
    assert job.elapsed < limit, f"took {job.elapsed:.1f} s (limit {limit} s)\n{shown}"
    assert job.returncode != 0, shown
    assert_no_traceback(job)
    lines = error_lines(job.stderr)
    assert len(lines) == ranks, f"{len(lines)} error lines for {ranks} ranks\n{shown}"
    texts, suffixes = zip(*map(split_rank, lines))
    assert len(set(texts)) == 1, f"ranks disagree: {sorted(set(texts))}"
    assert re.search(pattern, texts[0]), f"{pattern!r} not in {texts[0]!r}"
    tagged = [s for s in suffixes if s is not None]
    if tagged:
        assert sorted(tagged) == [(r, ranks) for r in range(ranks)], lines
