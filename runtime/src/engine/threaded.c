/* threaded.c — running blocks: dispatch, worker lanes, the run/complete path.
 *
 * A block whose wait counter reaches 0 is dispatched: internal kinds (delete
 * var, wait) run inline on the thread that made them ready; under the naive
 * engine every block runs inline on the pushing thread; a block ready at
 * its push runs on the pusher on a backlog, when pushed as tiny
 * (mxp__engine_push_here) or when its pre-created op measured tiny (every
 * run of a pre-created op is timed into op->run_est); otherwise the block
 * goes to its lane.  A lane is
 * a queue plus worker threads for one (device, kind): normal (FIFO),
 * prioritized (max-heap on priority, then push order) or copy (FIFO).  Lanes and their threads are created on first use.
 * A worker that makes a block of its own FIFO lane ready keeps it in a
 * thread-local "next" slot and runs it right after the current one (a chain
 * of dependent ops never goes through the queue or wakes anybody).  Idle
 * workers spin briefly on the queue size before sleeping on the lane's
 * condition variable (waking a sleeper costs ~10 µs), polling less when
 * polling has not been paying (lane_pop).  FIFO lanes use a
 * lock-free bounded ring (Vyukov MPMC) with a spinlocked overflow list, so
 * pushers and workers do not share a lock.  Compute workers hold a
 * thread-budget slot (parallel.h) only while they have work, and not for
 * an async function (a hand-off, no compute).
 * Not here: the var state machine (var.c), the public API (engine.c). */
#include "engine_impl.h"
#include "profiler/profiler.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

/* Idle workers poll before they sleep: at most SPIN_ROUNDS rounds, fewer
 * when polling has not been paying (lane_pop). */
enum { SPIN_ROUNDS = 4000, SPIN_MIN_ROUNDS = 64, SPIN_YIELD_EVERY = 256 };
#define SPIN_WORTH_NS 200000u /* about what SPIN_ROUNDS rounds take */

#define TLS_IE __attribute__((tls_model("initial-exec")))
static _Thread_local eng_lane *tl_lane TLS_IE; /* the lane this worker serves */
static _Thread_local eng_blk *tl_next TLS_IE;  /* ready block of tl_lane to run next */
static _Thread_local int tl_depth TLS_IE;      /* nesting of engine functions on this thread */
static _Thread_local int tl_runs_ready TLS_IE; /* mxp__engine_pusher_runs_ready */
static _Thread_local int tl_spin_limit TLS_IE; /* this worker's polling budget (lane_pop); 0: not set yet */

/* ------------------------------------------------------------ run times */

/* A cheap clock for measuring a function's run: the TSC where there is one
 * (a few ns to read; the kernel's clock_gettime on these machines reads it
 * too), else CLOCK_MONOTONIC in ns. */
static inline uint64_t eng_ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
    return __rdtsc();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A function that runs for less than TINY_RUN_NS costs the pusher less
 * than handing it to a worker does (a queued block moves ~6 cache lines
 * between cores, each a few hundred cycles on a large server die, plus a
 * wake-up when the worker sleeps), so the pusher runs such an op itself.
 * tiny_ticks is TINY_RUN_NS in eng_ticks units, measured once against
 * CLOCK_MONOTONIC when the first lane starts (both clocks count wall time,
 * so a preemption during the measurement does not skew the ratio). */
enum { TINY_RUN_NS = 500, CALIBRATE_NS = 100000 };
static pthread_once_t tiny_once = PTHREAD_ONCE_INIT;
static _Atomic uint32_t tiny_ticks; /* 0 until calibrated */

static void calibrate_ticks(void) {
    uint64_t n0 = mono_ns(), k0 = eng_ticks(), n1, k1;
    do {
        mxp__eng_cpu_relax();
        n1 = mono_ns();
        k1 = eng_ticks();
    } while (n1 - n0 < CALIBRATE_NS);
    double per_ns = (double)(k1 - k0) / (double)(n1 - n0);
    double t = per_ns * TINY_RUN_NS;
    atomic_store_explicit(&tiny_ticks, t < 1 ? 1 : t > 1e9 ? 1000000000u : (uint32_t)t, memory_order_relaxed);
}

/* Fold one run's duration into a pre-created op's estimate: a running
 * average over about the last four runs, so one slow run (a preemption)
 * sends the next few pushes to the workers and the estimate recovers.
 * Concurrent runs of one op (readers only) may lose an update: harmless. */
static inline void run_est_add(eng_opr *o, uint64_t ticks) {
    uint32_t d = ticks >= ENG_RUN_EST_UNKNOWN ? ENG_RUN_EST_UNKNOWN - 1 : (uint32_t)ticks;
    uint32_t old = atomic_load_explicit(&o->run_est, memory_order_relaxed);
    uint32_t est = old == ENG_RUN_EST_UNKNOWN ? d : old - old / 4 + d / 4;
    atomic_store_explicit(&o->run_est, est, memory_order_relaxed);
}

/* Which runs are timed: every run of an op not measured yet, and one in
 * TIME_EVERY of the others per thread (reading the TSC twice costs ~20 ns
 * on these machines, as much as the rest of a direct run's locked
 * instructions together). */
enum { TIME_EVERY = 8 };
static _Thread_local unsigned tl_run_count TLS_IE;
static inline bool time_this_run(const eng_opr *o) {
    return !o->temporary && (++tl_run_count % TIME_EVERY == 0 ||
                             atomic_load_explicit(&o->run_est, memory_order_relaxed) == ENG_RUN_EST_UNKNOWN);
}

static inline bool op_is_tiny(const eng_opr *o) {
    uint32_t est = atomic_load_explicit(&o->run_est, memory_order_relaxed);
    return !o->temporary &&
           (est <= atomic_load_explicit(&tiny_ticks, memory_order_relaxed) || est == ENG_RUN_EST_UNKNOWN);
}

static bool is_cpu(int32_t type);

bool mxp__eng_on_worker(void) { return tl_lane != NULL; }
bool mxp__eng_in_function(void) { return tl_depth > 0; }

/* ------------------------------------------------------------ queues */

static bool heap_before(const eng_blk *a, const eng_blk *b) {
    return a->priority > b->priority || (a->priority == b->priority && a->seq < b->seq);
}

static void heap_push(eng_lane *l, eng_blk *b) {
    if (l->heap_len == l->heap_cap) {
        int cap = l->heap_cap ? l->heap_cap * 2 : 64;
        eng_blk **h = realloc(l->heap, sizeof *h * (size_t)cap);
        if (!h) mxp__fatal("engine: out of memory growing the priority queue");
        l->heap = h;
        l->heap_cap = cap;
    }
    b->seq = l->seq++;
    int i = l->heap_len++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!heap_before(b, l->heap[p])) break;
        l->heap[i] = l->heap[p];
        i = p;
    }
    l->heap[i] = b;
}

static eng_blk *heap_pop(eng_lane *l) {
    eng_blk *top = l->heap[0];
    eng_blk *last = l->heap[--l->heap_len];
    int n = l->heap_len, i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_before(l->heap[c + 1], l->heap[c])) c++;
        if (!heap_before(l->heap[c], last)) break;
        l->heap[i] = l->heap[c];
        i = c;
    }
    if (n > 0) l->heap[i] = last;
    return top;
}

enum { RING_CAP = 4096 };

static bool ring_put(eng_lane *l, eng_blk *b) {
    uint64_t pos = atomic_load_explicit(&l->ptail, memory_order_relaxed);
    for (;;) {
        eng_cell *c = &l->cells[pos & l->mask];
        uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        int64_t diff = (int64_t)(seq - pos);
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&l->ptail, &pos, pos + 1, memory_order_seq_cst,
                                                      memory_order_relaxed)) {
                c->blk = b;
                atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
                return true;
            }
        } else if (diff < 0) {
            return false; /* full */
        } else {
            pos = atomic_load_explicit(&l->ptail, memory_order_relaxed);
        }
    }
}

static eng_blk *ring_get(eng_lane *l) {
    uint64_t pos = atomic_load_explicit(&l->phead, memory_order_relaxed);
    for (;;) {
        eng_cell *c = &l->cells[pos & l->mask];
        uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        int64_t diff = (int64_t)(seq - (pos + 1));
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&l->phead, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                eng_blk *b = c->blk;
                atomic_store_explicit(&c->seq, pos + l->mask + 1, memory_order_release);
                return b;
            }
        } else if (diff < 0) {
            return NULL; /* empty (or the slot is being filled) */
        } else {
            pos = atomic_load_explicit(&l->phead, memory_order_relaxed);
        }
    }
}

/* Anything queued?  seq_cst loads: pairs with a pusher's seq_cst index
 * update / qsize increment and the sleeper's sleepers++. */
static bool lane_nonempty(eng_lane *l) {
    if (atomic_load(&l->qsize) > 0) return true;
    return l->fifo && atomic_load(&l->ptail) != atomic_load(&l->phead);
}

/* Wake one sleeping worker, unless a wake-up is already in flight (without
 * that, every push while a worker sleeps paid a futex syscall, ~1 µs, and
 * under load workers sleep often).  The woken worker clears `waking` each
 * time it returns from the wait, and a worker that takes work while more is
 * queued calls this again, so queued work always has a worker coming: the
 * flag only merges concurrent signals. */
static void wake_one(eng_lane *l) {
    /* A spinning worker takes the work: waking a sleeper as well only got a
     * third thread spinning beside the one running it and its helper. */
    if (atomic_load(&l->spinners) > 0) return; /* seq_cst: pairs with lane_pop */
    if (atomic_load(&l->sleepers) == 0 || atomic_exchange(&l->waking, 1) != 0) return;
    pthread_mutex_lock(&l->mu);
    if (l->n_sleeping > 0) pthread_cond_signal(&l->cv);
    else atomic_store(&l->waking, 0);
    pthread_mutex_unlock(&l->mu);
}

static void lane_push(eng_lane *l, eng_blk *b) {
    if (!l->fifo || !ring_put(l, b)) {
        eng_spin_lock(&l->qlock);
        if (l->fifo) {
            b->next = NULL;
            if (l->ovf_tail) l->ovf_tail->next = b; else l->ovf_head = b;
            l->ovf_tail = b;
        } else {
            heap_push(l, b);
        }
        atomic_fetch_add(&l->qsize, 1);
        eng_spin_unlock(&l->qlock);
    }
    wake_one(l);
}

static eng_blk *lane_take(eng_lane *l) {
    eng_blk *b = l->fifo ? ring_get(l) : NULL;
    if (b || atomic_load_explicit(&l->qsize, memory_order_acquire) == 0) return b;
    eng_spin_lock(&l->qlock);
    if (atomic_load_explicit(&l->qsize, memory_order_relaxed) > 0) {
        if (l->fifo) {
            b = l->ovf_head;
            l->ovf_head = b->next;
            if (!l->ovf_head) l->ovf_tail = NULL;
        } else {
            b = heap_pop(l);
        }
        atomic_fetch_sub_explicit(&l->qsize, 1, memory_order_relaxed);
    }
    eng_spin_unlock(&l->qlock);
    return b;
}

/* Next block for a worker; NULL when the lane stops.  Releases the worker's
 * budget slot while it has nothing to do.
 * Polling adapts per worker: an idle spell that polling ended (work came
 * within the budget) doubles the budget, up to SPIN_ROUNDS (~0.2 ms); one
 * that ended in sleep halves it, down to SPIN_MIN_ROUNDS, unless the work
 * came within SPIN_WORTH_NS of falling asleep (then polling the whole
 * budget would have caught it: back to SPIN_ROUNDS).  So a worker
 * polls while work keeps arriving in quick succession (the ops of a step)
 * and stops burning a core when it does not: on a 2-core machine a worker
 * polling for 4000 rounds after every step competed with the kvstore
 * communication thread and with the pusher running tiny ops itself. */
static eng_blk *lane_pop(eng_lane *l, bool *have_slot) {
    if (tl_spin_limit == 0) tl_spin_limit = SPIN_ROUNDS;
    /* Counted in `spinners` while spinning; a spinner stops counting before
     * it re-checks the queue on its way to sleep, so a push that skipped
     * the wake-up because of it is seen there. */
    atomic_fetch_add(&l->spinners, 1);
    for (int spin = 0;; spin++) {
        eng_blk *b = lane_take(l);
        if (b) {
            atomic_fetch_sub(&l->spinners, 1);
            if (spin > 0 && tl_spin_limit < SPIN_ROUNDS) /* polling paid off */
                tl_spin_limit = tl_spin_limit * 2 < SPIN_ROUNDS ? tl_spin_limit * 2 : SPIN_ROUNDS;
            if (lane_nonempty(l)) wake_one(l); /* more queued: bring the next worker */
            return b;
        }
        if (*have_slot) {
            mxp__parallel_release(1);
            *have_slot = false;
        }
        if (spin < tl_spin_limit) {
            if (spin % SPIN_YIELD_EVERY == SPIN_YIELD_EVERY - 1) sched_yield();
            else if (!lane_nonempty(l)) mxp__eng_cpu_relax();
            continue;
        }
        if (tl_spin_limit > SPIN_MIN_ROUNDS) tl_spin_limit /= 2; /* polled in vain */
        atomic_fetch_sub(&l->spinners, 1);
        uint64_t slept_from = mono_ns();
        pthread_mutex_lock(&l->mu);
        atomic_fetch_add(&l->sleepers, 1); /* seq_cst: pairs with the pusher */
        l->n_sleeping++;
        while (!lane_nonempty(l) && !l->stop) {
            pthread_cond_wait(&l->cv, &l->mu);
            atomic_store(&l->waking, 0);
        }
        l->n_sleeping--;
        atomic_fetch_sub(&l->sleepers, 1);
        bool stop = l->stop;
        pthread_mutex_unlock(&l->mu);
        b = lane_take(l);
        if (b) {
            /* Work came soon after: the full budget would have caught it
             * without the sleep and wake-up. */
            if (mono_ns() - slept_from < SPIN_WORTH_NS) tl_spin_limit = SPIN_ROUNDS;
            if (lane_nonempty(l)) wake_one(l); /* more queued: bring the next worker */
            return b;
        }
        if (stop && !lane_nonempty(l)) return NULL;
        atomic_fetch_add(&l->spinners, 1);
        spin = 0;
    }
}

/* ------------------------------------------------------------ dispatch */

static void run_inline(eng_blk *b, eng_engine *e) {
    mxp_run_ctx ctx = {sizeof(mxp_run_ctx), b->opr->device, NULL, -1, 0};
    mxp__eng_blk_run(b, e, &ctx);
}

static void run_on_pusher(eng_blk *b, eng_engine *e);

void mxp__eng_blk_decr(eng_blk *b, eng_engine *e) {
    if (atomic_fetch_sub_explicit(&b->wait, 1, memory_order_acq_rel) != 1) return;
    if (mxp__prof_on(MXP__PROF_API)) b->prof_ready = mxp__prof_now(); /* the one check per op when off */
    if (b->opr->kind != ENG_KIND_USER || e->type == ENGINE_NAIVE) {
        run_inline(b, e);
        return;
    }
    eng_lane *l = b->lane;
    /* A hand-off (mxp__engine_push_handoff) made ready on a worker, outside
     * any engine function: run it here, it only queues work elsewhere. */
    if (b->opr->handoff && tl_lane != NULL && tl_depth == 0) {
        run_on_pusher(b, e);
        return;
    }
    if (tl_lane == l && l->fifo && !tl_next) {
        tl_next = b;
        return;
    }
    lane_push(l, b);
}

/* Blocks queued on a FIFO lane and not yet taken (a snapshot). */
static int64_t lane_backlog(eng_lane *l) {
    uint64_t t = atomic_load_explicit(&l->ptail, memory_order_relaxed);
    uint64_t h = atomic_load_explicit(&l->phead, memory_order_relaxed);
    return (int64_t)(t - h) + atomic_load_explicit(&l->qsize, memory_order_relaxed);
}

/* Running work on the pushing thread (the backlog rule and direct runs
 * below): the run gets the workers' float mode (FTZ/DAZ) for its duration,
 * so an op gives the same bits whichever thread runs it; BLAS is
 * single-threaded process-wide (the packs' init), so nothing else of the
 * workers' setup matters.  The run clears and may set this thread's last
 * error; the pusher's own message (a caller releasing arrays on its error
 * path, say) must survive it: a failure is reported, as from a worker,
 * through the vars at the next wait. */
typedef struct pusher_mode {
    unsigned csr;
    size_t len;
    char saved[1024];
} pusher_mode;

static void pusher_enter(pusher_mode *m) {
#if defined(__SSE__)
    m->csr = _mm_getcsr();
    if ((m->csr & 0x8040) != 0x8040) _mm_setcsr(m->csr | 0x8040);
#endif
    const char *cur = mxp_last_error();
    m->len = 0;
    if (__builtin_expect(cur[0] != '\0', 0)) {
        m->len = strnlen(cur, sizeof m->saved - 1);
        memcpy(m->saved, cur, m->len);
    }
    m->saved[m->len] = '\0';
}

static void pusher_leave(const pusher_mode *m) {
    if (m->len) mxp__error(MXP_OK, "%s", m->saved);
    else mxp__error_clear();
#if defined(__SSE__)
    if ((m->csr & 0x8040) != 0x8040) _mm_setcsr(m->csr);
#endif
}

static void run_on_pusher(eng_blk *b, eng_engine *e) {
    pusher_mode m;
    pusher_enter(&m);
    run_inline(b, e);
    pusher_leave(&m);
}

/* The pusher runs a block that is ready at push itself, instead of
 * queueing it, when the CPU compute lane already holds more than
 * PUSH_INLINE_BACKLOG blocks per worker (libgomp does the same past 64
 * queued tasks per thread): the workers cannot keep up, so another queued
 * block only adds queue traffic and a hand-off, while running it here costs
 * neither and slows the pusher to the pace of the work.  Only a plain
 * pusher (not inside an engine function: no nesting) and only synchronous
 * functions (an async one may wait for something this thread would push
 * next).  Independent ops over 1000 vars, 2 threads, machine loaded: see
 * docs/engine.md.  (Tiny work pushed with mxp__engine_push_here runs on
 * the pusher whenever its vars are free: mxp__eng_run_here below.)  A
 * thread that asked for it (mxp__engine_pusher_runs_ready, engine.h: a
 * training loop) runs every ready CPU compute block it pushes, on either
 * compute lane, under the same conditions, and so does any thread for a
 * pre-created op measured tiny (op_is_tiny; push_op takes such a push as a
 * direct run first, mxp__eng_push_op_here below, and comes here only when
 * a var was busy or profiling is on). */
enum { PUSH_INLINE_BACKLOG = 64 };

void mxp__eng_blk_decr_push(eng_blk *b, eng_engine *e) {
    if (atomic_fetch_sub_explicit(&b->wait, 1, memory_order_acq_rel) != 1) return;
    if (mxp__prof_on(MXP__PROF_API)) b->prof_ready = mxp__prof_now(); /* as mxp__eng_blk_decr */
    eng_opr *o = b->opr;
    if (o->kind != ENG_KIND_USER || e->type == ENGINE_NAIVE) {
        run_inline(b, e);
        return;
    }
    eng_lane *l = b->lane;
    if (tl_lane == l && l->fifo && !tl_next) {
        tl_next = b;
        return;
    }
    if (tl_depth == 0 && l->counts_budget && o->sync_fn &&
        ((tl_lane == NULL && (tl_runs_ready || op_is_tiny(o))) ||
         (l->kind == LANE_NORMAL && lane_backlog(l) > (int64_t)PUSH_INLINE_BACKLOG * l->n_workers))) {
        run_on_pusher(b, e);
        return;
    }
    lane_push(l, b);
}

int mxp__engine_pusher_runs_ready(int on) {
    int old = tl_runs_ready;
    tl_runs_ready = on != 0;
    return old;
}

/* ------------------------------------------------------------ run here */

/* A direct run (mxp__engine_push_here, and pushes of pre-created ops the
 * pusher may run: mxp__eng_push_op_here): the function runs now, on this
 * thread, with no operator, block, queue or worker — but under the same
 * var protocol as any run.  Every var's lock is taken (in address order:
 * two direct runs never deadlock, and nothing else holds two var locks),
 * and only if each is free — a read: no write running or queued; a write:
 * nothing running or queued — are they all granted at once (nreads++ /
 * writing, writes_pushed++), exactly as append_read / append_write grant a
 * free var.  A var that is not free leaves everything untouched (false:
 * the caller pushes as usual, and that push queues behind the pending
 * work).  The run holds the fork gate from before the locks until it has
 * completed, so a fork waits for it (a fork from inside its function does
 * not wait for its own thread's hold); it is not counted in pushed /
 * completed (two locked adds, a sixth of a tiny direct run): a
 * wait_for_all on another thread does not wait for a push that has not
 * returned yet.  Then as blk_run: an input or output carrying an
 * unraised error poisons the run (skipped unless MXP_FN_NO_SKIP); a
 * failure makes an error record on every written var and in the global
 * list; completion releases the vars with complete_read / complete_write
 * (version bump, error record, dependants triggered), after free_arg.
 * What a direct run needs: the function and its argument, what releases
 * the argument after the run (a plain push's free_arg, a push_op_arg's
 * release; NULL for a pre-created op's own argument), the var lists, and
 * the pre-created op whose run-time estimate the run updates (or NULL). */
typedef struct direct_run {
    mxp_engine_sync_fn fn;
    void *arg;
    mxp_engine_free_fn release;
    int prop;
    mxp_device dev;
    const char *name;
    eng_opr *opr;
} direct_run;

static bool run_direct(eng_engine *e, const direct_run *d, mxp_var **vars, int n_mutate, int n_const) {
    int n = n_mutate + n_const;
    mxp_var *sorted[ENG_HERE_MAX_VARS];
    for (int i = 0; i < n; i++) { /* insertion sort: a handful of vars */
        int j = i;
        for (; j > 0 && (uintptr_t)sorted[j - 1] > (uintptr_t)vars[i]; j--) sorted[j] = sorted[j - 1];
        sorted[j] = vars[i];
    }
    mxp__eng_fire_write_hooks(vars, n_mutate);
    mxp__eng_gate_enter();
    for (int i = 0; i < n; i++) eng_spin_lock(&sorted[i]->lock);
    bool free_all = true;
    for (int i = 0; i < n && free_all; i++) {
        mxp_var *v = vars[i];
        free_all = !v->writing && !v->qhead && (i >= n_mutate || v->nreads == 0);
    }
    if (free_all) {
        for (int i = 0; i < n_mutate; i++) {
            vars[i]->writing = true;
            mxp__eng_var_count_write(vars[i]);
        }
        for (int i = n_mutate; i < n; i++) vars[i]->nreads++;
    }
    for (int i = n; i-- > 0;) eng_spin_unlock(&sorted[i]->lock);
    if (!free_all) {
        mxp__eng_gate_leave();
        return false;
    }

    const char *name = d->name ? d->name : "unnamed";
    err_rec *err = NULL;
    for (int i = 0; i < n && !err; i++) {
        err_rec *r = atomic_load_explicit(&vars[i]->err, memory_order_acquire);
        if (r && !atomic_load_explicit(&r->raised, memory_order_acquire)) {
            mxp__eng_err_ref(r);
            err = r;
        }
    }
    if (!err || d->prop == MXP_FN_NO_SKIP) {
        pusher_mode m;
        pusher_enter(&m);
        mxp_device dev = d->dev;
        if (dev.type == 0) dev.type = MXP_DEV_CPU;
        mxp_run_ctx ctx = {sizeof(mxp_run_ctx), dev, NULL, -1, 0};
        tl_depth++;
        mxp__error_clear();
        bool timed = d->opr && time_this_run(d->opr);
        uint64_t t0 = timed ? eng_ticks() : 0;
        int rc = d->fn(d->arg, &ctx);
        if (timed) run_est_add(d->opr, eng_ticks() - t0);
        if (rc != MXP_OK) {
            err_rec *r = mxp__eng_err_new(rc, name, mxp_last_error());
            if (r) {
                mxp__eng_err_global_add(e, r);
                mxp__eng_err_unref(err);
                err = r;
            } else {
                MXP_LOGE("engine", "op '%s' failed (%s) and recording the error ran out of memory", name,
                         mxp_status_name(rc));
            }
        }
        tl_depth--;
        pusher_leave(&m);
    }
    if (d->release) d->release(d->arg);
    for (int i = n_mutate; i < n; i++) mxp__eng_var_complete_read(vars[i], e);
    for (int i = 0; i < n_mutate; i++) mxp__eng_var_complete_write(vars[i], err, e);
    mxp__eng_err_unref(err);
    mxp__eng_gate_leave();
    return true;
}

bool mxp__eng_run_here(eng_engine *e, const mxp_engine_push_args *a, mxp_var **vars, int n_mutate, int n_const) {
    direct_run d = {a->sync_fn, a->arg, a->free_arg, a->prop, a->device, a->name, NULL};
    return run_direct(e, &d, vars, n_mutate, n_const);
}

/* A push of a pre-created op that the pusher may run itself (measured
 * tiny, or the thread runs its ready work: mxp__eng_blk_decr_push's rules)
 * runs directly when its vars are free: no block, wait counter, reference
 * or lane.  false: not taken (the caller pushes as usual). */
bool mxp__eng_push_op_here(eng_engine *e, eng_opr *o, void *arg, mxp_engine_free_fn release) {
    /* The CPU compute lanes only (what counts_budget marks), as the rules
     * in mxp__eng_blk_decr_push; no lane is needed for a direct run. */
    if (e->type != ENGINE_THREADED || tl_depth != 0 || tl_lane != NULL || !o->sync_fn ||
        o->kind != ENG_KIND_USER || o->lane_kind == LANE_COPY || !is_cpu(o->device.type) ||
        o->n_mutate + o->n_const > ENG_HERE_MAX_VARS || !(tl_runs_ready || op_is_tiny(o)) ||
        mxp__prof_on(MXP__PROF_API))
        return false;
    if (__builtin_expect(atomic_load_explicit(&tiny_ticks, memory_order_relaxed) == 0, 0))
        pthread_once(&tiny_once, calibrate_ticks);
    direct_run d = {o->sync_fn, arg, release, o->prop, o->device, o->name, o};
    return run_direct(e, &d, o->vars, o->n_mutate, o->n_const);
}

/* ------------------------------------------------------------ run */

static void set_failure(eng_blk *b, int status, const char *why) {
    err_rec *r = mxp__eng_err_new(status, b->opr->name, why);
    if (!r) {
        MXP_LOGE("engine", "op '%s' failed (%s) and recording the error ran out of memory",
                 b->opr->name, mxp_status_name(status));
        return;
    }
    mxp__eng_err_global_add(b->eng, r);
    mxp__eng_err_unref(b->err);
    b->err = r; /* our reference from mxp__eng_err_new */
}

static void async_done(void *token, int status, const char *message) {
    eng_blk *b = token;
    if (status != MXP_OK) set_failure(b, status, message);
    mxp__eng_blk_complete(b, b->eng);
}

/* Run a user block's function.  t_ready: the profiler's ready time, 0 when
 * not profiling — a constant 0 in the unprofiled path, where the profiling
 * code folds away (no extra live values around the call). */
static inline __attribute__((always_inline)) void run_function(eng_blk *b, eng_engine *e, const mxp_run_ctx *ctx,
                                                                int64_t t_ready) {
    eng_opr *o = b->opr;
    int64_t t_run = t_ready ? mxp__prof_now() : 0;
    tl_depth++;
    if (o->sync_fn) {
        mxp__error_clear();
        bool timed = time_this_run(o);
        uint64_t t0 = timed ? eng_ticks() : 0;
        int rc = o->sync_fn(b->arg, ctx);
        if (timed) run_est_add(o, eng_ticks() - t0);
        if (rc != MXP_OK) set_failure(b, rc, mxp_last_error());
        tl_depth--;
        if (t_ready) mxp__prof_engine(o->name, o->lane_kind == LANE_COPY, t_ready, t_run, mxp__prof_now());
        mxp__eng_blk_complete(b, e);
    } else {
        /* The op may complete (and be freed) inside async_fn: keep its name. */
        char name[48] = "";
        int copy = 0;
        if (t_ready) {
            snprintf(name, sizeof name, "%s", o->name);
            copy = o->lane_kind == LANE_COPY;
        }
        mxp_engine_callback cb = {async_done, b};
        o->async_fn(b->arg, ctx, cb);
        tl_depth--;
        if (t_ready) mxp__prof_engine(name, copy, t_ready, t_run, mxp__prof_now());
    }
}

static __attribute__((noinline)) void run_function_profiled(eng_blk *b, eng_engine *e, const mxp_run_ctx *ctx) {
    run_function(b, e, ctx, b->prof_ready);
}

void mxp__eng_blk_run(eng_blk *b, eng_engine *e, const mxp_run_ctx *ctx) {
    eng_opr *o = b->opr;
    b->eng = e;
    if (o->kind == ENG_KIND_DELETE_VAR) {
        mxp__eng_blk_complete(b, e);
        return;
    }
    if (o->kind == ENG_KIND_USER) {
        /* An input (or an output: it could be read-modify-write) carrying an
         * unraised error poisons this run.  The records are stable: only a
         * completing writer replaces them, and we hold access to every var. */
        int n = o->n_const + o->n_mutate;
        for (int i = 0; i < n; i++) {
            err_rec *r = atomic_load_explicit(&o->vars[i]->err, memory_order_acquire);
            if (r && !atomic_load_explicit(&r->raised, memory_order_acquire)) {
                mxp__eng_err_ref(r);
                b->err = r;
                break;
            }
        }
        if (b->err && o->prop != MXP_FN_NO_SKIP) {
            mxp__eng_blk_complete(b, e);
            return;
        }
    }
    if (__builtin_expect(b->prof_ready != 0, 0)) run_function_profiled(b, e, ctx);
    else run_function(b, e, ctx, 0);
}

static void delete_var(mxp_var *v, eng_engine *e) {
    eng_spin_lock(&v->lock);
    bool alone = v->nreads == 0 && !v->qhead;
    eng_spin_unlock(&v->lock);
    if (!alone) {
        /* Something was pushed on the var after delete_var: a caller bug.
         * Keep the var alive (leak it) rather than free it under them. */
        MXP_LOGE("engine", "var %p used after mxp_engine_delete_var; not freed", (void *)v);
        mxp__eng_var_complete_write(v, NULL, e);
        return;
    }
    mxp__eng_var_free(v);
}

void mxp__eng_blk_complete(eng_blk *b, eng_engine *e) {
    eng_opr *o = b->opr;
    err_rec *err = b->err;
    atomic_int *naive_done = b->naive_done;
    b->err = NULL;
    if (o->temporary && o->free_arg) o->free_arg(o->arg);
    if (b->release) b->release(b->arg); /* a per-push arg: after its run or skip, before the vars move on */
    for (int i = 0; i < o->n_const; i++) mxp__eng_var_complete_read(o->vars[o->n_mutate + i], e);
    for (int i = 0; i < o->n_mutate; i++) {
        mxp_var *v = o->vars[i];
        if (o->kind == ENG_KIND_DELETE_VAR) delete_var(v, e);
        else mxp__eng_var_complete_write(v, err, e);
    }
    mxp__eng_err_unref(err);
    if (o->temporary) {
        mxp__eng_opr_release(e, o);
    } else {
        mxp__eng_pool_put(&e->pools[POOL_BLK], b);
        mxp__eng_opr_release(e, o);
    }
    if (naive_done) {
        pthread_mutex_lock(&mxp__eng_all_mu);
        atomic_store(naive_done, 1);
        pthread_cond_broadcast(&mxp__eng_all_cv);
        pthread_mutex_unlock(&mxp__eng_all_mu);
    }
    mxp__eng_pending_done(e);
}

/* ------------------------------------------------------------ workers */

typedef struct worker_arg {
    eng_engine *e;
    eng_lane *l;
    int idx;
} worker_arg;

static void *worker_main(void *p) {
    worker_arg wa = *(worker_arg *)p;
    free(p);
    eng_lane *l = wa.l;
    mxp__parallel_set_ftz();
    mxp__engine_run_worker_init();
    mxp_run_ctx ctx = {sizeof(mxp_run_ctx), l->dev, NULL, l->worker_base + wa.idx, 0};
    static const char *const lane_names[LANE_COUNT] = {"worker", "priority worker", "copy worker"};
    mxp__prof_thread_name("%s(%d) %s %d", l->dev.type == MXP_DEV_CPU ? "cpu" : l->dev.type == MXP_DEV_GPU ? "gpu" : "device",
                          (int)l->dev.id, lane_names[l->kind], wa.idx);
    const mxp__engine_device_hooks *hooks = mxp__engine_device_hooks_for(l->dev.type);
    if (hooks && hooks->stream_create) {
        void *stream = NULL;
        if (hooks->stream_create(l->dev, l->kind, &stream) != MXP_OK)
            MXP_LOGE("engine", "device %d:%d: creating a worker stream failed: %s", l->dev.type,
                     l->dev.id, mxp_last_error());
        ctx.stream = stream;
    }
    tl_lane = l;
    bool have_slot = false;
    for (;;) {
        eng_blk *b = tl_next;
        if (b) tl_next = NULL;
        else b = lane_pop(l, &have_slot);
        if (!b) break;
        /* An async function only hands its work off (a KVStore transfer to
         * the communication thread): it needs no compute slot, and waiting
         * for one kept it behind a whole chain of compute on a 1-thread
         * budget (a gradient's sum started after the backward ended). */
        if (l->counts_budget && !have_slot && b->opr->sync_fn) {
            mxp__parallel_acquire_one();
            have_slot = true;
        }
        mxp__eng_blk_run(b, wa.e, &ctx);
    }
    if (have_slot) mxp__parallel_release(1);
    if (hooks && hooks->stream_destroy && ctx.stream) hooks->stream_destroy(l->dev, ctx.stream);
    tl_lane = NULL;
    return NULL;
}

static bool is_cpu(int32_t type) {
    return type == MXP_DEV_CPU || type == MXP_DEV_CPU_PINNED || type == MXP_DEV_CPU_SHARED;
}

static void lane_free(eng_lane *l) {
    MXP_ASSERT(!lane_nonempty(l));
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l->heap);
    free(l->cells);
    free(l->threads);
    free(l);
}

static void lane_stop(eng_lane *l, int n_started) {
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < n_started; i++) pthread_join(l->threads[i], NULL);
}

static eng_lane *lane_create(eng_engine *e, mxp_device dev, int kind) {
    eng_lane *l = aligned_alloc(64, (sizeof *l + 63) & ~(size_t)63);
    if (l) memset(l, 0, sizeof *l);
    if (!l) { mxp__error_oom("engine lane"); return NULL; }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->kind = kind;
    l->fifo = kind != LANE_PRIO;
    if (l->fifo) {
        l->cells = malloc(sizeof *l->cells * RING_CAP);
        if (!l->cells) { lane_free(l); mxp__error_oom("engine lane"); return NULL; }
        for (uint64_t i = 0; i < RING_CAP; i++) atomic_init(&l->cells[i].seq, i);
        l->mask = RING_CAP - 1;
    }
    l->dev = dev;
    pthread_once(&tiny_once, calibrate_ticks);
    int n;
    if (is_cpu(dev.type)) {
        n = kind == LANE_NORMAL ? e->budget : 1;
        l->counts_budget = kind != LANE_COPY;
    } else {
        const mxp__engine_device_hooks *h = mxp__engine_device_hooks_for(dev.type);
        if (kind == LANE_COPY) n = h && h->copy_workers > 0 ? h->copy_workers : 1;
        else n = h && h->normal_workers > 0 ? h->normal_workers : 2;
    }
    l->n_workers = n;
    l->threads = calloc((size_t)n, sizeof *l->threads);
    if (!l->threads) { lane_free(l); mxp__error_oom("engine lane"); return NULL; }
    l->worker_base = atomic_fetch_add(&e->n_workers_total, n);
    for (int i = 0; i < n; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        int rc = ENOMEM;
        if (wa) {
            wa->e = e; wa->l = l; wa->idx = i;
            rc = pthread_create(&l->threads[i], NULL, worker_main, wa);
        }
        if (rc != 0) {
            free(wa);
            lane_stop(l, i);
            lane_free(l);
            mxp__error(MXP_EINTERNAL, "engine: cannot start worker thread %d for device %d:%d: %s",
                       i, dev.type, dev.id, strerror(rc));
            return NULL;
        }
    }
    return l;
}

eng_lane *mxp__eng_lane_get(eng_engine *e, mxp_device dev, int kind) {
    if (is_cpu(dev.type)) dev.type = MXP_DEV_CPU; /* pinned/shared memory runs on CPU workers */
    for (eng_devpool *d = atomic_load_explicit(&e->devs, memory_order_acquire); d; d = d->next) {
        if (d->dev.type == dev.type && d->dev.id == dev.id) {
            eng_lane *l = atomic_load_explicit(&d->lanes[kind], memory_order_acquire);
            if (l) return l;
            break;
        }
    }
    pthread_mutex_lock(&e->dev_mu);
    eng_devpool *d = atomic_load_explicit(&e->devs, memory_order_relaxed);
    for (; d; d = d->next)
        if (d->dev.type == dev.type && d->dev.id == dev.id) break;
    if (!d) {
        d = calloc(1, sizeof *d);
        if (!d) { pthread_mutex_unlock(&e->dev_mu); mxp__error_oom("engine device pool"); return NULL; }
        d->dev = dev;
        d->next = atomic_load_explicit(&e->devs, memory_order_relaxed);
        atomic_store_explicit(&e->devs, d, memory_order_release);
    }
    eng_lane *l = atomic_load_explicit(&d->lanes[kind], memory_order_relaxed);
    if (!l) {
        l = lane_create(e, dev, kind);
        if (l) atomic_store_explicit(&d->lanes[kind], l, memory_order_release);
    }
    pthread_mutex_unlock(&e->dev_mu);
    return l;
}

void mxp__eng_threaded_stop(eng_engine *e) {
    eng_devpool *d = atomic_exchange(&e->devs, NULL);
    while (d) {
        for (int k = 0; k < LANE_COUNT; k++) {
            eng_lane *l = atomic_load(&d->lanes[k]);
            if (!l) continue;
            lane_stop(l, l->n_workers);
            lane_free(l);
        }
        eng_devpool *n = d->next;
        free(d);
        d = n;
    }
}

void mxp__eng_threaded_orphan(eng_engine *e) {
    /* The threads do not exist in a fork child; their lanes stay allocated
     * (reachable from the orphaned engine) and are never touched again. */
    (void)e;
    tl_lane = NULL;
    tl_next = NULL;
}
