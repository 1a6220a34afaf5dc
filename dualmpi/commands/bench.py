"""``dualmpi bench``: timing experiments (OSU method) for fitting t_s, t_w, t_h."""

from dataclasses import dataclass

from ..collectives import COLLECTIVES
from ..collectives.registry import get
from ..errors import InputError
from ..measure.collective import runnable
from .common import check_output_path, load_topology, topology_arg, write_json_atomic, write_output
from .options import make_options
from .run import check_runnable, metadata, parse_sizes

__all__ = ["add_parser", "main"]


@dataclass
class BenchConfig:
    """What to measure."""

    pp_sizes: list
    coll_sizes: list
    hops: list
    collectives: tuple
    root: int
    baseline: bool
    options: object
    scale: float


def add_parser(sub):
    """Register the ``bench`` subcommand."""
    p = sub.add_parser(
        "bench",
        help="timing experiment: ping-pong over d-hop chains and collectives (under mpiexec)",
        description="Measure one-way ping-pong times over d-hop chains along real routes "
        "(d = 1..diameter, forwarded by the ranks in between) and the collectives, OSU method "
        "(warm-up, barrier outside the timer, iterations scaled by size, min/avg/max), with the "
        "raw mpi4py Send/Recv and the native MPI collectives on the same ranks as baselines. "
        "Writes JSON and CSV with the MPI library, host, date and all parameters; fit them "
        "with `dualmpi fit`.",
        epilog="example: mpiexec -n 8 python -m mpi4py -m dualmpi bench dualcube:r=2 "
        "--json results/d2.json",
    )
    p.add_argument("spec", type=topology_arg, help="topology spec; one rank per node")
    p.add_argument("--json", metavar="FILE", required=True,
                   help="results file (a .csv with the same rows is written beside it)")
    p.add_argument("--sizes", default=None,
                   help="ping-pong sizes in bytes (default: 0 and powers of two up to 1 MiB)")
    p.add_argument("--coll-sizes", default="0,16,256,4096,65536",
                   help="collective block sizes in bytes (default 0,16,256,4096,65536)")
    p.add_argument("--hops", default=None, help="chain lengths to measure (default 1..diameter)")
    p.add_argument("--collective", default="all",
                   choices=(*(c for c in runnable() if get(c).mpi), "all", "none"),
                   help=f"collectives to time (default all: {', '.join(COLLECTIVES)})")
    p.add_argument("--root", default=0, type=int,
                   help="root of the rooted collectives (bcast, scatter, gather)")
    p.add_argument("--no-baseline", action="store_true",
                   help="skip the raw Send/Recv and native-collective baselines")
    p.add_argument("--shape", metavar="ts=S,tw=S,th=S", help="shape the links (see dualmpi run)")
    p.add_argument("--switching", default="store-and-forward",
                   choices=("store-and-forward", "cut-through"), help="see dualmpi run")
    p.add_argument("--packets", type=int, default=8, help="packets per message (cut-through)")
    p.add_argument("--scale", type=float, default=1.0, help="multiply the iteration counts")
    p.set_defaults(func=main)


def main(args):
    """Run the benchmark grid and write the results (rank 0)."""
    topo = load_topology(args.spec)
    check_runnable(topo)
    from ..measure.harness import DEFAULT_SIZES, run_bench

    pp = parse_sizes(args.sizes) if args.sizes else list(DEFAULT_SIZES)
    coll = parse_sizes(args.coll_sizes) if args.coll_sizes else []
    hops = parse_sizes(args.hops) if args.hops else []
    if args.scale <= 0:
        raise InputError("--scale must be positive")
    colls = {"all": COLLECTIVES, "none": ()}.get(args.collective, (args.collective,))
    root = topo.check_node(args.root)
    options = make_options(args.shape, args.switching, args.packets)
    cfg = BenchConfig(pp, coll, hops, colls, root, not args.no_baseline, options, args.scale)
    check_output_path(args.json)
    csv = args.json[:-5] + ".csv" if args.json.endswith(".json") else args.json + ".csv"
    check_output_path(csv, "--json (its .csv)")

    from mpi4py import MPI

    from ..errors import RankCountError

    world = MPI.COMM_WORLD
    if world.Get_size() != topo.num_nodes:
        raise RankCountError(f"{topo.spec} has {topo.num_nodes} nodes but the job has "
                             f"{world.Get_size()} ranks; run it with mpiexec -n {topo.num_nodes} "
                             "(bench runs one rank per node)")
    results = run_bench(world, topo, cfg)
    if world.Get_rank() == 0:
        meta = metadata(world, topo, args)
        meta["shape"] = None if options.shape is None else {
            "ts": options.shape.ts, "tw": options.shape.tw, "th": options.shape.th}
        meta["switching"] = options.switching
        results = {"format": results["format"], "meta": meta, **{
            k: v for k, v in results.items() if k != "format"}}
        write_json_atomic(results, args.json)
        write_output(csv, _csv_text(results), "--json (its .csv)")
        print(f"results written to {args.json} and {csv}")
    bad = [r for r in results["pingpong"] + results["collectives"] if not r["verified"]]
    return 1 if bad else 0


def _csv_text(results):
    """Return the rows of both sections as CSV text (nested fields flattened: ``model.ts``)."""
    import csv
    import io

    from ..measure.harness import _flat

    rows = [dict(section=s, **_flat(r)) for s in ("pingpong", "collectives") for r in results[s]]
    fields = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=fields)
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
