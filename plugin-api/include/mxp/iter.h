/* mxp/iter.h — data iterators (MNISTIter, ImageRecordIter, ...).
 *
 * The host owns the prefetch threads and the batch buffers: it asks the
 * iterator what it provides, allocates the arrays, and calls `next` from
 * ONE thread at a time to fill them.  An iterator is therefore a plain
 * single-consumer object; it may use mxp_host.parallel_for inside `next`
 * (e.g. to decode images) but starts no threads of its own.
 * Parameters come through the same typed schema as ops (mxp/params.h).
 * Threads (what the host guarantees and what it asks of a pack):
 *   - create, provide and destroy run on the application's thread that
 *     calls mxp_iter_create / mxp_iter_free; destroy after the prefetch
 *     thread has been joined.
 *   - next runs on the iterator's prefetch thread (or the caller's without
 *     prefetch); reset runs on the caller's thread while the prefetch
 *     thread is parked.  So the calls on one state never overlap: `state`
 *     needs no lock of its own.  Different iterators (states) run at once.
 *   - Any callback may call the host table; next may use parallel_for.
 * The host makes these calls from runtime/src/io/iter.c.
 * Since ABI 1.0. */
#ifndef MXP_ITER_H
#define MXP_ITER_H

#include <mxp/types.h>
#include <mxp/tensor.h>
#include <mxp/params.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mxp_iter_create_args {
    mxp_header hdr;
    const void *params;          /* parsed with mxp_iter_def.params         */
    void *user_data;
    void *state;                 /* out                                     */
} mxp_iter_create_args;

/* What a batch holds: n_data data entries, then n_label label entries, in
 * names/shapes/dtypes[0 .. n_data + n_label).  Shapes include the batch. */
typedef struct mxp_iter_provide_args {
    mxp_header hdr;
    void *user_data;
    void *state;
    uint32_t capacity;           /* entries available in the arrays below   */
    uint32_t n_data;             /* out                                     */
    uint32_t n_label;            /* out                                     */
    uint32_t reserved;
    char (*names)[64];           /* out, e.g. "data", "softmax_label"       */
    mxp_shape *shapes;           /* out                                     */
    int32_t *dtypes;             /* out                                     */
} mxp_iter_provide_args;

/* Start epoch `epoch` (0-based).  A shuffling iterator's order must be a
 * pure function of (seed, epoch), so training can resume exactly. */
typedef struct mxp_iter_reset_args {
    mxp_header hdr;
    void *user_data;
    void *state;
    uint64_t epoch;
} mxp_iter_reset_args;

/* Fill the next batch into host-allocated tensors (shapes from provide). */
typedef struct mxp_iter_next_args {
    mxp_header hdr;
    void *user_data;
    void *state;
    uint32_t n_data, n_label;
    const mxp_tensor *data;      /* [n_data]                                */
    const mxp_tensor *label;     /* [n_label]                               */
    int32_t has_batch;           /* out: 0 at the end of the epoch          */
    int32_t pad;                 /* out: padded samples at the batch's end  */
    uint64_t *index;             /* out (optional): sample indices [batch]  */
    uint32_t index_capacity;
    uint32_t reserved;
} mxp_iter_next_args;

typedef struct mxp_iter_destroy_args {
    mxp_header hdr;
    void *user_data;
    void *state;
} mxp_iter_destroy_args;

typedef struct mxp_iter_def {
    mxp_header hdr;
    const char *name;            /* "MNISTIter"                             */
    const char *doc;
    const mxp_param_def *params;
    uint32_t n_params;
    uint32_t params_size;
    int (*create)(mxp_iter_create_args *a);
    void (*destroy)(mxp_iter_destroy_args *a);
    int (*provide)(mxp_iter_provide_args *a);
    int (*reset)(mxp_iter_reset_args *a);
    int (*next)(mxp_iter_next_args *a);
    void *user_data;
} mxp_iter_def;

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
_Static_assert(sizeof(mxp_iter_create_args) == 32, "layout is frozen");
_Static_assert(offsetof(mxp_iter_provide_args, names) == 40, "layout is frozen");
_Static_assert(sizeof(mxp_iter_provide_args) == 64, "layout is frozen");
_Static_assert(sizeof(mxp_iter_reset_args) == 32, "layout is frozen");
_Static_assert(offsetof(mxp_iter_next_args, data) == 32, "layout is frozen");
_Static_assert(sizeof(mxp_iter_next_args) == 72, "layout is frozen");
_Static_assert(offsetof(mxp_iter_def, create) == 40, "layout is frozen");
_Static_assert(sizeof(mxp_iter_def) == 88, "layout is frozen");
#endif

#ifdef __cplusplus
}
#endif
#endif /* MXP_ITER_H */
