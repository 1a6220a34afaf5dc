"""The MPI executor: one topology node per rank, every send link-checked, data in numpy buffers.

Only this module (and the native baseline) imports :mod:`mpi4py`.  Communicators are
passed in; nothing reads ``COMM_WORLD`` at import time.
"""

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from ..collectives.schedule import expected_blocks, node_program
from ..errors import DualmpiError, LinkError, RankCountError
from .inprocess import initial_store, route_problem, verify_store
from .payload import pack_blocks, unpack_blocks

__all__ = ["check_rank_count", "graph_comm", "LinkComm", "MPIRunStats", "run_schedule"]

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
        self.link_messages = Counter()
        self.link_bytes = Counter()

    def _check(self, peer):
        """Raise :class:`LinkError` unless ``peer`` is a neighbour of this node."""
        if peer not in self.neighbors:
            raise LinkError(self.node, peer, self.topo.spec)

    def isend(self, buf, dst, tag):
        """Start sending the uint8 array ``buf`` to neighbour ``dst``."""
        self._check(dst)
        self.link_messages[(self.node, dst)] += 1
        self.link_bytes[(self.node, dst)] += buf.nbytes
        return self.comm.Isend([buf, MPI.BYTE], dst, tag)

    def irecv(self, buf, src, tag):
        """Start receiving into the uint8 array ``buf`` from neighbour ``src``."""
        self._check(src)
        return self.comm.Irecv([buf, MPI.BYTE], src, tag)

    def reset_counters(self):
        """Forget the per-link counts (between warm-up and measured iterations)."""
        self.link_messages.clear()
        self.link_bytes.clear()

    def free(self):
        """Free the graph communicator."""
        self.comm.Free()


@dataclass
class MPIRunStats:
    """One rank's view of a collective run; :func:`run_schedule` reduces it over ranks."""

    delivered: int = 0
    expected: int = 0
    missing: int = 0
    corrupt: int = 0
    errors: list = field(default_factory=list)
    times: list = field(default_factory=list)
    active_rounds: object = None


def _run_once(link, schedule, program, store, size, stats):
    """Execute one node program: per round post receives, pack and send, wait, unpack."""
    for nr in program:
        tag = nr.index % _TAG_MOD
        rbufs = [np.empty(len(tr.blocks) * size, dtype=np.uint8) for tr in nr.recvs]
        reqs = [link.irecv(buf, tr.src, tag) for buf, tr in zip(rbufs, nr.recvs)]
        for tr in nr.sends:
            problem = route_problem(schedule, link.node, tr)
            if problem:
                raise DualmpiError(f"round {nr.index}: {problem}")
            reqs.append(link.isend(pack_blocks(store, tr.blocks, size), tr.dst, tag))
            stats.active_rounds[nr.index] = 1
        MPI.Request.Waitall(reqs)
        for buf, tr in zip(rbufs, nr.recvs):
            unpack_blocks(store, tr.blocks, size, buf, tr.reduce)
    return store


def run_schedule(link, schedule, size, iters=1, warmup=0):
    """Run ``schedule`` ``warmup + iters`` times on this rank's node; return reduced results.

    Every iteration starts from fresh initial data; a barrier precedes each timed
    iteration, outside the timer (OSU method).  The final store is verified byte by
    byte against the blocks the collective must deliver.  The returned dict is the
    same on every rank.
    """
    comm, u, topo = link.comm, link.node, link.topo
    coll, root = schedule.collective, schedule.root
    program = node_program(schedule, u)
    stats = MPIRunStats(active_rounds=np.zeros(schedule.num_rounds, dtype=np.int8))
    store = {}
    for it in range(warmup + iters):
        if it == warmup:
            link.reset_counters()
            stats.active_rounds[:] = 0
        store = initial_store(coll, topo, root, u, size)
        comm.Barrier()
        t0 = MPI.Wtime()
        _run_once(link, schedule, program, store, size, stats)
        t1 = MPI.Wtime()
        if it >= warmup:
            stats.times.append(t1 - t0)
    delivered, missing, corrupt = verify_store(coll, topo, root, u, store, size)
    expected = sum(1 for key in expected_blocks(coll, topo, root, u) if key[0] != u)
    return _reduce(link, schedule, size, iters, stats, delivered, expected, missing, corrupt)


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
