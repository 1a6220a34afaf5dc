"""Where `dualmpi info`'s figures come from: exact BFS by automorphism orbits (RH, CCC, HDN base-torus
translations), the source of each figure, and balanced cuts against the HDN paper's N/4."""

import json
from itertools import combinations

import numpy as np
import pytest

from dualmpi.cli import main as cli_main
from dualmpi.commands.info import info
from dualmpi.topology import from_spec
from dualmpi.topology.analysis import bfs_summary, is_automorphism, min_bisection_width, orbit_bfs
from dualmpi.topology.bisection import best_bisection, cut_size, exact_bisection
from dualmpi.topology.checks import bisection_report, orbit_measure
from dualmpi.topology.hdn_quotient import quotient_check


@pytest.mark.parametrize("spec", ["hdn:base=2x3,k=1,s=2", "hdn:base=2x3,k=2,s=3/2x3",
                                  "hdn:base=2x2,k=2,s=2/2", "rdn:base=3,k=2", "rdn:base=q2,k=1",
                                  "hdn:base=2x3x5,k=1,s=5"])
def test_hdn_translations_are_automorphisms_and_orbits_exact(spec):
    """The base-torus translations (every copy of B and every cluster id alike) are automorphisms,
    and one BFS per orbit gives the all-pairs diameter and average distance."""
    h = from_spec(spec)
    sources, weights, gens = h.translation_orbits()
    gens = list(gens)
    assert len(gens) == len(h.base.sizes) and all(is_automorphism(h, g) for g in gens)
    assert len(sources) == h.num_nodes // h.base.num_nodes and sum(weights) == h.num_nodes
    exact = bfs_summary(h)
    orbits = orbit_bfs(h, sources, weights, gens)
    assert orbits["diameter"] == exact["diameter"]
    assert orbits["avg_distance"] == pytest.approx(exact["avg_distance"], abs=1e-12)


def test_translation_of_coordinates_alone_is_no_automorphism():
    """Translating the base coordinates without the cluster ids breaks the cross-edges."""
    h = from_spec("hdn:base=2x3,k=2,s=3/2x3")
    nodes = np.arange(h.num_nodes)
    w = h.weight[("x", 0)]  # the C_2 factor, outside SN^1 = 3
    x = (nodes // w) % 2
    plain = nodes + (((x + 1) % 2) - x) * w
    assert not is_automorphism(h, plain)
    assert is_automorphism(h, h.translate(nodes, [1, 0]))


def test_info_names_the_source_of_every_figure(capsys):
    """`info` says bfs (all pairs / orbits) or formula for links, diameter and average distance."""
    small = info(from_spec("dualcube:r=3"))
    assert (small["bfs_method"], small["diameter_source"], small["links_source"]) == (
        "all pairs", "bfs", "bfs")
    big = info(from_spec("hdn:base=2x3x5,k=2,s=2x3/3x5"))  # 12,000 nodes: 400 orbit sources
    assert big["bfs_verified"] is True and big["diameter"] == 15
    assert big["diameter_source"] == big["avg_distance_source"] == "bfs"
    assert "orbit" in big["bfs_method"] and "400 sources" in big["bfs_method"]
    mc = info(from_spec("metacube:k=2,m=3"))  # vertex-transitive: one BFS
    assert (mc["bfs_verified"], mc["diameter_source"], mc["diameter"]) == (True, "bfs", 16)
    dc = info(from_spec("dualcube:r=7"))  # no group known: the formula
    assert (dc["bfs_verified"], dc["diameter_source"]) == (False, "formula")
    assert "4096" in dc["bfs_skipped"] and "no automorphism group" in dc["bfs_skipped"]
    tight = info(from_spec("hdn:base=2x3x5,k=2,s=2x3/3x5"), bfs_budget=1000)
    assert tight["diameter_source"] == "formula" and "--bfs-budget" in tight["bfs_skipped"]
    assert cli_main(["info", "ccc:n=10", "--json"]) == 0  # 10,240 nodes: one orbit
    out = json.loads(capsys.readouterr().out)
    assert (out["diameter"], out["diameter_source"], out["bfs_verified"]) == (23, "bfs", True)


def test_info_disagreement_keeps_formula_as_source():
    """H4's network: BFS gives 5 where the formula ... agrees (corrected), so the source is bfs;
    a fake formula disagreeing with BFS is reported as the formula's with the measured value."""
    from dualmpi.topology.checks import figure_sources

    out = {"links": 10, "diameter": 7, "avg_distance": 2.0, "bfs_method": "all pairs",
           "bfs_verified": False, "bfs": {"links": 10, "diameter": 6, "avg_distance": 2.0}}
    assert figure_sources(out) == {"links_source": "bfs", "diameter_source": "formula",
                                   "avg_distance_source": "bfs"}


def test_orbit_measure_within_budget():
    """RH(3,3): exact by 8 orbit BFS; a budget too small for its sources skips with the reason."""
    measured, method = orbit_measure(from_spec("rh:k=3,n=3"))
    assert measured["diameter"] == 16 and measured["links"] == 2048 * 4 // 2 and "8 sources" in method
    none, reason = orbit_measure(from_spec("rh:k=3,n=3"), budget=100)
    assert none is None and "budget" in reason


# -- balanced cuts ------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["hypercube:n=4", "dualcube:r=2", "product:base=4x4",
                                  "hdn:base=2x2,k=1,s=2", "product:base=2x3x2"])
def test_exact_bisection_matches_enumeration(spec):
    """Branch and bound and the FM search agree with enumerating every balanced cut (<= 16 nodes)."""
    t = from_spec(spec)
    width = min_bisection_width(t)
    assert exact_bisection(t) == width
    assert best_bisection(t, restarts=4)[0] == width


def test_exact_bisection_of_hypercube_5_and_dual_cube_3():
    """Q_5: 16 = p/2; D_3: 8 = p/4, as the dual-cube paper's Table 1 says."""
    assert exact_bisection(from_spec("hypercube:n=5")) == 16
    assert exact_bisection(from_spec("dualcube:r=3")) == 8


@pytest.mark.parametrize("spec, paper, found", [
    ("hdn:base=2x3,k=2,s=3/2x3", 48, 24),
    ("hdn:base=2x2x2,k=2,s=2x2/2x2", 128, 80),
    ("rdn:base=3,k=2", 162, 106),
])
def test_hdn_bisection_below_n_over_4(spec, paper, found):
    """HDN paper, Section 3, "the bisection width is N/4": balanced cuts of 24 < 48 (N = 192),
    80 < 128 (N = 512) and 106 < 162 (N = 648) exist (errata H12); each cut is counted again."""
    h = from_spec(spec)
    cut, side = best_bisection(h, restarts=8)
    assert sorted(side) == [0] * (h.num_nodes // 2) + [1] * (h.num_nodes // 2)
    assert cut == cut_size([list(h.neighbors(u)) for u in range(h.num_nodes)], side) == found
    assert h.num_nodes // 4 == paper > cut
    rep = bisection_report(h)
    assert (rep["bisection_width_paper"], rep["bisection_width_upper_bound"]) == (paper, found)


def test_hdn_bisection_exact_on_small():
    """HDN(2x3, 1, 2), 36 nodes: the exact width is 10, above the paper's N/4 = 9 (its partition
    needs an even number of super-nodes per class; here there are 3)."""
    rep = bisection_report(from_spec("hdn:base=2x3,k=1,s=2"))
    assert (rep["bisection_width_paper"], rep["bisection_width_exact"]) == (9, 10)


# -- the quotient graph of Section 3 ---------------------------------------------------------------------
@pytest.mark.parametrize("spec, d_prev, d_sn, d_quotient", [
    ("hdn:base=5,k=2,s=1/5", 6, 2, 2),
    ("hdn:base=2x3,k=2,s=1/2", 6, 1, 4),
    ("hdn:base=2x3,k=2,s=3/2x3", 5, 2, 2),
    ("hdn:base=2x2,k=2,s=2/2", 5, 1, 4),
])
def test_quotient_diameter_below_derivation(spec, d_prev, d_sn, d_quotient):
    """HDN paper, Section 3: D(Q^(i-1)) = D_(i-1) - D(SN^i) fails for the quotient graph (errata
    H13) but holds for the largest node-to-super-node distance, which the proof uses."""
    out = quotient_check(from_spec(spec), 2)
    assert (out["d_cluster"], out["d_supernode"], out["d_quotient"]) == (d_prev, d_sn, d_quotient)
    assert out["d_node_to_supernode"] == d_prev - d_sn
    assert out["quotient_equals_derivation"] == (d_quotient == d_prev - d_sn)


@pytest.mark.parametrize("spec", ["metacube:k=2,m=1", "metacube:k=1,m=3", "metacube:k=3,m=1"])
def test_metacube_one_orbit_equals_all_pairs(spec):
    """MC(k, m) is vertex-transitive: field-bit XORs and class translations are automorphisms, and
    the BFS from node 0 gives the all-pairs diameter and average distance."""
    topo = from_spec(spec)
    exact = bfs_summary(topo)
    out = orbit_bfs(topo, *topo.translation_orbits())
    assert out["automorphisms_checked"] == topo.class_shift + topo.k
    assert (out["diameter"], out["avg_distance"]) == (exact["diameter"], exact["avg_distance"])


@pytest.mark.parametrize("module", ["dualmpi.topology.checks", "dualmpi.topology.bisection",
                                    "dualmpi.topology.hdn_quotient"])
def test_doctests(module):
    """The modules' examples run."""
    import doctest
    import importlib

    assert doctest.testmod(importlib.import_module(module)).failed == 0


def test_cut_size_counts():
    """cut_size counts each cut link once."""
    adj = [[1, 2], [0, 2], [0, 1, 3], [2]]
    assert cut_size(adj, [0, 0, 1, 1]) == 2
    assert min(cut_size(adj, [int(u in c) for u in range(4)]) for c in combinations(range(4), 2)) == 2


def test_packed_eccentricities_equal_one_at_a_time():
    """The bit-parallel BFS gives each source's eccentricity, distance sum and reach exactly."""
    from dualmpi.topology.analysis import eccentricities, eccentricities_packed

    for spec in ("hdn:base=2x3x5,k=2,s=2x3/3x5", "rh:k=3,n=2", "ccc:n=5"):
        topo = from_spec(spec)
        sources = list(range(0, topo.num_nodes, max(1, topo.num_nodes // 70)))[:70]
        assert eccentricities_packed(topo, sources, chunk=64) == eccentricities(topo, sources)
