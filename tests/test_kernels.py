"""The compiled loop's combines (dualmpi/engine/rounds.c: ``reduce_local``) against numpy.

Every reduction the compiled loop applies (:func:`dualmpi.engine.mpi._mpi_op`: MPI's
predefined operations on predefined numeric types) gives what :func:`dualmpi.ops.resolve`'s
numpy combine gives on the same bytes: C's arithmetic, sums and products wrapping. The 8- and
16-bit integers and bools run the loop's own kernels (the Open MPI 5.0.11 wheel's
``MPI_Reduce_local`` saturates 8- and 16-bit sums from 16 elements on); the wider types
``MPI_Reduce_local`` (checked on exactly representable values).
"""

import numpy as np
import pytest

from dualmpi.engine import cloop
from dualmpi.engine import mpi as engine_mpi
from dualmpi.ops import PREDEFINED, resolve

MPI = pytest.importorskip("mpi4py.MPI")

OWN = (np.int8, np.uint8, np.int16, np.uint16, np.bool_)
WIDE = (np.int32, np.uint32, np.int64, np.uint64, np.float32, np.float64, np.complex128)
#: Element counts: none, one, under, at and over a vector's 16, and many.
COUNTS = (0, 1, 15, 16, 17, 1000)


@pytest.fixture(scope="module")
def lib():
    lib = cloop.load()
    if lib is None:
        pytest.skip(f"no compiled loop: {cloop.reason()}")
    return lib


def _operands(dtype, n, name, seed):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=(2, n)).astype(dtype)
    if dtype.kind in "iu" and dtype.itemsize <= 2:  # the whole range: sums and products overflow
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=(2, n), endpoint=True, dtype=dtype)
    if name in ("LAND", "LOR", "LXOR"):
        return rng.integers(0, 3, size=(2, n)).astype(dtype)
    if name == "PROD":
        return rng.integers(-3 if dtype.kind != "u" else 0, 4, size=(2, n)).astype(dtype)
    return rng.integers(0 if dtype.kind == "u" else -1000, 1000, size=(2, n)).astype(dtype)


def _applies(name, dtype):
    """Whether MPI defines predefined operation ``name`` on ``dtype``."""
    kind = np.dtype(dtype).kind
    if name in ("LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR"):
        return kind in "biu"
    return not (name in ("MIN", "MAX") and kind == "c")


@pytest.mark.parametrize("name,dtype", [(name, dtype) for name in PREDEFINED
                                        for dtype in OWN + WIDE if _applies(name, dtype)])
def test_compiled_combines_equal_numpy(lib, name, dtype):
    """``dualmpi_combine`` (the loop's own kernel or MPI_Reduce_local) equals numpy's combine,
    overflowing 8- and 16-bit sums and products included (C's wrap-around)."""
    dtype = np.dtype(dtype)
    _, _, combine = resolve(getattr(MPI, name), dtype, "test", MPI)
    handles = engine_mpi._mpi_op(combine)
    assert handles is not None, "the compiled loop applies every predefined op on this type"
    op, mpitype, item = handles
    assert (mpitype == 0) == (dtype.type in OWN) and item == dtype.itemsize
    for n in COUNTS:
        src, dst = _operands(dtype, n, name, [n, item, len(name)])
        want = dst.copy()
        combine(src.view(np.uint8), want.view(np.uint8))
        got = np.concatenate([dst, dst[:1]]) if n else dst.copy()  # a guard element after
        guard = got[n:].copy()
        err = lib.dualmpi_combine(src.ctypes.data, got.ctypes.data, n * item, item, op, mpitype)
        assert err == 0
        assert got[:n].tobytes() == want.tobytes(), (name, dtype, n)
        assert got[n:].tobytes() == guard.tobytes()


def test_kernel_tables_agree(lib):
    """The Python side's kernel codes are in the order of the C side's tables."""
    assert lib.dualmpi_kernel_ops() == len(engine_mpi._KERNEL_OPS)
    assert lib.dualmpi_kernel_types() == len(engine_mpi._KERNEL_TYPES)
    assert [np.dtype(c).type for c in engine_mpi._KERNEL_TYPES] == list(OWN)


def test_bad_kernel_code_is_an_error(lib):
    """A code that names no kernel returns MPI's error, touching nothing."""
    a, b = np.ones(4, np.uint8), np.full(4, 7, np.uint8)
    for code in (0, 1 + 8 * len(engine_mpi._KERNEL_OPS), 1 + 8 * 0 + 7):
        assert lib.dualmpi_combine(a.ctypes.data, b.ctypes.data, 4, 1, code, 0) != 0
    assert b.tolist() == [7] * 4


@pytest.mark.parametrize("name,dtype", [(name, dtype) for name in PREDEFINED
                                        for dtype in OWN + WIDE if not _applies(name, dtype)])
def test_operations_mpi_does_not_define_are_refused(name, dtype):
    """An operation MPI does not define on the type is refused before any message (MPI's own
    call fails with MPI_ERR_OP; numpy would compute something)."""
    from dualmpi.errors import InputError

    with pytest.raises(InputError, match=f"{name} does not apply to"):
        resolve(getattr(MPI, name), np.dtype(dtype), "Allreduce", MPI)


def test_doctests():
    """_mpi_op's and resolve's examples run."""
    import doctest

    import dualmpi.ops

    assert doctest.testmod(engine_mpi).failed == 0
    assert doctest.testmod(dualmpi.ops).failed == 0
