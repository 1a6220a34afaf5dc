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
 *       during the call; a non-zero result calls ``failed(err)``, which raises.  Returns None.
 *
 *   Recall.match(call, held, checks, engine, epoch)
 *       a matcher: calling it with up to four arguments runs ``call`` and returns True when
 *       they are the objects ``held`` (missing ones None), each array of ``checks``
 *       (``(array, dtype, shape, writable)``) still has that dtype and shape (and is
 *       writable when asked) and ``engine.evictions == epoch``; otherwise it returns False
 *       and runs nothing.  ``call`` is a bound Recall (its C call is made directly) or any
 *       Python callable of no argument (a plan that combines in Python between segments, or
 *       a call not bound yet, which binds itself the first time it runs).
 *
 *   Recall.like(call, template, engine, epoch)
 *       a matcher of arguments compared by value (the kinds below, ``same``): calling it
 *       runs ``call`` and returns True when the arguments are what ``template`` was made of
 *       (a buffer spec made anew for every call, ``[buf, MPI.DOUBLE]``) and
 *       ``engine.evictions == epoch``; otherwise it returns False and runs nothing.
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
#include <stddef.h>
#include <stdint.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#define MAX_HELD 4
#define MAX_CHECKS 2
#define MAX_DIMS 8

typedef int (*run_fn)(void *);

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
    PyObject *engine;
    long long epoch;
    int matcher;              /* 0 a bound call, 1 a matcher, 2 a chain (``call``: a tuple) */
} Recall;

static PyTypeObject RecallType;
static PyObject *str_state, *str_evictions;

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
    for (int i = 0; i < self->nchecks; i++) {
        Py_XDECREF((PyObject *)self->checks[i].array);
        Py_XDECREF((PyObject *)self->checks[i].dtype);
    }
    Py_XDECREF(self->engine);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Run a bound call: fn(arg) without the GIL, under the watchdog; NULL with the error set. */
static PyObject *run_bound(Recall *self)
{
    int err;
    if (self->wd != NULL && PyObject_SetAttr(self->wd, str_state, self->tracked) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    err = self->fn(self->arg);
    Py_END_ALLOW_THREADS
    if (self->wd != NULL && PyObject_SetAttr(self->wd, str_state, Py_None) < 0)
        return NULL;
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
static int matches(Recall *self, PyObject *const *args, Py_ssize_t nargs)
{
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
    PyObject *ev = PyObject_GetAttr(self->engine, str_evictions);
    if (ev == NULL)
        return -1;
    long long now = PyLong_AsLongLong(ev);
    Py_DECREF(ev);
    if (now == -1 && PyErr_Occurred())
        return -1;
    if (now != self->epoch)
        return 0;
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
    if (kwnames && PyTuple_GET_SIZE(kwnames))
        Py_RETURN_FALSE;  /* keywords: the Python path reads them */
    if (self->matcher == 2) {
        /* the chain's tuple holds its matchers while one runs (and may install another) */
        PyObject *chain = self->call;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(chain); i++) {
            Recall *m = (Recall *)PyTuple_GET_ITEM(chain, i);
            int ok = matches(m, args, nargs);
            if (ok < 0)
                return NULL;
            if (ok) {
                self = m;
                goto run;
            }
        }
        Py_RETURN_FALSE;
    }
    int ok = matches(self, args, nargs);
    if (ok < 0)
        return NULL;
    if (!ok)
        Py_RETURN_FALSE;
run:;
    PyObject *out = self->bound != NULL ? run_bound(self->bound)
                                        : PyObject_CallNoArgs(self->call);
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
 * ``engine.evictions == epoch``; what it compares is the caller's to set. */
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
    Py_INCREF(engine);
    self->engine = engine;
    self->epoch = epoch;
    return self;
}

/* Recall.match(call, held, checks, engine, epoch): a matcher. */
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
    for (Py_ssize_t i = 0; i < MAX_HELD; i++) {
        PyObject *h = i < PyTuple_GET_SIZE(held) ? PyTuple_GET_ITEM(held, i) : Py_None;
        Py_INCREF(h);
        self->held[i] = h;
    }
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

/* Recall.like(call, template, engine, epoch): a matcher by value. */
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
 */
enum { T_SAME, T_ARRAY, T_INT, T_INTS, T_SEQ, T_VALUES, T_HANDLE };

static PyObject *str_handle;

static int same(PyObject *t, PyObject *x);

static int same_array(PyObject *t, PyObject *x)
{
    if (x != PyTuple_GET_ITEM(t, 1))
        return 0;
    PyArrayObject *a = (PyArrayObject *)x;
    PyObject *shape = PyTuple_GET_ITEM(t, 3), *strides = PyTuple_GET_ITEM(t, 4);
    int nd = PyArray_NDIM(a);
    if ((PyObject *)PyArray_DESCR(a) != PyTuple_GET_ITEM(t, 2) || nd != PyTuple_GET_SIZE(shape) ||
            PyObject_IsTrue(PyTuple_GET_ITEM(t, 5)) != (PyArray_ISWRITEABLE(a) != 0))
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
    case T_SAME:
        return x == PyTuple_GET_ITEM(t, 1);
    case T_ARRAY:
        return same_array(t, x);
    case T_INT:
        return same_int(x, PyLong_AsLongLong(PyTuple_GET_ITEM(t, 1)));
    case T_INTS: {
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
    case T_SEQ: {
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
    case T_VALUES: {
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
    case T_HANDLE: {
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

/* VRecall(template, engine, epoch, exchange, table, seen, data): a repeated v-variant call.
 *
 * Called with the arguments ``template`` was made of (still the same values) and the
 * engine's cache unchanged, it runs ``exchange`` (the count table's allgather, a bound
 * call filling ``table``); when ``table`` then holds the bytes ``seen`` it runs ``data``
 * (the call's plan bound to its buffers) and returns True; when the table changed it
 * returns None (the count table is in: the Python path goes on from there).  Otherwise it
 * runs nothing and returns False.
 *
 * VRecall(template, engine, epoch, exchange, table, seen, data, pair): a repeated v-variant
 * call run speculatively: ``pair`` (a bound call) exchanges the count table while the plan
 * runs on the buffers (dualmpi.engine.mpi.pair); True when the table is ``seen``, None when
 * it changed (the call's data is then the Python path's to redo). */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *template, *engine, *table, *seen;
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
    PyObject *ev = PyObject_GetAttr(self->engine, str_evictions);
    if (ev == NULL)
        return NULL;
    long long now = PyLong_AsLongLong(ev);
    Py_DECREF(ev);
    if (now == -1 && PyErr_Occurred())
        return NULL;
    if (now != self->epoch)
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
    Py_INCREF(engine); self->engine = engine;
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

static PyMethodDef module_functions[] = {
    {"same", (PyCFunction)(void (*)(void))recall_same, METH_FASTCALL,
     "same(template, args): True when args are what the template was made of"},
    {NULL, NULL, 0, NULL}
};

static PyMethodDef Recall_methods[] = {
    {"match", (PyCFunction)Recall_match, METH_VARARGS | METH_CLASS,
     "match(call, held, checks, engine, epoch): a matcher running ``call`` (see recall.c)"},
    {"like", (PyCFunction)Recall_like, METH_VARARGS | METH_CLASS,
     "like(call, template, engine, epoch): a matcher of arguments by value (see recall.c)"},
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
    str_evictions = PyUnicode_InternFromString("evictions");
    str_handle = PyUnicode_InternFromString("handle");
    if (str_state == NULL || str_evictions == NULL || str_handle == NULL ||
            PyType_Ready(&RecallType) < 0 || PyType_Ready(&VRecallType) < 0 ||
            PyType_Ready(&CFuncType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&recall_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&RecallType);
    if (PyModule_AddObject(m, "Recall", (PyObject *)&RecallType) < 0) {
        Py_DECREF(&RecallType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&VRecallType);
    if (PyModule_AddObject(m, "VRecall", (PyObject *)&VRecallType) < 0) {
        Py_DECREF(&VRecallType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&CFuncType);
    if (PyModule_AddObject(m, "CFunc", (PyObject *)&CFuncType) < 0) {
        Py_DECREF(&CFuncType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
