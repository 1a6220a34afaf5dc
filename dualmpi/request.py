"""Requests of dualmpi's nonblocking collectives, with the methods of :class:`mpi4py.MPI.Request`.

A nonblocking collective of :class:`dualmpi.Comm` (``Ibcast``, ``Iallreduce``, ...)
returns a :class:`Request`.  It is tested and waited for as an ``MPI.Request`` is:
``Test``, ``Wait``, ``Get_status``, the object forms ``test``/``wait``, and the class
methods ``Request.Waitall(requests)``, ``Testall``, ``Waitany``, ``Testany``,
``Waitsome``, ``Testsome`` (and their object forms) and ``Get_status_all``/``_any``/
``_some``, whose lists may mix dualmpi
requests, ``None``, ``MPI.REQUEST_NULL`` and (in the buffer forms) mpi4py's own
requests, e.g. ``Request.Waitall([net.Ibcast(buf), comm.Isend(x, 1)])``.  The
point-to-point requests of ``dualmpi.Comm`` (``net.Isend``, ``net.irecv``, ...:
:mod:`dualmpi.p2p`) are ``MPI.Request`` objects and go in both kinds of list; the object
forms return a routed ``irecv``'s object.  Every test or wait advances every dualmpi
request in flight (and the point-to-point routers of the list's requests), so a rank
waiting on one request still forwards the others' messages.  As in MPI, a finished request becomes inactive (it
compares equal to ``MPI.REQUEST_NULL``), its status is the empty status (source
``ANY_SOURCE``, tag ``ANY_TAG``, no error, 0 elements), and a request of a collective
cannot be cancelled, nor freed while active.  An error of the collective (ranks that
disagree on its arguments, ...) is raised by the test or wait that completes it.
Importing this module does not import mpi4py.
"""

from .errors import InputError

__all__ = ["Request", "use_c_wait"]


def _mpi():
    from mpi4py import MPI

    return MPI


def _nb():
    from .engine import nonblocking

    return nonblocking


class Request:
    """The request of a nonblocking collective of :class:`dualmpi.Comm` (mirrors ``MPI.Request``).

    Made by the communicator (:meth:`from_plan`); ``Request()`` is an inactive request,
    like ``MPI.Request()``.

    Examples
    --------
    Under ``mpiexec -n 8 python -m mpi4py prog.py``::

        net = dualmpi.Comm(MPI.COMM_WORLD, "dualcube:r=2")
        reqs = [net.Ibcast(a), net.Iallreduce(b, c)]
        compute()
        dualmpi.Request.Waitall(reqs)
    """

    __slots__ = ("_progress", "_plan", "_active")
    __hash__ = None  # as MPI.Request: equality is by handle, requests are not hashable

    def __init__(self, progress=None, plan_request=None):
        self._progress, self._plan = progress, plan_request
        self._active = plan_request is not None

    @classmethod
    def from_plan(cls, progress, plan_request):
        """Return the request of ``plan_request`` (a :class:`~dualmpi.engine.nonblocking.PlanRequest`
        started by ``progress``, a :class:`~dualmpi.engine.nonblocking.Progress`)."""
        return cls(progress, plan_request)

    def __bool__(self):
        """True while active (not yet completed by a test or wait), as ``bool(MPI.Request)``."""
        return self._active

    def __eq__(self, other):
        if isinstance(other, Request):
            return self is other or not (self._active or other._active)
        MPI = _mpi()
        if isinstance(other, MPI.Request):
            return not self._active and other == MPI.REQUEST_NULL
        return NotImplemented

    def __repr__(self):
        if not self._active:
            return "<dualmpi.Request (inactive)>"
        state = "done" if self._plan.done else "in flight"
        return f"<dualmpi.Request {self._plan.what} #{self._plan.seq} ({state})>"

    # -- completion -----------------------------------------------------------------------------
    def _complete(self, status):
        """Make a finished request inactive; fill ``status``; return its result or raise its error."""
        plan = self._plan
        self._active, self._plan = False, None
        _empty(status)
        return plan.outcome()

    def Test(self, status=None):
        """Test for completion; return True once done (the request is then inactive)."""
        if not self._active:
            _empty(status)
            return True
        if not self._progress.test(self._plan):
            return False
        self._complete(status)
        return True

    def Wait(self, status=None):
        """Wait for completion (advancing every request meanwhile); return True."""
        if self._active:
            plan = self._plan
            self._progress.wait(plan)
            self._active, self._plan = False, None  # (_complete, inline: the common case)
            if status is not None:
                _empty(status)
            plan.outcome()
        elif status is not None:
            _empty(status)
        return True

    def Get_status(self, status=None):
        """Return whether the request is done, without completing it (``MPI_Request_get_status``)."""
        if not self._active:
            _empty(status)
            return True
        if self._progress.test(self._plan):
            _empty(status)
            return True
        return False

    def test(self, status=None):
        """Test for completion; return ``(flag, object)``: the request's object once done."""
        if not self._active:
            _empty(status)
            return True, None
        if not self._progress.test(self._plan):
            return False, None
        return True, self._complete(status)

    def wait(self, status=None):
        """Wait for completion; return the request's object (None for a buffer collective)."""
        if not self._active:
            _empty(status)
            return None
        self._progress.wait(self._plan)
        return self._complete(status)

    def Free(self):
        """Free a finished request; an active one cannot be (MPI: erroneous for a collective)."""
        if not self._active:
            raise InputError("Request.Free: the request is not active (it completed already)")
        if not self._progress.test(self._plan):
            raise InputError(f"Request.Free: {self._plan.what} is still in flight; freeing the "
                             "request of a nonblocking collective is erroneous in MPI (wait "
                             "for it instead)")
        self._active, self._plan = False, None

    def Cancel(self):
        """Refused: cancelling the request of a nonblocking collective is erroneous in MPI."""
        what = self._plan.what if self._active else "a nonblocking collective"
        raise InputError(f"Request.Cancel: the request of {what} cannot be cancelled (MPI: "
                         "cancelling a collective's request is erroneous); wait for it instead")

    cancel = Cancel
    free = Free
    get_status = Get_status

    # -- many requests: buffer forms -------------------------------------------------------------
    @classmethod
    def Waitall(cls, requests, statuses=None):
        """Wait for every request; return True (``statuses[i]``: request ``i``'s status)."""
        _Many(requests, statuses).wait_all()
        return True

    @classmethod
    def Testall(cls, requests, statuses=None):
        """Return True, completing them all, when every request is done; else False (none completed)."""
        return _Many(requests, statuses).test_all()[0]

    @classmethod
    def Waitany(cls, requests, status=None):
        """Wait for one request; return its index (``MPI.UNDEFINED`` when none is active)."""
        return _Many(requests).wait_any(status)[0]

    @classmethod
    def Testany(cls, requests, status=None):
        """Return ``(index, flag)``: a done request's index and True, ``(UNDEFINED, False)`` if
        none is done, ``(UNDEFINED, True)`` when none is active."""
        index, flag, _ = _Many(requests).test_any(status)
        return index, flag

    @classmethod
    def Waitsome(cls, requests, statuses=None):
        """Wait for at least one request; return the indices of those done (None: none active)."""
        return _Many(requests, statuses).wait_some()[0]

    @classmethod
    def Testsome(cls, requests, statuses=None):
        """Return the indices of the requests done now (maybe none), None when none is active."""
        return _Many(requests, statuses).test_some()[0]

    @classmethod
    def Get_status_all(cls, requests, statuses=None):
        """Return whether every request is done, completing none (``MPI_Request_get_status_all``)."""
        return _Many(requests, statuses).status_all()

    @classmethod
    def Get_status_any(cls, requests, status=None):
        """Return ``(index, flag)`` of a done request without completing it (see :meth:`Testany`)."""
        return _Many(requests).status_any(status)

    @classmethod
    def Get_status_some(cls, requests, statuses=None):
        """Return the indices of the done requests, completing none (None when none is active)."""
        return _Many(requests, statuses).status_some()

    # -- many requests: object forms (dualmpi requests only) -------------------------------------
    @classmethod
    def waitall(cls, requests, statuses=None):
        """Wait for every request; return their objects."""
        return _Many(requests, statuses, objects=True).wait_all()

    @classmethod
    def testall(cls, requests, statuses=None):
        """Return ``(True, objects)`` when every request is done, else ``(False, None)``."""
        return _Many(requests, statuses, objects=True).test_all()

    @classmethod
    def waitany(cls, requests, status=None):
        """Wait for one request; return ``(index, object)``."""
        return _Many(requests, objects=True).wait_any(status)

    @classmethod
    def testany(cls, requests, status=None):
        """Return ``(index, flag, object)`` (see :meth:`Testany`)."""
        return _Many(requests, objects=True).test_any(status)

    @classmethod
    def waitsome(cls, requests, statuses=None):
        """Wait for at least one request; return ``(indices, objects)`` (``(None, None)``: none active)."""
        return _Many(requests, statuses, objects=True).wait_some()

    @classmethod
    def testsome(cls, requests, statuses=None):
        """Return ``(indices, objects)`` of the requests done now (``(None, None)``: none active)."""
        return _Many(requests, statuses, objects=True).test_some()

    get_status_all = Get_status_all
    get_status_any = Get_status_any
    get_status_some = Get_status_some


def _empty(status):
    """Set ``status`` (if any) to MPI's empty status."""
    if status is not None:
        MPI = _mpi()
        status.source, status.tag, status.error = MPI.ANY_SOURCE, MPI.ANY_TAG, MPI.SUCCESS
        status.Set_elements(MPI.BYTE, 0)
        status.Set_cancelled(False)


class _Many:
    """One call on a list of requests: dualmpi's, mpi4py's (buffer forms), ``None`` or null ones.

    mpi4py's requests are completed with MPI (tested with ``Test``/``Testsome``, waited for
    together with the dualmpi requests' posted messages in one ``MPI_Waitany``), dualmpi's
    by advancing every request in flight.  Statuses follow mpi4py: ``statuses`` is
    extended with new ``MPI.Status`` objects as needed; the all-forms fill one per
    request, the some-forms one per completed request, in the order of the returned
    indices.
    """

    def __init__(self, requests, statuses=None, objects=False):
        MPI = _mpi()
        self.MPI, self.requests, self.statuses, self.objects = MPI, list(requests), statuses, objects
        self.ours, self.theirs = [], []  # indices of active dualmpi / mpi4py requests
        #: the routers of point-to-point requests among mpi4py's (dualmpi.p2p: generalized
        #: requests that the router's progress completes)
        self.routers = set()
        for i, req in enumerate(self.requests):
            if isinstance(req, Request):
                if req._active:
                    self.ours.append(i)
            elif req is None:
                continue
            elif isinstance(req, MPI.Request):
                if req:
                    routed = getattr(req, "_state", None) is not None
                    if objects and not routed:
                        raise InputError("Request.waitall and the other object forms take "
                                         "dualmpi requests only; wait for mpi4py's with its own "
                                         "methods (or use the buffer forms, e.g. Waitall)")
                    if routed:
                        self.routers.add(req._state.router)
                    self.theirs.append(i)
            else:
                raise InputError(f"Request: {type(req).__name__} is not a request (a dualmpi or "
                                 "mpi4py request, or None)")
        self.results = {}
        self.error = None
        self.early = {}  # mpi4py requests completed by a blocking wait: index -> status

    @property
    def active(self):
        return bool(self.ours or self.theirs)

    def _status(self, j):
        """Return the ``j``-th status of the caller's list (extended as mpi4py extends it)."""
        if self.statuses is None:
            return None
        while len(self.statuses) <= j:
            self.statuses.append(self.MPI.Status())
        return self.statuses[j]

    def _done_ours(self):
        """Return the indices of the finished dualmpi requests (after one round of progress,
        of the nonblocking collectives and of the point-to-point routers)."""
        _nb().poll_all()
        for router in self.routers:
            router.poke()
        return [i for i in self.ours if self.requests[i]._plan.done]

    def _theirs_done(self, i):
        """Record the object of mpi4py-level request ``i`` just completed (a routed ``irecv``)."""
        if self.objects:
            self.results[i] = self.requests[i]._object()

    def _take(self, i, status):
        """Complete request ``i`` (a finished dualmpi request): keep its object or error."""
        try:
            self.results[i] = self.requests[i]._complete(status)
        except Exception as exc:  # every request completes first, then the first error is raised
            self.results[i] = None
            if self.error is None:
                self.error = exc
        self.ours.remove(i)

    def _raise(self):
        if self.error is not None:
            raise self.error

    def _block(self, status=None):
        """Block until something may have finished; return the index of a completed mpi4py
        request (its status in ``status``) or -1.

        A point-to-point router without a progress thread completes its requests only
        inside dualmpi calls: then this polls (the loop's next round advances it) instead
        of blocking in MPI.
        """
        if any(not router.threaded for router in self.routers):
            import time

            time.sleep(2e-5)
            return -1
        watch = self.requests[self.ours[0]]._plan if self.ours else None
        j = _nb().block([self.requests[i] for i in self.theirs], watch, status)
        if j < 0:
            return -1
        i = self.theirs[j]
        self.theirs.remove(i)
        return i

    # -- all ---------------------------------------------------------------------------------------
    def wait_all(self):
        for i in range(len(self.requests)):
            if i not in self.theirs:
                _empty(self._status(i))
        while True:
            for i in self._done_ours():
                self._take(i, self._status(i))
            for i in list(self.theirs):
                if self.requests[i].Test(self._status(i)):
                    self.theirs.remove(i)
                    self._theirs_done(i)
            if not self.active:
                break
            st = self.MPI.Status() if self.theirs and self.statuses is not None else None
            i = self._block(st)
            if i >= 0:
                self._theirs_done(i)
                if st is not None:
                    _copy(st, self._status(i))
        self._raise()
        return [self.results.get(i) for i in range(len(self.requests))]

    def test_all(self):
        if len(self._done_ours()) < len(self.ours) or \
                not all(self.requests[i].Get_status() for i in self.theirs):
            return False, None
        return True, self.wait_all()

    # -- any ---------------------------------------------------------------------------------------
    def _any(self, status):
        """Complete one done request; return its index, or None when none is done yet."""
        done = self._done_ours()
        if done:
            self._take(done[0], status)
            self._raise()
            return done[0]
        if self.theirs:
            j, flag = self.MPI.Request.Testany([self.requests[i] for i in self.theirs], status)
            if flag and j != self.MPI.UNDEFINED:
                i = self.theirs.pop(j)
                self._theirs_done(i)
                return i
        return None

    def wait_any(self, status=None):
        if not self.active:
            _empty(status)
            return self.MPI.UNDEFINED, None
        while True:
            i = self._any(status)
            if i is None:
                i = self._block(status)
                if i < 0:
                    continue
                self._theirs_done(i)
            return i, self.results.get(i)

    def test_any(self, status=None):
        if not self.active:
            _empty(status)
            return self.MPI.UNDEFINED, True, None
        i = self._any(status)
        if i is None:
            return self.MPI.UNDEFINED, False, None
        return i, True, self.results.get(i)

    # -- some --------------------------------------------------------------------------------------
    def _some(self):
        """Complete every done request; return their indices (ascending)."""
        found = dict(self.early)
        self.early = {}
        ours = self._done_ours()
        if self.theirs:
            sts = [] if self.statuses is not None else None
            reqs = [self.requests[i] for i in self.theirs]
            got = self.MPI.Request.Testsome(reqs, sts) or []
            for n, j in enumerate(got):
                found[self.theirs[j]] = None if sts is None else sts[n]
                self._theirs_done(self.theirs[j])
            self.theirs = [i for i in self.theirs if i not in found]
        done = sorted(ours + list(found))
        for n, i in enumerate(done):
            if i in found:
                if found[i] is not None:
                    _copy(found[i], self._status(n))
            else:
                self._take(i, self._status(n))
        self._raise()
        return done

    def _some_result(self, done):
        return done, ([self.results.get(i) for i in done] if self.objects else None)

    def wait_some(self):
        if not self.active:
            return None, None
        while True:
            done = self._some()
            if done:
                return self._some_result(done)
            st = self.MPI.Status() if self.statuses is not None else None
            i = self._block(st)
            if i >= 0:
                self._theirs_done(i)
                self.early[i] = st

    def test_some(self):
        if not self.active:
            return None, None
        return self._some_result(self._some())

    # -- status only (nothing completed) -------------------------------------------------------------
    def _done(self):
        """Return the indices of the done requests (dualmpi's after one round of progress)."""
        theirs = [i for i in self.theirs if self.requests[i].Get_status()]
        return sorted(self._done_ours() + theirs)

    def _fill(self, i, status):
        """Fill ``status`` for done request ``i`` (mpi4py's: from MPI; dualmpi's: empty)."""
        if i in self.theirs:
            self.requests[i].Get_status(status)
        else:
            _empty(status)

    def status_all(self):
        done = self._done()
        if len(done) < len(self.ours) + len(self.theirs):
            return False
        for i in range(len(self.requests)):
            self._fill(i, self._status(i))
        return True

    def status_any(self, status=None):
        if not self.active:
            _empty(status)
            return self.MPI.UNDEFINED, True
        done = self._done()
        if not done:
            return self.MPI.UNDEFINED, False
        self._fill(done[0], status)
        return done[0], True

    def status_some(self):
        if not self.active:
            return None
        done = self._done()
        for n, i in enumerate(done):
            self._fill(i, self._status(n))
        return done


def _copy(src, dst):
    """Copy an ``MPI.Status`` into another."""
    MPI = _mpi()
    dst.source, dst.tag, dst.error = src.source, src.tag, src.error
    dst.Set_elements(MPI.BYTE, src.Get_elements(MPI.BYTE))
    dst.Set_cancelled(src.Is_cancelled())


#: :meth:`Request.Wait` as Python defines it (what the one in C falls back on)
_PYTHON_WAIT = Request.Wait


def use_c_wait(ext, plan_type, parts_type=None):
    """Make :meth:`Request.Wait` the one of ``ext`` (:mod:`dualmpi.engine.recall`'s extension:
    ``WaitMethod``), once: a request whose plan (a ``plan_type``, the
    :class:`~dualmpi.engine.nonblocking.PlanRequest`) its progress ends in C (``IRestart.close``)
    is waited for and made inactive without a Python frame, and a request of several parts (a
    ``parts_type``: ``dualmpi.calls._Chain``, whose ``counts`` part starts its ``data`` part)
    part by part alike; any other call of it is the Python :meth:`Request.Wait`'s
    (``_PYTHON_WAIT``)."""
    if Request.__dict__["Wait"] is _PYTHON_WAIT:
        Request.Wait = ext.WaitMethod(Request, plan_type, _PYTHON_WAIT, _PYTHON_WAIT.__doc__,
                                      parts_type)
