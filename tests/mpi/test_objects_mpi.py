"""MPI tests of :mod:`dualmpi.objects`: the object collectives against mpi4py's own.

Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi/test_objects_mpi.py``
at N = 1, 2, 4 or 8.  Each function runs on every communicator of :data:`COMMUNICATORS`
(the ``comm`` fixture) and its result is compared with ``MPI.COMM_WORLD``'s own lower-case
method on the same objects.  Every test lets every rank finish its communication, then the
ranks agree on the verdict (an allreduce of a flag) before asserting.
"""

import doctest
import functools
import json
import threading

import numpy as np
import pytest

from dualmpi import objects
from dualmpi.errors import InputError

MPI = pytest.importorskip("mpi4py.MPI")

WORLD = MPI.COMM_WORLD
SIZE = WORLD.Get_size()
RANK = WORLD.Get_rank()

#: The roots each rooted collective is called with: every rank, from 32 ranks on four of them
#: (the first, the second, one past the middle, the last), as in ``collective_cases.ROOTS``:
#: every call on a dualmpi.Comm costs 0.1 s at 32 ranks on 2 cores.
ROOTS = range(SIZE) if SIZE < 32 else sorted({0, 1, SIZE // 2 + 1, SIZE - 1})

#: The communicator methods the object collectives may call.
BUFFER_METHODS = ("Bcast", "Gather", "Gatherv", "Scatter", "Scatterv", "Allgather",
                  "Allgatherv", "Alltoall", "Alltoallv", "Barrier", "Get_rank", "Get_size")


class BufferOnly:
    """A communicator's buffer methods (:data:`BUFFER_METHODS`) and nothing else."""

    __slots__ = BUFFER_METHODS

    def __init__(self, comm):
        for name in BUFFER_METHODS:
            setattr(self, name, getattr(comm, name))


def _dualmpi_comm():
    """A ``dualmpi.Comm`` on WORLD playing the first network of this rank count (its nodes
    per rank as in ``collective_cases.NETWORKS``: 16 at 4 ranks, else 1)."""
    import dualmpi
    from collective_cases import NETWORKS

    if SIZE not in NETWORKS:
        pytest.skip(f"no network for {SIZE} ranks in collective_cases.NETWORKS")
    spec, q = NETWORKS[SIZE][0]
    return dualmpi.Comm(WORLD, spec, nodes_per_rank=q, watchdog=60)


#: Factories of the communicators under test, by test id.
COMMUNICATORS = {
    "world": lambda: WORLD,
    "buffer-only": lambda: BufferOnly(WORLD),
    "dualmpi": _dualmpi_comm,
}


@pytest.fixture(scope="module", params=list(COMMUNICATORS))
def comm(request):
    """A communicator made by a factory of :data:`COMMUNICATORS` (freed after the module)."""
    made = COMMUNICATORS[request.param]()
    yield made
    if made is not WORLD and hasattr(made, "Free"):
        made.Free()


def _agree(ok):
    """Return True when ``ok`` holds on every rank (collective)."""
    return bool(WORLD.allreduce(1 if ok else 0, op=MPI.MIN))


def _same(a, b):
    """Equality of two objects, exact types and numpy arrays (dtype, shape, values) included."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


#: Object kinds: a function of a seed (distinct per rank, or per rank pair) to an object.
KINDS = {
    "int": lambda i: 7 * i - 3,
    "str": lambda i: f"seed {i}:" + "x" * i,
    "dict": lambda i: {"seed": i, "items": list(range(i)), "nested": {"t": (i, "a", None)}},
    "array": lambda i: np.arange(i + 3, dtype=np.float64) * 1.5,
    "none": lambda i: None,
    "empty": lambda i: [],
    "mixed": lambda i: [i, "s" * i, None, np.int32(i), {i: [i]}][i % 5],
    "large": lambda i: np.full(140_000, i, dtype=np.float64),  # 1.07 MiB
}


def _params(names):
    """The cases as pytest params; from 16 ranks on (oversubscribed 8 a core and more) the
    megabyte objects are marked slow: an alltoall of them holds gigabytes across the ranks."""
    return [pytest.param(n, marks=pytest.mark.slow if SIZE >= 16 and "large" in n else ())
            for n in names]


@pytest.mark.mpi
@pytest.mark.parametrize("kind", _params(KINDS))
def test_bcast(comm, kind):
    make, ok = KINDS[kind], True
    for root in ROOTS:
        obj = make(root) if RANK == root else "ignored"
        got = objects.bcast(comm, obj, root=root)
        want = WORLD.bcast(obj, root=root)
        ok &= _same(got, want) and _same(got, make(root))
    assert _agree(ok)


@pytest.mark.mpi
@pytest.mark.parametrize("kind", _params(KINDS))
def test_scatter(comm, kind):
    make, ok = KINDS[kind], True
    for root in ROOTS:
        items = [make(root * SIZE + i) for i in range(SIZE)] if RANK == root else "ignored"
        got = objects.scatter(comm, items, root=root)
        want = WORLD.scatter(items, root=root)
        ok &= _same(got, want) and _same(got, make(root * SIZE + RANK))
    assert _agree(ok)


@pytest.mark.mpi
@pytest.mark.parametrize("kind", _params(KINDS))
def test_gather(comm, kind):
    make, ok = KINDS[kind], True
    for root in ROOTS:
        got = objects.gather(comm, make(RANK + root), root=root)
        want = WORLD.gather(make(RANK + root), root=root)
        ok &= _same(got, want)
        ok &= (got is None) if RANK != root else _same(got, [make(r + root) for r in range(SIZE)])
    assert _agree(ok)


@pytest.mark.mpi
@pytest.mark.parametrize("kind", _params(KINDS))
def test_allgather(comm, kind):
    make = KINDS[kind]
    got = objects.allgather(comm, make(RANK))
    ok = _same(got, WORLD.allgather(make(RANK))) and _same(got, [make(r) for r in range(SIZE)])
    assert _agree(ok)


@pytest.mark.mpi
@pytest.mark.parametrize("kind", _params(KINDS))
def test_alltoall(comm, kind):
    make = KINDS[kind]
    items = [make(RANK * SIZE + j) for j in range(SIZE)]
    got = objects.alltoall(comm, items)
    ok = _same(got, WORLD.alltoall(items))
    ok &= _same(got, [make(i * SIZE + RANK) for i in range(SIZE)])
    assert _agree(ok)


#: Sequence arguments mpi4py also takes: None (a None per rank), a tuple, a generator.
SEQUENCES = {
    "none": lambda: None,
    "tuple": lambda: tuple(f"{RANK}->{j}" for j in range(SIZE)),
    "generator": lambda: (f"{RANK}->{j}" for j in range(SIZE)),
}


@pytest.mark.mpi
@pytest.mark.parametrize("seq", list(SEQUENCES))
def test_sequence_arguments(comm, seq):
    make, ok = SEQUENCES[seq], True
    ok &= _same(objects.alltoall(comm, make()), WORLD.alltoall(make()))
    for root in ROOTS:
        ok &= _same(objects.scatter(comm, make(), root=root), WORLD.scatter(make(), root=root))
    assert _agree(ok)


def _concat(a, b):
    return a + b


#: Reductions: (op, a function of the rank to its object); op None calls without ``op``.
REDUCTIONS = {
    "default": (None, lambda r: 3 * r - 5),
    "sum-int": (MPI.SUM, lambda r: 3 * r - 5),
    "sum-float": (MPI.SUM, lambda r: 0.5 * r - 1.25),
    "sum-array": (MPI.SUM, lambda r: np.arange(4.0) * r + 0.5),
    "sum-large": (MPI.SUM, lambda r: np.full(140_000, r, dtype=np.float64)),
    "prod": (MPI.PROD, lambda r: r + 1),
    "max": (MPI.MAX, lambda r: (5 * r) % 7),
    "min-str": (MPI.MIN, lambda r: f"s{(3 * r) % 5}"),
    "maxloc": (MPI.MAXLOC, lambda r: (r % 3, r)),
    "minloc": (MPI.MINLOC, lambda r: (-(r % 3), r)),
    "concat-str": (_concat, lambda r: f"<{r}>"),
    "concat-list": (lambda a, b: a + b, lambda r: [r, -r]),
}

#: Reductions whose combine order shows: the result must be the fold in rank order.
ORDERED = ("concat-str", "concat-list")


def _call(fn, comm, obj, op, **kw):
    """Call ``fn(comm, obj, ...)`` (or WORLD's method if ``comm`` is None) with ``op`` if given."""
    if op is not None:
        kw["op"] = op
    if comm is None:
        return getattr(WORLD, fn)(obj, **kw)
    return getattr(objects, fn)(comm, obj, **kw)


def _fold(op, n):
    """Return the rank-order fold of the first ``n`` ranks' objects (None for none)."""
    op, make = REDUCTIONS[op]
    return functools.reduce(op, [make(r) for r in range(n)]) if n else None


@pytest.mark.mpi
@pytest.mark.parametrize("case", _params(REDUCTIONS))
def test_reduce(comm, case):
    op, make = REDUCTIONS[case]
    ok = True
    for root in ROOTS:
        got = _call("reduce", comm, make(RANK), op, root=root)
        ok &= _same(got, _call("reduce", None, make(RANK), op, root=root))
        if case in ORDERED:
            ok &= _same(got, _fold(case, SIZE) if RANK == root else None)
    assert _agree(ok)


@pytest.mark.mpi
@pytest.mark.parametrize("case", _params(REDUCTIONS))
@pytest.mark.parametrize("fn", ["allreduce", "scan", "exscan"])
def test_allreduce_scan_exscan(comm, fn, case):
    op, make = REDUCTIONS[case]
    obj = make(RANK)
    got = _call(fn, comm, obj, op)
    ok = _same(got, _call(fn, None, obj, op))
    if case in ORDERED:
        n = {"allreduce": SIZE, "scan": RANK + 1, "exscan": RANK}[fn]
        ok &= _same(got, _fold(case, n))
    assert _agree(ok)


#: Object collectives called again and again: name -> call(comm, obj) of one rank's object.
REPEATED = {
    "bcast": lambda c, o: objects.bcast(c, o, root=BAD),
    "scatter": lambda c, o: objects.scatter(c, [(o, j) for j in range(SIZE)], root=BAD),
    "gather": lambda c, o: objects.gather(c, o, root=BAD),
    "allgather": lambda c, o: objects.allgather(c, o),
    "alltoall": lambda c, o: objects.alltoall(c, [(o, j) for j in range(SIZE)]),
    "reduce": lambda c, o: objects.reduce(c, o, op=_concat, root=BAD),
    "allreduce": lambda c, o: objects.allreduce(c, o, op=_concat),
    "scan": lambda c, o: objects.scan(c, o, op=_concat),
    "exscan": lambda c, o: objects.exscan(c, o, op=_concat),
}


def _step(i):
    """This rank's object of call ``i``: strings of one length for calls 0-3 and 6-7 (new
    contents, the pickles' sizes those of the call before), 90,000 bytes at call 4, 300 at 5."""
    n = {4: 90_000, 5: 300}.get(i, 12)
    return f"{i}:{RANK:03d}:".ljust(n, "abcdefgh"[(i + RANK) % 8])


@pytest.mark.mpi
@pytest.mark.parametrize("fn", list(REPEATED))
def test_repeated_calls_match_mpi(comm, fn):
    """Calls whose pickles keep their sizes (each a repeat of the one before on a
    ``dualmpi.Comm``, which hands its buffer collectives the arrays it keeps), then grow past
    64 KiB and shrink (the kept arrays made anew): every result equal to WORLD's own."""
    call, ok = REPEATED[fn], True
    world = {"bcast": lambda o: WORLD.bcast(o, root=BAD),
             "gather": lambda o: WORLD.gather(o, root=BAD),
             "reduce": lambda o: WORLD.reduce(o, op=_concat, root=BAD)}.get(fn)
    for i in range(8):
        obj = _step(i)
        got = call(comm, obj)
        want = call(WORLD, obj) if world is None else world(obj)
        ok &= _same(got, want)
    assert _agree(ok)


@pytest.mark.mpi
@pytest.mark.parametrize("fn", list(REPEATED))
def test_repeats_run_from_memory(comm, fn, full_calls):
    """On a ``dualmpi.Comm``, an object collective whose pickles keep their sizes runs its
    buffer collectives from the communicator's memory: after five such calls, five more
    take the full path (``calls.collective``: read, agree, plan) for none of them."""
    import dualmpi

    if not isinstance(comm, dualmpi.Comm):
        pytest.skip("not a dualmpi.Comm: nothing remembered")
    for i in range(10):
        if i == 5:
            full_calls.clear()
        REPEATED[fn](comm, _step(i % 4))
    assert _agree(not full_calls), full_calls


@pytest.mark.mpi
def test_barrier(comm):
    assert objects.barrier(comm) is None
    assert _agree(True)


#: An object no pickle can hold.
LOCK = threading.Lock()
#: The rank that misbehaves in the error tests (the last rank, the only one at one rank).
BAD = SIZE - 1


def _n(k):
    """Return ``k`` items (one per rank when ``k`` is SIZE)."""
    return [f"item {j}" for j in range(k)]


#: Calls that must fail on every rank with InputError naming rank BAD: name -> call(comm).
FAILURES = {
    "bcast-unpicklable": lambda c: objects.bcast(c, LOCK if RANK == BAD else 0, root=BAD),
    "scatter-unpicklable": lambda c: objects.scatter(c, [LOCK] + _n(SIZE - 1), root=BAD),
    "scatter-too-long": lambda c: objects.scatter(c, _n(SIZE + 1), root=BAD),
    "scatter-too-short": lambda c: objects.scatter(c, _n(SIZE - 1), root=BAD),
    "scatter-not-a-sequence": lambda c: objects.scatter(c, 5, root=BAD),
    "gather-unpicklable": lambda c: objects.gather(c, LOCK if RANK == BAD else RANK),
    "allgather-lambda": lambda c: objects.allgather(c, (lambda: 0) if RANK == BAD else RANK),
    "alltoall-unpicklable": lambda c: objects.alltoall(c, _n(SIZE - 1) + [LOCK if RANK == BAD
                                                                          else "ok"]),
    "alltoall-too-long": lambda c: objects.alltoall(c, _n(SIZE + (RANK == BAD))),
    "alltoall-too-short": lambda c: objects.alltoall(c, _n(SIZE - (RANK == BAD))),
    "alltoall-not-a-sequence": lambda c: objects.alltoall(c, 5 if RANK == BAD else _n(SIZE)),
    "reduce-unpicklable": lambda c: objects.reduce(c, LOCK if RANK == BAD else RANK),
    "allreduce-unpicklable": lambda c: objects.allreduce(c, LOCK if RANK == BAD else RANK),
    "scan-unpicklable": lambda c: objects.scan(c, LOCK if RANK == BAD else RANK),
    "exscan-unpicklable": lambda c: objects.exscan(c, LOCK if RANK == BAD else RANK),
    "reduce-op-not-callable": lambda c: objects.reduce(c, RANK, op=5 if RANK == BAD else None),
    "allreduce-op-not-callable": lambda c: objects.allreduce(c, RANK,
                                                             op=5 if RANK == BAD else None),
    "scan-op-not-callable": lambda c: objects.scan(c, RANK, op=5 if RANK == BAD else None),
}


def _fails_here(call, *words):
    """Run ``call()``; return True if it raised InputError whose message holds ``words``."""
    try:
        call()
    except InputError as exc:
        return all(w in str(exc) for w in words)
    return False


def _still_works(comm):
    """Return True if ``comm`` still runs an object collective correctly (collective)."""
    return objects.allgather(comm, RANK) == list(range(SIZE))


@pytest.mark.mpi
@pytest.mark.parametrize("case", list(FAILURES))
def test_failure_on_one_rank_is_raised_on_every_rank(comm, case):
    ok = _fails_here(lambda: FAILURES[case](comm), f"rank {BAD} ")
    works = _still_works(comm)
    assert _agree(ok and works)


@pytest.mark.mpi
def test_failure_message_names_every_failing_rank(comm):
    ok = _fails_here(lambda: objects.allgather(comm, LOCK if RANK % 2 else RANK),
                     *(f"rank {r} " for r in range(1, min(SIZE, 8), 2)))
    works = _still_works(comm)
    assert _agree((ok if SIZE > 1 else not ok) and works)


@pytest.mark.mpi
def test_failing_rank_gives_the_cause(comm):
    try:
        objects.gather(comm, LOCK if RANK == BAD else RANK)
        ok = False
    except InputError as exc:
        ok = isinstance(exc.__cause__, Exception) == (RANK == BAD)
        ok &= ("here, rank" in str(exc)) == (RANK == BAD)
    assert _agree(ok)


def _raise(a, b):
    raise ZeroDivisionError("the op refused")


#: Ops that fail on rank 0, which combines (called from two ranks on; exscan from three).
BAD_OPS = {"raises": _raise, "unpicklable-result": lambda a, b: LOCK}


@pytest.mark.mpi
@pytest.mark.parametrize("bad", list(BAD_OPS))
@pytest.mark.parametrize("fn", ["allreduce", "scan", "exscan"])
def test_failing_op_is_raised_on_every_rank(comm, fn, bad):
    op = BAD_OPS[bad]
    called = SIZE > (2 if fn == "exscan" else 1)
    failed = _fails_here(lambda: getattr(objects, fn)(comm, RANK, op=op), "rank 0 ")
    works = _still_works(comm)
    assert _agree((failed == called) and works)


@pytest.mark.mpi
def test_failing_op_in_reduce_is_raised_at_root(comm):
    def call():
        return objects.reduce(comm, RANK, op=_raise, root=BAD)

    if RANK == BAD:
        ok = _fails_here(call, f"rank {BAD} ", "ZeroDivisionError") == (SIZE > 1)
    else:
        ok = call() is None
    works = _still_works(comm)
    assert _agree(ok and works)


@pytest.mark.mpi
@pytest.mark.parametrize("fn", ["bcast", "scatter", "gather", "reduce"])
@pytest.mark.parametrize("root", [-1, SIZE, 1.5])
def test_bad_root(comm, fn, root):
    ok = _fails_here(lambda: getattr(objects, fn)(comm, None, root=root), "root")
    works = _still_works(comm)
    assert _agree(ok and works)


@pytest.fixture
def json_pickle():
    """Install JSON as mpi4py's pickle (a tuple comes back a list); restore the default after."""
    MPI.pickle.__init__(lambda obj: json.dumps(obj).encode(), lambda buf: json.loads(bytes(buf)))
    try:
        yield
    finally:
        MPI.pickle.__init__()


@pytest.mark.mpi
def test_user_pickle_settings_apply(comm, json_pickle):
    obj = (RANK, "t")
    pairs = [
        (objects.bcast(comm, obj, root=BAD), WORLD.bcast(obj, root=BAD)),
        (objects.allgather(comm, obj), WORLD.allgather(obj)),
        (objects.alltoall(comm, [obj] * SIZE), WORLD.alltoall([obj] * SIZE)),
        (objects.allreduce(comm, [RANK], op=_concat), WORLD.allreduce([RANK], op=_concat)),
    ]
    ok = all(_same(a, b) for a, b in pairs) and _same(pairs[0][0], [BAD, "t"])
    assert _agree(ok)


@pytest.mark.mpi
def test_doctests():
    """The docstring examples run on COMM_WORLD at any rank count (every rank, same order)."""
    assert _agree(doctest.testmod(objects).failed == 0)
