/* npy.c — NumPy .npy reader/writer for the mxplug CLI (see npy.h for what
 * is supported and the error convention).
 *
 * The header is a Python dict literal, e.g.
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 784), }
 * parsed here by a tiny recursive-descent reader that accepts exactly the
 * three keys numpy writes (any order, either quote style, optional trailing
 * comma) and nothing else.  Sizes are checked for overflow before any
 * allocation, so a hostile header cannot make us allocate or read past the
 * buffer.  Invariant: on failure *out is cleared and nothing is leaked. */
#include "npy.h"

#include <mxplug.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npy.c assumes a little-endian host");

static int fail(char *err, size_t cap, int status, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t cap, int status, const char *fmt, ...) {
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return status;
}

const char *npy_descr(int dtype) {
    switch (dtype) {
    case MXP_DTYPE_F32: return "<f4";
    case MXP_DTYPE_F64: return "<f8";
    case MXP_DTYPE_U8:  return "|u1";
    default:            return NULL;
    }
}

void npy_free(npy_array *a) {
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* ------------------------------------------------------------ header */
typedef struct hdr_reader {
    const char *p, *end;
} hdr_reader;

static void skip_ws(hdr_reader *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static int accept(hdr_reader *r, char c) {
    skip_ws(r);
    if (r->p < r->end && *r->p == c) {
        r->p++;
        return 1;
    }
    return 0;
}

/* A quoted string into buf (truncated copies are refused). */
static int read_str(hdr_reader *r, char *buf, size_t cap) {
    skip_ws(r);
    if (r->p >= r->end || (*r->p != '\'' && *r->p != '"')) return 0;
    char q = *r->p++;
    size_t n = 0;
    while (r->p < r->end && *r->p != q) {
        if (n + 1 >= cap) return 0;
        buf[n++] = *r->p++;
    }
    if (r->p >= r->end) return 0;
    r->p++;
    buf[n] = 0;
    return 1;
}

static int read_word(hdr_reader *r, const char *w) {
    skip_ws(r);
    size_t n = strlen(w);
    if ((size_t)(r->end - r->p) >= n && memcmp(r->p, w, n) == 0) {
        r->p += n;
        return 1;
    }
    return 0;
}

/* (d0, d1, ...) with an optional trailing comma; () is a scalar. */
static int read_shape(hdr_reader *r, npy_array *a, char *err, size_t cap) {
    if (!accept(r, '(')) return fail(err, cap, MXP_EFORMAT, "'shape' is not a tuple");
    a->ndim = 0;
    for (;;) {
        if (accept(r, ')')) return MXP_OK;
        skip_ws(r);
        if (r->p >= r->end || *r->p < '0' || *r->p > '9')
            return fail(err, cap, MXP_EFORMAT, "'shape' holds something other than non-negative integers");
        int64_t v = 0;
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
            if (v > (INT64_MAX - 9) / 10) return fail(err, cap, MXP_EFORMAT, "'shape' dimension too large");
            v = v * 10 + (*r->p++ - '0');
        }
        if (r->p < r->end && *r->p == 'L') r->p++; /* Python 2 longs */
        if (a->ndim >= MXP_MAX_NDIM)
            return fail(err, cap, MXP_EUNSUPPORTED, "more than %d dimensions", MXP_MAX_NDIM);
        a->shape[a->ndim++] = v;
        if (!accept(r, ',')) {
            if (accept(r, ')')) return MXP_OK;
            return fail(err, cap, MXP_EFORMAT, "'shape' tuple is malformed");
        }
    }
}

static int parse_descr(const char *d, int *dtype, char *err, size_t cap) {
    if (!strcmp(d, "<f4")) *dtype = MXP_DTYPE_F32;
    else if (!strcmp(d, "<f8")) *dtype = MXP_DTYPE_F64;
    else if (!strcmp(d, "|u1") || !strcmp(d, "<u1") || !strcmp(d, "=u1")) *dtype = MXP_DTYPE_U8;
    else if (d[0] == '>' && (!strcmp(d + 1, "f4") || !strcmp(d + 1, "f8")))
        return fail(err, cap, MXP_EUNSUPPORTED, "dtype '%s' is big-endian; only little-endian '<f4', '<f8' and '|u1' are supported", d);
    else
        return fail(err, cap, MXP_EUNSUPPORTED, "dtype '%s' is not supported (use float32 '<f4', float64 '<f8' or uint8 '|u1')", d);
    return MXP_OK;
}

static int parse_header(const char *h, size_t len, npy_array *a, char *err, size_t cap) {
    hdr_reader r = {h, h + len};
    int have_descr = 0, have_order = 0, have_shape = 0;
    if (!accept(&r, '{')) return fail(err, cap, MXP_EFORMAT, "header is not a dict");
    for (;;) {
        if (accept(&r, '}')) break;
        char key[32], val[64];
        if (!read_str(&r, key, sizeof key)) return fail(err, cap, MXP_EFORMAT, "header: expected a quoted key");
        if (!accept(&r, ':')) return fail(err, cap, MXP_EFORMAT, "header: expected ':' after '%s'", key);
        if ((!strcmp(key, "descr") && have_descr) || (!strcmp(key, "fortran_order") && have_order) ||
            (!strcmp(key, "shape") && have_shape))
            return fail(err, cap, MXP_EFORMAT, "header: duplicate key '%s'", key);
        if (!strcmp(key, "descr")) {
            if (!read_str(&r, val, sizeof val))
                return fail(err, cap, MXP_EUNSUPPORTED, "'descr' is not a simple dtype string (structured arrays are not supported)");
            int rc = parse_descr(val, &a->dtype, err, cap);
            if (rc) return rc;
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order")) {
            if (read_word(&r, "True"))
                return fail(err, cap, MXP_EUNSUPPORTED, "Fortran-order arrays are not supported (save with np.ascontiguousarray)");
            if (!read_word(&r, "False")) return fail(err, cap, MXP_EFORMAT, "'fortran_order' is not True or False");
            have_order = 1;
        } else if (!strcmp(key, "shape")) {
            int rc = read_shape(&r, a, err, cap);
            if (rc) return rc;
            have_shape = 1;
        } else {
            return fail(err, cap, MXP_EFORMAT, "header: unknown key '%s'", key);
        }
        if (!accept(&r, ',')) {
            if (accept(&r, '}')) break;
            return fail(err, cap, MXP_EFORMAT, "header: expected ',' or '}'");
        }
    }
    if (!have_descr || !have_order || !have_shape)
        return fail(err, cap, MXP_EFORMAT, "header lacks '%s'",
                    !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
    return MXP_OK;
}

int npy_parse(const void *buf, size_t len, npy_array *out, char *err, size_t cap) {
    if (!out) return fail(err, cap, MXP_EINVAL, "no output");
    memset(out, 0, sizeof *out);
    const unsigned char *b = buf;
    if (!b || len < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
        return fail(err, cap, MXP_EFORMAT, "not a .npy file (no \\x93NUMPY magic)");
    unsigned major = b[6], minor = b[7];
    size_t hlen, off;
    if (major == 1 && minor == 0) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        off = 10;
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (len < 12) return fail(err, cap, MXP_EFORMAT, "truncated header");
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        off = 12;
    } else {
        return fail(err, cap, MXP_EUNSUPPORTED, "format version %u.%u is not supported (1.0, 2.0, 3.0)", major, minor);
    }
    if (hlen > len - off) return fail(err, cap, MXP_EFORMAT, "truncated header (%zu bytes announced)", hlen);
    npy_array a;
    memset(&a, 0, sizeof a);
    int rc = parse_header((const char *)b + off, hlen, &a, err, cap);
    if (rc) return rc;
    size_t count = 1, esz = mxp_dtype_size(a.dtype);
    for (int i = 0; i < a.ndim; i++) {
        if (a.shape[i] != 0 && count > SIZE_MAX / esz / (uint64_t)a.shape[i])
            return fail(err, cap, MXP_EFORMAT, "shape too large");
        count *= (size_t)a.shape[i];
    }
    size_t nbytes = count * esz, have = len - off - hlen;
    if (have < nbytes)
        return fail(err, cap, MXP_EFORMAT, "truncated data: shape needs %zu bytes, file has %zu", nbytes, have);
    if (have > nbytes)
        return fail(err, cap, MXP_EFORMAT, "%zu unexpected bytes after the data", have - nbytes);
    a.count = count;
    a.data = malloc(nbytes ? nbytes : 1);
    if (!a.data) return fail(err, cap, MXP_ENOMEM, "out of memory (%zu bytes)", nbytes);
    memcpy(a.data, b + off + hlen, nbytes);
    *out = a;
    return MXP_OK;
}

int npy_load(const char *path, npy_array *out, char *err, size_t cap) {
    if (out) memset(out, 0, sizeof *out);
    /* A regular file only (a FIFO would block), read into exactly its size. */
    FILE *f = NULL;
    uint64_t size = 0;
    int rc = mxp_file_open_read(path, ".npy file", 0, &f, &size);
    if (rc) return fail(err, cap, rc, "%s", mxp_last_error());
    char *buf = size >= SIZE_MAX ? NULL : malloc((size_t)size + 1);
    size_t n = 0;
    if (!buf) rc = fail(err, cap, MXP_ENOMEM, "out of memory reading '%s' (%llu bytes)", path, (unsigned long long)size);
    else if ((n = fread(buf, 1, (size_t)size, f)) != size)
        rc = fail(err, cap, MXP_EIO, "reading '%s': %zu of %llu bytes", path, n, (unsigned long long)size);
    fclose(f);
    if (rc == MXP_OK) {
        char inner[384];
        rc = npy_parse(buf, n, out, inner, sizeof inner);
        if (rc) fail(err, cap, rc, "'%s': %s", path, inner);
    }
    free(buf);
    return rc;
}

/* What npy_save writes, for mxp_file_write_atomic's writer. */
typedef struct npy_out {
    const unsigned char *pre;
    const char *dict;
    size_t dict_len, pad;
    const void *data;
    size_t nbytes;
} npy_out;

static int npy_put(FILE *f, void *vo) {
    const npy_out *o = vo;
    fwrite(o->pre, 1, 10, f);
    fwrite(o->dict, 1, o->dict_len, f);
    for (size_t i = 0; i < o->pad; i++) fputc(' ', f);
    fputc('\n', f);
    if (o->nbytes) fwrite(o->data, 1, o->nbytes, f);
    return MXP_OK; /* stream errors are caught by mxp_file_write_atomic */
}

/* Atomic: temporary beside `path`, fsync, rename. */
int npy_save(const char *path, int dtype, int ndim, const int64_t *shape, const void *data, char *err,
             size_t cap) {
    const char *descr = npy_descr(dtype);
    if (!descr) return fail(err, cap, MXP_EUNSUPPORTED, "cannot write dtype %d to .npy", dtype);
    if (ndim < 0 || ndim > MXP_MAX_NDIM || (ndim && !shape))
        return fail(err, cap, MXP_EINVAL, "bad ndim %d", ndim);
    char dict[96 + MXP_MAX_NDIM * 24];
    size_t count = 1;
    int k = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return fail(err, cap, MXP_EINVAL, "negative dimension");
        k += snprintf(dict + k, sizeof dict - k, "%lld%s", (long long)shape[i], (ndim == 1 || i + 1 < ndim) ? ", " : "");
        count *= (size_t)shape[i];
    }
    /* numpy writes "(3,)" for 1-D: the comma is kept, the space dropped. */
    if (ndim == 1) k -= 1;
    k += snprintf(dict + k, sizeof dict - k, "), }");
    /* numpy >= 1.24 leaves room for axis 0 to grow to 21 digits (appending
     * in place); doing the same makes our files byte-identical to np.save. */
    if (ndim > 0) {
        int digits = snprintf(NULL, 0, "%lld", (long long)shape[0]);
        for (int i = digits; i < 21; i++) dict[k++] = ' ';
        dict[k] = 0;
    }
    /* Magic (6) + version (2) + length (2) + dict + padding + '\n' = 64*m. */
    size_t total = 10 + (size_t)k + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)k + pad + 1;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
    npy_out o = {pre, dict, (size_t)k, pad, data, count * mxp_dtype_size(dtype)};
    int rc = mxp_file_write_atomic(path, ".npy file", npy_put, &o);
    if (rc) return fail(err, cap, rc, "%s", mxp_last_error());
    return MXP_OK;
}

void npy_to_f32(const npy_array *a, float *dst) {
    switch (a->dtype) {
    case MXP_DTYPE_F32: memcpy(dst, a->data, a->count * sizeof(float)); break;
    case MXP_DTYPE_F64:
        for (size_t i = 0; i < a->count; i++) dst[i] = (float)((const double *)a->data)[i];
        break;
    case MXP_DTYPE_U8:
        for (size_t i = 0; i < a->count; i++) dst[i] = (float)((const uint8_t *)a->data)[i];
        break;
    default: break;
    }
}
