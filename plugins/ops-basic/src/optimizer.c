/* optimizer.c — in-place optimizer updates with MXNet 1.x names,
 * parameters and formulas: sgd_update, sgd_mom_update, adam_update,
 * rmsprop_update.  The output is the new weight (normally bound to the
 * weight array itself: forward_inplace 0 -> 0); state inputs (mom; mean,
 * var; n) are updated in place and listed in mutate_inputs.  clip(g) =
 * max(-c, min(c, g)) when clip_gradient >= 0 (MXNet's test).
 *   sgd:     w = (1 - lr wd) w - lr clip(rescale g)
 *   sgd_mom: mom = momentum mom - lr wd w - lr clip(rescale g); w += mom
 *   adam:    g' = clip(rescale g + wd w); mean = b1 mean + (1-b1) g';
 *            var = b2 var + (1-b2) g'^2; w -= lr mean / (sqrt(var) + eps)
 *   rmsprop: g' = clip(rescale g + wd w); n = (1-gamma1) g'^2 + gamma1 n;
 *            w -= lr g' / sqrt(n + eps), then clip to clip_weights if >= 0
 * Each step is a pass of the elementwise driver; a state update writes the
 * state tensor exactly in place (allowed by ob_ew).  Not differentiable.
 * sgd_mom on dense float32 arrays (every training step of a float32 net)
 * instead runs one fused vector pass, mom and w read once, the new mom and
 * w written once: the two-pass version streamed each large weight through
 * memory 7 times instead of 5, in scalar code.  Same float operations in
 * the same order, so both paths give identical bits. */
#include <tgmath.h>

#include "common.h"

typedef struct opt_param {
    double lr, wd, rescale_grad, clip_gradient;
    double momentum;         /* sgd_mom */
    double beta1, beta2, epsilon;
    double gamma1, clip_weights;
    int32_t lazy_update;     /* accepted; dense arrays only */
} opt_param;

/* env: s = lr, a = wd, b = rescale, c = clip, d = momentum/beta1/gamma1,
 * e2 = beta2, f = epsilon or clip_weights */
#define CLIPG(x) (e->c >= 0 ? ((x) > (T)e->c ? (T)e->c : (x) < (T)-e->c ? (T)-e->c : (x)) : (x))
#define RG (CLIPG((T)e->b * B[i]))                      /* clip(rescale g)        */
#define RGW (CLIPG((T)e->b * B[i] + (T)e->a * C[i]))    /* clip(rescale g + wd w) */

/* A = w, B = g */
OB_KERNEL(k_sgd, ((T)1 - s * (T)e->a) * A[i] - s * RG)
/* A = mom, B = g, C = w */
OB_KERNEL(k_mom, (T)e->d * A[i] - s * (T)e->a * C[i] - s * RG)
/* A = w, B = mom */
OB_KERNEL(k_add, A[i] + B[i])
/* A = mean, B = g, C = w */
OB_KERNEL(k_adam_mean, (T)e->d * A[i] + ((T)1 - (T)e->d) * RGW)
/* A = var, B = g, C = w */
OB_KERNEL(k_adam_var, (T)e->e2 * A[i] + ((T)1 - (T)e->e2) * RGW * RGW)
/* A = w, B = mean, C = var */
OB_KERNEL(k_adam_w, A[i] - s * B[i] / (sqrt(C[i]) + (T)e->f))
/* A = n, B = g, C = w */
OB_KERNEL(k_rms_n, ((T)1 - (T)e->d) * RGW * RGW + (T)e->d * A[i])
/* rmsprop weight: needs w, g, n and wd — D = n, C = w; A unused */
#define RMSW (C[i] - s * RGW / sqrt(D[i] + (T)e->e2))
OB_KERNEL(k_rms_w, e->f >= 0 ? (RMSW > (T)e->f ? (T)e->f : RMSW < (T)-e->f ? (T)-e->f : RMSW) : RMSW)

enum { O_SGD, O_MOM, O_ADAM, O_RMS };

/* ------------------------------------------- fused sgd_mom, float32 */
typedef float v16 __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));
#define LD16(p) (*(const v16u *)(const void *)(p))
#define ST16(p, v) (*(v16u *)(void *)(p) = (v))
#define SEL16(m, a, b) ((v16)(((v16i)(a) & (m)) | ((v16i)(b) & ~(m))))
/* Clones as in ops-nn's microkernel.c: static behind a plain call, none
 * under ASan. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__clang__)
#define TC __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TC
#endif

typedef struct mom_job {
    float *mom, *y;           /* y may be w itself (inplace), never partly */
    const float *g, *w;
    float momentum, lr, lr_wd, rescale, clip;
    int clip_on, add;         /* add: y += new w (req add) */
} mom_job;

/* [b, e) of: m = momentum mom - (lr wd) w - lr clip(rescale g); mom = m;
 * y (=|+=) w + m — the expressions of k_mom and k_add, in float. */
TC static void mom_f32_range(void *arg, int64_t b, int64_t e) {
    const mom_job *j = arg;
    float *mom = j->mom, *y = j->y;
    const float *g = j->g, *w = j->w;
    const float d = j->momentum, lr = j->lr, lw = j->lr_wd, rs = j->rescale, c = j->clip;
    int64_t i = b;
    for (; i + 16 <= e; i += 16) {
        v16 x = rs * LD16(g + i), wv = LD16(w + i);
        if (j->clip_on) {
            x = SEL16(x > c, (v16){0} + c, x);
            x = SEL16(x < -c, (v16){0} - c, x);
        }
        v16 m = d * LD16(mom + i) - lw * wv - lr * x;
        ST16(mom + i, m);
        v16 nw = wv + m;
        if (j->add) nw += LD16(y + i);
        ST16(y + i, nw);
    }
    for (; i < e; i++) {
        float x = rs * g[i], wv = w[i];
        if (j->clip_on) x = x > c ? c : x < -c ? -c : x;
        float m = d * mom[i] - lw * wv - lr * x;
        mom[i] = m;
        y[i] = j->add ? y[i] + (wv + m) : wv + m;
    }
}

/* Fused path when every array is dense float32 of one shape and mom
 * overlaps neither w nor y; else MXP_EUNSUPPORTED (caller takes ob_ew). */
static int mom_fused(const mxp_op_ctx *ctx, const mxp_tensor *w, const mxp_tensor *g, const mxp_tensor *mom,
                     const mxp_tensor *y, int req, const ob_env *e) {
    const mxp_tensor *t[4] = {w, g, mom, y};
    int64_t n = mxp_tensor_numel(w);
    for (int i = 0; i < 4; i++)
        if (t[i]->dtype != MXP_DTYPE_F32 || !mxp_tensor_is_contiguous(t[i]) || mxp_tensor_numel(t[i]) != n)
            return MXP_EUNSUPPORTED;
    char *pm = ob_base(mom), *pw = ob_base(w), *py = ob_base(y);
    size_t bytes = (size_t)n * sizeof(float);
    if ((pm < pw + bytes && pw < pm + bytes) || (pm < py + bytes && py < pm + bytes) ||
        (py != pw && py < pw + bytes && pw < py + bytes))
        return MXP_EUNSUPPORTED;
    float lr = (float)e->s;
    mom_job j = {(float *)(void *)pm, (float *)(void *)py, (const float *)(const void *)ob_base(g),
                 (const float *)(const void *)pw, (float)e->d, lr, lr * (float)e->a, (float)e->b,
                 (float)e->c, e->c >= 0, req == MXP_REQ_ADD};
    if (n == 0) return MXP_OK;
    if (ctx && ctx->parallel_for && n >= 65536) return ctx->parallel_for(ctx, n, 32768, mom_f32_range, &j);
    mom_f32_range(&j, 0, n);
    return MXP_OK;
}

static int opt_shape(mxp_infer_shape_args *a) {
    const mxp_shape *w = NULL;
    for (uint32_t i = 0; i < a->n_in && !w; i++) if (ob_shape_known(&a->in[i])) w = &a->in[i];
    if (!w) return MXP_EINCOMPLETE;
    mxp_shape s = *w;
    char b1[96], b2[96];
    for (uint32_t i = 0; i < a->n_in; i++) {
        if (!ob_shape_known(&a->in[i])) { a->in[i] = s; continue; }
        if (a->in[i].ndim != s.ndim || memcmp(a->in[i].dims, s.dims, sizeof(int64_t) * (size_t)s.ndim))
            return ob_err(MXP_ESHAPE, "optimizer: input %u is %s, weight %s", i,
                          ob_shape_str(&a->in[i], b1, 96), ob_shape_str(&s, b2, 96));
    }
    a->out[0] = s;
    return MXP_OK;
}

static int opt_fwd(const mxp_forward_args *a) {
    const opt_param *p = a->params;
    int kind = (int)(intptr_t)a->user_data;
    const mxp_tensor *w = &a->in[0], *g = &a->in[1], *y = &a->out[0];
    ob_env e = {0};
    e.s = p->lr; e.a = p->wd; e.b = p->rescale_grad; e.c = p->clip_gradient;
    int req = a->req[0], rc;
    switch (kind) {
    case O_SGD: {
        const mxp_tensor *in[2] = {w, g};
        return ob_ew(a->ctx, 2, in, y, req, &k_sgd, &e);
    }
    case O_MOM: {
        const mxp_tensor *mom = &a->in[2];
        e.d = p->momentum;
        if (req != MXP_REQ_NULL && (rc = mom_fused(a->ctx, w, g, mom, y, req, &e)) != MXP_EUNSUPPORTED)
            return rc;
        const mxp_tensor *in1[3] = {mom, g, w};
        if ((rc = ob_ew(a->ctx, 3, in1, mom, MXP_REQ_WRITE, &k_mom, &e))) return rc;
        const mxp_tensor *in2[2] = {w, mom};
        return ob_ew(a->ctx, 2, in2, y, req, &k_add, &e);
    }
    case O_ADAM: {
        const mxp_tensor *mean = &a->in[2], *var = &a->in[3];
        e.d = p->beta1; e.e2 = p->beta2; e.f = p->epsilon;
        const mxp_tensor *in1[3] = {mean, g, w};
        if ((rc = ob_ew(a->ctx, 3, in1, mean, MXP_REQ_WRITE, &k_adam_mean, &e))) return rc;
        const mxp_tensor *in2[3] = {var, g, w};
        if ((rc = ob_ew(a->ctx, 3, in2, var, MXP_REQ_WRITE, &k_adam_var, &e))) return rc;
        const mxp_tensor *in3[3] = {w, mean, var};
        return ob_ew(a->ctx, 3, in3, y, req, &k_adam_w, &e);
    }
    default: {
        const mxp_tensor *n = &a->in[2];
        e.d = p->gamma1; e.e2 = p->epsilon; e.f = p->clip_weights;
        const mxp_tensor *in1[3] = {n, g, w};
        if ((rc = ob_ew(a->ctx, 3, in1, n, MXP_REQ_WRITE, &k_rms_n, &e))) return rc;
        const mxp_tensor *in2[4] = {w, g, w, n};
        return ob_ew(a->ctx, 4, in2, y, req, &k_rms_w, &e);
    }
    }
}

#define LR_P MXP_PARAM("lr", MXP_PARAM_FLOAT, MXP_PARAM_REQUIRED, opt_param, lr, NULL, 0, 0, NULL, "Learning rate")
#define WD_P MXP_PARAM("wd", MXP_PARAM_FLOAT, 0, opt_param, wd, "0", 0, 0, NULL, "Weight decay")
#define RESCALE_P MXP_PARAM("rescale_grad", MXP_PARAM_FLOAT, 0, opt_param, rescale_grad, "1", 0, 0, NULL, \
    "Gradient scale")
#define CLIP_P MXP_PARAM("clip_gradient", MXP_PARAM_FLOAT, 0, opt_param, clip_gradient, "-1", 0, 0, NULL, \
    "Clip gradients to [-c, c] when c >= 0")
#define LAZY_P MXP_PARAM("lazy_update", MXP_PARAM_BOOL, 0, opt_param, lazy_update, "True", 0, 0, NULL, \
    "Lazy update for row_sparse gradients (dense here)")

static const mxp_param_def sgd_params[] = {LR_P, WD_P, RESCALE_P, CLIP_P, LAZY_P};
static const mxp_param_def mom_params[] = {
    LR_P,
    MXP_PARAM("momentum", MXP_PARAM_FLOAT, 0, opt_param, momentum, "0", 0, 0, NULL, "Momentum"),
    WD_P, RESCALE_P, CLIP_P, LAZY_P,
};
static const mxp_param_def adam_params[] = {
    LR_P,
    MXP_PARAM("beta1", MXP_PARAM_FLOAT, 0, opt_param, beta1, "0.9", 0, 0, NULL, "Decay of the mean"),
    MXP_PARAM("beta2", MXP_PARAM_FLOAT, 0, opt_param, beta2, "0.999", 0, 0, NULL, "Decay of the variance"),
    MXP_PARAM("epsilon", MXP_PARAM_FLOAT, 0, opt_param, epsilon, "1e-08", 0, 0, NULL, "Stability term"),
    WD_P, RESCALE_P, CLIP_P, LAZY_P,
};
static const mxp_param_def rms_params[] = {
    LR_P,
    MXP_PARAM("gamma1", MXP_PARAM_FLOAT, 0, opt_param, gamma1, "0.95", 0, 0, NULL, "Decay of n"),
    MXP_PARAM("epsilon", MXP_PARAM_FLOAT, 0, opt_param, epsilon, "1e-08", 0, 0, NULL, "Stability term"),
    WD_P, RESCALE_P, CLIP_P,
    MXP_PARAM("clip_weights", MXP_PARAM_FLOAT, 0, opt_param, clip_weights, "-1", 0, 0, NULL,
              "Clip weights to [-c, c] when c >= 0"),
};

static const char *const sgd_args[] = {"weight", "grad", NULL};
static const char *const mom_args[] = {"weight", "grad", "mom", NULL};
static const char *const adam_args[] = {"weight", "grad", "mean", "var", NULL};
static const char *const rms_args[] = {"weight", "grad", "n", NULL};
static const int32_t mut_2[] = {2};
static const int32_t mut_23[] = {2, 3};
static const mxp_inplace_pair ip00[] = {{0, 0}};

#define ODEF(NAME, PARAMS, ARGS, MUT, NMUT, KIND, DOC)                                       \
    { .hdr = MXP_HEADER(mxp_op_def), .name = NAME, .doc = DOC, .params = PARAMS,             \
      .n_params = sizeof(PARAMS) / sizeof(PARAMS[0]), .params_size = sizeof(opt_param),      \
      .arg_names = ARGS, .infer_shape = opt_shape, .flags = MXP_OP_NO_GRADIENT,              \
      .forward_inplace = ip00, .n_forward_inplace = 1, .mutate_inputs = MUT,                 \
      .n_mutate_inputs = NMUT, .user_data = (void *)(intptr_t)(KIND) }

static const mxp_op_def opt_defs[] = {
    ODEF("sgd_update", sgd_params, sgd_args, NULL, 0, O_SGD, "SGD step; output is the new weight."),
    ODEF("sgd_mom_update", mom_params, mom_args, mut_2, 1, O_MOM,
         "SGD with momentum; updates mom in place."),
    ODEF("adam_update", adam_params, adam_args, mut_23, 2, O_ADAM,
         "Adam step; updates mean and var in place."),
    ODEF("rmsprop_update", rms_params, rms_args, mut_2, 1, O_RMS,
         "RMSProp (Tieleman & Hinton) step; updates n in place."),
};

static const mxp_op_impl opt_impls[] = {
    OB_IMPL_UD("sgd_update", opt_fwd, NULL, (intptr_t)O_SGD),
    OB_IMPL_UD("sgd_mom_update", opt_fwd, NULL, (intptr_t)O_MOM),
    OB_IMPL_UD("adam_update", opt_fwd, NULL, (intptr_t)O_ADAM),
    OB_IMPL_UD("rmsprop_update", opt_fwd, NULL, (intptr_t)O_RMS),
};

int ob_reg_optimizer(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof opt_defs / sizeof opt_defs[0]; i++) {
        int rc = ob_add_op(r, &opt_defs[i], &opt_impls[i]);
        if (rc) return rc;
    }
    return MXP_OK;
}
