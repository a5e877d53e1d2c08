/* test_batchnorm.c — BatchNorm: training forward against float64 batch
 * statistics, moving-average update of the aux states, inference with the
 * moving statistics, use_global_stats, fix_gamma, axis != 1, shapes, and
 * float64 finite differences (training and global-stats modes). */
#include <string.h>
#include "nn_test_util.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

Test(batchnorm, forward_train_and_infer, .init = setup, .fini = teardown) {
    for (int dti = 0; dti < 2; dti++) {
        int32_t dt = dti ? MXP_DTYPE_F64 : MXP_DTYPE_F32;
        int64_t d[4] = {3, 4, 5, 2};
        fh_node n;
        tu_node(&n, pack, "BatchNorm", "fix_gamma=False eps=0.001 momentum=0.8", dt, 4, d, 1);
        cr_assert_eq(n.n_in, 3); cr_assert_eq(n.n_aux, 2); cr_assert_eq(n.n_out, 3);
        cr_assert_eq(n.in_shape[1].dims[0], 4); cr_assert_eq(n.aux_shape[1].dims[0], 4);
        uint64_t r = 4;
        tu_fill(n.in[0], dt, 120, &r, -2, 3);
        tu_fill(n.in[1], dt, 4, &r, 0.5, 1.5);
        tu_fill(n.in[2], dt, 4, &r, -1, 1);
        for (int c = 0; c < 4; c++) { tu_set(n.aux[0], dt, c, 0.1 * c); tu_set(n.aux[1], dt, c, 1 + c); }
        double y[120], mm[4], mv[4];
        for (int c = 0; c < 4; c++) {
            double s = 0, s2 = 0;
            for (int i = 0; i < 3; i++) for (int k = 0; k < 10; k++) s += tu_get(n.in[0], dt, (i * 4 + c) * 10 + k);
            double mean = s / 30;
            for (int i = 0; i < 3; i++) for (int k = 0; k < 10; k++) { double v = tu_get(n.in[0], dt, (i * 4 + c) * 10 + k) - mean; s2 += v * v; }
            double var = s2 / 30;
            for (int i = 0; i < 3; i++) for (int k = 0; k < 10; k++) {
                int64_t idx = (i * 4 + c) * 10 + k;
                y[idx] = tu_get(n.in[1], dt, c) * (tu_get(n.in[0], dt, idx) - mean) / sqrt(var + 0.001) + tu_get(n.in[2], dt, c);
            }
            mm[c] = 0.1 * c * 0.8 + mean * 0.2; mv[c] = (1 + c) * 0.8 + var * 0.2;
        }
        double tol = dt == MXP_DTYPE_F32 ? 1e-6 : 1e-13;
        cr_assert_eq(fh_node_forward(&n, 1, NULL), 0);
        cr_assert_leq(tu_relerr(n.out[0], dt, y, 120), tol);
        cr_assert_leq(tu_relerr(n.aux[0], dt, mm, 4), tol);
        cr_assert_leq(tu_relerr(n.aux[1], dt, mv, 4), tol);
        /* inference uses the moving statistics and leaves them alone */
        for (int64_t idx = 0; idx < 120; idx++) {
            int c = (int)((idx / 10) % 4);
            y[idx] = tu_get(n.in[1], dt, c) * (tu_get(n.in[0], dt, idx) - mm[c]) / sqrt(mv[c] + 0.001) + tu_get(n.in[2], dt, c);
        }
        cr_assert_eq(fh_node_forward(&n, 0, NULL), 0);
        cr_assert_leq(tu_relerr(n.out[0], dt, y, 120), tol);
        cr_assert_leq(tu_relerr(n.aux[0], dt, mm, 4), tol);
        fh_node_free(&n);
    }
}

Test(batchnorm, finite_differences, .init = setup, .fini = teardown) {
    const char *kws[] = {"fix_gamma=False", "fix_gamma=False use_global_stats=True", "fix_gamma=False axis=-1", "fix_gamma=True"};
    for (int t = 0; t < 4; t++) {
        int64_t d[3] = {4, 3, 5};
        fh_node n;
        tu_node(&n, pack, "BatchNorm", kws[t], MXP_DTYPE_F64, 3, d, 1);
        uint64_t r = 8 + (uint64_t)t;
        int64_t C = t == 2 ? 5 : 3;
        cr_assert_eq(n.in_shape[1].dims[0], C);
        tu_fill(n.in[0], MXP_DTYPE_F64, 60, &r, -2, 2);
        tu_fill(n.in[1], MXP_DTYPE_F64, C, &r, 0.5, 1.5);
        tu_fill(n.in[2], MXP_DTYPE_F64, C, &r, -1, 1);
        tu_fill(n.aux[0], MXP_DTYPE_F64, C, &r, -1, 1);
        tu_fill(n.aux[1], MXP_DTYPE_F64, C, &r, 0.5, 2);
        tu_fill(n.out_grad[0], MXP_DTYPE_F64, 60, &r, -1, 1);
        int check[3] = {1, t != 3, 1};
        tu_fd_check(&n, 1, check, 1e-6);
        if (t == 3) for (int c = 0; c < C; c++) cr_assert_eq(((double *)n.in_grad[1])[c], 0.0);
        fh_node_free(&n);
    }
}

/* float32 vector path (rows of S = 37 values: two 16-lane blocks and a
 * tail) forward and backward, training and global statistics, req write
 * and add, against the gradient formula evaluated in float64 here:
 *   dx = g/sigma * (dy - mean(dy) - xh * mean(dy * xh)),  xh = (x - mu)/sigma
 *   dgamma = sum(dy * xh), dbeta = sum(dy)   (global stats: dx = g/sigma * dy). */
Test(batchnorm, float32_vector_path_forward_backward, .init = setup, .fini = teardown) {
    enum { O = 3, C = 2, S = 37, NX = O * C * S };
    for (int global = 0; global < 2; global++)
        for (int add = 0; add < 2; add++) {
            int64_t d[3] = {O, C, S};
            fh_node n;
            tu_node(&n, pack, "BatchNorm", global ? "fix_gamma=False eps=0.001 use_global_stats=True"
                                                  : "fix_gamma=False eps=0.001", MXP_DTYPE_F32, 3, d, 1);
            uint64_t r = 21 + (uint64_t)(2 * global + add);
            tu_fill(n.in[0], MXP_DTYPE_F32, NX, &r, -3, 5); /* mean far from 0: the two-pass variance matters */
            tu_fill(n.in[1], MXP_DTYPE_F32, C, &r, 0.5, 1.5);
            tu_fill(n.in[2], MXP_DTYPE_F32, C, &r, -1, 1);
            tu_fill(n.aux[0], MXP_DTYPE_F32, C, &r, -1, 1);
            tu_fill(n.aux[1], MXP_DTYPE_F32, C, &r, 0.5, 2);
            tu_fill(n.out_grad[0], MXP_DTYPE_F32, NX, &r, -1, 1);
            double x[NX], dy[NX], y[NX], dx[NX], dg[C], db[C], prior[NX];
            for (int i = 0; i < NX; i++) x[i] = tu_get(n.in[0], MXP_DTYPE_F32, i), dy[i] = tu_get(n.out_grad[0], MXP_DTYPE_F32, i);
            for (int c = 0; c < C; c++) {
                double mu, var, s = 0, s2 = 0, g = tu_get(n.in[1], MXP_DTYPE_F32, c), be = tu_get(n.in[2], MXP_DTYPE_F32, c);
                for (int o = 0; o < O; o++) for (int k = 0; k < S; k++) s += x[(o * C + c) * S + k];
                mu = s / (O * S);
                for (int o = 0; o < O; o++) for (int k = 0; k < S; k++) { double v = x[(o * C + c) * S + k] - mu; s2 += v * v; }
                var = s2 / (O * S);
                if (global) mu = tu_get(n.aux[0], MXP_DTYPE_F32, c), var = tu_get(n.aux[1], MXP_DTYPE_F32, c);
                double sig = sqrt(var + 0.001), mdy = 0, mdyxh = 0;
                for (int o = 0; o < O; o++) for (int k = 0; k < S; k++) {
                    int i = (o * C + c) * S + k;
                    y[i] = g * (x[i] - mu) / sig + be;
                    mdy += dy[i];
                    mdyxh += dy[i] * (x[i] - mu) / sig;
                }
                dg[c] = mdyxh;
                db[c] = mdy;
                mdy /= O * S;
                mdyxh /= O * S;
                for (int o = 0; o < O; o++) for (int k = 0; k < S; k++) {
                    int i = (o * C + c) * S + k;
                    dx[i] = global ? g / sig * dy[i] : g / sig * (dy[i] - mdy - (x[i] - mu) / sig * mdyxh);
                }
            }
            int32_t req[3] = {add ? MXP_REQ_ADD : MXP_REQ_WRITE, add ? MXP_REQ_ADD : MXP_REQ_WRITE,
                              add ? MXP_REQ_ADD : MXP_REQ_WRITE};
            /* add: outputs start at a known value the op must add to */
            for (int i = 0; i < NX; i++) prior[i] = add ? 0.25 * (i % 7) : 0;
            for (int i = 0; i < NX; i++) tu_set(n.out[0], MXP_DTYPE_F32, i, prior[i]), tu_set(n.in_grad[0], MXP_DTYPE_F32, i, prior[i]);
            for (int c = 0; c < C; c++) tu_set(n.in_grad[1], MXP_DTYPE_F32, c, add ? 1.5 : 0), tu_set(n.in_grad[2], MXP_DTYPE_F32, c, add ? -2 : 0);
            int32_t freq[3] = {req[0], MXP_REQ_WRITE, MXP_REQ_WRITE};
            cr_assert_eq(fh_node_forward(&n, 1, freq), 0);
            for (int i = 0; i < NX; i++) y[i] += prior[i], dx[i] += prior[i];
            for (int c = 0; c < C; c++) dg[c] += add ? 1.5 : 0, db[c] += add ? -2 : 0;
            cr_assert_leq(tu_relerr(n.out[0], MXP_DTYPE_F32, y, NX), 2e-6, "forward global=%d add=%d", global, add);
            cr_assert_eq(fh_node_backward(&n, req), 0);
            cr_assert_leq(tu_relerr(n.in_grad[0], MXP_DTYPE_F32, dx, NX), 2e-5, "dx global=%d add=%d: %g", global, add,
                          tu_relerr(n.in_grad[0], MXP_DTYPE_F32, dx, NX));
            cr_assert_leq(tu_relerr(n.in_grad[1], MXP_DTYPE_F32, dg, C), 2e-5, "dgamma global=%d add=%d", global, add);
            cr_assert_leq(tu_relerr(n.in_grad[2], MXP_DTYPE_F32, db, C), 2e-5, "dbeta global=%d add=%d", global, add);
            fh_node_free(&n);
        }
}

/* float32 passes over many rows (O*C = 48 rows of S = 1000: several
 * parallel chunks), data with |mean| >> std (the one-pass shifted
 * statistics must not cancel), training forward and backward against the
 * float64 formulas here, and bit-identical results with 1 and 2 threads
 * (row sums are added in a fixed order). */
Test(batchnorm, float32_rows_many_chunks_offset_mean_thread_invariant, .init = setup, .fini = teardown) {
    enum { O = 16, C = 3, S = 1000, NX = O * C * S };
    static double x[NX], dy[NX], y[NX], dx[NX];
    static float got_y[2][NX], got_dx[2][NX];
    double dg[C], db[C], mv[C];
    for (int th = 0; th < 2; th++) {
        fh_set_threads(th + 1);
        int64_t d[3] = {O, C, S};
        fh_node n;
        tu_node(&n, pack, "BatchNorm", "fix_gamma=False eps=0.00001 momentum=0.5", MXP_DTYPE_F32, 3, d, 1);
        uint64_t r = 77;
        tu_fill(n.in[0], MXP_DTYPE_F32, NX, &r, 99, 101); /* mean ~100, std ~0.58 */
        tu_fill(n.in[1], MXP_DTYPE_F32, C, &r, 0.5, 1.5);
        tu_fill(n.in[2], MXP_DTYPE_F32, C, &r, -1, 1);
        tu_fill(n.out_grad[0], MXP_DTYPE_F32, NX, &r, -1, 1);
        for (int c = 0; c < C; c++) tu_set(n.aux[0], MXP_DTYPE_F32, c, 0), tu_set(n.aux[1], MXP_DTYPE_F32, c, 1);
        for (int i = 0; i < NX; i++) x[i] = tu_get(n.in[0], MXP_DTYPE_F32, i), dy[i] = tu_get(n.out_grad[0], MXP_DTYPE_F32, i);
        for (int c = 0; c < C; c++) {
            double s = 0, s2 = 0, g = tu_get(n.in[1], MXP_DTYPE_F32, c), be = tu_get(n.in[2], MXP_DTYPE_F32, c);
            for (int o = 0; o < O; o++) for (int k = 0; k < S; k++) s += x[(o * C + c) * S + k];
            double mu = s / (O * S);
            for (int o = 0; o < O; o++) for (int k = 0; k < S; k++) { double v = x[(o * C + c) * S + k] - mu; s2 += v * v; }
            double var = s2 / (O * S), sig = sqrt(var + 1e-5), sdy = 0, sdyxh = 0;
            mv[c] = 0.5 + 0.5 * var;
            for (int o = 0; o < O; o++) for (int k = 0; k < S; k++) {
                int i = (o * C + c) * S + k;
                y[i] = g * (x[i] - mu) / sig + be;
                sdy += dy[i];
                sdyxh += dy[i] * (x[i] - mu) / sig;
            }
            dg[c] = sdyxh;
            db[c] = sdy;
            for (int o = 0; o < O; o++) for (int k = 0; k < S; k++) {
                int i = (o * C + c) * S + k;
                dx[i] = g / sig * (dy[i] - sdy / (O * S) - (x[i] - mu) / sig * sdyxh / (O * S));
            }
        }
        cr_assert_eq(fh_node_forward(&n, 1, NULL), 0);
        cr_assert_leq(tu_relerr(n.out[0], MXP_DTYPE_F32, y, NX), 2e-5, "forward: %g", tu_relerr(n.out[0], MXP_DTYPE_F32, y, NX));
        cr_assert_leq(tu_relerr(n.aux[1], MXP_DTYPE_F32, mv, C), 1e-4, "moving_var");
        cr_assert_eq(fh_node_backward(&n, NULL), 0);
        cr_assert_leq(tu_relerr(n.in_grad[0], MXP_DTYPE_F32, dx, NX), 1e-5, "dx: %g", tu_relerr(n.in_grad[0], MXP_DTYPE_F32, dx, NX));
        cr_assert_leq(tu_relerr(n.in_grad[1], MXP_DTYPE_F32, dg, C), 1e-4, "dgamma");
        cr_assert_leq(tu_relerr(n.in_grad[2], MXP_DTYPE_F32, db, C), 1e-5, "dbeta");
        memcpy(got_y[th], n.out[0], sizeof got_y[th]);
        memcpy(got_dx[th], n.in_grad[0], sizeof got_dx[th]);
        fh_node_free(&n);
    }
    fh_set_threads(1);
    cr_assert(!memcmp(got_y[0], got_y[1], sizeof got_y[0]), "forward differs between 1 and 2 threads");
    cr_assert(!memcmp(got_dx[0], got_dx[1], sizeof got_dx[0]), "backward differs between 1 and 2 threads");
}
