/* xop.h — a small driver for ops-basic's "whole-array" full ops (the
 * shape_ext.c and index_ext.c families): the op's math is written once, on
 * contiguous row-major float64 arrays, and the driver does the rest —
 * loading every input (any dtype, any strides) into float64, allocating
 * outputs and input gradients as zeroed float64 arrays, and storing the
 * results back into the host's tensors honouring req (write / inplace /
 * add / null) and the output dtype.
 *
 * Why float64 copies: these ops move or select elements (tile, pick, sort,
 * gather_nd, ...) or are cheap reductions over them; one exact code path
 * for every dtype and view beats a typed kernel per case.  Values that are
 * not representable in float64 (int64 beyond 2^53) are the limit, as they
 * are for the rest of ops-basic's dtype-generic paths.
 * Entries the host passes with data NULL (backward does not depend on
 * them) arrive with v == NULL.  Memory comes from the host (alloc_host). */
#ifndef OPS_BASIC_XOP_H
#define OPS_BASIC_XOP_H

#include "common.h"

#define XOP_MAX_IO 8

/* A contiguous float64 array. */
typedef struct xarr {
    double *v;          /* NULL: absent                                   */
    int64_t n;          /* element count                                   */
    int nd;
    int64_t shape[MXP_MAX_NDIM];
} xarr;

typedef struct xop_io {
    const void *params;
    const mxp_op_ctx *ctx;
    uint32_t n_in, n_out;
    xarr in[XOP_MAX_IO];    /* forward and backward: the inputs            */
    xarr out[XOP_MAX_IO];   /* forward: to fill; backward: forward outputs */
    xarr og[XOP_MAX_IO];    /* backward: out_grad                          */
    xarr ig[XOP_MAX_IO];    /* backward: input gradients to fill (zeroed)  */
} xop_io;

typedef int (*xop_fn)(xop_io *io);

/* mxp_op_impl.user_data of an xop: its two halves (bwd NULL: no gradient,
 * every input gradient is written as zero). */
typedef struct xop_info {
    xop_fn fwd, bwd;
} xop_info;

int xop_forward(const mxp_forward_args *a);
int xop_backward(const mxp_backward_args *a);

/* Row-major strides of a, in elements. */
void xarr_strides(const xarr *a, int64_t *st);

#define XOP_IMPL(OPNAME, INFO)                                                       \
    { MXP_HEADER(mxp_op_impl), OPNAME, "default", "cpu", MXP_RANK_PRIMARY, 0, NULL,   \
      NULL, NULL, NULL, xop_forward, xop_backward, NULL, (void *)&(INFO) }

/* Shape helpers for infer_shape. */
static inline int xop_axis(int64_t axis, int nd, int64_t *out) {
    int64_t a = axis < 0 ? axis + nd : axis;
    if (a < 0 || a >= nd) return MXP_EINVAL;
    *out = a;
    return MXP_OK;
}

#endif /* OPS_BASIC_XOP_H */
