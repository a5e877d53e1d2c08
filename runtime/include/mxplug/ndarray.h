/* mxplug/ndarray.h — n-dimensional arrays on a device.
 * Part of mxplug.h; include <mxplug.h> rather than this file.
 *
 * An mxp_ndarray is a reference-counted handle to a view of a storage chunk:
 * {chunk, byte offset, shape, dtype, device}.  Views made by reshape, slice
 * and at share the chunk and its engine variable, so work on any view is
 * ordered with work on the others.  All work on data goes through the
 * dependency engine: fill/copy return at once; wait_to_read/wait_to_write
 * (or the sync_copy calls) block and report any error of earlier work.
 * The chunk's memory is freed by an engine op after its last pending user,
 * when the last handle referring to it is freed.
 * Shapes: 0..MXP_MAX_NDIM dims of int64 >= 0; ndim 0 is a scalar (1 element).
 * Since ABI 1.0. */
#ifndef MXPLUG_NDARRAY_H
#define MXPLUG_NDARRAY_H

#include <mxplug/base.h>
#include <mxplug/engine.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mxp_ndarray mxp_ndarray;

/* ============================================================ lifetime */

/* Create an array of the given shape on a device (contents undefined).
 * shape[0..ndim): copied; caller keeps ownership (may be NULL if ndim 0).
 * out: new handle (refcount 1, release with mxp_ndarray_release), NULL on failure.
 * Returns MXP_OK, MXP_EINVAL (bad ndim/dim/dtype/device), MXP_ENOMEM. Thread-safe. */
MXP_API int mxp_ndarray_create(const int64_t *shape, int ndim, int dtype, mxp_device dev, mxp_ndarray **out);

/* Create a "none" array: no shape, no data (MXNet's empty NDArray; .params
 * files may hold them).  out: new handle.  Returns MXP_OK, MXP_ENOMEM. */
MXP_API int mxp_ndarray_create_none(mxp_ndarray **out);

/* Add a reference.  Returns nd (NULL-safe). */
MXP_API mxp_ndarray *mxp_ndarray_retain(mxp_ndarray *nd);

/* Drop a reference; the last one frees the handle (and the chunk once no
 * view uses it, after pending work).  NULL is a no-op. */
MXP_API void mxp_ndarray_release(mxp_ndarray *nd);

/* ============================================================ accessors */

MXP_API int mxp_ndarray_is_none(const mxp_ndarray *nd);       /* 1 for none arrays   */
MXP_API int mxp_ndarray_ndim(const mxp_ndarray *nd);          /* -1 for none         */
MXP_API const int64_t *mxp_ndarray_shape(const mxp_ndarray *nd); /* ndim entries; owned by nd */
MXP_API int mxp_ndarray_dtype(const mxp_ndarray *nd);         /* MXP_DTYPE_UNKNOWN for none */
MXP_API mxp_device mxp_ndarray_device(const mxp_ndarray *nd);
MXP_API int64_t mxp_ndarray_size(const mxp_ndarray *nd);      /* elements; 0 for none */
MXP_API size_t mxp_ndarray_nbytes(const mxp_ndarray *nd);     /* size * dtype size    */
/* Raw pointer to the first element of this view (host-accessible devices
 * only, else NULL).  Only meaningful after mxp_ndarray_wait_to_read (to read)
 * or wait_to_write (to write); valid while nd is alive. */
MXP_API void *mxp_ndarray_data(const mxp_ndarray *nd);
/* The engine variable guarding the chunk (shared by all its views): list
 * it in const_vars to read the array, in mutate_vars to write it.  Owned by
 * the chunk; valid while nd is alive. NULL for none arrays. */
MXP_API mxp_var *mxp_ndarray_var(const mxp_ndarray *nd);
/* Write version of the chunk: changes after every completed write. */
MXP_API uint64_t mxp_ndarray_version(const mxp_ndarray *nd);

/* ============================================================ views */

/* Same data, new shape (same element count, -1 allowed once to infer).
 * out: new handle sharing the chunk.  Returns MXP_OK, MXP_ESHAPE, MXP_EINVAL. */
MXP_API int mxp_ndarray_reshape(mxp_ndarray *nd, const int64_t *shape, int ndim, mxp_ndarray **out);
/* Rows [begin, end) along axis 0.  Returns MXP_OK, MXP_EINVAL (range, scalar). */
MXP_API int mxp_ndarray_slice(mxp_ndarray *nd, int64_t begin, int64_t end, mxp_ndarray **out);
/* Row idx along axis 0, with that axis dropped.  Returns MXP_OK, MXP_EINVAL. */
MXP_API int mxp_ndarray_at(mxp_ndarray *nd, int64_t idx, mxp_ndarray **out);

/* ============================================================ work */

/* Set every element of the view to value (converted to the dtype). Async. */
MXP_API int mxp_ndarray_fill(mxp_ndarray *nd, double value);
/* Copy src into dst (same element count and dtype; any devices with a
 * registered copy path).  Async.  Returns MXP_OK, MXP_ESHAPE, MXP_ETYPE,
 * MXP_EUNSUPPORTED (no copy path between the devices). */
MXP_API int mxp_ndarray_copy(mxp_ndarray *src, mxp_ndarray *dst);
/* Copy bytes from host memory into the view and wait.  bytes must equal
 * mxp_ndarray_nbytes(nd).  Returns MXP_OK, MXP_EINVAL, or an engine error. */
MXP_API int mxp_ndarray_sync_copy_from(mxp_ndarray *nd, const void *buf, size_t bytes);
/* Copy the view into host memory (after pending writes) and wait. */
MXP_API int mxp_ndarray_sync_copy_to(mxp_ndarray *nd, void *buf, size_t bytes);
/* Block until pending writes are done / pending reads and writes are done.
 * Return the error such work raised (once), with mxp_last_error() naming it. */
MXP_API int mxp_ndarray_wait_to_read(mxp_ndarray *nd);
MXP_API int mxp_ndarray_wait_to_write(mxp_ndarray *nd);

/* ============================================================ files */

/* Save arrays (with names, or names NULL for a list) in MXNet's .params
 * format: loadable by mx.nd.load.  Arrays may be on any device.
 * Returns MXP_OK, MXP_EINVAL, MXP_EIO (message names the path), or the
 * error pending work on an array raised. */
MXP_API int mxp_ndarray_save(const char *path, int n, mxp_ndarray *const *arrays, const char *const *names);

/* Load a .params file (record formats V1, V2, V3 and legacy; dense only)
 * onto the CPU.  out_arrays: array of n new handles; out_names: n
 * NUL-terminated names, or NULL when the file has none.  Free all three
 * with mxp_ndarray_list_free.  Errors name the file and byte offset.
 * Returns MXP_OK, MXP_EIO, MXP_EFORMAT, MXP_EUNSUPPORTED (sparse), MXP_ENOMEM. */
MXP_API int mxp_ndarray_load(const char *path, int *out_n, mxp_ndarray ***out_arrays, char ***out_names);

/* Free what mxp_ndarray_load returned (any pointer may be NULL). */
MXP_API void mxp_ndarray_list_free(int n, mxp_ndarray **arrays, char **names);

#ifdef __cplusplus
}
#endif
#endif /* MXPLUG_NDARRAY_H */
