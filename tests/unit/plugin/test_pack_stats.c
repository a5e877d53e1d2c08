/* test_pack_stats.c — counters a pack publishes (ABI 1.2): registration,
 * reading back, reloads, rollbacks and refused registrations.
 *
 * The fixture pack "fx-reload" (tests/fixtures/packs/fx_reload_tag.h)
 * counts in its fx_tag forward: calls, input elements, input bytes, time,
 * the last input's element count (a gauge) and its build tag (a gauge set
 * in init).  Here fx_tag runs through mxp_invoke on inputs of known shapes
 * and dtypes, and each counter read back through mxp_pack_stats /
 * mxp_pack_stat_value must equal what this file computes from those
 * shapes (the runtime's own per-impl call count must agree too).  Then:
 *   - a reload to a rebuild (tag 2) replaces the counters: the build gauge
 *     says 2, the totals restart at 0 and count the new build's calls; a
 *     snapshot taken before the reload stays readable (its own copy);
 *   - a broken rebuild (init fails after registering a counter) and one
 *     that registers a counter twice are refused: the running build's
 *     counters stay, unchanged, and the refused build's never appear;
 *   - a pack that fails to load publishes none, and the error names the
 *     pack and the counter. */
#include "../op/op_test_util.h"

#include "reload_fixture.h"

static void setup(void) { rfx_setup(RFX_SO("reload_v1"), NULL); }
static void teardown(void) {
    mxp_engine_wait_for_all();
    rfx_teardown();
}
TestSuite(pack_stats, .init = setup, .fini = teardown);

/* Run fx_tag once on a new array of this shape and dtype; returns numel. */
static int64_t run_tag(int dtype, int ndim, const int64_t *shape) {
    mxp_ndarray *x = NULL, *outs[2] = {NULL, NULL};
    cr_assert_eq(mxp_ndarray_create(shape, ndim, dtype, opx_cpu, &x), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_ndarray_fill(x, 1.5), MXP_OK);
    int n_out = 2;
    cr_assert_eq(mxp_invoke("fx_tag", 1, &x, &n_out, outs, 0, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_ndarray_wait_to_read(outs[0]), MXP_OK, "%s", mxp_last_error());
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    mxp_ndarray_release(x);
    mxp_ndarray_release(outs[0]);
    mxp_ndarray_release(outs[1]);
    return n;
}

static uint64_t stat_of(const mxp_pack *p, const char *name) {
    uint64_t v = 0;
    cr_assert_eq(mxp_pack_stat_value(p, name, &v), MXP_OK, "%s", mxp_last_error());
    return v;
}

/* fx_tag/default's forward calls as the runtime counted them. */
static uint64_t runtime_calls(void) {
    const mxp_op *op = mxp_op_find("fx_tag");
    cr_assert(op);
    for (int k = 0; k < mxp_op_impl_count(op); k++) {
        if (strcmp(mxp_op_impl_name(op, k), "default")) continue;
        uint64_t fc = 0;
        cr_assert_eq(mxp_op_impl_stats(op, k, &fc, NULL, NULL, NULL), MXP_OK);
        return fc;
    }
    cr_assert_fail("fx_tag has no impl 'default'");
    return 0;
}

Test(pack_stats, counters_read_back_what_the_pack_counted) {
    const mxp_pack *p = mxp_pack_find("fx-reload");
    cr_assert(p);
    mxp_pack_stat *st = (mxp_pack_stat *)1;
    int n = -1;
    cr_assert_eq(mxp_pack_stats(p, &st, &n), MXP_OK);
    cr_expect_eq(n, 0, "a pack not loaded yet publishes nothing");
    cr_expect_null(st);
    uint64_t v = 7;
    cr_expect_eq(mxp_pack_stat_value(p, "fx_tag.forwards", &v), MXP_ENOENT);
    cr_expect(strstr(mxp_last_error(), "not loaded"), "%s", mxp_last_error());

    /* Shapes and dtypes chosen here; the expected totals follow from them. */
    static const struct { int dtype, ndim; int64_t shape[3]; } runs[] = {
        {MXP_DTYPE_F32, 1, {4}}, {MXP_DTYPE_F32, 2, {3, 5}}, {MXP_DTYPE_F64, 3, {2, 2, 2}},
        {MXP_DTYPE_F32, 2, {7, 1}}, {MXP_DTYPE_F64, 1, {6}},
    };
    uint64_t elements = 0, bytes = 0, last = 0;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        int64_t numel = run_tag(runs[i].dtype, runs[i].ndim, runs[i].shape);
        elements += (uint64_t)numel;
        bytes += (uint64_t)numel * (runs[i].dtype == MXP_DTYPE_F64 ? 8u : 4u);
        last = (uint64_t)numel;
    }
    const uint64_t calls = sizeof runs / sizeof runs[0];
    cr_expect_eq(stat_of(p, "fx_tag.forwards"), calls);
    cr_expect_eq(stat_of(p, "fx_tag.elements"), elements);
    cr_expect_eq(stat_of(p, "fx_tag.bytes"), bytes);
    cr_expect_eq(stat_of(p, "fx_tag.last_numel"), last);
    cr_expect_eq(stat_of(p, "fx_tag.build"), 1);
    cr_expect_geq(stat_of(p, "fx_tag.nanos"), calls, "each forward adds at least 1 ns");
    cr_expect_eq(runtime_calls(), calls, "the runtime's count of the impl agrees with the pack's");

    /* The snapshot: registration order, kinds, units, gauges, docs. */
    cr_assert_eq(mxp_pack_stats(p, &st, &n), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(n, 6);
    static const struct { const char *name, *unit; int kind, gauge; } want[] = {
        {"fx_tag.forwards", "calls", MXP_PACK_STAT_COUNT, 0},
        {"fx_tag.elements", "elements", MXP_PACK_STAT_COUNT, 0},
        {"fx_tag.bytes", "bytes", MXP_PACK_STAT_BYTES, 0},
        {"fx_tag.nanos", "ns", MXP_PACK_STAT_NANOS, 0},
        {"fx_tag.build", "build tag", MXP_PACK_STAT_COUNT, 1},
        {"fx_tag.last_numel", "elements", MXP_PACK_STAT_COUNT, 1},
    };
    for (int i = 0; i < n; i++) {
        cr_expect_str_eq(st[i].name, want[i].name);
        cr_expect_str_eq(st[i].unit, want[i].unit, "%s", st[i].name);
        cr_expect_eq(st[i].kind, want[i].kind, "%s", st[i].name);
        cr_expect_eq(st[i].gauge, want[i].gauge, "%s", st[i].name);
        cr_expect_str_eq(st[i].doc, "fixture counter");
    }
    cr_expect_eq(st[0].value, calls);
    cr_expect_eq(st[2].value, bytes);
    mxp_pack_stats_free(st);
    mxp_pack_stats_free(NULL);

    cr_expect_eq(mxp_pack_stat_value(p, "fx_tag.nope", &v), MXP_ENOENT);
    cr_expect(strstr(mxp_last_error(), "fx-reload") && strstr(mxp_last_error(), "fx_tag.nope") &&
              strstr(mxp_last_error(), "fx_tag.forwards"), "the error names the pack, the name and the counters: %s",
              mxp_last_error());
    cr_expect_eq(mxp_pack_stats(NULL, &st, &n), MXP_EMISUSE);
}

Test(pack_stats, a_reload_replaces_the_counters_and_a_refused_one_keeps_them) {
    const mxp_pack *p = mxp_pack_find("fx-reload");
    int64_t s4[1] = {4}, s10[1] = {10};
    for (int i = 0; i < 3; i++) run_tag(MXP_DTYPE_F32, 1, s4);
    cr_expect_eq(stat_of(p, "fx_tag.forwards"), 3);
    mxp_pack_stat *before;
    int n_before;
    cr_assert_eq(mxp_pack_stats(p, &before, &n_before), MXP_OK);

    rfx_install(RFX_SO("reload_v2"));
    cr_assert_eq(mxp_pack_reload("fx-reload"), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(stat_of(p, "fx_tag.build"), 2, "the counters are the new build's");
    cr_expect_eq(stat_of(p, "fx_tag.forwards"), 0, "and start at 0");
    cr_expect_eq(stat_of(p, "fx_tag.bytes"), 0);
    /* The old snapshot is the caller's copy: still readable. */
    cr_assert_eq(n_before, 6);
    cr_expect_str_eq(before[0].name, "fx_tag.forwards");
    cr_expect_eq(before[0].value, 3);
    cr_expect_eq(before[4].value, 1);
    mxp_pack_stats_free(before);
    for (int i = 0; i < 2; i++) run_tag(MXP_DTYPE_F32, 1, s10);
    cr_expect_eq(stat_of(p, "fx_tag.forwards"), 2);
    cr_expect_eq(stat_of(p, "fx_tag.elements"), 20);
    cr_expect_eq(stat_of(p, "fx_tag.bytes"), 80);
    cr_expect_eq(runtime_calls(), 5, "the runtime's per-impl counts run across reloads");

    /* Refused rebuilds: init fails after registering a counter; a counter
     * registered twice.  Nothing of theirs appears, nothing is reset. */
    const char *bad[] = {RFX_SO("reload_bad"), RFX_SO("reload_badstat")};
    const char *why[] = {"deliberately broken", "fx_tag.forwards' registered twice"};
    for (int b = 0; b < 2; b++) {
        rfx_install(bad[b]);
        cr_assert_neq(mxp_pack_reload("fx-reload"), MXP_OK);
        cr_expect(strstr(mxp_last_error(), why[b]) && strstr(mxp_last_error(), "stays in service"), "%s",
                  mxp_last_error());
        mxp_pack_stat *st;
        int n;
        cr_assert_eq(mxp_pack_stats(p, &st, &n), MXP_OK);
        cr_expect_eq(n, 6);
        for (int i = 0; i < n; i++) cr_expect_str_neq(st[i].name, "broken.counter");
        mxp_pack_stats_free(st);
        cr_expect_eq(stat_of(p, "fx_tag.build"), 2);
        cr_expect_eq(stat_of(p, "fx_tag.forwards"), (uint64_t)(2 + b), "nothing reset");
        run_tag(MXP_DTYPE_F32, 1, s4);
        cr_expect_eq(stat_of(p, "fx_tag.forwards"), (uint64_t)(3 + b), "the running build keeps counting");
    }
    cr_expect_str_eq(mxp_pack_version(p), "2.0.0");
}

Test(pack_stats, a_pack_that_fails_to_load_publishes_none) {
    rfx_install(RFX_SO("reload_badstat"));
    const mxp_pack *p = mxp_pack_find("fx-reload");
    cr_assert_neq(mxp_pack_load("fx-reload"), MXP_OK);
    cr_expect(strstr(mxp_last_error(), "fx-reload") && strstr(mxp_last_error(), "'fx_tag.forwards' registered twice"),
              "%s", mxp_last_error());
    mxp_pack_stat *st = NULL;
    int n = -1;
    cr_assert_eq(mxp_pack_stats(p, &st, &n), MXP_OK);
    cr_expect_eq(n, 0);
    /* A good build loads afterwards, with its counters. */
    rfx_install(RFX_SO("reload_v1"));
    cr_assert_eq(mxp_pack_reload("fx-reload"), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(stat_of(p, "fx_tag.build"), 1);
}
