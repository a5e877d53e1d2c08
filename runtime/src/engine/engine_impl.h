/* engine_impl.h — private to the engine folder; an include from outside
 * the engine folder is a review flag.
 *
 * Objects and who owns them:
 *   mxp_var        user-owned (new_var / delete_var); malloc'd on its own so
 *                  it outlives an engine (shutdown + recreate, fork).
 *   eng_opr        an operator: function, deduplicated var list, name.  A
 *                  "temporary" one is made per plain push and freed when that
 *                  push completes; a pre-created one (mxp_engine_op) is
 *                  reference counted (owner + one per in-flight push).
 *   eng_blk        one push of an operator: the atomic wait counter, priority,
 *                  the error it carries, the argument this run gets (the
 *                  opr's, or a per-push one with its release function).
 *                  Temporary oprs embed their block.
 *   eng_vblk       one pending (not yet triggered) use of a var by a block.
 *   err_rec        a shared, reference-counted error record; every var the
 *                  failing op wrote and every skipped dependant points at the
 *                  same record, so marking it raised raises it once.
 * eng_opr, eng_blk and eng_vblk come from object pools (pool.c): no malloc
 * per push on the hot path.
 *
 * Var state machine (var.c), all under the var's spinlock:
 *   nreads   triggered reads that have not completed
 *   writing  a triggered write has not completed
 *   queue    blocks waiting on this var, in push order
 *   invariant: queue non-empty and !writing  =>  queue head is a write
 *   append read : ready iff !writing && queue empty      (nreads++)
 *   append write: ready iff !writing && nreads==0 && queue empty (writing=1)
 *   complete read : nreads--; at 0 pop a head write and trigger it
 *   complete write: writing=0, version++, then pop the run of head reads and
 *                   trigger them; if none, pop a head write and trigger it.
 * "Trigger" decrements the block's wait counter outside the var lock; the
 * thread that brings it to 0 dispatches the block. */
#ifndef MXP_ENGINE_ENGINE_IMPL_H
#define MXP_ENGINE_ENGINE_IMPL_H

#include "engine.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* ------------------------------------------------------------ spinlock */
/* Test-and-test-and-set; held for a few dozen instructions only. */
typedef struct eng_spin { atomic_int v; } eng_spin;
void mxp__eng_spin_lock_slow(eng_spin *s);
static inline void eng_spin_lock(eng_spin *s) {
    if (!atomic_exchange_explicit(&s->v, 1, memory_order_acquire)) return;
    mxp__eng_spin_lock_slow(s);
}
static inline void eng_spin_unlock(eng_spin *s) {
    atomic_store_explicit(&s->v, 0, memory_order_release);
}
void mxp__eng_cpu_relax(void);

/* ------------------------------------------------------------ errors */
typedef struct err_rec {
    atomic_int refs;
    atomic_int raised;   /* 1 once returned by a wait */
    int status;
    char msg[];          /* "op 'NAME' failed: why" */
} err_rec;

err_rec *mxp__eng_err_new(int status, const char *op_name, const char *why);
void mxp__eng_err_ref(err_rec *e);
void mxp__eng_err_unref(err_rec *e);
/* Remember a fresh failure for wait_for_all (takes a reference). */
struct eng_engine;
void mxp__eng_err_global_add(struct eng_engine *e, err_rec *r);

/* ------------------------------------------------------------ objects */
enum { OPR_INLINE_VARS = 8, OPR_INLINE_NAME = 40 };

/* Internal kinds beyond mxp_fn_prop: run inline where they become ready. */
enum { ENG_KIND_USER = 0, ENG_KIND_DELETE_VAR = 1, ENG_KIND_WAIT = 2 };

typedef struct eng_opr eng_opr;
typedef struct eng_blk eng_blk;

struct eng_blk {
    atomic_int wait;     /* vars not yet granted + 1 push guard */
    int priority;
    eng_opr *opr;
    err_rec *err;        /* error this run carries (own or inherited) */
    eng_blk *next;       /* worker queue link */
    struct eng_lane *lane;   /* where it runs (threaded engine) */
    struct eng_engine *eng;
    uint64_t seq;        /* push order within a priority lane */
    atomic_int *naive_done;  /* naive engine: set when an async run completes */
    void *arg;           /* what the function gets: the opr's arg, or a push's own */
    mxp_engine_free_fn release; /* per-push arg's release (push_op_arg), or NULL */
    int64_t prof_ready;  /* profiler: when the wait counter reached 0 (ns), 0 when not profiling */
};

struct eng_opr {
    mxp_engine_sync_fn sync_fn;
    mxp_engine_async_fn async_fn;
    void *arg;
    mxp_engine_free_fn free_arg;
    mxp_var **vars;      /* [0,n_mutate) written, then n_const read; deduplicated */
    int n_mutate, n_const;
    mxp_device device;
    int prop;
    int kind;            /* ENG_KIND_* */
    bool temporary;      /* plain push: freed after its one run */
    bool handoff;        /* mxp__engine_push_handoff: runs where it becomes ready on a worker */
    char *name;          /* points at name_buf or heap */
    int lane_kind;       /* LANE_* */
    mxp_var *vars_buf[OPR_INLINE_VARS];
    char name_buf[OPR_INLINE_NAME];
    eng_blk blk;         /* the block of a temporary opr */
    /* Pre-created: owner + in-flight pushes.  On its own cache line: the
     * pusher and the workers write it on every push, while the fields above
     * are only read. */
    _Alignas(64) atomic_int refs;
    /* Pre-created, synchronous: how long its function ran lately, in
     * mxp__eng_ticks units (a running average, updated by every run;
     * ENG_RUN_EST_UNKNOWN before the first).  The pusher runs a block whose
     * op is measured tiny itself (threaded.c, mxp__eng_blk_decr_push). */
    _Atomic uint32_t run_est;
};
#define ENG_RUN_EST_UNKNOWN UINT32_MAX

typedef struct eng_vblk {
    struct eng_vblk *next;
    eng_blk *blk;
    bool write;
} eng_vblk;

struct mxp_var {
    eng_spin lock;
    int nreads;
    bool writing;
    eng_vblk *qhead, *qtail;
    _Atomic uint64_t version;       /* changed only under lock; read without it */
    _Atomic uint64_t writes_pushed; /* writes queued so far (autograd's in-place check); as version */
    _Atomic(err_rec *) err;  /* replaced only by a completing writer */
    _Atomic(mxp__var_write_hook *) write_hook; /* fired once by the next write pushed (engine.h) */
    uint64_t uid;            /* creation number, from 1 (mxp__engine_var_stamp) */
};

/* Next creation number (var.c): vars and mxp__engine_new_stamp share them. */
uint64_t mxp__eng_next_uid(void);

/* Before a push registers its writes: fire each written var's armed write
 * hook (one relaxed load per written var when none is armed).  The hook
 * pushes its own work first, so that work orders before this write. */
static inline void mxp__eng_fire_write_hooks(mxp_var *const *vars, int n_mutate) {
    for (int i = 0; i < n_mutate; i++) {
        if (__builtin_expect(atomic_load_explicit(&vars[i]->write_hook, memory_order_relaxed) == NULL, 1)) continue;
        mxp__var_write_hook *h = atomic_exchange_explicit(&vars[i]->write_hook, NULL, memory_order_acq_rel);
        if (h) h->fire(h);
    }
}

/* ------------------------------------------------------------ pools */
enum { POOL_OPR = 0, POOL_BLK = 1, POOL_VBLK = 2, POOL_COUNT = 3 };
typedef struct eng_pool {
    eng_spin lock;
    size_t size;
    int id;
    uint64_t gen;        /* engine generation: thread caches from an older one are dropped */
    void *free;          /* global free list */
    void *slabs;         /* every slab, freed at shutdown */
} eng_pool;
void mxp__eng_pool_init(eng_pool *p, int id, size_t size, uint64_t gen);
void mxp__eng_pool_fini(eng_pool *p);
void *mxp__eng_pool_get(eng_pool *p);   /* NULL on out of memory */
void mxp__eng_pool_put(eng_pool *p, void *obj);

/* ------------------------------------------------------------ lanes */
enum { LANE_NORMAL = 0, LANE_PRIO = 1, LANE_COPY = 2, LANE_COUNT = 3 };

typedef struct eng_cell {
    _Atomic uint64_t seq;
    eng_blk *blk;
} eng_cell;

typedef struct eng_lane {
    /* Read-only after creation. */
    int kind;                  /* LANE_* */
    bool fifo;
    bool counts_budget;        /* compute lanes hold a thread-budget slot while running */
    mxp_device dev;
    int n_workers;
    pthread_t *threads;
    int worker_base;           /* engine-wide index of worker 0, for mxp_run_ctx.worker */
    /* FIFO lanes: a bounded lock-free MPMC ring (Vyukov), with the push
     * index and the pop index on separate cache lines so the pusher and the
     * workers do not contend on one lock; when it is full, pushes spill to
     * a spinlocked overflow list (order between ready blocks is free).
     * The priority lane uses a spinlocked max-heap instead. */
    struct eng_cell *cells;
    uint64_t mask;
    _Alignas(64) _Atomic uint64_t ptail;  /* next slot to fill */
    _Alignas(64) _Atomic uint64_t phead;  /* next slot to take */
    _Alignas(64) eng_spin qlock;          /* overflow list and heap */
    atomic_int qsize;                     /* blocks in overflow or heap */
    eng_blk *ovf_head, *ovf_tail;
    eng_blk **heap;            /* priority lane: max-heap by priority, then push order */
    int heap_len, heap_cap;
    uint64_t seq;
    /* Sleeping. */
    _Alignas(64) atomic_int sleepers; /* workers blocked (or about to block) on cv */
    atomic_int spinners;       /* idle workers spinning on the queue: they take new work */
    atomic_int waking;         /* a signal is in flight: later pushes need not signal */
    int n_sleeping;            /* under mu: workers inside the wait loop */
    bool stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} eng_lane;

typedef struct eng_devpool {
    mxp_device dev;
    _Atomic(eng_lane *) lanes[LANE_COUNT]; /* created lazily under dev_mu */
    struct eng_devpool *next;
} eng_devpool;

/* ------------------------------------------------------------ engine */
enum { ENGINE_NAIVE = 0, ENGINE_THREADED = 1 };

typedef struct eng_engine {
    int type;
    uint64_t gen;
    int budget;
    eng_pool pools[POOL_COUNT];
    /* pushed - completed = in flight.  Two counters on separate lines: a
     * single pusher keeps `pushed` in its cache, completions bump the other. */
    _Alignas(64) _Atomic int64_t pushed;
    _Alignas(64) _Atomic int64_t completed;
    _Alignas(64) int pad_;
    pthread_mutex_t err_mu;    /* global error list for wait_for_all */
    err_rec **errs;
    int n_errs, cap_errs;
    pthread_mutex_t dev_mu;    /* device pool list, lane creation */
    _Atomic(eng_devpool *) devs;     /* prepend-only list */
    atomic_int n_workers_total;
    pthread_mutex_t naive_mu;  /* naive engine: one push at a time (recursive) */
    struct eng_engine *orphan_next; /* fork child: engines whose threads are gone */
} eng_engine;

/* The current engine, created on first use.  NULL only on out of memory. */
eng_engine *mxp__eng_get(void);
/* The current engine if one exists, without creating it. */
eng_engine *mxp__eng_peek(void);

/* var.c */
/* Count a write pushed on v; the caller holds v->lock (the only writers of
 * the counter hold it, so no locked add is needed). */
static inline void mxp__eng_var_count_write(mxp_var *v) {
    atomic_store_explicit(&v->writes_pushed, atomic_load_explicit(&v->writes_pushed, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}
void mxp__eng_var_append_read(mxp_var *v, eng_blk *b, eng_engine *e);
void mxp__eng_var_append_write(mxp_var *v, eng_blk *b, eng_engine *e);
void mxp__eng_var_complete_read(mxp_var *v, eng_engine *e);
void mxp__eng_var_complete_write(mxp_var *v, err_rec *err, eng_engine *e);
/* The error a var carries now, not yet raised, with a reference; NULL if none. */
err_rec *mxp__eng_var_error(mxp_var *v);
/* True when no write on v is queued or running. */
bool mxp__eng_var_write_idle(mxp_var *v);
void mxp__eng_var_free(mxp_var *v);

/* threaded.c */
void mxp__eng_blk_decr(eng_blk *b, eng_engine *e);   /* trigger: dispatch at 0 */
/* The pusher's own trigger (the push guard): may run the block inline on a backlog. */
void mxp__eng_blk_decr_push(eng_blk *b, eng_engine *e);
void mxp__eng_blk_run(eng_blk *b, eng_engine *e, const mxp_run_ctx *ctx); /* skip checks, run, complete */
void mxp__eng_blk_complete(eng_blk *b, eng_engine *e);
/* The lane for a device and kind, created (with its workers) on first use.
 * NULL with mxp_last_error() set when threads cannot be started. */
eng_lane *mxp__eng_lane_get(eng_engine *e, mxp_device dev, int kind);
void mxp__eng_threaded_stop(eng_engine *e);          /* join and free lanes */
void mxp__eng_threaded_orphan(eng_engine *e);        /* fork child: forget threads */
bool mxp__eng_on_worker(void);      /* calling thread is an engine worker */
bool mxp__eng_in_function(void);    /* calling thread is inside an engine function */
void mxp__eng_opr_release(eng_engine *e, eng_opr *o); /* temporary: back to pool; pre-created: unref */

/* Run a synchronous user function on the calling thread now, if every var
 * is free (mxp__engine_push_here).  vars: [0,n_mutate) written, then
 * n_const read, deduplicated, at most ENG_HERE_MAX_VARS.  false: nothing
 * happened (the caller pushes). */
enum { ENG_HERE_MAX_VARS = 16 };
bool mxp__eng_run_here(eng_engine *e, const mxp_engine_push_args *a, mxp_var **vars, int n_mutate, int n_const);
/* A pre-created op's push (push_op) run directly on the pushing thread when
 * the rules for running on the pusher allow it and every var is free; arg
 * and release as the push got them.  false: nothing happened. */
bool mxp__eng_push_op_here(eng_engine *e, eng_opr *o, void *arg, mxp_engine_free_fn release);

/* engine.c */
void mxp__eng_pending_done(eng_engine *e);
/* The fork gate around a push's registration (engine.c). */
void mxp__eng_gate_enter(void);
void mxp__eng_gate_leave(void);
/* Completion signalling lives outside the engine struct (static): a thread
 * that completes the last op may still touch it after a waiter saw
 * pending == 0 and shut the engine down. */
extern pthread_mutex_t mxp__eng_all_mu;
extern pthread_cond_t mxp__eng_all_cv;

#endif /* MXP_ENGINE_ENGINE_IMPL_H */
