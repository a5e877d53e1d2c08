/* mxp/types.h — the vocabulary shared by the host, its applications and every
 * pack: status codes, element types, devices, the common struct header and
 * the versioning rule.  Nothing here allocates or calls into the host.
 *
 * Versioning rule (ABI 1.x), stated once:
 *   - A pack is built against MXP_ABI_MAJOR.MXP_ABI_MINOR and declares
 *     min_host_minor, the oldest host minor it needs.
 *   - The host refuses a pack whose major differs from its own, and a pack
 *     whose min_host_minor is newer than the host's minor.
 *   - Otherwise it loads.  Every boundary struct begins with mxp_header; a
 *     reader uses a field only when the writer's struct_size covers it
 *     (MXP_HAS_FIELD), and a NULL function slot means "absent".
 *   - Structs and enums are append-only; numbers are explicit and never
 *     reused; no bool/long/size_t/bitfields in layouts.  Released layouts are
 *     frozen by _Static_assert(offsetof(...)) in each header (LP64 only) and
 *     by tests/unit/abi/test_layout.c.
 * Minors: 1.0 the first release; 1.1 typed reads of an op's parsed
 * parameters from any pack (mxp_op_params in params.h, the op_params field
 * of the impl args in op.h, mxp_host.param_get and the mxp_param_get_*
 * helpers in host.h); 1.2 counters a pack publishes (stats.h:
 * mxp_stat_def and the mxp_stat_* helpers; mxp_registrar.add_stat and
 * mxp_registrar_add_stat in host.h); 1.3 supports() may answer
 * MXP_SUPPORTS_FALLBACK (op.h: runs the configuration, but `auto` prefers
 * any impl that accepts it outright), and the op flag MXP_OP_IDENTITY_GRAD
 * (op.h; MXP_SIMPLE_IDENTITY_GRAD in simple_op.h).
 * Since ABI 1.0. */
#ifndef MXP_TYPES_H
#define MXP_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MXP_ABI_MAJOR 1
#define MXP_ABI_MINOR 3

/* Every struct that crosses the host/pack boundary starts with this. */
typedef struct mxp_header {
    uint32_t struct_size; /* sizeof the struct as the writer compiled it   */
    uint16_t abi_major;   /* MXP_ABI_MAJOR of the writer                   */
    uint16_t abi_minor;   /* MXP_ABI_MINOR of the writer                   */
} mxp_header;

/* Initializer for the header of a struct of type T:  { MXP_HEADER(T), ... } */
#define MXP_HEADER(T) { (uint32_t)sizeof(T), MXP_ABI_MAJOR, MXP_ABI_MINOR }

/* True when the struct *p (of type T, first member `hdr`) is large enough,
 * as its writer declared, to contain FIELD. */
#define MXP_HAS_FIELD(p, T, FIELD) \
    ((p)->hdr.struct_size >= offsetof(T, FIELD) + sizeof(((T *)0)->FIELD))

/* Element I of an array of boundary structs of type T whose stride is the
 * writer's struct_size (taken from element 0), so a newer writer's larger
 * elements are stepped over correctly. */
#define MXP_ARRAY_AT(T, base, i) \
    ((const T *)(const void *)((const char *)(base) + \
        (size_t)(i) * ((const T *)(base))->hdr.struct_size))

/* ------------------------------------------------------------------ status */
/* Status codes: 0 is success, errors are negative.  One table generates the
 * enum, mxp_status_name() and mxp_status_str().  Append only. */
#define MXP_STATUS_MAP(X)                                                   \
    X(OK,           0,  "success")                                          \
    X(EINVAL,      -1,  "invalid argument")                                 \
    X(ENOMEM,      -2,  "out of memory")                                    \
    X(ENOENT,      -3,  "not found")                                        \
    X(EIO,         -4,  "input/output error")                               \
    X(EFORMAT,     -5,  "malformed data")                                   \
    X(EABI,        -6,  "incompatible plugin ABI")                          \
    X(ESHAPE,      -7,  "shape mismatch")                                   \
    X(ETYPE,       -8,  "type mismatch")                                    \
    X(EEXIST,      -9,  "already exists")                                   \
    X(EUNSUPPORTED,-10, "not supported")                                    \
    X(EMISUSE,     -11, "API misuse")                                       \
    X(EBUSY,       -12, "resource busy")                                    \
    X(ETIMEDOUT,   -13, "timed out")                                        \
    X(EPLUGIN,     -14, "plugin failure")                                   \
    X(EDEVICE,     -15, "device error")                                     \
    X(EINCOMPLETE, -16, "not enough information yet")                       \
    X(ESKIPPED,    -17, "skipped: an input carries an error")               \
    X(ENET,        -18, "network error")                                    \
    X(EINTERNAL,   -19, "internal error")                                   \
    X(ECANCELED,   -20, "canceled")

typedef enum mxp_status {
#define MXP_STATUS_ENUM_(name, value, text) MXP_##name = value,
    MXP_STATUS_MAP(MXP_STATUS_ENUM_)
#undef MXP_STATUS_ENUM_
    MXP_STATUS_LAST_ = -21 /* one below the lowest code; not a status */
} mxp_status;

/* ------------------------------------------------------------------ dtypes */
/* Element types, numbered as MXNet's (mshadow) type flags so that .params
 * files and symbol JSON carry the same numbers. */
typedef enum mxp_dtype {
    MXP_DTYPE_UNKNOWN = -1,
    MXP_DTYPE_F32  = 0,
    MXP_DTYPE_F64  = 1,
    MXP_DTYPE_F16  = 2,
    MXP_DTYPE_U8   = 3,
    MXP_DTYPE_I32  = 4,
    MXP_DTYPE_I8   = 5,
    MXP_DTYPE_I64  = 6,
    MXP_DTYPE_BOOL = 7,
    MXP_DTYPE_I16  = 8,
    MXP_DTYPE_U16  = 9,
    MXP_DTYPE_U32  = 10,
    MXP_DTYPE_U64  = 11,
    MXP_DTYPE_BF16 = 12
} mxp_dtype;

#define MXP_DTYPE_COUNT 13 /* number of defined dtype values (0..12) */

/* Bytes per element of a dtype, 0 for an unknown one. */
static inline uint32_t mxp_dtype_size(int32_t dtype) {
    static const uint8_t sizes[MXP_DTYPE_COUNT] = {4, 8, 2, 1, 4, 1, 8, 1, 2, 2, 4, 8, 2};
    return (dtype >= 0 && dtype < MXP_DTYPE_COUNT) ? sizes[dtype] : 0;
}

/* ----------------------------------------------------------------- devices */
/* Device types.  1..15 are fixed (MXNet's Context numbers); a device a pack
 * registers under another name gets a number >= MXP_DEV_FIRST_DYNAMIC from
 * the host at registration (look it up with mxp_host.device_type). */
typedef enum mxp_device_type {
    MXP_DEV_UNKNOWN    = 0,
    MXP_DEV_CPU        = 1,
    MXP_DEV_GPU        = 2,
    MXP_DEV_CPU_PINNED = 3,
    MXP_DEV_CPU_SHARED = 5,
    MXP_DEV_FIRST_DYNAMIC = 16
} mxp_device_type;

typedef struct mxp_device {
    int32_t type; /* mxp_device_type or a host-assigned dynamic type */
    int32_t id;   /* ordinal within the type, from 0 */
} mxp_device;

/* --------------------------------------------------------------- log levels */
typedef enum mxp_log_level {
    MXP_LOG_ERROR = 0,
    MXP_LOG_WARN  = 1,
    MXP_LOG_INFO  = 2,
    MXP_LOG_DEBUG = 3,
    MXP_LOG_TRACE = 4
} mxp_log_level;

/* ------------------------------------------------------------------ shapes */
/* The largest rank a shape may have anywhere in mxplug. */
#define MXP_MAX_NDIM 8

/* A shape as used by inference: ndim < 0 means "rank unknown"; a dimension of
 * 0 means "this dimension unknown" (MXNet's convention). */
typedef struct mxp_shape {
    int32_t ndim;
    int32_t reserved; /* 0 */
    int64_t dims[MXP_MAX_NDIM];
} mxp_shape;

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
_Static_assert(sizeof(mxp_header) == 8, "mxp_header layout is frozen");
_Static_assert(offsetof(mxp_header, abi_major) == 4, "mxp_header layout is frozen");
_Static_assert(offsetof(mxp_header, abi_minor) == 6, "mxp_header layout is frozen");
_Static_assert(sizeof(mxp_device) == 8, "mxp_device layout is frozen");
_Static_assert(sizeof(mxp_shape) == 72, "mxp_shape layout is frozen");
_Static_assert(offsetof(mxp_shape, dims) == 8, "mxp_shape layout is frozen");
#endif

#ifdef __cplusplus
}
#endif
#endif /* MXP_TYPES_H */
