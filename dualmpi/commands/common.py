"""Helpers shared by the subcommands: argument types and output."""

import argparse
import json
import sys

from ..errors import NodeError
from ..topology import from_spec

__all__ = [
    "topology_arg", "node_arg", "resolve_node", "load_topology", "print_json", "format_table",
    "add_fault_args", "apply_faults", "check_output_path", "write_json_atomic",
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


def apply_faults(topo, args):
    """Return ``topo`` with the faults the arguments name (or ``topo`` itself)."""
    from ..topology.faults import parse_faults

    return parse_faults(topo, args.fail_links, args.fail_nodes, args.fail_random, args.seed)



def check_output_path(path, what="--json"):
    """Raise :class:`~dualmpi.errors.InputError` unless ``path`` can be written (before measuring).

    Creates nothing: the folder must exist and be writable, and ``path`` must not be a
    folder.
    """
    import os

    from ..errors import InputError

    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise InputError(f"{what} {path}: is a directory")
    if not os.path.isdir(folder):
        raise InputError(f"{what} {path}: the directory {folder} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise InputError(f"{what} {path}: not writable")


def write_json_atomic(obj, path):
    """Write ``obj`` as indented JSON to ``path`` through a temporary file and a rename."""
    import os
    import tempfile

    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".dualmpi-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(obj, fh, indent=2)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
