"""The engine's in-memory transport: every rank's bound plan run in one process (no MPI).

The pure tests run the same compiled plans as an MPI job, rank by rank and round by
round, with a dictionary as the network.  :func:`run_inprocess` runs a schedule on
synthetic, verifiable data and reports what was delivered and what it cost.
"""

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..collectives.schedule import REDUCED, base_collective, expected_blocks
from .patterns import block_pattern, expected_value
from .arrays import from_schedule
from .core import copy_segments
from .layout import Layout, describe
from .plan import compile_rank
from .virtual import replay_clocks

__all__ = ["LocalRunner", "LocalTransport", "run_local", "RunResult", "run_inprocess"]


class LocalRunner:
    """One rank's bound plan with its store, run by :func:`run_local` together with the others."""

    #: True once the engine has dropped it from its cache or freed it
    ended = False

    def __init__(self, bound, plan, combine=None):
        self.bound, self.plan, self.combine = bound, plan, combine
        self.store = np.zeros(bound.nbytes, dtype=np.uint8)
        self.rounds = {rnd.index: rnd for rnd in bound.rounds}
        self.calls = 0

    def free(self):
        """Nothing to release."""


class LocalTransport:
    """Builds :class:`LocalRunner` objects: an :class:`~dualmpi.engine.core.Engine` without MPI.

    One engine with this transport hands out every rank's runner (``rank`` is an
    argument of :meth:`~dualmpi.engine.core.Engine.runner`); :func:`run_local` runs
    them together.

    >>> from dualmpi.engine.core import Engine
    >>> from dualmpi.topology import DualCube
    >>> eng = Engine(DualCube(2), 1, LocalTransport())
    >>> runs = [eng.runner(r, "allgather", 2) for r in range(8)]
    >>> out = [np.zeros(16, np.uint8) for _ in range(8)]
    >>> run_local(runs, [np.full(2, r, np.uint8) for r in range(8)], out)
    >>> out[5].tolist()[::2]
    [0, 1, 2, 3, 4, 5, 6, 7]
    """

    def prepare(self, bound, plan, signature=0, combine=None, **options):
        """Return a :class:`LocalRunner` (the engine's options are ignored)."""
        return LocalRunner(bound, plan, combine)


def run_local(runners, sends=None, recvs=None):
    """Run one collective on every rank's runner (index = rank); buffers are uint8 arrays."""
    for r, run in enumerate(runners):
        if sends is not None and sends[r] is not None:
            at, user, n = run.bound.copy_in[1], run.bound.copy_in[0], run.bound.copy_in[2]
            copy_segments(run.store, sends[r], (at, user, n))
    indices = sorted({k for run in runners for k in run.rounds})
    for k in indices:
        wire = {}
        for r, run in enumerate(runners):
            rnd = run.rounds.get(k)
            if rnd is None:
                continue
            for peer, offs, lens in rnd.sends:
                wire[(r, peer)] = np.concatenate(
                    [run.store[a:a + n] for a, n in zip(offs.tolist(), lens.tolist())]
                    or [np.zeros(0, np.uint8)])
            copy_segments(run.store, run.store, (rnd.copies[1], rnd.copies[0], rnd.copies[2]))
        for r, run in enumerate(runners):
            rnd = run.rounds.get(k)
            if rnd is None:
                continue
            for peer, offs, lens in rnd.recvs:
                data = wire.pop((peer, r))
                if data.size != int(lens.sum()):
                    raise AssertionError(f"round {k}: rank {r} expected {int(lens.sum())} bytes "
                                         f"from rank {peer}, got {data.size}")
                pos = 0
                for a, n in zip(offs.tolist(), lens.tolist()):
                    run.store[a:a + n] = data[pos:pos + n]
                    pos += n
            src, dst, lens = rnd.combines
            for a, b, n in zip(src.tolist(), dst.tolist(), lens.tolist()):
                target = run.store[b:b + n]
                if run.combine is not None:
                    if n:
                        run.combine(run.store[a:a + n], target)
                else:
                    np.add(target, run.store[a:a + n], out=target)
        if wire:
            raise AssertionError(f"round {k}: messages nobody received: {sorted(wire)}")
    for r, run in enumerate(runners):
        if recvs is not None and recvs[r] is not None:
            copy_segments(recvs[r], run.store, run.bound.copy_out)
        run.calls += 1


@dataclass
class RunResult:
    """What a run delivered and what it cost, in the units the papers count."""

    collective: str
    spec: str
    size: int
    rounds: int
    steps: int
    messages: int
    bytes: int
    delivered: int
    expected: int
    link_messages: Counter = field(default_factory=Counter)
    link_bytes: Counter = field(default_factory=Counter)
    missing: list = field(default_factory=list)
    corrupt: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    #: Virtual-clock results: coefficients ``{"ts", "tw" (blocks), "th"}``, contention, times.
    virtual: dict = field(default_factory=dict)

    @property
    def verified(self):
        """True when every expected block arrived intact and nothing went wrong."""
        return not (self.missing or self.corrupt or self.errors) and self.delivered == self.expected


def run_inprocess(schedule, size, clock=None, packets=1):
    """Run ``schedule`` with ``size``-byte blocks through compiled plans, one rank per node.

    Every transfer is link-checked (:class:`~dualmpi.errors.LinkError`); a node sending a
    block it does not hold, or forwarding against its router, is recorded in ``errors``
    (the transfer is dropped: the engine does not invent data).  Blocks are filled with
    :func:`~dualmpi.engine.patterns.block_pattern` and every delivered byte is checked.
    The virtual clocks of :func:`~dualmpi.engine.virtual.replay_clocks` give ``virtual``;
    ``clock`` (a :class:`ClockParams`) adds a clock with real parameters.

    >>> from dualmpi.collectives import build_schedule
    >>> from dualmpi.topology import DualCube
    >>> res = run_inprocess(build_schedule("alltoall", DualCube(2)), 3)
    >>> res.verified, res.delivered, res.messages
    (True, 56, 128)
    """
    topo, coll, root = schedule.topo, schedule.collective, schedule.root
    p = topo.num_nodes
    problems = []
    arrays = from_schedule(schedule, strict=False, problems=problems)
    base = base_collective(coll)
    root = root if describe(coll)[0].rooted else 0
    lay = Layout(base, p, 1, size, root)
    runners, written = [], []
    for r in range(p):
        plan = compile_rank(arrays, 1, r, root)
        plan.collective = base
        runners.append(LocalRunner(plan.bind(lay, packets), plan))
        written.append(_written(plan))
    sends, recvs = [], []
    for r in range(p):
        node, origin, target, offset = lay.inputs(r)
        buf = np.zeros(int(offset.max() + size) if offset.size else 0, dtype=np.uint8)
        for o, t, off in zip(origin.tolist(), target.tolist(), offset.tolist()):
            buf[off:off + size] = block_pattern(r, t, size) if o == REDUCED else \
                block_pattern(o, t, size)
        sends.append(buf)
        node, origin, target, offset = lay.outputs(r)
        recvs.append(np.zeros(int(offset.max() + size) if offset.size else 0, dtype=np.uint8))
    run_local(runners, sends, recvs)
    res = RunResult(coll, topo.spec, size, arrays.num_rounds, schedule.steps, 0, 0, 0, 0,
                    errors=problems)
    for r, run in enumerate(runners):
        b = run.bound
        for s, d, m, n in zip(b.link_src.tolist(), b.link_dst.tolist(), b.link_messages.tolist(),
                              b.link_bytes.tolist()):
            res.link_messages[(s, d)] += m
            res.link_bytes[(s, d)] += n
    res.messages = sum(res.link_messages.values())
    res.bytes = sum(res.link_bytes.values())
    for u in range(p):
        node, origin, target, offset = lay.outputs(u)
        where = {(o, t): off for o, t, off in zip(origin.tolist(), target.tolist(),
                                                  offset.tolist())}
        got = recvs[u]
        for key in expected_blocks(coll, topo, root, u):
            if key[0] == u:  # its own block: the root's broadcast block, for one
                continue
            res.expected += 1
            if key not in written[u]:
                res.missing.append((u, key))
            elif key not in where or not np.array_equal(
                    got[where[key]:where[key] + size], expected_value(key, p, size)):
                res.corrupt.append((u, key))
            else:
                res.delivered += 1
    res.virtual = replay_clocks(schedule, size, clock)
    return res


def _written(plan):
    """Return the blocks a rank's node holds at the end: its inputs and everything it received."""
    origin, target, is_block = plan.slot_blocks()
    held = set()
    in_slots = plan.inputs[0]
    recv_slots = np.concatenate([plan.recv["final"], plan.local["final"]])
    for s in np.unique(np.concatenate([in_slots, recv_slots])).tolist():
        if s < is_block.size and is_block[s]:
            held.add((int(origin[s]), int(target[s])))
    return held
