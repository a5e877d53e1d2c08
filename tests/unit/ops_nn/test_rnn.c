/* test_rnn.c — ops-nn's fused RNN op (rnn.c, rnn_kern.c) against
 * tests/data/ops/rnn_cases.txt (PyTorch nn.LSTM / GRU / RNN in float64 with
 * their weights packed into MXNet's layout by gen_rnn_cases.py): every
 * mode, 2 layers, bidirectional, state_outputs; forward in float64 and
 * float32, PyTorch's input gradients, and finite-difference gradients.
 * Also: the packed vector's length as MXNet computes it, dropout between
 * layers (active in training, the same mask in forward and backward), and
 * the refused options named in the error. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "op_table.h"

#define CASES MXP_SOURCE_DIR "/tests/data/ops/rnn_cases.txt"

static fh_pack *P;
static void setup(void) {
    P = fh_load("ops-nn");
    cr_assert(P, "load ops-nn: %s", fh_error());
}
static void teardown(void) { fh_unload(P); }

TestSuite(rnn, .init = setup, .fini = teardown);

Test(rnn, pytorch_reference_cases) {
    int n = ot_run_file(P, CASES, "ops-nn");
    cr_assert_eq(n, 8, "%d cases ran, want 8", n);
}

/* MXNet's GetRnnParamSize, written out for two configurations. */
Test(rnn, parameter_vector_length_is_inferred) {
    const mxp_op_def *def = fh_op_def(P, "RNN");
    cr_assert(def);
    /* lstm, 2 layers, bidirectional, C=3, H=2: 4H*D = 16 per gate block;
     * layer 0 (3 + 2 + 2) * 16, layer 1 (2*2 + 2 + 2) * 16. */
    const char *const kw[] = {"mode", "lstm", "state_size", "2", "num_layers", "2", "bidirectional", "True",
                              "state_outputs", "True", NULL};
    fh_arr x = fh_arr_new(MXP_DTYPE_F64, 3, (const int64_t[]){4, 2, 3});
    fh_arr w = fh_arr_new(MXP_DTYPE_F64, 1, (const int64_t[]){7 * 16 + 8 * 16});
    fh_arr h = fh_arr_new(MXP_DTYPE_F64, 3, (const int64_t[]){4, 2, 2});
    fh_arr c = fh_arr_new(MXP_DTYPE_F64, 3, (const int64_t[]){4, 2, 2});
    fh_arr in[4] = {x, w, h, c}, out[FH_MAX_IO];
    memset(out, 0, sizeof out);
    int n = 0;
    cr_assert_eq(fh_forward(P, "RNN", kw, 4, in, &n, out, MXP_REQ_WRITE), 0, "%s", fh_error());
    cr_assert_eq(n, 3);
    cr_assert_eq(out[0].shape[2], 4);
    for (int k = 0; k < n; k++) fh_arr_free(&out[k]);
    /* one parameter too many: refused, naming both counts */
    fh_arr w2 = fh_arr_new(MXP_DTYPE_F64, 1, (const int64_t[]){7 * 16 + 8 * 16 + 1});
    in[1] = w2;
    cr_assert_neq(fh_forward(P, "RNN", kw, 4, in, &n, out, MXP_REQ_WRITE), 0);
    cr_assert(strstr(fh_error(), "240"), "%s", fh_error());
    /* gru, 1 layer: 3H * (C + H + 2) */
    const char *const kg[] = {"mode", "gru", "state_size", "5", "num_layers", "1", NULL};
    fh_arr wg = fh_arr_new(MXP_DTYPE_F64, 1, (const int64_t[]){15 * (3 + 5 + 2)});
    fh_arr hg = fh_arr_new(MXP_DTYPE_F64, 3, (const int64_t[]){1, 2, 5});
    fh_arr ig[3] = {x, wg, hg};
    memset(out, 0, sizeof out);
    cr_assert_eq(fh_forward(P, "RNN", kg, 3, ig, &n, out, MXP_REQ_WRITE), 0, "%s", fh_error());
    cr_assert_eq(n, 1);
    fh_arr_free(&out[0]);
    fh_arr_free(&x); fh_arr_free(&w); fh_arr_free(&h); fh_arr_free(&c);
    fh_arr_free(&w2); fh_arr_free(&wg); fh_arr_free(&hg);
}

/* p > 0 in training: the output differs from p = 0 (values dropped between
 * layers), two calls on the same inputs agree, and the gradient of the
 * initial states (which do not key the mask) matches finite differences
 * through the dropped connections. */
Test(rnn, dropout_between_layers) {
    const char *const k0[] = {"mode", "rnn_tanh", "state_size", "3", "num_layers", "2", "p", "0", NULL};
    const char *const k5[] = {"mode", "rnn_tanh", "state_size", "3", "num_layers", "2", "p", "0.5", NULL};
    int64_t np = 3 * (2 + 3 + 2) + 3 * (3 + 3 + 2);
    fh_arr x = fh_arr_new(MXP_DTYPE_F64, 3, (const int64_t[]){5, 4, 2});
    fh_arr w = fh_arr_new(MXP_DTYPE_F64, 1, &np);
    fh_arr h = fh_arr_new(MXP_DTYPE_F64, 3, (const int64_t[]){2, 4, 3});
    fh_fill_uniform(&x, 1, -1, 1);
    fh_fill_uniform(&w, 2, -0.8, 0.8);
    fh_fill_uniform(&h, 3, -0.5, 0.5);
    fh_arr in[3] = {x, w, h}, a[FH_MAX_IO], b[FH_MAX_IO], c[FH_MAX_IO];
    memset(a, 0, sizeof a); memset(b, 0, sizeof b); memset(c, 0, sizeof c);
    int n = 0;
    cr_assert_eq(fh_forward(P, "RNN", k0, 3, in, &n, a, MXP_REQ_WRITE), 0, "%s", fh_error());
    cr_assert_eq(fh_forward(P, "RNN", k5, 3, in, &n, b, MXP_REQ_WRITE), 0, "%s", fh_error());
    cr_assert_eq(fh_forward(P, "RNN", k5, 3, in, &n, c, MXP_REQ_WRITE), 0, "%s", fh_error());
    int differ = 0;
    for (int64_t i = 0; i < fh_numel(&a[0]); i++) {
        differ += fh_get(&a[0], i) != fh_get(&b[0], i);
        cr_assert_eq(fh_get(&b[0], i), fh_get(&c[0], i), "dropout mask differs between two calls at %lld", (long long)i);
    }
    cr_assert_gt(differ, fh_numel(&a[0]) / 2, "only %d of %lld outputs changed by p=0.5", differ,
                 (long long)fh_numel(&a[0]));
    cr_assert_eq(fh_grad_check(P, "RNN", k5, 3, in, 1u << 2, 1e-6, 1e-6, 1e-5), 0, "%s", fh_error());
    fh_arr_free(&a[0]); fh_arr_free(&b[0]); fh_arr_free(&c[0]);
    fh_arr_free(&x); fh_arr_free(&w); fh_arr_free(&h);
}

Test(rnn, unsupported_options_are_refused_by_name) {
    fh_arr x = fh_arr_new(MXP_DTYPE_F64, 3, (const int64_t[]){2, 1, 2});
    fh_arr w = fh_arr_new(MXP_DTYPE_F64, 1, (const int64_t[]){2 * (2 + 2 + 2)});
    fh_arr h = fh_arr_new(MXP_DTYPE_F64, 3, (const int64_t[]){1, 1, 2});
    fh_arr in[3] = {x, w, h}, out[FH_MAX_IO];
    memset(out, 0, sizeof out);
    int n = 0;
    const char *const bad[][9] = {
        {"mode", "rnn_relu", "state_size", "2", "num_layers", "1", "projection_size", "1", NULL},
        {"mode", "rnn_relu", "state_size", "2", "num_layers", "1", "use_sequence_length", "True", NULL},
        {"mode", "rnn_relu", "state_size", "2", "num_layers", "1", "lstm_state_clip_min", "-1", NULL},
        {"mode", "rnn_relu", "state_size", "2", "num_layers", "1", "p", "1", NULL},
        {"mode", "lstmp", "state_size", "2", "num_layers", "1", NULL},
    };
    const char *want[] = {"projection_size", "use_sequence_length", "lstm_state_clip", "p", "mode"};
    for (int i = 0; i < 5; i++) {
        cr_assert_neq(fh_forward(P, "RNN", bad[i], 3, in, &n, out, MXP_REQ_WRITE), 0, "case %d accepted", i);
        cr_assert(strstr(fh_error(), want[i]), "case %d: %s", i, fh_error());
    }
    fh_arr_free(&x); fh_arr_free(&w); fh_arr_free(&h);
}

/* _rnn_param_concat (rnn_param_concat.c): MXNet's RNNParamConcatShape gives
 * one or two inputs of unknown length the rest of the known output's;
 * forward joins, backward splits (finite differences). */
Test(rnn, param_concat_infers_and_joins) {
    const mxp_op_def *def = fh_op_def(P, "_rnn_param_concat");
    cr_assert(def);
    int64_t params[8];
    const char *const kw[] = {"num_args", "3", "dim", "0", NULL};
    cr_assert_eq(fh_parse(def->params, def->n_params, kw, params), 0, "%s", fh_error());
    mxp_shape in[3] = {{.ndim = 1, .dims = {4}}, {.ndim = -1}, {.ndim = 1, .dims = {0}}}, out = {.ndim = 1, .dims = {10}};
    mxp_infer_shape_args a = {.hdr = MXP_HEADER(mxp_infer_shape_args), .params = params, .n_in = 3, .n_out = 1,
                              .in = in, .out = &out};
    cr_assert_eq(def->infer_shape(&a), MXP_OK, "%s", fh_error());
    cr_assert(in[1].ndim == 1 && in[1].dims[0] == 3 && in[2].ndim == 1 && in[2].dims[0] == 3, "got (%lld) (%lld)",
              (long long)in[1].dims[0], (long long)in[2].dims[0]);
    mxp_shape odd[3] = {{.ndim = 1, .dims = {3}}, {.ndim = 1, .dims = {0}}, {.ndim = 1, .dims = {0}}};
    a.in = odd;
    cr_assert_neq(def->infer_shape(&a), MXP_OK, "7 values cannot split between 2 inputs");
    /* forward and gradients on 2-D pieces along dim 0 */
    fh_arr x[3] = {fh_arr_new(MXP_DTYPE_F64, 2, (const int64_t[]){1, 2}), fh_arr_new(MXP_DTYPE_F64, 2, (const int64_t[]){3, 2}),
                   fh_arr_new(MXP_DTYPE_F64, 2, (const int64_t[]){2, 2})};
    for (int i = 0; i < 3; i++) fh_fill_uniform(&x[i], 10 + (uint64_t)i, -1, 1);
    fh_arr o[FH_MAX_IO];
    memset(o, 0, sizeof o);
    int n = 0;
    cr_assert_eq(fh_forward(P, "_rnn_param_concat", kw, 3, x, &n, o, MXP_REQ_WRITE), 0, "%s", fh_error());
    cr_assert(o[0].ndim == 2 && o[0].shape[0] == 6 && o[0].shape[1] == 2);
    for (int i = 0, k = 0; i < 3; i++)
        for (int64_t j = 0; j < fh_numel(&x[i]); j++, k++) cr_assert_eq(fh_get(&o[0], k), fh_get(&x[i], j));
    cr_assert_eq(fh_grad_check(P, "_rnn_param_concat", kw, 3, x, ~0u, 1e-6, 1e-8, 1e-6), 0, "%s", fh_error());
    fh_arr_free(&o[0]);
    for (int i = 0; i < 3; i++) fh_arr_free(&x[i]);
}
