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
 * that met in a round right after it (the table of combines per round: A_NCOMB, A_COMBS), so
 * the whole reduction is one C call: with MPI_Reduce_local, or for 8- and 16-bit integers and
 * bools with this file's own kernels (reduce_local, below); other operations (numpy ufuncs, user
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
    A_OP, A_TYPE, A_ITEM, A_HIST, A_FUTURE, A_INFLIGHT, A_HOOK, A_NFIRST, A_NLATE, A_TFIRST,
    A_SCRATCH, A_NIMM, A_IMM, A_COMM, A_NPACK, A_PACK, A_NUNPACK, A_UNPACK, A_FIELDS
};
/* F_START: the call's first segment (advance the call number, write the signature);
 * F_CHECK: check the trailers; F_COUNT: count the call; F_WATCH: wait on the alarm line. */
enum { F_START = 1, F_CHECK = 2, F_COUNT = 4, F_WATCH = 8 };

/* Returned when the alarm line brought a message the caller must read (dualmpi/engine/alarm.py). */
#define DUALMPI_ALARM (-2147483647)
/* Returned when the wait beside requests in flight raised (the caller reads the error). */
#define DUALMPI_HOOK (-2147483646)
/* A_HOOK: int wait(MPI_Request *reqs, int n), which waits for one of reqs while advancing the
 * rank's nonblocking requests in flight (dualmpi/engine/inflight.py): the index of the request
 * that completed, -1 when none did, HOOK_FAILED when it raised.  Called instead of MPI_Waitsome
 * while *A_INFLIGHT is not 0 (MPI's progress rule: a rank blocked in a collective still
 * forwards the rounds of the nonblocking ones it started). */
typedef int (*hook_fn)(MPI_Request *, int);
#define HOOK_FAILED (-2)
/* Alarm-line messages: int64 words [kind, call number, sender, ...]; a notice of an agreement
 * for a later call is kept in the ring for the caller (dualmpi/engine/alarm.py: the layout). */
#define MSG_WORDS 24
/* The kind of a nonblocking call's notice, and how many of its own nonblocking call numbers a
 * rank remembers (A_HIST: hist[t % HISTORY] == t when call t was nonblocking here). */
#define KIND_NONBLOCKING 5
#define HISTORY 4096
/* Another rank's nonblocking calls this rank has not reached, noted by call number (A_FUTURE:
 * future[2 * (t % FUTURE)] == t, the sender beside it): not kept in the ring, whose messages a
 * rank any number of calls behind would overflow. */
#define FUTURE 16384

int dualmpi_fields(void) { return A_FIELDS; }
int dualmpi_alarm_code(void) { return DUALMPI_ALARM; }
int dualmpi_hook_code(void) { return DUALMPI_HOOK; }
int dualmpi_future(void) { return FUTURE; }

static void copies(int64_t n, const int64_t *c)
{
    for (int64_t i = 0; i < n; i++, c += 3)
        if (c[2])
            memcpy((void *)(intptr_t)c[0], (const void *)(intptr_t)c[1], (size_t)c[2]);
}

/* dualmpi's own kernels: MPI's predefined operations on 8- and 16-bit integers and bools, with
 * C's arithmetic (sums and products wrap, as MPI defines them and numpy computes them).  The
 * Open MPI 5.0.11 wheel's MPI_Reduce_local saturates 8- and 16-bit sums from 16 elements on
 * (its vector kernels, open-mpi/ompi#8045), so a combine whose datatype handle is 0 runs one
 * of these instead, its op field the kernel's code: 1 + 8 * operation + type, in the orders
 * of K_OPS and K_TYPES (dualmpi/engine/mpi.py: _KERNEL_OPS, _KERNEL_TYPES).  A bool combines
 * as numpy combines bools (SUM, MAX and BOR: or; PROD, MIN and BAND: and; BXOR: xor). */
enum { K_SUM, K_PROD, K_MIN, K_MAX, K_LAND, K_LOR, K_LXOR, K_BAND, K_BOR, K_BXOR, K_NOPS };
enum { K_INT8, K_UINT8, K_INT16, K_UINT16, K_BOOL, K_NTYPES };

int dualmpi_kernel_ops(void) { return K_NOPS; }
int dualmpi_kernel_types(void) { return K_NTYPES; }

/* dst[i] = src[i] op dst[i] for n elements of T (U: its unsigned type, in which sums and
 * products wrap without undefined behaviour). */
#define KERNEL(T, U)                                                                          \
    {                                                                                         \
        const T *x = (const T *)src;                                                          \
        T *y = (T *)dst;                                                                      \
        switch (op) {                                                                         \
        case K_SUM: for (int64_t i = 0; i < n; i++)                                           \
                y[i] = (T)(U)((unsigned)(U)x[i] + (unsigned)(U)y[i]); return 0;               \
        case K_PROD: for (int64_t i = 0; i < n; i++)                                          \
                y[i] = (T)(U)((unsigned)(U)x[i] * (unsigned)(U)y[i]); return 0;               \
        case K_MIN: for (int64_t i = 0; i < n; i++) y[i] = x[i] < y[i] ? x[i] : y[i];         \
            return 0;                                                                         \
        case K_MAX: for (int64_t i = 0; i < n; i++) y[i] = x[i] > y[i] ? x[i] : y[i];         \
            return 0;                                                                         \
        case K_LAND: for (int64_t i = 0; i < n; i++) y[i] = (T)(x[i] && y[i]); return 0;      \
        case K_LOR: for (int64_t i = 0; i < n; i++) y[i] = (T)(x[i] || y[i]); return 0;       \
        case K_LXOR: for (int64_t i = 0; i < n; i++) y[i] = (T)(!x[i] != !y[i]); return 0;    \
        case K_BAND: for (int64_t i = 0; i < n; i++) y[i] = (T)(x[i] & y[i]); return 0;       \
        case K_BOR: for (int64_t i = 0; i < n; i++) y[i] = (T)(x[i] | y[i]); return 0;        \
        case K_BXOR: for (int64_t i = 0; i < n; i++) y[i] = (T)(x[i] ^ y[i]); return 0;       \
        }                                                                                     \
        return MPI_ERR_OP;                                                                    \
    }

static int kernel(int64_t code, const char *src, char *dst, int64_t n)
{
    const int64_t op = (code - 1) / 8, type = (code - 1) % 8;
    if (code < 1 || op >= K_NOPS)
        return MPI_ERR_OP;
    switch (type) {
    case K_INT8: KERNEL(int8_t, uint8_t)
    case K_UINT8: KERNEL(uint8_t, uint8_t)
    case K_INT16: KERNEL(int16_t, uint16_t)
    case K_UINT16: KERNEL(uint16_t, uint16_t)
    case K_BOOL: {
        const unsigned char *x = (const unsigned char *)src;
        unsigned char *y = (unsigned char *)dst;
        switch (op) {
        case K_SUM: case K_MAX: case K_BOR: case K_LOR:
            for (int64_t i = 0; i < n; i++) y[i] = (unsigned char)(x[i] || y[i]);
            return 0;
        case K_PROD: case K_MIN: case K_BAND: case K_LAND:
            for (int64_t i = 0; i < n; i++) y[i] = (unsigned char)(x[i] && y[i]);
            return 0;
        default:  /* K_BXOR, K_LXOR */
            for (int64_t i = 0; i < n; i++) y[i] = (unsigned char)(!x[i] != !y[i]);
            return 0;
        }
    }
    }
    return MPI_ERR_TYPE;
}
#undef KERNEL

/* Combine `length` bytes of elements of `item` bytes: dst = src op dst, with MPI's own op and
 * datatype (handles), or the kernel `op` when `type` is 0 (above). */
static int reduce_local(const char *src, char *dst, int64_t length, int64_t item, int64_t op,
                        int64_t type)
{
    if (type == 0)
        return kernel(op, src, dst, length / item);
    for (int64_t done = 0, left = length / item; left > 0;) {
        int count = left > (1 << 30) ? (1 << 30) : (int)left;
        int err = MPI_Reduce_local(src + done * item, dst + done * item, count,
                                   (MPI_Datatype)(intptr_t)type, (MPI_Op)(intptr_t)op);
        if (err != MPI_SUCCESS)
            return err;
        done += count;
        left -= count;
    }
    return MPI_SUCCESS;
}

/* dualmpi_combine(src, dst, length, item, op, type): reduce_local for tests. */
int dualmpi_combine(const char *src, char *dst, int64_t length, int64_t item, int64_t op,
                    int64_t type)
{
    return reduce_local(src, dst, length, item, op, type);
}

static uint64_t call_signature(uint64_t base, int64_t seq)
{
    return base ^ ((uint64_t)seq * 0x9E3779B97F4A7C15ULL);
}

/* The alarm line delivered a message into wbuf: drop a notice about one of this rank's own
 * nonblocking calls, note another rank's nonblocking notice about a later call (future), keep
 * any other message about a later call in the ring (another rank is ahead: this call's data is
 * not in question), and listen again (0); else the caller must read it (1). */
static int heard(MPI_Request *line, const int64_t *wbuf, int64_t *ring, int64_t seq,
                 const int64_t *hist, int64_t *future)
{
    if (wbuf[0] == KIND_NONBLOCKING && (hist[wbuf[1] % HISTORY] == wbuf[1]
                                        || wbuf[1] <= seq - HISTORY))
        return MPI_Start(line) == MPI_SUCCESS ? 0 : 1;
    if (wbuf[0] == KIND_NONBLOCKING && wbuf[1] > seq) {  /* noted for that call */
        int64_t *note = future + 2 * (wbuf[1] % FUTURE);
        note[0] = wbuf[1];
        note[1] = wbuf[2];
        return MPI_Start(line) == MPI_SUCCESS ? 0 : 1;
    }
    if (wbuf[1] > seq && ring[0] < ring[1]) {
        memcpy(ring + 2 + ring[0] * MSG_WORDS, wbuf, MSG_WORDS * sizeof(int64_t));
        ring[0] += 1;
        return MPI_Start(line) == MPI_SUCCESS ? 0 : 1;
    }
    return 1;
}

/* True when the alarm line brought, before call seq started, a notice about it or an earlier
 * call (kept in the ring) or another rank's nonblocking notice for it (future). */
static int reached(const int64_t *ring, const int64_t *future, int64_t seq)
{
    for (int64_t i = 0; i < ring[0]; i++)
        if (ring[2 + i * MSG_WORDS + 1] <= seq)
            return 1;
    return future[2 * (seq % FUTURE)] == seq;
}

/* Wait for n requests, done of which have completed already (inactive: MPI_Waitsome does not
 * report them), and with watch for the alarm line at reqs[n] too (its message read by heard():
 * DUALMPI_ALARM when the caller must read it), beside the requests in flight when hook and
 * *inflight; MPI_SUCCESS, an MPI error code or DUALMPI_HOOK. */
static int wait_round(MPI_Request *reqs, int n, int done, int watch, hook_fn hook,
                      const volatile int64_t *inflight, int *index, const int64_t *wbuf,
                      int64_t *ring, int64_t seq, const int64_t *hist, int64_t *future)
{
    int err;

    if (!n)
        return MPI_SUCCESS;
    if (!watch && !(hook && *inflight))
        return MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    const int m = n + (watch ? 1 : 0);
    int left = n - done, out;
    while (left > 0) {
        if (hook && *inflight) {  /* other requests in flight: they move too */
            int j = hook(reqs, m);
            if (j == HOOK_FAILED)
                return DUALMPI_HOOK;
            if (j < 0)
                continue;
            out = 1;
            index[0] = j;
        } else {
            err = MPI_Waitsome(m, reqs, &out, index, MPI_STATUSES_IGNORE);
            if (err != MPI_SUCCESS || out == MPI_UNDEFINED)
                return err != MPI_SUCCESS ? err : MPI_ERR_REQUEST;
        }
        for (int j = 0; j < out; j++) {
            if (index[j] != n)
                left -= 1;
            else if (heard(reqs + n, wbuf, ring, seq, hist, future))
                return DUALMPI_ALARM;
        }
    }
    return MPI_SUCCESS;
}

/* Run rounds a[A_NROUNDS] of a plan (a segment of it: the arrays start at its first round).
 *
 * A round may hold messages whose payload travels apart from its trailer (dualmpi/engine/mpi.py:
 * APART): its request array starts with their trailers' receives (A_NFIRST per round) and ends
 * with their payloads' receives (A_NLATE), which are started only once those trailers are in
 * and carry the call's signature (A_TFIRST: their places among the round's trailers), so a
 * payload is received only from a rank in the same call: its length is the one expected (a
 * longer message cut short by MPI may be written past the receive buffer: Open MPI 5.0 does
 * so for contiguous receives above its eager limit).
 *
 * A round's small sends (dualmpi/engine/mpi.py: IMMEDIATE) are made with MPI_Isend instead of
 * MPI_Start: A_NIMM per round, the last of its requests before the late receives, their rows
 * [address, count, datatype, peer, tag] at A_IMM, on the communicator A_COMM (their slots in
 * the request array are MPI_REQUEST_NULL between calls: MPI frees such a request when it
 * completes).  Open MPI sends a message that small from MPI_Isend straight into the receiver's
 * queue, which a persistent request's start does not (half the time of a small exchange).
 *
 * A small message whose segments are not one run of memory travels packed
 * (dualmpi/engine/mpi.py: PACK_SMALL): A_NPACK copies per round [destination, source, length]
 * at addresses (A_PACK) put a send's segments into the slot its MPI_Isend sends, before the
 * round's sends are made; A_NUNPACK copies (A_UNPACK) take each such receive's slot to its
 * segments and trailer once the round's messages are in, before the trailers are read (Open
 * MPI sends a small contiguous message straight into the receiver's queue, a derived datatype
 * through its convertor).
 *
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
    int64_t *future = (int64_t *)(intptr_t)a[A_FUTURE];
    int *index = (int *)(intptr_t)a[A_INDEX];
    const int *ncomb = (const int *)(intptr_t)a[A_NCOMB];
    const int64_t *combs = (const int64_t *)(intptr_t)a[A_COMBS];
    const int64_t item = a[A_ITEM];
    const volatile int64_t *inflight = (const volatile int64_t *)(intptr_t)a[A_INFLIGHT];
    const hook_fn hook = (hook_fn)(intptr_t)a[A_HOOK];
    const int *nfirst = (const int *)(intptr_t)a[A_NFIRST];
    const int *nlate = (const int *)(intptr_t)a[A_NLATE];
    const int *tfirst = (const int *)(intptr_t)a[A_TFIRST];
    MPI_Request *scratch = (MPI_Request *)(intptr_t)a[A_SCRATCH];
    const int *nimm = (const int *)(intptr_t)a[A_NIMM];
    const int64_t *imm = (const int64_t *)(intptr_t)a[A_IMM];
    const MPI_Comm comm = (MPI_Comm)(intptr_t)a[A_COMM];
    const int *npack = (const int *)(intptr_t)a[A_NPACK];
    const int64_t *pack = (const int64_t *)(intptr_t)a[A_PACK];
    const int *nunpack = (const int *)(intptr_t)a[A_NUNPACK];
    const int64_t *unpack = (const int64_t *)(intptr_t)a[A_UNPACK];
    int64_t seq;
    uint64_t sig;
    int64_t t = 0;

    if (flags & F_START) {
        seq = ++*seqp;
        sig = call_signature((uint64_t)a[A_SIGNATURE], seq);
        *(uint64_t *)(intptr_t)a[A_SIGWORD] = sig;
        if ((flags & F_WATCH) && reached(ring, future, seq))
            return DUALMPI_ALARM;
    } else {
        seq = *seqp;
        sig = call_signature((uint64_t)a[A_SIGNATURE], seq);
    }
    copies(a[A_NPRE], (const int64_t *)(intptr_t)a[A_PRE]);
    progress[1] += 1;
    const int watch = (flags & F_WATCH) != 0;
    for (int k = 0; k < nrounds; k++) {
        const int n = nreq[k], late = nlate ? nlate[k] : 0, first = late ? nfirst[k] : 0;
        const int ni = nimm ? nimm[k] : 0;
        if (n - late - ni) {
            err = MPI_Startall(n - late - ni, reqs);
            if (err != MPI_SUCCESS) { progress[0] = 0; return err; }
        }
        if (npack)  /* the small sends' segments into their slots */
            for (int i = 0; i < npack[k]; i++, pack += 3)
                memcpy((void *)(intptr_t)pack[0], (const void *)(intptr_t)pack[1],
                       (size_t)pack[2]);
        for (int i = 0; i < ni; i++, imm += 5) {
            err = MPI_Isend(imm[0] ? (void *)(intptr_t)imm[0] : MPI_BOTTOM, (int)imm[1],
                            (MPI_Datatype)(intptr_t)imm[2], (int)imm[3], (int)imm[4], comm,
                            reqs + n - late - ni + i);
            if (err != MPI_SUCCESS) { progress[0] = 0; return err; }
        }
        if (k == 0)
            copies(a[A_NMID], (const int64_t *)(intptr_t)a[A_MID]);
        for (int i = 0; i < nmove[k]; i++, moves += 3)
            memcpy(store + moves[0], store + moves[1], (size_t)moves[2]);
        progress[0] = base + k + 1;
        if (late) {  /* the trailers of the payloads sent apart first, then their receives */
            memcpy(scratch, reqs, (size_t)first * sizeof(MPI_Request));
            scratch[first] = reqs[n];  /* (persistent requests: the handles stay theirs) */
            err = wait_round(scratch, first, 0, watch, hook, inflight, index, wbuf, ring, seq,
                             hist, future);
            if (err != MPI_SUCCESS) { progress[0] = 0; return err; }
            for (int i = 0; (flags & F_CHECK) && i < first; i++)
                if (trail[t + tfirst[i]] != sig) {
                    progress[0] = 0;
                    return (int)-(a[A_TBASE] + t + tfirst[i] + 1);
                }
            tfirst += first;
            err = MPI_Startall(late, reqs + n - late);
            if (err != MPI_SUCCESS) { progress[0] = 0; return err; }
        }
        err = wait_round(reqs, n, first, watch, hook, inflight, index, wbuf, ring, seq, hist,
                         future);
        if (err != MPI_SUCCESS) { progress[0] = 0; return err; }
        if (nunpack)  /* the small receives' slots to their segments and trailers */
            for (int i = 0; i < nunpack[k]; i++, unpack += 3)
                memcpy((void *)(intptr_t)unpack[0], (const void *)(intptr_t)unpack[1],
                       (size_t)unpack[2]);
        if (flags & F_CHECK)
            for (int i = 0; i < nrecv[k]; i++, t++)
                if (trail[t] != sig) {
                    progress[0] = 0;
                    return (int)-(a[A_TBASE] + t + 1);
                }
        if (ncomb)  /* a reduction: the blocks that met this round, combined by MPI's own op */
            for (int i = 0; i < ncomb[k]; i++, combs += 3) {
                err = reduce_local(store + combs[0], store + combs[1], combs[2], item, a[A_OP],
                                   a[A_TYPE]);
                if (err != MPI_SUCCESS) { progress[0] = 0; return err; }
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

/* A nonblocking collective's rounds, advanced without blocking (dualmpi/engine/nonblocking.py).
 *
 * The plan (p, built once per bound plan and Progress: the _P_ constants there) holds per
 * round a row [messages, receives, first message, moves, first move, combines, first
 * combine, trailers, first trailer]; the messages [peer, offset, length, datatype, send]
 * (datatype 0: `length` bytes at `offset`, else one of that datatype from the store's
 * start); the moves [dst, src, length], the combines [src, dst, length] and the trailers
 * [offset, peer], all relative to a run's store; the communicator and MPI_BYTE.  A run (s:
 * the _S_ constants) has its round k (-1 before the first, nrounds once done), its store, tag
 * and request array, its call's signature, where a trailer first differed from it (round,
 * peer), and its combine's MPI_Op, datatype and item size (MPI's own operation on a
 * predefined type; datatype 0: the op field is one of this file's kernels).
 *
 * dualmpi_istep tests round k's requests (MPI_Testall); when they are all done it checks the
 * round's trailers, combines its blocks (reduce_local), posts round k + 1 (MPI_Irecv and
 * MPI_Isend with the run's tag) and does its local moves while its messages fly, and so on
 * until a round is still in flight or the plan is done.  Returns MPI_SUCCESS or an MPI error
 * code (a failed message's own code when the test reported MPI_ERR_IN_STATUS).
 *
 * A run started in C (dualmpi_istart, below) also carries rank 0's *mode* messages: s[S_NMODE]
 * requests from s[S_MODE_AT] on in the request array (after the round's messages and the spare
 * slot of the alarm line).  On rank 0 they are its sends of [1, t, vector] to every other rank,
 * done with the last round, every MODE_SYNC-th request's synchronous (so rank 0 is never more than
 * MODE_SYNC calls ahead of a rank beyond the requests the program holds); on another rank the
 * receive of rank 0's mode into s[S_MODE], compared while s[S_MODE_DUE] says so: MODE_EARLY,
 * before round 0's messages are read (round 0 is posted first: its messages leave while the
 * mode comes, which is on the critical path of every rank that sends in round 0 otherwise);
 * MODE_FIRST, before round 0 is posted (a round 0 that sends a payload apart from its trailer:
 * such a send completes only when its receive is posted, which a failed agreement never does).
 * A mode that says "skip" with this rank's own vector (s[S_VEC], s[S_NVEC] words) lets the
 * rounds go on; anything else sets MODE_HEARD and returns DUALMPI_MODE, every time, until
 * Python has read the mode (dualmpi/engine/nonblocking.py: the agreement after all, then the
 * rounds from where they are, or the alarm) and cleared S_MODE_DUE.  Such a run also copies the result out
 * when its last round is done and every trailer carried the call's signature: s[S_NCOUT]
 * copies [destination address, store offset, length] from s[S_COUT]; and, right after it
 * posts round 0, s[S_NMID] copies [destination, source, length] at absolute addresses from
 * s[S_MID] (a rank's own block, which no message touches: made while round 0's messages fly,
 * as the blocking loop's mid copies), S_NMID then 0.
 *
 * A round may hold messages whose payload travels apart from its trailer (as the blocking
 * loop's: dualmpi/engine/mpi.py, APART): the sender's message rows of kind M_SEND_APART go
 * with the run's tag plus p[P_APART]; the receiver's first R_NFIRST receives are those
 * payloads' trailers alone (into the trailer and a spare block apart from it), and the
 * payloads' receives (R_NLATE rows from R_LATE, after the round's requests) are posted only
 * once those trailers are in and checked (s[S_LATE] set until then): with the contiguous
 * receive when the trailer carries the call's signature, else with the row's safe datatype
 * (the payload and a spare block apart), so a longer message of another call is cut short
 * there, never written past a buffer (Open MPI 5.0 writes past a contiguous receive).
 *
 * A copying plan's small messages whose segments are not one run travel packed, as the
 * blocking loop's (dualmpi/engine/mpi.py: PACK_SMALL): R_NPACK copies [dst, src, length] (store
 * offsets, from R_PACK in the table at P_PACKS) put a round's small sends' segments into the
 * slots they leave from, just before the round is posted; R_NUNPACK copies (P_UNPACKS) take its
 * small receives' slots to their segments and trailers once its messages are in, before the
 * trailers are read. */
enum { P_NROUNDS, P_ROUNDS, P_MSGS, P_MOVES, P_COMBS, P_TRAILS, P_COMM, P_BYTE, P_APART,
       P_PACKS, P_UNPACKS, P_FIELDS };
enum { S_K, S_STORE, S_TAG, S_REQS, S_SIGNATURE, S_BAD_ROUND, S_BAD_PEER, S_OP, S_TYPE, S_ITEM,
       S_POS, S_RUN, S_NMODE, S_MODE_AT, S_MODE, S_VEC, S_NVEC, S_NCOUT, S_COUT, S_LATE,
       S_NMID, S_MID, S_MODE_DUE, S_CALL, S_OWED, S_X, S_FIELDS };
enum { W_WBUF, W_RING, W_SEQ, W_HIST, W_LINE, W_FUTURE, W_FIELDS };
/* A start's fields (dualmpi_istart, below), one per Progress: the rank and size, the alarm
 * line's communicator, the modes' communicator (a duplicate of the control one), the line's and
 * the modes' int64 datatypes, the pool of notice requests and their messages, the starts with
 * notices made, the early mode (x[X_EARLY]), the notices sent, the notices owed (runs of another
 * rank than 0 whose notice waits for their first step: istep), whether the others probe for
 * rank 0's modes (rank 0 then sends no notice) and the modes' tag bound (a mode's tag is its
 * call number modulo that). */
enum { X_RANK, X_SIZE, X_ACOMM, X_CTL, X_I64, X_LONG, X_NOTES, X_NOTE_REQS, X_NOTE_BUF, X_STARTS,
       X_EARLY, X_SENT, X_OWED, X_PROBED, X_MODE_TAGS, X_FIELDS };
#define ALARM_TAG 9

/* Send the nonblocking notice of call t ([NONBLOCKING, t, rank, 0...]) to ranks first..last - 1
 * from free requests of the pool (dualmpi_istart checked there are enough); x[X_SENT] counts
 * them. */
static int send_notices(int64_t *x, int64_t t, int first, int last)
{
    const MPI_Datatype i64 = (MPI_Datatype)(intptr_t)x[X_I64];
    const MPI_Comm acomm = (MPI_Comm)(intptr_t)x[X_ACOMM];
    MPI_Request *notes = (MPI_Request *)(intptr_t)x[X_NOTE_REQS];
    int64_t *nbuf = (int64_t *)(intptr_t)x[X_NOTE_BUF];
    for (int dest = first, i = 0; dest < last; dest++) {
        while (i < x[X_NOTES] && notes[i] != MPI_REQUEST_NULL)
            i++;
        if (i == x[X_NOTES])  /* (dualmpi_istart keeps a free request for every notice owed) */
            return MPI_ERR_INTERN;
        int64_t *msg = nbuf + i * MSG_WORDS;
        memset(msg, 0, MSG_WORDS * sizeof(int64_t));
        msg[0] = KIND_NONBLOCKING;
        msg[1] = t;
        msg[2] = x[X_RANK];
        int err = MPI_Isend(msg, MSG_WORDS, i64, dest, ALARM_TAG, acomm, notes + i);
        if (err != MPI_SUCCESS)
            return err;
        x[X_SENT] += 1;
    }
    return MPI_SUCCESS;
}

enum { R_NMSG, R_NRECV, R_MSG, R_NMOVE, R_MOVE, R_NCOMB, R_COMB, R_NTRAIL, R_TRAIL, R_NFIRST,
       R_NLATE, R_LATE, R_NPACK, R_PACK, R_NUNPACK, R_UNPACK, R_FIELDS };
/* A message row: [peer, offset, length, datatype, kind, safe datatype] (MSG_FIELDS words). */
enum { M_RECV, M_SEND, M_SEND_APART, M_RECV_APART };
#define MSG_FIELDS 6
#define STEP_STATUSES 64
/* s[S_MODE_DUE]: rank 0's mode to compare before round 0's messages are read, before round 0
 * is posted, or heard (not "skip" with this rank's vector) and not yet read by Python. */
enum { MODE_NONE, MODE_EARLY, MODE_FIRST, MODE_HEARD };
/* Returned when rank 0's mode is not "skip" with this rank's vector (Python reads it). */
#define DUALMPI_MODE (-2147483645)

int dualmpi_step_fields(void)
{
    return MSG_FIELDS * 1000000 + W_FIELDS * 10000 + P_FIELDS * 1000 + S_FIELDS * 10 + R_FIELDS;
}

/* Post message row m with the run's tag (plus the payloads' offset for those apart); safe:
 * the row's safe datatype in place of its contiguous receive. */
static int post(const int64_t *m, char *store, int tag, int apart, MPI_Comm comm,
                MPI_Datatype byte, int safe, MPI_Request *req)
{
    MPI_Datatype type = safe ? (MPI_Datatype)(intptr_t)m[5]
                             : m[3] ? (MPI_Datatype)(intptr_t)m[3] : byte;
    void *buf = safe || m[3] ? (void *)store : (void *)(store + m[1]);
    int count = safe || m[3] ? 1 : (int)m[2];
    if (m[4] == M_SEND_APART || m[4] == M_RECV_APART)
        tag += apart;
    return m[4] == M_SEND || m[4] == M_SEND_APART
        ? MPI_Isend(buf, count, type, (int)m[0], tag, comm, req)
        : MPI_Irecv(buf, count, type, (int)m[0], tag, comm, req);
}
int dualmpi_mode_code(void) { return DUALMPI_MODE; }

/* dualmpi_istep; with post_only (the start's: dualmpi_istart) it returns where it would first
 * test a message (rank 0's mode, a round posted): a test right after the post finds nothing
 * as often as not, and one that finds nothing costs a round of MPI's progress (a sched_yield
 * under mpi_yield_when_idle); the caller's next step or wait tests it. */
static int istep(const int64_t *p, int64_t *s, int post_only)
{
    const int64_t nrounds = p[P_NROUNDS];
    const int64_t *rows = (const int64_t *)(intptr_t)p[P_ROUNDS];
    const int64_t *msgs = (const int64_t *)(intptr_t)p[P_MSGS];
    const int64_t *moves = (const int64_t *)(intptr_t)p[P_MOVES];
    const int64_t *combs = (const int64_t *)(intptr_t)p[P_COMBS];
    const int64_t *trails = (const int64_t *)(intptr_t)p[P_TRAILS];
    const int64_t *packs = (const int64_t *)(intptr_t)p[P_PACKS];
    const int64_t *unpacks = (const int64_t *)(intptr_t)p[P_UNPACKS];
    const MPI_Comm comm = (MPI_Comm)(intptr_t)p[P_COMM];
    const MPI_Datatype byte = (MPI_Datatype)(intptr_t)p[P_BYTE];
    char *store = (char *)(intptr_t)s[S_STORE];
    MPI_Request *reqs = (MPI_Request *)(intptr_t)s[S_REQS];
    const int tag = (int)s[S_TAG], apart = (int)p[P_APART];
    int err, flag;

    for (int64_t k = s[S_K]; k < nrounds; k = s[S_K]) {
        const int64_t due = s[S_MODE_DUE];
        if (due == MODE_HEARD)
            return DUALMPI_MODE;
        if (due && (k >= 0 || due == MODE_FIRST || nrounds == 0)) {
            /* rank 0's mode: "skip", with this rank's vector? */
            const int64_t *mode = (const int64_t *)(intptr_t)s[S_MODE];
            if (post_only)
                return MPI_SUCCESS;
            err = MPI_Test(reqs + s[S_MODE_AT], &flag, MPI_STATUS_IGNORE);
            if (err != MPI_SUCCESS)
                return err;
            if (s[S_OWED]) {  /* this rank's nonblocking notice: sent now, or not needed */
                int64_t *x = (int64_t *)(intptr_t)s[S_X];
                s[S_OWED] = 0;
                x[X_OWED] -= 1;
                if (!flag && (err = send_notices(x, s[S_CALL], 0, 1)) != MPI_SUCCESS)
                    return err;
            }
            if (!flag)
                return MPI_SUCCESS;
            if (mode[0] != 1 || mode[1] != s[S_CALL] ||
                    memcmp(mode + 2, (const void *)(intptr_t)s[S_VEC],
                           (size_t)s[S_NVEC] * sizeof(int64_t))) {
                s[S_MODE_DUE] = MODE_HEARD;
                return DUALMPI_MODE;
            }
            s[S_MODE_DUE] = MODE_NONE;
        }
        if (k >= 0) {  /* round k is posted: are its messages done? */
            const int64_t *row = rows + k * R_FIELDS;
            if (post_only)
                return MPI_SUCCESS;
            int n = (int)row[R_NMSG];
            if (s[S_LATE]) {  /* the trailers of the payloads apart first, then their receives */
                const int first = (int)row[R_NFIRST], late = (int)row[R_NLATE];
                err = MPI_Testall(first, reqs, &flag, MPI_STATUSES_IGNORE);
                if (err != MPI_SUCCESS)
                    return err;
                if (!flag)
                    return MPI_SUCCESS;
                for (int i = 0; i < late; i++) {
                    const int64_t *tr = trails + (row[R_TRAIL] + i) * 2;
                    uint64_t got;
                    memcpy(&got, store + tr[0], sizeof got);
                    const int safe = got != (uint64_t)s[S_SIGNATURE];
                    err = post(msgs + (row[R_LATE] + i) * MSG_FIELDS, store, tag, apart, comm,
                               byte, safe, reqs + n + i);
                    if (err != MPI_SUCCESS) {
                        for (int j = i; j < late; j++)
                            reqs[n + j] = MPI_REQUEST_NULL;
                        return err;
                    }
                }
                s[S_LATE] = 0;
            }
            n += (int)row[R_NLATE];
            if (n) {
                MPI_Status st[STEP_STATUSES];
                err = MPI_Testall(n, reqs, &flag, n <= STEP_STATUSES ? st : MPI_STATUSES_IGNORE);
                if (err == MPI_ERR_IN_STATUS && n <= STEP_STATUSES)
                    for (int i = 0; i < n; i++)
                        if (st[i].MPI_ERROR != MPI_SUCCESS && st[i].MPI_ERROR != MPI_ERR_PENDING)
                            return st[i].MPI_ERROR;
                if (err != MPI_SUCCESS)
                    return err;
                if (!flag)
                    return MPI_SUCCESS;
            }
            if (k == nrounds - 1 && s[S_NMODE]) {  /* rank 0's mode messages end with it */
                err = MPI_Testall((int)s[S_NMODE], reqs + s[S_MODE_AT], &flag,
                                  MPI_STATUSES_IGNORE);
                if (err != MPI_SUCCESS)
                    return err;
                if (!flag)
                    return MPI_SUCCESS;
            }
            for (int64_t i = 0; i < row[R_NUNPACK]; i++) {  /* (small receives, out) */
                const int64_t *c = unpacks + (row[R_UNPACK] + i) * 3;
                memcpy(store + c[0], store + c[1], (size_t)c[2]);
            }
            for (int64_t i = 0; i < row[R_NTRAIL]; i++) {
                const int64_t *tr = trails + (row[R_TRAIL] + i) * 2;
                uint64_t got;
                memcpy(&got, store + tr[0], sizeof got);
                if (got != (uint64_t)s[S_SIGNATURE] && s[S_BAD_ROUND] < 0) {
                    s[S_BAD_ROUND] = k;
                    s[S_BAD_PEER] = tr[1];
                }
            }
            for (int64_t i = 0; i < row[R_NCOMB]; i++) {
                const int64_t *c = combs + (row[R_COMB] + i) * 3;
                err = reduce_local(store + c[0], store + c[1], c[2], s[S_ITEM], s[S_OP],
                                   s[S_TYPE]);
                if (err != MPI_SUCCESS)
                    return err;
            }
        }
        s[S_K] = ++k;
        if (k == nrounds) {
            if (s[S_BAD_ROUND] < 0) {
                const int64_t *c = (const int64_t *)(intptr_t)s[S_COUT];
                for (int64_t i = 0; i < s[S_NCOUT]; i++, c += 3)
                    memcpy((void *)(intptr_t)c[0], store + c[1], (size_t)c[2]);
            }
            break;
        }
        {  /* post round k (its small sends packed first), then its moves */
            const int64_t *row = rows + k * R_FIELDS;
            for (int64_t i = 0; i < row[R_NPACK]; i++) {
                const int64_t *c = packs + (row[R_PACK] + i) * 3;
                memcpy(store + c[0], store + c[1], (size_t)c[2]);
            }
            for (int64_t i = 0; i < row[R_NMSG]; i++) {
                err = post(msgs + (row[R_MSG] + i) * MSG_FIELDS, store, tag, apart, comm, byte,
                           0, reqs + i);
                if (err != MPI_SUCCESS) {
                    for (int64_t j = i; j < row[R_NMSG]; j++)
                        reqs[j] = MPI_REQUEST_NULL;
                    return err;
                }
            }
            s[S_LATE] = row[R_NLATE] > 0;
            for (int64_t i = 0; i < row[R_NMOVE]; i++) {
                const int64_t *mv = moves + (row[R_MOVE] + i) * 3;
                memmove(store + mv[0], store + mv[1], (size_t)mv[2]);
            }
            if (s[S_NMID]) {  /* (round 0: the copies that touch no message's bytes) */
                const int64_t *c = (const int64_t *)(intptr_t)s[S_MID];
                for (int64_t i = 0; i < s[S_NMID]; i++, c += 3)
                    memcpy((void *)(intptr_t)c[0], (const void *)(intptr_t)c[1], (size_t)c[2]);
                s[S_NMID] = 0;
            }
        }
    }
    return MPI_SUCCESS;
}

int dualmpi_istep(const int64_t *p, int64_t *s)
{
    return istep(p, s, 0);
}

/* Wait for a nonblocking collective's rounds in C: dualmpi_istep, and while a round is in flight
 * MPI_Waitany on its requests and the communicator's alarm line (w: the _W_ constants of
 * dualmpi/engine/nonblocking.py; the line's handle is copied after the round's requests, so the
 * run's request array has a spare slot), until the plan is done.  What the line brings is
 * handled as the compiled loop handles it (heard): a notice about one of this rank's own
 * nonblocking calls is dropped, a message about a later call kept in the ring; anything else
 * returns DUALMPI_ALARM for the caller to read.  s[S_POS] is the 1-based position of the round
 * waited in (0 outside; nrounds + 1 while rank 0's mode is due), which the watchdog reads with s[S_RUN]
 * (the request's number).  Only for a request that is the only one in flight on the rank: the
 * others would not advance.  Called with s[S_POS] == -1 (by a caller that stepped the run just
 * now: recall.c's IRestart.close) it waits before its first step, whose test would find nothing
 * new (and cost a round of MPI's progress). */
int dualmpi_iwait(const int64_t *p, int64_t *s, const int64_t *w)
{
    const int64_t nrounds = p[P_NROUNDS];
    const int64_t *rows = (const int64_t *)(intptr_t)p[P_ROUNDS];
    MPI_Request *reqs = (MPI_Request *)(intptr_t)s[S_REQS];
    const int watch = w[W_LINE] != 0;
    int err = MPI_SUCCESS, index, waitfirst = s[S_POS] < 0 && s[S_K] < nrounds;

    for (;;) {
        if (!waitfirst) {
            err = dualmpi_istep(p, s);
            if (err != MPI_SUCCESS || s[S_K] >= nrounds)
                break;
        }
        waitfirst = 0;
        const int64_t k = s[S_K];
        int n = k >= 0 ? (int)(rows[k * R_FIELDS + R_NMSG] + rows[k * R_FIELDS + R_NLATE]) : 0;
        if (watch)
            reqs[n] = (MPI_Request)(intptr_t)w[W_LINE];
        /* (the mode messages after the spare slot: the wait covers them, the nulls between) */
        int count = s[S_NMODE] ? (int)(s[S_MODE_AT] + s[S_NMODE]) : n + watch;
        /* (past the rounds: rank 0's mode, waited for with round 0's messages or before them) */
        s[S_POS] = k >= 0 && !s[S_MODE_DUE] ? k + 1 : nrounds + 1;
        err = MPI_Waitany(count, reqs, &index, MPI_STATUS_IGNORE);
        if (err == MPI_SUCCESS && watch && index == n &&
                heard(reqs + n, (const int64_t *)(intptr_t)w[W_WBUF],
                      (int64_t *)(intptr_t)w[W_RING], *(const int64_t *)(intptr_t)w[W_SEQ],
                      (const int64_t *)(intptr_t)w[W_HIST], (int64_t *)(intptr_t)w[W_FUTURE]))
            err = DUALMPI_ALARM;
        if (watch)  /* the line is the alarm's (dualmpi/engine/alarm.py), not the run's */
            reqs[n] = MPI_REQUEST_NULL;
        if (err != MPI_SUCCESS)
            break;
    }
    s[S_POS] = 0;
    return err;
}

/* The start of a repeated nonblocking collective in one C call (dualmpi/engine/nonblocking.py:
 * Progress.restart): what Alarm.nonblocking and Progress.start and _open do for a call whose
 * arguments rank 0 has seen agreed, with the same messages, so that ranks on either path match.
 *
 * x (the _X_ constants, one per Progress): the rank and size, the alarm line's communicator, the
 * control communicator's duplicate the modes go on, MPI_INT64_T (the line's messages) and the
 * datatype mpi4py gives an int64 array (the modes'), a pool of x[X_NOTES] requests and
 * message buffers for the nonblocking notices, the count of starts with notices made
 * (x[X_STARTS], written here), whether the other ranks probe for rank 0's modes (X_PROBED: rank
 * 0 sends no notice) and the modes' tag bound (X_MODE_TAGS).  m (the _M_ constants, one per
 * remembered call):
 * the call's argument vector, its copies in [store offset, source address, length] and out
 * [destination address, store offset, length] (dualmpi_istep makes them at the end), those
 * made once round 0 is posted [destination, source, length] (the run's S_MID), its
 * signature and where the store holds it (-1: no trailer), the store's size, and its combine's
 * MPI_Op, datatype and item size.  seq is the request's number, tag its messages' tag.
 *
 * In order: the line is drained as Alarm.drain does (a message Python must read returns
 * DUALMPI_ALARM, with nothing else done) at every LINE_EVERY-th start; messages kept about later
 * calls, or too few free notice requests, return DUALMPI_PYTHON, nothing done; then the call
 * number is taken (w[W_SEQ] + 1, noted in the history, its note in future cleared), rank 0's
 * notices are sent (to every rank: [NONBLOCKING, t, rank, 0...]; none when x[X_PROBED]: the
 * others probe for its mode, nonblocking.py's Progress._probe), the run is set up (signature,
 * the call number t mixed in, trailers cleared, copies in, combine), and the modes posted: rank
 * 0 sends every rank [1, t, vector] on the modes' own communicator (x[X_CTL]) with the tag t %
 * x[X_MODE_TAGS] (MPI_Isend, MPI_Issend when seq % MODE_SYNC == 0; done with the last round),
 * another rank receives rank 0's with any tag (modes are received in request order; compared,
 * call number and vector, before round 0's messages are read,
 * or with x[X_EARLY] 0 or a payload apart sent in round 0 before round 0 is posted:
 * dualmpi_istep), its notice to rank 0 owed (x[X_OWED] more: a start keeps a free request of
 * the pool for each) until the run's first step: sent then if rank 0's mode is not in, else not
 * needed (rank 0 sends a mode only from a nonblocking call).  x[X_SENT] counts the notices
 * sent.
 * Then the run is stepped up to its first test (istep's post_only: round 0 posted unless the
 * mode comes first),
 * which the next step or wait makes. Returns what that step returns. With m[M_PLAIN] the start is
 * that of a request without an agreement (Progress.start with no vector: a v-variant's data): no
 * line drained, no call number, notices nor mode; the run is set up and stepped. */
enum { M_VEC, M_NVEC, M_CIN, M_NCIN, M_COUT, M_NCOUT, M_SIG, M_SIGAT, M_SIZE, M_OP, M_TYPE,
       M_ITEM, M_PLAIN, M_MID, M_NMID, M_FIELDS };
#define DUALMPI_PYTHON (-2147483644)
/* Rank 0 sends the mode of every MODE_SYNC-th request (seq % MODE_SYNC == 0) synchronously:
 * that request ends only once every rank has started it, so rank 0 is never more than
 * MODE_SYNC calls ahead of a rank beyond the requests the program holds (nonblocking.py). */
#define MODE_SYNC 64
/* A start drains the line at every LINE_EVERY-th start with notices only (x[X_STARTS] counts
 * them): a test of the line that finds nothing costs a round of MPI's progress (a sched_yield
 * with mpi_yield_when_idle), more than the call's own messages; a wait has the line among its
 * requests (dualmpi_iwait), and a line message arrives later than a start's test as often as
 * not anyway.  (Counted per start, not by call number: a program's other calls may take every
 * number a multiple of LINE_EVERY, and the line's messages would pile up in MPI.) */
#define LINE_EVERY 16

int dualmpi_mode_sync(void) { return MODE_SYNC; }

int dualmpi_start_fields(void) { return X_FIELDS * 100 + M_FIELDS; }
int dualmpi_python_code(void) { return DUALMPI_PYTHON; }

int dualmpi_istart(const int64_t *p, int64_t *s, const int64_t *w, int64_t *x,
                   const int64_t *m, int64_t seq, int64_t tag)
{
    const int rank = (int)x[X_RANK], size = (int)x[X_SIZE];
    int64_t *seqp = (int64_t *)(intptr_t)w[W_SEQ];
    MPI_Request *notes = (MPI_Request *)(intptr_t)x[X_NOTE_REQS];
    const int talk = size > 1 && !m[M_PLAIN];  /* (a plain start: no line, notices nor mode) */
    int err, flag;

    if (talk) {
        int64_t *ring = (int64_t *)(intptr_t)w[W_RING];
        const int64_t *wbuf = (const int64_t *)(intptr_t)w[W_WBUF];
        const int64_t *hist = (const int64_t *)(intptr_t)w[W_HIST];
        int64_t *future = (int64_t *)(intptr_t)w[W_FUTURE];
        MPI_Request line = (MPI_Request)(intptr_t)w[W_LINE];  /* (persistent: the same handle) */
        if (ring[0])
            return DUALMPI_PYTHON;
        for (int drain = x[X_STARTS] % LINE_EVERY == 0; drain;) {
            err = MPI_Test(&line, &flag, MPI_STATUS_IGNORE);
            if (err != MPI_SUCCESS)
                return DUALMPI_PYTHON;  /* (Python's test raises it) */
            if (!flag)
                break;
            if (heard(&line, wbuf, ring, *seqp, hist, future))
                return DUALMPI_ALARM;
        }
        if (ring[0])
            return DUALMPI_PYTHON;
        /* (another rank: one for this start's notice and one for each notice still owed;
         * rank 0 none when the others probe for its modes) */
        int need = rank == 0 ? (x[X_PROBED] ? 0 : size - 1) : (int)(1 + x[X_OWED]), free = 0;
        for (int64_t i = 0; i < x[X_NOTES] && free < need; i++) {
            if (notes[i] != MPI_REQUEST_NULL) {
                err = MPI_Test(notes + i, &flag, MPI_STATUS_IGNORE);
                if (err != MPI_SUCCESS)
                    return DUALMPI_PYTHON;  /* (nothing done yet: the start is Python's) */
                if (!flag)
                    continue;
            }
            free++;
        }
        if (free < need)
            return DUALMPI_PYTHON;
        x[X_STARTS] += 1;  /* (a start that goes ahead: the next LINE_EVERY - 1 skip the drain) */
    }
    const int64_t t = *seqp + 1;
    if (!m[M_PLAIN])  /* (the call number: a plain start's call took it) */
        *seqp = t;
    if (talk) {
        int64_t *hist = (int64_t *)(intptr_t)w[W_HIST], *future = (int64_t *)(intptr_t)w[W_FUTURE];
        hist[t % HISTORY] = t;
        if (future[2 * (t % FUTURE)] == t)
            future[2 * (t % FUTURE)] = -1;
        if (rank == 0 && !x[X_PROBED] && (err = send_notices(x, t, 1, size)) != MPI_SUCCESS)
            return err;
    }
    char *store = (char *)(intptr_t)s[S_STORE];
    MPI_Request *reqs = (MPI_Request *)(intptr_t)s[S_REQS];
    s[S_K] = -1;
    s[S_MODE_DUE] = MODE_NONE;
    s[S_BAD_ROUND] = -1;
    s[S_LATE] = 0;
    s[S_TAG] = tag;
    s[S_RUN] = seq;
    /* (the call number mixed into the trailers' word, as the blocking plans do: a request of
     * this number that is another call on another rank gets another word; a plain start's
     * call number is its agreement's, compared there) */
    const uint64_t word = m[M_PLAIN] ? (uint64_t)m[M_SIG] : call_signature((uint64_t)m[M_SIG], t);
    s[S_SIGNATURE] = (int64_t)word;
    s[S_OP] = m[M_OP];
    s[S_TYPE] = m[M_TYPE];
    s[S_ITEM] = m[M_ITEM];
    s[S_NMODE] = 0;
    s[S_COUT] = m[M_COUT];
    s[S_NCOUT] = m[M_NCOUT];
    s[S_MID] = m[M_MID];
    s[S_NMID] = m[M_NMID];
    s[S_OWED] = 0;
    if (m[M_SIGAT] >= 0) {  /* a message cut short must not find an earlier run's trailers */
        memcpy(store + m[M_SIGAT], &word, sizeof(int64_t));
        memset(store + m[M_SIGAT] + 8, 0, (size_t)(m[M_SIZE] - m[M_SIGAT] - 8));
    }
    const int64_t *cin = (const int64_t *)(intptr_t)m[M_CIN];
    for (int64_t i = 0; i < m[M_NCIN]; i++, cin += 3)
        memcpy(store + cin[0], (const void *)(intptr_t)cin[1], (size_t)cin[2]);
    if (talk) {
        const MPI_Comm ctl = (MPI_Comm)(intptr_t)x[X_CTL];
        const MPI_Datatype mtype = (MPI_Datatype)(intptr_t)x[X_LONG];
        int64_t *mode = (int64_t *)(intptr_t)s[S_MODE];
        const int n = (int)m[M_NVEC];
        MPI_Request *at = reqs + s[S_MODE_AT];
        s[S_VEC] = m[M_VEC];
        s[S_NVEC] = n;
        s[S_CALL] = t;
        if (rank == 0) {
            mode[0] = 1;
            mode[1] = t;
            memcpy(mode + 2, (const void *)(intptr_t)m[M_VEC], (size_t)n * sizeof(int64_t));
            const int mtag = (int)(t % x[X_MODE_TAGS]);  /* (the call number, for the probe) */
            for (int r = 1; r < size; r++) {
                err = seq % MODE_SYNC
                    ? MPI_Isend(mode, n + 2, mtype, r, mtag, ctl, at + r - 1)
                    : MPI_Issend(mode, n + 2, mtype, r, mtag, ctl, at + r - 1);
                if (err != MPI_SUCCESS)
                    return err;
                s[S_NMODE] = r;
            }
        } else {
            err = MPI_Irecv(mode, n + 2, mtype, 0, MPI_ANY_TAG, ctl, at);
            if (err != MPI_SUCCESS)
                return err;
            s[S_NMODE] = 1;
            /* the notice owed until rank 0's mode of this call is in (rank 0 sends a mode only
             * from a nonblocking call: then it needs no notice), sent by the first step that
             * finds the mode not in (istep) */
            s[S_OWED] = 1;
            s[S_X] = (int64_t)(intptr_t)x;
            x[X_OWED] += 1;
            s[S_MODE_DUE] = x[X_EARLY] ? MODE_EARLY : MODE_FIRST;
            if (p[P_NROUNDS] > 0) {  /* a payload apart in round 0: the mode first */
                const int64_t *row = (const int64_t *)(intptr_t)p[P_ROUNDS];
                const int64_t *msg = (const int64_t *)(intptr_t)p[P_MSGS] + row[R_MSG] * MSG_FIELDS;
                for (int64_t i = 0; i < row[R_NMSG]; i++, msg += MSG_FIELDS)
                    if (msg[4] == M_SEND_APART)
                        s[S_MODE_DUE] = MODE_FIRST;
            }
        }
    }
    return istep(p, s, 1);
}

/* A repeated neighbourhood collective in C (dualmpi/neighbor.py: _Fast, blocking, and _IFast,
 * nonblocking): one message to and one from every neighbour, [header | payload], posted with the
 * call's tag (1 + the wire's call count % N_TAGS; the count advances).  A payload of N_SPLIT
 * bytes or more goes as a message of its own after its header (contiguous: a large hindexed
 * message is copied through MPI's buffers); a smaller one with its header, by a committed
 * hindexed datatype at absolute addresses (MPI_BOTTOM), or, header and payload of at most 256
 * bytes (x[N_PLEN][j] bytes, 0: not packed), copied into its slot x[N_PADDR][j] after the
 * header written there once and sent contiguous (dualmpi/neighbor.py: _packed).  A receive
 * takes [header | payload] as one datatype (two blocks apart; a header alone with 8 bytes of
 * the sink apart from it); when the header that came says the sender split (its code is the
 * call's plus N_ALONE), the payload's receive is posted then, into the same place, or whole
 * into the sink x[N_SINK] (two 8-byte blocks apart: cut short) when the header announces more
 * bytes than that place holds.
 *
 * The exchange's requests are x[N_REQS] (4n handles; per neighbour j: [j] the send, header and
 * payload or both in one, [n + j] the receive, [2n + j] a payload sent on its own, [3n + j] one
 * received on its own), a request done when its handle is MPI_REQUEST_NULL, whoever completed
 * it (a wait from Python writes the handles back); x[N_STATE] holds [the first MPI error other
 * than a truncation, 1 if a message was truncated, per neighbour 1 once its header was read].
 * The messages are waited for with MPI_Waitany one at a time, so the watchdog names the
 * neighbours still waited for: track[0] is 1 + the mask of the messages not yet in (bit j: to
 * neighbour j, bit n + j: from it), track[1] the call's number.  Every message posted is waited
 * for, whatever fails.  An exchange's result: 0 when every header received is the one the last
 * checked call received (the arguments of both ends unchanged); NX_CHECK when one differs or a
 * message was truncated (the caller checks the headers); else the MPI error of a failed message.
 *
 * dualmpi_nexchange (blocking) posts and waits, and returns NX_BUSY, posting nothing, when
 * other requests are in flight on the rank (*flight: they must advance while this rank waits,
 * from Python); dualmpi_npost posts (a failure to post is the exchange's result), dualmpi_ntest
 * advances without blocking (NX_PENDING until every message is in, then the result) and
 * dualmpi_nwait waits for the rest (the result). */
enum { N_COMM, N_WIRE, N_TAGS, N_N, N_PEERS, N_STYPES, N_RTYPES, N_TRACK, N_INP, N_GOOD,
       N_COUNTS, N_SIZES, N_FLIGHT, N_OUT, N_SADDR, N_RADDR, N_RSIZE, N_BYTE, N_SPLIT, N_ALONE,
       N_REQS, N_STATE, N_SINK, N_PADDR, N_PLEN, N_FIELDS };
#define NX_BUSY (-1)
#define NX_CHECK (-2)
#define NX_PENDING (-3)
#define NX_MAX 30
#define NX_HEADER 5

int dualmpi_nx_fields(void) { return N_FIELDS * 10000 + NX_MAX * 10 + NX_HEADER; }

static int nx_post(const int64_t *x)
{
    const MPI_Comm comm = (MPI_Comm)(intptr_t)x[N_COMM];
    const MPI_Datatype byte = (MPI_Datatype)(intptr_t)x[N_BYTE];
    const int n = (int)x[N_N];
    const int64_t split = x[N_SPLIT];
    const int64_t *peers = (const int64_t *)(intptr_t)x[N_PEERS];
    const int64_t *stypes = (const int64_t *)(intptr_t)x[N_STYPES];
    const int64_t *rtypes = (const int64_t *)(intptr_t)x[N_RTYPES];
    const int64_t *sizes = (const int64_t *)(intptr_t)x[N_SIZES];
    const int64_t *saddr = (const int64_t *)(intptr_t)x[N_SADDR];
    const int64_t *paddr = (const int64_t *)(intptr_t)x[N_PADDR];
    const int64_t *plen = (const int64_t *)(intptr_t)x[N_PLEN];
    int64_t *out = (int64_t *)(intptr_t)x[N_OUT];
    int64_t *wire = (int64_t *)(intptr_t)x[N_WIRE];
    int64_t *counts = (int64_t *)(intptr_t)x[N_COUNTS];
    int64_t *st = (int64_t *)(intptr_t)x[N_STATE];
    MPI_Request *reqs = (MPI_Request *)(intptr_t)x[N_REQS];
    int fault = MPI_SUCCESS;

    const int64_t seq = wire[0]++;
    const int tag = 1 + (int)(seq % x[N_TAGS]);
    for (int j = 0; j < 4 * n; j++)
        reqs[j] = MPI_REQUEST_NULL;
    for (int j = 0; j < 2 + n; j++)
        st[j] = 0;
    for (int j = 0; j < n && fault == MPI_SUCCESS; j++)
        fault = MPI_Irecv(MPI_BOTTOM, 1, (MPI_Datatype)(intptr_t)rtypes[j], (int)peers[j], tag,
                          comm, reqs + n + j);
    for (int j = 0; j < n && fault == MPI_SUCCESS; j++) {
        if (sizes[j] >= split) {
            fault = MPI_Isend(out + j * NX_HEADER, NX_HEADER * (int)sizeof(int64_t), byte,
                              (int)peers[j], tag, comm, reqs + j);
            if (fault == MPI_SUCCESS)
                fault = MPI_Isend((void *)(intptr_t)saddr[j], (int)sizes[j], byte, (int)peers[j],
                                  tag, comm, reqs + 2 * n + j);
        } else if (paddr[j]) {  /* packed: the payload after the header in its slot */
            char *slot = (char *)(intptr_t)paddr[j];
            if (sizes[j] > 0)
                memcpy(slot + NX_HEADER * sizeof(int64_t), (const void *)(intptr_t)saddr[j],
                       (size_t)sizes[j]);
            fault = MPI_Isend(slot, (int)plen[j], byte, (int)peers[j], tag, comm, reqs + j);
        } else {
            fault = MPI_Isend(MPI_BOTTOM, 1, (MPI_Datatype)(intptr_t)stypes[j], (int)peers[j],
                              tag, comm, reqs + j);
        }
        if (fault == MPI_SUCCESS) {
            counts[2 * j] += 1;
            counts[2 * j + 1] += sizes[j];
        }
    }
    st[0] = fault;
    ((int64_t *)(intptr_t)x[N_TRACK])[1] = seq;
    return fault;
}

/* The headers in since the last look: post the receive of each payload that comes on its own;
 * return the mask of the messages not yet in (0: the exchange is done). */
static int64_t nx_follow(const int64_t *x)
{
    const int n = (int)x[N_N];
    const int64_t *inp = (const int64_t *)(intptr_t)x[N_INP];
    const int64_t *peers = (const int64_t *)(intptr_t)x[N_PEERS];
    const int64_t *raddr = (const int64_t *)(intptr_t)x[N_RADDR];
    const int64_t *rsize = (const int64_t *)(intptr_t)x[N_RSIZE];
    int64_t *st = (int64_t *)(intptr_t)x[N_STATE];
    MPI_Request *reqs = (MPI_Request *)(intptr_t)x[N_REQS];
    const int tag = 1 + (int)(((int64_t *)(intptr_t)x[N_TRACK])[1] % x[N_TAGS]);
    int64_t mask = 0;

    for (int j = 0; j < n; j++) {
        if (!st[2 + j] && reqs[n + j] == MPI_REQUEST_NULL) {
            st[2 + j] = 1;  /* (a receive never posted, after a fault, reads no header) */
            if (st[0] == MPI_SUCCESS && inp[j * NX_HEADER] > x[N_ALONE]) {
                /* (a payload announced longer than its place is cut short in the sink: two
                 * blocks apart, never written past as a contiguous receive would be) */
                const int longer = inp[j * NX_HEADER + 3] > rsize[j];
                int err = longer
                    ? MPI_Irecv(MPI_BOTTOM, 1, (MPI_Datatype)(intptr_t)x[N_SINK], (int)peers[j],
                                tag, (MPI_Comm)(intptr_t)x[N_COMM], reqs + 3 * n + j)
                    : MPI_Irecv((void *)(intptr_t)raddr[j], (int)rsize[j],
                                (MPI_Datatype)(intptr_t)x[N_BYTE], (int)peers[j], tag,
                                (MPI_Comm)(intptr_t)x[N_COMM], reqs + 3 * n + j);
                if (err != MPI_SUCCESS)
                    st[0] = err;
            }
        }
        mask |= (int64_t)(reqs[j] != MPI_REQUEST_NULL || reqs[2 * n + j] != MPI_REQUEST_NULL) << j;
        mask |= (int64_t)(reqs[n + j] != MPI_REQUEST_NULL || reqs[3 * n + j] != MPI_REQUEST_NULL)
                << (n + j);
    }
    return mask;
}

/* Request ``index`` is done with ``err``: note a truncation or the first other error. */
static void nx_done(const int64_t *x, int index, int err)
{
    int64_t *st = (int64_t *)(intptr_t)x[N_STATE];
    ((MPI_Request *)(intptr_t)x[N_REQS])[index] = MPI_REQUEST_NULL;
    if (err != MPI_SUCCESS) {
        int cls = err;
        MPI_Error_class(err, &cls);
        if (cls == MPI_ERR_TRUNCATE)
            st[1] = 1;
        else if (st[0] == MPI_SUCCESS)
            st[0] = err;
    }
}

static int nx_result(const int64_t *x)
{
    const int64_t *st = (const int64_t *)(intptr_t)x[N_STATE];
    if (st[0] != MPI_SUCCESS)
        return (int)st[0];
    if (st[1] || memcmp((const void *)(intptr_t)x[N_INP], (const void *)(intptr_t)x[N_GOOD],
                        (size_t)x[N_N] * NX_HEADER * sizeof(int64_t)) != 0)
        return NX_CHECK;
    return MPI_SUCCESS;
}

int dualmpi_nwait(const int64_t *x)
{
    const int n = (int)x[N_N];
    int64_t *track = (int64_t *)(intptr_t)x[N_TRACK];
    int64_t *st = (int64_t *)(intptr_t)x[N_STATE];
    MPI_Request *reqs = (MPI_Request *)(intptr_t)x[N_REQS];
    int64_t mask;

    while ((mask = nx_follow(x)) != 0) {
        int index = MPI_UNDEFINED;
        track[0] = 1 + mask;
        int err = MPI_Waitany(4 * n, reqs, &index, MPI_STATUS_IGNORE);
        if (index == MPI_UNDEFINED || index < 0 || index >= 4 * n) {
            if (st[0] == MPI_SUCCESS)
                st[0] = err != MPI_SUCCESS ? err : MPI_ERR_REQUEST;
            break;
        }
        nx_done(x, index, err);
    }
    track[0] = 0;
    return nx_result(x);
}

int dualmpi_ntest(const int64_t *x)
{
    const int n = (int)x[N_N];
    int64_t *st = (int64_t *)(intptr_t)x[N_STATE];
    MPI_Request *reqs = (MPI_Request *)(intptr_t)x[N_REQS];

    while (nx_follow(x) != 0) {
        int index = MPI_UNDEFINED, flag = 0;
        int err = MPI_Testany(4 * n, reqs, &index, &flag, MPI_STATUS_IGNORE);
        if (err == MPI_SUCCESS && !flag)
            return NX_PENDING;
        if (index == MPI_UNDEFINED || index < 0 || index >= 4 * n) {
            if (st[0] == MPI_SUCCESS)
                st[0] = err != MPI_SUCCESS ? err : MPI_ERR_REQUEST;
            break;
        }
        nx_done(x, index, err);
    }
    return nx_result(x);
}

int dualmpi_npost(const int64_t *x)
{
    return (int)x[N_N] > NX_MAX ? NX_BUSY : nx_post(x);
}

int dualmpi_nexchange(const int64_t *x)
{
    if (*(const int64_t *)(intptr_t)x[N_FLIGHT] != 0 || (int)x[N_N] > NX_MAX)
        return NX_BUSY;
    nx_post(x);  /* (a failure to post: what was posted is waited for, the failure returned) */
    return dualmpi_nwait(x);
}

/* A plan run once, from its shape and this call's sizes (dualmpi/engine/once.py): a v-variant
 * whose count table is new to the engine's cache sends exactly the messages its runner would
 * (dualmpi_run, above) without one being made — no persistent request, no datatype, no
 * segment list — so a program whose counts change on every call pays for its sizes, not for
 * a runner it never runs again.
 *
 * The argument block a is dualmpi_run's (the fields every runner shares, the call's signature,
 * the communicator, the combine's op); o holds the O_ fields below.  The shape, the same for
 * every size: per round [tag, receives, sends, copies, combines]; per message [peer, first
 * row, end row] (receives, then sends, in round order); per row [slot, size index] (the
 * segments of a message in order); the copies and combines [source slot, destination slot,
 * size index] in round order; the slots the call's input blocks go to and its output blocks
 * come from.  The call's sizes: lens (bytes per size index), off and size (per slot: its
 * offset in the store and its bytes), the user offsets of the input and output blocks, the
 * send and receive buffers' addresses (0: none), the store, a scratch area for the messages
 * (each receive's payload, trailer and a spare block; each send's payload and trailer) and
 * room for a round's requests.
 *
 * Messages leave as dualmpi_run's do, byte for byte: a message's segments then the 8-byte
 * trailer (the call's signature mixed with its number); a payload of o[O_LIMIT] bytes or more
 * travels apart with tag + o[O_APART] (o[O_APART] < 0: never) and its receive is posted once
 * its trailer is in and carries the signature (a longer message of another call is never
 * received into a buffer of the expected length).  Every receive is contiguous into the
 * scratch area and copied to its slots once the round is in.  Returns what dualmpi_run
 * returns: MPI_SUCCESS, an MPI error code, -(i + 1) for trailer i (counted over the plan's
 * receives in order) or DUALMPI_ALARM / DUALMPI_HOOK. */
enum {
    O_NROUNDS, O_ROUNDS, O_RMSG, O_SMSG, O_RROWS, O_SROWS, O_COPIES, O_COMBS, O_NIN, O_IN,
    O_UIN, O_NOUT, O_OUT, O_UOUT, O_LENS, O_OFF, O_SIZE, O_SEND, O_RECV, O_STORE, O_SCRATCH,
    O_REQS, O_LIMIT, O_APART, O_LINE, O_FIELDS
};

int dualmpi_once_fields(void) { return O_FIELDS; }

static int64_t message_bytes(const int64_t *rows, int64_t first, int64_t end, const int64_t *lens)
{
    int64_t n = 0;
    for (int64_t i = first; i < end; i++)
        n += lens[rows[2 * i + 1]];
    return n;
}

int dualmpi_once(const int64_t *a, const int64_t *o)
{
    const int64_t nrounds = o[O_NROUNDS];
    const int64_t *rounds = (const int64_t *)(intptr_t)o[O_ROUNDS];
    const int64_t *rmsg = (const int64_t *)(intptr_t)o[O_RMSG];
    const int64_t *smsg = (const int64_t *)(intptr_t)o[O_SMSG];
    const int64_t *rrows = (const int64_t *)(intptr_t)o[O_RROWS];
    const int64_t *srows = (const int64_t *)(intptr_t)o[O_SROWS];
    const int64_t *cop = (const int64_t *)(intptr_t)o[O_COPIES];
    const int64_t *comb = (const int64_t *)(intptr_t)o[O_COMBS];
    const int64_t *lens = (const int64_t *)(intptr_t)o[O_LENS];
    const int64_t *off = (const int64_t *)(intptr_t)o[O_OFF];
    const int64_t *size = (const int64_t *)(intptr_t)o[O_SIZE];
    char *store = (char *)(intptr_t)o[O_STORE];
    char *scratch = (char *)(intptr_t)o[O_SCRATCH];
    MPI_Request *reqs = (MPI_Request *)(intptr_t)o[O_REQS];
    const int64_t limit = o[O_LIMIT], apart = o[O_APART];
    const MPI_Request line = (MPI_Request)(intptr_t)o[O_LINE];
    const MPI_Comm comm = (MPI_Comm)(intptr_t)a[A_COMM];
    volatile int64_t *progress = (volatile int64_t *)(intptr_t)a[A_PROGRESS];
    int64_t *seqp = (int64_t *)(intptr_t)a[A_SEQ];
    const int64_t *wbuf = (const int64_t *)(intptr_t)a[A_WBUF];
    int64_t *ring = (int64_t *)(intptr_t)a[A_RING];
    const int64_t *hist = (const int64_t *)(intptr_t)a[A_HIST];
    int64_t *future = (int64_t *)(intptr_t)a[A_FUTURE];
    int *index = (int *)(intptr_t)a[A_INDEX];
    const volatile int64_t *inflight = (const volatile int64_t *)(intptr_t)a[A_INFLIGHT];
    const hook_fn hook = (hook_fn)(intptr_t)a[A_HOOK];
    const int watch = (a[A_FLAGS] & F_WATCH) != 0;
    int err;

    const int64_t seq = ++*seqp;
    const uint64_t sig = call_signature((uint64_t)a[A_SIGNATURE], seq);
    if (watch && reached(ring, future, seq))
        return DUALMPI_ALARM;
    if (o[O_SEND]) {  /* the input blocks to their slots */
        const char *send = (const char *)(intptr_t)o[O_SEND];
        const int64_t *in = (const int64_t *)(intptr_t)o[O_IN];
        const int64_t *uin = (const int64_t *)(intptr_t)o[O_UIN];
        for (int64_t i = 0; i < o[O_NIN]; i++)
            if (size[in[i]])
                memcpy(store + off[in[i]], send + uin[i], (size_t)size[in[i]]);
    }
    progress[1] += 1;
    int64_t t = 0;  /* the plan's receives so far: the index of a round's first trailer */
    for (int64_t k = 0; k < nrounds; k++, rounds += 5) {
        const int tag = (int)rounds[0];
        const int64_t nr = rounds[1], ns = rounds[2];
        int n = 0, first = 0;
        char *at = scratch;
        /* receives: the trailers of the payloads apart first, then the whole messages */
        for (int pass = 0; pass < 2; pass++) {
            at = scratch;
            for (int64_t j = 0; j < nr; j++) {
                const int64_t *m = rmsg + 3 * j;
                const int64_t bytes = message_bytes(rrows, m[1], m[2], lens);
                const int split = apart >= 0 && bytes >= limit;
                if (pass == 0 && split)
                    err = MPI_Irecv(at + bytes, 16, MPI_BYTE, (int)m[0], tag, comm, reqs + n++);
                else if (pass == 1 && !split)
                    err = MPI_Irecv(at, (int)(bytes + 16), MPI_BYTE, (int)m[0], tag, comm,
                                    reqs + n++);
                else
                    err = MPI_SUCCESS;
                if (err != MPI_SUCCESS) { progress[0] = 0; return err; }
                at += bytes + 16;
            }
            if (pass == 0)
                first = n;
        }
        /* sends: the segments packed, then the signature */
        for (int64_t j = 0; j < ns; j++) {
            const int64_t *m = smsg + 3 * j;
            char *start = at;
            for (int64_t i = m[1]; i < m[2]; i++) {
                const int64_t len = lens[srows[2 * i + 1]];
                if (len)
                    memcpy(at, store + off[srows[2 * i]], (size_t)len);
                at += len;
            }
            const int64_t bytes = at - start;
            memcpy(at, &sig, 8);
            at += 8;
            if (apart >= 0 && bytes >= limit) {
                err = MPI_Isend(start, (int)bytes, MPI_BYTE, (int)m[0], tag + (int)apart, comm,
                                reqs + n++);
                if (err == MPI_SUCCESS)
                    err = MPI_Isend(start + bytes, 8, MPI_BYTE, (int)m[0], tag, comm, reqs + n++);
            } else
                err = MPI_Isend(start, (int)(bytes + 8), MPI_BYTE, (int)m[0], tag, comm,
                                reqs + n++);
            if (err != MPI_SUCCESS) { progress[0] = 0; return err; }
        }
        for (int64_t i = 0; i < rounds[3]; i++, cop += 3)  /* local copies */
            if (lens[cop[2]])
                memmove(store + off[cop[1]], store + off[cop[0]], (size_t)lens[cop[2]]);
        progress[0] = k + 1;
        if (first) {  /* the payloads apart: their trailers, then their receives */
            MPI_Request held = reqs[first];
            reqs[first] = line;
            err = wait_round(reqs, first, 0, watch, hook, inflight, index, wbuf, ring, seq, hist,
                             future);
            reqs[first] = held;
            if (err != MPI_SUCCESS) { progress[0] = 0; return err; }
            at = scratch;
            for (int64_t j = 0; j < nr; j++) {
                const int64_t *m = rmsg + 3 * j;
                const int64_t bytes = message_bytes(rrows, m[1], m[2], lens);
                if (apart >= 0 && bytes >= limit) {
                    uint64_t got;
                    memcpy(&got, at + bytes, 8);
                    if (got != sig) { progress[0] = 0; return (int)-(t + j + 1); }
                    err = MPI_Irecv(at, (int)bytes, MPI_BYTE, (int)m[0], tag + (int)apart, comm,
                                    reqs + n++);
                    if (err != MPI_SUCCESS) { progress[0] = 0; return err; }
                }
                at += bytes + 16;
            }
        }
        reqs[n] = line;
        err = wait_round(reqs, n, first, watch, hook, inflight, index, wbuf, ring, seq, hist,
                         future);
        if (err != MPI_SUCCESS) { progress[0] = 0; return err; }
        at = scratch;  /* every trailer checked before a byte is copied out */
        for (int64_t j = 0; j < nr; j++) {
            const int64_t *m = rmsg + 3 * j;
            const int64_t bytes = message_bytes(rrows, m[1], m[2], lens);
            uint64_t got;
            memcpy(&got, at + bytes, 8);
            if (got != sig) { progress[0] = 0; return (int)-(t + j + 1); }
            at += bytes + 16;
        }
        at = scratch;
        for (int64_t j = 0; j < nr; j++, rmsg += 3) {
            for (int64_t i = rmsg[1]; i < rmsg[2]; i++) {
                const int64_t len = lens[rrows[2 * i + 1]];
                if (len)
                    memcpy(store + off[rrows[2 * i]], at, (size_t)len);
                at += len;
            }
            at += 16;
        }
        smsg += 3 * ns;
        t += nr;
        for (int64_t i = 0; i < rounds[4]; i++, comb += 3)  /* a reduction's blocks that met */
            if (lens[comb[2]]) {
                err = reduce_local(store + off[comb[0]], store + off[comb[1]], lens[comb[2]],
                                   a[A_ITEM], a[A_OP], a[A_TYPE]);
                if (err != MPI_SUCCESS) { progress[0] = 0; return err; }
            }
    }
    progress[0] = 0;
    if (o[O_RECV]) {  /* the output blocks from their slots */
        char *recv = (char *)(intptr_t)o[O_RECV];
        const int64_t *out = (const int64_t *)(intptr_t)o[O_OUT];
        const int64_t *uout = (const int64_t *)(intptr_t)o[O_UOUT];
        for (int64_t i = 0; i < o[O_NOUT]; i++)
            if (size[out[i]])
                memcpy(recv + uout[i], store + off[out[i]], (size_t)size[out[i]]);
    }
    return MPI_SUCCESS;
}
