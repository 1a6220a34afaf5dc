"""Shared cases of the per-collective MPI tests (``tests/mpi/test_coll_*_mpi.py``).

The networks each rank count plays (one node per rank up to 16 nodes per rank), the
communicators built on them (cached per test module, freed at its end by
:func:`free_networks`), rank-distinct data, the receive-buffer sentinel, the verdicts
(byte-for-byte for integers, to rounding for floats) and the error-case helpers.  Every
helper that communicates is called by every rank; the ranks agree on a verdict with
:func:`agree` (an allreduce of a flag) before asserting.
"""

import numpy as np
import pytest

import dualmpi
from dualmpi.errors import DualmpiError

MPI = pytest.importorskip("mpi4py.MPI")

__all__ = ["MPI", "WORLD", "SIZE", "RANK", "BIG", "NETWORKS", "DTYPES", "COUNTS", "NETS",
           "ROOTS", "network", "fresh", "free_networks", "agree", "data", "operands", "sentinel",
           "same", "close", "v_counts", "v_displs", "error_of", "errors_everywhere",
           "same_error_everywhere", "one_bad_rank", "still_works", "expect_error", "ERROR_NETS",
           "mpi_type", "sample", "rotation", "EVERY", "OPS", "COMBOS", "valid",
           "freed", "gcd_op", "check_bad_call", "blocks_of"]

WORLD = MPI.COMM_WORLD
SIZE = WORLD.Get_size()
RANK = WORLD.Get_rank()
#: From 32 ranks on (16 oversubscribed ranks a core) the default pass samples the sweeps;
#: the rest is marked slow.
BIG = SIZE >= 32

#: The networks each rank count plays: ``(spec, nodes per rank)``; together the mappings
#: 1, 2, 4, 8 and 16 nodes per rank.
NETWORKS = {
    1: [("hypercube:n=0", 1), ("dualcube:r=1", 2)],
    2: [("dualcube:r=1", 1), ("hypercube:n=1", 1), ("dualcube:r=2", 4)],
    4: [("metacube:k=2,m=1", 16), ("hypercube:n=3", 2)],
    8: [("dualcube:r=2", 1), ("hypercube:n=3", 1), ("dualcube:r=3", 4),
        ("metacube:k=2,m=1", 8)],
    32: [("dualcube:r=3", 1), ("hypercube:n=5", 1)],
    64: [("metacube:k=2,m=1", 1)],
}
#: Element types of the sweeps, by id.
DTYPES = {np.dtype(t).name: np.dtype(t) for t in (np.int8, np.int32, np.int64, np.float32,
                                                  np.float64, np.complex128)}
#: Elements per piece: none, one, odd, and a few KiB.
COUNTS = (0, 1, 7, 515)
#: Every ``(dtype id, dtype, count)`` (the largest count for the smallest and the largest
#: dtype only): the sweep run at one root per network.
EVERY = [(name, dtype, n) for name, dtype in DTYPES.items() for n in COUNTS
         if n != COUNTS[-1] or name in ("int8", "complex128")]

#: MPI's predefined operations on numbers, by name.
OPS = {name: getattr(MPI, name) for name in ("SUM", "PROD", "MIN", "MAX", "BAND", "BOR",
                                             "BXOR", "LAND", "LOR", "LXOR")}


def valid(opname, dtype):
    """True when MPI defines ``opname`` on ``dtype`` (bitwise and logical: integers; MIN and
    MAX: not complex)."""
    kind = np.dtype(dtype).kind
    if opname in ("BAND", "BOR", "BXOR", "LAND", "LOR", "LXOR"):
        return kind in "iu"
    if opname in ("MIN", "MAX"):
        return kind != "c"
    return True


#: Every valid ``(op, dtype id, dtype)``.
COMBOS = [(op, name, dtype) for op in OPS for name, dtype in DTYPES.items() if valid(op, dtype)]


def rotation(seed):
    """Return ``(dtype id, dtype, count)`` for every count, the dtypes rotated by ``seed``.

    Each root (``seed``) sees every count, and the roots between them every dtype, in
    a few calls (:data:`EVERY` is the full product).
    """
    names = list(DTYPES)
    return [(names[(seed + i) % len(names)], DTYPES[names[(seed + i) % len(names)]], n)
            for i, n in enumerate(COUNTS)]


def sample(values, keep, ids=None):
    """Return ``values`` as pytest params, those not in ``keep`` marked slow from 32 ranks on."""
    return [pytest.param(v, id=None if ids is None else ids(v),
                         marks=pytest.mark.slow if BIG and v not in keep else ())
            for v in values]


#: The networks of this rank count, as indices into ``NETWORKS[SIZE]`` (from 32 ranks on
#: the default pass takes the first).
NETS = sample(range(len(NETWORKS.get(SIZE, []))), keep=[0],
              ids=lambda i: "{}~q{}".format(*NETWORKS[SIZE][i]))
#: The networks the error cases run on: the first and the last (several nodes per rank).
ERROR_NETS = [p for p in NETS if p.values[0] in (0, len(NETS) - 1)]
#: Every root; from 32 ranks on the default pass takes four.
ROOTS = sample(range(SIZE), keep=sorted({0, 1, SIZE // 2 + 1, SIZE - 1}),
               ids=lambda r: f"root{r}")

_CACHE = {}


def network(index):
    """Return the (cached) ``dualmpi.Comm`` of ``NETWORKS[SIZE][index]`` on COMM_WORLD."""
    spec, q = NETWORKS[SIZE][index]
    if spec not in _CACHE:
        _CACHE[spec] = dualmpi.Comm(WORLD, spec, nodes_per_rank=q, watchdog=60)
    return _CACHE[spec]


def fresh(index):
    """Return a new ``dualmpi.Comm`` of ``NETWORKS[SIZE][index]`` (the caller frees it).

    For calls that must be a communicator's first of their method: a v-variant agrees on
    its count exchange once per method, and a rank that has done so skips that check
    (a known limitation, like repeated signatures), so ranks that diverge between
    methods must not have called either before.
    """
    spec, q = NETWORKS[SIZE][index]
    return dualmpi.Comm(WORLD, spec, nodes_per_rank=q, watchdog=60)


@pytest.fixture(scope="module", autouse=True)
def free_networks():
    """Free the module's communicators at its end (same order on every rank)."""
    yield
    for spec in sorted(_CACHE):
        _CACHE.pop(spec).Free()


def agree(ok):
    """Return True when ``ok`` holds on every rank (collective)."""
    return bool(WORLD.allreduce(1 if ok else 0, op=MPI.MIN))


def data(dtype, n, *seed):
    """Return ``n`` reproducible, rank-distinct values of ``dtype`` (integers: full range)."""
    rng = np.random.default_rng([RANK, n, *seed])
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=n, endpoint=True, dtype=dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)
    return rng.standard_normal(n).astype(dtype)


def operands(dtype, n, opname, *seed):
    """Return rank-distinct operands of reduction ``opname`` whose integer results do not overflow.

    Open MPI saturates 8- and 16-bit sums where C wraps (open-mpi/ompi#8045), so integer
    sums stay within range; products are of +-1 (floats: near 1).
    """
    rng = np.random.default_rng([RANK, n, 7, *seed])
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        if opname in ("BAND", "BOR", "BXOR", "MIN", "MAX", "MINLOC", "MAXLOC"):
            return data(dtype, n, 7, *seed)
        if opname == "PROD":
            return rng.choice(np.array([1, -1], dtype), size=n)
        if opname in ("LAND", "LOR", "LXOR"):
            return rng.integers(0, 3, size=n).astype(dtype)
        bound = max(1, int(np.iinfo(dtype).max) // (2 * SIZE) if dtype.itemsize < 4 else 1000)
        return rng.integers(-bound, bound, size=n, endpoint=True).astype(dtype)
    if opname == "PROD":
        out = rng.uniform(0.9, 1.1, n)
        if dtype.kind == "c":
            return (out * np.exp(1j * rng.uniform(-0.5, 0.5, n))).astype(dtype)
        return out.astype(dtype)
    return data(dtype, n, 7, *seed)


def sentinel(dtype, n):
    """Return ``n`` elements whose bytes are all 0xA5 (a receive buffer's old contents)."""
    return np.full(n * np.dtype(dtype).itemsize, 0xA5, dtype=np.uint8).view(dtype)


def same(a, b):
    """Byte-for-byte equality of two arrays (NaN-safe; dtype and shape included)."""
    a, b = np.asarray(a), np.asarray(b)
    return (a.dtype == b.dtype and a.shape == b.shape
            and a.reshape(-1).view(np.uint8).tobytes() == b.reshape(-1).view(np.uint8).tobytes())


def close(a, b, opname="SUM"):
    """Equality of reduction results: exact for integers and MIN/MAX, else to rounding."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind not in "fc" or opname in ("MIN", "MAX"):
        return same(a, b)
    eps = np.finfo(a.dtype).eps
    tol = 8 * SIZE * eps
    return bool(np.allclose(a, b, rtol=tol, atol=4 * tol * np.sqrt(SIZE)))


def bound_then_copied(net, rounds, copy):
    """Run ``rounds()`` as it is, then after ``copy()`` (which turns zero-copy binding off).

    Returns ``(first, links, second, links_copied)``: each run's result and the link counts
    (``net.stats()["links"]``) of its calls alone.
    """
    net.reset_stats()
    first = rounds()
    links = net.stats()["links"]
    copy()
    net.reset_stats()
    second = rounds()
    return first, links, second, net.stats()["links"]


def v_counts(scale, seed, shape=None):
    """Return random element counts (the same on every rank), about a third of them zero."""
    rng = np.random.default_rng([SIZE, scale, seed])
    shape = (SIZE,) if shape is None else shape
    counts = rng.integers(1, scale + 1, size=shape)
    counts[rng.random(shape) < 1 / 3] = 0
    return counts.astype(np.int64)


def v_displs(counts, gap, order):
    """Displacements placing the pieces in rank order ``order``, ``gap`` elements apart.

    Returns ``(displs, length)``: the buffer needs ``length`` elements.
    """
    displs = np.zeros(len(counts), dtype=np.int64)
    at = gap
    for r in order:
        displs[r] = at
        at += int(counts[r]) + gap
    return displs, at


def mpi_type(dtype):
    """Return the predefined ``MPI.Datatype`` of a numpy dtype."""
    from mpi4py.util.dtlib import from_numpy_dtype

    return from_numpy_dtype(np.dtype(dtype))


# -- error cases -----------------------------------------------------------------------------


def error_of(call):
    """Run ``call``; return ``(type name, message)`` of the dualmpi error it raises, or None.

    Any other exception is returned too (its type name tells it apart), so that no rank
    leaves the test while the others wait.
    """
    try:
        call()
    except DualmpiError as exc:
        return type(exc).__name__, str(exc)
    except Exception as exc:  # noqa: BLE001 - reported by the verdict, on every rank
        return "not a dualmpi error: " + type(exc).__name__, str(exc)
    return None


def errors_everywhere(err):
    """Return every rank's error (collective)."""
    return WORLD.allgather(err)


def same_error_everywhere(err, words, kind="InputError", alike=True):
    """True when every rank raised ``kind`` with one message (``alike``) containing ``words``."""
    errs = errors_everywhere(err)
    return (all(e is not None and e[0] == kind and words in e[1] for e in errs)
            and (not alike or len({e[1] for e in errs}) == 1)), errs


def one_bad_rank(err, bad, words, method):
    """True when rank ``bad`` raised InputError with ``words`` and the others name it."""
    errs = errors_everywhere(err)
    ok = all(e is not None and e[0] == "InputError" for e in errs)
    ok = ok and words in errs[bad][1]
    ok = ok and all(f"{method}: arguments rejected on rank {bad}" in e[1]
                    for r, e in enumerate(errs) if r != bad)
    return ok, errs


def still_works(net):
    """True on every rank when ``net`` still runs a correct collective (after an error)."""
    send = data(np.int32, 2 * SIZE, 99)
    mine, ref = sentinel(np.int32, 2 * SIZE), sentinel(np.int32, 2 * SIZE)
    net.Alltoall(send, mine)
    WORLD.Alltoall(send, ref)
    return agree(same(mine, ref))


def expect_error(net, call, words, *, bad=None, method=None, kind="InputError", alike=True):
    """Run ``call`` on every rank; return ``(ok, errors)``, ``ok`` the same on every rank.

    ``ok``: every rank raised ``kind`` with one message (or, ``alike`` False, each its
    own) containing ``words`` (``bad`` None), or rank ``bad`` raised InputError with
    ``words`` and every other rank ``"<method>: arguments rejected on rank <bad>"``; and
    ``net`` still works afterwards.
    """
    err = error_of(call)
    if bad is None or SIZE == 1:
        ok, errs = same_error_everywhere(err, words, kind, alike)
    else:
        ok, errs = one_bad_rank(err, bad, words, method)
    works = still_works(net)
    return ok and works, errs


def blocks_of(dtype):
    """Return the blocks ``[(displacement, length)]`` of a hindexed datatype (a message's
    segments: ``Get_contents`` gives the count and the block lengths as integers, the
    displacements as addresses)."""
    ints, addrs = dtype.Get_contents()[:2]
    return list(zip(addrs, ints[1:]))


def freed(handle, call):
    """Return ``call(handle)``, freeing ``handle`` (a datatype or op made for one call) after."""
    try:
        return call(handle)
    finally:
        handle.Free()


def _gcd(inbuf, inoutbuf, datatype):
    b = np.frombuffer(inoutbuf, np.int64)
    np.gcd(np.frombuffer(inbuf, np.int64), b, out=b)


def gcd_op():
    """Return MPI's own user op computing ``numpy.gcd`` on int64 (the caller frees it)."""
    return MPI.Op.Create(_gcd, commute=True)


def check_bad_call(index, case, cases, method):
    """The bad-call test of a module: run ``cases[case]`` and assert the expected error.

    ``cases``: name -> ``(call(net), words, bad)`` with ``bad`` the rank whose own
    message holds ``words`` (the others: "<method>: arguments rejected on rank <bad>"),
    None (every rank the same message) or "any" (every rank its own, holding ``words``).
    A case named "...disagree..." needs two ranks; "...collective-disagrees" runs on a
    new communicator (see :func:`fresh`).
    """
    if SIZE == 1 and "disagree" in case:
        pytest.skip("needs two ranks")
    call, words, bad = cases[case]
    new = case.endswith("collective-disagrees")
    net = fresh(index) if new else network(index)
    try:
        ok, errs = expect_error(net, lambda: call(net), words,
                                bad=None if bad == "any" else bad, method=method,
                                alike=bad != "any")
    finally:
        if new:
            net.Free()
    assert ok, errs
