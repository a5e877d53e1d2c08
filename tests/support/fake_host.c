/* fake_host.c — the fake host of fake_host.h: the mxp_host table, the
 * recording registrar and pack loading, kwargs through the runtime's
 * parser, arrays, and the iterator driver.  Op calls are in
 * fake_host_op.c.  Test support only: allocation failures abort, nothing
 * here is meant to be called from several test threads at once except the
 * host table itself (parallel_for's helper thread calls pack kernels). */
#include "fake_host.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mxplug/base.h"

/* The runtime's kwargs parser (plugin/params.c).  Declared here rather than
 * by including plugin/plugin.h, which defines the runtime's struct mxp_rng
 * (the fake host has its own). */
int mxp__params_parse(const mxp_param_def *defs, uint32_t n_defs, const char *const *keys,
                      const char *const *vals, uint32_t n_kwargs, void *out_struct, const char *what);
void mxp__params_free(const mxp_param_def *defs, uint32_t n_defs, void *params);

#define FH_MAX_REG 512

struct fh_pack {
    void *dl;
    const mxp_plugin_desc *desc;
    const mxp_op_def *ops[FH_MAX_REG];
    const mxp_op_impl *impls[FH_MAX_REG];
    const mxp_simple_op_def *simples[FH_MAX_REG];
    const mxp_iter_def *iters[FH_MAX_REG];
    int n_ops, n_impls, n_simples, n_iters;
};

static _Thread_local char g_err[1024];
static char g_log[1024];
static int g_threads = 1;

static int vfail(int status, const char *fmt, va_list ap) {
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    return status;
}

int fh__fail(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(status, fmt, ap);
    va_end(ap);
    return status;
}

const char *fh_error(void) { return g_err; }
void fh_clear_error(void) { g_err[0] = 0; }
const char *fh_log(void) { return g_log; }

void *fh__xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) abort();
    return p;
}

void fh_set_threads(int n) { g_threads = n < 2 ? 1 : 2; }

int fh_n_devices(void) { return 1; }
mxp_device fh_device_at(int i) {
    (void)i;
    return (mxp_device){MXP_DEV_CPU, 0};
}

/* ------------------------------------------------------------ host table */
static int h_set_error(int32_t status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(status, fmt, ap);
    va_end(ap);
    return status;
}

static void h_log(int32_t level, const char *cat, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_log, sizeof g_log, fmt, ap);
    va_end(ap);
    if (level <= MXP_LOG_WARN) fprintf(stderr, "[%s] %s\n", cat ? cat : "?", g_log);
}

static int32_t h_num_threads(void) { return g_threads; }

/* Chunks handed out in order from an atomic cursor, to the caller and (with
 * 2 threads) one helper thread. */
typedef struct pf_job {
    int64_t n, chunk;
    mxp_range_fn fn;
    void *arg;
    atomic_llong next;
} pf_job;

static void pf_run(pf_job *j) {
    for (;;) {
        int64_t b = atomic_fetch_add(&j->next, j->chunk);
        if (b >= j->n) break;
        j->fn(j->arg, b, b + j->chunk < j->n ? b + j->chunk : j->n);
    }
}

static void *pf_thread(void *p) {
    pf_run(p);
    return NULL;
}

static int h_parallel_for(int64_t n, int64_t grain, mxp_range_fn fn, void *arg) {
    if (n <= 0) return MXP_OK;
    if (grain < 1) grain = 1;
    /* 1 thread: chunks of `grain`, so kernels see non-zero `begin`.
     * 2 threads: two large chunks at most (each at least `grain`). */
    int64_t chunk = grain;
    if (g_threads > 1 && chunk < (n + 1) / 2) chunk = (n + 1) / 2;
    pf_job j = {n, chunk, fn, arg, 0};
    pthread_t t;
    int spawned = g_threads > 1 && chunk < n && pthread_create(&t, NULL, pf_thread, &j) == 0;
    pf_run(&j);
    if (spawned) pthread_join(t, NULL);
    return MXP_OK;
}

static int ctx_parallel_for(const mxp_op_ctx *ctx, int64_t n, int64_t grain, mxp_range_fn fn, void *arg) {
    (void)ctx;
    return h_parallel_for(n, grain, fn, arg);
}

void *fh__alloc(uint64_t bytes) {
    uint64_t b = (bytes + 63) & ~(uint64_t)63;
    void *p = aligned_alloc(64, b ? b : 64);
    if (!p) abort();
    return p;
}

static void *h_alloc(uint64_t bytes) { return fh__alloc(bytes); }
static void h_free(void *p) { free(p); }

struct mxp_rng {
    uint64_t s;
};

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double u01(uint64_t *s) { return (double)(splitmix(s) >> 11) * (1.0 / 9007199254740992.0); }

double fh_rand(uint64_t *s, double lo, double hi) { return lo + (hi - lo) * u01(s); }

static double gauss(uint64_t *s) {
    double u = u01(s), v = u01(s);
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static int h_unif32(mxp_rng *r, float lo, float hi, float *o, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) o[i] = (float)fh_rand(&r->s, lo, hi);
    return MXP_OK;
}
static int h_norm32(mxp_rng *r, float m, float sd, float *o, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) o[i] = m + sd * (float)gauss(&r->s);
    return MXP_OK;
}
static int h_bern32(mxp_rng *r, float p, float *o, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) o[i] = u01(&r->s) < p ? 1.0f : 0.0f;
    return MXP_OK;
}
static int h_unif64(mxp_rng *r, double lo, double hi, double *o, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) o[i] = fh_rand(&r->s, lo, hi);
    return MXP_OK;
}
static int h_norm64(mxp_rng *r, double m, double sd, double *o, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) o[i] = m + sd * gauss(&r->s);
    return MXP_OK;
}
static int h_bits(mxp_rng *r, uint32_t *o, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) o[i] = (uint32_t)splitmix(&r->s);
    return MXP_OK;
}
static int h_philox(mxp_rng *r, uint64_t *k, uint64_t *c) {
    *k = r->s;
    *c = 0;
    return MXP_OK;
}

static int32_t h_device_type(const char *name) {
    return name && strcmp(name, "cpu") == 0 ? MXP_DEV_CPU : MXP_DEV_UNKNOWN;
}

/* The runtime's parser; its message (mxp_last_error) becomes the fake
 * host's last error. */
static int h_parse_params(const mxp_param_def *defs, uint32_t n_defs, const char *const *keys,
                          const char *const *vals, uint32_t n_kwargs, void *out, const char *what) {
    int rc = mxp__params_parse(defs, n_defs, keys, vals, n_kwargs, out, what ? what : "params");
    if (rc) fh__fail(rc, "%s", mxp_last_error());
    return rc;
}

void fh_params_free(const mxp_param_def *defs, uint32_t n, void *params) { mxp__params_free(defs, n, params); }

static const mxp_host g_host = {
    .hdr = MXP_HEADER(mxp_host),
    .host_version = "fake-host",
    .set_error = h_set_error,
    .log = h_log,
    .num_threads = h_num_threads,
    .parallel_for = h_parallel_for,
    .alloc_host = h_alloc,
    .free_host = h_free,
    .rng_uniform_f32 = h_unif32,
    .rng_normal_f32 = h_norm32,
    .rng_bernoulli_f32 = h_bern32,
    .rng_uniform_f64 = h_unif64,
    .rng_normal_f64 = h_norm64,
    .rng_bits = h_bits,
    .rng_philox = h_philox,
    .device_type = h_device_type,
    .parse_params = h_parse_params,
    .free_params = fh_params_free,
};

const mxp_host *fh_host(void) { return &g_host; }

static _Thread_local struct mxp_rng g_rng = {12345};

mxp_op_ctx fh__ctx(void *ws, uint64_t ws_bytes, int is_train, int use_rng) {
    mxp_op_ctx c;
    memset(&c, 0, sizeof c);
    c.hdr = (mxp_header)MXP_HEADER(mxp_op_ctx);
    c.device.type = MXP_DEV_CPU;
    c.is_train = is_train;
    c.workspace = ws;
    c.workspace_bytes = ws_bytes;
    c.rng = use_rng ? &g_rng : NULL;
    c.parallel_for = ctx_parallel_for;
    c.host = &g_host;
    return c;
}

/* -------------------------------------------------------------- params */
int fh_parse(const mxp_param_def *defs, uint32_t n, const char *const *kw, void *out) {
    const char *keys[64], *vals[64];
    uint32_t nk = 0;
    for (int k = 0; kw && kw[k]; k += 2) {
        if (nk == 64) return fh__fail(MXP_EINVAL, "more than 64 kwargs");
        keys[nk] = kw[k];
        vals[nk++] = kw[k + 1];
    }
    return h_parse_params(defs, n, keys, vals, nk, out, "params");
}

int fh_parse_text(const mxp_param_def *defs, uint32_t n, uint32_t size, const char *kwargs, void **out) {
    *out = NULL;
    char *buf = strdup(kwargs ? kwargs : "");
    if (!buf) abort();
    const char *kw[2 * 32 + 1];
    int nk = 0;
    char *p = buf;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        char *eq = strchr(p, '=');
        if (!eq || nk == 32) {
            free(buf);
            return fh__fail(MXP_EINVAL, "bad kwargs '%s'", kwargs);
        }
        *eq = 0;
        kw[2 * nk] = p;
        p = eq + 1;
        kw[2 * nk + 1] = p;
        int depth = 0; /* a value "(1, 2)" may hold blanks */
        while (*p && (depth || *p != ' ')) {
            if (*p == '(' || *p == '[') depth++;
            if (*p == ')' || *p == ']') depth--;
            p++;
        }
        if (*p) *p++ = 0;
        nk++;
    }
    kw[2 * nk] = NULL;
    void *s = fh__xcalloc(1, size);
    int rc = fh_parse(defs, n, kw, s); /* STRING values are copies: buf can go */
    free(buf);
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    return MXP_OK;
}

/* ----------------------------------------------------------- registrar */
static int r_add_op(mxp_registrar *r, const mxp_op_def *d) {
    fh_pack *p = r->host_private;
    if (p->n_ops >= FH_MAX_REG) return fh__fail(MXP_ENOMEM, "too many ops");
    if (!d->name || !d->infer_shape) return fh__fail(MXP_EINVAL, "op def without name/infer_shape");
    p->ops[p->n_ops++] = d;
    return MXP_OK;
}
static int r_add_impl(mxp_registrar *r, const mxp_op_impl *d) {
    fh_pack *p = r->host_private;
    if (p->n_impls >= FH_MAX_REG) return fh__fail(MXP_ENOMEM, "too many impls");
    if (!d->op_name || !d->forward) return fh__fail(MXP_EINVAL, "impl without op/forward");
    p->impls[p->n_impls++] = d;
    return MXP_OK;
}
static int r_add_simple(mxp_registrar *r, const mxp_simple_op_def *d) {
    fh_pack *p = r->host_private;
    if (p->n_simples >= FH_MAX_REG) return fh__fail(MXP_ENOMEM, "too many simple ops");
    if (!d->name || !d->forward) return fh__fail(MXP_EINVAL, "simple op without name/forward");
    p->simples[p->n_simples++] = d;
    return MXP_OK;
}
static int r_add_iter(mxp_registrar *r, const mxp_iter_def *d) {
    fh_pack *p = r->host_private;
    if (!d || !d->name || d->hdr.struct_size < sizeof(mxp_iter_def))
        return fh__fail(MXP_EINVAL, "add_iter: bad definition");
    if (p->n_iters >= FH_MAX_REG) return fh__fail(MXP_ENOMEM, "add_iter: too many");
    p->iters[p->n_iters++] = d;
    return MXP_OK;
}
static int r_add_device(mxp_registrar *r, const mxp_device_def *d) {
    (void)r, (void)d;
    return fh__fail(MXP_EUNSUPPORTED, "fake host: devices are not supported");
}
static int r_add_kvstore(mxp_registrar *r, const mxp_kvstore_def *d) {
    (void)r, (void)d;
    return fh__fail(MXP_EUNSUPPORTED, "fake host: kvstores are not supported");
}

fh_pack *fh_load(const char *name_or_path) {
    char path[1024];
    if (strchr(name_or_path, '/'))
        snprintf(path, sizeof path, "%s", name_or_path);
    else
        snprintf(path, sizeof path, "%s/plugins/libmxp-%s.so", MXP_BUILD_DIR, name_or_path);
    fh_clear_error();
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        fh__fail(MXP_ENOENT, "dlopen '%s': %s", path, dlerror());
        return NULL;
    }
    mxp_plugin_entry_fn entry;
    void *sym = dlsym(dl, MXP_PLUGIN_ENTRY_NAME);
    memcpy(&entry, &sym, sizeof entry); /* object -> function pointer */
    if (!entry) {
        fh__fail(MXP_EABI, "'%s' has no %s", path, MXP_PLUGIN_ENTRY_NAME);
        dlclose(dl);
        return NULL;
    }
    fh_pack *p = fh__xcalloc(1, sizeof *p);
    p->dl = dl;
    p->desc = entry();
    mxp_registrar reg = {.hdr = MXP_HEADER(mxp_registrar), .host_private = p, .add_op = r_add_op,
                         .add_impl = r_add_impl, .add_simple_op = r_add_simple, .add_device = r_add_device,
                         .add_kvstore = r_add_kvstore, .add_iter = r_add_iter};
    mxp_plugin_init_args a = {.hdr = MXP_HEADER(mxp_plugin_init_args), .host = &g_host, .registrar = &reg,
                              .library_path = path};
    int rc = MXP_EABI;
    if (p->desc && p->desc->hdr.abi_major == MXP_ABI_MAJOR && p->desc->init) rc = p->desc->init(&a);
    if (rc != MXP_OK) {
        if (!g_err[0]) fh__fail(rc, "'%s': init failed (%d)", path, rc);
        dlclose(dl);
        free(p);
        return NULL;
    }
    return p;
}

void fh_unload(fh_pack *p) {
    if (!p) return;
    if (p->desc->fini) {
        mxp_plugin_fini_args f = {.hdr = MXP_HEADER(mxp_plugin_fini_args), .host = &g_host};
        p->desc->fini(&f);
    }
    dlclose(p->dl);
    free(p);
}

static int name_is(const char *name, const char *const *aliases, const char *want) {
    if (strcmp(name, want) == 0) return 1;
    for (int i = 0; aliases && aliases[i]; i++)
        if (strcmp(aliases[i], want) == 0) return 1;
    return 0;
}

const mxp_op_def *fh_op_def(const fh_pack *p, const char *name) {
    for (int i = 0; i < p->n_ops; i++)
        if (name_is(p->ops[i]->name, p->ops[i]->aliases, name)) return p->ops[i];
    return NULL;
}
const mxp_op_impl *fh_impl(const fh_pack *p, const char *op, const char *impl) {
    const mxp_op_def *d = fh_op_def(p, op);
    if (!d) return NULL;
    for (int i = 0; i < p->n_impls; i++)
        if (strcmp(p->impls[i]->op_name, d->name) == 0 && (!impl || strcmp(p->impls[i]->impl_name, impl) == 0))
            return p->impls[i];
    return NULL;
}
const mxp_simple_op_def *fh_simple(const fh_pack *p, const char *name) {
    for (int i = 0; i < p->n_simples; i++)
        if (name_is(p->simples[i]->name, p->simples[i]->aliases, name)) return p->simples[i];
    return NULL;
}
const mxp_iter_def *fh_iter_def(const fh_pack *p, const char *name) {
    for (int i = 0; i < p->n_iters; i++)
        if (strcmp(p->iters[i]->name, name) == 0) return p->iters[i];
    return NULL;
}
int fh_n_ops(const fh_pack *p) { return p->n_ops; }
const mxp_op_def *fh_op_at(const fh_pack *p, int i) { return p->ops[i]; }
int fh_n_simple(const fh_pack *p) { return p->n_simples; }
const mxp_simple_op_def *fh_simple_at(const fh_pack *p, int i) { return p->simples[i]; }
int fh_n_impls(const fh_pack *p) { return p->n_impls; }
const mxp_op_impl *fh_impl_at(const fh_pack *p, int i) { return p->impls[i]; }
int fh_n_iters(const fh_pack *p) { return p->n_iters; }
const mxp_plugin_desc *fh_pack_desc(const fh_pack *p) { return p->desc; }

/* --------------------------------------------------------------- arrays */
int64_t fh_numel(const fh_arr *a) {
    int64_t n = 1;
    for (int i = 0; i < a->ndim; i++) n *= a->shape[i];
    return n;
}

int64_t fh_shape_numel(const mxp_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->dims[i];
    return n;
}

fh_arr fh_arr_new(int32_t dtype, int ndim, const int64_t *shape) {
    fh_arr a;
    memset(&a, 0, sizeof a);
    a.dtype = dtype;
    a.ndim = ndim;
    for (int i = 0; i < ndim; i++) a.shape[i] = shape[i];
    a.data = fh__xcalloc((size_t)fh_numel(&a), mxp_dtype_size(dtype));
    return a;
}

fh_arr fh_arr_from(int32_t dtype, int ndim, const int64_t *shape, const double *vals) {
    fh_arr a = fh_arr_new(dtype, ndim, shape);
    for (int64_t i = 0; i < fh_numel(&a); i++) fh_set(&a, i, vals[i]);
    return a;
}

fh_arr fh_arr_clone(const fh_arr *src) {
    fh_arr a = fh_arr_new(src->dtype, src->ndim, src->shape);
    memcpy(a.data, src->data, (size_t)fh_numel(src) * mxp_dtype_size(src->dtype));
    return a;
}

fh_arr fh_arr_cast(const fh_arr *src, int32_t dtype) {
    fh_arr a = fh_arr_new(dtype, src->ndim, src->shape);
    for (int64_t i = 0; i < fh_numel(src); i++) fh_set(&a, i, fh_get(src, i));
    return a;
}

void fh_arr_free(fh_arr *a) {
    free(a->data);
    a->data = NULL;
}

double fh_get_raw(const void *data, int32_t dtype, int64_t i) {
    const char *p = (const char *)data + i * mxp_dtype_size(dtype);
    switch (dtype) {
    case MXP_DTYPE_F32: return *(const float *)p;
    case MXP_DTYPE_F64: return *(const double *)p;
    case MXP_DTYPE_U8: case MXP_DTYPE_BOOL: return *(const uint8_t *)p;
    case MXP_DTYPE_I8: return *(const int8_t *)p;
    case MXP_DTYPE_I32: return *(const int32_t *)p;
    case MXP_DTYPE_I64: return (double)*(const int64_t *)p;
    case MXP_DTYPE_I16: return *(const int16_t *)p;
    case MXP_DTYPE_U16: return *(const uint16_t *)p;
    case MXP_DTYPE_U32: return *(const uint32_t *)p;
    case MXP_DTYPE_U64: return (double)*(const uint64_t *)p;
    case MXP_DTYPE_BF16: { uint32_t u = (uint32_t)*(const uint16_t *)p << 16; float f; memcpy(&f, &u, 4); return f; }
    default: return NAN;
    }
}

void fh_set_raw(void *data, int32_t dtype, int64_t i, double v) {
    char *p = (char *)data + i * mxp_dtype_size(dtype);
    switch (dtype) {
    case MXP_DTYPE_F32: *(float *)p = (float)v; break;
    case MXP_DTYPE_F64: *(double *)p = v; break;
    case MXP_DTYPE_U8: case MXP_DTYPE_BOOL: *(uint8_t *)p = (uint8_t)v; break;
    case MXP_DTYPE_I8: *(int8_t *)p = (int8_t)v; break;
    case MXP_DTYPE_I32: *(int32_t *)p = (int32_t)v; break;
    case MXP_DTYPE_I64: *(int64_t *)p = (int64_t)v; break;
    case MXP_DTYPE_I16: *(int16_t *)p = (int16_t)v; break;
    case MXP_DTYPE_U16: *(uint16_t *)p = (uint16_t)v; break;
    case MXP_DTYPE_U32: *(uint32_t *)p = (uint32_t)v; break;
    case MXP_DTYPE_U64: *(uint64_t *)p = (uint64_t)v; break;
    case MXP_DTYPE_BF16: { /* nearest even (finite values only: test data) */
        float f = (float)v; uint32_t u; memcpy(&u, &f, 4);
        *(uint16_t *)p = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
        break;
    }
    default: break;
    }
}

double fh_get(const fh_arr *a, int64_t i) { return fh_get_raw(a->data, a->dtype, i); }
void fh_set(fh_arr *a, int64_t i, double v) { fh_set_raw(a->data, a->dtype, i, v); }

void fh_fill_uniform(fh_arr *a, uint64_t seed, double lo, double hi) {
    uint64_t s = seed * 7919 + 1;
    for (int64_t i = 0; i < fh_numel(a); i++) fh_set(a, i, fh_rand(&s, lo, hi));
}

mxp_tensor fh_view(const fh_arr *a) {
    mxp_tensor t;
    memset(&t, 0, sizeof t);
    t.hdr = (mxp_header)MXP_HEADER(mxp_tensor);
    t.data = a->data;
    t.dtype = a->dtype;
    t.ndim = a->ndim;
    t.shape = a->shape;
    t.strides = NULL;
    t.device.type = MXP_DEV_CPU;
    return t;
}

/* ------------------------------------------------------------ iterators */
void fh_iter_destroy(fh_iter *it) {
    if (!it) return;
    if (it->state && it->def->destroy) {
        mxp_iter_destroy_args da = {.hdr = MXP_HEADER(mxp_iter_destroy_args), .user_data = it->def->user_data,
                                    .state = it->state};
        it->def->destroy(&da);
    }
    if (it->params) {
        fh_params_free(it->def->params, it->def->n_params, it->params);
        free(it->params);
    }
    for (int i = 0; i < FH_ITER_MAX_ENTRIES; i++) free(it->bufs[i]);
    free(it->index);
    memset(it, 0, sizeof *it);
}

int fh_iter_create(const mxp_iter_def *def, const char *const *keys, const char *const *vals, uint32_t n_kwargs,
                   fh_iter *it) {
    memset(it, 0, sizeof *it);
    fh_clear_error();
    it->def = def;
    it->params = fh__xcalloc(1, def->params_size);
    int rc = h_parse_params(def->params, def->n_params, keys, vals, n_kwargs, it->params, def->name);
    if (rc != MXP_OK) goto fail;
    mxp_iter_create_args ca = {.hdr = MXP_HEADER(mxp_iter_create_args), .params = it->params,
                               .user_data = def->user_data};
    rc = def->create(&ca);
    if (rc != MXP_OK) goto fail;
    it->state = ca.state;
    mxp_iter_provide_args pa = {.hdr = MXP_HEADER(mxp_iter_provide_args), .user_data = def->user_data,
                                .state = it->state, .capacity = FH_ITER_MAX_ENTRIES, .names = it->names,
                                .shapes = it->shapes, .dtypes = it->dtypes};
    rc = def->provide(&pa);
    if (rc != MXP_OK) goto fail;
    if (pa.n_data + pa.n_label > FH_ITER_MAX_ENTRIES) {
        rc = fh__fail(MXP_EINVAL, "provide: too many entries");
        goto fail;
    }
    it->n_data = pa.n_data;
    it->n_label = pa.n_label;
    int64_t batch = 0;
    for (uint32_t i = 0; i < pa.n_data + pa.n_label; i++) {
        const mxp_shape *s = &it->shapes[i];
        for (int32_t d = 0; d < s->ndim; d++) it->shape_storage[i][d] = s->dims[d];
        if (i == 0) batch = s->ndim > 0 ? s->dims[0] : 1;
        it->numel[i] = fh_shape_numel(s);
        size_t bytes = (size_t)it->numel[i] * mxp_dtype_size(it->dtypes[i]);
        it->bufs[i] = malloc(bytes + 1);
        if (!it->bufs[i]) abort();
        memset(it->bufs[i], 0xA5, bytes);
        mxp_tensor *t = &it->tensors[i];
        t->hdr = (mxp_header)MXP_HEADER(mxp_tensor);
        t->data = it->bufs[i];
        t->dtype = it->dtypes[i];
        t->ndim = s->ndim;
        t->shape = it->shape_storage[i];
        t->device = (mxp_device){MXP_DEV_CPU, 0};
    }
    it->index_capacity = (uint32_t)batch;
    it->index = fh__xcalloc((size_t)(batch ? batch : 1), sizeof *it->index);
    return MXP_OK;
fail:
    fh_iter_destroy(it);
    return rc;
}

int fh_iter_reset(fh_iter *it, uint64_t epoch) {
    mxp_iter_reset_args ra = {.hdr = MXP_HEADER(mxp_iter_reset_args), .user_data = it->def->user_data,
                              .state = it->state, .epoch = epoch};
    return it->def->reset(&ra);
}

int fh_iter_next(fh_iter *it, int with_index, int *has_batch, int *pad) {
    for (uint32_t i = 0; i < it->n_data + it->n_label; i++)
        memset(it->bufs[i], 0xA5, (size_t)it->numel[i] * mxp_dtype_size(it->dtypes[i]));
    mxp_iter_next_args na = {.hdr = MXP_HEADER(mxp_iter_next_args), .user_data = it->def->user_data,
                             .state = it->state, .n_data = it->n_data, .n_label = it->n_label,
                             .data = &it->tensors[0], .label = &it->tensors[it->n_data], .has_batch = -1,
                             .pad = -1, .index = with_index ? it->index : NULL,
                             .index_capacity = with_index ? it->index_capacity : 0};
    int rc = it->def->next(&na);
    *has_batch = na.has_batch;
    *pad = na.pad;
    return rc;
}

float *fh_iter_f32(const fh_iter *it, uint32_t i) { return it->bufs[i]; }
