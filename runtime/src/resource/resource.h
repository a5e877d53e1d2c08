/* resource/resource.h — per-device resources ops request at push time:
 * random number streams (Philox4x32-10) and temporary workspace.
 *
 * RNG.  mxp__rng_reserve(dev, n, &s) is called by whoever PUSHES an op (the
 * op runtime), on the pushing thread, in push order.  It hands out the next
 * n 32-bit values of the device's Philox sequence as {key, counter}.  The
 * op, whenever and on whatever thread it runs, generates exactly those
 * values with the mxp__rng_* generators below.  Value i of a stream is lane
 * i%4 of Philox(counter + i/4, key), so any sub-range can be generated
 * independently (parallel_for chunks need no shared state) and results do
 * not depend on scheduling.  No engine var is needed for the RNG.
 *
 * Temp space.  mxp__temp_space_acquire(dev, bytes, &t) picks one of a few
 * per-device buffers round-robin (MXP_CPU_TEMP_COPY, default 4, on CPU
 * types; MXP_GPU_TEMP_COPY, default 1, elsewhere), grows it if needed, and
 * returns {ptr, size, var}.  The op MUST list t.var among its mutate vars:
 * that serializes the ops sharing a buffer.  A buffer that grows is freed
 * by an engine op on its var, i.e. after every earlier user has run. */
#ifndef MXP_RESOURCE_RESOURCE_H
#define MXP_RESOURCE_RESOURCE_H

#include "base/base.h"

/* ------------------------------------------------------------ Philox */

/* One Philox4x32-10 block: out = Philox(ctr, key).  Known-answer tested. */
void mxp__philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* A reserved range of a device's random sequence. */
typedef struct mxp_rng_stream {
    uint32_t key[2];
    uint64_t counter;  /* first Philox block of the range               */
    uint64_t n_values; /* 32-bit values reserved (a multiple of 4)      */
} mxp_rng_stream;

/* What a generator consumes per output, so callers reserve the right amount. */
typedef enum mxp_rng_kind {
    MXP_RNG_U32 = 0,         /* 1 value per output                      */
    MXP_RNG_UNIFORM_F32 = 1, /* 1 value per output                      */
    MXP_RNG_UNIFORM_F64 = 2, /* 2 values per output (53-bit mantissa)   */
    MXP_RNG_NORMAL_F32 = 3,  /* 2 values per pair of outputs            */
    MXP_RNG_NORMAL_F64 = 4,  /* 4 values per pair of outputs            */
    MXP_RNG_BERNOULLI = 5    /* 1 value per output                      */
} mxp_rng_kind;

/* Number of 32-bit values to reserve for n outputs of a kind. */
uint64_t mxp__rng_values_needed(mxp_rng_kind kind, uint64_t n);

/* Reserve the next n_values values of dev's sequence (rounded up to whole
 * blocks).  Call at push time, in push order.  out cleared on entry.
 * Returns MXP_OK, MXP_EMISUSE (out NULL). Thread-safe. */
int mxp__rng_reserve(mxp_device dev, uint64_t n_values, mxp_rng_stream *out);

/* Generators: write outputs [first, first+n) of the stream to out[0..n).
 * Output k depends only on (stream, k), so chunks may be generated in any
 * order on any thread.  Return MXP_EINVAL when the stream's reservation is
 * too small for first+n outputs of that kind (nothing written then). */
int mxp__rng_u32(const mxp_rng_stream *s, uint64_t first, uint64_t n, uint32_t *out);
int mxp__rng_uniform_f32(const mxp_rng_stream *s, uint64_t first, uint64_t n, float lo, float hi,
                         float *out);
int mxp__rng_uniform_f64(const mxp_rng_stream *s, uint64_t first, uint64_t n, double lo, double hi,
                         double *out);
/* Box–Muller: outputs 2j and 2j+1 come from one pair of uniforms. */
int mxp__rng_normal_f32(const mxp_rng_stream *s, uint64_t first, uint64_t n, float mean, float std,
                        float *out);
int mxp__rng_normal_f64(const mxp_rng_stream *s, uint64_t first, uint64_t n, double mean, double std,
                        double *out);
/* out[k] = 1.0f with probability p, else 0.0f. */
int mxp__rng_bernoulli_f32(const mxp_rng_stream *s, uint64_t first, uint64_t n, double p, float *out);

/* ------------------------------------------------------------ temp space */

typedef struct mxp_temp_space {
    void *ptr;    /* NULL when bytes == 0                                */
    size_t size;  /* >= requested                                        */
    mxp_var *var; /* add to the op's mutate vars                         */
} mxp_temp_space;

/* Pick a workspace copy for dev (round-robin), grown to >= bytes.
 * out cleared on entry.  Returns MXP_OK, MXP_EINVAL (unknown device),
 * MXP_ENOMEM.  Thread-safe; call at push time. */
int mxp__temp_space_acquire(mxp_device dev, size_t bytes, mxp_temp_space *out);
/* The same copy as an earlier acquire that returned `var` (a pre-created
 * engine op lists that var once, at creation), grown to >= bytes; the
 * pointer may differ from last time (growth).  MXP_ENOENT when no copy has
 * that var any more (after release_all). */
int mxp__temp_space_acquire_same(mxp_device dev, size_t bytes, const mxp_var *var, mxp_temp_space *out);

/* Free every workspace (through the engine, after their users) and forget
 * them.  For shutdown and tests; no acquire may run concurrently. */
void mxp__temp_space_release_all(void);

#endif /* MXP_RESOURCE_RESOURCE_H */
