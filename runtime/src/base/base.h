/* base.h — what every runtime source file includes: the public API, the
 * internal error and log helpers, and the assertion rules.
 *
 * Internal functions used across files are named mxp__<module>_<verb>.
 * Programmer errors are MXP_ASSERT (debug builds); input errors always
 * return a status through mxp__error().  Nothing here calls abort() except
 * mxp__fatal(), which logs first. */
#ifndef MXP_BASE_BASE_H
#define MXP_BASE_BASE_H

#include "mxplug.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* Set the calling thread's last-error message and return `status`, so that
 * failure paths read:  return mxp__error(MXP_EINVAL, "op '%s': ...", name); */
int mxp__error(int status, const char *fmt, ...) MXP_PRINTF(2, 3);
int mxp__errorv(int status, const char *fmt, va_list ap);

/* Prefix the current message with context ("loading pack 'x': <old>") and
 * return `status`. */
int mxp__error_prefix(int status, const char *fmt, ...) MXP_PRINTF(2, 3);

/* Out-of-memory without allocating: sets a static message. */
int mxp__error_oom(const char *what);

/* Application value structs (mxplug/base.h): copy the caller's struct
 * into a zeroed full-size local, so fields its version lacks read as 0.
 * src's struct_size 0 reads as v1_size (the 1.0 layout: sizes through the
 * last 1.0 field, MXP__SIZE_THROUGH).  dst's struct_size is set to
 * dst_size.  mxp__app_struct_out: the reverse, for structs the library
 * fills: at most the caller's size is written, its struct_size kept. */
#define MXP__SIZE_THROUGH(T, field) (offsetof(T, field) + sizeof(((T *)0)->field))
void mxp__app_struct_in(void *dst, size_t dst_size, const void *src, size_t v1_size);
void mxp__app_struct_out(void *dst, const void *src, size_t full_size, size_t v1_size);

/* Clear the calling thread's message. */
void mxp__error_clear(void);

/* Unrecoverable corruption: log, call the hook if set, then abort. */
_Noreturn void mxp__fatal(const char *fmt, ...) MXP_PRINTF(1, 2);

/* Shapes (shape.c): all dims known (ndim >= 0, every dim > 0); equal;
 * printed as MXNet does, "(2, 3)", "(5,)", "?" for an unknown rank. */
int mxp__shape_known(const mxp_shape *s);
int mxp__shape_eq(const mxp_shape *a, const mxp_shape *b);
void mxp__shape_str(const mxp_shape *s, char *buf, size_t cap);
/* MXNet's tuple text, the one grammar for op parameters and __shape__:
 * "(5, 5)" "(5,)" "[2,3]" "5" "()" with blanks anywhere, and Python 2's
 * long suffix ("(8L, 3L)").  "None" is not a tuple here (callers decide).
 * dims[0..*out_n) get the values (negative values are returned as such).
 * Returns MXP_OK, MXP_EINVAL when malformed, MXP_EFORMAT when more than
 * cap values. */
int mxp__tuple_parse(const char *txt, int64_t *dims, int cap, int *out_n);

/* A growable NUL-terminated string (strbuf.c).  Zero-initialise; the caller
 * frees `buf` with free().  Appends after a failed allocation are no-ops
 * and leave `oom` set. */
typedef struct mxp__strbuf {
    char *buf;
    size_t len, cap;
    int oom;
} mxp__strbuf;
void mxp__strbuf_addf(mxp__strbuf *s, const char *fmt, ...) MXP_PRINTF(2, 3);
void mxp__strbuf_vaddf(mxp__strbuf *s, const char *fmt, va_list ap);

#ifdef NDEBUG
#define MXP_ASSERT(cond) ((void)0)
#else
#define MXP_ASSERT(cond) \
    ((cond) ? (void)0 : mxp__fatal("assertion failed: %s (%s:%d)", #cond, __FILE__, __LINE__))
#endif

#define MXP_LOGE(cat, ...) mxp_log(MXP_LOG_ERROR, cat, __VA_ARGS__)
#define MXP_LOGW(cat, ...) mxp_log(MXP_LOG_WARN, cat, __VA_ARGS__)
#define MXP_LOGI(cat, ...) mxp_log(MXP_LOG_INFO, cat, __VA_ARGS__)
#define MXP_LOGD(cat, ...) \
    do { if (mxp_log_enabled(MXP_LOG_DEBUG, cat)) mxp_log(MXP_LOG_DEBUG, cat, __VA_ARGS__); } while (0)

#define MXP_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif /* MXP_BASE_BASE_H */
