"""Reductions (reduce, allreduce, scan, exscan) run by the engine in process, against numpy.

The same compiled plans an MPI job runs (:class:`dualmpi.engine.local.LocalTransport`),
every rank's buffers in one process; results are compared with numpy's reduction of
the same contributions, exactly for integers.
"""

import numpy as np
import pytest

from dualmpi.collectives import allreduce, reduce, scan
from dualmpi.collectives.schedule import ALL, REDUCED
from dualmpi.engine.arrays import from_schedule
from dualmpi.engine.core import Engine, array_schedule
from dualmpi.engine.local import LocalTransport, run_local
from dualmpi.errors import DualmpiError, InputError
from dualmpi.ops import resolve
from dualmpi.topology import from_spec

SPECS = ["hypercube:n=3", "dualcube:r=2", "dualcube:r=3", "metacube:k=2,m=1", "ccc:n=3",
         "rh:k=2,n=1", "hypercube:n=0"]


def _kinds(topo):
    return ["reduce", "scan", "exscan"] + [f"allreduce-{a}" for a in allreduce.available(topo)]


def _run(spec, q, coll, xs, ufunc=np.add, root=0):
    """Run ``coll`` on the contributions ``xs`` (one array per rank); return the outputs."""
    topo = from_spec(spec)
    eng = Engine(topo, q, LocalTransport())
    dtype = xs[0].dtype
    op = resolve(ufunc, dtype, coll)
    runs = [eng.runner(r, coll, xs[0].nbytes, root, itemsize=dtype.itemsize, op=op)
            for r in range(len(xs))]
    outs = [np.full(xs[0].size, 99, dtype) for _ in xs]
    run_local(runs, [x.view(np.uint8) for x in xs], [o.view(np.uint8) for o in outs])
    return outs


def _want(coll, xs, ufunc, r, root):
    if coll == "reduce":
        return ufunc.reduce(np.array(xs), axis=0) if r == root else None
    if coll == "scan":
        return ufunc.reduce(np.array(xs[:r + 1]), axis=0)
    if coll == "exscan":
        return ufunc.reduce(np.array(xs[:r]), axis=0) if r else None
    return ufunc.reduce(np.array(xs), axis=0)


#: (spec, q): every network with 1, 2 and 4 nodes per rank; the 32- and 64-node networks run
#: here with 4 nodes per rank (8 or 16 ranks in one process), with 1 and 2 they are slow (the
#: MPI tier runs them with one node per rank at 32 and 64 ranks).
CASES = [pytest.param(spec, q, id=f"{spec}-q{q}",
                      marks=pytest.mark.slow if q < 4 and from_spec(spec).num_nodes >= 32 else ())
         for spec in SPECS for q in (1, 2, 4) if from_spec(spec).num_nodes % q == 0]


@pytest.mark.parametrize("spec, q", CASES)
def test_every_reduction_equals_numpy(spec, q):
    """Every kind and allreduce algorithm, several ops and sizes, roots first and last."""
    topo = from_spec(spec)
    R = topo.num_nodes // q
    rng = np.random.default_rng(R)
    for coll in _kinds(topo):
        for ufunc, dtype in ((np.add, np.int64), (np.maximum, np.int32), (np.bitwise_xor, np.uint8),
                             (np.multiply, np.int16)):
            for n in (0, 1, 5, 37):
                lo, hi = (-1, 2) if ufunc is np.multiply else (-50, 50)
                xs = [rng.integers(lo, hi, n).astype(dtype) for _ in range(R)]
                for root in ({0, R - 1} if coll == "reduce" else {0}):
                    outs = _run(spec, q, coll, xs, ufunc, root)
                    for r in range(R):
                        want = _want(coll, xs, ufunc, r, root)
                        if want is None:
                            assert np.all(outs[r] == 99), (coll, r)  # left as it was
                        else:
                            assert np.array_equal(outs[r], want), (coll, ufunc.__name__, n, r)


def test_floats_sum_to_rounding():
    xs = [np.random.default_rng(r).standard_normal(1000) for r in range(8)]
    for coll in ("allreduce-rsag", "allreduce-tree", "scan"):
        outs = _run("dualcube:r=2", 1, coll, xs)
        assert np.allclose(outs[7], np.sum(xs, axis=0))


@pytest.mark.parametrize("spec", SPECS[:5])
def test_schedules_use_links_and_hold_what_they_send(spec):
    """Every reduction compiles strictly: each transfer a link, each block held when sent."""
    topo = from_spec(spec)
    for q in (1, 2):
        for coll in _kinds(topo):
            arr = array_schedule(topo, coll, 0, q=q)
            assert arr.messages > 0 or topo.num_nodes // q == 1


def test_reduce_is_the_broadcast_reversed():
    """The reduce tree has the broadcast's rounds and messages, every edge turned round."""
    from dualmpi.collectives import build_schedule

    topo = from_spec("dualcube:r=3")
    fwd = build_schedule("bcast", topo, 5)
    back = reduce.build(topo, 5)
    assert back.num_rounds == fwd.num_rounds and back.num_messages == fwd.num_messages
    edges = {(tr.src, tr.dst) for _, _, tr in fwd.transfers()}
    assert {(tr.dst, tr.src) for _, _, tr in back.transfers()} == edges
    assert all(tr.reduce == (True,) for _, _, tr in back.transfers())


def test_rsag_moves_the_allgather_volume_twice():
    """Reduce-scatter + allgather: each node sends (p-1) segments in each half (dual-cube)."""
    topo = from_spec("dualcube:r=3")
    s = allreduce.build(topo, "rsag")
    sent = {}
    for _, _, tr in s.transfers():
        sent[tr.src] = sent.get(tr.src, 0) + len(tr.blocks)
    assert set(sent.values()) == {2 * (topo.num_nodes - 1)}
    assert allreduce.cost(s) == (12, 2 * 31 / 32)


def test_choose_follows_the_model():
    """Short vectors take the fewest steps, long ones the fewest words."""
    table = allreduce.costs(from_spec("hypercube:n=5"))
    assert table["exchange"] == (5, 5.0) and table["rsag"] == (10, 2 * 31 / 32)
    assert allreduce.choose(8, table) == "exchange"
    assert allreduce.choose(1 << 20, table) == "rsag"
    # the crossover: 5 ts = (5 - 1.9375) m tw
    m = 5 * allreduce.MODEL_TS / ((5 - 2 * 31 / 32) * allreduce.MODEL_TW)
    assert allreduce.choose(int(m * 0.9), table) == "exchange"
    assert allreduce.choose(int(m * 1.1), table) == "rsag"


def test_scan_messages_are_routed_and_combined_only_at_the_end():
    """Scan messages travel multi-hop routes; nodes in between carry them, only the
    destination combines."""
    topo = from_spec("dualcube:r=2")
    s = scan.build(topo)
    hops = {}
    for _, _, tr in s.transfers():
        hops.setdefault(tr.header, []).append(tr)
        assert topo.is_link(tr.src, tr.dst)
    assert max(len(v) for v in hops.values()) >= 2
    for (a, b, _), path in hops.items():
        assert path[0].src == a and path[-1].dst == b
        assert [tr.reduce for tr in path] == [False] * (len(path) - 1) + [True]
    arr = from_schedule(s)
    rows = np.concatenate([np.broadcast_to(r.reduce, r.src.shape) for r in arr.rounds])
    assert rows.sum() == sum(1 for v in hops.values())
    assert scan.steps(8) == s.steps == 3


def test_exscan_starts_with_a_shift():
    s = scan.build(from_spec("hypercube:n=3"), exclusive=True)
    first = [tr for tr in s.rounds[0].transfers]
    assert s.steps == 1 + scan.steps(7)
    assert all(tr.into == ((REDUCED, 0),) and tr.blocks == ((REDUCED, ALL),) for tr in first)


def test_bad_algorithm_and_faults_are_refused():
    with pytest.raises(DualmpiError, match="no allreduce algorithm 'exchange'"):
        allreduce.build(from_spec("dualcube:r=2"), "exchange")
    from dualmpi.topology.faults import FaultyTopology

    faulty = FaultyTopology(from_spec("dualcube:r=2"), failed_links=[(0, 1)])
    with pytest.raises(DualmpiError, match="faults"):
        array_schedule(faulty, "reduce")


@pytest.mark.parametrize("op, dtype, words", [
    (np.bitwise_and, np.float64, "does not apply to float64"),
    (np.sqrt, np.float64, "does not take two arguments"),
    ("sum", np.int32, "is not a reduction operation"),
])
def test_bad_operations(op, dtype, words):
    with pytest.raises(InputError, match=words):
        resolve(op, np.dtype(dtype), "Allreduce")


@pytest.mark.parametrize("spec, q", [("hdn:base=2x3,k=1,s=2", 1), ("hdn:base=2x3,k=1,s=2", 3),
                                     ("rdn:base=3,k=2", 2)])
def test_hierarchical_dual_nets_reduce_by_their_broadcast_tree(spec, q):
    """HDN and RDN have a broadcast (no all-to-all broadcast): reduce, the tree allreduce and
    the scans run on them too."""
    topo = from_spec(spec)
    assert allreduce.available(topo) == ("tree",)
    R = topo.num_nodes // q
    rng = np.random.default_rng(3)
    xs = [rng.integers(-9, 9, 6).astype(np.int64) for _ in range(R)]
    for coll in ("reduce", "allreduce-tree", "scan", "exscan"):
        outs = _run(spec, q, coll, xs, np.add, R - 1)
        for r in range(R):
            want = _want(coll, xs, np.add, r, R - 1)
            assert want is None or np.array_equal(outs[r], want), (coll, r)
