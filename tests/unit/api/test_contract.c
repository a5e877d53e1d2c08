/* test_contract.c — the application API contract (mxplug/base.h): value
 * structs read and written only up to the caller's struct_size (an older
 * application's shorter struct), struct_size 0 read as the 1.0 layout,
 * mxp_free, and symbol name lists that stay valid for the symbol's
 * lifetime even after compose changed the names. */
#include <criterion/criterion.h>

#include <mxplug.h>

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const mxp_device CPU0 = {MXP_DEV_CPU, 0};

/* Allocate something so the CPU pool has statistics. */
static mxp_ndarray *some_array(void) {
    mxp_ndarray *a = NULL;
    int64_t shape[1] = {1000};
    cr_assert_eq(mxp_ndarray_create(shape, 1, MXP_DTYPE_F32, CPU0, &a), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_ndarray_fill(a, 1.0), MXP_OK);
    cr_assert_eq(mxp_ndarray_wait_to_read(a), MXP_OK);
    return a;
}

Test(contract, storage_stats_written_only_up_to_the_callers_size) {
    mxp_ndarray *a = some_array();
    mxp_storage_stats full = MXP_STRUCT_INIT(mxp_storage_stats);
    cr_assert_eq(mxp_storage_stats_get(CPU0, &full), MXP_OK);
    cr_assert_eq(full.struct_size, sizeof full, "the caller's struct_size is kept");
    cr_assert_gt(full.bytes_in_use, 0);
    /* An "older" caller that knows only bytes_in_use: the rest is untouched. */
    mxp_storage_stats old;
    memset(&old, 0xAB, sizeof old);
    old.struct_size = (uint32_t)(offsetof(mxp_storage_stats, bytes_in_use) + sizeof old.bytes_in_use);
    cr_assert_eq(mxp_storage_stats_get(CPU0, &old), MXP_OK);
    cr_assert_eq(old.bytes_in_use, full.bytes_in_use);
    uint64_t sentinel;
    memset(&sentinel, 0xAB, sizeof sentinel);
    cr_assert_eq(old.bytes_pooled, sentinel, "a field past struct_size was written");
    cr_assert_eq(old.n_failures, sentinel, "a field past struct_size was written");
    /* struct_size 0: the 1.0 layout, all of today's fields. */
    mxp_storage_stats zero;
    memset(&zero, 0, sizeof zero);
    cr_assert_eq(mxp_storage_stats_get(CPU0, &zero), MXP_OK);
    cr_assert_eq(zero.bytes_in_use, full.bytes_in_use);
    cr_assert_eq(zero.bytes_limit, full.bytes_limit);
    mxp_ndarray_release(a);
}

Test(contract, invoke_opts_fields_past_struct_size_are_ignored) {
    mxp_ndarray *x = some_array(), *y = NULL;
    mxp_ndarray *in[1] = {x};
    /* struct_size covers only is_train: the garbage in `req` must not be
     * read (it would be dereferenced as an array of reqs). */
    mxp_invoke_opts o;
    memset(&o, 0xFF, sizeof o);
    o.struct_size = (uint32_t)(offsetof(mxp_invoke_opts, is_train) + sizeof o.is_train);
    o.is_train = 0;
    int n_out = 1;
    mxp_ndarray *out[1] = {NULL};
    const char *k[] = {"scalar"}, *v[] = {"2"};
    cr_assert_eq(mxp_invoke_ex("_mul_scalar", 1, in, &n_out, out, 1, k, v, &o), MXP_OK, "%s", mxp_last_error());
    y = out[0];
    float got[1000];
    cr_assert_eq(mxp_ndarray_sync_copy_to(y, got, sizeof got), MXP_OK, "%s", mxp_last_error());
    for (int i = 0; i < 1000; i++) cr_assert_eq(got[i], 2.0f);
    mxp_ndarray_release(y);
    mxp_ndarray_release(x);
}

Test(contract, init_helpers_set_struct_size_and_short_inits_default) {
    mxp_init c = mxp_init_constant(3.5);
    cr_assert_eq(c.struct_size, sizeof(mxp_init));
    mxp_ndarray *a = some_array();
    cr_assert_eq(mxp_init_array(&c, a), MXP_OK, "%s", mxp_last_error());
    float got[1000];
    cr_assert_eq(mxp_ndarray_sync_copy_to(a, got, sizeof got), MXP_OK);
    cr_assert_eq(got[7], 3.5f);
    /* A struct that stops after `kind`: value reads as 0, not as garbage. */
    mxp_init s;
    memset(&s, 0x7F, sizeof s);
    s.struct_size = (uint32_t)(offsetof(mxp_init, kind) + sizeof s.kind);
    s.kind = MXP_INIT_CONSTANT;
    cr_assert_eq(mxp_init_array(&s, a), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_ndarray_sync_copy_to(a, got, sizeof got), MXP_OK);
    cr_assert_eq(got[7], 0.0f);
    mxp_ndarray_release(a);
}

Test(contract, mxp_free_frees_returned_strings) {
    mxp_symbol *x = NULL;
    cr_assert_eq(mxp_symbol_variable("x", &x), MXP_OK);
    char *json = NULL;
    cr_assert_eq(mxp_symbol_save_json(x, &json), MXP_OK, "%s", mxp_last_error());
    cr_assert(json && strstr(json, "\"x\""));
    mxp_free(json);
    mxp_free(NULL);
    mxp_symbol_release(x);
}

Test(contract, name_lists_stay_valid_for_the_symbols_lifetime) {
    mxp_symbol *data = NULL, *z = NULL, *fc = NULL;
    cr_assert_eq(mxp_symbol_variable("data", &data), MXP_OK);
    cr_assert_eq(mxp_symbol_variable("z", &z), MXP_OK);
    const char *k[] = {"num_hidden"}, *v[] = {"3"};
    cr_assert_eq(mxp_symbol_create("FullyConnected", "fc", 1, k, v, &fc), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_symbol_compose(fc, NULL, 1, NULL, &data), MXP_OK, "%s", mxp_last_error());
    int n1 = 0, n2 = 0, n3 = 0;
    const char *const *first = NULL, *const *again = NULL, *const *after = NULL;
    cr_assert_eq(mxp_symbol_list_arguments(fc, &n1, &first), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(n1, 3);
    cr_assert_str_eq(first[0], "data");
    cr_assert_eq(mxp_symbol_list_arguments(fc, &n2, &again), MXP_OK);
    cr_assert_eq(n2, 3);
    /* Rename the free input: the names change, the first list stays readable. */
    const char *an[] = {"data"};
    cr_assert_eq(mxp_symbol_compose(fc, NULL, 1, an, &z), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_symbol_list_arguments(fc, &n3, &after), MXP_OK, "%s", mxp_last_error());
    cr_assert_str_eq(after[0], "z");
    cr_assert_str_eq(first[0], "data", "an earlier list was freed by a later call");
    cr_assert_str_eq(first[1], "fc_weight");
    cr_assert_str_eq(again[2], "fc_bias");
    mxp_symbol_release(fc);
    mxp_symbol_release(z);
    mxp_symbol_release(data);
}
