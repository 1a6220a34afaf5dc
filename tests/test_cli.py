"""The ``dualmpi`` command line: ``info`` and ``route`` output, and one-line errors with exit code 2."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dualmpi.cli import main

REPO = Path(__file__).resolve().parents[1]


def run_json(capsys, *argv):
    """Run ``dualmpi argv --json`` in-process; return the parsed JSON object."""
    assert main([*argv, "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return json.loads(out)


# -- info ----------------------------------------------------------------------------------------
def test_info_dualcube_json(capsys):
    """F_3: 32 nodes, degree 3, 48 links, diameter 6, average distance 3.25, bisection 8; BFS-checked."""
    out = run_json(capsys, "info", "dualcube:r=3")
    assert out["spec"] == "dualcube:r=3"
    assert (out["nodes"], out["degree"], out["links"], out["diameter"]) == (32, 3, 48, 6)
    assert out["avg_distance"] == 3.25
    assert out["bisection_width"] == 8
    assert out["hypercube_links"] == 80
    assert out["bfs_verified"] is True
    assert "bfs" not in out


def test_info_metacube_json_matches_paper_section2(capsys):
    """MC(2,3): 16384 nodes of degree 5 use 40960 links where Q_14 needs 114688 (paper, Sec. 2)."""
    out = run_json(capsys, "info", "metacube:k=2,m=3")
    assert (out["nodes"], out["degree"], out["links"]) == (16384, 5, 40960)
    assert out["hypercube_links"] == 114688
    assert out["diameter"] == 16
    assert out["bfs_verified"] is True  # one BFS: MC(k, m) is vertex-transitive (checked)
    assert out["diameter_source"] == "bfs" and "1 sources" in out["bfs_method"]
    assert "bisection_width" not in out  # no formula in the paper


@pytest.mark.parametrize("spec", ["hypercube:n=0", "dualcube:r=1", "metacube:k=3,m=1", "metacube:k=1,m=5"])
def test_info_bfs_verifies_small_networks(capsys, spec):
    """Every network up to 4096 nodes is reported as verified by BFS."""
    assert run_json(capsys, "info", spec)["bfs_verified"] is True


def test_info_table(capsys):
    """Without --json: a header line with spec and reference, then one row per property."""
    assert main(["info", "hypercube:n=3"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    assert lines[0].startswith("hypercube:n=3  [")
    rows = dict(line.split(None, 1) for line in lines[1:])
    assert rows == {
        "nodes": "8",
        "degree": "3",
        "links": "12",
        "diameter": "3",
        "avg_distance": "1.5",
        "avg_distance_over_p": "1.5",
        "avg_distance_over_p_minus_1": "1.71429",
        "bisection_width": "4",
        "hypercube_links": "12",
        "bfs_verified": "yes",
        "bfs_method": "all pairs",
        "links_source": "bfs",
        "diameter_source": "bfs",
        "avg_distance_source": "bfs",
    }


# -- route ---------------------------------------------------------------------------------------
def test_route_metacube_json(capsys):
    """MC(2,2) 0 -> 1023: 12 hops, the diameter, and shortest."""
    out = run_json(capsys, "route", "metacube:k=2,m=2", "0", "1023")
    path = out["path"]
    assert (path[0], path[-1]) == (0, 1023)
    assert out["hops"] == len(path) - 1 == 12
    assert out["distance"] == 12 and out["shortest"] is True
    assert out["addresses"][0] == "(00,00,00,00,00)"
    assert out["addresses"][-1] == "(11,11,11,11,11)"
    assert len(out["dimensions"]) == 12 and set(out["dimensions"]) <= {1, 2, 3, 4}


def test_route_accepts_binary_and_hex_ids(capsys):
    """Node ids may be given as 0b... or 0x...."""
    out = run_json(capsys, "route", "dualcube:r=3", "0b00000", "0x4")
    assert out["path"] == [0, 16, 20, 4]
    assert out["addresses"] == ["(0,00,00)", "(1,00,00)", "(1,01,00)", "(0,01,00)"]
    assert out["dimensions"] == [3, 1, 3]  # bit 2 is node-id bit 1 in class 1


def test_route_table(capsys):
    """Without --json: a header, one row per node with its address and link, then the hop count."""
    assert main(["route", "dualcube:r=3", "0", "27"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["hop", "node", "address", "via"]
    assert set(lines[1]) <= {"-", " "}
    rows = [line.split() for line in lines[2:-1]]
    assert rows == [
        ["0", "0", "(0,00,00)"],
        ["1", "1", "(0,00,01)", "dim", "1"],
        ["2", "3", "(0,00,11)", "dim", "2"],
        ["3", "19", "(1,00,11)", "dim", "3"],
        ["4", "27", "(1,10,11)", "dim", "2"],
    ]
    assert lines[-1] == "4 hops (shortest distance 4)"


# -- errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, words", [
    (["info", "torus:n=3"], ["unknown topology"]),
    (["info", "metacube:k=2"], ["missing parameter m"]),
    (["info", "dualcube:r=0"], ["out of range"]),
    (["info", "dualcube:r=40"], ["too large"]),
    (["route", "dualcube:r=2", "0", "8"], ["node 8 out of range"]),
    (["route", "dualcube:r=2", "-1", "3"], ["node -1 out of range"]),
    (["route", "hypercube:n=x", "0", "1"], ["malformed parameter"]),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, words):
    """A DualmpiError becomes exit code 2 and one stderr line ``dualmpi: error: ...``, no traceback."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dualmpi: error: ")
    for word in words:
        assert word in lines[0]


@pytest.mark.parametrize("argv", [
    ["route", "dualcube:r=2", "0", "x"],
    ["route", "dualcube:r=2", "1.5", "0"],
    ["route", "dualcube:r=2", "0"],
    ["info"],
    ["frobnicate"],
])
def test_argparse_errors_exit_2(capsys, argv):
    """Errors argparse catches (non-integer node, missing argument) exit 2 with a usage message."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert "error:" in err.splitlines()[-1]
    assert "Traceback" not in err


# -- as a process --------------------------------------------------------------------------------
def run_module(*argv):
    """Run ``python -m dualmpi argv`` from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "dualmpi", *argv],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )


def test_module_entry_point_json():
    """``python -m dualmpi info dualcube:r=2 --json`` exits 0 and prints one JSON object."""
    proc = run_module("info", "dualcube:r=2", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["nodes"], out["degree"], out["links"], out["diameter"]) == (8, 2, 8, 4)
    assert out["bfs_verified"] is True


def test_module_entry_point_bad_input():
    """A bad spec: exit code 2, one error line, no traceback."""
    proc = run_module("info", "dualcube:r=0")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("dualmpi: error: ") and proc.stderr.count("\n") == 1
    assert proc.stdout == ""
