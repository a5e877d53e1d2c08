/* pool.c — fixed-size object pools for operators, blocks and var blocks, and
 * the spinlock they (and vars) use.
 *
 * Each thread keeps a small cache per pool; objects move between a thread
 * cache and the pool's global free list in batches, so a push (one thread
 * allocating) and a completion (another thread freeing) take the pool lock
 * about once per BATCH objects.  Memory comes in slabs that are only freed
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

void eng_cpu_relax(void) {
#if defined(__SSE2__)
    _mm_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void eng_spin_lock_slow(eng_spin *s) {
    for (int i = 0;; i++) {
        while (atomic_load_explicit(&s->v, memory_order_relaxed)) {
            if (++i > 64) { sched_yield(); i = 0; } else eng_cpu_relax();
        }
        if (!atomic_exchange_explicit(&s->v, 1, memory_order_acquire)) return;
    }
}

typedef struct free_obj { struct free_obj *next; } free_obj;
typedef struct slab { struct slab *next; } slab;

typedef struct tl_cache {
    free_obj *head;
    int n;
    uint64_t gen;
} tl_cache;
static _Thread_local tl_cache caches[POOL_COUNT];

void eng_pool_init(eng_pool *p, int id, size_t size, uint64_t gen) {
    memset(p, 0, sizeof *p);
    p->id = id;
    /* Round up so every object stays pointer- and cache-friendly aligned. */
    p->size = (size + 15) & ~(size_t)15;
    p->gen = gen;
}

void eng_pool_fini(eng_pool *p) {
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

void *eng_pool_get(eng_pool *p) {
    tl_cache *c = cache_of(p);
    if (!c->head) {
        eng_spin_lock(&p->lock);
        free_obj *f = p->free;
        int n = 0;
        while (f && n < BATCH) {
            free_obj *nx = f->next;
            f->next = c->head;
            c->head = f;
            f = nx;
            n++;
        }
        p->free = f;
        if (n == 0) {
            /* Slab header padded to 16 bytes so objects stay aligned. */
            size_t hdr = 16;
            slab *s = malloc(hdr + p->size * SLAB_OBJS);
            if (!s) { eng_spin_unlock(&p->lock); return NULL; }
            s->next = p->slabs;
            p->slabs = s;
            char *base = (char *)s + hdr;
            for (int i = 0; i < SLAB_OBJS; i++) {
                free_obj *o = (free_obj *)(base + (size_t)i * p->size);
                o->next = c->head;
                c->head = o;
            }
            n = SLAB_OBJS;
        }
        eng_spin_unlock(&p->lock);
        c->n = n;
    }
    free_obj *o = c->head;
    c->head = o->next;
    c->n--;
    return o;
}

void eng_pool_put(eng_pool *p, void *obj) {
    tl_cache *c = cache_of(p);
    free_obj *o = obj;
    o->next = c->head;
    c->head = o;
    if (++c->n > CACHE_MAX) {
        /* Give a batch back so a thread that only frees (a worker) feeds the
         * threads that only allocate (the pusher). */
        free_obj *first = c->head, *last = first;
        for (int i = 1; i < BATCH; i++) last = last->next;
        c->head = last->next;
        c->n -= BATCH;
        eng_spin_lock(&p->lock);
        last->next = p->free;
        p->free = first;
        eng_spin_unlock(&p->lock);
    }
}
