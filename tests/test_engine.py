"""The engine's pure layers: array schedules, layouts, the plan compiler, the local transport."""

import doctest
import importlib

import numpy as np
import pytest

from dualmpi.collectives import COLLECTIVES, build_schedule
from dualmpi.engine import Layout, alltoall_arrays, compile_rank, from_schedule, run_inprocess
from dualmpi.engine.layout import split_offsets, split_sizes
from dualmpi.engine.local import LocalRunner, run_local
from dualmpi.engine.stream import StepPlan, class_link
from dualmpi.errors import DualmpiError, LinkError
from dualmpi.collectives.schedule import Round, Schedule, Transfer
from dualmpi.topology import from_spec
from semantics import rank_buffers

MODULES = ["arrays", "layout", "plan", "core", "local", "virtual", "stream", "watchdog", "patterns"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    mod = importlib.import_module(f"dualmpi.engine.{name}")
    assert doctest.testmod(mod).failed == 0


@pytest.mark.parametrize("spec", ["hypercube:n=4", "dualcube:r=2", "dualcube:r=3",
                                  "metacube:k=2,m=1", "metacube:k=1,m=2"])
def test_vectorised_total_exchange_is_the_schedule(spec):
    """alltoall_arrays moves exactly the blocks of the Transfer schedule, round by round."""
    topo = from_spec(spec)
    a, b = alltoall_arrays(topo), from_schedule(build_schedule("alltoall", topo))
    assert (a.num_rounds, a.messages, a.steps) == (b.num_rounds, b.messages, b.steps)
    for x, y in zip(a.rounds, b.rounds):
        key = lambda r: sorted(zip(r.src.tolist(), r.dst.tolist(), r.origin.tolist(),  # noqa: E731
                                   r.target.tolist()))
        assert (x.step, x.hop) == (y.step, y.hop) and key(x) == key(y)


def test_split_sizes_cover_the_piece():
    for total in (0, 1, 7, 64, 1000):
        for parts in (1, 2, 3, 16):
            sizes = [int(split_sizes(total, parts, i)) for i in range(parts)]
            offs = [int(split_offsets(total, parts, i)) for i in range(parts)]
            assert sum(sizes) == total and offs == list(np.cumsum([0] + sizes[:-1]))


@pytest.mark.parametrize("collective", ["bcast", "scatter", "allgather", "alltoall"])
@pytest.mark.parametrize("q", [1, 2, 4])
def test_layout_outputs_tile_the_receive_buffer(collective, q):
    """Every byte of a rank's receive buffer belongs to exactly one output block."""
    p, m = 16, 37
    lay = Layout(collective, p, q, m, root=1)
    ranks = p // q
    want = {"bcast": m, "scatter": m, "allgather": ranks * m, "alltoall": ranks * m}[collective]
    for r in range(ranks):
        if collective == "bcast" and r == 1:
            continue
        _, origin, target, off = lay.outputs(r)
        cover = np.zeros(want, dtype=int)
        for o, n in zip(off.tolist(), lay.size(origin, target).tolist()):
            cover[o:o + n] += 1
        assert (cover == 1).all()


def _local_run(spec, collective, q, piece, packets=1, root=0):
    """Run ``collective`` through compiled plans for every rank, with rank-level patterns."""
    topo = from_spec(spec)
    p = topo.num_nodes
    ranks = p // q
    sched = from_schedule(build_schedule(collective, topo, root * q)) if collective != "alltoall" \
        else alltoall_arrays(topo)
    lay = Layout(collective, p, q, piece, root)
    runners, sends, recvs, wants = [], [], [], []
    for r in range(ranks):
        plan = compile_rank(sched, q, r, root)
        runners.append(LocalRunner(plan.bind(lay, packets), plan))
        send, want = rank_buffers(collective, ranks, r, root, piece)
        sends.append(send)
        wants.append(want)
        recvs.append(send if collective == "bcast" else np.zeros(want.size, np.uint8))
    if collective == "bcast":  # the root's buffer goes in, every other rank's comes out
        run_local(runners, [x if r == root else None for r, x in enumerate(sends)],
                  [None if r == root else x for r, x in enumerate(recvs)])
    else:
        run_local(runners, sends, recvs)
    return [np.array_equal(got, want) for got, want in zip(recvs, wants)]


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("spec,q", [("dualcube:r=2", 1), ("dualcube:r=2", 2), ("dualcube:r=3", 4),
                                    ("metacube:k=2,m=1", 8), ("hypercube:n=4", 16)])
def test_user_buffers_through_compiled_plans(collective, spec, q):
    """The rank-level results of MPI's semantics, for one or several nodes per rank."""
    assert all(_local_run(spec, collective, q, 3 * q * q + 1))


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("packets", [2, 5])
def test_pipelined_plans_deliver_the_same(collective, packets):
    """Blocks cut into pieces one round apart (cut-through) still arrive intact."""
    assert all(_local_run("dualcube:r=3", collective, 2, 50, packets, root=3))
    assert all(_local_run("metacube:k=2,m=1", collective, 1, 23, packets, root=5))


def test_plan_counts_links_at_compile_time():
    topo = from_spec("dualcube:r=2")
    res = run_inprocess(build_schedule("allgather", topo), 6)
    assert res.verified and res.messages == 32 and set(res.link_messages) <= set(topo.links()) | {
        (v, u) for u, v in topo.links()}


def test_compiler_refuses_a_non_link_and_data_not_held():
    topo = from_spec("dualcube:r=2")
    bad = Schedule("bcast", "t", topo, 0, [Round(0, 0, [Transfer(0, 3, ((0, -1),))])], 1)
    with pytest.raises(LinkError):
        from_schedule(bad)
    lacking = Schedule("bcast", "t", topo, 0, [Round(0, 0, [Transfer(1, 0, ((0, -1),))])], 1)
    with pytest.raises(DualmpiError, match="does not hold"):
        from_schedule(lacking)


@pytest.mark.parametrize("spec", ["hypercube:n=5", "dualcube:r=3", "metacube:k=2,m=1",
                                  "metacube:k=1,m=2", "metacube:k=3,m=1"])
def test_links_depend_only_on_the_class(spec):
    """What the streamed total exchange's link check relies on: u ~ u^x depends on u's class."""
    topo = from_spec(spec)
    plan = StepPlan(topo, 1)
    p, shift = topo.num_nodes, plan._class_shift()
    xs = sorted({u ^ v for u in range(p) for v in topo.neighbors(u)} | {3, 5, p - 1})
    for u in range(p):
        rep = (u >> shift) << shift
        for x in xs:
            assert class_link(topo, u, x) == class_link(topo, rep, x)


def test_auto_pipelining_cuts_only_large_tree_blocks():
    """``packets="auto"`` (the Comm's constants): broadcast and scatter blocks above 256 KiB
    in 256 KiB pieces, the all-to-all patterns whole (docs/performance.md, Pipelining)."""
    from dualmpi.comm import PACKET_BYTES, PACKETS_ABOVE, PIPELINED
    from dualmpi.engine.core import Engine
    from dualmpi.engine.layout import Layout, layout_kind
    from dualmpi.engine.local import LocalTransport

    topo = from_spec("dualcube:r=2")
    eng = Engine(topo, 1, LocalTransport(), packets_above=PACKETS_ABOVE,
                 packet_bytes=PACKET_BYTES, pipelined=PIPELINED)

    def pieces(coll, nbytes):
        return eng.packets_for(Layout(layout_kind(coll), 8, 1, nbytes), coll)

    assert [pieces("bcast", n) for n in (1 << 18, (1 << 18) + 1, 1 << 20, 1 << 24)] == \
        [1, 2, 4, 16]
    assert pieces("scatter", 1 << 20) == 4
    assert pieces("allgather", 1 << 20) == pieces("alltoall", 1 << 20) == 1

    # where no rank forwards a block to another, blocks stay whole: Q_1 on 2 ranks (its
    # broadcast is one message), Q_3 on 2 ranks of 4 nodes; D_2 on 2 ranks forwards
    for spec, q, cut in (("hypercube:n=1", 1, False), ("hypercube:n=3", 4, False),
                         ("hypercube:n=3", 2, True), ("dualcube:r=2", 4, True)):
        net = from_spec(spec)
        eng = Engine(net, q, LocalTransport(), packets_above=PACKETS_ABOVE,
                     packet_bytes=PACKET_BYTES, pipelined=PIPELINED)
        for coll in ("bcast", "scatter"):
            for root in range(net.num_nodes // q):
                layout = Layout(layout_kind(coll), net.num_nodes, q, (1 << 20) * q, root)
                assert (eng.packets_for(layout, coll) > 1) == cut, (spec, q, coll, root)


def test_nonblocking_binds_take_the_pieces_asked_for():
    """``Engine.bind`` (the nonblocking calls' plans) cuts blocks as ``packets`` says, as the
    blocking runner does; ``None`` is the automatic choice, combined blocks move whole."""
    from dualmpi.comm import PACKET_BYTES, PACKETS_ABOVE, PIPELINED
    from dualmpi.engine.core import Engine
    from dualmpi.engine.local import LocalTransport

    eng = Engine(from_spec("dualcube:r=2"), 1, LocalTransport(), packets_above=PACKETS_ABOVE,
                 packet_bytes=PACKET_BYTES, pipelined=PIPELINED)
    auto, sig_auto = eng.bind(0, "alltoall", 4096)
    three, sig_three = eng.bind(0, "alltoall", 4096, packets=3)
    assert (auto.packets, three.packets) == (1, 3) and sig_auto != sig_three
    assert eng.bind(0, "bcast", 1 << 20)[0].packets == 4
    assert eng.bind(0, "bcast", 1 << 20, packets=1)[0].packets == 1
    assert eng.bind(0, "allreduce-tree", 4096, itemsize=8, combines=True, packets=3)[0].packets == 1
