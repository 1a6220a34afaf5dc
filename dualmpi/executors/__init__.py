"""Support modules of the engine and its clients: payload patterns, virtual clocks, run options,
the native baseline.  The executor itself is :mod:`dualmpi.engine`."""

from .payload import block_pattern

__all__ = ["block_pattern"]
