"""Address fields (class, cluster, node id) and the papers' readable address format."""

import pytest

from dualmpi.topology import DualCube, Hypercube, MetaCube, from_spec

#: Clustered networks small enough to check every node's fields.
CLUSTERED = [
    *(f"dualcube:r={r}" for r in range(1, 6)),
    *(f"metacube:k=1,m={m}" for m in range(1, 5)),
    "metacube:k=2,m=1",
    "metacube:k=2,m=2",
    "metacube:k=3,m=1",
]


def cluster_dims(topo):
    """Return the number of cube-edge dimensions (1..c); the dimensions above it are cross-edges."""
    return topo.r - 1 if isinstance(topo, DualCube) else topo.m


@pytest.mark.parametrize("spec", CLUSTERED)
def test_fields_identify_each_node(spec):
    """(class, cluster, node id) is a bijection onto the nodes, and format_node is injective."""
    topo = from_spec(spec)
    p = topo.num_nodes
    triples = {tuple(topo.fields(u)[f] for f in ("class", "cluster", "node")) for u in range(p)}
    assert len(triples) == p
    assert len({topo.format_node(u) for u in range(p)}) == p


@pytest.mark.parametrize("spec", CLUSTERED)
def test_cube_edges_stay_in_cluster_and_cross_edges_change_class(spec):
    """Dimensions 1..c flip one bit of the node id inside the cluster; the others change the class."""
    topo = from_spec(spec)
    c = cluster_dims(topo)
    for u in range(topo.num_nodes):
        fu = topo.fields(u)
        for i in range(1, topo.degree + 1):
            fv = topo.fields(topo.neighbor(u, i))
            if i <= c:
                assert (fv["class"], fv["cluster"]) == (fu["class"], fu["cluster"])
                assert fv["node"] ^ fu["node"] == 1 << (i - 1)
            else:
                diff = fv["class"] ^ fu["class"]
                assert diff and diff & (diff - 1) == 0, (u, i, fu, fv)


@pytest.mark.parametrize("r", range(2, 6))
def test_dualcube_cross_edge_swaps_cluster_and_node_id(r):
    """Dual-cube: the cross-edge keeps the bits, so node id and cluster id trade places."""
    topo = DualCube(r)
    for u in range(topo.num_nodes):
        fu, fv = topo.fields(u), topo.fields(topo.neighbor(u, r))
        assert (fv["class"], fv["cluster"], fv["node"]) == (1 - fu["class"], fu["node"], fu["cluster"])


def test_hypercube_and_dualcube_format():
    """The readable addresses: n-bit string; dual-cube (class, part II, part I)."""
    assert Hypercube(3).format_node(0b101) == "(101)"
    assert Hypercube(0).format_node(0) == "()"
    f = DualCube(3)
    assert f.format_node(0b10110) == "(1,01,10)"
    assert f.fields(0b10110) == {"class": 1, "cluster": 0b10, "node": 0b01}
    assert f.fields(0b00110) == {"class": 0, "cluster": 0b01, "node": 0b10}
    assert DualCube(1).format_node(1) == "(1)"


def test_metacube_paper_example_node():
    """MC(2,3): (01,111,101,110,000) is class 1 with node id m[1] = 110, as in the paper."""
    mc = MetaCube(2, 3)
    u = mc.parse_address("(01,111,101,110,000)")
    assert u == 0b01_111_101_110_000
    assert mc.format_node(u) == "(01,111,101,110,000)"
    assert mc.fields(u) == {"class": 1, "cluster": 0b111_101_000, "node": 0b110}


def test_metacube_paper_example_neighbours():
    """Its cube neighbours flip one bit of m[1]; its cross neighbours flip one bit of the class."""
    mc = MetaCube(2, 3)
    u = mc.parse_address("(01,111,101,110,000)")
    cube = [mc.format_node(mc.neighbor(u, i)) for i in (1, 2, 3)]
    cross = [mc.format_node(mc.neighbor(u, i)) for i in (4, 5)]
    assert cube == ["(01,111,101,111,000)", "(01,111,101,100,000)", "(01,111,101,010,000)"]
    assert cross == ["(00,111,101,110,000)", "(11,111,101,110,000)"]
    named = {mc.parse_address(a) for a in cube + cross}
    assert set(mc.neighbors(u)) == named
    assert all(mc.is_link(u, v) for v in named)


@pytest.mark.parametrize(
    "spec", ["metacube:k=0,m=3", "metacube:k=1,m=2", "metacube:k=2,m=1", "metacube:k=3,m=1"]
)
def test_metacube_parse_address_inverts_format_node(spec):
    """``parse_address(format_node(u)) == u`` for every node."""
    mc = from_spec(spec)
    assert all(mc.parse_address(mc.format_node(u)) == u for u in range(mc.num_nodes))


def test_metacube_parse_address_rejects_missing_field():
    """(01,111,101,110) has four of MC(2,3)'s five fields and names no node unambiguously."""
    with pytest.raises(ValueError):
        MetaCube(2, 3).parse_address("(01,111,101,110)")
