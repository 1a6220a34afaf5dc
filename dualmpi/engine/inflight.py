"""Requests in flight, and blocking waits that keep them moving.

MPI's progress rule: while a rank blocks in any MPI call, the nonblocking operations it has
started still progress.  dualmpi's nonblocking collectives (:mod:`dualmpi.engine.nonblocking`)
and neighbourhood requests (:mod:`dualmpi.neighbor`) move only when the rank's own thread
advances them: a rank that forwards a broadcast's blocks must post each next round.  So every
wait of a *blocking* call (a collective's rounds in Python or in C, its argument agreement, a
control-plane reduction, a point-to-point wait) goes through this module: with no request in
flight (:data:`IN_FLIGHT` is 0, the usual case) it is MPI's own wait; otherwise it waits for
its own requests *and* those of every request in flight at once, advancing the latter as they
complete (:data:`BESIDE`, installed by :mod:`dualmpi.engine.nonblocking`).

Without it, a legal program stops: every rank starts ``Ibcast``; the odd ranks wait for it and
then call ``Bcast``, the even ranks call ``Bcast`` first.  The even ranks wait in ``Bcast``
for the odd ranks, which wait for the broadcast the even ranks should forward.

The compiled round loop (``rounds.c``'s ``dualmpi_run``) reads :data:`IN_FLIGHT` before each
wait and, when it is not 0, calls back into Python (:func:`c_hook`) instead of
``MPI_Waitsome``: the callback waits as :func:`waitany` does and tells the loop which of its
requests completed.

Only the main thread advances the requests (the progress engines are not thread-safe, and
the program's requests are its): in any other thread (a derived communicator's nonblocking
collective runs in a worker thread) every wait here is MPI's own.

This module imports nothing of dualmpi's, and mpi4py only when it waits: every layer may wait
through it, and importing it leaves MPI uninitialised.

With nothing in flight every wait here is MPI's own:

>>> MPI = _mpi()
>>> busy(), waitany([MPI.REQUEST_NULL]) == MPI.UNDEFINED
(False, True)

References
----------
MPI Forum, *MPI: A Message-Passing Interface Standard*, Version 3.1 (2015), Section 3.7.4
("Progress"), and Section 5.12 on nonblocking collective operations, which progress as
point-to-point operations do.
"""

import ctypes
import threading
import time

import numpy as np

__all__ = ["IN_FLIGHT", "BESIDE", "ADVANCE", "busy", "waitany", "waitall", "advance", "mprobe",
           "probe", "c_hook", "HOOK_FAILED", "pending"]

#: Requests in flight on this process: the ``active`` requests of every live progress engine
#: (:class:`dualmpi.engine.nonblocking.Progress`, :mod:`dualmpi.neighbor`'s), kept by whoever
#: adds or removes one.  Compiled code that would block reads it.
IN_FLIGHT = np.zeros(1, dtype=np.int64)

#: ``[beside]``: ``beside(reqs, status)`` waits for one of ``reqs`` as ``MPI_Waitany`` does
#: while advancing every request in flight (:func:`dualmpi.engine.nonblocking.beside`,
#: installed when that module is imported: no request is in flight before).
BESIDE = [None]
#: ``[advance]``: advances every request in flight as far as it goes without blocking
#: (:func:`dualmpi.engine.nonblocking.poll_all`, installed with :data:`BESIDE`).
ADVANCE = [None]
#: Sleeps of a probe's poll while requests are in flight (seconds: the first, doubling up to
#: the last): MPI has no request for a probe, so nothing to wait on with the others.
PROBE_SLEEP = (2e-5, 2e-4)

#: What :func:`c_hook`'s callback returns when the wait raised (:func:`pending` has the error).
HOOK_FAILED = -2
_PENDING = []
_HOOKS = {}
_MAIN = threading.main_thread().ident


def _mpi():
    from mpi4py import MPI

    return MPI


def busy():
    """True when this thread must keep requests in flight moving while it blocks."""
    return bool(IN_FLIGHT[0]) and BESIDE[0] is not None and threading.get_ident() == _MAIN


def waitany(reqs, status=None):
    """``MPI.Request.Waitany(reqs, status)`` that keeps every request in flight moving.

    Returns the index of the request that completed, or ``MPI.UNDEFINED`` when none of
    ``reqs`` is active.
    """
    if IN_FLIGHT[0] and busy():
        return BESIDE[0](reqs, status)
    return _mpi().Request.Waitany(reqs, status)


def waitall(reqs):
    """``MPI.Request.Waitall(reqs)`` that keeps every request in flight moving."""
    if IN_FLIGHT[0] and busy():
        undefined = _mpi().UNDEFINED
        while waitany(reqs) != undefined:
            pass
    else:
        _mpi().Request.Waitall(reqs)


def advance():
    """Advance every request in flight as far as it goes without blocking (none: nothing)."""
    if IN_FLIGHT[0] and busy():
        ADVANCE[0]()


def mprobe(comm, source, tag, status=None):
    """``comm.Mprobe(source, tag, status)`` that keeps every request in flight moving.

    While requests are in flight it polls (``Improbe``, then advance them, then sleep
    :data:`PROBE_SLEEP`), else it is MPI's own blocking probe.
    """
    return _probe(comm.Mprobe, comm.Improbe, source, tag, status)


def probe(comm, source, tag, status=None):
    """``comm.Probe(source, tag, status)`` that keeps every request in flight moving (see
    :func:`mprobe`)."""
    return _probe(comm.Probe, lambda s, t, st: comm.Iprobe(s, t, st) or None, source, tag,
                  status)


def _probe(blocking, poll, source, tag, status):
    delay, cap = PROBE_SLEEP
    while IN_FLIGHT[0] and busy():
        got = poll(source, tag, status)
        if got is not None:
            return got
        ADVANCE[0]()
        time.sleep(delay)
        delay = min(cap, delay * 2)
    return blocking(source, tag, status)


def pending():
    """Return (and forget) the error the last failed callback of :func:`c_hook` raised."""
    return _PENDING.pop() if _PENDING else None


def c_hook(itemsize):
    """Return the address of a C callback ``int wait(MPI_Request *reqs, int n)`` for requests
    whose handles are ``itemsize`` bytes.

    The callback waits as :func:`waitany` does on the ``n`` requests at ``reqs`` and returns
    the index of the one that completed, -1 when none did (another request in flight moved,
    or none of them is active), or :data:`HOOK_FAILED` with the error kept for
    :func:`pending` (a callback must not raise).  The handles are written back (MPI frees a
    request that is not persistent when it completes).
    """
    hook = _HOOKS.get(itemsize)
    if hook is None:
        ctype = {4: ctypes.c_uint32, 8: ctypes.c_uint64}[itemsize]

        MPI = _mpi()

        @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
        def wait(addr, n):
            try:
                handles = (ctype * n).from_address(addr)
                reqs = [MPI.Request.fromhandle(int(h)) for h in handles]
                try:
                    i = waitany(reqs)
                finally:
                    for k, req in enumerate(reqs):
                        handles[k] = req.handle
                return -1 if i == MPI.UNDEFINED else i
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
                _PENDING[:] = [exc]
                return HOOK_FAILED

        hook = _HOOKS[itemsize] = (wait, ctypes.cast(wait, ctypes.c_void_p).value)
    return hook[1]
