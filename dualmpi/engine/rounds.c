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
 *
 * dualmpi_run_pair runs two plans' calls in lockstep, round k of both together: a repeated
 * small v-variant call exchanges its count table while its plan runs (dualmpi/calls.py, a
 * speculative call), so the call costs the longer plan's rounds, not the sum.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int dualmpi_request_size(void) { return (int)sizeof(MPI_Request); }

/* The fields of dualmpi_run's argument array (dualmpi/engine/mpi.py: the _A_ constants). */
enum {
    A_NROUNDS, A_NREQ, A_REQS, A_NMOVE, A_MOVES, A_STORE, A_PROGRESS, A_BASE,
    A_NRECV, A_TRAIL, A_SIGNATURE, A_FLAGS, A_NPRE, A_PRE, A_NPOST, A_POST, A_CALLS,
    A_NMID, A_MID, A_SEQ, A_SIGWORD, A_WBUF, A_RING, A_INDEX, A_TBASE, A_NCOMB, A_COMBS,
    A_OP, A_TYPE, A_ITEM, A_HIST, A_RIDX, A_FIELDS
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

/* One plan's state through a call run beside another (dualmpi_run_pair): the steps of
 * dualmpi_run's loop, one function each.  dualmpi_run keeps them inline in its own loop: a
 * call's fixed cost is what the repeated small collectives pay (0.1 us less, measured). */
typedef struct {
    const int64_t *a;
    int nrounds;
    const int *nreq, *nrecv, *nmove, *ncomb;
    MPI_Request *reqs;
    const int64_t *moves, *combs, *wbuf, *hist;
    char *store;
    volatile int64_t *progress;
    int64_t flags, item, seq, t, *ring;
    const uint64_t *trail;
    uint64_t sig;
    int *index;
} plan_t;

/* Read a plan's argument array and begin its call: the call number and signature, the
 * copies in.  Returns 0, or DUALMPI_ALARM when a kept notice concerns this call. */
static int plan_begin(plan_t *p, const int64_t *a)
{
    p->a = a;
    p->nrounds = (int)a[A_NROUNDS];
    p->nreq = (const int *)(intptr_t)a[A_NREQ];
    p->nrecv = (const int *)(intptr_t)a[A_NRECV];
    p->reqs = (MPI_Request *)(intptr_t)a[A_REQS];
    p->nmove = (const int *)(intptr_t)a[A_NMOVE];
    p->moves = (const int64_t *)(intptr_t)a[A_MOVES];
    p->store = (char *)(intptr_t)a[A_STORE];
    p->progress = (volatile int64_t *)(intptr_t)a[A_PROGRESS];
    p->flags = a[A_FLAGS];
    p->trail = (const uint64_t *)(intptr_t)a[A_TRAIL];
    p->wbuf = (const int64_t *)(intptr_t)a[A_WBUF];
    p->ring = (int64_t *)(intptr_t)a[A_RING];
    p->hist = (const int64_t *)(intptr_t)a[A_HIST];
    p->index = (int *)(intptr_t)a[A_INDEX];
    p->ncomb = (const int *)(intptr_t)a[A_NCOMB];
    p->combs = (const int64_t *)(intptr_t)a[A_COMBS];
    p->item = a[A_ITEM];
    p->t = 0;
    int64_t *seqp = (int64_t *)(intptr_t)a[A_SEQ];
    if (p->flags & F_START) {
        p->seq = ++*seqp;
        p->sig = call_signature((uint64_t)a[A_SIGNATURE], p->seq);
        *(uint64_t *)(intptr_t)a[A_SIGWORD] = p->sig;
        if ((p->flags & F_WATCH) && p->ring[0])  /* kept notices about a call this one has reached */
            for (int64_t i = 0; i < p->ring[0]; i++)
                if (p->ring[2 + i * MSG_WORDS + 1] <= p->seq)
                    return DUALMPI_ALARM;
    } else {
        p->seq = *seqp;
        p->sig = call_signature((uint64_t)a[A_SIGNATURE], p->seq);
    }
    copies(a[A_NPRE], (const int64_t *)(intptr_t)a[A_PRE]);
    p->progress[1] += 1;
    return 0;
}

/* Start round k's requests, then do what needs no message: the copies beside the first
 * round and the round's local moves.  Returns an MPI error code. */
static int plan_start(plan_t *p, int k)
{
    int n = p->nreq[k];
    if (n) {
        int err = MPI_Startall(n, p->reqs);
        if (err != MPI_SUCCESS) return err;
    }
    if (k == 0)
        copies(p->a[A_NMID], (const int64_t *)(intptr_t)p->a[A_MID]);
    for (int i = 0; i < p->nmove[k]; i++, p->moves += 3)
        memcpy(p->store + p->moves[0], p->store + p->moves[1], (size_t)p->moves[2]);
    return MPI_SUCCESS;
}

/* After round k's requests completed: check its trailers, combine its blocks, move on to
 * the next round's requests.  Returns MPI_SUCCESS, an MPI error or -(trailer + 1). */
static int plan_end(plan_t *p, int k)
{
    if (p->flags & F_CHECK)
        for (int i = 0; i < p->nrecv[k]; i++, p->t++)
            if (p->trail[p->t] != p->sig)
                return (int)-(p->a[A_TBASE] + p->t + 1);
    if (p->ncomb)  /* a reduction: the blocks that met this round, combined by MPI's own op */
        for (int i = 0; i < p->ncomb[k]; i++, p->combs += 3)
            for (int64_t done = 0, left = p->combs[2] / p->item; left > 0;) {
                int count = left > (1 << 30) ? (1 << 30) : (int)left;
                int err = MPI_Reduce_local(p->store + p->combs[0] + done * p->item,
                                           p->store + p->combs[1] + done * p->item, count,
                                           (MPI_Datatype)(intptr_t)p->a[A_TYPE],
                                           (MPI_Op)(intptr_t)p->a[A_OP]);
                if (err != MPI_SUCCESS) return err;
                done += count;
                left -= count;
            }
    p->reqs += p->nreq[k] + 1;
    return MPI_SUCCESS;
}

/* The call's end: the copies out and the call's count. */
static void plan_finish(plan_t *p)
{
    if (p->nrounds == 0)
        copies(p->a[A_NMID], (const int64_t *)(intptr_t)p->a[A_MID]);
    copies(p->a[A_NPOST], (const int64_t *)(intptr_t)p->a[A_POST]);
    if (p->flags & F_COUNT)
        *(int64_t *)(intptr_t)p->a[A_CALLS] += 1;
}

/* Wait for n requests, the alarm line after them (reqs[n]) when watching.  Returns
 * MPI_SUCCESS, an MPI error or DUALMPI_ALARM. */
static int wait_round(plan_t *p, MPI_Request *reqs, int n, int *index, int64_t seq)
{
    int err;
    if (!n)
        return MPI_SUCCESS;
    if (!(p->flags & F_WATCH))
        return MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    int left = n, out;
    while (left > 0) {
        err = MPI_Waitsome(n + 1, reqs, &out, index, MPI_STATUSES_IGNORE);
        if (err != MPI_SUCCESS || out == MPI_UNDEFINED)
            return err != MPI_SUCCESS ? err : MPI_ERR_REQUEST;
        for (int j = 0; j < out; j++) {
            if (index[j] != n)
                left -= 1;
            else if (heard(reqs + n, p->wbuf, p->ring, seq, p->hist))
                return DUALMPI_ALARM;
        }
    }
    return MPI_SUCCESS;
}

/* Two plans' calls in lockstep: round k of both (by its index in the whole plan, A_RIDX)
 * started together — the first plan's requests first, on every rank, so messages of the two
 * plans between the same ranks match in order — and waited for together, with the alarm
 * line.  Like each plan alone, deadlock-free: a rank waits in round k only for messages
 * other ranks send in round k.  ab[0], ab[1]: the plans' argument arrays
 * (whole plans, one segment each, both with F_START or neither); ab[2] is set to the index of
 * the plan an error belongs to.  The watchdog's position (progress[0]) is the second plan's.
 * Returns as dualmpi_run does.  This is a v-variant's count table exchanged while the call's
 * plan runs (dualmpi/calls.py: a speculative call). */
int dualmpi_run_pair(int64_t *ab)
{
    plan_t p[2];
    MPI_Request fixed[64];
    int fixed_index[64];
    MPI_Request *reqs = fixed;
    int *index = fixed_index;
    int err, most = 0, k[2] = {0, 0};
    const int *ridx[2];
    ab[2] = 0;
    for (int i = 0; i < 2; i++) {
        ab[2] = i;
        if ((err = plan_begin(&p[i], (const int64_t *)(intptr_t)ab[i])) != 0)
            return err;
        ridx[i] = (const int *)(intptr_t)p[i].a[A_RIDX];
    }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < p[i].nrounds; j++)
            most += p[i].nreq[j];
    if (most + 1 > 64) {
        reqs = (MPI_Request *)malloc((size_t)(most + 1) * sizeof(MPI_Request));
        index = (int *)malloc((size_t)(most + 1) * sizeof(int));
        if (reqs == NULL || index == NULL) {
            free(reqs == fixed ? NULL : reqs);
            free(index == fixed_index ? NULL : index);
            return MPI_ERR_NO_MEM;
        }
    }
    err = MPI_SUCCESS;
    /* the plans' rounds by their index in the whole plan (a rank's plan lists only the
     * rounds it takes part in): round t of both together, t rising */
    while (err == MPI_SUCCESS && (k[0] < p[0].nrounds || k[1] < p[1].nrounds)) {
        int t = -1, n = 0, now[2];
        MPI_Request *line = NULL;
        for (int i = 0; i < 2; i++)
            if (k[i] < p[i].nrounds && (t < 0 || ridx[i][k[i]] < t))
                t = ridx[i][k[i]];
        for (int i = 0; i < 2 && err == MPI_SUCCESS; i++) {
            now[i] = k[i] < p[i].nrounds && ridx[i][k[i]] == t;
            if (!now[i])
                continue;
            ab[2] = i;
            err = plan_start(&p[i], k[i]);
            memcpy(reqs + n, p[i].reqs, (size_t)p[i].nreq[k[i]] * sizeof(MPI_Request));
            n += p[i].nreq[k[i]];
            line = p[i].reqs + p[i].nreq[k[i]];
        }
        if (err != MPI_SUCCESS)
            break;
        if (now[1])
            p[1].progress[0] = p[1].a[A_BASE] + k[1] + 1;
        /* the alarm line is the same request in both plans: waited on (and restarted by
         * heard()) through its copy, the same handle */
        reqs[n] = *line;
        err = wait_round(&p[1], reqs, n, index, p[1].seq > p[0].seq ? p[1].seq : p[0].seq);
        for (int i = 0; i < 2 && err == MPI_SUCCESS; i++) {
            if (!now[i])
                continue;
            ab[2] = i;
            err = plan_end(&p[i], k[i]);
            k[i] += 1;
        }
    }
    p[1].progress[0] = 0;
    if (reqs != fixed) {
        free(reqs);
        free(index);
    }
    if (err != MPI_SUCCESS)
        return err;
    for (int i = 0; i < 2; i++)
        plan_finish(&p[i]);
    return MPI_SUCCESS;
}
