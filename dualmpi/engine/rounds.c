/* dualmpi's compiled round loop: one plan's rounds without a Python step per round.
 *
 * Per round: MPI_Startall over the round's persistent requests, the local moves between a
 * rank's own nodes (memcpy within the store), then a wait for the round's requests *and*
 * the communicator's alarm line (dualmpi/engine/alarm.py: a persistent receive from any
 * rank, kept after each round's requests in the request array), so a rank waiting in a
 * round hears at once of an error another rank found.  progress[0] is the position
 * (1-based, over the whole plan) of the round being waited in, 0 outside the loop;
 * progress[1] counts the calls, so the watchdog thread (Python, dualmpi/engine/watchdog.py)
 * can tell a wait that lasts from one that recurs.  Built with the MPI library's own mpicc
 * by dualmpi/engine/cloop.py.
 *
 * Every message ends with an 8-byte trailer: the call's signature (what every rank of a
 * correct program has in common: the plan, the method, the arguments agreed on) mixed with
 * the communicator's call number, which the loop advances at the start of each call.  The
 * trailers a round received are checked as soon as the round ends: a message of another
 * call (ranks that called different collectives, other arguments, or one rank a call behind)
 * stops the loop before the rank forwards anything, and the caller raises the alarm.
 *
 * A reduction whose operation is one of MPI's own on a predefined type combines the blocks
 * that met in a round right after it, with MPI_Reduce_local (the table of combines per round:
 * A_NCOMB, A_COMBS), so the whole reduction is one C call; other operations (numpy ufuncs, user
 * MPI.Ops) are applied in Python between segments of rounds.
 *
 * dualmpi_run also does what a call needs around the rounds, so a repeated call is one
 * C call: copies in (the caller's send buffer to the store, absolute addresses), copies out,
 * and the runner's call counter.  Copies that touch nothing the messages do (a rank's own
 * block, from its send buffer to its receive buffer) run while the first round's messages
 * are in flight.
 */
#include <mpi.h>
#include <stdint.h>
#include <string.h>

int dualmpi_request_size(void) { return (int)sizeof(MPI_Request); }

/* The fields of dualmpi_run's argument array (dualmpi/engine/mpi.py: the _A_ constants). */
enum {
    A_NROUNDS, A_NREQ, A_REQS, A_NMOVE, A_MOVES, A_STORE, A_PROGRESS, A_BASE,
    A_NRECV, A_TRAIL, A_SIGNATURE, A_FLAGS, A_NPRE, A_PRE, A_NPOST, A_POST, A_CALLS,
    A_NMID, A_MID, A_SEQ, A_SIGWORD, A_WBUF, A_RING, A_INDEX, A_TBASE, A_NCOMB, A_COMBS,
    A_OP, A_TYPE, A_ITEM, A_HIST, A_FIELDS
};
/* F_START: the call's first segment (advance the call number, write the signature);
 * F_CHECK: check the trailers; F_COUNT: count the call; F_WATCH: wait on the alarm line. */
enum { F_START = 1, F_CHECK = 2, F_COUNT = 4, F_WATCH = 8 };

/* Returned when the alarm line brought a message the caller must read (dualmpi/engine/alarm.py). */
#define DUALMPI_ALARM (-2147483647)
/* Alarm-line messages: int64 words [kind, call number, sender, ...]; a notice of an agreement
 * for a later call is kept in the ring for the caller (dualmpi/engine/alarm.py: the layout). */
#define MSG_WORDS 24
/* The kind of a nonblocking call's notice, and how many of its own nonblocking call numbers a
 * rank remembers (A_HIST: hist[t % HISTORY] == t when call t was nonblocking here). */
#define KIND_NONBLOCKING 5
#define HISTORY 4096

int dualmpi_fields(void) { return A_FIELDS; }
int dualmpi_alarm_code(void) { return DUALMPI_ALARM; }

static void copies(int64_t n, const int64_t *c)
{
    for (int64_t i = 0; i < n; i++, c += 3)
        if (c[2])
            memcpy((void *)(intptr_t)c[0], (const void *)(intptr_t)c[1], (size_t)c[2]);
}

static uint64_t call_signature(uint64_t base, int64_t seq)
{
    return base ^ ((uint64_t)seq * 0x9E3779B97F4A7C15ULL);
}

/* The alarm line delivered a message into wbuf: drop a notice about one of this rank's own
 * nonblocking calls, keep a message about a later call in the ring (another rank is ahead:
 * this call's data is not in question), and listen again (0); else the caller must read it
 * (1). */
static int heard(MPI_Request *line, const int64_t *wbuf, int64_t *ring, int64_t seq,
                 const int64_t *hist)
{
    if (wbuf[0] == KIND_NONBLOCKING && (hist[wbuf[1] % HISTORY] == wbuf[1]
                                        || wbuf[1] <= seq - HISTORY))
        return MPI_Start(line) == MPI_SUCCESS ? 0 : 1;
    if (wbuf[1] > seq && ring[0] < ring[1]) {
        memcpy(ring + 2 + ring[0] * MSG_WORDS, wbuf, MSG_WORDS * sizeof(int64_t));
        ring[0] += 1;
        return MPI_Start(line) == MPI_SUCCESS ? 0 : 1;
    }
    return 1;
}

/* Run rounds a[A_NROUNDS] of a plan (a segment of it: the arrays start at its first round).
 * Returns MPI_SUCCESS, an MPI error code, -(i + 1) when trailer i (counted over the whole
 * plan) does not carry the call's signature, or DUALMPI_ALARM. */
int dualmpi_run(const int64_t *a)
{
    int err;
    const int nrounds = (int)a[A_NROUNDS];
    const int *nreq = (const int *)(intptr_t)a[A_NREQ];
    const int *nrecv = (const int *)(intptr_t)a[A_NRECV];
    MPI_Request *reqs = (MPI_Request *)(intptr_t)a[A_REQS];
    const int *nmove = (const int *)(intptr_t)a[A_NMOVE];
    const int64_t *moves = (const int64_t *)(intptr_t)a[A_MOVES];
    char *store = (char *)(intptr_t)a[A_STORE];
    volatile int64_t *progress = (volatile int64_t *)(intptr_t)a[A_PROGRESS];
    const int64_t base = a[A_BASE], flags = a[A_FLAGS];
    const uint64_t *trail = (const uint64_t *)(intptr_t)a[A_TRAIL];
    int64_t *seqp = (int64_t *)(intptr_t)a[A_SEQ];
    const int64_t *wbuf = (const int64_t *)(intptr_t)a[A_WBUF];
    int64_t *ring = (int64_t *)(intptr_t)a[A_RING];
    const int64_t *hist = (const int64_t *)(intptr_t)a[A_HIST];
    int *index = (int *)(intptr_t)a[A_INDEX];
    const int *ncomb = (const int *)(intptr_t)a[A_NCOMB];
    const int64_t *combs = (const int64_t *)(intptr_t)a[A_COMBS];
    const int64_t item = a[A_ITEM];
    int64_t seq;
    uint64_t sig;
    int64_t t = 0;

    if (flags & F_START) {
        seq = ++*seqp;
        sig = call_signature((uint64_t)a[A_SIGNATURE], seq);
        *(uint64_t *)(intptr_t)a[A_SIGWORD] = sig;
        if ((flags & F_WATCH) && ring[0])  /* kept notices about a call this one has reached */
            for (int64_t i = 0; i < ring[0]; i++)
                if (ring[2 + i * MSG_WORDS + 1] <= seq)
                    return DUALMPI_ALARM;
    } else {
        seq = *seqp;
        sig = call_signature((uint64_t)a[A_SIGNATURE], seq);
    }
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
        if (n && !(flags & F_WATCH)) {
            err = MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
            if (err != MPI_SUCCESS) { progress[0] = 0; return err; }
        } else if (n) {
            int left = n, out;
            while (left > 0) {
                err = MPI_Waitsome(n + 1, reqs, &out, index, MPI_STATUSES_IGNORE);
                if (err != MPI_SUCCESS || out == MPI_UNDEFINED) {
                    progress[0] = 0;
                    return err != MPI_SUCCESS ? err : MPI_ERR_REQUEST;
                }
                for (int j = 0; j < out; j++) {
                    if (index[j] != n)
                        left -= 1;
                    else if (heard(reqs + n, wbuf, ring, seq, hist)) {
                        progress[0] = 0;
                        return DUALMPI_ALARM;
                    }
                }
            }
        }
        if (flags & F_CHECK)
            for (int i = 0; i < nrecv[k]; i++, t++)
                if (trail[t] != sig) {
                    progress[0] = 0;
                    return (int)-(a[A_TBASE] + t + 1);
                }
        if (ncomb)  /* a reduction: the blocks that met this round, combined by MPI's own op */
            for (int i = 0; i < ncomb[k]; i++, combs += 3)
                for (int64_t done = 0, left = combs[2] / item; left > 0;) {
                    int count = left > (1 << 30) ? (1 << 30) : (int)left;
                    err = MPI_Reduce_local(store + combs[0] + done * item,
                                           store + combs[1] + done * item, count,
                                           (MPI_Datatype)(intptr_t)a[A_TYPE],
                                           (MPI_Op)(intptr_t)a[A_OP]);
                    if (err != MPI_SUCCESS) { progress[0] = 0; return err; }
                    done += count;
                    left -= count;
                }
        reqs += n + 1;
    }
    progress[0] = 0;
    if (nrounds == 0)
        copies(a[A_NMID], (const int64_t *)(intptr_t)a[A_MID]);
    copies(a[A_NPOST], (const int64_t *)(intptr_t)a[A_POST]);
    if (flags & F_COUNT)
        *(int64_t *)(intptr_t)a[A_CALLS] += 1;
    return MPI_SUCCESS;
}
