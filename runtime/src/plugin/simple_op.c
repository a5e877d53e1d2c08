/* simple_op.c — expand a SimpleOp (mxp_simple_op_def) into a full op
 * definition and one implementation, as the seed's unified operator API
 * does, so a whole-array kernel works on NDArrays and inside symbols.
 *
 * What the expansion adds: argument names (data | lhs, rhs), shape
 * inference (equal shapes, or numpy broadcasting for BROADCAST), default
 * type inference, a FLOAT parameter "scalar" for SCALAR kinds (stored after
 * the pack's own params, at scalar_offset), backward dependencies from the
 * gradient kind, inplace options, and forward/backward adapters:
 *   - BROADCAST forward passes each input as a view shaped like the output
 *     with stride 0 on broadcast dimensions;
 *   - BROADCAST backward lets the kernel write full-shape gradients of the
 *     broadcast inputs into the workspace (impl.workspace asks for it) and
 *     reduce-sums them to each input's shape, honouring req (write/add);
 *   - GRAD_ZERO backward writes zeros (or leaves the target for req add).
 * Not here: running anything on the engine (op/). */
#include "plugin/plugin_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_unary_args[] = {"data", NULL};
static const char *const k_binary_args[] = {"lhs", "rhs", NULL};

static int known(const mxp_shape *s) {
    if (s->ndim < 0) return 0;
    for (int i = 0; i < s->ndim; i++)
        if (s->dims[i] == 0) return 0;
    return 1;
}

int mxp__simple_broadcast_shape(const mxp_shape *a, const mxp_shape *b, mxp_shape *out) {
    memset(out, 0, sizeof *out);
    out->ndim = -1;
    if (a->ndim < 0 || b->ndim < 0) return MXP_EINCOMPLETE;
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    if (n > MXP_MAX_NDIM) return mxp__error(MXP_ESHAPE, "broadcast: rank %d exceeds %d", n, MXP_MAX_NDIM);
    for (int i = 0; i < n; i++) {
        int ia = a->ndim - n + i, ib = b->ndim - n + i;
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        int64_t d;
        if (da == db) d = da;
        else if (da == 1) d = db;
        else if (db == 1) d = da;
        else {
            char sa[128], sb[128];
            mxp__shape_str(a, sa, sizeof sa);
            mxp__shape_str(b, sb, sizeof sb);
            return mxp__error(MXP_ESHAPE, "shapes %s and %s cannot be broadcast together (dimension %d: %lld vs %lld)",
                              sa, sb, i, (long long)da, (long long)db);
        }
        out->dims[i] = d;
    }
    out->ndim = n;
    return MXP_OK;
}

static int infer_shape(mxp_infer_shape_args *a) {
    const mxp_simple_expansion *e = a->user_data;
    const char *name = e->def.name;
    int kind = e->sdef->kind;
    if (kind == MXP_SIMPLE_BROADCAST) {
        if (!known(&a->in[0]) || !known(&a->in[1])) return MXP_EINCOMPLETE;
        int rc = mxp__simple_broadcast_shape(&a->in[0], &a->in[1], &a->out[0]);
        if (rc) return mxp__error_prefix(rc, "op '%s'", name);
        return MXP_OK;
    }
    uint32_t n = kind == MXP_SIMPLE_BINARY ? 2 : 1;
    const mxp_shape *src = NULL;
    for (uint32_t i = 0; i < n && !src; i++)
        if (known(&a->in[i])) src = &a->in[i];
    if (!src && known(&a->out[0])) src = &a->out[0];
    if (!src) return MXP_EINCOMPLETE;
    mxp_shape s = *src;
    for (uint32_t i = 0; i < n; i++) {
        if (known(&a->in[i]) && (a->in[i].ndim != s.ndim ||
                                 memcmp(a->in[i].dims, s.dims, sizeof(int64_t) * (size_t)s.ndim))) {
            char sa[128], sb[128];
            mxp__shape_str(&a->in[i], sa, sizeof sa);
            mxp__shape_str(&s, sb, sizeof sb);
            return mxp__error(MXP_ESHAPE, "op '%s': input %u has shape %s, expected %s (equal shapes)", name, i, sa, sb);
        }
        a->in[i] = s;
    }
    a->out[0] = s;
    return MXP_OK;
}

/* Strides (elements) of a tensor, row-major when NULL. */
static void strides_of(const mxp_tensor *t, int64_t *st) {
    if (t->strides) {
        for (int i = 0; i < t->ndim; i++) st[i] = t->strides[i];
        return;
    }
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        st[i] = s;
        s *= t->shape[i];
    }
}

/* A view of `in` shaped like `like`, stride 0 on broadcast dimensions. */
typedef struct bview {
    mxp_tensor t;
    int64_t shape[MXP_MAX_NDIM];
    int64_t strides[MXP_MAX_NDIM];
} bview;

static void make_bview(const mxp_tensor *in, const mxp_tensor *like, bview *v) {
    int64_t st[MXP_MAX_NDIM];
    strides_of(in, st);
    v->t = *in;
    int n = like->ndim;
    for (int i = 0; i < n; i++) {
        int k = in->ndim - n + i;
        v->shape[i] = like->shape[i];
        v->strides[i] = (k >= 0 && in->shape[k] == like->shape[i]) ? st[k] : 0;
    }
    v->t.ndim = n;
    v->t.shape = v->shape;
    v->t.strides = v->strides;
}

static double scalar_of(const mxp_simple_expansion *e, const void *params) {
    if (e->sdef->kind != MXP_SIMPLE_SCALAR || !params) return 0;
    double v;
    memcpy(&v, (const char *)params + e->scalar_offset, sizeof v);
    return v;
}

static int simple_forward(const mxp_forward_args *a) {
    const mxp_simple_expansion *e = a->user_data;
    int32_t req = a->req ? a->req[0] : MXP_REQ_WRITE;
    if (req == MXP_REQ_NULL) return MXP_OK;
    mxp_simple_args sa;
    memset(&sa, 0, sizeof sa);
    sa.hdr = (mxp_header)MXP_HEADER(mxp_simple_args);
    sa.ctx = a->ctx;
    sa.params = a->params;
    sa.user_data = e->sdef->user_data;
    sa.scalar = scalar_of(e, a->params);
    sa.n_in = (e->sdef->kind == MXP_SIMPLE_BINARY || e->sdef->kind == MXP_SIMPLE_BROADCAST) ? 2 : 1;
    sa.req = req;
    sa.out = &a->out[0];
    mxp_tensor views[2];
    if (e->sdef->kind == MXP_SIMPLE_BROADCAST) {
        bview bv[2];
        for (int i = 0; i < 2; i++) {
            make_bview(&a->in[i], &a->out[0], &bv[i]);
            views[i] = bv[i].t;
        }
        sa.in = views;
        return e->sdef->forward(&sa);
    }
    sa.in = a->in;
    return e->sdef->forward(&sa);
}

/* ------------------------------------------------------------ reduce */
/* dst (shape of an input, any strides) op= sum over broadcast dims of src
 * (contiguous, shape of out).  req WRITE/INPLACE assigns, ADD accumulates. */
#define REDUCE_BODY(T)                                                                       \
    do {                                                                                     \
        T *d = (T *)mxp_tensor_ptr(dst);                                                     \
        const T *s = (const T *)src;                                                         \
        if (req != MXP_REQ_ADD) {                                                            \
            for (int64_t j = 0; j < nd; j++) {                                               \
                int64_t off = 0, rem = j;                                                    \
                for (int k = dst->ndim - 1; k >= 0; k--) {                                   \
                    off += (rem % dst->shape[k]) * dst_st[k];                                \
                    rem /= dst->shape[k];                                                    \
                }                                                                            \
                d[off] = (T)0;                                                               \
            }                                                                                \
        }                                                                                    \
        for (int64_t j = 0; j < ns; j++) {                                                   \
            int64_t off = 0, rem = j;                                                        \
            for (int k = n - 1; k >= 0; k--) {                                               \
                int64_t idx = rem % full_shape[k];                                           \
                rem /= full_shape[k];                                                        \
                off += idx * map_st[k];                                                      \
            }                                                                                \
            d[off] = (T)(d[off] + s[j]);                                                     \
        }                                                                                    \
    } while (0)

static int reduce_to(const mxp_tensor *dst, const void *src, const int64_t *full_shape, int n, int32_t req,
                     const char *name) {
    if (req == MXP_REQ_NULL) return MXP_OK;
    int64_t dst_st[MXP_MAX_NDIM], map_st[MXP_MAX_NDIM];
    strides_of(dst, dst_st);
    for (int i = 0; i < n; i++) {
        int k = dst->ndim - n + i;
        map_st[i] = (k >= 0 && dst->shape[k] == full_shape[i]) ? dst_st[k] : 0;
    }
    int64_t nd = mxp_tensor_numel(dst), ns = 1;
    for (int i = 0; i < n; i++) ns *= full_shape[i];
    switch (dst->dtype) {
    case MXP_DTYPE_F32: REDUCE_BODY(float); break;
    case MXP_DTYPE_F64: REDUCE_BODY(double); break;
    case MXP_DTYPE_I32: REDUCE_BODY(int32_t); break;
    case MXP_DTYPE_I64: REDUCE_BODY(int64_t); break;
    default:
        return mxp__error(MXP_EUNSUPPORTED, "op '%s': broadcast gradient for dtype %s is not supported", name,
                          mxp_dtype_name(dst->dtype) ? mxp_dtype_name(dst->dtype) : "?");
    }
    return MXP_OK;
}

static int zero_fill(const mxp_tensor *t, int32_t req) {
    if (!t->data || req == MXP_REQ_NULL || req == MXP_REQ_ADD) return MXP_OK;
    int64_t st[MXP_MAX_NDIM];
    strides_of(t, st);
    size_t es = mxp_dtype_size(t->dtype);
    int64_t n = mxp_tensor_numel(t);
    if (mxp_tensor_is_contiguous(t)) {
        memset(mxp_tensor_ptr(t), 0, (size_t)n * es);
        return MXP_OK;
    }
    for (int64_t j = 0; j < n; j++) {
        int64_t off = 0, rem = j;
        for (int k = t->ndim - 1; k >= 0; k--) {
            off += (rem % t->shape[k]) * st[k];
            rem /= t->shape[k];
        }
        memset((char *)mxp_tensor_ptr(t) + off * (int64_t)es, 0, es);
    }
    return MXP_OK;
}

static int simple_backward(const mxp_backward_args *a) {
    const mxp_simple_expansion *e = a->user_data;
    const mxp_simple_op_def *sd = e->sdef;
    uint32_t n_in = (sd->kind == MXP_SIMPLE_BINARY || sd->kind == MXP_SIMPLE_BROADCAST) ? 2 : 1;
    if (sd->grad_kind == MXP_GRAD_ZERO || !sd->backward) {
        for (uint32_t i = 0; i < n_in; i++) {
            int rc = zero_fill(&a->in_grad[i], a->req ? a->req[i] : MXP_REQ_WRITE);
            if (rc) return rc;
        }
        return MXP_OK;
    }
    mxp_simple_grad_args g;
    memset(&g, 0, sizeof g);
    g.hdr = (mxp_header)MXP_HEADER(mxp_simple_grad_args);
    g.ctx = a->ctx;
    g.params = a->params;
    g.user_data = sd->user_data;
    g.scalar = scalar_of(e, a->params);
    g.n_in = n_in;
    g.out_grad = &a->out_grad[0];
    g.out = &a->out[0];
    if (sd->kind != MXP_SIMPLE_BROADCAST) {
        g.in = a->in;
        g.in_grad = a->in_grad;
        g.req = a->req;
        return sd->backward(&g);
    }
    /* Broadcast: full-shape views of inputs; full-shape grads in workspace
     * for the inputs that were broadcast. */
    const mxp_tensor *og = &a->out_grad[0];
    bview inv[2];
    mxp_tensor ins[2], grads[2];
    int32_t reqs[2];
    int reduce[2] = {0, 0};
    size_t es = mxp_dtype_size(og->dtype);
    int64_t numel = mxp_tensor_numel(og);
    char *ws = a->ctx ? a->ctx->workspace : NULL;
    uint64_t ws_bytes = a->ctx ? a->ctx->workspace_bytes : 0;
    static const int64_t none_shape[1] = {0};
    for (uint32_t i = 0; i < 2; i++) {
        if (a->in[i].data) {
            make_bview(&a->in[i], og, &inv[i]);
            ins[i] = inv[i].t;
        } else {
            ins[i] = a->in[i];
        }
        const mxp_tensor *ig = &a->in_grad[i];
        reqs[i] = a->req ? a->req[i] : MXP_REQ_WRITE;
        int same = ig->ndim == og->ndim && !memcmp(ig->shape, og->shape, sizeof(int64_t) * (size_t)og->ndim);
        if (same || reqs[i] == MXP_REQ_NULL) {
            grads[i] = *ig;
            continue;
        }
        if (!ws || ws_bytes < (uint64_t)(i + 1) * (uint64_t)numel * es)
            return mxp__error(MXP_EINVAL, "op '%s': broadcast backward needs %llu workspace bytes, got %llu",
                              e->def.name, (unsigned long long)(2 * (uint64_t)numel * es),
                              (unsigned long long)ws_bytes);
        grads[i] = *og;
        grads[i].data = ws + (size_t)i * (size_t)numel * es;
        grads[i].byte_offset = 0;
        grads[i].strides = NULL;
        reduce[i] = 1;
        reqs[i] = MXP_REQ_WRITE;
    }
    (void)none_shape;
    g.in = ins;
    g.in_grad = grads;
    g.req = reqs;
    int rc = sd->backward(&g);
    if (rc) return rc;
    for (uint32_t i = 0; i < 2 && !rc; i++)
        if (reduce[i]) rc = reduce_to(&a->in_grad[i], grads[i].data, og->shape, og->ndim, a->req ? a->req[i] : MXP_REQ_WRITE, e->def.name);
    return rc;
}

static int simple_workspace(mxp_impl_query_args *a) {
    a->workspace_bytes = 0;
    if (a->n_out < 1 || !a->out_shapes || a->out_shapes[0].ndim < 0) return MXP_OK;
    uint64_t n = 1;
    for (int i = 0; i < a->out_shapes[0].ndim; i++) n *= (uint64_t)a->out_shapes[0].dims[i];
    uint32_t es = a->out_dtypes ? mxp_dtype_size(a->out_dtypes[0]) : 8;
    a->workspace_bytes = 2 * n * (es ? es : 8);
    return MXP_OK;
}

int mxp__simple_expand(const mxp_simple_op_def *sd, mxp_simple_expansion **out) {
    *out = NULL;
    if (!sd->name || !*sd->name) return mxp__error(MXP_EINVAL, "simple op without a name");
    if (sd->kind < MXP_SIMPLE_UNARY || sd->kind > MXP_SIMPLE_SCALAR)
        return mxp__error(MXP_EINVAL, "simple op '%s': unknown kind %d", sd->name, sd->kind);
    if (sd->grad_kind < MXP_GRAD_NONE || sd->grad_kind > MXP_GRAD_ZERO)
        return mxp__error(MXP_EINVAL, "simple op '%s': unknown grad kind %d", sd->name, sd->grad_kind);
    if (!sd->forward) return mxp__error(MXP_EINVAL, "simple op '%s': no forward kernel", sd->name);
    if ((sd->grad_kind == MXP_GRAD_USES_OUT_GRAD || sd->grad_kind == MXP_GRAD_USES_OUTPUT ||
         sd->grad_kind == MXP_GRAD_USES_INPUT) && !sd->backward)
        return mxp__error(MXP_EINVAL, "simple op '%s': gradient kind %d needs a backward kernel", sd->name,
                          sd->grad_kind);
    if (sd->n_params && !sd->params)
        return mxp__error(MXP_EINVAL, "simple op '%s': n_params %u but no params", sd->name, sd->n_params);
    mxp_simple_expansion *e = calloc(1, sizeof *e);
    if (!e) return mxp__error_oom("simple op");
    e->sdef = sd;
    uint32_t extra = sd->kind == MXP_SIMPLE_SCALAR ? 1 : 0;
    e->n_params = sd->n_params + extra;
    e->params = calloc(e->n_params ? e->n_params : 1, sizeof *e->params);
    if (!e->params) {
        free(e);
        return mxp__error_oom("simple op");
    }
    for (uint32_t i = 0; i < sd->n_params; i++) {
        const mxp_param_def *p = mxp__param_def_at(sd->params, i);
        size_t n = p->hdr.struct_size < sizeof *p ? p->hdr.struct_size : sizeof *p;
        memcpy(&e->params[i], p, n);
        e->params[i].hdr.struct_size = sizeof *p;
    }
    uint32_t psize = (sd->params_size + 7u) & ~7u;
    e->scalar_offset = psize;
    if (extra) {
        mxp_param_def sp = {MXP_HEADER(mxp_param_def), "scalar", MXP_PARAM_FLOAT, 0, psize, 0, "0", 0, 0, NULL,
                            "The scalar operand."};
        e->params[sd->n_params] = sp;
        psize += 8;
    }
    mxp_op_def *d = &e->def;
    d->hdr = (mxp_header)MXP_HEADER(mxp_op_def);
    d->name = sd->name;
    d->aliases = sd->aliases;
    d->doc = sd->doc;
    d->params = e->n_params ? e->params : NULL;
    d->n_params = e->n_params;
    d->params_size = psize;
    d->arg_names = (sd->kind == MXP_SIMPLE_BINARY || sd->kind == MXP_SIMPLE_BROADCAST) ? k_binary_args : k_unary_args;
    d->infer_shape = infer_shape;
    switch (sd->grad_kind) {
    case MXP_GRAD_NONE: d->flags = MXP_OP_NO_GRADIENT; break;
    case MXP_GRAD_USES_OUT_GRAD: d->backward_deps = MXP_BWD_OUT_GRAD; break;
    case MXP_GRAD_USES_OUTPUT: d->backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_OUT_DATA; break;
    case MXP_GRAD_USES_INPUT: d->backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA; break;
    default: d->backward_deps = 0; break;
    }
    if ((sd->inplace & MXP_SIMPLE_IDENTITY_GRAD) && sd->kind == MXP_SIMPLE_BINARY &&
        sd->grad_kind == MXP_GRAD_USES_OUT_GRAD)
        d->flags |= MXP_OP_IDENTITY_GRAD;
    e->fwd_inplace.from = 0; e->fwd_inplace.to = 0;
    e->bwd_inplace.from = 0; e->bwd_inplace.to = 0;
    if ((sd->inplace & MXP_SIMPLE_INPLACE_FWD) && sd->kind != MXP_SIMPLE_BROADCAST) {
        d->forward_inplace = &e->fwd_inplace;
        d->n_forward_inplace = 1;
    }
    if ((sd->inplace & MXP_SIMPLE_INPLACE_BWD) && sd->kind != MXP_SIMPLE_BROADCAST) {
        d->backward_inplace = &e->bwd_inplace;
        d->n_backward_inplace = 1;
    }
    d->resources = sd->resources | (sd->kind == MXP_SIMPLE_BROADCAST ? MXP_RESOURCE_TEMP_SPACE : 0);
    d->user_data = e;
    mxp_op_impl *im = &e->impl;
    im->hdr = (mxp_header)MXP_HEADER(mxp_op_impl);
    im->op_name = sd->name;
    im->impl_name = sd->impl_name ? sd->impl_name : "default";
    im->device = sd->device ? sd->device : "cpu";
    im->rank = sd->rank;
    im->doc = sd->doc;
    im->workspace = sd->kind == MXP_SIMPLE_BROADCAST ? simple_workspace : NULL;
    im->forward = simple_forward;
    im->backward = sd->grad_kind == MXP_GRAD_NONE ? NULL : simple_backward;
    im->user_data = e;
    *out = e;
    return MXP_OK;
}

void mxp__simple_free(mxp_simple_expansion *e) {
    if (!e) return;
    free((void *)e->sdef); /* the registrar's host copy */
    free(e->params);
    free(e);
}
