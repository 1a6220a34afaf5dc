"""Fit and predict across results files: the data behind ``dualmpi fit`` and ``dualmpi report``."""

import os

from ..errors import DualmpiError
from ..topology import DualCube, Hypercube, from_spec
from .fit import DEFAULT_BOUNDARIES, fit_pingpong, mdape, predict_rows, regime_params
from .formulas import paper_formula, predict
from .results import STATS

__all__ = ["FIT_FORMAT", "KINDS", "analyze", "table2_pairs"]

#: The ``"format"`` of ``dualmpi fit --json`` output.
FIT_FORMAT = "dualmpi-fit/1"

#: Ping-pong kinds: through the emulation's links, or plain MPI between two ranks.
KINDS = ("emulated", "raw")


def _groups(results, pool):
    """Return lists of results fitted together: one per file, or all of them when ``pool``."""
    return [list(results)] if pool else [[r] for r in results]


def _label(group):
    """Return a short name for a group of files."""
    names = [os.path.basename(r.path) for r in group]
    return names[0] if len(names) == 1 else f"pooled ({len(names)} files)"


def _spec_of(res):
    """Return the results' topology spec (``meta.spec``) or None."""
    spec = res.meta.get("spec")
    return spec if isinstance(spec, str) else None


def _paper_prediction(spec, row, params):
    """Return Table 2's (as-printed) prediction for ``row``, or None without a formula."""
    if spec is None or params is None:
        return None
    try:
        coeffs = paper_formula(from_spec(spec), row["collective"], "as-printed")
    except DualmpiError:  # an unknown spec, or no formula in the papers
        return None
    return float(predict(coeffs, *params, row["size"]))


def _virtual_matches(row):
    """Return whether a row's virtual-clock coefficients equal its model (None if absent).

    The clock's coefficients are read from ``virtual_time`` (the format brief) or ``virtual``
    (what ``dualmpi bench`` writes); a coefficient it could not determine (None, e.g. tw at
    size 0) is not compared.
    """
    vt = row.get("virtual_time", row.get("virtual"))
    if not isinstance(vt, dict):
        return None
    pairs = [(vt.get(k), row["model"][k]) for k in ("ts", "tw", "th")]
    pairs = [(a, b) for a, b in pairs if isinstance(a, (int, float)) and not isinstance(a, bool)]
    if not pairs:
        return None
    return all(abs(a - b) <= 1e-6 * max(1.0, abs(b)) for a, b in pairs)


def analyze(results, boundaries=DEFAULT_BOUNDARIES, stat="t_min", coll_stat="t_max", kind=None,
            pool=False, resamples=1000, seed=0):
    """Fit the ping-pongs of each group of files and predict every collective row.

    Parameters
    ----------
    results : list of Results
        Loaded results files (:func:`~dualmpi.model.results.load_results`).
    boundaries : tuple of int
        Regime boundaries in bytes.
    stat : {"t_min", "t_avg", "t_max"}
        Time statistic of the ping-pong rows (default the minimum over repetitions).
    coll_stat : {"t_min", "t_avg", "t_max"}
        Time statistic of the collective rows (default the maximum over ranks: completion).
    kind : {"emulated", "raw"} or None
        Ping-pong kind whose fit predicts the collectives; None: emulated when present.
    pool : bool
        Fit all files' ping-pongs together (same machine and settings) instead of per file.
    resamples, seed : int
        Bootstrap settings.

    Returns
    -------
    dict
        ``format`` (``dualmpi-fit/1``), settings, ``groups`` (per group: ``files``,
        ``fits`` per ping-pong kind, ``kind`` used, ``predictions`` with ``file``,
        ``spec``, ``paper`` = Table 2's prediction) and ``mdape`` over every prediction.

    References
    ----------
    docs/model.md, "Fitting" and "Reading the report".
    """
    for value in (stat, coll_stat):
        if value not in STATS:
            raise DualmpiError(f"unknown time statistic {value!r} (choose from {', '.join(STATS)})")
    if kind is not None and kind not in KINDS:
        raise DualmpiError(f"unknown ping-pong kind {kind!r} (choose from {', '.join(KINDS)})")
    groups, every = [], []
    for group in _groups(results, pool):
        pingpong = [row for res in group for row in res.pingpong]
        kinds = sorted({row["kind"] for row in pingpong})
        fits = {k: fit_pingpong([row for row in pingpong if row["kind"] == k], boundaries, stat,
                                resamples, seed) for k in kinds}
        if kind is not None and kinds and kind not in fits:
            raise DualmpiError(f"{_label(group)}: no {kind} ping-pong rows (present: "
                               f"{', '.join(kinds)})")
        use = kind or ("emulated" if "emulated" in fits else (kinds[0] if kinds else None))
        fit = fits.get(use)
        predictions = []
        for res in group:
            rows = [row for row in res.collectives if row.get("verified", True) is not False]
            spec = _spec_of(res)
            preds = predict_rows(rows, fit, coll_stat)
            for pred, row in zip(preds, rows):
                params = regime_params(fit, row["size"]) if fit is not None else None
                pred.update(file=res.path, spec=spec, paper=_paper_prediction(spec, row, params),
                            virtual_matches_model=_virtual_matches(row))
            predictions.extend(preds)
        every.extend(predictions)
        meta = group[0].meta
        groups.append({"label": _label(group), "files": [r.path for r in group],
                       "specs": [_spec_of(r) for r in group], "shape": meta.get("shape"),
                       "switching": meta.get("switching"), "fits": fits, "kind": use,
                       "unverified_rows": sum(1 for r in group for row in r.collectives
                                              if row.get("verified", True) is False),
                       "predictions": predictions, "mdape": mdape(predictions)})
    return {"format": FIT_FORMAT, "stat": stat, "coll_stat": coll_stat,
            "boundaries": list(boundaries),
            "resamples": resamples, "seed": seed, "pool": pool, "groups": groups,
            "mdape": mdape(every)}


def table2_pairs(analysis):
    """Return ``[(hypercube spec, dual-cube spec)]`` with equal node counts in ``analysis``.

    These are the pairs Table 2 compares; ``dualmpi report`` puts them side by side.
    """
    specs = {p["spec"] for g in analysis["groups"] for p in g["predictions"] if p["spec"]}
    topos = {}
    for spec in specs:
        try:
            topos[spec] = from_spec(spec)
        except DualmpiError:
            continue
    hyper = {t.num_nodes: s for s, t in topos.items() if isinstance(t, Hypercube)}
    dual = {t.num_nodes: s for s, t in topos.items() if isinstance(t, DualCube)}
    return [(hyper[p], dual[p]) for p in sorted(set(hyper) & set(dual))]
