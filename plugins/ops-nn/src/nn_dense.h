/* nn_dense.h — the float64 whole-array driver of ops-nn's smaller ops
 * (nn_ext.c, norm_ext.c, detect.c): the op's math is written once on
 * contiguous float64 arrays; the driver loads every input (float32 or
 * float64, contiguous, as everywhere in ops-nn), allocates outputs and
 * input gradients as zeroed float64 arrays, and stores results back with
 * req (write / inplace / add / null).  Entries the host passes with data
 * NULL (not needed by backward) arrive with v == NULL.  The same idea as
 * ops-basic's xop.h; packs share no code, so each has its own. */
#ifndef NN_DENSE_H
#define NN_DENSE_H

#include "nn_common.h"

#define ND_MAX_IO 8

typedef struct ndarr {
    double *v;
    int64_t n;
    int nd;
    int64_t shape[MXP_MAX_NDIM];
} ndarr;

typedef struct nd_io {
    const void *params;
    const mxp_op_ctx *ctx;
    uint32_t n_in, n_out;
    ndarr in[ND_MAX_IO], out[ND_MAX_IO], og[ND_MAX_IO], ig[ND_MAX_IO];
} nd_io;

typedef int (*nd_fn)(nd_io *io);
typedef struct nd_info {
    const char *op;   /* for messages */
    nd_fn fwd, bwd;   /* bwd NULL: zero gradients */
} nd_info;

int nd_forward(const mxp_forward_args *a);
int nd_backward(const mxp_backward_args *a);

#define ND_IMPL(OPNAME, INFO)                                                              \
    { .hdr = MXP_HEADER(mxp_op_impl), .op_name = OPNAME, .impl_name = "default", .device = "cpu", \
      .rank = MXP_RANK_PRIMARY, .forward = nd_forward, .backward = nd_backward, .user_data = (void *)&(INFO) }

static inline int nd_axis(int64_t axis, int nd, int64_t *out) {
    int64_t a = axis < 0 ? axis + nd : axis;
    if (a < 0 || a >= nd) return MXP_EINVAL;
    *out = a;
    return MXP_OK;
}

#endif
