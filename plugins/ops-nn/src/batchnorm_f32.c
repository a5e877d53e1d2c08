/* batchnorm_f32.c — BatchNorm's float32 passes (batchnorm_f32.h): batch
 * statistics, the forward affine map, the backward's two sums and its
 * element pass, each one walk over the rows (o, c) of S values.
 *
 * Why rows in memory order: a ResNet-20 BatchNorm at 16 channels x 32x32
 * x batch 64 is 4 MB, so the op is memory-bound.  Walking channel by
 * channel jumps C*S floats between rows (the hardware prefetcher loses
 * the stream) and took three passes for the forward (sum, squared
 * deviations, affine); here the forward is two sequential passes (stats,
 * affine) and the backward two (sums, dx).
 *
 * Statistics in one pass without cancellation: each channel is shifted by
 * its first value k (a sample of the channel, so |mean - k| is of the
 * order of the standard deviation): per row, s1 = sum(x - k) and
 * s2 = sum((x - k)^2) in 16 float lanes, then mean = k + S1/n and
 * var = S2/n - (S1/n)^2 over the row sums in double.  The subtraction
 * loses about (mean - k)^2 / var of float precision, i.e. a few ulp.
 *
 * Determinism: per-row sums go to a scratch array and are added over o in
 * a fixed order, whatever the thread count or chunking.
 * With ReLU (_mxp_BatchNormReLU, batchnorm.c): the affine pass writes
 * max(x*sc + sh, 0), and the backward passes take dy where x*sc + sh > 0
 * (else 0): the mask is recomputed from x with the forward's sc, sh and
 * the same expression (bn_pre), so neither pass reads the output.
 * With a residual and ReLU (_mxp_BatchNormAddReLU): the affine pass writes
 * max(x*sc + sh + r, 0); the backward's sums pass masks dy with the
 * output (y > 0) and writes the masked dy (the residual's gradient), which
 * the dx pass then reads as its dy.
 * Not here: float64 (batchnorm.c's generic loops), req handling beyond
 * write/add (the caller maps inplace to write). */
#include "batchnorm_f32.h"
#include "batchnorm_rows.h"
#include "nn_simd.h"

#include <string.h>

#define LANES 16
typedef int32_t mask16 __attribute__((vector_size(64)));

/* out[0] = sum(x - k), out[1] = sum((x - k)^2). */
TC static void row_moments(const float *x, int64_t n, float k, double *out) {
    v16 a = {0}, b = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        v16 d = ld16(x + i) - k;
        a += d;
        b += d * d;
    }
    double s = nn_fold16(a), t = nn_fold16(b);
    for (; i < n; i++) {
        double d = x[i] - k;
        s += d;
        t += d * d;
    }
    out[0] = s;
    out[1] = t;
}

/* out[0] = sum(dy), out[1] = sum(dy * (x - m)). */
TC static void row_dsums(const float *x, const float *dy, int64_t n, float m, double *out) {
    v16 a = {0}, b = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        v16 g = ld16(dy + i);
        a += g;
        b += g * (ld16(x + i) - m);
    }
    double s = nn_fold16(a), t = nn_fold16(b);
    for (; i < n; i++) {
        s += dy[i];
        t += (double)dy[i] * (x[i] - m);
    }
    out[0] = s;
    out[1] = t;
}

/* The pre-activation of the affine map: one expression for the forward
 * and the backward's ReLU mask, so both round (and contract) alike. */
static inline float bn_pre(float x, float sc, float sh) { return x * sc + sh; }

/* out[0] = sum(g), out[1] = sum(g * (x - m)), g = dy where
 * bn_pre(x) > 0, else 0 (the ReLU's gradient). */
TC static void row_dsums_relu(const float *x, const float *dy, int64_t n, float m, float sc, float sh, double *out) {
    v16 a = {0}, b = {0}, z = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        v16 xv = ld16(x + i), pre = xv * sc + sh, d = ld16(dy + i), g;
        mask16 di, on = pre > z;
        memcpy(&di, &d, sizeof di);
        di &= on; /* dy where pre > 0, else +0 */
        memcpy(&g, &di, sizeof g);
        a += g;
        b += g * (xv - m);
    }
    double s = nn_fold16(a), t = nn_fold16(b);
    for (; i < n; i++) {
        float g = bn_pre(x[i], sc, sh) > 0 ? dy[i] : 0.0f;
        s += g;
        t += (double)g * (x[i] - m);
    }
    out[0] = s;
    out[1] = t;
}

TC static void row_affine_relu(const float *x, float *y, int64_t n, float sc, float sh, int add) {
    if (add)
        for (int64_t i = 0; i < n; i++) { float v = bn_pre(x[i], sc, sh); y[i] += v > 0 ? v : 0.0f; }
    else
        for (int64_t i = 0; i < n; i++) { float v = bn_pre(x[i], sc, sh); y[i] = v > 0 ? v : 0.0f; }
}

TC static void row_dx_relu(const float *x, const float *dy, float *dx, int64_t n, float a, float b, float k, float m,
                           float sc, float sh, int add) {
    if (add)
        for (int64_t i = 0; i < n; i++) {
            float g = dy[i];
            g = bn_pre(x[i], sc, sh) > 0 ? g : 0.0f;
            dx[i] += a * g + b * (x[i] - m) + k;
        }
    else
        for (int64_t i = 0; i < n; i++) {
            float g = dy[i];
            g = bn_pre(x[i], sc, sh) > 0 ? g : 0.0f;
            dx[i] = a * g + b * (x[i] - m) + k;
        }
}

/* y = max(x*sc + sh + r, 0) (BatchNorm, residual add, ReLU). */
TC static void row_affine_add_relu(const float *x, const float *r, float *y, int64_t n, float sc, float sh, int add) {
    if (add)
        for (int64_t i = 0; i < n; i++) { float v = x[i] * sc + sh + r[i]; y[i] += v > 0 ? v : 0.0f; }
    else
        for (int64_t i = 0; i < n; i++) { float v = x[i] * sc + sh + r[i]; y[i] = v > 0 ? v : 0.0f; }
}

/* g = dy where y > 0, else 0, written out; out[0] = sum(g),
 * out[1] = sum(g * (x - m)). */
TC static void row_dsums_ymask(const float *x, const float *dy, const float *y, float *g, int64_t n, float m,
                               double *out) {
    v16 a = {0}, b = {0}, z = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        v16 d = ld16(dy + i), gv;
        mask16 di, on = ld16(y + i) > z;
        memcpy(&di, &d, sizeof di);
        di &= on;
        memcpy(&gv, &di, sizeof gv);
        st16(g + i, gv);
        a += gv;
        b += gv * (ld16(x + i) - m);
    }
    double s = nn_fold16(a), t = nn_fold16(b);
    for (; i < n; i++) {
        float gi = y[i] > 0 ? dy[i] : 0.0f;
        g[i] = gi;
        s += gi;
        t += (double)gi * (x[i] - m);
    }
    out[0] = s;
    out[1] = t;
}

TC static void row_affine(const float *x, float *y, int64_t n, float sc, float sh, int add) {
    if (add)
        for (int64_t i = 0; i < n; i++) y[i] += x[i] * sc + sh;
    else
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * sc + sh;
}

TC static void row_dx(const float *x, const float *dy, float *dx, int64_t n, float a, float b, float k, float m,
                      int add) {
    if (add)
        for (int64_t i = 0; i < n; i++) dx[i] += a * dy[i] + b * (x[i] - m) + k;
    else
        for (int64_t i = 0; i < n; i++) dx[i] = a * dy[i] + b * (x[i] - m) + k;
}

typedef struct pass {
    int64_t C, S;
    const float *x, *dy, *mean, *a, *b, *k;
    const float *msc, *msh; /* ReLU mask's scale and shift, or NULL (no ReLU) */
    const float *res, *ym;  /* residual added before the ReLU; output masking dy */
    float *y, *g;
    double *part; /* [rows][2] */
    int add;
} pass;

static void moments_range(void *arg, int64_t r0, int64_t r1) {
    const pass *p = arg;
    for (int64_t r = r0; r < r1; r++) row_moments(p->x + r * p->S, p->S, p->mean[r % p->C], p->part + 2 * r);
}
static void dsums_range(void *arg, int64_t r0, int64_t r1) {
    const pass *p = arg;
    if (p->ym) {
        for (int64_t r = r0; r < r1; r++)
            row_dsums_ymask(p->x + r * p->S, p->dy + r * p->S, p->ym + r * p->S, p->g + r * p->S, p->S,
                            p->mean[r % p->C], p->part + 2 * r);
        return;
    }
    if (p->msc) {
        for (int64_t r = r0; r < r1; r++) {
            int64_t c = r % p->C;
            row_dsums_relu(p->x + r * p->S, p->dy + r * p->S, p->S, p->mean[c], p->msc[c], p->msh[c], p->part + 2 * r);
        }
        return;
    }
    for (int64_t r = r0; r < r1; r++) row_dsums(p->x + r * p->S, p->dy + r * p->S, p->S, p->mean[r % p->C], p->part + 2 * r);
}
static void affine_range(void *arg, int64_t r0, int64_t r1) {
    const pass *p = arg;
    for (int64_t r = r0; r < r1; r++) {
        int64_t c = r % p->C;
        if (p->res)
            row_affine_add_relu(p->x + r * p->S, p->res + r * p->S, p->y + r * p->S, p->S, p->a[c], p->b[c], p->add);
        else if (p->msc) row_affine_relu(p->x + r * p->S, p->y + r * p->S, p->S, p->a[c], p->b[c], p->add);
        else row_affine(p->x + r * p->S, p->y + r * p->S, p->S, p->a[c], p->b[c], p->add);
    }
}
static void dx_range(void *arg, int64_t r0, int64_t r1) {
    const pass *p = arg;
    for (int64_t r = r0; r < r1; r++) {
        int64_t c = r % p->C;
        if (p->msc)
            row_dx_relu(p->x + r * p->S, p->dy + r * p->S, p->y + r * p->S, p->S, p->a[c], p->b[c], p->k[c], p->mean[c],
                        p->msc[c], p->msh[c], p->add);
        else row_dx(p->x + r * p->S, p->dy + r * p->S, p->y + r * p->S, p->S, p->a[c], p->b[c], p->k[c], p->mean[c], p->add);
    }
}

int nn_bnf_stats(const mxp_op_ctx *ctx, const float *x, int64_t O, int64_t C, int64_t S, double *mean, double *var) {
    float *shift = nn_alloc((uint64_t)C * sizeof *shift);
    if (!shift) return NN_ERR(MXP_ENOMEM, "BatchNorm: out of memory (%lld channels)", (long long)C);
    for (int64_t c = 0; c < C; c++) shift[c] = S > 0 ? x[c * S] : 0.0f;
    pass p = {.C = C, .S = S, .x = x, .mean = shift};
    int st = nn_bn_row_sums(ctx, O, C, S, moments_range, &p, &p.part, mean, var, "BatchNorm");
    if (st >= 0) nn_bn_moments_finish(O * S, C, shift, mean, var);
    nn_free(shift);
    return st;
}

int nn_bnf_apply(const mxp_op_ctx *ctx, const float *x, const float *res, float *y, int64_t O, int64_t C, int64_t S,
                 const float *sc, const float *sh, int add, int relu) {
    pass p = {.C = C, .S = S, .x = x, .res = res, .y = y, .a = sc, .b = sh, .msc = relu ? sc : NULL, .msh = sh, .add = add};
    return nn_parallel(ctx, O * C, nn_bn_grain_rows(S), affine_range, &p);
}

int nn_bnf_dsums(const mxp_op_ctx *ctx, const float *x, const float *dy, int64_t O, int64_t C, int64_t S,
                 const float *mean, const float *msc, const float *msh, double *sdy, double *sdyx) {
    pass p = {.C = C, .S = S, .x = x, .dy = dy, .mean = mean, .msc = msc, .msh = msh};
    return nn_bn_row_sums(ctx, O, C, S, dsums_range, &p, &p.part, sdy, sdyx, "BatchNorm");
}

int nn_bnf_dsums_ymask(const mxp_op_ctx *ctx, const float *x, const float *dy, const float *y, float *g, int64_t O,
                       int64_t C, int64_t S, const float *mean, double *sdy, double *sdyx) {
    pass p = {.C = C, .S = S, .x = x, .dy = dy, .ym = y, .g = g, .mean = mean};
    return nn_bn_row_sums(ctx, O, C, S, dsums_range, &p, &p.part, sdy, sdyx, "BatchNorm");
}

int nn_bnf_dx(const mxp_op_ctx *ctx, const float *x, const float *dy, float *dx, int64_t O, int64_t C, int64_t S,
              const float *mean, const float *a, const float *b, const float *k, const float *msc, const float *msh,
              int add) {
    pass p = {.C = C, .S = S, .x = x, .dy = dy, .y = dx, .mean = mean, .a = a, .b = b, .k = k, .msc = msc, .msh = msh,
              .add = add};
    return nn_parallel(ctx, O * C, nn_bn_grain_rows(S), dx_range, &p);
}
