/* op_test_util.h — helpers shared by tests/unit/op/ (header-only: each test
 * is its own binary).  Environment setup (the build manifest plus the
 * op_invoke fixture pack's manifest written to a temp dir), NDArrays from
 * values and back, and a deterministic value generator. */
#ifndef MXP_TEST_OP_UTIL_H
#define MXP_TEST_OP_UTIL_H

#include <criterion/criterion.h>

#include <mxplug.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OPX_SO MXP_BUILD_DIR "/tests/fixtures/op_invoke.so"
#define PSEL_SO MXP_BUILD_DIR "/tests/fixtures/plugin_sel.so"
#define OPX_BUILD_MANIFEST MXP_BUILD_DIR "/plugins/manifest.yaml"

static char opx_dir[64];

/* Build manifest (ops-basic, ops-nn) + the fixture pack. */
static inline void opx_setup(void) {
    snprintf(opx_dir, sizeof opx_dir, "/tmp/mxp-op-test-XXXXXX");
    cr_assert(mkdtemp(opx_dir));
    char path[128];
    snprintf(path, sizeof path, "%s/opx.yaml", opx_dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f,
            "manifest_version: 1\n"
            "packs:\n"
            "  - name: op-invoke\n"
            "    version: 0.0.1\n"
            "    abi: {major: 1, minor: 0, min_host_minor: 0}\n"
            "    library: %s\n"
            "    provides:\n"
            "      ops:\n"
            "        - name: fxi_ws\n"
            "          impls: [{name: default, device: cpu, rank: 256}]\n"
            "        - name: fxi_fail\n"
            "          impls: [{name: default, device: cpu, rank: 256}]\n"
            "        - name: fxi_two\n"
            "          impls: [{name: default, device: cpu, rank: 256}]\n"
            "  - name: plugin-sel\n"
            "    version: 0.0.1\n"
            "    abi: {major: 1, minor: 0, min_host_minor: 0}\n"
            "    library: %s\n"
            "    provides:\n"
            "      ops:\n"
            "        - name: psel_scale\n"
            "          aliases: [psel_scale_alias]\n"
            "          impls:\n"
            "            - {name: fast, device: cpu, rank: 200}\n"
            "            - {name: mid, device: cpu, rank: 150}\n"
            "            - {name: slow, device: cpu, rank: 100}\n"
            "        - name: psel_badd\n"
            "          impls: [{name: default, device: cpu, rank: 256}]\n"
            "        - name: psel_mul_scalar\n"
            "          impls: [{name: default, device: cpu, rank: 256}]\n"
            "        - name: psel_wmul\n"
            "          impls:\n"
            "            - {name: dgrad_slow, device: cpu, rank: 200}\n"
            "            - {name: fwd_slow, device: cpu, rank: 100}\n",
            OPX_SO, PSEL_SO);
    fclose(f);
    char env[512];
    snprintf(env, sizeof env, "%s:%s", OPX_BUILD_MANIFEST, path);
    setenv("MXP_MANIFEST", env, 1);
    unsetenv("MXP_PLUGIN_PATH");
    unsetenv("MXP_PACKS");
}

static inline void opx_teardown(void) {
    mxp_engine_wait_for_all();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", opx_dir);
    if (system(cmd)) { /* harmless */ }
}

static const mxp_device opx_cpu = {MXP_DEV_CPU, 0};

/* An array of dtype (F32 or F64) holding vals[0..numel). */
static inline mxp_ndarray *opx_arr(int dtype, int ndim, const int64_t *shape, const double *vals) {
    mxp_ndarray *a = NULL;
    cr_assert_eq(mxp_ndarray_create(shape, ndim, dtype, opx_cpu, &a), MXP_OK, "%s", mxp_last_error());
    int64_t n = mxp_ndarray_size(a);
    if (vals) {
        size_t es = mxp_dtype_size(dtype);
        void *buf = malloc((size_t)n * es + 1);
        cr_assert(buf);
        for (int64_t i = 0; i < n; i++) {
            if (dtype == MXP_DTYPE_F32) ((float *)buf)[i] = (float)vals[i];
            else ((double *)buf)[i] = vals[i];
        }
        cr_assert_eq(mxp_ndarray_sync_copy_from(a, buf, (size_t)n * es), MXP_OK, "%s", mxp_last_error());
        free(buf);
    }
    return a;
}

/* Contents as doubles (after pending writes); caller frees.  Asserts the
 * pending work succeeded. */
static inline double *opx_read(mxp_ndarray *a) {
    int64_t n = mxp_ndarray_size(a);
    int dt = mxp_ndarray_dtype(a);
    size_t es = mxp_dtype_size(dt);
    void *buf = malloc((size_t)n * es + 1);
    double *out = malloc((size_t)n * sizeof *out + 1);
    cr_assert(buf && out);
    cr_assert_eq(mxp_ndarray_sync_copy_to(a, buf, (size_t)n * es), MXP_OK, "%s", mxp_last_error());
    for (int64_t i = 0; i < n; i++) out[i] = dt == MXP_DTYPE_F32 ? (double)((float *)buf)[i] : ((double *)buf)[i];
    free(buf);
    return out;
}

/* Deterministic values in [lo, hi). */
static inline void opx_fill(double *v, int64_t n, uint64_t seed, double lo, double hi) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v[i] = lo + (hi - lo) * (double)(s >> 11) / 9007199254740992.0;
    }
}

#endif
