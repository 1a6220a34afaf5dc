"""The MPI benchmark scripts run end to end on a small case and write what they promise
(``benchmarks/engine.py``, ``benchmarks/packets.py``; their figures are in docs/performance.md)."""

import json

from mpi_helpers import REPO, mpi_cmd, needs_mpiexec, ompi_env, run_job


def _engine_rows(tmp_path, collectives, sizes, repeats=2, *extra):
    """Run ``benchmarks/engine.py`` on Q_1 (2 ranks, ``extra`` arguments); return its rows by
    (collective, size), having checked that the job ended well and wrote a row for each."""
    out = tmp_path / "engine.json"
    job = run_job(mpi_cmd(2, REPO / "benchmarks" / "engine.py", "hypercube:n=1", "--collectives",
                          ",".join(collectives), "--sizes", ",".join(map(str, sizes)),
                          "--repeats", str(repeats), *extra, "--json", out), ompi_env(120),
                  timeout=180)
    assert job.returncode == 0 and not job.timed_out, job.stdout + job.stderr
    data = json.loads(out.read_text())
    assert data["meta"]["in_a_row"] == ("--in-a-row" in extra)
    rows = {(r["collective"], r["size"]): r for r in data["rows"]}
    assert set(rows) == {(c, n) for c in collectives for n in sizes}
    return rows


@needs_mpiexec
def test_engine_benchmark_writes_every_variant(tmp_path):
    """Two ranks, one size: rows with dualmpi, the floor (and the rounds alone where a rank
    copies its own block), native and the Python loop, results checked against native."""
    out = tmp_path / "engine.json"
    job = run_job(mpi_cmd(2, REPO / "benchmarks" / "engine.py", "dualcube:r=1", "--sizes",
                          "65536", "--repeats", "2", "--layers", "--json", out), ompi_env(120),
                  timeout=180)
    assert job.returncode == 0 and not job.timed_out, job.stdout + job.stderr
    data = json.loads(out.read_text())
    assert data["format"] == "dualmpi-engine-bench/1" and data["meta"]["ranks"] == 2
    rows = {r["collective"]: r for r in data["rows"]}
    assert set(rows) == {"bcast", "scatter", "allgather", "alltoall"}
    for name, row in rows.items():
        assert {"dualmpi", "floor", "native"} <= set(row["median"]), name
        assert all(len(ts) == 2 for ts in row["times"].values())
    if data["meta"]["compiled_loop"]:
        assert "floor-rounds" in rows["allgather"]["median"]  # every rank copies its own block
        assert "floor-rounds" not in rows["bcast"]["median"]
        for name, row in rows.items():  # --layers: the C loop with the call's own checks
            assert row["checked/floor"] > 0 and "checked" in row["median"], name
    assert data["meta"]["progress_thread"] in (True, False)


@needs_mpiexec
def test_engine_benchmark_times_the_merged_plan_of_a_repeated_v_variant(tmp_path):
    """A v-variant, repeated, sends its count table in its plan's messages (on its store at
    8 B, zero-copy at 64 KiB): the merged plan is timed too (floor-merged)."""
    rows = _engine_rows(tmp_path, ("allgatherv", "scatterv"), (8, 65536))
    for (coll, size), row in rows.items():
        assert "floor-merged" in row["median"], (coll, size)
        assert row["floor-merged/floor"] > 0 and row["dualmpi/floor-merged"] > 0


@needs_mpiexec
def test_engine_benchmark_times_calls_alternating_between_buffers(tmp_path):
    """``*_alternating``: the same plan on two sets of buffers in turn, checked against native
    MPI's alternating the same way, timed like the other rows; ``*_spec``: the buffers as
    specs written in the call."""
    rows = _engine_rows(tmp_path, ("alltoall_alternating", "allreduce_spec"), (8, 65536))
    for key, row in rows.items():
        assert row["dualmpi/native"] > 0 and row["dualmpi/floor"] > 0, key


@needs_mpiexec
def test_engine_benchmark_times_counts_that_never_repeat(tmp_path):
    """``*_fresh``: every call the next of 97 count tables, checked against native MPI's
    calls on the same tables; the floor's runner, out of the plan cache, is not freed by
    the calls' evictions (7 repeats of 20 calls make more plans than the cache keeps; it
    was: ``MPI_ERR_REQUEST`` in the floor's ``Startall``)."""
    rows = _engine_rows(tmp_path, ("alltoallv_fresh", "gatherv_fresh"), (8, 1024), repeats=7)
    for key, row in rows.items():
        assert row["dualmpi/native"] > 0 and row["dualmpi/floor"] > 0, key


@needs_mpiexec
def test_engine_benchmark_times_every_form_of_the_collectives(tmp_path):
    """``Alltoallw`` and ``Reduce_scatter`` beside the others, the nonblocking forms (started
    and waited for, floored by the blocking form's plan) and the neighbourhood collectives
    (against MPI's own on a graph of the same neighbours, no floor): each checked against
    native MPI before it is timed (the job fails when a result differs)."""
    forms = ("alltoallw", "reduce_scatter", "ibcast", "ialltoallv", "ireduce_scatter",
             "ibarrier", "neighbor_alltoallw", "neighbor_allgatherv", "ineighbor_alltoall")
    rows = _engine_rows(tmp_path, forms, (8, 65536))
    for (coll, size), row in rows.items():
        assert row["dualmpi/native"] > 0 and "native" in row["median"], (coll, size)
        if coll.startswith(("neighbor", "ineighbor")):
            assert "floor" not in row["median"] and row["neighbors"] == 1, (coll, size)
        else:
            assert row["dualmpi/floor"] > 0 and row["rounds"] >= 1, (coll, size)


@needs_mpiexec
def test_engine_benchmark_times_calls_in_a_row(tmp_path):
    """``--in-a-row``: a repeat's calls back to back after one barrier, every variant timed
    (a blocking, a nonblocking and a neighbourhood form), the run's metadata says so."""
    rows = _engine_rows(tmp_path, ("bcast", "iallreduce", "neighbor_alltoall"), (8,), 2,
                        "--in-a-row")
    for key, row in rows.items():
        assert row["median"]["dualmpi"] > 0 and row["median"]["native"] > 0, key


def test_table_models_every_form_by_its_schedule():
    """``benchmarks/table.py``'s model column: a nonblocking form, ``Alltoallw`` and
    ``Reduce_scatter`` are modelled by the schedule they run (the blocking form's, the total
    exchange's, the reduce-scatter's); a neighbourhood collective, which runs no schedule,
    has no model (NaN, a dash in the table)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_table", REPO / "benchmarks" / "table.py")
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    net = "dualcube:r=2"
    assert table.model_ratio(net, "reduce_scatter", 1024) == \
        table.model_ratio(net, "ireduce_scatter", 1024) == \
        table.model_ratio(net, "reduce_scatter_block", 1024)
    assert table.model_ratio(net, "ialltoallw", 64) == table.model_ratio(net, "alltoall", 64)
    assert table.model_ratio(net, "ibcast", 8) == table.model_ratio(net, "bcast", 8) != \
        table.model_ratio(net, "barrier", 8)
    steps, step_bytes = table.model_ratio(net, "ineighbor_alltoall", 8)
    assert steps != steps and step_bytes != step_bytes
    assert table._model_cells(net, "neighbor_allgather", 8) == ("—", "—")


@needs_mpiexec
def test_progress_thread_benchmark_runs_each_variant_as_asked(tmp_path):
    """One job of each variant: the jobs ran with the thread, with the 10-ms idle sleep and
    without the thread as their names say (engine.py records it), and the ratios are there."""
    import sys

    out = tmp_path / "thread.json"
    job = run_job([sys.executable, REPO / "benchmarks" / "progress_thread.py", "dualcube:r=1",
                   "--ranks", "2", "--jobs", "1", "--collectives", "bcast", "--sizes", "8",
                   "--repeats", "2", "--json", out], ompi_env(120), timeout=300)
    assert job.returncode == 0 and not job.timed_out, job.stdout + job.stderr
    data = json.loads(out.read_text())
    ran = {r["variant"]: (r["progress_thread"], r["poll_cold_s"]) for r in data["runs"]}
    assert ran == {"on": (True, 2e-3), "cold10": (True, 1e-2), "off": (False, 2e-3)}
    (row,) = data["rows"]
    assert row["collective"] == "bcast" and row["dualmpi off/on"] > 0
    assert row["native off/on"] > 0 and row["floor off/on"] > 0


@needs_mpiexec
def test_new_buffers_benchmark_times_both_paths(tmp_path):
    """Two ranks, one size, the threshold lowered below it: the 'dualmpi' calls ran zero-copy
    on runners of their own and the 'copied' ones did not, results checked against native."""
    out = tmp_path / "new_buffers.json"
    job = run_job(mpi_cmd(2, REPO / "benchmarks" / "new_buffers.py", "hypercube:n=1", "--sizes",
                          "65536", "--repeats", "2", "--calls", "2", "--zero-copy-first",
                          "65536", "--json", out), ompi_env(120), timeout=180)
    assert job.returncode == 0 and not job.timed_out, job.stdout + job.stderr
    data = json.loads(out.read_text())
    assert data["format"] == "dualmpi-new-buffers-bench/1" and data["meta"]["ranks"] == 2
    rows = {r["collective"]: r for r in data["rows"]}
    assert set(rows) == {"alltoall", "allgather", "bcast", "scatter", "gather", "alltoallv",
                         "allgatherv"}
    for name, row in rows.items():
        assert row["zero_copy"] and not row["zero_copy_copied"], name
        assert all(len(ts) == 2 for ts in row["times"].values()), name


@needs_mpiexec
def test_packets_benchmark_times_every_piece_count(tmp_path):
    """Every collective with 1..16 pieces; the plans really were cut that many times."""
    out = tmp_path / "packets.json"
    job = run_job(mpi_cmd(2, REPO / "benchmarks" / "packets.py", "dualcube:r=1", "--size",
                          "4096", "--repeats", "2", "--calls", "1", "--json", out),
                  ompi_env(120), timeout=180)
    assert job.returncode == 0 and not job.timed_out, job.stdout + job.stderr
    data = json.loads(out.read_text())
    assert data["format"] == "dualmpi-packets-bench/1"
    assert [r["collective"] for r in data["rows"]] == ["bcast", "scatter", "allgather", "alltoall"]
    for row in data["rows"]:
        assert row["packets"] == {str(p): p for p in (1, 2, 4, 8, 16)}
        assert row["relative"]["1"] == 1.0


@needs_mpiexec
def test_plan_setup_benchmark_reports_every_stage(tmp_path):
    """One 2-rank job on a small metacube: both ranks' stage times, and their sum."""
    import sys

    out = tmp_path / "setup.json"
    job = run_job([sys.executable, REPO / "benchmarks" / "plan_setup.py", "--spec",
                   "metacube:k=2,m=1", "--jobs", "1", "--json", out], ompi_env(120), timeout=180)
    assert job.returncode == 0 and not job.timed_out, job.stdout + job.stderr
    data = json.loads(out.read_text())
    assert data["format"] == "dualmpi-plan-setup/1" and data["rank_runs"] == 2
    for rank in data["per_rank"]:
        stages = sum(rank[k] for k in ("schedule", "compile", "bind", "requests"))
        assert abs(stages - rank["total"]) < 1e-6 and rank["total"] > 0


@needs_mpiexec
def test_first_call_benchmark_times_every_part(tmp_path):
    """One job streamed and one compiled on a small metacube: the parts of the first call add
    up to it, the compiled one built a plan and the streamed one none, both checked against
    MPI's total exchange (the script stops otherwise)."""
    import sys

    out = tmp_path / "first.json"
    job = run_job([sys.executable, REPO / "benchmarks" / "first_call.py", "--spec",
                   "metacube:k=2,m=1", "--jobs", "1", "--calls", "2", "--stream", "True,False",
                   "--json", out], ompi_env(120), timeout=300)
    assert job.returncode == 0 and not job.timed_out, job.stdout + job.stderr
    data = json.loads(out.read_text())
    assert data["format"] == "dualmpi-first-call/1"
    assert set(data["runs"]) == {"now/stream=True", "now/stream=False"}
    for name, (run,) in data["runs"].items():
        assert run["ok"] and run["streamed"] == name.endswith("True") and len(run["ranks"]) == 2
        for rank in run["ranks"]:
            parts = sum(rank[f"{p}_s"] for p in ("schedule", "compile", "bind", "setup", "run"))
            assert abs(parts - rank["first_s"]) < 1e-9 and rank["setup_s"] > 0
            assert (rank["compile_s"] > 0) == (not run["streamed"])
    assert "now/stream=True / now/stream=False" in data["ratios"]


@needs_mpiexec
def test_beside_benchmark_writes_every_row(tmp_path):
    """``benchmarks/beside.py`` on D_1 (2 ranks), one size: a row per collective with the four
    variants timed, the results equal to native MPI's."""
    out = tmp_path / "beside.json"
    job = run_job(mpi_cmd(2, REPO / "benchmarks" / "beside.py", "dualcube:r=1", "--sizes", "64",
                          "--repeats", "1", "--calls", "2", "--json", out), ompi_env(120),
                  timeout=180)
    assert job.returncode == 0 and not job.timed_out, job.stdout + job.stderr
    data = json.loads(out.read_text())
    assert data["format"] == "dualmpi-beside-bench/1" and data["results_match_native"]
    assert [(r["collective"], r["size"]) for r in data["rows"]] == [("Bcast", 64),
                                                                    ("Allreduce", 64)]
    for row in data["rows"]:
        assert set(row["median"]) == {"dualmpi/after", "dualmpi/beside", "native/after",
                                      "native/beside"}
        assert all(len(ts) == 1 and ts[0] > 0 for ts in row["times"].values())


@needs_mpiexec
def test_percall_benchmark_times_each_form_against_native(tmp_path):
    """``benchmarks/percall.py`` on Q_1 (2 ranks): a row per form asked, each with every
    repeat's loop timed for dualmpi and native MPI (results checked first), and with
    ``--against`` the commit's too; a bad form is refused with exit status 2."""
    out = tmp_path / "percall.json"
    job = run_job(mpi_cmd(2, REPO / "benchmarks" / "percall.py", "hypercube:n=1", "--forms",
                          "Ibcast,Iallgather,Bcast,Allreduce_uint8", "--calls", "5", "--repeats",
                          "2", "--json", out), ompi_env(120), timeout=180)
    assert job.returncode == 0 and not job.timed_out, job.stdout + job.stderr
    data = json.loads(out.read_text())
    assert data["format"] == "percall-1" and data["meta"]["calls"] == 5
    assert [r["form"] for r in data["rows"]] == ["Ibcast", "Iallgather", "Bcast", "Allreduce_uint8"]
    assert [r["dtype"] for r in data["rows"]] == ["int64"] * 3 + ["uint8"]
    for row in data["rows"]:
        assert set(row["samples"]) == {"dualmpi", "native"}
        assert all(len(ts) == 2 and min(ts) > 0 for ts in row["samples"].values())
        assert row["dualmpi/native"] > 0
    # (against the checkout's own commit: two dualmpi packages in one process share the
    # extensions built from the same sources, each with its own Request.Wait: recall.c's WaitMethod)
    both = run_job(mpi_cmd(2, REPO / "benchmarks" / "percall.py", "hypercube:n=1", "--forms",
                           "Ibcast,Iallreduce", "--calls", "5", "--repeats", "1", "--against",
                           "HEAD", "--json", out), ompi_env(120), timeout=180)
    assert both.returncode == 0 and not both.timed_out, both.stdout + both.stderr
    rows = json.loads(out.read_text())["rows"]
    assert all(set(r["samples"]) == {"dualmpi", "against", "native"} for r in rows)
    bad = run_job(mpi_cmd(2, REPO / "benchmarks" / "percall.py", "hypercube:n=1", "--forms",
                          "Nope"), ompi_env(60), timeout=120)
    assert bad.returncode == 2 and "bad --forms" in bad.stderr, bad.stdout + bad.stderr


@needs_mpiexec
def test_start_or_isend_benchmark_times_both_ways(tmp_path):
    """Two ranks, two sizes, one and two segments: a row for each with both ways timed every
    repeat (a time per exchange, > 0) and their ratio; an odd rank count is refused."""
    out = tmp_path / "start.json"
    script = REPO / "benchmarks" / "start_or_isend.py"
    job = run_job(mpi_cmd(2, script, "--sizes", "8,300", "--segments", "1,2", "--iters", "50",
                          "--repeats", "3", "--json", out), ompi_env(120), timeout=180)
    assert job.returncode == 0 and not job.timed_out, job.stdout + job.stderr
    data = json.loads(out.read_text())
    assert data["format"] == "dualmpi-start-or-isend/1" and data["meta"]["iters"] == 50
    rows = {(r["bytes"], r["segments"]): r for r in data["rows"]}
    assert set(rows) == {(8, 1), (300, 1), (300, 2)}  # (8 bytes: too short for 2 segments)
    for row in rows.values():
        assert all(len(ts) == 3 and min(ts) > 0 for ts in row["times"].values())
        assert row["isend/start"] == row["median"]["isend"] / row["median"]["start"]
    odd = run_job(mpi_cmd(1, script, "--json", tmp_path / "odd.json"), ompi_env(120),
                  timeout=180)
    assert odd.returncode != 0 and "even number of ranks" in odd.stdout + odd.stderr


@needs_mpiexec
def test_start_or_isend_benchmark_times_packed_against_hindexed(tmp_path):
    """``--packed``: two ranks, two sizes, segment counts 1 (left out: nothing to pack), 2 and
    3: a row for each of the others with both ways timed every repeat and their ratio, the
    mode in the metadata."""
    out = tmp_path / "packed.json"
    script = REPO / "benchmarks" / "start_or_isend.py"
    job = run_job(mpi_cmd(2, script, "--packed", "--sizes", "24,300", "--segments", "1,2,3",
                          "--iters", "50", "--repeats", "3", "--json", out), ompi_env(120),
                  timeout=180)
    assert job.returncode == 0 and not job.timed_out, job.stdout + job.stderr
    data = json.loads(out.read_text())
    assert data["meta"]["packed"] is True
    rows = {(r["bytes"], r["segments"]): r for r in data["rows"]}
    assert set(rows) == {(24, 2), (24, 3), (300, 2), (300, 3)}
    for row in rows.values():
        assert set(row["times"]) == {"hindexed", "packed"}
        assert all(len(ts) == 3 and min(ts) > 0 for ts in row["times"].values())
        assert row["packed/hindexed"] == row["median"]["packed"] / row["median"]["hindexed"]
