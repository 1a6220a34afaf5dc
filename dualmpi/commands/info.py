"""``dualmpi info``: a network's properties, checked by breadth-first search when small enough."""

from ..topology.analysis import BFS_LIMIT, measured_properties
from ..topology.checks import ORBIT_BUDGET, bisection_report, figure_sources, orbit_measure
from .common import format_table, load_topology, print_json, topology_arg

__all__ = ["add_parser", "main", "info"]

_CHECKED = ("links", "diameter", "avg_distance")


def add_parser(sub):
    """Register the ``info`` subcommand."""
    p = sub.add_parser(
        "info",
        help="properties of a network (nodes, degree, links, diameter, ...)",
        description="Print a network's properties from the papers' formulas; networks of up to "
        f"{BFS_LIMIT} nodes are also checked by breadth-first search from every node, larger "
        "ones (rh, ccc, hdn, rdn) by one BFS per orbit of a group of automorphisms (each "
        "checked) within --bfs-budget; diameter_source etc. say whether a figure is 'bfs' or "
        "'formula'. HDN/RDN: the paper's bisection width N/4 next to the best balanced cut "
        "found (an upper bound) and the exact width up to 40 nodes.",
        epilog="example: dualmpi info metacube:k=2,m=3 --json",
    )
    p.add_argument("spec", type=topology_arg, help="topology spec, e.g. dualcube:r=3")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--bfs-budget", type=int, default=ORBIT_BUDGET, metavar="N",
                   help=f"largest sources x nodes of the exact BFS by orbits (default {ORBIT_BUDGET})")
    p.set_defaults(func=main)


def info(topo, bfs_budget=ORBIT_BUDGET):
    """Return the property dict of ``topo``, with the BFS verdict and the source of each figure."""
    out = topo.properties()
    if out.get("bisection_width") is None:
        out.pop("bisection_width", None)
    p = topo.num_nodes
    out["hypercube_links"] = p.bit_length() - 1 and (p * (p.bit_length() - 1)) // 2
    out["reference"] = topo.reference
    if p <= BFS_LIMIT:
        measured, method = measured_properties(topo), "all pairs"
        measured.pop("distance_matrix")
    else:
        measured, method = orbit_measure(topo, bfs_budget)
    if measured is not None:
        # a property without a closed form (None) is reported as measured, not checked
        unknown = [key for key in _CHECKED if out.get(key) is None]
        out.update({key: measured[key] for key in unknown})
        ok = measured["connected"] and all(
            abs(measured[key] - out[key]) < 1e-9 for key in _CHECKED if key not in unknown
        )
        if unknown:
            out["bfs_only"] = unknown
        out["bfs_verified"] = ok
        out["bfs_method"] = method
        if not ok:
            out["bfs"] = {k: measured[k] for k in (*_CHECKED, "connected")}
    else:
        out["bfs_verified"] = False
        out["bfs_skipped"] = f"more than {BFS_LIMIT} nodes; {method}"
    out.update(figure_sources(out))
    out.update(bisection_report(topo))
    out.update(_avg_distances(out.get("avg_distance"), p))
    return out


def _avg_distances(avg, p):
    """Return both average-distance conventions from the papers' ``avg_distance``.

    The papers divide the distance sum from a node by p (the node itself counted, at
    distance 0); networkx's ``average_shortest_path_length`` divides by p - 1.

    >>> _avg_distances(2.5, 8)
    {'avg_distance_over_p': 2.5, 'avg_distance_over_p_minus_1': 2.857142857142857}
    """
    if avg is None:
        return {"avg_distance_over_p": None, "avg_distance_over_p_minus_1": None}
    return {"avg_distance_over_p": avg,
            "avg_distance_over_p_minus_1": avg * p / (p - 1) if p > 1 else None}


def main(args):
    """Print the properties of ``args.spec``; return the exit code."""
    out = info(load_topology(args.spec), args.bfs_budget)
    if args.json:
        print_json(out)
        return 0
    rows = [(k, _fmt(v)) for k, v in out.items() if k not in ("spec", "reference", "bfs")]
    print(f"{out['spec']}  [{out['reference']}]")
    print(format_table(rows))
    if "bfs" in out:
        print("BFS measured:", out["bfs"])
    return 0


def _fmt(value):
    """Format a property value for the table."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
