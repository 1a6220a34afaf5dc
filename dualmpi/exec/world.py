"""``MPI.COMM_WORLD`` under ``dualmpi exec``: an ``MPI.Intracomm`` whose calls are a network's.

:class:`World` subclasses :class:`mpi4py.MPI.Intracomm` (as ``mpi4py.util.pkl5.Comm``
subclasses ``MPI.Comm``) over a duplicate of the world that the guard marks as the
*program's* (:mod:`dualmpi.engine.guard`), and hands every call that moves data to a
:class:`dualmpi.Comm` of the network: the buffer, object, nonblocking and neighbourhood
collectives and the point-to-point calls that ``dualmpi.Comm`` carries, each counted
for the report.  ``Dup`` (``Clone``, ``Dup_with_info``) gives another stand-in over a new
``dualmpi.Comm`` of the same network.  A call ``dualmpi.Comm`` does not carry (``Spawn``,
``Idup``, persistent collectives, ...) raises :class:`~dualmpi.support.UnsupportedError` naming it;
queries and local calls (``Get_rank``, ``Get_attr``, ``Set_errhandler``, ``Abort``, ...) are
those of the handle, as on ``MPI.COMM_WORLD``.  Whatever reaches MPI on the handle by another
road (``MPI.Intracomm(comm)``, ``mpi4py.util.pkl5``, ``comm.handle`` in C) is the guard's.

The communicators the program derives (``Split``, ``Create_cart``, ... of the stand-in, and
theirs: :mod:`dualmpi.derived`) count their calls too: each is made an instance of a subclass
of its class (:func:`adopt`) whose methods of :data:`CARRIED` (and ``Dup``, ``Free``, ``Sub``)
count the call under the communicator's kind (its class's name: ``Intracomm``, ``Cartcomm``,
``Graphcomm``, ``Distgraphcomm``) before running it; the stand-in's are counted under
:data:`WORLD_KIND`.

Imported by :mod:`dualmpi.exec.runner` only after the guard is loaded (it imports mpi4py's
MPI module).
"""

import inspect

from mpi4py import MPI

from .. import derived
from ..engine.router import Request as RoutedRequest
from ..request import Request as NetRequest
from ..support import STATUS, UnsupportedError
from .report import WORLD as WORLD_KIND

__all__ = ["World", "Request", "CARRIED", "LOCAL", "WORLD_KIND", "adopt", "count", "install",
           "unsupported_call"]

#: Methods answered by the handle itself, as by ``MPI.COMM_WORLD``: queries, attributes,
#: error handlers, names, ``Abort`` and the class-level constructors (the guard watches those).
LOCAL = frozenset(
    "Get_rank Get_size rank size Get_group group Is_inter Is_intra is_inter is_intra is_topo "
    "Get_topology topology Get_name Set_name name Get_attr Set_attr Delete_attr Get_info "
    "Set_info info Get_errhandler Set_errhandler Call_errhandler Create_errhandler Abort Compare "
    "Create_keyval Free_keyval f2py py2f fromhandle fromint toint handle Get_parent Join "
    "Create_from_group".split())

#: Methods of the stand-in itself (a new stand-in, or the end of one).
OWN = frozenset("Dup Dup_with_info Clone Free free".split())

#: The neighbourhood methods ``dualmpi.Comm`` has beyond ``MPI.Intracomm``'s (the network graph).
NEIGHBOURHOOD = (
    "Get_dist_neighbors Get_dist_neighbors_count Neighbor_allgather Neighbor_allgatherv "
    "Neighbor_alltoall Neighbor_alltoallv Neighbor_alltoallw Ineighbor_allgather "
    "Ineighbor_allgatherv Ineighbor_alltoall Ineighbor_alltoallv Ineighbor_alltoallw "
    "neighbor_allgather neighbor_alltoall").split()

#: Every method handed to the network's ``dualmpi.Comm`` (or refused when it lacks it).
CARRIED = tuple(sorted(n for n in STATUS if n not in LOCAL and n not in OWN)) + tuple(NEIGHBOURHOOD)


def unsupported_call(name, reason=None):
    """Return the :class:`UnsupportedError` of ``MPI.COMM_WORLD.<name>`` under ``dualmpi exec``."""
    note = reason or STATUS.get(name, (None, "dualmpi.Comm does not carry it"))[1]
    return UnsupportedError(f"MPI.COMM_WORLD.{name} is not supported under dualmpi exec: {note}")


def count(session, kind, name):
    """Count one call of method ``name`` on a communicator of ``kind`` in ``session``'s
    ``calls`` (per method) and ``kinds`` (per kind, then method)."""
    calls = session.calls
    calls[name] = calls.get(name, 0) + 1
    per = session.kinds.get(kind)
    if per is None:
        per = session.kinds[kind] = {}
    per[name] = per.get(name, 0) + 1


def _carried(name):
    """Return the stand-in's method ``name``: count the call, hand it to the network."""
    def method(self, *args, **kwargs):
        session = self._session
        count(session, WORLD_KIND, name)
        try:
            call = getattr(self._net, name)
        except AttributeError as exc:  # UnsupportedError: dualmpi.Comm says why
            reason = str(exc).split(": ", 1)[1] if isinstance(exc, UnsupportedError) else None
            raise unsupported_call(name, reason) from None
        return adopt(call(*args, **kwargs), session)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``{name}`` over the network's links (the network's ``dualmpi.Comm``)."
    return method


class World(MPI.Intracomm):
    """``MPI.COMM_WORLD`` under ``dualmpi exec``: the handle of an ``MPI.Intracomm``, the calls of
    a network's :class:`dualmpi.Comm`.

    Parameters
    ----------
    handle : mpi4py.MPI.Intracomm
        A duplicate of the world, marked as the program's (its local answers: rank, size,
        attributes, error handlers).
    net : dualmpi.Comm
        The network whose links carry the calls.
    session : object
        What the stand-ins of one run share: ``calls`` (``{method: count}``) and
        ``dup(world)``, ``free(world)`` (:class:`dualmpi.exec.runner.Session`).
    primary : bool
        True for ``MPI.COMM_WORLD`` itself (which, as in MPI, cannot be freed).
    """

    def __new__(cls, handle, net, session, primary=False):
        self = super().__new__(cls, handle)
        self._net, self._session, self._primary = net, session, primary
        return self

    def Dup(self, info=None):
        """Return a new stand-in over a new ``dualmpi.Comm`` of the network (collective)."""
        return self._own("Dup")

    def Dup_with_info(self, info):
        """Return a new stand-in (the info hints are not kept; see :meth:`Dup`)."""
        return self._own("Dup_with_info")

    def Clone(self):
        """Return a new stand-in (see :meth:`Dup`)."""
        return self._own("Clone")

    def Free(self):
        """Free a stand-in made by :meth:`Dup` (its network's counts stay in the report).

        ``MPI.COMM_WORLD`` itself cannot be freed: ``MPI.Exception`` (``MPI_ERR_COMM``), as
        from MPI.
        """
        count(self._session, WORLD_KIND, "Free")
        if self._primary:
            raise MPI.Exception(MPI.ERR_COMM)
        self._session.free(self)

    def free(self):
        """Free a stand-in made by :meth:`Dup` (mirrors ``Comm.free``)."""
        self.Free()

    def _own(self, name):
        count(self._session, WORLD_KIND, name)
        return self._session.dup(self)


for _name in CARRIED:
    setattr(World, _name, _carried(_name))
del _name


# -- derived communicators: their calls counted too ------------------------------------------------
#: The methods a derived communicator counts (those it has): the stand-in's, and ``Sub``.
DERIVED_COUNTED = frozenset(CARRIED) | OWN | {"Sub"}


def _counting(name, base_method):
    """Return method ``name`` of a counting class: count the call, run ``base_method``, adopt
    the communicator it returns (a ``Split`` of a ``Split``)."""
    def method(self, *args, **kwargs):
        session = self._exec_session
        count(session, self._exec_kind, name)
        return adopt(base_method(self, *args, **kwargs), session)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``{name}``, counted for the report (then the derived communicator's)."
    return method


def _counting_class(base):
    """Return the subclass of derived communicator class ``base`` whose calls count."""
    space = {"__doc__": f"A :class:`dualmpi.derived.{base.__name__}` whose calls are counted "
                        "for dualmpi exec's report.",
             "__module__": __name__, "_exec_kind": base.__name__}
    for name in sorted(DERIVED_COUNTED):
        found = inspect.getattr_static(base, name, None)
        if found is not None and inspect.isfunction(found):
            space[name] = _counting(name, found)
    return type(base.__name__, (base,), space)


#: The counting class of each derived communicator class (and of itself).
_COUNTING = {}
for _base in (derived.Intracomm, derived.Cartcomm, derived.Graphcomm, derived.Distgraphcomm):
    _sub = _counting_class(_base)
    _COUNTING[_base] = _COUNTING[_sub] = _sub
del _base, _sub


def adopt(obj, session):
    """Return ``obj``; a derived communicator (:mod:`dualmpi.derived`) becomes an instance of
    its counting class, its calls counted in ``session`` from now on."""
    cls = _COUNTING.get(type(obj))
    if cls is not None:
        obj.__class__ = cls
        obj._exec_session = session
    return obj


class _RequestType(type):
    """``isinstance(x, MPI.Request)`` stays true of mpi4py's requests and dualmpi's."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, (_BaseRequest, NetRequest))

    def __subclasscheck__(cls, sub):
        return issubclass(sub, (_BaseRequest, NetRequest))


_BaseRequest = MPI.Request


def _many(name):
    """Return class method ``name`` of :class:`Request`: dualmpi's when the list holds a request
    of dualmpi (a nonblocking collective's, or a routed point-to-point one, which dualmpi's lists
    advance), else mpi4py's own."""
    base = getattr(_BaseRequest, name)
    ours = (NetRequest, RoutedRequest)

    def method(cls, requests, *args, **kwargs):
        requests = list(requests) if not isinstance(requests, list) else requests
        if any(isinstance(r, ours) for r in requests):
            return getattr(NetRequest, name)(requests, *args, **kwargs)
        return base(requests, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = (f"``MPI.Request.{name}``, also of the requests of dualmpi's nonblocking "
                      f"collectives (then :meth:`dualmpi.Request.{name}`).")
    return classmethod(method)


class Request(_BaseRequest, metaclass=_RequestType):
    """``MPI.Request`` under ``dualmpi exec``: its class methods (``Waitall``, ``Testany``, ...)
    take the requests of the stand-in's nonblocking collectives (``dualmpi.Request``) with
    mpi4py's own, as :class:`dualmpi.Request`'s do."""


for _name in ("Waitall", "Testall", "Waitany", "Testany", "Waitsome", "Testsome",
              "Get_status_all", "Get_status_any", "Get_status_some", "waitall", "testall",
              "waitany", "testany", "waitsome", "testsome"):
    setattr(Request, _name, _many(_name))
del _name


def install(world):
    """Make ``world`` mpi4py's ``MPI.COMM_WORLD`` and :class:`Request` its ``MPI.Request``."""
    MPI.COMM_WORLD = world
    MPI.Request = Request
