/* io/recordio_core.h — MXNet's RecordIO byte format (dmlc-core recordio),
 * as pure functions over memory: parse one record at an offset, encode one
 * record, parse the image record header (IRHeader), parse an `.idx` text
 * index.  No files, no allocation except the caller's scratch buffer, no
 * runtime calls: the same object is linked into the runtime (recordio.c,
 * the public mxp_recordio_* API) and into the io-image pack.
 *
 * Format (little-endian): each chunk is `u32 magic 0xced7230a`, `u32 lrec`
 * with cflag = lrec >> 29 and length = lrec & (2^29-1), `length` payload
 * bytes, zero padding to 4 bytes.  cflag 0 is a whole record; 1/2/3 are the
 * first/middle/last parts of a record that the writer split where the magic
 * occurred at a 4-aligned offset of the payload (those 4 bytes are dropped
 * and the reader puts them back between parts).
 * Errors return an MXP_* status and write a message naming the byte offset
 * into err (never NULL-terminated garbage: err always ends with '\0'). */
#ifndef MXP_IO_RECORDIO_CORE_H
#define MXP_IO_RECORDIO_CORE_H

#include <stddef.h>
#include <stdint.h>

#define MXP__REC_MAGIC 0xced7230au
#define MXP__REC_MAX_LEN ((1u << 29) - 1u)
#define MXP__REC_IMAGE_HEADER 24u

/* Growable buffer for records assembled from several parts. */
typedef struct mxp__rec_scratch {
    uint8_t *data;
    size_t cap;
} mxp__rec_scratch;

void mxp__rec_scratch_free(mxp__rec_scratch *s);

/* Parse the record whose first chunk starts at `off` of buf[0..size).
 * out_data/out_len: the payload (inside buf for a single chunk, inside
 * s->data for a split record); out_next: offset after its last chunk.
 * Returns MXP_OK, MXP_EFORMAT (bad magic, bad continuation, truncated; the
 * message names the offset) or MXP_ENOMEM. */
int mxp__rec_parse(const uint8_t *buf, uint64_t size, uint64_t off, mxp__rec_scratch *s,
                   const uint8_t **out_data, uint64_t *out_len, uint64_t *out_next, char *err,
                   size_t errlen);

/* Bytes the encoding of data[0..len) takes (0 when len > MXP__REC_MAX_LEN). */
uint64_t mxp__rec_encoded_size(const uint8_t *data, uint64_t len);
/* Write the encoding into out (mxp__rec_encoded_size bytes). */
void mxp__rec_encode(const uint8_t *data, uint64_t len, uint8_t *out);

/* IRHeader: flag (number of float labels that follow when > 0), label
 * (the label when flag == 0), id, id2. */
typedef struct mxp__rec_image_header {
    uint32_t flag;
    float label;
    uint64_t id, id2;
} mxp__rec_image_header;

/* Split a payload into header, labels (flag floats, unaligned: read with
 * mxp__rec_label_at) and the encoded image.  MXP_EFORMAT when too short. */
int mxp__rec_image_split(const uint8_t *payload, uint64_t len, mxp__rec_image_header *h,
                         const uint8_t **out_labels, const uint8_t **out_image, uint64_t *out_image_len);
float mxp__rec_label_at(const uint8_t *labels, uint32_t i);
/* Write the 24-byte header into out. */
void mxp__rec_image_header_put(const mxp__rec_image_header *h, uint8_t *out);

/* Parse `.idx` text (key\toffset lines) into keys/offsets (malloc'd, caller
 * frees), checking each offset < rec_size.  Returns MXP_OK, MXP_EFORMAT
 * (message names the line) or MXP_ENOMEM. */
int mxp__rec_idx_parse(const char *text, size_t len, uint64_t rec_size, uint64_t **out_keys,
                       uint64_t **out_offsets, uint64_t *out_n, char *err, size_t errlen);

#endif /* MXP_IO_RECORDIO_CORE_H */
