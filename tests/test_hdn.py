"""The hierarchical dual-net HDN(B, k, S), the recursive dual-net RDN and product graphs: specs,
the construction (isomorphisms with the dual-construction and the dual-cube), the paper's Tables 1,
3 and 4, the diameter against BFS, Algorithm 1 (routing) and Algorithm 2 (broadcast)."""

import math

import numpy as np
import pytest

from dualmpi.cli import main
from dualmpi.collectives import build_schedule, paper_steps
from dualmpi.collectives.hdn_tree import broadcast_rounds, theorem3_steps
from dualmpi.commands.info import info
from dualmpi.errors import DualmpiError, NodeError, SpecError
from dualmpi.engine import run_inprocess
from dualmpi.topology import HDN, RDN, DualCube, ProductGraph, from_spec, parse_spec
from dualmpi.topology.analysis import bfs_summary, measured_properties, neighbor_table
from dualmpi.topology.product import Factor

#: The paper's example network (Section 4): B = C_2 x C_3 x C_5, SN^1 = 2x3, SN^2 = 3x5.
EXAMPLE = "hdn:base=2x3x5,k=2,s=2x3/3x5"

#: Small networks of every shape: levels 1-3, rings, complete graphs, hypercube factors,
#: super-nodes nested (SN^k inside SN^(k-1)), disjoint, overlapping, empty and whole.
SMALL = [
    "hdn:base=2x3x5,k=1,s=2x3",
    "hdn:base=2x3x5,k=1,s=30",
    "hdn:base=3xk4,k=1,s=k4",
    "hdn:base=2,k=2,s=1/2",
    "hdn:base=2x2,k=2,s=2/@2",
    "hdn:base=2x2,k=2,s=2x2/2",
    "hdn:base=2x3,k=2,s=3/2x3",
    "hdn:base=4,k=2,s=4/4",
    "hdn:base=5,k=2,s=5/5",
    "hdn:base=2,k=3,s=2/2/2",
    "rdn:base=3,k=1",
    "rdn:base=2,k=2",
]


def run_json(capsys, *argv):
    """Run ``dualmpi argv --json`` in-process; return the parsed JSON object."""
    import json

    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# -- specs -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, canonical", [
    ("hdn:base=2x3x5,k=2,s=6/15", EXAMPLE),
    ("HDN: base = 2X3X5 , k=2, s=2x3/3x5", EXAMPLE),
    ("hdn:base=c2xc3xc5,k=1,s=@1x@2", "hdn:base=2x3x5,k=1,s=2x3"),
    ("hdn:base=2x2,k=2,s=@2/2", "hdn:base=2x2,k=2,s=@2/2"),
    ("hdn:base=q3,k=1,s=4", "hdn:base=q3,k=1,s=2x2"),
    ("hdn:base=k4x5,k=1,s=1", "hdn:base=k4x5,k=1,s=1"),
    ("rdn:base=q2,k=1", "rdn:base=q2,k=1"),
    ("product:base=10x10x10", "product:base=10x10x10"),
])
def test_spec_canonical_round_trip(spec, canonical):
    """Text parameters are parsed by the class; the canonical spec parses back to the same network."""
    topo = from_spec(spec)
    assert topo.spec == canonical
    assert from_spec(topo.spec) == topo
    assert parse_spec(canonical)[1]["base"] == canonical.split("base=")[1].split(",")[0]


@pytest.mark.parametrize("spec, words", [
    ("hdn:base=2x3x5,k=2,s=6", ["s=6 names 1 super-node", "k=2"]),
    ("hdn:base=2x3x5,k=1,s=7", ["no sub-product", "7 nodes"]),
    ("hdn:base=2x3x4x6,k=1,s=12", ["ambiguous", "2x6 or 3x4"]),
    ("hdn:base=2x3,k=1,s=2x2", ["no unused factor 2"]),
    ("hdn:base=2x3,k=1,s=k3", ["no unused factor k3"]),
    ("hdn:base=2x3,k=1,s=@1x@1", ["names factor 1 twice"]),
    ("hdn:base=2x3,k=1,s=@3", ["bad super-node term"]),
    ("hdn:base=2xz,k=1,s=1", ["bad factor 'z'"]),
    ("hdn:base=0,k=1,s=1", ["at least 1 node"]),
    ("hdn:base=2x3,k=0,s=1", ["k=0 out of range"]),
    ("hdn:base=2x3,k=x,s=1", ["malformed parameter", "key=integer or base=text or s=text"]),
    ("hdn:base=2x3,k=1", ["missing parameter s", "hdn:base=BASE,k=K,s=S"]),
    ("hdn:base=30,k=4,s=1/1/1/1", ["too many"]),
    ("rdn:base=2,k=1,s=1", ["unknown parameter s"]),
    ("product:base=", ["malformed parameter"]),
])
def test_spec_errors(spec, words):
    """Bad HDN specs raise one-line SpecErrors that name the problem."""
    with pytest.raises(SpecError) as exc:
        from_spec(spec)
    assert "\n" not in str(exc.value)
    for word in words:
        assert word in str(exc.value)


# -- product graphs --------------------------------------------------------------------------------
@pytest.mark.parametrize("base", ["2x3x5", "1x4", "k5x3", "q4", "6x7", "2xk3xq2"])
def test_product_formulas_match_bfs(base):
    """Links, diameter, average distance of B_1 x ... x B_r are sums over the factors."""
    topo = ProductGraph(base)
    bfs, f = measured_properties(topo), topo.formulas()
    assert bfs["connected"] and (f["links"], f["diameter"]) == (bfs["links"], bfs["diameter"])
    assert f["avg_distance"] == pytest.approx(bfs["avg_distance"], abs=1e-12)
    dist = bfs["distance_matrix"]
    p = topo.num_nodes
    assert all(len(topo.route(u, v)) - 1 == dist[u, v] for u in range(p) for v in range(0, p, 3))


@pytest.mark.parametrize("factor", [Factor(kind, a) for kind in "ck" for a in range(1, 10)])
def test_factor_broadcast_is_one_port_and_complete(factor):
    """A ring broadcasts in ceil(a/2) one-port steps, K_a in ceil(log2 a); every send is a link."""
    have = {0}
    for pairs in factor.bcast_rounds():
        senders, receivers = [u for u, _ in pairs], [v for _, v in pairs]
        assert len(set(senders)) == len(senders) and set(senders) <= have
        assert not have & set(receivers) and len(set(receivers)) == len(receivers)
        assert all(factor.distance(u, v) == 1 for u, v in pairs)
        have |= set(receivers)
    assert have == set(range(factor.size)) and len(factor.bcast_rounds()) == factor.bcast_steps
    assert factor.bcast_steps >= math.ceil(math.log2(factor.size)) if factor.size > 1 else True


# -- the construction --------------------------------------------------------------------------------
def _torus_adjacency(sizes):
    """Return the neighbour sets of the torus C_a1 x ... x C_ar (first factor most significant)."""
    p = math.prod(sizes)
    weights = [math.prod(sizes[j + 1:]) for j in range(len(sizes))]
    adj = []
    for u in range(p):
        xs = [(u // w) % a for w, a in zip(weights, sizes)]
        adj.append({u + (((x + d) % a) - x) * w for x, w, a in zip(xs, weights, sizes) for d in (1, -1)
                    if a > 1} - {u})
    return adj


def _dual_construction(adj):
    """Figure 1: 2n copies of G; node i of cluster j of class 0 joins node j of cluster i of class 1."""
    n = len(adj)
    out = []
    for c in range(2):
        for j in range(n):
            for i in range(n):
                out.append({(c * n + j) * n + v for v in adj[i]} | {((1 - c) * n + i) * n + j})
    return out


@pytest.mark.parametrize("sizes, k", [
    ((2,), 1), ((2,), 2), ((3,), 2), ((2, 3), 1), ((4,), 1), ((2, 2), 2), ((5,), 1),
])
def test_rdn_is_the_recursive_dual_construction(sizes, k):
    """RDN(B, k) and HDN(B, k, 1/.../1) are B dual-constructed k times, node for node."""
    adj = _torus_adjacency(sizes)
    for _ in range(k):
        adj = _dual_construction(adj)
    base = "x".join(map(str, sizes))
    for topo in (RDN(base, k), HDN(base, k, "/".join(["1"] * k))):
        assert topo.num_nodes == len(adj) == (2 * math.prod(sizes)) ** (2**k) // 2
        table = neighbor_table(topo)
        assert all(set(table[u].tolist()) == adj[u] for u in range(topo.num_nodes))


@pytest.mark.parametrize("r", [1, 2, 3, 4, 5])
def test_dual_cube_is_rdn_of_hypercube(r):
    """F_r = RDN(Q_(r-1), 1) under (c, U, X) -> class c, part II / part I = (U, X) or (X, U)."""
    rdn = RDN(f"q{r - 1}" if r > 1 else "1", 1)
    cube = DualCube(r)
    n = 1 << (r - 1)

    def phi(u):
        c, cluster, node = u // (n * n), (u // n) % n, u % n
        return (c << (2 * r - 2)) | ((cluster << (r - 1)) | node if c == 0 else (node << (r - 1)) | cluster)

    image = [phi(u) for u in range(rdn.num_nodes)]
    assert sorted(image) == list(range(cube.num_nodes))
    edges = {frozenset((image[u], image[v])) for u, v in rdn.links()}
    assert edges == {frozenset(e) for e in cube.links()}


@pytest.mark.parametrize("spec", SMALL + [EXAMPLE])
def test_regular_symmetric_simple(spec):
    """Degree d_0 + k at every node, links symmetric, no loops or parallel links, is_link agrees."""
    topo = from_spec(spec)
    table = neighbor_table(topo)
    nodes = np.arange(topo.num_nodes)
    assert table.shape == (topo.num_nodes, topo.d0 + topo.k)
    assert (table != nodes[:, None]).all()
    assert all(len(set(row)) == len(row) for row in table.tolist())
    for i in range(table.shape[1]):
        assert (table[table[:, i]] == nodes[:, None]).any(axis=1).all()
    u = topo.num_nodes // 3
    assert all(topo.is_link(u, v) for v in topo.neighbors(u))


def test_cross_edge_and_supernode_of_the_example():
    """Level-2 cross-edge (C,U,SN,N) <-> (1-C,SN,U,N); each super-node SN^2 is a 3 x 5 torus of B."""
    h = from_spec(EXAMPLE)
    cross = neighbor_table(h)[:, h.d0 + 1]
    for u in range(0, h.num_nodes, 97):
        c, cl, sn, nd = h.address(u)
        assert h.address(int(cross[u])) == (1 - c, sn, cl, nd)
    torus = ProductGraph("3x5")
    for sn in (0, 7, 19):
        members = [h.parse_address(f"(1,19,{sn},{x})") for x in range(15)]
        inside = {(a, b) for a in range(15) for b in range(15) if h.is_link(members[a], members[b])}
        assert inside == {(a, b) for a in range(15) for b in torus.neighbors(a)}


# -- the re-indexing (Table 4) -----------------------------------------------------------------------
def test_reindexing_table4():
    """(SN^2, N^2) -> (C^1, U^1, SN^1, N^1) by moving coordinates (Section 4's text).

    Table 4 prints (19,0) -> (1,4,2,3) and (0,14) -> (0,0,2,2): the serial numbers kept
    (19*15 + 0 = 285 = 1*150 + 4*30 + 2*6 + 3), which contradicts the text and would not
    make SN^2 a 3 x 5 torus (docs/errata.md, H3).
    """
    h = from_spec(EXAMPLE)
    ours = {(0, 0): (0, 0, 0, 0), (19, 0): (1, 4, 0, 3), (0, 14): (0, 0, 4, 2), (19, 14): (1, 4, 4, 5)}
    printed = {(0, 0): (0, 0, 0, 0), (19, 0): (1, 4, 2, 3), (0, 14): (0, 0, 2, 2), (19, 14): (1, 4, 4, 5)}
    for (sn, nd), want in ours.items():
        assert h.address(h.parse_address(f"(0,0,{sn},{nd})"), level=1) == want
        serial = sn * 15 + nd
        assert printed[(sn, nd)] == (serial // 150, serial // 30 % 5, serial // 6 % 5, serial % 6)
    # the printed rule's super-node 19 = level-1 serials 285..299 of cluster (1,4): not a 3 x 5 torus
    level1 = from_spec("hdn:base=2x3x5,k=1,s=2x3")
    members = range(285, 300)
    degrees = {sum(level1.is_link(a, b) for b in members) for a in members}
    assert {level1.address(a)[2] for a in members} == {2, 3, 4} and degrees != {4}


# -- Table 1, Table 3, Theorem 1 -----------------------------------------------------------------------
TABLE1_K1 = {1: 1800, 2: 900, 3: 600, 5: 360, 6: 300, 10: 180, 15: 120, 30: 60}
TABLE1_K2 = {  # s1 -> row over s2 = 1, 2, 3, 5, 6, 10, 15, 30
    1: [6480000, 3240000, 2160000, 1296000, 1080000, 648000, 432000, 216000],
    2: [1620000, 810000, 540000, 324000, 270000, 162000, 108000, 54000],
    3: [720000, 360000, 240000, 144000, 120000, 72000, 48000, 24000],
    5: [259200, 129600, 86400, 51840, 43200, 25920, 17280, 8640],
    6: [180000, 90000, 60000, 36000, 30000, 18000, 12000, 6000],
    10: [64800, 32400, 21600, 12960, 10800, 6480, 4320, 2160],
    15: [28800, 14400, 9600, 5760, 4800, 2880, 1920, 960],
    30: [7200, 3600, 2400, 1440, 1200, 720, 480, 240],
}
SIZES = (1, 2, 3, 5, 6, 10, 15, 30)


def test_table1_node_counts():
    """All 72 entries of Table 1 (B = 2x3x5 torus); degree 6 / 7 (the paper's torus convention: 7 / 8)."""
    for s1, nodes in TABLE1_K1.items():
        props = from_spec(f"hdn:base=2x3x5,k=1,s={s1}").properties()
        assert (props["nodes"], props["degree"], props["degree_paper"]) == (nodes, 6, 7)
    for s1, row in TABLE1_K2.items():
        for s2, nodes in zip(SIZES, row):
            props = from_spec(f"hdn:base=2x3x5,k=2,s={s1}/{s2}").properties()
            assert (props["nodes"], props["degree"], props["degree_paper"]) == (nodes, 7, 8)
            # the closed form printed in the abstract, Theorem 1 and Table 2 (H1)
            assert (props["nodes_formula_printed"] == nodes) == (s1 == 1)
            assert nodes == 60**4 // (2 * s1 * s1 * s2)


TABLE3 = [  # spec, n, d (paper), D, CR_w
    ("product:base=q10", 1024, 10, 10, 1.00),
    ("product:base=10x10x10", 1000, 6, 15, 1.05),
    ("hdn:base=2x3x5,k=1,s=1", 1800, 7, 10, 0.79),
    ("hdn:base=2x3x5,k=1,s=2", 900, 7, 9, 0.82),
    ("hdn:base=2x3x5,k=1,s=3", 600, 7, 9, 0.87),
    ("product:base=q19", 524288, 19, 19, 1.00),
    ("product:base=80x80x80", 512000, 6, 120, 3.32),
    ("hdn:base=2x3x5,k=2,s=2/2", 810000, 8, 19, 0.69),
    ("hdn:base=2x3x5,k=2,s=2/5", 324000, 8, 18, 0.71),
    ("hdn:base=2x3x5,k=2,s=5/2", 129600, 8, 17, 0.74),
]


@pytest.mark.parametrize("spec, n, d, diameter, cr", TABLE3)
def test_table3_cost_ratio(spec, n, d, diameter, cr):
    """Table 3 row by row from ``dualmpi info``: n, d (torus convention), D and CR_w (w1 = w2 = 1/2)."""
    out = info(from_spec(spec))
    assert (out["nodes"], out["degree_paper"], out["diameter"]) == (n, d, diameter)
    assert round(out["cr_w_paper"], 2) == cr
    if out["nodes"] <= 4096:
        assert out["bfs_verified"] is True


@pytest.mark.parametrize("spec", SMALL + [
    "hdn:base=2x3x5,k=1,s=1", "hdn:base=2x3x5,k=2,s=15/10", "hdn:base=2x3x5,k=2,s=30/15",
    "hdn:base=2x4,k=2,s=2/4", "hdn:base=3,k=3,s=3/3/3", "hdn:base=2x2,k=3,s=2x2/2/2x2",
])
def test_diameter_formula_matches_bfs(spec):
    """Theorem 1's D_k = 2^k D(B) - sum 2^j D(SN^(k-j)) + 2^(k+1) - 2, except s_1 = N_0 (H4)."""
    topo = from_spec(spec)
    f, bfs = topo.formulas(), measured_properties(topo)
    assert bfs["connected"] and f["diameter"] == bfs["diameter"] and f["links"] == bfs["links"]
    overshoot = 2 ** (topo.k - 1) if topo.s[1] == topo.base.num_nodes else 0
    assert f["diameter_theorem1"] == bfs["diameter"] + overshoot


def test_diameter_of_the_example_by_bfs():
    """The 12,000-node example network: BFS diameter 15 = Theorem 1."""
    topo = from_spec(EXAMPLE)
    assert bfs_summary(topo)["diameter"] == topo.formulas()["diameter"] == 15


def test_hdn_is_not_vertex_symmetric():
    """With SN^2 not inside SN^1 the nodes do not all look alike (H7): distance profiles differ."""
    topo = from_spec("hdn:base=2,k=2,s=1/2")
    dist = measured_properties(topo)["distance_matrix"]
    profiles = {tuple(np.bincount(row)) for row in dist}
    assert len(profiles) == 3
    sym = from_spec("hdn:base=2,k=2,s=2/2")
    assert len({tuple(np.bincount(row)) for row in measured_properties(sym)["distance_matrix"]}) == 1


# -- routing (Algorithm 1, Theorem 2) ------------------------------------------------------------------
def test_worked_routing_example():
    """u = (0,0,0,0) -> v = (1,19,19,14): u' = (0,0,19,0), u'' = (1,19,0,0), v' = (1,19,0,14).

    The printed algorithm takes the super-node path (0,0) -> (2,0) -> (2,4) of the paper, in 9
    hops, the BFS distance; the paper's own path has 17 (H2).
    """
    h = from_spec(EXAMPLE)
    u, v = h.parse_address("(0,0,0,0)"), h.parse_address("(1,19,19,14)")
    printed = [h.format_node(x) for x in h.route_as_printed(u, v)]
    i = printed.index("(0,0,19,0)")
    assert printed[i:i + 4] == ["(0,0,19,0)", "(1,19,0,0)", "(1,19,0,10)", "(1,19,0,14)"]
    assert len(printed) - 1 == len(h.route(u, v)) - 1 == h.distance(u, v) == 9
    assert 7 + 7 + 1 + 2 > h.formulas()["routing_bound_theorem2"] == 15


def test_paper_example_path_uses_non_links():
    """The paper's in-cluster paths step N^1 2 -> 3 and 5 -> 0 inside a 2 x 3 torus: no links there."""
    level1 = from_spec("hdn:base=2x3x5,k=1,s=2x3")
    u_side = ["(0,0,0,0)", "(0,0,4,0)", "(1,4,0,0)", "(1,4,1,0)", "(1,4,2,0)", "(1,4,2,1)", "(1,4,2,2)",
              "(1,4,2,3)"]
    v_side = ["(1,4,4,5)", "(1,4,0,5)", "(0,0,4,5)", "(0,0,3,5)", "(0,0,2,5)", "(0,0,2,0)", "(0,0,2,1)",
              "(0,0,2,2)"]
    for path, bad in ((u_side, [("(1,4,2,2)", "(1,4,2,3)")]), (v_side, [("(0,0,2,5)", "(0,0,2,0)")])):
        nodes = [level1.parse_address(a) for a in path]
        missing = [(path[i], path[i + 1]) for i in range(len(path) - 1)
                   if not level1.is_link(nodes[i], nodes[i + 1])]
        assert missing == bad


@pytest.mark.parametrize("spec", SMALL)
def test_routes_within_theorem2(spec):
    """All pairs (every 8th source above 128 nodes): links only, within Theorem 2; shortest if k = 1."""
    topo = from_spec(spec)
    dist = measured_properties(topo)["distance_matrix"]
    bound = topo.formulas()["routing_bound_theorem2"]
    table = neighbor_table(topo)
    worst = 0
    for u in range(0, topo.num_nodes, 1 if topo.num_nodes <= 128 else 8):
        for v in range(topo.num_nodes):
            path = topo.route(u, v)
            assert path[0] == u and path[-1] == v
            assert all(b in table[a] for a, b in zip(path, path[1:]))
            worst = max(worst, len(path) - 1)
            if topo.k == 1:
                assert len(path) - 1 == dist[u, v]
    assert worst <= bound


@pytest.mark.parametrize("spec, u, v, printed, corrected", [
    ("hdn:base=4,k=2,s=1/4", "(0,0,2,2)", "(0,4,6,0)", 14, 10),
    (EXAMPLE, "(0,2,4,3)", "(0,11,15,5)", 17, 12),
])
def test_printed_algorithm1_exceeds_theorem2(spec, u, v, printed, corrected):
    """As printed (u' keeps u's node id) routes exceed Theorem 2's bound when SN^k is not in SN^(k-1) (H5)."""
    topo = from_spec(spec)
    src = topo.parse_address(u)
    bound = topo.formulas()["routing_bound_theorem2"]
    dst = topo.parse_address(v)
    assert len(topo.route_as_printed(src, dst)) - 1 == printed > bound
    assert len(topo.route(src, dst)) - 1 == corrected <= bound


# -- broadcast (Algorithm 2, Theorem 3) ----------------------------------------------------------------
@pytest.mark.parametrize("spec", SMALL)
@pytest.mark.parametrize("collective", ["bcast", "scatter"])
def test_broadcast_delivers_within_theorem3(spec, collective):
    """Algorithm 2 delivers from several roots in the in-process executor, in Theorem 3's steps."""
    topo = from_spec(spec)
    bound = theorem3_steps(topo)
    assert paper_steps(collective, topo) == bound == topo.formulas()["bcast_steps_theorem3"]
    for root in (0, topo.num_nodes - 1, topo.num_nodes // 3):
        sched = build_schedule(collective, topo, root)
        res = run_inprocess(sched, 8)
        assert res.verified and res.messages == sched.num_messages == topo.num_nodes - 1
        # n_1 = 1 (s_1 = N_0): each of the 2^(k-1) level-1 passes has no cross-edge round back (H4)
        assert res.rounds == sched.steps == bound - 2 ** (topo.k - 1) * (topo.s[1] == topo.base.num_nodes)


def test_broadcast_on_the_example_network():
    """12,000 nodes: every node reached once, one-port, over links, in 19 = Theorem 3 rounds."""
    topo = from_spec(EXAMPLE)
    rounds = broadcast_rounds(topo, 4242)
    have = {4242}
    for pairs in rounds:
        senders = [u for u, _ in pairs]
        assert len(set(senders)) == len(senders) and set(senders) <= have
        receivers = {v for _, v in pairs}
        assert len(receivers) == len(pairs) and not receivers & have
        have |= receivers
    assert have == set(range(topo.num_nodes)) and len(rounds) == theorem3_steps(topo) == 19


def test_broadcast_steps_add_over_factors():
    """T(B_1 x ... x B_q) is a sum, not the product of Section 5 (H6): Q_3 needs 3 steps, not 1."""
    q3 = ProductGraph("q3")
    assert q3.formulas()["bcast_steps"] == 3 and math.prod(f.bcast_steps for f in q3.factors) == 1
    topo = from_spec("hdn:base=q3,k=1,s=q3")  # SN^1 = B: phase 1 broadcasts in Q_3
    rounds = broadcast_rounds(topo, 0)
    assert len(rounds) == theorem3_steps(topo) - 1 == 4  # 3 + cross-edge, no second cross


@pytest.mark.parametrize("collective", ["allgather", "alltoall"])
def test_unimplemented_collectives_raise(collective):
    """Only bcast and scatter run on an HDN; the others say so."""
    with pytest.raises(DualmpiError, match=f"{collective} is not available on hdn"):
        build_schedule(collective, from_spec("hdn:base=2,k=1,s=1"))


# -- command line ------------------------------------------------------------------------------------
def test_cli_route_example(capsys):
    """``dualmpi route EXAMPLE "(0,0,0,0)" "(1,19,19,14)"``: 9 hops, shortest; addresses accepted."""
    out = run_json(capsys, "route", EXAMPLE, "(0,0,0,0)", "(1,19,19,14)")
    assert (out["src"], out["dst"], out["hops"], out["distance"], out["shortest"]) == (0, 11999, 9, 9, True)
    assert out["addresses"][0] == "(0,0,0,0)" and out["addresses"][-1] == "(1,19,19,14)"
    out = run_json(capsys, "route", EXAMPLE, "(0,2,4,3)", "(0,11,15,5)", "--variant", "as-printed")
    assert (out["hops"], out["distance"], out["shortest"]) == (17, 11, False)


def test_cli_info_table1(capsys):
    """``dualmpi info`` shows Table 1's node count and the Theorem 1-3 figures of the example."""
    out = run_json(capsys, "info", EXAMPLE)
    assert out["nodes"] == 12000 and out["nodes_per_level"] == [30, 300, 12000]
    assert out["clusters_per_class"] == [5, 20] and out["supernode_sizes"] == [6, 15]
    assert (out["diameter"], out["routing_bound_theorem2"], out["bcast_steps_theorem3"]) == (15, 15, 19)
    small = run_json(capsys, "info", "hdn:base=2x3x5,k=1,s=2x3")
    assert small["bfs_verified"] is True and small["bfs_only"] == ["avg_distance"]


def test_cli_address_errors(capsys):
    """A malformed address is a one-line error; topologies without addresses say so."""
    assert main(["route", EXAMPLE, "(0,0,0)", "5"]) == 2
    assert "is not (C,U,SN,N)" in capsys.readouterr().err
    assert main(["route", "dualcube:r=3", "(0,1)", "5"]) == 2
    assert "takes node ids only" in capsys.readouterr().err
    with pytest.raises(NodeError):
        from_spec(EXAMPLE).parse_address("(2,0,0,0)")


@pytest.mark.parametrize("module", [
    "dualmpi.topology.product", "dualmpi.topology.hdn", "dualmpi.collectives.hdn_tree",
])
def test_doctests(module):
    """The docstring examples run."""
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
