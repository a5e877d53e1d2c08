/* test_reload_concurrency.c — hot swap under load: one thread keeps
 * running a Convolution node (forward, wait, compare with an independent
 * float64 reference) while the main thread requests impl switches with
 * mxp_op_set_impl and reloads the ops-nn pack from disk
 * (mxp_pack_reload("ops-nn")).  Nothing fails or crashes, every result
 * stays within 1e-4 of the reference (1e-5 outside winograd), and each
 * requested impl actually becomes the one the node runs (seen through
 * mxp__node_impl_name on the running thread), before and after the reload.
 * Also runs under TSan (name contains "concurrency"). */
#include "swap_test_util.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

static void setup(void) {
    opx_setup();
    mxp_op_set_impl("Convolution", NULL);
}
static void teardown(void) {
    mxp_op_set_impl("Convolution", NULL);
    opx_teardown();
}
TestSuite(reload_concurrency, .init = setup, .fini = teardown);

enum { IMPL_OTHER, IMPL_GEMM, IMPL_DIRECT, IMPL_WINOGRAD };

typedef struct runner {
    sw_conv c;
    atomic_int stop;
    atomic_int last_impl;     /* impl of the last completed forward */
    atomic_long runs;
    atomic_int failures;
    double worst;             /* written by the runner only; read after join */
    char err[256];
    int seen[4];
} runner;

static int impl_code(const char *n) {
    if (!n) return IMPL_OTHER;
    if (!strcmp(n, "gemm")) return IMPL_GEMM;
    if (!strcmp(n, "direct")) return IMPL_DIRECT;
    if (!strcmp(n, "winograd")) return IMPL_WINOGRAD;
    return IMPL_OTHER;
}

static void *run(void *arg) {
    runner *r = arg;
    const size_t ny = SW_N * SW_M * SW_H * SW_W;
    float *buf = malloc(ny * sizeof *buf);
    double *y = malloc(ny * sizeof *y);
    while (!atomic_load(&r->stop)) {
        int rc = mxp__node_forward(r->c.nd, r->c.in, &r->c.y, NULL, NULL, 0);
        if (!rc) rc = mxp_ndarray_sync_copy_to(r->c.y, buf, ny * sizeof *buf);
        if (rc) {
            if (!atomic_fetch_add(&r->failures, 1)) snprintf(r->err, sizeof r->err, "%s", mxp_last_error());
            continue;
        }
        int code = impl_code(mxp__node_impl_name(r->c.nd));
        for (size_t i = 0; i < ny; i++) y[i] = buf[i];
        double d = sw_maxdiff(y, r->c.ref, ny);
        double tol = code == IMPL_WINOGRAD ? 1e-4 : 1e-5;
        if (d > tol && !atomic_fetch_add(&r->failures, 1))
            snprintf(r->err, sizeof r->err, "impl %d off the reference by %g", code, d);
        if (d > r->worst) r->worst = d;
        r->seen[code]++;
        atomic_store(&r->last_impl, code);
        atomic_fetch_add(&r->runs, 1);
    }
    free(buf);
    free(y);
    return NULL;
}

/* Wait until the runner completed a forward on impl `code` (10 s max). */
static int wait_for_impl(runner *r, int code) {
    for (int i = 0; i < 10000; i++) {
        long start = atomic_load(&r->runs);
        if (atomic_load(&r->last_impl) == code) {
            /* And one more complete run after it, to be sure it sticks. */
            while (atomic_load(&r->runs) < start + 2 && !atomic_load(&r->failures)) sched_yield();
            return atomic_load(&r->last_impl) == code;
        }
        usleep(1000);
    }
    return 0;
}

Test(reload_concurrency, swap_and_reload_while_another_thread_invokes, .timeout = 120) {
    runner *r = calloc(1, sizeof *r);
    cr_assert(r);
    sw_init(&r->c);
    cr_assert_eq(mxp_op_set_impl("Convolution", "gemm"), MXP_OK, "%s", mxp_last_error());
    /* First forward on this thread: pack loaded, node bound. */
    cr_assert_eq(mxp__node_forward(r->c.nd, r->c.in, &r->c.y, NULL, NULL, 0), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_ndarray_wait_to_read(r->c.y), MXP_OK);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, run, r), 0);
    int ok_gemm = wait_for_impl(r, IMPL_GEMM);
    cr_assert_eq(mxp_op_set_impl("Convolution", "direct"), MXP_OK, "%s", mxp_last_error());
    int ok_direct = wait_for_impl(r, IMPL_DIRECT);
    uint64_t gen = mxp_registry_generation();
    int rc = mxp_pack_reload("ops-nn");
    char why[256];
    snprintf(why, sizeof why, "%s", mxp_last_error());
    long runs_at_reload = atomic_load(&r->runs);
    /* After the reload the policy still holds ... */
    int ok_direct2 = 0;
    for (int i = 0; i < 10000 && atomic_load(&r->runs) < runs_at_reload + 3; i++) usleep(1000);
    ok_direct2 = atomic_load(&r->last_impl) == IMPL_DIRECT;
    /* ... and a swap requested now is honoured by the reloaded pack. */
    cr_assert_eq(mxp_op_set_impl("Convolution", "winograd"), MXP_OK, "%s", mxp_last_error());
    int ok_wino = wait_for_impl(r, IMPL_WINOGRAD);
    cr_assert_eq(mxp_op_set_impl("Convolution", "gemm"), MXP_OK, "%s", mxp_last_error());
    int ok_gemm2 = wait_for_impl(r, IMPL_GEMM);
    atomic_store(&r->stop, 1);
    pthread_join(t, NULL);
    cr_assert_eq(rc, MXP_OK, "reload: %s", why);
    cr_expect_gt(mxp_registry_generation(), gen);
    cr_expect_eq(atomic_load(&r->failures), 0, "%d failures, first: %s", atomic_load(&r->failures), r->err);
    cr_expect(ok_gemm && ok_direct && ok_direct2 && ok_wino && ok_gemm2,
              "impl switches seen: gemm %d, direct %d, direct after reload %d, winograd %d, gemm %d "
              "(runs: gemm %d direct %d winograd %d)",
              ok_gemm, ok_direct, ok_direct2, ok_wino, ok_gemm2, r->seen[IMPL_GEMM], r->seen[IMPL_DIRECT],
              r->seen[IMPL_WINOGRAD]);
    cr_expect_leq(r->worst, 1e-4, "worst difference from the reference: %g", r->worst);
    cr_expect_gt(atomic_load(&r->runs), 8);
    /* The pack is loaded and usable afterwards. */
    const char *reason;
    cr_expect_eq(mxp_pack_state(mxp_pack_find("ops-nn"), &reason), MXP_PACK_LOADED, "%s", reason);
    sw_free(&r->c);
    free(r);
}
