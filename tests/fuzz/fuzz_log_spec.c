/* fuzz_log_spec.c — libFuzzer harness for the log level spec parser
 * (mxp_log_set_level, the same parser MXP_LOG_LEVEL goes through).
 *
 * Any byte string, NUL-terminated, is fed as a spec.  Properties checked:
 * no crash / sanitizer report; the call returns MXP_OK or MXP_EINVAL; after
 * a rejected spec the levels in effect are unchanged (a bad spec must not
 * half-apply); after an accepted one, mxp_log_enabled still answers.  The
 * harness resets the level to "warn" before each input so runs are
 * independent. */
#include "base.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int snapshot(const char *cat) {
    int lv = -1;
    for (int l = MXP_LOG_ERROR; l <= MXP_LOG_TRACE; l++)
        if (mxp_log_enabled(l, cat)) lv = l;
    return lv;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *spec = malloc(size + 1);
    if (!spec) return 0;
    memcpy(spec, data, size);
    spec[size] = '\0';
    if (mxp_log_set_level("warn") != MXP_OK) abort();
    int before_global = snapshot(NULL), before_engine = snapshot("engine");
    int rc = mxp_log_set_level(spec);
    if (rc != MXP_OK && rc != MXP_EINVAL) abort();
    if (rc == MXP_EINVAL) {
        if (mxp_last_error()[0] == '\0') abort(); /* a rejection says why */
        if (snapshot(NULL) != before_global || snapshot("engine") != before_engine) abort();
    }
    free(spec);
    return 0;
}
