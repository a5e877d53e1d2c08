/* csv_iter.c — CSVIter: MXNet's CSV iterator (src/io/iter_csv.cc and its
 * batch loader) through the iterator ABI (mxp/iter.h).
 *
 * create reads data_csv (and label_csv when given) whole into float32
 * rows: one instance per non-empty line, comma-separated numbers, each row
 * exactly prod(data_shape) values (label rows prod(label_shape)).  provide
 * reports "data" (batch, *data_shape) and "softmax_label" (batch,) when
 * label_shape is (1,), else (batch, *label_shape), both float32.  Without
 * label_csv every label is 0, as in MXNet.  Instances come in file order
 * (MXNet's CSVIter does not shuffle).
 *
 * Where it departs from MXNet, on purpose:
 *   - a short last batch is completed by wrapping to the first rows and
 *     reported as `pad`, for round_batch=False as well (the host needs full
 *     batches; MXNet's round_batch=False leaves stale rows in those slots,
 *     also reported as pad);
 *   - a label file with fewer rows than the data file is an error at
 *     create naming both counts (MXNet fails mid-epoch), and so is one with
 *     more (MXNet ignores the rest silently);
 *   - a malformed number or a row of the wrong length is an error naming
 *     the file, line and column; rows are never cut or padded.
 * Memory is bounded by the file: values are stored as they are parsed,
 * the buffer grows geometrically.  Not thread-safe: the host calls next
 * from one thread at a time (iter.h). */
#include "io_image.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct csv_params {
    const char *data_csv;
    mxp_param_shape data_shape;
    const char *label_csv;
    mxp_param_shape label_shape;
    int64_t batch_size;
    int32_t round_batch;
    int32_t pad_;
    int64_t prefetch_buffer;
} csv_params;

typedef struct csv_table {
    float *v;          /* rows * width values                          */
    uint64_t rows, width;
} csv_table;

typedef struct csv_iter {
    const mxp_host *host;
    uint64_t batch;
    mxp_shape data_shape, label_shape;   /* per instance               */
    csv_table data, label;               /* label.v NULL: all zero     */
    uint64_t pos;                        /* next row                   */
} csv_iter;

/* prod(shape) of a parameter shape; 0 when empty, unset, too many
 * dimensions (one is left for the batch) or over 2^31 elements. */
static uint64_t shape_size(const mxp_param_shape *s) {
    if (!s->has_value || s->ndim < 1 || s->ndim > MXP_MAX_NDIM - 1) return 0;
    uint64_t n = 1;
    for (int32_t i = 0; i < s->ndim; i++) {
        if (s->dims[i] < 1 || (uint64_t)s->dims[i] > ((uint64_t)1 << 31) / n) return 0;
        n *= (uint64_t)s->dims[i];
    }
    return n;
}

/* Parse one CSV file into rows of exactly `width` numbers. */
static int load_csv(const mxp_host *host, const char *what, const char *path, uint64_t width, csv_table *out) {
    memset(out, 0, sizeof *out);
    out->width = width;
    FILE *f = fopen(path, "rb");
    if (!f) return io_image_report(host, MXP_EIO, "CSVIter '%s': cannot open '%s': %s", what, path, strerror(errno));
    uint64_t cap = 0, used = 0, line_no = 0;
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t len;
    int rc = MXP_OK;
    while (rc == MXP_OK && (len = getline(&line, &line_cap, f)) >= 0) {
        line_no++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        const char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) continue; /* blank lines hold no instance */
        uint64_t k = 0;
        for (;;) {
            while (*p == ' ' || *p == '\t') p++;
            char *end;
            errno = 0;
            float x = strtof(p, &end);
            if (end == p || !isfinite(x)) {
                rc = io_image_report(host, MXP_EFORMAT, "CSVIter '%s': %s line %" PRIu64 " column %" PRIu64
                            ": '%.24s' is not a finite number", what, path, line_no, k + 1, p);
                break;
            }
            if (used == cap) {
                uint64_t ncap = cap ? 2 * cap : 4096;
                float *nv = realloc(out->v, (size_t)ncap * sizeof *nv);
                if (!nv) {
                    rc = io_image_report(host, MXP_ENOMEM, "CSVIter '%s': out of memory reading '%s' (%" PRIu64 " values)",
                                what, path, used);
                    break;
                }
                out->v = nv;
                cap = ncap;
            }
            out->v[used++] = x;
            k++;
            p = end;
            while (*p == ' ' || *p == '\t') p++;
            if (*p == ',') { p++; continue; }
            if (*p) {
                rc = io_image_report(host, MXP_EFORMAT, "CSVIter '%s': %s line %" PRIu64 " column %" PRIu64
                            ": unexpected '%c' after a number", what, path, line_no, k, *p);
            }
            break;
        }
        if (rc == MXP_OK && k != width)
            rc = io_image_report(host, MXP_ESHAPE, "CSVIter '%s': %s line %" PRIu64 ": %" PRIu64
                        " value(s), the shape needs %" PRIu64, what, path, line_no, k, width);
        if (rc == MXP_OK) out->rows++;
    }
    if (rc == MXP_OK && ferror(f))
        rc = io_image_report(host, MXP_EIO, "CSVIter '%s': reading '%s': %s", what, path, strerror(errno));
    free(line);
    fclose(f);
    if (rc != MXP_OK) {
        free(out->v);
        memset(out, 0, sizeof *out);
    }
    return rc;
}

static void csv_free(csv_iter *it) {
    if (!it) return;
    free(it->data.v);
    free(it->label.v);
    free(it);
}

static void to_shape(const mxp_param_shape *p, mxp_shape *s) {
    memset(s, 0, sizeof *s);
    s->ndim = p->ndim;
    for (int32_t i = 0; i < p->ndim; i++) s->dims[i] = p->dims[i];
}

static int csv_create(mxp_iter_create_args *a) {
    io_image_pack *pk = a ? (io_image_pack *)a->user_data : NULL;
    const mxp_host *host = pk ? pk->host : NULL;
    if (!a || !a->params) return io_image_report(host, MXP_EINVAL, "CSVIter: create without parameters");
    a->state = NULL;
    const csv_params *p = a->params;
    if (!p->data_csv || !*p->data_csv) return io_image_report(host, MXP_EINVAL, "CSVIter 'data_csv': a path is required");
    if (p->batch_size < 1 || p->batch_size > INT32_MAX)
        return io_image_report(host, MXP_EINVAL, "CSVIter 'batch_size': %" PRId64 " must be in [1, %d]", p->batch_size,
                      INT32_MAX);
    uint64_t dw = shape_size(&p->data_shape), lw = shape_size(&p->label_shape);
    if (!dw)
        return io_image_report(host, MXP_EINVAL, "CSVIter 'data_shape': 1 to %d positive dimensions are required, "
                      "of at most 2^31 elements", MXP_MAX_NDIM - 1);
    if (!lw)
        return io_image_report(host, MXP_EINVAL, "CSVIter 'label_shape': 1 to %d positive dimensions are required, "
                      "of at most 2^31 elements", MXP_MAX_NDIM - 1);
    if (dw > ((uint64_t)1 << 40) / (uint64_t)p->batch_size)
        return io_image_report(host, MXP_EINVAL, "CSVIter: a batch of %" PRId64 " rows of %" PRIu64 " values is too large",
                      p->batch_size, dw);
    csv_iter *it = calloc(1, sizeof *it);
    if (!it) return io_image_report(host, MXP_ENOMEM, "CSVIter: out of memory");
    it->host = host;
    it->batch = (uint64_t)p->batch_size;
    to_shape(&p->data_shape, &it->data_shape);
    to_shape(&p->label_shape, &it->label_shape);
    int rc = load_csv(host, "data_csv", p->data_csv, dw, &it->data);
    /* MXNet's default label_csv is the string "NULL": no label file. */
    int has_label = p->label_csv && *p->label_csv && strcmp(p->label_csv, "NULL") != 0;
    if (rc == MXP_OK && has_label) rc = load_csv(host, "label_csv", p->label_csv, lw, &it->label);
    if (rc == MXP_OK && !has_label) it->label.width = lw;
    if (rc == MXP_OK && it->data.rows == 0)
        rc = io_image_report(host, MXP_EINVAL, "CSVIter 'data_csv': '%s' holds no row", p->data_csv);
    if (rc == MXP_OK && has_label && it->label.rows != it->data.rows)
        rc = io_image_report(host, MXP_EFORMAT, "CSVIter: '%s' holds %" PRIu64 " row(s) but '%s' holds %" PRIu64
                    "; expected one label row per data row", p->data_csv, it->data.rows, p->label_csv,
                    it->label.rows);
    if (rc != MXP_OK) {
        csv_free(it);
        return rc;
    }
    a->state = it;
    return MXP_OK;
}

static void csv_destroy(mxp_iter_destroy_args *a) {
    if (a) csv_free(a->state);
}

/* The batch shapes: (batch, *data_shape); (batch,) for a (1,) label,
 * else (batch, *label_shape). */
static void batch_shape(const csv_iter *it, int label, mxp_shape *s) {
    const mxp_shape *inst = label ? &it->label_shape : &it->data_shape;
    memset(s, 0, sizeof *s);
    s->dims[0] = (int64_t)it->batch;
    if (label && inst->ndim == 1 && inst->dims[0] == 1) {
        s->ndim = 1;
        return;
    }
    s->ndim = inst->ndim + 1;
    for (int32_t i = 0; i < inst->ndim; i++) s->dims[i + 1] = inst->dims[i];
}

static int csv_provide(mxp_iter_provide_args *a) {
    csv_iter *it = a ? a->state : NULL;
    if (!it) return MXP_EINVAL;
    a->n_data = 1;
    a->n_label = 1;
    if (a->capacity < 2 || !a->names || !a->shapes || !a->dtypes)
        return io_image_report(it->host, MXP_EINVAL, "CSVIter provide: room for 2 entries needed, capacity %u", a->capacity);
    snprintf(a->names[0], 64, "%s", "data");
    snprintf(a->names[1], 64, "%s", "softmax_label");
    batch_shape(it, 0, &a->shapes[0]);
    batch_shape(it, 1, &a->shapes[1]);
    a->dtypes[0] = MXP_DTYPE_F32;
    a->dtypes[1] = MXP_DTYPE_F32;
    return MXP_OK;
}

static int csv_reset(mxp_iter_reset_args *a) {
    csv_iter *it = a ? a->state : NULL;
    if (!it) return MXP_EINVAL;
    it->pos = 0;
    return MXP_OK;
}

static int csv_next(mxp_iter_next_args *a) {
    csv_iter *it = a ? a->state : NULL;
    if (!it) return MXP_EINVAL;
    a->has_batch = 0;
    a->pad = 0;
    if (a->n_data < 1 || a->n_label < 1 || !a->data || !a->label)
        return io_image_report(it->host, MXP_EINVAL, "CSVIter next: needs 1 data and 1 label tensor, got %u and %u", a->n_data,
                      a->n_label);
    const mxp_tensor *data = MXP_ARRAY_AT(mxp_tensor, a->data, 0);
    const mxp_tensor *label = MXP_ARRAY_AT(mxp_tensor, a->label, 0);
    mxp_shape ds, ls;
    batch_shape(it, 0, &ds);
    batch_shape(it, 1, &ls);
    int rc = io_image_check_f32_batch(it->host, "CSVIter", data, "data", &ds);
    if (rc == MXP_OK) rc = io_image_check_f32_batch(it->host, "CSVIter", label, "softmax_label", &ls);
    if (rc != MXP_OK) return rc;
    uint64_t *index = NULL;
    if (MXP_HAS_FIELD(a, mxp_iter_next_args, index_capacity) && a->index) {
        if (a->index_capacity < it->batch)
            return io_image_report(it->host, MXP_EINVAL, "CSVIter next: index_capacity %u < batch_size %" PRIu64,
                          a->index_capacity, it->batch);
        index = a->index;
    }
    if (it->pos >= it->data.rows) return MXP_OK; /* epoch over */
    float *dst = mxp_tensor_ptr(data), *lab = mxp_tensor_ptr(label);
    uint64_t dw = it->data.width, lw = it->label.width;
    int32_t pad = 0;
    for (uint64_t j = 0; j < it->batch; j++) {
        uint64_t r = it->pos + j;
        if (r >= it->data.rows) {
            r %= it->data.rows; /* complete the batch from the first rows */
            pad++;
        }
        memcpy(dst + j * dw, it->data.v + r * dw, (size_t)dw * sizeof *dst);
        if (it->label.v) memcpy(lab + j * lw, it->label.v + r * lw, (size_t)lw * sizeof *lab);
        else memset(lab + j * lw, 0, (size_t)lw * sizeof *lab);
        if (index) index[j] = r;
    }
    it->pos += it->batch;
    a->has_batch = 1;
    a->pad = pad;
    return MXP_OK;
}

#define P(name, type, flags, field, def, lo, hi, doc) MXP_PARAM(name, type, flags, csv_params, field, def, lo, hi, NULL, doc)
static const mxp_param_def csv_param_defs[] = {
    P("data_csv", MXP_PARAM_STRING, MXP_PARAM_REQUIRED, data_csv, NULL, 0, 0, "Dataset Param: Data csv path."),
    P("data_shape", MXP_PARAM_SHAPE, MXP_PARAM_REQUIRED, data_shape, NULL, 0, 0, "Dataset Param: Shape of the data."),
    P("label_csv", MXP_PARAM_STRING, 0, label_csv, "NULL", 0, 0,
      "Dataset Param: Label csv path. If is NULL, all labels will be returned as 0."),
    P("label_shape", MXP_PARAM_SHAPE, 0, label_shape, "(1,)", 0, 0, "Dataset Param: Shape of the label."),
    P("batch_size", MXP_PARAM_INT, MXP_PARAM_REQUIRED | MXP_PARAM_HAS_MIN | MXP_PARAM_HAS_MAX, batch_size, NULL, 1,
      2147483647.0, "Batch Param: Batch size."),
    P("round_batch", MXP_PARAM_BOOL, 0, round_batch, "True", 0, 0,
      "Batch Param: a short last batch is completed from the first rows and reported as pad (also when False: "
      "the host needs full batches)."),
    P("prefetch_buffer", MXP_PARAM_INT, MXP_PARAM_HAS_MIN, prefetch_buffer, "4", 1, 0,
      "Maximum number of batches to prefetch (accepted for MXNet compatibility; the host's prefetch applies)."),
};
#undef P

const mxp_iter_def io_image_csv_iter_def = {
    .hdr = MXP_HEADER(mxp_iter_def),
    .name = "CSVIter",
    .doc = "Iterating on CSV files: one instance per line, data_shape values per data row (label_shape per "
           "label row; all labels 0 without label_csv), in file order.",
    .params = csv_param_defs,
    .n_params = (uint32_t)(sizeof csv_param_defs / sizeof csv_param_defs[0]),
    .params_size = (uint32_t)sizeof(csv_params),
    .create = csv_create,
    .destroy = csv_destroy,
    .provide = csv_provide,
    .reset = csv_reset,
    .next = csv_next,
    .user_data = &io_image_pack_state,
};
