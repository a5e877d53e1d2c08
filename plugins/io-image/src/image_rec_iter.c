/* image_rec_iter.c — ImageRecordIter and ImageRecordUInt8Iter: MXNet's
 * image iterators over RecordIO files (src/io/iter_image_recordio_2.cc)
 * through the iterator ABI (mxp/iter.h), with MXNet's parameter names and
 * defaults.  This file is the record *source* of the shared batch engine
 * (image_iter.c: order, decode workers, augmenters, corrupt samples).
 *
 * create maps the `.rec` file read-only and lists its records' offsets
 * (from `path_imgidx` when given, else by walking the chunks) and keeps
 * this worker's shard (num_parts/part_index: a contiguous slice of
 * records, as MNISTIter).  A sample is a record: its IRHeader gives the
 * labels (flag 0: the one float label; flag > 0: flag floats, the first
 * label_width of them) and the id, the rest is the encoded image.
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
 *     (bicubic) and 4 (lanczos) too, and path_imglist (labels from a .lst:
 *     ImageIter reads a .lst of loose image files);
 *   - skip_corrupt (ours): a record that fails to parse or decode is
 *     skipped and counted instead of being an error naming its id, byte
 *     offset and file.
 * Not thread-safe: the host calls next from one thread at a time. */
#include "image_iter.h"
#include "recordio_core.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct rec_source {
    const mxp_host *host;
    const char *name;
    char path[512];
    const uint8_t *map;
    uint64_t size;
    uint64_t *offsets;         /* the shard's records, in file order */
    int n_workers;
    mxp__rec_scratch *scratch; /* per worker                          */
} rec_source;

static void rec_source_free(void *state) {
    rec_source *it = state;
    if (!it) return;
    if (it->map && it->size) munmap((void *)it->map, (size_t)it->size);
    for (int i = 0; it->scratch && i < it->n_workers; i++) mxp__rec_scratch_free(&it->scratch[i]);
    free(it->scratch);
    free(it->offsets);
    free(it);
}

/* All record offsets by walking the file's chunks. */
static int scan_records(rec_source *it, uint64_t **out, uint64_t *out_n) {
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

static int load_index(rec_source *it, const char *idx, uint64_t **out, uint64_t *out_n) {
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

static void rec_describe(void *state, uint64_t r, uint64_t id, char *out, size_t cap) {
    const rec_source *it = state;
    snprintf(out, cap, "record id %" PRIu64 " at byte offset %" PRIu64 " of '%s'", id, it->offsets[r], it->path);
}

static int rec_load(void *state, int worker, uint64_t r, const uint8_t **img, size_t *img_n, float *lab,
                    uint32_t label_width, uint64_t *id, char *msg, size_t cap) {
    rec_source *it = state;
    uint64_t off = it->offsets[r];
    const uint8_t *d;
    uint64_t len, next;
    char err[256];
    if (mxp__rec_parse(it->map, it->size, off, &it->scratch[worker], &d, &len, &next, err, sizeof err) != MXP_OK) {
        snprintf(msg, cap, "record %" PRIu64 " of the shard at byte offset %" PRIu64 " of '%s': %s", r, off, it->path,
                 err);
        return -1;
    }
    mxp__rec_image_header h;
    const uint8_t *labels, *bytes;
    uint64_t bytes_n;
    if (mxp__rec_image_split(d, len, &h, &labels, &bytes, &bytes_n) != MXP_OK) {
        snprintf(msg, cap, "record at byte offset %" PRIu64 " of '%s': %" PRIu64 " bytes is too short for its image "
                 "header", off, it->path, len);
        return -1;
    }
    *id = h.id;
    if (h.flag == 0) {
        if (label_width != 1) {
            snprintf(msg, cap, "record id %" PRIu64 " at byte offset %" PRIu64 " of '%s' has 1 label, label_width is %u",
                     h.id, off, it->path, label_width);
            return -1;
        }
        lab[0] = h.label;
    } else {
        if (h.flag < label_width) {
            snprintf(msg, cap, "record id %" PRIu64 " at byte offset %" PRIu64 " of '%s' has %u labels, label_width is %u",
                     h.id, off, it->path, h.flag, label_width);
            return -1;
        }
        for (uint32_t i = 0; i < label_width; i++) lab[i] = mxp__rec_label_at(labels, i);
    }
    *img = bytes;
    *img_n = (size_t)bytes_n;
    return 0;
}

static int rec_create_common(mxp_iter_create_args *a, const char *name, int always_u8) {
    int out_u8 = 0;
    io_image_pack *pk = a ? (io_image_pack *)a->user_data : NULL;
    const mxp_host *host = pk ? pk->host : NULL;
    if (!a || !a->params) return io_image_report(host, MXP_EINVAL, "%s: create without parameters", name);
    a->state = NULL;
    const img_iter_params *p = a->params;
    if (!p->path_imgrec || !*p->path_imgrec) return io_image_report(host, MXP_EINVAL, "%s 'path_imgrec': required", name);
    if (p->path_imglist && *p->path_imglist)
        return io_image_report(host, MXP_EUNSUPPORTED, "%s 'path_imglist': overriding labels from a .lst is not supported "
                               "(ImageIter reads a .lst of loose image files)", name);
    int rc = img_iter_check_params(host, name, p);
    if (rc == MXP_OK) rc = img_iter_output_u8(host, name, p, always_u8, &out_u8);
    if (rc != MXP_OK) return rc;
    img_iter *iter;
    rc = img_iter_new(host, name, p, out_u8, 0, &iter);
    if (rc != MXP_OK) return rc;
    rec_source *it = calloc(1, sizeof *it);
    if (!it) {
        img_iter_free(iter);
        return io_image_report(host, MXP_ENOMEM, "%s: out of memory", name);
    }
    it->host = host;
    it->name = name;
    snprintf(it->path, sizeof it->path, "%s", p->path_imgrec);
    int fd = open(it->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (fd < 0) {
        int e = errno;
        rc = io_image_report(host, MXP_EIO, "%s 'path_imgrec': cannot open '%s': %s", name, p->path_imgrec, strerror(e));
        goto fail;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
        close(fd);
        rc = io_image_report(host, MXP_EFORMAT, "%s 'path_imgrec': '%s' is not a non-empty regular file", name,
                             p->path_imgrec);
        goto fail;
    }
    it->size = (uint64_t)st.st_size;
    void *m = mmap(NULL, (size_t)it->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        it->size = 0;
        rc = io_image_report(host, MXP_EIO, "%s 'path_imgrec': cannot map '%s'", name, p->path_imgrec);
        goto fail;
    }
    it->map = m;
    uint64_t *all = NULL, count = 0;
    rc = p->path_imgidx && *p->path_imgidx ? load_index(it, p->path_imgidx, &all, &count) : scan_records(it, &all, &count);
    if (rc != MXP_OK) goto fail;
    uint64_t s0, s1;
    img_iter_shard(count, p->num_parts, p->part_index, &s0, &s1);
    if (s1 == s0) {
        free(all);
        rc = io_image_report(host, MXP_EINVAL, "%s: part %" PRId64 " of %" PRId64 " of '%s' holds no record (%" PRIu64
                             " in the file)", name, p->part_index, p->num_parts, p->path_imgrec, count);
        goto fail;
    }
    memmove(all, all + s0, (size_t)(s1 - s0) * sizeof *all);
    it->offsets = all;
    it->n_workers = img_iter_workers(iter);
    if (!(it->scratch = calloc((size_t)it->n_workers, sizeof *it->scratch))) {
        rc = io_image_report(host, MXP_ENOMEM, "%s: out of memory for decode workers", name);
        goto fail;
    }
    img_source src = {.state = it, .n = s1 - s0, .load = rec_load, .describe = rec_describe, .free = rec_source_free};
    char what[600];
    snprintf(what, sizeof what, "records from '%s'", it->path);
    img_iter_attach(iter, &src, p, what);
    a->state = iter;
    return MXP_OK;
fail:
    rec_source_free(it);
    img_iter_free(iter);
    return rc;
}

static int rec_create_f32(mxp_iter_create_args *a) { return rec_create_common(a, "ImageRecordIter", 0); }
static int rec_create_u8(mxp_iter_create_args *a) { return rec_create_common(a, "ImageRecordUInt8Iter", 1); }

/* --------------------------------------------------------------- schema */
#define P(NAME, TYPE, FLAGS, FIELD, DEF, MIN, MAX, DOC) \
    MXP_PARAM(NAME, TYPE, FLAGS, img_iter_params, FIELD, DEF, MIN, MAX, NULL, DOC)
static const mxp_param_def rec_param_defs[] = {
    P("path_imgrec", MXP_PARAM_STRING, 0, path_imgrec, "", 0, 0, "Dataset Param: Path to image record file."),
    P("path_imgidx", MXP_PARAM_STRING, 0, path_imgidx, "", 0, 0,
      "Dataset Param: Path to the .idx index of the record file (optional; without it the file is scanned)."),
    P("path_imglist", MXP_PARAM_STRING, 0, path_imglist, "", 0, 0,
      "Dataset Param: Path to an image list overriding labels (not supported; must be empty; ImageIter reads .lst files)."),
    P("round_batch", MXP_PARAM_BOOL, 0, round_batch, "True", 0, 0,
      "Batch Param: a short last batch is completed from the start of the epoch and reported as pad."),
    IMG_ITER_SHARED_PARAM_DEFS(P),
};

const mxp_iter_def io_image_rec_iter_def = {
    .hdr = MXP_HEADER(mxp_iter_def),
    .name = "ImageRecordIter",
    .doc = "Iterates on image RecordIO files (im2rec): JPEG/PNG decoded and augmented by decode threads, float32 (or dtype=uint8) NCHW.",
    .params = rec_param_defs,
    .n_params = (uint32_t)(sizeof rec_param_defs / sizeof rec_param_defs[0]),
    .params_size = (uint32_t)sizeof(img_iter_params),
    .create = rec_create_f32,
    .destroy = img_iter_destroy_cb,
    .provide = img_iter_provide_cb,
    .reset = img_iter_reset_cb,
    .next = img_iter_next_cb,
    .user_data = &io_image_pack_state,
};

const mxp_iter_def io_image_rec_u8_iter_def = {
    .hdr = MXP_HEADER(mxp_iter_def),
    .name = "ImageRecordUInt8Iter",
    .doc = "ImageRecordIter producing uint8 NCHW pixels (no mean/std/scale).",
    .params = rec_param_defs,
    .n_params = (uint32_t)(sizeof rec_param_defs / sizeof rec_param_defs[0]),
    .params_size = (uint32_t)sizeof(img_iter_params),
    .create = rec_create_u8,
    .destroy = img_iter_destroy_cb,
    .provide = img_iter_provide_cb,
    .reset = img_iter_reset_cb,
    .next = img_iter_next_cb,
    .user_data = &io_image_pack_state,
};
