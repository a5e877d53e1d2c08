/* copy.c — GPU implementations ("cuda", device gpu) of ops-basic's ops
 * that keep row-major order and only change the shape: Reshape, Flatten,
 * expand_dims.  Forward copies data to out (nothing when the host ran it in
 * place), backward copies out_grad to the input's gradient; req add adds.
 * They read no parameters: the host already inferred the output shape.
 * Only contiguous float32 arrays (see cu_common.h for the sync model). */
#include "cu_common.h"
#include "ew_kernels.h"

#include "functors/ew_binary.h"

#include <string.h>

static const char *const k_copy_ops[] = {"Reshape", "Flatten", "expand_dims"};
#define N_COPY (sizeof k_copy_ops / sizeof k_copy_ops[0])

static int copy_supports(mxp_impl_query_args *a) {
    const char *op = a->user_data;
    if ((a->in_dtypes && a->in_dtypes[0] != MXP_DTYPE_F32) || (a->out_dtypes && a->out_dtypes[0] != MXP_DTYPE_F32))
        return cu_refuse(a, "%s on gpu: only float32", op);
    return 1;
}

/* dst (=|+=) src, n floats, on stream s. */
static int move(const char *op, void *s, const mxp_tensor *src, const mxp_tensor *dst, int32_t req) {
    if (req == MXP_REQ_NULL) return MXP_OK;
    if (!cu_all_f32_contig(src, 1) || !cu_all_f32_contig(dst, 1))
        return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op '%s': only contiguous float32 arrays run on the gpu", op);
    int64_t n = mxp_tensor_numel(src);
    if (n != mxp_tensor_numel(dst))
        return g_cu_host->set_error(MXP_ESHAPE, "gpu op '%s': %lld elements in, %lld out", op, (long long)n,
                                    (long long)mxp_tensor_numel(dst));
    float *d = mxp_tensor_ptr(dst);
    const float *x = mxp_tensor_ptr(src);
    if (req == MXP_REQ_ADD) {
        int rc = cu_check_launch(cuk_binary_fwd(s, CU_B_ADD, d, x, d, n, 0), "add", op);
        return rc ? rc : cu_finish(s, op);
    }
    if (d == x || n == 0) return MXP_OK;
    CU_TRY(cudaMemcpyAsync(d, x, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, (cudaStream_t)s), op);
    return cu_finish(s, op);
}

static int copy_forward(const mxp_forward_args *a) {
    return move(a->user_data, a->ctx->stream, &a->in[0], &a->out[0], a->req ? a->req[0] : MXP_REQ_WRITE);
}

static int copy_backward(const mxp_backward_args *a) {
    return move(a->user_data, a->ctx->stream, &a->out_grad[0], &a->in_grad[0], a->req ? a->req[0] : MXP_REQ_WRITE);
}

static mxp_op_impl g_copy_impls[N_COPY];

int cu_reg_copy(mxp_registrar *r) {
    for (size_t i = 0; i < N_COPY; i++) {
        mxp_op_impl *im = &g_copy_impls[i];
        memset(im, 0, sizeof *im);
        im->hdr = (mxp_header)MXP_HEADER(mxp_op_impl);
        im->op_name = k_copy_ops[i];
        im->impl_name = "cuda";
        im->device = "gpu";
        im->rank = MXP_RANK_PRIMARY;
        im->doc = "device-to-device copy (float32, contiguous)";
        im->supports = copy_supports;
        im->forward = copy_forward;
        im->backward = copy_backward;
        im->user_data = (void *)k_copy_ops[i];
        int rc = r->add_impl(r, im);
        if (rc) return rc;
    }
    return MXP_OK;
}
