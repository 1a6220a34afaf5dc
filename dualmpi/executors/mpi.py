"""The MPI executor: one topology node per rank, every send link-checked, data in numpy buffers.

Only this module (and the native baseline) imports :mod:`mpi4py`.  Communicators are
passed in; nothing reads ``COMM_WORLD`` at import time.
"""

import time
import zlib
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from ..collectives.schedule import expected_blocks, message_hops, node_program
from ..errors import DualmpiError, LinkError, RankCountError
from .clock import UNIT_CLOCKS, ClockSet
from .inprocess import hop_position, initial_store, route_problem, verify_store, virtual_summary
from .options import RunOptions
from .payload import pack_blocks, unpack_blocks
from .watchdog import Watchdog

__all__ = [
    "check_rank_count",
    "graph_comm",
    "LinkComm",
    "MPIRunStats",
    "NodeEngine",
    "run_schedule",
]

_TAG_MOD = 1 << 15  # MPI guarantees tags up to 32767


def check_rank_count(comm, topo):
    """Raise :class:`RankCountError` (on every rank alike) unless ``comm`` has one rank per node."""
    if comm.Get_size() != topo.num_nodes:
        raise RankCountError(
            f"{topo.spec} has {topo.num_nodes} nodes but the job has {comm.Get_size()} ranks; "
            f"run it with mpiexec -n {topo.num_nodes}"
        )


def graph_comm(comm, topo):
    """Return a distributed-graph communicator whose edges are exactly the topology's links.

    Built with ``Create_dist_graph_adjacent(sources, destinations, reorder=False)`` so
    rank ``u`` is node ``u``; the edge lists are symmetric and checked for duplicates
    and self-loops before the call.
    """
    check_rank_count(comm, topo)
    me = comm.Get_rank()
    nbrs = list(topo.neighbors(me))
    if len(set(nbrs)) != len(nbrs) or me in nbrs:
        raise DualmpiError(f"{topo.spec}: node {me} has duplicate neighbours or a self-loop: {nbrs}")
    gcomm = comm.Create_dist_graph_adjacent(nbrs, nbrs, reorder=False)
    if gcomm.Get_rank() != me:  # pragma: no cover - guaranteed by reorder=False
        raise DualmpiError("the graph communicator renumbered the ranks")
    return gcomm


class LinkComm:
    """Point-to-point messaging restricted to the topology's links.

    Every send and receive goes through :meth:`isend` / :meth:`irecv`, which refuse
    a peer that is not a neighbour with :class:`LinkError`, and count messages and
    bytes per directed link.
    """

    def __init__(self, comm, topo):
        self.topo = topo
        self.comm = graph_comm(comm, topo)
        self.node = self.comm.Get_rank()
        self.neighbors = frozenset(topo.neighbors(self.node))
        self._messages = dict.fromkeys(self.neighbors, 0)
        self._bytes = dict.fromkeys(self.neighbors, 0)

    @property
    def link_messages(self):
        """Messages sent per directed link ``(node, neighbour)`` since the last reset."""
        return Counter({(self.node, v): n for v, n in self._messages.items() if n})

    @property
    def link_bytes(self):
        """Payload bytes sent per directed link since the last reset."""
        return Counter({(self.node, v): n for v, n in self._bytes.items() if n})

    def _check(self, peer):
        """Raise :class:`LinkError` unless ``peer`` is a neighbour of this node."""
        if peer not in self.neighbors:
            raise LinkError(self.node, peer, self.topo.spec)

    def isend(self, buf, dst, tag, payload=None, new_message=True):
        """Start sending the uint8 array ``buf`` to neighbour ``dst``.

        ``payload`` is the number of user-data bytes in ``buf`` (default: all of it);
        only those are counted, not the virtual-clock trailer.  ``new_message=False``
        marks a later packet of a message already counted.
        """
        if dst not in self.neighbors:
            raise LinkError(self.node, dst, self.topo.spec)
        self._messages[dst] += 1 if new_message else 0
        self._bytes[dst] += buf.nbytes if payload is None else payload
        return self.comm.Isend(buf, dst, tag)

    def send(self, buf, dst, tag):
        """Send the uint8 array ``buf`` to neighbour ``dst`` and wait (blocking)."""
        if dst not in self.neighbors:
            raise LinkError(self.node, dst, self.topo.spec)
        self._messages[dst] += 1
        self._bytes[dst] += buf.nbytes
        self.comm.Send(buf, dst, tag)

    def recv(self, buf, src, tag):
        """Receive into the uint8 array ``buf`` from neighbour ``src`` (blocking)."""
        if src not in self.neighbors:
            raise LinkError(self.node, src, self.topo.spec, "receive")
        self.comm.Recv(buf, src, tag)

    def irecv(self, buf, src, tag):
        """Start receiving into the uint8 array ``buf`` from neighbour ``src``."""
        if src not in self.neighbors:
            raise LinkError(self.node, src, self.topo.spec, "receive")
        return self.comm.Irecv(buf, src, tag)

    _MAGIC = b"DMPI1|"
    _HEADER = 128

    def send_array(self, arr, dst, tag=0):
        """Send a numpy array to neighbour ``dst`` with a header (dtype, shape) the receiver checks."""
        arr = np.ascontiguousarray(arr)
        if arr.dtype.fields is not None or arr.dtype.hasobject:
            raise DualmpiError(f"send_array takes plain numeric arrays, not dtype {arr.dtype}")
        text = self._MAGIC + f"{arr.dtype.str}|{','.join(map(str, arr.shape))}".encode()
        if len(text) > self._HEADER:
            raise DualmpiError(f"send_array: shape {arr.shape} is too long to describe "
                               f"in a {self._HEADER}-byte header")
        head = np.frombuffer(text.ljust(self._HEADER), dtype=np.uint8).copy()
        self.send(head, dst, tag)
        self.send(arr.view(np.uint8).reshape(-1), dst, tag)

    def recv_array(self, arr, src, tag=0):
        """Receive into ``arr`` from neighbour ``src``; a dtype or size mismatch is a clear error.

        The data is always taken off the wire (into a scratch buffer on mismatch), so the
        sender never blocks on an unmatched message.
        """
        if src not in self.neighbors:
            raise LinkError(self.node, src, self.topo.spec, "receive")
        status = MPI.Status()
        self.comm.Probe(src, tag, status)
        count = status.Get_count(MPI.BYTE)
        head = np.empty(max(count, 0), dtype=np.uint8)
        self.recv(head, src, tag)
        raw = head.tobytes()
        if count != self._HEADER or not raw.startswith(self._MAGIC):
            raise DualmpiError(f"node {self.node}: node {src} sent {count} bytes that are not a "
                               "send_array header (did it use send_array?)")
        dtype, _, shape = raw[len(self._MAGIC):].decode().strip().partition("|")
        shape = tuple(int(x) for x in shape.split(",") if x)
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if dtype == arr.dtype.str and nbytes == arr.nbytes and arr.flags.c_contiguous:
            self.recv(arr.reshape(-1).view(np.uint8), src, tag)
            return arr
        self.recv(np.empty(nbytes, dtype=np.uint8), src, tag)
        if not arr.flags.c_contiguous:
            what = "the receive buffer is not contiguous"
        elif nbytes > arr.nbytes:
            what = "receive buffer too small"
        else:
            what = "mismatched buffers"
        raise DualmpiError(
            f"node {self.node}: {what}: node {src} sent {dtype} {shape} ({nbytes} bytes), "
            f"the receive buffer is {arr.dtype.str} {arr.shape} ({arr.nbytes} bytes)")

    def reset_counters(self):
        """Forget the per-link counts (between warm-up and measured iterations)."""
        for v in self.neighbors:
            self._messages[v] = 0
            self._bytes[v] = 0

    def free(self):
        """Free the graph communicator."""
        self.comm.Free()


@dataclass
class MPIRunStats:
    """One rank's view of a collective run; :func:`run_schedule` reduces it over ranks."""

    times: list = field(default_factory=list)
    active_rounds: object = None
    checksum_failures: int = 0
    duplicates: int = 0


def _hold(seconds):
    """Keep this rank busy (sleeping, so oversubscribed ranks can run) for ``seconds``."""
    if seconds > 0:
        time.sleep(seconds)


class NodeEngine:
    """Runs one node's program: link-checked messages, virtual clocks, shaping, switching."""

    def __init__(self, link, schedule, size, options):
        self.link, self.schedule, self.size = link, schedule, size
        self.options = options or RunOptions()
        self.program = node_program(schedule, link.node)
        self.hops = message_hops(schedule)
        model = self.options.model_clock
        self.params = UNIT_CLOCKS + ((model,) if model is not None else ())
        # trailer: (start, head) per clock, then the payload's CRC-32
        self.width = 8 * (2 * len(self.params) + 1)
        comm = link.comm
        self.watchdog = Watchdog(link.node, self.options.watchdog, comm.Abort)
        tag_ub = link.comm.Get_attr(MPI.TAG_UB) or _TAG_MOD
        self.tag_ub = max(int(tag_ub), _TAG_MOD)

    # -- one iteration ------------------------------------------------------------------------
    def run(self, store, stats):
        """Execute the program once on ``store``; return the node's ClockSet."""
        self.store, self.stats = store, stats
        self.clocks = ClockSet(self.params)
        self.pending = {}
        groups = self._groups()
        for group in groups:
            if len(group) > 1 or (self._pipelined() and any(tr.header for nr in group
                                                            for tr in nr.sends + nr.recvs)):
                self._run_pipelined(group)
            else:
                self._run_round(group[0])
        return self.clocks

    def _pipelined(self):
        """True when routed messages are cut into packets (cut-through switching)."""
        return self.options.switching == "cut-through" and self.options.packets > 1

    def _groups(self):
        """Return the program as groups: one round each, or a routed step's rounds together."""
        if not self._pipelined():
            return [[nr] for nr in self.program]
        groups = []
        for nr in self.program:
            routed = any(tr.header for tr in nr.sends + nr.recvs)
            if routed and groups and groups[-1][0].step == nr.step and groups[-1][-1].hop < nr.hop:
                groups[-1].append(nr)
            else:
                groups.append([nr])
        return groups

    # -- message buffers and clocks -----------------------------------------------------------
    def _outgoing(self, tr):
        """Return the send buffer of ``tr``: trailer then payload, clocks advanced, shaping held."""
        n = len(tr.blocks) * self.size
        buf = np.empty(self.width + n, dtype=np.uint8)
        pack_blocks(self.store, tr.blocks, self.size, out=buf[self.width:])
        buf[self.width - 8:self.width].view(np.float64)[0] = zlib.crc32(buf[self.width:])
        self._depart(tr, buf, n, None if hop_position(tr, True) else self.pending.pop(tr.header))
        return buf

    def _depart(self, tr, buf, n, trailer_in):
        """Write the departing trailer into ``buf`` and hold the port as the shape demands."""
        problem = route_problem(self.schedule, self.link.node, tr)
        if problem:
            raise DualmpiError(problem)
        hops = self.hops.get(tr.header, 1)
        out = self.clocks.depart(tr.dst, n, tr.blocks, hops, trailer_in)
        buf[:self.width - 8].view(np.float64)[:] = out
        shape = self.options.shape
        if shape is not None:
            first = trailer_in is None
            if self.options.switching == "store-and-forward":
                _hold(shape.ts + n * shape.tw)
            else:
                _hold((shape.ts + n * shape.tw + shape.th) if first else shape.th)

    def _arrived(self, tr, buf):
        """Check the payload's CRC, unpack it into the store and record it on the clocks."""
        n = buf.nbytes - self.width
        trailer = buf[:self.width - 8].view(np.float64).copy()
        last = hop_position(tr, False)
        crc = buf[self.width - 8:self.width].view(np.float64)[0]
        if crc != zlib.crc32(buf[self.width:]):
            self.stats.checksum_failures += 1
        if last and not tr.reduce:
            self.stats.duplicates += sum(1 for key in tr.blocks if key[0] >= 0
                                         and key in self.store and key[1] == self.link.node)
        unpack_blocks(self.store, tr.blocks, self.size, buf[self.width:], tr.reduce)
        if not last:
            self.pending[tr.header] = trailer
        self.clocks.arrive(tr.blocks, n, trailer, last)

    # -- store-and-forward: one synchronous round ---------------------------------------------
    def _run_round(self, nr):
        """Post receives, pack and send, wait, unpack (one round of the program)."""
        tag = nr.index % _TAG_MOD
        link = self.link
        rbufs = [np.empty(self.width + len(tr.blocks) * self.size, dtype=np.uint8)
                 for tr in nr.recvs]
        reqs = [link.irecv(buf, tr.src, tag) for buf, tr in zip(rbufs, nr.recvs)]
        drop = self.options.drop
        for tr in nr.sends:
            if drop is not None and drop == (nr.index, link.node):
                continue  # the injected fault: this send never happens
            buf = self._outgoing(tr)
            reqs.append(link.isend(buf, tr.dst, tag, buf.nbytes - self.width))
            self.stats.active_rounds[nr.index] = 1
        self._wait(reqs, [tr.src for tr in nr.recvs], nr.index)
        for buf, tr in zip(rbufs, nr.recvs):
            self._arrived(tr, buf)

    def _wait(self, reqs, sources, round_index):
        """Wait for ``reqs`` (the first ``len(sources)`` are receives) under the watchdog."""
        if MPI.Request.Testall(reqs):
            return
        pending = [src for req, src in zip(reqs, sources) if req and not req.Test()]
        self.watchdog.arm(round_index, pending)
        MPI.Request.Waitall(reqs)
        self.watchdog.disarm()

    # -- cut-through: a routed step with packets forwarded as they arrive ----------------------
    def _slices(self, total):
        """Return the packet boundaries of a buffer of ``total`` bytes (trailer in packet 0)."""
        n = total - self.width
        count = max(1, min(self.options.packets, n))
        cuts = [self.width + n * k // count for k in range(count + 1)]
        cuts[0] = 0
        return list(zip(cuts[:-1], cuts[1:]))

    def _tag(self, hop, ordinal, packet):
        """Return the tag of one packet of one hop (the step's rounds are waited on together)."""
        tag = 1 + (hop * 16 + ordinal) * self.options.packets + packet
        if tag >= self.tag_ub:
            raise DualmpiError(f"tag {tag} exceeds MPI_TAG_UB {self.tag_ub}: use fewer --packets")
        return tag

    def _run_pipelined(self, group):
        """Run all hop rounds of one routed step at once, forwarding each packet on arrival."""
        link = self.link
        forward = {}  # header -> (send transfer, its hop, its ordinal)
        for nr in group:
            for tr, ordinal in zip(nr.sends, nr.send_ords):
                if not hop_position(tr, True):
                    forward[tr.header] = (tr, nr.hop, ordinal, nr.index)
        waits, relay = [], []  # plain requests; (request, buffer, bounds, packet, in-transfer)
        finals = []
        for nr in group:
            for tr, ordinal in zip(nr.recvs, nr.recv_ords):
                buf = np.empty(self.width + len(tr.blocks) * self.size, dtype=np.uint8)
                bounds = self._slices(buf.nbytes)
                for k, (a, b) in enumerate(bounds):
                    req = link.irecv(buf[a:b], tr.src, self._tag(nr.hop, ordinal, k))
                    if tr.header in forward:
                        relay.append((req, buf, bounds, k, tr))
                    else:
                        waits.append(req)
                if tr.header not in forward:
                    finals.append((tr, buf))
        for nr in group:
            for tr, ordinal in zip(nr.sends, nr.send_ords):
                if hop_position(tr, True):
                    buf = self._outgoing(tr)
                    for k, (a, b) in enumerate(self._slices(buf.nbytes)):
                        waits.append(link.isend(buf[a:b], tr.dst, self._tag(nr.hop, ordinal, k),
                                                b - max(a, self.width), k == 0))
                    self.stats.active_rounds[nr.index] = 1
        self.watchdog.arm(group[0].index, sorted({tr.src for nr in group for tr in nr.recvs}))
        waits += self._relay(relay, forward)
        MPI.Request.Waitall(waits)
        self.watchdog.disarm()
        for tr, buf in finals:
            self._arrived(tr, buf)

    def _relay(self, relay, forward):
        """Forward each packet of the messages passing through as soon as it arrives."""
        sent = []
        reqs = [r[0] for r in relay]
        left = len(reqs)
        while left:
            i = MPI.Request.Waitany(reqs)
            left -= 1
            _, buf, bounds, k, tr_in = relay[i]
            out, hop, ordinal, index = forward[tr_in.header]
            a, b = bounds[k]
            if k == 0:
                trailer = buf[:self.width - 8].view(np.float64).copy()
                self.clocks.arrive(tr_in.blocks, buf.nbytes - self.width, trailer, False)
                self._depart(out, buf, buf.nbytes - self.width, trailer)
                self.stats.active_rounds[index] = 1
            sent.append(self.link.isend(buf[a:b], out.dst, self._tag(hop, ordinal, k),
                                        b - max(a, self.width), k == 0))
        return sent


def run_schedule(link, schedule, size, iters=1, warmup=0, options=None, salt=0):
    """Run ``schedule`` ``warmup + iters`` times on this rank's node; return reduced results.

    Every iteration starts from fresh initial data; a barrier precedes each timed
    iteration, outside the timer (OSU method).  The final store is verified byte by
    byte against the blocks the collective must deliver.  Virtual clocks ride along
    every message; the returned dict (the same on every rank) has the model
    coefficients they measured (``virtual``) next to the wall-clock times.
    """
    comm, u, topo = link.comm, link.node, link.topo
    coll, root = schedule.collective, schedule.root
    engine = NodeEngine(link, schedule, size, options)
    stats = MPIRunStats(active_rounds=np.zeros(schedule.num_rounds, dtype=np.int8))
    store, clocks = {}, None
    for it in range(warmup + iters):
        if it == warmup:
            link.reset_counters()
            stats.active_rounds[:] = 0
        store = initial_store(coll, topo, root, u, size, salt)
        stats.checksum_failures = stats.duplicates = 0
        comm.Barrier()
        t0 = MPI.Wtime()
        clocks = engine.run(store, stats)
        t1 = MPI.Wtime()
        if it >= warmup:
            stats.times.append(t1 - t0)
    engine.watchdog.close()
    delivered, missing, corrupt = verify_store(coll, topo, root, u, store, size, salt)
    expected = sum(1 for key in expected_blocks(coll, topo, root, u) if key[0] != u)
    out = _reduce(link, schedule, size, iters, stats, delivered, expected, missing, corrupt)
    integrity = np.array([stats.checksum_failures, stats.duplicates], dtype=np.int64)
    summed = np.zeros_like(integrity)
    comm.Allreduce(integrity, summed, op=MPI.SUM)
    out["checksum_failures"], out["duplicates"] = int(summed[0]), int(summed[1])
    out["verified"] = out["verified"] and not summed.any()
    out["virtual"] = _reduce_clocks(comm, clocks, size)
    opts = engine.options
    out["switching"] = opts.switching
    out["packets"] = opts.packets if opts.switching == "cut-through" else 1
    out["shape"] = None if opts.shape is None else {"ts": opts.shape.ts, "tw": opts.shape.tw,
                                                     "th": opts.shape.th}
    return out


def _reduce_clocks(comm, clocks, size):
    """Return the virtual clocks' coefficients (and predicted time), reduced over ranks."""
    finish = np.array(clocks.finish(), dtype=np.float64)
    top = np.zeros_like(finish)
    comm.Allreduce(finish, top, op=MPI.MAX)
    cont = np.array(clocks.contention(), dtype=np.float64).reshape(-1)
    total = np.zeros_like(cont)
    comm.Allreduce(cont, total, op=MPI.SUM)
    pairs = [tuple(total[i:i + 2]) for i in range(0, total.size, 2)]
    summary = virtual_summary(list(top), size, [(d, int(n)) for d, n in pairs])
    return summary


def _reduce(link, schedule, size, iters, stats, delivered, expected, missing, corrupt):
    """Combine every rank's counts and times (control-plane reductions only)."""
    comm, topo = link.comm, link.topo
    active = np.zeros_like(stats.active_rounds)
    comm.Allreduce(stats.active_rounds, active, op=MPI.MAX)
    steps = {schedule.rounds[t].step for t in np.flatnonzero(active)}
    violations = sum(1 for (a, b) in link.link_messages if not topo.is_link(a, b))
    local = np.array([
        delivered, expected, len(missing), len(corrupt), violations,
        sum(link.link_messages.values()), sum(link.link_bytes.values()),
    ], dtype=np.int64)
    total = np.zeros_like(local)
    comm.Allreduce(local, total, op=MPI.SUM)
    avg = float(np.mean(stats.times)) if stats.times else 0.0
    t_min = comm.allreduce(avg, op=MPI.MIN)
    t_max = comm.allreduce(avg, op=MPI.MAX)
    t_avg = comm.allreduce(avg, op=MPI.SUM) / comm.Get_size()
    n_msgs = int(total[5]) // max(iters, 1)
    return {
        "collective": schedule.collective,
        "algorithm": schedule.algorithm,
        "spec": topo.spec,
        "root": schedule.root,
        "size": size,
        "verified": bool(total[0] == total[1] and total[2] == 0 and total[3] == 0),
        "delivered": int(total[0]),
        "expected": int(total[1]),
        "missing": int(total[2]),
        "corrupt": int(total[3]),
        "link_violations": int(total[4]),
        "rounds": len(steps),
        "hop_rounds": int(np.count_nonzero(active)),
        "messages": n_msgs,
        "bytes": int(total[6]) // max(iters, 1),
        "iters": iters,
        "t_min": t_min,
        "t_avg": t_avg,
        "t_max": t_max,
    }
