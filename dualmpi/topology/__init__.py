"""Topologies as pure functions of their parameters, and the ``name:key=value,...`` spec syntax."""

from .base import Topology
from .ccc import CubeConnectedCycles
from .dualcube import DualCube
from .hdn import HDN, RDN
from .hypercube import Hypercube
from .metacube import MetaCube
from .product import ProductGraph
from .reduced_hypercube import ReducedHypercube
from .spec import TOPOLOGIES, from_spec, parse_spec

__all__ = [
    "Topology",
    "Hypercube",
    "DualCube",
    "MetaCube",
    "ReducedHypercube",
    "CubeConnectedCycles",
    "ProductGraph",
    "HDN",
    "RDN",
    "TOPOLOGIES",
    "from_spec",
    "parse_spec",
]
