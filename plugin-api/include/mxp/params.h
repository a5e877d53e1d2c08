/* mxp/params.h — typed parameter schemas.
 *
 * A pack describes its parameters as an array of mxp_param_def.  The host
 * validates kwargs against it (unknown keys, bad values and out-of-range
 * values are errors naming the op and the key), parses MXNet's value grammar
 * ('False', '(5, 5)', '(5,)', 'None', '1e-05', 'relu') and writes the result
 * into the pack's own parameter struct at each def's `offset`.  Packs never
 * parse strings.  `mxplug info` prints the schema.
 *
 * The C type stored at `offset` for each mxp_param_type:
 *   INT     int64_t           FLOAT   double
 *   BOOL    int32_t (0/1)     ENUM    int32_t (index into choices)
 *   STRING  const char * (host-owned, valid as long as the parsed params)
 *   DTYPE   int32_t (mxp_dtype; MXNet names "float32", ...)
 *   SHAPE   mxp_param_shape   (tuples "(3,3)", "3", "()", "None")
 *   OPT_INT mxp_param_opt_int OPT_FLOAT mxp_param_opt_float ('None' allowed)
 * Since ABI 1.0. */
#ifndef MXP_PARAMS_H
#define MXP_PARAMS_H

#include <mxp/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mxp_param_type {
    MXP_PARAM_INT       = 1,
    MXP_PARAM_FLOAT     = 2,
    MXP_PARAM_BOOL      = 3,
    MXP_PARAM_ENUM      = 4,
    MXP_PARAM_STRING    = 5,
    MXP_PARAM_DTYPE     = 6,
    MXP_PARAM_SHAPE     = 7,
    MXP_PARAM_OPT_INT   = 8,
    MXP_PARAM_OPT_FLOAT = 9
} mxp_param_type;

/* Flags of a parameter definition. */
#define MXP_PARAM_REQUIRED  0x1u /* no default: must be given                 */
#define MXP_PARAM_HAS_MIN   0x2u /* value (each element, for SHAPE) >= min    */
#define MXP_PARAM_HAS_MAX   0x4u /* value (each element, for SHAPE) <= max    */

#define MXP_PARAM_SHAPE_MAX 16

/* Integer tuple. has_value is 0 for 'None' (and for an absent optional). */
typedef struct mxp_param_shape {
    int32_t ndim;
    int32_t has_value;
    int64_t dims[MXP_PARAM_SHAPE_MAX];
} mxp_param_shape;

typedef struct mxp_param_opt_int {
    int32_t has_value;
    int32_t reserved;
    int64_t value;
} mxp_param_opt_int;

typedef struct mxp_param_opt_float {
    int32_t has_value;
    int32_t reserved;
    double value;
} mxp_param_opt_float;

typedef struct mxp_param_def {
    mxp_header hdr;
    const char *name;          /* MXNet's key, e.g. "num_filter"              */
    int32_t type;              /* mxp_param_type                              */
    uint32_t flags;            /* MXP_PARAM_*                                 */
    uint32_t offset;           /* offsetof(pack_param_struct, field)          */
    uint32_t reserved;
    const char *default_value; /* in MXNet's grammar; NULL when REQUIRED      */
    double min;                /* with MXP_PARAM_HAS_MIN                      */
    double max;                /* with MXP_PARAM_HAS_MAX                      */
    const char *const *choices;/* ENUM: NULL-terminated names, index = value  */
    const char *doc;           /* one sentence                                */
} mxp_param_def;

/* ------------------------------------------------ an op's parsed params */
/* Since ABI 1.1.  The parsed parameters of one op node, as a record an
 * implementation in ANY pack can read by name: impl callbacks get it in
 * their args (`op_params`, see op.h) next to `params`.  `params` is the
 * defining pack's private struct, whose layout only that pack knows; this
 * record pairs the same values with the schema that describes them, so a
 * Convolution impl in a GPU pack reads ops-nn's "kernel" without knowing
 * ops-nn's struct.  Read it through the host: mxp_param_get_int(host, p,
 * "num_filter", &v) and friends in host.h (they check name and type and
 * fail with a message instead of guessing).
 *
 * Lifetime: the record, and the strings and shapes read from it, are valid
 * during the callback that received it.  Copy what you need into the state
 * made by `create`. */
typedef struct mxp_op_params {
    mxp_header hdr;
    const char *op_name;        /* the op's canonical name, e.g. "Convolution" */
    const mxp_param_def *defs;  /* the defining pack's schema (MXP_ARRAY_AT)  */
    uint32_t n_defs;
    uint32_t reserved;
    const void *values;         /* the parsed struct (same as args->params)   */
} mxp_op_params;

/* Convenience initializers for static schemas. */
#define MXP_PARAM(NAME, TYPE, FLAGS, STRUCT, FIELD, DEFAULT, MIN, MAX, CHOICES, DOC) \
    { MXP_HEADER(mxp_param_def), NAME, TYPE, FLAGS, (uint32_t)offsetof(STRUCT, FIELD), 0, \
      DEFAULT, MIN, MAX, CHOICES, DOC }

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
_Static_assert(sizeof(mxp_param_shape) == 136, "mxp_param_shape layout is frozen");
_Static_assert(sizeof(mxp_param_opt_int) == 16, "mxp_param_opt_int layout is frozen");
_Static_assert(sizeof(mxp_param_opt_float) == 16, "mxp_param_opt_float layout is frozen");
_Static_assert(offsetof(mxp_param_def, name) == 8, "mxp_param_def layout is frozen");
_Static_assert(offsetof(mxp_param_def, type) == 16, "mxp_param_def layout is frozen");
_Static_assert(offsetof(mxp_param_def, offset) == 24, "mxp_param_def layout is frozen");
_Static_assert(offsetof(mxp_param_def, default_value) == 32, "mxp_param_def layout is frozen");
_Static_assert(offsetof(mxp_param_def, min) == 40, "mxp_param_def layout is frozen");
_Static_assert(offsetof(mxp_param_def, max) == 48, "mxp_param_def layout is frozen");
_Static_assert(offsetof(mxp_param_def, choices) == 56, "mxp_param_def layout is frozen");
_Static_assert(offsetof(mxp_param_def, doc) == 64, "mxp_param_def layout is frozen");
_Static_assert(sizeof(mxp_param_def) == 72, "mxp_param_def layout is frozen");
_Static_assert(offsetof(mxp_op_params, defs) == 16, "mxp_op_params layout is frozen");
_Static_assert(offsetof(mxp_op_params, values) == 32, "mxp_op_params layout is frozen");
_Static_assert(sizeof(mxp_op_params) == 40, "mxp_op_params layout is frozen");
#endif

#ifdef __cplusplus
}
#endif
#endif /* MXP_PARAMS_H */
