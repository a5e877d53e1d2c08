/* test_plan_json.c — mxp_executor_memory_plan_json, the plan `mxplug viz
 * --plan` draws: for the MLP (data (5,6), hidden 7, classes 4) the planned
 * values are the six worked out by hand (three op outputs that are not
 * heads, three gradients), with their bytes; totals agree with
 * mxp_executor_memory and with the blocks and values listed; values that
 * share a block never live at the same time (at most a shared step, where
 * an inplace op hands its input's bytes to its output); each step index is
 * a step of the program. */
#include "exec_test_util.h"

#include <jansson.h>

Test(plan_json, mlp_plan_values_blocks_and_lifetimes) {
    mxp_symbol *sym = et_mlp(7, 4);
    mxp_shape d = {.ndim = 2, .dims = {5, 6}};
    const char *nm[] = {"data"};
    mxp_executor *ex = et_bind(sym, MXP_DTYPE_F32, 1, nm, &d, 5, MXP_REQ_WRITE, "softmax_label", 4);
    char *text = NULL;
    cr_assert_eq(mxp_executor_memory_plan_json(ex, &text), MXP_OK, "%s", mxp_last_error());
    json_error_t err;
    json_t *doc = json_loads(text, 0, &err);
    cr_assert(doc, "%s: %s", err.text, text);
    uint64_t planned = 0, naive = 0;
    cr_assert_eq(mxp_executor_memory(ex, &planned, &naive), MXP_OK);
    cr_assert_eq((uint64_t)json_integer_value(json_object_get(doc, "planned_bytes")), planned);
    cr_assert_eq((uint64_t)json_integer_value(json_object_get(doc, "naive_bytes")), naive);
    json_t *steps = json_object_get(doc, "steps"), *blocks = json_object_get(doc, "blocks"),
           *values = json_object_get(doc, "values");
    int ns = (int)json_array_size(steps), nb = (int)json_array_size(blocks), nv = (int)json_array_size(values);
    cr_assert_eq(json_integer_value(json_object_get(doc, "n_forward_steps")), 4);
    cr_assert_str_eq(json_string_value(json_array_get(steps, 0)), "fc1 (FullyConnected)");
    cr_assert_str_eq(json_string_value(json_array_get(steps, 4)), "softmax (_backward_SoftmaxOutput)");
    uint64_t sum_blocks = 0, sum_values = 0;
    for (int b = 0; b < nb; b++) sum_blocks += (uint64_t)json_integer_value(json_object_get(json_array_get(blocks, (size_t)b), "bytes"));
    cr_assert_eq(sum_blocks, planned);
    /* By hand: fc1_output, relu1_output (5,7) and fc2_output (5,4); the
     * gradients of the three; float32. */
    static const struct { const char *name; uint64_t bytes; } want[] = {
        {"fc1_output", 140}, {"relu1_output", 140}, {"fc2_output", 80},
        {"grad of fc2_output", 80}, {"grad of relu1_output", 140}, {"grad of fc1_output", 140}};
    cr_assert_eq(nv, 6, "%s", text);
    int seen[6] = {0};
    for (int i = 0; i < nv; i++) {
        json_t *v = json_array_get(values, (size_t)i);
        const char *name = json_string_value(json_object_get(v, "name"));
        uint64_t bytes = (uint64_t)json_integer_value(json_object_get(v, "bytes"));
        int k = 0;
        while (k < 6 && strcmp(want[k].name, name)) k++;
        cr_assert(k < 6, "unexpected planned value '%s'", name);
        cr_assert_eq(bytes, want[k].bytes, "%s", name);
        seen[k]++;
        sum_values += bytes;
        int b = (int)json_integer_value(json_object_get(v, "block"));
        int lo = (int)json_integer_value(json_object_get(v, "first")), hi = (int)json_integer_value(json_object_get(v, "last"));
        cr_assert(b >= 0 && b < nb && 0 <= lo && lo <= hi && hi < ns, "%s: block %d steps %d..%d", name, b, lo, hi);
        cr_assert_leq(bytes, (uint64_t)json_integer_value(json_object_get(json_array_get(blocks, (size_t)b), "bytes")));
        for (int j = 0; j < i; j++) {
            json_t *u = json_array_get(values, (size_t)j);
            if (json_integer_value(json_object_get(u, "block")) != b) continue;
            int ulo = (int)json_integer_value(json_object_get(u, "first")), uhi = (int)json_integer_value(json_object_get(u, "last"));
            int overlap = (lo < uhi && ulo < hi) || (lo == ulo);
            cr_assert(!overlap, "%s [%d,%d] and %s [%d,%d] share block %d while both live", name, lo, hi,
                      json_string_value(json_object_get(u, "name")), ulo, uhi, b);
        }
    }
    for (int k = 0; k < 6; k++) cr_assert_eq(seen[k], 1, "%s listed %d times", want[k].name, seen[k]);
    cr_assert_eq(sum_values, naive);
    cr_assert_eq(naive, 720);
    cr_assert_lt(planned, naive, "the MLP's plan reuses storage");
    json_decref(doc);
    mxp_free(text);
    mxp_executor_free(ex);
    mxp_symbol_release(sym);
}
