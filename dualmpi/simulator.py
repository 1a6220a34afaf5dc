"""Run collective schedules without MPI and report what the papers count (pure Python + numpy).

Two methods give the same figures:

* ``schedule``: build the :class:`~dualmpi.collectives.schedule.Schedule` and replay it
  symbolically (which node holds which block), for every collective;
* ``stream``: the total exchange step by step with numpy, every source at once,
  without materialising the p(p-1) messages; for networks too large for a schedule.

Both count conflicts as the papers define them: two messages on the same directed
link in the same step at the same hop index.
"""

import math

import numpy as np

from .collectives import build_schedule, count_conflicts, paper_steps
from .collectives.alltoall import destination_order, route_function
from .collectives.schedule import expected_blocks, initial_blocks
from .errors import DualmpiError
from .topology import DualCube, Hypercube, MetaCube

__all__ = ["simulate", "simulate_schedule", "simulate_alltoall_stream", "STREAM_ABOVE"]

#: ``method="auto"`` streams the total exchange above this many nodes.
STREAM_ABOVE = 256


def simulate(topo, collective, root=0, variant="corrected", method="auto"):
    """Return the simulated figures of ``collective`` on ``topo`` as a dict (see module doc)."""
    if method == "auto":
        method = "stream" if collective == "alltoall" and topo.num_nodes > STREAM_ABOVE else "schedule"
    if method == "stream":
        if collective != "alltoall":
            raise DualmpiError("the stream method simulates the total exchange (alltoall) only")
        out = simulate_alltoall_stream(topo, variant)
    elif method == "schedule":
        out = simulate_schedule(build_schedule(collective, topo, root, variant), variant)
    else:
        raise DualmpiError(f"unknown simulation method {method!r} (auto, schedule, stream)")
    p = topo.num_nodes
    out["lower_bound_rounds"] = math.ceil(math.log2(p)) if p > 1 else 0
    out["hypercube_rounds"] = _hypercube_rounds(collective, p)
    out["paper_rounds"] = paper_steps(collective, topo)
    return out


def _hypercube_rounds(collective, p):
    """Return the round count of the same collective on the hypercube with p nodes (p a power of 2)."""
    n = p.bit_length() - 1
    return p - 1 if collective == "alltoall" else n


def _base(topo, collective, variant, method):
    """Return the fields every simulation reports."""
    return {"spec": topo.spec, "nodes": topo.num_nodes, "collective": collective,
            "variant": variant, "method": method}


def simulate_schedule(schedule, variant="corrected"):
    """Replay ``schedule`` symbolically: who holds which block, conflicts and the cost model."""
    topo, coll, root = schedule.topo, schedule.collective, schedule.root
    p = topo.num_nodes
    held = [set(initial_blocks(coll, topo, root, u)) for u in range(p)]
    bad_sends = link_violations = 0
    step_blocks, step_hops = {}, {}
    for rnd in schedule.rounds:
        arriving = []
        for tr in rnd.transfers:
            if not topo.is_link(tr.src, tr.dst):
                link_violations += 1
            if not held[tr.src].issuperset(tr.blocks):
                bad_sends += 1
                continue
            arriving.append(tr)
            step_blocks[rnd.step] = max(step_blocks.get(rnd.step, 0), len(tr.blocks))
            step_hops[rnd.step] = max(step_hops.get(rnd.step, 0), rnd.hop + 1)
        for tr in arriving:
            held[tr.dst].update(tr.blocks)
    delivered = expected = 0
    for u in range(p):
        want = [key for key in expected_blocks(coll, topo, root, u) if key[0] != u]
        expected += len(want)
        delivered += sum(1 for key in want if key in held[u])
    routed = coll == "alltoall"
    out = _base(topo, coll, variant, "schedule")
    out.update({
        "algorithm": schedule.algorithm,
        "rounds": len(step_blocks),
        "hop_rounds": schedule.num_rounds,
        "messages": p * (p - 1) if routed else schedule.num_messages,
        "link_transfers": schedule.num_messages,
        "delivered": delivered,
        "expected": expected,
        "conflicts": count_conflicts(schedule),
        "link_violations": link_violations,
        "sends_without_data": bad_sends,
        "hops_from_source": (sum(1 for _, _, tr in schedule.transfers() if tr.header[0] == 0)
                             if routed else None),
        "model": {"ts": len(step_blocks), "tw": sum(step_blocks.values()),
                  "th": sum(step_hops.values())},
    })
    return out


def _field_layout(topo):
    """Return ``(node_shift(cur), width, class_shift)`` for the vectorised walker."""
    if isinstance(topo, MetaCube):
        return (lambda cur: topo.m * (cur >> topo.class_shift)), topo.m, topo.class_shift
    if isinstance(topo, DualCube):
        return (lambda cur: topo.half * ((cur >> topo.class_bit) & 1)), topo.half, topo.class_bit
    if isinstance(topo, Hypercube):
        return (lambda cur: np.zeros_like(cur)), topo.n, topo.n
    raise DualmpiError(f"no streaming simulator for {topo.spec}")


def _route_ops(topo, path):
    """Return the route of one source as ops: ``("fix",)`` for cluster hops, ``("cross", bit)``."""
    ops = []
    for a, b in zip(path, path[1:]):
        bit = (a ^ b).bit_length() - 1
        if topo.is_link(a, b) and _is_cross(topo, bit):
            ops.append(("cross", bit))
        elif not ops or ops[-1] != ("fix",):
            ops.append(("fix",))
    return ops


def _is_cross(topo, bit):
    """Return True when flipping ``bit`` is a cross-edge (changes the class)."""
    if isinstance(topo, MetaCube):
        return bit >= topo.class_shift
    if isinstance(topo, DualCube):
        return bit == topo.class_bit
    return False


def simulate_alltoall_stream(topo, variant="corrected"):
    """Simulate the total exchange with numpy, all sources of a step at once.

    Each step's route shape (cluster segments and cross-edges) is read from node 0's
    route and applied to every source: inside a cluster a source flips, in ascending
    order, the bits of its current class's node-id field that differ from its
    destination.  Every hop is link-checked, every message's end is compared with its
    destination, and every (source, destination) pair must occur exactly once.
    """
    p = topo.num_nodes
    dest = destination_order(topo)
    route = route_function(topo, variant)
    shift_of, width, class_shift = _field_layout(topo)
    src = np.arange(p, dtype=np.int64)
    seen = np.zeros((p, p), dtype=bool)
    delivered = conflicts = violations = hops0 = th = transfers = 0
    for t in range(p - 1):
        d = np.asarray(dest(src, t), dtype=np.int64)
        ops = _route_ops(topo, route(0, int(d[0])))
        cur = src.copy()
        hop = np.zeros(p, dtype=np.int64)
        keys = []
        for op in ops:
            flips = [1 << op[1]] if op[0] == "cross" else None
            if flips is None:
                shift = shift_of(cur)
                for b in range(width):
                    bit = np.left_shift(np.int64(1), shift + b)
                    move = (cur ^ d) & bit != 0
                    violations += _step(topo, cur, hop, move, bit, keys, p)
            else:
                move = np.ones(p, dtype=bool)
                violations += _step(topo, cur, hop, move, np.int64(flips[0]), keys, p)
        if keys:
            allkeys = np.concatenate(keys)
            conflicts += allkeys.size - np.unique(allkeys).size
        ok = cur == d
        fresh = ~seen[src, d]
        seen[src, d] = True
        delivered += int(np.count_nonzero(ok & fresh & (d != src)))
        hops0 += int(hop[0])
        transfers += int(hop.sum())
        th += int(hop.max())
    out = _base(topo, "alltoall", variant, "stream")
    out.update({
        "algorithm": build_name(topo, variant),
        "rounds": p - 1,
        "hop_rounds": th,
        "messages": p * (p - 1),
        "link_transfers": transfers,
        "delivered": delivered,
        "expected": p * (p - 1),
        "conflicts": conflicts,
        "link_violations": violations,
        "sends_without_data": 0,
        "hops_from_source": hops0,
        "model": {"ts": p - 1, "tw": p - 1, "th": th},
    })
    return out


def _step(topo, cur, hop, move, bit, keys, p):
    """Move the selected messages across ``bit``; record (hop, from, to) keys; return violations."""
    if not move.any():
        return 0
    a = cur[move]
    b = a ^ (bit if np.ndim(bit) == 0 else bit[move])
    h = hop[move]
    keys.append((h * p + a) * p + b)
    bad = int(np.count_nonzero(~_links_ok(topo, a, b)))
    cur[move] = b
    hop[move] += 1
    return bad


def _links_ok(topo, a, b):
    """Vectorised :meth:`Topology.is_link` for arrays of one-bit-apart node pairs."""
    x = a ^ b
    one_bit = (x != 0) & (x & (x - 1) == 0)
    bit = np.zeros_like(x)
    nz = x > 0
    bit[nz] = np.log2(x[nz]).astype(np.int64)
    shift_of, width, class_shift = _field_layout(topo)
    lo = shift_of(a)
    ok = (bit >= lo) & (bit < lo + width)
    if not isinstance(topo, Hypercube):
        ok |= bit >= class_shift
    return one_bit & ok & (b >= 0) & (b < topo.num_nodes)


def build_name(topo, variant):
    """Return the total-exchange algorithm's name on ``topo``."""
    if isinstance(topo, DualCube):
        return "dual-cube Algorithms 3+4"
    if isinstance(topo, MetaCube):
        return "metacube Algorithms 1-4" + ("" if variant == "corrected" else " (table as printed)")
    return "e-cube total exchange"
