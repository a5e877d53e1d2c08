/* conv_strip_kern.c — the weight-gradient kernels of Convolution impl
 * "strip" (conv_strip_bwd.c) for unpadded stride-1 layers: the column
 * matrix is read straight from the input, no im2col.  Two of them:
 * vectors along output channels (sbk_dw_direct, below) and vectors along
 * pixels at the input's row pitch (sbk_dw_pitch, at the end).
 *
 * out[c*ldo + m] += sum over output rows r < rows and columns ow < Wo of
 *     dyT[(r*Wo + ow)*ldt + m] * xr[c][r*W + ow]
 * for m < 16*nmv (nmv 1..4) and c < nc (1..PW_DWC): xr[c] points at tap
 * c's first input pixel (channel, row offset ki*dh, column offset kj*dw),
 * so with stride 1 and no padding every pixel it reads exists.  A block of
 * 16*nmv x nc sums stays in AVX-512 registers over the whole chunk, dy's
 * vectors loaded once per pixel and the input broadcast (the pointwise
 * impl's pwk_dw with a 2-D walk instead of a contiguous column row).
 * Other CPUs take the same code through target_clones (correct, not
 * tuned). */
#include "conv_strip.h"
#include "nn_simd.h"

#define AI static inline __attribute__((always_inline))

AI void xdw_body(const int NMV, const int NC, const float *dyT, int64_t ldt, const float *const *xr, int64_t W,
                 int64_t rows, int64_t Wo, float *out, int64_t ldo) {
    v16 acc[4][PW_DWC];
#pragma GCC unroll 4
    for (int j = 0; j < NMV; j++)
#pragma GCC unroll 6
        for (int c = 0; c < NC; c++) acc[j][c] = (v16){0};
    for (int64_t r = 0; r < rows; r++) {
        const float *d = dyT + r * Wo * ldt;
        int64_t xo = r * W;
        for (int64_t ow = 0; ow < Wo; ow++) {
            v16 dv[4];
#pragma GCC unroll 4
            for (int j = 0; j < NMV; j++) dv[j] = ld16(d + ow * ldt + 16 * j);
#pragma GCC unroll 6
            for (int c = 0; c < NC; c++) {
                float s = xr[c][xo + ow];
#pragma GCC unroll 4
                for (int j = 0; j < NMV; j++) acc[j][c] += s * dv[j];
            }
        }
    }
#pragma GCC unroll 6
    for (int c = 0; c < NC; c++)
#pragma GCC unroll 4
        for (int j = 0; j < NMV; j++) {
            float *o = out + c * ldo + 16 * j;
            st16(o, ld16(o) + acc[j][c]);
        }
}

#define X1(NMV, NC) case (NMV) * 8 + (NC): xdw_body(NMV, NC, dyT, ldt, xr, W, rows, Wo, out, ldo); break;
#define XROW(NMV) X1(NMV, 1) X1(NMV, 2) X1(NMV, 3) X1(NMV, 4) X1(NMV, 5) X1(NMV, 6)

TC static void xdw_any(int nmv, int nc, const float *dyT, int64_t ldt, const float *const *xr, int64_t W,
                       int64_t rows, int64_t Wo, float *out, int64_t ldo) {
    switch (nmv * 8 + nc) {
        XROW(1) XROW(2) XROW(3) XROW(4)
        default: break;
    }
}

void sbk_dw_direct(int nmv, int nc, const float *dyT, int64_t ldt, const float *const *xr, int64_t W, int64_t rows,
                   int64_t Wo, float *out, int64_t ldo) {
    xdw_any(nmv, nc, dyT, ldt, xr, W, rows, Wo, out, ldo);
}

/* ------------------------------------------------ vectors along pixels
 * acc[(m0 + i)*ldm + t*16 + l] += sum over v < nv of
 *     dyp[i*ldd + 16v + l] * xs[t*tstep + 16v + l]
 * for i < mb (1..4), t < tb (1..6), l < 16: dy of mb output channels laid
 * out at the input's row pitch (columns past the output's width zero) and
 * tb taps of one kernel row, each a shifted view of the same input rows,
 * so every vector is a plain (unaligned) load.  The sums stay vectors
 * (16 lanes per weight), added across the chunks of a part and reduced
 * once at the end by the driver: no per-chunk horizontal sums. */
AI void pdw_body(const int MB, const int TB, const float *dyp, int64_t ldd, const float *xs, int64_t tstep, int64_t nv,
                 float *acc, int64_t ldm) {
    v16 s[4][6];
#pragma GCC unroll 4
    for (int i = 0; i < MB; i++)
#pragma GCC unroll 6
        for (int t = 0; t < TB; t++) s[i][t] = (v16){0};
    for (int64_t v = 0; v < nv; v++) {
        v16 d[4], x[6];
#pragma GCC unroll 4
        for (int i = 0; i < MB; i++) d[i] = ld16(dyp + i * ldd + 16 * v);
#pragma GCC unroll 6
        for (int t = 0; t < TB; t++) x[t] = ld16(xs + t * tstep + 16 * v);
#pragma GCC unroll 4
        for (int i = 0; i < MB; i++)
#pragma GCC unroll 6
            for (int t = 0; t < TB; t++) s[i][t] += d[i] * x[t];
    }
#pragma GCC unroll 4
    for (int i = 0; i < MB; i++)
#pragma GCC unroll 6
        for (int t = 0; t < TB; t++) {
            float *o = acc + i * ldm + 16 * t;
            st16(o, ld16(o) + s[i][t]);
        }
}

#define P1(MB, TB) case (MB) * 8 + (TB): pdw_body(MB, TB, dyp, ldd, xs, tstep, nv, acc, ldm); break;
#define PROW(MB) P1(MB, 1) P1(MB, 2) P1(MB, 3) P1(MB, 4) P1(MB, 5) P1(MB, 6)

TC static void pdw_any(int mb, int tb, const float *dyp, int64_t ldd, const float *xs, int64_t tstep, int64_t nv,
                       float *acc, int64_t ldm) {
    switch (mb * 8 + tb) {
        PROW(1) PROW(2) PROW(3) PROW(4)
        default: break;
    }
}

void sbk_dw_pitch(int mb, int tb, const float *dyp, int64_t ldd, const float *xs, int64_t tstep, int64_t nv, float *acc,
                  int64_t ldm) {
    pdw_any(mb, tb, dyp, ldd, xs, tstep, nv, acc, ldm);
}

/* dst[m*ldd + r*W + c] = src[m*lds + r*Wo + c] for c < Wo, zero for
 * Wo <= c < W (rows before the last) and from (rows-1)*W + Wo up to Lp:
 * dy at the input's row pitch for sbk_dw_pitch.  db (may be NULL):
 * db[m] += the sum of dst's row (16 float lanes over its Lp / 16 vectors,
 * the zeros exact, then the lanes in double), so dy is read once. */
TC static void pitch_any(const float *src, int64_t lds, int64_t Mg, int64_t rows, int64_t Wo, int64_t W, int64_t Lp,
                         float *dst, int64_t ldd, double *db) {
    for (int64_t m = 0; m < Mg; m++) {
        float *d = dst + m * ldd;
        const float *s = src + m * lds;
        for (int64_t r = 0; r < rows; r++) {
            float *dr = d + r * W;
            const float *sr = s + r * Wo;
            for (int64_t c = 0; c < Wo; c++) dr[c] = sr[c];
            if (r + 1 < rows)
                for (int64_t c = Wo; c < W; c++) dr[c] = 0.0f;
        }
        for (int64_t c = (rows - 1) * W + Wo; c < Lp; c++) d[c] = 0.0f;
        if (!db) continue;
        v16 a = (v16){0};
        for (int64_t p = 0; p < Lp; p += 16) a += ld16(d + p);
        float t[16];
        st16(t, a);
        double sum = 0;
        for (int l = 0; l < 16; l++) sum += t[l];
        db[m] += sum;
    }
}

void sbk_pitch_rows(const float *src, int64_t lds, int64_t Mg, int64_t rows, int64_t Wo, int64_t W, int64_t Lp,
                    float *dst, int64_t ldd, double *db) {
    pitch_any(src, lds, Mg, rows, Wo, W, Lp, dst, ldd, db);
}

/* db[m] += sum_{p<np} src[m*lds + p]: 16 float lanes over the whole
 * vectors, the lanes added in double in order, then the tail. */
TC static void rowsum_any(const float *src, int64_t lds, int64_t Mg, int64_t np, double *db) {
    for (int64_t m = 0; m < Mg; m++) {
        const float *r = src + m * lds;
        v16 a = (v16){0};
        int64_t p = 0;
        for (; p + 16 <= np; p += 16) a += ld16(r + p);
        float t[16];
        st16(t, a);
        double s = 0;
        for (int l = 0; l < 16; l++) s += t[l];
        for (; p < np; p++) s += r[p];
        db[m] += s;
    }
}

void sbk_rowsums(const float *src, int64_t lds, int64_t Mg, int64_t np, double *db) {
    rowsum_any(src, lds, Mg, np, db);
}
