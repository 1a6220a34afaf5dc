"""``dualmpi run`` end to end: each test launches its own small mpiexec job (pure tier, not ``mpi``).

The jobs run with the venv's ``mpiexec`` and the Open MPI settings of ``launch/ompi-env.sh``
(oversubscription on few cores); each is limited by ``MPIEXEC_TIMEOUT`` and a subprocess
timeout, so a hang fails the test instead of stalling the suite.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dualmpi.collectives import COLLECTIVES

REPO = Path(__file__).resolve().parents[1]
MPIEXEC = Path(sys.executable).parent / "mpiexec"
TIMEOUT = 120  # seconds per job (subprocess); MPIEXEC_TIMEOUT below is shorter
SPEC = "dualcube:r=2"  # 8 nodes

pytestmark = pytest.mark.skipif(
    not MPIEXEC.exists(), reason=f"no mpiexec next to {sys.executable} (the Open MPI wheel's)"
)


@pytest.fixture(scope="module")
def mpi_env():
    """The environment with ``launch/ompi-env.sh`` applied, as a sourcing shell sees it."""
    out = subprocess.run(
        ["bash", "-c", '. "$1" && env -0', "bash", str(REPO / "launch" / "ompi-env.sh")],
        check=True, capture_output=True, timeout=30,
    ).stdout
    env = dict(item.split("=", 1) for item in out.decode().split("\0") if "=" in item)
    env["MPIEXEC_TIMEOUT"] = "100"
    return env


def dualmpi_run(env, np, *args, cwd=None):
    """Run ``mpiexec -n np python -m mpi4py -m dualmpi run ...``; return the CompletedProcess."""
    cmd = [str(MPIEXEC), "-n", str(np), sys.executable, "-m", "mpi4py", "-m", "dualmpi", "run", *args]
    return subprocess.run(cmd, env=env, cwd=cwd or REPO, capture_output=True, text=True,
                          timeout=TIMEOUT)


def error_lines(stderr):
    """Return the ``dualmpi: error:`` lines of ``stderr``."""
    return [line for line in stderr.splitlines() if line.startswith("dualmpi: error:")]


def assert_no_traceback(proc):
    """Neither stream of ``proc`` shows a Python traceback."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout, proc.stdout


def test_run_all_collectives_json(mpi_env, tmp_path):
    """8 ranks on D_2: every collective at sizes 0 and 64 verified, paper's rounds, JSON with meta."""
    out = tmp_path / "out.json"
    proc = dualmpi_run(mpi_env, 8, SPEC, "--collective", "all", "--sizes", "0,64",
                       "--iters", "1", "--warmup", "0", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_no_traceback(proc)
    data = json.loads(out.read_text())
    rows = data["rows"]
    assert [(r["collective"], r["size"]) for r in rows] == [
        (c, s) for c in COLLECTIVES for s in (0, 64)
    ]
    for row in rows:
        for key in ("collective", "size", "verified", "rounds", "messages",
                    "t_min", "t_avg", "t_max"):
            assert key in row, (key, row)
        assert row["verified"] is True, row
        assert row["link_violations"] == 0, row
        assert row["rounds"] == row["paper_rounds"], row
        assert 0 <= row["t_min"] <= row["t_avg"] <= row["t_max"], row
        assert "native_t_avg" not in row and "ratio" not in row, row
    meta = data["meta"]
    for key in ("mpi_library", "host", "date"):
        assert meta.get(key), (key, meta)
    assert (meta["spec"], meta["nodes"], meta["ranks"]) == (SPEC, 8, 8)
    assert "Open MPI" in meta["mpi_library"]


@pytest.mark.parametrize("ranks, want", [
    (3, f"dualmpi: error: {SPEC} has 8 nodes, which cannot be spread evenly over 3 ranks"),
    # (16 ranks: also tests/test_bad_input.py's ranks-too-many, in the default pass)
    pytest.param(16, f"dualmpi: error: {SPEC} has 8 nodes but the job has 16 ranks",
                 marks=pytest.mark.slow),
])
def test_run_wrong_rank_count_reports_on_every_rank(mpi_env, ranks, want):
    """3 or 16 ranks for the 8-node D_2 (4 would play 2 nodes each): every rank prints the
    one-line error, the job exits non-zero."""
    proc = dualmpi_run(mpi_env, ranks, SPEC, "--sizes", "0", "--iters", "1", "--warmup", "0")
    assert proc.returncode != 0
    assert_no_traceback(proc)
    lines = [line for line in error_lines(proc.stderr) if line.startswith(want)]
    assert len(lines) == ranks, proc.stderr
    found = sorted(int(m.group(1)) for m in
                   (re.search(rf"\[rank (\d+)/{ranks}\]", s) for s in lines) if m)
    assert found == list(range(ranks)), proc.stderr


def test_run_many_nodes_per_rank(mpi_env, tmp_path):
    """4 ranks for the 8-node D_2 play 2 nodes each; every collective is verified."""
    out = tmp_path / "multi.json"
    proc = dualmpi_run(mpi_env, 4, SPEC, "--sizes", "0,64", "--iters", "1", "--warmup", "0",
                       "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["meta"]["nodes_per_rank"] == 2
    assert len(data["rows"]) == 8 and all(r["verified"] for r in data["rows"])


@pytest.mark.parametrize("args, message", [
    (("--root", "9"), "node 9 out of range"),
    (("--sizes", "8,-1"), "bad message size '-1'"),
])
def test_run_bad_argument_is_one_line_error(mpi_env, args, message):
    """A root outside the network or a negative size: one clear error line, no traceback."""
    proc = dualmpi_run(mpi_env, 8, SPEC, *args)
    assert proc.returncode != 0
    assert_no_traceback(proc)
    lines = error_lines(proc.stderr)
    assert lines, proc.stderr
    distinct = {re.sub(r" \[rank \d+/\d+\]$", "", line) for line in lines}
    assert len(distinct) == 1, lines
    assert message in distinct.pop()
    assert "results written" not in proc.stdout


def test_run_baseline_adds_native_time_and_ratio(mpi_env, tmp_path):
    """--baseline: each row gains the native collective's t_avg (verified) and t_avg / native."""
    out = tmp_path / "out.json"
    proc = dualmpi_run(mpi_env, 8, SPEC, "--collective", "all", "--sizes", "64",
                       "--iters", "1", "--warmup", "0", "--baseline", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_no_traceback(proc)
    assert "native t_avg us" in proc.stdout and "emulated/native" in proc.stdout
    rows = json.loads(out.read_text())["rows"]
    assert [r["collective"] for r in rows] == list(COLLECTIVES)
    for row in rows:
        assert row["verified"] is True and row["native_verified"] is True, row
        assert row["native_t_avg"] > 0, row
        assert row["ratio"] == pytest.approx(row["t_avg"] / row["native_t_avg"]), row


@pytest.mark.parametrize("ranks", [8, 4])
def test_run_gather_with_baseline(mpi_env, tmp_path, ranks):
    """The gather has no table entry of its own: its buffers, the blocks its root ends with and
    MPI_Gather's arguments come from its description and layout. 8 ranks (4: two nodes each),
    root node 6: every byte verified, by MPI_Gather too, in the paper's 4 steps."""
    out = tmp_path / "gather.json"
    proc = dualmpi_run(mpi_env, ranks, SPEC, "--collective", "gather", "--root", "6", "--sizes",
                       "0,61", "--iters", "2", "--warmup", "1", "--baseline", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_no_traceback(proc)
    assert "emulated/native" in proc.stdout
    assert re.search(r"^gather +61 +yes +7/7 +4/4 ", proc.stdout, re.M), proc.stdout
    rows = json.loads(out.read_text())["rows"]
    assert [(r["collective"], r["size"]) for r in rows] == [("gather", 0), ("gather", 61)]
    for row in rows:
        assert row["verified"] is True and row["native_verified"] is True, row
        assert (row["root"], row["delivered"], row["expected"], row["missing"]) == (6, 7, 7, 0)
        assert row["rounds"] == row["paper_rounds"] == 4 and row["link_violations"] == 0, row
        assert row["messages"] == 7 and row["nodes_per_rank"] == 8 // ranks, row


def test_run_reports_link_sharing_and_shared_clock(mpi_env, tmp_path):
    """8 ranks, D_2 alltoall, cut-through --model: JSON link sharing > 1 where simulate says so,
    t_model the shared-bandwidth clock (above the paper's T), per-call times and their median."""
    from dualmpi.model.clock import ClockParams
    from dualmpi.simulator import simulate
    from dualmpi.topology import from_spec

    out = tmp_path / "out.json"
    proc = dualmpi_run(mpi_env, 8, SPEC, "--collective", "alltoall", "--sizes", "65536",
                       "--iters", "2", "--warmup", "0", "--switching", "cut-through",
                       "--model", "ts=2e-6,tw=1e-9,th=5e-8", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "link sharing" in proc.stdout and "t_paper us" in proc.stdout
    (row,) = json.loads(out.read_text())["rows"]
    want = simulate(from_spec(SPEC), "alltoall", clock=ClockParams(2e-6, 1e-9, 5e-8), size=65536)
    assert row["link_sharing"] == want["link_sharing"] and row["link_sharing"]["max"] == 2
    clock = row["virtual"]["model_clock"]
    assert clock["clock_time"] == pytest.approx(want["virtual"]["clock_time"])
    assert clock["clock_time"] == pytest.approx(row["virtual"]["time"])
    assert clock["clock_time"] > 1.2 * clock["paper_time"] and clock["contention_delay"] > 0
    assert len(row["t_calls"]) == 2 and min(row["t_calls"]) <= row["t_med"] <= max(row["t_calls"])


#: Two rows of D_2's total exchange on 2 ranks (4 nodes each): as measured, then with rank 0's
#: engine reporting 3 messages per call between two nodes that are not linked.
FORGED_LINKS = """
import json
from mpi4py import MPI
import dualmpi
from dualmpi.commands.run import row_passed
from dualmpi.measure.collective import run_collective
net = dualmpi.Comm(MPI.COMM_WORLD, "dualcube:r=2", watchdog=60)
topo = net.topology
far = next(v for v in range(1, 8) if not topo.is_link(0, v))
row = run_collective(net, "alltoall", 8, 0, 2, 0)
if net.Get_rank() == 0:
    stats = net.stats
    def forged():
        out = stats()
        out["links"][(0, far)] = (3 * 2, 24 * 2)  # 3 messages per call, over 2 timed calls
        return out
    net.stats = forged
bad = run_collective(net, "alltoall", 8, 0, 2, 0)
if net.Get_rank() == 0:
    print(json.dumps([{k: r.get(k, "absent") for k in ("verified", "missing", "corrupt",
                                                        "link_violations", "messages")}
                      | {"passed": row_passed(r)} for r in (row, bad)]))
net.Free()
"""


def test_run_rows_report_measured_link_violations(mpi_env, tmp_path):
    """``link_violations`` counts the engine's messages between nodes that are not linked (it was
    a constant 0 that still fed the exit code) and ``corrupt``, a copy of ``missing``, is gone."""
    script = tmp_path / "forged.py"
    script.write_text(FORGED_LINKS)
    cmd = [str(MPIEXEC), "-n", "2", sys.executable, "-m", "mpi4py", str(script)]
    proc = subprocess.run(cmd, env=dict(mpi_env, PYTHONPATH=str(REPO)), cwd=REPO,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row, bad = json.loads(proc.stdout.strip().splitlines()[-1])
    assert row == {"verified": True, "missing": 0, "corrupt": "absent", "link_violations": 0,
                   "messages": row["messages"], "passed": True}
    assert bad["link_violations"] == 3 and bad["verified"] and not bad["passed"], bad


def test_run_more_calls_than_the_probe_threshold(mpi_env, tmp_path):
    """A size with more calls than run.PROBE_ABOVE is timed on a few calls first (issue 23,
    item 13); the row then has exactly the calls asked for."""
    out = tmp_path / "out.json"
    proc = dualmpi_run(mpi_env, 2, SPEC, "--collective", "bcast", "--sizes", "8", "--iters",
                       "150", "--warmup", "0", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (row,) = json.loads(out.read_text())["rows"]
    assert row["iters"] == 150 and len(row["t_calls"]) == 150 and row["verified"], row
