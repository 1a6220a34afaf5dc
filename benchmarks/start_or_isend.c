/* One exchange between two ranks, the send started from a persistent request or made with
 * MPI_Isend: the measurement behind dualmpi/engine/mpi.py's IMMEDIATE; and a message of several
 * segments sent as such or packed: behind its PACK_SMALL (benchmarks/start_or_isend.py builds
 * this file with the MPI library's mpicc and calls it).
 *
 * bench_exchange(bytes, segments, iters, isend) times `iters` exchanges with rank ^ 1 on
 * MPI_COMM_WORLD: MPI_Start of a persistent receive, the send (MPI_Start of a persistent
 * send, or MPI_Isend with isend), MPI_Waitall; the message is `bytes` bytes in `segments`
 * segments (a hindexed datatype at absolute addresses when segments > 1, as the engine's
 * messages of a payload and its trailer are; the last segment 8 bytes).  Returns the seconds
 * per exchange, or -1.0 when MPI failed. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

/* The hindexed datatype of `bytes` bytes in `segments` segments of `base` (the last 8 bytes,
 * each apart from the others); with `seg`, the segments' addresses too, and `lens` their
 * lengths (arrays of 64). */
static int describe(char *base, int bytes, int segments, MPI_Datatype *type, char **seg,
                    int *lens)
{
    int own[64];
    MPI_Aint at[64];
    if (segments < 2 || segments > 64 || bytes < 8 * segments)
        return -1;
    if (lens == NULL)
        lens = own;
    int rest = bytes - 8, each = rest / (segments - 1);
    for (int i = 0; i < segments; i++) {
        lens[i] = i == segments - 1 ? 8 : i == segments - 2 ? rest - each * (segments - 2) : each;
        MPI_Get_address(base + 2 * i * (bytes + 8), &at[i]);  /* apart from each other */
        if (seg != NULL)
            seg[i] = base + 2 * i * (bytes + 8);
    }
    if (MPI_Type_create_hindexed(segments, lens, at, MPI_BYTE, type) != MPI_SUCCESS)
        return -1;
    return MPI_Type_commit(type) == MPI_SUCCESS ? 0 : -1;
}

double bench_exchange(int bytes, int segments, int iters, int isend)
{
    int rank, err = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int peer = rank ^ 1;
    const size_t room = (size_t)(2 * (segments + 1)) * (size_t)(bytes + 8);
    char *sbuf = calloc(room, 1), *rbuf = calloc(room, 1);
    MPI_Datatype stype = MPI_BYTE, rtype = MPI_BYTE;
    void *sat = sbuf, *rat = rbuf;
    int count = bytes;
    MPI_Request reqs[2];
    double t = -1.0;
    if (sbuf == NULL || rbuf == NULL)
        goto out;
    if (segments > 1) {
        if (describe(sbuf, bytes, segments, &stype, NULL, NULL) ||
                describe(rbuf, bytes, segments, &rtype, NULL, NULL))
            goto out;
        sat = rat = MPI_BOTTOM;
        count = 1;
    }
    err |= MPI_Recv_init(rat, count, rtype, peer, 7, MPI_COMM_WORLD, &reqs[0]);
    err |= MPI_Send_init(sat, count, stype, peer, 7, MPI_COMM_WORLD, &reqs[1]);
    MPI_Request persistent = reqs[1];
    if (err)
        goto out;
    MPI_Barrier(MPI_COMM_WORLD);
    t = MPI_Wtime();
    for (int i = 0; i < iters && !err; i++) {
        err |= MPI_Start(&reqs[0]);
        if (isend)
            err |= MPI_Isend(sat, count, stype, peer, 7, MPI_COMM_WORLD, &reqs[1]);
        else
            err |= MPI_Start(&reqs[1]);
        err |= MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
        reqs[1] = persistent;
    }
    t = err ? -1.0 : (MPI_Wtime() - t) / iters;
    MPI_Request_free(&reqs[0]);
    MPI_Request_free(&persistent);
out:
    if (segments > 1 && stype != MPI_BYTE)
        MPI_Type_free(&stype);
    if (segments > 1 && rtype != MPI_BYTE)
        MPI_Type_free(&rtype);
    free(sbuf);
    free(rbuf);
    return t;
}

/* bench_packed(bytes, segments, iters, packed) times `iters` exchanges with rank ^ 1 of a
 * message of `bytes` bytes in `segments` segments (as bench_exchange's, segments > 1): the
 * receive's persistent request started, the send made with MPI_Isend, MPI_Waitall -- the
 * hindexed datatype at both ends, or with `packed` the segments copied into one contiguous
 * slot sent as bytes, received whole into a slot and copied out to the segments after the
 * wait (what the compiled loop does for a small message: dualmpi/engine/mpi.py, PACK_SMALL).
 * Returns the seconds per exchange, or -1.0 when MPI failed. */
double bench_packed(int bytes, int segments, int iters, int packed)
{
    int rank, err = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int peer = rank ^ 1;
    const size_t room = (size_t)(2 * (segments + 1)) * (size_t)(bytes + 8);
    char *sbuf = calloc(room, 1), *rbuf = calloc(room, 1);
    char *sslot = calloc((size_t)bytes, 1), *rslot = calloc((size_t)bytes, 1);
    MPI_Datatype stype = MPI_BYTE, rtype = MPI_BYTE;
    int lens[64];
    char *sat[64], *rat[64];
    MPI_Request reqs[2], recv;
    double t = -1.0;
    if (sbuf == NULL || rbuf == NULL || sslot == NULL || rslot == NULL ||
            describe(sbuf, bytes, segments, &stype, sat, lens) ||
            describe(rbuf, bytes, segments, &rtype, rat, NULL))
        goto out;
    err |= packed ? MPI_Recv_init(rslot, bytes, MPI_BYTE, peer, 8, MPI_COMM_WORLD, &recv)
                  : MPI_Recv_init(MPI_BOTTOM, 1, rtype, peer, 8, MPI_COMM_WORLD, &recv);
    if (err)
        goto out;
    MPI_Barrier(MPI_COMM_WORLD);
    t = MPI_Wtime();
    for (int i = 0; i < iters && !err; i++) {
        reqs[0] = recv;
        err |= MPI_Start(&reqs[0]);
        if (packed) {
            char *at = sslot;
            for (int j = 0; j < segments; j++, at += lens[j - 1])
                memcpy(at, sat[j], (size_t)lens[j]);
            err |= MPI_Isend(sslot, bytes, MPI_BYTE, peer, 8, MPI_COMM_WORLD, &reqs[1]);
        } else {
            err |= MPI_Isend(MPI_BOTTOM, 1, stype, peer, 8, MPI_COMM_WORLD, &reqs[1]);
        }
        err |= MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
        if (packed) {
            const char *at = rslot;
            for (int j = 0; j < segments; j++, at += lens[j - 1])
                memcpy(rat[j], at, (size_t)lens[j]);
        }
    }
    t = err ? -1.0 : (MPI_Wtime() - t) / iters;
    MPI_Request_free(&recv);
out:
    if (stype != MPI_BYTE)
        MPI_Type_free(&stype);
    if (rtype != MPI_BYTE)
        MPI_Type_free(&rtype);
    free(sbuf);
    free(rbuf);
    free(sslot);
    free(rslot);
    return t;
}
