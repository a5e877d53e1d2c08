/* io/recordio.c — the public RecordIO API (mxplug/recordio.h): files around
 * the format functions of recordio_core.c.  A reader maps the `.rec` file
 * read-only and parses in place (split records are assembled in a scratch
 * buffer); files are opened non-blocking and must be regular (a FIFO never
 * stalls the open).  A writer appends encoded records to
 * "<path>.tmp.<pid>.<n>" (the temporary naming of mxplug/fileio.h, so
 * mxp_file_remove_stale_tmp cleans up after a killed writer) and at close
 * fsyncs it, renames it into place and fsyncs the directory.
 * Not here: image decoding, iterators (the io-image pack).
 * Invariants: reader pos is always <= size; a writer's `off` is the byte
 * size written so far (the offset the next record starts at). */
#include "base/base.h"
#include "recordio_core.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <libgen.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

struct mxp_recordio {
    int writing;
    char *path, *idx_path;
    /* reader */
    const uint8_t *map;
    uint64_t size, pos;
    uint64_t *keys, *offsets, n_keys;
    mxp__rec_scratch scratch;
    /* writer */
    FILE *f, *idx;
    char *tmp, *idx_tmp;
    uint64_t off;
    int failed;
    uint8_t *enc;
    size_t enc_cap;
};

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static atomic_uint tmp_counter;

/* "<s>.tmp.<pid>.<n>", as mxp_file_write_atomic names its temporaries. */
static char *tmp_name(const char *s) {
    size_t n = strlen(s) + 48;
    char *d = malloc(n);
    if (d) snprintf(d, n, "%s.tmp.%ld.%u", s, (long)getpid(), atomic_fetch_add(&tmp_counter, 1));
    return d;
}

/* Open read-only without blocking (a FIFO would block a plain open) and
 * keep only regular files.  Returns the fd or -1 with *why set. */
static int open_regular(const char *path, const char **why) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        *why = strerror(errno);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        *why = "not a regular file";
        return -1;
    }
    return fd;
}

static void free_handle(mxp_recordio *r) {
    if (r->map && r->size) munmap((void *)r->map, (size_t)r->size);
    free(r->keys);
    free(r->offsets);
    mxp__rec_scratch_free(&r->scratch);
    free(r->path);
    free(r->idx_path);
    free(r->tmp);
    free(r->idx_tmp);
    free(r->enc);
    free(r);
}

static int load_idx(mxp_recordio *r, const char *idx_path) {
    const char *why = "";
    int fd = open_regular(idx_path, &why);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return mxp__error(MXP_EIO, "recordio index '%s': cannot open: %s", idx_path, why);
    }
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < 65536) {
            size_t nc = cap ? cap * 2 : 65536;
            char *t = realloc(text, nc);
            if (!t) {
                free(text);
                fclose(f);
                return mxp__error_oom("recordio index text");
            }
            text = t;
            cap = nc;
        }
        size_t got = fread(text + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(text);
        return mxp__error(MXP_EIO, "recordio index '%s': read failed", idx_path);
    }
    char err[256];
    int rc = mxp__rec_idx_parse(text, len, r->size, &r->keys, &r->offsets, &r->n_keys, err, sizeof err);
    free(text);
    if (rc != MXP_OK) return mxp__error(rc, "recordio index '%s' (for '%s'): %s", idx_path, r->path, err);
    return MXP_OK;
}

int mxp_recordio_open_read(const char *path, const char *idx_path, mxp_recordio **out) {
    if (!out) return mxp__error(MXP_EINVAL, "mxp_recordio_open_read: out is NULL");
    *out = NULL;
    if (!path) return mxp__error(MXP_EINVAL, "mxp_recordio_open_read: path is NULL");
    mxp_recordio *r = calloc(1, sizeof *r);
    if (!r || !(r->path = dup_str(path))) {
        free(r);
        return mxp__error_oom("recordio reader");
    }
    const char *why = "";
    int fd = open_regular(path, &why);
    if (fd < 0) {
        free_handle(r);
        return mxp__error(MXP_EIO, "recordio '%s': cannot open: %s", path, why);
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        free_handle(r);
        return mxp__error(MXP_EIO, "recordio '%s': cannot stat", path);
    }
    r->size = (uint64_t)st.st_size;
    if (r->size) {
        void *m = mmap(NULL, (size_t)r->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            r->size = 0;
            free_handle(r);
            return mxp__error(MXP_EIO, "recordio '%s': cannot map: %s", path, strerror(e));
        }
        r->map = m;
    }
    close(fd);
    if (idx_path) {
        int rc = load_idx(r, idx_path);
        if (rc == MXP_OK && !(r->idx_path = dup_str(idx_path))) rc = mxp__error_oom("recordio reader");
        if (rc != MXP_OK) {
            free_handle(r);
            return rc;
        }
    }
    *out = r;
    return MXP_OK;
}

int mxp_recordio_open_write(const char *path, const char *idx_path, mxp_recordio **out) {
    if (!out) return mxp__error(MXP_EINVAL, "mxp_recordio_open_write: out is NULL");
    *out = NULL;
    if (!path) return mxp__error(MXP_EINVAL, "mxp_recordio_open_write: path is NULL");
    mxp_recordio *w = calloc(1, sizeof *w);
    if (!w) return mxp__error_oom("recordio writer");
    w->writing = 1;
    w->path = dup_str(path);
    w->tmp = tmp_name(path);
    if (idx_path) {
        w->idx_path = dup_str(idx_path);
        w->idx_tmp = tmp_name(idx_path);
    }
    if (!w->path || !w->tmp || (idx_path && (!w->idx_path || !w->idx_tmp))) {
        free_handle(w);
        return mxp__error_oom("recordio writer");
    }
    w->f = fopen(w->tmp, "wb");
    if (!w->f) {
        int e = errno;
        free_handle(w);
        return mxp__error(MXP_EIO, "recordio '%s': cannot create: %s", path, strerror(e));
    }
    if (idx_path && !(w->idx = fopen(w->idx_tmp, "w"))) {
        int e = errno;
        fclose(w->f);
        remove(w->tmp);
        free_handle(w);
        return mxp__error(MXP_EIO, "recordio index '%s': cannot create: %s", idx_path, strerror(e));
    }
    *out = w;
    return MXP_OK;
}

static int check_reader(const mxp_recordio *r, const char *fn) {
    if (!r) return mxp__error(MXP_EINVAL, "%s: handle is NULL", fn);
    if (r->writing) return mxp__error(MXP_EMISUSE, "%s: '%s' is open for writing", fn, r->path);
    return MXP_OK;
}

static int parse_at(mxp_recordio *r, uint64_t off, const void **out_data, uint64_t *out_len, uint64_t *next) {
    const uint8_t *d;
    char err[256];
    int rc = mxp__rec_parse(r->map, r->size, off, &r->scratch, &d, out_len, next, err, sizeof err);
    if (rc != MXP_OK) return mxp__error(rc, "recordio '%s': %s", r->path, err);
    *out_data = d;
    return MXP_OK;
}

int mxp_recordio_read_next(mxp_recordio *r, const void **out_data, uint64_t *out_len, int *out_has) {
    if (out_data) *out_data = NULL;
    if (out_len) *out_len = 0;
    if (out_has) *out_has = 0;
    int rc = check_reader(r, "mxp_recordio_read_next");
    if (rc != MXP_OK) return rc;
    if (!out_data || !out_len || !out_has) return mxp__error(MXP_EINVAL, "mxp_recordio_read_next: an out is NULL");
    if (r->pos >= r->size) return MXP_OK;
    uint64_t next;
    rc = parse_at(r, r->pos, out_data, out_len, &next);
    if (rc != MXP_OK) return rc;
    r->pos = next;
    *out_has = 1;
    return MXP_OK;
}

int mxp_recordio_read_key(mxp_recordio *r, uint64_t key, const void **out_data, uint64_t *out_len) {
    if (out_data) *out_data = NULL;
    if (out_len) *out_len = 0;
    int rc = check_reader(r, "mxp_recordio_read_key");
    if (rc != MXP_OK) return rc;
    if (!out_data || !out_len) return mxp__error(MXP_EINVAL, "mxp_recordio_read_key: an out is NULL");
    if (!r->keys) return mxp__error(MXP_EMISUSE, "recordio '%s': read by key needs an index (.idx)", r->path);
    for (uint64_t i = 0; i < r->n_keys; i++) {
        if (r->keys[i] != key) continue;
        uint64_t next;
        rc = parse_at(r, r->offsets[i], out_data, out_len, &next);
        if (rc != MXP_OK) return mxp__error_prefix(rc, "key %" PRIu64 " (index '%s')", key, r->idx_path);
        r->pos = next;
        return MXP_OK;
    }
    return mxp__error(MXP_ENOENT, "recordio '%s': key %" PRIu64 " is not in the index '%s'", r->path, key,
                      r->idx_path);
}

int mxp_recordio_seek(mxp_recordio *r, uint64_t offset) {
    int rc = check_reader(r, "mxp_recordio_seek");
    if (rc != MXP_OK) return rc;
    if (offset > r->size || offset % 4)
        return mxp__error(MXP_EINVAL, "recordio '%s': seek to %" PRIu64 ": %s (file has %" PRIu64 " bytes)", r->path,
                          offset, offset % 4 ? "not a multiple of 4" : "past the end", r->size);
    r->pos = offset;
    return MXP_OK;
}

uint64_t mxp_recordio_tell(const mxp_recordio *r) {
    if (!r) return 0;
    return r->writing ? r->off : r->pos;
}

int mxp_recordio_keys(const mxp_recordio *r, const uint64_t **out_keys, uint64_t *out_n) {
    if (out_keys) *out_keys = NULL;
    if (out_n) *out_n = 0;
    int rc = check_reader(r, "mxp_recordio_keys");
    if (rc != MXP_OK) return rc;
    if (!r->keys) return mxp__error(MXP_EMISUSE, "recordio '%s': opened without an index", r->path);
    if (out_keys) *out_keys = r->keys;
    if (out_n) *out_n = r->n_keys;
    return MXP_OK;
}

static int write_record(mxp_recordio *w, const void *data, uint64_t len, int has_key, uint64_t key) {
    if (!w) return mxp__error(MXP_EINVAL, "mxp_recordio_write: handle is NULL");
    if (!w->writing) return mxp__error(MXP_EMISUSE, "mxp_recordio_write: '%s' is open for reading", w->path);
    if (!data && len) return mxp__error(MXP_EINVAL, "mxp_recordio_write: data is NULL");
    if (w->failed) return mxp__error(MXP_EIO, "recordio '%s': an earlier write failed", w->path);
    if (len > MXP__REC_MAX_LEN)
        return mxp__error(MXP_EINVAL, "recordio '%s': record of %" PRIu64 " bytes is too long (limit %u)", w->path,
                          len, MXP__REC_MAX_LEN);
    uint64_t n = mxp__rec_encoded_size(data, len);
    if (n > w->enc_cap) {
        uint8_t *e = realloc(w->enc, (size_t)n);
        if (!e) return mxp__error_oom("recordio record encoding");
        w->enc = e;
        w->enc_cap = (size_t)n;
    }
    mxp__rec_encode(data, len, w->enc);
    if (fwrite(w->enc, 1, (size_t)n, w->f) != n) {
        w->failed = 1;
        return mxp__error(MXP_EIO, "recordio '%s': write failed: %s", w->tmp, strerror(errno));
    }
    if (has_key && w->idx && fprintf(w->idx, "%" PRIu64 "\t%" PRIu64 "\n", key, w->off) < 0) {
        w->failed = 1;
        return mxp__error(MXP_EIO, "recordio index '%s': write failed: %s", w->idx_tmp, strerror(errno));
    }
    w->off += n;
    return MXP_OK;
}

int mxp_recordio_write(mxp_recordio *w, const void *data, uint64_t len) { return write_record(w, data, len, 0, 0); }

int mxp_recordio_write_key(mxp_recordio *w, uint64_t key, const void *data, uint64_t len) {
    return write_record(w, data, len, 1, key);
}

int mxp_recordio_write_image(mxp_recordio *w, const mxp_recordio_header *h, const float *labels,
                             const void *image, uint64_t image_len) {
    if (!h) return mxp__error(MXP_EINVAL, "mxp_recordio_write_image: header is NULL");
    if (h->flag && !labels) return mxp__error(MXP_EINVAL, "mxp_recordio_write_image: flag %u but labels NULL", h->flag);
    if (!image && image_len) return mxp__error(MXP_EINVAL, "mxp_recordio_write_image: image is NULL");
    uint64_t len = MXP__REC_IMAGE_HEADER + (uint64_t)h->flag * 4 + image_len;
    if (len > MXP__REC_MAX_LEN)
        return mxp__error(MXP_EINVAL, "mxp_recordio_write_image: record of %" PRIu64 " bytes is too long", len);
    uint8_t *buf = malloc((size_t)len);
    if (!buf) return mxp__error_oom("recordio image record");
    mxp__rec_image_header ih = {h->flag, h->label, h->id, h->id2};
    mxp__rec_image_header_put(&ih, buf);
    if (h->flag) memcpy(buf + MXP__REC_IMAGE_HEADER, labels, (size_t)h->flag * 4);
    if (image_len) memcpy(buf + MXP__REC_IMAGE_HEADER + (size_t)h->flag * 4, image, (size_t)image_len);
    int rc = write_record(w, buf, len, 1, h->id);
    free(buf);
    return rc;
}

int mxp_recordio_unpack_image(const void *data, uint64_t len, mxp_recordio_header *out_header, float *labels,
                              uint32_t labels_cap, const void **out_image, uint64_t *out_image_len) {
    if (out_image) *out_image = NULL;
    if (out_image_len) *out_image_len = 0;
    if (!data || !out_header) return mxp__error(MXP_EINVAL, "mxp_recordio_unpack_image: data or header is NULL");
    mxp__rec_image_header h;
    const uint8_t *lab, *img;
    uint64_t img_len;
    if (mxp__rec_image_split(data, len, &h, &lab, &img, &img_len) != MXP_OK)
        return mxp__error(MXP_EFORMAT, "image record of %" PRIu64 " bytes is shorter than its header (24 bytes + 4 "
                          "per label)", len);
    out_header->flag = h.flag;
    out_header->label = h.label;
    out_header->id = h.id;
    out_header->id2 = h.id2;
    for (uint32_t i = 0; labels && i < h.flag && i < labels_cap; i++) labels[i] = mxp__rec_label_at(lab, i);
    if (out_image) *out_image = img;
    if (out_image_len) *out_image_len = img_len;
    return MXP_OK;
}

static void fsync_dir_of(const char *path) {
    char *copy = dup_str(path);
    if (!copy) return;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd); /* best effort: some filesystems refuse it */
        close(fd);
    }
    free(copy);
}

static int finish(FILE *f, const char *tmp, const char *path) {
    int bad = fflush(f) != 0;
    bad |= fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (!bad && rename(tmp, path) != 0) bad = 1;
    if (!bad) fsync_dir_of(path);
    return bad;
}

int mxp_recordio_close(mxp_recordio *r) {
    if (!r) return MXP_OK;
    int rc = MXP_OK;
    if (r->writing) {
        int bad_rec = r->failed ? (fclose(r->f), 1) : finish(r->f, r->tmp, r->path);
        int bad_idx = 0;
        if (r->idx) bad_idx = (bad_rec || r->failed) ? (fclose(r->idx), 1) : finish(r->idx, r->idx_tmp, r->idx_path);
        if (bad_rec || bad_idx) {
            rc = mxp__error(MXP_EIO, "recordio '%s': %s", bad_rec ? r->path : r->idx_path,
                            r->failed ? "an earlier write failed; nothing written" : strerror(errno));
            remove(r->tmp);
            if (r->idx_tmp) remove(r->idx_tmp);
        }
    }
    free_handle(r);
    return rc;
}
