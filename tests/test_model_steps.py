"""The papers' step cost of a call at its real block sizes (``dualmpi.model.steps``,
``Engine.cost``): equal to ``dualmpi simulate``'s coefficients for equal blocks, and to a sum
over the schedule's transfers for the v-variants (pure)."""

import doctest
import importlib

import numpy as np
import pytest

from dualmpi.collectives import build_schedule
from dualmpi.engine.core import Engine
from dualmpi.engine.local import LocalTransport
from dualmpi.model.steps import collective_time, p2p_time, step_bytes
from dualmpi.simulator import simulate
from dualmpi.topology import from_spec


@pytest.mark.parametrize("module", ["dualmpi.model.steps", "dualmpi.calls"])
def test_doctests(module):
    """The modules' examples run (the step sums, the nonblocking calls' tally)."""
    assert doctest.testmod(importlib.import_module(module)).failed == 0


@pytest.mark.parametrize("spec", ["hypercube:n=3", "dualcube:r=2", "dualcube:r=3",
                                  "metacube:k=1,m=2"])
@pytest.mark.parametrize("q", [1, 2])
@pytest.mark.parametrize("collective", ["bcast", "scatter", "allgather", "alltoall"])
def test_equal_blocks_give_the_simulators_coefficients(spec, q, collective):
    """With blocks of m bytes the cost is simulate()'s model: steps, tw * m, th (hop rounds)."""
    topo = from_spec(spec)
    m = 96
    # the bytes of the call that make node-level blocks of m bytes
    nbytes = {"bcast": m, "scatter": m * q, "allgather": m * q, "alltoall": m * q * q}[collective]
    rounds, steps, largest = Engine(topo, q, LocalTransport()).cost(collective, nbytes, 1)
    model = simulate(topo, collective, q)["model"]
    assert (steps, largest, rounds) == (model["ts"], model["tw"] * m, model["th"])


def _by_transfers(topo, collective, size_of, root=0):
    """Sum over steps of the largest message, from the Transfer objects of the schedule."""
    sched = build_schedule(collective, topo, root)
    largest = {}
    for rnd in sched.rounds:
        for tr in rnd.transfers:
            n = sum(size_of(*block) for block in tr.blocks)
            largest[rnd.step] = max(largest.get(rnd.step, 0), n)
    return sum(largest.values())


@pytest.mark.parametrize("spec", ["hypercube:n=3", "dualcube:r=2"])
def test_v_variants_price_each_block_at_its_size(spec):
    """Gatherv and allgatherv with a count per rank: each step's largest message summed from
    the blocks it carries (rank r's block is counts[r] bytes)."""
    topo = from_spec(spec)
    p = topo.num_nodes
    counts = np.array([(7 * r + 3) % 11 for r in range(p)], dtype=np.int64)
    eng = Engine(topo, 1, LocalTransport())
    for collective, schedule in (("gatherv", "gather"), ("allgatherv", "allgather")):
        want = _by_transfers(topo, schedule, lambda origin, target: int(counts[origin]))
        assert eng.cost(collective, counts, 0)[2] == want, collective
    assert want > int(counts.max())  # more than one step, not all of the same size


def test_step_bytes_takes_the_largest_message_of_each_step():
    """Blocks of one message add up; a step's rounds (a routed message's hops) count once."""
    bounds, steps = [0, 3, 5, 6], [0, 0, 1]
    msg = np.array([0, 0, 1, 0, 1, 0])
    sizes = np.array([2, 3, 4, 6, 1, 7])
    assert step_bytes(bounds, steps, msg, sizes) == 6 + 7
    assert step_bytes([0, 0], [0], np.zeros(0, int), np.zeros(0, int)) == 0


def test_the_time_formulas():
    clock = {"ts": 2e-6, "tw": 1e-9, "th": 5e-8}
    assert collective_time(4, 1000, 6, clock) == pytest.approx(4 * 2e-6 + 1000e-9 + 6 * 5e-8)
    assert p2p_time(3, 300, 5, clock) == pytest.approx(3 * 2e-6 + 300e-9 + 5 * 5e-8)
