/* dualmpi exec's guard: MPI's profiling interface between an unmodified program and MPI.
 *
 * `dualmpi exec` runs an mpi4py program with MPI.COMM_WORLD standing for an emulated network:
 * what the program sends through MPI.COMM_WORLD's methods travels over the network's links
 * (dualmpi/exec/world.py).  Every other road to MPI between the program's processes -- an
 * MPI.Intracomm or mpi4py.util.pkl5 communicator made from MPI.COMM_WORLD's handle, a C
 * extension or ctypes calling libmpi on MPI_COMM_WORLD, a window, a file, a communicator made
 * from a group of the world's processes, spawned or connected processes -- would let MPI move
 * the data directly, where the emulation never sees it.  This library defines those MPI
 * functions (point to point, every collective, the calls that make communicators, windows and
 * files) and hands each to its PMPI_ twin unless it names a *program* communicator:
 * MPI_COMM_WORLD and the handles `dualmpi exec` marks (dualmpi_guard_mark: the stand-in's), while
 * the guard is armed (from just before the program runs).  dualmpi's own communicators --
 * duplicates of the world made while dualmpi_guard_internal is raised -- pass, as does
 * MPI_COMM_SELF and anything made from it.
 *
 * A refused call never reaches MPI.  Through mpi4py (the caller is mpi4py's MPI extension,
 * dualmpi_guard_set_python) it returns an error code of a class of the guard's own whose
 * string is one line naming the call, so mpi4py raises MPI.Exception with that line and the
 * program's traceback shows where it was made; from anywhere else (C code, ctypes) the line
 * is printed on stderr and the job ends with MPI_Abort(MPI_COMM_WORLD, 2).  The MPI-4
 * large-count functions (MPI_*_c) are never defined: Open MPI 5.0 has no PMPI_*_c, and mpi4py
 * calls them when it finds them.  Built with the MPI library's own mpicc and loaded with
 * RTLD_GLOBAL before mpi4py's MPI module (dualmpi/engine/guard.py, dualmpi/engine/cloop.py).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#if defined(OMPI_HAVE_MPI_EXT)
#include <mpi-ext.h>
#endif
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* The exit code of a job a refused call from outside mpi4py ends (dualmpi's error code). */
#define GUARD_EXIT 2
#define MAX_MARKED 256
#define LABEL 64

static volatile int armed;          /* 1: program communicators are refused */
static volatile int internal;       /* > 0: dualmpi exec is making communicators of its own */
static MPI_Comm marked[MAX_MARKED]; /* the program's communicators besides MPI_COMM_WORLD */
static char labels[MAX_MARKED][LABEL];
static int nmarked;
static dev_t python_dev;            /* mpi4py's MPI extension (its callers get an exception) */
static ino_t python_ino;
static int python_known;
static volatile int refusals;
static char last[1024];             /* the last refusal's line */
static int error_class = -1;

int dualmpi_guard_handle_size(void) { return (int)sizeof(MPI_Comm); }
int dualmpi_guard_refusals(void) { return refusals; }
const char *dualmpi_guard_last(void) { return last; }

/* Arm (1) or disarm (0) the guard; return the previous state. */
int dualmpi_guard_arm(int on)
{
    int was = armed;
    armed = on != 0;
    return was;
}

/* Raise (+1) or lower (-1) the internal level; return the new one. */
int dualmpi_guard_internal(int delta)
{
    internal += delta;
    return internal;
}

/* Mark `comm` as a program communicator named `label`; 0, or -1 when the table is full. */
int dualmpi_guard_mark(MPI_Comm comm, const char *label)
{
    for (int i = 0; i < nmarked; i++)
        if (marked[i] == comm) {
            snprintf(labels[i], LABEL, "%s", label);
            return 0;
        }
    if (nmarked == MAX_MARKED)
        return -1;
    marked[nmarked] = comm;
    snprintf(labels[nmarked], LABEL, "%s", label);
    nmarked++;
    return 0;
}

static int find(MPI_Comm comm)
{
    for (int i = 0; i < nmarked; i++)
        if (marked[i] == comm)
            return i;
    return -1;
}

static void unmark(MPI_Comm comm)
{
    int i = find(comm);
    if (i < 0)
        return;
    nmarked--;
    marked[i] = marked[nmarked];
    memcpy(labels[i], labels[nmarked], LABEL);
}

/* 1 when `comm` is a program communicator: MPI_COMM_WORLD or a marked one. */
int dualmpi_guard_is_program(MPI_Comm comm)
{
    return comm == MPI_COMM_WORLD || find(comm) >= 0;
}

/* Name the shared object of mpi4py's MPI extension; 0, or -1 when it cannot be read. */
int dualmpi_guard_set_python(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    python_dev = st.st_dev;
    python_ino = st.st_ino;
    python_known = 1;
    return 0;
}

/* 1 when the code at `caller` belongs to mpi4py's MPI extension. */
static int through_python(void *caller)
{
    Dl_info info;
    struct stat st;
    if (!python_known || caller == NULL || !dladdr(caller, &info) || info.dli_fname == NULL)
        return 0;
    return stat(info.dli_fname, &st) == 0 && st.st_dev == python_dev && st.st_ino == python_ino;
}

static const char *caller_name(void *caller)
{
    Dl_info info;
    if (caller != NULL && dladdr(caller, &info) && info.dli_fname != NULL && info.dli_fname[0])
        return info.dli_fname;
    return "the program itself";
}

/* Refuse `fn`: an error code for mpi4py's caller, else the line on stderr and MPI_Abort. */
static int refuse(const char *fn, const char *what, void *caller)
{
    refusals++;
    if (through_python(caller)) {
        int code;
        snprintf(last, sizeof last, "dualmpi exec: error: %s %s outside dualmpi (through "
                 "mpi4py, not MPI.COMM_WORLD's own methods, which carry it over the links)",
                 fn, what);
        if (error_class < 0 && PMPI_Add_error_class(&error_class) != MPI_SUCCESS)
            error_class = -1;
        if (error_class >= 0 && PMPI_Add_error_code(error_class, &code) == MPI_SUCCESS) {
            char text[MPI_MAX_ERROR_STRING];
            size_t n = strlen(last) < sizeof text ? strlen(last) : sizeof text - 1;
            memcpy(text, last, n);
            text[n] = '\0';
            PMPI_Add_error_string(code, text);
            return code;
        }
        fprintf(stderr, "%s\n", last);
        fflush(stderr);
        return MPI_ERR_OTHER;
    }
    snprintf(last, sizeof last, "dualmpi exec: error: %s %s outside dualmpi (called from %s, "
             "not through mpi4py: only MPI.COMM_WORLD's methods travel over the network's links; "
             "docs/user-guide.md, 'Your own program')", fn, what, caller_name(caller));
    fprintf(stderr, "%s\n", last);
    fflush(stderr);
    PMPI_Abort(MPI_COMM_WORLD, GUARD_EXIT);
    return MPI_ERR_OTHER;
}

static int refuse_comm(const char *fn, MPI_Comm comm, void *caller)
{
    char what[LABEL + 64];
    int i = find(comm);
    snprintf(what, sizeof what, "on the program's communicator (%s)",
             comm == MPI_COMM_WORLD ? "MPI_COMM_WORLD" : i >= 0 ? labels[i] : "?");
    return refuse(fn, what, caller);
}

/* A call on `comm`: refused when `comm` is a program communicator and the guard is armed. */
#define GUARD(fn, comm)                                                                     \
    do {                                                                                    \
        if (armed && !internal && dualmpi_guard_is_program(comm))                           \
            return refuse_comm(fn, comm, __builtin_return_address(0));                      \
    } while (0)

/* A call that joins processes without a program communicator: refused while armed. */
#define GUARD_ALWAYS(fn)                                                                    \
    do {                                                                                    \
        if (armed && !internal)                                                             \
            return refuse(fn, "would join the program's processes",                         \
                          __builtin_return_address(0));                                     \
    } while (0)

/* MPI_<name>(params) { GUARD(comm); return PMPI_<name>(args); } */
#define WRAP(name, comm, params, args)                                                      \
    int MPI_##name params                                                                   \
    {                                                                                       \
        GUARD("MPI_" #name, comm);                                                          \
        return PMPI_##name args;                                                            \
    }

/* -- point to point -------------------------------------------------------------------------- */
WRAP(Send, comm, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
     MPI_Comm comm), (buf, count, datatype, dest, tag, comm))
WRAP(Bsend, comm, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
     MPI_Comm comm), (buf, count, datatype, dest, tag, comm))
WRAP(Ssend, comm, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
     MPI_Comm comm), (buf, count, datatype, dest, tag, comm))
WRAP(Rsend, comm, (const void *ibuf, int count, MPI_Datatype datatype, int dest, int tag,
     MPI_Comm comm), (ibuf, count, datatype, dest, tag, comm))
WRAP(Isend, comm, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
     MPI_Comm comm, MPI_Request *request), (buf, count, datatype, dest, tag, comm, request))
WRAP(Ibsend, comm, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
     MPI_Comm comm, MPI_Request *request), (buf, count, datatype, dest, tag, comm, request))
WRAP(Issend, comm, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
     MPI_Comm comm, MPI_Request *request), (buf, count, datatype, dest, tag, comm, request))
WRAP(Irsend, comm, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
     MPI_Comm comm, MPI_Request *request), (buf, count, datatype, dest, tag, comm, request))
WRAP(Send_init, comm, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
     MPI_Comm comm, MPI_Request *request), (buf, count, datatype, dest, tag, comm, request))
WRAP(Bsend_init, comm, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
     MPI_Comm comm, MPI_Request *request), (buf, count, datatype, dest, tag, comm, request))
WRAP(Ssend_init, comm, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
     MPI_Comm comm, MPI_Request *request), (buf, count, datatype, dest, tag, comm, request))
WRAP(Rsend_init, comm, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
     MPI_Comm comm, MPI_Request *request), (buf, count, datatype, dest, tag, comm, request))
WRAP(Recv, comm, (void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
     MPI_Status *status), (buf, count, datatype, source, tag, comm, status))
WRAP(Irecv, comm, (void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
     MPI_Request *request), (buf, count, datatype, source, tag, comm, request))
WRAP(Recv_init, comm, (void *buf, int count, MPI_Datatype datatype, int source, int tag,
     MPI_Comm comm, MPI_Request *request), (buf, count, datatype, source, tag, comm, request))
WRAP(Sendrecv, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
     int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
     MPI_Comm comm, MPI_Status *status), (sendbuf, sendcount, sendtype, dest, sendtag, recvbuf,
     recvcount, recvtype, source, recvtag, comm, status))
WRAP(Sendrecv_replace, comm, (void * buf, int count, MPI_Datatype datatype, int dest, int sendtag,
     int source, int recvtag, MPI_Comm comm, MPI_Status *status), (buf, count, datatype, dest,
     sendtag, source, recvtag, comm, status))
WRAP(Isendrecv, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
     int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
     MPI_Comm comm, MPI_Request *request), (sendbuf, sendcount, sendtype, dest, sendtag, recvbuf,
     recvcount, recvtype, source, recvtag, comm, request))
WRAP(Isendrecv_replace, comm, (void * buf, int count, MPI_Datatype datatype, int dest, int sendtag,
     int source, int recvtag, MPI_Comm comm, MPI_Request *request), (buf, count, datatype, dest,
     sendtag, source, recvtag, comm, request))
WRAP(Probe, comm, (int source, int tag, MPI_Comm comm, MPI_Status *status), (source, tag, comm,
     status))
WRAP(Iprobe, comm, (int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status), (source,
     tag, comm, flag, status))
WRAP(Mprobe, comm, (int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status),
     (source, tag, comm, message, status))
WRAP(Improbe, comm, (int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
     MPI_Status *status), (source, tag, comm, flag, message, status))
WRAP(Psend_init, comm, (const void* buf, int partitions, MPI_Count count, MPI_Datatype datatype,
     int dest, int tag, MPI_Comm comm, MPI_Info info, MPI_Request *request), (buf, partitions,
     count, datatype, dest, tag, comm, info, request))
WRAP(Precv_init, comm, (void* buf, int partitions, MPI_Count count, MPI_Datatype datatype,
     int source, int tag, MPI_Comm comm, MPI_Info info, MPI_Request *request), (buf, partitions,
     count, datatype, source, tag, comm, info, request))

/* -- collectives, blocking, nonblocking and persistent --------------------------------------- */
WRAP(Barrier, comm, (MPI_Comm comm), (comm))
WRAP(Ibarrier, comm, (MPI_Comm comm, MPI_Request *request), (comm, request))
WRAP(Barrier_init, comm, (MPI_Comm comm, MPI_Info info, MPI_Request *request), (comm, info,
     request))
WRAP(Bcast, comm, (void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm),
     (buffer, count, datatype, root, comm))
WRAP(Ibcast, comm, (void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
     MPI_Request *request), (buffer, count, datatype, root, comm, request))
WRAP(Bcast_init, comm, (void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
     MPI_Info info, MPI_Request *request), (buffer, count, datatype, root, comm, info, request))
WRAP(Gather, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
     int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm), (sendbuf, sendcount, sendtype,
     recvbuf, recvcount, recvtype, root, comm))
WRAP(Igather, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
     int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request),
     (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request))
WRAP(Gather_init, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
     int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
     MPI_Request *request), (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
     comm, info, request))
WRAP(Gatherv, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
     const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm),
     (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm))
WRAP(Igatherv, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
     const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm,
     MPI_Request *request), (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
     root, comm, request))
WRAP(Gatherv_init, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
     const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm,
     MPI_Info info, MPI_Request *request), (sendbuf, sendcount, sendtype, recvbuf, recvcounts,
     displs, recvtype, root, comm, info, request))
WRAP(Scatter, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
     int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm), (sendbuf, sendcount, sendtype,
     recvbuf, recvcount, recvtype, root, comm))
WRAP(Iscatter, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
     int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request),
     (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request))
WRAP(Scatter_init, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
     int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
     MPI_Request *request), (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
     comm, info, request))
WRAP(Scatterv, comm, (const void *sendbuf, const int sendcounts[], const int displs[],
     MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
     MPI_Comm comm), (sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root,
     comm))
WRAP(Iscatterv, comm, (const void *sendbuf, const int sendcounts[], const int displs[],
     MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
     MPI_Comm comm, MPI_Request *request), (sendbuf, sendcounts, displs, sendtype, recvbuf,
     recvcount, recvtype, root, comm, request))
WRAP(Scatterv_init, comm, (const void *sendbuf, const int sendcounts[], const int displs[],
     MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
     MPI_Comm comm, MPI_Info info, MPI_Request *request), (sendbuf, sendcounts, displs, sendtype,
     recvbuf, recvcount, recvtype, root, comm, info, request))
WRAP(Allgather, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
     int recvcount, MPI_Datatype recvtype, MPI_Comm comm), (sendbuf, sendcount, sendtype, recvbuf,
     recvcount, recvtype, comm))
WRAP(Iallgather, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
     int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request), (sendbuf,
     sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request))
WRAP(Allgather_init, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
     void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
     MPI_Request *request), (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
     info, request))
WRAP(Allgatherv, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
     const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm), (sendbuf,
     sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm))
WRAP(Iallgatherv, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
     const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
     MPI_Request *request), (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
     comm, request))
WRAP(Allgatherv_init, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
     void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype,
     MPI_Comm comm, MPI_Info info, MPI_Request *request), (sendbuf, sendcount, sendtype, recvbuf,
     recvcounts, displs, recvtype, comm, info, request))
WRAP(Alltoall, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
     int recvcount, MPI_Datatype recvtype, MPI_Comm comm), (sendbuf, sendcount, sendtype, recvbuf,
     recvcount, recvtype, comm))
WRAP(Ialltoall, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
     int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request), (sendbuf,
     sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request))
WRAP(Alltoall_init, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
     void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
     MPI_Request *request), (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
     info, request))
WRAP(Alltoallv, comm, (const void *sendbuf, const int sendcounts[], const int sdispls[],
     MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[],
     MPI_Datatype recvtype, MPI_Comm comm), (sendbuf, sendcounts, sdispls, sendtype, recvbuf,
     recvcounts, rdispls, recvtype, comm))
WRAP(Ialltoallv, comm, (const void *sendbuf, const int sendcounts[], const int sdispls[],
     MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[],
     MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request), (sendbuf, sendcounts, sdispls,
     sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, request))
WRAP(Alltoallv_init, comm, (const void *sendbuf, const int sendcounts[], const int sdispls[],
     MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[],
     MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request), (sendbuf,
     sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, info, request))
WRAP(Alltoallw, comm, (const void *sendbuf, const int sendcounts[], const int sdispls[],
     const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const int rdispls[],
     const MPI_Datatype recvtypes[], MPI_Comm comm), (sendbuf, sendcounts, sdispls, sendtypes,
     recvbuf, recvcounts, rdispls, recvtypes, comm))
WRAP(Ialltoallw, comm, (const void *sendbuf, const int sendcounts[], const int sdispls[],
     const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const int rdispls[],
     const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Request *request), (sendbuf, sendcounts,
     sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, request))
WRAP(Alltoallw_init, comm, (const void *sendbuf, const int sendcounts[], const int sdispls[],
     const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const int rdispls[],
     const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info, MPI_Request *request), (sendbuf,
     sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, info, request))
WRAP(Reduce, comm, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
     MPI_Op op, int root, MPI_Comm comm), (sendbuf, recvbuf, count, datatype, op, root, comm))
WRAP(Ireduce, comm, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
     MPI_Op op, int root, MPI_Comm comm, MPI_Request *request), (sendbuf, recvbuf, count, datatype,
     op, root, comm, request))
WRAP(Reduce_init, comm, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
     MPI_Op op, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request), (sendbuf, recvbuf,
     count, datatype, op, root, comm, info, request))
WRAP(Allreduce, comm, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
     MPI_Op op, MPI_Comm comm), (sendbuf, recvbuf, count, datatype, op, comm))
WRAP(Iallreduce, comm, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
     MPI_Op op, MPI_Comm comm, MPI_Request *request), (sendbuf, recvbuf, count, datatype, op, comm,
     request))
WRAP(Allreduce_init, comm, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
     MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request), (sendbuf, recvbuf, count,
     datatype, op, comm, info, request))
WRAP(Reduce_scatter, comm, (const void *sendbuf, void *recvbuf, const int recvcounts[],
     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm), (sendbuf, recvbuf, recvcounts, datatype, op,
     comm))
WRAP(Ireduce_scatter, comm, (const void *sendbuf, void *recvbuf, const int recvcounts[],
     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request), (sendbuf, recvbuf,
     recvcounts, datatype, op, comm, request))
WRAP(Reduce_scatter_init, comm, (const void *sendbuf, void *recvbuf, const int recvcounts[],
     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request),
     (sendbuf, recvbuf, recvcounts, datatype, op, comm, info, request))
WRAP(Reduce_scatter_block, comm, (const void *sendbuf, void *recvbuf, int recvcount,
     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm), (sendbuf, recvbuf, recvcount, datatype, op,
     comm))
WRAP(Ireduce_scatter_block, comm, (const void *sendbuf, void *recvbuf, int recvcount,
     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request), (sendbuf, recvbuf,
     recvcount, datatype, op, comm, request))
WRAP(Reduce_scatter_block_init, comm, (const void *sendbuf, void *recvbuf, int recvcount,
     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request),
     (sendbuf, recvbuf, recvcount, datatype, op, comm, info, request))
WRAP(Scan, comm, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
     MPI_Comm comm), (sendbuf, recvbuf, count, datatype, op, comm))
WRAP(Iscan, comm, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
     MPI_Comm comm, MPI_Request *request), (sendbuf, recvbuf, count, datatype, op, comm, request))
WRAP(Scan_init, comm, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
     MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request), (sendbuf, recvbuf, count,
     datatype, op, comm, info, request))
WRAP(Exscan, comm, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
     MPI_Op op, MPI_Comm comm), (sendbuf, recvbuf, count, datatype, op, comm))
WRAP(Iexscan, comm, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
     MPI_Op op, MPI_Comm comm, MPI_Request *request), (sendbuf, recvbuf, count, datatype, op, comm,
     request))
WRAP(Exscan_init, comm, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
     MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request), (sendbuf, recvbuf, count,
     datatype, op, comm, info, request))
WRAP(Neighbor_allgather, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
     void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm), (sendbuf, sendcount,
     sendtype, recvbuf, recvcount, recvtype, comm))
WRAP(Ineighbor_allgather, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
     void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request),
     (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request))
WRAP(Neighbor_allgather_init, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
     void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
     MPI_Request *request), (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
     info, request))
WRAP(Neighbor_allgatherv, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
     void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype,
     MPI_Comm comm), (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm))
WRAP(Ineighbor_allgatherv, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
     void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype,
     MPI_Comm comm, MPI_Request *request), (sendbuf, sendcount, sendtype, recvbuf, recvcounts,
     displs, recvtype, comm, request))
WRAP(Neighbor_allgatherv_init, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
     void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype,
     MPI_Comm comm, MPI_Info info, MPI_Request *request), (sendbuf, sendcount, sendtype, recvbuf,
     recvcounts, displs, recvtype, comm, info, request))
WRAP(Neighbor_alltoall, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
     void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm), (sendbuf, sendcount,
     sendtype, recvbuf, recvcount, recvtype, comm))
WRAP(Ineighbor_alltoall, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
     void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request),
     (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request))
WRAP(Neighbor_alltoall_init, comm, (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
     void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
     MPI_Request *request), (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
     info, request))
WRAP(Neighbor_alltoallv, comm, (const void *sendbuf, const int sendcounts[], const int sdispls[],
     MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[],
     MPI_Datatype recvtype, MPI_Comm comm), (sendbuf, sendcounts, sdispls, sendtype, recvbuf,
     recvcounts, rdispls, recvtype, comm))
WRAP(Ineighbor_alltoallv, comm, (const void *sendbuf, const int sendcounts[], const int sdispls[],
     MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[],
     MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request), (sendbuf, sendcounts, sdispls,
     sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, request))
WRAP(Neighbor_alltoallv_init, comm, (const void *sendbuf, const int sendcounts[],
     const int sdispls[], MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
     const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
     MPI_Request *request), (sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
     recvtype, comm, info, request))
WRAP(Neighbor_alltoallw, comm, (const void *sendbuf, const int sendcounts[],
     const MPI_Aint sdispls[], const MPI_Datatype sendtypes[], void *recvbuf,
     const int recvcounts[], const MPI_Aint rdispls[], const MPI_Datatype recvtypes[],
     MPI_Comm comm), (sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
     recvtypes, comm))
WRAP(Ineighbor_alltoallw, comm, (const void *sendbuf, const int sendcounts[],
     const MPI_Aint sdispls[], const MPI_Datatype sendtypes[], void *recvbuf,
     const int recvcounts[], const MPI_Aint rdispls[], const MPI_Datatype recvtypes[],
     MPI_Comm comm, MPI_Request *request), (sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
     recvcounts, rdispls, recvtypes, comm, request))
WRAP(Neighbor_alltoallw_init, comm, (const void *sendbuf, const int sendcounts[],
     const MPI_Aint sdispls[], const MPI_Datatype sendtypes[], void *recvbuf,
     const int recvcounts[], const MPI_Aint rdispls[], const MPI_Datatype recvtypes[],
     MPI_Comm comm, MPI_Info info, MPI_Request *request), (sendbuf, sendcounts, sdispls, sendtypes,
     recvbuf, recvcounts, rdispls, recvtypes, comm, info, request))

/* -- communicators made from a communicator -------------------------------------------------- */
WRAP(Comm_dup, comm, (MPI_Comm comm, MPI_Comm *newcomm), (comm, newcomm))
WRAP(Comm_idup, comm, (MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request), (comm, newcomm,
     request))
WRAP(Comm_dup_with_info, comm, (MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm), (comm, info,
     newcomm))
WRAP(Comm_idup_with_info, comm, (MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm,
     MPI_Request *request), (comm, info, newcomm, request))
WRAP(Comm_split, comm, (MPI_Comm comm, int color, int key, MPI_Comm *newcomm), (comm, color, key,
     newcomm))
WRAP(Comm_split_type, comm, (MPI_Comm comm, int split_type, int key, MPI_Info info,
     MPI_Comm *newcomm), (comm, split_type, key, info, newcomm))
WRAP(Comm_create, comm, (MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm), (comm, group,
     newcomm))
WRAP(Comm_create_group, comm, (MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm), (comm,
     group, tag, newcomm))
WRAP(Cart_create, old_comm, (MPI_Comm old_comm, int ndims, const int dims[], const int periods[],
     int reorder, MPI_Comm *comm_cart), (old_comm, ndims, dims, periods, reorder, comm_cart))
WRAP(Cart_sub, comm, (MPI_Comm comm, const int remain_dims[], MPI_Comm *new_comm), (comm,
     remain_dims, new_comm))
WRAP(Graph_create, comm_old, (MPI_Comm comm_old, int nnodes, const int index[], const int edges[],
     int reorder, MPI_Comm *comm_graph), (comm_old, nnodes, index, edges, reorder, comm_graph))
WRAP(Dist_graph_create, comm_old, (MPI_Comm comm_old, int n, const int nodes[],
     const int degrees[], const int targets[], const int weights[], MPI_Info info, int reorder,
     MPI_Comm * newcomm), (comm_old, n, nodes, degrees, targets, weights, info, reorder, newcomm))
WRAP(Dist_graph_create_adjacent, comm_old, (MPI_Comm comm_old, int indegree, const int sources[],
     const int sourceweights[], int outdegree, const int destinations[], const int destweights[],
     MPI_Info info, int reorder, MPI_Comm *comm_dist_graph), (comm_old, indegree, sources,
     sourceweights, outdegree, destinations, destweights, info, reorder, comm_dist_graph))
WRAP(Intercomm_merge, intercomm, (MPI_Comm intercomm, int high, MPI_Comm *newintracomm),
     (intercomm, high, newintracomm))

int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm bridge_comm,
                         int remote_leader, int tag, MPI_Comm *newintercomm)
{
    GUARD("MPI_Intercomm_create", local_comm);
    GUARD("MPI_Intercomm_create", bridge_comm);
    return PMPI_Intercomm_create(local_comm, local_leader, bridge_comm, remote_leader, tag,
                                 newintercomm);
}

/* -- windows and files ----------------------------------------------------------------------- */
WRAP(Win_create, comm, (void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
     MPI_Win *win), (base, size, disp_unit, info, comm, win))
WRAP(Win_allocate, comm, (MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
     void *baseptr, MPI_Win *win), (size, disp_unit, info, comm, baseptr, win))
WRAP(Win_allocate_shared, comm, (MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
     void *baseptr, MPI_Win *win), (size, disp_unit, info, comm, baseptr, win))
WRAP(Win_create_dynamic, comm, (MPI_Info info, MPI_Comm comm, MPI_Win *win), (info, comm, win))
WRAP(File_open, comm, (MPI_Comm comm, const char *filename, int amode, MPI_Info info,
     MPI_File *fh), (comm, filename, amode, info, fh))
/* -- processes joined without a program communicator --------------------------------------- */
int MPI_Comm_create_from_group(MPI_Group group, const char *stringtag, MPI_Info info,
                               MPI_Errhandler errhandler, MPI_Comm *newcomm)
{
    int size = 0;
    if (armed && !internal && PMPI_Group_size(group, &size) == MPI_SUCCESS && size > 1)
        return refuse("MPI_Comm_create_from_group", "on a group of the program's processes",
                      __builtin_return_address(0));
    return PMPI_Comm_create_from_group(group, stringtag, info, errhandler, newcomm);
}

int MPI_Intercomm_create_from_groups(MPI_Group local_group, int local_leader,
                                     MPI_Group remote_group, int remote_leader,
                                     const char *stringtag, MPI_Info info,
                                     MPI_Errhandler errhandler, MPI_Comm *newintercomm)
{
    GUARD_ALWAYS("MPI_Intercomm_create_from_groups");
    return PMPI_Intercomm_create_from_groups(local_group, local_leader, remote_group,
                                             remote_leader, stringtag, info, errhandler,
                                             newintercomm);
}

int MPI_Comm_spawn(const char *command, char *argv[], int maxprocs, MPI_Info info, int root,
                   MPI_Comm comm, MPI_Comm *intercomm, int array_of_errcodes[])
{
    GUARD_ALWAYS("MPI_Comm_spawn");
    return PMPI_Comm_spawn(command, argv, maxprocs, info, root, comm, intercomm,
                           array_of_errcodes);
}

int MPI_Comm_spawn_multiple(int count, char *array_of_commands[], char **array_of_argv[],
                            const int array_of_maxprocs[], const MPI_Info array_of_info[],
                            int root, MPI_Comm comm, MPI_Comm *intercomm,
                            int array_of_errcodes[])
{
    GUARD_ALWAYS("MPI_Comm_spawn_multiple");
    return PMPI_Comm_spawn_multiple(count, array_of_commands, array_of_argv, array_of_maxprocs,
                                    array_of_info, root, comm, intercomm, array_of_errcodes);
}

int MPI_Comm_accept(const char *port_name, MPI_Info info, int root, MPI_Comm comm,
                    MPI_Comm *newcomm)
{
    GUARD_ALWAYS("MPI_Comm_accept");
    return PMPI_Comm_accept(port_name, info, root, comm, newcomm);
}

int MPI_Comm_connect(const char *port_name, MPI_Info info, int root, MPI_Comm comm,
                     MPI_Comm *newcomm)
{
    GUARD_ALWAYS("MPI_Comm_connect");
    return PMPI_Comm_connect(port_name, info, root, comm, newcomm);
}

int MPI_Comm_join(int fd, MPI_Comm *intercomm)
{
    GUARD_ALWAYS("MPI_Comm_join");
    return PMPI_Comm_join(fd, intercomm);
}

#if defined(OMPI_HAVE_MPI_EXT_FTMPI) && OMPI_HAVE_MPI_EXT_FTMPI
/* -- Open MPI's fault-tolerance extension (mpi4py's Agree, Shrink) ---------------------------- */
int MPIX_Comm_agree(MPI_Comm comm, int *flag)
{
    GUARD("MPIX_Comm_agree", comm);
    return PMPIX_Comm_agree(comm, flag);
}

int MPIX_Comm_iagree(MPI_Comm comm, int *flag, MPI_Request *request)
{
    GUARD("MPIX_Comm_iagree", comm);
    return PMPIX_Comm_iagree(comm, flag, request);
}

int MPIX_Comm_shrink(MPI_Comm comm, MPI_Comm *newcomm)
{
    GUARD("MPIX_Comm_shrink", comm);
    return PMPIX_Comm_shrink(comm, newcomm);
}
#endif

/* -- a program communicator freed leaves the table ------------------------------------------- */
int MPI_Comm_free(MPI_Comm *comm)
{
    MPI_Comm was = *comm;
    int err = PMPI_Comm_free(comm);
    if (err == MPI_SUCCESS)
        unmark(was);
    return err;
}

int MPI_Comm_disconnect(MPI_Comm *comm)
{
    MPI_Comm was = *comm;
    int err = PMPI_Comm_disconnect(comm);
    if (err == MPI_SUCCESS)
        unmark(was);
    return err;
}
