"""The interface every topology implements: nodes, links, address fields, routes, properties."""

from abc import ABC, abstractmethod
from functools import lru_cache

from ..errors import NodeError, SpecError

__all__ = ["Topology", "MAX_ADDRESS_BITS", "check_int_param", "check_address_bits"]

#: Node ids are kept in signed 64-bit integers (numpy ``int64``), so addresses have at most 62 bits.
MAX_ADDRESS_BITS = 62


def check_int_param(name, topo, value, low, high=None):
    """Return ``value`` as an int in ``[low, high]`` or raise :class:`SpecError`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{topo}: parameter {name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise SpecError(f"{topo}: parameter {name}={value} out of range (must be {bound})")
    return value


class Topology(ABC):
    """A network whose nodes are the integers ``0 .. num_nodes-1``.

    Subclasses set :attr:`name`, :attr:`num_nodes`, :attr:`degree` and implement
    :meth:`neighbor`, :meth:`fields`, :meth:`format_node`, :meth:`route`,
    :meth:`distance` and :meth:`formulas`.  Dimension ``i`` runs from 1 to
    :attr:`degree`, as the papers' notation :math:`s^{(i)}`.
    """

    name = "topology"
    num_nodes = 0
    degree = 0
    #: Short citation of the paper that defines the network.
    reference = ""

    # -- identity ---------------------------------------------------------------------------
    @property
    def params(self):
        """The spec parameters as an ordered dict."""
        return dict(self._params)

    @property
    def spec(self):
        """The canonical spec string, e.g. ``dualcube:r=3``."""
        return f"{self.name}:" + ",".join(f"{k}={v}" for k, v in self._params.items())

    def __repr__(self):
        return f"<{type(self).__name__} {self.spec}>"

    def __eq__(self, other):
        return type(self) is type(other) and self._params == other._params

    def __hash__(self):
        return hash((type(self).__name__, tuple(self._params.items())))

    # -- nodes and links --------------------------------------------------------------------
    def check_node(self, u):
        """Return ``u`` as an int if it is a node of this network, else raise :class:`NodeError`."""
        if isinstance(u, bool):
            raise NodeError(f"node id must be an integer, got {u!r}")
        try:
            v = int(u)
        except (TypeError, ValueError):
            raise NodeError(f"node id must be an integer, got {u!r}") from None
        if v != u and not isinstance(u, str):
            raise NodeError(f"node id must be an integer, got {u!r}")
        if not 0 <= v < self.num_nodes:
            raise NodeError(f"node {v} out of range for {self.spec} (0..{self.num_nodes - 1})")
        return v

    @abstractmethod
    def neighbor(self, u, i):
        """Return the neighbour of ``u`` along dimension ``i`` (1-based); works on numpy arrays."""

    def neighbors(self, u):
        """Return the neighbours of ``u`` as a tuple, in dimension order 1..degree."""
        return tuple(int(self.neighbor(u, i)) for i in range(1, self.degree + 1))

    def is_link(self, u, v):
        """Return True when ``u`` and ``v`` are nodes joined by a link."""
        if not (0 <= u < self.num_nodes and 0 <= v < self.num_nodes) or u == v:
            return False
        return v in self.neighbors(u)

    def dimension_of(self, u, v):
        """Return the dimension ``i`` with ``neighbor(u, i) == v``; raise ValueError if none."""
        for i in range(1, self.degree + 1):
            if self.neighbor(u, i) == v:
                return i
        raise ValueError(f"{u} and {v} are not neighbours in {self.spec}")

    def links(self):
        """Yield every undirected link once as ``(u, v)`` with ``u < v``."""
        for u in range(self.num_nodes):
            for v in self.neighbors(u):
                if u < v:
                    yield (u, v)

    # -- addresses ----------------------------------------------------------------------------
    @abstractmethod
    def fields(self, u):
        """Return the address fields of ``u`` (class, cluster, node id) as a dict of ints."""

    @abstractmethod
    def format_node(self, u):
        """Return the readable address of ``u`` as the paper writes it."""

    # -- routing ------------------------------------------------------------------------------
    @abstractmethod
    def route(self, u, v):
        """Return the paper's path from ``u`` to ``v`` as a list of nodes ``[u, ..., v]``."""

    def next_hop(self, current, src, dst):
        """Return the node after ``current`` on the route of the message ``src -> dst``.

        This is the router's decision: it uses nothing but the message header
        ``(src, dst)`` and the node's own id.
        """
        path = self._cached_route(src, dst)
        try:
            pos = path.index(current)
        except ValueError:
            raise ValueError(f"node {current} is not on the route {src}->{dst}") from None
        if pos + 1 >= len(path):
            raise ValueError(f"node {current} is the destination of {src}->{dst}")
        return path[pos + 1]

    @lru_cache(maxsize=1 << 16)
    def _cached_route(self, src, dst):
        return tuple(self.route(src, dst))

    @abstractmethod
    def distance(self, u, v):
        """Return the length of a shortest path between ``u`` and ``v`` (closed form)."""

    # -- properties ---------------------------------------------------------------------------
    @abstractmethod
    def formulas(self):
        """Return the closed-form properties: links, diameter, avg_distance, bisection_width.

        ``avg_distance`` follows the papers' convention: the sum of the distances from
        one node to all nodes divided by the number of nodes.  A value is ``None``
        when no formula is known.
        """

    def properties(self):
        """Return a dict with spec, nodes, degree and the closed-form properties."""
        out = {"spec": self.spec, "nodes": self.num_nodes, "degree": self.degree}
        out.update(self.formulas())
        return out


def check_address_bits(topo, bits):
    """Raise :class:`SpecError` when an address needs more than :data:`MAX_ADDRESS_BITS` bits."""
    if bits > MAX_ADDRESS_BITS:
        raise SpecError(
            f"{topo}: {bits}-bit addresses are too large (at most {MAX_ADDRESS_BITS} bits supported)"
        )
