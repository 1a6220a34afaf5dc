"""Launch scripts and hostfiles: syntax, the one Open MPI env file, a real sweep, Slurm's srun.

Every script in ``launch/`` must parse (``bash -n``), start with ``set -eu`` and, when it starts
MPI jobs, source ``launch/ompi-env.sh`` rather than setting those variables itself.  The sweep
runs for real on two 8-node networks; the Slurm script runs with a stand-in ``srun`` that starts
the same command under the venv's ``mpiexec``.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAUNCH = REPO / "launch"
MPIEXEC = Path(sys.executable).parent / "mpiexec"
SCRIPTS = sorted(p for p in LAUNCH.iterdir() if p.is_file())
TIMEOUT = 240  # seconds for one script run (the first may install the venv)

needs_mpiexec = pytest.mark.skipif(
    not MPIEXEC.exists(), reason=f"no mpiexec next to {sys.executable} (the Open MPI wheel's)")


def ompi_env_names():
    """The variable names launch/ompi-env.sh exports."""
    text = (LAUNCH / "ompi-env.sh").read_text()
    return re.findall(r"^export (\w+)=", text, flags=re.M)


def code_lines(path):
    """The script's lines that are not comments or blank."""
    return [line for line in path.read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def launches_mpi(path):
    """True when the script starts MPI jobs itself (mpiexec, srun or launch/run)."""
    text = "\n".join(code_lines(path))
    return bool(re.search(r"\$MPIEXEC\b|^\s*srun\b|launch/run\"", text, flags=re.M))


def run(cmd, env=None, cwd=REPO, timeout=TIMEOUT):
    """Run a command, capturing text output; return the CompletedProcess."""
    return subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_parses(script):
    """``bash -n`` accepts every launch script."""
    proc = run(["bash", "-n", script], timeout=30)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("script", [p for p in SCRIPTS if p.name != "ompi-env.sh"],
                         ids=lambda p: p.name)
def test_script_is_strict_and_executable(script):
    """Each script has a bash shebang, ``set -eu`` as its first command, and the x bit."""
    lines = script.read_text().splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    assert code_lines(script)[0] == "set -eu"
    assert os.access(script, os.X_OK), f"{script.name} is not executable (chmod +x)"


@pytest.mark.parametrize("script", [p for p in SCRIPTS if launches_mpi(p)], ids=lambda p: p.name)
def test_mpi_scripts_source_the_one_env_file(script):
    """Scripts that start MPI jobs source launch/ompi-env.sh and take the launcher from the env."""
    text = "\n".join(code_lines(script))
    assert re.search(r'^\s*\. "\$ROOT/launch/ompi-env\.sh"$', text, flags=re.M)
    if re.search(r'"?\$MPIEXEC"? ', text):
        assert "MPIEXEC=${MPIEXEC:-" in text
    if re.search(r'"?\$MPIEXEC"? |^\s*srun ', text, flags=re.M):
        assert "${MPIEXEC_ARGS:-}" in text
        assert re.search(r"\b(NP|np|NPS)=\$\{(NP|NPS):-", text)  # launch/test: NPS


def test_no_script_copies_the_env_file():
    """Only launch/ompi-env.sh sets its variables; no other script or CI file assigns them."""
    names = ompi_env_names()
    assert {"OMPI_ALLOW_RUN_AS_ROOT", "MPIEXEC_TIMEOUT"} <= set(names)
    for path in [*SCRIPTS, REPO / ".ci" / "run"]:
        if path.name == "ompi-env.sh":
            continue
        for line in code_lines(path):
            bare = re.sub(r'"[^"]*"', '""', line)  # text inside quotes only mentions a name
            for name in names:
                assert not re.search(rf"(^|[\s;]){name}=", bare), f"{path.name} sets {name}: {line}"


@pytest.mark.parametrize("script", ["run", "sweep", "multihost", "netns-hosts"])
def test_help(script):
    """``--help`` prints the usage (the header comment) and exits 0."""
    proc = run(["bash", LAUNCH / script, "--help"], timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "Usage" in proc.stdout and "set -eu" not in proc.stdout


@needs_mpiexec
def test_sweep_writes_one_results_folder(tmp_path):
    """A tiny sweep: two topologies x one size x one collective -> JSON, log and index.tsv."""
    out = tmp_path / "sweep"
    proc = run(["bash", LAUNCH / "sweep", "-o", out, "-s", "64", "-c", "allgather",
                "dualcube:r=2", "hypercube:n=3", "--", "--iters", "1", "--warmup", "0"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[1/2] dualcube:r=2 allgather sizes 64 ... ok" in proc.stdout
    lines = (out / "index.tsv").read_text().splitlines()
    assert lines[0].split("\t") == ["spec", "collective", "sizes", "nodes", "exit", "json", "log"]
    rows = [dict(zip(lines[0].split("\t"), line.split("\t"))) for line in lines[1:]]
    assert [(r["spec"], r["collective"], r["sizes"], r["nodes"], r["exit"]) for r in rows] == [
        ("dualcube:r=2", "allgather", "64", "8", "0"),
        ("hypercube:n=3", "allgather", "64", "8", "0")]
    for row in rows:
        result = json.loads((out / row["json"]).read_text())
        assert result["meta"]["spec"] == row["spec"] and result["meta"]["ranks"] == 8
        assert [(r["collective"], r["size"], r["verified"]) for r in result["rows"]] == [
            ("allgather", 64, True)]
        assert "results written to" in (out / row["log"]).read_text()
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["index.tsv"] + [r["json"] for r in rows] + [r["log"] for r in rows])


def test_sweep_checks_specs_first(tmp_path):
    """A bad spec stops the sweep before any run, with a one-line error."""
    proc = run(["bash", LAUNCH / "sweep", "-o", tmp_path / "s", "dualcube:r=2", "nosuch:x=1"])
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("launch/nodes: error: unknown topology 'nosuch'")
    assert not (tmp_path / "s").exists()


def sbatch_header(path):
    """The ``#SBATCH`` options of a batch script, as Slurm reads them (before the first command)."""
    options = []
    for line in path.read_text().splitlines()[1:]:
        if line.startswith("#SBATCH"):
            options.append(line.split(None, 1)[1])
        elif line.strip() and not line.startswith("#"):
            break
    return options


def test_sbatch_header_and_srun_line():
    """#SBATCH --nodes/--ntasks-per-node/--time; one srun line running dualmpi under mpi4py."""
    path = LAUNCH / "slurm.sbatch"
    options = sbatch_header(path)
    names = [opt.split("=")[0] for opt in options]
    assert {"--nodes", "--ntasks-per-node", "--time"} <= set(names)
    values = dict(opt.split("=", 1) for opt in options)
    assert int(values["--nodes"]) * int(values["--ntasks-per-node"]) == 32  # dualcube:r=3
    sruns = [line for line in code_lines(path) if re.match(r"\s*(exec\s+)?srun\b", line)]
    assert len(sruns) == 1
    assert re.search(r'--ntasks="\$NP" python -m mpi4py -m dualmpi run "\$spec" "\$@"$', sruns[0])


@needs_mpiexec
def test_sbatch_script_runs_under_a_stand_in_srun(tmp_path):
    """With a stand-in srun (mpiexec underneath), the batch script runs a verified job."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "srun").write_text(
        "#!/bin/sh\n"
        'echo "srun $*" >"$SRUN_LOG"\n'
        'n=${1#--ntasks=}; shift\n'
        f'exec "{MPIEXEC}" -n "$n" "$@"\n')
    (fake / "srun").chmod(0o755)
    env_out = run(["bash", "-c", '. "$1" && env -0', "bash", LAUNCH / "ompi-env.sh"], timeout=30)
    env = dict(item.split("=", 1) for item in env_out.stdout.split("\0") if "=" in item)
    env.update(PATH=f"{fake}:{env['PATH']}", SLURM_SUBMIT_DIR=str(REPO), SLURM_NTASKS="8",
               SRUN_LOG=str(tmp_path / "srun.log"), MPIEXEC_TIMEOUT="120")
    out_json = tmp_path / "job.json"
    proc = run(["bash", LAUNCH / "slurm.sbatch", "dualcube:r=2", "--collective", "bcast",
                "--sizes", "8", "--iters", "1", "--json", out_json], env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "srun.log").read_text().strip() == (
        f"srun --ntasks=8 python -m mpi4py -m dualmpi run dualcube:r=2 --collective bcast "
        f"--sizes 8 --iters 1 --json {out_json}")
    assert json.loads(out_json.read_text())["rows"][0]["verified"] is True

    env["SLURM_NTASKS"] = "4"
    proc = run(["bash", LAUNCH / "slurm.sbatch", "dualcube:r=2"], env=env, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("launch/slurm.sbatch: error: dualcube:r=2 needs 8 tasks")


def hostfile_entries(path):
    """The (host, slots) lines of an Open MPI hostfile."""
    entries = []
    for line in code_lines(path):
        match = re.fullmatch(r"(\S+) slots=(\d+)", line.strip())
        assert match, f"{path.name}: not 'HOST slots=N': {line!r}"
        entries.append((match.group(1), int(match.group(2))))
    return entries


def test_hostfiles_are_well_formed():
    """localhost: one line; the cluster example: 4 hosts x 8 slots = 32 ranks, as annotated."""
    assert hostfile_entries(REPO / "hostfiles" / "localhost") == [("localhost", 64)]
    cluster = hostfile_entries(REPO / "hostfiles" / "cluster.example")
    assert len(cluster) == 4 and sum(slots for _, slots in cluster) == 32
    text = (REPO / "hostfiles" / "cluster.example").read_text()
    for spec in ("hypercube:n=5", "dualcube:r=3", "metacube:k=2,m=2"):
        assert spec in text


@needs_mpiexec
def test_run_with_the_localhost_hostfile(tmp_path):
    """``launch/run`` with MPIEXEC_ARGS="--hostfile hostfiles/localhost" runs a verified job."""
    env = dict(os.environ, MPIEXEC_ARGS="--hostfile hostfiles/localhost", MPIEXEC_TIMEOUT="120")
    proc = run(["bash", LAUNCH / "run", "dualcube:r=2", "--collective", "scatter", "--sizes", "8",
                "--iters", "1", "--json", tmp_path / "out.json"], env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((tmp_path / "out.json").read_text())["rows"][0]["verified"] is True


@needs_mpiexec
def test_run_an_application_kernel(tmp_path):
    """``launch/run app KERNEL SPEC``: the rank count from the spec, a verified kernel and JSON."""
    env = dict(os.environ, MPIEXEC_TIMEOUT="120")
    proc = run(["bash", LAUNCH / "run", "app", "sort", "dualcube:r=1", "--size", "256",
                "--repeats", "1", "--json", tmp_path / "app.json"], env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads((tmp_path / "app.json").read_text())["rows"]
    assert rows and all(row["verified"] for row in rows)
    proc = run(["bash", LAUNCH / "run", "app", "fft"], env=env)
    assert proc.returncode == 2 and "Usage" in proc.stderr


# -- paths with spaces (issue 14) ----------------------------------------------------------------
@needs_mpiexec
def test_run_with_spaces_in_the_launcher_path(tmp_path):
    """``MPIEXEC`` in a folder whose name has a space (as in a checkout "my checkout"): a 2-rank run."""
    spaced = tmp_path / "my checkout" / "bin"
    spaced.mkdir(parents=True)
    (spaced / "mpiexec").symlink_to(MPIEXEC)
    out = tmp_path / "my results" / "out.json"
    out.parent.mkdir()
    env = dict(os.environ, MPIEXEC=str(spaced / "mpiexec"), MPIEXEC_TIMEOUT="120")
    proc = run(["bash", LAUNCH / "run", "hypercube:n=1", "--collective", "bcast", "--sizes", "8",
                "--iters", "1", "--json", out], env=env, cwd=tmp_path / "my checkout")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(out.read_text())["rows"][0]["verified"] is True


def spaced_checkout(tmp_path):
    """``git clone`` the repository (its last commit) into ``tmp_path/"my checkout"``."""
    dest = tmp_path / "my checkout"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(dest)], check=True, timeout=120,
                   capture_output=True)
    return dest


def test_nodes_in_a_checkout_with_spaces(tmp_path):
    """``bash launch/nodes`` from a checkout whose path has a space (the venv's python runs it)."""
    dest = spaced_checkout(tmp_path)
    (dest / ".venv").symlink_to(REPO / ".venv")  # launch/nodes reads .venv only, never installs
    proc = run(["bash", dest / "launch" / "nodes", "dualcube:r=3"], cwd=dest, timeout=60)
    assert proc.returncode == 0 and proc.stdout == "32\n", proc.stderr
    proc = run(["bash", dest / "launch" / "nodes", "nosuch:x=1"], cwd=dest, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("launch/nodes: error: unknown topology")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_demo_in_a_checkout_with_spaces(tmp_path):
    """The README's first step in a folder "my checkout": launch/setup builds its own .venv there
    (from PyPI or pip's cache), then the demo runs the 8-node networks under that venv's mpiexec."""
    dest = spaced_checkout(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("MPIEXEC", "NP", "VIRTUAL_ENV")}
    env.update(MPIEXEC_TIMEOUT="300")
    proc = run(["bash", "launch/demo"], env=env, cwd=dest, timeout=1700)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count("verified") >= 2 or "yes" in proc.stdout


def test_multihost_arguments_have_no_blanks(tmp_path):
    """A checkout (and its venv) in a path with a space: the launcher arguments for the
    namespace hosts, which Open MPI splits on blanks, name spaceless symlinks to the hostfile,
    the agent and the MPI's prefix (``--prefix``) instead."""
    spaced = tmp_path / "my checkout"
    (spaced / "bin").mkdir(parents=True)
    hostfile = spaced / "hosts"
    hostfile.write_text("h0 slots=2\n")
    env = dict(os.environ, MPIEXEC=str(spaced / "bin" / "mpiexec"))
    proc = run(["bash", LAUNCH / "netns-hosts", "mpiexec-args", hostfile], env=env)
    assert proc.returncode == 0, proc.stderr
    args = proc.stdout.split()
    assert len(proc.stdout.strip().splitlines()) == 1
    named = {flag: args[i + 1] for i, flag in enumerate(args[:-1])
             if flag in ("--prefix", "--hostfile", "plm_ssh_agent")}
    assert set(named) == {"--prefix", "--hostfile", "plm_ssh_agent"}
    assert Path(named["--prefix"]).resolve() == spaced.resolve()
    assert Path(named["--hostfile"]).read_text() == "h0 slots=2\n"
    assert Path(named["plm_ssh_agent"]).resolve() == (LAUNCH / "netns-agent").resolve()
    plain = run(["bash", LAUNCH / "netns-hosts", "mpiexec-args", "/tmp/hosts"],
                env=dict(os.environ, MPIEXEC="/usr/bin/mpiexec"))
    assert "--prefix" not in plain.stdout.split()
