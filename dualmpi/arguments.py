"""A collective's arguments read as mpi4py reads them: which buffers, counts and root matter where.

One reader per family of collectives, mirroring mpi4py's ``_p_msg_cco.for_bcast``,
``for_scatter``, ``for_gather``, ``for_allgather``, ``for_alltoall``, ``for_reduce``,
``for_allreduce``, ``for_reduce_scatter(_block)``, ``for_scan`` and ``_p_msg_ccow``
(``src/mpi4py/MPI.src/msgbuffer.pxi``): a buffer that is not significant on a rank
(the root's ``sendbuf`` of a scatter elsewhere, a gather's ``recvbuf`` off the root)
is not read at all; ``None`` or ``MPI.IN_PLACE`` stands for MPI_IN_PLACE wherever MPI
allows it; a count in ``[buf, count, datatype]`` is per rank where MPI's is.  Each
buffer is read by :mod:`dualmpi.msgbuffer` (derived datatypes packed and unpacked
through their typemap).  A reader returns a :class:`Call`: the node-level sizes the
engine needs, the packed bytes to send and receive, and what every rank must agree on.
A reader raises :class:`~dualmpi.errors.InputError` for this rank's own mistakes; the
communicator makes every rank hear of it (``dualmpi.Comm``).
"""

import zlib
from dataclasses import dataclass, field

import numpy as np

from . import msgbuffer
from .errors import InputError, mpi_error

__all__ = ["Call", "root_rank", "bcast", "scatter", "gather", "allgather", "alltoall",
           "alltoallw", "reduce", "allreduce", "reduce_scatter_block", "reduce_scatter",
           "scan", "barrier", "sigcode"]


@dataclass
class Call:
    """One rank's share of a collective call, ready for the engine.

    Attributes
    ----------
    name : str
        The collective (:mod:`dualmpi.collectives.registry` name).
    root : int
        The root rank (0 for collectives without one).
    nbytes : int or None
        The layout's size (:class:`dualmpi.engine.layout.Layout`) for a fixed-count
        call; None for a v-variant, whose sizes are agreed first (``vector``).
    send, recv : numpy.ndarray or None
        The packed bytes (uint8) the rank sends and receives.
    sig : tuple of int
        What every rank must agree on, named by ``fields``.
    vector : dict or None
        A v-variant's per-rank facts, exchanged over the links before the sizes are
        known: ``{"send": byte counts or None, "recv": byte counts or None,
        "sdispls", "rdispls", "typesig"}``.
    messages : list
        The :mod:`~dualmpi.msgbuffer` messages to pack before (send) and unpack after (recv).
    dtype : numpy.dtype or None
        The element type of a reduction.
    itemsize : int
        Bytes of one element (reductions combine whole elements).
    """

    name: str
    root: int = 0
    nbytes: object = None
    send: object = None
    recv: object = None
    sig: tuple = ()
    fields: tuple = ()
    vector: dict = None
    sends: list = field(default_factory=list)
    recvs: list = field(default_factory=list)
    dtype: object = None
    itemsize: int = 1
    sdispls: object = None
    rdispls: object = None
    #: a reduction's ``(key, code, combine)`` (:func:`dualmpi.ops.resolve`)
    op: object = None

    def pack(self):
        """Pack the messages to send (derived datatypes), before the run."""
        for m in self.sends:
            m.pack()

    def unpack(self):
        """Unpack the received messages into the user's buffers, after the run."""
        for m in self.recvs:
            m.unpack()


def sigcode(typesig):
    """Return an int64 code of a :mod:`~dualmpi.msgbuffer` type signature (0: ``MPI.PACKED``).

    >>> sigcode((12345, 3)) == sigcode((12345, 3)), sigcode(None)
    (True, 0)
    """
    if typesig is None:
        return 0
    h, n = typesig
    return (int(h) * 1000003 + int(n)) % ((1 << 61) - 1) + 1


def root_rank(root, size):
    """Return ``root`` as a rank of ``size`` ranks, or raise :class:`InputError`.

    >>> root_rank(3, 8)
    3
    """
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)):
        raise InputError(f"bad root {root!r}: an integer rank")
    if not 0 <= root < size:
        raise mpi_error(f"bad root {root}: the communicator has ranks 0..{size - 1}", "ERR_ROOT")
    return int(root)


def _simple(spec, what, role, blocks=1):
    return msgbuffer.simple(spec, blocks=blocks, role=role, what=what)


def _vector(spec, size, what, role):
    return msgbuffer.vector(spec, size, role=role, what=what)


def _in_place(spec):
    return msgbuffer.in_place(spec)


def _same_type(a, b, name):
    """Raise unless two messages carry the same type signature per block."""
    if a.typesig is not None and b.typesig is not None and a.typesig != b.typesig:
        raise InputError(f"{name}: the send and receive datatypes do not match "
                         f"({a.nbytes} and {b.nbytes} bytes per rank, other type signatures)")


def _element_sig(m):
    """Return the sigcode of ONE element of ``m``'s datatype.

    What the ranks of a v-variant compare with each other: their counts differ, so the
    signatures of their whole blocks (``Message.typesig``) differ in a correct call.
    """
    return sigcode(m._info.sig(1))


def _blocks(m):
    """Return the per-block view of a message's data (uint8, ``blocks x nbytes``)."""
    return m.data


def bcast(buf, root, rank, size):
    """``Bcast(buf, root)``: the root sends ``buf``, the others receive into it."""
    root = root_rank(root, size)
    if rank == root:
        m = _simple(buf, "Bcast buf", "send")
        call = Call("bcast", root, m.nbytes, send=m.data, sends=[m])
    else:
        m = _simple(buf, "Bcast buf", "recv")
        call = Call("bcast", root, m.nbytes, recv=m.data, recvs=[m])
    call.sig, call.fields = (root, m.nbytes, sigcode(m.typesig)), ("root", "message size",
                                                                  "datatype")
    return call


def scatter(sendbuf, recvbuf, root, rank, size, v=False):
    """``Scatter``/``Scatterv``: the root's ``sendbuf`` (``size`` pieces) to every ``recvbuf``."""
    root = root_rank(root, size)
    name = "Scatterv" if v else "Scatter"
    recv = None
    if rank == root:
        send = (_vector(sendbuf, size, f"{name} sendbuf", "send") if v else
                _simple(sendbuf, f"{name} sendbuf", "send", size))
        if not _in_place(recvbuf):
            recv = _simple(recvbuf, f"{name} recvbuf", "recv")
    else:
        send = None
        recv = _simple(recvbuf, f"{name} recvbuf", "recv")
    call = Call(name.lower(), root, sends=[send] if send else [], recvs=[recv] if recv else [])
    call.send = send.data if send is not None else None
    call.recv = recv.data if recv is not None else None
    if v:
        call.vector = {"send": send.byte_counts if send is not None else None,
                       "recv": None if recv is None else recv.nbytes,
                       "sdispls": send.byte_displs if send is not None else None,
                       "typesig": _element_sig(send if recv is None else recv)}
        if send is not None and recv is not None and send.byte_counts[rank] != recv.nbytes:
            raise InputError(f"{name}: the root sends itself {int(send.byte_counts[rank])} "
                             f"bytes, its recvbuf has {recv.nbytes}")
        return call
    if send is not None and recv is not None:
        if send.nbytes != recv.nbytes:
            raise InputError(f"{name}: sendbuf has {send.nbytes} bytes per rank, recvbuf "
                             f"{recv.nbytes}; they must match")
        _same_type(send, recv, name)
    m = send if recv is None else recv
    call.nbytes = m.nbytes
    call.sig, call.fields = (root, m.nbytes, sigcode(m.typesig)), ("root", "piece size",
                                                                  "datatype")
    return call


def gather(sendbuf, recvbuf, root, rank, size, v=False):
    """``Gather``/``Gatherv``: every ``sendbuf`` into the root's ``recvbuf`` (``size`` pieces)."""
    root = root_rank(root, size)
    name = "Gatherv" if v else "Gather"
    send = recv = None
    if rank == root:
        recv = (_vector(recvbuf, size, f"{name} recvbuf", "recv") if v else
                _simple(recvbuf, f"{name} recvbuf", "recv", size))
        if not _in_place(sendbuf):
            send = _simple(sendbuf, f"{name} sendbuf", "send")
    else:
        send = _simple(sendbuf, f"{name} sendbuf", "send")
    # in place, the root's own piece is read from its recvbuf: packed before the run too
    call = Call(name.lower(), root, sends=[send] if send else [recv] if recv else [],
                recvs=[recv] if recv else [])
    call.recv = recv.data if recv is not None else None
    if v:
        if send is not None:
            call.send = send.data
        elif recv is not None:  # in place: the root's piece is already in its recvbuf
            a = int(recv.byte_displs[rank])
            call.send = recv.data[a:a + int(recv.byte_counts[rank])]
        call.vector = {"send": send.nbytes if send is not None else
                       int(recv.byte_counts[rank]),
                       "recv": recv.byte_counts if recv is not None else None,
                       "rdispls": recv.byte_displs if recv is not None else None,
                       "typesig": _element_sig(send if send is not None else recv)}
        return call
    if send is not None and recv is not None:
        if send.nbytes != recv.nbytes:
            raise InputError(f"{name}: sendbuf has {send.nbytes} bytes, recvbuf {recv.nbytes} "
                             "per rank; they must match")
        _same_type(send, recv, name)
    m = send if send is not None else recv
    call.nbytes = m.nbytes
    call.send = send.data if send is not None else recv.data[rank * m.nbytes:
                                                             (rank + 1) * m.nbytes]
    call.sig, call.fields = (root, m.nbytes, sigcode(m.typesig)), ("root", "piece size",
                                                                  "datatype")
    return call


def allgather(sendbuf, recvbuf, rank, size, v=False):
    """``Allgather``/``Allgatherv``: every ``sendbuf`` into every ``recvbuf``."""
    name = "Allgatherv" if v else "Allgather"
    recv = (_vector(recvbuf, size, f"{name} recvbuf", "recv") if v else
            _simple(recvbuf, f"{name} recvbuf", "recv", size))
    send = None if _in_place(sendbuf) else _simple(sendbuf, f"{name} sendbuf", "send")
    # in place, this rank's own piece is read from recvbuf: packed before the run too
    call = Call(name.lower(), 0, sends=[send] if send else [recv], recvs=[recv], recv=recv.data)
    if v:
        if send is None:
            a = int(recv.byte_displs[rank])
            call.send = recv.data[a:a + int(recv.byte_counts[rank])]
        else:
            call.send = send.data
        call.vector = {"send": send.nbytes if send is not None else int(recv.byte_counts[rank]),
                       "recv": recv.byte_counts, "rdispls": recv.byte_displs,
                       "typesig": sigcode(recv.typesig)}
        return call
    if send is not None:
        if send.nbytes != recv.nbytes:
            raise InputError(f"{name}: recvbuf has {recv.nbytes} bytes per rank, sendbuf "
                             f"{send.nbytes}; they must match")
        _same_type(send, recv, name)
    call.send = send.data if send is not None else \
        recv.data[rank * recv.nbytes:(rank + 1) * recv.nbytes]
    call.nbytes = recv.nbytes
    call.sig, call.fields = (recv.nbytes, sigcode(recv.typesig)), ("piece size", "datatype")
    return call


def alltoall(sendbuf, recvbuf, rank, size, v=False):
    """``Alltoall``/``Alltoallv``: piece ``j`` of every ``sendbuf`` to rank ``j``."""
    name = "Alltoallv" if v else "Alltoall"
    recv = (_vector(recvbuf, size, f"{name} recvbuf", "recv") if v else
            _simple(recvbuf, f"{name} recvbuf", "recv", size))
    if _in_place(sendbuf):  # the data to send is taken from recvbuf
        send = None
    else:
        send = (_vector(sendbuf, size, f"{name} sendbuf", "send") if v else
                _simple(sendbuf, f"{name} sendbuf", "send", size))
    call = Call(name.lower(), 0, sends=[send] if send else [recv], recvs=[recv], recv=recv.data,
                send=recv.data if send is None else send.data)
    if v:
        src = send if send is not None else recv
        call.vector = {"send": src.byte_counts, "recv": recv.byte_counts,
                       "sdispls": src.byte_displs, "rdispls": recv.byte_displs,
                       "typesig": sigcode(recv.typesig), "pair": True}
        return call
    if send is not None:
        if send.nbytes != recv.nbytes:
            raise InputError(f"{name}: sendbuf has {send.nbytes} bytes per rank, recvbuf "
                             f"{recv.nbytes}; they must match")
        _same_type(send, recv, name)
    call.nbytes = recv.nbytes
    call.sig, call.fields = (recv.nbytes, sigcode(recv.typesig)), ("piece size", "datatype")
    return call


def alltoallw(sendbuf, recvbuf, rank, size):
    """``Alltoallw``: a count, byte displacement and datatype per rank on both sides."""
    recv = msgbuffer.wvector(recvbuf, size, role="recv", what="Alltoallw recvbuf")
    send = None if _in_place(sendbuf) else \
        msgbuffer.wvector(sendbuf, size, role="send", what="Alltoallw sendbuf")
    src = send if send is not None else recv
    call = Call("alltoallw", 0, sends=[src], recvs=[recv], recv=recv.data, send=src.data)
    sigs = [sigcode(src.block_typesig(j)) for j in range(size)]
    rsigs = [sigcode(recv.block_typesig(j)) for j in range(size)]
    call.vector = {"send": src.byte_counts, "recv": recv.byte_counts,
                   "sdispls": src.byte_displs, "rdispls": recv.byte_displs,
                   "typesig": 0, "pair": True, "sendsigs": sigs, "recvsigs": rsigs}
    return call


def _type_name(dt):
    """Name a datatype alike on every rank: MPI's name, else its kind (``a derived STRUCT``)."""
    name = dt.Get_name()
    if name:
        return name
    from mpi4py import MPI

    kinds = {getattr(MPI, n): n[len("COMBINER_"):] for n in dir(MPI) if n.startswith("COMBINER_")}
    return f"a derived {kinds.get(dt.combiner, 'unknown')} datatype"


def _reduction_dtype(m, name):
    """Return the numpy element type a reduction combines ``m``'s data as."""
    if m.dtype is None:
        raise InputError(f"{name}: a reduction needs a datatype made of one predefined type "
                         f"(got {_type_name(m.datatype)})")
    dtype = m.dtype
    if dtype.names is not None and m.packed:  # a pair type with padding (MPI.DOUBLE_INT):
        fields = [dtype.fields[n][0] for n in dtype.names]  # packed, its members back to back
        offsets = np.cumsum([0] + [f.itemsize for f in fields[:-1]]).tolist()
        dtype = np.dtype({"names": list(dtype.names), "formats": fields, "offsets": offsets,
                          "itemsize": sum(f.itemsize for f in fields)})
    return dtype


def _cro(sendbuf, recvbuf, name):
    """Send and receive messages of an allreduce-like call (``for_cro_args``)."""
    recv = _simple(recvbuf, f"{name} recvbuf", "recv")
    if _in_place(sendbuf):
        send = None
    else:
        send = _simple(sendbuf, f"{name} sendbuf", "send")
        if _aliased(send, recv):  # mpi4py: a sendbuf at the recvbuf's address is in place
            return None, recv
        if send.nbytes != recv.nbytes:
            raise InputError(f"{name}: sendbuf has {send.nbytes} bytes, recvbuf {recv.nbytes}; "
                             "they must match")
        _same_type(send, recv, name)
    return send, recv


def _aliased(send, recv):
    """True when two messages start at the same address (mpi4py's ``sbuf == rbuf``)."""
    return send.data.size and recv.data.size and not (send.packed or recv.packed) and \
        send.data.ctypes.data == recv.data.ctypes.data


def _reduction(name, send, recv, root, sig_root=()):
    m = send if send is not None else recv
    dtype = _reduction_dtype(m, name.capitalize() if name.islower() else name)
    call = Call(name, root, m.nbytes, sends=[send] if send is not None else [recv],
                recvs=[recv] if recv is not None else [],
                send=(send if send is not None else recv).data,
                recv=None if recv is None else recv.data, dtype=dtype, itemsize=dtype.itemsize)
    call.sig = sig_root + (m.nbytes, sigcode(m.typesig))
    call.fields = ("root",) * len(sig_root) + ("message size", "datatype")
    return call


def reduce(sendbuf, recvbuf, root, rank, size):
    """``Reduce``: ``recvbuf`` significant at the root only, where ``sendbuf`` may be in place."""
    root = root_rank(root, size)
    if rank == root:
        send, recv = _cro(sendbuf, recvbuf, "Reduce")
    else:
        send, recv = _simple(sendbuf, "Reduce sendbuf", "send"), None
    return _reduction("reduce", send, recv, root, (root,))


def allreduce(sendbuf, recvbuf, name="allreduce"):
    """``Allreduce`` (and ``Scan``, ``Exscan``: ``name``): ``sendbuf`` may be in place."""
    send, recv = _cro(sendbuf, recvbuf, name.capitalize())
    return _reduction(name, send, recv, 0)


def scan(sendbuf, recvbuf, exclusive=False):
    """``Scan``/``Exscan``: read as ``Allreduce``."""
    return allreduce(sendbuf, recvbuf, "exscan" if exclusive else "scan")


def reduce_scatter_block(sendbuf, recvbuf, rank, size):
    """``Reduce_scatter_block``: ``size`` blocks of ``sendbuf``, block ``r`` reduced into rank ``r``."""
    name = "Reduce_scatter_block"
    if _in_place(sendbuf):
        recv = _simple(recvbuf, f"{name} recvbuf", "recv", size)
        whole = recv
        send = None
    else:
        recv = _simple(recvbuf, f"{name} recvbuf", "recv")
        send = whole = _simple(sendbuf, f"{name} sendbuf", "send", size)
        if send.nbytes != recv.nbytes:
            raise InputError(f"{name}: sendbuf has {send.nbytes} bytes per rank, recvbuf "
                             f"{recv.nbytes}; they must match")
        _same_type(send, recv, name)
    dtype = _reduction_dtype(whole, name)
    n = whole.nbytes
    call = Call("reduce_scatter_block", 0, n, sends=[whole], recvs=[recv], send=whole.data,
                recv=recv.data[:n], dtype=dtype, itemsize=dtype.itemsize)
    call.sig, call.fields = (n, sigcode(whole.typesig)), ("block size", "datatype")
    return call


def reduce_scatter(sendbuf, recvbuf, recvcounts, rank, size):
    """``Reduce_scatter``: block ``r`` of ``recvcounts[r]`` elements reduced into rank ``r``.

    ``recvcounts=None`` (mpi4py) takes every rank's receive count (learned over the
    links by the communicator: ``vector["recv"]`` is this rank's own).
    """
    name = "Reduce_scatter"
    recv = _simple(recvbuf, f"{name} recvbuf", "recv")
    send = None if _in_place(sendbuf) else _simple(sendbuf, f"{name} sendbuf", "send")
    if send is not None and _aliased(send, recv):  # as mpi4py: in place
        send = None
    whole = send if send is not None else recv
    if send is not None and recv.typesig is not None and send.typesig is not None and \
            send.datatype.Get_size() != recv.datatype.Get_size():
        raise InputError(f"{name}: the send and receive datatypes do not match")
    dtype = _reduction_dtype(whole, name)
    item = whole.datatype.Get_size()
    counts = None
    if recvcounts is not None:
        counts = np.asarray(recvcounts)
        if counts.shape != (size,) or not np.issubdtype(counts.dtype, np.integer) or \
                (counts < 0).any():
            raise InputError(f"{name}: recvcounts must be {size} non-negative integers")
        counts = counts.astype(np.int64)
        total = int(counts.sum())
        have = whole.count
        if have != total:
            raise InputError(f"{name}: {'sendbuf' if send is not None else 'recvbuf'} has "
                             f"{have} elements, sum(recvcounts) is {total}")
        if send is not None and recv.count != counts[rank]:
            raise InputError(f"{name}: recvbuf has {recv.count} elements, recvcounts[{rank}] "
                             f"is {int(counts[rank])}")
    elif send is None:
        raise InputError(f"{name}: MPI.IN_PLACE needs recvcounts")
    # in place, recvbuf holds the whole input and its first recvcounts[rank] elements the result
    mine = recv.count if send is not None else int(counts[rank])
    call = Call("reduce_scatter", 0, sends=[whole], recvs=[recv], send=whole.data,
                recv=recv.data[:mine * item], dtype=dtype, itemsize=dtype.itemsize)
    call.vector = {"counts": None if counts is None else counts * item,
                   "recv": mine * item, "item": item,
                   "typesig": sigcode(whole.typesig) if whole.count else 0}
    return call


def barrier():
    """``Barrier``: nothing to read."""
    return Call("barrier", 0, 0, send=np.zeros(0, np.uint8), recv=np.zeros(0, np.uint8),
                sig=(0,), fields=("barrier",), dtype=np.dtype(np.uint8))


def crc(array):
    """Return a CRC-32 of an int64 array (a count vector), for agreement."""
    return zlib.crc32(np.ascontiguousarray(array, dtype=np.int64).tobytes())


def crc_columns(matrix):
    """Return :func:`crc` of each column of a 2-D array, as a list (one copy, not one a column).

    >>> m = np.arange(6).reshape(2, 3)
    >>> crc_columns(m) == [crc(m[:, b]) for b in range(3)]
    True
    """
    rows, cols = np.shape(matrix)
    if rows == 0 or cols == 0:
        return [zlib.crc32(b"")] * cols
    columns = memoryview(np.ascontiguousarray(np.asarray(matrix).T, dtype=np.int64)).cast("B")
    n = 8 * rows
    return [zlib.crc32(columns[i:i + n]) for i in range(0, len(columns), n)]
