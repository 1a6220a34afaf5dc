"""Rings, linear arrays and Hamiltonian cycles of the dual-cube and the hypercube (pure Python).

The Hamiltonicity paper's ``DC_n`` is dualmpi's ``dualcube:r=n``: its node string
``0 C N`` (class 0: cluster id, node id) or ``1 N C`` (class 1: node id, cluster id)
read as a ``(2n-1)``-bit binary number is the node id of :class:`DualCube` (class bit
on the left, part II in the middle, part I on the right), so ``DC_3`` is
``dualcube:r=3`` with 32 nodes and the paper's strings are the nodes' binary addresses.

References
----------
C. Wu, J. Wu, "On Self-Similarity and Hamiltonicity of Dual-Cubes", Section 2
(definition), Section 3 (Propositions 3.1-3.3), Section 4 (Theorems 4.1-4.4).
"""

import random
from functools import lru_cache
from itertools import islice

from .dualcube import DualCube
from .hypercube import Hypercube

__all__ = [
    "gray_code",
    "parse_gray_code",
    "paper_string",
    "dc_node",
    "is_ring",
    "is_linear_array",
    "ring_edges",
    "cube_path",
    "cube_ring",
    "hamiltonian_cycle",
    "iter_hamiltonian_cycle",
    "hypercube_hamiltonian_cycles",
    "edge_disjoint_cycles",
    "ring",
    "ring_construction",
    "staircase_ring",
    "linear_array",
    "has_cycle_of_length",
    "split",
    "split_is_dualcube",
]


# -- Gray codes and addresses ---------------------------------------------------------------------
def gray_code(bits):
    """Return the binary reflected Gray code on ``bits`` bits as a list of ints.

    >>> [format(g, "02b") for g in gray_code(2)]
    ['00', '01', '11', '10']
    """
    return [i ^ (i >> 1) for i in range(1 << bits)]


def parse_gray_code(text, bits):
    """Return the cyclic Gray code written as ``"00,10,11,01"`` (``bits`` bits each, first all zeros).

    Raises ValueError unless it lists every ``bits``-bit string once, starts with
    ``0...0`` (the paper's ``B_1``) and consecutive codes, the last and the first
    included, differ in one bit.

    >>> parse_gray_code("00,10,11,01", 2)
    [0, 2, 3, 1]
    """
    items = [s.strip() for s in str(text).split(",") if s.strip()]
    if any(len(s) != bits or set(s) - {"0", "1"} for s in items):
        raise ValueError(f"Gray code {text!r}: expected comma-separated {bits}-bit binary strings")
    codes = [int(s, 2) for s in items]
    _check_gray(codes, bits)
    return codes


def _check_gray(codes, bits):
    """Raise ValueError unless ``codes`` is a cyclic Gray code of all ``bits``-bit values from 0."""
    if sorted(codes) != list(range(1 << bits)) or codes[0] != 0:
        raise ValueError(f"a Gray code must list all {1 << bits} {bits}-bit values once, from 0")
    for a, b in zip(codes, codes[1:] + codes[:1]):
        x = a ^ b
        if len(codes) > 1 and (x == 0 or x & (x - 1)):
            raise ValueError(f"{a:0{bits}b} and {b:0{bits}b} differ in more than one bit")


def paper_string(dc, u):
    """Return node ``u`` as the paper's bit string (class, then middle and last fields).

    >>> paper_string(DualCube(3), 0b10110)
    '10110'
    """
    return format(u, f"0{2 * dc.r - 1}b")


def dc_node(dc, cls, cluster, node):
    """Return the node of ``dc`` with class ``cls``, cluster id ``cluster`` and node id ``node``.

    >>> dc_node(DualCube(3), 1, 0b01, 0b10) == 0b11001
    True
    """
    h = dc.half
    if cls == 0:
        return (cluster << h) | node
    return (1 << (2 * h)) | (node << h) | cluster


# -- checks ----------------------------------------------------------------------------------------
def is_linear_array(topo, nodes):
    """Return True when ``nodes`` are distinct nodes of ``topo`` and consecutive ones are linked."""
    nodes = list(nodes)
    return (len(set(nodes)) == len(nodes) and all(0 <= u < topo.num_nodes for u in nodes)
            and all(topo.is_link(a, b) for a, b in zip(nodes, nodes[1:])))


def is_ring(topo, nodes):
    """Return True when ``nodes`` form a cycle of ``topo`` (at least 3 distinct nodes, last to first linked)."""
    nodes = list(nodes)
    return len(nodes) >= 3 and is_linear_array(topo, nodes) and topo.is_link(nodes[-1], nodes[0])


def ring_edges(nodes):
    """Return the set of undirected edges ``(min, max)`` of the cycle ``nodes``."""
    return {(min(a, b), max(a, b)) for a, b in zip(nodes, nodes[1:] + nodes[:1])}


# -- paths and rings in a hypercube -----------------------------------------------------------------
def cube_path(a, b, m, dims):
    """Return a path of ``m`` distinct nodes from ``a`` to its neighbour ``b`` inside a subcube.

    The subcube is spanned by the bit positions ``dims`` (which contain the bit where
    ``a`` and ``b`` differ); ``m`` is even, ``2 <= m <= 2**len(dims)``: the hypercube
    is edge-bipancyclic.  Split along a free bit: a shorter path stays in ``a``'s
    half; a longer one is a Hamiltonian path of that half with its first edge
    replaced by a detour through the other half.

    >>> cube_path(0, 1, 8, range(3))
    [0, 4, 5, 7, 6, 2, 3, 1]
    """
    dims = list(dims)
    x = a ^ b
    if x == 0 or x & (x - 1) or x.bit_length() - 1 not in dims:
        raise ValueError(f"{a} and {b} are not neighbours in the subcube of bits {dims}")
    if m % 2 or not 2 <= m <= 1 << len(dims):
        raise ValueError(f"no path of {m} nodes between neighbours in a {len(dims)}-cube")
    if m == 2:
        return [a, b]
    split_bit = [d for d in dims if 1 << d != x][-1]
    rest = [d for d in dims if d != split_bit]
    half = 1 << len(rest)
    if m <= half:
        return cube_path(a, b, m, rest)
    near = cube_path(a, b, half, rest)
    far = cube_path(a ^ (1 << split_bit), near[1] ^ (1 << split_bit), m - half, rest)
    return [a] + far + near[1:]


def cube_ring(m, dims, base=0):
    """Return a ring of ``m`` nodes (even, ``4 <= m <= 2**len(dims)``) in the subcube of ``base``.

    >>> cube_ring(4, range(3))
    [0, 2, 3, 1]
    """
    dims = list(dims)
    if m < 4:
        raise ValueError(f"no ring of {m} nodes in a hypercube (rings have at least 4)")
    return cube_path(base, base ^ (1 << dims[0]), m, dims)


# -- Theorem 4.1: Hamiltonian cycles from Gray codes -------------------------------------------------
def _check_dualcube(dc, low=2):
    """Raise ValueError unless ``dc`` is a DualCube with ``r >= low``."""
    if not isinstance(dc, DualCube):
        raise TypeError(f"expected a dual-cube, got {dc!r}")
    if dc.r < low:
        raise ValueError(f"{dc.spec}: the construction needs r >= {low} (DC_n with n >= {low})")


def _along(order, pos, entry, exit_):
    """Return ``order`` (a cyclic node order) walked from ``entry`` to its neighbour ``exit_``
    the long way round, i.e. every node once."""
    K, j = len(order), pos[entry]
    step = -1 if order[(j + 1) % K] == exit_ else 1
    return [order[(j + step * s) % K] for s in range(K)]


def _sections(dc, clusters, section):
    """Return the ring that visits ``clusters[t]`` (class ``t % 2``) in section ``t``.

    Section ``t`` enters its cluster at node id ``clusters[t-1]`` (over the cross-edge
    from the previous cluster) and leaves it at node id ``clusters[t+1]``; ``section``
    returns the node ids of the path between them.
    """
    T = len(clusters)
    out = []
    for t in range(T):
        entry, exit_ = clusters[t - 1], clusters[(t + 1) % T]
        out += [dc_node(dc, t % 2, clusters[t], x) for x in section(t, entry, exit_)]
    return out


def _staircase(codes):
    """Return the cluster sequence of the paper's rings: class-0 ``B_j``, class-1 ``B_(j+1)``, ..."""
    K = len(codes)
    return [codes[(s + c) % K] for s in range(K) for c in (0, 1)]


def hamiltonian_cycle(dc, gray=None):
    """Return Theorem 4.1's Hamiltonian cycle of ``DC_r`` built from a Gray code.

    Starting at ``0 B_1 B_1`` it walks the cluster of class 0 along the Gray code,
    crosses, walks a cluster of class 1, and so on, visiting the clusters in the
    order ``B_1, B_(2^k), B_(2^k - 1), ..., B_2`` (``k = r - 1``).

    Parameters
    ----------
    dc : DualCube
        ``r >= 2``.
    gray : list of int, optional
        A cyclic Gray code on ``r - 1`` bits starting at 0 (default: binary reflected).

    Returns
    -------
    list of int
        The ``2^(2r-1)`` nodes in cycle order.

    References
    ----------
    Wu and Wu, Theorem 4.1 and its DC_3 example.

    Examples
    --------
    >>> [paper_string(DualCube(3), u) for u in hamiltonian_cycle(DualCube(3))][:6]
    ['00000', '00001', '00011', '00010', '10010', '10110']
    """
    return list(iter_hamiltonian_cycle(dc, gray))


def _gray_rank(g):
    """Return the position of ``g`` in the binary reflected Gray code (the inverse of ``i ^ (i >> 1)``).

    >>> [_gray_rank(g) for g in gray_code(3)]
    [0, 1, 2, 3, 4, 5, 6, 7]
    """
    i = 0
    while g:
        i ^= g
        g >>= 1
    return i


def iter_hamiltonian_cycle(dc, gray=None):
    """Yield the nodes of :func:`hamiltonian_cycle` one at a time, in O(r) memory.

    With the default (binary reflected) Gray code nothing of size ``2^(r-1)`` or more is
    built: the Gray code and its inverse are computed per node, so a prefix of the cycle
    of ``DC_31`` (``2^61`` nodes) costs only its own length (``itertools.islice``).

    References
    ----------
    Wu and Wu, Theorem 4.1.

    Examples
    --------
    >>> from itertools import islice
    >>> list(islice(iter_hamiltonian_cycle(DualCube(31)), 3))
    [0, 1, 3]
    >>> list(iter_hamiltonian_cycle(DualCube(3))) == hamiltonian_cycle(DualCube(3))
    True
    """
    _check_dualcube(dc)
    h = dc.half
    K = 1 << h
    if gray is None:
        code, rank = (lambda i: i ^ (i >> 1)), _gray_rank
    else:
        codes = list(gray)
        _check_gray(codes, h)
        pos = {c: i for i, c in enumerate(codes)}
        code, rank = codes.__getitem__, pos.__getitem__

    def cluster(t):
        # _staircase over the backwards code: section t visits backwards[(t//2 + t%2) % K]
        return code(-((t // 2 + t % 2) % K) % K)

    T = 2 * K
    for t in range(T):
        entry, exit_ = cluster((t - 1) % T), cluster((t + 1) % T)
        j = rank(entry)
        step = -1 if code((j + 1) % K) == exit_ else 1
        for s in range(K):
            yield dc_node(dc, t % 2, cluster(t), code((j + step * s) % K))


# -- Theorem 4.2: edge-disjoint Hamiltonian cycles ----------------------------------------------------
def _cycle_components(color, k, c):
    """Return the number of cycles of the 2-factor of colour ``c`` in the k-cube colouring ``color``."""
    n = len(color)
    seen = bytearray(n)
    count = 0
    for s in range(n):
        if seen[s]:
            continue
        count += 1
        seen[s] = 1
        stack = [s]
        while stack:
            v = stack.pop()
            for d in range(k):
                w = v ^ (1 << d)
                if color[v][d] == c and not seen[w]:
                    seen[w] = 1
                    stack.append(w)
    return count


def _recolor(color, v, d, c):
    """Give the edge ``(v, v ^ 2^d)`` colour ``c`` (stored at both ends)."""
    color[v][d] = c
    color[v ^ (1 << d)][d] = c


def _even_cube_decomposition(k, seed=0):
    """Return a colouring of Q_k (k even) into ``k/2`` Hamiltonian cycles by local search.

    Start from the 2-factors "dimensions 2c and 2c+1" (disjoint 4-cycles) and swap the
    colours of alternating 4-cycles, keeping each colour 2-regular, while the total
    number of cycles does not grow (a few worse moves are accepted to leave plateaus).
    """
    n, a = 1 << k, k // 2
    rng = random.Random(f"hamiltonian-decomposition:{k}:{seed}")
    color = [[d // 2 for d in range(k)] for _ in range(n)]
    count = [_cycle_components(color, k, c) for c in range(a)]
    while sum(count) > a:
        u, d1, d2 = rng.randrange(n), rng.randrange(k), rng.randrange(k)
        c1, c2 = color[u][d1], color[u][d2]
        x, y = u ^ (1 << d1), u ^ (1 << d2)
        if c1 == c2 or color[x][d2] != c2 or color[y][d1] != c1:
            continue
        for v, d, c in ((u, d1, c2), (y, d1, c2), (x, d2, c1), (u, d2, c1)):
            _recolor(color, v, d, c)
        n1, n2 = _cycle_components(color, k, c1), _cycle_components(color, k, c2)
        if n1 + n2 > count[c1] + count[c2] and rng.random() > 0.05:
            for v, d, c in ((u, d1, c1), (y, d1, c1), (x, d2, c2), (u, d2, c2)):
                _recolor(color, v, d, c)
        else:
            count[c1], count[c2] = n1, n2
    return color


def _walk_color(color, k, c):
    """Return the Hamiltonian cycle of colour ``c`` as a node order starting at 0."""
    order, prev, cur = [0], None, 0
    while True:
        nxt = [cur ^ (1 << d) for d in range(k) if color[cur][d] == c and cur ^ (1 << d) != prev]
        prev, cur = cur, nxt[0]
        if cur == 0:
            return order
        order.append(cur)


@lru_cache(maxsize=None)
def hypercube_hamiltonian_cycles(k):
    """Return ``floor(k/2)`` pairwise edge-disjoint Hamiltonian cycles of Q_k (node orders from 0).

    ``k = 2, 3``: the Gray code.  Even ``k >= 4``: a Hamiltonian decomposition found
    by local search (checked).  Odd ``k``: each cycle of Q_(k-1) is doubled into the two
    halves of Q_k and closed by two rungs, at pairwise different nodes.

    >>> [len(c) for c in hypercube_hamiltonian_cycles(5)]
    [32, 32]
    """
    if k < 2:
        return ()
    if k in (2, 3):
        return (tuple(gray_code(k)),)
    if k % 2 == 0:
        color = _even_cube_decomposition(k)
        return tuple(tuple(_walk_color(color, k, c)) for c in range(k // 2))
    top = 1 << (k - 1)
    used, out = set(), []
    for cyc in hypercube_hamiltonian_cycles(k - 1):
        i = next(i for i in range(len(cyc)) if cyc[i] not in used and cyc[i - 1] not in used)
        x, y = cyc[i], cyc[i - 1]
        used |= {x, y}
        path = list(cyc[i:] + cyc[:i])  # x ... y, the cycle without its edge (y, x)
        out.append(tuple(path + [v | top for v in reversed(path)]))
    return tuple(out)


def _cluster_sequence(order, a, e0, e1):
    """Return the clusters of a ring: class-0 ``order[e0 s]`` alternating with class-1 ``order[a + e1 s]``."""
    K = len(order)
    return [order[(a * c + (e1 if c else e0) * s) % K] for s in range(K) for c in (0, 1)]


def _cluster_cycle(dc, order, clusters):
    """Return the ring through ``clusters``, each cluster walked along ``order`` minus one edge."""
    pos = {c: i for i, c in enumerate(order)}
    return _sections(dc, clusters, lambda t, x, y: _along(order, pos, x, y))


def _cross_edges(dc, clusters):
    """Return the cross-edges (by their class-0 end) of the ring through ``clusters``.

    Leaving class-0 cluster ``x`` for class-1 cluster ``y`` uses node ``(0, x, y)``;
    leaving class-1 cluster ``y`` for class-0 cluster ``x`` uses ``(1, y, x)``, whose
    class-0 end is again ``(0, x, y)``.
    """
    T = len(clusters)
    out = set()
    for t in range(T):
        x, y = clusters[t], clusters[(t + 1) % T]
        out.add(dc_node(dc, 0, x, y) if t % 2 == 0 else dc_node(dc, 0, y, x))
    return out


def edge_disjoint_cycles(dc):
    """Return ``floor((r-1)/2)`` pairwise edge-disjoint Hamiltonian cycles of ``DC_r`` (Theorem 4.2).

    Every cluster is a ``(r-1)``-cube with that many edge-disjoint Hamiltonian cycles
    ``H_i``.  Cycle ``i`` visits the class-0 clusters in the order of ``H_i`` (step
    ``e0 = +-1``) and the class-1 clusters in the order of ``H_i`` shifted by ``a``
    (step ``e1``), each cluster along ``H_i`` minus one edge.  The intra-cluster edges
    of different cycles are disjoint because the ``H_i`` are; the parameters
    ``(a, e0, e1)`` are searched so that the cross-edges are disjoint too.

    References
    ----------
    Wu and Wu, Theorem 4.2 (the proof's "head-tail interconnection" of cluster cycles).

    Examples
    --------
    >>> cycles = edge_disjoint_cycles(DualCube(5))
    >>> len(cycles), [len(c) for c in cycles]
    (2, [512, 512])
    >>> not ring_edges(cycles[0]) & ring_edges(cycles[1])
    True
    """
    _check_dualcube(dc, 1)
    orders = hypercube_hamiltonian_cycles(dc.half)
    chosen = _choose_cycles(dc, orders, [], set())
    if chosen is None:
        raise ValueError(f"{dc.spec}: no edge-disjoint choice of cross-edges found")
    return chosen


def _choose_cycles(dc, orders, chosen, used):
    """Backtracking: extend ``chosen`` by one cycle per cluster cycle with unused cross-edges."""
    if len(chosen) == len(orders):
        return [_cluster_cycle(dc, order, clusters) for order, clusters in zip(orders, chosen)]
    order = orders[len(chosen)]
    for a in range(len(order)):
        for e0 in (-1, 1):
            for e1 in (-1, 1):
                clusters = _cluster_sequence(order, a, e0, e1)
                cross = _cross_edges(dc, clusters)
                if cross & used:
                    continue
                found = _choose_cycles(dc, orders, chosen + [clusters], used | cross)
                if found is not None:
                    return found
    return None


# -- Theorem 4.3 and 4.4: rings of every even length, linear arrays ----------------------------------
def ring_construction(topo, length):
    """Return how :func:`ring` embeds a ring of ``length`` nodes, or raise ValueError if none exists.

    One of ``"hamiltonian"`` (Theorem 4.1), ``"cluster"`` (inside one cluster, which
    is a hypercube), ``"staircase i=I"`` (the paper's ring through ``2^(I+1)``
    clusters, each section a path of 2 to ``2^(r-1)`` nodes) or ``"hypercube"``.
    """
    p = topo.num_nodes
    if length % 2 or length < 4 or length > p:
        raise ValueError(f"no ring of {length} nodes in {topo.spec}: rings have an even length "
                         f"from 4 to {p} (the network is bipartite)")
    if isinstance(topo, Hypercube):
        return "hypercube"
    _check_dualcube(topo)
    K = 1 << topo.half
    if length == p:
        return "hamiltonian"
    if length <= K:
        return "cluster"
    for i in range(1, topo.r):
        if 1 << (i + 2) <= length <= 1 << (topo.r + i):
            return f"staircase i={i}"
    raise ValueError(f"no ring of {length} nodes in {topo.spec} (Theorem 4.3's exception: "
                     f"a cluster has {K} nodes and a ring through clusters at least 8)")


def ring(topo, length):
    """Return a ring of ``length`` nodes in a dual-cube or hypercube (Theorem 4.3).

    On ``DC_r``: every even length from 4 to ``2^(2r-1)`` except 6 on ``DC_3`` (and 4,
    6 on ``DC_2``, which is an 8-cycle).  Short rings lie in one cluster; longer ones
    follow the paper's staircase over an ``i``-bit Gray code ``B_1 .. B_(2^i)``:
    ``0B_jB_j, 0B_jB_(j+1), 1B_jB_(j+1), 1B_(j+1)B_(j+1), ...`` (``2^(i+2)`` nodes), with
    each in-cluster edge stretched into a path of up to ``2^(r-1)`` nodes.

    References
    ----------
    Wu and Wu, Theorem 4.3.

    Examples
    --------
    >>> f = DualCube(3)
    >>> [len(ring(f, m)) for m in (4, 8, 10, 30, 32)]
    [4, 8, 10, 30, 32]
    >>> is_ring(f, ring(f, 10))
    True
    """
    how = ring_construction(topo, length)
    if how == "hypercube":
        return gray_code(topo.n) if length == topo.num_nodes else cube_ring(length, range(topo.n))
    if how == "hamiltonian":
        return hamiltonian_cycle(topo)
    if how == "cluster":
        return [dc_node(topo, 0, 0, x) for x in cube_ring(length, range(topo.half))]
    return staircase_ring(topo, int(how.split("=")[1]), length)


def staircase_ring(dc, i, length):
    """Return the paper's ring through ``2^(i+1)`` clusters with ``length`` nodes.

    Over the ``i``-bit Gray code ``B_1 .. B_(2^i)`` the ring runs ``0B_jB_j, 0B_jB_(j+1),
    1B_jB_(j+1), 1B_(j+1)B_(j+1), 0B_(j+1)B_(j+1), ...``: ``2^(i+1)`` sections of two
    nodes joined by cross-edges, ``2^(i+2)`` nodes.  Each section's one in-cluster edge
    may be stretched into a path of up to ``2^(r-1)`` nodes, so every even ``length``
    from ``2^(i+2)`` to ``2^(r+i)`` is reached (``1 <= i <= r - 1``).

    References
    ----------
    Wu and Wu, proof of Theorem 4.3.

    >>> len(staircase_ring(DualCube(3), 1, 16))
    16
    """
    _check_dualcube(dc)
    sections, cap = 1 << (i + 1), 1 << dc.half
    if not 1 <= i < dc.r or length % 2 or not 2 * sections <= length <= sections * cap:
        raise ValueError(f"{dc.spec}: the staircase over {i}-bit Gray codes has an even length "
                         f"from {2 * sections} to {sections * cap}, not {length}")
    sizes, extra = [], length - 2 * sections
    for _ in range(sections):
        add = min(extra, cap - 2)
        sizes.append(2 + add)
        extra -= add
    dims = range(dc.half)
    return _sections(dc, _staircase(gray_code(i)), lambda t, a, b: cube_path(a, b, sizes[t], dims))


def linear_array(topo, length):
    """Return a linear array of ``length`` nodes, ``1 <= length <= p``: a prefix of a Hamiltonian cycle.

    References
    ----------
    Wu and Wu, Theorem 4.4 (stated for ``1 <= k <= 2^(2n+1)``; at most ``2^(2n-1)`` fit).

    >>> linear_array(DualCube(2), 3)
    [0, 1, 5]
    """
    p = topo.num_nodes
    if not 1 <= length <= p:
        raise ValueError(f"no linear array of {length} nodes in {topo.spec} (1 to {p} nodes)")
    if isinstance(topo, Hypercube):
        return [i ^ (i >> 1) for i in range(length)]
    _check_dualcube(topo, 1)
    if topo.r == 1:
        return [0, 1][:length]
    return list(islice(iter_hamiltonian_cycle(topo), length))


def has_cycle_of_length(topo, length):
    """Return True when ``topo`` has a cycle of exactly ``length`` nodes (exhaustive search, small graphs).

    >>> has_cycle_of_length(DualCube(3), 6), has_cycle_of_length(DualCube(4), 6)
    (False, True)
    """
    p = topo.num_nodes
    nbrs = [topo.neighbors(u) for u in range(p)]

    def extend(path, on):
        u = path[-1]
        if len(path) == length:
            return path[0] in nbrs[u]
        for w in nbrs[u]:
            if w > path[0] and w not in on:
                on.add(w)
                path.append(w)
                if extend(path, on):
                    return True
                path.pop()
                on.discard(w)
        return False

    return length >= 3 and any(extend([s], {s}) for s in range(p))


# -- Propositions 3.1-3.3: four DC_(r-1) inside DC_r ----------------------------------------------------
def split(dc, i, j=None, fields="string"):
    """Return the four parts of ``DC_r`` obtained by fixing one bit of each address field.

    ``fields="string"``: bit ``i`` (1 = leftmost) of the middle field and bit ``j`` of
    the last field of the paper's string, so the intra-cluster links along node-id
    bit ``j`` (class 0) and ``i`` (class 1) are removed.  ``fields="ids"``: bit ``i`` of
    the cluster id and bit ``j`` of the node id, in both classes (Proposition 3.2's
    wording).  ``j`` defaults to ``i`` (Proposition 3.3: the i-th node-id bit).

    Returns
    -------
    dict
        ``{(a, b): sorted node list}`` for the four bit values.
    """
    _check_dualcube(dc)
    j = i if j is None else j
    h = dc.half
    if not (1 <= i <= h and 1 <= j <= h):
        raise ValueError(f"{dc.spec}: bit positions run from 1 to {h}")
    if fields not in ("string", "ids"):
        raise ValueError(f"fields must be 'string' or 'ids', not {fields!r}")
    parts = {}
    for u in range(dc.num_nodes):
        mid, last = (u >> h) & ((1 << h) - 1), u & ((1 << h) - 1)
        if fields == "ids" and dc.class_of(u):
            mid, last = last, mid  # (cluster id, node id) of a class-1 node
        key = (mid >> (h - i) & 1, last >> (h - j) & 1)
        parts.setdefault(key, []).append(u)
    return dict(sorted(parts.items()))


def _drop_bits(u, positions):
    """Return ``u`` with the bits at ``positions`` removed (higher bits shift down)."""
    for b in sorted(positions, reverse=True):
        u = (u & ((1 << b) - 1)) | ((u >> (b + 1)) << b)
    return u


def split_is_dualcube(dc, part):
    """Return True when the subgraph of ``dc`` induced by ``part`` is ``DC_(r-1)`` once the bits
    fixed across ``part`` are deleted (Proposition 3.1's check, edge for edge)."""
    part = list(part)
    width = 2 * dc.r - 1
    fixed = [b for b in range(width) if len({u >> b & 1 for u in part}) == 1]
    h = dc.half
    if len(fixed) != 2 or not any(h <= b < 2 * h for b in fixed) or not any(b < h for b in fixed):
        return False
    small = DualCube(dc.r - 1)
    image = {u: _drop_bits(u, fixed) for u in part}
    if sorted(image.values()) != list(range(small.num_nodes)):
        return False
    inside = set(part)
    edges = {(image[u], image[v]) for u in part for v in dc.neighbors(u) if v in inside}
    want = {(u, v) for u in range(small.num_nodes) for v in small.neighbors(u)}
    return edges == want
