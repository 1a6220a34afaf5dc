"""Communicators derived from a network (``Split``, ``Create_cart``, ...) whose traffic stays on its links.

``net.Split(color, key)``, ``Split_type``, ``Create``, ``Create_group``, ``Create_cart``,
``Create_graph``, ``Create_dist_graph(_adjacent)`` of a :class:`dualmpi.Comm` -- and the same
calls, ``Dup`` and ``Sub`` of what they return -- give an :class:`Intracomm` (a
:class:`Cartcomm`, :class:`Graphcomm` or :class:`Distgraphcomm` for the topologies) with the
names, arguments and answers of mpi4py's classes.  Its ranks are some of the network's, in
the order MPI gives them (MPI makes its twin, :attr:`Intracomm.comm`: the same members,
ranks, groups and topology queries; ranks are never reordered).  Its messages travel the
network as the network's own point-to-point does (:mod:`dualmpi.engine.router`): one hop
on a link between network neighbours, otherwise routed, the ranks on the route -- members
or not -- forwarding, every hop counted in the network's :meth:`dualmpi.Comm.stats`.

*Contexts.*  Each communicator has two context ids on the network's router, agreed by its
ranks when it is made (the largest next free id of any of them): one for its
point-to-point, one for its collectives, so a message matches receives of its own
communicator and kind only, as with MPI's contexts.  The routed header carries the id;
one-hop messages travel on MPI communicators of the members (the twin for collectives, a
duplicate of it for point-to-point).

*Ranks.*  ``ranks[i]`` is the network rank of rank ``i``; the router translates sources
and destinations both ways (a status reports ranks of this communicator).

*Collectives* run MPI's algorithms over this point-to-point
(:mod:`dualmpi.collectives_p2p` names them: binomial trees, recursive doubling, rings,
pairwise exchange, dissemination); the object forms pickle and call those; the nonblocking
forms run them in a worker thread (:class:`dualmpi.collectives_p2p.Worker`).  ``Dup`` of the
network itself is another :class:`dualmpi.Comm` (:func:`dup_network`), whose collectives
keep the papers' schedules.  ``Free`` is collective: it returns once every routed message of
the communicator has arrived; receives posted before it still complete.  A communicator
lives on its network: freeing the network frees it.
"""

from . import collectives_p2p as coll
from . import objects, p2p
from .errors import DualmpiError, mpi_error
from .support import unsupported

__all__ = ["Intracomm", "Cartcomm", "Graphcomm", "Distgraphcomm", "dup_network", "Split",
           "Split_type", "Create", "Create_group", "Create_cart", "Create_graph",
           "Create_dist_graph", "Create_dist_graph_adjacent", "Cart_map", "Graph_map",
           "Compare"]

#: Persistent neighbourhood collectives, which a derived communicator does not carry (why).
_PERSISTENT = ("MPI-4 persistent collectives are not carried (call the blocking or "
               "nonblocking one)")
_PERSISTENT_NAMES = frozenset(
    "Neighbor_allgather_init Neighbor_allgatherv_init Neighbor_alltoall_init "
    "Neighbor_alltoallv_init Neighbor_alltoallw_init".split())


def _mpi():
    from mpi4py import MPI

    return MPI


# -- making communicators ------------------------------------------------------------------------
def _parts(parent, what):
    """Return ``(network, MPI communicator of the parent's ranks in its order)``."""
    if isinstance(parent, Intracomm):
        parent._live(what)
        return parent.net, parent.comm
    if getattr(parent, "_router", None) is None:
        raise DualmpiError(f"{what}: the communicator was freed")
    return parent, parent._transport.ctl


def _plain(comm):
    """Return ``(comm, False)``, or a duplicate without MPI topology and True (Open MPI 5.0
    reports a distributed graph made from a Cartesian communicator as Cartesian: ompi #14438)."""
    MPI = _mpi()
    if comm.Get_topology() == MPI.UNDEFINED:
        return comm, False
    return comm.Split(0, comm.Get_rank()), True


def _derive(parent, what, make, cls):
    """Make a communicator: ``make(base)`` (collective MPI call on the parent's twin) gives the
    new twin or ``MPI.COMM_NULL``; return the :class:`Intracomm` (``cls``) or ``COMM_NULL``."""
    MPI = _mpi()
    net, base = _parts(parent, what)
    wd = net._transport.watchdog
    wd.arm(f"{what} (making the communicator: has every rank of it called {what}?)", ())
    try:
        new = make(base)
    finally:
        wd.disarm()
    if new == MPI.COMM_NULL:
        return MPI.COMM_NULL
    group, world = new.Get_group(), net._transport.ctl.Get_group()
    ranks = MPI.Group.Translate_ranks(group, list(range(group.Get_size())), world)
    group.Free()
    world.Free()
    ctx = net._router.hub.agree_context(
        lambda a, b: coll.control(net, new, "Allreduce", (a, b, MPI.MAX), f"{what} (its contexts)"),
        2)
    wd.arm(f"{what} (duplicating the new communicator)", ())
    try:
        direct, nbctl = new.Dup(), new.Dup()
    finally:
        wd.disarm()
    obj = cls.__new__(cls)
    obj._setup(net, new, ranks, ctx, direct, nbctl)
    return obj


def _topo(make):
    """``make(plain)`` on a topology-free twin of the base (see :func:`_plain`)."""
    def run(base):
        plain, temporary = _plain(base)
        try:
            return make(plain)
        finally:
            if temporary:
                plain.Free()
    return run


def _info(info):
    MPI = _mpi()
    return MPI.INFO_NULL if info is None else info


def dup_network(net):
    """Return another :class:`dualmpi.Comm` of ``net``'s network with ``net``'s options
    (``dualmpi.Comm.Dup``: collective; its collectives keep the papers' schedules)."""
    from .comm import Comm

    if net._engine is None:
        raise DualmpiError("Dup: the communicator was freed")
    return Comm(net.comm, net.topology, net.q, watchdog=net._transport.watchdog.deadline,
                verify=net.options["verify"], shape=net.options["shape"], packets=net.packets,
                variant=net.variant, algorithms=dict(net.algorithms), drop=net.options["drop"],
                stream=net._engine.stream)


def Split(parent, color=0, key=0):
    """Split by ``color``, ranked by ``key`` (``Comm.Split``; ``MPI.UNDEFINED``: ``COMM_NULL``)."""
    return _derive(parent, "Split", lambda base: base.Split(color, key), Intracomm)


def Split_type(parent, split_type, key=0, info=None):
    """Split by MPI's ``split_type`` (``COMM_TYPE_SHARED``: ranks of one host)."""
    return _derive(parent, "Split_type",
                   lambda base: base.Split_type(split_type, key, _info(info)), Intracomm)


def Create(parent, group):
    """The ranks of ``group`` (collective over the parent; others get ``COMM_NULL``)."""
    return _derive(parent, "Create", lambda base: base.Create(group), Intracomm)


def Create_group(parent, group, tag=0):
    """The ranks of ``group`` (collective over ``group`` only)."""
    return _derive(parent, "Create_group", lambda base: base.Create_group(group, tag),
                   Intracomm)


def Create_cart(parent, dims, periods=None, reorder=False):
    """A Cartesian grid of the first ``prod(dims)`` ranks (``reorder`` is not done: MPI
    allows it, and a rank stays where its nodes are)."""
    return _derive(parent, "Create_cart",
                   _topo(lambda base: base.Create_cart(dims, periods, False)), Cartcomm)


def Create_graph(parent, index, edges, reorder=False):
    """A graph of the first ``len(index)`` ranks (``Comm.Create_graph``; no reordering)."""
    return _derive(parent, "Create_graph",
                   _topo(lambda base: base.Create_graph(index, edges, False)), Graphcomm)


def Create_dist_graph(parent, sources, degrees, destinations, weights=None, info=None,
                      reorder=False):
    """A distributed graph from edges any rank names (``Comm.Create_dist_graph``)."""
    MPI = _mpi()
    w = MPI.UNWEIGHTED if weights is None else weights
    return _derive(parent, "Create_dist_graph", _topo(
        lambda base: base.Create_dist_graph(sources, degrees, destinations, w, _info(info),
                                            False)), Distgraphcomm)


def Create_dist_graph_adjacent(parent, sources, destinations, sourceweights=None,
                               destweights=None, info=None, reorder=False):
    """A distributed graph from each rank's own neighbours (``Create_dist_graph_adjacent``)."""
    MPI = _mpi()
    sw = MPI.UNWEIGHTED if sourceweights is None else sourceweights
    dw = MPI.UNWEIGHTED if destweights is None else destweights
    return _derive(parent, "Create_dist_graph_adjacent", _topo(
        lambda base: base.Create_dist_graph_adjacent(sources, destinations, sw, dw, _info(info),
                                                     False)), Distgraphcomm)


def Cart_map(parent, dims, periods=None):
    """This rank's rank in a Cartesian grid (local; MPI's answer: no reordering here)."""
    return _parts(parent, "Cart_map")[1].Cart_map(dims, periods)


def Graph_map(parent, index, edges):
    """This rank's rank in a graph (local; MPI's answer)."""
    return _parts(parent, "Graph_map")[1].Graph_map(index, edges)


def Compare(a, b):
    """MPI's comparison of two communicators: ``IDENT`` (the same one), ``CONGRUENT`` (the same
    ranks in the same order), ``SIMILAR`` (the same ranks), else ``UNEQUAL``."""
    MPI = _mpi()
    if a is b:
        return MPI.IDENT
    ga, gb = a.Get_group(), b.Get_group()
    try:
        result = MPI.Group.Compare(ga, gb)
    finally:
        ga.Free()
        gb.Free()
    return MPI.CONGRUENT if result == MPI.IDENT else result


# -- the communicator ------------------------------------------------------------------------------
class Intracomm(p2p.PointToPoint):
    """A communicator of some of a network's ranks whose traffic crosses the network's links.

    Made by the derivation methods of :class:`dualmpi.Comm` and of this class (never
    directly); mirrors :class:`mpi4py.MPI.Intracomm`.

    Attributes
    ----------
    net : dualmpi.Comm
        The network it lives on (:meth:`stats` are its counts).
    comm : mpi4py.MPI.Intracomm
        Its MPI twin: the same ranks (answers ``Get_group``, ``Get_attr``, topology queries;
        carries the control plane and one-hop collective messages).
    ranks : tuple of int
        The network rank of each rank.
    rank, size : int
    """

    def _setup(self, net, comm, ranks, ctx, direct, nbctl):
        self.net, self.comm = net, comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.ranks = tuple(int(r) for r in ranks)
        base = net._router
        #: point-to-point (dualmpi.p2p) and the collectives' messages: two contexts
        self._router = base.derive(ctx, self.ranks, direct)
        p2p.start_lane(self)
        self._coll = base.derive(ctx + 1, self.ranks, comm)
        self.context = ctx
        self._tag = 0
        self._tag_ub = min(self._coll.tag_ub, 1 << 30)
        self._name = ""
        #: the nonblocking collectives' control communicator and worker (made on first use)
        self._nbctl, self._worker = nbctl, None

    def __repr__(self):
        state = "freed" if self._coll is None else f"rank {self.rank} of {self.size}"
        return f"<dualmpi.derived.{type(self).__name__} on {self.net.topology.spec}, {state}>"

    def __bool__(self):
        return self._coll is not None

    def __eq__(self, other):
        if self is other:
            return True
        MPI = _mpi()
        if self._coll is None and isinstance(other, MPI.Comm):
            return other == MPI.COMM_NULL
        return False

    def __ne__(self, other):
        return not self == other

    __hash__ = object.__hash__

    def __getattr__(self, name):
        """A method of ``MPI.Intracomm`` a derived communicator does not carry: say so, and why."""
        if name in _PERSISTENT_NAMES:
            from .support import UnsupportedError

            raise UnsupportedError(f"{type(self).__name__}.{name} of a derived communicator is "
                                   f"not supported: {_PERSISTENT}")
        err = unsupported(name, owner=f"{type(self).__name__} (a derived communicator)")
        if err is not None:
            raise err
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- internals -------------------------------------------------------------------------------
    def _live(self, what):
        if self._coll is None:
            raise DualmpiError(f"{what}: the communicator was freed")
        if self.net._router is None:
            raise DualmpiError(f"{what}: the communicator's network was freed")

    def _control(self, name, *args, what):
        """Run control-plane MPI collective ``name`` on the twin (see :func:`control`)."""
        self._live(what)
        return coll.control(self.net, self.comm, name, args, what)

    def _next_tag(self, span=1):
        """Return the first of ``span`` tags of the next blocking collective call (every rank
        counts its calls alike, as MPI requires; the lower half of the tags, the nonblocking
        ones have the upper half)."""
        t = self._tag
        if t + span >= self._tag_ub // 2:
            t = 0
        self._tag = t + span
        return t

    def _start(self, method, run):
        """Start a nonblocking collective: ``run(comm)`` in the worker; return its request."""
        MPI = _mpi()
        self._live(method)
        if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            from .support import UnsupportedError

            raise UnsupportedError(f"{type(self).__name__}.{method} of a derived communicator "
                                   "needs MPI_THREAD_MULTIPLE (its worker thread calls MPI)")
        if self._worker is None:
            self._worker = coll.Worker(self)
        return self._worker.submit(method, run)

    # -- queries (no data move) -----------------------------------------------------------------
    def Get_rank(self):
        """Return this rank."""
        return self.rank

    def Get_size(self):
        """Return the number of ranks."""
        return self.size

    def Get_group(self):
        """Return the group of the ranks (as MPI's: the processes of the job)."""
        self._live("Get_group")
        return self.comm.Get_group()

    group = property(Get_group, doc="The group of the ranks.")

    def Get_topology(self):
        """Return ``MPI.UNDEFINED`` (no process topology; ``CART``/``GRAPH``/``DIST_GRAPH``
        for the topology communicators)."""
        return _mpi().UNDEFINED

    topology = property(lambda self: self.Get_topology(), doc="The kind of topology (MPI's).")
    is_topo = property(lambda self: self.Get_topology() != _mpi().UNDEFINED,
                       doc="True for a Cartesian or graph communicator.")

    def Is_inter(self):
        """Return False (an intracommunicator)."""
        return False

    def Is_intra(self):
        """Return True."""
        return True

    is_inter = property(Is_inter, doc="False: an intracommunicator.")
    is_intra = property(Is_intra, doc="True: an intracommunicator.")

    def Get_name(self):
        """Return the communicator's name."""
        return self._name

    def Set_name(self, name):
        """Name the communicator (local)."""
        self._name = str(name)

    name = property(Get_name, Set_name, doc="The communicator's name.")

    def Get_attr(self, keyval):
        """Return an attribute of the twin, e.g. ``MPI.TAG_UB`` (local)."""
        self._live("Get_attr")
        return self.comm.Get_attr(keyval)

    def Get_info(self):
        """Return the twin's info hints (local)."""
        self._live("Get_info")
        return self.comm.Get_info()

    info = property(Get_info, doc="The info hints.")

    def Abort(self, errorcode=0):
        """Abort every rank of the job."""
        self.net.comm.Abort(errorcode)

    def Compare(self, comm):
        """Compare with another communicator (``MPI.IDENT``, ``CONGRUENT``, ``SIMILAR``,
        ``UNEQUAL``)."""
        return Compare(self, comm)

    def stats(self):
        """Return the network's counts (:meth:`dualmpi.Comm.stats`): every communicator on
        it, this one's messages included."""
        return self.net.stats()

    # -- derived communicators ------------------------------------------------------------------
    def Dup(self, info=None):
        """Duplicate: the same ranks, new contexts (collective)."""
        return _derive(self, "Dup", lambda base: base.Dup() if info is None else
                       base.Dup_with_info(info), type(self))

    def Dup_with_info(self, info):
        """Duplicate with info hints (see :meth:`Dup`)."""
        return self.Dup(info)

    def Clone(self):
        """Duplicate (see :meth:`Dup`)."""
        return self.Dup()

    def Split(self, color=0, key=0):
        """Split by ``color``, ranked by ``key`` (``MPI.UNDEFINED``: ``MPI.COMM_NULL``)."""
        return Split(self, color, key)

    def Split_type(self, split_type, key=0, info=None):
        """Split by MPI's ``split_type`` (e.g. ``MPI.COMM_TYPE_SHARED``)."""
        return Split_type(self, split_type, key, info)

    def Create(self, group):
        """The ranks of ``group`` (collective; others get ``MPI.COMM_NULL``)."""
        return Create(self, group)

    def Create_group(self, group, tag=0):
        """The ranks of ``group`` (collective over ``group``)."""
        return Create_group(self, group, tag)

    def Create_cart(self, dims, periods=None, reorder=False):
        """A Cartesian grid (:class:`Cartcomm`; ranks are not reordered)."""
        return Create_cart(self, dims, periods, reorder)

    def Create_graph(self, index, edges, reorder=False):
        """A graph (:class:`Graphcomm`)."""
        return Create_graph(self, index, edges, reorder)

    def Create_dist_graph(self, sources, degrees, destinations, weights=None, info=None,
                          reorder=False):
        """A distributed graph (:class:`Distgraphcomm`)."""
        return Create_dist_graph(self, sources, degrees, destinations, weights, info, reorder)

    def Create_dist_graph_adjacent(self, sources, destinations, sourceweights=None,
                                   destweights=None, info=None, reorder=False):
        """A distributed graph of each rank's neighbours (:class:`Distgraphcomm`)."""
        return Create_dist_graph_adjacent(self, sources, destinations, sourceweights,
                                          destweights, info, reorder)

    def Cart_map(self, dims, periods=None):
        """MPI's rank of this rank in a Cartesian grid (local)."""
        return Cart_map(self, dims, periods)

    def Graph_map(self, index, edges):
        """MPI's rank of this rank in a graph (local)."""
        return Graph_map(self, index, edges)

    def Free(self):
        """Free the communicator (collective): once every routed message of it has arrived;
        receives posted before still complete, messages no receive took are dropped."""
        MPI = _mpi()
        if self._coll is None:
            raise mpi_error("Free: the communicator was freed already", "ERR_COMM",
                            DualmpiError)
        if self._worker is not None:  # its nonblocking collectives run to their end first
            self._worker.close()
            self._worker = None
        p2p.stop_lane(self)
        routers, self._router, self._coll = (self._router, self._coll), None, None
        comm, self.comm = self.comm, None
        nbctl, self._nbctl = self._nbctl, None
        if self.net._router is None:  # the network went first, and its communicators with it
            return
        net = self.net

        def total(send, recv, what):
            coll.control(net, comm, "Allreduce", (send, recv, MPI.SUM), f"{what} (Free)")

        for router in routers:  # the collectives' last: their direct channel is the twin
            router.release(total)
        nbctl.Free()

    def free(self):
        """Free the communicator (see :meth:`Free`)."""
        self.Free()

    # -- collectives (dualmpi.collectives_p2p: MPI's algorithms over the routed messages) --------
    def Barrier(self):
        """Synchronise the ranks (dissemination)."""
        self._live("Barrier")
        coll.Barrier(self)

    def Bcast(self, buf, root=0):
        """Broadcast ``buf`` from ``root`` (binomial tree)."""
        coll.Bcast(self, buf, root)

    def Scatter(self, sendbuf, recvbuf, root=0):
        """Scatter ``root``'s pieces (binomial tree)."""
        coll.Scatter(self, sendbuf, recvbuf, root)

    def Scatterv(self, sendbuf, recvbuf, root=0):
        """Scatter pieces of one size per rank (binomial tree)."""
        coll.Scatterv(self, sendbuf, recvbuf, root)

    def Gather(self, sendbuf, recvbuf, root=0):
        """Gather every piece at ``root`` (binomial tree)."""
        coll.Gather(self, sendbuf, recvbuf, root)

    def Gatherv(self, sendbuf, recvbuf, root=0):
        """Gather pieces of one size per rank (binomial tree)."""
        coll.Gatherv(self, sendbuf, recvbuf, root)

    def Allgather(self, sendbuf, recvbuf):
        """Gather every piece at every rank (recursive doubling or ring)."""
        coll.Allgather(self, sendbuf, recvbuf)

    def Allgatherv(self, sendbuf, recvbuf):
        """Allgather with one size per rank (ring)."""
        coll.Allgatherv(self, sendbuf, recvbuf)

    def Alltoall(self, sendbuf, recvbuf):
        """The total exchange (pairwise exchange)."""
        coll.Alltoall(self, sendbuf, recvbuf)

    def Alltoallv(self, sendbuf, recvbuf):
        """The total exchange with a count per pair (pairwise exchange)."""
        coll.Alltoallv(self, sendbuf, recvbuf)

    def Alltoallw(self, sendbuf, recvbuf):
        """The total exchange with a datatype per pair (pairwise exchange)."""
        coll.Alltoallw(self, sendbuf, recvbuf)

    def Reduce(self, sendbuf, recvbuf, op=None, root=0):
        """Reduce at ``root`` (binomial tree)."""
        coll.Reduce(self, sendbuf, recvbuf, op, root)

    def Allreduce(self, sendbuf, recvbuf, op=None):
        """Reduce at every rank (recursive doubling; ring for long vectors)."""
        coll.Allreduce(self, sendbuf, recvbuf, op)

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=None):
        """Reduce, then block ``r`` to rank ``r`` (ring)."""
        coll.Reduce_scatter_block(self, sendbuf, recvbuf, op)

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=None):
        """Reduce, then ``recvcounts[r]`` elements to rank ``r`` (ring)."""
        coll.Reduce_scatter(self, sendbuf, recvbuf, recvcounts, op)

    def Scan(self, sendbuf, recvbuf, op=None):
        """Inclusive prefix reduction (recursive doubling)."""
        coll.Scan(self, sendbuf, recvbuf, op)

    def Exscan(self, sendbuf, recvbuf, op=None):
        """Exclusive prefix reduction (recursive doubling; rank 0's ``recvbuf`` untouched)."""
        coll.Exscan(self, sendbuf, recvbuf, op)

    # -- object collectives (pickled, then the buffer ones: dualmpi.objects) --------------------
    def barrier(self):
        """Synchronise the ranks."""
        return objects.barrier(self)

    def bcast(self, obj, root=0):
        """Broadcast a Python object."""
        return objects.bcast(self, obj, root)

    def scatter(self, sendobj, root=0):
        """Scatter a sequence of ``size`` objects from ``root``."""
        return objects.scatter(self, sendobj, root)

    def gather(self, sendobj, root=0):
        """Gather an object from every rank at ``root``."""
        return objects.gather(self, sendobj, root)

    def allgather(self, sendobj):
        """Gather an object from every rank at every rank."""
        return objects.allgather(self, sendobj)

    def alltoall(self, sendobj):
        """Object ``j`` of ``sendobj`` to rank ``j``."""
        return objects.alltoall(self, sendobj)

    def reduce(self, sendobj, op=None, root=0):
        """Reduce objects with ``op`` at ``root``."""
        return objects.reduce(self, sendobj, op, root)

    def allreduce(self, sendobj, op=None):
        """Reduce objects with ``op`` at every rank."""
        return objects.allreduce(self, sendobj, op)

    def scan(self, sendobj, op=None):
        """Inclusive prefix reduction of objects."""
        return objects.scan(self, sendobj, op)

    def exscan(self, sendobj, op=None):
        """Exclusive prefix reduction of objects (None on rank 0)."""
        return objects.exscan(self, sendobj, op)


    # -- nonblocking collectives (the blocking algorithms, run by a worker thread) ---------------
    def Ibarrier(self):
        """Start a barrier; return an ``MPI.Request``."""
        return self._start("Ibarrier", coll.Barrier)

    def Ibcast(self, buf, root=0):
        """Start a broadcast."""
        return self._start("Ibcast", lambda c: coll.Bcast(c, buf, root))

    def Iscatter(self, sendbuf, recvbuf, root=0):
        """Start a scatter."""
        return self._start("Iscatter", lambda c: coll.Scatter(c, sendbuf, recvbuf, root))

    def Iscatterv(self, sendbuf, recvbuf, root=0):
        """Start a scatter of one size per rank."""
        return self._start("Iscatterv", lambda c: coll.Scatterv(c, sendbuf, recvbuf, root))

    def Igather(self, sendbuf, recvbuf, root=0):
        """Start a gather."""
        return self._start("Igather", lambda c: coll.Gather(c, sendbuf, recvbuf, root))

    def Igatherv(self, sendbuf, recvbuf, root=0):
        """Start a gather of one size per rank."""
        return self._start("Igatherv", lambda c: coll.Gatherv(c, sendbuf, recvbuf, root))

    def Iallgather(self, sendbuf, recvbuf):
        """Start an allgather."""
        return self._start("Iallgather", lambda c: coll.Allgather(c, sendbuf, recvbuf))

    def Iallgatherv(self, sendbuf, recvbuf):
        """Start an allgather of one size per rank."""
        return self._start("Iallgatherv", lambda c: coll.Allgatherv(c, sendbuf, recvbuf))

    def Ialltoall(self, sendbuf, recvbuf):
        """Start a total exchange."""
        return self._start("Ialltoall", lambda c: coll.Alltoall(c, sendbuf, recvbuf))

    def Ialltoallv(self, sendbuf, recvbuf):
        """Start a total exchange with a count per pair."""
        return self._start("Ialltoallv", lambda c: coll.Alltoallv(c, sendbuf, recvbuf))

    def Ialltoallw(self, sendbuf, recvbuf):
        """Start a total exchange with a datatype per pair."""
        return self._start("Ialltoallw", lambda c: coll.Alltoallw(c, sendbuf, recvbuf))

    def Ireduce(self, sendbuf, recvbuf, op=None, root=0):
        """Start a reduction at ``root``."""
        return self._start("Ireduce", lambda c: coll.Reduce(c, sendbuf, recvbuf, op, root))

    def Iallreduce(self, sendbuf, recvbuf, op=None):
        """Start an allreduce."""
        return self._start("Iallreduce", lambda c: coll.Allreduce(c, sendbuf, recvbuf, op))

    def Ireduce_scatter_block(self, sendbuf, recvbuf, op=None):
        """Start a reduce-scatter of equal blocks."""
        return self._start("Ireduce_scatter_block",
                           lambda c: coll.Reduce_scatter_block(c, sendbuf, recvbuf, op))

    def Ireduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=None):
        """Start a reduce-scatter."""
        return self._start("Ireduce_scatter",
                           lambda c: coll.Reduce_scatter(c, sendbuf, recvbuf, recvcounts, op))

    def Iscan(self, sendbuf, recvbuf, op=None):
        """Start an inclusive prefix reduction."""
        return self._start("Iscan", lambda c: coll.Scan(c, sendbuf, recvbuf, op))

    def Iexscan(self, sendbuf, recvbuf, op=None):
        """Start an exclusive prefix reduction."""
        return self._start("Iexscan", lambda c: coll.Exscan(c, sendbuf, recvbuf, op))


class _Topocomm(Intracomm):
    """What the topology communicators share: degrees, edges and neighbourhood collectives."""

    def _neighbour_edges(self):
        """Return ``(ins, outs)``: ``[(rank, tag offset)]`` per in- and out-neighbour slot."""
        ins, outs = self.inoutedges
        return [(r, 0) for r in ins], [(r, 0) for r in outs]

    def _neighbour_tags(self):
        return 1

    @property
    def degrees(self):
        """``(indegree, outdegree)``."""
        ins, outs = self.inoutedges
        return len(ins), len(outs)

    indegree = property(lambda self: self.degrees[0], doc="Number of in-neighbours.")
    outdegree = property(lambda self: self.degrees[1], doc="Number of out-neighbours.")
    inedges = property(lambda self: self.inoutedges[0], doc="The in-neighbours.")
    outedges = property(lambda self: self.inoutedges[1], doc="The out-neighbours.")

    def Neighbor_allgather(self, sendbuf, recvbuf):
        """Gather one block from every in-neighbour (routed when not a network neighbour)."""
        coll.Neighbor_allgather(self, sendbuf, recvbuf)

    def Neighbor_allgatherv(self, sendbuf, recvbuf):
        """Gather a block of one size per in-neighbour."""
        coll.Neighbor_allgatherv(self, sendbuf, recvbuf)

    def Neighbor_alltoall(self, sendbuf, recvbuf):
        """Block ``j`` to out-neighbour ``j``, block ``i`` from in-neighbour ``i``."""
        coll.Neighbor_alltoall(self, sendbuf, recvbuf)

    def Neighbor_alltoallv(self, sendbuf, recvbuf):
        """The neighbourhood exchange with a count per neighbour."""
        coll.Neighbor_alltoallv(self, sendbuf, recvbuf)

    def Neighbor_alltoallw(self, sendbuf, recvbuf):
        """The neighbourhood exchange with a datatype per neighbour."""
        coll.Neighbor_alltoallw(self, sendbuf, recvbuf)

    def Ineighbor_allgather(self, sendbuf, recvbuf):
        """Start :meth:`Neighbor_allgather`; return an ``MPI.Request``."""
        return self._start("Ineighbor_allgather",
                           lambda c: coll.Neighbor_allgather(c, sendbuf, recvbuf))

    def Ineighbor_allgatherv(self, sendbuf, recvbuf):
        """Start :meth:`Neighbor_allgatherv`."""
        return self._start("Ineighbor_allgatherv",
                           lambda c: coll.Neighbor_allgatherv(c, sendbuf, recvbuf))

    def Ineighbor_alltoall(self, sendbuf, recvbuf):
        """Start :meth:`Neighbor_alltoall`."""
        return self._start("Ineighbor_alltoall",
                           lambda c: coll.Neighbor_alltoall(c, sendbuf, recvbuf))

    def Ineighbor_alltoallv(self, sendbuf, recvbuf):
        """Start :meth:`Neighbor_alltoallv`."""
        return self._start("Ineighbor_alltoallv",
                           lambda c: coll.Neighbor_alltoallv(c, sendbuf, recvbuf))

    def Ineighbor_alltoallw(self, sendbuf, recvbuf):
        """Start :meth:`Neighbor_alltoallw`."""
        return self._start("Ineighbor_alltoallw",
                           lambda c: coll.Neighbor_alltoallw(c, sendbuf, recvbuf))

    def neighbor_allgather(self, sendobj):
        """Every in-neighbour's object (None from ``MPI.PROC_NULL``)."""
        return coll.neighbor_allgather(self, sendobj)

    def neighbor_alltoall(self, sendobj):
        """Item ``j`` to out-neighbour ``j``; one item per in-neighbour."""
        return coll.neighbor_alltoall(self, sendobj)


class Cartcomm(_Topocomm):
    """A Cartesian grid of ranks (mirrors ``MPI.Cartcomm``; the answers are MPI's)."""

    def Get_topology(self):
        """Return ``MPI.CART``."""
        return _mpi().CART

    def Get_dim(self):
        """Return the number of dimensions."""
        self._live("Get_dim")
        return self.comm.Get_dim()

    def Get_topo(self):
        """Return ``(dims, periods, coords)``."""
        self._live("Get_topo")
        return self.comm.Get_topo()

    def Get_cart_rank(self, coords):
        """Return the rank at ``coords``."""
        self._live("Get_cart_rank")
        return self.comm.Get_cart_rank(coords)

    def Get_coords(self, rank):
        """Return the coordinates of ``rank``."""
        self._live("Get_coords")
        return self.comm.Get_coords(rank)

    def Shift(self, direction, disp):
        """Return ``(source, dest)`` of a shift by ``disp`` along ``direction``."""
        self._live("Shift")
        return self.comm.Shift(direction, disp)

    def Sub(self, remain_dims):
        """The sub-grids keeping ``remain_dims`` (collective; a :class:`Cartcomm`)."""
        return _derive(self, "Sub", lambda base: base.Sub(remain_dims), Cartcomm)

    dim = property(Get_dim, doc="Number of dimensions.")
    ndim = property(Get_dim, doc="Number of dimensions.")
    topo = property(Get_topo, doc="``(dims, periods, coords)``.")
    dims = property(lambda self: self.Get_topo()[0], doc="The grid's dimensions.")
    periods = property(lambda self: self.Get_topo()[1], doc="Periodic dimensions.")
    coords = property(lambda self: self.Get_topo()[2], doc="This rank's coordinates.")

    @property
    def inoutedges(self):
        """``(neighbours, neighbours)``: per dimension ``Shift(d, 1)``'s source and dest."""
        out = []
        for d in range(self.Get_dim()):
            out.extend(self.Shift(d, 1))
        return out, list(out)

    def _neighbour_edges(self):
        """Open MPI's neighbours and tags: per dimension the source (tag ``2d``) and the
        dest (``2d + 1``) to receive from; a message to the source arrives at its dest slot."""
        MPI = _mpi()
        dims, periods, _ = self.Get_topo()
        ins, outs = [], []
        for d, (n, periodic) in enumerate(zip(dims, periods)):
            if n > 1:
                s, t = self.Shift(d, 1)
            elif n == 1 and periodic:
                s = t = self.rank
            else:
                s = t = MPI.PROC_NULL
            ins += [(s, 2 * d), (t, 2 * d + 1)]
            outs += [(s, 2 * d + 1), (t, 2 * d)]
        return ins, outs

    def _neighbour_tags(self):
        return max(1, 2 * self.Get_dim())


class Graphcomm(_Topocomm):
    """A graph of ranks (mirrors ``MPI.Graphcomm``; the answers are MPI's)."""

    def Get_topology(self):
        """Return ``MPI.GRAPH``."""
        return _mpi().GRAPH

    def Get_dims(self):
        """Return ``(nnodes, nedges)``."""
        self._live("Get_dims")
        return self.comm.Get_dims()

    def Get_topo(self):
        """Return ``(index, edges)``."""
        self._live("Get_topo")
        return self.comm.Get_topo()

    def Get_neighbors_count(self, rank):
        """Return the number of neighbours of ``rank``."""
        self._live("Get_neighbors_count")
        return self.comm.Get_neighbors_count(rank)

    def Get_neighbors(self, rank):
        """Return the neighbours of ``rank``."""
        self._live("Get_neighbors")
        return self.comm.Get_neighbors(rank)

    dims = property(Get_dims, doc="``(nnodes, nedges)``.")
    nnodes = property(lambda self: self.Get_dims()[0], doc="Number of nodes.")
    nedges = property(lambda self: self.Get_dims()[1], doc="Number of edges.")
    topo = property(Get_topo, doc="``(index, edges)``.")
    index = property(lambda self: self.Get_topo()[0], doc="The index array.")
    edges = property(lambda self: self.Get_topo()[1], doc="The edges array.")
    nneighbors = property(lambda self: self.Get_neighbors_count(self.rank),
                          doc="Number of this rank's neighbours.")
    neighbors = property(lambda self: self.Get_neighbors(self.rank),
                         doc="This rank's neighbours.")

    @property
    def inoutedges(self):
        """``(neighbours, neighbours)``."""
        nbrs = self.Get_neighbors(self.rank)
        return nbrs, list(nbrs)


class Distgraphcomm(_Topocomm):
    """A distributed graph of ranks (mirrors ``MPI.Distgraphcomm``; the answers are MPI's)."""

    def Get_topology(self):
        """Return ``MPI.DIST_GRAPH``."""
        return _mpi().DIST_GRAPH

    def Get_dist_neighbors_count(self):
        """Return ``(indegree, outdegree, weighted)``."""
        self._live("Get_dist_neighbors_count")
        return self.comm.Get_dist_neighbors_count()

    def Get_dist_neighbors(self):
        """Return ``(sources, destinations, weights)``."""
        self._live("Get_dist_neighbors")
        return self.comm.Get_dist_neighbors()

    @property
    def inoutedges(self):
        """``(sources, destinations)``."""
        sources, dests, _ = self.Get_dist_neighbors()
        return list(sources), list(dests)
