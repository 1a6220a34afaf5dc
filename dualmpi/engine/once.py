"""A plan run once from its shape and the call's sizes, without a runner (``rounds.c``:
``dualmpi_once``).

A v-variant whose count table the engine's cache has not seen needs the plan bound to the
table's sizes and a runner made from the binding — persistent requests, derived datatypes, the
compiled loop's tables — before its one run: about 0.3 ms on 2 ranks, most of such a call's
time, spent again on every call of a program whose counts change every call (a sample sort,
mpi4py's object collectives on objects whose pickles change size).  A :class:`Once` is what
running the plan needs that no size changes, made once per plan from its kept shape
(:func:`~dualmpi.engine.plan.kept_shape`): per round its messages, each as the slots and sizes
of its segments in order, its local copies and combines, the slots the call's blocks come from
and go to.  A call gives it the table's sizes (one query of the :class:`~dualmpi.engine.layout.
Layout`), the slots' offsets follow (a cumulative sum), and one C call runs the rounds: each
send packed from the store into a scratch area and made with ``MPI_Isend``, each receive
contiguous into the scratch area with ``MPI_Irecv`` and copied to its slots once the round is
in — the bytes on the wire those of the runner's messages, so a rank that runs the call this
way and one that runs it on a runner (its cache had the plan) exchange the same messages.
Only the compiled loop's own case: no checksums, no shaped delays, no dropped round, a
reduction's operation one the loop applies (MPI's own on a predefined type), one node per
rank or several, a plan that keeps its shape.

>>> import numpy as np
>>> from dualmpi.collectives import build_schedule
>>> from dualmpi.engine.arrays import from_schedule
>>> from dualmpi.engine.plan import compile_rank
>>> from dualmpi.topology import Hypercube
>>> plan = compile_rank(from_schedule(build_schedule("alltoall", Hypercube(2))), 1, 0, 0,
...                     "alltoall")
>>> once = Once.of(plan)
>>> once.nrounds, [peer for _, peer in once.senders]
(4, [1, 2, 1, 2])
"""

import ctypes

import numpy as np
from mpi4py import MPI

from .mpi import (_A_COMM, _A_FLAGS, _A_INDEX, _A_ITEM, _A_OP, _A_SIGNATURE, _A_TYPE, _F_WATCH,
                  _MASK, _TAG_MOD, ABANDONED, _mpi_op, failed, handle_dtype, plan_method)
from .plan import _edges, kept_shape
from .watchdog import Watchdog

__all__ = ["Once", "run_once"]

# dualmpi_once's fields (rounds.c: the O_ enum)
(_O_NROUNDS, _O_ROUNDS, _O_RMSG, _O_SMSG, _O_RROWS, _O_SROWS, _O_COPIES, _O_COMBS, _O_NIN, _O_IN,
 _O_UIN, _O_NOUT, _O_OUT, _O_UOUT, _O_LENS, _O_OFF, _O_SIZE, _O_SEND, _O_RECV, _O_STORE,
 _O_SCRATCH, _O_REQS, _O_LIMIT, _O_APART, _O_LINE, _O_FIELDS) = range(26)

_address = MPI.Get_address

#: A call that would need more scratch than this (its store and every message packed) makes
#: its runner instead, whose store holds the slots alone (the memory check's estimate).
ONCE_BYTES = 1 << 26


def _places(at):
    """A shape's places in the sizes (a slice or an index array) as an int64 array."""
    if isinstance(at, slice):
        return np.arange(at.start, at.stop, dtype=np.int64)
    return np.asarray(at, dtype=np.int64)


class Once:
    """What running one plan needs that no size changes (see the module's text); None from
    :meth:`of` for a plan that does not keep its shape."""

    @classmethod
    def of(cls, plan):
        """Return the plan's :class:`Once` (kept on the plan), or None."""
        hit = plan.shapes.get("once")
        if hit is None:
            shape = kept_shape(plan)
            hit = plan.shapes["once"] = False if shape is None else cls(plan, shape)
        return hit or None

    def __init__(self, plan, shape):
        p1 = plan.p + 1
        self.rank = plan.rank
        #: the plan's collective (named in errors)
        self.collective = getattr(plan, "collective", None)
        self.ask = shape.ask[0]
        self.blocks = shape.blocks
        self.hold = shape.hold[0] if shape.hold else None
        self.nslots = plan.slot_codes.size + plan.scratch
        self.links = shape.links
        per_round = {}  # round -> [receives, sends, copies, combines]

        def at(k):
            return per_round.setdefault(k, ([], [], [], []))

        rows = {}
        for kind, col in (("recvs", 0), ("sends", 1)):
            if kind not in shape.messages:
                rows[kind] = np.zeros((0, 2), dtype=np.int64)
                continue
            key, asks, _, slot = shape.messages[kind]
            asks = _places(asks)
            rows[kind] = np.stack([np.asarray(slot, dtype=np.int64), asks], axis=1)
            bounds = _edges(key).tolist()  # (one message per round and peer)
            for a, b in zip(bounds[:-1], bounds[1:]):
                k, peer = divmod(int(key[a]), p1)
                at(k)[col].append((peer, a, b))
        for kind, asks, _, a_slot, b_slot, heads, firsts, ends in shape.moves:
            col = 2 if kind == "copies" else 3
            table = np.stack([np.asarray(a_slot, dtype=np.int64), np.asarray(b_slot,
                                                                             dtype=np.int64),
                              _places(asks)], axis=1)
            for k, a, b in zip(heads, firsts, ends):
                at(k)[col].append(table[a:b])
        order = sorted(per_round)
        self.nrounds = len(order)
        self.rounds = np.array([[k % _TAG_MOD] + [len(per_round[k][c]) for c in (0, 1)] +
                                [sum(len(t) for t in per_round[k][c]) for c in (2, 3)]
                                for k in order], dtype=np.int64).reshape(-1, 5)
        self.rmsg = np.array([m for k in order for m in per_round[k][0]],
                             dtype=np.int64).reshape(-1, 3)
        self.smsg = np.array([m for k in order for m in per_round[k][1]],
                             dtype=np.int64).reshape(-1, 3)
        self.rrows, self.srows = rows["recvs"], rows["sends"]
        moves = [[t for k in order for t in per_round[k][c]] for c in (2, 3)]
        self.copies, self.combs = (np.concatenate(m) if m else np.zeros((0, 3), dtype=np.int64)
                                   for m in moves)
        #: ``(round, peer)`` of each receive in order: a trailer's sender, named when it fails
        self.senders = [(k, int(m[0])) for k in order for m in per_round[k][0]]
        #: what the watchdog names while the call waits in its ``i``-th round (1-based)
        self.rounds_peers = [(k, tuple(int(m[0]) for m in per_round[k][0])) for k in order]
        self.inputs, self.outputs = (np.asarray(x[0], dtype=np.int64)
                                     for x in (plan.inputs, plan.outputs))
        self.nmsg = len(self.rmsg) + len(self.smsg)
        nreq = max([2 * (int(r[1]) + int(r[2])) + 1 for r in self.rounds] + [1])
        self.nreq = nreq
        # (the arrays of the C call's row that no call changes: their addresses once)
        self.row = np.zeros(_O_FIELDS, dtype=np.int64)
        for field, arr in ((_O_ROUNDS, self.rounds), (_O_RMSG, self.rmsg), (_O_SMSG, self.smsg),
                           (_O_RROWS, self.rrows), (_O_SROWS, self.srows),
                           (_O_COPIES, self.copies), (_O_COMBS, self.combs),
                           (_O_IN, self.inputs), (_O_OUT, self.outputs)):
            arr = np.ascontiguousarray(arr, dtype=np.int64)
            setattr(self, "_keep_%d" % field, arr)
            self.row[field] = arr.ctypes.data if arr.size else 0
        self.row[_O_NROUNDS] = self.nrounds
        self.row[_O_NIN], self.row[_O_NOUT] = self.inputs.size, self.outputs.size
        self._rask = self.rrows[:, 1]
        self._sask = self.srows[:, 1]

    def sizes(self, layout):
        """Return ``(lens, size, off, nbytes)``: the call's bytes per size index, per slot its
        bytes and offset in the store, and the store's bytes (as binding computes them)."""
        lens = np.asarray(layout.size(*self.ask), dtype=np.int64)
        size = np.zeros(self.nslots, dtype=np.int64)
        size[self.blocks] = lens[:self.blocks.size]
        if self.hold is not None:  # transit and scratch slots take the largest block they hold
            np.maximum.at(size, self.hold[0], lens[self.hold[1]])
        off = np.zeros(self.nslots + 1, dtype=np.int64)
        np.cumsum(size, out=off[1:])
        return lens, size, off, int(off[-1])

    def link_bytes(self, lens):
        """Return the bytes one call sends over each of the plan's links (its shape's order)."""
        lsrc, ldst, lmsgs, parts = self.links
        out = np.zeros(lmsgs.size, dtype=np.int64)
        for inv, at in parts:
            out += np.bincount(inv, weights=lens[at], minlength=lmsgs.size).astype(np.int64)
        return out


class _Scratch:
    """The memory a transport's calls run once in (one at a time: blocking calls): grown to
    twice its size when a call needs more, made anew when a call needs under a quarter of
    more than :data:`KEEP` bytes (one large call leaves no large buffer behind for long)."""

    #: Bytes kept whatever the calls need.
    KEEP = 1 << 20

    def __init__(self):
        self.buf = np.zeros(0, dtype=np.uint8)
        self.reqs = None
        self.index = None

    def get(self, nbytes, nreq, handles):
        """Return ``(buf, reqs, index)``: at least ``nbytes`` bytes, room for ``nreq`` MPI
        requests of dtype ``handles`` and for a wait's indices."""
        have = self.buf.size
        if have < nbytes or (have > self.KEEP and nbytes < have // 4):
            self.buf = np.zeros(0, dtype=np.uint8)  # the old one goes first
            self.buf = np.zeros(max(nbytes, 2 * have if have < nbytes else 0, 4096),
                                dtype=np.uint8)
        if self.reqs is None or self.reqs.size < nreq:
            self.reqs = np.zeros(max(nreq, 64), dtype=handles)
            self.index = np.zeros(max(nreq, 64) + 1, dtype=np.intc)
        return self.buf, self.reqs, self.index


def run_once(transport, once, layout, signature, send, recv, combine=None, limit=1 << 62):
    """Run ``once``'s plan for ``layout``'s sizes on ``transport`` (an :class:`~dualmpi.engine.
    mpi.MPITransport` with the compiled loop): ``send``'s blocks in, ``recv``'s out (uint8
    arrays, or None where the rank has none); ``signature`` as a runner's, ``combine`` a
    reduction's operator (one :func:`~dualmpi.engine.mpi._mpi_op` knows), ``limit`` the payload
    bytes from which a message travels apart from its trailer.  Returns ``(links, bytes)``: the
    plan's links (its shape's ``(source, destination, messages, parts)``) and the bytes the call
    sent over each (:meth:`Once.link_bytes`); None when the transport cannot (no compiled loop,
    a combine the loop does not apply, more than :data:`ONCE_BYTES` of scratch).
    Raises as a runner's call does (the alarm; the job's watchdog names the round waited in).
    """
    lib = transport.cloop
    fn = getattr(lib, "dualmpi_once", None) if lib is not None else None
    handles = handle_dtype(lib) if fn is not None else None
    if handles is None or lib.dualmpi_once_fields() != _O_FIELDS:  # pragma: no cover
        return None
    c_op = None
    if combine is not None:
        c_op = _mpi_op(combine)
        if c_op is None:
            return None
    lens, size, off, nbytes = once.sizes(layout)
    nin = once.inputs.size if send is not None else 0
    nout = once.outputs.size if recv is not None else 0
    uin = layout.inputs(once.rank)[3] if nin else None
    uout = layout.outputs(once.rank)[3] if nout else None
    moved = int(lens[once._rask].sum() + lens[once._sask].sum()) + 16 * once.nmsg
    if nbytes + moved > ONCE_BYTES:  # (a runner's store holds the slots alone: made instead)
        return None
    scratch = getattr(transport, "_once_scratch", None)
    if scratch is None:
        scratch = transport._once_scratch = _Scratch()
    buf, reqs, index = scratch.get(nbytes + moved + 8, once.nreq, handles)
    o = once.row.copy()
    base = _address(buf)
    o[_O_STORE], o[_O_SCRATCH] = base, base + nbytes
    o[_O_LENS], o[_O_OFF], o[_O_SIZE] = _address(lens), _address(off), _address(size)
    o[_O_REQS] = _address(reqs)
    if nin:
        o[_O_SEND], o[_O_UIN] = _address(send), _address(uin)
    if nout:
        o[_O_RECV], o[_O_UOUT] = _address(recv), _address(uout)
    o[_O_NIN], o[_O_NOUT] = nin, nout
    apart = transport.apart_tag
    o[_O_LIMIT], o[_O_APART] = limit, (-1 if apart is None else apart)
    alarm = transport.alarm
    o[_O_LINE] = alarm.handle
    a = transport.shared_row.copy()
    sig = signature & _MASK
    a[_A_SIGNATURE] = sig - (1 << 64) if sig >> 63 else sig
    a[_A_COMM] = transport.graph.handle
    a[_A_INDEX] = _address(index)
    if c_op is not None:
        a[_A_OP], a[_A_TYPE], a[_A_ITEM] = c_op
    a[_A_FLAGS] = _F_WATCH if alarm.watching else 0
    wd = transport.watchdog
    if wd.deadline > 0:
        wd.state = Watchdog.tracker(transport.progress, once.rounds_peers)
    err = fn(ctypes.c_void_p(_address(a)), ctypes.c_void_p(_address(o)))
    wd.state = None
    if err:
        # receives it started may still write into the scratch area: never handed out again
        ABANDONED.append(scratch.buf)
        transport._once_scratch = None
        failed(transport, err, plan_method(once), once.senders)
    return once.links, once.link_bytes(lens)
