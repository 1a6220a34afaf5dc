"""Exceptions raised by dualmpi (one family, so the CLI can turn them into one-line errors)."""

__all__ = [
    "DualmpiError",
    "InputError",
    "SpecError",
    "NodeError",
    "LinkError",
    "RankCountError",
    "VerificationError",
    "mpi_error",
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


_MPI_KINDS = {}


def mpi_error(text, errorclass, base=InputError):
    """Return an error that is both dualmpi's ``base`` and an ``MPI.Exception`` of ``errorclass``.

    For mistakes MPI itself reports with an error class (``"ERR_ROOT"`` for a bad root),
    so a program that catches ``MPI.Exception`` and asks ``Get_error_class()`` keeps
    working on a ``dualmpi.Comm``; ``str()`` is dualmpi's one line.  Imports mpi4py when
    called (a running MPI program), never at import.
    """
    from mpi4py import MPI

    cls = _MPI_KINDS.get(base)
    if cls is None:
        class MPIError(base, MPI.Exception):
            """A dualmpi error that is also an ``MPI.Exception`` (see :func:`mpi_error`)."""

            def __init__(self, text, ierr):
                MPI.Exception.__init__(self, ierr)
                self.text = text

            def __str__(self):
                return self.text

            __repr__ = Exception.__repr__

        MPIError.__name__ = MPIError.__qualname__ = base.__name__
        cls = _MPI_KINDS[base] = MPIError
    return cls(text, getattr(MPI, errorclass))
