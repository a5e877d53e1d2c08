/* ndarray_ops.c — work on NDArray data, all through the engine: fill,
 * copy (with the per-device-type copy registry), synchronous copies to and
 * from host memory, and waits.
 *
 * Every pushed op captures plain values (device pointers, byte counts, copy
 * function) — never the mxp_ndarray handle, which the caller may free
 * before the op runs.  Chunk memory stays valid because the chunk's free is
 * itself an op on the same var, pushed later.
 *
 * Devices whose memory the host cannot touch are written through the copy
 * registry: fill builds the pattern in host memory and copies it over. */
#include "ndarray_impl.h"
#include "profiler/profiler.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ registry */

#define MAX_COPY_FNS 64

typedef struct copy_entry {
    int32_t src_type, dst_type;
    mxp_ndarray_copy_fn fn;
    void *ctx;
} copy_entry;

static pthread_mutex_t copy_mu = PTHREAD_MUTEX_INITIALIZER;
static copy_entry copy_fns[MAX_COPY_FNS];
static int n_copy_fns;

static int host_copy(void *ctx, void *dst, mxp_device dst_dev, const void *src, mxp_device src_dev,
                     size_t bytes, const mxp_run_ctx *rctx) {
    (void)ctx; (void)dst_dev; (void)src_dev; (void)rctx;
    if (bytes) memmove(dst, src, bytes); /* views of one chunk may overlap */
    return MXP_OK;
}

int mxp__ndarray_register_copy(int32_t src_type, int32_t dst_type, mxp_ndarray_copy_fn fn, void *ctx) {
    if (src_type <= 0 || dst_type <= 0) return mxp__error(MXP_EINVAL, "copy registry: bad device type");
    pthread_mutex_lock(&copy_mu);
    int i = 0;
    while (i < n_copy_fns && !(copy_fns[i].src_type == src_type && copy_fns[i].dst_type == dst_type)) i++;
    if (!fn) {
        if (i < n_copy_fns) copy_fns[i] = copy_fns[--n_copy_fns];
        pthread_mutex_unlock(&copy_mu);
        return MXP_OK;
    }
    if (i == n_copy_fns) {
        if (n_copy_fns == MAX_COPY_FNS) {
            pthread_mutex_unlock(&copy_mu);
            return mxp__error(MXP_ENOMEM, "copy registry full (%d entries)", MAX_COPY_FNS);
        }
        n_copy_fns++;
    }
    copy_fns[i] = (copy_entry){src_type, dst_type, fn, ctx};
    pthread_mutex_unlock(&copy_mu);
    return MXP_OK;
}

int mxp__ndarray_find_copy(mxp_device src, mxp_device dst, mxp_ndarray_copy_fn *out_fn, void **out_ctx) {
    *out_fn = NULL;
    *out_ctx = NULL;
    pthread_mutex_lock(&copy_mu);
    for (int i = 0; i < n_copy_fns; i++) {
        if (copy_fns[i].src_type == src.type && copy_fns[i].dst_type == dst.type) {
            *out_fn = copy_fns[i].fn;
            *out_ctx = copy_fns[i].ctx;
            pthread_mutex_unlock(&copy_mu);
            return MXP_OK;
        }
    }
    pthread_mutex_unlock(&copy_mu);
    const mxp_storage_backend *sb = mxp__storage_backend(src.type), *db = mxp__storage_backend(dst.type);
    if (sb && db && sb->host_accessible && db->host_accessible) {
        *out_fn = host_copy;
        return MXP_OK;
    }
    return mxp__error(MXP_EUNSUPPORTED, "ndarray: no copy path from %s(%d) to %s(%d) (device pack not loaded?)",
                      sb ? sb->name : "?", (int)src.id, db ? db->name : "?", (int)dst.id);
}

static int is_host(mxp_device d) {
    const mxp_storage_backend *be = mxp__storage_backend(d.type);
    return be && be->host_accessible;
}

/* Lane and device for a copy between two devices. */
static void copy_lane(mxp_device src, mxp_device dst, mxp_engine_push_args *a) {
    if (!is_host(dst)) { a->prop = MXP_FN_COPY_TO_DEV; a->device = dst; }
    else if (!is_host(src)) { a->prop = MXP_FN_COPY_FROM_DEV; a->device = src; }
    else { a->prop = MXP_FN_NORMAL; a->device = dst; }
}

/* ------------------------------------------------------------ dtype encode */

uint16_t mxp__f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int exp = (int)((x >> 23) & 0xff);
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
    int e = exp - 127 + 15;
    if (e >= 0x1f) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal half */
        if (e < -10) return (uint16_t)sign;
        mant |= 0x800000u;
        int shift = 14 - e;
        uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++; /* carry into exp is correct */
    return (uint16_t)(sign | h);
}

uint16_t mxp__f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* Encode value as one element of dtype into out (esize bytes). */
static void encode(int dtype, double v, unsigned char *out) {
    union { float f; double d; int8_t i8; uint8_t u8; int16_t i16; uint16_t u16; int32_t i32;
            uint32_t u32; int64_t i64; uint64_t u64; } u;
    memset(&u, 0, sizeof u);
    switch (dtype) {
    case MXP_DTYPE_F32: u.f = (float)v; break;
    case MXP_DTYPE_F64: u.d = v; break;
    case MXP_DTYPE_F16: u.u16 = mxp__f32_to_f16((float)v); break;
    case MXP_DTYPE_BF16: u.u16 = mxp__f32_to_bf16((float)v); break;
    case MXP_DTYPE_U8: u.u8 = (uint8_t)(int64_t)v; break;
    case MXP_DTYPE_I8: u.i8 = (int8_t)(int64_t)v; break;
    case MXP_DTYPE_BOOL: u.u8 = v != 0.0; break;
    case MXP_DTYPE_I16: u.i16 = (int16_t)(int64_t)v; break;
    case MXP_DTYPE_U16: u.u16 = (uint16_t)(int64_t)v; break;
    case MXP_DTYPE_I32: u.i32 = (int32_t)(int64_t)v; break;
    case MXP_DTYPE_U32: u.u32 = (uint32_t)(int64_t)v; break;
    case MXP_DTYPE_I64: u.i64 = (int64_t)v; break;
    case MXP_DTYPE_U64: u.u64 = v >= 0 ? (uint64_t)v : (uint64_t)(int64_t)v; break;
    default: break;
    }
    memcpy(out, &u, mxp_dtype_size(dtype));
}

/* ------------------------------------------------------------ fill */

typedef struct fill_arg {
    void *dptr;
    mxp_device dev;
    size_t n, esize;
    unsigned char pattern[8];
    mxp_ndarray_copy_fn to_dev; /* NULL when the host writes directly */
    void *to_dev_ctx;
} fill_arg;

static int fill_fn(void *arg, const mxp_run_ctx *rctx) {
    fill_arg *f = arg;
    size_t bytes = f->n * f->esize;
    if (!bytes) return MXP_OK;
    unsigned char *dst = f->to_dev ? malloc(bytes) : f->dptr;
    if (!dst) return mxp__error_oom("fill staging buffer");
    int zero = 1;
    for (size_t k = 0; k < f->esize; k++) zero &= f->pattern[k] == 0;
    if (zero) {
        memset(dst, 0, bytes);
    } else {
        memcpy(dst, f->pattern, f->esize);
        size_t have = f->esize; /* doubling copy: O(log n) memcpy calls */
        while (have < bytes) {
            size_t n = have < bytes - have ? have : bytes - have;
            memcpy(dst + have, dst, n);
            have += n;
        }
    }
    int rc = MXP_OK;
    if (f->to_dev) {
        rc = f->to_dev(f->to_dev_ctx, f->dptr, f->dev, dst, (mxp_device){MXP_DEV_CPU, 0}, bytes, rctx);
        free(dst);
    }
    return rc;
}

int mxp_ndarray_fill(mxp_ndarray *nd, double value) {
    if (!nd) return mxp__error(MXP_EMISUSE, "mxp_ndarray_fill: NULL array");
    if (!nd->chunk) return mxp__error(MXP_EINVAL, "fill: none array");
    fill_arg *f = calloc(1, sizeof *f);
    if (!f) return mxp__error_oom("fill");
    f->dptr = mxp__ndarray_dptr(nd);
    f->dev = nd->dev;
    f->n = (size_t)mxp_ndarray_size(nd);
    f->esize = mxp_dtype_size(nd->dtype);
    encode(nd->dtype, value, f->pattern);
    if (!nd->chunk->host_accessible) {
        int rc = mxp__ndarray_find_copy((mxp_device){MXP_DEV_CPU, 0}, nd->dev, &f->to_dev, &f->to_dev_ctx);
        if (rc) { free(f); return rc; }
    }
    mxp_var *var = nd->chunk->var;
    mxp_engine_push_args a = {0};
    a.sync_fn = fill_fn;
    a.arg = f;
    a.free_arg = free;
    a.mutate_vars = &var;
    a.n_mutate = 1;
    a.device = nd->dev;
    a.name = "ndarray_fill";
    int rc = mxp_engine_push(&a);
    if (rc) free(f);
    return rc;
}

/* ------------------------------------------------------------ copy */

typedef struct copy_arg {
    void *dst;
    const void *src;
    mxp_device dst_dev, src_dev;
    size_t bytes;
    mxp_ndarray_copy_fn fn;
    void *ctx;
} copy_arg;

static int copy_fn(void *arg, const mxp_run_ctx *rctx) {
    copy_arg *c = arg;
    if (!c->bytes) return MXP_OK;
    if (!mxp__prof_on(MXP__PROF_API)) return c->fn(c->ctx, c->dst, c->dst_dev, c->src, c->src_dev, c->bytes, rctx);
    int64_t t0 = mxp__prof_now();
    int rc = c->fn(c->ctx, c->dst, c->dst_dev, c->src, c->src_dev, c->bytes, rctx);
    mxp__prof_copy(c->bytes, c->src_dev.type, c->src_dev.id, c->dst_dev.type, c->dst_dev.id, t0, mxp__prof_now());
    return rc;
}

/* Push a copy op.  src_var NULL: source is host memory owned by the caller
 * (who waits).  dst_var NULL: destination likewise. */
static int push_copy(void *dst, mxp_device dst_dev, mxp_var *dst_var, const void *src, mxp_device src_dev,
                     mxp_var *src_var, size_t bytes, const char *name) {
    copy_arg *c = calloc(1, sizeof *c);
    if (!c) return mxp__error_oom("copy");
    *c = (copy_arg){dst, src, dst_dev, src_dev, bytes, NULL, NULL};
    int rc = mxp__ndarray_find_copy(src_dev, dst_dev, &c->fn, &c->ctx);
    if (rc) { free(c); return rc; }
    mxp_engine_push_args a = {0};
    a.sync_fn = copy_fn;
    a.arg = c;
    a.free_arg = free;
    /* Same var on both sides (views of one chunk): write dependency only. */
    int same = src_var && src_var == dst_var;
    a.const_vars = same ? NULL : (src_var ? &src_var : NULL);
    a.n_const = same ? 0 : (src_var != NULL);
    a.mutate_vars = &dst_var;
    a.n_mutate = 1;
    a.name = name;
    copy_lane(src_dev, dst_dev, &a);
    rc = mxp_engine_push(&a);
    if (rc) free(c);
    return rc;
}

int mxp_ndarray_copy(mxp_ndarray *src, mxp_ndarray *dst) {
    if (!src || !dst) return mxp__error(MXP_EMISUSE, "mxp_ndarray_copy: NULL array");
    if (!src->chunk || !dst->chunk) return mxp__error(MXP_EINVAL, "copy: none array");
    if (src->dtype != dst->dtype)
        return mxp__error(MXP_ETYPE, "copy: dtype %s to %s (cast first)", mxp_dtype_name(src->dtype),
                          mxp_dtype_name(dst->dtype));
    if (mxp_ndarray_size(src) != mxp_ndarray_size(dst))
        return mxp__error(MXP_ESHAPE, "copy: %lld elements into %lld", (long long)mxp_ndarray_size(src),
                          (long long)mxp_ndarray_size(dst));
    if (src->chunk == dst->chunk && src->offset == dst->offset) return MXP_OK;
    return push_copy(mxp__ndarray_dptr(dst), dst->dev, dst->chunk->var, mxp__ndarray_dptr(src), src->dev,
                     src->chunk->var, mxp_ndarray_nbytes(src), "ndarray_copy");
}

int mxp_ndarray_sync_copy_from(mxp_ndarray *nd, const void *buf, size_t bytes) {
    if (!nd || (!buf && bytes)) return mxp__error(MXP_EMISUSE, "mxp_ndarray_sync_copy_from: NULL argument");
    if (!nd->chunk) return mxp__error(MXP_EINVAL, "sync_copy_from: none array");
    if (bytes != mxp_ndarray_nbytes(nd))
        return mxp__error(MXP_EINVAL, "sync_copy_from: %zu bytes given, array holds %zu", bytes,
                          mxp_ndarray_nbytes(nd));
    int rc = push_copy(mxp__ndarray_dptr(nd), nd->dev, nd->chunk->var, buf, (mxp_device){MXP_DEV_CPU, 0}, NULL,
                       bytes, "ndarray_sync_copy_from");
    if (rc) return rc;
    return mxp_engine_wait_for_var(nd->chunk->var);
}

int mxp_ndarray_sync_copy_to(mxp_ndarray *nd, void *buf, size_t bytes) {
    if (!nd || (!buf && bytes)) return mxp__error(MXP_EMISUSE, "mxp_ndarray_sync_copy_to: NULL argument");
    if (!nd->chunk) return mxp__error(MXP_EINVAL, "sync_copy_to: none array");
    if (bytes != mxp_ndarray_nbytes(nd))
        return mxp__error(MXP_EINVAL, "sync_copy_to: buffer of %zu bytes, array holds %zu", bytes,
                          mxp_ndarray_nbytes(nd));
    /* A read of the chunk that writes a private var: waiting on that var
     * waits for this read alone, and an error on the chunk reaches it. */
    mxp_var *tmp = NULL;
    int rc = mxp_engine_new_var(&tmp);
    if (rc) return rc;
    copy_arg *c = calloc(1, sizeof *c);
    if (!c) { mxp_engine_delete_var(tmp); return mxp__error_oom("copy"); }
    *c = (copy_arg){buf, mxp__ndarray_dptr(nd), (mxp_device){MXP_DEV_CPU, 0}, nd->dev, bytes, NULL, NULL};
    rc = mxp__ndarray_find_copy(nd->dev, c->dst_dev, &c->fn, &c->ctx);
    if (rc == MXP_OK) {
        mxp_var *src_var = nd->chunk->var;
        mxp_engine_push_args a = {0};
        a.sync_fn = copy_fn;
        a.arg = c;
        a.free_arg = free;
        a.const_vars = &src_var;
        a.n_const = 1;
        a.mutate_vars = &tmp;
        a.n_mutate = 1;
        a.name = "ndarray_sync_copy_to";
        copy_lane(nd->dev, c->dst_dev, &a);
        rc = mxp_engine_push(&a);
        if (rc == MXP_OK) rc = mxp_engine_wait_for_var(tmp);
        else free(c);
    } else {
        free(c);
    }
    mxp_engine_delete_var(tmp);
    return rc;
}

int mxp_ndarray_wait_to_read(mxp_ndarray *nd) {
    if (!nd) return mxp__error(MXP_EMISUSE, "mxp_ndarray_wait_to_read: NULL array");
    if (!nd->chunk) return MXP_OK;
    return mxp_engine_wait_for_var(nd->chunk->var);
}

static int noop_fn(void *arg, const mxp_run_ctx *ctx) {
    (void)arg; (void)ctx;
    return MXP_OK;
}

int mxp_ndarray_wait_to_write(mxp_ndarray *nd) {
    if (!nd) return mxp__error(MXP_EMISUSE, "mxp_ndarray_wait_to_write: NULL array");
    if (!nd->chunk) return MXP_OK;
    /* As MXNet's WaitToWrite: a no-op write orders after every pending read
     * and write; waiting for it waits for them all.  (It counts as a write,
     * so the version moves; consumers treat versions as "maybe changed".) */
    mxp_var *var = nd->chunk->var;
    mxp_engine_push_args a = {0};
    a.sync_fn = noop_fn;
    a.mutate_vars = &var;
    a.n_mutate = 1;
    a.device = nd->dev;
    a.name = "ndarray_wait_to_write";
    int rc = mxp_engine_push(&a);
    if (rc) return rc;
    return mxp_engine_wait_for_var(var);
}
