"""Executors run per-node programs: in one process (no MPI) or one node per MPI rank."""

from .inprocess import RunResult, run_inprocess
from .payload import block_pattern

__all__ = ["RunResult", "run_inprocess", "block_pattern"]
