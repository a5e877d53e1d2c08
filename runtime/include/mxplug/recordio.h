/* mxplug/recordio.h — MXNet RecordIO files (`.rec` + optional `.idx`).
 * Part of mxplug.h; include <mxplug.h> rather than this file.
 *
 * The byte format is dmlc-core's: each chunk is the magic 0xced7230a, a
 * length word (bits 29-31: continuation flag), the payload, zero padding to
 * 4 bytes; a payload holding the magic at a 4-aligned offset is split into
 * parts there.  Files written here read in MXNet (mx.recordio) and the other
 * way round.  `.idx` is text, one "key<TAB>byte offset" line per record.
 * Image records (im2rec, ImageRecordIter) start with MXNet's 24-byte
 * IRHeader; mxp_recordio_write_image / mxp_recordio_unpack_image handle it.
 *
 * A reader maps the file read-only; the data a read returns is owned by the
 * reader and valid until its next read or close.  A writer writes to
 * "<path>.tmp" (and "<idx>.tmp"), and close flushes, fsyncs and renames them
 * into place, so a crash never leaves a half-written file under the name.
 * One thread per handle.  Since ABI 1.0 (added in 0.1.0). */
#ifndef MXPLUG_RECORDIO_H
#define MXPLUG_RECORDIO_H

#include <mxplug/base.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mxp_recordio mxp_recordio;

/* Open path for reading; idx_path (may be NULL) is loaded and checked
 * (every offset inside the file and 4-aligned).
 * Returns MXP_OK, MXP_EINVAL, MXP_EIO (names the path), MXP_EFORMAT (the
 * index: names the line), MXP_ENOMEM. */
MXP_API int mxp_recordio_open_read(const char *path, const char *idx_path, mxp_recordio **out);

/* Create path (and idx_path when not NULL) for writing, replacing them at
 * close.  Returns MXP_OK, MXP_EINVAL, MXP_EIO, MXP_ENOMEM. */
MXP_API int mxp_recordio_open_write(const char *path, const char *idx_path, mxp_recordio **out);

/* Reader: the record at the current position; *out_has 0 at the end of the
 * file (then MXP_OK).  Returns MXP_OK, MXP_EFORMAT (bad magic, truncated,
 * bad continuation: the message names the byte offset), MXP_EMISUSE on a
 * writer. */
MXP_API int mxp_recordio_read_next(mxp_recordio *r, const void **out_data, uint64_t *out_len, int *out_has);

/* Reader with an index: the record with `key`.  MXP_ENOENT for an unknown
 * key, MXP_EMISUSE without an index. */
MXP_API int mxp_recordio_read_key(mxp_recordio *r, uint64_t key, const void **out_data, uint64_t *out_len);

/* Reader: move to a byte offset (the start of a record) / where it is. */
MXP_API int mxp_recordio_seek(mxp_recordio *r, uint64_t offset);
MXP_API uint64_t mxp_recordio_tell(const mxp_recordio *r);

/* Reader with an index: its keys in file order (owned by r). */
MXP_API int mxp_recordio_keys(const mxp_recordio *r, const uint64_t **out_keys, uint64_t *out_n);

/* Writer: append a record (len < 2^29).  With an index, write_key also adds
 * "key<TAB>offset"; write adds no index line. */
MXP_API int mxp_recordio_write(mxp_recordio *w, const void *data, uint64_t len);
MXP_API int mxp_recordio_write_key(mxp_recordio *w, uint64_t key, const void *data, uint64_t len);

/* Close.  Writer: flush, fsync, rename into place; on failure the
 * temporaries are removed and the error returned.  NULL is a no-op. */
MXP_API int mxp_recordio_close(mxp_recordio *r);

/* MXNet's IRHeader.  flag > 0: that many float labels follow the header
 * (label is then unused, 0 by convention). */
typedef struct mxp_recordio_header {
    uint32_t flag;
    float label;
    uint64_t id;
    uint64_t id2;
} mxp_recordio_header;

/* Writer: append header, h->flag labels (labels may be NULL when flag is
 * 0) and the encoded image, as one record under key h->id. */
MXP_API int mxp_recordio_write_image(mxp_recordio *w, const mxp_recordio_header *h, const float *labels,
                                     const void *image, uint64_t image_len);

/* Split a record into its header, up to labels_cap labels (copied), and
 * the image bytes (pointing into data).  MXP_EFORMAT when too short. */
MXP_API int mxp_recordio_unpack_image(const void *data, uint64_t len, mxp_recordio_header *out_header,
                                      float *labels, uint32_t labels_cap, const void **out_image,
                                      uint64_t *out_image_len);

#ifdef __cplusplus
}
#endif
#endif /* MXPLUG_RECORDIO_H */
