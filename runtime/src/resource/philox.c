/* philox.c — the Philox4x32-10 block function and the distribution
 * generators built on it.  Pure functions of (stream, index): no state, no
 * locks, safe from any thread.
 *
 * Philox4x32-10 as published (Salmon, Moraes, Dror, Shaw: "Parallel Random
 * Numbers: As Easy as 1, 2, 3", SC'11): 10 rounds of
 *   (hi0,lo0) = M0*c0, (hi1,lo1) = M1*c2,
 *   c = (hi1^c1^k0, lo1, hi0^c3^k1, lo0),
 * with the key bumped by the Weyl constants (W0, W1) between rounds.
 * Verified against Random123's tests/kat_vectors (tests/unit/resource).
 *
 * Mapping values to distributions:
 *   uniform f32: top 24 bits * 2^-24 in [0,1), scaled to [lo,hi);
 *   uniform f64: 27+26 bits (as genrand_res53) in [0,1);
 *   normal: Box–Muller on u1 in (0,1], u2 in [0,1);
 *   bernoulli: value < p * 2^32. */
#include "resource.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void mxp__philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        if (r) { k0 += PHILOX_W0; k1 += PHILOX_W1; }
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

uint64_t mxp__rng_values_needed(mxp_rng_kind kind, uint64_t n) {
    switch (kind) {
    case MXP_RNG_UNIFORM_F64: return 2 * n;
    case MXP_RNG_NORMAL_F32: return (n + 1) / 2 * 2;
    case MXP_RNG_NORMAL_F64: return (n + 1) / 2 * 4;
    default: return n;
    }
}

/* A cursor over a stream that caches the current block. */
typedef struct cursor {
    const mxp_rng_stream *s;
    uint64_t block; /* cached block index relative to the stream, or UINT64_MAX */
    uint32_t v[4];
} cursor;

static uint32_t value_at(cursor *c, uint64_t i) {
    uint64_t b = i >> 2;
    if (b != c->block) {
        uint64_t ctr64 = c->s->counter + b;
        uint32_t ctr[4] = {(uint32_t)ctr64, (uint32_t)(ctr64 >> 32), 0, 0};
        mxp__philox4x32_10(ctr, c->s->key, c->v);
        c->block = b;
    }
    return c->v[i & 3];
}

static int check(const mxp_rng_stream *s, mxp_rng_kind kind, uint64_t first, uint64_t n, const void *out) {
    if (!s || (!out && n)) return mxp__error(MXP_EMISUSE, "rng: NULL stream or output");
    uint64_t end = first + n;
    if (end < first || mxp__rng_values_needed(kind, end) > s->n_values)
        return mxp__error(MXP_EINVAL, "rng: outputs [%llu, %llu) need %llu values; the stream reserved %llu",
                          (unsigned long long)first, (unsigned long long)end,
                          (unsigned long long)mxp__rng_values_needed(kind, end),
                          (unsigned long long)s->n_values);
    return MXP_OK;
}

int mxp__rng_u32(const mxp_rng_stream *s, uint64_t first, uint64_t n, uint32_t *out) {
    int rc = check(s, MXP_RNG_U32, first, n, out);
    if (rc) return rc;
    cursor c = {s, UINT64_MAX, {0}};
    for (uint64_t k = 0; k < n; k++) out[k] = value_at(&c, first + k);
    return MXP_OK;
}

static inline float unit_f32(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

static inline double unit_f64(uint32_t a, uint32_t b) {
    return ((double)(a >> 5) * 67108864.0 + (double)(b >> 6)) * (1.0 / 9007199254740992.0);
}

int mxp__rng_uniform_f32(const mxp_rng_stream *s, uint64_t first, uint64_t n, float lo, float hi,
                         float *out) {
    int rc = check(s, MXP_RNG_UNIFORM_F32, first, n, out);
    if (rc) return rc;
    cursor c = {s, UINT64_MAX, {0}};
    float span = hi - lo;
    for (uint64_t k = 0; k < n; k++) {
        float r = lo + span * unit_f32(value_at(&c, first + k));
        out[k] = (r < hi || !(hi > lo)) ? r : nextafterf(hi, lo); /* rounding can reach hi */
    }
    return MXP_OK;
}

int mxp__rng_uniform_f64(const mxp_rng_stream *s, uint64_t first, uint64_t n, double lo, double hi,
                         double *out) {
    int rc = check(s, MXP_RNG_UNIFORM_F64, first, n, out);
    if (rc) return rc;
    cursor c = {s, UINT64_MAX, {0}};
    double span = hi - lo;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t i = 2 * (first + k);
        double r = lo + span * unit_f64(value_at(&c, i), value_at(&c, i + 1));
        out[k] = (r < hi || !(hi > lo)) ? r : nextafter(hi, lo);
    }
    return MXP_OK;
}

static const double TWO_PI = 6.283185307179586476925286766559;

int mxp__rng_normal_f32(const mxp_rng_stream *s, uint64_t first, uint64_t n, float mean, float std,
                        float *out) {
    int rc = check(s, MXP_RNG_NORMAL_F32, first, n, out);
    if (rc) return rc;
    cursor c = {s, UINT64_MAX, {0}};
    for (uint64_t k = 0; k < n; k++) {
        uint64_t j = (first + k) / 2;
        /* u1 in (0,1] so log(u1) is finite. */
        double u1 = ((double)value_at(&c, 2 * j) + 1.0) * (1.0 / 4294967296.0);
        double u2 = (double)value_at(&c, 2 * j + 1) * (1.0 / 4294967296.0);
        double r = sqrt(-2.0 * log(u1));
        double z = ((first + k) & 1) ? r * sin(TWO_PI * u2) : r * cos(TWO_PI * u2);
        out[k] = (float)(mean + std * z);
    }
    return MXP_OK;
}

int mxp__rng_normal_f64(const mxp_rng_stream *s, uint64_t first, uint64_t n, double mean, double std,
                        double *out) {
    int rc = check(s, MXP_RNG_NORMAL_F64, first, n, out);
    if (rc) return rc;
    cursor c = {s, UINT64_MAX, {0}};
    for (uint64_t k = 0; k < n; k++) {
        uint64_t j = (first + k) / 2;
        double u1 = 1.0 - unit_f64(value_at(&c, 4 * j), value_at(&c, 4 * j + 1)); /* (0,1] */
        double u2 = unit_f64(value_at(&c, 4 * j + 2), value_at(&c, 4 * j + 3));
        double r = sqrt(-2.0 * log(u1));
        double z = ((first + k) & 1) ? r * sin(TWO_PI * u2) : r * cos(TWO_PI * u2);
        out[k] = mean + std * z;
    }
    return MXP_OK;
}

int mxp__rng_bernoulli_f32(const mxp_rng_stream *s, uint64_t first, uint64_t n, double p, float *out) {
    int rc = check(s, MXP_RNG_BERNOULLI, first, n, out);
    if (rc) return rc;
    if (!(p >= 0.0 && p <= 1.0)) return mxp__error(MXP_EINVAL, "rng: bernoulli p=%g not in [0,1]", p);
    cursor c = {s, UINT64_MAX, {0}};
    double thr = p * 4294967296.0;
    for (uint64_t k = 0; k < n; k++) out[k] = (double)value_at(&c, first + k) < thr ? 1.0f : 0.0f;
    return MXP_OK;
}
