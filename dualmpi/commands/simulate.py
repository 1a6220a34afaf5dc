"""``dualmpi simulate``: a collective's schedule run without MPI, with the papers' counts."""

import resource
import time

from ..collectives import COLLECTIVES, EXTRA_COLLECTIVES
from ..errors import DualmpiError
from ..simulator import simulate
from .common import (add_fault_args, apply_faults, format_table, load_topology, print_json,
                     topology_arg)

__all__ = ["add_parser", "main"]


def add_parser(sub):
    """Register the ``simulate`` subcommand."""
    p = sub.add_parser(
        "simulate",
        help="run a collective's schedule without MPI: delivery, conflicts, cost coefficients",
        description="Replay the schedule of a collective on SPEC without MPI and report nodes, "
        "rounds, messages, delivered/expected blocks, conflicts (two messages on one directed link "
        "in the same step at the same hop index), hops_from_source (alltoall: total hops of node "
        "0's messages) and model {ts, tw, th}: the coefficients a, b, c of "
        "T = a*t_s + b*m*t_w + c*t_h this schedule implies (b sums each step's largest message in "
        "blocks, c each step's longest path in hops).",
        epilog="example: dualmpi simulate metacube:k=2,m=2 --collective alltoall --json",
    )
    p.add_argument("spec", type=topology_arg, help="topology spec, e.g. metacube:k=2,m=2")
    p.add_argument("--collective", required=True, choices=COLLECTIVES + EXTRA_COLLECTIVES,
                   help="which collective")
    p.add_argument("--root", default="0", help="root of bcast and scatter (default 0)")
    p.add_argument("--variant", default="corrected", choices=("corrected", "as-printed"),
                   help="as-printed follows a paper's printed text where dualmpi corrects it "
                   "(dual-cube bcast, metacube MC(2,m) alltoall); see docs/errata.md")
    p.add_argument("--method", default="auto", choices=("auto", "schedule", "stream", "vector"),
                   help="schedule: replay every transfer; stream: numpy total exchange, a step at "
                   "a time; vector: numpy bcast/scatter/allgather, a round at a time (auto: stream "
                   "above 256 nodes, vector above 4096)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_fault_args(p)
    p.set_defaults(func=main)


def main(args):
    """Simulate and print; exit 0 when every block was delivered, 1 otherwise."""
    topo = apply_faults(load_topology(args.spec), args)
    try:
        root = int(args.root, 0)
    except ValueError:
        raise DualmpiError(f"bad root {args.root!r}: the root is an integer node id") from None
    root = topo.check_node(root)
    started = time.perf_counter()
    out = simulate(topo, args.collective, root, args.variant, args.method)
    out["elapsed_s"] = round(time.perf_counter() - started, 3)
    out["max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    if args.json:
        print_json(out)
    else:
        rows = [(k, v) for k, v in out.items() if k != "model"]
        rows.append(("model", "T = {ts}*t_s + {tw}*m*t_w + {th}*t_h".format(**out["model"])))
        print(format_table(rows))
    return 0 if out["delivered"] == out["expected"] and not out.get("undeliverable_count") else 1
