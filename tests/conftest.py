"""Shared pure fixtures (no MPI): every network up to 4096 nodes, its BFS distances, sample sources."""

import random

import pytest

from dualmpi.topology import from_spec
from dualmpi.topology.analysis import BFS_LIMIT, measured_properties, neighbor_table

#: Every network the papers' formulas and routes are checked on by breadth-first search:
#: all hypercubes, dual-cubes and metacubes (k <= 3) with at most BFS_LIMIT = 4096 nodes.
NETWORK_SPECS = (
    [f"hypercube:n={n}" for n in range(13)]
    + [f"dualcube:r={r}" for r in range(1, 7)]  # r = 7 has 8192 nodes
    + [f"metacube:k=0,m={m}" for m in range(1, 13)]
    + [f"metacube:k=1,m={m}" for m in range(1, 6)]
    + ["metacube:k=2,m=1", "metacube:k=2,m=2", "metacube:k=3,m=1"]
)

#: Networks this small have their routes checked on all ordered pairs; larger ones from sample sources.
ALL_PAIRS_LIMIT = 256


@pytest.fixture(scope="session", params=NETWORK_SPECS)
def network(request):
    """One topology of :data:`NETWORK_SPECS` (session scope: tests are grouped per network)."""
    topo = from_spec(request.param)
    assert topo.num_nodes <= BFS_LIMIT
    return topo


@pytest.fixture(scope="session")
def table(network):
    """The ``(p, degree)`` neighbour table of ``network``."""
    return neighbor_table(network)


@pytest.fixture(scope="session")
def bfs(network):
    """All-pairs BFS of ``network``: links, diameter, avg_distance, connected, distance_matrix."""
    return measured_properties(network)


@pytest.fixture(scope="session")
def sources(network):
    """Route sources: every node up to 256 nodes, else 0, p-1 and 6 seeded random nodes."""
    p = network.num_nodes
    if p <= ALL_PAIRS_LIMIT:
        return list(range(p))
    rng = random.Random(f"sources:{network.spec}")  # fixed seed: the same sources on every run
    return [0, p - 1, *rng.sample(range(1, p - 1), 6)]
