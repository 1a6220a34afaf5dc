"""Issue 14 (pure tier): estimate-and-refuse, bounded embeddings and inputs, clear one-line errors.

Commands that could exhaust memory or run for hours estimate what they need first and refuse
with one line that says how much (``dualmpi.resources``); the available memory is patched to a
fixed figure so the verdicts do not depend on the machine.  Runs that must stay small are
started as subprocesses under an address-space limit (``RLIMIT_AS``), so a regression fails
with a MemoryError instead of taking the machine's memory.
"""

import doctest
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

import dualmpi.resources as res
from dualmpi.cli import main

GiB = res.GiB
#: Address-space limit of the bounded subprocesses (numpy and matplotlib fit in well under it).
RLIMIT = 1536 * res.MiB


def run_limited(args, timeout=60):
    """Run ``python -m dualmpi ARGS`` with at most :data:`RLIMIT` of address space."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (RLIMIT, RLIMIT))

    return subprocess.run([sys.executable, "-m", "dualmpi", *args], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=limit)


def one_error(capsys, argv):
    """Run the CLI in-process; return its one ``dualmpi: error:`` line (exit 2, nothing on stdout)."""
    code = main(argv)
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert code == 2 and out == "" and len(lines) == 1, (code, out, err)
    assert lines[0].startswith("dualmpi: error: "), err
    return lines[0]


@pytest.fixture
def machine_16g(monkeypatch):
    """Pretend the machine has 16 GiB available."""
    monkeypatch.setattr(res, "available_memory", lambda: 16 * GiB)


# -- dualmpi.resources ----------------------------------------------------------------------------
def test_resources_doctests():
    result = doctest.testmod(res)
    assert result.attempted >= 6 and result.failed == 0


def test_meminfo_and_cgroup_parsing(tmp_path):
    """MemAvailable is read in kB; a cgroup limit caps it; 'max' means no limit."""
    info = tmp_path / "meminfo"
    info.write_text("MemTotal:  100 kB\nMemFree:  10 kB\nMemAvailable:   2048 kB\n")
    assert res._meminfo_available(info) == 2048 * 1024
    assert res._meminfo_available(tmp_path / "missing") is None
    (tmp_path / "memory.max").write_text("max\n")
    assert res._cgroup_headroom(tmp_path) is None
    (tmp_path / "memory.max").write_text("1000000\n")
    (tmp_path / "memory.current").write_text("400000\n")
    assert res._cgroup_headroom(tmp_path) == 600000


@pytest.mark.parametrize("needed", [float("nan"), float("inf"), 13 * GiB])
def test_require_memory_refuses(needed):
    with pytest.raises(res.ResourceError, match=r"needs .*, the machine has 16 GiB available"):
        res.require_memory(needed, "x", available=16 * GiB)


# -- embed: the requested nodes only, or a clear refusal ------------------------------------------
def test_embed_array_on_dc31_computes_four_nodes_only():
    """``embed dualcube:r=31 --array 4`` (2^61 nodes) in well under 1.5 GiB and a few seconds."""
    proc = run_limited(["embed", "dualcube:r=31", "--array", "4", "--json"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert '"nodes": [\n    0,\n    1,\n    3,\n    2\n  ]' in proc.stdout


def test_embed_ring_on_dc31_is_bounded():
    proc = run_limited(["embed", "dualcube:r=31", "--ring", "16"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "every edge a link: yes" in proc.stdout


@pytest.mark.parametrize("argv, pattern", [
    (["dualcube:r=31", "--array", str(1 << 61)], r"--array 2305843009213693952 needs \S+ [EZ]iB"),
    (["dualcube:r=31", "--ring", str(1 << 40)], r"--ring 1099511627776 needs \S+ [TP]iB"),
    (["dualcube:r=13", "--cycles"], r"--cycles \(6 cycles of 33,554,432 nodes\) needs \S+ GiB"),
    (["dualcube:r=11", "--cycles"], r"--cycles .* needs about \S+ h \(limit 10 min\)"),
    (["dualcube:r=11", "--split", "all"], r"--split all needs about \S+ h \(limit 10 min\)"),
    (["dualcube:r=20", "--split", "1,1"], r"--split 1,1 needs \S+ [GTP]iB"),
    (["rh:k=20,n=3", "--hypercube"], r"--hypercube needs \S+ GiB"),
])
def test_embed_refuses_what_cannot_fit_or_finish(capsys, machine_16g, argv, pattern):
    line = one_error(capsys, ["embed", *argv])
    assert re.search(pattern, line), line


# -- simulate: estimate before allocating ----------------------------------------------------------
def test_simulate_schedule_2048_refused_when_memory_is_short(capsys, monkeypatch):
    """2,048-node schedule replay needs about 7 GiB (measured 6.5 GB): refused on a 4 GiB machine."""
    monkeypatch.setattr(res, "available_memory", lambda: 4 * GiB)
    line = one_error(capsys, ["simulate", "hypercube:n=11", "--collective", "alltoall",
                              "--method", "schedule"])
    assert re.search(r"simulate alltoall on hypercube:n=11 \(2,048 nodes, schedule method\) "
                     r"needs 7\.\d+ GiB, the machine has 4 GiB available", line), line


def test_simulate_stream_32768_refused_when_memory_is_short(capsys, monkeypatch):
    """The stream method's 32,768 x 32,768 delivery table is 1 GiB."""
    monkeypatch.setattr(res, "available_memory", lambda: 1 * GiB)
    line = one_error(capsys, ["simulate", "dualcube:r=8", "--collective", "alltoall",
                              "--method", "stream"])
    assert re.search(r"\(32,768 nodes, stream method\) needs 1\.\d+ GiB", line), line


def test_simulate_estimates_follow_the_measurements():
    """The estimates of the two runs the constants come from are within 25% of the measurements."""
    from dualmpi.simulate_cost import estimate
    from dualmpi.topology import from_spec

    _, need, secs = estimate(from_spec("hypercube:n=11"), "alltoall", method="schedule")
    assert abs(need / 6.5e9 - 1) < 0.25 and abs(secs / 186 - 1) < 0.25
    _, need, secs = estimate(from_spec("dualcube:r=8"), "alltoall", method="stream")
    assert abs(need / 1.07e9 - 1) < 0.25 and abs(secs / 138 - 1) < 0.25


@pytest.mark.parametrize("spec, collective, method, measured_s, measured_bytes", [
    ("hypercube:n=20", "bcast", "vector", 3.7, 110e6),
    ("hypercube:n=15", "allgather", "vector", 30.5, 1.2e9),
    ("hypercube:n=13", "allgather", "schedule", 125.6, 9.0e9),
])
def test_other_estimates_do_not_refuse_what_runs(machine_16g, spec, collective, method,
                                                 measured_s, measured_bytes):
    """Runs measured to finish are accepted, and estimated within a factor 2 of the measurement."""
    from dualmpi.simulate_cost import check_simulation, estimate
    from dualmpi.topology import from_spec

    topo = from_spec(spec)
    check_simulation(topo, collective, method=method)
    _, need, secs = estimate(topo, collective, method=method)
    assert 0.5 < need / measured_bytes < 2 and 0.5 < secs / measured_s < 2, (need, secs)


# -- fit and report: bounded inputs, known figure formats -------------------------------------------
@pytest.mark.parametrize("command", ["fit", "report"])
def test_results_file_size_is_bounded(command):
    """``fit /dev/zero`` used to read until the OOM killer came."""
    proc = run_limited([command, "/dev/zero"], timeout=30)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr == ("dualmpi: error: /dev/zero: results file larger than 64 MiB (the limit); "
                           "not a dualmpi bench results file\n")


def test_report_plot_unknown_format(capsys, tmp_path):
    line = one_error(capsys, ["report", "unused.json", "--plot", str(tmp_path / "x.xyz")])
    assert "unknown figure format 'xyz'; use one of " in line and ".png" in line


# -- no MPI library: one line saying how to get one -------------------------------------------------
class _NoMPI:
    """A meta-path finder that fails the way mpi4py does when libmpi cannot be loaded."""

    def find_spec(self, name, path=None, target=None):
        if name == "mpi4py.MPI":
            raise RuntimeError("cannot load MPI library\nlibmpi.so.40: cannot open shared object file")
        return None


@pytest.mark.parametrize("failure", ["no-libmpi", "no-mpi4py"])
def test_run_without_mpi_says_how_to_get_one(capsys, monkeypatch, failure):
    """``pip install .`` without the mpi extra: ``dualmpi run`` used to end in a RuntimeError traceback."""
    import mpi4py

    monkeypatch.delitem(sys.modules, "mpi4py.MPI", raising=False)
    monkeypatch.delattr(mpi4py, "MPI", raising=False)
    if failure == "no-libmpi":
        monkeypatch.setattr(sys, "meta_path", [_NoMPI(), *sys.meta_path])
    else:
        monkeypatch.setitem(sys.modules, "mpi4py", None)
    line = one_error(capsys, ["run", "dualcube:r=2", "--sizes", "8", "--iters", "1"])
    assert 'no MPI library could be loaded; install one with pip install "dualmpi[mpi]"' in line
    assert "system MPI" in line


def test_unrelated_runtime_errors_are_not_hidden(monkeypatch):
    monkeypatch.setattr("dualmpi.commands.info.main", lambda args: (_ for _ in ()).throw(
        RuntimeError("something else")))
    with pytest.raises(RuntimeError, match="something else"):
        main(["info", "dualcube:r=2"])


def test_license_declared():
    """BSD-3-Clause, as mpi4py: a LICENSE file and the SPDX expression in pyproject.toml."""
    tomllib = pytest.importorskip("tomllib")
    root = Path(__file__).resolve().parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["license"] == "BSD-3-Clause" and project["license-files"] == ["LICENSE"]
    text = (root / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License\n\nCopyright (c) 2026, the dualmpi developers\n")
    assert "Neither the name of the copyright holder" in text


# -- Unicode digits: refused in specs ------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["dualcube:r=\u0663", "dualcube:r=\uff13", "hypercube:n=\u00b2",
                                  "metacube:k=2,m=\u0968"])
def test_non_ascii_digits_in_specs_are_refused(capsys, spec):
    line = one_error(capsys, ["info", spec])
    assert "has the non-ASCII digit" in line and "write numbers with the digits 0-9" in line
