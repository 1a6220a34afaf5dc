"""A rank that starts a nonblocking collective and never waits for it ends the job, named.

A small job (4 ranks, ``hypercube:n=2``, watchdog 3 s) starts a broadcast as a request
of :class:`~dualmpi.engine.nonblocking.Progress`; one rank never tests or waits (it
sleeps without calling MPI), so the ranks that wait for its messages are stuck.  The
job must end within the deadline plus a few seconds with a watchdog line that names
the stalled rank: in a round (the rank forwards the broadcast) or in the argument
agreement (rank 0, which gathers the ranks' vectors, never answers).
"""

import re

import pytest

from mpi_helpers import MPIEXEC, PYTHON, assert_no_traceback, needs_mpiexec, ompi_env, run_job

DEADLINE = 3

SCRIPT = """
import sys, time
import numpy as np
from mpi4py import MPI
import dualmpi
from dualmpi.engine.layout import Layout, layout_kind
from dualmpi.engine.nonblocking import Progress
from dualmpi.request import Request

stage = sys.argv[1]
world = MPI.COMM_WORLD
rank = world.Get_rank()
net = dualmpi.Comm(world, "hypercube:n=2", watchdog={deadline})
prog = Progress(net._transport)
layout = Layout(layout_kind("bcast"), 4, 1, 64, 0)
bound = {{r: net._engine.rank_plan(r, "bcast", 0).bind(layout, 1) for r in range(4)}}

def forwards(b):
    first = min((r.index for r in b.rounds if r.recvs), default=None)
    return first is not None and any(r.sends and r.index > first for r in b.rounds)

# a rank that forwards the broadcast, or rank 0, which answers the agreement
victim = min(r for r in range(4) if forwards(bound[r])) if stage == "rounds" else 0
if rank == 0:
    print("victim", victim, flush=True)
buf = np.full(64, 9 if rank == 0 else 0, np.uint8)
send, recv = (buf, None) if rank == 0 else (None, buf)
agree = [1] if stage == "agree" else None
if rank != victim:
    time.sleep(0.5)  # the victim starts first: its start cannot finish what it must do
req = Request.from_plan(prog, prog.start(bound[rank], send, recv, agree=agree,
                                         check=lambda hi, lo: None, what="Ibcast"))
if rank == victim:
    time.sleep(120)  # never waits: no MPI call at all
req.Wait()
time.sleep(120)  # the job ends by the watchdog's abort
"""


@needs_mpiexec
@pytest.mark.parametrize("stage", ["rounds", "agree"])
def test_a_rank_that_never_waits_is_named(stage, tmp_path):
    script = tmp_path / "stall.py"
    script.write_text(SCRIPT.format(deadline=DEADLINE))
    job = run_job([MPIEXEC, "-n", 4, PYTHON, "-m", "mpi4py", script, stage], ompi_env(120),
                  timeout=150)
    shown = f"exit {job.returncode} after {job.elapsed:.1f} s\n{job.stdout}\n{job.stderr[-3000:]}"
    assert not job.timed_out, shown
    assert job.returncode != 0, shown
    assert_no_traceback(job)
    victim = int(re.search(r"victim (\d+)", job.stdout).group(1))
    lines = [line for line in job.stderr.splitlines() if line.startswith("dualmpi: watchdog:")]
    assert lines, shown
    where = "in round" if stage == "rounds" else "in the argument agreement"
    assert any(f"for rank {victim} to send" in line and where in line and "Ibcast" in line
               for line in lines), shown


REPEAT = """
import time
import numpy as np
from mpi4py import MPI
import dualmpi

world = MPI.COMM_WORLD
rank = world.Get_rank()
net = dualmpi.Comm(world, "hypercube:n=2", watchdog={deadline})
buf = np.zeros(64, np.uint8)
for _ in range(2):  # agreed, then repeated
    net.Ibcast(buf, 0).Wait()
progress = net._progress()
print("restarts", rank, progress.restarts, progress._istart is not None, flush=True)
if rank == 0:
    time.sleep(120)  # never starts the third: no mode for the others, no MPI call at all
net.Ibcast(buf, 0).Wait()
time.sleep(120)  # the job ends by the watchdog's abort
"""


@needs_mpiexec
def test_a_repeat_waiting_in_c_for_rank_0s_mode_is_named(tmp_path):
    """A repeat started in C (Progress.restart) waits in C for rank 0's mode; rank 0 never
    starts the call: the watchdog names the wait and rank 0."""
    script = tmp_path / "mode.py"
    script.write_text(REPEAT.format(deadline=DEADLINE))
    job = run_job([MPIEXEC, "-n", 4, PYTHON, "-m", "mpi4py", script], ompi_env(120),
                  timeout=150)
    shown = f"exit {job.returncode} after {job.elapsed:.1f} s\n{job.stdout}\n{job.stderr[-3000:]}"
    assert not job.timed_out, shown
    assert job.returncode != 0, shown
    assert_no_traceback(job)
    started = re.findall(r"restarts (\d) (\d) (True|False)", job.stdout)
    assert len(started) == 4, shown
    compiled = all(c == "True" for _, _, c in started)
    if compiled:  # the second call started in C on every rank
        assert all(n == "1" for _, n, _ in started), shown
    lines = [line for line in job.stderr.splitlines() if line.startswith("dualmpi: watchdog:")]
    assert any("rank 0's mode for Ibcast" in line and "for rank 0 to send" in line
               for line in lines), shown
