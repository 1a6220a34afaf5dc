"""MPI tests of the reductions of :class:`dualmpi.Comm` against mpi4py's own.

``Reduce``, ``Allreduce``, ``Scan`` and ``Exscan`` are called on the same buffers as
``MPI.COMM_WORLD``'s; integer results must be equal, floating-point ones equal to
rounding (the networks combine in another order).  Values are kept small enough that
no integer sum overflows: Open MPI's AVX component saturates 8- and 16-bit sums where
C (and dualmpi) wrap (open-mpi/ompi#8045, docs/api.md).  Run at N = 1, 2, 8, 32, 64 ranks
(networks with one and with several nodes per rank); every rank finishes its
communication, then the ranks agree on the verdict.
"""

import numpy as np
import pytest

import dualmpi

MPI = pytest.importorskip("mpi4py.MPI")

WORLD = MPI.COMM_WORLD
SIZE = WORLD.Get_size()
RANK = WORLD.Get_rank()
BIG = SIZE >= 32

#: Networks by rank count: one node per rank, then several.
NETS = {
    1: ["hypercube:n=0", "dualcube:r=1"],
    2: ["dualcube:r=1", "dualcube:r=2"],
    8: ["dualcube:r=2", "hypercube:n=3", "metacube:k=2,m=1", "ccc:n=3"],
    32: ["dualcube:r=3", "metacube:k=2,m=1", "hypercube:n=5"],
    64: ["metacube:k=2,m=1", "hypercube:n=6"],
}
SPECS = NETS.get(SIZE, [])

OPS = {"SUM": MPI.SUM, "PROD": MPI.PROD, "MIN": MPI.MIN, "MAX": MPI.MAX, "BAND": MPI.BAND,
       "BOR": MPI.BOR, "BXOR": MPI.BXOR, "LAND": MPI.LAND, "LOR": MPI.LOR, "LXOR": MPI.LXOR}
BITWISE = ("BAND", "BOR", "BXOR")
DTYPES = {np.dtype(t).name: t for t in (np.float64, np.int32, np.int64, np.uint8, np.int16,
                                        np.complex128, np.float32)}
KINDS = ("Reduce", "Allreduce", "Scan", "Exscan")
#: Elements: none, one, odd, and 64 KiB of the dtype (``None``).
COUNTS = [0, 1, 7, None]

_NETS = {}


def _agree(ok):
    """True when ``ok`` holds on every rank (collective)."""
    return bool(WORLD.allreduce(1 if ok else 0, op=MPI.MIN))


def _net(spec, **options):
    key = repr((spec, sorted(options.items())))
    if key not in _NETS:
        _NETS[key] = dualmpi.Comm(WORLD, spec, watchdog=60, **options)
    return _NETS[key]


@pytest.fixture(scope="module", autouse=True)
def _free_nets():
    """Free the communicators at the end (same order on every rank)."""
    yield
    for key in sorted(_NETS):
        _NETS.pop(key).Free()


def _spec(i):
    if i >= len(SPECS):
        pytest.skip(f"no network {i} at {SIZE} rank(s)")
    return SPECS[i]


def _data(dtype, n, opname, seed=0):
    """Rank-distinct values for which every op's result is exact in every dtype."""
    rng = np.random.default_rng([RANK, n, seed])
    dtype = np.dtype(dtype)
    if opname == "PROD":
        vals = rng.choice([1, -1] if dtype.kind != "u" else [1], size=n)
    elif opname in BITWISE or opname.startswith("L"):
        vals = rng.integers(0, 4, size=n)
    else:
        vals = rng.integers(0, 3, size=n) if dtype.itemsize <= 2 else rng.integers(-50, 50, n)
    out = vals.astype(dtype)
    if dtype.kind == "f" and opname == "SUM":
        out += rng.standard_normal(n).astype(dtype)
    if dtype.kind == "c":
        out = out + 1j * rng.integers(-5, 5, n)
    return out


def _close(a, b):
    if a.dtype.kind in "fc":
        return a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-4)
    return a.dtype == b.dtype and np.array_equal(a, b)


def _check(net, kind, x, opname, root=0, in_place=False, op=None):
    """Run ``kind`` on ``net`` and on WORLD with the same buffers; True when they agree here."""
    op = OPS[opname] if op is None else op
    n = x.size
    mine, ref = np.full(n, 7, x.dtype), np.full(n, 7, x.dtype)
    extra = (root,) if kind == "Reduce" else ()
    if in_place:
        mine[:] = x
        ref[:] = x
        send_m = send_r = MPI.IN_PLACE
        if kind == "Reduce" and RANK != root:
            send_m, send_r = x, x
    else:
        send_m = send_r = x
    getattr(net, kind)(send_m, mine, op, *extra)
    getattr(WORLD, kind)(send_r, ref, op, *extra)
    if kind == "Reduce" and RANK != root:
        return True
    if kind == "Exscan" and RANK == 0:
        return np.all(mine == 7) if not in_place else True  # left as it was
    return _close(mine, ref)


def _grid():
    """(kind, op, dtype) combinations, sampled from 32 ranks on."""
    out = []
    for kind in KINDS:
        for opname in OPS:
            for dname, dtype in DTYPES.items():
                kind_of = np.dtype(dtype).kind
                if (opname in BITWISE or opname.startswith("L")) and kind_of not in "iu":
                    continue  # MPI defines them on integers only
                if opname in ("MIN", "MAX") and kind_of == "c":
                    continue  # nor MIN/MAX on complex numbers
                keep = dname in ("float64", "int32") and opname in ("SUM", "MAX", "PROD")
                slow = (BIG and not (keep and kind in ("Allreduce", "Scan"))) or \
                    dname not in ("float64", "int32", "int64", "uint8")
                out.append(pytest.param(kind, opname, dtype, id=f"{kind}-{opname}-{dname}",
                                        marks=pytest.mark.slow if slow else ()))
    return out


#: From 32 ranks on, the default pass takes the first network only (the second: slow).
NET_INDICES = [0, pytest.param(1, marks=pytest.mark.slow if BIG else ())]


@pytest.mark.mpi
@pytest.mark.parametrize("kind, opname, dtype", _grid())
@pytest.mark.parametrize("net_index", NET_INDICES)
def test_reductions_match_mpi(net_index, kind, opname, dtype):
    """Every kind, op and dtype, counts 0/1/7/64 KiB, equal to mpi4py's result."""
    net = _net(_spec(net_index))
    ok = True
    for count in COUNTS:
        n = 65536 // np.dtype(dtype).itemsize if count is None else count
        x = _data(dtype, n, opname)
        ok &= _check(net, kind, x, opname, root=SIZE - 1)
    assert _agree(ok)


@pytest.mark.mpi
@pytest.mark.parametrize("net_index", [0, 1])
def test_reduce_every_root_and_in_place(net_index):
    """Reduce at every root (four from 32 ranks), with and without MPI.IN_PLACE; the
    others in place too."""
    net = _net(_spec(net_index))
    roots = range(SIZE) if SIZE <= 8 else sorted({0, 1, SIZE // 2 + 1, SIZE - 1})
    ok = True
    for root in roots:
        for in_place in (False, True):
            ok &= _check(net, "Reduce", _data(np.int64, 33, "SUM", root), "SUM", root, in_place)
    for kind in ("Allreduce", "Scan", "Exscan"):
        ok &= _check(net, kind, _data(np.float64, 1000, "SUM"), "SUM", in_place=True)
    assert _agree(ok)


@pytest.mark.mpi
@pytest.mark.parametrize("net_index", [0, pytest.param(1, marks=pytest.mark.slow if BIG else ()),
                                       2, 3])
def test_every_allreduce_algorithm(net_index):
    """Each algorithm the network has, forced by name, at a short and a long vector."""
    from dualmpi.collectives.allreduce import available

    spec = _spec(net_index)
    topo = dualmpi.topology.from_spec(spec)
    ok = True
    for alg in available(topo):
        net = _net(spec, algorithms={"allreduce": alg})
        for n in (3, 20000):
            ok &= _check(net, "Allreduce", _data(np.int64, n, "SUM", 5), "SUM")
            ok &= _check(net, "Allreduce", _data(np.float64, n, "MAX", 6), "MAX")
    assert _agree(ok)


@pytest.mark.mpi
@pytest.mark.parametrize("net_index", [0, 1])
def test_ufunc_and_user_op(net_index):
    """A numpy ufunc and a commutative ``MPI.Op.Create`` op give MPI's results."""
    net = _net(_spec(net_index))
    x = _data(np.int64, 100, "SUM", 9)
    mine, ref = np.zeros(100, np.int64), np.zeros(100, np.int64)
    net.Allreduce(x, mine, np.add)
    WORLD.Allreduce(x, ref, MPI.SUM)
    ok = _close(mine, ref)
    user = MPI.Op.Create(lambda a, b, t: np.maximum(np.frombuffer(a, np.int64),
                                                    np.frombuffer(b, np.int64),
                                                    out=np.frombuffer(b, np.int64)), True)
    try:
        net.Scan(x, mine, user)
        WORLD.Scan(x, ref, MPI.MAX)
        ok &= _close(mine, ref)
    finally:
        user.Free()
    assert _agree(ok)


@pytest.mark.mpi
@pytest.mark.parametrize("net_index", [0, 1])
def test_a_v_reduction_with_a_ufunc_is_remembered(net_index):
    """``Reduce_scatter`` repeated with a numpy ufunc as its operation (``np.add``) is
    remembered as one with MPI's own operation is (``calls.template_of`` keeps the ufunc by
    identity): from its first call on the method has a remembered call, each call equals
    MPI's (the send buffer's contents change in place), and another ufunc (``np.maximum``)
    is a call of its own, with MPI's results too.  (Before, a ufunc could not be compared:
    every call read its arguments and agreed on them anew.)"""
    from dualmpi import calls as dcalls

    net = _net(_spec(net_index))
    counts = [3 + r for r in range(SIZE)]
    x = _data(np.int64, sum(counts), "SUM", 4)
    mine, ref = np.zeros(counts[RANK], np.int64), np.zeros(counts[RANK], np.int64)
    ok, kept = True, []
    for step, (op, mpi_op) in enumerate([(np.add, MPI.SUM)] * 3 + [(np.maximum, MPI.MAX)] * 2):
        x[:] = np.roll(x, 1)
        net.Reduce_scatter(x, mine, counts, op)
        WORLD.Reduce_scatter(x, ref, counts, mpi_op)
        ok &= _close(mine, ref)
        memo = net._v_memo.get("Reduce_scatter")
        kept.append(memo is not None and memo.template[-1] == (dcalls.SAME, op))
    assert _agree(ok and all(kept)), kept


@pytest.mark.mpi
def test_reductions_count_their_link_messages():
    """An allreduce sends messages over links only, and as many as its schedule has."""
    from dualmpi.collectives.allreduce import build

    net = _net(_spec(0))
    net.reset_stats()
    x = np.arange(SIZE * 4, dtype=np.float64)
    net.Allreduce(x, np.empty_like(x))
    st = net.stats()
    alg = net._allreduce_algorithm(x.nbytes)
    sched = build(net.topology, alg, net.q)
    mine = sum(1 for _, _, tr in sched.transfers() if tr.src // net.q == RANK)
    topo = net.topology
    links_ok = all(topo.is_link(u, v) for (u, v) in st["links"])
    assert _agree(st["messages"] == mine and links_ok), (st["messages"], mine)


def _error(call):
    try:
        call()
    except dualmpi.errors.DualmpiError as exc:
        return type(exc).__name__, str(exc)
    return None


@pytest.mark.mpi
@pytest.mark.parametrize("case", ["op-disagrees", "bitwise-float", "non-commutative",
                                  "in-place-non-root", "sizes", "not-an-op"])
def test_bad_reductions_raise_everywhere(case):
    """Bad arguments: the same InputError on every rank, and the communicator still works."""
    net = _net(_spec(0))
    x = np.ones(5)
    calls = {
        "op-disagrees": (lambda: net.Allreduce(x, np.empty(5), MPI.SUM if RANK else MPI.MAX),
                         "ranks disagree on the operation" if SIZE > 1 else None),
        "bitwise-float": (lambda: net.Allreduce(x, np.empty(5), MPI.BAND),
                          "does not apply to float64"),
        "non-commutative": (lambda: net.Allreduce(x, np.empty(5), noncomm),
                            "not commutative"),
        "in-place-non-root": (lambda: net.Reduce(MPI.IN_PLACE, np.empty(5), MPI.SUM,
                                                 root=0) if SIZE > 1 else
                              net.Reduce(x, np.empty(6), MPI.SUM),
                              "Reduce sendbuf: MPI.IN_PLACE is not a buffer here" if SIZE > 1
                              else "must match"),
        "sizes": (lambda: net.Scan(x, np.empty(6)), "Scan: sendbuf has 40 bytes, recvbuf 48"),
        "not-an-op": (lambda: net.Exscan(x, np.empty(5), "sum"), "is not a reduction operation"),
    }
    noncomm = MPI.Op.Create(lambda a, b, t: None, False)
    try:
        call, words = calls[case]
        err = _error(call)
    finally:
        noncomm.Free()
    errs = WORLD.allgather(err)
    if words is None:  # one rank: nothing to disagree with
        ok = err is None
    else:
        ok = (all(e is not None and e[0] == "InputError" for e in errs)
              and any(words in e[1] for e in errs))
    y = np.empty(5)
    net.Allreduce(x, y)
    assert _agree(ok and np.all(y == SIZE)), errs


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16, np.int32])
def test_integer_sums_wrap_as_in_c(dtype):
    """MPI defines SUM with C's arithmetic, which wraps; the Open MPI 5.0.11 wheel's own
    kernels saturate 8- and 16-bit sums from 16 elements on (uint8: 255 where C gives the
    sum modulo 256), so dualmpi's compiled loop combines those types with kernels of its own
    (rounds.c) and only wider ones with MPI_Reduce_local: every rank gets the wrapped sum,
    whatever MPI.COMM_WORLD says, in one C call where the loop is built."""
    from dualmpi.engine import cloop

    world = MPI.COMM_WORLD
    size, rank = world.Get_size(), world.Get_rank()
    net = dualmpi.Comm(world, f"hypercube:n={size.bit_length() - 1}") \
        if size & (size - 1) == 0 else None
    if net is None:
        pytest.skip("needs a power-of-two number of ranks")
    info = np.iinfo(dtype)
    n = 64

    def value(r):
        """Rank ``r``'s element: above half the type's maximum, within the type at any size
        (int8 at 64 ranks: 66 + 63 would not fit, and numpy refuses it on those ranks only)."""
        low = info.max // 2 + 3
        return low + r % (info.max - low + 1)

    a = np.full(n, value(rank), dtype=dtype)
    got, again = np.zeros_like(a), np.zeros_like(a)
    net.Allreduce(a, got)
    single = net._last_runner.single
    net.Iallreduce(a, again).Wait()
    net.Free()
    exact = sum(np.full(n, value(r), dtype=np.int64) for r in range(size))
    wrapped = ((exact - info.min) % (1 << (8 * a.itemsize)) + info.min).astype(dtype)
    ok = np.array_equal(got, wrapped) and np.array_equal(again, wrapped)
    ok = ok and single == (cloop.load() is not None)
    assert bool(world.allreduce(int(ok), op=MPI.MIN))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16, np.bool_])
def test_small_integers_combine_in_one_c_call(spec, dtype):
    """Every predefined operation on 8- and 16-bit integers and bools, on values whose sums and
    products overflow: the result is C's (numpy's, folded in rank order: the operations are
    commutative and associative with wrap-around), blocking and nonblocking, and the
    blocking call runs in one C call where the compiled loop is built (no Python between
    rounds). Where nothing overflows, it equals MPI.COMM_WORLD's."""
    from dualmpi.engine import cloop

    net = _net(spec)
    dtype = np.dtype(dtype)
    n = 40
    ops = [name for name in OPS if dtype.kind != "b" or name in ("LAND", "LOR", "LXOR")]
    bad = []
    for name in ops:
        def operand(r):
            rng = np.random.default_rng([r, n, dtype.itemsize, len(name)])
            if dtype.kind == "b":
                return rng.integers(0, 2, n).astype(dtype)
            info = np.iinfo(dtype)
            return rng.integers(info.min, info.max, n, endpoint=True, dtype=dtype)
        want = operand(0)
        for r in range(1, SIZE):
            with np.errstate(all="ignore"):
                want = np.asarray(getattr(np, {"SUM": "add", "PROD": "multiply",
                                                "MIN": "minimum", "MAX": "maximum",
                                                "BAND": "bitwise_and", "BOR": "bitwise_or",
                                                "BXOR": "bitwise_xor", "LAND": "logical_and",
                                                "LOR": "logical_or",
                                                "LXOR": "logical_xor"}[name])(operand(r), want),
                                  dtype=dtype)
        a = operand(RANK)
        got, nb = np.zeros_like(a), np.zeros_like(a)
        net.Allreduce(a, got, OPS[name])
        single = net._last_runner.single
        net.Iallreduce(a, nb, OPS[name]).Wait()
        if not (np.array_equal(got, want) and np.array_equal(nb, want)):
            bad.append((name, "result"))
        if single != (cloop.load() is not None):
            bad.append((name, "not one C call"))
        if name not in ("SUM", "PROD") and dtype.kind != "b":  # nothing overflows: MPI agrees
            ref = np.zeros_like(a)
            WORLD.Allreduce(a, ref, OPS[name])
            if not np.array_equal(got, ref):
                bad.append((name, "MPI"))
    assert _agree(not bad), bad


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("kind", ["Allreduce", "Reduce", "Scan", "Reduce_scatter_block"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_floating_overflow_gives_inf_without_a_warning(kind, dtype):
    """MPI's PROD of values whose product overflows gives inf, silently, as C does: dualmpi's
    result equals MPI.COMM_WORLD's and no rank sees numpy's overflow warning (on any path:
    the compiled loop's MPI_Reduce_local, or numpy where MPI has no kernel: float16)."""
    import warnings

    if not SPECS:
        pytest.skip(f"no network at {SIZE} ranks")
    net = _net(SPECS[0])
    big = np.finfo(dtype).max / 2
    a = np.full(3 * SIZE, big, dtype=dtype)
    args = {"Reduce": (0,), "Allreduce": (), "Scan": (), "Reduce_scatter_block": ()}[kind]
    got = np.zeros(3 if kind == "Reduce_scatter_block" else a.size, dtype=dtype)
    ref = np.zeros_like(got)
    error = None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            getattr(net, kind)(a, got, MPI.PROD, *args)
        except Exception as exc:  # (a warning turned error, raised on this rank only)
            error = repr(exc)
    ok = error is None
    if dtype is not np.float16:  # (MPI has no 16-bit float: the reference is numpy's inf)
        getattr(WORLD, kind)(a, ref, MPI.PROD, *args)
    else:
        ref[:] = np.inf
    if kind == "Scan" and RANK == 0 or kind == "Reduce" and RANK != 0:
        ref = np.full_like(got, big) if kind == "Scan" else got
    ok = ok and np.array_equal(got, ref)
    assert _agree(ok), (error, got[:3], ref[:3])
