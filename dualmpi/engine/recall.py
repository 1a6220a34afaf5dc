"""The remembered call in C: a repeated collective matched and run without Python frames.

:class:`dualmpi.Comm` remembers each blocking collective's last call (``Comm._remember``):
made again with the very same argument objects, it runs the plan already bound to those
buffers.  Done in Python, matching the arguments, asking the engine's cache whether the plan
is still there, arming the watchdog and calling the compiled round loop through ctypes cost
about half a microsecond a call on one machine, a third of MPI's own latency
(docs/performance.md, "Which layer costs what").  ``recall.c``, a CPython extension built with
the MPI library's ``mpicc`` into the round loop's cache (:func:`dualmpi.engine.cloop.build`),
does the same steps in one call:

* ``Recall(fn, arg, keep, wd, tracked, failed)`` is a *bound call*: calling it runs the loop
  ``fn(arg)`` with the GIL released, ``wd.state = tracked`` from then on (``wd`` None: no
  deadline; the loop's counter says 0 once the call is over, which the watchdog reads as no
  wait, so a repeated call writes no attribute), and ``failed(err)`` (which raises) on a
  non-zero result — what :meth:`MPIRunner._closure <dualmpi.engine.mpi.MPIRunner._closure>`
  does in Python;
* ``Recall.match(call, held, checks, lease, epoch)`` is a *matcher*: called with up to four
  arguments it runs ``call`` and returns True when they are the ``held`` objects (by
  identity; missing ones None), each ``(array, dtype, shape, writable)`` of ``checks`` still
  holds and ``lease.evictions == epoch`` (read from ``lease.evicted``, the int64 cell of the
  call's :class:`~dualmpi.engine.core.Lease`, which turns 1 when the engine drops a runner the
  call runs, as every matcher reads it); else it runs nothing and returns False — what
  ``dualmpi.comm._matcher`` does in Python;
* ``Recall.shape(call, shape, lease, epoch, patches[, seen])`` is a matcher of arrays by
  shape: the arguments equal to what the template ``shape`` was made of
  (:func:`dualmpi.calls.shape_template_of`: its arrays, bare or first in a buffer spec, any
  numpy arrays of their dtype, shape and strides, writable where the call writes them, two
  of them apart); before it runs ``call`` it writes each array's address into the bound
  call's copies (``patches``: ``(slot, array, offset)``), and with ``seen`` it declines the
  arrays of its last calls — a call repeated on new arrays of one shape (``a[i:j]``,
  ``np.empty_like(x)``, ``[np.empty(n), MPI.DOUBLE]``), ``Comm._remember``'s
  ``_Remembered.by_shape``; ``dualmpi.comm._shaper`` in Python;
* ``Recall.like(call, template, lease, epoch)`` is a matcher of arguments compared by value
  (``same(template, args)``, below): a buffer spec written anew for every call
  (``[buf, MPI.DOUBLE]``) matches when it names the same array, datatype and counts —
  ``dualmpi.comm._liker`` in Python;
* ``Recall.chain(matchers)`` tries a tuple of matchers of one method in turn and runs the
  first that matches (``dualmpi.comm._chain`` in Python): a method remembers its last few
  calls, so a program alternating between buffers repeats each from C;
* ``VRecall(template, lease, epoch, exchange, table, seen, data)`` is a repeated v-variant
  call: arguments equal to what ``template`` was made of (``same(template, args)``, the
  comparison of :func:`dualmpi.calls.template_of`'s templates) and the lease live, it
  runs ``exchange`` (the count table's allgather into ``table``), then, when the table holds
  the bytes ``seen``, ``data`` (the call's plan), and returns True; None when the table
  changed (the Python path goes on with it); False, running nothing, otherwise;
* ``Recall.start(start, repeat, what, alarm, template, lease, epoch)`` is a matcher of a
  fixed-count nonblocking method (``Comm._mIbcast``: :func:`dualmpi.calls._install_start`):
  arguments equal to what ``template`` was made of, the lease live and ``alarm.broken``
  None, it returns ``start(repeat, what)``'s request; otherwise (or when the start declines)
  None, and :func:`dualmpi.calls.icollective` starts the call;
* ``IRestart(progress, ...)`` starts a repeat of a fixed-count nonblocking call as
  :meth:`Progress.restart <dualmpi.engine.nonblocking.Progress.restart>` does, its
  ``PlanRequest`` and the user's request made in C (their ``__slots__`` written at their
  offsets), and ``IRestart.close(plan)``, the head of :meth:`Progress.wait
  <dualmpi.engine.nonblocking.Progress.wait>`, steps the only request in flight and ends it
  when its rounds are done (the run back to its pool, ``finish()`` run): Python's frames on
  that path cost more than the messages (docs/performance.md, "A nonblocking repeat in C");
* ``WaitMethod(request_type, plan_type, fallback, doc[, parts_type])`` is
  :meth:`dualmpi.Request.Wait` in C (:func:`dualmpi.request.use_c_wait`): a request whose plan
  its progress's ``IRestart.close`` ends is waited for, made inactive and its error raised
  without a Python frame, and a request of several parts (a ``parts_type``,
  :class:`dualmpi.calls._Chain`: a v-variant's count table, then its data) part by part alike;
  any other wait (a status to fill, another kind of request, one not alone in flight) is
  ``fallback``, the Python ``Wait``;
* ``VStart(restart, chain_type, memo_type, comm_ref, method, desc)`` starts a nonblocking
  v-variant's repeat once ``Recall.start`` matched its arguments: the
  :class:`dualmpi.calls._Chain` of the call made with the memo's row and set-up, the data's
  sequence number taken, the memo's count table held and the table's part started by
  ``restart`` (the Progress's ``IRestart``), the user's request made; None (the Python path)
  when the memo's table is busy, the memo is no longer the method's or the start declines;
* ``VSizes(tick, sink, restart, chain_type, memo_type)`` is the finish of a v-variant's
  count-table repeat: ``tick()``, then, when the table that came is the memo's own, the memo's
  table given back and the data's part started by ``restart`` (what the running call's
  ``_sizes``, ``sink[0]``, does then); else ``sink[0]()`` itself;
* ``Method(matcher, fallback, starts)`` is a public method of :class:`dualmpi.Comm` in C
  (``dualmpi.comm._methods_in_c``): ``comm.Name(*args)`` calls the instance's matcher
  ``comm._mName`` with the arguments (``fallback``'s defaults filled in) and, when it ran the
  call (True; a request, ``starts``), returns None (the request); else, or with keywords, the
  call is ``fallback``'s, the Python method (which asks the matcher again: a matcher that
  declines changes nothing) — a repeated call makes no Python frame of dualmpi's;
* ``Tick(plans, key, add)`` counts a completed call in :class:`dualmpi.calls.Tally` (one
  more in ``plans[key]``'s call count, ``add()`` when the plan has no entry yet): the finish
  of a remembered nonblocking call, without ``Tally.add``'s frame (:meth:`Tally.adder
  <dualmpi.calls.Tally.adder>`);
* ``CFunc(address, nargs, release)`` calls a C function of the round loop's library
  (``nargs`` int64 arguments, an int back; ``release``: without the GIL, for one that
  blocks) as its ctypes function does, without ctypes' argument conversions: the nonblocking
  requests' steps (:mod:`dualmpi.engine.nonblocking`) are a microsecond or two apiece.

Without ``mpicc``, the Python headers or numpy's, or with ``DUALMPI_RECALL=0``, there is no
extension (:func:`reason` says why) and those Python functions do the same.
"""

import sysconfig
from pathlib import Path

from . import cloop

__all__ = ["SOURCE", "load", "reason"]

#: The C source of the extension.
SOURCE = Path(__file__).with_name("recall.c")

_loaded = {}


def _library():
    import numpy as np

    flags = (f"-I{sysconfig.get_paths()['include']}", f"-I{np.get_include()}")
    return cloop.Library("recall", SOURCE, ("PyInit_dualmpi_recall",), "remembered-call extension",
                         "repeated calls are matched in Python", flags)


def reason():
    """Return why the extension is not in use ("" when it is, None before :func:`load`)."""
    return _loaded.get("reason")


def load():
    """Return the extension module, or None with :func:`reason` set (once per process).

    >>> load() is None or sorted(n for n in dir(load()) if not n.startswith("_"))
    ... # doctest: +NORMALIZE_WHITESPACE
    ['CFunc', 'IRestart', 'Method', 'NStart', 'Recall', 'Tick', 'VRecall', 'VSizes', 'VStart',
     'WaitMethod', 'same']
    """
    return cloop.extension(_library, "PyInit_dualmpi_recall", "DUALMPI_RECALL", _loaded)
