"""Reduction to one node: the broadcast tree reversed (pure).

In a broadcast every node first receives the message from one neighbour, in one
round; those first arrivals form a spanning tree whose edges are links.  Run
backwards — the last round first, every edge turned round — the tree gathers: a
node sends its partial result to the neighbour it first heard the broadcast from,
after every node it would have forwarded the broadcast to has sent it theirs, and
the receiver combines it with its own.  The same reversal turns an all-to-all
broadcast into a reduce-scatter (:mod:`dualmpi.collectives.allreduce`).

Only the nodes that play a rank's contribution start with data (with ``q`` nodes per
rank, the first node of each rank); a node that has nothing yet when a partial
arrives stores it instead of combining, and a node with nothing sends nothing.

The reduction operator is applied by the engine: these schedules say only which block
goes where and whether the receiver combines it (``Transfer.reduce``).  It must be
commutative and associative (every MPI predefined operation is): the tree combines
in its own order, not in rank order.

References
----------
Y. Li, S. Peng, W. Chu, "Efficient collective communications in dual-cube", J.
Supercomputing 28 (2004): the broadcast trees (Algorithm 1) and the remark that the
all-to-all broadcast pattern serves reduction and prefix sums.
"""

from .registry import Collective
from .schedule import ALL, REDUCED, Round, Schedule, Transfer

__all__ = ["COLLECTIVES", "build", "contributors", "first_arrivals", "reverse_rounds", "paper_steps"]


def contributors(p, q=1):
    """Return the nodes that start with a rank's contribution: the first node of each rank.

    >>> list(contributors(8, 2))
    [0, 2, 4, 6]
    """
    return range(0, p, q)


def first_arrivals(schedule):
    """Return ``{(node, block): (round, transfer index, sender)}``: where each node first got each block.

    Blocks a node starts with are not listed.

    >>> from dualmpi.collectives import build_schedule
    >>> from dualmpi.topology import Hypercube
    >>> sorted(first_arrivals(build_schedule("bcast", Hypercube(2), 0)).items())
    [((1, (0, -1)), (0, 0, 0)), ((2, (0, -1)), (1, 0, 0)), ((3, (0, -1)), (1, 1, 1))]
    """
    from .schedule import initial_blocks

    topo = schedule.topo
    held = {u: set(initial_blocks(schedule.collective, topo, schedule.root, u))
            for u in range(topo.num_nodes)}
    first = {}
    for t, rnd in enumerate(schedule.rounds):
        for i, tr in enumerate(rnd.transfers):
            for b in tr.blocks:
                if b not in held[tr.dst] and (tr.dst, b) not in first:
                    first[(tr.dst, b)] = (t, i, tr.src)
        for tr in rnd.transfers:
            held[tr.dst].update(tr.blocks)
    return first


def reverse_rounds(schedule, rename, defined):
    """Return the reversed rounds of ``schedule``: every first arrival turned into a combining send.

    ``rename`` maps a block of the forward schedule to its reduction block, and
    ``defined`` (``{node: set of reduction blocks}``, updated) says what each node holds
    a partial of.  Forward round ``t`` becomes reversed round ``T - 1 - t``; a forward
    transfer ``s -> v`` becomes ``v -> s`` carrying the partials of the blocks ``v``
    first got from it, each combined by ``s`` (or stored, if ``s`` holds none yet).
    """
    first = first_arrivals(schedule)
    by_transfer = {}
    for (v, b), (t, i, s) in first.items():
        by_transfer.setdefault((t, i), []).append(b)
    out = []
    T = len(schedule.rounds)
    for t in reversed(range(T)):
        rnd = schedule.rounds[t]
        back = Round(step=0, hop=0)
        for i, tr in enumerate(rnd.transfers):
            got = by_transfer.get((t, i))
            if not got:
                continue
            v, s = tr.dst, tr.src
            keys = sorted(rename(b) for b in got if rename(b) in defined[v])
            if not keys:
                continue
            flags = tuple(k in defined[s] for k in keys)
            defined[s].update(keys)
            back.transfers.append(Transfer(v, s, tuple(keys), reduce=flags))
        out.append(back)
    return out


def paper_steps(topo):
    """Return the broadcast's step count, which the reversed tree keeps."""
    from . import paper_steps as steps

    return steps("bcast", topo)


def build(topo, root=0, q=1, variant="corrected"):
    """Return the reduction to ``root`` of the contributions of every ``q``-th node.

    The broadcast of ``root`` (:func:`dualmpi.collectives.build_schedule`) reversed;
    ``root`` must be a contributing node.  Rounds that carry nothing are dropped.

    Examples
    --------
    >>> from dualmpi.topology import DualCube
    >>> s = build(DualCube(2), root=0)
    >>> s.collective, s.num_rounds, s.num_messages
    ('reduce', 4, 7)
    >>> s.rounds[0].transfers[0].reduce
    (True,)
    """
    from . import build_schedule

    forward = build_schedule("bcast", topo, root, variant)
    defined = {u: set() for u in range(topo.num_nodes)}
    for c in contributors(topo.num_nodes, q):
        defined[c].add((REDUCED, ALL))
    rounds = [r for r in reverse_rounds(forward, lambda b: (REDUCED, ALL), defined)
              if r.transfers]
    for step, rnd in enumerate(rounds):
        rnd.step = step
    initial = {c: [(REDUCED, ALL)] for c in contributors(topo.num_nodes, q)}
    return Schedule("reduce", f"reversed broadcast tree ({forward.algorithm})", topo, root,
                    rounds, forward.steps, initial=initial)


def _build(topo, root, variant, q, algorithm):
    return build(topo, root, q, variant)


#: ``MPI_Reduce``: the broadcast tree reversed, combining on the way to the root.
COLLECTIVES = (Collective("reduce", "Reduce", "reduce", _build, rooted=True, combines=True,
                          emulated=False, networks="any", paper_steps=paper_steps),)
