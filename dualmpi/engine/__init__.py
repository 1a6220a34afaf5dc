"""One engine for every collective: schedules compiled into per-rank plans, run by a transport.

Layers (none but :mod:`dualmpi.engine.mpi` imports :mod:`mpi4py`):

* :mod:`~dualmpi.engine.arrays` — schedules as numpy rows, link-checked;
* :mod:`~dualmpi.engine.layout` — where the user's buffers meet the network's blocks;
* :mod:`~dualmpi.engine.plan` — the plan compiler (structure, then byte offsets);
* :mod:`~dualmpi.engine.core` — :class:`Engine`: plan caches and the transports' runners;
* :mod:`~dualmpi.engine.mpi` — persistent requests on the graph communicator;
* :mod:`~dualmpi.engine.local` — every rank in one process (the pure tests' executor);
* :mod:`~dualmpi.engine.virtual` — the papers' cost model replayed over a schedule.
"""

from .arrays import ArraySchedule, alltoall_arrays, from_schedule
from .core import Engine, array_schedule
from .layout import Layout
from .local import RunResult, run_inprocess, run_local
from .plan import BoundPlan, RankPlan, compile_rank
from .virtual import replay_clocks

__all__ = [
    "ArraySchedule",
    "BoundPlan",
    "Engine",
    "Layout",
    "RankPlan",
    "RunResult",
    "alltoall_arrays",
    "array_schedule",
    "compile_rank",
    "from_schedule",
    "replay_clocks",
    "run_inprocess",
    "run_local",
]
