/* ctc_loss.c — CTCLoss (aliases ctc_loss, _contrib_CTCLoss,
 * _contrib_ctc_loss, _npx_ctc_loss) with MXNet 1.x's inputs, parameters and
 * outputs (src/operator/nn/ctc_loss-inl.h), on the float64 driver.
 *
 * Inputs data (T, N, C) activations (softmax is applied here over C), label
 * (N, L), then data_lengths (N,) with use_data_lengths and label_lengths
 * (N,) with use_label_lengths.  blank_label "first" reserves class 0 (labels
 * 1..C-1, padding value 0), "last" reserves C-1 (labels 0..C-2, padding -1);
 * without label_lengths a label ends at its first padding value.  Outputs:
 * the per-example loss -log p(label | data) (N,) and, hidden as in MXNet,
 * its gradient with respect to the activations (T, N, C), computed by the
 * same training forward (zero past each example's data length).  Backward
 * scales that by out_grad per example; labels and lengths get zero.
 *
 * The forward-backward recursions run in log space (log-sum-exp), one
 * example per parallel_for item.  As MXNet's CPU code (warp-ctc), an
 * example whose label cannot fit its length (label length + repeated
 * neighbours > data length) has loss 0 and gradient 0 (PyTorch's
 * zero_infinity=True).  Not done: integer label arrays (float32/float64
 * only, as the rest of the driver); MXNet takes any dtype there. */
#include <math.h>
#include <stdatomic.h>

#include "nn_dense.h"

typedef struct ctc_params {
    int32_t use_data_lengths, use_label_lengths, blank_label, pad;
} ctc_params;
static const char *const blank_choices[] = {"first", "last", NULL};
static const mxp_param_def ctc_schema[] = {
    NN_P("use_data_lengths", MXP_PARAM_BOOL, 0, ctc_params, use_data_lengths, "False", NULL,
         "Whether the data lengths are decided by `data_lengths`. If false, the lengths are equal to the max sequence length."),
    NN_P("use_label_lengths", MXP_PARAM_BOOL, 0, ctc_params, use_label_lengths, "False", NULL,
         "Whether the label lengths are decided by `label_lengths`, or derived from `padding_mask` "
         "(0 with blank_label first, -1 with last)."),
    NN_P("blank_label", MXP_PARAM_ENUM, 0, ctc_params, blank_label, "first", blank_choices,
         "Set the label that is reserved for blank label: first (0) or last (alphabet_size-1)."),
};
static const char *const ctc_outs[] = {"output", "grad", NULL};

static int ctc_list_args(mxp_list_names_args *a) {
    const ctc_params *p = a->params;
    const char *names[4] = {"data", "label", NULL, NULL};
    uint32_t n = 2;
    if (p->use_data_lengths) names[n++] = "data_lengths";
    if (p->use_label_lengths) names[n++] = "label_lengths";
    a->count = n;
    if (a->capacity < n) return MXP_EINVAL;
    for (uint32_t i = 0; i < n; i++) snprintf(a->names[i], MXP_NAME_MAX, "%s", names[i]);
    return MXP_OK;
}

static int ctc_shape(mxp_infer_shape_args *a) {
    const ctc_params *p = a->params;
    const mxp_shape *d = &a->in[0], *l = &a->in[1];
    char s1[64], s2[64];
    if (!nn_shape_known(d)) return MXP_EINCOMPLETE;
    if (d->ndim != 3) return NN_ERR(MXP_ESHAPE, "CTCLoss: data %s must be (sequence_length, batch, alphabet_size)",
                                    nn_shape_str(d, s1, sizeof s1));
    mxp_shape n1 = nn_shape(1, &d->dims[1]);
    for (uint32_t i = 2; i < a->n_in; i++) {
        int rc = nn_shape_assign("CTCLoss", i == 2 && p->use_data_lengths ? "data_lengths" : "label_lengths", &a->in[i], &n1);
        if (rc) return rc;
    }
    if (!nn_shape_known(l)) return MXP_EINCOMPLETE;
    if (l->ndim != 2 || l->dims[0] != d->dims[1])
        return NN_ERR(MXP_ESHAPE, "CTCLoss: label %s must be (batch, max_label_length) for data %s",
                      nn_shape_str(l, s1, sizeof s1), nn_shape_str(d, s2, sizeof s2));
    if (l->dims[1] > d->dims[0])
        return NN_ERR(MXP_ESHAPE, "CTCLoss: the max number of labels (%lld) cannot exceed the sequence length (%lld)",
                      (long long)l->dims[1], (long long)d->dims[0]);
    a->out[0] = n1;
    a->out[1] = *d;
    return MXP_OK;
}

/* One example's setting, checked before the parallel part. */
typedef struct ctc_seq { int64_t T, L; } ctc_seq;

typedef struct ctc_job {
    const double *data, *label;
    double *loss, *grad; /* grad NULL: loss only */
    const ctc_seq *seq;
    int64_t T, N, C, Lmax, blank;
    atomic_int failed;   /* set by a worker that ran out of memory */
} ctc_job;

static double lse2(double a, double b) {
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    return a > b ? a + log1p(exp(b - a)) : b + log1p(exp(a - b));
}

/* Loss (and gradient) of example n; scratch holds T*S + 2*S + T*C + C
 * doubles and S longs. */
static void ctc_one(const ctc_job *j, int64_t n, double *scratch, int64_t *ext) {
    const int64_t T = j->seq[n].T, L = j->seq[n].L, S = 2 * L + 1, C = j->C, N = j->N;
    const double *lab = j->label + n * j->Lmax;
    int64_t repeats = 0;
    for (int64_t i = 0; i < S; i++) ext[i] = i % 2 ? (int64_t)lab[i / 2] : j->blank;
    for (int64_t i = 1; i < L; i++) repeats += ext[2 * i + 1] == ext[2 * i - 1];
    j->loss[n] = 0;
    if (T == 0 || L + repeats > T) return; /* impossible (or empty): 0, MXNet's rule; grad stays 0 */
    double *alpha = scratch, *beta = alpha + T * S, *nbeta = beta + S, *lp = nbeta + S, *occ = lp + T * C;
    for (int64_t t = 0; t < T; t++) { /* log-softmax over the alphabet */
        const double *x = j->data + (t * N + n) * C;
        double mx = x[0], sum = 0;
        for (int64_t c = 1; c < C; c++) mx = fmax(mx, x[c]);
        for (int64_t c = 0; c < C; c++) sum += exp(x[c] - mx);
        double lz = mx + log(sum);
        for (int64_t c = 0; c < C; c++) lp[t * C + c] = x[c] - lz;
    }
    for (int64_t s = 0; s < S; s++) alpha[s] = s < 2 ? lp[ext[s]] : -INFINITY;
    for (int64_t t = 1; t < T; t++) {
        const double *pa = alpha + (t - 1) * S;
        double *a = alpha + t * S;
        for (int64_t s = 0; s < S; s++) {
            double v = pa[s];
            if (s >= 1) v = lse2(v, pa[s - 1]);
            if (s >= 2 && ext[s] != j->blank && ext[s] != ext[s - 2]) v = lse2(v, pa[s - 2]);
            a[s] = v == -INFINITY ? v : v + lp[t * C + ext[s]];
        }
    }
    const double *last = alpha + (T - 1) * S;
    double logz = S > 1 ? lse2(last[S - 1], last[S - 2]) : last[0];
    j->loss[n] = -logz;
    if (!j->grad) return;
    /* beta_t(s): log-probability of the rest after state s at t (emission at t excluded). */
    for (int64_t s = 0; s < S; s++) beta[s] = s >= S - 2 ? 0.0 : -INFINITY;
    for (int64_t t = T - 1; t >= 0; t--) {
        for (int64_t c = 0; c < C; c++) occ[c] = -INFINITY;
        for (int64_t s = 0; s < S; s++) occ[ext[s]] = lse2(occ[ext[s]], alpha[t * S + s] + beta[s]);
        double *g = j->grad + (t * N + n) * C;
        for (int64_t c = 0; c < C; c++) g[c] = exp(lp[t * C + c]) - exp(occ[c] - logz);
        if (t == 0) break;
        const double *e = lp + t * C; /* emissions at t, for the states of t-1 */
        for (int64_t s = 0; s < S; s++) {
            double v = beta[s] + e[ext[s]];
            if (s + 1 < S) v = lse2(v, beta[s + 1] + e[ext[s + 1]]);
            if (s + 2 < S && ext[s + 2] != j->blank && ext[s + 2] != ext[s]) v = lse2(v, beta[s + 2] + e[ext[s + 2]]);
            nbeta[s] = v;
        }
        memcpy(beta, nbeta, (size_t)S * sizeof(double));
    }
}

static void ctc_range(void *arg, int64_t begin, int64_t end) {
    ctc_job *j = arg;
    int64_t S = 2 * j->Lmax + 1;
    double *scratch = nn_alloc((uint64_t)(j->T * S + 2 * S + j->T * j->C + j->C) * sizeof(double));
    int64_t *ext = nn_alloc((uint64_t)S * sizeof(int64_t));
    if (!scratch || !ext) {
        atomic_store(&j->failed, 1);
    } else {
        for (int64_t n = begin; n < end; n++) ctc_one(j, n, scratch, ext);
    }
    nn_free(scratch);
    nn_free(ext);
}

static int ctc_f(nd_io *io) {
    const ctc_params *p = io->params;
    const ndarr *d = &io->in[0], *l = &io->in[1];
    const ndarr *dl = p->use_data_lengths ? &io->in[2] : NULL;
    const ndarr *ll = p->use_label_lengths ? &io->in[2 + p->use_data_lengths] : NULL;
    int64_t T = d->shape[0], N = d->shape[1], C = d->shape[2], Lmax = l->shape[1];
    int64_t blank = p->blank_label ? C - 1 : 0;
    double padv = p->blank_label ? -1.0 : 0.0;
    ctc_seq *seq = nn_alloc((uint64_t)(N ? N : 1) * sizeof *seq);
    if (!seq) return NN_ERR(MXP_ENOMEM, "CTCLoss: out of memory");
    int rc = MXP_OK;
    for (int64_t n = 0; n < N && !rc; n++) {
        const double *lab = l->v + n * Lmax;
        int64_t tn = dl ? (int64_t)dl->v[n] : T, ln = Lmax;
        if (ll) ln = (int64_t)ll->v[n];
        else
            for (int64_t i = 0; i < Lmax; i++)
                if (lab[i] == padv) { ln = i; break; }
        if (tn < 0 || tn > T)
            rc = NN_ERR(MXP_EINVAL, "CTCLoss: data_lengths[%lld] = %g is outside [0, %lld]", (long long)n, dl->v[n], (long long)T);
        else if (ln < 0 || ln > Lmax)
            rc = NN_ERR(MXP_EINVAL, "CTCLoss: label_lengths[%lld] = %g is outside [0, %lld]", (long long)n, ll->v[n], (long long)Lmax);
        for (int64_t i = 0; i < ln && !rc; i++) {
            int64_t k = (int64_t)lab[i];
            if (k < 0 || k >= C || k == blank)
                rc = NN_ERR(MXP_EINVAL, "CTCLoss: label[%lld][%lld] = %g is not a class of the alphabet 0..%lld without "
                            "the blank %lld (blank_label=%s)", (long long)n, (long long)i, lab[i], (long long)C - 1,
                            (long long)blank, p->blank_label ? "last" : "first");
        }
        seq[n].T = tn, seq[n].L = ln;
    }
    if (!rc) {
        ctc_job j = {d->v, l->v, io->out[0].v, io->ctx && io->ctx->is_train && io->n_out > 1 ? io->out[1].v : NULL,
                     seq, T, N, C, Lmax, blank, 0};
        rc = nn_parallel(io->ctx, N, 1, ctc_range, &j);
        if (!rc && atomic_load(&j.failed)) rc = NN_ERR(MXP_ENOMEM, "CTCLoss: out of memory for the alignment tables");
    }
    nn_free(seq);
    return rc;
}

/* d loss / d data = out_grad[n] * the gradient saved by the forward. */
static int ctc_b(nd_io *io) {
    const ndarr *og = &io->og[0], *g = &io->out[1];
    if (!og->v || !g->v) return MXP_OK;
    int64_t N = io->ig[0].shape[1], C = io->ig[0].shape[2];
    for (int64_t i = 0; i < io->ig[0].n; i++) io->ig[0].v[i] = og->v[(i / C) % N] * g->v[i];
    return MXP_OK;
}
static const nd_info ctc_info = {"CTCLoss", ctc_f, ctc_b};

static const char *const ctc_aliases[] = {"ctc_loss", "_contrib_CTCLoss", "_contrib_ctc_loss", "_npx_ctc_loss", NULL};
static const mxp_op_def ctc_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "CTCLoss", .aliases = ctc_aliases,
    .doc = "Connectionist Temporal Classification Loss.", .params = ctc_schema, .n_params = NN_COUNT(ctc_schema),
    .params_size = sizeof(ctc_params), .list_args = ctc_list_args, .output_names = ctc_outs, .infer_shape = ctc_shape,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_OUT_DATA, .n_visible_outputs = 1,
};
static const mxp_op_impl ctc_impl = ND_IMPL("CTCLoss", ctc_info);

int nn_register_ctc(mxp_registrar *r) {
    int st = r->add_op(r, &ctc_def);
    if (st < 0 || (st = r->add_impl(r, &ctc_impl)) < 0) return st;
    return MXP_OK;
}
