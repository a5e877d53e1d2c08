/* pipeline.c — dist_sync's sum over all ranks: a pipelined reduce-scatter
 * and all-gather on MPI point-to-point, in place on the keys' own memory.
 *
 * The keys of a bucket are seen as one virtual array of T elements (their
 * regions one after the other: no fusion copy).  It is cut into segments
 * of MXP_KV_SEGMENT_BYTES (default 1 MiB), and each segment into N pieces, piece r owned by rank r.
 * Per segment:
 *   A. every rank sends each owner its piece (Isend per region the piece
 *      spans) and receives the N-1 copies of its own piece into scratch;
 *   sum: the owner sums its piece in rank order ((x0 + x1) + x2) ... and
 *      writes it in place;
 *   B. the owner sends the summed piece to every rank, which receives it
 *      in place (posted once its own phase-A sends of the segment are done:
 *      they read the same memory).
 * Up to WINDOW segments are in flight, so the sum of segment j runs while
 * segment j+1 is on the wire.  Element i is always summed in rank order by
 * one rank and copied to the others, so every rank gets the same bits and
 * the bucketing or segmenting changes no bit.
 *
 * Waiting: while requests complete the thread polls at once, then every
 * 15 us (TCP transfers progress only while MPI is called; a nap, unlike
 * sched_yield, gets the core back at once on a loaded machine); after
 * STALL_S without a completed request it naps as kvd_wait does (a slow or
 * dead peer), and after 3/4 of the timeout without progress it pings the
 * peers and breaks the store naming the silent ones (kvd_fail_*).
 *
 * Messages: comm `data`, tags TAG_A / TAG_B; one sender's messages on one
 * tag match in posting order, and both sides cut pieces at the same region
 * boundaries, so the receives match the sends.  Counts passed to MPI are
 * int: a region piece never exceeds a segment (at most 1 GiB).
 *
 * Not here: negotiation, the bucket choice (comm.c). */
#include "kvdist_comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_A = 7201, TAG_B = 7202, WINDOW = 4 };
#define STALL_S 0.05

MPI_Datatype kvd_mpi_type(int32_t dtype);

typedef struct region_list {
    const kvd_region *rg;
    int n;
    int64_t *start;          /* [n + 1] virtual offsets                    */
    size_t es;
} region_list;

/* Call fn for each contiguous part of virtual range [lo, hi). */
typedef int (*piece_fn)(void *ctx, char *ptr, int64_t count, int64_t voff);

static int for_pieces(const region_list *l, int64_t lo, int64_t hi, piece_fn fn, void *ctx) {
    if (lo >= hi) return MXP_OK;
    int a = 0, b = l->n;
    while (b - a > 1) { /* the last region starting at or before lo */
        int m = (a + b) / 2;
        if (l->start[m] <= lo) a = m;
        else b = m;
    }
    for (int i = a; i < l->n && l->start[i] < hi; i++) {
        int64_t s = lo > l->start[i] ? lo : l->start[i], e = hi < l->start[i + 1] ? hi : l->start[i + 1];
        if (e <= s) continue;
        int rc = fn(ctx, l->rg[i].ptr + (size_t)(s - l->start[i]) * l->es, e - s, s);
        if (rc) return rc;
    }
    return MXP_OK;
}

/* Requests of one window slot. */
typedef struct slot {
    MPI_Request *a, *b;      /* phase A (sends then receives), phase B      */
    int na, nb, cap_a, cap_b;
    int n_sends_a, n_sends_b; /* the first n_sends_* of a / b are sends     */
    int64_t lo, hi;          /* the segment                                 */
    char *scratch;           /* (N-1) pieces of my part                     */
    int state;               /* 0 free, 1 phase A, 2 phase B                */
} slot;

typedef struct run {
    kvd_comm *c;
    region_list l;
    MPI_Datatype t;
    slot *sl;
    int peer;                /* for the posting callbacks                   */
    int tag;
    MPI_Request **rq;
    int *nrq, *caprq;
    char *recv_at;           /* receives into scratch (NULL: in place)      */
    int64_t recv_base;       /* virtual offset of recv_at's element 0       */
} run;

static int grow(MPI_Request **rq, int *cap, int need) {
    if (need <= *cap) return MXP_OK;
    int c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    MPI_Request *r = realloc(*rq, (size_t)c * sizeof *r);
    if (!r) return MXP_ENOMEM;
    *rq = r;
    *cap = c;
    return MXP_OK;
}

static int post_send(void *ctx, char *ptr, int64_t count, int64_t voff) {
    (void)voff;
    run *u = ctx;
    if (grow(u->rq, u->caprq, *u->nrq + 1)) return MXP_ENOMEM;
    MPI_Request *r = &(*u->rq)[(*u->nrq)++];
    return MPI_Isend(ptr, (int)count, u->t, u->peer, u->tag, u->c->data, r) == MPI_SUCCESS ? MXP_OK : MXP_ENET;
}

static int post_recv(void *ctx, char *ptr, int64_t count, int64_t voff) {
    run *u = ctx;
    if (u->recv_at) ptr = u->recv_at + (size_t)(voff - u->recv_base) * u->l.es;
    if (grow(u->rq, u->caprq, *u->nrq + 1)) return MXP_ENOMEM;
    MPI_Request *r = &(*u->rq)[(*u->nrq)++];
    return MPI_Irecv(ptr, (int)count, u->t, u->peer, u->tag, u->c->data, r) == MPI_SUCCESS ? MXP_OK : MXP_ENET;
}

static int64_t piece_lo(int64_t lo, int64_t hi, int n, int r) { return lo + (hi - lo) * r / n; }

/* Phase A of segment [lo, hi) in slot s. */
static int start_a(run *u, slot *s) {
    kvd_store *st = u->c->s;
    int n = st->size, me = st->rank, rc = MXP_OK;
    s->na = 0;
    u->rq = &s->a, u->nrq = &s->na, u->caprq = &s->cap_a, u->tag = TAG_A, u->recv_at = NULL;
    for (int q = 0; q < n && !rc; q++) {
        if (q == me) continue;
        u->peer = q;
        rc = for_pieces(&u->l, piece_lo(s->lo, s->hi, n, q), piece_lo(s->lo, s->hi, n, q + 1), post_send, u);
    }
    s->n_sends_a = s->na;
    int64_t mlo = piece_lo(s->lo, s->hi, n, me), mhi = piece_lo(s->lo, s->hi, n, me + 1);
    for (int q = 0, j = 0; q < n && !rc; q++) {
        if (q == me) continue;
        u->peer = q;
        u->recv_at = s->scratch + (size_t)j++ * (size_t)(mhi - mlo) * u->l.es;
        u->recv_base = mlo;
        rc = for_pieces(&u->l, mlo, mhi, post_recv, u);
    }
    s->state = 1;
    return rc;
}

/* Phase B: my summed piece to every peer, theirs into place. */
static int start_b(run *u, slot *s) {
    kvd_store *st = u->c->s;
    int n = st->size, me = st->rank, rc = MXP_OK;
    s->nb = 0;
    u->rq = &s->b, u->nrq = &s->nb, u->caprq = &s->cap_b, u->tag = TAG_B, u->recv_at = NULL;
    int64_t mlo = piece_lo(s->lo, s->hi, n, me), mhi = piece_lo(s->lo, s->hi, n, me + 1);
    for (int q = 0; q < n && !rc; q++) {
        if (q == me) continue;
        u->peer = q;
        rc = for_pieces(&u->l, mlo, mhi, post_send, u);
    }
    s->n_sends_b = s->nb;
    for (int q = 0; q < n && !rc; q++) {
        if (q == me) continue;
        u->peer = q;
        rc = for_pieces(&u->l, piece_lo(s->lo, s->hi, n, q), piece_lo(s->lo, s->hi, n, q + 1), post_recv, u);
    }
    s->state = 2;
    return rc;
}

/* dst = (((x0 + x1) + x2) ...) with x_me = dst, the others from scratch
 * (peer q's copy at scratch index q < me ? q : q - 1).  For me >= 2 the
 * partial sum builds in x0's scratch copy (dst is still an operand) and
 * the last addition writes dst. */
#define SUM_PIECE(T)                                                         \
    do {                                                                     \
        T *d = (T *)ptr;                                                     \
        T *x[64] = {0};                                                          \
        for (int q = 0; q < n; q++)                                          \
            x[q] = q == me ? d : (T *)(u->sum_scratch + ((size_t)(q < me ? q : q - 1) * (size_t)u->sum_piece + \
                                                        (size_t)(voff - u->sum_base)) * sizeof(T)); \
        if (me < 2) {                                                        \
            add_##T(d, x[0], x[1], count);                                   \
            for (int q = 2; q < n; q++) addto_##T(d, x[q], count);           \
        } else {                                                             \
            T *acc = x[0];                                                   \
            addto_##T(acc, x[1], count);                                     \
            for (int q = 2; q < n - 1; q++) addto_##T(acc, x[q], count);     \
            add_##T(d, acc, x[n - 1], count);                                \
        }                                                                    \
    } while (0)

#define ADDERS(T)                                                            \
    static void add_##T(T *restrict d, const T *a, const T *b, int64_t n) {  \
        if (d == a) {                                                        \
            for (int64_t i = 0; i < n; i++) d[i] += b[i];                    \
        } else if (d == b) {                                                 \
            for (int64_t i = 0; i < n; i++) d[i] = a[i] + d[i];              \
        } else {                                                             \
            for (int64_t i = 0; i < n; i++) d[i] = a[i] + b[i];              \
        }                                                                    \
    }                                                                        \
    static void addto_##T(T *restrict d, const T *restrict b, int64_t n) {   \
        for (int64_t i = 0; i < n; i++) d[i] += b[i];                        \
    }
typedef int32_t i32;
typedef int64_t i64;
ADDERS(float)
ADDERS(double)
ADDERS(i32)
ADDERS(i64)

typedef struct sum_ctx {
    int n, me;
    int32_t dtype;
    const char *sum_scratch;
    int64_t sum_piece, sum_base;
} sum_ctx;

static int sum_piece(void *ctx, char *ptr, int64_t count, int64_t voff) {
    sum_ctx *u = ctx;
    int n = u->n, me = u->me;
    switch (u->dtype) {
    case MXP_DTYPE_F32: SUM_PIECE(float); break;
    case MXP_DTYPE_F64: SUM_PIECE(double); break;
    case MXP_DTYPE_I32: SUM_PIECE(i32); break;
    default: SUM_PIECE(i64); break;
    }
    return MXP_OK;
}

/* After a failure: cancel the receives (they would write into the keys
 * later); the sends are left to MPI (cancelling a send is unreliable). */
static void cancel_recvs(MPI_Request *rq, int from, int n) {
    for (int i = from; i < n; i++)
        if (rq[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&rq[i]);
            MPI_Request_free(&rq[i]);
        }
}

int kvd_allreduce_regions(kvd_comm *c, const kvd_region *rg, int n_rg, int32_t dtype, const char *what) {
    kvd_store *s = c->s;
    int n = s->size, me = s->rank;
    if (n == 1 || n_rg == 0) return MXP_OK;
    if (n > 64) return MXP_EUNSUPPORTED; /* SUM_PIECE's table; dist_sync runs on a few ranks per key set */
    MPI_Datatype t = kvd_mpi_type(dtype);
    if (t == MPI_DATATYPE_NULL) return MXP_EUNSUPPORTED;
    size_t es = mxp_dtype_size(dtype);
    int64_t *start = malloc((size_t)(n_rg + 1) * sizeof *start);
    if (!start) return MXP_ENOMEM;
    start[0] = 0;
    for (int i = 0; i < n_rg; i++) start[i + 1] = start[i] + rg[i].count;
    int64_t total = start[n_rg];
    if (total == 0) {
        free(start);
        return MXP_OK;
    }
    int64_t seg = s->segment_bytes / (int64_t)es;
    if (seg > total) seg = total;
    int64_t nseg = (total + seg - 1) / seg, piece = (seg + n - 1) / n;
    size_t slot_bytes = (size_t)(n - 1) * (size_t)piece * es;
    size_t need = WINDOW * slot_bytes;
    if (need > c->scratch_bytes) {
        void *p = realloc(c->scratch, need);
        if (!p) {
            free(start);
            return MXP_ENOMEM;
        }
        c->scratch = p;
        c->scratch_bytes = need;
    }
    slot sl[WINDOW];
    memset(sl, 0, sizeof sl);
    for (int i = 0; i < WINDOW; i++) sl[i].scratch = (char *)c->scratch + (size_t)i * slot_bytes;
    run u = {.c = c, .l = {rg, n_rg, start, es}, .t = t, .sl = sl};
    int rc = MXP_OK;
    int64_t started = 0, summed = 0, done = 0;
    double t_prog = kvd_now(), limit = 0.75 * s->timeout_ms / 1000.0;
    for (long spin = 0; done < nseg; spin++) {
        int progress = 0;
        while (started < nseg && started - done < WINDOW && !rc) {
            slot *q = &sl[started % WINDOW];
            q->lo = started * seg;
            q->hi = q->lo + seg < total ? q->lo + seg : total;
            rc = start_a(&u, q);
            started++;
            progress = 1;
        }
        if (rc) break;
        int flag = 0, mrc = MPI_SUCCESS;
        /* Sum the next segment once its pieces arrived, and (for the memory
         * the receives of phase B overwrite) its own sends left. */
        while (summed < started && !rc) {
            slot *q = &sl[summed % WINDOW];
            if ((mrc = MPI_Testall(q->na, q->a, &flag, MPI_STATUSES_IGNORE)) != MPI_SUCCESS || !flag) break;
            int64_t mlo = piece_lo(q->lo, q->hi, n, me), mhi = piece_lo(q->lo, q->hi, n, me + 1);
            sum_ctx sc = {n, me, dtype, q->scratch, mhi - mlo, mlo};
            for_pieces(&u.l, mlo, mhi, sum_piece, &sc);
            rc = start_b(&u, q);
            summed++;
            progress = 1;
        }
        while (mrc == MPI_SUCCESS && done < summed && !rc) {
            slot *q = &sl[done % WINDOW];
            if ((mrc = MPI_Testall(q->nb, q->b, &flag, MPI_STATUSES_IGNORE)) != MPI_SUCCESS || !flag) break;
            q->state = 0;
            done++;
            progress = 1;
        }
        if (rc == MXP_ENET) mrc = MPI_ERR_OTHER;
        if (mrc != MPI_SUCCESS) {
            rc = kvd_fail_mpi(c, mrc, what);
            break;
        }
        if (rc) break;
        if (done == nseg) break;
        double now = kvd_now();
        if (progress) {
            t_prog = now;
            continue;
        }
        if ((spin & 15) == 0) kvd_serve_pings(c);
        double idle = now - t_prog;
        if (idle > limit) {
            rc = kvd_fail_timeout(c, what, idle);
            break;
        }
        kvd_pause(idle, STALL_S);
    }
    if (rc)
        for (int i = 0; i < WINDOW; i++) {
            cancel_recvs(sl[i].a, sl[i].n_sends_a, sl[i].na);
            cancel_recvs(sl[i].b, sl[i].n_sends_b, sl[i].nb);
        }
    for (int i = 0; i < WINDOW; i++) {
        free(sl[i].a);
        free(sl[i].b);
    }
    free(start);
    return rc;
}
