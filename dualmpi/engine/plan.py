"""The plan compiler: an array schedule becomes one rank's rounds of byte segments (pure, numpy).

Compilation has two stages, so a plan is built once per collective and mapping and
reused for every message size:

1. :func:`compile_rank` (structure): which of the schedule's rows this rank sends,
   receives or moves between its own nodes, round by round, and a *slot* for every
   block each of its nodes holds — the blocks it starts with, those it receives and
   those it delivers.  One working buffer (the *store*) holds all slots; a received
   block lands in its slot and is forwarded from there (no copies on the way).
2. :meth:`RankPlan.bind` (sizes): slot sizes and offsets in the store, and for every
   round and peer rank the byte segments of the one message exchanged with that peer
   (the rows between two ranks in one round travel together, in schedule order; with
   one node per rank that is exactly one link message).  Optionally every row is cut
   into ``packets`` pieces that follow each other one round apart (pipelining: a
   forwarding node passes piece ``j`` on while piece ``j + 1`` arrives), which is
   cut-through switching for routed messages and a pipelined tree for broadcasts.
   What binding needs beyond sizes (which rows make which message, in which order) is
   found once per plan and number of pieces and kept with a plan of up to
   :data:`SHAPE_ROWS` rows, so binding a small plan again for new sizes (a v-variant's
   new counts) is a few array operations.

Link checks happen before: every row of an :class:`~dualmpi.engine.arrays.ArraySchedule`
is a link.  The counts of messages and bytes per directed link are computed here, at
compile time, so running a plan counts nothing.
"""

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..errors import DualmpiError
from .arrays import block_key, key_space
from .layout import Layout, layout_kind

__all__ = ["RankPlan", "BoundPlan", "BoundRound", "compile_rank", "merge", "merge_segments",
           "held_slots", "relocated", "received_seeds", "IN_STORE", "IN_SEND", "IN_RECV",
           "SHAPE_ROWS", "SPARE", "kept_shape"]

#: Where a zero-copy runner keeps a slot (:meth:`RankPlan.placement`): in its store, in the
#: user's send buffer, in the user's receive buffer.
IN_STORE, IN_SEND, IN_RECV = 0, 1, 2

#: Bytes a run's store holds after its signature and trailers: 8 apart from them, then the
#: 8-byte second block of a lone trailer's receive (a payload sent apart from its trailer:
#: :data:`dualmpi.engine.mpi.APART`), so a whole message received there is cut short in a
#: block MPI does not take for one with the trailer's.
SPARE = 16


@dataclass
class RankPlan:
    """One rank's share of a schedule, independent of message sizes (see :func:`compile_rank`).

    Row arrays (int64) are grouped by kind: ``send_*`` rows leave this rank, ``recv_*``
    rows arrive from another rank, ``local_*`` rows move between two of its own nodes.
    Each has the round, the peer rank (sends/receives), slot ids and the block
    ``(origin, target)`` whose size decides the bytes.
    """

    collective: str
    p: int
    q: int
    rank: int
    root: object
    num_rounds: int
    slot_codes: np.ndarray
    slot_kinds: np.ndarray
    scratch: int
    send: dict
    recv: dict
    local: dict
    inputs: tuple
    outputs: tuple
    reduce_rounds: np.ndarray
    links: dict = field(default_factory=dict)
    #: what binding needs beyond sizes, per ``packets`` (:func:`_shape`), kept at the first bind
    shapes: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def num_slots(self):
        """Slots in the store (blocks held by this rank's nodes, transit and scratch buffers)."""
        return int(self.slot_codes.size) + self.scratch

    @property
    def num_rows(self):
        """Rows of the plan: its sends, receives and local moves."""
        return sum(int(getattr(self, kind)["round"].size) for kind in ("send", "recv", "local"))

    def slot_blocks(self):
        """Return ``(origin, target, is_block)`` per regular slot (transit slots: not blocks)."""
        p = self.p
        key = self.slot_codes % key_space(p)
        is_block = key < (p + 2) * (p + 1)
        return key // (p + 1) - 2, key % (p + 1) - 1, is_block

    def placement(self, send=True, recv=True):
        """Return where a runner bound to the user's buffers keeps each slot (zero-copy).

        ``send``/``recv``: whether the rank has a send and a receive buffer.  Returns
        ``(where, seeds)``: ``where`` per slot (:attr:`num_slots`) is :data:`IN_STORE`,
        :data:`IN_SEND` or :data:`IN_RECV`; ``seeds`` are the input slots a round writes
        (a reduction combines into them), whose blocks are copied from the send buffer
        before the first round.

        - An input slot no round writes is read where it is, in the send buffer; one that
          is an output slot too is then copied to the receive buffer (the rank's own block).
        - An input slot a round writes is seeded: in the receive buffer when it is an output
          slot too (the result builds up where it belongs), else in the store.  Most seeds
          are not copied but received into (:func:`received_seeds`).
        - Any other output slot is received where it belongs, in the receive buffer.
        - Transit and scratch slots are in the store.

        >>> from dualmpi.topology import from_spec
        >>> from dualmpi.engine.core import Engine
        >>> from dualmpi.engine.local import LocalTransport
        >>> engine = Engine(from_spec("hypercube:n=1"), 1, LocalTransport())
        >>> first, second = (engine.rank_plan(rank, "scan") for rank in (0, 1))
        >>> first.placement()[0].tolist() == [IN_SEND]  # rank 0's result: its own block
        True
        >>> where, seeds = second.placement()  # rank 1 combines rank 0's block into its own
        >>> where.tolist() == [IN_RECV, IN_STORE], seeds.tolist() == second.inputs[0].tolist()
        (True, True)
        """
        where = np.full(self.num_slots, IN_STORE, dtype=np.int8)
        in_slots, out_slots = self.inputs[0], self.outputs[0]
        written = np.zeros(self.num_slots, dtype=bool)
        for rows, cols in ((self.recv, ("slot", "final")), (self.local, ("dest", "final"))):
            for col in cols:
                if rows.get(col) is not None and rows[col].size:
                    written[rows[col][rows[col] >= 0]] = True
        if recv:
            where[out_slots] = IN_RECV
        seeds = np.zeros(0, dtype=np.int64)
        if send:
            read = in_slots[~written[in_slots]]
            where[read] = IN_SEND
            seeds = in_slots[written[in_slots]]
            if not recv:
                return where, seeds
            where[seeds[~np.isin(seeds, out_slots)]] = IN_STORE
        else:
            where[in_slots] = IN_STORE
        return where, seeds

    def find(self, nodes, origin, target):
        """Return the slot ids of blocks ``(origin, target)`` held by ``nodes`` (-1: none)."""
        p = self.p
        codes = np.asarray(nodes, dtype=np.int64) * key_space(p) + block_key(
            p, np.asarray(origin, dtype=np.int64), np.asarray(target, dtype=np.int64))
        if self.slot_codes.size == 0:
            return np.full(codes.shape, -1, dtype=np.int64)
        order = np.argsort(self.slot_codes, kind="stable")
        ordered = self.slot_codes[order]
        pos = np.minimum(np.searchsorted(ordered, codes), self.slot_codes.size - 1)
        return np.where(ordered[pos] == codes, order[pos], -1)

    def bind(self, layout, packets=1, positions=None):
        """Return the :class:`BoundPlan` for the sizes of ``layout`` (a :class:`Layout`).

        ``packets > 1`` pipelines: every row becomes ``packets`` pieces, piece ``j`` of
        a row of round ``k`` moving in round ``k + j``.  Pieces are cut at the same byte
        offsets in every block (multiples of the largest block's ``1/packets``, the last
        piece taking the rest), so each piece of a slot is a copy of the unpipelined plan
        shifted by ``j`` rounds and no round reads bytes another of its messages writes.  ``positions`` (one integer per
        slot) places the slots elsewhere than at their store offsets — absolute addresses
        in the user's buffers for zero-copy runs; segments are then merged in that space.
        """
        return _bind(self, layout, max(1, int(packets)), positions)


@dataclass
class BoundRound:
    """One round of a bound plan: per peer the segments of one message, local moves, combines."""

    index: int
    sends: list
    recvs: list
    copies: tuple
    combines: tuple


@dataclass
class BoundPlan:
    """A rank plan with byte offsets: everything a transport needs to run it.

    Attributes
    ----------
    nbytes : int
        Size of the store.
    rounds : list of BoundRound
        Only the rounds in which this rank does something, in order.
    copy_in, copy_out : tuple of numpy.ndarray
        ``(user_offset, store_offset, length)`` segments between the user's buffers
        and the store.
    link_src, link_dst, link_messages, link_bytes : numpy.ndarray
        Messages and bytes one run sends over each directed link that leaves one of
        this rank's nodes (including links between two of its nodes).
    """

    nbytes: int
    rounds: list
    copy_in: tuple
    copy_out: tuple
    link_src: np.ndarray
    link_dst: np.ndarray
    link_messages: np.ndarray
    link_bytes: np.ndarray
    packets: int = 1
    #: Byte offset and size of every slot in the store.
    slot_offset: np.ndarray = None
    slot_size: np.ndarray = None
    #: Every round's ``copies`` one after the other, in round order (``(src, dst, length)``
    #: arrays; each round's are a slice of them): one table for a compiled loop.
    copies_all: tuple = None
    #: The same local moves as one int64 table of ``(dst, src, length)`` rows and a spare
    #: zero row (``copies_all`` are its columns), or None when there are none.
    moves: np.ndarray = None


def compile_rank(sched, q, rank, root_rank=0, kind=None):
    """Return rank ``rank``'s :class:`RankPlan` of an :class:`ArraySchedule` with ``q`` nodes per rank.

    Raises :class:`DualmpiError` when a node of this rank would send a block it does not
    hold at that point (the engine never invents data).  ``kind`` is the buffer layout
    (default: the schedule's collective's, :func:`~dualmpi.engine.layout.layout_kind`).

    Works on this rank's rows of the schedule (:meth:`ArraySchedule.rank_rows
    <dualmpi.engine.arrays.ArraySchedule.rank_rows>`, whose columns
    :meth:`~dualmpi.engine.arrays.ArraySchedule.take` gives): its sends, receives and
    local moves are picked from them directly, and slots are
    found by sorting one packed integer per block (slot code and position), not by a
    stable argsort or by searching in random order.

    Examples
    --------
    >>> from dualmpi.collectives import build_schedule
    >>> from dualmpi.engine.arrays import from_schedule
    >>> from dualmpi.topology import Hypercube
    >>> a = from_schedule(build_schedule("allgather", Hypercube(2)))
    >>> plan = compile_rank(a, q=2, rank=0)
    >>> plan.num_slots, int(plan.send["round"].size), int(plan.local["round"].size)
    (8, 4, 2)
    """
    p = sched.topo.num_nodes
    if q < 1 or p % q:
        raise DualmpiError(f"{q} nodes per rank do not divide the {p} nodes of {sched.topo.spec}")
    ks = key_space(p)
    bounds = sched.bounds()
    reducing = sched.reducing()
    lo, hi = rank * q, (rank + 1) * q
    rows, own_s, own_d = sched.rank_rows(lo, hi)
    send_i = rows[own_s & ~own_d]
    recv_i = rows[own_d & ~own_s]
    local_i = rows[own_s & own_d]
    # blocks stored on arrival (in schedule order) and blocks combined into a held one
    red = None if reducing is None else reducing[rows]
    stored = own_d if red is None else own_d & ~red
    stored_i = rows[stored]
    combined = None if red is None else own_d & red
    combined_i = rows[combined] if red is not None else send_i[:0]
    # split what is computed per arrival into receives (from another rank) and local moves
    stored_local = own_s[stored]
    comb_local = own_s[combined] if red is not None else np.zeros(0, dtype=bool)
    del rows, own_s, own_d, stored, combined

    def code(idx, node, key):
        """Slot codes relative to this rank's first node (``lo * ks`` less than the absolute)."""
        out, k = sched.take(idx, node, key)
        out -= lo
        out *= ks
        out += k
        return out

    def fail(idx, codes, bad, what):
        i = int(np.argmin(np.where(bad, idx, np.iinfo(np.int64).max)))
        node, key = divmod(int(codes[i]) + lo * ks, ks)
        raise DualmpiError(f"{sched.collective} on {sched.topo.spec}: node {node} {what} "
                           f"{_describe(p, key)}, which it does not hold")

    collective = kind or layout_kind(sched.collective)
    lay = Layout(collective, p, q, _zero_sizes(collective, p // q), root_rank)
    in_rows, out_rows = lay.inputs(rank), lay.outputs(rank)
    in_codes = (in_rows[0] - lo) * ks + block_key(p, in_rows[1], in_rows[2])
    out_codes = (out_rows[0] - lo) * ks + block_key(p, out_rows[1], out_rows[2])
    # slots in order of first appearance (inputs, outputs, then arrivals: the user's
    # buffers map onto runs of the store); in the same sort, the slot every sent block
    # is read from (sends, then local moves) and the slot a combined block is combined
    # into, both of which must be held
    sent_i = np.concatenate([send_i, local_i])
    parts = [in_codes, out_codes, code(stored_i, "dst", "dst_key"),
             code(sent_i, "src", "src_key"), code(combined_i, "dst", "dst_key")]
    cut = np.cumsum([part.size for part in parts])
    slot_of, slot_codes = _number_slots(np.concatenate(parts), int(cut[2]), q * ks)
    del parts
    nslots = slot_codes.size
    slot_codes += lo * ks
    # (copies of the parts a plan keeps: views would keep all of slot_of alive)
    in_slots, out_slots, stored_slot, src_slot, comb_slot = np.split(slot_of, cut[:-1])
    in_slots, out_slots = in_slots.copy(), out_slots.copy()
    for rows, what, node, key, slots in ((sent_i, "sends", "src", "src_key", src_slot),
                                         (combined_i, "receives into", "dst", "dst_key",
                                          comb_slot)):
        if slots.size and slots.min() < 0:
            fail(rows, code(rows, node, key), slots < 0, what)
    # a combined block lands in a scratch slot first (a copy of the sender's value at the
    # start of the round, also between two nodes of this rank); the scratch slots are
    # reused from round to round: a round needs one per block it combines
    comb_rnd = _round_of(bounds, combined_i)
    within = np.arange(comb_rnd.size, dtype=np.int64) - np.searchsorted(comb_rnd, comb_rnd)
    scratch = int(within.max()) + 1 if within.size else 0

    def arrivals(n, local):
        """Return ``(dest, final, reduce)`` of the receives or local moves, in order."""
        pick = (lambda m: m) if local else (lambda m: ~m)
        red = np.zeros(n, dtype=bool)
        final = np.empty(n, dtype=np.int64)
        dest = np.empty(n, dtype=np.int64)
        if reducing is None:  # every block is stored where it lands
            final[:] = stored_slot[pick(stored_local)]
            return final, final, red
        red[:] = reducing[local_i if local else recv_i]
        final[~red] = stored_slot[pick(stored_local)]
        final[red] = comb_slot[pick(comb_local)]
        dest[~red] = final[~red]
        dest[red] = nslots + within[pick(comb_local)]
        return dest, final, red

    n_send = send_i.size
    r_dest, r_final, r_red = arrivals(recv_i.size, False)
    l_dest, l_final, l_red = arrivals(local_i.size, True)
    rnd, origin, target, msg, src, dst = sched.take(send_i, "round", "origin", "target", "msg",
                                                    "src", "dst")
    send = {"round": rnd, "order": send_i, "origin": origin, "target": target, "peer": dst // q,
            "slot": src_slot[:n_send].copy(), "msg": msg, "src": src, "dst": dst}
    rnd, origin, target, src = sched.take(recv_i, "round", "origin", "target", "src")
    recv = {"round": rnd, "order": recv_i, "origin": origin, "target": target, "peer": src // q,
            "slot": r_dest, "final": r_final, "reduce": r_red}
    rnd, origin, target, msg, src, dst = sched.take(local_i, "round", "origin", "target", "msg",
                                                    "src", "dst")
    local = {"round": rnd, "order": local_i, "origin": origin, "target": target,
             "slot": src_slot[n_send:].copy(), "dest": l_dest, "final": l_final, "msg": msg,
             "src": src, "dst": dst, "reduce": l_red}
    reduce_rounds = np.zeros(bounds.size - 1, dtype=bool)
    if reducing is not None:
        reduce_rounds[_round_of(bounds, np.flatnonzero(reducing))] = True
    kinds = np.where(slot_codes % ks < (p + 2) * (p + 1), 0, 1)
    return RankPlan(sched.collective, p, q, rank, sched.root, bounds.size - 1, slot_codes, kinds,
                    scratch, send, recv, local, (in_slots, in_rows), (out_slots, out_rows),
                    reduce_rounds)


def _round_of(bounds, idx):
    """Return the round of each row index (``idx`` sorted: a fast search)."""
    out = np.searchsorted(bounds, idx, side="right")
    out -= 1
    return out


def _sort_packed(keys, limit, own=False):
    """Return ``(sorted keys, order)`` of non-negative ``keys < limit``; ties keep their order.

    Key and position are packed into one int64 and sorted by value when they fit; else a
    stable argsort.  The packed values are distinct, so any sort gives the same order; numpy's
    stable one (a timsort) finds the runs a plan's codes come in: on MC(2,2)'s 8.5 M codes
    of one rank of 2, 17 ns an element where its default (an introsort) takes 64 and a
    stable argsort 51 (numpy 2.4).  ``own``: the caller gives ``keys`` up (it is overwritten).
    """
    bits = max(1, int(keys.size).bit_length())
    if keys.size and int(limit) < (1 << (62 - bits)):
        packed = keys if own else keys.copy()
        packed <<= bits
        packed |= np.arange(keys.size, dtype=np.int64)
        packed.sort(kind="stable")
        ordered = packed >> bits
        packed &= (1 << bits) - 1
        return ordered, packed
    order = np.argsort(keys, kind="stable")
    return keys[order], order


def _number_slots(codes, created, limit):
    """Number the distinct codes of ``codes[:created]`` in order of first appearance.

    Returns ``(slot of every element, code of every slot)``; an element after
    ``created`` whose code none of the first ``created`` has gets slot -1.  One sort of
    ``(code, position)`` pairs: each run of equal codes starts with its first creator.

    >>> slot, codes = _number_slots(np.array([7, 3, 7, 5, 3, 5, 4]), 5, 8)
    >>> slot.tolist(), codes.tolist()
    ([0, 1, 0, 2, 1, 2, -1], [7, 3, 5])
    """
    if codes.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    ordered, pos = _sort_packed(codes, limit, own=True)
    run = np.empty(ordered.size, dtype=bool)
    run[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=run[1:])
    starts = np.flatnonzero(run)
    first = pos[starts]           # where each distinct code first appears
    held = first < created
    first = first[held]
    # slots numbered in order of first appearance: the rank of each "first" among them
    run_slot = np.full(starts.size, -1, dtype=np.int64)
    by_appearance = _sort_packed(first, codes.size)[1]
    numbers = np.empty(first.size, dtype=np.int64)
    numbers[by_appearance] = np.arange(first.size, dtype=np.int64)
    run_slot[held] = numbers
    slot_codes = ordered[starts[held]][by_appearance]
    slot = np.empty(codes.size, dtype=np.int64)
    slot[pos] = np.repeat(run_slot, np.diff(np.append(starts, run.size)))
    return slot, slot_codes


def _zero_sizes(collective, ranks):
    """Placeholder sizes for the structural layout (only nodes and blocks are used)."""
    return np.zeros((ranks, ranks), dtype=np.int64) if collective == "alltoallv" else 0


def _describe(p, key):
    """Return a readable name of slot key ``key``."""
    if key < (p + 2) * (p + 1):
        return f"block {(key // (p + 1) - 2, key % (p + 1) - 1)}"
    return "a transit buffer"


def _edges(key):
    """Return the positions where runs of equal values of ``key`` start, and ``key.size``.

    >>> _edges(np.array([3, 3, 5, 5, 5, 2])).tolist()
    [0, 2, 5, 6]
    """
    edge = np.ones(key.size + 1, dtype=bool)
    np.not_equal(key[1:], key[:-1], out=edge[1:-1])
    return np.flatnonzero(edge)


def merge_segments(group, off, length):
    """Merge consecutive segments of one group that are adjacent in memory.

    Returns ``(group, offset, length)`` of the merged segments, in order.

    >>> g, o, n = merge_segments(np.array([0, 0, 0, 1]), np.array([0, 4, 10, 14]),
    ...                          np.array([4, 4, 4, 2]))
    >>> g.tolist(), o.tolist(), n.tolist()
    ([0, 0, 1], [0, 10, 14], [8, 4, 2])
    """
    if off.size == 0:
        return group, off, length
    start = np.ones(off.size, dtype=bool)
    start[1:] = (group[1:] != group[:-1]) | (off[1:] != off[:-1] + length[:-1])
    first = np.flatnonzero(start)
    return group[first], off[first], np.add.reduceat(length, first)


#: Plans of at most this many rows times pieces keep their :class:`_Shape` (a few int64
#: columns per row); larger ones, bound for a few sizes and far longer to run, make it anew.
SHAPE_ROWS = 1 << 14


class _Shape:
    """What binding a plan into ``packets`` pieces needs that no size changes (see :func:`_shape`).

    ``ask``: ``(origin, target)`` parts, the blocks whose sizes a binding asks its layout
    for: the plan's block slots (``blocks``), then its send, receive and local rows (one part,
    joined, for a plan that keeps its shape).  ``hold``: ``(slots, rows)`` parts, the slots
    that hold rows and the rows' places in the sizes (transit and scratch slots take their
    largest).  ``messages``: per kind (``"sends"``, ``"recvs"``) the rows of every message in
    order (one message per round and peer); ``moves``: the local copies and the combines in
    round order.  ``links``: per directed link its source, destination and messages, and
    ``(link of each row, rows)`` parts (:func:`_link_shape`).  Rows are given by their places
    in the sizes: a slice when they are in order (no copy), else an index array.
    """

    __slots__ = ("ask", "blocks", "hold", "messages", "moves", "links")


def _expand(r, packets):
    """Return ``(row, piece, round)`` of a kind's rows cut into ``packets`` pieces each
    (``row`` and ``piece`` None for one piece: every row once, in order)."""
    if packets == 1:
        return None, None, r["round"]
    n = r["round"].size
    piece = np.tile(np.arange(packets, dtype=np.int64), n)
    rep = np.repeat(np.arange(n, dtype=np.int64), packets)
    return rep, piece, r["round"][rep] + piece


def _rows_at(rep, srt, base, n):
    """Return the places in a binding's sizes of a kind's rows ``rep`` (None: all ``n`` in
    order) taken in the order ``srt`` (None: as they are), the kind's rows starting at
    ``base``: a slice when they stay in order (no copy), else an index array."""
    if srt is None:
        return slice(base, base + n) if rep is None else rep + base
    return (srt if rep is None else rep[srt]) + base


def _pick(column, rep):
    """A kind's column at rows ``rep`` (None: the column itself, no copy)."""
    return column if rep is None else column[rep]


def _shape(plan, packets):
    """Return the :class:`_Shape` of binding ``plan`` into ``packets`` pieces.

    Everything :func:`_bind` does that depends on the plan's structure alone — which rows
    make which message, in which order, which slots hold which rows, the messages per link —
    is done here, once per plan and ``packets`` when the plan has at most
    :data:`SHAPE_ROWS` rows times pieces (kept in ``plan.shapes``, its parts joined, so that
    binding for new sizes is a few array operations: a v-variant whose counts change every
    call binds on every call).  A larger plan's shape is made at each binding, from views and
    slices of the plan's own rows where it can (no more memory than binding needs).
    """
    hit = plan.shapes.get(packets)
    if hit is not None:
        return hit
    p = plan.p
    origin, target, is_block = plan.slot_blocks()
    blocks = np.flatnonzero(is_block)
    kinds = ("send", "recv", "local")
    rows = {name: getattr(plan, name) for name in kinds}
    base, count, at = {}, {}, blocks.size
    for name in kinds:
        base[name], count[name] = at, rows[name]["round"].size
        at += count[name]
    shape = _Shape()
    shape.blocks = blocks
    shape.ask = [(origin[blocks], target[blocks])] + [(rows[k]["origin"], rows[k]["target"])
                                                      for k in kinds]
    shape.hold = [(rows[name][col], slice(base[name], base[name] + count[name]))
                  for name, cols in (("send", ("slot",)), ("recv", ("slot", "final")),
                                     ("local", ("slot", "dest", "final")))
                  for col in cols if rows[name][col].size]
    shape.links = _link_shape(p, [(rows[k]["src"], rows[k]["dst"], rows[k]["round"],
                                   rows[k]["msg"], slice(base[k], base[k] + count[k]))
                                  for k in ("send", "local")])
    expanded = {name: _expand(rows[name], packets) for name in rows}
    shape.messages = {}
    for kind, name in (("sends", "send"), ("recvs", "recv")):
        r = rows[name]
        rep, piece, rr = expanded[name]
        if rr.size == 0:
            continue
        # one message per round and peer: its rows in schedule order, piece by piece
        key = rr * (p + 1) + _pick(r["peer"], rep)
        srt = _in_order(key, _pick(r["order"], rep), piece, (int(rr.max()) + 1) * (p + 1))
        slot = _pick(r["slot"], rep)
        if srt is not None:
            key, slot = key[srt], slot[srt]
            piece = None if piece is None else piece[srt]
        shape.messages[kind] = (key, _rows_at(rep, srt, base[name], count[name]), piece, slot)
    shape.moves = []
    for kind, name, a_col, b_col, combining in (("copies", "local", "slot", "dest", False),
                                                ("combines", "local", "dest", "final", True),
                                                ("combines", "recv", "slot", "final", True)):
        r = rows[name]
        rep, piece, rr = expanded[name]
        if combining:
            sel = np.flatnonzero(_pick(r["reduce"], rep))
            rep, rr = (sel if rep is None else rep[sel]), rr[sel]
            piece = None if piece is None else piece[sel]
        if rr.size == 0:
            continue
        srt = _in_order(rr, _pick(r["order"], rep), piece, int(rr.max()) + 1)
        a_slot, b_slot = _pick(r[a_col], rep), _pick(r[b_col], rep)
        if srt is not None:
            rr, a_slot, b_slot = rr[srt], a_slot[srt], b_slot[srt]
            piece = None if piece is None else piece[srt]
        bounds = _edges(rr)
        shape.moves.append((kind, _rows_at(rep, srt, base[name], count[name]), piece, a_slot,
                            b_slot, rr[bounds[:-1]].tolist(), bounds[:-1].tolist(),
                            bounds[1:].tolist()))
    if plan.num_rows * packets <= SHAPE_ROWS:  # kept, its parts joined: one size query, one
        shape.ask = [tuple(np.concatenate([part[i] for part in shape.ask]) for i in (0, 1))]
        shape.hold = [(np.concatenate([s for s, _ in shape.hold]),  # update of the slots
                       np.concatenate([np.arange(a.start, a.stop, dtype=np.int64)
                                       for _, a in shape.hold]))] if shape.hold else []
        plan.shapes[packets] = shape
    return shape


def kept_shape(plan):
    """Return the unpipelined binding's :class:`_Shape` of ``plan`` when the plan keeps it (at
    most :data:`SHAPE_ROWS` rows: its parts joined, one size query), else None.

    What :mod:`dualmpi.engine.once` runs a call from, with the call's sizes and no binding.

    >>> from dualmpi.collectives import build_schedule
    >>> from dualmpi.engine.arrays import from_schedule
    >>> from dualmpi.topology import Hypercube
    >>> plan = compile_rank(from_schedule(build_schedule("alltoall", Hypercube(2))), 1, 0, 0,
    ...                     "alltoall")
    >>> shape = kept_shape(plan)
    >>> len(shape.ask), sorted(shape.messages)
    (1, ['recvs', 'sends'])
    """
    shape = _shape(plan, 1)
    return shape if plan.shapes.get(1) is shape else None


def _bind(plan, layout, packets, positions=None):
    """Compute slot offsets and every round's segments (see :meth:`RankPlan.bind`)."""
    shape = _shape(plan, packets)
    nslots = plan.slot_codes.size
    # every size the plan asks for (block slots, then rows): one query for a kept shape
    lens = [np.asarray(layout.size(o, t), dtype=np.int64) for o, t in shape.ask]
    lens = lens[0] if len(lens) == 1 else np.concatenate(lens)
    size = np.zeros(nslots + plan.scratch, dtype=np.int64)
    size[shape.blocks] = lens[:shape.blocks.size]
    for slots, at in shape.hold:  # transit and scratch slots take the largest block they hold
        np.maximum.at(size, slots, lens[at])
    offset = np.zeros(size.size + 1, dtype=np.int64)
    np.cumsum(size, out=offset[1:])
    nbytes = int(offset[-1])
    offset = offset[:-1]
    where = offset if positions is None else np.asarray(positions, dtype=np.int64)

    # messages and bytes per directed link leaving this rank's nodes (sends and local moves)
    # (each bound plan has arrays of its own: a plan's link arrays name it, as in
    # dualmpi.calls.Tally)
    lsrc, ldst, lmsgs, parts = shape.links
    lsrc, ldst, lmsgs = lsrc.copy(), ldst.copy(), lmsgs.copy()
    lbytes = np.zeros(lmsgs.size, dtype=np.int64)
    for inv, at in parts:
        lbytes += np.bincount(inv, weights=lens[at], minlength=lmsgs.size).astype(np.int64)

    # piece j of every block is bytes [j*unit, (j+1)*unit) of it (the last piece: the
    # rest), whatever the block's length: a slot that holds blocks of different lengths one
    # after the other (a transit buffer) is then touched piece by piece in the same places,
    # so piece j of a later block never lands where piece j' > j of an earlier one is still
    # being read or written in the same round
    unit = max(1, -(-layout.largest() // packets)) if packets > 1 else 0

    def pieces(asks, piece):
        """Return ``(start, length)`` of rows' pieces in their blocks."""
        total = lens[asks]
        if piece is None:
            return None, total
        start = np.minimum(piece * unit, total)
        return start, np.where(piece == packets - 1, total, np.minimum(start + unit, total)) - start

    rounds = defaultdict(_new_round)
    for kind, (key, asks, piece, slot) in shape.messages.items():
        start, ln = pieces(asks, piece)
        g, o, n = merge_segments(key, where[slot] if start is None else where[slot] + start, ln)
        # zero-length segments carry nothing, but their message is still sent
        keep = n > 0
        o, n = o[keep], n[keep]
        kept = np.zeros(keep.size + 1, dtype=np.int64)
        np.cumsum(keep, out=kept[1:])
        bounds = _edges(g)
        heads = g[bounds[:-1]]
        for k, pr, a, b in zip((heads // (plan.p + 1)).tolist(), (heads % (plan.p + 1)).tolist(),
                               kept[bounds[:-1]].tolist(), kept[bounds[1:]].tolist()):
            rounds[k][kind].append((pr, o[a:b], n[a:b]))
    z = np.zeros(0, dtype=np.int64)
    copies_all, moves = (z, z, z), None
    for kind, asks, piece, a_slot, b_slot, heads, firsts, ends in shape.moves:
        start, ln = pieces(asks, piece)
        a_off, b_off = where[a_slot], where[b_slot]
        if start is not None:
            a_off, b_off = a_off + start, b_off + start
        if kind == "copies":
            # one (dst, src, length) table for a compiled loop (and a spare zero row); the
            # copies are its columns
            moves = np.zeros((ln.size + 1, 3), dtype=np.int64)
            moves[:-1, 0], moves[:-1, 1], moves[:-1, 2] = b_off, a_off, ln
            a_off, b_off, ln = moves[:-1, 1], moves[:-1, 0], moves[:-1, 2]
            copies_all = (a_off, b_off, ln)
        for k, a, b in zip(heads, firsts, ends):
            rounds[k][kind].append((a_off[a:b], b_off[a:b], ln[a:b]))
    bound = []
    for k in sorted(rounds):
        d = rounds[k]
        bound.append(BoundRound(k, d["sends"], d["recvs"], _cat3(d["copies"]), _cat3(d["combines"])))
    copy_in = _user_segments(plan.inputs, offset, layout.inputs(plan.rank), size)
    copy_out = _user_segments(plan.outputs, offset, layout.outputs(plan.rank), size)
    return BoundPlan(nbytes, bound, copy_in, copy_out, lsrc, ldst, lmsgs, lbytes, packets,
                     offset, size, copies_all, moves)


def held_slots(bound, plan, send, recv):
    """Return ``(where, seeds, at, total)`` of a plan bound to the user's buffers (zero-copy):
    each slot's place, the seeded input slots, each slot's offset in the store and the
    store's size.

    ``where`` and ``seeds`` are :meth:`RankPlan.placement` for these buffers (``send`` and
    ``recv``: uint8 arrays, or None where the rank has none).  A zero-copy store holds only the
    slots that are not in the user's buffers (transit, scratch, seeded input slots), one after
    the other, so it is the size :meth:`Engine.store_bytes
    <dualmpi.engine.core.Engine.store_bytes>` estimates with ``zero_copy``; its pages are all
    ones a call writes.  ``at`` is -1 for the slots in the user's buffers.
    """
    where, seeds = plan.placement(send is not None, recv is not None)
    size = np.where(where == IN_STORE, bound.slot_size, 0)
    at = np.zeros(size.size + 1, dtype=np.int64)
    np.cumsum(size, out=at[1:])
    return where, seeds, np.where(where == IN_STORE, at[:-1], -1), int(at[-1])


def relocated(bound, plan, layout, send, recv, where, seeded, held_at, base):
    """Rebind ``bound`` with slots at absolute addresses in the user's buffers and the store.

    ``where``, ``seeded`` and ``held_at`` are :func:`held_slots`'s, ``base`` the store's
    address.  Returns the plan, the rank's own blocks to copy from the send to the receive
    buffer (``(recv offset, send offset, length)``) and the seeds to copy before the first
    round (``(destination, source, length)`` at absolute addresses).
    """
    at = base + held_at
    in_slots, out_slots = plan.inputs[0], plan.outputs[0]
    in_user = layout.inputs(plan.rank)[3] if in_slots.size else None
    if send is not None and in_slots.size:
        pick = where[in_slots] == IN_SEND
        at[in_slots[pick]] = send.ctypes.data + in_user[pick]
    own = []
    if recv is not None and out_slots.size:
        out_user = layout.outputs(plan.rank)[3]
        pick = where[out_slots] == IN_RECV
        at[out_slots[pick]] = recv.ctypes.data + out_user[pick]
        if send is not None and in_slots.size:
            pos_in = dict(zip(in_slots.tolist(), in_user.tolist()))
            shift = send.ctypes.data - recv.ctypes.data  # in place: the block is there
            for s_, u in zip(out_slots[~pick].tolist(), out_user[~pick].tolist()):
                n = int(bound.slot_size[s_])
                if n and s_ in pos_in and u != pos_in[s_] + shift:
                    own.append((u, pos_in[s_], n))
    seeds = []
    if send is not None and in_slots.size:
        pick = np.isin(in_slots, seeded)
        for s_, u in zip(in_slots[pick].tolist(), in_user[pick].tolist()):
            n = int(bound.slot_size[s_])
            if n and int(at[s_]) != send.ctypes.data + u:  # in place: already there
                seeds.append((int(at[s_]), send.ctypes.data + u, n))
    bound, seeds = received_seeds(plan.bind(layout, bound.packets, at), seeds)
    return bound, own, seeds


def received_seeds(bound, seeds):
    """Return ``(bound, seeds)`` with the seeds a round receives into instead of copied.

    ``bound`` is a plan at absolute addresses, ``seeds`` its ``(destination, source,
    length)`` copies before the first round (:func:`relocated`).  A seed is not copied when
    the first round ``k`` that writes it does so with one received block:

    - combined into it: the block is received where the seed goes and the seed's source
      (the user's send buffer) is combined into it, as Open MPI's reduce receives into the
      receive buffer and combines the send buffer into it
      (``ompi_coll_base_reduce_intra_basic_linear``); the round's scratch block is not
      used.  A combine is ``dst = src op dst``: the result is ``own op received`` instead
      of ``received op own``, the same for the commutative operations dualmpi accepts
      (:func:`dualmpi.ops.resolve`; bit for bit but for the order of two NaNs under
      ``MIN``/``MAX``, which MPI does not define);
    - or stored there whole (a reduce-scatter-allgather ``Allreduce`` sends half its input
      away and receives the result in its place later).

    Either way the sends of rounds up to ``k`` read the seed's source instead (before round
    ``k`` ends, the seed holds the rank's own block).  Saves a copy of the block per seed:
    on Q_1 a 1-MiB ``Reduce`` at its root took 1.62x Open MPI's time with the copy first,
    1.01x without (``mpiexec -n 2``, a receive and a combine in numpy, 20 calls, median of
    11, load 31).

    Seeds written otherwise first (a local move, part of a message, a block combined in
    pieces), or read by a local move or a combine before, are kept (the returned
    ``seeds``).

    >>> import numpy as np
    >>> seg = lambda *v: np.array(v, dtype=np.int64)
    >>> rnd = BoundRound(0, [(1, seg(100), seg(8))], [(1, seg(500, 508), seg(8, 8))],
    ...                  (seg(), seg(), seg()), (seg(500), seg(100), seg(8)))
    >>> plan = BoundPlan(0, [rnd], None, None, *(seg(),) * 4)
    >>> got, left = received_seeds(plan, [(100, 900, 8)])  # the seed goes from 900 to 100
    >>> left, got.rounds[0].sends[0][1].tolist(), got.rounds[0].recvs[0][1].tolist()
    ([], [900], [100, 508])
    >>> got.rounds[0].combines[0].tolist(), plan.rounds[0].recvs[0][1].tolist()
    ([900], [500, 508])
    >>> got, left = received_seeds(plan, [(508, 908, 8)])  # received whole: stored there
    >>> left, got.rounds[0].sends == plan.rounds[0].sends, got.rounds[0].recvs[0][1].tolist()
    ([], True, [500, 508])
    >>> received_seeds(plan, [(504, 904, 8)])[1]  # half of a received block: copied
    [(504, 904, 8)]
    """
    if not seeds:
        return bound, seeds
    rounds = list(bound.rounds)
    table = np.array(seeds, dtype=np.int64).reshape(-1, 3)
    lo, hi = table[:, 0], table[:, 0] + table[:, 2]

    def hit(offs, lens):  # per seed: does a segment share a byte with it?
        return _touching(offs, lens, lo, hi)

    z = np.zeros(0, dtype=np.int64)
    written = np.zeros((len(rounds), lo.size), dtype=bool)
    read = np.zeros_like(written)
    for i, rnd in enumerate(rounds):
        r_off = np.concatenate([offs for _, offs, _ in rnd.recvs] or [z])
        r_len = np.concatenate([lens for _, _, lens in rnd.recvs] or [z])
        (c_src, c_dst, c_len), (b_src, b_dst, b_len) = rnd.copies, rnd.combines
        written[i] = hit(b_dst, b_len) | hit(c_dst, c_len) | hit(r_off, r_len)
        read[i] = hit(c_src, c_len) | hit(b_src, b_len)
    # the first round that writes each seed; kept: never written, or read by a local move or
    # a combine up to that round
    first = np.where(written.any(axis=0), written.argmax(axis=0), -1)
    before = np.cumsum(read, axis=0)
    left, done = [], []
    for j, (dst, src, n) in enumerate(table.tolist()):
        k = int(first[j])
        if k < 0 or before[k, j] or not _receive_in(rounds, k, dst, src, n):
            left.append(seeds[j])
        else:
            done.append((k, dst, src, n))
    if not done:
        return bound, seeds
    done = np.array(done, dtype=np.int64)
    for i, old in enumerate(rounds):  # sends up to round k read a seed's source
        moves = done[done[:, 0] >= i]
        if not moves.size or not old.sends:
            continue
        a, b = moves[:, 1], moves[:, 1] + moves[:, 3]
        sends = []
        for peer, offs, lens in old.sends:
            for _, dst, src, n in moves[_touching(offs, lens, a, b)].tolist():
                offs, lens = _moved(offs, lens, dst, dst + n, src)
            sends.append((peer, offs, lens))
        rounds[i] = dataclasses.replace(old, sends=sends)
    return dataclasses.replace(bound, rounds=rounds), left


def _touches(offs, lens, lo, hi):
    """Return which segments ``(offs, lens)`` share a byte with ``[lo, hi)``."""
    return (offs < hi) & (offs + lens > lo) & (lens > 0)


def _touching(offs, lens, lo, hi):
    """Return which ranges ``[lo[i], hi[i])`` share a byte with a segment ``(offs, lens)``."""
    if not offs.size:
        return np.zeros(lo.size, dtype=bool)
    return _touches(offs[None, :], lens[None, :], lo[:, None], hi[:, None]).any(axis=1)


def _moved(offs, lens, lo, hi, to):
    """Return segments ``(offs, lens)`` with the bytes of ``[lo, hi)`` at ``to`` instead.

    Segments are cut at ``lo`` and ``hi``, so a message's bytes keep their order.
    """
    o, n = [], []
    for a, e in zip(offs.tolist(), (offs + lens).tolist()):
        if e <= lo or a >= hi or a == e:
            o.append(a)
            n.append(e - a)
            continue
        if a < lo:
            o.append(a)
            n.append(lo - a)
        x, y = max(a, lo), min(e, hi)
        o.append(to + x - lo)
        n.append(y - x)
        if e > hi:
            o.append(hi)
            n.append(e - hi)
    return np.array(o, dtype=np.int64), np.array(n, dtype=np.int64)


def _receive_in(rounds, k, dst, src, n):
    """Make round ``k`` (the first that writes seed ``(dst, src, n)``, which nothing read
    before) receive its block where the seed goes, combining ``src`` into it when the round
    combines; return False, changing nothing, when the round does not write it with one
    whole block of one message (:func:`received_seeds`)."""
    hi = dst + n
    rnd = rounds[k]
    if _touches(rnd.copies[1], rnd.copies[2], dst, hi).any():
        return False
    b_src, b_dst, b_len = rnd.combines
    row = np.flatnonzero(_touches(b_dst, b_len, dst, hi))
    # where round k's block lands: the seed itself, or the scratch block combined into it
    lo_at = dst if not row.size else int(b_src[row[0]])
    hi_at = lo_at + n
    into = [j for j, (_, offs, lens) in enumerate(rnd.recvs)
            if _touches(offs, lens, lo_at, hi_at).any()]
    if len(into) != 1 or _covered(*rnd.recvs[into[0]][1:], lo_at, hi_at) != n:
        return False  # not one whole block of one message
    if not row.size:  # stored where it arrives
        return True
    if row.size != 1 or b_dst[row[0]] != dst or b_len[row[0]] != n or \
            any(_touches(offs, lens, dst, hi).any() for _, offs, lens in rnd.recvs) or \
            _touches(rnd.copies[0], rnd.copies[2], lo_at, hi_at).any() or \
            _touches(b_src, b_len, lo_at, hi_at).sum() != 1:
        return False  # combined: received into scratch, combined whole, the scratch read once
    recvs = list(rnd.recvs)
    peer, offs, lens = recvs[into[0]]
    recvs[into[0]] = (peer, *_moved(offs, lens, lo_at, hi_at, dst))
    combines = (np.where(np.arange(b_src.size) == row[0], src, b_src), b_dst, b_len)
    rounds[k] = dataclasses.replace(rnd, recvs=recvs, combines=combines)
    return True


def _covered(offs, lens, lo, hi):
    """Return how many bytes of ``[lo, hi)`` segments ``(offs, lens)`` cover (none twice)."""
    inside = np.minimum(offs + lens, hi) - np.maximum(offs, lo)
    return int(inside[inside > 0].sum())


def merge(first, second, rank, shift=None):
    """Return one plan that runs two bound plans of one rank together, or None.

    Round ``k`` of the result is round ``k`` of both; where both send to (receive from) the
    same rank in the same round, their segments travel in one message, ``second``'s first.
    ``second``'s store is the result's first ``second.nbytes`` bytes, ``first``'s follows it
    (``shift``: ``first``'s offsets move by that much instead — for a ``second`` at absolute
    addresses, a zero-copy runner's, the address of ``first``'s store, whose bytes then stay
    where they are).
    Returns ``(plan, copy_in, copy_out)``: ``plan`` copies ``second``'s buffers in and out,
    ``copy_in``/``copy_out`` are ``first``'s segments in the same form (store offsets moved).
    The link counts are those of the messages the result sends.  For plans of one node per
    rank (``rank`` the node) without combines in ``first``; None for others.  A v-variant's
    count table carried in its plan's messages (:func:`dualmpi.engine.mpi.pair`).

    >>> from dualmpi.engine.core import Engine
    >>> from dualmpi.engine.local import LocalTransport
    >>> from dualmpi.topology import from_spec
    >>> eng = Engine(from_spec("hypercube:n=2"), 1, LocalTransport())
    >>> a, b = eng.runner(0, "allgather", 8).bound, eng.runner(0, "bcast", 100).bound
    >>> plan, cin, cout = merge(a, b, 0)
    >>> [len(r.sends) for r in a.rounds], [len(r.sends) for r in b.rounds]
    ([1, 1], [1, 1])
    >>> [len(r.sends) for r in plan.rounds], plan.nbytes == a.nbytes + b.nbytes
    ([1, 1], True)
    >>> int(plan.link_messages.sum()), int(plan.link_bytes.sum())
    (2, 224)
    >>> _, at, _ = merge(a, b, 0, shift=1 << 20)  # first's offsets moved by 1 MiB instead
    >>> (at[1] - cin[1]).tolist() == [(1 << 20) - b.nbytes] * at[1].size
    True
    """
    if any(rnd.combines[0].size for rnd in first.rounds):
        return None
    links = {}
    for b in (second, first):
        if np.any(b.link_src != rank):  # moves between a rank's own nodes: not one node a rank
            return None
        for d, m, n in zip(b.link_dst.tolist(), b.link_messages.tolist(), b.link_bytes.tolist()):
            acc = links.setdefault(d, [0, 0])
            acc[0] += m
            acc[1] += n
    if shift is None:
        shift = second.nbytes
    rounds = {rnd.index: {"sends": list(rnd.sends), "recvs": list(rnd.recvs),
                          "copies": [rnd.copies], "combines": rnd.combines}
              for rnd in second.rounds}
    for rnd in first.rounds:
        entry = rounds.setdefault(rnd.index, {"sends": [], "recvs": [], "copies": [],
                                              "combines": _NONE3})
        for kind in ("sends", "recvs"):
            at = {peer: i for i, (peer, _, _) in enumerate(entry[kind])}
            for peer, offs, lens in getattr(rnd, kind):
                i = at.get(peer)
                if i is None:
                    entry[kind].append((peer, offs + shift, lens))
                    continue
                _, o, n = entry[kind][i]
                entry[kind][i] = (peer, np.concatenate([o, offs + shift]),
                                  np.concatenate([n, lens]))
                if kind == "sends":  # one message on the link where there were two
                    links[peer][0] -= 1
        src, dst, length = rnd.copies
        entry["copies"].append((src + shift, dst + shift, length))
    merged = [BoundRound(k, d["sends"], d["recvs"], _cat3(d["copies"]), d["combines"])
              for k, d in sorted(rounds.items())]
    dsts = np.array(sorted(links), dtype=np.int64)
    plan = BoundPlan(second.nbytes + first.nbytes, merged, second.copy_in, second.copy_out,
                     np.full(dsts.size, rank, dtype=np.int64), dsts,
                     np.array([links[d][0] for d in dsts.tolist()], dtype=np.int64),
                     np.array([links[d][1] for d in dsts.tolist()], dtype=np.int64),
                     max(first.packets, second.packets))
    user, store, length = first.copy_in
    copy_in = (user, store + shift, length)
    user, store, length = first.copy_out
    return plan, copy_in, (user, store + shift, length)


def _new_round():
    return {"sends": [], "recvs": [], "copies": [], "combines": []}


def _in_order(key, order, piece, limit):
    """Return the permutation that sorts rows by ``(key, order, piece)`` (None: already sorted).

    The rows come in schedule order (``order`` increasing, then ``piece``), so a stable
    sort by ``key`` alone is enough, and none when the keys never decrease.  ``piece`` None:
    every row whole (one piece).
    """
    if key.size < 2 or not (key[1:] < key[:-1]).any():
        return None
    if piece is None:
        if (order[1:] < order[:-1]).any():
            return np.lexsort((order, key))
    elif (order[1:] < order[:-1]).any() or ((order[1:] == order[:-1])
                                             & (piece[1:] < piece[:-1])).any():
        return np.lexsort((piece, order, key))
    return _sort_packed(key, limit)[1]


#: What :func:`_cat3` returns for no triples (empty arrays are never written to).
_NONE3 = (np.zeros(0, dtype=np.int64),) * 3


def _cat3(parts):
    """Concatenate a list of (a, b, length) array triples (empty arrays when none)."""
    if not parts:
        return _NONE3
    if len(parts) == 1:
        return tuple(parts[0])
    return tuple(np.concatenate([part[i] for part in parts]) for i in range(3))


def _user_segments(structural, offset, rows, size):
    """Return merged ``(user_offset, store_offset, length)`` copies between a user buffer and the store."""
    slots, _ = structural
    user = rows[3]
    if slots.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return (z, z, z)
    store = offset[slots]
    length = size[slots]
    keep = length > 0
    user, store, length = user[keep], store[keep], length[keep]
    if user.size == 0:
        return (user, store, length)
    start = np.ones(user.size, dtype=bool)
    start[1:] = (user[1:] != user[:-1] + length[:-1]) | (store[1:] != store[:-1] + length[:-1])
    first = np.flatnonzero(start)
    return (user[first], store[first], np.add.reduceat(length, first))


def _link_shape(p, parts):
    """Return per directed link leaving this rank's nodes: source, destination, messages, and
    ``(link of each row, rows)`` per part (the rows' places in a binding's sizes).

    ``parts`` lists ``(src, dst, round, msg, rows)`` row arrays and the rows' places, taken
    one after the other.  The rows of one message are consecutive (in schedule order), so a
    message starts wherever the round, the message number or the link changes.  A binding's
    bytes per link are its rows' sizes summed per link.
    """
    parts = [part for part in parts if part[0].size]
    if not parts:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, []
    base = min(int(part[0].min()) for part in parts)
    span = (max(int(part[0].max()) for part in parts) - base + 1) * p
    links, starts, prev = [], [], None
    for src, dst, rnd, msg, _ in parts:
        link = (src - base) * p + dst
        start = np.empty(src.size, dtype=bool)
        start[1:] = (rnd[1:] != rnd[:-1]) | (msg[1:] != msg[:-1]) | (link[1:] != link[:-1])
        start[0] = prev is None or prev != (int(rnd[0]), int(msg[0]), int(link[0]))
        prev = (int(rnd[-1]), int(msg[-1]), int(link[-1]))
        links.append(link)
        starts.append(start)
    if span <= 1 << 24:  # the links numbered through a table over this rank's sources
        used = sum(np.bincount(link, minlength=span) for link in links)
        ulink = np.flatnonzero(used)
        number = np.zeros(span, dtype=np.int64)
        number[ulink] = np.arange(ulink.size, dtype=np.int64)
        invs = [number[link] for link in links]
    else:
        ulink, inv = np.unique(np.concatenate(links), return_inverse=True)
        invs = np.split(inv.reshape(-1), np.cumsum([link.size for link in links])[:-1])
    msgs = sum(np.bincount(inv[start], minlength=ulink.size) for inv, start in zip(invs, starts))
    return (ulink // p + base, ulink % p, np.asarray(msgs).astype(np.int64),
            [(inv, part[4]) for inv, part in zip(invs, parts)])
