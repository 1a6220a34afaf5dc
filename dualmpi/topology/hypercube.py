"""The binary n-cube, the baseline every other network is compared with."""

from .base import Topology, check_address_bits, check_int_param

__all__ = ["Hypercube", "ascending_path"]


def ascending_path(u, v, bits):
    """Return the path that flips the bits of ``u ^ v`` listed in ``bits``, lowest first.

    ``bits`` are bit positions in ascending order; only those where ``u`` and ``v``
    differ are flipped.  This is the papers' *ascending routing*: "the least
    significant non-zero bit is chosen as the first dimension for routing".

    >>> ascending_path(0b000, 0b101, range(3))
    [0, 1, 5]
    """
    path = [u]
    cur = u
    diff = u ^ v
    for b in bits:
        if diff >> b & 1:
            cur ^= 1 << b
            path.append(cur)
    return path


class Hypercube(Topology):
    """The n-dimensional hypercube Q_n.

    Nodes are the integers ``0 .. 2**n - 1``; "edges exist between nodes that
    differ in exactly one bit".  Dimension ``i`` (1-based) flips bit ``i-1``.

    Parameters
    ----------
    n : int
        Dimension, ``0 <= n <= 62``.

    References
    ----------
    Y. Li, S. Peng, W. Chu, "Efficient Collective Communications in Dual-cube",
    Table 1 and Table 2 (the hypercube column).

    Examples
    --------
    >>> q = Hypercube(3)
    >>> q.neighbors(0)
    (1, 2, 4)
    >>> q.route(0, 7)
    [0, 1, 3, 7]
    """

    name = "hypercube"
    reference = "Li, Peng, Chu: Efficient Collective Communications in Dual-cube, Tables 1-2"

    def __init__(self, n):
        n = check_int_param("n", self.name, n, 0)
        check_address_bits(self.name, n)
        self._params = {"n": n}
        self.n = n
        self.num_nodes = 1 << n
        self.degree = n

    def neighbor(self, u, i):
        """Return ``u`` with bit ``i-1`` flipped."""
        return u ^ (1 << (i - 1))

    def is_link(self, u, v):
        """Return True when ``u`` and ``v`` differ in exactly one bit."""
        if not (0 <= u < self.num_nodes and 0 <= v < self.num_nodes):
            return False
        x = u ^ v
        return x != 0 and x & (x - 1) == 0

    def fields(self, u):
        """Return ``{"node": u}``: the hypercube has no class or cluster."""
        return {"node": u}

    def format_node(self, u):
        """Return ``u`` as an n-bit binary string in parentheses."""
        return f"({u:0{self.n}b})" if self.n else "()"

    def route(self, u, v):
        """Return the e-cube (ascending-dimension) path from ``u`` to ``v``."""
        return ascending_path(u, v, range(self.n))

    def distance(self, u, v):
        """Return the Hamming distance of ``u`` and ``v``."""
        return bin(u ^ v).count("1")

    def formulas(self):
        """Return links n·2^(n-1), diameter n, average distance n/2, bisection width 2^(n-1)."""
        p = self.num_nodes
        return {
            "links": self.n * p // 2,
            "diameter": self.n,
            "avg_distance": self.n / 2,
            "bisection_width": p // 2 if self.n else 0,
        }
