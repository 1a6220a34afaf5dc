"""MPI tests of ``dualmpi.Comm.Gather`` and ``Gatherv`` against ``MPI.COMM_WORLD``'s own.

Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi/test_coll_gather_mpi.py``
at N = 1, 2, 4, 8, 32 or 64 (the networks: :data:`collective_cases.NETWORKS`).  The root's
receive buffer starts as a sentinel, so bytes MPI leaves alone (the gaps between pieces)
must stay so; every rank finishes its communication, then the ranks agree on the verdict.
"""

import numpy as np
import pytest

from collective_cases import (ERROR_NETS, EVERY, MPI, NETS, RANK, ROOTS, SIZE, WORLD, agree,
                              check_bad_call, data, freed, mpi_type, network, rotation, same,
                              sentinel, v_counts, v_displs)
from collective_cases import free_networks  # noqa: F401 - frees the module's communicators

LAST = SIZE - 1


def _gather(net, root, cases, in_place):
    """Gather each case at ``root`` (``in_place``: None or MPI.IN_PLACE as the root's sendbuf)."""
    problems = []
    for name, dtype, n in cases:
        piece = data(dtype, n, root)
        mine = ref = None
        if RANK == root:
            mine, ref = sentinel(dtype, n * SIZE), sentinel(dtype, n * SIZE)
        send = piece
        if in_place is not False and RANK == root:
            send = in_place
            mine[RANK * n:(RANK + 1) * n] = piece
            ref[RANK * n:(RANK + 1) * n] = piece
        net.Gather(send, mine, root=root)
        WORLD.Gather(send if send is in_place else piece.copy(), ref, root=root)
        if not ((RANK != root or same(mine, ref)) and same(piece, data(dtype, n, root))):
            problems.append((name, n))
    return problems


@pytest.mark.mpi
@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize("index", NETS)
def test_gather_matches_mpi(index, root):
    """Every count at every root, with buffers and in place at the root (``MPI.IN_PLACE``
    and ``None``), equals MPI_Gather; the other ranks' recvbuf is not read (None)."""
    net = network(index)
    problems = _gather(net, root, rotation(root), False)
    problems += _gather(net, root, rotation(root + 1)[2:], MPI.IN_PLACE)
    problems += _gather(net, root, rotation(root + 2)[1:2], None)
    assert agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("index", NETS)
def test_gather_every_dtype(index):
    """Every dtype and count, at the last rank, equals MPI_Gather."""
    problems = _gather(network(index), LAST, EVERY, False)
    assert agree(not problems), problems


#: Gatherv recvbuf forms: how the root passes counts (and displacements).
V_FORMS = ("counts", "counts-displs", "counts-displs-datatype", "four-items", "datatype-only")


def _gatherv(net, root, dtype, scale, seed, form, in_place=False):
    """Gatherv once; True when it equals MPI_Gatherv here (the gaps untouched)."""
    counts = v_counts(scale, seed) if scale else np.zeros(SIZE, np.int64)
    dt = mpi_type(dtype)
    if form == "datatype-only":  # mpi4py splits the buffer as evenly as it can
        total = int(counts.sum())
        counts = np.full(SIZE, total // SIZE, np.int64)
        counts[:total % SIZE] += 1
        displs, length = None, total
        at = np.concatenate([[0], np.cumsum(counts)[:-1]])
    elif form == "counts":
        displs, length = None, int(counts.sum())
        at = np.concatenate([[0], np.cumsum(counts)[:-1]])
    else:  # rotated rank order with gaps of 3 elements
        displs, length = v_displs(counts, 3, np.roll(np.arange(SIZE), root))
        at = displs
    piece = data(dtype, int(counts[RANK]), scale, seed)
    send = [np.concatenate([piece, data(dtype, 2, 9)]), int(counts[RANK])]  # spare elements
    mine = ref = None
    if RANK == root:
        mine, ref = sentinel(dtype, length), sentinel(dtype, length)
        if in_place:
            a = int(at[RANK])
            mine[a:a + piece.size] = piece
            ref[a:a + piece.size] = piece
            send = in_place

    def spec(buf):
        if buf is None:
            return None
        return {"counts": lambda: [buf, counts],
                "counts-displs": lambda: [buf, (counts, displs)],
                "counts-displs-datatype": lambda: [buf, (counts, displs), dt],
                "four-items": lambda: [buf, counts, displs, dt],
                "datatype-only": lambda: [buf, dt]}[form]()

    net.Gatherv(send, spec(mine), root=root)
    WORLD.Gatherv(send if send is in_place else [send[0].copy(), send[1]], spec(ref), root=root)
    return (RANK != root or same(mine, ref)) and same(piece, data(dtype, piece.size, scale, seed))


@pytest.mark.mpi
@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize("index", NETS)
def test_gatherv_matches_mpi(index, root):
    """Uneven counts (zeros included, all zero too) in every recvbuf form at every root, in
    place at the root too, equal MPI_Gatherv."""
    net = network(index)
    problems = []
    for k, (scale, seed) in enumerate(((0, 0), (1, 1), (9, 2), (300, 3))):
        name, dtype, _ = EVERY[(7 * root + 5 * k) % len(EVERY)]
        form = V_FORMS[(root + k) % len(V_FORMS)]
        if not _gatherv(net, root, dtype, scale, seed, form):
            problems.append((name, scale, form))
    if not _gatherv(net, root, np.int16, 9, 4, "counts-displs", in_place=MPI.IN_PLACE):
        problems.append("in place")
    assert agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("form", V_FORMS)
@pytest.mark.parametrize("index", NETS)
def test_gatherv_every_dtype(index, form):
    """Every dtype in every recvbuf form, at the last rank, equals MPI_Gatherv (None as the
    root's sendbuf too)."""
    net = network(index)
    problems = [name for name, dtype, _ in EVERY[::4]
                if not _gatherv(net, LAST, dtype, 9, 5, form)]
    if not _gatherv(net, LAST, np.float64, 9, 6, form, in_place=None):
        problems.append("None")
    assert agree(not problems), problems


def _cases():
    """Bad calls: name -> (call(net), words, the bad rank, None for every rank alike, or
    "any": every rank an InputError of its own with ``words``).

    Sizes are ones no other test of this module uses: a signature a rank has already
    agreed on skips the check on that rank (a known limitation).
    """
    other = min(1, LAST)
    first = RANK == 0

    def gather(n, root=0, send_n=None):
        return lambda net: net.Gather(np.zeros(n if send_n is None else send_n),
                                      np.zeros(n * SIZE) if RANK == root else None, root=root)

    def gatherv(counts, root=0, send_n=None):
        counts = np.asarray(counts)
        return lambda net: net.Gatherv(
            np.zeros(int(counts[RANK]) if send_n is None else send_n),
            [np.zeros(int(counts.sum())), counts] if RANK == root else None, root=root)

    return {
        "root-disagrees": (lambda net: gather(109, 0 if first else other)(net),
                           "Gather: ranks disagree on the root (from 0 to 1)", None),
        "count-disagrees": (gather(113, 0, 113 + (RANK == LAST)),
                            "Gather: ranks disagree on the piece size (from 904 to 912)", None),
        "collective-disagrees": (lambda net: gather(127)(net) if first else
                                 net.Allgather(np.zeros(127), np.zeros(127 * SIZE)),
                                 "the ranks called different collectives", "any"),
        "bad-root": (gather(131, SIZE), f"bad root {SIZE}: the communicator has ranks "
                                        f"0..{LAST}", None),
        "too-small-recvbuf": (lambda net: net.Gather(
            np.zeros(137), [np.zeros(137 * SIZE - 1), 137, MPI.DOUBLE] if RANK == LAST
            else None, root=LAST), "Gather recvbuf: count 137", LAST),
        "too-small-sendbuf": (lambda net: net.Gather(
            [np.zeros(139 - (RANK == LAST)), 139, MPI.DOUBLE],
            np.zeros(139 * SIZE) if first else None, root=0),
            "Gather sendbuf: count 139 needs bytes [0, 1112) of the buffer", LAST),
        "not-committed": (lambda net: freed(MPI.INT.Create_contiguous(3), lambda t: net.Gather(
            [np.zeros(3 * 149, np.int32), 149, t],
            None if RANK else np.zeros(3 * 149 * SIZE, np.int32))),
                          "Gather sendbuf: MPI refuses the datatype", None),
        "v-root-disagrees": (lambda net: gatherv([2] * SIZE, 0 if first else other)(net),
                             "Gatherv: ranks disagree on the root (from 0 to 1)", None),
        "v-counts-disagree": (gatherv([3] * SIZE, 0, 3 + (RANK == LAST)),
                              "Gatherv: the ranks' sendbufs and the root's recvcounts "
                              "disagree", None),
        "v-datatype-disagrees": (lambda net: net.Gatherv(
            np.zeros(4, np.int64 if RANK == LAST else np.float64),
            [np.zeros(4 * SIZE), [4] * SIZE] if first else None, root=0),
            "Gatherv: ranks disagree on the datatype", None),
        "v-collective-disagrees": (lambda net: gatherv([5] * SIZE)(net) if first else
                                   net.Allgatherv(np.zeros(5), [np.zeros(5 * SIZE), [5] * SIZE]),
                                   "the ranks called different collectives", "any"),
        "v-bad-root": (gatherv([6] * SIZE, SIZE + 3), f"bad root {SIZE + 3}", None),
        "v-displs-length": (lambda net: net.Gatherv(
            np.zeros(7), [np.zeros(7 * SIZE), ([7] * SIZE, [0] * (SIZE + 2))] if RANK == LAST
            else None, root=LAST), f"Gatherv recvbuf: displs has {SIZE + 2} items, expecting "
                                   f"{SIZE}", LAST),
        "v-too-small-recvbuf": (lambda net: net.Gatherv(
            np.zeros(11), [np.zeros(11 * SIZE - 1), [11] * SIZE] if first else None, root=0),
            "Gatherv recvbuf: rank", 0),
        "v-not-committed": (lambda net: freed(MPI.DOUBLE.Create_vector(2, 1, 2), lambda t:
                                              net.Gatherv(
            np.zeros(2 * 13), [np.zeros(4 * 13 * SIZE), [13] * SIZE, None, t] if first else None,
            root=0)), "Gatherv recvbuf: MPI refuses the datatype", 0),
    }


@pytest.mark.mpi
@pytest.mark.parametrize("case", list(_cases()))
@pytest.mark.parametrize("index", ERROR_NETS)
def test_gather_bad_calls(index, case):
    """A rank-divergent or invalid Gather(v): one InputError on every rank (or the bad
    rank's own and "rejected on rank N" elsewhere); the communicator still works."""
    method = "Gatherv" if case.startswith("v-") else "Gather"
    check_bad_call(index, case, _cases(), method)
