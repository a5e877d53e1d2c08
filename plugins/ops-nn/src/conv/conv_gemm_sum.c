/* conv_gemm_sum.c — small vector helpers of the gemm Convolution impl: a
 * row's sum in double (bias gradients) and a row fill/add of one value
 * (bias in forward).  GCC vector extensions compiled per ISA with
 * target_clones (static behind plain wrappers, see microkernel.c); no
 * -march.  The double sum uses 16 independent lanes, so its rounding
 * differs from a left-to-right sum only at double precision. */
#include "conv_gemm.h"
#include "nn_simd.h"

typedef float v8f __attribute__((vector_size(32)));
typedef float v8fu __attribute__((vector_size(32), aligned(4), may_alias));
typedef double v8d __attribute__((vector_size(64)));
typedef double v8du __attribute__((vector_size(64), aligned(8), may_alias));

static inline double hsum8(v8d v) {
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

TC static double sum_f32(const float *p, int64_t n) {
    v8d a0 = {0}, a1 = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 += __builtin_convertvector(*(const v8fu *)(const void *)(p + i), v8d);
        a1 += __builtin_convertvector(*(const v8fu *)(const void *)(p + i + 8), v8d);
    }
    double s = hsum8(a0 + a1);
    for (; i < n; i++) s += p[i];
    return s;
}

TC static double sum_f64(const double *p, int64_t n) {
    v8d a0 = {0}, a1 = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 += *(const v8du *)(const void *)(p + i);
        a1 += *(const v8du *)(const void *)(p + i + 8);
    }
    double s = hsum8(a0 + a1);
    for (; i < n; i++) s += p[i];
    return s;
}

double conv_gemm_row_sum(int32_t dt, const void *p, int64_t n) {
    return dt == MXP_DTYPE_F32 ? sum_f32(p, n) : sum_f64(p, n);
}

TC static void bias_f32(float *y, int64_t n, float v, int add) {
    if (add) for (int64_t i = 0; i < n; i++) y[i] += v;
    else for (int64_t i = 0; i < n; i++) y[i] = v;
}

void conv_gemm_row_bias(int32_t dt, void *y, int64_t n, double v, int add) {
    if (dt == MXP_DTYPE_F32) { bias_f32(y, n, (float)v, add); return; }
    double *d = y;
    if (add) for (int64_t i = 0; i < n; i++) d[i] += v;
    else for (int64_t i = 0; i < n; i++) d[i] = v;
}

TC static void out_f32(float *y, const float *t, int64_t n, float b, int add) {
    if (add) for (int64_t i = 0; i < n; i++) y[i] += t[i] + b;
    else for (int64_t i = 0; i < n; i++) y[i] = t[i] + b;
}

void conv_gemm_row_out(int32_t dt, void *y, const void *t, int64_t n, double b, int add) {
    if (dt == MXP_DTYPE_F32) { out_f32(y, t, n, (float)b, add); return; }
    double *d = y; const double *s = t;
    if (add) for (int64_t i = 0; i < n; i++) d[i] += s[i] + b;
    else for (int64_t i = 0; i < n; i++) d[i] = s[i] + b;
}
