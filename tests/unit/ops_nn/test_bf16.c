/* test_bf16.c — the bf16 FullyConnected and Convolution impls of ops-nn
 * against float64 loops over the same bf16 inputs (forward, data / weight /
 * bias gradients, req add), on every kernel path this CPU can run
 * (MXP_BF16_KERNEL=fp32 / avx512f / avx512bf16 / amx).  A path the CPU
 * lacks (read here with CPUID, independently of the pack) must be refused
 * with a message naming it; it is then skipped with the reason printed.
 * Paths are compared with each other too.
 *
 * Tolerance: inputs are exact bf16 values, so the only errors are fp32
 * accumulation (~1e-6 relative) and the final rounding of each stored
 * value to bf16 (at most 2^-9 relative): elementwise |got - ref| must be
 * within 2^-8·|ref| + 1e-5·Σ|terms|. */
#include <cpuid.h>
#include <stdlib.h>
#include <string.h>
#include "nn_test_util.h"
#include "conv_ref_bf16.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); unsetenv("MXP_BF16_KERNEL"); }

static mxp_shape nn_shape(int nd, const int64_t *d) {
    mxp_shape s; memset(&s, 0, sizeof s); s.ndim = nd;
    for (int i = 0; i < nd; i++) s.dims[i] = d[i];
    return s;
}

static const char *const paths[] = {"fp32", "avx512f", "avx512bf16", "amx"};

/* Independent CPUID reading of what each path needs. */
static int cpu_has(int path) {
    unsigned a, b, c, d, b7 = 0, d7 = 0, a71 = 0;
    if (path == 0) return 1;
    if (!__get_cpuid_count(7, 0, &a, &b7, &c, &d7)) return 0;
    if (!__get_cpuid_count(7, 1, &a71, &b, &c, &d)) a71 = 0;
    if (path == 1) return (b7 >> 16) & 1;
    if (path == 2) return ((b7 >> 16) & 1) && ((a71 >> 5) & 1);
    return ((d7 >> 22) & 1) && ((d7 >> 24) & 1);
}

static double bf(const uint16_t *p, int64_t i) {
    uint32_t u = (uint32_t)p[i] << 16; float f; memcpy(&f, &u, 4); return f;
}
/* Random bf16 values in [lo, hi) by truncation (any bf16 value will do). */
static void fill(void *p, int64_t n, uint64_t *rng, double lo, double hi) {
    for (int64_t i = 0; i < n; i++) {
        float f = (float)fh_rand(rng, lo, hi); uint32_t u; memcpy(&u, &f, 4);
        ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
    }
}

/* ref[i] with magnitude bound mag[i] (Σ|terms|) against got (bf16). */
static void check_close(const char *what, const char *path, const void *got, const double *ref,
                        const double *mag, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double g = bf(got, i), tol = fabs(ref[i]) / 256.0 + 1e-5 * mag[i] + 1e-30;
        cr_assert(fabs(g - ref[i]) <= tol, "%s [%s] element %lld: got %.9g, reference %.9g (tol %.3g)", what, path,
                  (long long)i, g, ref[i], tol);
    }
}

/* Sets MXP_BF16_KERNEL; returns 0 (after printing why) when the path must
 * be skipped, having checked that the pack refuses it by name. */
static int use_path(int p, fh_node *n) {
    setenv("MXP_BF16_KERNEL", paths[p], 1);
    if (cpu_has(p)) return 1;
    int rc = fh_node_forward(n, 1, NULL);
    cr_assert_eq(rc, MXP_EUNSUPPORTED, "path %s: the CPU lacks it, yet forward returned %d", paths[p], rc);
    cr_assert(strstr(fh_error(), paths[p]) && strstr(fh_error(), "lacks"), "%s", fh_error());
    printf("test_bf16: path %s skipped: %s\n", paths[p], fh_error());
    return 0;
}

/* ------------------------------------------------------------------ FC */
static void fc_case(const char *kw, int64_t R, int64_t K, int64_t H, int flatten3) {
    uint16_t *first[4] = {NULL};
    int64_t nfirst[4] = {0};
    for (int p = 0; p < 4; p++) {
        fh_node n;
        cr_assert_eq(fh_node_init(&n, pack, "FullyConnected", "bf16", kw, MXP_DTYPE_BF16), 0, "%s", fh_error());
        int64_t d3[3] = {R, K / 3, 3};
        n.in_shape[0] = flatten3 ? nn_shape(3, d3) : nn_shape(2, (int64_t[]){R, K});
        cr_assert_eq(fh_node_infer(&n), 0, "%s", fh_error());
        cr_assert_eq(fh_node_alloc(&n, 1), 1, "%s", n.reason);
        int nobias = n.n_in == 2;
        uint64_t r = 7;
        for (uint32_t k = 0; k < n.n_in; k++) fill(n.in[k], fh_shape_numel(&n.in_shape[k]), &r, -1, 1);
        fill(n.out_grad[0], R * H, &r, -1, 1);
        if (!use_path(p, &n)) { fh_node_free(&n); continue; }
        const uint16_t *x = n.in[0], *w = n.in[1], *b = nobias ? NULL : n.in[2], *dy = n.out_grad[0];
        double *ref = calloc((size_t)(R * K + H * K + R * H + H) * 2, sizeof(double));
        double *mag = ref + (R * K + H * K + R * H + H);
        double *ry = ref, *rdx = ry + R * H, *rdw = rdx + R * K, *rdb = rdw + H * K;
        double *my = mag, *mdx = my + R * H, *mdw = mdx + R * K, *mdb = mdw + H * K;
        for (int64_t i = 0; i < R; i++) for (int64_t j = 0; j < H; j++) {
            double s = b ? bf(b, j) : 0, m = fabs(s);
            for (int64_t k = 0; k < K; k++) { double t = bf(x, i * K + k) * bf(w, j * K + k); s += t; m += fabs(t); }
            ry[i * H + j] = s; my[i * H + j] = m;
        }
        for (int64_t i = 0; i < R; i++) for (int64_t k = 0; k < K; k++) for (int64_t j = 0; j < H; j++) {
            double t = bf(dy, i * H + j) * bf(w, j * K + k);
            rdx[i * K + k] += t; mdx[i * K + k] += fabs(t);
            double u = bf(dy, i * H + j) * bf(x, i * K + k);
            rdw[j * K + k] += u; mdw[j * K + k] += fabs(u);
        }
        for (int64_t i = 0; i < R; i++) for (int64_t j = 0; j < H; j++) { rdb[j] += bf(dy, i * H + j); mdb[j] += fabs(bf(dy, i * H + j)); }
        cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
        check_close("fc forward", paths[p], n.out[0], ry, my, R * H);
        cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
        check_close("fc dx", paths[p], n.in_grad[0], rdx, mdx, R * K);
        check_close("fc dW", paths[p], n.in_grad[1], rdw, mdw, H * K);
        if (b) check_close("fc db", paths[p], n.in_grad[2], rdb, mdb, H);
        /* req add: out = bf16(out + y) */
        uint16_t *prev = malloc((size_t)(R * H) * 2); memcpy(prev, n.out[0], (size_t)(R * H) * 2);
        int32_t add[1] = {MXP_REQ_ADD};
        cr_assert_eq(fh_node_forward(&n, 1, add), 0, "%s", fh_error());
        for (int64_t i = 0; i < R * H; i++) { my[i] = 2 * my[i] + fabs(bf(prev, i)); ry[i] += bf(prev, i); }
        check_close("fc forward (req add)", paths[p], n.out[0], ry, my, R * H);
        /* the paths agree with each other: forward within two bf16 steps */
        fh_node_forward(&n, 1, NULL);
        first[p] = malloc((size_t)(R * H) * 2); memcpy(first[p], n.out[0], (size_t)(R * H) * 2); nfirst[p] = R * H;
        for (int q = 0; q < p; q++) if (first[q])
            for (int64_t i = 0; i < R * H; i++)
                cr_assert(fabs(bf(first[q], i) - bf(first[p], i)) <= fabs(bf(first[q], i)) / 128 + 1e-5 * my[i] / 2,
                          "paths %s and %s differ at %lld: %g vs %g", paths[q], paths[p], (long long)i, bf(first[q], i), bf(first[p], i));
        free(prev); free(ref);
        fh_node_free(&n);
    }
    for (int p = 0; p < 4; p++) free(first[p]);
    (void)nfirst;
}

Test(bf16, fc_against_float64, .init = setup, .fini = teardown) {
    fc_case("num_hidden=41", 37, 75, 41, 0);          /* ragged tiles and panels   */
    fc_case("num_hidden=9 no_bias=True", 5, 12, 9, 1); /* flatten of a 3-D input   */
    fc_case("num_hidden=70", 130, 300, 70, 0);        /* several row chunks        */
}

/* ------------------------------------------------------------ Convolution */
typedef struct cgeo { int64_t N, C, H, W, M, k, s, p, G, d; } cgeo; /* d: dilation, 0 = 1 */

static void conv_case(cgeo c, int nobias) {
    char kw[200];
    if (!c.d) c.d = 1;
    snprintf(kw, sizeof kw, "kernel=(%lld,%lld) stride=(%lld,%lld) pad=(%lld,%lld) dilate=(%lld,%lld) num_filter=%lld num_group=%lld%s",
             (long long)c.k, (long long)c.k, (long long)c.s, (long long)c.s, (long long)c.p, (long long)c.p,
             (long long)c.d, (long long)c.d, (long long)c.M, (long long)c.G, nobias ? " no_bias=True" : "");
    for (int p = 0; p < 4; p++) {
        fh_node n;
        cr_assert_eq(fh_node_init(&n, pack, "Convolution", "bf16", kw, MXP_DTYPE_BF16), 0, "%s", fh_error());
        n.in_shape[0] = nn_shape(4, (int64_t[]){c.N, c.C, c.H, c.W});
        cr_assert_eq(fh_node_infer(&n), 0, "%s", fh_error());
        cr_assert_eq(fh_node_alloc(&n, 1), 1, "%s", n.reason);
        int64_t Ho = n.out_shape[0].dims[2], Wo = n.out_shape[0].dims[3], Cg = c.C / c.G;
        int64_t ny = c.N * c.M * Ho * Wo, nx = c.N * c.C * c.H * c.W, nw = c.M * Cg * c.k * c.k;
        uint64_t r = 3;
        for (uint32_t k = 0; k < n.n_in; k++) fill(n.in[k], fh_shape_numel(&n.in_shape[k]), &r, -1, 1);
        fill(n.out_grad[0], ny, &r, -1, 1);
        if (!use_path(p, &n)) { fh_node_free(&n); continue; }
        const uint16_t *x = n.in[0], *w = n.in[1], *b = nobias ? NULL : n.in[2], *dy = n.out_grad[0];
        double *ref = calloc((size_t)(ny + nx + nw + c.M) * 2, sizeof(double)), *mag = ref + ny + nx + nw + c.M;
        double *ry = ref, *rdx = ry + ny, *rdw = rdx + nx, *rdb = rdw + nw;
        double *my = mag, *mdx = my + ny, *mdw = mdx + nx, *mdb = mdw + nw;
        conv_ref_bf16(&(conv_ref_geom){c.N, c.C, c.H, c.W, c.M, c.k, c.s, c.p, c.G, c.d, Ho, Wo}, x, w, b, dy, ref, mag);
        cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
        check_close("conv forward", paths[p], n.out[0], ry, my, ny);
        cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
        check_close("conv dx", paths[p], n.in_grad[0], rdx, mdx, nx);
        check_close("conv dW", paths[p], n.in_grad[1], rdw, mdw, nw);
        if (b) check_close("conv db", paths[p], n.in_grad[2], rdb, mdb, c.M);
        /* req add on every gradient: grad = bf16(grad + g) */
        uint16_t *prev = malloc((size_t)nw * 2); memcpy(prev, n.in_grad[1], (size_t)nw * 2);
        int32_t add[3] = {MXP_REQ_ADD, MXP_REQ_ADD, MXP_REQ_ADD};
        cr_assert_eq(fh_node_backward(&n, add), 0, "%s", fh_error());
        for (int64_t i = 0; i < nw; i++) { mdw[i] = 2 * mdw[i] + fabs(bf(prev, i)); rdw[i] += bf(prev, i); }
        check_close("conv dW (req add)", paths[p], n.in_grad[1], rdw, mdw, nw);
        free(prev); free(ref);
        fh_node_free(&n);
    }
}

Test(bf16, conv_against_float64, .init = setup, .fini = teardown) {
    conv_case((cgeo){3, 5, 9, 9, 7, 3, 1, 1, 1, 0}, 0);/* 3x3 pad 1                        */
    conv_case((cgeo){2, 4, 11, 10, 6, 3, 2, 0, 2, 0}, 0);/* stride 2, two groups             */
    conv_case((cgeo){9, 20, 12, 12, 50, 5, 1, 0, 1, 0}, 1); /* LeNet conv2 shape, 9 samples: chunks */
    /* stride 1 takes the vector im2col/col2im: rows wider than one vector
     * (Wo 37 > 32 bf16, > 16 fp32), padding wider than the kernel reach on
     * the left edge, dilation */
    conv_case((cgeo){2, 3, 5, 37, 4, 3, 1, 1, 1, 0}, 0);
    conv_case((cgeo){2, 2, 9, 11, 5, 3, 1, 3, 1, 2}, 0); /* dilation 2, pad 3: edge rows all zero */
    conv_case((cgeo){3, 4, 8, 8, 6, 3, 1, 0, 2, 2}, 1);  /* dilation 2, two groups, no pad */
    /* stride 2 through the permuting im2col: one 17-value row per vector
     * with padding; ResNet's 1x1 stride-2 projection (4 rows per vector) */
    conv_case((cgeo){2, 3, 20, 33, 4, 3, 2, 1, 1, 0}, 0);
    conv_case((cgeo){2, 4, 8, 8, 6, 1, 2, 0, 1, 0}, 1);
    /* many samples per GEMM: K·P = 18·25 small, so blocks of 16 samples;
     * 150 samples in 8 chunks of 18-19: each chunk is a block of 16 and a
     * ragged one (3 samples: an odd number of columns, 75) */
    conv_case((cgeo){150, 2, 5, 5, 3, 3, 1, 1, 1, 0}, 0);
    conv_case((cgeo){20, 1, 28, 28, 20, 5, 1, 0, 1, 0}, 0); /* LeNet conv1: blocks of 9, 9, 2 */
}

/* The same inputs give bit-identical outputs and gradients whether
 * parallel_for runs one or two chunks: blocks and gradient chunks depend on
 * the geometry only. */
Test(bf16, conv_same_bits_for_any_thread_count, .init = setup, .fini = teardown) {
    uint16_t *got[2][4];
    int64_t len[4];
    for (int t = 0; t < 2; t++) {
        fh_set_threads(t + 1);
        fh_node n;
        cr_assert_eq(fh_node_init(&n, pack, "Convolution", "bf16", "kernel=(3,3) pad=(1,1) num_filter=6", MXP_DTYPE_BF16), 0,
                     "%s", fh_error());
        n.in_shape[0] = nn_shape(4, (int64_t[]){37, 3, 7, 6});
        cr_assert_eq(fh_node_infer(&n), 0, "%s", fh_error());
        cr_assert_eq(fh_node_alloc(&n, 1), 1, "%s", n.reason);
        uint64_t r = 5;
        for (uint32_t k = 0; k < n.n_in; k++) fill(n.in[k], fh_shape_numel(&n.in_shape[k]), &r, -1, 1);
        fill(n.out_grad[0], fh_shape_numel(&n.out_shape[0]), &r, -1, 1);
        cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
        cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
        void *res[4] = {n.out[0], n.in_grad[0], n.in_grad[1], n.in_grad[2]};
        mxp_shape *sh[4] = {&n.out_shape[0], &n.in_shape[0], &n.in_shape[1], &n.in_shape[2]};
        for (int i = 0; i < 4; i++) {
            len[i] = fh_shape_numel(sh[i]);
            got[t][i] = malloc((size_t)len[i] * 2);
            memcpy(got[t][i], res[i], (size_t)len[i] * 2);
        }
        fh_node_free(&n);
    }
    fh_set_threads(2); /* nn_load's setting */
    for (int i = 0; i < 4; i++) {
        cr_assert(memcmp(got[0][i], got[1][i], (size_t)len[i] * 2) == 0, "result %d differs between 1 and 2 threads", i);
        free(got[0][i]); free(got[1][i]);
    }
}

Test(bf16, refuses_other_dtypes_and_bad_kernel_names, .init = setup, .fini = teardown) {
    fh_node n;
    cr_assert_eq(fh_node_init(&n, pack, "FullyConnected", "bf16", "num_hidden=4", MXP_DTYPE_F32), 0);
    n.in_shape[0] = nn_shape(2, (int64_t[]){2, 3});
    cr_assert_eq(fh_node_infer(&n), 0);
    cr_assert_eq(fh_node_alloc(&n, 0), 0);
    cr_assert(strstr(n.reason, "bfloat16 only"), "%s", n.reason);
    fh_node_free(&n);
    cr_assert_eq(fh_node_init(&n, pack, "FullyConnected", "bf16", "num_hidden=4", MXP_DTYPE_BF16), 0);
    n.in_shape[0] = nn_shape(2, (int64_t[]){2, 3});
    cr_assert_eq(fh_node_infer(&n), 0);
    cr_assert_eq(fh_node_alloc(&n, 0), 1);
    setenv("MXP_BF16_KERNEL", "avx9000", 1);
    cr_assert_eq(fh_node_forward(&n, 0, NULL), MXP_EINVAL);
    cr_assert(strstr(fh_error(), "MXP_BF16_KERNEL='avx9000'"), "%s", fh_error());
    fh_node_free(&n);
}
