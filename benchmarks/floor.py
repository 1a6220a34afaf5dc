"""The floor: a compiled dualmpi plan run by the smallest possible loop (no checks, no copies).

``floor_loop(runner)`` returns a function that runs the persistent requests of an
:class:`dualmpi.engine.mpi.MPIRunner` round by round — ``Startall``, the local moves
between a rank's own nodes, ``Waitall`` — and nothing else: no argument checks, no
copy of the user's buffers in or out, no watchdog, no statistics.  It is what the
topology's schedule costs on this host, the reference for dualmpi's own overhead
(``benchmarks/engine.py``).
"""

from mpi4py import MPI

__all__ = ["floor_loop"]


def floor_loop(runner):
    """Return a no-argument function running ``runner``'s rounds once, as leanly as Python can."""
    rounds = [(reqs, move) for _, reqs, move, _, _, _, _ in runner._loop]
    startall, waitall = MPI.Prequest.Startall, MPI.Request.Waitall

    def run():
        for reqs, move in rounds:
            startall(reqs)
            if move is not None:
                move()
            waitall(reqs)
    return run
