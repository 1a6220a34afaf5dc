"""Schedules: an algorithm as synchronous rounds of link transfers, and its per-node programs.

A *block* is one unit of user data, named by ``(origin, target)``: ``target`` is the
destination node for personalized data and :data:`ALL` for broadcast data.  A
:class:`Transfer` moves a tuple of blocks, concatenated into one message, across
one link in one round.  A :class:`Schedule` lists every transfer of a collective;
:func:`node_program` projects it onto one node: in round ``t`` the node sends these
blocks to these neighbours and expects those blocks from those neighbours.  The engine
(:mod:`dualmpi.engine`) compiles schedules into per-rank plans; the virtual clocks
replay node programs.

Rounds are numbered globally.  Each round belongs to a paper *step* (the papers'
unit of time: one ``t_s + m t_w`` startup) and has a *hop* index inside that step
(0 for single-hop steps; ``h`` for the ``h``-th link of multi-hop messages under
cut-through routing).
"""

from dataclasses import dataclass, field

__all__ = [
    "ALL",
    "REDUCED",
    "COLLECTIVES",
    "Transfer",
    "Round",
    "Schedule",
    "NodeRound",
    "node_program",
    "node_programs",
    "expected_blocks",
    "initial_blocks",
    "count_conflicts",
    "message_hops",
    "base_collective",
]

#: ``target`` of a broadcast block: the data of ``origin`` meant for every node.
ALL = -1

#: ``origin`` of a reduction block: ``(REDUCED, j)`` is segment ``j`` of a sum over all nodes.
REDUCED = -2

#: The four collectives of the papers, by their CLI names.
COLLECTIVES = ("bcast", "scatter", "allgather", "alltoall")

def base_collective(name):
    """Return the buffer layout of collective ``name``: the blocks it starts from and delivers.

    >>> base_collective("ring-allreduce"), base_collective("bcast"), base_collective("gatherv")
    ('allreduce', 'bcast', 'gather')
    """
    from .registry import get

    return get(name).layout


@dataclass(frozen=True)
class Transfer:
    """One message: ``blocks`` sent from ``src`` to its neighbour ``dst``."""

    src: int
    dst: int
    blocks: tuple
    #: ``(origin, target)`` of the routed message this hop belongs to, for multi-hop routes;
    #: further items (a tag making the header unique) are passed on to the router.
    header: tuple = None
    #: When True the receiver combines the blocks into its own copies (a reduction step);
    #: a tuple gives one flag per block (False: the block is stored, as in a plain transfer).
    reduce: object = False
    #: The blocks as the receiver files them, when they differ from ``blocks`` (an
    #: exclusive scan stores a neighbour's contribution under a block of its own).
    into: tuple = None
    #: True for a routed message carried by the nodes in between in transit buffers: only
    #: the last hop's receiver (``header[1]``) holds (or combines) its one block.
    transit: bool = False

    def reduce_flags(self):
        """Return one reduce flag per block."""
        if isinstance(self.reduce, tuple):
            return self.reduce
        return (bool(self.reduce),) * len(self.blocks)


@dataclass
class Round:
    """The transfers of one synchronous round, with the paper step and hop it belongs to."""

    step: int
    hop: int
    transfers: list = field(default_factory=list)


@dataclass
class Schedule:
    """A collective as rounds of transfers on one topology.

    Attributes
    ----------
    collective : str
        One of :data:`COLLECTIVES`.
    algorithm : str
        Name and source of the algorithm, e.g. ``"dual-cube Algorithm 1"``.
    topo : Topology
        The network.
    root : int or None
        Root of rooted collectives.
    rounds : list of Round
        All rounds, in execution order.
    steps : int
        Number of paper steps (the round count the paper states).
    router : callable or None
        ``router(current, src, dst)``: the next hop a node chooses for a routed message
        from its header; ``None`` means the topology's own :meth:`Topology.next_hop`.
    initial : dict or None
        The blocks each node starts with, when not :func:`initial_blocks`'s.
    """

    collective: str
    algorithm: str
    topo: object
    root: object
    rounds: list
    steps: int
    router: object = None
    #: ``{node: [blocks]}`` each node starts with, when not those of :func:`initial_blocks`
    #: (reductions: only the nodes that play a rank's contribution hold one).
    initial: dict = None

    def next_hop(self, current, src, dst, *tag):
        """Return the next hop node ``current`` chooses for the message ``src -> dst``.

        ``tag`` holds the header's further items, if any; only a ``router`` sees them.
        """
        if self.router is not None:
            return self.router(current, src, dst, *tag)
        return self.topo.next_hop(current, src, dst)

    @property
    def num_rounds(self):
        """Number of synchronous rounds (steps times hops for routed steps)."""
        return len(self.rounds)

    @property
    def num_messages(self):
        """Number of link transfers (a message forwarded over h links counts h times)."""
        return sum(len(r.transfers) for r in self.rounds)

    def transfers(self):
        """Yield ``(round_index, Round, Transfer)`` for every transfer."""
        for t, rnd in enumerate(self.rounds):
            for tr in rnd.transfers:
                yield t, rnd, tr


def _alive(topo, u):
    """Return False for a failed node of a faulty topology."""
    alive = getattr(topo, "alive", None)
    return True if alive is None else alive(u)


def _reaches(topo, a, b):
    """Return True when ``b`` can be reached from ``a`` (always, without faults)."""
    reachable = getattr(topo, "reachable", None)
    return True if reachable is None else _alive(topo, a) and reachable(a, b)


def initial_blocks(collective, topo, root, u):
    """Return the blocks node ``u`` holds before the collective starts.

    As the collective's description says (:mod:`dualmpi.collectives.registry`); e.g.
    ``ring-allreduce``: every node holds its own contribution to each of the p segments
    ``(REDUCED, j)``, and transfers with ``reduce=True`` add into the receiver's copy.
    On a faulty topology failed nodes hold nothing and nothing is meant for them.
    """
    if not _alive(topo, u):
        return []
    held = _described(collective, "initial")(topo, root, u)
    if hasattr(topo, "alive") and collective in ("scatter", "alltoall"):
        held = [key for key in held if _alive(topo, key[1])]
    return held


def expected_blocks(collective, topo, root, u):
    """Return the blocks node ``u`` must hold when the collective ends (besides its own).

    On a faulty topology: nothing for a failed node, and only blocks whose origin can
    still reach ``u`` (the others are reported as undeliverable).
    """
    if not _alive(topo, u):
        return []
    want = _described(collective, "expected")(topo, root, u)
    if hasattr(topo, "alive"):
        want = [key for key in want if key[0] < 0 or key[0] == u or _reaches(topo, key[0], u)]
    return want


def _described(collective, what):
    """Return the description's ``initial`` or ``expected`` function of ``collective``."""
    from .registry import get

    fn = getattr(get(collective), what)
    if fn is None:
        raise ValueError(f"{collective} does not say which blocks its nodes start or end with "
                         "(its schedule does)")
    return fn


@dataclass
class NodeRound:
    """One round of one node's program: the :class:`Transfer` objects it sends and receives.

    ``send_ords`` / ``recv_ords`` number the transfers that share one directed link in
    this round (0 unless the round has a conflict), so both ends can tell them apart.
    """

    index: int
    step: int
    hop: int
    sends: list
    recvs: list
    send_ords: list = field(default_factory=list)
    recv_ords: list = field(default_factory=list)


def node_program(schedule, u):
    """Return node ``u``'s program: the rounds in which ``u`` sends or receives, in order."""
    return node_programs(schedule, [u])[u]


def node_programs(schedule, nodes=None):
    """Return ``{u: program}`` for ``nodes`` (default: every node) in one pass over the schedule."""
    wanted = range(schedule.topo.num_nodes) if nodes is None else nodes
    programs = {u: [] for u in wanted}
    for t, rnd in enumerate(schedule.rounds):
        touched = {}
        used = {}
        for tr in rnd.transfers:
            ordinal = used.get((tr.src, tr.dst), 0)
            used[(tr.src, tr.dst)] = ordinal + 1
            if tr.src in programs:
                nr = _round_of(touched, tr.src, t, rnd)
                nr.sends.append(tr)
                nr.send_ords.append(ordinal)
            if tr.dst in programs:
                nr = _round_of(touched, tr.dst, t, rnd)
                nr.recvs.append(tr)
                nr.recv_ords.append(ordinal)
        for u, nr in touched.items():
            programs[u].append(nr)
    return programs


def _round_of(touched, u, t, rnd):
    """Return node ``u``'s :class:`NodeRound` for round ``t``, creating it on first use."""
    nr = touched.get(u)
    if nr is None:
        nr = touched[u] = NodeRound(t, rnd.step, rnd.hop, [], [])
    return nr


def count_conflicts(schedule):
    """Return the number of transfers that reuse a directed link already used in the same round.

    Rounds are (step, hop index) pairs, so this counts the papers' conflicts: two
    messages on the same directed link at the same time.
    """
    conflicts = 0
    for rnd in schedule.rounds:
        seen = set()
        for tr in rnd.transfers:
            key = (tr.src, tr.dst)
            if key in seen:
                conflicts += 1
            seen.add(key)
    return conflicts


def message_hops(schedule):
    """Return ``{header: number of links}`` for every routed message of ``schedule``."""
    hops = {}
    for rnd in schedule.rounds:
        for tr in rnd.transfers:
            if tr.header is not None:
                hops[tr.header] = hops.get(tr.header, 0) + 1
    return hops
