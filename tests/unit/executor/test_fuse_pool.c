/* test_fuse_pool.c — the fusion pass's ReLU + max Pooling pattern
 * (executor/fuse.c) and the op it makes, _mxp_ReLUPooling (ops-nn
 * pooling.c):
 *   - x -> relu -> Pooling(max) for the three code paths of the op (2x2/2
 *     vector kernel with an uncovered row and a scalar tail column,
 *     another non-overlapping window, overlapping padded windows): the
 *     relu node is gone when fused and kept with MXP_EXEC_FUSE=0; the
 *     fused and unfused graphs give the same output and data gradient
 *     bit for bit (but for the order of adds of overlapping windows under
 *     grad_req add), and both equal max pooling of relu(x) and its gradient
 *     computed here in float64 (first maximum in window order, gated by
 *     x > 0); float32 and float64, grad_req write and add;
 *   - the data has ties, zeros and windows with no positive value (the
 *     cases where routing and gating matter);
 *   - not fused: a ReLU whose output is also a head, avg pooling. */
#include "exec_test_util.h"

#include "executor/executor.h"

#define N 2
#define C 3
#define H 9
#define W 10 /* 2x2/2: 5 windows a row (a 4-window vector step and a tail), row 8 uncovered */
#define NEL (N * C * H * W)

typedef struct pcase {
    int kh, kw, sh, sw, ph, pw;
} pcase;

static const pcase cases[] = {{2, 2, 2, 2, 0, 0}, {3, 3, 3, 3, 0, 0}, {3, 3, 2, 2, 1, 1}};

static mxp_symbol *relu_pool(const pcase *pc, const char *type) {
    char k[32], s[32], p[32], t[32];
    snprintf(k, sizeof k, "kernel=(%d, %d)", pc->kh, pc->kw);
    snprintf(s, sizeof s, "stride=(%d, %d)", pc->sh, pc->sw);
    snprintf(p, sizeof p, "pad=(%d, %d)", pc->ph, pc->pw);
    snprintf(t, sizeof t, "pool_type=%s", type);
    mxp_symbol *x = gt_var("x");
    mxp_symbol *r = gt_op("Activation", "relu", 1, &x, "act_type=relu", NULL);
    mxp_symbol *o = gt_op("Pooling", "pool", 1, &r, k, s, p, t, NULL);
    mxp_symbol_release(x);
    mxp_symbol_release(r);
    return o;
}

static int out_size(int n, int k, int s, int p) { return 1 + (n + 2 * p - k) / s; }

/* Values in {-1, -0.5, 0, 0.5, 1} (ties, zeros, all-negative windows). */
static void data(double *x, double *dy, int ny) {
    uint64_t st = 17;
    for (int i = 0; i < NEL; i++) x[i] = 0.5 * (double)((int)((et_val(&st) + 1) * 2.5) - 2);
    x[5] = -0.0;
    for (int i = 0; i < ny; i++) dy[i] = et_val(&st);
}

/* Max pooling of relu(x) and its data gradient, in float64: windows
 * clipped to the data, dy to the first maximum of relu(x) in row-major
 * window order, kept only where x > 0 (relu's gradient). */
static void reference(const pcase *pc, const double *x, const double *dy, double *y, double *dx) {
    int Ho = out_size(H, pc->kh, pc->sh, pc->ph), Wo = out_size(W, pc->kw, pc->sw, pc->pw);
    memset(dx, 0, NEL * sizeof *dx);
    for (int pl = 0; pl < N * C; pl++)
        for (int oh = 0; oh < Ho; oh++)
            for (int ow = 0; ow < Wo; ow++) {
                int best = -1;
                double v = 0;
                for (int h = oh * pc->sh - pc->ph; h < oh * pc->sh - pc->ph + pc->kh; h++)
                    for (int w = ow * pc->sw - pc->pw; w < ow * pc->sw - pc->pw + pc->kw; w++) {
                        if (h < 0 || h >= H || w < 0 || w >= W) continue;
                        int i = (pl * H + h) * W + w;
                        double r = x[i] > 0 ? x[i] : 0;
                        if (best < 0 || r > v) best = i, v = r;
                    }
                int o = (pl * Ho + oh) * Wo + ow;
                y[o] = v;
                if (x[best] > 0) dx[best] += dy[o];
            }
}

typedef struct run_out {
    double *y, *dx;
    void *ybytes, *dxbytes;
    int relu_kept;
} run_out;

static run_out run(mxp_symbol *sym, int dt, int fuse, int req, const double *x, const double *dy) {
    setenv("MXP_EXEC_FUSE", fuse ? "1" : "0", 1);
    const char *names[] = {"x"};
    const mxp_shape xs = {.ndim = 4, .dims = {N, C, H, W}};
    mxp_executor *ex = et_bind(sym, dt, 1, names, &xs, 5, req, NULL, 0);
    unsetenv("MXP_EXEC_FUSE");
    run_out r = {0};
    r.relu_kept = mxp__executor_node(ex, "relu") != NULL;
    et_set(et_arg(ex, sym, "x", 0), x);
    mxp_ndarray *const *o;
    int no;
    for (int k = 0; k < (req == MXP_REQ_ADD ? 2 : 1); k++) {
        cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
        cr_assert_eq(mxp_executor_outputs(ex, &no, &o), MXP_OK);
        mxp_shape ys = {.ndim = 4};
        memcpy(ys.dims, mxp_ndarray_shape(o[0]), 4 * sizeof(int64_t));
        mxp_ndarray *hg = et_arr(dt, &ys, NULL, 0.0);
        et_set(hg, dy);
        cr_assert_eq(mxp_executor_backward(ex, 1, &hg), MXP_OK, "%s", mxp_last_error());
        mxp_ndarray_release(hg);
    }
    r.y = et_read(o[0]);
    r.ybytes = et_bytes(o[0]);
    mxp_ndarray *g = et_arg(ex, sym, "x", 1);
    r.dx = et_read(g);
    r.dxbytes = et_bytes(g);
    mxp_executor_free(ex);
    return r;
}

static void run_free(run_out *r) {
    free(r->y);
    free(r->dx);
    free(r->ybytes);
    free(r->dxbytes);
}

Test(fuse_pool, fused_equals_unfused_and_float64_reference) {
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const pcase *pc = &cases[c];
        int Ho = out_size(H, pc->kh, pc->sh, pc->ph), Wo = out_size(W, pc->kw, pc->sw, pc->pw), ny = N * C * Ho * Wo;
        double x[NEL], dy[N * C * H * W], y_ref[N * C * H * W], dx_ref[NEL];
        data(x, dy, ny);
        reference(pc, x, dy, y_ref, dx_ref);
        mxp_symbol *sym = relu_pool(pc, "max");
        for (int dti = 0; dti < 2; dti++)
            for (int rq = 0; rq < 2; rq++) {
                int dt = dti ? MXP_DTYPE_F32 : MXP_DTYPE_F64, req = rq ? MXP_REQ_ADD : MXP_REQ_WRITE;
                size_t esz = dt == MXP_DTYPE_F64 ? 8 : 4;
                run_out on = run(sym, dt, 1, req, x, dy), off = run(sym, dt, 0, req, x, dy);
                cr_expect(!on.relu_kept, "case %zu: the relu is fused into the pooling", c);
                cr_expect(off.relu_kept, "case %zu: MXP_EXEC_FUSE=0 keeps the relu", c);
                cr_expect(!memcmp(on.ybytes, off.ybytes, (size_t)ny * esz), "case %zu dt %d: outputs differ", c, dt);
                /* overlapping windows under grad_req add: the fused op adds
                 * each window's share into dx, the unfused relu adds their
                 * sum (rounding only; both are checked below) */
                int overlap = pc->kh > pc->sh || pc->kw > pc->sw;
                if (!(overlap && rq))
                    cr_expect(!memcmp(on.dxbytes, off.dxbytes, NEL * esz), "case %zu dt %d req %d: gradients differ", c,
                              dt, req);
                /* inputs and dy are exact in float32; the gradient sums
                 * at most 4 of them (the rounding of float32's adds) */
                double tol = dt == MXP_DTYPE_F64 ? 1e-15 : 1e-6;
                for (int i = 0; i < ny; i++)
                    cr_expect(on.y[i] == y_ref[i], "case %zu dt %d: y[%d] = %g, want %g", c, dt, i, on.y[i], y_ref[i]);
                for (int i = 0; i < NEL; i++) {
                    double want = dx_ref[i] * (rq ? 2 : 1);
                    cr_expect(fabs(off.dx[i] - want) <= tol, "case %zu dt %d req %d: unfused dx[%d] = %.9g, want %.9g",
                              c, dt, req, i, off.dx[i], want);
                    cr_expect(fabs(on.dx[i] - want) <= tol, "case %zu dt %d req %d: dx[%d] = %.9g, want %.9g", c, dt,
                              req, i, on.dx[i], want);
                }
                run_free(&on);
                run_free(&off);
            }
        mxp_symbol_release(sym);
    }
}

/* The data has the cases that matter for the gate and the routing. */
Test(fuse_pool, data_has_ties_zeros_and_non_positive_windows) {
    double x[NEL], dy[NEL];
    data(x, dy, 0);
    int ties = 0, nonpos = 0, zeros = 0;
    for (int pl = 0; pl < N * C; pl++)
        for (int oh = 0; oh < H / 2; oh++)
            for (int ow = 0; ow < W / 2; ow++) {
                const double *r0 = x + (pl * H + 2 * oh) * W + 2 * ow, *r1 = r0 + W;
                double m = fmax(fmax(r0[0], r0[1]), fmax(r1[0], r1[1]));
                int eq = (r0[0] == m) + (r0[1] == m) + (r1[0] == m) + (r1[1] == m);
                ties += m > 0 && eq > 1;
                nonpos += m <= 0;
            }
    for (int i = 0; i < NEL; i++) zeros += x[i] == 0;
    cr_expect_gt(ties, 3);
    cr_expect_gt(nonpos, 3);
    cr_expect_gt(zeros, 10);
}

/* A ReLU whose output is also a head, and avg pooling, stay unfused. */
Test(fuse_pool, not_fused_when_relu_is_read_twice_or_pooling_is_avg) {
    const pcase pc = {2, 2, 2, 2, 0, 0};
    const char *names[] = {"x"};
    const mxp_shape xs = {.ndim = 4, .dims = {N, C, H, W}};
    mxp_symbol *avg = relu_pool(&pc, "avg");
    mxp_executor *ex = et_bind(avg, MXP_DTYPE_F32, 1, names, &xs, 5, MXP_REQ_WRITE, NULL, 0);
    cr_expect(mxp__executor_node(ex, "relu") != NULL, "avg pooling keeps its relu");
    mxp_executor_free(ex);
    mxp_symbol_release(avg);

    mxp_symbol *x = gt_var("x");
    mxp_symbol *r = gt_op("Activation", "relu", 1, &x, "act_type=relu", NULL);
    mxp_symbol *p = gt_op("Pooling", "pool", 1, &r, "kernel=(2, 2)", "stride=(2, 2)", "pool_type=max", NULL);
    mxp_symbol *g = NULL;
    cr_assert_eq(mxp_symbol_group(2, (mxp_symbol *[]){p, r}, &g), MXP_OK, "%s", mxp_last_error());
    ex = et_bind(g, MXP_DTYPE_F32, 1, names, &xs, 5, MXP_REQ_WRITE, NULL, 0);
    cr_expect(mxp__executor_node(ex, "relu") != NULL, "a relu that is also a head is kept");
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK, "%s", mxp_last_error());
    mxp_executor_free(ex);
    mxp_symbol *all[] = {x, r, p, g};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mxp_symbol_release(all[i]);
}
