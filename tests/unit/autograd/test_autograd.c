/* test_autograd.c — imperative autograd (<mxplug/autograd.h>):
 *   - LeNet gradients recorded op by op equal the graph executor's bit for
 *     bit (same ops, same implementations, same backward program);
 *   - gradients of a small float64 expression against central finite
 *     differences computed here;
 *   - grad_req write / add, head gradients, retain_graph, the tape cleared
 *     by a new recording scope, not recording, in-place change detection,
 *     bad heads, executor steps. */
#include "../executor/exec_test_util.h"

static mxp_ndarray *invoke1(const char *op, int n_in, mxp_ndarray *const *in, const char *k, const char *v) {
    mxp_ndarray *out = NULL;
    int n_out = 1;
    const char *keys[1] = {k}, *vals[1] = {v};
    cr_assert_eq(mxp_invoke(op, n_in, in, &n_out, &out, k ? 1 : 0, keys, vals), MXP_OK, "%s: %s", op,
                 mxp_last_error());
    return out;
}

static mxp_ndarray *invoke_kw(const char *op, int n_in, mxp_ndarray *const *in, int n_kw, const char *const *keys,
                              const char *const *vals) {
    mxp_ndarray *out = NULL;
    int n_out = 1;
    cr_assert_eq(mxp_invoke(op, n_in, in, &n_out, &out, n_kw, keys, vals), MXP_OK, "%s: %s", op, mxp_last_error());
    return out;
}

static mxp_ndarray *zeros_like(mxp_ndarray *a) {
    mxp_ndarray *z = NULL;
    cr_assert_eq(mxp_ndarray_create(mxp_ndarray_shape(a), mxp_ndarray_ndim(a), mxp_ndarray_dtype(a), et_cpu, &z),
                 MXP_OK);
    cr_assert_eq(mxp_ndarray_fill(z, 0.0), MXP_OK);
    return z;
}

static void teardown(void) {
    mxp_autograd_set_recording(0, NULL);
    mxp_autograd_set_training(0, NULL);
    mxp_autograd_clear_variables();
}

TestSuite(autograd, .fini = teardown);

static mxp_symbol *lenet(void) {
    mxp_symbol *d = gt_var("data");
    mxp_symbol *c1 = gt_op("Convolution", "c1", 1, &d, "kernel=(5,5)", "num_filter=6", NULL);
    mxp_symbol *a1 = gt_op("Activation", "a1", 1, &c1, "act_type=tanh", NULL);
    mxp_symbol *p1 = gt_op("Pooling", "p1", 1, &a1, "kernel=(2,2)", "stride=(2,2)", "pool_type=max", NULL);
    mxp_symbol *c2 = gt_op("Convolution", "c2", 1, &p1, "kernel=(5,5)", "num_filter=16", NULL);
    mxp_symbol *a2 = gt_op("Activation", "a2", 1, &c2, "act_type=tanh", NULL);
    mxp_symbol *p2 = gt_op("Pooling", "p2", 1, &a2, "kernel=(2,2)", "stride=(2,2)", "pool_type=max", NULL);
    mxp_symbol *f = gt_op("Flatten", "f", 1, &p2, NULL);
    mxp_symbol *f1 = gt_op("FullyConnected", "fc1", 1, &f, "num_hidden=120", NULL);
    mxp_symbol *a3 = gt_op("Activation", "a3", 1, &f1, "act_type=tanh", NULL);
    mxp_symbol *f2 = gt_op("FullyConnected", "fc2", 1, &a3, "num_hidden=10", NULL);
    mxp_symbol *sm = gt_op("SoftmaxOutput", "softmax", 1, &f2, NULL);
    mxp_symbol *all[] = {d, c1, a1, p1, c2, a2, p2, f, f1, a3, f2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mxp_symbol_release(all[i]);
    return sm;
}

Test(autograd, lenet_gradients_equal_the_executors_bit_for_bit) {
    mxp_symbol *sym = lenet();
    const char *names[] = {"data"};
    mxp_shape shp = {.ndim = 4, .dims = {8, 1, 28, 28}};
    mxp_executor *ex = et_bind(sym, MXP_DTYPE_F32, 1, names, &shp, 42, MXP_REQ_WRITE, "softmax_label", 10);
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());

    static const char *params[] = {"c1_weight", "c1_bias", "c2_weight", "c2_bias",
                                   "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"};
    mxp_ndarray *p[8], *g[8];
    for (int i = 0; i < 8; i++) {
        p[i] = et_arg(ex, sym, params[i], 0);
        g[i] = zeros_like(p[i]);
    }
    cr_assert_eq(mxp_autograd_mark_variables(8, p, NULL, g), MXP_OK, "%s", mxp_last_error());
    mxp_ndarray *x = et_arg(ex, sym, "data", 0), *label = et_arg(ex, sym, "softmax_label", 0);
    cr_assert_eq(mxp_autograd_set_recording(1, NULL), MXP_OK);
    cr_assert_eq(mxp_autograd_set_training(1, NULL), MXP_OK);
    const char *ck[] = {"kernel", "num_filter"}, *c1v[] = {"(5,5)", "6"}, *c2v[] = {"(5,5)", "16"};
    const char *pk[] = {"kernel", "stride", "pool_type"}, *pv[] = {"(2,2)", "(2,2)", "max"};
    mxp_ndarray *in3[3] = {x, p[0], p[1]};
    mxp_ndarray *h1 = invoke_kw("Convolution", 3, in3, 2, ck, c1v);
    mxp_ndarray *h2 = invoke1("Activation", 1, &h1, "act_type", "tanh");
    mxp_ndarray *h3 = invoke_kw("Pooling", 1, &h2, 3, pk, pv);
    mxp_ndarray *in3b[3] = {h3, p[2], p[3]};
    mxp_ndarray *h4 = invoke_kw("Convolution", 3, in3b, 2, ck, c2v);
    mxp_ndarray *h5 = invoke1("Activation", 1, &h4, "act_type", "tanh");
    mxp_ndarray *h6 = invoke_kw("Pooling", 1, &h5, 3, pk, pv);
    mxp_ndarray *h7 = invoke1("Flatten", 1, &h6, NULL, NULL);
    mxp_ndarray *in3c[3] = {h7, p[4], p[5]};
    mxp_ndarray *h8 = invoke1("FullyConnected", 3, in3c, "num_hidden", "120");
    mxp_ndarray *h9 = invoke1("Activation", 1, &h8, "act_type", "tanh");
    mxp_ndarray *in3d[3] = {h9, p[6], p[7]};
    mxp_ndarray *h10 = invoke1("FullyConnected", 3, in3d, "num_hidden", "10");
    mxp_ndarray *in2[2] = {h10, label};
    mxp_ndarray *out = invoke1("SoftmaxOutput", 2, in2, NULL, NULL);
    cr_assert_eq(mxp_autograd_set_recording(0, NULL), MXP_OK);
    cr_assert_eq(mxp_autograd_tape_size(), 11);
    cr_assert_eq(mxp_autograd_backward(1, &out, NULL, 0), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_autograd_tape_size(), 0, "backward without retain_graph clears the tape");
    for (int i = 0; i < 8; i++) {
        mxp_ndarray *eg = et_arg(ex, sym, params[i], 1);
        void *a = et_bytes(eg), *b = et_bytes(g[i]);
        cr_assert(!memcmp(a, b, mxp_ndarray_nbytes(eg)), "gradient of %s differs from the executor's", params[i]);
        free(a);
        free(b);
    }
    mxp_ndarray *hs[] = {h1, h2, h3, h4, h5, h6, h7, h8, h9, h10, out};
    for (size_t i = 0; i < sizeof hs / sizeof *hs; i++) mxp_ndarray_release(hs[i]);
    for (int i = 0; i < 8; i++) mxp_ndarray_release(g[i]);
    mxp_autograd_clear_variables();
    mxp_executor_free(ex);
    mxp_symbol_release(sym);
}

/* f(x, w) = sum(sigmoid(x * w) * x + x / w), float64. */
static double f_of(const double *x, const double *w, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i] / (1.0 + exp(-x[i] * w[i])) + x[i] / w[i];
    return s;
}

Test(autograd, gradients_match_finite_differences) {
    enum { N = 6 };
    mxp_shape s = {.ndim = 2, .dims = {2, 3}};
    uint64_t seed = 7;
    mxp_ndarray *x = et_arr(MXP_DTYPE_F64, &s, &seed, 1.0), *w = et_arr(MXP_DTYPE_F64, &s, NULL, 0.0);
    double wv[N];
    for (int i = 0; i < N; i++) wv[i] = 0.5 + 0.25 * i;
    et_set(w, wv);
    mxp_ndarray *gx = zeros_like(x), *gw = zeros_like(w);
    mxp_ndarray *vars[2] = {x, w}, *grads[2] = {gx, gw};
    cr_assert_eq(mxp_autograd_mark_variables(2, vars, NULL, grads), MXP_OK, "%s", mxp_last_error());
    mxp_autograd_set_recording(1, NULL);
    mxp_ndarray *xw = invoke1("elemwise_mul", 2, vars, NULL, NULL);
    mxp_ndarray *sg = invoke1("sigmoid", 1, &xw, NULL, NULL);
    mxp_ndarray *a[2] = {sg, x};
    mxp_ndarray *t1 = invoke1("elemwise_mul", 2, a, NULL, NULL);
    mxp_ndarray *t2 = invoke1("elemwise_div", 2, vars, NULL, NULL);
    mxp_ndarray *b[2] = {t1, t2};
    mxp_ndarray *t3 = invoke1("elemwise_add", 2, b, NULL, NULL);
    mxp_ndarray *y = invoke1("sum", 1, &t3, NULL, NULL);
    mxp_autograd_set_recording(0, NULL);
    cr_assert_eq(mxp_autograd_backward(1, &y, NULL, 0), MXP_OK, "%s", mxp_last_error());
    double *xs = et_read(x), *dx = et_read(gx), *dw = et_read(gw);
    const double h = 1e-6;
    for (int i = 0; i < N; i++) {
        double xp[N], xm[N], wp[N], wm[N];
        memcpy(xp, xs, sizeof xp);
        memcpy(xm, xs, sizeof xm);
        memcpy(wp, wv, sizeof wp);
        memcpy(wm, wv, sizeof wm);
        xp[i] += h;
        xm[i] -= h;
        wp[i] += h;
        wm[i] -= h;
        double nx = (f_of(xp, wv, N) - f_of(xm, wv, N)) / (2 * h);
        double nw = (f_of(xs, wp, N) - f_of(xs, wm, N)) / (2 * h);
        cr_assert(fabs(nx - dx[i]) < 1e-6 * (1 + fabs(nx)), "d/dx[%d]: %.12g vs finite difference %.12g", i, dx[i], nx);
        cr_assert(fabs(nw - dw[i]) < 1e-6 * (1 + fabs(nw)), "d/dw[%d]: %.12g vs finite difference %.12g", i, dw[i], nw);
    }
    free(xs);
    free(dx);
    free(dw);
    mxp_ndarray *all[] = {x, w, gx, gw, xw, sg, t1, t2, t3, y};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mxp_ndarray_release(all[i]);
}

/* y = x * 3 (x used once) and z = x * x (used twice in one op). */
Test(autograd, grad_req_add_head_grads_and_retain_graph) {
    mxp_shape s = {.ndim = 1, .dims = {4}};
    uint64_t seed = 3;
    mxp_ndarray *x = et_arr(MXP_DTYPE_F32, &s, &seed, 1.0), *gx = zeros_like(x);
    int req = MXP_REQ_ADD;
    cr_assert_eq(mxp_autograd_mark_variables(1, &x, &req, &gx), MXP_OK);
    mxp_autograd_set_recording(1, NULL);
    mxp_ndarray *xx[2] = {x, x};
    mxp_ndarray *z = invoke1("elemwise_mul", 2, xx, NULL, NULL);
    mxp_autograd_set_recording(0, NULL);
    mxp_ndarray *head = et_arr(MXP_DTYPE_F32, &s, NULL, 0.5);
    cr_assert_eq(mxp_autograd_backward(1, &z, &head, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_autograd_backward(1, &z, &head, 0), MXP_OK, "retain_graph keeps the tape: %s", mxp_last_error());
    double *xs = et_read(x), *g = et_read(gx);
    for (int i = 0; i < 4; i++) /* two backward passes of 0.5 * 2x, added */
        cr_assert_float_eq(g[i], 2.0 * (double)(float)(0.5f * (2.0f * (float)xs[i])), 1e-6, "[%d] %g", i, g[i]);
    cr_assert_neq(mxp_autograd_backward(1, &z, &head, 0), MXP_OK, "the tape was cleared");
    cr_assert(strstr(mxp_last_error(), "tape is empty"), "%s", mxp_last_error());
    free(xs);
    free(g);
    mxp_ndarray *all[] = {x, gx, z, head};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mxp_ndarray_release(all[i]);
}

Test(autograd, not_recording_records_nothing_and_a_new_scope_starts_a_new_tape) {
    mxp_shape s = {.ndim = 1, .dims = {3}};
    mxp_ndarray *x = et_arr(MXP_DTYPE_F32, &s, NULL, 2.0), *gx = zeros_like(x);
    cr_assert_eq(mxp_autograd_mark_variables(1, &x, NULL, &gx), MXP_OK);
    mxp_ndarray *a = invoke1("square", 1, &x, NULL, NULL);
    cr_assert_eq(mxp_autograd_tape_size(), 0);
    mxp_autograd_set_recording(1, NULL);
    mxp_ndarray *b = invoke1("square", 1, &x, NULL, NULL);
    mxp_ndarray *c = invoke1("square", 1, &a, NULL, NULL); /* a is a constant: not recorded */
    cr_assert_eq(mxp_autograd_tape_size(), 1);
    mxp_autograd_set_recording(0, NULL);
    mxp_autograd_set_recording(1, NULL);
    cr_assert_eq(mxp_autograd_tape_size(), 0);
    mxp_autograd_set_recording(0, NULL);
    cr_assert_eq(mxp_autograd_backward(1, &c, NULL, 0), MXP_EINVAL, "a head not computed from variables");
    mxp_ndarray *all[] = {x, gx, a, b, c};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mxp_ndarray_release(all[i]);
}

Test(autograd, overwriting_a_recorded_input_is_refused_at_backward) {
    mxp_shape s = {.ndim = 1, .dims = {3}};
    mxp_ndarray *x = et_arr(MXP_DTYPE_F32, &s, NULL, 2.0), *gx = zeros_like(x);
    cr_assert_eq(mxp_autograd_mark_variables(1, &x, NULL, &gx), MXP_OK);
    mxp_autograd_set_recording(1, NULL);
    mxp_ndarray *y = invoke1("square", 1, &x, NULL, NULL);
    mxp_autograd_set_recording(0, NULL);
    cr_assert_eq(mxp_ndarray_fill(x, 5.0), MXP_OK);
    cr_assert_eq(mxp_autograd_backward(1, &y, NULL, 1), MXP_EMISUSE);
    cr_assert(strstr(mxp_last_error(), "overwritten"), "%s", mxp_last_error());
    /* In place on a variable while recording: refused at once. */
    mxp_autograd_set_recording(1, NULL);
    mxp_ndarray *io = x;
    int n_out = 1;
    cr_assert_eq(mxp_invoke("square", 1, &x, &n_out, &io, 0, NULL, NULL), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "in place"), "%s", mxp_last_error());
    mxp_autograd_set_recording(0, NULL);
    mxp_ndarray *all[] = {x, gx, y};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mxp_ndarray_release(all[i]);
}

Test(autograd, bad_arguments_are_errors) {
    mxp_shape s = {.ndim = 1, .dims = {3}}, s2 = {.ndim = 1, .dims = {4}};
    mxp_ndarray *x = et_arr(MXP_DTYPE_F32, &s, NULL, 1.0), *g = et_arr(MXP_DTYPE_F32, &s2, NULL, 0.0);
    cr_assert_eq(mxp_autograd_mark_variables(1, &x, NULL, &g), MXP_EINVAL, "shapes differ");
    int bad = 7;
    mxp_ndarray *g3 = zeros_like(x);
    cr_assert_eq(mxp_autograd_mark_variables(1, &x, &bad, &g3), MXP_EINVAL);
    cr_assert_eq(mxp_autograd_backward(0, NULL, NULL, 0), MXP_EINVAL);
    mxp_ndarray *none = NULL;
    cr_assert_eq(mxp_autograd_backward(1, &none, NULL, 0), MXP_EINVAL);
    mxp_ndarray *out = NULL;
    cr_assert_eq(mxp_autograd_grad(x, &out), MXP_ENOENT);
    cr_assert_null(out);
    cr_assert_eq(mxp_autograd_mark_variables(1, &x, NULL, &g3), MXP_OK);
    cr_assert_eq(mxp_autograd_grad(x, &out), MXP_OK);
    cr_assert_eq(out, g3);
    mxp_ndarray_release(out);
    cr_assert_eq(mxp_autograd_unmark(x), MXP_OK);
    cr_assert_eq(mxp_autograd_grad(x, &out), MXP_ENOENT);
    mxp_ndarray *all[] = {x, g, g3};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mxp_ndarray_release(all[i]);
}

/* A bound MLP recorded as one step, followed by imperative ops. */
Test(autograd, executor_steps_chain_with_ops) {
    mxp_symbol *d = gt_var("data");
    mxp_symbol *fc = gt_op("FullyConnected", "fc", 1, &d, "num_hidden=3", NULL);
    const char *names[] = {"data"};
    mxp_shape shp = {.ndim = 2, .dims = {2, 4}};
    mxp_executor *ex = et_bind(fc, MXP_DTYPE_F64, 1, names, &shp, 5, MXP_REQ_WRITE, NULL, 0);
    int n;
    mxp_ndarray *const *args;
    cr_assert_eq(mxp_executor_args(ex, &n, &args), MXP_OK);
    cr_assert_eq(n, 3);
    mxp_ndarray *gw = zeros_like(args[1]);
    cr_assert_eq(mxp_autograd_mark_variables(1, &args[1], NULL, &gw), MXP_OK);
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK);
    mxp_ndarray *const *outs;
    cr_assert_eq(mxp_executor_outputs(ex, &n, &outs), MXP_OK);
    mxp_ndarray *o = zeros_like(outs[0]);
    cr_assert_eq(mxp_ndarray_copy(outs[0], o), MXP_OK);
    mxp_autograd_set_recording(1, NULL);
    cr_assert_eq(mxp_autograd_record_executor(ex, 3, args, 1, &o), MXP_OK, "%s", mxp_last_error());
    mxp_ndarray *sq = invoke1("square", 1, &o, NULL, NULL);
    mxp_ndarray *y = invoke1("sum", 1, &sq, NULL, NULL);
    mxp_autograd_set_recording(0, NULL);
    cr_assert_eq(mxp_autograd_backward(1, &y, NULL, 1), MXP_OK, "%s", mxp_last_error());
    /* d/dW sum((xW^T + b)^2) = 2 (xW^T + b)^T x */
    double *x = et_read(args[0]), *ov = et_read(o), *g = et_read(gw);
    for (int j = 0; j < 3; j++)
        for (int k = 0; k < 4; k++) {
            double e = 0;
            for (int r = 0; r < 2; r++) e += 2 * ov[r * 3 + j] * x[r * 4 + k];
            cr_assert_float_eq(g[j * 4 + k], e, 1e-9, "dW[%d,%d] %g vs %g", j, k, g[j * 4 + k], e);
        }
    free(x);
    free(ov);
    free(g);
    /* Freed executor: its step fails cleanly. */
    mxp_executor_free(ex);
    cr_assert_eq(mxp_autograd_backward(1, &y, NULL, 0), MXP_EMISUSE);
    cr_assert(strstr(mxp_last_error(), "freed"), "%s", mxp_last_error());
    mxp_ndarray *all[] = {gw, o, sq, y};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mxp_ndarray_release(all[i]);
    mxp_symbol_release(d);
    mxp_symbol_release(fc);
}
