"""``dualmpi report``: measured collectives against the cost model, as a table and a figure."""

import os

from ..errors import DualmpiError
from ..model.analysis import analyze, table2_pairs
from ..model.fit import parse_boundaries, regime_params
from ..model.formulas import PATTERNS, TABLE2_ROWS, paper_formula, predict
from ..topology import from_spec
from .common import check_output_path, format_table, write_output
from .fit import add_fit_options, fit_tables, fmt_us, format_mdape, group_header, load_all, prediction_table

__all__ = ["add_parser", "main", "table2_table"]


def add_parser(sub):
    """Register the ``report`` subcommand."""
    p = sub.add_parser(
        "report",
        help="tables and a figure of bench results: measured vs model, dual-cube vs hypercube",
        description="Fit the ping-pongs of dualmpi bench results (as dualmpi fit does), print "
        "measured vs predicted time for every collective row and, when the FILEs hold a hypercube "
        "and a dual-cube with the same number of nodes, the papers' Table 2 measured side by side. "
        "With --plot, draw one log-log panel per collective (points measured, solid lines the "
        "schedule's model with the fitted parameters, dotted lines Table 2 as printed), the "
        "ping-pong fit, and the dual-cube/hypercube time ratio (or the model error per "
        "collective). See docs/model.md.",
        epilog="example: dualmpi report bench_hypercube_n5.json bench_dualcube_r3.json "
        "--plot report.png",
    )
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="results: dualmpi bench or run JSON files, or launch/sweep folders "
                   "(docs/results.md); the collectives of run and sweep files are predicted with "
                   "the fit of the bench files given with them (--pool)")
    p.add_argument("--plot", metavar="OUT", help="write the figure to OUT (PNG recommended)")
    add_fit_options(p, resamples=200)
    p.add_argument("--title", help="figure title")
    p.set_defaults(func=main)


def main(args):
    """Print the report tables and write the figure; exit 0."""
    boundaries = parse_boundaries(args.regimes)
    if args.resamples < 0:
        raise DualmpiError("--resamples must be 0 or more")
    if args.plot and os.path.isdir(args.plot):
        raise DualmpiError(f"--plot {args.plot}: is a directory, give a file name such as report.png")
    if args.plot and not os.path.isdir(os.path.dirname(args.plot) or "."):
        raise DualmpiError(f"--plot {args.plot}: no such directory")
    if args.plot:
        _check_plot_format(args.plot)
        check_output_path(args.plot, "--plot")
    results = load_all(args.files)
    out = analyze(results, boundaries, args.stat, args.coll_stat, args.kind, args.pool,
                  args.resamples)
    for group in out["groups"]:
        print(group_header(group))
        fit = group["fits"].get(group["kind"]) if group["kind"] else None
        if fit is None:
            print("no ping-pong rows: measured times only")
        else:
            print(fit_tables(fit, group["kind"], out))
        print()
    predictions = [p for g in out["groups"] for p in g["predictions"]]
    if predictions:
        print(f"collectives, predicted vs measured ({out['coll_stat']}, us):")
        print(prediction_table(predictions, with_file=len(out["groups"]) > 1))
        print(format_mdape(out["mdape"]))
    pairs = table2_pairs(out)
    for hyper, dual in pairs:
        print()
        print(f"Table 2 measured: {hyper} vs {dual} ({out['coll_stat']}, us; Table 2 ratio with "
              f"{dual}'s fitted parameters)")
        print(table2_table(out, hyper, dual))
    if args.plot:
        from ..plotting import plot_report

        rows = {}
        for group in out["groups"]:
            rows[group["label"]] = [r for res in results if res.path in group["files"]
                                    for r in res.pingpong]
        import io

        import matplotlib

        figure = io.BytesIO()
        ext = os.path.splitext(args.plot)[1].lstrip(".").lower()
        with matplotlib.rc_context({"savefig.format": ext}):  # the format of args.plot's name
            plot_report(out, figure, rows, args.title)
        write_output(args.plot, figure.getvalue(), "--plot")
        print(f"\nfigure: {args.plot}")
    return 0


def _check_plot_format(path):
    """Raise unless matplotlib can write ``path``'s format (its extension, e.g. ``.png``)."""
    from matplotlib.figure import Figure

    formats = sorted(Figure().canvas.get_supported_filetypes())
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    if ext not in formats:
        raise DualmpiError(f"--plot {path}: unknown figure format {ext or '(no extension)'!r}; "
                           f"use one of {', '.join('.' + f for f in formats)}")


def _ratio(a, b):
    """Return ``a / b`` with two decimals, '-' when either is missing or b is not positive."""
    return "-" if a is None or b is None or b <= 0 else f"{a / b:.2f}"


def table2_table(analysis, hyper, dual):
    """Return Table 2 with measured times: per pattern and size, hypercube vs dual-cube."""
    index = {(p["spec"], p["collective"], p["size"]): (p, g)
             for g in analysis["groups"] for p in g["predictions"]}
    th, td = from_spec(hyper), from_spec(dual)
    rows = []
    for coll in PATTERNS:
        sizes = sorted({s for (spec, c, s) in index if spec == dual and c == coll
                        and (hyper, coll, s) in index})
        for size in sizes:
            ph, _ = index[(hyper, coll, size)]
            pd, group = index[(dual, coll, size)]
            fit = group["fits"].get(group["kind"]) if group["kind"] else None
            params = regime_params(fit, size) if fit is not None else None
            ch = cd = None
            if params is not None:
                ch = predict(paper_formula(th, coll), *params, size)
                cd = predict(paper_formula(td, coll), *params, size)
            rows.append((TABLE2_ROWS[coll], size, fmt_us(ph["measured"]), fmt_us(ph["predicted"]),
                         fmt_us(pd["measured"]), fmt_us(pd["predicted"]),
                         _ratio(pd["measured"], ph["measured"]),
                         _ratio(pd["predicted"], ph["predicted"]), _ratio(cd, ch)))
    header = ("pattern", "size", f"{hyper} measured", "model", f"{dual} measured", "model",
              "ratio measured", "ratio model", "ratio Table 2")
    return format_table(rows, header)
