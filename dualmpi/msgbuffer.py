"""Buffer arguments read as mpi4py reads them: counts, displacements and derived datatypes."""

# The rules mirror mpi4py 4.1.2 ``src/mpi4py/MPI.src/msgbuffer.pxi`` (message_simple,
# message_vector, message_vector_w and the ``_p_msg_cco.for_*`` callers) and ``asbuffer.pxi``
# (getbuffer: buffer protocol, then DLPack as in ``asdlpack.pxi`` -- see dualmpi.dlpack --,
# then the CUDA array interface, refused).  mpi4py is imported lazily: ``import
# dualmpi.msgbuffer`` does not initialize MPI.

import operator
import sys
import weakref
import zlib

import numpy as np

from dualmpi.dlpack import from_dlpack
from dualmpi.errors import InputError

__all__ = ["Message", "VMessage", "WMessage", "simple", "vector", "wvector", "in_place"]

_MPI = None


def _mpi():
    """Return ``mpi4py.MPI``, imported on first use."""
    global _MPI
    if _MPI is None:
        from mpi4py import MPI

        _MPI = MPI
    return _MPI


# --------------------------------------------------------------------------------------------
# Type signatures: a polynomial hash of the sequence of primitive types, computed from the
# datatype's constructor tree without flattening it (concatenation and repetition compose).

_P = (1 << 61) - 1  # Mersenne prime modulus
_B = 0x1F3D5B79A3C1E5  # base of the polynomial hash

#: Cache of predefined datatypes by handle (their handles never change): ``_TypeInfo``.
_NAMED = {}
#: Cache of the numpy dtypes of bare numpy arrays taken by the fast path: ``(datatype, info)``.
_NP_TYPES = {}
_EMPTY_U8 = np.zeros(0, np.uint8)
#: ``length -> (B**length, 1 / (B**length - 1))`` modulo ``_P``.
_POWERS = {}


def _repeat(h, length, n):
    """Hash of a sequence (hash ``h``, ``length`` primitives) repeated ``n`` times."""
    if n <= 0:
        return 0
    entry = _POWERS.get(length)
    if entry is None:
        r = pow(_B, length, _P)
        entry = _POWERS[length] = (r, pow(r - 1, -1, _P) if r != 1 else 0)
    r, inverse = entry
    geom = n % _P if r == 1 else (pow(r, n, _P) - 1) * inverse % _P  # 1 + r + ... + r**(n-1)
    return h * geom % _P


def _symbol(key):
    """The nonzero hash symbol of one primitive, from its canonical key."""
    return zlib.crc32(key.encode()) + 1


class _TypeInfo:
    """What a datatype's layout and signature are (one element; no MPI handle kept).

    ``h, length``: hash and length of the primitive sequence of one element.  ``unit``: key of
    the one predefined type the sequence repeats (``None`` when mixed, ``""`` when empty).
    ``dense``: the typemap is one ascending run of ``size`` bytes starting at ``true_lb``.
    ``wild``: contains ``MPI.PACKED`` (matches any signature).
    """

    __slots__ = ("size", "lb", "extent", "true_lb", "true_extent", "h", "length", "unit",
                 "np_dtype", "dense", "wild")

    def view_ok(self, n):
        """True when ``n`` elements at extent steps are one dense ascending run of bytes."""
        return self.dense and (n <= 1 or self.extent == self.size)

    def sig(self, n):
        """``(hash, primitives)`` of ``n`` elements, or ``None`` when it matches anything."""
        if self.wild:
            return None
        if n <= 0 or self.length == 0:
            return (0, 0)
        return (_repeat(self.h, self.length, n), self.length * n)


def _named_keys(dt):
    """Canonical primitive keys of a predefined datatype (a pair type gives two)."""
    try:
        typestr = dt.typestr
    except Exception:  # noqa: BLE001 - any datatype mpi4py cannot describe: name it
        typestr = ""
    if typestr.startswith("V") or not typestr:
        try:
            from mpi4py.util.dtlib import to_numpy_dtype

            npd = to_numpy_dtype(dt)
            if npd.fields:
                return [npd.fields[name][0].str.lstrip("<>|=") for name in npd.names]
        except Exception:  # noqa: BLE001 - no numpy equivalent: fall back to the MPI name
            pass
        return [dt.Get_name() or f"handle:{dt.handle}"]
    return [typestr]


def _np_dtype_of(dt):
    """numpy dtype of a predefined datatype, or ``None``."""
    try:
        from mpi4py.util.dtlib import to_numpy_dtype

        return np.dtype(to_numpy_dtype(dt))
    except Exception:  # noqa: BLE001 - no numpy equivalent
        return None


def _extents(info, dt):
    info.size = dt.Get_size()
    info.lb, info.extent = dt.Get_extent()
    info.true_lb, info.true_extent = dt.Get_true_extent()


def _named_info(dt, MPI):
    info = _NAMED.get(dt.handle)
    if info is not None:
        return info
    info = _TypeInfo()
    _extents(info, dt)
    keys = _named_keys(dt)
    h = 0
    for key in keys:
        h = (h * _B + _symbol(key)) % _P
    info.h, info.length = h, len(keys)
    info.unit = keys[0] if len(keys) == 1 else f"pair:{dt.Get_name()}"
    info.np_dtype = _np_dtype_of(dt)
    info.dense = info.true_extent == info.size
    info.wild = dt == MPI.PACKED
    _NAMED[dt.handle] = info
    return info


def _runs_dense(starts, lens, step, size):
    """True when blocks of ``lens`` copies (``step`` apart) from ``starts`` form one run."""
    starts = np.asarray(starts, dtype=np.int64)
    lens = np.asarray(lens, dtype=np.int64)
    keep = lens > 0
    starts, lens = starts[keep], lens[keep]
    if lens.sum() <= 1:
        return True
    if (lens > 1).any() and step != size:
        return False
    return bool(np.all(starts[1:] == starts[:-1] + lens[:-1] * size))


def _subarray_dense(sizes, subsizes, order, MPI):
    """True when a subarray's elements are consecutive in memory (in their typemap order)."""
    dims = list(range(len(sizes)))
    if order == MPI.ORDER_C:
        dims.reverse()  # fastest-varying dimension first
    partial = False
    for d in dims:
        if partial and subsizes[d] > 1:
            return False
        if subsizes[d] != sizes[d]:
            partial = True
    return True


def _derived_info(dt, MPI):
    info = _TypeInfo()
    _extents(info, dt)
    base, combiner, params = dt.decode()
    inner = params["datatypes"] if combiner == "STRUCT" else [base]
    try:
        subs = [_info(t, MPI) for t in inner]
        if combiner == "STRUCT":
            h, length, units, dense, wild = 0, 0, set(), True, False
            pos = None  # where the next nonempty block must start for a dense run
            for bl, disp, sub in zip(params["blocklengths"], params["displacements"], subs):
                if bl <= 0 or sub.size == 0:
                    continue
                h = (h * pow(_B, sub.length * bl, _P) + _repeat(sub.h, sub.length, bl)) % _P
                length += sub.length * bl
                units.add(sub.unit)
                wild = wild or sub.wild
                if not sub.dense or (bl > 1 and sub.extent != sub.size):
                    dense = False
                start = disp + sub.true_lb
                if pos is not None and start != pos:
                    dense = False
                pos = start + bl * sub.size
            info.h, info.length, info.wild, info.dense = h, length, wild, dense
            info.unit = units.pop() if len(units) == 1 else ("" if not units else None)
            info.np_dtype = next((s.np_dtype for s in subs if s.unit == info.unit), None)
            return info
        sub = subs[0]
        copies = info.size // sub.size if sub.size else 0
        info.h = _repeat(sub.h, sub.length, copies)
        info.length = sub.length * copies
        info.unit = sub.unit if copies else ""
        info.np_dtype = sub.np_dtype
        info.wild = sub.wild
        ext, size = sub.extent, sub.size
        if info.size == 0:
            info.dense = True
        elif not sub.dense:
            info.dense = False
        elif combiner in ("DUP", "RESIZED"):
            info.dense = True
        elif combiner == "CONTIGUOUS":
            info.dense = params["count"] <= 1 or ext == size
        elif combiner in ("VECTOR", "HVECTOR"):
            count, bl, stride = params["count"], params["blocklength"], params["stride"]
            bstride = stride * ext if combiner == "VECTOR" else stride
            info.dense = _runs_dense([0, bstride] if count > 1 else [0],
                                     [bl, bl] if count > 1 else [bl], ext, size)
        elif combiner in ("INDEXED", "HINDEXED", "INDEXED_BLOCK", "HINDEXED_BLOCK"):
            displs = np.asarray(params["displacements"], dtype=np.int64)
            if combiner.startswith("INDEXED"):
                displs = displs * ext
            bls = params["blocklengths"] if "blocklengths" in params else \
                np.full(len(displs), params["blocklength"], dtype=np.int64)
            info.dense = _runs_dense(displs, bls, ext, size)
        elif combiner == "SUBARRAY":
            info.dense = ext == size and _subarray_dense(
                params["sizes"], params["subsizes"], params["order"], MPI)
        else:  # DARRAY and anything newer: packed (correct, not a view)
            info.dense = False
        return info
    finally:
        for t in inner:
            if t != MPI.DATATYPE_NULL and not t.is_predefined:
                t.Free()  # MPI standard, "Decoding a Datatype": new handles


def _info(dt, MPI):
    """``_TypeInfo`` of a datatype (predefined ones cached by handle)."""
    if dt.is_predefined:
        return _named_info(dt, MPI)
    return _derived_info(dt, MPI)


_SELF = None


def _check_datatype(dt, what, MPI):
    """Raise InputError for MPI.DATATYPE_NULL or a datatype MPI refuses (not committed)."""
    global _SELF
    if dt == MPI.DATATYPE_NULL:
        raise InputError(f"{what}: the datatype is MPI.DATATYPE_NULL")
    if dt.is_predefined:
        return
    if _SELF is None:
        _SELF = MPI.COMM_SELF.Dup()  # private: never matches the program's own messages
    try:
        _SELF.Sendrecv([None, 0, dt], 0, 0, [None, 0, dt], 0, 0)
    except MPI.Exception as exc:
        raise InputError(f"{what}: MPI refuses the datatype ({exc.Get_error_string()}); "
                         "derived datatypes must be committed (datatype.Commit())") from None


def _typeinfo(dt, what, MPI):
    _check_datatype(dt, what, MPI)
    return _info(dt, MPI)


# --------------------------------------------------------------------------------------------
# Buffers (asbuffer.pxi: getbuffer)

def _native_format(fmt, what):
    if fmt.startswith("@"):
        return fmt[1:]
    if fmt.startswith("<") or fmt.startswith(">"):
        if (fmt[0] == "<") != (sys.byteorder == "little"):
            raise InputError(f"{what}: format string {fmt!r} with non-native byte order")
        return fmt[1:]
    return fmt


def _format_datatype(fmt, what, MPI):
    """The datatype mpi4py picks for a buffer format when none is given."""
    if fmt == "B":
        return MPI.BYTE
    key = _native_format(fmt, what)
    try:
        return MPI._typedict[key]
    except KeyError:
        raise InputError(f"{what}: cannot map buffer format {key!r} to an MPI datatype "
                         "(give one: [buf, count, datatype])") from None


def _asdatatype(obj, what, MPI):
    if isinstance(obj, MPI.Datatype):
        return obj
    if isinstance(obj, str):
        try:
            return MPI._typedict[obj]
        except KeyError:
            raise InputError(f"{what}: cannot map {obj!r} to an MPI datatype") from None
    raise InputError(f"{what}: {obj!r} is not an MPI datatype")


def _is_datatype(obj, MPI):
    return isinstance(obj, (MPI.Datatype, str))


def _array_bytes(arr, readonly, what):
    """uint8 view (memory order) of a contiguous numpy array; checks writability."""
    flags = arr.flags
    if arr.dtype.hasobject:
        raise InputError(f"{what}: arrays of Python objects are not buffers (dtype "
                         f"{arr.dtype})")
    if not readonly and not flags.writeable:
        raise InputError(f"{what}: the buffer is read-only and cannot receive data")
    if flags.c_contiguous:
        flat = arr.reshape(-1)
    elif flags.f_contiguous:
        flat = arr.ravel(order="F")
    else:
        raise InputError(f"{what}: the buffer is not contiguous (use numpy.ascontiguousarray)")
    return flat.view(np.uint8)


_NP_FORMATS = {}


def _np_format(dtype, what):
    fmt = _NP_FORMATS.get(dtype)
    if fmt is None:
        try:
            fmt = _NP_FORMATS[dtype] = memoryview(np.empty(0, dtype)).format
        except (ValueError, TypeError, BufferError):
            raise InputError(f"{what}: numpy dtype {dtype} has no buffer format (give an MPI "
                             "datatype: [buf, count, datatype])") from None
    return fmt


def _getbuffer(obj, readonly, want_format, what):
    """``(raw, format)``: the buffer's bytes as a uint8 numpy array (a view), its format."""
    if isinstance(obj, np.ndarray):
        raw = _array_bytes(obj, readonly, what)
        return raw, (_np_format(obj.dtype, what) if want_format else None)
    try:
        mv = memoryview(obj)
    except TypeError:
        mv = None
    if mv is not None:
        if not readonly and mv.readonly:
            raise InputError(f"{what}: the buffer ({type(obj).__name__}) is read-only and "
                             "cannot receive data")
        if mv.c_contiguous:
            raw = np.frombuffer(mv, np.uint8)
        elif mv.f_contiguous:
            raw = _array_bytes(np.asarray(mv), readonly, what)
        else:
            raise InputError(f"{what}: the buffer is not contiguous")
        return raw, mv.format
    if hasattr(obj, "__dlpack__"):
        return from_dlpack(obj, readonly, what)
    if hasattr(obj, "__cuda_array_interface__"):
        raise InputError(f"{what}: device memory (__cuda_array_interface__) is not supported; "
                         "dualmpi moves host memory")
    raise InputError(f"{what}: expecting a buffer or a list/tuple, got {type(obj).__name__}")


def _index(value, what, name):
    try:
        return operator.index(value)
    except TypeError:
        raise InputError(f"{what}: {name} {value!r} is not an integer") from None


def _index_array(seq, n, what, name):
    """``n`` integers from a sequence (mpi4py's chkarray)."""
    if isinstance(seq, (str, bytes)) or not hasattr(seq, "__len__"):
        raise InputError(f"{what}: {name} must be a sequence of {n} integers, got {seq!r}")
    if len(seq) != n:
        raise InputError(f"{what}: {name} has {len(seq)} items, expecting {n} (one per rank)")
    if isinstance(seq, np.ndarray) and seq.dtype.kind in "iu":
        if seq.dtype.kind == "u" and seq.size and int(seq.max()) > _INT64_MAX:
            _out_of_range(int(seq.max()), what, name)
        return seq.astype(np.int64).reshape(-1)
    return np.array([_int64(v, what, name) for v in seq], dtype=np.int64).reshape(-1)


def _int64(value, what, name):
    """An integer argument that fits in 64 bits (MPI_Aint, MPI_Count), as a Python int."""
    value = _index(value, what, name)
    if not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        _out_of_range(value, what, name)
    return value


def _out_of_range(value, what, name):
    """Raise the InputError of an integer argument that does not fit in 64 bits."""
    raise InputError(f"{what}: {name} {value} does not fit in a 64-bit integer")


# --------------------------------------------------------------------------------------------
# Packing: MPI_Pack / MPI_Unpack on MPI.COMM_SELF (local), one call per block.  At MPI.BOTTOM
# the datatypes hold absolute addresses: each block is packed through a helper type (the
# block at its address minus that of a one-byte anchor, extent 1), as MPI_Pack(MPI_BOTTOM,
# count, datatype) would (mpi4py's Datatype.Pack takes its count from the buffer's length,
# and MPI.BOTTOM has none).

#: Where packing at MPI.BOTTOM starts from: any valid address serves (nothing is read there).
_ANCHOR = np.zeros(1, np.uint8)
#: No absolute address lies in the first page (Linux maps nothing there).
_LOWEST_ADDRESS = 4096
#: The largest byte position or address (MPI_Aint, MPI_Count: 64 bits).
_INT64_MAX = (1 << 63) - 1


def _free_type(dt):
    MPI = _MPI
    if MPI is not None and MPI.Is_initialized() and not MPI.Is_finalized():
        dt.Free()


class _Buffer:
    """Shared machinery: the user's memory, the packed ``data`` and pack/unpack."""

    __slots__ = ("obj", "data", "datatype", "dtype", "packed", "_base", "_segs", "_helpers",
                 "__weakref__")

    def _setup(self, raw, segs, view, byte_displs, bottom=False):
        """``segs``: ``(origin byte offset, elements, datatype, info)`` per block; at
        ``bottom`` (MPI.BOTTOM) the origins are absolute addresses."""
        self._base = raw
        self._helpers = None
        if view:
            self.data = raw
            self.packed = False
            self._segs = ()
            return
        total = sum(n * info.size for _, n, _, info in segs)
        self.data = np.empty(total, np.uint8)
        self.packed = True
        MPI = _mpi()
        address = MPI.buffer(raw).address if raw.size else 0
        plan = []
        for (origin, n, dt, info), pos in zip(segs, byte_displs):
            if n <= 0 or info.size == 0:
                continue
            if bottom:
                anchor = _ANCHOR.ctypes.data
                block = dt.Create_hindexed([n], [origin - anchor])
                helper = self._helper(block, MPI)
                block.Free()
                plan.append((helper, anchor, 1, 1, 0, int(pos)))
            elif info.extent > 0:
                plan.append((dt, address + origin, n * info.extent, 1, 0, int(pos)))
            else:  # zero or negative extent: one call per element with a helper type
                helper = self._helper(dt, MPI)
                plan.append((helper, address + origin, 1, n, info.extent, int(pos)))
        self._segs = tuple(plan)

    def _helper(self, dt, MPI):
        """``dt`` resized to extent 1 (one element per byte of the span given to Pack)."""
        helper = dt.Create_resized(0, 1).Commit()
        if self._helpers is None:
            self._helpers = []
        self._helpers.append(helper)
        weakref.finalize(self, _free_type, helper)
        return helper

    def pack(self):
        """Copy the typemap's bytes from the user's buffer into :attr:`data` (no-op for a view).

        Returns
        -------
        numpy.ndarray
            :attr:`data`.
        """
        if self._segs:
            MPI = _MPI
            fromaddress, comm, data = MPI.buffer.fromaddress, MPI.COMM_SELF, self.data
            for dt, addr, span, calls, step, pos in self._segs:
                for k in range(calls):
                    pos = dt.Pack(fromaddress(addr + k * step, span, True), data, pos, comm)
        return self.data

    def unpack(self):
        """Write :attr:`data` back through the datatype: only the typemap's bytes change.

        A no-op when :attr:`data` is a view of the user's memory.
        """
        if self._segs:
            if not self._base.flags.writeable:
                raise InputError("unpack: the buffer is read-only")
            MPI = _MPI
            fromaddress, comm, data = MPI.buffer.fromaddress, MPI.COMM_SELF, self.data
            for dt, addr, span, calls, step, pos in self._segs:
                for k in range(calls):
                    pos = dt.Unpack(data, pos, fromaddress(addr + k * step, span, False), comm)


def _check_span(origin, n, info, buflen, what, name="count"):
    """Raise InputError unless ``n`` elements from byte ``origin`` lie inside the buffer."""
    if n <= 0 or info.size == 0:
        return
    lo = origin + info.true_lb + min(0, (n - 1) * info.extent)
    hi = origin + info.true_lb + info.true_extent + max(0, (n - 1) * info.extent)
    if lo < 0 or hi > buflen:
        raise InputError(f"{what}: {name} needs bytes [{lo}, {hi}) of the buffer, which has "
                         f"{buflen} bytes")


def _check_bottom(origin, n, info, what, name):
    """Raise InputError when a block at MPI.BOTTOM cannot be at absolute addresses."""
    if n <= 0 or info.size == 0:
        return
    lo = origin + info.true_lb + min(0, (n - 1) * info.extent)
    hi = origin + info.true_lb + info.true_extent + max(0, (n - 1) * info.extent)
    if lo < _LOWEST_ADDRESS:
        raise InputError(f"{what}: {name} at MPI.BOTTOM starts at address {lo:#x}, not an "
                         "absolute address (datatypes and displacements at MPI.BOTTOM hold "
                         "addresses from MPI.Get_address)")
    if hi > _INT64_MAX:
        raise InputError(f"{what}: {name} at MPI.BOTTOM ends at address {hi:#x}, beyond 64 bits")


def _check_spans(displs, counts, info, buflen, what):
    """Return each rank's byte origin ``displs * extent``, checking its block's bytes.

    ``_check_span`` for every rank's block at once (one datatype); ``buflen`` None (at
    MPI.BOTTOM) checks nothing.  Exact: displacements and counts so large that the bytes
    would wrap around in int64 are refused (or, for an empty block, its origin is 0),
    never wrapped into the buffer.
    """
    ext, lb, span = info.extent, info.true_lb, info.true_extent
    limit = (_INT64_MAX // 4 - abs(lb) - abs(span)) // max(1, abs(ext))
    if displs.size > _SPANS_IN_PYTHON and (
            limit > 0 and -limit <= int(displs.min()) and int(displs.max()) <= limit and
            int(counts.max()) <= limit):
        origins = displs * ext  # every term below 2**61: nothing wraps around
        if buflen is None or info.size == 0:
            return origins
        steps = (counts - 1) * ext
        lo = origins + lb + np.minimum(0, steps)
        hi = origins + lb + span + np.maximum(0, steps)
        bad = (counts > 0) & ((lo < 0) | (hi > buflen))
        if bad.any():
            i = int(np.argmax(bad))
            _span_error(what, i, counts[i], displs[i], lo[i], hi[i], buflen)
        return origins
    # a few ranks, or values near int64's limits: Python's exact integers, block by block
    origins = []
    for i, (d, n) in enumerate(zip(displs.tolist(), counts.tolist())):
        origin = d * ext
        if n > 0 and info.size and buflen is not None:
            lo = origin + lb + min(0, (n - 1) * ext)
            hi = origin + lb + span + max(0, (n - 1) * ext)
            if lo < 0 or hi > buflen:
                _span_error(what, i, n, d, lo, hi, buflen)
        origins.append(origin if -_INT64_MAX - 1 <= origin <= _INT64_MAX else 0)
    return np.array(origins, dtype=np.int64)


#: Up to this many blocks :func:`_check_spans` checks them in Python (numpy's fixed cost per
#: operation is larger there).
_SPANS_IN_PYTHON = 16


def _span_error(what, i, count, displ, lo, hi, buflen):
    raise InputError(f"{what}: rank {i}'s block (count {count}, displ {displ}) needs bytes "
                     f"[{lo}, {hi}) of the buffer, which has {buflen} bytes")


# --------------------------------------------------------------------------------------------
# Simple messages: buf, [buf, count], [buf, datatype], [buf, count, datatype],
# [buf, (count, displ), datatype], [buf, count, displ, datatype]


class Message(_Buffer):
    """One buffer argument in simple form (``count`` elements of ``datatype`` per block).

    Attributes
    ----------
    obj : object
        The user's buffer object (the first item of a list spec), for identity caching.
    data : numpy.ndarray
        uint8, 1-D, C-contiguous: the packed bytes of all blocks, block ``i`` at
        ``data[i * nbytes:(i + 1) * nbytes]``.  A view of the user's memory when the elements
        are one dense run of bytes (no copy), else a temporary that :meth:`pack` fills.
    count : int
        Elements of ``datatype`` per block (MPI's count: per rank for Scatter/Gather/
        Allgather/Alltoall, as mpi4py passes it to MPI).
    blocks : int
        Blocks covered: 1, or the communicator size for all-rank buffers.
    nbytes : int
        Packed bytes per block, ``count * datatype.Get_size()``.
    datatype : mpi4py.MPI.Datatype
        The datatype (given, or picked from the buffer's format as mpi4py does).
    typesig : tuple of int or None
        ``(hash, primitives)`` of one block's type signature: the polynomial hash (mod
        2**61 - 1) of its sequence of primitive types and its length.  Two blocks match (MPI's
        type-matching rule) when their typesigs are equal.  Primitives are compared by their
        numpy equivalent (``MPI.INT`` matches ``MPI.INT32_T``, pair types such as
        ``MPI.FLOAT_INT`` count as their two members); an empty block is ``(0, 0)``;
        ``None`` for ``MPI.PACKED``, which matches any signature.
    dtype : numpy.dtype or None
        numpy dtype of the one predefined type the typemap repeats (a structured dtype for
        pair types), for reductions; ``None`` when mixed.
    packed : bool
        True when ``data`` is a temporary (call :meth:`pack` before sending, :meth:`unpack`
        after receiving).

    Examples
    --------
    >>> import numpy as np
    >>> from mpi4py import MPI
    >>> from dualmpi import msgbuffer
    >>> every_other = MPI.INT.Create_vector(3, 1, 2).Commit()
    >>> buf = np.arange(6, dtype=np.int32)
    >>> m = msgbuffer.simple([buf, 1, every_other], role="send", what="Send buf")
    >>> m.count, m.nbytes, m.packed
    (1, 12, True)
    >>> m.pack().view(np.int32)
    array([0, 2, 4], dtype=int32)
    >>> m.data[:] = np.array([7, 8, 9], dtype=np.int32).view(np.uint8)
    >>> m.unpack()
    >>> buf
    array([7, 1, 8, 3, 9, 5], dtype=int32)
    >>> every_other.Free()
    """

    __slots__ = ("count", "blocks", "nbytes", "_info", "_typesig")

    @property
    def typesig(self):
        """``(hash, primitives)`` of one block (see the class docstring)."""
        if self._typesig is False:
            self._typesig = self._info.sig(self.count)
        return self._typesig

    def block_typesig(self, i):
        """Type signature of block ``i`` (the same for every block)."""
        return self.typesig

    def __repr__(self):
        return (f"Message(count={self.count}, blocks={self.blocks}, nbytes={self.nbytes}, "
                f"datatype={self.datatype.Get_name() or 'derived'}, packed={self.packed})")


def _new_message(obj, raw, origin, count, blocks, dt, info, what, buflen, bottom=False):
    m = Message.__new__(Message)
    m.obj, m.datatype, m._info, m._typesig = obj, dt, info, False
    m.count, m.blocks = count, blocks
    m.nbytes = count * info.size
    m.dtype = info.np_dtype if info.unit is not None else None
    n = count * blocks
    name = f"count {count} x {blocks} blocks" if blocks > 1 else f"count {count}"
    if bottom:
        _check_bottom(origin, n, info, what, name)
    else:
        _check_span(origin, n, info, buflen, what, name)
    if n == 0 or info.size == 0:
        m.data, m.packed, m._base, m._segs, m._helpers = _EMPTY_U8, False, raw, (), None
    elif bottom:
        m._setup(raw, [(origin, n, dt, info)], False, [0], bottom=True)
    elif info.view_ok(n):
        start = origin + info.true_lb
        m._setup(raw[start:start + n * info.size], (), True, ())
    else:
        m._setup(raw, [(origin, n, dt, info)], False, [0])
    return m


def _fast_array(spec, readonly, blocks, what):
    """Bare C-contiguous numpy array of a predefined type: ``Message`` or ``None``."""
    flags = spec.flags
    if not flags.c_contiguous or (not readonly and not flags.writeable):
        return None
    entry = _NP_TYPES.get(spec.dtype)
    if entry is None:
        MPI = _mpi()
        try:
            dt = _format_datatype(_np_format(spec.dtype, what), what, MPI)
            info = _named_info(dt, MPI)
        except InputError:
            return None
        if not (info.dense and info.extent == info.size == spec.dtype.itemsize):
            return None
        entry = _NP_TYPES[spec.dtype] = (dt, info)
    dt, info = entry
    length = spec.size
    if blocks > 1:
        if length % blocks:
            return None  # the general path raises mpi4py's error
        count = length // blocks
    else:
        count = length
    m = Message.__new__(Message)
    raw = spec.reshape(-1).view(np.uint8) if spec.ndim != 1 else spec.view(np.uint8)
    m.obj, m.data, m.datatype, m._info, m._typesig = spec, raw, dt, info, False
    m.count, m.blocks, m.nbytes = count, blocks, count * info.size
    m.dtype, m.packed, m._base, m._segs, m._helpers = info.np_dtype, False, raw, (), None
    return m


def _check_role(role):
    if role not in ("send", "recv"):
        raise ValueError(f"role must be 'send' or 'recv', not {role!r}")
    return role == "send"


def _is_bottom(obj, MPI):
    return obj is None or obj is MPI.BOTTOM


def _no_in_place(spec, what, MPI):
    if spec is None or spec is MPI.IN_PLACE:
        raise InputError(f"{what}: {'None' if spec is None else 'MPI.IN_PLACE'} is not a "
                         "buffer here (mpi4py reads None as MPI.IN_PLACE only where MPI "
                         "allows in-place)")


def _split_simple(spec, what):
    """``(buf, count, displ, datatype)`` of a simple spec, as mpi4py's message_simple."""
    if not isinstance(spec, (list, tuple)):
        return spec, None, None, None
    MPI = _mpi()
    count = displ = dtype = None
    n = len(spec)
    if n == 2:
        buf, count = spec
        if _is_datatype(count, MPI):
            count, dtype = None, count
        elif isinstance(count, (list, tuple)):
            count, displ = _pair(count, what)
    elif n == 3:
        buf, count, dtype = spec
        if isinstance(count, (list, tuple)):
            count, displ = _pair(count, what)
    elif n == 4:
        buf, count, displ, dtype = spec
    else:
        raise InputError(f"{what}: a message list has 2 to 4 items "
                         f"([buf, count, displ, datatype]), got {n}")
    return buf, count, displ, dtype


def _pair(seq, what):
    if len(seq) != 2:
        raise InputError(f"{what}: expecting (count, displ), got {seq!r}")
    return seq[0], seq[1]


def simple(spec, *, blocks=1, role="send", what="buf"):
    """Read a buffer argument in simple form, as mpi4py does for ``Send``/``Bcast``/...

    Parameters
    ----------
    spec : buffer or list or tuple
        A buffer (numpy array of any shape, C- or Fortran-contiguous; ``bytes``,
        ``bytearray``, ``memoryview``, ``array.array``, ``mmap.mmap``, any object with the
        buffer protocol or with ``__dlpack__``/``__dlpack_device__`` on the CPU) or a list
        ``[buf, count]``, ``[buf, datatype]``, ``[buf, count, datatype]``,
        ``[buf, (count, displ), datatype]``, ``[buf, count, displ, datatype]``.  A
        datatype may be an ``MPI.Datatype`` or a type code string (``'i'``); without one,
        the buffer's format picks it (``array('h')`` is ``MPI.SHORT``, bytes are
        ``MPI.BYTE``).  ``displ`` counts elements of the datatype's extent.  ``buf`` may be
        ``MPI.BOTTOM`` with a datatype holding absolute addresses (``MPI.Get_address``):
        :attr:`Message.data` is then always a packed temporary.
    blocks : int
        Blocks the buffer covers (mpi4py's ``blocks``): the communicator size for the
        all-rank buffer of Scatter (root's sendbuf), Gather (root's recvbuf), Allgather
        (recvbuf), Alltoall (both), Reduce_scatter_block (sendbuf); else 1.  A count given
        in the spec is per block; a count inferred from the buffer is its elements divided
        by ``blocks`` (an error when it does not divide).
    role : {'send', 'recv'}
        ``'recv'`` requires writable memory.
    what : str
        Names the argument in error messages (``"Alltoall sendbuf"``).

    Returns
    -------
    Message

    Raises
    ------
    dualmpi.errors.InputError
        Where mpi4py raises, and also for a count or displacement outside the buffer, a
        negative count, ``MPI.DATATYPE_NULL``, a datatype that is not committed, and a
        block at ``MPI.BOTTOM`` in the first page of memory (not an absolute address).
        Like mpi4py 4.1.2 (which raises TypeError), objects with only
        ``__array_interface__`` are not buffers.
    """
    readonly = _check_role(role)
    blocks = max(int(blocks), 1)
    if type(spec) is np.ndarray:
        m = _fast_array(spec, readonly, blocks, what)
        if m is not None:
            return m
    MPI = _mpi()
    _no_in_place(spec, what, MPI)
    buf, o_count, o_displ, o_type = _split_simple(spec, what)
    if _is_bottom(buf, MPI):
        if o_type is None:
            raise InputError(f"{what}: a None or MPI.BOTTOM buffer needs an explicit datatype")
        raw, fmt = _EMPTY_U8, None
    else:
        raw, fmt = _getbuffer(buf, readonly, o_type is None, what)
    dt = _asdatatype(o_type, what, MPI) if o_type is not None else \
        _format_datatype(fmt, what, MPI)
    info = _typeinfo(dt, what, MPI)
    length = raw.size
    origin = 0
    if o_displ is not None:
        displ = _index(o_displ, what, "displacement")
        if displ < 0:
            raise InputError(f"{what}: negative displacement {displ}")
        if displ > 0:
            if info.extent <= 0:
                raise InputError(f"{what}: cannot handle a displacement, the datatype extent "
                                 f"is {info.extent}")
            if displ * info.extent > length:
                raise InputError(f"{what}: displacement {displ} out of bounds, the buffer has "
                                 f"{length // info.extent} entries")
            origin = displ * info.extent
    if o_count is not None:
        count = _index(o_count, what, "count")
        if count < 0:
            raise InputError(f"{what}: negative count {count}")
        if count > 0 and buf is None:
            raise InputError(f"{what}: the buffer is None but the count is {count}")
    else:
        rest = length - origin
        count = 0
        if rest > 0:
            if info.extent <= 0:
                raise InputError(f"{what}: cannot infer the count, the datatype extent is "
                                 f"{info.extent}")
            if rest % info.extent:
                raise InputError(f"{what}: cannot infer the count, the buffer's {rest} bytes "
                                 f"are not a multiple of the datatype extent {info.extent}")
            entries = rest // info.extent
            if blocks > 1 and entries % blocks:
                raise InputError(f"{what}: cannot infer the count, {entries} entries are not "
                                 f"a multiple of {blocks} blocks (one per rank)")
            count = entries // blocks
    return _new_message(buf, raw, origin, count, blocks, dt, info, what, length,
                        buf is MPI.BOTTOM)


# --------------------------------------------------------------------------------------------
# Vector messages (Scatterv/Gatherv/Allgatherv/Alltoallv)


class VMessage(_Buffer):
    """One buffer argument in vector form: ``counts[i]`` elements at ``displs[i]`` per rank.

    Attributes
    ----------
    obj, data, datatype, dtype, packed
        As in :class:`Message`; block ``i`` is
        ``data[byte_displs[i]:byte_displs[i] + byte_counts[i]]``.
    counts, displs : numpy.ndarray
        int64, one entry per rank, in elements of ``datatype`` (displacements in extents),
        as the user gave them or as mpi4py infers them.
    byte_counts, byte_displs : numpy.ndarray
        int64: where each rank's block lies in ``data``.  For a view (``packed`` False)
        ``counts * size`` and ``displs * extent + true_lb``; packed, the blocks follow each
        other in rank order.
    typesig : tuple of int or None
        Signature of ONE element of ``datatype`` (see :class:`Message`); block ``i``'s is
        :meth:`block_typesig`.

    Examples
    --------
    >>> import numpy as np
    >>> from dualmpi import msgbuffer
    >>> v = msgbuffer.vector([np.arange(6.0), ([1, 2], [4, 0])], 2, role="send", what="buf")
    >>> v.counts.tolist(), v.byte_displs.tolist(), v.packed
    ([1, 2], [32, 0], False)
    """

    __slots__ = ("counts", "displs", "byte_counts", "byte_displs", "_info", "_typesig")

    @property
    def typesig(self):
        """``(hash, primitives)`` of one element of ``datatype``."""
        if self._typesig is False:
            self._typesig = self._info.sig(1)
        return self._typesig

    def block_typesig(self, i):
        """``(hash, primitives)`` of block ``i``: ``counts[i]`` elements."""
        return self._info.sig(int(self.counts[i]))


def vector(spec, size, *, role, what="buf"):
    """Read a buffer argument in vector form, as mpi4py's message_vector.

    Parameters
    ----------
    spec : buffer or list or tuple
        ``buf``, ``[buf, counts]``, ``[buf, datatype]``, ``[buf, counts, datatype]``,
        ``[buf, (counts, displs)]``, ``[buf, (counts, displs), datatype]`` or
        ``[buf, counts, displs, datatype]``.  ``counts``: a sequence of ``size`` integers,
        one integer (the same for every rank) or ``None`` (the buffer's elements split as
        evenly as possible, the first ranks taking one more).  ``displs``: a sequence, one
        integer ``d`` (rank ``i`` at ``d * i``) or ``None`` (blocks back to back).  Only a
        TUPLE is ``(counts, displs)``; a list in second place is the counts, as in mpi4py
        (and ``[buf, counts, displs]`` without a datatype is an error there too).
        ``buf`` may be ``MPI.BOTTOM``: the datatype and the displacements then hold
        absolute addresses, and ``data`` is a packed temporary.  ``None`` with nonzero
        counts is refused (mpi4py would pass MPI_BOTTOM: write ``MPI.BOTTOM``).
    size : int
        Number of ranks (blocks).
    role : {'send', 'recv'}
    what : str
        Names the argument in error messages.

    Returns
    -------
    VMessage
    """
    readonly = _check_role(role)
    MPI = _mpi()
    _no_in_place(spec, what, MPI)
    counts = displs = o_type = None
    buf = spec
    if isinstance(spec, (list, tuple)):
        n = len(spec)
        if n == 2:
            buf, counts = spec
            if _is_datatype(counts, MPI):
                counts, o_type = None, counts
            elif isinstance(counts, tuple):
                counts, displs = _pair(counts, what)
        elif n == 3:
            buf, counts, o_type = spec
            if isinstance(counts, tuple):
                counts, displs = _pair(counts, what)
            if not _is_datatype(o_type, MPI):
                raise InputError(f"{what}: the third item of [buf, counts, datatype] must be "
                                 "a datatype (mpi4py reads it so); write [buf, (counts, "
                                 "displs)] or [buf, counts, displs, datatype]")
        elif n == 4:
            buf, counts, displs, o_type = spec
        else:
            raise InputError(f"{what}: a message list has 2 to 4 items, got {n}")
    if _is_bottom(buf, MPI):
        if o_type is None:
            raise InputError(f"{what}: a None or MPI.BOTTOM buffer needs an explicit datatype")
        raw, fmt = _EMPTY_U8, None
    else:
        raw, fmt = _getbuffer(buf, readonly, o_type is None, what)
    dt = _asdatatype(o_type, what, MPI) if o_type is not None else \
        _format_datatype(fmt, what, MPI)
    info = _typeinfo(dt, what, MPI)
    length = raw.size
    bottom = buf is MPI.BOTTOM
    key = None if buf is None or bottom or not dt.is_predefined else \
        _vector_key(counts, displs, info, length, size)
    known = _VECTORS.get(key) if key is not None else None
    if known is not None:
        counts, displs, origins = known
    else:
        counts, displs, origins = _vector_counts(counts, displs, info, length, size, bottom,
                                                 buf is None, what)
        if key is not None:
            if len(_VECTORS) >= _VECTORS_KEPT:
                _VECTORS.pop(next(iter(_VECTORS)))
            _VECTORS[key] = (counts, displs, origins)
    v = VMessage.__new__(VMessage)
    v.obj, v.datatype, v._info, v._typesig = buf, dt, info, False
    v.dtype = info.np_dtype if info.unit is not None else None
    v.counts, v.displs = counts, displs
    v.byte_counts = counts * info.size
    most = int(counts.max(initial=0))
    if info.size == 0 or most == 0 or (not bottom and info.view_ok(most)):
        v.byte_displs = origins + info.true_lb if info.size else np.zeros(size, np.int64)
        v._setup(raw, (), True, ())
    else:
        v.byte_displs = np.zeros(size, dtype=np.int64)
        np.cumsum(v.byte_counts[:-1], out=v.byte_displs[1:])
        v._setup(raw, [(int(origins[i]), int(counts[i]), dt, info) for i in range(size)],
                 False, v.byte_displs, bottom)
    return v


#: Counts, displacements and block origins of recent vector arguments with a predefined datatype
#: (:func:`vector`), by what they were read from: a program's repeated v-variant call reads its
#: ``[buf, counts, displs, datatype]`` again each time, mostly with the same counts.  The arrays
#: are read-only (shared by every call with that key).
_VECTORS = {}
_VECTORS_KEPT = 64


def _ints_key(x):
    """A hashable image of a counts or displs argument, or ``None`` when it is not plain ints."""
    t = type(x)
    if x is None or t is int:
        return ("=", x)
    if t is list or t is tuple:
        for v in x:
            if type(v) is not int:
                return None
        return tuple(x)
    if t is np.ndarray and x.dtype.kind in "iu" and x.ndim == 1:
        return (x.dtype.str, x.tobytes())
    return None


def _vector_key(counts, displs, info, length, size):
    """The key of :data:`_VECTORS` for these arguments, or ``None`` (not remembered)."""
    ck = _ints_key(counts)
    if ck is None:
        return None
    dk = _ints_key(displs)
    if dk is None:
        return None
    return (ck, dk, id(info), length, size)


def _vector_counts(counts, displs, info, length, size, bottom, none, what):
    """Return ``(counts, displs, origins)`` of a vector argument (see :func:`vector`), checked
    (``none``: the buffer is ``None``)."""
    if counts is None:
        csize = 0
        if length > 0:
            if info.extent <= 0:
                raise InputError(f"{what}: cannot infer the counts, the datatype extent is "
                                 f"{info.extent}")
            if length % info.extent:
                raise InputError(f"{what}: cannot infer the counts, the buffer's {length} "
                                 "bytes are not a multiple of the datatype extent "
                                 f"{info.extent}")
            csize = length // info.extent
        counts = np.full(size, csize // size, dtype=np.int64)
        counts[:csize % size] += 1
    elif isinstance(counts, (int, np.integer)):
        counts = np.full(size, _int64(counts, what, "count"), dtype=np.int64)
    else:
        counts = _index_array(counts, size, what, "counts")
    if (counts < 0).any():
        raise InputError(f"{what}: negative count in {counts.tolist()}")
    if displs is None:
        displs = np.zeros(size, dtype=np.int64)
        np.cumsum(counts[:-1], out=displs[1:])
    elif isinstance(displs, (int, np.integer)):
        step = _int64(displs, what, "displacement")
        _int64(step * (size - 1), what, f"displacement {step} x rank {size - 1}:")
        displs = step * np.arange(size, dtype=np.int64)
    else:
        displs = _index_array(displs, size, what, "displs")
    if none and counts.any():
        raise InputError(f"{what}: the buffer is None but the counts are {counts.tolist()} "
                         "(absolute addresses: MPI.BOTTOM)")
    if bottom:
        for i in range(size):
            _check_bottom(int(displs[i]) * info.extent, int(counts[i]), info, what,
                          f"rank {i}'s block (count {counts[i]}, displ {displs[i]})")
    origins = _check_spans(displs, counts, info, None if bottom else length, what)
    for a in (counts, displs, origins):
        a.flags.writeable = False
    return counts, displs, origins


# --------------------------------------------------------------------------------------------
# Alltoallw: [buf, datatypes], [buf, (counts, displs), datatypes], [buf, counts, displs,
# datatypes]; displacements in BYTES, one datatype per rank


class WMessage(_Buffer):
    """An Alltoallw buffer: ``counts[i]`` elements of ``datatypes[i]`` at byte ``displs[i]``.

    Attributes
    ----------
    obj, data, dtype, packed
        As in :class:`Message` (``dtype`` when every block repeats the same predefined type).
    datatypes : list of mpi4py.MPI.Datatype
        One per rank; :attr:`datatype` is ``None``.
    counts, displs : numpy.ndarray
        int64 per rank: elements, and byte displacements from the start of the buffer.
    byte_counts, byte_displs : numpy.ndarray
        Where each block lies in ``data`` (see :class:`VMessage`).
    """

    __slots__ = ("datatypes", "counts", "displs", "byte_counts", "byte_displs", "_infos")

    def block_typesig(self, i):
        """``(hash, primitives)`` of block ``i``."""
        return self._infos[i].sig(int(self.counts[i]))


def wvector(spec, size, *, role, what="buf"):
    """Read an ``Alltoallw`` buffer argument, as mpi4py's message_vector_w.

    Parameters
    ----------
    spec : list or tuple
        ``[buf, datatypes]`` (count 1, displacement 0 for every rank),
        ``[buf, (counts, displs), datatypes]`` or ``[buf, counts, displs, datatypes]``;
        counts and displs are sequences of ``size`` integers, displs in BYTES; datatypes a
        sequence of ``size`` ``MPI.Datatype``.  At ``MPI.BOTTOM`` (counts and displs
        required, as in mpi4py) the datatypes and displs hold absolute addresses and
        ``data`` is a packed temporary; ``None`` with nonzero counts is refused.
    size : int
        Number of ranks.
    role : {'send', 'recv'}
    what : str

    Returns
    -------
    WMessage
    """
    readonly = _check_role(role)
    MPI = _mpi()
    if not isinstance(spec, (list, tuple)):
        raise InputError(f"{what}: expecting [buf, (counts, displs), datatypes], got "
                         f"{type(spec).__name__}")
    n = len(spec)
    counts = displs = None
    if n == 2:
        buf, types = spec
    elif n == 3:
        buf, cd, types = spec
        if not isinstance(cd, (list, tuple)):
            raise InputError(f"{what}: expecting (counts, displs), got {cd!r}")
        counts, displs = _pair(cd, what)
    elif n == 4:
        buf, counts, displs, types = spec
    else:
        raise InputError(f"{what}: a message list has 2 to 4 items, got {n}")
    bottom = buf is MPI.BOTTOM
    if bottom:
        if counts is None or displs is None:
            raise InputError(f"{what}: MPI.BOTTOM requires counts and displs "
                             "([MPI.BOTTOM, (counts, displs), datatypes])")
        raw = _EMPTY_U8
    elif buf is None:
        raw = _EMPTY_U8
    else:
        raw, _ = _getbuffer(buf, readonly, False, what)
    if counts is None and displs is None:
        counts = np.ones(size, dtype=np.int64)
        displs = np.zeros(size, dtype=np.int64)
    else:
        counts = _index_array(counts, size, what, "counts")
        displs = _index_array(displs, size, what, "displs")
    if (counts < 0).any():
        raise InputError(f"{what}: negative count in {counts.tolist()}")
    if isinstance(types, (str, bytes)) or not hasattr(types, "__len__") or len(types) != size:
        raise InputError(f"{what}: expecting {size} datatypes (one per rank)")
    types = list(types)
    for t in types:
        if not isinstance(t, MPI.Datatype):
            raise InputError(f"{what}: {t!r} is not an MPI datatype")
    infos = [_typeinfo(t, what, MPI) for t in types]
    if buf is None and any(c and info.size for c, info in zip(counts, infos)):
        raise InputError(f"{what}: the buffer is None but the counts are {counts.tolist()} "
                         "(absolute addresses: MPI.BOTTOM)")
    for i in range(size):
        name = f"rank {i}'s block (count {counts[i]}, displ {displs[i]} bytes)"
        if bottom:
            _check_bottom(int(displs[i]), int(counts[i]), infos[i], what, name)
        else:
            _check_span(int(displs[i]), int(counts[i]), infos[i], raw.size, what, name)
    w = WMessage.__new__(WMessage)
    w.obj, w.datatype, w.datatypes, w._infos = buf, None, types, infos
    units = {info.unit for c, info in zip(counts, infos) if c and info.length}
    unit = units.pop() if len(units) == 1 else None
    w.dtype = next((i.np_dtype for i in infos if i.unit == unit), None) if unit else None
    w.counts, w.displs = counts, displs
    w.byte_counts = np.array([c * info.size for c, info in zip(counts, infos)], np.int64)
    if all(info.size == 0 or c == 0 or (not bottom and info.view_ok(int(c)))
           for c, info in zip(counts, infos)):
        w.byte_displs = displs + np.array([info.true_lb for info in infos], np.int64)
        w._setup(raw, (), True, ())
    else:
        w.byte_displs = np.zeros(size, dtype=np.int64)
        np.cumsum(w.byte_counts[:-1], out=w.byte_displs[1:])
        w._setup(raw, [(int(displs[i]), int(counts[i]), types[i], infos[i])
                       for i in range(size)], False, w.byte_displs, bottom)
    return w


def in_place(spec):
    """True when ``spec`` is ``MPI.IN_PLACE`` or ``None``, as mpi4py's ``is_IN_PLACE``.

    mpi4py reads ``None`` as ``MPI.IN_PLACE`` only where MPI allows IN_PLACE (intracomms):
    the root's sendbuf of Gather/Gatherv, the root's recvbuf of Scatter/Scatterv, the
    sendbuf of Allgather(v), Alltoall(v/w), Allreduce, Scan, Exscan, Reduce_scatter(_block)
    and the root's sendbuf of Reduce.  Arguments MPI ignores are not read at all: the
    recvbuf of Gather(v) and Reduce on non-roots, the sendbuf of Scatter(v) on non-roots.
    Elsewhere (Bcast, point-to-point) ``None`` is an error and ``MPI.IN_PLACE`` too.

    Examples
    --------
    >>> from dualmpi.msgbuffer import in_place
    >>> in_place(None), in_place(b"abc")
    (True, False)
    """
    if spec is None:
        return True
    MPI = sys.modules.get("mpi4py.MPI")
    return MPI is not None and spec is MPI.IN_PLACE
