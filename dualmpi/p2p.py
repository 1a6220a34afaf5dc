"""Point-to-point to any rank of a ``dualmpi.Comm``, routed over the network's links.

The functions behind :class:`dualmpi.Comm`'s ``Send``, ``Recv``, ``Isend``, ``Irecv``,
``Ssend``, ``Issend``, ``Sendrecv``, ``Sendrecv_replace``, ``Probe``, ``Iprobe``,
``Mprobe``, ``Improbe`` and the object forms ``send``, ``recv``, ``isend``, ``irecv``,
``ssend``, ``issend``, ``sendrecv``, ``probe``, ``iprobe``, ``mprobe``, ``improbe``: the
arguments of mpi4py (buffers read as mpi4py reads them, :mod:`dualmpi.msgbuffer`; objects
pickled with ``MPI.pickle``), ``MPI.ANY_SOURCE``, ``MPI.ANY_TAG``, ``MPI.PROC_NULL`` and
``MPI.Status`` in user ranks; the messages travel as :mod:`dualmpi.engine.router` carries
them.  Requests are ``MPI.Request`` objects (mpi4py's own for a message to a direct
neighbour, the router's generalized requests otherwise), so ``MPI.Request.Waitall`` and
``dualmpi.Request.Waitall`` take them.  A message longer than the receive buffer is taken
off the network and refused with a :class:`~dualmpi.errors.DualmpiError` that is also an
``MPI.Exception`` of class ``ERR_TRUNCATE``.  docs/p2p.md tells the whole story.
"""

import numpy as np

from . import msgbuffer
from .engine import inflight
from .errors import DualmpiError, mpi_error

__all__ = [
    "PointToPoint", "start_lane", "stop_lane",
    "Send", "Ssend", "Isend", "Issend", "Recv", "Irecv", "Sendrecv", "Sendrecv_replace",
    "Probe", "Iprobe", "Mprobe", "Improbe", "Message",
    "send", "ssend", "isend", "issend", "recv", "irecv", "sendrecv", "probe", "iprobe",
    "mprobe", "improbe",
]

_MPI = None
#: Tags up to this value are valid on every MPI (MPI guarantees ``TAG_UB >= 32767``).
_TAG_ANY_MPI = 32767


def _mpi():
    global _MPI
    if _MPI is None:
        from mpi4py import MPI

        _MPI = MPI
    return _MPI


def _rank(net, r, what, name, receive):
    """Return rank ``r`` as an int (a rank, ``PROC_NULL``, ``ANY_SOURCE`` for a receive)."""
    MPI = _mpi()
    if type(r) is int and 0 <= r < net.size:
        return r
    if isinstance(r, (int, np.integer)) and not isinstance(r, bool):
        r = int(r)
        if 0 <= r < net.size or r == MPI.PROC_NULL or (receive and r == MPI.ANY_SOURCE):
            return r
    more = ", MPI.ANY_SOURCE" if receive else ""
    raise mpi_error(f"{what}: bad {name} {r!r}: a rank 0..{net.size - 1}, MPI.PROC_NULL{more}",
                    "ERR_RANK")


def _tag(net, tag, what, receive):
    """Return ``tag`` as an int (0..TAG_UB, or ``ANY_TAG`` for a receive)."""
    MPI = _mpi()
    if type(tag) is int and 0 <= tag <= _TAG_ANY_MPI:
        return tag
    if isinstance(tag, (int, np.integer)) and not isinstance(tag, bool):
        tag = int(tag)
        if 0 <= tag <= net._router.tag_ub or \
                (receive and tag == MPI.ANY_TAG):
            return tag
    more = " or MPI.ANY_TAG" if receive else ""
    raise mpi_error(f"{what}: bad tag {tag!r}: 0..MPI.TAG_UB{more}", "ERR_TAG")


#: numpy dtypes msgbuffer reads as a plain view of a C-contiguous array (learned on first use):
#: such an array's bytes are taken without building a message (the one-hop hot path).
_VIEWS = set()


def _read(buf, role, what):
    """Return ``(message or None, uint8 bytes)`` of a buffer argument, as msgbuffer reads it.

    The bytes are a view of the user's memory, or a message's packed temporary (filled
    with the buffer's contents: for a receive, a shorter message changes only its part).
    """
    if type(buf) is np.ndarray and buf.dtype in _VIEWS and buf.flags.c_contiguous and \
            (role == "send" or buf.flags.writeable):
        return None, (buf.view(np.uint8) if buf.ndim == 1 else buf.reshape(-1).view(np.uint8))
    m = msgbuffer.simple(buf, role=role, what=what)
    if type(buf) is np.ndarray and not m.packed and buf.flags.c_contiguous:
        _VIEWS.add(buf.dtype)
    return m, (m.pack() if m.packed else m.data)


# -- sending ------------------------------------------------------------------------------------
def _send(net, buf, dest, tag, what, sync=False, nonblocking=False, track=False):
    """Send (blocking) or start a send (return its request) of ``buf`` to ``dest``.

    ``track``: a direct send's request is the router's too (the object forms: their
    requests go in ``dualmpi.Request.waitall`` with a routed ``irecv``'s).
    """
    router = net._router
    if router is None:
        raise DualmpiError(f"{what}: the communicator was freed")
    if type(tag) is not int or not 0 <= tag <= _TAG_ANY_MPI:
        tag = _tag(net, tag, what, False)
    plan = router.sends.get(dest) if type(dest) is int else None
    if plan is None:
        dest = _rank(net, dest, what, "dest", False)
        if dest == _mpi().PROC_NULL:
            _, data = _read(buf, "send", f"{what} buf")
            if nonblocking:
                return router.direct.Isend(data, dest, tag)
            return None
        plan = router.send_plan(dest)
    _, data = _read(buf, "send", f"{what} buf")
    kind, hops, where = plan
    if kind == 1:  # one link between the ranks: one MPI message, no header
        router.count_main(hops, data.size)
        direct = router.direct
        if nonblocking:
            req = (direct.Issend if sync else direct.Isend)(data, dest, tag)
            return router.track(req, data, what) if track else req
        wd = router.wd
        wd.arm(where, (dest,))
        try:
            if inflight.IN_FLIGHT[0]:  # (MPI's progress rule: those requests move too)
                inflight.waitall([(direct.Issend if sync else direct.Isend)(data, dest, tag)])
            else:
                (direct.Ssend if sync else direct.Send)(data, dest, tag)
        finally:
            wd.disarm()
        return None
    if kind == 0:
        state = router.send_self(data, tag, sync, request=nonblocking)
    else:
        state = router.send_routed(data, dest, tag, sync, request=nonblocking)
    if nonblocking:
        return router.request(state)
    if sync:
        router.wait_for(state)
    return None


def Send(net, buf, dest, tag=0):
    """Send ``buf`` to rank ``dest`` (mirrors ``Comm.Send``).

    To a rank that is the route's next one (a network neighbour with one node per rank) it
    is one MPI message; to any other, a routed message the ranks in between forward, which
    returns as soon as it is on its way (buffered, as MPI's standard mode may).
    """
    _send(net, buf, dest, tag, "Send")


def Ssend(net, buf, dest, tag=0):
    """Send ``buf`` and return once a receive has matched it (mirrors ``Comm.Ssend``).

    A routed message's receiver sends an acknowledgement back over the links.
    """
    _send(net, buf, dest, tag, "Ssend", sync=True)


def Isend(net, buf, dest, tag=0):
    """Start a send of ``buf``; return its ``MPI.Request`` (mirrors ``Comm.Isend``)."""
    return _send(net, buf, dest, tag, "Isend", nonblocking=True)


def Issend(net, buf, dest, tag=0):
    """Start a synchronous send; its request completes once a receive matched the message."""
    return _send(net, buf, dest, tag, "Issend", sync=True, nonblocking=True)


def _wait_send(router, req, dest, what):
    """Wait for send request ``req`` (a router's or mpi4py's) under the watchdog."""
    if req is None:
        return
    MPI = _mpi()
    if hasattr(req, "_state"):
        req.Wait()
        return
    wd = router.wd
    wd.arm(f"{what}: the send to rank {dest} (until rank {dest} receives it)",
           () if dest == MPI.PROC_NULL else (dest,))
    try:
        inflight.waitall([req])
    finally:
        wd.disarm()


# -- receiving ----------------------------------------------------------------------------------
def _recv_args(net, source, tag, what):
    """Return ``(router, source, tag)`` of a receive or probe, checked."""
    router = net._router
    if router is None:
        raise DualmpiError(f"{what}: the communicator was freed")
    if type(source) is not int or not 0 <= source < net.size:
        source = _rank(net, source, what, "source", True)
    if type(tag) is not int or not 0 <= tag <= _TAG_ANY_MPI:
        tag = _tag(net, tag, what, True)
    return router, source, tag


def _proc_null(router, tag, status):
    """A receive from ``MPI.PROC_NULL``: MPI's empty status (source PROC_NULL, count 0)."""
    MPI = _mpi()
    router.direct.Recv([np.empty(0, np.uint8), MPI.BYTE], MPI.PROC_NULL, tag, status)


def Recv(net, buf, source=None, tag=None, status=None, what="Recv"):
    """Receive into ``buf`` from rank ``source`` (mirrors ``Comm.Recv``; defaults
    ``MPI.ANY_SOURCE`` and ``MPI.ANY_TAG``)."""
    MPI = _mpi()
    source = MPI.ANY_SOURCE if source is None else source
    tag = MPI.ANY_TAG if tag is None else tag
    router, source, tag = _recv_args(net, source, tag, what)
    m, data = _read(buf, "recv", f"{what} buf")
    if source == MPI.PROC_NULL:
        _proc_null(router, tag, status)
        return
    router.recv(data, source, tag, status, what)
    if m is not None and m.packed:
        m.unpack()


def Irecv(net, buf, source=None, tag=None, what="Irecv"):
    """Start a receive into ``buf``; return its ``MPI.Request`` (mirrors ``Comm.Irecv``)."""
    MPI = _mpi()
    source = MPI.ANY_SOURCE if source is None else source
    tag = MPI.ANY_TAG if tag is None else tag
    router, source, tag = _recv_args(net, source, tag, what)
    m, data = _read(buf, "recv", f"{what} buf")
    if source == MPI.PROC_NULL:
        return router.direct.Irecv([np.empty(0, np.uint8), MPI.BYTE], MPI.PROC_NULL, tag)
    finish = m.unpack if m is not None and m.packed else None
    state = router.post(source, tag, data, finish, what=what, request=True)
    return router.request(state)


def Sendrecv(net, sendbuf, dest, sendtag=0, recvbuf=None, source=None, recvtag=None,
             status=None):
    """Send ``sendbuf`` to ``dest`` and receive into ``recvbuf`` (mirrors ``Comm.Sendrecv``)."""
    MPI = _mpi()
    source = MPI.ANY_SOURCE if source is None else source
    recvtag = MPI.ANY_TAG if recvtag is None else recvtag
    router, source, recvtag = _recv_args(net, source, recvtag, "Sendrecv")
    if recvbuf is None:
        recvbuf = np.empty(0, np.uint8)
    _read(recvbuf, "recv", "Sendrecv recvbuf")  # checked before anything is sent
    req = _send(net, sendbuf, dest, sendtag, "Sendrecv", nonblocking=True)
    Recv(net, recvbuf, source, recvtag, status, what="Sendrecv")
    _wait_send(router, req, dest, "Sendrecv")


def Sendrecv_replace(net, buf, dest, sendtag=0, source=None, recvtag=None, status=None):
    """Send ``buf`` to ``dest``, then receive into it (mirrors ``Comm.Sendrecv_replace``)."""
    MPI = _mpi()
    source = MPI.ANY_SOURCE if source is None else source
    recvtag = MPI.ANY_TAG if recvtag is None else recvtag
    router, source, recvtag = _recv_args(net, source, recvtag, "Sendrecv_replace")
    m, data = _read(buf, "recv", "Sendrecv_replace buf")
    req = _send(net, data.copy(), dest, sendtag, "Sendrecv_replace", nonblocking=True)
    if source == MPI.PROC_NULL:
        _proc_null(router, recvtag, status)
    else:
        router.recv(data, source, recvtag, status, "Sendrecv_replace")
        if m is not None and m.packed:
            m.unpack()
    _wait_send(router, req, dest, "Sendrecv_replace")


# -- probing ------------------------------------------------------------------------------------
def Probe(net, source=None, tag=None, status=None):
    """Wait until a message ``(source, tag)`` can be received; return True (``Comm.Probe``)."""
    MPI = _mpi()
    source = MPI.ANY_SOURCE if source is None else source
    tag = MPI.ANY_TAG if tag is None else tag
    router, source, tag = _recv_args(net, source, tag, "Probe")
    if source == MPI.PROC_NULL:
        return router.direct.Probe(MPI.PROC_NULL, tag, status)
    router.probe(source, tag, status, what="Probe")
    return True


def Iprobe(net, source=None, tag=None, status=None):
    """Return whether a message ``(source, tag)`` can be received now (``Comm.Iprobe``)."""
    MPI = _mpi()
    source = MPI.ANY_SOURCE if source is None else source
    tag = MPI.ANY_TAG if tag is None else tag
    router, source, tag = _recv_args(net, source, tag, "Iprobe")
    if source == MPI.PROC_NULL:
        return router.direct.Iprobe(MPI.PROC_NULL, tag, status)
    return router.iprobe(source, tag, status) is not None


def Mprobe(net, source=None, tag=None, status=None):
    """Wait for a message and match it: return a :class:`Message` (mirrors ``Comm.Mprobe``)."""
    MPI = _mpi()
    source = MPI.ANY_SOURCE if source is None else source
    tag = MPI.ANY_TAG if tag is None else tag
    router, source, tag = _recv_args(net, source, tag, "Mprobe")
    if source == MPI.PROC_NULL:
        return router.direct.Mprobe(MPI.PROC_NULL, tag, status)
    return Message(router, router.probe(source, tag, status, remove=True, what="Mprobe"))


def Improbe(net, source=None, tag=None, status=None):
    """Match a message if one is there: a :class:`Message`, or None (``Comm.Improbe``)."""
    MPI = _mpi()
    source = MPI.ANY_SOURCE if source is None else source
    tag = MPI.ANY_TAG if tag is None else tag
    router, source, tag = _recv_args(net, source, tag, "Improbe")
    if source == MPI.PROC_NULL:
        return router.direct.Improbe(MPI.PROC_NULL, tag, status)
    got = router.iprobe(source, tag, status, remove=True)
    return None if got is None else Message(router, got)


class Message:
    """A message matched by ``Mprobe``/``Improbe`` (mirrors ``MPI.Message``).

    No other receive can take it; ``Recv``/``Irecv`` (into a buffer) or ``recv``/``irecv``
    (an object) receive it, once.  True until received.
    """

    def __init__(self, router, got):
        self._router = router
        if hasattr(got, "payload"):  # kept by the router (routed, or to this rank itself)
            self._arrival, self._msg = got, None
            self.source, self.tag, self.nbytes = got.src, got.tag, got.payload.size
        else:
            self._arrival = None
            self._msg, self.nbytes, self.source, self.tag = got
        self._live = True

    def __bool__(self):
        return self._live

    def __repr__(self):
        state = "matched" if self._live else "received"
        return f"<dualmpi.p2p.Message from rank {self.source}, tag {self.tag}, " \
               f"{self.nbytes} bytes ({state})>"

    def _take(self, data, status, what):
        """Receive into uint8 ``data`` (None: return the bytes of an object)."""
        if not self._live:
            raise DualmpiError(f"{what}: the message was received already (MPI.MESSAGE_NULL)")
        self._live = False
        MPI = _mpi()
        router, n, payload = self._router, self.nbytes, None
        if self._arrival is not None:
            payload = self._arrival.payload
            self._arrival = None
            if data is not None:
                if n > data.size:
                    from .engine.router import truncated

                    raise truncated(router.rank, self.source, n, data.size)
                data[:n] = payload
        else:
            msg, self._msg = self._msg, None
            if data is None:
                payload = bytearray(n)
                msg.Recv([payload, MPI.BYTE])
            elif n > data.size:
                msg.Recv([np.empty(n, np.uint8), MPI.BYTE])
                router.count_tail(self.source, n)
                from .engine.router import truncated

                raise truncated(router.rank, self.source, n, data.size)
            else:
                msg.Recv([data, n, MPI.BYTE])
            router.count_tail(self.source, n)
        if status is not None:
            from .engine.router import fill_status

            fill_status(status, self.source, self.tag, n)
        return payload

    def Recv(self, buf, status=None):
        """Receive the message into ``buf`` (mirrors ``Message.Recv``)."""
        m, data = _read(buf, "recv", "Message.Recv buf")
        self._take(data, status, "Message.Recv")
        if m is not None and m.packed:
            m.unpack()

    def Irecv(self, buf):
        """Receive the message into ``buf``; return a completed request (``Message.Irecv``)."""
        self.Recv(buf)
        return self._router.done_request(self.source, self.tag, self.nbytes)

    def recv(self, status=None):
        """Receive the message's object (mirrors ``Message.recv``)."""
        return _mpi().pickle.loads(self._take(None, status, "Message.recv"))

    def irecv(self):
        """Receive the message's object; return a request whose ``wait()`` gives it."""
        payload = self._take(None, None, "Message.irecv")
        return self._router.done_request(self.source, self.tag, self.nbytes, payload)


# -- objects ------------------------------------------------------------------------------------
def _pickled(obj):
    """``obj`` pickled as mpi4py pickles it, as a uint8 array (read as a plain buffer)."""
    return np.frombuffer(_mpi().pickle.dumps(obj), dtype=np.uint8)


def send(net, obj, dest, tag=0):
    """Send a Python object (pickled as mpi4py pickles it; mirrors ``Comm.send``)."""
    _send(net, _pickled(obj), dest, tag, "send")


def ssend(net, obj, dest, tag=0):
    """Send an object; return once a receive matched it (mirrors ``Comm.ssend``)."""
    _send(net, _pickled(obj), dest, tag, "ssend", sync=True)


def isend(net, obj, dest, tag=0):
    """Start sending an object; return its request (mirrors ``Comm.isend``)."""
    return _send(net, _pickled(obj), dest, tag, "isend", nonblocking=True, track=True)


def issend(net, obj, dest, tag=0):
    """Start a synchronous send of an object (mirrors ``Comm.issend``)."""
    return _send(net, _pickled(obj), dest, tag, "issend", sync=True, nonblocking=True,
                 track=True)


def recv(net, buf=None, source=None, tag=None, status=None):
    """Receive an object (mirrors ``Comm.recv``; ``buf`` is not needed and not used)."""
    MPI = _mpi()
    source = MPI.ANY_SOURCE if source is None else source
    tag = MPI.ANY_TAG if tag is None else tag
    router, source, tag = _recv_args(net, source, tag, "recv")
    if source == MPI.PROC_NULL:
        _proc_null(router, tag, status)
        return None
    _, payload = router.recv(None, source, tag, status, "recv", keep_payload=True)
    return MPI.pickle.loads(payload)


def irecv(net, buf=None, source=None, tag=None):
    """Start receiving an object; the request's ``wait()`` returns it (``Comm.irecv``)."""
    MPI = _mpi()
    source = MPI.ANY_SOURCE if source is None else source
    tag = MPI.ANY_TAG if tag is None else tag
    router, source, tag = _recv_args(net, source, tag, "irecv")
    if source == MPI.PROC_NULL:
        return router.done_request(MPI.PROC_NULL, MPI.ANY_TAG, 0)
    state = router.post(source, tag, keep_payload=True, what="irecv", request=True)
    return router.request(state)


def sendrecv(net, sendobj, dest, sendtag=0, recvbuf=None, source=None, recvtag=None,
             status=None):
    """Send an object to ``dest`` and receive one (mirrors ``Comm.sendrecv``)."""
    MPI = _mpi()
    source = MPI.ANY_SOURCE if source is None else source
    recvtag = MPI.ANY_TAG if recvtag is None else recvtag
    router, source, recvtag = _recv_args(net, source, recvtag, "sendrecv")
    req = _send(net, _pickled(sendobj), dest, sendtag, "sendrecv", nonblocking=True)
    obj = recv(net, None, source, recvtag, status)
    _wait_send(router, req, dest, "sendrecv")
    return obj


def probe(net, source=None, tag=None, status=None):
    """Wait for a message (mirrors ``Comm.probe``); return True."""
    return Probe(net, source, tag, status)


def iprobe(net, source=None, tag=None, status=None):
    """Return whether a message can be received now (mirrors ``Comm.iprobe``)."""
    return Iprobe(net, source, tag, status)


def mprobe(net, source=None, tag=None, status=None):
    """Wait for a message and match it (mirrors ``Comm.mprobe``); ``recv()`` gives its object."""
    return Mprobe(net, source, tag, status)


def improbe(net, source=None, tag=None, status=None):
    """Match a message if one is there (mirrors ``Comm.improbe``), else None."""
    return Improbe(net, source, tag, status)


class _NoLane:
    """A communicator without a one-link lane: every call takes the Python path."""

    @staticmethod
    def send(buf, dest, tag, sync):
        return NotImplemented

    @staticmethod
    def recv(buf, source, tag, status):
        return NotImplemented

    @staticmethod
    def sendrecv(sendbuf, dest, sendtag, recvbuf, source, recvtag, status):
        return NotImplemented

    @staticmethod
    def close():
        pass


_NO_LANE = _NoLane()


class _Pending(_NoLane):
    """A communicator's lane before its first call: that call builds it
    (:func:`dualmpi.engine.lane.make`) and takes the Python path."""

    def __init__(self, net):
        self.net = net

    def _build(self):
        from .engine import lane

        net = self.net
        net._lane = _NO_LANE
        if net._router is not None:
            net._lane = lane.make(net._router, _VIEWS) or _NO_LANE
        return NotImplemented

    def send(self, buf, dest, tag, sync):
        return self._build()

    def recv(self, buf, source, tag, status):
        return self._build()

    def sendrecv(self, sendbuf, dest, sendtag, recvbuf, source, recvtag, status):
        return self._build()


def start_lane(net):
    """Give communicator ``net`` (its router made) a lane built at its first blocking call."""
    net._lane = _Pending(net)


def stop_lane(net):
    """Close ``net``'s lane (the communicator is being freed): the Python path from now on."""
    net._lane.close()
    net._lane = _NO_LANE


class PointToPoint:
    """The point-to-point methods, in mpi4py's names, of ``dualmpi.Comm`` and its derived
    communicators (each hands off to this module's function of the same name).

    ``Send``, ``Ssend``, ``Recv`` and ``Sendrecv`` first offer the call to the
    communicator's one-link lane (:mod:`dualmpi.engine.lane`: a message that crosses one
    link, sent and received in C), which answers ``NotImplemented`` for anything else.
    """

    _lane = _NO_LANE

    def Send(self, buf, dest, tag=0):
        """Send ``buf`` to rank ``dest``, routed over the links (mirrors ``Comm.Send``)."""
        if self._lane.send(buf, dest, tag, False) is NotImplemented:
            Send(self, buf, dest, tag)

    def Ssend(self, buf, dest, tag=0):
        """Send and return once a receive matched it (mirrors ``Comm.Ssend``)."""
        if self._lane.send(buf, dest, tag, True) is NotImplemented:
            Ssend(self, buf, dest, tag)

    def Isend(self, buf, dest, tag=0):
        """Start a send; return an ``MPI.Request`` (mirrors ``Comm.Isend``)."""
        return Isend(self, buf, dest, tag)

    def Issend(self, buf, dest, tag=0):
        """Start a synchronous send; return an ``MPI.Request`` (mirrors ``Comm.Issend``)."""
        return Issend(self, buf, dest, tag)

    def Recv(self, buf, source=None, tag=None, status=None):
        """Receive into ``buf`` (mirrors ``Comm.Recv``: ``ANY_SOURCE``, ``ANY_TAG`` by default)."""
        if self._lane.recv(buf, source, tag, status) is NotImplemented:
            Recv(self, buf, source, tag, status)

    def Irecv(self, buf, source=None, tag=None):
        """Start a receive; return an ``MPI.Request`` (mirrors ``Comm.Irecv``)."""
        return Irecv(self, buf, source, tag)

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=None, recvtag=None,
                 status=None):
        """Send and receive in one call (mirrors ``Comm.Sendrecv``)."""
        if self._lane.sendrecv(sendbuf, dest, sendtag, recvbuf, source, recvtag,
                               status) is NotImplemented:
            Sendrecv(self, sendbuf, dest, sendtag, recvbuf, source, recvtag, status)

    def Sendrecv_replace(self, buf, dest, sendtag=0, source=None, recvtag=None, status=None):
        """Send ``buf``, then receive into it (mirrors ``Comm.Sendrecv_replace``)."""
        Sendrecv_replace(self, buf, dest, sendtag, source, recvtag, status)

    def Probe(self, source=None, tag=None, status=None):
        """Wait until a message can be received (mirrors ``Comm.Probe``)."""
        return Probe(self, source, tag, status)

    def Iprobe(self, source=None, tag=None, status=None):
        """Return whether a message can be received now (mirrors ``Comm.Iprobe``)."""
        return Iprobe(self, source, tag, status)

    def Mprobe(self, source=None, tag=None, status=None):
        """Wait for a message and match it (mirrors ``Comm.Mprobe``)."""
        return Mprobe(self, source, tag, status)

    def Improbe(self, source=None, tag=None, status=None):
        """Match a message if one is there, else None (mirrors ``Comm.Improbe``)."""
        return Improbe(self, source, tag, status)

    def send(self, obj, dest, tag=0):
        """Send a Python object (mirrors ``Comm.send``)."""
        send(self, obj, dest, tag)

    def ssend(self, obj, dest, tag=0):
        """Send an object synchronously (mirrors ``Comm.ssend``)."""
        ssend(self, obj, dest, tag)

    def isend(self, obj, dest, tag=0):
        """Start sending an object (mirrors ``Comm.isend``)."""
        return isend(self, obj, dest, tag)

    def issend(self, obj, dest, tag=0):
        """Start sending an object synchronously (mirrors ``Comm.issend``)."""
        return issend(self, obj, dest, tag)

    def recv(self, buf=None, source=None, tag=None, status=None):
        """Receive a Python object (mirrors ``Comm.recv``)."""
        return recv(self, buf, source, tag, status)

    def irecv(self, buf=None, source=None, tag=None):
        """Start receiving an object; ``wait()`` returns it (mirrors ``Comm.irecv``)."""
        return irecv(self, buf, source, tag)

    def sendrecv(self, sendobj, dest, sendtag=0, recvbuf=None, source=None, recvtag=None,
                 status=None):
        """Send an object and receive one (mirrors ``Comm.sendrecv``)."""
        return sendrecv(self, sendobj, dest, sendtag, recvbuf, source, recvtag, status)

    def probe(self, source=None, tag=None, status=None):
        """Wait until a message can be received (mirrors ``Comm.probe``)."""
        return probe(self, source, tag, status)

    def iprobe(self, source=None, tag=None, status=None):
        """Return whether a message can be received now (mirrors ``Comm.iprobe``)."""
        return iprobe(self, source, tag, status)

    def mprobe(self, source=None, tag=None, status=None):
        """Wait for a message and match it (mirrors ``Comm.mprobe``)."""
        return mprobe(self, source, tag, status)

    def improbe(self, source=None, tag=None, status=None):
        """Match a message if one is there, else None (mirrors ``Comm.improbe``)."""
        return improbe(self, source, tag, status)
