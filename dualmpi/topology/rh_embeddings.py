"""Embeddings in the reduced hypercube RH(k, n): a Hamiltonian ring, 2-D tori, a complete binary
tree and the 2^(k-n) disjoint CCC(2^n), each with its dilation, congestion and expansion.

Two facts carry every construction:

* **RH(k, n) = RH(n, n) x Q_(k-n).**  The ``k - n`` node bits below the subfield are
  building-block bits, linked at every node, and nothing else depends on them
  (a node's set-2 link is named by its subfield).  So any dilation-1 structure of
  RH(n, n) extends over them.
* **RH(n, n) holds CCC(2^n).**  With ``k = n`` a building block is an n-cube whose
  nodes are its subblocks; walking the subblocks along a Gray code of Q_n gives the
  CCC's ring and the set-2 link of subblock ``g(j)`` is the CCC's cube link of
  dimension ``g(j)`` (Sideras, Section 2.2: the RH emulates several CCC networks with
  dilation 1).

The Hamiltonian cycle of RH(n, n) visits the 2^(2^n) building blocks along a cyclic Gray
code of Q_(2^n) whose flipped bits alternate between subblock addresses of even and of
odd weight; inside each block it follows a Hamiltonian path of the n-cube from the
subblock it entered at to the subblock of the next flip (opposite parities, so such a
path exists: the n-cube is Hamiltonian-laceable).  Doubling the cycle once per node bit
(the cycle, then the cycle reversed with the bit set) gives the ring of RH(k, n).
"""

from collections import Counter
from functools import lru_cache

from ..errors import DualmpiError
from .ccc import CubeConnectedCycles
from .hypercube_emulation import HypercubeOnRH
from .reduced_hypercube import ReducedHypercube

__all__ = [
    "laceable_path",
    "alternating_block_code",
    "rh_ring",
    "rh_torus",
    "rh_tree",
    "ccc_copies",
    "edge_metrics",
    "torus_shapes",
    "tree_dilation",
    "hypercube_path",
    "via_hypercube",
    "gray_torus",
]


def laceable_path(dims, s, t):
    """Return a Hamiltonian path of the subcube spanned by ``dims`` from ``s`` to ``t``.

    ``s`` and ``t`` must agree outside ``dims`` and differ in an odd number of bits in it.
    Split along a dimension ``d`` where they differ: a path from ``s`` through its half to
    a neighbour ``u = s ^ 2^e`` (``u ^ 2^d != t``), the link along ``d``, and a path through
    the other half to ``t``.

    >>> laceable_path([0, 1, 2], 0, 7)
    [0, 4, 6, 2, 3, 1, 5, 7]
    """
    dims = list(dims)
    if len(dims) == 1:
        return [s, t]
    diff = s ^ t
    d = next(x for x in dims if diff >> x & 1)
    rest = [x for x in dims if x != d]
    u = next(s ^ (1 << e) for e in rest if s ^ (1 << e) != t ^ (1 << d))
    return laceable_path(rest, s, u) + laceable_path(rest, u ^ (1 << d), t)


def _gray(a):
    """Return the binary reflected Gray code of a-bit words, as a list."""
    return [i ^ (i >> 1) for i in range(1 << a)]


@lru_cache(maxsize=None)
def alternating_block_code(n):
    """Return a cyclic Gray code of Q_(2^n) whose flipped bits alternate in subblock parity.

    Bit ``m`` of a building-block address is the set-2 link of subblock ``m``; write
    ``E`` for the bits ``m`` of even weight, ``O`` for the odd ones (``2^(n-1)`` each, A =
    2^(2^(n-1)) words over each).  The code walks the torus ``C_A x C_A`` (a Gray code
    over E, one over O) with moves alternating between the coordinates: ``x`` always
    steps ``+1``; ``y`` steps by ``sigma(s mod A)``, ``+1`` for the first ``A/2 + 1``
    residues and ``-1`` for the others.  Each column ``x`` then meets ``A/2`` disjoint
    dominoes ``{y, y + 1}`` that tile the cycle ``C_A``, so every word appears once.

    >>> alternating_block_code(1)
    [0, 1, 3, 2]
    """
    if n < 1:
        raise ValueError("the alternating code needs n >= 1")
    bits = 1 << n
    even = [m for m in range(bits) if bin(m).count("1") % 2 == 0]
    odd = [m for m in range(bits) if bin(m).count("1") % 2 == 1]
    a = len(even)
    big = 1 << a
    gray = _gray(a)

    def spread(word, where):
        return sum(1 << where[b] for b in range(a) if word >> b & 1)

    ex = [spread(g, even) for g in gray]
    oy = [spread(g, odd) for g in gray]
    code = []
    y = 0
    for s in range(big * big // 2):
        code.append(ex[s % big] | oy[y])
        code.append(ex[(s + 1) % big] | oy[y])
        y = (y + (1 if (s + 1) % big <= big // 2 else -1)) % big
    if len(set(code)) != 1 << bits:
        raise AssertionError("alternating block code is not a Gray code")  # pragma: no cover
    return code


def _base_ring(n):
    """Return the Hamiltonian cycle of RH(n, n) as a list of node ids (k = n)."""
    if n == 0:
        return [0, 1]
    code = alternating_block_code(n)
    count = len(code)
    flips = [(code[t] ^ code[(t + 1) % count]).bit_length() - 1 for t in range(count)]
    ring = []
    for t, w in enumerate(code):
        enter, leave = flips[t - 1], flips[t]
        ring += [(w << n) | v for v in laceable_path(range(n), enter, leave)]
    return ring


def _double(cycle, bit):
    """Return ``cycle`` followed by its reverse with ``bit`` set: a cycle of C x Q_1."""
    return cycle + [u | (1 << bit) for u in reversed(cycle)]


def _lift(rh, u):
    """Map node ``u`` of RH(n, n) onto RH(k, n) with the node bits below the subfield zero."""
    n = rh.n
    return ((u >> n) << rh.k) | ((u & ((1 << n) - 1)) << rh.low)


def _long_cycle(rh, extra):
    """Return the ring of RH(n, n) x Q_extra on node bits ``0 .. extra-1`` (lifted to RH(k, n))."""
    cycle = [_lift(rh, u) for u in _base_ring(rh.n)]
    for bit in range(extra):
        cycle = _double(cycle, bit)
    return cycle


def rh_ring(rh):
    """Return a Hamiltonian cycle of RH(k, n): every ring edge is one link (dilation 1).

    Parameters
    ----------
    rh : ReducedHypercube
        The host; at least 4 nodes.

    Returns
    -------
    list of int
        The ``2^(k + 2^n)`` nodes in ring order.

    References
    ----------
    M. A. Sideras, thesis, Section 2.2 (RH and CCC) and its ring-embedding chapter (whose
    details the extracted text lacks); this construction is dualmpi's own (module doc).

    Examples
    --------
    >>> ring = rh_ring(ReducedHypercube(2, 1))
    >>> len(ring), len(set(ring)), all(ReducedHypercube(2, 1).is_link(a, b)
    ...                                for a, b in zip(ring, ring[1:] + ring[:1]))
    (16, 16, True)
    """
    if rh.num_nodes < 4:
        raise DualmpiError(f"{rh.spec} has {rh.num_nodes} nodes: no ring to embed")
    return _long_cycle(rh, rh.low)


def torus_shapes(rh):
    """Return the ``(A, B)`` tori embedded with dilation 1: ``A = 2^(n + 2^n + c)``, ``B = 2^(k-n-c)``.

    >>> torus_shapes(ReducedHypercube(3, 1))
    [(8, 4), (16, 2)]
    """
    base = rh.n + (1 << rh.n)
    return [(1 << (base + c), 1 << (rh.low - c)) for c in range(rh.low) if rh.low - c >= 1]


def rh_torus(rh, a, b):
    """Return the ``a x b`` torus in RH(k, n) as ``(grid, paths, construction)``.

    ``grid[i][j]`` is the host node of torus node ``(i, j)``; ``paths`` maps each torus
    edge ``((i, j), (i', j'))`` to its host path.  With ``a x b`` in :func:`torus_shapes`
    (or transposed) the rows are the ring of RH(n, n) x Q_c and the columns a Gray code
    of the other node bits: every edge a link.  Any other ``a x b = p`` (powers of two)
    goes through the hypercube: Gray codes place the torus in Q_(k + 2^n) with dilation
    1, and each cube edge takes the emulation's path (dilation up to 2n + 1).

    >>> grid, paths, how = rh_torus(ReducedHypercube(3, 1), 8, 4)
    >>> len(paths), max(len(path) - 1 for path in paths.values())
    (64, 1)
    """
    p = rh.num_nodes
    if a < 2 or b < 2 or a * b != p or a & (a - 1) or b & (b - 1):
        raise DualmpiError(f"--torus {a}x{b}: need powers of two >= 2 with A*B = {p} "
                           f"(the nodes of {rh.spec})")
    shapes = torus_shapes(rh)
    if (a, b) in shapes or (b, a) in shapes:
        rows, cols = (a, b) if (a, b) in shapes else (b, a)
        extra = rh.low - (cols.bit_length() - 1)
        cycle = _long_cycle(rh, extra)
        column = [g << extra for g in _gray(cols.bit_length() - 1)]
        grid = [[cycle[i] | column[j] for j in range(cols)] for i in range(rows)]
        if (a, b) != (rows, cols):
            grid = [list(col) for col in zip(*grid)]
        how = "ring of RH(n,n) x Q_c by rows, Gray code of the other node bits by columns"
        paths = {e: [grid[e[0][0]][e[0][1]], grid[e[1][0]][e[1][1]]] for e in _torus_edges(a, b)}
        return grid, paths, how
    grid = gray_torus(a, b)
    emu = HypercubeOnRH(rh)
    paths = {e: emu.path(grid[e[0][0]][e[0][1]], grid[e[1][0]][e[1][1]]) for e in _torus_edges(a, b)}
    return grid, paths, "Gray codes into the emulated hypercube (Theorem 2.1 paths)"


def gray_torus(a, b):
    """Return ``grid[i][j]``: the hypercube node of torus node ``(i, j)`` by two Gray codes.

    >>> gray_torus(2, 4)
    [[0, 2, 6, 4], [1, 3, 7, 5]]
    """
    abits = a.bit_length() - 1
    ga, gb = _gray(abits), _gray(b.bit_length() - 1)
    return [[ga[i] | (gb[j] << abits) for j in range(b)] for i in range(a)]


def _torus_edges(a, b):
    """Yield every torus edge once (a side of 2 has a single edge between its two nodes)."""
    seen = set()
    for i in range(a):
        for j in range(b):
            for e in (((i, j), ((i + 1) % a, j)), ((i, j), (i, (j + 1) % b))):
                key = frozenset(e)
                if len(key) == 2 and key not in seen:
                    seen.add(key)
                    yield e


def rh_tree(rh):
    """Return the complete binary tree of ``2^(k + 2^n) - 1`` nodes in RH(k, n) as ``(nodes, paths)``.

    Tree node ``x`` (in-order number, ``1 .. p - 1``; the root is ``p / 2``, the children
    of a node whose lowest one bit is ``2^l`` are ``x -+ 2^(l-1)``) sits on RH node ``x``;
    a tree edge takes a shortest RH route.  In the hypercube this is the classic in-order
    embedding of dilation 2; in RH(k, n) an edge flipping building-block bits costs a
    subfield walk, and the measured dilation is :func:`tree_dilation`'s.

    >>> nodes, paths = rh_tree(ReducedHypercube(3, 1))
    >>> len(nodes), max(len(path) - 1 for path in paths.values())
    (31, 4)
    """
    p = rh.num_nodes
    if p < 4:
        raise DualmpiError(f"{rh.spec} has {p} nodes: no tree to embed")
    edges = []
    for x in range(1, p):
        low = x & -x
        if low > 1:
            edges += [(x, x - low // 2), (x, x + low // 2)]
    return list(range(1, p)), {e: rh.route(*e) for e in edges}


def tree_dilation(n):
    """Return the in-order tree's dilation in RH(k, n): 2 for n = 0, 2n + 2 otherwise.

    The root ``p/2`` and the tree nodes near it have subblock 0 and flip the top
    building-block bits, whose set-2 links sit at subblock ``2^n - 1``: n subfield
    bits there and back, the inter-block link and the second bit of a left-child edge.
    Tests measure it on every RH(k, n) up to 4,096 nodes.

    >>> [tree_dilation(n) for n in range(4)]
    [2, 4, 6, 8]
    """
    return 2 if n == 0 else 2 * n + 2


def hypercube_path(rh, a, b):
    """Return the emulated-hypercube route from ``a`` to ``b``: the cube path flipping the bits
    of ``a ^ b`` in ascending order, each cube edge replaced by its Theorem 2.1 path."""
    emu = HypercubeOnRH(rh)
    path = [a]
    cur = a
    for bit in range(rh.bits):
        if (a ^ b) >> bit & 1:
            path += emu.path(cur, cur ^ (1 << bit))[1:]
            cur ^= 1 << bit
    return path


def via_hypercube(rh, edges, guest_nodes):
    """Return :func:`edge_metrics` of the guest edges routed through the emulated hypercube."""
    return edge_metrics(rh, {e: hypercube_path(rh, *e) for e in edges}, guest_nodes)


def ccc_copies(rh):
    """Return the ``2^(k-n)`` disjoint CCC(2^n) in RH(k, n) as ``(guest, maps)``, dilation 1.

    ``maps[c][v]`` is the RH node of CCC node ``v = (w, i)`` in copy ``c`` (the node bits
    below the subfield): subblock ``g(i)`` (``g`` the Gray code of Q_n), building-block
    address with bit ``g(j)`` set for every bit ``j`` of ``w``.  Ring links change one
    subblock bit, cube links are the set-2 links of subblock ``g(i)``.

    >>> guest, maps = ccc_copies(ReducedHypercube(3, 2))
    >>> guest.spec, len(maps), len({u for row in maps for u in row})
    ('ccc:n=4', 2, 128)
    """
    if rh.n < 2:
        raise DualmpiError(f"{rh.spec}: CCC(2^n) needs a ring of 2^n >= 4 nodes (n >= 2)")
    guest = CubeConnectedCycles(1 << rh.n)
    g = _gray(rh.n)
    maps = []
    for c in range(1 << rh.low):
        row = []
        for v in range(guest.num_nodes):
            w, i = divmod(v, guest.n)
            bb = sum(1 << g[j] for j in range(guest.n) if w >> j & 1)
            row.append((bb << rh.k) | (g[i] << rh.low) | c)
        maps.append(row)
    return guest, maps


def edge_metrics(host, paths, guest_nodes):
    """Return dilation, congestion, expansion and the checks of an embedding given its edge paths.

    ``paths`` maps each guest edge to a host path; ``links_ok`` says every consecutive pair of
    every path is a host link; congestion counts guest edges per undirected host link.
    """
    load = Counter()
    links_ok = True
    hist = Counter()
    for path in paths.values():
        hist[len(path) - 1] += 1
        for x, y in zip(path, path[1:]):
            links_ok = links_ok and host.is_link(x, y)
            load[(min(x, y), max(x, y))] += 1
    return {"dilation": max(hist) if hist else 0,
            "average_dilation": sum(d * c for d, c in hist.items()) / max(1, len(paths)),
            "dilation_histogram": {str(d): c for d, c in sorted(hist.items())},
            "congestion": max(load.values()) if load else 0, "guest_edges": len(paths),
            "expansion": host.num_nodes / guest_nodes, "links_ok": links_ok}
