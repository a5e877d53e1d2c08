/* test_bf16.c — bfloat16 as a runtime dtype: the runtime's float -> bf16
 * encoder and the Cast op (ops-basic) bit for bit against an independent
 * rounding computed here (the two bf16 neighbours compared in double,
 * ties to the even one, overflow as IEEE's unbounded-exponent rule, NaN
 * kept as NaN with its sign), Cast from float64 without double rounding,
 * bf16 -> float32 exactly, and a .params round trip whose bytes are
 * compared with the MXNet NDArray-list layout written out here field by
 * field (type flag 12 = mshadow kBfloat16). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ndarray/ndarray.h"
#include <mxplug.h>

static const mxp_device cpu = {MXP_DEV_CPU, 0};

static float f_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t u_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* The value of bf16 pattern h, with 0x7f80/0xff80 (infinity) read as ±2^128
 * (where rounding with an unbounded exponent would put the next value). */
static double bf16_value_unbounded(uint16_t h) {
    if ((h & 0x7fff) == 0x7f80) return (h & 0x8000) ? -ldexp(1, 128) : ldexp(1, 128);
    return (double)f_of((uint32_t)h << 16);
}

/* Round-to-nearest-even of a finite or infinite double to bf16, computed
 * from the neighbours rather than by bit tricks. */
static uint16_t expect_bf16(double v) {
    if (isnan(v)) return 0; /* not used: NaN checked separately */
    if (isinf(v)) return v > 0 ? 0x7f80 : 0xff80;
    float t = (float)v; /* only used to find a candidate; corrected below */
    uint16_t lo = (uint16_t)(u_of(t) >> 16);
    /* step lo down (in magnitude) until its value is <= |v| */
    while ((lo & 0x7fff) && fabs(bf16_value_unbounded(lo)) > fabs(v)) lo--;
    uint16_t hi = (uint16_t)(lo + 1);
    if ((lo & 0x7fff) == 0x7f80) return lo; /* already infinity */
    double dl = fabs(v - bf16_value_unbounded(lo)), dh = fabs(bf16_value_unbounded(hi) - v);
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}

/* Every bf16 upper half with low halves around the rounding points. */
static float *sweep(int64_t *n) {
    static const uint16_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff, 0x1234, 0xc000};
    int64_t k = 0, cnt = 65536 * 8;
    float *v = malloc((size_t)cnt * sizeof *v);
    for (uint32_t h = 0; h < 65536; h++)
        for (int j = 0; j < 8; j++) v[k++] = f_of(h << 16 | lows[j]);
    *n = k;
    return v;
}

static void check_one(float x, uint16_t got, const char *who) {
    if (isnan(x)) {
        cr_assert((got & 0x7f80) == 0x7f80 && (got & 0x7f), "%s: NaN 0x%08x became 0x%04x (not NaN)", who, u_of(x), got);
        cr_assert_eq(got >> 15, u_of(x) >> 31, "%s: NaN 0x%08x lost its sign", who, u_of(x));
        return;
    }
    uint16_t want = expect_bf16(x);
    cr_assert_eq(got, want, "%s: %.9g (0x%08x) -> 0x%04x, expected 0x%04x", who, x, u_of(x), got, want);
}

Test(bf16, runtime_encoder_rounds_to_nearest_even) {
    int64_t n;
    float *v = sweep(&n);
    for (int64_t i = 0; i < n; i++) check_one(v[i], mxp__f32_to_bf16(v[i]), "mxp__f32_to_bf16");
    free(v);
}

static mxp_ndarray *cast(mxp_ndarray *in, const char *dtype) {
    mxp_ndarray *out = NULL;
    int n_out = 1;
    const char *k = "dtype";
    cr_assert_eq(mxp_invoke("Cast", 1, &in, &n_out, &out, 1, &k, &dtype), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_ndarray_wait_to_read(out), MXP_OK);
    return out;
}

Test(bf16, cast_op_float32_bit_exact) {
    int64_t n;
    float *v = sweep(&n);
    mxp_ndarray *a = NULL;
    cr_assert_eq(mxp_ndarray_create(&n, 1, MXP_DTYPE_F32, cpu, &a), MXP_OK);
    cr_assert_eq(mxp_ndarray_sync_copy_from(a, v, (size_t)n * 4), MXP_OK);
    mxp_ndarray *b = cast(a, "bfloat16");
    cr_assert_eq(mxp_ndarray_dtype(b), MXP_DTYPE_BF16);
    uint16_t *h = malloc((size_t)n * 2);
    cr_assert_eq(mxp_ndarray_sync_copy_to(b, h, (size_t)n * 2), MXP_OK);
    for (int64_t i = 0; i < n; i++) check_one(v[i], h[i], "Cast float32->bfloat16");
    /* and back: every bf16 value widens exactly */
    mxp_ndarray *c = cast(b, "float32");
    float *back = malloc((size_t)n * 4);
    cr_assert_eq(mxp_ndarray_sync_copy_to(c, back, (size_t)n * 4), MXP_OK);
    for (int64_t i = 0; i < n; i++) {
        float want = f_of((uint32_t)h[i] << 16);
        if (isnan(want)) cr_assert(isnan(back[i]));
        else cr_assert_eq(u_of(back[i]), u_of(want), "0x%04x widened to 0x%08x", h[i], u_of(back[i]));
    }
    mxp_ndarray_release(a); mxp_ndarray_release(b); mxp_ndarray_release(c);
    free(v); free(h); free(back);
}

/* Values a float64 -> float32 -> bf16 chain would round twice: each is a
 * bf16 midpoint in float32 plus or minus far less than a float32 ulp. */
Test(bf16, cast_op_float64_rounds_once) {
    double v[8] = {1.00390625 + 0x1p-40, 1.00390625 - 0x1p-40, -(1.01171875 + 0x1p-42), 1.01171875 - 0x1p-45,
                   1.00390625, 3.0e38, 1.5e-38, -0.0}; /* engine workers flush denormals */
    int64_t n = 8;
    mxp_ndarray *a = NULL;
    cr_assert_eq(mxp_ndarray_create(&n, 1, MXP_DTYPE_F64, cpu, &a), MXP_OK);
    cr_assert_eq(mxp_ndarray_sync_copy_from(a, v, sizeof v), MXP_OK);
    mxp_ndarray *b = cast(a, "bfloat16");
    uint16_t h[8];
    cr_assert_eq(mxp_ndarray_sync_copy_to(b, h, sizeof h), MXP_OK);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(h[i], expect_bf16(v[i]), "%.17g -> 0x%04x, expected 0x%04x", v[i], h[i], expect_bf16(v[i]));
    cr_assert_eq(h[0], 0x3f81); /* 1 + 2^-8 + tiny rounds up, not to the even 0x3f80 */
    mxp_ndarray_release(a); mxp_ndarray_release(b);
}

/* ------------------------------------------------------------ .params */
static void put(unsigned char **p, const void *v, size_t n) { memcpy(*p, v, n); *p += n; }

Test(bf16, params_round_trip_mxnet_layout) {
    const uint16_t bits[6] = {0x3f80, 0xbf80, 0x4049, 0x7f80, 0x0001, 0x7fc0}; /* 1 -1 3.14 inf tiny NaN */
    int64_t shape[2] = {2, 3};
    mxp_ndarray *a = NULL;
    cr_assert_eq(mxp_ndarray_create(shape, 2, MXP_DTYPE_BF16, cpu, &a), MXP_OK);
    cr_assert_eq(mxp_ndarray_sync_copy_from(a, bits, sizeof bits), MXP_OK);
    char path[] = "/tmp/mxp_bf16_params_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    const char *names[1] = {"arg:w"};
    cr_assert_eq(mxp_ndarray_save(path, 1, &a, names), MXP_OK, "%s", mxp_last_error());
    /* MXNet 1.x NDArray list: u64 0x112, u64 0, u64 count, records, u64
     * count, names; record V2: u32 0xF993fac9, i32 stype 0, i32 ndim, i64
     * dims, i32 dev_type 1, i32 dev_id 0, i32 type_flag, raw data. */
    unsigned char want[256], *p = want;
    uint64_t u64;
    uint32_t u32;
    int32_t i32;
    u64 = 0x112; put(&p, &u64, 8); u64 = 0; put(&p, &u64, 8); u64 = 1; put(&p, &u64, 8);
    u32 = 0xF993fac9u; put(&p, &u32, 4); i32 = 0; put(&p, &i32, 4); i32 = 2; put(&p, &i32, 4);
    put(&p, &shape[0], 8); put(&p, &shape[1], 8);
    i32 = 1; put(&p, &i32, 4); i32 = 0; put(&p, &i32, 4); i32 = 12; put(&p, &i32, 4);
    put(&p, bits, sizeof bits);
    u64 = 1; put(&p, &u64, 8); u64 = 5; put(&p, &u64, 8); put(&p, "arg:w", 5);
    size_t wn = (size_t)(p - want);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    unsigned char got[512];
    size_t gn = fread(got, 1, sizeof got, f);
    fclose(f);
    cr_assert_eq(gn, wn, "file has %zu bytes, the MXNet layout %zu", gn, wn);
    for (size_t i = 0; i < wn; i++) cr_assert_eq(got[i], want[i], "byte %zu: 0x%02x, MXNet layout 0x%02x", i, got[i], want[i]);
    int n = 0;
    mxp_ndarray **arrs = NULL;
    char **nm = NULL;
    cr_assert_eq(mxp_ndarray_load(path, &n, &arrs, &nm), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(n, 1);
    cr_assert_str_eq(nm[0], "arg:w");
    cr_assert_eq(mxp_ndarray_dtype(arrs[0]), MXP_DTYPE_BF16);
    cr_assert_eq(mxp_ndarray_ndim(arrs[0]), 2);
    uint16_t back[6];
    cr_assert_eq(mxp_ndarray_sync_copy_to(arrs[0], back, sizeof back), MXP_OK);
    cr_assert_eq(memcmp(back, bits, sizeof bits), 0);
    mxp_ndarray_list_free(n, arrs, nm);
    mxp_ndarray_release(a);
    unlink(path);
}
