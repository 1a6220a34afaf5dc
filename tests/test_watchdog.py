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
