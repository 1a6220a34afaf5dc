"""dualmpi.msgbuffer against MPI's own reading of the same buffer specs (one process).

The reference is ``MPI.COMM_SELF``: a ``Sendrecv`` from the spec into plain bytes shows which
bytes MPI reads and in which order; a ``Sendrecv`` from plain bytes into the spec (over a
sentinel) shows which bytes MPI writes.  ``pack()`` must give the first byte for byte and
``unpack()`` the second, gaps untouched.  Where mpi4py raises, msgbuffer must raise InputError.
"""

import array
import ctypes
import gc
import mmap
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from dlpack_producer import DELETED, Producer, live_exports
from dualmpi.errors import InputError

MPI = pytest.importorskip("mpi4py.MPI")
mb = pytest.importorskip("dualmpi.msgbuffer")

SELF = MPI.COMM_SELF
SENTINEL = 0xA5


def _types():
    """Every kind of derived datatype (committed), with predefined ones for comparison."""
    INT, SHORT, DOUBLE = MPI.INT, MPI.SHORT, MPI.DOUBLE
    t = {}
    t["INT"] = INT
    t["DOUBLE"] = DOUBLE
    t["FLOAT_INT"] = MPI.FLOAT_INT
    t["SHORT_INT"] = MPI.SHORT_INT  # a predefined pair type with a hole
    t["contiguous"] = INT.Create_contiguous(3)
    t["vector"] = INT.Create_vector(3, 2, 4)
    t["vector_dense"] = INT.Create_vector(3, 2, 2)
    t["hvector"] = SHORT.Create_hvector(2, 3, 20)
    t["hvector_negative"] = INT.Create_hvector(3, 1, -8)
    t["indexed"] = INT.Create_indexed([2, 1, 3], [5, 0, 9])
    t["indexed_swapped"] = INT.Create_indexed([1, 1], [1, 0])  # dense bytes, permuted order
    t["hindexed"] = SHORT.Create_hindexed([1, 2], [12, 0])
    t["hindexed_negative"] = INT.Create_hindexed([1, 1], [-8, 4])  # bytes before the origin
    t["hindexed_shifted"] = INT.Create_hindexed([2], [8])  # dense, 8 bytes after the origin
    t["indexed_block"] = INT.Create_indexed_block(1, [0, 2, 4, 6, 8])
    t["hindexed_block"] = INT.Create_hindexed_block(2, [16, 0])
    t["subarray_c"] = INT.Create_subarray([4, 5], [2, 3], [1, 1], order=MPI.ORDER_C)
    t["subarray_f"] = INT.Create_subarray([4, 5], [2, 3], [1, 1], order=MPI.ORDER_F)
    t["subarray_rows"] = INT.Create_subarray([4, 5], [2, 5], [1, 0], order=MPI.ORDER_C)
    t["subarray_full"] = DOUBLE.Create_subarray([3, 2], [3, 2], [0, 0])
    t["struct"] = MPI.Datatype.Create_struct([1, 2, 1], [0, 8, 16], [INT, SHORT, DOUBLE])
    t["struct_swapped"] = MPI.Datatype.Create_struct([1, 2], [8, 0], [INT, SHORT])
    t["struct_dense"] = MPI.Datatype.Create_struct([2, 1], [0, 8], [INT, DOUBLE])
    t["resized_gap"] = INT.Create_resized(0, 8)
    gapped = INT.Create_resized(0, 8)
    t["contiguous_of_gapped"] = gapped.Create_contiguous(2)
    t["indexed_of_gapped"] = gapped.Create_indexed([2], [1])
    gapped.Free()
    t["resized_dense"] = INT.Create_contiguous(2).Create_resized(0, 8)
    t["resized_negative_lb"] = INT.Create_vector(2, 1, 2).Create_resized(-4, 16)
    t["resized_zero_extent"] = INT.Create_resized(0, 0)
    t["resized_negative_extent"] = INT.Create_resized(0, -4)
    t["dup"] = INT.Dup()
    t["dup_vector"] = INT.Create_vector(2, 1, 3).Dup()
    inner = MPI.Datatype.Create_struct([1, 1], [0, 4], [INT, MPI.FLOAT]).Create_resized(0, 12)
    t["nested_vector_of_struct"] = inner.Create_vector(2, 1, 2)
    inner.Free()
    sub = INT.Create_subarray([3, 3], [2, 2], [0, 1])
    t["nested_indexed_of_subarray"] = sub.Create_indexed([1, 1], [1, 0])
    sub.Free()
    t["darray"] = INT.Create_darray(1, 0, [4, 6], [MPI.DISTRIBUTE_BLOCK, MPI.DISTRIBUTE_CYCLIC],
                                    [MPI.DISTRIBUTE_DFLT_DARG, 2], [1, 1])
    return {name: dt if dt.is_predefined else dt.Commit() for name, dt in t.items()}


TYPES = _types()
#: Datatypes whose elements, at extent steps, are one ascending run of bytes: a view.
DENSE = {"INT", "DOUBLE", "FLOAT_INT", "contiguous", "vector_dense", "subarray_full",
         "struct_dense", "resized_dense", "dup", "hindexed_shifted"}
#: Datatypes whose ONE element is a dense run but whose extent is not their size.
DENSE_ONE = {"subarray_rows", "resized_gap", "resized_zero_extent", "resized_negative_extent"}


def _is_view(name, n):
    return n > 0 and (name in DENSE or (n == 1 and name in DENSE_ONE))


def _span(dt, n):
    """Bytes [lo, hi) that ``n`` elements touch, relative to the first element's origin."""
    if n == 0 or dt.size == 0:
        return 0, 0
    ext = dt.extent
    lo = dt.true_lb + min(0, (n - 1) * ext)
    hi = dt.true_lb + dt.true_extent + max(0, (n - 1) * ext)
    return lo, hi


def _layout(dt, n):
    """A buffer large enough for ``n`` elements and the displacement (in extents) to use."""
    lo, hi = _span(dt, n)
    displ = 0
    if lo < 0:
        displ = -(lo // dt.extent) if dt.extent > 0 else 0
    origin = displ * dt.extent if dt.extent > 0 else -min(lo, 0)
    return origin + hi + 8, displ, origin


def _mpi_reads(spec, nbytes):
    out = np.zeros(nbytes, np.uint8)
    SELF.Sendrecv(spec, 0, 7, [out, nbytes, MPI.BYTE], 0, 7)
    return out


def _mpi_writes(payload, spec):
    SELF.Sendrecv([payload, payload.size, MPI.BYTE], 0, 8, spec, 0, 8)


def _src(nbytes):
    return (np.arange(nbytes) * 7 + 3).astype(np.uint8)


def _spec(buf, n, displ, dt):
    return [buf, (n, displ), dt] if displ else [buf, n, dt]


@pytest.mark.parametrize("name", sorted(TYPES))
@pytest.mark.parametrize("n", [0, 1, 3])
def test_pack_is_what_mpi_reads(name, n):
    dt = TYPES[name]
    size, displ, origin = _layout(dt, n)
    buf = _src(size)
    if displ == 0 and origin:  # negative extent: element 1 lies before the buffer
        with pytest.raises(InputError, match="needs bytes"):
            mb.simple([buf, n, dt], role="send", what="Send buf")
        return
    spec = _spec(buf, n, displ, dt)
    m = mb.simple(spec, role="send", what="Send buf")
    assert m.count == n and m.blocks == 1 and m.nbytes == n * dt.size
    assert m.data.dtype == np.uint8 and m.data.ndim == 1 and m.data.flags.c_contiguous
    assert m.datatype == dt
    ref = _mpi_reads(spec, n * dt.size)
    got = m.pack().copy()
    assert got.tobytes() == ref.tobytes()
    if _is_view(name, n):
        assert not m.packed and np.shares_memory(m.data, buf)
    elif n:
        assert m.packed and not np.shares_memory(m.data, buf)


@pytest.mark.parametrize("name", sorted(TYPES))
@pytest.mark.parametrize("n", [0, 1, 3])
def test_unpack_writes_what_mpi_writes(name, n):
    dt = TYPES[name]
    if n > 1 and dt.extent <= 0:
        pytest.skip("overlapping elements: receiving into them is erroneous in MPI")
    size, displ, origin = _layout(dt, n)
    payload = _src(n * dt.size)[::-1].copy()
    ref = np.full(size, SENTINEL, np.uint8)
    _mpi_writes(payload, _spec(ref, n, displ, dt))
    mine = np.full(size, SENTINEL, np.uint8)
    m = mb.simple(_spec(mine, n, displ, dt), role="recv", what="Recv buf")
    m.data[:] = payload
    m.unpack()
    assert mine.tobytes() == ref.tobytes()
    assert np.count_nonzero(mine != SENTINEL) <= n * dt.size  # only the typemap's bytes
    assert m.packed == (not _is_view(name, n) and n > 0)


def test_issue_bcast_indexed_block_leaves_gaps():
    buf = np.full(10, -1, np.int32)
    m = mb.simple((buf, 1, TYPES["indexed_block"]), role="recv", what="Bcast buf")
    m.data[:] = np.arange(10, 15, dtype=np.int32).view(np.uint8)
    m.unpack()
    assert buf.tolist() == [10, -1, 11, -1, 12, -1, 13, -1, 14, -1]


@pytest.mark.parametrize("name", ["hindexed_negative", "hvector_negative"])
def test_negative_lower_bound_outside_buffer_is_refused(name):
    dt = TYPES[name]
    with pytest.raises(InputError, match="Send buf: count 1 needs bytes"):
        mb.simple([np.zeros(64, np.uint8), 1, dt], role="send", what="Send buf")


# ---------------------------------------------------------------------------------------------
# Buffer forms without a datatype: the buffer's format picks it, as in mpi4py


class DLPackOnly:
    """Exposes memory only through DLPack (no buffer protocol)."""

    def __init__(self, arr):
        self._arr = arr

    def __dlpack__(self, **kwargs):
        return self._arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._arr.__dlpack_device__()


class ArrayInterfaceOnly:
    def __init__(self, arr):
        self._arr = arr
        self.__array_interface__ = arr.__array_interface__


def _forms():
    a32 = np.arange(6, dtype=np.int32)
    return {
        "numpy_1d": (np.arange(5, dtype=np.float64), MPI.DOUBLE, 5),
        "numpy_2d_c": (np.arange(12, dtype=np.int16).reshape(3, 4), MPI.SHORT, 12),
        "numpy_2d_f": (np.asfortranarray(np.arange(6.0).reshape(2, 3)), MPI.DOUBLE, 6),
        "numpy_0d": (np.array(2.5), MPI.DOUBLE, 1),
        "numpy_empty": (np.zeros((0, 3), np.int32), MPI.INT, 0),
        "numpy_bool": (np.array([True, False, True]), MPI.BOOL, 3),
        "numpy_complex": (np.arange(3, dtype=np.complex128), MPI.C_DOUBLE_COMPLEX, 3),
        "numpy_uint8": (np.arange(4, dtype=np.uint8), MPI.BYTE, 4),  # format "B" is BYTE
        "bytes": (b"abcdef", MPI.BYTE, 6),
        "bytearray": (bytearray(b"abcd"), MPI.BYTE, 4),
        "memoryview_i": (memoryview(a32), MPI.INT, 6),
        "array_h": (array.array("h", [1, 2, 3]), MPI.SHORT, 3),
        "array_d": (array.array("d", [1.0, 2.0]), MPI.DOUBLE, 2),
        "array_q": (array.array("q", [1, 2]), MPI.LONG_LONG, 2),
        "mmap": (_mmap(16), MPI.BYTE, 16),
        "ctypes": ((ctypes.c_int * 3)(1, 2, 3), MPI.INT, 3),
        "dlpack": (DLPackOnly(np.arange(4, dtype=np.int64)), MPI.LONG, 4),
        "mpi_buffer": (MPI.buffer.allocate(8), MPI.BYTE, 8),
    }


def _mmap(n):
    m = mmap.mmap(-1, n)
    m.write(bytes(range(n)))
    return m


FORMS = _forms()


@pytest.mark.parametrize("form", sorted(FORMS))
def test_bare_buffer_forms(form):
    buf, dt, count = FORMS[form]
    m = mb.simple(buf, role="send", what="Send buf")
    assert m.datatype == dt, (m.datatype.Get_name(), dt.Get_name())
    assert m.count == count and m.nbytes == count * dt.size and not m.packed
    assert m.obj is buf
    ref = _mpi_reads(buf, m.nbytes)
    assert m.data.tobytes() == ref.tobytes()
    r = mb.simple(buf, role="recv", what="Recv buf") if form != "bytes" else None
    if r is not None and r.nbytes:  # a view: writing data writes the user's memory
        r.data[0] ^= 0xFF
        assert _mpi_reads(buf, r.nbytes)[0] == ref[0] ^ 0xFF
        r.data[0] ^= 0xFF


def test_typed_buffer_counts_elements_not_bytes():
    buf = array.array("h", range(8))
    m = mb.simple([buf, 3], role="send", what="Send buf")
    assert m.datatype == MPI.SHORT and m.count == 3 and m.nbytes == 6
    assert m.data.tobytes() == _mpi_reads([buf, 3], 6).tobytes()


@pytest.mark.parametrize("spec_kind", ["list", "tuple", "str_type", "count_displ_tuple",
                                       "count_displ_list", "four", "datatype_only"])
def test_list_forms(spec_kind):
    buf = np.arange(10, dtype=np.int32)
    spec = {
        "list": [buf, 4],
        "tuple": (buf, 4),
        "str_type": [buf, 3, "i"],
        "count_displ_tuple": [buf, (3, 2), MPI.INT],
        "count_displ_list": [buf, [3, 2]],
        "four": [buf, 3, 4, MPI.INT],
        "datatype_only": [buf, MPI.INT],
    }[spec_kind]
    m = mb.simple(spec, role="send", what="Send buf")
    ref = _mpi_reads(spec, m.nbytes)
    assert m.data.tobytes() == ref.tobytes() and m.datatype == MPI.INT


def test_none_buffer_with_zero_count():
    for spec in ([None, MPI.INT], [None, 0, MPI.INT]):
        m = mb.simple(spec, role="recv", what="Recv buf")
        assert m.count == 0 and m.nbytes == 0 and m.data.size == 0
        SELF.Sendrecv(spec, 0, 9, spec, 0, 9)  # mpi4py accepts it too


def test_fast_path_agrees_with_general_path():
    for arr in (np.arange(12, dtype=np.int32), np.arange(6.0).reshape(2, 3), np.zeros(0)):
        fast = mb.simple(arr, blocks=2 if arr.size else 1, role="recv")
        slow = mb.simple([arr, mb.simple(arr).datatype], blocks=fast.blocks, role="recv")
        assert (fast.count, fast.blocks, fast.nbytes, fast.typesig, fast.dtype) == \
            (slow.count, slow.blocks, slow.nbytes, slow.typesig, slow.dtype)
        assert fast.datatype == slow.datatype and np.shares_memory(fast.data, arr) == bool(
            arr.size)


@pytest.mark.parametrize("blocks,count", [(1, 12), (2, 6), (3, 4), (4, 3), (12, 1)])
def test_blocks_divide_an_inferred_count(blocks, count):
    m = mb.simple(np.arange(12, dtype=np.int32), blocks=blocks, role="send")
    assert (m.count, m.blocks, m.nbytes, m.data.size) == (count, blocks, 4 * count, 48)


def test_count_in_spec_is_per_block():
    s = np.arange(16, dtype=np.int32)
    m = mb.simple([s, 2, MPI.INT], blocks=4, role="send", what="Alltoall sendbuf")
    assert (m.count, m.nbytes, m.data.size) == (2, 8, 32)
    v = TYPES["vector"]  # 3 blocks of 2 ints, stride 4: extent 40 bytes
    big = np.arange(64, dtype=np.int32)
    m = mb.simple([big, 1, v], blocks=3, role="send", what="Alltoall sendbuf")
    assert m.nbytes == 24 and m.data.size == 72
    ref = _mpi_reads([big, 3, v], 72)
    assert m.pack().tobytes() == ref.tobytes()


# ---------------------------------------------------------------------------------------------
# Errors: one InputError line naming the argument; mpi4py raises on the same specs


def _mpi4py_raises(spec):
    """True when mpi4py refuses ``spec`` as a send buffer before MPI sees it."""
    try:
        SELF.Sendrecv(spec, 0, 11, [bytearray(64), 64, MPI.BYTE], 0, 11)
    except (TypeError, ValueError, KeyError, BufferError):
        return True
    return False


ERRORS = {
    "non_contiguous": (np.arange(10)[::2], "not contiguous"),
    "big_endian": (np.arange(3, dtype=">i4"), "non-native byte order"),
    "structured_no_type": (np.zeros(2, "i4,f4"), "cannot map buffer format"),
    "twelve_bytes_double": ([bytearray(12), MPI.DOUBLE], "not a multiple of the datatype"),
    "datatype_null": ([bytearray(8), MPI.DATATYPE_NULL], "DATATYPE_NULL"),
    "none_with_count": ([None, 2, MPI.INT], "None but the count is 2"),
    "negative_displ": ([bytearray(8), (1, -1), MPI.BYTE], "negative displacement"),
    "displ_out_of_bounds": ([bytearray(8), (1, 9), MPI.BYTE], "out of bounds"),
    "five_items": ([bytearray(8), 1, 0, MPI.BYTE, 0], "2 to 4 items"),
    "not_a_buffer": (3.5, "expecting a buffer"),
    "array_interface_only": (ArrayInterfaceOnly(np.arange(3)), "expecting a buffer"),
    "float_count": ([bytearray(8), 1.5], "not an integer"),
    "bad_type_code": ([bytearray(8), "zz"], "cannot map 'zz'"),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_where_mpi4py_raises(case):
    spec, message = ERRORS[case]
    with pytest.raises(InputError, match=message) as info:
        mb.simple(spec, role="send", what="Send buf")
    text = str(info.value)
    assert text.startswith("Send buf: ") and "\n" not in text
    assert _mpi4py_raises(spec), "mpi4py accepts what msgbuffer refuses"


ERRORS_MPI_DOES_NOT_CHECK = {  # MPI would read or write outside the buffer, or fail later
    "count_too_large": ([np.zeros(4, np.int32), 5, MPI.INT], "needs bytes"),
    "negative_count": ([np.zeros(4, np.int32), -1, MPI.INT], "negative count"),
    "vector_too_large": ([np.zeros(9, np.int32), 1, TYPES["vector"]], "needs bytes"),
    "bottom": ([MPI.BOTTOM, 1, MPI.INT], "MPI.BOTTOM"),
    "in_place": (MPI.IN_PLACE, "MPI.IN_PLACE is not a buffer here"),
    "none": (None, "None is not a buffer here"),
}


@pytest.mark.parametrize("case", sorted(ERRORS_MPI_DOES_NOT_CHECK))
def test_errors_before_mpi_would_misbehave(case):
    spec, message = ERRORS_MPI_DOES_NOT_CHECK[case]
    with pytest.raises(InputError, match=message):
        mb.simple(spec, role="send", what="Send buf")


def test_uncommitted_datatype():
    v = MPI.INT.Create_vector(2, 1, 2)
    try:
        with pytest.raises(InputError, match="Commit"):
            mb.simple([np.zeros(8, np.int32), 1, v], role="send", what="Send buf")
        with pytest.raises(MPI.Exception):
            SELF.Sendrecv([np.zeros(8, np.int32), 1, v], 0, 12, bytearray(8), 0, 12)
    finally:
        v.Free()


@pytest.mark.parametrize("buf", [b"abcd", np.arange(4).view(np.uint8)[:8].copy()],
                         ids=["bytes", "readonly_numpy"])
def test_readonly_receive_buffer(buf):
    if isinstance(buf, np.ndarray):
        buf.flags.writeable = False
    with pytest.raises(InputError, match="Recv buf: .*read-only"):
        mb.simple(buf, role="recv", what="Recv buf")
    with pytest.raises((BufferError, ValueError)):
        SELF.Sendrecv(bytearray(4), 0, 13, buf, 0, 13)
    mb.simple(buf, role="send")  # sending from it is fine


def test_readonly_mmap_receive():
    ro = mmap.mmap(-1, 8, access=mmap.ACCESS_READ)
    with pytest.raises(InputError, match="read-only"):
        mb.simple(ro, role="recv", what="Recv buf")


def test_inner_datatypes_stay_usable():
    """msgbuffer frees the handles decode() returns (MPI says to); the user's types survive."""
    inner = MPI.INT.Create_contiguous(2).Commit()
    outer = inner.Create_vector(2, 1, 2).Commit()
    twice = MPI.Datatype.Create_struct([1, 1], [0, 16], [inner, inner]).Commit()
    try:
        for _ in range(5):
            mb.simple([np.zeros(8, np.int32), 1, outer], role="send")
            mb.simple([np.zeros(8, np.int32), 1, twice], role="send")
        outer.Free()
        twice.Free()
        out = np.zeros(2, np.int32)
        SELF.Sendrecv([np.arange(2, dtype=np.int32), 1, inner], 0, 14, out, 0, 14)
        assert out.tolist() == [0, 1]
    finally:
        for t in (outer, twice, inner):
            if t != MPI.DATATYPE_NULL:
                t.Free()


# ---------------------------------------------------------------------------------------------
# Type signatures and reduction dtypes


def _sig(spec):
    return mb.simple(spec, role="send").typesig


def test_typesig_follows_mpi_type_matching():
    ints = np.zeros(16, np.int32)
    raw = np.zeros(64, np.uint8)
    pair = MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.INT, MPI.DOUBLE]).Commit()
    quad = MPI.Datatype.Create_struct([1, 1, 1, 1], [0, 8, 16, 24],
                                      [MPI.INT, MPI.DOUBLE, MPI.INT, MPI.DOUBLE]).Commit()
    two = MPI.INT.Create_contiguous(2).Commit()
    fi = MPI.Datatype.Create_struct([1, 1], [0, 4], [MPI.FLOAT, MPI.INT]).Commit()
    try:
        assert _sig([raw, 2, pair]) == _sig([raw, 1, quad])
        assert _sig([raw, 1, pair]) != _sig([raw, 1, quad])
        assert _sig([ints, 4, MPI.INT]) == _sig([ints, 2, two]) == _sig([ints, 4, MPI.INT32_T])
        assert _sig([ints, 4, MPI.INT]) == _sig(ints[:4])
        assert _sig([ints, 4, MPI.INT]) != _sig([ints, 4, MPI.FLOAT])
        assert _sig([ints, 3, MPI.INT]) != _sig([ints, 4, MPI.INT])
        assert _sig([raw, 2, MPI.FLOAT_INT]) == _sig([raw, 2, fi])
        assert _sig([ints, 1, TYPES["vector"]]) == _sig([ints, 6, MPI.INT])
        assert _sig([ints, 0, MPI.INT]) == _sig([raw, 0, pair]) == (0, 0)
        assert _sig([raw, 4, MPI.PACKED]) is None
    finally:
        for t in (pair, quad, two, fi):
            t.Free()


def test_dtype_for_reductions():
    raw = np.zeros(256, np.uint8)
    assert mb.simple([raw, 1, TYPES["vector"]]).dtype == np.int32
    assert mb.simple([raw, 1, TYPES["struct"]]).dtype is None
    ints = MPI.Datatype.Create_struct([1, 2], [0, 8], [MPI.INT, MPI.INT32_T]).Commit()
    try:
        assert mb.simple([raw, 2, ints]).dtype == np.int32
    finally:
        ints.Free()
    assert mb.simple([raw, 2, MPI.FLOAT_INT]).dtype.names == ("f0", "f1")
    assert mb.simple(np.zeros(3)).dtype == np.float64


# ---------------------------------------------------------------------------------------------
# Vector forms (v-variants) and Alltoallw


def test_vector_forms_infer_as_mpi4py():
    s = np.arange(7, dtype=np.int32)
    v = mb.vector(s, 3, role="send")
    assert v.counts.tolist() == [3, 2, 2] and v.displs.tolist() == [0, 3, 5]
    v = mb.vector([s, 2], 3, role="send")
    assert v.counts.tolist() == [2, 2, 2] and v.displs.tolist() == [0, 2, 4]
    v = mb.vector([s, (2, 3)], 2, role="send")
    assert v.counts.tolist() == [2, 2] and v.displs.tolist() == [0, 3]
    v = mb.vector([s, ([1, 2], [5, 0])], 2, role="send")
    assert v.byte_counts.tolist() == [4, 8] and v.byte_displs.tolist() == [20, 0]
    assert not v.packed and np.shares_memory(v.data, s)
    v = mb.vector([s, [1, 2], [5, 0], "i"], 2, role="send")
    assert v.counts.tolist() == [1, 2] and v.displs.tolist() == [5, 0]
    v = mb.vector([s, [3, 4], MPI.INT], 2, role="send")  # a list in 2nd place: counts
    assert v.displs.tolist() == [0, 3]


@pytest.mark.parametrize("spec,message", [
    (lambda s: [s, [1, 2], [5, 0]], "must be a datatype"),
    (lambda s: [s, [[1, 2], [5, 0]]], "not an integer"),
    (lambda s: [s, [1, 2, 3]], "3 items, expecting 2"),
    (lambda s: [s, ([1, 2], [0, 6])], "needs bytes"),
    (lambda s: [s, [1, -1]], "negative count"),
    (lambda s: [s[:5], MPI.DOUBLE], "not a multiple"),
])
def test_vector_errors(spec, message):
    s = np.arange(7, dtype=np.int32)
    with pytest.raises(InputError, match=message):
        mb.vector(spec(s), 2, role="send", what="Alltoallv sendbuf")


def test_vector_three_items_without_datatype_is_refused_by_mpi4py_too():
    s = np.arange(4, dtype=np.int32)
    with pytest.raises(TypeError):
        SELF.Alltoallv([s, [2], [1]], [np.zeros(4, np.int32), [2], [0]])


@pytest.mark.parametrize("name", sorted(TYPES))
def test_vector_against_alltoallv(name):
    dt = TYPES[name]
    if dt.extent <= 0:
        pytest.skip("v-displacements need a positive extent")
    n, displ = 2, 1
    size, d0, _ = _layout(dt, n + displ)
    displ += d0
    sbuf = _src(size)
    v = mb.vector([sbuf, ([n], [displ]), dt], 1, role="send", what="Alltoallv sendbuf")
    ref = np.zeros(n * dt.size, np.uint8)
    SELF.Alltoallv([sbuf, ([n], [displ]), dt], [ref, ([n * dt.size], [0]), MPI.BYTE])
    packed = v.pack()
    got = packed[v.byte_displs[0]:v.byte_displs[0] + v.byte_counts[0]]
    assert got.tobytes() == ref.tobytes()
    rbuf_ref = np.full(size, SENTINEL, np.uint8)
    SELF.Alltoallv([ref[::-1].copy(), ([ref.size], [0]), MPI.BYTE],
                   [rbuf_ref, ([n], [displ]), dt])
    rbuf = np.full(size, SENTINEL, np.uint8)
    r = mb.vector([rbuf, ([n], [displ]), dt], 1, role="recv", what="Alltoallv recvbuf")
    r.data[r.byte_displs[0]:r.byte_displs[0] + r.byte_counts[0]] = ref[::-1]
    r.unpack()
    assert rbuf.tobytes() == rbuf_ref.tobytes()
    assert r.packed == (not _is_view(name, n))


def test_wvector_displacements_are_bytes():
    """Alltoallw displacements count bytes (MPI standard).

    The reference is a Sendrecv from the byte offset: Open MPI 5.0.11's one-process
    Alltoallw (coll/self, used for COMM_SELF) multiplies the displacements by the extents.
    """
    dt = TYPES["vector"]
    sbuf = _src(256)
    w = mb.wvector([sbuf, ([2], [12]), [dt]], 1, role="send", what="Alltoallw sendbuf")
    assert w.packed and w.byte_counts.tolist() == [2 * dt.size]
    ref = _mpi_reads([sbuf[12:], 2, dt], 2 * dt.size)
    assert w.pack().tobytes() == ref.tobytes()
    rref = np.full(256, SENTINEL, np.uint8)
    _mpi_writes(ref, [rref[12:], 2, dt])
    mine = np.full(256, SENTINEL, np.uint8)
    r = mb.wvector([mine, ([2], [12]), [dt]], 1, role="recv")
    r.data[:] = ref
    r.unpack()
    assert mine.tobytes() == rref.tobytes()
    assert r.block_typesig(0) == mb.simple([sbuf, 12, MPI.INT]).typesig


def test_wvector_forms():
    s = np.arange(8, dtype=np.int32)
    w = mb.wvector([s, [MPI.INT, MPI.INT]], 2, role="send")
    assert w.counts.tolist() == [1, 1] and w.displs.tolist() == [0, 0] and not w.packed
    w = mb.wvector([s, [2, 1], [0, 12], [MPI.INT, MPI.DOUBLE]], 2, role="send")
    assert w.byte_counts.tolist() == [8, 8] and w.byte_displs.tolist() == [0, 12]
    assert w.dtype is None
    with pytest.raises(InputError, match="expecting 2 datatypes"):
        mb.wvector([s, ([1, 1], [0, 0]), [MPI.INT]], 2, role="send", what="Alltoallw sendbuf")
    with pytest.raises(InputError, match="needs bytes"):
        mb.wvector([s, ([1, 1], [0, 30]), [MPI.INT, MPI.INT]], 2, role="send")


# ---------------------------------------------------------------------------------------------
# MPI.BOTTOM: datatypes (and Alltoallw's byte displacements) holding absolute addresses, as in
# mpi4py's testAlltoallwBottom; packed by MPI's own Pack, compared with MPI's reading of the
# same specs on COMM_SELF


def _at(buf, origin, dt, n=1):
    """``n`` elements of ``dt`` from byte ``origin`` of ``buf``, at absolute addresses."""
    return MPI.Datatype.Create_struct([n], [MPI.Get_address(buf) + origin], [dt]).Commit()


BOTTOM_TYPES = sorted(name for name in TYPES if TYPES[name].size)


@pytest.mark.parametrize("name", BOTTOM_TYPES)
@pytest.mark.parametrize("form", ["count_1", "count_n", "blocks"])
def test_bottom_simple_against_mpi(name, form):
    dt, n = TYPES[name], 3
    size, _, origin = _layout(dt, n)
    if dt.extent <= 0:
        origin = -min(_span(dt, n)[0], 0)
    buf = _src(size)
    one, whole = _at(buf, origin, dt), _at(buf, origin, dt, n)
    spec, blocks = {"count_1": ([MPI.BOTTOM, 1, whole], 1), "count_n": ([MPI.BOTTOM, n, one], 1),
                    "blocks": ([MPI.BOTTOM, 1, one], n)}[form]
    try:
        m = mb.simple(spec, blocks=blocks, role="send", what="Send buf")
        assert m.packed and m.nbytes * blocks == n * dt.size and m.obj is MPI.BOTTOM
        ref = _mpi_reads([MPI.BOTTOM, 1, whole], n * dt.size)
        assert m.pack().tobytes() == ref.tobytes()
        relative = mb.wvector([buf, ([1 if form == "blocks" else n], [origin]), [dt]], 1,
                              role="send")
        assert m.typesig == relative.block_typesig(0)
    finally:
        one.Free()
        whole.Free()


@pytest.mark.parametrize("name", BOTTOM_TYPES)
def test_bottom_unpack_writes_what_mpi_writes(name):
    dt = TYPES[name]
    n = 3 if dt.extent > 0 else 1  # overlapping elements cannot receive
    size, _, origin = _layout(dt, n)
    if dt.extent <= 0:
        origin = -min(_span(dt, n)[0], 0)
    payload = _src(n * dt.size)[::-1].copy()
    ref = np.full(size, SENTINEL, np.uint8)
    mine = ref.copy()
    at_ref, at_mine = _at(ref, origin, dt, n), _at(mine, origin, dt, n)
    try:
        _mpi_writes(payload, [MPI.BOTTOM, 1, at_ref])
        m = mb.simple([MPI.BOTTOM, 1, at_mine], role="recv", what="Recv buf")
        m.data[:] = payload
        m.unpack()
        assert mine.tobytes() == ref.tobytes()
    finally:
        at_ref.Free()
        at_mine.Free()


def test_bottom_vector_against_alltoallv():
    dt = TYPES["vector"]
    buf = _src(512)
    one = _at(buf, 8, dt)  # displacements count extents from address 0 (MPI_BOTTOM)
    try:
        for counts, displs in (([2], [0]), ([1], [2]), ([0], [0])):
            spec = [MPI.BOTTOM, (counts, displs), one]
            v = mb.vector(spec, 1, role="send", what="Alltoallv sendbuf")
            nbytes = counts[0] * dt.size
            ref = np.zeros(nbytes, np.uint8)
            SELF.Alltoallv(spec, [ref, ([nbytes], [0]), MPI.BYTE])
            assert v.pack().tobytes() == ref.tobytes() and v.packed == bool(counts[0])
            back = np.full(512, SENTINEL, np.uint8)
            want = back.copy()
            at_back, at_want = _at(back, 8, dt), _at(want, 8, dt)
            SELF.Alltoallv([ref, ([nbytes], [0]), MPI.BYTE],
                           [MPI.BOTTOM, (counts, displs), at_want])
            r = mb.vector([MPI.BOTTOM, (counts, displs), at_back], 1, role="recv")
            r.data[:] = ref
            r.unpack()
            at_back.Free()
            at_want.Free()
            assert back.tobytes() == want.tobytes()
    finally:
        one.Free()


@pytest.mark.parametrize("shift", range(4))
def test_bottom_wvector_against_alltoallw(shift):
    """mpi4py's testAlltoallwBottom on one rank, one datatype kind per run."""
    name = ["struct", "vector", "subarray_f", "resized_gap"][shift]
    dt, n = TYPES[name], 2
    size, _, origin = _layout(dt, n)
    sbuf, rref = _src(size), np.full(size, SENTINEL, np.uint8)
    rmine = rref.copy()
    types = [_at(b, origin, dt, n) for b in (sbuf, rref, rmine)]
    try:
        sspec = [MPI.BOTTOM, ([1], [0]), [types[0]]]
        SELF.Alltoallw(sspec, [MPI.BOTTOM, ([1], [0]), [types[1]]])
        ws = mb.wvector(sspec, 1, role="send", what="Alltoallw sendbuf")
        wr = mb.wvector([MPI.BOTTOM, [1], [0], [types[2]]], 1, role="recv")
        assert ws.packed and wr.packed and ws.byte_counts.tolist() == [n * dt.size]
        wr.data[:] = ws.pack()
        wr.unpack()
        assert rmine.tobytes() == rref.tobytes()
        assert ws.block_typesig(0) == wr.block_typesig(0)
    finally:
        for t in types:
            t.Free()


def test_bottom_wvector_displacements_as_addresses():
    """At MPI.BOTTOM the byte displacements may carry the address (relative datatypes)."""
    dt = TYPES["hindexed"]
    buf = _src(128)
    w = mb.wvector([MPI.BOTTOM, [2], [MPI.Get_address(buf) + 16], [dt]], 1, role="send")
    assert w.pack().tobytes() == _mpi_reads([buf[16:], 2, dt], 2 * dt.size).tobytes()


@pytest.mark.parametrize("call,message", [
    (lambda: mb.simple([MPI.BOTTOM, 2, MPI.INT]), "count 2 at MPI.BOTTOM starts at address 0x0"),
    (lambda: mb.vector([MPI.BOTTOM, ([0, 1], [0, 4]), MPI.INT], 2, role="send"),
     "rank 1's block .* at MPI.BOTTOM starts at address 0x10"),
    (lambda: mb.vector([None, [1], MPI.INT], 1, role="send"), "None but the counts"),
    (lambda: mb.wvector([MPI.BOTTOM, [MPI.INT]], 1, role="send"), "requires counts and displs"),
    (lambda: mb.wvector([None, ([1], [0]), [MPI.INT]], 1, role="send"), "None but the counts"),
    (lambda: mb.wvector([MPI.BOTTOM, ([1], [64]), [MPI.INT]], 1, role="send"),
     "address 0x40, not an absolute address"),
])
def test_bottom_errors(call, message):
    with pytest.raises(InputError, match=message):
        call()


def test_bottom_with_nothing_to_move():
    for m in (mb.simple([MPI.BOTTOM, 0, MPI.INT]), mb.simple([MPI.BOTTOM, MPI.INT]),
              mb.vector([MPI.BOTTOM, ([0, 0], [0, 0]), MPI.INT], 2, role="recv"),
              mb.wvector([MPI.BOTTOM, ([0], [0]), [MPI.INT]], 1, role="recv")):
        assert m.data.size == 0 and not m.packed
        m.pack()
        m.unpack()
    with pytest.raises(ValueError, match="BOTTOM requires counts"):  # mpi4py refuses it too
        SELF.Alltoallw([MPI.BOTTOM, [MPI.INT]], [MPI.BOTTOM, [MPI.INT]])


# ---------------------------------------------------------------------------------------------
# DLPack producers, consumed as mpi4py 4.1.2 does (asdlpack.pxi): numpy (DLPack 1.x) and the
# ctypes producer of tests/dlpack_producer.py (0.x, which refuses 1.x keywords, and 1.x).
# The reference is mpi4py's own consumer reading a fresh export of the same producer.


def _producers(arr):
    """``{kind: producer}`` of one array: numpy 1.x, and the ctypes producer 0.x and 1.x."""
    return {"numpy": DLPackOnly(arr), "v0": Producer(arr, 0), "v1": Producer(arr, 1)}


DLPACK_ARRAYS = {
    "int32": lambda: np.arange(6, dtype=np.int32),
    "float64_2d_c": lambda: np.arange(12.0).reshape(3, 4),
    "int16_2d_fortran": lambda: np.asfortranarray(np.arange(12, dtype=np.int16).reshape(3, 4)),
    "float64_0d": lambda: np.array(2.5),
    "int32_empty": lambda: np.zeros((0, 3), np.int32),
    "complex128": lambda: np.arange(3, dtype=np.complex128) * (1 + 2j),
    "float16": lambda: np.arange(4, dtype=np.float16),
    "bool": lambda: np.array([True, False, True]),
    "uint8": lambda: np.arange(5, dtype=np.uint8),
    "int64_column": lambda: np.arange(5, dtype=np.int64).reshape(5, 1),
}


def _settled():
    gc.collect()
    return live_exports()


@pytest.mark.parametrize("kind", ["numpy", "v0", "v1"])
@pytest.mark.parametrize("name", sorted(DLPACK_ARRAYS))
def test_dlpack_buffers(name, kind):
    """Bytes, count and datatype as mpi4py reads them; a receive view writes the producer's
    memory; every export's deleter runs once, after the last view is gone."""
    arr = DLPACK_ARRAYS[name]()
    live = _settled()
    prod = _producers(arr)[kind]
    m = mb.simple(prod, role="recv", what="Recv buf")
    assert m.datatype == mb.simple(arr, role="send").datatype  # same format, same type
    assert m.count == arr.size and m.nbytes == arr.nbytes and not m.packed
    ref = _mpi_reads(prod, arr.nbytes)  # mpi4py's own DLPack consumer, another export
    assert m.data.tobytes() == ref.tobytes() == arr.tobytes(order="A")
    if arr.size:
        m.data[:] ^= 0xFF  # the view is the producer's memory
        assert arr.tobytes(order="A") == (ref ^ 0xFF).tobytes()
    if kind != "numpy":  # ours alive (an empty one released at once), mpi4py's done
        assert [DELETED[e] for e in prod.exports] == [0 if arr.size else 1, 1]
    del m
    assert _settled() == live
    if kind != "numpy":
        assert [DELETED[e] for e in prod.exports] == [1, 1]
    m = mb.simple([prod, MPI.BYTE], role="send")  # an explicit datatype: counts bytes
    assert m.count == arr.nbytes and m.datatype == MPI.BYTE


def test_dlpack_formats_pick_mpi4py_datatypes():
    from dualmpi.dlpack import dlpack_format

    assert [dlpack_format(0, b, 1) for b in (8, 16, 32, 64)] == ["b", "h", "i", "l"]
    assert [dlpack_format(1, b, 1) for b in (8, 16, 32, 64)] == ["B", "H", "I", "L"]
    assert [dlpack_format(2, b, 1) for b in (16, 32, 64)] == ["e", "f", "d"]
    assert [dlpack_format(5, b, 1) for b in (64, 128)] == ["Zf", "Zd"]
    assert dlpack_format(6, 8, 1) == "?" and dlpack_format(2, 32, 2) == "Zf"
    assert dlpack_format(4, 16, 1) == "B" and dlpack_format(0, 32, 4) == "B"  # bfloat16, SIMD
    assert mb.simple(Producer(np.zeros(2, np.complex64))).datatype == MPI.C_FLOAT_COMPLEX
    assert mb.simple(Producer(np.zeros(2, np.uint8))).datatype == MPI.BYTE


def _refused():
    """Layouts mpi4py refuses: ``(array, forged shape, forged strides)``."""
    a = np.arange(12, dtype=np.int32)
    return {
        "every_other": (a[::2], None, None),
        "2d_inner_gap": (a.reshape(3, 4)[:, ::2], None, None),
        "2d_transposed_gap": (a.reshape(3, 4)[:, :2].T, None, None),
        "negative_stride": (a[::-1], None, None),
        "negative_shape": (a, [-2], None),
        "forged_gap": (a, [2, 3], [6, 1]),
    }


REFUSED = [(case, kind) for case, (_, shape, _) in sorted(_refused().items())
           for kind in ("numpy", "v0", "v1") if kind != "numpy" or shape is None]


@pytest.mark.parametrize("case,kind", REFUSED)
def test_dlpack_refused_where_mpi4py_refuses(case, kind):
    """Not contiguous, negative strides or shapes: refused, the export left to the capsule's
    destructor (not consumed), which frees it."""
    arr, shape, strides = _refused()[case]
    live = _settled()
    prod = DLPackOnly(arr) if kind == "numpy" else \
        Producer(arr, int(kind[1]), shape=shape, strides=strides)
    with pytest.raises(InputError, match="Send buf: .*(not contiguous|negative)"):
        mb.simple(prod, role="send", what="Send buf")
    assert _settled() == live
    if kind == "numpy":  # mpi4py refuses it too (on ours, its capsule dies mid-exception)
        assert _mpi4py_raises(prod)
    else:
        assert [DELETED[e] for e in prod.exports] == [1]


def test_dlpack_single_rows_and_columns_are_contiguous():
    """A dimension of length 1 has any stride (mpi4py's dlpack_is_contig)."""
    a = np.arange(6, dtype=np.int32)
    for prod in (Producer(a, 1, shape=[1, 6], strides=[99, 1]),
                 Producer(a, 0, shape=[6, 1], strides=[1, 42])):
        m = mb.simple(prod, role="send")
        assert m.data.tobytes() == a.tobytes() == _mpi_reads(prod, a.nbytes).tobytes()


@pytest.mark.parametrize("kind", ["numpy", "v1"])
def test_dlpack_read_only_export_cannot_receive(kind):
    arr = np.arange(4.0)
    arr.flags.writeable = False
    prod = _producers(arr)[kind]
    live = _settled()
    with pytest.raises(InputError, match="Recv buf: the DLPack buffer is read-only"):
        mb.simple(prod, role="recv", what="Recv buf")
    if kind == "numpy":  # mpi4py refuses it too (on ours, its capsule dies mid-exception)
        with pytest.raises(BufferError):
            SELF.Sendrecv(bytearray(32), 0, 14, prod, 0, 14)
    m = mb.simple(prod, role="send")
    assert not m.data.flags.writeable and m.data.tobytes() == arr.tobytes()
    del m
    assert _settled() == live


def test_dlpack_deleter_waits_for_the_last_view():
    a = np.arange(8, dtype=np.int64)
    prod = Producer(a, 0)
    m = mb.simple([prod, (3, 1), MPI.LONG], role="recv")
    part = m.data[2:5]
    del m
    gc.collect()
    assert DELETED[prod.exports[0]] == 0  # a slice of the view keeps the export
    part[:] = 7
    assert a.view(np.uint8)[8:16].tolist() == [1, 0, 7, 7, 7, 0, 0, 0]
    del part
    gc.collect()
    assert DELETED[prod.exports[0]] == 1


def test_dlpack_numpy_export_releases_the_array():
    """numpy's deleter drops its reference to the array: once, not twice, not never."""
    a = np.arange(16, dtype=np.float32)
    prod = DLPackOnly(a)
    before = sys.getrefcount(a)
    m = mb.simple(prod, role="recv")
    assert sys.getrefcount(a) == before + 1
    del m
    gc.collect()
    assert sys.getrefcount(a) == before


def test_dlpack_device_memory_is_refused():
    a = np.arange(4, dtype=np.int32)
    live = _settled()
    with pytest.raises(InputError, match="device memory .*type 2.* host memory"):
        mb.simple(Producer(a, 1, device=2), role="send", what="Send buf")
    pinned = Producer(a, 0, device=3)  # kDLCUDAHost: host memory, read with stream=-1
    assert mb.simple(pinned, role="send").data.tobytes() == a.tobytes()
    assert _settled() == live


CYCLES = textwrap.dedent("""
    import gc, sys
    import numpy as np
    sys.path.insert(0, {tests!r})
    from dlpack_producer import DELETED, Producer, live_exports
    from dualmpi import msgbuffer as mb

    class DLPackOnly:
        def __init__(self, a):
            self.a = a
        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)
        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    def rss():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))

    def cycle(i, kind):
        a = np.full(8192, i, np.float64)  # 64 KiB a cycle
        prod = DLPackOnly(a) if kind == "numpy" else Producer(a, int(kind[1]), ballast=65536)
        refs = sys.getrefcount(a)
        m = mb.simple(prod, role="recv")
        m.data.view(np.float64)[:] += 1
        assert a[0] == i + 1 and a[-1] == i + 1
        del m
        gc.collect()
        assert sys.getrefcount(a) == refs  # numpy's deleter ran once: its reference is gone

    for kind in ("numpy", "v0", "v1"):
        for i in range(100):
            cycle(i, kind)
        gc.collect()
        start = rss()
        for i in range(1000):
            cycle(i, kind)
        gc.collect()
        wrong = sum(n != 1 for n in DELETED.values())
        print(kind, rss() - start, live_exports(), wrong, len(DELETED))
""")


def test_dlpack_thousand_cycles_neither_leak_nor_crash():
    """1000 exports consumed and released per producer in a fresh process: no crash, RSS
    grows less than 8 MiB (a deleter never called would keep 64 MiB), each deleter once."""
    code = CYCLES.format(tests=str(Path(__file__).parent))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line.split() for line in out.stdout.splitlines()]
    assert [r[0] for r in rows] == ["numpy", "v0", "v1"], out.stdout
    for kind, growth, alive, wrong, exports in rows:
        assert int(growth) < 8192, (kind, growth)  # KiB
        assert (alive, wrong) == ("0", "0"), (kind, alive, wrong)  # each deleter ran once
    assert int(rows[-1][-1]) == 2 * 1100  # the ctypes producer's exports, all counted


def test_in_place():
    assert mb.in_place(None) and mb.in_place(MPI.IN_PLACE)
    assert not mb.in_place(MPI.BOTTOM) and not mb.in_place(np.zeros(1))


def test_import_does_not_import_mpi4py():
    code = ("import sys, dualmpi.msgbuffer as m; "
            "assert 'mpi4py.MPI' not in sys.modules and m.in_place(None); "
            "assert 'mpi4py.MPI' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_doctests():
    import doctest

    import dualmpi.dlpack

    assert doctest.testmod(mb).failed == 0
    assert doctest.testmod(dualmpi.dlpack).failed == 0


def test_vector_counts_remembered_by_value():
    """A repeated vector argument reuses its checked counts only when they are the same values."""
    buf = np.arange(6.0)
    counts, displs = [1, 2], [4, 0]
    first = mb.vector([buf, counts, displs, MPI.DOUBLE], 2, role="send")
    again = mb.vector([buf, counts, displs, MPI.DOUBLE], 2, role="send")
    assert again.counts is first.counts and not again.counts.flags.writeable
    counts[1] = 1  # the same list object, changed: read again
    changed = mb.vector([buf, counts, displs, MPI.DOUBLE], 2, role="send")
    assert changed.counts.tolist() == [1, 1] and changed.byte_counts.tolist() == [8, 8]
    with pytest.raises(InputError, match="not an integer"):
        mb.vector([buf, [1.0, 1.0], displs, MPI.DOUBLE], 2, role="send")
    counts[0] = 3  # now outside the buffer: refused, not remembered from before
    with pytest.raises(InputError, match="needs bytes"):
        mb.vector([buf, counts, displs, MPI.DOUBLE], 2, role="send")
    with pytest.raises(InputError, match="needs bytes"):
        mb.vector([np.arange(4.0), [1, 2], [4, 0], MPI.DOUBLE], 2, role="send")


@pytest.mark.parametrize("name", ["INT", "vector", "hvector_negative", "hindexed_negative",
                                  "resized_gap"])
@pytest.mark.parametrize("blocks", [3, 40])
def test_block_spans_checked_in_python_and_numpy_alike(name, blocks, monkeypatch):
    """A vector argument's blocks are checked in Python up to ``_SPANS_IN_PYTHON`` blocks and
    with numpy above: both give the same origins and refuse the same block with the same line
    (random counts and displacements, some blocks out of the buffer)."""
    dt = _types()[name]
    info = mb._typeinfo(dt, "buf", MPI)
    rng = np.random.default_rng(blocks)
    for trial in range(30):
        counts = rng.integers(0, 4, blocks).astype(np.int64)
        displs = rng.integers(-2, 12, blocks).astype(np.int64)
        buflen = int(rng.integers(0, 200))
        out = {}
        for small in (0, 1 << 20):  # every check in numpy, then in Python
            monkeypatch.setattr(mb, "_SPANS_IN_PYTHON", small)
            try:
                got = mb._check_spans(displs, counts, info, buflen, "buf")
                out[small] = ("ok", got.tolist(), got.dtype)
            except InputError as exc:
                out[small] = ("refused", str(exc))
        assert out[0] == out[1 << 20], (trial, out)
