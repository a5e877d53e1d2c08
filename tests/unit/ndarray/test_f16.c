/* test_f16.c — float16 as a runtime dtype, against numpy: the Cast op
 * (ops-basic) float16 -> float32/float64 for every one of the 65536 half
 * patterns, float32 -> float16 for every half value, every midpoint
 * between neighbours and the float32 values either side of it, float64 ->
 * float16 rounded once (midpoints plus or minus far less than a float32
 * ulp), subnormals, overflow to infinity, NaN; amp_cast to float16; and
 * a compute op refusing float16 by name; a .params file written by numpy (tests/data/ndarray/gen_f16_numpy.py,
 * type flag 2) loaded, checked and saved back byte for byte.
 *
 * Each point set is checked value by value against round-to-nearest-even
 * computed here from the neighbours (for a readable failure), and its
 * results hashed (FNV-1a-64) and compared with numpy's hash of the same
 * enumeration in f16_numpy.txt, so the whole sweep is bit-exact with
 * numpy. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mxplug.h>

#define DATA MXP_SOURCE_DIR "/tests/data/ndarray/"

static const mxp_device cpu = {MXP_DEV_CPU, 0};

static uint32_t u_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* The value of half pattern h from its fields (0x7c00 read as 65536, where
 * an unbounded exponent would put the next value; NaN patterns unused). */
static double half_value(uint16_t h) {
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? 65536.0 : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}
static int half_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }

static uint64_t fnv_add(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001b3ull; }
    return h;
}
#define FNV0 0xcbf29ce484222325ull

/* numpy's hash and count for `key` from f16_numpy.txt. */
static uint64_t numpy_hash(const char *key, long *count) {
    FILE *f = fopen(DATA "f16_numpy.txt", "r");
    cr_assert(f, "open f16_numpy.txt");
    char line[256], k[32];
    unsigned long long h = 0;
    long n = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%31s %ld %llx", k, &n, &h) == 3 && !strcmp(k, key)) break;
        else n = -1;
    fclose(f);
    cr_assert_geq(n, 0, "%s missing from f16_numpy.txt", key);
    *count = n;
    return h;
}

static mxp_ndarray *array_of(const void *data, int64_t n, int dtype) {
    mxp_ndarray *a = NULL;
    cr_assert_eq(mxp_ndarray_create(&n, 1, dtype, cpu, &a), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_ndarray_sync_copy_from(a, data, (size_t)n * mxp_dtype_size(dtype)), MXP_OK);
    return a;
}
static mxp_ndarray *run_cast(const char *op, mxp_ndarray *in, const char *dtype) {
    mxp_ndarray *out = NULL;
    int n_out = 1;
    const char *k = "dtype";
    cr_assert_eq(mxp_invoke(op, 1, &in, &n_out, &out, 1, &k, &dtype), MXP_OK, "%s: %s", op, mxp_last_error());
    cr_assert_eq(mxp_ndarray_wait_to_read(out), MXP_OK);
    return out;
}

Test(f16, decode_every_half_like_numpy) {
    uint16_t h[65536];
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    mxp_ndarray *a = array_of(h, 65536, MXP_DTYPE_F16);
    mxp_ndarray *b = run_cast("Cast", a, "float32"), *c = run_cast("Cast", a, "float64");
    float *f = malloc(65536 * sizeof *f);
    double *d = malloc(65536 * sizeof *d);
    cr_assert_eq(mxp_ndarray_sync_copy_to(b, f, 65536 * sizeof *f), MXP_OK);
    cr_assert_eq(mxp_ndarray_sync_copy_to(c, d, 65536 * sizeof *d), MXP_OK);
    uint64_t hash = FNV0;
    long n = 0;
    for (int i = 0; i < 65536; i++) {
        if (half_is_nan(h[i])) {
            cr_assert(isnan(f[i]) && isnan(d[i]), "0x%04x is NaN, decoded %g / %g", h[i], f[i], d[i]);
            cr_assert_eq(signbit(f[i]) != 0, (h[i] >> 15) != 0, "0x%04x lost its sign", h[i]);
            continue;
        }
        double want = (h[i] & 0x7fff) == 0x7c00 ? ((h[i] & 0x8000) ? -INFINITY : INFINITY) : half_value(h[i]);
        cr_assert(f[i] == want && d[i] == want && !!signbit(f[i]) == !!signbit(want) && !!signbit(d[i]) == !!signbit(want),
                  "0x%04x: float32 %.9g float64 %.17g, expected %.17g", h[i], f[i], d[i], want);
        uint32_t u = u_of(f[i]);
        hash = fnv_add(hash, &u, 4);
        n++;
    }
    long np_n;
    uint64_t np_h = numpy_hash("decode", &np_n);
    cr_assert_eq(n, np_n);
    cr_assert_eq(hash, np_h, "float16 -> float32 of all halves differs from numpy's (hash %016llx vs %016llx)",
                 (unsigned long long)hash, (unsigned long long)np_h);
    mxp_ndarray_release(a); mxp_ndarray_release(b); mxp_ndarray_release(c);
    free(f); free(d);
}

/* Round-to-nearest-even of |v| between halves h and h+1 (positive). */
static uint16_t nearest(double v, uint16_t h) {
    double lo = half_value(h), hi = half_value((uint16_t)(h + 1));
    if (v - lo < hi - v) return h;
    if (hi - v < v - lo) return (uint16_t)(h + 1);
    return (h & 1) ? (uint16_t)(h + 1) : h;
}

Test(f16, encode_float32_sweep_like_numpy) {
    long n = 0x7c00L * 8;
    float *v = malloc((size_t)n * sizeof *v);
    uint16_t *want = malloc((size_t)n * sizeof *want);
    long k = 0;
    for (uint16_t h = 0; h < 0x7c00; h++) {
        double lo = half_value(h), m = (lo + half_value((uint16_t)(h + 1))) / 2;
        float four[4] = {(float)lo, (float)m, nextafterf((float)m, -INFINITY), nextafterf((float)m, INFINITY)};
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < 4; i++) {
                v[k] = s ? -four[i] : four[i];
                want[k] = (uint16_t)((s ? 0x8000 : 0) | (i == 0 ? h : nearest(four[i], h)));
                k++;
            }
    }
    mxp_ndarray *a = array_of(v, n, MXP_DTYPE_F32), *b = run_cast("Cast", a, "float16");
    cr_assert_eq(mxp_ndarray_dtype(b), MXP_DTYPE_F16);
    uint16_t *got = malloc((size_t)n * sizeof *got);
    cr_assert_eq(mxp_ndarray_sync_copy_to(b, got, (size_t)n * 2), MXP_OK);
    uint64_t hash = FNV0;
    for (long i = 0; i < n; i++) {
        cr_assert_eq(got[i], want[i], "%.9g (0x%08x) -> 0x%04x, expected 0x%04x", v[i], u_of(v[i]), got[i], want[i]);
        hash = fnv_add(hash, &got[i], 2);
    }
    long np_n;
    uint64_t np_h = numpy_hash("enc32", &np_n);
    cr_assert_eq(n, np_n);
    cr_assert_eq(hash, np_h, "float32 -> float16 sweep differs from numpy's");
    mxp_ndarray_release(a); mxp_ndarray_release(b);
    free(v); free(want); free(got);
}

Test(f16, encode_float64_rounds_once_like_numpy) {
    long n = 0x7c00L * 6;
    double *v = malloc((size_t)n * sizeof *v);
    uint16_t *want = malloc((size_t)n * sizeof *want);
    long k = 0;
    for (uint16_t h = 0; h < 0x7c00; h++) {
        double m = (half_value(h) + half_value((uint16_t)(h + 1))) / 2;
        double three[3] = {m, m - ldexp(m, -40), m + ldexp(m, -40)};
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < 3; i++) {
                v[k] = s ? -three[i] : three[i];
                want[k] = (uint16_t)((s ? 0x8000 : 0) | nearest(three[i], h));
                k++;
            }
    }
    mxp_ndarray *a = array_of(v, n, MXP_DTYPE_F64), *b = run_cast("Cast", a, "float16");
    uint16_t *got = malloc((size_t)n * sizeof *got);
    cr_assert_eq(mxp_ndarray_sync_copy_to(b, got, (size_t)n * 2), MXP_OK);
    uint64_t hash = FNV0;
    for (long i = 0; i < n; i++) {
        cr_assert_eq(got[i], want[i], "%.17g -> 0x%04x, expected 0x%04x", v[i], got[i], want[i]);
        hash = fnv_add(hash, &got[i], 2);
    }
    long np_n;
    uint64_t np_h = numpy_hash("enc64", &np_n);
    cr_assert_eq(n, np_n);
    cr_assert_eq(hash, np_h, "float64 -> float16 sweep differs from numpy's");
    mxp_ndarray_release(a); mxp_ndarray_release(b);
    free(v); free(want); free(got);
}

/* numpy's named values (overflow, tiny, 1/3, ...) through Cast and
 * amp_cast; NaN stays NaN with its sign. */
Test(f16, named_values_nan_and_amp_cast) {
    FILE *f = fopen(DATA "f16_numpy.txt", "r");
    cr_assert(f);
    double v[64];
    uint16_t want[64];
    int n = 0;
    char line[256];
    while (fgets(line, sizeof line, f) && n < 62) {
        unsigned long long bits;
        unsigned w;
        if (sscanf(line, "named %llx %x", &bits, &w) != 2) continue;
        memcpy(&v[n], &bits, 8);
        want[n++] = (uint16_t)w;
    }
    fclose(f);
    cr_assert_geq(n, 15);
    v[n] = NAN; v[n + 1] = -NAN;
    const char *ops[2] = {"Cast", "amp_cast"};
    for (int o = 0; o < 2; o++) {
        mxp_ndarray *a = array_of(v, n + 2, MXP_DTYPE_F64), *b = run_cast(ops[o], a, "float16");
        uint16_t got[64];
        cr_assert_eq(mxp_ndarray_sync_copy_to(b, got, (size_t)(n + 2) * 2), MXP_OK);
        for (int i = 0; i < n; i++)
            cr_assert_eq(got[i], want[i], "%s %.17g -> 0x%04x, numpy 0x%04x", ops[o], v[i], got[i], want[i]);
        cr_assert(half_is_nan(got[n]) && !(got[n] & 0x8000), "%s NaN -> 0x%04x", ops[o], got[n]);
        cr_assert(half_is_nan(got[n + 1]) && (got[n + 1] & 0x8000), "%s -NaN -> 0x%04x", ops[o], got[n + 1]);
        mxp_ndarray_release(a); mxp_ndarray_release(b);
    }
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "open %s", path);
    static unsigned char buf[4096];
    *n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return buf;
}

Test(f16, numpy_params_load_and_save_back) {
    int n = 0;
    mxp_ndarray **arrs = NULL;
    char **names = NULL;
    cr_assert_eq(mxp_ndarray_load(DATA "f16_sample.params", &n, &arrs, &names), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(n, 2);
    cr_assert_str_eq(names[0], "arg:w");
    cr_assert_str_eq(names[1], "aux:s");
    cr_assert_eq(mxp_ndarray_dtype(arrs[0]), MXP_DTYPE_F16);
    cr_assert_eq(mxp_ndarray_ndim(arrs[0]), 2);
    /* numpy's float16 bits of [[1, -2.5, 65504], [2^-24, -0, inf]] */
    const uint16_t w_bits[6] = {0x3c00, 0xc100, 0x7bff, 0x0001, 0x8000, 0x7c00};
    uint16_t got[6];
    cr_assert_eq(mxp_ndarray_sync_copy_to(arrs[0], got, sizeof got), MXP_OK);
    for (int i = 0; i < 6; i++) cr_assert_eq(got[i], w_bits[i], "element %d: 0x%04x, numpy 0x%04x", i, got[i], w_bits[i]);
    /* to float32 through Cast: the exact values */
    mxp_ndarray *s32 = run_cast("Cast", arrs[1], "float32");
    float s[4];
    cr_assert_eq(mxp_ndarray_sync_copy_to(s32, s, sizeof s), MXP_OK);
    const float s_want[4] = {0.0999755859375f, 0.333251953125f, -1.0013580322265625e-05f, 3.140625f};
    for (int i = 0; i < 4; i++) cr_assert_eq(s[i], s_want[i], "aux:s[%d] = %.10g", i, s[i]);
    /* saved back: the same bytes numpy's writer produced */
    char path[] = "/tmp/mxp_f16_params_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(mxp_ndarray_save(path, n, arrs, (const char **)names), MXP_OK, "%s", mxp_last_error());
    size_t an, bn;
    unsigned char *a = slurp(DATA "f16_sample.params", &an);
    unsigned char want[4096];
    memcpy(want, a, an);
    unsigned char *b = slurp(path, &bn);
    cr_assert_eq(bn, an, "saved %zu bytes, numpy's file has %zu", bn, an);
    for (size_t i = 0; i < an; i++) cr_assert_eq(b[i], want[i], "byte %zu: 0x%02x, numpy 0x%02x", i, b[i], want[i]);
    unlink(path);
    mxp_ndarray_release(s32);
    mxp_ndarray_list_free(n, arrs, names);
}

/* float16 is a storage dtype: a compute op refuses it and says so. */
Test(f16, compute_ops_refuse_float16_by_name) {
    uint16_t h[16] = {0};
    int64_t shape[4] = {1, 1, 4, 4};
    mxp_ndarray *a = NULL;
    cr_assert_eq(mxp_ndarray_create(shape, 4, MXP_DTYPE_F16, cpu, &a), MXP_OK);
    cr_assert_eq(mxp_ndarray_sync_copy_from(a, h, sizeof h), MXP_OK);
    mxp_ndarray *out = NULL;
    int n_out = 1;
    const char *k[2] = {"kernel", "pool_type"}, *v[2] = {"(2,2)", "max"};
    int rc = mxp_invoke("Pooling", 1, &a, &n_out, &out, 2, k, v);
    if (rc == MXP_OK) rc = mxp_ndarray_wait_to_read(out);
    cr_assert_neq(rc, MXP_OK, "Pooling ran on float16 data");
    cr_assert(strstr(mxp_last_error(), "float16"), "%s", mxp_last_error());
    mxp_ndarray_release(out);
    mxp_ndarray_release(a);
}
