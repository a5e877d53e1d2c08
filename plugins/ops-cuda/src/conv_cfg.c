/* conv_cfg.c — reads a Convolution node's geometry (conv_cfg.h): kernel,
 * stride, dilate, pad, num_filter, num_group and layout by name and type
 * from the op's parameter record, shapes from the node, and checks that
 * they agree (the output shape the host inferred is recomputed). */
#include "conv_cfg.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static int refuse(char *reason, size_t size, const char *msg) {
    if (reason && size) snprintf(reason, size, "%s", msg);
    return 0;
}

/* A 2-tuple parameter, or (dflt, dflt) when given as "()". */
static int pair(const mxp_op_params *p, const char *name, int64_t dflt, int64_t v[2], int *bad) {
    mxp_param_shape s;
    int rc = mxp_param_get_shape(g_cu_host, p, name, &s);
    if (rc) return rc;
    *bad = 0;
    if (!s.has_value || s.ndim == 0) {
        v[0] = v[1] = dflt;
    } else if (s.ndim == 2) {
        v[0] = s.dims[0];
        v[1] = s.dims[1];
    } else {
        *bad = 1;
    }
    return MXP_OK;
}

static int fits(int64_t v) { return v > 0 && v <= INT_MAX; }

int conv_cfg_read(const mxp_op_params *p, uint32_t n_in, const mxp_shape *in, const mxp_shape *out, conv_cfg *cfg,
                  char *reason, size_t reason_size) {
    memset(cfg, 0, sizeof *cfg);
    if (!p) return refuse(reason, reason_size, "the host gives no parameter record (ABI 1.1 needed)");
    const char *layout = NULL;
    int rc = mxp_param_get_enum(g_cu_host, p, "layout", &layout);
    if (rc) return rc;
    if (layout && strcmp(layout, "None") != 0 && strcmp(layout, "NCHW") != 0)
        return refuse(reason, reason_size, "only NCHW layout runs on the gpu");
    int64_t k[2], s[2], d[2], pad[2], nf = 0, ng = 0;
    int bad = 0, b2 = 0, b3 = 0, b4 = 0;
    mxp_param_shape ks;
    if ((rc = mxp_param_get_shape(g_cu_host, p, "kernel", &ks))) return rc;
    if (ks.ndim != 2) return refuse(reason, reason_size, "only 2-D convolutions run on the gpu");
    k[0] = ks.dims[0];
    k[1] = ks.dims[1];
    if ((rc = pair(p, "stride", 1, s, &b2)) || (rc = pair(p, "dilate", 1, d, &b3)) || (rc = pair(p, "pad", 0, pad, &b4)))
        return rc;
    bad = b2 || b3 || b4;
    if (bad) return refuse(reason, reason_size, "stride, dilate and pad must have 2 entries");
    if ((rc = mxp_param_get_int(g_cu_host, p, "num_filter", &nf)) || (rc = mxp_param_get_int(g_cu_host, p, "num_group", &ng)))
        return rc;
    if (in[0].ndim != 4 || in[1].ndim != 4 || out[0].ndim != 4)
        return refuse(reason, reason_size, "data, weight and output must be 4-D (NCHW)");
    for (int i = 0; i < 4; i++)
        if (!fits(in[0].dims[i]) || !fits(in[1].dims[i]) || !fits(out[0].dims[i]))
            return refuse(reason, reason_size, "a dimension is 0 or exceeds INT_MAX");
    if (!fits(k[0]) || !fits(k[1]) || !fits(s[0]) || !fits(s[1]) || !fits(d[0]) || !fits(d[1]) || !fits(nf) ||
        !fits(ng) || pad[0] < 0 || pad[1] < 0 || pad[0] > INT_MAX || pad[1] > INT_MAX)
        return refuse(reason, reason_size, "kernel, stride, dilate, num_filter and num_group must be positive");
    cfg->n = (int)in[0].dims[0];
    cfg->c = (int)in[0].dims[1];
    cfg->h = (int)in[0].dims[2];
    cfg->w = (int)in[0].dims[3];
    cfg->f = (int)nf;
    cfg->kh = (int)k[0];
    cfg->kw = (int)k[1];
    cfg->sh = (int)s[0];
    cfg->sw = (int)s[1];
    cfg->dh = (int)d[0];
    cfg->dw = (int)d[1];
    cfg->ph = (int)pad[0];
    cfg->pw = (int)pad[1];
    cfg->groups = (int)ng;
    cfg->oh = (int)out[0].dims[2];
    cfg->ow = (int)out[0].dims[3];
    cfg->has_bias = n_in > 2;
    int64_t eh = ((int64_t)cfg->h + 2 * (int64_t)cfg->ph - (int64_t)cfg->dh * (cfg->kh - 1) - 1) / cfg->sh + 1;
    int64_t ew = ((int64_t)cfg->w + 2 * (int64_t)cfg->pw - (int64_t)cfg->dw * (cfg->kw - 1) - 1) / cfg->sw + 1;
    if (cfg->c % cfg->groups || cfg->f % cfg->groups || in[1].dims[0] != cfg->f ||
        in[1].dims[1] != cfg->c / cfg->groups || in[1].dims[2] != cfg->kh || in[1].dims[3] != cfg->kw ||
        out[0].dims[0] != cfg->n || out[0].dims[1] != cfg->f || eh != cfg->oh || ew != cfg->ow)
        return refuse(reason, reason_size, "data, weight, output shapes and parameters disagree");
    return 1;
}

int conv_cfg_query(const mxp_impl_query_args *a, conv_cfg *cfg, char *reason, size_t reason_size) {
    if (a->n_in < 2 || a->n_out < 1 || !a->in_shapes || !a->out_shapes)
        return refuse(reason, reason_size, "data, weight and output shapes are needed");
    for (uint32_t i = 0; i < a->n_in; i++)
        if (a->in_dtypes && a->in_dtypes[i] != MXP_DTYPE_F32)
            return refuse(reason, reason_size, "only float32 runs on the gpu");
    return conv_cfg_read(mxp_impl_query_op_params(a), a->n_in, a->in_shapes, a->out_shapes, cfg, reason, reason_size);
}
