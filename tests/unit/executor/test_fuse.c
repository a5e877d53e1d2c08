/* test_fuse.c — the executor's fusion pass (executor/fuse.c) and the op it
 * makes, _mxp_BatchNormReLU (ops-nn batchnorm.c):
 *   - a graph with a fusable pair, a pair behind a convolution and a
 *     BatchNorm whose output has a second reader (not fusable): fused
 *     (default) and unfused (MXP_EXEC_FUSE=0) give the same outputs,
 *     argument gradients and moving statistics, float32 and float64,
 *     training and inference, grad_req write and add; only the fusable
 *     BatchNorm nodes disappear;
 *   - the fused op against BatchNorm + ReLU computed here in float64
 *     (forward and all three gradients), for float32 and float64;
 *   - float64 gradients against central finite differences. */
#include "exec_test_util.h"

#include "executor/executor.h"

#define N 3
#define C 4
#define H 5
#define W 7 /* S = 35: two 16-float vectors and a tail */
#define NEL (N * C * H * W)

/* x -> bn1 -> relu1 -> conv -> bn2 (fix_gamma, use_global_stats) -> relu2 = r2;
 * x -> bn3 -> relu3;
 * out = r2 + (bn3 + relu3): bn3's output has two readers. */
static mxp_symbol *net(void) {
    mxp_symbol *x = gt_var("x");
    mxp_symbol *b1 = gt_op("BatchNorm", "bn1", 1, &x, "fix_gamma=False", "eps=1e-5", NULL);
    mxp_symbol *r1 = gt_op("Activation", "relu1", 1, &b1, "act_type=relu", NULL);
    mxp_symbol *cv = gt_op("Convolution", "conv", 1, &r1, "kernel=(3,3)", "pad=(1,1)", "num_filter=4", "no_bias=True", NULL);
    mxp_symbol *b2 = gt_op("BatchNorm", "bn2", 1, &cv, "fix_gamma=True", "use_global_stats=True", NULL);
    mxp_symbol *r2 = gt_op("Activation", "relu2", 1, &b2, "act_type=relu", NULL);
    mxp_symbol *b3 = gt_op("BatchNorm", "bn3", 1, &x, "fix_gamma=True", NULL);
    mxp_symbol *r3 = gt_op("Activation", "relu3", 1, &b3, "act_type=relu", NULL);
    mxp_symbol *t = gt_op("elemwise_add", "t", 2, (mxp_symbol *[]){b3, r3}, NULL);
    mxp_symbol *out = gt_op("elemwise_add", "out", 2, (mxp_symbol *[]){r2, t}, NULL);
    mxp_symbol *all[] = {x, b1, r1, cv, b2, r2, b3, r3, t};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mxp_symbol_release(all[i]);
    return out;
}

static const mxp_shape xshape = {.ndim = 4, .dims = {N, C, H, W}};

/* Everything one run produces, read back as doubles. */
typedef struct result {
    int n;
    double *v[32];
    int64_t len[32];
} result;

static void take(result *r, mxp_ndarray *a) {
    cr_assert_lt(r->n, 32);
    r->len[r->n] = mxp_ndarray_size(a);
    r->v[r->n++] = et_read(a);
}

static void result_free(result *r) {
    for (int i = 0; i < r->n; i++) free(r->v[i]);
}

/* Bind (fusion on or off), run `reps` forward(train) + backward steps,
 * then one inference forward; collect outputs, gradients, aux states. */
static result run(mxp_symbol *sym, int dt, int fuse, int req, int reps, int *fused_bns) {
    setenv("MXP_EXEC_FUSE", fuse ? "1" : "0", 1);
    const char *names[] = {"x"};
    mxp_executor *ex = et_bind(sym, dt, 1, names, &xshape, 11, req, NULL, 0);
    unsetenv("MXP_EXEC_FUSE");
    *fused_bns = !mxp__executor_node(ex, "bn1") + !mxp__executor_node(ex, "bn2") + !mxp__executor_node(ex, "bn3") * 10;
    uint64_t seed = 3;
    mxp_ndarray *hg = et_arr(dt, &xshape, &seed, 1.0);
    result r = {0};
    mxp_ndarray *const *o, *const *a;
    int no, na;
    for (int k = 0; k < reps; k++) {
        cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
        cr_assert_eq(mxp_executor_backward(ex, 1, &hg), MXP_OK, "%s", mxp_last_error());
    }
    cr_assert_eq(mxp_executor_outputs(ex, &no, &o), MXP_OK);
    take(&r, o[0]);
    cr_assert_eq(mxp_executor_grads(ex, &na, &a), MXP_OK);
    for (int i = 0; i < na; i++)
        if (a[i]) take(&r, a[i]);
    cr_assert_eq(mxp_executor_aux(ex, &na, &a), MXP_OK);
    for (int i = 0; i < na; i++) take(&r, a[i]);
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK, "%s", mxp_last_error()); /* moving statistics */
    cr_assert_eq(mxp_executor_outputs(ex, &no, &o), MXP_OK);
    take(&r, o[0]);
    mxp_executor_free(ex);
    mxp_ndarray_release(hg);
    return r;
}

Test(fuse, fused_and_unfused_graphs_agree) {
    mxp_symbol *sym = net();
    for (int dti = 0; dti < 2; dti++)
        for (int rq = 0; rq < 2; rq++) {
            int dt = dti ? MXP_DTYPE_F32 : MXP_DTYPE_F64, req = rq ? MXP_REQ_ADD : MXP_REQ_WRITE, f_on, f_off;
            result on = run(sym, dt, 1, req, rq ? 2 : 1, &f_on), off = run(sym, dt, 0, req, rq ? 2 : 1, &f_off);
            cr_expect_eq(f_on, 2, "fused: bn1 and bn2 gone, bn3 kept (got code %d)", f_on);
            cr_expect_eq(f_off, 0, "MXP_EXEC_FUSE=0 keeps every BatchNorm (got code %d)", f_off);
            cr_assert_eq(on.n, off.n);
            /* float32: the fused op computes its scale and shift from the
             * float32 statistics, BatchNorm from the double ones (an ulp) */
            double tol = dt == MXP_DTYPE_F64 ? 1e-11 : 2e-5;
            for (int k = 0; k < on.n; k++) {
                double worst = 0, scale = 0;
                for (int64_t i = 0; i < on.len[k]; i++) scale = fmax(scale, fabs(off.v[k][i]));
                for (int64_t i = 0; i < on.len[k]; i++) worst = fmax(worst, fabs(on.v[k][i] - off.v[k][i]));
                cr_expect(worst <= tol * (1 + scale), "dt %d req %d array %d: max diff %.3g (scale %.3g)", dt, req, k,
                          worst, scale);
            }
            result_free(&on);
            result_free(&off);
        }
    mxp_symbol_release(sym);
}

/* x -> bn (fix_gamma off) -> relu, the fused op alone. */
static mxp_symbol *pair(void) {
    mxp_symbol *x = gt_var("x");
    mxp_symbol *b = gt_op("BatchNorm", "bn", 1, &x, "fix_gamma=False", "eps=1e-5", NULL);
    mxp_symbol *r = gt_op("Activation", "relu", 1, &b, "act_type=relu", NULL);
    mxp_symbol_release(x);
    mxp_symbol_release(b);
    return r;
}

/* Forward output and gradients of x, gamma, beta in float64 here. */
static void reference(const double *x, const double *g, const double *be, const double *hg, double *y, double *dx,
                      double *dg, double *db) {
    const int S = H * W;
    for (int c = 0; c < C; c++) {
        double m = 0, v = 0, cnt = N * S;
        for (int o = 0; o < N; o++)
            for (int i = 0; i < S; i++) m += x[(o * C + c) * S + i];
        m /= cnt;
        for (int o = 0; o < N; o++)
            for (int i = 0; i < S; i++) v += (x[(o * C + c) * S + i] - m) * (x[(o * C + c) * S + i] - m);
        v /= cnt;
        double inv = 1 / sqrt(v + 1e-5), sg = 0, sgx = 0;
        for (int o = 0; o < N; o++)
            for (int i = 0; i < S; i++) {
                int k = (o * C + c) * S + i;
                double xh = (x[k] - m) * inv, pre = g[c] * xh + be[c];
                y[k] = pre > 0 ? pre : 0;
                double gg = pre > 0 ? hg[k] : 0;
                sg += gg;
                sgx += gg * xh;
            }
        dg[c] = sgx;
        db[c] = sg;
        for (int o = 0; o < N; o++)
            for (int i = 0; i < S; i++) {
                int k = (o * C + c) * S + i;
                double xh = (x[k] - m) * inv, gg = y[k] > 0 ? hg[k] : 0;
                dx[k] = g[c] * inv * (gg - sg / cnt - xh * sgx / cnt);
            }
    }
}

Test(fuse, fused_op_matches_float64_reference) {
    mxp_symbol *sym = pair();
    for (int dti = 0; dti < 2; dti++) {
        int dt = dti ? MXP_DTYPE_F32 : MXP_DTYPE_F64;
        const char *names[] = {"x"};
        mxp_executor *ex = et_bind(sym, dt, 1, names, &xshape, 7, MXP_REQ_WRITE, NULL, 0);
        cr_expect_null(mxp__executor_node(ex, "bn"), "the pair is fused");
        uint64_t seed = 9;
        mxp_ndarray *hg = et_arr(dt, &xshape, &seed, 1.0);
        /* a channel mean far from 0 (the statistics' shift) */
        double *xv = et_read(et_arg(ex, sym, "x", 0));
        for (int i = 0; i < NEL; i++) xv[i] = xv[i] * (1 + i % 3) + (i / (H * W) % C == 2 ? 40.0 : 0.0);
        et_set(et_arg(ex, sym, "x", 0), xv);
        cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
        cr_assert_eq(mxp_executor_backward(ex, 1, &hg), MXP_OK, "%s", mxp_last_error());
        mxp_ndarray *const *o;
        int no;
        cr_assert_eq(mxp_executor_outputs(ex, &no, &o), MXP_OK);
        double *y = et_read(o[0]), *g = et_read(et_arg(ex, sym, "bn_gamma", 0));
        double *be = et_read(et_arg(ex, sym, "bn_beta", 0)), *h = et_read(hg);
        double *dx = et_read(et_arg(ex, sym, "x", 1)), *dg = et_read(et_arg(ex, sym, "bn_gamma", 1));
        double *db = et_read(et_arg(ex, sym, "bn_beta", 1));
        double ry[NEL], rdx[NEL], rdg[C], rdb[C];
        reference(xv, g, be, h, ry, rdx, rdg, rdb);
        double tol = dt == MXP_DTYPE_F64 ? 1e-10 : 2e-4;
        int zeros = 0;
        for (int i = 0; i < NEL; i++) {
            zeros += ry[i] == 0;
            cr_expect(fabs(y[i] - ry[i]) <= tol * (1 + fabs(ry[i])), "dt %d y[%d] %.9g want %.9g", dt, i, y[i], ry[i]);
            cr_expect(fabs(dx[i] - rdx[i]) <= tol * (1 + fabs(rdx[i])), "dt %d dx[%d] %.9g want %.9g", dt, i, dx[i],
                      rdx[i]);
        }
        cr_expect(zeros > NEL / 5 && zeros < NEL * 4 / 5, "the ReLU masks a fair share (%d of %d)", zeros, NEL);
        for (int c = 0; c < C; c++) {
            cr_expect(fabs(dg[c] - rdg[c]) <= tol * 10 * (1 + fabs(rdg[c])), "dt %d dgamma[%d] %.9g want %.9g", dt, c,
                      dg[c], rdg[c]);
            cr_expect(fabs(db[c] - rdb[c]) <= tol * 10 * (1 + fabs(rdb[c])), "dt %d dbeta[%d] %.9g want %.9g", dt, c,
                      db[c], rdb[c]);
        }
        free(xv); free(y); free(g); free(be); free(h); free(dx); free(dg); free(db);
        mxp_ndarray_release(hg);
        mxp_executor_free(ex);
    }
    mxp_symbol_release(sym);
}

/* L = sum(hg * relu(bn(x))) in float64 training mode. */
static double loss(mxp_executor *ex, const double *hv) {
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
    mxp_ndarray *const *o;
    int no;
    cr_assert_eq(mxp_executor_outputs(ex, &no, &o), MXP_OK);
    double *y = et_read(o[0]), l = 0;
    for (int i = 0; i < NEL; i++) l += hv[i] * y[i];
    free(y);
    return l;
}

Test(fuse, fused_gradients_match_finite_differences) {
    mxp_symbol *sym = pair();
    const char *names[] = {"x"};
    mxp_executor *ex = et_bind(sym, MXP_DTYPE_F64, 1, names, &xshape, 5, MXP_REQ_WRITE, NULL, 0);
    cr_expect_null(mxp__executor_node(ex, "bn"), "the pair is fused");
    uint64_t seed = 4;
    mxp_ndarray *hg = et_arr(MXP_DTYPE_F64, &xshape, &seed, 1.0);
    double *hv = et_read(hg);
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_backward(ex, 1, &hg), MXP_OK, "%s", mxp_last_error());
    const char *wrt[] = {"x", "bn_gamma", "bn_beta"};
    for (int w = 0; w < 3; w++) {
        mxp_ndarray *arg = et_arg(ex, sym, wrt[w], 0);
        double *an = et_read(et_arg(ex, sym, wrt[w], 1)), *v = et_read(arg);
        int64_t n = mxp_ndarray_size(arg);
        for (int64_t i = 0; i < n; i += (w == 0 ? 13 : 1)) {
            const double h = 1e-6, keep = v[i];
            v[i] = keep + h;
            et_set(arg, v);
            double lp = loss(ex, hv);
            v[i] = keep - h;
            et_set(arg, v);
            double lm = loss(ex, hv);
            v[i] = keep;
            et_set(arg, v);
            double fd = (lp - lm) / (2 * h);
            cr_expect(fabs(fd - an[i]) <= 1e-5 * (1 + fabs(fd)), "d/d%s[%lld]: analytic %.9g, finite difference %.9g",
                      wrt[w], (long long)i, an[i], fd);
        }
        free(an);
        free(v);
    }
    free(hv);
    mxp_ndarray_release(hg);
    mxp_executor_free(ex);
    mxp_symbol_release(sym);
}

/* ---- BatchNorm + residual add + ReLU (_mxp_BatchNormAddReLU) ---- */

/* x -> bn1 -> relu1 -> conv -> bn2 -> +relu1 -> relu2 (fusable: relu1 comes
 * before bn2) -> conv2 -> bn3 -> + bn_sc(conv_sc(x)) -> relu3 (not: bn_sc
 * comes after bn3, fusing would reorder the aux states). */
static mxp_symbol *residual_net(void) {
    mxp_symbol *x = gt_var("x");
    mxp_symbol *b1 = gt_op("BatchNorm", "bn1", 1, &x, "fix_gamma=False", NULL);
    mxp_symbol *r1 = gt_op("Activation", "relu1", 1, &b1, "act_type=relu", NULL);
    mxp_symbol *cv = gt_op("Convolution", "conv", 1, &r1, "kernel=(3,3)", "pad=(1,1)", "num_filter=4", "no_bias=True", NULL);
    mxp_symbol *b2 = gt_op("BatchNorm", "bn2", 1, &cv, "fix_gamma=False", NULL);
    mxp_symbol *p2 = gt_op("elemwise_add", "plus2", 2, (mxp_symbol *[]){b2, r1}, NULL);
    mxp_symbol *r2 = gt_op("Activation", "relu2", 1, &p2, "act_type=relu", NULL);
    mxp_symbol *c2 = gt_op("Convolution", "conv2", 1, &r2, "kernel=(3,3)", "pad=(1,1)", "num_filter=4", "no_bias=True", NULL);
    mxp_symbol *b3 = gt_op("BatchNorm", "bn3", 1, &c2, "fix_gamma=False", NULL);
    mxp_symbol *cs = gt_op("Convolution", "conv_sc", 1, &x, "kernel=(1,1)", "num_filter=4", "no_bias=True", NULL);
    mxp_symbol *bs = gt_op("BatchNorm", "bn_sc", 1, &cs, "fix_gamma=False", NULL);
    mxp_symbol *p3 = gt_op("elemwise_add", "plus3", 2, (mxp_symbol *[]){b3, bs}, NULL);
    mxp_symbol *r3 = gt_op("Activation", "relu3", 1, &p3, "act_type=relu", NULL);
    mxp_symbol *all[] = {x, b1, r1, cv, b2, p2, r2, c2, b3, cs, bs, p3};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mxp_symbol_release(all[i]);
    return r3;
}

Test(fuse, residual_fused_and_unfused_graphs_agree) {
    mxp_symbol *sym = residual_net();
    for (int dti = 0; dti < 2; dti++) {
        int dt = dti ? MXP_DTYPE_F32 : MXP_DTYPE_F64;
        result r[2];
        for (int f = 0; f < 2; f++) {
            setenv("MXP_EXEC_FUSE", f ? "1" : "0", 1);
            const char *names[] = {"x"};
            mxp_executor *ex = et_bind(sym, dt, 1, names, &xshape, 21, MXP_REQ_WRITE, NULL, 0);
            unsetenv("MXP_EXEC_FUSE");
            const char *gone[] = {"bn1", "bn2", "plus2"}, *kept[] = {"bn3", "bn_sc", "plus3", "conv", "conv2"};
            for (int k = 0; k < 3; k++)
                cr_expect_eq(!mxp__executor_node(ex, gone[k]), f, "fuse=%d: node %s", f, gone[k]);
            for (int k = 0; k < 5; k++) cr_expect_not_null(mxp__executor_node(ex, kept[k]), "fuse=%d: node %s", f, kept[k]);
            uint64_t seed = 8;
            mxp_ndarray *hg = et_arr(dt, &xshape, &seed, 1.0);
            mxp_ndarray *const *o, *const *a;
            int no, na;
            cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
            cr_assert_eq(mxp_executor_backward(ex, 1, &hg), MXP_OK, "%s", mxp_last_error());
            memset(&r[f], 0, sizeof r[f]);
            cr_assert_eq(mxp_executor_outputs(ex, &no, &o), MXP_OK);
            take(&r[f], o[0]);
            cr_assert_eq(mxp_executor_grads(ex, &na, &a), MXP_OK);
            for (int i = 0; i < na; i++) take(&r[f], a[i]);
            cr_assert_eq(mxp_executor_aux(ex, &na, &a), MXP_OK);
            for (int i = 0; i < na; i++) take(&r[f], a[i]);
            mxp_executor_free(ex);
            mxp_ndarray_release(hg);
        }
        cr_assert_eq(r[0].n, r[1].n);
        double tol = dt == MXP_DTYPE_F64 ? 1e-11 : 2e-5;
        for (int k = 0; k < r[0].n; k++) {
            double worst = 0, scale = 0;
            for (int64_t i = 0; i < r[0].len[k]; i++) scale = fmax(scale, fabs(r[0].v[k][i]));
            for (int64_t i = 0; i < r[0].len[k]; i++) worst = fmax(worst, fabs(r[1].v[k][i] - r[0].v[k][i]));
            cr_expect(worst <= tol * (1 + scale), "dt %d array %d: max diff %.3g (scale %.3g)", dt, k, worst, scale);
        }
        result_free(&r[0]);
        result_free(&r[1]);
    }
    mxp_symbol_release(sym);
}

/* The op on its own: y = relu(bn(x) + r) with r an argument; float64
 * gradients of x, gamma, beta and r against finite differences, and
 * grad_req add: two backward passes give twice one pass's gradients. */
static mxp_symbol *add_op(void) {
    mxp_symbol *in[] = {gt_var("x"), gt_var("bar_gamma"), gt_var("bar_beta"), gt_var("r")};
    mxp_symbol *y = gt_op("_mxp_BatchNormAddReLU", "bar", 4, in, "fix_gamma=False", "eps=1e-5", NULL);
    for (int i = 0; i < 4; i++) mxp_symbol_release(in[i]);
    return y;
}

Test(fuse, residual_op_gradients_match_finite_differences) {
    mxp_symbol *sym = add_op();
    const char *names[] = {"x"};
    mxp_executor *ex = et_bind(sym, MXP_DTYPE_F64, 1, names, &xshape, 6, MXP_REQ_WRITE, NULL, 0);
    uint64_t seed = 12;
    mxp_ndarray *hg = et_arr(MXP_DTYPE_F64, &xshape, &seed, 1.0);
    double *hv = et_read(hg);
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_backward(ex, 1, &hg), MXP_OK, "%s", mxp_last_error());
    const char *wrt[] = {"x", "bar_gamma", "bar_beta", "r"};
    for (int w = 0; w < 4; w++) {
        mxp_ndarray *arg = et_arg(ex, sym, wrt[w], 0);
        double *an = et_read(et_arg(ex, sym, wrt[w], 1)), *v = et_read(arg);
        int64_t n = mxp_ndarray_size(arg);
        for (int64_t i = 0; i < n; i += (n > C ? 11 : 1)) {
            const double h = 1e-6, keep = v[i];
            v[i] = keep + h;
            et_set(arg, v);
            double lp = loss(ex, hv);
            v[i] = keep - h;
            et_set(arg, v);
            double lm = loss(ex, hv);
            v[i] = keep;
            et_set(arg, v);
            double fd = (lp - lm) / (2 * h);
            cr_expect(fabs(fd - an[i]) <= 1e-5 * (1 + fabs(fd)), "d/d%s[%lld]: analytic %.9g, finite difference %.9g",
                      wrt[w], (long long)i, an[i], fd);
        }
        free(an);
        free(v);
    }
    free(hv);
    mxp_ndarray_release(hg);
    mxp_executor_free(ex);
    mxp_symbol_release(sym);
}

Test(fuse, residual_op_grad_req_add_accumulates) {
    mxp_symbol *sym = add_op();
    const char *names[] = {"x"}, *wrt[] = {"x", "bar_gamma", "bar_beta", "r"};
    for (int dti = 0; dti < 2; dti++) {
        int dt = dti ? MXP_DTYPE_F32 : MXP_DTYPE_F64;
        double *once[4], *twice[4];
        for (int rq = 0; rq < 2; rq++) {
            mxp_executor *ex = et_bind(sym, dt, 1, names, &xshape, 6, rq ? MXP_REQ_ADD : MXP_REQ_WRITE, NULL, 0);
            uint64_t seed = 12;
            mxp_ndarray *hg = et_arr(dt, &xshape, &seed, 1.0);
            for (int k = 0; k <= rq; k++) {
                cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
                cr_assert_eq(mxp_executor_backward(ex, 1, &hg), MXP_OK, "%s", mxp_last_error());
            }
            for (int w = 0; w < 4; w++) (rq ? twice : once)[w] = et_read(et_arg(ex, sym, wrt[w], 1));
            mxp_ndarray_release(hg);
            mxp_executor_free(ex);
        }
        for (int w = 0; w < 4; w++) {
            int64_t n = w == 1 || w == 2 ? C : NEL;
            double nz = 0;
            for (int64_t i = 0; i < n; i++) {
                nz += fabs(once[w][i]);
                cr_expect(fabs(twice[w][i] - 2 * once[w][i]) <= 1e-5 * (1 + fabs(once[w][i])),
                          "dt %d %s[%lld]: add %.9g, write %.9g", dt, wrt[w], (long long)i, twice[w][i], once[w][i]);
            }
            cr_expect(nz > 0, "dt %d: %s's gradient is not all zero", dt, wrt[w]);
            free(once[w]);
            free(twice[w]);
        }
    }
    mxp_symbol_release(sym);
}

/* Reshape re-infers the fused graph's shapes (the fused ops' own shape
 * functions): a batch of 2 after binding a batch of 3 gives the same
 * output fused and unfused. */
Test(fuse, reshape_keeps_fused_and_unfused_in_step) {
    mxp_symbol *sym = residual_net();
    const mxp_shape small = {.ndim = 4, .dims = {2, C, H, W}};
    double *y[2];
    for (int f = 0; f < 2; f++) {
        setenv("MXP_EXEC_FUSE", f ? "1" : "0", 1);
        const char *names[] = {"x"};
        mxp_executor *ex = et_bind(sym, MXP_DTYPE_F32, 1, names, &xshape, 4, MXP_REQ_WRITE, NULL, 0);
        unsetenv("MXP_EXEC_FUSE");
        cr_assert_eq(mxp_executor_reshape(ex, 1, names, &small), MXP_OK, "%s", mxp_last_error());
        cr_expect_eq(!mxp__executor_node(ex, "bn2"), f, "fuse=%d", f);
        uint64_t seed = 77;
        mxp_ndarray *xs = et_arr(MXP_DTYPE_F32, &small, &seed, 1.0);
        double *xv = et_read(xs);
        et_set(et_arg(ex, sym, "x", 0), xv);
        mxp_ndarray *hg = et_arr(MXP_DTYPE_F32, &small, &seed, 1.0);
        cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
        cr_assert_eq(mxp_executor_backward(ex, 1, &hg), MXP_OK, "%s", mxp_last_error());
        mxp_ndarray *const *o;
        int no;
        cr_assert_eq(mxp_executor_outputs(ex, &no, &o), MXP_OK);
        cr_assert_eq(mxp_ndarray_size(o[0]), 2 * C * H * W);
        y[f] = et_read(o[0]);
        free(xv);
        mxp_ndarray_release(xs);
        mxp_ndarray_release(hg);
        mxp_executor_free(ex);
    }
    for (int i = 0; i < 2 * C * H * W; i++)
        cr_expect(fabs(y[1][i] - y[0][i]) <= 2e-5 * (1 + fabs(y[0][i])), "y[%d]: fused %.9g, unfused %.9g", i, y[1][i],
                  y[0][i]);
    free(y[0]);
    free(y[1]);
    mxp_symbol_release(sym);
}

/* A policy that names an implementation of BatchNorm or Activation (the
 * user chose what runs) keeps the user's graph: fusion would bypass it. */
static int bns_fused_with(const char *op, const char *policy) {
    mxp_symbol *sym = net();
    cr_assert_eq(mxp_op_set_impl(op, policy), MXP_OK, "%s", mxp_last_error());
    const char *names[] = {"x"};
    mxp_executor *ex = et_bind(sym, MXP_DTYPE_F32, 1, names, &xshape, 11, MXP_REQ_WRITE, NULL, 0);
    cr_assert_eq(mxp_op_set_impl(op, NULL), MXP_OK);
    int fused = !mxp__executor_node(ex, "bn1") + !mxp__executor_node(ex, "bn2");
    mxp_executor_free(ex);
    mxp_symbol_release(sym);
    return fused;
}

Test(fuse, a_chosen_implementation_is_not_bypassed) {
    cr_expect_eq(bns_fused_with("BatchNorm", "default"), 0, "BatchNorm=default chosen: nothing fused");
    cr_expect_eq(bns_fused_with("Activation", "default"), 0, "Activation=default chosen: nothing fused");
    cr_expect_eq(bns_fused_with("BatchNorm", "auto"), 2, "auto: bn1 and bn2 fused");
    cr_expect_eq(bns_fused_with("Activation", "tune"), 2, "tune: bn1 and bn2 fused");
}
