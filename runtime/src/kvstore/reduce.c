/* reduce.c — the engine operations a KVStore push or pull becomes: the
 * local sum of the arrays pushed for one key, a copy between two arrays of
 * a key's shape, and the hand-off of a key's buffers to a transport pack
 * (pushpull or push of merged, pull into stored; asynchronous: the engine
 * op completes when the transport calls back, so no engine worker ever
 * waits on the network).
 *
 * Not here: key bookkeeping and argument checks (kvstore.c).  Every op
 * captures data pointers and element counts at push time (ndarray.h: a
 * chunk outlives the ops on its var) and keeps no NDArray handle.  Sums
 * and copies run in the engine's priority lane with the caller's priority.
 * The hand-off to a transport is an engine hand-off (engine.h,
 * mxp__engine_push_handoff): the worker whose op wrote the gradient calls
 * the transport right after that op, before its next one, so a gradient
 * reaches the transport as soon as backward wrote it (the transport's own
 * thread orders the transfers); made ready elsewhere it goes to the
 * priority lane.  On the normal lane the hand-off queued behind the compute
 * worker's next op, which the engine runs on the same worker at once (its
 * continuation): with one compute thread, every gradient of a LeNet step
 * reached the transport within ~0.2 ms at the end of the backward and no
 * sum overlapped it.  Taken by a priority worker, it woke a second thread
 * per gradient, which on a one-core process preempted the compute worker.
 * Sums run on the CPU in the arrays' dtype, in argument order
 * (((a0 + a1) + a2) ...), so a given list gives the same bits every time. */
#include "kvstore/kvstore_impl.h"

#include "engine/engine.h"
#include "ndarray/ndarray.h"
#include "profiler/profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct reduce_arg {
    int n, dtype;
    int64_t count;
    void *dst;
    void *src[];
} reduce_arg;

#define SUM_LOOP(T)                                                          \
    do {                                                                     \
        T *d = a->dst;                                                       \
        const T *s0 = a->src[0];                                             \
        if (d != s0) memcpy(d, s0, (size_t)a->count * sizeof(T));            \
        for (int k = 1; k < a->n; k++) {                                     \
            const T *s = a->src[k];                                          \
            for (int64_t i = 0; i < a->count; i++) d[i] += s[i];             \
        }                                                                    \
    } while (0)

static int run_reduce(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    reduce_arg *a = arg;
    switch (a->dtype) {
    case MXP_DTYPE_F32: SUM_LOOP(float); break;
    case MXP_DTYPE_F64: SUM_LOOP(double); break;
    case MXP_DTYPE_I32: SUM_LOOP(int32_t); break;
    case MXP_DTYPE_I64: SUM_LOOP(int64_t); break;
    default: return mxp__error(MXP_ETYPE, "kvstore reduce: dtype %d", a->dtype);
    }
    return MXP_OK;
}

static int64_t numel(const kv_entry *e) {
    int64_t n = 1;
    for (int i = 0; i < e->ndim; i++) n *= e->shape[i];
    return n;
}

int mxp__kv_push_reduce(const kv_entry *e, int n, mxp_ndarray *const *srcs, int priority) {
    reduce_arg *a = malloc(sizeof *a + (size_t)n * sizeof(void *));
    mxp_var **cv = malloc((size_t)n * sizeof *cv);
    if (!a || !cv) {
        free(a);
        free(cv);
        return mxp__error_oom("kvstore push");
    }
    a->n = n;
    a->dtype = e->dtype;
    a->count = numel(e);
    a->dst = mxp__ndarray_dptr(e->merged);
    for (int i = 0; i < n; i++) {
        a->src[i] = mxp__ndarray_dptr(srcs[i]);
        cv[i] = mxp_ndarray_var(srcs[i]);
    }
    mxp_var *mv = mxp_ndarray_var(e->merged);
    char name[128];
    snprintf(name, sizeof name, "kvstore reduce %s", e->label);
    mxp_engine_push_args p = {.sync_fn = run_reduce, .arg = a, .free_arg = free, .const_vars = cv, .n_const = n,
                              .mutate_vars = &mv, .n_mutate = 1, .prop = MXP_FN_PRIORITIZED,
                              .priority = priority, .name = name};
    int rc = mxp_engine_push(&p);
    free(cv);
    if (rc) free(a);
    return rc;
}

typedef struct copy_arg {
    void *dst;
    const void *src;
    size_t bytes;
} copy_arg;

static int run_copy(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    copy_arg *a = arg;
    if (a->dst != a->src) memcpy(a->dst, a->src, a->bytes);
    return MXP_OK;
}

int mxp__kv_push_copy(const kv_entry *e, mxp_ndarray *src, mxp_ndarray *dst, int priority, const char *what) {
    copy_arg *a = malloc(sizeof *a);
    if (!a) return mxp__error_oom("kvstore copy");
    a->dst = mxp__ndarray_dptr(dst);
    a->src = mxp__ndarray_dptr(src);
    a->bytes = (size_t)numel(e) * mxp_dtype_size(e->dtype);
    mxp_var *cv = mxp_ndarray_var(src), *mv = mxp_ndarray_var(dst);
    char name[128];
    snprintf(name, sizeof name, "kvstore %s %s", what, e->label);
    mxp_engine_push_args p = {.sync_fn = run_copy, .arg = a, .free_arg = free, .const_vars = &cv, .n_const = 1,
                              .mutate_vars = &mv, .n_mutate = 1, .prop = MXP_FN_PRIORITIZED,
                              .priority = priority, .name = name};
    int rc = mxp_engine_push(&p);
    if (rc) free(a);
    return rc;
}

void mxp__kv_tensor(const kv_entry *e, mxp_ndarray *nd, mxp_tensor *out) {
    memset(out, 0, sizeof *out);
    out->hdr = (mxp_header)MXP_HEADER(mxp_tensor);
    out->data = mxp__ndarray_chunk_ptr(nd);
    out->byte_offset = mxp__ndarray_offset(nd);
    out->dtype = e->dtype;
    out->ndim = e->ndim;
    out->shape = e->shape;
    out->device = mxp_ndarray_device(nd);
    out->version = 0;
}

/* The transport op's argument: the key (copied: the entry may not outlive
 * a failed store), which call, and the array's view. */
typedef struct transport_arg {
    const mxp_kvstore_def *def;
    void *store;
    int priority;
    int kind;
    int is_str;
    int64_t ikey;
    char *skey;
    int64_t shape[MXP_MAX_NDIM];
    mxp_tensor t;
    int64_t prof_t0;             /* profiler: when the transport got the key */
    mxp_engine_callback prof_cb; /* profiler: the engine's completion, called after recording */
} transport_arg;

/* The transport's completion while profiling: a span on the "kvstore"
 * track from the hand-off to here, then the engine's completion. */
static void transport_done_profiled(void *token, int32_t status, const char *message) {
    transport_arg *a = token;
    char name[64], detail[64];
    const char *what = a->kind == MXP__KV_PUSH ? "push" : a->kind == MXP__KV_PULL ? "pull" : "pushpull";
    if (a->is_str) snprintf(name, sizeof name, "%s '%s'", what, a->skey);
    else snprintf(name, sizeof name, "%s %lld", what, (long long)a->ikey);
    snprintf(detail, sizeof detail, "%s, %llu bytes%s", a->def->name,
             (unsigned long long)mxp_tensor_numel(&a->t) * mxp_dtype_size(a->t.dtype), status ? ", failed" : "");
    mxp__prof_async("kvstore", name, detail, a->prof_t0, mxp__prof_now());
    mxp_engine_callback cb = a->prof_cb; /* a is freed inside done */
    cb.done(cb.token, status, message);
}

static void free_transport(void *arg) {
    transport_arg *a = arg;
    free(a->skey);
    free(a);
}

static void run_transport(void *arg, const mxp_run_ctx *ctx, mxp_engine_callback cb) {
    (void)ctx;
    transport_arg *a = arg;
    mxp_kv_args ka;
    memset(&ka, 0, sizeof ka);
    ka.hdr = (mxp_header)MXP_HEADER(mxp_kv_args);
    ka.user_data = a->def->user_data;
    ka.store = a->store;
    ka.n = 1;
    ka.priority = a->priority;
    const char *sk = a->skey;
    if (a->is_str) ka.str_keys = &sk;
    else ka.int_keys = &a->ikey;
    ka.values = &a->t;
    ka.outs = &a->t;
    ka.complete = (mxp_complete_fn)cb.done;
    ka.complete_token = cb.token;
    if (mxp__prof_on(MXP__PROF_IO)) {
        a->prof_t0 = mxp__prof_now();
        a->prof_cb = cb;
        ka.complete = transport_done_profiled;
        ka.complete_token = a;
    }
    int (*call)(mxp_kv_args *) = a->kind == MXP__KV_PUSH ? a->def->push
                                 : a->kind == MXP__KV_PULL ? a->def->pull
                                                           : a->def->pushpull;
    int rc = call ? call(&ka)
                  : mxp__error(MXP_EPLUGIN, "kvstore '%s': the transport has no %s", a->def->name,
                               a->kind == MXP__KV_PUSH ? "push" : a->kind == MXP__KV_PULL ? "pull" : "pushpull");
    /* A call that returns an error does not call complete (mxp/kvstore.h). */
    if (rc) cb.done(cb.token, rc, mxp_last_error());
}

int mxp__kv_push_transport(mxp_kvstore *kv, const kv_entry *e, int kind, int priority) {
    return mxp__kv_push_transport_on(kv, e, kind, kind == MXP__KV_PULL ? e->stored : e->merged, priority);
}

int mxp__kv_push_transport_on(mxp_kvstore *kv, const kv_entry *e, int kind, mxp_ndarray *target, int priority) {
    transport_arg *a = calloc(1, sizeof *a);
    if (!a) return mxp__error_oom("kvstore push");
    a->def = kv->def;
    a->store = kv->store;
    a->priority = priority;
    a->kind = kind;
    a->is_str = e->is_str;
    a->ikey = e->ikey;
    if (e->is_str && !(a->skey = strdup(e->skey))) {
        free(a);
        return mxp__error_oom("kvstore push");
    }
    /* A pull lands in stored; it also takes merged's var so it runs after
     * this process's earlier push of the key has been sent (the servers
     * then see the push first).  An in-place pushpull takes it too: two
     * pushpulls of one key into different arrays share no other var, and
     * unordered they reached the transport in different orders on
     * different ranks, which then summed one rank's first array with
     * another's second. */
    mxp__kv_tensor(e, target, &a->t);
    memcpy(a->shape, e->shape, sizeof a->shape);
    a->t.shape = a->shape;
    mxp_var *mv[2] = {mxp_ndarray_var(target), mxp_ndarray_var(e->merged)};
    char name[160];
    snprintf(name, sizeof name, "kvstore %s %s %s", kv->type,
             kind == MXP__KV_PUSH ? "push" : kind == MXP__KV_PULL ? "pull" : "pushpull", e->label);
    mxp_engine_push_args p = {.async_fn = run_transport, .arg = a, .free_arg = free_transport,
                              .mutate_vars = mv, .n_mutate = target == e->merged ? 1 : 2,
                              .prop = MXP_FN_PRIORITIZED, .priority = priority, .name = name};
    /* A hand-off (engine.h): a transport's push/pull/pushpull returns at
     * once (mxp/kvstore.h), so the worker that wrote the gradient calls it
     * itself, right after the write. */
    int rc = mxp__engine_push_handoff(&p);
    if (rc) free_transport(a);
    return rc;
}
