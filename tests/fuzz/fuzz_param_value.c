/* fuzz_param_value.c — libFuzzer harness: the first byte picks a parameter
 * type, the rest is the value text parsed with MXNet's grammar
 * (mxp__params_parse_value), then formatted back and re-parsed; the second
 * parse must succeed and format identically.  Seeds in
 * tests/fuzz/corpus/param_value/. */
#include "plugin/plugin_impl.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void quiet(int level, const char *cat, const char *msg, void *user) {
    (void)level; (void)cat; (void)msg; (void)user;
}

typedef union slot {
    int64_t i; double f; int32_t b; const char *s; mxp_param_shape sh; mxp_param_opt_int oi; mxp_param_opt_float of;
} slot;

static const char *const choices[] = {"relu", "sigmoid", "tanh", NULL};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 600) return 0;
    mxp_log_set_sink(quiet, NULL);
    int32_t type = 1 + data[0] % 9;
    char *val = malloc(size);
    if (!val) return 0;
    memcpy(val, data + 1, size - 1);
    val[size - 1] = '\0';
    mxp_param_def d = {MXP_HEADER(mxp_param_def), "p", type, (data[0] & 0x80) ? MXP_PARAM_HAS_MIN : 0u, 0, 0,
                       NULL, -5, 0, choices, "fuzz"};
    slot s1, s2;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    if (mxp__params_parse_value(&d, val, &s1, "fuzz") == MXP_OK) {
        char buf[4096], buf2[4096];
        if (mxp__params_format(&d, &s1, buf, sizeof buf) == MXP_OK && type != MXP_PARAM_STRING) {
            if (mxp__params_parse_value(&d, buf, &s2, "fuzz") != MXP_OK) __builtin_trap();
            if (mxp__params_format(&d, &s2, buf2, sizeof buf2) != MXP_OK || strcmp(buf, buf2)) __builtin_trap();
        }
        if (type == MXP_PARAM_STRING) free((void *)s1.s);
    }
    free(val);
    return 0;
}
