"""Every method of ``MPI.Intracomm`` has a status, ``dualmpi.Comm`` keeps it and docs/api.md says it."""

from pathlib import Path

import pytest

import dualmpi
from dualmpi import support

MPI = pytest.importorskip("mpi4py.MPI")

#: Attributes a ``dualmpi.Comm`` sets on itself (not class attributes).
INSTANCE = {"rank", "size", "topology"}


def test_every_intracomm_method_has_a_status():
    names = {m for m in dir(MPI.Intracomm) if not m.startswith("_")}
    assert names == set(support.STATUS)


@pytest.mark.parametrize("name", sorted(support.STATUS))
def test_comm_keeps_the_status(name):
    """Carried methods exist; an unsupported one raises UnsupportedError naming it and why."""
    status, note = support.STATUS[name]
    if status != "unsupported":
        assert name in INSTANCE or hasattr(dualmpi.Comm, name), name
        return
    assert not hasattr(dualmpi.Comm, name)
    with pytest.raises(support.UnsupportedError, match=f"dualmpi.Comm.{name} is not supported: "):
        dualmpi.Comm.__getattr__(object(), name)


def test_docs_show_the_table():
    text = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()
    assert support.markdown() in text
