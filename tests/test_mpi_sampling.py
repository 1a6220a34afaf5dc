"""The MPI tier's sampling (``tests/mpi/conftest.py``), run on made-up cases without MPI.

Below 8 ranks every case of a parametrized test runs; at 8 the cases that bring a pair of
parameter values no earlier case ran with; from 32 those that bring a value; from 64 the first
case.  Here the conftest's hooks see a test of three parameters as pytest would hand it over
(collection, then setup and report per case in order) at each rank count, and what ran must
cover every pair (8), every value (32) or one case (64), and skip the rest.
"""

import importlib.util
import itertools
from pathlib import Path
from types import SimpleNamespace

import pytest

CONFTEST = Path(__file__).resolve().parent / "mpi" / "conftest.py"
PARAMS = {"net": ["d2", "q3", "d3"], "dtype": ["int8", "int32", "float64", "complex128"],
          "n": [0, 1, 515]}


def _conftest(size):
    """A fresh copy of the MPI tier's conftest that believes the job has ``size`` ranks."""
    spec = importlib.util.spec_from_file_location(f"mpi_conftest_{size}", CONFTEST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._size = lambda: size
    return module


class _Item:
    """What the hooks read of a collected case."""

    def __init__(self, params):
        ids = "-".join(str(v) for v in params.values())
        self.nodeid = f"tests/mpi/test_fake_mpi.py::test_fake[{ids}]"
        self.originalname = "test_fake"
        self.module = SimpleNamespace(__name__="test_fake_mpi")
        self.callspec = SimpleNamespace(params=params)
        self.markers = []

    def add_marker(self, marker):
        self.markers.append(marker)


def _ran(size, mark="mpi and not slow", one_case=False):
    """The parameter values of the cases that run at ``size`` ranks, in order (``one_case``:
    the test named in the conftest's ``ONE_CASE_TESTS``)."""
    conf = _conftest(size)
    if one_case:
        conf.ONE_CASE_TESTS = ("tests/mpi/test_fake_mpi.py::test_fake",)
    items = [_Item(dict(zip(PARAMS, values))) for values in itertools.product(*PARAMS.values())]
    conf.pytest_collection_modifyitems(SimpleNamespace(getoption=lambda name: mark), items)
    ran = []
    for item in items:
        try:
            conf.pytest_runtest_setup(item)
        except pytest.skip.Exception:
            continue
        ran.append(item.callspec.params)
        conf.pytest_runtest_logreport(SimpleNamespace(nodeid=item.nodeid, when="call",
                                                      skipped=False))
    return ran


def _pairs(cases):
    return {((a, case[a]), (b, case[b])) for case in cases for a, b in itertools.combinations(
        sorted(case), 2)}


def test_every_case_runs_below_8_ranks_and_with_slow():
    everything = 3 * 4 * 3
    assert len(_ran(2)) == len(_ran(4)) == everything
    assert len(_ran(8, mark="mpi")) == len(_ran(32, mark="mpi")) == everything


def test_every_pair_of_values_runs_at_8_ranks():
    ran = _ran(8)
    every = [dict(zip(PARAMS, v)) for v in itertools.product(*PARAMS.values())]
    assert _pairs(ran) == _pairs(every)
    assert len(ran) < len(every)
    # a case runs only when it brings a pair no earlier case ran with
    for i, case in enumerate(ran):
        assert _pairs([case]) - _pairs(ran[:i])


def test_every_value_runs_from_32_ranks_and_one_case_from_64():
    ran = _ran(32)
    assert {(k, v) for case in ran for k, v in case.items()} == \
        {(k, v) for k, values in PARAMS.items() for v in values}
    values = [{(k, v) for k, v in case.items()} for case in ran]
    for i, case in enumerate(values):  # each brings a value no earlier case ran with
        assert case - set().union(*values[:i])
    assert len(ran) < len(_ran(8))
    assert len(_ran(64)) == 1


def test_a_test_of_one_parameter_runs_each_value_at_8_ranks():
    conf = _conftest(8)
    assert conf._units({"n": 5}, 2) == frozenset({(("n", 5),)})
    assert len(conf._units({"n": 5, "dtype": "int8", "warm": True}, 2)) == 3


def test_a_sweep_named_to_run_one_case_does_so_from_32_ranks():
    assert len(_ran(32, one_case=True)) == 1
    assert _pairs(_ran(8, one_case=True)) == _pairs(_ran(8))
    assert len(_ran(32, mark="mpi", one_case=True)) == 3 * 4 * 3
