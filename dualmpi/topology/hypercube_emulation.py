"""Emulation of the (k + 2^n)-cube on the reduced hypercube RH(k, n): every cube edge as an RH path."""

from collections import Counter
from fractions import Fraction
from functools import lru_cache
from math import comb

from .hypercube import Hypercube
from .reduced_hypercube import ReducedHypercube

__all__ = [
    "HypercubeOnRH",
    "theorem_dilations",
    "max_dilation",
    "average_dilation",
]


def theorem_dilations(k, n):
    """Return Theorem 2.1's dilations of the edges at one node as ``{dilation: edges}``.

    ``k + 1`` edges of dilation 1 and ``C(n, p)`` of dilation ``2p + 1``, ``p = 1..n``.

    >>> theorem_dilations(5, 2)
    {1: 6, 3: 2, 5: 1}
    """
    out = {1: k + 1}
    for p in range(1, n + 1):
        out[2 * p + 1] = comb(n, p)
    return out


def max_dilation(n):
    """Return Corollary 2.1's maximum dilation, ``2n + 1``."""
    return 2 * n + 1


def average_dilation(k, n):
    """Return Corollary 2.2's average dilation ``(k + (n+1) 2^n) / (k + 2^n)`` as a Fraction.

    >>> average_dilation(5, 2), average_dilation(8, 3)
    (Fraction(17, 9), Fraction(5, 2))
    """
    return Fraction(k + (n + 1) * (1 << n), k + (1 << n))


class HypercubeOnRH:
    """The identity embedding of Q_(k + 2^n) into RH(k, n): node ``u`` of the cube is RH node ``u``.

    A cube edge along a BB bit, or along the 1st-field bit ``m`` named by the node's
    own subfield, is an RH link.  Along another 1st-field bit ``m'`` the path walks
    inside the building block from subblock ``m`` to subblock ``m'`` (subfield bits
    flipped in ascending order), takes the inter-BB link there and walks back
    (descending order): ``2 H(m, m') + 1`` links.  The path of ``(v, u)`` is the
    reverse of the path of ``(u, v)``.

    Parameters
    ----------
    host : ReducedHypercube
        The RH(k, n) the cube is emulated on.

    References
    ----------
    M. A. Sideras, thesis, Section 2.2.1: Theorem 2.1, Corollaries 2.1 and 2.2, Example 2.2.

    Examples
    --------
    >>> emu = HypercubeOnRH(ReducedHypercube(2, 2))
    >>> emu.guest.n, emu.path(0, 1 << 5)
    (6, [0, 1, 3, 35, 33, 32])
    >>> emu.dilation_histogram(0) == theorem_dilations(2, 2)
    True
    """

    def __init__(self, host):
        if not isinstance(host, ReducedHypercube):
            raise TypeError(f"the hypercube emulation needs a reduced hypercube, not {host!r}")
        self.host = host
        self.guest = Hypercube(host.bits)

    def node(self, u):
        """Return the RH node that emulates cube node ``u`` (the identity)."""
        return u

    @lru_cache(maxsize=1 << 16)
    def _path(self, a, b):
        """Cached :meth:`path` as a tuple."""
        rh = self.host
        x = a ^ b
        if not self.guest.is_link(a, b):
            raise ValueError(f"{a} and {b} are not neighbours in {self.guest.spec}")
        bit = x.bit_length() - 1
        if bit < rh.k or bit - rh.k == rh.subblock(a):
            return (a, b)
        diff = (bit - rh.k) ^ rh.subblock(a)
        flips = [rh.low + j for j in range(rh.n) if diff >> j & 1]
        path = [a]
        for f in flips:
            path.append(path[-1] ^ (1 << f))
        path.append(path[-1] ^ x)
        for f in reversed(flips):
            path.append(path[-1] ^ (1 << f))
        return tuple(path)

    def path(self, a, b):
        """Return the RH path ``[a, ..., b]`` that carries the cube edge ``(a, b)``."""
        return list(self._path(a, b))

    def next_hop(self, current, a, b):
        """Return the node after ``current`` on the path of cube edge ``(a, b)`` (a router)."""
        path = self._path(a, b)
        return path[path.index(current) + 1]

    def dilation(self, a, b):
        """Return the number of RH links on the path of cube edge ``(a, b)``."""
        return len(self._path(a, b)) - 1

    def dimension_dilations(self, u):
        """Return the dilation of each cube dimension ``1..k+2^n`` at node ``u``, as a list."""
        return [self.dilation(u, u ^ (1 << b)) for b in range(self.guest.n)]

    def dilation_histogram(self, u):
        """Return ``{dilation: number of cube edges at u}`` (Theorem 2.1 states it for every u)."""
        return dict(sorted(Counter(self.dimension_dilations(u)).items()))

    def measured(self):
        """Return the maximum and the average dilation over every cube edge, measured."""
        total = count = worst = 0
        for u in range(self.guest.num_nodes):
            for b in range(self.guest.n):
                v = u ^ (1 << b)
                if u < v:
                    d = self.dilation(u, v)
                    total, count, worst = total + d, count + 1, max(worst, d)
        return {"max_dilation": worst, "average_dilation": Fraction(total, count) if count else None}
