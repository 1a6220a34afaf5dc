"""Wu and Wu, "On Self-Similarity and Hamiltonicity of Dual-Cubes": Theorems 4.1-4.4 and
Propositions 3.1-3.3 on dualmpi's dual-cube (DC_n = dualcube:r=n), checked link by link."""

import json
import random

import pytest

from dualmpi.cli import main as cli_main
from dualmpi.topology import DualCube, Hypercube
from dualmpi.topology import hamiltonian as ham

#: Theorem 4.1's example: the Hamiltonian cycle of DC_3 from the Gray code {00, 01, 11, 10}.
PAPER_DC3_CYCLE = (
    "00000, 00001, 00011, 00010, 10010, 10110, 11110, 11010, 01010, 01000, 01001, 01011, 11011, "
    "10011, 10111, 11111, 01111, 01110, 01100, 01101, 11101, 11001, 10001, 10101, 00101, 00111, "
    "00110, 00100, 10100, 11100, 11000, 10000").split(", ")

#: The second example (Gray code {00, 10, 11, 01}) exactly as printed: 33 entries, a broken tail.
PAPER_DC3_CYCLE_2 = (
    "00000, 00010, 00011, 00001, 10001, 11001, 11101, 10101, 00101, 00100, 00110, 00111, 10111, "
    "10011, 11011, 11111, 01111, 01101, 01100, 01110, 11110, 10110, 10010, 11010, 01010, 01011, "
    "01010, 10000, 11000, 11000, 11000, 11000, 10000").split(", ")

#: Section 3's listing of DC_3 by sub-dual-cube, as printed (01010 twice, 01011 missing).
PAPER_DC3_SET = (
    "00000, 00001, 00100, 00101, 00010, 00011, 00110, 00111, 01000, 01001, 01100, 01101, 01010, "
    "01010, 01110, 01111, 10000, 10001, 10100, 10101, 10010, 10011, 10110, 10111, 11000, 11001, "
    "11100, 11101, 11010, 11011, 11110, 11111").split(", ")


def _strings(dc, nodes):
    return [ham.paper_string(dc, u) for u in nodes]


# -- addresses -------------------------------------------------------------------------------------
def test_paper_strings_are_dualmpi_addresses():
    """DC_n's string 0CN / 1NC read in binary is dualcube:r=n's node id; the links agree."""
    for r in (2, 3, 4):
        dc = DualCube(r)
        for u in range(dc.num_nodes):
            s = ham.paper_string(dc, u)
            cls, mid, last = int(s[0]), int(s[1:r], 2), int(s[r:], 2)
            cluster, node = (mid, last) if cls == 0 else (last, mid)
            assert dc.fields(u) == {"class": cls, "cluster": cluster, "node": node}
            assert ham.dc_node(dc, cls, cluster, node) == u
            for v in range(dc.num_nodes):  # Section 2: one bit, in the node id or the class
                x = u ^ v
                one_bit = x and not x & (x - 1)
                allowed = one_bit and (x == 1 << (2 * r - 2) or dc.node_id(u) != dc.node_id(v))
                assert dc.is_link(u, v) == bool(allowed)
    assert _strings(DualCube(2), range(8)) == ["000", "001", "010", "011", "100", "101", "110", "111"]


# -- Theorem 4.1 -------------------------------------------------------------------------------------
def test_theorem_4_1_dc3_example_exact():
    """The binary reflected Gray code gives exactly the printed Hamiltonian cycle of DC_3."""
    dc = DualCube(3)
    cycle = ham.hamiltonian_cycle(dc)
    assert _strings(dc, cycle) == PAPER_DC3_CYCLE
    assert ham.is_ring(dc, cycle) and len(cycle) == 32


def test_theorem_4_1_second_example_is_misprinted():
    """With {00, 10, 11, 01} the construction agrees with the printed list for 26 nodes; the
    printed tail repeats nodes (33 entries, 28 distinct) and is no cycle."""
    dc = DualCube(3)
    cycle = _strings(dc, ham.hamiltonian_cycle(dc, ham.parse_gray_code("00,10,11,01", 2)))
    assert cycle[:26] == PAPER_DC3_CYCLE_2[:26]
    assert cycle[26:] == ["01001", "01000", "11000", "11100", "10100", "10000"]
    assert len(PAPER_DC3_CYCLE_2) == 33 and len(set(PAPER_DC3_CYCLE_2)) == 28
    assert ham.is_ring(dc, [int(s, 2) for s in cycle])


@pytest.mark.parametrize("r", range(2, 8))
def test_theorem_4_1_every_dual_cube(r):
    """DC_r is Hamiltonian for r = 2..7: every node once, every consecutive pair a link."""
    dc = DualCube(r)
    cycle = ham.hamiltonian_cycle(dc)
    assert len(cycle) == dc.num_nodes and ham.is_ring(dc, cycle)
    assert cycle[0] == 0 and dc.is_link(cycle[-1], cycle[0])


def test_theorem_4_1_any_gray_code():
    """Every cyclic Gray code from 0 gives a Hamiltonian cycle (all 12 on 3 bits, by search)."""
    dc = DualCube(4)
    codes = []

    def extend(seq):
        if len(seq) == 8:
            if bin(seq[-1]).count("1") == 1:
                codes.append(list(seq))
            return
        for b in range(3):
            nxt = seq[-1] ^ (1 << b)
            if nxt not in seq:
                extend(seq + [nxt])

    extend([0])
    assert len(codes) == 12  # Q_3's 6 Hamiltonian cycles, both directions
    assert all(ham.is_ring(dc, ham.hamiltonian_cycle(dc, g)) for g in codes)


def test_gray_code_parsing_errors():
    """A code that skips a value or changes two bits is rejected."""
    with pytest.raises(ValueError):
        ham.parse_gray_code("00,11,01,10", 2)
    with pytest.raises(ValueError):
        ham.parse_gray_code("00,01,11", 2)
    with pytest.raises(ValueError):
        ham.parse_gray_code("01,00,10,11", 2)


# -- Theorem 4.2 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", range(2, 8))
def test_hypercube_edge_disjoint_hamiltonian_cycles(k):
    """Q_k has floor(k/2) edge-disjoint Hamiltonian cycles (the clusters' cycles of Theorem 4.2)."""
    q = Hypercube(k)
    cycles = ham.hypercube_hamiltonian_cycles(k)
    assert len(cycles) == k // 2
    assert all(len(c) == q.num_nodes and ham.is_ring(q, list(c)) for c in cycles)
    edges = [ham.ring_edges(list(c)) for c in cycles]
    assert sum(map(len, edges)) == len(set().union(*edges))


@pytest.mark.parametrize("r", range(1, 8))
def test_theorem_4_2_edge_disjoint_cycles_hold(r):
    """floor((r-1)/2) pairwise edge-disjoint Hamiltonian cycles exist in DC_r for r = 1..7."""
    dc = DualCube(r)
    cycles = ham.edge_disjoint_cycles(dc)
    assert len(cycles) == (r - 1) // 2
    assert all(len(c) == dc.num_nodes and ham.is_ring(dc, c) for c in cycles)
    edges = [ham.ring_edges(c) for c in cycles]
    assert sum(map(len, edges)) == len(set().union(*edges)) if edges else True
    for c in cycles:  # the cross-edges found by the search are those the cycle uses
        used = {min(a, b) for a, b in zip(c, c[1:] + c[:1]) if a ^ b == 1 << dc.class_bit}
        assert len(used) == 2 ** r


def test_theorem_4_2_head_tail_alone_shares_cross_edges():
    """The proof's "head-tail interconnection" of the cluster cycles H_i is not enough: laid out
    like Theorem 4.1 (cluster B_j entered at node B_j), every cycle uses the cross-edges
    0B_jB_j - 1B_jB_j, so the class-1 clusters must be shifted along H_i (dualmpi searches it)."""
    dc = DualCube(5)
    orders = ham.hypercube_hamiltonian_cycles(4)
    naive = [ham._cross_edges(dc, ham._cluster_sequence(o, -1, -1, -1)) for o in orders]
    diagonal = {ham.dc_node(dc, 0, x, x) for x in range(16)}
    assert diagonal <= naive[0] & naive[1]
    nodes = [ham._cluster_cycle(dc, o, ham._cluster_sequence(o, -1, -1, -1)) for o in orders]
    assert all(ham.is_ring(dc, c) for c in nodes)
    assert ham.ring_edges(nodes[0]) & ham.ring_edges(nodes[1])


@pytest.mark.parametrize("r", range(2, 8))
def test_theorem_4_2_is_no_decomposition(r):
    """The cycles use 2 floor((r-1)/2) < r links per node: they never decompose DC_r's edges."""
    dc = DualCube(r)
    used = sum(len(ham.ring_edges(c)) for c in ham.edge_disjoint_cycles(dc))
    links = dc.num_nodes * r // 2
    assert used == dc.num_nodes * 2 * ((r - 1) // 2) // 2 < links


# -- Theorem 4.3 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("r", range(2, 6))
def test_theorem_4_3_rings_of_every_even_length(r):
    """Every even length 4..2^(2r-1) embeds with dilation 1, except 6 on DC_3 and 4, 6 on DC_2."""
    dc = DualCube(r)
    missing = []
    for length in range(4, dc.num_nodes + 1, 2):
        try:
            ring = ham.ring(dc, length)
        except ValueError:
            missing.append(length)
            continue
        assert len(ring) == length and ham.is_ring(dc, ring), length
    assert missing == {2: [4, 6], 3: [6]}.get(r, [])


@pytest.mark.parametrize("r, length, exists", [
    (2, 4, False), (2, 6, False), (2, 8, True), (3, 6, False), (3, 4, True), (4, 6, True)])
def test_theorem_4_3_exceptions_exhaustively(r, length, exists):
    """Exhaustive search: DC_3 has no 6-cycle, DC_2 (an 8-cycle) no 4- or 6-cycle, DC_4 has one."""
    assert ham.has_cycle_of_length(DualCube(r), length) is exists


def test_theorem_4_3_odd_and_out_of_range_lengths():
    """Odd rings do not exist (bipartite graph); nor rings longer than p."""
    dc = DualCube(3)
    for length in (3, 5, 7, 33, 34):
        with pytest.raises(ValueError):
            ham.ring(dc, length)
    assert not ham.has_cycle_of_length(dc, 5)


def test_theorem_4_3_staircase_intervals():
    """The staircase over an i-bit Gray code has 2^(i+2) nodes and stretches to 2^(n+i) (each of
    its 2^(i+1) sections up to 2^(n-1) nodes), every even length in between; the intervals
    cover 8..2^(2n-1).  With "2^n - 1 links" per section, as the proof says, it would be 2^(n+i+1)."""
    for r in (2, 3, 4, 5):
        dc = DualCube(r)
        covered = set()
        for i in range(1, r):
            low, high = 1 << (i + 2), 1 << (r + i)
            for length in range(low, high + 1, 2):
                assert ham.is_ring(dc, ham.staircase_ring(dc, i, length)), (r, i, length)
                covered.add(length)
            for bad in (low - 2, high + 2):
                with pytest.raises(ValueError):
                    ham.staircase_ring(dc, i, bad)
        assert covered == set(range(8, dc.num_nodes + 1, 2))


def test_hypercube_rings():
    """Hypercubes are bipancyclic: every even ring from 4 to 2^n."""
    for n in range(2, 7):
        q = Hypercube(n)
        for length in range(4, q.num_nodes + 1, 2):
            assert ham.is_ring(q, ham.ring(q, length)), (n, length)


def test_cube_paths_between_neighbours():
    """Paths of every even node count between neighbours of Q_4 (edge-bipancyclicity)."""
    rng = random.Random(4)
    q = Hypercube(4)
    for _ in range(20):
        a = rng.randrange(16)
        b = a ^ (1 << rng.randrange(4))
        for m in range(2, 17, 2):
            path = ham.cube_path(a, b, m, range(4))
            assert len(path) == m and path[0] == a and path[-1] == b
            assert ham.is_linear_array(q, path)


# -- Theorem 4.4 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("r", [1, 2, 3, 4])
def test_theorem_4_4_linear_arrays(r):
    """Linear arrays of 1..2^(2r-1) nodes (not 2^(2r+1), as printed) with dilation 1."""
    dc = DualCube(r)
    for length in range(1, dc.num_nodes + 1):
        arr = ham.linear_array(dc, length)
        assert len(arr) == length and ham.is_linear_array(dc, arr)
    with pytest.raises(ValueError):
        ham.linear_array(dc, dc.num_nodes + 1)


# -- Propositions 3.1-3.3 -------------------------------------------------------------------------------
@pytest.mark.parametrize("r", range(2, 6))
def test_proposition_3_1_four_sub_dual_cubes(r):
    """Fixing the first bit of both address fields leaves four DC_(r-1), edge for edge."""
    dc = DualCube(r)
    parts = ham.split(dc, 1)
    assert len(parts) == 4 and sorted(sum(parts.values(), [])) == list(range(dc.num_nodes))
    assert all(ham.split_is_dualcube(dc, part) for part in parts.values())


@pytest.mark.parametrize("r", range(2, 6))
def test_propositions_3_2_and_3_3_count(r):
    """Any bit i of the middle field with any bit j of the last field works: (r-1)^2 ways, so
    Proposition 3.2's count is right and Proposition 3.3's r-1 too small.  Read as cluster-id
    and node-id bits in both classes (Proposition 3.2's proof), no choice works."""
    dc = DualCube(r)
    h = r - 1
    string_ways = ids_ways = 0
    for i in range(1, h + 1):
        for j in range(1, h + 1):
            string_ways += all(map(lambda p: ham.split_is_dualcube(dc, p),
                                   ham.split(dc, i, j).values()))
            ids_ways += all(map(lambda p: ham.split_is_dualcube(dc, p),
                                ham.split(dc, i, j, "ids").values()))
    assert string_ways == h * h and ids_ways == 0


def test_section_3_dc3_listing():
    """Section 3's DC_3 listing, ordered by class and sub-dual-cube, has 01010 twice for 01011."""
    dc = DualCube(3)
    parts = ham.split(dc, 1)
    ours = [ham.paper_string(dc, u) for cls in (0, 1) for part in parts.values()
            for u in part if dc.class_of(u) == cls]
    diff = [(k, a, b) for k, (a, b) in enumerate(zip(PAPER_DC3_SET, ours)) if a != b]
    assert diff == [(13, "01010", "01011")]


# -- the CLI -----------------------------------------------------------------------------------------
def _json(capsys, argv):
    code = cli_main(argv)
    return code, json.loads(capsys.readouterr().out)


def test_cli_embed_ring_every_edge_a_link(capsys):
    """``dualmpi embed dualcube:r=3 --ring K --json``: the paper's cycle, short rings, linked."""
    code, out = _json(capsys, ["embed", "dualcube:r=3", "--ring", "32", "--json"])
    assert code == 0 and out["links_ok"] and out["labels"] == PAPER_DC3_CYCLE
    dc = DualCube(3)
    for length in (4, 8, 10, 16, 18, 30):
        code, out = _json(capsys, ["embed", "dualcube:r=3", "--ring", str(length), "--json"])
        nodes = out["nodes"]
        assert code == 0 and out["links_ok"] and len(nodes) == len(set(nodes)) == length
        assert all(dc.is_link(a, b) for a, b in zip(nodes, nodes[1:] + nodes[:1]))


def test_cli_embed_gray_code_and_errors(capsys):
    """``--gray`` picks the Gray code; the exception and odd lengths are one-line errors."""
    code, out = _json(capsys, ["embed", "dualcube:r=3", "--ring", "32", "--gray", "00,10,11,01",
                               "--json"])
    assert code == 0 and out["labels"][:26] == PAPER_DC3_CYCLE_2[:26]
    for argv in (["--ring", "6"], ["--ring", "7"], ["--ring", "32", "--gray", "00,11,01,10"]):
        assert cli_main(["embed", "dualcube:r=3", *argv]) == 2
        assert "dualmpi: error:" in capsys.readouterr().err
    assert cli_main(["embed", "metacube:k=1,m=1", "--ring", "8"]) == 2


def test_cli_embed_cycles_array_split(capsys):
    """``--cycles``, ``--array`` and ``--split all`` report their checks."""
    code, out = _json(capsys, ["embed", "dualcube:r=5", "--cycles", "--json"])
    assert code == 0 and out["count"] == out["claimed"] == 2 and out["edge_disjoint"]
    code, out = _json(capsys, ["embed", "dualcube:r=3", "--array", "5", "--json"])
    assert code == 0 and out["labels"] == PAPER_DC3_CYCLE[:5]
    code, out = _json(capsys, ["embed", "dualcube:r=4", "--split", "all", "--json"])
    assert code == 0 and out["string_ways"] == 9 and out["proposition_3_3"] == 3
    assert cli_main(["embed", "dualcube:r=3", "--split", "1,2"]) == 0
    assert "DC_(r-1): yes" in capsys.readouterr().out


@pytest.mark.parametrize("module", ["dualmpi.topology.hamiltonian"])
def test_doctests(module):
    """The docstring examples run."""
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0
