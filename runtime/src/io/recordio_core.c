/* io/recordio_core.c — RecordIO chunks, IRHeader and `.idx` parsing over
 * memory (see recordio_core.h for the format).  Shared by the runtime and
 * the io-image pack, so it calls nothing but libc.  Invariants: a parsed
 * record never reads outside buf[0..size); the encoder's output parses back
 * to its input (the writer drops each 4-aligned magic and the reader puts
 * it back). */
#include "recordio_core.h"

#include <mxp/types.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint64_t pad4(uint64_t n) { return (n + 3u) & ~(uint64_t)3u; }

void mxp__rec_scratch_free(mxp__rec_scratch *s) {
    if (!s) return;
    free(s->data);
    s->data = NULL;
    s->cap = 0;
}

static int reserve(mxp__rec_scratch *s, uint64_t need) {
    if (need <= s->cap) return MXP_OK;
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < need) cap *= 2;
    uint8_t *d = realloc(s->data, cap);
    if (!d) return MXP_ENOMEM;
    s->data = d;
    s->cap = cap;
    return MXP_OK;
}

/* One chunk at off: its cflag, payload [*pay, *pay+*len), next offset. */
static int chunk_at(const uint8_t *buf, uint64_t size, uint64_t off, uint32_t *cflag, uint64_t *pay,
                    uint64_t *len, char *err, size_t errlen) {
    if (off > size || size - off < 8) {
        snprintf(err, errlen, "truncated record header at byte offset %" PRIu64 " (file has %" PRIu64 " bytes)",
                 off, size);
        return MXP_EFORMAT;
    }
    uint32_t magic = get_u32(buf + off);
    if (magic != MXP__REC_MAGIC) {
        snprintf(err, errlen, "bad magic 0x%08" PRIx32 " at byte offset %" PRIu64 " (expected 0x%08x)", magic, off,
                 MXP__REC_MAGIC);
        return MXP_EFORMAT;
    }
    uint32_t lrec = get_u32(buf + off + 4);
    *cflag = lrec >> 29;
    *len = lrec & MXP__REC_MAX_LEN;
    *pay = off + 8;
    if (size - *pay < *len) {
        snprintf(err, errlen, "truncated record at byte offset %" PRIu64 ": length %" PRIu64 " but only %" PRIu64
                 " bytes left", off, *len, size - *pay);
        return MXP_EFORMAT;
    }
    return MXP_OK;
}

int mxp__rec_parse(const uint8_t *buf, uint64_t size, uint64_t off, mxp__rec_scratch *s,
                   const uint8_t **out_data, uint64_t *out_len, uint64_t *out_next, char *err,
                   size_t errlen) {
    *out_data = NULL;
    *out_len = 0;
    *out_next = off;
    if (errlen) err[0] = '\0';
    uint32_t cflag;
    uint64_t pay, len;
    int rc = chunk_at(buf, size, off, &cflag, &pay, &len, err, errlen);
    if (rc != MXP_OK) return rc;
    uint64_t next = pay + pad4(len);
    if (next > size) next = size; /* a missing final pad is tolerated */
    if (cflag == 0) {
        *out_data = buf + pay;
        *out_len = len;
        *out_next = next;
        return MXP_OK;
    }
    if (cflag != 1) {
        snprintf(err, errlen, "record at byte offset %" PRIu64 " starts with continuation flag %" PRIu32
                 " (a record starts with 0 or 1)", off, cflag);
        return MXP_EFORMAT;
    }
    uint64_t total = len;
    if (reserve(s, total + 4) != MXP_OK) goto oom; /* never 0 bytes: s->data must not be NULL */
    if (len) memcpy(s->data, buf + pay, len);
    for (;;) {
        uint64_t at = next;
        rc = chunk_at(buf, size, at, &cflag, &pay, &len, err, errlen);
        if (rc != MXP_OK) return rc;
        if (cflag != 2 && cflag != 3) {
            snprintf(err, errlen, "split record at byte offset %" PRIu64 ": part at %" PRIu64
                     " has continuation flag %" PRIu32 " (expected 2 or 3)", off, at, cflag);
            return MXP_EFORMAT;
        }
        if (total + 4 + len > MXP__REC_MAX_LEN * (uint64_t)8) {
            snprintf(err, errlen, "split record at byte offset %" PRIu64 " is too long", off);
            return MXP_EFORMAT;
        }
        if (reserve(s, total + 4 + len) != MXP_OK) goto oom;
        put_u32(s->data + total, MXP__REC_MAGIC);
        if (len) memcpy(s->data + total + 4, buf + pay, len);
        total += 4 + len;
        next = pay + pad4(len);
        if (next > size) next = size;
        if (cflag == 3) break;
    }
    *out_data = s->data;
    *out_len = total;
    *out_next = next;
    return MXP_OK;
oom:
    snprintf(err, errlen, "out of memory assembling the split record at byte offset %" PRIu64, off);
    return MXP_ENOMEM;
}

/* Calls emit(part, cflag) for each chunk of the encoding, in order. */
typedef void (*emit_fn)(void *ctx, const uint8_t *p, uint64_t n, uint32_t cflag);

static void split(const uint8_t *data, uint64_t len, emit_fn emit, void *ctx) {
    uint64_t start = 0;
    uint64_t lower = len & ~(uint64_t)3u;
    for (uint64_t i = 0; i < lower; i += 4) {
        if (get_u32(data + i) == MXP__REC_MAGIC) {
            emit(ctx, data + start, i - start, start == 0 ? 1u : 2u);
            start = i + 4;
        }
    }
    emit(ctx, data + start, len - start, start == 0 ? 0u : 3u);
}

static void count_chunk(void *ctx, const uint8_t *p, uint64_t n, uint32_t cflag) {
    (void)p;
    (void)cflag;
    *(uint64_t *)ctx += 8 + pad4(n);
}

uint64_t mxp__rec_encoded_size(const uint8_t *data, uint64_t len) {
    if (len > MXP__REC_MAX_LEN) return 0;
    uint64_t n = 0;
    split(data, len, count_chunk, &n);
    return n;
}

static void write_chunk(void *ctx, const uint8_t *p, uint64_t n, uint32_t cflag) {
    uint8_t **out = ctx;
    put_u32(*out, MXP__REC_MAGIC);
    put_u32(*out + 4, cflag << 29 | (uint32_t)n);
    if (n) memcpy(*out + 8, p, n);
    memset(*out + 8 + n, 0, pad4(n) - n);
    *out += 8 + pad4(n);
}

void mxp__rec_encode(const uint8_t *data, uint64_t len, uint8_t *out) {
    split(data, len, write_chunk, &out);
}

/* ------------------------------------------------------------- IRHeader */
static uint64_t get_u64(const uint8_t *p) { return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

float mxp__rec_label_at(const uint8_t *labels, uint32_t i) {
    float f;
    memcpy(&f, labels + 4 * (size_t)i, 4);
    return f;
}

int mxp__rec_image_split(const uint8_t *payload, uint64_t len, mxp__rec_image_header *h,
                         const uint8_t **out_labels, const uint8_t **out_image, uint64_t *out_image_len) {
    if (len < MXP__REC_IMAGE_HEADER) return MXP_EFORMAT;
    h->flag = get_u32(payload);
    memcpy(&h->label, payload + 4, 4);
    h->id = get_u64(payload + 8);
    h->id2 = get_u64(payload + 16);
    uint64_t lab = (uint64_t)h->flag * 4;
    if (len - MXP__REC_IMAGE_HEADER < lab) return MXP_EFORMAT;
    *out_labels = payload + MXP__REC_IMAGE_HEADER;
    *out_image = payload + MXP__REC_IMAGE_HEADER + lab;
    *out_image_len = len - MXP__REC_IMAGE_HEADER - lab;
    return MXP_OK;
}

void mxp__rec_image_header_put(const mxp__rec_image_header *h, uint8_t *out) {
    put_u32(out, h->flag);
    memcpy(out + 4, &h->label, 4);
    put_u32(out + 8, (uint32_t)h->id);
    put_u32(out + 12, (uint32_t)(h->id >> 32));
    put_u32(out + 16, (uint32_t)h->id2);
    put_u32(out + 20, (uint32_t)(h->id2 >> 32));
}

/* ------------------------------------------------------------------ .idx */
static int parse_u64(const char **p, const char *end, uint64_t *out) {
    const char *s = *p;
    uint64_t v = 0;
    if (s >= end || *s < '0' || *s > '9') return 0;
    while (s < end && *s >= '0' && *s <= '9') {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
        s++;
    }
    *p = s;
    *out = v;
    return 1;
}

int mxp__rec_idx_parse(const char *text, size_t len, uint64_t rec_size, uint64_t **out_keys,
                       uint64_t **out_offsets, uint64_t *out_n, char *err, size_t errlen) {
    *out_keys = NULL;
    *out_offsets = NULL;
    *out_n = 0;
    uint64_t lines = 0;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    lines++;
    uint64_t *keys = malloc(lines * sizeof *keys);
    uint64_t *offs = malloc(lines * sizeof *offs);
    if (!keys || !offs) {
        free(keys);
        free(offs);
        snprintf(err, errlen, "out of memory for %" PRIu64 " index lines", lines);
        return MXP_ENOMEM;
    }
    const char *p = text, *end = text + len;
    uint64_t n = 0, line = 0;
    while (p < end) {
        line++;
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        const char *q = p;
        while (q < eol && (*q == ' ' || *q == '\r')) q++;
        if (q == eol) { /* blank line */
            p = eol + 1;
            continue;
        }
        uint64_t k, o;
        int ok = parse_u64(&q, eol, &k);
        if (ok) {
            if (q < eol && (*q == '\t' || *q == ' ')) {
                while (q < eol && (*q == '\t' || *q == ' ')) q++;
                ok = parse_u64(&q, eol, &o);
            } else {
                ok = 0;
            }
        }
        while (ok && q < eol && (*q == ' ' || *q == '\r' || *q == '\t')) q++;
        if (!ok || q != eol) {
            snprintf(err, errlen, "line %" PRIu64 ": expected 'key<TAB>offset'", line);
            goto bad;
        }
        if (o >= rec_size || o % 4) {
            snprintf(err, errlen, "line %" PRIu64 ": key %" PRIu64 " has offset %" PRIu64 ", %s (record file has %"
                     PRIu64 " bytes)", line, k, o, o % 4 ? "not a multiple of 4" : "past the end", rec_size);
            goto bad;
        }
        keys[n] = k;
        offs[n] = o;
        n++;
        p = eol + 1;
    }
    *out_keys = keys;
    *out_offsets = offs;
    *out_n = n;
    return MXP_OK;
bad:
    free(keys);
    free(offs);
    return MXP_EFORMAT;
}
