/* test_push_arg.c — pre-created operators pushed with a per-push argument
 * (mxp_engine_push_op_arg), the way the executor runs its nodes: each run
 * gets exactly its own push's argument, in push order; every argument is
 * released exactly once whether its push ran or was skipped after an
 * error; an op deleted with pushes in flight finishes them first; plain
 * push_op and push_op_arg mix on one op; pushes from several threads on
 * their own ops (TSan runs this file).  Both engines where it makes sense
 * (a blocking gate needs worker threads, so those tests are threaded
 * only). */
#include <criterion/criterion.h>

#include "engine_test_util.h"
#include "base/base.h"

#include <string.h>

static mxp_var *new_var(void) {
    mxp_var *v = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    cr_assert_not_null(v);
    return v;
}

/* What a run appends to: ordered by the op's write var, so no lock. */
typedef struct run_log {
    long seen[20000];
    int n;
    long fail_at;       /* a push with this value fails; -1: none */
} run_log;

typedef struct push_arg {
    run_log *log;
    long value;
} push_arg;

static atomic_int released;
static atomic_int op_freed;

static int record(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    push_arg *p = arg;
    if (p->value == p->log->fail_at) return mxp__error(MXP_EINVAL, "value %ld refused", p->value);
    p->log->seen[p->log->n++] = p->value;
    return MXP_OK;
}

static void release_arg(void *arg) {
    atomic_fetch_add(&released, 1);
    free(arg);
}

static void count_op_free(void *arg) {
    (void)arg;
    atomic_fetch_add(&op_freed, 1);
}

static mxp_engine_op *new_record_op(mxp_var *v, run_log *own, const char *name) {
    mxp_engine_push_args a = {0};
    a.sync_fn = record;
    a.arg = own;
    a.free_arg = count_op_free;
    a.mutate_vars = &v;
    a.n_mutate = 1;
    a.name = name;
    mxp_engine_op *op = NULL;
    cr_assert_eq(mxp_engine_new_op(&a, &op), MXP_OK);
    return op;
}

static void push_value(mxp_engine_op *op, run_log *log, long value) {
    push_arg *p = malloc(sizeof *p);
    cr_assert_not_null(p);
    p->log = log;
    p->value = value;
    cr_assert_eq(mxp_engine_push_op_arg(op, 0, p, release_arg), MXP_OK);
}

static void ordered(const char *type) {
    use_engine(type, 2);
    atomic_store(&released, 0);
    atomic_store(&op_freed, 0);
    mxp_var *v = new_var();
    static run_log log;
    memset(&log, 0, sizeof log);
    log.fail_at = -1;
    mxp_engine_op *op = new_record_op(v, NULL, "ordered");
    for (long i = 0; i < 10000; i++) push_value(op, &log, i);
    cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK);
    cr_assert_eq(log.n, 10000);
    for (int i = 0; i < log.n; i++) cr_assert_eq(log.seen[i], i, "run %d got value %ld", i, log.seen[i]);
    cr_assert_eq(atomic_load(&released), 10000, "each per-push argument released once");
    cr_assert_eq(atomic_load(&op_freed), 0, "the op's own free_arg waits for delete");
    mxp_engine_delete_op(op);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(atomic_load(&op_freed), 1);
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
}

Test(push_arg, runs_get_their_own_argument_in_push_order_threaded) { ordered("threaded"); }
Test(push_arg, runs_get_their_own_argument_in_push_order_naive) { ordered("naive"); }

/* push_op (the op's own argument) and push_op_arg interleaved on one op. */
Test(push_arg, mixes_with_plain_push_op) {
    use_engine("threaded", 2);
    atomic_store(&released, 0);
    mxp_var *v = new_var();
    static run_log log;
    memset(&log, 0, sizeof log);
    log.fail_at = -1;
    /* The op's own argument: a push_arg with value -7 into the same log. */
    static push_arg own;
    own.log = &log;
    own.value = -7;
    mxp_engine_push_args a = {0};
    a.sync_fn = record;
    a.arg = &own;
    a.mutate_vars = &v;
    a.n_mutate = 1;
    a.name = "mixed";
    mxp_engine_op *op = NULL;
    cr_assert_eq(mxp_engine_new_op(&a, &op), MXP_OK);
    for (long i = 0; i < 300; i++) {
        if (i % 3 == 0) cr_assert_eq(mxp_engine_push_op(op, 0), MXP_OK);
        else push_value(op, &log, i);
    }
    cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK);
    cr_assert_eq(log.n, 300);
    for (int i = 0; i < 300; i++) cr_assert_eq(log.seen[i], i % 3 == 0 ? -7 : i, "run %d", i);
    cr_assert_eq(atomic_load(&released), 200);
    mxp_engine_delete_op(op);
    mxp_engine_delete_var(v);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    mxp_engine_shutdown();
}

/* Push 5 fails: pushes 6..9 of the same op are skipped (their var carries
 * the error) but their arguments are still released; the wait names the op
 * once; after it, the op runs again. */
static void error_propagation(const char *type) {
    use_engine(type, 2);
    atomic_store(&released, 0);
    mxp_var *v = new_var();
    static run_log log;
    memset(&log, 0, sizeof log);
    log.fail_at = 5;
    mxp_engine_op *op = new_record_op(v, NULL, "node7 (FullyConnected)");
    for (long i = 0; i < 10; i++) push_value(op, &log, i);
    int rc = mxp_engine_wait_for_var(v);
    cr_assert_eq(rc, MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "node7 (FullyConnected)") != NULL, "%s", mxp_last_error());
    cr_assert(strstr(mxp_last_error(), "value 5 refused") != NULL, "%s", mxp_last_error());
    cr_assert_eq(log.n, 5, "runs before the failure only, got %d", log.n);
    for (int i = 0; i < 5; i++) cr_assert_eq(log.seen[i], i);
    cr_assert_eq(atomic_load(&released), 10, "skipped pushes release their argument too");
    cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK, "raised once");
    for (long i = 10; i < 13; i++) push_value(op, &log, i);
    cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK);
    cr_assert_eq(log.n, 8);
    cr_assert_eq(log.seen[7], 12);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK, "the error was raised once, by wait_for_var");
    mxp_engine_delete_op(op);
    mxp_engine_delete_var(v);
    cr_assert_eq(atomic_load(&released), 13);
    mxp_engine_shutdown();
}

Test(push_arg, failure_skips_later_pushes_and_releases_their_arguments_threaded) { error_propagation("threaded"); }
Test(push_arg, failure_skips_later_pushes_and_releases_their_arguments_naive) { error_propagation("naive"); }

/* A gate holds the var, so every push is in flight when the op is deleted. */
static atomic_int gate_open;
static int gate(void *arg, const mxp_run_ctx *ctx) {
    (void)arg;
    (void)ctx;
    while (!atomic_load(&gate_open)) sched_yield();
    return MXP_OK;
}

Test(push_arg, delete_while_in_flight_runs_every_push_then_frees) {
    use_engine("threaded", 2);
    atomic_store(&released, 0);
    atomic_store(&op_freed, 0);
    atomic_store(&gate_open, 0);
    mxp_var *v = new_var();
    mxp_engine_push_args g = {0};
    g.sync_fn = gate;
    g.mutate_vars = &v;
    g.n_mutate = 1;
    g.name = "gate";
    cr_assert_eq(mxp_engine_push(&g), MXP_OK);
    static run_log log;
    memset(&log, 0, sizeof log);
    log.fail_at = -1;
    mxp_engine_op *op = new_record_op(v, NULL, "deleted_early");
    for (long i = 0; i < 100; i++) push_value(op, &log, i);
    mxp_engine_delete_op(op);
    cr_assert_eq(atomic_load(&op_freed), 0, "not freed while its pushes wait");
    cr_assert_eq(log.n, 0);
    atomic_store(&gate_open, 1);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(log.n, 100);
    for (int i = 0; i < 100; i++) cr_assert_eq(log.seen[i], i);
    cr_assert_eq(atomic_load(&released), 100);
    cr_assert_eq(atomic_load(&op_freed), 1);
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
}

Test(push_arg, null_op_is_einval_and_the_argument_stays_with_the_caller) {
    use_engine("threaded", 2);
    atomic_store(&released, 0);
    int x = 0;
    cr_assert_eq(mxp_engine_push_op_arg(NULL, 0, &x, release_arg), MXP_EINVAL);
    cr_assert_eq(atomic_load(&released), 0);
    mxp_engine_shutdown();
}

/* Two pushing threads, each with its own op and var, plus a shared read var
 * both ops read: per-thread order holds, nothing is lost. */
typedef struct pusher {
    mxp_engine_op *op;
    run_log *log;
    pthread_t th;
} pusher;

static void *push_many(void *p) {
    pusher *u = p;
    for (long i = 0; i < 5000; i++) {
        push_arg *a = malloc(sizeof *a);
        a->log = u->log;
        a->value = i;
        if (mxp_engine_push_op_arg(u->op, 0, a, release_arg) != MXP_OK) free(a);
    }
    return NULL;
}

Test(push_arg, pushes_from_two_threads_on_their_own_ops) {
    use_engine("threaded", 2);
    atomic_store(&released, 0);
    static run_log logs[2];
    memset(logs, 0, sizeof logs);
    mxp_var *shared = new_var();
    mxp_var *v[2] = {new_var(), new_var()};
    pusher u[2];
    for (int t = 0; t < 2; t++) {
        logs[t].fail_at = -1;
        mxp_engine_push_args a = {0};
        a.sync_fn = record;
        a.const_vars = &shared;
        a.n_const = 1;
        a.mutate_vars = &v[t];
        a.n_mutate = 1;
        a.name = t ? "pusher1" : "pusher0";
        u[t].op = NULL;
        cr_assert_eq(mxp_engine_new_op(&a, &u[t].op), MXP_OK);
        u[t].log = &logs[t];
    }
    for (int t = 0; t < 2; t++) pthread_create(&u[t].th, NULL, push_many, &u[t]);
    for (int t = 0; t < 2; t++) pthread_join(u[t].th, NULL);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    for (int t = 0; t < 2; t++) {
        cr_assert_eq(logs[t].n, 5000);
        for (int i = 0; i < 5000; i++) cr_assert_eq(logs[t].seen[i], i, "thread %d run %d", t, i);
        mxp_engine_delete_op(u[t].op);
        mxp_engine_delete_var(v[t]);
    }
    mxp_engine_delete_var(shared);
    cr_assert_eq(atomic_load(&released), 10000);
    mxp_engine_shutdown();
}
