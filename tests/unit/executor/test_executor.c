/* test_executor.c — running bound graphs: forward equals invoking the ops
 * one by one; BatchNorm's moving statistics change in training forward
 * only; the monitor sees every node's outputs by name; reshape keeps the
 * plan for a smaller batch and re-plans for a larger one, with results
 * equal to a fresh bind; simple_bind on the LeNet fixture; a policy change
 * (hot swap of Convolution's impl) is picked up at the next forward
 * without re-binding; misuse and bind-time errors name the node. */
#include "exec_test_util.h"

#include "executor/executor.h"

Test(executor, forward_matches_invoking_ops_one_by_one) {
    mxp_symbol *sym = et_mlp(7, 4);
    mxp_shape d = {.ndim = 2, .dims = {5, 6}};
    const char *nm[] = {"data"};
    mxp_executor *ex = et_bind(sym, MXP_DTYPE_F32, 1, nm, &d, 77, MXP_REQ_WRITE, "softmax_label", 4);
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK, "%s", mxp_last_error());
    int n;
    mxp_ndarray *const *o;
    cr_assert_eq(mxp_executor_outputs(ex, &n, &o), MXP_OK);
    cr_assert_eq(n, 1);
    void *got = et_bytes(o[0]);
    /* The same ops through mxp_invoke. */
    mxp_ndarray *x = et_arg(ex, sym, "data", 0), *w1 = et_arg(ex, sym, "fc1_weight", 0),
                *b1 = et_arg(ex, sym, "fc1_bias", 0), *w2 = et_arg(ex, sym, "fc2_weight", 0),
                *b2 = et_arg(ex, sym, "fc2_bias", 0), *lab = et_arg(ex, sym, "softmax_label", 0);
    mxp_ndarray *h = NULL, *r = NULL, *y = NULL, *p = NULL;
    int one = 1;
    const char *kh[] = {"num_hidden"}, *v7[] = {"7"}, *v4[] = {"4"}, *ka[] = {"act_type"}, *va[] = {"relu"};
    cr_assert_eq(mxp_invoke("FullyConnected", 3, (mxp_ndarray *[]){x, w1, b1}, &one, &h, 1, kh, v7), MXP_OK, "%s",
                 mxp_last_error());
    one = 1;
    cr_assert_eq(mxp_invoke("Activation", 1, &h, &one, &r, 1, ka, va), MXP_OK);
    one = 1;
    cr_assert_eq(mxp_invoke("FullyConnected", 3, (mxp_ndarray *[]){r, w2, b2}, &one, &y, 1, kh, v4), MXP_OK);
    one = 1;
    cr_assert_eq(mxp_invoke("SoftmaxOutput", 2, (mxp_ndarray *[]){y, lab}, &one, &p, 0, NULL, NULL), MXP_OK, "%s",
                 mxp_last_error());
    void *want = et_bytes(p);
    cr_assert(!memcmp(got, want, mxp_ndarray_nbytes(p)), "executor forward differs from op-by-op invoke");
    free(got);
    free(want);
    mxp_ndarray_release(h);
    mxp_ndarray_release(r);
    mxp_ndarray_release(y);
    mxp_ndarray_release(p);
    mxp_executor_free(ex);
    mxp_symbol_release(sym);
}

Test(executor, batchnorm_moving_stats_updated_in_training_forward_only) {
    mxp_symbol *data = gt_var("data");
    mxp_symbol *bn = gt_op("BatchNorm", "bn", 1, &data, "fix_gamma=False", "momentum=0.5", NULL);
    mxp_shape d = {.ndim = 2, .dims = {8, 3}};
    const char *nm[] = {"data"};
    mxp_executor *ex = et_bind(bn, MXP_DTYPE_F32, 1, nm, &d, 5, MXP_REQ_WRITE, NULL, 1);
    int nx;
    mxp_ndarray *const *aux;
    cr_assert_eq(mxp_executor_aux(ex, &nx, &aux), MXP_OK);
    cr_assert_eq(nx, 2);
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK);
    double *m0 = et_read(aux[0]);
    for (int i = 0; i < 3; i++) cr_assert_eq(m0[i], 0.0, "inference forward must not update moving_mean");
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK);
    double *m1 = et_read(aux[0]);
    /* moving = 0.5 * 0 + 0.5 * batch mean. */
    double *x = et_read(et_arg(ex, bn, "data", 0));
    for (int c = 0; c < 3; c++) {
        double mean = 0;
        for (int r = 0; r < 8; r++) mean += x[r * 3 + c];
        mean /= 8;
        cr_expect(fabs(m1[c] - 0.5 * mean) < 1e-5, "channel %d: %g vs %g", c, m1[c], 0.5 * mean);
    }
    cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    free(m0);
    free(m1);
    free(x);
    mxp_executor_free(ex);
    mxp_symbol_release(bn);
    mxp_symbol_release(data);
}

typedef struct mon_log {
    char names[32][64];
    int n;
} mon_log;

static void mon(const char *name, mxp_ndarray *a, void *user) {
    mon_log *l = user;
    cr_assert(mxp_ndarray_size(a) > 0);
    if (l->n < 32) snprintf(l->names[l->n++], 64, "%s", name);
}

Test(executor, monitor_sees_each_node_output) {
    mxp_symbol *sym = et_mlp(3, 2);
    mxp_shape d = {.ndim = 2, .dims = {2, 3}};
    const char *nm[] = {"data"};
    mxp_executor *ex = et_bind(sym, MXP_DTYPE_F32, 1, nm, &d, 1, MXP_REQ_WRITE, "softmax_label", 2);
    mon_log l = {0};
    cr_assert_eq(mxp_executor_set_monitor(ex, mon, &l), MXP_OK);
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK);
    const char *want[] = {"fc1_output", "relu1_output", "fc2_output", "softmax_output"};
    cr_assert_eq(l.n, 4);
    for (int i = 0; i < 4; i++) cr_expect_str_eq(l.names[i], want[i]);
    mxp_executor_set_monitor(ex, NULL, NULL);
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK);
    cr_assert_eq(l.n, 4);
    mxp_executor_free(ex);
    mxp_symbol_release(sym);
}

Test(executor, reshape_keeps_plan_when_it_fits) {
    mxp_symbol *sym = et_mlp(8, 3);
    mxp_shape d = {.ndim = 2, .dims = {16, 5}};
    const char *nm[] = {"data"};
    mxp_executor *ex = et_bind(sym, MXP_DTYPE_F32, 1, nm, &d, 3, MXP_REQ_WRITE, "softmax_label", 3);
    cr_assert_eq(mxp__executor_plan_count(ex), 1);
    mxp_shape small[] = {{.ndim = 2, .dims = {4, 5}}, {.ndim = 1, .dims = {4}}};
    const char *nms[] = {"data", "softmax_label"};
    cr_assert_eq(mxp_executor_reshape(ex, 2, nms, small), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp__executor_plan_count(ex), 1, "a smaller batch fits the existing plan");
    /* Same inputs through a fresh bind give the same result. */
    uint64_t seed = 8;
    mxp_ndarray *x = et_arr(MXP_DTYPE_F32, &small[0], &seed, 1.0);
    cr_assert_eq(mxp_ndarray_copy(x, et_arg(ex, sym, "data", 0)), MXP_OK);
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    int n;
    mxp_ndarray *const *o;
    mxp_executor_outputs(ex, &n, &o);
    cr_assert_eq(mxp_ndarray_shape(o[0])[0], 4);
    void *got = et_bytes(o[0]);
    mxp_ndarray *const *args;
    int na;
    mxp_executor_args(ex, &na, &args);
    mxp_executor *fresh = NULL;
    cr_assert_eq(mxp_executor_bind(sym, et_cpu, na, args, NULL, NULL, 0, NULL, &fresh), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_forward(fresh, 0), MXP_OK);
    mxp_ndarray *const *o2;
    mxp_executor_outputs(fresh, &n, &o2);
    void *want = et_bytes(o2[0]);
    cr_assert(!memcmp(got, want, mxp_ndarray_nbytes(o2[0])));
    free(got);
    free(want);
    mxp_executor_free(fresh);
    /* Larger than bound: planned again. */
    mxp_shape big[] = {{.ndim = 2, .dims = {32, 5}}, {.ndim = 1, .dims = {32}}};
    cr_assert_eq(mxp_executor_reshape(ex, 2, nms, big), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp__executor_plan_count(ex), 2);
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK);
    cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK);
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    /* A weight cannot be reshaped inconsistently. */
    const char *wn[] = {"fc1_weight"};
    mxp_shape bad = {.ndim = 2, .dims = {8, 9}};
    cr_assert_eq(mxp_executor_reshape(ex, 1, wn, &bad), MXP_ESHAPE);
    mxp_ndarray_release(x);
    mxp_executor_free(ex);
    mxp_symbol_release(sym);
}

Test(executor, simple_bind_lenet_and_hot_swap) {
    mxp_symbol *sym = NULL;
    cr_assert_eq(mxp_symbol_load_file(GT_FIXTURE("lenet_bn.json"), &sym), MXP_OK, "%s", mxp_last_error());
    mxp_shape d = {.ndim = 4, .dims = {8, 1, 28, 28}};
    const char *nm[] = {"data"}, *nog[] = {"data", "softmax_label"};
    mxp_executor *ex = NULL;
    cr_assert_eq(mxp_executor_simple_bind(sym, et_cpu, 1, nm, &d, MXP_REQ_WRITE, 2, nog, &ex), MXP_OK, "%s",
                 mxp_last_error());
    int na;
    mxp_ndarray *const *args, *const *grads;
    mxp_executor_args(ex, &na, &args);
    mxp_executor_grads(ex, &na, &grads);
    cr_assert_null(grads[0]);
    cr_assert_not_null(grads[1]);
    uint64_t seed = 4;
    for (int i = 0; i < na - 1; i++) {
        int64_t n = mxp_ndarray_size(args[i]);
        double *v = malloc((size_t)n * sizeof *v);
        for (int64_t k = 0; k < n; k++) v[k] = et_val(&seed) * 0.3;
        et_set(args[i], v);
        free(v);
    }
    cr_assert_eq(mxp_op_set_impl("Convolution", "gemm"), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    cr_assert_str_eq(mxp__node_impl_name(mxp__executor_node(ex, "conv1")), "gemm");
    int n;
    mxp_ndarray *const *o;
    mxp_executor_outputs(ex, &n, &o);
    cr_assert_eq(mxp_ndarray_shape(o[0])[1], 10);
    double *a = et_read(o[0]);
    /* Swap between forwards: picked up at the next forward, no re-bind. */
    cr_assert_eq(mxp_op_set_impl("Convolution", "direct"), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    cr_assert_str_eq(mxp__node_impl_name(mxp__executor_node(ex, "conv1")), "direct");
    /* Inference forward uses moving stats; compare against a gemm run of
     * the same inference forward instead. */
    double *b = et_read(o[0]);
    cr_assert_eq(mxp_op_set_impl("Convolution", "gemm"), MXP_OK);
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK);
    double *c = et_read(o[0]);
    for (int i = 0; i < 80; i++) cr_expect(fabs(b[i] - c[i]) < 1e-4, "%d: direct %g gemm %g", i, b[i], c[i]);
    mxp_op_set_impl("Convolution", NULL);
    free(a);
    free(b);
    free(c);
    mxp_executor_free(ex);
    mxp_symbol_release(sym);
}

Test(executor, errors_name_the_node) {
    mxp_symbol *sym = et_mlp(4, 2);
    mxp_executor *ex = (mxp_executor *)1;
    /* Too few arrays. */
    cr_assert_eq(mxp_executor_bind(sym, et_cpu, 1, NULL, NULL, NULL, 0, NULL, &ex), MXP_EINVAL);
    cr_assert_null(ex);
    /* Inconsistent weight shape: names node, op and both shapes. */
    mxp_shape s_d = {.ndim = 2, .dims = {2, 3}}, s_w = {.ndim = 2, .dims = {4, 5}}, s_b = {.ndim = 1, .dims = {4}},
              s_w2 = {.ndim = 2, .dims = {2, 4}}, s_b2 = {.ndim = 1, .dims = {2}}, s_l = {.ndim = 1, .dims = {2}};
    mxp_ndarray *a[] = {et_arr(MXP_DTYPE_F32, &s_d, NULL, 0), et_arr(MXP_DTYPE_F32, &s_w, NULL, 0),
                        et_arr(MXP_DTYPE_F32, &s_b, NULL, 0), et_arr(MXP_DTYPE_F32, &s_w2, NULL, 0),
                        et_arr(MXP_DTYPE_F32, &s_b2, NULL, 0), et_arr(MXP_DTYPE_F32, &s_l, NULL, 0)};
    cr_assert_eq(mxp_executor_bind(sym, et_cpu, 6, a, NULL, NULL, 0, NULL, &ex), MXP_ESHAPE);
    cr_assert(strstr(mxp_last_error(), "fc1"), "%s", mxp_last_error());
    /* Backward before a training forward. */
    mxp_ndarray_release(a[1]);
    mxp_shape s_w1 = {.ndim = 2, .dims = {4, 3}};
    a[1] = et_arr(MXP_DTYPE_F32, &s_w1, NULL, 0);
    cr_assert_eq(mxp_executor_bind(sym, et_cpu, 6, a, NULL, NULL, 0, NULL, &ex), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK);
    cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_EMISUSE);
    mxp_executor_free(ex);
    mxp_executor_free(NULL);
    /* Incomplete shapes at simple_bind. */
    cr_assert_eq(mxp_executor_simple_bind(sym, et_cpu, 0, NULL, NULL, MXP_REQ_WRITE, 0, NULL, &ex), MXP_EINCOMPLETE);
    cr_assert(strstr(mxp_last_error(), "data"), "%s", mxp_last_error());
    for (int i = 0; i < 6; i++) mxp_ndarray_release(a[i]);
    mxp_symbol_release(sym);
}
