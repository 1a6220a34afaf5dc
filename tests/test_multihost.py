"""A real multi-host run: Open MPI across hosts made of Linux network namespaces, over TCP.

``launch/netns-hosts`` builds the hosts on this machine: one network namespace per host (its
own loopback and one veth link ``eth0`` with a private address in 10.77.0.0/24) and a switch
namespace bridging the links, so traffic stays between these namespaces.  ``mpiexec`` starts on
the first host from a hostfile; PRRTE launches its daemon on every other host through
``launch/netns-agent`` (``ip netns exec HOST`` plus a UTS namespace named HOST, in place of
ssh), and the MPI library is held to TCP on the hosts' subnet (``pml ob1``, ``btl tcp,self``:
no shared memory, no other transport).  The test then checks, for the dual-cube D_2 with two
ranks on each of four hosts:

* every collective's every byte arrived (``dualmpi run`` verifies them) with no link violation;
* the ranks that ran the collectives were in four different network namespaces, namely the
  four hosts', in hostfile order, none of them the test's own;
* the hosts' links carried at least the bytes the schedules send between ranks on different
  hosts, so the data went over TCP between namespaces.

It needs root, ``ip`` (iproute2, installed by ``launch/test`` when missing) and ``unshare``; a
machine that refuses network namespaces makes it skip with the refusal as the reason.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dualmpi.collectives import COLLECTIVES, build_schedule
from dualmpi.topology import from_spec

REPO = Path(__file__).resolve().parents[1]
NETNS_HOSTS = REPO / "launch" / "netns-hosts"
MPIEXEC = Path(sys.executable).parent / "mpiexec"
SPEC = "dualcube:r=2"  # 8 nodes
HOSTS, SLOTS = 4, 2  # two ranks per host
SIZES = (0, 1024, 65536)
TIMEOUT = 50  # seconds for one mpiexec job (subprocess); MPIEXEC_TIMEOUT below is shorter

#: Error texts meaning "this machine does not let us build network namespaces".
REFUSALS = ("Operation not permitted", "Permission denied", "Unknown device type",
            "Operation not supported", "not supported", "Read-only file system")

pytestmark = pytest.mark.timeout(120)


def sh(*cmd, **kw):
    """Run a command, capturing text output; return the CompletedProcess."""
    kw.setdefault("timeout", 30)
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def skip_reason():
    """Return why this machine cannot run the test, or None."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces are Linux-only (platform {sys.platform})"
    if os.geteuid() != 0:
        return (f"creating network namespaces (ip netns add) needs root; "
                f"running as uid {os.geteuid()}")
    for tool, package in (("ip", "iproute2"), ("unshare", "util-linux")):
        if shutil.which(tool) is None:
            return f"`{tool}` not found: install {package} (launch/test does so when run as root)"
    if not MPIEXEC.exists():
        return f"no mpiexec next to {sys.executable} (the Open MPI wheel's)"
    version = sh(MPIEXEC, "--version").stdout
    if not re.search(r"Open MPI\)? 5\.", version):
        return f"needs Open MPI 5 (PRRTE's launch agent); {MPIEXEC} is {version.strip()!r}"
    return None


def refusal(stderr):
    """Return the line of ``stderr`` saying namespaces are refused, or None."""
    for line in stderr.splitlines():
        if any(text in line for text in REFUSALS):
            return line.strip()
    return None


def down(prefix):
    """Remove the namespace hosts ``prefix-*`` (and end what still runs in them)."""
    sh("bash", NETNS_HOSTS, "down", prefix)


def namespaces(prefix):
    """Return the names of the existing namespaces ``prefix-*``."""
    out = sh("ip", "netns", "list").stdout
    return sorted(line.split()[0] for line in out.splitlines() if line.startswith(prefix + "-"))


def mpi_env(timeout):
    """The environment with ``launch/ompi-env.sh`` applied and MPIEXEC_TIMEOUT=``timeout``."""
    out = subprocess.run(
        ["bash", "-c", '. "$1" && env -0', "bash", str(REPO / "launch" / "ompi-env.sh")],
        check=True, capture_output=True, timeout=30,
    ).stdout
    env = dict(item.split("=", 1) for item in out.decode().split("\0") if "=" in item)
    env["MPIEXEC_TIMEOUT"] = str(timeout)
    return env


def link_bytes(host):
    """Return (rx, tx) byte counters of ``eth0`` in the namespace ``host``."""
    out = sh("ip", "-n", host, "-s", "-j", "link", "show", "dev", "eth0", check=True).stdout
    stats = json.loads(out)[0]["stats64"]
    return stats["rx"]["bytes"], stats["tx"]["bytes"]


def cross_host_bytes(topo, host_of, sizes):
    """Return the payload bytes one run of every collective at ``sizes`` sends between hosts."""
    total = 0
    for coll in COLLECTIVES:
        blocks = sum(len(t.blocks) for rnd in build_schedule(coll, topo, 0).rounds
                     for t in rnd.transfers if host_of[t.src] != host_of[t.dst])
        total += blocks * sum(sizes)
    return total


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Four namespace hosts with two slots each: yields (prefix, hostfile); removed afterwards."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    probe = sh("unshare", "--uts", "true")
    if probe.returncode != 0:
        pytest.skip(f"the machine refuses UTS namespaces (unshare --uts): {probe.stderr.strip()}")
    prefix = f"dmt{os.getpid()}"
    hostfile = tmp_path_factory.mktemp("netns") / "hostfile"
    try:
        made = sh("bash", NETNS_HOSTS, "up", prefix, HOSTS, SLOTS, hostfile)
        if made.returncode != 0:
            line = refusal(made.stderr)
            if line:
                pytest.skip(f"the machine refuses network namespaces: {line}")
            pytest.fail(f"launch/netns-hosts up failed:\n{made.stderr}")
        yield prefix, hostfile
    finally:
        down(prefix)
        assert namespaces(prefix) == [], "launch/netns-hosts down left namespaces behind"


def test_hostfile_lists_the_namespace_hosts(cluster):
    """The hostfile has one line per host, ``PREFIX-h<i> slots=2``, and each host exists."""
    prefix, hostfile = cluster
    lines = hostfile.read_text().splitlines()
    assert lines == [f"{prefix}-h{i} slots={SLOTS}" for i in range(HOSTS)]
    assert namespaces(prefix) == sorted([f"{prefix}-sw"] + [f"{prefix}-h{i}" for i in range(HOSTS)])


def test_dualcube_collectives_across_namespace_hosts(cluster, tmp_path):
    """Every collective on D_2 verified with its 8 ranks on 4 namespace hosts, data over TCP."""
    prefix, hostfile = cluster
    hosts = [f"{prefix}-h{i}" for i in range(HOSTS)]
    ns_inode = {os.stat(f"/run/netns/{h}").st_ino: h for h in hosts}
    before = {h: link_bytes(h) for h in hosts}
    args = sh("bash", NETNS_HOSTS, "mpiexec-args", hostfile, check=True).stdout.split()
    out_json = tmp_path / "run.json"
    # Each rank records its namespace and hostname, then becomes the dualmpi process (exec).
    record = ('echo "$OMPI_COMM_WORLD_RANK $(cat /proc/sys/kernel/hostname) '
              '$(readlink /proc/$$/ns/net)" >"$1/rank-$OMPI_COMM_WORLD_RANK"; shift; exec "$@"')
    cmd = ["bash", NETNS_HOSTS, "exec", hosts[0], MPIEXEC, *args, "-n", HOSTS * SLOTS,
           "sh", "-c", record, "record", tmp_path,
           sys.executable, "-m", "mpi4py", "-m", "dualmpi", "run", SPEC, "--collective", "all",
           "--sizes", ",".join(map(str, SIZES)), "--iters", "1", "--warmup", "0",
           "--json", out_json]
    job = sh(*cmd, env=mpi_env(TIMEOUT - 10), cwd=REPO, timeout=TIMEOUT)
    assert job.returncode == 0, f"exit {job.returncode}\n{job.stdout}\n{job.stderr}"

    result = json.loads(out_json.read_text())
    assert result["meta"]["ranks"] == HOSTS * SLOTS and result["meta"]["host"] == hosts[0]
    rows = result["rows"]
    ran = {(r["collective"], r["size"]) for r in rows}
    assert {(c, s) for c in COLLECTIVES for s in SIZES} <= ran
    assert all(r["verified"] and r["link_violations"] == 0 for r in rows), rows

    # where each rank ran: its network namespace (by inode) and its hostname
    placed = {}
    for path in tmp_path.glob("rank-*"):
        rank, hostname, link = path.read_text().split()
        inode = int(re.fullmatch(r"net:\[(\d+)\]", link).group(1))
        assert inode in ns_inode, f"rank {rank} ran outside the namespace hosts ({link})"
        assert hostname == ns_inode[inode]
        placed[int(rank)] = ns_inode[inode]
    assert placed == {r: hosts[r // SLOTS] for r in range(HOSTS * SLOTS)}
    assert os.stat("/proc/self/ns/net").st_ino not in ns_inode

    # the hosts' links carried the data the schedules send between hosts
    after = {h: link_bytes(h) for h in hosts}
    sent = sum(after[h][1] - before[h][1] for h in hosts)
    received = sum(after[h][0] - before[h][0] for h in hosts)
    host_of = {r: r // SLOTS for r in range(HOSTS * SLOTS)}
    payload = cross_host_bytes(from_spec(SPEC), host_of, SIZES)
    assert payload > 1_000_000
    assert sent >= payload and received >= payload, (sent, received, payload)


@pytest.mark.timeout(2 * TIMEOUT + 30)
def test_launch_multihost_end_to_end(tmp_path):
    """``launch/multihost`` runs a verified job on two namespace hosts and removes them after.

    The whole script (namespaces up, the job, namespaces down) has twice one job's budget: on a
    loaded machine it has taken 62 s. From a checkout whose path has a blank (as CI's), PRRTE's
    command for the remote daemon holds that path unquoted; launch/netns-agent quotes it, and
    the shell of the remote host must not complain.
    """
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    prefix = f"dmm{os.getpid()}"
    env = dict(os.environ, HOSTS="2", NETNS_PREFIX=prefix, MPIEXEC_TIMEOUT=str(2 * TIMEOUT - 10))
    out_json = tmp_path / "multihost.json"
    try:
        job = sh("bash", REPO / "launch" / "multihost", SPEC, "--collective", "allgather",
                 "--sizes", "64", "--iters", "1", "--warmup", "0", "--json", out_json,
                 env=env, cwd=tmp_path, timeout=2 * TIMEOUT)
        started = "ranks on 2 hosts" in job.stdout  # printed once the namespaces exist
        line = refusal(job.stderr) if job.returncode and not started else None
        if line:
            pytest.skip(f"the machine refuses network namespaces: {line}")
        assert job.returncode == 0, f"exit {job.returncode}\n{job.stdout}\n{job.stderr}"
        assert f"8 ranks on 2 hosts ({prefix}-h0..{prefix}-h1, 4 slots each)" in job.stdout
        result = json.loads(out_json.read_text())
        assert result["meta"]["host"] == f"{prefix}-h0"
        assert [r["verified"] for r in result["rows"]] == [True]
        assert "not found" not in job.stderr, job.stderr
        assert namespaces(prefix) == []
    finally:
        down(prefix)
