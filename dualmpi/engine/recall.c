/* The remembered call in C: a repeated collective matched and run without Python frames.
 *
 * A blocking collective of dualmpi.Comm made again with the very argument objects of its
 * previous call runs that call's plan bound to the buffers (dualmpi.Comm._remember): the
 * arguments are compared by identity, the arrays' dtype, shape and writability checked, the
 * engine's cache asked whether the plan is still there, the watchdog armed, and the compiled
 * round loop (rounds.c's dualmpi_run) called.  In Python those steps cost about as much as
 * MPI's own latency on one machine (docs/performance.md, "Which layer costs what"); this
 * CPython extension does them in one call:
 *
 *   Recall(fn, arg, keep, wd, tracked, failed)
 *       a bound call: calling it runs fn(arg) (fn the address of dualmpi_run, arg that of
 *       the call's argument block, both kept alive by ``keep``) with the GIL released; with
 *       ``wd`` (the watchdog, None when it has no deadline) ``wd.state`` is ``tracked``
 *       from the call on (the loop's counter says where it waits, 0 once it is over); a
 *       non-zero result calls ``failed(err)``, which raises.  Returns None.
 *
 *   Recall.match(call, held, checks, lease, epoch)
 *       a matcher: calling it with up to four arguments runs ``call`` and returns True when
 *       they are the objects ``held`` (missing ones None), each array of ``checks``
 *       (``(array, dtype, shape, writable)``) still has that dtype and shape (and is
 *       writable when asked) and ``lease.evictions == epoch``; otherwise it returns False
 *       and runs nothing.  ``call`` is a bound Recall (its C call is made directly) or any
 *       Python callable of no argument (a plan that combines in Python between segments, or
 *       a call not bound yet, which binds itself the first time it runs).
 *
 *   Recall.shape(call, shape, lease, epoch, patches)
 *       a matcher by shape: the arguments are compared with ``shape``, a template whose
 *       arrays (bare, or first in a buffer spec ``[buf, MPI.DOUBLE]``) are compared not by
 *       identity but by what the call's plan needs of them (dualmpi.calls.shape_template_of:
 *       entries of kind TK_SHAPE, below): exactly a numpy.ndarray, of that dtype (by
 *       identity), shape and strides (and writable when asked), two arrays' bytes apart.
 *       Before it runs ``call`` it writes each ``(slot, k, offset)`` of ``patches`` (an int64
 *       array of three columns): the int64 at address ``slot`` (a copy's address in the
 *       bound call's argument block) becomes the data address of the template's ``k``-th
 *       array plus ``offset``.  A program that passes new arrays of the same shape every
 *       call (``a[i:j]``, ``np.empty_like(x)``, ``[np.empty(n), MPI.DOUBLE]``) repeats its
 *       call from C so.
 *
 *   Recall.shape(call, shape, lease, epoch, patches, seen, at, wanted)
 *       the same for a call whose plan can be bound to its buffers (zero-copy): ``seen`` a
 *       tuple of tuples of the arrays' data addresses, ``at`` a dict by such tuples.  A call
 *       on arrays at addresses ``at`` has runs ``at[addresses](*arrays)`` instead (a call
 *       bound to the memory at those addresses, holding none of it between calls); one at
 *       the addresses of one of its last few calls (``seen``'s to begin with) is declined
 *       (returns False) and its addresses added to the set ``wanted``, so that arrays at
 *       addresses a program comes back to -- the same arrays, new views of them, a temporary
 *       the allocator puts where the last one was -- reach the Python path, which binds a
 *       plan to them.
 *
 *   Recall.like(call, template, lease, epoch)
 *       a matcher of arguments compared by value (the kinds below, ``same``): calling it
 *       runs ``call`` and returns True when the arguments are what ``template`` was made of
 *       (a buffer spec made anew for every call, ``[buf, MPI.DOUBLE]``) and
 *       ``lease.evictions == epoch``; otherwise it returns False and runs nothing.
 *
 *   Recall.start(start, repeat, what, alarm, template, lease, epoch[, shape, shaped])
 *       a nonblocking method's matcher by value: calling it with arguments equal to what
 *       ``template`` was made of, ``lease.evictions == epoch`` and ``alarm.broken`` None
 *       returns ``start(repeat, what)`` (an IRestart, below: the repeat's request), or None
 *       when that returns None or NotImplemented or the arguments do not match (the Python
 *       path starts the call).  With ``shape`` (a template whose arrays are compared by
 *       dtype, shape and strides: dualmpi.calls.shape_template_of), arguments
 *       equal to what that was made of, two arrays apart, start ``shaped[addresses]``
 *       instead (a dict by the tuple of the arrays' data addresses, which the Python path
 *       fills: a repeat whose copies are at those addresses), or None when it has none.
 *
 *   Recall.chain(matchers)
 *       several matchers of one method (a tuple of them, the most recent first): calling it
 *       runs the first whose arguments match and returns True, else returns False.  A
 *       program that alternates between buffers (``a, b = b, a``) repeats each call from C.
 *
 * Built by dualmpi.engine.recall with the MPI library's mpicc into the round loop's cache
 * (dualmpi.engine.cloop.build) and loaded through ctypes (PyInit_dualmpi_recall).  It makes
 * no MPI call of its own.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <time.h>
#include <stdint.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#define MAX_HELD 4
#define MAX_CHECKS 2
#define MAX_DIMS 8
#define SEEN 8  /* address sets a matcher by shape declines: its last calls' (Recall.shape's seen) */
#define MAX_SHAPED 2  /* arrays a template by shape compares (dualmpi.calls.shape_template_of) */

typedef int (*run_fn)(void *);
/* The kinds of a template's entries (see same(), below). */
enum { TK_SAME, TK_ARRAY, TK_INT, TK_INTS, TK_SEQ, TK_VALUES, TK_HANDLE, TK_SHAPE };

typedef struct {
    PyArrayObject *array;     /* held (also among the held arguments) */
    PyArray_Descr *dtype;     /* compared by identity */
    int ndim, writable;
    npy_intp dims[MAX_DIMS];
} Check;

typedef struct Recall {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    /* a bound call */
    run_fn fn;
    void *arg;
    PyObject *keep, *wd, *tracked, *failed;
    /* a matcher */
    struct Recall *bound;     /* the bound call it runs, or NULL (then ``call``) */
    PyObject *call;
    PyObject *held[MAX_HELD];
    PyObject *template;       /* a matcher by value (Recall.like), else NULL */
    int nchecks;
    Check checks[MAX_CHECKS];
    PyObject *engine;         /* the lease's ``evicted`` cell (an int64 array), held */
    const int64_t *evicted;   /* its value, read at every call */
    long long epoch;
    int shaped;               /* a matcher by shape (Recall.shape): ``shape_template`` */
    int nshaped;              /* the arrays that template compares */
    int64_t *patch;           /* its (slot, k, offset) triples, ``npatch`` of them */
    Py_ssize_t npatch;
    int declines, next_seen;  /* it declines calls at the addresses of its last calls */
    int64_t seen[SEEN][MAX_SHAPED + 1];  /* [number of arrays, their data addresses] */
    PyObject *at;             /* a dict: the call bound at such addresses (Recall.shape's at) */
    PyObject *wanted;         /* a set: the address sets it declined (Recall.shape's wanted) */
    /* a matcher by shape's template, or a nonblocking repeat's (kind 3) for calls on other
     * arrays of its shape, and then their repeats by the arrays' addresses (Recall.start's
     * shape and shaped) */
    PyObject *shape_template, *shaped_repeats;
    int matcher;              /* 0 a bound call, 1 a matcher, 2 a chain (``call``: a tuple),
                               * 3 a nonblocking repeat's (``call``: start, repeat, what, alarm) */
} Recall;

static PyTypeObject RecallType;
static PyObject *str_state, *str_evicted, *str_broken, *str_plan, *str_keep;

/* Hold ``lease.evicted`` (an int64 array whose first item turns 1 when the engine drops a
 * runner of the remembered call: dualmpi.engine.core.Lease) in *hold, its address in *at; -1
 * with an error set when it is not such an array.  A call compares that value with its epoch
 * (0) without an attribute lookup. */
static int engine_cell(PyObject *engine, PyObject **hold, const int64_t **at)
{
    PyObject *a = PyObject_GetAttr(engine, str_evicted);
    if (a == NULL)
        return -1;
    if (!PyArray_Check(a) || PyArray_TYPE((PyArrayObject *)a) != NPY_INT64 ||
            PyArray_SIZE((PyArrayObject *)a) < 1 ||
            !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)a)) {
        Py_DECREF(a);
        PyErr_SetString(PyExc_TypeError, "the lease's evicted is not an int64 array");
        return -1;
    }
    *hold = a;
    *at = (const int64_t *)PyArray_DATA((PyArrayObject *)a);
    return 0;
}

static void Recall_dealloc(Recall *self)
{
    Py_XDECREF(self->keep);
    Py_XDECREF(self->wd);
    Py_XDECREF(self->tracked);
    Py_XDECREF(self->failed);
    Py_XDECREF((PyObject *)self->bound);
    Py_XDECREF(self->call);
    for (int i = 0; i < MAX_HELD; i++)
        Py_XDECREF(self->held[i]);
    Py_XDECREF(self->template);
    Py_XDECREF(self->shape_template);
    Py_XDECREF(self->shaped_repeats);
    for (int i = 0; i < self->nchecks; i++) {
        Py_XDECREF((PyObject *)self->checks[i].array);
        Py_XDECREF((PyObject *)self->checks[i].dtype);
    }
    Py_XDECREF(self->engine);
    PyMem_Free(self->patch);
    Py_XDECREF(self->at);
    Py_XDECREF(self->wanted);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Run a bound call: fn(arg) without the GIL, under the watchdog; NULL with the error set.
 * ``wd.state`` is made ``tracked`` unless it is already, and stays so: the loop's counter says
 * 0 (waiting nowhere) once the call is over, which the watchdog reads as no wait
 * (dualmpi.engine.watchdog._Tracked), so a call repeated writes no attribute. */
static PyObject *run_bound(Recall *self)
{
    int err;
    if (self->wd != NULL) {
        PyObject *now = PyObject_GetAttr(self->wd, str_state);
        if (now == NULL)
            return NULL;
        Py_DECREF(now);
        if (now != self->tracked && PyObject_SetAttr(self->wd, str_state, self->tracked) < 0)
            return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    err = self->fn(self->arg);
    Py_END_ALLOW_THREADS
    if (err) {
        PyObject *out = PyObject_CallFunction(self->failed, "i", err);
        if (out == NULL)
            return NULL;
        Py_DECREF(out);  /* failed() raises; should it return, the call is over */
    }
    Py_RETURN_NONE;
}

static int same(PyObject *t, PyObject *x);

/* 1 when the call's arguments are the held ones (or what the template was made of) and its
 * arrays unchanged, 0 if not, -1 on error. */
/* The engine's cache still holds the plan: 1, 0 if not, -1 on error. */
static int same_epoch(Recall *self)
{
    return *self->evicted == self->epoch;
}

static int matches_shape(Recall *self, PyObject *const *args, Py_ssize_t nargs,
                         PyObject **found, PyObject **bound);

/* ``found``: a matcher by shape's arrays (MAX_SHAPED), borrowed, when it matches; ``bound``
 * (borrowed) the call it has for their addresses, or NULL (matches_shape). */
static int matches(Recall *self, PyObject *const *args, Py_ssize_t nargs, PyObject **found,
                   PyObject **bound)
{
    *bound = NULL;
    if (self->shaped)
        return matches_shape(self, args, nargs, found, bound);
    if (self->template != NULL) {
        if (nargs != PyTuple_GET_SIZE(self->template))
            return 0;
        for (Py_ssize_t i = 0; i < nargs; i++) {
            int ok = same(PyTuple_GET_ITEM(self->template, i), args[i]);
            if (ok != 1)
                return ok;
        }
    } else {
        if (nargs > MAX_HELD)
            return 0;
        for (Py_ssize_t i = 0; i < MAX_HELD; i++)
            if ((i < nargs ? args[i] : Py_None) != self->held[i])
                return 0;
    }
    int ok = same_epoch(self);
    if (ok != 1)
        return ok;
    for (int i = 0; i < self->nchecks; i++) {
        Check *c = &self->checks[i];
        PyArrayObject *a = c->array;
        if (PyArray_DESCR(a) != c->dtype || PyArray_NDIM(a) != c->ndim)
            return 0;
        for (int d = 0; d < c->ndim; d++)
            if (PyArray_DIMS(a)[d] != c->dims[d])
                return 0;
        if (c->writable && !PyArray_ISWRITEABLE(a))
            return 0;
    }
    return 1;
}

/* A matcher by shape that declines calls at seen addresses notes those of ``found`` (``n``
 * arrays) among them (the oldest out). */
static void note_seen(Recall *self, PyObject *const *found, int n)
{
    int64_t *row = self->seen[self->next_seen];
    row[0] = n;
    for (int i = 0; i < n; i++)
        row[1 + i] = (int64_t)(uintptr_t)PyArray_DATA((PyArrayObject *)found[i]);
    self->next_seen = (self->next_seen + 1) % SEEN;
}

/* The arrays ``found`` (``n``) are at the addresses of one of the matcher's last calls. */
static int at_seen(Recall *self, PyObject *const *found, int n)
{
    for (int j = 0; j < SEEN; j++) {
        const int64_t *row = self->seen[j];
        int same = row[0] == n;
        for (int i = 0; same && i < n; i++)
            same = row[1 + i] == (int64_t)(uintptr_t)PyArray_DATA((PyArrayObject *)found[i]);
        if (same)
            return 1;
    }
    return 0;
}

/* The tuple of the data addresses of ``found`` (``n`` arrays), or NULL with an error set. */
static PyObject *addresses(PyObject *const *found, int n)
{
    PyObject *key = PyTuple_New(n);
    if (key == NULL)
        return NULL;
    for (int k = 0; k < n; k++) {
        PyObject *v = PyLong_FromVoidPtr(PyArray_DATA((PyArrayObject *)found[k]));
        if (v == NULL) {
            Py_DECREF(key);
            return NULL;
        }
        PyTuple_SET_ITEM(key, k, v);
    }
    return key;
}

/* The arguments are what the template by shape ``t`` (dualmpi.calls.shape_template_of) was
 * made of, its arrays (``found``: MAX_SHAPED, borrowed; *n of them) apart: 1, 0 if not, -1 on
 * error. */
static int shape_arrays(PyObject *t, PyObject *const *args, Py_ssize_t nargs, PyObject **found,
                        int *n)
{
    *n = 0;
    if (nargs != PyTuple_GET_SIZE(t))
        return 0;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *e = PyTuple_GET_ITEM(t, i);
        int ok = same(e, args[i]);
        if (ok != 1)
            return ok;
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(e, 0));
        PyObject *a = NULL;
        if (kind == TK_SHAPE)
            a = args[i];
        else if (kind == TK_SEQ && PyTuple_GET_SIZE(PyTuple_GET_ITEM(e, 2)) &&
                 PyLong_AsLong(PyTuple_GET_ITEM(PyTuple_GET_ITEM(PyTuple_GET_ITEM(e, 2), 0), 0))
                     == TK_SHAPE)
            a = PySequence_Fast_GET_ITEM(args[i], 0);
        if (a != NULL) {
            if (*n == MAX_SHAPED)
                return 0;
            found[(*n)++] = a;
        }
    }
    /* two arrays must not share bytes (mpi4py reads a send buffer at the receive buffer's
     * address as in place: another call) */
    if (*n == 2) {
        PyArrayObject *a = (PyArrayObject *)found[0], *b = (PyArrayObject *)found[1];
        char *la = PyArray_BYTES(a), *lb = PyArray_BYTES(b);
        npy_intp na = PyArray_NBYTES(a), nb = PyArray_NBYTES(b);
        if (na && nb && la < lb + nb && lb < la + na)
            return 0;
    }
    return 1;
}

/* matches() of a matcher by shape (Recall.shape): its template, the lease live; then
 * ``*bound`` (borrowed) is the call its ``at`` has for the arrays' addresses, or NULL when it
 * has none -- and a call at the addresses of one of its last calls is declined. */
static int matches_shape(Recall *self, PyObject *const *args, Py_ssize_t nargs,
                         PyObject **found, PyObject **bound)
{
    int n;
    *bound = NULL;
    int ok = shape_arrays(self->shape_template, args, nargs, found, &n);
    if (ok != 1)
        return ok;
    ok = same_epoch(self);
    if (ok != 1 || !self->declines)
        return ok;
    const int again = at_seen(self, found, n);
    if (!again && !PyDict_GET_SIZE(self->at))
        return 1;
    PyObject *key = addresses(found, n);
    if (key == NULL)
        return -1;
    *bound = PyDict_GetItemWithError(self->at, key);
    if (*bound == NULL && !PyErr_Occurred() && again && PySet_Add(self->wanted, key) == 0) {
        Py_DECREF(key);
        return 0;  /* declined: the Python path binds a plan at these addresses */
    }
    Py_DECREF(key);
    return PyErr_Occurred() ? -1 : 1;
}

/* A matcher by shape writes its arrays' (``found``) addresses into its bound call's copies,
 * and notes them among those it declines. */
static void write_patches(Recall *self, PyObject *const *found)
{
    for (Py_ssize_t j = 0; j < self->npatch; j++) {
        const int64_t *p = self->patch + 3 * j;
        PyArrayObject *a = (PyArrayObject *)found[p[1]];
        *(int64_t *)(uintptr_t)p[0] = (int64_t)(uintptr_t)PyArray_BYTES(a) + p[2];
    }
    if (self->declines)
        note_seen(self, found, self->nshaped);
}

/* A nonblocking repeat's matcher given other arrays of its shape (``shape_template``, the
 * lease live, two arrays apart): the repeat made for their addresses (borrowed, from
 * ``shaped``: a dict by the tuple of the arrays' data addresses), or NULL (an error set, or
 * none: the Python path makes it). */
static PyObject *shaped_repeat(Recall *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *arrays[MAX_SHAPED];
    int n;
    if (shape_arrays(self->shape_template, args, nargs, arrays, &n) != 1)
        return NULL;
    if (same_epoch(self) != 1)
        return NULL;
    PyObject *key = addresses(arrays, n);
    if (key == NULL)
        return NULL;
    PyObject *repeat = PyDict_GetItemWithError(self->shaped_repeats, key);
    Py_DECREF(key);
    return repeat;
}

/* A request started on new arrays (a shaped repeat) holds the call's arguments while its
 * PlanRequest lives (``request._plan.keep``), as mpi4py's request holds its buffers. */
static int keep_args(PyObject *request, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *plan = PyObject_GetAttr(request, str_plan);
    if (plan == NULL)
        return -1;
    PyObject *held = PyTuple_New(nargs);
    if (held == NULL) {
        Py_DECREF(plan);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        PyTuple_SET_ITEM(held, i, Py_NewRef(args[i]));
    int err = PyObject_SetAttr(plan, str_keep, held);
    Py_DECREF(held);
    Py_DECREF(plan);
    return err;
}

static PyObject *Recall_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames)
{
    Recall *self = (Recall *)obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!self->matcher) {
        if (nargs || (kwnames && PyTuple_GET_SIZE(kwnames))) {
            PyErr_SetString(PyExc_TypeError, "a bound call takes no argument");
            return NULL;
        }
        return run_bound(self);
    }
    if (self->matcher == 3) {  /* a nonblocking repeat: its request, or None */
        if (kwnames && PyTuple_GET_SIZE(kwnames))
            Py_RETURN_NONE;
        PyObject *t = self->call;  /* (start, repeat, what, alarm) */
        PyObject *repeat = PyTuple_GET_ITEM(t, 1), *found[MAX_SHAPED], *bound;
        int ok = matches(self, args, nargs, found, &bound);
        if (ok < 0)
            return NULL;
        if (!ok) {  /* other arrays of its shape, at addresses a repeat was made for? */
            repeat = self->shape_template == NULL ? NULL : shaped_repeat(self, args, nargs);
            if (repeat == NULL)
                return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
        }
        PyObject *broken = PyObject_GetAttr(PyTuple_GET_ITEM(t, 3), str_broken);
        if (broken == NULL)
            return NULL;
        int raised = broken != Py_None;
        Py_DECREF(broken);
        if (raised)
            Py_RETURN_NONE;
        PyObject *pair[2] = {repeat, PyTuple_GET_ITEM(t, 2)};
        PyObject *out = PyObject_Vectorcall(PyTuple_GET_ITEM(t, 0), pair, 2, NULL);
        if (out != NULL && out != Py_None && out != Py_NotImplemented &&
                repeat != PyTuple_GET_ITEM(t, 1) && keep_args(out, args, nargs) < 0)
            Py_CLEAR(out);
        if (out == Py_NotImplemented) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        return out;
    }
    if (kwnames && PyTuple_GET_SIZE(kwnames))
        Py_RETURN_FALSE;  /* keywords: the Python path reads them */
    PyObject *found[MAX_SHAPED], *bound;
    if (self->matcher == 2) {
        /* the chain's tuple holds its matchers while one runs (and may install another) */
        PyObject *chain = self->call;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(chain); i++) {
            Recall *m = (Recall *)PyTuple_GET_ITEM(chain, i);
            int ok = matches(m, args, nargs, found, &bound);
            if (ok < 0)
                return NULL;
            if (ok) {
                self = m;
                goto run;
            }
        }
        Py_RETURN_FALSE;
    }
    int ok = matches(self, args, nargs, found, &bound);
    if (ok < 0)
        return NULL;
    if (!ok)
        Py_RETURN_FALSE;
run:;
    PyObject *out;
    if (bound != NULL) {  /* the call bound at the arrays' addresses, given the arrays */
        Py_INCREF(bound);  /* (it may leave ``at`` while it runs) */
        out = PyObject_Vectorcall(bound, found, (size_t)self->nshaped, NULL);
        Py_DECREF(bound);
    } else {
        if (self->shaped)
            write_patches(self, found);
        out = self->bound != NULL ? run_bound(self->bound) : PyObject_CallNoArgs(self->call);
    }
    if (out == NULL)
        return NULL;
    Py_DECREF(out);
    Py_RETURN_TRUE;
}

/* Recall(fn, arg, keep, wd, tracked, failed): a bound call. */
static PyObject *Recall_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    unsigned long long fn, arg;
    PyObject *keep, *wd, *tracked, *failed;
    if (kw != NULL && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Recall() takes no keyword argument");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "KKOOOO", &fn, &arg, &keep, &wd, &tracked, &failed))
        return NULL;
    if (!fn || !PyCallable_Check(failed)) {
        PyErr_SetString(PyExc_ValueError, "Recall: no function, or failed is not callable");
        return NULL;
    }
    Recall *self = (Recall *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = Recall_vectorcall;
    self->fn = (run_fn)(uintptr_t)fn;
    self->arg = (void *)(uintptr_t)arg;
    Py_INCREF(keep); self->keep = keep;
    if (wd != Py_None) { Py_INCREF(wd); self->wd = wd; }
    Py_INCREF(tracked); self->tracked = tracked;
    Py_INCREF(failed); self->failed = failed;
    return (PyObject *)self;
}

/* A new matcher (``kind`` 1) or chain (2), nothing set in it yet. */
static Recall *new_recall(int kind)
{
    Recall *self = (Recall *)RecallType.tp_alloc(&RecallType, 0);
    if (self != NULL) {
        self->vectorcall = Recall_vectorcall;
        self->matcher = kind;
    }
    return self;
}

/* A new matcher running ``call`` (a bound call directly, else through Python) while
 * ``lease.evictions == epoch``; what it compares is the caller's to set. */
static Recall *new_matcher(PyObject *call, PyObject *engine, long long epoch)
{
    Recall *self = new_recall(1);
    if (self == NULL)
        return NULL;
    Py_INCREF(call);
    if (Py_IS_TYPE(call, &RecallType) && !((Recall *)call)->matcher)
        self->bound = (Recall *)call;
    else
        self->call = call;
    if (engine_cell(engine, &self->engine, &self->evicted) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->epoch = epoch;
    return self;
}

/* A matcher holds ``held``'s items (None for the missing ones, up to MAX_HELD). */
static void hold(Recall *self, PyObject *held)
{
    for (Py_ssize_t i = 0; i < MAX_HELD; i++) {
        PyObject *h = i < PyTuple_GET_SIZE(held) ? PyTuple_GET_ITEM(held, i) : Py_None;
        Py_INCREF(h);
        self->held[i] = h;
    }
}

/* Recall.match(call, held, checks, lease, epoch): a matcher. */
static PyObject *Recall_match(PyObject *Py_UNUSED(cls), PyObject *args)
{
    PyObject *call, *held, *checks, *engine;
    long long epoch;
    if (!PyArg_ParseTuple(args, "OO!O!OL", &call, &PyTuple_Type, &held, &PyTuple_Type, &checks,
                          &engine, &epoch))
        return NULL;
    if (PyTuple_GET_SIZE(held) > MAX_HELD || PyTuple_GET_SIZE(checks) > MAX_CHECKS ||
            !PyCallable_Check(call)) {
        PyErr_SetString(PyExc_ValueError, "Recall.match: at most 4 arguments and 2 arrays, "
                        "and a callable");
        return NULL;
    }
    Recall *self = new_matcher(call, engine, epoch);
    if (self == NULL)
        return NULL;
    hold(self, held);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(checks); i++) {
        PyObject *arr, *dtype, *shape;
        int writable;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(checks, i), "O!O!O!p", &PyArray_Type, &arr,
                              &PyArrayDescr_Type, &dtype, &PyTuple_Type, &shape, &writable))
            goto fail;
        Check *c = &self->checks[i];
        Py_ssize_t nd = PyTuple_GET_SIZE(shape);
        if (nd > MAX_DIMS) {
            PyErr_SetString(PyExc_ValueError, "Recall.match: too many dimensions");
            goto fail;
        }
        Py_INCREF(arr); c->array = (PyArrayObject *)arr;
        Py_INCREF(dtype); c->dtype = (PyArray_Descr *)dtype;
        self->nchecks = (int)i + 1;
        c->ndim = (int)nd;
        c->writable = writable;
        for (Py_ssize_t d = 0; d < nd; d++) {
            c->dims[d] = (npy_intp)PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
            if (c->dims[d] == -1 && PyErr_Occurred())
                goto fail;
        }
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

/* The number of arrays a template by shape compares (its TK_SHAPE entries, bare or first in a
 * sequence), or -1 when ``t`` is not such a template (an error set). */
static int shape_count(PyObject *t)
{
    int n = 0;
    if (!PyTuple_Check(t))
        goto bad;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++) {
        PyObject *e = PyTuple_GET_ITEM(t, i);
        if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) < 1 || !PyLong_Check(PyTuple_GET_ITEM(e, 0)))
            goto bad;
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(e, 0));
        if (kind == TK_SEQ && PyTuple_GET_SIZE(e) == 3 && PyTuple_Check(PyTuple_GET_ITEM(e, 2)) &&
                PyTuple_GET_SIZE(PyTuple_GET_ITEM(e, 2))) {
            PyObject *first = PyTuple_GET_ITEM(PyTuple_GET_ITEM(e, 2), 0);
            if (!PyTuple_Check(first) || PyTuple_GET_SIZE(first) < 1)
                goto bad;
            kind = PyLong_AsLong(PyTuple_GET_ITEM(first, 0));
        }
        if (kind == TK_SHAPE)
            n++;
    }
    if (n <= MAX_SHAPED)
        return n;
bad:
    PyErr_SetString(PyExc_ValueError, "Recall.shape: not a template by shape of at most 2 "
                    "arrays");
    return -1;
}

/* Recall.shape(call, shape, lease, epoch, patches[, seen, at, wanted]): a matcher by shape. */
static PyObject *Recall_shape(PyObject *Py_UNUSED(cls), PyObject *args)
{
    PyObject *call, *shape, *engine, *patches, *seen = Py_None, *at = Py_None;
    PyObject *wanted = Py_None;
    long long epoch;
    if (!PyArg_ParseTuple(args, "OO!OLO!|OOO", &call, &PyTuple_Type, &shape, &engine, &epoch,
                          &PyArray_Type, &patches, &seen, &at, &wanted))
        return NULL;
    if ((seen == Py_None) != (at == Py_None) || (seen == Py_None) != (wanted == Py_None) ||
            (seen != Py_None && (!PyTuple_Check(seen) || PyTuple_GET_SIZE(seen) > SEEN ||
                                 !PyDict_Check(at) || !PySet_Check(wanted)))) {
        PyErr_SetString(PyExc_ValueError, "Recall.shape: seen a tuple of at most 8 tuples of "
                        "addresses, at a dict and wanted a set, or none of them");
        return NULL;
    }
    PyArrayObject *pa = (PyArrayObject *)patches;
    if (!PyCallable_Check(call) || PyArray_TYPE(pa) != NPY_INT64 || PyArray_NDIM(pa) != 2 ||
            PyArray_DIM(pa, 1) != 3 || !PyArray_IS_C_CONTIGUOUS(pa)) {
        PyErr_SetString(PyExc_ValueError, "Recall.shape: a callable, and patches an int64 "
                        "array of three columns");
        return NULL;
    }
    int narrays = shape_count(shape);
    if (narrays < 0)
        return NULL;
    Recall *self = new_matcher(call, engine, epoch);
    if (self == NULL)
        return NULL;
    self->shaped = 1;
    Py_INCREF(shape);
    self->shape_template = shape;
    self->nshaped = narrays;
    self->npatch = PyArray_DIM(pa, 0);
    self->patch = PyMem_Malloc(sizeof(int64_t) * 3 * (self->npatch ? self->npatch : 1));
    if (self->patch == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    memcpy(self->patch, PyArray_DATA(pa), sizeof(int64_t) * 3 * self->npatch);
    for (Py_ssize_t j = 0; j < self->npatch; j++)
        if (self->patch[3 * j + 1] < 0 || self->patch[3 * j + 1] >= self->nshaped ||
                !self->patch[3 * j]) {
            PyErr_SetString(PyExc_ValueError, "Recall.shape: a patch names no array");
            goto fail;
        }
    if (seen != Py_None) {
        self->declines = 1;
        Py_INCREF(at);
        self->at = at;
        Py_INCREF(wanted);
        self->wanted = wanted;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seen); i++) {
            PyObject *t = PyTuple_GET_ITEM(seen, i);
            if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != self->nshaped) {
                PyErr_SetString(PyExc_ValueError, "Recall.shape: seen holds a tuple of an "
                                "address per array");
                goto fail;
            }
            int64_t *row = self->seen[self->next_seen];
            row[0] = self->nshaped;
            for (int k = 0; k < self->nshaped; k++) {
                row[1 + k] = (int64_t)(intptr_t)PyLong_AsVoidPtr(PyTuple_GET_ITEM(t, k));
                if (PyErr_Occurred())
                    goto fail;
            }
            self->next_seen = (self->next_seen + 1) % SEEN;
        }
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

/* Recall.like(call, template, lease, epoch): a matcher by value. */
static PyObject *Recall_like(PyObject *Py_UNUSED(cls), PyObject *args)
{
    PyObject *call, *template, *engine;
    long long epoch;
    if (!PyArg_ParseTuple(args, "OO!OL", &call, &PyTuple_Type, &template, &engine, &epoch))
        return NULL;
    if (!PyCallable_Check(call)) {
        PyErr_SetString(PyExc_ValueError, "Recall.like: a callable");
        return NULL;
    }
    Recall *self = new_matcher(call, engine, epoch);
    if (self == NULL)
        return NULL;
    Py_INCREF(template);
    self->template = template;
    return (PyObject *)self;
}

/* Recall.start(start, repeat, what, alarm, template, lease, epoch[, shape, shaped]): a
 * matcher by value of a nonblocking method's repeat (and of calls on other arrays of its
 * shape). */
static PyObject *Recall_start(PyObject *Py_UNUSED(cls), PyObject *args)
{
    PyObject *start, *repeat, *what, *alarm, *template, *engine, *shape = Py_None,
             *shaped = Py_None;
    long long epoch;
    if (!PyArg_ParseTuple(args, "OOOOO!OL|OO", &start, &repeat, &what, &alarm, &PyTuple_Type,
                          &template, &engine, &epoch, &shape, &shaped))
        return NULL;
    if (!PyCallable_Check(start) || (shape != Py_None && (!PyTuple_Check(shape) ||
                                                          !PyDict_CheckExact(shaped)))) {
        PyErr_SetString(PyExc_ValueError, "Recall.start: a callable (and a shape template "
                        "with a dict of repeats)");
        return NULL;
    }
    Recall *self = new_recall(3);
    if (self == NULL)
        return NULL;
    self->call = PyTuple_Pack(4, start, repeat, what, alarm);
    if (self->call == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    Py_INCREF(template);
    self->template = template;
    if (engine_cell(engine, &self->engine, &self->evicted) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->epoch = epoch;
    if (shape != Py_None) {
        self->shape_template = Py_NewRef(shape);
        self->shaped_repeats = Py_NewRef(shaped);
    }
    return (PyObject *)self;
}

/* Recall.chain(matchers): a chain of matchers (a tuple of at least one). */
static PyObject *Recall_chain(PyObject *Py_UNUSED(cls), PyObject *args)
{
    PyObject *matchers;
    if (!PyArg_ParseTuple(args, "O!", &PyTuple_Type, &matchers))
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(matchers); i++) {
        PyObject *m = PyTuple_GET_ITEM(matchers, i);
        if (!Py_IS_TYPE(m, &RecallType) || ((Recall *)m)->matcher != 1) {
            PyErr_SetString(PyExc_ValueError, "Recall.chain: a tuple of matchers");
            return NULL;
        }
    }
    Recall *self = new_recall(2);
    if (self == NULL)
        return NULL;
    Py_INCREF(matchers);
    self->call = matchers;
    return (PyObject *)self;
}

/* -- the v-variants: arguments compared by value too ------------------------------------------
 *
 * A v-variant's arguments are buffer specs whose counts and displacements the program may
 * change in place between calls (the same list objects), so they are compared with a
 * *template* made of them by dualmpi.calls.template_of: a tuple of one entry per argument,
 * each entry a tuple whose first item says how to compare:
 *
 *   (SAME, obj)                          the same object (None, MPI.IN_PLACE, MPI.BOTTOM, a ufunc)
 *   (ARRAY, a, dtype, shape, strides, w) the same array, its dtype (by identity), shape,
 *                                        strides and writability as they were
 *   (INT, v)                             an int (exactly) of that value
 *   (INTS, type, packed)                 a list or tuple (exactly) of ints of those values
 *                                        (``packed``: their int64 bytes)
 *   (SEQ, type, (entries...))            a list or tuple (exactly) of items, each compared
 *   (VALUES, dtype, shape, bytes)        an integer array of those values (C-contiguous)
 *   (HANDLE, obj, handle)                the same MPI object, whose ``handle`` is still that
 *   (SHAPE, dtype, shape, strides, w)    any numpy.ndarray (exactly) of that dtype (by
 *                                        identity), shape and strides, writable when ``w``
 *                                        (dualmpi.calls.shape_template_of)
 */
/* (the kinds are listed above same(), below) */

static PyObject *str_handle;

static int same(PyObject *t, PyObject *x);

/* (ARRAY, a, dtype, shape, strides, w): ``at`` 2; (SHAPE, dtype, shape, strides, w): ``at`` 1 */
static int same_array(PyObject *t, PyObject *x, int at)
{
    if (at == 2 ? x != PyTuple_GET_ITEM(t, 1) : !PyArray_CheckExact(x))
        return 0;
    PyArrayObject *a = (PyArrayObject *)x;
    PyObject *shape = PyTuple_GET_ITEM(t, at + 1), *strides = PyTuple_GET_ITEM(t, at + 2);
    int nd = PyArray_NDIM(a);
    /* writable: an array by identity as it was; by shape, writable when asked */
    const int writable = PyObject_IsTrue(PyTuple_GET_ITEM(t, at + 3));
    const int now = PyArray_ISWRITEABLE(a) != 0;
    if ((PyObject *)PyArray_DESCR(a) != PyTuple_GET_ITEM(t, at) ||
            nd != PyTuple_GET_SIZE(shape) || (at == 2 ? writable != now : writable && !now))
        return 0;
    for (int d = 0; d < nd; d++) {
        if (PyArray_DIMS(a)[d] != PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d)) ||
                PyArray_STRIDES(a)[d] != PyLong_AsSsize_t(PyTuple_GET_ITEM(strides, d)))
            return PyErr_Occurred() ? -1 : 0;
    }
    return 1;
}

static int same_int(PyObject *x, long long v)
{
    if (!PyLong_CheckExact(x))
        return 0;
    int overflow;
    long long got = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (got == -1 && PyErr_Occurred())
        return -1;
    return !overflow && got == v;
}

static int same(PyObject *t, PyObject *x)
{
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(t, 0));
    switch (kind) {
    case TK_SAME:
        return x == PyTuple_GET_ITEM(t, 1);
    case TK_ARRAY:
        return same_array(t, x, 2);
    case TK_SHAPE:
        return same_array(t, x, 1);
    case TK_INT:
        return same_int(x, PyLong_AsLongLong(PyTuple_GET_ITEM(t, 1)));
    case TK_INTS: {
        if ((PyObject *)Py_TYPE(x) != PyTuple_GET_ITEM(t, 1))
            return 0;
        PyObject *packed = PyTuple_GET_ITEM(t, 2);
        const long long *v = (const long long *)PyBytes_AS_STRING(packed);
        Py_ssize_t n = PyBytes_GET_SIZE(packed) / (Py_ssize_t)sizeof(long long);
        if (PySequence_Fast_GET_SIZE(x) != n)
            return 0;
        PyObject **items = PySequence_Fast_ITEMS(x);
        for (Py_ssize_t i = 0; i < n; i++) {
            int ok = same_int(items[i], v[i]);
            if (ok != 1)
                return ok;
        }
        return 1;
    }
    case TK_SEQ: {
        if ((PyObject *)Py_TYPE(x) != PyTuple_GET_ITEM(t, 1))
            return 0;
        PyObject *entries = PyTuple_GET_ITEM(t, 2);
        Py_ssize_t n = PyTuple_GET_SIZE(entries);
        if (PySequence_Fast_GET_SIZE(x) != n)
            return 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            /* a list may change while it is compared: hold the item */
            if (i >= PySequence_Fast_GET_SIZE(x))
                return 0;
            PyObject *item = PySequence_Fast_GET_ITEM(x, i);
            Py_INCREF(item);
            int ok = same(PyTuple_GET_ITEM(entries, i), item);
            Py_DECREF(item);
            if (ok != 1)
                return ok;
        }
        return 1;
    }
    case TK_VALUES: {
        if (!PyArray_CheckExact(x))
            return 0;
        PyArrayObject *a = (PyArrayObject *)x;
        PyObject *shape = PyTuple_GET_ITEM(t, 2), *bytes = PyTuple_GET_ITEM(t, 3);
        if (!PyArray_EquivTypes(PyArray_DESCR(a), (PyArray_Descr *)PyTuple_GET_ITEM(t, 1)) ||
                !PyArray_IS_C_CONTIGUOUS(a) || PyArray_NDIM(a) != PyTuple_GET_SIZE(shape) ||
                PyArray_NBYTES(a) != PyBytes_GET_SIZE(bytes))
            return 0;
        for (int d = 0; d < PyArray_NDIM(a); d++)
            if (PyArray_DIMS(a)[d] != PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d)))
                return PyErr_Occurred() ? -1 : 0;
        return memcmp(PyArray_DATA(a), PyBytes_AS_STRING(bytes), PyArray_NBYTES(a)) == 0;
    }
    case TK_HANDLE: {
        if (x != PyTuple_GET_ITEM(t, 1))
            return 0;
        PyObject *h = PyObject_GetAttr(x, str_handle);
        if (h == NULL)
            return -1;
        int ok = PyObject_RichCompareBool(h, PyTuple_GET_ITEM(t, 2), Py_EQ);
        Py_DECREF(h);
        return ok;
    }
    default:
        PyErr_Format(PyExc_ValueError, "recall: no template kind %ld", kind);
        return -1;
    }
}

/* same(template, args): the comparison of dualmpi.calls.template_of's templates, in C. */
static PyObject *recall_same(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyTuple_Check(args[0]) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "same(template, args): two tuples");
        return NULL;
    }
    PyObject *t = args[0], *a = args[1];
    if (PyTuple_GET_SIZE(t) != PyTuple_GET_SIZE(a))
        Py_RETURN_FALSE;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++) {
        int ok = same(PyTuple_GET_ITEM(t, i), PyTuple_GET_ITEM(a, i));
        if (ok < 0)
            return NULL;
        if (!ok)
            Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

/* VRecall(template, lease, epoch, exchange, table, seen, data): a repeated v-variant call.
 *
 * Called with the arguments ``template`` was made of (still the same values) and the
 * lease live, it runs ``exchange`` (the count table's allgather, a bound
 * call filling ``table``); when ``table`` then holds the bytes ``seen`` it runs ``data``
 * (the call's plan bound to its buffers) and returns True; when the table changed it
 * returns None (the count table is in: the Python path goes on from there).  Otherwise it
 * runs nothing and returns False.
 *
 * VRecall(template, lease, epoch, exchange, table, seen, data, pair): a repeated v-variant
 * call run speculatively: ``pair`` (a bound call) exchanges the count table while the plan
 * runs on the buffers (dualmpi.engine.mpi.pair); True when the table is ``seen``, None when
 * it changed (the call's data is then the Python path's to redo). */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *template, *engine, *table, *seen;  /* (engine: its ``evicted`` cell) */
    const int64_t *evicted;
    Recall *exchange, *data, *pair;
    long long epoch;
} VRecall;

static PyTypeObject VRecallType;

static void VRecall_dealloc(VRecall *self)
{
    Py_XDECREF(self->template);
    Py_XDECREF(self->engine);
    Py_XDECREF(self->table);
    Py_XDECREF(self->seen);
    Py_XDECREF((PyObject *)self->exchange);
    Py_XDECREF((PyObject *)self->data);
    Py_XDECREF((PyObject *)self->pair);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *VRecall_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf,
                                    PyObject *kwnames)
{
    VRecall *self = (VRecall *)obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if ((kwnames && PyTuple_GET_SIZE(kwnames)) || nargs != PyTuple_GET_SIZE(self->template))
        Py_RETURN_FALSE;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        int ok = same(PyTuple_GET_ITEM(self->template, i), args[i]);
        if (ok < 0)
            return NULL;
        if (!ok)
            Py_RETURN_FALSE;
    }
    if (*self->evicted != self->epoch)
        Py_RETURN_FALSE;
    PyObject *out = run_bound(self->pair != NULL ? self->pair : self->exchange);
    if (out == NULL)
        return NULL;
    Py_DECREF(out);
    PyArrayObject *table = (PyArrayObject *)self->table;
    if (PyArray_NBYTES(table) != PyBytes_GET_SIZE(self->seen) ||
            memcmp(PyArray_DATA(table), PyBytes_AS_STRING(self->seen), PyArray_NBYTES(table)))
        Py_RETURN_NONE;
    if (self->pair != NULL)
        Py_RETURN_TRUE;
    out = run_bound(self->data);
    if (out == NULL)
        return NULL;
    Py_DECREF(out);
    Py_RETURN_TRUE;
}

static PyObject *VRecall_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *template, *engine, *exchange, *table, *seen, *data, *pair = Py_None;
    long long epoch;
    if (kw != NULL && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "VRecall() takes no keyword argument");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!OLO!O!O!O!|O", &PyTuple_Type, &template, &engine, &epoch,
                          &RecallType, &exchange, &PyArray_Type, &table, &PyBytes_Type, &seen,
                          &RecallType, &data, &pair))
        return NULL;
    if (pair != Py_None && (!PyObject_TypeCheck(pair, &RecallType) || ((Recall *)pair)->matcher)) {
        PyErr_SetString(PyExc_ValueError, "VRecall: the pair is not a bound call");
        return NULL;
    }
    if (((Recall *)exchange)->matcher || ((Recall *)data)->matcher ||
            !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)table)) {
        PyErr_SetString(PyExc_ValueError, "VRecall: two bound calls and a contiguous table");
        return NULL;
    }
    VRecall *self = (VRecall *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = VRecall_vectorcall;
    Py_INCREF(template); self->template = template;
    if (engine_cell(engine, &self->engine, &self->evicted) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    Py_INCREF(table); self->table = table;
    Py_INCREF(seen); self->seen = seen;
    Py_INCREF(exchange); self->exchange = (Recall *)exchange;
    Py_INCREF(data); self->data = (Recall *)data;
    if (pair != Py_None) { Py_INCREF(pair); self->pair = (Recall *)pair; }
    self->epoch = epoch;
    return (PyObject *)self;
}

static PyTypeObject VRecallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dualmpi_recall.VRecall",
    .tp_basicsize = sizeof(VRecall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A repeated v-variant call (see dualmpi/engine/recall.c)",
    .tp_new = VRecall_new,
    .tp_dealloc = (destructor)VRecall_dealloc,
    .tp_vectorcall_offset = offsetof(VRecall, vectorcall),
    .tp_call = PyVectorcall_Call,
};

/* A C function of the round loop's library, called with int64 arguments and returning an int
 * (CFunc(address, nargs, release): release the GIL around the call, for one that blocks):
 * what a ctypes function with c_void_p/c_int64 arguments does, without ctypes' conversions. */
#define CFUNC_MAX 7
typedef int64_t i64;

static int cfunc_call(void *fn, int nargs, const i64 *a)
{
    switch (nargs) {  /* (the function's own arity: its arguments are int64s and pointers) */
    case 0: return ((int (*)(void))fn)();
    case 1: return ((int (*)(i64))fn)(a[0]);
    case 2: return ((int (*)(i64, i64))fn)(a[0], a[1]);
    case 3: return ((int (*)(i64, i64, i64))fn)(a[0], a[1], a[2]);
    case 4: return ((int (*)(i64, i64, i64, i64))fn)(a[0], a[1], a[2], a[3]);
    case 5: return ((int (*)(i64, i64, i64, i64, i64))fn)(a[0], a[1], a[2], a[3], a[4]);
    case 6: return ((int (*)(i64, i64, i64, i64, i64, i64))fn)(a[0], a[1], a[2], a[3], a[4],
                                                               a[5]);
    default: return ((int (*)(i64, i64, i64, i64, i64, i64, i64))fn)(a[0], a[1], a[2], a[3],
                                                                      a[4], a[5], a[6]);
    }
}

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    void *fn;
    int nargs, release;
} CFunc;

static PyObject *CFunc_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames)
{
    CFunc *self = (CFunc *)obj;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    int64_t a[CFUNC_MAX] = {0};
    int err;
    if (kwnames != NULL || n != self->nargs) {
        PyErr_Format(PyExc_TypeError, "takes %d positional arguments", self->nargs);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        a[i] = PyLong_AsLongLong(args[i]);
        if (a[i] == -1 && PyErr_Occurred())
            return NULL;
    }
    if (self->release) {
        Py_BEGIN_ALLOW_THREADS
        err = cfunc_call(self->fn, self->nargs, a);
        Py_END_ALLOW_THREADS
    } else {
        err = cfunc_call(self->fn, self->nargs, a);
    }
    return PyLong_FromLong(err);
}

static PyObject *CFunc_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    unsigned long long addr;
    int nargs, release;
    if (kw != NULL || !PyArg_ParseTuple(args, "Kip", &addr, &nargs, &release))
        return NULL;
    if (addr == 0 || nargs < 0 || nargs > CFUNC_MAX) {
        PyErr_SetString(PyExc_ValueError, "CFunc: no function, or too many arguments");
        return NULL;
    }
    CFunc *self = (CFunc *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = CFunc_vectorcall;
    self->fn = (void *)(uintptr_t)addr;
    self->nargs = nargs;
    self->release = release;
    return (PyObject *)self;
}

static PyTypeObject CFuncType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dualmpi_recall.CFunc",
    .tp_basicsize = sizeof(CFunc),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A C function of int64 arguments returning an int (see dualmpi/engine/recall.c)",
    .tp_new = CFunc_new,
    .tp_vectorcall_offset = offsetof(CFunc, vectorcall),
    .tp_call = PyVectorcall_Call,
};

/* A completed call counted (Tick(plans, key, add): dualmpi.calls.Tally.adder): calling it adds
 * one to the call count of ``plans[key]`` (a list whose item 4 is the count, as Tally.add
 * keeps it), or calls ``add()`` when there is no such entry (Tally.add makes it) -- Tally.add
 * without its Python frame, the finish of every remembered nonblocking call. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *plans, *key, *add;
} Tick;

static void Tick_dealloc(Tick *self)
{
    Py_XDECREF(self->plans);
    Py_XDECREF(self->key);
    Py_XDECREF(self->add);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Tick_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames)
{
    Tick *self = (Tick *)obj;
    if (kwnames != NULL || PyVectorcall_NARGS(nargsf) != 0) {
        PyErr_SetString(PyExc_TypeError, "Tick() takes no arguments");
        return NULL;
    }
    PyObject *entry = PyDict_GetItemWithError(self->plans, self->key);  /* (borrowed) */
    if (entry == NULL) {
        if (PyErr_Occurred())
            return NULL;
        return PyObject_CallNoArgs(self->add);
    }
    PyObject *n;
    if (!PyList_CheckExact(entry) || PyList_GET_SIZE(entry) != 8 ||
            !PyLong_CheckExact(n = PyList_GET_ITEM(entry, 4))) {
        PyErr_SetString(PyExc_TypeError, "Tick: a plan's entry is not Tally.add's");
        return NULL;
    }
    long long v = PyLong_AsLongLong(n);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    PyObject *m = PyLong_FromLongLong(v + 1);
    if (m == NULL)
        return NULL;
    PyList_SET_ITEM(entry, 4, m);
    Py_DECREF(n);
    Py_RETURN_NONE;
}

static PyObject *Tick_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *plans, *key, *add;
    if (kw != NULL || !PyArg_ParseTuple(args, "O!OO", &PyDict_Type, &plans, &key, &add))
        return NULL;
    Tick *self = (Tick *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = Tick_vectorcall;
    self->plans = Py_NewRef(plans);
    self->key = Py_NewRef(key);
    self->add = Py_NewRef(add);
    return (PyObject *)self;
}

static PyTypeObject TickType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dualmpi_recall.Tick",
    .tp_basicsize = sizeof(Tick),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A completed call counted in a Tally (see dualmpi/engine/recall.c)",
    .tp_new = Tick_new,
    .tp_dealloc = (destructor)Tick_dealloc,
    .tp_vectorcall_offset = offsetof(Tick, vectorcall),
    .tp_call = PyVectorcall_Call,
};

/* A repeated nonblocking collective started and completed in C (dualmpi/engine/nonblocking.py:
 * Progress.restart and Progress.wait, what their Python does for the common case).
 *
 *   IRestart(progress, plan_type, wrap, active, known, inflight, seq, alarm, watchdog,
 *            istart, step, iwait, w, x, tag_ub, codes, pool_size, repeat_type, compiled_type,
 *            cache, counts)
 *       (the Repeat's and the _Compiled's __slots__ read at their offsets, not as attributes;
 *       ``cache`` the Progress's cache of _Compiled, whose move_to_end is bound once, and
 *       ``counts`` its int64 array of [_seq, restarts, zero_copy], counted in here)
 *       per Progress: calling it with (call, what) (call a nonblocking.Repeat) starts the
 *       repeat as Progress.restart does — rank 0 finds the vector among ``known`` (None on the
 *       other ranks) and moves it to the end, a run is taken from the pool of the plan's
 *       _Compiled (the one bound to the user's buffers when the repeat is zero-copy), and
 *       dualmpi_istart (``istart``, an address) is called; the PlanRequest is made (its
 *       __slots__ written at their offsets), counted in ``active`` and ``inflight``, and
 *       returned as ``wrap(progress, plan)`` does (``wrap``'s two slots _progress and _plan
 *       written, _active True).  Returns None when the start must be Python's from the
 *       beginning (Alarm.nonblocking: the start in C declined, the line read), and
 *       NotImplemented, having done nothing, when Progress.restart must do it (no run in
 *       the pool, a _Compiled retired or not known yet, a vector rank 0 has not seen agreed).
 *       ``codes``: (python, alarm, mode, CROUNDS, DONE, S_K, S_BAD_ROUND, S_POS) of
 *       nonblocking.py and rounds.c.  Called with (call, what, seq) it returns the PlanRequest
 *       itself, not wrapped (a part of a request of several: a v-variant's count table, seq
 *       None, or its data, ``call`` a plain Repeat and ``seq`` the number reserved for it, as
 *       Progress.restart's ``seq``: no call number taken, nothing agreed).
 *
 *   IRestart.close(plan)
 *       the head of Progress.wait: when ``plan`` is the only request in flight, a
 *       PlanRequest in its compiled rounds, it steps it (dualmpi_istep); when that ends the
 *       rounds of a run started in C (no mode messages of Python's, the result copied out in
 *       C, every trailer good) it ends the request as _finish and _end do — the run back in
 *       the pool, the request out of ``active``, the plan's users counted down, ``finish()``
 *       run (an exception of it is the request's error: Progress._fail) — and returns True.
 *       When the step leaves rounds in flight it waits for them in C as Progress._c_wait
 *       does (but waiting before its first step: the run's S_POS set to -1) (dualmpi_iwait,
 *       ``watchdog.state`` the request's tracker meanwhile: Progress._tracker's, made once per run
 *       and kept for the last N_TRACKERS runs, its rounds naming the request), and ends the
 *       request alike; what it cannot end there (the alarm line's message, rank 0's mode, an
 *       error, a request of Python's) goes to Progress._waited and it returns False. Otherwise it
 *       returns what the step returned (the Python wait goes on from there), or None without a
 *       step (not the only request in flight, not in compiled rounds).
 */
enum {
    PL_PROGRESS, PL_COMPILED, PL_STORE, PL_TAG, PL_SEQ, PL_WHAT, PL_RECV, PL_COMBINE, PL_CHECK,
    PL_FINISH, PL_STAGE, PL_K, PL_REQS, PL_PEERS, PL_SINCE, PL_DONE, PL_ERROR, PL_RESULT,
    PL_AGREE_IN, PL_AGREE_OUT, PL_BAD, PL_SIGNATURE, PL_CALL, PL_KNOWN, PL_MODES, PL_STORE_MODE,
    PL_C_STATE, PL_C_ADDR, PL_C_REQS, PL_C_MODE, PL_C_CALL, PL_KEEP, PL_LATE, PL_SLOTS
};
static const char *plan_slots[PL_SLOTS] = {
    "progress", "compiled", "store", "tag", "seq", "what", "recv", "combine", "check",
    "finish", "stage", "k", "reqs", "peers", "since", "done", "error", "result",
    "agree_in", "agree_out", "bad", "signature", "call", "known", "modes", "store_mode",
    "c_state", "c_addr", "c_reqs", "c_mode", "c_call", "keep", "late"
};
enum { WR_PROGRESS, WR_PLAN, WR_ACTIVE, WR_SLOTS };
static const char *wrap_slots[WR_SLOTS] = {"_progress", "_plan", "_active"};
/* the slots of a nonblocking.Repeat and of a nonblocking._Compiled read at their offsets */
enum {
    RP_C, RP_PLAIN, RP_KEY, RP_Z_C, RP_Z_COMP, RP_COMP, RP_COMP_KEY, RP_C_ADDR, RP_Z_ADDR,
    RP_COMBINE, RP_CHECK, RP_FINISH, RP_FLAT, RP_SLOTS
};
static const char *repeat_slots[RP_SLOTS] = {
    "c", "plain", "key", "z_c", "z_comp", "comp", "comp_key", "c_addr", "z_addr", "combine",
    "check", "finish", "flat"
};
enum { CP_RETIRED, CP_POOL, CP_C_ADDR, CP_USERS, CP_ROUNDS, CP_SLOTS };
static const char *compiled_slots[CP_SLOTS] = {"retired", "pool", "c_addr", "users", "rounds"};
/* Progress._counts: its request numbers (_seq), repeats started in C (restarts), zero_copy */
enum { PC_SEQ, PC_RESTARTS, PC_ZERO_COPY, PC_FIELDS };
/* the watchdog's trackers of the last runs waited for (Progress._tracker), by state array */
#define N_TRACKERS 4
/* the run's state fields dualmpi_istep keeps (rounds.c: S_K, S_BAD_ROUND) and the one
 * dualmpi_iwait keeps (S_POS: -1 before the call, "stepped just now, wait first"), given in
 * ``codes`` */
#define ST_POS (self->st_pos)
#define ST_K (self->st_k)
#define ST_BAD_ROUND (self->st_bad)

typedef int (*istart_fn)(const int64_t *, int64_t *, const int64_t *, int64_t *,
                         const int64_t *, int64_t, int64_t);
typedef int (*istep_fn)(const int64_t *, int64_t *);
typedef int (*iwait_fn)(const int64_t *, int64_t *, const int64_t *);

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *progress, *plan_type, *wrap, *active, *known, *inflight, *seq, *alarm;
    istart_fn istart;
    istep_fn step;
    iwait_fn iwait;
    PyObject *watchdog;
    const int64_t *w;
    int64_t *x;
    int64_t tag_ub, *inflight_at;
    const int64_t *seq_at;
    int python_code, alarm_code, mode_code;
    long crounds, done_stage, st_k, st_bad, st_pos;
    Py_ssize_t pool_size;
    Py_ssize_t plan_off[PL_SLOTS], wrap_off[WR_SLOTS], rep_off[RP_SLOTS], comp_off[CP_SLOTS];
    PyObject *crounds_obj, *done_obj, *empty_tuple;
    PyObject *repeat_type, *compiled_type, *cache_move, *known_move, *counts_obj;
    int64_t *counts;
    PyObject *tracked[N_TRACKERS][3];  /* (a run's state array, its tracker, its rounds) */
    int next_tracked;
} IRestart;

static PyObject *s_rounds, *s_move_to_end, *s_poll, *s_advance, *s_restart_failed, *s_free,
    *s_fail, *s_tracker, *s_waited, *s_crestart, *s_wait_on, *s_req, *s_wait, *s_outcome;

static void IRestart_dealloc(IRestart *self)
{
    Py_XDECREF(self->progress);
    Py_XDECREF(self->plan_type);
    Py_XDECREF(self->wrap);
    Py_XDECREF(self->active);
    Py_XDECREF(self->known);
    Py_XDECREF(self->inflight);
    Py_XDECREF(self->seq);
    Py_XDECREF(self->alarm);
    Py_XDECREF(self->watchdog);
    Py_XDECREF(self->crounds_obj);
    Py_XDECREF(self->done_obj);
    Py_XDECREF(self->empty_tuple);
    Py_XDECREF(self->repeat_type);
    Py_XDECREF(self->compiled_type);
    Py_XDECREF(self->cache_move);
    Py_XDECREF(self->known_move);
    Py_XDECREF(self->counts_obj);
    for (int i = 0; i < N_TRACKERS; i++) {
        Py_XDECREF(self->tracked[i][0]);
        Py_XDECREF(self->tracked[i][1]);
        Py_XDECREF(self->tracked[i][2]);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A slot of an object of a class with __slots__: its value (borrowed; NULL when unset). */
#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

static void put(PyObject *obj, Py_ssize_t off, PyObject *v)  /* (v: a new reference, stolen) */
{
    PyObject *old = SLOT(obj, off);
    SLOT(obj, off) = v;
    Py_XDECREF(old);
}

static void put_ref(PyObject *obj, Py_ssize_t off, PyObject *v)
{
    Py_INCREF(v);
    put(obj, off, v);
}

static int slot_offsets(PyObject *type, const char **names, int n, Py_ssize_t *out)
{
    for (int i = 0; i < n; i++) {
        PyObject *d = PyObject_GetAttrString(type, names[i]);
        if (d == NULL)
            return -1;
        if (!PyObject_TypeCheck(d, &PyMemberDescr_Type) ||
                ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            Py_DECREF(d);
            PyErr_Format(PyExc_TypeError, "IRestart: %s is not a slot", names[i]);
            return -1;
        }
        out[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
    }
    return 0;
}

static int64_t *array_data(PyObject *a, const char *what)
{
    if (!PyArray_Check(a) || PyArray_TYPE((PyArrayObject *)a) != NPY_INT64 ||
            !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)a)) {
        PyErr_Format(PyExc_TypeError, "IRestart: %s is not a contiguous int64 array", what);
        return NULL;
    }
    return (int64_t *)PyArray_DATA((PyArrayObject *)a);
}

static PyObject *IRestart_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf,
                                     PyObject *kwnames);

static PyObject *IRestart_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *progress, *plan_type, *wrap, *active, *known, *inflight, *seq, *alarm, *codes;
    PyObject *watchdog, *repeat_type, *compiled_type, *cache, *counts;
    unsigned long long istart, step, iwait, w, x;
    long long tag_ub;
    Py_ssize_t pool_size;
    if (kw != NULL || !PyArg_ParseTuple(args, "OOOOOOOOOKKKKKLOnOOOO", &progress, &plan_type,
                                        &wrap, &active, &known, &inflight, &seq, &alarm,
                                        &watchdog, &istart, &step, &iwait, &w, &x, &tag_ub,
                                        &codes, &pool_size, &repeat_type, &compiled_type, &cache,
                                        &counts))
        return NULL;
    if (!PyType_Check(plan_type) || !PyType_Check(wrap) || !PyList_CheckExact(active) ||
            !PyType_Check(repeat_type) || !PyType_Check(compiled_type) ||
            !PyTuple_Check(codes) || PyTuple_GET_SIZE(codes) != 8 || !istart || !step ||
            !iwait || !w || !x || tag_ub <= 0) {
        PyErr_SetString(PyExc_TypeError, "IRestart: bad arguments");
        return NULL;
    }
    IRestart *self = (IRestart *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = NULL;
    Py_INCREF(progress); self->progress = progress;
    Py_INCREF(plan_type); self->plan_type = plan_type;
    Py_INCREF(wrap); self->wrap = wrap;
    Py_INCREF(active); self->active = active;
    Py_INCREF(known); self->known = known;
    Py_INCREF(inflight); self->inflight = inflight;
    Py_INCREF(seq); self->seq = seq;
    Py_INCREF(alarm); self->alarm = alarm;
    Py_INCREF(watchdog); self->watchdog = watchdog;
    self->repeat_type = Py_NewRef(repeat_type);
    self->compiled_type = Py_NewRef(compiled_type);
    self->counts_obj = Py_NewRef(counts);
    self->istart = (istart_fn)(uintptr_t)istart;
    self->step = (istep_fn)(uintptr_t)step;
    self->iwait = (iwait_fn)(uintptr_t)iwait;
    self->w = (const int64_t *)(uintptr_t)w;
    self->x = (int64_t *)(uintptr_t)x;
    self->tag_ub = tag_ub;
    self->pool_size = pool_size;
    long c[8];
    for (int i = 0; i < 8; i++) {
        c[i] = PyLong_AsLong(PyTuple_GET_ITEM(codes, i));
        if (c[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(self);
            return NULL;
        }
    }
    self->python_code = (int)c[0];
    self->alarm_code = (int)c[1];
    self->mode_code = (int)c[2];
    self->crounds = c[3];
    self->done_stage = c[4];
    self->st_k = c[5];
    self->st_bad = c[6];
    self->st_pos = c[7];
    if (c[5] < 0 || c[5] >= 64 || c[6] < 0 || c[6] >= 64 || c[7] < 0 || c[7] >= 64) {
        Py_DECREF(self);
        PyErr_SetString(PyExc_ValueError, "IRestart: bad state fields");
        return NULL;
    }
    self->crounds_obj = PyLong_FromLong(c[3]);
    self->done_obj = PyLong_FromLong(c[4]);
    self->empty_tuple = PyTuple_New(0);
    if (self->crounds_obj == NULL || self->done_obj == NULL || self->empty_tuple == NULL ||
            (self->inflight_at = array_data(inflight, "inflight")) == NULL ||
            (self->seq_at = array_data(seq, "seq")) == NULL ||
            (self->counts = array_data(counts, "counts")) == NULL ||
            PyArray_SIZE((PyArrayObject *)counts) != PC_FIELDS ||
            (self->cache_move = PyObject_GetAttr(cache, s_move_to_end)) == NULL ||
            (known != Py_None &&
             (self->known_move = PyObject_GetAttr(known, s_move_to_end)) == NULL) ||
            slot_offsets(plan_type, plan_slots, PL_SLOTS, self->plan_off) < 0 ||
            slot_offsets(wrap, wrap_slots, WR_SLOTS, self->wrap_off) < 0 ||
            slot_offsets(repeat_type, repeat_slots, RP_SLOTS, self->rep_off) < 0 ||
            slot_offsets(compiled_type, compiled_slots, CP_SLOTS, self->comp_off) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "IRestart: counts is not of Progress._counts' size");
        Py_DECREF(self);
        return NULL;
    }
    self->vectorcall = IRestart_vectorcall;
    return (PyObject *)self;
}

/* obj.name as a C integer (-1 with the error set on failure: checked with PyErr_Occurred). */
static long long attr_ll(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    long long out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return out;
}

static double monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A slot's value (borrowed), or NULL with AttributeError set when it is unset. */
static PyObject *slot_get(PyObject *obj, Py_ssize_t off)
{
    PyObject *v = SLOT(obj, off);
    if (v == NULL)
        PyErr_Format(PyExc_AttributeError, "IRestart: a slot of %s is unset",
                     Py_TYPE(obj)->tp_name);
    return v;
}

/* An int slot as a C integer (0; -1 with the error set). */
static int slot_ll(PyObject *obj, Py_ssize_t off, long long *out)
{
    PyObject *v = slot_get(obj, off);
    if (v == NULL)
        return -1;
    *out = PyLong_AsLongLong(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static int slot_add(PyObject *obj, Py_ssize_t off, long long by)
{
    long long v;
    if (slot_ll(obj, off, &v) < 0)
        return -1;
    PyObject *n = PyLong_FromLongLong(v + by);
    if (n == NULL)
        return -1;
    put(obj, off, n);
    return 0;
}

/* The peers of the round the run's state names (Progress._c_moved), a new reference. */
static PyObject *round_peers(IRestart *self, PyObject *comp, long long k)
{
    PyObject *rounds = slot_get(comp, self->comp_off[CP_ROUNDS]);
    if (rounds == NULL)
        return NULL;
    PyObject *out = self->empty_tuple;
    if (PyList_Check(rounds) && k >= 0 && k < PyList_GET_SIZE(rounds)) {
        PyObject *rnd = PyList_GET_ITEM(rounds, k);
        if (PyTuple_Check(rnd) && PyTuple_GET_SIZE(rnd) > 5)
            out = PyTuple_GET_ITEM(rnd, 5);
    }
    Py_INCREF(out);
    return out;
}

static PyObject *irestart(IRestart *self, PyObject *call, PyObject *what, PyObject *seq_obj,
                          int raw)
{
    PyObject *comp = NULL, *pool = NULL, *run = NULL, *req = NULL, *wrapped = NULL, *v;
    int zero = 0, is_plain;
    long long given = -1;
    const Py_ssize_t *r = self->rep_off;

    if (Py_TYPE(call) != (PyTypeObject *)self->repeat_type) {
        PyErr_SetString(PyExc_TypeError, "IRestart: the call is not a Repeat");
        return NULL;
    }
    for (int i = 0; i < RP_SLOTS; i++)
        if (slot_get(call, r[i]) == NULL)
            return NULL;
    if (SLOT(call, r[RP_C]) == Py_None)
        return Py_NewRef(Py_None);
    /* (a plain repeat, without an agreement, is started with the number reserved for it) */
    if ((is_plain = PyObject_IsTrue(SLOT(call, r[RP_PLAIN]))) < 0)
        return NULL;
    if (is_plain != (seq_obj != NULL && seq_obj != Py_None))
        return Py_NewRef(Py_None);
    if (is_plain) {
        given = PyLong_AsLongLong(seq_obj);
        if (given == -1 && PyErr_Occurred())
            return NULL;
        if (given < 0) {
            PyErr_SetString(PyExc_ValueError, "IRestart: a negative sequence number");
            return NULL;
        }
    }
    if (!is_plain && self->known_move != NULL) {  /* rank 0: a vector it has seen agreed? */
        PyObject *key = SLOT(call, r[RP_KEY]);
        int known = PySequence_Contains(self->known, key);
        if (known <= 0)
            return known < 0 ? NULL : Py_NewRef(Py_None);
        if ((v = PyObject_CallOneArg(self->known_move, key)) == NULL)
            return NULL;
        Py_DECREF(v);
    }
    /* the plan's _Compiled: bound to the user's buffers (zero-copy) or the cached one */
    zero = SLOT(call, r[RP_Z_C]) != Py_None;
    comp = Py_NewRef(SLOT(call, r[zero ? RP_Z_COMP : RP_COMP]));
    if (comp == Py_None)
        goto python;
    if (Py_TYPE(comp) != (PyTypeObject *)self->compiled_type) {
        PyErr_SetString(PyExc_TypeError, "IRestart: a plan is not a _Compiled");
        goto fail;
    }
    const Py_ssize_t *c = self->comp_off;
    for (int i = 0; i < CP_SLOTS; i++)
        if (slot_get(comp, c[i]) == NULL)
            goto fail;
    int retired = PyObject_IsTrue(SLOT(comp, c[CP_RETIRED]));
    if (retired < 0)
        goto fail;
    if (retired)
        goto python;
    pool = Py_NewRef(SLOT(comp, c[CP_POOL]));
    if (!PyList_CheckExact(pool) || PyList_GET_SIZE(pool) == 0)
        goto python;
    if (!zero) {  /* (Progress._compiled: the cache's order of use) */
        if ((v = PyObject_CallOneArg(self->cache_move, SLOT(call, r[RP_COMP_KEY]))) == NULL)
            goto fail;
        Py_DECREF(v);
    }
    Py_ssize_t last = PyList_GET_SIZE(pool) - 1;
    run = PyList_GET_ITEM(pool, last);
    Py_INCREF(run);
    if (PyList_SetSlice(pool, last, last + 1, NULL) < 0)
        goto fail;
    if (!PyTuple_CheckExact(run) || PyTuple_GET_SIZE(run) != 5) {
        PyErr_SetString(PyExc_TypeError, "IRestart: a run is not a 5-tuple");
        goto fail;
    }
    long long p, m;
    if (slot_ll(comp, c[CP_C_ADDR], &p) < 0 ||
            slot_ll(call, r[zero ? RP_Z_ADDR : RP_C_ADDR], &m) < 0)
        goto fail;
    long long state_addr = PyLong_AsLongLong(PyTuple_GET_ITEM(run, 3));
    if (state_addr == -1 && PyErr_Occurred())
        goto fail;
    long long seq = is_plain ? given : self->counts[PC_SEQ];
    long long tag = seq % self->tag_ub;
    int err = self->istart((const int64_t *)(intptr_t)p, (int64_t *)(intptr_t)state_addr,
                           self->w, self->x, (const int64_t *)(intptr_t)m, seq, tag);
    if (err == self->python_code || err == self->alarm_code) {
        if (PyList_GET_SIZE(pool) < self->pool_size && PyList_Append(pool, run) < 0)
            goto fail;
        Py_CLEAR(run);
        if (err == self->alarm_code) {
            v = PyObject_CallMethodOneArg(self->alarm, s_poll, what);
            if (v == NULL)
                goto fail;
            Py_DECREF(v);
        }
        Py_DECREF(comp);
        Py_DECREF(pool);
        return Py_NewRef(Py_None);
    }
    if (!is_plain)
        self->counts[PC_SEQ] = seq + 1;
    self->counts[PC_RESTARTS] += 1;
    if (zero)
        self->counts[PC_ZERO_COPY] += 1;
    /* the PlanRequest, as Progress.restart makes it */
    PyTypeObject *pt = (PyTypeObject *)self->plan_type;
    req = pt->tp_alloc(pt, 0);
    if (req == NULL)
        goto fail;
    const Py_ssize_t *o = self->plan_off;
    for (int i = 0; i < PL_SLOTS; i++)
        put_ref(req, o[i], Py_None);
    put(req, o[PL_SEQ], PyLong_FromLongLong(seq));
    put(req, o[PL_TAG], PyLong_FromLongLong(tag));
    put_ref(req, o[PL_PROGRESS], self->progress);
    put_ref(req, o[PL_WHAT], what);
    put_ref(req, o[PL_COMPILED], comp);
    put_ref(req, o[PL_STORE], PyTuple_GET_ITEM(run, 0));
    put_ref(req, o[PL_C_STATE], PyTuple_GET_ITEM(run, 1));
    put_ref(req, o[PL_C_REQS], PyTuple_GET_ITEM(run, 2));
    put_ref(req, o[PL_C_ADDR], PyTuple_GET_ITEM(run, 3));
    put_ref(req, o[PL_C_MODE], PyTuple_GET_ITEM(run, 4));
    /* (PL_SIGNATURE stays None: the run's word is the trailers', mixed with the call number) */
    put_ref(req, o[PL_COMBINE], SLOT(call, r[RP_COMBINE]));
    put_ref(req, o[PL_CHECK], SLOT(call, r[RP_CHECK]));
    put_ref(req, o[PL_FINISH], SLOT(call, r[RP_FINISH]));
    if (!is_plain)  /* (a plain one agrees on nothing) */
        put_ref(req, o[PL_AGREE_OUT], SLOT(call, r[RP_FLAT]));
    put_ref(req, o[PL_C_CALL], call);
    put_ref(req, o[PL_DONE], Py_False);
    put(req, o[PL_REQS], PyList_New(0));
    put_ref(req, o[PL_PEERS], self->empty_tuple);
    put_ref(req, o[PL_MODES], self->empty_tuple);
    if (!is_plain)  /* (a plain one takes no call number) */
        put(req, o[PL_CALL], PyLong_FromLongLong(self->seq_at[0]));
    put_ref(req, o[PL_STAGE], self->crounds_obj);
    put(req, o[PL_SINCE], PyFloat_FromDouble(monotonic()));
    for (int i = 0; i < PL_SLOTS; i++)
        if (SLOT(req, o[i]) == NULL)  /* (a failed PyLong_FromLongLong, PyList_New...) */
            goto fail;
    if (slot_add(comp, c[CP_USERS], 1) < 0 || PyList_Append(self->active, req) < 0)
        goto fail;
    self->inflight_at[0] += 1;
    {  /* Progress._c_moved: the round the step left it in */
        const int64_t *state = (const int64_t *)(intptr_t)state_addr;
        put(req, o[PL_K], PyLong_FromLongLong(state[ST_K]));
        PyObject *peers = round_peers(self, comp, state[ST_K]);
        if (peers == NULL || SLOT(req, o[PL_K]) == NULL) {
            Py_XDECREF(peers);
            goto fail;
        }
        put(req, o[PL_PEERS], peers);
    }
    if (err == self->mode_code)
        v = PyObject_CallMethodOneArg(self->progress, s_advance, req);
    else if (err) {
        PyObject *code = PyLong_FromLong(err);
        v = code == NULL ? NULL :
            PyObject_CallMethodObjArgs(self->progress, s_restart_failed, req, code, NULL);
        Py_XDECREF(code);
    } else {
        v = Py_NewRef(Py_None);
    }
    if (v == NULL)
        goto fail;
    Py_DECREF(v);
    if (raw) {  /* the PlanRequest itself (a part of a request of several: calls._Chain) */
        Py_DECREF(run);
        Py_DECREF(pool);
        Py_DECREF(comp);
        return req;
    }
    /* wrap(progress, req): the user's request */
    PyTypeObject *wt = (PyTypeObject *)self->wrap;
    wrapped = wt->tp_alloc(wt, 0);
    if (wrapped == NULL)
        goto fail;
    put_ref(wrapped, self->wrap_off[WR_PROGRESS], self->progress);
    put_ref(wrapped, self->wrap_off[WR_PLAN], req);
    put_ref(wrapped, self->wrap_off[WR_ACTIVE], Py_True);
    Py_DECREF(req);
    Py_DECREF(run);
    Py_DECREF(pool);
    Py_DECREF(comp);
    return wrapped;
python:
    Py_XDECREF(pool);
    Py_DECREF(comp);
    Py_RETURN_NOTIMPLEMENTED;
fail:
    Py_XDECREF(req);
    Py_XDECREF(run);
    Py_XDECREF(pool);
    Py_XDECREF(comp);
    return NULL;
}

static PyObject *IRestart_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf,
                                     PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL || (nargs != 2 && nargs != 3)) {
        PyErr_SetString(PyExc_TypeError, "IRestart(call, what[, seq])");
        return NULL;
    }
    return irestart((IRestart *)obj, args[0], args[1], nargs == 3 ? args[2] : NULL, nargs == 3);
}

/* Whether a request whose rounds are done ends in C (IRestart.close): no mode messages of
 * Python's, its result copied out in C (no receive buffer of Python's), every trailer good. */
static int ends_here(IRestart *self, PyObject *req, const int64_t *state)
{
    const Py_ssize_t *o = self->plan_off;
    PyObject *modes = SLOT(req, o[PL_MODES]);
    return state[ST_BAD_ROUND] < 0 && SLOT(req, o[PL_RECV]) == Py_None &&
           SLOT(req, o[PL_BAD]) == Py_None && modes != NULL && PyTuple_Check(modes) &&
           PyTuple_GET_SIZE(modes) == 0;
}

/* The watchdog's state while ``req``'s rounds are waited for in C (Progress._tracker, a new
 * reference): the tracker of the run whose state array is ``c_state`` made once and kept
 * (the last N_TRACKERS runs'), its rounds (a nonblocking._Rounds) then naming ``req``. */
static PyObject *tracker_of(IRestart *self, PyObject *req, PyObject *c_state)
{
    for (int i = 0; i < N_TRACKERS; i++)
        if (self->tracked[i][0] == c_state)
            return PyObject_SetAttr(self->tracked[i][2], s_req, req) < 0 ? NULL :
                   Py_NewRef(self->tracked[i][1]);
    PyObject *tracker = PyObject_CallMethodOneArg(self->progress, s_tracker, req);
    if (tracker == NULL)
        return NULL;
    PyObject *rounds = PyObject_GetAttr(tracker, s_rounds);
    if (rounds == NULL) {
        Py_DECREF(tracker);
        return NULL;
    }
    int i = self->next_tracked;
    self->next_tracked = (i + 1) % N_TRACKERS;
    Py_XSETREF(self->tracked[i][0], Py_NewRef(c_state));
    Py_XSETREF(self->tracked[i][1], Py_NewRef(tracker));
    Py_XSETREF(self->tracked[i][2], rounds);
    return tracker;
}

static PyObject *IRestart_close(IRestart *self, PyObject *req)
{
    if (self->inflight_at[0] != 1 || Py_TYPE(req) != (PyTypeObject *)self->plan_type)
        Py_RETURN_NONE;
    const Py_ssize_t *o = self->plan_off;
    PyObject *stage = SLOT(req, o[PL_STAGE]), *done = SLOT(req, o[PL_DONE]);
    if (stage == NULL || done != Py_False || !PyLong_CheckExact(stage) ||
            PyLong_AsLong(stage) != self->crounds)
        Py_RETURN_NONE;
    PyObject *comp = SLOT(req, o[PL_COMPILED]), *c_state = SLOT(req, o[PL_C_STATE]);
    PyObject *c_addr = SLOT(req, o[PL_C_ADDR]);
    if (comp == NULL || c_state == NULL || c_addr == NULL || !PyArray_Check(c_state) ||
            Py_TYPE(comp) != (PyTypeObject *)self->compiled_type)
        Py_RETURN_NONE;
    const Py_ssize_t *c = self->comp_off;
    for (int i = 0; i < CP_SLOTS; i++)
        if (slot_get(comp, c[i]) == NULL)
            return NULL;
    long long p;
    if (slot_ll(comp, c[CP_C_ADDR], &p) < 0)
        return NULL;
    long long sa = PyLong_AsLongLong(c_addr);
    if (sa == -1 && PyErr_Occurred())
        return NULL;
    int err = self->step((const int64_t *)(intptr_t)p, (int64_t *)(intptr_t)sa);
    int64_t *state = (int64_t *)(intptr_t)sa;
    Py_ssize_t nrounds = PyObject_Length(SLOT(comp, c[CP_ROUNDS]));
    if (nrounds < 0)
        return NULL;
    if (!err && state[ST_K] < nrounds) {
        /* Progress._c_wait: the rest of the rounds in C (dualmpi_iwait), under the watchdog;
         * it waits before it steps (S_POS -1: the step just made would find nothing new) */
        state[ST_POS] = -1;
        PyObject *tracker = tracker_of(self, req, c_state);
        if (tracker == NULL)
            return NULL;
        int bad = PyObject_SetAttr(self->watchdog, str_state, tracker);
        Py_DECREF(tracker);
        if (bad < 0)
            return NULL;
        Py_BEGIN_ALLOW_THREADS
        err = self->iwait((const int64_t *)(intptr_t)p, (int64_t *)(intptr_t)sa, self->w);
        Py_END_ALLOW_THREADS
        if (PyObject_SetAttr(self->watchdog, str_state, Py_None) < 0)
            return NULL;
        if (err || state[ST_K] < nrounds || !ends_here(self, req, state)) {
            /* (the rest as Progress._c_wait's: the line's message, rank 0's mode, an error) */
            PyObject *code = PyLong_FromLong(err);
            PyObject *v = code == NULL ? NULL :
                PyObject_CallMethodObjArgs(self->progress, s_waited, req, code, NULL);
            Py_XDECREF(code);
            if (v == NULL)
                return NULL;
            Py_DECREF(v);
            Py_RETURN_FALSE;
        }
    }
    if (err || state[ST_K] < nrounds || !ends_here(self, req, state))
        return PyLong_FromLong(err);  /* (Progress.wait goes on from the step) */
    Py_INCREF(req);
    Py_INCREF(comp);
    PyObject *v = NULL, *finish = NULL;
    int ok = -1;
    put(req, o[PL_K], PyLong_FromSsize_t(nrounds - 1));
    put_ref(req, o[PL_PEERS], self->empty_tuple);
    /* _finish: the run back to the pool */
    int retired = PyObject_IsTrue(SLOT(comp, c[CP_RETIRED]));
    if (retired < 0)
        goto out;
    if (!retired) {
        PyObject *pool = SLOT(comp, c[CP_POOL]);
        if (PyList_Check(pool) && PyList_GET_SIZE(pool) < self->pool_size) {
            PyObject *run = PyTuple_Pack(5, SLOT(req, o[PL_STORE]), c_state, SLOT(req, o[PL_C_REQS]),
                                         c_addr, SLOT(req, o[PL_C_MODE]));
            int bad = run == NULL || PyList_Append(pool, run) < 0;
            Py_XDECREF(run);
            if (bad)
                goto out;
        }
    }
    /* _end */
    put_ref(req, o[PL_DONE], Py_True);
    put_ref(req, o[PL_KEEP], Py_None);
    put_ref(req, o[PL_STAGE], self->done_obj);
    for (Py_ssize_t i = PyList_GET_SIZE(self->active) - 1; i >= 0; i--)
        if (PyList_GET_ITEM(self->active, i) == req) {
            if (PyList_SetSlice(self->active, i, i + 1, NULL) < 0)
                goto out;
            self->inflight_at[0] -= 1;
            break;
        }
    if (slot_add(comp, c[CP_USERS], -1) < 0)
        goto out;
    if (retired) {
        long long users;
        if (slot_ll(comp, c[CP_USERS], &users) < 0)
            goto out;
        if (users == 0) {
            if ((v = PyObject_CallMethodNoArgs(comp, s_free)) == NULL)
                goto out;
            Py_CLEAR(v);
        }
    }
    finish = SLOT(req, o[PL_FINISH]);
    Py_XINCREF(finish);
    static const int cleared[] = {PL_STORE, PL_RECV, PL_FINISH, PL_CHECK, PL_COMBINE,
                                  PL_AGREE_IN, PL_C_STATE, PL_C_REQS, PL_C_MODE, PL_C_CALL};
    for (size_t i = 0; i < sizeof cleared / sizeof cleared[0]; i++)
        put_ref(req, o[cleared[i]], Py_None);
    if (finish != NULL && finish != Py_None) {
        v = PyObject_CallNoArgs(finish);
        if (v == NULL && PyErr_ExceptionMatches(PyExc_Exception)) {
            /* (Progress._advance: a failed finish is the request's error) */
            PyObject *type, *exc, *tb;
            PyErr_Fetch(&type, &exc, &tb);
            PyErr_NormalizeException(&type, &exc, &tb);
            if (exc != NULL && tb != NULL)
                PyException_SetTraceback(exc, tb);
            v = exc == NULL ? NULL :
                PyObject_CallMethodObjArgs(self->progress, s_fail, req, exc, NULL);
            Py_XDECREF(type);
            Py_XDECREF(exc);
            Py_XDECREF(tb);
            if (v == NULL)
                goto out;
            Py_CLEAR(v);
        } else if (v == NULL) {
            goto out;
        } else {
            put(req, o[PL_RESULT], v);
            v = NULL;
        }
    }
    ok = 0;
out:
    Py_XDECREF(v);
    Py_XDECREF(finish);
    Py_DECREF(comp);
    Py_DECREF(req);
    if (ok < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyMethodDef IRestart_methods[] = {
    {"close", (PyCFunction)IRestart_close, METH_O,
     "close(plan): step the only request in flight; end it when its rounds are done (see recall.c)"},
    {NULL, NULL, 0, NULL}
};

static PyTypeObject IRestartType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dualmpi_recall.IRestart",
    .tp_basicsize = sizeof(IRestart),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A repeated nonblocking collective started and ended in C (see dualmpi/engine/recall.c)",
    .tp_new = IRestart_new,
    .tp_dealloc = (destructor)IRestart_dealloc,
    .tp_vectorcall_offset = offsetof(IRestart, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_methods = IRestart_methods,
};

/* dualmpi.Request.Wait in C (WaitMethod(request_type, plan_type, fallback, doc[, parts_type])):
 * a method of ``request_type`` (Py_TPFLAGS_METHOD_DESCRIPTOR: called with the request first, as
 * a function in a class is, and bound as one by attribute access) whose call, for an active
 * request of a
 * ``plan_type`` (PlanRequest) whose Progress has an IRestart (its ``crestart``), runs
 * IRestart.close on it; when that ends the request (True) it makes the request inactive and
 * returns True or raises the plan's error, as Request.Wait and PlanRequest.outcome do.  When
 * close stepped the request without ending it (False, or the step's code) the Progress's
 * ``_wait_on(plan, code)`` does the rest of Progress.wait and the request is then ended alike;
 * anything else (a status to fill, an inactive request, another kind of request, no step taken)
 * is ``fallback(request, ...)``, the Python Wait.  A request of a ``parts_type`` (calls._Chain:
 * a v-variant's count table, then its data, one request to the user) is waited for part by part
 * alike (wait_parts): the part it runs now (its ``data`` once started, else its ``counts``)
 * closed in C, the count table's ``finish`` starting the data's part, until the data's part or
 * an ``error`` ends it; a part that is not a PlanRequest in its compiled rounds, or anything
 * else, and the Progress's ``wait(parts)`` does the rest.  Its state is its own: two dualmpi
 * packages in one process (benchmarks/engine.py --against) each have theirs. */
enum { CH_COUNTS, CH_DATA, CH_ERROR, CH_SLOTS };
static const char *chain_slots[CH_SLOTS] = {"counts", "data", "error"};
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyTypeObject *request, *plan, *parts;
    PyObject *fallback, *doc;
    Py_ssize_t off[WR_SLOTS], plan_off[PL_SLOTS], parts_off[CH_SLOTS];
} WaitMethod;

static void WaitMethod_dealloc(WaitMethod *self)
{
    Py_XDECREF(self->request);
    Py_XDECREF(self->plan);
    Py_XDECREF(self->parts);
    Py_XDECREF(self->fallback);
    Py_XDECREF(self->doc);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Raise a plan's ``error`` slot (PlanRequest.outcome): -1 with it set, 0 when there is none. */
static int raise_part(PyObject *error)
{
    if (error == NULL || error == Py_None)
        return 0;
    if (PyExceptionInstance_Check(error))
        PyErr_SetObject((PyObject *)Py_TYPE(error), error);
    else
        PyErr_SetString(PyExc_TypeError, "Wait: a request's error is not an exception");
    return -1;
}

/* WaitMethod's call for a request of several parts (see WaitMethod): each part closed in C in
 * turn, then the request made inactive and its outcome raised (_Chain.outcome: its own error,
 * the count table's, the data's). */
static PyObject *wait_parts(WaitMethod *wm, PyObject *self, PyObject *parts, PyObject *progress)
{
    PyObject *irs = PyObject_GetAttr(progress, s_crestart);
    if (irs == NULL)
        return NULL;
    int python = Py_TYPE(irs) != &IRestartType || ((IRestart *)irs)->progress != progress ||
        (PyTypeObject *)((IRestart *)irs)->plan_type != wm->plan;
    Py_INCREF(parts);
    while (!python) {
        PyObject *error = SLOT(parts, wm->parts_off[CH_ERROR]);
        PyObject *data = SLOT(parts, wm->parts_off[CH_DATA]);
        PyObject *now = data != NULL && data != Py_None ? data :
            SLOT(parts, wm->parts_off[CH_COUNTS]);
        if (error == NULL || error != Py_None)
            break;  /* (failed: raised below) */
        if (now == NULL || Py_TYPE(now) != wm->plan) {
            python = 1;
            break;
        }
        if (SLOT(now, wm->plan_off[PL_DONE]) == Py_True) {
            PyObject *err = SLOT(now, wm->plan_off[PL_ERROR]);
            /* (the data's part ended, or the count table's failed; else its finish did not
             * start the data's: Python's) */
            python = now != data && (err == NULL || err == Py_None);
            break;
        }
        Py_INCREF(now);
        PyObject *r = IRestart_close((IRestart *)irs, now);
        if (r == Py_None) {  /* (not alone in flight, or not in its compiled rounds) */
            Py_DECREF(r);
            Py_DECREF(now);
            python = 1;
            break;
        }
        if (r != NULL && r != Py_True) {  /* (stepped, not ended: the rest of Progress.wait) */
            PyObject *v = PyObject_CallMethodObjArgs(progress, s_wait_on, now, r, NULL);
            Py_DECREF(r);
            r = v;
        }
        Py_DECREF(now);
        if (r == NULL)
            goto fail;
        Py_DECREF(r);
    }
    Py_CLEAR(irs);
    if (python) {
        PyObject *v = PyObject_CallMethodOneArg(progress, s_wait, parts);
        if (v == NULL)
            goto fail;
        Py_DECREF(v);
    }
    put_ref(self, wm->off[WR_ACTIVE], Py_False);
    put_ref(self, wm->off[WR_PLAN], Py_None);
    {
        PyObject *error = SLOT(parts, wm->parts_off[CH_ERROR]);
        PyObject *counts = SLOT(parts, wm->parts_off[CH_COUNTS]);
        PyObject *data = SLOT(parts, wm->parts_off[CH_DATA]);
        if (error == NULL || error != Py_None || counts == NULL || Py_TYPE(counts) != wm->plan ||
                data == NULL || Py_TYPE(data) != wm->plan) {
            /* (anything but two PlanRequests and no error of its own: _Chain.outcome) */
            PyObject *v = PyObject_CallMethodNoArgs(parts, s_outcome);
            if (v == NULL)
                goto fail;
            Py_DECREF(v);
        } else if (raise_part(SLOT(counts, wm->plan_off[PL_ERROR])) < 0 ||
                   raise_part(SLOT(data, wm->plan_off[PL_ERROR])) < 0) {
            goto fail;
        }
    }
    Py_DECREF(parts);
    Py_RETURN_TRUE;
fail:
    Py_XDECREF(irs);
    Py_DECREF(parts);
    return NULL;
}

static PyObject *WaitMethod_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf,
                                       PyObject *kwnames)
{
    WaitMethod *wm = (WaitMethod *)obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 1 || kwnames != NULL || nargs > 2 || (nargs == 2 && args[1] != Py_None) ||
            !PyObject_TypeCheck(args[0], wm->request))
        return PyObject_Vectorcall(wm->fallback, args, nargsf, kwnames);
    PyObject *self = args[0];
    if (SLOT(self, wm->off[WR_ACTIVE]) != Py_True)
        return PyObject_Vectorcall(wm->fallback, args, nargsf, kwnames);
    PyObject *plan = SLOT(self, wm->off[WR_PLAN]), *progress = SLOT(self, wm->off[WR_PROGRESS]);
    if (plan != NULL && progress != NULL && wm->parts != NULL && Py_TYPE(plan) == wm->parts)
        return wait_parts(wm, self, plan, progress);
    if (plan == NULL || progress == NULL || Py_TYPE(plan) != wm->plan)
        return PyObject_Vectorcall(wm->fallback, args, nargsf, kwnames);
    PyObject *irs = PyObject_GetAttr(progress, s_crestart);
    if (irs == NULL)
        return NULL;
    if (Py_TYPE(irs) != &IRestartType || ((IRestart *)irs)->progress != progress ||
            (PyTypeObject *)((IRestart *)irs)->plan_type != wm->plan) {
        Py_DECREF(irs);
        return PyObject_Vectorcall(wm->fallback, args, nargsf, kwnames);
    }
    Py_INCREF(plan);
    PyObject *r = IRestart_close((IRestart *)irs, plan);
    Py_DECREF(irs);
    if (r == Py_None) {
        Py_DECREF(r);
        Py_DECREF(plan);
        return PyObject_Vectorcall(wm->fallback, args, nargsf, kwnames);
    }
    if (r != NULL && r != Py_True) {  /* (stepped, not ended: the rest of Progress.wait) */
        PyObject *v = PyObject_CallMethodObjArgs(progress, s_wait_on, plan, r, NULL);
        Py_DECREF(r);
        r = v;
    }
    if (r == NULL) {
        Py_DECREF(plan);
        return NULL;
    }
    Py_DECREF(r);
    /* the request inactive, then its outcome (PlanRequest.outcome) */
    put_ref(self, wm->off[WR_ACTIVE], Py_False);
    put_ref(self, wm->off[WR_PLAN], Py_None);
    int bad = raise_part(SLOT(plan, wm->plan_off[PL_ERROR]));
    Py_DECREF(plan);
    if (bad < 0)
        return NULL;
    Py_RETURN_TRUE;
}

/* A method descriptor's binding (WaitMethod's, Method's): the descriptor itself from the class,
 * a bound method from an instance. */
static PyObject *method_get(PyObject *obj, PyObject *instance, PyObject *Py_UNUSED(owner))
{
    if (instance == NULL || instance == Py_None)
        return Py_NewRef(obj);
    return PyMethod_New(obj, instance);
}

static PyObject *WaitMethod_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *request_type, *plan_type, *fallback, *doc, *parts_type = Py_None;
    if (kw != NULL || !PyArg_ParseTuple(args, "O!O!OU|O", &PyType_Type, &request_type,
                                        &PyType_Type, &plan_type, &fallback, &doc, &parts_type))
        return NULL;
    if (parts_type != Py_None && !PyType_Check(parts_type)) {
        PyErr_SetString(PyExc_TypeError, "WaitMethod: parts_type is not a type");
        return NULL;
    }
    WaitMethod *self = (WaitMethod *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = WaitMethod_vectorcall;
    self->request = (PyTypeObject *)Py_NewRef(request_type);
    self->plan = (PyTypeObject *)Py_NewRef(plan_type);
    self->parts = parts_type == Py_None ? NULL : (PyTypeObject *)Py_NewRef(parts_type);
    self->fallback = Py_NewRef(fallback);
    self->doc = Py_NewRef(doc);
    if (slot_offsets(request_type, wrap_slots, WR_SLOTS, self->off) < 0 ||
            slot_offsets(plan_type, plan_slots, PL_SLOTS, self->plan_off) < 0 ||
            (self->parts != NULL &&
             slot_offsets(parts_type, chain_slots, CH_SLOTS, self->parts_off) < 0)) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyMemberDef WaitMethod_members[] = {
    {"__doc__", T_OBJECT, offsetof(WaitMethod, doc), READONLY, NULL},
    {"__wrapped__", T_OBJECT, offsetof(WaitMethod, fallback), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}
};

static PyTypeObject WaitMethodType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dualmpi_recall.WaitMethod",
    .tp_basicsize = sizeof(WaitMethod),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_new = WaitMethod_new,
    .tp_dealloc = (destructor)WaitMethod_dealloc,
    .tp_vectorcall_offset = offsetof(WaitMethod, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = method_get,
    .tp_members = WaitMethod_members,
};

/* A public method of dualmpi.Comm in C (Method(matcher, fallback, starts)): a method descriptor
 * (Py_TPFLAGS_METHOD_DESCRIPTOR, as WaitMethod) whose call ``comm.Name(*args)`` calls the
 * instance's matcher ``comm._mName`` (its attribute ``matcher``, a Recall or dualmpi.calls's
 * no_match/no_start) with the arguments, the defaults of ``fallback`` (the Python method) filled
 * in, as the Python method calls it; when the matcher ran the call (True; a request when
 * ``starts``: a nonblocking method's) that is the call's result (None; the request), else the
 * call is ``fallback``'s (which asks the matcher again: a matcher that declines changes
 * nothing).  Keyword arguments, too many or too few go to ``fallback`` at once.  Saves the
 * Python method's frame on every repeated call (docs/performance.md, "The public method in C").
 * Its ``__doc__``, ``__name__``, ``__qualname__`` and ``__wrapped__`` are the fallback's. */
#define METHOD_PARAMS 6
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *matcher, *fallback, *defaults, *doc, *name, *qualname;
    Py_ssize_t nparams;
    int starts;
} Method;

static void Method_dealloc(Method *self)
{
    Py_XDECREF(self->matcher);
    Py_XDECREF(self->fallback);
    Py_XDECREF(self->defaults);
    Py_XDECREF(self->doc);
    Py_XDECREF(self->name);
    Py_XDECREF(self->qualname);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Method_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames)
{
    Method *me = (Method *)obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), given = nargs - 1;
    Py_ssize_t ndef = PyTuple_GET_SIZE(me->defaults);
    if (nargs < 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames)) || given > me->nparams ||
            given < me->nparams - ndef)
        return PyObject_Vectorcall(me->fallback, args, nargsf, kwnames);
    /* (the instance's own attribute: no class __getattr__ hook on the way) */
    PyObject *m = PyObject_GenericGetAttr(args[0], me->matcher);
    if (m == NULL) {  /* (no matcher: the Python method says what is wrong) */
        PyErr_Clear();
        return PyObject_Vectorcall(me->fallback, args, nargsf, kwnames);
    }
    PyObject *stack[METHOD_PARAMS];
    for (Py_ssize_t i = 0; i < me->nparams; i++)
        stack[i] = i < given ? args[1 + i] : PyTuple_GET_ITEM(me->defaults, ndef - me->nparams + i);
    PyObject *r = PyObject_Vectorcall(m, stack, (size_t)me->nparams, NULL);
    Py_DECREF(m);
    if (r == NULL)
        return NULL;
    if (me->starts && r != Py_None)  /* (the request) */
        return r;
    /* (a blocking method: ``if not self._mName(...)``, as the Python method reads it) */
    int ran = me->starts ? 0 : PyObject_IsTrue(r);
    Py_DECREF(r);
    if (ran < 0)
        return NULL;
    if (ran)
        Py_RETURN_NONE;
    return PyObject_Vectorcall(me->fallback, args, nargsf, kwnames);
}

static PyObject *Method_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *matcher, *fallback;
    int starts;
    if (kw != NULL || !PyArg_ParseTuple(args, "UOp", &matcher, &fallback, &starts))
        return NULL;
    if (!PyFunction_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "Method: the fallback is not a Python function");
        return NULL;
    }
    PyCodeObject *code = (PyCodeObject *)PyFunction_GET_CODE(fallback);
    PyObject *defaults = PyFunction_GET_DEFAULTS(fallback);
    Py_ssize_t nparams = code->co_argcount - 1;
    if (code->co_argcount < 1 || code->co_kwonlyargcount || (code->co_flags & (CO_VARARGS |
            CO_VARKEYWORDS)) || nparams > METHOD_PARAMS ||
            (defaults != NULL && PyTuple_GET_SIZE(defaults) > nparams)) {
        PyErr_SetString(PyExc_TypeError, "Method: the fallback takes self and at most "
                        "6 positional parameters");
        return NULL;
    }
    Method *self = (Method *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = Method_vectorcall;
    self->matcher = Py_NewRef(matcher);
    PyUnicode_InternInPlace(&self->matcher);
    self->fallback = Py_NewRef(fallback);
    self->defaults = defaults != NULL ? Py_NewRef(defaults) : PyTuple_New(0);
    self->nparams = nparams;
    self->starts = starts;
    self->doc = PyObject_GetAttrString(fallback, "__doc__");
    self->name = PyObject_GetAttrString(fallback, "__name__");
    self->qualname = PyObject_GetAttrString(fallback, "__qualname__");
    if (self->defaults == NULL || self->doc == NULL || self->name == NULL ||
            self->qualname == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyMemberDef Method_members[] = {
    {"__doc__", T_OBJECT, offsetof(Method, doc), READONLY, NULL},
    {"__name__", T_OBJECT, offsetof(Method, name), READONLY, NULL},
    {"__qualname__", T_OBJECT, offsetof(Method, qualname), READONLY, NULL},
    {"__wrapped__", T_OBJECT, offsetof(Method, fallback), READONLY, NULL},
    {"matcher", T_OBJECT, offsetof(Method, matcher), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}
};

static PyTypeObject MethodType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dualmpi_recall.Method",
    .tp_basicsize = sizeof(Method),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_new = Method_new,
    .tp_dealloc = (destructor)Method_dealloc,
    .tp_vectorcall_offset = offsetof(Method, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = method_get,
    .tp_members = Method_members,
};

/* A nonblocking v-variant's repeat started in C (dualmpi.calls._install_vstart: the ``start`` of
 * its Recall.start, called with the method's memo and name once the arguments matched).
 *
 *   VStart(restart, chain_type, memo_type, comm_ref, method, desc)
 *
 * A call of it does what calls._Chain's start of a repeat does on the memo's own count table:
 * when the communicator (``comm_ref()``) is alive, its ``_nb`` is the IRestart's Progress, the
 * memo is still its ``_i_memo[what]``, the memo's table is free (``table_busy`` False), its
 * ``counts_repeat`` made and its ``counts`` made for the communicator's allgather algorithm,
 * it makes the ``chain_type`` (calls._Chain) request of the call with the memo's call, row and
 * set-up, takes the data's sequence number (Progress.reserve), holds the memo's table
 * (``table_busy``, ``sink[0]`` the request's ``_sizes``) and starts the count table's part as
 * IRestart(counts_repeat, counts_what, None) does; it returns the user's request of it (the
 * Progress's ``wrap``).  Anything else -- a condition not met, or the part's start declined
 * (None, NotImplemented: the number and the table given back) -- returns None: the Python
 * path (calls.icollective) starts the call. */
enum { VC_COMM, VC_PROGRESS, VC_WHAT, VC_METHOD, VC_DESC, VC_CALL, VC_ERROR, VC_DATA, VC_MEMO,
       VC_PROBLEM, VC_ROW, VC_SETUP, VC_DATA_SEQ, VC_OWNS, VC_COUNTS, VC_TABLE, VC_SEQ,
       VC_MADE, VC_SLOTS };
static const char *vchain_slots[VC_SLOTS] = {
    "comm", "progress", "what", "method", "desc", "call", "error", "data", "memo", "problem",
    "row", "setup", "data_seq", "owns", "counts", "table", "seq", "made"
};
enum { VM_CALL, VM_ROW, VM_COUNTS, VM_COUNTS_REPEAT, VM_TABLE_BUF, VM_TABLE_BUSY, VM_SINK,
       VM_COUNTS_WHAT, VM_SLOTS };
static const char *vmemo_slots[VM_SLOTS] = {
    "call", "row", "counts", "counts_repeat", "table_buf", "table_busy", "sink", "counts_what"
};
static PyObject *s_nb, *s_i_memo, *s_algorithms, *s_allgather, *s_sizes;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *irs, *chain_type, *memo_type, *comm_ref, *method, *desc;
    Py_ssize_t chain_off[VC_SLOTS], memo_off[VM_SLOTS];
} VStart;

static void VStart_dealloc(VStart *self)
{
    Py_XDECREF(self->irs);
    Py_XDECREF(self->chain_type);
    Py_XDECREF(self->memo_type);
    Py_XDECREF(self->comm_ref);
    Py_XDECREF(self->method);
    Py_XDECREF(self->desc);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Whether ``memo`` (its slots read) may start a repeat for ``comm``: 1, 0 (not), -1 (error). */
static int vstart_ready(VStart *vs, PyObject *comm, PyObject *memo, PyObject *what)
{
    const Py_ssize_t *m = vs->memo_off;
    for (int i = 0; i < VM_SLOTS; i++)
        if (slot_get(memo, m[i]) == NULL)
            return -1;
    if (SLOT(memo, m[VM_TABLE_BUSY]) != Py_False || SLOT(memo, m[VM_COUNTS_REPEAT]) == Py_None ||
            !PyList_Check(SLOT(memo, m[VM_SINK])) || PyList_GET_SIZE(SLOT(memo, m[VM_SINK])) < 1 ||
            !PyTuple_Check(SLOT(memo, m[VM_COUNTS])) ||
            PyTuple_GET_SIZE(SLOT(memo, m[VM_COUNTS])) < 1)
        return 0;
    int ok = 0;
    PyObject *nb = PyObject_GetAttr(comm, s_nb), *memos = NULL, *algs = NULL;
    if (nb == NULL)
        return -1;
    if (nb != ((IRestart *)vs->irs)->progress)
        goto out;
    if ((memos = PyObject_GetAttr(comm, s_i_memo)) == NULL ||
            (algs = PyObject_GetAttr(comm, s_algorithms)) == NULL) {
        ok = -1;
        goto out;
    }
    if (!PyDict_Check(memos) || !PyDict_Check(algs))
        goto out;
    PyObject *mine = PyDict_GetItemWithError(memos, what);
    if (mine != memo) {
        ok = PyErr_Occurred() ? -1 : 0;
        goto out;
    }
    PyObject *ring = PyDict_GetItemWithError(algs, s_allgather);
    if (ring == NULL) {
        if (PyErr_Occurred()) {
            ok = -1;
            goto out;
        }
        ring = Py_None;
    }
    /* (calls._Chain.repeat: the counts' set-up made for the communicator's allgather) */
    int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(SLOT(memo, m[VM_COUNTS]), 0), ring,
                                        Py_EQ);
    ok = same < 0 ? -1 : same;
out:
    Py_DECREF(nb);
    Py_XDECREF(memos);
    Py_XDECREF(algs);
    return ok;
}

static PyObject *VStart_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames)
{
    VStart *vs = (VStart *)obj;
    if (kwnames != NULL || PyVectorcall_NARGS(nargsf) != 2 ||
            Py_TYPE(args[0]) != (PyTypeObject *)vs->memo_type) {
        PyErr_SetString(PyExc_TypeError, "VStart(memo, what)");
        return NULL;
    }
    PyObject *memo = args[0], *what = args[1];
    IRestart *irs = (IRestart *)vs->irs;
    PyObject *comm = PyObject_CallNoArgs(vs->comm_ref);
    if (comm == NULL)
        return NULL;
    int ready = comm == Py_None ? 0 : vstart_ready(vs, comm, memo, what);
    if (ready <= 0) {
        Py_DECREF(comm);
        return ready < 0 ? NULL : Py_NewRef(Py_None);
    }
    const Py_ssize_t *m = vs->memo_off, *c = vs->chain_off;
    PyTypeObject *ct = (PyTypeObject *)vs->chain_type;
    PyObject *chain = ct->tp_alloc(ct, 0), *sink = SLOT(memo, m[VM_SINK]), *part = NULL;
    if (chain == NULL) {
        Py_DECREF(comm);
        return NULL;
    }
    put(chain, c[VC_COMM], comm);  /* (the reference taken) */
    put_ref(chain, c[VC_PROGRESS], irs->progress);
    put_ref(chain, c[VC_WHAT], what);
    put_ref(chain, c[VC_METHOD], vs->method);
    put_ref(chain, c[VC_DESC], vs->desc);
    put_ref(chain, c[VC_CALL], SLOT(memo, m[VM_CALL]));
    put_ref(chain, c[VC_ERROR], Py_None);
    put_ref(chain, c[VC_DATA], Py_None);
    put_ref(chain, c[VC_MEMO], memo);
    put_ref(chain, c[VC_PROBLEM], Py_None);
    put_ref(chain, c[VC_ROW], SLOT(memo, m[VM_ROW]));
    put_ref(chain, c[VC_SETUP], SLOT(memo, m[VM_COUNTS]));
    put_ref(chain, c[VC_MADE], Py_None);
    put_ref(chain, c[VC_OWNS], Py_True);
    put_ref(chain, c[VC_TABLE], SLOT(memo, m[VM_TABLE_BUF]));
    /* the data's number, taken before the count table's part (which may end at once) */
    int64_t seq = irs->counts[PC_SEQ];
    irs->counts[PC_SEQ] = seq + 1;
    put(chain, c[VC_DATA_SEQ], PyLong_FromLongLong(seq));
    PyObject *sizes = PyObject_GetAttr(chain, s_sizes);
    if (sizes == NULL || SLOT(chain, c[VC_DATA_SEQ]) == NULL) {
        Py_XDECREF(sizes);
        goto undo;
    }
    /* the memo's table held (calls._Chain._begin), then the count table's part */
    Py_INCREF(sink);
    if (PyList_SetItem(sink, 0, sizes) < 0) {  /* (sizes stolen) */
        Py_DECREF(sink);
        goto undo;
    }
    put_ref(memo, m[VM_TABLE_BUSY], Py_True);
    part = irestart(irs, SLOT(memo, m[VM_COUNTS_REPEAT]), SLOT(memo, m[VM_COUNTS_WHAT]), Py_None,
                    1);
    if (part == NULL || Py_TYPE(part) != (PyTypeObject *)irs->plan_type) {
        /* (declined: nothing started, the table and the number given back) */
        int bad = part == NULL;
        Py_XDECREF(part);
        Py_INCREF(Py_None);
        PyList_SetItem(sink, 0, Py_None);
        Py_DECREF(sink);
        put_ref(memo, m[VM_TABLE_BUSY], Py_False);
        if (irs->counts[PC_SEQ] == seq + 1)
            irs->counts[PC_SEQ] = seq;
        Py_DECREF(chain);
        return bad ? NULL : Py_NewRef(Py_None);
    }
    Py_DECREF(sink);
    put_ref(chain, c[VC_SEQ], SLOT(part, irs->plan_off[PL_SEQ]));
    put(chain, c[VC_COUNTS], part);  /* (the reference taken) */
    for (int i = 0; i < VC_SLOTS; i++)
        if (slot_get(chain, c[i]) == NULL) {  /* (not expected: every slot written) */
            Py_DECREF(chain);
            return NULL;
        }
    /* wrap(progress, chain): the user's request */
    PyTypeObject *wt = (PyTypeObject *)irs->wrap;
    PyObject *wrapped = wt->tp_alloc(wt, 0);
    if (wrapped == NULL) {
        Py_DECREF(chain);
        return NULL;
    }
    put_ref(wrapped, irs->wrap_off[WR_PROGRESS], irs->progress);
    put(wrapped, irs->wrap_off[WR_PLAN], chain);
    put_ref(wrapped, irs->wrap_off[WR_ACTIVE], Py_True);
    return wrapped;
undo:
    if (irs->counts[PC_SEQ] == seq + 1)
        irs->counts[PC_SEQ] = seq;
    Py_DECREF(chain);
    return NULL;
}

static PyObject *VStart_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *irs, *chain_type, *memo_type, *comm_ref, *method, *desc;
    if (kw != NULL || !PyArg_ParseTuple(args, "O!O!O!OOO", &IRestartType, &irs, &PyType_Type,
                                        &chain_type, &PyType_Type, &memo_type, &comm_ref,
                                        &method, &desc))
        return NULL;
    if (!PyCallable_Check(comm_ref) || ((IRestart *)irs)->vectorcall == NULL) {
        PyErr_SetString(PyExc_TypeError, "VStart: a weak reference to the communicator");
        return NULL;
    }
    VStart *self = (VStart *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = NULL;
    self->irs = Py_NewRef(irs);
    self->chain_type = Py_NewRef(chain_type);
    self->memo_type = Py_NewRef(memo_type);
    self->comm_ref = Py_NewRef(comm_ref);
    self->method = Py_NewRef(method);
    self->desc = Py_NewRef(desc);
    if (slot_offsets(chain_type, vchain_slots, VC_SLOTS, self->chain_off) < 0 ||
            slot_offsets(memo_type, vmemo_slots, VM_SLOTS, self->memo_off) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->vectorcall = VStart_vectorcall;
    return (PyObject *)self;
}

static PyTypeObject VStartType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dualmpi_recall.VStart",
    .tp_basicsize = sizeof(VStart),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = VStart_new,
    .tp_dealloc = (destructor)VStart_dealloc,
    .tp_vectorcall_offset = offsetof(VStart, vectorcall),
    .tp_call = PyVectorcall_Call,
};

/* The finish of a nonblocking v-variant's count-table repeat (dualmpi.calls._IMemo.count_table).
 *
 *   VSizes(tick, sink, restart, chain_type, memo_type)
 *
 * A call of it counts the call (``tick()``, a Tick) and then does what the running call's
 * ``_sizes`` (``sink[0]``, a bound method of a ``chain_type``: calls._Chain) does when the
 * table that came is the memo's own, the one its data's plan was made for: it gives the memo's
 * table back (``table_busy`` False, ``sink[0]`` None, the request's ``owns`` False) and starts
 * the data's part as IRestart(data_repeat, what, data_seq) does, the request's ``data`` then.
 * Anything else -- another table, no data repeat, a start that declines -- is ``sink[0]()``
 * itself, the Python ``_sizes`` (which, after a declined start, finds the table given back and
 * starts the data's part in Python). */
enum { VS_TABLE, VS_TABLE_BUSY, VS_SINK, VS_DATA_REPEAT, VS_SLOTS };
static const char *vsizes_memo_slots[VS_SLOTS] = {"table", "table_busy", "sink", "data_repeat"};

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *tick, *sink, *irs, *chain_type, *memo_type;
    Py_ssize_t chain_off[VC_SLOTS], memo_off[VS_SLOTS];
} VSizes;

/* (collected as a container: the sink may hold a bound method of a request whose memo holds
 * this finish) */
static int VSizes_traverse(VSizes *self, visitproc visit, void *arg)
{
    Py_VISIT(self->tick);
    Py_VISIT(self->sink);
    Py_VISIT(self->irs);
    Py_VISIT(self->chain_type);
    Py_VISIT(self->memo_type);
    return 0;
}

static int VSizes_clear(VSizes *self)
{
    Py_CLEAR(self->tick);
    Py_CLEAR(self->sink);
    Py_CLEAR(self->irs);
    Py_CLEAR(self->chain_type);
    Py_CLEAR(self->memo_type);
    return 0;
}

static void VSizes_dealloc(VSizes *self)
{
    PyObject_GC_UnTrack(self);
    VSizes_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Whether the request ``chain`` owns the memo's table and got the memo's own table (1), not (0). */
static int vsizes_same(VSizes *vs, PyObject *chain, PyObject **memo_out)
{
    const Py_ssize_t *c = vs->chain_off, *m = vs->memo_off;
    PyObject *memo = SLOT(chain, c[VC_MEMO]), *owns = SLOT(chain, c[VC_OWNS]);
    PyObject *table = SLOT(chain, c[VC_TABLE]);
    if (memo == NULL || owns != Py_True || table == NULL ||
            Py_TYPE(memo) != (PyTypeObject *)vs->memo_type || SLOT(chain, c[VC_WHAT]) == NULL ||
            SLOT(chain, c[VC_DATA_SEQ]) == NULL)
        return 0;
    for (int i = 0; i < VS_SLOTS; i++)
        if (SLOT(memo, m[i]) == NULL)
            return 0;
    PyObject *seen = SLOT(memo, m[VS_TABLE]);
    if (SLOT(memo, m[VS_DATA_REPEAT]) == Py_None || !PyBytes_Check(seen) || !PyArray_Check(table) ||
            !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)table) ||
            PyArray_NBYTES((PyArrayObject *)table) != PyBytes_GET_SIZE(seen) ||
            memcmp(PyArray_DATA((PyArrayObject *)table), PyBytes_AS_STRING(seen),
                   (size_t)PyBytes_GET_SIZE(seen)) != 0)
        return 0;
    *memo_out = memo;
    return 1;
}

static PyObject *VSizes_vectorcall(PyObject *obj, PyObject *const *Py_UNUSED(args), size_t nargsf,
                                   PyObject *kwnames)
{
    VSizes *vs = (VSizes *)obj;
    if (vs->tick == NULL || vs->irs == NULL || vs->sink == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "VSizes: cleared");
        return NULL;
    }
    if (kwnames != NULL || PyVectorcall_NARGS(nargsf) != 0) {
        PyErr_SetString(PyExc_TypeError, "VSizes()");
        return NULL;
    }
    PyObject *v = PyObject_CallNoArgs(vs->tick);
    if (v == NULL)
        return NULL;
    Py_DECREF(v);
    if (!PyList_Check(vs->sink) || PyList_GET_SIZE(vs->sink) < 1) {
        PyErr_SetString(PyExc_TypeError, "VSizes: the sink is not a list of one");
        return NULL;
    }
    PyObject *fn = Py_NewRef(PyList_GET_ITEM(vs->sink, 0)), *memo = NULL;
    PyObject *chain = PyMethod_Check(fn) ? PyMethod_GET_SELF(fn) : NULL;
    if (chain == NULL || Py_TYPE(chain) != (PyTypeObject *)vs->chain_type ||
            !vsizes_same(vs, chain, &memo)) {
        v = PyObject_CallNoArgs(fn);  /* (the Python _sizes) */
        Py_DECREF(fn);
        return v;
    }
    const Py_ssize_t *c = vs->chain_off, *m = vs->memo_off;
    IRestart *irs = (IRestart *)vs->irs;
    Py_INCREF(chain);  /* (fn holds it; the sink's reference to fn goes below) */
    /* the memo's table given back: read, the next call may take it */
    put_ref(memo, m[VS_TABLE_BUSY], Py_False);
    Py_INCREF(Py_None);
    PyList_SetItem(vs->sink, 0, Py_None);
    put_ref(chain, c[VC_OWNS], Py_False);
    PyObject *data = irestart(irs, SLOT(memo, m[VS_DATA_REPEAT]), SLOT(chain, c[VC_WHAT]),
                              SLOT(chain, c[VC_DATA_SEQ]), 1);
    if (data != NULL && Py_TYPE(data) == (PyTypeObject *)irs->plan_type) {
        put(chain, c[VC_DATA], data);  /* (the reference taken) */
        v = Py_NewRef(Py_None);
    } else if (data != NULL) {  /* declined: the Python _sizes starts it */
        Py_DECREF(data);
        v = PyObject_CallNoArgs(fn);
    } else {
        v = NULL;
    }
    Py_DECREF(chain);
    Py_DECREF(fn);
    return v;
}

static PyObject *VSizes_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *tick, *sink, *irs, *chain_type, *memo_type;
    if (kw != NULL || !PyArg_ParseTuple(args, "OO!O!O!O!", &tick, &PyList_Type, &sink,
                                        &IRestartType, &irs, &PyType_Type, &chain_type,
                                        &PyType_Type, &memo_type))
        return NULL;
    if (!PyCallable_Check(tick) || ((IRestart *)irs)->vectorcall == NULL) {
        PyErr_SetString(PyExc_TypeError, "VSizes: a callable tick and a made IRestart");
        return NULL;
    }
    VSizes *self = (VSizes *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = NULL;
    self->tick = Py_NewRef(tick);
    self->sink = Py_NewRef(sink);
    self->irs = Py_NewRef(irs);
    self->chain_type = Py_NewRef(chain_type);
    self->memo_type = Py_NewRef(memo_type);
    if (slot_offsets(chain_type, vchain_slots, VC_SLOTS, self->chain_off) < 0 ||
            slot_offsets(memo_type, vsizes_memo_slots, VS_SLOTS, self->memo_off) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->vectorcall = VSizes_vectorcall;
    return (PyObject *)self;
}

static PyTypeObject VSizesType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dualmpi_recall.VSizes",
    .tp_basicsize = sizeof(VSizes),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_new = VSizes_new,
    .tp_dealloc = (destructor)VSizes_dealloc,
    .tp_traverse = (traverseproc)VSizes_traverse,
    .tp_clear = (inquiry)VSizes_clear,
    .tp_vectorcall_offset = offsetof(VSizes, vectorcall),
    .tp_call = PyVectorcall_Call,
};

/* A repeated nonblocking neighbourhood call started and waited for in C (dualmpi/neighbor.py:
 * what _Fast's start and the head of _Progress.wait do for the common case).
 *
 *   NStart(progress, exchange_type, wrap, active, inflight, post)
 *       per neighbourhood progress engine (neighbor._Progress): calling it with (fast, what)
 *       (``fast`` a nonblocking neighbor._Fast) starts a repeat of ``fast.memo``:
 *       NotImplemented while the memo is busy (its last exchange in flight); else the memo
 *       busy, the messages posted (``post``, rounds.c's dualmpi_npost, on ``fast.xaddr``: a
 *       failure to post is the exchange's result), the neighbor._CExchange made (its
 *       __slots__ written at their offsets; its number ``fast.track_addr[1]``), counted in
 *       ``active`` and ``inflight``, and returned as ``wrap(progress, exchange)`` does (the
 *       slots _progress, _plan and _active of dualmpi.Request).
 *
 *   NStart.close(exchange)
 *       the head of _Progress.wait: when ``exchange`` is a _CExchange not done and the only
 *       request in flight on the rank, it waits for it in C (``fast.call``: the bound
 *       dualmpi_nwait, under the watchdog; its code in ``fast.last``) and ends it as
 *       _CExchange.block does (another code than 0: ``exchange._settle(code)``); returns
 *       True.  Otherwise None (the Python wait then).
 */
enum { CX_FAST, CX_PROGRESS, CX_WHAT, CX_SEQ, CX_SINCE, CX_DONE, CX_FAILURE, CX_FAULT, CX_SLOTS };
static const char *cx_slots[CX_SLOTS] = {
    "fast", "progress", "what", "seq", "since", "done", "failure", "fault"
};

typedef int (*npost_fn)(const int64_t *);

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *progress, *ex_type, *wrap, *active, *inflight;
    int64_t *inflight_at;
    npost_fn post;
    Py_ssize_t cx_off[CX_SLOTS], wrap_off[WR_SLOTS];
} NStart;

static PyObject *s_memo, *s_busy, *s_xaddr, *s_track_addr, *s_call, *s_last, *s_settle;

static void NStart_dealloc(NStart *self)
{
    Py_XDECREF(self->progress);
    Py_XDECREF(self->ex_type);
    Py_XDECREF(self->wrap);
    Py_XDECREF(self->active);
    Py_XDECREF(self->inflight);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *NStart_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames);

static PyObject *NStart_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *progress, *ex_type, *wrap, *active, *inflight;
    unsigned long long post;
    if (kw != NULL || !PyArg_ParseTuple(args, "OOOOOK", &progress, &ex_type, &wrap, &active,
                                        &inflight, &post))
        return NULL;
    if (!PyType_Check(ex_type) || !PyType_Check(wrap) || !PyList_CheckExact(active) || !post) {
        PyErr_SetString(PyExc_TypeError, "NStart: bad arguments");
        return NULL;
    }
    NStart *self = (NStart *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = NULL;
    Py_INCREF(progress); self->progress = progress;
    Py_INCREF(ex_type); self->ex_type = ex_type;
    Py_INCREF(wrap); self->wrap = wrap;
    Py_INCREF(active); self->active = active;
    Py_INCREF(inflight); self->inflight = inflight;
    self->post = (npost_fn)(uintptr_t)post;
    if ((self->inflight_at = array_data(inflight, "inflight")) == NULL ||
            slot_offsets(ex_type, cx_slots, CX_SLOTS, self->cx_off) < 0 ||
            slot_offsets(wrap, wrap_slots, WR_SLOTS, self->wrap_off) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->vectorcall = NStart_vectorcall;
    return (PyObject *)self;
}

static PyObject *nstart(NStart *self, PyObject *fast, PyObject *what)
{
    PyObject *memo = PyObject_GetAttr(fast, s_memo), *ex = NULL, *wrapped = NULL;
    if (memo == NULL)
        return NULL;
    PyObject *busy = PyObject_GetAttr(memo, s_busy);
    int is_busy = busy == NULL ? -1 : PyObject_IsTrue(busy);
    Py_XDECREF(busy);
    if (is_busy) {
        Py_DECREF(memo);
        if (is_busy < 0)
            return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    long long x = attr_ll(fast, s_xaddr);
    if (x == -1 && PyErr_Occurred())
        goto fail;
    long long track = attr_ll(fast, s_track_addr);
    if ((track == -1 && PyErr_Occurred()) || !x || !track) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "NStart: no exchange");
        goto fail;
    }
    PyTypeObject *et = (PyTypeObject *)self->ex_type, *wt = (PyTypeObject *)self->wrap;
    ex = et->tp_alloc(et, 0);
    wrapped = ex == NULL ? NULL : wt->tp_alloc(wt, 0);
    if (wrapped == NULL)
        goto fail;
    if (PyObject_SetAttr(memo, s_busy, Py_True) < 0)
        goto fail;
    self->post((const int64_t *)(intptr_t)x);  /* (a failure to post: the exchange's result) */
    const Py_ssize_t *o = self->cx_off;
    for (int i = 0; i < CX_SLOTS; i++)
        put_ref(ex, o[i], Py_None);
    put_ref(ex, o[CX_FAST], fast);
    put_ref(ex, o[CX_PROGRESS], self->progress);
    put_ref(ex, o[CX_WHAT], what);
    put(ex, o[CX_SEQ], PyLong_FromLongLong(((const int64_t *)(intptr_t)track)[1]));
    put(ex, o[CX_SINCE], PyFloat_FromDouble(monotonic()));
    put_ref(ex, o[CX_DONE], Py_False);
    if (SLOT(ex, o[CX_SEQ]) == NULL || SLOT(ex, o[CX_SINCE]) == NULL ||
            PyList_Append(self->active, ex) < 0)
        goto fail;  /* (MemoryError: the messages posted stay unwaited for) */
    self->inflight_at[0] += 1;
    put_ref(wrapped, self->wrap_off[WR_PROGRESS], self->progress);
    put_ref(wrapped, self->wrap_off[WR_PLAN], ex);
    put_ref(wrapped, self->wrap_off[WR_ACTIVE], Py_True);
    Py_DECREF(ex);
    Py_DECREF(memo);
    return wrapped;
fail:
    Py_XDECREF(wrapped);
    Py_XDECREF(ex);
    Py_DECREF(memo);
    return NULL;
}

static PyObject *NStart_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames)
{
    if (kwnames != NULL || PyVectorcall_NARGS(nargsf) != 2) {
        PyErr_SetString(PyExc_TypeError, "NStart(fast, what)");
        return NULL;
    }
    return nstart((NStart *)obj, args[0], args[1]);
}

static PyObject *NStart_close(NStart *self, PyObject *ex)
{
    if (self->inflight_at[0] != 1 || Py_TYPE(ex) != (PyTypeObject *)self->ex_type)
        Py_RETURN_NONE;
    const Py_ssize_t *o = self->cx_off;
    PyObject *fast = SLOT(ex, o[CX_FAST]);
    if (SLOT(ex, o[CX_DONE]) != Py_False || fast == NULL || fast == Py_None)
        Py_RETURN_NONE;
    Py_INCREF(ex);
    Py_INCREF(fast);
    PyObject *zero = PyLong_FromLong(0), *call = NULL, *v = NULL, *memo = NULL;
    int ok = -1;
    if (zero == NULL || PyObject_SetAttr(fast, s_last, zero) < 0)
        goto out;
    if ((call = PyObject_GetAttr(fast, s_call)) == NULL)
        goto out;
    if ((v = PyObject_CallNoArgs(call)) == NULL)
        goto out;
    Py_CLEAR(v);
    long long last = attr_ll(fast, s_last);
    if (last == -1 && PyErr_Occurred())
        goto out;
    if (last) {  /* (a header to check, an error: _settle's) */
        PyObject *code = PyLong_FromLongLong(last);
        v = code == NULL ? NULL : PyObject_CallMethodOneArg(ex, s_settle, code);
        Py_XDECREF(code);
        if (v == NULL)
            goto out;
        Py_CLEAR(v);
        ok = 0;
        goto out;
    }
    put_ref(ex, o[CX_DONE], Py_True);
    if ((memo = PyObject_GetAttr(fast, s_memo)) == NULL ||
            PyObject_SetAttr(memo, s_busy, Py_False) < 0)
        goto out;
    for (Py_ssize_t i = PyList_GET_SIZE(self->active) - 1; i >= 0; i--)
        if (PyList_GET_ITEM(self->active, i) == ex) {
            if (PyList_SetSlice(self->active, i, i + 1, NULL) < 0)
                goto out;
            self->inflight_at[0] -= 1;
            break;
        }
    ok = 0;
out:
    Py_XDECREF(zero);
    Py_XDECREF(call);
    Py_XDECREF(memo);
    Py_DECREF(fast);
    Py_DECREF(ex);
    if (ok < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyMethodDef NStart_methods[] = {
    {"close", (PyCFunction)NStart_close, METH_O,
     "close(exchange): wait in C for the only request in flight and end it (see recall.c)"},
    {NULL, NULL, 0, NULL}
};

static PyTypeObject NStartType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dualmpi_recall.NStart",
    .tp_basicsize = sizeof(NStart),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A repeated nonblocking neighbourhood call started and ended in C (see "
              "dualmpi/engine/recall.c)",
    .tp_new = NStart_new,
    .tp_dealloc = (destructor)NStart_dealloc,
    .tp_vectorcall_offset = offsetof(NStart, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_methods = NStart_methods,
};

static PyMethodDef module_functions[] = {
    {"same", (PyCFunction)(void (*)(void))recall_same, METH_FASTCALL,
     "same(template, args): True when args are what the template was made of"},
    {NULL, NULL, 0, NULL}
};

static PyMethodDef Recall_methods[] = {
    {"match", (PyCFunction)Recall_match, METH_VARARGS | METH_CLASS,
     "match(call, held, checks, lease, epoch): a matcher running ``call`` (see recall.c)"},
    {"shape", (PyCFunction)Recall_shape, METH_VARARGS | METH_CLASS,
     "shape(call, held, checks, lease, epoch, patches[, seen]): a matcher of arrays by "
     "shape, their addresses patched into the call (see recall.c)"},
    {"like", (PyCFunction)Recall_like, METH_VARARGS | METH_CLASS,
     "like(call, template, lease, epoch): a matcher of arguments by value (see recall.c)"},
    {"start", (PyCFunction)Recall_start, METH_VARARGS | METH_CLASS,
     "start(start, repeat, what, alarm, template, lease, epoch): a nonblocking repeat's "
     "matcher, returning start(repeat, what)'s request or None (see recall.c)"},
    {"chain", (PyCFunction)Recall_chain, METH_VARARGS | METH_CLASS,
     "chain(matchers): the first matcher of the tuple whose arguments match (see recall.c)"},
    {NULL, NULL, 0, NULL}
};

static PyTypeObject RecallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dualmpi_recall.Recall",
    .tp_basicsize = sizeof(Recall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A remembered call (see dualmpi/engine/recall.c)",
    .tp_new = Recall_new,
    .tp_dealloc = (destructor)Recall_dealloc,
    .tp_vectorcall_offset = offsetof(Recall, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_methods = Recall_methods,
};

static struct PyModuleDef recall_module = {
    PyModuleDef_HEAD_INIT, "dualmpi_recall",
    "dualmpi's remembered calls in C (dualmpi/engine/recall.c)", -1, module_functions, NULL,
    NULL, NULL, NULL
};

PyMODINIT_FUNC PyInit_dualmpi_recall(void)
{
    import_array();
    str_state = PyUnicode_InternFromString("state");
    str_evicted = PyUnicode_InternFromString("evicted");
    str_handle = PyUnicode_InternFromString("handle");
    str_broken = PyUnicode_InternFromString("broken");
    str_plan = PyUnicode_InternFromString("_plan");
    str_keep = PyUnicode_InternFromString("keep");
    if (str_state == NULL || str_evicted == NULL || str_handle == NULL || str_broken == NULL ||
            str_plan == NULL || str_keep == NULL)
        return NULL;
    static const struct { const char *name; PyTypeObject *type; } types[] = {
        {"Recall", &RecallType}, {"VRecall", &VRecallType}, {"CFunc", &CFuncType},
        {"IRestart", &IRestartType}, {"NStart", &NStartType}, {"Tick", &TickType},
        {"WaitMethod", &WaitMethodType}, {"VStart", &VStartType}, {"VSizes", &VSizesType},
        {"Method", &MethodType},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (PyType_Ready(types[i].type) < 0)
            return NULL;
    {
        static struct { PyObject **at; const char *name; } names[] = {
            {&s_rounds, "rounds"}, {&s_move_to_end, "move_to_end"}, {&s_poll, "poll"},
            {&s_advance, "_advance"}, {&s_restart_failed, "_restart_failed"}, {&s_free, "free"},
            {&s_fail, "_fail"}, {&s_tracker, "_tracker"}, {&s_waited, "_waited"},
            {&s_memo, "memo"}, {&s_busy, "busy"}, {&s_xaddr, "xaddr"},
            {&s_track_addr, "track_addr"}, {&s_call, "call"}, {&s_last, "last"},
            {&s_settle, "_settle"}, {&s_crestart, "crestart"}, {&s_req, "req"},
            {&s_wait_on, "_wait_on"}, {&s_wait, "wait"}, {&s_outcome, "outcome"}, {&s_nb, "_nb"},
            {&s_i_memo, "_i_memo"}, {&s_algorithms, "algorithms"}, {&s_allgather, "allgather"},
            {&s_sizes, "_sizes"},
        };
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if ((*names[i].at = PyUnicode_InternFromString(names[i].name)) == NULL)
                return NULL;
    }
    PyObject *m = PyModule_Create(&recall_module);
    if (m == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        Py_INCREF(types[i].type);
        if (PyModule_AddObject(m, types[i].name, (PyObject *)types[i].type) < 0) {
            Py_DECREF(types[i].type);
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
