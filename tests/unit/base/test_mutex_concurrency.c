/* test_mutex_concurrency.c — mxp__mutex (base/mutex.h): held() is true
 * exactly for the thread holding the mutex (not before, not after, not for
 * another thread while this one holds it, not across a condition wait),
 * and a `_locked` contract is checkable from two threads taking turns.
 * Runs under TSan (the name), which must see no race on the owner tag. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>

#include "base/mutex.h"

static mxp__mutex g_m = MXP__MUTEX_INIT;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_stage;
static atomic_int g_seen_held = -1;

static void *other_thread(void *arg) {
    (void)arg;
    /* Main holds g_m now: not held by this thread. */
    atomic_store(&g_seen_held, mxp__mutex_held(&g_m));
    mxp__mutex_lock(&g_m);
    /* Main is in cond_wait: the mutex is ours now. */
    int mine = mxp__mutex_held(&g_m);
    g_stage = 2;
    pthread_cond_signal(&g_cv);
    mxp__mutex_unlock(&g_m);
    return (void *)(intptr_t)mine;
}

Test(mutex, held_only_by_the_owner) {
#ifdef NDEBUG
    cr_skip_test("NDEBUG: owner tags are not kept");
#endif
    cr_assert_not(mxp__mutex_held(&g_m), "held before lock");
    mxp__mutex_lock(&g_m);
    cr_assert(mxp__mutex_held(&g_m), "not held after lock");
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, other_thread, NULL), 0);
    while (atomic_load(&g_seen_held) < 0) {
        /* let the other thread look while we hold it */
        mxp__mutex_unlock(&g_m);
        mxp__mutex_lock(&g_m);
        if (atomic_load(&g_seen_held) >= 0) break;
    }
    while (g_stage != 2) mxp__mutex_cond_wait(&g_cv, &g_m);
    cr_assert(mxp__mutex_held(&g_m), "not held after cond_wait returned");
    mxp__mutex_unlock(&g_m);
    cr_assert_not(mxp__mutex_held(&g_m), "held after unlock");
    void *mine;
    pthread_join(t, &mine);
    cr_assert_eq((intptr_t)mine, 1, "the other thread did not hold the mutex it locked");
    cr_assert_eq(atomic_load(&g_seen_held), 0, "another thread saw itself as owner");
}

Test(mutex, trylock_marks_the_owner) {
#ifdef NDEBUG
    cr_skip_test("NDEBUG: owner tags are not kept");
#endif
    mxp__mutex m;
    mxp__mutex_init(&m);
    cr_assert_eq(mxp__mutex_trylock(&m), 0);
    cr_assert(mxp__mutex_held(&m));
    mxp__mutex_unlock(&m);
    cr_assert_not(mxp__mutex_held(&m));
    mxp__mutex_destroy(&m);
}
