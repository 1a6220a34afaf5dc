"""The reduced hypercube RH(k, n) of Sideras' thesis: structure, routes, the hypercube's emulation
(Theorem 2.1, Corollaries 2.1-2.2, Examples 2.1-2.2) and the hypercube collectives run through it."""

import math
from fractions import Fraction

import numpy as np
import pytest

from dualmpi.cli import main as cli_main
from dualmpi.collectives import build_schedule, count_conflicts, paper_steps
from dualmpi.errors import DualmpiError, SpecError
from dualmpi.engine import run_inprocess
from dualmpi.topology import Hypercube, ReducedHypercube, from_spec
from dualmpi.topology.analysis import measured_properties, neighbor_table
from dualmpi.topology.hypercube_emulation import (
    HypercubeOnRH,
    average_dilation,
    max_dilation,
    theorem_dilations,
)

#: (k, n) of every RH checked by breadth-first search (2 to 2048 nodes).
SMALL = [(0, 0), (1, 0), (3, 0), (1, 1), (2, 1), (3, 1), (4, 1), (2, 2), (3, 2), (4, 2), (3, 3)]


@pytest.fixture(scope="module", params=SMALL, ids=lambda kn: f"rh:k={kn[0]},n={kn[1]}")
def rh(request):
    """One small reduced hypercube."""
    return ReducedHypercube(*request.param)


@pytest.fixture(scope="module")
def rh_bfs(rh):
    """All-pairs BFS of ``rh``."""
    return measured_properties(rh)


# -- structure -------------------------------------------------------------------------------------
def test_size_degree_regular_and_spec(rh):
    """N = 2^(k + 2^n) nodes, k + 1 distinct neighbours each (a regular graph), spec round trip."""
    table = neighbor_table(rh)
    assert rh.num_nodes == 2 ** (rh.k + 2**rh.n) and rh.degree == rh.k + 1
    assert table.shape == (rh.num_nodes, rh.k + 1)
    assert all(len(set(row)) == rh.degree for row in table.tolist())
    assert (table != np.arange(rh.num_nodes)[:, None]).all()
    nodes = np.arange(rh.num_nodes)
    for j in range(rh.degree):  # each dimension is a perfect matching
        np.testing.assert_array_equal(table[table[:, j], j], nodes)
    assert from_spec(rh.spec) == rh and rh.spec == f"rh:k={rh.k},n={rh.n}"


def test_is_link_iff_neighbor(rh):
    """``is_link`` agrees with the neighbour lists (all pairs up to 256 nodes)."""
    p = rh.num_nodes
    rows = [set(rh.neighbors(u)) for u in range(p)]
    pairs = [(u, v) for u in range(p) for v in range(p)] if p <= 256 else [
        (u, u ^ (1 << b)) for u in range(p) for b in range(rh.bits)]
    assert all(rh.is_link(u, v) == (v in rows[u]) for u, v in pairs)
    assert not rh.is_link(0, p) and not rh.is_link(-1, 0)


def test_set_one_and_set_two_links(rh):
    """Set 1: the k BB links; set 2: the 1st-field bit named by the 0th subfield (Section 2.2)."""
    for u in range(0, rh.num_nodes, max(1, rh.num_nodes // 97)):
        nbrs = rh.neighbors(u)
        assert nbrs[: rh.k] == tuple(u ^ (1 << b) for b in range(rh.k))
        m = (u >> (rh.k - rh.n)) & ((1 << rh.n) - 1)
        assert nbrs[rh.k] == u ^ (1 << (rh.k + m)) and rh.fields(u)["sb"] == m


def test_formulas_match_bfs(rh, rh_bfs):
    """Links p(k+1)/2, diameter k - n + 2^(n+1) (k + 1 for n = 0) and the average distance."""
    f = rh.formulas()
    assert rh_bfs["connected"]
    assert f["links"] == rh_bfs["links"]
    assert f["diameter"] == rh_bfs["diameter"]
    assert f["avg_distance"] == pytest.approx(rh_bfs["avg_distance"], abs=1e-12)
    best, _ = rh._sums()
    assert f["diameter"] == rh.low + best  # the closed form against the walk table


def test_distance_and_routes_are_shortest(rh, rh_bfs):
    """``distance`` equals BFS; ``route`` is a shortest path of links (all pairs up to 256 nodes)."""
    dist = rh_bfs["distance_matrix"]
    p = rh.num_nodes
    sources = range(p) if p <= 256 else [0, 1, 77, 1000, p - 1]
    for u in sources:
        for v in range(p):
            assert rh.distance(u, v) == dist[u, v]
            path = rh.route(u, v)
            assert path[0] == u and path[-1] == v and len(path) - 1 == dist[u, v]
            assert all(rh.is_link(a, b) for a, b in zip(path, path[1:]))


@pytest.mark.parametrize("k", range(5))
def test_rh_k_0_is_the_hypercube(k):
    """RH(k, 0) keeps every link of the (k+1)-cube."""
    rh, q = ReducedHypercube(k, 0), Hypercube(k + 1)
    assert all(set(rh.neighbors(u)) == set(q.neighbors(u)) for u in range(q.num_nodes))


def test_example_2_1_rh_3_1():
    """Example 2.1: in RH(3,1), 00.1.11 links to 10.1.11 and 01.1.11 to 11.1.11; 2 SBs per BB."""
    rh = ReducedHypercube(3, 1)
    node = {rh.format_node(u): u for u in range(rh.num_nodes)}
    assert rh.neighbor(node["00.1.11"], 4) == node["10.1.11"]
    assert rh.neighbor(node["01.1.11"], 4) == node["11.1.11"]
    assert rh.is_link(node["00.1.11"], node["10.1.11"])
    assert not rh.is_link(node["00.1.11"], node["01.1.11"])  # bit 0 of the BB: SB 0's link
    assert {rh.fields(u)["sb"] for u in range(8)} == {0, 1}
    assert rh.num_nodes // 8 == 4  # 2^(2^n) = 4 building blocks, each a 3-cube


@pytest.mark.parametrize("spec, message", [
    ("rh:k=1,n=2", "must be >= n"),
    ("rh:k=5,n=5", "out of range"),
    ("rh:k=50,n=4", "too large"),
    ("rh:k=-1,n=0", "out of range"),
    ("rh:k=3", "missing parameter n"),
])
def test_bad_specs(spec, message):
    """Parameters outside k >= n, 0 <= n <= 4 are one-line spec errors."""
    with pytest.raises(SpecError, match=message):
        from_spec(spec)


# -- Theorem 2.1 and its corollaries -------------------------------------------------------------------
def test_example_2_2_dilations():
    """Example 2.2: 1, 3, 5 for 6, 2, 1 edges on RH(5,2); 1, 3, 5, 7 for 9, 3, 3, 1 edges on the
    RH that emulates the 16-cube, which is RH(8,3) (printed "RH(3,3)")."""
    assert theorem_dilations(5, 2) == {1: 6, 3: 2, 5: 1}
    assert theorem_dilations(8, 3) == {1: 9, 3: 3, 5: 3, 7: 1}
    assert ReducedHypercube(8, 3).bits == 16 and ReducedHypercube(3, 3).bits == 11
    big = HypercubeOnRH(ReducedHypercube(8, 3))
    for u in (0, 1, 12345, 65535):
        assert big.dilation_histogram(u) == {1: 9, 3: 3, 5: 3, 7: 1}


def test_corollary_2_2_example_values():
    """The average dilations of Example 2.2 are 17/9 = 1.889 (printed 1.88, truncated) and 2.5."""
    assert average_dilation(5, 2) == Fraction(17, 9)
    assert average_dilation(8, 3) == Fraction(5, 2)
    assert math.floor(float(Fraction(17, 9)) * 100) / 100 == 1.88
    assert round(float(Fraction(17, 9)), 2) == 1.89


@pytest.mark.parametrize("kn", [(0, 0), (2, 0), (1, 1), (2, 1), (4, 1), (2, 2), (5, 2), (3, 3)])
def test_theorem_2_1_and_corollaries_measured(kn):
    """Every node sees Theorem 2.1's dilations; max 2n+1 and the average of Corollary 2.2 are measured."""
    k, n = kn
    emu = HypercubeOnRH(ReducedHypercube(k, n))
    want = theorem_dilations(k, n)
    assert sum(want.values()) == k + 2**n
    assert all(emu.dilation_histogram(u) == want for u in range(emu.guest.num_nodes))
    measured = emu.measured()
    assert measured["max_dilation"] == max_dilation(n)
    assert measured["average_dilation"] == average_dilation(k, n)


def test_emulation_paths_are_rh_paths_and_symmetric():
    """A cube edge's RH path is a simple path of links; the reverse edge takes the reverse path."""
    emu = HypercubeOnRH(ReducedHypercube(2, 2))
    rh = emu.host
    for u in range(rh.num_nodes):
        for b in range(rh.bits):
            v = u ^ (1 << b)
            path = emu.path(u, v)
            assert path[0] == u and path[-1] == v and len(set(path)) == len(path)
            assert all(rh.is_link(a, c) for a, c in zip(path, path[1:]))
            assert emu.path(v, u) == path[::-1]
            assert all(emu.next_hop(a, u, v) == c for a, c in zip(path, path[1:]))
    with pytest.raises(ValueError):
        emu.path(0, 3)


# -- hypercube collectives through the emulation --------------------------------------------------------
@pytest.mark.parametrize("spec", ["rh:k=1,n=1", "rh:k=2,n=1", "rh:k=3,n=1", "rh:k=2,n=2"])
@pytest.mark.parametrize("collective", ["bcast", "scatter", "allgather", "alltoall"])
def test_emulated_collectives_verified(spec, collective):
    """The hypercube's schedule runs on RH: every hop a link, every forward the router's choice."""
    rh = from_spec(spec)
    root = rh.num_nodes - 1
    sched = build_schedule(collective, rh, root)
    cube = build_schedule(collective, Hypercube(rh.bits), root)
    res = run_inprocess(sched, 8)
    assert res.verified, (res.errors[:3], res.missing[:3])
    assert sched.topo is rh and sched.steps == cube.steps == paper_steps(collective, rh)
    assert len({r.step for r in sched.rounds}) == len({r.step for r in cube.rounds})
    emu = HypercubeOnRH(rh)
    assert sched.num_messages == sum(emu.dilation(t.src, t.dst) for _, _, t in cube.transfers())
    assert all(rh.is_link(t.src, t.dst) for _, _, t in sched.transfers())


@pytest.mark.parametrize("kn", [(1, 1), (2, 1), (3, 1), (2, 2), (3, 2)])
def test_emulated_allgather_rounds_and_hops(kn):
    """Recursive doubling on RH(k,n): k + 2^n (2n+1) rounds against k + 2^n, and the link
    transfers grow by exactly Corollary 2.2's average dilation."""
    k, n = kn
    rh = ReducedHypercube(k, n)
    sched = build_schedule("allgather", rh)
    cube = build_schedule("allgather", Hypercube(rh.bits))
    assert cube.num_rounds == k + 2**n
    assert sched.num_rounds == k + 2**n * (2 * n + 1)
    assert Fraction(sched.num_messages, cube.num_messages) == average_dilation(k, n)
    if n == 1:
        assert count_conflicts(sched) == 0


def test_reduction_cannot_be_forwarded():
    """Intermediate nodes would overwrite their partial sums: the hypercube's ring-allreduce is not
    emulated on RH (RH's own ring, every hop a link, runs it instead)."""
    from dualmpi.collectives.emulate import emulate_on
    from dualmpi.collectives.ring import ring_allreduce
    from dualmpi.topology.hamiltonian import gray_code

    rh = ReducedHypercube(2, 1)
    with pytest.raises(DualmpiError, match="partial sums"):
        emulate_on(ring_allreduce(Hypercube(rh.bits), gray_code(rh.bits)), rh, HypercubeOnRH(rh))
    assert run_inprocess(build_schedule("ring-allreduce", rh), 4).verified
    assert run_inprocess(build_schedule("ring-allgather", rh), 4).verified


# -- the CLI reproduces the thesis' examples --------------------------------------------------------------
def test_cli_embed_hypercube_example_2_2(capsys):
    """``dualmpi embed rh:k=5,n=2 --hypercube --json``: Theorem 2.1 = measured at every node."""
    import json

    assert cli_main(["embed", "rh:k=5,n=2", "--hypercube", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["theorem_2_1"] == {"1": 6, "3": 2, "5": 1}
    assert out["measured_per_node"] == [{"1": 6, "3": 2, "5": 1}] and out["same_at_every_node"]
    assert out["average_dilation"]["measured"] == out["average_dilation"]["corollary_2_2"] == "17/9"
    assert out["max_dilation"] == {"corollary_2_1": 5, "measured": 5} and out["links_ok"]
    assert [p["dilation"] for p in out["paths"]] == [1, 1, 1, 1, 1, 1, 3, 3, 5]


def test_cli_route_and_info_example_2_1(capsys):
    """``dualmpi route rh:k=3,n=1 7 23`` is the one set-2 link 00.1.11 - 10.1.11."""
    import json

    assert cli_main(["route", "rh:k=3,n=1", "7", "23", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["addresses"] == ["00.1.11", "10.1.11"] and out["hops"] == 1
    assert cli_main(["info", "rh:k=2,n=2", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["bfs_verified"] and info["diameter"] == 8 and info["degree"] == 3


@pytest.mark.parametrize("module", ["dualmpi.topology.reduced_hypercube", "dualmpi.topology.hypercube_emulation",
                                    "dualmpi.collectives.emulate"])
def test_doctests(module):
    """The docstring examples run."""
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0


# -- n = 4 and exact BFS by translation orbits -------------------------------------------------------
@pytest.mark.parametrize("kn", [(2, 1), (3, 2), (4, 2), (3, 3)])
def test_orbit_bfs_equals_all_pairs_bfs(kn):
    """One BFS per subfield orbit gives the all-pairs diameter and average distance exactly."""
    from dualmpi.topology.analysis import orbit_bfs

    rh = ReducedHypercube(*kn)
    exact = measured_properties(rh)
    orbits = orbit_bfs(rh, *rh.translation_orbits())
    assert orbits["sources"] == 2 ** rh.n and orbits["connected"]
    assert orbits["automorphisms_checked"] == rh.bits - rh.n
    assert orbits["diameter"] == exact["diameter"]
    assert orbits["avg_distance"] == pytest.approx(exact["avg_distance"], abs=1e-12)


def test_subfield_xor_is_no_automorphism():
    """The orbit check can fail: XOR with a subfield bit moves set-2 links off the links."""
    from dualmpi.topology.analysis import is_automorphism, orbit_bfs

    rh = ReducedHypercube(3, 2)
    nodes = np.arange(rh.num_nodes)
    assert not is_automorphism(rh, nodes ^ (1 << rh.low))
    assert is_automorphism(rh, nodes ^ (1 << rh.k))
    with pytest.raises(ValueError, match="not an automorphism"):
        orbit_bfs(rh, [0], [rh.num_nodes], [nodes ^ (1 << rh.low)])


def test_rh_n_4_exact_by_orbits():
    """RH(4, 4), 2^20 nodes (the thesis' Figure 2.6 covers n <= 4): links, diameter
    k - n + 2^(n+1) = 32 and the average distance from the walk table, exact by 16 BFS
    (one per subfield value; the 16 XOR generators checked to be automorphisms), and the
    closed-form distance and the routes against those BFS."""
    from dualmpi.topology.analysis import eccentricities, neighbor_table, orbit_bfs

    rh = from_spec("rh:k=4,n=4")
    assert rh.num_nodes == 1 << 20 and rh.degree == 5
    table = neighbor_table(rh)
    orbits = orbit_bfs(rh, *rh.translation_orbits(), table=table)
    f = rh.formulas()
    assert orbits["connected"] and orbits["automorphisms_checked"] == 16
    assert orbits["diameter"] == f["diameter"] == 32
    assert orbits["avg_distance"] == pytest.approx(f["avg_distance"], abs=1e-9)
    assert int((table != np.arange(rh.num_nodes)[:, None]).sum()) // 2 == f["links"]
    rng = np.random.default_rng(4)
    for src in (0, 3 << rh.low, 15 << rh.low):  # BFS from three sources against distance/route
        dist = np.full(rh.num_nodes, -1)
        dist[src] = 0
        frontier = np.array([src])
        level = 0
        while frontier.size:
            level += 1
            cand = table[frontier].ravel()
            cand = np.unique(cand[dist[cand] < 0])
            dist[cand] = level
            frontier = cand
        for v in rng.integers(0, rh.num_nodes, 300).tolist() + [rh.num_nodes - 1]:
            path = rh.route(src, v)
            assert rh.distance(src, v) == dist[v] == len(path) - 1
            assert all(rh.is_link(a, b) for a, b in zip(path, path[1:]))
        assert eccentricities(rh, [src], table)[0][0] == dist.max()
