/* rng.c — per-device Philox keys and counters; seeding and reservation.
 *
 * Each device that has drawn random numbers has a state {key, next block}.
 * mxp__rng_reserve advances `next` under a lock; that is the only shared
 * mutable state of the RNG, so the numbers an op gets are fixed by push
 * order alone.  Devices not yet seen get their state from the global seed
 * when first used (so mxp_random_seed before or after first use is the
 * same).  Keys: global seed s -> splitmix64(s ^ splitmix64(device code));
 * per-device seed s -> splitmix64(s).  Counters restart at 0 on seeding. */
#include "resource.h"
#include "base/mutex.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct rng_state {
    struct rng_state *next;
    mxp_device dev;
    uint32_t key[2];
    uint64_t next_block;
} rng_state;

static mxp__mutex rng_mu = MXP__MUTEX_INIT;
static rng_state *states;
static uint64_t global_seed;

static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static void set_key(rng_state *st, uint64_t k) {
    st->key[0] = (uint32_t)k;
    st->key[1] = (uint32_t)(k >> 32);
    st->next_block = 0;
}

static uint64_t global_key(uint64_t seed, mxp_device dev) {
    uint64_t code = ((uint64_t)(uint32_t)dev.type << 32) | (uint32_t)dev.id;
    return splitmix64(seed ^ splitmix64(code));
}

/* Find or create the state of a device.  rng_mu held.  NULL on OOM. */
static rng_state *state_locked(mxp_device dev) {
    MXP_ASSERT(mxp__mutex_held(&rng_mu));
    rng_state *st = states;
    while (st && !(st->dev.type == dev.type && st->dev.id == dev.id)) st = st->next;
    if (st) return st;
    st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->dev = dev;
    set_key(st, global_key(global_seed, dev));
    st->next = states;
    states = st;
    return st;
}

void mxp_random_seed(uint64_t seed) {
    mxp__mutex_lock(&rng_mu);
    global_seed = seed;
    for (rng_state *st = states; st; st = st->next) set_key(st, global_key(seed, st->dev));
    mxp__mutex_unlock(&rng_mu);
}

int mxp_random_seed_device(mxp_device dev, uint64_t seed) {
    mxp__mutex_lock(&rng_mu);
    rng_state *st = state_locked(dev);
    if (st) set_key(st, splitmix64(seed));
    mxp__mutex_unlock(&rng_mu);
    return st ? MXP_OK : mxp__error_oom("rng state");
}

int mxp__rng_reserve(mxp_device dev, uint64_t n_values, mxp_rng_stream *out) {
    if (!out) return mxp__error(MXP_EMISUSE, "mxp__rng_reserve: NULL out");
    memset(out, 0, sizeof *out);
    uint64_t blocks = n_values / 4 + (n_values % 4 != 0);
    mxp__mutex_lock(&rng_mu);
    rng_state *st = state_locked(dev);
    if (st) {
        out->key[0] = st->key[0];
        out->key[1] = st->key[1];
        out->counter = st->next_block;
        out->n_values = blocks * 4;
        st->next_block += blocks; /* 2^64 blocks: wraps only after 2^66 values */
    }
    mxp__mutex_unlock(&rng_mu);
    return st ? MXP_OK : mxp__error_oom("rng state");
}
