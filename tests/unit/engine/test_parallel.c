/* test_parallel.c — mxp__parallel_for and the thread budget: every index is
 * covered exactly once, from outside the engine and from inside workers;
 * the busy-slot count never exceeds the budget; nested calls run; worker
 * threads get the init hook and flush-to-zero. */
#include <criterion/criterion.h>

#include "engine_test_util.h"
#include "engine/engine.h"

#include <string.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#define N 100000
static atomic_int hits[N];
static atomic_int max_busy;

static void note_busy(void) {
    int b = mxp__parallel_busy();
    int m = atomic_load(&max_busy);
    while (b > m && !atomic_compare_exchange_weak(&max_busy, &m, b)) {}
}

static void cover(void *arg, int64_t b, int64_t e) {
    (void)arg;
    note_busy();
    for (int64_t i = b; i < e; i++) atomic_fetch_add_explicit(&hits[i], 1, memory_order_relaxed);
}

static void check_once(void) {
    for (int i = 0; i < N; i++) cr_assert_eq(atomic_load(&hits[i]), 1, "index %d hit %d times", i, atomic_load(&hits[i]));
}

Test(parallel, covers_range_outside_engine) {
    use_engine("threaded", 2);
    cr_assert_eq(mxp__parallel_for(N, 1000, cover, NULL), MXP_OK);
    check_once();
    cr_assert_eq(mxp__parallel_for(0, 10, cover, NULL), MXP_OK);
    cr_assert_eq(mxp__parallel_for(-1, 10, cover, NULL), MXP_EINVAL);
    cr_assert_eq(mxp__parallel_for(5, 10, NULL, NULL), MXP_EINVAL);
    cr_assert_eq(mxp__parallel_busy(), 0, "all slots returned");
    mxp_engine_shutdown();
}

static int op_parallel(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    int64_t base = *(int64_t *)arg;
    (void)base;
    return mxp__parallel_for(N / 4, 500, cover, NULL);
}

static void cover_part(void *arg, int64_t b, int64_t e) {
    int64_t off = *(int64_t *)arg;
    note_busy();
    for (int64_t i = b; i < e; i++) atomic_fetch_add_explicit(&hits[off + i], 1, memory_order_relaxed);
}

static int op_part(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    note_busy();
    return mxp__parallel_for(N / 4, 700, cover_part, arg);
}

Test(parallel, inside_workers_within_budget) {
    use_engine("threaded", 2);
    static int64_t offs[4] = {0, N / 4, N / 2, 3 * N / 4};
    mxp_var *v[4];
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(mxp_engine_new_var(&v[k]), MXP_OK);
        mxp_engine_push_args a = {0};
        a.sync_fn = op_part;
        a.arg = &offs[k];
        a.mutate_vars = &v[k];
        a.n_mutate = 1;
        cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    }
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    check_once();
    cr_assert_leq(atomic_load(&max_busy), 2, "busy slots %d exceed the budget", atomic_load(&max_busy));
    for (int k = 0; k < 4; k++) mxp_engine_delete_var(v[k]);
    mxp_engine_shutdown();
    (void)op_parallel;
}

static void nested_inner(void *arg, int64_t b, int64_t e) {
    int64_t off = *(int64_t *)arg;
    for (int64_t i = b; i < e; i++) atomic_fetch_add_explicit(&hits[off + i], 1, memory_order_relaxed);
}
static void nested_outer(void *arg, int64_t b, int64_t e) {
    (void)arg;
    for (int64_t r = b; r < e; r++) {
        int64_t off = r * 1000;
        mxp__parallel_for(1000, 100, nested_inner, &off);
    }
}

Test(parallel, nested_calls_run_inline) {
    use_engine("threaded", 2);
    cr_assert_eq(mxp__parallel_for(N / 1000, 1, nested_outer, NULL), MXP_OK);
    check_once();
}

static atomic_int inits;
static void count_init(void) { atomic_fetch_add(&inits, 1); }

static int check_ftz(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
#if defined(__SSE__)
    *(int *)arg = (_mm_getcsr() & 0x8040) == 0x8040;
#else
    *(int *)arg = 1;
#endif
    return MXP_OK;
}

Test(parallel, workers_get_init_hook_and_ftz) {
    use_engine("threaded", 2);
    mxp__engine_set_worker_init(count_init);
    int ftz = 0;
    mxp_var *v;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    mxp_engine_push_args a = {0};
    a.sync_fn = check_ftz;
    a.arg = &ftz;
    a.mutate_vars = &v;
    a.n_mutate = 1;
    cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK);
    cr_assert_eq(ftz, 1, "worker runs with FTZ/DAZ");
    cr_assert(await_at_least(&inits, 2), "each of the 2 CPU workers ran the init hook (%d)", atomic_load(&inits));
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
    mxp__engine_set_worker_init(NULL);
    /* Denormal check on this (non-worker) thread is untouched. */
}
