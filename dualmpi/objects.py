"""Object (pickle) collectives built on a communicator's buffer collectives.

A call pickles, exchanges the pickles' sizes, then their bytes, as mpi4py's own lowercase
methods do.  On a communicator that keeps a :class:`Scratch` (``dualmpi.Comm``:
``net._objects``) the buffer collectives get the same arrays on every call, so a call whose
pickles have the sizes of the one before repeats it from the communicator's memory instead of
being read, agreed and planned afresh (new arrays every call made every such call a new one:
40–80 times MPI's own on two ranks).
"""

import operator

import numpy as np

from .errors import InputError, mpi_error

__all__ = [
    "Scratch",
    "barrier",
    "bcast",
    "scatter",
    "gather",
    "allgather",
    "alltoall",
    "reduce",
    "allreduce",
    "scan",
    "exscan",
]

# A rank that cannot take part sends one of these codes in place of a pickle's size; every
# rank that receives a code raises InputError naming the rank, so no rank is left waiting.
_PICKLE = -1
_LENGTH = -2
_OP = -3
_COMBINE = -4

_WHAT = {
    _PICKLE: "could not pickle its object",
    _LENGTH: "did not pass one item per rank",
    _OP: "passed an op that is not callable",
    _COMBINE: "could not combine the objects",
}

#: At most this many failing ranks are named in one message.
_NAMED = 4


class Scratch:
    """The arrays a communicator's object collectives hand its buffer collectives, kept.

    ``dualmpi.Comm`` remembers a call by its buffer objects and counts; the pickles' bytes
    and sizes in arrays of their own each call made every object collective a call never
    seen.  Here each role (``"gather.recv"``, ``"sizes"``, ...) keeps one array: int64
    arrays of an exact length, and byte buffers of exactly the length asked for — the same
    view object as long as the length is (what a remembered call is matched by) — of an array
    grown to the next power of two up to 64 KiB and to the length asked for above, made anew
    (at the length asked for) when a call needs less than a quarter of more than 64 KiB.  A
    buffer of more than :data:`KEEP` bytes is the call's own, as before: a program's one
    large object leaves no memory held behind it.

    Examples
    --------
    >>> s = Scratch()
    >>> a = s.bytes("recv", 100); a.size, s.bytes("recv", 100) is a, a.base.size
    (100, True, 128)
    >>> b = s.bytes("recv", 120); b.base is a.base, s.bytes("recv", 100) is a
    (True, False)
    >>> s.bytes("recv", 1 << 20).base.size, s.bytes("recv", 1000).base.size
    (1048576, 1024)
    >>> big = s.bytes("recv", Scratch.KEEP + 1); s.bytes("recv", Scratch.KEEP + 1) is big
    False
    >>> s.ints("sizes", 4) is s.ints("sizes", 4), s.ints("sizes", 4).dtype
    (True, dtype('int64'))
    """

    __slots__ = ("_arrays", "_views")

    #: Byte arrays up to this size are rounded up to a power of two; larger ones are not,
    #: and are made anew when a call needs less than a quarter of them.
    ROUND = 1 << 16
    #: Byte buffers of more than this many bytes are not kept (made for the call alone).
    KEEP = 1 << 22

    def __init__(self):
        self._arrays, self._views = {}, {}

    def ints(self, role, n):
        """Return the int64 array of ``n`` items kept for ``role``."""
        a = self._arrays.get(role)
        if a is None or a.size != n:
            a = self._arrays[role] = np.zeros(n, dtype=np.int64)
        return a

    def bytes(self, role, n):
        """Return the uint8 view of ``n`` bytes kept for ``role`` (a new array above
        :data:`KEEP` bytes, what the role kept let go)."""
        view = self._views.get(role)
        if view is not None and view.size == n:
            return view
        if n > self.KEEP:
            self._views.pop(role, None)
            self._arrays.pop(role, None)
            return np.empty(n, dtype=np.uint8)
        a = self._arrays.get(role)
        if a is None or a.size < n or (a.size > self.ROUND and n < a.size // 4):
            size = n if n > self.ROUND else 1 << (max(n, 1) - 1).bit_length()
            a = self._arrays[role] = np.empty(size, dtype=np.uint8)
        view = self._views[role] = a[:n]
        return view

    def put(self, role, data):
        """Return the byte view kept for ``role`` holding ``data`` (bytes)."""
        view = self.bytes(role, len(data))
        memoryview(view)[:] = data
        return view


def _scratch(net):
    """Return ``net``'s :class:`Scratch`, or a new one (a communicator that keeps none)."""
    scratch = getattr(net, "_objects", None)
    return Scratch() if scratch is None else scratch


_MPI = None


def _mpi():
    global _MPI
    if _MPI is None:
        from mpi4py import MPI

        _MPI = MPI
    return _MPI


def _root(net, root, name):
    """Return ``root`` as an int in ``range(size)`` or raise InputError (every rank alike)."""
    size = net.Get_size()
    try:
        r = operator.index(root)
    except TypeError:
        raise InputError(f"{name}: root must be an integer rank, got {root!r}") from None
    if not 0 <= r < size:
        raise mpi_error(f"{name}: root {r} is not a rank of this communicator (0..{size - 1})",
                        "ERR_ROOT")
    return r


class _Failure:
    """What went wrong on this rank before or during a collective: a code and the cause."""

    def __init__(self, code, detail, cause=None):
        self.code = code
        self.detail = detail
        self.cause = cause


def _dumps(MPI, obj):
    """Return ``(data, None)``, the pickle of ``obj``, or ``(None, failure)``."""
    try:
        return MPI.pickle.dumps(obj), None
    except Exception as exc:  # pickle raises PicklingError, TypeError, AttributeError, ...
        return None, _Failure(_PICKLE, f"{type(exc).__name__}: {exc}", exc)


def _dumpv(MPI, seq, size):
    """Return ``(pickles, None)``, one per rank, of the items of ``seq``, or ``(None, failure)``.

    As mpi4py: ``None`` stands for ``size`` Nones and any iterable is listed.
    """
    if seq is None:
        items = [None] * size
    else:
        try:
            items = list(seq)
        except TypeError as exc:
            return None, _Failure(_LENGTH, f"{type(seq).__name__} is not a sequence", exc)
        if len(items) != size:
            return None, _Failure(_LENGTH, f"expected one item per rank ({size}), "
                                           f"got {len(items)}")
    out = []
    for item in items:
        data, failure = _dumps(MPI, item)
        if failure is not None:
            return None, failure
        out.append(data)
    return out, None


def _loads(MPI, view):
    """Unpickle a copy of ``view`` (an empty pickle is ``None``, as in mpi4py).

    The copy is the unpickler's own, as mpi4py gives it a buffer of its own: ``view`` lies in
    an array the communicator's next call writes again (:class:`Scratch`), and a ``loads``
    installed with ``MPI.pickle.__init__`` may keep what it is given.
    """
    return MPI.pickle.loads(bytes(view)) if len(view) else None


def _loadv(MPI, buf, counts):
    """Unpickle the pickles laid one after another in ``buf`` with byte ``counts``."""
    view = memoryview(buf)
    out, start = [], 0
    for count in counts:
        out.append(_loads(MPI, view[start:start + count]))
        start += count
    return out


def _check(net, name, codes, failure):
    """Raise InputError on this rank if any rank sent a code (``codes``: rank -> size or code).

    Every rank that holds the same codes raises the same message; the rank where a failure
    happened adds its cause and chains the original exception.
    """
    bad = [(r, int(c)) for r, c in codes if c < 0]
    if not bad:
        return
    parts = [f"rank {r} {_WHAT[c]}" for r, c in bad[:_NAMED]]
    if len(bad) > _NAMED:
        parts.append(f"{len(bad) - _NAMED} more ranks failed")
    message = f"{name}: " + "; ".join(parts)
    cause = None
    if failure is not None:
        message += f" (here, rank {net.Get_rank()}: {failure.detail})"
        cause = failure.cause
    raise InputError(message) from cause


def _sizes(data, failure):
    """Return this rank's size entry: the pickle's length, or the failure's code."""
    return failure.code if failure is not None else len(data)


def _gather_bytes(net, MPI, name, data, failure, root):
    """Gather the pickles at ``root``: the buffer and the counts (a list) there, ``(None,
    None)`` elsewhere.

    The sizes are all-gathered (not gathered), so a rank's failure reaches every rank.
    """
    scratch = _scratch(net)
    mine, sizes = scratch.ints("mine", 1), scratch.ints("sizes", net.Get_size())
    mine[0] = _sizes(data, failure)
    net.Allgather(mine, sizes)
    counts = sizes.tolist()
    if min(counts) < 0:
        _check(net, name, enumerate(counts), failure)
    send = scratch.put("gather.send", data)
    if net.Get_rank() != root:
        net.Gatherv(send, None, root)
        return None, None
    buf = scratch.bytes("gather.recv", sum(counts))
    net.Gatherv(send, [buf, sizes, MPI.BYTE], root)
    return buf, counts


def _bcast_bytes(net, MPI, name, data, failure, root):
    """Broadcast ``root``'s pickle (or its failure code); return the pickle's bytes."""
    rank, scratch = net.Get_rank(), _scratch(net)
    head = scratch.ints("head", 1)
    head[0] = _sizes(data, failure) if rank == root else 0
    net.Bcast(head, root)
    n = int(head[0])
    if n < 0:
        _check(net, name, [(root, n)], failure)
    buf = scratch.put("bcast", data) if rank == root else scratch.bytes("bcast", n)
    net.Bcast(buf, root)
    return buf


def _scatter_bytes(net, MPI, name, pickles, failure, root):
    """Scatter ``root``'s pickles (or its failure code); return this rank's pickle's bytes."""
    size, scratch = net.Get_size(), _scratch(net)
    counts = sendbuf = None
    if net.Get_rank() == root:
        counts = scratch.ints("counts", size)
        if failure is not None:
            counts[:] = failure.code
        else:
            counts[:] = [len(p) for p in pickles]
    head = scratch.ints("head", 1)
    net.Scatter(counts, head, root)
    if head[0] < 0:
        _check(net, name, [(root, int(head[0]))], failure)
    if counts is not None:
        sendbuf = [scratch.put("scatter.send", b"".join(pickles)), counts, MPI.BYTE]
    buf = scratch.bytes("scatter.recv", int(head[0]))
    net.Scatterv(sendbuf, buf, root)
    return buf


def _fold(items, op):
    """Return ``items[0] op items[1] op ...``, combined left to right (rank order)."""
    result = items[0]
    for item in items[1:]:
        result = op(result, item)
    return result


def _contribute(MPI, sendobj, op):
    """Return this rank's pickle for a reduction and its failure (a non-callable op first)."""
    if not callable(op):
        return None, _Failure(_OP, f"{type(op).__name__!r} object is not callable")
    return _dumps(MPI, sendobj)


def _default_op(MPI, op):
    """Return ``op``, or ``MPI.SUM`` for ``None``."""
    return MPI.SUM if op is None else op


def barrier(net):
    """Block until every rank of ``net`` has called it (mirrors ``Comm.barrier``).

    Parameters
    ----------
    net : communicator
        Any communicator with mpi4py's ``Barrier``.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> barrier(MPI.COMM_WORLD) is None
    True
    """
    net.Barrier()


def bcast(net, obj, root=0):
    """Broadcast ``root``'s Python object to every rank (mirrors ``Comm.bcast``).

    The root pickles ``obj`` (the other ranks' ``obj`` is ignored), broadcasts its size as
    one int64 and then its bytes.

    Parameters
    ----------
    net : communicator
        Any communicator with mpi4py's ``Bcast``, ``Get_rank`` and ``Get_size``.
    obj : object
        The object to send, significant at ``root`` only.
    root : int
        The sending rank.

    Returns
    -------
    object
        An unpickled copy of ``root``'s ``obj`` on every rank, ``root`` included.

    Raises
    ------
    InputError
        On every rank if ``root`` cannot pickle ``obj`` or ``root`` is not a rank.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> net = MPI.COMM_WORLD
    >>> bcast(net, {"a": [1, 2]} if net.Get_rank() == 0 else None)
    {'a': [1, 2]}
    """
    MPI = _mpi()
    root = _root(net, root, "bcast")
    data = failure = None
    if net.Get_rank() == root:
        data, failure = _dumps(MPI, obj)
    return _loads(MPI, _bcast_bytes(net, MPI, "bcast", data, failure, root))


def scatter(net, sendobj, root=0):
    """Send item ``i`` of ``root``'s sequence to rank ``i`` (mirrors ``Comm.scatter``).

    The root pickles each item (the other ranks' ``sendobj`` is ignored), scatters the sizes
    as int64 and then the bytes with ``Scatterv``.

    Parameters
    ----------
    net : communicator
        Any communicator with mpi4py's ``Scatter``, ``Scatterv``, ``Get_rank`` and ``Get_size``.
    sendobj : iterable or None
        At ``root``, ``size`` objects (any iterable), or ``None`` for ``size`` Nones.
    root : int
        The sending rank.

    Returns
    -------
    object
        This rank's item.

    Raises
    ------
    InputError
        On every rank if ``root``'s ``sendobj`` does not hold one item per rank, an item
        cannot be pickled, or ``root`` is not a rank.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> net = MPI.COMM_WORLD
    >>> items = [f"item {i}" for i in range(net.Get_size())]
    >>> scatter(net, items if net.Get_rank() == 0 else None) == items[net.Get_rank()]
    True
    """
    MPI = _mpi()
    root = _root(net, root, "scatter")
    pickles = failure = None
    if net.Get_rank() == root:
        pickles, failure = _dumpv(MPI, sendobj, net.Get_size())
    return _loads(MPI, _scatter_bytes(net, MPI, "scatter", pickles, failure, root))


def gather(net, sendobj, root=0):
    """Collect every rank's Python object at ``root`` (mirrors ``Comm.gather``).

    Every rank pickles ``sendobj``; the sizes are all-gathered as int64 (so that a rank's
    failure to pickle stops every rank), then the bytes go to ``root`` with ``Gatherv``.

    Parameters
    ----------
    net : communicator
        Any communicator with mpi4py's ``Allgather``, ``Gatherv``, ``Get_rank`` and ``Get_size``.
    sendobj : object
        This rank's object.
    root : int
        The receiving rank.

    Returns
    -------
    list or None
        At ``root``, the objects in rank order; ``None`` elsewhere.

    Raises
    ------
    InputError
        On every rank if a rank cannot pickle its object or ``root`` is not a rank.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> net = MPI.COMM_WORLD
    >>> got = gather(net, net.Get_rank() ** 2)
    >>> got == [r ** 2 for r in range(net.Get_size())] if net.Get_rank() == 0 else got is None
    True
    """
    MPI = _mpi()
    root = _root(net, root, "gather")
    data, failure = _dumps(MPI, sendobj)
    buf, sizes = _gather_bytes(net, MPI, "gather", data, failure, root)
    return None if buf is None else _loadv(MPI, buf, sizes)


def allgather(net, sendobj):
    """Collect every rank's Python object on every rank (mirrors ``Comm.allgather``).

    Every rank pickles ``sendobj``; the sizes are all-gathered as int64, then the bytes
    with ``Allgatherv``.

    Parameters
    ----------
    net : communicator
        Any communicator with mpi4py's ``Allgather``, ``Allgatherv`` and ``Get_size``.
    sendobj : object
        This rank's object.

    Returns
    -------
    list
        The objects in rank order.

    Raises
    ------
    InputError
        On every rank if a rank cannot pickle its object.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> net = MPI.COMM_WORLD
    >>> allgather(net, net.Get_rank()) == list(range(net.Get_size()))
    True
    """
    MPI = _mpi()
    scratch = _scratch(net)
    data, failure = _dumps(MPI, sendobj)
    mine, sizes = scratch.ints("mine", 1), scratch.ints("sizes", net.Get_size())
    mine[0] = _sizes(data, failure)
    net.Allgather(mine, sizes)
    counts = sizes.tolist()
    if min(counts) < 0:
        _check(net, "allgather", enumerate(counts), failure)
    buf = scratch.bytes("allgather.recv", sum(counts))
    net.Allgatherv(scratch.put("allgather.send", data), [buf, sizes, MPI.BYTE])
    return _loadv(MPI, buf, counts)


def alltoall(net, sendobj):
    """Send item ``j`` of every rank's sequence to rank ``j`` (mirrors ``Comm.alltoall``).

    Every rank pickles its items; the sizes are exchanged with ``Alltoall`` as int64 (a
    rank that fails sends its failure code to every rank), then the bytes with ``Alltoallv``.

    Parameters
    ----------
    net : communicator
        Any communicator with mpi4py's ``Alltoall``, ``Alltoallv`` and ``Get_size``.
    sendobj : iterable or None
        ``size`` objects (any iterable), item ``j`` for rank ``j``, or ``None`` for ``size``
        Nones.

    Returns
    -------
    list
        The item each rank sent to this rank, in rank order.

    Raises
    ------
    InputError
        On every rank if a rank's ``sendobj`` does not hold one item per rank or an item
        cannot be pickled.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> net = MPI.COMM_WORLD
    >>> rank, size = net.Get_rank(), net.Get_size()
    >>> alltoall(net, [(rank, j) for j in range(size)]) == [(i, rank) for i in range(size)]
    True
    """
    MPI = _mpi()
    size, scratch = net.Get_size(), _scratch(net)
    pickles, failure = _dumpv(MPI, sendobj, size)
    scounts, rcounts = scratch.ints("counts", size), scratch.ints("sizes", size)
    if failure is not None:
        scounts[:] = failure.code
    else:
        scounts[:] = [len(p) for p in pickles]
    net.Alltoall(scounts, rcounts)
    counts = rcounts.tolist()
    if min(counts) < 0:
        _check(net, "alltoall", enumerate(counts), failure)
    buf = scratch.bytes("alltoall.recv", sum(counts))
    net.Alltoallv([scratch.put("alltoall.send", b"".join(pickles)), scounts, MPI.BYTE],
                  [buf, rcounts, MPI.BYTE])
    return _loadv(MPI, buf, counts)


def _reduce_at(net, MPI, name, sendobj, op, root, combine):
    """Gather the pickles at ``root`` and return ``combine(objects, op)`` there.

    Return ``(result, failure)`` at ``root`` and ``(None, None)`` elsewhere; a failure to
    unpickle or combine at ``root`` is returned, not raised, so the caller can pass it on.
    """
    data, failure = _contribute(MPI, sendobj, op)
    buf, sizes = _gather_bytes(net, MPI, name, data, failure, root)
    if buf is None:
        return None, None
    try:
        return combine(_loadv(MPI, buf, sizes), op), None
    except Exception as exc:  # the user's op, an unpickler or a pickler raised
        return None, _Failure(_COMBINE, f"{type(exc).__name__}: {exc}", exc)


def reduce(net, sendobj, op=None, root=0):
    """Combine every rank's Python object with ``op`` at ``root`` (mirrors ``Comm.reduce``).

    The objects are gathered at ``root`` (as by :func:`gather`) and folded there.

    Parameters
    ----------
    net : communicator
        Any communicator with mpi4py's ``Allgather``, ``Gatherv``, ``Get_rank`` and ``Get_size``.
    sendobj : object
        This rank's object.
    op : callable, optional
        An ``MPI.Op`` (default ``MPI.SUM``; mpi4py's ops are callable on Python objects,
        ``MPI.MAXLOC`` on ``(value, index)`` pairs) or any function of two objects.  The
        objects are combined left to right in rank order, ``(x0 op x1) op x2 ...``, so
        ``op`` need not be commutative.
    root : int
        The receiving rank.

    Returns
    -------
    object or None
        At ``root``, ``x0 op x1 op ... op x(size-1)`` (an unpickled copy of ``x0`` on one
        rank); ``None`` elsewhere.

    Raises
    ------
    InputError
        On every rank if a rank cannot pickle its object or passed an ``op`` that is not
        callable, or ``root`` is not a rank; at ``root`` alone (the other ranks have
        nothing left to wait for) if ``op`` raises.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> net = MPI.COMM_WORLD
    >>> got = reduce(net, str(net.Get_rank()), op=lambda a, b: a + b)
    >>> got == "".join(map(str, range(net.Get_size()))) if net.Get_rank() == 0 else got is None
    True
    """
    MPI = _mpi()
    root = _root(net, root, "reduce")
    result, failure = _reduce_at(net, MPI, "reduce", sendobj, _default_op(MPI, op), root,
                                 _fold)
    if failure is not None:
        _check(net, "reduce", [(root, failure.code)], failure)
    return result


def allreduce(net, sendobj, op=None):
    """Combine every rank's Python object with ``op`` on every rank (mirrors ``Comm.allreduce``).

    The objects are gathered at rank 0 and folded there; the result is broadcast (its size
    as one int64, then its pickle), so every rank holds an unpickled copy of the same
    bytes.  Rank 0 combines once instead of every rank combining everything, and the
    network carries a gather and a broadcast instead of an all-gather of every object.

    Parameters
    ----------
    net : communicator
        Any communicator with mpi4py's ``Allgather``, ``Gatherv``, ``Bcast``, ``Get_rank``
        and ``Get_size``.
    sendobj : object
        This rank's object.
    op : callable, optional
        As for :func:`reduce`: an ``MPI.Op`` (default ``MPI.SUM``) or any function of two
        objects, applied left to right in rank order.

    Returns
    -------
    object
        ``x0 op x1 op ... op x(size-1)``.

    Raises
    ------
    InputError
        On every rank if a rank cannot pickle its object or passed an ``op`` that is not
        callable, or if ``op`` raises (or its result cannot be pickled) on rank 0.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> net = MPI.COMM_WORLD
    >>> allreduce(net, [net.Get_rank()], op=lambda a, b: a + b) == list(range(net.Get_size()))
    True
    """
    MPI = _mpi()
    result, failure = _reduce_at(net, MPI, "allreduce", sendobj, _default_op(MPI, op), 0,
                                 lambda items, op: MPI.pickle.dumps(_fold(items, op)))
    return _loads(MPI, _bcast_bytes(net, MPI, "allreduce", result, failure, 0))


def _prefixes(MPI, items, op, exclusive):
    """Return the pickles of the rank-order prefixes of ``items``, one per rank.

    Inclusive: ``x0``, ``x0 op x1``, ...; exclusive: ``None``, ``x0``, ``x0 op x1``, ...
    (the whole fold is not formed).
    """
    n = len(items)
    acc = items[0]
    out = [None, acc] if exclusive else [acc]
    for item in items[1:n - 1 if exclusive else n]:
        acc = op(acc, item)
        out.append(acc)
    return [MPI.pickle.dumps(x) for x in out[:n]]


def _scan(net, name, sendobj, op, exclusive):
    """Gather at rank 0, form the prefixes there, scatter them back; return this rank's."""
    MPI = _mpi()
    pickles, failure = _reduce_at(net, MPI, name, sendobj, _default_op(MPI, op), 0,
                                  lambda items, op: _prefixes(MPI, items, op, exclusive))
    return _loads(MPI, _scatter_bytes(net, MPI, name, pickles, failure, 0))


def scan(net, sendobj, op=None):
    """Inclusive prefix reduction of the ranks' Python objects (mirrors ``Comm.scan``).

    The objects are gathered at rank 0, which forms every prefix in rank order and
    scatters them back (its size as int64, then its pickle) -- mpi4py's own scheme when
    its fast reductions are off.

    Parameters
    ----------
    net : communicator
        Any communicator with mpi4py's ``Allgather``, ``Gatherv``, ``Scatter``,
        ``Scatterv``, ``Get_rank`` and ``Get_size``.
    sendobj : object
        This rank's object.
    op : callable, optional
        As for :func:`reduce`: an ``MPI.Op`` (default ``MPI.SUM``) or any function of two
        objects, applied left to right in rank order.

    Returns
    -------
    object
        On rank ``i``, ``x0 op x1 op ... op xi``.

    Raises
    ------
    InputError
        On every rank if a rank cannot pickle its object or passed an ``op`` that is not
        callable, or if ``op`` raises (or a prefix cannot be pickled) on rank 0.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> net = MPI.COMM_WORLD
    >>> scan(net, 1) == net.Get_rank() + 1
    True
    """
    return _scan(net, "scan", sendobj, op, False)


def exscan(net, sendobj, op=None):
    """Exclusive prefix reduction of the ranks' Python objects (mirrors ``Comm.exscan``).

    As :func:`scan`, each rank receiving the prefix of the ranks before it.

    Parameters
    ----------
    net : communicator
        Any communicator with mpi4py's ``Allgather``, ``Gatherv``, ``Scatter``,
        ``Scatterv``, ``Get_rank`` and ``Get_size``.
    sendobj : object
        This rank's object.
    op : callable, optional
        As for :func:`reduce`: an ``MPI.Op`` (default ``MPI.SUM``) or any function of two
        objects, applied left to right in rank order.

    Returns
    -------
    object or None
        On rank ``i > 0``, ``x0 op x1 op ... op x(i-1)``; ``None`` on rank 0.

    Raises
    ------
    InputError
        On every rank if a rank cannot pickle its object or passed an ``op`` that is not
        callable, or if ``op`` raises (or a prefix cannot be pickled) on rank 0.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> net = MPI.COMM_WORLD
    >>> exscan(net, 1) == (net.Get_rank() or None)
    True
    """
    return _scan(net, "exscan", sendobj, op, True)
