"""``dualmpi run``'s link sharing and contention-aware model clock, without MPI (pure tier).

``run`` computes both on rank 0 from the schedule (``_virtual``, ``simulate``); these tests
check that it reports what ``dualmpi simulate`` reports for the same parameters.
"""

import pytest

from dualmpi.cli import build_parser
from dualmpi.commands.run import _virtual, format_sharing
from dualmpi.model.clock import ClockParams
from dualmpi.commands.options import make_options
from dualmpi.simulator import simulate
from dualmpi.topology import from_spec

FAST = "ts=2e-6,tw=1e-9,th=5e-8"  # `dualmpi model`'s defaults: bodies overlap at 64 KiB


@pytest.mark.parametrize("spec, shared", [("dualcube:r=2", True), ("hypercube:n=3", False)])
def test_run_clock_is_simulates_shared_clock(spec, shared):
    """Cut-through --model: run's t_model is simulate's clock_time; above the paper's T iff links are shared."""
    topo = from_spec(spec)
    options = make_options(None, "cut-through", 8, FAST)
    sim = simulate(topo, "alltoall")
    got = _virtual(topo, "alltoall", 0, 65536, options, sim)["model_clock"]
    want = simulate(topo, "alltoall", clock=ClockParams(2e-6, 1e-9, 5e-8), size=65536)["virtual"]
    assert got["contention"] == "shared"
    for key in ("paper_time", "sharing_bound", "clock_time", "contention_delay", "delayed_hops"):
        assert got[key] == pytest.approx(want[key]), key
    assert (sim["link_sharing"]["max"] > 1) is shared
    assert (got["clock_time"] > got["paper_time"] * 1.01) is shared
    assert (got["contention_delay"] > 0) is shared


def test_run_store_and_forward_clock_has_no_paper_time():
    """Without cut-through the formula (a cut-through time) is not shown beside t_model."""
    topo = from_spec("dualcube:r=2")
    options = make_options(None, "store-and-forward", 8, FAST)
    v = _virtual(topo, "bcast", 0, 1024, options, simulate(topo, "bcast"))
    assert v["model_clock"]["paper_time"] is None and v["model_clock"]["clock_time"] == v["time"]


def test_run_without_model_has_no_model_clock():
    """No --model and no --shape: only the unit clocks' coefficients."""
    topo = from_spec("dualcube:r=2")
    v = _virtual(topo, "alltoall", 0, 1024, make_options(), simulate(topo, "alltoall"))
    assert "model_clock" not in v and (v["ts"], v["tw"], v["th"]) == (7.0, 7.0, 16.0)


def test_format_sharing_reads_simulate():
    """The table cell: the most messages on one link, and in how many steps of all."""
    sharing = simulate(from_spec("dualcube:r=3"), "alltoall")["link_sharing"]
    assert format_sharing(sharing) == "2 (19/31 steps)"


def test_run_help_names_link_sharing(capsys):
    """`dualmpi run --help` says what link sharing and the shared-bandwidth clock are."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "link sharing" in text and "share its bandwidth" in text and "t_paper" in text
