"""The plan compiler's output, frozen: compiled and bound plans against digests of a reference.

``tests/data/plan_digests.json`` holds, for a set of networks, collectives, ranks and
sizes, a SHA-256 digest of every array of the :class:`~dualmpi.engine.plan.RankPlan`
(rows, slots, inputs, outputs) and of the :class:`~dualmpi.engine.plan.BoundPlan`
(store size, every round's message segments, copies and combines, user copies, link
counts).  The digests were written by the compiler as it was before the issue-13
rework (commit 56e2dd2), so a faster compiler must produce the same plans byte for
byte.  The rounds of pipelined plans (``packets > 1``) were re-written when pieces came to be
cut at the same offsets in every block (issue 23: ``tests/test_plan_races.py``).  Regenerate (only when a plan is *meant* to change) with::

    .venv/bin/python tests/test_plan_compile.py --write
"""

import hashlib
import json
import pathlib
import re
import sys

import numpy as np
import pytest

from dualmpi.engine.core import array_schedule
from dualmpi.engine.layout import Layout, layout_kind
from dualmpi.topology import from_spec

FIXTURE = pathlib.Path(__file__).parent / "data" / "plan_digests.json"

#: (spec, collective, q, ranks, root rank, nbytes, itemsize, packets per case).
CASES = [
    ("metacube:k=2,m=1", "alltoall", 8, (0, 5), 0, 1000, 1, (1, 3)),
    ("metacube:k=2,m=1", "alltoall", 1, (0, 37), 0, 24, 1, (1,)),
    ("metacube:k=2,m=1", "allreduce-rsag", 8, (0, 3), 0, 4 * 1001, 4, (1,)),
    ("metacube:k=2,m=1", "allgather", 4, (1,), 0, 999, 1, (1, 2)),
    ("metacube:k=1,m=2", "alltoall", 2, (0, 7), 0, 333, 1, (1,)),
    ("dualcube:r=2", "bcast", 2, (0, 1, 3), 1, 777, 1, (1, 4)),
    ("dualcube:r=2", "scatter", 1, (0, 3), 3, 50, 1, (1, 2)),
    ("dualcube:r=2", "ring-allgather", 2, (2,), 0, 64, 1, (1,)),
    ("dualcube:r=2", "ring-allreduce", 1, (4,), 0, 40, 1, (1,)),
    ("dualcube:r=3", "reduce", 2, (0, 1, 9), 1, 8 * 5, 8, (1,)),
    ("dualcube:r=3", "scan", 4, (0, 7), 0, 8 * 3, 8, (1,)),
    ("dualcube:r=3", "exscan", 1, (0, 11), 0, 8, 8, (1,)),
    ("dualcube:r=3", "allreduce-tree", 2, (3,), 0, 4 * 6, 4, (1,)),
    ("hypercube:n=4", "allreduce-exchange", 4, (1,), 0, 4 * 6, 4, (1,)),
    ("dualcube:r=3", "allreduce-ring", 2, (0, 15), 0, 4 * 100, 4, (1,)),
    ("dualcube:r=3", "allreduce-rsag", 1, (6,), 0, 4 * 100, 4, (1,)),
    ("hypercube:n=3", "alltoallv", 2, (0, 3), 0, "matrix", 1, (1,)),
]

#: The 1,024-node case of issue 13 (one rank of 2): several seconds, so marked slow.
BIG = ("metacube:k=2,m=2", "alltoall", 512, (1,), 0, 64 * 512 * 512, 1, (1,))


def _case_ids(case):
    spec, coll, q, ranks, root, _, _, packets = case
    for rank in ranks:
        for pk in packets:
            yield f"{spec}|{coll}|q={q}|rank={rank}|root={root}|packets={pk}", rank, pk


def _matrix(ranks):
    """A deterministic uneven alltoallv byte matrix (some zero pieces)."""
    a = np.arange(ranks * ranks, dtype=np.int64).reshape(ranks, ranks)
    return (a * 7 + 3) % 11


def _digest(value):
    """SHA-256 (first 16 hex digits) of an integer array or a nested list of them."""
    h = hashlib.sha256()

    def feed(v):
        if isinstance(v, (list, tuple)):
            h.update(b"[%d" % len(v))
            for x in v:
                feed(x)
            h.update(b"]")
        else:
            a = np.ascontiguousarray(np.asarray(v, dtype=np.int64))
            h.update(b"a%d:" % a.size)
            h.update(a.astype("<i8").tobytes())
    feed(value)
    return h.hexdigest()[:16]


def plan_digests(compile_rank, case):
    """Return ``{case id: {field: digest}}`` for one entry of :data:`CASES`."""
    spec, coll, q, ranks, root, nbytes, itemsize, packets = case
    topo = from_spec(spec)
    p = topo.num_nodes
    root_node = root * q if coll in ("bcast", "scatter", "reduce") else None
    sched = array_schedule(topo, coll, root_node if root_node is not None else 0, "corrected",
                           None, q)
    out = {}
    for cid, rank, pk in _case_ids(case):
        plan = compile_rank(sched, q, rank, root)
        kind = layout_kind(coll)
        size = _matrix(p // q) if nbytes == "matrix" else nbytes
        bound = plan.bind(Layout(kind, p, q, size, root, None, None, itemsize), pk)
        d = {"num_slots": int(plan.num_slots), "scratch": int(plan.scratch),
             "num_rounds": int(plan.num_rounds),
             "slot_codes": _digest(plan.slot_codes), "slot_kinds": _digest(plan.slot_kinds),
             "reduce_rounds": _digest(plan.reduce_rounds),
             "inputs": _digest([plan.inputs[0], list(plan.inputs[1])]),
             "outputs": _digest([plan.outputs[0], list(plan.outputs[1])])}
        for kind_ in ("send", "recv", "local"):
            rows = getattr(plan, kind_)
            for col in sorted(rows):
                d[f"{kind_}.{col}"] = _digest(rows[col])
        d["nbytes"] = int(bound.nbytes)
        d["bound_rounds"] = len(bound.rounds)
        d["rounds"] = _digest([[r.index, [[peer, off, n] for peer, off, n in r.sends],
                                [[peer, off, n] for peer, off, n in r.recvs],
                                list(r.copies), list(r.combines)] for r in bound.rounds])
        d["copy_in"] = _digest(list(bound.copy_in))
        d["copy_out"] = _digest(list(bound.copy_out))
        d["links"] = _digest([bound.link_src, bound.link_dst, bound.link_messages,
                              bound.link_bytes])
        d["slots"] = _digest([bound.slot_offset, bound.slot_size])
        out[cid] = d
    return out


def _expected():
    return json.loads(FIXTURE.read_text())


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-q{c[2]}")
def test_compiled_plans_match_the_reference(case):
    from dualmpi.engine.plan import compile_rank

    want = _expected()
    got = plan_digests(compile_rank, case)
    for cid, fields in got.items():
        assert cid in want, f"no reference for {cid}"
        diff = {k: (v, want[cid].get(k)) for k, v in fields.items() if want[cid].get(k) != v}
        assert not diff, f"{cid}: {diff}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-q{c[2]}")
def test_a_plan_bound_before_for_other_sizes_binds_as_a_new_one(case, monkeypatch):
    """A plan keeps what binding needs beyond sizes (``RankPlan.shapes``, here whatever its
    size): bound first for other sizes (unpipelined and in 3 pieces), it binds the
    reference's sizes to the reference's plan all the same — nothing of the earlier sizes
    stays behind."""
    from dualmpi.engine import plan as plan_module
    from dualmpi.engine.plan import compile_rank

    monkeypatch.setattr(plan_module, "SHAPE_ROWS", 1 << 40)

    spec, coll, q, _, root, nbytes, itemsize, _ = case
    p = from_spec(spec).num_nodes
    kind = layout_kind(coll)
    other = _matrix(p // q)[::-1] * 3 + 1 if nbytes == "matrix" else nbytes * 3 + itemsize

    def bound_before(sched, q_, rank, root_):
        plan = compile_rank(sched, q_, rank, root_)
        for pk in (1, 3):
            first = plan.bind(Layout(kind, p, q, other, root, None, None, itemsize), pk)
            second = plan.bind(Layout(kind, p, q, other, root, None, None, itemsize), pk)
            # (each binding's link arrays its own: dualmpi.calls.Tally tells plans by them)
            assert all(a is not b for a, b in zip(
                (first.link_src, first.link_dst, first.link_messages),
                (second.link_src, second.link_dst, second.link_messages)))
        assert set(plan.shapes) == {1, 3}
        return plan

    want = _expected()
    for cid, fields in plan_digests(bound_before, case).items():
        diff = {k: (v, want[cid].get(k)) for k, v in fields.items() if want[cid].get(k) != v}
        assert not diff, f"{cid}: {diff}"
    # a plan over SHAPE_ROWS keeps nothing
    monkeypatch.setattr(plan_module, "SHAPE_ROWS", 0)
    sched = array_schedule(from_spec(spec), coll, root * q if coll in ("bcast", "scatter", "reduce")
                           else 0, "corrected", None, q)
    plan = compile_rank(sched, q, case[3][0], root)
    plan.bind(Layout(kind, p, q, other, root, None, None, itemsize), 1)
    assert plan.shapes == {}


def test_the_digest_sees_a_one_byte_change():
    """The comparison can fail: moving one segment by one byte changes the round digest."""
    from dualmpi.engine.plan import compile_rank

    case = CASES[0]
    topo = from_spec(case[0])
    sched = array_schedule(topo, case[1], 0, "corrected", None, case[2])
    plan = compile_rank(sched, case[2], 0, 0)
    bound = plan.bind(Layout("alltoall", topo.num_nodes, case[2], case[5]), 1)
    peer, off, n = next(r.sends[0] for r in bound.rounds if r.sends)
    before = _digest([off])
    off = off.copy()
    off[0] += 1
    assert _digest([off]) != before


@pytest.mark.parametrize("case", [CASES[0], CASES[3], CASES[5]], ids=lambda c: c[1])
def test_copies_all_is_every_rounds_copies_in_order(case):
    from dualmpi.engine.plan import compile_rank

    spec, coll, q, ranks, root, nbytes, itemsize, packets = case
    topo = from_spec(spec)
    sched = array_schedule(topo, coll, root * q, "corrected", None, q)
    for pk in packets:
        bound = compile_rank(sched, q, ranks[0], root).bind(
            Layout(layout_kind(coll), topo.num_nodes, q, nbytes, root), pk)
        assert bound.copies_all[0].size
        for i in range(3):
            each = [r.copies[i] for r in bound.rounds]
            assert np.array_equal(np.concatenate(each), bound.copies_all[i])


def _reduce_rows(rows):
    """A two-round reduction on Q_2 given as ``(src, dst, origin, target)`` rows per round."""
    from dualmpi.engine.arrays import ArraySchedule, RoundRows, block_key

    topo, p = from_spec("hypercube:n=2"), 4
    rounds = []
    for k, rr in enumerate(rows):
        src, dst, o, t = np.array(rr, dtype=np.int64).reshape(-1, 4).T
        rounds.append(RoundRows(k, 0, src, dst, np.arange(src.size), o, t, block_key(p, o, t),
                                block_key(p, o, t), np.ones(src.size, dtype=bool)))
    return ArraySchedule("reduce", "test", topo, 0, rounds, len(rounds), 0)


@pytest.mark.parametrize("q, rank, message", [
    (1, 0, "node 0 receives into block (3, 3), which it does not hold"),
    (2, 0, "node 1 sends block (-2, -1), which it does not hold"),
    (1, 1, None)])
def test_compiler_names_the_first_block_not_held(q, rank, message):
    """Sends are checked before combines; the first row in schedule order is named."""
    from dualmpi.engine.plan import compile_rank
    from dualmpi.errors import DualmpiError

    sched = _reduce_rows([[1, 0, -2, -1], [2, 0, 3, 3]])
    if message is None:
        assert compile_rank(sched, q, rank).send["slot"].tolist() == [0]
        return
    with pytest.raises(DualmpiError, match="^" + re.escape(f"reduce on hypercube:n=2: {message}")):
        compile_rank(sched, q, rank)


@pytest.mark.slow
def test_mc22_alltoall_plan_matches_the_reference():
    from dualmpi.engine.plan import compile_rank

    want = _expected()
    for cid, fields in plan_digests(compile_rank, BIG).items():
        assert fields == want[cid], cid


def _write(module=None):
    """Write the fixture with ``compile_rank`` of ``module`` (default: dualmpi.engine.plan)."""
    import importlib

    mod = importlib.import_module(module or "dualmpi.engine.plan")
    out = {}
    for case in CASES + [BIG]:
        out.update(plan_digests(mod.compile_rank, case))
    FIXTURE.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write"]:
        _write(sys.argv[2] if len(sys.argv) > 2 else None)
    else:
        sys.exit("usage: python tests/test_plan_compile.py --write [module]")
