"""``dualmpi.Comm``: mpi4py's collectives on your own buffers, moved only over a network's links.

A :class:`Comm` wraps an MPI communicator whose ranks play the nodes of a topology
(one node per rank, or ``nodes_per_rank`` consecutive nodes each) and mirrors the
buffer collectives of :class:`mpi4py.MPI.Comm` with the same names and arguments::

    from mpi4py import MPI
    import dualmpi

    net = dualmpi.Comm(MPI.COMM_WORLD, "dualcube:r=3")
    net.Alltoall(sendbuf, recvbuf)      # was: MPI.COMM_WORLD.Alltoall(sendbuf, recvbuf)

The results are those of the MPI call; the data travel as the papers' algorithms
send them, hop by hop over the links, forwarded by the ranks in between (see
:mod:`dualmpi.engine`).  Bad arguments raise :class:`~dualmpi.errors.InputError` on
every rank.  Modelled on :class:`mpi4py.util.pkl5.Comm`.
"""

import collections
import weakref
import zlib

import numpy as np

from . import arguments, calls, derived, neighbor, objects, p2p, request
from .collectives import registry
from .engine import recall
from .errors import DualmpiError, InputError, RankCountError
from .resources import ResourceError
from .support import unsupported
from .topology import Topology, from_spec

__all__ = ["Comm", "PACKETS_ABOVE", "REMEMBERED", "REMEMBERED_BYTES"]

#: Calls of one method remembered at once, the most recent first (:meth:`Comm._remember`).
REMEMBERED = 4
#: Address sets a call remembered by shape for pieces of ``calls.ZERO_COPY_ABOVE`` bytes or
#: more declines (its last calls'), so that arrays at addresses a program comes back to bind a
#: plan to them.
SEEN = 8
#: Runners bound to the memory at an address set, holding none of it between calls, a
#: communicator keeps (:meth:`Comm._runner`; the oldest released first).
AT_ADDRESSES = 8
#: The fixed-count nonblocking methods: a repeat is matched and started in C
#: (``Comm._m<name>``: :func:`dualmpi.calls._install_start`), and the v-variants: a repeat is
#: matched in C and its count table restarted there (:func:`dualmpi.calls._install_vstart`).
_FIXED_NONBLOCKING = calls.fixed_nonblocking()
_VECTOR_NONBLOCKING = calls.vector_nonblocking()

#: An older remembered call not repeated yet is dropped when its arrays hold more than this
#: many bytes (it would keep them alive: :meth:`Comm._remember`).
REMEMBERED_BYTES = 1 << 20

#: Broadcast and scatter blocks larger than this are pipelined in pieces of
#: :data:`PACKET_BYTES` by default (``packets="auto"``); the all-to-all patterns, whose
#: links are busy every round, are not: docs/performance.md has the measurements.
PACKETS_ABOVE = 1 << 18
PACKET_BYTES = 1 << 18
#: The collectives pipelined by default: those whose description says so (one-to-all patterns).
PIPELINED = tuple(name for name in registry.names() if registry.get(name).pipelined)


def _mpi():
    from mpi4py import MPI

    return MPI


class Comm(p2p.PointToPoint):
    """A communicator whose collectives travel only over the links of a network.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The ranks that play the network, e.g. ``MPI.COMM_WORLD`` (not modified; the
        wrapper builds its own graph communicator from it).
    topology : str or Topology
        A spec such as ``"dualcube:r=3"`` or a topology object (with faults:
        :class:`~dualmpi.topology.faults.FaultyTopology`).
    nodes_per_rank : int, optional
        Nodes each rank plays (default ``nodes / ranks``); must make ``ranks * q`` the
        node count.
    watchdog : float
        Seconds any wait may last before the job is aborted with a message naming the
        rank (default 120; 0: never).
    verify : bool
        Carry a CRC-32 with every message and count failures (:meth:`stats`).
    shape : tuple or str, optional
        ``(ts, tw, th)`` seconds: hold each sending port ``ts + n*tw`` per message (and
        ``th`` per hop), so wall time follows the papers' cost model.
    packets : "auto", int
        Pipelining: ``"auto"`` cuts broadcast and scatter blocks above
        :data:`PACKETS_ABOVE` bytes (256 KiB) into 256 KiB pieces forwarded as they
        arrive (cut-through), where some rank forwards them (not on Q_1, whose blocks
        make one hop); an int fixes the piece count for every collective (1: whole
        blocks, store-and-forward).
    variant : str
        ``"corrected"`` (default) or ``"as-printed"`` algorithms where a paper errs.
    algorithms : dict, optional
        Per collective, a non-default algorithm: ``{"allgather": "ring"}``.
    stream : "auto", bool
        Run the total exchange step by step over node chunks instead of a per-row plan
        (:mod:`dualmpi.engine.stream`): ``"auto"`` from ``nodes x nodes_per_rank >= 2**22``
        (MC(2, 3) on 2 ranks) when the pieces split evenly into ``q * q`` blocks.

    Examples
    --------
    Under ``mpiexec -n 8 python -m mpi4py prog.py``::

        net = dualmpi.Comm(MPI.COMM_WORLD, "dualcube:r=2")
        a = np.arange(8.0) * net.Get_rank()
        b = np.empty(8)
        net.Alltoall(a, b)      # b equals what MPI.COMM_WORLD.Alltoall(a, b) gives
        print(net.stats()["messages"])
        net.Free()
    """

    def __init__(self, comm, topology, nodes_per_rank=None, *, watchdog=120.0, verify=False,
                 shape=None, packets="auto", variant="corrected", algorithms=None, drop=None,
                 stream="auto"):
        MPI = _mpi()
        topo = topology if isinstance(topology, Topology) else from_spec(topology)
        size = comm.Get_size()
        q = _nodes_per_rank(topo, size, nodes_per_rank)
        if watchdog is None or not np.isfinite(watchdog) or watchdog < 0:
            raise InputError(f"bad watchdog {watchdog!r}: seconds >= 0 (0 disables it)")
        self.comm, self.topology, self.q = comm, topo, q
        self.rank, self.size = comm.Get_rank(), size
        self.nodes = range(self.rank * q, (self.rank + 1) * q)
        self.variant = _variant(variant)
        self.algorithms = _algorithms(topo, algorithms)
        self.options = {"verify": bool(verify), "shape": _shape(shape),
                        "drop": None if drop is None else tuple(drop)}
        self.packets = _packets(packets)
        from .engine.core import Engine
        from .engine.mpi import MPITransport

        if stream not in ("auto", True, False):
            raise InputError(f"bad stream {stream!r}: 'auto', True or False")
        self._transport = MPITransport(comm, topo, q, watchdog)
        self._agree_on_network(topo, q, stream)
        above = PACKETS_ABOVE if self.packets == "auto" else None
        self._engine = Engine(topo, q, self._transport, packets_above=above,
                              packet_bytes=PACKET_BYTES, pipelined=PIPELINED, stream=stream,
                              **self.options)
        self._agreed = set()
        #: the nonblocking collectives' progress engine and the neighbourhood collectives'
        #: communicator, made now (collective): made by a first nonblocking call, they would
        #: make it wait for every rank, which MPI does not (a rank may start an Ibcast, then
        #: wait for a message another rank sends before its own Ibcast)
        from .engine.nonblocking import PlanRequest, Progress

        self._nb = Progress(self._transport, wrap=calls.Request)
        if self._nb.crestart is not None:  # (Request.Wait of a request it ends in C: recall.c)
            request.use_c_wait(recall.load(), PlanRequest, calls._Chain)
        if recall.load() is not None:  # (the methods that ask a matcher first: in C too)
            _methods_in_c(recall.load())
        #: what the completed nonblocking collectives sent (stats())
        self._nb_tally = calls.Tally()
        neighbor.attach(self)
        from .engine.router import Router

        #: point-to-point to any rank (dualmpi.p2p); its link counts are stats()'s
        self._router = Router(self._transport)
        p2p.start_lane(self)
        #: every MPI method a description names, numbered (what the argument check compares)
        self._codes = {d.mpi: i + 1 for i, d in enumerate(
            registry.get(n) for n in registry.names()) if d.mpi}
        #: count tables of v-variant calls whose memory was checked (crc32)
        self._v_checked = set()
        #: per (collective, root): the largest plan's (slots, rows) over the ranks, agreed at
        #: the first memory check (calls.check_memory)
        self._v_shapes = {}
        #: this rank's memory budget in the count tables' rows (calls._budget)
        self._budget = None
        #: the last count table of each v-variant method and its verdict (calls._vector_call)
        self._v_verdicts = {}
        #: the last call of each v-variant method (calls._VectorMemo)
        self._v_memo = {}
        #: the v-variant methods whose next call runs speculatively (calls._Speculation)
        self._v_spec = {}
        #: the plan of each v-variant method's last full call (calls._Speculation)
        self._v_last = {}
        #: the arrays the object collectives hand the buffer ones, kept (objects.Scratch)
        self._objects = objects.Scratch()
        self._fast, self._last = {}, {}
        #: the runner of the last blocking call, or what makes it (:attr:`_last_runner`)
        self._last_run = None
        #: recent address sets of calls that could bind their buffers (per runner key), and the
        #: runners bound at such addresses (:meth:`_runner`)
        self._last_at, self._at = {}, collections.OrderedDict()
        #: address sets a matcher by shape declined: calls at addresses it saw before
        #: (``Recall.shape``'s ``wanted``), which bind a runner at them (:meth:`_runner`)
        self._wanted = set()
        #: whether a call can be bound in place, per call shape (calls._apart)
        self._in_place = {}
        self._zero_copy = q == 1 and not verify and shape is None and drop is None
        self._baseline = None
        self._p2p = self._router.links
        #: the messages this rank originated point-to-point (stats()'s p2p_*)
        self._hub = self._router.hub
        self._allreduce_costs = None
        #: the last call of each method, repeated without its checks (:meth:`_remember`)
        self._forget()
        # an alarm (dualmpi/engine/alarm.py) leaves the communicator unusable: no call may then
        # be repeated without the check that says so
        self._transport.alarm.listeners.append(lambda text: self._forget())
        self._settled = False
        self._faulty = hasattr(topo, "alive")
        self._IN_PLACE = MPI.IN_PLACE
        self._MPI = MPI

    # -- mpi4py mirror -------------------------------------------------------------------------
    def _agree_on_network(self, topo, q, stream):
        """Check that every rank built the same network with the same options, or raise alike.

        The spec (with its faults), nodes per rank and every option that changes plans
        or messages; a rank that differs would otherwise run other plans than the rest
        and wait in its first collective until the watchdog.
        """
        faults = tuple(sorted(getattr(topo, name, ()) or ()) for name in
                       ("failed_links", "failed_nodes"))
        what = repr((topo.spec, faults, q, self.variant, self.packets,
                     sorted(self.algorithms.items()), stream, self.options["verify"],
                     self.options["shape"], self.options["drop"])).encode()
        code = zlib.crc32(what) << 20 | (zlib.crc32(what[::-1]) & 0xFFFFF)
        both = np.array([code, -code], dtype=np.int64)
        out = np.zeros_like(both)
        self._transport.allreduce(both, out, _mpi().MAX, "the set-up of dualmpi.Comm")
        if out[0] != -out[1]:
            self._transport.free()
            raise InputError(f"dualmpi.Comm: the ranks were given different networks or options "
                             f"(this rank: {topo.spec}, nodes_per_rank={q}, "
                             f"variant={self.variant!r}, packets={self.packets!r}, "
                             f"algorithms={self.algorithms}, stream={stream!r}, "
                             f"verify={self.options['verify']}, shape={self.options['shape']})")

    def Get_rank(self):
        """Return this rank."""
        return self.rank

    def Get_size(self):
        """Return the number of ranks."""
        return self.size

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.Free()

    def _forget(self):
        """Drop every remembered call (:meth:`_remember`)."""
        for name in (*self._codes, *neighbor.REMEMBERED):
            setattr(self, "_m" + name, calls.no_match)
        for name in (*_FIXED_NONBLOCKING, *_VECTOR_NONBLOCKING, *neighbor.IREMEMBERED):
            # (a repeat started in C: calls._install_start, _install_vstart, neighbor._ifast)
            setattr(self, "_m" + name, calls.no_start)
        #: the remembered calls of each fixed-count method (:meth:`_remember`)
        self._recalls = {}
        #: the last call of each method on new arrays not remembered yet
        #: (:meth:`_remember_unsettled`)
        self._shaped = {}
        self._v_memo = {}
        #: the last call of each fixed-count nonblocking method (calls._IMemo)
        self._i_memo = {}
        #: older calls of each v-variant method (calls._older)
        self._v_older = {}
        self._v_spec = {}
        self._v_last = {}

    def Free(self):
        """Release the plans, persistent requests and the graph communicator."""
        self._forget()
        self._objects = None
        self._release_at(len(self._at))
        if self._router is not None:
            p2p.stop_lane(self)
            self._router.close()
            self._router = None
        if self._engine is not None:
            neighbor.free(self)
        if self._nb is not None:
            self._nb.free()
            self._nb = None
        if self._engine is not None:
            self._engine.free()
            self._transport.free()
            self._engine = None

    def free(self):
        """Release the communicator (mirrors ``Comm.free``: :meth:`Free`)."""
        self.Free()

    # -- local queries (no data moves) -----------------------------------------------------------
    def Get_group(self):
        """Return the group of the ranks (those of ``comm``; mirrors ``Comm.Get_group``)."""
        return self.comm.Get_group()

    @property
    def group(self):
        """The group of the ranks."""
        return self.Get_group()

    def Is_inter(self):
        """Return False: the ranks of a network form one group (an intracommunicator)."""
        return False

    def Is_intra(self):
        """Return True (see :meth:`Is_inter`)."""
        return True

    is_inter = property(Is_inter, doc="False: an intracommunicator.")
    is_intra = property(Is_intra, doc="True: an intracommunicator.")

    def Get_topology(self):
        """Return ``MPI.DIST_GRAPH``: the ranks form the network's (rank) graph."""
        return self._MPI.DIST_GRAPH

    @property
    def is_topo(self):
        """True: the communicator carries a process topology (the network's)."""
        return True

    def Get_name(self):
        """Return the communicator's name (default: ``"dualmpi:" + the spec``)."""
        return getattr(self, "_name", None) or f"dualmpi:{self.topology.spec}"

    def Set_name(self, name):
        """Name the communicator (local; mirrors ``Comm.Set_name``)."""
        self._name = str(name)

    name = property(Get_name, Set_name, doc="The communicator's name.")

    def Get_attr(self, keyval):
        """Return an attribute of the ranks' communicator, e.g. ``MPI.TAG_UB`` (local)."""
        return self.comm.Get_attr(keyval)

    def Get_info(self):
        """Return the info hints of the ranks' communicator (local)."""
        return self.comm.Get_info()

    def Abort(self, errorcode=0):
        """Abort every rank of the job (mirrors ``Comm.Abort``)."""
        self.comm.Abort(errorcode)

    @property
    def info(self):
        """The info hints of the ranks' communicator."""
        return self.Get_info()

    def __getattr__(self, name):
        """A method of ``MPI.Intracomm`` that dualmpi does not carry: say so, and why."""
        err = unsupported(name)
        if err is not None:
            raise err
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- buffer collectives: each hands off to one path (read -> agree -> plan -> run) ---------
    def Bcast(self, buf, root=0):
        """Broadcast ``buf`` from rank ``root`` (mirrors :meth:`mpi4py.MPI.Comm.Bcast`)."""
        if not self._mBcast(buf, root):
            calls.collective(self, "Bcast", lambda: arguments.bcast(buf, root, self.rank, self.size),
                             (buf, root), ((buf, True),))

    def Scatter(self, sendbuf, recvbuf, root=0):
        """Scatter rank ``root``'s ``sendbuf`` in equal pieces (mirrors ``Comm.Scatter``)."""
        if not self._mScatter(sendbuf, recvbuf, root):
            calls.collective(self, "Scatter", lambda: arguments.scatter(sendbuf, recvbuf, root,
                                                                  self.rank, self.size),
                             (sendbuf, recvbuf, root), ((sendbuf, False), (recvbuf, True)))

    def Scatterv(self, sendbuf, recvbuf, root=0):
        """Scatter pieces of one size per rank (mirrors ``Comm.Scatterv``)."""
        done = self._mScatterv(sendbuf, recvbuf, root)
        if not done:
            calls.collective(self, "Scatterv", lambda: arguments.scatter(
                sendbuf, recvbuf, root, self.rank, self.size, v=True),
                (sendbuf, recvbuf, root), exchanged=done is None)

    def Gather(self, sendbuf, recvbuf, root=0):
        """Gather every ``sendbuf`` into rank ``root``'s ``recvbuf`` (mirrors ``Comm.Gather``)."""
        if not self._mGather(sendbuf, recvbuf, root):
            calls.collective(self, "Gather", lambda: arguments.gather(sendbuf, recvbuf, root,
                                                                self.rank, self.size),
                             (sendbuf, recvbuf, root), ((sendbuf, False), (recvbuf, True)))

    def Gatherv(self, sendbuf, recvbuf, root=0):
        """Gather pieces of one size per rank (mirrors ``Comm.Gatherv``)."""
        done = self._mGatherv(sendbuf, recvbuf, root)
        if not done:
            calls.collective(self, "Gatherv", lambda: arguments.gather(
                sendbuf, recvbuf, root, self.rank, self.size, v=True),
                (sendbuf, recvbuf, root), exchanged=done is None)

    def Allgather(self, sendbuf, recvbuf):
        """Gather every rank's ``sendbuf`` into every ``recvbuf`` (mirrors ``Comm.Allgather``)."""
        if not self._mAllgather(sendbuf, recvbuf):
            calls.collective(self, "Allgather", lambda: arguments.allgather(sendbuf, recvbuf, self.rank,
                                                                      self.size),
                             (sendbuf, recvbuf), ((sendbuf, False), (recvbuf, True)))

    def Allgatherv(self, sendbuf, recvbuf):
        """Allgather with one size per rank (mirrors ``Comm.Allgatherv``)."""
        done = self._mAllgatherv(sendbuf, recvbuf)
        if not done:
            calls.collective(self, "Allgatherv", lambda: arguments.allgather(
                sendbuf, recvbuf, self.rank, self.size, v=True),
                (sendbuf, recvbuf), exchanged=done is None)

    def Alltoall(self, sendbuf, recvbuf):
        """The total exchange: piece ``j`` of ``sendbuf`` to rank ``j`` (mirrors ``Comm.Alltoall``)."""
        if not self._mAlltoall(sendbuf, recvbuf):
            calls.collective(self, "Alltoall", lambda: arguments.alltoall(sendbuf, recvbuf, self.rank,
                                                                    self.size),
                             (sendbuf, recvbuf), ((sendbuf, False), (recvbuf, True)))

    def Alltoallv(self, sendbuf, recvbuf):
        """The total exchange with a count per pair (mirrors ``Comm.Alltoallv``)."""
        done = self._mAlltoallv(sendbuf, recvbuf)
        if not done:
            calls.collective(self, "Alltoallv", lambda: arguments.alltoall(
                sendbuf, recvbuf, self.rank, self.size, v=True),
                (sendbuf, recvbuf), exchanged=done is None)

    def Alltoallw(self, sendbuf, recvbuf):
        """The total exchange with a count and datatype per pair (mirrors ``Comm.Alltoallw``)."""
        done = self._mAlltoallw(sendbuf, recvbuf)
        if not done:
            calls.collective(self, "Alltoallw", lambda: arguments.alltoallw(
                sendbuf, recvbuf, self.rank, self.size),
                (sendbuf, recvbuf), exchanged=done is None)

    # -- reductions -----------------------------------------------------------------------------
    def Reduce(self, sendbuf, recvbuf, op=None, root=0):
        """Reduce every rank's ``sendbuf`` into rank ``root``'s ``recvbuf`` (mirrors ``Comm.Reduce``).

        ``op``: an ``MPI.Op`` (default ``MPI.SUM``) or a binary numpy ufunc, commutative
        and associative.  The partial results travel the broadcast tree backwards
        (:mod:`dualmpi.collectives.reduce`).
        """
        if not self._mReduce(sendbuf, recvbuf, op, root):
            calls.collective(self, "Reduce", lambda: calls.with_op(self, arguments.reduce(
                sendbuf, recvbuf, root, self.rank, self.size), op, "Reduce"),
                (sendbuf, recvbuf, op, root), ((sendbuf, False), (recvbuf, True)))

    def Allreduce(self, sendbuf, recvbuf, op=None):
        """Reduce every rank's ``sendbuf`` into every ``recvbuf`` (mirrors ``Comm.Allreduce``).

        The algorithm is chosen per size (:func:`dualmpi.collectives.allreduce.choose`)
        unless ``algorithms={"allreduce": ...}`` names one.
        """
        if not self._mAllreduce(sendbuf, recvbuf, op):
            calls.collective(self, "Allreduce", lambda: calls.with_op(self, arguments.allreduce(
                sendbuf, recvbuf), op, "Allreduce"),
                (sendbuf, recvbuf, op), ((sendbuf, False), (recvbuf, True)))

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=None):
        """Reduce, then block ``r`` to rank ``r`` (mirrors ``Comm.Reduce_scatter_block``).

        The all-to-all broadcast run backwards (:mod:`dualmpi.collectives.reduce_scatter`).
        """
        if not self._mReduce_scatter_block(sendbuf, recvbuf, op):
            calls.collective(self, "Reduce_scatter_block", lambda: calls.with_op(
                self, arguments.reduce_scatter_block(sendbuf, recvbuf, self.rank, self.size), op,
                "Reduce_scatter_block"),
                (sendbuf, recvbuf, op), ((sendbuf, False), (recvbuf, True)))

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=None):
        """Reduce, then ``recvcounts[r]`` elements to rank ``r`` (mirrors ``Comm.Reduce_scatter``)."""
        done = self._mReduce_scatter(sendbuf, recvbuf, recvcounts, op)
        if not done:
            calls.collective(self, "Reduce_scatter", lambda: calls.with_op(
                self, arguments.reduce_scatter(sendbuf, recvbuf, recvcounts, self.rank, self.size),
                op, "Reduce_scatter"),
                (sendbuf, recvbuf, recvcounts, op), exchanged=done is None)

    def Scan(self, sendbuf, recvbuf, op=None):
        """Inclusive prefix reduction over the ranks (mirrors ``Comm.Scan``)."""
        if not self._mScan(sendbuf, recvbuf, op):
            calls.collective(self, "Scan", lambda: calls.with_op(self, arguments.scan(sendbuf, recvbuf), op,
                                                      "Scan"),
                             (sendbuf, recvbuf, op), ((sendbuf, False), (recvbuf, True)))

    def Exscan(self, sendbuf, recvbuf, op=None):
        """Exclusive prefix reduction over the ranks (mirrors ``Comm.Exscan``).

        Rank 0's ``recvbuf`` is left as it was (MPI leaves it undefined).
        """
        if not self._mExscan(sendbuf, recvbuf, op):
            calls.collective(self, "Exscan", lambda: calls.with_op(self, arguments.scan(sendbuf, recvbuf, True),
                                                        op, "Exscan"),
                             (sendbuf, recvbuf, op), ((sendbuf, False), (recvbuf, True)))

    def Barrier(self):
        """Synchronise the ranks with empty messages over the links (mirrors ``Comm.Barrier``).

        :mod:`dualmpi.collectives.barrier`: recursive doubling on the hypercube, the
        broadcast tree there and back elsewhere.
        """
        if not self._mBarrier():
            calls.collective(self, "Barrier", lambda: calls.with_op(self, arguments.barrier(), None, "Barrier"), (),
                             ())

    # -- object collectives (pickled, built on the buffer ones: dualmpi.objects) ----------------
    def barrier(self):
        """Synchronise the ranks (mirrors ``Comm.barrier``)."""
        return objects.barrier(self)

    def bcast(self, obj, root=0):
        """Broadcast a Python object (mirrors ``Comm.bcast``)."""
        return objects.bcast(self, obj, root)

    def scatter(self, sendobj, root=0):
        """Scatter a sequence of ``size`` objects from ``root`` (mirrors ``Comm.scatter``)."""
        return objects.scatter(self, sendobj, root)

    def gather(self, sendobj, root=0):
        """Gather an object from every rank at ``root`` (mirrors ``Comm.gather``)."""
        return objects.gather(self, sendobj, root)

    def allgather(self, sendobj):
        """Gather an object from every rank at every rank (mirrors ``Comm.allgather``)."""
        return objects.allgather(self, sendobj)

    def alltoall(self, sendobj):
        """Object ``j`` of ``sendobj`` to rank ``j`` (mirrors ``Comm.alltoall``)."""
        return objects.alltoall(self, sendobj)

    def reduce(self, sendobj, op=None, root=0):
        """Reduce objects with ``op`` (any callable, default ``MPI.SUM``) at ``root``."""
        return objects.reduce(self, sendobj, op, root)

    def allreduce(self, sendobj, op=None):
        """Reduce objects with ``op`` at every rank (mirrors ``Comm.allreduce``)."""
        return objects.allreduce(self, sendobj, op)

    def scan(self, sendobj, op=None):
        """Inclusive prefix reduction of objects (mirrors ``Comm.scan``)."""
        return objects.scan(self, sendobj, op)

    def exscan(self, sendobj, op=None):
        """Exclusive prefix reduction of objects; None on rank 0 (mirrors ``Comm.exscan``)."""
        return objects.exscan(self, sendobj, op)

    # -- nonblocking collectives: the same plans run as requests (dualmpi.Request) --------------
    def Ibcast(self, buf, root=0):
        """Start a broadcast; return a :class:`dualmpi.Request` (mirrors ``Comm.Ibcast``)."""
        req = self._mIbcast(buf, root)
        if req is not None:
            return req
        return calls.icollective(self, "Ibcast", "Bcast",
                                 lambda: arguments.bcast(buf, root, self.rank, self.size),
                                 (buf, root))

    def Iscatter(self, sendbuf, recvbuf, root=0):
        """Start a scatter (mirrors ``Comm.Iscatter``)."""
        req = self._mIscatter(sendbuf, recvbuf, root)
        if req is not None:
            return req
        return calls.icollective(self, "Iscatter", "Scatter", lambda: arguments.scatter(
            sendbuf, recvbuf, root, self.rank, self.size), (sendbuf, recvbuf, root))

    def Iscatterv(self, sendbuf, recvbuf, root=0):
        """Start a scatter of one size per rank (mirrors ``Comm.Iscatterv``)."""
        req = self._mIscatterv(sendbuf, recvbuf, root)
        if req is not None:
            return req
        return calls.icollective(self, "Iscatterv", "Scatterv", lambda: arguments.scatter(
            sendbuf, recvbuf, root, self.rank, self.size, v=True), (sendbuf, recvbuf, root))

    def Igather(self, sendbuf, recvbuf, root=0):
        """Start a gather (mirrors ``Comm.Igather``)."""
        req = self._mIgather(sendbuf, recvbuf, root)
        if req is not None:
            return req
        return calls.icollective(self, "Igather", "Gather", lambda: arguments.gather(
            sendbuf, recvbuf, root, self.rank, self.size), (sendbuf, recvbuf, root))

    def Igatherv(self, sendbuf, recvbuf, root=0):
        """Start a gather of one size per rank (mirrors ``Comm.Igatherv``)."""
        req = self._mIgatherv(sendbuf, recvbuf, root)
        if req is not None:
            return req
        return calls.icollective(self, "Igatherv", "Gatherv", lambda: arguments.gather(
            sendbuf, recvbuf, root, self.rank, self.size, v=True), (sendbuf, recvbuf, root))

    def Iallgather(self, sendbuf, recvbuf):
        """Start an allgather (mirrors ``Comm.Iallgather``)."""
        req = self._mIallgather(sendbuf, recvbuf)
        if req is not None:
            return req
        return calls.icollective(self, "Iallgather", "Allgather", lambda: arguments.allgather(
            sendbuf, recvbuf, self.rank, self.size), (sendbuf, recvbuf))

    def Iallgatherv(self, sendbuf, recvbuf):
        """Start an allgather of one size per rank (mirrors ``Comm.Iallgatherv``)."""
        req = self._mIallgatherv(sendbuf, recvbuf)
        if req is not None:
            return req
        return calls.icollective(self, "Iallgatherv", "Allgatherv", lambda: arguments.allgather(
            sendbuf, recvbuf, self.rank, self.size, v=True), (sendbuf, recvbuf))

    def Ialltoall(self, sendbuf, recvbuf):
        """Start a total exchange (mirrors ``Comm.Ialltoall``)."""
        req = self._mIalltoall(sendbuf, recvbuf)
        if req is not None:
            return req
        return calls.icollective(self, "Ialltoall", "Alltoall", lambda: arguments.alltoall(
            sendbuf, recvbuf, self.rank, self.size), (sendbuf, recvbuf))

    def Ialltoallv(self, sendbuf, recvbuf):
        """Start a total exchange with a count per pair (mirrors ``Comm.Ialltoallv``)."""
        req = self._mIalltoallv(sendbuf, recvbuf)
        if req is not None:
            return req
        return calls.icollective(self, "Ialltoallv", "Alltoallv", lambda: arguments.alltoall(
            sendbuf, recvbuf, self.rank, self.size, v=True), (sendbuf, recvbuf))

    def Ialltoallw(self, sendbuf, recvbuf):
        """Start a total exchange with a count and datatype per pair (``Comm.Ialltoallw``)."""
        req = self._mIalltoallw(sendbuf, recvbuf)
        if req is not None:
            return req
        return calls.icollective(self, "Ialltoallw", "Alltoallw", lambda: arguments.alltoallw(
            sendbuf, recvbuf, self.rank, self.size), (sendbuf, recvbuf))

    def Ireduce(self, sendbuf, recvbuf, op=None, root=0):
        """Start a reduction to ``root`` (mirrors ``Comm.Ireduce``)."""
        req = self._mIreduce(sendbuf, recvbuf, op, root)
        if req is not None:
            return req
        return calls.icollective(self, "Ireduce", "Reduce", lambda: calls.with_op(
            self, arguments.reduce(sendbuf, recvbuf, root, self.rank, self.size), op, "Ireduce"),
            (sendbuf, recvbuf, op, root))

    def Iallreduce(self, sendbuf, recvbuf, op=None):
        """Start an allreduce (mirrors ``Comm.Iallreduce``)."""
        req = self._mIallreduce(sendbuf, recvbuf, op)
        if req is not None:
            return req
        return calls.icollective(self, "Iallreduce", "Allreduce", lambda: calls.with_op(
            self, arguments.allreduce(sendbuf, recvbuf), op, "Iallreduce"), (sendbuf, recvbuf, op))

    def Ireduce_scatter_block(self, sendbuf, recvbuf, op=None):
        """Start a reduce-scatter of equal blocks (mirrors ``Comm.Ireduce_scatter_block``)."""
        req = self._mIreduce_scatter_block(sendbuf, recvbuf, op)
        if req is not None:
            return req
        return calls.icollective(self, "Ireduce_scatter_block", "Reduce_scatter_block",
                                 lambda: calls.with_op(self, arguments.reduce_scatter_block(
                                     sendbuf, recvbuf, self.rank, self.size), op,
                                     "Ireduce_scatter_block"), (sendbuf, recvbuf, op))

    def Ireduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=None):
        """Start a reduce-scatter (mirrors ``Comm.Ireduce_scatter``)."""
        req = self._mIreduce_scatter(sendbuf, recvbuf, recvcounts, op)
        if req is not None:
            return req
        return calls.icollective(self, "Ireduce_scatter", "Reduce_scatter",
                                 lambda: calls.with_op(self, arguments.reduce_scatter(
                                     sendbuf, recvbuf, recvcounts, self.rank, self.size), op,
                                     "Ireduce_scatter"), (sendbuf, recvbuf, recvcounts, op))

    def Iscan(self, sendbuf, recvbuf, op=None):
        """Start an inclusive prefix reduction (mirrors ``Comm.Iscan``)."""
        req = self._mIscan(sendbuf, recvbuf, op)
        if req is not None:
            return req
        return calls.icollective(self, "Iscan", "Scan", lambda: calls.with_op(
            self, arguments.scan(sendbuf, recvbuf), op, "Iscan"), (sendbuf, recvbuf, op))

    def Iexscan(self, sendbuf, recvbuf, op=None):
        """Start an exclusive prefix reduction (mirrors ``Comm.Iexscan``)."""
        req = self._mIexscan(sendbuf, recvbuf, op)
        if req is not None:
            return req
        return calls.icollective(self, "Iexscan", "Exscan", lambda: calls.with_op(
            self, arguments.scan(sendbuf, recvbuf, True), op, "Iexscan"), (sendbuf, recvbuf, op))

    def Ibarrier(self):
        """Start a barrier over the links (mirrors ``Comm.Ibarrier``)."""
        req = self._mIbarrier()
        if req is not None:
            return req
        return calls.icollective(self, "Ibarrier", "Barrier", lambda: calls.with_op(
            self, arguments.barrier(), None, "Ibarrier"), ())

    # -- neighbourhood collectives: the neighbours are the links (dualmpi.neighbor) ------------
    def Get_dist_neighbors_count(self):
        """Return ``(indegree, outdegree, weighted)``: ``(d, d, False)`` (mirrors
        ``Distgraphcomm.Get_dist_neighbors_count``)."""
        return neighbor.Get_dist_neighbors_count(self)

    def Get_dist_neighbors(self):
        """Return ``(sources, destinations, None)``: this rank's neighbours, the same list twice
        (mirrors ``Distgraphcomm.Get_dist_neighbors``; order: :func:`dualmpi.neighbor.neighbors`)."""
        return neighbor.Get_dist_neighbors(self)

    def Neighbor_allgather(self, sendbuf, recvbuf):
        """Gather one block from every neighbour (mirrors ``Topocomm.Neighbor_allgather``)."""
        if not self._mNeighbor_allgather(sendbuf, recvbuf):
            neighbor.Neighbor_allgather(self, sendbuf, recvbuf)

    def Neighbor_allgatherv(self, sendbuf, recvbuf):
        """Gather a block of one size per neighbour (mirrors ``Topocomm.Neighbor_allgatherv``)."""
        if not self._mNeighbor_allgatherv(sendbuf, recvbuf):
            neighbor.Neighbor_allgatherv(self, sendbuf, recvbuf)

    def Neighbor_alltoall(self, sendbuf, recvbuf):
        """Block ``j`` to neighbour ``j``, block ``i`` from neighbour ``i`` (mirrors
        ``Topocomm.Neighbor_alltoall``)."""
        if not self._mNeighbor_alltoall(sendbuf, recvbuf):
            neighbor.Neighbor_alltoall(self, sendbuf, recvbuf)

    def Neighbor_alltoallv(self, sendbuf, recvbuf):
        """The neighbourhood exchange with a count per neighbour (``Topocomm.Neighbor_alltoallv``)."""
        if not self._mNeighbor_alltoallv(sendbuf, recvbuf):
            neighbor.Neighbor_alltoallv(self, sendbuf, recvbuf)

    def Neighbor_alltoallw(self, sendbuf, recvbuf):
        """The neighbourhood exchange with a count, byte displacement and datatype per neighbour
        (mirrors ``Topocomm.Neighbor_alltoallw``)."""
        if not self._mNeighbor_alltoallw(sendbuf, recvbuf):
            neighbor.Neighbor_alltoallw(self, sendbuf, recvbuf)

    def Ineighbor_allgather(self, sendbuf, recvbuf):
        """Start :meth:`Neighbor_allgather`; return a :class:`dualmpi.Request`."""
        req = self._mIneighbor_allgather(sendbuf, recvbuf)
        if req is not None:  # (a repeat started in C: dualmpi.neighbor._ifast)
            return req
        return neighbor.Ineighbor_allgather(self, sendbuf, recvbuf)

    def Ineighbor_allgatherv(self, sendbuf, recvbuf):
        """Start :meth:`Neighbor_allgatherv`; return a :class:`dualmpi.Request`."""
        req = self._mIneighbor_allgatherv(sendbuf, recvbuf)
        if req is not None:  # (a repeat started in C: dualmpi.neighbor._ifast)
            return req
        return neighbor.Ineighbor_allgatherv(self, sendbuf, recvbuf)

    def Ineighbor_alltoall(self, sendbuf, recvbuf):
        """Start :meth:`Neighbor_alltoall`; return a :class:`dualmpi.Request`."""
        req = self._mIneighbor_alltoall(sendbuf, recvbuf)
        if req is not None:  # (a repeat started in C: dualmpi.neighbor._ifast)
            return req
        return neighbor.Ineighbor_alltoall(self, sendbuf, recvbuf)

    def Ineighbor_alltoallv(self, sendbuf, recvbuf):
        """Start :meth:`Neighbor_alltoallv`; return a :class:`dualmpi.Request`."""
        req = self._mIneighbor_alltoallv(sendbuf, recvbuf)
        if req is not None:  # (a repeat started in C: dualmpi.neighbor._ifast)
            return req
        return neighbor.Ineighbor_alltoallv(self, sendbuf, recvbuf)

    def Ineighbor_alltoallw(self, sendbuf, recvbuf):
        """Start :meth:`Neighbor_alltoallw`; return a :class:`dualmpi.Request`."""
        req = self._mIneighbor_alltoallw(sendbuf, recvbuf)
        if req is not None:  # (a repeat started in C: dualmpi.neighbor._ifast)
            return req
        return neighbor.Ineighbor_alltoallw(self, sendbuf, recvbuf)

    def neighbor_allgather(self, sendobj):
        """Return every neighbour's ``sendobj`` (mirrors ``Topocomm.neighbor_allgather``)."""
        return neighbor.neighbor_allgather(self, sendobj)

    def neighbor_alltoall(self, sendobj):
        """Item ``j`` of ``sendobj`` to neighbour ``j``; return one item per neighbour
        (mirrors ``Topocomm.neighbor_alltoall``)."""
        return neighbor.neighbor_alltoall(self, sendobj)

    def _progress(self):
        """Return the communicator's :class:`~dualmpi.engine.nonblocking.Progress`."""
        if self._nb is None:
            raise DualmpiError("the communicator was freed")
        return self._nb

    def _allreduce_algorithm(self, nbytes):
        """Return the allreduce algorithm for a vector of ``nbytes`` (chosen or as asked)."""
        asked = self.algorithms.get("allreduce")
        if asked not in (None, "default"):
            return asked
        from .collectives.allreduce import choose, costs

        if self._allreduce_costs is None:
            self._allreduce_costs = costs(self.topology, self.q)
        return choose(nbytes, self._allreduce_costs)

    # -- derived communicators: their traffic stays on the network (dualmpi.derived) ----------
    def Dup(self, info=None):
        """Return another :class:`Comm` of this network with these options (collective; its
        collectives keep the papers' schedules)."""
        return derived.dup_network(self)

    def Dup_with_info(self, info):
        """Duplicate (the info hints are not kept; see :meth:`Dup`)."""
        return derived.dup_network(self)

    def Clone(self):
        """Duplicate (see :meth:`Dup`)."""
        return derived.dup_network(self)

    def Split(self, color=0, key=0):
        """Split by ``color``, ranked by ``key``: a :class:`dualmpi.derived.Intracomm` whose
        messages cross this network's links (``MPI.UNDEFINED``: ``MPI.COMM_NULL``)."""
        return derived.Split(self, color, key)

    def Split_type(self, split_type, key=0, info=None):
        """Split by MPI's ``split_type`` (e.g. ``MPI.COMM_TYPE_SHARED``; see :meth:`Split`)."""
        return derived.Split_type(self, split_type, key, info)

    def Create(self, group):
        """The ranks of ``group`` on this network (collective; others get ``MPI.COMM_NULL``)."""
        return derived.Create(self, group)

    def Create_group(self, group, tag=0):
        """The ranks of ``group`` on this network (collective over ``group``)."""
        return derived.Create_group(self, group, tag)

    def Create_cart(self, dims, periods=None, reorder=False):
        """A Cartesian grid on this network (:class:`dualmpi.derived.Cartcomm`; a grid
        neighbour that is no network neighbour is reached by routing)."""
        return derived.Create_cart(self, dims, periods, reorder)

    def Create_graph(self, index, edges, reorder=False):
        """A graph on this network (:class:`dualmpi.derived.Graphcomm`)."""
        return derived.Create_graph(self, index, edges, reorder)

    def Create_dist_graph(self, sources, degrees, destinations, weights=None, info=None,
                          reorder=False):
        """A distributed graph on this network (:class:`dualmpi.derived.Distgraphcomm`)."""
        return derived.Create_dist_graph(self, sources, degrees, destinations, weights, info,
                                         reorder)

    def Create_dist_graph_adjacent(self, sources, destinations, sourceweights=None,
                                   destweights=None, info=None, reorder=False):
        """A distributed graph of each rank's neighbours on this network (see
        :meth:`Create_dist_graph`)."""
        return derived.Create_dist_graph_adjacent(self, sources, destinations, sourceweights,
                                                  destweights, info, reorder)

    def Cart_map(self, dims, periods=None):
        """MPI's rank of this rank in a Cartesian grid (local)."""
        return derived.Cart_map(self, dims, periods)

    def Graph_map(self, index, edges):
        """MPI's rank of this rank in a graph (local)."""
        return derived.Graph_map(self, index, edges)

    def Compare(self, comm):
        """Compare with another communicator (``MPI.IDENT``, ``CONGRUENT``, ``SIMILAR``,
        ``UNEQUAL``)."""
        return derived.Compare(self, comm)

    # -- statistics ----------------------------------------------------------------------------
    def stats(self):
        """Return what this rank's nodes sent since the last :meth:`reset_stats`.

        A dict: ``collectives`` (calls), ``messages`` and ``bytes`` (link messages and
        payload bytes leaving this rank's nodes, forwarded ones included),
        ``rounds`` and ``steps`` (the schedules' hop rounds and paper steps, summed
        over calls), ``step_bytes`` (per call, the sum over its schedule's steps of the
        step's largest message in bytes: a collective's model time is ``steps*t_s +
        step_bytes*t_w + rounds*t_h``, :mod:`dualmpi.model.steps`),
        ``checksum_failures`` (with ``verify``) and ``links``:
        ``{(u, v): (messages, bytes)}`` per directed link.  A nonblocking collective counts
        once it has completed, exactly as the blocking call does (a v-variant: two
        collectives, the all-gather of its counts and its data; three when its counts changed
        while its last plan ran speculatively, which sent its messages too; a speculative call
        sends its counts in its data's messages where the two share a link and a round, and
        ``messages`` counts those once: docs/performance.md).
        ``p2p_messages``,
        ``p2p_bytes`` and ``p2p_hops``: the point-to-point messages this rank sent (on this
        network and the communicators derived from it, neighbourhood collectives and
        synchronous sends' acknowledgements included; forwarded ones and messages to itself
        not), their payload bytes and their routes' links: their model time is
        ``p2p_messages*t_s + p2p_bytes*t_w + p2p_hops*t_h``.
        """
        links, total = {}, {"collectives": 0, "rounds": 0, "steps": 0, "step_bytes": 0,
                            "checksum_failures": 0}
        total["p2p_messages"], total["p2p_bytes"], total["p2p_hops"] = self._hub.sent_totals()
        if self._engine is not None:
            sent, counts = self._engine.sent()
            total.update(counts)
            links = {k: tuple(v) for k, v in sent.items()}
        # the nonblocking collectives that completed, counted as the blocking ones
        nb_links, nb_total = self._nb_tally.counts()
        for key, value in nb_total.items():
            total[key] += value
        for source in (nb_links, self._p2p):
            for key, (m, n) in source.items():
                m0, n0 = links.get(key, (0, 0))
                links[key] = (m0 + m, n0 + n)
        out = dict(total)
        base = self._baseline or {}
        for name in total:
            out[name] -= base.get(name, 0)
        blinks = base.get("links", {})
        out["links"] = {k: (m - blinks.get(k, (0, 0))[0], n - blinks.get(k, (0, 0))[1])
                        for k, (m, n) in links.items()
                        if (m, n) != blinks.get(k, (0, 0))}
        out["messages"] = sum(m for m, _ in out["links"].values())
        out["bytes"] = sum(n for _, n in out["links"].values())
        return out

    def reset_stats(self):
        """Start counting :meth:`stats` from zero."""
        self._baseline = None
        self._baseline = self.stats()  # the totals so far, per link too

    # -- for dualmpi's own clients (run, bench, soak) ---------------------------------------------
    def _control_allreduce(self, send, recv, op):
        """An ``Allreduce`` of control data (counts, times, verdicts) under the watchdog."""
        self._transport.allreduce(send, recv, op)

    def _control_barrier(self):
        """Synchronise the ranks in the control plane (timing loops), under the watchdog.

        Not :meth:`Barrier`, whose messages cross the links and count in :meth:`stats`.
        """
        self._transport.barrier()

    # -- internals -----------------------------------------------------------------------------
    def _store_bytes(self, collective, root, nbytes, itemsize=1, written=0, zero_copy=False):
        """Estimate the bytes this call makes resident on this rank.

        The runner's store (:meth:`Engine.store_bytes
        <dualmpi.engine.core.Engine.store_bytes>`; ``zero_copy``: of a runner bound to the
        call's buffers, see :meth:`_runner`) plus ``written``, the bytes of the
        user's receive buffer the call writes: a buffer from ``np.empty`` or ``np.zeros``
        has no pages until they are written (reading an untouched send buffer maps none).
        Constant time in the size of the network (the receive buffer's length, not a walk
        over its blocks: with MC(2,3) on 2 ranks that walk took minutes).
        """
        return self._engine.store_bytes(self.rank, collective, nbytes, root, self.variant,
                                        self.algorithms.get(collective), itemsize,
                                        zero_copy) + written

    def _remember(self, name, args, arrays, run, send, recv):
        """Remember a call, once its runner is final (see :meth:`_runner`), in ``self._m<name>``.

        The next call of ``name`` starts with ``self._m<name>(*args)``, which runs a
        remembered call again and returns True when it is made with the argument objects of
        one of the method's last :data:`REMEMBERED` calls: compared by identity (the
        remembered call holds references to them, so their ids cannot be reused), their arrays
        by dtype, shape and (receive buffers) writability; its own plan dropped from the engine's
        cache ends the memory.  A program that alternates between buffers (``a, b = b, a``)
        so repeats each call; the call is bound to its buffers (:meth:`MPIRunner.bind_call
        <dualmpi.engine.mpi.MPIRunner.bind_call>`: with the compiled loop, one C call) when
        it is first repeated.  A call whose runner copies through its store, made a second
        time with other numpy arrays of the same dtype, shape and strides (a slice ``a[i:j]``
        or an ``np.empty_like(x)`` made for every call) and the same other arguments, is
        remembered *by shape* instead (:meth:`_Remembered.by_shape`): every later call of
        that shape, on any such arrays apart from each other, runs the same bound call with
        the arrays' addresses written into its copies (``Recall.shape``).  The signature
        the ranks agreed on is the same, so no agreement is skipped that a call on the first
        arrays would have made.  Only the newest call holds buffers of more than
        :data:`REMEMBERED_BYTES` bytes before its first repeat (but for a runner bound to
        them, which holds them anyway), so a program that makes new large buffers for every
        call keeps no more of them alive than before.  Arrays in buffer specs made for every
        call (``[np.empty(n), MPI.DOUBLE]``) are remembered by shape alike: what a call has
        in common with another of its shape is :func:`dualmpi.calls.shape_template_of`'s
        template of it, as for the nonblocking methods.  The argument
        check was agreed on when the call was first made, as for every known signature (see
        :func:`dualmpi.calls.agree`).  With the compiled extension
        (:mod:`dualmpi.engine.recall`) the match is made in C too: ``self._m<name>`` is a
        ``Recall`` matcher, or a chain of them.
        """
        if getattr(run, "addresses", None) is not None:
            self._remember_at(name, args, arrays, run, send, recv)
            return
        old = self._recalls.get(name)
        entries = [e for e in old if e.lease.live and not e.holds(args)] if old else []
        if not self._settled:
            entry = self._remember_unsettled(name, args, arrays, run, send, recv)
            if entry is not None:
                entries = [entry] + [e for e in entries
                                     if not (e.by_shape_ and e.shape == entry.shape)]
        else:
            checks = tuple((a, a.dtype, a.shape, w) for a, w in arrays if type(a) is np.ndarray)
            plain = len(checks) == sum(1 for a, _ in arrays
                                       if a is not None and a is not self._IN_PLACE)
            # else a buffer spec (``[buf, MPI.DOUBLE]``, made anew for every call): compared by
            # value, its array by identity (no template: one that cannot be compared)
            template = calls.template_of(tuple(args))
            if plain or template is not None:
                entry = None
                shape = _shape_of(template, arrays)
                twin = None if shape is None else next(
                    (e for e in entries if e.shape == shape and e.run is run), None)
                if twin is not None:
                    # a second call of this shape on other arrays: from now on every call of
                    # it, on any arrays of that shape, repeats the plan bound once
                    entry = _Remembered.by_shape(self, name, tuple(args), run, send, recv,
                                                 shape)
                    if entry is not None:
                        entries.remove(twin)
                entries.insert(0, entry or _Remembered(self, name, tuple(args), checks, run,
                                                       send, recv, None if plain else template,
                                                       shape))
        if len(entries) == len(old or ()) and (not entries or entries[0] is old[0]):
            return  # the same calls remembered as before (``self._m<name>`` matches them)
        # older calls not repeated yet keep their buffers alive only when small (or when their
        # runner, bound to them, keeps them anyway)
        self._recalls[name] = [e for i, e in enumerate(entries) if i == 0 or e.bound or e.pins
                               or e.nbytes <= REMEMBERED_BYTES][:REMEMBERED]
        self._install_recalls(name)

    def _remember_unsettled(self, name, args, arrays, run, send, recv):
        """Return a call on new arrays remembered by shape, or None: a call whose plan could
        be bound to its buffers (:meth:`_runner`: pieces of
        :data:`dualmpi.calls.ZERO_COPY_ABOVE` bytes or more) but ran on copies, made the
        second time in a row on other arrays of its shape (``self._shaped``: the last such
        call's shape, runner and arrays, weakly).  The entry declines its calls' arrays
        (:meth:`_Remembered.by_shape`'s ``seen``): an array passed again reaches
        :meth:`_runner`, which binds a plan to it from its second call, as before.
        """
        if getattr(run, "transient", False) or hasattr(run, "pinned"):
            return None
        shape = _shape_of(calls.template_of(tuple(args)), arrays)
        if shape is None:
            return None
        here = _addresses(calls.shaped_arrays(shape, args))
        prev = self._shaped.get(name)
        if prev is None or prev[0] != shape or prev[1] is not run:
            self._shaped[name] = (shape, run, here)
            return None
        del self._shaped[name]
        return _Remembered.by_shape(self, name, tuple(args), run, send, recv, shape,
                                    seen=(prev[2], here))

    def _remember_at(self, name, args, arrays, run, send, recv):
        """Remember a call whose runner is bound to the memory at its arrays' addresses
        (``run.addresses``, :meth:`_runner`): the call remembered by shape on copies
        (``run.copying``, made now if there is none) runs ``run``'s bound call for arrays at
        those addresses (``at``: :meth:`_Remembered.by_shape`), the arrays held while it runs
        only.  A call with no shape template (:func:`_shape_of`) is not remembered."""
        shape = _shape_of(calls.template_of(tuple(args)), arrays)
        if shape is None:
            return
        entries = list(self._recalls.get(name, ()))
        entry = next((e for e in entries if e.by_shape_ and e.shape == shape and e.at is not None
                      and e.lease.live), None)
        if entry is None:
            entry = _Remembered.by_shape(self, name, tuple(args), run.copying, send, recv, shape,
                                         seen=(run.addresses,))
            if entry is None:
                return
            self._recalls[name] = [entry] + [e for e in entries if e.lease.live and not (
                e.by_shape_ and e.shape == shape)][:REMEMBERED - 1]
            self._install_recalls(name)
        if run.addresses not in entry.at:
            call = run.bind_addresses(send, recv)
            if call is None:
                return
            me = weakref.ref(self)

            def at(*arrays):
                # the arrays are held while the call runs (after a failure, until the runner
                # is freed: its receives may still write into them, MPIRunner.free)
                run.buffers = arrays
                call()
                run.buffers = None
                comm = me()
                if comm is not None:
                    comm._last_runner = run
            entry.at[run.addresses] = at
            run.registered.append(entry.at)

    def _release_at(self, n, last=False):
        """Release the ``n`` oldest runners bound at address sets (:meth:`_runner`), after
        taking their calls out of the matchers that run them; with ``last``, the ``n`` newest."""
        for _ in range(min(n, len(self._at))):
            _, run = self._at.popitem(last=last)
            for at in run.registered:
                at.pop(run.addresses, None)
            run.registered = []
            if self._engine is not None:
                self._engine.release(run)

    def _install_recalls(self, name):
        """Make ``self._m<name>`` match the remembered calls of ``name`` (:meth:`_remember`)."""
        matchers = tuple(e.matcher for e in self._recalls.get(name, ()))
        if not matchers:
            match = calls.no_match
        elif len(matchers) == 1:
            match = matchers[0]
        else:
            module = recall.load()
            match = module.Recall.chain(matchers) \
                if module is not None and isinstance(matchers[0], module.Recall) else \
                _chain(matchers)
        setattr(self, "_m" + name, match)

    @property
    def _last_runner(self):
        """The runner of the last blocking call, for dualmpi's own tools and tests (the blocks
        it delivered, its rounds, its floor); for a call that ran without one (:meth:`Engine.
        once <dualmpi.engine.core.Engine.once>`) the runner its repeat would make, made now."""
        run = self._last_run
        if isinstance(run, calls.Unmade):
            run = self._last_run = run.make()
        return run

    @_last_runner.setter
    def _last_runner(self, run):
        self._last_run = run

    def _runner(self, collective, root, nbytes, send=None, recv=None, objs=None, salt=0,
                itemsize=1, op=None):
        """Return the runner of a call: zero-copy when the same buffers come back.

        With one node per rank, no option that needs the store and pieces of at least
        :data:`dualmpi.calls.ZERO_COPY_ABOVE` bytes, a call with the same buffer objects
        ``objs`` as one of the last :data:`REMEMBERED` calls of the same kind (``self._last``:
        weak references, :func:`_sighting`; a program may alternate between buffers) gets a
        runner bound to their memory (no copy in or out; the runner keeps a reference to
        them, so their memory stays where it is while it is cached).  Buffers seen for the first time, when binding costs less
        than copying (``calls._worth_binding``: the rank moves at least
        :data:`dualmpi.calls.ZERO_COPY_FIRST` bytes), get a runner bound to
        them for that call only (``run.transient``: the caller releases it).  Arrays at the
        addresses of a recent call get a runner bound to that memory that holds no array
        between calls (:meth:`_at_addresses`).  Other calls copy through the store.  ``salt``, ``itemsize`` and ``op`` (a reduction's): see
        :meth:`Engine.runner <dualmpi.engine.core.Engine.runner>`.
        """
        engine = self._engine
        if engine is None:
            raise DualmpiError(f"{collective}: the communicator was freed")
        key = (collective, root, nbytes, salt, None if op is None else (op[0], itemsize))
        # settled: the same objects next time get the same runner (for _remember)
        self._settled = True
        if objs is not None and self._zero_copy and nbytes >= calls.ZERO_COPY_ABOVE:
            ids = (id(objs[0]), id(objs[1]))
            zkey = (key, ids)
            run = self._fast.get(zkey)
            if run is not None and not run.ended and run.pinned[0] is objs[0] and \
                    run.pinned[1] is objs[1]:
                self._last_runner = run
                return run
            self._settled = not calls._apart(self, collective, nbytes, root, send, recv,
                                             itemsize)
            recent = self._last.get(key, ())
            if not self._settled and any(_seen(e, objs, i == 0) for i, e in enumerate(recent)):
                run = self._kept_fast(zkey, engine.runner(
                    self.rank, collective, nbytes, root, self.variant,
                    self.algorithms.get(collective),
                    packets=None if self.packets == "auto" else self.packets,
                    buffers=(send, recv), salt=salt, itemsize=itemsize, op=op))
                run.pinned = objs
                self._last_runner = run
                self._settled = True
                return run
            self._last[key] = (_sighting(objs),) + tuple(
                e for i, e in enumerate(recent) if not _seen(e, objs, i == 0))[:REMEMBERED - 1]
            if not self._settled and calls._worth_binding(self, collective, nbytes, send,
                                                          recv):
                # new buffers, big enough that binding costs less than the copies: a runner
                # bound to them for this call alone (released after it, never remembered)
                run = engine.runner(
                    self.rank, collective, nbytes, root, self.variant,
                    self.algorithms.get(collective),
                    packets=None if self.packets == "auto" else self.packets,
                    buffers=(send, recv), salt=salt, cache=False, itemsize=itemsize, op=op)
                run.transient = True
                self._last_runner = run
                return run
            here = _addresses_of(objs)
            if not self._settled and here is not None:
                # new arrays at addresses a recent call had: a runner bound to that memory
                run = self._at_addresses(key, here, collective, nbytes, root, send, recv, salt,
                                         itemsize, op)
                if run is not None:
                    return run
        run = self._copying(key, collective, nbytes, root, salt, itemsize, op)
        self._last_runner = run
        return run

    def _copying(self, key, collective, nbytes, root, salt, itemsize, op):
        """Return the runner of ``key`` (:meth:`_runner`) that copies through its store."""
        run = self._fast.get(key)
        if run is None or run.ended:
            run = self._kept_fast(key, self._engine.runner(
                self.rank, collective, nbytes, root, self.variant, self.algorithms.get(collective),
                packets=None if self.packets == "auto" else self.packets, salt=salt,
                itemsize=itemsize, op=op))
        return run

    def _kept_fast(self, key, run):
        """Keep ``run`` in ``self._fast`` under ``key`` and return it; the runners the engine
        has dropped since (``ended``: :meth:`Engine.lease <dualmpi.engine.core.Engine.lease>`)
        are forgotten when there are more than ``4 * CACHE_SIZE``."""
        from .engine.core import CACHE_SIZE

        fast = self._fast
        if len(fast) >= 4 * CACHE_SIZE:
            for k in [k for k, r in fast.items() if r.ended]:
                del fast[k]
        fast[key] = run
        return run

    def _at_addresses(self, key, here, collective, nbytes, root, send, recv, salt, itemsize,
                      op):
        """Return the runner bound to the memory at the address set ``here`` (the data
        addresses of the call's arrays, :func:`_addresses_of`), or None.

        A call on new arrays at the addresses of one of the last :data:`REMEMBERED` calls of
        its kind in Python (``self._last_at``) or of the calls its matcher by shape made
        (which declined it: ``self._wanted``) -- new views of the same arrays (``a[i:j]`` with
        the same ``i`` and ``j``), a temporary made where the allocator put the last one
        (``np.empty_like(x)`` in the call) -- gets a runner bound to that memory, as one on the
        same arrays does (zero-copy), kept by the address set (``self._at``, the last
        :data:`AT_ADDRESSES`).  It holds no array between calls (``run.buffers`` None once
        the call is over): its persistent requests address memory it does not own, and run
        only in a call whose arrays are at those addresses, with their dtype, shape and
        strides (:meth:`_remember_at`: the matcher by shape's ``at``), so their memory is the
        call's own.  ``run.copying`` is the runner on copies of the same call.
        """
        recent = self._last_at.get(key, ())
        self._last_at[key] = (here,) + tuple(a for a in recent if a != here)[:REMEMBERED - 1]
        wanted = here in self._wanted
        if wanted:
            self._wanted.discard(here)
        elif len(self._wanted) > 4 * AT_ADDRESSES:
            self._wanted.clear()
        run = self._at.get((key, here))
        if run is not None and run.copying.ended:  # (its runner on copies left the engine)
            self._at.move_to_end((key, here))
            self._release_at(1, last=True)
            run = None
        if run is not None:
            self._at.move_to_end((key, here))
            run.buffers = (send, recv)
            self._settled = True
            self._last_runner = run
            return run
        if here not in recent and not wanted or AT_ADDRESSES < 1:
            return None
        run = self._engine.runner(
            self.rank, collective, nbytes, root, self.variant, self.algorithms.get(collective),
            packets=None if self.packets == "auto" else self.packets, buffers=(send, recv),
            salt=salt, cache=False, lend=False, itemsize=itemsize, op=op)
        if not getattr(run, "single", False) or not getattr(run, "absolute", False):
            self._engine.release(run)  # (not one C call: the copies stay)
            return None
        run.addresses, run.registered = here, []
        run.copying = self._copying(key, collective, nbytes, root, salt, itemsize, op)
        self._release_at(len(self._at) + 1 - AT_ADDRESSES)  # (the oldest make room)
        self._at[(key, here)] = run
        self._settled = True
        self._last_runner = run
        return run


def dispatched():
    """Return the public methods whose Python body first asks the instance's matcher
    ``_m<name>`` with its parameters in order (:func:`_methods_in_c`): the fixed-count
    collectives and ``Barrier``, every nonblocking one, the neighbourhood ones.  Not the
    blocking v-variants, whose matcher may have exchanged the count table when it declines
    (``VRecall`` returns None: the Python path goes on from that table)."""
    descs = [registry.get(n) for n in registry.names()]
    return (tuple(d.mpi for d in descs if d.mpi and d.counts == "fixed") + _FIXED_NONBLOCKING
            + _VECTOR_NONBLOCKING + neighbor.REMEMBERED + neighbor.IREMEMBERED)


def _methods_in_c(ext):
    """Make each :func:`dispatched` method of :class:`Comm` ``ext``'s ``Method`` (recall.c), once.

    Its call asks the matcher in C and calls the Python method only when that declines, so a
    repeated call makes no Python frame of dualmpi's (docs/performance.md, "The public method
    in C"); everything else about the method (its documentation, signature, the Python path)
    is the Python function's (``__wrapped__``)."""
    for name in dispatched():
        fallback = Comm.__dict__[name]
        if isinstance(fallback, ext.Method):
            continue
        setattr(Comm, name, ext.Method("_m" + name, fallback, name.startswith("I")))


def _matcher(held, checks, call, lease):
    """Return ``match(*args)``: run ``call`` and return True when ``args`` are ``held``.

    ``held`` are the remembered call's argument objects (compared by identity, up to 4),
    ``checks`` ``(array, dtype, shape, writable)`` of its arrays (at most 2), ``lease``
    the :class:`~dualmpi.engine.core.Lease` whose end ends the memory.
    """
    h0, h1, h2, h3 = tuple(held) + (None,) * (4 - len(held))
    if not checks:
        def match(a=None, b=None, c=None, d=None):
            if a is h0 and b is h1 and c is h2 and d is h3 and lease.live:
                call()
                return True
            return False
        return match
    x, dx, sx, wx = checks[0]
    if len(checks) == 1:
        def match(a, b=None, c=None, d=None):
            if a is h0 and b is h1 and c is h2 and d is h3 and lease.live and \
                    x.dtype is dx and x.shape == sx and (not wx or x.flags.writeable):
                call()
                return True
            return False
        return match
    y, dy, sy, wy = checks[1]

    def match(a, b=None, c=None, d=None):
        if a is h0 and b is h1 and c is h2 and d is h3 and lease.live and \
                x.dtype is dx and x.shape == sx and (not wx or x.flags.writeable) and \
                y.dtype is dy and y.shape == sy and (not wy or y.flags.writeable):
            call()
            return True
        return False
    return match


def _buffer_of(obj):
    """The array a buffer argument names: itself, or a buffer spec's first item."""
    if (type(obj) is list or type(obj) is tuple) and obj and type(obj[0]) is np.ndarray:
        return obj[0]
    return obj


def _addresses(arrays):
    """The data addresses of ``arrays`` (a tuple of ints)."""
    return tuple(a.ctypes.data for a in arrays)


def _addresses_of(objs):
    """The data addresses of the arrays buffer arguments ``objs`` name (:func:`_buffer_of`;
    None and ``MPI.IN_PLACE`` skipped), or None when one names something else or none does."""
    out = []
    for o in objs:
        if o is None:
            continue
        b = _buffer_of(o)
        if type(b) is np.ndarray:
            out.append(b.ctypes.data)
        elif not (b is _mpi().IN_PLACE):
            return None
    return tuple(out) or None


def _ref(obj):
    """A weak reference to the array ``obj`` names (:func:`_buffer_of`); None for None, and
    for ``MPI.IN_PLACE`` or ``MPI.BOTTOM`` (which live as long as mpi4py) a function returning
    it."""
    if obj is None:
        return None
    MPI = _mpi()
    if obj is MPI.IN_PLACE or obj is MPI.BOTTOM:
        return lambda: obj
    return weakref.ref(_buffer_of(obj))


def _sighting(objs):
    """What ``Comm._last`` keeps of a call's buffer arguments: weak references to their arrays
    (:func:`_ref`; a spec written anew for every call, ``[buf, MPI.DOUBLE]``, names the same
    array), so that it keeps no buffer alive and a new object with a dead one's id is not
    taken for it; objects that take none by their ids."""
    try:
        return True, tuple(_ref(o) for o in objs)
    except TypeError:
        return False, tuple(id(o) for o in objs)


def _seen(sighting, objs, newest):
    """True when ``objs`` name the arrays of ``sighting`` (:func:`_sighting`); one kept by ids
    only counts as the newest (an id is reused as soon as its object dies)."""
    weak, kept = sighting
    if not weak:
        return newest and kept == tuple(id(o) for o in objs)
    return all(o is None if r is None else r() is _buffer_of(o) for r, o in zip(kept, objs))


def _liker(template, call, lease):
    """Return ``match(*args)``: run ``call`` and return True when ``args`` are what
    ``template`` was made of (:func:`dualmpi.calls.same`) and ``lease`` (a
    :class:`~dualmpi.engine.core.Lease`) lives; ``Recall.like`` in Python."""

    def match(*args):
        if lease.live and calls.same(template, args):
            call()
            return True
        return False
    return match


def _shaper(shape, call, engine, epoch, patches, seen=None, at=None, wanted=None):
    """Return ``match(*args)``: ``Recall.shape`` in Python (:meth:`_Remembered.by_shape`).

    The arguments are what the template ``shape`` (:func:`dualmpi.calls.shape_template_of`)
    was made of: its arrays any numpy arrays of their dtype (by identity), shape and strides
    (writable when it says so), two of them apart, and ``engine.evictions == epoch``
    (``engine``: the call's :class:`~dualmpi.engine.core.Lease`).  Then
    each ``(slot, k, offset)`` of ``patches`` is written (the template's ``k``-th array's
    address plus ``offset``) and ``call`` runs.  With ``seen`` (tuples of data addresses) and
    ``at`` (a dict by them): arrays at addresses ``at`` has run ``at[addresses](*arrays)``
    instead, and a call at the addresses of one of its last :data:`SEEN` calls (``seen``'s
    first) is declined, its addresses added to the set ``wanted``.
    """
    import collections
    import ctypes

    ring = None if seen is None else collections.deque(seen, maxlen=SEEN)
    slots = [(ctypes.c_int64.from_address(int(slot)), int(k), int(off))
             for slot, k, off in patches]

    def match(*args):
        if not calls.same(shape, args):
            return False
        got = calls.shaped_arrays(shape, args)
        if len(got) == 2 and got[0].nbytes and got[1].nbytes:
            lo0, lo1 = got[0].ctypes.data, got[1].ctypes.data
            if lo0 < lo1 + got[1].nbytes and lo1 < lo0 + got[0].nbytes:
                return False
        if engine.evictions != epoch:
            return False
        if ring is not None:
            here = _addresses(got)
            bound = at.get(here)
            if bound is not None:
                bound(*got)
                return True
            if here in ring:
                wanted.add(here)
                return False
            ring.append(here)
        for slot, k, off in slots:
            slot.value = got[k].ctypes.data + off
        call()
        return True
    return match


def _chain(matchers):
    """Return ``match(*args)``: the first of ``matchers`` (see :func:`_matcher`) that matches."""
    def match(*args):
        for m in matchers:
            if m(*args):
                return True
        return False
    return match


def _shape_of(template, arrays):
    """Return what a call remembered by shape compares (:meth:`Comm._remember`): the template
    (:func:`dualmpi.calls.template_of`) of its arguments with their arrays compared by dtype,
    shape and strides (:func:`dualmpi.calls.shape_template_of`), receive buffers writable;
    ``arrays``: the buffer arguments and whether the call writes each.  None when there is no
    template or it has no such form (arrays not contiguous, sharing bytes, ...)."""
    if template is None:
        return None
    return calls.shape_template_of(template, tuple(bool(w) for _, w in arrays))


class _Remembered:
    """One remembered call of a method (:meth:`Comm._remember`).

    ``matcher`` compares a call's arguments with ``held`` (by identity; ``checks``: their
    arrays), or, given a ``template`` (:func:`dualmpi.calls.template_of`), with what it was
    made of, and runs the call: the first time through a function that binds the runner
    ``run`` to the buffers ``send`` and ``recv`` and runs that bound call from then on
    (``bound``).  ``shape`` (:func:`_shape_of`) is what a call of the same shape on other
    arrays has in common with it; an entry made :meth:`by_shape` matches every such call.
    """

    __slots__ = ("comm", "name", "held", "checks", "template", "lease", "nbytes", "pins",
                 "matcher", "bound", "run", "shape", "by_shape_", "at", "__weakref__")

    def __init__(self, comm, name, held, checks, run, send, recv, template=None, shape=None):
        self.comm, self.name, self.held, self.checks = comm, name, held, checks
        self.template, self.run, self.shape, self.by_shape_ = template, run, shape, False
        self.at = None
        #: ends when the engine drops the runner (:meth:`Engine.lease
        #: <dualmpi.engine.core.Engine.lease>`), and with it the memory of the call
        self.lease = comm._engine.lease(run)
        self.nbytes = sum(b.nbytes for b in (send, recv) if b is not None)
        #: the runner is bound to the buffers' memory (zero-copy): it holds them already
        self.pins = hasattr(run, "pinned")
        bind = getattr(run, "bind_call", None)
        self.bound = bind is None
        if bind is None:
            self.matcher = self._match(lambda: run.run(send, recv))
            return

        me = weakref.ref(self)  # (the C matcher is not garbage-collected: no cycle through it)

        def first():
            # the call repeats: bind it now and match the bound call from the next call on
            call = bind(send, recv)
            entry = me()
            if entry is not None:
                entry.bound = True
                entry.matcher = entry._match(call)
                if entry in entry.comm._recalls.get(entry.name, ()):
                    entry.comm._install_recalls(entry.name)
            call()
        self.matcher = self._match(first)

    @classmethod
    def by_shape(cls, comm, name, args, run, send, recv, shape, seen=None):
        """Return the call remembered by shape: ``run`` bound to ``send`` and ``recv`` (byte
        buffers in the arrays of ``args``) once, matched for any arguments the template
        ``shape`` (:func:`_shape_of`) was made of, their arrays' addresses written into the
        bound call's copies before it runs; None when the runner cannot be bound so
        (:meth:`MPIRunner.bind_shape <dualmpi.engine.mpi.MPIRunner.bind_shape>`).

        It holds none of the arrays: each call's own are the ones it copies from and to.
        ``seen`` (tuples of the arrays' data addresses, or None): it declines calls at the
        addresses of its last :data:`SEEN` calls (``seen``'s first), which reach the Python
        path and so a runner bound to that memory (:meth:`Comm._runner`), whose call it then
        runs for arrays at those addresses (``at``, a dict by address tuple that
        :meth:`Comm._remember_at` fills).
        """
        bind = getattr(run, "bind_shape", None)
        if bind is None or hasattr(run, "pinned") or getattr(run, "transient", False):
            return None
        bound = bind(send, recv, calls.shaped_arrays(shape, args))
        if bound is None:
            return None
        call, patches = bound
        self = cls.__new__(cls)
        self.comm, self.name, self.held, self.checks = comm, name, (), ()
        self.template, self.run, self.shape, self.by_shape_ = None, run, shape, True
        self.lease = comm._engine.lease(run)
        self.nbytes, self.pins, self.bound = 0, False, True
        module = recall.load()
        seen = None if seen is None else tuple(seen)[-SEEN:]
        self.at = None if seen is None else {}
        more = () if seen is None else (seen, self.at, comm._wanted)
        if module is not None:
            self.matcher = module.Recall.shape(call, shape, self.lease, 0, patches, *more)
        else:
            self.matcher = _shaper(shape, call, self.lease, 0, patches, *more)
        return self

    def _match(self, call):
        module = recall.load()
        held, lease = self.held, self.lease
        if self.template is not None:
            if module is not None:
                return module.Recall.like(call, self.template, lease, 0)
            return _liker(self.template, call, lease)
        if module is not None:
            return module.Recall.match(call, held, self.checks, lease, 0)
        return _matcher(held, self.checks, call, lease)

    def holds(self, args):
        """True when ``args`` are this call's argument objects (or, with a template, what it
        was made of; remembered by shape, of its shape)."""
        if self.by_shape_:
            return calls.same(self.shape, tuple(args))
        if self.template is not None:
            return calls.same(self.template, tuple(args))
        return len(args) == len(self.held) and all(a is b for a, b in zip(args, self.held))


def _nodes_per_rank(topo, size, q):
    """Return the nodes each rank plays, or raise :class:`RankCountError` (every rank alike)."""
    p = topo.num_nodes
    if size > p:
        raise RankCountError(
            f"{topo.spec} has {p} nodes but the job has {size} ranks; run it with "
            f"mpiexec -n {p} (one node per rank) or a divisor of {p}")
    if q is None:
        if p % size:
            raise RankCountError(
                f"{topo.spec} has {p} nodes, which cannot be spread evenly over {size} ranks; "
                f"use a rank count that divides {p}")
        return p // size
    if isinstance(q, bool) or not isinstance(q, (int, np.integer)) or q < 1:
        raise RankCountError(f"nodes_per_rank must be at least 1, got {q!r}")
    if q * size != p:
        hint = (f"{p // q} rank" + "s" * (p // q > 1)) if p % q == 0 else \
            f"a divisor of {p} ranks"
        raise RankCountError(f"{topo.spec} has {p} nodes, but {size} ranks with {q} nodes each "
                             f"play {q * size}; run {hint}")
    return int(q)


def _variant(variant):
    """Validate the ``variant`` option."""
    if variant not in ("corrected", "as-printed"):
        raise InputError(f"bad variant {variant!r}: 'corrected' or 'as-printed'")
    return variant


def _algorithms(topo, algorithms):
    """Validate the ``algorithms`` option (every rank alike, before any communication)."""
    out = dict(algorithms or {})
    for coll, name in out.items():
        if coll not in ("bcast", "scatter", "allgather", "alltoall", "allreduce"):
            raise InputError(f"bad algorithms key {coll!r}: bcast, scatter, allgather, alltoall "
                             "or allreduce")
        if name in (None, "default"):
            continue
        if coll == "allreduce":
            from .collectives.allreduce import available

            if name not in available(topo):
                raise InputError(f"no allreduce algorithm {name!r} on {topo.spec} (choose from "
                                 f"{', '.join(available(topo))})")
            continue
        if coll != "allgather" or name != "ring":
            raise InputError(f"no algorithm {name!r} for {coll} (allgather has 'ring')")
        from .collectives.ring import default_cycle
        from .errors import DualmpiError as _Error

        try:
            default_cycle(topo)
        except _Error as exc:
            raise InputError(str(exc)) from None
    return out


def _shape(shape):
    """Return ``(ts, tw, th)`` from a tuple or ``ts=..,tw=..,th=..`` text, or None."""
    if shape is None:
        return None
    if isinstance(shape, str):
        from .model.clock import parse_shape

        try:
            d = parse_shape(shape)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        return (d["ts"], d["tw"], d["th"])
    if hasattr(shape, "ts"):
        return (shape.ts, shape.tw, shape.th)
    ts, tw, th = (float(x) for x in shape)
    return (ts, tw, th)


def _packets(packets):
    """Validate the ``packets`` option."""
    if packets == "auto":
        return packets
    if isinstance(packets, bool) or not isinstance(packets, (int, np.integer)) or \
            not 1 <= packets <= 1024:
        raise InputError(f"bad packets {packets!r}: 'auto' or 1..1024")
    return int(packets)
