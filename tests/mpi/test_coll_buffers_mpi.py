"""``dualmpi.Comm``'s buffer and datatype matrix: every form mpi4py accepts, against COMM_WORLD.

Each way of passing a buffer (a :class:`Kit`: a buffer object of some kind, a message list
with counts, displacements and datatypes, or a derived datatype) runs through Bcast,
Scatter, Gatherv, Allgather, Alltoall, Alltoallv, Alltoallw and Allreduce on two buffers of
the same contents, one for ``dualmpi.Comm`` and one for ``MPI.COMM_WORLD``.  Receive
buffers start as a sentinel, so the gaps a datatype or a displacement leaves must stay
untouched; the results are compared byte for byte.  ``None`` and ``MPI.IN_PLACE`` run
wherever mpi4py accepts them.  Run at 2 and 8 ranks (``min_size=2``: Open MPI's one-rank
Alltoallw misplaces blocks, see test_coll_alltoall_mpi.py); every rank finishes its
communication, then the ranks agree on the verdict.
"""

import array
import mmap

import numpy as np
import pytest

from collective_cases import (BIG, ERROR_NETS, MPI, RANK, SIZE, WORLD, agree, error_of, network,
                              v_counts, v_displs)
from collective_cases import free_networks  # noqa: F401 - frees the module's communicators

#: The matrix runs at 2 to 8 ranks; from 32 ranks on it is in the slow pass only.
pytestmark = [pytest.mark.mpi(min_size=2)] + ([pytest.mark.slow] if BIG else [])

LAST = SIZE - 1
SENTINEL = 0xA5
#: Items per rank of the fixed-count collectives.
K = 3


class DLPackOnly:
    """A buffer reachable only through DLPack (``__dlpack__``, ``__dlpack_device__``)."""

    def __init__(self, array_):
        self.array = array_

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def values(dtype, n, seed):
    """Return ``n`` rank-distinct small integers as ``dtype``: every sum over the ranks is exact."""
    dtype = np.dtype(dtype)
    bound = {1: 127, 2: 16000}.get(dtype.itemsize, 1 << 20) // (2 * SIZE)
    rng = np.random.default_rng([RANK, n, seed])
    return rng.integers(-bound, bound, size=n, endpoint=True).astype(dtype)


def raw(obj):
    """Return the bytes of a buffer object in memory order."""
    if isinstance(obj, DLPackOnly):
        obj = obj.array
    if isinstance(obj, np.ndarray):
        return obj.tobytes(order="A")
    return memoryview(obj).tobytes()


class Kit:
    """One way of passing buffers: how to allocate them and how to name them in a call.

    ``alloc(items, seed)`` returns a buffer with room for ``items`` items (``seed`` None:
    every byte the sentinel, else contents); ``spec(buf, count)`` names ``count`` items
    per block; ``vspec``/``wspec`` name per-rank counts at item displacements (Alltoallw:
    the kit turns them into bytes); ``reducible``: Allreduce with MPI.SUM applies.
    """

    reducible = True

    def vspec(self, buf, counts, displs):
        return [buf, (counts, displs)]

    def wspec(self, buf, counts, displs):
        return [buf, (counts, displs * self.item), [self.datatype] * SIZE]


class Form(Kit):
    """A buffer object holding exactly its items, passed bare (its format picks the type)."""

    def __init__(self, dtype, wrap, reducible=True):
        self.dtype, self.wrap, self.reducible = np.dtype(dtype), wrap, reducible
        self.item = self.dtype.itemsize
        from mpi4py.util.dtlib import from_numpy_dtype

        self.datatype = from_numpy_dtype(self.dtype)

    def alloc(self, items, seed):
        if seed is None:
            base = np.full(items * self.item, SENTINEL, np.uint8).view(self.dtype)
        else:
            base = values(self.dtype, items, seed)
        return self.wrap(base.copy())

    def spec(self, buf, count):
        return buf


def _mmap(a):
    m = mmap.mmap(-1, max(a.nbytes, 1))
    m.write(a.tobytes())
    return m if a.nbytes else bytearray()


def _shape2(a):
    return a.reshape(-1, 2) if a.size % 2 == 0 else a.reshape(-1, 1)


#: Buffer objects by id (items: elements of the numpy dtype; every count here is nonzero).
FORMS = {
    "numpy-1d": Form(np.float64, lambda a: a),
    "numpy-2d": Form(np.int32, _shape2),
    "numpy-fortran": Form(np.float32, lambda a: np.asfortranarray(_shape2(a).T)),
    "numpy-3d": Form(np.int16, lambda a: a.reshape(-1, 1, 1)),
    "bytearray": Form(np.uint8, lambda a: bytearray(a.tobytes()), reducible=False),
    "array-h": Form(np.int16, lambda a: array.array("h", a.tobytes())),
    "array-d": Form(np.float64, lambda a: array.array("d", a.tobytes())),
    "memoryview": Form(np.int32, lambda a: memoryview(bytearray(a.tobytes())).cast("i")),
    "mmap": Form(np.uint8, _mmap, reducible=False),
    "dlpack": Form(np.int64, DLPackOnly),
}


class Listed(Kit):
    """A float64 array named by a message list: ``[buf, count]``, ``[buf, datatype]``,
    ``[buf, count, datatype]``, ``[buf, (count, displ), datatype]``, ``[buf, count, displ,
    datatype]``; displacement forms start 2 items in, every buffer has 3 spare items."""

    item, dtype = 8, np.dtype(np.float64)

    def __init__(self, form):
        self.form = form
        self.datatype = MPI.DOUBLE
        self.pad = 2 if "displ" in form or form == "four-items" else 0
        self.spare = 0 if form == "datatype" else 3

    def alloc(self, items, seed):
        n = self.pad + items + self.spare
        if seed is None:
            return np.full(n * 8, SENTINEL, np.uint8).view(np.float64)
        return values(np.float64, n, seed)

    def spec(self, buf, count):
        dt = self.datatype
        return {"count": lambda: [buf, count], "datatype": lambda: [buf, dt],
                "count-datatype": lambda: [buf, count, dt],
                "count-displ-datatype": lambda: [buf, (count, self.pad), dt],
                "four-items": lambda: [buf, count, self.pad, dt]}[self.form]()

    def vspec(self, buf, counts, displs):
        displs = displs + self.pad
        if self.form == "four-items":
            return [buf, counts, displs, self.datatype]
        if self.form in ("count", "datatype"):
            return [buf, (counts, displs)]
        return [buf, (counts, displs), self.datatype]

    def wspec(self, buf, counts, displs):
        return [buf, (counts, (displs + self.pad) * 8), [self.datatype] * SIZE]


LISTED = {form: Listed(form) for form in ("count", "datatype", "count-datatype",
                                          "count-displ-datatype", "four-items")}


def _derived():
    """Committed derived datatypes, one of each kind, over INT or DOUBLE (or both: struct)."""
    INT, DOUBLE = MPI.INT, MPI.DOUBLE
    made = {
        "contiguous": (DOUBLE.Create_contiguous(3), np.float64),
        "vector": (INT.Create_vector(3, 2, 4), np.int32),
        "hvector": (DOUBLE.Create_hvector(2, 1, 24), np.float64),
        "indexed": (INT.Create_indexed([2, 1, 3], [0, 5, 8]), np.int32),
        "hindexed": (DOUBLE.Create_hindexed([1, 2], [40, 0]), np.float64),
        "indexed_block": (INT.Create_indexed_block(2, [6, 0, 3]), np.int32),
        "subarray": (INT.Create_subarray([4, 5], [2, 3], [1, 1]), np.int32),
        "struct": (MPI.Datatype.Create_struct([1, 2], [0, 8], [INT, DOUBLE]), None),
        "resized": (INT.Create_vector(2, 1, 3).Create_resized(-8, 20), np.int32),
    }
    return {name: (t.Commit(), base) for name, (t, base) in made.items()}


class Derived(Kit):
    """Items of a derived datatype: ``[buf, count, T]``, ``[buf, (counts, displs), T]``.

    Not reduced: Open MPI 5.0 refuses MPI.SUM on derived datatypes (MPI_ERR_OP), so there
    is no reference to compare with.
    """

    reducible = False

    def __init__(self, datatype, base):
        self.datatype, self.base = datatype, base
        _, self.item = datatype.Get_extent()
        self.true_lb, self.true_extent = datatype.Get_true_extent()

    def alloc(self, items, seed):
        nbytes = max(self.item, 1) * items + max(self.true_lb + self.true_extent, 0) + 16
        base = np.dtype(self.base or np.uint8)
        n = -(-nbytes // base.itemsize)
        if seed is None:
            return np.full(n * base.itemsize, SENTINEL, np.uint8).view(base)
        return values(base, n, seed)

    def spec(self, buf, count):
        return [buf, count, self.datatype]

    def vspec(self, buf, counts, displs):
        return [buf, (counts, displs), self.datatype]


DERIVED = {name: Derived(t, base) for name, (t, base) in _derived().items()}
KITS = {**{f"form-{k}": v for k, v in FORMS.items()},
        **{f"list-{k}": v for k, v in LISTED.items()},
        **{f"type-{k}": v for k, v in DERIVED.items()}}


# -- one runner per collective: (kit, in_place) -> None when equal to MPI's, else a problem ---


def _run(kit, call, bufs, in_place=False):
    """Call ``call(comm, *specs)`` on dualmpi and on WORLD with twin buffers; compare the
    receive buffers (``bufs``: name -> (items, seed, receives), the specs built by
    ``call`` from ``bufs``' buffers)."""
    mine = {k: kit.alloc(n, seed) if n is not None else None for k, (n, seed, _) in bufs.items()}
    ref = {k: kit.alloc(n, seed) if n is not None else None for k, (n, seed, _) in bufs.items()}
    before = {k: raw(b) for k, b in mine.items() if b is not None and not bufs[k][2]}
    err = error_of(lambda: call(NET[0], mine))
    call(WORLD, ref)
    if err is not None:
        return err
    for k, (_, _, receives) in bufs.items():
        if mine[k] is None:
            continue
        if receives and raw(mine[k]) != raw(ref[k]):
            return f"{k} differs"
        if not receives and raw(mine[k]) != before[k]:
            return f"{k} was written"
    return None


#: The communicator under test (set by each test).
NET = [None]


def bcast(kit, in_place):
    root = LAST
    return _run(kit, lambda c, b: c.Bcast(kit.spec(b["buf"], K), root),
                {"buf": (K, 1 if RANK == root else None, RANK != root)})


def scatter(kit, in_place):
    root = 0
    is_root = RANK == root

    def call(c, b):
        recv = in_place if in_place is not False and is_root else kit.spec(b["recv"], K)
        c.Scatter(kit.spec(b["send"], K) if is_root else None, recv, root)

    return _run(kit, call, {"send": (SIZE * K if is_root else None, 2, False),
                            "recv": (K, None, True)})


def allgather(kit, in_place):
    def call(c, b):
        c.Allgather(in_place if in_place is not False else kit.spec(b["send"], K),
                    kit.spec(b["recv"], K))

    return _run(kit, call, {"send": (K, 3, False),
                            "recv": (SIZE * K, 4 if in_place is not False else None, True)})


def alltoall(kit, in_place):
    def call(c, b):
        c.Alltoall(in_place if in_place is not False else kit.spec(b["send"], K),
                   kit.spec(b["recv"], K))

    return _run(kit, call, {"send": (SIZE * K, 5, False),
                            "recv": (SIZE * K, 6 if in_place is not False else None, True)})


def allreduce(kit, in_place):
    if not kit.reducible:
        return None

    def call(c, b):
        c.Allreduce(in_place if in_place is not False else kit.spec(b["send"], K),
                    kit.spec(b["recv"], K), MPI.SUM)

    return _run(kit, call, {"send": (K, 7, False),
                            "recv": (K, 8 if in_place is not False else None, True)})


def gatherv(kit, in_place):
    root = LAST
    counts = v_counts(4, 1) + (np.arange(SIZE) == LAST)  # zeros included, not all zero
    displs, length = v_displs(counts, 1, range(SIZE - 1, -1, -1))
    is_root = RANK == root

    def call(c, b):
        if in_place is not False and is_root:
            send = in_place
        else:
            send = kit.spec(b["send"], int(counts[RANK]))
        c.Gatherv(send, kit.vspec(b["recv"], counts, displs) if is_root else None, root)

    # in place, the root's own piece is already in its recvbuf
    return _run(kit, call, {"send": (int(counts[RANK]), 9, False),
                            "recv": (length if is_root else None,
                                     10 if in_place is not False else None, True)})


def _matrix(seed):
    m = v_counts(4, seed, (SIZE, SIZE))
    m[0, :] += 1  # not all zero
    return m


def alltoallv(kit, in_place, w=False):
    if in_place is not False:  # the send counts are the receive counts: symmetric
        m = _matrix(2)
        m = np.triu(m) + np.triu(m, 1).T
    else:
        m = _matrix(3)
    sd, slen = v_displs(m[RANK], 1, range(SIZE - 1, -1, -1))
    rd, rlen = v_displs(m[:, RANK], 2, np.roll(np.arange(SIZE), RANK))
    name = "wspec" if w else "vspec"

    def call(c, b):
        send = in_place if in_place is not False else \
            getattr(kit, name)(b["send"], m[RANK], sd)
        (c.Alltoallw if w else c.Alltoallv)(send, getattr(kit, name)(b["recv"], m[:, RANK], rd))

    return _run(kit, call, {"send": (slen, 11, False),
                            "recv": (rlen, 12 if in_place is not False else None, True)})


def alltoallw(kit, in_place):
    return alltoallv(kit, in_place, w=True)


COLLECTIVES = {"Bcast": bcast, "Scatter": scatter, "Gatherv": gatherv,
               "Allgather": allgather, "Alltoall": alltoall, "Alltoallv": alltoallv,
               "Alltoallw": alltoallw, "Allreduce": allreduce}
#: Where mpi4py reads None or MPI.IN_PLACE.
IN_PLACE = ("Scatter", "Gatherv", "Allgather", "Alltoall", "Alltoallv", "Alltoallw",
            "Allreduce")


def _kit_params():
    """(network, kit) pairs: the derived datatypes on both networks (one node per rank and
    several), the buffer objects on the second, the message lists on the first."""
    out = []
    for net in ERROR_NETS:
        i = net.values[0]
        first = i == ERROR_NETS[0].values[0]
        last = i == ERROR_NETS[-1].values[0]
        for kit in KITS:
            if kit.startswith("type-") or (kit.startswith("form-") and last) or \
                    (kit.startswith("list-") and first):
                out.append(pytest.param(i, kit, id=f"{net.id}-{kit}", marks=net.marks))
    return out


@pytest.mark.parametrize("index, kit", _kit_params())
def test_kit_in_every_collective(index, kit):
    """Every collective with this kit's buffers equals MPI's byte for byte (gaps untouched)
    and leaves its send buffers as they were; two of them in place as well, one with
    ``MPI.IN_PLACE`` and one with ``None`` (rotating over the kits)."""
    NET[0] = network(index)
    k = KITS[kit]
    problems = []
    for name, run in COLLECTIVES.items():
        problem = run(k, False)
        if problem is not None:
            problems.append((name, problem))
    i = list(KITS).index(kit)
    for j, in_place in enumerate((MPI.IN_PLACE, None)):
        name = IN_PLACE[(2 * i + j) % len(IN_PLACE)]
        problem = COLLECTIVES[name](k, in_place)
        if problem is not None:
            problems.append((name, "in place", in_place, problem))
    assert agree(not problems), problems


@pytest.mark.parametrize("name", IN_PLACE)
@pytest.mark.parametrize("index", ERROR_NETS)
def test_in_place_everywhere(index, name):
    """Each collective that takes it, with ``MPI.IN_PLACE`` and ``None``, on a plain array
    and on a derived datatype, equals MPI's."""
    NET[0] = network(index)
    problems = []
    for kit in ("form-numpy-1d", "type-vector", "list-four-items"):
        for in_place in (MPI.IN_PLACE, None):
            problem = COLLECTIVES[name](KITS[kit], in_place)
            if problem is not None:
                problems.append((kit, in_place, problem))
    assert agree(not problems), problems


def test_twin_buffers():
    """The kits themselves: twin buffers hold the same bytes, sentinels only 0xA5."""
    ok = all(raw(k.alloc(5, 1)) == raw(k.alloc(5, 1)) and set(raw(k.alloc(5, None))) == {SENTINEL}
             for k in KITS.values())
    assert agree(ok)
