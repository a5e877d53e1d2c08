/* ndarray.c — NDArray handles: create, reference counting, accessors and
 * views (reshape, slice, at).  No data is touched here; work on data is in
 * ndarray_ops.c, files in params.c.
 *
 * Chunk states: allocated (create) -> released (last handle freed:
 * chunk_release pushes the free op, then deletes the var) -> freed (the op
 * ran; at once, on the releasing thread, when nothing was pending on a host
 * chunk's var).  Handles never outlive their chunk reference. */
#include "ndarray_impl.h"

#include "engine/engine.h"

#include <stdlib.h>
#include <string.h>

static int check_device(mxp_device dev, const mxp_storage_backend **out_be) {
    const mxp_storage_backend *be = mxp__storage_backend(dev.type);
    if (!be || dev.id < 0)
        return mxp__error(MXP_EINVAL, "ndarray: unknown device (type %d, id %d)", (int)dev.type, (int)dev.id);
    int rc = be->check ? be->check(be->ctx, dev.id) : MXP_OK;
    if (rc) return mxp__error_prefix(rc, "ndarray");
    *out_be = be;
    return MXP_OK;
}

/* Element count of a shape, or -1 on overflow past INT64_MAX. */
static int64_t shape_size(const int64_t *shape, int ndim) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] && n > INT64_MAX / shape[i]) return -1;
        n *= shape[i];
    }
    return n;
}

static int create_sized(const int64_t *shape, int ndim, int dtype, mxp_device dev, int host_accessible, size_t bytes,
                        mxp_ndarray **out);

static int free_chunk_fn(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    nd_chunk *c = arg;
    mxp__storage_free(&c->blk);
    return MXP_OK;
}

static void chunk_release(nd_chunk *c) {
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1) return;
    mxp_var *var = c->var; /* c may be freed by the push below (naive engine) */
    /* No handle is left, so nothing pushes on the var any more; if nothing
     * is pending on it either, no function can touch the memory: free both
     * here, without two engine round trips.  Host memory only (a device's
     * free may have to follow its stream). */
    if (c->dev.type == MXP_DEV_CPU && mxp__engine_var_free_if_idle(var)) {
        mxp__storage_free(&c->blk);
        free(c);
        return;
    }
    mxp_engine_push_args a = {0};
    a.sync_fn = free_chunk_fn;
    a.arg = c;
    a.free_arg = free;
    a.mutate_vars = &var;
    a.n_mutate = 1;
    a.device = c->dev;
    a.prop = MXP_FN_NO_SKIP; /* free even if the last write failed */
    a.name = "ndarray_free";
    /* Returning a block to its pool is tiny: when nothing is pending on the
     * var, this thread does it now instead of a worker (engine.h). */
    if (mxp__engine_push_here(&a) != MXP_OK) {
        /* Cannot order the free behind pending work: wait for it instead. */
        mxp_engine_wait_for_var(var);
        mxp__storage_free(&c->blk);
        free(c);
    }
    mxp_engine_delete_var(var);
}

int mxp__nd_wrap(nd_chunk *chunk, size_t offset, const int64_t *shape, int ndim, int dtype,
                 mxp_ndarray **out) {
    mxp_ndarray *nd = malloc(sizeof *nd); /* not calloc: as for chunks */
    if (!nd) {
        chunk_release(chunk);
        return mxp__error_oom("ndarray handle");
    }
    *nd = (mxp_ndarray){0};
    atomic_init(&nd->refs, 1);
    nd->chunk = chunk;
    nd->offset = offset;
    nd->ndim = ndim;
    nd->dtype = dtype;
    nd->dev = chunk->dev;
    if (ndim > 0) memcpy(nd->shape, shape, (size_t)ndim * sizeof *shape);
    *out = nd;
    return MXP_OK;
}

int mxp_ndarray_create(const int64_t *shape, int ndim, int dtype, mxp_device dev, mxp_ndarray **out) {
    if (!out) return mxp__error(MXP_EMISUSE, "mxp_ndarray_create: NULL out");
    *out = NULL;
    if (ndim < 0 || ndim > MXP_MAX_NDIM)
        return mxp__error(MXP_EINVAL, "ndarray: ndim %d out of range 0..%d", ndim, MXP_MAX_NDIM);
    if (ndim > 0 && !shape) return mxp__error(MXP_EINVAL, "ndarray: NULL shape with ndim %d", ndim);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return mxp__error(MXP_EINVAL, "ndarray: dimension %d is %lld (must be >= 0)", i, (long long)shape[i]);
    uint32_t esize = mxp_dtype_size(dtype);
    if (!esize) return mxp__error(MXP_EINVAL, "ndarray: unknown dtype %d", dtype);
    const mxp_storage_backend *be = NULL;
    int rc = check_device(dev, &be);
    if (rc) return rc;
    int64_t n = shape_size(shape, ndim);
    if (n < 0 || (uint64_t)n > SIZE_MAX / esize)
        return mxp__error(MXP_EINVAL, "ndarray: shape too large for dtype %s", mxp_dtype_name(dtype));
    return create_sized(shape, ndim, dtype, dev, be->host_accessible, (size_t)n * esize, out);
}

int mxp__ndarray_create_like(const mxp_ndarray *like, const int64_t *shape, int ndim, int dtype, mxp_ndarray **out) {
    *out = NULL;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return create_sized(shape, ndim, dtype, like->dev, like->chunk->host_accessible,
                        (size_t)n * mxp_dtype_size(dtype), out);
}

static int create_sized(const int64_t *shape, int ndim, int dtype, mxp_device dev, int host_accessible, size_t bytes,
                        mxp_ndarray **out) {
    /* malloc + assignment, not calloc: glibc's calloc bypasses its
     * per-thread cache, and arrays are made and freed once per imperative
     * op.  (Not memset: the compiler turns malloc + memset into calloc.) */
    nd_chunk *c = malloc(sizeof *c);
    if (!c) return mxp__error_oom("ndarray chunk");
    *c = (nd_chunk){0};
    atomic_init(&c->refs, 1);
    c->dev = dev;
    c->host_accessible = host_accessible;
    int rc = mxp__storage_alloc(dev, bytes, &c->blk);
    if (rc) {
        free(c);
        return mxp__error_prefix(rc, "ndarray of %llu %s elements", (unsigned long long)(bytes / mxp_dtype_size(dtype)),
                                 mxp_dtype_name(dtype));
    }
    rc = mxp_engine_new_var(&c->var);
    if (rc) {
        mxp__storage_free(&c->blk);
        free(c);
        return rc;
    }
    return mxp__nd_wrap(c, 0, shape, ndim, dtype, out);
}

int mxp_ndarray_create_none(mxp_ndarray **out) {
    if (!out) return mxp__error(MXP_EMISUSE, "mxp_ndarray_create_none: NULL out");
    mxp_ndarray *nd = calloc(1, sizeof *nd);
    *out = nd;
    if (!nd) return mxp__error_oom("ndarray handle");
    atomic_init(&nd->refs, 1);
    nd->ndim = -1;
    nd->dtype = MXP_DTYPE_UNKNOWN;
    nd->dev = (mxp_device){MXP_DEV_CPU, 0};
    return MXP_OK;
}

mxp_ndarray *mxp_ndarray_retain(mxp_ndarray *nd) {
    if (nd) atomic_fetch_add(&nd->refs, 1);
    return nd;
}

void mxp_ndarray_release(mxp_ndarray *nd) {
    if (!nd || atomic_fetch_sub(&nd->refs, 1) != 1) return;
    chunk_release(nd->chunk);
    free(nd);
}


/* ------------------------------------------------------------ accessors */

int mxp_ndarray_is_none(const mxp_ndarray *nd) { return !nd || !nd->chunk; }
int mxp_ndarray_ndim(const mxp_ndarray *nd) { return nd ? nd->ndim : -1; }
const int64_t *mxp_ndarray_shape(const mxp_ndarray *nd) { return nd ? nd->shape : NULL; }
int mxp_ndarray_dtype(const mxp_ndarray *nd) { return nd ? nd->dtype : MXP_DTYPE_UNKNOWN; }

mxp_device mxp_ndarray_device(const mxp_ndarray *nd) {
    return nd ? nd->dev : (mxp_device){MXP_DEV_UNKNOWN, 0};
}

int64_t mxp_ndarray_size(const mxp_ndarray *nd) {
    if (!nd || !nd->chunk) return 0;
    return shape_size(nd->shape, nd->ndim);
}

size_t mxp_ndarray_nbytes(const mxp_ndarray *nd) {
    return (size_t)mxp_ndarray_size(nd) * mxp_dtype_size(mxp_ndarray_dtype(nd));
}

void *mxp__ndarray_chunk_ptr(const mxp_ndarray *nd) {
    return nd && nd->chunk ? nd->chunk->blk.ptr : NULL;
}

size_t mxp__ndarray_offset(const mxp_ndarray *nd) { return nd ? nd->offset : 0; }

const int64_t *mxp__ndarray_sig(const mxp_ndarray *nd, int32_t *dtype, int32_t *ndim, mxp_device *dev) {
    if (!nd || !nd->chunk) return NULL;
    *dtype = nd->dtype;
    *ndim = nd->ndim;
    *dev = nd->dev;
    return nd->shape;
}

void mxp__ndarray_view(const mxp_ndarray *nd, void **chunk_ptr, size_t *offset, mxp_var **var) {
    const nd_chunk *c = nd ? nd->chunk : NULL;
    *chunk_ptr = c ? c->blk.ptr : NULL;
    *offset = nd ? nd->offset : 0;
    *var = c ? c->var : NULL;
}

void *mxp__ndarray_dptr(const mxp_ndarray *nd) {
    char *base = mxp__ndarray_chunk_ptr(nd);
    return base ? base + nd->offset : NULL;
}

int mxp__ndarray_same_chunk(const mxp_ndarray *a, const mxp_ndarray *b) {
    return a && b && a->chunk && a->chunk == b->chunk;
}

void *mxp_ndarray_data(const mxp_ndarray *nd) {
    if (!nd || !nd->chunk || !nd->chunk->host_accessible) return NULL;
    return mxp__ndarray_dptr(nd);
}

mxp_var *mxp_ndarray_var(const mxp_ndarray *nd) { return nd && nd->chunk ? nd->chunk->var : NULL; }

uint64_t mxp_ndarray_version(const mxp_ndarray *nd) {
    mxp_var *v = mxp_ndarray_var(nd);
    return v ? mxp_engine_var_version(v) : 0;
}

/* ------------------------------------------------------------ views */

static int new_view(mxp_ndarray *nd, size_t offset, const int64_t *shape, int ndim, mxp_ndarray **out) {
    atomic_fetch_add(&nd->chunk->refs, 1);
    return mxp__nd_wrap(nd->chunk, offset, shape, ndim, nd->dtype, out);
}

int mxp_ndarray_reshape(mxp_ndarray *nd, const int64_t *shape, int ndim, mxp_ndarray **out) {
    if (!out) return mxp__error(MXP_EMISUSE, "mxp_ndarray_reshape: NULL out");
    *out = NULL;
    if (!nd || !nd->chunk) return mxp__error(MXP_EINVAL, "reshape: none or NULL array");
    if (ndim < 0 || ndim > MXP_MAX_NDIM || (ndim && !shape))
        return mxp__error(MXP_EINVAL, "reshape: ndim %d out of range 0..%d", ndim, MXP_MAX_NDIM);
    int64_t dims[MXP_MAX_NDIM];
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < ndim; i++) {
        dims[i] = shape[i];
        if (shape[i] == -1) {
            if (infer >= 0) return mxp__error(MXP_EINVAL, "reshape: more than one -1 in the new shape");
            infer = i;
        } else if (shape[i] < 0) {
            return mxp__error(MXP_EINVAL, "reshape: dimension %d is %lld", i, (long long)shape[i]);
        } else {
            if (shape[i] && known > INT64_MAX / shape[i])
                return mxp__error(MXP_ESHAPE, "reshape: new shape too large");
            known *= shape[i];
        }
    }
    int64_t size = mxp_ndarray_size(nd);
    if (infer >= 0) {
        if (known == 0 || size % known)
            return mxp__error(MXP_ESHAPE, "reshape: cannot infer -1: %lld elements into blocks of %lld",
                              (long long)size, (long long)known);
        dims[infer] = size / known;
        known = size;
    }
    if (known != size)
        return mxp__error(MXP_ESHAPE, "reshape: %lld elements cannot take a shape of %lld elements",
                          (long long)size, (long long)known);
    return new_view(nd, nd->offset, dims, ndim, out);
}

static size_t row_bytes(const mxp_ndarray *nd) {
    return (size_t)shape_size(nd->shape + 1, nd->ndim - 1) * mxp_dtype_size(nd->dtype);
}

int mxp_ndarray_slice(mxp_ndarray *nd, int64_t begin, int64_t end, mxp_ndarray **out) {
    if (!out) return mxp__error(MXP_EMISUSE, "mxp_ndarray_slice: NULL out");
    *out = NULL;
    if (!nd || !nd->chunk || nd->ndim < 1) return mxp__error(MXP_EINVAL, "slice: needs an array with ndim >= 1");
    if (begin < 0 || begin > end || end > nd->shape[0])
        return mxp__error(MXP_EINVAL, "slice: [%lld, %lld) out of range for axis 0 of length %lld",
                          (long long)begin, (long long)end, (long long)nd->shape[0]);
    int64_t dims[MXP_MAX_NDIM];
    memcpy(dims, nd->shape, sizeof dims);
    dims[0] = end - begin;
    return new_view(nd, nd->offset + (size_t)begin * row_bytes(nd), dims, nd->ndim, out);
}

int mxp_ndarray_at(mxp_ndarray *nd, int64_t idx, mxp_ndarray **out) {
    if (!out) return mxp__error(MXP_EMISUSE, "mxp_ndarray_at: NULL out");
    *out = NULL;
    if (!nd || !nd->chunk || nd->ndim < 1) return mxp__error(MXP_EINVAL, "at: needs an array with ndim >= 1");
    if (idx < 0 || idx >= nd->shape[0])
        return mxp__error(MXP_EINVAL, "at: index %lld out of range for axis 0 of length %lld", (long long)idx,
                          (long long)nd->shape[0]);
    return new_view(nd, nd->offset + (size_t)idx * row_bytes(nd), nd->shape + 1, nd->ndim - 1, out);
}
