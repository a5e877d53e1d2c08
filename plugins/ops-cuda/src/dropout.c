/* dropout.c — the GPU implementation ("cuda", device gpu) of ops-nn's
 * Dropout: the same mask as the CPU for the same random stream.  The op's
 * reserved range of the device's Philox4x32-10 stream (host->rng_philox:
 * key and first block counter) is expanded on the device by the kernel with
 * the CPU's mapping (functors/philox.h): keep element i when value i <
 * (1 - p) * 2^32, mask = keep / (1 - p), y = x * mask.  Seeding cpu(0) and
 * gpu(0) alike (mxp_random_seed_device) gives equal masks.  Inactive
 * (inference with mode 'training', or p = 0): y = x, mask = 1.  Backward:
 * dx = dy * mask.  Variational dropout (axes) is refused.  p, mode and axes
 * are read by name (typed parameter access).  Contiguous float32 only. */
#include "cu_common.h"
#include "ew_kernels.h"
#include "nn_kernels.h"

#include "functors/ew_binary.h"

#include <string.h>

typedef struct do_cfg {
    double p;
    const char *mode;
    int variational;
} do_cfg;

static int do_read(const mxp_op_params *p, do_cfg *c) {
    mxp_param_shape axes;
    int rc;
    if ((rc = mxp_param_get_float(g_cu_host, p, "p", &c->p)) || (rc = mxp_param_get_enum(g_cu_host, p, "mode", &c->mode)) ||
        (rc = mxp_param_get_shape(g_cu_host, p, "axes", &axes)))
        return rc;
    c->variational = axes.has_value && axes.ndim > 0;
    return MXP_OK;
}

static int do_supports(mxp_impl_query_args *a) {
    const mxp_op_params *p = mxp_impl_query_op_params(a);
    if (!p) return cu_refuse(a, "Dropout on gpu: the host gives no parameter record (ABI 1.1 needed)");
    do_cfg c;
    int rc = do_read(p, &c);
    if (rc) return rc;
    if (c.variational) return cu_refuse(a, "Dropout on gpu: axes (variational dropout) is not supported");
    if (a->in_dtypes && a->in_dtypes[0] != MXP_DTYPE_F32) return cu_refuse(a, "Dropout on gpu: only float32");
    return 1;
}

static int check(const mxp_tensor *t, const char *what) {
    if (!t->data || !cu_all_f32_contig(t, 1))
        return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op 'Dropout': %s must be a contiguous float32 array", what);
    return MXP_OK;
}

static int do_forward(const mxp_forward_args *a) {
    const char *where = "gpu op 'Dropout' forward";
    do_cfg c;
    int rc = do_read(mxp_forward_op_params(a), &c);
    if (rc) return rc;
    if (c.variational) return g_cu_host->set_error(MXP_EUNSUPPORTED, "%s: axes is not supported", where);
    if ((rc = check(&a->in[0], "data")) || (a->n_out > 1 && (rc = check(&a->out[1], "mask")))) return rc;
    int32_t req = a->req ? a->req[0] : MXP_REQ_WRITE;
    if (req != MXP_REQ_NULL && (rc = check(&a->out[0], "output"))) return rc;
    void *s = a->ctx->stream;
    int64_t n = mxp_tensor_numel(&a->in[0]);
    float *y = req == MXP_REQ_NULL ? NULL : mxp_tensor_ptr(&a->out[0]);
    float *mask = a->n_out > 1 ? mxp_tensor_ptr(&a->out[1]) : NULL;
    int active = (a->ctx->is_train || !strcmp(c.mode, "always")) && c.p > 0;
    if (!active) {
        if (mask) rc = cu_check_launch(cuk_fill(s, mask, 1.0f, n, 0), "fill", "Dropout");
        if (!rc && y) {
            if (req == MXP_REQ_ADD)
                rc = cu_check_launch(cuk_binary_fwd(s, CU_B_ADD, y, mxp_tensor_ptr(&a->in[0]), y, n, 0), "add", "Dropout");
            else if (y != (float *)mxp_tensor_ptr(&a->in[0]) && n > 0)
                CU_TRY(cudaMemcpyAsync(y, mxp_tensor_ptr(&a->in[0]), (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice,
                                       (cudaStream_t)s),
                       where);
        }
        return rc ? rc : cu_finish(s, where);
    }
    if (!mask) return g_cu_host->set_error(MXP_EINVAL, "%s: the mask output is required when dropout is active", where);
    if (!a->ctx->rng || !MXP_HAS_FIELD(g_cu_host, mxp_host, rng_philox) || !g_cu_host->rng_philox)
        return g_cu_host->set_error(MXP_EINVAL, "%s: no random resource (MXP_RESOURCE_RANDOM) in the op context", where);
    uint64_t key = 0, counter = 0;
    if ((rc = g_cu_host->rng_philox(a->ctx->rng, &key, &counter))) return rc;
    /* The CPU passes (float)(1 - p) and compares in double; so do we. */
    double keep = (double)(float)(1.0 - c.p);
    cuk_dropout d = {key, counter, keep * 4294967296.0, (float)(1.0 / (1.0 - c.p))};
    rc = cu_check_launch(cuk_dropout_fwd(s, &d, mxp_tensor_ptr(&a->in[0]), mask, y, n, req == MXP_REQ_ADD), "dropout",
                         "Dropout");
    return rc ? rc : cu_finish(s, where);
}

static int do_backward(const mxp_backward_args *a) {
    const char *where = "gpu op 'Dropout' backward";
    int32_t req = a->req ? a->req[0] : MXP_REQ_WRITE;
    if (req == MXP_REQ_NULL) return MXP_OK;
    int rc;
    if ((rc = check(&a->out_grad[0], "out_grad")) || (rc = check(&a->in_grad[0], "data gradient"))) return rc;
    if (a->n_out < 2 || !a->out[1].data) return g_cu_host->set_error(MXP_EINVAL, "%s: backward needs the mask", where);
    if ((rc = check(&a->out[1], "mask"))) return rc;
    rc = cu_check_launch(cuk_binary_fwd(a->ctx->stream, CU_B_MUL, mxp_tensor_ptr(&a->out_grad[0]),
                                        mxp_tensor_ptr(&a->out[1]), mxp_tensor_ptr(&a->in_grad[0]),
                                        mxp_tensor_numel(&a->in_grad[0]), req == MXP_REQ_ADD),
                         "binary forward", "Dropout");
    return rc ? rc : cu_finish(a->ctx->stream, where);
}

static const mxp_op_impl g_dropout_impl = {
    MXP_HEADER(mxp_op_impl), "Dropout", "cuda", "gpu", MXP_RANK_PRIMARY, 0,
    "Philox4x32-10 on the device, the CPU's stream and mapping (float32)", do_supports, NULL, NULL, do_forward,
    do_backward, NULL, NULL,
};

int cu_reg_dropout(mxp_registrar *r) { return r->add_impl(r, &g_dropout_impl); }
