/* test_rnn_lm.c — a fused-RNN language model as MXNet saves it
 * (tests/data/symbol/fused_rnn_lm-symbol.json: Embedding -> RNN lstm x2 ->
 * FullyConnected -> SoftmaxOutput, with MXNet's `lstm_parameters` packed
 * vector) loads; shape inference from the data shape alone gives every
 * argument (the packed vector's length by MXNet's rule); its checkpoint
 * fused_rnn_lm-0000.params (written by gen_fused_rnn_lm.py with struct)
 * loads into the bound executor; forward equals PyTorch's (nn.Embedding,
 * nn.LSTM, nn.Linear) softmax, backward equals PyTorch's gradients of the
 * packed LSTM parameters and the embedding; and one SGD step on those
 * gradients lowers the loss. */
#include "exec_test_util.h"

#define DIR MXP_SOURCE_DIR "/tests/data/symbol/"

/* One "<name> <n> | values" row of fused_rnn_lm_ref.txt (malloc'd). */
static double *ref_row(const char *name, int64_t want_n) {
    FILE *f = fopen(DIR "fused_rnn_lm_ref.txt", "r");
    cr_assert(f, "cannot open fused_rnn_lm_ref.txt");
    static char line[1 << 16];
    double *v = NULL;
    while (fgets(line, sizeof line, f)) {
        char nm[64];
        long long n;
        int off = 0;
        if (sscanf(line, "%63s %lld |%n", nm, &n, &off) != 2 || strcmp(nm, name)) continue;
        cr_assert_eq(n, want_n, "%s: %lld values, want %lld", name, n, (long long)want_n);
        v = malloc((size_t)n * sizeof *v);
        char *p = line + off, *end;
        for (long long i = 0; i < n; i++, p = end) {
            v[i] = strtod(p, &end);
            cr_assert(end != p, "%s: value %lld missing", name, i);
        }
    }
    fclose(f);
    cr_assert(v, "no row '%s'", name);
    return v;
}

static double loss_of(mxp_executor *ex, const double *label) {
    int n;
    mxp_ndarray *const *o;
    cr_assert_eq(mxp_executor_outputs(ex, &n, &o), MXP_OK);
    double *p = et_read(o[0]), loss = 0;
    for (int r = 0; r < 10; r++) loss -= log(p[r * 12 + (int)label[r]]);
    free(p);
    return loss;
}

static void assert_close(const char *what, const double *got, const double *want, int64_t n, double atol, double rtol) {
    for (int64_t i = 0; i < n; i++)
        cr_assert(fabs(got[i] - want[i]) <= atol + rtol * fabs(want[i]), "%s[%lld] = %.9g, PyTorch %.9g", what,
                  (long long)i, got[i], want[i]);
}

Test(rnn_lm, loads_infers_trains_and_matches_pytorch, .timeout = 120) {
    mxp_symbol *sym = NULL;
    cr_assert_eq(mxp_symbol_load_file(DIR "fused_rnn_lm-symbol.json", &sym), MXP_OK, "%s", mxp_last_error());
    const char *dn[] = {"data"};
    mxp_shape d = {.ndim = 2, .dims = {5, 2}};
    int na, no, complete;
    mxp_shape *as, *os;
    cr_assert_eq(mxp_symbol_infer_shape(sym, 1, dn, &d, &na, &as, &no, &os, NULL, NULL, &complete), MXP_OK, "%s",
                 mxp_last_error());
    cr_assert_eq(complete, 1);
    const char *const *an;
    cr_assert_eq(mxp_symbol_list_arguments(sym, &na, &an), MXP_OK);
    /* MXNet's GetRnnParamSize: lstm, 4*6 rows per layer, (4+6+2) and (6+6+2) columns. */
    struct { const char *name; int nd; int64_t dims[3]; } want[] = {
        {"embed_weight", 2, {12, 4}},        {"lstm_parameters", 1, {24 * 12 + 24 * 14}},
        {"lstm_begin_state_0", 3, {2, 2, 6}}, {"lstm_begin_state_1", 3, {2, 2, 6}},
        {"pred_weight", 2, {12, 6}},         {"pred_bias", 1, {12}}, {"softmax_label", 1, {10}},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        int i = 0;
        while (i < na && strcmp(an[i], want[k].name)) i++;
        cr_assert_lt(i, na, "no argument %s", want[k].name);
        cr_assert_eq(as[i].ndim, want[k].nd, "%s rank", want[k].name);
        for (int j = 0; j < want[k].nd; j++)
            cr_assert_eq(as[i].dims[j], want[k].dims[j], "%s dim %d = %lld", want[k].name, j, (long long)as[i].dims[j]);
    }
    cr_assert_eq(no, 1);
    cr_assert(os[0].ndim == 2 && os[0].dims[0] == 10 && os[0].dims[1] == 12);
    free(as);
    free(os);

    mxp_executor *ex = et_bind(sym, MXP_DTYPE_F32, 1, dn, &d, 9, MXP_REQ_WRITE, "softmax_label", 12);
    int np;
    mxp_ndarray **arrs;
    char **names;
    cr_assert_eq(mxp_ndarray_load(DIR "fused_rnn_lm-0000.params", &np, &arrs, &names), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(np, 4);
    for (int i = 0; i < np; i++) {
        cr_assert(!strncmp(names[i], "arg:", 4), "%s", names[i]);
        mxp_ndarray *dst = et_arg(ex, sym, names[i] + 4, 0);
        cr_assert_eq(mxp_ndarray_size(dst), mxp_ndarray_size(arrs[i]), "%s size", names[i]);
        double *v = et_read(arrs[i]);
        et_set(dst, v);
        free(v);
    }
    mxp_ndarray_list_free(np, arrs, names);
    double *data = ref_row("data", 10), *label = ref_row("softmax_label", 10);
    et_set(et_arg(ex, sym, "data", 0), data);
    et_set(et_arg(ex, sym, "softmax_label", 0), label);
    cr_assert_eq(mxp_ndarray_fill(et_arg(ex, sym, "lstm_begin_state_0", 0), 0), MXP_OK);
    cr_assert_eq(mxp_ndarray_fill(et_arg(ex, sym, "lstm_begin_state_1", 0), 0), MXP_OK);

    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    int n;
    mxp_ndarray *const *o;
    cr_assert_eq(mxp_executor_outputs(ex, &n, &o), MXP_OK);
    double *prob = et_read(o[0]), *want_prob = ref_row("softmax_output", 120);
    assert_close("softmax_output", prob, want_prob, 120, 2e-6, 1e-5);
    const char *gname[] = {"lstm_parameters", "embed_weight"};
    int64_t gn[] = {24 * 12 + 24 * 14, 48};
    for (int k = 0; k < 2; k++) {
        char rn[64];
        snprintf(rn, sizeof rn, "grad_%s", gname[k]);
        double *g = et_read(et_arg(ex, sym, gname[k], 1)), *w = ref_row(rn, gn[k]);
        assert_close(rn, g, w, gn[k], 1e-5, 1e-4);
        free(g);
        free(w);
    }

    /* One SGD step (lr 0.1) on every parameter lowers the loss. */
    double loss0 = loss_of(ex, label);
    const char *params[] = {"embed_weight", "lstm_parameters", "pred_weight", "pred_bias"};
    for (int k = 0; k < 4; k++) {
        mxp_ndarray *wa = et_arg(ex, sym, params[k], 0);
        double *w = et_read(wa), *g = et_read(et_arg(ex, sym, params[k], 1));
        for (int64_t i = 0; i < mxp_ndarray_size(wa); i++) w[i] -= 0.1 * g[i];
        et_set(wa, w);
        free(w);
        free(g);
    }
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK, "%s", mxp_last_error());
    double loss1 = loss_of(ex, label);
    cr_assert_lt(loss1, loss0 - 1e-3, "loss %.6f -> %.6f after one SGD step", loss0, loss1);

    free(prob);
    free(want_prob);
    free(data);
    free(label);
    mxp_executor_free(ex);
    mxp_symbol_release(sym);
}
