"""Schedules as numpy arrays: one row per block moved over one link in one round (pure).

A :class:`~dualmpi.collectives.schedule.Schedule` lists :class:`Transfer` objects, which
is the clearest form for writing and checking an algorithm but costs a Python object
per message.  The plan compiler works on the same information as arrays: round ``k``
is a :class:`RoundRows` whose row ``i`` says that block ``(origin[i], target[i])``
goes from node ``src[i]`` to its neighbour ``dst[i]``, read from the sender's slot
``src_key[i]`` and written into the receiver's slot ``dst_key[i]``.  Rows with the same
``msg`` number in a round belong to one message (one transfer of several blocks).

A slot is named by a *slot key*, an integer: :func:`block_key` for a block held by a
node, :func:`transit_key` for the two per-node buffers that carry a step's routed
messages of the total exchange (each node holds at most one message of a step per
hop position, so two buffers per node suffice whatever the network size).

Every transfer is link-checked when the arrays are built (:func:`check_links`);
routed messages are checked against the topology's own router.
"""

from dataclasses import dataclass

import numpy as np

from ..errors import DualmpiError, LinkError

__all__ = [
    "RoundRows",
    "ArraySchedule",
    "block_key",
    "transit_key",
    "key_space",
    "from_schedule",
    "alltoall_arrays",
    "check_links",
    "alltoall_name",
]


def key_space(p):
    """Return the number of slot keys one node can have on a ``p``-node network.

    Block keys come first, then two transit keys per class group (at most ``p`` groups).

    >>> key_space(4)
    38
    """
    return (p + 2) * (p + 1) + 2 * p


def block_key(p, origin, target):
    """Return the slot key of block ``(origin, target)`` (``origin >= -2``, ``target >= -1``).

    Works elementwise on numpy arrays.

    >>> block_key(4, 0, -1), block_key(4, 3, 2)
    (10, 28)
    """
    return (np.asarray(origin, dtype=np.int64) + 2) * (p + 1) + np.asarray(target, dtype=np.int64) + 1 \
        if isinstance(origin, np.ndarray) or isinstance(target, np.ndarray) \
        else (origin + 2) * (p + 1) + target + 1


def transit_key(p, parity, group=0):
    """Return the slot key of a node's transit buffer ``parity`` (0 or 1) for class ``group``.

    Within one class group the messages of a step sit on distinct nodes at every hop
    (renaming is a bijection), so a node needs one buffer per group and hop parity.
    Works elementwise on a numpy ``group``.

    >>> transit_key(4, 0), transit_key(4, 1, 2)
    (30, 35)
    """
    return (p + 2) * (p + 1) + 2 * group + parity


@dataclass
class RoundRows:
    """The blocks one round moves, as parallel int64 arrays (see the module docstring)."""

    step: int
    hop: int
    src: np.ndarray
    dst: np.ndarray
    msg: np.ndarray
    origin: np.ndarray
    target: np.ndarray
    src_key: np.ndarray
    dst_key: np.ndarray
    #: Per row (or one bool for the round): the receiver combines the block into its own
    #: copy (a reduction) instead of storing it.
    reduce: object = False

    @property
    def size(self):
        """Number of rows (blocks moved over links) in the round."""
        return int(self.src.size)


@dataclass
class ArraySchedule:
    """A collective as :class:`RoundRows`, with what the plan compiler and the reports need.

    Attributes
    ----------
    collective, algorithm : str
        As in :class:`~dualmpi.collectives.schedule.Schedule`.
    topo : Topology
        The network; every row is one of its links.
    root : int or None
        The root node of bcast and scatter.
    rounds : list of RoundRows
        Every round in execution order (rounds that move nothing are kept, so the
        indices are the schedule's).
    steps : int
        The paper steps the rounds make up.
    messages : int
        Link transfers (messages counted once per link they cross).
    """

    collective: str
    algorithm: str
    topo: object
    root: object
    rounds: list
    steps: int
    messages: int

    @property
    def num_rounds(self):
        """Number of rounds."""
        return len(self.rounds)


def _empty():
    return np.zeros(0, dtype=np.int64)


def from_schedule(schedule, strict=True, problems=None):
    """Return the :class:`ArraySchedule` of a Transfer-based schedule.

    Every transfer is link-checked and every routed hop checked against the schedule's
    router.  A node that sends a block it does not hold (at that round) is an error:
    with ``strict`` a :class:`DualmpiError`, else the transfer is dropped and the
    problem appended to ``problems`` (the in-process executor reports it).

    >>> from dualmpi.collectives import build_schedule
    >>> from dualmpi.topology import DualCube
    >>> a = from_schedule(build_schedule("bcast", DualCube(2), 0))
    >>> a.num_rounds, a.messages, [r.size for r in a.rounds]
    (4, 7, [1, 2, 2, 2])
    """
    from ..collectives.schedule import initial_blocks

    topo = schedule.topo
    p = topo.num_nodes
    if schedule.initial is not None:
        held = [set(schedule.initial.get(u, ())) for u in range(p)]
    else:
        held = [set(initial_blocks(schedule.collective, topo, schedule.root, u)) for u in range(p)]
    carriers = _Carriers(p)
    rounds, messages = [], 0
    for t, rnd in enumerate(schedule.rounds):
        cols = [[] for _ in range(8)]  # src, dst, msg, origin, target, src_key, dst_key, reduce
        arrived = []
        for m, tr in enumerate(rnd.transfers):
            if not topo.is_link(tr.src, tr.dst):
                raise LinkError(tr.src, tr.dst, topo.spec)
            if tr.header is not None:
                hop = schedule.next_hop(tr.src, *tr.header)
                if hop != tr.dst:
                    text = (f"round {t}: node {tr.src} forwards {tr.header} to {tr.dst}, "
                            f"its router says {hop}")
                    if strict:
                        raise DualmpiError(text)
                    problems.append(text)
            carried = tr.transit and tr.header is not None
            first = not carried or tr.src == tr.header[0]
            last = not carried or tr.dst == tr.header[1]
            lacking = [key for key in tr.blocks if key not in held[tr.src]] if first else []
            if lacking:
                text = (f"round {t}: node {tr.src} sends {len(lacking)} block(s) it does not hold "
                        f"to {tr.dst}, e.g. {lacking[0]}")
                if strict:
                    raise DualmpiError(text)
                problems.append(text)
                continue
            if carried and len(tr.blocks) != 1:
                raise DualmpiError(f"round {t}: a message carried in transit holds one block, "
                                   f"{tr.header} has {len(tr.blocks)}")
            src_key = None if first else carriers.take(tr.src, tr.header, t)
            dst_key = None if last else carriers.put(tr.dst, tr.header, t)
            into = tr.into if tr.into is not None and last else tr.blocks
            messages += 1
            for key, dest, red in zip(tr.blocks, into, tr.reduce_flags()):
                skey = block_key(p, *key) if src_key is None else src_key
                dkey = block_key(p, *dest) if dst_key is None else dst_key
                for col, value in zip(cols, (tr.src, tr.dst, m, key[0], key[1], skey, dkey,
                                             bool(red) and last)):
                    col.append(value)
                if last:
                    arrived.append((tr.dst, dest))
        carriers.end_round(t)
        for v, key in arrived:
            held[v].add(key)
        src, dst, msg, origin, target, skey, dkey = (
            np.array(c, dtype=np.int64) if c else _empty() for c in cols[:7])
        red = np.array(cols[7], dtype=bool)
        rounds.append(RoundRows(rnd.step, rnd.hop, src, dst, msg, origin, target, skey, dkey,
                                red if red.any() else False))
    return ArraySchedule(schedule.collective, schedule.algorithm, topo, schedule.root, rounds,
                         schedule.steps, messages)


class _Carriers:
    """Transit buffers of routed messages carried through nodes (``Transfer.transit``).

    A buffer is busy from the round a message lands in it to the round it is sent on
    (both included), so a node never receives into a buffer it is sending from.
    """

    def __init__(self, p):
        self.p = p
        self.busy = {}   # node -> set of buffer indices
        self.where = {}  # header -> (node, index)
        self.freed = []

    def put(self, node, header, t):
        busy = self.busy.setdefault(node, set())
        i = 0
        while i in busy:
            i += 1
        if i >= 2 * self.p:
            raise DualmpiError(f"round {t}: node {node} would carry more than {2 * self.p} "
                               "routed messages at once")
        busy.add(i)
        self.where[header] = (node, i)
        return transit_key(self.p, i % 2, i // 2)

    def take(self, node, header, t):
        at = self.where.pop(header, None)
        if at is None or at[0] != node:
            raise DualmpiError(f"round {t}: node {node} forwards {header}, which it does not carry")
        self.freed.append(at)
        return transit_key(self.p, at[1] % 2, at[1] // 2)

    def end_round(self, t):
        for node, i in self.freed:
            self.busy[node].discard(i)
        self.freed = []


def check_links(topo, src, dst):
    """Raise :class:`LinkError` unless every ``src[i] - dst[i]`` is a link (vectorised)."""
    if src.size == 0:
        return
    ok = np.zeros(src.size, dtype=bool)
    for dim in range(1, topo.degree + 1):
        ok |= np.asarray(topo.neighbor(src, dim)) == dst
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise LinkError(int(src[i]), int(dst[i]), topo.spec)


def alltoall_arrays(topo, variant="corrected", checks=4, seed=0):
    """Return the total exchange of a hypercube, dual-cube or metacube as arrays, vectorised.

    Step ``t`` sends one message from every node ``s`` to ``dest(s, t)`` (the papers'
    destination order).  Sources of one class route alike up to renaming: the router
    routes the class's first node, and source ``s`` is at ``s XOR offs[h]`` after ``h``
    hops (:func:`~dualmpi.collectives.alltoall.step_offsets`).  ``checks`` further
    sources per step are routed directly and must agree, and every hop is link-checked,
    so no route is taken on trust.  A message starts in its source's slot of block
    ``(s, dest)``, is carried in the nodes' transit buffers (parity of the hop) and ends
    in the destination's slot of the block.

    >>> from dualmpi.topology import DualCube
    >>> a = alltoall_arrays(DualCube(2))
    >>> a.steps, a.num_rounds, a.messages
    (7, 16, 128)
    """
    from ..collectives.alltoall import (class_groups, destination_order, route_function,
                                        step_offsets)

    if variant not in ("corrected", "as-printed"):
        raise DualmpiError(f"no {variant!r} variant of alltoall")
    dest = destination_order(topo)
    route = route_function(topo, variant)
    _, groups = class_groups(topo)
    p = topo.num_nodes
    nodes = np.arange(p, dtype=np.int64)
    per = groups[0].size
    group_of = nodes // per
    rng = np.random.default_rng(seed)
    rounds, messages = [], 0
    for t in range(p - 1):
        offsets = step_offsets(topo, groups, t, dest, route)
        lengths = np.array([len(o) - 1 for o in offsets], dtype=np.int64)
        width = int(lengths.max())
        table = np.zeros((len(offsets), width + 1), dtype=np.int64)
        for g, offs in enumerate(offsets):
            table[g, :len(offs)] = offs
        d = np.asarray(dest(nodes, t), dtype=np.int64)
        for s in rng.choice(p, size=min(checks, p), replace=False):
            s = int(s)
            if list(route(s, int(d[s]))) != [s ^ int(o) for o in offsets[group_of[s]]]:
                raise DualmpiError(f"step {t}: the route of node {s} is not its class's renamed route")
        hops = lengths[group_of]
        for h in range(width):
            live = hops > h
            s = nodes[live]
            g = group_of[live]
            a = s ^ table[g, h]
            b = s ^ table[g, h + 1]
            check_links(topo, a, b)
            first, last = h == 0, hops[live] == h + 1
            origin, target = s, d[live]
            bkey = block_key(p, origin, target)
            # hop h reads parity h % 2 and writes the other: a node that forwards and
            # receives in one hop round never overwrites what it is sending
            src_key = bkey if first else transit_key(p, h % 2, g)
            dst_key = np.where(last, bkey, transit_key(p, (h + 1) % 2, g))
            rounds.append(RoundRows(t, h, a, b, np.arange(s.size, dtype=np.int64), origin, target,
                                    src_key, dst_key))
            messages += int(s.size)
    return ArraySchedule("alltoall", alltoall_name(topo), topo, None, rounds, p - 1, messages)


def alltoall_name(topo):
    """Return the name of the total-exchange algorithm on ``topo``.

    >>> from dualmpi.topology import DualCube
    >>> alltoall_name(DualCube(2))
    'dual-cube Algorithms 3+4'
    """
    return {"DualCube": "dual-cube Algorithms 3+4", "MetaCube": "metacube Algorithms 1-4",
            "Hypercube": "e-cube total exchange"}.get(type(topo).__name__, "total exchange")
