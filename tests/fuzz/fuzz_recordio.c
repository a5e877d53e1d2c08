/* fuzz_recordio.c — libFuzzer harness for the RecordIO format functions
 * (runtime/src/io/recordio_core.c, part of the runtime objects the fuzz
 * build links).
 *
 * The input is walked as a `.rec` file record by record (as the public
 * reader and ImageRecordIter's scan do), each payload split as an image
 * record, and also parsed as `.idx` text.  Properties checked: no crash or
 * sanitizer report; every failure is MXP_EFORMAT or MXP_ENOMEM with a
 * message; an accepted record lies inside the input (single chunk) or in
 * the scratch buffer, and the walk always moves forward; re-encoding an
 * accepted payload and parsing that gives the payload back; every index
 * offset is inside the file and 4-aligned.  The input is copied to an
 * exact-size heap buffer so ASan sees any over-read. */
#include "../../runtime/src/io/recordio_core.h"

#include <mxp/types.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void roundtrip(const uint8_t *p, uint64_t n) {
    uint64_t m = mxp__rec_encoded_size(p, n);
    if (!m) abort();
    uint8_t *enc = malloc(m);
    mxp__rec_encode(p, n, enc);
    mxp__rec_scratch s = {0};
    const uint8_t *d;
    uint64_t len, next;
    char err[256];
    if (mxp__rec_parse(enc, m, 0, &s, &d, &len, &next, err, sizeof err) != MXP_OK) abort();
    if (len != n || next != m || (n && memcmp(d, p, n))) abort();
    mxp__rec_scratch_free(&s);
    free(enc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    mxp__rec_scratch s = {0};
    uint64_t off = 0;
    int records = 0;
    while (off < size && records < 64) {
        const uint8_t *d;
        uint64_t len, next;
        char err[256];
        err[0] = 0;
        int rc = mxp__rec_parse(buf, size, off, &s, &d, &len, &next, err, sizeof err);
        if (rc != MXP_OK) {
            if ((rc != MXP_EFORMAT && rc != MXP_ENOMEM) || !err[0]) abort();
            break;
        }
        if (next <= off || next > size) abort();
        int inside = d >= buf && d + len <= buf + size;
        int in_scratch = s.data && d == s.data && len <= s.cap;
        if (!inside && !in_scratch && len) abort();
        volatile uint8_t sink = 0;
        for (uint64_t i = 0; i < len; i++) sink ^= d[i];
        (void)sink;
        mxp__rec_image_header h;
        const uint8_t *lab, *img;
        uint64_t img_len;
        if (mxp__rec_image_split(d, len, &h, &lab, &img, &img_len) == MXP_OK) {
            if (img + img_len != d + len) abort();
            for (uint32_t i = 0; i < h.flag; i++) (void)mxp__rec_label_at(lab, i);
        }
        if (len < 4096) roundtrip(d, len);
        off = next;
        records++;
    }
    mxp__rec_scratch_free(&s);
    uint64_t *keys, *offs, n;
    char err[256];
    err[0] = 0;
    int rc = mxp__rec_idx_parse((const char *)buf, size, 1u << 20, &keys, &offs, &n, err, sizeof err);
    if (rc == MXP_OK) {
        for (uint64_t i = 0; i < n; i++)
            if (offs[i] >= (1u << 20) || offs[i] % 4) abort();
        free(keys);
        free(offs);
    } else if ((rc != MXP_EFORMAT && rc != MXP_ENOMEM) || !err[0]) {
        abort();
    }
    free(buf);
    return 0;
}
