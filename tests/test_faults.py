"""Faults: failed links carry nothing, messages detour, cut-off pairs are reported."""

import re
import resource
import subprocess
import sys
import time

import pytest

from dualmpi.cli import main
from dualmpi.collectives import COLLECTIVES, build_schedule
from dualmpi.collectives.faulttolerant import undeliverable
from dualmpi.errors import SpecError
from dualmpi.engine import run_inprocess
from dualmpi.simulator import simulate
from dualmpi.topology import DualCube, from_spec
from dualmpi.topology.faults import FaultyTopology, parse_faults

CASES = [(spec, n, seed) for spec in ("dualcube:r=3", "metacube:k=2,m=1")
         for n in (1, 2) for seed in (0, 1)]


@pytest.mark.parametrize("spec,faults,seed", CASES)
def test_up_to_degree_minus_one_random_link_faults(spec, faults, seed):
    """With 1..degree-1 failed links every collective delivers every block (in-process)."""
    topo = parse_faults(from_spec(spec), random_links=faults, seed=seed)
    assert len(topo.failed_links) == faults
    for coll in COLLECTIVES:
        sched = build_schedule(coll, topo, 3)
        assert all(topo.is_link(tr.src, tr.dst) for _, _, tr in sched.transfers())
        res = run_inprocess(sched, 8)
        assert res.verified, (coll, res.errors[:2], res.missing[:2])
        assert undeliverable(coll, topo, 3) == []
        p = topo.num_nodes
        assert res.expected == (p - 1 if coll in ("bcast", "scatter") else p * (p - 1))


def test_failed_nodes_are_left_out():
    topo = parse_faults(from_spec("dualcube:r=3"), nodes="5,9", links="0-1")
    for coll in COLLECTIVES:
        res = run_inprocess(build_schedule(coll, topo, 3), 4)
        assert res.verified
        survivors = 30
        want = {"bcast": survivors - 1, "scatter": survivors - 1}.get(coll, survivors * (survivors - 1))
        assert res.expected == want


def test_cut_off_node_is_reported_not_dropped():
    """Failing all three links of node 0 (more than degree - 1) cuts it off: reported."""
    topo = parse_faults(DualCube(3), links="0-1,0-2,0-16")
    assert undeliverable("bcast", topo, 3) == [(3, 0)]
    assert len(undeliverable("alltoall", topo, 3)) == 2 * 31
    out = simulate(topo, "alltoall")
    assert out["undeliverable_count"] == 62 and out["delivered"] == out["expected"] == 930


def test_detours_cost_is_reported():
    topo = parse_faults(DualCube(3), random_links=2, seed=3)
    out = simulate(topo, "alltoall")
    assert out["extra_link_transfers"] > 0 and out["extra_hop_rounds"] > 0
    assert out["faults"]["links"] == sorted(tuple(sorted(x)) for x in topo.failed_links)


def test_route_detours_and_link_check():
    topo = FaultyTopology(DualCube(2), failed_links=[(0, 4)])
    assert not topo.is_link(0, 4) and 4 not in topo.neighbors(0)
    assert topo.route(0, 4) == [0, 1, 5, 7, 3, 2, 6, 4]
    assert topo.route(1, 3) == DualCube(2).route(1, 3)  # intact base routes are kept


@pytest.mark.parametrize("kwargs", [{"links": "0-3"}, {"links": "0-x"}, {"nodes": "a"},
                                    {"random_links": -1}, {"random_links": 999}])
def test_bad_fault_arguments(kwargs):
    with pytest.raises(SpecError):
        parse_faults(DualCube(2), **kwargs)


def test_cli_simulate_with_faults(capsys):
    assert main(["simulate", "dualcube:r=3", "--collective", "bcast", "--fail-links",
                 "0-1,0-2,0-16", "--root", "3"]) == 1
    assert "undeliverable" in capsys.readouterr().out
    assert main(["simulate", "dualcube:r=3", "--collective", "alltoall", "--fail-random", "2",
                 "--json"]) == 0


# -- sizes before faults (issue 23, item 9) --------------------------------------------------------
#: Address-space limit of the subprocesses below: a regression fails with a MemoryError instead
#: of taking the machine's memory.
RLIMIT = 1536 << 20


@pytest.mark.parametrize("argv, pattern", [
    (["simulate", "dualcube:r=31", "--collective", "bcast", "--fail-nodes", "5"],
     r"dualcube:r=31 has 2,305,843,009,213,693,952 nodes: too large to simulate bcast with faults"),
    (["simulate", "dualcube:r=12", "--collective", "bcast", "--fail-random", "3"],
     r"dualcube:r=12 has 8,388,608 nodes: too large to simulate bcast with faults"),
    (["simulate", "dualcube:r=31", "--collective", "alltoall", "--fail-links", "0-1"],
     r"too large to simulate alltoall with faults \(schedule replay, at most 2,048 nodes\)"),
    (["simulate", "dualcube:r=12", "--collective", "bcast", "--method", "vector",
      "--fail-random", "1"], r"a network with faults is simulated with the schedule method"),
    (["run", "dualcube:r=31", "--fail-nodes", "5"], r"too large to emulate \(at most 65,536\)"),
    (["run", "dualcube:r=12", "--fail-random", "3"], r"too large to emulate"),
], ids=["simulate-r31-fail-nodes", "simulate-r12-fail-random", "simulate-r31-fail-links",
        "simulate-vector-fail-random", "run-r31-fail-nodes", "run-r12-fail-random"])
def test_sizes_are_checked_before_the_faults(argv, pattern):
    """Faults on a network too large: refused in one line, at once, in little memory.  Before,
    every link was listed first: r=31 grew by ~140 MB/s until killed, r=12 --fail-random 3 was
    refused after 172 s and 5.3 GB."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (RLIMIT, RLIMIT))

    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "dualmpi", *argv], capture_output=True,
                          text=True, timeout=120, preexec_fn=limit)
    elapsed = time.monotonic() - start
    shown = f"exit {proc.returncode} after {elapsed:.1f} s\n{proc.stderr[-2000:]}"
    assert proc.returncode == 2 and elapsed < 30, shown
    (line,) = proc.stderr.splitlines()
    assert line.startswith("dualmpi: error: ") and re.search(pattern, line), shown


def test_named_faults_list_no_links(monkeypatch):
    """--fail-links and --fail-nodes fail what they name without listing every link; only
    --fail-random needs the list."""
    base = DualCube(2)

    def no_listing():
        raise AssertionError("every link listed")

    monkeypatch.setattr(base, "links", no_listing)
    topo = parse_faults(base, links="0-4", nodes="3")
    assert topo.failed_links == {frozenset((0, 4))} and topo.failed_nodes == {3}
    with pytest.raises(AssertionError, match="every link listed"):
        parse_faults(base, random_links=1)
