/* app_struct.c — the application API's versioned value structs
 * (mxplug/base.h: struct_size first) and mxp_free.
 *
 * A struct from an application built against an older 1.x header is
 * shorter than the library's: copying it into a zeroed local of the
 * library's size makes every field it lacks read as 0, so the library
 * code reads the local and never past the caller's struct.  A newer
 * application's longer struct is truncated to what this library knows. */
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

static size_t caller_size(const void *s, size_t full_size, size_t v1_size) {
    uint32_t n;
    memcpy(&n, s, sizeof n);
    size_t sz = n ? n : v1_size;
    return sz < full_size ? sz : full_size;
}

void mxp__app_struct_in(void *dst, size_t dst_size, const void *src, size_t v1_size) {
    memset(dst, 0, dst_size);
    if (src) memcpy(dst, src, caller_size(src, dst_size, v1_size));
    uint32_t n = (uint32_t)dst_size;
    memcpy(dst, &n, sizeof n);
}

void mxp__app_struct_out(void *dst, const void *src, size_t full_size, size_t v1_size) {
    uint32_t keep;
    memcpy(&keep, dst, sizeof keep);
    size_t n = caller_size(dst, full_size, v1_size);
    memcpy(dst, src, n);
    memcpy(dst, &keep, sizeof keep);
}

void mxp_free(void *p) { free(p); }
