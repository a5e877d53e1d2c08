/* nn_dense.c — load / run / store of the float64 driver (nn_dense.h). */
#include "nn_dense.h"

static int nd_alloc(ndarr *a, int nd, const int64_t *shape) {
    a->nd = nd;
    a->n = 1;
    for (int i = 0; i < nd; i++) a->shape[i] = shape[i], a->n *= shape[i];
    a->v = nn_alloc((uint64_t)(a->n ? a->n : 1) * sizeof(double));
    if (!a->v) return NN_ERR(MXP_ENOMEM, "ops-nn: out of memory for %lld values", (long long)a->n);
    memset(a->v, 0, (size_t)(a->n ? a->n : 1) * sizeof(double));
    return MXP_OK;
}

static int nd_load(ndarr *a, const mxp_tensor *t, const char *op) {
    memset(a, 0, sizeof *a);
    if (!t || !t->data) return MXP_OK;
    if (t->dtype != MXP_DTYPE_F32 && t->dtype != MXP_DTYPE_F64)
        return NN_ERR(MXP_ETYPE, "%s: float32 or float64 arrays only, got dtype %d", op, (int)t->dtype);
    if (!mxp_tensor_is_contiguous(t)) return NN_ERR(MXP_EUNSUPPORTED, "%s: strided arrays are not supported", op);
    int rc = nd_alloc(a, t->ndim, t->shape);
    if (rc) return rc;
    const void *p = nn_ptr(t);
    for (int64_t i = 0; i < a->n; i++)
        a->v[i] = t->dtype == MXP_DTYPE_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
    return MXP_OK;
}

static int nd_store(const ndarr *a, const mxp_tensor *t, int32_t req, const char *op) {
    if (req == MXP_REQ_NULL || !t || !t->data) return MXP_OK;
    if (t->dtype != MXP_DTYPE_F32 && t->dtype != MXP_DTYPE_F64)
        return NN_ERR(MXP_ETYPE, "%s: float32 or float64 arrays only, got dtype %d", op, (int)t->dtype);
    if (!mxp_tensor_is_contiguous(t)) return NN_ERR(MXP_EUNSUPPORTED, "%s: strided arrays are not supported", op);
    NN_TYPED(t->dtype, T, T *p = nn_ptr(t);
        for (int64_t i = 0; i < a->n; i++) NN_STORE(req, p[i], (T)a->v[i]););
    return MXP_OK;
}

static void nd_free_io(nd_io *io) {
    for (int i = 0; i < ND_MAX_IO; i++) {
        nn_free(io->in[i].v);
        nn_free(io->out[i].v);
        nn_free(io->og[i].v);
        nn_free(io->ig[i].v);
    }
}

int nd_forward(const mxp_forward_args *a) {
    const nd_info *x = a->user_data;
    if (a->n_in > ND_MAX_IO || a->n_out > ND_MAX_IO) return NN_ERR(MXP_EINVAL, "%s: too many inputs", x->op);
    nd_io io;
    memset(&io, 0, sizeof io);
    io.params = a->params, io.ctx = a->ctx, io.n_in = a->n_in, io.n_out = a->n_out;
    int rc = MXP_OK;
    for (uint32_t i = 0; i < a->n_in && !rc; i++) rc = nd_load(&io.in[i], &a->in[i], x->op);
    for (uint32_t i = 0; i < a->n_out && !rc; i++) rc = nd_alloc(&io.out[i], a->out[i].ndim, a->out[i].shape);
    if (!rc) rc = x->fwd(&io);
    for (uint32_t i = 0; i < a->n_out && !rc; i++) rc = nd_store(&io.out[i], &a->out[i], a->req[i], x->op);
    nd_free_io(&io);
    return rc;
}

int nd_backward(const mxp_backward_args *a) {
    const nd_info *x = a->user_data;
    if (a->n_in > ND_MAX_IO || a->n_out > ND_MAX_IO) return NN_ERR(MXP_EINVAL, "%s: too many inputs", x->op);
    nd_io io;
    memset(&io, 0, sizeof io);
    io.params = a->params, io.ctx = a->ctx, io.n_in = a->n_in, io.n_out = a->n_out;
    int rc = MXP_OK;
    for (uint32_t i = 0; i < a->n_in && !rc; i++) rc = nd_load(&io.in[i], &a->in[i], x->op);
    for (uint32_t i = 0; i < a->n_out && !rc; i++) rc = nd_load(&io.out[i], &a->out[i], x->op);
    for (uint32_t i = 0; i < a->n_out && !rc; i++) rc = nd_load(&io.og[i], &a->out_grad[i], x->op);
    for (uint32_t i = 0; i < a->n_in && !rc; i++) rc = nd_alloc(&io.ig[i], a->in_grad[i].ndim, a->in_grad[i].shape);
    if (!rc && x->bwd) rc = x->bwd(&io);
    for (uint32_t i = 0; i < a->n_in && !rc; i++) rc = nd_store(&io.ig[i], &a->in_grad[i], a->req[i], x->op);
    nd_free_io(&io);
    return rc;
}
