"""``dualmpi embed rh:...``: the reduced hypercube's ring, tori, binary tree and CCC copies, each
with dilation, congestion and expansion, next to the same structure through the emulated hypercube."""

from ..errors import DualmpiError
from ..topology import ReducedHypercube
from ..topology import rh_embeddings as rhe
from ..topology.hamiltonian import gray_code
from .common import format_table

__all__ = ["add_arguments", "wants", "dispatch", "embed_rh_ring", "embed_rh_torus",
           "embed_rh_tree", "embed_rh_ccc"]

#: Largest RH whose node lists are put in the output (the metrics are computed up to the limits).
LIST_LIMIT = 4096
#: Largest RH each embedding is built for: the ring, tori and CCC copies are lists of node ids
#: (RH(4,4), 2^20 nodes: about 3 s); the tree routes every edge (4,096 nodes: under a second).
LIMITS = {"ring": 1 << 22, "torus": 1 << 20, "tree": 1 << 16, "ccc": 1 << 22}


def add_arguments(what):
    """Add ``--torus``, ``--tree`` and ``--ccc`` to the mutually exclusive group ``what``."""
    what.add_argument("--torus", metavar="AxB",
                      help="rh: an A x B torus (A*B = nodes, powers of 2); dilation 1 when the "
                      "shape allows")
    what.add_argument("--tree", action="store_true",
                      help="rh: the complete binary tree of 2^(k+2^n) - 1 nodes (in-order)")
    what.add_argument("--ccc", action="store_true",
                      help="rh:k=K,n=N (N >= 2): the 2^(K-N) disjoint CCC(2^N), dilation 1")


def wants(args):
    """Return True when ``args`` ask for one of this module's embeddings (``--ring`` on rh too)."""
    return bool(getattr(args, "torus", None) or getattr(args, "tree", False)
                or getattr(args, "ccc", False))


def dispatch(topo, args):
    """Return ``(out, show)`` for an RH embedding, or None when ``args`` ask for another one."""
    if isinstance(topo, ReducedHypercube):
        what = ("ring" if args.ring is not None else "torus" if args.torus else "tree" if args.tree
                else "ccc" if args.ccc else None)
        if what and topo.num_nodes > LIMITS[what]:
            raise DualmpiError(f"embed {topo.spec} --{what}: {topo.num_nodes:,} nodes, more than the "
                               f"{LIMITS[what]:,} this embedding is built and checked for")
    if not isinstance(topo, ReducedHypercube):
        if wants(args):
            flag = "--torus" if args.torus else "--tree" if args.tree else "--ccc"
            raise DualmpiError(f"{flag} is embedded in a reduced hypercube (rh:k=K,n=N), "
                               f"not {topo.spec}")
        return None
    if args.ring is not None:
        return embed_rh_ring(topo, args.ring or None), _print
    if args.torus:
        return embed_rh_torus(topo, args.torus), _print
    if args.tree:
        return embed_rh_tree(topo), _print
    if args.ccc:
        return embed_rh_ccc(topo), _print
    return None


def _out(topo, embedding, construction, metrics, via, **extra):
    """Return the common dict of an RH embedding with the emulated-hypercube route's metrics."""
    keep = ("dilation", "average_dilation", "congestion", "links_ok")
    return {"spec": topo.spec, "embedding": embedding, "construction": construction, **metrics,
            "via_hypercube": {k: via[k] for k in keep}, **extra,
            "links_ok": metrics["links_ok"] and via["links_ok"]}


def embed_rh_ring(topo, length=None):
    """Return the Hamiltonian ring of RH(k, n) (dilation 1) against the Gray-code ring emulated.

    >>> out = embed_rh_ring(ReducedHypercube(3, 2))
    >>> out["dilation"], out["via_hypercube"]["dilation"], out["hamiltonian"], out["links_ok"]
    (1, 5, True, True)
    """
    if length is not None and length != topo.num_nodes:
        raise DualmpiError(f"{topo.spec}: the ring embedded in RH is Hamiltonian: --ring "
                           f"{topo.num_nodes}")
    ring = rhe.rh_ring(topo)
    p = len(ring)
    metrics = rhe.edge_metrics(topo, {e: list(e) for e in zip(ring, ring[1:] + ring[:1])}, p)
    gray = gray_code(topo.bits)
    via = rhe.via_hypercube(topo, list(zip(gray, gray[1:] + gray[:1])), p)
    small = p <= LIST_LIMIT
    return _out(topo, "ring", "Hamiltonian cycle: the RH(n,n) ring doubled over the k-n node bits",
                metrics, via, length=p, hamiltonian=len(set(ring)) == topo.num_nodes,
                nodes=ring if small else None,
                labels=[topo.format_node(u) for u in ring] if small else None)


def embed_rh_torus(topo, text):
    """Return the A x B torus of ``--torus AxB`` with its metrics.

    >>> embed_rh_torus(ReducedHypercube(3, 1), "8x4")["dilation"]
    1
    """
    try:
        a, b = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise DualmpiError(f"--torus {text!r}: expected AxB, e.g. 8x4") from None
    grid, paths, how = rhe.rh_torus(topo, a, b)
    metrics = rhe.edge_metrics(topo, paths, a * b)
    cube = rhe.gray_torus(a, b)
    via = rhe.via_hypercube(topo, [(cube[x][y], cube[z][w]) for (x, y), (z, w) in paths], a * b)
    return _out(topo, f"{a}x{b} torus", how, metrics, via, shape=[a, b],
                one_to_one=len({u for row in grid for u in row}) == a * b,
                dilation_1_shapes=[f"{x}x{y}" for x, y in rhe.torus_shapes(topo)],
                grid=grid if a * b <= LIST_LIMIT else None)


def embed_rh_tree(topo):
    """Return the in-order complete binary tree with its metrics and the formula's dilation.

    >>> out = embed_rh_tree(ReducedHypercube(3, 1))
    >>> out["dilation"], out["dilation_formula"], out["congestion"]
    (4, 4, 3)
    """
    nodes, paths = rhe.rh_tree(topo)
    metrics = rhe.edge_metrics(topo, paths, len(nodes))
    via = rhe.via_hypercube(topo, list(paths), len(nodes))
    return _out(topo, f"complete binary tree of {len(nodes)} nodes",
                "in-order numbering on the node ids, shortest RH routes", metrics, via,
                root=topo.num_nodes // 2, dilation_formula=rhe.tree_dilation(topo.n))


def embed_rh_ccc(topo):
    """Return the 2^(k-n) disjoint CCC(2^n) copies and their checks.

    >>> out = embed_rh_ccc(ReducedHypercube(3, 2))
    >>> out["guest"], out["copies"], out["dilation"], out["disjoint"]
    ('ccc:n=4', 2, 1, True)
    """
    guest, maps = rhe.ccc_copies(topo)
    paths = {}
    for c, row in enumerate(maps):
        for u, v in guest.links():
            paths[(c, u, v)] = [row[u], row[v]]
    metrics = rhe.edge_metrics(topo, paths, guest.num_nodes * len(maps))
    disjoint = len({u for row in maps for u in row}) == sum(len(row) for row in maps)
    return {"spec": topo.spec, "embedding": f"{len(maps)} disjoint {guest.spec}",
            "construction": "subblocks along a Gray code of Q_n are the rings, set-2 links the cube "
            "links (Sideras, Section 2.2)", "guest": guest.spec, "copies": len(maps),
            "disjoint": disjoint, **metrics, "links_ok": metrics["links_ok"] and disjoint}


def _print(out):
    """Print an RH embedding's metrics against the emulated-hypercube route."""
    print(f"{out['spec']}: {out['embedding']} ({out['construction']})")
    via = out.get("via_hypercube") or {}
    rows = [("dilation", out["dilation"], via.get("dilation", "")),
            ("average dilation", f"{out['average_dilation']:.4g}",
             f"{via['average_dilation']:.4g}" if via else ""),
            ("congestion", out["congestion"], via.get("congestion", "")),
            ("expansion", f"{out['expansion']:.6g}", f"{out['expansion']:.6g}" if via else "")]
    print(format_table(rows, header=("", "this embedding", "through the emulated hypercube")))
    for key in ("dilation_formula", "dilation_1_shapes", "copies", "disjoint", "hamiltonian"):
        if key in out:
            print(f"{key}: {out[key]}")
    print(f"every edge a path of links: {'yes' if out['links_ok'] else 'NO'}")
