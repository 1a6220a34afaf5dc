"""The metacube MC(k, m) of Li, Peng and Chu: a k-cube of classes over m-cube clusters."""

from functools import lru_cache
from itertools import combinations

from ..errors import NodeError
from .base import Topology, check_address_bits, check_int_param
from .hypercube import ascending_path

__all__ = [
    "MetaCube",
    "class_walk",
    "CLASS_PATH_TABLE",
    "CLASS_PATH_TABLE_PRINTED",
    "get_type",
]

#: The metacube paper's Table 1 for MC(2, m) as printed: ``(dest, type) -> classes after 0``.
CLASS_PATH_TABLE_PRINTED = {
    (0, 0): (), (0, 1): (1, 0), (0, 2): (2, 0), (0, 3): (1, 3, 2, 0),
    (1, 0): (1,), (1, 1): (2, 3, 1), (1, 2): (2, 3, 1), (1, 3): (2, 3, 1),
    (2, 0): (2,), (2, 1): (1, 3, 2), (2, 2): (1, 3, 2), (2, 3): (1, 3, 2),
    (3, 0): (1, 3), (3, 1): (1, 3), (3, 2): (1, 3), (3, 3): (1, 3, 2, 3),
}

#: Table 1 corrected (docs/errata.md, M1): ``(dest=3, type=2)`` must pass class 2, not class 1.
CLASS_PATH_TABLE = dict(CLASS_PATH_TABLE_PRINTED)
CLASS_PATH_TABLE[(3, 2)] = (2, 3)


def get_type(dest, differs):
    """Return Algorithm 3's ``type`` from ``dest = c_d XOR c_s`` and ``differs(i)`` (relative field i).

    ``differs(i)`` tells whether the fields at relative position ``i`` (absolute
    position ``i XOR c_s``) of source and destination differ.
    """
    t = 0
    if dest == 0:
        t = 2 if differs(2) else 0
        t += 1 if differs(1) else 0
        if differs(3):
            t = 3
    elif dest == 1:
        t = (2 if differs(3) else 0) + (1 if differs(2) else 0)
    elif dest == 2:
        t = (2 if differs(3) else 0) + (1 if differs(1) else 0)
    else:
        t = (2 if differs(2) else 0) + (1 if differs(1) else 0)
    return t


def _popcount(x):
    """Return the number of one bits of ``x``."""
    return bin(x).count("1")


def _walk_key(walk):
    """Rank equally short class walks: fewest returns to the source, fewest repeats, then lexical."""
    inner = walk[1:-1]
    source_returns = sum(1 for c in inner if c == walk[0])
    repeats = len(walk) - len(set(walk))
    return (source_returns, repeats, walk)


@lru_cache(maxsize=None)
def class_walk(k, dest, need):
    """Return the shortest class sequence from class 0 to ``dest`` visiting every class in ``need``.

    The walk moves along the high-level k-cube (one class bit per step).  Among the
    shortest walks it prefers those that do not return to the source class, then
    those with fewest repeated classes, then the lexicographically smallest; this
    rule reproduces the (corrected) classPath table of the metacube paper for k = 2.

    Parameters
    ----------
    k : int
        Dimension of the class cube.
    dest : int
        Destination class, relative to the source class (``c_d XOR c_s``).
    need : int
        Bit mask of classes (relative to the source) whose cluster must be entered.

    Returns
    -------
    tuple of int
        ``(0, ..., dest)``; its length minus one is the number of cross-edges.

    References
    ----------
    Y. Li, S. Peng, W. Chu, "Efficient Communication in Metacube", Sec. 3.3, Table 1.

    Examples
    --------
    >>> class_walk(2, 3, 0b0110)      # visit classes 1 and 2, end in class 3
    (0, 1, 3, 2, 3)
    >>> class_walk(2, 0, 0b1000)      # a tour through class 3 and back
    (0, 1, 3, 2, 0)
    """
    need &= ~1  # the source class is visited at the start
    target = need | (1 << dest)
    best = []
    length = _popcount(dest)
    while not best:
        _extend_walks(k, (0,), 1, target, dest, length, best)
        length += 1
    return min(best, key=_walk_key)


def _extend_walks(k, walk, seen, target, dest, length, out):
    """Append to ``out`` every walk of exactly ``length`` steps that covers ``target`` and ends at ``dest``."""
    cur = walk[-1]
    left = length - (len(walk) - 1)
    if left == 0:
        if cur == dest and seen & target == target:
            out.append(walk)
        return
    missing = target & ~seen
    # lower bound: reach every missing class, then dest
    bound = _popcount(cur ^ dest)
    c = 0
    while missing >> c:
        if missing >> c & 1:
            bound = max(bound, _popcount(cur ^ c) + _popcount(c ^ dest))
        c += 1
    unseen = _popcount(missing)
    if unseen:
        # each step enters at most one new class, and the walk must end in dest
        bound = max(bound, unseen + (0 if missing >> dest & 1 else 1))
    if bound > left:
        return
    for b in range(k):
        nxt = cur ^ (1 << b)
        _extend_walks(k, walk + (nxt,), seen | (1 << nxt), target, dest, length, out)


class MetaCube(Topology):
    """The metacube MC(k, m) on ``2**(m*2**k + k)`` nodes with ``m + k`` links per node.

    An address is ``(c, m[2^k-1], ..., m[1], m[0])``: a k-bit class id ``c`` in the
    leftmost position and ``2**k`` fields of ``m`` bits.  Field ``m[c]`` is the node id;
    the other fields form the cluster id.  Dimensions ``1..m`` are the cube-edges
    (bits of ``m[c]``), dimensions ``m+1..m+k`` the cross-edges (bits of ``c``).
    MC(0, m) is the m-cube and MC(1, m) is the dual-cube F_{m+1}.

    Parameters
    ----------
    k : int
        Dimension of the high-level (class) cube, ``k >= 0``.
    m : int
        Dimension of the clusters, ``m >= 1``.

    References
    ----------
    Y. Li, S. Peng, W. Chu, "Efficient Communication in Metacube: A New Interconnection
    Network", Sec. 2 (definition), Sec. 3.3 (routing, classPath table).

    Examples
    --------
    >>> mc = MetaCube(2, 3)
    >>> mc.num_nodes, mc.degree
    (16384, 5)
    >>> u = mc.parse_address("(01,111,101,110,000)")
    >>> [mc.format_node(v) for v in mc.neighbors(u)]
    ['(01,111,101,111,000)', '(01,111,101,100,000)', '(01,111,101,010,000)', '(00,111,101,110,000)', '(11,111,101,110,000)']
    """

    name = "metacube"
    reference = "Li, Peng, Chu: Efficient Communication in Metacube, Sec. 2-3"

    def __init__(self, k, m):
        k = check_int_param("k", self.name, k, 0)
        m = check_int_param("m", self.name, m, 1)
        bits = m * (1 << k) + k if k < 8 else 1 << k
        check_address_bits(self.name, bits)
        self._params = {"k": k, "m": m}
        self.k, self.m = k, m
        self.num_fields = 1 << k
        self.class_shift = m * self.num_fields
        self.bits = self.class_shift + k
        self.num_nodes = 1 << self.bits
        self.degree = m + k
        self.field_mask = (1 << m) - 1

    # -- addresses ------------------------------------------------------------------------------
    def class_of(self, u):
        """Return the class id ``c`` of ``u``; works on numpy arrays."""
        return u >> self.class_shift

    def field(self, u, i):
        """Return field ``m[i]`` of ``u``."""
        return (u >> (self.m * i)) & self.field_mask

    def node_id(self, u):
        """Return the node id ``m[c]`` of ``u``."""
        return self.field(u, self.class_of(u))

    def cluster_id(self, u):
        """Return the cluster id: the other fields, concatenated from left to right."""
        c = self.class_of(u)
        out = 0
        for i in reversed(range(self.num_fields)):
            if i != c:
                out = (out << self.m) | self.field(u, i)
        return out

    def fields(self, u):
        """Return ``{"class", "cluster", "node"}`` of ``u``."""
        return {"class": self.class_of(u), "cluster": self.cluster_id(u), "node": self.node_id(u)}

    def format_node(self, u):
        """Return ``(c,m[2^k-1],...,m[0])`` in binary, as the paper writes addresses."""
        parts = [f"{self.class_of(u):0{self.k}b}"] if self.k else []
        parts += [f"{self.field(u, i):0{self.m}b}" for i in reversed(range(self.num_fields))]
        return "(" + ",".join(parts) + ")"

    def parse_address(self, text):
        """Return the node id of an address written as :meth:`format_node` prints it."""
        parts = [p.strip() for p in text.strip().strip("()").split(",")]
        widths = ([self.k] if self.k else []) + [self.m] * self.num_fields
        if len(parts) != len(widths) or any(
            len(p) != w or set(p) - {"0", "1"} for p, w in zip(parts, widths)
        ):
            raise NodeError(
                f"address {text!r} is not of the form (class,m[{self.num_fields - 1}],...,m[0]) "
                f"with a {self.k}-bit class and {self.m}-bit fields"
            )
        out = 0
        for p in parts:
            out = (out << len(p)) | int(p, 2)
        return self.check_node(out)

    # -- links ----------------------------------------------------------------------------------
    def neighbor(self, u, i):
        """Return the neighbour along cube-edge ``i <= m`` or cross-edge ``i > m``."""
        if i > self.m:
            return u ^ (1 << (self.class_shift + i - self.m - 1))
        return u ^ (1 << (self.m * self.class_of(u) + i - 1))

    def translation_orbits(self):
        """Return ``(sources, weights, generators)`` for :func:`~dualmpi.topology.analysis.orbit_bfs`.

        MC(k, m) is vertex-transitive: XOR of one field bit, and the class translation
        ``(c, m[i]) -> (c XOR 2^b, m[i XOR 2^b])`` (fields follow their class), map links
        onto links; together they move node 0 anywhere, so one BFS (from node 0) gives
        every figure.  The generators are yielded lazily.
        """
        import numpy as np

        nodes = np.arange(self.num_nodes, dtype=np.int64)

        def generators():
            for b in range(self.class_shift):
                yield nodes ^ (1 << b)
            cls = nodes >> self.class_shift
            for b in range(self.k):
                out = (cls ^ (1 << b)) << self.class_shift
                for i in range(self.num_fields):
                    out |= ((nodes >> (self.m * (i ^ (1 << b)))) & self.field_mask) << (self.m * i)
                yield out

        return [0], [self.num_nodes], generators()

    def is_link(self, u, v):
        """Return True for a one-bit difference in the class field or in the field ``m[c]``."""
        if not (0 <= u < self.num_nodes and 0 <= v < self.num_nodes):
            return False
        x = u ^ v
        if x == 0 or x & (x - 1):
            return False
        b = x.bit_length() - 1
        if b >= self.class_shift:
            return True
        lo = self.m * self.class_of(u)
        return lo <= b < lo + self.m

    # -- routing --------------------------------------------------------------------------------
    def differing_fields(self, u, v):
        """Return the bit mask of field positions ``i`` with ``m_u[i] != m_v[i]``."""
        mask = 0
        for i in range(self.num_fields):
            if self.field(u, i) != self.field(v, i):
                mask |= 1 << i
        return mask

    def class_path(self, u, v):
        """Return the absolute class sequence of the route from ``u`` to ``v`` (node renaming)."""
        cs = self.class_of(u)
        need = 0
        diff = self.differing_fields(u, v)
        for i in range(self.num_fields):
            if diff >> i & 1:
                need |= 1 << (i ^ cs)
        walk = class_walk(self.k, self.class_of(v) ^ cs, need)
        return [c ^ cs for c in walk]

    def table_class_path(self, u, v, table=None):
        """Return the class sequence Algorithm 4 reads from the classPath table (MC(2, m) only).

        ``table`` defaults to the corrected :data:`CLASS_PATH_TABLE`; pass
        :data:`CLASS_PATH_TABLE_PRINTED` to follow the paper as printed.
        """
        if self.k != 2:
            raise ValueError("the classPath table is defined for MC(2, m) only")
        cs = self.class_of(u)
        dest = self.class_of(v) ^ cs
        kind = get_type(dest, lambda i: self.field(u, i ^ cs) != self.field(v, i ^ cs))
        rel = (table or CLASS_PATH_TABLE)[(dest, kind)]
        return [cs] + [c ^ cs for c in rel]

    def walk_route(self, u, v, classes):
        """Return the path that follows ``classes``, fixing field ``m[c]`` ascending in each cluster.

        The path ends where the class sequence ends; it reaches ``v`` only when the
        sequence ends in ``v``'s class and visits every class whose field differs.
        """
        path = [u]
        if u == v:
            return path
        for step, c in enumerate(classes):
            cur = path[-1]
            if step:
                nxt = (cur & ((1 << self.class_shift) - 1)) | (c << self.class_shift)
                path.append(nxt)
                cur = nxt
            lo = self.m * c
            path.extend(ascending_path(cur, v, range(lo, lo + self.m))[1:])
        return path

    def route(self, u, v):
        """Return the paper's route: fix ``m[c]`` ascending in each cluster, cross along the class path."""
        return self.walk_route(u, v, self.class_path(u, v))

    def distance(self, u, v):
        """Return the Hamming distance of the fields plus the shortest covering class walk."""
        low = (1 << self.class_shift) - 1
        return _popcount((u ^ v) & low) + len(self.class_path(u, v)) - 1

    def formulas(self):
        """Return links, diameter 2^k (m+1) (m for k = 0) and the exact average distance."""
        p = self.num_nodes
        return {
            "links": p * self.degree // 2,
            "diameter": (self.m + 1) << self.k if self.k else self.m,
            "avg_distance": self._avg_distance(),
            "bisection_width": self._bisection_width(),
        }

    def _bisection_width(self):
        """Return the bisection width where a formula is known: p/2 (k = 0, the m-cube), p/4 (k = 1, F_{m+1})."""
        if self.k == 0:
            return self.num_nodes // 2
        if self.k == 1:
            return self.num_nodes // 4
        return None

    def _avg_distance(self):
        """Return the sum of distances from node 0 over all nodes, divided by p (k <= 3)."""
        if self.k > 3:
            return None
        q = (1 << self.m) - 1  # nonzero values of one field
        per_field = self.m << (self.m - 1)  # sum of popcounts over nonzero values
        total = 0
        fields = range(self.num_fields)
        for dest in range(self.num_fields):
            for size in range(self.num_fields + 1):
                for diff in combinations(fields, size):
                    need = sum(1 << i for i in diff)
                    count = q**size
                    hamming = size * per_field * q ** (size - 1) if size else 0
                    walk = len(class_walk(self.k, dest, need)) - 1
                    total += hamming + count * walk
        return total / p if (p := self.num_nodes) else 0.0
