"""MPI tests of ``dualmpi.Comm.Reduce_scatter_block`` and ``Reduce_scatter`` against COMM_WORLD's.

Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi/test_coll_reduce_scatter_mpi.py``
at N = 1, 2, 4, 8, 32 or 64 (the networks: :data:`collective_cases.NETWORKS`).  Integer
results (and MIN/MAX) must be equal byte for byte, floating-point ones to rounding.  In
place, MPI defines only the first ``recvcounts[rank]`` elements of the result, which are
compared.  Every rank finishes its communication, then the ranks agree on the verdict.
"""

import numpy as np
import pytest

from collective_cases import (COMBOS, COUNTS, ERROR_NETS, MPI, NETS, OPS, RANK,
                              SIZE, WORLD, agree, check_bad_call, close, network, operands, same,
                              sentinel, v_counts)
from collective_cases import free_networks  # noqa: F401 - frees the module's communicators

LAST = SIZE - 1


def _block(net, opname, dtype, n, in_place, seed=0):
    """Reduce_scatter_block of ``n`` elements a rank; True when it equals MPI's here."""
    x = operands(dtype, n * SIZE, opname, seed)
    op = OPS[opname]
    if in_place is not False:
        mine, ref = x.copy(), x.copy()
        net.Reduce_scatter_block(in_place, mine, op)
        WORLD.Reduce_scatter_block(in_place, ref, op)
        return close(mine[:n], ref[:n], opname)
    mine, ref = sentinel(dtype, n), sentinel(dtype, n)
    net.Reduce_scatter_block(x, mine, op)
    WORLD.Reduce_scatter_block(x.copy(), ref, op)
    return close(mine, ref, opname) and same(x, operands(dtype, n * SIZE, opname, seed))


@pytest.mark.mpi
@pytest.mark.parametrize("index", NETS)
def test_reduce_scatter_block_matches_mpi(index):
    """Every op on its dtypes (counts rotated, 0 included), in place (``MPI.IN_PLACE`` and
    ``None``) too, equals MPI_Reduce_scatter_block."""
    net = network(index)
    problems = []
    for k, (op, name, dtype) in enumerate(COMBOS[index % 3::3]):
        n = COUNTS[k % len(COUNTS)]
        in_place = (False, False, MPI.IN_PLACE, None)[k % 4]
        if not _block(net, op, dtype, n, in_place, seed=k):
            problems.append((op, name, n, in_place))
    assert agree(not problems), problems


def _uneven(net, opname, dtype, counts, given, in_place=False, seed=0):
    """Reduce_scatter with ``counts[r]`` elements to rank r (``given``: pass recvcounts)."""
    total = int(counts.sum())
    x = operands(dtype, total, opname, seed)
    op = OPS[opname]
    mine_n = int(counts[RANK])
    rc = counts if given else None
    if in_place is not False:
        mine, ref = x.copy(), x.copy()
        net.Reduce_scatter(in_place, mine, counts, op)
        WORLD.Reduce_scatter(in_place, ref, counts, op)
        return close(mine[:mine_n], ref[:mine_n], opname)
    mine, ref = sentinel(dtype, mine_n + 2), sentinel(dtype, mine_n + 2)
    net.Reduce_scatter(x, [mine, mine_n], rc, op)
    WORLD.Reduce_scatter(x.copy(), [ref, mine_n], rc, op)
    return close(mine, ref, opname) and same(x, operands(dtype, total, opname, seed))


@pytest.mark.mpi
@pytest.mark.parametrize("given", [True, False], ids=["recvcounts", "recvcounts-None"])
@pytest.mark.parametrize("index", NETS)
def test_reduce_scatter_matches_mpi(index, given):
    """Uneven recvcounts (zeros included, all zero too), given or learned from the ranks'
    recvbufs (None), several ops and dtypes, in place too, equal MPI_Reduce_scatter."""
    net = network(index)
    problems = []
    for k, scale in enumerate((0, 1, 9, 300)):
        op, name, dtype = COMBOS[(7 * k + 3 * given) % len(COMBOS)]
        counts = v_counts(scale, k) if scale else np.zeros(SIZE, np.int64)
        if not _uneven(net, op, dtype, counts, given, seed=k):
            problems.append((op, name, scale))
    if given:
        for in_place in (MPI.IN_PLACE, None):
            if not _uneven(net, "SUM", np.int32, v_counts(5, 8), True, in_place):
                problems.append(("in place", in_place))
    assert agree(not problems), problems


def _cases():
    """Bad calls: name -> (call(net), words, the bad rank, None for every rank alike, or
    "any": every rank an InputError of its own with ``words``).

    Sizes are ones no other test of this module uses: a signature a rank has already
    agreed on skips the check on that rank (a known limitation).
    """
    first = RANK == 0

    def block(n, op=MPI.SUM, dtype=np.float64, recv_n=None):
        return lambda net: net.Reduce_scatter_block(
            np.zeros(n * SIZE, dtype), np.zeros(n if recv_n is None else recv_n, dtype), op)

    def uneven(counts, recv_n=None, op=MPI.SUM, send_n=None, dtype=np.float64):
        counts = np.asarray(counts)
        return lambda net: net.Reduce_scatter(
            np.zeros(int(counts.sum()) if send_n is None else send_n, dtype),
            np.zeros(int(counts[RANK]) if recv_n is None else recv_n, dtype), counts, op)

    return {
        "count-disagrees": (lambda net: block(313 + first)(net),
                            "Reduce_scatter_block: ranks disagree on the block size", None),
        "op-disagrees": (lambda net: block(317, op=MPI.MIN if first else MPI.MAX)(net),
                         "Reduce_scatter_block: ranks disagree on the operation", None),
        "datatype-disagrees": (lambda net: block(331, dtype=np.int64 if first
                                                 else np.float64)(net),
                               "Reduce_scatter_block: ranks disagree on the datatype", None),
        "collective-disagrees": (lambda net: block(337)(net) if first else
                                 net.Allreduce(np.zeros(337 * SIZE), np.zeros(337 * SIZE)),
                                 "the ranks called different collectives", "any"),
        "send-recv-sizes": (block(347, recv_n=347 + (RANK == LAST)),
                            "Reduce_scatter_block: sendbuf has 2776 bytes per rank, recvbuf "
                            "2784", LAST),
        "op-not-for-dtype": (block(349, op=MPI.BXOR), "the operation BXOR does not apply to "
                                                      "float64", None),
        "v-recvcounts-disagree": (uneven([2] * SIZE if RANK != LAST else  # the same sum
                                         [3, 1] + [2] * (SIZE - 2)),
                                  "Reduce_scatter: ranks disagree on recvcounts", None),
        "v-op-disagrees": (uneven([3] * SIZE, op=MPI.SUM if first else MPI.PROD),
                           "Reduce_scatter: ranks disagree on the operation", None),
        "v-collective-disagrees": (lambda net: uneven([4] * SIZE)(net) if first else
                                   net.Allgatherv(np.zeros(4), [np.zeros(4 * SIZE), [4] * SIZE]),
                                   "the ranks called different collectives", "any"),
        "v-recvbuf-not-count": (uneven([5] * SIZE, recv_n=5 + (RANK == LAST)),
                                f"Reduce_scatter: recvbuf has 6 elements, recvcounts[{LAST}] is "
                                "5", LAST),
        "v-sum-mismatch": (uneven([6] * SIZE, send_n=6 * SIZE + (RANK == LAST)),
                           f"Reduce_scatter: sendbuf has {6 * SIZE + 1} elements, "
                           f"sum(recvcounts) is {6 * SIZE}", LAST),
        "v-in-place-needs-recvcounts": (lambda net: net.Reduce_scatter(
            MPI.IN_PLACE, np.zeros(7 * SIZE), None if RANK == LAST else [7] * SIZE),
            "Reduce_scatter: MPI.IN_PLACE needs recvcounts", LAST),
        "v-recvcounts-length": (uneven([1] * (SIZE + (RANK == LAST)), recv_n=1, send_n=SIZE),
                                f"Reduce_scatter: recvcounts must be {SIZE} non-negative "
                                "integers", LAST),
        "v-op-not-for-dtype": (uneven([9] * SIZE, op=MPI.BOR),
                               "Reduce_scatter: the operation BOR does not apply to float64",
                               None),
        "v-logical-op-on-floats": (uneven([10] * SIZE, op=MPI.LAND),
                                   "Reduce_scatter: the operation LAND does not apply to "
                                   "float64", None),
    }


def _case_params():
    return list(_cases())


@pytest.mark.mpi
@pytest.mark.parametrize("case", _case_params())
@pytest.mark.parametrize("index", ERROR_NETS)
def test_reduce_scatter_bad_calls(index, case):
    """A rank-divergent or invalid Reduce_scatter(_block): one InputError on every rank (or
    the bad rank's own and "rejected on rank N" elsewhere); the communicator still works."""
    method = "Reduce_scatter" if case.startswith("v-") else "Reduce_scatter_block"
    check_bad_call(index, case, _cases(), method)
