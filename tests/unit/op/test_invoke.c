/* test_invoke.c — mxp_invoke on ops-basic SimpleOps (unary, broadcast,
 * scalar) and on the op_invoke fixture pack: results against independent
 * reference loops, output allocation, req add / inplace, kwargs validation
 * errors naming op and key, kernel errors surfacing through waits with the
 * op's name, shape/dtype mismatches, multi-output ops, host.invoke.
 * Node-level behaviour (state caching, temp space, RNG across engines,
 * backward) is in test_node.c. */
#include "op_test_util.h"

#include "op/op.h"
#include "plugin/plugin.h"

TestSuite(invoke, .init = opx_setup, .fini = opx_teardown);

Test(invoke, unary_allocates_output) {
    int64_t shape[2] = {3, 4};
    double v[12];
    opx_fill(v, 12, 1, 0.1, 4.0);
    mxp_ndarray *x = opx_arr(MXP_DTYPE_F32, 2, shape, v);
    mxp_ndarray *out[1] = {NULL};
    int n_out = 1;
    cr_assert_eq(mxp_invoke("sqrt", 1, &x, &n_out, out, 0, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(n_out, 1);
    cr_assert_not_null(out[0]);
    cr_assert_eq(mxp_ndarray_ndim(out[0]), 2);
    cr_assert_eq(mxp_ndarray_shape(out[0])[0], 3);
    cr_assert_eq(mxp_ndarray_shape(out[0])[1], 4);
    cr_assert_eq(mxp_ndarray_dtype(out[0]), MXP_DTYPE_F32);
    double *r = opx_read(out[0]);
    for (int i = 0; i < 12; i++) cr_assert_float_eq(r[i], sqrt((double)(float)v[i]), 1e-6, "element %d", i);
    free(r);
    /* exp through an alias-free second op on the same input. */
    mxp_ndarray *e[1] = {NULL};
    n_out = 1;
    cr_assert_eq(mxp_invoke("exp", 1, &x, &n_out, e, 0, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    r = opx_read(e[0]);
    for (int i = 0; i < 12; i++) cr_assert_float_eq(r[i], exp((double)(float)v[i]), 1e-4 * exp(v[i]), "element %d", i);
    free(r);
    mxp_ndarray_release(e[0]);
    mxp_ndarray_release(out[0]);
    mxp_ndarray_release(x);
}

Test(invoke, broadcast_into_given_output) {
    int64_t sa[2] = {2, 3}, sb[2] = {1, 3};
    double va[6] = {1, 2, 3, 4, 5, 6}, vb[3] = {10, 20, 30};
    int rc;
    mxp_ndarray *in[2] = {opx_arr(MXP_DTYPE_F64, 2, sa, va), opx_arr(MXP_DTYPE_F64, 2, sb, vb)};
    mxp_ndarray *o = opx_arr(MXP_DTYPE_F64, 2, sa, NULL);
    mxp_ndarray *out[1] = {o};
    int n_out = 1;
    cr_assert_eq(mxp_invoke("broadcast_add", 2, in, &n_out, out, 0, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(out[0], o, "a passed output is written, not replaced");
    double *r = opx_read(o);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) cr_assert_float_eq(r[i * 3 + j], va[i * 3 + j] + vb[j], 1e-12);
    free(r);
    /* A wrongly shaped output is refused before anything runs. */
    int64_t bad[2] = {3, 2};
    mxp_ndarray *ob = opx_arr(MXP_DTYPE_F64, 2, bad, NULL);
    out[0] = ob;
    n_out = 1;
    cr_assert_eq(mxp_invoke("broadcast_add", 2, in, &n_out, out, 0, NULL, NULL), MXP_ESHAPE);
    cr_assert(strstr(mxp_last_error(), "broadcast_add") && strstr(mxp_last_error(), "(3, 2)"), "%s", mxp_last_error());
    /* Incompatible broadcast shapes. */
    int64_t sc[2] = {2, 2};
    mxp_ndarray *c = opx_arr(MXP_DTYPE_F64, 2, sc, NULL);
    mxp_ndarray *in2[2] = {in[0], c};
    out[0] = NULL;
    n_out = 1;
    cr_assert_eq(mxp_invoke("broadcast_add", 2, in2, &n_out, out, 0, NULL, NULL), MXP_ESHAPE);
    cr_assert_null(out[0]);
    /* Mixed dtypes. */
    mxp_ndarray *f = opx_arr(MXP_DTYPE_F32, 2, sb, vb);
    mxp_ndarray *in3[2] = {in[0], f};
    rc = mxp_invoke("broadcast_add", 2, in3, &n_out, out, 0, NULL, NULL);
    cr_assert_eq(rc, MXP_ETYPE, "%d %s", rc, mxp_last_error());
    mxp_ndarray_release(f);
    mxp_ndarray_release(c);
    mxp_ndarray_release(ob);
    mxp_ndarray_release(o);
    mxp_ndarray_release(in[0]);
    mxp_ndarray_release(in[1]);
}

Test(invoke, scalar_req_add_accumulates) {
    int64_t shape[1] = {5};
    double v[5] = {-2, -1, 0, 1, 2.5}, o0[5] = {100, 200, 300, 400, 500};
    mxp_ndarray *x = opx_arr(MXP_DTYPE_F32, 1, shape, v);
    mxp_ndarray *o = opx_arr(MXP_DTYPE_F32, 1, shape, o0);
    const char *k[] = {"scalar"}, *val[] = {"1.5"};
    int req[1] = {MXP_REQ_ADD};
    mxp_invoke_opts opts = {.req = req};
    mxp_ndarray *out[1] = {o};
    int n_out = 1;
    for (int rep = 0; rep < 2; rep++)
        cr_assert_eq(mxp_invoke_ex("_plus_scalar", 1, &x, &n_out, out, 1, k, val, &opts), MXP_OK, "%s", mxp_last_error());
    double *r = opx_read(o);
    for (int i = 0; i < 5; i++) cr_assert_float_eq(r[i], o0[i] + 2 * (v[i] + 1.5), 1e-4, "element %d: %g", i, r[i]);
    free(r);
    /* req write overwrites. */
    req[0] = MXP_REQ_WRITE;
    cr_assert_eq(mxp_invoke_ex("_mul_scalar", 1, &x, &n_out, out, 1, k, val, &opts), MXP_OK, "%s", mxp_last_error());
    r = opx_read(o);
    for (int i = 0; i < 5; i++) cr_assert_float_eq(r[i], v[i] * 1.5, 1e-5);
    free(r);
    mxp_ndarray_release(o);
    mxp_ndarray_release(x);
}

Test(invoke, inplace_output_aliases_input) {
    int64_t shape[1] = {6};
    double v[6] = {1, 2, 3, 4, 5, 6};
    mxp_ndarray *x = opx_arr(MXP_DTYPE_F32, 1, shape, v);
    const char *k[] = {"scalar"}, *val[] = {"3"};
    mxp_ndarray *out[1] = {x};
    int n_out = 1;
    cr_assert_eq(mxp_invoke("_mul_scalar", 1, &x, &n_out, out, 1, k, val), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_invoke("_mul_scalar", 1, &x, &n_out, out, 1, k, val), MXP_OK, "%s", mxp_last_error());
    double *r = opx_read(x);
    for (int i = 0; i < 6; i++) cr_assert_float_eq(r[i], v[i] * 9, 1e-5);
    free(r);
    mxp_ndarray_release(x);
}

Test(invoke, kwargs_validation_names_op_and_key) {
    int64_t shape[1] = {4};
    mxp_ndarray *x = opx_arr(MXP_DTYPE_F32, 1, shape, (double[]){1, 2, 3, 4});
    mxp_ndarray *out[1] = {NULL};
    int n_out = 1;
    const char *k1[] = {"scalr"}, *v1[] = {"2"};
    int rc = mxp_invoke("_plus_scalar", 1, &x, &n_out, out, 1, k1, v1);
    cr_assert_neq(rc, MXP_OK);
    cr_assert(strstr(mxp_last_error(), "_plus_scalar") && strstr(mxp_last_error(), "scalr"), "%s", mxp_last_error());
    cr_assert_null(out[0], "nothing allocated on failure");
    /* Bad value. */
    const char *k2[] = {"scalar"}, *v2[] = {"two"};
    cr_assert_neq(mxp_invoke("_plus_scalar", 1, &x, &n_out, out, 1, k2, v2), MXP_OK);
    cr_assert(strstr(mxp_last_error(), "_plus_scalar") && strstr(mxp_last_error(), "scalar"), "%s", mxp_last_error());
    /* Out of the schema's range [0, 10]. */
    const char *k3[] = {"scale"}, *v3[] = {"11"};
    cr_assert_neq(mxp_invoke("fxi_ws", 1, &x, &n_out, out, 1, k3, v3), MXP_OK);
    cr_assert(strstr(mxp_last_error(), "fxi_ws") && strstr(mxp_last_error(), "scale"), "%s", mxp_last_error());
    /* Reserved "__" attributes are ignored. */
    const char *k4[] = {"__shape__", "scale", "__lr_mult__"}, *v4[] = {"(4,)", "3", "0.1"};
    cr_assert_eq(mxp_invoke("fxi_ws", 1, &x, &n_out, out, 3, k4, v4), MXP_OK, "%s", mxp_last_error());
    double *r = opx_read(out[0]);
    for (int i = 0; i < 4; i++) cr_assert_float_eq(r[i], 3.0 * (i + 1), 1e-6);
    free(r);
    mxp_ndarray_release(out[0]);
    /* Unknown op, wrong input count, too little room for outputs. */
    out[0] = NULL;
    cr_assert_eq(mxp_invoke("no_such_op", 1, &x, &n_out, out, 0, NULL, NULL), MXP_ENOENT);
    cr_assert(strstr(mxp_last_error(), "no_such_op"), "%s", mxp_last_error());
    mxp_ndarray *two[2] = {x, x};
    cr_assert_eq(mxp_invoke("sqrt", 2, two, &n_out, out, 0, NULL, NULL), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "sqrt") && strstr(mxp_last_error(), "data"), "%s", mxp_last_error());
    n_out = 1;
    mxp_ndarray *outs2[2] = {NULL, NULL};
    cr_assert_eq(mxp_invoke("fxi_two", 1, &x, &n_out, outs2, 0, NULL, NULL), MXP_EINVAL);
    cr_assert_eq(n_out, 2, "the number needed is reported");
    mxp_ndarray_release(x);
}

Test(invoke, kernel_error_surfaces_with_op_name) {
    int64_t shape[1] = {7};
    mxp_ndarray *x = opx_arr(MXP_DTYPE_F32, 1, shape, NULL);
    mxp_ndarray *out[1] = {NULL};
    int n_out = 1;
    /* Pushing succeeds; the failure is a value on the output's var. */
    cr_assert_eq(mxp_invoke("fxi_fail", 1, &x, &n_out, out, 0, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    int rc = mxp_ndarray_wait_to_read(out[0]);
    cr_assert_neq(rc, MXP_OK);
    cr_assert(strstr(mxp_last_error(), "fxi_fail"), "%s", mxp_last_error());
    cr_assert(strstr(mxp_last_error(), "deliberate failure on 7 elements"), "%s", mxp_last_error());
    /* A dependant is skipped and inherits the error, seen through the engine. */
    mxp_ndarray *o2[1] = {NULL};
    cr_assert_eq(mxp_invoke("fxi_fail", 1, &x, &n_out, out, 0, NULL, NULL), MXP_OK);
    cr_assert_eq(mxp_invoke("sqrt", 1, out, &n_out, o2, 0, NULL, NULL), MXP_OK);
    rc = mxp_engine_wait_for_var(mxp_ndarray_var(o2[0]));
    cr_assert_neq(rc, MXP_OK);
    cr_assert(strstr(mxp_last_error(), "fxi_fail"), "%s", mxp_last_error());
    mxp_engine_wait_for_all();
    mxp_ndarray_release(o2[0]);
    mxp_ndarray_release(out[0]);
    mxp_ndarray_release(x);
}

Test(invoke, two_outputs_with_req_null) {
    int64_t shape[1] = {3};
    double v[3] = {1, -2, 0.5};
    mxp_ndarray *x = opx_arr(MXP_DTYPE_F32, 1, shape, v);
    mxp_ndarray *out[2] = {NULL, NULL};
    int n_out = 2;
    cr_assert_eq(mxp_invoke("fxi_two", 1, &x, &n_out, out, 0, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(n_out, 2);
    double *a = opx_read(out[0]), *b = opx_read(out[1]);
    for (int i = 0; i < 3; i++) {
        cr_assert_float_eq(a[i], v[i] + 1, 1e-6);
        cr_assert_float_eq(b[i], v[i] * 2, 1e-6);
    }
    free(a);
    free(b);
    /* req null on output 1 leaves it untouched. */
    double keep[3] = {7, 8, 9};
    mxp_ndarray *o1 = opx_arr(MXP_DTYPE_F32, 1, shape, keep);
    mxp_ndarray *outs[2] = {out[0], o1};
    int req[2] = {MXP_REQ_WRITE, MXP_REQ_NULL};
    mxp_invoke_opts opts = {.req = req};
    cr_assert_eq(mxp_invoke_ex("fxi_two", 1, &x, &n_out, outs, 0, NULL, NULL, &opts), MXP_OK, "%s", mxp_last_error());
    b = opx_read(o1);
    for (int i = 0; i < 3; i++) cr_assert_float_eq(b[i], keep[i], 0);
    free(b);
    mxp_ndarray_release(o1);
    mxp_ndarray_release(out[0]);
    mxp_ndarray_release(out[1]);
    mxp_ndarray_release(x);
}

Test(invoke, host_invoke_runs_on_tensors) {
    const mxp_host *h = mxp__host_table();
    cr_assert_not_null(h->invoke);
    float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, c[4] = {0};
    int64_t shape[1] = {4};
    mxp_tensor in[2], out[1];
    mxp_tensor proto = {.hdr = MXP_HEADER(mxp_tensor), .dtype = MXP_DTYPE_F32, .ndim = 1, .shape = shape,
                        .device = {MXP_DEV_CPU, 0}};
    in[0] = proto;
    in[0].data = a;
    in[1] = proto;
    in[1].data = b;
    out[0] = proto;
    out[0].data = c;
    cr_assert_eq(h->invoke("elemwise_add", 2, in, 1, out, NULL, NULL, 0), MXP_OK, "%s", mxp_last_error());
    for (int i = 0; i < 4; i++) cr_assert_float_eq(c[i], a[i] + b[i], 0);
    /* With workspace and kwargs. */
    const char *k[] = {"scale"}, *v[] = {"0.5"};
    cr_assert_eq(h->invoke("fxi_ws", 1, in, 1, out, k, v, 1), MXP_OK, "%s", mxp_last_error());
    for (int i = 0; i < 4; i++) cr_assert_float_eq(c[i], 0.5f * a[i], 0);
    /* Errors come back synchronously. */
    cr_assert_neq(h->invoke("fxi_fail", 1, in, 1, out, NULL, NULL, 0), MXP_OK);
    cr_assert(strstr(mxp_last_error(), "deliberate failure"), "%s", mxp_last_error());
}

/* BatchNorm: aux states passed through mxp_invoke_ex are updated in place
 * in training mode; its two internal outputs (batch mean / var) are not
 * returned; without is_train the moving statistics are used. */
Test(invoke, batchnorm_aux_and_hidden_outputs) {
    int64_t sd[2] = {4, 2}, sc[1] = {2};
    double x[8] = {1, 10, 2, 20, 3, 30, 6, 60};
    mxp_ndarray *in[3] = {opx_arr(MXP_DTYPE_F64, 2, sd, x), opx_arr(MXP_DTYPE_F64, 1, sc, (double[]){1, 1}),
                          opx_arr(MXP_DTYPE_F64, 1, sc, (double[]){0, 0})};
    mxp_ndarray *aux[2] = {opx_arr(MXP_DTYPE_F64, 1, sc, (double[]){0, 0}),
                           opx_arr(MXP_DTYPE_F64, 1, sc, (double[]){1, 1})};
    const char *k[] = {"eps", "momentum"}, *v[] = {"1e-5", "0.5"};
    mxp_invoke_opts opts = {.is_train = 1, .n_aux = 2, .aux = aux};
    mxp_ndarray *out[3] = {NULL, NULL, NULL};
    int n_out = 3;
    cr_assert_eq(mxp_invoke_ex("BatchNorm", 3, in, &n_out, out, 2, k, v, &opts), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(n_out, 1, "only the visible output");
    cr_assert_null(out[1]);
    double mean[2] = {0, 0}, var[2] = {0, 0};
    for (int c = 0; c < 2; c++) {
        for (int o = 0; o < 4; o++) mean[c] += x[o * 2 + c] / 4;
        for (int o = 0; o < 4; o++) var[c] += (x[o * 2 + c] - mean[c]) * (x[o * 2 + c] - mean[c]) / 4;
    }
    double *y = opx_read(out[0]), *mm = opx_read(aux[0]), *mv = opx_read(aux[1]);
    for (int c = 0; c < 2; c++) {
        cr_assert_float_eq(mm[c], 0.5 * mean[c], 1e-9, "moving mean %d", c);
        cr_assert_float_eq(mv[c], 0.5 + 0.5 * var[c], 1e-9, "moving var %d", c);
        for (int o = 0; o < 4; o++)
            cr_assert_float_eq(y[o * 2 + c], (x[o * 2 + c] - mean[c]) / sqrt(var[c] + 1e-5), 1e-6);
    }
    free(y);
    free(mm);
    free(mv);
    /* Inference: normalise with the moving statistics, aux unchanged. */
    opts.is_train = 0;
    mxp_ndarray *o2[1] = {NULL};
    n_out = 1;
    cr_assert_eq(mxp_invoke_ex("BatchNorm", 3, in, &n_out, o2, 2, k, v, &opts), MXP_OK, "%s", mxp_last_error());
    y = opx_read(o2[0]);
    mm = opx_read(aux[0]);
    for (int c = 0; c < 2; c++) {
        cr_assert_float_eq(mm[c], 0.5 * mean[c], 1e-9);
        double s = sqrt(0.5 + 0.5 * var[c] + 1e-5);
        cr_assert_float_eq(y[c], (x[c] - 0.5 * mean[c]) / s, 1e-6);
    }
    free(y);
    free(mm);
    mxp_ndarray_release(o2[0]);
    mxp_ndarray_release(out[0]);
    for (int i = 0; i < 3; i++) mxp_ndarray_release(in[i]);
    for (int i = 0; i < 2; i++) mxp_ndarray_release(aux[i]);
}
