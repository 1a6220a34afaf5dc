"""Where each figure of ``dualmpi info`` comes from: exact BFS by automorphism orbits, and balanced cuts.

* :func:`orbit_measure` — links, diameter and average distance of a network too large for
  all-pairs BFS, exactly, from one BFS per orbit of a group of automorphisms the topology
  names (``translation_orbits``: RH subfield-preserving XORs, CCC's XORs and rotation, the
  HDN's base-torus translations), each generator checked first.
* :func:`figure_sources` — ``"bfs"`` or ``"formula"`` for each figure.
* :func:`bisection_report` — the HDN paper's N/4 next to the best balanced cut found (an
  upper bound) and, on small networks, the exact bisection width.
"""

import numpy as np

from .analysis import neighbor_table, orbit_bfs
from .bisection import best_bisection, exact_bisection
from .hdn import HDN

__all__ = ["ORBIT_BUDGET", "ORBIT_NODE_LIMIT", "CUT_LIMIT", "EXACT_CUT_LIMIT", "orbit_measure",
           "figure_sources", "bisection_report"]

#: Default work budget of the orbit BFS: sources x nodes (2^25: RH(4,4) in about 7 s).
ORBIT_BUDGET = 1 << 25
#: Largest network whose neighbour table the orbit BFS builds.
ORBIT_NODE_LIMIT = 1 << 22
#: Largest network searched for balanced cuts.
CUT_LIMIT = 1 << 12
#: Largest network whose bisection width is proved by branch and bound.
EXACT_CUT_LIMIT = 40


def orbit_measure(topo, budget=ORBIT_BUDGET):
    """Return ``(measured, method)``: figures by one BFS per orbit, or ``(None, reason)``.

    >>> from dualmpi.topology import ReducedHypercube
    >>> measured, method = orbit_measure(ReducedHypercube(3, 2))
    >>> measured["diameter"], method
    (9, 'one BFS per orbit of 5 automorphisms checked (4 sources)')
    """
    orbits = getattr(topo, "translation_orbits", None)
    p = topo.num_nodes
    if orbits is None:
        return None, "no automorphism group known for an exact BFS by orbits"
    if p > ORBIT_NODE_LIMIT:
        return None, f"more than {ORBIT_NODE_LIMIT:,} nodes for the exact BFS by orbits"
    sources, weights, generators = orbits()
    if len(sources) * p > budget:
        return None, (f"the exact BFS by orbits needs {len(sources):,} sources x {p:,} nodes, "
                      f"over the budget {budget:,} (--bfs-budget)")
    table = neighbor_table(topo)
    out = orbit_bfs(topo, sources, weights, generators, table)
    out["links"] = int((table != np.arange(p)[:, None]).sum()) // 2
    method = (f"one BFS per orbit of {out['automorphisms_checked']} automorphisms checked "
              f"({out['sources']} sources)")
    return out, method


def figure_sources(out):
    """Return ``{"<figure>_source": "bfs" | "formula"}`` for links, diameter and average distance.

    A figure is ``"bfs"`` when breadth-first search measured it and it agrees with the
    formula (or there is no formula); ``"formula"`` when only the formula gave it, or when
    BFS disagrees (the measured value is then under ``"bfs"``).
    """
    measured = out.get("bfs_method") is not None
    sources = {}
    for key in ("links", "diameter", "avg_distance"):
        if out.get(key) is None:
            continue
        if measured and (out.get("bfs_verified") or key in out.get("bfs_only", ())):
            sources[f"{key}_source"] = "bfs"
        elif measured and out["bfs"].get(key) is not None and abs(out["bfs"][key] - out[key]) < 1e-9:
            sources[f"{key}_source"] = "bfs"
        else:
            sources[f"{key}_source"] = "formula"
    return sources


def bisection_report(topo, restarts=8):
    """Return the HDN paper's bisection width N/4, the best cut found and the exact width if small.

    Only for HDN and RDN (the paper's Section 3 claim); an empty dict otherwise.

    >>> from dualmpi.topology import from_spec
    >>> rep = bisection_report(from_spec("hdn:base=2x3,k=2,s=3/2x3"))
    >>> rep["bisection_width_paper"], rep["bisection_width_upper_bound"]
    (48, 24)
    """
    if not isinstance(topo, HDN):
        return {}
    p = topo.num_nodes
    out = {"bisection_width_paper": p // 4}
    if p > CUT_LIMIT:
        out["bisection_width_search"] = f"skipped: more than {CUT_LIMIT} nodes"
        return out
    cut, _ = best_bisection(topo, restarts=restarts)
    out["bisection_width_upper_bound"] = cut
    out["bisection_width_search"] = ("best balanced cut found (Fiduccia-Mattheyses from random and "
                                     "BFS halves): an upper bound")
    if p <= EXACT_CUT_LIMIT:
        exact = exact_bisection(topo, upper=cut)
        if exact is not None:
            out["bisection_width_exact"] = exact
    return out
