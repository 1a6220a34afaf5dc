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

from dataclasses import dataclass, field

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
    "STEP_SHAPE_ROWS",
]

#: Schedules of up to this many rows keep what :meth:`ArraySchedule.step_bytes` needs beyond
#: the blocks' sizes (a total exchange: its first hop rounds' rows); larger ones make it at
#: each call (a million-node-pair exchange would keep hundreds of MB).
STEP_SHAPE_ROWS = 1 << 16


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
    #: Every round's rows concatenated (see :meth:`columns`); the rounds of
    #: :func:`alltoall_arrays` are views into it.
    flat: dict = field(default=None, repr=False, compare=False)
    #: What :meth:`step_bytes` needs beyond the blocks' sizes (made at its first call; kept
    #: for a schedule of up to :data:`STEP_SHAPE_ROWS` rows).
    step_shape: tuple = field(default=None, repr=False, compare=False)

    @property
    def num_rounds(self):
        """Number of rounds."""
        return len(self.rounds)

    def columns(self):
        """Return the rows of all rounds concatenated, in round order.

        A dict of the :class:`RoundRows` columns (``src``, ``dst``, ``msg``, ``origin``,
        ``target``, ``src_key``, ``dst_key``: int64), ``reduce`` (bool per row, or None
        when no row combines) and ``bounds`` (``num_rounds + 1`` offsets: round ``k`` is
        rows ``bounds[k]:bounds[k + 1]``).  Computed once and kept.

        >>> from dualmpi.collectives import build_schedule
        >>> from dualmpi.topology import DualCube
        >>> c = from_schedule(build_schedule("bcast", DualCube(2), 0)).columns()
        >>> c["bounds"].tolist(), c["src"].tolist(), c["reduce"] is None
        ([0, 1, 3, 5, 7], [0, 0, 4, 1, 6, 5, 2], True)
        """
        if self.flat is None:
            self.flat = _concatenate(self.rounds)
        return self.flat

    @property
    def num_rows(self):
        """Number of rows (blocks moved over links) of all rounds."""
        return int(self.columns()["bounds"][-1])

    def bounds(self):
        """Return the ``num_rounds + 1`` row offsets of the rounds (see :meth:`columns`)."""
        return self.columns()["bounds"]

    def reducing(self):
        """Return the ``reduce`` column of :meth:`columns` (None: no row combines)."""
        return self.columns()["reduce"]

    def forwards(self, q=1):
        """True when some rank sends on to another rank a block it received from one.

        With ``q`` nodes per rank (rank of node ``u``: ``u // q``), a row whose ends are
        on one rank moves nothing between ranks.  Pipelining (cutting blocks in pieces)
        helps only a schedule that forwards: a block whose every rank-to-rank move leaves
        from a rank that started with it arrives no sooner in pieces.

        >>> from dualmpi.collectives import build_schedule
        >>> from dualmpi.topology import DualCube, Hypercube
        >>> from_schedule(build_schedule("bcast", Hypercube(1), 0)).forwards()
        False
        >>> d2 = from_schedule(build_schedule("bcast", DualCube(2), 0))
        >>> d2.forwards(), d2.forwards(4), d2.forwards(8)
        (True, True, False)
        """
        cols = self.columns()
        src, dst, crossing, rnd = self._between_ranks(q)
        if crossing.size == 0:
            return False
        block = block_key(self.topo.num_nodes, cols["origin"][crossing],
                          cols["target"][crossing])
        space = int(block.max()) + 1
        # (rank, block) of every arrival and every departure over a rank-to-rank row: a rank
        # forwards when a block leaves it in a round after one in which it arrived there
        arrived = dst[crossing] * space + block
        left = src[crossing] * space + block
        order = np.lexsort((rnd, arrived))
        keys, first = np.unique(arrived[order], return_index=True)
        first_in = rnd[order][first]  # the round each (rank, block) first arrives in
        at = np.minimum(np.searchsorted(keys, left), keys.size - 1)
        return bool(np.any((keys[at] == left) & (first_in[at] < rnd)))

    def exchanges(self, q=1):
        """True when in some round two ranks send to each other (``q`` nodes per rank).

        >>> from dualmpi.collectives import build_schedule
        >>> from dualmpi.topology import Hypercube
        >>> q1 = Hypercube(1)
        >>> [from_schedule(build_schedule(c, q1, 0)).exchanges() for c in ("reduce", "allgather")]
        [False, True]
        """
        src, dst, crossing, rnd = self._between_ranks(q)
        if crossing.size == 0:
            return False
        ranks = int(max(src.max(), dst.max())) + 1
        there = np.unique((rnd * ranks + src[crossing]) * ranks + dst[crossing])
        back = (rnd * ranks + dst[crossing]) * ranks + src[crossing]
        return bool(np.isin(back, there).any())

    def _between_ranks(self, q):
        """Return ``(src, dst, crossing, rnd)``: every row's sending and receiving rank (``q``
        nodes per rank), the indices of the rows between two ranks, and their rounds."""
        cols = self.columns()
        src, dst = cols["src"] // q, cols["dst"] // q
        crossing = np.flatnonzero(src != dst)
        rnd = np.searchsorted(cols["bounds"], crossing, side="right") - 1
        return src, dst, crossing, rnd

    def rank_rows(self, lo, hi):
        """Return ``(rows, sends, arrives)`` for the nodes ``lo .. hi - 1`` (one rank's).

        ``rows``: in order, the indices of the rows whose source or destination is one
        of those nodes; ``sends`` and ``arrives`` (bool, per entry of ``rows``): whether
        its source, its destination is.

        >>> from dualmpi.collectives import build_schedule
        >>> from dualmpi.topology import DualCube
        >>> a = from_schedule(build_schedule("bcast", DualCube(2), 0))
        >>> rows, sends, arrives = a.rank_rows(0, 2)
        >>> rows.tolist(), sends.tolist(), arrives.tolist()
        ([0, 1, 3], [True, True, True], [False, True, False])
        """
        cols = self.columns()
        src, dst = cols["src"], cols["dst"]
        own_s = (src >= lo) & (src < hi)
        own_d = (dst >= lo) & (dst < hi)
        rows = np.flatnonzero(own_s | own_d)
        return rows, own_s[rows], own_d[rows]

    def step_bytes(self, size):
        """Return the sum over the steps of the step's largest message, in bytes.

        ``size(origin, target)`` gives the bytes of blocks (a layout's
        :meth:`~dualmpi.engine.layout.Layout.size`); see
        :func:`dualmpi.model.steps.step_bytes`.

        >>> from dualmpi.collectives import build_schedule
        >>> from dualmpi.topology import DualCube
        >>> a = from_schedule(build_schedule("bcast", DualCube(2), 0))
        >>> a.step_bytes(lambda origin, target: np.full(origin.shape, 10))
        40

        The messages and the steps they belong to are found once (:attr:`step_shape`); a
        call sums its blocks' sizes per message and takes each step's largest, as
        :func:`dualmpi.model.steps.step_bytes` does round by round:

        >>> from dualmpi.model.steps import step_bytes
        >>> a = from_schedule(build_schedule("allgather", DualCube(2)))
        >>> cols, sizes = a.columns(), (lambda origin, target: 3 * origin + target + 1)
        >>> a.step_bytes(sizes) == step_bytes(cols["bounds"], [r.step for r in a.rounds],
        ...                                   cols["msg"], sizes(cols["origin"], cols["target"]))
        True
        """
        shape = self.step_shape or _step_shape(self)
        if self.num_rows <= STEP_SHAPE_ROWS:  # (a larger schedule's is made at each call)
            self.step_shape = shape
        origin, target, message, order, starts = shape
        if starts.size == 0:
            return 0
        sizes = np.asarray(size(origin, target), dtype=np.int64)
        per_message = np.bincount(message, weights=sizes, minlength=order.size)
        return int(np.maximum.reduceat(per_message[order], starts).astype(np.int64).sum())

    def take(self, rows, *names):
        """Return the columns ``names`` of :meth:`columns` at ``rows`` (a list of arrays).

        ``"round"`` is the round of each row (``rows`` in order).
        """
        cols = self.columns()
        return [_round_of(cols["bounds"], rows) if name == "round" else cols[name][rows]
                for name in names]


def _empty():
    return np.zeros(0, dtype=np.int64)


def _step_shape(sched):
    """Return ``(origin, target, message, order, starts)`` of :meth:`ArraySchedule.step_bytes`.

    ``message``: per row, its message's number over the whole schedule (the rows of one
    message move together); ``order`` sorts the messages by their round's step and
    ``starts`` says where each step's messages begin in that order.
    """
    cols = sched.columns()
    bounds, msg = cols["bounds"], cols["msg"]
    nrounds = bounds.size - 1
    if msg.size == 0:
        return _empty(), _empty(), _empty(), _empty(), _empty()
    rnd = np.repeat(np.arange(nrounds, dtype=np.int64), np.diff(bounds))
    per_round = np.zeros(nrounds, dtype=np.int64)
    np.maximum.at(per_round, rnd, msg + 1)
    first = np.zeros(nrounds, dtype=np.int64)
    np.cumsum(per_round[:-1], out=first[1:])
    step = np.array([r.step for r in sched.rounds], dtype=np.int64)
    msg_step = np.repeat(step, per_round)
    order = np.argsort(msg_step, kind="stable")
    ordered = msg_step[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    return cols["origin"], cols["target"], first[rnd] + msg, order, starts


def _round_of(bounds, rows):
    """Return the round of each row index (``rows`` in order: a fast search)."""
    out = np.searchsorted(bounds, rows, side="right")
    out -= 1
    return out


#: The int64 columns of a :class:`RoundRows`, in order.
COLUMNS = ("src", "dst", "msg", "origin", "target", "src_key", "dst_key")


def _concatenate(rounds):
    """Return :meth:`ArraySchedule.columns` of a list of :class:`RoundRows`."""
    sizes = np.array([r.size for r in rounds], dtype=np.int64)
    bounds = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=bounds[1:])
    out = {"bounds": bounds}
    for name in COLUMNS:
        parts = [getattr(r, name) for r in rounds]
        out[name] = np.concatenate(parts).astype(np.int64, copy=False) if parts else _empty()
    if any(np.any(r.reduce) for r in rounds):
        out["reduce"] = np.concatenate(
            [np.broadcast_to(np.asarray(r.reduce, dtype=bool), (r.size,)) for r in rounds])
    else:
        out["reduce"] = None
    return out


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

    The rows are not built here: every round's rows come in blocks of one class group,
    and the schedule keeps a few numbers per block, from which a rank's rows
    (:meth:`~ArraySchedule.rank_rows`, :meth:`~ArraySchedule.take`) or the whole
    :meth:`~ArraySchedule.columns` are computed when read.  The link check covers every
    distinct pair of nodes the rows join.

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
    ngroups = len(groups)
    steps = p - 1
    rng = np.random.default_rng(seed)
    # per step and class group: the route's XOR offsets (hop h: table[t, g, h]), its hops,
    # and every node's destination
    routes, lengths = [], np.zeros((steps, ngroups), dtype=np.int64)
    dests = np.zeros((steps, p), dtype=np.int64)
    for t in range(steps):
        offsets = step_offsets(topo, groups, t, dest, route)
        lengths[t] = [len(o) - 1 for o in offsets]
        dests[t] = np.asarray(dest(nodes, t), dtype=np.int64)
        for s in rng.choice(p, size=min(checks, p), replace=False):
            s = int(s)
            if list(route(s, int(dests[t, s]))) != [s ^ int(o) for o in offsets[group_of[s]]]:
                raise DualmpiError(f"step {t}: the route of node {s} is not its class's renamed route")
        routes.append(offsets)
    width = lengths.max(axis=1) if steps else _empty()
    span = int(width.max()) + 1 if steps else 1
    table = np.zeros((steps, ngroups, span), dtype=np.int64)
    for t, offsets in enumerate(routes):
        for g, offs in enumerate(offsets):
            table[t, g, :len(offs)] = offs
    # round r is hop round_h[r] of step round_t[r]; its rows are the live sources in
    # order, which come in blocks: the members of one class group (consecutive nodes)
    round_t = np.repeat(np.arange(steps, dtype=np.int64), width)
    round_h = np.arange(round_t.size, dtype=np.int64) - np.repeat(np.cumsum(width) - width, width)
    live_groups = lengths[round_t] > round_h[:, None]           # (rounds, groups)
    blk_r, blk_g = np.nonzero(live_groups)                      # the blocks in row order
    sched = _AlltoallSchedule("alltoall", alltoall_name(topo), topo, None, [], steps,
                              blk_r.size * per)
    sched._setup(blk_r, blk_g, round_t, round_h, table, lengths, dests.reshape(-1), per)
    sched._check_links()
    return sched


class _Columns(dict):
    """The columns of an :class:`_AlltoallSchedule`, each computed when first read."""

    def __init__(self, sched, known):
        super().__init__(known)
        self.sched = sched

    def __missing__(self, name):
        if name not in COLUMNS:
            raise KeyError(name)
        col = self[name] = self.sched.take(None, name)[0]
        return col

    def get(self, name, default=None):
        return self[name] if name in COLUMNS or name in self else default


class _AlltoallRound:
    """A round of an :class:`_AlltoallSchedule`: its columns read from the schedule's."""

    reduce = False

    def __init__(self, sched, k, step, hop):
        self._sched, self._k, self.step, self.hop = sched, k, step, hop

    @property
    def size(self):
        """Number of rows (blocks moved over links) in the round."""
        b = self._sched._bounds
        return int(b[self._k + 1] - b[self._k])

    def __getattr__(self, name):
        if name not in COLUMNS:
            raise AttributeError(name)
        b = self._sched._bounds
        return self._sched.columns()[name][b[self._k]:b[self._k + 1]]


class _AlltoallSchedule(ArraySchedule):
    """The total exchange of :func:`alltoall_arrays`, its rows computed when read.

    Every round's rows come in *blocks*: the ``per`` members of one class group, which
    route alike (renamed), so a row is given by its block and its member, and a block by
    a few numbers (its round, group, XOR offsets before and after the hop, whether the
    hop is the route's first or last).  :meth:`rank_rows` decides which blocks — or
    aligned parts of them, all of whose sources are on one rank and all of whose
    destinations too — touch a rank, and :meth:`take` computes columns at given rows,
    so a rank's plan never builds the rows of the whole network.  :meth:`columns` and
    the rounds' arrays are computed (column by column) when read.
    """

    def _setup(self, blk_r, blk_g, round_t, round_h, table, lengths, dests, per):
        p = self.topo.num_nodes
        t, h = round_t[blk_r], round_h[blk_r]
        self._p, self._per, self._shift = p, per, per.bit_length() - 1
        #: the first hop rounds' blocks and where each step starts (:meth:`step_bytes`)
        self._first_rows = None
        self._blk_r, self._blk_g, self._blk_t = blk_r, blk_g, t
        self._blk_a = table[t, blk_g, h]                    # XOR offset of the hop's sender
        self._blk_b = table[t, blk_g, h + 1]                # and receiver
        self._first = h == 0                                # read from the source's block
        self._last = lengths[t, blk_g] == h + 1             # written to the destination's
        transit = (p + 2) * (p + 1) + 2 * blk_g             # transit_key(p, parity, g)
        # hop h reads parity h % 2 and writes the other: a node that forwards and
        # receives in one hop round never overwrites what it is sending
        self._src_transit = transit + h % 2
        self._dst_transit = transit + (h + 1) % 2
        self._within = np.arange(blk_r.size, dtype=np.int64) - np.searchsorted(blk_r, blk_r)
        self._dests = dests                                 # dests[t * p + s]
        self._bounds = np.zeros(round_t.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(blk_r, minlength=round_t.size) * per, out=self._bounds[1:])
        self.rounds = [_AlltoallRound(self, k, int(round_t[k]), int(round_h[k]))
                       for k in range(round_t.size)]
        self.flat = None

    def _check_links(self):
        """Link-check every distinct ``(sender, receiver)`` pair of the rows.

        The rows of a block send from ``u`` to ``u XOR x`` (``x`` the XOR of the block's
        two offsets) for every ``u`` of one aligned run of ``per`` nodes, so the distinct
        pairs are those of the distinct ``(run, x)``: each checked with the topology.
        """
        per, p = self._per, self._p
        run = ((self._blk_g << self._shift) ^ self._blk_a) >> self._shift
        code = np.unique(run * p + (self._blk_a ^ self._blk_b))
        src = ((code // p) << self._shift)[:, None] + np.arange(per, dtype=np.int64)
        check_links(self.topo, src.reshape(-1), (src ^ (code % p)[:, None]).reshape(-1))

    def bounds(self):
        return self._bounds

    def reducing(self):
        return None

    def columns(self):
        if self.flat is None:
            self.flat = _Columns(self, {"bounds": self._bounds, "reduce": None})
        return self.flat

    def step_bytes(self, size):
        """See :meth:`ArraySchedule.step_bytes`; read from each step's first hop round.

        Every row is a message of one block, and a step's first hop round sends every
        source's block (the later rounds forward some of them), so a step's largest
        message is the largest block of its first round.

        >>> from dualmpi.topology import DualCube
        >>> a = alltoall_arrays(DualCube(2))
        >>> sizes = lambda origin, target: origin + target  # noqa: E731
        >>> a.step_bytes(sizes) == ArraySchedule.step_bytes(a, sizes)
        True
        """
        kept = self._first_rows
        if kept is None:  # the first rounds' blocks and where each step starts
            first = np.flatnonzero(self._first)
            rows = ((first << self._shift)[:, None] + np.arange(self._per, dtype=np.int64))
            origin, target = self.take(rows.reshape(-1), "origin", "target")
            steps = self._blk_t[first]
            kept = (origin, target, first.size,
                    np.flatnonzero(np.r_[True, steps[1:] != steps[:-1]]))
            if origin.size <= STEP_SHAPE_ROWS:  # (a larger network's made at each call)
                self._first_rows = kept
        origin, target, blocks, starts = kept
        if blocks == 0:
            return 0
        top = np.asarray(size(origin, target), dtype=np.int64).reshape(blocks, -1).max(axis=1)
        return int(np.maximum.reduceat(top, starts).sum())

    def rank_rows(self, lo, hi):
        """See :meth:`ArraySchedule.rank_rows`; decided per aligned part of a block.

        A part of ``z`` members (``z`` a power of two that divides ``per``, ``lo`` and
        ``hi``) sends from ``z`` aligned nodes and to ``z`` aligned nodes, each run inside
        ``[lo, hi)`` or outside it.
        """
        z = self._per
        for x in (lo, hi):
            if x:
                z = min(z, x & -x)
        parts = self._per // z
        base = ((self._blk_g << self._shift)[:, None]
                + np.arange(0, self._per, z, dtype=np.int64)).reshape(-1)
        a = np.repeat(self._blk_a, parts)
        s = base ^ a
        sends = (s >= lo) & (s < hi)
        s = base ^ np.repeat(self._blk_b, parts)
        arrives = (s >= lo) & (s < hi)
        part = np.flatnonzero(sends | arrives)
        rows = ((part * z)[:, None] + np.arange(z, dtype=np.int64)).reshape(-1)
        self._run = z  # (what take tries first)
        return rows, np.repeat(sends[part], z), np.repeat(arrives[part], z)

    def take(self, rows, *names):
        """See :meth:`ArraySchedule.take`; computed from the rows' blocks (``rows=None``: all)."""
        p, shift = self._p, self._shift
        z = self._runs(rows)
        if rows is None:  # every block's members: (blocks, per) broadcasts, then flattened
            def at(x):
                return x[:, None]
            member = np.arange(self._per, dtype=np.int64)[None, :]
        elif z > 1:  # aligned runs of z rows of one block: (runs, z) broadcasts
            first = rows[::z]
            blk = first >> shift

            def at(x):
                return x[blk][:, None]
            member = (first & (self._per - 1))[:, None] + np.arange(z, dtype=np.int64)
        else:
            blk = rows >> shift

            def at(x):
                return x[blk]
            member = rows & (self._per - 1)
        origin = bkey = target = None
        out = []
        for name in names:
            if name in ("origin", "src", "dst", "target", "src_key", "dst_key") and origin is None:
                origin = at(self._blk_g << shift) | member
            if name in ("target", "src_key", "dst_key") and bkey is None:
                target = self._dests[at(self._blk_t * p) + origin]
                bkey = origin + 2
                bkey *= p + 1
                bkey += target
                bkey += 1
            if name == "round":
                col = at(self._blk_r) + 0 * member if z > 1 or rows is None else at(self._blk_r)
            elif name == "origin":
                col = origin
            elif name == "src":
                col = origin ^ at(self._blk_a)
            elif name == "dst":
                col = origin ^ at(self._blk_b)
            elif name == "target":
                col = target
            elif name in ("src_key", "dst_key"):
                keep, transit = (self._first, self._src_transit) if name == "src_key" else \
                    (self._last, self._dst_transit)
                col = bkey if names.count("src_key") + names.count("dst_key") == 1 else \
                    bkey.copy()
                np.copyto(col, at(transit), where=~at(keep))
            elif name == "msg":
                col = at(self._within << shift) | member
            else:
                raise KeyError(name)
            out.append(col.reshape(-1))
        return out

    def _runs(self, rows):
        """Return ``z > 1`` when ``rows`` are aligned runs of ``z`` consecutive rows, else 1.

        (The rows of :meth:`rank_rows` and their subsets by part are: ``z`` is its part.)
        """
        z = getattr(self, "_run", 1)
        if rows is None or z <= 1 or rows.size % z:
            return 1
        runs = rows.reshape(-1, z)
        if (runs[:, 0] % z).any() or ((runs[:, 1:] - runs[:, :-1]) != 1).any():
            return 1
        return z


def alltoall_name(topo):
    """Return the name of the total-exchange algorithm on ``topo``.

    >>> from dualmpi.topology import DualCube
    >>> alltoall_name(DualCube(2))
    'dual-cube Algorithms 3+4'
    """
    return {"DualCube": "dual-cube Algorithms 3+4", "MetaCube": "metacube Algorithms 1-4",
            "Hypercube": "e-cube total exchange"}.get(type(topo).__name__, "total exchange")
