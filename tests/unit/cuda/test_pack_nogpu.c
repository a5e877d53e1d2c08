/* test_pack_nogpu.c — the ops-cuda pack on this machine, GPU or not: it
 * loads through the registry and registers the `gpu` device and its impls
 * without touching hardware; the device's count is what the CUDA runtime
 * says (0 without a GPU or driver), and asking for a gpu ordinal that does
 * not exist is one clear MXP_EDEVICE error ("no CUDA device:
 * cudaGetDeviceCount says ..." without a GPU), never a crash or a storage
 * "out of memory".  Every impl the pack registers is a "cuda" impl on
 * device gpu of an op that ops-basic defines.
 * Skips, saying why, when the pack was not built (no nvcc, or a sanitizer
 * build, which compiles no CUDA code). */
#include <criterion/criterion.h>

#include <mxplug.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_host.h"

#define CUDA_SO FH_PACK_PATH("ops-cuda")

static void need_pack(void) {
    if (access(CUDA_SO, R_OK) != 0)
        cr_skip_test("ops-cuda was not built in this build tree (no nvcc, or SANITIZE set): %s", CUDA_SO);
    setenv("MXP_MANIFEST", MXP_BUILD_DIR "/plugins/manifest.yaml", 1);
    unsetenv("MXP_PLUGIN_PATH");
    unsetenv("MXP_PACKS");
}

Test(cuda_pack, loads_and_counts_devices_without_touching_hardware_at_init) {
    need_pack();
    cr_assert_eq(mxp_registry_init(), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_pack_load("ops-cuda"), MXP_OK, "%s", mxp_last_error());
    const mxp_pack *p = mxp_pack_find("ops-cuda");
    cr_assert(p);
    cr_assert_eq(mxp_pack_state(p, NULL), MXP_PACK_LOADED);
    cr_assert_eq(mxp_pack_device_count(p), 1);
    cr_assert_str_eq(mxp_pack_device_at(p, 0), "gpu");
    int n = -1;
    cr_assert_eq(mxp_device_count("gpu", &n), MXP_OK, "%s", mxp_last_error());
    cr_assert_geq(n, 0);
    if (n == 0) cr_log_info("no GPU here: the gpu device reports 0 devices");

    /* The first ordinal past the count is refused before any allocation. */
    mxp_ndarray *a = NULL;
    int64_t shape[1] = {16};
    int rc = mxp_ndarray_create(shape, 1, MXP_DTYPE_F32, (mxp_device){MXP_DEV_GPU, n}, &a);
    cr_assert_eq(rc, MXP_EDEVICE, "gpu(%d): rc %d, %s", n, rc, mxp_last_error());
    cr_assert_null(a);
    const char *msg = mxp_last_error();
    if (n == 0)
        cr_assert(strstr(msg, "no CUDA device: cudaGetDeviceCount says"), "message: %s", msg);
    else
        cr_assert(strstr(msg, "does not exist"), "message: %s", msg);
    cr_assert(strstr(msg, "gpu"), "message names the device: %s", msg);
    mxp_registry_shutdown();
}

Test(cuda_pack, every_impl_is_a_gpu_impl_of_an_op_another_pack_defines) {
    need_pack();
    cr_assert_eq(mxp_registry_init(), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_pack_load("ops-cuda"), MXP_OK, "%s", mxp_last_error());
    int n_gpu = 0;
    for (int i = 0; i < mxp_op_count(); i++) {
        const mxp_op *op = mxp_op_at(i);
        for (int k = 0; k < mxp_op_impl_count(op); k++) {
            const char *pack = mxp_op_impl_pack(op, k);
            if (!pack || strcmp(pack, "ops-cuda") != 0) continue;
            n_gpu++;
            cr_assert_str_eq(mxp_op_impl_device(op, k), "gpu", "%s", mxp_op_name(op));
            const char *impl = mxp_op_impl_name(op, k);
            cr_assert(!strcmp(impl, "cuda") || !strcmp(impl, "cudnn") || !strcmp(impl, "cublas") ||
                          !strcmp(impl, "direct"),
                      "%s: impl %s", mxp_op_name(op), impl);
            const char *def = mxp_op_pack(op);
            cr_assert(!strcmp(def, "ops-basic") || !strcmp(def, "ops-nn"), "%s is defined by %s", mxp_op_name(op), def);
        }
    }
    cr_assert_geq(n_gpu, 61, "gpu impls registered: %d", n_gpu);
    /* Convolution: two gpu impls to choose from, cudnn ranked first. */
    const mxp_op *conv = mxp_op_find("Convolution");
    cr_assert(conv);
    int cudnn_rank = -1, direct_rank = -1;
    for (int k = 0; k < mxp_op_impl_count(conv); k++) {
        if (strcmp(mxp_op_impl_device(conv, k), "gpu")) continue;
        if (!strcmp(mxp_op_impl_name(conv, k), "cudnn")) cudnn_rank = mxp_op_impl_rank(conv, k);
        if (!strcmp(mxp_op_impl_name(conv, k), "direct")) direct_rank = mxp_op_impl_rank(conv, k);
    }
    cr_assert(cudnn_rank > direct_rank && direct_rank > 0, "ranks cudnn %d direct %d", cudnn_rank, direct_rank);
    /* relu has a gpu impl and the cpu default. */
    const mxp_op *relu = mxp_op_find("relu");
    cr_assert(relu);
    int has_cpu = 0, has_gpu = 0;
    for (int k = 0; k < mxp_op_impl_count(relu); k++) {
        if (!strcmp(mxp_op_impl_device(relu, k), "cpu")) has_cpu = 1;
        if (!strcmp(mxp_op_impl_device(relu, k), "gpu")) has_gpu = 1;
    }
    cr_assert(has_cpu && has_gpu);
    mxp_registry_shutdown();
}
