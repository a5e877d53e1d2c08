/* mxplug/fileio.h — reading and writing files without hanging, without
 * losing data, and sizes computed from untrusted input without overflow.
 * Part of mxplug.h; include <mxplug.h> rather than this file.
 *
 * Every file mxplug reads goes through mxp_file_open_read (a FIFO, a
 * device or a directory is refused before any read, so `MXP_MANIFEST=fifo`
 * or `library: /dev/zero` cannot hang), and every file it writes through
 * mxp_file_write_atomic (a temporary beside the target, fsync, rename,
 * fsync of the directory: a crash leaves the old file or the new one, never
 * a torn one).  Temporaries are named TARGET.tmp.PID.N; a killed writer
 * leaves one behind, which mxp_file_remove_stale_tmp removes later.
 * Sizes: mxp_size_of_shape is the one overflow-checked element/byte count
 * for shapes that come from files or the command line. */
#ifndef MXPLUG_FILEIO_H
#define MXPLUG_FILEIO_H

#include <mxplug/base.h>

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Open `path` for reading if it is a regular file of at most max_bytes
 * (0: no limit).  what: names the file's role in messages ("manifest").
 * out: the stream (caller fcloses); out_size (optional): its size in bytes.
 * Returns MXP_OK, MXP_EIO (missing, cannot open, or not a regular file:
 * directory, FIFO, device, socket; the message has the OS's reason or the
 * kind of file), MXP_EFORMAT (larger than max_bytes).  Never blocks on a
 * FIFO. */
MXP_API int mxp_file_open_read(const char *path, const char *what, uint64_t max_bytes, FILE **out,
                               uint64_t *out_size);

/* The same checks without opening (for dlopen): `path` names a regular file
 * of at most max_bytes (0: no limit).  out_size optional. */
MXP_API int mxp_file_check_regular(const char *path, const char *what, uint64_t max_bytes, uint64_t *out_size);

/* Writes the content of a file to `f`; returns MXP_OK or an error status
 * with mxp_last_error() set.  Write errors of `f` itself are detected by
 * mxp_file_write_atomic; the writer may ignore fwrite's result. */
typedef int (*mxp_file_writer)(FILE *f, void *ctx);

/* Write `path` atomically: write(f, ctx) into PATH.tmp.PID.N in the same
 * directory, fflush + fsync it, rename it over `path`, fsync the directory.
 * On any failure the temporary is removed and `path` is untouched.
 * Returns MXP_OK, the writer's status, or MXP_EIO naming the file, the step
 * and the OS's reason. */
MXP_API int mxp_file_write_atomic(const char *path, const char *what, mxp_file_writer writer, void *ctx);

/* Remove temporaries left by killed writers of files whose name starts with
 * `prefix` (a path: DIR/NAME): every DIR/NAME*.tmp.PID.N whose process PID
 * no longer exists.  Temporaries of live processes are kept.  out_removed
 * (optional): how many were removed.  Returns MXP_OK or MXP_EIO when DIR
 * cannot be read. */
MXP_API int mxp_file_remove_stale_tmp(const char *prefix, int *out_removed);

/* Elements and bytes of a shape from untrusted input: every dim >= 0,
 * ndim in [0, MXP_MAX_NDIM], elements * elem_size + extra without overflow
 * of int64/size_t.  out_elems, out_bytes optional.  Returns MXP_OK or
 * MXP_EINVAL with a message naming `what`, the dimension and the limit. */
MXP_API int mxp_size_of_shape(const char *what, const int64_t *shape, int ndim, size_t elem_size, size_t extra,
                              int64_t *out_elems, size_t *out_bytes);

#ifdef __cplusplus
}
#endif
#endif /* MXPLUG_FILEIO_H */
