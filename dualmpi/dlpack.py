"""The host memory of a DLPack producer, read as mpi4py 4.1.2 reads it."""

# The rules mirror mpi4py 4.1.2 ``src/mpi4py/MPI.src/asdlpack.pxi`` (Py_GetDLPackBuffer):
# ``__dlpack_device__()`` first; ``__dlpack__(max_version=(1, 0), copy=False)`` and, on
# TypeError (a DLPack 0.x producer), ``__dlpack__()``; the tensor must be C- or
# F-contiguous; its dtype picks the buffer format.  Unlike mpi4py, which keeps the capsule
# unconsumed and lets its destructor free the tensor, the capsule is consumed as the DLPack
# Python specification asks: renamed ``used_dltensor(_versioned)`` and the managed tensor's
# deleter called exactly once, when the last view of the memory is released.  Device memory
# is refused: dualmpi moves host memory only.

import ctypes

import numpy as np

from .errors import InputError

__all__ = ["DLPACK_CPU_ACCESSIBLE", "dlpack_format", "from_dlpack"]

#: DLDeviceType values whose memory the CPU reads directly (mpi4py's check_cpu_accessible):
#: kDLCPU, kDLCUDAHost, kDLROCMHost, kDLCUDAManaged.
DLPACK_CPU_ACCESSIBLE = {1: "CPU", 3: "CUDAHost", 11: "ROCMHost", 13: "CUDAManaged"}
_KDL_CPU = 1
_FLAG_READ_ONLY = 1 << 0
_FLAG_IS_COPIED = 1 << 1
_KDL_INT, _KDL_UINT, _KDL_FLOAT, _KDL_COMPLEX, _KDL_BOOL = 0, 1, 2, 5, 6


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", _DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64),
                ("dl_tensor", _DLTensor)]


def _capi(name, restype, *argtypes):
    """A private handle on a C-API function (``ctypes.pythonapi.<name>`` is shared: another
    module setting its argtypes would change ours)."""
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))  # keeps the GIL


_capsule_is_valid = _capi("PyCapsule_IsValid", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)
_capsule_get_pointer = _capi("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object,
                             ctypes.c_char_p)
_capsule_set_name = _capi("PyCapsule_SetName", ctypes.c_int, ctypes.py_object,
                          ctypes.c_void_p)

#: The deleter's C signature, called with the GIL held (producers take it again if they need).
_DELETER = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)

# PyCapsule_SetName keeps the pointer, not a copy: these strings live as long as the module
# and every owner keeps a reference too.
_VERSIONED = (b"dltensor_versioned", ctypes.create_string_buffer(b"used_dltensor_versioned"),
              _DLManagedTensorVersioned)
_LEGACY = (b"dltensor", ctypes.create_string_buffer(b"used_dltensor"), _DLManagedTensor)


class _Export:
    """Owns one consumed DLPack export: the base of the uint8 view of its memory.

    Keeps the producer and its capsule alive while any view lives and calls the managed
    tensor's deleter once, when released (garbage collection of the last view).
    """

    __slots__ = ("__array_interface__", "_producer", "_capsule", "_name", "_deleter",
                 "_managed")
    _call = _DELETER  # a class attribute: still there when __del__ runs at exit

    def __init__(self, producer, capsule, name, deleter, managed, address, nbytes, readonly):
        self._producer, self._capsule, self._name = producer, capsule, name
        self._deleter, self._managed = deleter, managed
        self.__array_interface__ = {"version": 3, "shape": (nbytes,), "typestr": "|u1",
                                    "data": (address, readonly)}

    def release(self):
        """Call the deleter (once), then let the capsule and the producer go."""
        managed, self._managed = self._managed, None
        if managed is not None and self._deleter:
            self._call(self._deleter)(managed)
        self._capsule = self._producer = None

    def __del__(self):
        self.release()


def dlpack_format(code, bits, lanes):
    """Buffer format of a DLPack dtype, as mpi4py's ``dlpack_get_format``.

    Parameters
    ----------
    code, bits, lanes : int
        The ``DLDataType`` fields.

    Returns
    -------
    str
        A struct-module format (``"i"``, ``"Zd"``, ...); ``"B"`` (bytes) when none fits.

    Examples
    --------
    >>> dlpack_format(0, 32, 1), dlpack_format(2, 64, 2), dlpack_format(4, 16, 1)
    ('i', 'Zd', 'B')
    """
    if lanes != 1:
        if code == _KDL_FLOAT and lanes == 2:
            return {8 * _FLOAT: "Zf", 8 * _DOUBLE: "Zd", 8 * _LDOUBLE: "Zg"}.get(bits, "B")
        return "B"
    for kind, table in _FORMATS:
        if code == kind:
            for size, fmt in table:
                if bits == 8 * size:
                    return fmt
    return "B"


_FLOAT, _DOUBLE = ctypes.sizeof(ctypes.c_float), ctypes.sizeof(ctypes.c_double)
_LDOUBLE = ctypes.sizeof(ctypes.c_longdouble)
_FORMATS = (  # first match wins, as in mpi4py (a 64-bit integer is "l" where long has 64 bits)
    (_KDL_BOOL, ((1, "?"),)),
    (_KDL_INT, tuple((ctypes.sizeof(t), f) for t, f in (
        (ctypes.c_char, "b"), (ctypes.c_short, "h"), (ctypes.c_int, "i"),
        (ctypes.c_long, "l"), (ctypes.c_longlong, "q")))),
    (_KDL_UINT, tuple((ctypes.sizeof(t), f) for t, f in (
        (ctypes.c_char, "B"), (ctypes.c_short, "H"), (ctypes.c_int, "I"),
        (ctypes.c_long, "L"), (ctypes.c_longlong, "Q")))),
    (_KDL_FLOAT, ((_FLOAT // 2, "e"), (_FLOAT, "f"), (_DOUBLE, "d"), (_LDOUBLE, "g"))),
    (_KDL_COMPLEX, ((_FLOAT, "Ze"), (2 * _FLOAT, "Zf"), (2 * _DOUBLE, "Zd"),
                    (2 * _LDOUBLE, "Zg"))),
)


def _is_contiguous(ndim, shape, strides, order):
    """mpi4py's ``dlpack_is_contig``: strides (in elements) of a C or F layout."""
    if strides is None:
        return order != "F" or ndim <= 1
    dims = range(ndim) if order == "F" else range(ndim - 1, -1, -1)
    size = 1
    for i in dims:
        if shape[i] > 1 and strides[i] != size:
            return False
        size *= shape[i]
    return True


def _capsule(obj, what):
    """Call the producer as mpi4py does; return ``(capsule, device type)``."""
    try:
        dlpack, device = obj.__dlpack__, obj.__dlpack_device__
    except AttributeError:
        raise InputError(f"{what}: {type(obj).__name__} has __dlpack__ but no "
                         "__dlpack_device__") from None
    try:
        device_type, _ = device()
        device_type = int(device_type)
    except Exception as exc:  # noqa: BLE001 - the producer's own failure, named
        raise InputError(f"{what}: __dlpack_device__() failed ({type(exc).__name__}: "
                         f"{exc})") from None
    if device_type not in DLPACK_CPU_ACCESSIBLE:
        raise InputError(f"{what}: device memory (DLPack device type {device_type}) is not "
                         "supported; dualmpi moves host memory")
    stream = {} if device_type == _KDL_CPU else {"stream": -1}
    try:
        try:  # DLPack 1.0+
            return dlpack(**stream, max_version=(1, 0), copy=False), device_type
        except TypeError:  # DLPack 0.x: no max_version/copy keywords
            return dlpack(**stream), device_type
    except Exception as exc:  # noqa: BLE001 - read-only without versioning, ...
        raise InputError(f"{what}: cannot read the DLPack buffer on the CPU "
                         f"({type(exc).__name__}: {exc})") from None


def from_dlpack(obj, readonly, what):
    """Consume one DLPack export of ``obj``: its memory as uint8, and its buffer format.

    Parameters
    ----------
    obj : object
        A DLPack producer (``__dlpack__`` and ``__dlpack_device__``), DLPack 1.x or 0.x.
    readonly : bool
        False when data will be written into the memory (a receive buffer).
    what : str
        Names the argument in error messages.

    Returns
    -------
    raw : numpy.ndarray
        uint8, 1-D: the tensor's bytes in memory order (C or Fortran), a view whose base
        owns the export (the deleter runs when the last view is gone).
    fmt : str
        Buffer format of the elements (:func:`dlpack_format`).

    Raises
    ------
    dualmpi.errors.InputError
        Where mpi4py raises (not contiguous, negative shape or strides, an unknown capsule,
        a read-only export where data is received) and for memory the CPU cannot read.

    Examples
    --------
    >>> import numpy as np
    >>> class Producer:
    ...     def __init__(self, a): self.a = a
    ...     def __dlpack__(self, **kw): return self.a.__dlpack__(**kw)
    ...     def __dlpack_device__(self): return self.a.__dlpack_device__()
    >>> raw, fmt = from_dlpack(Producer(np.arange(3, dtype=np.int16)), False, "buf")
    >>> raw.tolist(), fmt
    ([0, 0, 1, 0, 2, 0], 'h')
    """
    capsule, _ = _capsule(obj, what)
    tensor = _inspect(capsule, readonly)
    if isinstance(tensor, str):
        # Not consumed: the capsule's destructor frees the export.  It runs here, with no
        # exception in flight (a destructor written in Python, with ctypes, fails otherwise).
        del capsule
        raise InputError(f"{what}: {tensor}")
    used, deleter, managed, address, nbytes, fmt, ro_export = tensor
    if _capsule_set_name(capsule, ctypes.addressof(used)) != 0:  # consumed from here on
        raise InputError(f"{what}: cannot mark the DLPack capsule used")
    owner = _Export(obj, capsule, used, deleter, managed, address, nbytes, ro_export)
    del capsule
    if nbytes == 0 or not address:
        owner.release()
        if nbytes:
            raise InputError(f"{what}: dlpack: data is NULL but the tensor has {nbytes} bytes")
        return np.zeros(0, np.uint8), fmt
    return np.asarray(owner), fmt


def _inspect(capsule, readonly):
    """The export in ``capsule`` as mpi4py checks it: a tuple, or what is wrong (a str)."""
    for name, used, struct in (_VERSIONED, _LEGACY):
        if _capsule_is_valid(capsule, name):
            break
    else:
        return ("__dlpack__() did not return a DLPack capsule ('dltensor_versioned' or "
                "'dltensor', unused)")
    managed_address = _capsule_get_pointer(capsule, name)
    managed = struct.from_address(managed_address)
    tensor = managed.dl_tensor
    ro_export = False
    if struct is _DLManagedTensorVersioned:
        if managed.version.major < 1:
            return f"dlpack: unexpected version {managed.version.major}"
        ro_export = bool(managed.flags & _FLAG_READ_ONLY)
        if not readonly and managed.flags & _FLAG_IS_COPIED:
            return ("the DLPack producer exported a copy (copy=False was asked); data "
                    "received there would be lost")
    ndim = tensor.ndim
    if ndim < 0:
        return "dlpack: number of dimensions is negative"
    if ndim > 0 and not tensor.shape:
        return "dlpack: shape is NULL"
    shape = [tensor.shape[i] for i in range(ndim)]
    strides = [tensor.strides[i] for i in range(ndim)] if tensor.strides else None
    if any(n < 0 for n in shape):
        return "dlpack: shape item is negative"
    if strides is not None and any(s < 0 for s in strides):
        return "dlpack: strides item is negative"
    if not (_is_contiguous(ndim, shape, strides, "C")
            or _is_contiguous(ndim, shape, strides, "F")):
        return f"the DLPack buffer is not contiguous (shape {shape}, strides {strides} elements)"
    if ro_export and not readonly:
        return "the DLPack buffer is read-only and cannot receive data"
    dtype = tensor.dtype
    nbytes = (dtype.bits * dtype.lanes + 7) // 8
    for n in shape:
        nbytes *= n
    address = (tensor.data or 0) + tensor.byte_offset
    fmt = dlpack_format(dtype.code, dtype.bits, dtype.lanes)
    return used, managed.deleter, managed_address, address, nbytes, fmt, ro_export
