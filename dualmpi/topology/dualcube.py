"""The r-connected dual-cube F_r of Li, Peng and Chu."""

from .base import Topology, check_address_bits, check_int_param
from .hypercube import ascending_path

__all__ = ["DualCube"]


class DualCube(Topology):
    """The r-connected dual-cube F_r on ``2**(2r-1)`` nodes.

    A node ``u = (u_{2r-1} ... u_1)`` has three parts: part I, the rightmost
    ``r-1`` bits; part II, the next ``r-1`` bits; part III, the leftmost bit, the
    *class*.  In class 0 part I is the node id and part II the cluster id; in
    class 1 the roles swap.  Each cluster is an ``(r-1)``-cube over the node-id
    bits, and the *cross-edge* flips the class bit.  Dimension ``i < r`` is the
    ``i``-th node-id bit of the node's own class; dimension ``r`` is the cross-edge
    (the paper's :math:`s^{(i)}` notation, Section 3).

    Parameters
    ----------
    r : int
        Links per node, ``1 <= r <= 31``.

    References
    ----------
    Y. Li, S. Peng, W. Chu, "Efficient Collective Communications in Dual-cube",
    Section 2 (definition), Section 3 (notation), Table 1, Algorithm 4 (routing).

    Examples
    --------
    >>> f = DualCube(3)
    >>> f.num_nodes, f.degree
    (32, 3)
    >>> f.neighbors(0)
    (1, 2, 16)
    >>> f.format_node(0b10110)
    '(1,01,10)'
    >>> f.route(0b00000, 0b00100)
    [0, 16, 20, 4]
    """

    name = "dualcube"
    reference = "Li, Peng, Chu: Efficient Collective Communications in Dual-cube, Sec. 2-3, Alg. 4"

    def __init__(self, r):
        r = check_int_param("r", self.name, r, 1)
        check_address_bits(self.name, 2 * r - 1)
        self._params = {"r": r}
        self.r = r
        self.half = r - 1
        self.class_bit = 2 * r - 2
        self.num_nodes = 1 << (2 * r - 1)
        self.degree = r

    # -- addresses ------------------------------------------------------------------------------
    def class_of(self, u):
        """Return the class bit of ``u`` (0 or 1); works on numpy arrays."""
        return (u >> self.class_bit) & 1

    def node_shift(self, cls):
        """Return the lowest bit position of the node-id field of class ``cls``."""
        return cls * self.half

    def node_id(self, u):
        """Return the node-id field of ``u``."""
        return (u >> self.node_shift(self.class_of(u))) & ((1 << self.half) - 1)

    def cluster_id(self, u):
        """Return the cluster-id field of ``u``."""
        return (u >> self.node_shift(1 - self.class_of(u))) & ((1 << self.half) - 1)

    def cluster_of(self, u):
        """Return ``(class, cluster_id)``, which identifies the cluster C_u."""
        return (self.class_of(u), self.cluster_id(u))

    def fields(self, u):
        """Return ``{"class", "cluster", "node"}`` of ``u``."""
        return {"class": self.class_of(u), "cluster": self.cluster_id(u), "node": self.node_id(u)}

    def format_node(self, u):
        """Return ``(class,part II,part I)`` in binary, e.g. ``(1,01,10)``."""
        h = self.half
        if h == 0:
            return f"({self.class_of(u)})"
        mask = (1 << h) - 1
        return f"({self.class_of(u)},{(u >> h) & mask:0{h}b},{u & mask:0{h}b})"

    # -- links ----------------------------------------------------------------------------------
    def neighbor(self, u, i):
        """Return :math:`u^{(i)}`: a node-id bit flip for ``i < r``, the cross-edge for ``i = r``."""
        if i == self.r:
            return u ^ (1 << self.class_bit)
        return u ^ (1 << (self.node_shift(self.class_of(u)) + i - 1))

    def is_link(self, u, v):
        """Return True when ``u``, ``v`` differ in one bit that the class of ``u`` allows."""
        if not (0 <= u < self.num_nodes and 0 <= v < self.num_nodes):
            return False
        x = u ^ v
        if x == 0 or x & (x - 1):
            return False
        b = x.bit_length() - 1
        if b == self.class_bit:
            return True
        lo = self.node_shift(self.class_of(u))
        return lo <= b < lo + self.half

    # -- routing --------------------------------------------------------------------------------
    def _in_cluster(self, path, target):
        """Extend ``path`` inside the current cluster, fixing node-id bits ascending."""
        cur = path[-1]
        lo = self.node_shift(self.class_of(cur))
        path.extend(ascending_path(cur, target, range(lo, lo + self.half))[1:])

    def _cross(self, path):
        """Extend ``path`` along the cross-edge of its last node."""
        path.append(path[-1] ^ (1 << self.class_bit))

    def route(self, u, v):
        """Return Algorithm 4's path: cluster routing and cross-edges (cases 1-3)."""
        path = [u]
        if u == v:
            return path
        if self.cluster_of(u) == self.cluster_of(v):  # case 1
            self._in_cluster(path, v)
        elif self.class_of(u) != self.class_of(v):  # case 2
            self._in_cluster(path, v)
            self._cross(path)
            self._in_cluster(path, v)
        else:  # case 3: same class, different cluster
            self._cross(path)
            self._in_cluster(path, v)
            self._cross(path)
            self._in_cluster(path, v)
        return path

    def distance(self, u, v):
        """Return Hamming(u, v), plus 2 when u, v are in different clusters of one class."""
        d = bin(u ^ v).count("1")
        if self.class_of(u) == self.class_of(v) and self.cluster_id(u) != self.cluster_id(v):
            d += 2
        return d

    def formulas(self):
        """Return Table 1's dual-cube column for p = 2^(2r-1) nodes (links counted once)."""
        r, p = self.r, self.num_nodes
        return {
            "links": p * r // 2,
            "diameter": 2 * r if r >= 2 else 1,
            "avg_distance": r + 0.5 - 1 / 2 ** (r - 1),
            "bisection_width": p // 4 if r >= 2 else 1,
        }
