"""MPI tests of ``dualmpi.Comm.Scan`` and ``Exscan`` against ``MPI.COMM_WORLD``'s own.

Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi/test_coll_scan_mpi.py``
at N = 1, 2, 4, 8, 32 or 64 (the networks: :data:`collective_cases.NETWORKS`).  Integer
results (and MIN/MAX) must be equal byte for byte, floating-point ones to rounding.  MPI
leaves rank 0's Exscan result undefined; dualmpi leaves its recvbuf as it was, which is
checked instead.  Every rank finishes its communication, then the ranks agree on the verdict.
"""

import numpy as np
import pytest

from collective_cases import (COUNTS, DTYPES, ERROR_NETS, MPI, NETS, OPS, RANK,
                              SIZE, WORLD, agree, check_bad_call, close, freed, gcd_op, network,
                              operands, same, sample, sentinel, valid)
from collective_cases import free_networks  # noqa: F401 - frees the module's communicators

LAST = SIZE - 1


def scan_once(net, kind, opname, dtype, n, in_place=False, seed=0, op=None, ref_op=None):
    """Run ``kind`` (Scan or Exscan) on ``net`` and on WORLD; True when they agree here."""
    op = OPS[opname] if op is None else op
    ref_op = op if ref_op is None else ref_op
    x = operands(dtype, n, opname, seed)
    mine, ref = sentinel(dtype, n), sentinel(dtype, n)
    send_m, send_r = x, x.copy()
    if in_place is not False:
        mine[:], ref[:] = x, x
        send_m = send_r = in_place
    before = mine.copy()
    getattr(net, kind)(send_m, mine, op)
    getattr(WORLD, kind)(send_r, ref, ref_op)
    if kind == "Exscan" and RANK == 0:
        ok = same(mine, before)  # undefined in MPI: dualmpi leaves it as it was
    else:
        ok = close(mine, ref, opname)
    return ok and same(x, operands(dtype, n, opname, seed))


@pytest.mark.mpi
@pytest.mark.parametrize("opname", sample(list(OPS), keep=["SUM", "MIN", "BOR"]))
@pytest.mark.parametrize("kind", ["Scan", "Exscan"])
@pytest.mark.parametrize("index", NETS)
def test_every_op_and_dtype(index, kind, opname):
    """Each predefined op on every dtype it applies to (counts rotated, 0 included), with
    buffers and in place (``MPI.IN_PLACE`` and ``None``), equals MPI's."""
    net = network(index)
    problems = []
    dtypes = [(name, dtype) for name, dtype in DTYPES.items() if valid(opname, dtype)]
    for k, (name, dtype) in enumerate(dtypes):
        n = COUNTS[(k + len(opname)) % len(COUNTS)]
        in_place = (False, MPI.IN_PLACE, None)[k % 3]
        if not scan_once(net, kind, opname, dtype, n, in_place, seed=k):
            problems.append((name, n, in_place))
    assert agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("index", NETS)
def test_long_vectors(index):
    """Long vectors (160 KB), with buffers and in place, equal MPI's."""
    net = network(index)
    problems = [(kind, in_place) for kind in ("Scan", "Exscan") for in_place in (False, None)
                if not scan_once(net, kind, "SUM", np.float64, 20000, in_place, seed=9)]
    assert agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("kind", ["Scan", "Exscan"])
@pytest.mark.parametrize("index", NETS)
def test_numpy_ufuncs(index, kind):
    """numpy ufuncs as ops: ``numpy.gcd`` against MPI's own user op computing it,
    ``numpy.minimum`` against MPI.MIN; the default op (None: SUM)."""
    net = network(index)
    gcd = gcd_op()
    problems = []
    try:
        for n in (0, 4, 250):
            if not scan_once(net, kind, "MAX", np.int64, n, op=np.gcd, ref_op=gcd, seed=2):
                problems.append(("gcd", n))
        if not scan_once(net, kind, "MIN", np.int8, 31, op=np.minimum, ref_op=MPI.MIN):
            problems.append("minimum")
    finally:
        gcd.Free()
    x = operands(np.int64, 17, "SUM", 4)
    mine, ref = np.zeros(17, np.int64), np.zeros(17, np.int64)
    getattr(net, kind)(x, mine)
    getattr(WORLD, kind)(x, ref)
    if not (same(mine, ref) or (kind == "Exscan" and RANK == 0)):
        problems.append("default op")
    assert agree(not problems), problems


def _cases():
    """Bad calls: name -> (call(net), words, the bad rank, None for every rank alike, or
    "any": every rank an InputError of its own with ``words``).

    Sizes are ones no other test of this module uses: a signature a rank has already
    agreed on skips the check on that rank (a known limitation).
    """
    first = RANK == 0

    def scan(n, op=MPI.SUM, dtype=np.float64, kind="Scan", recv_n=None):
        return lambda net: getattr(net, kind)(np.zeros(n, dtype),
                                              np.zeros(n if recv_n is None else recv_n, dtype),
                                              op)

    return {
        "count-disagrees": (lambda net: scan(353 + first)(net),
                            "Scan: ranks disagree on the message size (from 2824 to 2832)", None),
        "op-disagrees": (lambda net: scan(359, op=MPI.SUM if first else np.add)(net),
                         "Scan: ranks disagree on the operation", None),
        "datatype-disagrees": (lambda net: scan(367, dtype=np.int64 if first
                                                else np.float64)(net),
                               "Scan: ranks disagree on the datatype", None),
        "collective-disagrees": (lambda net: scan(373, kind="Scan" if first else "Exscan")(net),
                                 "the ranks called different collectives", "any"),
        "send-recv-sizes": (scan(379, recv_n=379 + (RANK == LAST)),
                            "Scan: sendbuf has 3032 bytes, recvbuf 3040", LAST),
        "too-small-recvbuf": (lambda net: net.Scan(
            np.zeros(383), [np.zeros(383 - (RANK == LAST)), 383, MPI.DOUBLE], MPI.SUM),
            "Scan recvbuf: count 383", LAST),
        "not-committed": (lambda net: freed(MPI.DOUBLE.Create_contiguous(1), lambda t: net.Scan(
            [np.zeros(389), 389, t], np.zeros(389), MPI.SUM)),
                          "Scan sendbuf: MPI refuses the datatype", None),
        "op-not-for-dtype": (scan(397, op=MPI.BAND), "Scan: the operation BAND does not apply "
                                                     "to float64", None),
        "ex-count-disagrees": (lambda net: scan(401 + first, kind="Exscan")(net),
                               "Exscan: ranks disagree on the message size", None),
        "ex-op-disagrees": (lambda net: scan(409, op=MPI.PROD if RANK == LAST else MPI.SUM,
                                             kind="Exscan")(net),
                            "Exscan: ranks disagree on the operation", None),
        "ex-not-an-op": (scan(419, op=sum, kind="Exscan"), "is not a reduction operation",
                         None),
        "ex-logical-op-on-floats": (scan(421, op=MPI.LXOR, kind="Exscan"),
                                    "Exscan: the operation LXOR does not apply to float64",
                                    None),
    }


def _case_params():
    return list(_cases())


@pytest.mark.mpi
@pytest.mark.parametrize("case", _case_params())
@pytest.mark.parametrize("index", ERROR_NETS)
def test_scan_bad_calls(index, case):
    """A rank-divergent or invalid Scan/Exscan: one InputError on every rank (or the bad
    rank's own and "rejected on rank N" elsewhere); the communicator still works."""
    method = "Exscan" if case.startswith("ex-") else "Scan"
    check_bad_call(index, case, _cases(), method)
