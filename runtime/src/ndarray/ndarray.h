/* ndarray/ndarray.h — what the rest of the runtime (the op runtime, kvstore,
 * device packs' glue) uses of NDArrays beyond the public API.
 *
 * Building a tensor view for an op, at push time:
 *   var     = mxp_ndarray_var(nd)        -> const_vars (inputs) / mutate_vars (outputs)
 *   dptr    = mxp__ndarray_dptr(nd)      -> chunk base + view offset; fixed for
 *             the chunk's life, so it can be captured at push time and used when
 *             the op runs (the chunk is freed only after ops on its var)
 *   version = mxp_ndarray_version(nd)    -> read when the op RUNS (it changes
 *             after each completed write)
 *   shape/ndim/dtype/device from the public accessors.
 * The op must keep no pointer to the mxp_ndarray handle itself (the user may
 * free it before the op runs); capture the values above instead.
 *
 * Copies between device types go through a registry of copy functions keyed
 * by (src type, dst type); CPU<->CPU is built in.  A device pack registers
 * its host<->device and device<->device copies. */
#ifndef MXP_NDARRAY_NDARRAY_H
#define MXP_NDARRAY_NDARRAY_H

#include "base/base.h"

/* Chunk base pointer (device memory; NULL for empty or none arrays). */
void *mxp__ndarray_chunk_ptr(const mxp_ndarray *nd);
/* Byte offset of this view in its chunk. */
size_t mxp__ndarray_offset(const mxp_ndarray *nd);
/* chunk_ptr + offset: the view's first element, as a device pointer. */
void *mxp__ndarray_dptr(const mxp_ndarray *nd);
/* The invoke cache's and the prepared forward's reads of a handle, one
 * call each (op/invoke.c, op/exec.c): sig gives dtype, ndim, device and
 * the dims (NULL for a NULL or none array); view gives chunk base, byte
 * offset and var (as the three accessors above and mxp_ndarray_var). */
const int64_t *mxp__ndarray_sig(const mxp_ndarray *nd, int32_t *dtype, int32_t *ndim, mxp_device *dev);
void mxp__ndarray_view(const mxp_ndarray *nd, void **chunk_ptr, size_t *offset, mxp_var **var);
/* A new array of a shape and dtype already validated (the prepared
 * forward's outputs: the first call's inferred signature) on the device
 * of `like` (a live, not none array): mxp_ndarray_create without its
 * argument checks; allocation failures are reported as there. */
int mxp__ndarray_create_like(const mxp_ndarray *like, const int64_t *shape, int ndim, int dtype, mxp_ndarray **out);
/* 1 when a and b are views of the same chunk. */
int mxp__ndarray_same_chunk(const mxp_ndarray *a, const mxp_ndarray *b);

/* A synchronous copy of `bytes` bytes, run on an engine worker (rctx->stream
 * is that worker's stream).  Return MXP_OK or an error (set mxp__error). */
typedef int (*mxp_ndarray_copy_fn)(void *ctx, void *dst, mxp_device dst_dev, const void *src,
                                   mxp_device src_dev, size_t bytes, const mxp_run_ctx *rctx);

/* Register the copy from src_type to dst_type (replacing any previous one;
 * fn NULL removes it).  Returns MXP_OK, MXP_EINVAL, MXP_ENOMEM. */
int mxp__ndarray_register_copy(int32_t src_type, int32_t dst_type, mxp_ndarray_copy_fn fn, void *ctx);

/* The copy path between two device types: a registered function, or the
 * built-in memcpy when both are host-accessible.  Returns MXP_OK or
 * MXP_EUNSUPPORTED (with a message naming both devices). */
int mxp__ndarray_find_copy(mxp_device src, mxp_device dst, mxp_ndarray_copy_fn *out_fn, void **out_ctx);

/* Parse a .params image from memory (see mxp_ndarray_load); `source` names
 * it in error messages ("file.params").  Never reads outside buf[0..len). */
int mxp__ndarray_load_mem(const void *buf, size_t len, const char *source, int *out_n,
                          mxp_ndarray ***out_arrays, char ***out_names);

/* Encode one float as IEEE half / bfloat16 (round to nearest even). */
uint16_t mxp__f32_to_f16(float f);
uint16_t mxp__f32_to_bf16(float f);

#endif /* MXP_NDARRAY_NDARRAY_H */
