"""The hierarchical dual-net HDN(B, k, S) and the recursive dual-net RDN of Li, Peng and Chu."""

import math
from functools import lru_cache

from ..errors import NodeError, SpecError
from .base import MAX_ADDRESS_BITS, Topology, check_int_param
from .product import ProductGraph, cost_ratio, format_subproduct, paper_degree, parse_subproduct

__all__ = ["HDN", "RDN", "DISTANCE_BFS_LIMIT"]

#: Largest network whose :meth:`HDN.distance` is computed (by breadth-first search).
DISTANCE_BFS_LIMIT = 1 << 20


class HDN(Topology):
    """The k-level hierarchical dual-net HDN(B, k, S) over a symmetric product graph B.

    Level i (1 <= i <= k) takes ``2 n_i`` copies (*clusters*) of HDN(B, i-1, S),
    ``n_i`` of class 0 and ``n_i`` of class 1, where ``n_i = N_{i-1} / s_i`` is the
    number of *super-nodes* of a cluster.  A super-node of level i is the
    sub-product SN^i of one copy of B: the nodes that differ only in the
    coordinates of the factors of SN^i.  The level-i *cross-edge* joins node
    ``(C, U, SN, N)`` to ``(1-C, SN, U, N)``: class, cluster id, super-node id
    inside the cluster and node id inside the super-node (the paper's
    ``(C^i, U^i_id, SN^i_id, N^i_id)``).

    Re-indexing between levels: inside a cluster (an HDN(B, i-1, S)) a node's
    super-node id of level i is the mixed-radix number of its lower levels'
    classes and cluster ids ``(C^{i-1}, U^{i-1}, ..., C^1, U^1)`` followed by its
    base coordinates outside SN^i; its node id is the mixed-radix number of its
    coordinates in SN^i (Section 4: "moves the indexes of those B_j in
    SN^i - SN^{i-1} into N^i_id and ... SN^{i-1} - SN^i into SN^i_id").

    Node ids are the paper's serial numbers ``((C n_k + U) n_k + SN) s_k + N``.
    Dimensions ``1 .. d_0`` are the links of B (factor by factor), dimension
    ``d_0 + i`` is the cross-edge of level i; the degree is ``d_0 + k``.

    Parameters
    ----------
    base : str
        The base network B, e.g. ``"2x3x5"`` (see :func:`~dualmpi.topology.product.parse_base`).
    k : int
        Number of levels, ``k >= 1``.
    s : str
        The super-nodes SN^1 / ... / SN^k joined by ``/``, each a sub-product of B
        such as ``2x3``, its size ``6``, ``@1x@3`` (factor positions) or ``1``.

    References
    ----------
    Y. Li, S. Peng, W. Chu, "Hierarchical Dual-Net: A Flexible Interconnection
    Network and its Routing Algorithm", Section 2 (construction), Section 3
    (Theorem 1, Tables 1 and 3), Section 4 (re-indexing, Algorithm 1), Section 5
    (Algorithm 2).

    Examples
    --------
    >>> h = HDN("2x3x5", 2, "2x3/3x5")
    >>> h.num_nodes, h.degree
    (12000, 7)
    >>> u, v = h.parse_address("(0,0,0,0)"), h.parse_address("(1,19,19,14)")
    >>> len(h.route(u, v)) - 1
    9
    >>> h.address(h.parse_address("(1,19,19,14)"), level=1)
    (1, 4, 4, 5)
    """

    name = "hdn"
    reference = "Li, Peng, Chu: Hierarchical Dual-Net, Sec. 2-5, Thm 1-3, Alg. 1-2"
    #: Spec parameters given as strings (parsed by the class, not as integers).
    spec_strings = ("base", "s")

    def __init__(self, base, k, s):
        self.base = ProductGraph(base)
        k = check_int_param("k", self.name, k, 1)
        levels = str(s).strip().split("/")
        if len(levels) != k:
            raise SpecError(f"{self.name}: s={s} names {len(levels)} super-node(s) but k={k} "
                            f"(give one per level, joined by /, e.g. s=2x3/3x5)")
        factors = self.base.factors
        self.k = k
        self.J = tuple(parse_subproduct(t, factors, self.name) for t in levels)
        self._params = {"base": self.base.spec.partition("=")[2], "k": k,
                        "s": "/".join(format_subproduct(J, factors) for J in self.J)}
        self._size_levels()
        self._layout()

    # -- construction ---------------------------------------------------------------------------
    def _size_levels(self):
        """Set s_i, n_i and N_i (N_i = 2 N_{i-1}^2 / s_i) for i = 0 .. k."""
        sizes = self.base.sizes
        self.s = (1,) + tuple(math.prod(sizes[j] for j in J) for J in self.J)
        self.N = [self.base.num_nodes]
        self.n = [1]
        for i in range(1, self.k + 1):
            self.n.append(self.N[-1] // self.s[i])
            self.N.append(2 * self.n[i] * self.N[-1])
            if self.N[-1].bit_length() > MAX_ADDRESS_BITS:
                raise SpecError(f"{self.name}: {self.N[-1]} nodes at level {i}, too many "
                                f"(at most 2^{MAX_ADDRESS_BITS})")
        self.num_nodes = self.N[self.k]
        self.d0 = self.base.degree
        self.degree = self.d0 + self.k

    def _group(self, i):
        """Return the digits that form the super-node id of level i, most significant first."""
        lower = [d for lvl in range(i - 1, 0, -1) for d in (("c", lvl), ("U", lvl))]
        return lower + [("x", j) for j in range(len(self.base.sizes)) if j not in self.J[i - 1]]

    def _radix(self, digit):
        """Return the range of a digit: 2 for a class, n_i for a cluster id, b_j for a coordinate."""
        kind, i = digit
        return 2 if kind == "c" else self.n[i] if kind == "U" else self.base.sizes[i]

    def _layout(self):
        """Place every digit of the flat address in the node id (mixed radix, paper order)."""
        k = self.k
        order = [("c", k), ("U", k)] + self._group(k) + [("x", j) for j in self.J[k - 1]]
        self.weight = {}
        w = 1
        for digit in reversed(order):
            self.weight[digit] = w
            w *= self._radix(digit)
        # per level: the super-node id's digits, least significant first, and for each its
        # (place in the node id, range, place in the super-node id)
        self.group_digits, self.cross_digits = {}, {}
        for i in range(1, k + 1):
            self.group_digits[i] = tuple(reversed(self._group(i)))
            gw, rows = 1, []
            for digit in self.group_digits[i]:
                rows.append((self.weight[digit], self._radix(digit), gw))
                gw *= self._radix(digit)
            self.cross_digits[i] = tuple(rows)

    # -- addresses ------------------------------------------------------------------------------
    def _digit(self, u, digit):
        """Return one digit of ``u``; numpy-safe."""
        return (u // self.weight[digit]) % self._radix(digit)

    def flat(self, u):
        """Return the flat address of ``u``: ``{("c", i): class, ("U", i): cluster, ("x", j): coord}``."""
        return {digit: int(self._digit(u, digit)) for digit in self.weight}

    def node(self, flat):
        """Return the id of a flat address."""
        return sum(flat[d] * w for d, w in self.weight.items())

    def _group_value(self, flat, i):
        """Return the super-node id of level i of a flat address."""
        return sum(flat[d] * gw for (d, (_, _, gw)) in zip(self.group_digits[i], self.cross_digits[i]))

    def _node_value(self, flat, i):
        """Return the node id of level i (the coordinates in SN^i) of a flat address."""
        out = 0
        for j in self.J[i - 1]:
            out = out * self.base.sizes[j] + flat[("x", j)]
        return out

    def address(self, u, level=None):
        """Return the paper's ``(C, U, SN, N)`` of ``u`` at ``level`` (default k).

        ``level = i < k`` gives the address of ``u`` inside its cluster of level
        i+1, an HDN(B, i, S): the re-indexing of Section 4.  ``level = 0`` gives the
        coordinates in B.
        """
        level = self.k if level is None else level
        f = self.flat(self.check_node(u))
        if level == 0:
            return tuple(f[("x", j)] for j in range(len(self.base.sizes)))
        return (f[("c", level)], f[("U", level)], self._group_value(f, level), self._node_value(f, level))

    def fields(self, u):
        """Return ``{"class", "cluster", "supernode", "node"}``: the address of level k."""
        return dict(zip(("class", "cluster", "supernode", "node"), self.address(u)))

    def format_node(self, u):
        """Return ``(C,U,SN,N)``, e.g. ``(1,19,19,14)``."""
        return "(" + ",".join(map(str, self.address(u))) + ")"

    def parse_address(self, text):
        """Return the id of a node written ``(C,U,SN,N)`` as :meth:`format_node` prints it."""
        n, s = self.n[self.k], self.s[self.k]
        try:
            c, U, q, x = (int(p) for p in str(text).strip().strip("()").split(","))
        except ValueError:
            c = None
        if c is None or not (0 <= c < 2 and 0 <= U < n and 0 <= q < n and 0 <= x < s):
            raise NodeError(f"address {text!r} is not (C,U,SN,N) with C < 2, U and SN < {n}, "
                            f"N < {s} for {self.spec}")
        return ((c * n + U) * n + q) * s + x

    # -- links ----------------------------------------------------------------------------------
    def neighbor(self, u, i):
        """Return the neighbour along a link of B (``i <= d_0``) or the cross-edge of level ``i - d_0``."""
        if i <= self.d0:
            j, t = self.base.dims[i - 1]
            w = self.weight[("x", j)]
            x = (u // w) % self.base.sizes[j]
            return u + (self.base.factors[j].step(x, t) - x) * w
        lvl = i - self.d0
        wc, wu = self.weight[("c", lvl)], self.weight[("U", lvl)]
        c, U = (u // wc) % 2, (u // wu) % self.n[lvl]
        q, delta = 0, 0
        for w, b, gw in self.cross_digits[lvl]:
            d = (u // w) % b
            q = q + d * gw
            delta = delta + ((U // gw) % b - d) * w
        return u + (1 - 2 * c) * wc + (q - U) * wu + delta

    def _cross(self, flat, i):
        """Return the flat address across the cross-edge of level i."""
        return self.flat(self.neighbor(self.node(flat), self.d0 + i))

    def _with_supernode(self, flat, i, q):
        """Return ``flat`` moved to super-node ``q`` of level i of its cluster, node id kept."""
        out = dict(flat)
        for d, (_, b, gw) in zip(self.group_digits[i], self.cross_digits[i]):
            out[d] = (q // gw) % b
        return out

    # -- routing --------------------------------------------------------------------------------
    def _base_path(self, a, b, only=None, skip=()):
        """Return Base_routing: dimension order over the factors (``only`` them, ``skip`` some)."""
        path = [a]
        for j, f in enumerate(self.base.factors):
            if (only is not None and j not in only) or j in skip:
                continue
            for x in f.path(a[("x", j)], b[("x", j)])[1:]:
                nxt = dict(path[-1])
                nxt[("x", j)] = x
                path.append(nxt)
        return path

    def _route_to(self, i, u, t, free=()):
        """Return a path in HDN(B, i, S) from ``u`` to ``t``, ignoring the coordinates of ``free`` factors.

        Case 2 routes ``u`` to *some* node of the super-node facing the destination
        cluster (its node id free), crosses, and routes on inside that cluster.
        """
        if i == 0:
            return self._base_path(u, t, skip=free)
        if (u[("c", i)], u[("U", i)]) == (t[("c", i)], t[("U", i)]):  # case 1: same cluster
            return self._route_to(i - 1, u, t, free)
        head = []
        if u[("c", i)] == t[("c", i)]:  # case 3: same class, reduced to case 2
            head, u = [u], self._cross(u, i)
        facing = self._with_supernode(u, i, t[("U", i)])
        first = self._route_to(i - 1, u, facing, self.J[i - 1])
        landing = self._cross(first[-1], i)
        return head + first + self._route_to(i - 1, landing, t, free)

    def _route_printed(self, i, u, v):
        """Return HDN_routing(HDN(B, i, S), u, v) as printed (Algorithm 1), node ids kept."""
        if u == v:
            return [u]
        if i == 0:
            return self._base_path(u, v)
        if (u[("c", i)], u[("U", i)]) == (v[("c", i)], v[("U", i)]):  # case 1: same cluster
            return self._route_printed(i - 1, u, v)
        if u[("c", i)] == v[("c", i)]:  # case 3: same class, reduced to case 2
            return [u] + self._case2_printed(i, self._cross(u, i), v)
        return self._case2_printed(i, u, v)

    def _case2_printed(self, i, u, v):
        """Return the printed case 2: u => u' -> u'' => v' <= v with u' = (u0, u1, v1, u3)."""
        u1 = self._with_supernode(u, i, v[("U", i)])
        v1 = self._with_supernode(v, i, u[("U", i)])
        first = self._route_printed(i - 1, u, u1)
        middle = self._base_path(self._cross(u1, i), v1, only=self.J[i - 1])
        last = self._route_printed(i - 1, v, v1)[::-1]
        return first + middle + last[1:]

    def route(self, u, v):
        """Return Algorithm 1's path from ``u`` to ``v``, with the node id left free on the way out.

        Case 1 (same cluster) recurses; case 2 (distinct classes) routes ``u`` to
        a node ``u'`` of the super-node facing ``v``'s cluster, crosses to ``u''``
        and routes on to ``v``; case 3 (same class) crosses first.  As printed,
        ``u'`` keeps ``u``'s node id, and when SN^k is not inside SN^(k-1) the
        lower levels' cross-edges must carry the node id around and back, which
        breaks Theorem 2's bound (docs/errata.md, H7; :meth:`route_as_printed`).
        """
        u, v = self.check_node(u), self.check_node(v)
        return [self.node(f) for f in self._route_to(self.k, self.flat(u), self.flat(v))]

    def route_as_printed(self, u, v):
        """Return Algorithm 1's path as printed: ``u' = (u0, u1, v1, u3)``, ``v' = (v0, v1, u1, v3)``."""
        u, v = self.check_node(u), self.check_node(v)
        return [self.node(f) for f in self._route_printed(self.k, self.flat(u), self.flat(v))]

    def distance(self, u, v):
        """Return the BFS distance (no closed form is known); None above :data:`DISTANCE_BFS_LIMIT`."""
        if self.num_nodes > DISTANCE_BFS_LIMIT:
            return None
        return int(self._bfs_from(self.check_node(u))[self.check_node(v)])

    @lru_cache(maxsize=8)
    def _bfs_from(self, u):
        """Return the BFS distances from ``u`` (a few sources cached)."""
        from .analysis import distances_from

        return distances_from(self, u, self._table())

    @lru_cache(maxsize=1)
    def _table(self):
        """Return the neighbour table (cached)."""
        from .analysis import neighbor_table

        return neighbor_table(self)

    def translate(self, u, shift):
        """Return the image of nodes ``u`` (numpy array) under the translation ``shift`` of B.

        Every base coordinate ``x_j`` becomes ``x_j + shift[j]`` (mod b_j), in every copy of
        B, and every cluster id ``U^i`` (a super-node id of level i: lower classes and
        cluster ids and the coordinates outside SN^i) is translated the same way,
        recursively; classes stay.  A cross-edge swaps ``U^i`` and the super-node id, which
        are translated alike, so this is an automorphism (:meth:`translation_orbits`
        checks it anyway).
        """
        import numpy as np

        u = np.asarray(u, dtype=np.int64)

        def group(val, i):
            out = np.zeros_like(val)
            for d, (_, radix, gw) in zip(self.group_digits[i], self.cross_digits[i]):
                out += digit(d, (val // gw) % radix) * gw
            return out

        def digit(d, val):
            kind, j = d
            if kind == "x":
                return (val + shift[j]) % self.base.sizes[j]
            if kind == "U":
                return group(val, j)
            return val

        out = np.zeros_like(u)
        for d, w in self.weight.items():
            out += digit(d, (u // w) % self._radix(d)) * w
        return out

    def translation_orbits(self):
        """Return ``(sources, weights, generators)`` for :func:`~dualmpi.topology.analysis.orbit_bfs`.

        The translations of the base torus (:meth:`translate`) act freely on the nodes, so
        each orbit has ``N_0`` nodes and holds exactly one node whose base coordinates are
        all 0: those are the ``p / N_0`` sources.  The generators are the unit translations
        of each factor, yielded lazily.
        """
        import numpy as np

        nodes = np.arange(self.num_nodes, dtype=np.int64)
        zero = np.ones(self.num_nodes, dtype=bool)
        for j in range(len(self.base.sizes)):
            zero &= self._digit(nodes, ("x", j)) == 0
        sources = np.flatnonzero(zero).tolist()
        count = len(self.base.sizes)

        def generators():
            for j in range(count):
                yield self.translate(nodes, [int(i == j) for i in range(count)])

        return sources, [self.base.num_nodes] * len(sources), generators()

    # -- properties -----------------------------------------------------------------------------
    def sn_diameter(self, i):
        """Return D(SN^i), the diameter of the super-node of level i."""
        return sum(self.base.factors[j].diameter for j in self.J[i - 1])

    def sn_bcast_steps(self, i):
        """Return T(SN^i) = sum of the factors' one-port broadcast steps."""
        return sum(self.base.factors[j].bcast_steps for j in self.J[i - 1])

    def theorem_form(self, whole, part):
        """Return ``2^k X(B) - sum_j 2^j X(SN^{k-j}) + 2^{k+1} - 2`` (Theorems 1-3)."""
        k = self.k
        return 2**k * whole - sum(2**j * part(k - j) for j in range(k)) + 2 ** (k + 1) - 2

    def diameter_bound(self):
        """Return the diameter by Theorem 1's recurrence D_i = 2 D_(i-1) - D(SN^i) + 2.

        With ``n_1 = 1`` (s_1 = N_0) there is one cluster per class, so the
        recurrence's same-class case never occurs: D_1 = D(B) + 1, not D(B) + 2,
        and D_k is 2^(k-1) below Theorem 1's closed form (docs/errata.md, H4).
        """
        bdiam = self.base.formulas()["diameter"]
        d = bdiam
        for i in range(1, self.k + 1):
            d = 2 * d - self.sn_diameter(i) + 2 if self.n[i] > 1 else d + 1
        return d

    def formulas(self):
        """Return links, diameter (Theorem 1), Theorem 2 and 3 bounds, Table 3's CR_w and more."""
        p, k = self.num_nodes, self.k
        bprops = self.base.formulas()
        diameter = self.diameter_bound()
        degree_paper = paper_degree(self.base.factors) + k
        n0, prod_s = self.base.num_nodes, math.prod(self.s[1:])
        return {
            "links": p * self.degree // 2,
            "diameter": diameter,
            "avg_distance": None,
            "bisection_width": None,
            "levels": k,
            "base_nodes": n0,
            "base_degree": self.d0,
            "base_diameter": bprops["diameter"],
            "supernode_sizes": list(self.s[1:]),
            "supernode_diameters": [self.sn_diameter(i) for i in range(1, k + 1)],
            "clusters_per_class": list(self.n[1:]),
            "nodes_per_level": list(self.N),
            "nodes_formula_printed": (2 * n0) ** (2**k) // (2 * prod_s),
            "diameter_theorem1": self.theorem_form(bprops["diameter"], self.sn_diameter),
            "routing_bound_theorem2": self.theorem_form(bprops["diameter"], self.sn_diameter),
            "bcast_steps_theorem3": self.theorem_form(bprops["bcast_steps"], self.sn_bcast_steps),
            "cr_w": round(cost_ratio(p, self.degree, diameter), 4),
            "degree_paper": degree_paper,
            "cr_w_paper": round(cost_ratio(p, degree_paper, diameter), 4),
        }


class RDN(HDN):
    """The recursive dual-net RDN(B, k): the hierarchical dual-net with every s_i = 1.

    Each level is the plain dual-construction: from a symmetric graph G of n
    nodes, 2n copies, and node i of cluster j of class 0 joined to node j of
    cluster i of class 1; ``(2 N_0)^(2^k) / 2`` nodes.  ``rdn:base=q(r-1),k=1``
    is the dual-cube with r links per node.

    Parameters
    ----------
    base : str
        The base network B (see :func:`~dualmpi.topology.product.parse_base`).
    k : int
        Number of dual-constructions, ``k >= 1``.

    References
    ----------
    Li, Peng, Chu, "Hierarchical Dual-Net", Section 2 (Figure 1) and Table 2;
    "Recursive dual-net", ICA3PP 2009.

    Examples
    --------
    >>> RDN("q2", 1).num_nodes, RDN("2x3x5", 2).num_nodes
    (32, 6480000)
    """

    name = "rdn"
    reference = "Li, Peng, Chu: Hierarchical Dual-Net, Sec. 2 (dual-construction), Table 2"
    spec_strings = ("base",)

    def __init__(self, base, k):
        k = check_int_param("k", self.name, k, 1)
        super().__init__(base, k, "/".join(["1"] * k))
        self._params = {"base": self._params["base"], "k": k}
