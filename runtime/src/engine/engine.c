/* engine.c — the mxp_engine_* entry points: argument checks, the process's
 * one engine (created lazily, replaced after shutdown or in a fork child),
 * operator construction, waiting, errors for wait_for_all, and device hooks.
 *
 * Lifecycle: no thread starts before the first push; mxp_engine_shutdown
 * waits for all work, joins every thread and frees everything but the vars
 * (user-owned, and valid for the next engine).  fork(): the prepare handler
 * waits until the engine is idle (unless fork is called from inside an
 * engine function), so the child inherits vars with empty queues; the child
 * forgets the parent's engine (its threads do not exist there) and creates a
 * fresh one on first use.  Orphaned engines stay reachable, never touched.
 * Not here: the var state machine (var.c), running blocks (threaded.c). */
#include "engine_impl.h"
#include "base/env.h"
#include "profiler/profiler.h"

#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(eng_engine *) g_engine;
static uint64_t g_gen;
static eng_engine *g_orphans;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;
/* Fork hooks registered by other modules (mxp__engine_register_fork_hooks):
 * slots are written under g_hooks_mu, then published by the count. */
static pthread_mutex_t g_hooks_mu = PTHREAD_MUTEX_INITIALIZER;
static struct { void (*before)(void), (*after)(void); } g_fork_hooks[MXP__ENGINE_FORK_HOOKS_MAX];
static atomic_int g_n_fork_hooks;
pthread_mutex_t mxp__eng_all_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t mxp__eng_all_cv = PTHREAD_COND_INITIALIZER;
static atomic_int all_waiters;
/* Completions broadcast once `completed` reaches this (a waiter's target);
 * INT64_MAX when nobody waits. */
static _Atomic int64_t wait_target = INT64_MAX;
/* The fork gate: atfork_prepare closes it so no push starts between its
 * wait for idleness and the fork (another thread's push would leave the
 * child a var queued behind a block that no thread there will ever run).
 * g_pushing counts submits between gate_enter and gate_leave (and direct
 * runs, which hold the gate for their whole run: threaded.c run_direct);
 * tl_gate_holds counts the calling thread's own, which a fork from inside
 * a direct run's function must not wait for. */
static atomic_int g_pushing;
static _Thread_local int tl_gate_holds __attribute__((tls_model("initial-exec")));
static atomic_bool g_gate_closed;
static pthread_mutex_t g_gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_gate_cv = PTHREAD_COND_INITIALIZER;

/* ------------------------------------------------------------ budget */

static pthread_once_t budget_once = PTHREAD_ONCE_INIT;
static int budget_value = 1;

static void read_budget(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    int dflt = n > 0 ? (n > 1024 ? 1024 : (int)n) : 1;
    budget_value = dflt;
    budget_value = (int)mxp__env_int("MXP_NUM_THREADS", 1, 1024, dflt);
}

int mxp_num_threads(void) {
    pthread_once(&budget_once, read_budget);
    return budget_value;
}

/* ------------------------------------------------------------ device hooks */

enum { MAX_DEV_TYPES = 64 };
static pthread_mutex_t hooks_mu = PTHREAD_MUTEX_INITIALIZER;
static mxp__engine_device_hooks dev_hooks[MAX_DEV_TYPES];
static _Atomic(const mxp__engine_device_hooks *) dev_hooks_set[MAX_DEV_TYPES];

int mxp__engine_register_device(int32_t dev_type, const mxp__engine_device_hooks *hooks) {
    if (!hooks || dev_type <= 0 || dev_type >= MAX_DEV_TYPES || dev_type == MXP_DEV_CPU ||
        dev_type == MXP_DEV_CPU_PINNED || dev_type == MXP_DEV_CPU_SHARED)
        return mxp__error(MXP_EINVAL, "engine: cannot register workers for device type %d", dev_type);
    pthread_mutex_lock(&hooks_mu);
    int rc = MXP_OK;
    if (atomic_load(&dev_hooks_set[dev_type])) {
        rc = mxp__error(MXP_EEXIST, "engine: device type %d already has workers", dev_type);
    } else {
        dev_hooks[dev_type] = *hooks;
        atomic_store(&dev_hooks_set[dev_type], &dev_hooks[dev_type]);
    }
    pthread_mutex_unlock(&hooks_mu);
    return rc;
}

const mxp__engine_device_hooks *mxp__engine_device_hooks_for(int32_t dev_type) {
    if (dev_type <= 0 || dev_type >= MAX_DEV_TYPES) return NULL;
    return atomic_load_explicit(&dev_hooks_set[dev_type], memory_order_acquire);
}

static bool device_ok(mxp_device d) {
    if (d.type == 0 && d.id == 0) return true;
    if (d.type == MXP_DEV_CPU || d.type == MXP_DEV_CPU_PINNED || d.type == MXP_DEV_CPU_SHARED)
        return d.id >= 0;
    return d.id >= 0 && mxp__engine_device_hooks_for(d.type) != NULL;
}

/* ------------------------------------------------------------ lifecycle */

static void atfork_prepare(void);
static void close_fork_gate(void);
static void open_fork_gate(void);
static void atfork_parent(void);
static void atfork_child(void);
static void register_atfork(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }

static int parse_type(void) {
    const char *s = getenv("MXP_ENGINE_TYPE");
    if (!s || !*s) return ENGINE_THREADED;
    if (!strcasecmp(s, "naive") || !strcmp(s, "NaiveEngine")) return ENGINE_NAIVE;
    if (!strcasecmp(s, "threaded") || !strcmp(s, "ThreadedEngine") ||
        !strcmp(s, "ThreadedEnginePerDevice"))
        return ENGINE_THREADED;
    MXP_LOGW("engine", "MXP_ENGINE_TYPE='%s' is not 'naive' or 'threaded'; using 'threaded'", s);
    return ENGINE_THREADED;
}

static eng_engine *engine_create(void) {
    eng_engine *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->type = parse_type();
    e->gen = ++g_gen;
    e->budget = mxp_num_threads();
    mxp__eng_pool_init(&e->pools[POOL_OPR], POOL_OPR, sizeof(eng_opr), e->gen);
    mxp__eng_pool_init(&e->pools[POOL_BLK], POOL_BLK, sizeof(eng_blk), e->gen);
    mxp__eng_pool_init(&e->pools[POOL_VBLK], POOL_VBLK, sizeof(eng_vblk), e->gen);
    pthread_mutex_init(&e->err_mu, NULL);
    pthread_mutex_init(&e->dev_mu, NULL);
    pthread_mutexattr_t ra;
    pthread_mutexattr_init(&ra);
    pthread_mutexattr_settype(&ra, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&e->naive_mu, &ra);
    pthread_mutexattr_destroy(&ra);
    pthread_once(&g_atfork_once, register_atfork);
    MXP_LOGD("engine", "created %s engine, thread budget %d",
             e->type == ENGINE_NAIVE ? "naive" : "threaded", e->budget);
    return e;
}

eng_engine *mxp__eng_peek(void) { return atomic_load_explicit(&g_engine, memory_order_acquire); }

eng_engine *mxp__eng_get(void) {
    eng_engine *e = atomic_load_explicit(&g_engine, memory_order_acquire);
    if (e) return e;
    pthread_mutex_lock(&g_mu);
    e = atomic_load_explicit(&g_engine, memory_order_relaxed);
    if (!e) {
        e = engine_create();
        atomic_store_explicit(&g_engine, e, memory_order_release);
    }
    pthread_mutex_unlock(&g_mu);
    return e;
}

const char *mxp_engine_type(void) {
    eng_engine *e = mxp__eng_get();
    if (!e) return "threaded";
    return e->type == ENGINE_NAIVE ? "naive" : "threaded";
}

void mxp__eng_pending_done(eng_engine *e) {
    int64_t c = atomic_fetch_add(&e->completed, 1) + 1;
    /* After this increment `e` may be freed by a shutdown on another
     * thread: touch only static state from here on. */
    if (c >= atomic_load(&wait_target)) {
        pthread_mutex_lock(&mxp__eng_all_mu);
        pthread_cond_broadcast(&mxp__eng_all_cv);
        pthread_mutex_unlock(&mxp__eng_all_mu);
    }
}

/* Wait until everything pushed before the call has completed. */
static void wait_target_reached(eng_engine *e, int64_t target) {
    for (int i = 0; i < 2000 && atomic_load(&e->completed) < target; i++) mxp__eng_cpu_relax();
    if (atomic_load(&e->completed) >= target) return;
    pthread_mutex_lock(&mxp__eng_all_mu);
    atomic_fetch_add(&all_waiters, 1);
    for (;;) {
        int64_t t = atomic_load(&wait_target);
        while (target < t && !atomic_compare_exchange_weak(&wait_target, &t, target)) {}
        if (atomic_load(&e->completed) >= target) break; /* seq_cst: pairs with the completer */
        pthread_cond_wait(&mxp__eng_all_cv, &mxp__eng_all_mu);
    }
    /* Others may wait for a larger target: make completions broadcast until
     * they re-register theirs. */
    atomic_store(&wait_target, atomic_fetch_sub(&all_waiters, 1) == 1 ? INT64_MAX : 0);
    pthread_mutex_unlock(&mxp__eng_all_mu);
}

/* Wait until the engine is idle: also covers work pushed from inside
 * functions while we waited. */
static void wait_idle(eng_engine *e) {
    int64_t target;
    do {
        target = atomic_load(&e->pushed);
        wait_target_reached(e, target);
    } while (atomic_load(&e->pushed) != target);
}

static void engine_free(eng_engine *e) {
    for (int i = 0; i < e->n_errs; i++) mxp__eng_err_unref(e->errs[i]);
    free(e->errs);
    for (int p = 0; p < POOL_COUNT; p++) mxp__eng_pool_fini(&e->pools[p]);
    pthread_mutex_destroy(&e->err_mu);
    pthread_mutex_destroy(&e->dev_mu);
    pthread_mutex_destroy(&e->naive_mu);
    free(e);
}

/* Wait until every pushed function has completed, without raising or
 * clearing the errors they recorded (a later wait still reports them).
 * Used before code or records that queued work may run are freed
 * (registry shutdown) and on the error paths of calls that push. */
int mxp__engine_drain(void) {
    if (mxp__eng_in_function())
        return mxp__error(MXP_EBUSY, "engine: cannot wait for queued work from inside an engine function");
    pthread_mutex_lock(&g_mu);
    eng_engine *e = atomic_load(&g_engine);
    if (e) wait_idle(e);
    pthread_mutex_unlock(&g_mu);
    return MXP_OK;
}

int64_t mxp__engine_in_flight(void) {
    eng_engine *e = atomic_load_explicit(&g_engine, memory_order_acquire);
    return e ? atomic_load(&e->pushed) - atomic_load(&e->completed) : 0;
}

void mxp_engine_shutdown(void) {
    if (mxp__eng_in_function()) {
        MXP_LOGE("engine", "mxp_engine_shutdown called from inside an engine function; ignored");
        return;
    }
    pthread_mutex_lock(&g_mu);
    eng_engine *e = atomic_load(&g_engine);
    if (e) {
        wait_idle(e);
        mxp__eng_threaded_stop(e);
        atomic_store(&g_engine, NULL);
        engine_free(e);
    }
    mxp__parallel_shutdown();
    pthread_mutex_unlock(&g_mu);
}

int mxp__engine_register_fork_hooks(void (*before)(void), void (*after)(void)) {
    if (!before || !after) return mxp__error(MXP_EINVAL, "engine fork hooks: before and after are required");
    pthread_mutex_lock(&g_hooks_mu);
    int n = atomic_load_explicit(&g_n_fork_hooks, memory_order_relaxed);
    if (n == MXP__ENGINE_FORK_HOOKS_MAX) {
        pthread_mutex_unlock(&g_hooks_mu);
        return mxp__error(MXP_ENOMEM, "engine fork hooks: all %d slots taken", MXP__ENGINE_FORK_HOOKS_MAX);
    }
    g_fork_hooks[n].before = before;
    g_fork_hooks[n].after = after;
    atomic_store_explicit(&g_n_fork_hooks, n + 1, memory_order_release);
    pthread_mutex_unlock(&g_hooks_mu);
    return MXP_OK;
}

/* The hooks prepare ran (the count it read): `after` undoes exactly those,
 * even if another thread registered one in between. */
static int g_fork_hooks_run;

static void fork_hooks_before(void) {
    g_fork_hooks_run = atomic_load_explicit(&g_n_fork_hooks, memory_order_acquire);
    for (int i = 0; i < g_fork_hooks_run; i++) g_fork_hooks[i].before();
}

static void fork_hooks_after(void) {
    for (int i = g_fork_hooks_run; i-- > 0;) g_fork_hooks[i].after();
}

static void atfork_prepare(void) {
    pthread_mutex_lock(&g_mu);
    close_fork_gate();
    eng_engine *e = atomic_load(&g_engine);
    if (e) {
        if (!mxp__eng_in_function()) wait_idle(e);
        pthread_mutex_lock(&e->dev_mu);
        pthread_mutex_lock(&e->err_mu);
    }
    mxp__parallel_before_fork();
    fork_hooks_before();
    pthread_mutex_lock(&mxp__eng_all_mu);
}

static void atfork_parent(void) {
    pthread_mutex_unlock(&mxp__eng_all_mu);
    fork_hooks_after();
    mxp__parallel_after_fork_parent();
    eng_engine *e = atomic_load(&g_engine);
    if (e) {
        pthread_mutex_unlock(&e->err_mu);
        pthread_mutex_unlock(&e->dev_mu);
    }
    open_fork_gate();
    pthread_mutex_unlock(&g_mu);
}

static void atfork_child(void) {
    pthread_mutex_unlock(&mxp__eng_all_mu);
    pthread_cond_init(&mxp__eng_all_cv, NULL);
    atomic_store(&all_waiters, 0);
    atomic_store(&wait_target, INT64_MAX);
    fork_hooks_after();
    eng_engine *e = atomic_load(&g_engine);
    if (e) {
        pthread_mutex_unlock(&e->err_mu);
        pthread_mutex_unlock(&e->dev_mu);
        mxp__eng_threaded_orphan(e);
        e->orphan_next = g_orphans;
        g_orphans = e;
        atomic_store(&g_engine, NULL);
    }
    mxp__parallel_after_fork_child();
    /* Threads waiting at the gate do not exist here. */
    pthread_mutex_init(&g_gate_mu, NULL);
    pthread_cond_init(&g_gate_cv, NULL);
    atomic_store(&g_pushing, tl_gate_holds); /* the forking thread's own holds live on here */
    atomic_store(&g_gate_closed, false);
    pthread_mutex_unlock(&g_mu);
}

/* ------------------------------------------------------------ errors */

void mxp__eng_err_global_add(eng_engine *e, err_rec *r) {
    pthread_mutex_lock(&e->err_mu);
    if (e->n_errs == e->cap_errs) {
        int cap = e->cap_errs ? e->cap_errs * 2 : 8;
        err_rec **n = realloc(e->errs, sizeof *n * (size_t)cap);
        if (!n) {
            pthread_mutex_unlock(&e->err_mu);
            MXP_LOGE("engine", "%s (not kept for wait_for_all: out of memory)", r->msg);
            return;
        }
        e->errs = n;
        e->cap_errs = cap;
    }
    mxp__eng_err_ref(r);
    e->errs[e->n_errs++] = r;
    pthread_mutex_unlock(&e->err_mu);
}

/* Report a record once: the first caller to mark it raised gets it. */
static int raise_once(err_rec *r) {
    int rc = MXP_OK;
    if (r && atomic_exchange(&r->raised, 1) == 0) rc = mxp__error(r->status, "%s", r->msg);
    return rc;
}

/* ------------------------------------------------------------ operators */

static int check_vars(const char *who, const char *name, mxp_var *const *vars, int n,
                      const char *list) {
    if (n < 0) return mxp__error(MXP_EINVAL, "%s '%s': n_%s = %d < 0", who, name, list, n);
    if (n > 0 && !vars) return mxp__error(MXP_EINVAL, "%s '%s': %s_vars is NULL", who, name, list);
    for (int i = 0; i < n; i++)
        if (!vars[i]) return mxp__error(MXP_EINVAL, "%s '%s': %s_vars[%d] is NULL", who, name, list, i);
    return MXP_OK;
}

static int check_args(const mxp_engine_push_args *a, const char *who) {
    if (!a) return mxp__error(MXP_EINVAL, "%s: args is NULL", who);
    const char *name = a->name ? a->name : "unnamed";
    if (!a->sync_fn == !a->async_fn)
        return mxp__error(MXP_EINVAL, "%s '%s': set exactly one of sync_fn and async_fn", who, name);
    if (a->prop < MXP_FN_NORMAL || a->prop > MXP_FN_NO_SKIP || a->prop == MXP_FN_DELETE_VAR)
        return mxp__error(MXP_EINVAL, "%s '%s': bad property %d", who, name, a->prop);
    if (!device_ok(a->device))
        return mxp__error(MXP_EINVAL, "%s '%s': device %d:%d has no engine workers (is its pack loaded?)",
                          who, name, a->device.type, a->device.id);
    int rc = check_vars(who, name, a->const_vars, a->n_const, "const");
    if (rc == MXP_OK) rc = check_vars(who, name, a->mutate_vars, a->n_mutate, "mutate");
    return rc;
}

static int lane_kind_of(int prop) {
    switch (prop) {
    case MXP_FN_COPY_FROM_DEV:
    case MXP_FN_COPY_TO_DEV: return LANE_COPY;
    case MXP_FN_PRIORITIZED:
    case MXP_FN_DEV_PRIORITIZED: return LANE_PRIO;
    default: return LANE_NORMAL;
    }
}

static int ptr_cmp(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)*(mxp_var *const *)a, y = (uintptr_t)*(mxp_var *const *)b;
    return x < y ? -1 : x > y;
}

static bool contains(mxp_var **v, int n, mxp_var *x) {
    for (int i = 0; i < n; i++)
        if (v[i] == x) return true;
    return false;
}

/* vars[0..n_mutate) = unique writes, then unique reads that are not written.
 * Small lists (the norm) use a quadratic scan; large ones sort. */
static int dedupe(mxp_var **out, mxp_var *const *m, int nm, mxp_var *const *c, int nc,
                  int *out_nm, int *out_nc) {
    int k = 0;
    if (nm + nc <= 32) {
        for (int i = 0; i < nm; i++) if (!contains(out, k, m[i])) out[k++] = m[i];
        *out_nm = k;
        for (int i = 0; i < nc; i++) if (!contains(out, k, c[i])) out[k++] = c[i];
        *out_nc = k - *out_nm;
        return MXP_OK;
    }
    memcpy(out, m, sizeof *out * (size_t)nm);
    qsort(out, (size_t)nm, sizeof *out, ptr_cmp);
    for (int i = 0; i < nm; i++) if (k == 0 || out[k - 1] != out[i]) out[k++] = out[i];
    int wm = k;
    mxp_var **tmp = malloc(sizeof *tmp * (size_t)(nc ? nc : 1));
    if (!tmp) return mxp__error_oom("engine var list");
    memcpy(tmp, c, sizeof *tmp * (size_t)nc);
    qsort(tmp, (size_t)nc, sizeof *tmp, ptr_cmp);
    for (int i = 0; i < nc; i++) {
        if (i > 0 && tmp[i] == tmp[i - 1]) continue;
        if (bsearch(&tmp[i], out, (size_t)wm, sizeof *out, ptr_cmp)) continue;
        out[k++] = tmp[i];
    }
    free(tmp);
    *out_nm = wm;
    *out_nc = k - wm;
    return MXP_OK;
}

/* Fill an operator from push args.  o is zeroed by the caller except for
 * pooled temporaries, whose every field is set here. */
static int opr_fill(eng_opr *o, const mxp_engine_push_args *a, bool temporary) {
    o->sync_fn = a->sync_fn;
    o->async_fn = a->async_fn;
    o->arg = a->arg;
    o->free_arg = a->free_arg;
    o->device = a->device;
    if (o->device.type == 0) o->device.type = MXP_DEV_CPU;
    o->prop = a->prop;
    o->kind = ENG_KIND_USER;
    o->temporary = temporary;
    o->handoff = false;
    atomic_init(&o->refs, 1);
    atomic_init(&o->run_est, ENG_RUN_EST_UNKNOWN);
    o->lane_kind = lane_kind_of(a->prop);
    int total = a->n_const + a->n_mutate;
    o->vars = total <= OPR_INLINE_VARS ? o->vars_buf : malloc(sizeof *o->vars * (size_t)total);
    if (!o->vars) return mxp__error_oom("engine var list");
    int rc = dedupe(o->vars, a->mutate_vars, a->n_mutate, a->const_vars, a->n_const, &o->n_mutate,
                    &o->n_const);
    if (rc != MXP_OK) {
        if (o->vars != o->vars_buf) free(o->vars);
        return rc;
    }
    const char *name = a->name ? a->name : "unnamed";
    size_t len = strlen(name);
    if (len < OPR_INLINE_NAME) {
        memcpy(o->name_buf, name, len + 1);
        o->name = o->name_buf;
    } else {
        o->name = strdup(name);
        if (!o->name) {
            if (o->vars != o->vars_buf) free(o->vars);
            return mxp__error_oom("engine op name");
        }
    }
    return MXP_OK;
}

static void opr_free_heap(eng_opr *o) {
    if (o->vars != o->vars_buf) free(o->vars);
    if (o->name != o->name_buf) free(o->name);
}

void mxp__eng_opr_release(eng_engine *e, eng_opr *o) {
    if (o->temporary) {
        opr_free_heap(o);
        mxp__eng_pool_put(&e->pools[POOL_OPR], o);
    } else if (atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1) {
        if (o->free_arg) o->free_arg(o->arg);
        opr_free_heap(o);
        free(o);
    }
}

/* Pushes from inside engine functions pass a closed gate: the prepare
 * handler's wait for idleness waits for them. */
void mxp__eng_gate_enter(void) {
    for (;;) {
        atomic_fetch_add(&g_pushing, 1); /* seq_cst: pairs with close_fork_gate */
        if (!atomic_load(&g_gate_closed) || mxp__eng_in_function()) {
            tl_gate_holds++;
            return;
        }
        atomic_fetch_sub(&g_pushing, 1);
        pthread_mutex_lock(&g_gate_mu);
        while (atomic_load(&g_gate_closed)) pthread_cond_wait(&g_gate_cv, &g_gate_mu);
        pthread_mutex_unlock(&g_gate_mu);
    }
}

void mxp__eng_gate_leave(void) {
    tl_gate_holds--;
    atomic_fetch_sub(&g_pushing, 1);
}

static void close_fork_gate(void) {
    atomic_store(&g_gate_closed, true);
    while (atomic_load(&g_pushing) > tl_gate_holds) sched_yield();
}

static void open_fork_gate(void) {
    pthread_mutex_lock(&g_gate_mu);
    atomic_store(&g_gate_closed, false);
    pthread_cond_broadcast(&g_gate_cv);
    pthread_mutex_unlock(&g_gate_mu);
}

/* Make one push of o with block b: count it, register its var uses, and
 * release the push guard (which dispatches it if every var was free). */
static void submit(eng_engine *e, eng_opr *o, eng_blk *b, int priority, eng_lane *l, void *arg,
                   mxp_engine_free_fn release) {
    mxp__eng_fire_write_hooks(o->vars, o->n_mutate);
    b->opr = o;
    b->arg = arg;
    b->release = release;
    b->priority = priority;
    b->err = NULL;
    b->next = NULL;
    b->lane = l;
    b->eng = e;
    b->naive_done = NULL;
    b->prof_ready = 0;
    atomic_store_explicit(&b->wait, o->n_const + o->n_mutate + 1, memory_order_relaxed);
    mxp__eng_gate_enter();
    atomic_fetch_add_explicit(&e->pushed, 1, memory_order_relaxed);
    bool naive = e->type == ENGINE_NAIVE;
    atomic_int done = 0;
    /* A nested naive push cannot wait for its async completion: the outer
     * function would never finish. */
    bool wait_async = naive && o->async_fn && o->kind == ENG_KIND_USER && !mxp__eng_in_function();
    if (naive) pthread_mutex_lock(&e->naive_mu);
    if (wait_async) b->naive_done = &done;
    for (int i = 0; i < o->n_mutate; i++) mxp__eng_var_append_write(o->vars[i], b, e);
    for (int i = 0; i < o->n_const; i++) mxp__eng_var_append_read(o->vars[o->n_mutate + i], b, e);
    /* Counted in `pushed` and queued on its vars: a wait for idleness now
     * covers it.  Left before running it, so a naive push's function may fork. */
    mxp__eng_gate_leave();
    mxp__eng_blk_decr_push(b, e);
    if (naive) {
        if (wait_async) {
            pthread_mutex_lock(&mxp__eng_all_mu);
            while (!atomic_load(&done)) pthread_cond_wait(&mxp__eng_all_cv, &mxp__eng_all_mu);
            pthread_mutex_unlock(&mxp__eng_all_mu);
        }
        pthread_mutex_unlock(&e->naive_mu);
    }
}

static int lane_for(eng_engine *e, mxp_device dev, int kind, eng_lane **out) {
    *out = NULL;
    if (e->type == ENGINE_NAIVE) return MXP_OK;
    if (dev.type == 0) dev.type = MXP_DEV_CPU;
    *out = mxp__eng_lane_get(e, dev, kind);
    return *out ? MXP_OK : MXP_EINTERNAL;
}

/* The 1.0 layout of the push args (struct_size 0 reads as it). */
#define PUSH_ARGS_V1 MXP__SIZE_THROUGH(mxp_engine_push_args, name)

static int push_plain_as(const mxp_engine_push_args *args, bool handoff) {
    int rc = check_args(args, "mxp_engine_push");
    if (rc != MXP_OK) return rc;
    eng_engine *e = mxp__eng_get();
    if (!e) return mxp__error_oom("engine");
    eng_lane *l;
    rc = lane_for(e, args->device, lane_kind_of(args->prop), &l);
    if (rc != MXP_OK) return rc;
    eng_opr *o = mxp__eng_pool_get(&e->pools[POOL_OPR]);
    if (!o) return mxp__error_oom("engine op");
    rc = opr_fill(o, args, true);
    if (rc != MXP_OK) {
        mxp__eng_pool_put(&e->pools[POOL_OPR], o);
        return rc;
    }
    o->handoff = handoff;
    submit(e, o, &o->blk, args->priority, l, o->arg, NULL);
    return MXP_OK;
}

static int push_plain(const mxp_engine_push_args *args) { return push_plain_as(args, false); }

int mxp__engine_push_handoff(const mxp_engine_push_args *args) {
    if (!args || !args->async_fn || args->sync_fn)
        return mxp__error(MXP_EINVAL, "mxp__engine_push_handoff: an asynchronous function is required");
    return push_plain_as(args, true);
}

int mxp_engine_push(const mxp_engine_push_args *caller) {
    mxp_engine_push_args copy;
    const mxp_engine_push_args *args = caller;
    if (caller) mxp__app_struct_in(&copy, sizeof copy, caller, PUSH_ARGS_V1), args = &copy;
    return push_plain(args);
}

/* Runtime callers pass args at this library's size: no copy.  The direct
 * run (threaded.c, mxp__eng_run_here) needs no operator, block, lane or
 * worker; anything it does not take is an ordinary push. */
static bool here_ok(const mxp_engine_push_args *a) {
    return a && a->sync_fn && !a->async_fn && (a->prop == MXP_FN_NORMAL || a->prop == MXP_FN_NO_SKIP) &&
           ((a->device.type == MXP_DEV_CPU && a->device.id >= 0) || (a->device.type == 0 && a->device.id == 0)) &&
           a->n_mutate >= 0 && a->n_const >= 0 && a->n_mutate + a->n_const <= ENG_HERE_MAX_VARS &&
           !mxp__eng_in_function() && !mxp__prof_on(MXP__PROF_API);
}

int mxp__engine_push_here_distinct(const mxp_engine_push_args *a) {
    if (here_ok(a)) {
        eng_engine *e = mxp__eng_get();
        mxp_var *vars[ENG_HERE_MAX_VARS];
        int nm = a->n_mutate, nc = a->n_const;
        for (int i = 0; i < nm; i++) vars[i] = a->mutate_vars[i];
        for (int i = 0; i < nc; i++) vars[nm + i] = a->const_vars[i];
        if (e && e->type == ENGINE_THREADED && mxp__eng_run_here(e, a, vars, nm, nc)) return MXP_OK;
    }
    return push_plain(a);
}

int mxp__engine_push_here(const mxp_engine_push_args *a) {
    if (here_ok(a)) {
        eng_engine *e = mxp__eng_get();
        mxp_var *vars[ENG_HERE_MAX_VARS];
        int nm = 0, nc = 0;
        if (e && e->type == ENGINE_THREADED && check_vars("mxp_engine_push", a->name ? a->name : "unnamed",
                                                          a->mutate_vars, a->n_mutate, "mutate") == MXP_OK &&
            check_vars("mxp_engine_push", a->name ? a->name : "unnamed", a->const_vars, a->n_const, "const") ==
                MXP_OK &&
            dedupe(vars, a->mutate_vars, a->n_mutate, a->const_vars, a->n_const, &nm, &nc) == MXP_OK &&
            mxp__eng_run_here(e, a, vars, nm, nc))
            return MXP_OK;
    }
    return push_plain(a);
}

int mxp_engine_new_op(const mxp_engine_push_args *caller, mxp_engine_op **out) {
    mxp_engine_push_args copy;
    const mxp_engine_push_args *args = caller;
    if (caller) mxp__app_struct_in(&copy, sizeof copy, caller, PUSH_ARGS_V1), args = &copy;
    if (out) *out = NULL;
    if (!out) return mxp__error(MXP_EINVAL, "mxp_engine_new_op: out is NULL");
    int rc = check_args(args, "mxp_engine_new_op");
    if (rc != MXP_OK) return rc;
    eng_opr *o = aligned_alloc(64, (sizeof *o + 63) & ~(size_t)63);
    if (!o) return mxp__error_oom("engine op");
    memset(o, 0, sizeof *o);
    rc = opr_fill(o, args, false);
    if (rc != MXP_OK) {
        free(o);
        return rc;
    }
    *out = (mxp_engine_op *)o;
    return MXP_OK;
}

static int push_op(mxp_engine_op *op, int priority, bool own_arg, void *arg, mxp_engine_free_fn release) {
    eng_opr *o = (eng_opr *)op;
    eng_engine *e = mxp__eng_get();
    if (!e) return mxp__error_oom("engine");
    void *run_arg = own_arg ? arg : o->arg;
    if (mxp__eng_push_op_here(e, o, run_arg, own_arg ? release : NULL)) return MXP_OK;
    eng_lane *l;
    int rc = lane_for(e, o->device, o->lane_kind, &l);
    if (rc != MXP_OK) return rc;
    eng_blk *b = mxp__eng_pool_get(&e->pools[POOL_BLK]);
    if (!b) return mxp__error_oom("engine block");
    atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
    submit(e, o, b, priority, l, own_arg ? arg : o->arg, own_arg ? release : NULL);
    return MXP_OK;
}

int mxp_engine_push_op(mxp_engine_op *op, int priority) {
    if (!op) return mxp__error(MXP_EINVAL, "mxp_engine_push_op: op is NULL");
    return push_op(op, priority, false, NULL, NULL);
}

int mxp_engine_push_op_arg(mxp_engine_op *op, int priority, void *arg, mxp_engine_free_fn release) {
    if (!op) return mxp__error(MXP_EINVAL, "mxp_engine_push_op_arg: op is NULL");
    return push_op(op, priority, true, arg, release);
}

void mxp_engine_delete_op(mxp_engine_op *op) {
    if (!op) return;
    /* Drops the owner's reference; in-flight pushes hold theirs, and the
     * last one out frees it (pre-created ops are malloc'd, not pooled, so
     * no engine is needed for that). */
    mxp__eng_opr_release(NULL, (eng_opr *)op);
}

/* ------------------------------------------------------------ vars */

int mxp_engine_new_var(mxp_var **out) {
    if (!out) return mxp__error(MXP_EINVAL, "mxp_engine_new_var: out is NULL");
    *out = NULL;
    /* malloc + assignment: glibc's calloc skips its per-thread cache, and a
     * var is made for every array (one per imperative op).  (Not memset:
     * the compiler turns malloc + memset into calloc.) */
    mxp_var *v = malloc(sizeof *v);
    if (!v) return mxp__error_oom("engine var");
    *v = (mxp_var){0};
    v->uid = mxp__eng_next_uid();
    *out = v;
    return MXP_OK;
}

uint64_t mxp_engine_var_version(const mxp_var *var) {
    if (!var) return 0;
    return atomic_load_explicit(&((mxp_var *)var)->version, memory_order_acquire);
}

static eng_opr *internal_opr(eng_engine *e, int kind, mxp_var *v, const char *name, bool write) {
    eng_opr *o = mxp__eng_pool_get(&e->pools[POOL_OPR]);
    if (!o) return NULL;
    memset(o, 0, offsetof(eng_opr, vars_buf));
    o->kind = kind;
    o->temporary = true;
    o->device.type = MXP_DEV_CPU;
    o->vars = o->vars_buf;
    o->vars[0] = v;
    if (write) o->n_mutate = 1; else o->n_const = 1;
    o->name = o->name_buf;
    /* Not snprintf: this runs for every array freed (~1000 instructions). */
    size_t len = strlen(name);
    if (len >= sizeof o->name_buf) len = sizeof o->name_buf - 1;
    memcpy(o->name_buf, name, len);
    o->name_buf[len] = '\0';
    return o;
}

void mxp_engine_delete_var(mxp_var *var) {
    if (!var) return;
    eng_engine *e = mxp__eng_get();
    eng_opr *o = e ? internal_opr(e, ENG_KIND_DELETE_VAR, var, "DeleteVariable", true) : NULL;
    if (!o) {
        MXP_LOGE("engine", "mxp_engine_delete_var: out of memory; var %p leaked", (void *)var);
        return;
    }
    submit(e, o, &o->blk, 0, NULL, o->arg, NULL);
}

typedef struct var_waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} var_waiter;

static int wake_waiter(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    var_waiter *w = arg;
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return MXP_OK;
}

int mxp_engine_wait_for_var(mxp_var *var) {
    if (!var) return mxp__error(MXP_EINVAL, "mxp_engine_wait_for_var: var is NULL");
    eng_engine *e = mxp__eng_get();
    if (!e) return mxp__error_oom("engine");
    if (!mxp__eng_var_write_idle(var)) {
        if (mxp__eng_in_function())
            return mxp__error(MXP_EMISUSE, "mxp_engine_wait_for_var called inside an engine function "
                              "on a var with pending writes: it would deadlock");
        var_waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
        eng_opr *o = internal_opr(e, ENG_KIND_WAIT, var, "WaitForVar", false);
        if (!o) return mxp__error_oom("engine wait");
        o->sync_fn = wake_waiter;
        o->arg = &w;
        submit(e, o, &o->blk, 0, NULL, o->arg, NULL);
        pthread_mutex_lock(&w.mu);
        while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        pthread_mutex_destroy(&w.mu);
        pthread_cond_destroy(&w.cv);
    }
    err_rec *r = mxp__eng_var_error(var);
    int rc = raise_once(r);
    mxp__eng_err_unref(r);
    return rc;
}

int mxp_engine_wait_for_all(void) {
    eng_engine *e = mxp__eng_peek();
    if (!e) return MXP_OK;
    if (mxp__eng_in_function())
        return mxp__error(MXP_EMISUSE, "mxp_engine_wait_for_all called inside an engine function: "
                          "it would deadlock");
    wait_idle(e);
    pthread_mutex_lock(&e->err_mu);
    int rc = MXP_OK;
    for (int i = 0; i < e->n_errs; i++) {
        if (rc == MXP_OK) rc = raise_once(e->errs[i]);
        else atomic_store(&e->errs[i]->raised, 1);
        mxp__eng_err_unref(e->errs[i]);
    }
    e->n_errs = 0;
    pthread_mutex_unlock(&e->err_mu);
    return rc;
}
