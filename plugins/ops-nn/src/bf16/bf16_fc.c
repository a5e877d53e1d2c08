/* bf16/bf16_fc.c — FullyConnected on bfloat16 data, weight and bias (impl
 * "bf16", rank 512, refuses every other dtype so float32/64 keep the
 * default impl).  Each product is one bf16 GEMM with fp32 accumulation
 * (bf16_gemm.c); the bias is added and the gradients of bias are summed in
 * fp32; each result is rounded to bf16 once when stored (req WRITE/ADD).
 * Parameters: the op's parsed record is fc.c's struct, whose leading fields
 * (num_hidden, no_bias, flatten) are mirrored by fc_head below; fields fc.c
 * appends later do not matter here. */
#include "bf16/bf16.h"

#include <stdlib.h>

typedef struct fc_head {
    int64_t hidden;
    int32_t no_bias, flatten;
} fc_cfg;

static int read_cfg(const void *params, fc_cfg *c) {
    memcpy(c, params, sizeof *c);
    return MXP_OK;
}

static void dims(const fc_cfg *c, const mxp_tensor *x, int64_t *rows, int64_t *k) {
    int64_t n = mxp_tensor_numel(x);
    *k = c->flatten ? (x->ndim > 1 ? n / x->shape[0] : 1) : x->shape[x->ndim - 1];
    *rows = *k ? n / *k : 0;
}

static int all_bf16(const char *what, const int32_t *dt, uint32_t n, char *reason, uint32_t cap) {
    for (uint32_t i = 0; i < n; i++)
        if (dt[i] != MXP_DTYPE_BF16) {
            snprintf(reason, cap, "bf16: %s %u has dtype %d (bfloat16 only)", what, i, dt[i]);
            return 0;
        }
    return 1;
}

static int fc_supports(mxp_impl_query_args *a) {
    return all_bf16("input", a->in_dtypes, a->n_in, a->reason, a->reason_size) &&
           all_bf16("output", a->out_dtypes, a->n_out, a->reason, a->reason_size);
}

static int check(const mxp_tensor *t, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (t[i].data && t[i].dtype != MXP_DTYPE_BF16)
            return NN_ERR(MXP_ETYPE, "FullyConnected (bf16): tensor %u has dtype %d, expected bfloat16", i, t[i].dtype);
    return nn_check_contig("FullyConnected", t, n);
}

static int fc_forward(const mxp_forward_args *a) {
    fc_cfg c;
    int path, rc = read_cfg(a->params, &c);
    if (!rc) rc = check(a->in, a->n_in);
    if (!rc) rc = check(a->out, 1);
    if (!rc) rc = nn_bf16_path_select(&path);
    if (rc || a->req[0] == MXP_REQ_NULL) return rc;
    int64_t rows, k, h = c.hidden;
    dims(&c, &a->in[0], &rows, &k);
    float *y = nn_alloc((uint64_t)(rows * h + h) * sizeof(float) + 64);
    if (!y) return NN_ERR(MXP_ENOMEM, "FullyConnected (bf16): out of memory");
    rc = nn_bf16_gemm(a->ctx, path, 0, 1, rows, h, k, nn_ptr(&a->in[0]), k, nn_ptr(&a->in[1]), k, 0, y, h);
    if (!rc && !c.no_bias) {
        float *bias = y + rows * h;
        nn_bf16_widen(nn_ptr(&a->in[2]), bias, h);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < h; j++) y[r * h + j] += bias[j];
    }
    if (!rc) nn_bf16_store(a->req[0], y, nn_ptr(&a->out[0]), rows * h);
    nn_free(y);
    return rc;
}

static int fc_backward(const mxp_backward_args *a) {
    fc_cfg c;
    int path, rc = read_cfg(a->params, &c);
    if (!rc) rc = check(a->in, a->n_in);
    if (!rc) rc = check(a->in_grad, a->n_in);
    if (!rc) rc = check(a->out_grad, 1);
    if (!rc) rc = nn_bf16_path_select(&path);
    if (rc) return rc;
    int64_t rows, k, h = c.hidden;
    dims(&c, &a->in[0], &rows, &k);
    const uint16_t *dy = nn_ptr(&a->out_grad[0]);
    int64_t big = rows * k > h * k ? rows * k : h * k;
    float *t = nn_alloc((uint64_t)big * sizeof(float) + 64);
    if (!t) return NN_ERR(MXP_ENOMEM, "FullyConnected (bf16): out of memory");
    if (!rc && a->req[0] != MXP_REQ_NULL) { /* dx = dy · W */
        rc = nn_bf16_gemm(a->ctx, path, 0, 0, rows, k, h, dy, h, nn_ptr(&a->in[1]), k, 0, t, k);
        if (!rc) nn_bf16_store(a->req[0], t, nn_ptr(&a->in_grad[0]), rows * k);
    }
    if (!rc && a->req[1] != MXP_REQ_NULL) { /* dW = dyᵀ · x */
        rc = nn_bf16_gemm(a->ctx, path, 1, 0, h, k, rows, dy, h, nn_ptr(&a->in[0]), k, 0, t, k);
        if (!rc) nn_bf16_store(a->req[1], t, nn_ptr(&a->in_grad[1]), h * k);
    }
    if (!rc && !c.no_bias && a->n_in > 2 && a->req[2] != MXP_REQ_NULL) {
        for (int64_t j = 0; j < h; j++) t[j] = 0;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < h; j++) t[j] += nn_bf16_to_f32(dy[r * h + j]);
        nn_bf16_store(a->req[2], t, nn_ptr(&a->in_grad[2]), h);
    }
    nn_free(t);
    return rc;
}

const mxp_op_impl nn_bf16_fc_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "FullyConnected", .impl_name = "bf16", .device = "cpu",
    .rank = 512, .doc = "bfloat16 GEMM, fp32 accumulation (AMX / AVX512-BF16 / fp32 path, MXP_BF16_KERNEL)",
    .supports = fc_supports, .forward = fc_forward, .backward = fc_backward,
};
