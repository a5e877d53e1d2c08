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

/* A job that started while every slot was taken (a backward running beside
 * its forward) gets a helper as soon as a slot is released, instead of
 * running all its chunks alone. */
typedef struct late_join {
    pthread_t caller;
    atomic_int started, helper_ran, gave_up;
    atomic_int chunks_by_helper;
} late_join;

static void wait_for_helper(void *arg, int64_t b, int64_t e) {
    late_join *lj = arg;
    (void)b; (void)e;
    if (!pthread_equal(pthread_self(), lj->caller)) {
        atomic_store(&lj->helper_ran, 1);
        atomic_fetch_add(&lj->chunks_by_helper, 1);
        return;
    }
    atomic_store(&lj->started, 1);
    /* The caller's chunks hold on (bounded) until a helper has run one. */
    double t0 = now_s();
    while (!atomic_load(&lj->helper_ran) && !atomic_load(&lj->gave_up)) {
        if (now_s() - t0 > 20.0) atomic_store(&lj->gave_up, 1);
        sched_yield();
    }
}

static void *run_late_join_job(void *arg) {
    late_join *lj = arg;
    lj->caller = pthread_self();
    mxp__parallel_for(64, 1, wait_for_helper, lj);
    return NULL;
}

Test(parallel, job_started_without_slots_gets_a_helper_when_one_frees) {
    use_engine("threaded", 2);
    cr_assert_eq(mxp__parallel_try_acquire(2), 2, "the test needs both slots");
    late_join lj = {0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, run_late_join_job, &lj), 0);
    cr_assert(await_at_least(&lj.started, 1), "the job never started");
    cr_assert_eq(atomic_load(&lj.helper_ran), 0, "a helper ran with no free slot");
    mxp__parallel_release(1); /* the "forward" finished */
    pthread_join(th, NULL);
    mxp__parallel_release(1);
    cr_assert_eq(atomic_load(&lj.gave_up), 0, "no helper joined within 20 s of a slot freeing");
    cr_assert_gt(atomic_load(&lj.chunks_by_helper), 0);
    cr_assert_eq(mxp__parallel_busy(), 0, "slots leaked: %d busy", mxp__parallel_busy());
}

/* Every thread takes chunks from its CPU's part of the range first and
 * then steals from the back of the others' (parallel.c, pf_part): each
 * index must still run exactly once for any thread count (more threads
 * than parts included: 12 > PF_MAX_PARTS) and when no helper can join, so
 * the caller alone empties every part.  The budget is read once per
 * process, so each thread count is its own test. */
static void cover_sizes(int threads, bool slots_taken) {
    use_engine("threaded", threads);
    cr_assert_eq(mxp_num_threads(), threads, "budget %d, the test asked for %d", mxp_num_threads(), threads);
    static const int64_t sizes[] = {2, 7, 97, 1000, 4099, N};
    static const int64_t grains[] = {1, 3, 64, 1000};
    int held = slots_taken ? mxp__parallel_try_acquire(threads) : 0;
    if (slots_taken) cr_assert_eq(held, threads, "the test needs every slot (got %d)", held);
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (size_t g = 0; g < sizeof grains / sizeof *grains; g++) {
            for (int i = 0; i < N; i++) atomic_store_explicit(&hits[i], 0, memory_order_relaxed);
            cr_assert_eq(mxp__parallel_for(sizes[s], grains[g], cover, NULL), MXP_OK);
            for (int64_t i = 0; i < N; i++)
                cr_assert_eq(atomic_load(&hits[i]), i < sizes[s] ? 1 : 0,
                             "%d threads%s, n %lld grain %lld: index %lld hit %d times", threads,
                             slots_taken ? " (no helper)" : "", (long long)sizes[s], (long long)grains[g],
                             (long long)i, atomic_load(&hits[i]));
        }
    mxp__parallel_release(held);
    cr_assert_eq(mxp__parallel_busy(), 0, "slots leaked: %d busy", mxp__parallel_busy());
    mxp_engine_shutdown();
}

Test(parallel, parts_cover_each_index_once_3_threads) { cover_sizes(3, false); }
Test(parallel, parts_cover_each_index_once_12_threads) { cover_sizes(12, false); }
Test(parallel, caller_alone_takes_every_part_2_threads) { cover_sizes(2, true); }
Test(parallel, caller_alone_takes_every_part_12_threads) { cover_sizes(12, true); }
