/* test_bf16_ew.c — the elementwise driver's bfloat16 path (ob_ew: every
 * operand contiguous bf16, float32 kernel on widened chunks, one rounding
 * per result): elemwise_add and ElementWiseSum (a mixed-precision graph's
 * residual adds and gradient sums) against float64 sums of the same bf16
 * inputs, over sizes with several parallel chunks and a tail, req write
 * and add, and the output aliasing an input (inplace).
 * Tolerance: one bf16 rounding is 2^-9 relative; ElementWiseSum of more
 * than four inputs rounds twice (its second pass reads the output). */
#include <stdio.h>
#include <stdlib.h>

#include "common_test.h"

TestSuite(bf16_ew, .init = ob_setup, .fini = ob_teardown);

static fh_arr rand_bf16(int64_t n, uint64_t seed) {
    fh_arr a = fh_arr_new(MXP_DTYPE_BF16, 1, SHAPE(n));
    fh_fill_uniform(&a, seed, -2, 2);
    return a;
}

static void check_sum(const char *what, const fh_arr *got, const fh_arr *in, int k, const double *prev, double rtol) {
    for (int64_t i = 0; i < fh_numel(got); i++) {
        double ref = prev ? prev[i] : 0, mag = prev ? fabs(prev[i]) : 0;
        for (int j = 0; j < k; j++) ref += fh_get(&in[j], i), mag += fabs(fh_get(&in[j], i));
        cr_assert(fabs(fh_get(got, i) - ref) <= rtol * mag + 1e-30, "%s [%lld]: got %.8g, reference %.8g", what,
                  (long long)i, fh_get(got, i), ref);
    }
}

Test(bf16_ew, elemwise_add) {
    const int64_t n = 40 * 1024 + 13;
    fh_arr in[2] = {rand_bf16(n, 1), rand_bf16(n, 2)};
    fh_arr y = run1("elemwise_add", NULL, 2, in);
    cr_assert_eq(y.dtype, MXP_DTYPE_BF16);
    check_sum("add", &y, in, 2, NULL, 1.0 / 256);
    /* req add: y += a + b, rounded once from float32 */
    double *prev = malloc((size_t)n * sizeof *prev);
    for (int64_t i = 0; i < n; i++) prev[i] = fh_get(&y, i);
    fh_arr out[FH_MAX_IO];
    memset(out, 0, sizeof out);
    out[0] = y;
    int n_out = 0;
    cr_assert_eq(fh_forward(P, "elemwise_add", NULL, 2, in, &n_out, out, MXP_REQ_ADD), 0, "%s", fh_error());
    check_sum("add (req add)", &out[0], in, 2, prev, 1.0 / 256);
    /* inplace: the output is the first input's memory */
    for (int64_t i = 0; i < n; i++) prev[i] = fh_get(&in[0], i);
    fh_arr lhs_copy = fh_arr_from(MXP_DTYPE_BF16, 1, SHAPE(n), prev);
    out[0] = in[0];
    cr_assert_eq(fh_forward(P, "elemwise_add", NULL, 2, in, &n_out, out, MXP_REQ_WRITE), 0, "%s", fh_error());
    fh_arr both[2] = {lhs_copy, in[1]};
    check_sum("add (inplace)", &in[0], both, 2, NULL, 1.0 / 256);
    free(prev);
    fh_arr_free(&in[0]); fh_arr_free(&in[1]); fh_arr_free(&y); fh_arr_free(&lhs_copy);
}

Test(bf16_ew, element_wise_sum) {
    const int64_t n = 20 * 1024 + 7;
    fh_arr in[6];
    for (int j = 0; j < 6; j++) in[j] = rand_bf16(n, 10 + (uint64_t)j);
    for (int k = 2; k <= 6; k += 4) {
        char num[32];
        snprintf(num, sizeof num, "%d", k);
        const char *kw[] = {"num_args", num, NULL};
        fh_arr y = run1("ElementWiseSum", kw, k, in);
        cr_assert_eq(y.dtype, MXP_DTYPE_BF16);
        check_sum("ElementWiseSum", &y, in, k, NULL, k > 4 ? 1.0 / 128 : 1.0 / 256);
        fh_arr_free(&y);
    }
    for (int j = 0; j < 6; j++) fh_arr_free(&in[j]);
}
