"""Cube-connected cycles CCC(n): structure, shortest routes and the diameter against BFS, the
HDN paper's Table 2 row (errata HDN E5), and the generic collectives run in-process."""

import numpy as np
import pytest

from dualmpi.cli import main as cli_main
from dualmpi.collectives import build_schedule, count_conflicts, paper_steps
from dualmpi.errors import SpecError
from dualmpi.engine import run_inprocess
from dualmpi.topology import CubeConnectedCycles, from_spec
from dualmpi.topology.analysis import is_automorphism, measured_properties, neighbor_table, orbit_bfs
from dualmpi.topology.ccc import cycle_walk, diameter_formula


@pytest.fixture(scope="module", params=[3, 4, 5, 6, 7], ids=lambda n: f"ccc:n={n}")
def ccc(request):
    """One small CCC."""
    return CubeConnectedCycles(request.param)


@pytest.fixture(scope="module")
def ccc_bfs(ccc):
    """All-pairs BFS of ``ccc``."""
    return measured_properties(ccc)


def test_structure(ccc):
    """n 2^n nodes of degree 3: a cube matching plus the rings, spec round trip."""
    n, p = ccc.n, ccc.num_nodes
    table = neighbor_table(ccc)
    nodes = np.arange(p)
    assert p == n * 2**n and table.shape == (p, 3)
    assert all(len(set(row)) == 3 for row in table.tolist())
    np.testing.assert_array_equal(table[table[:, 0], 0], nodes)  # cube links: a perfect matching
    np.testing.assert_array_equal(table[table[:, 1], 2], nodes)  # ring +1 then -1
    w, i = nodes // n, nodes % n
    np.testing.assert_array_equal(table[:, 0], (w ^ (1 << i)) * n + i)  # position i: dimension i
    np.testing.assert_array_equal(table[:, 1] // n, w)  # the ring keeps the cube address
    assert from_spec(ccc.spec) == ccc and ccc.spec == f"ccc:n={n}"
    assert ccc.format_node(ccc.node(0b101, 2)) == f"{0b101:0{n}b}.2"


def test_formulas_match_bfs(ccc, ccc_bfs):
    """Links 3p/2, the diameter formula and the average distance against all-pairs BFS."""
    f = ccc.formulas()
    assert ccc_bfs["connected"]
    assert f["links"] == ccc_bfs["links"]
    assert f["diameter"] == ccc_bfs["diameter"] == diameter_formula(ccc.n)
    assert f["avg_distance"] == pytest.approx(ccc_bfs["avg_distance"], abs=1e-12)


def test_routes_are_shortest(ccc, ccc_bfs):
    """``distance`` equals BFS and ``route`` is a shortest path of links (all pairs up to n = 5)."""
    dist = ccc_bfs["distance_matrix"]
    p = ccc.num_nodes
    sources = range(p) if p <= 160 else range(0, p, 7)
    for u in sources:
        for v in range(p):
            path = ccc.route(u, v)
            assert ccc.distance(u, v) == dist[u, v] == len(path) - 1
            assert path[0] == u and path[-1] == v
            assert all(ccc.is_link(a, b) for a, b in zip(path, path[1:]))


@pytest.mark.parametrize("n", range(3, 8))
def test_cycle_walk_against_state_search(n):
    """The shortest covering walk on the n-cycle equals a BFS over (position, visited set)."""
    size = 1 << n
    for i in range(n):
        dist = {(i, 1 << i): 0}
        frontier = [(i, 1 << i)]
        while frontier:
            nxt = []
            for pos, seen in frontier:
                for q in ((pos + 1) % n, (pos - 1) % n):
                    state = (q, seen | 1 << q)
                    if state not in dist:
                        dist[state] = dist[(pos, seen)] + 1
                        nxt.append(state)
            frontier = nxt
        for j in range(n):
            for todo in range(size):
                best = min(d for (pos, seen), d in dist.items() if pos == j and seen & todo == todo)
                walk = cycle_walk(n, i, j, todo)
                assert len(walk) - 1 == best and walk[0] == i and walk[-1] == j
                assert all((b - a) % n in (1, n - 1) for a, b in zip(walk, walk[1:]))
                assert all(todo >> x & 1 == 0 or x in walk for x in range(n))


@pytest.mark.parametrize("n", range(3, 13))
def test_diameter_by_orbit_bfs(n):
    """CCC(n) is vertex-transitive (the generators are checked automorphisms): one BFS gives the
    diameter 2n + floor(n/2) - 2 (6 for n = 3) up to n = 12, 49,152 nodes."""
    ccc = CubeConnectedCycles(n)
    out = orbit_bfs(ccc, *ccc.translation_orbits())
    assert out["connected"] and out["automorphisms_checked"] == n + 1
    assert out["diameter"] == ccc.formulas()["diameter"] == diameter_formula(n)


def test_hdn_table_2_diameter_2n_is_wrong_from_n_6():
    """HDN paper, Table 2 prints D(CCC(n)) = 2n: true for n = 3, 4, 5, false from n = 6 (13, 15, 18)."""
    measured = {n: measured_properties(CubeConnectedCycles(n))["diameter"] for n in range(3, 9)}
    assert {n: d for n, d in measured.items() if d == 2 * n} == {3: 6, 4: 8, 5: 10}
    assert [measured[n] for n in (6, 7, 8)] == [13, 15, 18]


def test_rotation_is_automorphism_but_shift_is_not():
    """The orbit check rejects a permutation that is no automorphism."""
    ccc = CubeConnectedCycles(4)
    nodes = np.arange(ccc.num_nodes)
    _, _, gens = ccc.translation_orbits()
    assert all(is_automorphism(ccc, g) for g in gens)
    assert not is_automorphism(ccc, (nodes + 1) % ccc.num_nodes)


@pytest.mark.parametrize("spec, message", [
    ("ccc:n=2", "out of range"),
    ("ccc:n=0", "out of range"),
    ("ccc:k=3", "missing parameter n"),
    ("ccc:n=70", "too large"),
])
def test_bad_specs(spec, message):
    """Bad CCC specs are one-line spec errors."""
    with pytest.raises(SpecError, match=message):
        from_spec(spec)


@pytest.mark.parametrize("n", [3, 4])
@pytest.mark.parametrize("collective", ["bcast", "scatter", "allgather", "alltoall"])
def test_collectives_verified(n, collective):
    """The generic schedules deliver every block over links only (in-process executor)."""
    ccc = CubeConnectedCycles(n)
    root = ccc.num_nodes - 1
    sched = build_schedule(collective, ccc, root)
    res = run_inprocess(sched, 8)
    assert res.verified, (res.errors[:3], res.missing[:3])
    assert all(ccc.is_link(t.src, t.dst) for _, _, t in sched.transfers())
    if collective != "alltoall":
        assert count_conflicts(sched) == 0
        assert sched.steps == sched.num_rounds >= diameter_formula(n)  # one-port lower bound
    assert paper_steps(collective, ccc) == sched.steps


@pytest.mark.parametrize("n, bcast_rounds", [(3, 7), (4, 9), (5, 12), (6, 14)])
def test_greedy_broadcast_rounds(n, bcast_rounds):
    """The greedy tree's rounds, one or two above the diameter (the one-port lower bound)."""
    ccc = CubeConnectedCycles(n)
    sched = build_schedule("bcast", ccc, 0)
    assert sched.num_rounds == bcast_rounds
    assert diameter_formula(n) < bcast_rounds <= diameter_formula(n) + 2
    senders = [[t.src for t in r.transfers] for r in sched.rounds]
    assert all(len(s) == len(set(s)) for s in senders)  # one send per node per round


def test_cli_info_ccc_6(capsys):
    """`dualmpi info ccc:n=6`: 384 nodes, degree 3, diameter 13 (not the paper's 12), checked by BFS."""
    assert cli_main(["info", "ccc:n=6", "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert (out["nodes"], out["degree"], out["diameter"], out["bfs_verified"]) == (384, 3, 13, True)


@pytest.mark.parametrize("module", ["dualmpi.topology.ccc", "dualmpi.collectives.greedy"])
def test_doctests(module):
    """The modules' examples run."""
    import doctest
    import importlib

    assert doctest.testmod(importlib.import_module(module)).failed == 0
