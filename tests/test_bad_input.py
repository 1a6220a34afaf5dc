"""Bad input (issue 9): every rank reports the same clear one-line error, exit != 0 within 30 s.

Pure tier (not ``mpi``): each MPI case launches its own small ``mpiexec`` job through
:mod:`mpi_helpers` (``launch/ompi-env.sh`` settings, ``MPIEXEC_TIMEOUT`` and a subprocess
timeout that kills the job's process group).  The matrix covers rank counts, specs,
parameter ranges, networks too large for the requested mode, roots, message sizes, user
scripts that misuse :class:`dualmpi.Comm` without catching the error,
and results files ``dualmpi fit`` / ``dualmpi report`` must refuse.  The in-process
``Comm`` point-to-point checks are in ``tests/mpi/test_bad_input_mpi.py``; ``tests/test_fit_cli.py``
covers the first results-file cases in-process.
"""

import json
import re
import textwrap
from pathlib import Path

import pytest

from dualmpi.cli import main
from dualmpi.model.synthetic import write_synthetic
from mpi_helpers import (PYTHON, assert_every_rank_reports, dualmpi_cmd, error_lines, mpi_cmd,
                         needs_mpiexec, ompi_env, run_job)

#: Every job must have failed (or finished) within this many seconds.
LIMIT = 30
#: mpiexec's own limit: it kills a hung job's ranks before the subprocess timeout kills mpiexec.
MPIEXEC_LIMIT = 25
SPEC = "dualcube:r=2"  # 8 nodes
BIG = "metacube:k=3,m=3"  # 2**27 = 134217728 nodes
QUICK = ("--sizes", "0", "--iters", "1", "--warmup", "0")


@pytest.fixture(scope="module")
def env():
    """The ``launch/ompi-env.sh`` environment with ``MPIEXEC_TIMEOUT`` = :data:`MPIEXEC_LIMIT`."""
    return ompi_env(MPIEXEC_LIMIT)


def case(ranks, argv, pattern, name):
    """One row of the matrix: ``dualmpi argv`` on ``ranks`` ranks (None: no mpiexec) must fail."""
    marks = [] if ranks is None else [needs_mpiexec]
    return pytest.param(ranks, argv, pattern, id=name, marks=marks)


# -- the matrix: (ranks, argv, regex searched in the common error text) ---------------------------
RANK_COUNT = [
    case(3, ["run", SPEC, *QUICK],
         rf"{SPEC} has 8 nodes, which cannot be spread evenly over 3 ranks", "ranks-not-divisor"),
    # (the smallest networks: a job of 16 ranks took 10 s to start on 2 cores)
    case(4, ["run", "hypercube:n=1", *QUICK], r"hypercube:n=1 has 2 nodes but the job has 4 ranks",
         "ranks-too-many"),
    case(2, ["run", SPEC, "--nodes-per-rank", "3", *QUICK],
         r"8 nodes, but 2 ranks with 3 nodes each play 6",
         "nodes-per-rank-not-divisor"),
    case(2, ["run", "hypercube:n=2", "--nodes-per-rank", "4", *QUICK],
         r"4 nodes, but 2 ranks with 4 nodes each play 8; run 1 rank$",
         "nodes-per-rank-times-ranks-too-many"),
    case(2, ["run", SPEC, "--nodes-per-rank", "2", *QUICK],
         r"8 nodes, but 2 ranks with 2 nodes each play 4; run 4 ranks$",
         "nodes-per-rank-times-ranks-too-few"),
    case(2, ["run", SPEC, "--nodes-per-rank", "-1", *QUICK], r"--nodes-per-rank must be at least 1, got -1",
         "nodes-per-rank-negative"),
    case(3, ["bench", SPEC, "--json", "unused.json", "--sizes", "0", "--coll-sizes", "0"],
         rf"{SPEC} has 8 nodes but the job has 3 ranks; run it with mpiexec -n 8",
         "bench-ranks-wrong"),
]

SPECS = [
    case(2, ["run", "torus:n=2", *QUICK], r"unknown topology 'torus'", "spec-unknown"),
    case(2, ["run", "dualcube:r", *QUICK], r"malformed parameter 'r' in spec 'dualcube:r'",
         "spec-no-value"),
    case(2, ["run", "dualcube:r=two", *QUICK], r"malformed parameter 'r=two'", "spec-not-integer"),
    case(2, ["run", "dualcube;r=2", *QUICK], r"'dualcube;r=2'.*known: .*dualcube:r=R",
         "spec-bad-separator"),
    case(2, ["run", "dualcube", *QUICK], r"spec 'dualcube' is missing parameter r",
         "spec-missing-parameter"),
    case(2, ["run", "", *QUICK], r"empty topology spec", "spec-empty"),
    case(2, ["run", "dualcube:r=0", *QUICK], r"dualcube: parameter r=0 out of range", "r-zero"),
    case(2, ["run", "metacube:k=1,m=0", *QUICK], r"metacube: parameter m=0 out of range", "m-zero"),
    case(2, ["run", "metacube:k=-1,m=1", *QUICK], r"metacube: parameter k=-1 out of range",
         "k-negative"),
    case(2, ["run", "hypercube:n=-1", *QUICK], r"hypercube: parameter n=-1 out of range",
         "n-negative"),
]

TOO_LARGE = [
    # 2**27 nodes on 2 ranks: refuse at once, do not build (or simulate) a 134M-node schedule.
    case(2, ["run", BIG, *QUICK], rf"{BIG}|134217728", "run-too-large"),
    case(2, ["bench", BIG, "--json", "unused.json", "--sizes", "0", "--coll-sizes", "0"],
         rf"{BIG} has 134,217,728 nodes: too large to emulate", "bench-too-large"),
    case(None, ["simulate", BIG, "--collective", "alltoall"], rf"{BIG}|134217728",
         "simulate-alltoall-too-large"),
    case(None, ["simulate", BIG, "--collective", "allgather"], rf"{BIG}|134217728",
         "simulate-allgather-too-large"),
    case(None, ["simulate", BIG, "--collective", "bcast"], rf"{BIG}|134217728",
         "simulate-bcast-too-large"),
]

ROOTS = [
    case(2, ["run", SPEC, "--root", "99", *QUICK], rf"node 99 out of range for {SPEC}", "root-99"),
    case(2, ["run", SPEC, "--root", "x", *QUICK], r"bad root 'x'", "root-x"),
    case(2, ["run", SPEC, "--root", "-1", *QUICK], rf"node -1 out of range for {SPEC}",
         "root-negative"),
    case(2, ["run", SPEC, "--root", "1.5", *QUICK], r"bad root '1.5'", "root-fraction"),
    case(None, ["simulate", SPEC, "--collective", "bcast", "--root", "99"],
         rf"node 99 out of range for {SPEC}", "simulate-root-99"),
    case(None, ["simulate", SPEC, "--collective", "scatter", "--root", "x"], r"bad root 'x'",
         "simulate-root-x"),
    case(None, ["simulate", SPEC, "--collective", "bcast", "--root", "-1"],
         rf"node -1 out of range for {SPEC}", "simulate-root-negative"),
]

SIZES = [
    case(2, ["run", SPEC, "--iters", "1", "--warmup", "0", "--sizes", text],
         rf"bad message size '{shown}'", f"sizes-{name}")
    for name, text, shown in [("negative", "-1", "-1"), ("fraction", "1.5", r"1\.5"),
                              ("word", "abc", "abc"), ("empty", "", "")]
]


#: Issue 14: options that must be refused before anything is measured.
HARDENING = [
    case(2, ["run", SPEC, "--json", "/nonexistent/dir/out.json", *QUICK],
         r"--json /nonexistent/dir/out.json: the directory /nonexistent/dir does not exist",
         "run-json-missing-dir"),
    case(2, ["soak", SPEC, "--json", "/nonexistent/dir/out.json", "--iterations", "1"],
         r"the directory /nonexistent/dir does not exist", "soak-json-missing-dir"),
    case(2, ["bench", "dualcube:r=1", "--json", "/nonexistent/dir/b.json", "--sizes", "0",
             "--coll-sizes", "0"], r"the directory /nonexistent/dir does not exist",
         "bench-json-missing-dir"),
    case(2, ["run", SPEC, "--sizes", "1099511627776", "--iters", "1", "--warmup", "0"],
         r"needs [0-9.]+ TiB, the machine has", "sizes-1TiB"),
    case(2, ["run", SPEC, "--sizes", "1000000000", "--iters", "1", "--warmup", "0"],
         r"needs [0-9.]+ GiB, the machine has", "sizes-1e9"),
    case(2, ["run", SPEC, "--watchdog", "nan", *QUICK], r"bad watchdog deadline nan",
         "watchdog-nan"),
    case(2, ["run", SPEC, "--collective", "bcast", "--inject-drop", "99:0", *QUICK],
         r"--inject-drop 99:0: no such round", "inject-drop-round"),
    case(2, ["run", SPEC, "--collective", "bcast", "--inject-drop", "1:9", *QUICK],
         rf"node 9 out of range for {SPEC}", "inject-drop-node"),
    case(1, ["run", "hypercube:n=16", "--collective", "allgather", "--sizes", "1024"],
         r"needs [0-9.]+ TiB", "one-rank-hypercube-16-allgather"),
    # issue 23, item 13: a MemoryError traceback on every rank; runs of hours started silently
    case(2, ["soak", SPEC, "--sizes", "100000000000", "--iterations", "4"],
         r"2 ranks x buffers and store of the largest size needs [0-9.]+ TiB, the machine has",
         "soak-sizes-1e11"),
    case(2, ["run", SPEC, "--collective", "bcast", "--sizes", "8", "--iters", "1000000000"],
         r"run: 1,000,000,002 calls at 1 us or more each needs about [0-9.]+ min \(limit 10 min\)",
         "run-iters-1e9"),
    # refused on its pace (a few calls timed) or, where 100 M calls' times do not fit, on memory.
    # 1 MiB, not 8 B: on a machine with the memory for the times, a call of 8 B plus its barrier
    # may take about 6 us, and then the estimate reads "min" or the run even fits in 10 minutes
    # (CI failed this case once; its output was not kept); a 1 MiB broadcast copies at least
    # 1 MiB per call, tens of us on any machine
    case(2, ["run", SPEC, "--collective", "bcast", "--sizes", "1048576", "--iters", "100000000"],
         r"(run bcast size=1048576: 100,000,002 calls at [0-9.]+ [um]s each needs about [0-9.]+ "
         r"(h|days) "
         r"\(limit 10 min\); use fewer --iters|and the times of 100,000,000 calls needs)",
         "run-iters-1e8"),
    case(2, ["run", SPEC, "--collective", "bcast", "--sizes", "1048576", "--iters", "10000000",
             "--time-limit", "60"],
         r"run bcast size=1048576: 10,000,002 calls at [0-9.]+ [um]s each needs about [0-9.]+ "
         r"(min|h|days) "
         r"\(limit 1 min\)", "run-iters-1e7-time-limit-60"),
    case(2, ["run", SPEC, "--collective", "bcast", "--sizes", "1048576", "--iters", "200",
             "--time-limit", "0.001"],
         r"run bcast size=1048576: 202 calls at [0-9.]+ (us|ms) each needs about [0-9.]+ (ms|s) "
         r"\(limit 1 ms\)", "run-time-limit-1ms"),
    case(2, ["run", SPEC, "--time-limit", "nan", *QUICK], r"--time-limit must be 0 \(no limit\)",
         "run-time-limit-nan"),
]


@pytest.mark.parametrize("ranks, argv, pattern",
                         RANK_COUNT + SPECS + TOO_LARGE + ROOTS + SIZES + HARDENING)
def test_bad_input_every_rank_reports(env, tmp_path, ranks, argv, pattern):
    """The job fails within 30 s, no traceback, one identical ``dualmpi: error:`` line per rank."""
    job = run_job(dualmpi_cmd(ranks, *argv), env, LIMIT, cwd=tmp_path)
    assert_every_rank_reports(job, ranks or 1, pattern, LIMIT)
    assert "results written" not in job.stdout


@needs_mpiexec
def test_one_rank_plays_every_node(env, tmp_path):
    """Positive control: 1 rank for the 8-node D_2 is valid (8 nodes per rank), all verified."""
    out = tmp_path / "one.json"
    job = run_job(dualmpi_cmd(1, "run", SPEC, "--sizes", "0,8", "--iters", "1", "--warmup", "0",
                              "--json", out), env, LIMIT)
    assert job.returncode == 0 and not job.timed_out, job.stderr
    assert job.elapsed < LIMIT and not error_lines(job.stderr)
    data = json.loads(out.read_text())
    meta = data["meta"]
    assert (meta["nodes"], meta["ranks"], meta["nodes_per_rank"]) == (8, 1, 8)
    assert len(data["rows"]) == 8 and all(row["verified"] for row in data["rows"])


# -- user code that misuses dualmpi.Comm and does not catch the error -------------------------------
_PRELUDE = """\
import numpy as np
from mpi4py import MPI
import dualmpi
"""

USER_SCRIPTS = {
    # rank 0 sends 1 MiB, rank 1 offers 128 bytes and does not catch the error (MPI itself
    # would truncate; the wheel's Open MPI crashes); rank 0 then waits in a barrier rank 1
    # never reaches: only MPI_Abort ends the job.
    "recv-buffer-too-small": (2, """\
        net = dualmpi.Comm(MPI.COMM_WORLD, "hypercube:n=1")
        if net.Get_rank() == 0:
            net.Send(np.arange(1 << 17, dtype=np.float64), 1)
        else:
            net.Recv(np.empty(16, dtype=np.float64), 0)
        MPI.COMM_WORLD.Barrier()
        """, r"DualmpiError: rank 1: receive buffer too small: rank 0 sent 1048576 bytes, "
           r"the buffer has 128"),
    # one rank passes a receive buffer of the wrong size: every rank gets an InputError
    "one-rank-bad-buffer": (4, """\
        net = dualmpi.Comm(MPI.COMM_WORLD, "hypercube:n=2")
        n = 3 if net.Get_rank() == 2 else 4
        net.Allgather(np.zeros(4), np.zeros(4 * n))
        """, r"InputError: Allgather: (recvbuf has|arguments rejected on rank 2)"),
    # both ranks wait for a message the other never sends, in the one-link lane's Recv
    # (dualmpi/engine/lane.c) and in its Sendrecv: the watchdog names the wait and ends the job
    "recv-never-sent": (2, """\
        net = dualmpi.Comm(MPI.COMM_WORLD, "hypercube:n=1", watchdog=3)
        peer = 1 - net.Get_rank()
        net.Send(np.zeros(4), peer, 1)
        net.Recv(np.zeros(4), peer, 1)  # the lane is built by the first call: this one is C
        if net.Get_rank() == 0:
            net.Recv(np.zeros(4), peer, 5)
        else:
            net.Sendrecv(np.zeros(4), peer, 6, np.zeros(4), peer, 7)
        """, r"dualmpi: watchdog: rank (0 \(node 0\) has waited [0-9.]+ s \(deadline 3 s\) in "
           r"Recv from rank 1 for rank 1 to send|1 \(node 1\) has waited [0-9.]+ s \(deadline "
           r"3 s\) in Sendrecv from rank 0 for rank 0 to send)"),
    # on Q_2 every rank is reached by routing, but there is no rank 4; ranks 1 to 3 wait in a
    # barrier rank 0 never reaches
    "send-to-a-rank-out-of-range": (4, """\
        net = dualmpi.Comm(MPI.COMM_WORLD, "hypercube:n=2")
        buf = np.zeros(8, dtype=np.uint8)
        if net.Get_rank() == 0:
            net.Send(buf, 4, 0)
        MPI.COMM_WORLD.Barrier()
        """, r"InputError: Send: bad dest 4: a rank 0\.\.3, MPI\.PROC_NULL"),
}


@needs_mpiexec
@pytest.mark.parametrize("name", list(USER_SCRIPTS))
def test_uncaught_user_error_aborts_the_job(env, tmp_path, name):
    """``python -m mpi4py script``: the uncaught error ends every rank (MPI_Abort), no hang."""
    ranks, body, pattern = USER_SCRIPTS[name]
    script = tmp_path / f"{name}.py"
    script.write_text(_PRELUDE + textwrap.dedent(body))
    job = run_job(mpi_cmd(ranks, script), env, LIMIT)
    shown = f"exit {job.returncode} after {job.elapsed:.1f} s\n{job.stderr[-3000:]}"
    assert not job.timed_out and job.elapsed < LIMIT, shown
    assert job.returncode != 0, shown
    assert "MPI_ABORT was invoked" in job.stderr, shown
    assert re.search(pattern, job.stderr), shown


# -- results files for fit and report ------------------------------------------------------------
TRUTH = [(2e-4, 1e-8, 5e-5), (3e-4, 8e-9, 6e-5), (5e-4, 6e-9, 3e-4)]


@pytest.fixture(scope="module")
def good_file(tmp_path_factory):
    """A valid synthetic ``dualmpi bench`` results file of D_2."""
    path = tmp_path_factory.mktemp("results") / "good.json"
    return write_synthetic(path, SPEC, TRUTH, hops=(1, 2, 3), noise=0.01, seed=1)


def _edited(good, edit):
    """Return the JSON text of ``good`` after ``edit(doc)``."""
    doc = json.loads(Path(good).read_text(encoding="utf-8"))
    edit(doc)
    return json.dumps(doc)


def _set(key, field, value):
    """Return an edit setting ``doc[key][0][field] = value``."""
    return lambda doc: doc[key][0].__setitem__(field, value)


#: Files test_fit_cli.py does not try: name -> content (str, bytes, or a function of the good file).
BAD_FILES = {
    "not-utf8": b"\x89PNG\r\n\x1a\n\xff\xfe\x00",
    "nul-bytes": b"\x00" * 16,
    "utf8-bom": b"\xef\xbb\xbf{}",
    "first-byte-only": lambda good: Path(good).read_text(encoding="utf-8")[:1],
    "cut-before-last-brace": lambda good: Path(good).read_text(encoding="utf-8").rstrip()[:-1],
    "deeply-nested": "[" * 100000,
    "huge-integer": '{"format": ' + "1" * 5000 + "}",
    "meta-not-object": lambda good: _edited(good, lambda d: d.__setitem__("meta", [1])),
    "rows-not-list": lambda good: _edited(good, lambda d: d.__setitem__("pingpong", "abc")),
    "row-not-object": lambda good: _edited(good, lambda d: d["pingpong"].__setitem__(0, 5)),
    "size-is-text": lambda good: _edited(good, _set("pingpong", "size", "8")),
    "size-negative": lambda good: _edited(good, _set("pingpong", "size", -8)),
    "time-nan": lambda good: _edited(good, _set("pingpong", "t_min", float("nan"))),
    "kind-not-text": lambda good: _edited(good, _set("pingpong", "kind", 3)),
    "model-incomplete": lambda good: _edited(good, _set("collectives", "model", {"ts": 1})),
}


@pytest.mark.parametrize("command", ["fit", "report"])
@pytest.mark.parametrize("name", list(BAD_FILES))
def test_bad_results_file_in_process(capsys, tmp_path, good_file, command, name):
    """Files fit and report must refuse: exit 2, one ``dualmpi: error:`` line naming the file."""
    content = BAD_FILES[name]
    content = content(good_file) if callable(content) else content
    path = tmp_path / f"{name}.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    code = main([command, str(path), "--resamples", "0"])
    out, err = capsys.readouterr()
    assert code == 2, (name, err)
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dualmpi: error: "), err
    assert str(path) in lines[0]


@pytest.mark.parametrize("command", ["fit", "report"])
@pytest.mark.parametrize("name", ["not-dualmpi", "truncated", "empty", "missing", "directory"])
def test_bad_results_file_as_process(tmp_path, good_file, command, name):
    """``python -m dualmpi fit|report FILE``: exit code 2, one error line, no traceback."""
    path = tmp_path / f"{name}.json"
    text = Path(good_file).read_text(encoding="utf-8")
    if name == "not-dualmpi":  # another tool's JSON (run files are results fit/report read)
        path.write_text(json.dumps({"benchmarks": [{"name": "x", "stats": {"mean": 1.0}}]}),
                        encoding="utf-8")
    elif name == "truncated":
        path.write_text(text[: len(text) // 2], encoding="utf-8")
    elif name == "empty":
        path.write_text("", encoding="utf-8")
    elif name == "directory":
        path.mkdir()
    job = run_job([PYTHON, "-m", "dualmpi", command, path, "--resamples", "0"], None, LIMIT)
    assert job.returncode == 2, job.stderr
    assert job.stdout == "" and "Traceback" not in job.stderr, job.stderr
    lines = job.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"dualmpi: error: {path}"), job.stderr


@needs_mpiexec
@pytest.mark.parametrize("argv", [
    ["--fail-random", "8"],                                 # every link failed
    ["--collective", "bcast", "--fail-nodes", "0"],         # the root failed
])
def test_undeliverable_is_not_verified(env, argv):
    """Faults that cut pairs off: the table says NO with the undeliverable count, exit 1."""
    job = run_job(dualmpi_cmd(2, "run", SPEC, *argv, *QUICK), env, LIMIT)
    assert job.returncode == 1 and not job.timed_out, job.stderr[-2000:]
    assert "undeliverable" in job.stdout and " NO " in job.stdout, job.stdout
