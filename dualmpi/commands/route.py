"""``dualmpi route``: the paper's hop-by-hop path between two nodes."""

from ..errors import DualmpiError
from .common import format_table, load_topology, node_arg, print_json, resolve_node, topology_arg

__all__ = ["add_parser", "main", "describe_route"]


def add_parser(sub):
    """Register the ``route`` subcommand."""
    p = sub.add_parser(
        "route",
        help="the paper's route between two nodes, hop by hop",
        description="Print the route the paper's point-to-point routing gives from SRC to DST, "
        "with each node's address and each hop's link type, and whether it is shortest.",
        epilog="example: dualmpi route metacube:k=2,m=2 0 1023 --json",
    )
    p.add_argument("spec", type=topology_arg, help="topology spec, e.g. metacube:k=2,m=2")
    p.add_argument("src", type=node_arg, help="source node id (or address, e.g. \"(0,0,0,0)\")")
    p.add_argument("dst", type=node_arg, help="destination node id (or address)")
    p.add_argument("--variant", choices=("corrected", "as-printed"), default="corrected",
                   help="as-printed: the paper's algorithm as printed where dualmpi corrects it "
                   "(hierarchical dual-net Algorithm 1; docs/errata.md)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=main)


def describe_route(topo, src, dst, variant="corrected"):
    """Return the route of ``src -> dst`` with addresses, hop count and shortest distance."""
    src, dst = topo.check_node(src), topo.check_node(dst)
    if variant == "as-printed" and not hasattr(topo, "route_as_printed"):
        raise DualmpiError(f"no as-printed route variant for {topo.spec}")
    path = topo.route_as_printed(src, dst) if variant == "as-printed" else topo.route(src, dst)
    dims = [topo.dimension_of(a, b) for a, b in zip(path, path[1:])]
    hops = len(path) - 1
    dist = topo.distance(src, dst)
    return {
        "spec": topo.spec,
        "src": src,
        "dst": dst,
        "path": path,
        "hops": hops,
        "distance": dist,
        "shortest": None if dist is None else hops == dist,
        "addresses": [topo.format_node(u) for u in path],
        "dimensions": dims,
    }


def main(args):
    """Print the route of ``args.src -> args.dst``; return the exit code."""
    topo = load_topology(args.spec)
    out = describe_route(topo, resolve_node(topo, args.src), resolve_node(topo, args.dst), args.variant)
    if args.json:
        print_json(out)
        return 0
    rows = []
    for i, (u, addr) in enumerate(zip(out["path"], out["addresses"])):
        via = "" if i == 0 else f"dim {out['dimensions'][i - 1]}"
        rows.append((i, u, addr, via))
    print(format_table(rows, header=("hop", "node", "address", "via")))
    known = "unknown: too large for BFS" if out["distance"] is None else out["distance"]
    print(f"{out['hops']} hops (shortest distance {known})")
    return 0
