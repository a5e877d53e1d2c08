/* op/invoke_cache.h — private to the op module: the per-thread cache of
 * prepared nodes that mxp_invoke consults (invoke_cache.c says what is
 * keyed, when entries are dropped and what is never cached).
 *
 * Use, in one invoke on one thread:
 *   c = mxp__invoke_cache_get()           NULL: caching off or no memory
 *   mxp__invoke_cache_enter(c)            the call's holder + pin scope
 *   build a key (mxp__invoke_key_*)       everything that decides the node
 *   n = mxp__invoke_cache_find(c, &k, &h) borrowed; valid until leave
 *   ... on a miss, create + infer + forward a node, then
 *   mxp__invoke_cache_put(c, &k, h, n)    adds its own reference, freezes n
 *   mxp__invoke_cache_leave(c) */
#ifndef MXP_OP_INVOKE_CACHE_H
#define MXP_OP_INVOKE_CACHE_H

#include "op/op.h"

#define MXP__INVOKE_KEY_CAP 768

typedef struct mxp__invoke_key {
    size_t len;
    int ok; /* 0: did not fit (the call is not cached) */
    unsigned char buf[MXP__INVOKE_KEY_CAP];
} mxp__invoke_key;

void mxp__invoke_key_init(mxp__invoke_key *k);
void mxp__invoke_key_bytes(mxp__invoke_key *k, const void *p, size_t n);
void mxp__invoke_key_str(mxp__invoke_key *k, const char *s);
void mxp__invoke_key_int(mxp__invoke_key *k, int64_t v);
/* Slot number, dtype and shape of a (non-NULL, not none) array. */
void mxp__invoke_key_array(mxp__invoke_key *k, int slot, const mxp_ndarray *a);

typedef struct mxp__invoke_cache mxp__invoke_cache;
mxp__invoke_cache *mxp__invoke_cache_get(void);
void mxp__invoke_cache_enter(mxp__invoke_cache *c);
void mxp__invoke_cache_leave(mxp__invoke_cache *c);
mxp__node *mxp__invoke_cache_find(mxp__invoke_cache *c, const mxp__invoke_key *k, uint64_t *out_hash);
void mxp__invoke_cache_put(mxp__invoke_cache *c, const mxp__invoke_key *k, uint64_t hash, mxp__node *n);
/* The calling thread's counters (tests): lookups that hit, that missed,
 * entries held now. */
void mxp__invoke_cache_stats(unsigned long *hits, unsigned long *misses, unsigned long *entries);

#endif /* MXP_OP_INVOKE_CACHE_H */
