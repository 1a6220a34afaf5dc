"""dualmpi: hypercube-variant interconnection networks emulated as real MPI message passing.

``dualmpi.Comm(MPI.COMM_WORLD, "dualcube:r=3")`` gives mpi4py's buffer collectives
(``Bcast``, ``Scatter``, ``Allgather``, ``Alltoall``, ``Alltoallv``) on the user's own
data, moved only over the network's links.  Importing dualmpi does not import mpi4py.
"""

__version__ = "0.1.0"

__all__ = ["Comm", "Request", "__version__"]


def __getattr__(name):
    """Import :class:`dualmpi.comm.Comm` (it needs mpi4py; the pure layers do not) and
    :class:`dualmpi.request.Request` on first use."""
    if name == "Comm":
        from .comm import Comm

        return Comm
    if name == "Request":
        from .request import Request

        return Request
    raise AttributeError(f"module 'dualmpi' has no attribute {name!r}")
