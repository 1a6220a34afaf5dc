"""Support modules of the engine: payload patterns, virtual clocks, options, watchdog, baselines.

The in-process executor is :func:`dualmpi.engine.run_inprocess` (also reachable here).
"""

from .payload import block_pattern

__all__ = ["RunResult", "run_inprocess", "block_pattern"]


def __getattr__(name):
    """Resolve ``run_inprocess`` and ``RunResult`` lazily (the engine imports this package)."""
    if name in ("run_inprocess", "RunResult"):
        from ..engine import local

        return getattr(local, name)
    raise AttributeError(name)
