/* test_engine.c — the engine API beyond the randomized stress: argument
 * checks, var versions, dedupe, parallel readers, pre-created operators,
 * the priority and copy lanes, async completion from foreign threads,
 * delete_var after pending users, wait_for_all, shutdown with pending work
 * and engine selection.  fork is in test_fork.c. */
#include <criterion/criterion.h>

#include "engine_test_util.h"

#include <string.h>

static mxp_var *new_var(void) {
    mxp_var *v = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    cr_assert_not_null(v);
    return v;
}

static int push(mxp_engine_sync_fn fn, void *arg, mxp_var **c, int nc, mxp_var **m, int nm,
                const char *name) {
    mxp_engine_push_args a = {0};
    a.sync_fn = fn;
    a.arg = arg;
    a.const_vars = c;
    a.n_const = nc;
    a.mutate_vars = m;
    a.n_mutate = nm;
    a.name = name;
    return mxp_engine_push(&a);
}

/* ------------------------------------------------------------ arguments */

static int noop(void *arg, const mxp_run_ctx *ctx) { (void)arg; (void)ctx; return MXP_OK; }

Test(engine, rejects_bad_arguments) {
    mxp_var *v = new_var();
    mxp_engine_push_args a = {0};
    cr_assert_eq(mxp_engine_push(NULL), MXP_EINVAL);
    cr_assert_eq(mxp_engine_push(&a), MXP_EINVAL, "no function");
    cr_assert(strstr(mxp_last_error(), "sync_fn"), "%s", mxp_last_error());
    a.sync_fn = noop;
    a.n_mutate = 1; /* list NULL */
    cr_assert_eq(mxp_engine_push(&a), MXP_EINVAL);
    mxp_var *nullv[1] = {NULL};
    a.mutate_vars = nullv;
    cr_assert_eq(mxp_engine_push(&a), MXP_EINVAL);
    a.mutate_vars = &v;
    a.prop = MXP_FN_DELETE_VAR;
    cr_assert_eq(mxp_engine_push(&a), MXP_EINVAL, "delete is internal");
    a.prop = 42;
    cr_assert_eq(mxp_engine_push(&a), MXP_EINVAL);
    a.prop = MXP_FN_NORMAL;
    a.device = (mxp_device){MXP_DEV_GPU, 0};
    a.name = "gpu_op";
    cr_assert_eq(mxp_engine_push(&a), MXP_EINVAL, "no GPU workers registered");
    cr_assert(strstr(mxp_last_error(), "gpu_op"), "%s", mxp_last_error());
    cr_assert_eq(mxp_engine_new_var(NULL), MXP_EINVAL);
    cr_assert_eq(mxp_engine_wait_for_var(NULL), MXP_EINVAL);
    cr_assert_eq(mxp_engine_push_op(NULL, 0), MXP_EINVAL);
    mxp_engine_op *op = (mxp_engine_op *)&a;
    cr_assert_eq(mxp_engine_new_op(NULL, &op), MXP_EINVAL);
    cr_assert_null(op, "out cleared on entry");
    mxp_engine_delete_var(NULL);
    mxp_engine_delete_op(NULL);
    mxp_engine_delete_var(v);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
}

/* ------------------------------------------------------------ ordering */

typedef struct logbuf { int vals[4096]; atomic_int n; } logbuf;
typedef struct logarg { logbuf *log; int value; } logarg;

static int append_value(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    logarg *la = arg;
    int i = atomic_fetch_add(&la->log->n, 1);
    la->log->vals[i] = la->value;
    return MXP_OK;
}

static void writes_run_in_push_order(const char *type) {
    use_engine(type, 2);
    mxp_var *v = new_var();
    static logbuf log;
    static logarg args[2000];
    for (int i = 0; i < 2000; i++) {
        args[i] = (logarg){&log, i};
        cr_assert_eq(push(append_value, &args[i], NULL, 0, &v, 1, "append"), MXP_OK);
    }
    cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK);
    cr_assert_eq(atomic_load(&log.n), 2000);
    for (int i = 0; i < 2000; i++) cr_assert_eq(log.vals[i], i, "position %d", i);
    cr_assert_eq(mxp_engine_var_version(v), 2000);
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
}

Test(engine, writes_in_push_order_threaded) { writes_run_in_push_order("threaded"); }
Test(engine, writes_in_push_order_naive) { writes_run_in_push_order("naive"); }

/* Two readers of the same version must be able to run at the same time:
 * each waits (bounded) for the other to start. */
static atomic_int started;
static int rendezvous(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    (void)arg;
    atomic_fetch_add(&started, 1);
    return await_at_least(&started, 2) ? MXP_OK : MXP_ETIMEDOUT;
}

Test(engine, readers_run_in_parallel) {
    use_engine("threaded", 2);
    mxp_var *v = new_var(), *o1 = new_var(), *o2 = new_var();
    cr_assert_eq(push(noop, NULL, NULL, 0, &v, 1, "init"), MXP_OK);
    cr_assert_eq(push(rendezvous, NULL, &v, 1, &o1, 1, "reader1"), MXP_OK);
    cr_assert_eq(push(rendezvous, NULL, &v, 1, &o2, 1, "reader2"), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK, "readers did not overlap: %s", mxp_last_error());
    cr_assert_eq(mxp_engine_var_version(v), 1, "reads do not bump the version");
    cr_assert_eq(mxp_engine_var_version(o1), 1);
    mxp_engine_delete_var(v);
    mxp_engine_delete_var(o1);
    mxp_engine_delete_var(o2);
    mxp_engine_shutdown();
}

/* A var listed in both lists is a write: such ops never overlap, and a
 * var listed twice is one dependency (otherwise the op would deadlock on
 * itself or run twice). */
static atomic_int inflight, overlap, runs;
static int exclusive(void *arg, const mxp_run_ctx *ctx) {
    (void)arg;
    (void)ctx;
    if (atomic_fetch_add(&inflight, 1) != 0) atomic_store(&overlap, 1);
    for (volatile int i = 0; i < 2000; i++) {}
    atomic_fetch_sub(&inflight, 1);
    atomic_fetch_add(&runs, 1);
    return MXP_OK;
}

Test(engine, duplicates_and_both_lists) {
    use_engine("threaded", 2);
    mxp_var *v = new_var(), *w = new_var();
    for (int i = 0; i < 300; i++) {
        mxp_var *c[3] = {v, v, w};
        mxp_var *m[2] = {v, v};
        cr_assert_eq(push(exclusive, NULL, c, 3, m, 2, "both"), MXP_OK);
    }
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(atomic_load(&runs), 300);
    cr_assert_eq(atomic_load(&overlap), 0, "ops writing the same var overlapped");
    cr_assert_eq(mxp_engine_var_version(v), 300, "one write per op, not two");
    cr_assert_eq(mxp_engine_var_version(w), 0);
    mxp_engine_delete_var(v);
    mxp_engine_delete_var(w);
    mxp_engine_shutdown();
}

Test(engine, empty_lists_run) {
    use_engine("threaded", 2);
    for (int i = 0; i < 100; i++) cr_assert_eq(push(exclusive, NULL, NULL, 0, NULL, 0, "free"), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(atomic_load(&runs), 100);
}

/* ------------------------------------------------------------ pre-created ops */

static atomic_int freed;
static void count_free(void *arg) { (void)arg; atomic_fetch_add(&freed, 1); }
static int bump(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    (*(long *)arg)++; /* ordered by the var it writes */
    return MXP_OK;
}

static void precreated(const char *type) {
    use_engine(type, 2);
    mxp_var *v = new_var();
    static long counter;
    mxp_engine_push_args a = {0};
    a.sync_fn = bump;
    a.arg = &counter;
    a.free_arg = count_free;
    a.mutate_vars = &v;
    a.n_mutate = 1;
    a.name = "a_rather_long_operator_name_that_does_not_fit_inline_storage";
    mxp_engine_op *op = NULL;
    cr_assert_eq(mxp_engine_new_op(&a, &op), MXP_OK);
    for (int i = 0; i < 10000; i++) cr_assert_eq(mxp_engine_push_op(op, 0), MXP_OK);
    /* Deleted while pushes are pending: takes effect after them. */
    mxp_engine_delete_op(op);
    cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(counter, 10000);
    cr_assert_eq(atomic_load(&freed), 1, "free_arg runs once, at delete");
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
}

Test(engine, precreated_ops_threaded) { precreated("threaded"); }
Test(engine, precreated_ops_naive) { precreated("naive"); }

Test(engine, free_arg_runs_once_per_plain_push) {
    use_engine("threaded", 2);
    mxp_var *v = new_var();
    for (int i = 0; i < 500; i++) {
        mxp_engine_push_args a = {0};
        a.sync_fn = noop;
        a.free_arg = count_free;
        a.mutate_vars = &v;
        a.n_mutate = 1;
        cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    }
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(atomic_load(&freed), 500);
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
}

/* ------------------------------------------------------------ lanes */

static atomic_int gate, gate_entered;
static int wait_gate(void *arg, const mxp_run_ctx *ctx) {
    (void)arg;
    (void)ctx;
    atomic_store(&gate_entered, 1);
    return await_at_least(&gate, 1) ? MXP_OK : MXP_ETIMEDOUT;
}

Test(engine, priority_lane_orders_by_priority) {
    use_engine("threaded", 2);
    static logbuf log;
    static logarg args[64];
    /* Occupy the single priority worker, then queue ops out of order. */
    mxp_engine_push_args a = {0};
    a.sync_fn = wait_gate;
    a.prop = MXP_FN_PRIORITIZED;
    a.name = "gate";
    cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    cr_assert(await_at_least(&gate_entered, 1));
    int prios[8] = {3, 9, 1, 7, 5, 9, 2, 8};
    for (int i = 0; i < 8; i++) {
        args[i] = (logarg){&log, prios[i] * 100 + i};
        mxp_engine_push_args p = {0};
        p.sync_fn = append_value;
        p.arg = &args[i];
        p.prop = MXP_FN_PRIORITIZED;
        p.priority = prios[i];
        p.name = "prio";
        cr_assert_eq(mxp_engine_push(&p), MXP_OK);
    }
    /* Until the gate opens nothing in that lane may run; the normal lane
     * is independent and still runs. */
    mxp_var *v = new_var();
    cr_assert_eq(push(noop, NULL, NULL, 0, &v, 1, "normal"), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK);
    cr_assert_eq(atomic_load(&log.n), 0);
    atomic_store(&gate, 1);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    int want[8] = {901, 905, 807, 703, 504, 300, 206, 102}; /* priority desc, then push order */
    cr_assert_eq(atomic_load(&log.n), 8);
    for (int i = 0; i < 8; i++) cr_assert_eq(log.vals[i], want[i], "slot %d: %d", i, log.vals[i]);
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
}

static int copy_fn(void *arg, const mxp_run_ctx *ctx) {
    cr_assert_eq(ctx->device.type, MXP_DEV_CPU);
    cr_assert_null(ctx->stream);
    (*(long *)arg) += 5;
    return MXP_OK;
}

Test(engine, copy_lane_respects_dependencies) {
    use_engine("threaded", 2);
    mxp_var *v = new_var();
    static long x;
    for (int i = 0; i < 200; i++) {
        mxp_engine_push_args a = {0};
        a.sync_fn = i % 2 ? copy_fn : bump;
        a.arg = &x;
        a.mutate_vars = &v;
        a.n_mutate = 1;
        a.prop = i % 2 ? MXP_FN_COPY_TO_DEV : MXP_FN_NORMAL;
        cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    }
    cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK);
    cr_assert_eq(x, 100 * 5 + 100);
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
}

/* ------------------------------------------------------------ async */

static completer comp;
static long async_sum;
static void add_one(void *arg) { (void)arg; async_sum++; }
static void async_add(void *arg, const mxp_run_ctx *ctx, mxp_engine_callback cb) {
    (void)ctx;
    completer_post(&comp, add_one, arg, cb, MXP_OK, NULL);
}

static void async_foreign(const char *type) {
    use_engine(type, 2);
    completer_start(&comp);
    mxp_var *v = new_var();
    for (int i = 0; i < 3000; i++) {
        mxp_engine_push_args a = {0};
        if (i % 3 == 0) a.sync_fn = bump; else a.async_fn = async_add;
        a.arg = &async_sum;
        a.mutate_vars = &v;
        a.n_mutate = 1;
        a.prop = i % 3 ? MXP_FN_ASYNC : MXP_FN_NORMAL;
        cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    }
    cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK);
    cr_assert_eq(async_sum, 3000, "async completions out of order or lost");
    cr_assert_eq(mxp_engine_var_version(v), 3000);
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
    completer_stop(&comp);
}

Test(engine, async_completion_from_foreign_thread) { async_foreign("threaded"); }
Test(engine, async_completion_from_foreign_thread_naive) { async_foreign("naive"); }

/* ------------------------------------------------------------ delete, wait, shutdown */

Test(engine, delete_var_after_pending_users) {
    use_engine("threaded", 2);
    static long c;
    mxp_var *v = new_var();
    for (int i = 0; i < 1000; i++) cr_assert_eq(push(bump, &c, NULL, 0, &v, 1, "w"), MXP_OK);
    mxp_engine_delete_var(v); /* returns at once; frees after the 1000 (ASan checks) */
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(c, 1000);
    mxp_engine_shutdown();
}

static int slow_bump(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    for (volatile int i = 0; i < 5000; i++) {}
    atomic_fetch_add((atomic_int *)arg, 1);
    return MXP_OK;
}

Test(engine, shutdown_completes_pending_work_and_restarts) {
    use_engine("threaded", 2);
    static atomic_int n;
    mxp_var *vs[8];
    for (int i = 0; i < 8; i++) vs[i] = new_var();
    for (int i = 0; i < 4000; i++) cr_assert_eq(push(slow_bump, &n, NULL, 0, &vs[i % 8], 1, "s"), MXP_OK);
    mxp_engine_shutdown();
    cr_assert_eq(atomic_load(&n), 4000, "shutdown must finish pending work");
    /* Vars survive an engine: a new one is created on next use. */
    cr_assert_eq(push(slow_bump, &n, NULL, 0, &vs[0], 1, "after"), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_var(vs[0]), MXP_OK);
    cr_assert_eq(atomic_load(&n), 4001);
    cr_assert_eq(mxp_engine_var_version(vs[0]), 501);
    for (int i = 0; i < 8; i++) mxp_engine_delete_var(vs[i]);
    mxp_engine_shutdown();
    mxp_engine_shutdown(); /* none exists: fine */
}

Test(engine, wait_for_all_waits_for_everything) {
    use_engine("threaded", 2);
    static atomic_int n;
    mxp_var *vs[5];
    for (int i = 0; i < 5; i++) vs[i] = new_var();
    for (int i = 0; i < 2000; i++) cr_assert_eq(push(slow_bump, &n, &vs[(i + 1) % 5], 1, &vs[i % 5], 1, "s"), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(atomic_load(&n), 2000);
    for (int i = 0; i < 5; i++) mxp_engine_delete_var(vs[i]);
    mxp_engine_shutdown();
}

/* ------------------------------------------------------------ selection */

static char logged[512];
static void sink(int level, const char *cat, const char *msg, void *user) {
    (void)user;
    if (level == MXP_LOG_WARN && strcmp(cat, "engine") == 0) snprintf(logged, sizeof logged, "%s", msg);
}

Test(engine, unknown_engine_type_warns_and_uses_threaded) {
    mxp_log_set_sink(sink, NULL);
    use_engine("FancyEngine", 2);
    cr_assert_str_eq(mxp_engine_type(), "threaded");
    cr_assert(strstr(logged, "FancyEngine"), "warning names the value: '%s'", logged);
    mxp_log_set_sink(NULL, NULL);
}

static pthread_t pusher_thread;
static int on_caller(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    *(int *)arg = pthread_equal(pthread_self(), pusher_thread);
    return MXP_OK;
}

Test(engine, naive_runs_on_the_calling_thread) {
    use_engine("naive", 2);
    cr_assert_str_eq(mxp_engine_type(), "naive");
    pusher_thread = pthread_self();
    int same = -1;
    mxp_var *v = new_var();
    cr_assert_eq(push(on_caller, &same, NULL, 0, &v, 1, "here"), MXP_OK);
    cr_assert_eq(same, 1, "naive push runs before returning, on the caller");
    cr_assert_eq(mxp_engine_var_version(v), 1);
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
}

Test(engine, budget_from_environment) {
    use_engine("threaded", 3);
    cr_assert_eq(mxp_num_threads(), 3);
}
