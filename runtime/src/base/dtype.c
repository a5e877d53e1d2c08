/* dtype.c — dtype names as MXNet spells them (symbol JSON, Cast's dtype). */
#include "base.h"

#include <string.h>

static const char *const dtype_names[MXP_DTYPE_COUNT] = {
    "float32", "float64", "float16", "uint8", "int32", "int8", "int64",
    "bool", "int16", "uint16", "uint32", "uint64", "bfloat16",
};

const char *mxp_dtype_name(int dtype) {
    return (dtype >= 0 && dtype < MXP_DTYPE_COUNT) ? dtype_names[dtype] : NULL;
}

int mxp_dtype_from_name(const char *name, int *out_dtype) {
    if (out_dtype) *out_dtype = MXP_DTYPE_UNKNOWN;
    if (!name || !out_dtype) return mxp__error(MXP_EMISUSE, "mxp_dtype_from_name: NULL argument");
    for (int i = 0; i < MXP_DTYPE_COUNT; i++) {
        if (strcmp(name, dtype_names[i]) == 0) { *out_dtype = i; return MXP_OK; }
    }
    /* Aliases accepted by MXNet's parser. */
    if (strcmp(name, "float") == 0) { *out_dtype = MXP_DTYPE_F32; return MXP_OK; }
    if (strcmp(name, "double") == 0) { *out_dtype = MXP_DTYPE_F64; return MXP_OK; }
    if (strcmp(name, "half") == 0) { *out_dtype = MXP_DTYPE_F16; return MXP_OK; }
    return mxp__error(MXP_EINVAL, "unknown dtype '%s' (expected float32, float64, float16, uint8, "
                      "int8, int32, int64, bool, ...)", name);
}

const char *mxp_version(void) { return "0.1.0"; }

void mxp_abi_version(uint16_t *out_major, uint16_t *out_minor) {
    if (out_major) *out_major = MXP_ABI_MAJOR;
    if (out_minor) *out_minor = MXP_ABI_MINOR;
}
