"""Helpers shared by the subcommands: argument types and output."""

import argparse
import json
import sys

from ..errors import NodeError
from ..topology import from_spec

__all__ = [
    "topology_arg", "node_arg", "resolve_node", "load_topology", "print_json", "format_table",
    "add_fault_args", "has_faults", "apply_faults", "check_output_path", "write_output",
    "write_json_atomic",
]


def topology_arg(text):
    """Argparse type: keep the spec text; it is parsed (with a clear error) by the command."""
    return text


def node_arg(text):
    """Argparse type: a node id in decimal, ``0b…`` or ``0x…``, or a paper address ``(…)``."""
    from ..topology.spec import check_ascii_digits

    try:
        check_ascii_digits(text, "node id", argparse.ArgumentTypeError)
        return int(text, 0)
    except ValueError:
        if text.strip().startswith("("):
            return text.strip()  # resolved by resolve_node once the topology is known
        raise argparse.ArgumentTypeError(f"node id must be an integer, got {text!r}") from None


def resolve_node(topo, node):
    """Return the node id of ``node``: an int, or an address read by ``topo.parse_address``."""
    if isinstance(node, str):
        if not hasattr(topo, "parse_address"):
            raise NodeError(f"{topo.spec} takes node ids only, not addresses like {node!r}")
        return topo.parse_address(node)
    return node


def load_topology(spec):
    """Return the topology for ``spec`` (raises :class:`~dualmpi.errors.SpecError`)."""
    return from_spec(spec)


def print_json(obj, stream=None):
    """Write ``obj`` as indented JSON followed by a newline."""
    stream = stream or sys.stdout
    json.dump(obj, stream, indent=2)
    stream.write("\n")


def format_table(rows, header=None):
    """Return rows of strings as left-aligned columns separated by two spaces."""
    rows = [list(map(str, r)) for r in ([header] if header else []) + list(rows)]
    if not rows:
        return ""
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(max(map(len, rows)))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    if header:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def add_fault_args(parser):
    """Add ``--fail-links/--fail-nodes/--fail-random/--seed`` to a subcommand."""
    group = parser.add_argument_group("faults")
    group.add_argument("--fail-links", default="", metavar="U-V,...",
                       help="failed links: they carry nothing, messages detour")
    group.add_argument("--fail-nodes", default="", metavar="U,...",
                       help="failed nodes: they take no part; their links fail too")
    group.add_argument("--fail-random", type=int, default=0, metavar="N",
                       help="fail N more links chosen at random (see --seed)")
    group.add_argument("--seed", type=int, default=0, help="seed of --fail-random (default 0)")


def has_faults(args):
    """Return True when the arguments name any fault (a size check must then allow for them)."""
    return bool(args.fail_links.strip() or args.fail_nodes.strip() or args.fail_random)


def apply_faults(topo, args):
    """Return ``topo`` with the faults the arguments name (or ``topo`` itself).

    Check the network's size first: ``--fail-random`` lists every link.
    """
    from ..topology.faults import parse_faults

    return parse_faults(topo, args.fail_links, args.fail_nodes, args.fail_random, args.seed)



#: How long :func:`write_output` waits for a process to open a FIFO for reading (seconds).
FIFO_WAIT_S = 10.0


def _output_target(path, what):
    """Return ``(kind, where)``: how ``path`` is written, or raise :class:`InputError`.

    ``"file"``: a new file or a regular one (through symlinks: ``where`` is the
    target), replaced through a temporary file in the target's folder and a rename;
    ``"stream"``: a FIFO or a character device (``/dev/stdout``, ``/dev/null``),
    written in place and never replaced.  Directories, block devices and sockets are
    refused.  Creates nothing.
    """
    import os
    import stat

    from ..errors import InputError

    try:
        st = os.stat(path)  # follows symlinks
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise InputError(f"{what} {path}: {exc.strerror or exc}") from None
    if st is None or stat.S_ISREG(st.st_mode):
        where = os.path.realpath(path)  # a symlink's (possibly dangling) target
        try:
            same = st is None or os.path.samestat(os.stat(where), st)
        except OSError:
            same = False
        if not same:  # a file reached only through a magic link (/proc/self/fd/N of a deleted file)
            return "stream", path
        folder = os.path.dirname(where)
        if not os.path.isdir(folder):
            raise InputError(f"{what} {path}: the directory {folder} does not exist")
        if st is not None and not os.access(where, os.W_OK):
            raise InputError(f"{what} {path}: not writable")
        if not os.access(folder, os.W_OK):
            raise InputError(f"{what} {path}: not writable (the directory {folder} is not: "
                             "the file is replaced through a temporary file beside it)")
        return "file", where
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
        if not os.access(path, os.W_OK):
            raise InputError(f"{what} {path}: not writable")
        return "stream", path
    kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a block device"
            if stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
            else "not a regular file")
    raise InputError(f"{what} {path}: is {kind}; give a file name (a FIFO or a character "
                     "device such as /dev/stdout is written in place)")


#: Seconds a command's ranks wait for each other to agree on the memory available.
AGREE_S = 60.0


def agreed_memory(comm, deadline=AGREE_S):
    """Return the least memory available over the ranks of ``comm``, in bytes.

    Each rank reads its own figure (:func:`dualmpi.resources.available_memory`), and the
    figures move between two reads; agreeing on one before a memory check gives every rank
    the same verdict and the same line (control plane: a nonblocking allreduce, tested
    until ``deadline`` seconds pass, then a :class:`~dualmpi.errors.DualmpiError`).
    """
    import time

    import numpy as np
    from mpi4py import MPI

    from ..errors import DualmpiError
    from ..resources import available_memory

    mine = np.array([available_memory()], dtype=np.int64)
    least = np.empty_like(mine)
    req = comm.Iallreduce(mine, least, op=MPI.MIN)
    end = time.monotonic() + deadline
    while not req.Test():
        if time.monotonic() > end:
            raise DualmpiError(f"rank {comm.Get_rank()}: the other ranks did not agree on the "
                               f"memory available within {deadline:g} s")
        time.sleep(1e-4)
    return int(least[0])


def check_output_path(path, what="--json"):
    """Raise :class:`~dualmpi.errors.InputError` unless ``path`` can be written (before measuring).

    Creates nothing.  A new or regular file (also through a symlink) needs a writable
    folder, since :func:`write_output` replaces it through a temporary file beside it;
    a FIFO or character device must be writable; anything else is refused.
    """
    if path is not None:
        _output_target(path, what)


def write_output(path, data, what="--json"):
    """Write ``data`` (text or bytes) to ``path``: the one writer of the commands' output files.

    A new or regular file is written to a temporary file in its folder and renamed
    over it (atomic: readers see the old or the new file, never a part; an existing
    file keeps its permissions, a new one gets those of ``open``).  A symlink is
    followed: its target is replaced, the link stays.  A FIFO or a character device
    (``/dev/stdout``) is written in place and never replaced; a FIFO that no process
    opens for reading within :data:`FIFO_WAIT_S` is an error, not a hang.  Anything else is
    refused.

    Raises
    ------
    InputError
        ``path`` cannot be written (see :func:`check_output_path`).
    DualmpiError
        Writing failed (disk full, no reader, ...); nothing was renamed over ``path``.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as d:
    ...     Path(d, "link.json").symlink_to("target.json")
    ...     write_output(Path(d, "link.json"), "{}")
    ...     Path(d, "link.json").is_symlink(), Path(d, "target.json").read_text()
    (True, '{}')
    """
    import os

    from ..errors import DualmpiError

    kind, where = _output_target(path, what)
    if isinstance(data, str):
        data = data.encode("utf-8")
    try:
        if kind == "stream":
            _write_in_place(where, data, what)
        else:
            _replace_file(where, data, what, path)
    except OSError as exc:
        raise DualmpiError(f"{what} {path}: cannot write: {exc.strerror or exc}") from None


def _write_in_place(path, data, what):
    """Write ``data`` to a FIFO or character device (opened without creating or truncating)."""
    import errno
    import os
    import stat
    import time

    from ..errors import DualmpiError

    deadline = time.monotonic() + FIFO_WAIT_S
    while True:  # non-blocking: a FIFO without a reader fails (ENXIO) instead of waiting forever
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            if time.monotonic() > deadline:
                raise DualmpiError(f"{what} {path}: a FIFO that no process reads (waited "
                                   f"{FIFO_WAIT_S:g} s)") from None
            time.sleep(0.05)
    with os.fdopen(fd, "wb") as fh:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
            raise DualmpiError(f"{what} {path}: changed while it was opened; not written")
        os.set_blocking(fd, True)
        fh.write(data)


def _replace_file(where, data, what, path):
    """Write ``data`` to a new file beside ``where``, then rename it over ``where`` (a regular
    file or nothing): never over a file of another kind."""
    import os
    import stat

    from ..errors import DualmpiError

    folder, name = os.path.split(where)
    for attempt in range(100):
        tmp = os.path.join(folder, f".{name}.{os.getpid()}.{attempt}.tmp")
        try:  # mode 0o666 less the umask, as open() would create it
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
            break
        except FileExistsError:
            continue
    else:
        raise DualmpiError(f"{what} {path}: no free temporary name in {folder}")
    try:
        with os.fdopen(fd, "wb") as fh:
            try:
                os.fchmod(fd, stat.S_IMODE(os.stat(where).st_mode))  # keep the file's mode
            except FileNotFoundError:
                pass
            fh.write(data)
            fh.flush()
            os.fsync(fd)
        try:
            mode = os.lstat(where).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and not stat.S_ISREG(mode):
            raise DualmpiError(f"{what} {path}: became something other than a regular file "
                               "while it was written; left alone")
        os.replace(tmp, where)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_json_atomic(obj, path, what="--json"):
    """Write ``obj`` as indented JSON to ``path`` with :func:`write_output`."""
    write_output(path, json.dumps(obj, indent=2) + "\n", what)
