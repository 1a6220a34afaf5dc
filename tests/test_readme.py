"""README and the command line agree with the code: the model table, the tour, every --help.

* README's model-prediction table is recomputed from the schedules (``simulate``) and the
  stated link parameters;
* every ``dualmpi`` subcommand the tour uses exists, and every subcommand's ``--help`` ends with
  an ``example:`` line.
"""

import re
from pathlib import Path

import pytest

from dualmpi.cli import COMMANDS, build_parser
from dualmpi.simulator import simulate
from dualmpi.topology import from_spec

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
TS, TW, TH = 2e-3, 1e-8, 1e-3  # the parameters README states for its table
SIZES = (8, 1024, 65536)


def section(title, level="##"):
    """The text of README's section ``title``."""
    match = re.search(rf"^{level} {re.escape(title)}\n(.*?)(?=^#{{2,3}} |\Z)", README,
                      flags=re.M | re.S)
    assert match, f"README has no '{level} {title}' section"
    return match.group(1)


def model_rows():
    """The rows of README's model-prediction table, as lists of cell texts."""
    text = section("What the model predicts for the headline networks", "###")
    assert "t_s = 2 ms, t_w = 10 ns/B, t_h = 1 ms" in text
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    return rows[1:]


def predicted(spec, collective):
    """(coefficients, times in ms at SIZES) of ``collective`` on ``spec``."""
    model = simulate(from_spec(spec), collective)["model"]
    coeffs = (model["ts"], model["tw"], model["th"])
    return coeffs, [(coeffs[0] * TS + coeffs[1] * m * TW + coeffs[2] * TH) * 1e3 for m in SIZES]


def test_readme_model_table_is_the_schedules_model():
    """Each row: Q_5's and D_3's coefficients and predicted times, and their ratio at 64 KiB."""
    rows = model_rows()
    assert [r[0] for r in rows] == ["bcast", "scatter", "allgather", "alltoall"]
    for name, q_coeffs, q_times, d_coeffs, d_times, ratio in rows:
        for spec, coeffs_text, times_text in (("hypercube:n=5", q_coeffs, q_times),
                                              ("dualcube:r=3", d_coeffs, d_times)):
            coeffs, times = predicted(spec, name)
            assert coeffs_text == ", ".join(map(str, coeffs)), (spec, name)
            assert times_text == " / ".join(f"{t:.1f}" for t in times), (spec, name)
        q = predicted("hypercube:n=5", name)[1][-1]
        d = predicted("dualcube:r=3", name)[1][-1]
        assert ratio == f"{d / q:.2f}", name


def test_tour_uses_existing_subcommands():
    """Every ``dualmpi X`` in the 30-second tour is a registered subcommand."""
    used = re.findall(r"dualmpi (\w+) ", section("A 30-second tour"))
    names = set(COMMANDS)
    assert used and set(used) <= names


def subparsers():
    """``{name: parser}`` of every registered subcommand."""
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return dict(action.choices)


@pytest.mark.parametrize("name", sorted(subparsers()))
def test_every_subcommand_help_has_an_example(name):
    """``dualmpi NAME --help`` ends with an ``example: dualmpi NAME ...`` line."""
    help_text = subparsers()[name].format_help()
    examples = re.findall(r"^example: (.*)$", help_text, flags=re.M)
    assert examples, f"dualmpi {name} --help has no example"
    assert f"dualmpi {name}" in help_text.split("example:", 1)[1].replace("\n", " ")
