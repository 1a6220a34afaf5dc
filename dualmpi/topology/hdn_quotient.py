"""The HDN paper's quotient graph Q^(i-1): a cluster with every super-node of level i contracted.

Section 3 derives Theorem 1 from "D(Q^(i-1)) = D_(i-1) - D(SN^i)".  This module measures
both sides on a real cluster, and the quantity the proof actually needs: the largest
distance from a node to a super-node (the nearest of its nodes).
"""

import numpy as np

from .analysis import neighbor_table

__all__ = ["quotient_check"]


def _bfs(adj, sources, size):
    """Return BFS distances from a set of sources over neighbour lists."""
    dist = [-1] * size
    frontier = list(sources)
    for x in frontier:
        dist[x] = 0
    while frontier:
        nxt = []
        for x in frontier:
            for y in adj[x]:
                if dist[y] < 0:
                    dist[y] = dist[x] + 1
                    nxt.append(y)
        frontier = nxt
    return dist


def quotient_check(hdn, i):
    """Return the diameters of a level-i cluster, of SN^i, of the quotient Q^(i-1), and the largest
    node-to-super-node distance, for a cluster of level ``i`` of ``hdn`` (``2 <= i <= k``).

    The cluster ``(C, U) = (0, 0)`` of level ``i`` is an HDN(B, i-1, S) on the node ids
    ``0 .. N_(i-1) - 1``; its super-node of level ``i`` is ``u // s_i``.  The quotient
    joins two super-nodes when a link of the cluster joins them.

    Parameters
    ----------
    hdn : HDN
        A network with at least ``i`` levels.
    i : int
        The level, ``2 <= i <= k`` (at ``i = 1`` the cluster is B and the quotient its
        product of the factors outside SN^1, so the identity holds).

    Returns
    -------
    dict
        ``d_cluster`` (D_(i-1)), ``d_supernode`` (D(SN^i)), ``d_quotient`` (D(Q^(i-1))),
        ``d_node_to_supernode`` and whether the quotient satisfies the printed identity.

    References
    ----------
    Y. Li, S. Peng, W. Chu, "Hierarchical Dual-Net", Section 3 (proof of Theorem 1).

    Examples
    --------
    >>> from dualmpi.topology import from_spec
    >>> out = quotient_check(from_spec("hdn:base=5,k=2,s=1/5"), 2)
    >>> out["d_cluster"] - out["d_supernode"], out["d_quotient"], out["d_node_to_supernode"]
    (4, 2, 4)
    """
    if not 2 <= i <= hdn.k:
        raise ValueError(f"level {i} out of range 2..{hdn.k}")
    size, s = hdn.N[i - 1], hdn.s[i]
    count = size // s
    table = neighbor_table(hdn)[:size]
    adj = [[int(v) for v in row if v < size and v != u] for u, row in enumerate(table.tolist())]
    groups = np.arange(size) // s
    qadj = [set() for _ in range(count)]
    for u, row in enumerate(adj):
        for v in row:
            if groups[u] != groups[v]:
                qadj[groups[u]].add(int(groups[v]))
    qadj = [sorted(x) for x in qadj]
    d_quotient = max(max(_bfs(qadj, [x], count)) for x in range(count))
    d_cluster = max(max(_bfs(adj, [u], size)) for u in range(size))
    d_node_sn = max(max(_bfs(adj, range(x * s, (x + 1) * s), size)) for x in range(count))
    d_sn = hdn.sn_diameter(i)
    return {"spec": hdn.spec, "level": i, "d_cluster": d_cluster, "d_supernode": d_sn,
            "d_quotient": d_quotient, "d_node_to_supernode": d_node_sn,
            "derivation": d_cluster - d_sn,
            "quotient_equals_derivation": d_quotient == d_cluster - d_sn}
