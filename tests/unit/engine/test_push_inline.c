/* test_push_inline.c — the pusher runs a ready block itself when the CPU
 * lane's backlog is large (threaded.c, mxp__eng_blk_decr_push): with every
 * worker held by a blocking op, pushes past the backlog limit run on the
 * pushing thread before push returns; ops on one var still run in push
 * order whoever runs them; ops that wait on a var are queued, not run
 * early; async functions and pushes from inside an engine function are
 * never run inline; the pusher's last-error message survives the runs;
 * every count is exact after wait_for_all.  Threaded
 * engine, 2 threads (TSan runs this file). */
#include <criterion/criterion.h>

#include "engine_test_util.h"
#include "base/base.h"

#include <string.h>

/* More vars than the 2-worker backlog limit (128 queued blocks), so ops
 * that find their var free keep arriving once the queue is full. */
enum { NVARS = 200, NOPS = 2000, LIMIT = 128 };

static mxp_var *new_var(void) {
    mxp_var *v = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    return v;
}

static atomic_int gate_open, blocked;

/* Holds a worker until the test opens the gate (bounded: 20 s). */
static int hold_worker(void *arg, const mxp_run_ctx *ctx) {
    (void)arg;
    (void)ctx;
    atomic_fetch_add(&blocked, 1);
    await_at_least(&gate_open, 1);
    return MXP_OK;
}

typedef struct slot {
    long order[NOPS / NVARS + 1]; /* values seen, in run order (guarded by the var) */
    int n;
} slot;

static slot slots[NVARS];
static pthread_t main_thread;
static atomic_int ran_inline, ran_total;

typedef struct op_arg {
    slot *s;
    long value;
} op_arg;

static op_arg args[NOPS];

static int append(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    op_arg *a = arg;
    a->s->order[a->s->n++] = a->value;
    if (pthread_equal(pthread_self(), main_thread)) atomic_fetch_add(&ran_inline, 1);
    atomic_fetch_add(&ran_total, 1);
    return MXP_OK;
}

static void push_blockers(mxp_var **bv) {
    for (int i = 0; i < 2; i++) {
        mxp_engine_push_args a = {0};
        a.sync_fn = hold_worker;
        a.mutate_vars = &bv[i];
        a.n_mutate = 1;
        a.name = "hold";
        cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    }
    cr_assert(await_at_least(&blocked, 2), "both workers should be held");
}

Test(push_inline, backlog_runs_on_pusher_in_order) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    mxp_var *bv[2] = {new_var(), new_var()}, *v[NVARS];
    for (int i = 0; i < NVARS; i++) v[i] = new_var();
    push_blockers(bv);
    /* The pusher's own last-error message survives the runs made on its
     * thread (a caller releasing arrays on its error path pushes). */
    mxp__error(MXP_EINVAL, "the pusher's own message");
    /* Both workers are held: the queue only grows until the pusher takes
     * over.  Op i writes var i % NVARS and records its index there. */
    for (int i = 0; i < NOPS; i++) {
        args[i] = (op_arg){&slots[i % NVARS], i};
        mxp_engine_push_args a = {0};
        a.sync_fn = append;
        a.arg = &args[i];
        a.mutate_vars = &v[i % NVARS];
        a.n_mutate = 1;
        a.name = "append";
        cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    }
    int inline_before_release = atomic_load(&ran_inline);
    cr_assert_str_eq(mxp_last_error(), "the pusher's own message");
    atomic_store(&gate_open, 1);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    /* Ops 0..LIMIT filled the queue; every later op on vars LIMIT+1.. found
     * its var free (its previous op ran inline) and ran here, while those on
     * vars 0..LIMIT waited behind a queued op. */
    int want = (NVARS - LIMIT - 1) * (NOPS / NVARS);
    cr_assert_geq(inline_before_release, want, "only %d of %d ran inline (want %d)", inline_before_release, NOPS, want);
    cr_assert_eq(atomic_load(&ran_total), NOPS);
    for (int k = 0; k < NVARS; k++) {
        cr_assert_eq(slots[k].n, NOPS / NVARS);
        for (int j = 0; j < slots[k].n; j++) cr_assert_eq(slots[k].order[j], (long)k + (long)j * NVARS, "var %d", k);
    }
    for (int i = 0; i < NVARS; i++) mxp_engine_delete_var(v[i]);
    mxp_engine_delete_var(bv[0]);
    mxp_engine_delete_var(bv[1]);
    mxp_engine_shutdown();
}

/* An op waiting on a var held by a blocked worker is not run early, even
 * with a large backlog: it is queued on its var. */
Test(push_inline, waiting_ops_are_not_run_early) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    mxp_var *bv[2] = {new_var(), new_var()}, *v[NVARS];
    for (int i = 0; i < NVARS; i++) v[i] = new_var();
    push_blockers(bv);
    for (int i = 0; i < 300; i++) { /* fill the backlog */
        args[i] = (op_arg){&slots[i % NVARS], i};
        mxp_engine_push_args a = {0};
        a.sync_fn = append;
        a.arg = &args[i];
        a.mutate_vars = &v[i % NVARS];
        a.n_mutate = 1;
        a.name = "append";
        cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    }
    static slot after;
    static op_arg dep = {&after, 7};
    mxp_engine_push_args a = {0};
    a.sync_fn = append;
    a.arg = &dep;
    a.const_vars = &bv[0]; /* written by a held op */
    a.n_const = 1;
    a.mutate_vars = &v[0];
    a.n_mutate = 1;
    a.name = "dependent";
    cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    cr_assert_eq(after.n, 0, "an op reading a var still being written ran before its writer");
    atomic_store(&gate_open, 1);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(after.n, 1);
    cr_assert_eq(atomic_load(&ran_total), 301);
    for (int i = 0; i < NVARS; i++) mxp_engine_delete_var(v[i]);
    mxp_engine_delete_var(bv[0]);
    mxp_engine_delete_var(bv[1]);
    mxp_engine_shutdown();
}

static atomic_int async_inline;

static void async_mark(void *arg, const mxp_run_ctx *ctx, mxp_engine_callback cb) {
    (void)arg;
    (void)ctx;
    if (pthread_equal(pthread_self(), main_thread)) atomic_fetch_add(&async_inline, 1);
    cb.done(cb.token, MXP_OK, NULL);
}

/* Async functions are always queued: one may wait for something the
 * pushing thread has yet to push. */
Test(push_inline, async_functions_are_queued) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    mxp_var *bv[2] = {new_var(), new_var()}, *v = new_var();
    push_blockers(bv);
    mxp_var *vs[NVARS];
    for (int i = 0; i < NVARS; i++) vs[i] = new_var();
    for (int i = 0; i < 400; i++) {
        mxp_engine_push_args a = {0};
        a.async_fn = async_mark;
        a.mutate_vars = &vs[i % NVARS];
        a.n_mutate = 1;
        a.prop = MXP_FN_ASYNC;
        a.name = "async";
        cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    }
    cr_assert_eq(atomic_load(&async_inline), 0);
    atomic_store(&gate_open, 1);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(atomic_load(&async_inline), 0);
    for (int i = 0; i < NVARS; i++) mxp_engine_delete_var(vs[i]);
    mxp_engine_delete_var(v);
    mxp_engine_delete_var(bv[0]);
    mxp_engine_delete_var(bv[1]);
    mxp_engine_shutdown();
}
