"""Exceptions raised by dualmpi (one family, so the CLI can turn them into one-line errors)."""

__all__ = [
    "DualmpiError",
    "InputError",
    "SpecError",
    "NodeError",
    "LinkError",
    "RankCountError",
    "VerificationError",
]


class DualmpiError(Exception):
    """Base class of every error dualmpi reports to the user."""


class InputError(DualmpiError):
    """Bad input every rank detects alike, before any communication (spec, root, sizes, ranks)."""


class SpecError(InputError, ValueError):
    """A topology spec string is malformed, unknown or out of range."""


class NodeError(InputError, ValueError):
    """A node id is not an integer in ``range(num_nodes)``."""


class LinkError(DualmpiError):
    """A send was attempted between two nodes that are not joined by a link."""

    def __init__(self, src, dst, spec="", what="send"):
        where = f" in {spec}" if spec else ""
        super().__init__(f"node {src} and node {dst} are not neighbours{where}: {what} refused")
        self.src = src
        self.dst = dst


class RankCountError(InputError):
    """The MPI job has the wrong number of ranks for the topology."""


class VerificationError(DualmpiError):
    """Received data differs from what the algorithm must deliver."""
