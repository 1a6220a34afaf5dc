"""The papers' cost formulas (dualmpi.model.formulas) against the schedules' exact counts."""

import doctest
import functools

import numpy as np
import pytest

import dualmpi.model.analysis
import dualmpi.model.fit
import dualmpi.model.formulas
import dualmpi.model.results
import dualmpi.model.synthetic
from dualmpi.collectives import build_schedule
from dualmpi.errors import DualmpiError
from dualmpi.model.formulas import (
    PATTERNS,
    SINGLE_HOP,
    Coeffs,
    FormulaError,
    cut_through_formula,
    dualcube_formula,
    dualcube_stages,
    hypercube_alltoall,
    lower_bound,
    metacube_alltoall,
    metacube_extra_hops,
    paper_formula,
    predict,
    total,
)
from dualmpi.simulator import simulate
from dualmpi.topology import DualCube, MetaCube, from_spec

#: Networks the brief checks every Table 2 formula on, and the equivalent metacubes.
TABLE2_SPECS = ([f"dualcube:r={r}" for r in range(2, 6)] + [f"hypercube:n={n}" for n in range(2, 9)]
                + ["metacube:k=0,m=3", "metacube:k=1,m=1", "metacube:k=1,m=2", "metacube:k=1,m=3"])
#: Quad-cubes, whose only formula is the total exchange's T_M.
METACUBE_SPECS = ["metacube:k=2,m=1", "metacube:k=2,m=2"]


@functools.lru_cache(maxsize=None)
def model_of(spec, collective):
    """Return the schedule's ``model`` from ``dualmpi.simulator.simulate`` as Coeffs (cached)."""
    return Coeffs.of(simulate(from_spec(spec), collective)["model"])


@pytest.mark.parametrize("collective", PATTERNS)
@pytest.mark.parametrize("spec", TABLE2_SPECS)
def test_cut_through_formula_equals_schedule(spec, collective):
    """Corrected formula with one hop per single-hop step = the schedule's exact (ts, tw, th)."""
    assert cut_through_formula(from_spec(spec), collective) == model_of(spec, collective)


@pytest.mark.parametrize("spec", METACUBE_SPECS)
def test_metacube_t_m_equals_schedule(spec):
    """T_M of MC(2, m) (metacube paper 3.4): 63/63/296 for m = 1, 1023/1023/7328 for m = 2."""
    topo = from_spec(spec)
    assert paper_formula(topo, "alltoall") == model_of(spec, "alltoall")
    assert cut_through_formula(topo, "alltoall") == model_of(spec, "alltoall")


@pytest.mark.parametrize("collective", PATTERNS)
@pytest.mark.parametrize("spec", TABLE2_SPECS)
def test_as_printed_differs_only_where_errata_say(spec, collective):
    """As printed, Table 2 matches the schedules except t_h of rows 1-3 (omitted) and D3."""
    topo, model = from_spec(spec), model_of(spec, collective)
    printed = paper_formula(topo, collective, "as-printed")
    if collective in SINGLE_HOP:
        assert printed.th == 0 and model.th == model.ts      # one hop per step, left out
    else:
        assert printed.th == model.th
    assert printed.ts == model.ts
    dualcube = isinstance(topo, DualCube) or (isinstance(topo, MetaCube) and topo.k == 1)
    if collective == "scatter" and dualcube:
        p = topo.num_nodes
        assert (printed.tw, model.tw) == (p - 1, p + int(np.sqrt(2 * p)) - 2)   # errata D3
    else:
        assert printed.tw == model.tw


@pytest.mark.parametrize("r", [2, 3, 4, 5])
def test_d3_printed_sums_and_corrected_stages(r):
    """D3: Section 4's sums give 2^(2r-1) + 2^(r-1) - 1, neither p - 1 nor the schedule's."""
    p = 2 ** (2 * r - 1)
    printed = total(*dualcube_stages(r, "scatter", "as-printed"))
    assert printed == (2 * r, p + 2 ** (r - 1) - 1, 0)
    assert printed != dualcube_formula(r, "scatter", "as-printed")
    corrected = total(*dualcube_stages(r, "scatter", "corrected"))
    assert corrected.tw == dualcube_formula(r, "scatter", "corrected").tw == model_of(
        f"dualcube:r={r}", "scatter").tw


def step_costs(schedule):
    """Return per step (in order) the Coeffs (1, largest message in blocks, longest path in hops)."""
    blocks, hops = {}, {}
    for rnd in schedule.rounds:
        for tr in rnd.transfers:
            blocks[rnd.step] = max(blocks.get(rnd.step, 0), len(tr.blocks))
            hops[rnd.step] = max(hops.get(rnd.step, 0), rnd.hop + 1)
    return [Coeffs(1, blocks[s], hops[s]) for s in sorted(blocks)]


def stage_split(collective, r):
    """Return the number of steps of each stage of the dual-cube algorithm."""
    h = 2 ** (r - 1)
    return {"scatter": [r, r], "allgather": [r - 1, r, 1],
            "alltoall": [h - 1, h * h, h * (h - 1)]}[collective]


@pytest.mark.parametrize("collective", ["scatter", "allgather", "alltoall"])
@pytest.mark.parametrize("r", [2, 3, 4])
def test_dualcube_stage_terms_equal_schedule_stages(collective, r):
    """Corrected stage terms (Sections 4, 5, 6.3) = the schedule's cost summed per stage."""
    steps = step_costs(build_schedule(collective, DualCube(r)))
    split = stage_split(collective, r)
    assert sum(split) == len(steps)
    stages, start = [], 0
    for n in split:
        stages.append(total(*steps[start:start + n]))
        start += n
    expected = dualcube_stages(r, collective, "corrected")
    if collective in SINGLE_HOP:
        expected = [s._replace(th=s.ts) for s in expected]
    assert stages == expected


@pytest.mark.parametrize("r", [2, 3, 4, 5, 6])
def test_d4_printed_t2_breaks_the_total(r):
    """D4: with T_2's printed parenthesis, T_1 + T_2 + T_3 misses the paper's own total (r >= 3;
    for r = 2, g = 1 and both readings coincide)."""
    table2 = dualcube_formula(r, "alltoall")
    assert total(*dualcube_stages(r, "alltoall", "corrected")) == table2
    printed = total(*dualcube_stages(r, "alltoall", "as-printed"))
    assert printed.th > table2.th if r >= 3 else printed == table2
    assert table2.th == (r + 0.5) * 2 ** (2 * r - 1) - 2 ** r        # Section 6.3's total


@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_metacube_extra_hops_close_t_m(m):
    """E_0 + ... + E_3 = 5 2^(4m+1) - 2 2^(3m+1) - 3 2^(2m+1), and T_C + E = T_M (t_h part)."""
    extra = sum(metacube_extra_hops(m))
    assert extra == 5 * 2 ** (4 * m + 1) - 2 * 2 ** (3 * m + 1) - 3 * 2 ** (2 * m + 1)
    assert hypercube_alltoall(4 * m + 2).th + extra == metacube_alltoall(m).th


def test_paper_examples():
    """Printed numbers: MC(2,2) T_M = 1023(t_s + g t_w) + 7328 t_h; the 10-cube's T_C 5120 t_h."""
    assert metacube_alltoall(2) == (1023, 1023, 7328)
    assert hypercube_alltoall(10) == (1023, 1023, 5120)


@pytest.mark.parametrize("collective", PATTERNS)
@pytest.mark.parametrize("spec", TABLE2_SPECS + ["metacube:k=2,m=1"])
def test_lower_bounds_below_schedules(spec, collective):
    """The stated lower bounds are at most every schedule's coefficients (so at most its time)."""
    bound, model = lower_bound(from_spec(spec), collective), model_of(spec, collective)
    assert all(b <= c for b, c in zip(bound, model))


def test_lower_bounds_are_the_printed_ones():
    """Broadcast (t_s + m t_w) log p; personalized m (p-1) t_w; all-to-all broadcast (p-1) m t_w."""
    assert lower_bound(128, "bcast") == (7, 7, 0)
    assert lower_bound(128, "scatter") == (0, 127, 0)
    assert lower_bound(128, "allgather") == (0, 127, 0)
    assert lower_bound(DualCube(4), "allgather") == lower_bound(128, "allgather")


def test_predict_accepts_dicts_tuples_and_arrays():
    """predict() works on a results row's model dict and broadcasts over sizes."""
    sizes = np.array([0, 1000])
    out = predict({"ts": 2, "tw": 3, "th": 4}, 1e-6, 1e-9, 1e-7, sizes)
    assert np.allclose(out, [2e-6 + 4e-7, 2e-6 + 3e-6 + 4e-7])
    assert predict((2, 3, 4), 1e-6, 1e-9, 1e-7, 1000) == pytest.approx(out[1])


def test_no_formula_errors():
    """The papers state nothing for quad-cube rows 1-3, MC(3, m), or F_1 (D7): a clear error."""
    with pytest.raises(FormulaError, match="MC\\(2, m\\) only"):
        paper_formula(from_spec("metacube:k=2,m=1"), "bcast")
    with pytest.raises(FormulaError):
        paper_formula(from_spec("metacube:k=3,m=1"), "alltoall")
    with pytest.raises(FormulaError, match="D7"):
        paper_formula(DualCube(1), "bcast")
    with pytest.raises(DualmpiError, match="variant"):
        paper_formula(DualCube(2), "bcast", "typo")
    with pytest.raises(DualmpiError, match="collective"):
        lower_bound(8, "reduce")


@pytest.mark.parametrize("module", [dualmpi.model.formulas, dualmpi.model.fit, dualmpi.model.results,
                                    dualmpi.model.synthetic, dualmpi.model.analysis])
def test_doctests(module):
    """The numpydoc examples run."""
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
