"""Topology spec strings (``name:key=value,...``) and node-id checks: what is accepted, and the
one-line errors for everything else."""

import numpy as np
import pytest

from dualmpi.errors import DualmpiError, NodeError, SpecError
from dualmpi.topology import DualCube, Hypercube, MetaCube, from_spec, parse_spec


@pytest.mark.parametrize("spec, name, params", [
    ("hypercube:n=5", "hypercube", {"n": 5}),
    ("dualcube:r=3", "dualcube", {"r": 3}),
    ("metacube:k=2,m=3", "metacube", {"k": 2, "m": 3}),
    ("metacube:m=3,k=2", "metacube", {"m": 3, "k": 2}),
    ("  DualCube : r = 3  ", "dualcube", {"r": 3}),
    ("METACUBE:k=0, m=4", "metacube", {"k": 0, "m": 4}),
    ("dualcube:r=+3,", "dualcube", {"r": 3}),
    ("hypercube:n=007", "hypercube", {"n": 7}),
])
def test_parse_spec_accepts(spec, name, params):
    """Names are case-insensitive; blanks around names, keys, values and commas are ignored."""
    assert parse_spec(spec) == (name, params)


@pytest.mark.parametrize("spec, expected", [
    ("hypercube:n=0", Hypercube(0)),
    ("hypercube:n=62", Hypercube(62)),
    (" DualCube:r=3", DualCube(3)),
    ("metacube:m=3,k=2", MetaCube(2, 3)),
    ("metacube:k=0,m=1", MetaCube(0, 1)),
    ("metacube:k=3,m=7", MetaCube(3, 7)),  # 59-bit addresses: the largest metacube with k = 3
])
def test_from_spec_builds_the_topology(spec, expected):
    """``from_spec`` returns the same network as the constructor, with a canonical spec."""
    topo = from_spec(spec)
    assert topo == expected and type(topo) is type(expected)
    assert hash(topo) == hash(expected)
    assert from_spec(topo.spec) == topo
    assert topo.spec == expected.spec


def test_canonical_spec_orders_parameters():
    """The canonical spec lists parameters in the documented order whatever the input order."""
    assert from_spec("metacube:m=3,k=2").spec == "metacube:k=2,m=3"
    assert repr(DualCube(3)) == "<DualCube dualcube:r=3>"


@pytest.mark.parametrize("spec, words", [
    ("", ["empty", "dualcube:r=R"]),
    ("   ", ["empty"]),
    (None, ["empty"]),
    ("torus:n=3", ["unknown topology", "'torus'", "hypercube:n=N", "dualcube:r=R", "metacube:k=K,m=M"]),
    (":r=3", ["unknown topology"]),
    ("dualcube", ["missing parameter r", "dualcube:r=R"]),
    ("dualcube:", ["missing parameter r"]),
    ("metacube:k=2", ["missing parameter m", "metacube:k=K,m=M"]),
    ("metacube:", ["missing parameter k, m"]),
    ("dualcube:r=3,s=1", ["unknown parameter s", "dualcube:r=R"]),
    ("dualcube:R=3", ["missing parameter r"]),
    ("hypercube:n=3,n=4", ["parameter n given twice"]),
    ("dualcube:r=x", ["malformed parameter", "'r=x'", "key=integer"]),
    ("dualcube:r=1.5", ["malformed parameter", "'r=1.5'"]),
    ("dualcube:r", ["malformed parameter"]),
    ("dualcube:=3", ["malformed parameter"]),
    ("metacube:k=2 m=3", ["malformed parameter"]),
    ("dualcube:r=3:4", ["malformed parameter"]),
])
def test_parse_spec_errors(spec, words):
    """Malformed specs raise SpecError whose message names the problem (and the usage)."""
    with pytest.raises(SpecError) as exc:
        parse_spec(spec)
    message = str(exc.value)
    assert "\n" not in message
    for word in words:
        assert word in message


@pytest.mark.parametrize("spec, words", [
    ("hypercube:n=-1", ["n=-1 out of range", ">= 0"]),
    ("dualcube:r=0", ["r=0 out of range", ">= 1"]),
    ("dualcube:r=-3", ["r=-3 out of range"]),
    ("metacube:k=-1,m=2", ["k=-1 out of range", ">= 0"]),
    ("metacube:k=1,m=0", ["m=0 out of range", ">= 1"]),
    ("hypercube:n=63", ["63-bit addresses are too large", "62"]),
    ("dualcube:r=32", ["63-bit addresses are too large"]),
    ("dualcube:r=40", ["79-bit addresses are too large"]),
    ("metacube:k=3,m=8", ["67-bit addresses are too large"]),
    ("metacube:k=6,m=1", ["too large"]),
    ("metacube:k=100,m=1", ["too large"]),
])
def test_from_spec_range_errors(spec, words):
    """Out-of-range parameters and networks beyond 62-bit addresses raise SpecError."""
    with pytest.raises(SpecError) as exc:
        from_spec(spec)
    for word in words:
        assert word in str(exc.value)


@pytest.mark.parametrize("cls, args", [
    (Hypercube, (True,)),
    (Hypercube, (3.0,)),
    (DualCube, ("3",)),
    (MetaCube, (2, None)),
])
def test_constructors_reject_non_integers(cls, args):
    """Parameters given in Python must be ints (bool and float are refused)."""
    with pytest.raises(SpecError, match="must be an integer"):
        cls(*args)


def test_spec_errors_are_value_errors_of_the_dualmpi_family():
    """The CLI turns DualmpiError into one line; library callers can catch ValueError."""
    assert issubclass(SpecError, DualmpiError) and issubclass(SpecError, ValueError)
    assert issubclass(NodeError, DualmpiError) and issubclass(NodeError, ValueError)


def test_parse_spec_rejects_blank_inside_value():
    """``hypercube:n=1 2`` is two numbers, not twelve."""
    with pytest.raises(SpecError):
        parse_spec("hypercube:n=1 2")


# -- node ids ------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["hypercube:n=3", "dualcube:r=2", "metacube:k=2,m=1"])
@pytest.mark.parametrize("bad, words", [
    (-1, ["node -1 out of range"]),
    ("p", ["out of range"]),
    (1.5, ["must be an integer", "1.5"]),
    ("x", ["must be an integer", "'x'"]),
    (None, ["must be an integer"]),
    (True, ["must be an integer"]),
    (np.float64(2.5), ["must be an integer"]),
])
def test_check_node_errors(spec, bad, words):
    """Ids outside 0..p-1 and non-integers raise NodeError naming the id (and the range)."""
    topo = from_spec(spec)
    p = topo.num_nodes
    if isinstance(bad, str) and bad == "p":
        bad = p
        words = [f"node {p} out of range", f"0..{p - 1}"]
    with pytest.raises(NodeError) as exc:
        topo.check_node(bad)
    for word in words:
        assert word in str(exc.value)


@pytest.mark.parametrize("good", [0, 7, np.int64(5), "6"])
def test_check_node_accepts(good):
    """Integers in range (Python, numpy, or decimal text) come back as a Python int."""
    out = Hypercube(3).check_node(good)
    assert out == int(good) and type(out) is int
