"""Topologies as pure functions of their parameters, and the ``name:key=value,...`` spec syntax."""

from .base import Topology
from .dualcube import DualCube
from .hypercube import Hypercube
from .metacube import MetaCube
from .spec import TOPOLOGIES, from_spec, parse_spec

__all__ = [
    "Topology",
    "Hypercube",
    "DualCube",
    "MetaCube",
    "TOPOLOGIES",
    "from_spec",
    "parse_spec",
]
