"""Symmetric product graphs: rings C_a, complete graphs K_a, hypercubes Q_n and their products."""

import math
import re
from dataclasses import dataclass
from itertools import combinations

from ..errors import NodeError, SpecError
from .base import MAX_ADDRESS_BITS, Topology

__all__ = [
    "Factor",
    "ProductGraph",
    "parse_base",
    "format_base",
    "parse_subproduct",
    "format_subproduct",
    "cost_ratio",
    "paper_degree",
]

_FACTOR = re.compile(r"^([ckq]?)(\d+)$")


@dataclass(frozen=True)
class Factor:
    """One component graph B_j of a product: the ring C_a (``kind="c"``) or complete graph K_a.

    Nodes are ``0 .. size-1``.  Local dimension ``t`` (0-based) of a ring is the
    step ``+1`` (t = 0) or ``-1`` (t = 1); of K_a it is the step ``+(t+1)`` mod a.
    ``label`` is how the spec wrote it (``"5"``, ``"k4"``; hypercube factors ``"q"``).

    Examples
    --------
    >>> c5 = Factor("c", 5)
    >>> c5.degree, c5.diameter, c5.bcast_steps, c5.step(4, 0)
    (2, 2, 3, 0)
    """

    kind: str
    size: int
    label: str = ""

    @property
    def degree(self):
        """Links per node: 2 for rings of 3 or more nodes, 1 for C_2, a-1 for K_a."""
        if self.kind == "k":
            return self.size - 1
        return min(self.size - 1, 2)

    @property
    def diameter(self):
        """floor(a/2) for a ring, 1 for K_a (a >= 2), 0 for one node."""
        if self.size == 1:
            return 0
        return 1 if self.kind == "k" else self.size // 2

    @property
    def distance_sum(self):
        """Sum of the distances from one node to all nodes."""
        if self.kind == "k":
            return self.size - 1
        return self.size * self.size // 4

    @property
    def bcast_steps(self):
        """One-port broadcast steps: ceil(a/2) on a ring (two fronts), ceil(log2 a) on K_a."""
        if self.kind == "k" or self.size == 1:
            return (self.size - 1).bit_length()
        return (self.size + 1) // 2

    def step(self, x, t):
        """Return the neighbour of coordinate ``x`` along local dimension ``t``; numpy-safe."""
        if self.kind == "k":
            return (x + t + 1) % self.size
        return (x + 1) % self.size if t == 0 else (x - 1) % self.size

    def distance(self, x, y):
        """Return the distance of coordinates ``x`` and ``y``."""
        if x == y:
            return 0
        if self.kind == "k":
            return 1
        d = (y - x) % self.size
        return min(d, self.size - d)

    def path(self, x, y):
        """Return the coordinates of a shortest path ``x .. y`` (a ring goes up on ties)."""
        out = [x]
        if x == y:
            return out
        if self.kind == "k":
            return [x, y]
        up = (y - x) % self.size
        step = 1 if up <= self.size - up else -1
        while out[-1] != y:
            out.append((out[-1] + step) % self.size)
        return out

    def bcast_rounds(self):
        """Return the one-port broadcast from coordinate 0 as rounds of ``(sender, receiver)``.

        A ring sends to ``+1`` first, then both ends of the informed arc advance; K_a
        doubles the informed set each round.

        >>> Factor("c", 5).bcast_rounds()
        [[(0, 1)], [(1, 2), (0, 4)], [(2, 3)]]
        """
        have, rounds = [0], []
        while len(have) < self.size:
            pairs, taken = [], set(have)
            if self.kind == "k":
                # the informed nodes are 0 .. m-1; each sends to the next uninformed one
                pairs = [(u, len(have) + i) for i, u in enumerate(have) if len(have) + i < self.size]
            else:
                t = len(rounds) + 1
                ends = [(0, 1)] if t == 1 else [(t - 1, t), (2 - t, 1 - t)]
                for u, v in ends:
                    v %= self.size
                    if v not in taken:
                        pairs.append((u % self.size, v))
                        taken.add(v)
            rounds.append(pairs)
            have += [v for _, v in pairs]
        return rounds


def parse_base(text, where="product"):
    """Return the factors of a base spec such as ``2x3x5``, ``k4x5`` or ``q3``.

    ``a`` or ``ca`` is the ring C_a, ``ka`` the complete graph K_a, ``qn`` the
    hypercube Q_n as n factors K_2 (the paper: "an r-cube is a product of r K_2").

    >>> [f.label for f in parse_base("2x3xk4xq2")]
    ['2', '3', 'k4', 'q', 'q']
    """
    if not isinstance(text, str) or not text.strip():
        raise SpecError(f"{where}: base must be factors joined by x, e.g. base=2x3x5")
    factors = []
    for term in text.strip().lower().split("x"):
        match = _FACTOR.match(term.strip())
        if not match:
            raise SpecError(
                f"{where}: bad factor {term!r} in base={text} (use a or ca: ring C_a, "
                "ka: complete graph K_a, qn: hypercube Q_n; joined by x)"
            )
        kind, size = match.group(1) or "c", int(match.group(2))
        if size < 1:
            raise SpecError(f"{where}: factor {term!r} in base={text} must have at least 1 node")
        if kind == "q":
            factors += [Factor("k", 2, "q")] * size
        else:
            factors.append(Factor(kind, size, f"k{size}" if kind == "k" else str(size)))
    nodes = math.prod(f.size for f in factors)
    if nodes.bit_length() > MAX_ADDRESS_BITS:
        raise SpecError(f"{where}: base={text} has {nodes} nodes, too many")
    return tuple(factors)


def format_base(factors):
    """Return the canonical base spec of ``factors`` (runs of hypercube factors as ``qn``)."""
    out, i = [], 0
    while i < len(factors):
        if factors[i].label == "q":
            j = i
            while j < len(factors) and factors[j].label == "q":
                j += 1
            out.append(f"q{j - i}")
            i = j
        else:
            out.append(factors[i].label)
            i += 1
    return "x".join(out)


def parse_subproduct(text, factors, where="hdn"):
    """Return the sorted factor indices (0-based) of a super-node such as ``2x3``, ``6``, ``@2``.

    A term ``a`` picks the leftmost unused factor with a nodes (``ca``, ``ka``,
    ``qn`` as in the base also fix the kind), ``@j`` factor j (1-based); ``1`` is
    the one-node super-node.  A single number that is no
    factor's size is read as the product of the factors it uniquely factors into.

    >>> parse_subproduct("15", parse_base("2x3x5"))
    (1, 2)
    >>> parse_subproduct("@1x5", parse_base("2x3x5"))
    (0, 2)
    """
    text = text.strip().lower()
    if text == "1":
        return ()
    terms = text.split("x")
    if len(terms) == 1 and not text.startswith("@") and text.isdigit():
        size = int(text)
        if not any(f.size == size for f in factors):
            return _by_product(size, factors, text, where)
    chosen = []
    for term in _expand_terms(terms):
        if term.startswith("@") and term[1:].isdigit() and 1 <= int(term[1:]) <= len(factors):
            j = int(term[1:]) - 1
        else:
            match = _FACTOR.match(term)
            if not match or match.group(1) == "q":
                raise SpecError(f"{where}: bad super-node term {term!r} in {text!r} (factor sizes "
                                "joined by x, as in the base, @j for factor j, or 1)")
            kind, size = match.group(1), int(match.group(2))
            free = [j for j, f in enumerate(factors)
                    if f.size == size and kind in ("", f.kind) and j not in chosen]
            if not free:
                raise SpecError(f"{where}: super-node {text!r}: no unused factor {term} "
                                f"in base={format_base(factors)}")
            j = free[0]
        if j in chosen:
            raise SpecError(f"{where}: super-node {text!r} names factor {j + 1} twice")
        chosen.append(j)
    return tuple(sorted(chosen))


def _expand_terms(terms):
    """Return the super-node terms with each hypercube ``qn`` written as n terms ``k2``."""
    out = []
    for term in (t.strip() for t in terms):
        if term.startswith("q") and term[1:].isdigit():
            out += ["k2"] * int(term[1:])
        else:
            out.append(term)
    return out


def _by_product(size, factors, text, where):
    """Return the factor indices whose sizes multiply to ``size`` (leftmost among equal choices)."""
    found = {}
    for q in range(1, len(factors) + 1):
        for idx in combinations(range(len(factors)), q):
            if math.prod(factors[j].size for j in idx) == size:
                found.setdefault(tuple(sorted(factors[j].size for j in idx)), idx)
    if not found:
        raise SpecError(f"{where}: no sub-product of base={format_base(factors)} has {size} nodes")
    if len(found) > 1:
        options = " or ".join("x".join(map(str, k)) for k in found)
        raise SpecError(f"{where}: super-node size {size} is ambiguous in base={format_base(factors)} "
                        f"({options}); write the factors")
    return next(iter(found.values()))


def format_subproduct(idx, factors):
    """Return the canonical text of a super-node: factor sizes, or ``@j`` terms when needed."""
    if not idx:
        return "1"
    plain = "x".join(str(factors[j].size) for j in idx)
    if parse_subproduct(plain, factors) == tuple(idx):
        return plain
    return "x".join(f"@{j + 1}" for j in idx)


def cost_ratio(nodes, degree, diameter, w1=0.5):
    """Return the weighted cost ratio CR_w = (w1 d + w2 D) / log2 N with w2 = 1 - w1.

    References
    ----------
    Li, Peng, Chu, "Hierarchical Dual-Net", Section 3 (CR_w, Table 3).

    >>> round(cost_ratio(1024, 10, 10), 2)
    1.0
    """
    if nodes < 2:
        return None
    return (w1 * degree + (1 - w1) * diameter) / math.log2(nodes)


class ProductGraph(Topology):
    """The product B = B_1 x ... x B_r of rings, complete graphs and hypercubes.

    Node ``(x_1, ..., x_r)`` has id ``x_1 b_2...b_r + ... + x_r`` (mixed radix, B_1
    most significant).  Dimensions run over the factors in order, each factor's
    local dimensions in turn (ring: +1 then -1).  The base networks of the
    hierarchical dual-net; ``product:base=10x10x10`` is the 3D torus of Table 3.

    Parameters
    ----------
    base : str
        Factors joined by ``x``: ``a`` ring C_a, ``ka`` complete graph K_a, ``qn``
        hypercube Q_n (n factors K_2).

    References
    ----------
    Li, Peng, Chu, "Hierarchical Dual-Net", Section 2 (product graphs, Figure 2),
    Section 3 (Table 3: tori and hypercubes).

    Examples
    --------
    >>> b = ProductGraph("2x3x5")
    >>> b.num_nodes, b.degree, b.formulas()["diameter"]
    (30, 5, 4)
    >>> b.format_node(29), b.route(0, 29)
    ('(1,2,4)', [0, 15, 25, 29])
    """

    name = "product"
    reference = "Li, Peng, Chu: Hierarchical Dual-Net, Sec. 2 (product graphs), Table 3"
    #: Spec parameters given as strings (parsed by the class, not as integers).
    spec_strings = ("base",)

    def __init__(self, base):
        self.factors = parse_base(base, self.name)
        self._params = {"base": format_base(self.factors)}
        self.sizes = tuple(f.size for f in self.factors)
        self.num_nodes = math.prod(self.sizes)
        self.weights = tuple(math.prod(self.sizes[j + 1:]) for j in range(len(self.sizes)))
        self.dims = tuple((j, t) for j, f in enumerate(self.factors) for t in range(f.degree))
        self.degree = len(self.dims)

    # -- addresses ------------------------------------------------------------------------------
    def coords(self, u):
        """Return the coordinates ``(x_1, ..., x_r)`` of ``u``; numpy-safe."""
        return tuple((u // w) % b for w, b in zip(self.weights, self.sizes))

    def node(self, coords):
        """Return the id of the node with ``coords``."""
        return sum(x * w for x, w in zip(coords, self.weights))

    def fields(self, u):
        """Return ``{"x1": x_1, ...}``."""
        return {f"x{j + 1}": int(x) for j, x in enumerate(self.coords(u))}

    def format_node(self, u):
        """Return ``(x_1,...,x_r)``."""
        return "(" + ",".join(str(int(x)) for x in self.coords(u)) + ")"

    def parse_address(self, text):
        """Return the id of a node written ``(x_1,...,x_r)``."""
        parts = text.strip().strip("()").split(",")
        try:
            xs = [int(p) for p in parts]
        except ValueError:
            xs = None
        if xs is None or len(xs) != len(self.sizes) or any(not 0 <= x < b for x, b in zip(xs, self.sizes)):
            raise NodeError(f"address {text!r} is not (x_1,...,x_{len(self.sizes)}) with 0 <= x_j < "
                            f"{'x'.join(map(str, self.sizes))} for {self.spec}")
        return self.node(xs)

    # -- links and routes -----------------------------------------------------------------------
    def neighbor(self, u, i):
        """Return the neighbour of ``u`` along dimension ``i`` (1-based); numpy-safe."""
        j, t = self.dims[i - 1]
        x = (u // self.weights[j]) % self.sizes[j]
        return u + (self.factors[j].step(x, t) - x) * self.weights[j]

    def route(self, u, v):
        """Return the dimension-order path: each factor in turn, shortest way round."""
        path = [u]
        for j, (x, y) in enumerate(zip(self.coords(u), self.coords(v))):
            for a, b in zip(self.factors[j].path(x, y), self.factors[j].path(x, y)[1:]):
                path.append(path[-1] + (b - a) * self.weights[j])
        return path

    def distance(self, u, v):
        """Return the sum of the factor distances."""
        return sum(f.distance(x, y) for f, x, y in zip(self.factors, self.coords(u), self.coords(v)))

    def formulas(self):
        """Return links, diameter and average distance (sums over the factors) and CR_w."""
        p = self.num_nodes
        diameter = sum(f.diameter for f in self.factors)
        return {
            "links": p * self.degree // 2,
            "diameter": diameter,
            "avg_distance": sum(f.distance_sum / f.size for f in self.factors),
            "bisection_width": None,
            "bcast_steps": sum(f.bcast_steps for f in self.factors),
            "cr_w": _round(cost_ratio(p, self.degree, diameter)),
            "degree_paper": paper_degree(self.factors),
            "cr_w_paper": _round(cost_ratio(p, paper_degree(self.factors), diameter)),
        }


def paper_degree(factors):
    """Return the degree under the torus convention: a ring of two nodes counts two links.

    The hierarchical dual-net paper gives the 2x3x5 torus degree 6 (Section 3);
    as a simple graph (and in dualmpi) C_2 is one link, so the degree is 5.
    """
    return sum(2 if f.kind == "c" and f.size == 2 else f.degree for f in factors)


def _round(x):
    """Return ``x`` rounded to 4 decimals (None stays None)."""
    return None if x is None else round(x, 4)
