/* nn_harness.c — see nn_harness.h.  A fake host for driving one pack's op
 * impls directly: set_error keeps the last message (thread-local),
 * parallel_for runs chunks on the caller plus one helper thread, alloc_host
 * is aligned_alloc, rng_* use a splitmix64 stream, parse_params implements
 * MXNet's value grammar for every mxp_param_type.  Not a registry: no
 * validation beyond what tests need. */
#include "nn_harness.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <ctype.h>

static _Thread_local char g_err[1024];

const char *nnh_error(void) { return g_err; }

static int h_set_error(int32_t status, const char *fmt, ...) {
    va_list ap; va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    return status;
}
static void h_log(int32_t level, const char *cat, const char *fmt, ...) {
    if (level > MXP_LOG_WARN) return;
    va_list ap; va_start(ap, fmt);
    fprintf(stderr, "[%s] ", cat); vfprintf(stderr, fmt, ap); fputc('\n', stderr);
    va_end(ap);
}
static int32_t h_num_threads(void) { return 2; }

typedef struct pf_job {
    int64_t n, grain;
    mxp_range_fn fn;
    void *arg;
    atomic_llong next;
} pf_job;

static void pf_run(pf_job *j) {
    for (;;) {
        int64_t b = atomic_fetch_add(&j->next, j->grain);
        if (b >= j->n) break;
        int64_t e = b + j->grain < j->n ? b + j->grain : j->n;
        j->fn(j->arg, b, e);
    }
}
static void *pf_thread(void *p) { pf_run(p); return NULL; }

static int h_parallel_for(int64_t n, int64_t grain, mxp_range_fn fn, void *arg) {
    if (n <= 0) return MXP_OK;
    if (grain < 1) grain = 1;
    /* Two chunks per thread at most, so each chunk is large. */
    int64_t g = (n + 1) / 2;
    if (g < grain) g = grain;
    if (g >= n) { fn(arg, 0, n); return MXP_OK; }
    pf_job j = { n, g, fn, arg, 0 };
    pthread_t t;
    int spawned = pthread_create(&t, NULL, pf_thread, &j) == 0;
    pf_run(&j);
    if (spawned) pthread_join(t, NULL);
    return MXP_OK;
}
static int ctx_parallel_for(const mxp_op_ctx *ctx, int64_t n, int64_t grain, mxp_range_fn fn, void *arg) {
    (void)ctx; return h_parallel_for(n, grain, fn, arg);
}

static void *h_alloc(uint64_t bytes) {
    uint64_t b = (bytes + 63) & ~(uint64_t)63;
    return aligned_alloc(64, b ? b : 64);
}
static void h_free(void *p) { free(p); }

struct mxp_rng { uint64_t s; };
static uint64_t sm64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
double nnh_rand(uint64_t *s, double lo, double hi) {
    return lo + (hi - lo) * (double)(sm64(s) >> 11) * (1.0 / 9007199254740992.0);
}
static int h_uniform_f32(mxp_rng *r, float lo, float hi, float *o, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) o[i] = (float)nnh_rand(&r->s, lo, hi);
    return MXP_OK;
}
static int h_bernoulli_f32(mxp_rng *r, float p, float *o, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) o[i] = nnh_rand(&r->s, 0, 1) < p ? 1.0f : 0.0f;
    return MXP_OK;
}
static int h_uniform_f64(mxp_rng *r, double lo, double hi, double *o, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) o[i] = nnh_rand(&r->s, lo, hi);
    return MXP_OK;
}
static int h_bits(mxp_rng *r, uint32_t *o, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) o[i] = (uint32_t)sm64(&r->s);
    return MXP_OK;
}

/* ------------------------------------------------------------ params */
static const char *skip_ws(const char *s) { while (*s && isspace((unsigned char)*s)) s++; return s; }

static int parse_value(const mxp_param_def *d, const char *v, char *base) {
    char *dst = base + d->offset;
    char *end;
    int isnone = strcasecmp(v, "None") == 0;
    switch (d->type) {
    case MXP_PARAM_INT: { long long x = strtoll(v, &end, 10); if (*skip_ws(end)) return -1;
        *(int64_t *)dst = x; return 0; }
    case MXP_PARAM_FLOAT: { double x = strtod(v, &end); if (*skip_ws(end)) return -1;
        *(double *)dst = x; return 0; }
    case MXP_PARAM_BOOL:
        if (!strcasecmp(v, "true") || !strcmp(v, "1")) *(int32_t *)dst = 1;
        else if (!strcasecmp(v, "false") || !strcmp(v, "0")) *(int32_t *)dst = 0;
        else return -1;
        return 0;
    case MXP_PARAM_ENUM:
        for (int i = 0; d->choices && d->choices[i]; i++)
            if (!strcmp(d->choices[i], v)) { *(int32_t *)dst = i; return 0; }
        return -1;
    case MXP_PARAM_STRING: *(const char **)dst = v; return 0; /* harness leaks nothing: kwargs literals only */
    case MXP_PARAM_DTYPE:
        if (!strcmp(v, "float32")) *(int32_t *)dst = MXP_DTYPE_F32;
        else if (!strcmp(v, "float64")) *(int32_t *)dst = MXP_DTYPE_F64;
        else if (isnone) *(int32_t *)dst = MXP_DTYPE_UNKNOWN;
        else return -1;
        return 0;
    case MXP_PARAM_SHAPE: {
        mxp_param_shape *s = (mxp_param_shape *)dst;
        memset(s, 0, sizeof *s);
        if (isnone) return 0;
        s->has_value = 1;
        const char *p = skip_ws(v);
        int paren = *p == '(' || *p == '[';
        if (paren) p++;
        for (;;) {
            p = skip_ws(p);
            if (*p == ')' || *p == ']' || !*p) break;
            long long x = strtoll(p, &end, 10);
            if (end == p || s->ndim >= MXP_PARAM_SHAPE_MAX) return -1;
            s->dims[s->ndim++] = x;
            p = skip_ws(end);
            if (*p == ',') p++;
        }
        return 0;
    }
    case MXP_PARAM_OPT_INT: {
        mxp_param_opt_int *o = (mxp_param_opt_int *)dst;
        memset(o, 0, sizeof *o);
        if (isnone) return 0;
        o->value = strtoll(v, &end, 10); if (*skip_ws(end)) return -1;
        o->has_value = 1; return 0;
    }
    case MXP_PARAM_OPT_FLOAT: {
        mxp_param_opt_float *o = (mxp_param_opt_float *)dst;
        memset(o, 0, sizeof *o);
        if (isnone) return 0;
        o->value = strtod(v, &end); if (*skip_ws(end)) return -1;
        o->has_value = 1; return 0;
    }
    }
    return -1;
}

static int parse_into(const mxp_param_def *defs, uint32_t n, const char *const *keys,
                      const char *const *vals, uint32_t nk, void *out, const char *what) {
    for (uint32_t k = 0; k < nk; k++) {
        uint32_t i;
        for (i = 0; i < n; i++) if (!strcmp(defs[i].name, keys[k])) break;
        if (i == n) return h_set_error(MXP_EINVAL, "%s: unknown parameter '%s'", what, keys[k]);
    }
    for (uint32_t i = 0; i < n; i++) {
        const char *v = NULL;
        for (uint32_t k = 0; k < nk; k++) if (!strcmp(defs[i].name, keys[k])) v = vals[k];
        if (!v) {
            if (defs[i].flags & MXP_PARAM_REQUIRED)
                return h_set_error(MXP_EINVAL, "%s: required parameter '%s' missing", what, defs[i].name);
            v = defs[i].default_value;
            if (!v) v = "None";
        }
        if (parse_value(&defs[i], v, out) < 0)
            return h_set_error(MXP_EINVAL, "%s: bad value '%s' for '%s'", what, v, defs[i].name);
        if (defs[i].flags & MXP_PARAM_HAS_MIN) {
            double x = defs[i].type == MXP_PARAM_INT ? (double)*(int64_t *)((char *)out + defs[i].offset)
                     : defs[i].type == MXP_PARAM_FLOAT ? *(double *)((char *)out + defs[i].offset) : defs[i].min;
            if (x < defs[i].min)
                return h_set_error(MXP_EINVAL, "%s: '%s'=%s below minimum %g", what, defs[i].name, v, defs[i].min);
        }
    }
    return MXP_OK;
}

static void h_free_params(const mxp_param_def *d, uint32_t n, void *p) { (void)d; (void)n; (void)p; }

int nnh_parse(const mxp_param_def *defs, uint32_t n, uint32_t size, const char *kwargs, void **out) {
    *out = NULL;
    char *buf = strdup(kwargs ? kwargs : "");
    const char *keys[32], *vals[32];
    uint32_t nk = 0;
    char *p = buf;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        char *eq = strchr(p, '=');
        if (!eq || nk == 32) { free(buf); return h_set_error(MXP_EINVAL, "bad kwargs '%s'", kwargs); }
        *eq = 0; keys[nk] = p; p = eq + 1; vals[nk] = p;
        int depth = 0;
        while (*p && (depth || *p != ' ')) { if (*p == '(') depth++; if (*p == ')') depth--; p++; }
        if (*p) *p++ = 0;
        nk++;
    }
    void *s = calloc(1, size ? size : 1);
    int st = parse_into(defs, n, keys, vals, nk, s, "params");
    /* STRING values point into buf: the harness keeps none (ops-nn has no
     * STRING params), so buf can go. */
    free(buf);
    if (st < 0) { free(s); return st; }
    *out = s;
    return MXP_OK;
}

static const mxp_host g_host = {
    MXP_HEADER(mxp_host), "nn-harness",
    h_set_error, h_log, h_num_threads, h_parallel_for, h_alloc, h_free,
    h_uniform_f32, NULL, h_bernoulli_f32, h_uniform_f64, NULL, h_bits, NULL,
    NULL, parse_into, h_free_params, NULL, NULL, NULL, NULL, NULL, NULL
};
const mxp_host *nnh_host(void) { return &g_host; }

/* ------------------------------------------------------------ registrar */
static int r_add_op(mxp_registrar *r, const mxp_op_def *d) {
    nnh_pack *p = r->host_private;
    if (p->n_defs == 64) return MXP_ENOMEM;
    p->defs[p->n_defs++] = d; return MXP_OK;
}
static int r_add_impl(mxp_registrar *r, const mxp_op_impl *d) {
    nnh_pack *p = r->host_private;
    if (p->n_impls == 128) return MXP_ENOMEM;
    p->impls[p->n_impls++] = d; return MXP_OK;
}

nnh_pack *nnh_load(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/plugins/libmxp-%s.so", MXP_BUILD_DIR, name);
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) { snprintf(g_err, sizeof g_err, "dlopen: %s", dlerror()); return NULL; }
    mxp_plugin_entry_fn entry = (mxp_plugin_entry_fn)dlsym(dl, MXP_PLUGIN_ENTRY_NAME);
    if (!entry) { dlclose(dl); snprintf(g_err, sizeof g_err, "no entry"); return NULL; }
    nnh_pack *p = calloc(1, sizeof *p);
    p->dl = dl; p->desc = entry();
    mxp_registrar reg = { MXP_HEADER(mxp_registrar), p, r_add_op, r_add_impl, NULL, NULL, NULL, NULL, NULL };
    mxp_plugin_init_args ia = { MXP_HEADER(mxp_plugin_init_args), &g_host, &reg, path };
    if (p->desc->init(&ia) != MXP_OK) { dlclose(dl); free(p); return NULL; }
    return p;
}

void nnh_unload(nnh_pack *p) {
    if (!p) return;
    if (p->desc->fini) { mxp_plugin_fini_args fa = { MXP_HEADER(mxp_plugin_fini_args), &g_host }; p->desc->fini(&fa); }
    dlclose(p->dl);
    free(p);
}

const mxp_op_def *nnh_def(nnh_pack *p, const char *op) {
    for (int i = 0; i < p->n_defs; i++) {
        if (!strcmp(p->defs[i]->name, op)) return p->defs[i];
        for (int k = 0; p->defs[i]->aliases && p->defs[i]->aliases[k]; k++)
            if (!strcmp(p->defs[i]->aliases[k], op)) return p->defs[i];
    }
    return NULL;
}
const mxp_op_impl *nnh_impl(nnh_pack *p, const char *op, const char *impl) {
    for (int i = 0; i < p->n_impls; i++)
        if (!strcmp(p->impls[i]->op_name, op) && !strcmp(p->impls[i]->impl_name, impl)) return p->impls[i];
    return NULL;
}

int64_t nnh_numel(const mxp_shape *s) { int64_t n = 1; for (int i = 0; i < s->ndim; i++) n *= s->dims[i]; return n; }

static uint32_t list_names(int (*fn)(mxp_list_names_args *), const char *const *stat, const void *params,
                           void *ud, char (*names)[MXP_NAME_MAX], int dflt_output) {
    if (fn) {
        mxp_list_names_args a = { MXP_HEADER(mxp_list_names_args), params, ud, names, NNH_MAX, 0 };
        if (fn(&a) < 0) return 0;
        return a.count;
    }
    uint32_t n = 0;
    if (!stat) { if (dflt_output) { strcpy(names[0], "output"); return 1; } return 0; }
    for (; stat[n]; n++) snprintf(names[n], MXP_NAME_MAX, "%s", stat[n]);
    return n;
}

int nnh_node_init(nnh_node *n, nnh_pack *p, const char *op, const char *impl, const char *kwargs, int32_t dtype) {
    memset(n, 0, sizeof *n);
    n->pack = p; n->dtype = dtype;
    n->def = nnh_def(p, op);
    if (!n->def) return h_set_error(MXP_ENOENT, "no op %s", op);
    n->impl = nnh_impl(p, n->def->name, impl);
    if (!n->impl) return h_set_error(MXP_ENOENT, "no impl %s/%s", op, impl);
    int st = nnh_parse(n->def->params, n->def->n_params, n->def->params_size, kwargs, &n->params);
    if (st < 0) return st;
    if (n->def->check_params) {
        mxp_check_params_args ca = { MXP_HEADER(mxp_check_params_args), n->params, n->def->user_data };
        if ((st = n->def->check_params(&ca)) < 0) return st;
    }
    char names[NNH_MAX][MXP_NAME_MAX];
    n->n_in = list_names(n->def->list_args, n->def->arg_names, n->params, n->def->user_data, n->in_names, 0);
    n->n_out = list_names(n->def->list_outputs, n->def->output_names, n->params, n->def->user_data, names, 1);
    n->n_aux = list_names(n->def->list_aux, n->def->aux_names, n->params, n->def->user_data, names, 0);
    for (int i = 0; i < NNH_MAX; i++) {
        n->in_shape[i].ndim = -1; n->out_shape[i].ndim = -1; n->aux_shape[i].ndim = -1;
        n->in_dtype[i] = dtype;
    }
    return MXP_OK;
}

int nnh_node_infer(nnh_node *n) {
    mxp_infer_shape_args a = { MXP_HEADER(mxp_infer_shape_args), n->params, n->def->user_data,
                               n->n_in, n->n_out, n->n_aux, 0, n->in_shape, n->out_shape, n->aux_shape };
    return n->def->infer_shape(&a);
}

static void fill_query(nnh_node *n, mxp_impl_query_args *q, int is_train, int32_t *odt, int32_t *adt) {
    memset(q, 0, sizeof *q);
    q->hdr = (mxp_header)MXP_HEADER(mxp_impl_query_args);
    q->params = n->params; q->user_data = n->impl->user_data;
    q->device.type = MXP_DEV_CPU;
    q->n_in = n->n_in; q->n_out = n->n_out; q->n_aux = n->n_aux; q->is_train = is_train;
    q->in_shapes = n->in_shape; q->out_shapes = n->out_shape; q->aux_shapes = n->aux_shape;
    for (int i = 0; i < NNH_MAX; i++) { odt[i] = n->dtype; adt[i] = n->dtype; }
    q->in_dtypes = n->in_dtype; q->out_dtypes = odt; q->aux_dtypes = adt;
    q->reason = n->reason; q->reason_size = sizeof n->reason;
}

static uint64_t esz(int32_t dt) { return mxp_dtype_size(dt); }

int nnh_node_alloc(nnh_node *n, int is_train) {
    mxp_impl_query_args q; int32_t odt[NNH_MAX], adt[NNH_MAX];
    fill_query(n, &q, is_train, odt, adt);
    n->reason[0] = 0;
    if (n->impl->supports) {
        int s = n->impl->supports(&q);
        if (s <= 0) return s;
    }
    if (n->impl->workspace) {
        if (n->impl->workspace(&q) < 0) return -1;
        n->ws_bytes = q.workspace_bytes;
    }
    n->ws = n->ws_bytes ? h_alloc(n->ws_bytes) : NULL;
    if (n->impl->create) {
        if (n->impl->create(&q) < 0) return -1;
        n->state = q.state;
    }
    for (uint32_t i = 0; i < n->n_in; i++) {
        uint64_t b = (uint64_t)nnh_numel(&n->in_shape[i]) * esz(n->in_dtype[i]);
        n->in[i] = calloc(1, b + 8); n->in_grad[i] = calloc(1, b + 8);
    }
    for (uint32_t i = 0; i < n->n_out; i++) {
        uint64_t b = (uint64_t)nnh_numel(&n->out_shape[i]) * esz(n->dtype);
        n->out[i] = calloc(1, b + 8); n->out_grad[i] = calloc(1, b + 8);
    }
    for (uint32_t i = 0; i < n->n_aux; i++)
        n->aux[i] = calloc(1, (uint64_t)nnh_numel(&n->aux_shape[i]) * esz(n->dtype) + 8);
    return 1;
}

static void mk_tensor(mxp_tensor *t, void *data, const mxp_shape *s, int32_t dt) {
    memset(t, 0, sizeof *t);
    t->hdr = (mxp_header)MXP_HEADER(mxp_tensor);
    t->data = data; t->dtype = dt; t->ndim = s->ndim; t->shape = s->dims;
    t->device.type = MXP_DEV_CPU;
}

static void mk_ctx(nnh_node *n, mxp_op_ctx *c, int is_train, struct mxp_rng *rng) {
    memset(c, 0, sizeof *c);
    c->hdr = (mxp_header)MXP_HEADER(mxp_op_ctx);
    c->device.type = MXP_DEV_CPU;
    c->is_train = is_train;
    c->workspace = n->ws; c->workspace_bytes = n->ws_bytes;
    c->rng = (n->def->resources & MXP_RESOURCE_RANDOM) ? rng : NULL;
    c->parallel_for = ctx_parallel_for;
    c->host = &g_host;
}

int nnh_node_forward(nnh_node *n, int is_train, const int32_t *req) {
    mxp_tensor in[NNH_MAX], out[NNH_MAX], aux[NNH_MAX];
    int32_t wr[NNH_MAX];
    for (int i = 0; i < NNH_MAX; i++) wr[i] = MXP_REQ_WRITE;
    for (uint32_t i = 0; i < n->n_in; i++) mk_tensor(&in[i], n->in[i], &n->in_shape[i], n->in_dtype[i]);
    for (uint32_t i = 0; i < n->n_out; i++) mk_tensor(&out[i], n->out[i], &n->out_shape[i], n->dtype);
    for (uint32_t i = 0; i < n->n_aux; i++) mk_tensor(&aux[i], n->aux[i], &n->aux_shape[i], n->dtype);
    static _Thread_local struct mxp_rng rng = { 12345 };
    mxp_op_ctx c; mk_ctx(n, &c, is_train, &rng);
    mxp_forward_args a = { MXP_HEADER(mxp_forward_args), &c, n->params, n->state, n->impl->user_data,
                           n->n_in, n->n_out, n->n_aux, 0, in, out, aux, req ? req : wr, NULL };
    return n->impl->forward(&a);
}

int nnh_node_backward(nnh_node *n, const int32_t *req) {
    mxp_tensor in[NNH_MAX], out[NNH_MAX], aux[NNH_MAX], ig[NNH_MAX], og[NNH_MAX];
    int32_t wr[NNH_MAX];
    for (int i = 0; i < NNH_MAX; i++) wr[i] = MXP_REQ_WRITE;
    uint8_t need_in[NNH_MAX], need_out[NNH_MAX], need_og[NNH_MAX];
    uint32_t deps = n->def->backward_deps;
    for (int i = 0; i < NNH_MAX; i++) {
        need_in[i] = !!(deps & MXP_BWD_IN_DATA); need_out[i] = !!(deps & MXP_BWD_OUT_DATA);
        need_og[i] = !!(deps & MXP_BWD_OUT_GRAD) && !(n->def->flags & MXP_OP_LOSS);
    }
    if (n->def->declare_backward) {
        mxp_backward_deps_args d = { MXP_HEADER(mxp_backward_deps_args), n->params, n->def->user_data,
                                     n->n_in, n->n_out, need_og, need_in, need_out };
        n->def->declare_backward(&d);
    }
    for (uint32_t i = 0; i < n->n_in; i++) {
        mk_tensor(&in[i], need_in[i] ? n->in[i] : NULL, &n->in_shape[i], n->in_dtype[i]);
        mk_tensor(&ig[i], n->in_grad[i], &n->in_shape[i], n->in_dtype[i]);
    }
    for (uint32_t i = 0; i < n->n_out; i++) {
        mk_tensor(&out[i], need_out[i] ? n->out[i] : NULL, &n->out_shape[i], n->dtype);
        mk_tensor(&og[i], need_og[i] ? n->out_grad[i] : NULL, &n->out_shape[i], n->dtype);
    }
    for (uint32_t i = 0; i < n->n_aux; i++) mk_tensor(&aux[i], n->aux[i], &n->aux_shape[i], n->dtype);
    static _Thread_local struct mxp_rng rng = { 999 };
    mxp_op_ctx c; mk_ctx(n, &c, 1, &rng);
    mxp_backward_args a = { MXP_HEADER(mxp_backward_args), &c, n->params, n->state, n->impl->user_data,
                            n->n_in, n->n_out, n->n_aux, 0, og, in, out, ig, aux, req ? req : wr, NULL };
    return n->impl->backward(&a);
}

void nnh_node_free(nnh_node *n) {
    if (n->state && n->impl->destroy) {
        mxp_destroy_args d = { MXP_HEADER(mxp_destroy_args), n->state, n->impl->user_data };
        n->impl->destroy(&d);
    }
    for (int i = 0; i < NNH_MAX; i++) {
        free(n->in[i]); free(n->out[i]); free(n->aux[i]); free(n->in_grad[i]); free(n->out_grad[i]);
    }
    free(n->ws);
    free(n->params);
    memset(n, 0, sizeof *n);
}
