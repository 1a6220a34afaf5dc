"""Reduction operators for ``dualmpi.Comm``: MPI's predefined operations and numpy ufuncs.

An operator becomes a function ``combine(src, dst)`` on byte views of whole elements
(``dst = src op dst``, MPI's ``inoutbuf`` rule), which the engine applies where a
reduction's blocks meet.  MPI's predefined operations map to numpy ufuncs (so every
numpy dtype works, and integers give MPI's exact results); another ``MPI.Op`` (one
made with ``MPI.Op.Create``) is applied with ``Op.Reduce_local``, a local call that
moves no data.  The networks' trees combine in their own order, so the operator must
be commutative (a non-commutative ``MPI.Op`` is refused) and associative.
"""

import zlib

import numpy as np

from .errors import InputError

__all__ = ["PREDEFINED", "COMMUTATIVE_UFUNCS", "resolve"]

#: The numpy ufuncs that are commutative and associative (on integers; on floats to rounding),
#: so the networks' trees may combine in their own order.
COMMUTATIVE_UFUNCS = frozenset({"add", "multiply", "maximum", "minimum", "fmax", "fmin",
                                "bitwise_and", "bitwise_or", "bitwise_xor", "logical_and",
                                "logical_or", "logical_xor", "gcd", "lcm"})

#: MPI's predefined operations and the numpy ufunc that computes each.
PREDEFINED = {"SUM": np.add, "PROD": np.multiply, "MIN": np.minimum, "MAX": np.maximum,
              "BAND": np.bitwise_and, "BOR": np.bitwise_or, "BXOR": np.bitwise_xor,
              "LAND": np.logical_and, "LOR": np.logical_or, "LXOR": np.logical_xor}


def resolve(op, dtype, what, MPI=None):
    """Return ``(key, code, combine)`` for reduction operator ``op`` on elements of ``dtype``.

    ``key`` names the operator in this process's caches, ``code`` (an int) is what
    every rank of a correct program has in common, and ``combine(src, dst)`` applies
    it to byte views.  Raises :class:`~dualmpi.errors.InputError` (naming ``what``) for
    an operator that is not one, is not commutative, or does not apply to ``dtype``.

    >>> key, code, f = resolve(np.maximum, np.dtype(np.int32), "Allreduce")
    >>> a, b = np.array([1, 7], np.int32), np.array([5, 2], np.int32)
    >>> f(a.view(np.uint8), b.view(np.uint8)); b.tolist()
    [5, 7]
    >>> resolve(np.bitwise_and, np.dtype(float), "Allreduce")
    Traceback (most recent call last):
    ...
    dualmpi.errors.InputError: Allreduce: the operation bitwise_and does not apply to float64
    >>> from mpi4py import MPI
    >>> resolve(MPI.MAX, np.dtype(complex), "Allreduce", MPI)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dualmpi.errors.InputError: Allreduce: the operation MAX does not apply to complex128 ...
    >>> resolve(np.subtract, np.dtype(float), "Allreduce")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dualmpi.errors.InputError: Allreduce: numpy.subtract is not both commutative and associative; ...
    """
    name = None
    if isinstance(op, np.ufunc):
        if op.nin != 2 or op.nout != 1:
            raise InputError(f"{what}: the ufunc {op.__name__} does not take two arguments")
        if op.__name__ not in COMMUTATIVE_UFUNCS:
            raise InputError(f"{what}: numpy.{op.__name__} is not both commutative and "
                             "associative; the networks' trees combine in their own order (use "
                             f"one of {', '.join(sorted(COMMUTATIVE_UFUNCS))})")
        ufunc, name = op, op.__name__
        key, code = ("ufunc", name, id(op)), zlib.crc32(b"ufunc:" + name.encode())
    elif MPI is not None and isinstance(op, MPI.Op):
        if op == MPI.OP_NULL:
            raise InputError(f"{what}: MPI.OP_NULL is not a reduction operation")
        for loc in ("MAXLOC", "MINLOC"):
            if op == getattr(MPI, loc):
                return _loc(loc, dtype, what)
        for mpi_name, fn in PREDEFINED.items():
            if op == getattr(MPI, mpi_name):
                if mpi_name in ("LAND", "LOR", "LXOR") and dtype.kind not in "biu":
                    raise InputError(f"{what}: the operation {mpi_name} does not apply to "
                                     f"{dtype} (MPI defines it on integers and logicals)")
                if mpi_name in ("MIN", "MAX") and dtype.kind == "c":
                    raise InputError(f"{what}: the operation {mpi_name} does not apply to "
                                     f"{dtype} (MPI defines it on integers and floating "
                                     "point, not on complex numbers)")
                ufunc, name = fn, mpi_name
                key, code = ("mpi", mpi_name), zlib.crc32(mpi_name.encode())
                break
        else:
            return _mpi_op(op, dtype, what, MPI)
    else:
        raise InputError(f"{what}: {op!r} is not a reduction operation (an MPI.Op such as "
                         "MPI.SUM, or a numpy ufunc such as numpy.add)")

    if key[0] == "mpi":
        def combine(src, dst):  # (MPI's operations overflow to inf as C does: no warning)
            out = dst.view(dtype)
            with np.errstate(all="ignore"):
                ufunc(src.view(dtype), out, out=out)
    else:
        def combine(src, dst):  # (a numpy ufunc warns as numpy does)
            out = dst.view(dtype)
            ufunc(src.view(dtype), out, out=out)

    _try(combine, dtype, what, name)
    if key[0] == "mpi" and dtype.names is None and dtype.kind in "biufc":
        #: MPI's own operation on a predefined type: the compiled round loop applies it
        #: with MPI_Reduce_local (dualmpi/engine/rounds.c), exactly as MPI would
        combine.predefined = (name, dtype)
    return key + (dtype.str,), code, combine


def _loc(name, dtype, what):
    """MPI_MAXLOC / MPI_MINLOC on a pair type (value, index): the larger (smaller) value, the
    lower index on a tie, as MPI defines them (commutative and associative)."""
    if dtype.names is None or len(dtype.names) != 2:
        raise InputError(f"{what}: MPI.{name} applies to MPI's pair types (MPI.DOUBLE_INT, "
                         f"MPI.TWOINT, ...), not {dtype}")
    value, index = dtype.names
    better = np.greater if name == "MAXLOC" else np.less

    def combine(src, dst):
        a, b = src.view(dtype), dst.view(dtype)
        va, vb, ia, ib = a[value], b[value], a[index], b[index]
        take = better(va, vb) | ((va == vb) & (ia < ib))
        b[take] = a[take]

    _try(combine, dtype, what, name)
    return ("mpi", name, dtype.str), zlib.crc32(name.encode()), combine


def _mpi_op(op, dtype, what, MPI):
    """A user-defined (or other predefined) MPI.Op, applied with ``Reduce_local``."""
    from mpi4py.util.dtlib import from_numpy_dtype

    if not op.Is_commutative():
        raise InputError(f"{what}: the operation is not commutative; the networks' trees combine "
                         "in their own order, so only commutative operations are supported")
    try:
        mpitype = from_numpy_dtype(dtype)
    except (ValueError, TypeError):
        raise InputError(f"{what}: {dtype} has no MPI datatype for this operation") from None
    item = dtype.itemsize

    def combine(src, dst):
        n = src.size // item
        op.Reduce_local([src, n, mpitype], [dst, n, mpitype])

    _try(combine, dtype, what, "given", (MPI.Exception,))
    return ("mpi-op", id(op), dtype.str), 0, combine


def _try(combine, dtype, what, name, errors=()):
    """Apply ``combine`` to one element: an operation that does not fit ``dtype`` fails here."""
    a = np.zeros(dtype.itemsize, dtype=np.uint8)
    try:
        combine(a, a.copy())
    except (TypeError, ValueError, *errors):
        raise InputError(f"{what}: the operation {name} does not apply to {dtype}") from None
