"""No round of a bound plan touches a byte that another of its operations writes (no MPI).

Within one round the engine starts every message, makes the round's local moves and
only then waits (``rounds.c``, :meth:`dualmpi.engine.mpi.MPIRunner._rounds`): sends read,
receives write and moves copy at the same time.  A byte written by one of them and read or
written by another in the same round is a race — the result depends on timing.  Pipelined
plans (``packets > 1``) reuse transit slots for blocks of different lengths; cut where each
block's length decided, piece ``j + 1`` of one block and piece ``j`` of the next overlapped
(wrong ``Alltoall`` bytes in a few calls in a hundred on ``dualcube:r=3``, 4 nodes per rank).
"""

import numpy as np
import pytest

from dualmpi.engine.core import Engine
from dualmpi.engine.layout import Layout, layout_kind
from dualmpi.topology import from_spec


def _intervals(parts):
    """Concatenate ``(offsets, lengths)`` pairs into sorted-free ``(start, end)`` arrays."""
    if not parts:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    start = np.concatenate([np.asarray(o, dtype=np.int64) for o, _ in parts])
    length = np.concatenate([np.asarray(n, dtype=np.int64) for _, n in parts])
    keep = length > 0
    return start[keep], (start + length)[keep]


def _first_arrival(plan):
    """Return per slot the round its block first arrives in (-1: held from the start)."""
    first = np.full(plan.num_slots, np.iinfo(np.int64).max, dtype=np.int64)
    first[plan.inputs[0]] = -1
    for rows, col in ((plan.recv, "slot"), (plan.local, "dest")):
        np.minimum.at(first, rows[col], rows["round"])
    return first


def round_conflicts(bound, plan=None, unit=1):
    """Return the rounds of ``bound`` in which a written byte is touched twice.

    With ``plan``, a write into a block's own slot by a row of a later round than the
    block's first arrival is a re-delivery of the same bytes (the reduced hypercube's
    emulated hypercube steps pass blocks back through nodes that hold them): it writes
    what is there and is not counted.  ``unit``: the plan's piece length (piece ``j`` of a
    row of round ``k`` moves in round ``k + j``).
    """
    benign = None
    if plan is not None:
        _, _, is_block = plan.slot_blocks()
        first = _first_arrival(plan)
        block = np.zeros(plan.num_slots, dtype=bool)
        block[:is_block.size] = is_block
    bad = []
    for rnd in bound.rounds:
        src, dst, ln = rnd.copies
        ws, we = _intervals([(o, n) for _, o, n in rnd.recvs] + [(dst, ln)])
        rs, re = _intervals([(o, n) for _, o, n in rnd.sends] + [(src, ln)])
        if plan is not None and ws.size:
            slot = np.searchsorted(bound.slot_offset, ws, side="right") - 1
            piece = np.minimum((ws - bound.slot_offset[slot]) // unit, bound.packets - 1)
            benign = block[slot] & (rnd.index - piece > first[slot])
            ws, we = ws[~benign], we[~benign]
        order = np.argsort(ws, kind="stable")
        ws, we = ws[order], we[order]
        # writes among themselves: each starts after every earlier one ended
        clash = ws.size > 1 and bool((ws[1:] < np.maximum.accumulate(we)[:-1]).any())
        if not clash and ws.size and rs.size:
            # (disjoint, sorted writes) the last write starting before a read ends
            i = np.searchsorted(ws, re, side="left") - 1
            clash = bool(((i >= 0) & (we[np.maximum(i, 0)] > rs)).any())
        if clash:
            bad.append(rnd.index)
    return bad


CASES = [("dualcube:r=3", 4), ("dualcube:r=2", 2), ("dualcube:r=2", 1), ("hypercube:n=4", 4),
         ("metacube:k=1,m=2", 2), ("ccc:n=3", 3), ("rh:k=2,n=1", 2)]


@pytest.mark.parametrize("spec,q", CASES)
@pytest.mark.parametrize("collective", ["bcast", "scatter", "gather", "allgather", "alltoall",
                                        "ring-allgather"])
@pytest.mark.parametrize("packets", [1, 2, 3, 5])
def test_pipelined_rounds_touch_each_byte_once(spec, q, collective, packets):
    """Blocks of uneven lengths (bytes not divisible by the pieces) at several piece counts."""
    topo = from_spec(spec)
    if collective == "ring-allgather" and spec.split(":")[0] not in ("dualcube", "hypercube", "rh"):
        pytest.skip(f"no Hamiltonian cycle on {spec}")
    eng = Engine(topo, q, None)
    for rank in range(topo.num_nodes // q):
        plan = eng.rank_plan(rank, collective)
        for nbytes in (7, 56, 1003):
            layout = Layout(layout_kind(collective), topo.num_nodes, q, nbytes, 0)
            bound = plan.bind(layout, packets)
            unit = max(1, -(-layout.largest() // packets))
            assert round_conflicts(bound, plan, unit) == [], (rank, nbytes)


@pytest.mark.parametrize("spec,q", [("dualcube:r=2", 2), ("hypercube:n=3", 1)])
@pytest.mark.parametrize("collective", ["allreduce", "reduce", "scan", "exscan",
                                        "reduce_scatter_block", "barrier"])
def test_reductions_touch_each_byte_once(spec, q, collective):
    """Combined blocks land in scratch slots: never where a round still reads."""
    topo = from_spec(spec)
    eng = Engine(topo, q, None)
    kind = layout_kind(collective)
    for rank in range(topo.num_nodes // q):
        plan = eng.rank_plan(rank, collective)
        bound = plan.bind(Layout(kind, topo.num_nodes, q, 24, 0, itemsize=8), 1)
        assert round_conflicts(bound, plan) == [], rank


def test_the_check_finds_a_race():
    """Cut at each block's own length (the old cut), the D_3 plan above has racing rounds."""
    topo = from_spec("dualcube:r=3")
    plan = Engine(topo, 4, None).rank_plan(0, "alltoall")
    layout = Layout("alltoall", 32, 4, 56, 0)
    bound = plan.bind(layout, 3)
    assert round_conflicts(bound) == []
    # move piece 1 of a round's first received message onto the bytes its first send reads
    rnd = next(r for r in bound.rounds if r.sends and r.recvs)
    peer, offs, lens = rnd.recvs[0]
    rnd.recvs[0] = (peer, np.r_[rnd.sends[0][1][:1], offs[1:]], lens)
    assert round_conflicts(bound) == [rnd.index]
