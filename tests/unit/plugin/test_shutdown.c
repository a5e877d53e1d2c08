/* test_shutdown.c — mxp_registry_shutdown with work still queued on the
 * engine (issue 12 §1): shutdown waits for every queued function before it
 * runs pack fini and frees implementation records, so work queued behind a
 * slow function still completes with the right result, and a plain engine
 * function queued before the call has finished when it returns.  Before
 * the fix, shutdown freed the records under the workers (heap-use-after-free
 * in op/exec.c under ASan, SIGSEGV in about half the plain runs). */
#include <criterion/criterion.h>

#include <mxplug.h>

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

static void setup(void) {
    setenv("MXP_MANIFEST", MXP_BUILD_DIR "/plugins/manifest.yaml", 1);
    unsetenv("MXP_PLUGIN_PATH");
    unsetenv("MXP_PACKS");
}

TestSuite(registry_shutdown, .init = setup, .timeout = 60);

static atomic_int slow_done;

static int slow_fn(void *arg, const mxp_run_ctx *ctx) {
    (void)arg;
    (void)ctx;
    usleep(300 * 1000);
    atomic_store(&slow_done, 1);
    return MXP_OK;
}

static void push_slow(mxp_var *var) {
    mxp_engine_push_args a = {0};
    a.sync_fn = slow_fn;
    a.mutate_vars = &var;
    a.n_mutate = 1;
    a.name = "slow";
    cr_assert_eq(mxp_engine_push(&a), MXP_OK, "%s", mxp_last_error());
}

Test(registry_shutdown, waits_for_a_queued_function) {
    cr_assert_eq(mxp_registry_init(), MXP_OK, "%s", mxp_last_error());
    mxp_var *v = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    atomic_store(&slow_done, 0);
    push_slow(v);
    mxp_registry_shutdown();
    cr_assert_eq(atomic_load(&slow_done), 1, "shutdown returned while a pushed function was still running");
    cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK, "%s", mxp_last_error());
    mxp_engine_delete_var(v);
}

/* An op of a pack queued behind a slow writer of its input: it runs after
 * shutdown was called, so shutdown must not fini the pack before it ran. */
Test(registry_shutdown, queued_invoke_completes_before_pack_fini) {
    enum { N = 4096 };
    int64_t n = N;
    mxp_device cpu = {MXP_DEV_CPU, 0};
    mxp_ndarray *x = NULL;
    cr_assert_eq(mxp_ndarray_create(&n, 1, MXP_DTYPE_F32, cpu, &x), MXP_OK, "%s", mxp_last_error());
    float *v = malloc(N * sizeof *v);
    cr_assert(v);
    for (int i = 0; i < N; i++) v[i] = (float)(i % 97) * 0.25f;
    cr_assert_eq(mxp_ndarray_sync_copy_from(x, v, N * sizeof *v), MXP_OK, "%s", mxp_last_error());
    atomic_store(&slow_done, 0);
    push_slow(mxp_ndarray_var(x));
    mxp_ndarray *out[1] = {NULL};
    int n_out = 1;
    cr_assert_eq(mxp_invoke("sqrt", 1, &x, &n_out, out, 0, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    mxp_registry_shutdown();
    cr_assert_eq(atomic_load(&slow_done), 1, "shutdown returned while the slow writer was still running");
    float *r = malloc(N * sizeof *r);
    cr_assert(r);
    cr_assert_eq(mxp_ndarray_sync_copy_to(out[0], r, N * sizeof *r), MXP_OK, "%s", mxp_last_error());
    for (int i = 0; i < N; i++)
        cr_assert_float_eq(r[i], sqrt((double)v[i]), 1e-5 * (1 + sqrt((double)v[i])), "element %d", i);
    free(r);
    free(v);
    mxp_ndarray_release(out[0]);
    mxp_ndarray_release(x);
}
