/* bf16_via_f32.c — float32 callbacks on bfloat16 tensors (see
 * bf16_via_f32.h).  The widened copies live in one nn_alloc block per
 * call; bf16 tensors must be contiguous (checked, EUNSUPPORTED otherwise).
 * An output with req add is written by the callback into scratch and
 * then added in float32 and rounded once (nn_bf16_store). */
#include "bf16_via_f32.h"
#include "bf16/bf16.h"

#include <stdlib.h>

typedef struct widened {
    mxp_tensor *t;   /* copies of the caller's tensors, float32 where bf16 */
    int32_t *req;    /* the callback's req (write for bf16 outputs)        */
    float *buf;
} widened;

static uint64_t bf16_values(const mxp_tensor *t, uint32_t n) {
    uint64_t v = 0;
    for (uint32_t i = 0; i < n; i++)
        if (t[i].data && t[i].dtype == MXP_DTYPE_BF16) v += (uint64_t)mxp_tensor_numel(&t[i]);
    return v;
}

/* Copies n tensors into dst, each bf16 one pointing at scratch from
 * *buf (widened when `widen`). */
static void widen_set(const mxp_tensor *src, mxp_tensor *dst, uint32_t n, float **buf, int widen) {
    for (uint32_t i = 0; i < n; i++) {
        dst[i] = src[i];
        if (!src[i].data || src[i].dtype != MXP_DTYPE_BF16) continue;
        int64_t k = mxp_tensor_numel(&src[i]);
        if (widen) nn_bf16_widen(mxp_tensor_ptr(&src[i]), *buf, k);
        dst[i].data = *buf;
        dst[i].byte_offset = 0;
        dst[i].strides = NULL;
        dst[i].dtype = MXP_DTYPE_F32;
        dst[i].version = 0;
        *buf += k;
    }
}

/* Stores the float32 results of the bf16 outputs with the caller's req. */
static void narrow_back(const mxp_tensor *orig, const mxp_tensor *tmp, const int32_t *req, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (orig[i].data && orig[i].dtype == MXP_DTYPE_BF16 && req[i] != MXP_REQ_NULL)
            nn_bf16_store(req[i], tmp[i].data, mxp_tensor_ptr(&orig[i]), mxp_tensor_numel(&orig[i]));
}

static int check_contig(const char *what, const mxp_tensor *t, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (t[i].data && t[i].dtype == MXP_DTYPE_BF16 && !mxp_tensor_is_contiguous(&t[i]))
            return NN_ERR(MXP_EUNSUPPORTED, "bfloat16 %s %u is not contiguous", what, i);
    return MXP_OK;
}

int nn_bf16_via_f32_forward(const mxp_forward_args *a, int (*fn)(const mxp_forward_args *)) {
    int st;
    if ((st = check_contig("input", a->in, a->n_in)) < 0 || (st = check_contig("output", a->out, a->n_out)) < 0 ||
        (st = check_contig("aux state", a->aux, a->n_aux)) < 0)
        return st;
    uint32_t nt = a->n_in + a->n_out + a->n_aux;
    uint64_t vals = bf16_values(a->in, a->n_in) + bf16_values(a->out, a->n_out) + bf16_values(a->aux, a->n_aux);
    mxp_tensor *t = calloc((size_t)nt + 1, sizeof *t);
    int32_t *req = calloc((size_t)a->n_out + 1, sizeof *req);
    float *buf = nn_alloc((vals ? vals : 1) * sizeof(float)), *p = buf;
    if (!t || !req || !buf) {
        free(t); free(req); nn_free(buf);
        return NN_ERR(MXP_ENOMEM, "bfloat16 via float32: out of memory (%llu values)", (unsigned long long)vals);
    }
    widen_set(a->in, t, a->n_in, &p, 1);
    widen_set(a->aux, t + a->n_in + a->n_out, a->n_aux, &p, 1);
    widen_set(a->out, t + a->n_in, a->n_out, &p, 0);
    for (uint32_t i = 0; i < a->n_out; i++)
        req[i] = a->out[i].data && a->out[i].dtype == MXP_DTYPE_BF16 && a->req[i] != MXP_REQ_NULL ? MXP_REQ_WRITE : a->req[i];
    mxp_forward_args b = *a;
    b.in = t; b.out = t + a->n_in; b.aux = t + a->n_in + a->n_out; b.req = req;
    st = fn(&b);
    if (st >= 0) {
        narrow_back(a->out, b.out, a->req, a->n_out);
        for (uint32_t i = 0; i < a->n_aux; i++) /* aux states may be updated */
            if (a->aux[i].data && a->aux[i].dtype == MXP_DTYPE_BF16)
                nn_bf16_narrow(b.aux[i].data, mxp_tensor_ptr(&a->aux[i]), mxp_tensor_numel(&a->aux[i]));
    }
    free(t); free(req); nn_free(buf);
    return st;
}

int nn_bf16_via_f32_backward(const mxp_backward_args *a, int (*fn)(const mxp_backward_args *)) {
    int st;
    if ((st = check_contig("output gradient", a->out_grad, a->n_out)) < 0 || (st = check_contig("input", a->in, a->n_in)) < 0 ||
        (st = check_contig("output", a->out, a->n_out)) < 0 || (st = check_contig("input gradient", a->in_grad, a->n_in)) < 0 ||
        (st = check_contig("aux state", a->aux, a->n_aux)) < 0)
        return st;
    uint32_t nt = 3 * a->n_out + 2 * a->n_in + a->n_aux;
    uint64_t vals = bf16_values(a->out, a->n_out) + bf16_values(a->in, a->n_in) + bf16_values(a->in_grad, a->n_in) +
                    bf16_values(a->aux, a->n_aux) + bf16_values(a->out_grad, a->n_out);
    mxp_tensor *t = calloc((size_t)nt + 1, sizeof *t);
    int32_t *req = calloc((size_t)a->n_in + 1, sizeof *req);
    float *buf = nn_alloc((vals ? vals : 1) * sizeof(float)), *p = buf;
    if (!t || !req || !buf) {
        free(t); free(req); nn_free(buf);
        return NN_ERR(MXP_ENOMEM, "bfloat16 via float32: out of memory (%llu values)", (unsigned long long)vals);
    }
    mxp_tensor *og = t, *in = og + a->n_out, *out = in + a->n_in, *ig = out + a->n_out, *aux = ig + a->n_in;
    widen_set(a->out_grad, og, a->n_out, &p, 1);
    widen_set(a->in, in, a->n_in, &p, 1);
    widen_set(a->out, out, a->n_out, &p, 1);
    widen_set(a->aux, aux, a->n_aux, &p, 1);
    widen_set(a->in_grad, ig, a->n_in, &p, 0);
    for (uint32_t i = 0; i < a->n_in; i++)
        req[i] = a->in_grad[i].data && a->in_grad[i].dtype == MXP_DTYPE_BF16 && a->req[i] != MXP_REQ_NULL ? MXP_REQ_WRITE
                                                                                                           : a->req[i];
    mxp_backward_args b = *a;
    b.out_grad = og; b.in = in; b.out = out; b.in_grad = ig; b.aux = aux; b.req = req;
    st = fn(&b);
    if (st >= 0) narrow_back(a->in_grad, ig, a->req, a->n_in);
    free(t); free(req); nn_free(buf);
    return st;
}
