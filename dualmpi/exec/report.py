"""The report of a ``dualmpi exec`` run: what crossed which links, and its model time (pure).

Each rank contributes a record -- the calls per method of the stand-in and of the
communicators derived from it (per kind), and the counts of its networks'
:meth:`dualmpi.Comm.stats` (a rank counts the link messages its nodes send, forwarded ones
included, and the point-to-point messages it sent itself) -- and :func:`build` sums them into
the report that rank 0 prints (:func:`text`) and ``--report FILE`` writes as JSON
(:data:`FORMAT`, docs/results.md).

The model time prices what ran with the papers' link parameters (``t_s``, ``t_w``, ``t_h``,
:mod:`dualmpi.model.steps`).  Per rank: every collective call of the network (on
``MPI.COMM_WORLD`` or a ``Dup`` of it) costs its schedule's ``steps*t_s + step_bytes*t_w +
hop_rounds*t_h`` (each step its largest message at the call's block sizes, each hop round
``t_h``), and every point-to-point message the rank sent costs ``t_s + m*t_w + d*t_h`` (``m``
bytes over a route of ``d`` links, cut-through) -- the messages of the communicators derived
from the world (``Split``, ``Create_cart``, ...) included, their collectives being MPI's
algorithms over such messages::

    T_rank = steps*t_s + step_bytes*t_w + hop_rounds*t_h
             + p2p_messages*t_s + p2p_bytes*t_w + p2p_hops*t_h
    T = max over the ranks of T_rank

The calls one after another on each rank (one port), the ranks side by side; no computing,
no waiting for another rank, no contention between messages that share a link.
"""

import json

from ..errors import InputError

from ..model.steps import collective_time, p2p_time

__all__ = ["FORMAT", "empty_stats", "add_stats", "record_stats", "build", "model_time", "text",
           "compare", "read", "busiest"]

#: Format tag of ``--report`` files (2: the model time priced per call, see the module docstring;
#: 1 was a bound from the link totals).
FORMAT = "dualmpi-exec/2"

#: Busiest links listed in the report.
BUSIEST = 5

#: The kind of the calls of MPI.COMM_WORLD and its Dups (dualmpi.exec.world.WORLD_KIND).
WORLD = "COMM_WORLD"

_COUNTS = ("messages", "bytes", "rounds", "steps", "step_bytes", "collectives",
           "checksum_failures", "p2p_messages", "p2p_bytes", "p2p_hops")


def empty_stats():
    """Return the stats of nothing sent (the sum's zero, see :func:`add_stats`)."""
    out = dict.fromkeys(_COUNTS, 0)
    out["links"] = {}
    return out


def add_stats(total, stats):
    """Add ``stats`` (a :meth:`dualmpi.Comm.stats` dict) into ``total``; return ``total``.

    >>> t = add_stats(empty_stats(), {"messages": 2, "bytes": 16, "rounds": 1, "steps": 1,
    ...                               "collectives": 1, "links": {(0, 1): (2, 16)}})
    >>> t = add_stats(t, {"messages": 1, "bytes": 8, "links": {(0, 1): (1, 8)}})
    >>> t["messages"], t["links"]
    (3, {(0, 1): (3, 24)})
    """
    for key in _COUNTS:
        total[key] += int(stats.get(key, 0))
    links = total["links"]
    for key, (m, n) in stats.get("links", {}).items():
        m0, n0 = links.get(key, (0, 0))
        links[key] = (m0 + int(m), n0 + int(n))
    return total


def record_stats(stats):
    """Return ``stats`` with its links as a sorted list ``[[u, v, messages, bytes]]`` (JSON)."""
    out = {key: int(stats[key]) for key in _COUNTS}
    out["links"] = sorted([u, v, int(m), int(n)] for (u, v), (m, n) in stats["links"].items())
    return out


def busiest(links, count=BUSIEST):
    """Return the ``count`` links that carried the most bytes (then messages), busiest first.

    >>> busiest([[0, 1, 4, 40], [1, 0, 9, 40], [2, 3, 1, 100]], 2)
    [[2, 3, 1, 100], [1, 0, 9, 40]]
    """
    return sorted(links, key=lambda row: (-row[3], -row[2], row[0], row[1]))[:count]


def model_time(per_rank, clock):
    """Return the model time of a run from every rank's counts (see the module docstring).

    ``per_rank``: each rank's :func:`record_stats` (``steps``, ``step_bytes``, ``rounds``,
    ``p2p_messages``, ``p2p_bytes``, ``p2p_hops``), ``clock`` ``{"ts", "tw", "th"}`` in
    seconds.  Returns ``{time, rank, collective_time, p2p_time, collectives, p2p, per_rank}``:
    the slowest rank's total, which rank that is, its two parts and their counts, and every
    rank's total.

    >>> clock = {"ts": 2e-6, "tw": 1e-9, "th": 5e-8}
    >>> ranks = [dict(steps=3, step_bytes=300, rounds=3, p2p_messages=1, p2p_bytes=100,
    ...               p2p_hops=2),
    ...          dict(steps=3, step_bytes=300, rounds=3, p2p_messages=4, p2p_bytes=400,
    ...               p2p_hops=4)]
    >>> m = model_time(ranks, clock)
    >>> m["rank"], round(m["collective_time"] * 1e6, 3), round(m["p2p_time"] * 1e6, 3)
    (1, 6.45, 8.6)
    """
    times = []
    for s in per_rank:
        coll = collective_time(s["steps"], s["step_bytes"], s["rounds"], clock)
        p2p = p2p_time(s["p2p_messages"], s["p2p_bytes"], s["p2p_hops"], clock)
        times.append((coll + p2p, coll, p2p))
    if not times:
        return {"time": 0.0, "rank": None, "collective_time": 0.0, "p2p_time": 0.0,
                "collectives": None, "p2p": None, "per_rank": []}
    rank = max(range(len(times)), key=lambda r: (times[r][0], -r))
    s = per_rank[rank]
    return {"time": times[rank][0], "rank": rank, "collective_time": times[rank][1],
            "p2p_time": times[rank][2],
            "collectives": {"steps": s["steps"], "step_bytes": s["step_bytes"],
                            "hop_rounds": s["rounds"]},
            "p2p": {"messages": s["p2p_messages"], "bytes": s["p2p_bytes"],
                    "hops": s["p2p_hops"]},
            "per_rank": [t for t, _, _ in times]}


def build(records, topo, q, clock, meta=None, program=None, args=(), status=0):
    """Return the report of a run from every rank's record (rank order).

    Each record: ``{"calls": {method: count}, "kinds": {kind: {method: count}}, "stats":
    record_stats(...), "refusals": n, "refusal": line or None}``.  ``clock`` is the model's
    ``{ts, tw, th}``.
    """
    calls, kinds, links = {}, {}, {}
    for rec in records:
        for name, n in rec["calls"].items():
            calls[name] = calls.get(name, 0) + int(n)
        for kind, per in rec.get("kinds", {}).items():
            mine = kinds.setdefault(kind, {})
            for name, n in per.items():
                mine[name] = mine.get(name, 0) + int(n)
        for u, v, m, n in rec["stats"]["links"]:
            m0, n0 = links.get((u, v), (0, 0))
            links[(u, v)] = (m0 + m, n0 + n)
    rows = sorted([u, v, m, n] for (u, v), (m, n) in links.items())
    per_rank = [rec["stats"] for rec in records]
    hop_rounds = max((s["rounds"] for s in per_rank), default=0)
    refusals = [rec.get("refusal") for rec in records if rec.get("refusals")]
    return {
        "format": FORMAT,
        "meta": dict(meta or {}),
        "program": program,
        "args": list(args),
        "status": status,
        "spec": topo.spec,
        "nodes": topo.num_nodes,
        "ranks": len(records),
        "nodes_per_rank": q,
        "calls": dict(sorted(calls.items(), key=lambda kv: (-kv[1], kv[0]))),
        "calls_per_rank": [dict(sorted(rec["calls"].items())) for rec in records],
        "calls_by_kind": {kind: dict(sorted(kinds[kind].items(), key=lambda kv: (-kv[1], kv[0])))
                          for kind in sorted(kinds, key=lambda k: (k != WORLD, k))},
        "messages": sum(m for _, _, m, _ in rows),
        "bytes": sum(n for _, _, _, n in rows),
        "links_used": len(rows),
        "links": rows,
        "busiest_links": busiest(rows),
        "hop_rounds": hop_rounds,
        "steps": max((s["steps"] for s in per_rank), default=0),
        "collectives": max((s["collectives"] for s in per_rank), default=0),
        "checksum_failures": sum(s["checksum_failures"] for s in per_rank),
        "p2p_messages": sum(s["p2p_messages"] for s in per_rank),
        "p2p_bytes": sum(s["p2p_bytes"] for s in per_rank),
        "p2p_hops": sum(s["p2p_hops"] for s in per_rank),
        "refused_calls": sum(int(rec.get("refusals", 0)) for rec in records),
        "refusal": refusals[0] if refusals else None,
        "model": dict(model_time(per_rank, clock), clock=dict(clock)),
    }


def _si(seconds):
    """Return a time in the unit that reads best.

    >>> _si(2e-6), _si(0.0123), _si(3.5)
    ('2 us', '12.3 ms', '3.5 s')
    """
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale or unit == "ns":
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds:g} s"  # pragma: no cover


def _link(row):
    u, v, m, n = row
    return f"{u}->{v} {m} msgs {n} B"


def text(report):
    """Return the report as the lines rank 0 prints (on stderr, after the program's output)."""
    r = report
    q = r["nodes_per_rank"]
    head = (f"dualmpi exec: {r['program']} on {r['spec']} ({r['nodes']} nodes, {r['ranks']} ranks"
            + (f" x {q} nodes" if q > 1 else "") + ")")
    calls = ", ".join(f"{name} {n}" for name, n in r["calls"].items()) or "none"
    lines = [head, f"  calls (all ranks): {calls}"]
    derived = [(kind, per) for kind, per in r.get("calls_by_kind", {}).items() if kind != WORLD]
    if derived:
        lines.append("  of which on derived communicators: " + "; ".join(
            f"{kind} " + ", ".join(f"{name} {n}" for name, n in per.items())
            for kind, per in derived))
    lines.append(f"  link messages {r['messages']}, bytes {r['bytes']} over {r['links_used']} "
                 "directed links" + ("; busiest: " + ", ".join(map(_link, r["busiest_links"]))
                                     if r["busiest_links"] else ""))
    lines.append(f"  hop rounds {r['hop_rounds']} (paper steps {r['steps']}, "
                 f"{r['collectives']} collective calls per rank)")
    lines.append(f"  point-to-point: {r['p2p_messages']} messages sent, {r['p2p_bytes']} bytes, "
                 f"{r['p2p_hops']} route links")
    m, c = r["model"], r["model"]["clock"]
    who = "" if m["rank"] is None or r["ranks"] == 1 else f" (rank {m['rank']}, the slowest)"
    lines.append(f"  model time {_si(m['time'])} at t_s = {_si(c['ts'])}, "
                 f"t_w = {c['tw'] * 1e9:g} ns/B, t_h = {_si(c['th'])}: collectives "
                 f"{_si(m['collective_time'])} + point-to-point {_si(m['p2p_time'])}{who}")
    if r["refused_calls"]:
        lines.append(f"  refused calls: {r['refused_calls']} (the program caught them; the "
                     f"first: {r['refusal']})")
    return lines


def compare(mine, other, other_path):
    """Return the lines comparing this run's report with ``other`` (the other network's run).

    Warns when the two runs differ in program, arguments or node count.
    """
    lines = [f"  compared with {other['spec']} ({other_path}):"]
    for what, a, b in (("program", mine["program"], other["program"]),
                       ("arguments", mine["args"], other["args"]),
                       ("nodes", mine["nodes"], other["nodes"])):
        if a != b:
            lines.append(f"  warning: the runs differ in {what}: {a!r} here, {b!r} there")

    def row(r):
        top = r["busiest_links"][0][3] if r["busiest_links"] else 0
        return (r["spec"], r["messages"], r["bytes"], top, r["hop_rounds"], r["model"]["time"])

    rows = [row(mine), row(other)]
    head = ("network", "link messages", "bytes", "busiest link bytes", "hop rounds", "model time")
    ratio = ["ratio"] + [f"{a / b:.3f}" if b else "-" for a, b in zip(rows[0][1:], rows[1][1:])]
    body = [[r[0], str(r[1]), str(r[2]), str(r[3]), str(r[4]), _si(r[5])] for r in rows] + [ratio]
    widths = [max(len(str(x[i])) for x in [head] + body) for i in range(len(head))]
    for cells in [head] + body:
        lines.append("  " + "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip())
    return lines


def read(path):
    """Return the report in ``path`` (written by ``--report``), or raise :class:`InputError`."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a JSON file ({exc})") from None
    if isinstance(data, dict) and data.get("format") == "dualmpi-exec/1":
        raise InputError(f"{path}: a dualmpi-exec/1 report, whose model time was a bound from "
                         f"the link totals; run the program again with this dualmpi exec "
                         f"--report ({FORMAT})")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise InputError(f"{path}: not a dualmpi exec report (format {found!r}, expected "
                         f"{FORMAT!r}: write one with dualmpi exec --report FILE)")
    for key in ("spec", "nodes", "messages", "bytes", "hop_rounds", "busiest_links", "model",
                "program", "args"):
        if key not in data:
            raise InputError(f"{path}: a {FORMAT} report without {key!r}")
    return data
