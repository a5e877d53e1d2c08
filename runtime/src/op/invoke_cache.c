/* invoke_cache.c — the per-thread cache of prepared nodes behind
 * mxp_invoke: a call whose signature was seen before reuses the node (and
 * the implementation instance it bound) instead of finding the op, parsing
 * its kwargs, listing its names, inferring and selecting again.
 *
 * Key: the bytes of everything that decides the node and its instance —
 * the op name as given, the kwargs in order, the run device and training
 * flag, each input's dtype and shape, each given output's and aux state's
 * slot, dtype and shape (mxp__invoke_key_*).  A call whose key does not
 * fit the key buffer, or that has NULL / none arrays, is not cached (the
 * uncached path reports the errors).  The table maps a 64-bit hash of the
 * key to entries holding a copy of the key (compared in full) and a
 * reference on a frozen node (op.h): a node's signature never changes, so
 * its instance is found by bind at once and nothing is re-selected.
 *
 * Invalidation: every entry belongs to one registry generation.  A lookup
 * that sees mxp_registry_generation() moved (a policy set with
 * mxp_op_set_impl, a pack loaded or reloaded) drops the whole table first.
 * Cached nodes pin packs through their instances, so the cache is also a
 * holder (plugin.h): a reload releases it while its thread is idle, and
 * the thread releases it itself at its next call when a reload waits.
 *
 * Prepared forward: an entry whose first call was plain (no given outputs,
 * aux states or req; no temp space, random numbers or mutated inputs: op/
 * exec.h) also keeps that call's exec record as a template, and a hit
 * pushes a copy of it with the new arrays' data and vars (invoke.c), so a
 * repeated small op skips the checks, views and var lists the first call
 * built.  The template holds a reference on the node's instance; a frozen
 * node's instance never changes, and invoke.c checks it still is the
 * node's (mxp__node_runs_on) before using it.
 *
 * What is not cached: nodes whose instance has impl state (a pack may rely
 * on two forwards of one state never overlapping; two calls of one cached
 * node with different outputs could), calls with oversized keys.
 *
 * Threads: one cache per thread (thread-local), created at its first
 * invoke and freed at thread exit; its mutex (the holder's) is held by its
 * own thread during each call and try-locked by a reloading thread.
 * MXP_INVOKE_CACHE=0 turns caching off (every call builds a node). */
#include "op/invoke_cache.h"

#include "base/env.h"
#include "op/exec.h"
#include "plugin/plugin.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 256 /* power of two */
#define PROBE 8   /* slots looked at per key: a miss evicts the oldest */

typedef struct entry {
    uint64_t hash;
    uint64_t used;          /* tick of the last hit (LRU within a probe)   */
    size_t len;
    unsigned char *key;     /* NULL: empty slot                            */
    mxp__node *node;        /* one reference                               */
    mxp__exec *tmpl;        /* prepared forward (owned), or NULL           */
    int tiny;
} entry;

struct mxp__invoke_cache {
    mxp__holder holder;
    uint64_t generation;    /* of every entry                              */
    uint64_t tick;
    unsigned long hits, misses, n_entries;
    entry slots[SLOTS];
};

static pthread_key_t g_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_key_ok, g_enabled;
static _Thread_local mxp__invoke_cache *tl_cache;

/* ------------------------------------------------------------ keys */
/* 64-bit multiply-xorshift over 8-byte words (the tail zero-padded). */
static uint64_t key_hash(const unsigned char *p, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    if (i < n) {
        uint64_t w = 0;
        memcpy(&w, p + i, n - i);
        h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    }
    h ^= h >> 29;
    return h;
}

/* ------------------------------------------------------------ table */
static void entry_drop(mxp__invoke_cache *c, entry *e) {
    if (!e->key) return;
    free(e->key);
    mxp__exec_free(e->tmpl);
    mxp__node_free(e->node);
    memset(e, 0, sizeof *e);
    c->n_entries--;
}

static void flush(mxp__invoke_cache *c) {
    for (int i = 0; i < SLOTS && c->n_entries; i++) entry_drop(c, &c->slots[i]);
}

/* holder release: runs on the owner's thread at a call boundary, or on a
 * reloading thread while the owner is idle (the holder's mutex held). */
static void cache_release(void *owner) { flush(owner); }

static void cache_destroy(void *p) {
    mxp__invoke_cache *c = p;
    if (!c) return;
    mxp__holder_unregister(&c->holder);
    flush(c);
    free(c);
    tl_cache = NULL; /* destructors run on the exiting thread itself */
}

static void key_once(void) {
    g_key_ok = pthread_key_create(&g_key, cache_destroy) == 0;
    g_enabled = mxp__env_bool("MXP_INVOKE_CACHE", 1);
}

mxp__invoke_cache *mxp__invoke_cache_get(void) {
    mxp__invoke_cache *c = tl_cache;
    if (c) return c;
    pthread_once(&g_once, key_once);
    if (!g_key_ok || !g_enabled) return NULL;
    c = calloc(1, sizeof *c);
    if (!c) return NULL; /* uncached calls still work */
    if (pthread_setspecific(g_key, c)) {
        free(c);
        return NULL;
    }
    mxp__holder_register(&c->holder, cache_release, c);
    c->generation = mxp_registry_generation();
    return tl_cache = c;
}

void mxp__invoke_cache_enter(mxp__invoke_cache *c) { mxp__holder_enter(&c->holder, 1); }
void mxp__invoke_cache_leave(mxp__invoke_cache *c) { mxp__holder_leave(&c->holder, 0); }

mxp__node *mxp__invoke_cache_find(mxp__invoke_cache *c, const mxp__invoke_key *k, uint64_t *out_hash,
                                  mxp__invoke_prep *prep) {
    *out_hash = 0;
    if (prep) *prep = (mxp__invoke_prep){0};
    if (!c || !k->ok) return NULL;
    uint64_t g = mxp_registry_generation();
    if (g != c->generation) {
        flush(c);
        c->generation = g;
    }
    uint64_t h = key_hash(k->buf, k->len);
    *out_hash = h;
    for (int p = 0; p < PROBE; p++) {
        entry *e = &c->slots[(h + (uint64_t)p) & (SLOTS - 1)];
        if (e->key && e->hash == h && e->len == k->len && !memcmp(e->key, k->buf, k->len)) {
            e->used = ++c->tick;
            c->hits++;
            if (prep) *prep = (mxp__invoke_prep){e->tmpl, e->tiny};
            return e->node;
        }
    }
    c->misses++;
    return NULL;
}

void mxp__invoke_cache_put(mxp__invoke_cache *c, const mxp__invoke_key *k, uint64_t hash, mxp__node *n,
                           mxp__exec *tmpl, int tiny) {
    /* A node bound in an older generation is stale already; an instance
     * with state must not be shared by calls that may overlap. */
    const mxp__inst *in = n ? mxp__node_current(n) : NULL;
    if (!c || !k->ok || !n || mxp__node_generation(n) != mxp_registry_generation() || !in || in->state ||
        (tmpl && tmpl->inst != in)) {
        mxp__exec_free(tmpl);
        return;
    }
    if (mxp__node_generation(n) != c->generation) {
        flush(c);
        c->generation = mxp__node_generation(n);
    }
    entry *victim = NULL;
    for (int p = 0; p < PROBE; p++) {
        entry *e = &c->slots[(hash + (uint64_t)p) & (SLOTS - 1)];
        if (!e->key) {
            victim = e;
            break;
        }
        if (!victim || e->used < victim->used) victim = e;
    }
    unsigned char *copy = malloc(k->len ? k->len : 1);
    if (!copy) { /* not cached: nothing else changes */
        mxp__exec_free(tmpl);
        return;
    }
    memcpy(copy, k->buf, k->len);
    entry_drop(c, victim);
    mxp__node_freeze(n);
    victim->hash = hash;
    victim->used = ++c->tick;
    victim->len = k->len;
    victim->key = copy;
    victim->node = mxp__node_retain(n);
    victim->tmpl = tmpl;
    victim->tiny = tiny;
    c->n_entries++;
}

void mxp__invoke_cache_stats(unsigned long *hits, unsigned long *misses, unsigned long *entries) {
    mxp__invoke_cache *c = tl_cache;
    *hits = c ? c->hits : 0;
    *misses = c ? c->misses : 0;
    *entries = c ? c->n_entries : 0;
}
