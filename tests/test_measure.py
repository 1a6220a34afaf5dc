"""The clients' buffers and checks, built from the collectives' descriptions (pure, no MPI job).

``dualmpi run``, ``soak`` and ``bench`` fill a rank's buffers from the collective's layout
(:mod:`dualmpi.measure.payload`) and count what its nodes hold from the description
(:func:`dualmpi.measure.collective.verify_blocks`).  Here they are checked against MPI's
semantics spelled out per collective (``tests/semantics.py``), run through the engine's
compiled plans in one process, and shown to catch a wrong byte in the user's buffer and in
a node's copy.
"""

import doctest
import importlib
import inspect
from types import SimpleNamespace

import numpy as np
import pytest

from dualmpi.collectives.registry import get
from dualmpi.engine.core import Engine
from dualmpi.engine.local import LocalTransport, run_local
from dualmpi.measure.collective import engine_key, runnable, verify_blocks
from dualmpi.measure.payload import call_of, layout_for, parameters, rank_buffers
from dualmpi.simulator import simulated
from dualmpi.topology import from_spec
from semantics import rank_buffers as mpi_semantics

#: The runnable collectives that are MPI calls of their own.
CALLS = ("bcast", "scatter", "gather", "allgather", "alltoall")


@pytest.mark.parametrize("module", ["dualmpi.measure.payload", "dualmpi.measure.collective",
                                    "dualmpi.commands.run"])
def test_doctests(module):
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0


def test_what_runs_and_simulates_comes_from_the_registry():
    """Fixed-count calls with a layout and the blocks their nodes end with (gather among them);
    no reduction, no v-variant."""
    assert runnable() == CALLS + ("ring-allgather", "ring-allreduce")
    assert simulated() == CALLS + ("ring-allgather", "ring-allreduce")
    for name in ("gatherv", "alltoallv", "reduce", "allreduce", "scan", "barrier"):
        assert name not in runnable(), name
    assert call_of("ring-allreduce")[0].mpi == "Allreduce"


def test_parameters_are_mpi4pys():
    """The call's arguments go by the parameter names of mpi4py's own methods."""
    from mpi4py import MPI

    for name in runnable():
        method = call_of(name)[0].mpi
        theirs = [p for p in inspect.signature(getattr(MPI.Intracomm, method)).parameters
                  if p != "self"]
        assert list(parameters(method)) == theirs, method


@pytest.mark.parametrize("collective", CALLS)
@pytest.mark.parametrize("root", [0, 2])
@pytest.mark.parametrize("size", [0, 5])
def test_buffers_follow_mpi_semantics(collective, root, size):
    """One node per rank: the send buffer and the result a rank must end with are MPI's."""
    ranks = 4
    lay = layout_for(collective, ranks, 1, size, root)
    for rank in range(ranks):
        bufs = rank_buffers(lay, rank, get(collective).mpi)
        send, want = mpi_semantics(collective, ranks, rank, root, size)
        for mine, theirs in ((bufs.send, send), (bufs.want, want)):
            assert (mine is None) == (theirs is None), (rank, mine, theirs)
            assert mine is None or mine.tolist() == theirs.tolist(), rank


def _engine_run(spec, collective, q, size, root):
    """Run ``collective`` through every rank's compiled plan; return the nets, runners, buffers."""
    topo = from_spec(spec)
    ranks = topo.num_nodes // q
    eng = Engine(topo, q, LocalTransport())
    lay = layout_for(collective, ranks, q, size, root)
    name, algorithm = engine_key(SimpleNamespace(algorithms={}), collective)
    runs = [eng.runner(r, name, lay.nbytes, root, algorithm=algorithm) for r in range(ranks)]
    method = call_of(collective)[0].mpi
    bufs = [rank_buffers(lay, r, method, salt=3) for r in range(ranks)]
    run_local(runs, [b.send for b in bufs], [b.recv for b in bufs])
    nets = [SimpleNamespace(rank=r, nodes=list(range(r * q, (r + 1) * q)), topology=topo)
            for r in range(ranks)]
    return nets, runs, bufs, lay


@pytest.mark.parametrize("collective", CALLS + ("ring-allgather",))
@pytest.mark.parametrize("spec, q, root", [("dualcube:r=2", 1, 3), ("dualcube:r=2", 2, 1),
                                           ("hypercube:n=4", 4, 2)])
def test_engine_delivers_the_buffers_and_the_check_counts_every_block(collective, spec, q, root):
    """Through the compiled plans every rank ends with ``want``, and the check counts each
    block a node must end with (the papers' count: p - 1 per node for the all-to-all
    collectives, one per non-root node for bcast and scatter, p - 1 at the gather's root)."""
    nets, runs, bufs, lay = _engine_run(spec, collective, q, 7, root)
    p = lay.p
    total = [0, 0, 0]
    for net, run, b in zip(nets, runs, bufs):
        assert b.got is None or b.got.tolist() == b.want.tolist(), net.rank
        for i, x in enumerate(verify_blocks(net, collective, lay, b, run)):
            total[i] += x
    want = {"bcast": p - 1, "scatter": p - 1, "gather": p - 1}.get(collective, p * (p - 1))
    assert total == [want, want, 0]


@pytest.mark.parametrize("collective, q", [("allgather", 2), ("bcast", 4), ("gather", 1),
                                           ("alltoall", 2)])
def test_the_check_catches_a_wrong_byte(collective, q):
    """A byte changed in a rank's result, or in a node's copy kept in the engine's store
    (a broadcast block on a rank's other node), is one block missing."""
    nets, runs, bufs, lay = _engine_run("dualcube:r=2", collective, q, 6, 0)
    r = 0 if collective == "gather" else 1
    net, run, b = nets[r], runs[r], bufs[r]
    before = verify_blocks(net, collective, lay, b, run)
    b.got[-1] ^= 0xFF
    assert verify_blocks(net, collective, lay, b, run) == (before[0] - 1, before[1], 1)
    b.got[-1] ^= 0xFF
    if q > 1 and collective in ("allgather", "bcast"):  # the other node's copy, in the store
        slots = run.plan.find(np.array([net.nodes[1]]), np.array([0]), np.array([-1]))
        run.store[int(run.bound.slot_offset[slots[0]])] ^= 0xFF
        assert verify_blocks(net, collective, lay, b, run) == (before[0] - 1, before[1], 1)
