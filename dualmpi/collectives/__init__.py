"""The papers' collectives as schedules of link transfers, one module per collective."""

from ..errors import DualmpiError
from ..topology import HDN, CubeConnectedCycles, DualCube, Hypercube, MetaCube, ReducedHypercube
from ..topology.faults import FaultyTopology
from ..topology.hypercube_emulation import HypercubeOnRH
from . import emulate, faulttolerant, registry
from .schedule import ALL, COLLECTIVES, Schedule, count_conflicts, node_program, node_programs

__all__ = [
    "ALL",
    "COLLECTIVES",
    "EXTRA_COLLECTIVES",
    "Schedule",
    "SUPPORTED",
    "build_schedule",
    "paper_steps",
    "count_conflicts",
    "node_program",
    "node_programs",
]

#: The networks the papers' patterns run on (a description's ``networks=None``).
SUPPORTED = (Hypercube, DualCube, MetaCube, ReducedHypercube, CubeConnectedCycles)

#: Collectives beyond the papers' four that ``dualmpi run`` and ``simulate`` run, each an
#: algorithm of an MPI call (``runs_as``): rings along a Hamiltonian cycle (dual-cube, hypercube, RH).
EXTRA_COLLECTIVES = tuple(name for name in registry.names() if registry.get(name).runs_as)


def build_schedule(collective, topo, root=0, variant="corrected", q=1, algorithm=None):
    """Return the schedule of ``collective`` on ``topo`` (``root`` a node, for rooted ones).

    Reads the collective's description (:mod:`dualmpi.collectives.registry`): a
    collective running another one's schedule (``gatherv``: ``gather``) gets that one;
    on a network with faults the paper patterns detour (:mod:`.faulttolerant`); on a
    reduced hypercube the hypercube's schedule is emulated (:mod:`.emulate`).
    ``variant="as-printed"`` follows a paper's printed text where dualmpi corrects it
    (dual-cube broadcast; metacube total exchange on MC(2, m)); see docs/errata.md.
    ``q`` (nodes per rank) and ``algorithm`` matter to the reductions only.
    """
    desc = registry.get(collective)
    if desc.schedule != desc.name:
        return build_schedule(desc.schedule, topo, root, variant, q, algorithm)
    # an algorithm that is another registered schedule (the ring allgather); a reduction builds
    # its algorithms itself (they depend on which nodes contribute: q)
    other = None if algorithm is None or desc.combines else registry.running(collective, algorithm)
    if other is not None:
        return build_schedule(other.name, topo, root, variant, q)
    if variant not in desc.variants:
        raise DualmpiError(f"no {variant!r} variant of {collective}")
    if isinstance(topo, FaultyTopology):  # the same algorithm on the surviving links
        if variant != "corrected" or not desc.faults:
            raise DualmpiError(f"{collective} ({variant}) does not run on a network with faults")
        base = build_schedule(collective, topo.base, root, variant)
        return faulttolerant.build_faulty(collective, topo, topo.check_node(root or 0), base)
    if isinstance(topo, ReducedHypercube) and desc.emulated:
        # the hypercube's schedule, each link an RH path (the rings use RH's own ring)
        guest = build_schedule(collective, Hypercube(topo.bits), root, variant, q, algorithm)
        return emulate.emulate_on(guest, topo, HypercubeOnRH(topo))
    if desc.networks != "any":
        supported = SUPPORTED + tuple(desc.networks or ())
        if not isinstance(topo, supported):
            names = ", ".join(cls.name for cls in supported)
            raise DualmpiError(f"{collective} is not available on {topo.spec} (implemented for: "
                               f"{names})")
    if desc.rooted:
        root = topo.check_node(root)
    try:
        return desc.build(topo, root, variant, q, algorithm)
    except (ValueError, TypeError) as exc:
        raise DualmpiError(str(exc)) from None


def paper_steps(collective, topo):
    """Return the number of steps the paper states for ``collective`` on ``topo``."""
    desc = registry.get(collective)
    if isinstance(topo, FaultyTopology):
        topo = topo.base
    if isinstance(topo, ReducedHypercube) and desc.emulated:  # emulated: Q's steps
        topo = Hypercube(topo.bits)
    if desc.paper_steps is None:
        raise DualmpiError(f"no paper states a step count for {collective}")
    return desc.paper_steps(topo)
