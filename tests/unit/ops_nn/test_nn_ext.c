/* test_nn_ext.c — ops-nn's nn_ext.c and norm_ext.c ops (SoftmaxActivation,
 * L2Normalization, the regression outputs, MakeLoss, Crop, Pad,
 * InstanceNorm, LayerNorm, GroupNorm) against the "ops-nn" rows of
 * tests/data/ops/ops_ext_cases.txt (numpy / PyTorch values from
 * gen_ops_ext_cases.py): forward in float64 and float32, hidden outputs,
 * finite-difference gradients, and the loss heads' gradients as given. */
#include <criterion/criterion.h>

#include "op_table.h"

#define CASES MXP_SOURCE_DIR "/tests/data/ops/ops_ext_cases.txt"

static fh_pack *P;
static void setup(void) {
    P = fh_load("ops-nn");
    cr_assert(P, "load ops-nn: %s", fh_error());
}
static void teardown(void) { fh_unload(P); }

TestSuite(nn_ext, .init = setup, .fini = teardown);

Test(nn_ext, reference_cases) {
    int n = ot_run_file(P, CASES, "ops-nn");
    cr_assert_geq(n, 20, "only %d cases ran", n);
}

Test(nn_ext, bad_configurations_are_named) {
    fh_arr x = fh_arr_new(MXP_DTYPE_F64, 4, (const int64_t[]){1, 2, 3, 4});
    fh_arr out[FH_MAX_IO];
    memset(out, 0, sizeof out);
    int n = 0;
    const char *const pad_batch[] = {"pad_width", "(1,0,0,0,0,0,0,0)", NULL};
    cr_assert_neq(fh_forward(P, "Pad", pad_batch, 1, &x, &n, out, MXP_REQ_WRITE), 0);
    cr_assert(strstr(fh_error(), "Pad"), "%s", fh_error());
    const char *const crop_big[] = {"num_args", "1", "h_w", "(4, 4)", NULL};
    cr_assert_neq(fh_forward(P, "Crop", crop_big, 1, &x, &n, out, MXP_REQ_WRITE), 0);
    cr_assert(strstr(fh_error(), "Crop"), "%s", fh_error());
    fh_arr in3[3] = {x, fh_arr_new(MXP_DTYPE_F64, 1, (const int64_t[]){2}), fh_arr_new(MXP_DTYPE_F64, 1, (const int64_t[]){2})};
    const char *const gn3[] = {"num_groups", "3", NULL};
    cr_assert_neq(fh_forward(P, "GroupNorm", gn3, 3, in3, &n, out, MXP_REQ_WRITE), 0);
    cr_assert(strstr(fh_error(), "groups"), "%s", fh_error());
    const char *const omv[] = {"output_mean_var", "True", NULL};
    cr_assert_neq(fh_forward(P, "LayerNorm", omv, 3, in3, &n, out, MXP_REQ_WRITE), 0);
    fh_arr_free(&in3[1]);
    fh_arr_free(&in3[2]);
    fh_arr_free(&x);
    for (int i = 0; i < FH_MAX_IO; i++) fh_arr_free(&out[i]);
}
