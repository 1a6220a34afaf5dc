"""MPI tests of the small sends the compiled loop makes with ``MPI_Isend``
(``dualmpi.engine.mpi.IMMEDIATE``).

A blocking plan's message of at most ``IMMEDIATE`` bytes (its trailer included) leaves with
``MPI_Isend`` instead of its persistent request's ``MPI_Start``: Open MPI sends a message
that small straight into the receiver's queue from ``MPI_Isend`` only.  Results are compared
with ``MPI.COMM_WORLD``'s on the same buffers (the bytes around them untouched), and the
runner's tables are read after the calls: each round's sends of at most ``IMMEDIATE`` bytes
(for a payload sent apart, its trailer's message), and only those, are the loop's
``MPI_Isend`` rows, and their slots of the compiled loop's request array are
``MPI_REQUEST_NULL`` (a request of ``MPI_Isend``, freed when it completed; a persistent
request keeps its handle), every other slot a persistent request.  Run with ``mpiexec -n N
python -m mpi4py -m pytest --with-mpi tests/mpi/test_immediate_mpi.py`` at N = 1, 2, 4, 8,
32, 64.
"""

import numpy as np
import pytest

from dualmpi.engine import cloop
from dualmpi.engine.mpi import IMMEDIATE, MPIRunner

MPI = pytest.importorskip("mpi4py.MPI")

from test_apart_mpi import _calls, _net, _sample, _three_calls  # noqa: E402
from test_icollectives_mpi import RANK, SIZE, WORLD, _agree  # noqa: E402


def _immediate_errors(run):
    """Return what differs from the rule in a blocking runner's compiled loop (see the module's
    docstring), and ``(immediate, persistent)``: how many sends of each kind it has.

    A message whose payload goes apart from its trailer (``apart_limit`` bytes or more) leaves
    as two: its trailer's message is 8 bytes, an ``MPI_Isend`` — in a merged plan (``parts``
    > 1: a v-variant's count table in its messages) with the table's rows, whose length the
    runner does not keep, so there either kind is allowed."""
    bad, counts = [], [0, 0]
    handles = run._c_arrays[1]
    null = MPI.REQUEST_NULL.handle
    merged = run.parts > 1
    at = 0
    for k, (rnd, (_, reqs, *_), rows, (_, late, _)) in enumerate(
            zip(run.bound.rounds, run._loop, run._imm, run._apart)):
        must, may = [], []  # the peers whose message is an MPI_Isend, or may be one
        for peer, _, lens in rnd.sends:
            size = int(lens.sum())
            if run.apart_tag is not None and size >= run.apart_limit:
                (may if merged else must).append(peer)  # (its trailer's message)
            elif size + 8 <= IMMEDIATE:
                must.append(peer)
        got = sorted(row[3] for row in rows)
        if any(p not in got for p in must) or any(p not in must + may for p in got):
            bad.append((k, "immediate peers", got, sorted(must), sorted(may)))
        n, ni = len(reqs), len(rows)
        slots = handles[at:at + n].tolist()
        imm = slots[n - late - ni:n - late]
        if any(h != null for h in imm) or \
                any(h == null for h in slots[:n - late - ni] + slots[n - late:]):
            bad.append((k, "slots", n, ni, late))
        counts[0] += ni
        counts[1] += len(rnd.sends) - ni
        at += n + 1  # (the alarm line's slot after each round's)
    return bad, counts


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1])
@pytest.mark.parametrize("n", _sample([1, IMMEDIATE // 8 - 1, IMMEDIATE // 8],
                                      IMMEDIATE // 8 - 1))
def test_small_sends_leave_with_isend_and_match_mpi(net_i, n):
    """Pieces of 8 bytes, and just under and at ``IMMEDIATE`` bytes with the trailer, six
    collectives and ``Barrier``, three calls each on the same buffers with new contents: equal
    to ``COMM_WORLD``'s, the padding untouched, and each round's sends of at most
    ``IMMEDIATE`` bytes made with ``MPI_Isend`` (their slots ``MPI_REQUEST_NULL`` after the
    calls), every larger one a persistent request; on more than one rank some made with
    ``MPI_Isend`` at 8 bytes a piece, some persistent at ``IMMEDIATE // 8`` elements."""
    if cloop.load() is None:
        pytest.skip(f"no compiled loop: {cloop.reason()}")
    net = _net(net_i)
    bad, counts = [], np.zeros(2, dtype=np.int64)
    calls = dict(_calls(n), Barrier=(lambda c, s, r: c.Barrier(), 0, 0))
    for name, (call, ns, nr) in calls.items():
        bad += _three_calls(net, name, call, call, ns, nr, name == "Reduce" and RANK != 0)
        run = net._last_runner
        if not isinstance(run, MPIRunner):  # (one rank: no messages)
            continue
        if run._c is None:
            bad.append((name, "not in the compiled loop"))
            continue
        wrong, (imm, persistent) = _immediate_errors(run)
        bad += [(name,) + w for w in wrong]
        counts += (imm, persistent)
    total = np.zeros(2, dtype=np.int64)
    WORLD.Allreduce(counts, total)
    if SIZE > 1 and n == 1 and not total[0]:
        bad.append(("no send made with MPI_Isend", total.tolist()))
    if SIZE > 1 and n == IMMEDIATE // 8 and not total[1]:
        bad.append(("no persistent send", total.tolist()))
    assert _agree(not bad), bad
