"""The papers' cost model as a virtual clock carried by every message (pure Python).

Each node keeps a :class:`NodeClock`.  A message leaves its source when the source's
port is free and its data has arrived; it carries its *head time* from hop to hop.
Under cut-through switching a message of ``n`` bytes over ``d`` links arrives at
``t_s + n*t_w + d*t_h`` after it starts; under store-and-forward every hop costs
``t_s + n*t_w``.  A directed link busy with an earlier message delays the head of a
later one (contention).  How long a link stays busy is the ``contention`` mode:

* ``physical``: while the message's body streams through it (``n*t_w`` after the
  head), as in a real wormhole network;
* ``slot``: only during the head's hop slot (``t_h``), the papers' notion of a
  conflict (two messages on one link in the same step at the same hop index).

Under ``slot`` a conflict-free schedule reproduces the papers' formulas exactly;
``physical`` additionally reveals messages of one step that use a link at
*different* hop indices, whose bodies overlap when ``m*t_w`` exceeds the hop
distance times ``t_h``.  The source's port stays busy until its message has
arrived (one-port, one message per step).

References
----------
Y. Li, S. Peng, W. Chu, "Efficient Collective Communications in Dual-cube", Section 3
(communication model: one-port, linear cost, cut-through, T = t_s + m t_w + d t_h).
"""

from dataclasses import dataclass, field

__all__ = ["ClockParams", "NodeClock", "ClockSet", "SWITCHING", "UNIT_CLOCKS", "parse_shape"]

#: Switching techniques: how a multi-hop message crosses intermediate nodes.
SWITCHING = ("cut-through", "store-and-forward")


@dataclass(frozen=True)
class ClockParams:
    """Link parameters: start-up ``ts`` (s), per-byte ``tw`` (s/byte), per-hop ``th`` (s)."""

    ts: float = 1.0
    tw: float = 0.0
    th: float = 0.0
    switching: str = "cut-through"
    contention: str = "physical"


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
        else:
            start, head = trailer
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
        with an earlier booking delays the message (contention).
        """
        booked = self.link_busy.setdefault(dst, [])
        go = head
        eps = 1e-12 * max(1.0, abs(head))
        moved = True
        while moved:
            moved = False
            for a, b in booked:
                if go < b - eps and go + hold > a + eps:
                    go, moved = b, True
        if go > head + eps:
            self.contention += go - head
            self.delayed_hops += 1
        if hold > 0:
            booked.append((go, go + hold))
        return go

    def arrive(self, blocks, nbytes, trailer, last_hop):
        """Record a message's arrival; for its final hop, return the time its blocks are usable."""
        if not last_hop:
            return None
        p = self.params
        _, head = trailer
        done = head + nbytes * p.tw if p.switching == "cut-through" else head
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
