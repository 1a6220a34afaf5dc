"""Application kernels on any communicator: a ``dualmpi.Comm`` or a plain ``mpi4py.MPI.Comm``.

Each kernel takes the communicator as its first argument and calls only mpi4py's method
names, so the same code runs on an emulated network and on native MPI.  ``dualmpi app``
runs them on both and compares (:mod:`dualmpi.commands.app`).
"""

from . import cg, fft, record, sort, summa
from .cg import cg_solve, partition
from .fft import fft2
from .record import Recorder, model_time
from .sort import sample_sort
from .summa import summa as summa_multiply

__all__ = ["KERNELS", "fft2", "sample_sort", "summa_multiply", "cg_solve", "partition",
           "Recorder", "model_time", "fft", "sort", "summa", "cg", "record"]

#: The kernels ``dualmpi app`` runs, by name.
KERNELS = ("fft", "sort", "summa", "cg")
