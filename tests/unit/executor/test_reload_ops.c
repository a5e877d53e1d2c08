/* test_reload_ops.c — mxp_pack_reload when the rebuilt pack defines other
 * ops: the ones it drops are removed, the ones it adds appear, and a
 * bound executor that still uses a dropped op refuses the reload.
 *
 * fx-reload is first the build reload_ops_a (tag 6: fx_tag and fx_old,
 * alias fx_old_alias), then reload_ops_b (tag 7: fx_tag and fx_new),
 * installed by rename with its manifest rewritten, as a developer's
 * rebuild does (tests/support/reload_fixture.h).  Checked:
 *   - after the reload fx_old and its alias are gone from lookups, the op
 *     list and `mxp_invoke` (a clear error naming the op), a symbol naming
 *     it no longer loads and one loaded before no longer binds; fx_new and
 *     its alias resolve, run, and count in mxp_op_count; a handle to
 *     fx_old taken before the reload stays a valid pointer;
 *   - a build that defines fx_old again brings back the same entry, with
 *     the runtime's call counts of its impl;
 *   - while a bound executor has a node of fx_old, the reload is refused
 *     (MXP_EBUSY naming fx_old), the old build stays in service (version,
 *     counters, ops) and the executor keeps running; once it is freed the
 *     reload goes through, and an executor using only fx_tag, bound the
 *     whole time, runs the new build from its next forward. */
#include "../op/op_test_util.h"

#include "reload_fixture.h"

static void setup(void) { rfx_setup(RFX_SO("reload_ops_a"), "fx_old"); }
static void teardown(void) {
    mxp_engine_wait_for_all();
    rfx_teardown();
}
TestSuite(reload_ops, .init = setup, .fini = teardown);

static const char *json_old =
    "{\"nodes\": [{\"op\": \"null\", \"name\": \"data\", \"inputs\": []},"
    "{\"op\": \"fx_old\", \"name\": \"old1\", \"inputs\": [[0, 0, 0]]}],"
    " \"arg_nodes\": [0], \"heads\": [[1, 0, 0]]}";
static const char *json_tag =
    "{\"nodes\": [{\"op\": \"null\", \"name\": \"data\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"t_tag\", \"inputs\": []},"
    "{\"op\": \"fx_tag\", \"name\": \"t\", \"inputs\": [[0, 0, 0], [1, 0, 0]]}],"
    " \"arg_nodes\": [0, 1], \"heads\": [[2, 0, 0]]}";

/* Run op (an identity) on [0.5, 1.5, ..., 5.5] through mxp_invoke: MXP_OK
 * with the values checked, or the failure status. */
static int invoke_identity(const char *op) {
    int64_t shape[2] = {2, 3};
    double in[6] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5};
    mxp_ndarray *x = opx_arr(MXP_DTYPE_F32, 2, shape, in), *outs[2] = {NULL, NULL};
    int n_out = 2;
    int rc = mxp_invoke(op, 1, &x, &n_out, outs, 0, NULL, NULL);
    if (!rc) {
        double *v = opx_read(outs[0]);
        for (int i = 0; i < 6; i++) cr_expect_eq(v[i], in[i], "%s[%d]", op, i);
        free(v);
    }
    mxp_ndarray_release(x);
    mxp_ndarray_release(outs[0]);
    mxp_ndarray_release(outs[1]);
    return rc;
}

static int in_op_list(const char *name) {
    for (int i = 0; i < mxp_op_count(); i++)
        if (!strcmp(mxp_op_name(mxp_op_at(i)), name)) return 1;
    return 0;
}

static void rebuild(const char *so, const char *extra_op) {
    rfx_install(so);
    rfx_write_manifest(extra_op);
}

static mxp_executor *bind(const char *json, mxp_symbol **out_sym) {
    cr_assert_eq(mxp_symbol_load_json(json, out_sym), MXP_OK, "%s", mxp_last_error());
    const char *names[] = {"data"};
    mxp_shape shapes[1] = {{.ndim = 2, .dims = {2, 3}}};
    mxp_executor *ex = NULL;
    cr_assert_eq(mxp_executor_simple_bind(*out_sym, opx_cpu, 1, names, shapes, MXP_REQ_NULL, 0, NULL, &ex), MXP_OK,
                 "%s", mxp_last_error());
    int n;
    mxp_ndarray *const *args;
    cr_assert_eq(mxp_executor_args(ex, &n, &args), MXP_OK);
    float x[6] = {1, 2, 3, 4, 5, 6};
    cr_assert_eq(mxp_ndarray_sync_copy_from(args[0], x, sizeof x), MXP_OK);
    return ex;
}

/* Forward, check the identity output; returns aux[0][0] (fx_tag's build
 * tag) when the net has an aux state, else 0. */
static double forward(mxp_executor *ex) {
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK, "%s", mxp_last_error());
    int n;
    mxp_ndarray *const *outs;
    cr_assert_eq(mxp_executor_outputs(ex, &n, &outs), MXP_OK);
    float y[6];
    cr_assert_eq(mxp_ndarray_sync_copy_to(outs[0], y, sizeof y), MXP_OK, "%s", mxp_last_error());
    for (int i = 0; i < 6; i++) cr_expect_eq(y[i], (float)(i + 1));
    mxp_ndarray *const *aux;
    cr_assert_eq(mxp_executor_aux(ex, &n, &aux), MXP_OK);
    if (!n) return 0;
    float tag[2];
    cr_assert_eq(mxp_ndarray_sync_copy_to(aux[0], tag, sizeof tag), MXP_OK);
    return tag[0];
}

Test(reload_ops, a_dropped_op_is_removed_and_an_added_one_appears, .timeout = 120) {
    cr_assert_eq(mxp_pack_load("fx-reload"), MXP_OK, "%s", mxp_last_error());
    const mxp_op *old_op = mxp_op_find("fx_old");
    cr_assert(old_op);
    cr_expect_eq(mxp_op_find("fx_old_alias"), old_op);
    cr_expect_null(mxp_op_find("fx_new"));
    int n0 = mxp_op_count();
    cr_expect(in_op_list("fx_old"));
    cr_assert_eq(invoke_identity("fx_old"), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(invoke_identity("fx_old_alias"), MXP_OK, "%s", mxp_last_error());
    uint64_t calls_before = 0;
    cr_assert_eq(mxp_op_impl_stats(old_op, 0, &calls_before, NULL, NULL, NULL), MXP_OK);
    cr_expect_eq(calls_before, 2);
    mxp_symbol *sym_before = NULL; /* loaded while fx_old exists */
    cr_assert_eq(mxp_symbol_load_json(json_old, &sym_before), MXP_OK, "%s", mxp_last_error());

    rebuild(RFX_SO("reload_ops_b"), "fx_new");
    cr_assert_eq(mxp_pack_reload("fx-reload"), MXP_OK, "%s", mxp_last_error());
    cr_expect_str_eq(mxp_pack_version(mxp_pack_find("fx-reload")), "7.0.0");
    cr_expect_null(mxp_op_find("fx_old"), "the dropped op is gone");
    cr_expect_null(mxp_op_find("fx_old_alias"), "and its alias");
    cr_expect(!in_op_list("fx_old"));
    const mxp_op *new_op = mxp_op_find("fx_new");
    cr_assert(new_op, "the added op appears");
    cr_expect_eq(mxp_op_find("fx_new_alias"), new_op);
    cr_expect_str_eq(mxp_op_pack(new_op), "fx-reload");
    cr_expect(in_op_list("fx_new"));
    cr_expect_eq(mxp_op_count(), n0, "one op removed, one added");
    cr_expect_str_eq(mxp_op_name(old_op), "fx_old", "a handle taken before stays valid");

    cr_expect_eq(invoke_identity("fx_old"), MXP_ENOENT);
    cr_expect(strstr(mxp_last_error(), "op 'fx_old': pack 'fx-reload' no longer defines it"), "%s", mxp_last_error());
    fprintf(stderr, "reload_ops: invoking the dropped op: %s\n", mxp_last_error());
    cr_assert_eq(invoke_identity("fx_new"), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(invoke_identity("fx_new_alias"), MXP_OK, "%s", mxp_last_error());
    mxp_symbol *s = NULL;
    cr_expect_neq(mxp_symbol_load_json(json_old, &s), MXP_OK, "a symbol naming the dropped op no longer loads");
    cr_expect(strstr(mxp_last_error(), "fx_old"), "%s", mxp_last_error());
    mxp_symbol_release(s);
    const char *names[] = {"data"};
    mxp_shape shapes[1] = {{.ndim = 2, .dims = {2, 3}}};
    mxp_executor *ex = NULL;
    cr_expect_neq(mxp_executor_simple_bind(sym_before, opx_cpu, 1, names, shapes, MXP_REQ_NULL, 0, NULL, &ex), MXP_OK,
                  "a symbol loaded before the reload does not bind the dropped op");
    cr_expect(strstr(mxp_last_error(), "op 'fx_old': pack 'fx-reload' no longer defines it"), "%s", mxp_last_error());
    fprintf(stderr, "reload_ops: binding a symbol loaded before: %s\n", mxp_last_error());
    mxp_executor_free(ex);

    /* A later build defines fx_old again: the same entry comes back. */
    rebuild(RFX_SO("reload_ops_a"), "fx_old");
    cr_assert_eq(mxp_pack_reload("fx-reload"), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(mxp_op_find("fx_old"), old_op);
    cr_expect_eq(mxp_op_find("fx_old_alias"), old_op);
    cr_expect_null(mxp_op_find("fx_new"));
    cr_expect_null(mxp_op_find("fx_new_alias"));
    cr_expect_eq(mxp_op_count(), n0);
    cr_assert_eq(invoke_identity("fx_old"), MXP_OK, "%s", mxp_last_error());
    uint64_t calls_after = 0;
    cr_assert_eq(mxp_op_impl_stats(old_op, 0, &calls_after, NULL, NULL, NULL), MXP_OK);
    cr_expect_eq(calls_after, calls_before + 1, "its impl's call count carried over");
    cr_assert_eq(mxp_executor_simple_bind(sym_before, opx_cpu, 1, names, shapes, MXP_REQ_NULL, 0, NULL, &ex), MXP_OK,
                 "%s", mxp_last_error());
    mxp_executor_free(ex);
    mxp_symbol_release(sym_before);
}

Test(reload_ops, a_bound_executor_using_a_dropped_op_refuses_the_reload, .timeout = 120) {
    mxp_symbol *sym_old, *sym_tag;
    mxp_executor *ex_old = bind(json_old, &sym_old);
    mxp_executor *ex_tag = bind(json_tag, &sym_tag); /* uses only fx_tag, which stays */
    forward(ex_old);
    cr_expect_eq(forward(ex_tag), 6.0);
    const mxp_pack *p = mxp_pack_find("fx-reload");

    rebuild(RFX_SO("reload_ops_b"), "fx_new");
    int rc = mxp_pack_reload("fx-reload");
    cr_expect_eq(rc, MXP_EBUSY, "%s", mxp_last_error());
    const char *e = mxp_last_error();
    fprintf(stderr, "reload_ops: refused as expected: %s\n", e);
    cr_expect(strstr(e, "'fx_old'") && strstr(e, "1 node") && strstr(e, "stays in service") &&
              strstr(e, "fx-reload"), "the refusal names the pack, the op and its users: %s", e);
    cr_expect_str_eq(mxp_pack_version(p), "6.0.0");
    cr_expect(mxp_op_find("fx_old") && !mxp_op_find("fx_new"), "the old build's ops stay");
    uint64_t build = 0;
    cr_assert_eq(mxp_pack_stat_value(p, "fx_tag.build", &build), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(build, 6);
    forward(ex_old); /* still runs */
    cr_expect_eq(forward(ex_tag), 6.0);

    mxp_executor_free(ex_old);
    mxp_symbol_release(sym_old);
    cr_assert_eq(mxp_pack_reload("fx-reload"), MXP_OK, "%s", mxp_last_error());
    cr_expect_str_eq(mxp_pack_version(p), "7.0.0");
    cr_expect_null(mxp_op_find("fx_old"));
    cr_expect(mxp_op_find("fx_new"));
    cr_expect_eq(forward(ex_tag), 7.0, "the executor that kept its ops runs the new build");
    cr_assert_eq(mxp_pack_stat_value(p, "fx_tag.build", &build), MXP_OK);
    cr_expect_eq(build, 7);
    mxp_executor_free(ex_tag);
    mxp_symbol_release(sym_tag);
}
