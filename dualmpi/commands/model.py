"""``dualmpi model``: every collective's predicted time from closed forms, at any size."""

import math

from ..errors import DualmpiError
from ..model.closed_forms import NOT_DERIVED, network_formula, twin_hypercube
from ..model.formulas import PATTERNS, predict
from .common import format_table, load_topology, print_json, topology_arg

__all__ = ["add_parser", "main", "model_report", "format_seconds", "format_coeffs", "format_ratio",
           "format_sharing", "DEFAULTS", "SHARING_NODES"]

#: Link sharing is counted by simulating the schedules up to this many nodes.
SHARING_NODES = 512

#: Default link parameters: t_s (s), t_w (s per byte), t_h (s per hop), block size m (bytes).
DEFAULTS = {"ts": 2e-6, "tw": 1e-9, "th": 5e-8, "size": 1024}


def add_parser(sub):
    """Register the ``model`` subcommand."""
    p = sub.add_parser(
        "model",
        help="predicted time of every collective from the closed forms, at any size, "
        "next to the hypercube with as many nodes",
        description="Print, for bcast, scatter, allgather and alltoall on SPEC, the coefficients "
        "(ts, tw, th) of T = ts*t_s + tw*m*t_w + th*t_h and the predicted time, next to the same "
        "for the hypercube with the same number of nodes, and both networks' links per node and "
        "total links. The coefficients are closed forms checked against the schedules "
        "(dualmpi simulate): Table 2 of the dual-cube paper (corrected, one hop per single-hop "
        "step) for hypercubes and dual-cubes, T_M for the MC(2,m) total exchange, dualmpi's own "
        "derivations for the other metacube collectives (docs/model.md). Nothing is enumerated, "
        "so MC(3,3) with 134,217,728 nodes takes under a second. A coefficient without a "
        "verified closed form is shown as 'n/a (not derived)' (null in JSON). 'link sharing' "
        f"(up to {SHARING_NODES} nodes, from the simulated schedule) gives the steps in which one "
        "directed link carries 2+ messages of the step at different hop positions, the most "
        "messages on one link, and the time if they overlap for the whole step (docs/model.md, "
        "'Link sharing').",
        epilog="example: dualmpi model metacube:k=3,m=3 --size 1024",
    )
    p.add_argument("spec", type=topology_arg,
                   help="hypercube, dualcube or metacube spec, e.g. metacube:k=3,m=3")
    p.add_argument("--ts", default=str(DEFAULTS["ts"]), metavar="SECONDS",
                   help=f"start-up time per step t_s in seconds (default {DEFAULTS['ts']:g})")
    p.add_argument("--tw", default=str(DEFAULTS["tw"]), metavar="SECONDS",
                   help=f"time per byte t_w in seconds (default {DEFAULTS['tw']:g})")
    p.add_argument("--th", default=str(DEFAULTS["th"]), metavar="SECONDS",
                   help=f"time per hop t_h in seconds (default {DEFAULTS['th']:g})")
    p.add_argument("--size", default=str(DEFAULTS["size"]), metavar="BYTES",
                   help=f"block size m in bytes (default {DEFAULTS['size']})")
    p.add_argument("--json", action="store_true", help="print one JSON object (times in seconds)")
    p.set_defaults(func=main)


def _parameter(name, text):
    """Return ``text`` as a finite non-negative float, or raise :class:`DualmpiError`."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise DualmpiError(f"bad --{name} {text!r}: give a non-negative number of seconds")
    return value


def _size(text):
    """Return ``text`` as a non-negative integer byte count, or raise :class:`DualmpiError`."""
    try:
        value = int(text, 0)
    except ValueError:
        value = -1
    if value < 0:
        raise DualmpiError(f"bad --size {text!r}: give the block size as a non-negative integer "
                           "number of bytes")
    return value


def _network(topo):
    """Return nodes, links per node and total links of ``topo``."""
    p = topo.num_nodes
    return {"spec": topo.spec, "nodes": p, "links_per_node": topo.degree,
            "links": p * topo.degree // 2}


def _time(coeffs, params):
    """Return the predicted time in seconds, or None when a coefficient is not derived."""
    if any(c is None for c in coeffs):
        return None
    return float(predict(coeffs, params["ts"], params["tw"], params["th"], params["size"]))


def _sharing(topo, coll, params):
    """Return the link-sharing figures of ``coll`` on ``topo`` (simulated) or None if too large."""
    if topo.num_nodes > SHARING_NODES:
        return None
    from ..simulator import simulate

    sharing = simulate(topo, coll)["link_sharing"]
    return {"steps_shared": sharing["steps_shared"], "steps": len(sharing["per_step"]),
            "max": sharing["max"], "coeffs": sharing["model"],
            "time": _time(tuple(sharing["model"][k] for k in ("ts", "tw", "th")), params)}


def model_report(topo, ts, tw, th, size):
    """Return the model of every collective on ``topo`` and its hypercube twin, as a dict.

    Each row has ``link_sharing`` (None above :data:`SHARING_NODES` nodes): steps with 2+
    messages on one directed link, the most on one link, and the coefficients and time
    when those messages overlap for the whole step.
    """
    params = {"ts": ts, "tw": tw, "th": th, "size": size}
    ours = [network_formula(topo, coll) for coll in PATTERNS]  # unsupported families fail here
    cube = twin_hypercube(topo)
    rows = []
    for coll, (coeffs, source) in zip(PATTERNS, ours):
        cube_coeffs, cube_source = network_formula(cube, coll)
        t, t_cube = _time(coeffs, params), _time(cube_coeffs, params)
        rows.append({
            "collective": coll,
            "coeffs": coeffs.as_dict(),
            "time": t,
            "source": source,
            "hypercube_coeffs": cube_coeffs.as_dict(),
            "hypercube_time": t_cube,
            "hypercube_source": cube_source,
            "ratio": t / t_cube if t is not None and t_cube else None,
            "link_sharing": _sharing(topo, coll, params),
        })
    return {"spec": topo.spec, "parameters": params, "network": _network(topo),
            "hypercube": _network(cube), "rows": rows}


def format_seconds(t):
    """Return a time in s, ms or µs with four significant digits (``n/a`` text for None).

    >>> format_seconds(533.1234), format_seconds(4.2e-05), format_seconds(None)
    ('533.1 s', '42.00 µs', 'n/a (not derived)')
    """
    if t is None:
        return NOT_DERIVED
    for scale, unit in ((1.0, "s"), (1e-3, "ms")):
        if t >= scale:
            return f"{t / scale:#.4g} {unit}"
    return f"{t / 1e-6:#.4g} µs"


def format_coeffs(coeffs):
    """Return ``"ts, tw, th"`` (``n/a`` for a coefficient not derived).

    >>> format_coeffs({"ts": 6, "tw": 38, "th": None})
    '6, 38, n/a'
    """
    return ", ".join("n/a" if coeffs[k] is None else str(coeffs[k]) for k in ("ts", "tw", "th"))


def format_ratio(ratio):
    """Return a time ratio with two decimals, or ``n/a``."""
    return "n/a" if ratio is None else f"{ratio:.2f}"


def format_sharing(sharing):
    """Return the link-sharing figure as text.

    >>> format_sharing({"steps_shared": 19, "steps": 31, "max": 2, "time": 3.344e-3})
    '19/31 steps, max 2 (3.344 ms)'
    >>> format_sharing(None)
    'n/a (not simulated)'
    """
    if sharing is None:
        return "n/a (not simulated)"
    if not sharing["steps_shared"]:
        return f"none ({sharing['steps']} steps)"
    return (f"{sharing['steps_shared']}/{sharing['steps']} steps, max {sharing['max']} "
            f"({format_seconds(sharing['time'])})")


def _text(report):
    """Return the report as header lines and two tables."""
    net, cube, par = report["network"], report["hypercube"], report["parameters"]
    lines = [
        f"T = ts*t_s + tw*m*t_w + th*t_h with t_s = {par['ts']:g} s, t_w = {par['tw']:g} s/B, "
        f"t_h = {par['th']:g} s, m = {par['size']} B",
        "",
        format_table([(n["spec"], f"{n['nodes']:,}", n["links_per_node"], f"{n['links']:,}")
                      for n in (net, cube)],
                     header=("network", "nodes", "links per node", "links")),
        "",
    ]
    rows = [(r["collective"], format_coeffs(r["coeffs"]), format_seconds(r["time"]),
             format_coeffs(r["hypercube_coeffs"]), format_seconds(r["hypercube_time"]),
             format_ratio(r["ratio"]), format_sharing(r["link_sharing"]), r["source"])
            for r in report["rows"]]
    header = ("collective", f"{net['spec']} (ts, tw, th)", "time",
              f"{cube['spec']} (ts, tw, th)", "time", "ratio", "link sharing", "source")
    lines.append(format_table(rows, header=header))
    return "\n".join(lines)


def main(args):
    """Print the model of every collective on SPEC and its hypercube twin; exit 0."""
    params = {name: _parameter(name, getattr(args, name)) for name in ("ts", "tw", "th")}
    size = _size(args.size)
    report = model_report(load_topology(args.spec), size=size, **params)
    if args.json:
        print_json(report)
    else:
        print(_text(report))
    return 0
