"""Output files (issue 23, item 7): symlinks, FIFOs and device nodes at an output path are never
replaced by a regular file; regular files are replaced atomically.

The writer is :func:`dualmpi.commands.common.write_output` (``run|bench|soak|app --json``,
``export -o``, ``report --plot``).  Device nodes are made with ``mknod`` inside the test's
own folder (root only), never the system's ``/dev`` entries; the block device has an
unassigned number, so a writer that opened it anyway could not reach a disk.
"""

import os
import socket
import stat
import subprocess
import threading

import pytest

from dualmpi.cli import main
from dualmpi.commands import common
from dualmpi.commands.common import check_output_path, write_json_atomic, write_output
from dualmpi.errors import DualmpiError, InputError
from mpi_helpers import dualmpi_cmd, error_lines, needs_mpiexec, ompi_env, run_job

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")


def _node(path, kind, major, minor):
    """Make a device node ``path`` (``kind``: stat.S_IFCHR or S_IFBLK) in the test's folder."""
    os.mknod(path, kind | 0o666, os.makedev(major, minor))
    return path


class FifoReader:
    """A ``cat`` copying a FIFO into a file until the writer closes it (killed if never opened)."""

    def __init__(self, fifo):
        self.copy = f"{fifo}.copy"
        with open(self.copy, "wb") as out:
            self.proc = subprocess.Popen(["cat", str(fifo)], stdout=out)

    def text(self, timeout=60):
        """Return what was written, once the writer has closed the FIFO."""
        self.proc.wait(timeout=timeout)
        with open(self.copy, encoding="utf-8") as fh:
            return fh.read()

    def close(self):
        """End the reader if it is still waiting."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def test_symlink_is_written_through_and_kept(tmp_path):
    """The link stays a link; its target is replaced atomically and keeps its mode."""
    target = tmp_path / "target.json"
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(target.name)
    write_json_atomic({"a": 1}, link)
    assert link.is_symlink() and os.readlink(link) == target.name
    assert target.read_text() == '{\n  "a": 1\n}\n'
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "target.json"]


def test_symlink_chain_and_dangling_symlink(tmp_path):
    """A chain of links is followed to the last target; a dangling link gets its target made."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "real.json").write_text("old")
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("sub/real.json")
    write_output(tmp_path / "a", "new")
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()
    assert (tmp_path / "sub" / "real.json").read_text() == "new"
    (tmp_path / "dangling").symlink_to("sub/made.json")
    write_output(tmp_path / "dangling", "made")
    assert (tmp_path / "dangling").is_symlink()
    assert (tmp_path / "sub" / "made.json").read_text() == "made"


def test_new_file_gets_the_umask_mode(tmp_path):
    """A new file is created as open() would (0o666 less the umask), not 0o600."""
    old = os.umask(0o022)
    try:
        write_output(tmp_path / "new.json", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o644


def test_regular_file_replaced_atomically(tmp_path):
    """The old file's inode is not rewritten: a reader holding it still sees the old text."""
    path = tmp_path / "out.json"
    path.write_text("old")
    with open(path) as held:
        write_output(path, "new")
        assert held.read() == "old"
    assert path.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary left


def test_fifo_is_written_in_place(tmp_path):
    """A FIFO with a reader gets the data and stays a FIFO."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    try:
        write_json_atomic({"b": 2}, fifo)
        assert reader.text() == '{\n  "b": 2\n}\n'
    finally:
        reader.close()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_fifo_without_reader_is_an_error_not_a_hang(tmp_path, monkeypatch):
    """Nobody reads the FIFO: one clear error after the wait for a reader, the FIFO is left
    alone."""
    monkeypatch.setattr(common, "FIFO_WAIT_S", 0.5)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done = {}
    worker = threading.Thread(target=lambda: done.setdefault("exc", _raises(fifo)), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "write_output waited for a reader"
    assert isinstance(done["exc"], DualmpiError) and "no process reads" in str(done["exc"])
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def _raises(path):
    """Return the exception ``write_output(path, ...)`` raises (None if it does not)."""
    try:
        write_output(path, "x")
    except DualmpiError as exc:
        return exc
    return None


@root_only
def test_character_devices_are_written_in_place(tmp_path):
    """A null device takes the data and stays a device; a full device (``/dev/full``'s numbers)
    gives one error line and stays a device."""
    null = _node(tmp_path / "null", stat.S_IFCHR, 1, 3)
    write_json_atomic({"c": 3}, null)
    assert stat.S_ISCHR(os.lstat(null).st_mode)
    full = _node(tmp_path / "full", stat.S_IFCHR, 1, 7)
    with pytest.raises(DualmpiError, match="No space left on device"):
        write_json_atomic({"c": 3}, full)
    assert stat.S_ISCHR(os.lstat(full).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "null"]


@root_only
def test_block_device_is_refused(tmp_path):
    """A block device is refused before anything is written or renamed."""
    disk = _node(tmp_path / "disk", stat.S_IFBLK, 254, 254)
    with pytest.raises(InputError, match="is a block device"):
        check_output_path(str(disk))
    with pytest.raises(InputError, match="is a block device"):
        write_output(disk, "x")
    assert stat.S_ISBLK(os.lstat(disk).st_mode)


def test_socket_and_directory_are_refused(tmp_path):
    """A socket or a folder at the path: refused, left alone, nothing created beside them."""
    sock_path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        with pytest.raises(InputError, match="is a socket"):
            write_output(sock_path, "x")
        assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)
    with pytest.raises(InputError, match="is a directory"):
        write_output(tmp_path, "x")
    assert [p.name for p in tmp_path.iterdir()] == ["sock"]


def test_export_and_report_use_the_same_writer(tmp_path, capsys):
    """``export -o`` through a symlink keeps the link; ``report --plot`` into a FIFO writes
    the figure in place (SVG chosen by the name's extension)."""
    (tmp_path / "t.json").write_text("old")
    (tmp_path / "link.json").symlink_to("t.json")
    link = str(tmp_path / "link.json")
    assert main(["export", "dualcube:r=1", "-f", "networkx", "-o", link]) == 0
    assert (tmp_path / "link.json").is_symlink()
    assert '"nodes"' in (tmp_path / "t.json").read_text()
    from dualmpi.model.synthetic import write_synthetic

    results = write_synthetic(tmp_path / "r.json", "dualcube:r=1", (2e-4, 1e-8, 5e-5), hops=(1,))
    fifo = tmp_path / "fig.svg"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    try:
        assert main(["report", str(results), "--plot", str(fifo), "--resamples", "0"]) == 0
        assert "<svg" in reader.text()
    finally:
        reader.close()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    capsys.readouterr()


@needs_mpiexec
def test_run_and_soak_json_keep_symlinks_and_fifos(tmp_path):
    """``run --json LINK`` writes the target and keeps the link; ``soak --json FIFO`` writes
    into the FIFO; ``run --json`` onto a full device (root) fails in one line, device intact."""
    env = ompi_env(100)
    (tmp_path / "target.json").write_text("old")
    (tmp_path / "link.json").symlink_to("target.json")
    quick = ("--collective", "bcast", "--sizes", "8", "--iters", "1", "--warmup", "0")
    job = run_job(dualmpi_cmd(2, "run", "dualcube:r=2", *quick, "--json", tmp_path / "link.json"),
                  env, 150)
    assert job.returncode == 0 and not job.timed_out, job.stdout + job.stderr
    assert (tmp_path / "link.json").is_symlink()
    assert '"rows"' in (tmp_path / "target.json").read_text()
    fifo = tmp_path / "soak.fifo"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    try:
        job = run_job(dualmpi_cmd(2, "soak", "dualcube:r=2", "--iterations", "4", "--json", fifo),
                      env, 150)
        assert job.returncode == 0 and not job.timed_out, job.stdout + job.stderr
        assert '"dualmpi-soak/1"' in reader.text()
    finally:
        reader.close()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    if os.geteuid() == 0:
        full = _node(tmp_path / "full", stat.S_IFCHR, 1, 7)
        job = run_job(dualmpi_cmd(2, "run", "dualcube:r=2", *quick, "--json", full), env, 150)
        assert job.returncode != 0 and not job.timed_out, job.stdout + job.stderr
        assert "Traceback" not in job.stderr, job.stderr
        assert any("No space left on device" in line for line in error_lines(job.stderr))
        assert stat.S_ISCHR(os.lstat(full).st_mode)
