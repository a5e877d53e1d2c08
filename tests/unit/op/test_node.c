/* test_node.c — the node runtime (op/op.h) as the graph executor will use
 * it: state created once per signature and cached, impl chosen per
 * signature and re-chosen after a registry change, temp space handed to
 * kernels and serialized between users, RNG numbers independent of the
 * engine (naive vs threaded), and backward through the node checked against
 * central finite differences (plus req add for gradients). */
#include "op_test_util.h"

#include "op/op.h"

TestSuite(node, .init = opx_setup, .fini = opx_teardown);

static mxp__node *mk(const char *op, int n, const char *const *k, const char *const *v) {
    mxp__node *nd = NULL;
    cr_assert_eq(mxp__node_create(op, n, k, v, &nd), MXP_OK, "%s", mxp_last_error());
    return nd;
}

/* Infer a one-input node from an array's shape and dtype. */
static void infer1(mxp__node *nd, mxp_ndarray *x) {
    mxp_shape in = {.ndim = mxp_ndarray_ndim(x)}, out = {.ndim = -1};
    memcpy(in.dims, mxp_ndarray_shape(x), sizeof(int64_t) * (size_t)in.ndim);
    int32_t ti = mxp_ndarray_dtype(x), to = MXP_DTYPE_UNKNOWN;
    cr_assert_eq(mxp__node_infer(nd, &in, &ti, &out, &to, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(out.ndim, in.ndim);
    cr_assert_eq(to, ti);
}

Test(node, state_cached_per_signature_and_workspace_given) {
    const char *k[] = {"scale"}, *v[] = {"4"};
    mxp__node *nd = mk("fxi_ws", 1, k, v);
    cr_assert_eq(mxp__node_num_inputs(nd), 1);
    cr_assert_eq(mxp__node_num_outputs(nd), 1);
    cr_assert_str_eq(mxp__node_input_name(nd, 0), "data");
    int64_t s4[1] = {4}, s6[1] = {6};
    mxp_ndarray *x4 = opx_arr(MXP_DTYPE_F32, 1, s4, (double[]){1, 2, 3, 4});
    mxp_ndarray *y4 = opx_arr(MXP_DTYPE_F32, 1, s4, NULL);
    mxp_ndarray *x6 = opx_arr(MXP_DTYPE_F32, 1, s6, (double[]){1, 1, 1, 1, 1, 1});
    mxp_ndarray *y6 = opx_arr(MXP_DTYPE_F32, 1, s6, NULL);
    infer1(nd, x4);
    for (int i = 0; i < 3; i++) cr_assert_eq(mxp__node_forward(nd, &x4, &y4, NULL, NULL, 0), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp__node_create_count(nd), 1, "repeated forwards reuse the state");
    cr_assert_eq(mxp__node_workspace_bytes(nd), 16);
    double *r = opx_read(y4);
    for (int i = 0; i < 4; i++) cr_assert_float_eq(r[i], 4.0 * (i + 1), 0);
    free(r);
    /* Arrays that do not match the inferred signature are refused. */
    cr_assert_eq(mxp__node_forward(nd, &x6, &y6, NULL, NULL, 0), MXP_ESHAPE);
    infer1(nd, x6);
    cr_assert_eq(mxp__node_forward(nd, &x6, &y6, NULL, NULL, 0), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp__node_create_count(nd), 2);
    cr_assert_eq(mxp__node_workspace_bytes(nd), 24);
    infer1(nd, x4);
    cr_assert_eq(mxp__node_forward(nd, &x4, &y4, NULL, NULL, 0), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp__node_create_count(nd), 2, "back to a cached signature");
    r = opx_read(y6);
    for (int i = 0; i < 6; i++) cr_assert_float_eq(r[i], 4.0, 0);
    free(r);
    /* The node may go while its work is in flight. */
    cr_assert_eq(mxp__node_forward(nd, &x4, &y4, NULL, NULL, 0), MXP_OK);
    mxp__node_free(nd);
    r = opx_read(y4);
    for (int i = 0; i < 4; i++) cr_assert_float_eq(r[i], 4.0 * (i + 1), 0);
    free(r);
    mxp_ndarray *all[] = {x4, y4, x6, y6};
    for (int i = 0; i < 4; i++) mxp_ndarray_release(all[i]);
}

/* Many users of the shared temp-space copies at once: each kernel stages
 * its whole result in the workspace, so two kernels sharing a copy at the
 * same time would corrupt each other's results. */
Test(node, temp_space_users_serialize) {
    enum { N = 24, LEN = 1 << 15 };
    int64_t shape[1] = {LEN};
    mxp_ndarray *x[N], *y[N];
    double *v = malloc(LEN * sizeof *v);
    cr_assert(v);
    for (int j = 0; j < N; j++) {
        for (int i = 0; i < LEN; i++) v[i] = j * 1000 + i % 997;
        x[j] = opx_arr(MXP_DTYPE_F32, 1, shape, v);
        y[j] = NULL;
    }
    for (int j = 0; j < N; j++) {
        char sc[16];
        snprintf(sc, sizeof sc, "%d", 1 + j % 9);
        const char *k[] = {"scale"}, *vv[] = {sc};
        int n_out = 1;
        cr_assert_eq(mxp_invoke("fxi_ws", 1, &x[j], &n_out, &y[j], 1, k, vv), MXP_OK, "%s", mxp_last_error());
    }
    for (int j = 0; j < N; j++) {
        double *r = opx_read(y[j]);
        for (int i = 0; i < LEN; i++)
            if (r[i] != (double)(float)((1 + j % 9) * (double)(float)(j * 1000 + i % 997)))
                cr_assert_fail("op %d element %d: %g", j, i, r[i]);
        free(r);
        mxp_ndarray_release(x[j]);
        mxp_ndarray_release(y[j]);
    }
    free(v);
}

Test(node, impl_chosen_per_signature_and_after_policy_change) {
    const char *k[] = {"factor"}, *v[] = {"3"};
    mxp__node *nd = mk("psel_scale_alias", 1, k, v);
    cr_assert_str_eq(mxp__node_op_name(nd), "psel_scale");
    int64_t s4[1] = {4}, s200[1] = {200};
    mxp_ndarray *x4 = opx_arr(MXP_DTYPE_F32, 1, s4, (double[]){1, 2, 3, 4});
    mxp_ndarray *y4 = opx_arr(MXP_DTYPE_F32, 1, s4, NULL);
    mxp_ndarray *x200 = opx_arr(MXP_DTYPE_F32, 1, s200, NULL);
    mxp_ndarray *y200 = opx_arr(MXP_DTYPE_F32, 1, s200, NULL);
    cr_assert_eq(mxp_ndarray_fill(x200, 2.0), MXP_OK);
    infer1(nd, x4);
    cr_assert_eq(mxp__node_forward(nd, &x4, &y4, NULL, NULL, 0), MXP_OK, "%s", mxp_last_error());
    cr_assert_str_eq(mxp__node_impl_name(nd), "fast");
    infer1(nd, x200);
    cr_assert_eq(mxp__node_forward(nd, &x200, &y200, NULL, NULL, 0), MXP_OK, "%s", mxp_last_error());
    cr_assert_str_eq(mxp__node_impl_name(nd), "mid", "fast refuses more than 100 elements");
    /* A policy change bumps the registry generation: the next forward
     * re-selects without re-creating the node. */
    cr_assert_eq(mxp_op_set_impl("psel_scale", "slow"), MXP_OK, "%s", mxp_last_error());
    infer1(nd, x4);
    cr_assert_eq(mxp__node_forward(nd, &x4, &y4, NULL, NULL, 0), MXP_OK, "%s", mxp_last_error());
    cr_assert_str_eq(mxp__node_impl_name(nd), "slow");
    double *r = opx_read(y4);
    for (int i = 0; i < 4; i++) cr_assert_float_eq(r[i], 3.0 * (i + 1), 1e-6);
    free(r);
    r = opx_read(y200);
    for (int i = 0; i < 200; i++) cr_assert_float_eq(r[i], 6.0, 1e-6);
    free(r);
    mxp__node_free(nd);
    mxp_ndarray *all[] = {x4, y4, x200, y200};
    for (int i = 0; i < 4; i++) mxp_ndarray_release(all[i]);
}

/* ------------------------------------------------------------ RNG */
enum { RN = 1000 };

static void draw(const char *engine, double *a, double *b) {
    setenv("MXP_ENGINE_TYPE", engine, 1);
    mxp_engine_shutdown(); /* the next engine call makes the chosen one */
    cr_assert_str_eq(mxp_engine_type(), engine);
    mxp_random_seed(1234);
    const char *k[] = {"shape", "low", "high"}, *v[] = {"(1000,)", "-2", "3"};
    mxp_invoke_opts opts = {.has_device = 1, .device = {MXP_DEV_CPU, 0}};
    mxp_ndarray *o[4] = {NULL, NULL, NULL, NULL};
    /* Interleave with unrelated work so a threaded engine runs them in
     * whatever order its workers pick. */
    for (int i = 0; i < 4; i++) {
        int n_out = 1;
        cr_assert_eq(mxp_invoke_ex("_random_uniform", 0, NULL, &n_out, &o[i], 3, k, v, &opts), MXP_OK, "%s",
                     mxp_last_error());
        if (i == 1) {
            mxp_ndarray *s = NULL;
            n_out = 1;
            cr_assert_eq(mxp_invoke("sqrt", 1, &o[0], &n_out, &s, 0, NULL, NULL), MXP_OK);
            mxp_ndarray_release(s);
        }
    }
    double *r0 = opx_read(o[0]), *r3 = opx_read(o[3]);
    memcpy(a, r0, RN * sizeof *a);
    memcpy(b, r3, RN * sizeof *b);
    free(r0);
    free(r3);
    for (int i = 0; i < 4; i++) mxp_ndarray_release(o[i]);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK, "%s", mxp_last_error());
}

Test(node, rng_same_numbers_naive_and_threaded) {
    static double a1[RN], b1[RN], a2[RN], b2[RN];
    draw("naive", a1, b1);
    draw("threaded", a2, b2);
    double mean = 0;
    int differ = 0;
    for (int i = 0; i < RN; i++) {
        cr_assert_eq(a1[i], a2[i], "draw 0 element %d: %g vs %g", i, a1[i], a2[i]);
        cr_assert_eq(b1[i], b2[i], "draw 3 element %d", i);
        cr_assert(a1[i] >= -2 && a1[i] < 3, "%g out of [-2, 3)", a1[i]);
        mean += a1[i] / RN;
        differ += a1[i] != b1[i];
    }
    cr_assert(fabs(mean - 0.5) < 0.25, "mean %g", mean);
    cr_assert_gt(differ, RN - 10, "successive draws use fresh counters");
    setenv("MXP_ENGINE_TYPE", "threaded", 1);
}

/* ------------------------------------------------------------ backward */
/* L(lhs, rhs) = sum(w * broadcast_mul(lhs, rhs)); gradients through the
 * node against central differences computed with forward invokes. */
static double loss(mxp_ndarray *l, mxp_ndarray *r, const double *w) {
    mxp_ndarray *in[2] = {l, r}, *o = NULL;
    int n_out = 1;
    cr_assert_eq(mxp_invoke("broadcast_mul", 2, in, &n_out, &o, 0, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    double *v = opx_read(o), s = 0;
    for (int i = 0; i < 6; i++) s += w[i] * v[i];
    free(v);
    mxp_ndarray_release(o);
    return s;
}

Test(node, backward_matches_finite_differences) {
    int64_t sl[2] = {2, 3}, sr[2] = {1, 3};
    double vl[6], vr[3], w[6];
    opx_fill(vl, 6, 11, -1, 1);
    opx_fill(vr, 3, 12, -1, 1);
    opx_fill(w, 6, 13, -1, 1);
    mxp_ndarray *l = opx_arr(MXP_DTYPE_F64, 2, sl, vl), *r = opx_arr(MXP_DTYPE_F64, 2, sr, vr);
    mxp_ndarray *out = opx_arr(MXP_DTYPE_F64, 2, sl, NULL), *og = opx_arr(MXP_DTYPE_F64, 2, sl, w);
    mxp_ndarray *gl = opx_arr(MXP_DTYPE_F64, 2, sl, NULL), *gr = opx_arr(MXP_DTYPE_F64, 2, sr, NULL);
    mxp__node *nd = mk("broadcast_mul", 0, NULL, NULL);
    mxp_shape is[2] = {{.ndim = 2, .dims = {2, 3}}, {.ndim = 2, .dims = {1, 3}}}, os = {.ndim = -1};
    int32_t it[2] = {MXP_DTYPE_F64, MXP_DTYPE_F64}, ot = MXP_DTYPE_UNKNOWN;
    cr_assert_eq(mxp__node_infer(nd, is, it, &os, &ot, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    uint8_t need_og, need_in[2], need_out;
    mxp__node_backward_deps(nd, &need_og, need_in, &need_out);
    cr_assert(need_og && need_in[0] && need_in[1], "mul's gradient reads out_grad and both inputs");
    mxp_ndarray *in[2] = {l, r}, *ig[2] = {gl, gr};
    cr_assert_eq(mxp__node_backward(nd, &og, in, &out, ig, NULL, NULL), MXP_EMISUSE, "backward before forward");
    cr_assert_eq(mxp__node_forward(nd, in, &out, NULL, NULL, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp__node_backward(nd, &og, in, &out, ig, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    double *dl = opx_read(gl), *dr = opx_read(gr);
    const double h = 1e-6;
    for (int i = 0; i < 6; i++) {
        double p[6], m[6];
        memcpy(p, vl, sizeof p);
        memcpy(m, vl, sizeof m);
        p[i] += h;
        m[i] -= h;
        mxp_ndarray *lp = opx_arr(MXP_DTYPE_F64, 2, sl, p), *lm = opx_arr(MXP_DTYPE_F64, 2, sl, m);
        double fd = (loss(lp, r, w) - loss(lm, r, w)) / (2 * h);
        cr_assert_float_eq(dl[i], fd, 1e-6, "d lhs[%d]: %g vs %g", i, dl[i], fd);
        mxp_ndarray_release(lp);
        mxp_ndarray_release(lm);
    }
    for (int j = 0; j < 3; j++) {
        double p[3], m[3];
        memcpy(p, vr, sizeof p);
        memcpy(m, vr, sizeof m);
        p[j] += h;
        m[j] -= h;
        mxp_ndarray *rp = opx_arr(MXP_DTYPE_F64, 2, sr, p), *rm = opx_arr(MXP_DTYPE_F64, 2, sr, m);
        double fd = (loss(l, rp, w) - loss(l, rm, w)) / (2 * h);
        cr_assert_float_eq(dr[j], fd, 1e-6, "d rhs[%d]: %g vs %g", j, dr[j], fd);
        mxp_ndarray_release(rp);
        mxp_ndarray_release(rm);
    }
    /* req add accumulates: a second backward with add doubles. */
    int req[2] = {MXP_REQ_ADD, MXP_REQ_ADD};
    cr_assert_eq(mxp__node_backward(nd, &og, in, &out, ig, NULL, req), MXP_OK, "%s", mxp_last_error());
    double *dl2 = opx_read(gl), *dr2 = opx_read(gr);
    for (int i = 0; i < 6; i++) cr_assert_float_eq(dl2[i], 2 * dl[i], 1e-12);
    for (int j = 0; j < 3; j++) cr_assert_float_eq(dr2[j], 2 * dr[j], 1e-12);
    /* Only the wanted gradient: in_grads[1] NULL is left alone. */
    mxp_ndarray *ig1[2] = {gl, NULL};
    cr_assert_eq(mxp__node_backward(nd, &og, in, &out, ig1, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    double *dl3 = opx_read(gl), *dr3 = opx_read(gr);
    for (int i = 0; i < 6; i++) cr_assert_float_eq(dl3[i], dl[i], 1e-12);
    for (int j = 0; j < 3; j++) cr_assert_float_eq(dr3[j], 2 * dr[j], 1e-12);
    free(dl);
    free(dr);
    free(dl2);
    free(dr2);
    free(dl3);
    free(dr3);
    mxp__node_free(nd);
    mxp_ndarray *all[] = {l, r, out, og, gl, gr};
    for (int i = 0; i < 6; i++) mxp_ndarray_release(all[i]);
}

Test(node, backward_of_fixture_op_and_no_gradient) {
    const char *k[] = {"scale"}, *v[] = {"2.5"};
    mxp__node *nd = mk("fxi_ws", 1, k, v);
    int64_t s[1] = {3};
    mxp_ndarray *x = opx_arr(MXP_DTYPE_F32, 1, s, (double[]){1, 2, 3}), *y = opx_arr(MXP_DTYPE_F32, 1, s, NULL);
    mxp_ndarray *g = opx_arr(MXP_DTYPE_F32, 1, s, (double[]){1, -1, 4}), *dx = opx_arr(MXP_DTYPE_F32, 1, s, NULL);
    infer1(nd, x);
    cr_assert_eq(mxp__node_forward(nd, &x, &y, NULL, NULL, 1), MXP_OK, "%s", mxp_last_error());
    /* backward_deps is out_grad only: inputs and outputs may be omitted. */
    cr_assert_eq(mxp__node_backward(nd, &g, NULL, NULL, &dx, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    double *r = opx_read(dx);
    cr_assert_float_eq(r[0], 2.5, 1e-6);
    cr_assert_float_eq(r[1], -2.5, 1e-6);
    cr_assert_float_eq(r[2], 10.0, 1e-6);
    free(r);
    mxp__node_free(nd);
    nd = mk("fxi_fail", 0, NULL, NULL);
    infer1(nd, x);
    cr_assert_eq(mxp__node_forward(nd, &x, &y, NULL, NULL, 1), MXP_OK);
    cr_assert_eq(mxp__node_backward(nd, &g, &x, &y, &dx, NULL, NULL), MXP_EUNSUPPORTED);
    cr_assert(strstr(mxp_last_error(), "fxi_fail"), "%s", mxp_last_error());
    cr_assert_neq(mxp_ndarray_wait_to_read(y), MXP_OK);
    mxp__node_free(nd);
    mxp_ndarray *all[] = {x, y, g, dx};
    for (int i = 0; i < 4; i++) mxp_ndarray_release(all[i]);
}

/* ------------------------------------------------------------ reload */
/* A pack reload while a node keeps running on another thread: the reload
 * bumps the generation and waits for pins to drop; the node's next forward
 * notices, drops its instances (work in flight keeps its own) and its pin,
 * waits for the reload, then parses and selects again.  Every result stays
 * right. */
#include <pthread.h>
#include <stdatomic.h>

typedef struct reload_job {
    mxp__node *nd;
    mxp_ndarray *x, *y;
    int failures, runs;
    atomic_int reloaded;
    char err[256];
} reload_job;

static void *forward_loop(void *arg) {
    reload_job *j = arg;
    /* Keep running until the reload is over: an idle node holds its pins
     * (as a bound executor does) and would make the reload time out. */
    for (int i = 0; i < 20 || !atomic_load(&j->reloaded); i++) {
        int rc = mxp__node_forward(j->nd, &j->x, &j->y, NULL, NULL, 0);
        if (!rc) rc = mxp_ndarray_wait_to_read(j->y);
        if (rc) {
            j->failures++;
            snprintf(j->err, sizeof j->err, "%s", mxp_last_error());
        }
        j->runs++;
    }
    return NULL;
}

Test(node, reload_while_forwarding) {
    const char *k[] = {"scale"}, *v[] = {"3"};
    reload_job j = {.nd = mk("fxi_ws", 1, k, v)};
    int64_t s[1] = {1 << 14};
    j.x = opx_arr(MXP_DTYPE_F32, 1, s, NULL);
    j.y = opx_arr(MXP_DTYPE_F32, 1, s, NULL);
    cr_assert_eq(mxp_ndarray_fill(j.x, 2.0), MXP_OK);
    infer1(j.nd, j.x);
    cr_assert_eq(mxp__node_forward(j.nd, &j.x, &j.y, NULL, NULL, 0), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_ndarray_wait_to_read(j.y), MXP_OK);
    uint64_t gen0 = mxp_registry_generation();
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, forward_loop, &j), 0);
    int rc = mxp_pack_reload("op-invoke");
    atomic_store(&j.reloaded, 1);
    char why[256];
    snprintf(why, sizeof why, "%s", mxp_last_error());
    pthread_join(t, NULL);
    cr_assert_eq(rc, MXP_OK, "reload: %s", why);
    cr_assert_eq(j.failures, 0, "%d of %d forwards failed: %s", j.failures, j.runs, j.err);
    cr_assert_gt(mxp_registry_generation(), gen0);
    cr_assert_eq(mxp__node_forward(j.nd, &j.x, &j.y, NULL, NULL, 0), MXP_OK, "%s", mxp_last_error());
    double *r = opx_read(j.y);
    for (int i = 0; i < (1 << 14); i++)
        if (r[i] != 6.0) cr_assert_fail("element %d: %g", i, r[i]);
    free(r);
    mxp__node_free(j.nd);
    mxp_ndarray_release(j.x);
    mxp_ndarray_release(j.y);
}
