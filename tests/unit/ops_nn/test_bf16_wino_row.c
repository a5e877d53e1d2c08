/* test_bf16_wino_row.c — Convolution impl "bf16_wino_row" (3x3 stride 1,
 * Winograd F(2,3) along rows, avx512bf16) against the float64 reference on
 * the same bf16 inputs: forward, data / weight / bias gradients, req add,
 * odd channel counts and widths (a dropped last column), pads 0-2, rows of
 * more than 16 column pairs; 1 and 2 threads give the same bits.  On a
 * CPU without avx512_bf16 (CPUID) the impl must refuse, naming the path.
 *
 * Tolerance.  The bias gradient sums exact bf16 values in fp32:
 * 2^-8·|ref| + 1e-5·Σ|terms|, as in test_bf16_conv3x3.c.  The
 * forward and data gradient round each transformed input Vb (a sum or
 * difference of two inputs) and filter row Ub (g0, (g0±g1+g2)/2, g2) to
 * bf16, 2^-9 relative each, so each of the two products per output and
 * kernel row is off by at most 2^-8·|Ub||Vb| <= 2^-8·A·D, where A = Σ_j |g_j|
 * of the kernel row and D = Σ |d| of the four inputs of the column pair:
 *   |got - ref| <= 2^-8·|ref| + 2^-7·Σ_{c,i} A·D + 1e-5·Σ|terms|
 * (the final rounding, the transforms' roundings, fp32 accumulation).  The
 * weight gradient rounds dM1 = dy0+dy1, dM2 = dy0-dy1 and every Vb, so each
 * product dMb·Vb is off by at most 2^-7·(|dy0|+|dy1|)·D, and each dW
 * element combines the four frequencies with |coefficients| summing to at
 * most 2 (dW0 = dU0 + (dU1+dU2)/2):
 *   |got - ref| <= 2^-8·|ref| + 2^-6·Σ_{n,oh,k} (|dy0|+|dy1|)·D + 1e-5·Σ|terms|
 * with D over the column pair's four inputs in kernel row i.  Both bounds
 * are computed here from the inputs, independently of the impl. */
#include <stdlib.h>
#include <string.h>
#include "nn_test_util.h"
#include "conv_ref_bf16.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); unsetenv("MXP_BF16_KERNEL"); fh_set_threads(2); }

/* extra[i]: the transforms' rounding bound (0 for exact-product results). */
static void check_close(const char *what, const char *kw, const void *got, const double *ref, const double *mag,
                        const double *extra, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double g = bf16_at(got, i), tol = fabs(ref[i]) / 256.0 + 1e-5 * mag[i] + (extra ? extra[i] : 0) + 1e-30;
        cr_assert(fabs(g - ref[i]) <= tol, "%s (%s) element %lld: got %.9g, reference %.9g (tol %.3g)", what, kw,
                  (long long)i, g, ref[i], tol);
    }
}

/* bound[n][o][oh][ow] = 2^-7 Σ_c Σ_i A(o, c, i)·D(c, oh + i, column pair of
 * ow) for a 3x3 stride-1 convolution of in[N][Ci][H][W] at pad p into
 * Co x Ho x Wo; A from w (OIHW, Co x Ci) or, flip, from the forward
 * kernel W[c][o] rotated (row 2 - i of W[c][o]). */
static void wino_bound(int64_t N, int64_t Ci, int64_t H, int64_t W, int64_t Co, int64_t p, const uint16_t *in,
                       const uint16_t *w, int flip, double *bound) {
    int64_t Ho = H + 2 * p - 2, Wo = W + 2 * p - 2;
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < Co; o++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    double s = 0;
                    for (int64_t c = 0; c < Ci; c++)
                        for (int64_t i = 0; i < 3; i++) {
                            double A = 0, D = 0;
                            for (int64_t j = 0; j < 3; j++)
                                A += fabs(flip ? bf16_at(w, ((c * Co + o) * 3 + 2 - i) * 3 + j) : bf16_at(w, ((o * Ci + c) * 3 + i) * 3 + j));
                            int64_t h = oh + i - p;
                            if (h < 0 || h >= H) continue;
                            for (int64_t j = 0; j < 4; j++) {
                                int64_t col = 2 * (ow / 2) + j - p;
                                if (col >= 0 && col < W) D += fabs(bf16_at(in, ((n * Ci + c) * H + h) * W + col));
                            }
                            s += A * D;
                        }
                    bound[((n * Co + o) * Ho + oh) * Wo + ow] = s / 128.0;
                }
}

/* bound[o][c][i][j] (same for j = 0..2) = 2^-6 Σ_n Σ_oh Σ_k (|dy0|+|dy1|)·D
 * for the forward convolution of x[N][C][H][W] at pad p (dy: N x M x Ho x Wo;
 * dy0, dy1 = dy[..][oh][2k], [2k+1], the latter zero past Wo; D = Σ|x| of
 * padded row oh + i, columns 2k..2k+3). */
static void wgrad_bound(int64_t N, int64_t C, int64_t H, int64_t W, int64_t M, int64_t p, const uint16_t *x,
                        const uint16_t *dy, double *bound) {
    int64_t Ho = H + 2 * p - 2, Wo = W + 2 * p - 2, K = (Wo + 1) / 2;
    for (int64_t o = 0; o < M; o++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < 3; i++) {
                double s = 0;
                for (int64_t n = 0; n < N; n++)
                    for (int64_t oh = 0; oh < Ho; oh++) {
                        int64_t h = oh + i - p;
                        if (h < 0 || h >= H) continue;
                        for (int64_t k = 0; k < K; k++) {
                            const uint16_t *dr = dy + ((n * M + o) * Ho + oh) * Wo;
                            double g = fabs(bf16_at(dr, 2 * k)) + (2 * k + 1 < Wo ? fabs(bf16_at(dr, 2 * k + 1)) : 0);
                            double D = 0;
                            for (int64_t j = 0; j < 4; j++) {
                                int64_t col = 2 * k + j - p;
                                if (col >= 0 && col < W) D += fabs(bf16_at(x, ((n * C + c) * H + h) * W + col));
                            }
                            s += g * D;
                        }
                    }
                for (int64_t j = 0; j < 3; j++) bound[((o * C + c) * 3 + i) * 3 + j] = s / 64.0;
            }
}

typedef struct cgeo { int64_t N, C, H, W, M, p; } cgeo;

static int node_for(fh_node *n, cgeo c, int nobias, const char *more, char *kw, size_t kwn) {
    snprintf(kw, kwn, "kernel=(3,3) pad=(%lld,%lld) num_filter=%lld%s%s", (long long)c.p, (long long)c.p,
             (long long)c.M, nobias ? " no_bias=True" : "", more);
    cr_assert_eq(fh_node_init(n, pack, "Convolution", "bf16_wino_row", kw, MXP_DTYPE_BF16), 0, "%s", fh_error());
    n->in_shape[0] = (mxp_shape){.ndim = 4, .dims = {c.N, c.C, c.H, c.W}};
    cr_assert_eq(fh_node_infer(n), 0, "%s", fh_error());
    return fh_node_alloc(n, 1);
}

static uint16_t *run_all(fh_node *n, int64_t ny, int64_t nx, int64_t nw, int64_t nb) {
    uint16_t *r = malloc((size_t)(ny + nx + nw + nb) * 2);
    cr_assert_eq(fh_node_forward(n, 1, NULL), 0, "%s", fh_error());
    cr_assert_eq(fh_node_backward(n, NULL), 0, "%s", fh_error());
    memcpy(r, n->out[0], (size_t)ny * 2);
    memcpy(r + ny, n->in_grad[0], (size_t)nx * 2);
    memcpy(r + ny + nx, n->in_grad[1], (size_t)nw * 2);
    if (nb) memcpy(r + ny + nx + nw, n->in_grad[2], (size_t)nb * 2);
    return r;
}

static void conv_case(cgeo c, int nobias) {
    char kw[200];
    fh_node n;
    int ok = node_for(&n, c, nobias, "", kw, sizeof kw);
    if (!cpu_has_avx512bf16()) {
        cr_assert_eq(ok, 0, "bf16_wino_row accepted %s on a CPU without avx512_bf16", kw);
        cr_assert(strstr(n.reason, "avx512bf16"), "%s", n.reason);
        printf("test_bf16_wino_row: skipped (%s)\n", n.reason);
        fh_node_free(&n);
        return;
    }
    cr_assert_eq(ok, 1, "%s: %s", kw, n.reason);
    int64_t Ho = n.out_shape[0].dims[2], Wo = n.out_shape[0].dims[3];
    int64_t ny = c.N * c.M * Ho * Wo, nx = c.N * c.C * c.H * c.W, nw = c.M * c.C * 9, nb = nobias ? 0 : c.M;
    uint64_t r = 11 + (uint64_t)c.W;
    for (uint32_t k = 0; k < n.n_in; k++) bf16_fill_uniform(n.in[k], fh_shape_numel(&n.in_shape[k]), &r);
    bf16_fill_uniform(n.out_grad[0], ny, &r);
    const uint16_t *x = n.in[0], *w = n.in[1], *b = nobias ? NULL : n.in[2], *dy = n.out_grad[0];
    double *ref = calloc((size_t)(ny + nx + nw + c.M) * 2 + (size_t)(ny + nx + nw), sizeof(double));
    double *mag = ref + ny + nx + nw + c.M, *ext = mag + ny + nx + nw + c.M;
    double *ry = ref, *rdx = ry + ny, *rdw = rdx + nx, *rdb = rdw + nw;
    double *my = mag, *mdx = my + ny, *mdw = mdx + nx, *mdb = mdw + nw, *ey = ext, *edx = ext + ny, *edw = edx + nx;
    conv_ref_bf16(&(conv_ref_geom){c.N, c.C, c.H, c.W, c.M, 3, 1, c.p, 1, 1, Ho, Wo}, x, w, b, dy, ref, mag);
    wino_bound(c.N, c.C, c.H, c.W, c.M, c.p, x, w, 0, ey);
    wino_bound(c.N, c.M, Ho, Wo, c.C, 2 - c.p, dy, w, 1, edx);
    wgrad_bound(c.N, c.C, c.H, c.W, c.M, c.p, x, dy, edw);
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
    check_close("forward", kw, n.out[0], ry, my, ey, ny);
    cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
    check_close("dx", kw, n.in_grad[0], rdx, mdx, edx, nx);
    check_close("dW", kw, n.in_grad[1], rdw, mdw, edw, nw);
    if (b) check_close("db", kw, n.in_grad[2], rdb, mdb, NULL, c.M);

    fh_set_threads(1);
    uint16_t *one = run_all(&n, ny, nx, nw, nb);
    fh_set_threads(2);
    uint16_t *two = run_all(&n, ny, nx, nw, nb);
    cr_assert(memcmp(one, two, (size_t)(ny + nx + nw + nb) * 2) == 0, "%s: 1 and 2 threads differ", kw);
    free(one); free(two);

    /* req add everywhere: out = bf16(out + value) */
    uint16_t *prev = malloc((size_t)(ny + nx + nw + nb) * 2);
    memcpy(prev, n.out[0], (size_t)ny * 2);
    cr_assert_eq(fh_node_forward(&n, 1, (int32_t[]){MXP_REQ_ADD}), 0, "%s", fh_error());
    for (int64_t i = 0; i < ny; i++) { my[i] = 2 * my[i] + fabs(bf16_at(prev, i)); ry[i] += bf16_at(prev, i); }
    check_close("forward (req add)", kw, n.out[0], ry, my, ey, ny);
    memcpy(prev, n.in_grad[0], (size_t)nx * 2);
    memcpy(prev + nx, n.in_grad[1], (size_t)nw * 2);
    if (nb) memcpy(prev + nx + nw, n.in_grad[2], (size_t)nb * 2);
    cr_assert_eq(fh_node_backward(&n, (int32_t[]){MXP_REQ_ADD, MXP_REQ_ADD, MXP_REQ_ADD}), 0, "%s", fh_error());
    for (int64_t i = 0; i < nx; i++) { mdx[i] = 2 * mdx[i] + fabs(bf16_at(prev, i)); rdx[i] += bf16_at(prev, i); }
    for (int64_t i = 0; i < nw; i++) { mdw[i] = 2 * mdw[i] + fabs(bf16_at(prev + nx, i)); rdw[i] += bf16_at(prev + nx, i); }
    for (int64_t i = 0; i < nb; i++) { mdb[i] = 2 * mdb[i] + fabs(bf16_at(prev + nx + nw, i)); rdb[i] += bf16_at(prev + nx + nw, i); }
    check_close("dx (req add)", kw, n.in_grad[0], rdx, mdx, edx, nx);
    check_close("dW (req add)", kw, n.in_grad[1], rdw, mdw, edw, nw);
    if (b) check_close("db (req add)", kw, n.in_grad[2], rdb, mdb, NULL, c.M);
    free(prev); free(ref);
    fh_node_free(&n);
}

Test(bf16_wino_row, small_and_odd_shapes, .init = setup, .fini = teardown) {
    conv_case((cgeo){3, 5, 9, 11, 7, 1}, 0);   /* odd C, M, W (Wo 11: last pair half dropped); bias */
    conv_case((cgeo){2, 3, 7, 6, 16, 0}, 1);   /* pad 0 (dx at pad 2)                                 */
    conv_case((cgeo){2, 4, 6, 5, 9, 2}, 0);    /* pad 2 (dx at pad 0)                                 */
    conv_case((cgeo){2, 1, 1, 1, 3, 1}, 0);    /* 1x1 map, one channel                                */
    conv_case((cgeo){2, 3, 5, 40, 18, 1}, 1);  /* 20 column pairs: a full 16 and a tail               */
    conv_case((cgeo){17, 3, 6, 6, 5, 1}, 0);   /* Wo 6: 3 column pairs (a 4th, zero, in dW); 2-3 samples per chunk */
    conv_case((cgeo){3, 3, 5, 4, 5, 1}, 0);    /* W 4, 8, pad 1: dW's transforms read the planes flat  */
    conv_case((cgeo){2, 5, 7, 8, 9, 1}, 1);
}

Test(bf16_wino_row, resnet20_shapes, .init = setup, .fini = teardown) {
    conv_case((cgeo){3, 16, 32, 32, 16, 1}, 1);
    conv_case((cgeo){4, 32, 16, 16, 32, 1}, 1);
    conv_case((cgeo){9, 64, 8, 8, 64, 1}, 0);
}

Test(bf16_wino_row, refuses_what_it_does_not_handle, .init = setup, .fini = teardown) {
    static const char *const cases[][2] = {
        {"kernel=(3,3) stride=(2,2) num_filter=4", "stride"},
        {"kernel=(1,1) num_filter=4", "3x3"},
        {"kernel=(3,3) dilate=(2,2) num_filter=4", "dilation"},
        {"kernel=(3,3) num_filter=4 num_group=2", "group"},
        {"kernel=(3,3) pad=(3,3) num_filter=4", "pad"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fh_node n;
        cr_assert_eq(fh_node_init(&n, pack, "Convolution", "bf16_wino_row", cases[i][0], MXP_DTYPE_BF16), 0, "%s",
                     fh_error());
        n.in_shape[0] = (mxp_shape){.ndim = 4, .dims = {2, 4, 9, 9}};
        cr_assert_eq(fh_node_infer(&n), 0, "%s", fh_error());
        cr_assert_eq(fh_node_alloc(&n, 0), 0, "%s accepted", cases[i][0]);
        cr_assert(strstr(n.reason, "bf16_wino_row") && strstr(n.reason, cases[i][1]), "%s: %s", cases[i][0], n.reason);
        fh_node_free(&n);
    }
    if (!cpu_has_avx512bf16()) return;
    fh_node n;
    char kw[200];
    setenv("MXP_BF16_KERNEL", "avx512f", 1);
    cr_assert_eq(node_for(&n, (cgeo){2, 4, 5, 5, 8, 1}, 1, "", kw, sizeof kw), 0);
    cr_assert(strstr(n.reason, "MXP_BF16_KERNEL=avx512f"), "%s", n.reason);
    fh_node_free(&n);
}
