"""``dualmpi simulate`` against the in-process executor and against the metacube paper's counts."""

import json
import math
from itertools import combinations

import pytest

from dualmpi.cli import main
from dualmpi.collectives import COLLECTIVES, build_schedule, count_conflicts
from dualmpi.engine import run_inprocess
from dualmpi.simulator import simulate
from dualmpi.topology import MetaCube, from_spec
from dualmpi.topology.metacube import class_walk

SMALL = ["hypercube:n=3", "hypercube:n=4", "dualcube:r=2", "dualcube:r=3",
         "metacube:k=0,m=2", "metacube:k=1,m=1", "metacube:k=1,m=2", "metacube:k=2,m=1"]


def t_m_coefficient(m):
    """The metacube paper's t_h coefficient of T_M for MC(2, m) (Section 3.4)."""
    p = 2 ** (4 * m + 2)
    return p * (0.5 * math.log2(p) + 2.5) - math.sqrt(2) * p**0.75 - 3 * math.sqrt(p)


@pytest.mark.parametrize("spec", SMALL)
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_simulate_matches_inprocess_executor(spec, collective):
    topo = from_spec(spec)
    root = topo.num_nodes - 1
    sim = simulate(topo, collective, root, method="schedule")
    sched = build_schedule(collective, topo, root)
    res = run_inprocess(sched, 2)
    assert sim["link_transfers"] == res.messages
    assert (sim["delivered"], sim["expected"]) == (res.delivered, res.expected)
    assert sim["delivered"] == sim["expected"]
    assert sim["rounds"] == res.steps
    assert sim["conflicts"] == count_conflicts(sched)
    assert sim["link_violations"] == 0 and sim["sends_without_data"] == 0


@pytest.mark.parametrize("spec", SMALL)
def test_stream_matches_schedule(spec):
    topo = from_spec(spec)
    a = simulate(topo, "alltoall", method="schedule")
    b = simulate(topo, "alltoall", method="stream")
    assert b.pop("symmetry_mismatches") == 0
    drop = ("method",)
    assert {k: v for k, v in a.items() if k not in drop} == {
        k: v for k, v in b.items() if k not in drop}


def test_mc22_total_exchange_done_when():
    """Issue 4: MC(2,2) delivers all 1,047,552 messages, 0 conflicts, t_h coefficient 7328 = T_M."""
    out = simulate(MetaCube(2, 2), "alltoall")
    assert out["messages"] == out["expected"] == out["delivered"] == 1_047_552
    assert out["conflicts"] == 0 and out["link_violations"] == 0
    assert out["hops_from_source"] == out["model"]["th"] == 7328 == round(t_m_coefficient(2))
    assert out["model"]["ts"] == out["model"]["tw"] == 1023


@pytest.mark.parametrize("m", [1, 2])
def test_total_hops_equal_t_m_and_shortest(m):
    topo = MetaCube(2, m)
    out = simulate(topo, "alltoall")
    assert out["hops_from_source"] == round(t_m_coefficient(m))
    # every route is shortest: the total equals the sum of distances from one node
    assert out["hops_from_source"] == round(topo.formulas()["avg_distance"] * topo.num_nodes)


@pytest.mark.parametrize("m", [1, 2, 3])
def test_extra_distance_terms_e_i(m):
    """Section 3.4's E_0..E_3 (extra hops over the hypercube, per destination class)."""
    q, big = 2**m - 1, 2**m
    extra = [0] * 4
    for dest in range(4):
        for size in range(5):
            for diff in combinations(range(4), size):
                walk = len(class_walk(2, dest, sum(1 << i for i in diff))) - 1
                extra[dest] += q**size * (walk - bin(dest).count("1"))
    paper = [
        (big * q + big * q) * 2 + (big * q**2 + big * (big**3 - big**2)) * 4,
        (big**2 * q + big**2 * q + big**2 * q**2) * 2,
        (big**2 * q + big**2 * q + big**2 * q**2) * 2,
        big**2 * q**2 * 2,
    ]
    assert extra == paper
    assert sum(paper) == 5 * 2 ** (4 * m + 1) - 2 * 2 ** (3 * m + 1) - 3 * 2 ** (2 * m + 1)


def test_octcube_total_exchange():
    """k = 3: every message delivered on a shortest path; conflicts counted (0 for MC(3,1))."""
    topo = MetaCube(3, 1)
    out = simulate(topo, "alltoall")
    assert out["delivered"] == out["expected"] == topo.num_nodes * (topo.num_nodes - 1)
    assert out["hops_from_source"] == round(topo.formulas()["avg_distance"] * topo.num_nodes)
    assert out["conflicts"] == 0


@pytest.mark.parametrize("m", [1, 2, 3])
def test_k1_agrees_with_dualcube(m):
    keys = ("rounds", "messages", "delivered", "expected", "conflicts", "hops_from_source", "model")
    a = simulate(from_spec(f"metacube:k=1,m={m}"), "alltoall")
    b = simulate(from_spec(f"dualcube:r={m + 1}"), "alltoall")
    assert {k: a[k] for k in keys} == {k: b[k] for k in keys}


@pytest.mark.parametrize("m,lost", [(1, 256), (2, 49152)])
def test_printed_classpath_table_loses_messages(m, lost):
    """Erratum M1: with Table 1 as printed, (dest=3, type=2) messages never reach class 2."""
    out = simulate(MetaCube(2, m), "alltoall", variant="as-printed")
    assert out["expected"] - out["delivered"] == lost


GRAY_WALK_CASES = [
    (spec, coll)
    for spec in ("metacube:k=2,m=1", "metacube:k=2,m=2", "metacube:k=3,m=1")
    for coll in ("bcast", "scatter", "allgather")
    if (spec, coll) != ("metacube:k=3,m=1", "allgather")  # 2048-node replay: slow, k=2 covers it
]


@pytest.mark.parametrize("spec,collective", GRAY_WALK_CASES)
def test_metacube_broadcast_rounds(spec, collective):
    """Gray-walk schedules: log2 p + 2^k - 1 rounds, against log2 p for the hypercube."""
    topo = from_spec(spec)
    out = simulate(topo, collective, 0)
    assert out["delivered"] == out["expected"]
    assert out["rounds"] == out["paper_rounds"] == topo.bits + 2**topo.k - 1
    assert out["lower_bound_rounds"] == out["hypercube_rounds"] == topo.bits
    if collective == "allgather":
        assert out["model"]["tw"] == topo.num_nodes - 1  # bandwidth-optimal


def test_cli_simulate_json(capsys):
    assert main(["simulate", "metacube:k=2,m=1", "--collective", "alltoall", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("nodes", "collective", "rounds", "messages", "delivered", "expected", "conflicts",
                "hops_from_source", "model"):
        assert key in out
    assert out["model"] == {"ts": 63, "tw": 63, "th": 296}


@pytest.mark.parametrize("spec, root, steps", [("dualcube:r=3", 5, 6), ("metacube:k=2,m=1", 9, 9),
                                               ("hypercube:n=4", 3, 4)])
def test_cli_simulate_gather(capsys, spec, root, steps):
    """The gather (offered because its description says which blocks its nodes start and end
    with): the scatter's step count, every block at the root, the root's p - 1 blocks, and the
    same figures as the in-process executor's run through compiled plans."""
    assert main(["simulate", spec, "--collective", "gather", "--root", str(root), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    p = from_spec(spec).num_nodes
    assert (out["collective"], out["delivered"], out["expected"]) == ("gather", p - 1, p - 1)
    assert out["rounds"] == out["paper_rounds"] == steps and out["conflicts"] == 0
    res = run_inprocess(build_schedule("gather", from_spec(spec), root), 4)
    assert res.verified and res.delivered == p - 1 and res.messages == out["messages"]


def test_cli_simulate_offers_the_described_collectives(capsys):
    """--collective choices come from the registry: a v-variant (no blocks of its own) is refused."""
    with pytest.raises(SystemExit):
        main(["simulate", "dualcube:r=2", "--collective", "gatherv"])
    assert "invalid choice: 'gatherv'" in capsys.readouterr().err


def test_cli_simulate_as_printed_fails(capsys):
    assert main(["simulate", "dualcube:r=3", "--collective", "bcast", "--variant", "as-printed"]) == 1
    assert "sends_without_data" in capsys.readouterr().out


VECTOR_CASES = ["dualcube:r=2", "dualcube:r=3", "dualcube:r=4", "hypercube:n=5",
                "metacube:k=0,m=3", "metacube:k=1,m=2", "metacube:k=2,m=1"]


@pytest.mark.parametrize("spec", VECTOR_CASES)
@pytest.mark.parametrize("collective", ["bcast", "scatter", "allgather"])
def test_vector_method_matches_schedule(spec, collective):
    topo = from_spec(spec)
    a = simulate(topo, collective, 3, method="schedule")
    b = simulate(topo, collective, 3, method="vector")
    for key in ("rounds", "hop_rounds", "messages", "link_transfers", "delivered", "expected",
                "conflicts", "link_violations", "sends_without_data", "model", "link_sharing"):
        assert a[key] == b[key], key


def test_dualcube_r7_vectorised():
    """8,192 nodes, no per-message loop: every block delivered in 2r = 14 rounds."""
    topo = from_spec("dualcube:r=7")
    for coll in ("bcast", "scatter", "allgather"):
        out = simulate(topo, coll, 0)
        assert out["method"] == "vector"
        assert out["delivered"] == out["expected"] and out["rounds"] == 14
    assert out["model"]["tw"] == topo.num_nodes - 1


# --- link sharing inside a step (issue 15, item 2) -------------------------------------------

def _sharing_by_routes(spec):
    """Per step, the most messages on one directed link, from every message's own route."""
    from collections import Counter

    from dualmpi.collectives.alltoall import destination_order, route_function

    topo = from_spec(spec)
    dest, route = destination_order(topo), route_function(topo)
    out = []
    for t in range(topo.num_nodes - 1):
        links = Counter()
        for s in range(topo.num_nodes):
            path = route(s, int(dest(s, t)))
            links.update(zip(path, path[1:]))
        out.append(max(links.values()))
    return out


@pytest.mark.parametrize("spec,steps_shared,most", [
    ("hypercube:n=5", 0, 1), ("dualcube:r=3", 19, 2), ("metacube:k=2,m=1", 51, 4)])
def test_total_exchange_link_sharing(spec, steps_shared, most):
    """Conflict-free (0 conflicts), yet links carry 2+ messages of one step at different hops."""
    out = simulate(from_spec(spec), "alltoall", method="schedule")
    sharing = out["link_sharing"]
    assert out["conflicts"] == 0
    assert sharing["per_step"] == _sharing_by_routes(spec)
    assert (sharing["steps_shared"], sharing["max"]) == (steps_shared, most)
    assert sharing["model"]["tw"] == sharing["sum_per_step"]        # one block per message
    assert (sharing["model"]["tw"] > out["model"]["tw"]) == (steps_shared > 0)


@pytest.mark.parametrize("spec", ["hypercube:n=4", "dualcube:r=3", "metacube:k=1,m=2"])
@pytest.mark.parametrize("collective", ["bcast", "scatter", "allgather"])
def test_tree_collectives_share_no_link(spec, collective):
    """Single-hop steps with one message per link: sharing is the papers' conflict count (none)."""
    sharing = simulate(from_spec(spec), collective, 0, method="schedule")["link_sharing"]
    assert sharing["max"] == 1 and sharing["steps_shared"] == 0


def test_cli_simulate_link_sharing_and_virtual_time_done_when(capsys):
    """Issue 15: D_3 total exchange, 64 KiB: link sharing reported, virtual time above T."""
    assert main(["simulate", "dualcube:r=3", "--collective", "alltoall", "--size", "65536",
                 "--model", "ts=2e-6,tw=1e-9,th=5e-8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    v = out["virtual"]
    assert out["link_sharing"]["steps_shared"] == 19
    assert v["paper_time"] == pytest.approx(31 * 2e-6 + 31 * 65536e-9 + 104 * 5e-8)
    assert v["clock_time"] > 1.4 * v["paper_time"]
    assert v["sharing_bound"] == pytest.approx(31 * 2e-6 + 50 * 65536e-9 + 104 * 5e-8)


def test_slow_links_bodies_do_not_overlap():
    """t_h = 1 ms > m t_w = 655 us: the pipelined clock gives the paper's T, the step bound
    (messages of a step overlapping fully, a flow model) +6.7 % (D_3) and +10.8 % (MC(2,1))."""
    from dualmpi.model.clock import ClockParams

    clock = ClockParams(2e-3, 1e-8, 1e-3)
    for spec, extra in (("dualcube:r=3", 0.067), ("metacube:k=2,m=1", 0.108)):
        v = simulate(from_spec(spec), "alltoall", clock=clock, size=65536)["virtual"]
        assert v["clock_time"] == pytest.approx(v["paper_time"], rel=1e-12)
        assert v["sharing_over_paper"] - 1 == pytest.approx(extra, abs=5e-4)


def test_simulate_bad_virtual_options(capsys):
    for argv in (["--size", "-4"], ["--model", "ts=x"], ["--model", "tq=1"]):
        assert main(["simulate", "dualcube:r=2", "--collective", "alltoall", *argv]) == 2
        assert capsys.readouterr().err.startswith("dualmpi: error:")
