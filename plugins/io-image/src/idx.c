/* idx.c — validate an IDX file image held in memory (see idx.h).
 *
 * Pure function of its input: no allocation, no I/O, no global state, so
 * the fuzz harness (tests/fuzz/fuzz_idx.c) compiles this file directly.
 * Invariant on success: out->data + out->count * out->item_size ==
 * buf + len exactly (no truncation, no trailing bytes), every item
 * dimension is non-zero, and the products did not overflow. */
#include "idx.h"

#include <mxp/types.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return MXP_EFORMAT;
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static const char *magic_kind(uint32_t magic) {
    switch (magic) {
    case IDX_MAGIC_LABELS: return "IDX1 ubyte labels";
    case IDX_MAGIC_IMAGES: return "IDX3 ubyte images";
    default: return "unknown";
    }
}

int idx_parse_header(const uint8_t *buf, uint64_t len, uint32_t expect_magic, const char *name, idx_view *out,
                     uint64_t *data_bytes, char *err, size_t errlen) {
    if (out) memset(out, 0, sizeof *out);
    if (data_bytes) *data_bytes = 0;
    if (err && errlen) err[0] = '\0';
    if (!name) name = "<memory>";
    if (!out || !data_bytes || (!buf && len)) return fail(err, errlen, "'%s': idx_parse_header: NULL argument", name);
    uint32_t ndim = expect_magic & 0xffu;
    if ((expect_magic & 0xffffff00u) != 0x00000800u || ndim < 1 || ndim > IDX_MAX_NDIM)
        return fail(err, errlen, "'%s': unsupported expected IDX magic 0x%08x", name, expect_magic);

    if (len < 4)
        return fail(err, errlen,
                    "'%s': truncated IDX file: expected a 4-byte magic 0x%08x (%s) at byte offset 0, "
                    "but the file has only %llu byte(s)",
                    name, expect_magic, magic_kind(expect_magic), (unsigned long long)len);
    uint32_t magic = be32(buf);
    if (magic != expect_magic) {
        const char *hint = "";
        if (magic == IDX_MAGIC_LABELS || magic == IDX_MAGIC_IMAGES)
            hint = " (image and label files swapped?)";
        else if (buf[0] == 0x1f && buf[1] == 0x8b)
            hint = " (gzip data that was not decompressed)";
        else if (magic == ((expect_magic >> 24) | ((expect_magic >> 8) & 0xff00u) |
                           ((expect_magic << 8) & 0xff0000u) | (expect_magic << 24)))
            hint = " (byte-swapped: the magic is big-endian)";
        return fail(err, errlen, "'%s': wrong IDX magic at byte offset 0: expected 0x%08x (%s), found 0x%08x%s",
                    name, expect_magic, magic_kind(expect_magic), magic, hint);
    }

    uint64_t hdr = 4 + 4ull * ndim;
    if (len < hdr)
        return fail(err, errlen,
                    "'%s': truncated IDX header: expected %u big-endian uint32 dimension(s) at byte "
                    "offset 4 (header of %llu bytes), but the file ends at byte offset %llu",
                    name, ndim, (unsigned long long)hdr, (unsigned long long)len);
    out->magic = magic;
    out->ndim = ndim;
    uint64_t item = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        out->dims[d] = be32(buf + 4 + 4 * d);
        if (d == 0) continue;
        if (out->dims[d] == 0)
            return fail(err, errlen, "'%s': IDX dimension %u at byte offset %u is 0; expected >= 1",
                        name, d, 4 + 4 * d);
        item *= out->dims[d]; /* <= 2^64 for ndim <= 3: two 32-bit factors */
    }
    uint64_t count = out->dims[0];
    out->count = count;
    out->item_size = item;
    out->data_offset = hdr;
    /* count * item overflows only if item > UINT64_MAX / count: saturate
     * (no file holds that many bytes; callers compare against what they
     * have and name the header's numbers). */
    *data_bytes = count && item > UINT64_MAX / count ? UINT64_MAX : count * item;
    return MXP_OK;
}

int idx_parse_mem(const uint8_t *buf, uint64_t len, uint32_t expect_magic,
                  const char *name, idx_view *out, char *err, size_t errlen) {
    uint64_t need = 0;
    if (!name) name = "<memory>";
    int rc = idx_parse_header(buf, len, expect_magic, name, out, &need, err, errlen);
    if (rc != MXP_OK) {
        if (out) memset(out, 0, sizeof *out);
        return rc;
    }
    uint64_t hdr = out->data_offset, count = out->count, item = out->item_size;
    uint64_t avail = len - hdr;
    if (need > avail) {
        unsigned long long have_items = (unsigned long long)(avail / item);
        memset(out, 0, sizeof *out);
        return fail(err, errlen,
                    "'%s': truncated IDX data: the header declares %llu item(s) of %llu byte(s) from "
                    "byte offset %llu, but the file ends at byte offset %llu (%llu complete item(s))",
                    name, (unsigned long long)count, (unsigned long long)item, (unsigned long long)hdr,
                    (unsigned long long)len, have_items);
    }
    if (avail != need) {
        memset(out, 0, sizeof *out);
        return fail(err, errlen,
                    "'%s': %llu unexpected trailing byte(s) at byte offset %llu: the header declares "
                    "%llu item(s) of %llu byte(s), which end there",
                    name, (unsigned long long)(avail - need), (unsigned long long)(hdr + need),
                    (unsigned long long)count, (unsigned long long)item);
    }
    out->data = buf + hdr;
    return MXP_OK;
}
