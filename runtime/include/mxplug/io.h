/* mxplug/io.h — data iterators (MXNet's DataIter front end).
 * Part of mxplug.h; include <mxplug.h> rather than this file.
 *
 * An mxp_iter yields batches of NDArrays: n_data data entries and n_label
 * label entries per batch, with fixed names and shapes (provide_data /
 * provide_label; shapes include the batch axis).  Two kinds:
 *   - a registered iterator ("MNISTIter", ...) created by name with MXNet's
 *     kwargs; its pack is loaded on first use and kept pinned while the
 *     iterator lives;
 *   - NDArrayIter over arrays in memory (mxp_iter_create_ndarray).
 *
 * Epochs.  A new iterator is at epoch 0.  mxp_iter_reset starts the next
 * epoch; mxp_iter_set_epoch(it, e) starts epoch e (to resume training).
 * A shuffling iterator's order is a pure function of (seed, epoch).
 *
 * Prefetching.  With prefetch_buffer = N > 0 a host thread (started on the
 * first mxp_iter_next, never by create) fills up to N batches ahead into a
 * ring of batch buffers while the caller works on the current one; with
 * N = 0 each batch is produced on the caller's thread.  Both give the same
 * sequence.  The arrays returned by mxp_iter_data / mxp_iter_label are
 * owned by the iterator and hold the current batch until the next call to
 * mxp_iter_next, mxp_iter_reset, mxp_iter_set_epoch or mxp_iter_free (work
 * already pushed on them is waited for before they are refilled).
 *
 * Errors from the producer (a pack's next) come back from mxp_iter_next,
 * with the pack's message, in order: the batches before the failure are
 * delivered first.  After an error, mxp_iter_next keeps failing until a
 * reset.  After fork() a child must reset an iterator whose prefetch thread
 * had started (the thread does not exist in the child); mxp_iter_free is
 * always safe.
 *
 * One consumer: calls on one iterator must not overlap (like MXNet's
 * DataIter); different iterators are independent.  Since ABI 1.0. */
#ifndef MXPLUG_IO_H
#define MXPLUG_IO_H

#include <mxplug/base.h>
#include <mxplug/ndarray.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mxp_iter mxp_iter;

/* Host-side default of prefetch_buffer for registered iterators. */
#define MXP_ITER_PREFETCH_DEFAULT 2

/* ============================================================ create */

/* Create a registered iterator by name with MXNet kwargs (its schema
 * validates them; unknown keys are errors).  Host-side keys handled here
 * and not passed to the pack: prefetch_buffer (int >= 0, default
 * MXP_ITER_PREFETCH_DEFAULT), ctx ("cpu", only a hint as in MXNet), dtype
 * (output dtype; only "float32" is supported).
 * out: new handle (free with mxp_iter_free), NULL on failure.
 * Returns MXP_OK, MXP_ENOENT (no such iterator), MXP_EINVAL (kwargs),
 * MXP_EUNSUPPORTED, or the pack's create error (its message). */
MXP_API int mxp_iter_create(const char *name, int n_kwargs, const char *const *keys,
                            const char *const *vals, mxp_iter **out);

/* What NDArrayIter does with a last batch of fewer than batch_size samples
 * (MXNet's last_batch_handle). */
typedef enum mxp_last_batch {
    MXP_LAST_BATCH_PAD       = 0, /* fill from the start of the epoch's order; pad = filled */
    MXP_LAST_BATCH_DISCARD   = 1, /* drop it                                                */
    MXP_LAST_BATCH_ROLL_OVER = 2  /* carry its samples into the next epoch's first batch    */
} mxp_last_batch;

/* NDArrayIter over data[0..n_data) and label[0..n_label) (n_label may be
 * 0), all with the same size N of axis 0, any dtype.  Names follow MXNet:
 * "data" / "softmax_label" for one array, "_0_data", "_1_data", ... and
 * "_0_softmax_label", ... for several.  The iterator retains the arrays
 * (later writes to them are seen by later batches).  shuffle: epoch e's
 * order is a permutation drawn from (seed, e).  Batches are produced on the
 * caller's thread (no prefetch: the data is already in memory).
 * Returns MXP_OK, MXP_EINVAL (counts, batch_size < 1, N differs, none
 * arrays, bad last_batch), MXP_ENOMEM. */
MXP_API int mxp_iter_create_ndarray(int n_data, mxp_ndarray *const *data, int n_label,
                                    mxp_ndarray *const *label, int64_t batch_size, int shuffle,
                                    uint64_t seed, int last_batch, mxp_iter **out);

/* Stop the prefetch thread (joined), drop the batches, destroy the pack's
 * iterator and unpin its pack.  NULL is a no-op. */
MXP_API void mxp_iter_free(mxp_iter *it);

/* ============================================================ layout */

MXP_API int mxp_iter_num_data(const mxp_iter *it);
MXP_API int mxp_iter_num_label(const mxp_iter *it);
/* Name, ndim, shape (ndim entries, owned by it) and dtype of data entry i /
 * label entry i.  Returns MXP_OK or MXP_EINVAL (index).  Any out may be NULL. */
MXP_API int mxp_iter_provide_data(const mxp_iter *it, int i, const char **out_name, int *out_ndim,
                                  const int64_t **out_shape, int *out_dtype);
MXP_API int mxp_iter_provide_label(const mxp_iter *it, int i, const char **out_name, int *out_ndim,
                                   const int64_t **out_shape, int *out_dtype);
/* Batch size (axis 0 of data entry 0). */
MXP_API int64_t mxp_iter_batch_size(const mxp_iter *it);

/* ============================================================ epochs */

/* Start the next epoch (epoch + 1).  Returns MXP_OK or the pack's error. */
MXP_API int mxp_iter_reset(mxp_iter *it);
/* Start epoch `epoch` (any value; 0 is the first). */
MXP_API int mxp_iter_set_epoch(mxp_iter *it, uint64_t epoch);
/* The current epoch. */
MXP_API uint64_t mxp_iter_epoch(const mxp_iter *it);

/* ============================================================ batches */

/* Advance to the next batch.  *out_has_batch: 1 with a batch, 0 at the end
 * of the epoch (then MXP_OK).  Returns MXP_OK or the producer's error (the
 * pack's message in mxp_last_error()), MXP_EMISUSE after fork without reset. */
MXP_API int mxp_iter_next(mxp_iter *it, int *out_has_batch);

/* Current batch's arrays (borrowed: owned by it; see above).  NULL when
 * there is no current batch or i is out of range. */
MXP_API mxp_ndarray *mxp_iter_data(const mxp_iter *it, int i);
MXP_API mxp_ndarray *mxp_iter_label(const mxp_iter *it, int i);
/* Samples at the end of the current batch that only pad it (0 if none). */
MXP_API int mxp_iter_pad(const mxp_iter *it);
/* Sample indices of the current batch (batch_size entries, owned by it),
 * or NULL when the iterator does not report them.  *out_n: entries. */
MXP_API const uint64_t *mxp_iter_index(const mxp_iter *it, int64_t *out_n);

#ifdef __cplusplus
}
#endif
#endif /* MXPLUG_IO_H */
