"""Every collective described once: what each layer needs to know, in one table (pure).

A :class:`Collective` says how a collective meets the user's buffers and the network:
whether it has a root, which buffer layout maps the user's buffers onto node-level
blocks (:mod:`dualmpi.engine.layout`), whether counts are fixed, per rank (the
v-variants) or per pair, which schedule it runs and whether blocks are combined where
they meet (a reduction).  Each collective's module declares its description(s) as
``COLLECTIVES``; :data:`REGISTRY` collects them here, the one place a collective is
registered.  The schedule builder, the plan compiler, the engine, ``dualmpi.Comm`` and
the command line read the description instead of testing names.

Examples
--------
>>> desc = get("gatherv")
>>> desc.mpi, desc.rooted, desc.layout, desc.counts, desc.schedule
('Gatherv', True, 'gather', 'rank', 'gather')
>>> [d.name for d in REGISTRY.values() if d.combines][:3]
['reduce', 'allreduce', 'scan']
>>> get("ring-allreduce").runs_as
('allreduce', 'ring')
"""

from dataclasses import dataclass
from typing import Callable, Optional

from ..errors import DualmpiError

__all__ = ["Collective", "REGISTRY", "get", "by_mpi", "names", "running"]


@dataclass(frozen=True)
class Collective:
    """The description of one collective (see the module docstring).

    Attributes
    ----------
    name : str
        The engine's and command line's name, e.g. ``"gatherv"``.
    mpi : str
        The method of :class:`mpi4py.MPI.Intracomm` (and ``dualmpi.Comm``) it is.
    layout : str
        The buffer layout (:class:`dualmpi.engine.layout.Layout` kind).
    build : callable
        ``build(topo, root, variant, q, algorithm)`` returns the
        :class:`~dualmpi.collectives.schedule.Schedule` (``root`` a node).  Collectives
        that run another one's schedule leave it None and name it in ``schedule``.
    schedule : str
        The collective whose schedule runs (itself, or e.g. ``"gather"`` for
        ``"gatherv"``); plans are shared between the two.
    rooted : bool
        The call has a root (bcast, scatter(v), gather(v), reduce).
    counts : str
        ``"fixed"`` (one size for every rank), ``"rank"`` (a count per rank: the
        v-variants, reduce-scatter) or ``"pair"`` (a count per pair of ranks).
    combines : bool
        A reduction: blocks combine where they meet (with the call's operator).
    faults : bool
        Runs on a network with failed links or nodes (the paper patterns do).
    emulated : bool
        On a reduced hypercube, the hypercube's schedule runs with every link an RH
        path (:mod:`dualmpi.collectives.emulate`).
    pipelined : bool
        Large blocks are cut into pieces by default (one-to-all patterns).
    paper_steps : callable or None
        ``paper_steps(topo)``: the step count a paper states.
    initial, expected : callable or None
        ``f(topo, root, u)``: the blocks node ``u`` starts with and must end with,
        when the schedule does not say (:func:`dualmpi.collectives.schedule.initial_blocks`).
    variants : tuple of str
        The algorithm variants ``build`` takes (``"as-printed"`` where a paper errs).
    layouts : dict
        ``{algorithm: layout}`` where an algorithm maps the buffers differently
        (the allreduce's segments); see :meth:`layout_for`.
    networks : tuple of type, None or "any"
        Where it runs: None, the networks of the papers' patterns
        (:data:`dualmpi.collectives.SUPPORTED`); a tuple, those and these topology
        classes; ``"any"``, wherever ``build`` can build it (it checks).
    runs_as : tuple or None
        ``(collective, algorithm)``: for a schedule that is no MPI call of its own
        (``mpi`` None), the registered collective whose call runs it and the algorithm
        that selects it (``ring-allgather``: ``("allgather", "ring")``).
    """

    name: str
    mpi: str
    layout: str
    build: Optional[Callable] = None
    schedule: Optional[str] = None
    rooted: bool = False
    counts: str = "fixed"
    combines: bool = False
    faults: bool = False
    emulated: bool = True
    pipelined: bool = False
    paper_steps: Optional[Callable] = None
    initial: Optional[Callable] = None
    expected: Optional[Callable] = None
    variants: tuple = ("corrected",)
    layouts: dict = None
    networks: tuple = None
    runs_as: tuple = None

    def __post_init__(self):
        if self.schedule is None:
            object.__setattr__(self, "schedule", self.name)
        if self.counts not in ("fixed", "rank", "pair"):
            raise ValueError(f"{self.name}: counts must be 'fixed', 'rank' or 'pair'")

    def layout_for(self, algorithm=None):
        """Return the buffer layout of the call run by ``algorithm``.

        >>> get("allreduce").layout_for("rsag"), get("allreduce").layout_for("tree")
        ('reduce-segments', 'reduce-all')
        """
        return (self.layouts or {}).get(algorithm, self.layout)


def _collect():
    """Return ``{name: Collective}`` from the collectives' modules (the one registration)."""
    from . import (allgather, allreduce, alltoall, barrier, bcast, gather, reduce,
                   reduce_scatter, ring, scan, scatter)

    table = {}
    for module in (bcast, scatter, gather, allgather, alltoall, reduce, allreduce, scan,
                   reduce_scatter, barrier, ring):
        for desc in module.COLLECTIVES:
            if desc.name in table:
                raise ValueError(f"collective {desc.name!r} registered twice")
            table[desc.name] = desc
    return table


#: Every collective, by name (built from the modules' ``COLLECTIVES`` on first use).
REGISTRY = {}


def _registry():
    if not REGISTRY:
        REGISTRY.update(_collect())
    return REGISTRY


def get(name):
    """Return the :class:`Collective` called ``name`` or raise a clear error.

    >>> get("bcast").rooted
    True
    """
    try:
        return _registry()[name]
    except KeyError:
        raise DualmpiError(f"unknown collective {name!r} (choose from "
                           f"{', '.join(_registry())})") from None


def by_mpi(method):
    """Return the :class:`Collective` of an ``MPI.Intracomm`` method name, e.g. ``"Gatherv"``.

    >>> by_mpi("Reduce_scatter_block").name
    'reduce_scatter_block'
    """
    desc = _BY_MPI.get(method)
    if desc is None:
        for desc in _registry().values():
            if desc.mpi == method:
                _BY_MPI[method] = desc
                return desc
        raise DualmpiError(f"no collective is MPI's {method!r}")
    return desc


#: ``by_mpi``'s answers so far (every call of a communicator's method asks).
_BY_MPI = {}


def running(collective, algorithm):
    """Return the description whose schedule runs ``collective``'s ``algorithm``, or None.

    >>> running("allgather", "ring").name, running("allgather", None)
    ('ring-allgather', None)
    """
    for desc in _registry().values():
        if desc.runs_as == (collective, algorithm):
            return desc
    return None


def names():
    """Return every registered collective's name, in registration order.

    >>> names()[:4]
    ('bcast', 'scatter', 'scatterv', 'gather')
    """
    return tuple(_registry())


def cost(schedule):
    """Return ``(steps, words)`` of a schedule in the papers' cost model.

    ``steps`` counts the paper steps in which some node sends; ``words`` sums, over the
    steps, the most one node sends in the step, a block counting 1 (a node's piece of
    ``m`` words) and a reduction segment ``1/p`` (of the vector), so the schedule costs
    ``steps t_s + words m t_w`` (hops aside).

    >>> from dualmpi.collectives import build_schedule
    >>> from dualmpi.topology import Hypercube
    >>> cost(build_schedule("gather", Hypercube(3))), cost(build_schedule("barrier", Hypercube(3)))
    ((3, 7.0), (3, 3.0))
    """
    from .schedule import REDUCED

    p = schedule.topo.num_nodes
    sent = {}
    for rnd in schedule.rounds:
        for tr in rnd.transfers:
            if tr.header is not None and tr.src != tr.header[0]:
                continue  # a routed message's later hops: counted once, at its source
            share = sum(1.0 / p if b[0] == REDUCED and b[1] >= 0 else 1.0 for b in tr.blocks)
            per = sent.setdefault(rnd.step, {})
            per[tr.src] = per.get(tr.src, 0.0) + share
    return len(sent), sum(max(per.values()) for per in sent.values())


def table(specs, collectives=("scatter", "gather", "allgather", "reduce_scatter_block",
                              "barrier")):
    """Return markdown rows: per network, ``steps / words`` (:func:`cost`) of each collective.

    ``python -m dualmpi.collectives.registry SPEC...`` prints it (docs/algorithms.md).
    """
    from ..topology import from_spec
    from . import build_schedule

    rows = ["| network | p | " + " | ".join(collectives) + " |",
            "|---|---|" + "---|" * len(collectives)]
    for spec in specs:
        topo = from_spec(spec)
        cells = []
        for name in collectives:
            steps, words = cost(build_schedule(name, topo, 0))
            cells.append(f"{steps}" if name == "barrier" else f"{steps} / {words:.4g}")
        rows.append(f"| {spec} | {topo.num_nodes} | " + " | ".join(cells) + " |")
    return rows


if __name__ == "__main__":  # pragma: no cover - prints docs/algorithms.md's table
    import sys

    print("\n".join(table(sys.argv[1:] or ["hypercube:n=3", "dualcube:r=2", "hypercube:n=5",
                                           "dualcube:r=3", "hypercube:n=7", "dualcube:r=4",
                                           "metacube:k=2,m=1", "hypercube:n=6"])))
