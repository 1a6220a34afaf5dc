"""The MPI executor with many topology nodes per rank (block mapping).

Rank ``r`` plays nodes ``r*q .. r*q + q - 1``.  A link traversal between two nodes on
one rank is delivered locally but link-checked and counted like any other; between
ranks the messages of one round that go from rank A to rank B travel as one real MPI
message carrying exactly those virtual messages, in an order both ranks derive from
the schedule (no filler messages: a rank pair with nothing to exchange sends nothing).
"""

import numpy as np
from mpi4py import MPI

from ..collectives.alltoall import class_groups, destination_order, route_function, step_offsets
from ..collectives.schedule import expected_blocks
from ..errors import DualmpiError, LinkError, RankCountError
from .inprocess import initial_store, verify_store
from .payload import pack_blocks, unpack_blocks

__all__ = ["BlockMap", "run_schedule_multi", "run_alltoall_vector", "patterns"]

_TAG_MOD = 1 << 15


class BlockMap:
    """Which rank plays which nodes: ``q = p / size`` consecutive nodes per rank."""

    def __init__(self, comm, topo, nodes_per_rank=None):
        size, p = comm.Get_size(), topo.num_nodes
        if size > p:
            raise RankCountError(
                f"{topo.spec} has {p} nodes but the job has {size} ranks; run it with "
                f"mpiexec -n {p} (one node per rank) or a divisor of {p}")
        if nodes_per_rank is not None and nodes_per_rank < 1:
            raise RankCountError(f"--nodes-per-rank must be at least 1, got {nodes_per_rank}")
        if nodes_per_rank and nodes_per_rank * size != p:
            raise RankCountError(
                f"{topo.spec} has {p} nodes, but {size} ranks with {nodes_per_rank} nodes each "
                f"play {nodes_per_rank * size}; run {p // nodes_per_rank if p % nodes_per_rank == 0 else 'a divisor of ' + str(p)} ranks")
        q = nodes_per_rank or (p // size if size and p % size == 0 else 0)
        if q <= 0 or q * size != p:
            raise RankCountError(
                f"{topo.spec} has {p} nodes, which cannot be spread evenly over {size} ranks; "
                f"use a rank count that divides {p}")
        self.comm, self.topo, self.q = comm, topo, q
        self.rank = comm.Get_rank()
        self.first = self.rank * q
        self.nodes = range(self.first, self.first + q)

    def owner(self, u):
        """Return the rank that plays node ``u`` (works on numpy arrays)."""
        return u // self.q


def _check_link(topo, a, b):
    """Raise :class:`LinkError` unless ``a``-``b`` is a link."""
    if not topo.is_link(a, b):
        raise LinkError(a, b, topo.spec)


def run_schedule_multi(bmap, schedule, size, iters=1, warmup=0):
    """Run ``schedule`` with every rank playing its block of nodes; same dict on every rank."""
    comm, topo = bmap.comm, bmap.topo
    coll, root = schedule.collective, schedule.root
    rounds = _local_rounds(bmap, schedule)
    times, stores, msgs = [], {}, np.zeros(2, dtype=np.int64)
    for it in range(warmup + iters):
        stores = {u: initial_store(coll, topo, root, u, size) for u in bmap.nodes}
        msgs[:] = 0
        comm.Barrier()
        t0 = MPI.Wtime()
        for t, local, outgoing, incoming in rounds:
            _multi_round(bmap, t, local, outgoing, incoming, stores, size, msgs)
        if it >= warmup:
            times.append(MPI.Wtime() - t0)
    delivered = expected = bad = 0
    for u in bmap.nodes:
        d, miss, corrupt = verify_store(coll, topo, root, u, stores[u], size)
        delivered += d
        bad += len(miss) + len(corrupt)
        expected += sum(1 for key in expected_blocks(coll, topo, root, u) if key[0] != u)
    return _summary(comm, schedule.collective, topo, size, iters, times,
                    [delivered, expected, bad, int(msgs[0]), int(msgs[1])],
                    schedule.steps, schedule.num_rounds)


def _local_rounds(bmap, schedule):
    """Split each round into local transfers and per-peer outgoing/incoming lists."""
    mine = set(bmap.nodes)
    out = []
    for t, rnd in enumerate(schedule.rounds):
        local, outgoing, incoming = [], {}, {}
        for tr in rnd.transfers:
            src_here, dst_here = tr.src in mine, tr.dst in mine
            if src_here and dst_here:
                local.append(tr)
            elif src_here:
                outgoing.setdefault(bmap.owner(tr.dst), []).append(tr)
            elif dst_here:
                incoming.setdefault(bmap.owner(tr.src), []).append(tr)
        if local or outgoing or incoming:
            out.append((t, local, outgoing, incoming))
    return out


def _multi_round(bmap, t, local, outgoing, incoming, stores, size, msgs):
    """One round: remote receives posted, packed per peer and sent, local ones delivered."""
    comm, topo = bmap.comm, bmap.topo
    tag = t % _TAG_MOD
    recv = {}
    reqs = []
    for peer, trs in incoming.items():
        buf = np.empty(sum(len(tr.blocks) for tr in trs) * size, dtype=np.uint8)
        recv[peer] = buf
        reqs.append(comm.Irecv(buf, peer, tag))
    for peer, trs in outgoing.items():
        parts = []
        for tr in trs:
            _check_link(topo, tr.src, tr.dst)
            parts.append(pack_blocks(stores[tr.src], tr.blocks, size))
            msgs += (1, len(tr.blocks) * size)
        reqs.append(comm.Isend(np.concatenate(parts) if parts else np.empty(0, np.uint8),
                               peer, tag))
    moved = []
    for tr in local:
        _check_link(topo, tr.src, tr.dst)
        moved.append((tr, pack_blocks(stores[tr.src], tr.blocks, size)))
        msgs += (1, len(tr.blocks) * size)
    MPI.Request.Waitall(reqs)
    for tr, buf in moved:
        unpack_blocks(stores[tr.dst], tr.blocks, size, buf, tr.reduce)
    for peer, trs in incoming.items():
        pos = 0
        for tr in trs:
            n = len(tr.blocks) * size
            unpack_blocks(stores[tr.dst], tr.blocks, size, recv[peer][pos:pos + n], tr.reduce)
            pos += n


def patterns(sources, targets, size):
    """Return ``block_pattern(s, t, size)`` for many pairs at once, as a (k, size) array."""
    mix = np.uint64(0x9E3779B97F4A7C15)
    s = np.asarray(sources, dtype=np.uint64) & np.uint64(0xFFFFFFFF)
    t = (np.asarray(targets, dtype=np.int64) + 1).astype(np.uint64) & np.uint64(0xFFFFFFFF)
    seed = ((s << np.uint64(32)) ^ t) * mix
    x = np.arange(size, dtype=np.uint64)[None, :] + seed[:, None]
    x ^= x >> np.uint64(29)
    x *= mix
    x ^= x >> np.uint64(32)
    return (x & np.uint64(0xFF)).astype(np.uint8)


def run_alltoall_vector(bmap, size, iters=1, warmup=0, variant="corrected", seed=0):
    """The total exchange with many nodes per rank, a whole hop of a step at a time (numpy).

    Per step the router routes one source per class; node renaming gives every other
    message's position (``s XOR offs[h]`` after ``h`` hops), and one random source per
    rank and step is routed directly to check that.  A rank's nodes are cut into
    aligned chunks that lie in one class; the messages on a chunk all cross the same
    bit at a hop, so they stay on the rank or all go to one peer: one MPI message per
    chunk, class group and hop.  Every traversal is link-checked and counted; every
    payload that arrives is compared with its pattern, and its node with its
    destination.
    """
    comm, topo = bmap.comm, bmap.topo
    p, q, me = topo.num_nodes, bmap.q, bmap.rank
    if q & (q - 1):
        raise RankCountError(f"the vectorised total exchange needs a power-of-two block, got {q}")
    dest = destination_order(topo)
    route = route_function(topo, variant)
    _, groups = class_groups(topo)
    z = min(q, groups[0].size)
    chunks = [np.arange(me * q + j * z, me * q + (j + 1) * z, dtype=np.int64) for j in range(q // z)]
    layout = (z, len(chunks), len(groups))
    rng = np.random.default_rng(seed + me)
    times, counts = [], np.zeros(5, dtype=np.int64)
    hop_rounds = 0
    for it in range(warmup + iters):
        counts[:] = 0
        hop_rounds = 0
        comm.Barrier()
        t0 = MPI.Wtime()
        for t in range(p - 1):
            offsets = step_offsets(topo, groups, t, dest, route)
            _check_renaming(topo, me * q, q, t, dest, route, groups, offsets, rng)
            payload = {(_group_of(groups, int(c[0])), j): patterns(c, dest(c, t), size)
                       for j, c in enumerate(chunks)}
            hops = max(len(o) for o in offsets) - 1
            hop_rounds += hops
            for h in range(hops):
                payload = _vector_hop(bmap, groups, offsets, h, chunks, layout, payload, size,
                                      counts, t * 64 + h)
            for (g, j), rows in payload.items():  # messages that end on this rank
                sources = chunks[j] ^ offsets[g][-1]
                at_dest = dest(sources, t) == chunks[j]
                good = at_dest & (rows == patterns(sources, chunks[j], size)).all(axis=1)
                counts[0] += int(np.count_nonzero(good))
                counts[1] += z
        if it >= warmup:
            times.append(MPI.Wtime() - t0)
    return _summary(comm, "alltoall", topo, size, iters, times,
                    [int(counts[0]), int(counts[1]), int(counts[1] - counts[0]),
                     int(counts[2]), int(counts[3])], p - 1, hop_rounds)


def _group_of(groups, u):
    """Return the index of the class group that contains node ``u``."""
    return u // groups[0].size


def _check_renaming(topo, first, q, t, dest, route, groups, offsets, rng):
    """Route one random local source directly; it must follow its class's renamed path."""
    s = int(first + rng.integers(q))
    g = _group_of(groups, s)
    if route(s, int(dest(s, t))) != [s ^ o for o in offsets[g]]:
        raise DualmpiError(f"step {t}: the route of node {s} is not its class's renamed route")


def _vector_hop(bmap, groups, offsets, h, chunks, layout, payload, size, counts, base):
    """Move the messages of hop ``h``; ``payload[(g, j)]`` holds group g's rows on chunk j.

    Row ``i`` of a chunk's array is the message on node ``chunk[i]``.  Returns the
    payload after the hop.
    """
    comm, topo, q, me = bmap.comm, bmap.topo, bmap.q, bmap.rank
    z, nchunks, ngroups = layout
    reqs, arrived, out = [], [], {}

    def tag(g, j):
        return ((base * ngroups + g) * nchunks + j) % _TAG_MOD

    for (g, j), rows in payload.items():
        offs = offsets[g]
        if h + 1 >= len(offs):
            out[(g, j)] = rows  # this group's messages have arrived
            continue
        target = chunks[j] ^ (offs[h] ^ offs[h + 1])
        ok = np.zeros(z, dtype=bool)
        for dim in range(1, topo.degree + 1):
            ok |= np.asarray(topo.neighbor(chunks[j], dim)) == target
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            raise LinkError(int(chunks[j][i]), int(target[i]), topo.spec)
        counts[2] += z
        counts[3] += z * size
        peer, jt = int(target[0]) // q, (int(target.min()) - (int(target[0]) // q) * q) // z
        if peer == me:
            out[(g, jt)] = _gather(rows, target)
        else:
            reqs.append(comm.Isend(np.ascontiguousarray(rows), peer, tag(g, jt)))
    for j, chunk in enumerate(chunks):  # messages arriving on this rank's chunks
        for g, offs in enumerate(offsets):
            if h + 1 >= len(offs):
                continue
            origin = chunk ^ (offs[h] ^ offs[h + 1])
            peer = int(origin[0]) // q
            if peer != me and _group_of(groups, int(origin[0]) ^ offs[h]) == g:
                buf = np.empty((z, size), dtype=np.uint8)
                arrived.append(((g, j), buf, origin))
                reqs.append(comm.Irecv(buf, peer, tag(g, j)))
    MPI.Request.Waitall(reqs)
    for key, buf, origin in arrived:
        out[key] = buf[origin - origin.min()]
    return out


def _gather(rows, target):
    """Reorder a chunk's rows after a local hop: node ``target[i]`` now holds row ``i``."""
    moved = np.empty_like(rows)
    moved[target - target.min()] = rows
    return moved


def _summary(comm, collective, topo, size, iters, times, local_counts, steps, hop_rounds):
    """Reduce counts and times over ranks into the run dict of :func:`run_schedule`."""
    total = np.zeros(len(local_counts), dtype=np.int64)
    comm.Allreduce(np.array(local_counts, dtype=np.int64), total, op=MPI.SUM)
    avg = float(np.mean(times)) if times else 0.0
    return {
        "collective": collective,
        "spec": topo.spec,
        "size": size,
        "ranks": comm.Get_size(),
        "nodes_per_rank": topo.num_nodes // comm.Get_size(),
        "verified": bool(total[0] == total[1] and total[2] == 0),
        "delivered": int(total[0]),
        "expected": int(total[1]),
        "link_violations": 0,
        "rounds": steps,
        "hop_rounds": hop_rounds,
        "messages": int(total[3]),
        "bytes": int(total[4]),
        "iters": iters,
        "t_min": comm.allreduce(avg, op=MPI.MIN),
        "t_avg": comm.allreduce(avg, op=MPI.SUM) / comm.Get_size(),
        "t_max": comm.allreduce(avg, op=MPI.MAX),
    }
