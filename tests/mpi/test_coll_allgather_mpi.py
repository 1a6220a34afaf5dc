"""MPI tests of ``dualmpi.Comm.Allgather`` and ``Allgatherv`` against ``MPI.COMM_WORLD``'s own.

Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi/test_coll_allgather_mpi.py``
at N = 1, 2, 4, 8, 32 or 64 (the networks: :data:`collective_cases.NETWORKS`).  Receive
buffers start as a sentinel, so bytes MPI leaves alone (the gaps between pieces) must stay
so; every rank finishes its communication, then the ranks agree on the verdict.
"""

import numpy as np
import pytest

from collective_cases import (COUNTS, DTYPES, ERROR_NETS, EVERY, MPI, NETS, RANK, SIZE, WORLD,
                              agree, check_bad_call, data, freed, mpi_type, network, same, sentinel,
                              v_counts, v_displs)
from collective_cases import free_networks  # noqa: F401 - frees the module's communicators

LAST = SIZE - 1


def _allgather(net, dtype, n, in_place):
    """Allgather ``n`` elements a rank (``in_place``: False, None or MPI.IN_PLACE)."""
    piece = data(dtype, n)
    mine, ref = sentinel(dtype, n * SIZE), sentinel(dtype, n * SIZE)
    send = piece
    if in_place is not False:
        mine[RANK * n:(RANK + 1) * n] = piece
        ref[RANK * n:(RANK + 1) * n] = piece
        send = in_place
    net.Allgather(send, mine)
    WORLD.Allgather(send if send is in_place else piece.copy(), ref)
    return same(mine, ref) and same(piece, data(dtype, n))


@pytest.mark.mpi
@pytest.mark.parametrize("index", NETS)
def test_allgather_matches_mpi(index):
    """Every dtype and count (0 included), and in place (``MPI.IN_PLACE`` and ``None``),
    equal MPI_Allgather."""
    net = network(index)
    problems = [(name, n) for name, dtype, n in EVERY if not _allgather(net, dtype, n, False)]
    for k, (name, dtype) in enumerate(DTYPES.items()):
        in_place = (MPI.IN_PLACE, None)[k % 2]
        n = COUNTS[k % len(COUNTS)]
        if not _allgather(net, dtype, n, in_place):
            problems.append((name, n, in_place))
    assert agree(not problems), problems


#: Allgatherv recvbuf forms: how every rank passes counts (and displacements).
V_FORMS = ("counts", "counts-displs", "counts-displs-datatype", "four-items", "datatype-only")


def _allgatherv(net, dtype, scale, seed, form, in_place=False):
    """Allgatherv once; True when it equals MPI_Allgatherv here (the gaps untouched)."""
    counts = v_counts(scale, seed) if scale else np.zeros(SIZE, np.int64)
    dt = mpi_type(dtype)
    if form in ("counts", "datatype-only"):
        if form == "datatype-only":  # mpi4py splits the buffer as evenly as it can
            total = int(counts.sum())
            counts = np.full(SIZE, total // SIZE, np.int64)
            counts[:total % SIZE] += 1
        displs, length = None, int(counts.sum())
        at = np.concatenate([[0], np.cumsum(counts)[:-1]])
    else:  # reverse rank order with gaps of one element
        displs, length = v_displs(counts, 1, range(SIZE - 1, -1, -1))
        at = displs
    piece = data(dtype, int(counts[RANK]), scale, seed)
    mine, ref = sentinel(dtype, length), sentinel(dtype, length)
    send = piece
    if in_place is not False:
        a = int(at[RANK])
        mine[a:a + piece.size] = piece
        ref[a:a + piece.size] = piece
        send = in_place

    def spec(buf):
        return {"counts": lambda: [buf, counts],
                "counts-displs": lambda: [buf, (counts, displs)],
                "counts-displs-datatype": lambda: [buf, (counts, displs), dt],
                "four-items": lambda: [buf, counts, displs, dt],
                "datatype-only": lambda: [buf, dt]}[form]()

    net.Allgatherv(send, spec(mine))
    WORLD.Allgatherv(send if send is in_place else piece.copy(), spec(ref))
    return same(mine, ref) and same(piece, data(dtype, piece.size, scale, seed))


@pytest.mark.mpi
@pytest.mark.parametrize("form", V_FORMS)
@pytest.mark.parametrize("index", NETS)
def test_allgatherv_matches_mpi(index, form):
    """Uneven counts (zeros included, all zero too) in every recvbuf form, every dtype, in
    place too, equal MPI_Allgatherv."""
    net = network(index)
    problems = []
    for k, (scale, seed) in enumerate(((0, 0), (1, 1), (9, 2), (300, 3))):
        name, dtype, _ = EVERY[(7 * V_FORMS.index(form) + 5 * k) % len(EVERY)]
        if not _allgatherv(net, dtype, scale, seed, form):
            problems.append((name, scale))
    for in_place in (MPI.IN_PLACE, None):
        if not _allgatherv(net, np.int16, 9, 4, form, in_place):
            problems.append(("in place", in_place))
    assert agree(not problems), problems


def _cases():
    """Bad calls: name -> (call(net), words, the bad rank, None for every rank alike, or
    "any": every rank an InputError of its own with ``words``).

    Sizes are ones no other test of this module uses: a signature a rank has already
    agreed on skips the check on that rank (a known limitation).
    """
    first = RANK == 0

    def allgatherv(counts, send_n=None):
        counts = np.asarray(counts)
        return lambda net: net.Allgatherv(
            np.zeros(int(counts[RANK]) if send_n is None else send_n),
            [np.zeros(int(counts.sum())), counts])

    return {
        "count-disagrees": (lambda net: net.Allgather(np.zeros(151 + first),
                                                      np.zeros((151 + first) * SIZE)),
                            "Allgather: ranks disagree on the piece size (from 1208 to 1216)",
                            None),
        "datatype-disagrees": (lambda net: net.Allgather(
            np.zeros(157, np.int64 if first else np.float64),
            np.zeros(157 * SIZE, np.int64 if first else np.float64)),
            "Allgather: ranks disagree on the datatype", None),
        "collective-disagrees": (lambda net: net.Allgather(np.zeros(163),
                                                           np.zeros(163 * SIZE)) if first else
                                 net.Alltoall(np.zeros(163 * SIZE), np.zeros(163 * SIZE)),
                                 "the ranks called different collectives", "any"),
        "send-recv-sizes": (lambda net: net.Allgather(np.zeros(167 + (RANK == LAST)),
                                                      np.zeros(167 * SIZE)),
                            "Allgather: recvbuf has 1336 bytes per rank, sendbuf 1344", LAST),
        "too-small-recvbuf": (lambda net: net.Allgather(
            np.zeros(173), [np.zeros(173 * SIZE - (RANK == LAST)), 173, MPI.DOUBLE]),
            "Allgather recvbuf: count 173", LAST),
        "not-committed": (lambda net: freed(MPI.INT.Create_contiguous(2), lambda t: net.Allgather(
            [np.zeros(2 * 179, np.int32), 179, t], np.zeros(2 * 179 * SIZE, np.int32))),
                          "Allgather sendbuf: MPI refuses the datatype", None),
        "v-counts-disagree": (allgatherv([3] * SIZE, 3 + (RANK == LAST)),
                              "Allgatherv: the ranks' sendbufs and recvcounts disagree", None),
        "v-datatype-disagrees": (lambda net: net.Allgatherv(
            np.zeros(4, np.int64 if RANK == LAST else np.float64),
            [np.zeros(4 * SIZE, np.int64 if RANK == LAST else np.float64), [4] * SIZE]),
            "Allgatherv: ranks disagree on the datatype", None),
        "v-collective-disagrees": (lambda net: allgatherv([5] * SIZE)(net) if first else
                                   net.Alltoallv([np.zeros(5 * SIZE), [5] * SIZE],
                                                 [np.zeros(5 * SIZE), [5] * SIZE]),
                                   "the ranks called different collectives", "any"),
        "v-too-small-recvbuf": (lambda net: net.Allgatherv(
            np.zeros(11), [np.zeros(11 * SIZE - (RANK == LAST)), [11] * SIZE]),
            "Allgatherv recvbuf: rank", LAST),
        "v-negative-count": (lambda net: net.Allgatherv(
            np.zeros(0), [np.zeros(SIZE), [-1 if RANK == LAST and r == 0 else 0
                                           for r in range(SIZE)]]),
            "Allgatherv recvbuf: negative count", LAST),
    }


@pytest.mark.mpi
@pytest.mark.parametrize("case", list(_cases()))
@pytest.mark.parametrize("index", ERROR_NETS)
def test_allgather_bad_calls(index, case):
    """A rank-divergent or invalid Allgather(v): one InputError on every rank (or the bad
    rank's own and "rejected on rank N" elsewhere); the communicator still works."""
    method = "Allgatherv" if case.startswith("v-") else "Allgather"
    check_bad_call(index, case, _cases(), method)
