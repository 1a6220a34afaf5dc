/* dualmpi's compiled round loop: one plan's rounds without a Python step per round.
 *
 * Per round: MPI_Startall over the round's persistent requests, the local moves between a
 * rank's own nodes (memcpy within the store), MPI_Waitall.  progress[0] is the position
 * (1-based, over the whole plan) of the round being waited in, 0 outside the loop;
 * progress[1] counts the calls, so the watchdog thread (Python, dualmpi/engine/watchdog.py)
 * can tell a wait that lasts from one that recurs.  Built with the MPI library's own mpicc
 * by dualmpi/engine/cloop.py.
 *
 * dualmpi_run also does what a call needs around the rounds, so a repeated call is one
 * C call: copies in (the caller's send buffer to the store, absolute addresses), the
 * trailers of the received messages reset before the rounds and checked against the
 * call's signature after them, copies out, and the runner's call counter.  Copies that
 * touch nothing the messages do (a rank's own block, from its send buffer to its receive
 * buffer) run while the first round's messages are in flight.
 */
#include <mpi.h>
#include <stdint.h>
#include <string.h>

int dualmpi_request_size(void) { return (int)sizeof(MPI_Request); }

/* The fields of dualmpi_run's argument array (dualmpi/engine/mpi.py: the _A_ constants). */
enum {
    A_NROUNDS, A_NREQ, A_REQS, A_NMOVE, A_MOVES, A_STORE, A_PROGRESS, A_BASE,
    A_NTRAIL, A_TRAIL, A_SIGNATURE, A_FLAGS, A_NPRE, A_PRE, A_NPOST, A_POST, A_CALLS,
    A_NMID, A_MID, A_FIELDS
};
enum { F_RESET = 1, F_CHECK = 2, F_COUNT = 4 };

int dualmpi_fields(void) { return A_FIELDS; }

static void copies(int64_t n, const int64_t *c)
{
    for (int64_t i = 0; i < n; i++, c += 3)
        if (c[2])
            memcpy((void *)(intptr_t)c[0], (const void *)(intptr_t)c[1], (size_t)c[2]);
}

/* Run rounds a[A_NROUNDS] of a plan (a segment of it: the arrays start at its first round).
 * Returns MPI_SUCCESS, an MPI error code, or -(i + 1) when trailer i does not carry the
 * call's signature (a message of another call). */
int dualmpi_run(const int64_t *a)
{
    int err;
    const int nrounds = (int)a[A_NROUNDS];
    const int *nreq = (const int *)(intptr_t)a[A_NREQ];
    MPI_Request *reqs = (MPI_Request *)(intptr_t)a[A_REQS];
    const int *nmove = (const int *)(intptr_t)a[A_NMOVE];
    const int64_t *moves = (const int64_t *)(intptr_t)a[A_MOVES];
    char *store = (char *)(intptr_t)a[A_STORE];
    volatile int64_t *progress = (volatile int64_t *)(intptr_t)a[A_PROGRESS];
    const int64_t base = a[A_BASE], flags = a[A_FLAGS], ntrail = a[A_NTRAIL];
    uint64_t *trail = (uint64_t *)(intptr_t)a[A_TRAIL];

    if (flags & F_RESET)
        memset(trail, 0, (size_t)ntrail * sizeof(uint64_t));
    copies(a[A_NPRE], (const int64_t *)(intptr_t)a[A_PRE]);
    progress[1] += 1;
    for (int k = 0; k < nrounds; k++) {
        int n = nreq[k];
        if (n) {
            err = MPI_Startall(n, reqs);
            if (err != MPI_SUCCESS) { progress[0] = 0; return err; }
        }
        if (k == 0)
            copies(a[A_NMID], (const int64_t *)(intptr_t)a[A_MID]);
        for (int i = 0; i < nmove[k]; i++, moves += 3)
            memcpy(store + moves[0], store + moves[1], (size_t)moves[2]);
        progress[0] = base + k + 1;
        if (n) {
            err = MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
            if (err != MPI_SUCCESS) { progress[0] = 0; return err; }
        }
        reqs += n;
    }
    progress[0] = 0;
    if (nrounds == 0)
        copies(a[A_NMID], (const int64_t *)(intptr_t)a[A_MID]);
    if (flags & F_CHECK) {
        const uint64_t sig = (uint64_t)a[A_SIGNATURE];
        for (int64_t i = 0; i < ntrail; i++)
            if (trail[i] != sig)
                return (int)-(i + 1);
    }
    copies(a[A_NPOST], (const int64_t *)(intptr_t)a[A_POST]);
    if (flags & F_COUNT)
        *(int64_t *)(intptr_t)a[A_CALLS] += 1;
    return MPI_SUCCESS;
}
