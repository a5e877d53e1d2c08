/* test_plan.c — the memory plan, checked independently: from the program's
 * steps the test computes each planned value's live interval itself and
 * asserts that no two values sharing storage are live at once, except an
 * inplace pair the op declared at the step where one dies and the other is
 * born; blocks are big enough.  Results with the plan are bit-identical to
 * results without it (MXP_EXEC_MEMPLAN=0).  Prints planned vs naive bytes
 * for an MLP and the LeNet training graph at batch 64. */
#include "exec_test_util.h"

#include "executor/executor.h"

static void check_plan_independently(mxp_executor *ex) {
    const mxp__program *p = mxp__executor_program(ex);
    const mxp__plan *pl = mxp__executor_plan(ex);
    int nv = p->n_values;
    int *def = malloc((size_t)nv * sizeof *def), *last = malloc((size_t)nv * sizeof *last);
    for (int v = 0; v < nv; v++) def[v] = last[v] = -1;
    for (int s = 0; s < p->n_steps; s++) {
        const mxp__step *st = &p->steps[s];
        /* Reads and writes straight from the slot arrays (not via the
         * library's step_reads/step_writes). */
        const int *rd[4] = {st->in, st->aux, NULL, NULL}, *wr[2] = {st->out, st->aux};
        int nrd[4] = {st->n_in, st->n_aux, 0, 0}, nwr[2] = {st->n_out, st->n_aux};
        if (st->kind == MXP_STEP_BWD) {
            rd[0] = st->og, nrd[0] = st->n_out;
            rd[1] = st->in, nrd[1] = st->n_in;
            rd[2] = st->out, nrd[2] = st->n_out;
            rd[3] = st->aux, nrd[3] = st->n_aux;
            wr[0] = st->ig, nwr[0] = st->n_in;
            nwr[1] = 0;
        } else if (st->kind == MXP_STEP_SUM) {
            nrd[1] = 0;
            nwr[1] = 0;
        }
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < nwr[k]; i++)
                if (wr[k][i] >= 0 && def[wr[k][i]] < 0) def[wr[k][i]] = s;
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < nrd[k]; i++)
                if (rd[k] && rd[k][i] >= 0) last[rd[k][i]] = s;
    }
    int planned = 0;
    for (int v = 0; v < nv; v++) {
        const mxp__value *val = &p->values[v];
        int want = (val->kind == MXP_VAL_OUT && !val->persistent) || val->kind == MXP_VAL_GRAD;
        cr_assert_eq(pl->value_block[v] >= 0, want, "value %d kind %d: planned %d", v, val->kind, pl->value_block[v]);
        if (!want) continue;
        planned++;
        cr_assert(def[v] >= 0, "value %d never written", v);
        if (last[v] < def[v]) last[v] = def[v];
        int b = pl->value_block[v];
        int64_t n = 1;
        for (int i = 0; i < val->shape.ndim; i++) n *= val->shape.dims[i];
        cr_assert_geq(pl->block_bytes[b], (uint64_t)n * mxp_dtype_size(val->dtype));
        cr_assert_eq(pl->block_dtype[b], val->dtype);
    }
    cr_assert_gt(planned, 0);
    int overlaps_ok = 0;
    for (int u = 0; u < nv; u++) {
        if (pl->value_block[u] < 0) continue;
        for (int v = u + 1; v < nv; v++) {
            if (pl->value_block[v] != pl->value_block[u]) continue;
            if (!(def[u] <= last[v] && def[v] <= last[u])) continue;
            /* Overlap: only an inplace handover at one step. */
            int a = def[u] < def[v] ? u : v, b = a == u ? v : u;
            cr_assert_eq(last[a], def[b], "values %d [%d,%d] and %d [%d,%d] share block %d while both live", u, def[u],
                         last[u], v, def[v], last[v], pl->value_block[u]);
            const mxp__step *st = &p->steps[def[b]];
            int declared = 0;
            for (int k = 0; k < st->n_inplace; k++) declared |= st->inplace[k][0] == a && st->inplace[k][1] == b;
            cr_assert(declared, "values %d and %d share storage at step %d without a declared inplace pair", a, b,
                      def[b]);
            overlaps_ok++;
        }
    }
    cr_assert_eq(overlaps_ok, pl->n_inplace, "every recorded inplace pair is the only kind of overlap");
    free(def);
    free(last);
}

static mxp_symbol *mlp_big(void) {
    mxp_symbol *data = gt_var("data");
    mxp_symbol *fc1 = gt_op("FullyConnected", "fc1", 1, &data, "num_hidden=128", NULL);
    mxp_symbol *a1 = gt_op("Activation", "relu1", 1, &fc1, "act_type=relu", NULL);
    mxp_symbol *fc2 = gt_op("FullyConnected", "fc2", 1, &a1, "num_hidden=64", NULL);
    mxp_symbol *a2 = gt_op("Activation", "relu2", 1, &fc2, "act_type=relu", NULL);
    mxp_symbol *fc3 = gt_op("FullyConnected", "fc3", 1, &a2, "num_hidden=10", NULL);
    mxp_symbol *sm = gt_op("SoftmaxOutput", "softmax", 1, &fc3, NULL);
    mxp_symbol *all[] = {data, fc1, a1, fc2, a2, fc3};
    for (size_t i = 0; i < MXP_ARRAY_LEN(all); i++) mxp_symbol_release(all[i]);
    return sm;
}

/* Run forward(train)+backward twice; return the bytes of outputs, grads
 * and aux states concatenated. */
static void *run_all(mxp_executor *ex, size_t *out_len) {
    for (int rep = 0; rep < 2; rep++) {
        cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
        cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    }
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    size_t len = 0, cap = 1 << 20;
    char *buf = malloc(cap);
    mxp_ndarray *const *lists[3];
    int ns[3];
    mxp_executor_outputs(ex, &ns[0], &lists[0]);
    mxp_executor_grads(ex, &ns[1], &lists[1]);
    mxp_executor_aux(ex, &ns[2], &lists[2]);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < ns[k]; i++) {
            mxp_ndarray *a = lists[k][i];
            if (!a) continue;
            size_t nb = mxp_ndarray_nbytes(a);
            while (len + nb > cap) buf = realloc(buf, cap *= 2);
            void *b = et_bytes(a);
            memcpy(buf + len, b, nb);
            free(b);
            len += nb;
        }
    *out_len = len;
    return buf;
}

static void plan_vs_noplan(mxp_symbol *sym, int n, const char *const *names, const mxp_shape *shapes, int classes,
                           const char *what) {
    mxp_executor *ex = et_bind(sym, MXP_DTYPE_F32, n, names, shapes, 42, MXP_REQ_WRITE, "softmax_label", classes);
    check_plan_independently(ex);
    uint64_t planned, naive;
    cr_assert_eq(mxp_executor_memory(ex, &planned, &naive), MXP_OK);
    cr_assert_lt(planned, naive, "%s: planning saved nothing", what);
    cr_log_info("%s: planned %llu bytes vs naive %llu bytes (%d inplace pairs)", what, (unsigned long long)planned,
                (unsigned long long)naive, mxp__executor_plan(ex)->n_inplace);
    fprintf(stderr, "[plan] %s: planned %llu bytes vs naive %llu bytes (%.1f%%), %d inplace pairs, %d blocks\n", what,
            (unsigned long long)planned, (unsigned long long)naive, 100.0 * (double)planned / (double)naive,
            mxp__executor_plan(ex)->n_inplace, mxp__executor_plan(ex)->n_blocks);
    cr_assert_gt(mxp__executor_plan(ex)->n_inplace, 0, "%s: no inplace sharing", what);
    size_t la, lb;
    void *a = run_all(ex, &la);
    setenv("MXP_EXEC_MEMPLAN", "0", 1);
    mxp_executor *ex0 = et_bind(sym, MXP_DTYPE_F32, n, names, shapes, 42, MXP_REQ_WRITE, "softmax_label", classes);
    unsetenv("MXP_EXEC_MEMPLAN");
    uint64_t p0, n0;
    mxp_executor_memory(ex0, &p0, &n0);
    cr_assert_eq(p0, n0, "unplanned: every value on its own");
    cr_assert_eq(mxp__executor_plan(ex0)->n_inplace, 0);
    void *b = run_all(ex0, &lb);
    cr_assert_eq(la, lb);
    cr_assert(!memcmp(a, b, la), "%s: results with the plan differ from results without it", what);
    free(a);
    free(b);
    mxp_executor_free(ex0);
    mxp_executor_free(ex);
}

Test(plan, mlp_plan_is_sound_and_bit_identical) {
    mxp_symbol *sym = mlp_big();
    mxp_shape d = {.ndim = 2, .dims = {64, 784}};
    const char *nm[] = {"data"};
    plan_vs_noplan(sym, 1, nm, &d, 10, "MLP 784-128-64-10, batch 64, training");
    mxp_symbol_release(sym);
}

Test(plan, lenet_plan_is_sound_and_bit_identical) {
    mxp_symbol *sym = NULL;
    cr_assert_eq(mxp_symbol_load_file(GT_FIXTURE("lenet_bn.json"), &sym), MXP_OK, "%s", mxp_last_error());
    mxp_shape d = {.ndim = 4, .dims = {64, 1, 28, 28}};
    const char *nm[] = {"data"};
    plan_vs_noplan(sym, 1, nm, &d, 10, "LeNet+BN (fixture), batch 64, training");
    mxp_symbol_release(sym);
}

Test(plan, shared_input_sum_plan_is_sound) {
    mxp_symbol *x = gt_var("x");
    mxp_symbol *t = gt_op("Activation", "t", 1, &x, "act_type=tanh", NULL);
    mxp_symbol *sq = gt_op("elemwise_mul", "sq", 2, (mxp_symbol *[]){t, t}, NULL);
    mxp_symbol *y = gt_op("elemwise_add", "y", 2, (mxp_symbol *[]){sq, t}, NULL);
    mxp_shape s = {.ndim = 2, .dims = {8, 8}};
    const char *nm[] = {"x"};
    mxp_executor *ex = et_bind(y, MXP_DTYPE_F32, 1, nm, &s, 1, MXP_REQ_WRITE, NULL, 1);
    check_plan_independently(ex);
    const mxp__program *p = mxp__executor_program(ex);
    int sums = 0;
    for (int i = 0; i < p->n_steps; i++) sums += p->steps[i].kind == MXP_STEP_SUM;
    cr_assert_eq(sums, 1, "t's three gradient contributions are summed once");
    mxp_executor_free(ex);
    mxp_symbol_release(y);
    mxp_symbol_release(sq);
    mxp_symbol_release(t);
    mxp_symbol_release(x);
}
