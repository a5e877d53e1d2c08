/* pool.c — fixed-size object pools for operators, blocks and var blocks, and
 * the spinlock they (and vars) use.
 *
 * Each thread keeps a small cache per pool; objects move between a thread
 * cache and the pool's global stack of full batches (BATCH objects chained
 * through ->next, batches chained through ->batch_next), so a push (one
 * thread allocating) and a completion (another thread freeing) take the pool
 * lock once per BATCH objects and move a batch in O(1) under it.  Memory comes in slabs that are only freed
 * when the engine is shut down; a thread cache carries the engine generation
 * and is dropped (never dereferenced) when it belongs to an older engine.
 * Not here: what the objects mean. */
#include "engine_impl.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

enum { BATCH = 32, CACHE_MAX = 2 * BATCH, SLAB_OBJS = 256 };

void mxp__eng_cpu_relax(void) {
#if defined(__SSE2__)
    _mm_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void mxp__eng_spin_lock_slow(eng_spin *s) {
    for (int i = 0;; i++) {
        while (atomic_load_explicit(&s->v, memory_order_relaxed)) {
            if (++i > 64) { sched_yield(); i = 0; } else mxp__eng_cpu_relax();
        }
        if (!atomic_exchange_explicit(&s->v, 1, memory_order_acquire)) return;
    }
}

typedef struct free_obj { struct free_obj *next, *batch_next; } free_obj;
typedef struct slab { struct slab *next; } slab;

typedef struct tl_cache {
    free_obj *head;
    int n;
    uint64_t gen;
} tl_cache;
static _Thread_local tl_cache caches[POOL_COUNT] __attribute__((tls_model("initial-exec")));

void mxp__eng_pool_init(eng_pool *p, int id, size_t size, uint64_t gen) {
    memset(p, 0, sizeof *p);
    p->id = id;
    /* Round up so every object stays pointer- and cache-friendly aligned. */
    p->size = (size + 63) & ~(size_t)63; /* whole cache lines: no false sharing */
    p->gen = gen;
}

void mxp__eng_pool_fini(eng_pool *p) {
    slab *s = p->slabs;
    while (s) {
        slab *n = s->next;
        free(s);
        s = n;
    }
    p->slabs = NULL;
    p->free = NULL;
}

static tl_cache *cache_of(eng_pool *p) {
    tl_cache *c = &caches[p->id];
    if (c->gen != p->gen) { c->head = NULL; c->n = 0; c->gen = p->gen; }
    return c;
}

void *mxp__eng_pool_get(eng_pool *p) {
    tl_cache *c = cache_of(p);
    if (!c->head) {
        eng_spin_lock(&p->lock);
        free_obj *batch = p->free;
        if (batch) {
            p->free = batch->batch_next;
            eng_spin_unlock(&p->lock);
            c->head = batch;
            c->n = BATCH;
        } else {
            eng_spin_unlock(&p->lock);
            /* Slab header padded to 64 bytes so objects stay aligned. */
            size_t hdr = 64;
            slab *sl = aligned_alloc(64, hdr + p->size * SLAB_OBJS);
            if (!sl) return NULL;
            char *base = (char *)sl + hdr;
            for (int i = 0; i < SLAB_OBJS; i++) {
                free_obj *o = (free_obj *)(base + (size_t)i * p->size);
                o->next = c->head;
                c->head = o;
            }
            c->n = SLAB_OBJS;
            eng_spin_lock(&p->lock);
            sl->next = p->slabs;
            p->slabs = sl;
            eng_spin_unlock(&p->lock);
        }
    }
    free_obj *o = c->head;
    c->head = o->next;
    c->n--;
    /* The next object was most likely freed on another core: start moving
     * its line here now, so the next get (and the caller's first write to
     * it) does not stall on the miss. */
    if (c->head) {
        /* c->head was prefetched by the previous get; reach one further so
         * each miss has two gets' time to resolve. */
        free_obj *n2 = c->head->next;
        const char *nx = (const char *)(n2 ? n2 : c->head);
        for (size_t off = 0; off < p->size && off < 512; off += 64) __builtin_prefetch(nx + off, 1, 3);
    }
    return o;
}

void mxp__eng_pool_put(eng_pool *p, void *obj) {
    tl_cache *c = cache_of(p);
    free_obj *o = obj;
    o->next = c->head;
    c->head = o;
    if (++c->n > CACHE_MAX) {
        /* Hand a full batch back so a thread that only frees (a worker)
         * feeds the threads that only allocate (the pusher). */
        free_obj *first = c->head, *last = first;
        for (int i = 1; i < BATCH; i++) last = last->next;
        c->head = last->next;
        c->n -= BATCH;
        last->next = NULL;
        eng_spin_lock(&p->lock);
        first->batch_next = p->free;
        p->free = first;
        eng_spin_unlock(&p->lock);
    }
}
