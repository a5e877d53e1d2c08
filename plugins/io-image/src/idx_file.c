/* idx_file.c — load an IDX file from disk, gzipped or plain, and parse it.
 *
 * zlib's gzread passes non-gzip input through unchanged, so one path serves
 * "train-images-idx3-ubyte" and "train-images-idx3-ubyte.gz".  The buffer
 * grows geometrically as decompressed bytes arrive (the header's sizes are
 * never used to allocate ahead), up to IDX_MAX_BYTES, and never past what
 * the header declares plus 64 KiB: a small gzip file that inflates far
 * beyond its declared size is refused as soon as it passes it, not after
 * inflating it all.  Only regular files are opened (a FIFO would block).  Kept apart from idx.c so
 * the format parser has no I/O and no zlib dependency (fuzz harness). */
#include "idx.h"

#include <mxp/types.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

enum { IDX_TRAILING_SLACK = 1 << 16 };

int idx_load(const char *path, uint32_t expect_magic, idx_file *out, char *err, size_t errlen) {
    if (out) memset(out, 0, sizeof *out);
    if (err && errlen) err[0] = '\0';
    if (!path || !out) return fail(err, errlen, MXP_EINVAL, "idx_load: NULL argument");
    errno = 0;
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return fail(err, errlen, MXP_EIO, "cannot open IDX file '%s': not a regular file", path);
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return fail(err, errlen, errno == ENOMEM ? MXP_ENOMEM : MXP_EIO, "cannot open IDX file '%s': %s",
                    path, errno ? strerror(errno) : "gzopen failed");
    gzbuffer(gz, 1u << 17);
    uint8_t *buf = NULL;
    uint64_t len = 0, cap = 0, limit = IDX_MAX_BYTES; /* limit: declared size + 1 once the header is in */
    const uint64_t hdr = 4 + 4ull * (expect_magic & 0xffu);
    int have_limit = 0, rc = MXP_OK;
    for (;;) {
        if (!have_limit && len >= hdr) {
            have_limit = 1;
            uint32_t magic = (uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 | (uint32_t)buf[2] << 8 | buf[3];
            if (magic != expect_magic) break; /* idx_parse_mem names the wrong magic; no need to read on */
            uint64_t total = 1;
            for (uint64_t d = 0; d < hdr / 4 - 1 && total; d++) {
                uint64_t v = (uint64_t)buf[4 + 4 * d] << 24 | (uint64_t)buf[5 + 4 * d] << 16 |
                             (uint64_t)buf[6 + 4 * d] << 8 | buf[7 + 4 * d];
                total = v && total > IDX_MAX_BYTES / v ? IDX_MAX_BYTES : total * v;
            }
            /* A little slack past the declared size, so idx_parse_mem can
             * still report a few trailing bytes exactly. */
            if (total < IDX_MAX_BYTES - hdr - IDX_TRAILING_SLACK) limit = hdr + total + IDX_TRAILING_SLACK;
        }
        if (have_limit && len >= limit) {
            rc = fail(err, errlen, MXP_EFORMAT,
                      "IDX file '%s' holds more data than its header declares (%llu bytes); refusing to "
                      "read further", path, (unsigned long long)(limit - IDX_TRAILING_SLACK));
            break;
        }
        if (len == cap) {
            if (cap >= IDX_MAX_BYTES) {
                rc = fail(err, errlen, MXP_EFORMAT,
                          "IDX file '%s' is larger than %llu bytes (decompressed); refusing to load it",
                          path, (unsigned long long)IDX_MAX_BYTES);
                break;
            }
            uint64_t ncap = cap ? cap * 2 : (uint64_t)1 << 16;
            if (ncap > IDX_MAX_BYTES) ncap = IDX_MAX_BYTES;
            if (have_limit && ncap > limit) ncap = limit;
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
        if (!have_limit && len < hdr && want > hdr - len) want = hdr - len; /* header first */
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
