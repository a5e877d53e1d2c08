/* test_ndarray.c — NDArray handles: create, accessors, fill for each dtype,
 * copy, sync copies, views sharing data (reshape/slice/at), reference
 * counting with memory returned to the pool, errors, the copy registry with
 * a fake non-host device, and version counting. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ndarray/ndarray.h"
#include "storage/storage.h"
#if __has_include("engine/engine.h")
#include "engine/engine.h"
#define HAVE_ENGINE_DEVICE_HOOKS 1
#endif

static const mxp_device CPU0 = {MXP_DEV_CPU, 0};

static mxp_ndarray *make(const int64_t *shape, int ndim, int dtype) {
    mxp_ndarray *a = NULL;
    int rc = mxp_ndarray_create(shape, ndim, dtype, CPU0, &a);
    cr_assert_eq(rc, MXP_OK, "create: %s", mxp_last_error());
    return a;
}

Test(ndarray, create_and_accessors) {
    int64_t shape[3] = {2, 3, 4};
    mxp_ndarray *a = make(shape, 3, MXP_DTYPE_F32);
    cr_assert_eq(mxp_ndarray_ndim(a), 3);
    cr_assert_eq(mxp_ndarray_shape(a)[2], 4);
    cr_assert_eq(mxp_ndarray_dtype(a), MXP_DTYPE_F32);
    cr_assert_eq(mxp_ndarray_size(a), 24);
    cr_assert_eq(mxp_ndarray_nbytes(a), 96);
    cr_assert_eq(mxp_ndarray_device(a).type, MXP_DEV_CPU);
    cr_assert_not_null(mxp_ndarray_var(a));
    cr_assert_eq((uintptr_t)mxp_ndarray_data(a) % 64, 0);
    cr_assert_eq(mxp_ndarray_is_none(a), 0);
    mxp_ndarray *s = make(NULL, 0, MXP_DTYPE_F64); /* scalar */
    cr_assert_eq(mxp_ndarray_size(s), 1);
    mxp_ndarray *n = NULL;
    cr_assert_eq(mxp_ndarray_create_none(&n), MXP_OK);
    cr_assert(mxp_ndarray_is_none(n));
    cr_assert_eq(mxp_ndarray_ndim(n), -1);
    cr_assert_eq(mxp_ndarray_size(n), 0);
    cr_assert_null(mxp_ndarray_var(n));
    cr_assert_eq(mxp_ndarray_fill(n, 1.0), MXP_EINVAL);
    mxp_ndarray_release(a);
    mxp_ndarray_release(s);
    mxp_ndarray_release(n);
    mxp_ndarray_release(NULL);
}

Test(ndarray, create_errors) {
    mxp_ndarray *a = (mxp_ndarray *)1;
    int64_t bad[2] = {2, -3};
    cr_assert_eq(mxp_ndarray_create(bad, 2, MXP_DTYPE_F32, CPU0, &a), MXP_EINVAL);
    cr_assert_null(a);
    cr_assert(strstr(mxp_last_error(), "dimension 1"), "%s", mxp_last_error());
    int64_t ok[1] = {4};
    cr_assert_eq(mxp_ndarray_create(ok, 9, MXP_DTYPE_F32, CPU0, &a), MXP_EINVAL);
    cr_assert_eq(mxp_ndarray_create(ok, 1, 77, CPU0, &a), MXP_EINVAL);
    cr_assert_eq(mxp_ndarray_create(ok, 1, MXP_DTYPE_F32, (mxp_device){33, 0}, &a), MXP_EINVAL);
    int64_t huge[2] = {INT64_MAX / 2, 4};
    cr_assert_eq(mxp_ndarray_create(huge, 2, MXP_DTYPE_F32, CPU0, &a), MXP_EINVAL);
}

Test(ndarray, fill_every_dtype) {
    int64_t shape[1] = {37};
    struct { int dtype; double v; } cases[] = {
        {MXP_DTYPE_F32, 1.25}, {MXP_DTYPE_F64, -3.5}, {MXP_DTYPE_I32, -7}, {MXP_DTYPE_I64, 1e12},
        {MXP_DTYPE_U8, 200}, {MXP_DTYPE_I8, -100}, {MXP_DTYPE_BOOL, 3}, {MXP_DTYPE_F16, 1.5},
        {MXP_DTYPE_BF16, -2.0}, {MXP_DTYPE_U16, 65535}, {MXP_DTYPE_I16, -300}, {MXP_DTYPE_U32, 4e9},
        {MXP_DTYPE_U64, 5},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mxp_ndarray *a = make(shape, 1, cases[c].dtype);
        cr_assert_eq(mxp_ndarray_fill(a, cases[c].v), MXP_OK);
        cr_assert_eq(mxp_ndarray_wait_to_read(a), MXP_OK);
        const unsigned char *p = mxp_ndarray_data(a);
        double got = 0;
        for (int i = 0; i < 37; i++) {
            switch (cases[c].dtype) {
            case MXP_DTYPE_F32: got = ((const float *)p)[i]; break;
            case MXP_DTYPE_F64: got = ((const double *)p)[i]; break;
            case MXP_DTYPE_I32: got = ((const int32_t *)p)[i]; break;
            case MXP_DTYPE_I64: got = (double)((const int64_t *)p)[i]; break;
            case MXP_DTYPE_U8: got = p[i]; break;
            case MXP_DTYPE_I8: got = ((const int8_t *)p)[i]; break;
            case MXP_DTYPE_BOOL: got = p[i] ? 3 : 0; break;
            case MXP_DTYPE_F16: got = ((const uint16_t *)p)[i] == 0x3e00 ? 1.5 : -1; break; /* 1.5 = 0x3E00 */
            case MXP_DTYPE_BF16: got = ((const uint16_t *)p)[i] == 0xc000 ? -2.0 : -1; break; /* -2 = 0xC000 */
            case MXP_DTYPE_U16: got = ((const uint16_t *)p)[i]; break;
            case MXP_DTYPE_I16: got = ((const int16_t *)p)[i]; break;
            case MXP_DTYPE_U32: got = ((const uint32_t *)p)[i]; break;
            case MXP_DTYPE_U64: got = (double)((const uint64_t *)p)[i]; break;
            }
            cr_assert_eq(got, cases[c].v, "dtype %s elem %d: %g", mxp_dtype_name(cases[c].dtype), i, got);
        }
        mxp_ndarray_release(a);
    }
}

Test(ndarray, half_encoding) {
    /* Reference values from IEEE 754 binary16 tables. */
    cr_assert_eq(mxp__f32_to_f16(0.0f), 0x0000);
    cr_assert_eq(mxp__f32_to_f16(1.0f), 0x3c00);
    cr_assert_eq(mxp__f32_to_f16(-2.0f), 0xc000);
    cr_assert_eq(mxp__f32_to_f16(65504.0f), 0x7bff);   /* max half */
    cr_assert_eq(mxp__f32_to_f16(1e6f), 0x7c00);       /* overflow -> inf */
    cr_assert_eq(mxp__f32_to_f16(5.9604645e-8f), 0x0001); /* smallest subnormal */
    cr_assert_eq(mxp__f32_to_f16(1.0009765625f), 0x3c01);
    cr_assert_eq(mxp__f32_to_f16(1.00048828125f), 0x3c00); /* tie -> even */
    cr_assert_eq(mxp__f32_to_bf16(1.0f), 0x3f80);
    cr_assert_eq(mxp__f32_to_bf16(3.140625f), 0x4049);
}

Test(ndarray, sync_copies_and_copy) {
    int64_t shape[2] = {3, 5};
    mxp_ndarray *a = make(shape, 2, MXP_DTYPE_F32), *b = make(shape, 2, MXP_DTYPE_F32);
    float in[15], out[15];
    for (int i = 0; i < 15; i++) in[i] = (float)i * 0.25f - 1.0f;
    cr_assert_eq(mxp_ndarray_sync_copy_from(a, in, sizeof in), MXP_OK);
    cr_assert_eq(mxp_ndarray_copy(a, b), MXP_OK);
    cr_assert_eq(mxp_ndarray_fill(a, 9.0), MXP_OK); /* after the copy: must not reach b */
    cr_assert_eq(mxp_ndarray_sync_copy_to(b, out, sizeof out), MXP_OK);
    cr_assert_eq(memcmp(in, out, sizeof in), 0);
    cr_assert_eq(mxp_ndarray_sync_copy_to(a, out, sizeof out), MXP_OK);
    for (int i = 0; i < 15; i++) cr_assert_eq(out[i], 9.0f);
    cr_assert_eq(mxp_ndarray_sync_copy_to(a, out, 8), MXP_EINVAL);
    cr_assert_eq(mxp_ndarray_sync_copy_from(a, in, 60 - 4), MXP_EINVAL);
    int64_t other[1] = {14};
    mxp_ndarray *c = make(other, 1, MXP_DTYPE_F32), *d = make(shape, 2, MXP_DTYPE_F64);
    cr_assert_eq(mxp_ndarray_copy(a, c), MXP_ESHAPE);
    cr_assert_eq(mxp_ndarray_copy(a, d), MXP_ETYPE);
    mxp_ndarray_release(a);
    mxp_ndarray_release(b);
    mxp_ndarray_release(c);
    mxp_ndarray_release(d);
}

Test(ndarray, views_share_data) {
    int64_t shape[2] = {4, 3};
    mxp_ndarray *a = make(shape, 2, MXP_DTYPE_I32);
    int32_t v[12];
    for (int i = 0; i < 12; i++) v[i] = i;
    cr_assert_eq(mxp_ndarray_sync_copy_from(a, v, sizeof v), MXP_OK);

    mxp_ndarray *s = NULL, *r = NULL, *row = NULL, *r2 = NULL;
    cr_assert_eq(mxp_ndarray_slice(a, 1, 3, &s), MXP_OK);
    cr_assert_eq(mxp_ndarray_ndim(s), 2);
    cr_assert_eq(mxp_ndarray_shape(s)[0], 2);
    cr_assert_eq(mxp_ndarray_var(s), mxp_ndarray_var(a));
    int32_t sv[6];
    cr_assert_eq(mxp_ndarray_sync_copy_to(s, sv, sizeof sv), MXP_OK);
    for (int i = 0; i < 6; i++) cr_assert_eq(sv[i], 3 + i);

    int64_t rs[2] = {-1, 6};
    cr_assert_eq(mxp_ndarray_reshape(a, rs, 2, &r), MXP_OK);
    cr_assert_eq(mxp_ndarray_shape(r)[0], 2);
    cr_assert_eq(mxp_ndarray_at(r, 1, &row), MXP_OK); /* elements 6..11 */
    cr_assert_eq(mxp_ndarray_ndim(row), 1);
    cr_assert_eq(mxp_ndarray_size(row), 6);
    cr_assert(mxp__ndarray_same_chunk(row, a));
    cr_assert_eq(mxp__ndarray_offset(row), 24);

    /* Writing through one view is visible through the others. */
    cr_assert_eq(mxp_ndarray_fill(row, -5), MXP_OK);
    cr_assert_eq(mxp_ndarray_wait_to_read(a), MXP_OK);
    const int32_t *p = mxp_ndarray_data(a);
    for (int i = 0; i < 12; i++) cr_assert_eq(p[i], i < 6 ? i : -5, "elem %d = %d", i, p[i]);
    cr_assert_eq(mxp_ndarray_sync_copy_to(s, sv, sizeof sv), MXP_OK);
    int32_t want[6] = {3, 4, 5, -5, -5, -5};
    cr_assert_eq(memcmp(sv, want, sizeof want), 0);

    /* Copy between overlapping views of one chunk: rows 0..1 -> rows 2..3. */
    mxp_ndarray *top = NULL, *bot = NULL;
    cr_assert_eq(mxp_ndarray_slice(a, 0, 2, &top), MXP_OK);
    cr_assert_eq(mxp_ndarray_slice(a, 2, 4, &bot), MXP_OK);
    cr_assert_eq(mxp_ndarray_copy(top, bot), MXP_OK);
    cr_assert_eq(mxp_ndarray_wait_to_read(a), MXP_OK);
    for (int i = 0; i < 6; i++) cr_assert_eq(p[6 + i], i);

    /* Errors. */
    int64_t bad[2] = {5, 3};
    cr_assert_eq(mxp_ndarray_reshape(a, bad, 2, &r2), MXP_ESHAPE);
    int64_t two_inf[2] = {-1, -1};
    cr_assert_eq(mxp_ndarray_reshape(a, two_inf, 2, &r2), MXP_EINVAL);
    cr_assert_eq(mxp_ndarray_slice(a, 3, 5, &r2), MXP_EINVAL);
    cr_assert_eq(mxp_ndarray_slice(a, 2, 1, &r2), MXP_EINVAL);
    cr_assert_eq(mxp_ndarray_at(a, 4, &r2), MXP_EINVAL);
    cr_assert_null(r2);

    /* Freeing the base first keeps the chunk alive for the views. */
    mxp_ndarray_release(a);
    cr_assert_eq(mxp_ndarray_sync_copy_to(s, sv, sizeof sv), MXP_OK);
    cr_assert_eq(sv[0], 3);
    mxp_ndarray_release(s);
    mxp_ndarray_release(r);
    mxp_ndarray_release(row);
    mxp_ndarray_release(top);
    mxp_ndarray_release(bot);
}

Test(ndarray, retain_release_returns_memory) {
    int64_t shape[1] = {1000};
    mxp_storage_stats st = MXP_STRUCT_INIT(mxp_storage_stats);
    mxp_ndarray *a = make(shape, 1, MXP_DTYPE_F32);
    mxp_storage_stats_get(CPU0, &st);
    cr_assert_eq(st.bytes_in_use, 4096);
    cr_assert_eq(mxp_ndarray_retain(a), a);
    mxp_ndarray_release(a);
    cr_assert_eq(mxp_ndarray_fill(a, 1), MXP_OK); /* still alive */
    mxp_ndarray_release(a);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    mxp_storage_stats_get(CPU0, &st);
    cr_assert_eq(st.bytes_in_use, 0);
    cr_assert_eq(st.bytes_pooled, 4096);
    /* Next array of the same class reuses the pooled block. */
    a = make(shape, 1, MXP_DTYPE_I32);
    mxp_storage_stats_get(CPU0, &st);
    cr_assert_eq(st.n_hits, 1);
    mxp_ndarray_release(a);
}

Test(ndarray, version_moves_on_writes) {
    int64_t shape[1] = {8};
    mxp_ndarray *a = make(shape, 1, MXP_DTYPE_F32);
    cr_assert_eq(mxp_ndarray_wait_to_read(a), MXP_OK);
    uint64_t v0 = mxp_ndarray_version(a);
    cr_assert_eq(mxp_ndarray_fill(a, 1), MXP_OK);
    cr_assert_eq(mxp_ndarray_wait_to_read(a), MXP_OK);
    uint64_t v1 = mxp_ndarray_version(a);
    cr_assert_neq(v1, v0);
    float out[8];
    cr_assert_eq(mxp_ndarray_sync_copy_to(a, out, sizeof out), MXP_OK); /* a read */
    cr_assert_eq(mxp_ndarray_version(a), v1);
    mxp_ndarray_release(a);
}

/* ---- a fake device whose memory the host must not touch directly ---- */

enum { FAKE = 21 };
static int n_dev_copies;

static void *fake_alloc(void *ctx, int32_t id, size_t bytes, size_t align) {
    (void)ctx; (void)id;
    void *p = NULL;
    return posix_memalign(&p, align, bytes) ? NULL : p;
}
static void fake_free(void *ctx, int32_t id, void *p, size_t bytes) {
    (void)ctx; (void)id; (void)bytes;
    free(p);
}
static int fake_copy(void *ctx, void *dst, mxp_device dd, const void *src, mxp_device sd, size_t bytes,
                     const mxp_run_ctx *rctx) {
    (void)ctx; (void)dd; (void)sd; (void)rctx;
    n_dev_copies++;
    memcpy(dst, src, bytes);
    return MXP_OK;
}

Test(ndarray, fake_device_copy_registry) {
    mxp_storage_backend be = {.name = "fakeacc", .alloc = fake_alloc, .free = fake_free, .align = 128,
                              .host_accessible = 0};
    cr_assert_eq(mxp__storage_register_device(FAKE, &be), MXP_OK);
#ifdef HAVE_ENGINE_DEVICE_HOOKS
    /* A device pack also gives the engine workers for its device type. */
    mxp__engine_device_hooks hooks = {0};
    cr_assert_eq(mxp__engine_register_device(FAKE, &hooks), MXP_OK);
#endif
    mxp_device acc = {FAKE, 0};
    int64_t shape[1] = {10};
    mxp_ndarray *h = make(shape, 1, MXP_DTYPE_F32), *d = NULL, *h2 = make(shape, 1, MXP_DTYPE_F32);
    cr_assert_eq(mxp_ndarray_create(shape, 1, MXP_DTYPE_F32, acc, &d), MXP_OK);
    cr_assert_null(mxp_ndarray_data(d), "device memory is not host-accessible");
    /* Without copy functions registered: no path. */
    cr_assert_eq(mxp_ndarray_copy(h, d), MXP_EUNSUPPORTED);
    cr_assert(strstr(mxp_last_error(), "fakeacc(0)"), "%s", mxp_last_error());
    cr_assert_eq(mxp_ndarray_fill(d, 1), MXP_EUNSUPPORTED);
    cr_assert_eq(mxp__ndarray_register_copy(MXP_DEV_CPU, FAKE, fake_copy, NULL), MXP_OK);
    cr_assert_eq(mxp__ndarray_register_copy(FAKE, MXP_DEV_CPU, fake_copy, NULL), MXP_OK);
    float in[10], out[10];
    for (int i = 0; i < 10; i++) in[i] = (float)i;
    cr_assert_eq(mxp_ndarray_sync_copy_from(h, in, sizeof in), MXP_OK);
    cr_assert_eq(mxp_ndarray_copy(h, d), MXP_OK);
    cr_assert_eq(mxp_ndarray_copy(d, h2), MXP_OK);
    cr_assert_eq(mxp_ndarray_sync_copy_to(h2, out, sizeof out), MXP_OK);
    cr_assert_eq(memcmp(in, out, sizeof in), 0);
    cr_assert_eq(n_dev_copies, 2);
    cr_assert_eq(mxp_ndarray_fill(d, 2.5), MXP_OK); /* staged on host, copied over */
    cr_assert_eq(mxp_ndarray_sync_copy_to(d, out, sizeof out), MXP_OK);
    for (int i = 0; i < 10; i++) cr_assert_eq(out[i], 2.5f);
    cr_assert_eq(n_dev_copies, 4);
    mxp_ndarray_release(h);
    mxp_ndarray_release(h2);
    mxp_ndarray_release(d);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
}

/* An op that fails poisons the array: the wait reports it, once. */
static int failing_op(void *arg, const mxp_run_ctx *ctx) {
    (void)arg; (void)ctx;
    return mxp__error(MXP_EINVAL, "deliberate failure");
}

Test(ndarray, errors_surface_at_wait) {
    int64_t shape[1] = {4};
    mxp_ndarray *a = make(shape, 1, MXP_DTYPE_F32);
    mxp_var *var = mxp_ndarray_var(a);
    mxp_engine_push_args args = {0};
    args.sync_fn = failing_op;
    args.mutate_vars = &var;
    args.n_mutate = 1;
    args.name = "failing_op";
    cr_assert_eq(mxp_engine_push(&args), MXP_OK);
    float out[4];
    int rc = mxp_ndarray_sync_copy_to(a, out, sizeof out);
    cr_assert_neq(rc, MXP_OK);
    cr_assert(strstr(mxp_last_error(), "deliberate failure") || strstr(mxp_last_error(), "failing_op"), "%s",
              mxp_last_error());
    mxp_ndarray_release(a);
}
