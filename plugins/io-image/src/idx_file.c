/* idx_file.c — load an IDX file from disk, gzipped or plain, and parse it.
 *
 * zlib's gzread passes non-gzip input through unchanged, so one path serves
 * "train-images-idx3-ubyte" and "train-images-idx3-ubyte.gz".  The buffer
 * grows geometrically as decompressed bytes arrive (the header's sizes are
 * never used to allocate), up to IDX_MAX_BYTES.  Kept apart from idx.c so
 * the format parser has no I/O and no zlib dependency (fuzz harness). */
#include "idx.h"

#include <mxp/types.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static int fail(char *err, size_t errlen, int status, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return status;
}

void idx_file_free(idx_file *f) {
    if (!f) return;
    free(f->buf);
    memset(f, 0, sizeof *f);
}

int idx_load(const char *path, uint32_t expect_magic, idx_file *out, char *err, size_t errlen) {
    if (out) memset(out, 0, sizeof *out);
    if (err && errlen) err[0] = '\0';
    if (!path || !out) return fail(err, errlen, MXP_EINVAL, "idx_load: NULL argument");
    errno = 0;
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return fail(err, errlen, errno == ENOMEM ? MXP_ENOMEM : MXP_EIO, "cannot open IDX file '%s': %s",
                    path, errno ? strerror(errno) : "gzopen failed");
    gzbuffer(gz, 1u << 17);
    uint8_t *buf = NULL;
    uint64_t len = 0, cap = 0;
    int rc = MXP_OK;
    for (;;) {
        if (len == cap) {
            if (cap >= IDX_MAX_BYTES) {
                rc = fail(err, errlen, MXP_EFORMAT,
                          "IDX file '%s' is larger than %llu bytes (decompressed); refusing to load it",
                          path, (unsigned long long)IDX_MAX_BYTES);
                break;
            }
            uint64_t ncap = cap ? cap * 2 : (uint64_t)1 << 16;
            if (ncap > IDX_MAX_BYTES) ncap = IDX_MAX_BYTES;
            uint8_t *nb = realloc(buf, (size_t)ncap);
            if (!nb) {
                rc = fail(err, errlen, MXP_ENOMEM, "out of memory reading IDX file '%s' (%llu bytes)", path,
                          (unsigned long long)ncap);
                break;
            }
            buf = nb;
            cap = ncap;
        }
        uint64_t want = cap - len;
        if (want > (1u << 30)) want = 1u << 30;
        int n = gzread(gz, buf + len, (unsigned)want);
        if (n < 0) {
            int zerr = 0;
            const char *msg = gzerror(gz, &zerr);
            if (zerr == Z_BUF_ERROR || zerr == Z_DATA_ERROR)
                rc = fail(err, errlen, MXP_EFORMAT,
                          "truncated or corrupt gzip data in '%s' at decompressed byte offset %llu: %s",
                          path, (unsigned long long)len, msg);
            else
                rc = fail(err, errlen, zerr == Z_MEM_ERROR ? MXP_ENOMEM : MXP_EIO,
                          "cannot read IDX file '%s' at decompressed byte offset %llu: %s", path,
                          (unsigned long long)len, zerr == Z_ERRNO ? strerror(errno) : msg);
            break;
        }
        if (n == 0) break;
        len += (uint64_t)n;
    }
    if (rc == MXP_OK) {
        /* A gzip stream cut short reads as a clean EOF on some zlib
         * versions; gzerror tells it apart. */
        int zerr = 0;
        const char *msg = gzerror(gz, &zerr);
        if (zerr != Z_OK && zerr != Z_STREAM_END)
            rc = fail(err, errlen, MXP_EFORMAT, "truncated or corrupt gzip data in '%s' at decompressed byte offset %llu: %s",
                      path, (unsigned long long)len, msg);
    }
    gzclose(gz);
    if (rc == MXP_OK) rc = idx_parse_mem(buf, len, expect_magic, path, &out->view, err, errlen);
    if (rc != MXP_OK) {
        free(buf);
        memset(out, 0, sizeof *out);
        return rc;
    }
    out->buf = buf;
    out->len = len;
    return MXP_OK;
}
