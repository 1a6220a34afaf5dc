"""A DLPack producer built with ctypes, for tests: 0.x (legacy) or 1.x, counting its deleters.

``Producer(array, version=0)`` exports ``array``'s memory as DLPack 0.x does: ``__dlpack__``
takes only ``stream`` (so a 1.x consumer's keywords are a TypeError) and returns a capsule
named ``"dltensor"``.  With ``version=1`` it takes ``max_version``/``copy`` and returns a
``"dltensor_versioned"`` capsule, flagged read-only when the array is.  Shape and strides
(in elements) may be forged to describe layouts numpy would not give.  Each export owns a
record (the C structs and a ballast of ``ballast`` bytes, as a real producer's allocation);
the deleter frees it and counts the call in :data:`DELETED`.  The capsule's destructor calls
the deleter only when no consumer took the capsule (its name unchanged), as the DLPack
specification asks of producers.  That destructor is Python code (a ctypes callback), which
fails when it runs while an exception is in flight: a consumer that refuses an export must
drop the capsule before it raises (dualmpi does; mpi4py 4.1.2 does not, so tests compare
refusals with mpi4py on numpy's producer only).
"""

import ctypes
import itertools

import numpy as np

__all__ = ["Producer", "DELETED", "live_exports"]

#: export id -> number of deleter calls
DELETED = {}
_LIVE = {}  # managed tensor address -> record (kept alive until the deleter runs)
_IDS = itertools.count()


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _Managed0(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _Deleter)]


class _Managed1(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


def _capi(name, restype, *argtypes):
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


# The destructor gets the dying capsule: it is only ever touched as a void pointer.
_is_valid = _capi("PyCapsule_IsValid", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)
_get_pointer = _capi("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)
_new = _capi("PyCapsule_New", ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p,
             ctypes.c_void_p)
_NAMES = {0: ctypes.create_string_buffer(b"dltensor"),
          1: ctypes.create_string_buffer(b"dltensor_versioned")}


@_Deleter
def _deleter(address):
    record = _LIVE.pop(address, None)
    if record is None:  # a second call: what a C producer would crash on
        DELETED["unknown"] = DELETED.get("unknown", 0) + 1
        return
    DELETED[record["id"]] += 1


@ctypes.PYFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule):
    for name in _NAMES.values():
        if _is_valid(capsule, name):  # not consumed: the producer frees the export
            _deleter(_get_pointer(capsule, name))


_CODES = {"b": 6, "i": 0, "u": 1, "f": 2, "c": 5}


def live_exports():
    """Number of exports whose deleter has not run."""
    return len(_LIVE)


class Producer:
    """Exports ``array`` (any numpy array) through DLPack 0.x or 1.x; see the module doc."""

    def __init__(self, array, version=0, shape=None, strides=None, ballast=0, device=1):
        self.array, self.version, self.ballast, self.device = array, version, ballast, device
        self.shape = list(array.shape) if shape is None else list(shape)
        if strides is None and not array.flags.c_contiguous:
            strides = [s // array.itemsize for s in array.strides]
        self.strides = strides
        self.exports = []

    def __dlpack_device__(self):
        return (self.device, 0)

    def _export(self):
        a = self.array
        ndim = len(self.shape)
        record = {"id": next(_IDS), "array": a, "ballast": bytearray(self.ballast)}
        record["shape"] = (ctypes.c_int64 * max(ndim, 1))(*self.shape)
        tensor = _DLTensor()
        tensor.data = a.ctypes.data if a.size else None
        tensor.device = _DLDevice(self.device, 0)
        tensor.ndim = ndim
        tensor.dtype = _DLDataType(_CODES[a.dtype.kind], 8 * a.itemsize, 1)
        tensor.shape = record["shape"] if ndim else None
        if self.strides is not None:
            record["strides"] = (ctypes.c_int64 * max(ndim, 1))(*self.strides)
            tensor.strides = record["strides"]
        if self.version >= 1:
            managed = _Managed1(1, 0, None, _deleter, 0 if a.flags.writeable else 1, tensor)
        else:
            managed = _Managed0(tensor, None, _deleter)
        record["managed"] = managed
        address = ctypes.addressof(managed)
        _LIVE[address] = record
        DELETED[record["id"]] = 0
        self.exports.append(record["id"])
        destructor = ctypes.cast(_capsule_destructor, ctypes.c_void_p)
        return _new(address, ctypes.addressof(_NAMES[min(self.version, 1)]), destructor)

    def __dlpack__(self, stream=None, **kwargs):
        if self.version < 1 and kwargs:
            raise TypeError(f"__dlpack__() got unexpected keyword arguments {sorted(kwargs)}")
        assert stream in (None, -1)
        return self._export()

