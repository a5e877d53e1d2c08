/* ndarray_iter.c — NDArrayIter (MXNet's mx.io.NDArrayIter) as a host-side
 * mxp_iter_def, so it runs through the same front end (iter.c) as the
 * iterators packs register.
 *
 * The epoch's sample stream is  carry ++ order:
 *   order  identity, or (shuffle) a Fisher–Yates permutation driven by
 *          splitmix64 from (seed, epoch) — the same generator as the
 *          io-image pack, a pure function of both;
 *   carry  roll_over only: the samples of the previous epoch's incomplete
 *          last batch (MXNet carries them into the next epoch's first
 *          batch).  Epoch e's carry has (e * N) mod B samples, the tail of
 *          epoch e-1's stream, so it too is a pure function of (seed, e)
 *          and set_epoch(e) can resume exactly (tail_of, recursive when
 *          B > N).
 * last_batch_handle: pad wraps to the start of the epoch's order and
 * reports the wrapped samples as pad; discard drops a short batch;
 * roll_over leaves it for the next epoch.
 * Source arrays are read on the producing thread after wait_to_read; any
 * dtype, rows copied as bytes.  The index array gets sample numbers.
 * Invariants: order is a permutation of [0, N); pos <= carry_n + N. */
#include "io/io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct nd_iter {
    int n_data, n_label, n;
    mxp_ndarray **arrays;       /* retained sources [n]                      */
    size_t *row_bytes;          /* [n]                                       */
    int64_t N, B;
    int shuffle, last;
    uint64_t seed;
    uint64_t *order;            /* [N]                                       */
    uint64_t *carry;            /* [B]                                       */
    int64_t carry_n;
    int64_t pos;                /* position in carry ++ order                */
} nd_iter;

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t below(uint64_t *s, uint64_t bound) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do x = splitmix64(s);
    while (x >= limit);
    return x % bound;
}

static void make_order(const nd_iter *it, uint64_t epoch, uint64_t *order) {
    for (int64_t i = 0; i < it->N; i++) order[i] = (uint64_t)i;
    if (!it->shuffle) return;
    uint64_t s = it->seed;
    s = splitmix64(&s) ^ epoch;
    for (uint64_t i = (uint64_t)it->N; i > 1; i--) {
        uint64_t j = below(&s, i);
        uint64_t t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
}

static int64_t carry_len(const nd_iter *it, uint64_t epoch) {
    if (it->last != MXP_LAST_BATCH_ROLL_OVER || epoch == 0) return 0;
    /* (epoch * N) mod B without overflow. */
    unsigned __int128 t = (unsigned __int128)epoch * (uint64_t)it->N;
    return (int64_t)(t % (uint64_t)it->B);
}

/* out[0..L) := the last L samples of epoch e's stream (L <= carry_len(e) + N). */
static int tail_of(const nd_iter *it, uint64_t e, int64_t L, uint64_t *out, uint64_t *scratch) {
    if (L <= 0) return MXP_OK;
    if (L <= it->N) {
        make_order(it, e, scratch);
        memcpy(out, scratch + (it->N - L), (size_t)L * sizeof *out);
        return MXP_OK;
    }
    /* The last L - N come from e's carry, the tail of epoch e-1. */
    int rc = tail_of(it, e - 1, L - it->N, out, scratch);
    if (rc) return rc;
    make_order(it, e, scratch);
    memcpy(out + (L - it->N), scratch, (size_t)it->N * sizeof *out);
    return MXP_OK;
}

static void nd_destroy(mxp_iter_destroy_args *a) {
    nd_iter *it = a ? a->state : NULL;
    if (!it) return;
    if (it->arrays)
        for (int i = 0; i < it->n; i++) mxp_ndarray_release(it->arrays[i]);
    free(it->arrays);
    free(it->row_bytes);
    free(it->order);
    free(it->carry);
    free(it);
}

static int nd_provide(mxp_iter_provide_args *a) {
    nd_iter *it = a->state;
    a->n_data = (uint32_t)it->n_data;
    a->n_label = (uint32_t)it->n_label;
    if (a->capacity < (uint32_t)it->n) return mxp__error(MXP_EINVAL, "NDArrayIter: more than %u arrays", a->capacity);
    for (int i = 0; i < it->n; i++) {
        int is_label = i >= it->n_data;
        int k = is_label ? i - it->n_data : i;
        int count = is_label ? it->n_label : it->n_data;
        const char *base = is_label ? "softmax_label" : "data";
        if (count == 1) snprintf(a->names[i], 64, "%s", base);
        else snprintf(a->names[i], 64, "_%d_%s", k, base);
        const mxp_ndarray *nd = it->arrays[i];
        memset(&a->shapes[i], 0, sizeof a->shapes[i]);
        a->shapes[i].ndim = mxp_ndarray_ndim(nd);
        a->shapes[i].dims[0] = it->B;
        for (int d = 1; d < a->shapes[i].ndim; d++) a->shapes[i].dims[d] = mxp_ndarray_shape(nd)[d];
        a->dtypes[i] = mxp_ndarray_dtype(nd);
    }
    return MXP_OK;
}

static int nd_reset(mxp_iter_reset_args *a) {
    nd_iter *it = a->state;
    make_order(it, a->epoch, it->order);
    it->carry_n = carry_len(it, a->epoch);
    it->pos = 0;
    if (it->carry_n > 0) {
        uint64_t *scratch = malloc((size_t)it->N * sizeof *scratch);
        if (!scratch) return mxp__error_oom("NDArrayIter carry");
        int rc = tail_of(it, a->epoch - 1, it->carry_n, it->carry, scratch);
        free(scratch);
        if (rc) return rc;
    }
    return MXP_OK;
}

/* The sample at position k of the epoch's stream carry ++ order, wrapping
 * to the start of order past its end (pad). */
static uint64_t sample_at(const nd_iter *it, int64_t k) {
    int64_t total = it->carry_n + it->N;
    if (k < total) return k < it->carry_n ? it->carry[k] : it->order[k - it->carry_n];
    return it->order[(k - total) % it->N];
}

/* Shuffled rows are scattered over the whole source (Fashion-MNIST: 188 MB,
 * far beyond the caches), so copying one row at a time waits on memory at
 * every row; asking for the rows PREFETCH_ROWS ahead (their first
 * PREFETCH_BYTES; the hardware prefetcher follows a long row itself) keeps
 * several misses in flight: batch 64 of 784 floats 17 -> 13 us measured. */
enum { PREFETCH_ROWS = 4, PREFETCH_BYTES = 8192 };
static void prefetch_sample(const nd_iter *it, uint64_t s) {
    for (int i = 0; i < it->n; i++) {
        const char *src = (const char *)mxp_ndarray_data(it->arrays[i]) + s * it->row_bytes[i];
        size_t len = it->row_bytes[i] < PREFETCH_BYTES ? it->row_bytes[i] : PREFETCH_BYTES;
        for (size_t o = 0; o < len; o += 64) __builtin_prefetch(src + o, 0, 3);
    }
}

static int nd_next(mxp_iter_next_args *a) {
    nd_iter *it = a->state;
    a->has_batch = 0;
    a->pad = 0;
    int64_t total = it->carry_n + it->N;
    int64_t remain = total - it->pos;
    if (remain <= 0) return MXP_OK;
    if (remain < it->B && it->last != MXP_LAST_BATCH_PAD) return MXP_OK;
    for (int i = 0; i < it->n; i++) {
        int rc = mxp_ndarray_wait_to_read(it->arrays[i]);
        if (rc) return mxp__error_prefix(rc, "NDArrayIter: source array %d", i);
    }
    int32_t pad = 0;
    for (int64_t j = 0; j < PREFETCH_ROWS && j < it->B; j++) prefetch_sample(it, sample_at(it, it->pos + j));
    for (int64_t j = 0; j < it->B; j++) {
        int64_t k = it->pos + j;
        uint64_t s = sample_at(it, k);
        if (k >= total) pad++;
        if (j + PREFETCH_ROWS < it->B) prefetch_sample(it, sample_at(it, k + PREFETCH_ROWS));
        for (int i = 0; i < it->n; i++) {
            const mxp_tensor *t = i < it->n_data ? MXP_ARRAY_AT(mxp_tensor, a->data, i)
                                                 : MXP_ARRAY_AT(mxp_tensor, a->label, i - it->n_data);
            const char *src = (const char *)mxp_ndarray_data(it->arrays[i]) + s * it->row_bytes[i];
            memcpy((char *)mxp_tensor_ptr(t) + (size_t)j * it->row_bytes[i], src, it->row_bytes[i]);
        }
        if (a->index && (int64_t)a->index_capacity > j) a->index[j] = s;
    }
    it->pos += it->B;
    a->has_batch = 1;
    a->pad = pad;
    return MXP_OK;
}

static int nd_create_unused(mxp_iter_create_args *a) {
    (void)a;
    return mxp__error(MXP_EMISUSE, "NDArrayIter: create with mxp_iter_create_ndarray");
}

const mxp_iter_def mxp__ndarray_iter_def = {
    .hdr = MXP_HEADER(mxp_iter_def),
    .name = "NDArrayIter",
    .doc = "Iterating over NDArrays in memory (MXNet's NDArrayIter).",
    .create = nd_create_unused,
    .destroy = nd_destroy,
    .provide = nd_provide,
    .reset = nd_reset,
    .next = nd_next,
};

int mxp_iter_create_ndarray(int n_data, mxp_ndarray *const *data, int n_label, mxp_ndarray *const *label,
                            int64_t batch_size, int shuffle, uint64_t seed, int last_batch, mxp_iter **out) {
    if (!out) return mxp__error(MXP_EINVAL, "mxp_iter_create_ndarray: out is NULL");
    *out = NULL;
    if (n_data < 1 || !data || n_label < 0 || (n_label > 0 && !label) || n_data + n_label > 16)
        return mxp__error(MXP_EINVAL, "NDArrayIter: needs 1..16 arrays with at least one data array "
                          "(got %d data, %d label)", n_data, n_label);
    if (batch_size < 1) return mxp__error(MXP_EINVAL, "NDArrayIter: batch_size %lld must be >= 1", (long long)batch_size);
    if (last_batch < MXP_LAST_BATCH_PAD || last_batch > MXP_LAST_BATCH_ROLL_OVER)
        return mxp__error(MXP_EINVAL, "NDArrayIter: last_batch_handle %d is not pad, discard or roll_over", last_batch);
    int64_t N = -1;
    for (int i = 0; i < n_data + n_label; i++) {
        mxp_ndarray *nd = i < n_data ? data[i] : label[i - n_data];
        if (!nd || mxp_ndarray_is_none(nd) || mxp_ndarray_ndim(nd) < 1)
            return mxp__error(MXP_EINVAL, "NDArrayIter: %s array %d must have at least one axis",
                              i < n_data ? "data" : "label", i < n_data ? i : i - n_data);
        if (!mxp_ndarray_data(nd))
            return mxp__error(MXP_EDEVICE, "NDArrayIter: array %d is not in host memory", i);
        int64_t n0 = mxp_ndarray_shape(nd)[0];
        if (N >= 0 && n0 != N)
            return mxp__error(MXP_ESHAPE, "NDArrayIter: array %d has %lld samples, array 0 has %lld", i,
                              (long long)n0, (long long)N);
        N = n0;
    }
    if (N < 1) return mxp__error(MXP_EINVAL, "NDArrayIter: no samples");
    nd_iter *it = calloc(1, sizeof *it);
    if (!it) return mxp__error_oom("NDArrayIter");
    it->n_data = n_data;
    it->n_label = n_label;
    it->n = n_data + n_label;
    it->N = N;
    it->B = batch_size;
    it->shuffle = shuffle != 0;
    it->seed = seed;
    it->last = last_batch;
    it->arrays = calloc((size_t)it->n, sizeof *it->arrays);
    it->row_bytes = calloc((size_t)it->n, sizeof *it->row_bytes);
    it->order = malloc((size_t)N * sizeof *it->order);
    it->carry = malloc((size_t)batch_size * sizeof *it->carry);
    if (!it->arrays || !it->row_bytes || !it->order || !it->carry) {
        mxp_iter_destroy_args d = {MXP_HEADER(mxp_iter_destroy_args), NULL, it};
        nd_destroy(&d);
        return mxp__error_oom("NDArrayIter");
    }
    for (int i = 0; i < it->n; i++) {
        mxp_ndarray *nd = i < n_data ? data[i] : label[i - n_data];
        it->arrays[i] = mxp_ndarray_retain(nd);
        it->row_bytes[i] = mxp_ndarray_nbytes(nd) / (size_t)N;
    }
    return mxp__iter_create_def(&mxp__ndarray_iter_def, it, 0, out);
}
