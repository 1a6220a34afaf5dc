/* dualmpi's compiled round loop: one plan's rounds without a Python step per round.
 *
 * Per round: MPI_Startall over the round's persistent requests, the local moves between a
 * rank's own nodes (memcpy within the store), MPI_Waitall.  progress[0] is the position
 * (1-based) of the round being waited in, 0 outside the loop; progress[1] counts the calls,
 * so the watchdog thread (Python, dualmpi/engine/watchdog.py) can tell a wait that lasts from
 * one that recurs.  Built with the MPI library's own mpicc by dualmpi/engine/cloop.py.
 */
#include <mpi.h>
#include <stdint.h>
#include <string.h>

int dualmpi_request_size(void) { return (int)sizeof(MPI_Request); }

/* The same with its arguments in one array (one pointer to convert per call):
 * {nrounds, nreq, reqs, nmove, moves, store, progress}. */
int dualmpi_rounds(int nrounds, const int *nreq, MPI_Request *reqs, const int *nmove,
                   const int64_t *moves, char *store, volatile int64_t *progress);

int dualmpi_run(const intptr_t *a)
{
    return dualmpi_rounds((int)a[0], (const int *)a[1], (MPI_Request *)a[2], (const int *)a[3],
                          (const int64_t *)a[4], (char *)a[5], (volatile int64_t *)a[6]);
}

int dualmpi_rounds(int nrounds, const int *nreq, MPI_Request *reqs, const int *nmove,
                   const int64_t *moves, char *store, volatile int64_t *progress)
{
    int err;
    progress[1] += 1;
    for (int k = 0; k < nrounds; k++) {
        int n = nreq[k];
        if (n) {
            err = MPI_Startall(n, reqs);
            if (err != MPI_SUCCESS) { progress[0] = 0; return err; }
        }
        for (int i = 0; i < nmove[k]; i++, moves += 3)
            memcpy(store + moves[0], store + moves[1], (size_t)moves[2]);
        progress[0] = k + 1;
        if (n) {
            err = MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
            if (err != MPI_SUCCESS) { progress[0] = 0; return err; }
        }
        reqs += n;
    }
    progress[0] = 0;
    return MPI_SUCCESS;
}
