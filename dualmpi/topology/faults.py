"""A topology with failed links and nodes: failed links carry nothing, routes detour (pure).

References
----------
The dual-cube F_r and the metacube MC(k, m) are r- and (m+k)-connected, so with at
most degree - 1 failed links every pair of nodes stays connected; beyond that some
pairs can be cut off, and dualmpi reports them instead of dropping their messages.
"""

import random
from collections import deque
from functools import lru_cache

from ..errors import DualmpiError, SpecError
from .base import Topology

__all__ = ["FaultyTopology", "parse_faults"]


class FaultyTopology(Topology):
    """``base`` with some links and nodes failed.

    ``neighbors`` and ``is_link`` leave failed links and failed nodes out, so the link
    check refuses them.  ``route`` is the base network's route while that route is
    intact, else a shortest detour (breadth-first search over the surviving links,
    neighbours in dimension order); :meth:`reachable` tells which pairs are cut off.

    Examples
    --------
    >>> from dualmpi.topology import DualCube
    >>> f = FaultyTopology(DualCube(2), failed_links=[(0, 4)])
    >>> f.is_link(0, 4), f.route(0, 4)
    (False, [0, 1, 5, 7, 3, 2, 6, 4])
    """

    def __init__(self, base, failed_links=(), failed_nodes=()):
        self.base = base
        self.name = base.name
        self._params = dict(base._params)
        self.num_nodes, self.degree = base.num_nodes, base.degree
        self.reference = base.reference
        links = set()
        for u, v in failed_links:
            u, v = base.check_node(u), base.check_node(v)
            if not base.is_link(u, v):
                raise SpecError(f"cannot fail {u}-{v}: not a link of {base.spec}")
            links.add(frozenset((u, v)))
        self.failed_links = frozenset(links)
        self.failed_nodes = frozenset(base.check_node(u) for u in failed_nodes)

    @property
    def spec(self):
        """The base spec; the faults are listed by :meth:`describe_faults`."""
        return self.base.spec

    def describe_faults(self):
        """Return the failed links and nodes as a dict (sorted lists)."""
        return {"links": sorted(tuple(sorted(link)) for link in self.failed_links),
                "nodes": sorted(self.failed_nodes)}

    def alive(self, u):
        """Return True when node ``u`` has not failed."""
        return u not in self.failed_nodes

    def _up(self, u, v):
        """Return True when the base link u-v and both its ends work."""
        return (u not in self.failed_nodes and v not in self.failed_nodes
                and frozenset((u, v)) not in self.failed_links)

    def neighbor(self, u, i):
        """Return the base neighbour along dimension ``i`` (check :meth:`is_link` before use)."""
        return self.base.neighbor(u, i)

    def neighbors(self, u):
        """Return the neighbours of ``u`` over working links, in dimension order."""
        return tuple(v for v in self.base.neighbors(u) if self._up(u, v))

    def is_link(self, u, v):
        """Return True for a working link of the base network."""
        return self.base.is_link(u, v) and self._up(u, v)

    def fields(self, u):
        """Return the base network's address fields."""
        return self.base.fields(u)

    def format_node(self, u):
        """Return the base network's address of ``u``."""
        return self.base.format_node(u)

    def formulas(self):
        """Return the fault-free network's formulas."""
        return self.base.formulas()

    def route(self, u, v):
        """Return the base route if it survives, else a shortest detour; raise if cut off."""
        path = self.base.route(u, v)
        if all(self._up(a, b) for a, b in zip(path, path[1:])) and self.alive(u):
            return path
        return list(self._detour(u, v))

    @lru_cache(maxsize=1 << 16)
    def _detour(self, u, v):
        """Return a shortest surviving path from ``u`` to ``v`` (a tuple)."""
        dist = self._bfs(v)  # distances to v, so the path can be walked greedily from u
        if u not in dist:
            raise DualmpiError(f"node {v} cannot be reached from node {u}: the faults cut it off")
        path = [u]
        while path[-1] != v:
            cur = path[-1]
            path.append(next(w for w in self.neighbors(cur) if dist.get(w) == dist[cur] - 1))
        return tuple(path)

    @lru_cache(maxsize=1024)
    def _bfs(self, src):
        """Return ``{node: distance}`` over the surviving links from ``src``."""
        if not self.alive(src):
            return {}
        dist = {src: 0}
        todo = deque([src])
        while todo:
            u = todo.popleft()
            for w in self.neighbors(u):
                if w not in dist:
                    dist[w] = dist[u] + 1
                    todo.append(w)
        return dist

    def reachable(self, u, v):
        """Return True when ``v`` can be reached from ``u`` over surviving links."""
        return v in self._bfs(u)

    def distance(self, u, v):
        """Return the surviving-network distance (raises if cut off)."""
        return len(self._detour(u, v)) - 1 if u != v else 0

    def __hash__(self):
        return hash((self.base.spec, self.failed_links, self.failed_nodes))

    def __eq__(self, other):
        return (isinstance(other, FaultyTopology) and self.base == other.base
                and self.failed_links == other.failed_links
                and self.failed_nodes == other.failed_nodes)


def parse_faults(base, links="", nodes="", random_links=0, seed=0):
    """Return a :class:`FaultyTopology` from CLI strings (``u-v,...``, ``u,...``), or ``base``.

    ``random_links`` more links are failed at random (``seed``), among links whose
    ends have not failed; that enumerates every link of ``base``, so check the
    network's size before (named links and nodes cost nothing per link).
    """
    failed_links = []
    for item in filter(None, (s.strip() for s in (links or "").split(","))):
        a, sep, b = item.partition("-")
        if not (sep and a.strip().isdigit() and b.strip().isdigit()):
            raise SpecError(f"bad failed link {item!r}: expected U-V with node ids")
        failed_links.append((int(a), int(b)))
    failed_nodes = []
    for item in filter(None, (s.strip() for s in (nodes or "").split(","))):
        if not item.isdigit():
            raise SpecError(f"bad failed node {item!r}: expected a node id")
        failed_nodes.append(int(item))
    if random_links < 0:
        raise SpecError("--fail-random must be >= 0")
    if not (failed_links or failed_nodes or random_links):
        return base
    faulty = FaultyTopology(base, failed_links, failed_nodes)  # checks the named links and nodes
    if not random_links:
        return faulty
    # only random failures need the list of every link: a caller checks the network's size first
    rng = random.Random(seed)
    taken = faulty.failed_links
    dead = faulty.failed_nodes
    candidates = [link for link in base.links()
                  if frozenset(link) not in taken and not set(link) & dead]
    if random_links > len(candidates):
        raise SpecError(f"cannot fail {random_links} random links: {base.spec} has "
                        f"{len(candidates)} left")
    failed_links += rng.sample(candidates, random_links)
    return FaultyTopology(base, failed_links, failed_nodes)
