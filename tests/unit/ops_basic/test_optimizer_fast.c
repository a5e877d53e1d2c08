/* test_optimizer_fast.c — sgd_mom_update's fused float32 pass (dense
 * weight, grad and mom): against MXNet's formula written out in float64,
 * for lengths that exercise the 16-wide vector step, its scalar remainder
 * and the multi-chunk parallel split (>= 65536 elements), with and without
 * clip_gradient, output bound to the weight (inplace), to a separate array
 * (write) and accumulated (add); a float64 call (the generic two-pass path)
 * must give the same numbers. */
#include <stdio.h>
#include <stdlib.h>

#include "common_test.h"

TestSuite(optimizer_fast, .init = ob_setup, .fini = ob_teardown);

static double clipd(double x, double c) { return c < 0 ? x : x > c ? c : x < -c ? -c : x; }

static void check_mom(int64_t n, int req, double clip, int32_t dt, uint64_t seed) {
    const double lr = 0.05, mu = 0.9, wd = 0.01, rs = 0.25;
    char clip_s[32];
    snprintf(clip_s, sizeof clip_s, "%g", clip);
    fh_arr w = fh_arr_new(dt, 1, SHAPE(n)), g = fh_arr_new(dt, 1, SHAPE(n)), mom = fh_arr_new(dt, 1, SHAPE(n));
    fh_fill_uniform(&w, seed, -1, 1);
    fh_fill_uniform(&g, seed + 1, -8, 8);   /* |rs g| up to 2: clip 0.5 cuts many */
    fh_fill_uniform(&mom, seed + 2, -0.1, 0.1);
    fh_arr y = req == MXP_REQ_INPLACE ? w : fh_arr_new(dt, 1, SHAPE(n));
    if (req == MXP_REQ_ADD) fh_fill_uniform(&y, seed + 3, -1, 1);
    double *rw = malloc(sizeof(double) * (size_t)n), *rm = malloc(sizeof(double) * (size_t)n);
    double *ry = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        double m = mu * fh_get(&mom, i) - lr * wd * fh_get(&w, i) - lr * clipd(rs * fh_get(&g, i), clip);
        rm[i] = m;
        rw[i] = fh_get(&w, i) + m;
        ry[i] = req == MXP_REQ_ADD ? fh_get(&y, i) + rw[i] : rw[i];
    }
    fh_arr in[3] = {w, g, mom};
    fh_arr out[2] = {y};
    int no;
    cr_assert_eq(fh_forward(P, "sgd_mom_update",
                            KW("lr", "0.05", "momentum", "0.9", "wd", "0.01", "rescale_grad", "0.25",
                               "clip_gradient", clip_s),
                            3, in, &no, out, req), 0, "%s", fh_error());
    double tol = dt == MXP_DTYPE_F32 ? 1e-6 : 1e-14;
    for (int64_t i = 0; i < n; i++) {
        cr_assert(close_to(fh_get(&mom, i), rm[i], tol, tol), "n %lld req %d clip %g: mom[%lld] %.9g want %.9g",
                  (long long)n, req, clip, (long long)i, fh_get(&mom, i), rm[i]);
        cr_assert(close_to(fh_get(&y, i), ry[i], tol, tol), "n %lld req %d clip %g: out[%lld] %.9g want %.9g",
                  (long long)n, req, clip, (long long)i, fh_get(&y, i), ry[i]);
    }
    if (req != MXP_REQ_INPLACE) fh_arr_free(&y);
    fh_arr_free(&w); fh_arr_free(&g); fh_arr_free(&mom);
    free(rw); free(rm); free(ry);
}

Test(optimizer_fast, sgd_mom_lengths_req_clip) {
    const int64_t lens[] = {1, 15, 16, 37, 500, 70001};
    const int reqs[] = {MXP_REQ_INPLACE, MXP_REQ_WRITE, MXP_REQ_ADD};
    const double clips[] = {-1, 0.5};
    uint64_t seed = 1;
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 2; c++) {
                check_mom(lens[l], reqs[r], clips[c], MXP_DTYPE_F32, seed);
                check_mom(lens[l], reqs[r], clips[c], MXP_DTYPE_F64, seed);
                seed += 7;
            }
}

/* The fused pass equals the two-pass formula exactly: the same data seen
 * through strided views (which the fused pass refuses, so ob_ew's generic
 * path runs) gives identical bits. */
Test(optimizer_fast, sgd_mom_fused_matches_generic) {
    const int64_t n = 1000;
    fh_arr w = fh_arr_new(MXP_DTYPE_F32, 1, SHAPE(n)), g = fh_arr_new(MXP_DTYPE_F32, 1, SHAPE(n));
    fh_arr mom = fh_arr_new(MXP_DTYPE_F32, 1, SHAPE(n));
    fh_fill_uniform(&w, 5, -1, 1);
    fh_fill_uniform(&g, 6, -8, 8);
    fh_fill_uniform(&mom, 7, -0.1, 0.1);
    fh_arr w2 = fh_arr_clone(&w), mom2 = fh_arr_clone(&mom);
    const char *const *kw = KW("lr", "0.05", "momentum", "0.9", "wd", "0.01", "rescale_grad", "0.25", "clip_gradient", "0.5");
    fh_arr in[3] = {w, g, mom};
    fh_arr out[2] = {w};
    int no;
    cr_assert_eq(fh_forward(P, "sgd_mom_update", kw, 3, in, &no, out, MXP_REQ_INPLACE), 0, "%s", fh_error());
    mxp_tensor tin[3] = {fh_view(&w2), fh_view(&g), fh_view(&mom2)};
    int64_t shp[2] = {n / 2, 2}, st_t[2] = {1, n / 2};
    /* every operand viewed transposed: (n/2, 2) with strides (1, n/2) — same elements, same pairing */
    for (int i = 0; i < 3; i++) { tin[i].ndim = 2; tin[i].shape = shp; tin[i].strides = st_t; }
    mxp_tensor tout = tin[0];
    cr_assert_eq(fh_forward_views(P, "sgd_mom_update", kw, 3, tin, 1, &tout, MXP_REQ_INPLACE), 0, "%s",
                 fh_error());
    cr_assert_eq(memcmp(w.data, w2.data, (size_t)n * sizeof(float)), 0);
    cr_assert_eq(memcmp(mom.data, mom2.data, (size_t)n * sizeof(float)), 0);
    fh_arr_free(&w); fh_arr_free(&g); fh_arr_free(&mom); fh_arr_free(&w2); fh_arr_free(&mom2);
}
