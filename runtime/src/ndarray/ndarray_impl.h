/* ndarray/ndarray_impl.h — private to the ndarray module: handle and chunk
 * layouts.
 *
 * Lifetime: a handle holds one reference on its chunk; views are new
 * handles on the same chunk.  When a chunk's count reaches 0,
 * chunk_release() pushes an engine op on the chunk's var that frees the
 * memory (after every op pushed before on that var) and then deletes the
 * var — or, for host memory with nothing pending on the var, frees both
 * at once (mxp__engine_var_free_if_idle).  Memory is allocated at create time, so a chunk's pointer never
 * changes and ops can capture it at push time. */
#ifndef MXP_NDARRAY_NDARRAY_IMPL_H
#define MXP_NDARRAY_NDARRAY_IMPL_H

#include "ndarray.h"

#include "storage/storage.h"

#include <stdatomic.h>

typedef struct nd_chunk {
    atomic_int refs;
    mxp_storage_block blk;
    mxp_var *var;
    mxp_device dev;
    int host_accessible;
} nd_chunk;

struct mxp_ndarray {
    atomic_int refs;
    nd_chunk *chunk; /* NULL for a none array */
    size_t offset;   /* bytes */
    int ndim;        /* -1 for none */
    int dtype;
    mxp_device dev;
    int64_t shape[MXP_MAX_NDIM];
};

/* Wrap a chunk (taking over the caller's reference) in a new handle. */
int mxp__nd_wrap(nd_chunk *chunk, size_t offset, const int64_t *shape, int ndim, int dtype,
                 mxp_ndarray **out);

#endif /* MXP_NDARRAY_NDARRAY_IMPL_H */
