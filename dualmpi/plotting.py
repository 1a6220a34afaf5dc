"""Figures of ``dualmpi report``: measured collectives against the cost model (matplotlib, Agg).

Every panel shows its own quality: points carry error bars (the spread over ranks for
collectives, over repetitions and node pairs for ping-pongs), each panel states R^2 and
the relative error of the model it draws, and a red warning appears on the panel when
the fit is poor (R^2 < 0.9, a parameter pinned at 0 or negative, a confidence interval
reaching 0; :func:`dualmpi.model.fit.quality_warnings`).  Model curves use the fitted
parameters, which are constrained to be >= 0; they are drawn per regime (no line joins
two regimes) and never below a hundredth of the panel's smallest measured time.

Only the object-oriented matplotlib API is used (``Figure`` with the Agg canvas), so
importing this module changes no global backend and needs no display.
"""

import numpy as np

from .model.analysis import table2_pairs
from .model.fit import POOR_R2, quality_warnings, regime_index, regime_params
from .errors import DualmpiError
from .model.formulas import PATTERN_NAMES, PATTERNS, Coeffs, paper_formula, predict
from .topology import from_spec

__all__ = ["plot_report", "plot_predictions", "series", "group_fit", "series_quality",
           "panel_warnings", "clip_curve"]

#: Model curves are not drawn below this fraction of the panel's smallest measured time.
CURVE_FLOOR = 1e-2

#: A collective panel warns when the model misses the measured times by more than this (MdAPE).
POOR_MDAPE = 0.25

_MARKERS = "osD^v<>p*h"


def group_fit(group):
    """Return the ping-pong fit a group's predictions use (None without one)."""
    return group["fits"].get(group["kind"]) if group.get("kind") else None


def series(analysis, collective):
    """Return ``[(spec, group, rows)]``: one measured series per topology for ``collective``."""
    out = []
    for group in analysis["groups"]:
        by_spec = {}
        for p in group["predictions"]:
            if p["collective"] == collective:
                by_spec.setdefault(p["spec"] or "unknown", []).append(p)
        for spec in sorted(by_spec):
            out.append((spec, group, sorted(by_spec[spec], key=lambda p: p["size"])))
    return out


def _model_curve(fit, coeffs, sizes):
    """Return model times over ``sizes`` with each size's regime parameters (NaN if unfitted).

    A NaN is put between two sizes of different regimes, so that a plotted curve is one
    segment per regime and no line joins two regimes' fits.
    """
    times = []
    for m in sizes:
        params = regime_params(fit, m) if fit is not None else None
        times.append(np.nan if params is None else float(predict(coeffs, *params, m)))
    times = np.array(times)
    if fit is None or len(sizes) < 2:
        return times
    regime = np.array([regime_index(m, tuple(fit["boundaries"])) for m in sizes])
    times[1:][regime[1:] != regime[:-1]] = np.nan
    return times


def clip_curve(times, floor):
    """Return ``times`` with values at or below ``floor`` (and non-positive ones) as NaN.

    On a log axis a curve that tends to 0 (a fitted t_s of 0 at small m) dives out of the
    panel; it is cut at the floor instead.

    >>> clip_curve(np.array([1e-6, 1e-3, -1.0]), 1e-5)
    array([  nan, 0.001,   nan])
    """
    times = np.asarray(times, dtype=float).copy()
    times[~(times > max(floor, 0.0))] = np.nan
    return times


def series_quality(rows):
    """Return ``(r2, mdape)`` of one series' predictions against the measured times.

    R^2 is computed on log10 times (the panels are log-log and the times span decades);
    None with fewer than three predictions.

    >>> r2, err = series_quality([{"measured": 1.0, "predicted": 1.1},
    ...                           {"measured": 10.0, "predicted": 9.0},
    ...                           {"measured": 100.0, "predicted": 100.0}])
    >>> round(r2, 3), round(err, 3)
    (0.998, 0.1)
    """
    pairs = [(p["measured"], p["predicted"]) for p in rows
             if p["predicted"] is not None and p["predicted"] > 0 and p["measured"] > 0]
    if len(pairs) < 3:  # R^2 of two points says nothing
        return None, (float(np.median([abs(b - a) / a for a, b in pairs])) if pairs else None)
    y, f = (np.log10(np.array(v)) for v in zip(*pairs))
    ss = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum((y - f) ** 2)) / ss if ss > 0 else None
    return r2, float(np.median([abs(b - a) / a for a, b in pairs]))


def _fmt_r2(r2):
    """Return R^2 with two decimals, or n/a."""
    return "n/a" if r2 is None else f"{r2:.2f}"


def panel_warnings(fit, sizes):
    """Return the quality warnings of the cut-through fits of the regimes ``sizes`` fall in.

    >>> panel_warnings(None, [8])
    ['no ping-pong fit']
    """
    if fit is None:
        return ["no ping-pong fit"]
    out = []
    for index in sorted({regime_index(m, tuple(fit["boundaries"])) for m in sizes}):
        reg = fit["regimes"][index]
        for w in quality_warnings(reg["models"]["cut-through"]):
            out.append(f"{reg['label']}: {w}")
    return out


def _fit_ylim(ax, measured, curves):
    """Set log y-limits around the measured times and the drawn curves, with headroom above
    for the quality box and the warnings (a decade and a half) and a little below."""
    values = [v for v in measured if v > 0]
    for c in curves:
        values += [float(v) for v in c[np.isfinite(c)]]
    if values:
        ax.set_ylim(min(values) / 1.6, max(values) * 25)


def _quality_box(ax, title, lines, warnings):
    """Title the panel with its quality lines below the title, and put its warnings in red
    (top right, inside the axes' headroom)."""
    ax.set_title("\n".join([title] + lines), fontsize=9)
    if warnings:
        shown = warnings[:3] + ([f"... and {len(warnings) - 3} more"] if len(warnings) > 3 else [])
        ax.text(0.98, 0.98, "POOR FIT\n" + "\n".join(shown), transform=ax.transAxes, ha="right",
                va="top", fontsize=6.5, color="firebrick", fontweight="bold",
                bbox={"boxstyle": "round", "fc": "mistyrose", "ec": "firebrick", "alpha": 0.9})


def _size_grid(sizes):
    """Return a log-spaced grid over the positive ``sizes`` (empty if none)."""
    pos = [s for s in sizes if s > 0]
    if not pos:
        return np.array([])
    lo, hi = min(pos), max(pos)
    return np.unique(np.geomspace(lo, hi if hi > lo else lo * 2, 200))


def _paper_coeffs(spec, collective):
    """Return Table 2's as-printed coefficients for ``spec`` or None."""
    try:
        return paper_formula(from_spec(spec), collective, "as-printed")
    except DualmpiError:  # an unknown spec, or no formula in the papers
        return None


def _boundaries(ax, analysis, lo, hi):
    """Draw the regime boundaries inside ``[lo, hi]`` as light vertical lines."""
    label = "regime boundary"
    for b in analysis["boundaries"]:
        if lo < b < hi:
            ax.axvline(b, color="0.55", lw=0.9, ls="--", zorder=1.5, label=label)
            label = None


def _collective_panel(ax, analysis, collective, colors):
    """Draw measured points with their spread, schedule-model lines, Table 2 lines and quality."""
    sizes_all, lines, warnings, drawn = [], [], [], []
    all_series = series(analysis, collective)
    measured = [p["spread"][0] if p.get("spread") else p["measured"]
                for _, _, rows in all_series for p in rows if p["size"] > 0 and p["measured"] > 0]
    floor = CURVE_FLOOR * min(measured) if measured else 0.0
    for spec, group, rows in all_series:
        color = colors[spec]
        pts = [p for p in rows if p["size"] > 0]
        if pts:
            y = np.array([p["measured"] for p in pts])
            lo = np.array([(p.get("spread") or [p["measured"]] * 2)[0] for p in pts])
            hi = np.array([(p.get("spread") or [p["measured"]] * 2)[1] for p in pts])
            ax.errorbar([p["size"] for p in pts], y, yerr=[np.maximum(y - lo, 0), np.maximum(hi - y, 0)],
                        ls="none", marker="o", ms=5, color=color, capsize=2.5, elinewidth=0.9,
                        label=f"{spec} measured (bars: min-max over ranks)")
        sizes = [p["size"] for p in rows]
        sizes_all += sizes
        grid = _size_grid(sizes)
        fit = group_fit(group)
        if grid.size and fit is not None:
            curve = clip_curve(_model_curve(fit, rows[0]["model"], grid), floor)
            ax.plot(grid, curve, color=color, lw=1.5, label=f"{spec} schedule model")
            drawn.append(curve)
            paper = _paper_coeffs(spec, collective)
            if paper is not None and paper != Coeffs.of(rows[0]["model"]):
                curve = clip_curve(_model_curve(fit, paper, grid), floor)
                ax.plot(grid, curve, color=color, lw=1.2, ls=":", label=f"{spec} Table 2 as printed")
                drawn.append(curve)
        r2, err = series_quality(rows)
        if err is not None:
            lines.append(f"{spec}: R² (log) {_fmt_r2(r2)}, MdAPE {100 * err:.0f}%")
            if err > POOR_MDAPE:
                warnings.append(f"{spec}: model off by {100 * err:.0f}% (MdAPE)")
        warnings += [f"{spec} {w}" for w in panel_warnings(fit, [s_ for s_ in sizes])
                     if f"{spec} {w}" not in warnings]
    pos = [s_ for s_ in sizes_all if s_ > 0]
    if pos:
        _boundaries(ax, analysis, min(pos), max(pos))
    if measured:
        _fit_ylim(ax, measured + [p["spread"][1] if p.get("spread") else p["measured"]
                                  for _, _, rows in all_series for p in rows if p["size"] > 0],
                  drawn)
    _quality_box(ax, f"{PATTERN_NAMES[collective]} ({collective})",
                 [f"model vs measured: {line}" for line in lines], warnings)
    _log_axes(ax, "block size m (bytes)", "time (s)")


def _log_axes(ax, xlabel, ylabel):
    """Use log-log axes with labels and a light grid."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel, fontsize=9)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.grid(True, which="major", color="0.92", lw=0.6)
    ax.tick_params(labelsize=8)


def _pingpong_panel(ax, analysis, pingpong_rows):
    """Draw one group's ping-pong medians per hop count (bars: min-max over repetitions and
    node pairs) with the fitted cut-through lines, and each regime's R^2 and warnings."""
    group = next((g for g in analysis["groups"] if group_fit(g) is not None), None)
    if group is None:
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no ping-pong fit", ha="center", va="center")
        return
    fit = group_fit(group)
    rows = [r for r in pingpong_rows.get(group["label"], []) if r["kind"] == group["kind"]]
    stat = analysis["stat"]
    hops = sorted({r["hops"] for r in rows})
    cmap = _cmap(len(hops))
    positive = [r["t_min"] for r in rows if r["size"] > 0 and r["t_min"] > 0]
    floor = CURVE_FLOOR * min(positive) if positive else 0.0
    for i, d in enumerate(hops):
        by_size = {}
        for r in rows:
            if r["hops"] == d and r["size"] > 0 and r[stat] > 0:
                by_size.setdefault(r["size"], []).append(r)
        if not by_size:
            continue
        sizes = sorted(by_size)
        y = np.array([np.median([r[stat] for r in by_size[s_]]) for s_ in sizes])
        lo = np.array([min(r["t_min"] for r in by_size[s_]) for s_ in sizes])
        hi = np.array([max(r["t_max"] for r in by_size[s_]) for s_ in sizes])
        ax.errorbar(sizes, y, yerr=[np.maximum(y - lo, 0), np.maximum(hi - y, 0)], ls="none",
                    marker="o", ms=4, color=cmap[i], capsize=2, elinewidth=0.8, label=f"d = {d}")
        grid = _size_grid(sizes)
        ax.plot(grid, clip_curve(_model_curve(fit, (1, 1, d), grid), floor), color=cmap[i], lw=1.2)
    _boundaries(ax, analysis, min(r["size"] for r in rows if r["size"] > 0) if rows else 1,
                max(r["size"] for r in rows) if rows else 1)
    lines, warnings = [], []
    for reg in fit["regimes"]:
        ct = reg["models"]["cut-through"]
        if ct is None:
            continue
        lines.append(f"{reg['label']}: R² {_fmt_r2(ct['r2'])}, "
                     f"rms rel. residual {100 * ct['rms_rel']:.0f}%")
        warnings += [f"{reg['label']}: {w}" for w in quality_warnings(ct)]
    if positive:
        _fit_ylim(ax, positive + [r["t_max"] for r in rows if r["size"] > 0], [])
    _quality_box(ax, f"ping-pong fit ({group['kind']}, {group['label']})", lines, warnings)
    _log_axes(ax, "message size m (bytes)", "one-way time (s)")
    ax.legend(fontsize=7, ncol=2, loc="center left",
              title="hops d (bars: min-max over repetitions), lines: fit", title_fontsize=7)


def _cmap(n):
    """Return ``n`` distinguishable colours from viridis."""
    from matplotlib import colormaps
    return [colormaps["viridis"](x) for x in np.linspace(0.0, 0.85, max(n, 1))]


def _ratio_panel(ax, analysis, pairs):
    """Draw dual-cube / hypercube time ratios: measured points and Table 2 lines."""
    index = {(p["spec"], p["collective"], p["size"]): (p, g)
             for g in analysis["groups"] for p in g["predictions"]}
    colors = _collective_colors()
    hyper, dual = pairs[0]
    for coll in PATTERNS:
        sizes = sorted({s for (spec, c, s) in index if spec == dual and c == coll
                        and (hyper, coll, s) in index and s > 0})
        if not sizes:
            continue
        ratio = [index[(dual, coll, s)][0]["measured"] / index[(hyper, coll, s)][0]["measured"]
                 for s in sizes]
        ax.plot(sizes, ratio, marker="o", ms=4, color=colors[coll], lw=1, label=f"{coll} measured")
        fit = group_fit(index[(dual, coll, sizes[0])][1])
        ph, pd = _paper_coeffs(hyper, coll), _paper_coeffs(dual, coll)
        if fit is not None and ph is not None and pd is not None:
            grid = _size_grid(sizes)
            ax.plot(grid, _model_curve(fit, pd, grid) / _model_curve(fit, ph, grid),
                    color=colors[coll], ls=":", lw=1.2, label=f"{coll} Table 2")
    ax.axhline(1.0, color="0.6", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("block size m (bytes)", fontsize=9)
    ax.set_ylabel(f"time {dual} / {hyper}", fontsize=9)
    ax.set_title(f"Table 2 measured: {dual} vs {hyper}", fontsize=10)
    ax.grid(True, color="0.92", lw=0.6)
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=7, ncol=2)


def _collective_colors():
    """Return one colour per collective."""
    return dict(zip(PATTERNS, ("tab:blue", "tab:orange", "tab:green", "tab:red")))


def _mdape_panel(ax, analysis):
    """Draw the median absolute relative error per collective and topology as bars."""
    labels, values = [], []
    for coll in PATTERNS:
        for spec, _group, rows in series(analysis, coll):
            errs = [abs(p["rel_error"]) for p in rows if p["rel_error"] is not None]
            if errs:
                labels.append(f"{coll}\n{spec}")
                values.append(100 * float(np.median(errs)))
    if not values:
        ax.set_axis_off()
        return
    ax.bar(range(len(values)), values, color="tab:gray")
    ax.set_xticks(range(len(values)), labels, fontsize=7)
    ax.set_ylabel("MdAPE (%)", fontsize=9)
    ax.set_title("model error: median |predicted - measured| / measured", fontsize=10)
    ax.tick_params(labelsize=8)


def plot_report(analysis, path, pingpong_rows=None, title=None):
    """Write the report figure (PNG or any format matplotlib infers from ``path``).

    Parameters
    ----------
    analysis : dict
        :func:`dualmpi.model.analysis.analyze` output.
    path : str
        Output file; ``.png`` recommended.
    pingpong_rows : dict, optional
        Group label -> ping-pong rows, for the ping-pong panel.
    title : str, optional
        Figure title.

    Returns
    -------
    str
        ``path``.
    """
    from matplotlib.figure import Figure

    specs = sorted({p["spec"] or "unknown" for g in analysis["groups"] for p in g["predictions"]})
    palette = ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange", "tab:brown",
               "tab:pink", "tab:olive", "tab:cyan", "tab:gray")
    colors = {s: palette[i % len(palette)] for i, s in enumerate(specs)}
    present = [c for c in PATTERNS if series(analysis, c)]
    fig = Figure(figsize=(15, 9.5), layout="constrained")
    axes = fig.subplots(2, 3)
    slots = [axes[0, 0], axes[0, 1], axes[1, 0], axes[1, 1]]
    for ax, coll in zip(slots, PATTERNS):
        if coll in present:
            _collective_panel(ax, analysis, coll, colors)
        else:
            ax.set_axis_off()
            ax.text(0.5, 0.5, f"no {coll} rows", ha="center", va="center")
    _pingpong_panel(axes[0, 2], analysis, pingpong_rows or {})
    pairs = table2_pairs(analysis)
    if pairs:
        _ratio_panel(axes[1, 2], analysis, pairs)
    else:
        _mdape_panel(axes[1, 2], analysis)
    handles, labels = [], []
    for ax in slots:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if handles:
        ncol = len(labels) if len(labels) <= 5 else (len(labels) + 1) // 2
        fig.legend(handles, labels, loc="outside lower center", ncol=ncol,
                   fontsize=8, frameon=False)
    fig.suptitle(title or f"dualmpi report (collectives {analysis['coll_stat']}, ping-pongs "
                 f"{analysis['stat']}): points measured with their spread (bars), solid lines the "
                 "schedule model with fitted t_s, t_w, t_h >= 0\n(one segment per regime), dotted "
                 "Table 2 as printed; each panel states R2 and relative error, and POOR FIT in red "
                 "when the fit does not describe the points", fontsize=10)
    fig.savefig(path, dpi=110)
    return path


def _oversubscribed_box(ax, runs):
    """Mark a panel whose measured points come from oversubscribed runs (red, on the panel)."""
    over = [r for r in runs if r["oversubscribed"]]
    if over:
        text = "OVERSUBSCRIBED: " + ", ".join(
            f"{r['ranks']} ranks on {r['cores']} cores" for r in _unique_ranks(over))
        ax.text(0.02, 0.98, text + "\nmeasured wall times include waiting for a core",
                transform=ax.transAxes, va="top", ha="left", fontsize=7, color="darkred",
                bbox={"facecolor": "mistyrose", "edgecolor": "red", "boxstyle": "round"})


def _unique_ranks(runs):
    """Return one run per distinct rank count, in order."""
    seen, out = set(), []
    for r in runs:
        if r["ranks"] not in seen:
            seen.add(r["ranks"])
            out.append(r)
    return out


def _prediction_panel(ax, doc, collective, colors):
    """One collective: measured (median call, min-max bars) against the formula and the clock."""
    for run in doc["runs"]:
        rows = sorted((r for r in run["rows"] if r["collective"] == collective),
                      key=lambda r: r["size"])
        if not rows:
            continue
        c = colors[run["spec"]]
        x = np.array([max(r["size"], 1) for r in rows], dtype=float)
        y = np.array([r["measured"] for r in rows])
        lo = np.array([r["spread"][0] for r in rows])
        hi = np.array([r["spread"][1] for r in rows])
        ax.errorbar(x, y, yerr=[y - lo, hi - y], fmt="o", color=c, capsize=3, ms=5,
                    mfc="none" if run["oversubscribed"] else c,
                    label=f"{run['spec']} measured ({run['ranks']} ranks)")
        for key, style in (("clock", "-"), ("formula", ":")):
            pts = [(xi, r[key]) for xi, r in zip(x, rows) if r[key] is not None]
            if pts:
                ax.plot(*zip(*pts), style, color=c, lw=1.3,
                        label=f"{run['spec']} predicted: " + ("clock" if key == "clock" else
                                                              "formula"))
    errs = [abs(r["error"]["clock"]) for run in doc["runs"] for r in run["rows"]
            if r["collective"] == collective and r["error"]["clock"] is not None]
    med = f"{np.median(errs) * 100:.0f} %" if errs else "n/a"
    _log_axes(ax, "block size m (bytes)", "time per call (s)")
    ax.set_title(f"{PATTERN_NAMES.get(collective, collective)}: median |error| of the clock {med}",
                 fontsize=9)
    _oversubscribed_box(ax, doc["runs"])


def _calibration_panel(ax, cal):
    """The two-rank ping-pongs (t_min per size and hop count) and the fitted model lines."""
    rows = cal.get("pingpong", [])
    hops = sorted({r["hops"] for r in rows})
    cmap = _cmap(max(len(hops), 1))
    switching = cal.get("switching") or "cut-through"
    for i, d in enumerate(hops):
        pts = sorted((r["size"], r["t_min"], r["t_max"]) for r in rows if r["hops"] == d)
        x = np.array([max(s, 1) for s, _, _ in pts], dtype=float)
        y = np.array([t for _, t, _ in pts])
        top = np.array([t for _, _, t in pts])
        ax.errorbar(x, y, yerr=[np.zeros_like(y), top - y], fmt="o", color=cmap[i], ms=4,
                    capsize=2, label=f"d = {d}")
        for reg_index, reg in enumerate(cal["regimes"]):
            fit = reg.get(switching)
            xs = [s for s in x if regime_index(s, tuple(cal["boundaries"])) == reg_index]
            if fit is None or not xs:
                continue
            p = fit["params"]
            xs = np.array(xs)
            model = (p["ts"] + xs * p["tw"] + d * (p["th"] or 0.0) if switching == "cut-through"
                     else d * (p["ts"] + xs * p["tw"]))
            ax.plot(xs, model, "-", color=cmap[i], lw=1)
    r2 = ", ".join("-" if reg.get(switching) is None else _fmt_r2(reg[switching]["r2"])
                   for reg in cal["regimes"])
    _log_axes(ax, "message size (bytes)", "one-way time (s)")
    ax.set_title(f"calibration, 2 ranks, d-hop chains: {switching} fit\nR2 per regime {r2}",
                 fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    if cal.get("contended"):
        ax.text(0.02, 0.98, f"CONTENDED: load average {cal['load']:.1f} on {cal['cores']} cores\n"
                "before the 2 ranks started: other work shared the cores",
                transform=ax.transAxes, va="top", ha="left", fontsize=7, color="darkred",
                bbox={"facecolor": "mistyrose", "edgecolor": "red", "boxstyle": "round"})


def _ratio_by_run_panel(ax, doc, colors):
    """Measured / clock-predicted time per collective and network, next to ranks per core."""
    width = 0.8 / max(len(doc["runs"]), 1)
    for j, run in enumerate(doc["runs"]):
        ratios = []
        for coll in PATTERNS:
            vals = [r["measured"] / r["clock"] for r in run["rows"]
                    if r["collective"] == coll and r["clock"]]
            ratios.append(float(np.median(vals)) if vals else np.nan)
        xs = np.arange(len(PATTERNS)) + (j - (len(doc["runs"]) - 1) / 2) * width
        ax.bar(xs, ratios, width, color=colors[run["spec"]],
               hatch="//" if run["oversubscribed"] else None,
               label=f"{run['spec']}: {run['ranks']} ranks / {run['cores']} cores")
    ax.axhline(1.0, color="black", lw=0.8)
    for run in _unique_ranks([r for r in doc["runs"] if r["oversubscribed"]]):
        ax.axhline(run["ranks_per_core"], color="darkred", lw=0.8, ls="--")
        ax.text(len(PATTERNS) - 0.55, run["ranks_per_core"], f"{run['ranks_per_core']:g} ranks/core",
                color="darkred", fontsize=7, va="bottom", ha="right")
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(PATTERNS)), list(PATTERNS))
    ax.set_ylabel("measured / predicted (clock), median over sizes")
    ax.set_title("model error per collective (hatched: oversubscribed)", fontsize=9)
    ax.legend(fontsize=7)


def plot_predictions(doc, path):
    """Write the predict-then-measure figure of a ``dualmpi-predict/1`` document.

    Four panels (one per collective) with the measured median call and its min-max spread
    against the two predictions (solid: the virtual clock, dotted: the formula), the
    calibration's ping-pongs with the fitted lines, and measured/predicted per collective.
    Panels with points from oversubscribed runs (more ranks than cores) say so in red,
    and those points are drawn hollow.

    Returns
    -------
    str
        ``path``.
    """
    from matplotlib.figure import Figure

    from .model.predict import check_document

    check_document(doc)
    palette = ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange", "tab:brown")
    colors = {r["spec"]: palette[i % len(palette)] for i, r in enumerate(doc["runs"])}
    fig = Figure(figsize=(15, 9.5), layout="constrained")
    axes = fig.subplots(2, 3)
    for ax, coll in zip((axes[0, 0], axes[0, 1], axes[1, 0], axes[1, 1]), PATTERNS):
        _prediction_panel(ax, doc, coll, colors)
    _calibration_panel(axes[0, 2], doc["calibration"])
    _ratio_by_run_panel(axes[1, 2], doc, colors)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=8, frameon=False)
    meta = doc["meta"]
    load = meta.get("loadavg", {})
    fig.suptitle("dualmpi predict: collectives predicted from a 2-rank calibration, then measured "
                 f"({meta.get('host', '?')}, {meta.get('cores', '?')} cores, load average "
                 f"{_fmt_load(load.get('start'))} at the start, {_fmt_load(load.get('end'))} "
                 "at the end)\npoints: median call of the slowest rank, bars min-max over calls; "
                 "solid: contention-aware virtual clock; dotted: schedule coefficients x "
                 "cut-through fit", fontsize=10)
    fig.savefig(path, dpi=100)
    return path


def _fmt_load(load):
    """Return a load average triple as text."""
    return "?" if not load else "/".join(f"{x:.1f}" for x in load)
