/* test_temp_space.c — temp space: round-robin over the copies, growth with
 * the old buffer freed after its users, and serialization of ops sharing
 * a copy (an op that finds its buffer changed under it counts a clash). */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "resource/resource.h"
#include "storage/storage.h"

static const mxp_device CPU0 = {MXP_DEV_CPU, 0};

Test(temp_space, round_robin_over_copies) {
    setenv("MXP_CPU_TEMP_COPY", "3", 1);
    mxp_temp_space t[7];
    for (int i = 0; i < 7; i++) cr_assert_eq(mxp__temp_space_acquire(CPU0, 256, &t[i]), MXP_OK);
    cr_assert_neq(t[0].var, t[1].var);
    cr_assert_neq(t[1].var, t[2].var);
    cr_assert_neq(t[0].var, t[2].var);
    cr_assert_eq(t[3].var, t[0].var);
    cr_assert_eq(t[6].var, t[0].var);
    cr_assert_eq(t[4].ptr, t[1].ptr);
    cr_assert_geq(t[0].size, 256);
    cr_assert_eq((uintptr_t)t[0].ptr % 64, 0);
    mxp__temp_space_release_all();
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    mxp_storage_stats st = MXP_STRUCT_INIT(mxp_storage_stats);
    mxp_storage_stats_get(CPU0, &st);
    cr_assert_eq(st.bytes_in_use, 0);
}

typedef struct use_arg {
    unsigned char *ptr;
    size_t size;
    int tag;
    atomic_int *clashes;
} use_arg;

/* Write our tag over the whole buffer, pause, and check nobody else wrote. */
static int use_fn(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    use_arg *u = arg;
    memset(u->ptr, u->tag, u->size);
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
    for (size_t i = 0; i < u->size; i++)
        if (u->ptr[i] != (unsigned char)u->tag) { atomic_fetch_add(u->clashes, 1); break; }
    return MXP_OK;
}

Test(temp_space, sharing_ops_serialize_and_growth_is_safe) {
    setenv("MXP_CPU_TEMP_COPY", "2", 1);
    atomic_int clashes = 0;
    for (int i = 0; i < 40; i++) {
        size_t want = 1000 + (size_t)i * 700; /* grows often: old buffers freed via the engine */
        mxp_temp_space t;
        cr_assert_eq(mxp__temp_space_acquire(CPU0, want, &t), MXP_OK);
        cr_assert_geq(t.size, want);
        use_arg *u = malloc(sizeof *u);
        *u = (use_arg){t.ptr, want, i + 1, &clashes};
        mxp_engine_push_args a = {0};
        a.sync_fn = use_fn;
        a.arg = u;
        a.free_arg = free;
        a.mutate_vars = &t.var;
        a.n_mutate = 1;
        a.name = "temp_user";
        cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    }
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(atomic_load(&clashes), 0);
    /* Only the two live buffers remain in use. */
    mxp_storage_stats st = MXP_STRUCT_INIT(mxp_storage_stats);
    mxp_storage_stats_get(CPU0, &st);
    cr_assert_leq(st.bytes_in_use, 2 * mxp__storage_round(1000 + 39 * 700));
    mxp__temp_space_release_all();
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    mxp_storage_stats_get(CPU0, &st);
    cr_assert_eq(st.bytes_in_use, 0);
}

Test(temp_space, unknown_device) {
    mxp_temp_space t;
    cr_assert_eq(mxp__temp_space_acquire((mxp_device){50, 0}, 10, &t), MXP_EINVAL);
    cr_assert_null(t.var);
}
