"""Exact minimum one-port broadcast: "can the root inform every node in T rounds?" as a SAT formula.

The formula (CNF, DIMACS numbering) has a variable ``I[v][t]`` "v holds the message after
round t" and ``S[u][j][t]`` "u sends along dimension j in round t"; its clauses say:

* only the root holds it at t = 0, and every node holds it at t = T;
* ``I[v][t]`` implies ``I[v][t-1]`` or a send to ``v`` in round ``t`` (and holders keep it);
* a sender holds the message, its receiver does not yet;
* a node sends at most once per round (one-port) and receives at most once.

Every real schedule of T rounds gives a model (drop redundant sends), and every model gives a
schedule (:func:`decode`), so UNSAT at ``T`` proves that no one-port broadcast takes ``T``
rounds.  The clauses are pure Python; solving them needs an external SAT solver: the
``python-sat`` package if installed (:func:`solve`), or any DIMACS solver on
:func:`to_dimacs`'s text.
"""

from itertools import combinations

from ..errors import DualmpiError
from ..topology.analysis import neighbor_table

__all__ = ["broadcast_cnf", "to_dimacs", "assignment_from_tree", "decode", "solve", "minimum_tree",
           "SEARCH_LIMIT"]

#: Largest network :func:`minimum_tree` searches (MC(3,1), 2,048 nodes: 17 rounds in seconds).
SEARCH_LIMIT = 1 << 12


class _Vars:
    """Variable numbering of the broadcast formula."""

    def __init__(self, p, deg, rounds):
        self.p, self.deg, self.rounds = p, deg, rounds
        self.count = p * (rounds + 1) + p * deg * rounds

    def informed(self, v, t):
        """Return the number of ``I[v][t]``."""
        return 1 + v * (self.rounds + 1) + t

    def send(self, u, j, t):
        """Return the number of ``S[u][j][t]`` (j 0-based, t 1-based)."""
        return 1 + self.p * (self.rounds + 1) + (u * self.deg + j) * self.rounds + (t - 1)


def broadcast_cnf(topo, root, rounds):
    """Return ``(clauses, nvars, numbering)``: the formula "broadcast from ``root`` in ``rounds``".

    Examples
    --------
    >>> from dualmpi.topology import Hypercube
    >>> clauses, nvars, _ = broadcast_cnf(Hypercube(2), 0, 2)
    >>> nvars, len(clauses)
    (28, 72)
    """
    nbr = neighbor_table(topo).tolist()
    p, deg = len(nbr), len(nbr[0]) if nbr else 0
    var = _Vars(p, deg, rounds)
    incoming = [[] for _ in range(p)]
    for u in range(p):
        for j in range(deg):
            incoming[nbr[u][j]].append((u, j))
    clauses = []
    for v in range(p):
        clauses.append([var.informed(v, 0)] if v == root else [-var.informed(v, 0)])
        clauses.append([var.informed(v, rounds)])
        for t in range(1, rounds + 1):
            clauses.append([-var.informed(v, t), var.informed(v, t - 1)]
                           + [var.send(u, j, t) for u, j in incoming[v]])
            clauses.append([-var.informed(v, t - 1), var.informed(v, t)])
            ins = [var.send(u, j, t) for u, j in incoming[v]]
            clauses += [[-a, -b] for a, b in combinations(ins, 2)]
    for u in range(p):
        for t in range(1, rounds + 1):
            for j in range(deg):
                clauses.append([-var.send(u, j, t), var.informed(u, t - 1)])
                clauses.append([-var.send(u, j, t), -var.informed(nbr[u][j], t - 1)])
            clauses += [[-var.send(u, a, t), -var.send(u, b, t)]
                        for a, b in combinations(range(deg), 2)]
    return clauses, var.count, var


def to_dimacs(clauses, nvars):
    """Return the DIMACS CNF text of ``clauses`` over ``nvars`` variables."""
    lines = [f"p cnf {nvars} {len(clauses)}"]
    lines += [" ".join(map(str, c)) + " 0" for c in clauses]
    return "\n".join(lines) + "\n"


def assignment_from_tree(topo, root, tree_rounds, rounds):
    """Return the set of true variables that a broadcast tree (rounds of (u, v) pairs) induces."""
    nbr = neighbor_table(topo).tolist()
    var = _Vars(topo.num_nodes, len(nbr[0]), rounds)
    held = {root}
    true = set()
    for t in range(rounds + 1):
        if t >= 1 and t - 1 < len(tree_rounds):
            for u, v in tree_rounds[t - 1]:
                true.add(var.send(u, nbr[u].index(v), t))
            held |= {v for _, v in tree_rounds[t - 1]}
        true |= {var.informed(v, t) for v in held}
    return true


def decode(topo, root, rounds, true):
    """Return the broadcast tree rounds a model gives: the sends of holders to nodes still lacking it."""
    nbr = neighbor_table(topo).tolist()
    var = _Vars(topo.num_nodes, len(nbr[0]), rounds)
    held = {root}
    tree = []
    for t in range(1, rounds + 1):
        pairs, got = [], set()
        for u in sorted(held):
            for j in range(var.deg):
                v = nbr[u][j]
                if var.send(u, j, t) in true and v not in held and v not in got:
                    pairs.append((u, v))
                    got.add(v)
                    break
        held |= got
        tree.append(pairs)
    return tree


def solve(topo, root, rounds):
    """Return the tree rounds of a ``rounds``-round broadcast, or None when none exists (UNSAT).

    Needs the ``python-sat`` package (CaDiCaL); raises :class:`DualmpiError` without it.
    """
    try:
        from pysat.solvers import Cadical153
    except ImportError:
        raise DualmpiError("the exact broadcast search needs python-sat (pip install python-sat), "
                           "or feed to_dimacs(...) to any SAT solver") from None
    clauses, _, _ = broadcast_cnf(topo, root, rounds)
    with Cadical153(bootstrap_with=clauses) as sat:
        if not sat.solve():
            return None
        true = {x for x in sat.get_model() if x > 0}
    return decode(topo, root, rounds, true)


def minimum_tree(topo, root, upper=None):
    """Return the tree rounds of a fewest-round one-port broadcast from ``root`` (SAT search).

    Tries ``T`` from the lower bound max(eccentricity of ``root``, ceil(log2 p)) upward, up
    to ``upper`` (default: dualmpi's own broadcast's rounds, which always succeed), and
    returns the first satisfiable ``T``'s schedule: no broadcast takes fewer rounds.
    """
    from ..topology.analysis import distances_from

    p = topo.num_nodes
    if p > SEARCH_LIMIT:
        raise DualmpiError(f"{topo.spec}: the SAT broadcast search covers networks up to "
                           f"{SEARCH_LIMIT:,} nodes, not {p:,}")
    lower = max(int(distances_from(topo, root).max()), (p - 1).bit_length())
    if upper is None:
        from .bcast import spanning_tree

        upper = len(spanning_tree(topo, root))
    for rounds in range(lower, upper + 1):
        tree = solve(topo, root, rounds)
        if tree is not None:
            return tree
    raise DualmpiError(f"{topo.spec}: no broadcast in {upper} rounds")  # pragma: no cover


def _main(argv=None):
    """``python -m dualmpi.collectives.bcast_search SPEC ROUNDS``: SAT or UNSAT (needs python-sat)."""
    import sys

    from ..topology import from_spec

    args = sys.argv[1:] if argv is None else argv
    topo, rounds = from_spec(args[0]), int(args[1])
    tree = solve(topo, 0, rounds)
    print(f"{topo.spec}: broadcast from node 0 in {rounds} rounds: "
          + ("UNSAT (impossible)" if tree is None else
             f"SAT ({sum(len(r) for r in tree)} sends, every node reached: "
             f"{1 + sum(len(r) for r in tree) == topo.num_nodes})"))


if __name__ == "__main__":
    _main()
