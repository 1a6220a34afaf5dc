"""The papers' collectives as schedules of link transfers, one module per collective."""

from ..errors import DualmpiError
from ..topology import DualCube, Hypercube, MetaCube
from . import allgather, alltoall, bcast, scatter
from .schedule import ALL, COLLECTIVES, Schedule, count_conflicts, node_program, node_programs

__all__ = [
    "ALL",
    "COLLECTIVES",
    "Schedule",
    "SUPPORTED",
    "build_schedule",
    "paper_steps",
    "count_conflicts",
    "node_program",
    "node_programs",
]

#: Topologies whose collectives are implemented.
SUPPORTED = (Hypercube, DualCube, MetaCube)

_MODULES = {"bcast": bcast, "scatter": scatter, "allgather": allgather, "alltoall": alltoall}


def build_schedule(collective, topo, root=0, variant="corrected"):
    """Return the schedule of ``collective`` on ``topo`` (``root`` used by bcast and scatter).

    ``variant="as-printed"`` follows a paper's printed text where dualmpi corrects it
    (dual-cube broadcast; metacube total exchange on MC(2, m)); see docs/errata.md.
    """
    module = _module(collective)
    if not isinstance(topo, SUPPORTED):
        names = ", ".join(cls.name for cls in SUPPORTED)
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
    return _module(collective).paper_steps(topo)


def _module(collective):
    """Return the module implementing ``collective`` or raise a clear error."""
    try:
        return _MODULES[collective]
    except KeyError:
        raise DualmpiError(
            f"unknown collective {collective!r} (choose from {', '.join(COLLECTIVES)})"
        ) from None
