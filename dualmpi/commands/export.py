"""``dualmpi export``: a network as networkx JSON, GraphML, a SimGrid platform or a BookSim file."""

import sys

from ..export import FORMATS, SIMGRID_FULL_ROUTES, export
from .common import check_output_path, load_topology, topology_arg, write_output

__all__ = ["add_parser", "main"]


def add_parser(sub):
    """Register the ``export`` subcommand."""
    formats = "; ".join(f"{name}: {desc}" for name, (_, desc) in FORMATS.items())
    p = sub.add_parser(
        "export",
        help="write a network for networkx, GraphML tools, SimGrid or BookSim",
        description="Write SPEC's nodes (with their addresses) and links (with their dimension) "
        f"in another tool's format ({formats}). The SimGrid platform has one host per node, one "
        "full-duplex link per link and, up to "
        f"{SIMGRID_FULL_ROUTES} nodes, dualmpi's route for every ordered pair (larger networks: "
        "one route per link, SimGrid routes along shortest paths). BookSim computes its own "
        "minimal routes.",
        epilog="example: dualmpi export dualcube:r=3 --format simgrid -o dualcube_r3.xml",
    )
    p.add_argument("spec", type=topology_arg, help="topology spec, e.g. dualcube:r=3")
    p.add_argument("--format", "-f", required=True, choices=tuple(FORMATS), dest="fmt",
                   help="output format")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write to FILE instead of standard output")
    p.add_argument("--bandwidth", default="1GBps",
                   help="simgrid: every link's bandwidth, with SimGrid units (default 1GBps)")
    p.add_argument("--latency", default="1us",
                   help="simgrid: every link's latency, with SimGrid units (default 1us)")
    p.set_defaults(func=main)


def main(args):
    """Write the export; return the exit code."""
    topo = load_topology(args.spec)
    check_output_path(args.output, "-o")
    options = {}
    if args.fmt == "simgrid":
        options = {"bandwidth": args.bandwidth, "latency": args.latency}
    text = export(topo, args.fmt, **options)
    if not args.output:
        sys.stdout.write(text)
        return 0
    write_output(args.output, text, "-o")
    print(f"wrote {topo.spec} ({topo.num_nodes} nodes) as {args.fmt} to {args.output}")
    return 0
