"""The reduced hypercube RH(k, n) of Ziavras, as studied in Sideras' thesis (two levels)."""

from fractions import Fraction
from functools import lru_cache

import numpy as np

from ..errors import SpecError
from .base import Topology, check_address_bits, check_int_param
from .hypercube import ascending_path

__all__ = ["ReducedHypercube", "MAX_N", "subcube_walk_table"]

#: Largest supported n: shortest routes need a table over the 2^(2^n) sets of building-block
#: bits, 65,536 sets for n = 4 (RH(k, 4) has at least 2^20 nodes; the thesis' Figure 2.6 stops at
#: n = 4).
MAX_N = 4


@lru_cache(maxsize=None)
def subcube_walk_table(n):
    """Return ``g`` with ``g[t][M]``: the shortest walk in Q_n from 0 to ``t`` that visits every
    vertex of the bit set ``M`` (bit ``x`` of ``M`` stands for vertex ``x``).

    Breadth-first search over the states (position, set of visited vertices), a level
    at a time with numpy, then the minimum over all visited sets containing ``M``.
    For n = 4 that is 16 x 65,536 states (under a second).

    >>> g = subcube_walk_table(2)
    >>> g[0][0b1111], g[1][0b1111], g[3][0b0001]
    (4, 3, 2)
    """
    size = 1 << n
    full = (1 << size) - 1
    inf = 1 << 30
    dist = np.full((size, full + 1), inf, dtype=np.int64)
    dist[0, 1] = 0
    pos, seen = np.array([0]), np.array([1])
    level = 0
    while pos.size:
        level += 1
        nxt_pos, nxt_seen = [], []
        for b in range(n):
            q = pos ^ (1 << b)
            s = seen | (1 << q)
            fresh = dist[q, s] == inf
            q, s = q[fresh], s[fresh]
            dist[q, s] = level
            nxt_pos.append(q)
            nxt_seen.append(s)
        if not nxt_pos:
            break
        state = np.unique(np.concatenate(nxt_pos) * (full + 1) + np.concatenate(nxt_seen))
        pos, seen = state // (full + 1), state % (full + 1)
    masks = np.arange(full + 1)
    for b in range(size):  # superset minimum: a walk visiting more also visits M
        lack = masks[(masks >> b & 1) == 0]
        dist[:, lack] = np.minimum(dist[:, lack], dist[:, lack | (1 << b)])
    return tuple(tuple(row) for row in dist.tolist())


@lru_cache(maxsize=None)
def _translate_table(n):
    """Return ``tr[s][M]``: the vertex set ``{x XOR s : x in M}`` as a bit set (numpy rows)."""
    size = 1 << n
    masks = np.arange(1 << size, dtype=np.int64)
    out = np.zeros((size, 1 << size), dtype=np.int64)
    for s in range(size):
        for x in range(size):
            out[s] |= ((masks >> x) & 1) << (x ^ s)
    return out


class ReducedHypercube(Topology):
    """The two-level reduced hypercube RH(k, n) on ``2**(k + 2**n)`` nodes, degree ``k + 1``.

    A node address is ``BB_address . SB_address . node_address_in_SB`` with ``2**n``,
    ``n`` and ``k - n`` bits.  The ``k`` low bits (the 0th field) address the node in
    its building block (BB), a complete k-cube; its ``n`` high bits (the 0th subfield)
    name the node's subblock (SB).  Set 1 keeps the k links of the BB; set 2 keeps one
    link, to the node whose 1st field (the BB address) differs in bit ``m``, ``m`` the
    value of the 0th subfield.  Dimension ``i <= k`` flips address bit ``i - 1``;
    dimension ``k + 1`` is the inter-BB link.  RH(k, 0) is the (k+1)-cube.

    Parameters
    ----------
    k : int
        Dimension of a building block, ``k >= n``.
    n : int
        Number of subfield bits, ``0 <= n <= 4`` (``2**n`` subblocks per BB).

    References
    ----------
    M. A. Sideras, "Investigation of Reduced Hypercube (RH) Networks: Embedding and
    Routing Capabilities" (thesis), Section 2.2 and Example 2.1; S. G. Ziavras, "RH: a
    versatile family of reduced hypercube interconnection networks", IEEE TPDS 5(11), 1994.

    Examples
    --------
    >>> rh = ReducedHypercube(3, 1)
    >>> rh.num_nodes, rh.degree
    (32, 4)
    >>> rh.format_node(0b00111), rh.format_node(rh.neighbor(0b00111, 4))
    ('00.1.11', '10.1.11')
    >>> rh.distance(0, rh.num_nodes - 1), rh.formulas()["diameter"]
    (5, 6)
    """

    name = "rh"
    reference = "Sideras (thesis), Sec. 2.2, Thm 2.1; Ziavras, RH networks, IEEE TPDS 1994"

    def __init__(self, k, n):
        n = check_int_param("n", self.name, n, 0, MAX_N)
        k = check_int_param("k", self.name, k, 0)
        if k < n:
            raise SpecError(f"{self.name}: parameter k={k} must be >= n={n} (the subfield is the "
                            "n high bits of the k-bit 0th field)")
        check_address_bits(self.name, k + (1 << n))
        self._params = {"k": k, "n": n}
        self.k, self.n = k, n
        self.low = k - n
        self.bits = k + (1 << n)
        self.num_nodes = 1 << self.bits
        self.degree = k + 1

    # -- addresses ------------------------------------------------------------------------------
    def subblock(self, u):
        """Return the 0th subfield of ``u`` (its SB address, m); works on numpy arrays."""
        return (u >> self.low) & ((1 << self.n) - 1)

    def block(self, u):
        """Return the 1st field of ``u`` (its BB address)."""
        return u >> self.k

    def fields(self, u):
        """Return ``{"bb", "sb", "node"}``: BB address, SB address, node address in the SB."""
        return {"bb": self.block(u), "sb": self.subblock(u), "node": u & ((1 << self.low) - 1)}

    def format_node(self, u):
        """Return ``BB.SB.node`` in binary as the thesis writes it, e.g. ``00.1.11``."""
        f = self.fields(u)
        parts = [(f["bb"], 1 << self.n), (f["sb"], self.n), (f["node"], self.low)]
        return ".".join(f"{value:0{width}b}" for value, width in parts if width)

    # -- links ----------------------------------------------------------------------------------
    def neighbor(self, u, i):
        """Return the neighbour along dimension ``i``: a BB bit for ``i <= k``, else the set-2 link."""
        if i <= self.k:
            return u ^ (1 << (i - 1))
        return u ^ (1 << (self.k + self.subblock(u)))

    def is_link(self, u, v):
        """Return True when ``u ^ v`` is one BB bit, or the 1st-field bit named by u's subfield."""
        if not (0 <= u < self.num_nodes and 0 <= v < self.num_nodes):
            return False
        x = u ^ v
        if x == 0 or x & (x - 1):
            return False
        b = x.bit_length() - 1
        return b < self.k or b - self.k == self.subblock(u)

    # -- routing --------------------------------------------------------------------------------
    def _walk(self, s, mask, t):
        """Return the shortest length of a walk in the subfield cube from ``s`` through ``mask`` to ``t``."""
        return subcube_walk_table(self.n)[t ^ s][int(_translate_table(self.n)[s, mask])]

    def route(self, u, v):
        """Return a shortest path: node bits of the SB first, then a shortest subfield walk that
        takes the inter-BB link at every subblock whose BB bit must change."""
        path = ascending_path(u, (u & ~((1 << self.low) - 1)) | (v & ((1 << self.low) - 1)),
                              range(self.low))
        cur = path[-1]
        todo = (u ^ v) >> self.k
        target = self.subblock(v)
        while True:
            m = self.subblock(cur)
            if todo >> m & 1:
                todo ^= 1 << m
                cur ^= 1 << (self.k + m)
                path.append(cur)
                continue
            if m == target and not todo:
                return path
            need = self._walk(m, todo, target)
            for b in range(self.n):
                if self._walk(m ^ (1 << b), todo, target) == need - 1:
                    cur ^= 1 << (self.low + b)
                    path.append(cur)
                    break

    def distance(self, u, v):
        """Return |BB bits to change| + Hamming(node bits) + the shortest subfield walk."""
        todo = (u ^ v) >> self.k
        low = (u ^ v) & ((1 << self.low) - 1)
        return bin(todo).count("1") + bin(low).count("1") + self._walk(
            self.subblock(u), todo, self.subblock(v))

    def _sums(self):
        """Return ``(max, total)`` of ``|D| + walk(0, D, t)`` over every BB-bit set D and end t."""
        g = np.array(subcube_walk_table(self.n), dtype=np.int64)
        masks = np.arange(g.shape[1], dtype=np.int64)
        pop = np.zeros_like(masks)
        for b in range(1 << self.n):
            pop += (masks >> b) & 1
        d = g + pop[None, :]
        return int(d.max()), int(d.sum())

    def translation_orbits(self):
        """Return ``(sources, weights, generators)`` for :func:`~dualmpi.topology.analysis.orbit_bfs`.

        XOR with an address whose 0th subfield is zero maps links onto links (a BB bit stays
        a BB bit; the set-2 link of ``u`` is named by ``u``'s subfield, which the XOR keeps), so
        the orbits are the ``2^n`` subfield values: sources ``m << (k - n)``, each orbit
        ``p / 2^n`` nodes.  The generators (one XOR per non-subfield bit) are yielded lazily.
        """
        sources = [m << self.low for m in range(1 << self.n)]
        weights = [self.num_nodes >> self.n] * len(sources)
        bits = [b for b in range(self.bits) if not self.low <= b < self.k]

        def generators():
            nodes = np.arange(self.num_nodes, dtype=np.int64)
            for b in bits:
                yield nodes ^ (1 << b)

        return sources, weights, generators()

    def formulas(self):
        """Return links p(k+1)/2, diameter k - n + 2^(n+1) (k + 1 when n = 0) and the average
        distance summed from the subfield walk table.

        The diameter: change every BB bit (2^n inter-BB links) on a closed walk through all
        2^n subblocks (2^n links), and every node bit (k - n).  The thesis gives no
        bisection width (``None``).
        """
        p, low = self.num_nodes, self.low
        _, total = self._sums()
        combos = 1 << ((1 << self.n) + self.n)  # (BB-bit set, end subblock) pairs
        dist_sum = (1 << low) * total + combos * low * (1 << low) // 2
        return {
            "links": p * self.degree // 2,
            "diameter": self.k + 1 if self.n == 0 else low + (2 << self.n),
            "avg_distance": float(Fraction(dist_sum, p)),
            "bisection_width": None,
        }
