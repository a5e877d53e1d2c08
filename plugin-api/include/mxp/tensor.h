/* mxp/tensor.h — the tensor view a pack computes on.
 *
 * A view describes memory the host owns; it is valid only for the duration
 * of the callback it was passed to.  Element (i0, i1, ...) lives at
 *   (char *)data + byte_offset + sum_k(i_k * strides[k]) * mxp_dtype_size(dtype)
 * with strides in elements.  strides == NULL means contiguous row-major.
 * Since ABI 1.0. */
#ifndef MXP_TENSOR_H
#define MXP_TENSOR_H

#include <mxp/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mxp_tensor {
    mxp_header hdr;
    void *data;             /* base of the storage; NULL for an absent entry   */
    uint64_t byte_offset;   /* offset of element 0 from data                   */
    int32_t dtype;          /* mxp_dtype                                       */
    int32_t ndim;           /* 0 for a scalar                                  */
    const int64_t *shape;   /* [ndim]                                          */
    const int64_t *strides; /* [ndim] in elements, NULL = contiguous           */
    mxp_device device;      /* where data lives                                */
    uint64_t version;       /* changes on every write of the storage and
                               differs between arrays (an address reused by
                               another array gets other versions): a pack
                               may cache data derived from it (e.g. transformed
                               weights) keyed by (data, version).  0: not
                               tracked (a KVStore transport's arrays): do
                               not cache                                      */
} mxp_tensor;

/* Number of elements (1 for a scalar). */
static inline int64_t mxp_tensor_numel(const mxp_tensor *t) {
    int64_t n = 1;
    for (int32_t i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

/* Address of element 0. */
static inline void *mxp_tensor_ptr(const mxp_tensor *t) {
    return (void *)((char *)t->data + t->byte_offset);
}

/* True when the view is dense row-major (strides NULL or equal to the
 * row-major strides of its shape; size-1 dims may have any stride). */
static inline int mxp_tensor_is_contiguous(const mxp_tensor *t) {
    if (!t->strides) return 1;
    int64_t expect = 1;
    for (int32_t i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != expect) return 0;
        expect *= t->shape[i];
    }
    return 1;
}

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
_Static_assert(offsetof(mxp_tensor, data) == 8, "mxp_tensor layout is frozen");
_Static_assert(offsetof(mxp_tensor, byte_offset) == 16, "mxp_tensor layout is frozen");
_Static_assert(offsetof(mxp_tensor, dtype) == 24, "mxp_tensor layout is frozen");
_Static_assert(offsetof(mxp_tensor, ndim) == 28, "mxp_tensor layout is frozen");
_Static_assert(offsetof(mxp_tensor, shape) == 32, "mxp_tensor layout is frozen");
_Static_assert(offsetof(mxp_tensor, strides) == 40, "mxp_tensor layout is frozen");
_Static_assert(offsetof(mxp_tensor, device) == 48, "mxp_tensor layout is frozen");
_Static_assert(offsetof(mxp_tensor, version) == 56, "mxp_tensor layout is frozen");
_Static_assert(sizeof(mxp_tensor) == 64, "mxp_tensor layout is frozen");
#endif

#ifdef __cplusplus
}
#endif
#endif /* MXP_TENSOR_H */
