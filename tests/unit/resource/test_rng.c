/* test_rng.c — Philox4x32-10 known answers, stream reservation and the
 * distribution generators (moments, ranges, chunk independence).  No engine
 * needed; thread-count independence is in test_rng_engine.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "resource/resource.h"

static const mxp_device CPU0 = {MXP_DEV_CPU, 0};

/* Known-answer vectors from the Random123 distribution (D. E. Shaw
 * Research), file tests/kat_vectors, the three "philox4x32 10" lines:
 *   ctr[4] key[2] -> expected[4] (hex uint32). */
Test(rng, philox_known_answers) {
    static const uint32_t kat[3][10] = {
        {0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000,
         0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
         0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
         0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int t = 0; t < 3; t++) {
        uint32_t out[4];
        mxp__philox4x32_10(&kat[t][0], &kat[t][4], out);
        for (int i = 0; i < 4; i++)
            cr_assert_eq(out[i], kat[t][6 + i], "vector %d word %d: got %08x want %08x", t, i, out[i],
                         kat[t][6 + i]);
    }
}

Test(rng, reservation_is_sequential_and_block_aligned) {
    mxp_random_seed(42);
    mxp_rng_stream a, b, c;
    cr_assert_eq(mxp__rng_reserve(CPU0, 10, &a), MXP_OK);
    cr_assert_eq(mxp__rng_reserve(CPU0, 4, &b), MXP_OK);
    cr_assert_eq(mxp__rng_reserve(CPU0, 1, &c), MXP_OK);
    cr_assert_eq(a.counter, 0);
    cr_assert_eq(a.n_values, 12);
    cr_assert_eq(b.counter, 3);
    cr_assert_eq(c.counter, 4);
    cr_assert_eq(a.key[0], b.key[0]);
    /* A stream's values are exactly the Philox blocks of its range. */
    uint32_t v[4], ref[4];
    cr_assert_eq(mxp__rng_u32(&b, 0, 4, v), MXP_OK);
    uint32_t ctr[4] = {3, 0, 0, 0};
    mxp__philox4x32_10(ctr, b.key, ref);
    cr_assert_eq(memcmp(v, ref, sizeof v), 0);
    /* Asking beyond the reservation is refused. */
    uint32_t big[16];
    cr_assert_eq(mxp__rng_u32(&b, 2, 3, big), MXP_EINVAL);
    float f[8];
    cr_assert_eq(mxp__rng_uniform_f64(&c, 0, 3, 0, 1, (double *)f), MXP_EINVAL);
}

Test(rng, seeding_resets_and_distinguishes_devices) {
    mxp_device cpu1 = {MXP_DEV_CPU, 1};
    mxp_random_seed(7);
    mxp_rng_stream a0, a1, b0;
    mxp__rng_reserve(CPU0, 4, &a0);
    mxp__rng_reserve(cpu1, 4, &a1);
    cr_assert(a0.key[0] != a1.key[0] || a0.key[1] != a1.key[1], "devices share a key");
    mxp_random_seed(7);
    mxp__rng_reserve(CPU0, 4, &b0);
    cr_assert_eq(b0.counter, 0);
    cr_assert_eq(b0.key[0], a0.key[0]);
    cr_assert_eq(b0.key[1], a0.key[1]);
    mxp_random_seed(8);
    mxp__rng_reserve(CPU0, 4, &b0);
    cr_assert(b0.key[0] != a0.key[0] || b0.key[1] != a0.key[1]);
    /* Per-device seeding: same seed, same key on two devices. */
    mxp_random_seed_device(CPU0, 99);
    mxp_random_seed_device(cpu1, 99);
    mxp__rng_reserve(CPU0, 4, &a0);
    mxp__rng_reserve(cpu1, 4, &a1);
    cr_assert_eq(a0.key[0], a1.key[0]);
    cr_assert_eq(a0.counter, 0);
}

/* Generating a range in chunks gives the same numbers as in one go. */
Test(rng, chunks_match_whole) {
    enum { N = 1001 };
    mxp_rng_stream s;
    mxp__rng_reserve(CPU0, mxp__rng_values_needed(MXP_RNG_NORMAL_F64, N), &s);
    double whole[N], part[N];
    cr_assert_eq(mxp__rng_normal_f64(&s, 0, N, 0, 1, whole), MXP_OK);
    size_t at = 0, step = 3;
    while (at < N) {
        size_t n = at + step > N ? N - at : step;
        cr_assert_eq(mxp__rng_normal_f64(&s, at, n, 0, 1, part + at), MXP_OK);
        at += n;
        step = step * 2 + 1;
    }
    cr_assert_eq(memcmp(whole, part, sizeof whole), 0);
}

static void moments_f64(const double *x, size_t n, double *mean, double *var) {
    double m = 0, v = 0;
    for (size_t i = 0; i < n; i++) m += x[i];
    m /= (double)n;
    for (size_t i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
    *mean = m;
    *var = v / (double)(n - 1);
}

Test(rng, uniform_moments_and_range) {
    enum { N = 200000 };
    mxp_random_seed(1234);
    float *f = malloc(N * sizeof *f);
    double *d = malloc(N * sizeof *d);
    mxp_rng_stream s;
    mxp__rng_reserve(CPU0, mxp__rng_values_needed(MXP_RNG_UNIFORM_F32, N), &s);
    cr_assert_eq(mxp__rng_uniform_f32(&s, 0, N, -2.0f, 3.0f, f), MXP_OK);
    for (int i = 0; i < N; i++) {
        cr_assert(f[i] >= -2.0f && f[i] < 3.0f, "f[%d]=%g", i, f[i]);
        d[i] = f[i];
    }
    double m, v;
    moments_f64(d, N, &m, &v);
    /* U(a,b): mean (a+b)/2 = 0.5, var (b-a)^2/12 = 25/12.  Std error of the
     * mean is sqrt(25/12/N) ~ 0.0032; allow 5 sigma. */
    cr_assert(fabs(m - 0.5) < 0.017, "mean %g", m);
    cr_assert(fabs(v - 25.0 / 12.0) < 0.03, "var %g", v);
    mxp__rng_reserve(CPU0, mxp__rng_values_needed(MXP_RNG_UNIFORM_F64, N), &s);
    cr_assert_eq(mxp__rng_uniform_f64(&s, 0, N, 0.0, 1.0, d), MXP_OK);
    for (int i = 0; i < N; i++) cr_assert(d[i] >= 0.0 && d[i] < 1.0);
    moments_f64(d, N, &m, &v);
    cr_assert(fabs(m - 0.5) < 0.0033, "mean %g", m);
    cr_assert(fabs(v - 1.0 / 12.0) < 0.0015, "var %g", v);
    free(f);
    free(d);
}

Test(rng, normal_moments) {
    enum { N = 200000 };
    mxp_random_seed(5);
    float *f = malloc(N * sizeof *f);
    double *d = malloc(N * sizeof *d);
    mxp_rng_stream s;
    mxp__rng_reserve(CPU0, mxp__rng_values_needed(MXP_RNG_NORMAL_F32, N), &s);
    cr_assert_eq(mxp__rng_normal_f32(&s, 0, N, 1.5f, 2.0f, f), MXP_OK);
    for (int i = 0; i < N; i++) d[i] = f[i];
    double m, v;
    moments_f64(d, N, &m, &v);
    /* Std error of mean 2/sqrt(N) ~ 0.0045; of var ~ 4*sqrt(2/N) ~ 0.0126. */
    cr_assert(fabs(m - 1.5) < 0.025, "mean %g", m);
    cr_assert(fabs(v - 4.0) < 0.07, "var %g", v);
    /* Fraction within one sigma: 0.6827. */
    int in = 0;
    for (int i = 0; i < N; i++) in += fabs(d[i] - 1.5) < 2.0;
    cr_assert(fabs((double)in / N - 0.6827) < 0.006, "within 1 sigma %g", (double)in / N);
    mxp__rng_reserve(CPU0, mxp__rng_values_needed(MXP_RNG_NORMAL_F64, N), &s);
    cr_assert_eq(mxp__rng_normal_f64(&s, 0, N, 0.0, 1.0, d), MXP_OK);
    moments_f64(d, N, &m, &v);
    cr_assert(fabs(m) < 0.012, "mean %g", m);
    cr_assert(fabs(v - 1.0) < 0.018, "var %g", v);
    free(f);
    free(d);
}

Test(rng, bernoulli_rate) {
    enum { N = 100000 };
    float *f = malloc(N * sizeof *f);
    mxp_rng_stream s;
    mxp__rng_reserve(CPU0, N, &s);
    cr_assert_eq(mxp__rng_bernoulli_f32(&s, 0, N, 0.3, f), MXP_OK);
    double ones = 0;
    for (int i = 0; i < N; i++) {
        cr_assert(f[i] == 0.0f || f[i] == 1.0f);
        ones += f[i];
    }
    /* sd of the rate: sqrt(.21/N) ~ 0.00145 */
    cr_assert(fabs(ones / N - 0.3) < 0.0075, "rate %g", ones / N);
    cr_assert_eq(mxp__rng_bernoulli_f32(&s, 0, 1, 1.5, f), MXP_EINVAL);
    free(f);
}
