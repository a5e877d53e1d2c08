/* params.c — MXNet's NDArray list file (.params): save and load.
 *
 * Layout (little-endian, mxnet@1.9.1 src/ndarray/ndarray.cc):
 *   u64 0x112, u64 reserved, u64 n, n records, u64 m, m names (u64 len + bytes)
 * Record V2 (0xF993fac9) / V3 (0xF993faca): u32 magic, i32 stype, shape
 *   (i32 ndim + ndim x i64), [if known: i32 dev_type, i32 dev_id,
 *   i32 type_flag, raw data].  V2 ndim 0 and V3 ndim -1 / dim -1 mean "none".
 * Record V1 (0xF993fac8): no stype; shape as above.
 * Legacy (no magic): the first u32 is ndim, then ndim x u32 dims.
 * Saving writes V2 records (V3 for scalars, which V2 cannot express), the
 * array's context when it is an MXNet device type (else cpu 0), and data
 * copied to the host.  Loading puts every array on CPU 0.
 *
 * The loader trusts nothing: every count and size is checked against the
 * bytes left before anything is allocated, so a corrupt file cannot cause a
 * large allocation or an out-of-bounds read; errors say where
 * ("f.params: offset 40: truncated record 0 data (need 24 bytes, 8 left)"). */
#include "ndarray_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LIST_MAGIC 0x112u
#define REC_V1 0xF993fac8u
#define REC_V2 0xF993fac9u
#define REC_V3 0xF993facau

/* ------------------------------------------------------------ load */

typedef struct reader {
    const unsigned char *p;
    size_t len, pos;
    const char *src;
} reader;

static int fail_at(const reader *r, size_t at, int status, const char *fmt, ...) MXP_PRINTF(4, 5);
static int fail_at(const reader *r, size_t at, int status, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mxp__error(status, "%s: offset %zu: %s", r->src, at, msg);
}

static size_t left(const reader *r) { return r->len - r->pos; }

/* Read `n` bytes of a field named `what` (for the error message). */
static int take(reader *r, void *out, size_t n, const char *what, long rec) {
    if (left(r) < n) {
        if (rec >= 0)
            return fail_at(r, r->pos, MXP_EFORMAT, "truncated record %ld %s (need %zu bytes, %zu left)", rec, what,
                           n, left(r));
        return fail_at(r, r->pos, MXP_EFORMAT, "truncated %s (need %zu bytes, %zu left)", what, n, left(r));
    }
    memcpy(out, r->p + r->pos, n); /* the format and mxplug hosts are little-endian */
    r->pos += n;
    return MXP_OK;
}

/* Parse one record into *out (a new handle). */
static int read_record(reader *r, long rec, mxp_ndarray **out) {
    size_t start = r->pos;
    uint32_t magic = 0;
    int rc = take(r, &magic, 4, "magic", rec);
    if (rc) return rc;
    int32_t ndim = 0;
    int64_t dims[MXP_MAX_NDIM] = {0};
    int none = 0;
    if (magic == REC_V2 || magic == REC_V3 || magic == REC_V1) {
        if (magic != REC_V1) {
            int32_t stype = 0;
            if ((rc = take(r, &stype, 4, "storage type", rec))) return rc;
            if (stype == 1 || stype == 2)
                return fail_at(r, start, MXP_EUNSUPPORTED,
                               "record %ld: sparse storage (%s) is not supported; save it dense (tostype('default'))",
                               rec, stype == 1 ? "row_sparse" : "csr");
            if (stype != 0 && stype != -1)
                return fail_at(r, r->pos - 4, MXP_EFORMAT, "record %ld: unknown storage type %d", rec, (int)stype);
        }
        if ((rc = take(r, &ndim, 4, "ndim", rec))) return rc;
        if (magic == REC_V3 && ndim == -1) {
            none = 1;
            ndim = 0;
        } else if (ndim < 0 || ndim > MXP_MAX_NDIM) {
            return fail_at(r, r->pos - 4, MXP_EFORMAT, "record %ld: ndim %d out of range 0..%d", rec, (int)ndim,
                           MXP_MAX_NDIM);
        }
        if (magic != REC_V3 && ndim == 0) none = 1;
        for (int i = 0; i < ndim; i++) {
            if ((rc = take(r, &dims[i], 8, "shape", rec))) return rc;
            if (dims[i] == -1 && magic == REC_V3) none = 1; /* unknown dim */
            else if (dims[i] < 0)
                return fail_at(r, r->pos - 8, MXP_EFORMAT, "record %ld: dimension %d is %lld", rec, i,
                               (long long)dims[i]);
        }
    } else {
        /* Legacy record: the "magic" is ndim, dims are u32. */
        if (magic > MXP_MAX_NDIM)
            return fail_at(r, start, MXP_EFORMAT,
                           "record %ld: unknown record magic 0x%08x (not V1/V2/V3, and too large for a legacy ndim)",
                           rec, magic);
        ndim = (int32_t)magic;
        for (int i = 0; i < ndim; i++) {
            uint32_t d = 0;
            if ((rc = take(r, &d, 4, "shape", rec))) return rc;
            dims[i] = d;
        }
        if (ndim == 0) none = 1;
    }
    if (none) return mxp_ndarray_create_none(out);

    int32_t ctx[2] = {0, 0}, type_flag = 0;
    if ((rc = take(r, ctx, 8, "context", rec))) return rc;
    if ((rc = take(r, &type_flag, 4, "type flag", rec))) return rc;
    uint32_t esize = mxp_dtype_size(type_flag);
    if (!esize) return fail_at(r, r->pos - 4, MXP_EFORMAT, "record %ld: unknown type flag %d", rec, (int)type_flag);
    /* Size check before any allocation: elements * esize <= bytes left. */
    uint64_t n = 1;
    int overflow = 0;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] && n > UINT64_MAX / (uint64_t)dims[i]) overflow = 1;
        else n *= (uint64_t)dims[i];
    }
    if (overflow || n > left(r) / esize) {
        char need[32];
        if (overflow || n > UINT64_MAX / esize) snprintf(need, sizeof need, "more than 2^64");
        else snprintf(need, sizeof need, "%llu", (unsigned long long)(n * esize));
        return fail_at(r, r->pos, MXP_EFORMAT, "truncated record %ld data (need %s bytes, %zu left)", rec, need,
                       left(r));
    }
    size_t bytes = (size_t)n * esize;
    rc = mxp_ndarray_create(dims, ndim, type_flag, (mxp_device){MXP_DEV_CPU, 0}, out);
    if (rc) return mxp__error_prefix(rc, "%s: record %ld", r->src, rec);
    /* Fresh CPU array nobody else has seen: no pending work, so the host
     * may write it directly. */
    if (bytes) memcpy(mxp_ndarray_data(*out), r->p + r->pos, bytes);
    r->pos += bytes;
    return MXP_OK;
}

void mxp_ndarray_list_free(int n, mxp_ndarray **arrays, char **names) {
    for (int i = 0; i < n; i++) {
        if (arrays) mxp_ndarray_release(arrays[i]);
        if (names) free(names[i]);
    }
    free(arrays);
    free(names);
}

int mxp__ndarray_load_mem(const void *buf, size_t len, const char *source, int *out_n, mxp_ndarray ***out_arrays,
                          char ***out_names) {
    if (out_n) *out_n = 0;
    if (out_arrays) *out_arrays = NULL;
    if (out_names) *out_names = NULL;
    if (!out_n || !out_arrays || !out_names || (!buf && len))
        return mxp__error(MXP_EMISUSE, "mxp_ndarray_load: NULL argument");
    reader r = {buf, len, 0, source ? source : "<memory>"};
    uint64_t magic = 0, reserved = 0, n = 0, m = 0;
    int rc;
    if ((rc = take(&r, &magic, 8, "file header", -1))) return rc;
    if (magic != LIST_MAGIC)
        return fail_at(&r, 0, MXP_EFORMAT, "not an NDArray file (magic 0x%llx, expected 0x112)",
                       (unsigned long long)magic);
    if ((rc = take(&r, &reserved, 8, "file header", -1))) return rc;
    if ((rc = take(&r, &n, 8, "array count", -1))) return rc;
    if (n > left(&r) / 4 || n > 0x7fffffff) { /* every record takes >= 4 bytes */
        char need[32]; /* n * 4 would wrap for a hostile count */
        if (n > UINT64_MAX / 4) snprintf(need, sizeof need, "more than 2^64");
        else snprintf(need, sizeof need, "%llu", (unsigned long long)n * 4);
        return fail_at(&r, r.pos - 8, MXP_EFORMAT,
                       "truncated or corrupt file: array count %llu needs at least %s bytes, %zu left",
                       (unsigned long long)n, need, left(&r));
    }
    mxp_ndarray **arrays = calloc(n ? n : 1, sizeof *arrays);
    if (!arrays) return mxp__error_oom("loading arrays");
    char **names = NULL;
    for (uint64_t i = 0; i < n && rc == MXP_OK; i++) rc = read_record(&r, (long)i, &arrays[i]);
    if (rc == MXP_OK) rc = take(&r, &m, 8, "name count", -1);
    if (rc == MXP_OK && m != 0 && m != n)
        rc = fail_at(&r, r.pos - 8, MXP_EFORMAT, "name count %llu does not match array count %llu",
                     (unsigned long long)m, (unsigned long long)n);
    if (rc == MXP_OK && m) {
        names = calloc(m, sizeof *names);
        if (!names) rc = mxp__error_oom("loading names");
        for (uint64_t i = 0; i < m && rc == MXP_OK; i++) {
            uint64_t nl = 0;
            if ((rc = take(&r, &nl, 8, "name length", -1))) break;
            if (nl > left(&r)) {
                rc = fail_at(&r, r.pos, MXP_EFORMAT, "truncated name %llu (need %llu bytes, %zu left)",
                             (unsigned long long)i, (unsigned long long)nl, left(&r));
                break;
            }
            names[i] = malloc(nl + 1);
            if (!names[i]) { rc = mxp__error_oom("loading names"); break; }
            memcpy(names[i], r.p + r.pos, nl);
            names[i][nl] = '\0';
            r.pos += nl;
        }
    }
    if (rc != MXP_OK) {
        mxp_ndarray_list_free((int)n, arrays, names);
        return rc;
    }
    *out_n = (int)n;
    *out_arrays = arrays;
    *out_names = names;
    return MXP_OK;
}

int mxp_ndarray_load(const char *path, int *out_n, mxp_ndarray ***out_arrays, char ***out_names) {
    if (out_n) *out_n = 0;
    if (out_arrays) *out_arrays = NULL;
    if (out_names) *out_names = NULL;
    if (!path || !out_n || !out_arrays || !out_names)
        return mxp__error(MXP_EMISUSE, "mxp_ndarray_load: NULL argument");
    /* A regular file, read into a buffer of exactly its size (never sized
     * from a field inside the file). */
    FILE *f = NULL;
    uint64_t size = 0;
    int rc = mxp_file_open_read(path, ".params file", 0, &f, &size);
    if (rc) return rc;
    unsigned char *buf = size > SIZE_MAX - 1 ? NULL : malloc((size_t)size + 1);
    size_t len = 0;
    if (!buf) rc = mxp__error(MXP_ENOMEM, "%s: out of memory for %llu bytes", path, (unsigned long long)size);
    else {
        len = fread(buf, 1, (size_t)size, f);
        if (ferror(f) || len != size)
            rc = mxp__error(MXP_EIO, "%s: read error at offset %zu of %llu", path, len, (unsigned long long)size);
    }
    fclose(f);
    if (rc == MXP_OK) rc = mxp__ndarray_load_mem(buf, len, path, out_n, out_arrays, out_names);
    free(buf);
    return rc;
}

/* ------------------------------------------------------------ save */

static int put(FILE *f, const void *p, size_t n) { return !n || fwrite(p, 1, n, f) == n ? 0 : -1; }

static int put_u32(FILE *f, uint32_t v) { return put(f, &v, 4); }
static int put_i32(FILE *f, int32_t v) { return put(f, &v, 4); }
static int put_u64(FILE *f, uint64_t v) { return put(f, &v, 8); }

typedef struct save_ctx {
    const char *path;
    int n;
    mxp_ndarray *const *arrays;
    const char *const *names;
} save_ctx;

/* The .params body (MXNet's NDArray::Save list format) into f. */
static int save_body(FILE *f, void *vctx) {
    const save_ctx *c = vctx;
    int n = c->n;
    int rc = MXP_OK, io = 0;
    io |= put_u64(f, LIST_MAGIC) | put_u64(f, 0) | put_u64(f, (uint64_t)n);
    for (int i = 0; i < n && rc == MXP_OK && !io; i++) {
        mxp_ndarray *a = c->arrays[i];
        if (mxp_ndarray_is_none(a)) {
            io |= put_u32(f, REC_V2) | put_i32(f, -1) | put_i32(f, 0);
            continue;
        }
        int ndim = a->ndim;
        io |= put_u32(f, ndim == 0 ? REC_V3 : REC_V2) | put_i32(f, 0) | put_i32(f, ndim);
        io |= put(f, a->shape, (size_t)ndim * 8);
        int32_t t = a->dev.type;
        int mx = t == MXP_DEV_CPU || t == MXP_DEV_GPU || t == MXP_DEV_CPU_PINNED || t == MXP_DEV_CPU_SHARED;
        io |= put_i32(f, mx ? t : MXP_DEV_CPU) | put_i32(f, mx ? a->dev.id : 0) | put_i32(f, a->dtype);
        size_t bytes = mxp_ndarray_nbytes(a);
        void *host = bytes ? malloc(bytes) : NULL;
        if (bytes && !host) { rc = mxp__error_oom("save staging buffer"); break; }
        rc = mxp_ndarray_sync_copy_to(a, host, bytes);
        if (rc) rc = mxp__error_prefix(rc, "save %s: array %d", c->path, i);
        else io |= put(f, host, bytes);
        free(host);
    }
    if (rc == MXP_OK && !io) {
        io |= put_u64(f, c->names ? (uint64_t)n : 0);
        for (int i = 0; c->names && i < n && !io; i++) {
            size_t l = strlen(c->names[i]);
            io |= put_u64(f, l) | put(f, c->names[i], l);
        }
    }
    if (rc == MXP_OK && io) rc = mxp__error(MXP_EIO, "save %s: write failed: %s", c->path, strerror(errno));
    return rc;
}

int mxp_ndarray_save(const char *path, int n, mxp_ndarray *const *arrays, const char *const *names) {
    if (!path || n < 0 || (n && !arrays)) return mxp__error(MXP_EMISUSE, "mxp_ndarray_save: bad argument");
    for (int i = 0; i < n; i++) {
        if (!arrays[i]) return mxp__error(MXP_EINVAL, "save %s: array %d is NULL", path, i);
        if (names && !names[i]) return mxp__error(MXP_EINVAL, "save %s: name %d is NULL", path, i);
    }
    /* Beside the target, fsync'd, renamed: a failed or interrupted save
     * leaves no half-written file under the real name. */
    save_ctx c = {path, n, arrays, names};
    return mxp_file_write_atomic(path, ".params file", save_body, &c);
}
