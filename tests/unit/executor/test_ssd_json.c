/* test_ssd_json.c — a VGG-SSD-like training symbol in MXNet 1.x's JSON
 * layout (tests/data/symbol/ssd_tiny_train.json, from make_ssd_tiny.py:
 * MultiBoxPrior on two feature maps, MultiBoxTarget, SoftmaxOutput and
 * smooth_l1 losses, MultiBoxDetection, as MXNet's example/ssd builds it)
 * loads through the public API, infers MXNet's shapes, and runs a training
 * forward and backward: the targets follow the matching and 3:1 negative
 * mining rules, the detections are valid sorted rows, and the gradients
 * reach the first convolution through the loss heads (the MultiBox ops are
 * not differentiable, and the graph passes no gradient through them). */
#include "exec_test_util.h"

#define A_TOTAL (16 * 16 * 4 + 8 * 8 * 3) /* anchors: 4 per cell at 16x16, 3 at 8x8 */

static mxp_ndarray *find(mxp_executor *ex, mxp_symbol *sym, const char *name, int grad) { return et_arg(ex, sym, name, grad); }

Test(ssd_json, loads_infers_and_trains_one_step) {
    mxp_symbol *sym = NULL;
    cr_assert_eq(mxp_symbol_load_file(GT_FIXTURE("ssd_tiny_train.json"), &sym), MXP_OK, "%s", mxp_last_error());
    gt_list_eq(mxp_symbol_list_outputs, sym,
               (const char *const[]){"cls_prob_output", "loc_loss_output", "cls_label_output", "det_out_output", NULL});
    const char *names[] = {"data", "label"};
    const mxp_shape shapes[] = {{4, 0, {2, 3, 32, 32}}, {3, 0, {2, 3, 5}}};
    int na, no, nx, complete;
    mxp_shape *as, *os, *xs;
    cr_assert_eq(mxp_symbol_infer_shape(sym, 2, names, shapes, &na, &as, &no, &os, &nx, &xs, &complete), MXP_OK, "%s",
                 mxp_last_error());
    cr_assert_eq(complete, 1);
    cr_assert_eq(no, 4);
    const mxp_shape want[] = {{3, 0, {2, 4, A_TOTAL}}, {2, 0, {2, 4 * A_TOTAL}}, {2, 0, {2, A_TOTAL}}, {3, 0, {2, A_TOTAL, 6}}};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(os[i].ndim, want[i].ndim, "output %d rank", i);
        for (int d = 0; d < want[i].ndim; d++)
            cr_assert_eq(os[i].dims[d], want[i].dims[d], "output %d dim %d: %lld", i, d, (long long)os[i].dims[d]);
    }

    const char *const *an;
    cr_assert_eq(mxp_symbol_list_arguments(sym, &na, &an), MXP_OK);
    mxp_ndarray *args[32] = {0}, *grads[32] = {0};
    int reqs[32];
    uint64_t st = 42;
    cr_assert_leq(na, 32);
    for (int i = 0; i < na; i++) {
        int input = !strcmp(an[i], "data") || !strcmp(an[i], "label");
        args[i] = et_arr(MXP_DTYPE_F32, &as[i], &st, !strcmp(an[i], "data") ? 1.0 : 0.2);
        reqs[i] = input ? MXP_REQ_NULL : MXP_REQ_WRITE;
        if (!input) grads[i] = et_arr(MXP_DTYPE_F32, &as[i], NULL, 0.0);
    }
    mxp_executor *ex = NULL;
    cr_assert_eq(mxp_executor_bind(sym, et_cpu, na, args, grads, reqs, 0, NULL, &ex), MXP_OK, "%s", mxp_last_error());
    const double labels[2 * 3 * 5] = {0, 0.1, 0.1, 0.5, 0.45, 2, 0.55, 0.5, 0.9, 0.95, -1, -1, -1, -1, -1,
                                      1, 0.2, 0.3, 0.6, 0.7, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
    et_set(find(ex, sym, "label", 0), labels);
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    int n;
    mxp_ndarray *const *o;
    cr_assert_eq(mxp_executor_outputs(ex, &n, &o), MXP_OK);
    double *prob = et_read(o[0]), *cls = et_read(o[2]), *det = et_read(o[3]);

    /* cls_target: every label has an anchor (bipartite), 3 negatives per
     * positive (plenty of anchors below IoU 0.5), the rest ignored. */
    const int n_gt[2] = {2, 1};
    for (int b = 0; b < 2; b++) {
        int pos = 0, neg = 0, ign = 0;
        for (int j = 0; j < A_TOTAL; j++) {
            double c = cls[b * A_TOTAL + j];
            if (c > 0) {
                pos++;
                cr_assert(c == 1 || c == 2 || c == 3, "class %g", c);
            } else if (c == 0) {
                neg++;
            } else {
                ign++;
                cr_assert_eq(c, -1);
            }
        }
        cr_assert_geq(pos, n_gt[b], "batch %d: %d positives for %d labels", b, pos, n_gt[b]);
        cr_assert_eq(neg, 3 * pos, "batch %d: %d negatives for %d positives", b, neg, pos);
        cr_assert_eq(pos + neg + ign, A_TOTAL);
    }
    /* cls_prob: a distribution over the 4 classes at every anchor. */
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < A_TOTAL; j++) {
            double s = 0;
            for (int c = 0; c < 4; c++) s += prob[(b * 4 + c) * A_TOTAL + j];
            cr_assert(fabs(s - 1) < 1e-5, "softmax sums to %g", s);
        }
    /* Detections: kept rows sorted by score, ids of the 3 classes, clipped boxes. */
    for (int b = 0; b < 2; b++) {
        double last = 2;
        for (int j = 0; j < A_TOTAL; j++) {
            const double *r = det + (b * A_TOTAL + j) * 6;
            if (r[0] < 0) continue;
            cr_assert(r[0] == 0 || r[0] == 1 || r[0] == 2, "id %g", r[0]);
            cr_assert(r[1] <= last + 1e-7 && r[1] >= 0.01, "score %g after %g", r[1], last);
            last = r[1];
            for (int q = 2; q < 6; q++) cr_assert(r[q] >= 0 && r[q] <= 1, "coordinate %g", r[q]);
        }
    }
    /* Gradients reach the first convolution (through SoftmaxOutput and smooth_l1). */
    double *g = et_read(find(ex, sym, "conv1_1_weight", 1));
    double ga = 0;
    for (int64_t i = 0; i < mxp_ndarray_size(find(ex, sym, "conv1_1_weight", 1)); i++) {
        cr_assert(isfinite(g[i]));
        ga += fabs(g[i]);
    }
    cr_assert(ga > 0, "no gradient reached conv1_1_weight");
    free(g), free(prob), free(cls), free(det);
    mxp_executor_free(ex);
    for (int i = 0; i < na; i++) mxp_ndarray_release(args[i]), mxp_ndarray_release(grads[i]);
    free(as), free(os), free(xs);
    mxp_symbol_release(sym);
}

/* The same file binds at another input size: anchors follow the feature maps. */
Test(ssd_json, infers_at_another_size) {
    mxp_symbol *sym = NULL;
    cr_assert_eq(mxp_symbol_load_file(GT_FIXTURE("ssd_tiny_train.json"), &sym), MXP_OK, "%s", mxp_last_error());
    const char *names[] = {"data", "label"};
    const mxp_shape shapes[] = {{4, 0, {1, 3, 48, 64}}, {3, 0, {1, 7, 6}}};
    int na, no, nx, complete;
    mxp_shape *as, *os, *xs;
    cr_assert_eq(mxp_symbol_infer_shape(sym, 2, names, shapes, &na, &as, &no, &os, &nx, &xs, &complete), MXP_OK, "%s",
                 mxp_last_error());
    const int64_t A = 24 * 32 * 4 + 12 * 16 * 3;
    cr_assert_eq(os[3].dims[1], A, "%lld anchors", (long long)os[3].dims[1]);
    cr_assert_eq(os[2].dims[1], A);
    free(as), free(os), free(xs);
    mxp_symbol_release(sym);
}
