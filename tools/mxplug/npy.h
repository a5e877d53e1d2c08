/* npy.h — a small reader/writer of NumPy .npy files for the mxplug CLI
 * (`predict --input X.npy`, `predict --output Y.npy`).
 *
 * Supported: format versions 1.0, 2.0 and 3.0 (3.0 only differs by a UTF-8
 * header, which we parse the same way), C order, dtypes '<f4' (float32),
 * '<f8' (float64) and '|u1' (uint8; '<u1' and '=u1' are accepted too),
 * 0..MXP_MAX_NDIM dimensions.  Anything else — Fortran order, big-endian,
 * other dtypes (ints, float16, structured, object), truncated data, a
 * malformed header — is refused with a message saying what and why; no
 * partial array is returned.  The writer writes version 1.0 (an
 * 8-dim header always fits its 16-bit length) byte-identical to numpy
 * 1.24's np.save: the same dict text, growth room after it, data at a
 * multiple of 64 bytes.
 *
 * Error convention: functions return MXP_OK or a negative MXP_E* status
 * (EIO, EFORMAT, EUNSUPPORTED, ENOMEM, EINVAL) and write a one-line
 * message into err[0..cap) (may be NULL).  Not tied to the runtime: only
 * <mxp/types.h> is used, so tests compile npy.c directly.
 * Assumes a little-endian host (checked at compile time). */
#ifndef MXP_TOOLS_MXPLUG_NPY_H
#define MXP_TOOLS_MXPLUG_NPY_H

#include <mxp/types.h>

#include <stddef.h>
#include <stdint.h>

typedef struct npy_array {
    int dtype;                    /* MXP_DTYPE_F32, MXP_DTYPE_F64 or MXP_DTYPE_U8 */
    int ndim;                     /* 0 is a scalar (one element)                  */
    int64_t shape[MXP_MAX_NDIM];
    size_t count;                 /* elements: product of shape                   */
    void *data;                   /* malloc'd, count elements, C order            */
} npy_array;

/* Parse a whole .npy file image buf[0..len).  *out is cleared first and
 * owns its data on success (npy_free). */
int npy_parse(const void *buf, size_t len, npy_array *out, char *err, size_t cap);
/* Read and parse `path` (the message names the path). */
int npy_load(const char *path, npy_array *out, char *err, size_t cap);
/* Write data (count = product of shape elements of dtype F32/F64/U8). */
int npy_save(const char *path, int dtype, int ndim, const int64_t *shape, const void *data, char *err,
             size_t cap);
/* Convert to float32 into dst[0..a->count) (uint8 values as 0..255). */
void npy_to_f32(const npy_array *a, float *dst);
/* Free the data and clear; NULL-safe. */
void npy_free(npy_array *a);
/* The descr string npy_save writes for a dtype ("<f4"), NULL if unsupported. */
const char *npy_descr(int dtype);

#endif /* MXP_TOOLS_MXPLUG_NPY_H */
