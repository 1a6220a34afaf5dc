"""The exact broadcast search (SAT encoding): schedules satisfy it, corrupted ones do not, models
decode into verifying schedules; with python-sat installed, the metacube minima are re-proved."""

import pytest

from dualmpi.collectives import build_schedule
from dualmpi.collectives.bcast import spanning_tree
from dualmpi.collectives.bcast_search import (
    assignment_from_tree,
    broadcast_cnf,
    decode,
    to_dimacs,
)
from dualmpi.collectives.schedule import Schedule
from dualmpi.collectives.trees import tree_schedule_rounds
from dualmpi.engine import run_inprocess
from dualmpi.topology import from_spec


def _satisfied(clauses, true):
    """Return the clauses an assignment (set of true variables) violates."""
    return [c for c in clauses if not any((x > 0) == (abs(x) in true) for x in c)]


@pytest.mark.parametrize("spec, rounds", [("hypercube:n=3", 3), ("metacube:k=2,m=1", 9),
                                          ("dualcube:r=3", 6), ("ccc:n=3", 7)])
def test_dualmpi_broadcasts_satisfy_the_formula(spec, rounds):
    """dualmpi's broadcast tree is a model of its round count's formula, and decodes back."""
    topo = from_spec(spec)
    tree = spanning_tree(topo, 0)
    assert len(tree) == rounds
    clauses, nvars, _ = broadcast_cnf(topo, 0, rounds)
    true = assignment_from_tree(topo, 0, tree, rounds)
    assert not _satisfied(clauses, true)
    decoded = decode(topo, 0, rounds, true)
    assert [sorted(r) for r in decoded] == [sorted(r) for r in tree]
    sched = Schedule("bcast", "decoded", topo, 0, tree_schedule_rounds(decoded, 0, False), rounds)
    assert run_inprocess(sched, 8).verified
    assert to_dimacs(clauses, nvars).startswith(f"p cnf {nvars} {len(clauses)}\n")


def test_broken_schedules_violate_the_formula():
    """A tree missing a send, or cut a round short, is no model (the formula can fail)."""
    topo = from_spec("metacube:k=2,m=1")
    tree = spanning_tree(topo, 0)
    clauses, _, _ = broadcast_cnf(topo, 0, 9)
    short = [list(r) for r in tree]
    short[-1] = short[-1][1:]
    assert _satisfied(clauses, assignment_from_tree(topo, 0, short, 9))
    clauses8, _, _ = broadcast_cnf(topo, 0, 8)
    assert _satisfied(clauses8, assignment_from_tree(topo, 0, tree[:8], 8))
    double = [list(r) for r in tree]
    u = double[-1][0][0]
    double[-1].append((u, next(v for v in topo.neighbors(u) if v != double[-1][0][1])))
    assert _satisfied(clauses, assignment_from_tree(topo, 0, double, 9))  # two sends by one node


@pytest.mark.parametrize("spec, diameter, minimum", [
    ("metacube:k=2,m=1", 8, 9),
    ("metacube:k=1,m=2", 6, 6),
    ("metacube:k=2,m=2", 12, 13),
])
def test_metacube_minimum_by_sat(spec, diameter, minimum):
    """With a SAT solver: MC(2,1) and MC(2,2) cannot broadcast in diameter rounds (UNSAT), so
    dualmpi's log p + 2^k - 1 = diameter + 1 is optimal there; MC(1,2) = F_3 reaches its diameter."""
    pytest.importorskip("pysat")
    from dualmpi.collectives.bcast_search import solve

    topo = from_spec(spec)
    assert int(topo.formulas()["diameter"]) == diameter
    if minimum > diameter:
        assert solve(topo, 0, minimum - 1) is None
    tree = solve(topo, 0, minimum)
    assert tree is not None and 1 + sum(len(r) for r in tree) == topo.num_nodes
    assert build_schedule("bcast", topo, 0).num_rounds == minimum


def test_doctests():
    """The module's examples run."""
    import doctest

    import dualmpi.collectives.bcast_search as mod

    assert doctest.testmod(mod).failed == 0


@pytest.mark.parametrize("spec, rounds", [("metacube:k=2,m=1", 9), ("metacube:k=1,m=2", 6),
                                          ("ccc:n=3", 6)])
def test_sat_variant_verified(spec, rounds):
    """`--variant sat`: the fewest-round broadcast, verified in-process (needs python-sat)."""
    pytest.importorskip("pysat")
    topo = from_spec(spec)
    sched = build_schedule("bcast", topo, topo.num_nodes - 1, variant="sat")
    assert sched.num_rounds == rounds and "SAT" in sched.algorithm
    assert run_inprocess(sched, 8).verified


def test_sat_variant_without_solver_is_a_clear_error():
    """Without python-sat the variant is a one-line error, not a traceback."""
    try:
        import pysat  # noqa: F401
    except ImportError:
        from dualmpi.errors import DualmpiError

        with pytest.raises(DualmpiError, match="python-sat"):
            build_schedule("bcast", from_spec("metacube:k=2,m=1"), 0, variant="sat")
    else:
        pytest.skip("python-sat is installed")
