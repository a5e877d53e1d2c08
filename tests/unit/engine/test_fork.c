/* test_fork.c — fork() with a running engine: the parent's work finishes
 * before the fork, the child gets a fresh engine (its threads are new) and
 * can keep using vars created before the fork; the parent is unaffected.
 * Criterion itself forks every test, so this also covers "engine used in a
 * forked process" on each run. */
#include <criterion/criterion.h>

#include "engine_test_util.h"

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MXP_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define MXP_TEST_ASAN 1
#endif

#if defined(__SANITIZE_THREAD__) || defined(MXP_TEST_ASAN)
/* TSan does not support starting threads in the child of a multithreaded
 * process (it kills it, or with die_after_fork=0 trips over the parent's
 * thread ids).  ASan's allocator is not fork-safe either: a lock another
 * thread (Criterion's, an engine worker's) held at the fork stays locked in
 * the child, and the child's new worker threads hung in it (seen once in
 * CI, 2026-11-22).  Under both the child of a *threaded* parent therefore
 * uses the naive engine, which still checks that the child gets a fresh
 * engine and never waits on the parent's threads; the plain build covers a
 * threaded child. */
#define CHILD_ENGINE "naive"
#else
#define CHILD_ENGINE "threaded"
#endif

static mxp_var *new_var(void) {
    mxp_var *v = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    return v;
}

static int push(mxp_engine_sync_fn fn, void *arg, mxp_var **m, const char *name) {
    mxp_engine_push_args a = {0};
    a.sync_fn = fn;
    a.arg = arg;
    a.mutate_vars = m;
    a.n_mutate = 1;
    a.name = name;
    return mxp_engine_push(&a);
}

static int slow_bump(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    for (volatile int i = 0; i < 5000; i++) {}
    atomic_fetch_add((atomic_int *)arg, 1);
    return MXP_OK;
}

/* ------------------------------------------------------------ fork */

Test(engine, fork_child_gets_a_fresh_engine) {
    use_engine("threaded", 2);
    static atomic_int n;
    mxp_var *v = new_var();
    for (int i = 0; i < 500; i++) cr_assert_eq(push(slow_bump, &n, &v, "parent"), MXP_OK);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        setenv("MXP_ENGINE_TYPE", CHILD_ENGINE, 1);
        /* Parent work was finished before fork; the child's engine is new. */
        int ok = atomic_load(&n) == 500;
        mxp_var *cv = NULL;
        ok = ok && mxp_engine_new_var(&cv) == MXP_OK;
        for (int i = 0; i < 300; i++) ok = ok && push(slow_bump, &n, &cv, "child") == MXP_OK;
        for (int i = 0; i < 10; i++) ok = ok && push(slow_bump, &n, &v, "child_old_var") == MXP_OK;
        ok = ok && mxp_engine_wait_for_all() == MXP_OK;
        ok = ok && atomic_load(&n) == 810 && mxp_engine_var_version(v) == 510;
        mxp_engine_delete_var(cv);
        mxp_engine_shutdown();
        _exit(ok ? 0 : 3);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(atomic_load(&n), 500, "the child's work does not happen in the parent");
    for (int i = 0; i < 10; i++) cr_assert_eq(push(slow_bump, &n, &v, "parent2"), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK);
    cr_assert_eq(atomic_load(&n), 510);
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
}

Test(engine, fork_after_shutdown_child_threaded) {
    use_engine("threaded", 2);
    static atomic_int n;
    mxp_var *v = new_var();
    for (int i = 0; i < 100; i++) cr_assert_eq(push(slow_bump, &n, &v, "parent"), MXP_OK);
    mxp_engine_shutdown(); /* no engine threads exist at fork */
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        setenv("MXP_ENGINE_TYPE", CHILD_ENGINE, 1);
        int ok = 1;
        for (int i = 0; i < 200; i++) ok = ok && push(slow_bump, &n, &v, "child") == MXP_OK;
        ok = ok && mxp_engine_wait_for_var(v) == MXP_OK && atomic_load(&n) == 300;
        ok = ok && strcmp(mxp_engine_type(), CHILD_ENGINE) == 0;
        mxp_engine_delete_var(v);
        mxp_engine_shutdown();
        _exit(ok ? 0 : 3);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
    cr_assert_eq(atomic_load(&n), 100);
    mxp_engine_delete_var(v);
}

/* A thread that keeps pushing while another forks: no push may slip in
 * between the prepare handler's wait for idleness and the fork, or the child
 * inherits a var queued behind a block no thread there will run, and its
 * first wait on that var never returns (seen in CI: io/test_iter hung). */
typedef struct pusher {
    mxp_var *v;
    atomic_int *n;
    atomic_int stop;
    atomic_int pushed;
} pusher;

/* The pusher stays at most 256 pushes ahead of the runs: unbounded, its
 * queue grew by ~10^5 ops a second under TSan, and every fork's wait for
 * idleness drained all of them (a 40-round run took 12 s instead of 1). */
static void *push_until_stopped(void *arg) {
    pusher *p = arg;
    while (!atomic_load(&p->stop)) {
        while (atomic_load(&p->pushed) - atomic_load(p->n) > 256 && !atomic_load(&p->stop)) sched_yield();
        if (push(slow_bump, p->n, &p->v, "racing_push") != MXP_OK) break;
        atomic_fetch_add(&p->pushed, 1);
    }
    return NULL;
}

Test(engine, fork_while_another_thread_pushes) {
    use_engine("threaded", 2);
    static atomic_int n;
    pusher p = {.v = new_var(), .n = &n};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, push_until_stopped, &p), 0);
    int failed_round = -1, status = 0;
    for (int round = 0; round < 40 && failed_round < 0; round++) {
        while (atomic_load(&p.pushed) < 20 * (round + 1)) sched_yield();
        pid_t pid = fork();
        cr_assert_neq(pid, -1);
        if (pid == 0) {
            alarm(60); /* a hang kills the child, and the parent reports it (60 s: TSan on a loaded machine) */
            setenv("MXP_ENGINE_TYPE", CHILD_ENGINE, 1);
            int ok = mxp_engine_wait_for_var(p.v) == MXP_OK;
            /* Every push the child inherited has run: one bump per version. */
            ok = ok && mxp_engine_var_version(p.v) == (uint64_t)atomic_load(&n);
            ok = ok && push(slow_bump, &n, &p.v, "child") == MXP_OK;
            ok = ok && mxp_engine_wait_for_all() == MXP_OK;
            ok = ok && mxp_engine_var_version(p.v) == (uint64_t)atomic_load(&n);
            _exit(ok ? 0 : 3);
        }
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed_round = round;
    }
    /* Stop the pusher before asserting: a failing assertion ends the test. */
    atomic_store(&p.stop, 1);
    pthread_join(th, NULL);
    cr_assert_eq(failed_round, -1, "round %d: child %s %d", failed_round,
                 WIFSIGNALED(status) ? "killed by signal" : "exit status",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    cr_assert_eq(mxp_engine_wait_for_var(p.v), MXP_OK);
    cr_assert_eq(mxp_engine_var_version(p.v), (uint64_t)atomic_load(&n));
    mxp_engine_delete_var(p.v);
    mxp_engine_shutdown();
}
