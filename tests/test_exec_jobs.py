"""``dualmpi exec`` end to end: each test launches its own small mpiexec job (pure tier).

An ordinary mpi4py program prints the same with plain ``mpiexec python prog.py`` and under
``dualmpi exec`` (2, 4 and 8 ranks, one and several nodes per rank); every road around
``MPI.COMM_WORLD``'s methods stops with one line naming the call and a non-zero exit; exit
codes and exceptions are the program's; the report's figures are ``dualmpi.Comm.stats()``'s.
"""

import json
import re
import subprocess

import pytest

from dualmpi.engine import cloop
from dualmpi.topology import from_spec
from mpi_helpers import MPIEXEC, PYTHON, REPO, mpi_cmd, needs_mpiexec, ompi_env, run_job

pytestmark = needs_mpiexec

PROGRAMS = REPO / "tests" / "exec_programs"
ORDINARY = PROGRAMS / "ordinary.py"
ROADS = PROGRAMS / "roads.py"
LIMIT = 150  # MPIEXEC_TIMEOUT of each job (oversubscribed ranks on a loaded machine)


def _job(np_, *args, exec_args=None, under_mpi4py=True):
    """Run ``args`` (a program and its arguments) natively, or under ``dualmpi exec`` with
    ``exec_args`` (SPEC and options); return the :class:`mpi_helpers.Job`."""
    if exec_args is None:
        cmd = mpi_cmd(np_, *args) if under_mpi4py else [MPIEXEC, "-n", np_, PYTHON, *args]
    else:
        head = ["-m", "dualmpi", "exec", *exec_args, "--"]
        cmd = mpi_cmd(np_, *head, *args) if under_mpi4py else \
            [MPIEXEC, "-n", np_, PYTHON, *head, *args]
    for _ in range(2):
        job = run_job(cmd, ompi_env(LIMIT), timeout=LIMIT + 60)
        # a negative code: the launcher itself died by a signal, not a rank (Open MPI's prterun
        # was seen to end with SIGSEGV, -11, after the MPI_ABORT banner of a native job whose
        # rank raised): run the job once more
        if job.timed_out or job.returncode >= 0:
            break
    assert not job.timed_out, f"hung ({job.elapsed:.0f} s)\n{job.stdout}\n{job.stderr[-3000:]}"
    return job


_NATIVE = {}


def _native(np_, *args):
    key = (np_, *args)
    if key not in _NATIVE:
        _NATIVE[key] = _job(np_, *args)
    return _NATIVE[key]


@pytest.mark.parametrize("ranks, spec, q", [
    (2, "hypercube:n=1", None),
    (2, "dualcube:r=2", 4),        # four nodes per rank
    (4, "dualcube:r=2", None),     # two nodes per rank
    (8, "dualcube:r=2", None),
    (8, "metacube:k=1,m=2", 4),
])
def test_an_ordinary_program_prints_the_same(ranks, spec, q):
    """Collectives, object forms, nonblocking with MPI.Request.Waitall, Dup, array.array and
    mmap buffers, COMM_SELF and the local queries: the same stdout natively and over the
    network's links; a report on stderr."""
    native = _native(ranks, ORDINARY)
    assert native.returncode == 0, native.stderr[-3000:]
    extra = [] if q is None else ["--nodes-per-rank", str(q)]
    job = _job(ranks, ORDINARY, exec_args=[spec, *extra])
    assert job.returncode == 0, job.stdout + job.stderr[-3000:]
    assert job.stdout == native.stdout and job.stdout.count("\n") == ranks * 15
    lines = job.stderr.strip().splitlines()
    nodes_per_rank = q or from_spec(spec).num_nodes // ranks
    head = f"dualmpi exec: {ORDINARY} on {spec} ("
    assert lines[-6].startswith(head), job.stderr
    assert (f"x {nodes_per_rank} nodes)" in lines[-6]) == (nodes_per_rank > 1)
    assert "Dup " in lines[-5] and "Iallreduce " in lines[-5] and "alltoall " in lines[-5]
    assert lines[-1].startswith("  model time ")
    assert "Traceback" not in job.stderr


@pytest.mark.parametrize("ranks, spec", [(2, "hypercube:n=1"), (8, "dualcube:r=2")])
def test_a_program_that_needs_progress_while_it_blocks_prints_the_same(ranks, spec):
    """tests/exec_programs/overlap.py: a nonblocking collective waited for after blocking calls
    on the even ranks (a collective, a Recv) and before them on the odd ones; on D_2 the even
    ranks forward what the odd ones wait for, so they must advance it while they block."""
    program = PROGRAMS / "overlap.py"
    native = _native(ranks, program)
    assert native.returncode == 0, native.stderr[-3000:]
    job = _job(ranks, program, exec_args=[spec])
    assert job.returncode == 0, job.stdout + job.stderr[-3000:]
    assert job.stdout == native.stdout and job.stdout.count("\n") == ranks


def test_the_collectives_tour_runs_unchanged():
    """examples/collectives_tour.py without a SPEC is plain mpi4py: the same under exec."""
    tour = REPO / "examples" / "collectives_tour.py"
    native = _native(4, tour)
    job = _job(4, tour, exec_args=["dualcube:r=2"])
    assert native.returncode == 0 and job.returncode == 0, job.stderr[-3000:]
    assert job.stdout == native.stdout and job.stdout.count("\n") == 4 * 11


def test_rank_0_reads_standard_input():
    """mpiexec hands stdin to rank 0; under exec the program reads it as before."""
    def job(*exec_args):
        head = ["-m", "dualmpi", "exec", *exec_args, "--"] if exec_args else []
        proc = subprocess.run([str(c) for c in mpi_cmd(2, *head, ORDINARY, "stdin")],
                              input="a line for rank 0\n", capture_output=True, text=True,
                              env=ompi_env(LIMIT), cwd=REPO, timeout=LIMIT + 60)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return sorted(line for line in proc.stdout.splitlines() if " read " in line)

    assert job("hypercube:n=1") == job() == ["rank 0 read 'a line for rank 0'",
                                             "rank 1 read 'a line for rank 0'"]


def test_finalize_is_the_programs():
    """A program that calls MPI.Finalize itself still gets its report (MPI ends after it)."""
    native = _job(2, ORDINARY, "finalize")
    job = _job(2, ORDINARY, "finalize", exec_args=["hypercube:n=1"])
    assert native.returncode == 0 and job.returncode == 0, job.stderr[-3000:]
    assert sorted(job.stdout.splitlines()) == sorted(native.stdout.splitlines())
    assert "rank 1 finalized: True" in job.stdout and "model time" in job.stderr


@pytest.mark.parametrize("code", [3, 0])
def test_exit_codes_are_the_programs(code):
    """``sys.exit(3)`` on every rank: exit code 3 natively and under exec (no report)."""
    native = _job(2, ORDINARY, "exit", str(code))
    job = _job(2, ORDINARY, "exit", str(code), exec_args=["hypercube:n=1"])
    assert native.returncode == job.returncode == code, job.stderr[-3000:]
    assert job.stdout == native.stdout
    assert ("model time" in job.stderr) == (code == 0)


@pytest.mark.parametrize("under_mpi4py", [True, False], ids=["python-m-mpi4py", "plain-python"])
def test_an_exception_ends_the_job_as_under_python_m_mpi4py(under_mpi4py):
    """The last rank raises while the others wait for it: the same traceback and exit code 1,
    the job ends (abort) instead of hanging, with or without ``python -m mpi4py``."""
    native = _job(2, ORDINARY, "raise")
    job = _job(2, ORDINARY, "raise", exec_args=["hypercube:n=1"], under_mpi4py=under_mpi4py)
    assert native.returncode == job.returncode == 1, job.stderr[-3000:]
    assert job.stdout == native.stdout

    def program_frames(stderr):  # from the program's first frame to the exception's line
        # the launcher's own notice (MPI_ABORT, framed by dashed lines) may land amid the
        # rank's forwarded traceback: it is not the program's output
        stderr = re.sub(r"^-{20,}\n(?:.*\n)*?-{20,}\n", "", stderr, flags=re.M)
        text = stderr[stderr.index("Traceback (most recent call last):"):]
        text = text[text.index(f'  File "{ORDINARY}", line'):]
        return text[:text.index("ValueError: raised on rank 1 of 2") + 34]

    assert program_frames(job.stderr) == program_frames(native.stderr)
    assert job.stderr.count("Traceback (most recent call last):") == 1


#: Road -> (exit code, the line's pattern).  Through mpi4py: an MPI.Exception (exit 1 under
#: python -m mpi4py); from C: the line on stderr and MPI_Abort (exit 2).
ROAD_LINES = {
    "intracomm": (1, r"MPI_Allreduce on the program's communicator \(MPI.COMM_WORLD's handle\)"),
    "subclass": (1, r"MPI_Bcast on the program's communicator \(MPI.COMM_WORLD's handle\)"),
    "pkl5": (1, r"MPI_(Send|Probe|Mprobe) on the program's communicator"),
    "unbound": (1, r"MPI_Barrier on the program's communicator"),
    "fromhandle": (1, r"MPI_Barrier on the program's communicator"),
    "window": (1, r"MPI_Win_create on the program's communicator"),
    "allocate": (1, r"MPI_Win_allocate on the program's communicator"),
    "file": (1, r"MPI_File_open on the program's communicator"),
    "group": (1, r"MPI_Comm_create_from_group on a group of the program's processes"),
    "intercomm": (1, r"MPI_Intercomm_create on the program's communicator"),
    "split": (1, r"UnsupportedError: MPI.COMM_WORLD.Split is not supported under dualmpi exec: "
                 r"derived communicators"),
    "cart": (1, r"UnsupportedError: MPI.COMM_WORLD.Create_cart is not supported under dualmpi"),
    "spawn": (1, r"MPI_Comm_spawn would join the program's processes"),
    "ctypes-world": (2, r"^dualmpi exec: error: MPI_Barrier on the program's communicator "
                        r"\(MPI.COMM_WORLD's handle\) outside dualmpi \(called from \S*libffi"),
    "c-library": (2, r"^dualmpi exec: error: MPI_Bcast on the program's communicator "
                     r"\(MPI_COMM_WORLD\) outside dualmpi \(called from \S*poke\.so, not through "
                     r"mpi4py"),
}


#: Roads refused only while dualmpi.Comm lacks the method (derived communicators, item 2).
CARRIED_WHEN_THERE = {"split": "Split", "cart": "Create_cart"}


def _comm_has(name):
    from dualmpi.comm import Comm

    return name in vars(Comm)


@pytest.fixture(scope="module")
def c_library(tmp_path_factory):
    """A shared library whose ``poke_world()`` calls MPI_Bcast on MPI_COMM_WORLD (C code)."""
    cc = cloop.mpicc()
    if cc is None:
        pytest.skip("no mpicc")
    folder = tmp_path_factory.mktemp("poke")
    src = folder / "poke.c"
    src.write_text("#include <mpi.h>\nint poke_world(void) { int x = 0;\n"
                   "  return MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD); }\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(folder / "poke.so"), str(src)], check=True,
                   timeout=120)
    return folder / "poke.so"


@pytest.mark.parametrize("road", sorted(ROAD_LINES))
def test_every_road_around_the_stand_in_stops_with_one_line(road, c_library, tmp_path):
    """Each road either stops with one line naming the call (and a non-zero exit) or never
    returns: MPI never moves the program's data outside the links."""
    extra = {"c-library": [str(c_library)], "file": [str(tmp_path / "out.dat")]}.get(road, [])
    job = _job(2, ROADS, road, *extra, exec_args=["hypercube:n=1"])
    code, pattern = ROAD_LINES[road]
    shown = f"exit {job.returncode}\n{job.stdout}\n{job.stderr[-4000:]}"
    if road in CARRIED_WHEN_THERE and _comm_has(CARRIED_WHEN_THERE[road]):
        # dualmpi.Comm carries it now (issue 24, item 2): the stand-in hands it on, over the links
        assert job.returncode == 0 and f"survived {road}" in job.stdout, shown
        assert "link messages" in job.stderr, shown
        return
    assert job.returncode == code, shown
    assert "survived" not in job.stdout, shown
    found = [line for line in job.stderr.splitlines() if re.search(pattern, line)]
    assert found, shown
    if code == 2:  # from C: one line per rank that made the call, nothing else of ours
        assert all(line.startswith("dualmpi exec: error: ") for line in found)
    else:  # through mpi4py: the exception's line ends the traceback
        assert "Traceback" in job.stderr
        assert all(re.match(r"(mpi4py\.MPI\.Exception|dualmpi\.support\.UnsupportedError): ",
                            line) for line in found), found
    assert not (tmp_path / "out.dat").exists()


def test_without_the_guard_the_road_goes_through():
    """``--no-guard``: one warning line, and MPI.Intracomm(MPI.COMM_WORLD) moves the data
    directly, unseen by the report -- what the guard is there to stop."""
    job = _job(2, ROADS, "intracomm", exec_args=["hypercube:n=1", "--no-guard"])
    assert job.returncode == 0 and "survived intracomm" in job.stdout, job.stderr[-3000:]
    assert job.stderr.count("dualmpi exec: warning: --no-guard") == 2  # one per rank
    assert re.search(r"link messages 0, bytes 0 ", job.stderr), job.stderr


def test_the_roads_run_natively():
    """The same program without exec: the roads that need no second party run through."""
    for road in ("intracomm", "subclass", "unbound", "window", "split", "cart"):
        job = _native(2, ROADS, road)
        assert job.returncode == 0 and f"survived {road}" in job.stdout, job.stderr[-2000:]


def _route_links(topo, q, a, b):
    """Links of the route between ranks a and b (the shortest between their nodes)."""
    return min(len(topo.route(u, v)) - 1 for u in range(a * q, (a + 1) * q)
               for v in range(b * q, (b + 1) * q))


@pytest.mark.parametrize("ranks, spec, q", [(4, "dualcube:r=2", 2), (8, "hypercube:n=3", 1)])
def test_the_model_time_prices_each_call(tmp_path, ranks, spec, q):
    """tests/exec_programs/model.py (Bcast, Alltoall, Allgather, a Sendrecv ring, an Allreduce
    on the halves of a Split, a Sendrecv on a Create_cart): the report's model time is, per
    rank, each collective's schedule at its block size (``dualmpi simulate``'s coefficients:
    steps*t_s + blocks*m*t_w + hop rounds*t_h) plus each message the rank sent (t_s + m*t_w +
    d*t_h, d the route's links), the slowest rank's; the calls on the derived communicators are
    counted per method under their kind (Intracomm, Cartcomm)."""
    from dualmpi.simulator import simulate

    program = PROGRAMS / "model.py"
    ts, tw, th = 1e-6, 2e-9, 3e-7
    path = tmp_path / "model.json"
    job = _job(ranks, program, exec_args=[spec, "--nodes-per-rank", str(q), "--model",
                                          f"ts={ts},tw={tw},th={th}", "--report", str(path)])
    native = _native(ranks, program)
    assert job.returncode == 0 and native.returncode == 0, job.stdout + job.stderr[-3000:]
    assert sorted(job.stdout.splitlines()) == sorted(native.stdout.splitlines())
    rep = json.loads(path.read_text())
    topo = from_spec(spec)

    def schedule(name, m):
        c = simulate(topo, name, 0)["model"]
        return c["ts"] * ts + c["tw"] * m * tw + c["th"] * th

    # node-level blocks: the whole buffer, a pair's piece in q*q parts, a rank's in q parts
    collectives = schedule("bcast", 1000) + schedule("alltoall", 24 // (q * q)) + \
        schedule("allgather", 32 // q)
    per_rank = []
    for r in range(ranks):
        sent = [(64 * (r + 1), (r + 1) % ranks), (16, (r + 1) % ranks)]  # the two rings
        h, d = r // 2, 1  # recursive doubling on the half of rank r: partners h ^ 1, h ^ 2, ...
        while d < ranks // 2:
            sent.append((40, 2 * (h ^ d) + r % 2))
            d <<= 1
        p2p = sum(ts + m * tw + _route_links(topo, q, r, b) * th for m, b in sent)
        per_rank.append(collectives + p2p)
    assert rep["model"]["per_rank"] == pytest.approx(per_rank, rel=1e-9)
    assert rep["model"]["time"] == pytest.approx(max(per_rank), rel=1e-9)
    assert rep["model"]["collective_time"] == pytest.approx(collectives, rel=1e-9)
    assert rep["calls_by_kind"] == {
        "COMM_WORLD": {"Allgather": ranks, "Alltoall": ranks, "Bcast": ranks,
                       "Create_cart": ranks, "Sendrecv": ranks, "Split": ranks},
        "Cartcomm": {"Free": ranks, "Sendrecv": ranks},
        "Intracomm": {"Allreduce": ranks, "Free": ranks}}
    assert "of which on derived communicators: Cartcomm Free" in job.stderr


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """calls.py under exec on D_2 and Q_3 (4 ranks, 2 nodes each) with --report, the second
    compared with the first; and calls.py's main on a dualmpi.Comm with its summed stats()."""
    folder = tmp_path_factory.mktemp("reports")
    calls = PROGRAMS / "calls.py"
    q3 = _job(4, calls, exec_args=["hypercube:n=3", "--report", str(folder / "q3.json")])
    d2 = _job(4, calls, exec_args=["dualcube:r=2", "--report", str(folder / "d2.json"),
                                   "--compare-with", str(folder / "q3.json")])
    direct = _job(4, PROGRAMS / "calls_on_net.py", "dualcube:r=2", "2")
    native = _native(4, calls)
    for job in (q3, d2, direct, native):
        assert job.returncode == 0, job.stdout + job.stderr[-3000:]
    return {"q3": q3, "d2": d2, "direct": json.loads(direct.stdout), "native": native,
            "d2_json": json.loads((folder / "d2.json").read_text()),
            "q3_json": json.loads((folder / "q3.json").read_text())}


def test_the_report_is_stats(reports):
    """The report's link messages, bytes, per-link counts and hop rounds are what
    dualmpi.Comm.stats() counts for the same calls (summed over the ranks)."""
    rep, direct = reports["d2_json"], reports["direct"]
    assert rep["format"] == "dualmpi-exec/2"
    for key in ("messages", "bytes", "links"):
        assert rep[key] == direct[key], key
    assert (rep["hop_rounds"], rep["steps"]) == (direct["rounds"], direct["steps"])
    assert rep["messages"] > 0
    ts, tw, th = 2e-6, 1e-9, 5e-8
    per_rank = [s["steps"] * ts + s["step_bytes"] * tw + s["rounds"] * th + s["p2p_messages"] * ts
                + s["p2p_bytes"] * tw + s["p2p_hops"] * th for s in direct["per_rank"]]
    assert rep["model"]["per_rank"] == pytest.approx(per_rank)
    assert rep["model"]["time"] == pytest.approx(max(per_rank))
    assert rep["model"]["clock"] == {"ts": ts, "tw": tw, "th": th}
    assert rep["calls"]["Alltoall"] == 4
    assert rep["calls"]["allgather"] == 4 and rep["calls"]["Barrier"] == 4
    assert (rep["spec"], rep["nodes"], rep["ranks"], rep["nodes_per_rank"]) == \
        ("dualcube:r=2", 8, 4, 2)
    assert rep["program"] == str(PROGRAMS / "calls.py") and rep["args"] == []
    assert rep["meta"]["guard"] is True and rep["meta"]["mpi_library"]
    assert reports["d2"].stdout == reports["native"].stdout  # the program's output


def test_compare_with_the_other_networks_report(reports):
    """--compare-with: rank 0 prints both networks with their ratios (D_2 over Q_3)."""
    err = reports["d2"].stderr
    assert "compared with hypercube:n=3" in err
    d2, q3 = reports["d2_json"], reports["q3_json"]
    ratio = next(line for line in err.splitlines() if line.strip().startswith("ratio")).split()
    assert ratio[1] == f"{d2['messages'] / q3['messages']:.3f}"
    assert d2["compare"]["spec"] == "hypercube:n=3"
    assert d2["compare"]["report"]["messages"] == q3["messages"]


def test_launch_run_exec(tmp_path):
    """``bash launch/run exec SPEC PROGRAM``: exec's options after SPEC, the rank count from
    NP (here 4, two nodes each), the program's output and the report."""
    env = dict(ompi_env(LIMIT), NP="4")
    job = run_job(["bash", REPO / "launch" / "run", "exec", "dualcube:r=2", "--report",
                   tmp_path / "r.json", PROGRAMS / "calls.py"], env, timeout=LIMIT + 60)
    assert job.returncode == 0 and not job.timed_out, job.stdout + job.stderr[-3000:]
    assert job.stdout == _native(4, PROGRAMS / "calls.py").stdout
    rep = json.loads((tmp_path / "r.json").read_text())
    assert (rep["ranks"], rep["nodes_per_rank"], rep["spec"]) == (4, 2, "dualcube:r=2")


def _has_sendrecv():
    from dualmpi.comm import Comm

    return hasattr(Comm, "Sendrecv")


#: The examples need routed point-to-point (issue 24, item 1).
needs_sendrecv = pytest.mark.skipif(
    not _has_sendrecv(), reason="dualmpi.Comm has no Sendrecv yet: examples/jacobi.py and "
    "examples/taskfarm.py need routed point-to-point (issue 24, item 1)")


@needs_sendrecv
@pytest.mark.parametrize("example, args", [("jacobi", ["24", "60"]), ("taskfarm", ["24", "300"])])
@pytest.mark.parametrize("ranks, spec, q", [pytest.param(8, "dualcube:r=2", None, marks=pytest.mark.slow),
                                            (4, "dualcube:r=2", 2),
                                            (2, "hypercube:n=1", None)])
def test_the_examples_print_the_same(example, args, ranks, spec, q):
    """examples/jacobi.py (Sendrecv halos on a rank grid, PROC_NULL at its borders, allreduce)
    and examples/taskfarm.py (ANY_SOURCE, ANY_TAG, MPI.Status): the same line natively and
    with their messages routed over the network's links."""
    program = REPO / "examples" / f"{example}.py"
    native = _native(ranks, program, *args)
    extra = [] if q is None else ["--nodes-per-rank", str(q)]
    job = _job(ranks, program, *args, exec_args=[spec, *extra])
    assert native.returncode == 0 and job.returncode == 0, job.stdout + job.stderr[-3000:]
    assert job.stdout == native.stdout and job.stdout.startswith(example)
    calls = next(line for line in job.stderr.splitlines() if "calls (all ranks)" in line)
    assert ("Sendrecv" if example == "jacobi" else "recv") in calls
    messages = next(line for line in job.stderr.splitlines() if "link messages" in line)
    assert int(re.search(r"link messages (\d+)", messages).group(1)) > 0
