"""The papers' point-to-point routes: valid hops, shortest length, ascending order inside clusters,
the metacube classPath table (with its erratum), and MC(0, m) = Q_m, MC(1, r-1) = F_r."""

from collections import deque
from itertools import product

import numpy as np
import pytest

from dualmpi.topology import DualCube, Hypercube, MetaCube
from dualmpi.topology.analysis import neighbor_table
from dualmpi.topology.hypercube import ascending_path
from dualmpi.topology.metacube import class_walk


def cluster_dims(topo):
    """Return the number of cube-edge dimensions (1..c); the dimensions above it are cross-edges."""
    if isinstance(topo, Hypercube):
        return topo.n
    return topo.r - 1 if isinstance(topo, DualCube) else topo.m


def routes(topo, sources):
    """Yield ``(src, dst, path)`` for every destination of every source."""
    for s in sources:
        for d in range(topo.num_nodes):
            yield s, d, topo.route(s, d)


# -- every route of every network up to 4096 nodes ------------------------------------------------
def test_routes_are_valid_paths(network, sources):
    """Each route starts at src, ends at dst, visits no node twice and every hop is a link."""
    bad = []
    for s, d, path in routes(network, sources):
        hops_ok = all(network.is_link(a, b) for a, b in zip(path, path[1:]))
        if path[0] != s or path[-1] != d or len(set(path)) != len(path) or not hops_ok:
            bad.append((s, d, path))
    assert not bad, f"{len(bad)} invalid routes in {network.spec}, e.g. {bad[:3]}"


def test_routes_are_shortest(network, bfs, sources):
    """The paper's route has as many hops as the BFS distance (counts every route that does not)."""
    dist = bfs["distance_matrix"]
    longer = [(s, d, len(path) - 1, int(dist[s, d])) for s, d, path in routes(network, sources)
              if len(path) - 1 != dist[s, d]]
    total = len(sources) * network.num_nodes
    assert not longer, (
        f"{len(longer)} of {total} routes in {network.spec} are not shortest, "
        f"(src, dst, hops, bfs distance): {longer[:5]}"
    )


def test_next_hop_follows_route(network, sources):
    """``next_hop(cur, s, d)`` is the node after ``cur`` on ``route(s, d)``."""
    p = network.num_nodes
    step = max(1, p // 128)
    for s in sources[:: max(1, len(sources) // 16)]:
        for d in range(0, p, step):
            path = network.route(s, d)
            assert [network.next_hop(c, s, d) for c in path[:-1]] == path[1:]
            with pytest.raises(ValueError):
                network.next_hop(d, s, d)


def test_route_ascends_inside_each_cluster(network, sources):
    """Between cross-edges the route fixes node-id bits lowest dimension first (e-cube order)."""
    c = cluster_dims(network)
    bad = []
    for s, d, path in routes(network, sources[:64]):
        dims = [network.dimension_of(a, b) for a, b in zip(path, path[1:])]
        run = []
        for i in dims + [None]:
            if i is None or i > c:
                if run != sorted(set(run)):
                    bad.append((s, d, dims))
                    break
                run = []
            else:
                run.append(i)
    assert not bad, f"{len(bad)} routes not ascending inside a cluster, (src, dst, dims): {bad[:3]}"


# -- hypercube and dual-cube: the papers' rules on concrete nodes ----------------------------------
@pytest.mark.parametrize("u, v, path", [
    (0, 7, [0, 1, 3, 7]),
    (0b101, 0b010, [0b101, 0b100, 0b110, 0b010]),
    (6, 6, [6]),
])
def test_hypercube_ecube_route(u, v, path):
    """Q_3: flip the differing bits from the least significant one up."""
    assert Hypercube(3).route(u, v) == path == ascending_path(u, v, range(3))


@pytest.mark.parametrize("u, v, path", [
    # case 1, same cluster: ascending inside the cluster
    (0b0_00_00, 0b0_00_11, [0, 1, 3]),
    (0b1_00_00, 0b1_11_00, [16, 20, 28]),
    # case 2, other class: fix own node id, cross, fix the rest in the destination's cluster
    (0b0_00_00, 0b1_10_11, [0b0_00_00, 0b0_00_01, 0b0_00_11, 0b1_00_11, 0b1_10_11]),
    (0b1_10_11, 0b0_00_00, [0b1_10_11, 0b1_00_11, 0b0_00_11, 0b0_00_10, 0b0_00_00]),
    # case 3, same class, other cluster: cross, fix the cluster id, cross back, fix the node id
    (0b0_00_00, 0b0_01_00, [0b0_00_00, 0b1_00_00, 0b1_01_00, 0b0_01_00]),
    (0b1_00_00, 0b1_00_01, [0b1_00_00, 0b0_00_00, 0b0_00_01, 0b1_00_01]),
    (0b0_00_01, 0b0_11_10, [0b0_00_01, 0b1_00_01, 0b1_01_01, 0b1_11_01, 0b0_11_01, 0b0_11_00,
                            0b0_11_10]),
])
def test_dualcube_route_examples(u, v, path):
    """F_3 (5-bit addresses (class, part II, part I)): the three cases of the routing algorithm."""
    assert DualCube(3).route(u, v) == path


@pytest.mark.parametrize("r", range(1, 7))
def test_dualcube_cross_edge_count(r):
    """Routes use 0 cross-edges inside a cluster, 1 between classes, 2 between clusters of a class."""
    f = DualCube(r)
    p = f.num_nodes
    for u in sorted({0, 1, p // 2 + 1, p - 1}):
        for v in range(p):
            path = f.route(u, v)
            crossings = sum(f.class_of(a) != f.class_of(b) for a, b in zip(path, path[1:]))
            if f.cluster_of(u) == f.cluster_of(v):
                expected = 0
            elif f.class_of(u) != f.class_of(v):
                expected = 1
            else:
                expected = 2
            assert crossings == expected, (u, v, path)


# -- metacube ------------------------------------------------------------------------------------
def test_metacube_k2_m2_diameter_route():
    """MC(2,2): node 0 to node 1023 (every bit differs) takes 12 hops, the diameter 2^k (m+1)."""
    mc = MetaCube(2, 2)
    path = mc.route(0, 1023)
    assert (path[0], path[-1], len(path) - 1) == (0, 1023, 12)
    assert mc.formulas()["diameter"] == 12
    assert all(mc.is_link(a, b) for a, b in zip(path, path[1:]))
    assert mc.class_path(0, 1023) == [0, 1, 3, 2, 3]


@pytest.mark.parametrize("spec_k, spec_m", [(1, 2), (2, 1), (2, 2), (3, 1)])
def test_metacube_route_follows_its_class_path(spec_k, spec_m):
    """The classes a route passes through, in order, are ``class_path(u, v)``; one cross-edge each."""
    mc = MetaCube(spec_k, spec_m)
    p = mc.num_nodes
    for u in sorted({0, 5, p // 3, p - 1}):
        for v in range(0, p, max(1, p // 256)):
            seq = [mc.class_of(a) for a in mc.route(u, v)]
            classes = [c for i, c in enumerate(seq) if i == 0 or c != seq[i - 1]]
            assert classes == mc.class_path(u, v), (u, v)


# The metacube paper's Table 1 for k = 2: (destination class, type) -> classPath after class 0.
# Field i of the address is fixed inside class i's cluster, so field i "differs" means class i
# must be visited.  Entry (3, 2) is printed as (1, 3), which never enters class 2: see below.
TABLE1 = {
    0: {0: (), 1: (1, 0), 2: (2, 0), 3: (1, 3, 2, 0)},
    1: {0: (1,), 1: (2, 3, 1), 2: (2, 3, 1), 3: (2, 3, 1)},
    2: {0: (2,), 1: (1, 3, 2), 2: (1, 3, 2), 3: (1, 3, 2)},
    3: {0: (1, 3), 1: (1, 3), 2: (2, 3), 3: (1, 3, 2, 3)},
}
TABLE1_PRINTED_3_2 = (1, 3)


def table1_type(dest, need):
    """Return the paper's type of a (destination class, differing fields) pair for k = 2."""
    f = [bool(need >> i & 1) for i in range(4)]
    if dest == 0:
        return 3 if f[3] else 2 * f[2] + f[1]
    if dest == 1:
        return 2 * f[3] + f[2]
    if dest == 2:
        return 2 * f[3] + f[1]
    return 2 * f[2] + f[1]


@pytest.mark.parametrize("dest, need", list(product(range(4), range(16))))
def test_class_walk_reproduces_table1(dest, need):
    """Every set of differing fields: class_walk(2, dest, need) is the (corrected) Table 1 entry."""
    entry = (0, *TABLE1[dest][table1_type(dest, need)])
    walk = class_walk(2, dest, need)
    assert walk == entry
    assert len(walk) == len(entry)
    assert walk[-1] == dest
    assert all(c in walk for c in range(4) if need >> c & 1)
    assert all(bin(a ^ b).count("1") == 1 for a, b in zip(walk, walk[1:]))


def test_table1_erratum_dest3_type2():
    """Printed classPath (0,1,3) for destination 3, type 2 never enters class 2's cluster.

    Type 2 means field 2 differs, and only class 2 can change field 2; the route that follows
    the printed entry ends at a different node.  The corrected entry (0,2,3) has the same length.
    """
    printed = (0, *TABLE1_PRINTED_3_2)
    corrected = class_walk(2, 3, 0b0100)
    assert table1_type(3, 0b0100) == 2
    assert 2 not in printed
    assert corrected == (0, 2, 3) and len(corrected) == len(printed)

    mc = MetaCube(2, 2)
    u = 0
    v = mc.parse_address("(11,00,11,00,00)")  # class 3, only field 2 differs from u
    assert mc.differing_fields(u, v) == 0b0100
    assert follow_class_walk(mc, u, v, printed) != v
    assert follow_class_walk(mc, u, v, corrected) == v
    assert mc.route(u, v)[-1] == v


def follow_class_walk(mc, u, v, classes):
    """Return where a message from ``u`` ends that fixes the field of each class it passes."""
    cur = u
    for c in classes:
        cur = (cur & ((1 << mc.class_shift) - 1)) | (c << mc.class_shift)
        cur = ascending_path(cur, v, range(mc.m * c, mc.m * (c + 1)))[-1]
    return cur


@pytest.mark.parametrize("k", range(4))
def test_class_walk_is_shortest(k):
    """For k <= 3, every (dest, need): class_walk's length is the BFS optimum over (class, visited)."""
    start = (0, 1)
    best = {start: 0}
    queue = deque([start])
    while queue:
        cur, seen = queue.popleft()
        for b in range(k):
            nxt = (cur ^ (1 << b), seen | 1 << (cur ^ (1 << b)))
            if nxt not in best:
                best[nxt] = best[(cur, seen)] + 1
                queue.append(nxt)
    classes = 1 << k
    for dest in range(classes):
        for need in range(1 << classes):
            target = need | 1 | 1 << dest
            optimum = min(n for (c, seen), n in best.items() if c == dest and seen & target == target)
            walk = class_walk(k, dest, need)
            assert len(walk) - 1 == optimum, (k, dest, need, walk)
            assert walk[0] == 0 and walk[-1] == dest
            assert all(c in walk for c in range(classes) if need >> c & 1)


# -- the equivalences MC(0, m) = Q_m and MC(1, r-1) = F_r -----------------------------------------
@pytest.mark.parametrize("m", range(1, 13))
def test_metacube_k0_is_the_hypercube(m):
    """MC(0, m) and Q_m have the same neighbours for every node (identity isomorphism)."""
    mc, q = MetaCube(0, m), Hypercube(m)
    assert (mc.num_nodes, mc.degree) == (q.num_nodes, q.degree)
    np.testing.assert_array_equal(neighbor_table(mc), neighbor_table(q))
    assert mc.formulas() == q.formulas()
    for u in range(0, mc.num_nodes, max(1, mc.num_nodes // 16)):
        for v in range(mc.num_nodes):
            assert mc.route(u, v) == q.route(u, v)


@pytest.mark.parametrize("r", range(2, 7))
def test_metacube_k1_is_the_dualcube(r):
    """MC(1, r-1) and F_r: identical neighbour sets, address fields, addresses and distances."""
    mc, f = MetaCube(1, r - 1), DualCube(r)
    assert (mc.num_nodes, mc.degree) == (f.num_nodes, f.degree)
    np.testing.assert_array_equal(neighbor_table(mc), neighbor_table(f))
    assert all(set(mc.neighbors(u)) == set(f.neighbors(u)) for u in range(f.num_nodes))
    assert all(mc.fields(u) == f.fields(u) for u in range(f.num_nodes))
    assert all(mc.format_node(u) == f.format_node(u) for u in range(f.num_nodes))
    for key in ("links", "diameter", "avg_distance"):
        assert mc.formulas()[key] == pytest.approx(f.formulas()[key], rel=0, abs=1e-12)
    for u in range(0, f.num_nodes, max(1, f.num_nodes // 16)):
        assert [mc.distance(u, v) for v in range(f.num_nodes)] == [
            f.distance(u, v) for v in range(f.num_nodes)
        ]
