"""``dualmpi model``: closed forms at any size, checked against the schedules, and README's table.

* every coefficient the command prints equals ``simulate(topo, coll)["model"]`` on every network
  small enough to simulate (the metacube's bcast/scatter up to MC(4,1) with 2^20 nodes);
* the metacube scatter's closed form matches the schedule round by round;
* the headline sizes (MC(3,3) with 2^27 nodes, the dual-cube F_8) come out at once;
* bad input is one ``dualmpi: error:`` line and exit code 2;
* README's table of the headline sizes is recomputed from ``dualmpi model --json``.
"""

import contextlib
import doctest
import functools
import io
import json
import math
import re
import time
from pathlib import Path

import pytest

import dualmpi.commands.model
import dualmpi.model.closed_forms
from dualmpi.cli import main
from dualmpi.collectives import build_schedule
from dualmpi.commands.model import DEFAULTS, format_coeffs, format_ratio, format_seconds
from dualmpi.model.closed_forms import (
    metacube_alltoall_hops,
    metacube_formula,
    metacube_rounds,
    metacube_scatter_messages,
    metacube_scatter_tw,
)
from dualmpi.model.formulas import PATTERNS, cut_through_formula, metacube_alltoall
from dualmpi.simulator import simulate
from dualmpi.topology import DualCube, Hypercube, MetaCube, from_spec

REPO = Path(__file__).resolve().parents[1]

#: Networks on which every collective is simulated and compared (all four patterns).
SMALL = (["hypercube:n=1", "hypercube:n=3", "hypercube:n=6", "dualcube:r=2", "dualcube:r=3",
          "dualcube:r=4", "dualcube:r=5"]
         + [f"metacube:k={k},m={m}" for k, m in
            [(0, 3), (1, 1), (1, 2), (1, 3), (1, 4), (1, 5), (2, 1), (2, 2), (3, 1)]])
#: Larger metacubes the simulator still reaches: bcast and scatter (numpy), allgather (bit sets).
LARGE = {"bcast": ["metacube:k=1,m=6", "metacube:k=2,m=3", "metacube:k=2,m=4", "metacube:k=3,m=2",
                   "metacube:k=4,m=1"],
         "scatter": ["metacube:k=1,m=6", "metacube:k=2,m=3", "metacube:k=2,m=4",
                     "metacube:k=3,m=2", "metacube:k=4,m=1"],
         "allgather": ["metacube:k=1,m=6", "metacube:k=2,m=3"]}
#: The sizes of project issue 6 ("sizes no machine can enumerate") and two smaller ones.
HEADLINE = ["metacube:k=3,m=3", "dualcube:r=8", "metacube:k=2,m=3", "dualcube:r=4"]


@functools.lru_cache(maxsize=None)
def simulated(spec, collective):
    """The schedule's coefficients ``{ts, tw, th}`` from the simulator (cached)."""
    out = simulate(from_spec(spec), collective)
    assert out["delivered"] == out["expected"]
    return out["model"]


@functools.lru_cache(maxsize=None)
def model_json(*argv):
    """``dualmpi model ARGV --json`` run in-process, parsed (cached)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["model", *argv, "--json"]) == 0
    return json.loads(buf.getvalue())


def row(report, collective):
    """The row of ``collective`` in a ``model --json`` report."""
    return next(r for r in report["rows"] if r["collective"] == collective)


@pytest.mark.parametrize("module", [dualmpi.model.closed_forms, dualmpi.commands.model])
def test_doctests(module):
    """The examples in the docstrings run."""
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


# -- the closed forms against the schedules ------------------------------------------------------
@pytest.mark.parametrize("collective", PATTERNS)
@pytest.mark.parametrize("spec", SMALL)
def test_model_equals_simulate_small(spec, collective):
    """Every coefficient of the network and of its hypercube twin equals the schedule's."""
    report = model_json(spec)
    r = row(report, collective)
    assert r["coeffs"] == simulated(spec, collective)
    assert r["hypercube_coeffs"] == simulated(report["hypercube"]["spec"], collective)


@pytest.mark.parametrize("spec,collective", [(s, c) for c, specs in LARGE.items() for s in specs])
def test_model_equals_simulate_large(spec, collective):
    """Up to MC(4,1) (2^20 nodes): the derived bcast/scatter/allgather forms equal the schedule."""
    assert row(model_json(spec), collective)["coeffs"] == simulated(spec, collective)


@pytest.mark.slow
def test_model_equals_simulate_alltoall_mc23():
    """MC(2,3), 16,384 nodes: the total exchange streamed step by step has T_M's coefficients."""
    assert row(model_json("metacube:k=2,m=3"), "alltoall")["coeffs"] == \
        simulated("metacube:k=2,m=3", "alltoall")


@pytest.mark.parametrize("k,m", [(0, 3), (1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (2, 3), (3, 1)])
def test_scatter_messages_equal_schedule_round_by_round(k, m):
    """The largest message of every scatter round is the closed form's, not only their sum."""
    schedule = build_schedule("scatter", MetaCube(k, m))
    largest = {}
    for rnd in schedule.rounds:
        for tr in rnd.transfers:
            largest[rnd.step] = max(largest.get(rnd.step, 0), len(tr.blocks))
    assert [largest[s] for s in sorted(largest)] == metacube_scatter_messages(k, m)


@pytest.mark.parametrize("spec", ["metacube:k=2,m=1", "metacube:k=3,m=1"])
@pytest.mark.parametrize("collective", ["bcast", "scatter"])
def test_coefficients_do_not_depend_on_the_root(spec, collective):
    """The metacube is vertex-transitive and the tree follows: every root costs the same."""
    topo = from_spec(spec)
    expected = simulated(spec, collective)
    for root in (1, topo.num_nodes // 3, topo.num_nodes - 1):
        assert simulate(topo, collective, root)["model"] == expected


@pytest.mark.parametrize("k", range(0, 6))
@pytest.mark.parametrize("m", range(1, 7))
def test_scatter_closed_form_is_the_sum_of_its_rounds(k, m):
    """The product form equals the round-by-round sum; the rounds are log2 p + 2^k - 1."""
    messages = metacube_scatter_messages(k, m)
    assert metacube_scatter_tw(k, m) == sum(messages)
    assert len(messages) == metacube_rounds(k, m) == m * 2 ** k + k + 2 ** k - 1


@pytest.mark.parametrize("m", range(1, 8))
def test_scatter_closed_form_reduces_to_table2(m):
    """k = 0: p - 1 (hypercube); k = 1: p + sqrt(2p) - 2 (dual-cube, erratum D3)."""
    assert metacube_scatter_tw(0, m) == 2 ** m - 1
    p = 2 ** (2 * m + 1)
    assert metacube_scatter_tw(1, m) == p + math.isqrt(2 * p) - 2


@pytest.mark.parametrize("m", range(1, 7))
def test_alltoall_hops_are_the_papers_where_they_exist(m):
    """avg_distance * p is T_M's hop term (k = 2), Table 2's (k = 1) and T_C's (k = 0)."""
    assert metacube_alltoall_hops(MetaCube(2, m)) == metacube_alltoall(m).th
    dual, cube = DualCube(m + 1), Hypercube(m)
    assert metacube_alltoall_hops(MetaCube(1, m)) == cut_through_formula(dual, "alltoall").th
    assert metacube_alltoall_hops(MetaCube(0, m)) == cut_through_formula(cube, "alltoall").th


def test_alltoall_hops_not_derived_for_k4(capsys):
    """MC(4,1): no average-distance formula, so the total exchange's t_h is null / n/a."""
    assert metacube_formula(MetaCube(4, 1), "alltoall").th is None
    r = row(model_json("metacube:k=4,m=1"), "alltoall")
    assert r["coeffs"] == {"ts": 2 ** 20 - 1, "tw": 2 ** 20 - 1, "th": None}
    assert r["time"] is None and r["ratio"] is None and "not derived" in r["source"]
    assert main(["model", "metacube:k=4,m=1"]) == 0
    out = capsys.readouterr().out
    alltoall = next(line for line in out.splitlines() if line.startswith("alltoall"))
    assert "n/a (not derived)" in alltoall


# -- the headline sizes --------------------------------------------------------------------------
@pytest.mark.parametrize("spec", HEADLINE)
def test_headline_sizes_at_once(spec, capsys):
    """All four rows, every coefficient and time present, in well under a second of work each."""
    started = time.perf_counter()
    assert main(["model", spec, "--json"]) == 0
    elapsed = time.perf_counter() - started
    report = json.loads(capsys.readouterr().out)
    topo = from_spec(spec)
    assert elapsed < 20  # 0.7 s on an idle machine (MC(3,3)'s class walks); CI machines are busy
    assert [r["collective"] for r in report["rows"]] == list(PATTERNS)
    for r in report["rows"]:
        assert None not in r["coeffs"].values() and r["time"] > 0 and r["hypercube_time"] > 0
    n = topo.num_nodes.bit_length() - 1
    assert report["network"] == {"spec": spec, "nodes": topo.num_nodes,
                                 "links_per_node": topo.degree,
                                 "links": topo.num_nodes * topo.degree // 2}
    assert report["hypercube"] == {"spec": f"hypercube:n={n}", "nodes": 2 ** n,
                                   "links_per_node": n, "links": 2 ** n * n // 2}


def test_mc33_numbers():
    """MC(3,3): 2^27 nodes, 6 links per node; 34 rounds; scatter, alltoall as derived."""
    report = model_json("metacube:k=3,m=3")
    assert report["network"]["links_per_node"] == 6 and report["network"]["nodes"] == 2 ** 27
    assert row(report, "bcast")["coeffs"] == {"ts": 34, "tw": 34, "th": 34}
    assert row(report, "scatter")["coeffs"]["tw"] == 138803384
    p = 2 ** 27
    assert row(report, "alltoall")["coeffs"] == {
        "ts": p - 1, "tw": p - 1, "th": round(MetaCube(3, 3).formulas()["avg_distance"] * p)}


def test_parameters_and_time():
    """The predicted time is a*t_s + b*m*t_w + c*t_h with the given parameters."""
    report = model_json("dualcube:r=3", "--ts", "2e-3", "--tw", "1e-8", "--th", "1e-3",
                        "--size", "65536")
    r = row(report, "scatter")
    assert r["coeffs"] == {"ts": 6, "tw": 38, "th": 6}
    assert r["time"] == pytest.approx(6 * 2e-3 + 38 * 65536 * 1e-8 + 6 * 1e-3)
    assert report["parameters"] == {"ts": 2e-3, "tw": 1e-8, "th": 1e-3, "size": 65536}


def test_text_output(capsys):
    """Without --json: the parameters, a table of both networks, one row per collective."""
    assert main(["model", "dualcube:r=8"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "t_s = 2e-06 s" in out and "m = 1024 B" in out
    assert re.search(r"^dualcube:r=8\s+32,768\s+8\s+131,072$", out, flags=re.M)
    assert re.search(r"^hypercube:n=15\s+32,768\s+15\s+245,760$", out, flags=re.M)
    for coll in PATTERNS:
        assert re.search(rf"^{coll}\s", out, flags=re.M)


@pytest.mark.parametrize("argv,words", [
    (["model", "rh:k=3,n=1"], "no closed forms"),
    (["model", "product:base=2x3"], "no closed forms"),
    (["model", "dualcube:r=1"], "r >= 2"),
    (["model", "metacube:k=2"], "metacube"),
    (["model", "nosuch:n=3"], "unknown topology"),
    (["model", "hypercube:n=3", "--ts", "-1"], "--ts"),
    (["model", "hypercube:n=3", "--tw", "fast"], "--tw"),
    (["model", "hypercube:n=3", "--th", "inf"], "--th"),
    (["model", "hypercube:n=3", "--size", "1.5"], "--size"),
    (["model", "hypercube:n=3", "--size", "-8"], "--size"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, words):
    """Bad spec, family or parameter: one ``dualmpi: error:`` line, exit 2, nothing on stdout."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dualmpi: error: ") and words in lines[0]


def test_defaults():
    """The defaults the help and README state."""
    assert DEFAULTS == {"ts": 2e-6, "tw": 1e-9, "th": 5e-8, "size": 1024}


# -- README --------------------------------------------------------------------------------------
def readme_tables():
    """The two tables of README's ``dualmpi model`` section, as lists of cell lists."""
    text = (REPO / "README.md").read_text()
    match = re.search(r"^### Predicted at sizes no machine can enumerate\n(.*?)(?=^#{2,3} |\Z)",
                      text, flags=re.M | re.S)
    assert match, "README has no model section"
    body = match.group(1)
    assert "t_s = 2 µs, t_w = 1 ns/B, t_h = 50 ns and m = 1024 B" in body
    tables, current = [], None
    for line in body.splitlines():
        if line.startswith("|"):
            if current is None:
                current = []
                tables.append(current)
            if "---" not in line:
                current.append([c.strip() for c in line.strip().strip("|").split("|")])
        else:
            current = None
    assert len(tables) == 2
    return [t[1:] for t in tables]  # without the headers


def test_readme_model_table_is_the_commands_output():
    """README's networks and predictions equal ``dualmpi model SPEC --json`` with the defaults."""
    networks, predictions = readme_tables()
    specs = [cells[0].strip("`") for cells in networks]
    assert specs == ["metacube:k=3,m=3", "dualcube:r=8", "metacube:k=2,m=3"]
    for cells in networks:
        report = model_json(cells[0].strip("`"))
        net, cube = report["network"], report["hypercube"]
        assert cells[1:] == [f"{net['nodes']:,}", str(net["links_per_node"]), f"{net['links']:,}",
                             f"`{cube['spec']}`", str(cube["links_per_node"]),
                             f"{cube['links']:,}"]
    assert [(c[0].strip("`"), c[1]) for c in predictions] == \
        [(s, coll) for s in specs for coll in PATTERNS]
    for cells in predictions:
        r = row(model_json(cells[0].strip("`")), cells[1])
        assert cells[2:] == [format_coeffs(r["coeffs"]), format_seconds(r["time"]),
                             format_coeffs(r["hypercube_coeffs"]),
                             format_seconds(r["hypercube_time"]), format_ratio(r["ratio"])]


def test_model_reports_link_sharing(capsys):
    """Issue 15: the total exchange's link sharing as its own figure, from the simulated schedule."""
    assert main(["model", "metacube:k=2,m=1", "--size", "65536", "--json"]) == 0
    rows = {r["collective"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    sharing = rows["alltoall"]["link_sharing"]
    assert (sharing["steps_shared"], sharing["steps"], sharing["max"]) == (51, 63, 4)
    assert sharing["time"] > rows["alltoall"]["time"]
    assert rows["bcast"]["link_sharing"]["max"] == 1
    assert main(["model", "metacube:k=3,m=3"]) == 0
    assert "n/a (not simulated)" in capsys.readouterr().out
