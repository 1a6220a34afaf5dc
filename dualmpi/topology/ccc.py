"""The cube-connected cycles CCC(n) of Preparata and Vuillemin: an n-cube with a ring at every node."""

import numpy as np

from .base import Topology, check_address_bits, check_int_param

__all__ = ["CubeConnectedCycles", "cycle_walk", "diameter_formula"]


def diameter_formula(n):
    """Return the diameter of CCC(n): 6 for n = 3, ``2n + floor(n/2) - 2`` for n >= 4.

    The HDN paper's Table 2 prints ``2n``, which is right only for n <= 5
    (docs/errata.md, HDN E5).

    >>> [diameter_formula(n) for n in range(3, 9)]
    [6, 8, 10, 13, 15, 18]
    """
    return 6 if n == 3 else 2 * n + n // 2 - 2


def cycle_walk(n, i, j, todo):
    """Return the shortest walk ``[i, ..., j]`` on the n-cycle that visits every position of ``todo``.

    ``todo`` is a bit set of positions.  The visited positions of a walk form an arc
    (or the whole cycle), so the candidates are: for every gap between two cyclically
    consecutive required positions (``todo``, ``i`` and ``j``), the arc around the
    other positions, walked to one end, to the other end and back to ``j``; and the
    two full turns of the cycle, clockwise and counter-clockwise.

    >>> cycle_walk(6, 0, 0, 0b000110)
    [0, 1, 2, 1, 0]
    >>> cycle_walk(6, 0, 3, 0b100000)
    [0, 5, 4, 3]
    """
    need = sorted({i, j} | {x for x in range(n) if todo >> x & 1})
    best = None
    for idx, b in enumerate(need):  # the arc from b clockwise to a, skipping the gap a -> b
        a = need[idx - 1]
        length = (a - b) % n
        x, y = (i - b) % n, (j - b) % n
        down = list(range(x, -1, -1)) + list(range(1, length + 1)) + list(range(length - 1, y - 1, -1))
        up = list(range(x, length + 1)) + list(range(length - 1, -1, -1)) + list(range(1, y + 1))
        for offs in (down, up):
            if best is None or len(offs) < len(best):
                best = [(b + o) % n for o in offs]
    for sign in (1, -1):  # full turns
        steps = n + (sign * (j - i)) % n
        if len(best) > steps + 1:
            best = [(i + sign * t) % n for t in range(steps + 1)]
    return best


class CubeConnectedCycles(Topology):
    """The cube-connected cycles CCC(n): ``n * 2**n`` nodes of degree 3.

    Node ``(w, i)`` (cube address ``w`` of ``n`` bits, position ``i`` on its ring) has id
    ``w * n + i``.  Dimension 1 is the cube link to ``(w XOR 2^i, i)``: the node at
    position ``i`` implements the ring's ``i``-th cube dimension; dimensions 2 and 3 are
    the ring links to positions ``i + 1`` and ``i - 1`` (mod n).

    Parameters
    ----------
    n : int
        Cube dimension and ring length, ``n >= 3`` (for smaller n the ring links
        coincide).

    References
    ----------
    F. P. Preparata, J. Vuillemin, "The cube-connected cycles: a versatile network for
    parallel computation", Commun. ACM 24 (1981), cited as [8] in Y. Li, S. Peng, W. Chu,
    "Hierarchical Dual-Net", Table 2; M. A. Sideras, thesis, Section 2.1 (CCC(n) and its
    relation to RH).  Diameter: D. S. Meliksetian, C. Y. R. Chen, "Optimal routing
    algorithm and the diameter of the cube-connected cycles", IEEE TPDS 4(10), 1993.

    Examples
    --------
    >>> ccc = CubeConnectedCycles(3)
    >>> ccc.num_nodes, ccc.degree, ccc.neighbors(0)
    (24, 3, (3, 1, 2))
    >>> ccc.format_node(ccc.neighbor(0, 1)), ccc.route(0, 23), ccc.formulas()["diameter"]
    ('001.0', [0, 3, 4, 10, 11, 23], 6)
    """

    name = "ccc"
    reference = ("Preparata, Vuillemin: cube-connected cycles (CACM 1981); HDN paper Table 2; "
                 "Sideras (thesis) Sec. 2.1")

    def __init__(self, n):
        n = check_int_param("n", self.name, n, 3)
        check_address_bits(self.name, n + max(1, (n - 1).bit_length()))
        self._params = {"n": n}
        self.n = n
        self.num_nodes = n << n
        self.degree = 3

    # -- addresses ------------------------------------------------------------------------------
    def cube(self, u):
        """Return the cube address ``w`` of ``u`` (works on numpy arrays)."""
        return u // self.n

    def position(self, u):
        """Return the ring position ``i`` of ``u`` (works on numpy arrays)."""
        return u % self.n

    def node(self, w, i):
        """Return the id of node ``(w, i)``."""
        return w * self.n + i

    def fields(self, u):
        """Return ``{"cube", "position"}``."""
        return {"cube": self.cube(u), "position": self.position(u)}

    def format_node(self, u):
        """Return ``w.i``: the cube address in binary (bit 0 last), the ring position in decimal."""
        return f"{self.cube(u):0{self.n}b}.{self.position(u)}"

    # -- links ----------------------------------------------------------------------------------
    def neighbor(self, u, i):
        """Return the neighbour along dimension ``i``: 1 cube link, 2 next on the ring, 3 previous."""
        w, pos = self.cube(u), self.position(u)
        if i == 1:
            return (w ^ (1 << pos)) * self.n + pos
        if i == 2:
            return w * self.n + (pos + 1) % self.n
        if i == 3:
            return w * self.n + (pos - 1) % self.n
        raise ValueError(f"dimension {i} out of range for {self.spec} (1..3)")

    # -- routing --------------------------------------------------------------------------------
    def route(self, u, v):
        """Return a shortest path: the shortest ring walk through every position whose cube bit
        differs, taking the cube link at each such position on the first visit."""
        w, i = divmod(u, self.n)
        todo = w ^ self.cube(v)
        walk = cycle_walk(self.n, i, self.position(v), todo)
        path = [u]
        for t, q in enumerate(walk):
            if todo >> q & 1:
                todo ^= 1 << q
                w ^= 1 << q
                path.append(self.node(w, q))
            if t + 1 < len(walk):
                path.append(self.node(w, walk[t + 1]))
        return path

    def distance(self, u, v):
        """Return the shortest ring walk's length plus the number of cube bits to change."""
        todo = self.cube(u) ^ self.cube(v)
        return len(cycle_walk(self.n, self.position(u), self.position(v), todo)) - 1 + bin(
            todo).count("1")

    def translation_orbits(self):
        """Return ``(sources, weights, generators)`` for :func:`~dualmpi.topology.analysis.orbit_bfs`.

        CCC(n) is vertex-transitive: XOR of the cube address with ``2^b`` and the rotation
        ``(w, i) -> (w rotated left by one, i + 1)`` are automorphisms and generate a
        group with one orbit, so one BFS (from node 0) gives every figure.
        """
        nodes = np.arange(self.num_nodes, dtype=np.int64)
        w, pos = nodes // self.n, nodes % self.n
        n = self.n

        def generators():
            for b in range(n):
                yield (w ^ (1 << b)) * n + pos
            rot = ((w << 1) | (w >> (n - 1))) & ((1 << n) - 1)
            yield rot * n + (pos + 1) % n

        return [0], [self.num_nodes], generators()

    def formulas(self):
        """Return links 3p/2, the diameter (:func:`diameter_formula`) and, up to 2^16 nodes, the
        average distance summed from the closed-form distance of node 0 (vertex-transitive).

        No bisection width is given (``None``).
        """
        p = self.num_nodes
        avg = None
        if p <= 1 << 16:
            avg = sum(self.distance(0, v) for v in range(p)) / p
        return {"links": 3 * p // 2, "diameter": diameter_formula(self.n), "avg_distance": avg,
                "bisection_width": None}
