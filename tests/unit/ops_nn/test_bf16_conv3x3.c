/* test_bf16_conv3x3.c — Convolution impl "bf16_direct" (3x3 / 1x1 at stride
 * 1 or 2 on the avx512bf16 path) against float64 loops over the same bf16
 * inputs: forward, data / weight / bias gradients, req add, odd channel
 * counts and map sizes (edge columns and rows), several sample chunks; the
 * results must not depend on the thread count (bit for bit).  On a CPU
 * without avx512_bf16 (read here with CPUID) the impl must refuse, naming
 * the path; the cases are then skipped with the reason printed.
 *
 * Tolerance as in test_bf16.c: inputs are exact bf16 values, so the errors
 * are fp32 accumulation (~1e-6 relative) and one rounding to bf16 (2^-9
 * relative): |got - ref| <= 2^-8·|ref| + 1e-5·Σ|terms|. */
#include <stdlib.h>
#include <string.h>
#include "nn_test_util.h"
#include "conv_ref_bf16.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); unsetenv("MXP_BF16_KERNEL"); fh_set_threads(2); }

static void check_close(const char *what, const char *kw, const void *got, const double *ref, const double *mag,
                        int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double g = bf16_at(got, i), tol = fabs(ref[i]) / 256.0 + 1e-5 * mag[i] + 1e-30;
        cr_assert(fabs(g - ref[i]) <= tol, "%s (%s) element %lld: got %.9g, reference %.9g (tol %.3g)", what, kw,
                  (long long)i, g, ref[i], tol);
    }
}

typedef struct cgeo { int64_t N, C, H, W, M, k, s, p; } cgeo;

static int node_for(fh_node *n, cgeo c, int nobias, char *kw, size_t kwn) {
    snprintf(kw, kwn, "kernel=(%lld,%lld) stride=(%lld,%lld) pad=(%lld,%lld) num_filter=%lld%s", (long long)c.k,
             (long long)c.k, (long long)c.s, (long long)c.s, (long long)c.p, (long long)c.p, (long long)c.M,
             nobias ? " no_bias=True" : "");
    cr_assert_eq(fh_node_init(n, pack, "Convolution", "bf16_direct", kw, MXP_DTYPE_BF16), 0, "%s", fh_error());
    n->in_shape[0] = (mxp_shape){.ndim = 4, .dims = {c.N, c.C, c.H, c.W}};
    cr_assert_eq(fh_node_infer(n), 0, "%s", fh_error());
    return fh_node_alloc(n, 1);
}

/* Runs forward + backward (req write) and returns copies of y, dx, dW, db. */
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
    int ok = node_for(&n, c, nobias, kw, sizeof kw);
    if (!cpu_has_avx512bf16()) {
        cr_assert_eq(ok, 0, "bf16_direct accepted %s on a CPU without avx512_bf16", kw);
        cr_assert(strstr(n.reason, "avx512bf16"), "%s", n.reason);
        printf("test_bf16_conv3x3: skipped (%s)\n", n.reason);
        fh_node_free(&n);
        return;
    }
    cr_assert_eq(ok, 1, "%s: %s", kw, n.reason);
    int64_t Ho = n.out_shape[0].dims[2], Wo = n.out_shape[0].dims[3];
    int64_t ny = c.N * c.M * Ho * Wo, nx = c.N * c.C * c.H * c.W, nw = c.M * c.C * c.k * c.k, nb = nobias ? 0 : c.M;
    uint64_t r = 5 + (uint64_t)c.H;
    for (uint32_t k = 0; k < n.n_in; k++) bf16_fill_uniform(n.in[k], fh_shape_numel(&n.in_shape[k]), &r);
    bf16_fill_uniform(n.out_grad[0], ny, &r);
    const uint16_t *x = n.in[0], *w = n.in[1], *b = nobias ? NULL : n.in[2], *dy = n.out_grad[0];
    double *ref = calloc((size_t)(ny + nx + nw + c.M) * 2, sizeof(double)), *mag = ref + ny + nx + nw + c.M;
    double *ry = ref, *rdx = ry + ny, *rdw = rdx + nx, *rdb = rdw + nw;
    double *my = mag, *mdx = my + ny, *mdw = mdx + nx, *mdb = mdw + nw;
    conv_ref_bf16(&(conv_ref_geom){c.N, c.C, c.H, c.W, c.M, c.k, c.s, c.p, 1, 1, Ho, Wo}, x, w, b, dy, ref, mag);
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
    check_close("forward", kw, n.out[0], ry, my, ny);
    cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
    check_close("dx", kw, n.in_grad[0], rdx, mdx, nx);
    check_close("dW", kw, n.in_grad[1], rdw, mdw, nw);
    if (b) check_close("db", kw, n.in_grad[2], rdb, mdb, c.M);

    /* one thread and two give the same bits */
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
    check_close("forward (req add)", kw, n.out[0], ry, my, ny);
    memcpy(prev, n.in_grad[0], (size_t)nx * 2);
    memcpy(prev + nx, n.in_grad[1], (size_t)nw * 2);
    if (nb) memcpy(prev + nx + nw, n.in_grad[2], (size_t)nb * 2);
    cr_assert_eq(fh_node_backward(&n, (int32_t[]){MXP_REQ_ADD, MXP_REQ_ADD, MXP_REQ_ADD}), 0, "%s", fh_error());
    for (int64_t i = 0; i < nx; i++) { mdx[i] = 2 * mdx[i] + fabs(bf16_at(prev, i)); rdx[i] += bf16_at(prev, i); }
    for (int64_t i = 0; i < nw; i++) { mdw[i] = 2 * mdw[i] + fabs(bf16_at(prev + nx, i)); rdw[i] += bf16_at(prev + nx, i); }
    for (int64_t i = 0; i < nb; i++) { mdb[i] = 2 * mdb[i] + fabs(bf16_at(prev + nx + nw, i)); rdb[i] += bf16_at(prev + nx + nw, i); }
    check_close("dx (req add)", kw, n.in_grad[0], rdx, mdx, nx);
    check_close("dW (req add)", kw, n.in_grad[1], rdw, mdw, nw);
    if (b) check_close("db (req add)", kw, n.in_grad[2], rdb, mdb, c.M);
    free(prev); free(ref);
    fh_node_free(&n);
}

Test(bf16_direct, small_and_odd_shapes, .init = setup, .fini = teardown) {
    conv_case((cgeo){3, 5, 9, 11, 7, 3, 1, 1}, 0);   /* odd C, M (< 8), W; bias             */
    conv_case((cgeo){2, 3, 7, 6, 16, 3, 1, 0}, 1);   /* pad 0                                */
    conv_case((cgeo){2, 4, 6, 5, 9, 3, 1, 2}, 0);    /* pad 2: outputs larger than input     */
    conv_case((cgeo){2, 4, 11, 10, 9, 3, 2, 1}, 1);  /* stride 2, odd H                      */
    conv_case((cgeo){3, 6, 9, 7, 20, 1, 2, 0}, 0);   /* 1x1 stride 2 (ResNet projection)     */
    conv_case((cgeo){2, 5, 5, 6, 3, 1, 1, 0}, 1);    /* 1x1 stride 1                         */
    conv_case((cgeo){1, 2, 1, 1, 4, 3, 2, 1}, 0);    /* 1x1 map                              */
    conv_case((cgeo){2, 3, 5, 40, 18, 3, 1, 1}, 1);  /* rows of 40: two 16-word dy blocks    */
}

Test(bf16_direct, resnet_like_shapes, .init = setup, .fini = teardown) {
    conv_case((cgeo){9, 16, 16, 16, 32, 3, 1, 1}, 1); /* two 16-output vectors, 8 chunks     */
    conv_case((cgeo){9, 16, 12, 12, 48, 3, 2, 1}, 1); /* stride 2, three vectors             */
    conv_case((cgeo){4, 3, 32, 32, 16, 3, 1, 1}, 1);  /* ResNet-20 conv0                    */
    conv_case((cgeo){3, 32, 8, 8, 64, 1, 2, 0}, 1);   /* projection, several channel blocks */
    conv_case((cgeo){2, 16, 32, 32, 32, 3, 2, 1}, 1); /* ResNet-20 stage-2 entry: 16-wide rows */
    conv_case((cgeo){2, 5, 34, 35, 16, 3, 2, 1}, 0);  /* stride 2, odd C, W: rows of 18        */
    conv_case((cgeo){2, 4, 9, 33, 16, 1, 2, 0}, 0);   /* 1x1 stride 2, rows of 17               */
}

/* Forcing another kernel path: supports() refuses, naming the variable,
 * and a node bound before the change still computes (the generic bf16
 * impl runs). */
Test(bf16_direct, forced_other_path, .init = setup, .fini = teardown) {
    if (!cpu_has_avx512bf16()) {
        printf("test_bf16_conv3x3: forced_other_path skipped (no avx512_bf16)\n");
        return;
    }
    char kw[200];
    fh_node n;
    setenv("MXP_BF16_KERNEL", "avx512f", 1);
    cr_assert_eq(node_for(&n, (cgeo){2, 4, 5, 5, 8, 3, 1, 1}, 1, kw, sizeof kw), 0);
    cr_assert(strstr(n.reason, "MXP_BF16_KERNEL=avx512f"), "%s", n.reason);
    fh_node_free(&n);
    unsetenv("MXP_BF16_KERNEL");
    cr_assert_eq(node_for(&n, (cgeo){2, 4, 5, 5, 8, 3, 1, 1}, 1, kw, sizeof kw), 1, "%s", n.reason);
    uint64_t r = 9;
    for (uint32_t k = 0; k < n.n_in; k++) bf16_fill_uniform(n.in[k], fh_shape_numel(&n.in_shape[k]), &r);
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
    uint16_t direct[200];
    memcpy(direct, n.out[0], sizeof direct);
    setenv("MXP_BF16_KERNEL", "avx512f", 1);
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
    for (int i = 0; i < 200; i++)
        cr_assert(fabs(bf16_at(direct, i) - bf16_at(n.out[0], i)) <= fabs(bf16_at(direct, i)) / 128 + 1e-4, "element %d: %g vs %g",
                  i, bf16_at(direct, i), bf16_at(n.out[0], i));
    fh_node_free(&n);
}

Test(bf16_direct, refuses_what_it_does_not_handle, .init = setup, .fini = teardown) {
    static const char *const cases[][2] = {
        {"kernel=(5,5) num_filter=4", "3x3"},
        {"kernel=(3,3) stride=(3,3) num_filter=4", "stride"},
        {"kernel=(3,3) dilate=(2,2) num_filter=4", "dilation"},
        {"kernel=(3,3) num_filter=4 num_group=2", "group"},
        {"kernel=(1,1) pad=(1,1) num_filter=4", "1x1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fh_node n;
        cr_assert_eq(fh_node_init(&n, pack, "Convolution", "bf16_direct", cases[i][0], MXP_DTYPE_BF16), 0, "%s",
                     fh_error());
        n.in_shape[0] = (mxp_shape){.ndim = 4, .dims = {2, 4, 9, 9}};
        cr_assert_eq(fh_node_infer(&n), 0, "%s", fh_error());
        cr_assert_eq(fh_node_alloc(&n, 0), 0, "%s accepted", cases[i][0]);
        cr_assert(strstr(n.reason, "bf16_direct") && strstr(n.reason, cases[i][1]), "%s: %s", cases[i][0], n.reason);
        fh_node_free(&n);
    }
    fh_node n;
    cr_assert_eq(fh_node_init(&n, pack, "Convolution", "bf16_direct", "kernel=(3,3) num_filter=4", MXP_DTYPE_F32), 0);
    n.in_shape[0] = (mxp_shape){.ndim = 4, .dims = {2, 4, 9, 9}};
    cr_assert_eq(fh_node_infer(&n), 0, "%s", fh_error());
    cr_assert_eq(fh_node_alloc(&n, 0), 0);
    cr_assert(strstr(n.reason, "bfloat16 only"), "%s", n.reason);
    fh_node_free(&n);
}
