/* mxp/simple_op.h — SimpleOp: the seed's "unified operator API".
 *
 * A SimpleOp is a whole-array kernel (never a per-element callback) plus a
 * gradient kind.  The host expands it into a full op definition and an
 * implementation, so every SimpleOp works on NDArrays and inside symbols:
 *   - shapes and types: the output takes the (broadcast) shape and the dtype
 *     of the inputs;
 *   - BROADCAST kinds get numpy broadcasting: the host passes inputs shaped
 *     like the output with stride 0 on broadcast dimensions, and sums the
 *     full-shape input gradients the kernel writes back down to each input's
 *     own shape;
 *   - SCALAR kinds get a "scalar" parameter (MXNet's _plus_scalar & co.),
 *     delivered as mxp_simple_args.scalar;
 *   - the gradient kind decides what backward reads (out_grad only, the
 *     output, or the inputs), which lets the memory planner free the rest.
 * Kernels must honour strides (views) and req (write / inplace / add).
 * Since ABI 1.0. */
#ifndef MXP_SIMPLE_OP_H
#define MXP_SIMPLE_OP_H

#include <mxp/op.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mxp_simple_kind {
    MXP_SIMPLE_UNARY     = 1, /* out = f(x)                                */
    MXP_SIMPLE_BINARY    = 2, /* out = f(lhs, rhs), equal shapes           */
    MXP_SIMPLE_BROADCAST = 3, /* out = f(lhs, rhs), numpy broadcasting     */
    MXP_SIMPLE_SCALAR    = 4  /* out = f(x, scalar)                        */
} mxp_simple_kind;

typedef enum mxp_grad_kind {
    MXP_GRAD_NONE          = 0, /* not differentiable                       */
    MXP_GRAD_USES_OUT_GRAD = 1, /* backward reads only out_grad             */
    MXP_GRAD_USES_OUTPUT   = 2, /* ... and the output (exp, sigmoid, tanh)  */
    MXP_GRAD_USES_INPUT    = 3, /* ... and the inputs (square, mul, power)  */
    MXP_GRAD_ZERO          = 4  /* differentiable, gradient is zero
                                   (comparisons, floor, sign)               */
} mxp_grad_kind;

/* Inplace options (the seed's SimpleOpInplaceOption), as flags. */
#define MXP_SIMPLE_INPLACE_FWD 0x1u /* input 0 may share the output's memory   */
#define MXP_SIMPLE_INPLACE_BWD 0x2u /* out_grad may share in_grad 0's memory   */
/* (since 1.3, same field) a BINARY op whose backward gives both inputs
 * out_grad unchanged: its definition gets MXP_OP_IDENTITY_GRAD (op.h). */
#define MXP_SIMPLE_IDENTITY_GRAD 0x4u
/* With MXP_SIMPLE_INPLACE_BWD a binary kernel must finish reading out_grad
 * before it writes in_grad[0]: write in_grad[1] first, then in_grad[0]. */

typedef struct mxp_simple_args {
    mxp_header hdr;
    const mxp_op_ctx *ctx;
    const void *params;     /* the SimpleOp's own parsed params (optional)  */
    void *user_data;
    double scalar;          /* SCALAR kinds                                 */
    uint32_t n_in;          /* 1 (UNARY, SCALAR) or 2                       */
    int32_t req;            /* mxp_req for out                              */
    const mxp_tensor *in;   /* [n_in], shaped like out                      */
    const mxp_tensor *out;
} mxp_simple_args;

typedef struct mxp_simple_grad_args {
    mxp_header hdr;
    const mxp_op_ctx *ctx;
    const void *params;
    void *user_data;
    double scalar;
    uint32_t n_in;
    uint32_t reserved;
    const mxp_tensor *out_grad; /* shaped like out                          */
    const mxp_tensor *in;       /* [n_in] shaped like out (USES_INPUT), else
                                   entries have data NULL                   */
    const mxp_tensor *out;      /* USES_OUTPUT, else data NULL              */
    const mxp_tensor *in_grad;  /* [n_in], each shaped like out             */
    const int32_t *req;         /* [n_in] mxp_req                           */
} mxp_simple_grad_args;

typedef struct mxp_simple_op_def {
    mxp_header hdr;
    const char *name;
    const char *const *aliases;  /* NULL-terminated (optional)              */
    const char *doc;
    int32_t kind;                /* mxp_simple_kind                         */
    int32_t grad_kind;           /* mxp_grad_kind                           */
    uint32_t inplace;            /* MXP_SIMPLE_INPLACE_*                    */
    uint32_t resources;          /* MXP_RESOURCE_*                          */
    const mxp_param_def *params; /* extra params, e.g. clip's a_min (opt.)  */
    uint32_t n_params;
    uint32_t params_size;
    int (*forward)(const mxp_simple_args *a);
    int (*backward)(const mxp_simple_grad_args *a); /* NULL for NONE/ZERO   */
    /* The implementation the expansion registers.  Registering the same
     * name again with another impl_name/device adds an implementation. */
    const char *impl_name;       /* NULL means "default"                    */
    const char *device;          /* NULL means "cpu"                        */
    int32_t rank;
    uint32_t reserved;
    void *user_data;
} mxp_simple_op_def;

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
_Static_assert(offsetof(mxp_simple_args, scalar) == 32, "layout is frozen");
_Static_assert(offsetof(mxp_simple_args, in) == 48, "layout is frozen");
_Static_assert(sizeof(mxp_simple_args) == 64, "layout is frozen");
_Static_assert(offsetof(mxp_simple_grad_args, out_grad) == 48, "layout is frozen");
_Static_assert(sizeof(mxp_simple_grad_args) == 88, "layout is frozen");
_Static_assert(offsetof(mxp_simple_op_def, kind) == 32, "layout is frozen");
_Static_assert(offsetof(mxp_simple_op_def, params) == 48, "layout is frozen");
_Static_assert(offsetof(mxp_simple_op_def, forward) == 64, "layout is frozen");
_Static_assert(offsetof(mxp_simple_op_def, impl_name) == 80, "layout is frozen");
_Static_assert(offsetof(mxp_simple_op_def, rank) == 96, "layout is frozen");
_Static_assert(sizeof(mxp_simple_op_def) == 112, "layout is frozen");
#endif

#ifdef __cplusplus
}
#endif
#endif /* MXP_SIMPLE_OP_H */
