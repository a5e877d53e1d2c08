/* pack_harness.c — see pack_harness.h.  A fake host table and recording
 * registrar; a small MXNet-grammar kwargs parser; SimpleOp expansion as the
 * host does it (broadcast views, gradient reduction); full-op calls with
 * shape/type inference, workspace, state and backward dependencies; and
 * central-difference gradient checks.  Errors are kept in a static buffer
 * (ph_last_error).  Test support only: allocation failures abort. */
#include "pack_harness.h"

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PH_MAX_REG 512

struct ph_pack {
    void *dl;
    const mxp_plugin_desc *desc;
    const mxp_op_def *ops[PH_MAX_REG];
    const mxp_op_impl *impls[PH_MAX_REG];
    const mxp_simple_op_def *simples[PH_MAX_REG];
    int n_ops, n_impls, n_simples;
};

static char g_err[1024];

static int fail(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    return status;
}

const char *ph_last_error(void) { return g_err; }

static void *xcalloc(size_t n, size_t sz) {
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p) abort();
    return p;
}

/* ------------------------------------------------------------ fake host */
static int h_set_error(int32_t status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    return status;
}

static void h_log(int32_t level, const char *cat, const char *fmt, ...) {
    if (level > MXP_LOG_WARN) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%s] ", cat ? cat : "?");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int32_t h_num_threads(void) { return 1; }

/* Serial, but in several chunks so kernels see non-zero `begin`. */
static int h_parallel_for(int64_t n, int64_t grain, mxp_range_fn fn, void *arg) {
    if (grain < 1) grain = 1;
    for (int64_t b = 0; b < n; b += grain) fn(arg, b, b + grain < n ? b + grain : n);
    return MXP_OK;
}

static int ctx_parallel_for(const mxp_op_ctx *ctx, int64_t n, int64_t grain, mxp_range_fn fn,
                            void *arg) {
    (void)ctx;
    return h_parallel_for(n, grain, fn, arg);
}

static void *h_alloc(uint64_t bytes) {
    size_t b = (size_t)((bytes + 63) / 64 * 64);
    return aligned_alloc(64, b ? b : 64);
}

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

static double gauss(uint64_t *s) {
    double u = u01(s), v = u01(s);
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static int h_unif32(mxp_rng *r, float lo, float hi, float *o, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) o[i] = lo + (hi - lo) * (float)u01(&r->s);
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
    for (uint64_t i = 0; i < n; i++) o[i] = lo + (hi - lo) * u01(&r->s);
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

static int h_parse_params(const mxp_param_def *defs, uint32_t n_defs, const char *const *keys,
                          const char *const *vals, uint32_t n_kwargs, void *out, const char *what) {
    (void)what;
    const char *kw[2 * 64 + 1];
    if (n_kwargs > 64) return fail(MXP_EINVAL, "too many kwargs");
    for (uint32_t i = 0; i < n_kwargs; i++) {
        kw[2 * i] = keys[i];
        kw[2 * i + 1] = vals[i];
    }
    kw[2 * n_kwargs] = NULL;
    return ph_parse(defs, n_defs, kw, out);
}

static void h_free_params(const mxp_param_def *defs, uint32_t n, void *params) {
    (void)defs; (void)n; (void)params;
}

static const mxp_host g_host = {
    .hdr = MXP_HEADER(mxp_host),
    .host_version = "harness",
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
    .free_params = h_free_params,
};

static struct mxp_rng g_rng = {12345};

static mxp_op_ctx make_ctx(void *ws, uint64_t ws_bytes, int use_rng) {
    mxp_op_ctx c;
    memset(&c, 0, sizeof c);
    c.hdr = (mxp_header)MXP_HEADER(mxp_op_ctx);
    c.device.type = MXP_DEV_CPU;
    c.is_train = 1;
    c.workspace = ws;
    c.workspace_bytes = ws_bytes;
    c.rng = use_rng ? &g_rng : NULL;
    c.parallel_for = ctx_parallel_for;
    c.host = &g_host;
    return c;
}

/* ----------------------------------------------------------- registrar */
static int r_add_op(mxp_registrar *r, const mxp_op_def *d) {
    ph_pack *p = r->host_private;
    if (p->n_ops >= PH_MAX_REG) return fail(MXP_ENOMEM, "too many ops");
    if (!d->name || !d->infer_shape) return fail(MXP_EINVAL, "op def without name/infer_shape");
    p->ops[p->n_ops++] = d;
    return MXP_OK;
}
static int r_add_impl(mxp_registrar *r, const mxp_op_impl *d) {
    ph_pack *p = r->host_private;
    if (p->n_impls >= PH_MAX_REG) return fail(MXP_ENOMEM, "too many impls");
    if (!d->op_name || !d->forward) return fail(MXP_EINVAL, "impl without op/forward");
    p->impls[p->n_impls++] = d;
    return MXP_OK;
}
static int r_add_simple(mxp_registrar *r, const mxp_simple_op_def *d) {
    ph_pack *p = r->host_private;
    if (p->n_simples >= PH_MAX_REG) return fail(MXP_ENOMEM, "too many simple ops");
    if (!d->name || !d->forward) return fail(MXP_EINVAL, "simple op without name/forward");
    p->simples[p->n_simples++] = d;
    return MXP_OK;
}
static int r_add_other(mxp_registrar *r, const void *d) {
    (void)r; (void)d;
    return fail(MXP_EUNSUPPORTED, "harness: devices/kvstores/iters not supported");
}

ph_pack *ph_load(const char *so_path) {
    void *dl = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) { fail(MXP_EIO, "dlopen %s: %s", so_path, dlerror()); return NULL; }
    mxp_plugin_entry_fn entry = (mxp_plugin_entry_fn)dlsym(dl, MXP_PLUGIN_ENTRY_NAME);
    if (!entry) { fail(MXP_EABI, "no entry point"); dlclose(dl); return NULL; }
    ph_pack *p = xcalloc(1, sizeof *p);
    p->dl = dl;
    p->desc = entry();
    mxp_registrar reg;
    memset(&reg, 0, sizeof reg);
    reg.hdr = (mxp_header)MXP_HEADER(mxp_registrar);
    reg.host_private = p;
    reg.add_op = r_add_op;
    reg.add_impl = r_add_impl;
    reg.add_simple_op = r_add_simple;
    reg.add_device = (int (*)(mxp_registrar *, const mxp_device_def *))r_add_other;
    reg.add_kvstore = (int (*)(mxp_registrar *, const mxp_kvstore_def *))r_add_other;
    reg.add_iter = (int (*)(mxp_registrar *, const mxp_iter_def *))r_add_other;
    mxp_plugin_init_args a;
    memset(&a, 0, sizeof a);
    a.hdr = (mxp_header)MXP_HEADER(mxp_plugin_init_args);
    a.host = &g_host;
    a.registrar = &reg;
    a.library_path = so_path;
    if (!p->desc || p->desc->hdr.abi_major != MXP_ABI_MAJOR || !p->desc->init ||
        p->desc->init(&a) != MXP_OK) {
        if (!g_err[0]) fail(MXP_EPLUGIN, "init failed");
        dlclose(dl);
        free(p);
        return NULL;
    }
    return p;
}

void ph_unload(ph_pack *p) {
    if (!p) return;
    if (p->desc->fini) {
        mxp_plugin_fini_args f = {MXP_HEADER(mxp_plugin_fini_args), &g_host};
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

const mxp_op_def *ph_op_def(const ph_pack *p, const char *name) {
    for (int i = 0; i < p->n_ops; i++)
        if (name_is(p->ops[i]->name, p->ops[i]->aliases, name)) return p->ops[i];
    return NULL;
}
const mxp_op_impl *ph_op_impl(const ph_pack *p, const char *op_name) {
    const mxp_op_def *d = ph_op_def(p, op_name);
    if (!d) return NULL;
    for (int i = 0; i < p->n_impls; i++)
        if (strcmp(p->impls[i]->op_name, d->name) == 0) return p->impls[i];
    return NULL;
}
const mxp_simple_op_def *ph_simple(const ph_pack *p, const char *name) {
    for (int i = 0; i < p->n_simples; i++)
        if (name_is(p->simples[i]->name, p->simples[i]->aliases, name)) return p->simples[i];
    return NULL;
}
int ph_n_ops(const ph_pack *p) { return p->n_ops; }
const mxp_op_def *ph_op_at(const ph_pack *p, int i) { return p->ops[i]; }
int ph_n_simple(const ph_pack *p) { return p->n_simples; }
const mxp_simple_op_def *ph_simple_at(const ph_pack *p, int i) { return p->simples[i]; }
int ph_n_impls(const ph_pack *p) { return p->n_impls; }
const mxp_op_impl *ph_impl_at(const ph_pack *p, int i) { return p->impls[i]; }

/* --------------------------------------------------------------- arrays */
int64_t ph_numel(const ph_arr *a) {
    int64_t n = 1;
    for (int i = 0; i < a->ndim; i++) n *= a->shape[i];
    return n;
}

ph_arr ph_arr_new(int32_t dtype, int ndim, const int64_t *shape) {
    ph_arr a;
    memset(&a, 0, sizeof a);
    a.dtype = dtype;
    a.ndim = ndim;
    for (int i = 0; i < ndim; i++) a.shape[i] = shape[i];
    a.data = xcalloc((size_t)ph_numel(&a), mxp_dtype_size(dtype));
    return a;
}

ph_arr ph_arr_from(int32_t dtype, int ndim, const int64_t *shape, const double *vals) {
    ph_arr a = ph_arr_new(dtype, ndim, shape);
    for (int64_t i = 0; i < ph_numel(&a); i++) ph_set(&a, i, vals[i]);
    return a;
}

ph_arr ph_arr_clone(const ph_arr *src) {
    ph_arr a = ph_arr_new(src->dtype, src->ndim, src->shape);
    memcpy(a.data, src->data, (size_t)ph_numel(src) * mxp_dtype_size(src->dtype));
    return a;
}

void ph_arr_free(ph_arr *a) {
    free(a->data);
    a->data = NULL;
}

double ph_get(const ph_arr *a, int64_t i) {
    const char *p = (const char *)a->data + i * mxp_dtype_size(a->dtype);
    switch (a->dtype) {
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
    default: return NAN;
    }
}

void ph_set(ph_arr *a, int64_t i, double v) {
    char *p = (char *)a->data + i * mxp_dtype_size(a->dtype);
    switch (a->dtype) {
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
    default: break;
    }
}

void ph_fill_uniform(ph_arr *a, uint64_t seed, double lo, double hi) {
    uint64_t s = seed * 7919 + 1;
    for (int64_t i = 0; i < ph_numel(a); i++) ph_set(a, i, lo + (hi - lo) * u01(&s));
}

mxp_tensor ph_view(const ph_arr *a) {
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

/* --------------------------------------------------------------- params */
static const struct { const char *name; int32_t dt; } g_dtypes[] = {
    {"float32", MXP_DTYPE_F32}, {"float64", MXP_DTYPE_F64}, {"float16", MXP_DTYPE_F16},
    {"uint8", MXP_DTYPE_U8},    {"int32", MXP_DTYPE_I32},   {"int8", MXP_DTYPE_I8},
    {"int64", MXP_DTYPE_I64},   {"bool", MXP_DTYPE_BOOL},   {"int16", MXP_DTYPE_I16},
    {"uint16", MXP_DTYPE_U16},  {"uint32", MXP_DTYPE_U32},  {"uint64", MXP_DTYPE_U64},
    {"bfloat16", MXP_DTYPE_BF16},
};

static int parse_num(const char *s, double *out) {
    char *end;
    while (*s == ' ') s++;
    if (strcasecmp(s, "inf") == 0) { *out = INFINITY; return 0; }
    if (strcasecmp(s, "-inf") == 0) { *out = -INFINITY; return 0; }
    *out = strtod(s, &end);
    while (*end == ' ') end++;
    return end == s || *end ? -1 : 0;
}

static int parse_one(const mxp_param_def *d, const char *v, void *out) {
    char *dst = (char *)out + d->offset;
    double x;
    switch (d->type) {
    case MXP_PARAM_INT:
        if (parse_num(v, &x) || x != floor(x)) return -1;
        *(int64_t *)dst = (int64_t)x;
        break;
    case MXP_PARAM_FLOAT:
        if (parse_num(v, &x)) return -1;
        *(double *)dst = x;
        break;
    case MXP_PARAM_BOOL:
        if (!strcasecmp(v, "true") || !strcmp(v, "1")) *(int32_t *)dst = 1;
        else if (!strcasecmp(v, "false") || !strcmp(v, "0")) *(int32_t *)dst = 0;
        else return -1;
        break;
    case MXP_PARAM_ENUM: {
        int i = 0;
        for (; d->choices && d->choices[i]; i++)
            if (!strcmp(d->choices[i], v)) break;
        if (!d->choices || !d->choices[i]) return -1;
        *(int32_t *)dst = i;
        break;
    }
    case MXP_PARAM_STRING: *(const char **)dst = v; break;
    case MXP_PARAM_DTYPE: {
        size_t i = 0;
        for (; i < sizeof g_dtypes / sizeof g_dtypes[0]; i++)
            if (!strcmp(g_dtypes[i].name, v)) break;
        if (i == sizeof g_dtypes / sizeof g_dtypes[0]) return -1;
        *(int32_t *)dst = g_dtypes[i].dt;
        break;
    }
    case MXP_PARAM_SHAPE: {
        mxp_param_shape *s = (mxp_param_shape *)dst;
        memset(s, 0, sizeof *s);
        if (!strcmp(v, "None")) return 0;
        s->has_value = 1;
        const char *c = v;
        while (*c == ' ' || *c == '(' || *c == '[') c++;
        while (*c && *c != ')' && *c != ']') {
            char *end;
            long long n = strtoll(c, &end, 10);
            if (end == c) return -1;
            if (s->ndim >= MXP_PARAM_SHAPE_MAX) return -1;
            s->dims[s->ndim++] = n;
            c = end;
            while (*c == ' ' || *c == ',' || *c == 'L') c++;
        }
        break;
    }
    case MXP_PARAM_OPT_INT: {
        mxp_param_opt_int *o = (mxp_param_opt_int *)dst;
        memset(o, 0, sizeof *o);
        if (!strcmp(v, "None")) return 0;
        if (parse_num(v, &x) || x != floor(x)) return -1;
        o->has_value = 1;
        o->value = (int64_t)x;
        break;
    }
    case MXP_PARAM_OPT_FLOAT: {
        mxp_param_opt_float *o = (mxp_param_opt_float *)dst;
        memset(o, 0, sizeof *o);
        if (!strcmp(v, "None")) return 0;
        if (parse_num(v, &x)) return -1;
        o->has_value = 1;
        o->value = x;
        break;
    }
    default: return -1;
    }
    if ((d->flags & MXP_PARAM_HAS_MIN) && (d->type == MXP_PARAM_INT || d->type == MXP_PARAM_FLOAT)) {
        double val = d->type == MXP_PARAM_INT ? (double)*(int64_t *)dst : *(double *)dst;
        if (val < d->min) return -1;
    }
    return 0;
}

int ph_parse(const mxp_param_def *defs, uint32_t n, const char *const *kw, void *out) {
    for (uint32_t i = 0; i < n; i++) {
        const mxp_param_def *d = &defs[i];
        const char *v = NULL;
        for (int k = 0; kw && kw[k]; k += 2)
            if (!strcmp(kw[k], d->name)) v = kw[k + 1];
        if (!v) v = d->default_value;
        if (!v) {
            if (d->flags & MXP_PARAM_REQUIRED)
                return fail(MXP_EINVAL, "param '%s' required", d->name);
            continue;
        }
        if (parse_one(d, v, out))
            return fail(MXP_EINVAL, "param '%s': bad value '%s'", d->name, v);
    }
    for (int k = 0; kw && kw[k]; k += 2) {
        uint32_t i = 0;
        while (i < n && strcmp(defs[i].name, kw[k])) i++;
        if (i == n) return fail(MXP_EINVAL, "unknown param '%s'", kw[k]);
    }
    return 0;
}

/* ----------------------------------------------------- SimpleOp support */
typedef struct sparams {
    void *params;
    double scalar;
} sparams;

static int simple_params(const mxp_simple_op_def *d, const char *const *kw, sparams *sp) {
    const char *rest[2 * 64 + 1];
    int n = 0, have_scalar = 0;
    sp->scalar = 0;
    sp->params = xcalloc(1, d->params_size ? d->params_size : 8);
    for (int k = 0; kw && kw[k]; k += 2) {
        if (d->kind == MXP_SIMPLE_SCALAR && !strcmp(kw[k], "scalar")) {
            if (parse_num(kw[k + 1], &sp->scalar)) return fail(MXP_EINVAL, "bad scalar");
            have_scalar = 1;
            continue;
        }
        rest[n++] = kw[k];
        rest[n++] = kw[k + 1];
    }
    rest[n] = NULL;
    if (d->kind == MXP_SIMPLE_SCALAR && !have_scalar) return fail(MXP_EINVAL, "scalar required");
    return ph_parse(d->params, d->n_params, rest, sp->params);
}

/* View of `a` broadcast to out's shape (numpy rules); -1 if impossible. */
typedef struct bview {
    mxp_tensor t;
    int64_t shape[MXP_MAX_NDIM], strides[MXP_MAX_NDIM];
} bview;

static int make_bview(bview *v, const ph_arr *a, int nd, const int64_t *oshape) {
    int64_t rm[MXP_MAX_NDIM];
    int64_t s = 1;
    for (int i = a->ndim - 1; i >= 0; i--) { rm[i] = s; s *= a->shape[i]; }
    if (a->ndim > nd) return -1;
    v->t = ph_view(a);
    v->t.ndim = nd;
    for (int d = 0; d < nd; d++) {
        int k = d - (nd - a->ndim);
        v->shape[d] = oshape[d];
        if (k < 0) v->strides[d] = 0;
        else if (a->shape[k] == oshape[d]) v->strides[d] = rm[k];
        else if (a->shape[k] == 1) v->strides[d] = 0;
        else return -1;
    }
    v->t.shape = v->shape;
    v->t.strides = v->strides;
    return 0;
}

static int simple_out_shape(const mxp_simple_op_def *d, int n_in, const ph_arr *in, int *nd,
                            int64_t *shape) {
    int want = (d->kind == MXP_SIMPLE_BINARY || d->kind == MXP_SIMPLE_BROADCAST) ? 2 : 1;
    if (n_in != want) return fail(MXP_EINVAL, "%s takes %d inputs", d->name, want);
    *nd = in[0].ndim;
    for (int i = 0; i < *nd; i++) shape[i] = in[0].shape[i];
    if (want == 1) return 0;
    if (d->kind == MXP_SIMPLE_BINARY) {
        if (in[1].ndim != *nd) return fail(MXP_ESHAPE, "shape mismatch");
        for (int i = 0; i < *nd; i++)
            if (in[1].shape[i] != shape[i]) return fail(MXP_ESHAPE, "shape mismatch");
        return 0;
    }
    int n = in[0].ndim > in[1].ndim ? in[0].ndim : in[1].ndim;
    for (int d2 = 0; d2 < n; d2++) {
        int a = d2 - (n - in[0].ndim), b = d2 - (n - in[1].ndim);
        int64_t x = a >= 0 ? in[0].shape[a] : 1, y = b >= 0 ? in[1].shape[b] : 1;
        if (x != y && x != 1 && y != 1) return fail(MXP_ESHAPE, "cannot broadcast");
        shape[d2] = x == 1 ? y : x;
    }
    *nd = n;
    return 0;
}

static int simple_forward(const mxp_simple_op_def *d, const char *const *kw, int n_in,
                          const ph_arr *in, int *n_out, ph_arr *out, int req) {
    int nd;
    int64_t shape[MXP_MAX_NDIM];
    int rc = simple_out_shape(d, n_in, in, &nd, shape);
    if (rc) return rc;
    sparams sp;
    rc = simple_params(d, kw, &sp);
    if (rc) { free(sp.params); return rc; }
    if (!out[0].data) out[0] = ph_arr_new(in[0].dtype, nd, shape);
    *n_out = 1;
    bview bv[2];
    mxp_tensor tin[2];
    for (int i = 0; i < n_in; i++) {
        if (make_bview(&bv[i], &in[i], nd, shape)) { free(sp.params); return fail(MXP_ESHAPE, "bview"); }
        tin[i] = bv[i].t;
        tin[i].shape = bv[i].shape;
        tin[i].strides = bv[i].strides;
    }
    mxp_tensor tout = ph_view(&out[0]);
    mxp_op_ctx ctx = make_ctx(NULL, 0, (d->resources & MXP_RESOURCE_RANDOM) != 0);
    mxp_simple_args a;
    memset(&a, 0, sizeof a);
    a.hdr = (mxp_header)MXP_HEADER(mxp_simple_args);
    a.ctx = &ctx;
    a.params = sp.params;
    a.user_data = d->user_data;
    a.scalar = sp.scalar;
    a.n_in = (uint32_t)n_in;
    a.req = req;
    a.in = tin;
    a.out = &tout;
    rc = d->forward(&a);
    free(sp.params);
    return rc;
}

/* Sum full (shaped like out) into g (its own shape, broadcast) with req. */
static void reduce_into(const ph_arr *full, ph_arr *g, int32_t req) {
    bview bv;
    make_bview(&bv, g, full->ndim, full->shape);
    int64_t n = ph_numel(g);
    double *acc = xcalloc((size_t)n, sizeof(double));
    int64_t idx[MXP_MAX_NDIM] = {0};
    for (int64_t i = 0; i < ph_numel(full); i++) {
        int64_t off = 0;
        for (int d = 0; d < full->ndim; d++) off += idx[d] * bv.strides[d];
        acc[off] += ph_get(full, i);
        for (int d = full->ndim - 1; d >= 0; d--) {
            if (++idx[d] < full->shape[d]) break;
            idx[d] = 0;
        }
    }
    for (int64_t i = 0; i < n; i++)
        ph_set(g, i, req == MXP_REQ_ADD ? ph_get(g, i) + acc[i] : acc[i]);
    free(acc);
}

static int simple_backward(const mxp_simple_op_def *d, const char *const *kw, int n_in,
                           const ph_arr *in, const ph_arr *out, const ph_arr *og,
                           ph_arr *in_grad, const int32_t *req) {
    int nd;
    int64_t shape[MXP_MAX_NDIM];
    int rc = simple_out_shape(d, n_in, in, &nd, shape);
    if (rc) return rc;
    if (d->grad_kind == MXP_GRAD_NONE) return fail(MXP_EINVAL, "%s: not differentiable", d->name);
    sparams sp;
    rc = simple_params(d, kw, &sp);
    if (rc) { free(sp.params); return rc; }
    ph_arr full[2];
    mxp_tensor tin[2], tg[2], tout, tog;
    bview bv[2];
    int32_t kreq[2];
    for (int i = 0; i < n_in; i++) {
        if (!in_grad[i].data) in_grad[i] = ph_arr_new(in[i].dtype, in[i].ndim, in[i].shape);
        make_bview(&bv[i], &in[i], nd, shape);
        tin[i] = bv[i].t;
        tin[i].shape = bv[i].shape;
        tin[i].strides = bv[i].strides;
        if (d->grad_kind != MXP_GRAD_USES_INPUT) tin[i].data = NULL;
        full[i] = ph_arr_new(in_grad[i].dtype, nd, shape);
        tg[i] = ph_view(&full[i]);
        kreq[i] = MXP_REQ_WRITE;
    }
    tout = ph_view(out);
    if (d->grad_kind != MXP_GRAD_USES_OUTPUT) tout.data = NULL;
    tog = ph_view(og);
    if (d->grad_kind != MXP_GRAD_ZERO) {
        if (!d->backward) { rc = fail(MXP_EINVAL, "%s: no backward", d->name); goto done; }
        mxp_op_ctx ctx = make_ctx(NULL, 0, 0);
        mxp_simple_grad_args a;
        memset(&a, 0, sizeof a);
        a.hdr = (mxp_header)MXP_HEADER(mxp_simple_grad_args);
        a.ctx = &ctx;
        a.params = sp.params;
        a.user_data = d->user_data;
        a.scalar = sp.scalar;
        a.n_in = (uint32_t)n_in;
        a.out_grad = &tog;
        a.in = tin;
        a.out = &tout;
        a.in_grad = tg;
        a.req = kreq;
        rc = d->backward(&a);
        if (rc) goto done;
    }
    for (int i = 0; i < n_in; i++) {
        int32_t r = req ? req[i] : MXP_REQ_WRITE;
        if (r != MXP_REQ_NULL) reduce_into(&full[i], &in_grad[i], r);
    }
done:
    for (int i = 0; i < n_in; i++) ph_arr_free(&full[i]);
    free(sp.params);
    return rc;
}

/* ------------------------------------------------------- full op support */
typedef struct fcall {
    const mxp_op_def *def;
    const mxp_op_impl *impl;
    void *params;
    int n_out;
    void *state;
} fcall;

static int count_names(const char *const *names) {
    int n = 0;
    while (names && names[n]) n++;
    return n;
}

static int fcall_init(ph_pack *p, const char *op, const char *const *kw, fcall *f) {
    memset(f, 0, sizeof *f);
    f->def = ph_op_def(p, op);
    f->impl = ph_op_impl(p, op);
    if (!f->def || !f->impl) return fail(MXP_ENOENT, "op '%s' not found", op);
    f->params = xcalloc(1, f->def->params_size ? f->def->params_size : 8);
    int rc = ph_parse(f->def->params, f->def->n_params, kw, f->params);
    if (rc) return rc;
    if (f->def->check_params) {
        mxp_check_params_args c = {MXP_HEADER(mxp_check_params_args), f->params, f->def->user_data};
        rc = f->def->check_params(&c);
        if (rc) return rc;
    }
    if (f->def->list_outputs) {
        char names[PH_MAX_IO][MXP_NAME_MAX];
        mxp_list_names_args l = {MXP_HEADER(mxp_list_names_args), f->params, f->def->user_data,
                                 names, PH_MAX_IO, 0};
        rc = f->def->list_outputs(&l);
        if (rc) return rc;
        f->n_out = (int)l.count;
    } else {
        f->n_out = f->def->output_names ? count_names(f->def->output_names) : 1;
    }
    if (count_names(f->def->aux_names) || f->def->list_aux)
        return fail(MXP_EUNSUPPORTED, "harness: aux states not supported");
    return 0;
}

static void fcall_done(fcall *f) {
    if (f->state && f->impl->destroy) {
        mxp_destroy_args d = {MXP_HEADER(mxp_destroy_args), f->state, f->impl->user_data};
        f->impl->destroy(&d);
    }
    free(f->params);
}

static void to_shape(const ph_arr *a, mxp_shape *s) {
    memset(s, 0, sizeof *s);
    s->ndim = a->ndim;
    for (int i = 0; i < a->ndim; i++) s->dims[i] = a->shape[i];
}

/* Infer output shapes/dtypes; create state; return workspace bytes. */
static int fcall_prepare(fcall *f, int n_in, const ph_arr *in, mxp_shape *oshape, int32_t *odt,
                         uint64_t *ws) {
    mxp_shape ishape[PH_MAX_IO];
    int32_t idt[PH_MAX_IO];
    for (int i = 0; i < n_in; i++) {
        to_shape(&in[i], &ishape[i]);
        idt[i] = in[i].dtype;
    }
    for (int i = 0; i < f->n_out; i++) {
        memset(&oshape[i], 0, sizeof oshape[i]);
        oshape[i].ndim = -1;
        odt[i] = MXP_DTYPE_UNKNOWN;
    }
    mxp_infer_shape_args s = {MXP_HEADER(mxp_infer_shape_args), f->params, f->def->user_data,
                              (uint32_t)n_in, (uint32_t)f->n_out, 0, 0, ishape, oshape, NULL};
    int rc = f->def->infer_shape(&s);
    if (rc) return rc == MXP_EINCOMPLETE ? fail(rc, "infer_shape incomplete") : rc;
    if (f->def->infer_type) {
        mxp_infer_type_args t = {MXP_HEADER(mxp_infer_type_args), f->params, f->def->user_data,
                                 (uint32_t)n_in, (uint32_t)f->n_out, 0, 0, idt, odt, NULL};
        rc = f->def->infer_type(&t);
        if (rc) return rc == MXP_EINCOMPLETE ? fail(rc, "infer_type incomplete") : rc;
    } else {
        int32_t dt = n_in ? idt[0] : MXP_DTYPE_UNKNOWN;
        for (int i = 0; i < f->n_out; i++) odt[i] = dt;
        for (int i = 0; i < n_in; i++)
            if (idt[i] != dt) return fail(MXP_ETYPE, "input %d dtype %d vs %d", i, idt[i], dt);
    }
    mxp_impl_query_args q;
    memset(&q, 0, sizeof q);
    q.hdr = (mxp_header)MXP_HEADER(mxp_impl_query_args);
    q.params = f->params;
    q.user_data = f->impl->user_data;
    q.device.type = MXP_DEV_CPU;
    q.n_in = (uint32_t)n_in;
    q.n_out = (uint32_t)f->n_out;
    q.is_train = 1;
    q.in_shapes = ishape;
    q.out_shapes = oshape;
    q.in_dtypes = idt;
    q.out_dtypes = odt;
    char reason[256] = "";
    q.reason = reason;
    q.reason_size = sizeof reason;
    if (f->impl->supports) {
        rc = f->impl->supports(&q);
        if (rc < 0) return rc;
        if (rc == 0) return fail(MXP_EUNSUPPORTED, "impl refuses: %s", reason);
    }
    *ws = 0;
    if (f->impl->workspace) {
        rc = f->impl->workspace(&q);
        if (rc) return rc;
        *ws = q.workspace_bytes;
    }
    if (f->impl->create && !f->state) {
        rc = f->impl->create(&q);
        if (rc) return rc;
        f->state = q.state;
    }
    return 0;
}

static int full_forward(ph_pack *p, const char *op, const char *const *kw, int n_in,
                        const ph_arr *in, int *n_out, ph_arr *out, int req) {
    fcall f;
    mxp_shape oshape[PH_MAX_IO];
    int32_t odt[PH_MAX_IO];
    uint64_t ws = 0;
    void *wsp = NULL;
    int rc = fcall_init(p, op, kw, &f);
    if (!rc) rc = fcall_prepare(&f, n_in, in, oshape, odt, &ws);
    if (rc) { fcall_done(&f); return rc; }
    mxp_tensor tin[PH_MAX_IO], tout[PH_MAX_IO];
    int32_t reqs[PH_MAX_IO];
    for (int i = 0; i < n_in; i++) tin[i] = ph_view(&in[i]);
    for (int i = 0; i < f.n_out; i++) {
        if (!out[i].data) out[i] = ph_arr_new(odt[i], oshape[i].ndim, oshape[i].dims);
        tout[i] = ph_view(&out[i]);
        reqs[i] = req;
    }
    *n_out = f.n_out;
    if (ws) wsp = h_alloc(ws);
    mxp_op_ctx ctx = make_ctx(wsp, ws, (f.def->resources & MXP_RESOURCE_RANDOM) != 0);
    mxp_forward_args a;
    memset(&a, 0, sizeof a);
    a.hdr = (mxp_header)MXP_HEADER(mxp_forward_args);
    a.ctx = &ctx;
    a.params = f.params;
    a.state = f.state;
    a.user_data = f.impl->user_data;
    a.n_in = (uint32_t)n_in;
    a.n_out = (uint32_t)f.n_out;
    a.in = tin;
    a.out = tout;
    a.req = reqs;
    rc = f.impl->forward(&a);
    free(wsp);
    fcall_done(&f);
    return rc;
}

static int full_backward(ph_pack *p, const char *op, const char *const *kw, int n_in,
                         const ph_arr *in, int n_out, const ph_arr *out, const ph_arr *og,
                         ph_arr *in_grad, const int32_t *req) {
    fcall f;
    mxp_shape oshape[PH_MAX_IO];
    int32_t odt[PH_MAX_IO];
    uint64_t ws = 0;
    void *wsp = NULL;
    int rc = fcall_init(p, op, kw, &f);
    if (!rc) rc = fcall_prepare(&f, n_in, in, oshape, odt, &ws);
    if (!rc && (f.def->flags & MXP_OP_NO_GRADIENT)) rc = fail(MXP_EINVAL, "%s: no gradient", op);
    if (!rc && !f.impl->backward) rc = fail(MXP_EINVAL, "%s: no backward", op);
    if (!rc && n_out != f.n_out) rc = fail(MXP_EINVAL, "%s: %d outputs, not %d", op, f.n_out, n_out);
    if (rc) { fcall_done(&f); return rc; }
    uint8_t need_og[PH_MAX_IO], need_in[PH_MAX_IO], need_out[PH_MAX_IO];
    for (int i = 0; i < n_out; i++) {
        need_og[i] = (f.def->backward_deps & MXP_BWD_OUT_GRAD) != 0;
        need_out[i] = (f.def->backward_deps & MXP_BWD_OUT_DATA) != 0;
    }
    for (int i = 0; i < n_in; i++) need_in[i] = (f.def->backward_deps & MXP_BWD_IN_DATA) != 0;
    if (f.def->declare_backward) {
        mxp_backward_deps_args d = {MXP_HEADER(mxp_backward_deps_args), f.params, f.def->user_data,
                                    (uint32_t)n_in, (uint32_t)n_out, need_og, need_in, need_out};
        rc = f.def->declare_backward(&d);
        if (rc) { fcall_done(&f); return rc; }
    }
    mxp_tensor tin[PH_MAX_IO], tout[PH_MAX_IO], tog[PH_MAX_IO], tig[PH_MAX_IO];
    int32_t reqs[PH_MAX_IO];
    for (int i = 0; i < n_in; i++) {
        tin[i] = ph_view(&in[i]);
        if (!need_in[i]) tin[i].data = NULL;
        if (!in_grad[i].data) in_grad[i] = ph_arr_new(in[i].dtype, in[i].ndim, in[i].shape);
        tig[i] = ph_view(&in_grad[i]);
        reqs[i] = req ? req[i] : MXP_REQ_WRITE;
    }
    for (int i = 0; i < n_out; i++) {
        tout[i] = ph_view(&out[i]);
        if (!need_out[i]) tout[i].data = NULL;
        tog[i] = ph_view(&og[i]);
        if (!need_og[i]) tog[i].data = NULL;
    }
    if (ws) wsp = h_alloc(ws);
    mxp_op_ctx ctx = make_ctx(wsp, ws, (f.def->resources & MXP_RESOURCE_RANDOM) != 0);
    mxp_backward_args a;
    memset(&a, 0, sizeof a);
    a.hdr = (mxp_header)MXP_HEADER(mxp_backward_args);
    a.ctx = &ctx;
    a.params = f.params;
    a.state = f.state;
    a.user_data = f.impl->user_data;
    a.n_in = (uint32_t)n_in;
    a.n_out = (uint32_t)n_out;
    a.out_grad = tog;
    a.in = tin;
    a.out = tout;
    a.in_grad = tig;
    a.req = reqs;
    rc = f.impl->backward(&a);
    free(wsp);
    fcall_done(&f);
    return rc;
}

/* ------------------------------------------------------------ dispatch */
int ph_forward(ph_pack *p, const char *op, const char *const *kw, int n_in, const ph_arr *in,
               int *n_out, ph_arr *out, int req) {
    g_err[0] = 0;
    const mxp_simple_op_def *s = ph_simple(p, op);
    if (s) return simple_forward(s, kw, n_in, in, n_out, out, req);
    return full_forward(p, op, kw, n_in, in, n_out, out, req);
}

int ph_backward(ph_pack *p, const char *op, const char *const *kw, int n_in, const ph_arr *in,
                int n_out, const ph_arr *out, const ph_arr *og, ph_arr *in_grad,
                const int32_t *req) {
    g_err[0] = 0;
    const mxp_simple_op_def *s = ph_simple(p, op);
    if (s) return simple_backward(s, kw, n_in, in, out, og, in_grad, req);
    return full_backward(p, op, kw, n_in, in, n_out, out, og, in_grad, req);
}

int ph_forward_views(ph_pack *p, const char *op, const char *const *kw, int n_in,
                     const mxp_tensor *in, int n_out, const mxp_tensor *out, int req) {
    g_err[0] = 0;
    const mxp_simple_op_def *s = ph_simple(p, op);
    mxp_op_ctx ctx = make_ctx(NULL, 0, 1);
    if (s) {
        sparams sp;
        int rc = simple_params(s, kw, &sp);
        if (!rc) {
            mxp_simple_args a;
            memset(&a, 0, sizeof a);
            a.hdr = (mxp_header)MXP_HEADER(mxp_simple_args);
            a.ctx = &ctx;
            a.params = sp.params;
            a.user_data = s->user_data;
            a.scalar = sp.scalar;
            a.n_in = (uint32_t)n_in;
            a.req = req;
            a.in = in;
            a.out = out;
            rc = s->forward(&a);
        }
        free(sp.params);
        return rc;
    }
    fcall f;
    int rc = fcall_init(p, op, kw, &f);
    if (rc) { fcall_done(&f); return rc; }
    int32_t reqs[PH_MAX_IO];
    for (int i = 0; i < n_out; i++) reqs[i] = req;
    mxp_forward_args a;
    memset(&a, 0, sizeof a);
    a.hdr = (mxp_header)MXP_HEADER(mxp_forward_args);
    a.ctx = &ctx;
    a.params = f.params;
    a.user_data = f.impl->user_data;
    a.n_in = (uint32_t)n_in;
    a.n_out = (uint32_t)n_out;
    a.in = in;
    a.out = out;
    a.req = reqs;
    rc = f.impl->forward(&a);
    fcall_done(&f);
    return rc;
}

/* ----------------------------------------------------------- grad check */
static double loss_of(ph_pack *p, const char *op, const char *const *kw, int n_in,
                      const ph_arr *in, const ph_arr *w, int *rc) {
    ph_arr out[PH_MAX_IO];
    memset(out, 0, sizeof out);
    int n_out = 0;
    *rc = ph_forward(p, op, kw, n_in, in, &n_out, out, MXP_REQ_WRITE);
    double L = 0;
    for (int k = 0; k < n_out; k++) {
        if (!*rc)
            for (int64_t i = 0; i < ph_numel(&out[k]); i++) L += ph_get(&out[k], i) * ph_get(&w[k], i);
        ph_arr_free(&out[k]);
    }
    return L;
}

int ph_grad_check(ph_pack *p, const char *op, const char *const *kw, int n_in, const ph_arr *in,
                  uint32_t mask, double eps, double atol, double rtol) {
    ph_arr out[PH_MAX_IO], w[PH_MAX_IO], g[PH_MAX_IO], g2[PH_MAX_IO], x[PH_MAX_IO];
    memset(out, 0, sizeof out);
    memset(w, 0, sizeof w);
    memset(g, 0, sizeof g);
    memset(g2, 0, sizeof g2);
    int n_out = 0, result = 0;
    int rc = ph_forward(p, op, kw, n_in, in, &n_out, out, MXP_REQ_WRITE);
    if (rc) return fail(rc, "%s forward: %s", op, ph_last_error()), -1;
    /* Hidden outputs (BatchNorm-style saved statistics) get no gradient:
     * weight them 0 so the loss is that of the visible outputs. */
    const mxp_op_def *def = ph_op_def(p, op);
    int n_vis = def && def->n_visible_outputs ? (int)def->n_visible_outputs : n_out;
    for (int k = 0; k < n_out; k++) {
        w[k] = ph_arr_new(MXP_DTYPE_F64, out[k].ndim, out[k].shape);
        if (k < n_vis) ph_fill_uniform(&w[k], 99 + (uint64_t)k, -1.0, 1.0);
    }
    rc = ph_backward(p, op, kw, n_in, in, n_out, out, w, g, NULL);
    if (rc) { fail(rc, "%s backward: %s", op, ph_last_error()); result = -1; goto out; }
    /* req ADD: prefilled 0.5 must become 0.5 + grad. */
    int32_t reqs[PH_MAX_IO] = {0};
    for (int i = 0; i < n_in; i++) {
        g2[i] = ph_arr_new(in[i].dtype, in[i].ndim, in[i].shape);
        for (int64_t j = 0; j < ph_numel(&g2[i]); j++) ph_set(&g2[i], j, 0.5);
        reqs[i] = MXP_REQ_ADD;
    }
    rc = ph_backward(p, op, kw, n_in, in, n_out, out, w, g2, reqs);
    if (rc) { fail(rc, "%s backward(add): %s", op, ph_last_error()); result = -1; goto out; }
    for (int i = 0; i < n_in && !result; i++)
        for (int64_t j = 0; j < ph_numel(&g[i]); j++)
            if (fabs(ph_get(&g2[i], j) - 0.5 - ph_get(&g[i], j)) > 1e-9 * (1 + fabs(ph_get(&g[i], j)))) {
                fail(MXP_EINVAL, "%s: req add in_grad[%d][%lld] = %g, want 0.5 + %g", op, i,
                     (long long)j, ph_get(&g2[i], j), ph_get(&g[i], j));
                result = -1;
                break;
            }
    for (int i = 0; i < n_in; i++) x[i] = ph_arr_clone(&in[i]);
    for (int i = 0; i < n_in && !result; i++) {
        if (!(mask & (1u << i)) || in[i].dtype != MXP_DTYPE_F64) continue;
        for (int64_t j = 0; j < ph_numel(&x[i]) && !result; j++) {
            double v = ph_get(&x[i], j);
            ph_set(&x[i], j, v + eps);
            double lp = loss_of(p, op, kw, n_in, x, w, &rc);
            ph_set(&x[i], j, v - eps);
            double lm = loss_of(p, op, kw, n_in, x, w, &rc);
            ph_set(&x[i], j, v);
            double num = (lp - lm) / (2 * eps), ana = ph_get(&g[i], j);
            if (rc || fabs(num - ana) > atol + rtol * fabs(num)) {
                fail(MXP_EINVAL, "%s: d/d in[%d][%lld]: analytic %.9g, numeric %.9g", op, i,
                     (long long)j, ana, num);
                result = -1;
            }
        }
    }
    for (int i = 0; i < n_in; i++) ph_arr_free(&x[i]);
out:
    for (int k = 0; k < n_out; k++) { ph_arr_free(&out[k]); ph_arr_free(&w[k]); }
    for (int i = 0; i < n_in; i++) { ph_arr_free(&g[i]); ph_arr_free(&g2[i]); }
    return result;
}
