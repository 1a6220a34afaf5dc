"""The virtual model clock: it reproduces the papers' formulas for conflict-free schedules."""

import pytest

from dualmpi.collectives import COLLECTIVES, build_schedule
from dualmpi.errors import DualmpiError
from dualmpi.engine import run_inprocess
from dualmpi.model.clock import ClockParams, parse_shape
from dualmpi.commands.options import make_options
from dualmpi.simulator import simulate
from dualmpi.topology import from_spec

SPECS = ["hypercube:n=3", "hypercube:n=5", "dualcube:r=2", "dualcube:r=3", "dualcube:r=4",
         "metacube:k=1,m=2", "metacube:k=2,m=1"]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_unit_clocks_give_the_schedule_coefficients(spec, collective):
    """Under the papers' conflict model the clock's time is exactly a*t_s + b*m*t_w + c*t_h."""
    topo = from_spec(spec)
    res = run_inprocess(build_schedule(collective, topo, 1), 16)
    model = simulate(topo, collective, 1, method="schedule")["model"]
    assert {k: res.virtual[k] for k in ("ts", "tw", "th")} == model
    assert res.virtual["delayed_hops"] == [0, 0, 0]


@pytest.mark.parametrize("spec", [s for s in SPECS if s != "dualcube:r=4"])
@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("switching", ["cut-through", "store-and-forward"])
def test_model_clock_time(spec, collective, switching):
    """With real parameters and short messages the time is the formula (cut-through) or
    each step's hops times t_s + n t_w (store-and-forward)."""
    topo = from_spec(spec)
    size, p = 64, ClockParams(1e-5, 1e-9, 2e-6, switching)
    sched = build_schedule(collective, topo, 0)
    res = run_inprocess(sched, size, p)
    model = simulate(topo, collective, 0, method="schedule")["model"]
    if switching == "cut-through":
        want = model["ts"] * p.ts + model["tw"] * size * p.tw + model["th"] * p.th
    else:
        per_step = {}
        for rnd in sched.rounds:
            big = max(len(tr.blocks) for tr in rnd.transfers)
            hops, blocks = per_step.get(rnd.step, (0, 0))
            per_step[rnd.step] = (max(hops, rnd.hop + 1), max(blocks, big))
        want = sum(h * (p.ts + b * size * p.tw) for h, b in per_step.values())
    assert res.virtual["time"] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("spec,delayed", [("hypercube:n=5", False), ("dualcube:r=3", True),
                                          ("metacube:k=2,m=1", True)])
def test_physical_contention_of_long_messages(spec, delayed):
    """Bodies of long messages overlap on links used at different hop indices of one step.

    The papers' conflict-freedom (one message per link per hop index) keeps the hypercube's
    e-cube exchange contention-free at any size, but not the dual-cube's or metacube's.
    """
    topo = from_spec(spec)
    params = ClockParams(1e-5, 1e-9, 1e-6)
    res = run_inprocess(build_schedule("alltoall", topo), 65536, params)
    model = simulate(topo, "alltoall", method="schedule")["model"]
    formula = model["ts"] * params.ts + model["tw"] * 65536 * params.tw + model["th"] * params.th
    assert (res.virtual["delayed_hops"][3] > 0) == delayed
    if delayed:
        assert res.virtual["time"] > 1.2 * formula
    else:
        assert res.virtual["time"] == pytest.approx(formula, rel=1e-12)


def test_parse_shape_and_options():
    assert parse_shape("ts=1e-3, th=2e-4") == {"ts": 1e-3, "tw": 0.0, "th": 2e-4}
    for bad in ("ts=x", "tq=1", "ts=-1", "ts"):
        with pytest.raises(ValueError):
            parse_shape(bad)
    opts = make_options("ts=1e-3,tw=1e-9,th=1e-4", "cut-through", 4)
    assert opts.model_clock.switching == "cut-through" and opts.packets == 4
    with pytest.raises(DualmpiError):
        make_options(None, "wormhole")
    with pytest.raises(DualmpiError):
        make_options(None, "cut-through", 0)


# --- shared link bandwidth (issue 15, item 2) ------------------------------------------------

def test_shared_link_bodies_take_turns():
    """Two bodies on one link at once take 2 n t_w together; a later body fills the gaps."""
    from dualmpi.model.clock import NodeClock

    node = NodeClock(ClockParams(0.0, 1.0, 0.5))
    first = node.depart(9, 4, (), 3, (0.0, 10.0))      # forwarded: trailer (tail, head)
    second = node.depart(9, 4, (), 3, (0.0, 10.0))
    assert first == (14.0, 10.5) and second == (18.0, 10.5)   # heads pass, bodies queue
    assert node.contention == 4.0 and node.delayed_hops == 1
    node.link_busy[7] = [(0.0, 1.0), (2.0, 3.0)]
    assert node._stream(7, 0.5, 1.5) == 3.5                    # [1, 2] and [3, 3.5]
    assert sorted(node.link_busy[7])[-1] == (3.0, 3.5)


@pytest.mark.parametrize("contention", ["shared", "physical", "slot"])
@pytest.mark.parametrize("spec", ["dualcube:r=3", "metacube:k=2,m=1"])
def test_schedule_time_equals_the_executor_clock(spec, contention):
    """Replaying the schedule on clocks alone gives the executor's virtual time exactly."""
    from dualmpi.model.clock import schedule_time

    params = ClockParams(2e-6, 1e-9, 5e-8, contention=contention)
    sched = build_schedule("alltoall", from_spec(spec))
    res = run_inprocess(sched, 4096, params)
    ct = schedule_time(sched, 4096, params)
    assert ct["time"] == res.virtual["time"]
    assert ct["delayed_hops"] == res.virtual["delayed_hops"][3]


def test_shared_clock_between_formula_and_step_bound():
    """Shared links: never below the paper's T, never above every step fully overlapping."""
    for spec in ("dualcube:r=3", "metacube:k=2,m=1"):
        for size in (64, 1024, 65536):
            v = simulate(from_spec(spec), "alltoall", clock=ClockParams(2e-6, 1e-9, 5e-8),
                         size=size)["virtual"]
            assert v["paper_time"] * (1 - 1e-12) <= v["clock_time"] <= v["sharing_bound"] * (1 + 1e-12)


def test_bad_clock_params():
    with pytest.raises(ValueError):
        ClockParams(contention="wormhole")
    with pytest.raises(ValueError):
        ClockParams(switching="wormhole")


@pytest.mark.parametrize("module", ["dualmpi.model.clock", "dualmpi.simulator"])
def test_doctests(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
