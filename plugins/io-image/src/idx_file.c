/* idx_file.c — load an IDX file from disk, gzipped or plain, and parse it.
 *
 * The file is opened once and checked to be a regular file (a FIFO would
 * block).  Its first two bytes say whether it is gzip (1f 8b); either way
 * the header is read first, through the same source, and its dimensions
 * give the one allocation: exactly header + declared data bytes, after
 * checking that size against IDX_MAX_BYTES and against what the file can
 * hold (a plain file: its size exactly; a gzip file: deflate expands at
 * most IDX_GZ_MAX_RATIO-fold).  gzip data is then inflated in chunks
 * (zlib's inflate, 64 KiB of input at a time) straight into that buffer,
 * and one more byte is asked for to prove the stream ends there.  So memory
 * is bounded by the declared size, never by what a stream inflates to.
 * Concatenated gzip members are one stream (as gunzip reads them);
 * trailing zero bytes are ignored (as gunzip does); anything else after
 * the last member is an error.  Every error names the file and the byte
 * offset: in the file for plain files and for corrupt or truncated
 * compressed data, in the decompressed stream for what the IDX layer sees.
 * Kept apart from idx.c so the format parser has no I/O and no zlib
 * dependency (fuzz harness). */
#include "idx.h"

#include <mxp/types.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* deflate's best case is about 1032:1 (a 258-byte match in 2 bits). */
#define IDX_GZ_MAX_RATIO 1032u

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

/* Where bytes come from: the file itself, or the inflated gzip stream. */
typedef struct idx_src {
    const char *path;
    int fd;
    int gz;              /* 1: inflate through z                          */
    int eof;             /* read() returned 0                             */
    int member_done;     /* inflate said Z_STREAM_END for this member     */
    int finished;        /* no more output will come                      */
    uint64_t file_size;
    uint64_t file_read;  /* bytes read from the file so far               */
    uint64_t produced;   /* bytes handed out (decompressed offset)        */
    z_stream z;
    uint8_t in[1 << 16];
} idx_src;

/* Compressed byte offset of the next unconsumed input byte. */
static uint64_t src_in_offset(const idx_src *s) { return s->file_read - s->z.avail_in; }

static int src_fill(idx_src *s, char *err, size_t errlen) {
    for (;;) {
        ssize_t n = read(s->fd, s->in, sizeof s->in);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            return fail(err, errlen, MXP_EIO, "cannot read IDX file '%s' at byte offset %llu: %s", s->path,
                        (unsigned long long)s->file_read, strerror(errno));
        if (n == 0) s->eof = 1;
        s->z.next_in = s->in;
        s->z.avail_in = (uInt)n;
        s->file_read += (uint64_t)n;
        return MXP_OK;
    }
}

/* After a member's end: another member follows, zero padding ends the
 * file, or anything else is an error. */
static int src_next_member(idx_src *s, char *err, size_t errlen) {
    for (;;) {
        if (!s->z.avail_in) {
            if (s->eof) {
                s->finished = 1;
                return MXP_OK;
            }
            int rc = src_fill(s, err, errlen);
            if (rc) return rc;
            continue;
        }
        if (s->z.next_in[0] == 0x1f) {
            if (inflateReset(&s->z) != Z_OK)
                return fail(err, errlen, MXP_EIO, "IDX file '%s': zlib inflateReset failed", s->path);
            s->member_done = 0;
            return MXP_OK;
        }
        while (s->z.avail_in && s->z.next_in[0] == 0) s->z.next_in++, s->z.avail_in--;
        if (s->z.avail_in)
            return fail(err, errlen, MXP_EFORMAT,
                        "IDX file '%s': unexpected bytes after the gzip data at byte offset %llu (decompressed "
                        "byte offset %llu): expected another gzip member or the end of the file",
                        s->path, (unsigned long long)src_in_offset(s), (unsigned long long)s->produced);
    }
}

/* Up to `want` bytes into dst; *got < want only at the end of the data. */
static int src_read(idx_src *s, uint8_t *dst, uint64_t want, uint64_t *got, char *err, size_t errlen) {
    *got = 0;
    while (*got < want && !s->finished) {
        uint64_t room = want - *got;
        if (room > (1u << 30)) room = 1u << 30;
        if (!s->gz) {
            ssize_t n = read(s->fd, dst + *got, (size_t)room);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0)
                return fail(err, errlen, MXP_EIO, "cannot read IDX file '%s' at byte offset %llu: %s", s->path,
                            (unsigned long long)s->produced, strerror(errno));
            if (n == 0) s->finished = 1;
            *got += (uint64_t)n;
            s->produced += (uint64_t)n;
            s->file_read += (uint64_t)n;
            continue;
        }
        if (s->member_done) {
            int rc = src_next_member(s, err, errlen);
            if (rc) return rc;
            continue;
        }
        if (!s->z.avail_in && !s->eof) {
            int rc = src_fill(s, err, errlen);
            if (rc) return rc;
        }
        s->z.next_out = dst + *got;
        s->z.avail_out = (uInt)room;
        int zr = inflate(&s->z, Z_NO_FLUSH);
        uint64_t made = room - s->z.avail_out;
        *got += made;
        s->produced += made;
        if (zr == Z_STREAM_END) {
            s->member_done = 1;
        } else if (zr == Z_MEM_ERROR) {
            return fail(err, errlen, MXP_ENOMEM, "out of memory inflating IDX file '%s'", s->path);
        } else if (zr == Z_DATA_ERROR || zr == Z_NEED_DICT || zr == Z_STREAM_ERROR) {
            return fail(err, errlen, MXP_EFORMAT,
                        "corrupt gzip data in IDX file '%s' at byte offset %llu (decompressed byte offset %llu): %s",
                        s->path, (unsigned long long)src_in_offset(s), (unsigned long long)s->produced,
                        s->z.msg ? s->z.msg : "invalid deflate stream");
        } else if (!made && !s->z.avail_in && s->eof) {
            return fail(err, errlen, MXP_EFORMAT,
                        "truncated gzip data in IDX file '%s': the file ends at byte offset %llu inside a "
                        "compressed stream (decompressed byte offset %llu)",
                        s->path, (unsigned long long)s->file_read, (unsigned long long)s->produced);
        }
    }
    return MXP_OK;
}

static int load(idx_src *s, uint32_t expect_magic, idx_file *out, char *err, size_t errlen) {
    const char *path = s->path;
    /* Header first, into a small buffer; it fixes the one allocation. */
    uint8_t head[4 + 4 * IDX_MAX_NDIM];
    const uint64_t hdr = 4 + 4ull * (expect_magic & 0xffu);
    if (hdr > sizeof head) return fail(err, errlen, MXP_EINVAL, "'%s': unsupported expected IDX magic 0x%08x", path,
                                       expect_magic);
    uint64_t got = 0, data_bytes = 0;
    int rc = src_read(s, head, hdr, &got, err, errlen);
    if (rc) return rc;
    idx_view v;
    rc = idx_parse_header(head, got, expect_magic, path, &v, &data_bytes, err, errlen);
    if (rc) return rc;
    const char *where = s->gz ? "decompressed byte offset" : "byte offset";
    if (data_bytes > IDX_MAX_BYTES - hdr)
        return fail(err, errlen, MXP_EFORMAT,
                    "IDX file '%s': the header (byte offset 4) declares %llu item(s) of %llu byte(s), more than "
                    "the %llu-byte limit; refusing to load it",
                    path, (unsigned long long)v.count, (unsigned long long)v.item_size,
                    (unsigned long long)IDX_MAX_BYTES);
    const uint64_t total = hdr + data_bytes;
    if (!s->gz && total > s->file_size) {
        unsigned long long whole = (unsigned long long)((s->file_size - hdr) / v.item_size);
        return fail(err, errlen, MXP_EFORMAT,
                    "'%s': truncated IDX data: the header declares %llu item(s) of %llu byte(s) from byte "
                    "offset %llu, but the file ends at byte offset %llu (%llu complete item(s))",
                    path, (unsigned long long)v.count, (unsigned long long)v.item_size, (unsigned long long)hdr,
                    (unsigned long long)s->file_size, whole);
    }
    if (!s->gz && total < s->file_size)
        return fail(err, errlen, MXP_EFORMAT,
                    "'%s': %llu unexpected trailing byte(s) at byte offset %llu: the header declares %llu item(s) "
                    "of %llu byte(s), which end there",
                    path, (unsigned long long)(s->file_size - total), (unsigned long long)total,
                    (unsigned long long)v.count, (unsigned long long)v.item_size);
    if (s->gz && data_bytes / IDX_GZ_MAX_RATIO > s->file_size)
        return fail(err, errlen, MXP_EFORMAT,
                    "IDX file '%s': the header (decompressed byte offset 4) declares %llu item(s) of %llu "
                    "byte(s) (%llu bytes), but %llu bytes of gzip data inflate to at most %llu: truncated, or "
                    "a corrupt header",
                    path, (unsigned long long)v.count, (unsigned long long)v.item_size,
                    (unsigned long long)data_bytes, (unsigned long long)s->file_size,
                    (unsigned long long)(s->file_size * IDX_GZ_MAX_RATIO));
    uint8_t *buf = malloc((size_t)total ? (size_t)total : 1);
    if (!buf)
        return fail(err, errlen, MXP_ENOMEM, "out of memory reading IDX file '%s' (%llu bytes declared)", path,
                    (unsigned long long)total);
    memcpy(buf, head, (size_t)hdr);
    rc = src_read(s, buf + hdr, data_bytes, &got, err, errlen);
    if (!rc && got < data_bytes)
        rc = fail(err, errlen, MXP_EFORMAT,
                  "'%s': truncated IDX data: the header declares %llu item(s) of %llu byte(s) from %s %llu, "
                  "but the data ends at %s %llu (%llu complete item(s))",
                  path, (unsigned long long)v.count, (unsigned long long)v.item_size, where,
                  (unsigned long long)hdr, where, (unsigned long long)(hdr + got),
                  (unsigned long long)(got / v.item_size));
    uint8_t extra;
    if (!rc) rc = src_read(s, &extra, 1, &got, err, errlen); /* must be the end (checks the gzip trailer too) */
    if (!rc && got)
        rc = fail(err, errlen, MXP_EFORMAT,
                  "IDX file '%s' holds more data than its header declares: %llu item(s) of %llu byte(s) end at "
                  "%s %llu, but the data goes on; refusing to read further",
                  path, (unsigned long long)v.count, (unsigned long long)v.item_size, where,
                  (unsigned long long)total);
    if (!rc) rc = idx_parse_mem(buf, total, expect_magic, path, &out->view, err, errlen);
    if (rc) {
        free(buf);
        return rc;
    }
    out->buf = buf;
    out->len = total;
    return MXP_OK;
}

int idx_load(const char *path, uint32_t expect_magic, idx_file *out, char *err, size_t errlen) {
    if (out) memset(out, 0, sizeof *out);
    if (err && errlen) err[0] = '\0';
    if (!path || !out) return fail(err, errlen, MXP_EINVAL, "idx_load: NULL argument");
    /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return fail(err, errlen, errno == ENOMEM ? MXP_ENOMEM : MXP_EIO, "cannot open IDX file '%s': %s", path,
                    strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail(err, errlen, MXP_EIO, "cannot open IDX file '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail(err, errlen, MXP_EIO, "cannot open IDX file '%s': not a regular file", path);
    }
    idx_src *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return fail(err, errlen, MXP_ENOMEM, "out of memory opening IDX file '%s'", path);
    }
    s->path = path;
    s->fd = fd;
    s->file_size = (uint64_t)st.st_size;
    uint8_t magic[2] = {0, 0};
    s->gz = st.st_size >= 2 && pread(fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    int rc = MXP_OK;
    if (s->gz) {
        int zr = inflateInit2(&s->z, 16 + MAX_WBITS); /* gzip wrapper only */
        if (zr != Z_OK) {
            close(fd);
            free(s);
            return fail(err, errlen, zr == Z_MEM_ERROR ? MXP_ENOMEM : MXP_EIO,
                        "cannot inflate IDX file '%s': zlib inflateInit2 failed (%d)", path, zr);
        }
    }
    rc = load(s, expect_magic, out, err, errlen);
    if (s->gz) inflateEnd(&s->z);
    close(fd);
    free(s);
    if (rc) memset(out, 0, sizeof *out);
    return rc;
}
