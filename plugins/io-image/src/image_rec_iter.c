/* image_rec_iter.c — ImageRecordIter and ImageRecordUInt8Iter: MXNet's
 * image iterators over RecordIO files (src/io/iter_image_recordio_2.cc)
 * through the iterator ABI (mxp/iter.h), with MXNet's parameter names and
 * defaults.
 *
 * create maps the `.rec` file read-only and lists its records' offsets
 * (from `path_imgidx` when given, else by walking the chunks), keeps this
 * worker's shard (num_parts/part_index: a contiguous slice of records, as
 * MNISTIter), and sets up one decode worker per preprocess_thread.
 * next fills one batch straight into the host's tensors: the
 * batch's positions are handed out from an atomic counter to the workers
 * running under host->parallel_for (at most preprocess_threads at once,
 * fewer when the runtime's thread budget is busy); each decodes its
 * record (image_aug.c) into its slot of the batch.  Every random choice of
 * a sample comes from (seed, epoch, record), and each position's record is
 * fixed by the epoch's order, so a batch's bytes do not depend on how many
 * threads decoded it or which one did what.
 *
 * Where it departs from MXNet, on purpose:
 *   - shuffle permutes records (not 64 MB chunks), a fresh permutation per
 *     epoch drawn from (seed, epoch), with or without an index;
 *   - a short last batch is always completed by wrapping to the start of
 *     the epoch's order and reported as `pad` (round_batch=True, MXNet's
 *     default; round_batch=False gives the same batch, as our host needs
 *     full batches);
 *   - max_rotate_angle, max_shear_ratio, colour jitter, pca_noise and
 *     mean_img are refused when set (not implemented), inter_method 2
 *     (bicubic) and 4 (lanczos) too, path_imglist as well.
 * A record that fails to decode is an error naming its id, the byte offset
 * and the file (the first failing position of the batch, deterministically).
 * Not thread-safe: the host calls next from one thread at a time. */
#include "image_aug.h"
#include "io_image.h"
#include "recordio_core.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct rec_params {
    const char *path_imgrec, *path_imgidx, *path_imglist;
    mxp_param_shape data_shape;
    int64_t batch_size, label_width;
    int32_t shuffle;
    int64_t seed;
    int64_t num_parts, part_index;
    int32_t round_batch;
    int64_t preprocess_threads;
    int64_t resize;
    int32_t rand_crop, random_resized_crop;
    double min_random_area, max_random_area;
    mxp_param_opt_float min_aspect_ratio;
    double max_aspect_ratio;
    double max_rotate_angle, max_shear_ratio;
    double brightness, contrast, saturation, pca_noise;
    int32_t rand_mirror, mirror;
    double mean_r, mean_g, mean_b, std_r, std_g, std_b, scale;
    const char *mean_img;
    int64_t inter_method;
    int32_t verbose;
} rec_params;

typedef struct rec_iter {
    const mxp_host *host;
    const char *name;
    char path[512];
    aug_params aug;
    int out_u8;
    uint64_t batch;
    uint32_t label_width;
    int shuffle;
    uint64_t seed;
    const uint8_t *map;
    uint64_t size;
    uint64_t *offsets;      /* the shard's records, in file order */
    uint64_t n;
    uint64_t *order;        /* n, when shuffling                  */
    uint64_t pos, epoch;
    int n_workers;
    aug_worker *workers;
    mxp__rec_scratch *scratch; /* per worker                      */
} rec_iter;

static void rec_free(rec_iter *it) {
    if (!it) return;
    if (it->map && it->size) munmap((void *)it->map, (size_t)it->size);
    for (int i = 0; it->workers && i < it->n_workers; i++) aug_worker_fini(&it->workers[i]);
    for (int i = 0; it->scratch && i < it->n_workers; i++) mxp__rec_scratch_free(&it->scratch[i]);
    free(it->workers);
    free(it->scratch);
    free(it->offsets);
    free(it->order);
    free(it);
}

static void make_order(rec_iter *it, uint64_t epoch) {
    for (uint64_t i = 0; i < it->n; i++) it->order[i] = i;
    uint64_t s = aug_seed(it->seed, epoch, UINT64_MAX);
    for (uint64_t i = it->n; i > 1; i--) {
        uint64_t j = (uint64_t)(aug_uniform(&s) * (double)i);
        uint64_t t = it->order[i - 1];
        it->order[i - 1] = it->order[j];
        it->order[j] = t;
    }
}

/* All record offsets by walking the file's chunks. */
static int scan_records(rec_iter *it, uint64_t **out, uint64_t *out_n) {
    uint64_t cap = 1024, n = 0;
    uint64_t *offs = malloc(cap * sizeof *offs);
    mxp__rec_scratch s = {0};
    if (!offs) return io_image_report(it->host, MXP_ENOMEM, "%s: out of memory listing records", it->name);
    uint64_t off = 0;
    while (off < it->size) {
        const uint8_t *d;
        uint64_t len, next;
        char err[256];
        int rc = mxp__rec_parse(it->map, it->size, off, &s, &d, &len, &next, err, sizeof err);
        if (rc != MXP_OK) {
            free(offs);
            mxp__rec_scratch_free(&s);
            return io_image_report(it->host, rc, "%s '%s': record %" PRIu64 ": %s", it->name, it->path, n, err);
        }
        if (n == cap) {
            uint64_t *o = realloc(offs, 2 * cap * sizeof *offs);
            if (!o) {
                free(offs);
                mxp__rec_scratch_free(&s);
                return io_image_report(it->host, MXP_ENOMEM, "%s: out of memory listing records", it->name);
            }
            offs = o;
            cap *= 2;
        }
        offs[n++] = off;
        off = next;
    }
    mxp__rec_scratch_free(&s);
    *out = offs;
    *out_n = n;
    return MXP_OK;
}

static int load_index(rec_iter *it, const char *idx, uint64_t **out, uint64_t *out_n) {
    int fd = open(idx, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        return io_image_report(it->host, MXP_EIO, "%s 'path_imgidx': '%s' is not a regular file", it->name, idx);
    }
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) close(fd);
        return io_image_report(it->host, MXP_EIO, "%s 'path_imgidx': cannot open '%s': %s", it->name, idx, strerror(e));
    }
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    size_t got;
    while (text && (got = fread(text + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            char *t = realloc(text, cap * 2);
            if (!t) {
                free(text);
                text = NULL;
                break;
            }
            text = t;
            cap *= 2;
        }
    }
    fclose(f);
    if (!text) return io_image_report(it->host, MXP_ENOMEM, "%s: out of memory reading '%s'", it->name, idx);
    uint64_t *keys = NULL;
    char err[256];
    int rc = mxp__rec_idx_parse(text, len, it->size, &keys, out, out_n, err, sizeof err);
    free(text);
    free(keys);
    if (rc != MXP_OK) return io_image_report(it->host, rc, "%s 'path_imgidx' '%s' (for '%s'): %s", it->name, idx, it->path, err);
    return MXP_OK;
}

static int check_params(const mxp_host *host, const char *name, const rec_params *p) {
    if (!p->path_imgrec || !*p->path_imgrec) return io_image_report(host, MXP_EINVAL, "%s 'path_imgrec': required", name);
    if (p->path_imglist && *p->path_imglist)
        return io_image_report(host, MXP_EUNSUPPORTED, "%s 'path_imglist': overriding labels from a .lst is not supported", name);
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

static int rec_create_common(mxp_iter_create_args *a, const char *name, int out_u8) {
    io_image_pack *pk = a ? (io_image_pack *)a->user_data : NULL;
    const mxp_host *host = pk ? pk->host : NULL;
    if (!a || !a->params) return io_image_report(host, MXP_EINVAL, "%s: create without parameters", name);
    a->state = NULL;
    const rec_params *p = a->params;
    int rc = check_params(host, name, p);
    if (rc != MXP_OK) return rc;
    rec_iter *it = calloc(1, sizeof *it);
    if (!it) return io_image_report(host, MXP_ENOMEM, "%s: out of memory", name);
    it->host = host;
    it->name = name;
    it->out_u8 = out_u8;
    snprintf(it->path, sizeof it->path, "%s", p->path_imgrec);
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
        rec_free(it);
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
    if (g->c == 1) {
        g->mean[0] = (float)p->mean_r;
        g->std[0] = (float)p->std_r;
    }
    g->scale = (float)p->scale;
    g->inter = (int)p->inter_method;
    g->out_u8 = out_u8;

    int fd = open(it->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (fd < 0) {
        int e = errno;
        rec_free(it);
        return io_image_report(host, MXP_EIO, "%s 'path_imgrec': cannot open '%s': %s", name, p->path_imgrec, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
        close(fd);
        rec_free(it);
        return io_image_report(host, MXP_EFORMAT, "%s 'path_imgrec': '%s' is not a non-empty regular file", name,
                      p->path_imgrec);
    }
    it->size = (uint64_t)st.st_size;
    void *m = mmap(NULL, (size_t)it->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        it->size = 0;
        rec_free(it);
        return io_image_report(host, MXP_EIO, "%s 'path_imgrec': cannot map '%s'", name, p->path_imgrec);
    }
    it->map = m;
    uint64_t *all = NULL, count = 0;
    rc = p->path_imgidx && *p->path_imgidx ? load_index(it, p->path_imgidx, &all, &count) : scan_records(it, &all, &count);
    if (rc != MXP_OK) {
        rec_free(it);
        return rc;
    }
    double per = (double)count / (double)p->num_parts;
    uint64_t s0 = (uint64_t)(per * (double)p->part_index), s1 = (uint64_t)(per * (double)(p->part_index + 1));
    if (s1 > count) s1 = count;
    if (s0 > s1) s0 = s1;
    it->n = s1 - s0;
    if (it->n == 0) {
        free(all);
        rec_free(it);
        return io_image_report(host, MXP_EINVAL, "%s: part %" PRId64 " of %" PRId64 " of '%s' holds no record (%" PRIu64
                      " in the file)", name, p->part_index, p->num_parts, p->path_imgrec, count);
    }
    memmove(all, all + s0, (size_t)it->n * sizeof *all);
    it->offsets = all;
    if (it->shuffle && !(it->order = malloc((size_t)it->n * sizeof *it->order))) {
        rec_free(it);
        return io_image_report(host, MXP_ENOMEM, "%s: out of memory for a shuffle order", name);
    }
    if (it->order) make_order(it, 0);
    int nt = (int)(p->preprocess_threads < 1 ? 1 : p->preprocess_threads > 64 ? 64 : p->preprocess_threads);
    it->workers = calloc((size_t)nt, sizeof *it->workers);
    it->scratch = calloc((size_t)nt, sizeof *it->scratch);
    if (!it->workers || !it->scratch) {
        rec_free(it);
        return io_image_report(host, MXP_ENOMEM, "%s: out of memory for decode workers", name);
    }
    for (int i = 0; i < nt; i++) {
        it->n_workers = i + 1;
        if (aug_worker_init(&it->workers[i], g)) {
            rec_free(it);
            return io_image_report(host, MXP_ENOMEM, "%s: out of memory for decode worker %d", name, i);
        }
    }
    if (p->verbose && host && host->log)
        host->log(MXP_LOG_INFO, "io-image", "%s: %" PRIu64 " records from '%s' (part %" PRId64 "/%" PRId64
                  "), data_shape=(%d,%d,%d), %d decode threads", name, it->n, it->path, p->part_index, p->num_parts,
                  g->c, g->h, g->w, nt);
    a->state = it;
    return MXP_OK;
}

static int rec_create_f32(mxp_iter_create_args *a) { return rec_create_common(a, "ImageRecordIter", 0); }
static int rec_create_u8(mxp_iter_create_args *a) { return rec_create_common(a, "ImageRecordUInt8Iter", 1); }

static void rec_destroy(mxp_iter_destroy_args *a) {
    if (a) rec_free(a->state);
}

static int rec_provide(mxp_iter_provide_args *a) {
    rec_iter *it = a ? a->state : NULL;
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

static int rec_reset(mxp_iter_reset_args *a) {
    rec_iter *it = a ? a->state : NULL;
    if (!it) return MXP_EINVAL;
    it->epoch = a->epoch;
    if (it->order) make_order(it, a->epoch);
    it->pos = 0;
    return MXP_OK;
}

/* ------------------------------------------------------------- decoding */
typedef struct batch_job {
    rec_iter *it;
    uint8_t *data;          /* batch * sample_bytes */
    float *label;
    uint64_t *index;
    size_t sample_bytes;
    atomic_uint_fast64_t next;
    atomic_uint_fast64_t first_fail; /* smallest failing position       */
    char (*err)[384];       /* per worker: its first failure's message   */
    uint64_t *err_pos;      /* per worker: that failure's position       */
} batch_job;

static uint64_t record_of(const rec_iter *it, uint64_t k) {
    if (k >= it->n) k %= it->n;
    return it->order ? it->order[k] : k;
}

/* Decode batch position j with worker t.  Returns 0, or -1 with msg. */
static int decode_one(batch_job *job, int t, uint64_t j, char *msg, size_t cap) {
    rec_iter *it = job->it;
    uint64_t r = record_of(it, it->pos + j);
    uint64_t off = it->offsets[r];
    const uint8_t *d;
    uint64_t len, next;
    char err[256];
    if (mxp__rec_parse(it->map, it->size, off, &it->scratch[t], &d, &len, &next, err, sizeof err) != MXP_OK) {
        snprintf(msg, cap, "record %" PRIu64 " of the shard: %s", r, err);
        return -1;
    }
    mxp__rec_image_header h;
    const uint8_t *labels, *img;
    uint64_t img_len;
    if (mxp__rec_image_split(d, len, &h, &labels, &img, &img_len) != MXP_OK) {
        snprintf(msg, cap, "record at byte offset %" PRIu64 ": %" PRIu64 " bytes is too short for its image header",
                 off, len);
        return -1;
    }
    float *lab = job->label + j * it->label_width;
    if (h.flag == 0) {
        if (it->label_width != 1) {
            snprintf(msg, cap, "record id %" PRIu64 " at byte offset %" PRIu64 " has 1 label, label_width is %u", h.id,
                     off, it->label_width);
            return -1;
        }
        lab[0] = h.label;
    } else {
        if (h.flag < it->label_width) {
            snprintf(msg, cap, "record id %" PRIu64 " at byte offset %" PRIu64 " has %u labels, label_width is %u",
                     h.id, off, h.flag, it->label_width);
            return -1;
        }
        for (uint32_t i = 0; i < it->label_width; i++) lab[i] = mxp__rec_label_at(labels, i);
    }
    if (job->index) job->index[j] = h.id;
    uint64_t rng = aug_seed(it->seed, it->epoch, r);
    if (aug_apply(&it->workers[t], &it->aug, img, (size_t)img_len, &rng, job->data + j * job->sample_bytes, err,
                  sizeof err)) {
        snprintf(msg, cap, "record id %" PRIu64 " at byte offset %" PRIu64 ": %s", h.id, off, err);
        return -1;
    }
    return 0;
}

static void decode_range(void *arg, int64_t begin, int64_t end) {
    batch_job *job = arg;
    for (int64_t t = begin; t < end; t++) {
        int slot = (int)t;
        for (;;) {
            uint64_t j = atomic_fetch_add(&job->next, 1);
            if (j >= job->it->batch) break;
            char msg[384];
            if (decode_one(job, (int)t, j, msg, sizeof msg)) {
                /* Keep the failure with the smallest position (deterministic report). */
                uint64_t cur = atomic_load(&job->first_fail);
                while (j < cur && !atomic_compare_exchange_weak(&job->first_fail, &cur, j)) {
                }
                if (job->err_pos[slot] == UINT64_MAX || j < job->err_pos[slot]) {
                    job->err_pos[slot] = j;
                    snprintf(job->err[slot], sizeof job->err[slot], "%s", msg);
                }
            }
        }
    }
}

static int check_tensor(const rec_iter *it, const mxp_tensor *t, const char *what, int dtype, int64_t elems) {
    int64_t n = 1;
    for (int32_t d = 0; d < t->ndim; d++) n *= t->shape[d];
    if (n != elems || t->dtype != dtype || !t->data || !mxp_tensor_is_contiguous(t))
        return io_image_report(it->host, MXP_ESHAPE, "%s next: '%s' tensor is not the dense %s array provide reported", it->name,
                      what, dtype == MXP_DTYPE_U8 ? "uint8" : "float32");
    if (t->device.type != MXP_DEV_CPU && t->device.type != MXP_DEV_CPU_PINNED && t->device.type != MXP_DEV_CPU_SHARED)
        return io_image_report(it->host, MXP_EDEVICE, "%s next: '%s' tensor must be in host memory", it->name, what);
    return MXP_OK;
}

static int rec_next(mxp_iter_next_args *a) {
    rec_iter *it = a ? a->state : NULL;
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
    if (rc != MXP_OK) return rc;
    if (it->pos >= it->n) return MXP_OK;
    int nt = it->n_workers;
    if ((uint64_t)nt > it->batch) nt = (int)it->batch;
    batch_job *job = calloc(1, sizeof *job);
    if (job) job->err = calloc((size_t)nt, sizeof *job->err);
    if (job) job->err_pos = calloc((size_t)nt, sizeof *job->err_pos);
    if (!job || !job->err || !job->err_pos) {
        if (job) free(job->err);
        free(job);
        return io_image_report(it->host, MXP_ENOMEM, "%s next: out of memory", it->name);
    }
    job->it = it;
    job->data = mxp_tensor_ptr(data);
    job->label = mxp_tensor_ptr(label);
    job->sample_bytes = sample * (it->out_u8 ? 1 : sizeof(float));
    if (MXP_HAS_FIELD(a, mxp_iter_next_args, index_capacity) && a->index && a->index_capacity >= it->batch)
        job->index = a->index;
    atomic_init(&job->next, 0);
    atomic_init(&job->first_fail, UINT64_MAX);
    for (int i = 0; i < nt; i++) job->err_pos[i] = UINT64_MAX;
    if (nt > 1 && it->host && it->host->parallel_for) rc = it->host->parallel_for(nt, 1, decode_range, job);
    else decode_range(job, 0, 1);
    if (rc == MXP_OK && atomic_load(&job->first_fail) != UINT64_MAX) {
        uint64_t f = atomic_load(&job->first_fail);
        const char *msg = "decode failed";
        for (int i = 0; i < nt; i++)
            if (job->err_pos[i] == f) msg = job->err[i];
        rc = io_image_report(it->host, MXP_EFORMAT, "%s '%s': %s", it->name, it->path, msg);
    }
    free(job->err);
    free(job->err_pos);
    free(job);
    if (rc != MXP_OK) return rc;
    uint64_t left = it->n - it->pos;
    a->pad = left < it->batch ? (int32_t)(it->batch - left) : 0;
    it->pos += it->batch;
    a->has_batch = 1;
    return MXP_OK;
}

/* --------------------------------------------------------------- schema */
#define P(NAME, TYPE, FLAGS, FIELD, DEF, MIN, MAX, DOC) \
    MXP_PARAM(NAME, TYPE, FLAGS, rec_params, FIELD, DEF, MIN, MAX, NULL, DOC)
static const mxp_param_def rec_param_defs[] = {
    P("path_imgrec", MXP_PARAM_STRING, 0, path_imgrec, "", 0, 0, "Dataset Param: Path to image record file."),
    P("path_imgidx", MXP_PARAM_STRING, 0, path_imgidx, "", 0, 0,
      "Dataset Param: Path to the .idx index of the record file (optional; without it the file is scanned)."),
    P("path_imglist", MXP_PARAM_STRING, 0, path_imglist, "", 0, 0,
      "Dataset Param: Path to an image list overriding labels (not supported; must be empty)."),
    P("data_shape", MXP_PARAM_SHAPE, MXP_PARAM_REQUIRED, data_shape, NULL, 0, 0,
      "Dataset Param: Shape of each instance generated by the DataIter, (c, h, w)."),
    P("batch_size", MXP_PARAM_INT, MXP_PARAM_REQUIRED | MXP_PARAM_HAS_MIN, batch_size, NULL, 1, 0,
      "Batch Param: Batch size."),
    P("label_width", MXP_PARAM_INT, MXP_PARAM_HAS_MIN | MXP_PARAM_HAS_MAX, label_width, "1", 1, 4096,
      "Dataset Param: How many labels for an image."),
    P("shuffle", MXP_PARAM_BOOL, 0, shuffle, "False", 0, 0,
      "Augmentation Param: Whether to shuffle data (records, a new order each epoch from seed and epoch)."),
    P("seed", MXP_PARAM_INT, 0, seed, "0", 0, 0, "Augmentation Param: Random Seed."),
    P("num_parts", MXP_PARAM_INT, MXP_PARAM_HAS_MIN, num_parts, "1", 1, 0, "partition the data into multiple parts"),
    P("part_index", MXP_PARAM_INT, MXP_PARAM_HAS_MIN, part_index, "0", 0, 0, "the index of the part will read"),
    P("round_batch", MXP_PARAM_BOOL, 0, round_batch, "True", 0, 0,
      "Batch Param: a short last batch is completed from the start of the epoch and reported as pad."),
    P("preprocess_threads", MXP_PARAM_INT, MXP_PARAM_HAS_MIN | MXP_PARAM_HAS_MAX, preprocess_threads, "4", 1, 64,
      "Backend Param: Number of threads for data decoding (at most; the runtime's thread budget may give fewer)."),
    P("resize", MXP_PARAM_INT, 0, resize, "-1", 0, 0, "Augmentation Param: scale the shorter edge to this size first."),
    P("rand_crop", MXP_PARAM_BOOL, 0, rand_crop, "False", 0, 0, "Augmentation Param: Whether to random crop."),
    P("random_resized_crop", MXP_PARAM_BOOL, 0, random_resized_crop, "False", 0, 0,
      "Augmentation Param: random area and aspect ratio crop resized to data_shape."),
    P("min_random_area", MXP_PARAM_FLOAT, 0, min_random_area, "1", 0, 0,
      "Augmentation Param: minimum area fraction of the random_resized_crop box."),
    P("max_random_area", MXP_PARAM_FLOAT, 0, max_random_area, "1", 0, 0,
      "Augmentation Param: maximum area fraction of the random_resized_crop box."),
    P("min_aspect_ratio", MXP_PARAM_OPT_FLOAT, 0, min_aspect_ratio, "None", 0, 0,
      "Augmentation Param: aspect ratio (w/h) lower bound; None: 1 - max_aspect_ratio."),
    P("max_aspect_ratio", MXP_PARAM_FLOAT, 0, max_aspect_ratio, "0", 0, 0,
      "Augmentation Param: aspect ratio upper bound (with min_aspect_ratio) or spread around 1."),
    P("max_rotate_angle", MXP_PARAM_FLOAT, 0, max_rotate_angle, "0", 0, 0, "Augmentation Param: refused unless 0."),
    P("max_shear_ratio", MXP_PARAM_FLOAT, 0, max_shear_ratio, "0", 0, 0, "Augmentation Param: refused unless 0."),
    P("brightness", MXP_PARAM_FLOAT, 0, brightness, "0", 0, 0, "Augmentation Param: refused unless 0."),
    P("contrast", MXP_PARAM_FLOAT, 0, contrast, "0", 0, 0, "Augmentation Param: refused unless 0."),
    P("saturation", MXP_PARAM_FLOAT, 0, saturation, "0", 0, 0, "Augmentation Param: refused unless 0."),
    P("pca_noise", MXP_PARAM_FLOAT, 0, pca_noise, "0", 0, 0, "Augmentation Param: refused unless 0."),
    P("rand_mirror", MXP_PARAM_BOOL, 0, rand_mirror, "False", 0, 0,
      "Augmentation Param: Whether to randomly mirror images (probability 1/2)."),
    P("mirror", MXP_PARAM_BOOL, 0, mirror, "False", 0, 0, "Augmentation Param: Whether to mirror every image."),
    P("mean_r", MXP_PARAM_FLOAT, 0, mean_r, "0", 0, 0, "Augmentation Param: mean value on R channel."),
    P("mean_g", MXP_PARAM_FLOAT, 0, mean_g, "0", 0, 0, "Augmentation Param: mean value on G channel."),
    P("mean_b", MXP_PARAM_FLOAT, 0, mean_b, "0", 0, 0, "Augmentation Param: mean value on B channel."),
    P("std_r", MXP_PARAM_FLOAT, 0, std_r, "1", 0, 0, "Augmentation Param: std value on R channel."),
    P("std_g", MXP_PARAM_FLOAT, 0, std_g, "1", 0, 0, "Augmentation Param: std value on G channel."),
    P("std_b", MXP_PARAM_FLOAT, 0, std_b, "1", 0, 0, "Augmentation Param: std value on B channel."),
    P("scale", MXP_PARAM_FLOAT, 0, scale, "1", 0, 0, "Augmentation Param: multiply the (mean-subtracted) image."),
    P("mean_img", MXP_PARAM_STRING, 0, mean_img, "", 0, 0, "Augmentation Param: mean image (not supported)."),
    P("inter_method", MXP_PARAM_INT, MXP_PARAM_HAS_MIN | MXP_PARAM_HAS_MAX, inter_method, "1", 0, 10,
      "Augmentation Param: 0 nearest, 1 bilinear, 3 area (2 bicubic and 4 lanczos are refused)."),
    P("verbose", MXP_PARAM_BOOL, 0, verbose, "True", 0, 0, "Auxiliary Param: Whether to output parser information."),
};

const mxp_iter_def io_image_rec_iter_def = {
    .hdr = MXP_HEADER(mxp_iter_def),
    .name = "ImageRecordIter",
    .doc = "Iterates on image RecordIO files (im2rec): JPEG/PNG decoded and augmented by decode threads, float32 NCHW.",
    .params = rec_param_defs,
    .n_params = (uint32_t)(sizeof rec_param_defs / sizeof rec_param_defs[0]),
    .params_size = (uint32_t)sizeof(rec_params),
    .create = rec_create_f32,
    .destroy = rec_destroy,
    .provide = rec_provide,
    .reset = rec_reset,
    .next = rec_next,
    .user_data = &io_image_pack_state,
};

const mxp_iter_def io_image_rec_u8_iter_def = {
    .hdr = MXP_HEADER(mxp_iter_def),
    .name = "ImageRecordUInt8Iter",
    .doc = "ImageRecordIter producing uint8 NCHW pixels (no mean/std/scale).",
    .params = rec_param_defs,
    .n_params = (uint32_t)(sizeof rec_param_defs / sizeof rec_param_defs[0]),
    .params_size = (uint32_t)sizeof(rec_params),
    .create = rec_create_u8,
    .destroy = rec_destroy,
    .provide = rec_provide,
    .reset = rec_reset,
    .next = rec_next,
    .user_data = &io_image_pack_state,
};
