/* engine_test_util.h — helpers shared by the engine tests: environment setup
 * before the engine exists, a foreign "completer" thread for async
 * functions, and a bounded rendezvous (a deadlock guard, not a timing check).
 * Each Criterion test runs in its own process, so setting MXP_* variables at
 * the start of a test configures that test's engine. */
#ifndef MXP_TESTS_ENGINE_TEST_UTIL_H
#define MXP_TESTS_ENGINE_TEST_UTIL_H

#include <mxplug.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline void use_engine(const char *type, int threads) {
    mxp_engine_shutdown();
    setenv("MXP_ENGINE_TYPE", type, 1);
    if (threads > 0) {
        char buf[16];
        snprintf(buf, sizeof buf, "%d", threads);
        setenv("MXP_NUM_THREADS", buf, 1);
    }
}

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Wait until *flag >= want; gives up after 20 s (returns 0) so a broken
 * engine fails the test instead of hanging it. */
static inline int await_at_least(atomic_int *flag, int want) {
    double t0 = now_s();
    while (atomic_load(flag) < want) {
        if (now_s() - t0 > 20.0) return 0;
        sched_yield();
    }
    return 1;
}

/* A foreign thread that completes async functions: items are queued with
 * completer_post and run in FIFO order, then their done callback is called. */
typedef struct completer_item {
    void (*work)(void *arg);
    void *arg;
    mxp_engine_callback cb;
    int status;
    const char *message;
    struct completer_item *next;
} completer_item;

typedef struct completer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    completer_item *head, *tail;
    int stop;
    pthread_t th;
} completer;

static inline void *completer_main(void *p) {
    completer *c = p;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->head && !c->stop) pthread_cond_wait(&c->cv, &c->mu);
        if (!c->head) break;
        completer_item *it = c->head;
        c->head = it->next;
        if (!c->head) c->tail = NULL;
        pthread_mutex_unlock(&c->mu);
        if (it->work) it->work(it->arg);
        it->cb.done(it->cb.token, it->status, it->message);
        free(it);
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static inline void completer_start(completer *c) {
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->head = c->tail = NULL;
    c->stop = 0;
    pthread_create(&c->th, NULL, completer_main, c);
}

static inline void completer_post(completer *c, void (*work)(void *), void *arg, mxp_engine_callback cb,
                                  int status, const char *message) {
    completer_item *it = calloc(1, sizeof *it);
    it->work = work;
    it->arg = arg;
    it->cb = cb;
    it->status = status;
    it->message = message;
    pthread_mutex_lock(&c->mu);
    if (c->tail) c->tail->next = it; else c->head = it;
    c->tail = it;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static inline void completer_stop(completer *c) {
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->th, NULL);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

#endif /* MXP_TESTS_ENGINE_TEST_UTIL_H */
