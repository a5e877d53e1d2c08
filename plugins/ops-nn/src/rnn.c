/* rnn.c — MXNet's fused RNN operator: its parameters, argument and output
 * names, shape inference (the packed parameter vector's length follows
 * from data's shape, MXNet's GetRnnParamSize) and the forward/backward
 * glue to rnn_kern.c.
 *
 * Inputs (MXNet's names): data (T, N, C) in layout TNC, parameters (the
 * flat packed vector, layout in rnn_kern.c), state (L*D, N, H) and, for
 * mode lstm, state_cell (L*D, N, H).  Outputs: output (T, N, D*H), and
 * with state_outputs state_output (L*D, N, H) and, for lstm,
 * statecell_output.  float32 and float64.
 *
 * Refused with a clear error (check_params): projection_size (LSTMP),
 * lstm_state_clip_min/max and use_sequence_length (variable lengths).
 *
 * Backward recomputes the forward: the per-step gates would have to travel
 * from forward to backward in a hidden output, and the number of visible
 * outputs of this op depends on state_outputs while mxp_op_def's
 * n_visible_outputs is one number.  The cost is one extra forward per
 * training step.  Dropout p applies to the outputs of every layer but the
 * last, in training only (mask: rnn_kern.c). */
#include "rnn_kern.h"

typedef struct rnn_params {
    int64_t state_size, num_layers;
    int32_t bidirectional, mode, state_outputs, lstm_state_clip_nan, use_sequence_length, reserved;
    double p;
    mxp_param_opt_int projection_size;
    mxp_param_opt_float lstm_state_clip_min, lstm_state_clip_max;
} rnn_params;

static const char *const rnn_modes[] = {"rnn_relu", "rnn_tanh", "lstm", "gru", NULL};

static const mxp_param_def rnn_schema[] = {
    NN_PMIN("state_size", MXP_PARAM_INT, MXP_PARAM_REQUIRED, rnn_params, state_size, NULL, 1, "size of the state for each layer"),
    NN_PMIN("num_layers", MXP_PARAM_INT, MXP_PARAM_REQUIRED, rnn_params, num_layers, NULL, 1, "number of stacked layers"),
    NN_P("bidirectional", MXP_PARAM_BOOL, 0, rnn_params, bidirectional, "False", NULL, "whether to use bidirectional recurrent layers"),
    NN_P("mode", MXP_PARAM_ENUM, MXP_PARAM_REQUIRED, rnn_params, mode, NULL, rnn_modes, "the type of RNN to compute"),
    MXP_PARAM("p", MXP_PARAM_FLOAT, MXP_PARAM_HAS_MIN | MXP_PARAM_HAS_MAX, rnn_params, p, "0", 0, 1, NULL,
              "drop rate of the dropout on the outputs of each RNN layer, except the last layer."),
    NN_P("state_outputs", MXP_PARAM_BOOL, 0, rnn_params, state_outputs, "False", NULL, "Whether to have the states as symbol outputs."),
    NN_P("projection_size", MXP_PARAM_OPT_INT, 0, rnn_params, projection_size, "None", NULL, "size of project size (not supported)"),
    NN_P("lstm_state_clip_min", MXP_PARAM_OPT_FLOAT, 0, rnn_params, lstm_state_clip_min, "None", NULL, "Minimum clip value of LSTM states (not supported)."),
    NN_P("lstm_state_clip_max", MXP_PARAM_OPT_FLOAT, 0, rnn_params, lstm_state_clip_max, "None", NULL, "Maximum clip value of LSTM states (not supported)."),
    NN_P("lstm_state_clip_nan", MXP_PARAM_BOOL, 0, rnn_params, lstm_state_clip_nan, "False", NULL, "Whether to stop NaN from propagating in state by clipping it to min/max (no effect without clipping)."),
    NN_P("use_sequence_length", MXP_PARAM_BOOL, 0, rnn_params, use_sequence_length, "False", NULL, "If set to true, this layer takes in an extra input parameter sequence_length (not supported)."),
};

static int rnn_check_params(mxp_check_params_args *a) {
    const rnn_params *p = a->params;
    if (p->projection_size.has_value)
        return NN_ERR(MXP_EUNSUPPORTED, "RNN: projection_size (LSTM with projection) is not supported");
    if (p->lstm_state_clip_min.has_value || p->lstm_state_clip_max.has_value)
        return NN_ERR(MXP_EUNSUPPORTED, "RNN: lstm_state_clip_min/lstm_state_clip_max are not supported");
    if (p->use_sequence_length)
        return NN_ERR(MXP_EUNSUPPORTED, "RNN: use_sequence_length (variable-length sequences) is not supported");
    if (p->p >= 1) return NN_ERR(MXP_EINVAL, "RNN: p must be below 1 (it is %g)", p->p);
    return MXP_OK;
}

static int rnn_list_args(mxp_list_names_args *a) {
    const rnn_params *p = a->params;
    const char *n[] = {"data", "parameters", "state", "state_cell"};
    a->count = p->mode == RNN_LSTM ? 4 : 3;
    for (uint32_t i = 0; i < a->count; i++) snprintf(a->names[i], MXP_NAME_MAX, "%s", n[i]);
    return MXP_OK;
}

static int rnn_list_outputs(mxp_list_names_args *a) {
    const rnn_params *p = a->params;
    const char *n[] = {"output", "state_output", "statecell_output"};
    a->count = !p->state_outputs ? 1 : p->mode == RNN_LSTM ? 3 : 2;
    for (uint32_t i = 0; i < a->count; i++) snprintf(a->names[i], MXP_NAME_MAX, "%s", n[i]);
    return MXP_OK;
}

static int64_t rnn_dirs(const rnn_params *p) { return p->bidirectional ? 2 : 1; }

static int rnn_infer_shape(mxp_infer_shape_args *a) {
    const rnn_params *p = a->params;
    const mxp_shape *d = &a->in[0];
    if (d->ndim < 0) return MXP_EINCOMPLETE;
    char buf[96];
    if (d->ndim != 3)
        return NN_ERR(MXP_ESHAPE, "RNN: data must be (sequence length, batch, input size), got %s",
                      nn_shape_str(d, buf, sizeof buf));
    int64_t D = rnn_dirs(p), L = p->num_layers, H = p->state_size, N = d->dims[1], C = d->dims[2];
    int st;
    if (N > 0) {
        int64_t sd[3] = {L * D, N, H};
        mxp_shape s = nn_shape(3, sd);
        if ((st = nn_shape_assign("RNN", "state", &a->in[2], &s)) < 0) return st;
        if (p->mode == RNN_LSTM && (st = nn_shape_assign("RNN", "state_cell", &a->in[3], &s)) < 0) return st;
        for (uint32_t k = 1; k < a->n_out; k++)
            if ((st = nn_shape_assign("RNN", k == 1 ? "state_output" : "statecell_output", &a->out[k], &s)) < 0)
                return st;
    }
    if (C > 0) {
        int64_t np = rnn_param_count(p->mode, L, D, C, H);
        mxp_shape ps = nn_shape(1, &np);
        if ((st = nn_shape_assign("RNN", "parameters", &a->in[1], &ps)) < 0) return st;
    }
    mxp_shape o = *d;
    o.dims[2] = D * H;
    if ((st = nn_shape_assign("RNN", "output", &a->out[0], &o)) < 0) return st;
    return nn_shape_known(d) ? MXP_OK : MXP_EINCOMPLETE;
}

/* The problem of one call from the op's tensors (checked). */
static int rnn_problem_of(const rnn_params *p, const mxp_op_ctx *ctx, const mxp_tensor *in, uint32_t n_in,
                          rnn_problem *pb) {
    int32_t dt;
    int st;
    uint32_t need = p->mode == RNN_LSTM ? 4 : 3;
    if (n_in < need) return NN_ERR(MXP_EINVAL, "RNN: %u inputs, mode needs %u", n_in, need);
    if ((st = nn_check_float("RNN", in, need, &dt)) < 0 || (st = nn_check_contig("RNN", in, need)) < 0) return st;
    for (uint32_t i = 0; i < need; i++)
        if (!in[i].data) return NN_ERR(MXP_EINVAL, "RNN: input %u has no data", i);
    const mxp_tensor *x = &in[0];
    if (x->ndim != 3) return NN_ERR(MXP_ESHAPE, "RNN: data must be 3-D (T, N, C), it has %d dims", x->ndim);
    memset(pb, 0, sizeof *pb);
    pb->mode = p->mode;
    pb->L = p->num_layers; pb->D = rnn_dirs(p); pb->H = p->state_size;
    pb->G = p->mode == RNN_LSTM ? 4 : p->mode == RNN_GRU ? 3 : 1;
    pb->T = x->shape[0]; pb->N = x->shape[1]; pb->C = x->shape[2];
    pb->p = p->p; pb->train = ctx->is_train; pb->dtype = dt;
    int64_t np = rnn_param_count(p->mode, pb->L, pb->D, pb->C, pb->H);
    if (mxp_tensor_numel(&in[1]) != np)
        return NN_ERR(MXP_ESHAPE, "RNN: parameters has %lld values, these sizes need %lld",
                      (long long)mxp_tensor_numel(&in[1]), (long long)np);
    int64_t ns = pb->L * pb->D * pb->N * pb->H;
    for (uint32_t i = 2; i < need; i++)
        if (mxp_tensor_numel(&in[i]) != ns)
            return NN_ERR(MXP_ESHAPE, "RNN: %s has %lld values, want (%lld, %lld, %lld)", i == 2 ? "state" : "state_cell",
                          (long long)mxp_tensor_numel(&in[i]), (long long)(pb->L * pb->D), (long long)pb->N,
                          (long long)pb->H);
    pb->x = nn_ptr(&in[0]); pb->w = nn_ptr(&in[1]); pb->hx = nn_ptr(&in[2]);
    pb->cx = p->mode == RNN_LSTM ? nn_ptr(&in[3]) : NULL;
    return MXP_OK;
}

static int rnn_fwd(const mxp_forward_args *a) {
    rnn_problem pb;
    int st = rnn_problem_of(a->params, a->ctx, a->in, a->n_in, &pb);
    if (st < 0) return st;
    if ((st = nn_check_contig("RNN", a->out, a->n_out)) < 0) return st;
    rnn_fwd_out o = {0};
    o.y = nn_ptr(&a->out[0]); o.req_y = a->req[0];
    if (a->n_out > 1) { o.hy = nn_ptr(&a->out[1]); o.req_hy = a->req[1]; }
    if (a->n_out > 2) { o.cy = nn_ptr(&a->out[2]); o.req_cy = a->req[2]; }
    return rnn_forward(a->ctx, &pb, &o);
}

static int rnn_bwd(const mxp_backward_args *a) {
    rnn_problem pb;
    int st = rnn_problem_of(a->params, a->ctx, a->in, a->n_in, &pb);
    if (st < 0) return st;
    if ((st = nn_check_contig("RNN", a->in_grad, a->n_in)) < 0 || (st = nn_check_contig("RNN", a->out_grad, a->n_out)) < 0)
        return st;
    rnn_bwd_io io = {0};
    io.dy = nn_ptr(&a->out_grad[0]);
    if (a->n_out > 1) io.dhy = nn_ptr(&a->out_grad[1]);
    if (a->n_out > 2) io.dcy = nn_ptr(&a->out_grad[2]);
    void **dst[4] = {&io.dx, &io.dw, &io.dhx, &io.dcx};
    int32_t *req[4] = {&io.req_dx, &io.req_dw, &io.req_dhx, &io.req_dcx};
    for (uint32_t i = 0; i < a->n_in && i < 4; i++) {
        *dst[i] = nn_ptr(&a->in_grad[i]);
        *req[i] = a->req[i];
    }
    return rnn_backward(a->ctx, &pb, &io);
}

static const mxp_op_def rnn_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "RNN",
    .doc = "Applies recurrent layers (vanilla RNN with relu/tanh, LSTM or GRU) to input data, "
           "with all parameters in one packed vector (cuDNN/MXNet layout).",
    .params = rnn_schema, .n_params = NN_COUNT(rnn_schema), .params_size = sizeof(rnn_params),
    .list_args = rnn_list_args, .list_outputs = rnn_list_outputs, .infer_shape = rnn_infer_shape,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA, .check_params = rnn_check_params,
};

static const mxp_op_impl rnn_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "RNN", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .doc = "sequence-wide i2h GEMM, per-step h2h GEMM; backward recomputes forward",
    .forward = rnn_fwd, .backward = rnn_bwd,
};

/* rnn_param_concat.c: Gluon's companion op, registered with RNN. */
int nn_register_rnn_param_concat(mxp_registrar *r);

int nn_register_rnn(mxp_registrar *r) {
    int st = r->add_op(r, &rnn_def);
    if (st >= 0) st = r->add_impl(r, &rnn_impl);
    return st < 0 ? st : nn_register_rnn_param_concat(r);
}
