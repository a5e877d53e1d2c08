/* nn_common.c — helpers shared by the ops-nn op families: tensor checks,
 * shape unification with MXNet-style error messages, the parallel_for
 * wrapper, host scratch memory and the BLAS wrappers (nn_gemm: one
 * single-threaded OpenBLAS call; nn_gemm_par: one GEMM split into
 * independent column or row blocks run on ctx->parallel_for).  No op logic
 * here. */
#include "nn_common.h"

int nn_check_contig(const char *op, const mxp_tensor *t, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (t[i].data && !mxp_tensor_is_contiguous(&t[i]))
            return NN_ERR(MXP_EUNSUPPORTED, "%s: tensor %u is a strided view; ops-nn needs contiguous tensors", op, i);
    return MXP_OK;
}

/* MXNet's dtype names by type flag, for messages (float16 and bfloat16 are
 * storage dtypes here: Cast converts them, compute ops refuse them). */
static const char *dtype_name(int32_t dt) {
    static const char *const names[] = {"float32", "float64", "float16", "uint8", "int32", "int8", "int64",
                                        "bool", "int16", "uint16", "uint32", "uint64", "bfloat16"};
    return dt >= 0 && dt < (int32_t)(sizeof names / sizeof names[0]) ? names[dt] : "unknown";
}

int nn_check_float(const char *op, const mxp_tensor *t, uint32_t n, int32_t *dtype) {
    int32_t dt = t[0].dtype;
    if (dt != MXP_DTYPE_F32 && dt != MXP_DTYPE_F64)
        return NN_ERR(MXP_ETYPE, "%s: dtype %s (%d) not supported (float32, float64; Cast float16/bfloat16 first)", op,
                      dtype_name(dt), dt);
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

/* ---------------------------------------------------------- parallel GEMM
 * OpenBLAS is single-threaded in this process (nn_blas_init): the runtime
 * owns the cores.  A GEMM big enough to be worth two cores is cut into
 * independent blocks of C — column blocks when C is wide, row blocks when
 * it is tall — and each block is one single-threaded sgemm/dgemm on a
 * parallel_for chunk.  The block count is chosen here (2-4), not left to
 * parallel_for, because every block re-packs the shared operand: fewer,
 * bigger blocks waste less.  When no helper slot is free parallel_for runs
 * all blocks on the caller, which then costs only the extra packing. */
#define NN_GEMM_PAR_MIN_FLOP (3.0e6)  /* ~30 us on one core: below, one call */

typedef struct gemm_job {
    int32_t dt; int ta, tb, by_cols;
    int64_t m, n, k, lda, ldb, ldc, step;
    double alpha, beta;
    const char *a, *b;
    char *c;
} gemm_job;

static void gemm_block_range(void *arg, int64_t bb, int64_t be) {
    const gemm_job *j = arg;
    uint64_t es = j->dt == MXP_DTYPE_F32 ? 4 : 8;
    for (int64_t blk = bb; blk < be; blk++) {
        if (j->by_cols) {
            int64_t c0 = blk * j->step, c1 = c0 + j->step < j->n ? c0 + j->step : j->n;
            if (c0 >= c1) continue;
            /* columns of op(B): B[:, c0:c1] (row-major, no trans) or rows c0:c1 of B (trans) */
            const char *bp = j->b + (uint64_t)(j->tb ? c0 * j->ldb : c0) * es;
            nn_gemm(j->dt, j->ta, j->tb, j->m, c1 - c0, j->k, j->alpha, j->a, j->lda, bp, j->ldb, j->beta,
                    j->c + (uint64_t)c0 * es, j->ldc);
        } else {
            int64_t r0 = blk * j->step, r1 = r0 + j->step < j->m ? r0 + j->step : j->m;
            if (r0 >= r1) continue;
            const char *ap = j->a + (uint64_t)(j->ta ? r0 : r0 * j->lda) * es;
            nn_gemm(j->dt, j->ta, j->tb, r1 - r0, j->n, j->k, j->alpha, ap, j->lda, j->b, j->ldb, j->beta,
                    j->c + (uint64_t)(r0 * j->ldc) * es, j->ldc);
        }
    }
}

int nn_gemm_par(const mxp_op_ctx *ctx, int32_t dtype, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                double alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
                double beta, void *c, int64_t ldc) {
    double flop = 2.0 * (double)m * (double)n * (double)k;
    int by_cols = n >= m;
    int64_t ext = by_cols ? n : m, unit = by_cols ? 16 : 8; /* keep blocks whole register tiles */
    int64_t nblk = flop >= 8 * NN_GEMM_PAR_MIN_FLOP ? 4 : 2;
    if (!ctx || !ctx->parallel_for || flop < 2 * NN_GEMM_PAR_MIN_FLOP || ext < 2 * unit) {
        nn_gemm(dtype, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return MXP_OK;
    }
    int64_t step = (ext + nblk - 1) / nblk;
    step = (step + unit - 1) / unit * unit;
    nblk = (ext + step - 1) / step;
    gemm_job j = { dtype, trans_a, trans_b, by_cols, m, n, k, lda, ldb, ldc, step, alpha, beta, a, b, c };
    return ctx->parallel_for(ctx, nblk, 1, gemm_block_range, &j);
}

/* OpenBLAS's pthread build starts its own pool (one thread per core) and
 * uses it for every large call.  Our kernels run on engine workers and
 * parallel_for helpers that already occupy the cores, so a multithreaded
 * BLAS call would oversubscribe them (perf-notes: 2-4x slower).  The
 * runtime owns the cores: BLAS is made single-threaded once, at pack init
 * (the setting is process-wide, so it covers threads started later), and
 * parallelism comes from nn_gemm_par.  OPENBLAS_NUM_THREADS cannot do this
 * after the library is loaded. */
void nn_blas_init(void) { openblas_set_num_threads(1); }
