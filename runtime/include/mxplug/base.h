/* mxplug/base.h — errors, logging, versions, dtype names.  Part of mxplug.h;
 * include <mxplug.h> rather than this file. */
#ifndef MXPLUG_BASE_H
#define MXPLUG_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <mxp/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MXP_API __attribute__((visibility("default")))
#define MXP_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MXP_API
#define MXP_PRINTF(a, b)
#endif

/* ============================================================ errors */

/* The message of the last failure on the calling thread: what, why, where.
 * Valid until the next mxplug call on this thread; meaningful only right
 * after a call returned an error.  Never NULL (empty when none). */
MXP_API const char *mxp_last_error(void);

/* Static name ("MXP_EINVAL") and description ("invalid argument") of a
 * status code.  Never allocate; unknown codes give "MXP_E?" / "unknown status". */
MXP_API const char *mxp_status_name(int status);
MXP_API const char *mxp_status_str(int status);

/* Free a string (or array) the library returned and documented as "free
 * with mxp_free": it was allocated by the library's allocator, which may not
 * be the application's (a static link, another C runtime).  NULL is a no-op. */
MXP_API void mxp_free(void *p);

/* ============================================================ value structs
 * The application structs passed by value or pointer (mxp_engine_push_args,
 * mxp_invoke_opts, mxp_fit_opts, mxp_init, mxp_storage_stats, mxp_run_ctx)
 * open with `uint32_t struct_size`: set it to sizeof(the struct) as you
 * compiled it (MXP_STRUCT_INIT does), so a later 1.x library that appended
 * fields reads only those you know of and treats the rest as 0.  0 is read
 * as the 1.0 layout.  Structs the library fills (mxp_storage_stats,
 * mxp_run_ctx) are filled only up to the size given / carry the library's. */
#define MXP_STRUCT_INIT(type) {.struct_size = (uint32_t)sizeof(type)}

/* Version of the library (e.g. "0.1.0") and the plugin ABI it hosts. */
MXP_API const char *mxp_version(void);
MXP_API void mxp_abi_version(uint16_t *out_major, uint16_t *out_minor);

/* ============================================================ logging */

/* A log sink receives every message at or above the current level.
 * category: module name ("engine", "plugin", or a pack name). */
typedef void (*mxp_log_sink)(int level, const char *category, const char *message, void *user);

/* Log through the current sink.  Thread-safe. */
MXP_API void mxp_log(int level, const char *category, const char *fmt, ...) MXP_PRINTF(3, 4);
MXP_API void mxp_logv(int level, const char *category, const char *fmt, va_list ap);

/* Replace the sink (NULL restores the default, which writes to stderr). */
MXP_API void mxp_log_set_sink(mxp_log_sink sink, void *user);

/* Set the level: a global one, or per category.  The environment variable
 * MXP_LOG_LEVEL takes the same spec, e.g. "info" or "warn,engine=debug".
 * Returns MXP_EINVAL for an unknown level name. */
MXP_API int mxp_log_set_level(const char *spec);

/* True when a message of this level and category would be emitted. */
MXP_API int mxp_log_enabled(int level, const char *category);

/* Name of a dtype ("float32", ...) or NULL; and the reverse lookup, which
 * accepts MXNet's names ("float32", "float16", "uint8", ...). */
MXP_API const char *mxp_dtype_name(int dtype);
MXP_API int mxp_dtype_from_name(const char *name, int *out_dtype);

#ifdef __cplusplus
}
#endif
#endif /* MXPLUG_BASE_H */
