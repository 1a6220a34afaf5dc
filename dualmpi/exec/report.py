"""The report of a ``dualmpi exec`` run: what crossed which links, and its model time (pure).

Each rank contributes a record -- the stand-in's calls per method and the link counts of
its networks' :meth:`dualmpi.Comm.stats` (a rank counts what its nodes send, forwarded
messages included) -- and :func:`build` sums them into the report that rank 0 prints
(:func:`text`) and ``--report FILE`` writes as JSON (:data:`FORMAT`, docs/results.md).

The model time prices the run with the papers' link parameters (``t_s``, ``t_w``, ``t_h``):
every message a link carries holds it ``t_s + n t_w`` (each hop is a message of its own, as
the emulation sends it), so the run takes at least its busiest link's total, and every hop
round of the collectives' schedules adds ``t_h``::

    T = max over directed links l of (messages_l * t_s + bytes_l * t_w) + hop_rounds * t_h

A bound from the counts, not a replay: it ignores waiting between calls and computing, and
messages that cross different links at once overlap in it.  ``dualmpi simulate`` replays the
papers' collectives step by step.
"""

import json

from ..errors import InputError

__all__ = ["FORMAT", "empty_stats", "add_stats", "record_stats", "build", "model_time", "text",
           "compare", "read", "busiest"]

#: Format tag of ``--report`` files.
FORMAT = "dualmpi-exec/1"

#: Busiest links listed in the report.
BUSIEST = 5

_COUNTS = ("messages", "bytes", "rounds", "steps", "collectives", "checksum_failures")


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


def model_time(links, hop_rounds, clock):
    """Return the model time of the counts: ``{time, link_time, hop_time, busiest_link}``.

    ``links`` are ``[u, v, messages, bytes]`` rows (summed over the ranks), ``clock``
    ``{"ts", "tw", "th"}`` in seconds; a total without per-link detail (a streamed total
    exchange counts under the link ``["all", "all"]``) is left out of the maximum.

    >>> m = model_time([[0, 1, 10, 1000], [1, 0, 1, 5000]], 3, {"ts": 2e-6, "tw": 1e-9, "th": 5e-8})
    >>> round(m["time"] * 1e6, 3), m["busiest_link"]
    (21.15, [0, 1])
    """
    best, where = 0.0, None
    for u, v, m, n in links:
        if not isinstance(u, int):
            continue
        t = m * clock["ts"] + n * clock["tw"]
        if where is None or t > best:
            best, where = t, [u, v]
    hop = hop_rounds * clock["th"]
    return {"time": best + hop, "link_time": best, "hop_time": hop, "busiest_link": where}


def build(records, topo, q, clock, meta=None, program=None, args=(), status=0):
    """Return the report of a run from every rank's record (rank order).

    Each record: ``{"calls": {method: count}, "stats": record_stats(...), "refusals": n,
    "refusal": line or None}``.  ``clock`` is the model's ``{ts, tw, th}``.
    """
    calls, links = {}, {}
    for rec in records:
        for name, n in rec["calls"].items():
            calls[name] = calls.get(name, 0) + int(n)
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
        "messages": sum(m for _, _, m, _ in rows),
        "bytes": sum(n for _, _, _, n in rows),
        "links_used": len(rows),
        "links": rows,
        "busiest_links": busiest(rows),
        "hop_rounds": hop_rounds,
        "steps": max((s["steps"] for s in per_rank), default=0),
        "collectives": max((s["collectives"] for s in per_rank), default=0),
        "checksum_failures": sum(s["checksum_failures"] for s in per_rank),
        "refused_calls": sum(int(rec.get("refusals", 0)) for rec in records),
        "refusal": refusals[0] if refusals else None,
        "model": dict(model_time(rows, hop_rounds, clock), clock=dict(clock)),
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
    lines.append(f"  link messages {r['messages']}, bytes {r['bytes']} over {r['links_used']} "
                 "directed links" + ("; busiest: " + ", ".join(map(_link, r["busiest_links"]))
                                     if r["busiest_links"] else ""))
    lines.append(f"  hop rounds {r['hop_rounds']} (paper steps {r['steps']}, "
                 f"{r['collectives']} collective calls per rank)")
    m, c = r["model"], r["model"]["clock"]
    where = "" if m["busiest_link"] is None else \
        f" on {m['busiest_link'][0]}->{m['busiest_link'][1]}"
    lines.append(f"  model time {_si(m['time'])} at t_s = {_si(c['ts'])}, "
                 f"t_w = {c['tw'] * 1e9:g} ns/B, t_h = {_si(c['th'])}: busiest link "
                 f"{_si(m['link_time'])}{where} + hop rounds {_si(m['hop_time'])}")
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
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise InputError(f"{path}: not a dualmpi exec report (format {found!r}, expected "
                         f"{FORMAT!r}: write one with dualmpi exec --report FILE)")
    for key in ("spec", "nodes", "messages", "bytes", "hop_rounds", "busiest_links", "model",
                "program", "args"):
        if key not in data:
            raise InputError(f"{path}: a {FORMAT} report without {key!r}")
    return data
