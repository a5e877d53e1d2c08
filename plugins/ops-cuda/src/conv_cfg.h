/* conv_cfg.h — the geometry of one Convolution node as both GPU
 * implementations need it, read from the op's parameters through the
 * host's typed parameter access (never ops-nn's struct) and from the
 * node's shapes.  Only 2-D NCHW convolutions; conv_cfg_read refuses the
 * rest with a reason (for `supports`). */
#ifndef OPS_CUDA_CONV_CFG_H
#define OPS_CUDA_CONV_CFG_H

#include "cu_common.h"

typedef struct conv_cfg {
    int n, c, h, w;        /* data                                   */
    int f, kh, kw;         /* num_filter and kernel                  */
    int sh, sw, ph, pw, dh, dw;
    int groups;
    int oh, ow;            /* output                                 */
    int has_bias;
} conv_cfg;

/* Fill cfg from the parameter record p and the shapes of data (in[0]),
 * weight (in[1]) and output (out[0]); n_in 3 means a bias.  Returns 1 when
 * the configuration is supported, 0 with a reason in `reason`, or a
 * negative status for an error reading the parameters. */
int conv_cfg_read(const mxp_op_params *p, uint32_t n_in, const mxp_shape *in, const mxp_shape *out, conv_cfg *cfg,
                  char *reason, size_t reason_size);

/* The same from impl query args (supports / workspace / create). */
int conv_cfg_query(const mxp_impl_query_args *a, conv_cfg *cfg, char *reason, size_t reason_size);

#endif /* OPS_CUDA_CONV_CFG_H */
