"""``dualmpi exec``, the pure parts: the report and its model time, the command line, the stand-in's
method table and the guard's build (no mpiexec; the jobs are in tests/test_exec_jobs.py)."""

import json
import os
import re
import subprocess
import sys

import pytest

from dualmpi.cli import build_parser
from dualmpi.engine import cloop
from dualmpi.errors import InputError
from dualmpi.exec import FORMAT, compare_refusal, report
from dualmpi.support import STATUS
from dualmpi.topology import from_spec
from mpi_helpers import REPO

CLOCK = {"ts": 2e-6, "tw": 1e-9, "th": 5e-8}


def _record(calls, links, rounds=0, steps=0, collectives=0, step_bytes=0, p2p=(0, 0, 0),
            kinds=None):
    stats = report.empty_stats()
    report.add_stats(stats, {"messages": sum(m for m, _ in links.values()),
                             "bytes": sum(n for _, n in links.values()), "rounds": rounds,
                             "steps": steps, "collectives": collectives, "links": links,
                             "step_bytes": step_bytes, "p2p_messages": p2p[0],
                             "p2p_bytes": p2p[1], "p2p_hops": p2p[2]})
    return {"calls": calls, "kinds": kinds or {"COMM_WORLD": dict(calls)},
            "stats": report.record_stats(stats), "refusals": 0, "refusal": None}


def test_build_sums_the_ranks_and_prices_each_rank():
    """Two ranks' records: calls and links summed; the model time the slowest rank's
    collectives (steps*t_s + step_bytes*t_w + rounds*t_h) plus its point-to-point messages
    (messages*t_s + bytes*t_w + hops*t_h)."""
    topo = from_spec("hypercube:n=1")
    recs = [_record({"Bcast": 1, "Send": 2}, {(0, 1): (3, 300)}, rounds=1, steps=1,
                    collectives=1, step_bytes=100, p2p=(2, 200, 2)),
            _record({"Bcast": 1, "Recv": 2}, {(1, 0): (1, 5000)}, rounds=1, steps=1,
                    collectives=1, step_bytes=100, p2p=(1, 5000, 1))]
    rep = report.build(recs, topo, 1, CLOCK, {"x": 1}, program="p.py", args=["-v"])
    assert rep["format"] == FORMAT == report.FORMAT == "dualmpi-exec/2"
    assert rep["calls"] == {"Bcast": 2, "Recv": 2, "Send": 2}
    assert list(rep["calls"])[0] == "Bcast"  # most called first
    assert rep["calls_by_kind"] == {"COMM_WORLD": {"Bcast": 2, "Recv": 2, "Send": 2}}
    assert (rep["messages"], rep["bytes"], rep["links_used"]) == (4, 5300, 2)
    assert rep["links"] == [[0, 1, 3, 300], [1, 0, 1, 5000]]
    assert rep["busiest_links"][0] == [1, 0, 1, 5000]
    assert (rep["p2p_messages"], rep["p2p_bytes"], rep["p2p_hops"]) == (3, 5200, 3)
    coll = 2e-6 + 100e-9 + 5e-8
    p2p = [2 * 2e-6 + 200e-9 + 2 * 5e-8, 2e-6 + 5000e-9 + 5e-8]
    m = rep["model"]
    assert m["rank"] == 1 and m["time"] == pytest.approx(coll + p2p[1])
    assert m["collective_time"] == pytest.approx(coll) and m["p2p_time"] == pytest.approx(p2p[1])
    assert m["per_rank"] == pytest.approx([coll + p2p[0], coll + p2p[1]])
    assert m["collectives"] == {"steps": 1, "step_bytes": 100, "hop_rounds": 1}
    assert m["p2p"] == {"messages": 1, "bytes": 5000, "hops": 1}
    assert m["clock"] == CLOCK
    assert (rep["hop_rounds"], rep["steps"], rep["ranks"], rep["program"]) == (1, 1, 2, "p.py")
    json.dumps(rep)  # JSON as it is


def test_model_time_follows_the_clock():
    """The slowest rank depends on the clock: many small messages under t_s, few large under
    t_w; no rank, no time."""
    few = dict(steps=0, step_bytes=0, rounds=0, p2p_messages=1, p2p_bytes=10 ** 6, p2p_hops=1)
    many = dict(few, p2p_messages=100, p2p_bytes=100, p2p_hops=100)
    assert report.model_time([many, few], {"ts": 1e-3, "tw": 0, "th": 0})["rank"] == 0
    assert report.model_time([many, few], {"ts": 0, "tw": 1e-9, "th": 0})["rank"] == 1
    assert report.model_time([many, few], {"ts": 0, "tw": 0, "th": 1.0})["time"] == 100.0
    m = report.model_time([], CLOCK)
    assert (m["time"], m["rank"], m["per_rank"]) == (0.0, None, [])


def test_text_is_short_and_names_what_the_report_holds():
    topo = from_spec("dualcube:r=2")
    recs = [_record({"Alltoall": 1}, {(0, 1): (2, 64)}, 3, 3, 1, 96)] * 4
    rep = report.build(recs, topo, 2, CLOCK, program="prog.py")
    lines = report.text(rep)
    assert lines[0] == "dualmpi exec: prog.py on dualcube:r=2 (8 nodes, 4 ranks x 2 nodes)"
    assert "calls (all ranks): Alltoall 4" in lines[1]
    assert "link messages 8, bytes 256 over 1 directed links; busiest: 0->1 8 msgs 256 B" \
        in lines[2]
    assert lines[3].startswith("  hop rounds 3 (paper steps 3")
    assert lines[4] == "  point-to-point: 0 messages sent, 0 bytes, 0 route links"
    assert re.search(r"model time 6\.246 us at t_s = 2 us, t_w = 1 ns/B, t_h = 50 ns: "
                     r"collectives 6\.246 us \+ point-to-point 0 ns \(rank 0, the slowest\)",
                     lines[5]), lines[5]
    assert len(lines) == 6


def test_calls_on_derived_communicators_are_listed_by_kind():
    """calls sums every kind; calls_by_kind and a line of the text name the derived ones."""
    topo = from_spec("hypercube:n=1")
    kinds = {"COMM_WORLD": {"Split": 1, "Create_cart": 1},
             "Intracomm": {"Allreduce": 2, "Free": 1}, "Cartcomm": {"Sendrecv": 1}}
    calls = {"Split": 1, "Create_cart": 1, "Allreduce": 2, "Free": 1, "Sendrecv": 1}
    rep = report.build([_record(calls, {}, kinds=kinds)] * 2, topo, 1, CLOCK)
    assert rep["calls"]["Allreduce"] == 4 and rep["calls"]["Split"] == 2
    assert list(rep["calls_by_kind"]) == ["COMM_WORLD", "Cartcomm", "Intracomm"]
    assert rep["calls_by_kind"]["Intracomm"] == {"Allreduce": 4, "Free": 2}
    line = next(x for x in report.text(rep) if "derived" in x)
    assert line == ("  of which on derived communicators: Cartcomm Sendrecv 2; "
                    "Intracomm Allreduce 4, Free 2")


def test_refused_calls_the_program_caught_are_reported():
    topo = from_spec("hypercube:n=1")
    rec = _record({}, {})
    rec.update(refusals=1, refusal="dualmpi exec: error: MPI_Win_create ...")
    rep = report.build([rec, _record({}, {})], topo, 1, CLOCK)
    assert rep["refused_calls"] == 1 and rep["refusal"].startswith("dualmpi exec: error: MPI_Win")
    assert "refused calls: 1 (the program caught them" in report.text(rep)[-1]


def test_compare_two_runs(tmp_path):
    """--compare-with: both networks side by side with ratios; differences are warned of."""
    recs = [_record({"Bcast": 1}, {(0, 1): (2, 100)}, 2, 2, 1)]
    d2 = report.build(recs * 8, from_spec("dualcube:r=2"), 1, CLOCK, program="a.py")
    q3 = report.build([_record({"Bcast": 1}, {(0, 1): (1, 100)}, 1, 1, 1)] * 8,
                      from_spec("hypercube:n=3"), 1, CLOCK, program="b.py")
    path = tmp_path / "q3.json"
    path.write_text(json.dumps(q3))
    other = report.read(path)
    lines = report.compare(d2, other, path)
    assert lines[0] == f"  compared with hypercube:n=3 ({path}):"
    assert any("warning: the runs differ in program: 'a.py' here, 'b.py' there" in x
               for x in lines)
    ratio = lines[-1].split()
    assert ratio[:3] == ["ratio", "2.000", "1.000"]


@pytest.mark.parametrize("content, words", [
    ("not json", "not a JSON file"),
    ('{"format": "dualmpi-run/1"}', "not a dualmpi exec report (format 'dualmpi-run/1'"),
    ('[1, 2]', "not a dualmpi exec report"),
    ('{"format": "dualmpi-exec/2", "spec": "x"}', "report without 'nodes'"),
    ('{"format": "dualmpi-exec/1", "spec": "x"}', "a dualmpi-exec/1 report, whose model time"),
])
def test_read_refuses_other_files(tmp_path, content, words):
    path = tmp_path / "r.json"
    path.write_text(content)
    with pytest.raises(InputError, match=re.escape(words)):
        report.read(path)
    with pytest.raises(InputError, match="no such file|No such file"):
        report.read(tmp_path / "missing.json")


def test_compare_says_why_not_and_how():
    """--compare cannot run an unmodified program twice: the two commands, or why no cube."""
    text = str(compare_refusal(from_spec("dualcube:r=3"), "32"))
    assert "cannot run twice in one job" in text
    assert "mpiexec -n 32 python -m mpi4py -m dualmpi exec hypercube:n=5 --report " \
           "hypercube-n=5.json -- PROGRAM ARGS" in text
    assert "--compare-with hypercube-n=5.json" in text
    assert "no hypercube has 12 nodes" in str(compare_refusal(from_spec("hypercube:n=2") and
                                                              _twelve()))


def _twelve():
    class Twelve:
        num_nodes = 12
    return Twelve()


def _parse(*argv):
    return build_parser().parse_args(["exec", *argv])


def test_the_command_line_splits_exec_options_from_the_program():
    """Options before PROGRAM are exec's, everything after it the program's (``--`` allowed)."""
    a = _parse("--nodes-per-rank", "2", "--report", "r.json", "dualcube:r=2", "prog.py", "--report",
               "x", "-v")
    assert (a.spec, a.program, a.args, a.nodes_per_rank, a.report) == \
        ("dualcube:r=2", "prog.py", ["--report", "x", "-v"], 2, "r.json")
    a = _parse("dualcube:r=2", "--", "prog.py", "--", "x")
    assert (a.program, a.args) == ("prog.py", ["--", "x"])
    assert a.func.__module__ == "dualmpi.exec"


@pytest.mark.parametrize("argv, words", [
    (["dualcube:r=2", "no/such/prog.py"], "program no/such/prog.py: no such file"),
    (["dualcube:r=2", "tests"], "program tests: not a file"),
    (["--nodes-per-rank", "0", "dualcube:r=2", "tests/test_exec.py"], "--nodes-per-rank must be"),
    (["--model", "ts=x", "dualcube:r=2", "tests/test_exec.py"], "--model"),
    (["--compare", "dualcube:r=2", "tests/test_exec.py"], "cannot run twice in one job"),
    (["--compare-with", "tests/test_exec.py", "dualcube:r=2", "tests/test_exec.py"],
     "not a JSON file"),
    (["--report", "tests", "dualcube:r=2", "tests/test_exec.py"], "--report tests: is a directory"),
    (["nosuch:r=2", "tests/test_exec.py"], "nosuch"),
])
def test_bad_input_is_one_line_before_mpi(argv, words):
    """Without mpiexec and before MPI starts: one ``dualmpi: error:`` line, exit code 2."""
    proc = subprocess.run([sys.executable, "-m", "dualmpi", "exec", *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dualmpi: error:"), proc.stderr
    assert words in lines[0], lines[0]
    assert "mpi4py" not in proc.stdout


def test_every_method_of_intracomm_has_a_road():
    """Each method of MPI.Intracomm (support.STATUS) is the handle's, the stand-in's own or
    handed to the network's dualmpi.Comm; nothing falls through to MPI unseen."""
    from dualmpi.exec import world as _world  # noqa: F401 - importing loads mpi4py's MPI

    carried, local, own = set(_world.CARRIED), _world.LOCAL, _world.OWN
    assert set(STATUS) <= carried | local | own
    assert not (carried & local) and not (carried & own)
    for name in ("Send", "Recv", "Sendrecv", "Bcast", "Ibcast", "allreduce", "Split",
                 "Create_cart", "Spawn", "Neighbor_alltoall", "Idup"):
        assert name in carried, name
    for name in STATUS:
        if name in carried:
            assert getattr(_world.World, name).__qualname__ == name


def test_the_guard_builds_and_exports_its_functions(tmp_path):
    """guard.c compiles with the MPI library's mpicc (cached like the round loop) and defines
    the communication functions, never an MPI_*_c one."""
    if cloop.mpicc() is None:
        pytest.skip("no mpicc")
    code = ("import sys, json; from dualmpi.engine import guard as g, cloop\n"
            "lib, why = cloop.build(g.LIBRARY, 'test')\n"
            "print(json.dumps([why, lib._name if lib else None]))\n")
    env = dict(os.environ, DUALMPI_CACHE=str(tmp_path), PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr
    why, path = json.loads(proc.stdout)
    assert why == "" and path.startswith(str(tmp_path)) and "/guard-" in path
    names = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True,
                           timeout=60).stdout.split()
    for fn in ("MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Probe", "MPI_Mprobe", "MPI_Improbe",
               "MPI_Bcast", "MPI_Ialltoallw", "MPI_Allreduce_init", "MPI_Neighbor_alltoall",
               "MPI_Comm_dup", "MPI_Comm_split", "MPI_Cart_create", "MPI_Win_create",
               "MPI_Win_allocate_shared", "MPI_File_open", "MPI_Intercomm_create",
               "MPI_Comm_spawn", "MPI_Comm_connect", "MPI_Comm_create_from_group",
               "dualmpi_guard_arm", "dualmpi_guard_mark"):
        assert fn in names, fn
    assert not [n for n in names if re.fullmatch(r"MPI_\w+_c", n)]
