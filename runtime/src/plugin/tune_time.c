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
 * (tune_device.c).
 * Not here: which candidates, passes and the choice (tune.c). */
#include "plugin/plugin_impl.h"
#include "plugin/tune_device.h"

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

/* Median forward (training: forward + backward) time of one candidate in
 * ms (MXP_OK), and its fastest run in *out_min_ms (may be NULL), or an
 * error.  The instance and the runs are the node
 * runtime's (opdef.h); only the tensors are scratch — on a device the host
 * cannot reach (a GPU), copied into the device's memory, with a stream and
 * waiting for asynchronous impls to complete (tune_device.c). */
int mxp__tune_time_one(const char *op_name, mxp_impl_ref *ref, const mxp_select_query *q, double *out_ms,
                       double *out_min_ms) {
    *out_ms = 0;
    if (out_min_ms) *out_min_ms = 0;
    mxp__inst *inst = NULL;
    int rc = mxp__inst_create(mxp__impl_ref_retain(ref), q, (void *)q->params, 0, &inst);
    if (rc) return rc;
    mxp__tune_dev td;
    rc = mxp__tune_dev_begin(q->device, &td);
    if (rc) {
        mxp__inst_release(inst);
        return rc;
    }
    const mxp_op_def *def = mxp__inst_def(inst);
    uint32_t n_in = q->n_in, n_out = q->n_out, n_aux = q->n_aux, nt = n_in + n_out + n_aux;
    mxp_tensor *t = calloc((size_t)nt + 1, sizeof *t);
    int32_t *req = calloc((size_t)n_out + 1, sizeof *req);
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
        t[i].version = 1;
        if (i < n_in) fill_values(t[i].data, dt, numel, -1, i + 1);
        else if (i >= n_in + n_out) fill_values(t[i].data, dt, numel, 1.0, 0);
        rc = mxp__tune_dev_move(&td, &t[i].data, (size_t)numel * es + 64);
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
    int bwd = q->is_train && any_grad && mxp__inst_has_backward(inst) && !(def->flags & MXP_OP_NO_GRADIENT);
    uint32_t nb = 2 * n_out + 2 * n_in + n_aux;
    mxp_tensor *bt = bwd && !rc ? calloc((size_t)nb + 1, sizeof *bt) : NULL;
    int32_t *breq = bwd && !rc ? calloc((size_t)n_in + 1, sizeof *breq) : NULL;
    if (bwd && !rc && (!bt || !breq)) rc = mxp__error_oom("tune");
    for (uint32_t i = 0; bwd && !rc && i < n_in + n_out; i++) bt[n_out + i] = t[i]; /* in | out */
    for (uint32_t i = 0; bwd && !rc && i < n_aux; i++) bt[2 * n_out + 2 * n_in + i] = t[n_in + n_out + i];
    for (uint32_t i = 0; bwd && !rc && i < n_out + n_in; i++) {
        /* out_grad[i] like output i; in_grad[i] like input i. */
        const mxp_tensor *like = i < n_out ? &t[n_in + i] : &t[i - n_out];
        mxp_tensor *g = i < n_out ? &bt[i] : &bt[2 * n_out + n_in + (i - n_out)];
        size_t bytes = (size_t)mxp_tensor_numel(like) * mxp_dtype_size(like->dtype);
        *g = *like;
        if (i >= n_out && q->in_grad && !q->in_grad[i - n_out]) {
            g->data = NULL; /* not asked for: no buffer, req NULL */
            continue;
        }
        if (!(g->data = scratch_zalloc(bytes + 64))) rc = mxp__error_oom("tune scratch");
        else if (i < n_out) fill_values(g->data, like->dtype, mxp_tensor_numel(like), -1, 100 + i);
        if (g->data && !rc) rc = mxp__tune_dev_move(&td, &g->data, bytes + 64);
    }
    for (uint32_t i = 0; breq && i < n_in; i++) breq[i] = !q->in_grad || q->in_grad[i] ? MXP_REQ_WRITE : MXP_REQ_NULL;
    void *ws = NULL;
    uint64_t ws_bytes = inst->workspace_bytes;
    if (!rc && ws_bytes && !(ws = aligned_alloc(64, (ws_bytes + 63) / 64 * 64))) rc = mxp__error_oom("tune workspace");
    if (!rc && ws) rc = mxp__tune_dev_move(&td, &ws, (ws_bytes + 63) / 64 * 64);
    mxp_rng rng;
    memset(&rng, 0, sizeof rng);
    int has_rng = 0;
    if (!rc && (def->resources & MXP_RESOURCE_RANDOM)) {
        rc = mxp__rng_reserve(q->device, 1u << 20, &rng.stream);
        has_rng = !rc;
    }
    double times[TUNE_MAX_RUNS];
    int runs = 0;
    if (!rc) {
        mxp__run fr = {.is_train = q->is_train ? 1 : 0,
                       .dev = q->device,
                       .stream = td.stream,
                       .t = t,
                       .req = req,
                       .ws = ws,
                       .ws_bytes = ws_bytes,
                       .rng = has_rng ? &rng : NULL,
                       .label = op_name};
        mxp__run br = fr;
        br.backward = 1;
        br.t = bt;
        br.req = breq;
        mxp_op_ctx ctx;
        int total = 1 + TUNE_RUNS;
        for (int r = 0; r < total && !rc; r++) {
            double t0 = now_ms();
            rc = mxp__tune_run(inst, &fr, &ctx);
            if (!rc && bwd) rc = mxp__tune_run(inst, &br, &ctx);
            double dt = now_ms() - t0;
            atomic_fetch_add(&g_timing_runs, 1);
            if (rc) break;
            if (r == 0) {
                /* A slow configuration: fewer runs keep tuning bounded. */
                if (dt > 500) total = 2;
                else if (dt > 100) total = 4;
                else if (dt * TUNE_MAX_RUNS < TUNE_FAST_MS) total = 1 + TUNE_MAX_RUNS;
                else if (dt * TUNE_RUNS < TUNE_FAST_MS) total = 1 + (int)(TUNE_FAST_MS / dt);
                continue;
            }
            times[runs++] = dt;
        }
    }
    mxp__inst_release(inst);
    mxp__tune_dev_end(&td); /* host pointers back in t, bt and ws */
    free(ws);
    for (uint32_t i = 0; bt && i < n_out; i++) free(bt[i].data);
    for (uint32_t i = 0; bt && i < n_in; i++) free(bt[2 * n_out + n_in + i].data);
    free(bt);
    free(breq);
    for (uint32_t i = 0; t && i < nt; i++) free(t[i].data);
    free(t);
    free(req);
    if (rc) return rc;
    qsort(times, (size_t)runs, sizeof *times, cmp_double);
    *out_ms = runs ? times[runs / 2] : 0;
    if (out_min_ms) *out_min_ms = runs ? times[0] : 0;
    return MXP_OK;
}
