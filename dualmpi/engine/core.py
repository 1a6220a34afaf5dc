"""The engine: compiles a collective once per mapping and size, then runs the bound plan (no MPI).

:class:`Engine` owns the caches — structural plans per (collective, root, variant),
bound plans per byte sizes — and hands a bound plan to its transport, which turns it
into something that runs (:class:`~dualmpi.engine.mpi.MPITransport`: persistent
requests on the graph communicator; the in-memory runs of :mod:`dualmpi.engine.local`
compile and bind every rank's plan directly).  Nothing here imports :mod:`mpi4py`.
"""

import dataclasses
import weakref
import zlib
from collections import OrderedDict

import numpy as np

from ..collectives import build_schedule
from ..errors import DualmpiError
from ..topology import DualCube, Hypercube, MetaCube
from .arrays import alltoall_arrays, from_schedule
from .layout import Layout, describe, layout_kind, pieces_per_rank
from .plan import IN_STORE, SPARE, compile_rank, held_slots, relocated

__all__ = ["Engine", "Lease", "array_schedule", "copy_segments", "CACHE_SIZE", "STREAM_ABOVE"]

#: Bound plans kept per engine (least recently used dropped first, those no remembered call's
#: lease holds before those one does; a dropped runner ends the leases of the calls
#: remembered with it: :meth:`Engine.lease`).
CACHE_SIZE = 64
#: Sizes :meth:`Engine.once` remembers having been asked for (the cache had no runner for them):
#: a call that comes back to one of them within this many such calls gets its runner (cached)
#: instead — as many as the cache keeps, so that a runner made for sizes that come back is
#: likely there the time after.
ONCE_SEEN = CACHE_SIZE

#: The total exchange streams (no per-row plan) from this many nodes x nodes per rank.
STREAM_ABOVE = 1 << 22

#: Networks whose total exchange is built vectorised (no Transfer objects).
_VECTOR_ALLTOALL = (Hypercube, DualCube, MetaCube)


def array_schedule(topo, collective, root=0, variant="corrected", algorithm=None, q=1):
    """Return the :class:`~dualmpi.engine.arrays.ArraySchedule` of a collective on ``topo``.

    The schedule is the one the collective's description names
    (:func:`dualmpi.collectives.build_schedule`): ``alltoallv`` runs the total exchange,
    ``gatherv`` the gather, and so on; on hypercubes, dual-cubes and metacubes the total
    exchange is built with numpy (fast for thousands of nodes).  ``algorithm="ring"``
    selects the Hamiltonian-ring allgather; ``"allreduce-<algorithm>"`` names an
    allreduce algorithm.  The reductions depend on ``q``: only the first node of each
    rank contributes.
    """
    desc, algorithm = describe(collective, algorithm)
    if desc.schedule == "alltoall" and type(topo) in _VECTOR_ALLTOALL:
        if algorithm not in (None, "default"):
            raise DualmpiError(f"no algorithm {algorithm!r} for {desc.name} (choose default)")
        return alltoall_arrays(topo, variant)
    return from_schedule(build_schedule(desc.schedule, topo, root, variant, q, algorithm))


def copy_segments(dst, src, segments):
    """Copy ``(dst_offset, src_offset, length)`` segments from byte array ``src`` into ``dst``."""
    a, b, n = segments
    for i in range(a.size):
        x, y, k = int(a[i]), int(b[i]), int(n[i])
        dst[x:x + k] = src[y:y + k]


class Engine:
    """Compiled-plan collectives for one rank (or, with the local transport, every rank).

    Parameters
    ----------
    topo : Topology
        The network; ``topo.num_nodes`` must be ``ranks * q``.
    q : int
        Nodes per rank (block mapping: rank ``r`` plays ``r*q .. r*q + q - 1``).
    transport : object
        Builds runners from bound plans (see the module docstring).
    packets_above : int or None
        Pipeline messages whose largest block exceeds this many bytes (cut-through
        switching; ``None``: never).
    packet_bytes : int
        Target piece size when pipelining.
    pipelined : tuple of str or None
        The collectives ``packets_above`` applies to (``None``: every one).
    """

    def __init__(self, topo, q, transport, packets_above=None, packet_bytes=1 << 16,
                 max_packets=16, stream="auto", pipelined=None, **options):
        self.topo, self.q, self.transport = topo, q, transport
        self.stream = stream
        self.pipelined = pipelined
        self.options = options
        #: What runners dropped from the cache had counted: ``{(src, dst): [messages, bytes]}``
        #: and ``{"collectives", "rounds", "steps", "step_bytes", "checksum_failures"}``.
        self.retired_links, self.retired = {}, dict.fromkeys(
            ("collectives", "rounds", "steps", "step_bytes", "checksum_failures"), 0)
        self.ranks = topo.num_nodes // q
        self.packets_above, self.packet_bytes, self.max_packets = (packets_above, packet_bytes,
                                                                   max_packets)
        self._schedules = {}
        self._plans = {}
        self._facts = {}
        self._bound = OrderedDict()
        #: runners made with ``cache=False, lend=False`` that their caller keeps (counted in
        #: the statistics until released: :meth:`runners`)
        self._kept = {}
        self._bound_only = OrderedDict()
        self._costs = OrderedDict()
        #: False: :meth:`once` declines every call (a caller that reads the runners' stores)
        self.runs_once = True
        #: hashes of the sizes :meth:`once` was asked for lately, and how often they came back
        self._once_seen, self._recurring = OrderedDict(), 0.0
        self._store_sizes = OrderedDict()
        #: The store a call's own runner borrows (``runner(cache=False)``): one array, as large
        #: as the largest such store so far, its pages warm from the second call on.
        self._spare = np.zeros(0, dtype=np.uint8)

    def schedule(self, collective, root=0, variant="corrected", algorithm=None):
        """Return the cached array schedule of ``collective`` (root a *node*).

        Collectives that run the same schedule (``gather`` and ``gatherv``) share it.
        """
        desc, algorithm = describe(collective, algorithm)
        key = (desc.schedule, root if desc.rooted else None, variant, algorithm)
        if key not in self._schedules:
            self._schedules[key] = array_schedule(self.topo, desc.schedule, root, variant,
                                                  algorithm, self.q)
        return self._schedules[key]

    def counts(self, collective, root=0, variant="corrected", algorithm=None):
        """Return ``(hop rounds, steps)``: the rounds and paper steps in which some node sends."""
        sched = self.schedule(collective, root, variant, algorithm)
        busy = [r for r in sched.rounds if r.size]
        return len(busy), len({r.step for r in busy})

    def cost(self, collective, nbytes, root_rank=0, variant="corrected", algorithm=None,
             itemsize=1):
        """Return ``(hop rounds, steps, step bytes)`` of one call: the coefficients of its model
        time ``steps*t_s + step_bytes*t_w + hop_rounds*t_h`` (cached).

        ``step bytes`` sums over the schedule's steps the largest message any node sends in
        the step, its blocks at the sizes of this call (:func:`dualmpi.model.steps.step_bytes`;
        the same on every rank); ``nbytes`` as for :meth:`runner`.

        >>> from dualmpi.topology import from_spec
        >>> from dualmpi.engine.local import LocalTransport
        >>> Engine(from_spec("hypercube:n=3"), 1, LocalTransport()).cost("bcast", 1000)
        (3, 3, 3000)
        """
        key = (collective, _hashable(nbytes), root_rank, variant, algorithm, itemsize)
        hit = self._costs.get(key)
        if hit is not None:
            self._costs.move_to_end(key)
            return hit
        rounds, steps = self.counts(collective, root_rank * self.q, variant, algorithm)
        sched = self.schedule(collective, root_rank * self.q, variant, algorithm)
        layout = Layout(layout_kind(collective, algorithm), self.topo.num_nodes, self.q, nbytes,
                        root_rank, None, None, itemsize)
        largest = sched.step_bytes(layout.size)
        out = self._costs[key] = (rounds, steps, largest)
        while len(self._costs) > CACHE_SIZE:
            self._costs.popitem(last=False)
        return out

    def rank_plan(self, rank, collective, root_rank=0, variant="corrected", algorithm=None):
        """Return the cached structural plan of ``rank`` (``root_rank`` a *rank*)."""
        desc, algorithm = describe(collective, algorithm)
        kind = desc.layout_for(algorithm)
        key = (rank, desc.schedule, kind, root_rank if desc.rooted else 0, variant, algorithm)
        if key not in self._plans:
            sched = self.schedule(collective, root_rank * self.q, variant, algorithm)
            plan = compile_rank(sched, self.q, rank, root_rank if desc.rooted else 0, kind)
            plan.collective = collective
            self._plans[key] = plan
        return self._plans[key]

    def packets_for(self, layout, collective, variant="corrected", algorithm=None):
        """Return how many pieces each block is cut into for ``layout`` (1: no pipelining).

        Decided by the largest node-level block: a rank's piece holds ``q`` (scatter,
        allgather) or ``q * q`` (alltoall) of them.  A schedule in which no rank forwards a
        block to another (:meth:`ArraySchedule.forwards
        <dualmpi.engine.arrays.ArraySchedule.forwards>`: the broadcast on Q_1, every block
        one rank-to-rank hop from where it starts) keeps whole blocks: pieces would only add
        messages.
        """
        if self.packets_above is None or layout.counts is not None or \
                layout.collective in ("alltoallv", "reduce-scatter") or (
                self.pipelined is not None and collective not in self.pipelined):
            return 1
        parts = pieces_per_rank(layout.collective, self.q)
        biggest = -(-layout.nbytes // parts)
        if biggest <= self.packets_above or not self._shape(
                "forwards", collective, layout.root, variant, algorithm):
            return 1
        return int(min(self.max_packets, -(-biggest // self.packet_bytes)))

    def exchanges(self, collective, root_rank=0, variant="corrected", algorithm=None,
                  combines=False):
        """True when this call is a reduction whose ranks exchange payloads in a round
        (:meth:`ArraySchedule.exchanges <dualmpi.engine.arrays.ArraySchedule.exchanges>`:
        ``Allreduce`` by an exchange algorithm, ``Reduce_scatter``): its payloads travel apart
        from their trailers from a larger size than the other calls'
        (:data:`~dualmpi.engine.mpi.APART_EXCHANGE`: both ends of a link wait for a trailer
        before the payload's receive; the blocking runner and the nonblocking requests
        alike).  The same on every rank.

        >>> from dualmpi.topology import from_spec
        >>> from dualmpi.engine.local import LocalTransport
        >>> eng = Engine(from_spec("hypercube:n=1"), 1, LocalTransport())
        >>> [eng.exchanges(c, combines=True) for c in ("reduce", "allreduce", "scan")]
        [False, True, False]
        >>> eng.exchanges("allgather")
        False
        """
        return combines and self._shape("exchanges", collective, root_rank, variant, algorithm)

    def _shape(self, fact, collective, root_rank, variant, algorithm):
        """Return the schedule's ``fact`` at this mapping (``forwards`` or ``exchanges`` of
        :class:`~dualmpi.engine.arrays.ArraySchedule`; cached, the same on every rank)."""
        desc, algorithm = describe(collective, algorithm)
        key = (fact, desc.schedule, root_rank if desc.rooted else 0, variant, algorithm)
        if key not in self._facts:  # (a few entries per schedule, as self._schedules)
            sched = self.schedule(collective, root_rank * self.q, variant, algorithm)
            self._facts[key] = getattr(sched, fact)(self.q)
        return self._facts[key]

    def store_bytes(self, rank, collective, nbytes, root_rank=0, variant="corrected",
                    algorithm=None, itemsize=1, zero_copy=False):
        """Estimate the bytes a runner of this call allocates on ``rank`` (before building it).

        The store holds every slot of the rank's plan (:meth:`rank_plan`): the blocks its
        nodes start with, receive and deliver, at their sizes, and transit and scratch
        slots, each counted at the largest block; plus about 64 bytes per row and piece
        for the bound segments.  A streamed total exchange holds two chunk buffers.  With
        ``zero_copy`` (a runner bound to the user's buffers, ``runner(buffers=...)``) the
        blocks the rank starts with and delivers are in those buffers, not in the store, but
        for input blocks a reduction combines into that the rank does not deliver
        (:meth:`RankPlan.placement <dualmpi.engine.plan.RankPlan.placement>`).

        >>> from dualmpi.topology import from_spec
        >>> from dualmpi.engine.local import LocalTransport
        >>> eng = Engine(from_spec("hypercube:n=3"), 1, LocalTransport())
        >>> eng.store_bytes(0, "bcast", 1000) >= 1000
        True

        Cached for a size that is one number (the last :data:`CACHE_SIZE` calls'
        arguments): a nonblocking call estimates its store on every call.  A v-variant's
        size table (one entry per node, or per pair of nodes) is not kept.
        """
        if not isinstance(nbytes, (int, np.integer)):
            return self._store_bytes(rank, collective, nbytes, root_rank, variant, algorithm,
                                     itemsize, zero_copy)
        key = (rank, collective, int(nbytes), root_rank, variant, algorithm, itemsize,
               zero_copy)
        hit = self._store_sizes.get(key)
        if hit is not None:
            self._store_sizes.move_to_end(key)
            return hit
        out = self._store_sizes[key] = self._store_bytes(rank, collective, nbytes, root_rank,
                                                         variant, algorithm, itemsize, zero_copy)
        while len(self._store_sizes) > CACHE_SIZE:
            self._store_sizes.popitem(last=False)
        return out

    def _store_bytes(self, rank, collective, nbytes, root_rank, variant, algorithm, itemsize,
                     zero_copy):
        """:meth:`store_bytes`, not cached."""
        if collective == "alltoall" and self._streams(nbytes):
            from .stream import StepPlan

            plan = StepPlan(self.topo, self.q, variant)
            return 2 * plan.num_chunks * plan.chunk * (nbytes // (self.q * self.q))
        plan = self.rank_plan(rank, collective, root_rank, variant, algorithm)
        layout = Layout(layout_kind(collective, algorithm), self.topo.num_nodes, self.q, nbytes,
                        root_rank, None, None, itemsize)
        origin, target, is_block = plan.slot_blocks()
        sizes = layout.size(origin[is_block], target[is_block]) if is_block.any() else \
            np.zeros(1, dtype=np.int64)
        biggest = int(sizes.max()) if sizes.size else 0
        others = int((~is_block).sum()) + plan.scratch
        if zero_copy and is_block.any():  # the slots in the user's buffers are not in the store
            held = plan.placement()[0][:is_block.size] == IN_STORE
            sizes = sizes[held[is_block]]
        packets = self.packets_for(layout, collective, variant, algorithm)
        return int(sizes.sum()) + others * biggest + 64 * plan.num_rows * packets

    def in_place(self, rank, collective, nbytes, root_rank=0, variant="corrected", algorithm=None,
                 itemsize=1, shift=0):
        """True when a runner may be bound to a send buffer inside the receive buffer.

        ``shift`` is the send buffer's address minus the receive buffer's.  True when every
        block the rank starts with is one it delivers, at the same address (an in-place
        ``Allreduce`` or ``Scan``, whose send buffer is the receive buffer; an in-place
        ``Allgather``, whose own piece is in its place): each such slot reads and writes its
        own bytes, as it does in the store, and no other slot touches them.  False when the
        rank would receive into bytes that still hold input it has to send (an in-place
        ``Exscan`` or ``Alltoall``).

        >>> from dualmpi.topology import from_spec
        >>> from dualmpi.engine.local import LocalTransport
        >>> eng = Engine(from_spec("hypercube:n=1"), 1, LocalTransport())
        >>> eng.in_place(1, "scan", 64), eng.in_place(1, "exscan", 64)
        (True, False)
        >>> eng.in_place(1, "allgather", 64, shift=64), eng.in_place(1, "allgather", 64)
        (True, False)
        """
        plan = self.rank_plan(rank, collective, root_rank, variant, algorithm)
        layout = Layout(layout_kind(collective, algorithm), self.topo.num_nodes, self.q, nbytes,
                        root_rank, None, None, itemsize)
        in_slots, out_slots = plan.inputs[0], plan.outputs[0]
        if not in_slots.size:
            return True
        if not out_slots.size:
            return False
        at = dict(zip(out_slots.tolist(), layout.outputs(plan.rank)[3].tolist()))
        return all(at.get(s) == u + shift for s, u in zip(in_slots.tolist(),
                                                          layout.inputs(plan.rank)[3].tolist()))

    def runner(self, rank, collective, nbytes, root_rank=0, variant="corrected", algorithm=None,
               sdispls=None, rdispls=None, packets=None, buffers=None, itemsize=1, op=None,
               salt=0, cache=True, lend=True, build=True):
        """Return the transport's runner of one collective and size (cached).

        ``salt`` (an int) joins the call signature every message carries: what the caller
        agreed on beyond the plan (the MPI method, the type signature), so a rank whose call
        differs in it is caught by the ranks that receive from it.

        ``buffers=(send, recv)``: a zero-copy runner bound to those arrays (cached by their
        addresses; one node per rank; a reduction receives the first block it combines where
        the result goes and combines the send buffer's into it, or copies the send buffer's
        block there first: :func:`~dualmpi.engine.plan.received_seeds`; ``send`` may be
        ``recv`` where :meth:`in_place` allows it);
        with ``cache=False`` it is not kept (a call's own runner: :meth:`release` it after
        the call; it runs on the spare store unless ``lend`` is False: a runner the caller
        keeps, counted in the statistics until released).  Reductions take ``op=(key, code,
        combine)`` (:func:`dualmpi.ops.resolve`): ``combine(src, dst)`` combines byte array
        ``src`` into ``dst`` (whole elements of ``itemsize`` bytes), ``key`` names it in the
        cache and ``code`` in the messages' call signature.
        """
        if op is not None:
            packets = 1  # a combined block moves whole (scratch slots are per round)
        where = None if buffers is None else tuple(
            None if b is None else (b.ctypes.data, b.size) for b in buffers)
        if where is not None:  # a zero-copy runner belongs to its caller: not shared
            where = where + (object(),)
        opkey = None if op is None else (op[0], itemsize)
        opcode = None if op is None else (op[1], itemsize)
        if sdispls is None and rdispls is None and isinstance(nbytes, int):
            sig = (rank, collective, root_rank, variant, algorithm, nbytes, packets, where, opkey,
                   salt)
        else:
            sig = (rank, collective, root_rank, variant, algorithm, _hashable(nbytes),
                   _hashable(sdispls), _hashable(rdispls), packets, where, opkey, salt)
        hit = self._bound.get(sig)
        if hit is not None:
            self._bound.move_to_end(sig)
            return hit
        if not build:  # (only a cached one: :meth:`once` runs the call otherwise)
            return None
        if collective == "alltoall" and self._streams(nbytes):
            from .stream import StepPlan

            run = self.transport.prepare_stream(StepPlan(self.topo, self.q, variant), nbytes)
            run.step_bytes = run.steps_count * (nbytes // (self.q * self.q))
            self._bound[sig] = run
            return run
        plan = self.rank_plan(rank, collective, root_rank, variant, algorithm)
        layout = Layout(layout_kind(collective, algorithm), self.topo.num_nodes, self.q, nbytes,
                        root_rank, sdispls, rdispls, itemsize)
        if packets is None:
            packets = self.packets_for(layout, collective, variant, algorithm)
        bound = plan.bind(layout, packets)
        signature = _signature(collective, root_rank, variant, algorithm, nbytes, packets,
                               opcode, salt)
        extra = {} if buffers is None else {"layout": layout, "buffers": buffers}
        if buffers is not None and not cache and lend:  # released after its call: the spare store
            extra["store"] = self._lend
        if op is not None:
            extra["combine"] = op[2]
            extra["exchanges"] = self.exchanges(collective, root_rank, variant, algorithm,
                                                combines=True)
        run = self.transport.prepare(bound, plan, signature=signature, **extra, **self.options)
        run.hop_rounds, run.steps, run.step_bytes = self.cost(collective, nbytes, root_rank,
                                                              variant, algorithm, itemsize)
        if not cache:
            if not lend:
                self._kept[id(run)] = run
            return run
        self._bound[sig] = run
        while len(self._bound) > CACHE_SIZE:
            # the least recently used runner that no live lease holds, else the least
            # recently used (a repeat runs from C and does not refresh its runner's place)
            key = next((k for k, r in self._bound.items() if r is not run and not _leased(r)),
                       None)
            old = self._bound.popitem(last=False)[1] if key is None else self._bound.pop(key)
            self._retire(old)
            _end(old)
            old.free()
        return run

    def once(self, rank, collective, nbytes, root_rank=0, variant="corrected", algorithm=None,
             sdispls=None, rdispls=None, itemsize=1, op=None, salt=0, send=None, recv=None,
             packets=1):
        """Run one call of an unpipelined plan without a runner, when the transport can
        (:mod:`dualmpi.engine.once`): True when it ran, False when the caller should make a
        runner (:meth:`runner`, same arguments) and run that.  ``packets`` as for
        :meth:`runner` (None: :meth:`packets_for`); a pipelined call (more than one) and a
        streamed total exchange are declined.

        For a call whose sizes the cache has not seen (a v-variant's new count table:
        :meth:`runner` with ``build=False`` says): the plan's messages as its runner's would
        be, from the plan's kept shape and the call's sizes; counted in the statistics as a
        runner's call.  Sizes among the last :data:`ONCE_SEEN` it was asked for are declined (a
        program that comes back to a table gets its runner, cached, from the second time), and
        so are new ones while most sizes asked for lately came back (a moving average over
        some 16 calls): the runners of a program that cycles through a few tables are made at
        once, as they were before this path.  ``send``/``recv``: uint8 arrays
        (None where the rank has none), copied in and out as :meth:`MPIRunner.run
        <dualmpi.engine.mpi.MPIRunner.run>` does.
        """
        run_once = getattr(self.transport, "run_once", None)
        if run_once is None or not self.runs_once or \
                any(self.options.get(k) for k in ("verify", "shape", "drop")):
            return False
        if collective == "alltoall" and isinstance(nbytes, int) and self._streams(nbytes):
            return False
        plan = self.rank_plan(rank, collective, root_rank, variant, algorithm)
        layout = Layout(layout_kind(collective, algorithm), self.topo.num_nodes, self.q, nbytes,
                        root_rank, sdispls, rdispls, itemsize)
        if op is not None:
            packets = 1  # (as a runner's: a combined block moves whole)
        elif packets is None:
            packets = self.packets_for(layout, collective, variant, algorithm)
        if packets != 1:
            return False
        # sizes seen before (a program that cycles through a few tables): their runner is
        # made and cached, as any call's, for the next time (hashes kept, not the sizes)
        seen = hash((rank, collective, root_rank, variant, algorithm, _hashable(nbytes),
                     _hashable(sdispls), _hashable(rdispls), itemsize,
                     None if op is None else op[0], salt))
        again = seen in self._once_seen
        # (how often the sizes asked for came back lately: a program whose tables recur gets
        # their runners made from the first time, one whose tables are new runs them once)
        self._recurring += (again - self._recurring) / 16
        if again:
            self._once_seen.move_to_end(seen)
            return False
        self._once_seen[seen] = None
        while len(self._once_seen) > ONCE_SEEN:
            self._once_seen.popitem(last=False)
        if self._recurring > 0.5:
            return False
        signature = _signature(collective, root_rank, variant, algorithm, nbytes, 1,
                               None if op is None else (op[1], itemsize), salt)
        combine = None if op is None else op[2]
        exchanges = op is not None and self.exchanges(collective, root_rank, variant, algorithm,
                                                      combines=True)
        sent = run_once(plan, layout, signature, send, recv, combine, exchanges)
        if sent is None:
            return False
        (lsrc, ldst, lmsgs, _), link_bytes = sent
        links = self.retired_links
        for s_, d_, m_, n_ in zip(lsrc.tolist(), ldst.tolist(), lmsgs.tolist(),
                                  link_bytes.tolist()):
            acc = links.setdefault((s_, d_), [0, 0])
            acc[0] += m_
            acc[1] += n_
        rounds, steps, step_bytes = self.cost(collective, nbytes, root_rank, variant, algorithm,
                                              itemsize)
        totals = self.retired
        totals["collectives"] += 1
        totals["rounds"] += rounds
        totals["steps"] += steps
        totals["step_bytes"] += step_bytes
        return True

    def release(self, run):
        """Free a runner made with ``cache=False``, its counts kept for the statistics.

        Its store was the spare one (:meth:`_lend`), free for the next such runner — but
        after an alarm, when receives the runner started may still write into it.
        """
        self._kept.pop(id(run), None)
        self._retire(run)
        _end(run)
        run.free()
        if getattr(getattr(run, "alarm", None), "broken", None) is not None:
            self._spare = np.zeros(0, dtype=np.uint8)

    def _lend(self, nbytes):
        """Return the spare store, grown to at least ``nbytes`` (one runner uses it at a time).

        A call's own runner (:meth:`runner` with ``cache=False``) lives for one call, so a
        program that allocates its buffers per call would otherwise give each call's
        forwarded blocks fresh pages.
        """
        if self._spare.size < nbytes:
            self._spare = np.zeros(0, dtype=np.uint8)  # the old one goes first
            self._spare = np.zeros(nbytes, dtype=np.uint8)
        return self._spare

    def streams(self, collective, nbytes):
        """True when a call of ``collective`` and ``nbytes`` runs streamed (no zero-copy runner)."""
        return collective == "alltoall" and self._streams(nbytes)

    def bind(self, rank, collective, nbytes, root_rank=0, variant="corrected", algorithm=None,
             sdispls=None, rdispls=None, itemsize=1, combines=False, salt=0, packets=None):
        """Return ``(bound plan, signature)`` of one call, without a transport's runner (cached).

        For the nonblocking collectives (:mod:`dualmpi.engine.nonblocking`), which run a
        bound plan with a store of their own per request; ``signature`` is what every
        rank of a correct program has in common (the 64-bit call signature).  ``packets``:
        pieces per block as in :meth:`runner` (``None``: :meth:`packets_for`); a combined
        or v-variant block moves whole.
        """
        key = ("bind", rank, collective, root_rank, variant, algorithm, _hashable(nbytes),
               _hashable(sdispls), _hashable(rdispls), itemsize, combines, salt, packets)
        hit = self._bound_only.get(key)
        if hit is not None:
            self._bound_only.move_to_end(key)
            return hit
        plan = self.rank_plan(rank, collective, root_rank, variant, algorithm)
        layout = Layout(layout_kind(collective, algorithm), self.topo.num_nodes, self.q, nbytes,
                        root_rank, sdispls, rdispls, itemsize)
        if combines or sdispls is not None or rdispls is not None:
            packets = 1
        elif packets is None:
            packets = self.packets_for(layout, collective, variant, algorithm)
        bound = plan.bind(layout, packets)
        sig = repr(("nonblocking", collective, root_rank, variant, algorithm, _hashable(nbytes),
                    packets, salt)).encode()
        out = self._bound_only[key] = (bound, zlib.crc32(sig) << 32 | zlib.crc32(sig[::-1]))
        while len(self._bound_only) > CACHE_SIZE:
            self._bound_only.popitem(last=False)
        return out

    def bind_buffers(self, bound, rank, collective, nbytes, root_rank=0, variant="corrected",
                     algorithm=None, itemsize=1, send=None, recv=None, sdispls=None,
                     rdispls=None):
        """Return ``(plan, store, seeds, own)``: :meth:`bind`'s ``bound`` rebound to the user's
        buffers (one node per rank; zero-copy, as a runner made with ``buffers``).

        ``plan`` is a :class:`~dualmpi.engine.plan.BoundPlan` at absolute addresses: the
        blocks the rank starts with read from ``send``, those it delivers written in
        ``recv``, the other slots at their addresses in ``store`` (a new array, followed by
        room for the signature, one trailer per message received and
        :data:`~dualmpi.engine.plan.SPARE`: ``plan.nbytes`` is where the signature goes).
        ``seeds`` and ``own`` are ``(destination, source, length)`` copies at absolute
        addresses: the seeds a reduction combines into, to make before the first round (few:
        :func:`~dualmpi.engine.plan.received_seeds`), and the rank's own blocks from ``send``
        to ``recv``, which touch no message's bytes (made whenever the call likes: the
        nonblocking repeats make them once round 0 is posted, as the blocking loop does).  The
        arguments are :meth:`bind`'s (the same messages, so ranks bound to their buffers and
        ranks copying through a store match).  For the nonblocking repeats
        (:class:`~dualmpi.engine.nonblocking.Repeat`).
        """
        plan = self.rank_plan(rank, collective, root_rank, variant, algorithm)
        layout = Layout(layout_kind(collective, algorithm), self.topo.num_nodes, self.q, nbytes,
                        root_rank, sdispls, rdispls, itemsize)
        where, seeded, held_at, held = held_slots(bound, plan, send, recv)
        nrecv = sum(len(rnd.recvs) for rnd in bound.rounds)
        store = np.zeros(held + 8 + 8 * nrecv + SPARE, dtype=np.uint8)
        at, own, seeds = relocated(bound, plan, layout, send, recv, where, seeded, held_at,
                                   store.ctypes.data)
        at = dataclasses.replace(at, nbytes=held, slot_offset=held_at)
        own = [(recv.ctypes.data + a, send.ctypes.data + b, n) for a, b, n in own]
        return at, store, seeds, own

    def _streams(self, nbytes):
        """True when the total exchange runs streamed (:mod:`dualmpi.engine.stream`)."""
        if self.stream is False or type(self.topo) not in _VECTOR_ALLTOALL:
            return False
        q = self.q
        even = q & (q - 1) == 0 and isinstance(nbytes, int) and nbytes % (q * q) == 0
        if self.stream is True:
            if not even:
                raise DualmpiError(f"stream=True needs a power-of-two nodes per rank and pieces "
                                   f"of a multiple of {q * q} bytes")
            return True
        return even and q * self.topo.num_nodes >= STREAM_ABOVE

    def _retire(self, run):
        """Keep the counts of a runner leaving the cache (for statistics), and its companions'."""
        for _, other in getattr(run, "companions", {}).values():
            if other is not None:
                self._retire(other)
        _add_counts(run, self.retired_links, self.retired)

    def sent(self):
        """Return ``(links, totals)``: what every runner's calls sent, those retired included.

        ``links`` is ``{(u, v): [messages, bytes]}`` per directed link (a streamed total
        exchange's under ``("all", "all")``), ``totals`` has ``collectives``, ``rounds``,
        ``steps``, ``step_bytes`` and ``checksum_failures`` (``dualmpi.Comm.stats``).
        """
        links = {k: list(v) for k, v in self.retired_links.items()}
        totals = dict(self.retired)
        for run in self.runners():
            _add_counts(run, links, totals)
        return links, totals

    def runners(self):
        """Return every cached runner and its companions, and the runners kept by their
        callers (``cache=False, lend=False``), for the statistics.

        A companion is a runner's plan merged with another's (:func:`dualmpi.engine.mpi.pair`).
        """
        out = []
        for run in list(self._bound.values()) + list(self._kept.values()):
            out.append(run)
            out.extend(other for _, other in getattr(run, "companions", {}).values()
                       if other is not None)
        return out

    @staticmethod
    def lease(*runners):
        """Return the :class:`Lease` of a call remembered with ``runners`` (None skipped).

        It ends when the engine drops one of them from its cache or frees it, and no sooner:
        a remembered call lives on while the cache turns over plans it does not use.  The
        cache drops a runner a live lease holds only when every other runner is held too.

        >>> class Run: pass
        >>> a, b = Run(), Run()
        >>> lease, other = Engine.lease(a, b, None), Engine.lease(b)
        >>> lease.live, other.live, Engine.lease().live
        (True, True, True)
        >>> _end(a); lease.live, other.live
        (False, True)
        >>> Engine.lease(a).live  # (a runner already dropped: ended at once)
        False
        """
        lease = Lease()
        cell = lease.evicted
        for run in runners:
            if run is None:
                continue
            if getattr(run, "ended", False):
                cell[0] = 1
            held = getattr(run, "leases", None)
            if held is None:
                held = run.leases = weakref.WeakValueDictionary()
            held[id(cell)] = cell
        return lease

    def free(self):
        """Release every runner's resources."""
        while self._bound:
            _, run = self._bound.popitem()
            _end(run)
            run.free()
        while self._kept:
            _, run = self._kept.popitem()
            _end(run)
            run.free()


class Lease:
    """Whether the runners of a remembered call are all still the engine's (:meth:`Engine.lease`).

    ``evicted[0]`` is 0 while they are, 1 once the engine has dropped one of them from its
    cache or freed it.  The compiled matchers (:mod:`dualmpi.engine.recall`) read that cell
    at every call, with the epoch 0 (``evictions`` when the lease was taken); so do the
    Python ones (:attr:`live`).  A lease of no runner (a nonblocking call's plan, a
    neighbourhood call: no runner of the engine's) never ends.
    """

    __slots__ = ("evicted",)

    def __init__(self):
        self.evicted = np.zeros(1, dtype=np.int64)

    @property
    def evictions(self):
        """0 while the lease lives, 1 once it has ended."""
        return int(self.evicted[0])

    @property
    def live(self):
        """True while every runner of the lease is the engine's."""
        return not self.evicted[0]


def _leased(run):
    """True when a live :class:`Lease` holds ``run`` (a remembered call runs it)."""
    held = getattr(run, "leases", None)
    return bool(held) and any(not cell[0] for cell in held.values())


def _end(run):
    """End the leases of ``run`` and of the runners merged with it (it leaves the engine)."""
    run.ended = True
    held = getattr(run, "leases", None)
    if held is not None:
        for cell in list(held.values()):
            cell[0] = 1
    for _, other in getattr(run, "companions", {}).values():
        if other is not None:
            _end(other)


def _add_counts(run, links, totals):
    """Add what ``run``'s calls sent to ``links`` and ``totals`` (see :meth:`Engine.sent`)."""
    if not run.calls:
        return
    b = run.bound
    totals["collectives"] += run.calls * getattr(run, "parts", 1)
    totals["rounds"] += run.hop_rounds * run.calls
    totals["step_bytes"] += run.step_bytes * run.calls
    if b is None:  # a streamed total exchange keeps totals only
        acc = links.setdefault(("all", "all"), [0, 0])
        acc[0] += run.messages_per_call * run.calls
        acc[1] += run.bytes_per_call * run.calls
        totals["steps"] += run.steps_count * run.calls
        return
    for s, d, m, n in zip(b.link_src.tolist(), b.link_dst.tolist(), b.link_messages.tolist(),
                          b.link_bytes.tolist()):
        acc = links.setdefault((s, d), [0, 0])
        acc[0] += m * run.calls
        acc[1] += n * run.calls
    totals["steps"] += run.steps * run.calls
    totals["checksum_failures"] += getattr(run, "checksum_failures", 0)


def _signature(collective, root_rank, variant, algorithm, nbytes, packets, opcode, salt):
    """Return a plan's call signature: what every rank of a correct program has in common
    (not the rank, not displacements); a call's messages carry it mixed with the call number."""
    key = repr((collective, root_rank, variant, algorithm, _hashable(nbytes), packets, opcode,
                salt)).encode()
    return zlib.crc32(key) << 32 | zlib.crc32(key[::-1])


def _hashable(x):
    """Return a hashable stand-in for sizes and displacements."""
    if x is None or isinstance(x, (int, np.integer)):
        return None if x is None else int(x)
    arr = np.asarray(x, dtype=np.int64)
    return (arr.shape, arr.tobytes())
