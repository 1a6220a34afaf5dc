/* The one-link lane: dualmpi's point-to-point calls whose message crosses one link, in C.
 *
 * A message between two ranks joined by a link (one node per rank) is one MPI message on
 * the communicator's direct channel; in Python, reading the arguments, arming the watchdog
 * and counting the link cost about 2.5 us a message (docs/p2p.md).  This CPython extension
 * does the same work for the common case -- a C-contiguous numpy array of a dtype mpi4py
 * reads as a plain view, an int rank and tag, no receive posted -- and answers
 * NotImplemented for anything else, which the Python path (dualmpi/p2p.py) then does.  So
 * does a call made while nonblocking requests are in flight on the rank (inflight[0] != 0:
 * dualmpi/engine/inflight.py): its waits must keep them moving, which MPI's blocking calls
 * here would not.
 *
 * What it does for a call is what the Python path does: the watchdog is armed through a
 * tracker (dualmpi.engine.watchdog.Watchdog.tracker: counter[0] the wait's slot, counter[1]
 * the call number) for every blocking MPI call; a receive is MPI_Mprobe then MPI_Mrecv (a
 * longer message is taken off the channel and refused, as ERR_TRUNCATE); each message sent
 * is counted on its link (counts[dest] += 1 message, n bytes; folded into stats() by the
 * hub).  The GIL is released in every blocking MPI call, as mpi4py does.
 *
 * Built by dualmpi.engine.lane with the MPI library's mpicc (the round loop's cache), and
 * loaded through ctypes (PyInit_dualmpi_lane); uses mpi4py's C API for MPI.Status.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MPI4PY_LIMITED_API 1
#define MPI4PY_LIMITED_API_SKIP_SESSION 1
#include "mpi4py/mpi4py.h"

#define MAX_DTYPES 32
#define TAG_MAX_ANY_MPI 32767

typedef struct {
    PyObject_HEAD
    MPI_Comm comm;            /* read from ``comm_obj`` at every call (see live()) */
    PyObject *comm_obj;       /* the mpi4py communicator: MPI.COMM_NULL once freed */
    int size, rank, any_source, any_tag, closed;
    unsigned char *send_ok;   /* [size]: 1 when a message to that rank is one MPI message */
    unsigned char *recv_ok;   /* [size + 1]: from that rank (last: ANY_SOURCE) */
    int64_t *counts;          /* [size][2]: messages and bytes sent to each rank */
    int64_t *tracker;         /* [2]: the watchdog's slot and call number */
    const volatile int64_t *inflight;  /* [1]: nonblocking requests in flight on the rank */
    PyObject *keep;           /* the arrays above (numpy), kept alive */
    PyObject *posted;         /* the router's posted receives (a list) */
    PyObject *mailbox;        /* the router's arrived messages (a list) */
    PyObject *views;          /* the dtypes mpi4py reads as plain views (a set) */
    PyObject *ndarray;        /* numpy.ndarray */
    PyObject *wd;             /* the watchdog */
    PyObject *tracked;        /* its tracker state */
    PyObject *truncated;      /* truncated(rank, src, n, room) -> exception */
    PyObject *mpi_exception;  /* MPI.Exception */
    PyObject *dtypes[MAX_DTYPES];
    int ndtypes;
} Lane;

static PyObject *str_dtype, *str_state;

static void Lane_dealloc(Lane *self)
{
    Py_XDECREF(self->keep);
    Py_XDECREF(self->comm_obj);
    Py_XDECREF(self->posted);
    Py_XDECREF(self->mailbox);
    Py_XDECREF(self->views);
    Py_XDECREF(self->ndarray);
    Py_XDECREF(self->wd);
    Py_XDECREF(self->tracked);
    Py_XDECREF(self->truncated);
    Py_XDECREF(self->mpi_exception);
    for (int i = 0; i < self->ndtypes; i++)
        Py_DECREF(self->dtypes[i]);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The address of a writable C-contiguous array of at least ``need`` bytes (one of ``keep``). */
static void *array_data(PyObject *arr, Py_ssize_t need)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arr, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        return NULL;
    void *p = view.buf;
    Py_ssize_t len = view.len;
    PyBuffer_Release(&view);  /* the array itself is kept alive by ``keep`` */
    if (len < need) {
        PyErr_SetString(PyExc_ValueError, "lane: an array is too short");
        return NULL;
    }
    return p;
}

/* Lane(comm, send_ok, recv_ok, counts, tracker, inflight, posted, mailbox, views, ndarray, wd,
 *      tracked, truncated, mpi_exception, any_source, any_tag) */
static int Lane_init(Lane *self, PyObject *args, PyObject *Py_UNUSED(kw))
{
    PyObject *comm, *send_ok, *recv_ok, *counts, *tracker, *inflight, *o[8];
    if (self->keep != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "lane: initialised already");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOii", &comm, &send_ok, &recv_ok, &counts,
                          &tracker, &inflight, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6],
                          &o[7],
                          &self->any_source, &self->any_tag))
        return -1;
    for (int i = 0; i < 8; i++)
        Py_INCREF(o[i]);
    self->posted = o[0]; self->mailbox = o[1]; self->views = o[2]; self->ndarray = o[3];
    self->wd = o[4]; self->tracked = o[5]; self->truncated = o[6]; self->mpi_exception = o[7];
    if (!PyList_Check(self->posted) || !PyList_Check(self->mailbox) ||
            !PyAnySet_Check(self->views)) {
        PyErr_SetString(PyExc_TypeError, "lane: posted and mailbox are lists, views a set");
        return -1;
    }
    MPI_Comm *c = PyMPIComm_Get(comm);
    if (c == NULL)
        return -1;
    self->comm = *c;
    Py_INCREF(comm);
    self->comm_obj = comm;
    if (MPI_Comm_size(self->comm, &self->size) != MPI_SUCCESS ||
            MPI_Comm_rank(self->comm, &self->rank) != MPI_SUCCESS) {
        PyErr_SetString(PyExc_RuntimeError, "lane: the communicator has no size");
        return -1;
    }
    self->keep = PyTuple_Pack(5, send_ok, recv_ok, counts, tracker, inflight);
    if (self->keep == NULL)
        return -1;
    Py_ssize_t n = self->size;
    if (!(self->send_ok = array_data(send_ok, n)) ||
            !(self->recv_ok = array_data(recv_ok, n + 1)) ||
            !(self->counts = array_data(counts, 2 * n * (Py_ssize_t)sizeof(int64_t))) ||
            !(self->tracker = array_data(tracker, 2 * (Py_ssize_t)sizeof(int64_t))) ||
            !(self->inflight = array_data(inflight, (Py_ssize_t)sizeof(int64_t))))
        return -1;
    return 0;
}

/* 1 when ``obj`` is a C-contiguous numpy array of a known plain dtype (``view`` filled),
 * 0 when the Python path must read it, -1 on error. */
static int get_buffer(Lane *self, PyObject *obj, Py_buffer *view, int writable)
{
    if ((PyObject *)Py_TYPE(obj) != self->ndarray)
        return 0;
    PyObject *dt = PyObject_GetAttr(obj, str_dtype);
    if (dt == NULL) {
        PyErr_Clear();
        return 0;
    }
    int known = 0;
    for (int i = 0; i < self->ndtypes; i++)
        if (self->dtypes[i] == dt) {
            known = 1;
            break;
        }
    if (!known) {
        int in = PySet_Contains(self->views, dt);
        if (in < 0)
            PyErr_Clear();
        if (in == 1) {
            known = 1;
            if (self->ndtypes < MAX_DTYPES) {
                Py_INCREF(dt);
                self->dtypes[self->ndtypes++] = dt;
            }
        }
    }
    Py_DECREF(dt);
    if (!known)
        return 0;
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* 1 when the lane may run a call: not closed, its communicator not freed (a derived
 * communicator's channel is freed with the network's, possibly before the lane is closed). */
static int live(Lane *self)
{
    if (self->closed || *self->inflight)
        return 0;
    MPI_Comm *c = PyMPIComm_Get(self->comm_obj);
    if (c == NULL) {
        PyErr_Clear();
        return 0;
    }
    self->comm = *c;
    return self->comm != MPI_COMM_NULL;
}

/* 1 when ``obj`` is an int (not a bool, not a numpy integer) that fits in a long: ``*out``
 * set; 0 when the Python path must read it.  No value is reserved for "unreadable": MPI's
 * constants differ between libraries (ANY_SOURCE is -1 in Open MPI, -2 in MPICH). */
static int read_int(PyObject *obj, long *out)
{
    if (!PyLong_CheckExact(obj))
        return 0;
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(obj, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = v;
    return 1;
}

static int arm(Lane *self, int64_t slot)
{
    self->tracker[1] += 1;
    self->tracker[0] = slot;
    return PyObject_SetAttr(self->wd, str_state, self->tracked);
}

static void disarm(Lane *self)
{
    self->tracker[0] = 0;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (PyObject_SetAttr(self->wd, str_state, Py_None) < 0)
        PyErr_Clear();
    PyErr_Restore(type, value, tb);
}

static PyObject *mpi_error(Lane *self, int rc)
{
    PyObject *exc = PyObject_CallFunction(self->mpi_exception, "i", rc);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

static PyObject *truncation(Lane *self, int src, int n, Py_ssize_t room)
{
    PyObject *exc = PyObject_CallFunction(self->truncated, "iinn", self->rank, src,
                                          (Py_ssize_t)n, room);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

/* Receive the message ``msg`` (probed into ``st``) into ``buf``: 0, or the count when it is
 * longer than the buffer (taken off the channel), or -1 with an MPI error in *rc. */
static int take(void *buf, Py_ssize_t room, MPI_Message *msg, MPI_Status *st, int *count,
                int *rc)
{
    *rc = MPI_Get_count(st, MPI_BYTE, count);
    if (*rc != MPI_SUCCESS)
        return -1;
    if (*count <= room) {
        *rc = MPI_Mrecv(buf, *count, MPI_BYTE, msg, MPI_STATUS_IGNORE);
        return *rc == MPI_SUCCESS ? 0 : -1;
    }
    void *tmp = malloc((size_t)*count);
    if (tmp == NULL) {
        *rc = MPI_ERR_NO_MEM;
        return -1;
    }
    *rc = MPI_Mrecv(tmp, *count, MPI_BYTE, msg, MPI_STATUS_IGNORE);
    free(tmp);
    return *rc == MPI_SUCCESS ? 1 : -1;
}

/* The source and tag of a receive: 1 (``*src``, ``*tag`` set), 0 for the Python path. */
static int recv_args(Lane *self, PyObject *source, PyObject *tag, int *src, int *rtag)
{
    long s = self->any_source, t = self->any_tag;
    if ((source != Py_None && !read_int(source, &s)) || (tag != Py_None && !read_int(tag, &t)))
        return 0;
    if (s == self->any_source) {
        if (!self->recv_ok[self->size] || PyList_GET_SIZE(self->mailbox) != 0)
            return 0;
    } else if (s < 0 || s >= self->size || !self->recv_ok[s]) {
        return 0;
    }
    if (t != self->any_tag && (t < 0 || t > TAG_MAX_ANY_MPI))
        return 0;
    if (PyList_GET_SIZE(self->posted) != 0)
        return 0;
    *src = (int)s;
    *rtag = (int)t;
    return 1;
}

/* The destination and tag of a send: 1 (``*dest``, ``*tag`` set), 0 for the Python path. */
static int send_args(Lane *self, PyObject *dest, PyObject *tag, int *d, int *t)
{
    long dv, tv;
    if (!read_int(dest, &dv) || !read_int(tag, &tv))
        return 0;
    if (dv < 0 || dv >= self->size || !self->send_ok[dv] || tv < 0 || tv > TAG_MAX_ANY_MPI)
        return 0;
    *d = (int)dv;
    *t = (int)tv;
    return 1;
}

/* Probe for a message (``src``, ``tag``) and receive it into ``buf`` (see :c:func:`take`);
 * call without the GIL. */
static int probe_take(Lane *self, int src, int tag, void *buf, Py_ssize_t room,
                      MPI_Status *st, int *count, int *rc)
{
    MPI_Message msg;
    *rc = MPI_Mprobe(src, tag, self->comm, &msg, st);
    if (*rc != MPI_SUCCESS)
        return -1;
    return take(buf, room, &msg, st, count, rc);
}

/* The MPI_Status of ``status`` (None: ``local``), or NULL for the Python path. */
static MPI_Status *status_of(PyObject *status, MPI_Status *local)
{
    if (status == Py_None)
        return local;
    if (!PyObject_TypeCheck(status, &PyMPIStatus_Type))
        return NULL;
    return PyMPIStatus_Get(status);
}

/* The watchdog's slot of a wait for ``src`` (1..size: the sends; then the sources of Recv,
 * ANY_SOURCE last, then those of Sendrecv: see dualmpi.engine.lane.make). */
static int64_t recv_slot(Lane *self, int src, int sendrecv)
{
    return 1 + self->size + (sendrecv ? self->size + 1 : 0) +
        (src == self->any_source ? self->size : src);
}

/* send(buf, dest, tag, sync) -> None, or NotImplemented */
static PyObject *Lane_send(Lane *self, PyObject *const *args, Py_ssize_t nargs)
{
    int dest, tag;
    if (nargs != 4 || !live(self) || !send_args(self, args[1], args[2], &dest, &tag))
        Py_RETURN_NOTIMPLEMENTED;
    int sync = PyObject_IsTrue(args[3]);
    Py_buffer view;
    int got = get_buffer(self, args[0], &view, 0);
    if (got <= 0)
        Py_RETURN_NOTIMPLEMENTED;
    if (view.len > INT_MAX) {
        PyBuffer_Release(&view);
        Py_RETURN_NOTIMPLEMENTED;
    }
    self->counts[2 * dest] += 1;
    self->counts[2 * dest + 1] += view.len;
    if (arm(self, 1 + dest) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sync ? MPI_Ssend(view.buf, (int)view.len, MPI_BYTE, dest, tag, self->comm)
              : MPI_Send(view.buf, (int)view.len, MPI_BYTE, dest, tag, self->comm);
    Py_END_ALLOW_THREADS
    disarm(self);
    PyBuffer_Release(&view);
    if (rc != MPI_SUCCESS)
        return mpi_error(self, rc);
    Py_RETURN_NONE;
}

/* recv(buf, source, tag, status) -> None, or NotImplemented */
static PyObject *Lane_recv(Lane *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !live(self))
        Py_RETURN_NOTIMPLEMENTED;
    int src, tag;
    if (!recv_args(self, args[1], args[2], &src, &tag))
        Py_RETURN_NOTIMPLEMENTED;
    MPI_Status local, *st = status_of(args[3], &local);
    if (st == NULL)
        Py_RETURN_NOTIMPLEMENTED;
    Py_buffer view;
    int got = get_buffer(self, args[0], &view, 1);
    if (got <= 0)
        Py_RETURN_NOTIMPLEMENTED;
    if (arm(self, recv_slot(self, src, 0)) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int rc, count = 0, over;
    Py_BEGIN_ALLOW_THREADS
    over = probe_take(self, src, tag, view.buf, view.len, st, &count, &rc);
    Py_END_ALLOW_THREADS
    disarm(self);
    Py_ssize_t room = view.len;
    PyBuffer_Release(&view);
    if (rc != MPI_SUCCESS)
        return mpi_error(self, rc);
    if (over == 1)
        return truncation(self, st->MPI_SOURCE, count, room);
    Py_RETURN_NONE;
}

/* sendrecv(sendbuf, dest, sendtag, recvbuf, source, recvtag, status) -> None, or
 * NotImplemented: the send started, the receive done, then the send waited for. */
static PyObject *Lane_sendrecv(Lane *self, PyObject *const *args, Py_ssize_t nargs)
{
    int dest, stag, src, rtag;
    if (nargs != 7 || args[3] == Py_None || !live(self) ||
            !send_args(self, args[1], args[2], &dest, &stag) ||
            !recv_args(self, args[4], args[5], &src, &rtag))
        Py_RETURN_NOTIMPLEMENTED;
    MPI_Status local, *st = status_of(args[6], &local);
    if (st == NULL)
        Py_RETURN_NOTIMPLEMENTED;
    Py_buffer sview, rview;
    if (get_buffer(self, args[0], &sview, 0) <= 0)
        Py_RETURN_NOTIMPLEMENTED;
    if (sview.len > INT_MAX || get_buffer(self, args[3], &rview, 1) <= 0) {
        PyBuffer_Release(&sview);
        Py_RETURN_NOTIMPLEMENTED;
    }
    self->counts[2 * dest] += 1;
    self->counts[2 * dest + 1] += sview.len;
    int rc, rc2 = MPI_SUCCESS, count = 0, over = 0;
    MPI_Request req;
    rc = MPI_Isend(sview.buf, (int)sview.len, MPI_BYTE, dest, stag, self->comm, &req);
    if (rc == MPI_SUCCESS) {
        if (arm(self, recv_slot(self, src, 1)) < 0) {
            /* the send is on its way: wait for it before raising */
            Py_BEGIN_ALLOW_THREADS
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            Py_END_ALLOW_THREADS
            PyBuffer_Release(&sview);
            PyBuffer_Release(&rview);
            return NULL;
        }
        Py_BEGIN_ALLOW_THREADS
        over = probe_take(self, src, rtag, rview.buf, rview.len, st, &count, &rc);
        Py_END_ALLOW_THREADS
        self->tracker[1] += 1;
        self->tracker[0] = 1 + dest;  /* the send, until ``dest`` receives it */
        Py_BEGIN_ALLOW_THREADS
        rc2 = MPI_Wait(&req, MPI_STATUS_IGNORE);
        Py_END_ALLOW_THREADS
        disarm(self);
    }
    Py_ssize_t room = rview.len;
    PyBuffer_Release(&sview);
    PyBuffer_Release(&rview);
    if (rc != MPI_SUCCESS)
        return mpi_error(self, rc);
    if (rc2 != MPI_SUCCESS)
        return mpi_error(self, rc2);
    if (over == 1)
        return truncation(self, st->MPI_SOURCE, count, room);
    Py_RETURN_NONE;
}

/* close(): every later call answers NotImplemented (the communicator is being freed). */
static PyObject *Lane_close(Lane *self, PyObject *Py_UNUSED(ignored))
{
    self->closed = 1;
    Py_RETURN_NONE;
}

static PyMethodDef Lane_methods[] = {
    {"send", (PyCFunction)(void (*)(void))Lane_send, METH_FASTCALL,
     "send(buf, dest, tag, sync): one MPI message over the link, or NotImplemented"},
    {"recv", (PyCFunction)(void (*)(void))Lane_recv, METH_FASTCALL,
     "recv(buf, source, tag, status): probe and receive over the link, or NotImplemented"},
    {"sendrecv", (PyCFunction)(void (*)(void))Lane_sendrecv, METH_FASTCALL,
     "sendrecv(sendbuf, dest, sendtag, recvbuf, source, recvtag, status), or NotImplemented"},
    {"close", (PyCFunction)Lane_close, METH_NOARGS, "close(): answer NotImplemented from now on"},
    {NULL, NULL, 0, NULL}
};

static PyTypeObject LaneType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dualmpi_lane.Lane",
    .tp_basicsize = sizeof(Lane),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The one-link lane of a router (see dualmpi/engine/lane.c)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Lane_init,
    .tp_dealloc = (destructor)Lane_dealloc,
    .tp_methods = Lane_methods,
};

static struct PyModuleDef lane_module = {
    PyModuleDef_HEAD_INIT, "dualmpi_lane", "dualmpi's one-link lane (dualmpi/engine/lane.c)",
    -1, NULL, NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC PyInit_dualmpi_lane(void)
{
    if (import_mpi4py() < 0)
        return NULL;
    str_dtype = PyUnicode_InternFromString("dtype");
    str_state = PyUnicode_InternFromString("state");
    if (str_dtype == NULL || str_state == NULL || PyType_Ready(&LaneType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&lane_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&LaneType);
    if (PyModule_AddObject(m, "Lane", (PyObject *)&LaneType) < 0) {
        Py_DECREF(&LaneType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
