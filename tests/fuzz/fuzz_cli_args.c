/* fuzz_cli_args.c — libFuzzer harness for the option values of the mxplug
 * tool, through the functions the commands call (tools/mxplug/cli_args.c
 * and device_opt.c, compiled into the harness by tools/mxplug/tool.mk):
 * --shape NAME=d1,..., --data-shape C,H,W, --param KEY=VALUE, --aug
 * k=v,..., --data mnist:DIR / rec:PREFIX, --device, integers and numbers.
 * The input (up to 4 KiB, cut at its first NUL) is given to every parser.
 * The tool's message functions (main.c) are replaced here by ones that
 * record the message.  Properties, besides no crash, leak or UB:
 *  - a refusal returns CLI_USAGE with a non-empty message that quotes the
 *    value (or says what is too long);
 *  - an acceptance is exact: the value written back from what was parsed
 *    (dims joined by ',', KEY=VALUE, prefix + path, the device's name,
 *    the integer in decimal, the double to 17 digits) parses to the same
 *    result, shapes are within MXP_MAX_NDIM and their byte size is
 *    representable, and nothing was cut (names and paths are whole).
 * Seeds: tests/fuzz/corpus/cli_args/. */
#include "cli_args.h"
#include "device_opt.h"

#include <mxplug/fileio.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ------------------------------------------ the tool's message functions */
static char g_msg[8192];

static void record(const char *fmt, va_list ap) { vsnprintf(g_msg, sizeof g_msg, fmt, ap); }

void cli_err(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    record(fmt, ap);
    va_end(ap);
}

int cli_fail(int rc, const char *fmt, ...) {
    (void)rc;
    va_list ap;
    va_start(ap, fmt);
    record(fmt, ap);
    va_end(ap);
    return CLI_FAIL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    (void)cmd;
    va_list ap;
    va_start(ap, fmt);
    record(fmt, ap);
    va_end(ap);
    return CLI_USAGE;
}

/* A refusal: CLI_USAGE and a message naming the value (long values may be
 * described instead of quoted). */
static void refused(int rc, const char *value) {
    if (rc != CLI_USAGE || !g_msg[0]) abort();
    if (strlen(value) < 200 && !strstr(g_msg, value) && !strstr(g_msg, "longer than")) abort();
}

static void reset(void) { g_msg[0] = 0; }

/* ------------------------------------------------------------ checks */
static void same_shape(const mxp_shape *a, const mxp_shape *b) {
    if (a->ndim != b->ndim) abort();
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i]) abort();
}

static size_t join_dims(const mxp_shape *s, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < s->ndim; i++) o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? "," : "", (long long)s->dims[i]);
    return o;
}

static void check_shape(const char *s) {
    char name[64], name2[64], back[512];
    mxp_shape shp, again;
    reset();
    int rc = cli_parse_shape_arg("fuzz", s, sizeof(double), 8, name, sizeof name, &shp);
    if (rc) {
        refused(rc, s);
        return;
    }
    if (shp.ndim < 0 || shp.ndim > MXP_MAX_NDIM || !name[0] || strchr(name, '=')) abort();
    if (mxp_size_of_shape(name, shp.dims, shp.ndim, sizeof(double), 8, NULL, NULL)) abort();
    size_t o = (size_t)snprintf(back, sizeof back, "%s=", name);
    join_dims(&shp, back + o, sizeof back - o);
    if (cli_parse_shape_arg("fuzz", back, sizeof(double), 8, name2, sizeof name2, &again)) abort();
    if (strcmp(name, name2)) abort();
    same_shape(&shp, &again);
    /* Nothing dropped: leading zeros aside, the value is its dims. */
    if (strncmp(s, name, strlen(name)) || s[strlen(name)] != '=') abort();
}

static void check_dims(const char *s) {
    mxp_shape shp, again;
    char back[512];
    reset();
    int rc = cli_parse_dims("fuzz", "--data-shape", s, 1, 3, 3, &shp);
    if (rc) {
        refused(rc, s);
        return;
    }
    if (shp.ndim != 3) abort();
    for (int i = 0; i < 3; i++)
        if (shp.dims[i] < 1) abort();
    join_dims(&shp, back, sizeof back);
    if (cli_parse_dims("fuzz", "--data-shape", back, 1, 3, 3, &again)) abort();
    same_shape(&shp, &again);
}

static void check_kv(const char *s) {
    char *key = NULL;
    const char *val = NULL;
    reset();
    int rc = cli_parse_kv_arg("fuzz", "--param", s, &key, &val);
    if (rc) {
        if (key) abort();
        refused(rc, s);
        return;
    }
    size_t kl = strlen(key);
    if (!kl || strchr(key, '=') || strncmp(s, key, kl) || s[kl] != '=' || val != s + kl + 1) abort();
    free(key);
}

static void check_kv_list(const char *s) {
    char *copy = NULL;
    const char *keys[8], *vals[8];
    int n = 0;
    reset();
    int rc = cli_parse_kv_list("fuzz", "--aug", s, &copy, keys, vals, 8, &n);
    if (rc) {
        refused(rc, s);
    } else {
        if (n < 0 || n > 8) abort();
        /* Items in order, each k=v with no ',' and a non-empty key. */
        const char *p = s;
        for (int i = 0; i < n; i++) {
            if (!keys[i][0] || strchr(keys[i], '=') || strchr(keys[i], ',') || strchr(vals[i], ',')) abort();
            while (*p == ',') p++;
            size_t kl = strlen(keys[i]), vl = strlen(vals[i]);
            if (strncmp(p, keys[i], kl) || p[kl] != '=' || strncmp(p + kl + 1, vals[i], vl)) abort();
            p += kl + 1 + vl;
        }
        while (*p == ',') p++;
        if (*p) abort(); /* something was dropped */
    }
    free(copy);
}

static void check_data(const char *s) {
    int kind;
    const char *path;
    reset();
    int rc = cli_parse_data_spec("fuzz", s, &kind, &path);
    if (rc) {
        if (kind || path) abort();
        refused(rc, s);
        return;
    }
    const char *prefix = kind == CLI_DATA_MNIST ? "mnist:" : kind == CLI_DATA_REC ? "rec:" : NULL;
    if (!prefix || !*path || strlen(path) > CLI_DATA_PATH_MAX) abort();
    if (strncmp(s, prefix, strlen(prefix)) || path != s + strlen(prefix)) abort();
}

static void check_device(const char *s) {
    mxp_device d, again;
    char back[32];
    reset();
    int rc = cli_device_parse("fuzz", s, &d);
    if (rc) {
        refused(rc, s);
        return;
    }
    if ((d.type != MXP_DEV_CPU && d.type != MXP_DEV_GPU) || d.id < 0 || d.id > 1023) abort();
    cli_device_str(d, back, sizeof back);
    if (cli_device_parse("fuzz", back, &again) || again.type != d.type || again.id != d.id) abort();
}

static void check_numbers(const char *s) {
    long long v, again;
    char back[64];
    reset();
    int rc = cli_parse_int("fuzz", "--batch-size", s, 1, 1 << 30, &v);
    if (rc) {
        refused(rc, s);
    } else {
        if (v < 1 || v > 1 << 30) abort();
        snprintf(back, sizeof back, "%lld", v);
        if (cli_parse_int("fuzz", "--batch-size", back, 1, 1 << 30, &again) || again != v) abort();
    }
    double x, y;
    reset();
    rc = cli_parse_double("fuzz", "--lr", s, &x);
    if (rc) {
        refused(rc, s);
    } else {
        if (!isfinite(x)) abort();
        snprintf(back, sizeof back, "%.17g", x);
        if (cli_parse_double("fuzz", "--lr", back, &y) || y != x) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    check_shape(s);
    check_dims(s);
    check_kv(s);
    check_kv_list(s);
    check_data(s);
    check_device(s);
    check_numbers(s);
    free(s);
    return 0;
}
