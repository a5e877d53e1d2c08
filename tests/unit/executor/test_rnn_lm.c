/* test_rnn_lm.c — a fused-RNN language model as MXNet saves it
 * (tests/data/symbol/fused_rnn_lm-symbol.json: Embedding -> RNN lstm x2 ->
 * FullyConnected -> SoftmaxOutput, with MXNet's `lstm_parameters` packed
 * vector) loads; shape inference from the data shape alone gives every
 * argument (the packed vector's length by MXNet's rule); its checkpoint
 * fused_rnn_lm-0000.params (written by gen_fused_rnn_lm.py with struct)
 * loads into the bound executor; forward equals PyTorch's (nn.Embedding,
 * nn.LSTM, nn.Linear) softmax, backward equals PyTorch's gradients of the
 * packed LSTM parameters and the embedding; and one SGD step on those
 * gradients lowers the loss.  The same for the model as Gluon exports it
 * (gluon_rnn_lm-*: per-layer weights joined by _rnn_param_concat), whose
 * per-layer gradients concatenate to the packed vector's. */
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

/* One way of packaging the model: file names and its argument names. */
typedef struct lm_fixture {
    const char *prefix, *data, *state0, *state1, *embed, *pred_w, *pred_b;
    const char *lstm[8]; /* the LSTM parameter arrays, in packed order */
    int n_lstm;
} lm_fixture;

static const lm_fixture fused_fx = {
    "fused_rnn_lm", "data", "lstm_begin_state_0", "lstm_begin_state_1", "embed_weight", "pred_weight", "pred_bias",
    {"lstm_parameters"}, 1,
};

static const lm_fixture gluon_fx = {
    "gluon_rnn_lm", "data0", "data1", "data2", "embedding0_weight", "dense0_weight", "dense0_bias",
    {"lstm0_l0_i2h_weight", "lstm0_l0_h2h_weight", "lstm0_l1_i2h_weight", "lstm0_l1_h2h_weight",
     "lstm0_l0_i2h_bias", "lstm0_l0_h2h_bias", "lstm0_l1_i2h_bias", "lstm0_l1_h2h_bias"}, 8,
};

static void assert_arg_shape(int na, const char *const *an, const mxp_shape *as, const char *name, int nd,
                             const int64_t *dims) {
    int i = 0;
    while (i < na && strcmp(an[i], name)) i++;
    cr_assert_lt(i, na, "no argument %s", name);
    cr_assert_eq(as[i].ndim, nd, "%s rank %d, want %d", name, as[i].ndim, nd);
    for (int j = 0; j < nd; j++)
        cr_assert_eq(as[i].dims[j], dims[j], "%s dim %d = %lld, want %lld", name, j, (long long)as[i].dims[j],
                     (long long)dims[j]);
}

static void run_lm(const lm_fixture *fx) {
    char path[512];
    mxp_symbol *sym = NULL;
    snprintf(path, sizeof path, DIR "%s-symbol.json", fx->prefix);
    cr_assert_eq(mxp_symbol_load_file(path, &sym), MXP_OK, "%s", mxp_last_error());
    const char *dn[] = {fx->data};
    mxp_shape d = {.ndim = 2, .dims = {5, 2}};
    int na, no, complete;
    mxp_shape *as, *os;
    cr_assert_eq(mxp_symbol_infer_shape(sym, 1, dn, &d, &na, &as, &no, &os, NULL, NULL, &complete), MXP_OK, "%s",
                 mxp_last_error());
    cr_assert_eq(complete, 1, "%s: shapes incomplete from the data shape alone", fx->prefix);
    const char *const *an;
    cr_assert_eq(mxp_symbol_list_arguments(sym, &na, &an), MXP_OK);
    /* MXNet's GetRnnParamSize: lstm, 4*6 rows per layer, (4+6+2) and (6+6+2) columns. */
    if (fx->n_lstm == 1) assert_arg_shape(na, an, as, fx->lstm[0], 1, (const int64_t[]){24 * 12 + 24 * 14});
    assert_arg_shape(na, an, as, fx->state0, 3, (const int64_t[]){2, 2, 6});
    assert_arg_shape(na, an, as, fx->state1, 3, (const int64_t[]){2, 2, 6});
    assert_arg_shape(na, an, as, fx->embed, 2, (const int64_t[]){12, 4});
    assert_arg_shape(na, an, as, fx->pred_w, 2, (const int64_t[]){12, 6});
    assert_arg_shape(na, an, as, "softmax_label", 1, (const int64_t[]){10});
    cr_assert_eq(no, 1);
    cr_assert(os[0].ndim == 2 && os[0].dims[0] == 10 && os[0].dims[1] == 12);
    free(as);
    free(os);

    mxp_executor *ex = et_bind(sym, MXP_DTYPE_F32, 1, dn, &d, 9, MXP_REQ_WRITE, "softmax_label", 12);
    int np;
    mxp_ndarray **arrs;
    char **names;
    snprintf(path, sizeof path, DIR "%s-0000.params", fx->prefix);
    cr_assert_eq(mxp_ndarray_load(path, &np, &arrs, &names), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(np, 3 + fx->n_lstm);
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
    et_set(et_arg(ex, sym, fx->data, 0), data);
    et_set(et_arg(ex, sym, "softmax_label", 0), label);
    cr_assert_eq(mxp_ndarray_fill(et_arg(ex, sym, fx->state0, 0), 0), MXP_OK);
    cr_assert_eq(mxp_ndarray_fill(et_arg(ex, sym, fx->state1, 0), 0), MXP_OK);

    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    int n;
    mxp_ndarray *const *o;
    cr_assert_eq(mxp_executor_outputs(ex, &n, &o), MXP_OK);
    double *prob = et_read(o[0]), *want_prob = ref_row("softmax_output", 120);
    assert_close("softmax_output", prob, want_prob, 120, 2e-6, 1e-5);
    /* the LSTM arrays' gradients, concatenated, are the packed vector's */
    const int64_t np_lstm = 24 * 12 + 24 * 14;
    double *gl = malloc(np_lstm * sizeof *gl), *wl = ref_row("grad_lstm_parameters", np_lstm);
    int64_t off = 0;
    for (int k = 0; k < fx->n_lstm; k++) {
        mxp_ndarray *g = et_arg(ex, sym, fx->lstm[k], 1);
        cr_assert_leq(off + mxp_ndarray_size(g), np_lstm, "%s overflows the packed vector", fx->lstm[k]);
        double *v = et_read(g);
        memcpy(gl + off, v, (size_t)mxp_ndarray_size(g) * sizeof *v);
        off += mxp_ndarray_size(g);
        free(v);
    }
    cr_assert_eq(off, np_lstm);
    assert_close("grad_lstm_parameters", gl, wl, np_lstm, 1e-5, 1e-4);
    double *ge = et_read(et_arg(ex, sym, fx->embed, 1)), *we = ref_row("grad_embed_weight", 48);
    assert_close("grad_embed_weight", ge, we, 48, 1e-5, 1e-4);
    free(gl); free(wl); free(ge); free(we);

    /* One SGD step (lr 0.1) on every parameter lowers the loss. */
    double loss0 = loss_of(ex, label);
    const char *params[11] = {fx->embed, fx->pred_w, fx->pred_b};
    for (int k = 0; k < fx->n_lstm; k++) params[3 + k] = fx->lstm[k];
    for (int k = 0; k < 3 + fx->n_lstm; k++) {
        mxp_ndarray *wa = et_arg(ex, sym, params[k], 0);
        double *w = et_read(wa), *g = et_read(et_arg(ex, sym, params[k], 1));
        for (int64_t i = 0; i < mxp_ndarray_size(wa); i++) w[i] -= 0.1 * g[i];
        et_set(wa, w);
        free(w);
        free(g);
    }
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK, "%s", mxp_last_error());
    double loss1 = loss_of(ex, label);
    cr_assert_lt(loss1, loss0 - 1e-3, "%s: loss %.6f -> %.6f after one SGD step", fx->prefix, loss0, loss1);

    free(prob);
    free(want_prob);
    free(data);
    free(label);
    mxp_executor_free(ex);
    mxp_symbol_release(sym);
}

Test(rnn_lm, fused_rnn_cell_checkpoint, .timeout = 120) { run_lm(&fused_fx); }

Test(rnn_lm, gluon_export_with_rnn_param_concat, .timeout = 120) { run_lm(&gluon_fx); }
