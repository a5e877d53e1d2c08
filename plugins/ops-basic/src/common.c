/* common.c — shared machinery of the ops-basic pack: errors, dtype
 * conversion, strided views and iteration, copy/fill with req, and the
 * elementwise driver ob_ew (see common.h for the contract).
 * ob_ew's chunk path keeps its buffers on the stack (OB_CHUNK elements per
 * operand) so it needs no allocation and runs chunks in parallel through
 * ctx->parallel_for.  Contiguous all-bfloat16 operands (a mixed-precision
 * graph's adds and gradient sums) take the float32 kernel on chunks
 * widened with the vectorised casts and round each result once, instead
 * of the generic path's per-element conversions through double. */
#include "common.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

const mxp_host *ob_host;

int ob_err(int status, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ob_host && ob_host->set_error) return ob_host->set_error(status, "%s", msg);
    return status;
}

/* ------------------------------------------------------------ dtypes */
static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) bits = sign;
        else {  /* subnormal: normalise */
            int e = -1;
            do { e++; man <<= 1; } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
    else bits = sign | ((exp + 112) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* A double to IEEE half, rounded once to nearest even (a float32 in
 * between would round twice: a value just off a half midpoint can land on
 * it in float32 and then go to even the wrong way).  Works on the double's
 * bits: the 53-bit significand m (value m * 2^(e-52)) is shifted to half's
 * precision, 10 fraction bits for normal results (e >= -14) and units of
 * 2^-24 for subnormal ones; a rounding carry into the exponent is right,
 * up to infinity.  NaN keeps its sign and becomes half's quiet NaN. */
static uint16_t double_to_half(double v) {
    uint64_t x;
    memcpy(&x, &v, 8);
    uint16_t sign = (uint16_t)((x >> 48) & 0x8000);
    uint64_t mag = x & 0x7fffffffffffffffull;
    if (mag >= 0x7ff0000000000000ull) return sign | 0x7c00 | (mag > 0x7ff0000000000000ull ? 0x200 : 0);
    int e = (int)(mag >> 52) - 1023;
    if (e >= 16) return sign | 0x7c00;  /* >= 65536: beyond rounding range     */
    if (e < -25) return sign;           /* < 2^-25: below half the least half */
    uint64_t m = (mag & 0xfffffffffffffull) | (1ull << 52);
    int shift = e >= -14 ? 42 : 28 - e;
    uint64_t r = m >> shift, rem = m & ((1ull << shift) - 1), half = 1ull << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) r++;
    if (e >= -14) return sign | (uint16_t)(((uint32_t)(e + 15) << 10) + (uint32_t)(r - 0x400));
    return sign | (uint16_t)r;
}

static float bf16_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* A double to bfloat16, rounded once: (float)v rounds first, and when that
 * lands exactly on a bf16 midpoint the true value is on one side of it, so
 * the second rounding must go that way instead of to even. */
static uint16_t double_to_bf16(double v) {
    float f = (float)v;
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0xffffu) == 0x8000u && (x & 0x7f800000u) != 0x7f800000u && (double)f != v)
        return (uint16_t)((x >> 16) + (fabs(v) > fabs((double)f) ? 1u : 0u));
    return float_to_bf16(f);
}

double ob_load(const void *p, int32_t dtype) {
    switch (dtype) {
    case MXP_DTYPE_F32: return *(const float *)p;
    case MXP_DTYPE_F64: return *(const double *)p;
    case MXP_DTYPE_F16: return half_to_float(*(const uint16_t *)p);
    case MXP_DTYPE_U8: return *(const uint8_t *)p;
    case MXP_DTYPE_I32: return *(const int32_t *)p;
    case MXP_DTYPE_I8: return *(const int8_t *)p;
    case MXP_DTYPE_I64: return (double)*(const int64_t *)p;
    case MXP_DTYPE_BOOL: return *(const uint8_t *)p ? 1.0 : 0.0;
    case MXP_DTYPE_I16: return *(const int16_t *)p;
    case MXP_DTYPE_U16: return *(const uint16_t *)p;
    case MXP_DTYPE_U32: return *(const uint32_t *)p;
    case MXP_DTYPE_U64: return (double)*(const uint64_t *)p;
    case MXP_DTYPE_BF16: return bf16_to_float(*(const uint16_t *)p);
    default: return 0.0;
    }
}

/* Integer stores saturate instead of invoking undefined behaviour on
 * out-of-range values (NaN stores 0). */
#define SAT(TYPE, LO, HI) \
    do { TYPE r_ = (v != v) ? 0 : v <= (double)(LO) ? (LO) : v >= (double)(HI) ? (HI) : (TYPE)v; \
         *(TYPE *)p = r_; } while (0)

void ob_store(void *p, int32_t dtype, double v) {
    switch (dtype) {
    case MXP_DTYPE_F32: *(float *)p = (float)v; break;
    case MXP_DTYPE_F64: *(double *)p = v; break;
    case MXP_DTYPE_F16: *(uint16_t *)p = double_to_half(v); break;
    case MXP_DTYPE_U8: SAT(uint8_t, 0, UINT8_MAX); break;
    case MXP_DTYPE_I32: SAT(int32_t, INT32_MIN, INT32_MAX); break;
    case MXP_DTYPE_I8: SAT(int8_t, INT8_MIN, INT8_MAX); break;
    case MXP_DTYPE_I64: SAT(int64_t, INT64_MIN, INT64_MAX); break;
    case MXP_DTYPE_BOOL: *(uint8_t *)p = v != 0.0; break;
    case MXP_DTYPE_I16: SAT(int16_t, INT16_MIN, INT16_MAX); break;
    case MXP_DTYPE_U16: SAT(uint16_t, 0, UINT16_MAX); break;
    case MXP_DTYPE_U32: SAT(uint32_t, 0, UINT32_MAX); break;
    case MXP_DTYPE_U64: SAT(uint64_t, 0, UINT64_MAX); break;
    case MXP_DTYPE_BF16: *(uint16_t *)p = double_to_bf16(v); break;
    default: break;
    }
}

/* ------------------------------------------------------------- views */
void ob_rowmajor(int nd, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i];
    }
}

int64_t ob_numel(int nd, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    return n;
}

void ob_view_of(ob_view *v, const mxp_tensor *t) {
    v->t = *t;
    for (int i = 0; i < t->ndim; i++) v->shape[i] = t->shape[i];
    if (t->strides)
        for (int i = 0; i < t->ndim; i++) v->strides[i] = t->strides[i];
    else
        ob_rowmajor(t->ndim, v->shape, v->strides);
    ob_view_fix(v);
}

void ob_it_init(ob_it *it, const mxp_tensor *t, int64_t start) {
    it->nd = t->ndim;
    if (t->strides)
        for (int i = 0; i < t->ndim; i++) it->st[i] = t->strides[i];
    else
        ob_rowmajor(t->ndim, t->shape, it->st);
    it->off = 0;
    for (int i = t->ndim - 1; i >= 0; i--) {
        it->shape[i] = t->shape[i];
        it->idx[i] = t->shape[i] ? start % t->shape[i] : 0;
        start = t->shape[i] ? start / t->shape[i] : 0;
        it->off += it->idx[i] * it->st[i];
    }
}

const char *ob_shape_str(const mxp_shape *s, char *buf, size_t n) {
    size_t k = 0;
    if (s->ndim < 0) { snprintf(buf, n, "(unknown)"); return buf; }
    k += (size_t)snprintf(buf + k, n - k, "(");
    for (int i = 0; i < s->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ",%lld" : "%lld", (long long)s->dims[i]);
    if (k < n) snprintf(buf + k, n - k, ")");
    return buf;
}

int ob_copy(const mxp_tensor *src, const mxp_tensor *dst, int req) {
    if (req == MXP_REQ_NULL) return MXP_OK;
    int64_t n = mxp_tensor_numel(src);
    if (n != mxp_tensor_numel(dst))
        return ob_err(MXP_ESHAPE, "ops-basic copy: %lld elements into %lld",
                      (long long)n, (long long)mxp_tensor_numel(dst));
    if (n == 0) return MXP_OK;
    uint32_t es = mxp_dtype_size(src->dtype);
    if (src->dtype == dst->dtype && req != MXP_REQ_ADD && mxp_tensor_is_contiguous(src) &&
        mxp_tensor_is_contiguous(dst)) {
        if (ob_base(src) != ob_base(dst)) memmove(ob_base(dst), ob_base(src), (size_t)n * es);
        return MXP_OK;
    }
    if (req != MXP_REQ_ADD && mxp_tensor_is_contiguous(src) && mxp_tensor_is_contiguous(dst) &&
        ob_base(src) != ob_base(dst)) { /* the mixed-precision casts: vectorised */
        if (src->dtype == MXP_DTYPE_F32 && dst->dtype == MXP_DTYPE_BF16) {
            ob_f32_to_bf16_n(ob_base(src), ob_base(dst), n);
            return MXP_OK;
        }
        if (src->dtype == MXP_DTYPE_BF16 && dst->dtype == MXP_DTYPE_F32) {
            ob_bf16_to_f32_n(ob_base(src), ob_base(dst), n);
            return MXP_OK;
        }
    }
    ob_it a, b;
    ob_it_init(&a, src, 0);
    ob_it_init(&b, dst, 0);
    char *sb = ob_base(src), *db = ob_base(dst);
    uint32_t ds = mxp_dtype_size(dst->dtype);
    if (src->dtype == dst->dtype && req != MXP_REQ_ADD) {
        for (int64_t i = 0; i < n; i++) {
            memcpy(db + b.off * ds, sb + a.off * es, es);
            ob_it_next(&a);
            ob_it_next(&b);
        }
        return MXP_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        ob_store_req(db + b.off * ds, dst->dtype, ob_load(sb + a.off * es, src->dtype), req);
        ob_it_next(&a);
        ob_it_next(&b);
    }
    return MXP_OK;
}

int ob_fill(const mxp_tensor *dst, double v, int req) {
    if (req == MXP_REQ_NULL) return MXP_OK;
    int64_t n = mxp_tensor_numel(dst);
    char *db = ob_base(dst);
    if (req != MXP_REQ_ADD && mxp_tensor_is_contiguous(dst)) {
        if (dst->dtype == MXP_DTYPE_F32) {
            float *p = (float *)db;
            for (int64_t i = 0; i < n; i++) p[i] = (float)v;
            return MXP_OK;
        }
        if (dst->dtype == MXP_DTYPE_F64) {
            double *p = (double *)db;
            for (int64_t i = 0; i < n; i++) p[i] = v;
            return MXP_OK;
        }
    }
    uint32_t ds = mxp_dtype_size(dst->dtype);
    ob_it it;
    ob_it_init(&it, dst, 0);
    for (int64_t i = 0; i < n; i++) {
        ob_store_req(db + it.off * ds, dst->dtype, v, req);
        ob_it_next(&it);
    }
    return MXP_OK;
}

/* ------------------------------------------------------- elementwise */
#define OB_CHUNK 1024
#define OB_PAR_GRAIN 32768 /* elements per parallel task on the dense path */

typedef struct ew_job {
    int n_in, req, kdt, dense;
    const mxp_tensor *const *in;
    const mxp_tensor *out;
    const ob_kernel *k;
    const ob_env *e;
} ew_job;

/* Dense path: [begin, end) of the flat arrays. */
static void ew_dense(void *arg, int64_t begin, int64_t end) {
    const ew_job *j = arg;
    int64_t n = end - begin;
    if (j->kdt == MXP_DTYPE_F32) {
        const float *p[OB_MAX_EW_IN] = {0};
        for (int i = 0; i < j->n_in; i++) p[i] = (const float *)ob_base(j->in[i]) + begin;
        j->k->f32(n, p, (float *)ob_base(j->out) + begin, j->req, j->e);
    } else {
        const double *p[OB_MAX_EW_IN] = {0};
        for (int i = 0; i < j->n_in; i++) p[i] = (const double *)ob_base(j->in[i]) + begin;
        j->k->f64(n, p, (double *)ob_base(j->out) + begin, j->req, j->e);
    }
}

static void gather(const mxp_tensor *t, int64_t start, int64_t m, void *buf, int kdt) {
    ob_it it;
    ob_it_init(&it, t, start);
    const char *b = ob_base(t);
    uint32_t es = mxp_dtype_size(t->dtype);
    if (t->dtype == kdt && kdt == MXP_DTYPE_F32) {
        float *o = buf;
        for (int64_t i = 0; i < m; i++, ob_it_next(&it)) o[i] = *(const float *)(b + it.off * 4);
    } else if (t->dtype == kdt) {
        double *o = buf;
        for (int64_t i = 0; i < m; i++, ob_it_next(&it)) o[i] = *(const double *)(b + it.off * 8);
    } else {
        double *o = buf;
        for (int64_t i = 0; i < m; i++, ob_it_next(&it)) o[i] = ob_load(b + it.off * es, t->dtype);
    }
}

static void scatter(const mxp_tensor *t, int64_t start, int64_t m, const void *buf, int kdt,
                    int req) {
    ob_it it;
    ob_it_init(&it, t, start);
    char *b = ob_base(t);
    uint32_t es = mxp_dtype_size(t->dtype);
    for (int64_t i = 0; i < m; i++, ob_it_next(&it)) {
        double v = kdt == MXP_DTYPE_F32 ? ((const float *)buf)[i] : ((const double *)buf)[i];
        ob_store_req(b + it.off * es, t->dtype, v, req);
    }
}

/* bf16 path: every operand contiguous bf16; chunks widened to float32,
 * the float32 kernel, each result rounded once (req add: the output's
 * chunk is widened and the kernel adds).  The output may alias an input
 * exactly: a chunk's inputs are widened before its output is written. */
static void ew_bf16_chunks(void *arg, int64_t begin, int64_t end) {
    const ew_job *j = arg;
    int64_t total = mxp_tensor_numel(j->out);
    float bufs[OB_MAX_EW_IN][OB_CHUNK], obuf[OB_CHUNK];
    for (int64_t c = begin; c < end; c++) {
        int64_t s = c * OB_CHUNK, m = total - s < OB_CHUNK ? total - s : OB_CHUNK;
        const float *p[OB_MAX_EW_IN] = {0};
        for (int i = 0; i < j->n_in; i++) {
            ob_bf16_to_f32_n(ob_base(j->in[i]) + s * 2, bufs[i], m);
            p[i] = bufs[i];
        }
        uint16_t *o = (uint16_t *)(void *)ob_base(j->out) + s;
        if (j->req == MXP_REQ_ADD) ob_bf16_to_f32_n(o, obuf, m);
        j->k->f32(m, p, obuf, j->req == MXP_REQ_ADD ? MXP_REQ_ADD : MXP_REQ_WRITE, j->e);
        ob_f32_to_bf16_n(obuf, o, m);
    }
}

/* Chunk path: chunks [begin, end) of OB_CHUNK elements each. */
static void ew_chunks(void *arg, int64_t begin, int64_t end) {
    const ew_job *j = arg;
    int64_t total = mxp_tensor_numel(j->out);
    double bufs[OB_MAX_EW_IN][OB_CHUNK];
    double obuf[OB_CHUNK];
    int out_direct = j->out->dtype == j->kdt && mxp_tensor_is_contiguous(j->out);
    for (int64_t c = begin; c < end; c++) {
        int64_t s = c * OB_CHUNK, m = total - s < OB_CHUNK ? total - s : OB_CHUNK;
        const void *p[OB_MAX_EW_IN] = {0};
        for (int i = 0; i < j->n_in; i++) {
            const mxp_tensor *t = j->in[i];
            if (t->dtype == j->kdt && mxp_tensor_is_contiguous(t)) {
                p[i] = ob_base(t) + s * (int64_t)mxp_dtype_size(t->dtype);
            } else {
                gather(t, s, m, bufs[i], j->kdt);
                p[i] = bufs[i];
            }
        }
        void *o = out_direct ? (void *)(ob_base(j->out) + s * (int64_t)mxp_dtype_size(j->kdt))
                             : (void *)obuf;
        int kreq = out_direct ? j->req : MXP_REQ_WRITE;
        if (j->kdt == MXP_DTYPE_F32)
            j->k->f32(m, (const float *const *)p, o, kreq, j->e);
        else
            j->k->f64(m, (const double *const *)p, o, kreq, j->e);
        if (!out_direct) scatter(j->out, s, m, obuf, j->kdt, j->req);
    }
}

int ob_ew(const mxp_op_ctx *ctx, int n_in, const mxp_tensor *const *in,
          const mxp_tensor *out, int req, const ob_kernel *k, const ob_env *e) {
    if (req == MXP_REQ_NULL) return MXP_OK;
    if (n_in < 0 || n_in > OB_MAX_EW_IN)
        return ob_err(MXP_EINTERNAL, "ops-basic: %d elementwise inputs", n_in);
    for (int i = 0; i < n_in; i++) {
        if (in[i]->ndim != out->ndim)
            return ob_err(MXP_ESHAPE, "ops-basic: elementwise input %d has rank %d, output %d",
                          i, in[i]->ndim, out->ndim);
        for (int d = 0; d < out->ndim; d++)
            if (in[i]->shape[d] != out->shape[d])
                return ob_err(MXP_ESHAPE, "ops-basic: elementwise input %d dim %d is %lld, output %lld",
                              i, d, (long long)in[i]->shape[d], (long long)out->shape[d]);
        if (!mxp_dtype_size(in[i]->dtype))
            return ob_err(MXP_ETYPE, "ops-basic: input %d has unknown dtype %d", i, in[i]->dtype);
    }
    if (!mxp_dtype_size(out->dtype))
        return ob_err(MXP_ETYPE, "ops-basic: output has unknown dtype %d", out->dtype);
    int64_t n = mxp_tensor_numel(out);
    if (n == 0) return MXP_OK;
    ew_job j = {n_in, req, MXP_DTYPE_F64, 1, in, out, k, e};
    int all_f32 = out->dtype == MXP_DTYPE_F32;
    for (int i = 0; i < n_in; i++) all_f32 &= in[i]->dtype == MXP_DTYPE_F32;
    if (all_f32) j.kdt = MXP_DTYPE_F32;
    j.dense = out->dtype == j.kdt && mxp_tensor_is_contiguous(out);
    for (int i = 0; i < n_in; i++)
        j.dense &= in[i]->dtype == j.kdt && mxp_tensor_is_contiguous(in[i]);
    int par = ctx && ctx->parallel_for;
    int all_bf16 = out->dtype == MXP_DTYPE_BF16 && mxp_tensor_is_contiguous(out);
    for (int i = 0; i < n_in; i++) all_bf16 &= in[i]->dtype == MXP_DTYPE_BF16 && mxp_tensor_is_contiguous(in[i]);
    if (all_bf16) {
        int64_t nchunks = (n + OB_CHUNK - 1) / OB_CHUNK;
        j.kdt = MXP_DTYPE_F32;
        if (par && nchunks >= 16) return ctx->parallel_for(ctx, nchunks, 8, ew_bf16_chunks, &j);
        ew_bf16_chunks(&j, 0, nchunks);
        return MXP_OK;
    }
    if (j.dense) {
        if (par && n >= 2 * OB_PAR_GRAIN) return ctx->parallel_for(ctx, n, OB_PAR_GRAIN, ew_dense, &j);
        ew_dense(&j, 0, n);
        return MXP_OK;
    }
    int64_t nchunks = (n + OB_CHUNK - 1) / OB_CHUNK;
    if (par && nchunks >= 16) return ctx->parallel_for(ctx, nchunks, 8, ew_chunks, &j);
    ew_chunks(&j, 0, nchunks);
    return MXP_OK;
}

int ob_add_op(mxp_registrar *r, const mxp_op_def *def, const mxp_op_impl *impl) {
    int rc = r->add_op(r, def);
    if (rc == MXP_OK && impl) rc = r->add_impl(r, impl);
    return rc;
}
