"""The papers' closed forms (node count, degree, links, diameter, average distance, bisection
width, pairwise distance) against breadth-first search, and the link structure every network
must have (regular, symmetric, ``is_link`` agreeing with ``neighbors``)."""

import random

import numpy as np
import pytest

from dualmpi.topology import DualCube, Hypercube, MetaCube, from_spec
from dualmpi.topology.analysis import distances_from, min_bisection_width

#: Largest network whose closed-form distance is compared with BFS on every ordered pair.
DISTANCE_ALL_PAIRS_LIMIT = 1024
#: Largest network whose ``is_link`` is compared with the neighbour table on every ordered pair.
IS_LINK_ALL_PAIRS_LIMIT = 256


def expected_size(topo):
    """Return ``(nodes, degree)`` from the papers' definitions of the three families."""
    if isinstance(topo, Hypercube):
        return 2**topo.n, topo.n
    if isinstance(topo, DualCube):
        return 2 ** (2 * topo.r - 1), topo.r
    if isinstance(topo, MetaCube):
        return 2 ** (topo.m * 2**topo.k + topo.k), topo.m + topo.k
    raise TypeError(topo)


# -- sizes and closed-form properties ----------------------------------------------------------
def test_node_count_and_degree(network):
    """p = 2^n, 2^(2r-1), 2^(m 2^k + k); degree n, r, m + k."""
    nodes, degree = expected_size(network)
    assert (network.num_nodes, network.degree) == (nodes, degree)
    props = network.properties()
    assert (props["nodes"], props["degree"], props["spec"]) == (nodes, degree, network.spec)


def test_formulas_match_bfs(network, bfs):
    """links, diameter and average distance from the formulas equal the all-pairs BFS values."""
    f = network.formulas()
    assert bfs["connected"]
    assert f["links"] == bfs["links"]
    assert f["diameter"] == bfs["diameter"]
    assert f["avg_distance"] == pytest.approx(bfs["avg_distance"], rel=0, abs=1e-12)


def test_links_generator_counts_each_link_once(network):
    """``links()`` yields ``formulas()['links']`` distinct pairs u < v, each a link."""
    links = list(network.links())
    assert len(links) == len(set(links)) == network.formulas()["links"]
    assert all(u < v and network.is_link(u, v) for u, v in links)


def test_distance_closed_form_matches_bfs(network, bfs, sources):
    """``distance(u, v)``: all pairs up to 1024 nodes, all destinations of sample sources above."""
    dist = bfs["distance_matrix"]
    p = network.num_nodes
    rows = range(p) if p <= DISTANCE_ALL_PAIRS_LIMIT else sources
    bad = [
        (u, v, network.distance(u, v), int(dist[u, v]))
        for u in rows
        for v in range(p)
        if network.distance(u, v) != dist[u, v]
    ]
    assert not bad, f"{len(bad)} closed-form distances differ from BFS, (u, v, closed, bfs): {bad[:5]}"


def test_single_source_bfs_agrees_with_all_pairs(network, table, bfs, sources):
    """The two BFS implementations of ``analysis`` agree (the reference itself is cross-checked)."""
    for s in sources[:3]:
        np.testing.assert_array_equal(distances_from(network, s, table), bfs["distance_matrix"][s])


# -- link structure ----------------------------------------------------------------------------
def test_neighbors_regular_distinct_and_match_table(network, table):
    """Every node has ``degree`` distinct neighbours, none itself, as the vectorized table says."""
    p, degree = network.num_nodes, network.degree
    assert table.shape == (p, degree)
    assert ((table >= 0) & (table < p)).all()
    assert (table != np.arange(p)[:, None]).all(), "self-loop"
    assert all(len(set(row)) == degree for row in table.tolist()), "repeated neighbour"
    for u in range(0, p, max(1, p // 64)):
        assert network.neighbors(u) == tuple(table[u].tolist())


def test_each_dimension_is_a_perfect_matching(network, table):
    """``neighbor(neighbor(u, i), i) == u``: links are symmetric, one dimension per link end."""
    nodes = np.arange(network.num_nodes)
    for j in range(network.degree):
        np.testing.assert_array_equal(table[table[:, j], j], nodes, err_msg=f"dimension {j + 1}")


def test_neighbor_relation_is_symmetric(network, table):
    """v in neighbors(u) iff u in neighbors(v)."""
    back = (table[table] == np.arange(network.num_nodes)[:, None, None]).any(axis=2)
    assert back.all()


def _is_link_pairs(topo, table):
    """Pairs to check ``is_link`` on: all pairs when small, else links, 1-bit flips and random pairs."""
    p = topo.num_nodes
    if p <= IS_LINK_ALL_PAIRS_LIMIT:
        return [(u, v) for u in range(p) for v in range(p)]
    rng = random.Random(f"is_link:{topo.spec}")  # fixed seed: the same pairs on every run
    pairs = [(u, int(v)) for u in range(p) for v in table[u]]
    pairs += [(u, u ^ (1 << b)) for u in range(p) for b in range(p.bit_length() - 1)]
    pairs += [(rng.randrange(p), rng.randrange(p)) for _ in range(20000)]
    return pairs


def test_is_link_iff_neighbor(network, table):
    """``is_link(u, v)`` is exactly ``v in neighbors(u)`` (exhaustive up to 256 nodes)."""
    rows = [set(r) for r in table.tolist()]
    bad = [(u, v) for u, v in _is_link_pairs(network, table) if network.is_link(u, v) != (v in rows[u])]
    assert not bad, f"{len(bad)} pairs where is_link disagrees with neighbors: {bad[:5]}"


def test_is_link_rejects_non_nodes(network):
    """Self pairs and ids outside ``0..p-1`` are never links."""
    p = network.num_nodes
    assert not network.is_link(0, 0)
    assert not network.is_link(p - 1, p - 1)
    assert not network.is_link(0, p)
    assert not network.is_link(-1, 0)
    assert not network.is_link(p, p ^ 1)


def test_dimension_of_inverts_neighbor(network):
    """``dimension_of(u, neighbor(u, i)) == i``; a non-neighbour raises ValueError."""
    p = network.num_nodes
    for u in {0, p // 3, p - 1}:
        for i in range(1, network.degree + 1):
            assert network.dimension_of(u, network.neighbor(u, i)) == i
        with pytest.raises(ValueError):
            network.dimension_of(u, u)


# -- bisection width -----------------------------------------------------------------------------
SMALL_WITH_BISECTION_FORMULA = [
    *(f"hypercube:n={n}" for n in range(5)),
    "dualcube:r=1",
    "dualcube:r=2",
    *(f"metacube:k=0,m={m}" for m in range(1, 5)),
]


@pytest.mark.parametrize("spec", SMALL_WITH_BISECTION_FORMULA)
def test_bisection_formula_is_exact_on_small_networks(spec):
    """Enumerating every balanced cut (<= 16 nodes) gives the formula's bisection width."""
    topo = from_spec(spec)
    formula = topo.formulas()["bisection_width"]
    assert formula is not None
    assert min_bisection_width(topo) == formula


def test_bisection_formula_is_the_best_one_bit_cut(network, table):
    """Where a formula is given: no balanced cut along one address bit is narrower, and one attains it.

    A bit cut {u : bit b of u = 0} is balanced, so a narrower one would disprove the formula;
    beyond 16 nodes this is the check of the claimed minimum that stays affordable.
    """
    formula = network.formulas()["bisection_width"]
    if formula is None:
        assert isinstance(network, MetaCube) and network.k >= 1
        return
    p = network.num_nodes
    if p == 1:
        assert formula == 0
        return
    nodes = np.arange(p)
    cuts = {
        b: int(((nodes[:, None] ^ table) >> b & 1).sum()) // 2 for b in range(p.bit_length() - 1)
    }
    assert min(cuts.values()) == formula, f"one-bit cuts {cuts}, formula {formula}"
