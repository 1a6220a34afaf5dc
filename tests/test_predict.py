"""Predict before measuring (dualmpi.model.predict, benchmarks/predict.py): the pure parts.

The calibration is fitted to synthetic two-rank ping-pongs with known parameters, the
predictions are checked against the schedules' coefficients and the virtual clock, and
the document format, the oversubscription flag and the figure are checked without MPI.
"""

import json
import sys
from pathlib import Path

import pytest

from dualmpi.collectives import build_schedule
from dualmpi.errors import DualmpiError
from dualmpi.model.clock import ClockParams, schedule_time
from dualmpi.model.formulas import predict
from dualmpi.model.predict import (PREDICT_FORMAT, calibrate, check_document, compare,
                                   measured_rows, oversubscription, predict_collective,
                                   usable_cores)
from dualmpi.topology import from_spec

REPO = Path(__file__).resolve().parents[1]
SIZES = (8, 64, 1024, 4096, 8192, 32768, 65536, 262144)
CT = {"ts": 4e-6, "tw": 5e-10, "th": 2e-6}  # truth, the same in every regime
SF = {"ts": 3e-6, "tw": 2e-10}


def pingpongs(model):
    """Noise-free two-rank ping-pong rows over d = 1..4 hops from known parameters."""
    rows = []
    for m in SIZES:
        for d in (1, 2, 3, 4):
            t = (CT["ts"] + m * CT["tw"] + d * CT["th"] if model == "cut-through"
                 else d * (SF["ts"] + m * SF["tw"]))
            rows.append({"kind": "emulated", "size": m, "hops": d, "t_min": t, "t_avg": t,
                         "t_max": t, "verified": True})
    return rows


@pytest.mark.parametrize("model", ["cut-through", "store-and-forward"])
def test_calibration_recovers_parameters_and_switching(model):
    """The fit finds the switching model and its parameters in every regime."""
    cal = calibrate(pingpongs(model), resamples=0)
    assert cal["switching"] == model
    truth = CT if model == "cut-through" else SF
    for reg in cal["regimes"]:
        got = reg[model]["params"]
        for key, value in truth.items():
            assert got[key] == pytest.approx(value, rel=1e-6), (reg["label"], key)


@pytest.mark.parametrize("spec, coll", [("dualcube:r=2", "scatter"), ("hypercube:n=3", "alltoall"),
                                        ("dualcube:r=3", "alltoall")])
@pytest.mark.parametrize("size", [8, 65536])
def test_cut_through_prediction_is_formula_and_shared_clock(spec, coll, size):
    """Cut-through calibration: formula = coefficients x parameters; clock = the shared-link replay."""
    topo = from_spec(spec)
    p = predict_collective(topo, coll, size, calibrate(pingpongs("cut-through"), resamples=0))
    assert p["clock_switching"] == "cut-through"
    assert p["formula"] == pytest.approx(predict(p["model"], CT["ts"], CT["tw"], CT["th"], size))
    clock = ClockParams(CT["ts"], CT["tw"], CT["th"], contention="shared")
    want = schedule_time(build_schedule(coll, topo, 0), size, clock)["time"]
    assert p["clock"] == pytest.approx(want, rel=1e-6)
    assert p["clock"] >= p["formula"] * (1 - 1e-6)  # sharing only ever adds


def test_link_sharing_raises_the_dualcube_clock_only():
    """64 KiB total exchange: D_3's shared links put the clock above the formula; Q_5's do not."""
    cal = calibrate(pingpongs("cut-through"), resamples=0)
    d3 = predict_collective(from_spec("dualcube:r=3"), "alltoall", 65536, cal)
    q5 = predict_collective(from_spec("hypercube:n=5"), "alltoall", 65536, cal)
    assert d3["link_sharing"] == {"max": 2, "steps_shared": 19, "steps": 31}
    assert d3["clock"] > 1.05 * d3["formula"]
    assert q5["link_sharing"]["max"] == 1 and q5["clock"] == pytest.approx(q5["formula"])


def test_store_and_forward_prediction_pays_every_hop():
    """Store-and-forward calibration: the clock charges t_s + m t_w per hop (bcast: per step)."""
    cal = calibrate(pingpongs("store-and-forward"), resamples=0)
    p = predict_collective(from_spec("hypercube:n=3"), "bcast", 1024, cal)
    assert p["clock_switching"] == "store-and-forward"
    assert p["clock"] == pytest.approx(3 * (SF["ts"] + 1024 * SF["tw"]))
    assert p["params"]["clock"]["th"] == 0.0


def test_unfitted_regime_predicts_nothing():
    """No ping-pong above 32 KiB: the 64 KiB predictions are None, not extrapolated."""
    rows = [r for r in pingpongs("cut-through") if r["size"] <= 4096]
    p = predict_collective(from_spec("dualcube:r=2"), "bcast", 65536, calibrate(rows, resamples=0))
    assert p["formula"] is None and p["clock"] is None


@pytest.mark.parametrize("ranks, cores, flag", [(2, 2, False), (8, 2, True), (32, 2, True),
                                                (32, 64, False), (3, 2, True)])
def test_oversubscription(ranks, cores, flag):
    """More ranks than cores is oversubscribed; the ratio is ranks per core."""
    out = oversubscription(ranks, cores)
    assert out["oversubscribed"] is flag and out["ranks_per_core"] == ranks / cores


@pytest.mark.parametrize("ranks, load, contended", [(2, 0.0, False), (2, 0.5, True), (1, 0.5, False),
                                                    (1, 0.9, False), (8, 0.0, True)])
def test_contended_by_other_work(ranks, load, contended):
    """Ranks plus the load average before the job above the cores: the cores were shared."""
    out = oversubscription(ranks, 2, load)
    assert out["contended"] is contended and out["load"] == load


def test_oversubscription_defaults_to_this_machine(monkeypatch):
    """Without a core count the affinity mask decides (what the script records)."""
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert usable_cores() == 3
    assert oversubscription(4)["oversubscribed"] and not oversubscription(3)["oversubscribed"]
    with pytest.raises(DualmpiError):
        oversubscription(0, 2)


def test_compare_and_measured_rows():
    """The measured time is the median call of the slowest rank; errors are signed and relative."""
    run_rows = [{"collective": "bcast", "size": 8, "verified": True, "t_max": 9.0,
                 "t_calls": [4.0, 2.0, 8.0, 3.0, 5.0], "t_med": 4.0}]
    meas = measured_rows(run_rows)[("bcast", 8)]
    assert meas == {"measured": 4.0, "spread": [2.0, 8.0], "calls": 5, "verified": True}
    out = compare({"formula": 2.0, "clock": None}, meas)
    assert out["error"] == {"formula": -0.5, "clock": None} and out["measured"] == 4.0
    old = measured_rows([{"collective": "bcast", "size": 8, "verified": True, "t_max": 9.0}])
    assert old[("bcast", 8)]["measured"] == 9.0


def _document():
    """A small dualmpi-predict/1 document built as benchmarks/predict.py builds it."""
    cal = calibrate(pingpongs("cut-through"), resamples=0)
    cal.update(kind="emulated", ranks=2, cores=2, ranks_per_core=1.0, oversubscribed=False,
               loadavg=[0.5, 0.5, 0.5], pingpong=pingpongs("cut-through"))
    runs = []
    for spec, ranks in (("hypercube:n=1", 2), ("dualcube:r=2", 8)):
        topo = from_spec(spec)
        rows = [compare(predict_collective(topo, c, m, cal),
                        {"measured": 1e-4, "spread": [9e-5, 2e-4], "calls": 5, "verified": True})
                for c in ("bcast", "scatter", "allgather", "alltoall") for m in (8, 65536)]
        runs.append({"spec": spec, **oversubscription(ranks, 2), "rows": rows})
    meta = {"host": "test", "cores": 2, "loadavg": {"start": [1, 1, 1], "end": [2, 2, 2]}}
    return {"format": PREDICT_FORMAT, "meta": meta, "calibration": cal, "runs": runs}


def test_document_format_round_trips_json():
    """The document is plain JSON and checks; a wrong format or a missing field is refused."""
    doc = json.loads(json.dumps(_document()))
    assert check_document(doc) is doc
    assert [r["oversubscribed"] for r in doc["runs"]] == [False, True]
    with pytest.raises(DualmpiError, match="expected 'dualmpi-predict/1'"):
        check_document(dict(doc, format="dualmpi-run/1"))
    broken = json.loads(json.dumps(doc))
    del broken["runs"][1]["rows"][0]["clock"]
    with pytest.raises(DualmpiError, match="dualcube:r=2 row without clock"):
        check_document(broken)


def test_figure_and_table(tmp_path):
    """The figure is written (oversubscribed runs marked) and the Markdown table flags them."""
    pytest.importorskip("matplotlib")
    from dualmpi.plotting import plot_predictions

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import predict as script
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    doc = _document()
    doc["calibration"].update(load=3.0, contended=True)
    out = plot_predictions(doc, str(tmp_path / "p.png"))
    assert Path(out).stat().st_size > 10000
    text = script.table(doc)
    assert text.count("(oversubscribed)") == 8 and "| hypercube:n=1 | 2 / 2 |" in text
