"""The collective registry and the collectives it added, run by the in-process engine (no MPI).

Gather, the v-variants, reduce-scatter and the barrier compile strictly on every network
(every transfer a link, every block held when sent) and deliver, rank by rank, what the
MPI call must give; the MPI tier compares the same calls with ``MPI.COMM_WORLD``.
"""

import numpy as np
import pytest

from dualmpi.collectives import build_schedule, paper_steps, registry
from dualmpi.collectives.gather import reverse_personalized
from dualmpi.engine.core import Engine
from dualmpi.engine.local import LocalTransport, run_local
from dualmpi.errors import DualmpiError
from dualmpi.ops import resolve
from dualmpi.topology import from_spec

SPECS = ["hypercube:n=3", "dualcube:r=2", "metacube:k=1,m=2", "rh:k=2,n=1", "ccc:n=3",
         "hdn:base=2,k=1,s=1"]


def test_every_method_is_registered_once():
    """One description per MPI collective, each naming a schedule that is registered."""
    table = registry.REGISTRY or {n: registry.get(n) for n in registry.names()}
    mpi = [d.mpi for d in table.values() if d.mpi]
    assert len(mpi) == len(set(mpi))
    for want in ("Bcast", "Scatter", "Scatterv", "Gather", "Gatherv", "Allgather", "Allgatherv",
                 "Alltoall", "Alltoallv", "Alltoallw", "Reduce", "Allreduce", "Scan", "Exscan",
                 "Reduce_scatter", "Reduce_scatter_block", "Barrier"):
        desc = registry.by_mpi(want)
        assert registry.get(desc.schedule).build is not None
    with pytest.raises(DualmpiError, match="unknown collective 'gatherw'"):
        registry.get("gatherw")


@pytest.mark.parametrize("spec", SPECS)
def test_gather_is_the_scatter_reversed(spec):
    """Same steps and messages as the scatter, every edge turned round, blocks towards the root."""
    topo = from_spec(spec)
    root = topo.num_nodes - 1
    fwd = build_schedule("scatter", topo, root)
    back = build_schedule("gather", topo, root)
    assert back.num_messages == fwd.num_messages and back.steps == fwd.steps
    assert paper_steps("gather", topo) == paper_steps("scatter", topo)
    to_root = {b for r in back.rounds for tr in r.transfers if tr.dst == root for b in tr.blocks}
    assert to_root == {(u, root) for u in range(topo.num_nodes) if u != root}
    if not getattr(fwd.rounds[0].transfers[0], "header", None):
        twice = reverse_personalized(reverse_personalized(fwd), "scatter")
        assert [[(t.src, t.dst, t.blocks) for t in r.transfers] for r in twice.rounds] == \
            [[(t.src, t.dst, t.blocks) for t in r.transfers] for r in fwd.rounds]


def _engine(spec, q):
    topo = from_spec(spec)
    return Engine(topo, q, LocalTransport()), topo.num_nodes // q


def _run(eng, R, coll, nbytes, sends, recvs, root=0, **kw):
    runs = [eng.runner(r, coll, nbytes, root, **kw) for r in range(R)]
    run_local(runs, sends, recvs)


@pytest.mark.parametrize("spec", SPECS[:5])
@pytest.mark.parametrize("q", [1, 2, 4])
def test_gather_and_the_v_variants_deliver_what_mpi_does(spec, q):
    """Gather(v), Scatterv and Allgatherv with uneven counts (0 included) and displacements."""
    eng, R = _engine(spec, q)
    rng = np.random.default_rng(R * 10 + q)
    counts = rng.integers(0, 7, R)
    counts[R // 2] = 0
    displs = np.concatenate([[3], 3 + np.cumsum(counts[:-1] + 2)])  # gaps of 2 bytes
    total = int(displs[-1] + counts[-1] + 1)
    pieces = [rng.integers(1, 255, int(c)).astype(np.uint8) for c in counts]
    for root in sorted({0, R - 1}):
        # gather, equal sizes
        m = 5
        recvs = [np.zeros(R * m, np.uint8) for _ in range(R)]
        _run(eng, R, "gather", m, [np.full(m, r + 1, np.uint8) for r in range(R)], recvs, root)
        assert recvs[root].tolist() == np.repeat(np.arange(1, R + 1), m).tolist()
        assert not any(recvs[r].any() for r in range(R) if r != root)
        # gatherv into the root's buffer with gaps left untouched
        recvs = [np.full(total, 0xEE, np.uint8) for _ in range(R)]
        _run(eng, R, "gatherv", counts, pieces, recvs, root, rdispls=displs)
        want = np.full(total, 0xEE, np.uint8)
        for r in range(R):
            want[displs[r]:displs[r] + counts[r]] = pieces[r]
        assert np.array_equal(recvs[root], want)
        # scatterv out of the root's buffer
        sends = [None] * R
        sends[root] = want.copy()
        recvs = [np.zeros(int(c), np.uint8) for c in counts]
        _run(eng, R, "scatterv", counts, sends, recvs, root, sdispls=displs)
        assert all(np.array_equal(recvs[r], pieces[r]) for r in range(R))
    # allgatherv
    recvs = [np.full(total, 0xEE, np.uint8) for _ in range(R)]
    _run(eng, R, "allgatherv", counts, pieces, recvs, rdispls=displs)
    assert all(np.array_equal(recvs[r], want) for r in range(R))


@pytest.mark.parametrize("spec", SPECS[:5])
@pytest.mark.parametrize("q", [1, 2, 4])
def test_reduce_scatter_gives_each_rank_its_block_of_the_sum(spec, q):
    """Reduce_scatter_block and Reduce_scatter (uneven counts) of int32 vectors."""
    eng, R = _engine(spec, q)
    dtype = np.dtype(np.int32)
    op = resolve(np.add, dtype, "Reduce_scatter")
    rng = np.random.default_rng(q + R)
    for counts in (np.full(R, 3), rng.integers(0, 5, R)):
        n = int(counts.sum())
        vecs = [rng.integers(-1000, 1000, n).astype(np.int32) for _ in range(R)]
        total = np.sum(vecs, axis=0, dtype=np.int32)
        recvs = [np.zeros(int(c), np.int32) for c in counts]
        uniform = bool(np.all(counts == counts[0]))
        coll = "reduce_scatter_block" if uniform else "reduce_scatter"
        nbytes = int(counts[0]) * 4 if uniform else counts * 4
        runs = [eng.runner(r, coll, nbytes, 0, itemsize=4, op=op) for r in range(R)]
        run_local(runs, [v.view(np.uint8) for v in vecs], [x.view(np.uint8) for x in recvs])
        start = np.concatenate([[0], np.cumsum(counts)])
        for r in range(R):
            assert recvs[r].tolist() == total[start[r]:start[r + 1]].tolist()


@pytest.mark.parametrize("spec", SPECS)
def test_barrier_depends_on_every_node(spec):
    """Every node's last arrival depends on every node's first departure (links only)."""
    topo = from_spec(spec)
    sched = build_schedule("barrier", topo)
    heard = {u: {u} for u in range(topo.num_nodes)}
    for rnd in sched.rounds:
        new = {u: set(s) for u, s in heard.items()}
        for tr in rnd.transfers:
            assert topo.is_link(tr.src, tr.dst)
            new[tr.dst] |= heard[tr.src]
        heard = new
    assert all(len(s) == topo.num_nodes for s in heard.values())


@pytest.mark.parametrize("module", ["dualmpi.collectives.registry", "dualmpi.collectives.gather",
                                    "dualmpi.collectives.reduce_scatter",
                                    "dualmpi.collectives.barrier", "dualmpi.collectives.bcast",
                                    "dualmpi.collectives.schedule", "dualmpi.arguments",
                                    "dualmpi.support"])
def test_doctests(module):
    """The examples in the new modules' docstrings run."""
    import doctest
    import importlib

    assert doctest.testmod(importlib.import_module(module)).failed == 0
