/* mnist_iter.c — MNISTIter: MXNet's MNIST iterator (src/io/iter_mnist.cc)
 * through the iterator ABI (mxp/iter.h).
 *
 * create loads the image and label IDX files (plain or gzipped), checks
 * they agree, keeps this worker's shard and nothing else.  provide reports
 * "data" (batch,1,rows,cols) — (batch,rows*cols) when flat — and
 * "softmax_label" (batch,), both float32.  next copies one batch into the
 * host's tensors, pixels scaled by 1/256 exactly as MXNet does (not 1/255).
 *
 * Behaviour, and where it departs from MXNet on purpose:
 *   - Sharding as MXNet's GetPart (shard='contiguous', the default): part
 *     k of n is the contiguous slice [floor(count/n*k), floor(count/n*(k+1)))
 *     computed in double, and shuffle happens within the shard.
 *     shard='strided' (an mxplug extension, PyTorch's DistributedSampler):
 *     every part draws the same global order of all samples for the epoch
 *     and part k takes positions k, k+n, k+2n, ... (floor(count/n) of
 *     them, the same for every part), so n workers' batches of B together
 *     are exactly one worker's batch of n*B, and every worker sees all of
 *     the data over the epochs.
 *   - Shuffle:  MXNet shuffles once at Init and
 *     repeats that order every epoch; here epoch e's order is a fresh
 *     Fisher–Yates permutation driven by splitmix64 seeded from (seed, e),
 *     a pure function of both, so a resumed run sees the same batches.
 *   - A short last batch is dropped (MXNet's MNISTIter has no round_batch:
 *     Next() fails when fewer than batch_size samples remain), so pad is 0.
 *     round_batch=True (an mxplug extension, default False) instead fills
 *     the last batch by wrapping to the start of the epoch's order and
 *     reports the wrapped samples as `pad`.
 *   - The optional index array receives each sample's position in the
 *     IDX file (shard offset included).
 * Not thread-safe: the host calls next from one thread at a time (iter.h).
 * Invariants: order (when shuffling) is a permutation of [0, n); pos <= n
 * or pos is past the end only after the final (padded) batch. */
#include "idx.h"
#include "io_image.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mnist_params {
    const char *image;
    const char *label;
    int64_t batch_size;
    int32_t shuffle;
    int32_t flat;
    int64_t seed;
    int32_t silent;
    int32_t round_batch;
    int64_t num_parts;
    int64_t part_index;
    int32_t shard; /* index into shard_modes */
} mnist_params;

static const char *const shard_modes[] = {"contiguous", "strided", NULL};
enum { SHARD_CONTIGUOUS = 0, SHARD_STRIDED = 1 };

typedef struct mnist_iter {
    const mxp_host *host;
    uint64_t batch;       /* batch_size                                */
    int shuffle, flat, round_batch;
    uint64_t seed;        /* the signed seed's bits                    */
    uint32_t rows, cols;
    uint64_t item;        /* rows * cols                               */
    uint64_t start;       /* first sample of the shard in the file     */
    uint64_t n;           /* samples this part reads per epoch         */
    uint64_t held;        /* samples kept in memory: n, or all of them
                             when strided                             */
    uint64_t stride, offset; /* position j of the part is global order
                             position offset + j*stride (1, 0 unless
                             strided)                                  */
    uint8_t *pixels;      /* held * item                               */
    uint8_t *labels;      /* held                                      */
    uint64_t *order;      /* held, when shuffling                      */
    uint64_t pos;         /* next position in the epoch's order        */
} mnist_iter;

/* ------------------------------------------------------------- shuffle */
static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, bound), bound >= 1, without modulo bias (rejection). */
static uint64_t below(uint64_t *s, uint64_t bound) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do x = splitmix64(s);
    while (x >= limit);
    return x % bound;
}

/* order := the permutation of epoch `epoch`: identity, then Fisher–Yates
 * with a stream that depends only on (seed, epoch). */
static void make_order(mnist_iter *it, uint64_t epoch) {
    for (uint64_t i = 0; i < it->held; i++) it->order[i] = i;
    uint64_t s = it->seed;
    uint64_t k = splitmix64(&s) ^ epoch;
    s = k;
    for (uint64_t i = it->held; i > 1; i--) {
        uint64_t j = below(&s, i);
        uint64_t t = it->order[i - 1];
        it->order[i - 1] = it->order[j];
        it->order[j] = t;
    }
}

/* --------------------------------------------------------------- create */
static void mnist_free(mnist_iter *it) {
    if (!it) return;
    free(it->pixels);
    free(it->labels);
    free(it->order);
    free(it);
}

/* Move the shard [start, start+n) of f's items to a buffer of its own and
 * release the rest of the file. */
static uint8_t *take_shard(idx_file *f, uint64_t start, uint64_t n) {
    uint64_t item = f->view.item_size;
    uint8_t *buf = f->buf;
    memmove(buf, f->view.data + start * item, (size_t)(n * item));
    f->buf = NULL;
    idx_file_free(f);
    size_t bytes = (size_t)(n * item);
    uint8_t *shrunk = realloc(buf, bytes ? bytes : 1);
    return shrunk ? shrunk : buf;
}

static int mnist_create(mxp_iter_create_args *a) {
    io_image_pack *pk = a ? (io_image_pack *)a->user_data : NULL;
    const mxp_host *host = pk ? pk->host : NULL;
    if (!a || !a->params) return io_image_report(host, MXP_EINVAL, "MNISTIter: create without parameters");
    a->state = NULL;
    const mnist_params *p = a->params;
    /* MXNet's batch_size is an int; pad and index_capacity are 32-bit. */
    if (p->batch_size < 1 || p->batch_size > INT32_MAX)
        return io_image_report(host, MXP_EINVAL, "MNISTIter 'batch_size': %" PRId64 " must be in [1, %d]", p->batch_size,
                      INT32_MAX);
    if (p->num_parts < 1)
        return io_image_report(host, MXP_EINVAL, "MNISTIter 'num_parts': %" PRId64 " must be >= 1", p->num_parts);
    if (p->part_index < 0 || p->part_index >= p->num_parts)
        return io_image_report(host, MXP_EINVAL, "MNISTIter 'part_index': %" PRId64 " must be in [0, num_parts=%" PRId64 ")",
                      p->part_index, p->num_parts);
    if (!p->image || !p->label) return io_image_report(host, MXP_EINVAL, "MNISTIter: 'image' and 'label' must be paths");

    mnist_iter *it = calloc(1, sizeof *it);
    if (!it) return io_image_report(host, MXP_ENOMEM, "MNISTIter: out of memory");
    it->host = host;
    it->batch = (uint64_t)p->batch_size;
    it->shuffle = p->shuffle != 0;
    it->flat = p->flat != 0;
    it->round_batch = p->round_batch != 0;
    it->seed = (uint64_t)p->seed;

    char err[512];
    idx_file img, lab;
    int rc = idx_load(p->image, IDX_MAGIC_IMAGES, &img, err, sizeof err);
    if (rc != MXP_OK) {
        mnist_free(it);
        return io_image_report(host, rc, "MNISTIter 'image': %s", err);
    }
    rc = idx_load(p->label, IDX_MAGIC_LABELS, &lab, err, sizeof err);
    if (rc != MXP_OK) {
        idx_file_free(&img);
        mnist_free(it);
        return io_image_report(host, rc, "MNISTIter 'label': %s", err);
    }
    if (img.view.count != lab.view.count) {
        rc = io_image_report(host, MXP_EFORMAT,
                    "MNISTIter: '%s' holds %" PRIu64 " image(s) but '%s' holds %" PRIu64
                    " label(s) (count at byte offset 4 of each); expected equal counts",
                    p->image, img.view.count, p->label, lab.view.count);
        goto fail;
    }
    it->rows = img.view.dims[1];
    it->cols = img.view.dims[2];
    it->item = img.view.item_size;
    /* The batch's byte size must fit comfortably in int64 (mxp_shape). */
    if (it->item > ((uint64_t)1 << 40) / it->batch) {
        rc = io_image_report(host, MXP_EINVAL, "MNISTIter: batch of %" PRIu64 " images of %" PRIu32 "x%" PRIu32
                    " is too large", it->batch, it->rows, it->cols);
        goto fail;
    }
    /* MXNet's GetPart, in double as it computes it. */
    uint64_t count = img.view.count;
    it->stride = 1;
    it->offset = 0;
    if (p->shard == SHARD_STRIDED) {
        it->start = 0;
        it->held = count;
        it->n = count / (uint64_t)p->num_parts;
        it->stride = (uint64_t)p->num_parts;
        it->offset = (uint64_t)p->part_index;
    } else {
        double per = (double)count / (double)p->num_parts;
        uint64_t s0 = (uint64_t)(per * (double)p->part_index);
        uint64_t s1 = (uint64_t)(per * (double)(p->part_index + 1));
        if (s1 > count) s1 = count;
        if (s0 > s1) s0 = s1;
        it->start = s0;
        it->n = it->held = s1 - s0;
    }
    it->pixels = take_shard(&img, it->start, it->held);
    it->labels = take_shard(&lab, it->start, it->held);
    if (it->shuffle && it->held) {
        it->order = malloc((size_t)it->held * sizeof *it->order);
        if (!it->order) {
            mnist_free(it);
            return io_image_report(host, MXP_ENOMEM, "MNISTIter: out of memory for a shuffle order of %" PRIu64, count);
        }
    }
    if (it->order) make_order(it, 0);
    it->pos = 0;
    if (!p->silent && host && host->log) {
        if (it->flat)
            host->log(MXP_LOG_INFO, "io-image", "MNISTIter: load %" PRIu64 " images, shuffle=%d, shape=(%" PRIu64 ",%" PRIu64 ")",
                      it->n, it->shuffle, it->batch, it->item);
        else
            host->log(MXP_LOG_INFO, "io-image", "MNISTIter: load %" PRIu64 " images, shuffle=%d, shape=(%" PRIu64 ",1,%" PRIu32 ",%" PRIu32 ")",
                      it->n, it->shuffle, it->batch, it->rows, it->cols);
    }
    a->state = it;
    return MXP_OK;
fail:
    idx_file_free(&img);
    idx_file_free(&lab);
    mnist_free(it);
    return rc;
}

static void mnist_destroy(mxp_iter_destroy_args *a) {
    if (a) mnist_free(a->state);
}

/* -------------------------------------------------------------- provide */
static void data_shape(const mnist_iter *it, mxp_shape *s) {
    memset(s, 0, sizeof *s);
    s->dims[0] = (int64_t)it->batch;
    if (it->flat) {
        s->ndim = 2;
        s->dims[1] = (int64_t)it->item;
    } else {
        s->ndim = 4;
        s->dims[1] = 1;
        s->dims[2] = it->rows;
        s->dims[3] = it->cols;
    }
}

static int mnist_provide(mxp_iter_provide_args *a) {
    mnist_iter *it = a ? a->state : NULL;
    if (!it) return MXP_EINVAL;
    a->n_data = 1;
    a->n_label = 1;
    if (a->capacity < 2 || !a->names || !a->shapes || !a->dtypes)
        return io_image_report(it->host, MXP_EINVAL, "MNISTIter provide: room for 2 entries needed, capacity %u", a->capacity);
    snprintf(a->names[0], 64, "%s", "data");
    snprintf(a->names[1], 64, "%s", "softmax_label");
    data_shape(it, &a->shapes[0]);
    memset(&a->shapes[1], 0, sizeof a->shapes[1]);
    a->shapes[1].ndim = 1;
    a->shapes[1].dims[0] = (int64_t)it->batch;
    a->dtypes[0] = MXP_DTYPE_F32;
    a->dtypes[1] = MXP_DTYPE_F32;
    return MXP_OK;
}

/* ---------------------------------------------------------------- reset */
static int mnist_reset(mxp_iter_reset_args *a) {
    mnist_iter *it = a ? a->state : NULL;
    if (!it) return MXP_EINVAL;
    if (it->order) make_order(it, a->epoch);
    it->pos = 0;
    return MXP_OK;
}

/* ----------------------------------------------------------------- next */
static int mnist_next(mxp_iter_next_args *a) {
    mnist_iter *it = a ? a->state : NULL;
    if (!it) return MXP_EINVAL;
    a->has_batch = 0;
    a->pad = 0;
    if (a->n_data < 1 || a->n_label < 1 || !a->data || !a->label)
        return io_image_report(it->host, MXP_EINVAL, "MNISTIter next: needs 1 data and 1 label tensor, got %u and %u",
                      a->n_data, a->n_label);
    const mxp_tensor *data = MXP_ARRAY_AT(mxp_tensor, a->data, 0);
    const mxp_tensor *label = MXP_ARRAY_AT(mxp_tensor, a->label, 0);
    mxp_shape ds, ls;
    data_shape(it, &ds);
    memset(&ls, 0, sizeof ls);
    ls.ndim = 1;
    ls.dims[0] = (int64_t)it->batch;
    int rc = io_image_check_f32_batch(it->host, "MNISTIter", data, "data", &ds);
    if (rc == MXP_OK) rc = io_image_check_f32_batch(it->host, "MNISTIter", label, "softmax_label", &ls);
    if (rc != MXP_OK) return rc;
    uint64_t *index = NULL;
    if (MXP_HAS_FIELD(a, mxp_iter_next_args, index_capacity) && a->index) {
        if (a->index_capacity < it->batch)
            return io_image_report(it->host, MXP_EINVAL, "MNISTIter next: index_capacity %u < batch_size %" PRIu64,
                          a->index_capacity, it->batch);
        index = a->index;
    }

    if (it->pos >= it->n) return MXP_OK;                               /* epoch over */
    if (!it->round_batch && it->n - it->pos < it->batch) return MXP_OK; /* MXNet drops it */
    float *dst = mxp_tensor_ptr(data);
    float *lab = mxp_tensor_ptr(label);
    const float scale = 1.0f / 256.0f;
    int32_t pad = 0;
    for (uint64_t j = 0; j < it->batch; j++) {
        uint64_t k = it->pos + j;
        if (k >= it->n) {
            k %= it->n; /* wrap to the start of this epoch's order */
            pad++;
        }
        uint64_t g = it->offset + k * it->stride; /* position in the epoch's global order */
        uint64_t s = it->order ? it->order[g] : g;
        const uint8_t *src = it->pixels + s * it->item;
        float *out = dst + j * it->item;
        for (uint64_t q = 0; q < it->item; q++) out[q] = (float)src[q] * scale;
        lab[j] = (float)it->labels[s];
        if (index) index[j] = it->start + s;
    }
    it->pos += it->batch;
    a->has_batch = 1;
    a->pad = pad;
    return MXP_OK;
}

/* --------------------------------------------------------------- schema */
static const mxp_param_def mnist_param_defs[] = {
    MXP_PARAM("image", MXP_PARAM_STRING, 0, mnist_params, image, "./train-images-idx3-ubyte", 0, 0, NULL,
              "Dataset Param: Mnist image path (IDX3, plain or gzipped)."),
    MXP_PARAM("label", MXP_PARAM_STRING, 0, mnist_params, label, "./train-labels-idx1-ubyte", 0, 0, NULL,
              "Dataset Param: Mnist label path (IDX1, plain or gzipped)."),
    MXP_PARAM("batch_size", MXP_PARAM_INT, MXP_PARAM_HAS_MIN | MXP_PARAM_HAS_MAX, mnist_params, batch_size, "128", 1,
              2147483647.0, NULL,
              "Batch Param: Batch Size."),
    MXP_PARAM("shuffle", MXP_PARAM_BOOL, 0, mnist_params, shuffle, "True", 0, 0, NULL,
              "Augmentation Param: Whether to shuffle data (a new order each epoch, from seed and epoch)."),
    MXP_PARAM("flat", MXP_PARAM_BOOL, 0, mnist_params, flat, "False", 0, 0, NULL,
              "Augmentation Param: Whether to flat the data into 1D."),
    MXP_PARAM("seed", MXP_PARAM_INT, 0, mnist_params, seed, "0", 0, 0, NULL,
              "Augmentation Param: Random Seed."),
    MXP_PARAM("silent", MXP_PARAM_BOOL, 0, mnist_params, silent, "False", 0, 0, NULL,
              "Auxiliary Param: Whether to print out data info."),
    MXP_PARAM("num_parts", MXP_PARAM_INT, MXP_PARAM_HAS_MIN, mnist_params, num_parts, "1", 1, 0, NULL,
              "partition the data into multiple parts"),
    MXP_PARAM("part_index", MXP_PARAM_INT, MXP_PARAM_HAS_MIN, mnist_params, part_index, "0", 0, 0, NULL,
              "the index of the part will read"),
    MXP_PARAM("round_batch", MXP_PARAM_BOOL, 0, mnist_params, round_batch, "False", 0, 0, NULL,
              "mxplug extension: fill a short last batch by wrapping around and report it as pad "
              "(MXNet's MNISTIter drops it)."),
    MXP_PARAM("shard", MXP_PARAM_ENUM, 0, mnist_params, shard, "contiguous", 0, 0, shard_modes,
              "mxplug extension: how num_parts split the data. 'contiguous' (MXNet's GetPart): part k is the k-th "
              "slice, shuffled within itself. 'strided' (PyTorch's DistributedSampler): all parts draw one global "
              "order per epoch and part k takes every num_parts-th sample from position k, so num_parts batches "
              "of B are one batch of num_parts*B."),
};

const mxp_iter_def io_image_mnist_iter_def = {
    .hdr = MXP_HEADER(mxp_iter_def),
    .name = "MNISTIter",
    .doc = "Iterating on the MNIST dataset (IDX files, plain or gzipped).",
    .params = mnist_param_defs,
    .n_params = (uint32_t)(sizeof mnist_param_defs / sizeof mnist_param_defs[0]),
    .params_size = (uint32_t)sizeof(mnist_params),
    .create = mnist_create,
    .destroy = mnist_destroy,
    .provide = mnist_provide,
    .reset = mnist_reset,
    .next = mnist_next,
    .user_data = &io_image_pack_state,
};
