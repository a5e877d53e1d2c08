/* xop.c — the float64 whole-array driver of xop.h: load, run, store. */
#include "xop.h"

static void xarr_free(xarr *a) {
    if (a->v && ob_host && ob_host->free_host) ob_host->free_host(a->v);
    a->v = NULL;
}

static int xarr_alloc(xarr *a, int nd, const int64_t *shape) {
    a->nd = nd;
    for (int i = 0; i < nd; i++) a->shape[i] = shape[i];
    a->n = ob_numel(nd, shape);
    a->v = ob_host->alloc_host((uint64_t)(a->n ? a->n : 1) * sizeof(double));
    if (!a->v) return ob_err(MXP_ENOMEM, "ops-basic: out of memory for %lld values", (long long)a->n);
    memset(a->v, 0, (size_t)(a->n ? a->n : 1) * sizeof(double));
    return MXP_OK;
}

static mxp_tensor dense_of(const xarr *a) {
    mxp_tensor t;
    memset(&t, 0, sizeof t);
    t.hdr = (mxp_header)MXP_HEADER(mxp_tensor);
    t.data = a->v;
    t.dtype = MXP_DTYPE_F64;
    t.ndim = a->nd;
    t.shape = a->shape;
    return t;
}

static int xarr_load(xarr *a, const mxp_tensor *t) {
    memset(a, 0, sizeof *a);
    if (!t || !t->data) return MXP_OK;
    int rc = xarr_alloc(a, t->ndim, t->shape);
    if (rc) return rc;
    mxp_tensor d = dense_of(a);
    return ob_copy(t, &d, MXP_REQ_WRITE);
}

static int xarr_store(const xarr *a, const mxp_tensor *t, int req) {
    if (req == MXP_REQ_NULL || !t || !t->data) return MXP_OK;
    mxp_tensor d = dense_of(a);
    return ob_copy(&d, t, req);
}

void xarr_strides(const xarr *a, int64_t *st) { ob_rowmajor(a->nd, a->shape, st); }

static void io_free(xop_io *io) {
    for (int i = 0; i < XOP_MAX_IO; i++) {
        xarr_free(&io->in[i]);
        xarr_free(&io->out[i]);
        xarr_free(&io->og[i]);
        xarr_free(&io->ig[i]);
    }
}

int xop_forward(const mxp_forward_args *a) {
    const xop_info *x = a->user_data;
    if (a->n_in > XOP_MAX_IO || a->n_out > XOP_MAX_IO) return ob_err(MXP_EINVAL, "ops-basic: too many inputs");
    xop_io io;
    memset(&io, 0, sizeof io);
    io.params = a->params;
    io.ctx = a->ctx;
    io.n_in = a->n_in;
    io.n_out = a->n_out;
    int rc = MXP_OK;
    for (uint32_t i = 0; i < a->n_in && !rc; i++) rc = xarr_load(&io.in[i], &a->in[i]);
    for (uint32_t i = 0; i < a->n_out && !rc; i++) rc = xarr_alloc(&io.out[i], a->out[i].ndim, a->out[i].shape);
    if (!rc) rc = x->fwd(&io);
    for (uint32_t i = 0; i < a->n_out && !rc; i++) rc = xarr_store(&io.out[i], &a->out[i], a->req[i]);
    io_free(&io);
    return rc;
}

int xop_backward(const mxp_backward_args *a) {
    const xop_info *x = a->user_data;
    if (a->n_in > XOP_MAX_IO || a->n_out > XOP_MAX_IO) return ob_err(MXP_EINVAL, "ops-basic: too many inputs");
    xop_io io;
    memset(&io, 0, sizeof io);
    io.params = a->params;
    io.ctx = a->ctx;
    io.n_in = a->n_in;
    io.n_out = a->n_out;
    int rc = MXP_OK;
    for (uint32_t i = 0; i < a->n_in && !rc; i++) rc = xarr_load(&io.in[i], &a->in[i]);
    for (uint32_t i = 0; i < a->n_out && !rc; i++) rc = xarr_load(&io.out[i], &a->out[i]);
    for (uint32_t i = 0; i < a->n_out && !rc; i++) rc = xarr_load(&io.og[i], &a->out_grad[i]);
    for (uint32_t i = 0; i < a->n_in && !rc; i++) rc = xarr_alloc(&io.ig[i], a->in_grad[i].ndim, a->in_grad[i].shape);
    if (!rc && x->bwd) rc = x->bwd(&io);
    for (uint32_t i = 0; i < a->n_in && !rc; i++) rc = xarr_store(&io.ig[i], &a->in_grad[i], a->req[i]);
    io_free(&io);
    return rc;
}
