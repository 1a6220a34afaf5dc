"""Ring all-to-all broadcast and ring allreduce along an embedded Hamiltonian cycle (pure, in-process)."""

import pytest

from dualmpi.collectives import (
    EXTRA_COLLECTIVES,
    build_schedule,
    count_conflicts,
    paper_steps,
)
from dualmpi.collectives.ring import default_cycle, ring_allgather, ring_allreduce
from dualmpi.collectives.schedule import (
    REDUCED,
    base_collective,
    expected_blocks,
    initial_blocks,
)
from dualmpi.errors import DualmpiError
from dualmpi.engine import run_inprocess
from dualmpi.simulator import simulate
from dualmpi.topology import DualCube, Hypercube, from_spec
from dualmpi.topology.hamiltonian import hamiltonian_cycle, parse_gray_code

SPECS = ["dualcube:r=2", "dualcube:r=3", "dualcube:r=4", "hypercube:n=2", "hypercube:n=5"]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("collective", EXTRA_COLLECTIVES)
def test_ring_collectives_verified(spec, collective):
    """Every ring hop is a link, one message per node and round, every byte (and sum) verified."""
    topo = from_spec(spec)
    p = topo.num_nodes
    if collective == "ring-allreduce" and p > 32:
        pytest.skip("verifying p sums of p contributions at p nodes is O(p^3) block patterns")
    sched = build_schedule(collective, topo)
    res = run_inprocess(sched, 16)
    assert res.verified, (res.errors[:3], res.missing[:3], res.corrupt[:3])
    rounds = p - 1 if collective == "ring-allgather" else 2 * (p - 1)
    assert sched.num_rounds == sched.steps == rounds == paper_steps(collective, topo)
    assert sched.num_messages == res.messages == p * rounds
    assert count_conflicts(sched) == 0
    assert all(topo.is_link(t.src, t.dst) for _, _, t in sched.transfers())
    for rnd in sched.rounds:  # one send and one receive per node and round
        assert sorted(t.src for t in rnd.transfers) == sorted(t.dst for t in rnd.transfers) \
            == list(range(p))


def test_ring_on_another_hamiltonian_cycle():
    """Any Hamiltonian cycle works, e.g. Theorem 4.1's from the Gray code {00, 10, 11, 01}."""
    dc = DualCube(3)
    cycle = hamiltonian_cycle(dc, parse_gray_code("00,10,11,01", 2))
    assert run_inprocess(ring_allgather(dc, cycle), 8).verified
    assert run_inprocess(ring_allreduce(dc, cycle[::-1]), 8).verified


def test_reduce_scatter_then_allgather_structure():
    """The first p-1 rounds reduce (each node adds one segment), the last p-1 only copy."""
    dc = DualCube(2)
    sched = build_schedule("ring-allreduce", dc)
    p = dc.num_nodes
    assert all(t.reduce for rnd in sched.rounds[: p - 1] for t in rnd.transfers)
    assert not any(t.reduce for rnd in sched.rounds[p - 1:] for t in rnd.transfers)
    assert all(t.blocks[0][0] == REDUCED for _, _, t in sched.transfers())


def test_not_a_cycle_is_refused():
    """A node order that is not a Hamiltonian cycle of the network is an error."""
    dc = DualCube(2)
    with pytest.raises(DualmpiError, match="Hamiltonian cycle"):
        ring_allgather(dc, list(range(8)))
    with pytest.raises(DualmpiError, match="Hamiltonian cycle"):
        ring_allreduce(dc, default_cycle(dc)[:-1])
    with pytest.raises(DualmpiError, match="need a Hamiltonian cycle"):
        build_schedule("ring-allgather", from_spec("metacube:k=1,m=1"))
    with pytest.raises(DualmpiError, match="need a Hamiltonian cycle"):
        build_schedule("ring-allgather", DualCube(1))
    with pytest.raises(DualmpiError, match="variant"):
        build_schedule("ring-allgather", DualCube(2), variant="as-printed")


def test_block_sets_follow_the_base_collective():
    """ring-allgather moves the allgather blocks, ring-allreduce the allreduce segments."""
    dc = DualCube(2)
    assert base_collective("ring-allgather") == "allgather"
    for name in EXTRA_COLLECTIVES:
        base = base_collective(name)
        for u in range(dc.num_nodes):
            assert initial_blocks(name, dc, None, u) == initial_blocks(base, dc, None, u)
            assert expected_blocks(name, dc, None, u) == expected_blocks(base, dc, None, u)


@pytest.mark.parametrize("r", [2, 3, 4])
def test_ring_against_algorithm_2(r):
    """On the same nodes: ring p-1 rounds of one block against Algorithm 2's 2r rounds; both
    deliver everything; the ring moves p(p-1) blocks over links, Algorithm 2 more per message."""
    dc = DualCube(r)
    p = dc.num_nodes
    ring = build_schedule("ring-allgather", dc)
    alg2 = build_schedule("allgather", dc)
    r1, r2 = run_inprocess(ring, 8), run_inprocess(alg2, 8)
    assert r1.verified and r2.verified and r1.delivered == r2.delivered == p * (p - 1)
    assert ring.num_rounds == p - 1 and alg2.num_rounds == 2 * r
    blocks = lambda s: sum(len(t.blocks) for _, _, t in s.transfers())  # noqa: E731
    assert blocks(ring) == p * (p - 1)
    assert blocks(alg2) >= blocks(ring)
    largest = lambda s: sum(max(len(t.blocks) for t in rnd.transfers) for rnd in s.rounds)  # noqa: E731
    assert largest(ring) == p - 1  # t_w coefficient of the ring: p - 1 blocks, as Algorithm 2's
    assert largest(alg2) == p - 1


@pytest.mark.parametrize("collective", EXTRA_COLLECTIVES)
def test_simulator_handles_ring_collectives(collective):
    """``simulate`` replays the ring schedules (symbolically) without error."""
    out = simulate(DualCube(3), collective)
    assert out["delivered"] == out["expected"] and out["conflicts"] == 0
    assert out["rounds"] == out["paper_rounds"]


@pytest.mark.parametrize("module", ["dualmpi.collectives.ring", "dualmpi.collectives.schedule"])
def test_doctests(module):
    """The docstring examples run."""
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0
