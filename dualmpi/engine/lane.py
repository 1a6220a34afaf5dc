"""The one-link lane: point-to-point messages that cross one link, sent and received in C.

A blocking ``Send``, ``Ssend``, ``Recv`` or ``Sendrecv`` of a ``dualmpi.Comm`` whose message
crosses one link between two ranks (one node per rank) is one MPI message on the
communicator's direct channel (:mod:`dualmpi.engine.router`).  Done in Python, reading the
arguments, arming the watchdog and counting the link cost about 2.5 us per message, more
than MPI's own latency on one machine.  The lane (``lane.c``, a CPython extension built with
the MPI library's ``mpicc`` into the compiled round loop's cache,
:func:`dualmpi.engine.cloop.build`) does the same for the common case:

* a C-contiguous numpy array of a dtype :mod:`dualmpi.msgbuffer` reads as a plain view;
* an ``int`` rank (or ``None`` / ``MPI.ANY_SOURCE`` when every other rank sends directly
  and no message is kept in the router) and a tag ``0..32767`` (or ``ANY_TAG``);
* no receive posted (``Irecv``) on the communicator;
* a ``status`` that is ``None`` or an ``MPI.Status``;
* no nonblocking request in flight on the rank (:mod:`dualmpi.engine.inflight`: the Python
  path's waits keep them moving).

Anything else answers ``NotImplemented`` and the Python path (:mod:`dualmpi.p2p`) does the
call, with the same messages.  What the lane does per call is what that path does: the
watchdog armed for the blocking MPI call (:meth:`~dualmpi.engine.watchdog.Watchdog.tracker`),
``MPI_Mprobe`` then ``MPI_Mrecv`` (a longer message is taken off and refused as
``ERR_TRUNCATE``), the message counted on its link (:meth:`Links.items` folds the lane's
counts in), the GIL released in MPI.  Without ``mpicc``, Python headers or with
``DUALMPI_LANE=0`` there is no lane and every call takes the Python path.
"""

import sysconfig
from pathlib import Path

import numpy as np

from . import cloop

__all__ = ["SOURCE", "load", "reason", "make"]

#: The C source of the lane.
SOURCE = Path(__file__).with_name("lane.c")

_loaded = {}


def _library():
    import mpi4py

    flags = (f"-I{sysconfig.get_paths()['include']}", f"-I{mpi4py.get_include()}")
    return cloop.Library("lane", SOURCE, ("PyInit_dualmpi_lane",), "one-link lane",
                         "one-hop messages are sent from Python", flags)


def reason():
    """Return why the lane is not in use ("" when it is, None before :func:`load`)."""
    return _loaded.get("reason")


def load():
    """Return the lane's extension module, or None with :func:`reason` set (once per process)."""
    return cloop.extension(_library, "PyInit_dualmpi_lane", "DUALMPI_LANE", _loaded)


def make(router, views):
    """Return the lane of ``router`` (a :class:`~dualmpi.engine.router.Router`), or None.

    ``views`` is the set of numpy dtypes the caller reads as plain views of a C-contiguous
    array (it may grow later: the lane looks there for a dtype it has not seen).

    None when the lane cannot be built (:func:`reason`) or the network has several nodes per
    rank (a one-hop message then also crosses links inside the ranks).  The lane's tables
    are the router's plans: which destinations and sources are one link away, and the
    watchdog's text for each wait; its link counts join the hub's :class:`Links`.
    """
    from mpi4py import MPI

    from .inflight import IN_FLIGHT
    from .router import truncated
    from .watchdog import Watchdog

    module = load()
    hub = router.hub
    if module is None or hub.q != 1 or router.direct is None:
        return None
    size, rank = router.size, router.rank
    send_ok = np.zeros(size, np.uint8)
    recv_ok = np.zeros(size + 1, np.uint8)
    counts = np.zeros((size, 2), np.int64)
    tracker = np.zeros(2, np.int64)
    hops, rounds = [()] * size, []
    for d in range(size):
        kind, first, where = router.sends.get(d) or router.send_plan(d)
        if kind == 1:
            send_ok[d], hops[d] = 1, first
        rounds.append((where, (router.ranks[d],)))
    for what in ("Recv", "Sendrecv"):
        for s in (*range(size), MPI.ANY_SOURCE):
            rounds.append(router.describe(what, s))
    for s in range(size):
        recv_ok[s] = s != rank and router.route(s, rank).direct
    recv_ok[size] = router.all_direct_in()
    lane = module.Lane(router.direct, send_ok, recv_ok, counts, tracker, IN_FLIGHT,
                       router.posted, router.mailbox, views, np.ndarray, hub.wd,
                       Watchdog.tracker(tracker, rounds), truncated, MPI.Exception,
                       MPI.ANY_SOURCE, MPI.ANY_TAG)
    hub.links.lanes.append((counts, hops))
    return lane
