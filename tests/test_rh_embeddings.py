"""Embeddings in the reduced hypercube RH(k, n): Hamiltonian ring, tori, complete binary tree and the
2^(k-n) CCC(2^n), every edge checked on every RH small enough; the ring collectives on RH's ring."""

import json
from itertools import product

import pytest

from dualmpi.cli import main as cli_main
from dualmpi.collectives import build_schedule, count_conflicts, paper_steps
from dualmpi.collectives.emulate import emulate_on
from dualmpi.collectives.ring import ring_allgather
from dualmpi.engine import run_inprocess
from dualmpi.topology import Hypercube, ReducedHypercube
from dualmpi.topology.hamiltonian import gray_code
from dualmpi.topology.hypercube_emulation import HypercubeOnRH
from dualmpi.topology.rh_embeddings import (
    alternating_block_code,
    ccc_copies,
    edge_metrics,
    laceable_path,
    rh_ring,
    rh_torus,
    rh_tree,
    torus_shapes,
    tree_dilation,
)

#: Every RH(k, n) with 4 to 4,096 nodes.
ALL_SMALL = [(k, n) for n in range(4) for k in range(n, 13)
             if 4 <= 2 ** (k + 2**n) <= 4096]


def _is_cycle(rh, ring):
    """Return True when ``ring`` visits every node once and consecutive nodes are linked."""
    return (len(ring) == rh.num_nodes == len(set(ring))
            and all(rh.is_link(a, b) for a, b in zip(ring, ring[1:] + ring[:1])))


@pytest.mark.parametrize("k", range(1, 6))
def test_laceable_paths(k):
    """A Hamiltonian path of Q_k joins every two nodes of opposite parity."""
    for s, t in product(range(1 << k), repeat=2):
        if bin(s ^ t).count("1") % 2:
            path = laceable_path(range(k), s, t)
            assert path[0] == s and path[-1] == t and sorted(path) == list(range(1 << k))
            assert all(bin(a ^ b).count("1") == 1 for a, b in zip(path, path[1:]))


@pytest.mark.parametrize("n", range(1, 5))
def test_alternating_block_code(n):
    """A cyclic Gray code of Q_(2^n) whose flipped bits alternate between even and odd weight."""
    code = alternating_block_code(n)
    count = 1 << (1 << n)
    assert len(code) == count == len(set(code))
    flips = [code[t] ^ code[(t + 1) % count] for t in range(count)]
    assert all(f and not f & (f - 1) for f in flips)
    parity = [bin(f.bit_length() - 1).count("1") % 2 for f in flips]
    assert all(parity[t] != parity[(t + 1) % count] for t in range(count))


@pytest.mark.parametrize("kn", ALL_SMALL, ids=lambda kn: f"rh:k={kn[0]},n={kn[1]}")
def test_ring_is_hamiltonian_dilation_1(kn):
    """The ring visits every node once and every ring edge is one link."""
    rh = ReducedHypercube(*kn)
    ring = rh_ring(rh)
    assert _is_cycle(rh, ring)
    m = edge_metrics(rh, {e: list(e) for e in zip(ring, ring[1:] + ring[:1])}, len(ring))
    assert (m["dilation"], m["congestion"], m["expansion"], m["links_ok"]) == (1, 1, 1.0, True)


@pytest.mark.slow
def test_ring_rh_4_4():
    """The 2^20-node RH(4, 4) (n = 4) has its Hamiltonian ring too."""
    rh = ReducedHypercube(4, 4)
    assert _is_cycle(rh, rh_ring(rh))


@pytest.mark.parametrize("kn", ALL_SMALL, ids=lambda kn: f"rh:k={kn[0]},n={kn[1]}")
def test_tori(kn):
    """Every shape of ``torus_shapes`` (and its transpose) has dilation and congestion 1; any other
    power-of-two shape goes through the hypercube with the emulation's dilation (<= 2n + 1)."""
    rh = ReducedHypercube(*kn)
    p = rh.num_nodes
    shapes = torus_shapes(rh)
    assert shapes == [(2 ** (rh.n + 2**rh.n + c), 2 ** (rh.k - rh.n - c)) for c in range(rh.low)]
    for abits in range(1, rh.bits):
        a, b = 2**abits, p >> abits
        grid, paths, how = rh_torus(rh, a, b)
        assert len({u for row in grid for u in row}) == p
        m = edge_metrics(rh, paths, p)
        assert m["links_ok"] and m["guest_edges"] == (2 if a > 2 else 1) * p // 2 + (
            2 if b > 2 else 1) * p // 2
        for ((i, j), (x, y)), path in paths.items():
            assert path[0] == grid[i][j] and path[-1] == grid[x][y]
        if (a, b) in shapes or (b, a) in shapes:
            assert (m["dilation"], m["congestion"]) == (1, 1) and "ring" in how
        else:
            assert "hypercube" in how and 1 <= m["dilation"] <= 2 * rh.n + 1


@pytest.mark.parametrize("kn", ALL_SMALL, ids=lambda kn: f"rh:k={kn[0]},n={kn[1]}")
def test_tree(kn):
    """The in-order complete binary tree: 2^h - 2 edges on shortest routes, dilation 2 (n = 0) or
    2n + 2, expansion p / (p - 1)."""
    rh = ReducedHypercube(*kn)
    nodes, paths = rh_tree(rh)
    p = rh.num_nodes
    assert nodes == list(range(1, p)) and len(paths) == p - 2
    children = {}
    for parent, child in paths:
        children.setdefault(parent, []).append(child)
    assert sorted(children) == [x for x in range(1, p) if x % 2 == 0]  # leaves are the odd ids
    assert {c for cs in children.values() for c in cs} == set(range(1, p)) - {p // 2}
    m = edge_metrics(rh, paths, p - 1)
    assert m["links_ok"] and m["dilation"] == tree_dilation(rh.n)
    assert m["expansion"] == p / (p - 1)
    assert all(len(path) - 1 == rh.distance(*e) for e, path in paths.items())


@pytest.mark.parametrize("kn", [kn for kn in ALL_SMALL if kn[1] >= 2]
                         + [pytest.param((4, 4), marks=pytest.mark.slow)],
                         ids=lambda kn: f"rh:k={kn[0]},n={kn[1]}")
def test_ccc_copies(kn):
    """2^(k-n) disjoint copies of CCC(2^n) covering RH(k, n), every CCC link an RH link."""
    rh = ReducedHypercube(*kn)
    guest, maps = ccc_copies(rh)
    assert guest.n == 2**rh.n and len(maps) == 2**rh.low
    assert sorted(u for row in maps for u in row) == list(range(rh.num_nodes))
    links = list(guest.links())
    for row in maps[:2] + maps[-1:]:
        assert all(rh.is_link(row[u], row[v]) for u, v in links)


# -- ring collectives on the RH ring -------------------------------------------------------------------
def test_ring_allgather_on_rh_3_2():
    """rh:k=3,n=2: 127 rounds and 16,256 link transfers on RH's ring, against 635 and 20,828 when the
    hypercube's Gray-code ring is emulated (its edges have dilation up to 2n + 1)."""
    rh = ReducedHypercube(3, 2)
    own = build_schedule("ring-allgather", rh)
    assert (own.num_rounds, own.num_messages, count_conflicts(own)) == (127, 16256, 0)
    assert paper_steps("ring-allgather", rh) == 127
    gray = ring_allgather(Hypercube(rh.bits), gray_code(rh.bits))
    emulated = emulate_on(gray, rh, HypercubeOnRH(rh))
    assert (emulated.num_rounds, emulated.num_messages) == (635, 20828)
    assert all(rh.is_link(t.src, t.dst) for _, _, t in own.transfers())


@pytest.mark.parametrize("spec, collective", [
    (spec, c) for spec in ("rh:k=1,n=1", "rh:k=2,n=1", "rh:k=2,n=2", "rh:k=3,n=2")
    for c in ("ring-allgather", "ring-allreduce") if (spec, c) != ("rh:k=3,n=2", "ring-allreduce")])
def test_ring_collectives_verified(spec, collective):
    """The ring collectives on RH's own ring deliver every block (in-process executor)."""
    from dualmpi.topology import from_spec

    rh = from_spec(spec)
    sched = build_schedule(collective, rh)
    res = run_inprocess(sched, 8)
    assert res.verified, (res.errors[:3], res.missing[:3])
    assert sched.num_rounds == (1 if collective == "ring-allgather" else 2) * (rh.num_nodes - 1)


# -- CLI -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, expect", [
    (["rh:k=3,n=2", "--ring"], {"dilation": 1, "congestion": 1, "hamiltonian": True,
                                "via_hypercube": {"dilation": 5}}),
    (["rh:k=3,n=1", "--torus", "8x4"], {"dilation": 1, "congestion": 1, "one_to_one": True}),
    (["rh:k=3,n=1", "--torus", "4x8"], {"dilation": 1, "congestion": 1}),
    (["rh:k=2,n=2", "--torus", "8x8"], {"dilation": 5}),
    (["rh:k=3,n=2", "--tree"], {"dilation": 6, "dilation_formula": 6}),
    (["rh:k=3,n=2", "--ccc"], {"dilation": 1, "copies": 2, "guest": "ccc:n=4", "disjoint": True}),
])
def test_cli_embed_rh(capsys, args, expect):
    """`dualmpi embed rh:... --ring | --torus AxB | --tree | --ccc --json` with every edge checked."""
    assert cli_main(["embed", *args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["links_ok"] is True
    for key, value in expect.items():
        if isinstance(value, dict):
            assert {k: out[key][k] for k in value} == value
        else:
            assert out[key] == value
    assert cli_main(["embed", *args]) == 0
    assert "every edge a path of links: yes" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["rh:k=3,n=1", "--torus", "3x4"], "powers of two"),
    (["rh:k=3,n=1", "--torus", "8by4"], "expected AxB"),
    (["rh:k=3,n=1", "--ring", "5"], "Hamiltonian"),
    (["rh:k=3,n=1", "--ccc"], "n >= 2"),
    (["dualcube:r=2", "--tree"], "reduced hypercube"),
    (["dualcube:r=2", "--ring"], "give the ring's length"),
    (["rh:k=0,n=0", "--ring"], "no ring"),
    (["rh:k=40,n=4", "--ring"], "more than the"),
    (["rh:k=20,n=0", "--tree"], "more than the"),
])
def test_cli_embed_rh_errors(capsys, args, message):
    """Bad embedding requests are one-line errors (exit 2)."""
    assert cli_main(["embed", *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("module", ["dualmpi.topology.rh_embeddings", "dualmpi.commands.embed_rh"])
def test_doctests(module):
    """The modules' examples run."""
    import doctest
    import importlib

    assert doctest.testmod(importlib.import_module(module)).failed == 0
