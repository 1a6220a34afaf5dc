"""MPI tests of ``dualmpi.Comm.Scatter`` and ``Scatterv`` against ``MPI.COMM_WORLD``'s own.

Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi/test_coll_scatter_mpi.py``
at N = 1, 2, 4, 8, 32 or 64 (the networks: :data:`collective_cases.NETWORKS`).  Receive
buffers start as a sentinel, so bytes MPI leaves alone must stay so; every rank finishes
its communication, then the ranks agree on the verdict before asserting.
"""

import numpy as np
import pytest

from collective_cases import (ERROR_NETS, EVERY, MPI, NETS, RANK, ROOTS, SIZE, WORLD, agree,
                              check_bad_call, data, freed, mpi_type, network, rotation, same,
                              sentinel, v_counts, v_displs)
from collective_cases import free_networks  # noqa: F401 - frees the module's communicators

LAST = SIZE - 1


def _scatter(net, root, cases, in_place):
    """Scatter each case from ``root`` (``in_place``: None or MPI.IN_PLACE at the root)."""
    problems = []
    for name, dtype, n in cases:
        send = data(dtype, n * SIZE, root) if RANK == root else None
        if in_place is not False and RANK == root:
            mine = ref = in_place
        else:
            mine, ref = sentinel(dtype, n), sentinel(dtype, n)
        net.Scatter(send, mine, root=root)
        WORLD.Scatter(None if send is None else send.copy(), ref, root=root)
        ok = mine is in_place or same(mine, ref)
        if RANK == root:  # only read
            ok = ok and same(send, data(dtype, n * SIZE, root))
        if not ok:
            problems.append((name, n))
    return problems


@pytest.mark.mpi
@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize("index", NETS)
def test_scatter_matches_mpi(index, root):
    """Every count from every root, with buffers and in place at the root (``MPI.IN_PLACE``
    and ``None``), equals MPI_Scatter."""
    net = network(index)
    problems = _scatter(net, root, rotation(root), False)
    problems += _scatter(net, root, rotation(root + 1)[2:], MPI.IN_PLACE)
    problems += _scatter(net, root, rotation(root + 2)[1:2], None)
    assert agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("index", NETS)
def test_scatter_every_dtype(index):
    """Every dtype and count, from the last rank, equals MPI_Scatter."""
    problems = _scatter(network(index), LAST, EVERY, False)
    assert agree(not problems), problems


#: Scatterv sendbuf forms: how the root passes counts (and displacements).
V_FORMS = ("counts", "counts-displs", "counts-displs-datatype", "four-items", "datatype-only")


def _v_case(dtype, scale, seed, form, root):
    """Return ``(root's sendbuf spec or None, its array, recvbuf length, this rank's count)``."""
    counts = v_counts(scale, seed) if scale else np.zeros(SIZE, np.int64)
    dt = mpi_type(dtype)
    if form == "datatype-only":  # mpi4py splits the buffer as evenly as it can
        total = int(counts.sum())
        counts = np.full(SIZE, total // SIZE, np.int64)
        counts[:total % SIZE] += 1
        displs, length = None, total
    elif form == "counts":
        displs, length = None, int(counts.sum())
    else:  # reverse rank order with gaps of 2 elements
        displs, length = v_displs(counts, 2, range(SIZE - 1, -1, -1))
    send = data(dtype, length, scale, seed) if RANK == root else None
    spec = {"counts": lambda: [send, counts],
            "counts-displs": lambda: [send, (counts, displs)],
            "counts-displs-datatype": lambda: [send, (counts, displs), dt],
            "four-items": lambda: [send, counts, displs, dt],
            "datatype-only": lambda: [send, dt]}[form]() if RANK == root else None
    return spec, send, int(counts[RANK])


def _scatterv(net, root, dtype, scale, seed, form, in_place=False):
    """Scatterv once; True when it equals MPI_Scatterv here (spare receive bytes untouched)."""
    spec, send, mine_n = _v_case(dtype, scale, seed, form, root)
    ref_spec = None if spec is None else [send.copy()] + list(spec[1:])
    if in_place and RANK == root:
        mine = ref = MPI.IN_PLACE
        net.Scatterv(spec, MPI.IN_PLACE, root=root)
        WORLD.Scatterv(ref_spec, MPI.IN_PLACE, root=root)
        return same(send, data(dtype, send.size, scale, seed))
    mine, ref = sentinel(dtype, mine_n + 3), sentinel(dtype, mine_n + 3)
    net.Scatterv(spec, [mine, mine_n], root=root)
    WORLD.Scatterv(ref_spec, [ref, mine_n], root=root)
    ok = same(mine, ref)
    if RANK == root:
        ok = ok and same(send, data(dtype, send.size, scale, seed))
    return ok


@pytest.mark.mpi
@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize("index", NETS)
def test_scatterv_matches_mpi(index, root):
    """Uneven counts (zeros included, all zero too) in every sendbuf form, every root, in
    place at the root too, equal MPI_Scatterv."""
    net = network(index)
    problems = []
    names = list(EVERY)
    for k, (scale, seed) in enumerate(((0, 0), (1, 1), (9, 2), (300, 3))):
        name, dtype, _ = names[(7 * root + 5 * k) % len(names)]
        form = V_FORMS[(root + k) % len(V_FORMS)]
        if not _scatterv(net, root, dtype, scale, seed, form):
            problems.append((name, scale, form))
    if not _scatterv(net, root, np.int16, 9, 4, "counts-displs", in_place=True):
        problems.append("in place")
    assert agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("form", V_FORMS)
@pytest.mark.parametrize("index", NETS)
def test_scatterv_every_dtype(index, form):
    """Every dtype in every sendbuf form, from the last rank, equals MPI_Scatterv."""
    net = network(index)
    problems = [name for name, dtype, _ in EVERY[::4]
                if not _scatterv(net, LAST, dtype, 9, 5, form)]
    assert agree(not problems), problems


def _cases():
    """Bad calls: name -> (call(net), words, the bad rank, None for every rank alike, or
    "any": every rank an InputError of its own with ``words``).

    Sizes are ones no other test of this module uses: a signature a rank has already
    agreed on skips the check on that rank (a known limitation).
    """
    other = min(1, LAST)
    first = RANK == 0

    def scatter(n, root=0, recv_n=None):
        return lambda net: net.Scatter(np.zeros(n * SIZE) if RANK == root else None,
                                       np.zeros(n if recv_n is None else recv_n), root=root)

    def scatterv(counts, root=0, recv_n=None):
        counts = np.asarray(counts)
        return lambda net: net.Scatterv(
            [np.zeros(int(counts.sum())), counts] if RANK == root else None,
            np.zeros(int(counts[RANK]) if recv_n is None else recv_n), root=root)

    return {
        "root-disagrees": (lambda net: scatter(79, 0 if first else other)(net),
                           "Scatter: ranks disagree on the root (from 0 to 1)", None),
        "count-disagrees": (scatter(83, 0, 83 + (RANK == LAST)),
                            "Scatter: ranks disagree on the piece size (from 664 to 672)", None),
        "collective-disagrees": (lambda net: scatter(89)(net) if first else
                                 net.Gather(np.zeros(89), None, root=0),
                                 "the ranks called different collectives", "any"),
        "bad-root": (scatter(97, SIZE), f"bad root {SIZE}: the communicator has ranks "
                                        f"0..{LAST}", None),
        "too-small-sendbuf": (lambda net: net.Scatter(
            [np.zeros(101 * SIZE - 1), 101, MPI.DOUBLE] if RANK == LAST else None,
            np.zeros(101), root=LAST), "Scatter sendbuf: count 101",
            LAST),
        "too-small-recvbuf": (lambda net: net.Scatter(
            np.zeros(103 * SIZE) if first else None,
            [np.zeros(103 - (RANK == LAST)), 103, MPI.DOUBLE], root=0),
            "Scatter recvbuf: count 103 needs bytes [0, 824) of the buffer", LAST),
        "not-committed": (lambda net: freed(MPI.INT.Create_contiguous(3), lambda t: net.Scatter(
            None if RANK else np.zeros(3 * SIZE, np.int32), [np.zeros(3 * 107, np.int32), 107, t])),
                          "Scatter recvbuf: MPI refuses the datatype", None),
        "v-root-disagrees": (lambda net: scatterv([2] * SIZE, 0 if first else other)(net),
                             "Scatterv: ranks disagree on the root (from 0 to 1)", None),
        "v-counts-disagree": (scatterv([3] * SIZE, 0, 3 + (RANK == LAST)),
                              "Scatterv: the root's sendcounts and the ranks' recvbufs "
                              "disagree", None),
        "v-collective-disagrees": (lambda net: scatterv([5] * SIZE)(net) if first else
                                   net.Gatherv(np.zeros(5), None, root=0),
                                   "the ranks called different collectives", "any"),
        "v-bad-root": (scatterv([6] * SIZE, -2), "bad root -2", None),
        "v-counts-length": (lambda net: net.Scatterv(
            [np.zeros(7 * SIZE), [7] * (SIZE + 1)] if RANK == LAST else None, np.zeros(7),
            root=LAST), f"Scatterv sendbuf: counts has {SIZE + 1} items, expecting {SIZE}",
            LAST),
        "v-too-small-sendbuf": (lambda net: net.Scatterv(
            [np.zeros(11 * SIZE - 1), [11] * SIZE] if first else None, np.zeros(11), root=0),
            "Scatterv sendbuf: rank", 0),
        "v-datatype-null": (lambda net: net.Scatterv(
            [np.zeros(13 * SIZE), [13] * SIZE, None, MPI.DATATYPE_NULL] if first else None,
            np.zeros(13), root=0), "Scatterv sendbuf: the datatype is MPI.DATATYPE_NULL", 0),
    }


@pytest.mark.mpi
@pytest.mark.parametrize("case", list(_cases()))
@pytest.mark.parametrize("index", ERROR_NETS)
def test_scatter_bad_calls(index, case):
    """A rank-divergent or invalid Scatter(v): one InputError on every rank (or the bad
    rank's own and "rejected on rank N" elsewhere); the communicator still works."""
    method = "Scatterv" if case.startswith("v-") else "Scatter"
    check_bad_call(index, case, _cases(), method)
