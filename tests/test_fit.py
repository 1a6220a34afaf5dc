"""Fitting t_s, t_w, t_h (dualmpi.model.fit) on synthetic data with known parameters."""

from pathlib import Path

import numpy as np
import pytest

from dualmpi.errors import DualmpiError
from dualmpi.model.fit import (
    aggregate_points,
    fit_model,
    fit_pingpong,
    huber_fit,
    mdape,
    parse_boundaries,
    predict_rows,
    regime_index,
    regime_params,
)
from dualmpi.model.synthetic import synthetic_results

#: True (t_s, t_w, t_h) per default regime (m <= 4 KiB, <= 32 KiB, above): a protocol switch.
TRUTH = [(2e-4, 1e-8, 5e-5), (3e-4, 8e-9, 6e-5), (5e-4, 6e-9, 3e-4)]
HOPS = (1, 2, 3, 4, 5)
NAMES = ("ts", "tw", "th")


def pingpong(seed=0, switching="cut-through", noise=0.01, outliers=5, hops=HOPS, truth=TRUTH):
    """Return synthetic ping-pong rows on the dual-cube F_3 (diameter 6)."""
    doc = synthetic_results("dualcube:r=3", truth, hops=hops, noise=noise, outliers=outliers,
                            seed=seed, switching=switching, collectives=())
    return doc["pingpong"]


@pytest.fixture(scope="module")
def fit():
    """The default fit (1000 resamples) of the default synthetic data."""
    return fit_pingpong(pingpong())


def test_parameters_recovered_within_5_percent(fit):
    """1 % noise, 5 reps per point, 5 rows x5 outliers: every parameter of every regime within 5 %."""
    for reg, truth in zip(fit["regimes"], TRUTH):
        params = reg["models"]["cut-through"]["params"]
        for name, true in zip(NAMES, truth):
            assert params[name] == pytest.approx(true, rel=0.05), (reg["label"], name)


def test_confidence_intervals(fit):
    """The 95 % CIs contain the estimate, are reproducible with the seed, and cover the truth."""
    for reg in fit["regimes"]:
        ct = reg["models"]["cut-through"]
        assert ct["resamples"] == 1000
        for name in NAMES:
            lo, hi = ct["ci"][name]
            assert lo < ct["params"][name] < hi
    again = fit_pingpong(pingpong())
    assert again["regimes"][2]["models"]["cut-through"]["ci"] == fit["regimes"][2]["models"][
        "cut-through"]["ci"]
    covered = total = 0
    for seed in range(6):
        other = fit_pingpong(pingpong(seed=100 + seed), resamples=300)
        for reg, truth in zip(other["regimes"], TRUTH):
            ci = reg["models"]["cut-through"]["ci"]
            covered += sum(ci[n][0] <= t <= ci[n][1] for n, t in zip(NAMES, truth))
            total += 3
    assert covered / total >= 0.8


def test_r2_and_residuals(fit):
    """R^2 close to 1 and rms relative residual near the 1 % noise level."""
    for reg in fit["regimes"]:
        ct = reg["models"]["cut-through"]
        assert ct["r2"] > 0.99
        assert ct["rms_rel"] < 0.03


def test_cut_through_data_prefers_cut_through(fit):
    """Data made with t_s + m t_w + d t_h: cut-through has the smaller relative RSS."""
    sw = fit["switching"]
    assert sw["better"] == "cut-through" and sw["regimes_compared"] == 3
    assert sw["rss_rel"]["cut-through"] < sw["rss_rel"]["store-and-forward"] / 10


def test_store_and_forward_data_prefers_store_and_forward():
    """Data made with d (t_s + m t_w): store-and-forward wins and recovers t_s, t_w."""
    out = fit_pingpong(pingpong(switching="store-and-forward"), resamples=0)
    assert out["switching"]["better"] == "store-and-forward"
    for reg, truth in zip(out["regimes"], TRUTH):
        sf = reg["models"]["store-and-forward"]["params"]
        assert sf["ts"] == pytest.approx(truth[0], rel=0.05)
        assert sf["tw"] == pytest.approx(truth[1], rel=0.05)
        assert set(sf) == {"ts", "tw"}


def test_median_per_point_removes_single_outliers():
    """Outlier rows (x5) among the repetitions of a point leave the point's median unchanged."""
    rows = [{"size": 8, "hops": 1, "t_min": t} for t in (1.0, 1.1, 0.9, 5.0, 1.05)]
    assert aggregate_points(rows)[2][0] == 1.05


def test_huber_resists_an_outlying_point():
    """A whole point 3x too slow moves plain least squares by > 20 % but the Huber fit by < 1 %."""
    m = np.linspace(0, 4096, 12)
    X = np.stack([np.ones_like(m), m], axis=-1)
    y = 1e-5 + m * 1e-9
    y[5] *= 3
    ts, tw = huber_fit(X, y)
    assert ts == pytest.approx(1e-5, rel=0.01) and tw == pytest.approx(1e-9, rel=0.01)
    ols = np.linalg.lstsq(X, y, rcond=None)[0]
    assert abs(ols[0] / 1e-5 - 1) > 0.2


def test_one_hop_count_leaves_t_h_undetermined():
    """All ping-pongs over the same d: t_h is None, t_s absorbs d t_h, predictions use t_h = 0."""
    out = fit_pingpong(pingpong(hops=(2,)), resamples=50)
    reg = out["regimes"][0]
    ct = reg["models"]["cut-through"]
    assert ct["params"]["th"] is None and ct["ci"]["th"] is None
    assert ct["params"]["ts"] == pytest.approx(TRUTH[0][0] + 2 * TRUTH[0][2], rel=0.05)
    assert out["switching"]["better"] is None
    assert regime_params(out, 100)[2] == 0.0


def test_regime_with_one_size_is_not_fitted():
    """A regime with one message size cannot give t_w: no fit, no prediction there."""
    rows = [{"size": s, "hops": d, "t_min": 1e-6 + s * 1e-9 + d * 1e-7}
            for s in (8, 1024, 65536) for d in (1, 2)]
    out = fit_pingpong(rows, resamples=0)
    assert [r["models"]["cut-through"] is None for r in out["regimes"]] == [False, True, True]
    row = {"collective": "bcast", "size": 65536, "model": {"ts": 1, "tw": 1, "th": 1}, "t_max": 1.0}
    assert predict_rows([row], out)[0]["predicted"] is None


def test_exact_data_is_fitted_exactly():
    """Noise-free cut-through data: parameters to 1e-9 relative, R^2 = 1."""
    m = np.repeat([0.0, 512.0, 4096.0], 3)
    d = np.tile([1.0, 2.0, 4.0], 3)
    res = fit_model("cut-through", m, d, 3e-6 + m * 2e-10 + d * 4e-7, resamples=0)
    for name, true in zip(NAMES, (3e-6, 2e-10, 4e-7)):
        assert res["params"][name] == pytest.approx(true, rel=1e-9)
    assert res["r2"] == pytest.approx(1.0)


def test_collectives_predicted_from_fit(fit):
    """Synthetic collectives (2 % noise) are predicted from their model coefficients: MdAPE < 5 %."""
    doc = synthetic_results("dualcube:r=3", TRUTH, hops=HOPS, noise=0.02, seed=3)
    out = fit_pingpong(doc["pingpong"], resamples=0)
    preds = predict_rows(doc["collectives"], out)
    errors = mdape(preds)
    assert set(errors) == {"bcast", "scatter", "allgather", "alltoall", "overall"}
    assert errors["overall"] < 0.05
    assert all(abs(p["rel_error"]) < 0.15 for p in preds)


def test_regimes_and_boundaries():
    """Sizes on a boundary belong to the lower regime; boundaries are validated."""
    assert [regime_index(s, (4096, 32768)) for s in (0, 4096, 4097, 32768, 32769)] == [0, 0, 1, 1, 2]
    assert parse_boundaries("none") == ()
    assert regime_index(10 ** 9, ()) == 0
    for bad in ("4096,1024", "x", "0,5", "-1"):
        with pytest.raises(DualmpiError, match="boundaries"):
            parse_boundaries(bad)


# --- fits that must never crash (issue 15, item 1) -------------------------------------------

def _rows(points, reps=3, seed=0, noise=0.3):
    """Return ping-pong rows at ``points`` [(size, hops, time)] with multiplicative noise."""
    rng = np.random.default_rng(seed)
    return [{"size": m, "hops": d, "kind": "emulated",
             **{k: t * (1 + noise * rng.random()) if t > 0 else 0.0 for k in ("t_min", "t_avg", "t_max")}}
            for m, d, t in points for _ in range(reps)]


ADVERSARIAL = {
    # sizes 0,64,1024,8192,65536,262144 on 1-4 hops with heavy noise: the shape of the crash file
    "bench-shape": [(m, d, 2e-3 + m * 1e-8 + d * 3e-5 * (1 + (m * d) % 7))
                    for m in (0, 64, 1024, 8192, 65536, 262144) for d in (1, 2, 3, 4)],
    "duplicated-sizes": [(m, d, 1e-5 + m * 1e-9) for m in (64, 64, 64, 4096) for d in (1, 2)],
    "one-hop-count": [(m, 3, 1e-5 + m * 1e-9) for m in (0, 1024, 4096)],
    "two-points-per-regime": [(m, 1 + i, 1e-5 + m * 1e-9) for i, m in
                              enumerate((16, 4096, 8192, 32768, 65536, 1 << 20))],
    "zero-times": [(m, d, 0.0 if m == 1024 else 1e-5 + m * 1e-9) for m in (0, 1024, 4096)
                   for d in (1, 2)],
    "all-zero-times": [(m, d, 0.0) for m in (0, 1024) for d in (1, 2)],
    "three-distinct-points": [(m, d, 5e-3 * (1 + ((m + d) % 3))) for m, d in
                              ((0, 1), (64, 2), (1024, 4))],
    "eleven-sizes": [(m, d, 2e-3 * (1.5 + np.sin(m + d)) + m * 1e-8) for m in
                     (0, 16, 256, 1024, 4096, 8192, 16384, 32768, 65536, 131072, 262144)
                     for d in (1, 4)],
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
@pytest.mark.parametrize("seed", [0, 1])
def test_adversarial_points_never_crash(name, seed):
    """A resample that cannot be fitted is dropped and counted; the fit itself never raises."""
    out = fit_pingpong(_rows(ADVERSARIAL[name], seed=seed), resamples=300, seed=seed)
    for reg in out["regimes"]:
        for model, res in reg["models"].items():
            if res is None:
                continue
            assert res["resamples"] + res["resamples_dropped"] in (0, 300)
            assert all(v is None or (np.isfinite(v) and v >= 0) for v in res["params"].values())
            for ci in res["ci"].values():
                assert ci is None or (0 <= ci[0] <= ci[1])


def test_singular_resamples_are_dropped_and_counted():
    """Resamples of three distinct points for three parameters: some drop out, none is fatal."""
    m = np.array([0.0, 64.0, 1024.0]); d = np.array([1.0, 2.0, 4.0])
    t = np.array([5e-3, 1e-2, 5e-3])
    res = fit_model("cut-through", m, d, t, resamples=200)
    # n = q: no resamples are drawn (the CI would be undefined)
    assert res["resamples"] == res["resamples_dropped"] == 0
    m4, d4, t4 = (np.append(a, b) for a, b in ((m, 8192.0), (d, 1.0), (t, 2e-2)))
    res = fit_model("cut-through", m4, d4, t4, resamples=200)
    assert res["resamples_dropped"] > 0 and res["resamples"] + res["resamples_dropped"] == 200


def test_huber_fit_singular_problems_give_nan():
    X = np.stack([np.ones(4), np.array([1.0, 1.0, 1.0, 1.0])], axis=-1)
    assert np.isnan(huber_fit(X, np.ones(4))).all()
    good = np.stack([np.ones(4), np.arange(4.0)], axis=-1)
    both = huber_fit(np.stack([X, good]), np.stack([np.ones(4), 1 + np.arange(4.0)]))
    assert np.isnan(both[0]).all() and np.allclose(both[1], [1, 1])


def test_nonnegative_constraint_and_bound_report():
    """Times falling with size: unconstrained t_w < 0; the fit pins it at 0 and says so."""
    m = np.repeat([0.0, 1024.0, 4096.0], 2); d = np.tile([1.0, 2.0], 3)
    t = 1e-4 - m * 1e-9 + d * 1e-6
    res = fit_model("cut-through", m, d, t, resamples=0)
    assert res["unconstrained"]["tw"] < 0
    assert res["params"]["tw"] == 0 and res["at_bound"] == ["tw"]
    free = fit_model("cut-through", m, d, t, resamples=0, nonneg=False)
    assert free["params"]["tw"] == pytest.approx(-1e-9, rel=1e-6)


def test_fit_crash_fixture(tmp_path):
    """The bench file that crashed with LinAlgError (sizes 0..262144): fit and report succeed."""
    from dualmpi.model.analysis import analyze
    from dualmpi.model.results import load_results

    path = Path(__file__).parent / "data" / "bench_d2_fitcrash.json"
    out = analyze([load_results(path)], resamples=1000)
    fits = [reg["models"][m] for g in out["groups"] for f in g["fits"].values()
            for reg in f["regimes"] for m in reg["models"]]
    assert sum(f["resamples_dropped"] for f in fits if f) > 0
