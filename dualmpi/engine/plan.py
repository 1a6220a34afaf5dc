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

Link checks happen before: every row of an :class:`~dualmpi.engine.arrays.ArraySchedule`
is a link.  The counts of messages and bytes per directed link are computed here, at
compile time, so running a plan counts nothing.
"""

from dataclasses import dataclass, field

import numpy as np

from ..errors import DualmpiError
from .arrays import block_key, key_space
from .layout import Layout, layout_kind

__all__ = ["RankPlan", "BoundPlan", "BoundRound", "compile_rank", "merge_segments"]


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

    @property
    def num_slots(self):
        """Slots in the store (blocks held by this rank's nodes, transit and scratch buffers)."""
        return int(self.slot_codes.size) + self.scratch

    def slot_blocks(self):
        """Return ``(origin, target, is_block)`` per regular slot (transit slots: not blocks)."""
        p = self.p
        key = self.slot_codes % key_space(p)
        is_block = key < (p + 2) * (p + 1)
        return key // (p + 1) - 2, key % (p + 1) - 1, is_block

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
        a row of round ``k`` moving in round ``k + j``.  ``positions`` (one integer per
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


def compile_rank(sched, q, rank, root_rank=0):
    """Return rank ``rank``'s :class:`RankPlan` of an :class:`ArraySchedule` with ``q`` nodes per rank.

    Raises :class:`DualmpiError` when a node of this rank would send a block it does not
    hold at that point (the engine never invents data).

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
    rounds = sched.rounds
    # this rank's rows only, round by round (no full-schedule temporaries: on MC(2, 2) the
    # schedule has 7.5 M rows, and first-touch memory is what large temporaries cost)
    lo, hi = rank * q, (rank + 1) * q
    parts = {name: [] for name in ("rnd", "order", "src", "dst", "msg", "origin", "target",
                                   "src_key", "dst_key", "reduce")}
    start = 0
    for k, r in enumerate(rounds):
        s_, d_ = r.src, r.dst
        sel = np.flatnonzero(((s_ >= lo) & (s_ < hi)) | ((d_ >= lo) & (d_ < hi)))
        if sel.size:
            parts["rnd"].append(np.full(sel.size, k, dtype=np.int64))
            parts["order"].append(sel + start)
            for name in ("src", "dst", "msg", "origin", "target", "src_key", "dst_key"):
                parts[name].append(getattr(r, name)[sel])
            parts["reduce"].append(np.broadcast_to(np.asarray(r.reduce, dtype=bool),
                                                   (r.size,))[sel])
        start += r.size
    cols = {name: (np.concatenate(v) if v else np.zeros(0, dtype=bool if name == "reduce"
                                                       else np.int64))
            for name, v in parts.items()}
    rnd, order, src, dst, msg = (cols[n] for n in ("rnd", "order", "src", "dst", "msg"))
    origin, target, skey, dkey = (cols[n] for n in ("origin", "target", "src_key", "dst_key"))
    reducing = cols["reduce"]
    reduce_rounds = np.array([bool(np.any(r.reduce)) for r in rounds], dtype=bool)
    own_s, own_d = src // q == rank, dst // q == rank

    collective = layout_kind(sched.collective)
    lay = Layout(collective, p, q, _zero_sizes(collective, p // q), root_rank)
    in_rows, out_rows = lay.inputs(rank), lay.outputs(rank)
    in_codes = in_rows[0] * ks + block_key(p, in_rows[1], in_rows[2])
    out_codes = out_rows[0] * ks + block_key(p, out_rows[1], out_rows[2])
    stored = own_d & ~reducing
    recv_codes = dst[stored] * ks + dkey[stored]
    codes = np.concatenate([in_codes, out_codes, recv_codes])
    # slots in order of first appearance (inputs, outputs, then arrivals: the user's
    # buffers map onto runs of the store); by_code[i] is the slot of the i-th smallest code
    sorted_codes, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    appear = np.argsort(first, kind="stable")
    slot_codes = sorted_codes[appear]
    by_code = np.empty_like(appear)
    by_code[appear] = np.arange(appear.size, dtype=appear.dtype)

    def lookup(c, what):
        if slot_codes.size == 0:
            found, bad = np.zeros(c.size, dtype=np.int64), np.ones(c.size, dtype=bool)
        else:
            pos = np.minimum(np.searchsorted(sorted_codes, c), slot_codes.size - 1)
            found = by_code[pos]
            bad = sorted_codes[pos] != c
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            node, key = divmod(int(c[i]), ks)
            raise DualmpiError(f"{sched.collective} on {sched.topo.spec}: node {node} {what} "
                               f"{_describe(p, key)}, which it does not hold")
        return found

    src_slot = np.full(rnd.size, -1, dtype=np.int64)
    dst_slot = np.full(rnd.size, -1, dtype=np.int64)
    if own_s.any():
        src_slot[own_s] = lookup(src[own_s] * ks + skey[own_s], "sends")
    # a stored arrival's slot is its own code's; a combined one must find a slot it holds
    dst_slot[stored] = by_code[inverse.reshape(-1)[in_codes.size + out_codes.size:]]
    combined = own_d & reducing
    if combined.any():
        dst_slot[combined] = lookup(dst[combined] * ks + dkey[combined], "receives into")
    # a block to combine lands in a scratch slot (a copy of the sender's value at the start
    # of the round, also between two nodes of this rank), then is combined into its slot
    # (the scratch slots are reused from round to round: a round needs one per block it combines)
    red_in = own_d & reducing
    red_rnd = rnd[red_in]  # in round order
    within = np.arange(red_rnd.size, dtype=np.int64) - np.searchsorted(red_rnd, red_rnd)
    scratch = int(within.max()) + 1 if within.size else 0
    scratch_slot = np.full(rnd.size, -1, dtype=np.int64)
    scratch_slot[red_in] = slot_codes.size + within

    peer_of_dst, peer_of_src = dst // q, src // q
    send_m = own_s & ~own_d
    recv_m = own_d & ~own_s
    local_m = own_s & own_d

    def pick(mask, **cols):
        idx = np.flatnonzero(mask)
        out = {"round": rnd[idx], "order": order[idx], "origin": origin[idx],
               "target": target[idx]}
        out.update({k: v[idx] for k, v in cols.items()})
        return out

    send = pick(send_m, peer=peer_of_dst, slot=src_slot, msg=msg, src=src, dst=dst)
    recv = pick(recv_m, peer=peer_of_src, slot=np.where(red_in, scratch_slot, dst_slot),
                final=dst_slot, reduce=reducing)
    local = pick(local_m, slot=src_slot, dest=np.where(red_in, scratch_slot, dst_slot),
                 final=dst_slot, msg=msg, src=src, dst=dst, reduce=reducing)
    in_slots = lookup(in_codes, "starts with")
    out_slots = lookup(out_codes, "delivers")
    kinds = np.where(slot_codes % ks < (p + 2) * (p + 1), 0, 1)
    return RankPlan(sched.collective, p, q, rank, sched.root, len(rounds), slot_codes, kinds,
                    scratch, send, recv, local, (in_slots, in_rows), (out_slots, out_rows),
                    reduce_rounds)


def _zero_sizes(collective, ranks):
    """Placeholder sizes for the structural layout (only nodes and blocks are used)."""
    return np.zeros((ranks, ranks), dtype=np.int64) if collective == "alltoallv" else 0


def _describe(p, key):
    """Return a readable name of slot key ``key``."""
    if key < (p + 2) * (p + 1):
        return f"block {(key // (p + 1) - 2, key % (p + 1) - 1)}"
    return "a transit buffer"


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
    seg = np.cumsum(start) - 1
    merged = np.zeros(int(seg[-1]) + 1, dtype=np.int64)
    np.add.at(merged, seg, length)
    return group[start], off[start], merged


def _bind(plan, layout, packets, positions=None):
    """Compute slot offsets and every round's segments (see :meth:`RankPlan.bind`)."""
    p = plan.p
    origin, target, is_block = plan.slot_blocks()
    nslots = plan.slot_codes.size
    size = np.zeros(nslots + plan.scratch, dtype=np.int64)
    if is_block.any():
        size[:nslots][is_block] = layout.size(origin[is_block], target[is_block])
    rows = {name: getattr(plan, name) for name in ("send", "recv", "local")}
    row_len = {name: layout.size(r["origin"], r["target"]) for name, r in rows.items()}
    # transit and scratch slots take the largest block they ever hold
    for name, slots in (("send", ("slot",)), ("recv", ("slot", "final")),
                        ("local", ("slot", "dest", "final"))):
        for col in slots:
            s = rows[name][col]
            if s.size:
                np.maximum.at(size, s, row_len[name])
    offset = np.zeros(size.size + 1, dtype=np.int64)
    np.cumsum(size, out=offset[1:])
    nbytes = int(offset[-1])
    offset = offset[:-1]
    where = offset if positions is None else np.asarray(positions, dtype=np.int64)

    # messages and bytes per directed link leaving this rank's nodes (sends and local moves)
    link_src = np.concatenate([rows["send"]["src"], rows["local"]["src"]])
    link_dst = np.concatenate([rows["send"]["dst"], rows["local"]["dst"]])
    link_rnd = np.concatenate([rows["send"]["round"], rows["local"]["round"]])
    link_msg = np.concatenate([rows["send"]["msg"], rows["local"]["msg"]])
    link_len = np.concatenate([row_len["send"], row_len["local"]])
    lsrc, ldst, lmsgs, lbytes = _link_counts(p, link_src, link_dst, link_rnd, link_msg, link_len)

    def expand(r, length, *cols):
        """Cut rows into pieces: returns round, order, piece, and (offset, length) per column."""
        n = r["round"].size
        if packets == 1:
            return (r["round"], r["order"], np.zeros(n, dtype=np.int64), length,
                    [where[r[c]] for c in cols])
        piece = np.tile(np.arange(packets, dtype=np.int64), n)
        rep = np.repeat(np.arange(n), packets)
        total = length[rep]
        start = total // packets * piece + np.minimum(piece, total % packets)
        plen = total // packets + (piece < total % packets)
        return (r["round"][rep] + piece, r["order"][rep], piece, plen,
                [where[r[c]][rep] + start for c in cols])

    s_rnd, s_ord, s_pc, s_len, (s_off,) = expand(rows["send"], row_len["send"], "slot")
    r_rnd, r_ord, r_pc, r_len, (r_off, r_fin) = expand(rows["recv"], row_len["recv"], "slot",
                                                      "final")
    l_rnd, l_ord, l_pc, l_len, (l_src, l_dst, l_fin) = expand(rows["local"], row_len["local"],
                                                              "slot", "dest", "final")
    r_red = np.repeat(rows["recv"]["reduce"], packets) if packets > 1 else rows["recv"]["reduce"]
    l_red = np.repeat(rows["local"]["reduce"], packets) if packets > 1 else rows["local"]["reduce"]
    s_peer = np.repeat(rows["send"]["peer"], packets) if packets > 1 else rows["send"]["peer"]
    r_peer = np.repeat(rows["recv"]["peer"], packets) if packets > 1 else rows["recv"]["peer"]

    rounds = {}
    for kind, rr, oo, pc, peer, off, ln in (("sends", s_rnd, s_ord, s_pc, s_peer, s_off, s_len),
                                            ("recvs", r_rnd, r_ord, r_pc, r_peer, r_off, r_len)):
        if rr.size == 0:
            continue
        srt = np.lexsort((pc, oo, peer, rr))
        rr, peer, off, ln = rr[srt], peer[srt], off[srt], ln[srt]
        key = rr * (plan.p + 1) + peer
        g, o, n = merge_segments(key, off, ln)
        # zero-length segments carry nothing, but their message is still sent
        bounds = np.flatnonzero(np.r_[True, g[1:] != g[:-1], True])
        for a, b in zip(bounds[:-1], bounds[1:]):
            k, pr = divmod(int(g[a]), plan.p + 1)
            keep = n[a:b] > 0
            rounds.setdefault(k, _new_round(k))[kind].append((pr, o[a:b][keep], n[a:b][keep]))
    for kind, rr, oo, pc, a_off, b_off, ln, red in (
            ("copies", l_rnd, l_ord, l_pc, l_src, l_dst, l_len, np.ones(l_red.shape, bool)),
            ("combines", l_rnd, l_ord, l_pc, l_dst, l_fin, l_len, l_red),
            ("combines", r_rnd, r_ord, r_pc, r_off, r_fin, r_len, r_red)):
        sel = np.flatnonzero(red)
        if sel.size == 0:
            continue
        srt = sel[np.lexsort((pc[sel], oo[sel], rr[sel]))]
        rr2 = rr[srt]
        bounds = np.flatnonzero(np.r_[True, rr2[1:] != rr2[:-1], True])
        for a, b in zip(bounds[:-1], bounds[1:]):
            idx = srt[a:b]
            rounds.setdefault(int(rr2[a]), _new_round(int(rr2[a])))[kind].append(
                (a_off[idx], b_off[idx], ln[idx]))
    bound = []
    for k in sorted(rounds):
        d = rounds[k]
        bound.append(BoundRound(k, d["sends"], d["recvs"], _cat3(d["copies"]), _cat3(d["combines"])))
    copy_in = _user_segments(plan.inputs, offset, layout.inputs(plan.rank), size)
    copy_out = _user_segments(plan.outputs, offset, layout.outputs(plan.rank), size)
    return BoundPlan(nbytes, bound, copy_in, copy_out, lsrc, ldst, lmsgs, lbytes, packets,
                     offset, size)


def _new_round(k):
    return {"sends": [], "recvs": [], "copies": [], "combines": []}


def _cat3(parts):
    """Concatenate a list of (a, b, length) array triples (empty arrays when none)."""
    if not parts:
        z = np.zeros(0, dtype=np.int64)
        return (z, z, z)
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
    seg = np.cumsum(start) - 1
    merged = np.zeros(int(seg[-1]) + 1, dtype=np.int64)
    np.add.at(merged, seg, length)
    return (user[start], store[start], merged)


def _link_counts(p, src, dst, rnd, msg, length):
    """Return per directed link: messages (distinct round and message) and bytes.

    The rows of one message are consecutive (in schedule order), so a message starts
    wherever the round, the message number or the link changes.
    """
    if src.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, z
    link = src * p + dst
    ulink, inv = np.unique(link, return_inverse=True)
    nbytes = np.bincount(inv, weights=length, minlength=ulink.size).astype(np.int64)
    start = np.ones(src.size, dtype=bool)
    start[1:] = (rnd[1:] != rnd[:-1]) | (msg[1:] != msg[:-1]) | (link[1:] != link[:-1])
    msgs = np.bincount(inv[start], minlength=ulink.size).astype(np.int64)
    return ulink // p, ulink % p, msgs, nbytes
