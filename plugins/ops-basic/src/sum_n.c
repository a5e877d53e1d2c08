/* sum_n.c — ElementWiseSum / add_n (num_args): out = arg0 + ... + argN-1,
 * all of one shape.  Summed four inputs per pass with the elementwise
 * driver (later passes accumulate into the output in place); the gradient
 * of every input is out_grad. */
#include <stdio.h>

#include "common.h"

typedef struct sum_n_param {
    int64_t num_args;
} sum_n_param;

OB_KERNEL(k_sum1, A[i])
OB_KERNEL(k_sum2, A[i] + B[i])
OB_KERNEL(k_sum3, A[i] + B[i] + C[i])
OB_KERNEL(k_sum4, A[i] + B[i] + C[i] + D[i])
static const ob_kernel *const sums[] = {NULL, &k_sum1, &k_sum2, &k_sum3, &k_sum4};

static int list_args_n(mxp_list_names_args *a) {
    const sum_n_param *p = a->params;
    if (p->num_args > a->capacity) return ob_err(MXP_EINVAL, "num_args %lld too large", (long long)p->num_args);
    for (int64_t i = 0; i < p->num_args; i++) snprintf(a->names[i], MXP_NAME_MAX, "arg%lld", (long long)i);
    a->count = (uint32_t)p->num_args;
    return MXP_OK;
}

static int sum_n_shape(mxp_infer_shape_args *a) {
    const sum_n_param *p = a->params;
    if ((int64_t)a->n_in != p->num_args)
        return ob_err(MXP_EINVAL, "ElementWiseSum: %u inputs, num_args %lld", a->n_in, (long long)p->num_args);
    const mxp_shape *known = NULL;
    for (uint32_t i = 0; i < a->n_in; i++) if (ob_shape_known(&a->in[i])) { known = &a->in[i]; break; }
    if (!known && ob_shape_known(&a->out[0])) known = &a->out[0];
    if (!known) return MXP_EINCOMPLETE;
    mxp_shape s = *known;
    char b1[96], b2[96];
    for (uint32_t i = 0; i < a->n_in; i++) {
        if (!ob_shape_known(&a->in[i])) { a->in[i] = s; continue; }
        if (a->in[i].ndim != s.ndim || memcmp(a->in[i].dims, s.dims, sizeof(int64_t) * (size_t)s.ndim))
            return ob_err(MXP_ESHAPE, "ElementWiseSum: input %u is %s, expected %s", i,
                          ob_shape_str(&a->in[i], b1, 96), ob_shape_str(&s, b2, 96));
    }
    a->out[0] = s;
    return MXP_OK;
}

static int sum_n_fwd(const mxp_forward_args *a) {
    const mxp_tensor *y = &a->out[0];
    ob_env e = {0};
    uint32_t n = a->n_in, done = 0;
    int req = a->req[0];
    if (req == MXP_REQ_NULL) return MXP_OK;
    const mxp_tensor *in[OB_MAX_EW_IN] = {0};
    if (n == 0) return ob_fill(y, 0.0, req);
    /* An input that is the output's own memory (inplace) must be read in
     * the first pass, before the output is written. */
    uint32_t take = n < 4 ? n : 4;
    for (uint32_t i = 0; i < take; i++) in[i] = &a->in[i];
    int rc = ob_ew(a->ctx, (int)take, in, y, req, sums[take], &e);
    done = take;
    while (!rc && done < n) {
        uint32_t k = n - done < 3 ? n - done : 3;
        in[0] = y;
        for (uint32_t i = 0; i < k; i++) in[1 + i] = &a->in[done + i];
        rc = ob_ew(a->ctx, (int)k + 1, in, y, MXP_REQ_WRITE, sums[k + 1], &e);
        done += k;
    }
    return rc;
}

static int sum_n_bwd(const mxp_backward_args *a) {
    /* in_grad[0] may share out_grad's memory: write it last. */
    for (uint32_t i = a->n_in; i-- > 0;) {
        int rc = ob_copy(&a->out_grad[0], &a->in_grad[i], a->req[i]);
        if (rc) return rc;
    }
    return MXP_OK;
}

static const mxp_param_def sum_n_params[] = {
    MXP_PARAM("num_args", MXP_PARAM_INT, MXP_PARAM_REQUIRED | MXP_PARAM_HAS_MIN, sum_n_param,
              num_args, NULL, 1, 0, NULL, "Number of inputs"),
};
static const char *const al_sum_n[] = {"add_n", NULL};
static const mxp_inplace_pair ip00[] = {{0, 0}};

static const mxp_op_def sum_n_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "ElementWiseSum", .aliases = al_sum_n,
    .doc = "Sum of num_args arrays of one shape.", .params = sum_n_params, .n_params = 1,
    .params_size = sizeof(sum_n_param), .list_args = list_args_n, .infer_shape = sum_n_shape,
    .backward_deps = MXP_BWD_OUT_GRAD, .flags = MXP_OP_IDENTITY_GRAD, .forward_inplace = ip00, .n_forward_inplace = 1,
    .backward_inplace = ip00, .n_backward_inplace = 1,
};
static const mxp_op_impl sum_n_impl = OB_IMPL("ElementWiseSum", sum_n_fwd, sum_n_bwd);

int ob_reg_sum_n(mxp_registrar *r) { return ob_add_op(r, &sum_n_def, &sum_n_impl); }
