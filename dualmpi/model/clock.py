"""The papers' cost model as a virtual clock carried by every message (pure Python).

Each node keeps a :class:`NodeClock`.  A message leaves its source when the source's
port is free and its data has arrived; it carries its *head time* from hop to hop.
Under cut-through switching a message of ``n`` bytes over ``d`` links arrives at
``t_s + n*t_w + d*t_h`` after it starts; under store-and-forward every hop costs
``t_s + n*t_w``.  Messages that use one directed link at the same time contend for
it; the ``contention`` mode says how (cut-through):

* ``shared`` (default): the link's bandwidth is shared.  A message's head crosses
  each link in ``t_h`` and is never held; its body streams through the link from
  the head's arrival, ``n*t_w`` of link time, filling the time the link is not
  carrying other bodies (work-conserving: the link never idles while a body
  waits, and never carries more than one byte per ``t_w``).  Bodies that overlap
  on a link therefore take ``k*n*t_w`` together, as under equal sharing, and the
  tail of the last one leaves when it would under equal sharing; the delay is
  carried on to the destination in the message's trailer (its *tail* time).
* ``physical``: the link is held while a body streams through it and a later
  message's *head* waits until it is free (a wormhole network without virtual
  channels);
* ``slot``: a link is busy only during the head's hop slot (``t_h``): the papers'
  notion of a conflict (two messages on one link in the same step at the same hop
  index).

Under ``slot`` a conflict-free schedule reproduces the papers' formulas exactly;
``shared`` and ``physical`` additionally reveal messages of one step that use a
link at *different* hop indices, whose bodies overlap when ``m*t_w`` exceeds the
hop distance times ``t_h`` (docs/model.md, "Link sharing").  The source's port
stays busy until its message has arrived (one-port, one message per step).

A message's trailer is ``(start, head)``: when it left its source (under
``shared``: when its tail left the previous link) and when its head reaches the
next node.

References
----------
Y. Li, S. Peng, W. Chu, "Efficient Collective Communications in Dual-cube", Section 3
(communication model: one-port, linear cost, cut-through, T = t_s + m t_w + d t_h).
"""

import bisect
from dataclasses import dataclass, field
from operator import itemgetter

__all__ = ["ClockParams", "NodeClock", "ClockSet", "SWITCHING", "CONTENTION", "UNIT_CLOCKS",
           "parse_shape", "schedule_time"]

#: Switching techniques: how a multi-hop message crosses intermediate nodes.
SWITCHING = ("cut-through", "store-and-forward")

#: Contention models of cut-through links (see the module docstring).
CONTENTION = ("shared", "physical", "slot")


@dataclass(frozen=True)
class ClockParams:
    """Link parameters: start-up ``ts`` (s), per-byte ``tw`` (s/byte), per-hop ``th`` (s)."""

    ts: float = 1.0
    tw: float = 0.0
    th: float = 0.0
    switching: str = "cut-through"
    contention: str = "shared"

    def __post_init__(self):
        if self.switching not in SWITCHING:
            raise ValueError(f"unknown switching {self.switching!r} ({', '.join(SWITCHING)})")
        if self.contention not in CONTENTION:
            raise ValueError(f"unknown contention model {self.contention!r} ({', '.join(CONTENTION)})")


def parse_shape(text):
    """Parse ``ts=..,tw=..,th=..`` (seconds, seconds per byte, seconds) into a dict.

    >>> parse_shape("ts=1e-3,tw=1e-8,th=2e-4")
    {'ts': 0.001, 'tw': 1e-08, 'th': 0.0002}
    """
    out = {"ts": 0.0, "tw": 0.0, "th": 0.0}
    for item in filter(None, (s.strip() for s in str(text).split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in out:
            raise ValueError(f"bad link parameter {item!r}: expected ts=S, tw=S_PER_BYTE, th=S")
        try:
            out[key] = float(value)
        except ValueError:
            raise ValueError(f"bad value in {item!r}: not a number") from None
        if out[key] < 0 or out[key] != out[key] or out[key] > 10:
            raise ValueError(f"bad value in {item!r}: must be between 0 and 10 seconds")
    return out


#: a booking's end (its intervals are ``(start, end)``)
_end = itemgetter(1)


@dataclass
class NodeClock:
    """One node's virtual time: its ports, its outgoing links, and when its blocks arrived."""

    params: ClockParams
    send_free: float = 0.0
    recv_free: float = 0.0
    link_busy: dict = field(default_factory=dict)
    block_time: dict = field(default_factory=dict)
    contention: float = 0.0
    delayed_hops: int = 0

    def ready(self, blocks):
        """Return when all ``blocks`` are available at this node (initial blocks: time 0)."""
        return max((self.block_time.get(k, 0.0) for k in blocks), default=0.0)

    def depart(self, dst, nbytes, blocks, hops, trailer):
        """Send one hop to ``dst``; return the trailer ``(start, head)`` the message carries on.

        ``trailer`` is ``None`` at the message's source, else what arrived with it.
        """
        p = self.params
        if trailer is None:  # the source: wait for the port and the data
            start = max(self.send_free, self.ready(blocks))
            head = start + (p.ts if p.switching == "cut-through" else 0.0)
            total = (p.ts + nbytes * p.tw + hops * p.th if p.switching == "cut-through"
                     else hops * (p.ts + nbytes * p.tw))
            self.send_free = start + total
            tail = None
        else:
            start, head = trailer
            tail = start
        if p.switching == "cut-through" and p.contention == "shared":
            work = nbytes * p.tw
            # the body enters the link with the head, and no faster than it left the last one
            begin = head if tail is None else max(head, tail + p.th - work)
            end = self._stream(dst, begin, work)
            if tail is None:  # one port: the next message waits until this body has left it
                self.send_free = max(self.send_free, end)
            return (end, head + p.th)
        if p.switching == "cut-through":
            hold = p.th if p.contention == "slot" else nbytes * p.tw
            go = self._reserve(dst, head, hold)
            return (start, go + p.th)
        # store-and-forward: every hop is a full send of t_s + n t_w
        go = self._reserve(dst, head, p.ts + nbytes * p.tw)
        return (start, go + p.ts + nbytes * p.tw)

    def _reserve(self, dst, head, hold):
        """Book the link to ``dst`` for ``hold`` seconds at the earliest time >= ``head``.

        Bookings are kept as intervals, so the result does not depend on the order in
        which a node handles messages (it may forward a later one first); an overlap
        with an earlier booking delays the message (contention).  The intervals are
        disjoint and kept in order, so a booking looks only at those that end after
        ``head``, from the first one on (a bisection), up to the first gap that fits.
        """
        booked = self.link_busy.setdefault(dst, [])
        go = head
        eps = 1e-12 * max(1.0, abs(head))
        i = bisect.bisect_right(booked, go + eps, key=_end)  # the first that ends after go
        while i < len(booked):
            a, b = booked[i]
            if go + hold <= a + eps:  # fits before it, so before every later one too
                break
            if go < b - eps:
                go = b
            i += 1
        if go > head + eps:
            self.contention += go - head
            self.delayed_hops += 1
        if hold > 0:
            bisect.insort(booked, (go, go + hold))
        return go

    def _stream(self, dst, begin, work):
        """Stream ``work`` seconds of body through the link to ``dst`` from ``begin``; return its end.

        The body fills the gaps between the link's earlier bookings (work-conserving
        sharing); the time beyond ``begin + work`` is this message's contention delay.
        """
        if work <= 0:
            return begin
        booked = self.link_busy.setdefault(dst, [])
        booked.sort()
        t, rest, new = begin, work, []
        eps = 1e-12 * max(1.0, abs(begin) + work)
        for a, b in booked:
            if b <= t:
                continue
            if a > t:
                take = min(a - t, rest)
                new.append((t, t + take))
                t, rest = t + take, rest - take
                if rest <= eps:
                    break
            t = max(t, b)
        if rest > eps:
            new.append((t, t + rest))
            t += rest
        booked.extend(new)
        if t > begin + work + eps:
            self.contention += t - (begin + work)
            self.delayed_hops += 1
        return t

    def arrive(self, blocks, nbytes, trailer, last_hop):
        """Record a message's arrival; for its final hop, return the time its blocks are usable."""
        if not last_hop:
            return None
        p = self.params
        first, head = trailer
        done = head + nbytes * p.tw if p.switching == "cut-through" else head
        if p.switching == "cut-through" and p.contention == "shared":
            done = max(done, first + p.th)  # the tail, delayed by sharing, one hop later
        done = max(done, self.recv_free + nbytes * p.tw)
        self.recv_free = done
        for k in blocks:
            self.block_time[k] = max(self.block_time.get(k, 0.0), done)
        return done

    def finish(self):
        """Return this node's completion time: its last arrival or the end of its last send."""
        return max([self.send_free, self.recv_free, *self.block_time.values()])


#: Clocks with one unit parameter each: their finishing times are the coefficients a, b, c of
#: T = a*t_s + b*t_w + c*t_h (b in bytes) when the schedule is free of contention.
UNIT_CLOCKS = (
    ClockParams(1.0, 0.0, 0.0, contention="slot"),
    ClockParams(0.0, 1.0, 0.0, contention="slot"),
    ClockParams(0.0, 0.0, 1.0, contention="slot"),
)


class ClockSet:
    """Several virtual clocks run side by side on one node (one per parameter set).

    Messages carry a flat trailer of ``2 * len(params)`` floats: each clock's
    ``(start, head)``.
    """

    def __init__(self, params):
        self.clocks = [NodeClock(p) for p in params]

    @property
    def width(self):
        """Number of floats in a message trailer."""
        return 2 * len(self.clocks)

    def depart(self, dst, nbytes, blocks, hops, trailer):
        """Send one hop on every clock; return the new flat trailer."""
        out = []
        for n, clock in enumerate(self.clocks):
            prev = None if trailer is None else (trailer[2 * n], trailer[2 * n + 1])
            out.extend(clock.depart(dst, nbytes, blocks, hops, prev))
        return out

    def arrive(self, blocks, nbytes, trailer, last_hop):
        """Record an arrival on every clock."""
        for n, clock in enumerate(self.clocks):
            clock.arrive(blocks, nbytes, (trailer[2 * n], trailer[2 * n + 1]), last_hop)

    def finish(self):
        """Return each clock's completion time."""
        return [clock.finish() for clock in self.clocks]

    def contention(self):
        """Return each clock's total contention delay and number of delayed hops."""
        return [(clock.contention, clock.delayed_hops) for clock in self.clocks]


def schedule_time(schedule, size, params):
    """Return the virtual time of ``schedule`` with ``size``-byte blocks, without moving data.

    Replays every transfer of the schedule on one :class:`NodeClock` per node, in the
    order the executors use (each round's sends, then its receives), so the result is
    the ``time`` a run with ``--model`` reports.

    Parameters
    ----------
    schedule : Schedule
        A collective's schedule (:func:`dualmpi.collectives.build_schedule`).
    size : int
        Block size in bytes (a message of k blocks has k * size bytes).
    params : ClockParams
        Link parameters, switching and contention model.

    Returns
    -------
    dict
        ``time`` (s), ``contention_delay`` (s, summed over hops) and ``delayed_hops``.

    References
    ----------
    Y. Li, S. Peng, W. Chu, "Efficient Collective Communications in Dual-cube", Section 3
    (one-port, cut-through, T = t_s + m t_w + d t_h).

    Examples
    --------
    >>> from dualmpi.collectives import build_schedule
    >>> from dualmpi.topology import from_spec
    >>> sched = build_schedule("bcast", from_spec("hypercube:n=3"), 0)
    >>> t = schedule_time(sched, 1000, ClockParams(1e-6, 1e-9, 1e-7))["time"]
    >>> round(t * 1e6, 9)                            # 3 steps of t_s + m t_w + t_h, in µs
    6.3
    """
    from ..collectives.schedule import message_hops

    hops = message_hops(schedule)
    clocks = [NodeClock(params) for _ in range(schedule.topo.num_nodes)]
    pending = {}
    for rnd in schedule.rounds:
        arriving = []
        for tr in rnd.transfers:
            first = tr.header is None or tr.header[0] == tr.src
            trailer = None if first else pending.pop((tr.src, tr.header))
            nbytes = len(tr.blocks) * size
            out = clocks[tr.src].depart(tr.dst, nbytes, tr.blocks, hops.get(tr.header, 1), trailer)
            arriving.append((tr, nbytes, out))
        for tr, nbytes, out in arriving:
            last = tr.header is None or tr.header[1] == tr.dst
            if not last:
                pending[(tr.dst, tr.header)] = out
            clocks[tr.dst].arrive(tr.blocks, nbytes, out, last)
    return {"time": max((c.finish() for c in clocks), default=0.0),
            "contention_delay": sum(c.contention for c in clocks),
            "delayed_hops": sum(c.delayed_hops for c in clocks)}
