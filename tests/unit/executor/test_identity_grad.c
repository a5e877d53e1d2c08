/* test_identity_grad.c — ops flagged MXP_OP_IDENTITY_GRAD (elemwise_add,
 * add_n): when their inputs are op outputs, the training program hands
 * their out_grad on as the inputs' gradients without a backward step.
 * A residual pattern with both ops (the head gradient itself passed on
 * twice, and one entry receiving three contributions):
 *     h = relu(x);  t = tanh(h);  y = t + h;  z = add_n(y, t, h)
 *     dz/dh = 2 + 2 (1 - tanh(h)^2),  dx = dz/dh * [x > 0]   (times the head gradient)
 * checked against that formula in float64, bitwise against the same
 * executor with MXP_EXEC_IDENTITY_GRAD=0 (which runs both backward
 * steps), and the program has two BWD steps fewer.  An argument input
 * keeps its step (its gradient array is written with the user's req). */
#include "exec_test_util.h"

#include "executor/executor.h"

static mxp_symbol *residual(void) {
    mxp_symbol *x = gt_var("x");
    mxp_symbol *h = gt_op("Activation", "h", 1, &x, "act_type=relu", NULL);
    mxp_symbol *t = gt_op("Activation", "t", 1, &h, "act_type=tanh", NULL);
    mxp_symbol *y = gt_op("elemwise_add", "y", 2, (mxp_symbol *[]){t, h}, NULL);
    mxp_symbol *z = gt_op("add_n", "z", 3, (mxp_symbol *[]){y, t, h}, "num_args=3", NULL);
    mxp_symbol_release(x);
    mxp_symbol_release(h);
    mxp_symbol_release(t);
    mxp_symbol_release(y);
    return z;
}

static int count_bwd(mxp_executor *ex) {
    const mxp__program *p = mxp__executor_program(ex);
    int n = 0;
    for (int s = 0; s < p->n_steps; s++) n += p->steps[s].kind == MXP_STEP_BWD;
    return n;
}

/* Gradient of x for head gradient hg; *n_bwd gets the program's BWD steps. */
static double *run(mxp_symbol *z, int dt, int identity, int *n_bwd) {
    setenv("MXP_EXEC_IDENTITY_GRAD", identity ? "1" : "0", 1);
    mxp_shape s = {.ndim = 2, .dims = {7, 9}};
    uint64_t seed = 5;
    mxp_ndarray *x = et_arr(dt, &s, &seed, 2.0), *gx = et_arr(dt, &s, NULL, 0.0);
    mxp_ndarray *hg = et_arr(dt, &s, &seed, 1.0);
    double *hv = et_read(hg);
    mxp_executor *ex = NULL;
    cr_assert_eq(mxp_executor_bind(z, et_cpu, 1, &x, &gx, NULL, 0, NULL, &ex), MXP_OK, "%s", mxp_last_error());
    unsetenv("MXP_EXEC_IDENTITY_GRAD");
    *n_bwd = count_bwd(ex);
    for (int rep = 0; rep < 2; rep++) { /* a second step reuses the planned storage */
        cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
        cr_assert_eq(mxp_executor_backward(ex, 1, &hg), MXP_OK, "%s", mxp_last_error());
    }
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    double *xv = et_read(x), *gv = et_read(gx);
    /* The head gradient, passed on to three readers, must come back untouched. */
    double *hv_again = et_read(hg);
    for (int i = 0; i < 63; i++) cr_expect_eq(hv_again[i], hv[i]);
    free(hv_again);
    double *out = malloc(2 * 63 * sizeof *out);
    for (int i = 0; i < 63; i++) {
        double h = xv[i] > 0 ? xv[i] : 0, th = tanh(h);
        out[i] = gv[i];
        out[63 + i] = xv[i] > 0 ? hv[i] * (2 + 2 * (1 - th * th)) : 0;
    }
    free(xv);
    free(hv);
    free(gv);
    mxp_executor_free(ex);
    mxp_ndarray_release(x);
    mxp_ndarray_release(gx);
    mxp_ndarray_release(hg);
    return out;
}

Test(identity_grad, residual_add_and_add_n_pass_out_grad_on) {
    mxp_symbol *z = residual();
    for (int dti = 0; dti < 2; dti++) {
        int dt = dti ? MXP_DTYPE_F32 : MXP_DTYPE_F64, nb_on, nb_off;
        double *on = run(z, dt, 1, &nb_on), *off = run(z, dt, 0, &nb_off);
        cr_expect_eq(nb_off - nb_on, 2, "BWD steps: %d with pass-through, %d without", nb_on, nb_off);
        double tol = dt == MXP_DTYPE_F64 ? 1e-12 : 1e-5;
        for (int i = 0; i < 63; i++) {
            cr_expect(fabs(on[i] - on[63 + i]) <= tol * (1 + fabs(on[63 + i])), "dt %d x[%d]: %.9g want %.9g", dt, i,
                      on[i], on[63 + i]);
            cr_expect_eq(on[i], off[i], "dt %d x[%d]: %.17g with pass-through, %.17g without", dt, i, on[i], off[i]);
        }
        free(on);
        free(off);
    }
    mxp_symbol_release(z);
}

/* y = a + x with x an argument: the add keeps its step (x's gradient array
 * is written by it), and the gradient is still right. */
Test(identity_grad, argument_input_keeps_the_step) {
    mxp_symbol *x = gt_var("x");
    mxp_symbol *a = gt_op("Activation", "a", 1, &x, "act_type=relu", NULL);
    mxp_symbol *y = gt_op("elemwise_add", "y", 2, (mxp_symbol *[]){a, x}, NULL);
    mxp_shape s = {.ndim = 1, .dims = {8}};
    uint64_t seed = 2;
    mxp_ndarray *xa = et_arr(MXP_DTYPE_F64, &s, &seed, 1.0), *gx = et_arr(MXP_DTYPE_F64, &s, NULL, 0.0);
    mxp_ndarray *hg = et_arr(MXP_DTYPE_F64, &s, &seed, 1.0);
    mxp_executor *ex = NULL;
    cr_assert_eq(mxp_executor_bind(y, et_cpu, 1, &xa, &gx, NULL, 0, NULL, &ex), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(count_bwd(ex), 2, "relu's and the add's");
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK);
    cr_assert_eq(mxp_executor_backward(ex, 1, &hg), MXP_OK, "%s", mxp_last_error());
    double *xv = et_read(xa), *hv = et_read(hg), *gv = et_read(gx);
    for (int i = 0; i < 8; i++) cr_expect(fabs(gv[i] - hv[i] * (1 + (xv[i] > 0))) < 1e-12, "%d: %g", i, gv[i]);
    free(xv);
    free(hv);
    free(gv);
    mxp_executor_free(ex);
    mxp_ndarray_release(xa);
    mxp_ndarray_release(gx);
    mxp_ndarray_release(hg);
    mxp_symbol_release(y);
    mxp_symbol_release(a);
    mxp_symbol_release(x);
}
