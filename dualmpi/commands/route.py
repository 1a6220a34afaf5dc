"""``dualmpi route``: the paper's hop-by-hop path between two nodes."""

from .common import format_table, load_topology, node_arg, print_json, topology_arg

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
    p.add_argument("src", type=node_arg, help="source node id")
    p.add_argument("dst", type=node_arg, help="destination node id")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=main)


def describe_route(topo, src, dst):
    """Return the route of ``src -> dst`` with addresses, hop count and shortest distance."""
    src, dst = topo.check_node(src), topo.check_node(dst)
    path = topo.route(src, dst)
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
        "shortest": hops == dist,
        "addresses": [topo.format_node(u) for u in path],
        "dimensions": dims,
    }


def main(args):
    """Print the route of ``args.src -> args.dst``; return the exit code."""
    topo = load_topology(args.spec)
    out = describe_route(topo, args.src, args.dst)
    if args.json:
        print_json(out)
        return 0
    rows = []
    for i, (u, addr) in enumerate(zip(out["path"], out["addresses"])):
        via = "" if i == 0 else f"dim {out['dimensions'][i - 1]}"
        rows.append((i, u, addr, via))
    print(format_table(rows, header=("hop", "node", "address", "via")))
    print(f"{out['hops']} hops (shortest distance {out['distance']})")
    return 0
