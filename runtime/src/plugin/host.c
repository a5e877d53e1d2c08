/* host.c — the mxp_host table handed to every pack's init: each slot is a
 * thin adapter onto a runtime module.
 *   set_error/log       -> base (mxp__errorv, mxp_logv)
 *   num_threads         -> engine (mxp_num_threads)
 *   parallel_for        -> engine/parallel.h (mxp__parallel_for)
 *   alloc_host/free_host-> storage pools (CPU), 64-byte aligned; the block
 *                          record sits in the 64 bytes before the pointer
 *   rng_*               -> resource (Philox streams reserved at push time;
 *                          mxp_rng is the op's stream plus a cursor)
 *   device_type         -> registry (registered device names)
 *   parse/free_params   -> params.c
 *   invoke              -> op/ (the node runtime), see mxp__host_set_invoke
 *   engine_*            -> the public engine API.
 *   param_get           -> param_access.c (typed reads of an op's params).
 * The table is static and lives for the process: packs may keep it. */
#include "plugin/plugin_impl.h"

#include "engine/parallel.h"
#include "resource/resource.h"
#include "storage/storage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int h_set_error(int32_t status, const char *fmt, ...) MXP_PRINTF(2, 3);
static int h_set_error(int32_t status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = mxp__errorv(status < 0 ? status : MXP_EPLUGIN, fmt ? fmt : "(no message)", ap);
    va_end(ap);
    return rc;
}

static void h_log(int32_t level, const char *category, const char *fmt, ...) MXP_PRINTF(3, 4);
static void h_log(int32_t level, const char *category, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mxp_logv(level, category ? category : "pack", fmt ? fmt : "", ap);
    va_end(ap);
}

static int32_t h_num_threads(void) { return mxp_num_threads(); }

static int h_parallel_for(int64_t n, int64_t grain, mxp_range_fn fn, void *arg) {
    return mxp__parallel_for(n, grain, fn, arg);
}

#define HOST_HDR 64 /* keeps 64-byte alignment of the user pointer */

static void *h_alloc_host(uint64_t bytes) {
    mxp_storage_block b;
    mxp_device cpu = {MXP_DEV_CPU, 0};
    if (bytes > UINT64_MAX - HOST_HDR) return NULL;
    if (mxp__storage_alloc(cpu, (size_t)bytes + HOST_HDR, &b) != MXP_OK || !b.ptr) return NULL;
    memcpy(b.ptr, &b, sizeof b);
    return (char *)b.ptr + HOST_HDR;
}

static void h_free_host(void *ptr) {
    if (!ptr) return;
    mxp_storage_block b;
    memcpy(&b, (char *)ptr - HOST_HDR, sizeof b);
    mxp__storage_free(&b);
}

/* ------------------------------------------------------------ rng */
/* Outputs of a kind start where the previous draw left the cursor, rounded
 * up so that a draw never reuses values (pairs stay aligned for normals). */
static int rng_take(mxp_rng *r, mxp_rng_kind kind, uint64_t n, uint64_t *first) {
    if (!r) return mxp__error(MXP_EMISUSE, "rng: the op did not request MXP_RESOURCE_RANDOM");
    uint64_t per2; /* values per 2 outputs */
    switch (kind) {
    case MXP_RNG_UNIFORM_F64: per2 = 4; break;
    case MXP_RNG_NORMAL_F32: per2 = 2; break;
    case MXP_RNG_NORMAL_F64: per2 = 4; break;
    default: per2 = 2; break;
    }
    uint64_t f = (r->cursor * 2 + per2 - 1) / per2; /* outputs already covered */
    if ((kind == MXP_RNG_NORMAL_F32 || kind == MXP_RNG_NORMAL_F64) && (f & 1)) f++;
    *first = f;
    uint64_t end = f + n;
    if (kind == MXP_RNG_NORMAL_F32 || kind == MXP_RNG_NORMAL_F64) end += end & 1;
    r->cursor = end * per2 / 2;
    return MXP_OK;
}

static int h_rng_uniform_f32(mxp_rng *r, float lo, float hi, float *out, uint64_t n) {
    uint64_t f = 0;
    int rc = rng_take(r, MXP_RNG_UNIFORM_F32, n, &f);
    return rc ? rc : mxp__rng_uniform_f32(&r->stream, f, n, lo, hi, out);
}
static int h_rng_normal_f32(mxp_rng *r, float m, float s, float *out, uint64_t n) {
    uint64_t f = 0;
    int rc = rng_take(r, MXP_RNG_NORMAL_F32, n, &f);
    return rc ? rc : mxp__rng_normal_f32(&r->stream, f, n, m, s, out);
}
static int h_rng_bernoulli_f32(mxp_rng *r, float p, float *out, uint64_t n) {
    uint64_t f = 0;
    int rc = rng_take(r, MXP_RNG_BERNOULLI, n, &f);
    return rc ? rc : mxp__rng_bernoulli_f32(&r->stream, f, n, p, out);
}
static int h_rng_uniform_f64(mxp_rng *r, double lo, double hi, double *out, uint64_t n) {
    uint64_t f = 0;
    int rc = rng_take(r, MXP_RNG_UNIFORM_F64, n, &f);
    return rc ? rc : mxp__rng_uniform_f64(&r->stream, f, n, lo, hi, out);
}
static int h_rng_normal_f64(mxp_rng *r, double m, double s, double *out, uint64_t n) {
    uint64_t f = 0;
    int rc = rng_take(r, MXP_RNG_NORMAL_F64, n, &f);
    return rc ? rc : mxp__rng_normal_f64(&r->stream, f, n, m, s, out);
}
static int h_rng_bits(mxp_rng *r, uint32_t *out, uint64_t n) {
    uint64_t f = 0;
    int rc = rng_take(r, MXP_RNG_U32, n, &f);
    return rc ? rc : mxp__rng_u32(&r->stream, f, n, out);
}
static int h_rng_philox(mxp_rng *r, uint64_t *key, uint64_t *ctr) {
    if (key) *key = 0;
    if (ctr) *ctr = 0;
    if (!r) return mxp__error(MXP_EMISUSE, "rng: the op did not request MXP_RESOURCE_RANDOM");
    if (key) *key = (uint64_t)r->stream.key[0] | (uint64_t)r->stream.key[1] << 32;
    if (ctr) *ctr = r->stream.counter + (r->cursor + 3) / 4;
    return MXP_OK;
}

static int32_t h_device_type(const char *name) { return mxp__registry_device_type(name); }

static int h_parse_params(const mxp_param_def *defs, uint32_t n_defs, const char *const *keys,
                          const char *const *vals, uint32_t n_kwargs, void *out, const char *what) {
    return mxp__params_parse(defs, n_defs, keys, vals, n_kwargs, out, what ? what : "pack params");
}

static void h_free_params(const mxp_param_def *defs, uint32_t n_defs, void *params) {
    mxp__params_free(defs, n_defs, params);
}

/* invoke: provided by the op module once it exists (weak link-free hook).
 * Atomic: every mxp_invoke installs it, from any number of threads at once. */
static _Atomic(mxp__host_invoke_fn) g_invoke;
void mxp__host_set_invoke(mxp__host_invoke_fn fn) { atomic_store_explicit(&g_invoke, fn, memory_order_release); }

static int h_invoke(const char *op, uint32_t n_in, const mxp_tensor *in, uint32_t n_out, const mxp_tensor *out,
                    const char *const *keys, const char *const *vals, uint32_t n_kwargs) {
    mxp__host_invoke_fn fn = atomic_load_explicit(&g_invoke, memory_order_acquire);
    if (!fn) return mxp__error(MXP_EUNSUPPORTED, "host.invoke('%s'): the op runtime is not available", op);
    return fn(op, n_in, in, n_out, out, keys, vals, n_kwargs);
}

static int h_new_var(struct mxp_var **out) { return mxp_engine_new_var(out); }
static void h_delete_var(struct mxp_var *v) { mxp_engine_delete_var(v); }

typedef struct push_wrap {
    int (*fn)(void *);
    void (*async_fn)(void *, mxp_complete_fn, void *);
    void *arg;
    void (*free_arg)(void *);
} push_wrap;

static int wrap_sync(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    push_wrap *w = arg;
    return w->fn(w->arg);
}

static void wrap_done(void *token, int32_t status, const char *msg) {
    mxp_engine_callback *cb = token;
    mxp_engine_callback c = *cb;
    free(cb);
    c.done(c.token, status, msg);
}

static void wrap_async(void *arg, const mxp_run_ctx *ctx, mxp_engine_callback cb) {
    (void)ctx;
    push_wrap *w = arg;
    mxp_engine_callback *heap = malloc(sizeof *heap);
    if (!heap) {
        cb.done(cb.token, MXP_ENOMEM, "out of memory in host.engine_push");
        return;
    }
    *heap = cb;
    w->async_fn(w->arg, wrap_done, heap);
}

static void wrap_free(void *arg) {
    push_wrap *w = arg;
    if (w->free_arg) w->free_arg(w->arg);
    free(w);
}

static int h_engine_push(const mxp_host_push_args *a) {
    if (!a || !!a->fn == !!a->async_fn)
        return mxp__error(MXP_EINVAL, "host.engine_push: exactly one of fn and async_fn is required");
    push_wrap *w = malloc(sizeof *w);
    if (!w) return mxp__error_oom("engine_push");
    w->fn = a->fn;
    w->async_fn = a->async_fn;
    w->arg = a->arg;
    w->free_arg = a->free_arg;
    mxp_engine_push_args p;
    memset(&p, 0, sizeof p);
    if (a->fn) p.sync_fn = wrap_sync;
    else p.async_fn = wrap_async;
    p.arg = w;
    p.free_arg = wrap_free;
    p.const_vars = a->const_vars;
    p.n_const = (int)a->n_const;
    p.mutate_vars = a->mutate_vars;
    p.n_mutate = (int)a->n_mutate;
    p.device = a->device;
    p.prop = a->fn ? a->prop : MXP_FN_ASYNC;
    p.priority = a->priority;
    p.name = a->name;
    int rc = mxp_engine_push(&p);
    if (rc) free(w);
    return rc;
}

static int h_wait_for_var(struct mxp_var *v) { return mxp_engine_wait_for_var(v); }

static const mxp_host g_host = {
    .hdr = MXP_HEADER(mxp_host),
    .host_version = MXP_HOST_VERSION_STRING,
    .set_error = h_set_error,
    .log = h_log,
    .num_threads = h_num_threads,
    .parallel_for = h_parallel_for,
    .alloc_host = h_alloc_host,
    .free_host = h_free_host,
    .rng_uniform_f32 = h_rng_uniform_f32,
    .rng_normal_f32 = h_rng_normal_f32,
    .rng_bernoulli_f32 = h_rng_bernoulli_f32,
    .rng_uniform_f64 = h_rng_uniform_f64,
    .rng_normal_f64 = h_rng_normal_f64,
    .rng_bits = h_rng_bits,
    .rng_philox = h_rng_philox,
    .device_type = h_device_type,
    .parse_params = h_parse_params,
    .free_params = h_free_params,
    .invoke = h_invoke,
    .engine_new_var = h_new_var,
    .engine_delete_var = h_delete_var,
    .engine_push = h_engine_push,
    .engine_wait_for_var = h_wait_for_var,
    .param_get = mxp__param_get,
};

const mxp_host *mxp__host_table(void) { return &g_host; }
