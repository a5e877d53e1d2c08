/* nn_common.c — helpers shared by the ops-nn op families: tensor checks,
 * shape unification with MXNet-style error messages, the parallel_for
 * wrapper and host scratch memory.  No op logic here. */
#include "nn_common.h"

int nn_check_contig(const char *op, const mxp_tensor *t, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (t[i].data && !mxp_tensor_is_contiguous(&t[i]))
            return NN_ERR(MXP_EUNSUPPORTED, "%s: tensor %u is a strided view; ops-nn needs contiguous tensors", op, i);
    return MXP_OK;
}

int nn_check_float(const char *op, const mxp_tensor *t, uint32_t n, int32_t *dtype) {
    int32_t dt = t[0].dtype;
    if (dt != MXP_DTYPE_F32 && dt != MXP_DTYPE_F64)
        return NN_ERR(MXP_ETYPE, "%s: dtype %d not supported (float32, float64)", op, dt);
    for (uint32_t i = 1; i < n; i++)
        if (t[i].data && t[i].dtype != dt)
            return NN_ERR(MXP_ETYPE, "%s: tensor %u has dtype %d, expected %d", op, i, t[i].dtype, dt);
    if (dtype) *dtype = dt;
    return MXP_OK;
}

int nn_parallel(const mxp_op_ctx *ctx, int64_t n, int64_t grain, nn_range_fn fn, void *arg) {
    if (n <= 0) return MXP_OK;
    if (grain < 1) grain = 1;
    if (ctx && ctx->parallel_for && n > grain) return ctx->parallel_for(ctx, n, grain, fn, arg);
    fn(arg, 0, n);
    return MXP_OK;
}

void *nn_alloc(uint64_t bytes) {
    if (bytes == 0) bytes = 64;
    return nn_host->alloc_host(bytes);
}
void nn_free(void *p) { if (p) nn_host->free_host(p); }

const char *nn_shape_str(const mxp_shape *s, char *buf, size_t size) {
    if (s->ndim < 0) { snprintf(buf, size, "(?)"); return buf; }
    size_t o = 0;
    o += (size_t)snprintf(buf + o, size - o, "(");
    for (int i = 0; i < s->ndim && o < size; i++)
        o += (size_t)snprintf(buf + o, size - o, i ? ",%lld" : "%lld", (long long)s->dims[i]);
    if (o < size) snprintf(buf + o, size - o, ")");
    return buf;
}

int nn_shape_assign(const char *op, const char *what, mxp_shape *slot, const mxp_shape *want) {
    if (slot->ndim < 0) { *slot = *want; return MXP_OK; }
    int ok = slot->ndim == want->ndim;
    for (int i = 0; ok && i < want->ndim; i++)
        if (slot->dims[i] != 0 && want->dims[i] != 0 && slot->dims[i] != want->dims[i]) ok = 0;
    if (!ok) {
        char a[160], b[160];
        return NN_ERR(MXP_ESHAPE, "%s: %s has shape %s but %s is expected", op, what,
                      nn_shape_str(slot, a, sizeof a), nn_shape_str(want, b, sizeof b));
    }
    for (int i = 0; i < want->ndim; i++) if (slot->dims[i] == 0) slot->dims[i] = want->dims[i];
    return MXP_OK;
}

#include <cblas.h>
void nn_gemm(int32_t dtype, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
             double alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
             double beta, void *c, int64_t ldc) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) { /* cblas would not scale C by beta reliably for k == 0 */
        NN_TYPED(dtype, T, for (int64_t i = 0; i < m; i++) for (int64_t j = 0; j < n; j++)
            ((T *)c)[i * ldc + j] = beta == 0 ? 0 : (T)(beta * ((T *)c)[i * ldc + j]););
        return;
    }
    if (dtype == MXP_DTYPE_F32)
        cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                    (blasint)m, (blasint)n, (blasint)k, (float)alpha, a, (blasint)lda, b, (blasint)ldb,
                    (float)beta, c, (blasint)ldc);
    else
        cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                    (blasint)m, (blasint)n, (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb,
                    beta, c, (blasint)ldc);
}
