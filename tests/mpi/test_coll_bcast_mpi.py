"""MPI tests of ``dualmpi.Comm.Bcast`` against ``MPI.COMM_WORLD.Bcast`` on the same buffers.

Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi/test_coll_bcast_mpi.py``
at N = 1, 2, 4, 8, 32 or 64 (the networks: :data:`collective_cases.NETWORKS`).  Every rank
finishes its communication, then the ranks agree on the verdict before asserting.
"""

import numpy as np
import pytest

from collective_cases import (ERROR_NETS, EVERY, MPI, NETS, RANK, ROOTS, SIZE, WORLD, agree,
                              check_bad_call, data, freed, network, rotation, same)
from collective_cases import free_networks  # noqa: F401 - frees the module's communicators

LAST = SIZE - 1


def _check(net, root, cases):
    """Bcast each ``(dtype id, dtype, count)`` from ``root``; return the cases that differ."""
    problems = []
    for name, dtype, n in cases:
        mine = data(dtype, n, root)
        ref = mine.copy()
        net.Bcast(mine, root=root)
        WORLD.Bcast(ref, root=root)
        if not same(mine, ref) or (RANK == root and not same(mine, data(dtype, n, root))):
            problems.append((name, n))
    return problems


@pytest.mark.mpi
@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize("index", NETS)
def test_bcast_matches_mpi(index, root):
    """Every count (0 included) from every root equals MPI_Bcast; the root's buffer is only
    read."""
    problems = _check(network(index), root, rotation(root))
    assert agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("index", NETS)
def test_bcast_every_dtype(index):
    """Every dtype and count, from the last rank, equals MPI_Bcast."""
    problems = _check(network(index), LAST, EVERY)
    assert agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("index", NETS)
def test_bcast_pipelined_and_shaped(index):
    """A block above 256 KiB (cut into pieces by default) and a 2-D Fortran-ordered array."""
    net = network(index)
    big = data(np.float64, 40000, 1)
    ref = big.copy()
    net.Bcast(big, root=LAST)
    WORLD.Bcast(ref, root=LAST)
    grid = np.asfortranarray(data(np.int32, 12, 2).reshape(3, 4))
    want = grid.copy(order="F")
    net.Bcast(grid, root=0)
    WORLD.Bcast(want, root=0)
    assert agree(same(big, ref) and same(grid, want) and grid.flags.f_contiguous)


def _cases():
    """Bad calls: name -> (call(net), words, the bad rank or None for every rank alike).

    Sizes are ones no other test of this module uses: a signature a rank has already
    agreed on skips the check on that rank (a known limitation).
    """
    other = min(1, LAST)
    first = RANK == 0
    cases = {
        "root-disagrees": (lambda net: net.Bcast(np.zeros(41), root=0 if first else other),
                           "Bcast: ranks disagree on the root (from 0 to 1)", None),
        "count-disagrees": (lambda net: net.Bcast(np.zeros(43 + first), root=0),
                            "Bcast: ranks disagree on the message size (from 344 to 352)", None),
        "datatype-disagrees": (lambda net: net.Bcast(np.zeros(47, np.int64 if first
                                                               else np.float64), root=0),
                               "Bcast: ranks disagree on the datatype", None),
        "collective-disagrees": (lambda net: net.Bcast(np.zeros(53), root=0) if first else
                                 net.Allgather(np.zeros(53), np.zeros(53 * SIZE)),
                                 "the ranks called different collectives", "any"),
        "bad-root": (lambda net: net.Bcast(np.zeros(59), root=SIZE),
                     f"bad root {SIZE}: the communicator has ranks 0..{LAST}", None),
        "bad-root-one-rank": (lambda net: net.Bcast(np.zeros(61), root=-1 if RANK == LAST
                                                    else 0),
                              "bad root -1", LAST),
        "too-small-buffer": (lambda net: net.Bcast([np.zeros(67 - 3 * (RANK == LAST)), 67,
                                                    MPI.DOUBLE], root=0),
                             "Bcast buf: count 67 needs bytes [0, 536) of the buffer, which "
                             "has 512 bytes", LAST),
        "not-committed": (lambda net: freed(MPI.INT.Create_contiguous(3), lambda t: net.Bcast(
            [np.zeros(71, np.int32), 1, t], root=0)),
                          "Bcast buf: MPI refuses the datatype", None),
        "datatype-null": (lambda net: net.Bcast([np.zeros(73), 1, MPI.DATATYPE_NULL], root=0),
                          "Bcast buf: the datatype is MPI.DATATYPE_NULL", None),
    }
    return cases


@pytest.mark.mpi
@pytest.mark.parametrize("case", list(_cases()))
@pytest.mark.parametrize("index", ERROR_NETS)
def test_bcast_bad_calls(index, case):
    """A rank-divergent or invalid Bcast: one InputError on every rank (or the bad rank's
    own and "rejected on rank N" elsewhere); the communicator still works."""
    check_bad_call(index, case, _cases(), "Bcast")
