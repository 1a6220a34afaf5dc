"""A rank that stops making neighbourhood calls ends the job, named (the compiled repeat too).

A small job (4 ranks, ``hypercube:n=2``, watchdog 3 s) repeats ``Neighbor_allgather`` on
the same buffers (or ``Ineighbor_allgather`` and ``Wait``): from the second call the repeat
is matched and run in C (:class:`dualmpi.neighbor._Fast`, ``rounds.c``'s ``dualmpi_nexchange``;
nonblocking ``dualmpi_npost`` and ``dualmpi_nwait``), which waits for its messages one at a
time so that the watchdog can name the neighbours still waited for.  One rank makes two calls
and then sleeps; its neighbours, in their third call, must end the job within the deadline
plus a few seconds, with a line naming the call and that rank.
"""

import re

import pytest

from mpi_helpers import MPIEXEC, PYTHON, assert_no_traceback, needs_mpiexec, ompi_env, run_job

DEADLINE = 3
VICTIM = 3

SCRIPT = """
import time
import numpy as np
from mpi4py import MPI
import dualmpi
from dualmpi.engine import cloop, recall

world = MPI.COMM_WORLD
rank = world.Get_rank()
net = dualmpi.Comm(world, "hypercube:n=2", watchdog={deadline})
d = len(net.Get_dist_neighbors()[0])
send, recv = np.full(4, rank, np.int32), np.zeros(4 * d, np.int32)
for k in range(3):
    if rank == {victim} and k == 2:
        time.sleep(120)  # no third call, no MPI call at all
    if {nonblocking}:
        net.Ineighbor_allgather(send, recv).Wait()
    else:
        net.Neighbor_allgather(send, recv)
    if k == 1:
        memo = net._neighbor_memos["Neighbor_allgather"]
        compiled = bool(memo.ifast if {nonblocking} else memo.fast)
        why = (cloop.reason() or "") + (recall.reason() or "")
        print(f"rank {{rank}} compiled {{compiled}} why {{why!r}}", flush=True)
time.sleep(120)  # the job ends by the watchdog's abort
"""


@needs_mpiexec
@pytest.mark.parametrize("nonblocking", [False, True], ids=["blocking", "nonblocking"])
def test_a_rank_that_stops_calling_is_named_by_its_neighbours(tmp_path, nonblocking):
    script = tmp_path / "stall.py"
    script.write_text(SCRIPT.format(deadline=DEADLINE, victim=VICTIM, nonblocking=nonblocking))
    method = "Ineighbor_allgather" if nonblocking else "Neighbor_allgather"
    job = run_job([MPIEXEC, "-n", 4, PYTHON, "-m", "mpi4py", script], ompi_env(120), timeout=150)
    shown = f"exit {job.returncode} after {job.elapsed:.1f} s\n{job.stdout}\n{job.stderr[-3000:]}"
    assert not job.timed_out, shown
    assert job.returncode != 0, shown
    assert job.elapsed < 60, shown
    assert_no_traceback(job)
    # with the compiled loop and the extension, the repeats ran in C
    found = re.findall(r"rank (\d) compiled (\w+) why '(.*)'", job.stdout)
    assert found, shown
    for rank, compiled, why in found:
        assert compiled == "True" or why, f"rank {rank}: the repeat did not run in C\n{shown}"
    lines = [line for line in job.stderr.splitlines() if line.startswith("dualmpi: watchdog:")]
    assert any(f"{method} (neighbourhood call 2)" in line and
               f"for rank {VICTIM} to send" in line and f"rank {VICTIM} does not answer" in line
               for line in lines), shown
