"""Run node programs for every node in one Python process: the executor of the pure tests."""

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..collectives.schedule import expected_blocks, initial_blocks, message_hops, node_programs
from ..errors import LinkError
from .clock import UNIT_CLOCKS, ClockSet
from .payload import expected_value, initial_value, pack_blocks, unpack_blocks

__all__ = [
    "RunResult",
    "run_inprocess",
    "initial_store",
    "verify_store",
    "route_problem",
    "hop_position",
    "virtual_summary",
]


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


def initial_store(collective, topo, root, u, size, salt=0):
    """Return node ``u``'s starting blocks, filled with their patterns."""
    return {key: initial_value(key, u, size, salt)
            for key in initial_blocks(collective, topo, root, u)}


def verify_store(collective, topo, root, u, store, size, salt=0):
    """Return ``(delivered, missing, corrupt)`` for node ``u``'s final blocks."""
    delivered, missing, corrupt = 0, [], []
    for key in expected_blocks(collective, topo, root, u):
        if key[0] == u:
            continue  # a node's own data is not delivered to it
        got = store.get(key)
        if got is None:
            missing.append((u, key))
        elif got.shape != (size,) or not np.array_equal(
                got, expected_value(key, topo.num_nodes, size, salt)):
            corrupt.append((u, key))
        else:
            delivered += 1
    return delivered, missing, corrupt


def route_problem(schedule, u, tr):
    """Return a message when node ``u``'s router would not send ``tr`` where the schedule does.

    A routed message carries its header ``(source, destination)``; the node decides
    the next hop from the header alone (:meth:`Schedule.next_hop`).
    """
    if tr.header is None:
        return ""
    hop = schedule.next_hop(u, *tr.header)
    if hop != tr.dst:
        return f"node {u} forwards {tr.header} to {tr.dst}, its router says {hop}"
    return ""


def hop_position(tr, u_is_src):
    """Return True when ``tr`` is its message's first hop (``u_is_src``) or last hop (else)."""
    if tr.header is None:
        return True
    return tr.header[0] == tr.src if u_is_src else tr.header[1] == tr.dst


def virtual_summary(finish, size, contention):
    """Turn the unit clocks' finishing times into model coefficients (tw in blocks of ``size``)."""
    a, b, c = (float(x) for x in finish[:3])
    out = {"ts": _tidy(a), "tw": _tidy(b / size) if size else None, "th": _tidy(c),
           "contention_delay": [float(d) for d, _ in contention],
           "delayed_hops": [int(n) for _, n in contention]}
    if len(finish) > 3:
        out["time"] = float(finish[3])
    return out


def _tidy(x):
    """Return ``x`` rounded to an integer when it is one up to float noise (a count)."""
    r = round(x)
    return float(r) if abs(x - r) <= 1e-9 * max(1.0, abs(x)) else x


def run_inprocess(schedule, size, clock=None):
    """Execute ``schedule`` with ``size``-byte blocks, every node running its own program.

    Every send is link-checked; a node sending a block it does not hold is recorded
    as an error (the executor does not invent data); forwarded messages are checked
    against the router's own next-hop decision.  Virtual clocks ride along every
    message (:mod:`dualmpi.executors.clock`): three unit clocks give the model
    coefficients, and ``clock`` (a :class:`ClockParams`) adds a clock with real
    parameters whose finishing time is ``res.virtual["time"]``.
    """
    topo, coll, root = schedule.topo, schedule.collective, schedule.root
    p = topo.num_nodes
    programs = node_programs(schedule)
    stores = {u: initial_store(coll, topo, root, u, size) for u in range(p)}
    params = UNIT_CLOCKS + ((clock,) if clock is not None else ())
    clocks = {u: ClockSet(params) for u in range(p)}
    pending = {u: {} for u in range(p)}
    hops = message_hops(schedule)
    cursor = {u: 0 for u in range(p)}
    res = RunResult(coll, topo.spec, size, schedule.num_rounds, schedule.steps, 0, 0, 0, 0)
    for t in range(schedule.num_rounds):
        mailbox = {}
        for u in range(p):
            prog = programs[u]
            if cursor[u] < len(prog) and prog[cursor[u]].index == t:
                node = (stores[u], clocks[u], pending[u])
                _send_all(schedule, u, prog[cursor[u]], node, size, mailbox, res, hops)
        for u in range(p):
            prog = programs[u]
            if cursor[u] < len(prog) and prog[cursor[u]].index == t:
                _recv_all(u, prog[cursor[u]], (stores[u], clocks[u], pending[u]), size, mailbox, res)
                cursor[u] += 1
    for u in range(p):
        d, miss, bad = verify_store(coll, topo, root, u, stores[u], size)
        res.delivered += d
        res.missing += miss
        res.corrupt += bad
    res.expected = sum(
        sum(1 for key in expected_blocks(coll, topo, root, u) if key[0] != u) for u in range(p)
    )
    finish = [max(vals) for vals in zip(*(clocks[u].finish() for u in range(p)))] if p else []
    contention = [tuple(map(sum, zip(*col)))
                  for col in zip(*(clocks[u].contention() for u in range(p)))] if p else []
    res.virtual = virtual_summary(finish, size, contention) if p else {}
    return res


def _send_all(schedule, u, nr, node, size, mailbox, res, hops):
    """Post node ``u``'s sends of one round into ``mailbox`` (link-checked, data-checked)."""
    topo = schedule.topo
    store, clocks, pending = node
    for tr in nr.sends:
        dst, blocks = tr.dst, tr.blocks
        if not topo.is_link(u, dst):
            raise LinkError(u, dst, topo.spec)
        problem = route_problem(schedule, u, tr)
        if problem:
            res.errors.append(f"round {nr.index}: {problem}")
        lacking = [key for key in blocks if key not in store]
        if lacking:
            res.errors.append(f"round {nr.index}: node {u} sends {len(lacking)} block(s) it does not "
                              f"hold to {dst}, e.g. {lacking[0]}")
            continue
        buf = pack_blocks(store, blocks, size)
        first = hop_position(tr, True)
        trailer = clocks.depart(dst, buf.nbytes, blocks, hops.get(tr.header, 1),
                                None if first else pending.pop(tr.header, None))
        mailbox.setdefault((u, dst), []).append((buf, trailer))
        res.messages += 1
        res.bytes += buf.nbytes
        res.link_messages[(u, dst)] += 1
        res.link_bytes[(u, dst)] += buf.nbytes


def _recv_all(u, nr, node, size, mailbox, res):
    """Take node ``u``'s expected messages of one round from ``mailbox``, in order."""
    store, clocks, pending = node
    for tr in nr.recvs:
        src, blocks = tr.src, tr.blocks
        queue = mailbox.get((src, u))
        if not queue:
            res.errors.append(f"round {nr.index}: node {u} expected {len(blocks)} block(s) from {src}, "
                              "nothing arrived")
            continue
        buf, trailer = queue.pop(0)
        if buf.nbytes != len(blocks) * size:
            res.errors.append(f"round {nr.index}: node {u} got {buf.nbytes} bytes from {src}, "
                              f"expected {len(blocks) * size}")
            continue
        if tr.reduce and any(key not in store for key in blocks):
            res.errors.append(f"round {nr.index}: node {u} reduces into blocks it does not hold")
            continue
        unpack_blocks(store, blocks, size, buf, tr.reduce)
        last = hop_position(tr, False)
        if not last:
            pending[tr.header] = trailer
        clocks.arrive(blocks, buf.nbytes, trailer, last)
