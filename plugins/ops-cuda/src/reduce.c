/* reduce.c — GPU implementations ("cuda") of ops-basic's reductions sum,
 * mean, max, min, prod and norm (ord 1 or 2) over `axis` (None: all) with
 * keepdims and exclude, and of clip (a_min, a_max).  Parameters are read by
 * name through the host's typed access (ABI 1.1), never from ops-basic's
 * struct.  The math is functors/reduce.h (accumulation in double, MXNet's
 * gradients: max/min to every element equal to the result), the order of
 * accumulation the CPU's (row-major within each output element), so the
 * GPU and CPU results agree to float rounding of the final value.
 * Only contiguous float32 arrays; argmax/argmin are not here (CPU only). */
#include "cu_common.h"
#include "reduce_kernels.h"

#include "functors/reduce.h"

#include <string.h>

enum { K_SUM, K_MEAN, K_MAX, K_MIN, K_PROD, K_NORM, K_CLIP };

typedef struct red_info {
    const char *op;
    int kind;
} red_info;

static const red_info k_ops[] = {
    {"sum", K_SUM}, {"mean", K_MEAN}, {"max", K_MAX}, {"min", K_MIN}, {"prod", K_PROD}, {"norm", K_NORM},
    {"clip", K_CLIP},
};
#define N_OPS (sizeof k_ops / sizeof k_ops[0])

static int red_supports(mxp_impl_query_args *a) {
    const red_info *ri = a->user_data;
    if ((a->in_dtypes && a->in_dtypes[0] != MXP_DTYPE_F32) || (a->out_dtypes && a->out_dtypes[0] != MXP_DTYPE_F32))
        return cu_refuse(a, "%s on gpu: only float32 (in and out)", ri->op);
    if (a->n_in >= 1 && a->in_shapes[0].ndim > CUK_RED_MAX_NDIM)
        return cu_refuse(a, "%s on gpu: at most %d dimensions", ri->op, CUK_RED_MAX_NDIM);
    return 1;
}

/* The kernel description of a reduction of x by the op's parameters;
 * reduced[d] = 1 for the reduced dimensions. */
static int plan(const red_info *ri, const mxp_op_params *p, const mxp_tensor *x, cuk_reduce *r, uint8_t *reduced) {
    memset(r, 0, sizeof *r);
    memset(reduced, 0, CUK_RED_MAX_NDIM);
    int nd = x->ndim;
    if (nd > CUK_RED_MAX_NDIM)
        return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op '%s': %d dimensions (at most %d)", ri->op, nd,
                                    CUK_RED_MAX_NDIM);
    mxp_param_shape axis;
    int32_t exclude = 0;
    int rc = mxp_param_get_shape(g_cu_host, p, "axis", &axis);
    if (!rc && ri->kind != K_NORM) rc = mxp_param_get_bool(g_cu_host, p, "exclude", &exclude);
    if (rc) return rc;
    int op = ri->kind == K_SUM ? CU_R_SUM : ri->kind == K_MEAN ? CU_R_MEAN : ri->kind == K_MAX ? CU_R_MAX
           : ri->kind == K_MIN ? CU_R_MIN : ri->kind == K_PROD ? CU_R_PROD : CU_R_NORM2;
    if (ri->kind == K_NORM) {
        int64_t ord = 2;
        if ((rc = mxp_param_get_int(g_cu_host, p, "ord", &ord))) return rc;
        if (ord != 1 && ord != 2)
            return g_cu_host->set_error(MXP_EINVAL, "gpu op 'norm': ord must be 1 or 2, got %lld", (long long)ord);
        op = ord == 1 ? CU_R_NORM1 : CU_R_NORM2;
    }
    if (!axis.has_value || axis.ndim == 0) {
        for (int d = 0; d < nd; d++) reduced[d] = 1;
    } else {
        for (int i = 0; i < axis.ndim; i++) {
            int64_t ax = axis.dims[i] < 0 ? axis.dims[i] + nd : axis.dims[i];
            if (ax < 0 || ax >= nd)
                return g_cu_host->set_error(MXP_EINVAL, "gpu op '%s': axis %lld out of range for rank %d", ri->op,
                                            (long long)axis.dims[i], nd);
            reduced[ax] = 1;
        }
        if (exclude)
            for (int d = 0; d < nd; d++) reduced[d] = !reduced[d];
    }
    int64_t stride[CUK_RED_MAX_NDIM], s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        stride[d] = s;
        s *= x->shape[d];
    }
    r->op = op;
    r->n_out = 1;
    r->count = 1;
    for (int d = 0; d < nd; d++) {
        if (reduced[d]) {
            r->red_size[r->n_red] = x->shape[d];
            r->red_stride[r->n_red++] = stride[d];
            r->count *= x->shape[d];
        } else {
            r->keep_size[r->n_keep] = x->shape[d];
            r->keep_stride[r->n_keep++] = stride[d];
            r->n_out *= x->shape[d];
        }
    }
    return MXP_OK;
}

static int check(const red_info *ri, const mxp_tensor *t, const char *what) {
    if (!cu_all_f32_contig(t, 1))
        return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op '%s': %s is not a contiguous float32 array", ri->op, what);
    return MXP_OK;
}

static int clip_bounds(const mxp_op_params *p, float *lo, float *hi) {
    double a = 0, b = 0;
    int rc = mxp_param_get_float(g_cu_host, p, "a_min", &a);
    if (!rc) rc = mxp_param_get_float(g_cu_host, p, "a_max", &b);
    *lo = (float)a;
    *hi = (float)b;
    return rc;
}

static int red_forward(const mxp_forward_args *a) {
    const red_info *ri = a->user_data;
    int32_t req = a->req ? a->req[0] : MXP_REQ_WRITE;
    if (req == MXP_REQ_NULL) return MXP_OK;
    int rc = check(ri, &a->in[0], "the input");
    if (!rc) rc = check(ri, &a->out[0], "the output");
    if (rc) return rc;
    void *s = a->ctx->stream;
    const mxp_op_params *p = mxp_forward_op_params(a);
    if (ri->kind == K_CLIP) {
        float lo, hi;
        if ((rc = clip_bounds(p, &lo, &hi))) return rc;
        rc = cu_check_launch(cuk_clip_fwd(s, mxp_tensor_ptr(&a->in[0]), mxp_tensor_ptr(&a->out[0]), lo, hi,
                                          mxp_tensor_numel(&a->in[0]), req == MXP_REQ_ADD),
                             "clip", ri->op);
        return rc ? rc : cu_finish(s, "gpu op 'clip' forward");
    }
    cuk_reduce r;
    uint8_t reduced[CUK_RED_MAX_NDIM];
    if ((rc = plan(ri, p, &a->in[0], &r, reduced))) return rc;
    if (r.n_out != mxp_tensor_numel(&a->out[0]))
        return g_cu_host->set_error(MXP_ESHAPE, "gpu op '%s': %lld output elements, the reduction makes %lld", ri->op,
                                    (long long)mxp_tensor_numel(&a->out[0]), (long long)r.n_out);
    rc = cu_check_launch(cuk_reduce_fwd(s, &r, mxp_tensor_ptr(&a->in[0]), mxp_tensor_ptr(&a->out[0]),
                                        req == MXP_REQ_ADD),
                         "reduce", ri->op);
    return rc ? rc : cu_finish(s, ri->op);
}

static int red_backward(const mxp_backward_args *a) {
    const red_info *ri = a->user_data;
    int32_t req = a->req ? a->req[0] : MXP_REQ_WRITE;
    if (req == MXP_REQ_NULL) return MXP_OK;
    int rc = check(ri, &a->out_grad[0], "the output gradient");
    if (!rc) rc = check(ri, &a->in_grad[0], "the input gradient");
    if (rc) return rc;
    void *s = a->ctx->stream;
    const mxp_op_params *p = mxp_backward_op_params(a);
    int add = req == MXP_REQ_ADD;
    int64_t n_in = mxp_tensor_numel(&a->in_grad[0]);
    if (ri->kind == K_CLIP) {
        float lo, hi;
        if ((rc = clip_bounds(p, &lo, &hi)) || (rc = check(ri, &a->in[0], "the input"))) return rc;
        rc = cu_check_launch(cuk_clip_bwd(s, mxp_tensor_ptr(&a->out_grad[0]), mxp_tensor_ptr(&a->in[0]),
                                          mxp_tensor_ptr(&a->in_grad[0]), lo, hi, n_in, add),
                             "clip gradient", ri->op);
        return rc ? rc : cu_finish(s, "gpu op 'clip' backward");
    }
    /* sum and mean need neither the input nor the output (backward_deps). */
    int needs_values = ri->kind != K_SUM && ri->kind != K_MEAN;
    if (needs_values && ((rc = check(ri, &a->in[0], "the input")) || (rc = check(ri, &a->out[0], "the output"))))
        return rc;
    cuk_reduce r;
    uint8_t reduced[CUK_RED_MAX_NDIM];
    if ((rc = plan(ri, p, &a->in_grad[0], &r, reduced))) return rc;
    rc = cu_check_launch(cuk_reduce_bwd(s, &r, a->in_grad[0].ndim, a->in_grad[0].shape, reduced,
                                        mxp_tensor_ptr(&a->out_grad[0]),
                                        needs_values ? mxp_tensor_ptr(&a->in[0]) : NULL,
                                        needs_values ? mxp_tensor_ptr(&a->out[0]) : NULL,
                                        mxp_tensor_ptr(&a->in_grad[0]), n_in, add),
                         "reduce gradient", ri->op);
    return rc ? rc : cu_finish(s, ri->op);
}

static mxp_op_impl g_red_impls[N_OPS];

int cu_reg_reduce(mxp_registrar *r) {
    for (size_t i = 0; i < N_OPS; i++) {
        mxp_op_impl *im = &g_red_impls[i];
        memset(im, 0, sizeof *im);
        im->hdr = (mxp_header)MXP_HEADER(mxp_op_impl);
        im->op_name = k_ops[i].op;
        im->impl_name = "cuda";
        im->device = "gpu";
        im->rank = MXP_RANK_PRIMARY;
        im->doc = k_ops[i].kind == K_CLIP ? "CUDA kernel (float32, contiguous)"
                                          : "one thread per output element, double accumulation (float32, contiguous)";
        im->supports = red_supports;
        im->forward = red_forward;
        im->backward = red_backward;
        im->user_data = (void *)&k_ops[i];
        int rc = r->add_impl(r, im);
        if (rc) return rc;
    }
    return MXP_OK;
}
