"""MPI tests of ``dualmpi.Comm.Reduce`` and ``Allreduce`` against ``MPI.COMM_WORLD``'s own.

Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi/test_coll_reduce_mpi.py``
at N = 1, 2, 4, 8, 32 or 64 (the networks: :data:`collective_cases.NETWORKS`).  Integer
results (and MIN/MAX) must be equal byte for byte, floating-point ones to rounding (the
networks combine in another order); operands keep integer results in range
(:func:`collective_cases.operands`).  Every rank finishes its communication, then the
ranks agree on the verdict before asserting.
"""

import numpy as np
import pytest

from collective_cases import (COMBOS, COUNTS, DTYPES, ERROR_NETS, MPI, NETS, OPS, RANK, ROOTS,
                              SIZE, WORLD, agree, bound_then_copied, check_bad_call, close,
                              error_of, freed, gcd_op, network, operands, same, sample, sentinel,
                              valid)
from collective_cases import free_networks  # noqa: F401 - frees the module's communicators

LAST = SIZE - 1


def reduce_once(net, kind, opname, dtype, n, root=0, in_place=False, seed=0, op=None,
                ref_op=None):
    """Run ``kind`` (Reduce or Allreduce) on ``net`` and on WORLD; True when they agree here.

    ``in_place``: False, None or MPI.IN_PLACE (at the root of a Reduce); ``op``: what
    dualmpi gets (default ``OPS[opname]``), ``ref_op`` what WORLD gets (default the same).
    """
    op = OPS[opname] if op is None else op
    ref_op = op if ref_op is None else ref_op
    x = operands(dtype, n, opname, seed, root)
    significant = kind == "Allreduce" or RANK == root
    mine = ref = None
    if significant:
        mine, ref = sentinel(dtype, n), sentinel(dtype, n)
    send_m, send_r = x, x.copy()
    if in_place is not False and significant:
        mine[:], ref[:] = x, x
        send_m = send_r = in_place
    extra = (root,) if kind == "Reduce" else ()
    getattr(net, kind)(send_m, mine, op, *extra)
    getattr(WORLD, kind)(send_r, ref, ref_op, *extra)
    return (not significant or close(mine, ref, opname)) and \
        same(x, operands(dtype, n, opname, seed, root))


@pytest.mark.mpi
@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize("index", NETS)
def test_reduce_matches_mpi(index, root):
    """Every root, each with every count (0 included) and other ops and dtypes, with buffers
    and in place at the root (``MPI.IN_PLACE`` and ``None``), equals MPI_Reduce."""
    net = network(index)
    problems = []
    for k, n in enumerate(COUNTS):
        op, name, dtype = COMBOS[(5 * root + 11 * k) % len(COMBOS)]
        in_place = (False, MPI.IN_PLACE, False, None)[k]
        if not reduce_once(net, "Reduce", op, dtype, n, root, in_place):
            problems.append((op, name, n, in_place))
    assert agree(not problems), problems


def _op_params():
    return sample(list(OPS), keep=["SUM", "MAX", "BXOR"])


@pytest.mark.mpi
@pytest.mark.parametrize("opname", _op_params())
@pytest.mark.parametrize("kind", ["Reduce", "Allreduce"])
@pytest.mark.parametrize("index", NETS)
def test_every_op_and_dtype(index, kind, opname):
    """Each predefined op on every dtype it applies to (counts rotated, 0 included), in
    place too (Reduce: at the last rank), equals MPI's."""
    net = network(index)
    problems = []
    dtypes = [(name, dtype) for name, dtype in DTYPES.items() if valid(opname, dtype)]
    for k, (name, dtype) in enumerate(dtypes):
        n = COUNTS[(k + len(opname)) % len(COUNTS)]
        in_place = (False, MPI.IN_PLACE, None)[k % 3]
        if not reduce_once(net, kind, opname, dtype, n, LAST, in_place, seed=k):
            problems.append((name, n, in_place))
    assert agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("index", NETS)
def test_allreduce_long_vectors(index):
    """Vectors long enough for the other allreduce algorithms (chosen per size), and the
    default op (None: SUM), equal MPI_Allreduce."""
    net = network(index)
    problems = []
    for n, dtype in ((3000, np.float64), (40000, np.int64), (70001, np.float32)):
        if not reduce_once(net, "Allreduce", "SUM", dtype, n, seed=n):
            problems.append(n)
    x = operands(np.int32, 33, "SUM", 1)
    mine, ref = np.zeros(33, np.int32), np.zeros(33, np.int32)
    net.Allreduce(x, mine)
    WORLD.Allreduce(x, ref)
    if not same(mine, ref):
        problems.append("default op")
    assert agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("kind", ["Reduce", "Allreduce"])
@pytest.mark.parametrize("index", NETS)
def test_numpy_ufuncs(index, kind):
    """numpy ufuncs as ops: ``numpy.gcd`` against MPI's own user op computing it, and
    ``numpy.maximum``/``numpy.add`` against MPI.MAX/MPI.SUM."""
    net = network(index)
    gcd = gcd_op()
    problems = []
    try:
        for n in (0, 5, 300):
            if not reduce_once(net, kind, "MAX", np.int64, n, LAST, op=np.gcd, ref_op=gcd,
                               seed=3):
                problems.append(("gcd", n))
        if not reduce_once(net, kind, "MAX", np.float32, 77, 0, op=np.maximum,
                           ref_op=MPI.MAX):
            problems.append("maximum")
        if not reduce_once(net, kind, "SUM", np.complex128, 12, LAST, op=np.add,
                           ref_op=MPI.SUM):
            problems.append("add")
    finally:
        gcd.Free()
    assert agree(not problems), problems


#: Pair types of MAXLOC and MINLOC: ``(MPI pair type, value dtype)``.
PAIRS = {"DOUBLE_INT": (MPI.DOUBLE_INT, np.float64), "TWOINT": (MPI.TWOINT, np.int32),
         "FLOAT_INT": (MPI.FLOAT_INT, np.float32), "LONG_INT": (MPI.LONG_INT, np.int64)}


@pytest.mark.mpi
@pytest.mark.parametrize("pair", list(PAIRS))
@pytest.mark.parametrize("opname", ["MAXLOC", "MINLOC"])
@pytest.mark.parametrize("index", NETS[:1])
def test_maxloc_minloc_pair_types(index, opname, pair):
    """MAXLOC and MINLOC on MPI's pair types (ties included: the lowest index wins) equal
    MPI's, in Reduce and Allreduce."""
    from mpi4py.util.dtlib import to_numpy_dtype

    net = network(index)
    mpitype, vtype = PAIRS[pair]
    dtype = to_numpy_dtype(mpitype)
    op = getattr(MPI, opname)
    problems = []
    for kind in ("Allreduce", "Reduce"):
        n = 9
        x = np.zeros(n, dtype)
        x["f0"] = (operands(np.int64, n, "MIN", 1) % 5).astype(vtype)  # ties
        x["f1"] = (RANK * 7 + np.arange(n)) % (SIZE + 3)
        mine, ref = np.zeros(n, dtype), np.zeros(n, dtype)
        extra = (LAST,) if kind == "Reduce" else ()
        err = error_of(lambda: getattr(net, kind)([x, mpitype], [mine, mpitype], op, *extra))
        getattr(WORLD, kind)([x, mpitype], [ref, mpitype], op, *extra)
        significant = kind == "Allreduce" or RANK == LAST
        if err is not None or (significant and not same(mine, ref)):
            problems.append((kind, err))
    assert agree(not problems), problems


def _cases():
    """Bad calls: name -> (call(net), words, the bad rank, None for every rank alike, or
    "any": every rank an InputError of its own with ``words``).

    Sizes are ones no other test of this module uses: a signature a rank has already
    agreed on skips the check on that rank (a known limitation).
    """
    other = min(1, LAST)
    first = RANK == 0

    def reduce(n, root=0, op=MPI.SUM, dtype=np.float64):
        return lambda net: net.Reduce(np.zeros(n, dtype), np.zeros(n, dtype), op, root)

    def allreduce(n, op=MPI.SUM, dtype=np.float64):
        return lambda net: net.Allreduce(np.zeros(n, dtype), np.zeros(n, dtype), op)

    return {
        "root-disagrees": (lambda net: reduce(223, 0 if first else other)(net),
                           "Reduce: ranks disagree on the root (from 0 to 1)", None),
        "count-disagrees": (lambda net: reduce(227 + first)(net),
                            "Reduce: ranks disagree on the message size (from 1816 to 1824)",
                            None),
        "op-disagrees": (lambda net: reduce(229, op=MPI.SUM if first else MPI.MAX)(net),
                         "Reduce: ranks disagree on the operation", None),
        "datatype-disagrees": (lambda net: reduce(233, dtype=np.int64 if first
                                                  else np.float64)(net),
                               "Reduce: ranks disagree on the datatype", None),
        "collective-disagrees": (lambda net: reduce(239)(net) if first else
                                 allreduce(239)(net),
                                 "the ranks called different collectives", "any"),
        "bad-root": (reduce(241, root=SIZE), f"bad root {SIZE}", None),
        "too-small-recvbuf": (lambda net: net.Reduce(
            np.zeros(251), [np.zeros(251 - (RANK == LAST)), 251, MPI.DOUBLE], MPI.SUM, LAST),
            "Reduce recvbuf: count 251", LAST),
        "not-committed": (lambda net: freed(MPI.DOUBLE.Create_contiguous(1), lambda t: net.Reduce(
            [np.zeros(257), 257, t], np.zeros(257), MPI.SUM, 0)),
                          "Reduce sendbuf: MPI refuses the datatype", None),
        "not-an-op": (reduce(263, op="sum"), "Reduce: 'sum' is not a reduction operation",
                      None),
        "op-not-for-dtype": (reduce(269, op=MPI.BAND), "Reduce: the operation BAND does not "
                                                       "apply to float64", None),
        "not-commutative": (lambda net: freed(MPI.Op.Create(lambda a, b, t: None, commute=False),
                                              lambda op: reduce(271, op=op)(net)),
                            "Reduce: the operation is not commutative", None),
        "mixed-datatype": (lambda net: freed(
            MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.INT, MPI.DOUBLE]).Commit(),
            lambda t: net.Reduce([np.zeros(2 * 277), 277, t], [np.zeros(2 * 277), 277, t],
                                 MPI.SUM, 0)),
            "Reduce: a reduction needs a datatype made of one predefined type (got a derived "
            "STRUCT datatype)", None),
        "all-count-disagrees": (lambda net: allreduce(281 + first)(net),
                                "Allreduce: ranks disagree on the message size", None),
        "all-op-disagrees": (lambda net: allreduce(283, op=MPI.PROD if RANK == LAST
                                                   else MPI.SUM)(net),
                             "Allreduce: ranks disagree on the operation", None),
        "all-ufunc-disagrees": (lambda net: allreduce(293, op=np.add if RANK == LAST
                                                      else np.multiply)(net),
                                "Allreduce: ranks disagree on the operation", None),
        "all-send-recv-sizes": (lambda net: net.Allreduce(np.zeros(307 + (RANK == LAST)),
                                                          np.zeros(307)),
                                "Allreduce: sendbuf has 2464 bytes, recvbuf 2456", LAST),
        "all-ufunc-not-binary": (allreduce(311, op=np.negative),
                                 "Allreduce: the ufunc negative does not take two arguments",
                                 None),
        "all-logical-op-on-floats": (allreduce(313, op=MPI.LOR),
                                     "Allreduce: the operation LOR does not apply to float64",
                                     None),
    }


def _case_params():
    return list(_cases())


@pytest.mark.mpi
@pytest.mark.parametrize("case", _case_params())
@pytest.mark.parametrize("index", ERROR_NETS)
def test_reduce_bad_calls(index, case):
    """A rank-divergent or invalid Reduce/Allreduce: one InputError on every rank (or the
    bad rank's own and "rejected on rank N" elsewhere); the communicator still works."""
    method = "Allreduce" if case.startswith("all-") else "Reduce"
    check_bad_call(index, case, _cases(), method)


@pytest.mark.mpi
@pytest.mark.parametrize("first", [False, True], ids=["repeated", "first"])
@pytest.mark.parametrize("index", ERROR_NETS)
def test_repeated_reductions_run_zero_copy(index, first, monkeypatch):
    """Reductions repeated on the same buffers (pieces of ``calls.ZERO_COPY_ABOVE`` and more)
    run on a runner bound to them with one node per rank — from the first call too, with
    ``calls.ZERO_COPY_FIRST`` out of the way (a runner of the call's own, on the engine's spare
    store): the blocks they combine into are not copied from the send buffer first but
    received where the result goes and the send buffer's combined into them
    (``plan.received_seeds``: no copies before the first round), or combined in place where
    the plan allows (``MPI.IN_PLACE``: not ``Exscan``); MPI's ops and a user op (combined in
    Python) on changing send contents equal MPI's, the gaps around the receive buffer and the
    send buffer stay untouched, and the link counts equal those of the same calls copied
    through the working buffer."""
    from dualmpi import calls

    if first:
        monkeypatch.setattr(calls, "ZERO_COPY_FIRST", 1)
    net = network(index)
    n = SIZE * (calls.ZERO_COPY_ABOVE // 8 + 5)  # elements of 8 bytes, a piece >= ZERO_COPY_ABOVE
    gap = 3
    gcd = gcd_op()
    apart, in_place = "apart", "in place"
    cases = [("Allreduce", "SUM", np.float64, None, apart),
             ("Allreduce", "MAX", np.int64, None, apart),
             ("Allreduce", "gcd", np.int64, gcd, apart),
             ("Reduce", "SUM", np.float64, None, apart),
             ("Scan", "PROD", np.float64, None, apart), ("Exscan", "MIN", np.int64, None, apart),
             ("Reduce_scatter_block", "SUM", np.int64, None, apart),
             ("Allreduce", "SUM", np.float64, None, in_place),
             ("Reduce", "PROD", np.float64, None, in_place),
             ("Scan", "SUM", np.int64, None, in_place),
             ("Exscan", "MAX", np.float64, None, in_place)]

    def rounds():
        ok, kinds = True, []
        for kind, opname, dtype, user, place in cases:
            op = OPS[opname] if user is None else user
            out = n // SIZE if kind == "Reduce_scatter_block" else n
            send = operands(dtype, n, "SUM" if user is not None else opname, 0)
            if user is not None:
                send = np.abs(send) * 6 + 6  # gcd's operands: multiples of 6
            mine, ref = sentinel(dtype, out + 2 * gap), sentinel(dtype, out + 2 * gap)
            recv = mine[gap:gap + out]  # the same object every call: a repeated call
            extra = (LAST,) if kind == "Reduce" else ()
            # in place: MPI.IN_PLACE, the data in recvbuf (at a Reduce's root only)
            here = place == in_place and (kind != "Reduce" or RANK == LAST)
            for step in range(3):  # the second and third calls repeat the first's buffers
                send[:] = np.roll(send, step)  # new contents, same buffer
                before = send.copy()
                if here:
                    recv[:] = ref[gap:gap + out] = send
                if step == 0:  # (a call matched in C leaves it: not another case's runner)
                    net._last_runner = None
                getattr(net, kind)(MPI.IN_PLACE if here else send, recv, op, *extra)
                run = net._last_runner
                kinds.append((kind, opname, place, step, bool(getattr(run, "absolute", False)),
                              len(run.seed_copies()) if hasattr(run, "seed_copies") else 0))
                getattr(WORLD, kind)(MPI.IN_PLACE if here else send, ref[gap:gap + out], op,
                                     *extra)
                significant = not (kind == "Reduce" and RANK != LAST) and \
                    not (kind == "Exscan" and RANK == 0)
                ok = ok and same(send, before) and same(mine[:gap], ref[:gap]) and \
                    same(mine[gap + out:], ref[gap + out:]) and \
                    (not significant or close(mine, ref, opname))
        return ok, kinds

    (ok, kinds), links, (ok_copied, copied), links_copied = bound_then_copied(
        net, rounds, lambda: monkeypatch.setattr(calls, "ZERO_COPY_ABOVE", 1 << 62))
    gcd.Free()
    # an in-place Exscan receives into bytes that still hold input to send: it copies
    want = [(kind, opname, place, step, net._zero_copy and (step > 0 or first)
             and not (kind == "Exscan" and place == in_place), 0)
            for kind, opname, place, step, _, _ in kinds]
    assert agree(ok and ok_copied and kinds == want and not any(z for *_, z, _ in copied)
                 and links == links_copied), (ok, ok_copied, kinds, links, links_copied)
