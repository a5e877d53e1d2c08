/* test_fc.c — FullyConnected: forward vs a plain-loop float64 reference
 * (flatten True/False, no_bias), req add, shape inference, and float64
 * finite differences for data/weight/bias gradients. */
#include <string.h>
#include "nn_test_util.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

Test(fc, forward_reference, .init = setup, .fini = teardown) {
    const char *kws[] = {"num_hidden=7", "num_hidden=5 no_bias=True", "num_hidden=6 flatten=False"};
    for (int t = 0; t < 3; t++) for (int dti = 0; dti < 2; dti++) {
        int32_t dt = dti ? MXP_DTYPE_F64 : MXP_DTYPE_F32;
        fh_node n; int64_t d[3] = {4, 3, 5};
        tu_node(&n, pack, "FullyConnected", kws[t], dt, 3, d, 1);
        int flatten = t != 2, nobias = t == 1;
        int64_t H = n.out_shape[0].dims[n.out_shape[0].ndim - 1], K = flatten ? 15 : 5, R = flatten ? 4 : 12;
        cr_assert_eq(n.in_shape[1].dims[0], H); cr_assert_eq(n.in_shape[1].dims[1], K);
        cr_assert_eq(n.n_in, nobias ? 2u : 3u);
        if (!flatten) { cr_assert_eq(n.out_shape[0].ndim, 3); cr_assert_eq(n.out_shape[0].dims[1], 3); }
        uint64_t r = 11;
        for (uint32_t k = 0; k < n.n_in; k++) tu_fill(n.in[k], dt, fh_shape_numel(&n.in_shape[k]), &r, -1, 1);
        double *ref = calloc((size_t)(R * H), sizeof(double));
        for (int64_t i = 0; i < R; i++) for (int64_t j = 0; j < H; j++) {
            double s = nobias ? 0 : tu_get(n.in[2], dt, j);
            for (int64_t k = 0; k < K; k++) s += tu_get(n.in[0], dt, i * K + k) * tu_get(n.in[1], dt, j * K + k);
            ref[i * H + j] = s;
        }
        cr_assert_eq(fh_node_forward(&n, 1, NULL), 0);
        cr_assert_leq(tu_relerr(n.out[0], dt, ref, R * H), dt == MXP_DTYPE_F32 ? 1e-6 : 1e-14);
        int32_t add[1] = {MXP_REQ_ADD};
        cr_assert_eq(fh_node_forward(&n, 1, add), 0);
        for (int64_t i = 0; i < R * H; i++) ref[i] *= 2;
        cr_assert_leq(tu_relerr(n.out[0], dt, ref, R * H), dt == MXP_DTYPE_F32 ? 1e-6 : 1e-14);
        free(ref);
        fh_node_free(&n);
    }
}

Test(fc, finite_differences, .init = setup, .fini = teardown) {
    const char *kws[] = {"num_hidden=4", "num_hidden=3 flatten=False"};
    for (int t = 0; t < 2; t++) {
        fh_node n; int64_t d[3] = {3, 2, 5};
        tu_node(&n, pack, "FullyConnected", kws[t], MXP_DTYPE_F64, 3, d, 1);
        uint64_t r = 5;
        for (uint32_t k = 0; k < n.n_in; k++) tu_fill(n.in[k], MXP_DTYPE_F64, fh_shape_numel(&n.in_shape[k]), &r, -1, 1);
        tu_fill(n.out_grad[0], MXP_DTYPE_F64, fh_shape_numel(&n.out_shape[0]), &r, -1, 1);
        int check[3] = {1, 1, 1};
        tu_fd_check(&n, 1, check, 1e-7);
        fh_node_free(&n);
    }
}

Test(fc, shape_errors, .init = setup, .fini = teardown) {
    fh_node n;
    cr_assert_eq(fh_node_init(&n, pack, "FullyConnected", "default", "num_hidden=4", MXP_DTYPE_F32), 0);
    cr_assert_eq(fh_node_infer(&n), MXP_EINCOMPLETE);
    n.in_shape[0] = (mxp_shape){2, 0, {8, 10}};
    n.in_shape[1] = (mxp_shape){2, 0, {4, 9}};
    cr_assert_eq(fh_node_infer(&n), MXP_ESHAPE);
    cr_assert(strstr(fh_error(), "(4,9)") && strstr(fh_error(), "(4,10)"), "%s", fh_error());
    fh_node_free(&n);
    cr_assert_lt(fh_node_init(&n, pack, "FullyConnected", "default", "", MXP_DTYPE_F32), 0); /* num_hidden required */
    fh_node_free(&n);
}

/* Shapes large enough that forward and both backward GEMMs are split into
 * blocks on the harness's 2-thread parallel_for (nn_gemm_par: >= 6 MFLOP,
 * column blocks when the output is wide, row blocks when it is tall, with
 * ragged last blocks), checked against plain float64 loops.  LeNet's fc1
 * (64x800 -> 500) is wide; 600x300 -> 40 is tall. */
Test(fc, blocked_gemm_reference, .init = setup, .fini = teardown) {
    const int64_t shapes[2][3] = {{64, 800, 500}, {600, 300, 40}}; /* rows, k, hidden */
    for (int t = 0; t < 2; t++) for (int dti = 0; dti < 2; dti++) {
        int32_t dt = dti ? MXP_DTYPE_F64 : MXP_DTYPE_F32;
        int64_t R = shapes[t][0], K = shapes[t][1], H = shapes[t][2];
        char kw[64]; snprintf(kw, sizeof kw, "num_hidden=%lld", (long long)H);
        fh_node n; int64_t d[2] = {R, K};
        tu_node(&n, pack, "FullyConnected", kw, dt, 2, d, 1);
        uint64_t r = 17 + (uint64_t)t;
        for (uint32_t k = 0; k < n.n_in; k++) tu_fill(n.in[k], dt, fh_shape_numel(&n.in_shape[k]), &r, -1, 1);
        tu_fill(n.out_grad[0], dt, R * H, &r, -1, 1);
        double *x = tu_to_f64(n.in[0], dt, R * K), *w = tu_to_f64(n.in[1], dt, H * K);
        double *b = tu_to_f64(n.in[2], dt, H), *dy = tu_to_f64(n.out_grad[0], dt, R * H);
        double *y = calloc((size_t)(R * H), sizeof *y), *dx = calloc((size_t)(R * K), sizeof *dx);
        double *dw = calloc((size_t)(H * K), sizeof *dw), *db = calloc((size_t)H, sizeof *db);
        for (int64_t i = 0; i < R; i++) for (int64_t j = 0; j < H; j++) {
            double s = b[j];
            for (int64_t k = 0; k < K; k++) s += x[i * K + k] * w[j * K + k];
            y[i * H + j] = s;
            db[j] += dy[i * H + j];
            for (int64_t k = 0; k < K; k++) { dx[i * K + k] += dy[i * H + j] * w[j * K + k]; dw[j * K + k] += dy[i * H + j] * x[i * K + k]; }
        }
        double tol = dt == MXP_DTYPE_F32 ? 1e-5 : 1e-13;
        cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
        cr_assert_leq(tu_relerr(n.out[0], dt, y, R * H), tol, "shape %d dt %d forward", t, dti);
        cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
        cr_assert_leq(tu_relerr(n.in_grad[0], dt, dx, R * K), tol, "shape %d dt %d dx", t, dti);
        cr_assert_leq(tu_relerr(n.in_grad[1], dt, dw, H * K), tol, "shape %d dt %d dw", t, dti);
        cr_assert_leq(tu_relerr(n.in_grad[2], dt, db, H), tol, "shape %d dt %d db", t, dti);
        free(x); free(w); free(b); free(dy); free(y); free(dx); free(dw); free(db);
        fh_node_free(&n);
    }
}

/* The float32 kernels of fc_kern.c (register tiles, row/column/k tails,
 * the parallel split of the MLP's 64x784x128, the column blocks of
 * weights over 1 MiB) against float64 loops over
 * the same float32 values: forward with bias (write, then add) and the
 * data/weight/bias gradients (write, then add).  Run with MXP_FC_KERNEL=own
 * (our kernels on every shape they take, tiny ones included) and with the
 * default policy (tiny products on OpenBLAS when it runs AVX-512 kernels);
 * Criterion runs each test in its own process, so each reads its setting. */
static void check_f32_kernels(void) {
    const int64_t shapes[][3] = {{64, 784, 128}, {64, 128, 64}, {64, 64, 10}, {37, 83, 45}, {9, 40, 33},
                                 {13, 20, 18},   {64, 500, 10}, {5, 3, 2},
                                 /* weights over 1 MiB: blocks of columns of C (LeNet's fc1; ragged blocks) */
                                 {64, 800, 500}, {11, 2100, 150}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t R = shapes[s][0], K = shapes[s][1], H = shapes[s][2];
        char kw[64];
        snprintf(kw, sizeof kw, "num_hidden=%lld", (long long)H);
        fh_node n;
        int64_t d[2] = {R, K};
        tu_node(&n, pack, "FullyConnected", kw, MXP_DTYPE_F32, 2, d, 1);
        uint64_t r = 17 + s;
        for (uint32_t k = 0; k < n.n_in; k++) tu_fill(n.in[k], MXP_DTYPE_F32, fh_shape_numel(&n.in_shape[k]), &r, -1, 1);
        tu_fill(n.out_grad[0], MXP_DTYPE_F32, R * H, &r, -1, 1);
        const float *x = n.in[0], *w = n.in[1], *b = n.in[2], *dy = n.out_grad[0];
        double *y = calloc((size_t)(R * H), sizeof *y), *dx = calloc((size_t)(R * K), sizeof *dx),
               *dw = calloc((size_t)(H * K), sizeof *dw), *db = calloc((size_t)H, sizeof *db);
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < H; j++) {
                double v = b[j];
                for (int64_t p = 0; p < K; p++) v += (double)x[i * K + p] * w[j * K + p];
                y[i * H + j] = v;
                db[j] += dy[i * H + j];
                for (int64_t p = 0; p < K; p++) {
                    dx[i * K + p] += (double)dy[i * H + j] * w[j * K + p];
                    dw[j * K + p] += (double)dy[i * H + j] * x[i * K + p];
                }
            }
        for (int pass = 1; pass <= 2; pass++) { /* write, then add: twice the values */
            int32_t req[3] = {pass == 1 ? MXP_REQ_WRITE : MXP_REQ_ADD, pass == 1 ? MXP_REQ_WRITE : MXP_REQ_ADD,
                              pass == 1 ? MXP_REQ_WRITE : MXP_REQ_ADD};
            cr_assert_eq(fh_node_forward(&n, 1, req), 0);
            cr_assert_eq(fh_node_backward(&n, req), 0);
            double *yy = malloc(sizeof *yy * (size_t)(R * H)), *xx = malloc(sizeof *xx * (size_t)(R * K)),
                   *ww = malloc(sizeof *ww * (size_t)(H * K)), *bb = malloc(sizeof *bb * (size_t)H);
            for (int64_t i = 0; i < R * H; i++) yy[i] = pass * y[i];
            for (int64_t i = 0; i < R * K; i++) xx[i] = pass * dx[i];
            for (int64_t i = 0; i < H * K; i++) ww[i] = pass * dw[i];
            for (int64_t i = 0; i < H; i++) bb[i] = pass * db[i];
            cr_assert_leq(tu_relerr(n.out[0], MXP_DTYPE_F32, yy, R * H), 1e-5, "shape %zu pass %d: y", s, pass);
            cr_assert_leq(tu_relerr(n.in_grad[0], MXP_DTYPE_F32, xx, R * K), 1e-5, "shape %zu pass %d: dx", s, pass);
            cr_assert_leq(tu_relerr(n.in_grad[1], MXP_DTYPE_F32, ww, H * K), 1e-5, "shape %zu pass %d: dw", s, pass);
            cr_assert_leq(tu_relerr(n.in_grad[2], MXP_DTYPE_F32, bb, H), 1e-5, "shape %zu pass %d: db", s, pass);
            free(yy), free(xx), free(ww), free(bb);
        }
        free(y), free(dx), free(dw), free(db);
        fh_node_free(&n);
    }
}

Test(fc, f32_kernels_reference, .init = setup, .fini = teardown) {
    cr_assert_eq(setenv("MXP_FC_KERNEL", "own", 1), 0);
    check_f32_kernels();
}

Test(fc, f32_default_policy_reference, .init = setup, .fini = teardown) {
    cr_assert_eq(unsetenv("MXP_FC_KERNEL"), 0);
    check_f32_kernels();
}
