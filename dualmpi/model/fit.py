"""Fit t_s, t_w, t_h to ping-pong measurements and predict the collectives (numpy only).

Method (docs/model.md, "Fitting"):

1. Ping-pong rows give the one-way time of a message of ``size`` bytes over a chain of
   ``hops`` links.  Rows with the same (size, hops) — several node pairs, repetitions,
   files — are reduced to their **median** time: one *point* per (size, hops).
2. Points are split into protocol **regimes** by size (default boundaries 4096 and 32768
   bytes: ``m <= 4096``, ``4096 < m <= 32768``, ``m > 32768``) and each regime is fitted
   separately.
3. Cut-through model ``T = t_s + m t_w + d t_h`` by **Huber IRLS on relative residuals**
   ``(T_measured - T_model) / T_measured`` (timing noise is proportional to the time, and
   sizes span decades): iteratively reweighted least squares, weight 1 for residuals within
   ``1.345 s`` and ``1.345 s / |r|`` beyond, ``s = 1.4826 * MAD`` of the residuals.
4. 95 % **percentile-bootstrap** confidence intervals: the points of the regime are
   resampled with replacement (default 1000 resamples, fixed seed), each resample is
   refitted the same way; resamples whose design is singular are dropped.
5. **Switching mode**: the store-and-forward model ``T = d (t_s + m t_w)`` is fitted to the
   same points the same way; the model with the smaller sum of squared relative residuals
   (summed over regimes) fits better.  R^2 (ordinary, on the point times) is reported too.

A parameter that the data cannot determine is reported as ``None``: ``t_h`` when every
ping-pong crosses the same number of hops (then ``t_s`` absorbs ``d t_h``), and a regime
with fewer than two sizes is not fitted at all.
"""

import math
from collections import defaultdict

import numpy as np

from ..errors import DualmpiError
from .formulas import Coeffs, predict
from .results import row_time

__all__ = [
    "DEFAULT_BOUNDARIES",
    "HUBER_K",
    "MODELS",
    "parse_boundaries",
    "regime_index",
    "regime_label",
    "aggregate_points",
    "huber_fit",
    "fit_model",
    "fit_regimes",
    "fit_pingpong",
    "regime_params",
    "predict_rows",
    "mdape",
    "POOR_R2",
    "quality_warnings",
]

#: Below this R^2 a fit is flagged as poor (on figures and in the text output).
POOR_R2 = 0.9

#: Open MPI's shared-memory protocol switches at 4 KiB (eager limit) and 32 KiB.
DEFAULT_BOUNDARIES = (4096, 32768)

#: Huber's tuning constant (95 % efficiency under Gaussian noise).
HUBER_K = 1.345

#: Switching models: their parameters and design columns built from (size m, hops d).
MODELS = {
    "cut-through": ("ts", "tw", "th"),          # T = t_s + m t_w + d t_h
    "store-and-forward": ("ts", "tw"),          # T = d (t_s + m t_w)
}

_IRLS_ITERATIONS = 30


def parse_boundaries(text):
    """Return regime boundaries (increasing byte sizes) from ``"4096,32768"``; ``""`` gives ().

    >>> parse_boundaries("4096,32768")
    (4096, 32768)
    """
    text = str(text).strip()
    if text.lower() in ("", "none"):
        return ()
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise DualmpiError(f"bad regime boundaries {text!r}: comma-separated byte sizes, "
                           "e.g. 4096,32768") from None
    if any(v <= 0 for v in values) or any(a >= b for a, b in zip(values, values[1:])):
        raise DualmpiError(f"bad regime boundaries {text!r}: positive and increasing")
    return values


def regime_index(size, boundaries=DEFAULT_BOUNDARIES):
    """Return the regime of ``size``: 0 for ``size <= boundaries[0]``, and so on.

    >>> [regime_index(s) for s in (4096, 4097, 32768, 32769)]
    [0, 1, 1, 2]
    """
    return int(np.searchsorted(np.asarray(boundaries, dtype=float), size, side="left"))


def regime_label(index, boundaries=DEFAULT_BOUNDARIES):
    """Return a regime's size range as text.

    >>> [regime_label(i) for i in range(3)]
    ['m <= 4096', '4096 < m <= 32768', 'm > 32768']
    """
    if not boundaries:
        return "all m"
    if index == 0:
        return f"m <= {boundaries[0]}"
    if index == len(boundaries):
        return f"m > {boundaries[-1]}"
    return f"{boundaries[index - 1]} < m <= {boundaries[index]}"


def aggregate_points(rows, stat="t_min"):
    """Return arrays ``(size, hops, time, count)``: the median time per (size, hops) point.

    Rows with a non-positive time are left out (they cannot be timings).

    >>> rows = [{"size": 8, "hops": 1, "t_min": t} for t in (1.0, 2.0, 9.0)]
    >>> aggregate_points(rows)
    (array([8.]), array([1.]), array([2.]), array([3]))
    """
    groups = defaultdict(list)
    for row in rows:
        t = row_time(row, stat)
        if t > 0:
            groups[(float(row["size"]), float(row["hops"]))].append(t)
    keys = sorted(groups)
    size = np.array([k[0] for k in keys], dtype=float)
    hops = np.array([k[1] for k in keys], dtype=float)
    time = np.array([float(np.median(groups[k])) for k in keys], dtype=float)
    count = np.array([len(groups[k]) for k in keys], dtype=int)
    return size, hops, time, count


def _design(model, size, hops, columns):
    """Return the design matrix of ``model`` restricted to parameter names ``columns``."""
    if model == "cut-through":
        full = {"ts": np.ones_like(size), "tw": size, "th": hops}
    else:
        full = {"ts": hops, "tw": hops * size}
    return np.stack([full[c] for c in columns], axis=-1)


def _subsets(q):
    """Return every non-empty subset of ``range(q)`` as a boolean mask, shape (2**q - 1, q)."""
    return np.array([[bool(mask >> j & 1) for j in range(q)] for mask in range(1, 1 << q)])


def _safe_solve(M, v):
    """Return ``solve(M, v)`` per problem (shapes (..., q, q) and (..., q)); NaN where singular.

    >>> _safe_solve(np.array([[[2., 0.], [0., 1.]], [[1., 1.], [1., 1.]]]), np.ones((2, 2)))
    array([[0.5, 1. ],
           [nan, nan]])
    """
    try:
        return np.linalg.solve(M, v[..., None])[..., 0]
    except np.linalg.LinAlgError:
        pass
    flat_m = M.reshape(-1, *M.shape[-2:])
    flat_v = v.reshape(-1, v.shape[-1])
    out = np.full(flat_v.shape, np.nan)
    for i in range(flat_m.shape[0]):
        try:
            out[i] = np.linalg.solve(flat_m[i], flat_v[i])
        except np.linalg.LinAlgError:
            continue
    return out.reshape(v.shape)


def _weighted_solve(A, b, nonneg):
    """Return least-squares coefficients of ``A x ~ b`` per problem; NaN where unsolvable.

    ``A`` has shape (..., n, q), ``b`` (..., n).  A problem whose ``A`` has numerical rank
    below q has no unique solution and gives NaN (the caller drops it).  With ``nonneg``
    the coefficients are constrained to x >= 0: with q <= 3 every subset of free
    coefficients is solved and the feasible one with the least residual is the solution
    (the non-negative least-squares optimum is the unconstrained optimum on its support).
    """
    q = A.shape[-1]
    ata = np.swapaxes(A, -1, -2) @ A
    atb = (np.swapaxes(A, -1, -2) @ b[..., None])[..., 0]
    bad = np.linalg.matrix_rank(A) < q
    ata = np.where(bad[..., None, None], np.eye(q), ata)
    atb = np.where(bad[..., None], 0.0, atb)
    if not nonneg:
        x = _safe_solve(ata, atb)
    else:
        btb = np.sum(b * b, axis=-1)
        best = np.zeros(atb.shape)                      # the empty support: x = 0
        best_rss = btb.copy()
        for mask in _subsets(q):
            eye = np.diag((~mask).astype(float))       # pins the coefficients outside the support
            m_ata = ata * np.outer(mask, mask) + eye
            m_atb = atb * mask
            x = _safe_solve(m_ata, m_atb)
            bad |= np.isnan(x).any(axis=-1)
            rss = btb - 2 * np.sum(x * atb, axis=-1) + np.einsum("...i,...ij,...j->...", x, ata, x)
            ok = np.all(x >= 0, axis=-1) & (rss < best_rss)
            best = np.where(ok[..., None], x, best)
            best_rss = np.where(ok, rss, best_rss)
        x = best
    x = np.where(bad[..., None] | ~np.isfinite(x), np.nan, x)
    return x


def huber_fit(X, y, k=HUBER_K, iterations=_IRLS_ITERATIONS, nonneg=False):
    """Return Huber-IRLS coefficients minimising relative residuals ``(y - X b) / y``.

    Parameters
    ----------
    X : ndarray, shape (..., n, q)
        Design matrices (leading axes are independent problems, e.g. bootstrap resamples).
    y : ndarray, shape (..., n)
        Positive measured times.
    k : float
        Huber's constant, in units of the robust scale ``1.4826 * MAD``.
    iterations : int
        IRLS iterations (each one weighted least-squares solve).
    nonneg : bool
        Constrain every coefficient to be >= 0 (times cannot be negative).

    Returns
    -------
    ndarray, shape (..., q)
        Coefficients; a problem that cannot be fitted — its weighted design is singular
        at some iteration, e.g. a bootstrap resample whose distinct points the Huber
        weights reduce below q — gives a row of NaN instead of an error.

    References
    ----------
    P. J. Huber, "Robust Estimation of a Location Parameter", 1964; IRLS as in
    Holland and Welsch, 1977; non-negative least squares as in Lawson and Hanson,
    "Solving Least Squares Problems", 1974, Ch. 23 (the solution is the unconstrained
    one on its support).

    Examples
    --------
    >>> m = np.array([0., 1., 2., 3., 4.])
    >>> X = np.stack([np.ones(5), m], axis=-1)
    >>> y = 2 + 3 * m
    >>> y[2] = 100.0                                   # one outlier
    >>> np.round(huber_fit(X, y), 6)
    array([2., 3.])
    >>> huber_fit(np.ones((2, 2)), np.ones(2))        # singular: no error, NaN
    array([nan, nan])
    >>> np.round(huber_fit(X, 5 - 0.1 * m, nonneg=True), 6)   # decreasing times: slope pinned at 0
    array([4.791664, 0.      ])
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    scale = np.max(np.abs(X), axis=-2, keepdims=True)
    scale = np.where(scale > 0, scale, 1.0)
    Xr = X / scale / y[..., None]                     # relative: residual = 1 - Xr b
    w = np.ones(y.shape)
    beta = None
    failed = np.zeros(y.shape[:-1], dtype=bool)
    for _ in range(iterations):
        sw = np.sqrt(w)
        new = _weighted_solve(Xr * sw[..., None], sw, nonneg)
        failed |= np.isnan(new).any(axis=-1)
        new = np.where(failed[..., None], 0.0, new)
        if beta is not None and np.allclose(new, beta, rtol=1e-12, atol=0):
            beta = new
            break
        beta = new
        r = 1.0 - (Xr @ beta[..., None])[..., 0]
        mad = np.median(np.abs(r - np.median(r, axis=-1, keepdims=True)), axis=-1, keepdims=True)
        s = np.maximum(1.4826 * mad, 1e-12)
        w = np.minimum(1.0, k * s / np.maximum(np.abs(r), 1e-300))
        w = np.where(failed[..., None], 1.0, w)
    out = beta / scale[..., 0, :]
    return np.where(failed[..., None], np.nan, out)


def _identifiable(model, size, hops):
    """Return the parameter names the points determine, or None when the model cannot be fitted."""
    params = list(MODELS[model])
    if np.unique(size).size < 2:
        return None
    if model == "cut-through" and np.unique(hops).size < 2:
        params.remove("th")
    return params if size.size >= len(params) else None


def _goodness(y, fitted):
    """Return (rss of relative residuals, ordinary R^2 or None, rms relative residual)."""
    rel = (y - fitted) / y
    rss_rel = float(np.sum(rel ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum((y - fitted) ** 2)) / ss_tot if ss_tot > 0 else None
    return rss_rel, r2, math.sqrt(rss_rel / y.size)


def _bootstrap(model, columns, size, hops, time, resamples, seed, nonneg=True):
    """Return the bootstrap coefficient samples of the resamples that could be fitted, shape (B, q).

    A resample is dropped when its design is rank-deficient (too few distinct points)
    or when the Huber reweighting makes it singular; the caller counts the drops.
    """
    rng = np.random.default_rng(seed)
    n = size.size
    idx = rng.integers(0, n, size=(resamples, n))
    X = _design(model, size[idx], hops[idx], columns)
    y = time[idx]
    scale = np.max(np.abs(X), axis=-2, keepdims=True)
    scale = np.where(scale > 0, scale, 1.0)
    valid = np.linalg.matrix_rank(X / scale) == len(columns)
    if not valid.any():
        return np.empty((0, len(columns)))
    samples = huber_fit(X[valid], y[valid], nonneg=nonneg)
    return samples[np.isfinite(samples).all(axis=-1)]


def _percentile_ci(samples, beta, n):
    """Return the 95 % percentile interval, widened by sqrt(n / (n - q)) about the estimate.

    The bootstrap of n points under-states the spread of a q-parameter fit by about
    sqrt((n - q) / n) (the degrees-of-freedom correction of the residual variance).
    """
    q = samples.shape[1]
    lo, hi = np.percentile(samples, [2.5, 97.5], axis=0)
    widen = math.sqrt(n / (n - q))
    return beta + widen * (lo - beta), beta + widen * (hi - beta)


def fit_model(model, size, hops, time, resamples=1000, seed=0, nonneg=True):
    """Fit one switching model to points; return a dict of parameters, CIs and goodness of fit.

    Parameters
    ----------
    model : {"cut-through", "store-and-forward"}
        ``t_s + m t_w + d t_h`` or ``d (t_s + m t_w)``.
    size, hops, time : ndarray
        Points (median one-way time in seconds per size in bytes and hop count).
    resamples : int
        Bootstrap resamples for the 95 % CIs (0: no CIs).
    seed : int
        Seed of the bootstrap's generator (results are reproducible).
    nonneg : bool
        Constrain t_s, t_w, t_h to be >= 0 (default): a time cannot be negative, and a
        negative fitted slope draws curves that fall with the message size.

    Returns
    -------
    dict or None
        ``params`` (ts, tw, th; None where not identifiable), ``ci`` (name -> [lo, hi]),
        ``unconstrained`` (the same fit without the constraint), ``at_bound`` (parameters
        the constraint pinned at 0 because the unconstrained fit made them negative),
        ``points``, ``rss_rel``, ``r2``, ``rms_rel``, ``resamples`` (resamples fitted and
        used), ``resamples_dropped`` (resamples that could not be fitted: too few distinct
        points, or singular after the Huber reweighting); None when the points cannot
        determine the model (fewer than two sizes, or a singular fit).

    References
    ----------
    B. Efron, R. Tibshirani, "An Introduction to the Bootstrap", 1993, Ch. 13 (percentile
    intervals).

    Examples
    --------
    >>> m = np.repeat([0., 1e3, 1e4], 2); d = np.tile([1., 3.], 3)
    >>> t = 1e-6 + m * 1e-9 + d * 1e-7
    >>> fit = fit_model("cut-through", m, d, t, resamples=0)
    >>> [round(fit["params"][k] / v, 6) for k, v in (("ts", 1e-6), ("tw", 1e-9), ("th", 1e-7))]
    [1.0, 1.0, 1.0]
    """
    size, hops, time = (np.asarray(a, dtype=float) for a in (size, hops, time))
    columns = _identifiable(model, size, hops)
    if columns is None:
        return None
    X = _design(model, size, hops, columns)
    beta = huber_fit(X, time, nonneg=nonneg)
    if not np.isfinite(beta).all():
        return None
    raw = huber_fit(X, time) if nonneg else beta
    fitted = X @ beta
    rss_rel, r2, rms_rel = _goodness(time, fitted)
    params = {name: None for name in MODELS[model]}
    params.update({c: float(b) for c, b in zip(columns, beta)})
    unconstrained = {name: None for name in MODELS[model]}
    unconstrained.update({c: (float(b) if math.isfinite(b) else None) for c, b in zip(columns, raw)})
    at_bound = [c for c in columns if params[c] == 0 and (unconstrained[c] or 0) < 0]
    ci = {name: None for name in MODELS[model]}
    used = dropped = 0
    if resamples > 0 and size.size > len(columns):
        samples = _bootstrap(model, columns, size, hops, time, resamples, seed, nonneg)
        used = int(samples.shape[0])
        dropped = resamples - used
        if used:
            lo, hi = _percentile_ci(samples, beta, size.size)
            if nonneg:
                lo, hi = np.maximum(lo, 0.0), np.maximum(hi, 0.0)
            ci.update({c: [float(a), float(b)] for c, a, b in zip(columns, lo, hi)})
    return {"params": params, "ci": ci, "unconstrained": unconstrained, "at_bound": at_bound,
            "points": int(size.size), "rss_rel": rss_rel, "r2": r2, "rms_rel": rms_rel,
            "resamples": used, "resamples_dropped": dropped}


def fit_regimes(rows, boundaries=DEFAULT_BOUNDARIES, stat="t_min", resamples=1000, seed=0):
    """Fit both switching models per regime to ping-pong ``rows``; return one dict per regime.

    Each dict has ``index``, ``label``, ``rows``, ``points``, ``sizes``, ``hops`` and
    ``models`` (model name -> :func:`fit_model` result or None).

    >>> fit_regimes([], resamples=0)[0]["label"]
    'm <= 4096'
    """
    by_regime = defaultdict(list)
    for row in rows:
        by_regime[regime_index(row["size"], boundaries)].append(row)
    out = []
    for index in range(len(boundaries) + 1):
        size, hops, time, _ = aggregate_points(by_regime[index], stat)
        models = {model: fit_model(model, size, hops, time, resamples, seed) for model in MODELS}
        out.append({"index": index, "label": regime_label(index, boundaries),
                    "rows": len(by_regime[index]), "points": int(size.size),
                    "sizes": sorted({int(s) for s in size}), "hops": sorted({int(h) for h in hops}),
                    "models": models})
    return out


def _switching_verdict(regimes):
    """Return which switching model fits better over the regimes both could fit."""
    totals = {model: 0.0 for model in MODELS}
    compared = 0
    for reg in regimes:
        fits = reg["models"]
        if all(fits[m] is not None for m in MODELS) and len(reg["hops"]) > 1:
            compared += 1
            for model in MODELS:
                totals[model] += fits[model]["rss_rel"]
    if not compared:
        return {"better": None, "rss_rel": None, "regimes_compared": 0,
                "reason": "needs ping-pongs over at least two hop counts in a regime"}
    better = min(totals, key=totals.get)
    return {"better": better, "rss_rel": totals, "regimes_compared": compared, "reason": None}


def fit_pingpong(rows, boundaries=DEFAULT_BOUNDARIES, stat="t_min", resamples=1000, seed=0):
    """Fit the cost model to ping-pong ``rows`` (one kind); see the module docstring.

    Parameters
    ----------
    rows : list of dict
        Ping-pong rows with ``size`` (bytes), ``hops`` and the time statistic ``stat``.
    boundaries : tuple of int
        Regime boundaries in bytes.
    stat : {"t_min", "t_avg", "t_max"}
        Which time of each row to fit; default the minimum over the row's repetitions, the
        uncontended one-way time (scheduling hiccups of oversubscribed ranks only add).
    resamples, seed : int
        Bootstrap settings.

    Returns
    -------
    dict
        ``regimes`` (list, see :func:`fit_regimes`) and ``switching`` (``better``, the
        summed relative RSS per model, ``regimes_compared``).

    References
    ----------
    Dual-cube paper, Section 3 (cut-through cost t_s + m t_w + d t_h).

    Examples
    --------
    >>> rows = [{"size": m, "hops": d, "t_min": 2e-6 + m * 1e-9 + d * 5e-7}
    ...         for m in (0, 1024, 4096) for d in (1, 2, 3)]
    >>> fit = fit_pingpong(rows, resamples=0)
    >>> fit["switching"]["better"], round(fit["regimes"][0]["models"]["cut-through"]["params"]["th"], 12)
    ('cut-through', 5e-07)
    """
    regimes = fit_regimes(rows, boundaries, stat, resamples, seed)
    return {"boundaries": list(boundaries), "stat": stat, "regimes": regimes,
            "switching": _switching_verdict(regimes)}


def regime_params(fit, size):
    """Return the cut-through ``(t_s, t_w, t_h)`` of the regime of ``size``, or None if unfitted.

    An unidentifiable ``t_h`` (one hop count) is returned as 0: ``t_s`` then includes it.
    """
    reg = fit["regimes"][regime_index(size, tuple(fit["boundaries"]))]
    ct = reg["models"]["cut-through"]
    if ct is None:
        return None
    p = ct["params"]
    return (p["ts"], p["tw"], p["th"] or 0.0)


def predict_rows(rows, fit, stat="t_max"):
    """Return predicted vs measured time for collective ``rows`` with the fitted parameters.

    Each output dict has ``collective``, ``algorithm``, ``size``, ``model`` (the row's
    coefficients), ``measured``, ``spread`` (the row's smallest and largest time statistic:
    over ranks for collective rows), ``predicted`` (None when ``fit`` is None or the size's
    regime is unfitted) and ``rel_error`` = (predicted - measured) / measured.  The default
    ``stat`` is the maximum over ranks: the collective is complete when its last node is.

    >>> fit = fit_pingpong([{"size": m, "hops": d, "t_min": 1e-6 + m * 1e-9 + d * 1e-7}
    ...                     for m in (0, 4096) for d in (1, 2)], resamples=0)
    >>> row = {"collective": "bcast", "size": 1000, "model": {"ts": 2, "tw": 2, "th": 2},
    ...        "t_max": 4.2e-6}
    >>> round(predict_rows([row], fit)[0]["rel_error"], 9)
    0.0
    """
    out = []
    for row in rows:
        measured = row_time(row, stat)
        params = regime_params(fit, row["size"]) if fit is not None else None
        predicted = None if params is None else float(predict(row["model"], *params, row["size"]))
        rel = (predicted - measured) / measured if predicted is not None and measured > 0 else None
        times = [row_time(row, k) for k in ("t_min", "t_avg", "t_max") if k in row] or [measured]
        out.append({"collective": row["collective"], "algorithm": row.get("algorithm"),
                    "size": row["size"], "model": Coeffs.of(row["model"]).as_dict(),
                    "measured": measured, "spread": [min(times), max(times)],
                    "predicted": predicted, "rel_error": rel})
    return out


def mdape(predictions):
    """Return the median absolute relative error per collective and ``"overall"`` (None if none).

    >>> mdape([{"collective": "bcast", "rel_error": 0.1}, {"collective": "bcast", "rel_error": -0.3},
    ...        {"collective": "scatter", "rel_error": None}])
    {'bcast': 0.2, 'scatter': None, 'overall': 0.2}
    """
    errors = defaultdict(list)
    for p in predictions:
        errors.setdefault(p["collective"], [])
        if p["rel_error"] is not None:
            errors[p["collective"]].append(abs(p["rel_error"]))
    out = {c: (float(np.median(v)) if v else None) for c, v in errors.items()}
    every = [e for v in errors.values() for e in v]
    out["overall"] = float(np.median(every)) if every else None
    return out


_NAMES = {"ts": "t_s", "tw": "t_w", "th": "t_h"}


def quality_warnings(fit):
    """Return why a :func:`fit_model` result should not be trusted (empty list: no reason).

    A fit is flagged when R^2 < :data:`POOR_R2`, when a parameter is negative or was
    pinned at 0 by the non-negativity constraint (the unconstrained fit made it
    negative), or when a parameter's 95 % CI reaches zero (the data do not show it
    differs from 0).

    >>> quality_warnings({"r2": 0.5, "params": {"ts": 1.0, "tw": 0.0, "th": None},
    ...                   "ci": {"ts": [0.5, 2.0], "tw": [0.0, 1.0], "th": None},
    ...                   "at_bound": ["tw"]})
    ['R^2 0.50 < 0.9', 't_w < 0 unconstrained (pinned at 0)', 't_w CI reaches 0']
    """
    if fit is None:
        return ["not fitted"]
    out = []
    if fit.get("r2") is None or fit["r2"] < POOR_R2:
        out.append("R^2 n/a" if fit.get("r2") is None else f"R^2 {fit['r2']:.2f} < {POOR_R2}")
    for name, value in fit["params"].items():
        if value is not None and value < 0:
            out.append(f"{_NAMES[name]} < 0")
    out.extend(f"{_NAMES[name]} < 0 unconstrained (pinned at 0)" for name in fit.get("at_bound", ()))
    for name, ci in fit["ci"].items():
        if ci is not None and ci[0] <= 0 <= ci[1]:
            out.append(f"{_NAMES[name]} CI reaches 0")
    return out
