/* template_pack.c — a complete mxplug pack to copy and edit.
 *
 * It defines two operators:
 *   template_axpb    out = alpha * data + beta   (a full op: params, shape
 *                    inference, an implementation with forward/backward)
 *   template_square  out = data * data           (a SimpleOp: one kernel plus
 *                    a gradient kind; the host builds the rest)
 * A pack includes only <mxp/...> headers and never links against libmxplug:
 * every host service arrives through the mxp_host table handed to init.
 *
 * To write your own pack:
 *
 *   1. Copy this folder, rename the file and the TEMPLATE_* names, and set
 *      PACK in the Makefile.  Keep every symbol `static`: the only exported
 *      symbol is mxp_plugin_v1 (step 6).
 *   2. Parameters: declare a struct holding the parsed values and an array
 *      of mxp_param_def describing them (name, type, default, range, doc).
 *      The host parses MXNet-style strings into your struct; you never parse.
 *   3. The op definition: name, doc, schema, input names, and shape
 *      inference (fill out[] from in[]; return MXP_EINCOMPLETE while inputs
 *      are unknown, MXP_ESHAPE with a message when they are inconsistent).
 *   4. An implementation: forward (and backward unless MXP_OP_NO_GRADIENT),
 *      on a device ("cpu"), with a rank.  Honour req (write/inplace/add) and
 *      report failures with host->set_error; never print, never exit.
 *   5. Optional: SimpleOps, for whole-array elementwise kernels; and
 *      counters the pack publishes (ABI 1.2, <mxp/stats.h>): register them
 *      in init with mxp_registrar_add_stat, bump them from kernels with
 *      mxp_stat_add; `mxplug train --stats` and `mxplug packs --stats`
 *      print them, applications read them with mxp_pack_stats().
 *   6. The descriptor (name = the manifest's pack name, version, init) and
 *      MXP_PLUGIN_DEFINE.  init only registers: no allocation, no threads,
 *      no hardware; failures roll the whole pack back.
 *   7. Build (`make`), generate the manifest entry (`make manifest`, which
 *      runs `mxplug manifest gen`), then point MXP_PLUGIN_PATH at the folder
 *      and check with `mxplug list` and `mxplug info template_axpb`.
 *
 * Kernels here handle contiguous float32 and float64 only; the `supports`
 * predicate refuses anything else with a reason, which `mxplug info OP
 * --why` shows. */
#include <mxp/plugin.h>

#include <stdio.h>

/* The host table, kept from init for set_error and friends (valid until
 * fini returns). */
static const mxp_host *template_host;

/* A counter the pack publishes (step 5): host memory, bumped atomically;
 * NULL (and bumps no-ops) on a host older than ABI 1.2. */
static mxp_stat *template_axpb_elements;
static const mxp_stat_def template_axpb_elements_def = {
    MXP_HEADER(mxp_stat_def), "template_axpb.elements", MXP_STAT_COUNT, 0, "elements",
    "elements template_axpb's forward computed",
};

/* ---------------------------------------------------------------- step 2 */
typedef struct template_axpb_params {
    double alpha;
    double beta;
} template_axpb_params;

static const mxp_param_def template_axpb_schema[] = {
    MXP_PARAM("alpha", MXP_PARAM_FLOAT, 0, template_axpb_params, alpha, "1.0", 0, 0, NULL,
              "Scale applied to every element."),
    MXP_PARAM("beta", MXP_PARAM_FLOAT, 0, template_axpb_params, beta, "0.0", 0, 0, NULL,
              "Offset added after scaling."),
};

/* ---------------------------------------------------------------- step 3 */
static int template_axpb_infer_shape(mxp_infer_shape_args *a) {
    if (a->in[0].ndim < 0) return MXP_EINCOMPLETE; /* not known yet: not an error */
    a->out[0] = a->in[0];
    return MXP_OK;
}

static const mxp_op_def template_axpb_def = {
    .hdr = MXP_HEADER(mxp_op_def),
    .name = "template_axpb",
    .doc = "Elementwise alpha * data + beta (the template pack's example op).",
    .params = template_axpb_schema,
    .n_params = sizeof template_axpb_schema / sizeof template_axpb_schema[0],
    .params_size = sizeof(template_axpb_params),
    .arg_names = (const char *const[]){"data", NULL},
    .infer_shape = template_axpb_infer_shape,
    /* infer_type NULL: the output takes the input's dtype. */
    .backward_deps = MXP_BWD_OUT_GRAD, /* d/dx = alpha: needs only out_grad */
    .forward_inplace = (const mxp_inplace_pair[]){{0, 0}},
    .n_forward_inplace = 1,
};

/* ---------------------------------------------------------------- step 4 */
static int template_supports(mxp_impl_query_args *a) {
    int32_t dt = a->n_in ? a->in_dtypes[0] : MXP_DTYPE_UNKNOWN;
    if (dt != MXP_DTYPE_F32 && dt != MXP_DTYPE_F64) {
        if (a->reason) snprintf(a->reason, a->reason_size, "float32/float64 only (dtype %d)", (int)dt);
        return 0;
    }
    return 1;
}

/* y (req) = a * x + b over n contiguous elements. */
static int template_axpb_run(const mxp_tensor *x, const mxp_tensor *y, int32_t req, double a, double b) {
    if (req == MXP_REQ_NULL) return MXP_OK;
    if (!mxp_tensor_is_contiguous(x) || !mxp_tensor_is_contiguous(y))
        return template_host->set_error(MXP_EUNSUPPORTED, "template_axpb: strided views unsupported");
    int64_t n = mxp_tensor_numel(x);
    if (x->dtype == MXP_DTYPE_F32) {
        const float *xp = mxp_tensor_ptr(x);
        float *yp = mxp_tensor_ptr(y);
        for (int64_t i = 0; i < n; i++) {
            float v = (float)a * xp[i] + (float)b;
            yp[i] = req == MXP_REQ_ADD ? yp[i] + v : v;
        }
    } else if (x->dtype == MXP_DTYPE_F64) {
        const double *xp = mxp_tensor_ptr(x);
        double *yp = mxp_tensor_ptr(y);
        for (int64_t i = 0; i < n; i++) {
            double v = a * xp[i] + b;
            yp[i] = req == MXP_REQ_ADD ? yp[i] + v : v;
        }
    } else {
        return template_host->set_error(MXP_ETYPE, "template_axpb: dtype %d unsupported", (int)x->dtype);
    }
    return MXP_OK;
}

static int template_axpb_forward(const mxp_forward_args *a) {
    const template_axpb_params *p = a->params;
    int rc = template_axpb_run(&a->in[0], &a->out[0], a->req[0], p->alpha, p->beta);
    if (rc == MXP_OK) mxp_stat_add(template_axpb_elements, (uint64_t)mxp_tensor_numel(&a->in[0]));
    return rc;
}

static int template_axpb_backward(const mxp_backward_args *a) {
    const template_axpb_params *p = a->params;
    /* in_grad = alpha * out_grad */
    return template_axpb_run(&a->out_grad[0], &a->in_grad[0], a->req[0], p->alpha, 0.0);
}

static const mxp_op_impl template_axpb_impl = {
    .hdr = MXP_HEADER(mxp_op_impl),
    .op_name = "template_axpb",
    .impl_name = "default",
    .device = "cpu",
    .rank = MXP_RANK_PRIMARY,
    .doc = "plain loop",
    .supports = template_supports,
    .forward = template_axpb_forward,
    .backward = template_axpb_backward,
};

/* ---------------------------------------------------------------- step 5 */
/* SimpleOp kernels see inputs already shaped like the output; these handle
 * the contiguous case. */
static int template_square_forward(const mxp_simple_args *a) {
    const mxp_tensor *x = &a->in[0], *y = a->out;
    if (a->req == MXP_REQ_NULL) return MXP_OK;
    if (!mxp_tensor_is_contiguous(x) || !mxp_tensor_is_contiguous(y) || x->dtype != MXP_DTYPE_F32)
        return template_host->set_error(MXP_EUNSUPPORTED, "template_square: contiguous float32 only");
    int64_t n = mxp_tensor_numel(x);
    const float *xp = mxp_tensor_ptr(x);
    float *yp = mxp_tensor_ptr(y);
    for (int64_t i = 0; i < n; i++) {
        float v = xp[i] * xp[i];
        yp[i] = a->req == MXP_REQ_ADD ? yp[i] + v : v;
    }
    return MXP_OK;
}

/* USES_INPUT: in_grad = 2 * x * out_grad. */
static int template_square_backward(const mxp_simple_grad_args *a) {
    const mxp_tensor *g = a->out_grad, *x = &a->in[0], *dx = &a->in_grad[0];
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    if (!mxp_tensor_is_contiguous(g) || !mxp_tensor_is_contiguous(x) || !mxp_tensor_is_contiguous(dx) ||
        g->dtype != MXP_DTYPE_F32)
        return template_host->set_error(MXP_EUNSUPPORTED, "template_square: contiguous float32 only");
    int64_t n = mxp_tensor_numel(g);
    const float *gp = mxp_tensor_ptr(g), *xp = mxp_tensor_ptr(x);
    float *dp = mxp_tensor_ptr(dx);
    for (int64_t i = 0; i < n; i++) {
        float v = 2.0f * xp[i] * gp[i];
        dp[i] = a->req[0] == MXP_REQ_ADD ? dp[i] + v : v;
    }
    return MXP_OK;
}

static const mxp_simple_op_def template_square_def = {
    .hdr = MXP_HEADER(mxp_simple_op_def),
    .name = "template_square",
    .doc = "Elementwise square (the template pack's SimpleOp example).",
    .kind = MXP_SIMPLE_UNARY,
    .grad_kind = MXP_GRAD_USES_INPUT,
    .inplace = MXP_SIMPLE_INPLACE_FWD,
    .forward = template_square_forward,
    .backward = template_square_backward,
    .impl_name = "default",
    .device = "cpu",
    .rank = MXP_RANK_PRIMARY,
};

/* ---------------------------------------------------------------- step 6 */
static int template_init(const mxp_plugin_init_args *a) {
    template_host = a->host;
    mxp_registrar *r = a->registrar;
    int rc = r->add_op(r, &template_axpb_def);
    if (rc == MXP_OK) rc = r->add_impl(r, &template_axpb_impl);
    if (rc == MXP_OK) rc = r->add_simple_op(r, &template_square_def);
    if (rc == MXP_OK) rc = mxp_registrar_add_stat(r, &template_axpb_elements_def, &template_axpb_elements);
    return rc; /* on failure the host rolls back everything staged */
}

static void template_fini(const mxp_plugin_fini_args *a) {
    (void)a; /* nothing to release: everything above is static */
    template_host = NULL;
}

static const mxp_plugin_desc template_desc = {
    .hdr = MXP_HEADER(mxp_plugin_desc),
    .min_host_minor = 0, /* uses only ABI 1.0 slots */
    .name = "template",
    .version = "0.1.0",
    .description = "Template pack: template_axpb (op) and template_square (SimpleOp)",
    .license = "Apache-2.0",
    .init = template_init,
    .fini = template_fini,
};

MXP_PLUGIN_DEFINE(template_desc)
