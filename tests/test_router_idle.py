"""The point-to-point progress thread when nothing moves: few wakings, and none of the rank's own
messages waits for its idle sleep (``dualmpi.engine.router``, ``POLL``'s ``quiet`` and
``idle``).  Each test is a small job of 1 or 2 ranks (Linux: the threads are read from
``/proc``)."""

import sys

import pytest

from mpi_helpers import mpi_cmd, needs_mpiexec, ompi_env, run_job

pytestmark = [needs_mpiexec,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")]

#: Count every thread's context switches over 2 s once the communicator has been quiet for
#: longer than ``quiet``: the busiest thread of the rank (its progress thread) and its rate.
_WAKINGS = r"""
import glob, os, time
from mpi4py import MPI
import dualmpi

def switches():
    out = {}
    for task in glob.glob(f"/proc/{os.getpid()}/task/*"):
        with open(task + "/status") as f:
            fields = dict(line.split(":\t", 1) for line in f if ":\t" in line)
        out[task] = int(fields["voluntary_ctxt_switches"]) + int(fields["nonvoluntary_ctxt_switches"])
    return out

net = dualmpi.Comm(MPI.COMM_WORLD, "hypercube:n=1", watchdog=30)
assert net._router.hub.threaded
time.sleep(1.5)
before = switches()
time.sleep(2.0)
after = switches()
rate = max(after[t] - before.get(t, 0) for t in after) / 2.0
print(f"rank {MPI.COMM_WORLD.rank} busiest thread {rate:.1f} wakings/s", flush=True)
net.Free()
"""

#: With an idle sleep of 60 s after 0.2 s of quiet, the progress thread falls asleep, and
#: ``Hub.wake`` (what a rank's own send, posted receive or wait calls) ends that sleep at once.
_WAKE = r"""
import time
from mpi4py import MPI
import dualmpi

net = dualmpi.Comm(MPI.COMM_WORLD, "hypercube:n=0", watchdog=45)
hub = net._router.hub

def until(test, limit):
    end = time.monotonic() + limit
    while not test() and time.monotonic() < end:
        time.sleep(0.01)
    return test()

fell = until(lambda: hub.asleep and hub.naps > 0, 10)
naps = hub.naps
start = time.monotonic()
hub.wake()
woke = until(lambda: hub.naps > naps, 10)  # woken, it found nothing and slept again
print(f"fell asleep {fell} woke {woke} after {time.monotonic() - start:.3f} s", flush=True)
net.Free()
"""


def _job(tmp_path, source, ranks, extra_env=None):
    script = tmp_path / "job.py"
    script.write_text(source)
    env = ompi_env(120)
    env.update(extra_env or {})
    return run_job(mpi_cmd(ranks, script), env, timeout=180)


def test_an_idle_progress_thread_wakes_seldom(tmp_path):
    """Quiet for over a second, a rank's busiest thread wakes under 150 times a second (the
    idle sleep is 20 ms: about 50; the 2-ms sleep before it, about 590)."""
    job = _job(tmp_path, _WAKINGS, 2)
    assert job.returncode == 0 and not job.timed_out, job.stdout + job.stderr
    rates = [float(line.split()[4]) for line in job.stdout.splitlines()
             if "wakings/s" in line]
    assert len(rates) == 2 and max(rates) < 150, job.stdout


def test_the_rank_s_own_work_ends_the_idle_sleep(tmp_path):
    """With a 60-s idle sleep, ``Hub.wake`` ends it within seconds (1 rank)."""
    job = _job(tmp_path, _WAKE, 1, {"DUALMPI_POLL": "quiet=0.2,idle=60"})
    assert job.returncode == 0 and not job.timed_out, job.stdout + job.stderr
    assert "fell asleep True woke True" in job.stdout, job.stdout
