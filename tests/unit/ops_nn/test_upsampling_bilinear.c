/* test_upsampling_bilinear.c — UpSampling with sample_type='bilinear'
 * against tests/data/ops/upsampling_bilinear_cases.txt (PyTorch's
 * conv_transpose2d with MXNet's kernel/stride/pad rule, and MXNet's own
 * documented example): forward in float64 and float32, the data and weight
 * gradients for given out_grads, finite differences of both; then the
 * shape rules (weight (C, 1, k, k) with k = 2s - s%2, output H*s x W*s,
 * inputs named data/weight) and the refusals (num_filter != channels,
 * num_filter missing). */
#include <criterion/criterion.h>

#include "op_table.h"

#define CASES MXP_SOURCE_DIR "/tests/data/ops/upsampling_bilinear_cases.txt"

static fh_pack *P;
static void setup(void) {
    P = fh_load("ops-nn");
    cr_assert(P, "load ops-nn: %s", fh_error());
}
static void teardown(void) { fh_unload(P); }

TestSuite(upsampling_bilinear, .init = setup, .fini = teardown);

Test(upsampling_bilinear, reference_cases) {
    int n = ot_run_file(P, CASES, "ops-nn");
    cr_assert_eq(n, 5, "%d cases ran", n);
}

Test(upsampling_bilinear, shapes_and_refusals) {
    /* scale 3: kernel 5; data (2,4,3,5) -> output (2,4,9,15) */
    fh_arr in[2] = {fh_arr_new(MXP_DTYPE_F32, 4, (const int64_t[]){2, 4, 3, 5}),
                    fh_arr_new(MXP_DTYPE_F32, 4, (const int64_t[]){4, 1, 5, 5})};
    fh_arr out[FH_MAX_IO];
    memset(out, 0, sizeof out);
    int n = 0;
    const char *const kw[] = {"scale", "3", "sample_type", "bilinear", "num_filter", "4", "num_args", "2", NULL};
    cr_assert_eq(fh_forward(P, "UpSampling", kw, 2, in, &n, out, MXP_REQ_WRITE), 0, "%s", fh_error());
    cr_assert_eq(n, 1);
    const int64_t want[4] = {2, 4, 9, 15};
    for (int d = 0; d < 4; d++) cr_assert_eq(out[0].shape[d], want[d], "dim %d", d);
    fh_arr_free(&out[0]);
    /* a weight of the wrong kernel size is named */
    fh_arr bad_w = fh_arr_new(MXP_DTYPE_F32, 4, (const int64_t[]){4, 1, 4, 4});
    fh_arr in_bad[2] = {in[0], bad_w};
    cr_assert_neq(fh_forward(P, "UpSampling", kw, 2, in_bad, &n, out, MXP_REQ_WRITE), 0);
    cr_assert(strstr(fh_error(), "weight"), "%s", fh_error());
    /* num_filter must be the channel count (MXNet's depthwise deconvolution) */
    const char *const kw3[] = {"scale", "3", "sample_type", "bilinear", "num_filter", "3", "num_args", "2", NULL};
    cr_assert_neq(fh_forward(P, "UpSampling", kw3, 2, in, &n, out, MXP_REQ_WRITE), 0);
    cr_assert(strstr(fh_error(), "num_filter 3 must equal the data's channels"), "%s", fh_error());
    const char *const kw0[] = {"scale", "2", "sample_type", "bilinear", "num_args", "2", NULL};
    cr_assert_neq(fh_forward(P, "UpSampling", kw0, 2, in, &n, out, MXP_REQ_WRITE), 0);
    cr_assert(strstr(fh_error(), "num_filter"), "%s", fh_error());
    fh_arr_free(&bad_w);
    fh_arr_free(&in[0]);
    fh_arr_free(&in[1]);
}
