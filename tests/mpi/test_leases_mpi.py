"""A plan the engine drops from its cache ends the memory of the calls that run it, and no other.

``dualmpi.Comm`` remembers a repeated call with the runners it runs (``Engine.lease``): the
engine's cache keeps ``CACHE_SIZE`` plans, and a program whose calls need more (a count
table never seen, on every call of a sample sort's ``Alltoallv``) turns it over.  A
remembered call whose own runners are still there must repeat from memory all the same; one
whose runner was dropped must be read afresh and still equal MPI's result.  The cache is made
small here (``CACHE_SIZE`` 16) so that a few calls turn it over at every rank count; every
rank finishes its calls, then the ranks agree on the verdict (``full_calls``: conftest.py).
"""

import numpy as np
import pytest

from collective_cases import NETS, RANK, SIZE, WORLD, agree, fresh
from dualmpi.engine import core

pytestmark = pytest.mark.mpi

#: The engine's cache in these tests (plans).
SMALL = 16


@pytest.fixture
def small_cache(monkeypatch):
    """The engine keeps :data:`SMALL` plans."""
    monkeypatch.setattr(core, "CACHE_SIZE", SMALL)


def _fill(net, n):
    """Make ``n`` plans the calls below do not run (an ``Allgather`` of each size)."""
    for k in range(1, n + 1):
        net.Allgather(np.full(k, RANK, dtype=np.uint8), np.zeros(k * SIZE, dtype=np.uint8))


def _fresh_alltoallv(net, i):
    """An ``Alltoallv`` with a count table no call had before (``i + 1`` bytes a pair), beside
    WORLD's own; True when the results are equal."""
    counts = [i + 1] * SIZE
    send = (np.arange((i + 1) * SIZE) + RANK).astype(np.uint8)
    got, want = np.zeros_like(send), np.zeros_like(send)
    net.Alltoallv([send, counts], [got, counts])
    WORLD.Alltoallv([send, counts], [want, counts])
    return np.array_equal(got, want)


@pytest.mark.parametrize("index", NETS)
def test_a_remembered_call_outlives_plans_it_does_not_run(index, small_cache, full_calls):
    """A repeated ``Allreduce`` beside an ``Alltoallv`` whose count table is new every call:
    each new table's plan drops an older plan from the full cache, never the ``Allreduce``'s
    (a remembered call's: held by its lease), so from the sixth round on, for three times as
    many new plans as the cache keeps, the ``Allreduce`` never takes the full path (every
    round did while any plan dropped ended every remembered call; once every 16 rounds while
    the cache dropped the least recently made plan whoever held it)."""
    net = fresh(index)
    try:
        _fill(net, SMALL)
        x = np.arange(600, dtype=np.float64) * (RANK + 1)  # 4.8 KB: bound to its buffers
        y, z = np.zeros_like(x), np.zeros_like(x)
        ok, rounds = True, 6 + 3 * SMALL
        for i in range(rounds):
            if i == 6:
                full_calls.clear()
            net.Allreduce(x, y)
            WORLD.Allreduce(x, z)
            ok &= np.array_equal(y, z)
            ok &= _fresh_alltoallv(net, i)
        ok &= "Allreduce" not in full_calls and full_calls.get("Alltoallv") == rounds - 6
    finally:
        net.Free()
    assert agree(ok)


@pytest.mark.parametrize("index", NETS)
def test_calls_alternating_with_a_full_cache_settle(index, small_cache, full_calls):
    """``Gatherv`` and ``Scatterv`` of 4 KiB blocks alternating (each bound to its buffers on
    its first repeat, a new plan that drops an older one) settle: after six rounds, six more
    take the full path for neither (each dropped the other's memory for ever before)."""
    net = fresh(index)
    try:
        _fill(net, SMALL)
        b, root = 4096, SIZE - 1
        counts = [b] * SIZE
        gs = np.full(b, RANK + 1, dtype=np.uint8)
        gr, gw = np.zeros(b * SIZE, dtype=np.uint8), np.zeros(b * SIZE, dtype=np.uint8)
        ss = (np.arange(b * SIZE) * (RANK + 3)).astype(np.uint8)
        sr, sw = np.zeros(b, dtype=np.uint8), np.zeros(b, dtype=np.uint8)
        ok = True
        for i in range(12):
            if i == 6:
                full_calls.clear()
            net.Gatherv(gs, [gr, counts], root)
            WORLD.Gatherv(gs, [gw, counts], root)
            net.Scatterv([ss, counts], sr, root)
            WORLD.Scatterv([ss, counts], sw, root)
            ok &= np.array_equal(gr, gw) and np.array_equal(sr, sw)
        ok &= not full_calls
    finally:
        net.Free()
    assert agree(ok)


@pytest.mark.parametrize("index", NETS)
@pytest.mark.parametrize("method", ["Allreduce", "Allgatherv"])
def test_a_call_whose_plan_was_dropped_is_read_afresh(index, method, small_cache, full_calls,
                                                      monkeypatch):
    """A remembered call (3 calls) whose runner the engine then drops takes the full path
    once more, and its result still equals MPI's; and a runner a remembered call holds is
    dropped only when no other is left to drop (a cache of one plan here, one new plan)."""
    net = fresh(index)
    try:
        x = np.arange(8 * SIZE, dtype=np.float64) + RANK
        if method == "Allreduce":
            y, z = np.zeros_like(x), np.zeros_like(x)

            def run(comm, out):
                comm.Allreduce(x, out)
        else:
            counts = [8 * (r + 1) for r in range(SIZE)]
            y, z = np.zeros(sum(counts)), np.zeros(sum(counts))
            mine = x[:counts[RANK]]

            def run(comm, out):
                comm.Allgatherv(mine, [out, counts])
        ok = True
        for _ in range(3):
            run(net, y)
        full_calls.clear()
        run(net, y)
        ok &= method not in full_calls  # (remembered)
        _fill(net, SMALL + 2)  # (the cache turned over: the remembered runner kept)
        run(net, y)
        ok &= method not in full_calls
        monkeypatch.setattr(core, "CACHE_SIZE", 1)
        _fill(net, 1)  # (every runner dropped but the new one)
        monkeypatch.setattr(core, "CACHE_SIZE", SMALL)
        y[:] = -1
        run(net, y)
        run(WORLD, z)
        ok &= full_calls.get(method) == 1 and np.array_equal(y, z)
    finally:
        net.Free()
    assert agree(ok)
