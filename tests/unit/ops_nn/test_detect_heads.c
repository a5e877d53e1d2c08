/* test_detect_heads.c — ops-nn's SSD heads (MultiBoxTarget,
 * MultiBoxDetection: multibox.c) and CTCLoss (ctc_loss.c) against
 * tests/data/ops/detect_cases.txt (gen_detect_cases.py: an independent
 * float64 numpy implementation of MXNet's MultiBox rules, PyTorch's
 * ctc_loss and its autograd gradient): forward in float64 and float32,
 * CTCLoss's gradient for a given out_grad and by finite differences; then
 * the errors bad inputs get. */
#include <criterion/criterion.h>
#include <math.h>

#include "op_table.h"

#define CASES MXP_SOURCE_DIR "/tests/data/ops/detect_cases.txt"

static fh_pack *P;
static void setup(void) {
    P = fh_load("ops-nn");
    cr_assert(P, "load ops-nn: %s", fh_error());
}
static void teardown(void) { fh_unload(P); }

TestSuite(detect_heads, .init = setup, .fini = teardown);

Test(detect_heads, reference_cases) {
    int n = ot_run_file(P, CASES, "ops-nn");
    cr_assert_geq(n, 18, "only %d cases ran", n);
}

/* Forward of op on in[0..n_in) must fail with a message holding `want`. */
static void expect_error(const char *op, const char *const *kw, int n_in, const fh_arr *in, const char *want) {
    fh_arr out[FH_MAX_IO];
    memset(out, 0, sizeof out);
    int n_out = 0;
    cr_assert_neq(fh_forward(P, op, kw, n_in, in, &n_out, out, MXP_REQ_WRITE), 0, "%s accepted bad input", op);
    cr_assert(strstr(fh_error(), want), "%s: '%s' lacks '%s'", op, fh_error(), want);
    for (int i = 0; i < FH_MAX_IO; i++) fh_arr_free(&out[i]);
}

static fh_arr arr(int nd, const int64_t *shape, const double *v) { return fh_arr_from(MXP_DTYPE_F64, nd, shape, v); }

Test(detect_heads, multibox_bad_inputs_are_named) {
    const double anchors[8] = {0.1, 0.1, 0.4, 0.4, 0.5, 0.5, 0.9, 0.9};
    const double bad_pad[10] = {0, 0.1, 0.1, 0.4, 0.4, -1, 0.2, -1, -1, -1};
    fh_arr in[3] = {arr(3, (const int64_t[]){1, 2, 4}, anchors), arr(3, (const int64_t[]){1, 2, 5}, bad_pad),
                    fh_arr_new(MXP_DTYPE_F64, 3, (const int64_t[]){1, 3, 2})};
    expect_error("MultiBoxTarget", (const char *const[]){NULL}, 3, in, "padding rows must be all -1");
    expect_error("MultiBoxTarget", (const char *const[]){"variances", "(0.1,0.2)", NULL}, 3, in, "variances");
    expect_error("MultiBoxTarget", (const char *const[]){"negative_mining_ratio", "3", "negative_mining_thresh", "0", NULL},
                 3, in, "negative_mining_thresh");
    fh_arr_free(&in[2]);
    in[2] = fh_arr_new(MXP_DTYPE_F64, 3, (const int64_t[]){1, 3, 5}); /* 5 anchors, not 2 */
    expect_error("MultiBoxTarget", (const char *const[]){NULL}, 3, in, "cls_pred");
    fh_arr det[3] = {fh_arr_new(MXP_DTYPE_F64, 3, (const int64_t[]){1, 3, 2}), fh_arr_new(MXP_DTYPE_F64, 2, (const int64_t[]){1, 7}),
                     arr(3, (const int64_t[]){1, 2, 4}, anchors)};
    expect_error("MultiBoxDetection", (const char *const[]){NULL}, 3, det, "loc_pred");
    for (int i = 0; i < 3; i++) fh_arr_free(&in[i]), fh_arr_free(&det[i]);
}

Test(detect_heads, ctc_bad_inputs_are_named) {
    fh_arr x = fh_arr_new(MXP_DTYPE_F64, 3, (const int64_t[]){4, 2, 3});
    fh_arr lab = arr(2, (const int64_t[]){2, 2}, (const double[]){1, 2, 2, 3}); /* 3 is not a class of 0..2 */
    fh_arr in[3] = {x, lab, arr(1, (const int64_t[]){2}, (const double[]){4, 5})};
    expect_error("CTCLoss", (const char *const[]){NULL}, 2, in, "label[1][1] = 3");
    fh_set(&in[1], 3, 0); /* blank_label=last: 2 is the blank */
    expect_error("CTCLoss", (const char *const[]){"blank_label", "last", NULL}, 2, in, "the blank 2");
    fh_set(&in[1], 3, 1);
    expect_error("CTCLoss", (const char *const[]){"use_data_lengths", "True", NULL}, 3, in, "data_lengths[1] = 5");
    expect_error("CTCLoss", (const char *const[]){"use_label_lengths", "True", NULL}, 3, in, "label_lengths[0] = 4");
    fh_arr long_lab = fh_arr_new(MXP_DTYPE_F64, 2, (const int64_t[]){2, 5}); /* 5 labels > 4 steps */
    fh_arr in2[2] = {x, long_lab};
    expect_error("CTCLoss", (const char *const[]){NULL}, 2, in2, "cannot exceed");
    expect_error("CTCLoss", (const char *const[]){"blank_label", "middle", NULL}, 2, in, "blank_label");
    for (int i = 0; i < 3; i++) fh_arr_free(&in[i]);
    fh_arr_free(&long_lab);
}

/* The gradient saved by a training forward is zero past each example's
 * data length and sums to zero over the alphabet at every step inside it
 * (softmax minus a posterior, both distributions). */
Test(detect_heads, ctc_saved_gradient_rows) {
    const int64_t T = 5, N = 2, C = 4;
    fh_arr x = fh_arr_new(MXP_DTYPE_F64, 3, (const int64_t[]){T, N, C});
    fh_fill_uniform(&x, 7, -2, 2);
    fh_arr in[3] = {x, arr(2, (const int64_t[]){2, 2}, (const double[]){1, 3, 2, 0}),
                    arr(1, (const int64_t[]){2}, (const double[]){5, 3})};
    fh_arr out[FH_MAX_IO];
    memset(out, 0, sizeof out);
    int n_out = 0;
    cr_assert_eq(fh_forward(P, "CTCLoss", (const char *const[]){"use_data_lengths", "True", NULL}, 3, in, &n_out, out,
                            MXP_REQ_WRITE), 0, "%s", fh_error());
    cr_assert_eq(n_out, 2);
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            double s = 0, a = 0;
            for (int64_t c = 0; c < C; c++) {
                double g = fh_get(&out[1], (t * N + n) * C + c);
                s += g, a += fabs(g);
            }
            int inside = t < (n ? 3 : 5);
            cr_assert(fabs(s) < 1e-12, "step %lld example %lld: gradient sums to %g", (long long)t, (long long)n, s);
            cr_assert(inside ? a > 1e-6 : a == 0, "step %lld example %lld: |gradient| %g", (long long)t, (long long)n, a);
        }
    cr_assert(fh_get(&out[0], 0) > 0 && fh_get(&out[0], 1) > 0);
    for (int i = 0; i < 3; i++) fh_arr_free(&in[i]);
    for (int i = 0; i < FH_MAX_IO; i++) fh_arr_free(&out[i]);
}
