/* batchnorm_rows.c — the row sums and moments BatchNorm's float32 and
 * bfloat16 passes share (batchnorm_rows.h). */
#include "batchnorm_rows.h"

/* Values per parallel chunk of rows: a chunk's cost dwarfs the hand-off
 * to a helper (~10 us). */
#define CHUNK_VALUES 16384

int64_t nn_bn_grain_rows(int64_t S) { return S >= CHUNK_VALUES ? 1 : CHUNK_VALUES / (S > 0 ? S : 1); }

int nn_bn_row_sums(const mxp_op_ctx *ctx, int64_t O, int64_t C, int64_t S, nn_range_fn fn, void *pass,
                   double **part, double *s0, double *s1, const char *who) {
    int64_t rows = O * C;
    *part = nn_alloc((uint64_t)(rows > 0 ? rows : 1) * 2 * sizeof(double));
    if (!*part) return NN_ERR(MXP_ENOMEM, "%s: out of memory (%lld row sums)", who, (long long)rows);
    int st = nn_parallel(ctx, rows, nn_bn_grain_rows(S), fn, pass);
    for (int64_t c = 0; c < C; c++) s0[c] = s1[c] = 0;
    for (int64_t r = 0; r < rows && st >= 0; r++) {
        s0[r % C] += (*part)[2 * r];
        s1[r % C] += (*part)[2 * r + 1];
    }
    nn_free(*part);
    *part = NULL;
    return st;
}

void nn_bn_moments_finish(int64_t n, int64_t C, const float *shift, double *mean, double *var) {
    for (int64_t c = 0; c < C; c++) {
        double m1 = n > 0 ? mean[c] / (double)n : 0, m2 = n > 0 ? var[c] / (double)n : 0;
        mean[c] = shift[c] + m1;
        var[c] = m2 - m1 * m1 > 0 ? m2 - m1 * m1 : 0;
    }
}
