"""The papers' collectives as schedules of link transfers, one module per collective."""

from ..errors import DualmpiError
from ..topology import HDN, CubeConnectedCycles, DualCube, Hypercube, MetaCube, ReducedHypercube
from ..topology.faults import FaultyTopology
from ..topology.hypercube_emulation import HypercubeOnRH
from . import allgather, alltoall, bcast, emulate, faulttolerant, ring, scatter
from .schedule import ALL, COLLECTIVES, Schedule, count_conflicts, node_program, node_programs

__all__ = [
    "ALL",
    "COLLECTIVES",
    "EXTRA_COLLECTIVES",
    "Schedule",
    "SUPPORTED",
    "SUPPORTED_FOR",
    "build_schedule",
    "paper_steps",
    "count_conflicts",
    "node_program",
    "node_programs",
]

#: Topologies whose collectives are implemented.
SUPPORTED = (Hypercube, DualCube, MetaCube, ReducedHypercube, CubeConnectedCycles)

#: Topologies on which only some collectives are implemented: collective -> extra classes.
SUPPORTED_FOR = {"bcast": (HDN,), "scatter": (HDN,)}

#: Collectives beyond the papers' four: rings along a Hamiltonian cycle (dual-cube, hypercube, RH).
EXTRA_COLLECTIVES = ("ring-allgather", "ring-allreduce")

_MODULES = {"bcast": bcast, "scatter": scatter, "allgather": allgather, "alltoall": alltoall,
            "ring-allgather": ring.ALLGATHER, "ring-allreduce": ring.ALLREDUCE}


def build_schedule(collective, topo, root=0, variant="corrected"):
    """Return the schedule of ``collective`` on ``topo`` (``root`` used by bcast and scatter).

    ``variant="as-printed"`` follows a paper's printed text where dualmpi corrects it
    (dual-cube broadcast; metacube total exchange on MC(2, m)); see docs/errata.md.
    """
    module = _module(collective)
    if isinstance(topo, FaultyTopology):  # the same algorithm on the surviving links
        if variant != "corrected" or collective not in COLLECTIVES:
            raise DualmpiError(f"{collective} ({variant}) does not run on a network with faults")
        base = build_schedule(collective, topo.base, root, variant)
        return faulttolerant.build_faulty(collective, topo, topo.check_node(root or 0), base)
    if isinstance(topo, ReducedHypercube) and collective in COLLECTIVES:
        # the hypercube's schedule, each link an RH path (the rings use RH's own ring)
        guest = build_schedule(collective, Hypercube(topo.bits), root, variant)
        return emulate.emulate_on(guest, topo, HypercubeOnRH(topo))
    supported = SUPPORTED + SUPPORTED_FOR.get(collective, ())
    if not isinstance(topo, supported):
        names = ", ".join(cls.name for cls in supported)
        raise DualmpiError(f"{collective} is not available on {topo.spec} (implemented for: {names})")
    if collective in ("bcast", "scatter"):
        root = topo.check_node(root)
    if variant == "corrected":
        return module.build(topo, root)
    if collective not in ("bcast", "alltoall"):
        raise DualmpiError(f"no {variant!r} variant of {collective}")
    try:
        return module.build(topo, root, variant=variant)
    except (ValueError, TypeError) as exc:
        raise DualmpiError(str(exc)) from None


def paper_steps(collective, topo):
    """Return the number of steps the paper states for ``collective`` on ``topo``."""
    if isinstance(topo, FaultyTopology):
        topo = topo.base
    if isinstance(topo, ReducedHypercube) and collective in COLLECTIVES:  # emulated: Q's steps
        topo = Hypercube(topo.bits)
    return _module(collective).paper_steps(topo)


def _module(collective):
    """Return the module implementing ``collective`` or raise a clear error."""
    try:
        return _MODULES[collective]
    except KeyError:
        raise DualmpiError(
            f"unknown collective {collective!r} "
            f"(choose from {', '.join(COLLECTIVES + EXTRA_COLLECTIVES)})"
        ) from None
