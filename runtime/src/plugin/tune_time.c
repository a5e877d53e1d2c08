/* tune_time.c — timing one tune candidate: an instance made exactly as a
 * node binds one (mxp__inst_create: workspace + create) and run with
 * mxp__inst_run, the call the engine's workers make (the ctx,
 * parallel_for and args a production run gets), on the calling thread,
 * synchronously, on scratch tensors of the configuration's shapes (inputs
 * uniform in [0, 1), aux 1.0; 64-byte aligned like the runtime's
 * storage): one warm-up and TUNE_RUNS timed runs (more for a fast
 * configuration, fewer for a slow one), median.  For a training
 * configuration (is_train) each run is forward + backward (every input
 * gradient written), as a training step pays for both.  On a device the
 * host cannot reach, scratch lives in device memory and runs use a stream
 * (tune_device.c).  mxp__tune_duel times two candidates run by run in
 * turn (the same instances and scratch, both alive at once) for tune.c's
 * final comparison of the two fastest.
 * Not here: which candidates, passes and the choice (tune.c). */
#include "plugin/plugin_impl.h"
#include "plugin/tune_device.h"
#include "engine/engine.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TUNE_RUNS 5
/* A fast configuration gets more runs, up to about TUNE_FAST_MS of timing
 * per candidate and pass: the median of 5 runs of a 0.2 ms op moved by
 * more than the gap between two impls. */
#define TUNE_MAX_RUNS 41
#define TUNE_FAST_MS 10.0
/* A duel (mxp__tune_duel): rounds worth about TUNE_DUEL_MS of both
 * candidates' runs, at most TUNE_DUEL_ROUNDS. */
#define TUNE_DUEL_MS 150.0
#define TUNE_DUEL_ROUNDS 41
#define TUNE_DUEL_MIN_ROUNDS 9

static atomic_ulong g_timing_runs;    /* timed forward calls (tests)      */

unsigned long mxp__tune_timing_runs(void) { return atomic_load(&g_timing_runs); }

/* Zeroed scratch at the storage pool's alignment (64 bytes, storage.c):
 * impls are timed on the alignment they run on.  calloc's 16 bytes (a
 * large block sits 16 bytes past a page) split every 64-byte vector load
 * and store across two cache lines and ruled out the pointwise kernels'
 * streaming stores, so tune timed them ~30% slow on the 256->64 1x1
 * layer's training step and picked gemm there (docs/convolution.md). */
#define TUNE_ALIGN 64
static void *scratch_zalloc(size_t bytes) {
    size_t n = (bytes + TUNE_ALIGN - 1) / TUNE_ALIGN * TUNE_ALIGN;
    void *p = aligned_alloc(TUNE_ALIGN, n ? n : TUNE_ALIGN);
    if (p) memset(p, 0, n);
    return p;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void fill_values(void *p, int32_t dt, int64_t n, double constant, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        double v = constant;
        if (constant < 0) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            v = (double)(s >> 11) / 9007199254740992.0;
        }
        if (dt == MXP_DTYPE_F32) ((float *)p)[i] = (float)v;
        else if (dt == MXP_DTYPE_F64) ((double *)p)[i] = v;
    }
}

/* One candidate made ready to run: its instance (made exactly as a node
 * binds one) and scratch tensors, and the forward (+ backward) run
 * descriptions.  timer_open / timer_run / timer_close; the instance and
 * the runs are the node runtime's (opdef.h); only the tensors are
 * scratch — on a device the host cannot reach (a GPU), copied into the
 * device's memory, with a stream and waiting for asynchronous impls to
 * complete (tune_device.c). */
typedef struct tune_timer {
    mxp__inst *inst;
    mxp__tune_dev td;
    int td_on;
    uint32_t n_in, n_out, nt;
    mxp_tensor *t, *bt;
    int32_t *req, *breq;
    void *ws;
    mxp_rng rng;
    int bwd;
    mxp__run fr, br;
    mxp_op_ctx ctx;
} tune_timer;

static void timer_close(tune_timer *tm) {
    if (!tm) return;
    if (tm->inst) mxp__inst_release(tm->inst);
    if (tm->td_on) mxp__tune_dev_end(&tm->td); /* host pointers back in t, bt and ws */
    free(tm->ws);
    for (uint32_t i = 0; tm->bt && i < tm->n_out; i++) free(tm->bt[i].data);
    for (uint32_t i = 0; tm->bt && i < tm->n_in; i++) free(tm->bt[2 * tm->n_out + tm->n_in + i].data);
    free(tm->bt);
    free(tm->breq);
    for (uint32_t i = 0; tm->t && i < tm->nt; i++) free(tm->t[i].data);
    free(tm->t);
    free(tm->req);
    free(tm);
}

static int timer_open(const char *op_name, mxp_impl_ref *ref, const mxp_select_query *q, tune_timer **out) {
    *out = NULL;
    tune_timer *tm = calloc(1, sizeof *tm);
    if (!tm) return mxp__error_oom("tune");
    int rc = mxp__inst_create(mxp__impl_ref_retain(ref), q, (void *)q->params, 0, &tm->inst);
    if (rc) {
        free(tm);
        return rc;
    }
    rc = mxp__tune_dev_begin(q->device, &tm->td);
    if (rc) {
        timer_close(tm);
        return rc;
    }
    tm->td_on = 1;
    mxp__inst *inst = tm->inst;
    const mxp_op_def *def = mxp__inst_def(inst);
    uint32_t n_in = q->n_in, n_out = q->n_out, n_aux = q->n_aux, nt = n_in + n_out + n_aux;
    tm->n_in = n_in;
    tm->n_out = n_out;
    tm->nt = nt;
    mxp_tensor *t = tm->t = calloc((size_t)nt + 1, sizeof *t);
    int32_t *req = tm->req = calloc((size_t)n_out + 1, sizeof *req);
    if (!t || !req) rc = mxp__error_oom("tune");
    for (uint32_t i = 0; i < nt && !rc; i++) {
        const mxp_shape *sh = &inst->shapes[i];
        int32_t dt = inst->dtypes[i];
        int64_t numel = 1;
        for (int k = 0; k < sh->ndim; k++) numel *= sh->dims[k];
        size_t es = mxp_dtype_size(dt);
        if (sh->ndim < 0 || numel < 0 || !es) {
            rc = mxp__error(MXP_ESHAPE, "tensor %u of unknown shape or dtype", i);
            break;
        }
        t[i].hdr = (mxp_header)MXP_HEADER(mxp_tensor);
        t[i].data = scratch_zalloc((size_t)numel * es + 64);
        if (!t[i].data) {
            rc = mxp__error_oom("tune scratch");
            break;
        }
        t[i].dtype = dt;
        t[i].ndim = sh->ndim;
        t[i].shape = sh->dims;
        t[i].device = q->device;
        t[i].version = mxp__engine_new_stamp(); /* scratch at a reused address is another array */
        if (i < n_in) fill_values(t[i].data, dt, numel, -1, i + 1);
        else if (i >= n_in + n_out) fill_values(t[i].data, dt, numel, 1.0, 0);
        rc = mxp__tune_dev_move(&tm->td, &t[i].data, (size_t)numel * es + 64);
    }
    for (uint32_t i = 0; i < n_out && req; i++) req[i] = MXP_REQ_WRITE;
    /* Training signature: time forward + backward, since that is what a
     * training step pays for; the backward writes the input gradients the
     * step asks for (q->in_grad; NULL: all), the others get MXP_REQ_NULL
     * and no buffer, and with none asked for there is no backward.
     * Backward's tensors are laid out as the node runtime's:
     * [out_grad | in | out | in_grad | aux]. */
    int any_grad = !q->in_grad;
    for (uint32_t i = 0; q->in_grad && i < n_in; i++) any_grad |= q->in_grad[i] != 0;
    int bwd = tm->bwd = q->is_train && any_grad && mxp__inst_has_backward(inst) && !(def->flags & MXP_OP_NO_GRADIENT);
    uint32_t nb = 2 * n_out + 2 * n_in + n_aux;
    mxp_tensor *bt = tm->bt = bwd && !rc ? calloc((size_t)nb + 1, sizeof *bt) : NULL;
    int32_t *breq = tm->breq = bwd && !rc ? calloc((size_t)n_in + 1, sizeof *breq) : NULL;
    if (bwd && !rc && (!bt || !breq)) rc = mxp__error_oom("tune");
    for (uint32_t i = 0; bwd && !rc && i < n_in + n_out; i++) bt[n_out + i] = t[i]; /* in | out */
    for (uint32_t i = 0; bwd && !rc && i < n_aux; i++) bt[2 * n_out + 2 * n_in + i] = t[n_in + n_out + i];
    for (uint32_t i = 0; bwd && !rc && i < n_out + n_in; i++) {
        /* out_grad[i] like output i; in_grad[i] like input i. */
        const mxp_tensor *like = i < n_out ? &t[n_in + i] : &t[i - n_out];
        mxp_tensor *g = i < n_out ? &bt[i] : &bt[2 * n_out + n_in + (i - n_out)];
        size_t bytes = (size_t)mxp_tensor_numel(like) * mxp_dtype_size(like->dtype);
        *g = *like;
        g->version = mxp__engine_new_stamp();
        if (i >= n_out && q->in_grad && !q->in_grad[i - n_out]) {
            g->data = NULL; /* not asked for: no buffer, req NULL */
            continue;
        }
        if (!(g->data = scratch_zalloc(bytes + 64))) rc = mxp__error_oom("tune scratch");
        else if (i < n_out) fill_values(g->data, like->dtype, mxp_tensor_numel(like), -1, 100 + i);
        if (g->data && !rc) rc = mxp__tune_dev_move(&tm->td, &g->data, bytes + 64);
    }
    for (uint32_t i = 0; breq && i < n_in; i++) breq[i] = !q->in_grad || q->in_grad[i] ? MXP_REQ_WRITE : MXP_REQ_NULL;
    uint64_t ws_bytes = inst->workspace_bytes;
    if (!rc && ws_bytes && !(tm->ws = aligned_alloc(64, (ws_bytes + 63) / 64 * 64))) rc = mxp__error_oom("tune workspace");
    if (!rc && tm->ws) rc = mxp__tune_dev_move(&tm->td, &tm->ws, (ws_bytes + 63) / 64 * 64);
    int has_rng = 0;
    if (!rc && (def->resources & MXP_RESOURCE_RANDOM)) {
        rc = mxp__rng_reserve(q->device, 1u << 20, &tm->rng.stream);
        has_rng = !rc;
    }
    if (rc) {
        timer_close(tm);
        return rc;
    }
    tm->fr = (mxp__run){.is_train = q->is_train ? 1 : 0,
                        .dev = q->device,
                        .stream = tm->td.stream,
                        .t = t,
                        .req = req,
                        .ws = tm->ws,
                        .ws_bytes = ws_bytes,
                        .rng = has_rng ? &tm->rng : NULL,
                        .label = op_name};
    tm->br = tm->fr;
    tm->br.backward = 1;
    tm->br.t = bt;
    tm->br.req = breq;
    *out = tm;
    return MXP_OK;
}

/* One forward (training: forward + backward) run, its wall time in *ms. */
static int timer_run(tune_timer *tm, double *ms) {
    double t0 = now_ms();
    int rc = mxp__tune_run(tm->inst, &tm->fr, &tm->ctx);
    if (!rc && tm->bwd) rc = mxp__tune_run(tm->inst, &tm->br, &tm->ctx);
    *ms = now_ms() - t0;
    atomic_fetch_add(&g_timing_runs, 1);
    return rc;
}

/* Timed runs after the warm-up taking dt ms: fewer for a slow
 * configuration (tuning stays bounded), more for a fast one. */
static int runs_for(double dt) {
    if (dt > 500) return 1;
    if (dt > 100) return 3;
    if (dt * TUNE_MAX_RUNS < TUNE_FAST_MS) return TUNE_MAX_RUNS;
    if (dt * TUNE_RUNS < TUNE_FAST_MS) return (int)(TUNE_FAST_MS / dt);
    return TUNE_RUNS;
}

/* Median forward (training: forward + backward) time of one candidate in
 * ms (MXP_OK), and its fastest run in *out_min_ms (may be NULL), or an
 * error: one warm-up and runs_for(warm-up) timed runs. */
int mxp__tune_time_one(const char *op_name, mxp_impl_ref *ref, const mxp_select_query *q, double *out_ms,
                       double *out_min_ms) {
    *out_ms = 0;
    if (out_min_ms) *out_min_ms = 0;
    tune_timer *tm = NULL;
    int rc = timer_open(op_name, ref, q, &tm);
    if (rc) return rc;
    double times[TUNE_MAX_RUNS];
    int runs = 0;
    double dt = 0;
    rc = timer_run(tm, &dt);
    int total = rc ? 0 : runs_for(dt);
    while (!rc && runs < total) {
        rc = timer_run(tm, &dt);
        if (!rc) times[runs++] = dt;
    }
    timer_close(tm);
    if (rc) return rc;
    qsort(times, (size_t)runs, sizeof *times, cmp_double);
    *out_ms = runs ? times[runs / 2] : 0;
    if (out_min_ms) *out_min_ms = runs ? times[0] : 0;
    return MXP_OK;
}

/* Two candidates timed run by run in turn (a, b, then b, a, ...), so that
 * load coming and going meets both alike: each candidate timed in a
 * block of its own (mxp__tune_time_one) can take a whole burst of load
 * the other escaped, and a burst that lasted both passes of the real
 * winner made tune pick an impl half as fast (docs/convolution.md).
 * *out_ratio: the median over the rounds of a's time / b's time (below 1:
 * a is faster); *out_a_ms, *out_b_ms: each one's median; *out_rounds. */
int mxp__tune_duel(const char *op_name, mxp_impl_ref *a, mxp_impl_ref *b, const mxp_select_query *q,
                   double *out_ratio, double *out_a_ms, double *out_b_ms, int *out_rounds) {
    *out_ratio = 1;
    *out_a_ms = *out_b_ms = 0;
    *out_rounds = 0;
    tune_timer *ta = NULL, *tb = NULL;
    int rc = timer_open(op_name, a, q, &ta);
    if (!rc) rc = timer_open(op_name, b, q, &tb);
    double da = 0, db = 0;
    if (!rc) rc = timer_run(ta, &da); /* warm-ups */
    if (!rc) rc = timer_run(tb, &db);
    double ta_ms[TUNE_DUEL_ROUNDS], tb_ms[TUNE_DUEL_ROUNDS], ratio[TUNE_DUEL_ROUNDS];
    int rounds = 0, total = 0;
    if (!rc) {
        /* Rounds worth about TUNE_DUEL_MS, within [TUNE_DUEL_MIN_ROUNDS, TUNE_DUEL_ROUNDS]
         * (fewer for a slow pair). */
        double pair = da + db;
        total = pair > 500 ? 2 : pair > 200 ? 3 : (int)(TUNE_DUEL_MS / (pair > 0 ? pair : 1e-3));
        if (total < 2) total = 2;
        if (pair <= 200 && total < TUNE_DUEL_MIN_ROUNDS) total = TUNE_DUEL_MIN_ROUNDS;
        if (total > TUNE_DUEL_ROUNDS) total = TUNE_DUEL_ROUNDS;
    }
    while (!rc && rounds < total) {
        if (rounds % 2 == 0) {
            rc = timer_run(ta, &da);
            if (!rc) rc = timer_run(tb, &db);
        } else {
            rc = timer_run(tb, &db);
            if (!rc) rc = timer_run(ta, &da);
        }
        if (rc) break;
        ta_ms[rounds] = da;
        tb_ms[rounds] = db;
        ratio[rounds] = db > 0 ? da / db : 1;
        rounds++;
    }
    timer_close(ta);
    timer_close(tb);
    if (rc) return rc;
    qsort(ta_ms, (size_t)rounds, sizeof *ta_ms, cmp_double);
    qsort(tb_ms, (size_t)rounds, sizeof *tb_ms, cmp_double);
    qsort(ratio, (size_t)rounds, sizeof *ratio, cmp_double);
    *out_a_ms = ta_ms[rounds / 2];
    *out_b_ms = tb_ms[rounds / 2];
    *out_ratio = rounds % 2 ? ratio[rounds / 2] : 0.5 * (ratio[rounds / 2 - 1] + ratio[rounds / 2]);
    *out_rounds = rounds;
    return MXP_OK;
}
