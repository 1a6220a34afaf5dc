"""Pure tests: every collective's schedule, run by the in-process executor, against the papers."""

import pytest

from dualmpi.collectives import (
    COLLECTIVES,
    build_schedule,
    count_conflicts,
    node_program,
    paper_steps,
)
from dualmpi.collectives import bcast
from dualmpi.errors import DualmpiError, LinkError, NodeError
from dualmpi.engine import run_inprocess
from dualmpi.collectives.schedule import Round, Schedule, Transfer
from dualmpi.topology import DualCube, Hypercube, MetaCube, from_spec

DUALCUBES = [f"dualcube:r={r}" for r in range(1, 5)]
HYPERCUBES = [f"hypercube:n={n}" for n in range(0, 8)]
METACUBES = ["metacube:k=0,m=2", "metacube:k=1,m=1", "metacube:k=1,m=2", "metacube:k=2,m=1"]
SPECS = DUALCUBES + HYPERCUBES + METACUBES


def _max_blocks_per_step(schedule):
    """Return the largest message (in blocks) of each paper step."""
    out = {}
    for rnd in schedule.rounds:
        big = max(len(tr.blocks) for tr in rnd.transfers)
        out[rnd.step] = max(out.get(rnd.step, 0), big)
    return [out[s] for s in sorted(out)]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_every_block_delivered(spec, collective):
    topo = from_spec(spec)
    root = topo.num_nodes // 3
    for size in (0, 3):
        res = run_inprocess(build_schedule(collective, topo, root), size)
        assert res.errors == []
        assert res.missing == [] and res.corrupt == []
        assert res.delivered == res.expected
        assert res.verified


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_step_count_matches_paper(spec, collective):
    topo = from_spec(spec)
    sched = build_schedule(collective, topo, 0)
    if isinstance(topo, DualCube) and topo.r == 1 and collective != "alltoall":
        # F_1 is a single link: the paper's 2r = 2 steps collapse to 1 (no cluster links)
        assert sched.steps == 1
    else:
        assert sched.steps == paper_steps(collective, topo)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("collective", ["bcast", "scatter"])
def test_one_port_tree(spec, collective):
    """Every node but the root receives exactly once, and sends at most once per step."""
    topo = from_spec(spec)
    sched = build_schedule(collective, topo, topo.num_nodes - 1)
    receivers = [tr.dst for _, _, tr in sched.transfers()]
    assert sorted(receivers) == [u for u in range(topo.num_nodes) if u != topo.num_nodes - 1]
    assert sched.num_messages == topo.num_nodes - 1
    for rnd in sched.rounds:
        senders = [tr.src for tr in rnd.transfers]
        assert len(senders) == len(set(senders))


@pytest.mark.parametrize("spec", ["hypercube:n=3", "hypercube:n=6", "dualcube:r=3", "dualcube:r=4"])
def test_scatter_halves_messages(spec):
    """The root's messages shrink by half each step (Section 4, one-to-all personalized)."""
    topo = from_spec(spec)
    sched = build_schedule("scatter", topo, 0)
    sizes = [len(tr.blocks) for _, _, tr in sched.transfers() if tr.src == 0]
    assert sizes[0] == topo.num_nodes // 2
    assert all(a > b for a, b in zip(sizes, sizes[1:]))
    assert sum(sizes) == topo.num_nodes - 1


@pytest.mark.parametrize("r", [2, 3, 4])
def test_dualcube_scatter_tw_coefficient(r):
    """Sum over steps of the largest message: p - 1 + 2^r - 1 blocks (erratum D3: paper says p - 1)."""
    topo = DualCube(r)
    per_step = _max_blocks_per_step(build_schedule("scatter", topo, 0))
    p = topo.num_nodes
    assert sum(per_step) == p - 1 + 2**r - 1
    assert per_step[0] == p // 2


@pytest.mark.parametrize("spec", SPECS)
def test_allgather_tw_coefficient(spec):
    """All-to-all broadcast moves p - 1 blocks along its critical path, as Table 2 states."""
    topo = from_spec(spec)
    per_step = _max_blocks_per_step(build_schedule("allgather", topo)) if topo.num_nodes > 1 else []
    assert sum(per_step) == topo.num_nodes - 1


@pytest.mark.parametrize("spec", SPECS)
def test_allgather_every_node_sends_once_per_step(spec):
    topo = from_spec(spec)
    sched = build_schedule("allgather", topo)
    for rnd in sched.rounds:
        assert sorted(tr.src for tr in rnd.transfers) == list(range(topo.num_nodes))


def _hops_from(sched, src):
    """Return the total number of hops of the messages ``src`` originates."""
    return sum(1 for _, _, tr in sched.transfers() if tr.header[0] == src)


@pytest.mark.parametrize("spec", SPECS)
def test_alltoall_routes_shortest_and_conflict_free(spec):
    topo = from_spec(spec)
    sched = build_schedule("alltoall", topo)
    assert count_conflicts(sched) == 0
    p = topo.num_nodes
    lengths = {}
    for _, _, tr in sched.transfers():
        lengths[tr.header] = lengths.get(tr.header, 0) + 1
    assert len(lengths) == p * (p - 1)
    assert all(n == topo.distance(*key) for key, n in lengths.items())
    # every step: all sources' destinations at the same distance, each node sends exactly once
    for step in range(sched.steps):
        firsts = [tr for rnd in sched.rounds if rnd.step == step and rnd.hop == 0
                  for tr in rnd.transfers]
        assert sorted(tr.src for tr in firsts) == list(range(p))
        assert len({lengths[tr.header] for tr in firsts}) == 1


@pytest.mark.parametrize("r", [1, 2, 3, 4])
def test_dualcube_alltoall_th_coefficient(r):
    """Total hops from one source = (r + 1/2) 2^(2r-1) - 2^r = p/2 (2 + log p) - sqrt(2p) (Table 2)."""
    topo = DualCube(r)
    sched = build_schedule("alltoall", topo)
    expected = (2 * r + 1) * 2 ** (2 * r - 2) - 2**r
    for src in (0, topo.num_nodes - 1):
        assert _hops_from(sched, src) == expected


@pytest.mark.parametrize("n", [1, 3, 5, 7])
def test_hypercube_alltoall_th_coefficient(n):
    """Total hops from one source = (p/2) log p (Table 2, hypercube column)."""
    topo = Hypercube(n)
    sched = build_schedule("alltoall", topo)
    assert _hops_from(sched, 0) == (1 << n) * n // 2


def test_dualcube_alltoall_paper_example():
    """Section 6.1: in step (i=0, j=1) node 00000 sends to 10100 and receives from 10001."""
    topo = DualCube(3)
    sched = build_schedule("alltoall", topo)
    step = 3 + 1  # stage 1 has 2^(r-1) - 1 = 3 steps, then (i=0, j=0), (i=0, j=1)
    firsts = [tr for rnd in sched.rounds if rnd.step == step for tr in rnd.transfers]
    ends = {tr.header for tr in firsts}
    assert (0b00000, 0b10100) in ends
    assert (0b10001, 0b00000) in ends
    assert (0b10100, 0b00101) in ends


@pytest.mark.parametrize("root", range(32))
def test_dualcube_bcast_every_root(root):
    topo = DualCube(3)
    for coll in ("bcast", "scatter"):
        assert run_inprocess(build_schedule(coll, topo, root), 2).verified


@pytest.mark.parametrize("r,root", [(2, 5), (3, 0), (4, 0)])
def test_algorithm1_as_printed_fails(r, root):
    """Erratum D1: Algorithm 1's printed conditions leave nodes without the message."""
    res = run_inprocess(bcast.build(DualCube(r), root, variant="as-printed"), 1)
    assert not res.verified
    assert res.missing
    assert any("does not hold" in e for e in res.errors)


def test_node_program_projects_the_schedule():
    topo = DualCube(2)
    sched = build_schedule("allgather", topo)
    prog = node_program(sched, 3)
    assert len(prog) == sched.num_rounds
    for nr in prog:
        assert all(tr.src == 3 for tr in nr.sends)
        assert all(tr.dst == 3 for tr in nr.recvs)


def test_non_neighbour_send_raises():
    topo = DualCube(2)
    bad = Schedule("bcast", "test", topo, 0, [Round(0, 0, [Transfer(0, 3, ((0, -1),))])], 1)
    assert not topo.is_link(0, 3)
    with pytest.raises(LinkError, match="node 0 and node 3 are not neighbours"):
        run_inprocess(bad, 4)


def test_bad_inputs():
    topo = DualCube(2)
    with pytest.raises(NodeError):
        build_schedule("bcast", topo, 8)
    with pytest.raises(DualmpiError, match="unknown collective 'allsum'"):
        build_schedule("allsum", topo)
    with pytest.raises(DualmpiError, match="variant"):
        build_schedule("scatter", topo, 0, variant="as-printed")
    with pytest.raises(DualmpiError, match="MC\\(2, m\\)"):
        build_schedule("alltoall", MetaCube(1, 2), variant="as-printed")


def test_reduce_transfers_sum_into_the_receiver():
    """A reduction step adds the received blocks into the receiver's own copies (mod 256)."""
    from dualmpi.collectives.schedule import REDUCED

    topo = Hypercube(1)
    blocks = ((REDUCED, 0), (REDUCED, 1))
    swap = Round(0, 0, [Transfer(0, 1, blocks, reduce=True), Transfer(1, 0, blocks, reduce=True)])
    assert run_inprocess(Schedule("allreduce", "exchange-add", topo, None, [swap], 1), 5).verified
    one_way = Round(0, 0, [Transfer(0, 1, blocks, reduce=True)])
    res = run_inprocess(Schedule("allreduce", "half", topo, None, [one_way], 1), 5)
    assert not res.verified and len(res.corrupt) == 2  # node 0 still has only its own part
