"""Two bound plans merged into one (dualmpi.engine.plan.merge), run in process: the same bytes
as the two run apart, one message where both plans cross a link in the same round."""

import numpy as np
import pytest

from dualmpi.engine.core import Engine, copy_segments
from dualmpi.engine.local import LocalRunner, LocalTransport, run_local
from dualmpi.engine.plan import merge
from dualmpi.topology import from_spec

SPECS = ["hypercube:n=1", "dualcube:r=2", "hypercube:n=3", "dualcube:r=3"]
DATA = ["scatterv", "gatherv", "allgatherv", "alltoallv", "bcast", "allreduce"]
ROW = 80  # a count table's row: ten int64


def _sizes(coll, p, rng):
    if coll == "alltoallv":
        return tuple(tuple(int(x) for x in row) for row in rng.integers(0, 6, (p, p)))
    if coll in ("bcast", "allreduce"):
        return 24
    return tuple(int(x) for x in rng.integers(0, 9, p))


def _buffers(runs, rng):
    """Random send buffers and zeroed receive buffers as large as the plans' copies reach."""
    def extent(copies):
        user, _, length = copies
        return int((user + length).max()) if user.size else 0
    sends = [rng.integers(0, 256, extent(r.bound.copy_in), dtype=np.uint8) for r in runs]
    recvs = [np.zeros(extent(r.bound.copy_out), np.uint8) for r in runs]
    return sends, recvs


def _messages(runs):
    return {(k, r, peer) for r, run in enumerate(runs) for k, rnd in run.rounds.items()
            for peer, _, _ in rnd.sends}


@pytest.mark.parametrize("coll", DATA)
@pytest.mark.parametrize("spec", SPECS)
def test_merged_plans_deliver_what_both_deliver_apart(spec, coll):
    topo = from_spec(spec)
    p = topo.num_nodes
    eng = Engine(topo, 1, LocalTransport())
    rng = np.random.default_rng(p * 31 + DATA.index(coll))
    sizes = _sizes(coll, p, rng)
    counts = [eng.runner(r, "allgather", ROW) for r in range(p)]
    data = [eng.runner(r, coll, sizes) for r in range(p)]
    rows = [rng.integers(0, 256, ROW, dtype=np.uint8) for _ in range(p)]
    tables = [np.zeros(ROW * p, np.uint8) for _ in range(p)]
    sends, recvs = _buffers(data, rng)
    run_local(counts, rows, tables)
    run_local(data, sends, recvs)

    merged, extra = [], []
    for r in range(p):
        plan, cin, cout = merge(counts[r].bound, data[r].bound, r)
        merged.append(LocalRunner(plan, data[r].plan))
        extra.append(cout)
        copy_segments(merged[-1].store, rows[r], (cin[1], cin[0], cin[2]))
    tables2 = [np.zeros_like(t) for t in tables]
    recvs2 = [np.zeros_like(b) for b in recvs]
    run_local(merged, sends, recvs2)
    for r in range(p):
        copy_segments(tables2[r], merged[r].store, extra[r])
        assert tables2[r].tobytes() == tables[r].tobytes(), r
        assert recvs2[r].tobytes() == recvs[r].tobytes(), r

    # one message per link and round: what either plan sent there
    union = _messages(counts) | _messages(data)
    assert _messages(merged) == union
    assert sum(int(m.bound.link_messages.sum()) for m in merged) == len(union)
    assert sum(int(m.bound.link_bytes.sum()) for m in merged) == \
        sum(int(r.bound.link_bytes.sum()) for r in counts + data)


def test_plans_that_cannot_merge():
    """A first plan that combines, or ranks of several nodes (moves between them): None."""
    eng = Engine(from_spec("hypercube:n=2"), 1, LocalTransport())
    assert merge(eng.runner(0, "allreduce", 8).bound, eng.runner(0, "bcast", 8).bound, 0) is None
    two = Engine(from_spec("hypercube:n=3"), 2, LocalTransport())
    assert merge(two.runner(0, "allgather", 8).bound, two.runner(0, "bcast", 8).bound, 0) is None
