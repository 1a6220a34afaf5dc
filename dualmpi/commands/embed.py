"""``dualmpi embed``: rings, linear arrays, edge-disjoint Hamiltonian cycles, sub-dual-cubes and
the hypercube's emulation on the reduced hypercube, each checked link by link."""

from collections import Counter

from ..errors import DualmpiError
from ..resources import require_memory, require_time
from ..topology import DualCube, Hypercube, ReducedHypercube
from ..topology import hamiltonian as ham
from ..topology.hypercube_emulation import (
    HypercubeOnRH,
    average_dilation,
    max_dilation,
    theorem_dilations,
)
from . import embed_rh
from .common import format_table, load_topology, node_arg, print_json, topology_arg

__all__ = ["add_parser", "main", "embed_ring", "embed_array", "embed_cycles", "embed_split",
           "embed_hypercube", "check_resources"]

#: Peak bytes per node listed in the output (id, label, table row or JSON text), plus 4 bytes per
#: address bit: ``embed dualcube:r=10 --array 524288`` peaked at 311 MB (38 MB of it the interpreter).
NODE_BYTES = 600
#: Seconds per node listed: the same run took 2.7 s (measured on 2 busy cores).
NODE_SECONDS = 6e-6
#: Seconds per node and check of ``--split``: ``--split all`` on dualcube:r=7 took 3.25 s for
#: 6*6 choices x 2 kinds x 8192 nodes.
SPLIT_SECONDS = 6e-6
#: Seconds to decompose Q_k (k even) into k/2 Hamiltonian cycles by local search (measured:
#: Q_4 and Q_6 under a second, Q_8 57 s; larger k extrapolated at x100 per two dimensions).
DECOMPOSE_SECONDS = {4: 0.5, 6: 0.5, 8: 60.0}


def add_parser(sub):
    """Register the ``embed`` subcommand."""
    p = sub.add_parser(
        "embed",
        help="rings, linear arrays, Hamiltonian cycles and emulations, checked link by link",
        description="Embed a structure in SPEC and check that every edge of it is a link. "
        "Dual-cube and hypercube: --ring K (Theorems 4.1, 4.3 of Wu and Wu), --array K "
        "(Theorem 4.4), --cycles (Theorem 4.2, edge-disjoint Hamiltonian cycles), --split "
        "(Propositions 3.1-3.3, four DC_(r-1)). Reduced hypercube: --hypercube (Theorem 2.1 "
        "and Corollaries 2.1-2.2 of Sideras' thesis, the dilations of the hypercube's emulation), "
        "--ring (Hamiltonian, dilation 1), --torus AxB, --tree, --ccc (the 2^(k-n) CCC(2^n)): "
        "dilation, congestion and expansion next to the emulated hypercube's route. "
        "Exit code 1 when a check fails.",
        epilog="example: dualmpi embed dualcube:r=3 --ring 32 --gray 00,01,11,10",
    )
    p.add_argument("spec", type=topology_arg, help="topology spec, e.g. dualcube:r=3 or rh:k=5,n=2")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--ring", type=int, metavar="K", nargs="?", const=0,
                      help="a ring of K nodes (K even); on rh the Hamiltonian ring (K optional)")
    what.add_argument("--array", type=int, metavar="K", help="a linear array of K nodes")
    what.add_argument("--cycles", action="store_true",
                      help="floor((r-1)/2) edge-disjoint Hamiltonian cycles (dual-cube)")
    what.add_argument("--split", metavar="I[,J]|all",
                      help="the four DC_(r-1) with middle-field bit I and last-field bit J fixed "
                      "(J defaults to I; 'all' checks every choice)")
    what.add_argument("--hypercube", action="store_true",
                      help="the (k+2^n)-cube emulated on rh:k=K,n=N: dilations per edge")
    embed_rh.add_arguments(what)
    p.add_argument("--gray", metavar="CODES",
                   help="Gray code for the Hamiltonian cycle (Theorem 4.1), e.g. 00,10,11,01")
    p.add_argument("--node", type=node_arg, default=0,
                   help="node whose edges --hypercube lists (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=main)


# -- embeddings as dicts ---------------------------------------------------------------------------
def _labels(topo, nodes):
    """Return the paper's labels of ``nodes``: bit strings on the dual-cube, addresses otherwise."""
    if isinstance(topo, DualCube):
        return [ham.paper_string(topo, u) for u in nodes]
    return [topo.format_node(u) for u in nodes]


def _gray(topo, text):
    """Return the Gray code given with ``--gray`` for ``topo``, or None."""
    if text is None:
        return None
    if not isinstance(topo, DualCube) or topo.r < 2:
        raise DualmpiError("--gray applies to the Hamiltonian cycle of a dual-cube (r >= 2)")
    try:
        return ham.parse_gray_code(text, topo.half)
    except ValueError as exc:
        raise DualmpiError(str(exc)) from None


def _ring_nodes(topo, length, gray):
    """Return the ring and the name of its construction."""
    if gray is not None:
        if length != topo.num_nodes:
            raise DualmpiError("--gray builds the Hamiltonian cycle: use --ring "
                               f"{topo.num_nodes}")
        return ham.hamiltonian_cycle(topo, gray), "hamiltonian (Theorem 4.1)"
    how = ham.ring_construction(topo, length)
    label = {"hamiltonian": "hamiltonian (Theorem 4.1)", "cluster": "inside one cluster (Theorem 4.3)",
             "hypercube": "hypercube (Gray code / bipancyclic)"}.get(how, f"{how} (Theorem 4.3)")
    return ham.ring(topo, length), label


def _check_family(topo):
    """Raise unless ``topo`` is a dual-cube or a hypercube."""
    if not isinstance(topo, (DualCube, Hypercube)):
        raise DualmpiError(f"rings, arrays and cycles are embedded in dualcube and hypercube, "
                           f"not {topo.spec} (use --hypercube on rh)")


def embed_ring(topo, length, gray=None):
    """Return the ring of ``length`` nodes as a dict with ``nodes`` and ``links_ok``."""
    _check_family(topo)
    try:
        nodes, how = _ring_nodes(topo, length, gray)
    except ValueError as exc:
        raise DualmpiError(str(exc)) from None
    return {"spec": topo.spec, "embedding": "ring", "length": length, "construction": how,
            "nodes": nodes, "labels": _labels(topo, nodes), "links_ok": ham.is_ring(topo, nodes),
            "dilation": 1, "expansion": topo.num_nodes / length}


def embed_array(topo, length, gray=None):
    """Return the linear array of ``length`` nodes (a prefix of the Hamiltonian cycle)."""
    _check_family(topo)
    try:
        nodes = ham.linear_array(topo, length)
        if gray is not None:
            nodes = ham.hamiltonian_cycle(topo, gray)[:length]
    except ValueError as exc:
        raise DualmpiError(str(exc)) from None
    return {"spec": topo.spec, "embedding": "linear array", "length": length,
            "construction": "prefix of the Hamiltonian cycle (Theorem 4.4)", "nodes": nodes,
            "labels": _labels(topo, nodes), "links_ok": ham.is_linear_array(topo, nodes),
            "dilation": 1, "expansion": topo.num_nodes / length}


def embed_cycles(topo):
    """Return Theorem 4.2's edge-disjoint Hamiltonian cycles and the checks."""
    if not isinstance(topo, DualCube):
        raise DualmpiError(f"--cycles builds Theorem 4.2's cycles of a dual-cube, not {topo.spec}")
    try:
        cycles = ham.edge_disjoint_cycles(topo)
    except ValueError as exc:
        raise DualmpiError(str(exc)) from None
    edges = [ham.ring_edges(c) for c in cycles]
    hamiltonian = all(len(c) == topo.num_nodes and ham.is_ring(topo, c) for c in cycles)
    disjoint = all(not edges[a] & edges[b] for a in range(len(edges)) for b in range(a))
    return {"spec": topo.spec, "embedding": "edge-disjoint Hamiltonian cycles",
            "claimed": (topo.r - 1) // 2, "count": len(cycles), "hamiltonian": hamiltonian,
            "edge_disjoint": disjoint, "edges_per_node_used": 2 * len(cycles),
            "degree": topo.degree, "links_ok": hamiltonian and disjoint,
            "cycles": cycles, "labels": [_labels(topo, c) for c in cycles]}


def embed_split(topo, text):
    """Return the four parts of ``DC_r`` for ``--split I[,J]``, or every choice for ``all``."""
    if not isinstance(topo, DualCube) or topo.r < 2:
        raise DualmpiError(f"--split divides a dual-cube with r >= 2, not {topo.spec}")
    h = topo.half
    if text.strip() == "all":
        rows = []
        for i in range(1, h + 1):
            for j in range(1, h + 1):
                rows.append({"i": i, "j": j, **{
                    fields: all(ham.split_is_dualcube(topo, part)
                                for part in ham.split(topo, i, j, fields).values())
                    for fields in ("string", "ids")}})
        return {"spec": topo.spec, "embedding": "four DC_(r-1), every choice", "choices": rows,
                "string_ways": sum(r["string"] for r in rows),
                "ids_ways": sum(r["ids"] for r in rows),
                "proposition_3_2": h * h, "proposition_3_3": h, "links_ok": True}
    try:
        bits = [int(x) for x in text.split(",")]
        parts = ham.split(topo, *bits)
    except (ValueError, TypeError) as exc:
        raise DualmpiError(f"--split {text!r}: {exc}") from None
    checks = {f"{a}{b}": ham.split_is_dualcube(topo, nodes) for (a, b), nodes in parts.items()}
    return {"spec": topo.spec, "embedding": "four DC_(r-1)", "bits": bits,
            "parts": {f"{a}{b}": nodes for (a, b), nodes in parts.items()},
            "labels": {f"{a}{b}": _labels(topo, nodes) for (a, b), nodes in parts.items()},
            "is_dualcube": checks, "links_ok": all(checks.values())}


def embed_hypercube(topo, node=0):
    """Return the dilations of the (k+2^n)-cube emulated on RH(k, n), theorem against measured."""
    if not isinstance(topo, ReducedHypercube):
        raise DualmpiError(f"--hypercube emulates the hypercube on a reduced hypercube (rh:k=K,n=N), "
                           f"not {topo.spec}")
    node = topo.check_node(node)
    emu = HypercubeOnRH(topo)
    k, n = topo.k, topo.n
    paths = [emu.path(node, node ^ (1 << b)) for b in range(emu.guest.n)]
    histograms, links_ok = {}, True
    for u in range(topo.num_nodes):
        dims = [emu.path(u, u ^ (1 << b)) for b in range(emu.guest.n)]
        links_ok = links_ok and all(topo.is_link(x, y) for path in dims
                                    for x, y in zip(path, path[1:]))
        hist = tuple(sorted(Counter(len(path) - 1 for path in dims).items()))
        histograms[hist] = histograms.get(hist, 0) + 1
    measured = emu.measured()
    avg = average_dilation(k, n)
    return {
        "spec": topo.spec, "embedding": f"{emu.guest.spec} emulated (identity on nodes)",
        "guest": emu.guest.spec, "node": node,
        "theorem_2_1": {str(d): c for d, c in theorem_dilations(k, n).items()},
        "measured_per_node": [{str(d): c for d, c in hist} for hist in histograms],
        "same_at_every_node": len(histograms) == 1,
        "max_dilation": {"corollary_2_1": max_dilation(n), "measured": measured["max_dilation"]},
        "average_dilation": {"corollary_2_2": str(avg), "corollary_2_2_value": float(avg),
                             "measured": str(measured["average_dilation"]),
                             "measured_value": float(measured["average_dilation"])},
        "paths": [{"dimension": b + 1, "to": node ^ (1 << b), "dilation": len(path) - 1,
                   "path": path, "labels": _labels(topo, path)} for b, path in enumerate(paths)],
        "links_ok": links_ok,
    }


# -- printing ---------------------------------------------------------------------------------------
def _print_nodes(out):
    """Print a ring or array, one node per row."""
    print(f"{out['spec']}: {out['embedding']} of {out['length']} nodes, {out['construction']}")
    print(f"every edge a link: {'yes' if out['links_ok'] else 'NO'}; dilation 1, expansion "
          f"{out['expansion']:.6g}")
    print(format_table(((i, u, lab) for i, (u, lab) in enumerate(zip(out["nodes"], out["labels"]))),
                       header=("pos", "node", "address")))


def _print_cycles(out):
    """Print Theorem 4.2's cycles side by side."""
    print(f"{out['spec']}: {out['count']} edge-disjoint Hamiltonian cycles "
          f"(Theorem 4.2 claims floor((r-1)/2) = {out['claimed']}); Hamiltonian: "
          f"{'yes' if out['hamiltonian'] else 'NO'}, pairwise edge-disjoint: "
          f"{'yes' if out['edge_disjoint'] else 'NO'}; they use {out['edges_per_node_used']} of "
          f"{out['degree']} links per node")
    if out["cycles"]:
        rows = [(i, *(labels[i] for labels in out["labels"])) for i in range(len(out["cycles"][0]))]
        print(format_table(rows, header=("pos", *(f"cycle {c + 1}" for c in range(out["count"])))))


def _print_split(out):
    """Print the four sub-dual-cubes or the table of every choice."""
    if "choices" in out:
        print(f"{out['spec']}: fixing middle-field bit i and last-field bit j of the paper's string "
              f"gives four DC_(r-1) in {out['string_ways']} ways (Proposition 3.2 says "
              f"{out['proposition_3_2']}, Proposition 3.3 says {out['proposition_3_3']}); fixing "
              f"cluster-id bit i and node-id bit j in both classes: {out['ids_ways']} ways")
        print(format_table(((c["i"], c["j"], "yes" if c["string"] else "no",
                             "yes" if c["ids"] else "no") for c in out["choices"]),
                           header=("i", "j", "string bits", "id bits")))
        return
    print(f"{out['spec']}: four parts with string bits {out['bits']} fixed")
    for key, labels in out["labels"].items():
        ok = "DC_(r-1): yes" if out["is_dualcube"][key] else "DC_(r-1): NO"
        print(f"part {key} ({ok}): {', '.join(labels)}")


def _print_hypercube(out):
    """Print the dilation table of the hypercube emulation."""
    print(f"{out['spec']}: {out['embedding']}")
    theorem = out["theorem_2_1"]
    measured = out["measured_per_node"][0]
    rows = [(d, theorem.get(d, 0), measured.get(d, 0)) for d in sorted(
        set(theorem) | set(measured), key=int)]
    print(format_table(rows, header=("dilation", "edges per node (Thm 2.1)", "measured")))
    print(f"same at every node: {'yes' if out['same_at_every_node'] else 'NO'}")
    mx, avg = out["max_dilation"], out["average_dilation"]
    print(f"max dilation: Corollary 2.1 {mx['corollary_2_1']}, measured {mx['measured']}")
    print(f"average dilation: Corollary 2.2 {avg['corollary_2_2']} = {avg['corollary_2_2_value']:.4f}"
          f", measured {avg['measured']} = {avg['measured_value']:.4f}")
    print(f"every path of links: {'yes' if out['links_ok'] else 'NO'}")
    print(format_table(((p["dimension"], p["dilation"], " ".join(p["labels"])) for p in out["paths"]),
                       header=("dim", "dilation", f"path from node {out['node']}")))


def _decompose_seconds(k):
    """Return the estimated seconds of :func:`~dualmpi.topology.hamiltonian.hypercube_hamiltonian_cycles`."""
    k -= k % 2  # odd k doubles the cycles of Q_(k-1)
    if k < 4:
        return 0.0
    if k in DECOMPOSE_SECONDS:
        return DECOMPOSE_SECONDS[k]
    return DECOMPOSE_SECONDS[8] * 100.0 ** ((k - 8) / 2)


def check_resources(topo, args):
    """Estimate the memory and time of the requested embedding; raise ResourceError if too much.

    Only the output is large: a ring or array of K nodes costs K rows, ``--cycles``
    ``floor((r-1)/2)`` rows per node (after a Hamiltonian decomposition of the cluster
    cube), ``--split`` every node once per choice, ``--hypercube`` every node's paths.
    """
    bits = max(topo.num_nodes - 1, 1).bit_length()
    per_node = NODE_BYTES + 4 * bits
    p = topo.num_nodes
    what = f"embed {topo.spec}"
    if args.ring is not None or args.array is not None:
        k = args.ring if args.ring is not None else args.array
        if not 0 < k <= p:
            return  # the construction refuses it with its own message
        flag = "--ring" if args.ring is not None else "--array"
        what = f"{what} {flag} {k}"
        require_memory(k * per_node, what)
        require_time(k * NODE_SECONDS, what, hint="ask for fewer nodes")
    elif args.cycles and isinstance(topo, DualCube):
        count = (topo.r - 1) // 2
        what = f"{what} --cycles ({count} cycles of {p:,} nodes)"
        require_memory(count * p * per_node, what)
        require_time(_decompose_seconds(topo.half) + count * p * NODE_SECONDS, what,
                     hint=f"the Hamiltonian decomposition of Q_{topo.half} and the cycles take "
                     "that long; try r <= 10")
    elif args.split is not None and isinstance(topo, DualCube) and topo.r >= 2:
        choices = 2 * topo.half ** 2 if args.split.strip() == "all" else 1
        what = f"{what} --split {args.split.strip()}"
        require_memory(p * (per_node + 100 * topo.degree), what)
        require_time(choices * p * (SPLIT_SECONDS + NODE_SECONDS), what, hint="try a smaller r")
    elif args.hypercube and isinstance(topo, ReducedHypercube):
        dims = topo.k + (1 << topo.n)
        what = f"{what} --hypercube"
        require_memory(p * per_node, what)
        require_time(p * dims * NODE_SECONDS * 4, what, hint="try a smaller network")


def main(args):
    """Build and print the requested embedding; return 0 when every check passed."""
    topo = load_topology(args.spec)
    check_resources(topo, args)
    if args.gray is not None and args.ring is None and args.array is None:
        raise DualmpiError("--gray goes with --ring or --array")
    gray = _gray(topo, args.gray)
    if args.ring == 0 and not isinstance(topo, ReducedHypercube):
        raise DualmpiError("--ring K: give the ring's length K (optional on rh only)")
    rh = embed_rh.dispatch(topo, args) if args.gray is None else None
    if rh is not None:
        out, show = rh
    elif args.ring is not None:
        out, show = embed_ring(topo, args.ring, gray), _print_nodes
    elif args.array is not None:
        out, show = embed_array(topo, args.array, gray), _print_nodes
    elif args.cycles:
        out, show = embed_cycles(topo), _print_cycles
    elif args.split is not None:
        out, show = embed_split(topo, args.split), _print_split
    else:
        out, show = embed_hypercube(topo, args.node), _print_hypercube
    if args.json:
        print_json(out)
    else:
        show(out)
    return 0 if out["links_ok"] else 1

