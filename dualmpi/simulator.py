"""Run collective schedules without MPI and report what the papers count (pure Python + numpy).

Two methods give the same figures:

* ``schedule``: build the :class:`~dualmpi.collectives.schedule.Schedule` and replay it
  symbolically (which node holds which block), for every collective;
* ``stream``: the total exchange step by step with numpy, every source at once,
  without materialising the p(p-1) messages; for networks too large for a schedule.

Both count conflicts as the papers define them: two messages on the same directed
link in the same step at the same hop index.  Both also report *link sharing*: how
many messages of one step use one directed link at any hop index (``link_sharing``).
A conflict-free step can still send two or more messages over one link at different
hop positions; under cut-through their bodies overlap in time when ``m*t_w`` exceeds
the hop distance times ``t_h``, and then share the link's bandwidth (docs/model.md,
"Link sharing"; docs/errata.md, D8).

With link parameters (``clock``) the result also has ``virtual``: the paper's
formula time, the step bound with link sharing, and the virtual clock's time of the
replayed schedule (:func:`dualmpi.model.clock.schedule_time`).
"""

import math

import numpy as np

from .collectives import build_schedule, count_conflicts, paper_steps, registry
from .collectives.alltoall import class_groups, destination_order, route_function, step_offsets
from .collectives.schedule import COLLECTIVES, expected_blocks, initial_blocks
from .errors import DualmpiError
from .model.clock import ClockParams, schedule_time
from .topology import HDN, DualCube, Hypercube, MetaCube

__all__ = [
    "simulated",
    "simulate",
    "simulate_schedule",
    "simulate_alltoall_stream",
    "simulate_vector",
    "check_faulty_size",
    "link_sharing",
    "virtual_times",
    "SHARING_LIMIT",
    "STREAM_ABOVE",
    "VECTOR_ABOVE",
    "LIMITS",
]

#: ``method="auto"`` streams the total exchange above this many nodes.
STREAM_ABOVE = 256
#: ``method="auto"`` simulates bcast, scatter and allgather with numpy above this many nodes.
VECTOR_ABOVE = 4096

#: The stream method counts link sharing up to this many nodes (it costs a pass over every hop).
SHARING_LIMIT = 1 << 12

#: The largest network each method takes, per collective ("schedule" replays every transfer,
#: "stream" keeps a p x p delivery table, "vector" a p x p bit set for allgather).
LIMITS = {
    ("schedule", "alltoall"): 1 << 11,
    ("schedule", None): 1 << 13,
    ("stream", "alltoall"): 1 << 15,
    ("vector", "allgather"): 1 << 15,
    ("vector", None): 1 << 22,
}


def simulated():
    """Return the registered collectives :func:`simulate` replays, in registration order.

    Those whose description says which blocks each node starts and ends with (so the
    replay can count what was delivered) and how many steps a paper states.

    >>> simulated()
    ('bcast', 'scatter', 'gather', 'allgather', 'alltoall', 'ring-allgather', 'ring-allreduce')
    """
    return tuple(name for name in registry.names() if _described(registry.get(name)))


def _described(desc):
    """True when a replay of ``desc``'s schedule can be checked and compared with a paper."""
    return None not in (desc.initial, desc.expected, desc.paper_steps)


def _check_size(topo, collective, method):
    """Raise :class:`DualmpiError` when ``topo`` is too large for ``method``."""
    limit = LIMITS.get((method, collective), LIMITS.get((method, None)))
    if limit is not None and topo.num_nodes > limit:
        raise DualmpiError(
            f"{topo.spec} has {topo.num_nodes:,} nodes: too large for the {method} simulation of "
            f"{collective} (at most {limit:,}); `dualmpi model {topo.spec}` predicts it from "
            "closed forms")


def simulate(topo, collective, root=0, variant="corrected", method="auto", clock=None, size=1024):
    """Return the simulated figures of ``collective`` on ``topo`` as a dict (see module doc).

    On a network with faults the schedule is replayed, and the result also lists the
    faults, the undeliverable (source, destination) pairs and the extra rounds and
    link transfers the detours cost against the fault-free schedule.  With ``clock``
    (a :class:`~dualmpi.model.clock.ClockParams`) and ``size`` (bytes per block)
    the result has ``virtual`` (:func:`virtual_times`).
    """
    if hasattr(topo, "failed_links"):
        out = _simulate_faulty(topo, collective, root, method)
        if clock is not None:
            out["virtual"] = virtual_times(out, clock, size, build_schedule(collective, topo, root))
        return out
    if not _described(registry.get(collective)):
        raise DualmpiError(f"{collective} cannot be simulated: its description does not say "
                           "which blocks its nodes start and end with, or no paper states its "
                           "steps")
    if collective not in COLLECTIVES and topo.num_nodes > VECTOR_ABOVE:
        raise DualmpiError(f"{collective} on {topo.num_nodes} nodes: only the papers' four "
                           f"patterns have numpy simulations; the schedule replay of {collective} "
                           f"runs up to {VECTOR_ABOVE} nodes")
    symmetric = type(topo) in (Hypercube, DualCube, MetaCube)
    if method == "auto":
        if collective not in COLLECTIVES or not symmetric:
            method = "schedule"  # rings and the RH's emulated schedules are replayed as built
        elif collective == "alltoall":
            method = "stream" if topo.num_nodes > STREAM_ABOVE else "schedule"
        else:
            vector = topo.num_nodes > VECTOR_ABOVE and variant == "corrected" and not isinstance(topo, HDN)
            method = "vector" if vector else "schedule"
    _check_size(topo, collective, method)
    if method in ("stream", "vector") and not symmetric:
        raise DualmpiError(f"the {method} method applies to hypercubes, dual-cubes and metacubes; "
                           "use --method schedule")
    if method == "stream":
        if collective != "alltoall":
            raise DualmpiError("the stream method simulates the total exchange (alltoall) only")
        out = simulate_alltoall_stream(topo, variant)
    elif method == "vector":
        if collective == "alltoall" or variant != "corrected":
            raise DualmpiError("the vector method simulates bcast, scatter and allgather as corrected")
        if isinstance(topo, HDN):  # Algorithm 2 is no greedy tree along a dimension sequence
            raise DualmpiError(f"the vector method does not apply to {topo.spec}; use --method schedule")
        out = simulate_vector(topo, collective, root)
    elif method == "schedule":
        schedule = build_schedule(collective, topo, root, variant)
        out = simulate_schedule(schedule, variant)
    else:
        raise DualmpiError(f"unknown simulation method {method!r} (auto, schedule, stream, vector)")
    p = topo.num_nodes
    out["lower_bound_rounds"] = math.ceil(math.log2(p)) if p > 1 else 0
    out["hypercube_rounds"] = _hypercube_rounds(collective, p)
    out["paper_rounds"] = paper_steps(collective, topo)
    if clock is not None:
        out["virtual"] = virtual_times(out, clock, size, schedule if method == "schedule" else None)
    return out


def virtual_times(out, clock, size, schedule=None, clock_result=None):
    """Return the times of one simulated collective under link parameters ``clock``.

    ``paper_time`` is the schedule's formula ``ts*t_s + tw*m*t_w + th*t_h`` (every
    step costs its largest message once, as if no two messages of a step shared a
    link); ``sharing_bound`` replaces each step's largest message by the largest
    load of one directed link in the step (``link_sharing["model"]``: the bytes that
    link must carry; the time if the step's messages overlap on it fully, as in a
    flow model where a message holds its whole route); ``clock_time`` is the virtual
    clock's time of the replayed schedule (pipelined cut-through: bodies overlap on a
    link only while both stream through it; None without a schedule, e.g. the stream
    method; ``clock_result``, a ``{time, contention_delay, delayed_hops}`` the caller has
    already computed, e.g. the clock ``dualmpi run`` replays, is taken instead of
    replaying ``schedule``).  Store-and-forward gives only ``clock_time``.

    >>> from dualmpi.topology import from_spec
    >>> v = simulate(from_spec("dualcube:r=3"), "alltoall", clock=ClockParams(2e-6, 1e-9, 5e-8),
    ...              size=65536)["virtual"]
    >>> v["clock_time"] > v["paper_time"], round(v["clock_over_paper"], 3)
    (True, 1.513)
    """
    params = {"ts": clock.ts, "tw": clock.tw, "th": clock.th}
    res = {"size": size, "params": params, "switching": clock.switching,
           "contention": clock.contention}

    def formula(m):
        return m["ts"] * clock.ts + m["tw"] * size * clock.tw + m["th"] * clock.th

    cut = clock.switching == "cut-through"
    res["paper_time"] = formula(out["model"]) if cut else None
    sharing = out.get("link_sharing")
    res["sharing_bound"] = formula(sharing["model"]) if cut and sharing else None
    res["clock_time"] = res["contention_delay"] = res["delayed_hops"] = None
    ct = clock_result if clock_result is not None else (
        schedule_time(schedule, size, clock) if schedule is not None else None)
    if ct is not None:
        res.update(clock_time=ct["time"], contention_delay=ct["contention_delay"],
                   delayed_hops=ct["delayed_hops"])
    for key in ("sharing_bound", "clock_time"):
        ok = res[key] is not None and res["paper_time"]
        res[key.split("_")[0] + "_over_paper"] = res[key] / res["paper_time"] if ok else None
    return res


def link_sharing(step_loads, steps, th):
    """Return the link-sharing figures from per-step link loads.

    Parameters
    ----------
    step_loads : list of (ndarray, ndarray)
        Per step, in order: for every directed link the step uses, the number of
        messages and the number of blocks it carries in that step (any hop index).
    steps : int
        ``ts`` of the model (steps without messages count 0).
    th : int
        ``th`` of the model, kept in ``model``.

    Returns
    -------
    dict
        ``per_step`` (max messages on one directed link, per step), ``max``,
        ``steps_shared`` (steps where that is 2 or more), ``shared_messages`` (messages
        that share their link with another message of their step, counted per link),
        ``sum_per_step`` and ``model``: the coefficients with ``tw`` = the sum over
        steps of the largest per-link load in blocks.

    Examples
    --------
    >>> link_sharing([(np.array([1, 2]), np.array([1, 2])), (np.array([1]), np.array([3]))], 2, 4)
    {'per_step': [2, 1], 'max': 2, 'steps_shared': 1, 'shared_messages': 2, 'sum_per_step': 3, 'model': {'ts': 2, 'tw': 5, 'th': 4}}
    """
    per_step = [int(c.max()) if c.size else 0 for c, _ in step_loads]
    return {"per_step": per_step, "max": max(per_step, default=0),
            "steps_shared": sum(1 for k in per_step if k > 1),
            "shared_messages": int(sum(int(c[c > 1].sum()) for c, _ in step_loads)),
            "sum_per_step": sum(per_step),
            "model": {"ts": steps, "tw": int(sum(int(b.max()) if b.size else 0 for _, b in step_loads)),
                      "th": th}}


def _loads(links, blocks=None):
    """Return (messages, blocks) per distinct link id of one step."""
    links = np.asarray(links, dtype=np.int64)
    if blocks is None:
        _, counts = np.unique(links, return_counts=True)
        return counts, counts
    uniq, inv = np.unique(links, return_inverse=True)
    return (np.bincount(inv, minlength=uniq.size),
            np.bincount(inv, weights=np.asarray(blocks, dtype=np.int64), minlength=uniq.size).astype(np.int64))


def check_faulty_size(topo, collective, method="auto"):
    """Raise :class:`DualmpiError` unless ``topo`` with faults can be simulated by ``method``.

    Needs only the node count, so a command runs it on the fault-free network before
    it builds the faults (failing links at random lists every link).
    """
    if method not in ("auto", "schedule"):
        raise DualmpiError("a network with faults is simulated with the schedule method")
    limit = LIMITS.get(("schedule", collective), LIMITS[("schedule", None)])
    if topo.num_nodes > limit:
        raise DualmpiError(
            f"{topo.spec} has {topo.num_nodes:,} nodes: too large to simulate {collective} with "
            f"faults (schedule replay, at most {limit:,} nodes); `dualmpi model {topo.spec}` "
            "predicts the fault-free network from closed forms")


def _simulate_faulty(topo, collective, root, method):
    """Simulate on a :class:`~dualmpi.topology.faults.FaultyTopology` (schedule replay)."""
    from .collectives.faulttolerant import undeliverable

    check_faulty_size(topo, collective, method)
    out = simulate_schedule(build_schedule(collective, topo, root))
    base = simulate(topo.base, collective, root)
    cut = undeliverable(collective, topo, root)
    out.update({
        "faults": topo.describe_faults(),
        "undeliverable": [list(pair) for pair in cut[:1000]],
        "undeliverable_count": len(cut),
        "extra_rounds": out["rounds"] - base["rounds"],
        "extra_hop_rounds": out["hop_rounds"] - base["hop_rounds"],
        "extra_link_transfers": out["link_transfers"] - base["link_transfers"],
        "paper_rounds": paper_steps(collective, topo),
    })
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
    by_step = {}
    for rnd in schedule.rounds:
        links, blocks = by_step.setdefault(rnd.step, ([], []))
        for tr in rnd.transfers:
            links.append(tr.src * p + tr.dst)
            blocks.append(len(tr.blocks))
    th = sum(step_hops.values())
    sharing = link_sharing([_loads(*by_step[k]) for k in sorted(by_step)], len(step_blocks), th)
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
                  "th": th},
        "link_sharing": sharing,
    })
    return out


def simulate_alltoall_stream(topo, variant="corrected", samples=2, seed=0):
    """Simulate the total exchange with numpy, a whole step at a time.

    Sources of one class route alike: node renaming (XOR with the source) maps the
    route of the class's first node onto every other source of the class.  Each step
    routes one representative per class with the topology's router, link-checks it,
    applies its offsets to all sources of the class at once (numpy), compares every
    message's end with its destination, and counts conflicts exactly: two messages on
    one directed link at one hop index.  ``samples`` random sources per step are also
    routed directly and must follow the renamed path, so the symmetry is checked, not
    assumed; every (source, destination) pair must occur exactly once.
    """
    p = topo.num_nodes
    dest = destination_order(topo)
    route = route_function(topo, variant)
    shift, groups = class_groups(topo)
    rng = np.random.default_rng(seed)
    src = np.arange(p, dtype=np.int64)
    seen = np.zeros((p, p), dtype=bool)
    delivered = conflicts = violations = hops0 = th = transfers = asymmetric = 0
    loads = [] if p <= SHARING_LIMIT else None
    for t in range(p - 1):
        d = np.asarray(dest(src, t), dtype=np.int64)
        offsets = step_offsets(topo, groups, t, dest, route)
        for members, offs in zip(groups, offsets):
            rep = int(members[0])
            path = [rep ^ o for o in offs]
            violations += sum(1 for a, b in zip(path, path[1:]) if not topo.is_link(a, b))
            end = members ^ offs[-1]
            delivered += int(np.count_nonzero((end == d[members]) & ~seen[members, d[members]]))
            transfers += (len(path) - 1) * members.size
            for s_ in rng.choice(members, size=min(samples, members.size), replace=False):
                s_ = int(s_)
                if route(s_, int(d[s_])) != [s_ ^ o for o in offs]:
                    asymmetric += 1
        seen[src, d] = True
        if loads is not None:
            loads.append(_loads(np.concatenate(
                [(members ^ offs[h]) * p + (members ^ offs[h + 1])
                 for members, offs in zip(groups, offsets) for h in range(len(offs) - 1)]
                or [np.empty(0, dtype=np.int64)])))
        conflicts += _step_conflicts(groups, offsets, shift)
        hops0 += len(offsets[0]) - 1
        th += max(len(o) for o in offsets) - 1
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
        "link_sharing": (link_sharing(loads, p - 1, th) if loads is not None else None),
        "symmetry_mismatches": asymmetric,
    })
    return out


def _step_conflicts(groups, offsets, shift):
    """Count messages of one step that reuse a directed link at the same hop index.

    At hop ``h`` the messages of a class group sit at ``members XOR offs[h]`` (distinct
    nodes) and cross bit ``offs[h] XOR offs[h+1]``; only groups that are in the same
    class and cross the same bit at the same hop can meet, and then their positions
    are compared exactly.
    """
    total = 0
    longest = max(len(o) for o in offsets) - 1
    for h in range(longest):
        by_link = {}
        for g, offs in enumerate(offsets):
            if h + 1 < len(offs):
                cls = (int(groups[g][0]) ^ offs[h]) >> shift
                by_link.setdefault((cls, offs[h] ^ offs[h + 1]), []).append(g)
        for gs in by_link.values():
            if len(gs) > 1:
                pos = np.concatenate([groups[g] ^ offsets[g][h] for g in gs])
                total += pos.size - np.unique(pos).size
    return total


def _vector_links_ok(topo, a, b):
    """Return a bool array: is ``b[i]`` a neighbour of ``a[i]`` (numpy, all dimensions)?"""
    ok = np.zeros(a.shape, dtype=bool)
    for dim in range(1, topo.degree + 1):
        ok |= np.asarray(topo.neighbor(a, dim)) == b
    return ok


def simulate_vector(topo, collective, root=0):
    """Simulate bcast, scatter or allgather with numpy over whole rounds (no per-message loop).

    The schedules are greedy along a dimension sequence (:mod:`dualmpi.collectives.dimorder`):
    a tree for bcast and scatter (scatter edges carry their subtree's blocks), bit-set
    knowledge exchanges for allgather.  The output equals :func:`simulate_schedule`'s.
    """
    from .collectives.dimorder import broadcast_sequence, gather_sequence

    p = topo.num_nodes
    nodes = np.arange(p, dtype=np.int64)
    if collective == "allgather":
        rounds, sizes, sent_ok, delivered = _vector_allgather(topo, nodes, gather_sequence(topo))
        expected = p * (p - 1)
        name = "all-to-all broadcast along " + str(gather_sequence(topo))
    else:
        rounds, sizes, sent_ok, delivered = _vector_tree(topo, nodes, root, broadcast_sequence(topo),
                                                         collective == "scatter")
        expected = p - 1
        name = ("scatter" if collective == "scatter" else "broadcast") + " tree"
    violations = sum(int(np.count_nonzero(~_vector_links_ok(topo, a, b))) for a, b in rounds)
    conflicts = sum(a.size - np.unique(a * p + b).size for a, b in rounds)
    sharing = link_sharing([_loads(a * p + b, z) for (a, b), z in zip(rounds, sizes)], len(rounds),
                           len(rounds))
    out = _base(topo, collective, "corrected", "vector")
    out.update({
        "algorithm": name,
        "rounds": len(rounds),
        "hop_rounds": len(rounds),
        "messages": int(sum(a.size for a, _ in rounds)),
        "link_transfers": int(sum(a.size for a, _ in rounds)),
        "delivered": int(delivered),
        "expected": expected,
        "conflicts": int(conflicts),
        "link_violations": violations,
        "sends_without_data": int(sent_ok),
        "hops_from_source": None,
        "model": {"ts": len(rounds), "tw": int(sum(int(z.max()) for z in sizes)),
                  "th": len(rounds)},
        "link_sharing": sharing,
    })
    return out


def _vector_tree(topo, nodes, root, dims, personalized):
    """Return the greedy tree's rounds ``(senders, receivers)``, message sizes and delivery."""
    held = np.zeros(nodes.size, dtype=bool)
    held[root] = True
    rounds = []
    for dim in dims:
        senders = nodes[held]
        targets = np.asarray(topo.neighbor(senders, dim), dtype=np.int64)
        fresh = ~held[targets]
        if fresh.any():
            rounds.append((senders[fresh], targets[fresh]))
            held[targets[fresh]] = True
    sub = np.ones(nodes.size, dtype=np.int64)
    sizes = [None] * len(rounds)
    for i in reversed(range(len(rounds))):
        a, b = rounds[i]
        sizes[i] = sub[b].copy() if personalized else np.ones(a.size, dtype=np.int64)
        np.add.at(sub, a, sub[b])
    delivered = int(np.count_nonzero(held)) - 1
    return rounds, sizes, 0, delivered


def _vector_allgather(topo, nodes, dims):
    """Return exchange rounds, message sizes (blocks) and delivery, with packed bit sets."""
    p = nodes.size
    know = np.packbits(np.eye(p, dtype=bool), axis=1)
    rounds, sizes = [], []
    for dim in dims:
        nbr = np.asarray(topo.neighbor(nodes, dim), dtype=np.int64)
        extra = know & ~know[nbr]
        counts = _popcount_rows(extra)
        send = counts > 0
        if send.any():
            rounds.append((nodes[send], nbr[send]))
            sizes.append(counts[send])
            know[nbr[send]] |= extra[send]
    delivered = int(_popcount_rows(know).sum()) - p
    return rounds, sizes, 0, delivered


_BYTE_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def _popcount_rows(packed):
    """Return the number of one bits in each row of a packed uint8 bit matrix."""
    return _BYTE_POPCOUNT[packed].sum(axis=1, dtype=np.int64)


def build_name(topo, variant):
    """Return the total-exchange algorithm's name on ``topo``."""
    if isinstance(topo, DualCube):
        return "dual-cube Algorithms 3+4"
    if isinstance(topo, MetaCube):
        return "metacube Algorithms 1-4" + ("" if variant == "corrected" else " (table as printed)")
    return "e-cube total exchange"
