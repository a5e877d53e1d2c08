/* idx.h — the IDX file format (LeCun's MNIST container) as io-image reads it.
 *
 * An IDX file is a 4-byte magic (0x00 0x00 <type> <ndim>), ndim big-endian
 * uint32 dimensions, then the elements in row-major order.  This reader
 * accepts only unsigned-byte files (type 0x08) with the exact magic the
 * caller expects (0x00000801 labels, 0x00000803 images).
 *
 * idx_parse_header validates the magic and dimensions and says how many
 * data bytes they declare (checked without overflow); idx_parse_mem
 * validates a whole file image in memory and returns a view into it (no
 * allocation, so it is what the fuzz harness drives); idx_load reads a
 * file, gzipped or not, and parses it, streaming the decompression into a
 * buffer of exactly the declared size after checking that size against
 * what the file can hold (idx_file.c).  The data length must equal the
 * product of the dimensions exactly.  Errors are written to a caller
 * buffer: the file name, what was expected, what was found and the byte
 * offset.  Not thread-safe per object; no global state. */
#ifndef MXP_IO_IMAGE_IDX_H
#define MXP_IO_IMAGE_IDX_H

#include <stddef.h>
#include <stdint.h>

#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAX_NDIM 3
/* Refuse files that decompress beyond this (a gzip bomb, or not MNIST). */
#define IDX_MAX_BYTES ((uint64_t)4 << 30)

/* A parsed file: dims[0] items of item_size bytes at data. */
typedef struct idx_view {
    uint32_t magic;
    uint32_t ndim;
    uint32_t dims[IDX_MAX_NDIM];
    uint64_t count;        /* dims[0]                                   */
    uint64_t item_size;    /* product of dims[1..ndim), 1 for labels    */
    uint64_t data_offset;  /* bytes of header before data               */
    const uint8_t *data;   /* count * item_size bytes                   */
} idx_view;

/* A file loaded into memory; view.data points into buf. */
typedef struct idx_file {
    uint8_t *buf;
    uint64_t len;
    idx_view view;
} idx_file;

/* Validate the header at buf[0..len) (len may be just the header) for
 * magic `expect_magic`: fills out's magic, dims, count, item_size and
 * data_offset (out->data stays NULL) and *data_bytes = count * item_size
 * (UINT64_MAX when that overflows).
 * MXP_EFORMAT with a message naming `name` and the offset otherwise. */
int idx_parse_header(const uint8_t *buf, uint64_t len, uint32_t expect_magic, const char *name, idx_view *out,
                     uint64_t *data_bytes, char *err, size_t errlen);

/* Validate buf[0..len) as an IDX file with magic `expect_magic`.  `name`
 * (a path or "<memory>") is used in messages.  Returns 0 (MXP_OK) or a
 * negative mxp status (MXP_EFORMAT) with a message in err[errlen]. */
int idx_parse_mem(const uint8_t *buf, uint64_t len, uint32_t expect_magic,
                  const char *name, idx_view *out, char *err, size_t errlen);

/* Read `path` (plain or gzip) and parse it.  MXP_EIO when it cannot be
 * opened or read, MXP_ENOMEM, MXP_EFORMAT.  Free with idx_file_free. */
int idx_load(const char *path, uint32_t expect_magic, idx_file *out,
             char *err, size_t errlen);
void idx_file_free(idx_file *f);

#endif /* MXP_IO_IMAGE_IDX_H */
