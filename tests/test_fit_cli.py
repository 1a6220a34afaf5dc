"""``dualmpi fit`` and ``dualmpi report`` on synthetic results files written to tmp_path."""

import json
from pathlib import Path

import numpy as np
import pytest

from dualmpi.cli import main
from dualmpi.model.synthetic import write_synthetic

TRUTH = [(2e-4, 1e-8, 5e-5), (3e-4, 8e-9, 6e-5), (5e-4, 6e-9, 3e-4)]
HOPS = (1, 2, 3, 4, 5)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Synthetic bench results of the dual-cube F_3 and the hypercube Q_5 (32 nodes each)."""
    d = tmp_path_factory.mktemp("results")
    dual = write_synthetic(d / "dual.json", "dualcube:r=3", TRUTH, hops=HOPS, noise=0.01,
                           outliers=5, seed=1)
    hyper = write_synthetic(d / "hyper.json", "hypercube:n=5", TRUTH, hops=HOPS, noise=0.01,
                            outliers=5, seed=2)
    return {"dual": str(dual), "hyper": str(hyper), "dir": d}


def run(capsys, *argv):
    """Run ``dualmpi argv`` in-process; return (exit code, stdout, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_fit_json_recovers_ground_truth(capsys, files):
    """--json: every regime's t_s, t_w, t_h within 5 % of the generating values, inside the CI."""
    code, out, err = run(capsys, "fit", files["dual"], "--json", "--resamples", "300")
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert doc["format"] == "dualmpi-fit/1" and doc["boundaries"] == [4096, 32768]
    (group,) = doc["groups"]
    fit = group["fits"]["emulated"]
    assert fit["switching"]["better"] == "cut-through"
    for reg, truth in zip(fit["regimes"], TRUTH):
        ct = reg["models"]["cut-through"]
        for name, true in zip(("ts", "tw", "th"), truth):
            assert ct["params"][name] == pytest.approx(true, rel=0.05)
    assert doc["mdape"]["overall"] < 0.05
    assert {p["collective"] for p in group["predictions"]} == {"bcast", "scatter", "allgather",
                                                               "alltoall"}


def test_fit_text_output(capsys, files):
    """The text report names the regimes, the switching verdict and the MdAPE line."""
    code, out, _ = run(capsys, "fit", files["dual"], "--resamples", "100")
    assert code == 0
    for text in ("m <= 4096", "4096 < m <= 32768", "m > 32768", "95% CI",
                 "switching: cut-through fits better", "predicted vs measured", "MdAPE", "overall"):
        assert text in out


def test_fit_regimes_option(capsys, files):
    """--regimes none fits one regime; --regimes 1024 two."""
    doc = json.loads(run(capsys, "fit", files["dual"], "--json", "--resamples", "0",
                         "--regimes", "none")[1])
    assert [r["label"] for r in doc["groups"][0]["fits"]["emulated"]["regimes"]] == ["all m"]
    doc = json.loads(run(capsys, "fit", files["dual"], "--json", "--resamples", "0",
                         "--regimes", "1024")[1])
    assert len(doc["groups"][0]["fits"]["emulated"]["regimes"]) == 2


def test_fit_several_files_and_pool(capsys, files):
    """Two files: one group each, or one pooled group with --pool."""
    doc = json.loads(run(capsys, "fit", files["dual"], files["hyper"], "--json", "--resamples", "0")[1])
    assert len(doc["groups"]) == 2
    doc = json.loads(run(capsys, "fit", files["dual"], files["hyper"], "--json", "--resamples", "0",
                         "--pool")[1])
    assert len(doc["groups"]) == 1 and len(doc["groups"][0]["files"]) == 2


def _bad_files(d, dual):
    """Write files dualmpi must reject; return {name: path}."""
    text = Path(dual).read_text(encoding="utf-8")
    bad = {"truncated": text[: len(text) // 2],
           "not-dualmpi": json.dumps({"meta": {}, "rows": []}),
           "wrong-format": json.dumps({"format": "other/1", "pingpong": []}),
           "array": "[1, 2, 3]",
           "row-missing-key": json.dumps({"format": "dualmpi-bench/1",
                                          "pingpong": [{"size": 8, "t_avg": 1.0}]}),
           "empty": ""}
    paths = {}
    for name, content in bad.items():
        path = d / f"{name}.json"
        path.write_text(content, encoding="utf-8")
        paths[name] = str(path)
    paths["missing"] = str(d / "does-not-exist.json")
    return paths


@pytest.mark.parametrize("command", ["fit", "report"])
def test_bad_files_rejected_with_one_line(capsys, files, command):
    """Not dualmpi's, truncated, malformed or missing: one 'dualmpi: error:' line, exit 2."""
    for name, path in _bad_files(files["dir"], files["dual"]).items():
        code, out, err = run(capsys, command, path)
        assert code == 2, name
        assert out == ""
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("dualmpi: error: "), (name, err)
        assert path in lines[0]


def test_fit_without_pingpong_rows(capsys, files, tmp_path):
    """A file with collectives only: fit refuses (exit 2), report shows measured times."""
    doc = json.loads(Path(files["dual"]).read_text(encoding="utf-8"))
    doc["pingpong"] = []
    path = tmp_path / "nopp.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    code, _, err = run(capsys, "fit", str(path))
    assert code == 2 and "no ping-pong rows" in err
    code, out, _ = run(capsys, "report", str(path), "--plot", str(tmp_path / "nopp.png"))
    assert code == 0 and "measured times only" in out
    assert (tmp_path / "nopp.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_plot_and_table2(capsys, files, tmp_path):
    """Dual-cube and hypercube of 32 nodes: Table 2 side by side, and a PNG figure."""
    png = tmp_path / "report.png"
    code, out, err = run(capsys, "report", files["dual"], files["hyper"], "--plot", str(png),
                         "--resamples", "50")
    assert code == 0 and err == ""
    assert "Table 2 measured: hypercube:n=5 vs dualcube:r=3" in out
    for row in ("T_one-to-all-b", "T_one-to-all-p", "T_all-to-all-b", "T_all-to-all-p"):
        assert row in out
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20000


def test_report_plot_bad_target(capsys, files, tmp_path):
    """--plot into a missing directory: one error line, exit 2."""
    code, out, err = run(capsys, "report", files["dual"], "--plot", str(tmp_path / "no" / "x.png"),
                         "--resamples", "0")
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "no such directory" in err


def test_stat_options_are_used(capsys, files):
    """--stat t_avg fits the ping-pongs' means (5 % above t_min in the synthetic files)."""
    doc = json.loads(run(capsys, "fit", files["dual"], "--json", "--resamples", "0",
                         "--stat", "t_avg", "--coll-stat", "t_avg")[1])
    assert (doc["stat"], doc["coll_stat"]) == ("t_avg", "t_avg")
    ts = doc["groups"][0]["fits"]["emulated"]["regimes"][0]["models"]["cut-through"]["params"]["ts"]
    assert ts == pytest.approx(1.05 * TRUTH[0][0], rel=0.03)


def test_missing_kind_is_an_error(capsys, files):
    """--kind raw on a file with emulated ping-pongs only: one error line, exit 2."""
    code, _, err = run(capsys, "fit", files["dual"], "--kind", "raw", "--resamples", "0")
    assert code == 2 and "no raw ping-pong rows" in err and len(err.splitlines()) == 1


def test_virtual_clock_rows_checked(capsys, files, tmp_path):
    """Rows with the bench's ``virtual`` coefficients (floats, tw None at size 0) are compared."""
    doc = json.loads(Path(files["dual"]).read_text(encoding="utf-8"))
    for i, row in enumerate(doc["collectives"]):
        virtual = {k: float(v) for k, v in row.pop("virtual_time").items()}
        if i == 0:
            virtual["tw"] = None
        if i == 1:
            virtual["th"] += 1.0
        row["virtual"] = virtual
    path = tmp_path / "virtual.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    n = len(doc["collectives"])
    out = run(capsys, "fit", str(path), "--resamples", "0")[1]
    assert f"virtual clock: {n - 1} of {n} rows measured exactly their model coefficients" in out


@pytest.mark.parametrize("command", ["fit", "report"])
def test_fit_and_report_survive_the_crash_file(capsys, command, tmp_path):
    """bench sizes 0,64,1024,8192,65536,262144 crashed both with LinAlgError (issue 15)."""
    path = Path(__file__).parent / "data" / "bench_d2_fitcrash.json"
    extra = ["--plot", str(tmp_path / "r.png")] if command == "report" else []
    code, out, err = run(capsys, command, str(path), *extra)
    assert code == 0, err
    assert "warning: poor fit" in out
    assert command == "report" or "resamples dropped" in out


# --- figures that show their own quality (issue 15, item 3) ----------------------------------

def _panels(paths, resamples=100):
    """Return the collective and ping-pong axes drawn for ``paths`` (no file written)."""
    from matplotlib.figure import Figure

    from dualmpi.commands.fit import load_all
    from dualmpi.model.analysis import analyze
    from dualmpi.plotting import _collective_panel, _pingpong_panel

    results = load_all(paths)
    out = analyze(results, resamples=resamples)
    axes = Figure().subplots(1, 5)
    colors = {p["spec"]: "tab:blue" for g in out["groups"] for p in g["predictions"]}
    for ax, coll in zip(axes, ("bcast", "scatter", "allgather", "alltoall")):
        _collective_panel(ax, out, coll, colors)
    rows = {g["label"]: [r for res in results for r in res.pingpong] for g in out["groups"]}
    _pingpong_panel(axes[4], out, rows)
    return axes


def _texts(ax):
    return ax.get_title() + "\n" + "\n".join(t.get_text() for t in ax.texts)


def test_poor_fit_is_flagged_on_every_panel():
    axes = _panels([str(Path(__file__).parent / "data" / "bench_d2_fitcrash.json")])
    for ax in axes:
        text = _texts(ax)
        assert "POOR FIT" in text and "R²" in text, text
        assert ax.containers, "measured points carry error bars"
    for ax in axes[:4]:
        assert "MdAPE" in ax.get_title()
        bottom = ax.get_ylim()[0]
        curves = [line for line in ax.get_lines()
                  if line.get_transform() is ax.transData and line.get_linestyle() != "None"]
        assert curves
        for line in curves:   # model curves (not the regime boundaries, not the points)
            y = np.asarray(line.get_ydata(), dtype=float)
            y = y[np.isfinite(y)]
            assert (y >= bottom).all() and (y > 0).all(), "no curve dives below the panel"


def test_good_fit_is_not_flagged(files):
    for ax in _panels([files["dual"]]):
        text = _texts(ax)
        assert "R²" in text and "POOR FIT" not in text, text


def test_model_curves_break_between_regimes():
    from dualmpi.model.fit import fit_pingpong
    from dualmpi.plotting import _model_curve, clip_curve

    fit = fit_pingpong([{"size": m, "hops": d, "t_min": 1e-5 * (1 + (m > 4096)) + m * 1e-9 + d * 1e-6}
                        for m in (16, 1024, 4096, 8192, 16384, 32768) for d in (1, 2)], resamples=0)
    grid = np.geomspace(16, 32768, 50)
    curve = _model_curve(fit, (1, 1, 1), grid)
    gaps = np.flatnonzero(np.isnan(curve))
    assert gaps.size == 1 and grid[gaps[0] - 1] <= 4096 < grid[gaps[0]]
    assert np.isnan(clip_curve(np.array([0.0, -1.0, 1e-9]), 1e-6)).all()
