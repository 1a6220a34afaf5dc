"""dualmpi: hypercube-variant interconnection networks emulated as real MPI message passing."""

__version__ = "0.1.0"

__all__ = ["__version__"]
