"""Figures of ``dualmpi report``: measured collectives against the cost model (matplotlib, Agg).

Only the object-oriented matplotlib API is used (``Figure`` with the Agg canvas), so
importing this module changes no global backend and needs no display.
"""

import numpy as np

from .model.analysis import table2_pairs
from .model.fit import regime_params
from .errors import DualmpiError
from .model.formulas import PATTERN_NAMES, PATTERNS, Coeffs, paper_formula, predict
from .topology import from_spec

__all__ = ["plot_report", "series", "group_fit"]

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
    """Return model times over ``sizes`` with each size's regime parameters (NaN if unfitted)."""
    times = []
    for m in sizes:
        params = regime_params(fit, m) if fit is not None else None
        times.append(np.nan if params is None else float(predict(coeffs, *params, m)))
    return np.array(times)


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
    """Draw measured points, schedule-model lines and Table 2 lines of one collective."""
    sizes_all = []
    for spec, group, rows in series(analysis, collective):
        color = colors[spec]
        pts = [(p["size"], p["measured"]) for p in rows if p["size"] > 0]
        if pts:
            ax.plot(*zip(*pts), ls="none", marker="o", ms=5, color=color,
                    label=f"{spec} measured")
        sizes = [p["size"] for p in rows]
        sizes_all += sizes
        grid = _size_grid(sizes)
        fit = group_fit(group)
        if grid.size and fit is not None:
            ax.plot(grid, _model_curve(fit, rows[0]["model"], grid), color=color, lw=1.5,
                    label=f"{spec} schedule model")
            paper = _paper_coeffs(spec, collective)
            if paper is not None and paper != Coeffs.of(rows[0]["model"]):
                ax.plot(grid, _model_curve(fit, paper, grid), color=color, lw=1.2, ls=":",
                        label=f"{spec} Table 2 as printed")
    pos = [s for s in sizes_all if s > 0]
    if pos:
        _boundaries(ax, analysis, min(pos), max(pos))
    ax.set_title(f"{PATTERN_NAMES[collective]} ({collective})", fontsize=10)
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
    """Draw one group's ping-pong medians per hop count with the fitted cut-through lines."""
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
    for i, d in enumerate(hops):
        by_size = {}
        for r in rows:
            if r["hops"] == d and r["size"] > 0 and r[stat] > 0:
                by_size.setdefault(r["size"], []).append(r[stat])
        if not by_size:
            continue
        sizes = sorted(by_size)
        ax.plot(sizes, [np.median(by_size[s]) for s in sizes], ls="none", marker="o", ms=4,
                color=cmap[i], label=f"d = {d}")
        grid = _size_grid(sizes)
        ax.plot(grid, _model_curve(fit, (1, 1, d), grid), color=cmap[i], lw=1.2)
    _boundaries(ax, analysis, min(r["size"] for r in rows if r["size"] > 0) if rows else 1,
                max(r["size"] for r in rows) if rows else 1)
    ax.set_title(f"ping-pong fit ({group['kind']}, {group['label']})", fontsize=10)
    _log_axes(ax, "message size m (bytes)", "one-way time (s)")
    ax.legend(fontsize=7, ncol=2, loc="upper left", title="hops d, lines t_s + m t_w + d t_h",
              title_fontsize=7)


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
                 f"{analysis['stat']}): points measured, solid lines "
                 "schedule model with fitted t_s, t_w, t_h, dotted Table 2 as printed", fontsize=11)
    fig.savefig(path, dpi=110)
    return path
