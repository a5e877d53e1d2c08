/* test_fork_hooks.c — modules register their fork() handling with the
 * engine (mxp__engine_register_fork_hooks) instead of the engine calling
 * them: `before` hooks run in registration order in the prepare handler,
 * `after` hooks in reverse order in parent and child alike, and storage's
 * pools (registered that way) are usable in a child forked while another
 * thread allocates. */
#include <criterion/criterion.h>

#include "engine_test_util.h"
#include "engine/engine.h"
#include "storage/storage.h"

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* What the hooks saw, in order: 'a'/'b' before, 'A'/'B' after. */
static char g_log[64];
static int g_n;
static void a_before(void) { g_log[g_n++] = 'a'; }
static void a_after(void) { g_log[g_n++] = 'A'; }
static void b_before(void) { g_log[g_n++] = 'b'; }
static void b_after(void) { g_log[g_n++] = 'B'; }

static int nop(void *arg, const mxp_run_ctx *ctx) {
    (void)arg; (void)ctx;
    return MXP_OK;
}

/* The engine installs its pthread_atfork handlers when it is first made. */
static void start_engine(void) {
    mxp_var *v = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    mxp_engine_push_args a = MXP_STRUCT_INIT(mxp_engine_push_args);
    a.sync_fn = nop;
    a.mutate_vars = &v;
    a.n_mutate = 1;
    a.name = "start";
    cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    mxp_engine_delete_var(v);
}

Test(engine_fork_hooks, run_in_order_in_parent_and_child) {
    use_engine("threaded", 2);
    cr_assert_eq(mxp__engine_register_fork_hooks(a_before, a_after), MXP_OK);
    cr_assert_eq(mxp__engine_register_fork_hooks(b_before, b_after), MXP_OK);
    cr_assert_eq(mxp__engine_register_fork_hooks(NULL, b_after), MXP_EINVAL);
    start_engine();
    g_n = 0;
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) _exit(g_n == 4 && memcmp(g_log, "abBA", 4) == 0 ? 0 : 3);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child saw the hooks out of order");
    cr_assert_eq(g_n, 4);
    cr_assert_eq(memcmp(g_log, "abBA", 4), 0, "parent saw %.4s", g_log);
    mxp_engine_shutdown();
}

Test(engine_fork_hooks, slots_are_bounded) {
    int ok = 0, rc = MXP_OK;
    for (int i = 0; i < MXP__ENGINE_FORK_HOOKS_MAX + 1 && rc == MXP_OK; i++)
        if ((rc = mxp__engine_register_fork_hooks(a_before, a_after)) == MXP_OK) ok++;
    cr_assert_eq(rc, MXP_ENOMEM);
    cr_assert_leq(ok, MXP__ENGINE_FORK_HOOKS_MAX);
    cr_assert(strstr(mxp_last_error(), "slots") != NULL, "%s", mxp_last_error());
}

/* ------------------------------------------------------------ storage */

static atomic_int g_stop, g_rounds;

static void *alloc_until_stopped(void *arg) {
    (void)arg;
    mxp_device cpu = {MXP_DEV_CPU, 0};
    while (!atomic_load(&g_stop)) {
        mxp_storage_block b;
        if (mxp__storage_alloc(cpu, 4096, &b) == MXP_OK) mxp__storage_free(&b);
        atomic_fetch_add(&g_rounds, 1);
    }
    return NULL;
}

/* Without storage's hooks a child forked while the allocator thread is
 * inside a pool would inherit that pool's lock held and hang on its first
 * allocation of that class (alarm turns a hang into a failed child). */
Test(engine_fork_hooks, storage_usable_in_child_forked_during_allocs) {
    use_engine("threaded", 2);
    start_engine();
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, alloc_until_stopped, NULL), 0);
    int failed_round = -1, status = 0;
    for (int round = 0; round < 40 && failed_round < 0; round++) {
        while (atomic_load(&g_rounds) < 50 * (round + 1)) sched_yield();
        pid_t pid = fork();
        cr_assert_neq(pid, -1);
        if (pid == 0) {
            alarm(20);
            mxp_device cpu = {MXP_DEV_CPU, 0};
            mxp_storage_block b;
            int ok = mxp__storage_alloc(cpu, 4096, &b) == MXP_OK && b.ptr && b.size >= 4096;
            if (ok) mxp__storage_free(&b);
            _exit(ok ? 0 : 3);
        }
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed_round = round;
    }
    atomic_store(&g_stop, 1);
    pthread_join(th, NULL);
    cr_assert_eq(failed_round, -1, "round %d: child %s %d", failed_round,
                 WIFSIGNALED(status) ? "killed by signal" : "exit status",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    mxp_engine_shutdown();
}
