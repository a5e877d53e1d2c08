/* test_mutate_aux.c — inputs an op writes (mutate_inputs: optimizer states
 * such as sgd_mom_update's mom, adam_update's mean and var) are auxiliary
 * states of a symbol, as MXNet lists them (nnvm's FMutateInputs splits
 * ListInputNames into read-only arguments and auxiliary states): not in
 * list_arguments, in list_auxiliary_states, bound as aux arrays, and
 * updated in place by forward.  Expected values from MXNet's update rule:
 * mom = momentum mom - lr (g + wd w); out = w + mom. */
#include "graph_test_util.h"

#include <math.h>

static const mxp_device cpu = {MXP_DEV_CPU, 0};

Test(mutate_aux, optimizer_states_are_auxiliary_states) {
    mxp_symbol *v[3] = {gt_var("w"), gt_var("g"), gt_var("mom")};
    mxp_symbol *upd = gt_op("sgd_mom_update", "upd", 3, v, "lr=0.1", "momentum=0.9", NULL);
    gt_list_eq(mxp_symbol_list_arguments, upd, (const char *const[]){"w", "g", NULL});
    gt_list_eq(mxp_symbol_list_auxiliary_states, upd, (const char *const[]){"mom", NULL});

    mxp_symbol *va[4] = {gt_var("weight"), gt_var("grad"), gt_var("mean"), gt_var("var")};
    mxp_symbol *adam = gt_op("adam_update", "adam", 4, va, "lr=0.01", NULL);
    gt_list_eq(mxp_symbol_list_arguments, adam, (const char *const[]){"weight", "grad", NULL});
    gt_list_eq(mxp_symbol_list_auxiliary_states, adam, (const char *const[]){"mean", "var", NULL});
    /* A copy keeps the classification. */
    mxp_symbol *c = NULL;
    cr_assert_eq(mxp_symbol_copy(adam, &c), MXP_OK);
    gt_list_eq(mxp_symbol_list_auxiliary_states, c, (const char *const[]){"mean", "var", NULL});
    mxp_symbol_release(c);
    mxp_symbol_release(adam);
    for (int i = 0; i < 4; i++) mxp_symbol_release(va[i]);

    const char *names[2] = {"w", "g"};
    mxp_shape sh[2] = {{.ndim = 1, .dims = {3}}, {.ndim = 1, .dims = {3}}};
    mxp_executor *ex = NULL;
    cr_assert_eq(mxp_executor_simple_bind(upd, cpu, 2, names, sh, MXP_REQ_NULL, 0, NULL, &ex), MXP_OK, "%s",
                 mxp_last_error());
    int na = 0, nx = 0, no = 0;
    mxp_ndarray *const *args = NULL, *const *aux = NULL, *const *outs = NULL;
    cr_assert_eq(mxp_executor_args(ex, &na, &args), MXP_OK);
    cr_assert_eq(mxp_executor_aux(ex, &nx, &aux), MXP_OK);
    cr_assert_eq(na, 2);
    cr_assert_eq(nx, 1);
    float w[3] = {1.0f, 2.0f, 3.0f}, g[3] = {0.5f, -1.0f, 2.0f}, m0[3] = {0.25f, 0.0f, -0.5f};
    cr_assert_eq(mxp_ndarray_sync_copy_from(args[0], w, sizeof w), MXP_OK);
    cr_assert_eq(mxp_ndarray_sync_copy_from(args[1], g, sizeof g), MXP_OK);
    cr_assert_eq(mxp_ndarray_sync_copy_from(aux[0], m0, sizeof m0), MXP_OK);
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_outputs(ex, &no, &outs), MXP_OK);
    float got_m[3], got_w[3];
    cr_assert_eq(mxp_ndarray_sync_copy_to(aux[0], got_m, sizeof got_m), MXP_OK);
    cr_assert_eq(mxp_ndarray_sync_copy_to(outs[0], got_w, sizeof got_w), MXP_OK);
    for (int i = 0; i < 3; i++) {
        double m = 0.9 * m0[i] - 0.1 * g[i];
        cr_expect(fabs(got_m[i] - m) < 1e-6, "mom[%d] = %g, want %g", i, got_m[i], m);
        cr_expect(fabs(got_w[i] - (w[i] + m)) < 1e-6, "out[%d] = %g, want %g", i, got_w[i], w[i] + m);
    }
    mxp_executor_free(ex);
    mxp_symbol_release(upd);
    for (int i = 0; i < 3; i++) mxp_symbol_release(v[i]);
}
