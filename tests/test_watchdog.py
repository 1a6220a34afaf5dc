"""The watchdog: a node that waits past the deadline aborts the job with one diagnostic."""

import io
import re
import subprocess
import time

import pytest

from dualmpi.engine.watchdog import Watchdog
from test_run_cli import MPIEXEC, TIMEOUT, assert_no_traceback, mpi_env  # noqa: F401


def test_watchdog_fires_once_with_the_wait_it_saw():
    aborted, out = [], io.StringIO()
    dog = Watchdog("rank 5", 0.2, aborted.append, stream=out)
    dog.arm(7, [4])
    deadline = time.monotonic() + 5
    while not aborted and time.monotonic() < deadline:
        time.sleep(0.05)
    dog.close()
    assert aborted == [3]
    assert "rank 5 has waited" in out.getvalue() and "in round 7 for rank 4 to send" in out.getvalue()


def test_disarmed_watchdog_stays_quiet():
    aborted = []
    dog = Watchdog(1, 0.2, aborted.append, stream=io.StringIO())
    dog.arm(0, [2])
    dog.disarm()
    time.sleep(0.6)
    dog.close()
    assert aborted == []


def test_missing_send_aborts_the_job_with_a_diagnostic(mpi_env):  # noqa: F811
    """Node 0 skips its round-1 send: node 1 waits for it and the watchdog ends the job.

    It fires a few seconds after the deadline (the wait it reports); how long the whole job
    takes depends on the machine's load (8 ranks starting on 2 cores beside another test's),
    so the subprocess's timeout is the bound on that."""
    if not MPIEXEC.exists():
        pytest.skip(f"no mpiexec beside {MPIEXEC.parent}")
    proc = subprocess.run(
        [str(MPIEXEC), "-n", "8", str(MPIEXEC.parent / "python"), "-m", "mpi4py", "-m", "dualmpi",
         "run", "dualcube:r=2", "--collective", "bcast", "--sizes", "64", "--iters", "1",
         "--warmup", "0", "--watchdog", "3", "--inject-drop", "1:0"],
        env=mpi_env, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode != 0
    assert_no_traceback(proc)
    # under load other ranks may be slow to answer the trace: "; ranks ... do not answer"
    # then comes before "; aborting the job"
    line = re.search(r"dualmpi: watchdog: rank 1 \(node 1\) has waited ([0-9.]+) s \(deadline "
                     r"3 s\) in round 1 for rank 0 to send(; [^\n]*)?; aborting the job",
                     proc.stderr)
    assert line and float(line.group(1)) < 20, proc.stderr


LATE_SCRIPT = """
import time
import numpy as np
from mpi4py import MPI
import dualmpi

world = MPI.COMM_WORLD
if world.Get_rank() == 1:
    time.sleep({late})  # a rank that starts late (slow imports, a loaded host)
net = dualmpi.Comm(world, "hypercube:n=1", watchdog={deadline})
x = np.arange(4.0) + world.Get_rank()
mine, theirs = np.empty(4), np.empty(4)
net.Allreduce(x, mine)
world.Allreduce(x, theirs)
print("same" if np.array_equal(mine, theirs) else "differ", flush=True)
net.Free()
"""


def test_a_rank_that_arrives_late_at_the_set_up_is_waited_for(tmp_path):
    """Ranks start at different times: the set-up waits past the deadline for them to arrive.

    One rank comes to ``dualmpi.Comm`` 8 s after the other, with a watchdog of 1 s: the set-up
    allows :data:`dualmpi.engine.mpi.STARTUP_GRACE` past the deadline for the ranks to arrive
    (a rank of an oversubscribed CI job arrived over 8 s late), so the job runs to the end."""
    from mpi_helpers import MPIEXEC as mpiexec, PYTHON, ompi_env, run_job
    from dualmpi.engine.mpi import STARTUP_GRACE

    if not mpiexec.exists():
        pytest.skip(f"no mpiexec beside {mpiexec.parent}")
    late, deadline = 8, 1
    assert deadline + 5 < late < deadline + STARTUP_GRACE
    script = tmp_path / "late.py"
    script.write_text(LATE_SCRIPT.format(late=late, deadline=deadline))
    job = run_job([mpiexec, "-n", 2, PYTHON, "-m", "mpi4py", script], ompi_env(120), timeout=150)
    shown = f"exit {job.returncode} after {job.elapsed:.1f} s\n{job.stdout}\n{job.stderr[-3000:]}"
    assert not job.timed_out and job.returncode == 0, shown
    assert job.stdout.split() == ["same", "same"], shown
