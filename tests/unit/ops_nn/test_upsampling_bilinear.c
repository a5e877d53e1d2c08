/* test_upsampling_bilinear.c — UpSampling with sample_type='bilinear'
 * against tests/data/ops/upsampling_bilinear_cases.txt (PyTorch's
 * conv_transpose2d with MXNet's kernel/stride/pad rule, and MXNet's own
 * documented example): forward in float64 and float32, the data and weight
 * gradients for given out_grads, finite differences of both; then the
 * shape rules (weight (C, 1, k, k) with k = 2s - s%2, output H*s x W*s,
 * inputs named data/weight) and the refusals (num_filter != channels,
 * num_filter missing). */
#include <criterion/criterion.h>

#include "op_cases.h"

#define CASES MXP_SOURCE_DIR "/tests/data/ops/upsampling_bilinear_cases.txt"

static ph_pack *P;
static void setup(void) {
    P = ph_load(PH_PACK_PATH("ops-nn"));
    cr_assert(P, "load ops-nn: %s", ph_last_error());
}
static void teardown(void) { ph_unload(P); }

TestSuite(upsampling_bilinear, .init = setup, .fini = teardown);

Test(upsampling_bilinear, reference_cases) {
    int n = oc_run_file(P, CASES, "ops-nn");
    cr_assert_eq(n, 5, "%d cases ran", n);
}

Test(upsampling_bilinear, shapes_and_refusals) {
    /* scale 3: kernel 5; data (2,4,3,5) -> output (2,4,9,15) */
    ph_arr in[2] = {ph_arr_new(MXP_DTYPE_F32, 4, (const int64_t[]){2, 4, 3, 5}),
                    ph_arr_new(MXP_DTYPE_F32, 4, (const int64_t[]){4, 1, 5, 5})};
    ph_arr out[PH_MAX_IO];
    memset(out, 0, sizeof out);
    int n = 0;
    const char *const kw[] = {"scale", "3", "sample_type", "bilinear", "num_filter", "4", "num_args", "2", NULL};
    cr_assert_eq(ph_forward(P, "UpSampling", kw, 2, in, &n, out, MXP_REQ_WRITE), 0, "%s", ph_last_error());
    cr_assert_eq(n, 1);
    const int64_t want[4] = {2, 4, 9, 15};
    for (int d = 0; d < 4; d++) cr_assert_eq(out[0].shape[d], want[d], "dim %d", d);
    ph_arr_free(&out[0]);
    /* a weight of the wrong kernel size is named */
    ph_arr bad_w = ph_arr_new(MXP_DTYPE_F32, 4, (const int64_t[]){4, 1, 4, 4});
    ph_arr in_bad[2] = {in[0], bad_w};
    cr_assert_neq(ph_forward(P, "UpSampling", kw, 2, in_bad, &n, out, MXP_REQ_WRITE), 0);
    cr_assert(strstr(ph_last_error(), "weight"), "%s", ph_last_error());
    /* num_filter must be the channel count (MXNet's depthwise deconvolution) */
    const char *const kw3[] = {"scale", "3", "sample_type", "bilinear", "num_filter", "3", "num_args", "2", NULL};
    cr_assert_neq(ph_forward(P, "UpSampling", kw3, 2, in, &n, out, MXP_REQ_WRITE), 0);
    cr_assert(strstr(ph_last_error(), "num_filter 3 must equal the data's channels"), "%s", ph_last_error());
    const char *const kw0[] = {"scale", "2", "sample_type", "bilinear", "num_args", "2", NULL};
    cr_assert_neq(ph_forward(P, "UpSampling", kw0, 2, in, &n, out, MXP_REQ_WRITE), 0);
    cr_assert(strstr(ph_last_error(), "num_filter"), "%s", ph_last_error());
    ph_arr_free(&bad_w);
    ph_arr_free(&in[0]);
    ph_arr_free(&in[1]);
}
