/* sum_n.c — ElementWiseSum / add_n on the gpu ("cuda"): out = arg0 + ... +
 * argN-1, all of one shape, float32 contiguous.  The executor inserts this
 * op for every value used more than once (a ResNet's residual input), so a
 * net with skip connections trains on the gpu only with it.  Forward adds
 * in argument order with the binary add kernel (((a0 + a1) + a2) ...), as
 * ops-basic's CPU impl; out may be arg0's memory (inplace: each element is
 * read before it is written).  Backward copies out_grad into every input's
 * gradient, in_grad[0] last since it may share out_grad's memory.  Reads no
 * parameter: num_args is the number of inputs. */
#include "cu_common.h"
#include "ew_kernels.h"

#include "functors/ew_binary.h"

static const char *const k_op = "ElementWiseSum";

static int sum_supports(mxp_impl_query_args *a) {
    for (uint32_t i = 0; i < a->n_in; i++)
        if (a->in_dtypes && a->in_dtypes[i] != MXP_DTYPE_F32)
            return cu_refuse(a, "ElementWiseSum on gpu: only float32 (input %u)", i);
    return 1;
}

static int check(const mxp_tensor *t, int64_t n, const char *what) {
    if (!cu_all_f32_contig(t, 1))
        return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op 'ElementWiseSum': %s is not a contiguous float32 array",
                                    what);
    if (mxp_tensor_numel(t) != n)
        return g_cu_host->set_error(MXP_ESHAPE, "gpu op 'ElementWiseSum': %s has %lld elements, the output %lld", what,
                                    (long long)mxp_tensor_numel(t), (long long)n);
    return MXP_OK;
}

#define LAUNCH(call) cu_check_launch((call), "add", k_op)

static int sum_forward(const mxp_forward_args *a) {
    int32_t req = a->req ? a->req[0] : MXP_REQ_WRITE;
    if (req == MXP_REQ_NULL || a->n_in == 0) return MXP_OK;
    void *s = a->ctx->stream;
    int64_t n = mxp_tensor_numel(&a->out[0]);
    int rc = check(&a->out[0], n, "the output");
    for (uint32_t i = 0; !rc && i < a->n_in; i++) rc = check(&a->in[i], n, "an input");
    if (rc) return rc;
    float *y = mxp_tensor_ptr(&a->out[0]);
    const float *x0 = mxp_tensor_ptr(&a->in[0]);
    uint32_t next;
    if (req == MXP_REQ_ADD) { /* y += x0, then the rest */
        rc = LAUNCH(cuk_binary_fwd(s, CU_B_ADD, y, x0, y, n, 0));
        next = 1;
    } else if (a->n_in == 1) {
        if (y != x0 && n) CU_TRY(cudaMemcpyAsync(y, x0, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice,
                                                 (cudaStream_t)s), "gpu op 'ElementWiseSum'");
        next = 1;
    } else {
        rc = LAUNCH(cuk_binary_fwd(s, CU_B_ADD, x0, mxp_tensor_ptr(&a->in[1]), y, n, 0));
        next = 2;
    }
    for (uint32_t i = next; !rc && i < a->n_in; i++)
        rc = LAUNCH(cuk_binary_fwd(s, CU_B_ADD, y, mxp_tensor_ptr(&a->in[i]), y, n, 0));
    return rc ? rc : cu_finish(s, "gpu op 'ElementWiseSum' forward");
}

static int sum_backward(const mxp_backward_args *a) {
    void *s = a->ctx->stream;
    int64_t n = mxp_tensor_numel(&a->out_grad[0]);
    int rc = check(&a->out_grad[0], n, "the output gradient");
    if (rc) return rc;
    const float *dy = mxp_tensor_ptr(&a->out_grad[0]);
    for (uint32_t i = a->n_in; !rc && i-- > 0;) {
        int32_t req = a->req ? a->req[i] : MXP_REQ_WRITE;
        if (req == MXP_REQ_NULL) continue;
        if ((rc = check(&a->in_grad[i], n, "an input gradient"))) break;
        float *dx = mxp_tensor_ptr(&a->in_grad[i]);
        if (req == MXP_REQ_ADD) rc = LAUNCH(cuk_binary_fwd(s, CU_B_ADD, dx, dy, dx, n, 0));
        else if (dx != dy && n)
            CU_TRY(cudaMemcpyAsync(dx, dy, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, (cudaStream_t)s),
                   "gpu op 'ElementWiseSum' backward");
    }
    return rc ? rc : cu_finish(s, "gpu op 'ElementWiseSum' backward");
}

static const mxp_op_impl g_sum_impl = {
    MXP_HEADER(mxp_op_impl), "ElementWiseSum", "cuda", "gpu", MXP_RANK_PRIMARY, 0,
    "CUDA add kernels in argument order (float32, contiguous)",
    sum_supports, NULL, NULL, sum_forward, sum_backward, NULL, NULL,
};

int cu_reg_sum_n(mxp_registrar *r) { return r->add_impl(r, &g_sum_impl); }
