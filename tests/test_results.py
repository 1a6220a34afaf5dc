"""Results files a tool can read: format tags, run and sweep files in fit/report, info's distances."""

import json

import pytest

from dualmpi.cli import main
from dualmpi.model.results import RUN_FORMAT, ResultsError, load_any, load_results
from dualmpi.model.synthetic import write_synthetic
from dualmpi.simulator import simulate
from dualmpi.topology import from_spec

TRUTH = [(2e-4, 1e-8, 5e-5), (3e-4, 8e-9, 6e-5), (5e-4, 6e-9, 3e-4)]


def _run_doc(spec="dualcube:r=2", tagged=True, with_model=False):
    """A ``dualmpi run --json`` document with two collective rows (fields as run writes them)."""
    rows = []
    for coll, t in (("bcast", 1e-3), ("alltoall", 4e-3)):
        row = {"collective": coll, "algorithm": "x", "spec": spec, "root": 0, "size": 1024,
               "verified": True, "delivered": 7, "expected": 7, "link_violations": 0,
               "rounds": 4, "hop_rounds": 4, "messages": 7, "bytes": 7168, "iters": 20,
               "t_min": t, "t_avg": 1.1 * t, "t_max": 1.2 * t, "paper_rounds": 4}
        if with_model:
            row["model"] = simulate(from_spec(spec), coll, 0)["model"]
        rows.append(row)
    doc = {"meta": {"spec": spec, "nodes": 8}, "rows": rows}
    if tagged:
        doc = {"format": RUN_FORMAT, **doc}
    return doc


def _write(path, doc):
    path.write_text(json.dumps(doc))
    return str(path)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("tagged", [True, False])
def test_run_files_load_with_schedule_models(tmp_path, tagged):
    """Tagged and pre-tag run files load; a row without model gets its schedule's coefficients."""
    res = load_results(_write(tmp_path / "run.json", _run_doc(tagged=tagged)))
    assert res.format == RUN_FORMAT and res.pingpong == []
    want = {c: simulate(from_spec("dualcube:r=2"), c, 0)["model"] for c in ("bcast", "alltoall")}
    assert {r["collective"]: r["model"] for r in res.collectives} == want


def test_unknown_formats_are_refused(tmp_path):
    for doc in ({"format": "dualmpi-fit/1", "groups": []}, {"spec": "x", "rounds": 3}):
        with pytest.raises(ResultsError, match="not a dualmpi results file"):
            load_results(_write(tmp_path / "x.json", doc))


def test_sweep_folder_skips_failed_runs(tmp_path):
    d = tmp_path / "sweep"
    d.mkdir()
    _write(d / "a.json", _run_doc())
    _write(d / "b.json", _run_doc(spec="hypercube:n=3"))
    (d / "index.tsv").write_text("spec\tcollective\tsizes\tnodes\texit\tjson\tlog\n"
                                 "dualcube:r=2\tall\t1024\t8\t0\ta.json\ta.log\n"
                                 "hypercube:n=3\tall\t1024\t8\t1\tb.json\tb.log\n")
    assert [r.meta["spec"] for r in load_any(d)] == ["dualcube:r=2"]
    (d / "index.tsv").unlink()
    assert [r.meta["spec"] for r in load_any(d)] == ["dualcube:r=2", "hypercube:n=3"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ResultsError, match="without results files"):
        load_any(empty)


def test_fit_and_report_take_bench_run_and_sweep_alike(capsys, tmp_path):
    bench = str(write_synthetic(tmp_path / "bench.json", "dualcube:r=2", TRUTH, hops=(1, 2, 3),
                                noise=0.01, seed=1))
    runf = _write(tmp_path / "run.json", _run_doc(with_model=True))
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    _write(sweep / "h.json", _run_doc(spec="hypercube:n=3", tagged=False))
    code, out, err = run(capsys, "fit", bench, runf, str(sweep), "--pool", "--resamples", "0",
                         "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["format"] == "dualmpi-fit/1"
    preds = doc["groups"][0]["predictions"]
    assert {p["file"] for p in preds} == {bench, runf, str(sweep / "h.json")}
    assert all(p["predicted"] is not None for p in preds)
    code, out, err = run(capsys, "report", runf, str(sweep), "--resamples", "0")
    assert code == 0 and "no ping-pong rows: measured times only" in out
    code, _, err = run(capsys, "fit", runf)
    assert code == 2 and "no ping-pong rows" in err and "\n" not in err.strip()
