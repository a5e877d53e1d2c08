/* test_registry_concurrency.c — lookups, selection and impl refs on
 * several threads while another thread reloads the pack (runs under TSan
 * too).  Every call made by the workers must either succeed with a working
 * impl (its forward computes the right values) or, never, crash. */
#include "plugin_test_util.h"

#include "plugin/plugin_impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

static char *g_dir;
static atomic_int g_stop;
static atomic_long g_calls, g_bad;

static void *worker(void *arg) {
    (void)arg;
    struct mxp_op *op = mxp__registry_find_op("psel_scale");
    _Alignas(64) float x[4] = {1, 2, 3, 4};
    _Alignas(64) float y[4]; /* the runtime hands impls 64-byte aligned data (plugin_sel checks) */
    int64_t shape[1] = {4};
    while (!atomic_load(&g_stop)) {
        if (!mxp_op_find("psel_scale_alias")) atomic_fetch_add(&g_bad, 1);
        const mxp_op_def *def;
        if (mxp__op_ensure_def(op, &def)) continue; /* mid-reload: retry */
        mxp_shape in = {1, 0, {4}};
        int32_t dt = MXP_DTYPE_F32;
        double params[2] = {3.0, 0};
        mxp_select_query q = {params, {MXP_DEV_CPU, 0}, "cpu", 1, 1, 0, 0, &in, &in, NULL, &dt, &dt, NULL, NULL, NULL};
        mxp_impl_ref *ref;
        if (mxp__select_impl(op, &q, &ref, NULL)) continue;
        mxp_tensor ti = {MXP_HEADER(mxp_tensor), x, 0, MXP_DTYPE_F32, 1, shape, NULL, {1, 0}, 0};
        mxp_tensor to = ti;
        to.data = y;
        int32_t req = MXP_REQ_WRITE;
        mxp_forward_args fa = {MXP_HEADER(mxp_forward_args), NULL, params, NULL, NULL, 1, 1, 0, 0, &ti, &to, NULL, &req, NULL};
        if (ref->impl->forward(&fa) != MXP_OK || y[3] != 12.0f) atomic_fetch_add(&g_bad, 1);
        (void)mxp_registry_generation();
        mxp__impl_ref_release(ref);
        atomic_fetch_add(&g_calls, 1);
    }
    return NULL;
}

Test(registry_concurrency, lookups_during_reload) {
    g_dir = tu_tmpdir();
    char *m = tu_psel_manifest(g_dir);
    setenv("MXP_MANIFEST", m, 1);
    cr_assert_eq(mxp_pack_load("plugin-sel"), MXP_OK, "%s", mxp_last_error());
    pthread_t th[3];
    for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, worker, NULL);
    int reloads = 0;
    for (int i = 0; i < 20; i++) {
        /* Interleave for real: let the workers complete a call on the
         * current pack before replacing it (reloads alone take ~0.5 ms). */
        long before = atomic_load(&g_calls);
        for (int spin = 0; atomic_load(&g_calls) == before && spin < 5000; spin++) usleep(1000);
        cr_expect_gt(atomic_load(&g_calls), before, "workers made no call between reloads");
        uint64_t g = mxp_registry_generation();
        int rc = mxp_pack_reload("plugin-sel");
        cr_expect_eq(rc, MXP_OK, "%s", mxp_last_error());
        cr_expect_gt(mxp_registry_generation(), g);
        reloads += rc == MXP_OK;
    }
    atomic_store(&g_stop, 1);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    cr_expect_eq(reloads, 20);
    cr_expect_eq(atomic_load(&g_bad), 0);
    cr_expect_gt(atomic_load(&g_calls), 0);
    cr_expect_eq(mxp_pack_state(mxp_pack_find("plugin-sel"), NULL), MXP_PACK_LOADED);
    mxp_registry_shutdown();
    tu_rmrf(g_dir);
    free(g_dir);
    free(m);
}

Test(registry_concurrency, reload_waits_for_refs_then_times_out) {
    g_dir = tu_tmpdir();
    char *m = tu_psel_manifest(g_dir);
    setenv("MXP_MANIFEST", m, 1);
    setenv("MXP_RELOAD_TIMEOUT_MS", "200", 1);
    struct mxp_op *op = mxp__registry_find_op("psel_scale");
    const mxp_op_def *def;
    cr_assert_eq(mxp__op_ensure_def(op, &def), MXP_OK);
    mxp_impl_ref *ref;
    cr_assert_eq(mxp__impl_ref_acquire(op->impls[0], &ref), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(mxp_pack_reload("plugin-sel"), MXP_EBUSY);
    cr_expect(strstr(mxp_last_error(), "1 implementation reference"), "%s", mxp_last_error());
    /* The old pack stays in service. */
    cr_expect_eq(mxp_pack_state(mxp_pack_find("plugin-sel"), NULL), MXP_PACK_LOADED);
    mxp__impl_ref_release(ref);
    cr_expect_eq(mxp_pack_reload("plugin-sel"), MXP_OK, "%s", mxp_last_error());
    unsetenv("MXP_RELOAD_TIMEOUT_MS");
    mxp_registry_shutdown();
    tu_rmrf(g_dir);
    free(g_dir);
    free(m);
}
