/* image_list_iter.c — ImageIter: MXNet's mx.image.ImageIter reading loose
 * image files named by a .lst (path_imglist, paths relative to path_root),
 * as the *list source* of the shared batch engine (image_iter.c): the same
 * decoding (JPEG/PNG), augmenters, decode threads, shuffle, sharding and
 * corrupt-sample handling as ImageRecordIter, and the same parameter names
 * for them (MXNet's ImageIter takes its augmenters as Python keyword
 * arguments; here they are ImageRecordIter's scalar parameters: rand_crop,
 * rand_mirror, mean_r/g/b, std_r/g/b, resize, ...).
 *
 * A sample is a line of the list: its labels (the first label_width; a
 * line with fewer is refused at create, naming it), its index column as
 * the sample id, and the file root/path, read whole on the decode worker
 * (one growing buffer per worker).  A file that cannot be read is a
 * corrupt sample like one that cannot be decoded: an error naming the
 * file and its line, or skipped and counted with skip_corrupt (MXNet's
 * ImageIter skips undecodable images silently; here that is opt-in).
 *
 * MXNet's ImageIter parameters kept: path_imglist, path_root, data_shape,
 * batch_size, label_width, shuffle, part_index, num_parts,
 * last_batch_handle (pad: wrap to the epoch's start, reported as pad;
 * discard: drop a short last batch; roll_over is refused), dtype (float32
 * or uint8, as for ImageRecordIter).  Reading
 * records (path_imgrec) is ImageRecordIter's job and refused here;
 * imglist (an in-memory list) and aug_list (Python objects) have no C
 * form.  Not thread-safe: the host calls next from one thread at a time. */
#include "image_iter.h"
#include "img_list.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME "ImageIter"

typedef struct worker_buf {
    uint8_t *p;
    size_t cap;
} worker_buf;

typedef struct list_source {
    char list_path[512];
    char root[512];
    img_list list;
    size_t first;       /* the shard is list.v[first, first + n) */
    int n_workers;
    worker_buf *bufs;
} list_source;

static void list_source_free(void *state) {
    list_source *s = state;
    if (!s) return;
    img_list_free(&s->list);
    for (int i = 0; s->bufs && i < s->n_workers; i++) free(s->bufs[i].p);
    free(s->bufs);
    free(s);
}

static void full_path(const list_source *s, const img_list_entry *e, char *out, size_t cap) {
    if (s->root[0] && e->path[0] != '/') {
        size_t rl = strlen(s->root);
        snprintf(out, cap, "%s%s%s", s->root, s->root[rl - 1] == '/' ? "" : "/", e->path);
    } else {
        snprintf(out, cap, "%s", e->path);
    }
}

static void list_describe(void *state, uint64_t r, uint64_t id, char *out, size_t cap) {
    const list_source *s = state;
    const img_list_entry *e = &s->list.v[s->first + r];
    char path[1100];
    full_path(s, e, path, sizeof path);
    snprintf(out, cap, "image '%s' (index %" PRIu64 ", line %zu of '%s')", path, id, e->line, s->list_path);
}

/* Read the whole file into the worker's buffer. */
static int read_file(worker_buf *b, const char *path, size_t *n, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (fd < 0) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(err, errlen, "not a regular file");
        return -1;
    }
    size_t want = (size_t)st.st_size, got = 0;
    if (want == 0) {
        close(fd);
        snprintf(err, errlen, "empty file");
        return -1;
    }
    if (want > b->cap) {
        uint8_t *p = realloc(b->p, want);
        if (!p) {
            close(fd);
            snprintf(err, errlen, "out of memory for %zu bytes", want);
            return -1;
        }
        b->p = p;
        b->cap = want;
    }
    while (got < want) {
        ssize_t r = read(fd, b->p + got, want - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = errno;
            close(fd);
            snprintf(err, errlen, r < 0 ? "read failed: %s" : "file shrank while reading%s", r < 0 ? strerror(e) : "");
            return -1;
        }
        got += (size_t)r;
    }
    close(fd);
    *n = got;
    return 0;
}

static int list_load(void *state, int worker, uint64_t r, const uint8_t **img, size_t *img_n, float *lab,
                     uint32_t label_width, uint64_t *id, char *msg, size_t cap) {
    list_source *s = state;
    const img_list_entry *e = &s->list.v[s->first + r];
    *id = e->key;
    memcpy(lab, s->list.labels + e->first_label, label_width * sizeof *lab);
    char path[1100], err[256];
    full_path(s, e, path, sizeof path);
    if (read_file(&s->bufs[worker], path, img_n, err, sizeof err)) {
        char where[1400];
        list_describe(s, r, e->key, where, sizeof where);
        snprintf(msg, cap, "%s: %s", where, err);
        return -1;
    }
    *img = s->bufs[worker].p;
    return 0;
}

static int list_create(mxp_iter_create_args *a) {
    io_image_pack *pk = a ? (io_image_pack *)a->user_data : NULL;
    const mxp_host *host = pk ? pk->host : NULL;
    if (!a || !a->params) return io_image_report(host, MXP_EINVAL, NAME ": create without parameters");
    a->state = NULL;
    const img_iter_params *p = a->params;
    if (p->path_imgrec && *p->path_imgrec)
        return io_image_report(host, MXP_EUNSUPPORTED, NAME " 'path_imgrec': reading records is ImageRecordIter's job "
                               "(ImageIter reads the loose files of path_imglist)");
    if (!p->path_imglist || !*p->path_imglist)
        return io_image_report(host, MXP_EINVAL, NAME " 'path_imglist': required (a .lst: index, labels, path per line)");
    if (p->last_batch_handle == 2)
        return io_image_report(host, MXP_EUNSUPPORTED, NAME " 'last_batch_handle': roll_over is not supported (pad or "
                               "discard)");
    int out_u8 = 0;
    int rc = img_iter_check_params(host, NAME, p);
    if (rc == MXP_OK) rc = img_iter_output_u8(host, NAME, p, 0, &out_u8);
    if (rc != MXP_OK) return rc;
    list_source *s = calloc(1, sizeof *s);
    if (!s) return io_image_report(host, MXP_ENOMEM, NAME ": out of memory");
    snprintf(s->list_path, sizeof s->list_path, "%s", p->path_imglist);
    snprintf(s->root, sizeof s->root, "%s", p->path_root ? p->path_root : "");
    char err[1200];
    int lrc = img_list_load(p->path_imglist, &s->list, err, sizeof err);
    if (lrc) {
        list_source_free(s);
        return io_image_report(host, lrc == -2 ? MXP_EIO : MXP_EFORMAT, NAME " 'path_imglist': %s", err);
    }
    if (s->list.n == 0) {
        list_source_free(s);
        return io_image_report(host, MXP_EFORMAT, NAME " 'path_imglist': '%s' lists no image", p->path_imglist);
    }
    for (size_t i = 0; i < s->list.n; i++)
        if (s->list.v[i].n_labels < (uint32_t)p->label_width) {
            rc = io_image_report(host, MXP_EFORMAT, NAME " 'path_imglist': '%s' line %zu has %u label(s), label_width is "
                                 "%" PRId64, s->list_path, s->list.v[i].line, s->list.v[i].n_labels, p->label_width);
            list_source_free(s);
            return rc;
        }
    uint64_t s0, s1;
    img_iter_shard(s->list.n, p->num_parts, p->part_index, &s0, &s1);
    if (s1 == s0) {
        rc = io_image_report(host, MXP_EINVAL, NAME ": part %" PRId64 " of %" PRId64 " of '%s' holds no image (%zu in "
                             "the list)", p->part_index, p->num_parts, s->list_path, s->list.n);
        list_source_free(s);
        return rc;
    }
    s->first = (size_t)s0;
    img_iter *iter;
    rc = img_iter_new(host, NAME, p, out_u8, p->last_batch_handle == 1, &iter);
    if (rc != MXP_OK) {
        list_source_free(s);
        return rc;
    }
    s->n_workers = img_iter_workers(iter);
    if (!(s->bufs = calloc((size_t)s->n_workers, sizeof *s->bufs))) {
        list_source_free(s);
        img_iter_free(iter);
        return io_image_report(host, MXP_ENOMEM, NAME ": out of memory for decode workers");
    }
    img_source src = {.state = s, .n = s1 - s0, .load = list_load, .describe = list_describe, .free = list_source_free};
    char what[700];
    snprintf(what, sizeof what, "images listed in '%s'", s->list_path);
    img_iter_attach(iter, &src, p, what);
    a->state = iter;
    return MXP_OK;
}

/* --------------------------------------------------------------- schema */
static const char *const last_batch_modes[] = {"pad", "discard", "roll_over", NULL};

#define P(NAME_, TYPE, FLAGS, FIELD, DEF, MIN, MAX, DOC) \
    MXP_PARAM(NAME_, TYPE, FLAGS, img_iter_params, FIELD, DEF, MIN, MAX, NULL, DOC)
static const mxp_param_def list_param_defs[] = {
    P("path_imglist", MXP_PARAM_STRING, 0, path_imglist, "", 0, 0,
      "Dataset Param: Path to the image list (.lst: index<TAB>label[<TAB>label...]<TAB>path per line)."),
    P("path_root", MXP_PARAM_STRING, 0, path_root, "", 0, 0,
      "Dataset Param: Folder the list's relative paths start from (empty: the current directory)."),
    P("path_imgrec", MXP_PARAM_STRING, 0, path_imgrec, "", 0, 0,
      "Dataset Param: refused (records are read by ImageRecordIter)."),
    MXP_PARAM("last_batch_handle", MXP_PARAM_ENUM, 0, img_iter_params, last_batch_handle, "pad", 0, 0,
              last_batch_modes, "Batch Param: pad (wrap to the epoch's start, reported as pad) or discard a short last "
              "batch; roll_over is refused."),
    IMG_ITER_SHARED_PARAM_DEFS(P),
};

const mxp_iter_def io_image_list_iter_def = {
    .hdr = MXP_HEADER(mxp_iter_def),
    .name = NAME,
    .doc = "Iterates on loose JPEG/PNG files named by a .lst (MXNet's mx.image.ImageIter), decoded and augmented as "
           "ImageRecordIter does, NCHW.",
    .params = list_param_defs,
    .n_params = (uint32_t)(sizeof list_param_defs / sizeof list_param_defs[0]),
    .params_size = (uint32_t)sizeof(img_iter_params),
    .create = list_create,
    .destroy = img_iter_destroy_cb,
    .provide = img_iter_provide_cb,
    .reset = img_iter_reset_cb,
    .next = img_iter_next_cb,
    .user_data = &io_image_pack_state,
};
