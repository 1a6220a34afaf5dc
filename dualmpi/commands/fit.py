"""``dualmpi fit``: t_s, t_w, t_h from ping-pongs, switching mode, and collectives predicted."""

import os

from ..errors import DualmpiError
from ..model.analysis import KINDS, analyze
from ..model.fit import DEFAULT_BOUNDARIES, parse_boundaries, quality_warnings
from ..model.results import STATS, ResultsError, load_any
from .common import format_table, print_json

__all__ = ["add_parser", "add_fit_options", "main", "load_all", "fit_tables", "prediction_table", "format_mdape",
           "fmt_us", "fmt_pct"]

_UNITS = {"ts": ("t_s us", 1e6), "tw": ("t_w ns/B", 1e9), "th": ("t_h us", 1e6)}


def add_parser(sub):
    """Register the ``fit`` subcommand."""
    p = sub.add_parser(
        "fit",
        help="fit t_s, t_w, t_h to a bench run's ping-pongs and predict its collectives",
        description="Fit the papers' cost model T = t_s + m*t_w + d*t_h to the ping-pong rows of "
        "dualmpi bench results (one-way time of m bytes over d hops), per protocol regime: median "
        "per (size, hops), Huber IRLS on relative residuals, 95% bootstrap CIs, R^2. Compare with "
        "store-and-forward T = d*(t_s + m*t_w), then predict every collective row from its model "
        "coefficients (T = ts*t_s + tw*m*t_w + th*t_h) and report the median absolute relative "
        "error (MdAPE) per collective. See docs/model.md.",
        epilog="example: dualmpi fit benchmarks/results/bench_dualcube_r3.json --regimes 4096,32768",
    )
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="results: dualmpi bench or run JSON files, or launch/sweep folders "
                   "(docs/results.md); only bench files have ping-pongs to fit")
    add_fit_options(p, resamples=1000)
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object (dualmpi-fit/1)")
    p.set_defaults(func=main)


def load_all(paths):
    """Return the loaded results of every path, a file or a sweep folder (raises ResultsError
    on the first bad one)."""
    return [res for path in paths for res in load_any(path)]


def add_fit_options(p, resamples):
    """Add the fitting options ``fit`` and ``report`` share (regimes, statistics, kind, pool)."""
    p.add_argument("--regimes", default=",".join(map(str, DEFAULT_BOUNDARIES)),
                   help="regime boundaries in bytes (default 4096,32768: m <= 4096, "
                   "4096 < m <= 32768, m > 32768; 'none' for one regime)")
    p.add_argument("--stat", default="t_min", choices=STATS,
                   help="time statistic of the ping-pong rows (default t_min: the uncontended "
                   "one-way time, free of scheduling hiccups)")
    p.add_argument("--coll-stat", default="t_max", choices=STATS,
                   help="time statistic of the collective rows (default t_max over ranks: the "
                   "collective is complete when its last node is)")
    p.add_argument("--kind", choices=KINDS, default=None,
                   help="ping-pong kind whose fit predicts the collectives (default: emulated "
                   "when present, else raw)")
    p.add_argument("--pool", action="store_true",
                   help="fit the ping-pongs of all FILEs together (same machine and settings) "
                   "instead of each file on its own")
    p.add_argument("--resamples", type=int, default=resamples,
                   help=f"bootstrap resamples for the confidence intervals (default {resamples}, "
                   "0: none)")


def main(args):
    """Fit and print; exit 0."""
    boundaries = parse_boundaries(args.regimes)
    if args.resamples < 0:
        raise DualmpiError("--resamples must be 0 or more")
    results = load_all(args.files)
    if not any(r.pingpong for r in results):
        raise ResultsError(f"{', '.join(args.files)}: no ping-pong rows, nothing to fit "
                           "(dualmpi bench writes them under \"pingpong\"; run and sweep files "
                           "have collectives only: add a bench file, or use dualmpi report)")
    out = analyze(results, boundaries, args.stat, args.coll_stat, args.kind, args.pool,
                  args.resamples, args.seed)
    if args.json:
        print_json(out)
        return 0
    for group in out["groups"]:
        print(group_header(group))
        for kind, fit in group["fits"].items():
            print()
            print(fit_tables(fit, kind, out))
        print()
        if group["predictions"]:
            print(f"predicted vs measured ({group['kind'] or 'no'} fit; collectives "
                  f"{out['coll_stat']}, us):")
            print(prediction_table(group["predictions"]))
            print(format_mdape(group["mdape"]))
        vclock = [p["virtual_matches_model"] for p in group["predictions"]
                  if p["virtual_matches_model"] is not None]
        if vclock:
            print(f"virtual clock: {sum(vclock)} of {len(vclock)} rows measured exactly their "
                  "model coefficients")
        if group["unverified_rows"]:
            print(f"({group['unverified_rows']} unverified collective rows left out)")
        print()
    if len(out["groups"]) > 1:
        print("all files: " + format_mdape(out["mdape"]))
    return 0


def fmt_us(seconds):
    """Return seconds as microseconds with 4 significant digits ('-' for None)."""
    return "-" if seconds is None else f"{seconds * 1e6:.4g}"


def fmt_pct(x):
    """Return a fraction as a signed percentage ('-' for None)."""
    return "-" if x is None else f"{100 * x:+.1f}%"


def _fmt_param(name, value, ci):
    """Return ``value [lo, hi]`` in the parameter's display unit."""
    if value is None:
        return "- (one hop count)" if name == "th" else "-"
    scale = _UNITS[name][1]
    text = f"{value * scale:.4g}"
    if ci:
        text += f" [{ci[0] * scale:.4g}, {ci[1] * scale:.4g}]"
    return text


def group_header(group):
    """Return the first line of a group's output: files, specs, injected shape."""
    specs = ", ".join(sorted({s for s in group["specs"] if s})) or "unknown topology"
    names = ", ".join(os.path.basename(f) for f in group["files"])
    line = f"== {names}: {specs}"
    shape = group.get("shape")
    if isinstance(shape, dict) and all(isinstance(shape.get(k), (int, float)) for k in _UNITS):
        parts = ", ".join(f"{_UNITS[k][0]} {shape[k] * _UNITS[k][1]:.4g}" for k in _UNITS)
        line += f" (injected link shape: {parts}"
        line += f"; {group['switching']})" if group.get("switching") else ")"
    return line


def _hops_text(hops):
    """Return the hop counts of a regime as text."""
    if not hops:
        return "-"
    return str(hops[0]) if len(hops) == 1 else f"{hops[0]}-{hops[-1]}"


def fit_tables(fit, kind, out):
    """Return the parameter table and the switching comparison of one ping-pong fit."""
    ci = (f"95% bootstrap CI ({out['resamples']} resamples, seed {out['seed']})"
          if out["resamples"] else "no CIs (--resamples 0)")
    lines = [f"ping-pong fit ({kind}, {out['stat']}): median per (size, hops), Huber IRLS on "
             f"relative residuals, {ci}"]
    rows = []
    for reg in fit["regimes"]:
        ct = reg["models"]["cut-through"]
        if ct is None:
            rows.append((reg["label"], reg["rows"], reg["points"], _hops_text(reg["hops"]),
                         "not fitted (needs 2+ sizes)", "", "", "", ""))
            continue
        p, ci = ct["params"], ct["ci"]
        rows.append((reg["label"], reg["rows"], reg["points"], _hops_text(reg["hops"]),
                     *(_fmt_param(k, p[k], ci[k]) for k in ("ts", "tw", "th")),
                     "-" if ct["r2"] is None else f"{ct['r2']:.4f}", f"{100 * ct['rms_rel']:.2f}%"))
    header = ("regime", "rows", "points", "hops", "t_s us [95% CI]", "t_w ns/B [95% CI]",
              "t_h us [95% CI]", "R^2", "rms rel")
    lines.append(format_table(rows, header))
    dropped = sum(reg["models"][m]["resamples_dropped"] for reg in fit["regimes"]
                  for m in reg["models"] if reg["models"][m] is not None)
    if dropped:
        lines.append(f"bootstrap: {dropped} resamples dropped over all regimes and models (too few "
                     "distinct points, or singular after the Huber reweighting)")
    for reg in fit["regimes"]:
        ct = reg["models"]["cut-through"]
        if ct is not None and quality_warnings(ct):
            lines.append(f"warning: poor fit in {reg['label']}: {'; '.join(quality_warnings(ct))} "
                         "(R^2 < 0.9: the model does not describe these points; a parameter "
                         "pinned at 0 (fitted >= 0) or whose CI reaches 0: the points do not "
                         "determine it)")
    lines.append(switching_text(fit))
    return "\n".join(lines)


def switching_text(fit):
    """Return the cut-through vs store-and-forward comparison as text."""
    sw = fit["switching"]
    if sw["better"] is None:
        return f"switching: not compared ({sw['reason']})"
    rss = sw["rss_rel"]
    other = next(m for m in rss if m != sw["better"])
    rows = []
    for reg in fit["regimes"]:
        fits = reg["models"]
        rows.append((reg["label"], *(("-" if fits[m] is None or fits[m]["r2"] is None
                                      else f"{fits[m]['r2']:.4f}") for m in rss),
                     *(("-" if fits[m] is None else f"{fits[m]['rss_rel']:.3g}") for m in rss)))
    header = ("regime", *(f"R^2 {m}" for m in rss), *(f"rel RSS {m}" for m in rss))
    return (f"switching: {sw['better']} fits better (sum of squared relative residuals "
            f"{rss[sw['better']]:.3g} vs {rss[other]:.3g} for {other}, "
            f"{sw['regimes_compared']} regimes)\n" + format_table(rows, header))


def prediction_table(predictions, with_file=False):
    """Return the predicted-vs-measured table (times in microseconds)."""
    rows = []
    for p in predictions:
        m = p["model"]
        row = [p["spec"] or "-", p["collective"], p["size"], f"{m['ts']},{m['tw']},{m['th']}",
               fmt_us(p["measured"]), fmt_us(p["predicted"]), fmt_pct(p["rel_error"]),
               fmt_us(p["paper"])]
        if with_file:
            row.insert(0, os.path.basename(p["file"]))
        rows.append(row)
    header = ["spec", "collective", "size", "model ts,tw,th", "measured", "predicted", "error",
              "Table 2"]
    if with_file:
        header.insert(0, "file")
    return format_table(rows, header)


def format_mdape(values):
    """Return the MdAPE line: per collective and overall."""
    parts = [f"{c} {'-' if v is None else f'{100 * v:.1f}%'}" for c, v in values.items()]
    return "MdAPE (median |predicted - measured| / measured): " + ", ".join(parts)
