/* test_stress.c — randomized dependency stress that checks DATA, not
 * bookkeeping.  NV vars each guard one 64-bit cell.  Thousands of ops with
 * random read and write lists (random sizes, duplicates, a var in both
 * lists) read every listed cell, record what they read, and write a hash of
 * it into each written cell.  The final cells and every recorded read must
 * equal a sequential replay in push order.  Runs with both engines, with
 * sync and async (completed by a foreign thread) functions mixed, and with
 * several threads pushing at once (push order = order of a lock taken around
 * each push, recorded as a sequence number). */
#include <criterion/criterion.h>

#include "engine_test_util.h"

#include <stdint.h>
#include <string.h>

#define NV 24
#define MAXL 6

typedef struct sop {
    int nc, nm;
    int c[MAXL], m[MAXL];
    int async;
    uint64_t seen[2 * MAXL]; /* values read: const list then mutate list */
    int64_t seq;             /* push order */
} sop;

static uint64_t cells[NV];
static mxp_var *vars[NV];
static completer comp;

static uint64_t mix(uint64_t h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

/* The op body, shared by the engine run and the replay. */
static void apply(sop *o, uint64_t *cell, uint64_t *seen) {
    uint64_t h = (uint64_t)o->seq;
    int k = 0;
    for (int i = 0; i < o->nc; i++) { seen[k] = cell[o->c[i]]; h = mix(h, seen[k++]); }
    for (int i = 0; i < o->nm; i++) { seen[k] = cell[o->m[i]]; h = mix(h, seen[k++]); }
    for (int i = 0; i < o->nm; i++) cell[o->m[i]] = mix(h, (uint64_t)i);
}

static int run_sync(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    sop *o = arg;
    apply(o, cells, o->seen);
    return MXP_OK;
}

static void async_work(void *arg) {
    sop *o = arg;
    apply(o, cells, o->seen);
}

static void run_async(void *arg, const mxp_run_ctx *ctx, mxp_engine_callback cb) {
    (void)ctx;
    completer_post(&comp, async_work, arg, cb, MXP_OK, NULL);
}

static void random_op(sop *o, unsigned *seed, int lo, int span) {
    memset(o, 0, sizeof *o);
    o->nc = rand_r(seed) % (MAXL + 1);
    o->nm = rand_r(seed) % (MAXL + 1);
    if (o->nc + o->nm == 0 && rand_r(seed) % 2) o->nm = 1;
    for (int i = 0; i < o->nc; i++) o->c[i] = lo + rand_r(seed) % span;
    for (int i = 0; i < o->nm; i++) o->m[i] = lo + rand_r(seed) % span;
    /* Force some duplicates and some vars in both lists. */
    if (o->nc >= 2 && rand_r(seed) % 4 == 0) o->c[1] = o->c[0];
    if (o->nm >= 2 && rand_r(seed) % 4 == 0) o->m[1] = o->m[0];
    if (o->nc >= 1 && o->nm >= 1 && rand_r(seed) % 4 == 0) o->c[0] = o->m[0];
    o->async = rand_r(seed) % 4 == 0;
}

static void push_sop(sop *o) {
    mxp_var *cv[MAXL], *mv[MAXL];
    for (int i = 0; i < o->nc; i++) cv[i] = vars[o->c[i]];
    for (int i = 0; i < o->nm; i++) mv[i] = vars[o->m[i]];
    mxp_engine_push_args a = {0};
    if (o->async) a.async_fn = run_async; else a.sync_fn = run_sync;
    a.arg = o;
    a.const_vars = cv;
    a.n_const = o->nc;
    a.mutate_vars = mv;
    a.n_mutate = o->nm;
    a.name = o->async ? "stress_async" : "stress_sync";
    cr_assert_eq(mxp_engine_push(&a), MXP_OK, "%s", mxp_last_error());
}

static int by_seq(const void *a, const void *b) {
    const sop *x = *(sop *const *)a, *y = *(sop *const *)b;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static void check_against_replay(sop *ops, int n) {
    sop **order = malloc(sizeof *order * (size_t)n);
    for (int i = 0; i < n; i++) order[i] = &ops[i];
    qsort(order, (size_t)n, sizeof *order, by_seq);
    uint64_t ref[NV];
    for (int v = 0; v < NV; v++) ref[v] = (uint64_t)v * 1000003u;
    for (int i = 0; i < n; i++) {
        sop *o = order[i];
        cr_assert_eq(o->seq, i, "sequence numbers must be dense");
        uint64_t seen[2 * MAXL];
        apply(o, ref, seen);
        for (int k = 0; k < o->nc + o->nm; k++)
            cr_assert_eq(seen[k], o->seen[k], "op #%d (nc=%d nm=%d) read %d: got %llx want %llx", i,
                         o->nc, o->nm, k, (unsigned long long)o->seen[k], (unsigned long long)seen[k]);
    }
    for (int v = 0; v < NV; v++)
        cr_assert_eq(cells[v], ref[v], "cell %d: engine %llx, sequential %llx", v,
                     (unsigned long long)cells[v], (unsigned long long)ref[v]);
    free(order);
}

static void setup_vars(void) {
    for (int v = 0; v < NV; v++) {
        cells[v] = (uint64_t)v * 1000003u;
        cr_assert_eq(mxp_engine_new_var(&vars[v]), MXP_OK);
    }
}

static void teardown_vars(void) {
    for (int v = 0; v < NV; v++) mxp_engine_delete_var(vars[v]);
}

static void single_pusher(const char *engine, int n_ops, unsigned seed) {
    use_engine(engine, 2);
    completer_start(&comp);
    setup_vars();
    sop *ops = calloc((size_t)n_ops, sizeof *ops);
    for (int i = 0; i < n_ops; i++) {
        random_op(&ops[i], &seed, 0, NV);
        ops[i].seq = i;
        push_sop(&ops[i]);
        /* Occasionally wait on a var mid-stream (a different code path). */
        if (i % 997 == 0) cr_assert_eq(mxp_engine_wait_for_var(vars[i % NV]), MXP_OK);
    }
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK, "%s", mxp_last_error());
    check_against_replay(ops, n_ops);
    teardown_vars();
    mxp_engine_shutdown();
    completer_stop(&comp);
    free(ops);
}

Test(stress, threaded_single_pusher) { single_pusher("threaded", 6000, 12345); }
Test(stress, naive_single_pusher) { single_pusher("naive", 3000, 777); }
Test(stress, threaded_one_thread_budget) {
    setenv("MXP_NUM_THREADS", "1", 1);
    single_pusher("threaded", 3000, 4242);
}

/* ---- several pushing threads */

#define PUSHERS 3
static pthread_mutex_t push_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t next_seq;

typedef struct pusher { sop *ops; int n; unsigned seed; } pusher;

static void *pusher_main(void *p) {
    pusher *pu = p;
    for (int i = 0; i < pu->n; i++) {
        random_op(&pu->ops[i], &pu->seed, 0, NV);
        /* The lock only fixes (and records) the push order; execution stays
         * concurrent. */
        pthread_mutex_lock(&push_mu);
        pu->ops[i].seq = next_seq++;
        push_sop(&pu->ops[i]);
        pthread_mutex_unlock(&push_mu);
        if (i % 64 == 0) sched_yield();
    }
    return NULL;
}

static void many_pushers(const char *engine, int per_thread) {
    use_engine(engine, 2);
    completer_start(&comp);
    setup_vars();
    next_seq = 0;
    int n = PUSHERS * per_thread;
    sop *ops = calloc((size_t)n, sizeof *ops);
    pthread_t th[PUSHERS];
    pusher pu[PUSHERS];
    for (int t = 0; t < PUSHERS; t++) {
        pu[t] = (pusher){ops + t * per_thread, per_thread, 1000u + (unsigned)t};
        pthread_create(&th[t], NULL, pusher_main, &pu[t]);
    }
    for (int t = 0; t < PUSHERS; t++) pthread_join(th[t], NULL);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK, "%s", mxp_last_error());
    check_against_replay(ops, n);
    teardown_vars();
    mxp_engine_shutdown();
    completer_stop(&comp);
    free(ops);
}

Test(stress, threaded_many_pushers) { many_pushers("threaded", 2000); }
Test(stress, naive_many_pushers) { many_pushers("naive", 800); }

/* Unlocked concurrent pushers on disjoint var partitions, plus shared vars
 * that are only read: each thread's ops must match its own sequential
 * replay (push order within a thread is program order). */
#define PART 6
#define SHARED 4
typedef struct part_pusher { sop *ops; int n; unsigned seed; int lo; } part_pusher;

static void *part_main(void *p) {
    part_pusher *pp = p;
    for (int i = 0; i < pp->n; i++) {
        sop *o = &pp->ops[i];
        random_op(o, &pp->seed, pp->lo, PART);
        for (int k = 0; k < o->nc; k++)
            if (rand_r(&pp->seed) % 3 == 0) o->c[k] = PUSHERS * PART + rand_r(&pp->seed) % SHARED;
        o->seq = i;
        push_sop(o);
    }
    return NULL;
}

Test(stress, threaded_partitioned_unlocked_pushers) {
    use_engine("threaded", 2);
    completer_start(&comp);
    setup_vars();
    enum { PER = 2500 };
    sop *ops = calloc(PUSHERS * PER, sizeof *ops);
    pthread_t th[PUSHERS];
    part_pusher pp[PUSHERS];
    for (int t = 0; t < PUSHERS; t++) {
        pp[t] = (part_pusher){ops + t * PER, PER, 99u + (unsigned)t, t * PART};
        pthread_create(&th[t], NULL, part_main, &pp[t]);
    }
    for (int t = 0; t < PUSHERS; t++) pthread_join(th[t], NULL);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    uint64_t ref[NV];
    for (int v = 0; v < NV; v++) ref[v] = (uint64_t)v * 1000003u;
    for (int t = 0; t < PUSHERS; t++) {
        for (int i = 0; i < PER; i++) {
            sop *o = &pp[t].ops[i];
            uint64_t seen[2 * MAXL];
            apply(o, ref, seen);
            for (int k = 0; k < o->nc + o->nm; k++)
                cr_assert_eq(seen[k], o->seen[k], "thread %d op %d read %d differs", t, i, k);
        }
    }
    for (int v = 0; v < NV; v++) cr_assert_eq(cells[v], ref[v], "cell %d differs", v);
    teardown_vars();
    mxp_engine_shutdown();
    completer_stop(&comp);
    free(ops);
}
