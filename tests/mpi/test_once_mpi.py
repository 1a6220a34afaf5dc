"""A call whose sizes are new runs its plan once, without a runner (``Engine.once``).

A program whose counts change on every call (a sample sort's ``Alltoallv``, mpi4py's object
collectives on pickles of changing sizes) used to make a runner for every call: the plan bound
to the table's sizes, persistent requests, the compiled loop's tables; so did a fixed-count
call of a size never seen (an object ``bcast``).  Now such a call sends
its plan's messages from the plan's shape and the call's sizes (``dualmpi.engine.once``); its
first repeat makes the runner.  Checked against MPI's own calls on the same buffers (gaps
untouched), with the runners made counted; against a rank that runs the same call on a runner
(the bytes on the wire must be the same); and in the statistics, which must equal those of the
runners' calls.  Every rank finishes its calls before the ranks agree on the verdict.
"""

import numpy as np
import pytest
from mpi4py import MPI

from collective_cases import NETS, RANK, SIZE, WORLD, agree, data, fresh, same, sentinel
from dualmpi.engine import core, mpi as engine_mpi

pytestmark = pytest.mark.mpi

#: Calls per method, each with counts no call had before.
CALLS = 4


def _counts(i, unit):
    """Per rank the elements rank ``RANK`` sends it in call ``i`` (rank- and call-dependent,
    zero now and then)."""
    return [((RANK + 2 * j + 3 * i) % 7) * unit for j in range(SIZE)]


def _calls(net, i, unit, ops=("sum",)):
    """Call ``i`` of every v-variant on ``net`` and on WORLD, new counts each, and of the
    fixed-count collectives, a new size each; True when every result equals MPI's (the gaps
    of the receive buffers untouched)."""
    ok = True
    gap = 3
    # Alltoallv: rank a sends _counts(i)[b] doubles to b, b receives them
    sc = _counts(i, unit)
    rc = WORLD.alltoall(sc)
    sd = [int(sum(sc[:j])) + gap * j for j in range(SIZE)]
    rd = [int(sum(rc[:j])) + gap * j for j in range(SIZE)]
    send = data(np.float64, sd[-1] + sc[-1] + gap, i)
    got, want = (sentinel(np.float64, rd[-1] + rc[-1] + gap) for _ in range(2))
    net.Alltoallv([send, sc, sd, MPI.DOUBLE], [got, rc, rd, MPI.DOUBLE])
    WORLD.Alltoallv([send, sc, sd, MPI.DOUBLE], [want, rc, rd, MPI.DOUBLE])
    ok = ok and same(got, want)
    # Allgatherv, Gatherv, Scatterv: rank j's piece has c[j] elements
    c = [((j + 2 * i) % 7) * unit + (j % 2) for j in range(SIZE)]
    d = [int(sum(c[:j])) + gap * j for j in range(SIZE)]
    total = d[-1] + c[-1] + gap
    mine = data(np.float64, c[RANK], i, 1)
    got, want = (sentinel(np.float64, total) for _ in range(2))
    net.Allgatherv(mine, [got, c, d, MPI.DOUBLE])
    WORLD.Allgatherv(mine, [want, c, d, MPI.DOUBLE])
    ok = ok and same(got, want)
    root = i % SIZE
    got, want = (sentinel(np.float64, total) for _ in range(2))
    net.Gatherv(mine, [got, c, d, MPI.DOUBLE], root=root)
    WORLD.Gatherv(mine, [want, c, d, MPI.DOUBLE], root=root)
    ok = ok and (RANK != root or same(got, want))
    whole = data(np.float64, total, i, 2)
    got, want = (sentinel(np.float64, c[RANK] + gap) for _ in range(2))
    net.Scatterv([whole, c, d, MPI.DOUBLE], [got, c[RANK], MPI.DOUBLE], root=root)
    WORLD.Scatterv([whole, c, d, MPI.DOUBLE], [want, c[RANK], MPI.DOUBLE], root=root)
    ok = ok and same(got, want)
    # in place (the rank's piece already where it goes), and a derived datatype (every other
    # double of a vector: packed, then run once); counts no Allgatherv of another round has
    # (a call whose counts are the last call's runs that plan beside its table: speculation)
    for shift, derived in ((10, False), (20, True)):
        ci = [x + shift * unit for x in c]
        di = [int(sum(ci[:j])) + gap * j for j in range(SIZE)]
        n = (2 if derived else 1) * (di[-1] + ci[-1] + gap)
        got, want = (sentinel(np.float64, n) for _ in range(2))
        if derived:  # (an element of the send type: 2 doubles out of 3)
            wide = data(np.float64, 3 * ci[RANK], i, 5)
            spec = ([2 * x for x in ci], [2 * x for x in di])
            net.Allgatherv([wide, ci[RANK], _PAIRS], [got, *spec, MPI.DOUBLE])
            WORLD.Allgatherv([wide, ci[RANK], _PAIRS], [want, *spec, MPI.DOUBLE])
        else:
            for out in (got, want):
                out[di[RANK]:di[RANK] + ci[RANK]] = data(np.float64, ci[RANK], i, 6)
            net.Allgatherv(MPI.IN_PLACE, [got, ci, di, MPI.DOUBLE])
            WORLD.Allgatherv(MPI.IN_PLACE, [want, ci, di, MPI.DOUBLE])
        ok = ok and same(got, want)
    # fixed-count calls of a size no call had before (below ZERO_COPY_ABOVE: a repeat of
    # a larger one binds its buffers)
    k = 1 + (3 * i + 1) % 7 * min(unit, 60)
    x = data(np.float64, k * SIZE, i, 4)
    for name in ("Bcast", "Allgather", "Alltoall", "Gather", "Scatter", "Allreduce", "Reduce",
                 "Scan"):
        got, want = (sentinel(np.float64, k * SIZE) for _ in range(2))
        for comm, out in ((net, got), (WORLD, want)):
            if name == "Bcast":
                out[:k] = x[:k] if RANK == root else out[:k]
                comm.Bcast([out, k, MPI.DOUBLE], root=root)
            elif name in ("Allgather", "Gather"):
                args = ([x, k, MPI.DOUBLE], [out, k, MPI.DOUBLE])
                comm.Allgather(*args) if name == "Allgather" else comm.Gather(*args, root=root)
            elif name == "Alltoall":
                comm.Alltoall(x, out)
            elif name == "Scatter":
                comm.Scatter(x, [out, k, MPI.DOUBLE], root=root)
            elif name == "Reduce":
                comm.Reduce([x, k, MPI.DOUBLE], [out, k, MPI.DOUBLE], op=MPI.SUM, root=root)
            else:
                getattr(comm, name)([x, k, MPI.DOUBLE], [out, k, MPI.DOUBLE], op=MPI.SUM)
        ok = ok and (name in ("Gather", "Reduce") and RANK != root or np.allclose(got, want))
    # Reduce_scatter: MPI's own SUM (combined in C) or a user's operation (in Python)
    for name in ops:
        op = MPI.SUM if name == "sum" else _MAX_OF_ABS
        vec = data(np.float64, sum(c), i, 3)
        got, want = (sentinel(np.float64, c[RANK] + gap) for _ in range(2))
        net.Reduce_scatter(vec, [got, c[RANK], MPI.DOUBLE], c, op=op)
        WORLD.Reduce_scatter(vec, [want, c[RANK], MPI.DOUBLE], c, op=op)
        ok = ok and np.allclose(got, want)
    return ok


#: Two doubles of every other one (a derived datatype that packs).
_PAIRS = MPI.DOUBLE.Create_vector(2, 1, 2).Commit()


def _max_of_abs(a, b, datatype):
    x = np.frombuffer(a, dtype=np.float64)
    y = np.frombuffer(b, dtype=np.float64)
    y[:] = np.maximum(np.abs(x), np.abs(y))


_MAX_OF_ABS = MPI.Op.Create(_max_of_abs, commute=True)


@pytest.fixture
def made(monkeypatch):
    """A list the runners made from now on are appended to (their collectives)."""
    out = []
    init = engine_mpi.MPIRunner.__init__

    def counted(self, transport, bound, plan, *args, **kwargs):
        out.append(getattr(plan, "collective", "?"))
        init(self, transport, bound, plan, *args, **kwargs)
    monkeypatch.setattr(engine_mpi.MPIRunner, "__init__", counted)
    return out


@pytest.mark.parametrize("unit", [1, 700], ids=["small", "apart"])
@pytest.mark.parametrize("index", NETS)
def test_new_count_tables_run_without_a_runner(index, unit, made):
    """Four calls of each v-variant with counts no call had before, and of the fixed-count
    collectives with a size no call had before: every result is MPI's, and from the third
    round on (the second's speculative run made the last plan's runner once: a program whose
    counts change stops speculating) no call made a runner where the compiled loop runs — but
    a user's operation, which combines in Python between runs of a runner.  ``apart``: blocks
    of up to 22 KiB, whose payloads travel apart from their trailers."""
    net = fresh(index)
    try:
        ok = True
        for i in range(CALLS):
            if i == 2:
                made.clear()
            ok = _calls(net, i, unit, ops=("sum", "user")) and ok
        compiled = net._transport.cloop is not None and \
            getattr(net._transport.cloop, "dualmpi_once", None) is not None
        if compiled:
            # (the user's operation: a runner per call; nothing else)
            ok = ok and all(c == "reduce_scatter" for c in made) and len(made) == CALLS - 2
    finally:
        net.Free()
    assert agree(ok), made


@pytest.mark.parametrize("unit", [1, 700], ids=["small", "apart"])
@pytest.mark.parametrize("index", NETS)
def test_calls_run_once_meet_calls_run_on_runners(index, unit, monkeypatch):
    """Odd ranks run every call on a runner (``Engine.once`` declines there), even ranks run
    it once: the messages are the same bytes, so every result is still MPI's."""
    if RANK % 2:
        monkeypatch.setattr(core.Engine, "once", lambda self, *a, **k: False)
    net = fresh(index)
    try:
        ok = all([_calls(net, i, unit) for i in range(CALLS)])
    finally:
        net.Free()
    assert agree(ok)


@pytest.mark.parametrize("index", NETS)
def test_calls_run_once_count_as_a_runners(index, monkeypatch):
    """The statistics of calls run once (messages and bytes per link, rounds, steps, step
    bytes, collectives) equal those of the same calls run on runners."""
    stats = []
    for once in (True, False):
        if not once:
            monkeypatch.setattr(core.Engine, "once", lambda self, *a, **k: False)
        net = fresh(index)
        try:
            for i in range(2):
                _calls(net, i, 1)
            stats.append(net.stats())
        finally:
            net.Free()
    ok = stats[0] == stats[1] and stats[0]["collectives"] > 0
    assert agree(ok), stats


@pytest.mark.parametrize("index", NETS)
def test_calls_past_the_scratch_limit_make_their_runners(index, made, monkeypatch):
    """A call that would need more scratch than ``once.ONCE_BYTES`` (made 0 here) makes its
    runner, as before: every call of a new size makes one, and every result is MPI's."""
    from dualmpi.engine import once

    monkeypatch.setattr(once, "ONCE_BYTES", 0)
    net = fresh(index)
    try:
        ok = all([_calls(net, i, 1) for i in range(3)])
        compiled = getattr(net._transport.cloop, "dualmpi_once", None) is not None
        ok = ok and (not compiled or {"alltoallv", "bcast", "reduce_scatter"} <= set(made))
    finally:
        net.Free()
    assert agree(ok), made


@pytest.mark.parametrize("index", NETS)
def test_a_message_of_another_call_stops_a_call_run_once(index, monkeypatch):
    """The last rank's calls run once under another signature (its salt changed): every rank
    that receives one of its messages fails in the call or its next, naming a message of
    another call, no rank is left waiting (the watchdog), and no receive buffer is written (a
    call run once copies its blocks out only when every trailer carried its signature)."""
    from dualmpi.errors import DualmpiError

    if SIZE < 2:
        pytest.skip("one rank: no message")
    if RANK == SIZE - 1:
        real = core.Engine.once
        monkeypatch.setattr(core.Engine, "once", lambda self, *a, **k: real(
            self, *a, **dict(k, salt=k.get("salt", 0) + 1)))
    net = fresh(index)
    errs, untouched = [], True
    try:
        for i in range(2):
            sc = _counts(i, 1)
            rc = WORLD.alltoall(sc)
            send = data(np.float64, sum(sc), i)
            got = sentinel(np.float64, sum(rc) + 3)
            try:
                net.Alltoallv([send, sc, MPI.DOUBLE], [got, rc, MPI.DOUBLE])
                errs.append(None)
            except DualmpiError as exc:
                errs.append(str(exc))
            untouched = untouched and same(got, sentinel(np.float64, got.size))
    finally:
        net.Free()
    first = next((e for e in errs if e is not None), None)
    ok = first is not None and ("another call" in first or "unusable" in first) and untouched
    assert agree(ok), errs
