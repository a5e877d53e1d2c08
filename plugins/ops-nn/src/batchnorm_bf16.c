/* batchnorm_bf16.c — BatchNorm's bfloat16 passes (batchnorm_bf16.h), the
 * counterpart of batchnorm_f32.c for a mixed-precision graph where the
 * BatchNorm sits between two bf16 convolutions: data in and out of every
 * pass is bf16 (half the bytes of float32: these passes are memory-bound),
 * the arithmetic is float32 in 16 lanes, the per-row sums are float lanes
 * folded into double and added over o in a fixed order (same results for
 * any thread count), and the statistics and coefficients come in and go
 * out as float32/float64 (batchnorm.c computes them).
 *
 * Same pass structure as float32: forward = statistics (shifted sums,
 * shift = each channel's first value) + affine; backward = sums + dx.
 * With ReLU the backward's mask is recomputed from x with the forward's
 * sc, sh and the same float expression (pre = x*sc + sh > 0); with the
 * residual (_mxp_BatchNormAddReLU) dy is masked by the output y > 0 and
 * the masked dy (exact: it is dy or 0) is written as the residual's
 * gradient and read by the dx pass.
 * Not here: float32/float64 (batchnorm_f32.c, batchnorm.c), req beyond
 * write/add (the caller maps inplace to write). */
#include "batchnorm_bf16.h"
#include "batchnorm_rows.h"
#include "bf16_vec.h"

#define LANES 16

/* g where on, else +0 (a macro: see ldh16). */
#define keep(g, on) __extension__({                                           \
    v16 g_ = (g);                                                             \
    i16v gi_;                                                                 \
    memcpy(&gi_, &g_, sizeof gi_);                                            \
    gi_ &= (on);                                                              \
    memcpy(&g_, &gi_, sizeof g_);                                             \
    g_;                                                                       \
})

static inline float bf(uint16_t h) { return nn_bf16_to_f32(h); }
static inline uint16_t hb(float f) { return nn_f32_to_bf16(f); }
static inline float bn_pre(float x, float sc, float sh) { return x * sc + sh; }

/* out[0] = sum(x - k), out[1] = sum((x - k)^2). */
TC static void row_moments(const uint16_t *x, int64_t n, float k, double *out) {
    v16 a = {0}, b = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        v16 d = ldh16(x + i) - k;
        a += d;
        b += d * d;
    }
    double s = nn_fold16(a), t = nn_fold16(b);
    for (; i < n; i++) {
        double d = bf(x[i]) - k;
        s += d;
        t += d * d;
    }
    out[0] = s;
    out[1] = t;
}

/* y (=|+=) x*sc + sh, with relu: max(., 0); with r: max(x*sc + sh + r, 0). */
TC static void row_affine(const uint16_t *x, const uint16_t *r, uint16_t *y, int64_t n, float sc, float sh, int relu,
                          int add) {
    const v16 z = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        v16 v = ldh16(x + i) * sc + sh;
        if (r) v += ldh16(r + i);
        if (relu || r) v = keep(v, v > z);
        if (add) v += ldh16(y + i);
        sth16(y + i, v);
    }
    for (; i < n; i++) {
        float v = bn_pre(bf(x[i]), sc, sh);
        if (r) v += bf(r[i]);
        if (relu || r) v = v > 0 ? v : 0.0f;
        if (add) v += bf(y[i]);
        y[i] = hb(v);
    }
}

/* out[0] = sum(g), out[1] = sum(g * (x - m)); g = dy, or dy where
 * x*msc + msh > 0 (relu), or dy where y > 0 written to gout (ymask). */
TC static void row_dsums(const uint16_t *x, const uint16_t *dy, const uint16_t *ym, uint16_t *gout, int64_t n, float m,
                         int relu, float msc, float msh, double *out) {
    const v16 z = {0};
    v16 a = {0}, b = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        v16 xv = ldh16(x + i), g = ldh16(dy + i);
        if (ym) {
            g = keep(g, ldh16(ym + i) > z);
            sth16(gout + i, g); /* exact: g is a bf16 value or 0 */
        } else if (relu)
            g = keep(g, xv * msc + msh > z);
        a += g;
        b += g * (xv - m);
    }
    double s = nn_fold16(a), t = nn_fold16(b);
    for (; i < n; i++) {
        float xv = bf(x[i]), g = bf(dy[i]);
        if (ym) {
            g = bf(ym[i]) > 0 ? g : 0.0f;
            gout[i] = hb(g);
        } else if (relu)
            g = bn_pre(xv, msc, msh) > 0 ? g : 0.0f;
        s += g;
        t += (double)g * (xv - m);
    }
    out[0] = s;
    out[1] = t;
}

/* dx (=|+=) a*g + b*(x - m) + k, g as in row_dsums (relu: masked from x). */
TC static void row_dx(const uint16_t *x, const uint16_t *dy, uint16_t *dx, int64_t n, float a, float b, float k, float m,
                      int relu, float msc, float msh, int add) {
    const v16 z = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        v16 xv = ldh16(x + i), g = ldh16(dy + i);
        if (relu) g = keep(g, xv * msc + msh > z);
        v16 v = a * g + b * (xv - m) + k;
        if (add) v += ldh16(dx + i);
        sth16(dx + i, v);
    }
    for (; i < n; i++) {
        float xv = bf(x[i]), g = bf(dy[i]);
        if (relu) g = bn_pre(xv, msc, msh) > 0 ? g : 0.0f;
        float v = a * g + b * (xv - m) + k;
        if (add) v += bf(dx[i]);
        dx[i] = hb(v);
    }
}

TC static void add_into(uint16_t *dst, const uint16_t *src, int64_t n) {
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) sth16(dst + i, ldh16(dst + i) + ldh16(src + i));
    for (; i < n; i++) dst[i] = hb(bf(dst[i]) + bf(src[i]));
}

void nn_bnh_add_into(uint16_t *dst, const uint16_t *src, int64_t n) { add_into(dst, src, n); }

typedef struct pass {
    int64_t C, S;
    const uint16_t *x, *dy, *res, *ym;
    const float *mean, *a, *b, *k, *msc, *msh;
    uint16_t *y, *g;
    double *part; /* [rows][2] */
    int add, relu;
} pass;

static void moments_range(void *arg, int64_t r0, int64_t r1) {
    const pass *p = arg;
    for (int64_t r = r0; r < r1; r++) row_moments(p->x + r * p->S, p->S, p->mean[r % p->C], p->part + 2 * r);
}

static void dsums_range(void *arg, int64_t r0, int64_t r1) {
    const pass *p = arg;
    for (int64_t r = r0; r < r1; r++) {
        int64_t c = r % p->C, o = r * p->S;
        row_dsums(p->x + o, p->dy + o, p->ym ? p->ym + o : NULL, p->g ? p->g + o : NULL, p->S, p->mean[c], p->msc != NULL,
                  p->msc ? p->msc[c] : 0.0f, p->msh ? p->msh[c] : 0.0f, p->part + 2 * r);
    }
}

static void affine_range(void *arg, int64_t r0, int64_t r1) {
    const pass *p = arg;
    for (int64_t r = r0; r < r1; r++) {
        int64_t c = r % p->C, o = r * p->S;
        row_affine(p->x + o, p->res ? p->res + o : NULL, p->y + o, p->S, p->a[c], p->b[c], p->relu, p->add);
    }
}

static void dx_range(void *arg, int64_t r0, int64_t r1) {
    const pass *p = arg;
    for (int64_t r = r0; r < r1; r++) {
        int64_t c = r % p->C, o = r * p->S;
        row_dx(p->x + o, p->dy + o, p->y + o, p->S, p->a[c], p->b[c], p->k[c], p->mean[c], p->msc != NULL,
               p->msc ? p->msc[c] : 0.0f, p->msh ? p->msh[c] : 0.0f, p->add);
    }
}

int nn_bnh_stats(const mxp_op_ctx *ctx, const uint16_t *x, int64_t O, int64_t C, int64_t S, double *mean, double *var) {
    float *shift = nn_alloc((uint64_t)(C > 0 ? C : 1) * sizeof *shift);
    if (!shift) return NN_ERR(MXP_ENOMEM, "BatchNorm (bf16): out of memory (%lld channels)", (long long)C);
    for (int64_t c = 0; c < C; c++) shift[c] = S > 0 ? bf(x[c * S]) : 0.0f;
    pass p = {.C = C, .S = S, .x = x, .mean = shift};
    int st = nn_bn_row_sums(ctx, O, C, S, moments_range, &p, &p.part, mean, var, "BatchNorm (bf16)");
    if (st >= 0) nn_bn_moments_finish(O * S, C, shift, mean, var);
    nn_free(shift);
    return st;
}

int nn_bnh_apply(const mxp_op_ctx *ctx, const uint16_t *x, const uint16_t *res, uint16_t *y, int64_t O, int64_t C,
                 int64_t S, const float *sc, const float *sh, int add, int relu) {
    pass p = {.C = C, .S = S, .x = x, .res = res, .y = y, .a = sc, .b = sh, .add = add, .relu = relu};
    return nn_parallel(ctx, O * C, nn_bn_grain_rows(S), affine_range, &p);
}

int nn_bnh_dsums(const mxp_op_ctx *ctx, const uint16_t *x, const uint16_t *dy, int64_t O, int64_t C, int64_t S,
                 const float *mean, const float *msc, const float *msh, double *sdy, double *sdyx) {
    pass p = {.C = C, .S = S, .x = x, .dy = dy, .mean = mean, .msc = msc, .msh = msh};
    return nn_bn_row_sums(ctx, O, C, S, dsums_range, &p, &p.part, sdy, sdyx, "BatchNorm (bf16)");
}

int nn_bnh_dsums_ymask(const mxp_op_ctx *ctx, const uint16_t *x, const uint16_t *dy, const uint16_t *y, uint16_t *g,
                       int64_t O, int64_t C, int64_t S, const float *mean, double *sdy, double *sdyx) {
    pass p = {.C = C, .S = S, .x = x, .dy = dy, .ym = y, .g = g, .mean = mean};
    return nn_bn_row_sums(ctx, O, C, S, dsums_range, &p, &p.part, sdy, sdyx, "BatchNorm (bf16)");
}

int nn_bnh_dx(const mxp_op_ctx *ctx, const uint16_t *x, const uint16_t *dy, uint16_t *dx, int64_t O, int64_t C,
              int64_t S, const float *mean, const float *a, const float *b, const float *k, const float *msc,
              const float *msh, int add) {
    pass p = {.C = C, .S = S, .x = x, .dy = dy, .y = dx, .mean = mean, .a = a, .b = b, .k = k, .msc = msc, .msh = msh,
              .add = add};
    return nn_parallel(ctx, O * C, nn_bn_grain_rows(S), dx_range, &p);
}
