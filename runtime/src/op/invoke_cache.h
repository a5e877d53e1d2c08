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
 *   mxp__invoke_cache_put(c, &k, h, n, t) adds its own reference, freezes n
 *   mxp__invoke_cache_leave(c) */
#ifndef MXP_OP_INVOKE_CACHE_H
#define MXP_OP_INVOKE_CACHE_H

#include "op/op.h"

#include <string.h>

#define MXP__INVOKE_KEY_CAP 768

typedef struct mxp__invoke_key {
    size_t len;
    int ok; /* 0: did not fit (the call is not cached) */
    unsigned char buf[MXP__INVOKE_KEY_CAP];
} mxp__invoke_key;

/* Appending to a key (inline: a key is built on every invoke). */
static inline void mxp__invoke_key_init(mxp__invoke_key *k) {
    k->len = 0;
    k->ok = 1;
}
static inline void mxp__invoke_key_bytes(mxp__invoke_key *k, const void *p, size_t n) {
    if (!k->ok || n > sizeof k->buf - k->len) {
        k->ok = 0;
        return;
    }
    memcpy(k->buf + k->len, p, n);
    k->len += n;
}
/* With its NUL: "ab","c" and "a","bc" differ. */
static inline void mxp__invoke_key_str(mxp__invoke_key *k, const char *s) {
    mxp__invoke_key_bytes(k, s, strlen(s) + 1);
}
static inline void mxp__invoke_key_int(mxp__invoke_key *k, int64_t v) { mxp__invoke_key_bytes(k, &v, sizeof v); }
/* Slot number, dtype and shape of an array (its dims from
 * mxp__ndarray_sig). */
static inline void mxp__invoke_key_array(mxp__invoke_key *k, int slot, int32_t dtype, int32_t ndim,
                                         const int64_t *dims) {
    int32_t head[3] = {slot, dtype, ndim};
    mxp__invoke_key_bytes(k, head, sizeof head);
    if (ndim > 0) mxp__invoke_key_bytes(k, dims, (size_t)ndim * sizeof(int64_t));
}

/* What a hit may carry besides its node: a prepared forward (exec.h,
 * mxp__exec_forward_from) when the first call was a plain one — no given
 * outputs, aux states or req, no temp space or random numbers. */
struct mxp__exec;
typedef struct mxp__invoke_prep {
    const struct mxp__exec *tmpl; /* NULL: none */
    int tiny;
} mxp__invoke_prep;

typedef struct mxp__invoke_cache mxp__invoke_cache;
mxp__invoke_cache *mxp__invoke_cache_get(void);
void mxp__invoke_cache_enter(mxp__invoke_cache *c);
void mxp__invoke_cache_leave(mxp__invoke_cache *c);
/* prep (may be NULL) gets the entry's prepared forward, borrowed like the
 * node. */
mxp__node *mxp__invoke_cache_find(mxp__invoke_cache *c, const mxp__invoke_key *k, uint64_t *out_hash,
                                  mxp__invoke_prep *prep);
/* tmpl: a prepared forward for the entry (taken: freed when the entry
 * goes, or now when n is not cached), or NULL. */
void mxp__invoke_cache_put(mxp__invoke_cache *c, const mxp__invoke_key *k, uint64_t hash, mxp__node *n,
                           struct mxp__exec *tmpl, int tiny);
/* Calls of the calling thread that ran a prepared forward (invoke.c;
 * tests). */
unsigned long mxp__invoke_prepared_runs(void);
/* The calling thread's counters (tests): lookups that hit, that missed,
 * entries held now. */
void mxp__invoke_cache_stats(unsigned long *hits, unsigned long *misses, unsigned long *entries);

#endif /* MXP_OP_INVOKE_CACHE_H */
