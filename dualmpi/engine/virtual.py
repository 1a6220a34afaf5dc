"""Virtual model clocks replayed over a schedule: the papers' cost of a run, computed (pure).

The clocks of :mod:`dualmpi.model.clock` are deterministic: they depend on the
schedule and the block size only, not on what the hardware did.  So the engine does
not carry them in messages; this module replays the schedule node by node, round by
round, in the order the message-passing run follows, and returns the coefficients
``(a, b, c)`` of ``T = a t_s + b m t_w + c t_h`` (three unit clocks) and, for given
parameters, the predicted time.
"""

from ..collectives.schedule import message_hops, node_programs
from ..model.clock import UNIT_CLOCKS, ClockSet

__all__ = ["replay_clocks", "virtual_summary"]


def virtual_summary(finish, size, contention):
    """Turn the unit clocks' finishing times into model coefficients (tw in blocks of ``size``)."""
    a, b, c = (float(x) for x in finish[:3])
    out = {"ts": _tidy(a), "tw": _tidy(b / size) if size else None, "th": _tidy(c),
           "contention_delay": [float(d) for d, _ in contention],
           "delayed_hops": [int(n) for _, n in contention]}
    if len(finish) > 3:
        out["time"] = float(finish[3])
    return out


def _tidy(x):
    """Return ``x`` rounded to an integer when it is one up to float noise (a count)."""
    r = round(x)
    return float(r) if abs(x - r) <= 1e-9 * max(1.0, abs(x)) else x


def _first_hop(tr):
    """True when ``tr`` is its message's first hop."""
    return tr.header is None or tr.header[0] == tr.src


def _last_hop(tr):
    """True when ``tr`` is its message's last hop."""
    return tr.header is None or tr.header[1] == tr.dst


def replay_clocks(schedule, size, clock=None):
    """Return the virtual-clock summary of ``schedule`` with ``size``-byte blocks.

    Node by node in each round, sends then receives, exactly as the message-passing
    run orders them; a routed message's clock state travels with it from hop to hop.
    ``clock`` (a :class:`~dualmpi.model.clock.ClockParams`) adds a clock with real
    parameters whose finishing time is ``["time"]``.

    >>> from dualmpi.collectives import build_schedule
    >>> from dualmpi.topology import DualCube
    >>> v = replay_clocks(build_schedule("bcast", DualCube(3), 0), 64)
    >>> v["ts"], v["tw"], v["th"]
    (6.0, 6.0, 6.0)
    """
    topo = schedule.topo
    p = topo.num_nodes
    if p == 0:
        return {}
    programs = node_programs(schedule)
    params = UNIT_CLOCKS + ((clock,) if clock is not None else ())
    clocks = [ClockSet(params) for _ in range(p)]
    pending = [{} for _ in range(p)]
    hops = message_hops(schedule)
    cursor = [0] * p
    for t in range(schedule.num_rounds):
        wire = {}
        active = []
        for u in range(p):
            prog = programs[u]
            if cursor[u] < len(prog) and prog[cursor[u]].index == t:
                active.append(u)
                for tr in prog[cursor[u]].sends:
                    nbytes = len(tr.blocks) * size
                    trailer = clocks[u].depart(tr.dst, nbytes, tr.blocks, hops.get(tr.header, 1),
                                               None if _first_hop(tr) else
                                               pending[u].pop(tr.header, None))
                    wire.setdefault((u, tr.dst), []).append(trailer)
        for u in active:
            for tr in programs[u][cursor[u]].recvs:
                queue = wire.get((tr.src, u))
                if not queue:
                    continue  # a dropped send (the run reports it)
                trailer = queue.pop(0)
                if not _last_hop(tr):
                    pending[u][tr.header] = trailer
                clocks[u].arrive(tr.blocks, len(tr.blocks) * size, trailer, _last_hop(tr))
            cursor[u] += 1
    finish = [max(vals) for vals in zip(*(c.finish() for c in clocks))]
    contention = [tuple(map(sum, zip(*col))) for col in zip(*(c.contention() for c in clocks))]
    return virtual_summary(finish, size, contention)
