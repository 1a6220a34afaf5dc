"""``dualmpi simulate``: a collective's schedule run without MPI, with the papers' counts."""

import resource
import time

from ..errors import DualmpiError
from ..model.clock import CONTENTION, SWITCHING, ClockParams, parse_shape
from ..simulator import check_faulty_size, simulate, simulated
from ..simulate_cost import check_simulation
from ..topology.faults import FaultyTopology
from .common import (add_fault_args, apply_faults, format_table, has_faults, load_topology,
                     print_json, topology_arg)

__all__ = ["add_parser", "main", "DEFAULT_CLOCK", "clock_from_args"]

#: Link parameters of the virtual times when only --size is given (those of ``dualmpi model``).
DEFAULT_CLOCK = {"ts": 2e-6, "tw": 1e-9, "th": 5e-8}


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
        "blocks, c each step's longest path in hops). link_sharing counts, per step, the most "
        "messages that use one directed link at any hop index (a conflict-free step can still "
        "send 2+ messages over one link at different hop positions; their bodies then overlap "
        "under cut-through). With --model or --size, 'virtual' gives the paper's formula time, "
        "the step bound with link sharing, and the virtual clock's time of the replayed "
        "schedule, whose links share their bandwidth (docs/model.md, 'Link sharing').",
        epilog="example: dualmpi simulate dualcube:r=3 --collective alltoall --size 65536 "
        "--model ts=2e-6,tw=1e-9,th=5e-8 --json",
    )
    p.add_argument("spec", type=topology_arg, help="topology spec, e.g. metacube:k=2,m=2")
    p.add_argument("--collective", required=True, choices=simulated(),
                   help="which collective (every registered one whose description says which "
                   "blocks its nodes start and end with)")
    p.add_argument("--root", default="0",
                   help="root of the rooted collectives (bcast, scatter, gather; default 0)")
    p.add_argument("--variant", default="corrected", choices=("corrected", "as-printed", "sat"),
                   help="as-printed follows a paper's printed text where dualmpi corrects it "
                   "(dual-cube bcast, metacube MC(2,m) alltoall); see docs/errata.md. sat: bcast "
                   "in the fewest rounds, searched by a SAT solver (needs python-sat; up to 4096 "
                   "nodes)")
    p.add_argument("--method", default="auto", choices=("auto", "schedule", "stream", "vector"),
                   help="schedule: replay every transfer; stream: numpy total exchange, a step at "
                   "a time; vector: numpy bcast/scatter/allgather, a round at a time (auto: stream "
                   "above 256 nodes, vector above 4096)")
    p.add_argument("--size", metavar="BYTES",
                   help="block size m in bytes for the virtual times (default 1024 when --model is "
                   "given)")
    p.add_argument("--model", metavar="ts=S,tw=S_PER_BYTE,th=S",
                   help=f"link parameters of the virtual times (default ts={DEFAULT_CLOCK['ts']:g},"
                   f"tw={DEFAULT_CLOCK['tw']:g},th={DEFAULT_CLOCK['th']:g} when --size is given, "
                   "as dualmpi model)")
    p.add_argument("--switching", default="cut-through", choices=SWITCHING,
                   help="switching of the virtual clock (default cut-through)")
    p.add_argument("--contention", default="shared", choices=CONTENTION,
                   help="how messages on one link at once interact: shared bandwidth (default), "
                   "physical (a later head waits for the link), slot (the papers' conflicts only)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_fault_args(p)
    p.set_defaults(func=main)


def main(args):
    """Simulate and print; exit 0 when every block was delivered, 1 otherwise."""
    base = load_topology(args.spec)
    try:
        root = int(args.root, 0)
    except ValueError:
        raise DualmpiError(f"bad root {args.root!r}: the root is an integer node id") from None
    root = base.check_node(root)
    # sizes first, with faults too: the faults are built (random ones list every link) after
    probe = FaultyTopology(base) if has_faults(args) else base
    if probe is not base:
        check_faulty_size(probe, args.collective, args.method)
    check_simulation(probe, args.collective, args.variant, args.method)
    topo = apply_faults(base, args)
    clock, size = clock_from_args(args)
    started = time.perf_counter()
    out = simulate(topo, args.collective, root, args.variant, args.method, clock, size)
    out["elapsed_s"] = round(time.perf_counter() - started, 3)
    out["max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    if args.json:
        print_json(out)
    else:
        rows = [(k, v) for k, v in out.items() if k not in ("model", "link_sharing", "virtual")]
        rows.append(("model", "T = {ts}*t_s + {tw}*m*t_w + {th}*t_h".format(**out["model"])))
        rows.extend(_sharing_rows(out.get("link_sharing")))
        rows.extend(_virtual_rows(out.get("virtual")))
        print(format_table(rows))
    return 0 if out["delivered"] == out["expected"] and not out.get("undeliverable_count") else 1


def clock_from_args(args):
    """Return ``(ClockParams or None, size)`` from --model, --size, --switching, --contention."""
    if args.model is None and args.size is None:
        return None, 1024
    try:
        size = 1024 if args.size is None else int(args.size, 0)
    except ValueError:
        size = -1
    if size < 0:
        raise DualmpiError(f"bad --size {args.size!r}: a non-negative number of bytes")
    try:
        params = parse_shape(args.model) if args.model is not None else dict(DEFAULT_CLOCK)
    except ValueError as exc:
        raise DualmpiError(f"bad --model: {exc}") from None
    return ClockParams(**params, switching=args.switching, contention=args.contention), size


def _sharing_rows(sharing):
    """Return table rows for the link-sharing figures."""
    if sharing is None:
        return [("link_sharing", "not counted (more nodes than the stream method counts)")]
    steps = len(sharing["per_step"])
    return [("link_sharing", f"{sharing['steps_shared']} of {steps} steps send 2+ messages over one "
             f"directed link (max {sharing['max']}; {sharing['shared_messages']} link uses shared)"),
            ("model with link sharing", "T = {ts}*t_s + {tw}*m*t_w + {th}*t_h".format(**sharing["model"])
             + " (messages sharing a link overlap for the whole step)")]


def _virtual_rows(v):
    """Return table rows for the virtual times."""
    if v is None:
        return []
    par = v["params"]

    def us(t, ratio=None):
        if t is None:
            return "-"
        return f"{t * 1e6:.6g} us" + ("" if ratio is None else f" (x{ratio:.4f} the paper's T)")

    return [("virtual parameters", f"t_s {par['ts']:g} s, t_w {par['tw']:g} s/B, t_h {par['th']:g} s, "
             f"m {v['size']} B, {v['switching']}, {v['contention']} links"),
            ("paper's T", us(v["paper_time"])),
            ("step bound with link sharing", us(v["sharing_bound"], v["sharing_over_paper"])),
            ("virtual clock time", us(v["clock_time"], v["clock_over_paper"])),
            ("contention delay", "-" if v["contention_delay"] is None else
             f"{v['contention_delay'] * 1e6:.6g} us over {v['delayed_hops']} hops")]
