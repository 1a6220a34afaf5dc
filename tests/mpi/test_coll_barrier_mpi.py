"""MPI tests of ``dualmpi.Comm.Barrier``: it synchronises the ranks, and over the links.

Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi/test_coll_barrier_mpi.py``
at N = 1, 2, 4, 8, 32 or 64 (the networks: :data:`collective_cases.NETWORKS`).  Open MPI's
``MPI.Wtime`` counts from each process's start (``MPI.WTIME_IS_GLOBAL`` is 0), so each
rank puts its ``MPI.Wtime`` readings on the host's one clock (``time.time``, read with
it) before the ranks compare them.  Every rank finishes its communication, then the ranks
agree on the verdict.
"""

import time

import numpy as np
import pytest

from collective_cases import (ERROR_NETS, MPI, NETS, RANK, SIZE, WORLD, agree, data, expect_error,
                              fresh, network)
from collective_cases import free_networks  # noqa: F401 - frees the module's communicators
from dualmpi.collectives import build_schedule

LAST = SIZE - 1
#: Seconds the late rank sleeps before entering the barrier.
LATE = 0.3
#: Seconds a rank's readings may be off on the host's clock: ``time.time()`` and
#: ``MPI.Wtime()`` are read one after the other, not at once (CI run 55 saw a rank leave
#: "0.0000 s" before the late one entered, the two within 50 µs).  A rank leaving early would
#: leave about LATE before.
SLACK = 1e-3


@pytest.mark.mpi
@pytest.mark.parametrize("late", [0, LAST], ids=["rank0-late", "last-rank-late"])
@pytest.mark.parametrize("index", NETS)
def test_barrier_synchronises(index, late):
    """The late rank enters 0.3 s after the others: no rank leaves before it entered."""
    if late == LAST and index != 0:
        pytest.skip("the last rank late: on the first network only")
    net = network(index)
    net.Barrier()  # warm: the plan is built, the ranks are together
    offset = time.time() - MPI.Wtime()
    if RANK == late:
        time.sleep(LATE)
    entered = MPI.Wtime()
    net.Barrier()
    left = MPI.Wtime()
    times = WORLD.allgather((entered + offset, left + offset))  # on the host's clock
    late_entry = times[late][0]
    early = [(r, round(late_entry - t_left, 4)) for r, (_, t_left) in enumerate(times)
             if t_left < late_entry - SLACK]
    assert agree(not early), early


@pytest.mark.mpi
@pytest.mark.parametrize("index", NETS)
def test_barrier_moves_messages_over_links(index):
    """A Barrier sends messages, each on a link leaving one of this rank's nodes; with one
    node per rank, exactly the barrier schedule's messages."""
    net = network(index)
    topo, q = net.topology, net.q
    net.reset_stats()
    net.Barrier()
    st = net.stats()
    total = WORLD.allreduce(st["messages"])
    problems = []
    if st["collectives"] != 1:
        problems.append(("collectives", st["collectives"]))
    bad = [link for link in st["links"] if not (link[0] in net.nodes and topo.is_link(*link))]
    if bad:
        problems.append(("not a link of this rank's nodes", bad))
    if topo.num_nodes > 1 and total <= 0:
        problems.append(("no messages", total))
    if q == 1:
        sched = build_schedule("barrier", topo, 0)
        if total != sched.num_messages:
            problems.append(("messages", total, sched.num_messages))
    net.Barrier()
    if net.stats()["messages"] != 2 * st["messages"]:
        problems.append(("second barrier", net.stats()["messages"], st["messages"]))
    assert agree(not problems), problems


@pytest.mark.mpi
@pytest.mark.parametrize("index", NETS)
def test_barrier_between_other_collectives(index):
    """Barriers between collectives leave their results those of MPI."""
    net = network(index)
    send = data(np.int64, 3 * SIZE, 1)
    mine, ref = np.zeros(3 * SIZE, np.int64), np.zeros(3 * SIZE, np.int64)
    net.Barrier()
    net.Alltoall(send, mine)
    net.Barrier()
    net.Barrier()
    WORLD.Alltoall(send, ref)
    assert agree(np.array_equal(mine, ref))


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("other", ["Bcast", "Allreduce"])
@pytest.mark.parametrize("index", ERROR_NETS)
def test_barrier_against_another_collective(index, other):
    """Rank 0 calls Barrier while the others call another collective: an InputError on
    every rank; the communicator still works.

    On a new communicator: a Barrier has one signature, agreed once, and a rank that has
    agreed on it skips the check (a known limitation, see ``collective_cases.fresh``).
    """
    net = fresh(index)
    calls = {"Bcast": lambda: net.Bcast(np.zeros(431), root=0),
             "Allreduce": lambda: net.Allreduce(np.zeros(433), np.zeros(433))}
    try:
        ok, errs = expect_error(net, lambda: net.Barrier() if RANK == 0 else calls[other](),
                                "the ranks called different collectives", alike=False)
    finally:
        net.Free()
    assert ok, errs
