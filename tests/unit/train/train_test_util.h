/* train_test_util.h — helpers shared by tests/unit/train/ (header-only:
 * each test is its own binary): environment (the build tree's manifest),
 * float32 arrays from values and back, a temp directory. */
#ifndef MXP_TEST_TRAIN_UTIL_H
#define MXP_TEST_TRAIN_UTIL_H

#include <criterion/criterion.h>

#include <mxplug.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char trt_dir[64];
static const mxp_device trt_cpu = {MXP_DEV_CPU, 0};

static inline void trt_setup(void) {
    setenv("MXP_MANIFEST", MXP_BUILD_DIR "/plugins/manifest.yaml", 1);
    unsetenv("MXP_PLUGIN_PATH");
    unsetenv("MXP_PACKS");
    snprintf(trt_dir, sizeof trt_dir, "/tmp/mxp-train-test-XXXXXX");
    cr_assert(mkdtemp(trt_dir));
}

static inline void trt_teardown(void) {
    mxp_engine_wait_for_all();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", trt_dir);
    if (system(cmd)) { /* harmless */ }
}

static inline mxp_ndarray *trt_f32(const int64_t *shape, int ndim, const float *v) {
    mxp_ndarray *nd = NULL;
    cr_assert_eq(mxp_ndarray_create(shape, ndim, MXP_DTYPE_F32, trt_cpu, &nd), MXP_OK, "%s", mxp_last_error());
    if (v) cr_assert_eq(mxp_ndarray_sync_copy_from(nd, v, mxp_ndarray_nbytes(nd)), MXP_OK, "%s", mxp_last_error());
    return nd;
}

static inline mxp_ndarray *trt_vec(int64_t n, const float *v) { return trt_f32(&n, 1, v); }

static inline float *trt_get(mxp_ndarray *nd) {
    float *v = malloc(mxp_ndarray_nbytes(nd) + 4);
    cr_assert(v);
    cr_assert_eq(mxp_ndarray_sync_copy_to(nd, v, mxp_ndarray_nbytes(nd)), MXP_OK, "%s", mxp_last_error());
    return v;
}

#endif /* MXP_TEST_TRAIN_UTIL_H */
