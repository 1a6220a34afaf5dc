"""The example programs under examples/ run under mpiexec and print what they promise."""

import re

import pytest

from mpi_helpers import REPO, assert_no_traceback, mpi_cmd, needs_mpiexec, ompi_env, run_job

TRANSPOSE = REPO / "examples" / "transpose.py"

#: The one line examples/transpose.py prints on rank 0.
TRANSPOSE_LINE = re.compile(
    r"^transpose (\d+)x\1 float64 on (\S+) \((\d+) ranks\): OK \(equals MPI_Alltoall and A\^T\), "
    r"(\d+) link messages, [0-9.]+ ms$")


def _transpose(ranks, *args, limit=240):
    """Run examples/transpose.py on ``ranks`` ranks; return the match of its one output line."""
    job = run_job(mpi_cmd(ranks, TRANSPOSE, *args), ompi_env(limit), timeout=limit + 60)
    assert not job.timed_out, job.stderr[-3000:]
    assert job.returncode == 0, job.stdout + job.stderr[-3000:]
    assert_no_traceback(job)
    lines = job.stdout.splitlines()
    assert len(lines) == 1, job.stdout  # rank 0 only
    m = TRANSPOSE_LINE.match(lines[0])
    assert m, lines[0]
    return m


@needs_mpiexec
@pytest.mark.parametrize("args, spec, n", [
    ((), "dualcube:r=2", 512),                  # spec and N from the rank count
    (("hypercube:n=3", "24"), "hypercube:n=3", 24),  # both on the command line
])
def test_transpose_example_at_8_ranks(args, spec, n):
    """8 ranks: the transpose equals MPI_Alltoall's and A^T, over the network's links."""
    m = _transpose(8, *args)
    assert (int(m.group(1)), m.group(2), int(m.group(3))) == (n, spec, 8)
    assert int(m.group(4)) > 0


@needs_mpiexec
@pytest.mark.slow
def test_transpose_example_at_32_ranks():
    """32 ranks: the default spec is the 32-node dual-cube D_3."""
    m = _transpose(32, limit=500)
    assert (int(m.group(1)), m.group(2), int(m.group(3))) == (2048, "dualcube:r=3", 32)


TOUR = REPO / "examples" / "collectives_tour.py"


@needs_mpiexec
@pytest.mark.parametrize("ranks, spec", [pytest.param(8, "dualcube:r=2", marks=pytest.mark.slow),
                                         (4, "dualcube:r=2"),
                                         (2, "hypercube:n=1")])
def test_an_ordinary_mpi4py_program_runs_unchanged_on_the_network(ranks, spec):
    """examples/collectives_tour.py prints the same on MPI.COMM_WORLD and on dualmpi.Comm (one
    and two nodes per rank): buffer, derived-datatype, in-place, nonblocking and object calls."""
    out = []
    for args in ((), (spec,)):
        job = run_job(mpi_cmd(ranks, TOUR, *args), ompi_env(240), timeout=300)
        assert not job.timed_out and job.returncode == 0, job.stdout + job.stderr[-3000:]
        assert_no_traceback(job)
        out.append(job.stdout)
    assert out[0] == out[1] and out[0].count("\n") == ranks * 11, out
    assert "Bcast of every other int: [0, -1, 2, -1, 4, -1]" in out[1]  # gaps untouched
    assert f"link messages on {spec}" in job.stderr
