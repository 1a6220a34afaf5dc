"""The remembered call in C (``dualmpi/engine/recall.c``, issue 25) against its Python twin.

A matcher runs its call and answers True only for the very argument objects it holds, with
their arrays' dtype, shape and (where asked) writability unchanged and the call's lease live
(its runners still the engine's); the C matcher (``Recall.match``) and
``dualmpi.comm._matcher`` must answer alike in every case.  A bound call (``Recall(fn, arg, ...)``) runs a C function of
one pointer with the watchdog's state set meanwhile and hands a non-zero result to
``failed``; here the C function is a ctypes callback, so the test sees what it was given.
"""

import ctypes
import json
import sys

import numpy as np
import pytest
from mpi_helpers import mpi_cmd, needs_mpiexec, ompi_env, run_job

from dualmpi.calls import shape_template_of, template_of
from dualmpi.comm import _chain, _liker, _matcher, _seen, _shaper, _sighting
from dualmpi.engine import cloop, recall

MODULE = recall.load()
KIND = None if MODULE is None else MODULE.Recall
needs_c = pytest.mark.skipif(KIND is None, reason=f"no recall extension: {recall.reason()}")


class _Engine:
    """A remembered call's lease, where the matchers read it (:class:`Lease
    <dualmpi.engine.core.Lease>`: its ``evicted`` cell, 0 while the call's runners are the
    engine's); ``evictions += 1`` drops one of them."""

    def __init__(self):
        self.evicted = np.zeros(1, dtype=np.int64)

    @property
    def evictions(self):
        return int(self.evicted[0])

    @evictions.setter
    def evictions(self, value):
        self.evicted[0] = value

    @property
    def live(self):
        return not self.evicted[0]


def _c_matcher(held, checks, call, engine):
    return KIND.match(call, tuple(held), checks, engine, engine.evictions)


MATCHERS = [pytest.param(_matcher, id="python"),
            pytest.param(_c_matcher, id="c", marks=needs_c)]


def test_the_extension_is_built_where_mpicc_is():
    """CI must not test the Python matcher only while believing it tests the C one."""
    if cloop.mpicc() is not None:
        assert KIND is not None, recall.reason()


@pytest.mark.parametrize("make", MATCHERS)
def test_a_matcher_runs_its_call_for_the_same_objects_only(make):
    send, recv = np.arange(4.0), np.zeros(4)
    ran = []
    engine = _Engine()
    match = make((send, recv, 3), ((send, send.dtype, send.shape, False),
                                   (recv, recv.dtype, recv.shape, True)),
                 lambda: ran.append(1), engine)
    assert match(send, recv, 3) is True and len(ran) == 1
    assert match(send, recv, 3, None) is True and len(ran) == 2  # a missing argument is None
    assert match(send, np.zeros(4), 3) is False
    assert match(send, recv, 3.0) is False  # equal, not the same object
    assert match(send, recv) is False
    assert match(send, recv, 3, 4) is False
    assert len(ran) == 2


@pytest.mark.parametrize("make", MATCHERS)
@pytest.mark.parametrize("change", ["shape", "dtype", "read-only", "evicted"])
def test_a_matcher_refuses_a_changed_array_or_an_evicted_plan(make, change):
    send, recv = np.arange(4.0), np.zeros(4)
    ran = []
    engine = _Engine()
    match = make((send, recv), ((send, send.dtype, send.shape, False),
                                (recv, recv.dtype, recv.shape, True)),
                 lambda: ran.append(1), engine)
    if change == "shape":
        recv.shape = (2, 2)
    elif change == "dtype":
        send.dtype = np.int32
    elif change == "read-only":
        recv.flags.writeable = False
    else:
        engine.evictions += 1
    assert match(send, recv) is False and not ran


@pytest.mark.parametrize("make", MATCHERS)
def test_a_read_only_send_buffer_still_matches(make):
    send, recv = np.arange(4.0), np.zeros(4)
    match = make((send, recv), ((send, send.dtype, send.shape, False),
                                (recv, recv.dtype, recv.shape, True)), lambda: None, _Engine())
    send.flags.writeable = False
    assert match(send, recv) is True


@pytest.mark.parametrize("make", MATCHERS)
def test_a_matcher_without_arrays_and_a_failing_call(make):
    def boom():
        raise ValueError("boom")
    match = make((7,), (), boom, _Engine())
    assert match(8) is False
    with pytest.raises(ValueError, match="boom"):
        match(7)


def _c_chain(matchers):
    return KIND.chain(tuple(matchers))


@pytest.mark.parametrize("make", [pytest.param((_matcher, _chain), id="python"),
                                  pytest.param((_c_matcher, _c_chain), id="c", marks=needs_c)])
def test_a_chain_runs_the_first_of_its_matchers_that_matches(make):
    """Several remembered calls of one method (a program alternating between buffers): the
    call of the matcher whose objects these are runs, one only; none matches: nothing runs."""
    matcher, chain = make
    a, b, c = np.zeros(2), np.zeros(2), np.zeros(2)
    ran, engine = [], _Engine()
    match = chain([matcher((x,), ((x, x.dtype, x.shape, True),),
                           lambda k=k: ran.append(k), engine) for k, x in enumerate((a, b, a))])
    assert match(b) is True and match(a) is True and match(b) is True and ran == [1, 0, 1]
    assert match(c) is False and match(a, b) is False and ran == [1, 0, 1]
    engine.evictions += 1
    assert match(a) is False and ran == [1, 0, 1]


@needs_c
def test_a_chain_holds_matchers_only():
    with pytest.raises(ValueError):
        KIND.chain((lambda: None,))


def _c_shaper(shape, call, engine, patches, *more):
    return KIND.shape(call, shape, engine, engine.evictions, patches, *more)


def _py_shaper(shape, call, engine, patches, *more):
    return _shaper(shape, call, engine, engine.evictions, patches, *more)


SHAPERS = [pytest.param(_py_shaper, id="python"),
           pytest.param(_c_shaper, id="c", marks=needs_c)]


def _shape(*args, written=(False, True)):
    """The template by shape of a call on ``args`` (``Comm._remember``'s: ``_shape_of``)."""
    return shape_template_of(template_of(args), written)


def _shaped(make, send, recv, extra=3):
    """A matcher by shape of ``(send, recv, extra)`` whose call records the addresses the
    patches wrote (slot 0: send's second byte, slot 1: recv's start) as it runs."""
    slots = np.zeros(2, dtype=np.int64)
    patches = np.array([[slots.ctypes.data, 0, 1], [slots.ctypes.data + 8, 1, 0]],
                       dtype=np.int64)
    seen = []
    match = make(_shape(send, recv, extra), lambda: seen.append(tuple(slots)), _Engine(),
                 patches)
    return match, seen, slots


@pytest.mark.parametrize("make", SHAPERS)
def test_a_matcher_by_shape_runs_for_new_arrays_of_the_shape_and_patches_their_addresses(make):
    """``Recall.shape`` (a call remembered by shape, ``Comm._remember``): any arrays of the
    dtype, shape and strides, the other arguments the same (an int by value); before the
    call runs, each patch slot holds its array's address plus the offset."""
    base = np.zeros(64)
    match, seen, _ = _shaped(make, base[:4], base[8:12])
    for send, recv in ((base[:4], base[8:12]), (np.arange(4.0), np.zeros(4)),
                       (base[40:44], base[4:8])):
        assert match(send, recv, 3) is True
        assert seen[-1] == (send.ctypes.data + 1, recv.ctypes.data)
    assert match(np.ones(4), np.ones(4), 1000 + 3 - 1000) is True  # an int by value
    assert len(seen) == 4


@pytest.mark.parametrize("make", SHAPERS)
def test_a_matcher_by_shape_takes_arrays_in_buffer_specs(make):
    """Buffer specs made for every call (``[np.empty(n), MPI.DOUBLE]``): the arrays in them by
    shape, the rest by value; the patches address the specs' arrays."""
    MPI = pytest.importorskip("mpi4py.MPI")
    slots = np.zeros(2, dtype=np.int64)
    patches = np.array([[slots.ctypes.data, 0, 0], [slots.ctypes.data + 8, 1, 8]],
                       dtype=np.int64)
    seen = []
    match = make(_shape([np.zeros(4), MPI.DOUBLE], [np.zeros(8), 8, MPI.DOUBLE], 0),
                 lambda: seen.append(tuple(slots)), _Engine(), patches)
    for _ in range(3):
        send, recv = np.arange(4.0), np.empty(8)
        assert match([send, MPI.DOUBLE], [recv, 8, MPI.DOUBLE], 0) is True
        assert seen[-1] == (send.ctypes.data, recv.ctypes.data + 8)
    send, recv = np.arange(4.0), np.empty(8)
    for args in (([send, MPI.FLOAT], [recv, 8, MPI.DOUBLE], 0),
                 ([send, MPI.DOUBLE], [recv, 7, MPI.DOUBLE], 0),
                 ((send, MPI.DOUBLE), [recv, 8, MPI.DOUBLE], 0),
                 ([send, MPI.DOUBLE], [recv[:4], 8, MPI.DOUBLE], 0),
                 ([send, MPI.DOUBLE], [recv, 8, MPI.DOUBLE], 1),
                 ([send, MPI.DOUBLE], recv, 0)):
        assert match(*args) is False
    assert len(seen) == 3


@pytest.mark.parametrize("make", SHAPERS)
@pytest.mark.parametrize("change", ["dtype", "shape", "strides", "read-only", "overlap", "type",
                                    "extra", "float", "missing", "evicted"])
def test_a_matcher_by_shape_refuses_what_its_plan_does_not_fit(make, change):
    """Another dtype, shape or strides, a read-only receive buffer, arrays that share bytes
    (mpi4py reads a send buffer at the receive buffer's address as in place), not an
    ndarray, another argument (3.0 is not 3), a missing array or an evicted plan: no match,
    nothing runs, no slot written."""
    send, recv = np.arange(4.0), np.zeros(4)
    match, seen, slots = _shaped(make, send, recv)
    args = [np.arange(4.0), np.zeros(4), 3]
    if change == "dtype":
        args[0] = np.arange(4)
    elif change == "shape":
        args[1] = np.zeros((2, 2))
    elif change == "strides":
        args[0] = np.arange(8.0)[::2]
    elif change == "read-only":
        args[1].flags.writeable = False
    elif change == "overlap":
        both = np.zeros(7)
        args[:2] = both[:4], both[3:]
    elif change == "type":
        args[1] = np.zeros(4).view(np.recarray)
    elif change == "extra":
        args[2] = 4
    elif change == "float":
        args[2] = 3.0
    elif change == "missing":
        args = args[:1]
    else:
        match_engine = _Engine()
        match = make(_shape(send, recv, 3), lambda: seen.append(1), match_engine,
                     np.zeros((0, 3), dtype=np.int64))
        match_engine.evictions += 1
    assert match(*args) is False and not seen and not slots.any()


@pytest.mark.parametrize("make", SHAPERS)
def test_a_read_only_send_array_and_a_chain_by_shape(make):
    """A send array need not be writable; in a chain (a method's remembered calls, the most
    recent first) a matcher by identity comes before one by shape and runs for its objects."""
    send, recv = np.arange(4.0), np.zeros(4)
    match, seen, _ = _shaped(make, send, recv)
    ro = np.arange(4.0)
    ro.flags.writeable = False
    assert match(ro, np.zeros(4), 3) is True and len(seen) == 1
    if make is _c_shaper:
        held = []
        ident = _c_matcher((send, recv, 3), ((send, send.dtype, send.shape, False),
                                             (recv, recv.dtype, recv.shape, True)),
                           lambda: held.append(1), _Engine())
        chain = KIND.chain((ident, match))
        assert chain(send, recv, 3) is True and held == [1] and len(seen) == 1
        assert chain(np.ones(4), np.ones(4), 3) is True and held == [1] and len(seen) == 2


@pytest.mark.parametrize("make", SHAPERS)
def test_a_matcher_by_shape_declines_addresses_it_saw_and_runs_calls_bound_at_them(make):
    """With ``seen``, ``at`` and ``wanted`` (a call whose plan could be bound to its buffers):
    a call at the addresses of one of its last calls (``seen``'s first) -- the same array, a
    new view of it, a new array where an old one was -- is declined and its addresses added
    to ``wanted`` (the Python path binds a runner there); one at addresses ``at`` has a call
    for runs that call with its arrays instead of the copies; the ring holds 8 address sets."""
    a, b = np.zeros(4), np.zeros(4)
    ran, engine, at, wanted = [], _Engine(), {}, set()
    none = np.zeros((0, 3), dtype=np.int64)
    match = make(_shape(a, written=(True,)), lambda: ran.append(1), engine, none,
                 ((a.ctypes.data,),), at, wanted)
    assert match(a) is False and match(a[:]) is False and not ran
    assert wanted == {(a.ctypes.data,)}
    assert match(b) is True and len(ran) == 1  # new addresses: on copies, noted
    assert match(b[:]) is False and (b.ctypes.data,) in wanted
    hits = []
    at[(b.ctypes.data,)] = lambda *arrays: hits.append(arrays)
    view = b[:]
    assert match(view) is True and hits == [(view,)] and len(ran) == 1
    others = [np.zeros(4) for _ in range(8)]  # (held: each at its own address)
    for o in others:
        assert match(o) is True
    assert match(a) is True and len(ran) == 10  # out of the last 8 by now
    assert match(b) is True and len(hits) == 2  # bound there: always run so


@needs_c
def test_a_matcher_by_shape_refuses_bad_patches_and_templates():
    shape = _shape(np.zeros(4), written=(True,))
    for patches in (np.zeros((1, 2), dtype=np.int64), np.zeros((1, 3)),
                    np.array([[8, 1, 0]], dtype=np.int64), np.array([[0, 0, 0]], dtype=np.int64)):
        with pytest.raises(ValueError):
            KIND.shape(lambda: None, shape, _Engine(), 0, patches)
    a, b, c = np.zeros(4), np.zeros(4), np.zeros(4)
    three = tuple(e for t in (_shape(a, b), _shape(c, written=(True,))) for e in t)
    for bad in (three, ((),), (1,)):
        with pytest.raises(ValueError):
            KIND.shape(lambda: None, bad, _Engine(), 0, np.zeros((0, 3), dtype=np.int64))
    none = np.zeros((0, 3), dtype=np.int64)
    for more in (((),), ((), {}), ((), {}, {}), (((1, 2),), {}, set()), ((("x",),), {}, set())):
        with pytest.raises((ValueError, TypeError)):
            KIND.shape(lambda: None, shape, _Engine(), 0, none, *more)


def _c_liker(template, call, engine):
    return KIND.like(call, template, engine, engine.evictions)


@pytest.mark.parametrize("make", [pytest.param(_liker, id="python"),
                                  pytest.param(_c_liker, id="c", marks=needs_c)])
def test_a_matcher_by_value_runs_its_call_for_equal_buffer_specs(make):
    """A buffer spec made anew for every call (``[buf, MPI.DOUBLE]``): a new list of the same
    array and datatype matches, another array, datatype, count or root does not, nor a
    changed array (read-only, another shape) or an evicted plan."""
    MPI = pytest.importorskip("mpi4py.MPI")
    a, b = np.zeros(4), np.zeros(4)
    ran, engine = [], _Engine()
    match = make(template_of(([a, MPI.DOUBLE], [b, 4, MPI.DOUBLE], 0)),
                 lambda: ran.append(1), engine)
    assert match([a, MPI.DOUBLE], [b, 4, MPI.DOUBLE], 0) is True
    assert match((a, MPI.DOUBLE), [b, 4, MPI.DOUBLE], 0) is False  # a tuple, not a list
    assert match([b, MPI.DOUBLE], [b, 4, MPI.DOUBLE], 0) is False
    assert match([a, MPI.FLOAT], [b, 4, MPI.DOUBLE], 0) is False
    assert match([a, MPI.DOUBLE], [b, 3, MPI.DOUBLE], 0) is False
    assert match([a, MPI.DOUBLE], [b, 4, MPI.DOUBLE], 1) is False
    assert match([a, MPI.DOUBLE], [b, 4, MPI.DOUBLE]) is False
    assert len(ran) == 1
    b.flags.writeable = False
    assert match([a, MPI.DOUBLE], [b, 4, MPI.DOUBLE], 0) is False
    b.flags.writeable = True
    assert match([a, MPI.DOUBLE], [b, 4, MPI.DOUBLE], 0) is True and len(ran) == 2
    engine.evictions += 1
    assert match([a, MPI.DOUBLE], [b, 4, MPI.DOUBLE], 0) is False and len(ran) == 2


@needs_c
def test_a_nonblocking_repeat_matcher_returns_its_request_or_none():
    """``Recall.start`` (a fixed-count nonblocking method's repeat, ``Comm._mIbcast``): for
    arguments equal to its template, the cache unchanged and the alarm not raised, it returns
    what ``start(repeat, what)`` returns (the request); else None, starting nothing — and None
    too when the start declines (None, or NotImplemented: the Python path starts it)."""
    from types import SimpleNamespace

    a = np.zeros(4)
    engine, alarm, ran, out = _Engine(), SimpleNamespace(broken=None), [], ["request"]

    def start(repeat, what):
        ran.append((repeat, what))
        return out[0]

    match = KIND.start(start, "repeat", "Ibcast", alarm, template_of((a, 0)), engine,
                       engine.evictions)
    assert match(a, 0) == "request" and ran == [("repeat", "Ibcast")]
    assert match(np.zeros(4), 0) is None and match(a, 1) is None and match(a) is None
    assert len(ran) == 1
    for declined in (None, NotImplemented):
        out[0] = declined
        assert match(a, 0) is None
    assert len(ran) == 3
    out[0] = "request"
    alarm.broken = "rank 1 raised the alarm"
    assert match(a, 0) is None and len(ran) == 3
    alarm.broken = None
    engine.evictions += 1
    assert match(a, 0) is None and len(ran) == 3


@needs_c
def test_a_nonblocking_repeat_matcher_starts_the_repeat_made_for_new_arrays_of_its_shape():
    """``Recall.start`` with a shape template (``calls.shape_template_of``): arguments of
    other arrays of the shape start ``shaped[their addresses]`` — and the request then holds
    the arguments (``_plan.keep``: the copies address them) — or None when it has none, when
    the arrays share bytes or differ in dtype, shape or writability."""
    from types import SimpleNamespace

    from dualmpi.calls import shape_template_of

    a, b = np.zeros(4), np.zeros(8)
    engine, alarm, ran = _Engine(), SimpleNamespace(broken=None), []

    def start(repeat, what):
        ran.append(repeat)
        return SimpleNamespace(_plan=SimpleNamespace(keep=None))

    template = template_of((a, [b, 8], 0))
    shaped = {}
    match = KIND.start(start, "repeat", "Iallgather", alarm, template, engine,
                       engine.evictions, shape_template_of(template), shaped)
    assert match(a, [b, 8], 0)._plan.keep is None and ran == ["repeat"]
    x, y = np.ones(4), np.ones(8)
    assert match(x, [y, 8], 0) is None and len(ran) == 1  # no repeat made for them yet
    shaped[(x.ctypes.data, y.ctypes.data)] = "shaped"
    got = match(x, [y, 8], 0)
    assert ran[-1] == "shaped" and got._plan.keep[0] is x and got._plan.keep[1][0] is y
    both = np.zeros(12)
    shaped[(both.ctypes.data, both[2:].ctypes.data)] = "overlapping"
    for args in ((both[:4], [both[2:10], 8], 0), (x.astype(np.float32), [y, 8], 0),
                 (x, [y[:4], 8], 0), (x, [y, 9], 0)):
        assert match(*args) is None
    y.flags.writeable = False
    assert match(x, [y, 8], 0) is None and len(ran) == 2
    with pytest.raises(ValueError):
        KIND.start(start, "repeat", "Iallgather", alarm, template, engine, 0, (), None)


@pytest.mark.parametrize("impl", ["python", pytest.param("c", marks=needs_c)])
def test_shape_templates_compare_alike_in_c_and_python(impl):
    """``SHAPE`` entries: any ndarray (exactly) of the dtype, shape and strides, writable when
    the entry says so; not an array of another kind, a strided view or a copy made read-only
    where the call writes it."""
    from dualmpi import calls

    same = calls._same_python if impl == "python" else MODULE.same
    a = np.zeros((2, 3))
    t = calls.shape_template_of(template_of((a, 0)))
    ro = np.zeros((2, 3))
    ro.flags.writeable = False
    assert same(t, (np.ones((2, 3)), 0)) and same(t, (a, 0))
    for other in (np.ones((3, 2)), np.ones((2, 3), np.float32), np.ones((2, 6))[:, ::2],
                  np.ones((2, 3)).view(np.recarray), ro):
        assert not same(t, (other, 0))
    assert not same(t, (np.ones((2, 3)), 1))
    assert calls.shape_template_of(template_of((np.ones((3, 4))[:, :2], 0))) is None
    read = calls.shape_template_of(template_of((a, 0)), (False,))  # a buffer it only reads
    assert same(read, (ro, 0)) and same(read, (np.ones((2, 3)), 0))
    assert calls.shape_template_of(template_of((a, a[1:], 0))) is None  # sharing bytes


def test_a_sighting_names_arrays_by_weak_reference():
    """What the zero-copy gate keeps of a call's buffers (``Comm._last``): the arrays, also
    those of buffer specs written anew for every call, by weak reference (a dead array is not
    taken for a new one with its id); objects that take no weak reference by id, the newest
    sighting only."""
    a, b = np.zeros(4), np.zeros(4)
    seen = _sighting(([a, "DOUBLE"], b))
    assert _seen(seen, ([a, "DOUBLE"], b), newest=False)  # new list, same array
    assert _seen(seen, ((a, 4, "DOUBLE"), b), newest=False)
    assert not _seen(seen, ([b, "DOUBLE"], b), newest=False)
    assert _seen(_sighting((a, None)), (a, None), False)
    assert not _seen(_sighting((a, None)), (a, b), False)
    gone = _sighting((np.zeros(4), None))
    assert not _seen(gone, (np.zeros(4), None), False)
    MPI = pytest.importorskip("mpi4py.MPI")
    assert _seen(_sighting((MPI.IN_PLACE, b)), (MPI.IN_PLACE, b), newest=False)
    assert not _seen(_sighting((MPI.IN_PLACE, b)), (MPI.IN_PLACE, a), newest=False)
    x = bytearray(4)  # no weak reference: by id, the newest sighting only
    ids = _sighting((x, None))
    assert _seen(ids, (x, None), newest=True) and not _seen(ids, (x, None), newest=False)


class _Watchdog:
    """A watchdog's ``state``, its writes counted."""

    def __init__(self):
        self._state, self.writes = None, 0

    @property
    def state(self):
        return self._state

    @state.setter
    def state(self, value):
        self._state, self.writes = value, self.writes + 1


@needs_c
@pytest.mark.parametrize("watched", [True, False])
def test_a_bound_call_runs_the_function_under_the_watchdog(watched):
    wd, tracked, seen = _Watchdog(), object(), []
    fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(
        lambda arg: seen.append((arg, wd.state)) or 0)
    keep = np.zeros(3)
    before = sys.getrefcount(keep)
    call = KIND(ctypes.cast(fn, ctypes.c_void_p).value, keep.ctypes.data, (fn, keep),
                wd if watched else None, tracked, lambda err: None)
    assert sys.getrefcount(keep) == before + 1  # held by the call
    assert call() is None and call() is None
    assert seen == [(keep.ctypes.data, tracked if watched else None)] * 2
    # the state stays the call's (its loop's counter says when it waits): written once
    assert (wd.state, wd.writes) == ((tracked, 1) if watched else (None, 0))
    wd.state = None  # (another wait, over)
    assert call() is None and seen[-1] == (keep.ctypes.data, tracked if watched else None)
    assert wd.writes == (3 if watched else 1)
    with pytest.raises(TypeError):
        call(1)
    match = KIND.match(call, (keep,), ((keep, keep.dtype, keep.shape, True),), _Engine(), 0)
    assert match(keep) is True and len(seen) == 4  # a matcher runs a bound call directly
    del call, match
    assert sys.getrefcount(keep) == before


@needs_c
def test_a_bound_call_hands_its_error_to_failed():
    wd, errors = _Watchdog(), []

    def failed(err):
        errors.append(err)
        raise RuntimeError(f"failed with {err}")
    fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(lambda arg: 5)
    call = KIND(ctypes.cast(fn, ctypes.c_void_p).value, 1, fn, wd, object(), failed)
    with pytest.raises(RuntimeError, match="failed with 5"):
        call()
    assert errors == [5] and wd.writes == 1


@needs_c
def test_bad_construction_is_refused():
    with pytest.raises(ValueError):
        KIND(0, 0, None, None, None, lambda err: None)  # no function
    with pytest.raises(ValueError):
        KIND.match(lambda: None, (1, 2, 3, 4, 5), (), _Engine(), 0)  # five arguments
    with pytest.raises(TypeError):
        KIND.match(lambda: None, (), ((np.zeros(1), "f8", (1,), True),), _Engine(), 0)


# -- the v-variants' templates (dualmpi.calls.template_of) --------------------------------------
def _sames():
    from dualmpi import calls

    out = [pytest.param(calls._same_python, id="python")]
    out.append(pytest.param(None if MODULE is None else MODULE.same, id="c", marks=needs_c))
    return out


def _v_cases():
    """``(args made, what changes, whether the call still matches)``."""
    from mpi4py import MPI

    a, b = np.arange(6.0), np.zeros(6)
    counts, displs = [1, 2], [0, 3]
    ints = np.array([1, 2], dtype=np.int32)
    dt = MPI.DOUBLE.Create_contiguous(1).Commit()
    base = lambda: ([a, counts, displs, MPI.DOUBLE], [b, ints, (0, 3), dt], 1)  # noqa: E731
    cases = [
        ("nothing", lambda args: args, True),
        ("a new equal count list", lambda args: ([a, [1, 2], displs, MPI.DOUBLE],) + args[1:], True),
        ("a count changed in place", lambda args: (counts.__setitem__(0, 3), args)[1], False),
        ("a count array changed in place", lambda args: (ints.__setitem__(1, 5), args)[1], False),
        ("a copy of the buffer", lambda args: ([a.copy(), counts, displs, MPI.DOUBLE],) + args[1:],
         False),
        ("a list for a tuple", lambda args: (args[0], [b, ints, [0, 3], dt], 1), False),
        ("a bool root", lambda args: args[:2] + (True,), False),
        ("another root", lambda args: args[:2] + (2,), False),
        ("another datatype", lambda args: ([a, counts, displs, MPI.FLOAT],) + args[1:], False),
        ("the datatype freed", lambda args: (dt.Free(), args)[1], False),
        ("the buffer reshaped", lambda args: (setattr(a, "shape", (2, 3)), args)[1], False),
        ("the buffer made read-only", lambda args: (setattr(b.flags, "writeable", False), args)[1],
         False),
        ("one argument more", lambda args: args + (None,), False),
        ("a longer count list", lambda args: ([a, counts + [0], displs, MPI.DOUBLE],) + args[1:],
         False),
    ]
    return base, cases


@pytest.mark.parametrize("impl", _sames())
def test_templates_compare_alike_in_c_and_python(impl):
    """Every way a v-variant's arguments can change: the C comparison and the Python one say
    the same, and only unchanged values (new equal lists included) match."""
    from dualmpi import calls

    names = [name for name, _, _ in _v_cases()[1]]
    got = {}
    for name in names:
        base, cases = _v_cases()  # fresh objects: some cases change them in place
        args = base()
        template = calls.template_of(args)
        assert template is not None
        _, change, _ = next(c for c in cases if c[0] == name)
        got[name] = impl(template, tuple(change(args)))
    assert got == {name: want for name, _, want in _v_cases()[1]}


def test_arguments_that_cannot_be_compared_are_not_remembered():
    from dualmpi import calls

    assert calls.template_of(([bytearray(8), [1]], None)) is None
    assert calls.template_of(([np.zeros(2), np.array([1.0])], None)) is None  # float counts
    assert calls.template_of(([np.zeros(2), [1 << 70]], None)) is None
    assert calls.template_of((np.zeros(2), np.zeros(2), 1 << 70)) is None


@needs_c
def test_a_repeated_v_call_exchanges_then_runs_or_hands_back():
    """VRecall: the same arguments run the exchange, then the data only when the table holds
    the bytes seen (True); a changed table returns None after the exchange; other arguments
    or an evicted plan run nothing (False)."""
    from dualmpi import calls

    table, seen = np.zeros(2, np.int64), np.array([4, 5], np.int64).tobytes()
    ran = []

    def bound(name, fill=None):
        def fn(arg):
            ran.append(name)
            if fill is not None:
                table[:] = fill
            return 0
        cfn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(fn)
        return KIND(ctypes.cast(cfn, ctypes.c_void_p).value, 0, cfn, None, None, lambda e: None)

    fill = [4, 5]
    exchange = bound("exchange")
    data = bound("data")
    engine = _Engine()
    a, counts = np.zeros(4), [2, 2]
    args = ([a, counts], [a, counts])
    call = MODULE.VRecall(calls.template_of(args), engine, 0, exchange, table, seen, data)
    table[:] = fill
    assert call(*args) is True and ran == ["exchange", "data"]
    table[:] = [4, 6]  # as if the exchange brought another table
    ran.clear()
    assert call(*args) is None and ran == ["exchange"]
    ran.clear()
    table[:] = fill
    assert call([a, [2, 3]], [a, counts]) is False and call(*args, None) is False
    engine.evictions = 1
    assert call(*args) is False and ran == []


#: Repeated calls on 4 ranks (a fixed-count call and v-variants, their counts changed in place,
#: then new objects on one rank only) against mpi4py's, and which matchers ran them.
JOB = """
import json
import numpy as np
from mpi4py import MPI
import dualmpi
w = MPI.COMM_WORLD
R, me = w.Get_size(), w.Get_rank()
net = dualmpi.Comm(w, "hypercube:n=2", watchdog=60)
ok, kinds = True, set()
a, mine, ref = np.arange(4.0 * R) + me, np.zeros(4 * R), np.zeros(4 * R)
counts, displs = [2] * R, [4 * r for r in range(R)]
send = np.arange(2.0) + 10 * me
for step in range(6):
    if step == 3:
        counts[:] = [3] * R  # the same list, changed in place (on every rank)
        send = np.arange(3.0) + 10 * me
    if step == 5 and me == R - 1:
        send = send.copy()  # a new object on one rank only
    a += 1
    net.Alltoall(a, mine); w.Alltoall(a, ref); ok &= np.array_equal(mine, ref)
    mine[:] = ref[:] = -1
    net.Allgatherv(send, [mine, counts, displs, MPI.DOUBLE])
    w.Allgatherv(send, [ref, counts, displs, MPI.DOUBLE]); ok &= np.array_equal(mine, ref)
    mine[:] = ref[:] = -1
    net.Alltoallv([a, counts, displs, MPI.DOUBLE], [mine, counts, displs, MPI.DOUBLE])
    w.Alltoallv([a, counts, displs, MPI.DOUBLE], [ref, counts, displs, MPI.DOUBLE])
    ok &= np.array_equal(mine, ref)
    kinds.update((type(net._mAlltoall).__name__, type(net._mAllgatherv).__name__))
ok = w.allreduce(int(ok), op=MPI.MIN)
if me == 0:
    print(json.dumps({"ok": ok, "kinds": sorted(kinds)}))
net.Free()
"""


@needs_mpiexec
@pytest.mark.parametrize("switch", ["1", "0"])
def test_repeated_calls_equal_mpi_with_and_without_the_extension(tmp_path, switch):
    """4 ranks: repeated Alltoall, Allgatherv and Alltoallv, counts changed in place and one
    rank's objects replaced, equal mpi4py's with the C matchers and with the Python ones
    (``DUALMPI_RECALL=0``), and the C matchers really ran where the extension builds."""
    script = tmp_path / "job.py"
    script.write_text(JOB)
    env = ompi_env(120)
    env["DUALMPI_RECALL"] = switch
    job = run_job(mpi_cmd(4, script), env, timeout=180)
    assert job.returncode == 0 and not job.timed_out, job.stdout + job.stderr
    out = json.loads(job.stdout.strip().splitlines()[-1])
    assert out["ok"] == 1
    if switch == "0" or KIND is None:
        assert not {"Recall", "VRecall"} & set(out["kinds"]), out
    else:
        assert {"Recall", "VRecall"} <= set(out["kinds"]), out


def test_the_module_examples_run():
    import doctest

    assert doctest.testmod(recall).failed == 0


@needs_c
def test_a_tick_counts_a_plan_with_an_entry_and_adds_one_without():
    """``Tick(plans, key, add)`` is ``Tally.add`` without its frame: one more in the entry's call
    count (item 4) when ``plans`` has it, else ``add()``; an entry of another shape is an error."""
    from dualmpi.calls import Tally
    from types import SimpleNamespace as NS

    plan = NS(link_src=np.array([0]), link_dst=np.array([1]), link_messages=np.array([2]),
              link_bytes=np.array([64]))
    tally = Tally()
    tick = tally.adder(plan, 3, 4, 96)
    assert type(tick) is MODULE.Tick
    tick()  # (no entry yet: Tally.add makes it)
    tick()
    tick()
    links, totals = tally.counts()
    assert links == {(0, 1): (6, 192)}
    assert totals == {"collectives": 3, "rounds": 9, "steps": 12, "step_bytes": 288}
    with pytest.raises(TypeError, match="not Tally.add's"):
        MODULE.Tick({1: [0, 1]}, 1, lambda: None)()
    with pytest.raises(TypeError):
        tick(1)


def test_a_shape_template_keeps_no_array_alive():
    """Building a template by shape leaves no reference cycle holding the call's arrays (a
    temporary made for every call must be freed when the call ends, so that the next one can
    take its place: ``Comm._at_addresses``), without the garbage collector."""
    import gc
    import weakref

    from dualmpi.calls import shape_template_of

    gc.disable()
    try:
        a, b = np.zeros(4), np.zeros(8)
        refs = [weakref.ref(a), weakref.ref(b)]
        t = shape_template_of(template_of((a, [b, 8, None], 0)), (False, True))
        assert t is not None
        del a, b, t
        assert all(r() is None for r in refs)
    finally:
        gc.enable()


def test_each_method_in_c_asks_its_matcher_first_with_its_parameters():
    """``Method`` (``dualmpi.comm._methods_in_c``) calls ``comm._m<name>`` with the method's
    parameters in order, then the Python method when it declines: so every such method's body
    must begin by asking that matcher with exactly those parameters (what ``Method`` passes),
    and take its result as ``Method`` does — True ran the call; a nonblocking method's request."""
    import ast
    import inspect

    from dualmpi import comm

    tree = ast.parse(inspect.getsource(comm))
    bodies = {f.name: f for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "Comm"
              for f in c.body if isinstance(f, ast.FunctionDef)}
    names = comm.dispatched()
    assert {"Bcast", "Barrier", "Ibcast", "Iallgatherv", "Neighbor_alltoall",
            "Ineighbor_alltoallw"} <= set(names)
    assert not {"Allgatherv", "Alltoallv", "Reduce_scatter"} & set(names)  # (VRecall: tri-state)
    for name in names:
        f = bodies[name]
        params = [a.arg for a in f.args.args][1:]
        body = [s for s in f.body if not (isinstance(s, ast.Expr) and
                                         isinstance(s.value, ast.Constant))]
        first = body[0]
        call = first.test.operand if isinstance(first, ast.If) else first.value
        assert isinstance(call, ast.Call), name
        assert ast.unparse(call.func) == f"self._m{name}", name
        assert [ast.unparse(a) for a in call.args] == params and not call.keywords, name
        if name.startswith("I"):  # req = self._mI...(...); if req is not None: return req
            assert isinstance(first, ast.Assign) and ast.unparse(body[1].test) == \
                f"{first.targets[0].id} is not None", name
        else:  # if not self._m...(...): the Python path
            assert isinstance(first, ast.If) and isinstance(first.test, ast.UnaryOp), name
