/* test_profiler.c — the profiler's trace and table, read back as a user's
 * tool reads them: the Chrome-trace JSON parsed with jansson.
 *   - An MLP (fc1 -> relu1 -> fc2 -> softmax) trained for 3 steps: every op
 *     forward and backward appears exactly once per step, in dependency
 *     order; durations, timestamps and lanes are consistent (every lane is
 *     named, slices on one lane nest, each op lies inside its engine
 *     function); shapes and bytes match the ones computed here.
 *   - The per-op table's calls and totals equal the sums over the JSON's op
 *     events, rows sorted by total.
 *   - Memory counters follow an allocation and its free; config keys are
 *     checked; a kind turned off records nothing; a full buffer drops and
 *     says so; nothing is recorded after stop; a dump to a missing
 *     directory fails naming the file. */
#include "../executor/exec_test_util.h"

#include <jansson.h>
#include <unistd.h>

static char *tmp_path(const char *name) {
    static char buf[256];
    snprintf(buf, sizeof buf, "/tmp/mxp-prof-%d-%s", (int)getpid(), name);
    return buf;
}

/* The MLP bound with data (5,6), hidden 7, classes 4. */
static mxp_executor *bind_mlp(mxp_symbol **out_sym) {
    mxp_symbol *sym = et_mlp(7, 4);
    mxp_shape d = {.ndim = 2, .dims = {5, 6}};
    const char *nm[] = {"data"};
    *out_sym = sym;
    return et_bind(sym, MXP_DTYPE_F32, 1, nm, &d, 77, MXP_REQ_WRITE, "softmax_label", 4);
}

static void run_steps(mxp_executor *ex, int n) {
    for (int s = 0; s < n; s++) {
        cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
        cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
        cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    }
}

static json_t *load_trace(const char *path) {
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    cr_assert(root, "%s: line %d: %s", path, err.line, err.text);
    cr_assert(json_is_array(json_object_get(root, "traceEvents")));
    return root;
}

static const char *str_of(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : "";
}

static double num_of(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    cr_assert(json_is_number(v), "event field '%s' missing or not a number", k);
    return json_number_value(v);
}

/* The op events (cat "op") named `name` on node `node`, in time order. */
static int op_events(json_t *evs, const char *name, const char *node, json_t **out, int cap) {
    int n = 0;
    size_t i;
    json_t *e;
    json_array_foreach(evs, i, e) {
        if (strcmp(str_of(e, "cat"), "op") || strcmp(str_of(e, "name"), name)) continue;
        if (strcmp(str_of(json_object_get(e, "args"), "node"), node)) continue;
        cr_assert(n < cap);
        out[n++] = e;
    }
    for (int a = 1; a < n; a++) /* insertion sort by ts */
        for (int b = a; b > 0 && num_of(out[b], "ts") < num_of(out[b - 1], "ts"); b--) {
            json_t *t = out[b];
            out[b] = out[b - 1];
            out[b - 1] = t;
        }
    return n;
}

static double end_of(json_t *e) { return num_of(e, "ts") + num_of(e, "dur"); }

enum { STEPS = 3 };

Test(profiler, mlp_trace_has_each_op_once_per_step_in_dependency_order) {
    mxp_symbol *sym;
    mxp_executor *ex = bind_mlp(&sym);
    run_steps(ex, 1); /* warm: impls chosen, instances created */
    const char *path = tmp_path("mlp.json");
    const char *k[] = {"filename", "profile_all"}, *v[] = {path, "1"};
    cr_assert_eq(mxp_profiler_set_config(2, k, v), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_profiler_start(), MXP_OK);
    cr_assert_eq(mxp_profiler_is_running(), 1);
    run_steps(ex, STEPS);
    cr_assert_eq(mxp_profiler_stop(), MXP_OK);
    cr_assert_eq(mxp_profiler_is_running(), 0);
    cr_assert_eq(mxp_profiler_dump(), MXP_OK, "%s", mxp_last_error());
    json_t *root = load_trace(path);
    json_t *evs = json_object_get(root, "traceEvents");
    json_t *other = json_object_get(root, "otherData");
    cr_assert_eq(num_of(other, "dropped_events"), 0);
    double wall = num_of(other, "wall_us");

    /* Each op once per step; forward chain, then the backward chain. */
    static const char *const chain[][2] = {
        {"FullyConnected", "fc1"}, {"Activation", "relu1"}, {"FullyConnected", "fc2"}, {"SoftmaxOutput", "softmax"},
        {"_backward_SoftmaxOutput", "softmax"}, {"_backward_FullyConnected", "fc2"},
        {"_backward_Activation", "relu1"}, {"_backward_FullyConnected", "fc1"}};
    enum { N_CHAIN = sizeof chain / sizeof *chain };
    json_t *ev[N_CHAIN][8];
    for (int c = 0; c < N_CHAIN; c++)
        cr_assert_eq(op_events(evs, chain[c][0], chain[c][1], ev[c], 8), STEPS, "%s on %s: want %d events",
                     chain[c][0], chain[c][1], STEPS);
    for (int s = 0; s < STEPS; s++) {
        for (int c = 1; c < N_CHAIN; c++)
            cr_assert(end_of(ev[c - 1][s]) <= num_of(ev[c][s], "ts"), "step %d: %s (%s) ends at %.3f after %s starts at %.3f",
                      s, chain[c - 1][0], chain[c - 1][1], end_of(ev[c - 1][s]), chain[c][0], num_of(ev[c][s], "ts"));
        if (s + 1 < STEPS) cr_assert(end_of(ev[N_CHAIN - 1][s]) <= num_of(ev[0][s + 1], "ts"));
    }
    /* Shapes and bytes of fc1's forward: in (5,6) (7,6) (7), out (5,7). */
    json_t *a = json_object_get(ev[0][0], "args");
    cr_assert_str_eq(str_of(a, "shapes"), "in [5,6] [7,6] [7]; out [5,7]");
    cr_assert_eq(num_of(a, "bytes"), (5 * 6 + 7 * 6 + 7 + 5 * 7) * 4.0);
    cr_assert(str_of(a, "impl")[0], "op events name their impl");

    /* Lanes, times and nesting. */
    size_t i;
    json_t *e;
    int named[4096] = {0};
    json_array_foreach(evs, i, e) {
        if (!strcmp(str_of(e, "ph"), "M") && !strcmp(str_of(e, "name"), "thread_name")) {
            int tid = (int)num_of(e, "tid");
            cr_assert(tid > 0 && tid < 4096);
            named[tid] = 1;
        }
    }
    json_t *x[4096];
    int nx = 0;
    json_array_foreach(evs, i, e) {
        const char *ph = str_of(e, "ph");
        if (!strcmp(ph, "M")) continue;
        cr_assert_eq(num_of(e, "pid"), (double)getpid());
        double ts = num_of(e, "ts");
        cr_assert(ts >= 0 && ts <= wall + 1e-3, "ts %.3f outside the session (wall %.3f)", ts, wall);
        if (strcmp(ph, "X")) continue;
        cr_assert(num_of(e, "dur") >= 0);
        cr_assert(end_of(e) <= wall + 1e-3);
        int tid = (int)num_of(e, "tid");
        cr_assert(tid > 0 && tid < 4096 && named[tid], "lane %d has no thread_name", tid);
        cr_assert(nx < 4096);
        x[nx++] = e;
    }
    /* Slices of one lane: sorted by start, each one either after the
     * enclosing ones or inside them (a stack). */
    for (int a1 = 1; a1 < nx; a1++)
        for (int b = a1; b > 0; b--) {
            double tb = num_of(x[b], "ts"), ta = num_of(x[b - 1], "ts");
            if (tb > ta || (tb == ta && num_of(x[b], "dur") <= num_of(x[b - 1], "dur"))) break;
            json_t *t = x[b];
            x[b] = x[b - 1];
            x[b - 1] = t;
        }
    for (int a1 = 0; a1 < nx; a1++) {
        int tid = (int)num_of(x[a1], "tid");
        for (int b = a1 + 1; b < nx; b++) {
            if ((int)num_of(x[b], "tid") != tid) continue;
            if (num_of(x[b], "ts") >= end_of(x[a1])) break;
            cr_assert(end_of(x[b]) <= end_of(x[a1]) + 1e-3, "'%s' [%.3f, %.3f) overlaps '%s' [%.3f, %.3f) on lane %d",
                      str_of(x[b], "name"), num_of(x[b], "ts"), end_of(x[b]), str_of(x[a1], "name"),
                      num_of(x[a1], "ts"), end_of(x[a1]), tid);
        }
    }
    /* Each op inside its node's engine function, on the same lane. */
    for (int c = 0; c < N_CHAIN; c++)
        for (int s = 0; s < STEPS; s++) {
            json_t *op = ev[c][s];
            int found = 0;
            for (int b = 0; b < nx && !found; b++) {
                json_t *g = x[b];
                if (strcmp(str_of(g, "cat"), "engine") || num_of(g, "tid") != num_of(op, "tid")) continue;
                if (!strstr(str_of(g, "name"), chain[c][1])) continue;
                found = num_of(g, "ts") <= num_of(op, "ts") && end_of(op) <= end_of(g) + 1e-3;
                if (found) cr_assert(num_of(json_object_get(g, "args"), "queue_wait_us") >= 0);
            }
            cr_assert(found, "step %d: %s (%s) is not inside an engine function of its node", s, chain[c][0],
                      chain[c][1]);
        }
    json_decref(root);
    unlink(path);
    mxp_executor_free(ex);
    mxp_symbol_release(sym);
}

Test(profiler, table_totals_equal_the_sum_of_trace_events) {
    mxp_symbol *sym;
    mxp_executor *ex = bind_mlp(&sym);
    cr_assert_eq(mxp_profiler_start(), MXP_OK);
    run_steps(ex, STEPS);
    /* An imperative op too: its events carry no node. */
    mxp_shape s = {.ndim = 1, .dims = {16}};
    uint64_t seed = 3;
    mxp_ndarray *in = et_arr(MXP_DTYPE_F32, &s, &seed, 1.0), *out = NULL;
    int one = 1;
    const char *ka[] = {"act_type"}, *va[] = {"tanh"};
    cr_assert_eq(mxp_invoke("Activation", 1, &in, &one, &out, 1, ka, va), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_ndarray_wait_to_read(out), MXP_OK);
    cr_assert_eq(mxp_profiler_stop(), MXP_OK);
    const char *path = tmp_path("table.json");
    cr_assert_eq(mxp_profiler_dump_file(path), MXP_OK, "%s", mxp_last_error());
    char *table = NULL;
    cr_assert_eq(mxp_profiler_dumps(0, &table), MXP_OK, "%s", mxp_last_error());

    /* Sums from the JSON, per (name, impl). */
    json_t *root = load_trace(path);
    json_t *evs = json_object_get(root, "traceEvents");
    struct { char name[64], impl[32]; long calls; double us; } sum[64];
    int ns = 0, imperative = 0;
    size_t i;
    json_t *e;
    json_array_foreach(evs, i, e) {
        if (strcmp(str_of(e, "cat"), "op")) continue;
        json_t *a = json_object_get(e, "args");
        if (!strcmp(str_of(e, "name"), "Activation") && !str_of(a, "node")[0]) imperative++;
        int k = 0;
        while (k < ns && (strcmp(sum[k].name, str_of(e, "name")) || strcmp(sum[k].impl, str_of(a, "impl")))) k++;
        if (k == ns) {
            cr_assert(ns < 64);
            snprintf(sum[k].name, sizeof sum[k].name, "%s", str_of(e, "name"));
            snprintf(sum[k].impl, sizeof sum[k].impl, "%s", str_of(a, "impl"));
            sum[k].calls = 0;
            sum[k].us = 0;
            ns++;
        }
        sum[k].calls++;
        sum[k].us += num_of(e, "dur");
    }
    cr_assert_eq(imperative, 1, "the imperative Activation: one event without a node");
    /* Parse the table: a header line, a column line, then rows. */
    char *save = NULL, *line = strtok_r(table, "\n", &save);
    cr_assert(line && !strncmp(line, "Profile: ", 9), "table starts with its summary line: %s", line);
    line = strtok_r(NULL, "\n", &save);
    cr_assert(line && strstr(line, "Total ms"));
    int rows = 0;
    double prev_total = 1e300;
    while ((line = strtok_r(NULL, "\n", &save))) {
        char name[64], impl[32];
        long calls;
        double total, mean, mn, mx, pct;
        cr_assert_eq(sscanf(line, "%63s %31s %ld %lf %lf %lf %lf %lf", name, impl, &calls, &total, &mean, &mn, &mx, &pct),
                     8, "row: %s", line);
        int k = 0;
        while (k < ns && (strcmp(sum[k].name, name) || strcmp(sum[k].impl, impl))) k++;
        cr_assert(k < ns, "table row %s/%s has no events in the trace", name, impl);
        cr_assert_eq(calls, sum[k].calls, "%s/%s: %ld calls in the table, %ld events", name, impl, calls, sum[k].calls);
        cr_assert(fabs(total - sum[k].us / 1000.0) <= 0.0015, "%s/%s: total %.3f ms, events sum to %.4f ms", name, impl,
                  total, sum[k].us / 1000.0);
        cr_assert(mn <= mean + 0.001 && mean <= mx + 0.001);
        cr_assert(total <= prev_total, "rows sorted by total");
        prev_total = total;
        rows++;
    }
    cr_assert_eq(rows, ns, "one row per (op, impl): %d rows, %d kinds of events", rows, ns);
    mxp_free(table);
    json_decref(root);
    unlink(path);
    mxp_ndarray_release(in);
    mxp_ndarray_release(out);
    mxp_executor_free(ex);
    mxp_symbol_release(sym);
}

Test(profiler, memory_counters_follow_an_allocation_and_its_free) {
    const char *k[] = {"profile_all", "profile_memory"}, *v[] = {"0", "1"};
    cr_assert_eq(mxp_profiler_set_config(2, k, v), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_profiler_start(), MXP_OK);
    mxp_ndarray *a = NULL;
    int64_t dims[] = {1000, 1000};
    cr_assert_eq(mxp_ndarray_create(dims, 2, MXP_DTYPE_F32, et_cpu, &a), MXP_OK);
    cr_assert_eq(mxp_ndarray_wait_to_read(a), MXP_OK);
    mxp_ndarray_release(a);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(mxp_profiler_stop(), MXP_OK);
    const char *path = tmp_path("mem.json");
    cr_assert_eq(mxp_profiler_dump_file(path), MXP_OK, "%s", mxp_last_error());
    json_t *root = load_trace(path);
    size_t i;
    json_t *e;
    double max_in_use = -1, last_in_use = -1;
    int n = 0;
    json_array_foreach(json_object_get(root, "traceEvents"), i, e) {
        const char *ph = str_of(e, "ph");
        if (!strcmp(ph, "M")) continue;
        cr_assert_str_eq(ph, "C", "only memory counters were asked for, got '%s' (%s)", ph, str_of(e, "name"));
        cr_assert_str_eq(str_of(e, "name"), "memory cpu(0)");
        double u = num_of(json_object_get(e, "args"), "in_use");
        (void)num_of(json_object_get(e, "args"), "pooled");
        if (u > max_in_use) max_in_use = u;
        last_in_use = u;
        n++;
    }
    cr_assert_geq(n, 2, "an allocation and a free");
    cr_assert_geq(max_in_use - last_in_use, 4e6, "the 4 MB array was in use, then freed: max %.0f, last %.0f",
                  max_in_use, last_in_use);
    json_decref(root);
    unlink(path);
}

Test(profiler, config_states_drops_and_errors) {
    const char *bad[] = {"profile_everything"}, *one[] = {"1"};
    cr_assert_eq(mxp_profiler_set_config(1, bad, one), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "profile_everything"), "%s", mxp_last_error());
    const char *mk[] = {"max_events"}, *mv[] = {"lots"};
    cr_assert_eq(mxp_profiler_set_config(1, mk, mv), MXP_EINVAL);
    char *t = NULL;
    cr_assert_eq(mxp_profiler_dumps(0, &t), MXP_EINVAL, "no session yet");
    cr_assert_eq(mxp_profiler_dump_file(tmp_path("none.json")), MXP_EINVAL);

    const char *k[] = {"max_events", "profile_all", "profile_symbolic"}, *v[] = {"5", "0", "1"};
    cr_assert_eq(mxp_profiler_set_config(3, k, v), MXP_OK, "%s", mxp_last_error());
    mxp_symbol *sym;
    mxp_executor *ex = bind_mlp(&sym);
    cr_assert_eq(mxp_profiler_start(), MXP_OK);
    cr_assert_eq(mxp_profiler_set_config(3, k, v), MXP_EBUSY, "no reconfiguration while running");
    run_steps(ex, 2); /* 16 op events into a buffer of 5 */
    cr_assert_eq(mxp_profiler_stop(), MXP_OK);
    run_steps(ex, 1); /* after stop: nothing */
    const char *path = tmp_path("drop.json");
    cr_assert_eq(mxp_profiler_dump_file(path), MXP_OK, "%s", mxp_last_error());
    json_t *root = load_trace(path);
    json_t *other = json_object_get(root, "otherData");
    cr_assert_eq(num_of(other, "events"), 5);
    cr_assert_eq(num_of(other, "dropped_events"), 11);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(root, "traceEvents"), i, e)
        if (strcmp(str_of(e, "ph"), "M")) cr_assert_str_eq(str_of(e, "cat"), "op", "only op events were asked for");
    cr_assert_eq(mxp_profiler_dumps(1, &t), MXP_OK);
    cr_assert(strstr(t, "11 events dropped"), "%s", t);
    mxp_free(t);
    /* After the reset: an empty table. */
    cr_assert_eq(mxp_profiler_dumps(0, &t), MXP_OK);
    cr_assert(strstr(t, " 0 op calls"), "%s", t);
    mxp_free(t);
    cr_assert_eq(mxp_profiler_dump_file("/nonexistent-dir/x/trace.json"), MXP_EIO);
    cr_assert(strstr(mxp_last_error(), "trace.json"), "%s", mxp_last_error());
    json_decref(root);
    unlink(path);
    mxp_executor_free(ex);
    mxp_symbol_release(sym);
}
