/* image_iter.c — the batch engine of the image iterators (image_iter.h):
 * parameter checks, augmenter setup, epoch order, parallel decoding into
 * the host's batch tensors, the short last batch and corrupt samples.
 * Knows nothing of files: samples come from an img_source.
 *
 * next, in rounds: decode the epoch positions [cursor, cursor + need) into
 * the batch slots [filled, filled + need) in parallel (positions past the
 * epoch's end wrap to its start: the pad); a sample that fails is an
 * error naming it (the smallest failing position of the round, so the
 * report is deterministic) or, with skip_corrupt, counted and squeezed out
 * (the good samples after it move up one slot) — then another round for
 * the slots left.  Without failures there is one round, as before. */
#include "image_iter.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per-sample warnings logged per epoch before only the count goes on. */
#define SKIP_WARNINGS_PER_EPOCH 5

struct img_iter {
    const mxp_host *host;
    const char *name;
    aug_params aug;
    int out_u8;
    int discard_last;
    int skip_corrupt;
    uint64_t batch;
    uint32_t label_width;
    int shuffle;
    uint64_t seed;
    img_source src;
    uint64_t *order;    /* src.n, when shuffling */
    uint64_t pos, epoch;
    int n_workers;
    aug_worker *workers;
    uint64_t skipped_epoch, skipped_total;
    int epoch_reported; /* the summary of this epoch was logged */
};

int img_iter_check_params(const mxp_host *host, const char *name, const img_iter_params *p) {
    const mxp_param_shape *s = &p->data_shape;
    if (!s->has_value || s->ndim != 3 || (s->dims[0] != 1 && s->dims[0] != 3) || s->dims[1] < 1 || s->dims[2] < 1 ||
        s->dims[1] > 8192 || s->dims[2] > 8192)
        return io_image_report(host, MXP_EINVAL, "%s 'data_shape': must be (c, h, w) with c 1 or 3 and h, w in [1, 8192]", name);
    if (p->batch_size < 1 || p->batch_size > (1 << 20))
        return io_image_report(host, MXP_EINVAL, "%s 'batch_size': %" PRId64 " must be in [1, 1048576]", name, p->batch_size);
    if (p->num_parts < 1 || p->part_index < 0 || p->part_index >= p->num_parts)
        return io_image_report(host, MXP_EINVAL, "%s 'part_index': %" PRId64 " must be in [0, num_parts=%" PRId64 ")", name,
                               p->part_index, p->num_parts);
    struct { const char *key; double v; } unsupported[] = {
        {"max_rotate_angle", p->max_rotate_angle}, {"max_shear_ratio", p->max_shear_ratio},
        {"brightness", p->brightness}, {"contrast", p->contrast}, {"saturation", p->saturation},
        {"pca_noise", p->pca_noise},
    };
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (unsupported[i].v != 0)
            return io_image_report(host, MXP_EUNSUPPORTED, "%s '%s': %g is not supported (only 0: this augmenter is not "
                                   "implemented)", name, unsupported[i].key, unsupported[i].v);
    if (p->mean_img && *p->mean_img)
        return io_image_report(host, MXP_EUNSUPPORTED, "%s 'mean_img': a mean image is not supported (use mean_r/g/b)", name);
    if (p->inter_method != 0 && p->inter_method != 1 && p->inter_method != 3)
        return io_image_report(host, MXP_EUNSUPPORTED, "%s 'inter_method': %" PRId64 " is not supported (0 nearest, 1 bilinear, "
                               "3 area)", name, p->inter_method);
    if (!(p->min_random_area > 0 && p->min_random_area <= p->max_random_area && p->max_random_area <= 1))
        return io_image_report(host, MXP_EINVAL, "%s 'min_random_area'/'max_random_area': need 0 < min <= max <= 1 (got %g, %g)",
                               name, p->min_random_area, p->max_random_area);
    if (p->std_r == 0 || p->std_g == 0 || p->std_b == 0)
        return io_image_report(host, MXP_EINVAL, "%s 'std_r/g/b': must not be 0", name);
    return MXP_OK;
}

const char *const img_iter_dtypes[] = {"None", "float32", "uint8", NULL};

int img_iter_output_u8(const mxp_host *host, const char *name, const img_iter_params *p, int always_u8, int *out_u8) {
    *out_u8 = always_u8 || p->dtype == IMG_DTYPE_UINT8;
    if (always_u8 && p->dtype == IMG_DTYPE_FLOAT32)
        return io_image_report(host, MXP_EINVAL, "%s 'dtype': float32 is not produced here (uint8 pixels; "
                               "ImageRecordIter gives float32)", name);
    if (*out_u8) {
        double mean[3] = {p->mean_r, p->mean_g, p->mean_b}, std[3] = {p->std_r, p->std_g, p->std_b};
        static const char ch[3] = {'r', 'g', 'b'};
        for (int k = 0; k < 3; k++) {
            if (mean[k] != 0)
                return io_image_report(host, MXP_EINVAL, "%s 'mean_%c': %g needs float32 output (uint8 pixels are not "
                                       "normalised)", name, ch[k], mean[k]);
            if (std[k] != 1)
                return io_image_report(host, MXP_EINVAL, "%s 'std_%c': %g needs float32 output (uint8 pixels are not "
                                       "normalised)", name, ch[k], std[k]);
        }
        if (p->scale != 1)
            return io_image_report(host, MXP_EINVAL, "%s 'scale': %g needs float32 output (uint8 pixels are not "
                                   "normalised)", name, p->scale);
    }
    return MXP_OK;
}

void img_iter_shard(uint64_t count, int64_t num_parts, int64_t part_index, uint64_t *begin, uint64_t *end) {
    double per = (double)count / (double)num_parts;
    uint64_t s0 = (uint64_t)(per * (double)part_index), s1 = (uint64_t)(per * (double)(part_index + 1));
    if (s1 > count) s1 = count;
    if (s0 > s1) s0 = s1;
    *begin = s0;
    *end = s1;
}

void img_iter_free(img_iter *it) {
    if (!it) return;
    if (it->src.free) it->src.free(it->src.state);
    for (int i = 0; it->workers && i < it->n_workers; i++) aug_worker_fini(&it->workers[i]);
    free(it->workers);
    free(it->order);
    free(it);
}

int img_iter_new(const mxp_host *host, const char *name, const img_iter_params *p, int out_u8, int discard_last,
                 img_iter **out) {
    *out = NULL;
    img_iter *it = calloc(1, sizeof *it);
    if (!it) return io_image_report(host, MXP_ENOMEM, "%s: out of memory", name);
    it->host = host;
    it->name = name;
    it->out_u8 = out_u8;
    it->discard_last = discard_last;
    it->skip_corrupt = p->skip_corrupt != 0;
    it->batch = (uint64_t)p->batch_size;
    it->label_width = (uint32_t)p->label_width;
    it->shuffle = p->shuffle != 0;
    it->seed = (uint64_t)p->seed;
    aug_params *g = &it->aug;
    g->c = (int)p->data_shape.dims[0];
    g->h = (int)p->data_shape.dims[1];
    g->w = (int)p->data_shape.dims[2];
    g->resize = (int)p->resize;
    g->rand_crop = p->rand_crop;
    g->random_resized_crop = p->random_resized_crop;
    g->min_area = p->min_random_area;
    g->max_area = p->max_random_area;
    if (p->min_aspect_ratio.has_value) {
        g->min_ratio = p->min_aspect_ratio.value;
        g->max_ratio = p->max_aspect_ratio;
    } else {
        g->min_ratio = 1 - p->max_aspect_ratio;
        g->max_ratio = 1 + p->max_aspect_ratio;
    }
    if (!(g->min_ratio > 0 && g->min_ratio <= g->max_ratio)) {
        img_iter_free(it);
        return io_image_report(host, MXP_EINVAL, "%s 'min_aspect_ratio'/'max_aspect_ratio': bounds [%g, %g] are not 0 < min <= "
                               "max", name, g->min_ratio, g->max_ratio);
    }
    g->rand_mirror = p->rand_mirror;
    g->mirror = p->mirror;
    g->mean[0] = (float)p->mean_r;
    g->mean[1] = (float)p->mean_g;
    g->mean[2] = (float)p->mean_b;
    g->std[0] = (float)p->std_r;
    g->std[1] = (float)p->std_g;
    g->std[2] = (float)p->std_b;
    g->scale = (float)p->scale;
    g->inter = (int)p->inter_method;
    g->out_u8 = out_u8;
    int nt = (int)(p->preprocess_threads < 1 ? 1 : p->preprocess_threads > 64 ? 64 : p->preprocess_threads);
    it->workers = calloc((size_t)nt, sizeof *it->workers);
    if (!it->workers) {
        img_iter_free(it);
        return io_image_report(host, MXP_ENOMEM, "%s: out of memory for decode workers", name);
    }
    for (int i = 0; i < nt; i++) {
        it->n_workers = i + 1;
        if (aug_worker_init(&it->workers[i], g)) {
            img_iter_free(it);
            return io_image_report(host, MXP_ENOMEM, "%s: out of memory for decode worker %d", name, i);
        }
    }
    *out = it;
    return MXP_OK;
}

int img_iter_workers(const img_iter *it) { return it->n_workers; }

static void make_order(img_iter *it, uint64_t epoch) {
    for (uint64_t i = 0; i < it->src.n; i++) it->order[i] = i;
    uint64_t s = aug_seed(it->seed, epoch, UINT64_MAX);
    for (uint64_t i = it->src.n; i > 1; i--) {
        uint64_t j = (uint64_t)(aug_uniform(&s) * (double)i);
        uint64_t t = it->order[i - 1];
        it->order[i - 1] = it->order[j];
        it->order[j] = t;
    }
}

void img_iter_attach(img_iter *it, const img_source *src, const img_iter_params *p, const char *what) {
    it->src = *src;
    if (p->verbose && it->host && it->host->log)
        it->host->log(MXP_LOG_INFO, "io-image", "%s: %" PRIu64 " %s (part %" PRId64 "/%" PRId64 "), data_shape=(%d,%d,%d), "
                      "%d decode threads%s", it->name, it->src.n, what, p->part_index, p->num_parts, it->aug.c,
                      it->aug.h, it->aug.w, it->n_workers, it->skip_corrupt ? ", corrupt samples skipped" : "");
}

/* Shuffle order storage is made on the first reset/next (attach cannot fail). */
static int ensure_order(img_iter *it) {
    if (!it->shuffle || it->order) return MXP_OK;
    if (!(it->order = malloc((size_t)it->src.n * sizeof *it->order)))
        return io_image_report(it->host, MXP_ENOMEM, "%s: out of memory for a shuffle order", it->name);
    make_order(it, it->epoch);
    return MXP_OK;
}

/* The epoch summary of skipped samples, once per epoch. */
static void report_epoch(img_iter *it) {
    if (it->epoch_reported || !it->skip_corrupt) return;
    it->epoch_reported = 1;
    if (it->skipped_epoch && it->host && it->host->log)
        it->host->log(MXP_LOG_WARN, "io-image", "%s: epoch %" PRIu64 ": skipped %" PRIu64 " corrupt sample(s) of %" PRIu64
                      " (%" PRIu64 " since creation)", it->name, it->epoch, it->skipped_epoch, it->src.n,
                      it->skipped_total);
}

void img_iter_destroy_cb(mxp_iter_destroy_args *a) {
    if (a) img_iter_free(a->state);
}

int img_iter_provide_cb(mxp_iter_provide_args *a) {
    img_iter *it = a ? a->state : NULL;
    if (!it) return MXP_EINVAL;
    a->n_data = 1;
    a->n_label = 1;
    if (a->capacity < 2 || !a->names || !a->shapes || !a->dtypes)
        return io_image_report(it->host, MXP_EINVAL, "%s provide: room for 2 entries needed", it->name);
    snprintf(a->names[0], 64, "data");
    snprintf(a->names[1], 64, "softmax_label");
    memset(&a->shapes[0], 0, sizeof a->shapes[0]);
    a->shapes[0].ndim = 4;
    a->shapes[0].dims[0] = (int64_t)it->batch;
    a->shapes[0].dims[1] = it->aug.c;
    a->shapes[0].dims[2] = it->aug.h;
    a->shapes[0].dims[3] = it->aug.w;
    memset(&a->shapes[1], 0, sizeof a->shapes[1]);
    a->shapes[1].ndim = it->label_width == 1 ? 1 : 2;
    a->shapes[1].dims[0] = (int64_t)it->batch;
    a->shapes[1].dims[1] = it->label_width;
    a->dtypes[0] = it->out_u8 ? MXP_DTYPE_U8 : MXP_DTYPE_F32;
    a->dtypes[1] = MXP_DTYPE_F32;
    return MXP_OK;
}

int img_iter_reset_cb(mxp_iter_reset_args *a) {
    img_iter *it = a ? a->state : NULL;
    if (!it) return MXP_EINVAL;
    if (it->pos > 0) report_epoch(it); /* an epoch left early still tells what it skipped */
    it->epoch = a->epoch;
    it->pos = 0;
    it->skipped_epoch = 0;
    it->epoch_reported = 0;
    if (it->order) make_order(it, a->epoch);
    return ensure_order(it);
}

/* ------------------------------------------------------------- decoding */
#define MSG_CAP 384

typedef struct round_job {
    img_iter *it;
    uint8_t *data;          /* batch * sample_bytes             */
    float *label;           /* batch * label_width              */
    uint64_t *ids;          /* batch: each slot's sample id     */
    size_t sample_bytes;
    uint64_t first_pos;     /* epoch position of the round's first slot */
    uint64_t first_slot;
    uint64_t count;
    atomic_uint_fast64_t next;
    uint8_t *failed;        /* count flags                       */
    char (*msg)[MSG_CAP];   /* count messages (of failed ones)   */
} round_job;

static uint64_t sample_at(const img_iter *it, uint64_t position) {
    uint64_t k = position % it->src.n;
    return it->order ? it->order[k] : k;
}

/* Decode round entry j with worker t.  Returns 0, or -1 with msg. */
static int decode_one(round_job *job, int t, uint64_t j, char *msg, size_t cap) {
    img_iter *it = job->it;
    uint64_t r = sample_at(it, job->first_pos + j), slot = job->first_slot + j, id = r;
    const uint8_t *img;
    size_t len;
    char err[256];
    if (it->src.load(it->src.state, t, r, &img, &len, job->label + slot * it->label_width, it->label_width, &id, msg,
                     cap))
        return -1;
    job->ids[slot] = id;
    uint64_t rng = aug_seed(it->seed, it->epoch, r);
    if (aug_apply(&it->workers[t], &it->aug, img, len, &rng, job->data + slot * job->sample_bytes, err, sizeof err)) {
        char where[256];
        it->src.describe(it->src.state, r, id, where, sizeof where);
        snprintf(msg, cap, "%s: %s", where, err);
        return -1;
    }
    return 0;
}

static void decode_range(void *arg, int64_t begin, int64_t end) {
    round_job *job = arg;
    for (int64_t t = begin; t < end; t++)
        for (;;) {
            uint64_t j = atomic_fetch_add(&job->next, 1);
            if (j >= job->count) break;
            job->failed[j] = decode_one(job, (int)t, j, job->msg[j], MSG_CAP) != 0;
        }
}

static int check_tensor(const img_iter *it, const mxp_tensor *t, const char *what, int dtype, int64_t elems) {
    int64_t n = 1;
    for (int32_t d = 0; d < t->ndim; d++) n *= t->shape[d];
    if (n != elems || t->dtype != dtype || !t->data || !mxp_tensor_is_contiguous(t))
        return io_image_report(it->host, MXP_ESHAPE, "%s next: '%s' tensor is not the dense %s array provide reported",
                               it->name, what, dtype == MXP_DTYPE_U8 ? "uint8" : "float32");
    if (t->device.type != MXP_DEV_CPU && t->device.type != MXP_DEV_CPU_PINNED && t->device.type != MXP_DEV_CPU_SHARED)
        return io_image_report(it->host, MXP_EDEVICE, "%s next: '%s' tensor must be in host memory", it->name, what);
    return MXP_OK;
}

/* Run one round; squeeze failed slots out when skipping.  *good: how many
 * slots of the round hold a sample afterwards (from first_slot on), *pad:
 * how many of those came from positions past the epoch's end. */
static int run_round(img_iter *it, round_job *job, uint64_t *good, uint64_t *pad) {
    int nt = it->n_workers;
    if ((uint64_t)nt > job->count) nt = (int)job->count;
    atomic_store(&job->next, 0);
    int rc = MXP_OK;
    if (nt > 1 && it->host && it->host->parallel_for) rc = it->host->parallel_for(nt, 1, decode_range, job);
    else decode_range(job, 0, 1);
    if (rc != MXP_OK) return rc;
    uint64_t g = 0, p = 0;
    for (uint64_t j = 0; j < job->count; j++) {
        if (job->failed[j]) {
            if (!it->skip_corrupt)
                return io_image_report(it->host, MXP_EFORMAT, "%s: %s (skip_corrupt=True skips such samples)",
                                       it->name, job->msg[j]);
            /* A position past the epoch's end repeats a sample counted already. */
            int first_visit = job->first_pos + j < it->src.n;
            it->skipped_epoch += (uint64_t)first_visit;
            it->skipped_total += (uint64_t)first_visit;
            mxp_stat_add(io_image_pack_state.skipped_corrupt, (uint64_t)first_visit);
            if (first_visit && it->skipped_epoch <= SKIP_WARNINGS_PER_EPOCH && it->host && it->host->log)
                it->host->log(MXP_LOG_WARN, "io-image", "%s: skipping %s%s", it->name, job->msg[j],
                              it->skipped_epoch == SKIP_WARNINGS_PER_EPOCH ? " (further ones this epoch are only counted)"
                                                                          : "");
            continue;
        }
        uint64_t from = job->first_slot + j, to = job->first_slot + g;
        if (from != to) {
            memmove(job->data + to * job->sample_bytes, job->data + from * job->sample_bytes, job->sample_bytes);
            memmove(job->label + to * it->label_width, job->label + from * it->label_width,
                    it->label_width * sizeof(float));
            job->ids[to] = job->ids[from];
        }
        g++;
        if (job->first_pos + j >= it->src.n) p++;
    }
    *good = g;
    *pad = p;
    return MXP_OK;
}

int img_iter_next_cb(mxp_iter_next_args *a) {
    img_iter *it = a ? a->state : NULL;
    if (!it) return MXP_EINVAL;
    a->has_batch = 0;
    a->pad = 0;
    if (a->n_data < 1 || a->n_label < 1 || !a->data || !a->label)
        return io_image_report(it->host, MXP_EINVAL, "%s next: needs 1 data and 1 label tensor", it->name);
    const mxp_tensor *data = MXP_ARRAY_AT(mxp_tensor, a->data, 0);
    const mxp_tensor *label = MXP_ARRAY_AT(mxp_tensor, a->label, 0);
    size_t sample = (size_t)it->aug.c * (size_t)it->aug.h * (size_t)it->aug.w;
    int rc = check_tensor(it, data, "data", it->out_u8 ? MXP_DTYPE_U8 : MXP_DTYPE_F32, (int64_t)(it->batch * sample));
    if (rc == MXP_OK) rc = check_tensor(it, label, "softmax_label", MXP_DTYPE_F32, (int64_t)(it->batch * it->label_width));
    if (rc == MXP_OK) rc = ensure_order(it);
    if (rc != MXP_OK) return rc;
    uint64_t n = it->src.n;
    if (it->pos >= n) {
        report_epoch(it);
        return MXP_OK;
    }
    round_job job;
    memset(&job, 0, sizeof job);
    job.it = it;
    job.data = mxp_tensor_ptr(data);
    job.label = mxp_tensor_ptr(label);
    job.sample_bytes = sample * (it->out_u8 ? 1 : sizeof(float));
    job.failed = calloc((size_t)it->batch, 1);
    job.msg = malloc((size_t)it->batch * sizeof *job.msg);
    job.ids = malloc((size_t)it->batch * sizeof *job.ids);
    if (!job.failed || !job.msg || !job.ids) {
        rc = io_image_report(it->host, MXP_ENOMEM, "%s next: out of memory", it->name);
        goto out;
    }
    uint64_t filled = 0, pad = 0, cursor = it->pos;
    while (filled < it->batch) {
        uint64_t need = it->batch - filled;
        if (it->discard_last) {
            if (cursor >= n) break;
            if (need > n - cursor) need = n - cursor;
        } else if (cursor >= 2 * n + it->batch) {
            /* More than an epoch wrapped over without filling: all bad. */
            rc = io_image_report(it->host, MXP_EFORMAT, "%s: no sample of the %" PRIu64 " decodes (all skipped as corrupt)",
                                 it->name, n);
            goto out;
        }
        job.first_pos = cursor;
        job.first_slot = filled;
        job.count = need;
        uint64_t good = 0, p = 0;
        rc = run_round(it, &job, &good, &p);
        if (rc != MXP_OK) goto out;
        filled += good;
        pad += p;
        cursor += need;
    }
    it->pos = cursor;
    if (filled < it->batch || pad == filled) {
        /* discard: a short last batch; pad: every real sample left was skipped. */
        it->pos = n;
        report_epoch(it);
        goto out;
    }
    if (MXP_HAS_FIELD(a, mxp_iter_next_args, index_capacity) && a->index && a->index_capacity >= it->batch)
        memcpy(a->index, job.ids, (size_t)it->batch * sizeof *job.ids);
    a->pad = (int32_t)pad;
    a->has_batch = 1;
out:
    free(job.failed);
    free(job.msg);
    free(job.ids);
    return rc;
}
