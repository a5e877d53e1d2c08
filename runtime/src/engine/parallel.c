/* parallel.c — mxp__parallel_for, the thread-budget slots, helper threads,
 * the per-thread floating-point setup and the worker-init hook.
 *
 * Slots: `busy` counts threads actively computing under the budget.  Engine
 * compute workers take one while they run a function (threaded.c); a
 * parallel_for takes up to (chunks - 1) *free* slots for helpers and never
 * waits for more, so nesting cannot oversubscribe or deadlock.  The caller
 * always runs chunks itself; every thread takes chunks from its CPU's part
 * of the range first, then from the others' (pf_part), and a helper gives
 * its slot back when the range is exhausted.  A job that got
 * fewer helpers than it could use stays "wanting": a slot released while it
 * still has chunks left goes to it (grant_locked), so an op that started
 * while another held the other cores (a backward running beside its
 * forward) gets the cores back when that one ends.  A job lives on the
 * caller's stack: it is unlinked, and the caller waits until no helper is
 * inside it (polling briefly before it sleeps: wait_helpers), before
 * parallel_for returns.
 * Helpers (budget - 1 threads) start on the first parallel_for that gets a
 * slot; after a job they spin briefly (HELPER_SPIN) for the next one, then
 * sleep on a condition variable, so a job after a pause pays one wake-up
 * (~10 µs, more on a virtual machine): chunks should be coarse (grain).
 * Not here: the engine's queues and lanes. */
#include "engine.h"
#include "base/mutex.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

void mxp__eng_cpu_relax(void);

/* ------------------------------------------------------------ FTZ, init hook */

void mxp__parallel_set_ftz(void) {
#if defined(__SSE__)
    /* FTZ (bit 15) and DAZ (bit 6): denormals otherwise slow float math
     * several-fold once weights get small (perf-notes: MLP training). */
    _mm_setcsr(_mm_getcsr() | 0x8040);
#endif
}

static void (*_Atomic worker_init)(void);

void mxp__engine_set_worker_init(void (*fn)(void)) { atomic_store(&worker_init, fn); }

void mxp__engine_run_worker_init(void) {
    void (*fn)(void) = atomic_load(&worker_init);
    if (fn) fn();
}

/* ------------------------------------------------------------ slots */

static atomic_int busy;

int mxp__parallel_budget(void) { return mxp_num_threads(); }
int mxp__parallel_busy(void) { return atomic_load(&busy); }

int mxp__parallel_try_acquire(int k) {
    int budget = mxp_num_threads();
    int b = atomic_load_explicit(&busy, memory_order_relaxed);
    for (;;) {
        int take = budget - b < k ? budget - b : k;
        if (take <= 0) return 0;
        if (atomic_compare_exchange_weak(&busy, &b, b + take)) return take;
    }
}

void mxp__parallel_acquire_one(void) {
    for (int i = 0; !mxp__parallel_try_acquire(1); i++) {
        if (i % 64 == 63) sched_yield(); else mxp__eng_cpu_relax();
    }
}

static atomic_int pf_wanting; /* jobs on pf_jobs that could use more helpers */
static void grant_wanting(void);

void mxp__parallel_release(int k) {
    if (k <= 0) return;
    atomic_fetch_sub(&busy, k); /* seq_cst: pairs with a job's registration */
    if (atomic_load(&pf_wanting) > 0) grant_wanting();
}

/* ------------------------------------------------------------ jobs, helpers */

/* A job's chunks are split into PF_MAX_PARTS or fewer contiguous parts,
 * one per thread it can use; a thread takes chunks from the front of the
 * part of the CPU it runs on (home_part) and, once that is empty, steals
 * from the back of the others.  So the same CPU handles the same share of
 * every job over the same range (the first half of a buffer on one CPU,
 * the second on the other, op after op), and data one op wrote is read by
 * the next on the CPU whose caches hold it.  With one shared counter the
 * share each thread got was random per job, so about half of every op's
 * input came from the other core's cache: when the host put the machine's
 * two vCPUs far apart (a cache line between them took ~210 ns instead of
 * ~52: bench/train LeNet-bf16 ran at ~17-18k samples/s instead of ~26-27k,
 * per phase of seconds, in and across processes; docs/engine.md). */
#define PF_MAX_PARTS 8
typedef struct pf_part {
    _Alignas(64) atomic_ullong range; /* front chunk << 32 | back chunk (exclusive); nchunks <= 4 x budget fits */
} pf_part;

typedef struct pf_job {
    void (*fn)(void *, int64_t, int64_t);
    void *arg;
    int64_t n, chunk, nchunks;
    pf_part parts[PF_MAX_PARTS];
    int nparts;
    int tickets;    /* slots reserved for helpers not yet joined */
    atomic_int active; /* helpers inside the job (changed under pf_mu; the caller polls it, wait_helpers) */
    int want;       /* helpers it could use (chunks - 1, at most budget - 1) */
    atomic_int caller_cpu; /* CPU the caller runs on (-1: unknown) */
    bool wanting;   /* counted in pf_wanting */
    struct pf_job *link;
} pf_job;

static mxp__mutex pf_mu = MXP__MUTEX_INIT;
static pthread_cond_t pf_cv = PTHREAD_COND_INITIALIZER;      /* helpers: a job arrived */
static pthread_cond_t pf_done_cv = PTHREAD_COND_INITIALIZER; /* callers: a helper left */
static pf_job *pf_jobs;
static pthread_t *pf_helpers;
static int pf_n_helpers;
static bool pf_stop;
static pthread_t *pf_orphans; /* fork child: helper ids of the parent, kept reachable */

/* The caller publishes its CPU before each of its chunks; a helper checks
 * it before each of its own (move_off_cpu). */
static void move_off_cpu(int cpu);
/* The CPU of the latest job's caller (-1: none yet): a spinning helper
 * moves off it (helper_main). */
static atomic_int pf_last_caller_cpu = -1;

/* Take one chunk of part p: its first (owner) or its last (thief).
 * -1 when the part is empty. */
static int64_t take_chunk(pf_part *p, bool from_front) {
    unsigned long long v = atomic_load_explicit(&p->range, memory_order_relaxed);
    for (;;) {
        unsigned long long front = v >> 32, back = v & 0xffffffffu;
        if (front >= back) return -1;
        unsigned long long nv = from_front ? (front + 1) << 32 | back : front << 32 | (back - 1);
        if (atomic_compare_exchange_weak_explicit(&p->range, &v, nv, memory_order_relaxed, memory_order_relaxed))
            return (int64_t)(from_front ? front : back - 1);
    }
}

/* Chunks no thread has taken yet. */
static int64_t chunks_left(pf_job *j) {
    int64_t left = 0;
    for (int k = 0; k < j->nparts; k++) {
        unsigned long long v = atomic_load_explicit(&j->parts[k].range, memory_order_relaxed);
        if ((v >> 32) < (v & 0xffffffffu)) left += (int64_t)((v & 0xffffffffu) - (v >> 32));
    }
    return left;
}

/* The part of the CPU the thread runs on: fixed per CPU, whoever calls. */
static int home_part(const pf_job *j) {
    int cpu = sched_getcpu();
    return cpu < 0 ? 0 : cpu % j->nparts;
}

/* The caller stores its CPU only when it changed, so the line the helper
 * reads before each chunk stays shared in both caches. */
static void note_caller_cpu(atomic_int *where, int cpu) {
    if (atomic_load_explicit(where, memory_order_relaxed) != cpu) atomic_store_explicit(where, cpu, memory_order_relaxed);
}

static void run_chunks(pf_job *j, bool helper) {
    int home = -1, victim = 0;
    for (;;) {
        if (!helper) note_caller_cpu(&j->caller_cpu, sched_getcpu());
        else move_off_cpu(atomic_load_explicit(&j->caller_cpu, memory_order_relaxed));
        if (home < 0) home = victim = home_part(j);
        int64_t i = take_chunk(&j->parts[home], true);
        /* Home part empty: steal from the back of the others in turn. */
        while (i < 0) {
            if (++victim == j->nparts) victim = 0;
            if (victim == home) return;
            i = take_chunk(&j->parts[victim], false);
            if (i >= 0) victim--; /* the same part again next time */
        }
        int64_t b = i * j->chunk, e = b + j->chunk < j->n ? b + j->chunk : j->n;
        j->fn(j->arg, b, e);
    }
}

/* Tickets handed out and not yet taken by a helper (pf_mu changes it; read
 * without the lock by spinning helpers). */
static atomic_int pf_open;

/* A helper that found no job spins this many pauses, watching pf_open,
 * before it sleeps: consecutive jobs (the passes of one op, or the next op
 * a few tens of µs later) then cost no wake-up, which on a virtual machine
 * can take longer than a small job.  The spin never calls sched_yield: on
 * a machine loaded by other processes (a compiler on the other core), the
 * kernel's EEVDF scheduler answers a yield by pushing the helper's
 * deadline back a whole slice, so the helper got the CPU again only
 * ~0.85 ms later, after the next job had already run on its caller alone:
 * LeNet's conv1 forward (bench/conv layer a) took 0.094 ms in every run
 * of a process instead of 0.054 (the whole batch on one thread).  Side by
 * side at load average 4-5 (bench/train, 2 threads): LeNet 18.3-19.8k ->
 * 21.0-22.2k samples/s, the MLP 452-466k -> 498-533k. */
#define HELPER_SPIN 4000
/* Pauses between the spinning helper's checks of its CPU: a helper that
 * spins (without yielding) on the CPU of the thread that calls the next
 * job keeps that thread off its CPU, and wake-affine placement puts them
 * together whenever the other CPU is busy with another process; so every
 * HELPER_CPU_CHECK pauses the helper moves off the latest caller's CPU
 * (move_off_cpu: nothing unless co-located).  Layer (a) forward with one
 * busy loop beside the bench, 6 processes each: without the check 2 ran at
 * ~0.059 ms and 4 at ~0.20; with it 5 at 0.055-0.062 and 1 at 0.103. */
#define HELPER_CPU_CHECK 256

/* A helper running on its caller's CPU moves off it.  The scheduler's
 * wake-affine placement puts a woken helper next to its waker, and on a
 * 2-vCPU machine the pair then shared one CPU for tens of ms while the other
 * idled: over 12 short processes each, layer (e) gemm forward median
 * 11.7 -> 6.7 ms, (b) direct forward 1.14 -> 0.82 ms, (a) 0.200 -> 0.164 ms.
 * The move: the allowed set minus that CPU for a moment, then the full set
 * again, so the helper stays free to migrate.  Two syscalls, only when
 * co-located. */
static void move_off_cpu(int cpu) {
    if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getcpu() != cpu) return;
    cpu_set_t allowed, others;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || !CPU_ISSET(cpu, &allowed)) return;
    others = allowed;
    CPU_CLR(cpu, &others);
    if (CPU_COUNT(&others) == 0) return;
    if (sched_setaffinity(0, sizeof others, &others) == 0) sched_setaffinity(0, sizeof allowed, &allowed);
}

static void *helper_main(void *p) {
    (void)p;
    mxp__parallel_set_ftz();
    mxp__engine_run_worker_init();
    mxp__mutex_lock(&pf_mu);
    int spun = 0;
    for (;;) {
        pf_job *j = pf_jobs;
        while (j && j->tickets == 0) j = j->link;
        if (!j) {
            if (pf_stop) break;
            if (!spun) {
                spun = 1;
                mxp__mutex_unlock(&pf_mu);
                for (int i = 0; i < HELPER_SPIN && !atomic_load_explicit(&pf_open, memory_order_relaxed); i++) {
                    if (i % HELPER_CPU_CHECK == 0)
                        move_off_cpu(atomic_load_explicit(&pf_last_caller_cpu, memory_order_relaxed));
                    mxp__eng_cpu_relax();
                }
                mxp__mutex_lock(&pf_mu);
                continue;
            }
            mxp__mutex_cond_wait(&pf_cv, &pf_mu);
            spun = 0;
            continue;
        }
        spun = 0;
        atomic_fetch_sub(&pf_open, 1);
        j->tickets--;
        atomic_fetch_add(&j->active, 1);
        mxp__mutex_unlock(&pf_mu);
        run_chunks(j, true);
        mxp__parallel_release(1);
        mxp__mutex_lock(&pf_mu);
        if (atomic_fetch_sub(&j->active, 1) == 1) pthread_cond_broadcast(&pf_done_cv);
    }
    mxp__mutex_unlock(&pf_mu);
    return NULL;
}

/* Caller holds pf_mu.  Returns how many helpers exist. */
static int ensure_helpers(void) {
    MXP_ASSERT(mxp__mutex_held(&pf_mu));
    if (pf_helpers || pf_stop) return pf_n_helpers;
    int n = mxp_num_threads() - 1;
    if (n <= 0) return 0;
    pf_helpers = calloc((size_t)n, sizeof *pf_helpers);
    if (!pf_helpers) return 0;
    for (int i = 0; i < n; i++) {
        if (pthread_create(&pf_helpers[i], NULL, helper_main, NULL) != 0) {
            MXP_LOGW("engine", "parallel_for: started only %d of %d helper threads", i, n);
            break;
        }
        pf_n_helpers = i + 1;
    }
    return pf_n_helpers;
}

/* Caller holds pf_mu.  Hand free slots to jobs that want helpers and still
 * have chunks to give out; a job that got all it wants stops wanting. */
static void grant_locked(void) {
    MXP_ASSERT(mxp__mutex_held(&pf_mu));
    bool woke = false;
    for (pf_job *j = pf_jobs; j; j = j->link) {
        if (!j->wanting) continue;
        while (j->tickets + atomic_load(&j->active) < j->want &&
               chunks_left(j) > 1 &&
               mxp__parallel_try_acquire(1)) {
            j->tickets++;
            atomic_fetch_add(&pf_open, 1);
            woke = true;
        }
        if (j->tickets + atomic_load(&j->active) >= j->want) {
            j->wanting = false;
            atomic_fetch_sub(&pf_wanting, 1);
        }
    }
    if (woke) pthread_cond_broadcast(&pf_cv);
}

static void grant_wanting(void) {
    mxp__mutex_lock(&pf_mu);
    grant_locked();
    mxp__mutex_unlock(&pf_mu);
}

/* Caller holds pf_mu: take j off the job list (and the wanting count). */
static void unlink_job_locked(pf_job *j) {
    MXP_ASSERT(mxp__mutex_held(&pf_mu));
    pf_job **pp = &pf_jobs;
    while (*pp && *pp != j) pp = &(*pp)->link;
    if (*pp) *pp = j->link;
    if (j->wanting) {
        j->wanting = false;
        atomic_fetch_sub(&pf_wanting, 1);
    }
}

/* Caller holds pf_mu, j is off the list: wait until no helper is inside j.
 * A helper still inside is finishing its last chunk, usually a few µs from
 * done, so the caller polls for that first (without the lock, at most
 * CALLER_SPIN pauses, ~50 µs) and sleeps on pf_done_cv only after: a
 * condition-variable sleep and wake-up costs tens of µs on a virtual
 * machine, about what a whole chunk of a small op takes (MLP training, 2
 * threads: the momentum update of a 100k weight took 56 µs instead of
 * ~10 whenever a helper had joined).  The lock is taken again before
 * returning, so the helper's writes happen before the caller goes on. */
#define CALLER_SPIN 2000
static void wait_helpers(pf_job *j) {
    MXP_ASSERT(mxp__mutex_held(&pf_mu));
    if (atomic_load(&j->active) == 0) return;
    mxp__mutex_unlock(&pf_mu);
    for (int i = 0; i < CALLER_SPIN && atomic_load_explicit(&j->active, memory_order_relaxed) > 0; i++)
        mxp__eng_cpu_relax();
    mxp__mutex_lock(&pf_mu);
    while (atomic_load(&j->active) > 0) mxp__mutex_cond_wait(&pf_done_cv, &pf_mu);
}

int mxp__parallel_for(int64_t n, int64_t grain, void (*fn)(void *arg, int64_t begin, int64_t end),
                      void *arg) {
    if (!fn || n < 0) return mxp__error(MXP_EINVAL, "mxp__parallel_for: n = %lld, fn %s", (long long)n,
                                        fn ? "set" : "NULL");
    if (n == 0) return MXP_OK;
    if (grain < 1) grain = 1;
    int budget = mxp_num_threads();
    int64_t max_chunks = (n + grain - 1) / grain;
    if (budget <= 1 || max_chunks <= 1) {
        fn(arg, 0, n);
        return MXP_OK;
    }
    /* About 4 chunks per thread balances uneven chunks without much
     * counter traffic; never smaller than grain. */
    int64_t chunk = (n + 4 * (int64_t)budget - 1) / (4 * (int64_t)budget);
    if (chunk < grain) chunk = grain;
    int64_t nchunks = (n + chunk - 1) / chunk;
    int want = nchunks - 1 < budget - 1 ? (int)(nchunks - 1) : budget - 1;
    int k = mxp__parallel_try_acquire(want);
    pf_job j;
    memset(&j, 0, sizeof j);
    j.fn = fn;
    j.arg = arg;
    j.n = n;
    j.chunk = chunk;
    j.nchunks = nchunks;
    j.nparts = want + 1 < PF_MAX_PARTS ? want + 1 : PF_MAX_PARTS;
    for (int p = 0; p < j.nparts; p++) {
        unsigned long long front = (unsigned long long)(nchunks * p / j.nparts);
        unsigned long long back = (unsigned long long)(nchunks * (p + 1) / j.nparts);
        atomic_init(&j.parts[p].range, front << 32 | back);
    }
    atomic_init(&j.active, 0);
    atomic_init(&j.caller_cpu, sched_getcpu());
    note_caller_cpu(&pf_last_caller_cpu, atomic_load_explicit(&j.caller_cpu, memory_order_relaxed));
    mxp__mutex_lock(&pf_mu);
    int have = ensure_helpers();
    if (k > have) {
        atomic_fetch_sub(&busy, k - have); /* no helper to give them to */
        k = have;
    }
    j.want = want < have ? want : have;
    j.tickets = k;
    if (k > 0) atomic_fetch_add(&pf_open, k);
    if (j.want > 0) {
        j.link = pf_jobs;
        pf_jobs = &j;
        if (k < j.want) {
            j.wanting = true;
            atomic_fetch_add(&pf_wanting, 1); /* seq_cst: pairs with release */
            grant_locked(); /* a slot freed since try_acquire */
        }
        if (j.tickets == 1) pthread_cond_signal(&pf_cv);
        else if (j.tickets > 1) pthread_cond_broadcast(&pf_cv);
    }
    mxp__mutex_unlock(&pf_mu);
    run_chunks(&j, false);
    if (j.want > 0) {
        mxp__mutex_lock(&pf_mu);
        unlink_job_locked(&j);
        int unused = j.tickets; /* slots no helper came for */
        j.tickets = 0;
        if (unused > 0) {
            atomic_fetch_sub(&pf_open, unused);
            atomic_fetch_sub(&busy, unused);
            if (atomic_load(&pf_wanting) > 0) grant_locked();
        }
        wait_helpers(&j);
        mxp__mutex_unlock(&pf_mu);
    }
    return MXP_OK;
}

void mxp__parallel_shutdown(void) {
    mxp__mutex_lock(&pf_mu);
    pthread_t *h = pf_helpers;
    int n = pf_n_helpers;
    pf_stop = true;
    pthread_cond_broadcast(&pf_cv);
    mxp__mutex_unlock(&pf_mu);
    for (int i = 0; i < n; i++) pthread_join(h[i], NULL);
    mxp__mutex_lock(&pf_mu);
    free(h);
    pf_helpers = NULL;
    pf_n_helpers = 0;
    pf_stop = false;
    mxp__mutex_unlock(&pf_mu);
}

void mxp__parallel_before_fork(void) { mxp__mutex_lock(&pf_mu); }
void mxp__parallel_after_fork_parent(void) { mxp__mutex_unlock(&pf_mu); }

void mxp__parallel_after_fork_child(void) {
    /* The helpers do not exist here; forget them and their slots. */
    if (pf_helpers) {
        free(pf_orphans);
        pf_orphans = pf_helpers;
    }
    pf_helpers = NULL;
    pf_n_helpers = 0;
    pf_jobs = NULL;
    atomic_store(&busy, 0);
    atomic_store(&pf_wanting, 0);
    atomic_store(&pf_open, 0);
    pthread_cond_init(&pf_cv, NULL);
    pthread_cond_init(&pf_done_cv, NULL);
    mxp__mutex_unlock(&pf_mu);
}
