"""dualmpi.neighbor without MPI in pytest: the neighbour lists (the links, in the order documented)
and, in small jobs of their own, a neighbour that never comes named by the watchdog."""

import doctest
import subprocess
import sys

import pytest
from mpi_helpers import MPIEXEC, PYTHON, assert_no_traceback, needs_mpiexec, ompi_env, run_job

from dualmpi import neighbor
from dualmpi.topology import from_spec

SPECS = ["hypercube:n=0", "hypercube:n=1", "hypercube:n=3", "dualcube:r=1", "dualcube:r=2",
         "dualcube:r=3", "metacube:k=1,m=2", "metacube:k=2,m=1"]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("q", [1, 2, 4])
def test_neighbours_are_the_links(spec, q):
    """Every rank's list: the ranks its nodes' links reach, once each, never itself; one node per
    rank in dimension order, several ascending; each counted link is a link between the two."""
    topo = from_spec(spec)
    p = topo.num_nodes
    if p % q:
        pytest.skip("q does not divide the nodes")
    lists = {}
    for rank in range(p // q):
        ranks, links = neighbor.neighbors(topo, q, rank)
        reach = {v // q for u in range(rank * q, rank * q + q) for v in topo.neighbors(u)} - {rank}
        assert set(ranks) == reach and len(ranks) == len(reach)
        if q == 1:
            assert list(ranks) == [v for v in topo.neighbors(rank) if v != rank]
        else:
            assert list(ranks) == sorted(ranks)
        for r, (u, v) in zip(ranks, links):
            assert u // q == rank and v // q == r and topo.is_link(u, v)
        lists[rank] = ranks
    for rank, ranks in lists.items():  # symmetric: sources are destinations
        assert all(rank in lists[r] for r in ranks)


def test_doctests():
    assert doctest.testmod(neighbor).failed == 0


def test_import_does_not_initialize_mpi():
    code = "import sys, dualmpi.neighbor; sys.exit('mpi4py.MPI' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


STALL = """
import sys, time
import numpy as np
from mpi4py import MPI
import dualmpi
from dualmpi import neighbor

form = sys.argv[1]
world = MPI.COMM_WORLD
rank = world.Get_rank()
net = dualmpi.Comm(world, "hypercube:n=2", watchdog={deadline})
n = 1 << 15  # 256 KiB per neighbour: the rendezvous protocol needs the receiver's progress
send, recv = np.ones(2 * n), np.zeros(2 * n)
neighbor.Neighbor_alltoall(net, send, recv)  # the wire exists on every rank
if rank == 1:
    if form == "nonblocking":
        neighbor.Ineighbor_alltoall(net, send, recv)
    time.sleep(120)  # never calls (or never waits): no MPI call at all
if form == "nonblocking":
    neighbor.Ineighbor_alltoall(net, send, recv).Wait()
else:
    neighbor.Neighbor_alltoall(net, send, recv)
time.sleep(120)  # the job ends by the watchdog's abort
"""


@needs_mpiexec
@pytest.mark.parametrize("form", ["blocking", "nonblocking"])
def test_a_neighbour_that_never_comes_is_named(form, tmp_path):
    """Rank 1 never makes (or never waits for) its call: its neighbours 0 and 3 name it.

    Both wait for it with the same deadline, and the first watchdog to fire aborts the job
    half a second after its line: under load the other one may not get to print, so the
    test requires one line or two, each from rank 0 or 3, each naming rank 1 (seen once:
    rank 0's line alone, rank 3 ended by the abort).

    Without the point-to-point router's progress thread: its background MPI calls progress
    every request of the process (asynchronous progress, which MPI allows), so a
    nonblocking call that rank 1 started and never waits for would complete anyway."""
    script = tmp_path / "stall.py"
    script.write_text(STALL.format(deadline=3))
    env = ompi_env(120)
    env["DUALMPI_PROGRESS_THREAD"] = "0"
    job = run_job([MPIEXEC, "-n", 4, PYTHON, "-m", "mpi4py", script, form], env, timeout=150)
    shown = f"exit {job.returncode} after {job.elapsed:.1f} s\n{job.stdout}\n{job.stderr[-3000:]}"
    assert not job.timed_out and job.returncode != 0, shown
    assert_no_traceback(job)
    lines = [line for line in job.stderr.splitlines() if line.startswith("dualmpi: watchdog:")]
    name = "Neighbor_alltoall" if form == "blocking" else "Ineighbor_alltoall"
    named = [line for line in lines if f"in {name} " in line]
    assert named and {line.split()[3] for line in named} <= {"0", "3"}, shown
    assert all("for rank 1 to send" in line for line in named), shown
