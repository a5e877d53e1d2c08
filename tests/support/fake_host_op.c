/* fake_host_op.c — op calls of the fake host (fake_host.h): SimpleOps
 * expanded as the runtime does (broadcast views with stride 0, gradients
 * reduced over broadcast axes), full ops with shape/type inference,
 * supports, workspace, state and backward dependencies, at array level
 * (fh_forward / fh_backward / fh_grad_check) and at node level (fh_node:
 * buffers owned by the node, aux states).  An op spec "Name@impl" picks
 * an impl; "Name" takes the op's first.  Errors in fh_error(). */
#include "fake_host.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define fail fh__fail
#define xcalloc fh__xcalloc

/* A SimpleOp's scalar ("2", "-0.5", "inf"). */
static int parse_num(const char *s, double *out) {
    char *end;
    *out = strtod(s, &end);
    while (*end == ' ') end++;
    return end == s || *end ? -1 : 0;
}

/* ----------------------------------------------------- SimpleOp support */
typedef struct sparams {
    void *params;
    double scalar;
} sparams;

static void sparams_free(const mxp_simple_op_def *d, sparams *sp) {
    fh_params_free(d->params, d->n_params, sp->params);
    free(sp->params);
}

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
    return fh_parse(d->params, d->n_params, rest, sp->params);
}

/* View of `a` broadcast to out's shape (numpy rules); -1 if impossible. */
typedef struct bview {
    mxp_tensor t;
    int64_t shape[MXP_MAX_NDIM], strides[MXP_MAX_NDIM];
} bview;

static int make_bview(bview *v, const fh_arr *a, int nd, const int64_t *oshape) {
    int64_t rm[MXP_MAX_NDIM];
    int64_t s = 1;
    for (int i = a->ndim - 1; i >= 0; i--) { rm[i] = s; s *= a->shape[i]; }
    if (a->ndim > nd) return -1;
    v->t = fh_view(a);
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

static int simple_out_shape(const mxp_simple_op_def *d, int n_in, const fh_arr *in, int *nd,
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

/* One SimpleOp forward on tensors shaped like the output. */
static int simple_call(const mxp_simple_op_def *d, const sparams *sp, int n_in, const mxp_tensor *in,
                       const mxp_tensor *out, int req) {
    mxp_op_ctx ctx = fh__ctx(NULL, 0, 1, (d->resources & MXP_RESOURCE_RANDOM) != 0);
    mxp_simple_args a;
    memset(&a, 0, sizeof a);
    a.hdr = (mxp_header)MXP_HEADER(mxp_simple_args);
    a.ctx = &ctx;
    a.params = sp->params;
    a.user_data = d->user_data;
    a.scalar = sp->scalar;
    a.n_in = (uint32_t)n_in;
    a.req = req;
    a.in = in;
    a.out = out;
    return d->forward(&a);
}

static int simple_forward(const mxp_simple_op_def *d, const char *const *kw, int n_in,
                          const fh_arr *in, int *n_out, fh_arr *out, int req) {
    int nd;
    int64_t shape[MXP_MAX_NDIM];
    int rc = simple_out_shape(d, n_in, in, &nd, shape);
    if (rc) return rc;
    sparams sp;
    rc = simple_params(d, kw, &sp);
    if (rc) { sparams_free(d, &sp); return rc; }
    if (!out[0].data) out[0] = fh_arr_new(in[0].dtype, nd, shape);
    *n_out = 1;
    bview bv[2];
    mxp_tensor tin[2];
    for (int i = 0; i < n_in; i++) {
        if (make_bview(&bv[i], &in[i], nd, shape)) { sparams_free(d, &sp); return fail(MXP_ESHAPE, "bview"); }
        tin[i] = bv[i].t;
        tin[i].shape = bv[i].shape;
        tin[i].strides = bv[i].strides;
    }
    mxp_tensor tout = fh_view(&out[0]);
    rc = simple_call(d, &sp, n_in, tin, &tout, req);
    sparams_free(d, &sp);
    return rc;
}

/* Sum full (shaped like out) into g (its own shape, broadcast) with req. */
static void reduce_into(const fh_arr *full, fh_arr *g, int32_t req) {
    bview bv;
    make_bview(&bv, g, full->ndim, full->shape);
    int64_t n = fh_numel(g);
    double *acc = xcalloc((size_t)n, sizeof(double));
    int64_t idx[MXP_MAX_NDIM] = {0};
    for (int64_t i = 0; i < fh_numel(full); i++) {
        int64_t off = 0;
        for (int d = 0; d < full->ndim; d++) off += idx[d] * bv.strides[d];
        acc[off] += fh_get(full, i);
        for (int d = full->ndim - 1; d >= 0; d--) {
            if (++idx[d] < full->shape[d]) break;
            idx[d] = 0;
        }
    }
    for (int64_t i = 0; i < n; i++)
        fh_set(g, i, req == MXP_REQ_ADD ? fh_get(g, i) + acc[i] : acc[i]);
    free(acc);
}

static int simple_backward(const mxp_simple_op_def *d, const char *const *kw, int n_in,
                           const fh_arr *in, const fh_arr *out, const fh_arr *og,
                           fh_arr *in_grad, const int32_t *req) {
    int nd;
    int64_t shape[MXP_MAX_NDIM];
    int rc = simple_out_shape(d, n_in, in, &nd, shape);
    if (rc) return rc;
    if (d->grad_kind == MXP_GRAD_NONE) return fail(MXP_EINVAL, "%s: not differentiable", d->name);
    sparams sp;
    rc = simple_params(d, kw, &sp);
    if (rc) { sparams_free(d, &sp); return rc; }
    fh_arr full[2];
    mxp_tensor tin[2], tg[2], tout, tog;
    bview bv[2];
    int32_t kreq[2];
    for (int i = 0; i < n_in; i++) {
        if (!in_grad[i].data) in_grad[i] = fh_arr_new(in[i].dtype, in[i].ndim, in[i].shape);
        make_bview(&bv[i], &in[i], nd, shape);
        tin[i] = bv[i].t;
        tin[i].shape = bv[i].shape;
        tin[i].strides = bv[i].strides;
        if (d->grad_kind != MXP_GRAD_USES_INPUT) tin[i].data = NULL;
        full[i] = fh_arr_new(in_grad[i].dtype, nd, shape);
        tg[i] = fh_view(&full[i]);
        kreq[i] = MXP_REQ_WRITE;
    }
    tout = fh_view(out);
    if (d->grad_kind != MXP_GRAD_USES_OUTPUT) tout.data = NULL;
    tog = fh_view(og);
    if (d->grad_kind != MXP_GRAD_ZERO) {
        if (!d->backward) { rc = fail(MXP_EINVAL, "%s: no backward", d->name); goto done; }
        mxp_op_ctx ctx = fh__ctx(NULL, 0, 1, 0);
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
    for (int i = 0; i < n_in; i++) fh_arr_free(&full[i]);
    sparams_free(d, &sp);
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

/* "Name@impl" -> name (in buf) and impl (NULL when not given). */
static const char *split_spec(const char *spec, char *buf, size_t cap, const char **impl) {
    const char *at = strchr(spec, '@');
    *impl = NULL;
    if (!at) return spec;
    snprintf(buf, cap, "%.*s", (int)(at - spec), spec);
    *impl = at + 1;
    return buf;
}

static int fcall_init(fh_pack *p, const char *spec, const char *const *kw, fcall *f) {
    char buf[MXP_NAME_MAX];
    const char *impl, *op = split_spec(spec, buf, sizeof buf, &impl);
    memset(f, 0, sizeof *f);
    f->def = fh_op_def(p, op);
    if (!f->def) return fail(MXP_ENOENT, "op '%s' not found", op);
    f->impl = fh_impl(p, op, impl);
    if (!f->impl) return fail(MXP_ENOENT, "op '%s': no impl '%s'", op, impl ? impl : "(any)");
    f->params = xcalloc(1, f->def->params_size ? f->def->params_size : 8);
    int rc = fh_parse(f->def->params, f->def->n_params, kw, f->params);
    if (rc) return rc;
    if (f->def->check_params) {
        mxp_check_params_args c = {MXP_HEADER(mxp_check_params_args), f->params, f->def->user_data};
        rc = f->def->check_params(&c);
        if (rc) return rc;
    }
    if (f->def->list_outputs) {
        char names[FH_MAX_IO][MXP_NAME_MAX];
        mxp_list_names_args l = {MXP_HEADER(mxp_list_names_args), f->params, f->def->user_data,
                                 names, FH_MAX_IO, 0};
        rc = f->def->list_outputs(&l);
        if (rc) return rc;
        f->n_out = (int)l.count;
    } else {
        f->n_out = f->def->output_names ? count_names(f->def->output_names) : 1;
    }
    if (count_names(f->def->aux_names) || f->def->list_aux)
        return fail(MXP_EUNSUPPORTED, "fake host: aux states need fh_node");
    return 0;
}

static void fcall_done(fcall *f) {
    if (f->state && f->impl->destroy) {
        mxp_destroy_args d = {MXP_HEADER(mxp_destroy_args), f->state, f->impl->user_data};
        f->impl->destroy(&d);
    }
    if (f->def) fh_params_free(f->def->params, f->def->n_params, f->params);
    free(f->params);
}

static void to_shape(const fh_arr *a, mxp_shape *s) {
    memset(s, 0, sizeof *s);
    s->ndim = a->ndim;
    for (int i = 0; i < a->ndim; i++) s->dims[i] = a->shape[i];
}

/* Infer output shapes/dtypes; create state; return workspace bytes. */
static int fcall_prepare(fcall *f, int n_in, const fh_arr *in, mxp_shape *oshape, int32_t *odt,
                         uint64_t *ws) {
    mxp_shape ishape[FH_MAX_IO];
    int32_t idt[FH_MAX_IO];
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

/* One forward of a prepared call (state created, workspace given). */
static int fcall_forward(fcall *f, void *ws, uint64_t ws_bytes, int n_in, const mxp_tensor *in, int n_out,
                         const mxp_tensor *out, int req) {
    int32_t reqs[FH_MAX_IO];
    for (int i = 0; i < n_out; i++) reqs[i] = req;
    mxp_op_ctx ctx = fh__ctx(ws, ws_bytes, 1, (f->def->resources & MXP_RESOURCE_RANDOM) != 0);
    mxp_forward_args a;
    memset(&a, 0, sizeof a);
    a.hdr = (mxp_header)MXP_HEADER(mxp_forward_args);
    a.ctx = &ctx;
    a.params = f->params;
    a.state = f->state;
    a.user_data = f->impl->user_data;
    a.n_in = (uint32_t)n_in;
    a.n_out = (uint32_t)n_out;
    a.in = in;
    a.out = out;
    a.req = reqs;
    return f->impl->forward(&a);
}

static int full_forward(fh_pack *p, const char *op, const char *const *kw, int n_in,
                        const fh_arr *in, int *n_out, fh_arr *out, int req) {
    fcall f;
    mxp_shape oshape[FH_MAX_IO];
    int32_t odt[FH_MAX_IO];
    uint64_t ws = 0;
    void *wsp = NULL;
    int rc = fcall_init(p, op, kw, &f);
    if (!rc) rc = fcall_prepare(&f, n_in, in, oshape, odt, &ws);
    if (rc) { fcall_done(&f); return rc; }
    mxp_tensor tin[FH_MAX_IO], tout[FH_MAX_IO];
    for (int i = 0; i < n_in; i++) tin[i] = fh_view(&in[i]);
    for (int i = 0; i < f.n_out; i++) {
        if (!out[i].data) out[i] = fh_arr_new(odt[i], oshape[i].ndim, oshape[i].dims);
        tout[i] = fh_view(&out[i]);
    }
    *n_out = f.n_out;
    if (ws) wsp = fh__alloc(ws);
    rc = fcall_forward(&f, wsp, ws, n_in, tin, f.n_out, tout, req);
    free(wsp);
    fcall_done(&f);
    return rc;
}

static int full_backward(fh_pack *p, const char *op, const char *const *kw, int n_in,
                         const fh_arr *in, int n_out, const fh_arr *out, const fh_arr *og,
                         fh_arr *in_grad, const int32_t *req) {
    fcall f;
    mxp_shape oshape[FH_MAX_IO];
    int32_t odt[FH_MAX_IO];
    uint64_t ws = 0;
    void *wsp = NULL;
    int rc = fcall_init(p, op, kw, &f);
    if (!rc) rc = fcall_prepare(&f, n_in, in, oshape, odt, &ws);
    if (!rc && (f.def->flags & MXP_OP_NO_GRADIENT)) rc = fail(MXP_EINVAL, "%s: no gradient", op);
    if (!rc && !f.impl->backward) rc = fail(MXP_EINVAL, "%s: no backward", op);
    if (!rc && n_out != f.n_out) rc = fail(MXP_EINVAL, "%s: %d outputs, not %d", op, f.n_out, n_out);
    if (rc) { fcall_done(&f); return rc; }
    uint8_t need_og[FH_MAX_IO], need_in[FH_MAX_IO], need_out[FH_MAX_IO];
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
    mxp_tensor tin[FH_MAX_IO], tout[FH_MAX_IO], tog[FH_MAX_IO], tig[FH_MAX_IO];
    int32_t reqs[FH_MAX_IO];
    for (int i = 0; i < n_in; i++) {
        tin[i] = fh_view(&in[i]);
        if (!need_in[i]) tin[i].data = NULL;
        if (!in_grad[i].data) in_grad[i] = fh_arr_new(in[i].dtype, in[i].ndim, in[i].shape);
        tig[i] = fh_view(&in_grad[i]);
        reqs[i] = req ? req[i] : MXP_REQ_WRITE;
    }
    for (int i = 0; i < n_out; i++) {
        tout[i] = fh_view(&out[i]);
        if (!need_out[i]) tout[i].data = NULL;
        tog[i] = fh_view(&og[i]);
        if (!need_og[i]) tog[i].data = NULL;
    }
    if (ws) wsp = fh__alloc(ws);
    mxp_op_ctx ctx = fh__ctx(wsp, ws, 1, (f.def->resources & MXP_RESOURCE_RANDOM) != 0);
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
static const mxp_simple_op_def *find_simple(const fh_pack *p, const char *spec) {
    char buf[MXP_NAME_MAX];
    const char *impl, *name = split_spec(spec, buf, sizeof buf, &impl);
    return fh_simple(p, name);
}

int fh_forward(fh_pack *p, const char *op, const char *const *kw, int n_in, const fh_arr *in,
               int *n_out, fh_arr *out, int req) {
    fh_clear_error();
    const mxp_simple_op_def *s = find_simple(p, op);
    if (s) return simple_forward(s, kw, n_in, in, n_out, out, req);
    return full_forward(p, op, kw, n_in, in, n_out, out, req);
}

int fh_backward(fh_pack *p, const char *op, const char *const *kw, int n_in, const fh_arr *in,
                int n_out, const fh_arr *out, const fh_arr *og, fh_arr *in_grad,
                const int32_t *req) {
    fh_clear_error();
    const mxp_simple_op_def *s = find_simple(p, op);
    if (s) return simple_backward(s, kw, n_in, in, out, og, in_grad, req);
    return full_backward(p, op, kw, n_in, in, n_out, out, og, in_grad, req);
}

int fh_forward_views(fh_pack *p, const char *op, const char *const *kw, int n_in,
                     const mxp_tensor *in, int n_out, const mxp_tensor *out, int req) {
    fh_clear_error();
    const mxp_simple_op_def *s = find_simple(p, op);
    if (s) {
        sparams sp;
        int rc = simple_params(s, kw, &sp);
        if (!rc) rc = simple_call(s, &sp, n_in, in, out, req);
        sparams_free(s, &sp);
        return rc;
    }
    fcall f;
    int rc = fcall_init(p, op, kw, &f);
    if (!rc) rc = fcall_forward(&f, NULL, 0, n_in, in, n_out, out, req);
    fcall_done(&f);
    return rc;
}

/* ----------------------------------------------------------- grad check */
static double loss_of(fh_pack *p, const char *op, const char *const *kw, int n_in,
                      const fh_arr *in, const fh_arr *w, int *rc) {
    fh_arr out[FH_MAX_IO];
    memset(out, 0, sizeof out);
    int n_out = 0;
    *rc = fh_forward(p, op, kw, n_in, in, &n_out, out, MXP_REQ_WRITE);
    double L = 0;
    for (int k = 0; k < n_out; k++) {
        if (!*rc)
            for (int64_t i = 0; i < fh_numel(&out[k]); i++) L += fh_get(&out[k], i) * fh_get(&w[k], i);
        fh_arr_free(&out[k]);
    }
    return L;
}

int fh_grad_check(fh_pack *p, const char *op, const char *const *kw, int n_in, const fh_arr *in,
                  uint32_t mask, double eps, double atol, double rtol) {
    fh_arr out[FH_MAX_IO], w[FH_MAX_IO], g[FH_MAX_IO], g2[FH_MAX_IO], x[FH_MAX_IO];
    memset(out, 0, sizeof out);
    memset(w, 0, sizeof w);
    memset(g, 0, sizeof g);
    memset(g2, 0, sizeof g2);
    int n_out = 0, result = 0;
    int rc = fh_forward(p, op, kw, n_in, in, &n_out, out, MXP_REQ_WRITE);
    if (rc) return fail(rc, "%s forward: %s", op, fh_error()), -1;
    /* Hidden outputs (BatchNorm-style saved statistics) get no gradient:
     * weight them 0 so the loss is that of the visible outputs. */
    char buf[MXP_NAME_MAX];
    const char *impl;
    const mxp_op_def *def = fh_op_def(p, split_spec(op, buf, sizeof buf, &impl));
    int n_vis = def && def->n_visible_outputs ? (int)def->n_visible_outputs : n_out;
    for (int k = 0; k < n_out; k++) {
        w[k] = fh_arr_new(MXP_DTYPE_F64, out[k].ndim, out[k].shape);
        if (k < n_vis) fh_fill_uniform(&w[k], 99 + (uint64_t)k, -1.0, 1.0);
    }
    rc = fh_backward(p, op, kw, n_in, in, n_out, out, w, g, NULL);
    if (rc) { fail(rc, "%s backward: %s", op, fh_error()); result = -1; goto out; }
    /* req ADD: prefilled 0.5 must become 0.5 + grad. */
    int32_t reqs[FH_MAX_IO] = {0};
    for (int i = 0; i < n_in; i++) {
        g2[i] = fh_arr_new(in[i].dtype, in[i].ndim, in[i].shape);
        for (int64_t j = 0; j < fh_numel(&g2[i]); j++) fh_set(&g2[i], j, 0.5);
        reqs[i] = MXP_REQ_ADD;
    }
    rc = fh_backward(p, op, kw, n_in, in, n_out, out, w, g2, reqs);
    if (rc) { fail(rc, "%s backward(add): %s", op, fh_error()); result = -1; goto out; }
    for (int i = 0; i < n_in && !result; i++)
        for (int64_t j = 0; j < fh_numel(&g[i]); j++)
            if (fabs(fh_get(&g2[i], j) - 0.5 - fh_get(&g[i], j)) > 1e-9 * (1 + fabs(fh_get(&g[i], j)))) {
                fail(MXP_EINVAL, "%s: req add in_grad[%d][%lld] = %g, want 0.5 + %g", op, i,
                     (long long)j, fh_get(&g2[i], j), fh_get(&g[i], j));
                result = -1;
                break;
            }
    for (int i = 0; i < n_in; i++) x[i] = fh_arr_clone(&in[i]);
    for (int i = 0; i < n_in && !result; i++) {
        if (!(mask & (1u << i)) || in[i].dtype != MXP_DTYPE_F64) continue;
        for (int64_t j = 0; j < fh_numel(&x[i]) && !result; j++) {
            double v = fh_get(&x[i], j);
            fh_set(&x[i], j, v + eps);
            double lp = loss_of(p, op, kw, n_in, x, w, &rc);
            fh_set(&x[i], j, v - eps);
            double lm = loss_of(p, op, kw, n_in, x, w, &rc);
            fh_set(&x[i], j, v);
            double num = (lp - lm) / (2 * eps), ana = fh_get(&g[i], j);
            if (rc || fabs(num - ana) > atol + rtol * fabs(num)) {
                fail(MXP_EINVAL, "%s: d/d in[%d][%lld]: analytic %.9g, numeric %.9g", op, i,
                     (long long)j, ana, num);
                result = -1;
            }
        }
    }
    for (int i = 0; i < n_in; i++) fh_arr_free(&x[i]);
out:
    for (int k = 0; k < n_out; k++) { fh_arr_free(&out[k]); fh_arr_free(&w[k]); }
    for (int i = 0; i < n_in; i++) { fh_arr_free(&g[i]); fh_arr_free(&g2[i]); }
    return result;
}

/* ------------------------------------------------------------ nodes */
static uint32_t list_names(int (*fn)(mxp_list_names_args *), const char *const *stat, const void *params,
                           void *ud, char (*names)[MXP_NAME_MAX], int dflt_output) {
    if (fn) {
        mxp_list_names_args a = { MXP_HEADER(mxp_list_names_args), params, ud, names, FH_NODE_MAX, 0 };
        if (fn(&a) < 0) return 0;
        return a.count;
    }
    uint32_t n = 0;
    if (!stat) { if (dflt_output) { strcpy(names[0], "output"); return 1; } return 0; }
    for (; stat[n]; n++) snprintf(names[n], MXP_NAME_MAX, "%s", stat[n]);
    return n;
}

int fh_node_init(fh_node *n, fh_pack *p, const char *op, const char *impl, const char *kwargs, int32_t dtype) {
    memset(n, 0, sizeof *n);
    n->pack = p; n->dtype = dtype;
    n->def = fh_op_def(p, op);
    if (!n->def) return fail(MXP_ENOENT, "no op %s", op);
    n->impl = fh_impl(p, n->def->name, impl);
    if (!n->impl) return fail(MXP_ENOENT, "no impl %s/%s", op, impl);
    int st = fh_parse_text(n->def->params, n->def->n_params, n->def->params_size, kwargs, &n->params);
    if (st < 0) return st;
    if (n->def->check_params) {
        mxp_check_params_args ca = { MXP_HEADER(mxp_check_params_args), n->params, n->def->user_data };
        if ((st = n->def->check_params(&ca)) < 0) return st;
    }
    char names[FH_NODE_MAX][MXP_NAME_MAX];
    n->n_in = list_names(n->def->list_args, n->def->arg_names, n->params, n->def->user_data, n->in_names, 0);
    n->n_out = list_names(n->def->list_outputs, n->def->output_names, n->params, n->def->user_data, names, 1);
    n->n_aux = list_names(n->def->list_aux, n->def->aux_names, n->params, n->def->user_data, names, 0);
    for (int i = 0; i < FH_NODE_MAX; i++) {
        n->in_shape[i].ndim = -1; n->out_shape[i].ndim = -1; n->aux_shape[i].ndim = -1;
        n->in_dtype[i] = dtype; n->out_dtype[i] = dtype; n->aux_dtype[i] = dtype;
    }
    return MXP_OK;
}

int fh_node_infer(fh_node *n) {
    mxp_infer_shape_args a = { MXP_HEADER(mxp_infer_shape_args), n->params, n->def->user_data,
                               n->n_in, n->n_out, n->n_aux, 0, n->in_shape, n->out_shape, n->aux_shape };
    return n->def->infer_shape(&a);
}

static void fill_query(fh_node *n, mxp_impl_query_args *q, int is_train, int32_t *odt, int32_t *adt) {
    memset(q, 0, sizeof *q);
    q->hdr = (mxp_header)MXP_HEADER(mxp_impl_query_args);
    q->params = n->params; q->user_data = n->impl->user_data;
    q->device.type = MXP_DEV_CPU;
    q->n_in = n->n_in; q->n_out = n->n_out; q->n_aux = n->n_aux; q->is_train = is_train;
    q->in_shapes = n->in_shape; q->out_shapes = n->out_shape; q->aux_shapes = n->aux_shape;
    for (int i = 0; i < FH_NODE_MAX; i++) { odt[i] = n->out_dtype[i]; adt[i] = n->aux_dtype[i]; }
    q->in_dtypes = n->in_dtype; q->out_dtypes = odt; q->aux_dtypes = adt;
    q->reason = n->reason; q->reason_size = sizeof n->reason;
}


int fh_node_alloc(fh_node *n, int is_train) {
    mxp_impl_query_args q; int32_t odt[FH_NODE_MAX], adt[FH_NODE_MAX];
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
    n->ws = n->ws_bytes ? fh__alloc(n->ws_bytes) : NULL;
    if (n->impl->create) {
        if (n->impl->create(&q) < 0) return -1;
        n->state = q.state;
    }
    for (uint32_t i = 0; i < n->n_in; i++) {
        uint64_t b = (uint64_t)fh_shape_numel(&n->in_shape[i]) * mxp_dtype_size(n->in_dtype[i]);
        n->in[i] = calloc(1, b + 8); n->in_grad[i] = calloc(1, b + 8);
    }
    for (uint32_t i = 0; i < n->n_out; i++) {
        uint64_t b = (uint64_t)fh_shape_numel(&n->out_shape[i]) * mxp_dtype_size(n->out_dtype[i]);
        n->out[i] = calloc(1, b + 8); n->out_grad[i] = calloc(1, b + 8);
    }
    for (uint32_t i = 0; i < n->n_aux; i++)
        n->aux[i] = calloc(1, (uint64_t)fh_shape_numel(&n->aux_shape[i]) * mxp_dtype_size(n->aux_dtype[i]) + 8);
    return 1;
}

static void mk_tensor(mxp_tensor *t, void *data, const mxp_shape *s, int32_t dt) {
    memset(t, 0, sizeof *t);
    t->hdr = (mxp_header)MXP_HEADER(mxp_tensor);
    t->data = data; t->dtype = dt; t->ndim = s->ndim; t->shape = s->dims;
    t->device.type = MXP_DEV_CPU;
}

static mxp_op_ctx node_ctx(const fh_node *n, int is_train) {
    return fh__ctx(n->ws, n->ws_bytes, is_train, (n->def->resources & MXP_RESOURCE_RANDOM) != 0);
}

int fh_node_forward(fh_node *n, int is_train, const int32_t *req) {
    mxp_tensor in[FH_NODE_MAX], out[FH_NODE_MAX], aux[FH_NODE_MAX];
    int32_t wr[FH_NODE_MAX];
    for (int i = 0; i < FH_NODE_MAX; i++) wr[i] = MXP_REQ_WRITE;
    for (uint32_t i = 0; i < n->n_in; i++) mk_tensor(&in[i], n->in[i], &n->in_shape[i], n->in_dtype[i]);
    for (uint32_t i = 0; i < n->n_out; i++) mk_tensor(&out[i], n->out[i], &n->out_shape[i], n->out_dtype[i]);
    for (uint32_t i = 0; i < n->n_aux; i++) mk_tensor(&aux[i], n->aux[i], &n->aux_shape[i], n->aux_dtype[i]);
    mxp_op_ctx c = node_ctx(n, is_train);
    mxp_forward_args a = { MXP_HEADER(mxp_forward_args), &c, n->params, n->state, n->impl->user_data,
                           n->n_in, n->n_out, n->n_aux, 0, in, out, aux, req ? req : wr, NULL };
    return n->impl->forward(&a);
}

int fh_node_backward(fh_node *n, const int32_t *req) {
    mxp_tensor in[FH_NODE_MAX], out[FH_NODE_MAX], aux[FH_NODE_MAX], ig[FH_NODE_MAX], og[FH_NODE_MAX];
    int32_t wr[FH_NODE_MAX];
    for (int i = 0; i < FH_NODE_MAX; i++) wr[i] = MXP_REQ_WRITE;
    uint8_t need_in[FH_NODE_MAX], need_out[FH_NODE_MAX], need_og[FH_NODE_MAX];
    uint32_t deps = n->def->backward_deps;
    for (int i = 0; i < FH_NODE_MAX; i++) {
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
        mk_tensor(&out[i], need_out[i] ? n->out[i] : NULL, &n->out_shape[i], n->out_dtype[i]);
        mk_tensor(&og[i], need_og[i] ? n->out_grad[i] : NULL, &n->out_shape[i], n->out_dtype[i]);
    }
    for (uint32_t i = 0; i < n->n_aux; i++) mk_tensor(&aux[i], n->aux[i], &n->aux_shape[i], n->aux_dtype[i]);
    mxp_op_ctx c = node_ctx(n, 1);
    mxp_backward_args a = { MXP_HEADER(mxp_backward_args), &c, n->params, n->state, n->impl->user_data,
                            n->n_in, n->n_out, n->n_aux, 0, og, in, out, ig, aux, req ? req : wr, NULL };
    return n->impl->backward(&a);
}

void fh_node_free(fh_node *n) {
    if (n->state && n->impl->destroy) {
        mxp_destroy_args d = { MXP_HEADER(mxp_destroy_args), n->state, n->impl->user_data };
        n->impl->destroy(&d);
    }
    for (int i = 0; i < FH_NODE_MAX; i++) {
        free(n->in[i]); free(n->out[i]); free(n->aux[i]); free(n->in_grad[i]); free(n->out_grad[i]);
    }
    free(n->ws);
    if (n->def) fh_params_free(n->def->params, n->def->n_params, n->params);
    free(n->params);
    memset(n, 0, sizeof *n);
}
