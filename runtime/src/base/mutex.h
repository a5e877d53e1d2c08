/* mutex.h — a pthread mutex that knows, in debug builds, which thread holds
 * it, so a function whose name ends in `_locked` (or whose comment says
 * "caller holds X") can check its contract:
 *     MXP_ASSERT(mxp__mutex_held(&pool->mu));
 * as SQLite's assert(sqlite3_mutex_held(...)).
 *
 * The owner is a per-thread tag (the address of a thread-local byte),
 * stored with relaxed atomics after locking and cleared before unlocking:
 * only the owning thread can find its own tag there, so the check is exact
 * for "held by me" and race-free under TSan.  A condition wait must go
 * through mxp__mutex_cond_wait/_timedwait, which give the tag up across
 * the wait (pthread_cond_wait releases the mutex inside).  With NDEBUG the
 * tag is neither written nor read (held() is 1 and asserts compile out);
 * the struct keeps one layout either way.
 * Not here: read-write locks (the registry's have their own held counts,
 * plugin/registry.c) and recursive mutexes. */
#ifndef MXP_BASE_MUTEX_H
#define MXP_BASE_MUTEX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

typedef struct mxp__mutex {
    pthread_mutex_t mu;
    atomic_uintptr_t owner; /* the holder's thread tag; 0 when free (debug builds) */
} mxp__mutex;

#define MXP__MUTEX_INIT {PTHREAD_MUTEX_INITIALIZER, 0}

/* This thread's tag (nonzero, distinct per live thread). */
uintptr_t mxp__thread_tag(void);

#ifdef NDEBUG
#define MXP__MUTEX_MARK(m, tag) ((void)0)
#else
#define MXP__MUTEX_MARK(m, tag) atomic_store_explicit(&(m)->owner, (tag), memory_order_relaxed)
#endif

static inline void mxp__mutex_init(mxp__mutex *m) {
    pthread_mutex_init(&m->mu, NULL);
    atomic_init(&m->owner, 0);
}
static inline void mxp__mutex_destroy(mxp__mutex *m) { pthread_mutex_destroy(&m->mu); }

static inline void mxp__mutex_lock(mxp__mutex *m) {
    pthread_mutex_lock(&m->mu);
    MXP__MUTEX_MARK(m, mxp__thread_tag());
}

/* 0 when taken (as pthread_mutex_trylock), EBUSY otherwise. */
static inline int mxp__mutex_trylock(mxp__mutex *m) {
    int rc = pthread_mutex_trylock(&m->mu);
    if (rc == 0) MXP__MUTEX_MARK(m, mxp__thread_tag());
    return rc;
}

static inline void mxp__mutex_unlock(mxp__mutex *m) {
    MXP__MUTEX_MARK(m, 0);
    pthread_mutex_unlock(&m->mu);
}

static inline int mxp__mutex_cond_wait(pthread_cond_t *cv, mxp__mutex *m) {
    MXP__MUTEX_MARK(m, 0);
    int rc = pthread_cond_wait(cv, &m->mu);
    MXP__MUTEX_MARK(m, mxp__thread_tag());
    return rc;
}

static inline int mxp__mutex_cond_timedwait(pthread_cond_t *cv, mxp__mutex *m, const struct timespec *abs) {
    MXP__MUTEX_MARK(m, 0);
    int rc = pthread_cond_timedwait(cv, &m->mu, abs);
    MXP__MUTEX_MARK(m, mxp__thread_tag());
    return rc;
}

/* 1 when the calling thread holds m (always 1 with NDEBUG: for asserts). */
static inline int mxp__mutex_held(mxp__mutex *m) {
#ifdef NDEBUG
    (void)m;
    return 1;
#else
    return atomic_load_explicit(&m->owner, memory_order_relaxed) == mxp__thread_tag();
#endif
}

#endif /* MXP_BASE_MUTEX_H */
