/* test_invoke_prepared_concurrency.c — prepared forwards (op/invoke.c) on
 * several threads at once, while another thread keeps moving the registry
 * generation (mxp_op_set_impl), which drops every thread's cached entries
 * and templates at its next call: each thread's results are checked
 * against sums computed here, and the lock-free CPU pool lookup
 * (storage.c) is raced by all of them.  Runs under TSan (the name). */
#include "op_test_util.h"

#include "op/invoke_cache.h"

#include <pthread.h>
#include <stdatomic.h>

static void setup(void) { opx_setup(); }
static void teardown(void) {
    mxp_op_set_impl("elemwise_add", NULL);
    opx_teardown();
}
TestSuite(invoke_prepared_concurrency, .init = setup, .fini = teardown);

enum { THREADS = 3, ITERS = 1500 };

typedef struct worker {
    int id;
    int bad;          /* first wrong element seen, as iteration + 1 */
    int failed;       /* an invoke failed */
    unsigned long prepared;
    char msg[256];
} worker;

static atomic_int g_done;

static void *run_worker(void *p) {
    worker *w = p;
    int64_t s[1] = {5};
    double va[5], vb[5];
    opx_fill(va, 5, (uint64_t)w->id + 1, -4, 4);
    opx_fill(vb, 5, (uint64_t)w->id + 100, -4, 4);
    mxp_ndarray *a = NULL, *b = NULL;
    float fa[5], fb[5];
    for (int i = 0; i < 5; i++) fa[i] = (float)va[i], fb[i] = (float)vb[i];
    if (mxp_ndarray_create(s, 1, MXP_DTYPE_F32, opx_cpu, &a) || mxp_ndarray_create(s, 1, MXP_DTYPE_F32, opx_cpu, &b) ||
        mxp_ndarray_sync_copy_from(a, fa, sizeof fa) || mxp_ndarray_sync_copy_from(b, fb, sizeof fb)) {
        w->failed = 1;
        snprintf(w->msg, sizeof w->msg, "setup: %s", mxp_last_error());
        goto out;
    }
    unsigned long p0 = mxp__invoke_prepared_runs();
    for (int it = 0; it < ITERS && !w->failed && !w->bad; it++) {
        mxp_ndarray *in[2] = {a, b}, *c = NULL;
        int n_out = 1;
        const char *op = it % 3 == 2 ? "elemwise_mul" : "elemwise_add";
        if (mxp_invoke(op, 2, in, &n_out, &c, 0, NULL, NULL)) {
            w->failed = 1;
            snprintf(w->msg, sizeof w->msg, "%s: %s", op, mxp_last_error());
            break;
        }
        if (it % 50 == 0 || it == ITERS - 1) {
            float got[5];
            if (mxp_ndarray_sync_copy_to(c, got, sizeof got)) {
                w->failed = 1;
                snprintf(w->msg, sizeof w->msg, "read: %s", mxp_last_error());
            }
            for (int i = 0; i < 5 && !w->failed; i++) {
                float want = it % 3 == 2 ? fa[i] * fb[i] : fa[i] + fb[i];
                if (got[i] != want) {
                    w->bad = it + 1;
                    snprintf(w->msg, sizeof w->msg, "%s element %d: %g, want %g", op, i, got[i], want);
                    break;
                }
            }
        }
        mxp_ndarray_release(c);
    }
    w->prepared = mxp__invoke_prepared_runs() - p0;
out:
    mxp_ndarray_release(a);
    mxp_ndarray_release(b);
    atomic_fetch_add(&g_done, 1);
    return NULL;
}

Test(invoke_prepared_concurrency, threads_run_prepared_while_the_generation_moves, .timeout = 120) {
    /* Load the packs first: the threads' first calls then only race the
     * cache and the engine. */
    int64_t s[1] = {1};
    double one = 1;
    mxp_ndarray *x = opx_arr(MXP_DTYPE_F32, 1, s, &one);
    mxp_ndarray *in[2] = {x, x}, *y = NULL;
    int n_out = 1;
    cr_assert_eq(mxp_invoke("elemwise_add", 2, in, &n_out, &y, 0, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    mxp_ndarray_release(y);
    mxp_ndarray_release(x);
    worker w[THREADS];
    pthread_t t[THREADS];
    atomic_store(&g_done, 0);
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.id = i};
        cr_assert_eq(pthread_create(&t[i], NULL, run_worker, &w[i]), 0);
    }
    int moves = 0;
    while (atomic_load(&g_done) < THREADS) {
        cr_assert_eq(mxp_op_set_impl("elemwise_add", moves % 2 ? NULL : "default"), MXP_OK, "%s",
                     mxp_last_error());
        moves++;
        nanosleep(&(struct timespec){0, 2 * 1000 * 1000}, NULL);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < THREADS; i++) {
        cr_expect(!w[i].failed && !w[i].bad, "thread %d: %s", i, w[i].msg);
        cr_expect_gt(w[i].prepared, 0, "thread %d ran prepared calls", i);
    }
    cr_expect_gt(moves, 0);
}
