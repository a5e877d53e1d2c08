/* test_bf16_ops.c — the bfloat16 paths of the ops a mixed-precision CNN
 * runs between its bf16 convolutions (graph/amp.c's follow list):
 * BatchNorm, _mxp_BatchNormReLU and _mxp_BatchNormAddReLU (bf16 data and
 * gradients, float32 gamma/beta/statistics), Activation (relu on the bf16
 * values, the others through float32), Pooling and _mxp_ReLUPooling.
 * Every result is checked against float64 arithmetic written here over
 * the same bf16 inputs.
 *
 * Tolerances: the inputs are exact bf16 values and the kernels compute in
 * float32, so a stored bf16 result is within 2^-8 relative of the float64
 * value (one rounding) plus float32 arithmetic error, which is bounded by
 * ~1e-5 of the size of the terms (`scale` below).  ReLU masks: an element
 * whose float64 pre-activation is within 1e-3 of 0 may land on either
 * side in float32, so its own gradient is not compared and its possible
 * contribution is added to the tolerance of the channel sums. */
#include <stdlib.h>
#include <string.h>
#include "nn_test_util.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

static double bfv(const void *p, int64_t i) {
    uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t to_bf(double v) { /* truncation: any bf16 value will do as an input */
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}
static void fillh(void *p, int64_t n, uint64_t *rng, double lo, double hi) {
    for (int64_t i = 0; i < n; i++) ((uint16_t *)p)[i] = to_bf(fh_rand(rng, lo, hi));
}
static float *f32(void *p) { return p; }

static void close_to(const char *what, double got, double ref, double scale, int64_t i) {
    double tol = fabs(ref) / 256.0 + 2e-5 * scale + 1e-30;
    cr_assert(fabs(got - ref) <= tol, "%s [%lld]: got %.8g, reference %.8g (tol %.3g)", what, (long long)i, got, ref,
              tol);
}

/* A BatchNorm-family node with bf16 data and float32 parameters/statistics. */
static void bn_node(fh_node *n, const char *op, const char *kw, int nd, const int64_t *dims) {
    cr_assert_eq(fh_node_init(n, pack, op, "default", kw, MXP_DTYPE_BF16), 0, "%s", fh_error());
    n->in_dtype[1] = n->in_dtype[2] = MXP_DTYPE_F32;
    n->out_dtype[1] = n->out_dtype[2] = MXP_DTYPE_F32;
    n->aux_dtype[0] = n->aux_dtype[1] = MXP_DTYPE_F32;
    n->in_shape[0].ndim = nd;
    for (int i = 0; i < nd; i++) n->in_shape[0].dims[i] = dims[i];
    cr_assert_eq(fh_node_infer(n), MXP_OK, "%s", fh_error());
    cr_assert_eq(fh_node_alloc(n, 1), 1, "%s", n->reason);
}

enum { PLAIN, RELU, ADD_RELU };

/* Forward (training, then inference) and backward of one BatchNorm form
 * on (O, C, S) = (3, 5, 37): rows of two 16-lane blocks and a tail. */
static void bn_case(int kind, int add_req) {
    static const char *const ops[] = {"BatchNorm", "_mxp_BatchNormReLU", "_mxp_BatchNormAddReLU"};
    const int64_t O = 3, C = 5, S = 37, N = O * C * S, d[3] = {3, 5, 37};
    const double eps = 1e-3, mom = 0.8;
    fh_node n;
    bn_node(&n, ops[kind], "fix_gamma=False eps=0.001 momentum=0.8", 3, d);
    uint64_t r = 11 + (uint64_t)kind;
    fillh(n.in[0], N, &r, -2, 3);
    for (int64_t c = 0; c < C; c++) {
        f32(n.in[1])[c] = (float)fh_rand(&r, 0.5, 1.5);
        f32(n.in[2])[c] = (float)fh_rand(&r, -0.5, 0.5);
        f32(n.aux[0])[c] = 0.1f * (float)c;
        f32(n.aux[1])[c] = 1.0f + (float)c;
    }
    if (kind == ADD_RELU) fillh(n.in[3], N, &r, -1, 1);
    /* float64 reference over the same inputs */
    double *mean = calloc((size_t)C, sizeof(double)), *var = calloc((size_t)C, sizeof(double));
    double *pre = calloc((size_t)N, sizeof(double)), *xh = calloc((size_t)N, sizeof(double));
    double cnt = (double)(O * S);
    for (int64_t c = 0; c < C; c++) {
        double s = 0, s2 = 0;
        for (int64_t o = 0; o < O; o++) for (int64_t k = 0; k < S; k++) s += bfv(n.in[0], (o * C + c) * S + k);
        mean[c] = s / cnt;
        for (int64_t o = 0; o < O; o++)
            for (int64_t k = 0; k < S; k++) { double v = bfv(n.in[0], (o * C + c) * S + k) - mean[c]; s2 += v * v; }
        var[c] = s2 / cnt;
        for (int64_t o = 0; o < O; o++)
            for (int64_t k = 0; k < S; k++) {
                int64_t i = (o * C + c) * S + k;
                xh[i] = (bfv(n.in[0], i) - mean[c]) / sqrt(var[c] + eps);
                pre[i] = f32(n.in[1])[c] * xh[i] + f32(n.in[2])[c] + (kind == ADD_RELU ? bfv(n.in[3], i) : 0.0);
            }
    }
    int32_t req[3] = {add_req ? MXP_REQ_ADD : MXP_REQ_WRITE, MXP_REQ_WRITE, MXP_REQ_WRITE};
    uint16_t *prev = malloc((size_t)N * 2);
    for (int64_t i = 0; i < N; i++) prev[i] = to_bf(0.25 * (double)(i % 7) - 0.5);
    memcpy(n.out[0], prev, (size_t)N * 2);
    cr_assert_eq(fh_node_forward(&n, 1, req), 0, "%s", fh_error());
    for (int64_t i = 0; i < N; i++) {
        double y = kind == PLAIN ? pre[i] : (pre[i] > 0 ? pre[i] : 0);
        if (add_req) y += bfv(prev, i);
        close_to("forward", bfv(n.out[0], i), y, 4.0, i);
    }
    for (int64_t c = 0; c < C; c++) {
        close_to("saved mean", f32(n.out[1])[c], mean[c], 1e-2, c);
        close_to("saved var", f32(n.out[2])[c], var[c], 1e-2, c);
        cr_assert(fabs(f32(n.aux[0])[c] - (0.1 * c * mom + mean[c] * (1 - mom))) < 1e-5, "moving mean %lld", (long long)c);
        cr_assert(fabs(f32(n.aux[1])[c] - ((1.0 + c) * mom + var[c] * (1 - mom))) < 1e-5, "moving var %lld", (long long)c);
    }
    /* backward (batch statistics) against the formula in float64; the
     * residual form masks dy with its stored output, so that must be the
     * op's own output (not one accumulated into) */
    if (kind == ADD_RELU && add_req) cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
    fillh(n.out_grad[0], N, &r, -1, 1);
    int32_t breq[4] = {add_req ? MXP_REQ_ADD : MXP_REQ_WRITE, MXP_REQ_WRITE, MXP_REQ_WRITE, MXP_REQ_WRITE};
    uint16_t *prev_dx = malloc((size_t)N * 2);
    for (int64_t i = 0; i < N; i++) prev_dx[i] = to_bf(0.125 * (double)(i % 5));
    memcpy(n.in_grad[0], prev_dx, (size_t)N * 2);
    cr_assert_eq(fh_node_backward(&n, breq), 0, "%s", fh_error());
    for (int64_t c = 0; c < C; c++) {
        double sg = 0, sgx = 0, slack = 0;
        for (int64_t o = 0; o < O; o++)
            for (int64_t k = 0; k < S; k++) {
                int64_t i = (o * C + c) * S + k;
                double g = bfv(n.out_grad[0], i);
                if (kind != PLAIN && fabs(pre[i]) < 1e-3) slack += fabs(g) * (1 + fabs(xh[i]));
                if (kind != PLAIN && pre[i] <= 0) g = 0;
                sg += g;
                sgx += g * xh[i];
            }
        double gam = f32(n.in[1])[c], inv = 1 / sqrt(var[c] + eps);
        double tol_db = 1e-4 * cnt + slack, tol_dg = 1e-4 * cnt + slack;
        cr_assert(fabs(f32(n.in_grad[2])[c] - sg) <= tol_db, "dbeta[%lld]: %g vs %g", (long long)c, f32(n.in_grad[2])[c], sg);
        cr_assert(fabs(f32(n.in_grad[1])[c] - sgx) <= tol_dg, "dgamma[%lld]: %g vs %g", (long long)c, f32(n.in_grad[1])[c], sgx);
        for (int64_t o = 0; o < O; o++)
            for (int64_t k = 0; k < S; k++) {
                int64_t i = (o * C + c) * S + k;
                if (kind != PLAIN && fabs(pre[i]) < 1e-3) continue;
                double g = kind != PLAIN && pre[i] <= 0 ? 0 : bfv(n.out_grad[0], i);
                double dx = gam * inv * (g - sg / cnt - xh[i] * sgx / cnt) + (add_req ? bfv(prev_dx, i) : 0);
                close_to("dx", bfv(n.in_grad[0], i), dx, 2.0, i);
                if (kind == ADD_RELU) cr_assert_eq(bfv(n.in_grad[3], i), g, "addend gradient [%lld]", (long long)i);
            }
    }
    /* inference: the moving statistics, no update */
    float mm[5], mv[5];
    memcpy(mm, n.aux[0], sizeof mm);
    memcpy(mv, n.aux[1], sizeof mv);
    cr_assert_eq(fh_node_forward(&n, 0, NULL), 0, "%s", fh_error());
    for (int64_t i = 0; i < N; i++) {
        int64_t c = (i / S) % C;
        double y = f32(n.in[1])[c] * (bfv(n.in[0], i) - mm[c]) / sqrt(mv[c] + eps) + f32(n.in[2])[c];
        if (kind == ADD_RELU) y += bfv(n.in[3], i);
        if (kind != PLAIN) y = y > 0 ? y : 0;
        close_to("inference", bfv(n.out[0], i), y, 4.0, i);
    }
    cr_assert_eq(memcmp(mm, n.aux[0], sizeof mm), 0, "inference changed the moving mean");
    free(mean); free(var); free(pre); free(xh); free(prev); free(prev_dx);
    fh_node_free(&n);
}

Test(bf16_ops, batchnorm, .init = setup, .fini = teardown) { bn_case(PLAIN, 0); bn_case(PLAIN, 1); }
Test(bf16_ops, batchnorm_relu, .init = setup, .fini = teardown) { bn_case(RELU, 0); bn_case(RELU, 1); }
Test(bf16_ops, batchnorm_add_relu, .init = setup, .fini = teardown) { bn_case(ADD_RELU, 0); bn_case(ADD_RELU, 1); }

/* Type inference: bf16 data gives float32 parameters, statistics and
 * aux states; float32 and float64 keep one dtype; a bf16 gamma with bf16
 * data is refused by the bound arrays' check. */
Test(bf16_ops, batchnorm_types, .init = setup, .fini = teardown) {
    const mxp_op_def *def = fh_op_def(pack, "_mxp_BatchNormAddReLU");
    cr_assert(def && def->infer_type);
    for (int t = 0; t < 3; t++) {
        int32_t dt = t == 0 ? MXP_DTYPE_BF16 : t == 1 ? MXP_DTYPE_F32 : MXP_DTYPE_F64;
        int32_t pd = t == 0 ? MXP_DTYPE_F32 : dt;
        int32_t in[4] = {-1, -1, -1, -1}, out[3] = {dt, -1, -1}, aux[2] = {-1, -1};
        mxp_infer_type_args a = {MXP_HEADER(mxp_infer_type_args), NULL, NULL, 4, 3, 2, 0, in, out, aux};
        cr_assert_eq(def->infer_type(&a), MXP_OK);
        cr_assert_eq(in[0], dt); cr_assert_eq(in[3], dt);
        cr_assert_eq(in[1], pd); cr_assert_eq(in[2], pd);
        cr_assert_eq(out[1], pd); cr_assert_eq(out[2], pd);
        cr_assert_eq(aux[0], pd); cr_assert_eq(aux[1], pd);
    }
    fh_node n;
    int64_t d[2] = {4, 3};
    cr_assert_eq(fh_node_init(&n, pack, "BatchNorm", "default", "", MXP_DTYPE_BF16), 0);
    n.in_shape[0].ndim = 2; n.in_shape[0].dims[0] = d[0]; n.in_shape[0].dims[1] = d[1];
    cr_assert_eq(fh_node_infer(&n), MXP_OK);
    cr_assert_eq(fh_node_alloc(&n, 1), 1);
    cr_assert_neq(fh_node_forward(&n, 1, NULL), 0, "bf16 gamma accepted");
    cr_assert(strstr(fh_error(), "dtype"), "%s", fh_error());
    fh_node_free(&n);
}

/* Activation on bf16: relu forward and backward are exact (a select);
 * tanh and sigmoid go through float32 (one rounding); req add rounds the
 * float32 sum once. */
Test(bf16_ops, activation, .init = setup, .fini = teardown) {
    const char *const kws[] = {"act_type=relu", "act_type=tanh", "act_type=sigmoid", "act_type=softrelu"};
    const int64_t N = 2 * 3 * 37, d[3] = {2, 3, 37};
    for (int t = 0; t < 4; t++)
        for (int add = 0; add < 2; add++) {
            fh_node n;
            tu_node(&n, pack, "Activation", kws[t], MXP_DTYPE_BF16, 3, d, 1);
            uint64_t r = 5 + (uint64_t)t;
            fillh(n.in[0], N, &r, -3, 3);
            ((uint16_t *)n.in[0])[7] = 0x7fc0; /* NaN */
            ((uint16_t *)n.in[0])[8] = 0x8000; /* -0 */
            uint16_t prev[2 * 3 * 37];
            for (int64_t i = 0; i < N; i++) prev[i] = to_bf(0.5 * (double)(i % 3));
            memcpy(n.out[0], prev, sizeof prev);
            int32_t req[1] = {add ? MXP_REQ_ADD : MXP_REQ_WRITE};
            cr_assert_eq(fh_node_forward(&n, 1, req), 0, "%s", fh_error());
            for (int64_t i = 0; i < N; i++) {
                double x = bfv(n.in[0], i), y;
                if (t == 0) y = x > 0 ? x : 0;
                else if (t == 1) y = tanh(x);
                else if (t == 2) y = 1 / (1 + exp(-x));
                else y = log1p(exp(x));
                if (i == 7 && t != 0) continue; /* NaN in, NaN out: checked below for relu */
                if (add) y += bfv(prev, i);
                if (t == 0 && !add) cr_assert_eq(bfv(n.out[0], i), y, "relu [%lld]", (long long)i);
                else close_to(kws[t], bfv(n.out[0], i), y, 1.0, i);
            }
            if (t == 0 && !add) /* NaN and -0 give +0, as float32's relu */
                cr_assert(((uint16_t *)n.out[0])[7] == 0 && ((uint16_t *)n.out[0])[8] == 0, "relu(NaN), relu(-0)");
            /* backward from the output (relu, tanh, sigmoid, softrelu) */
            if (!add) {
                fillh(n.out_grad[0], N, &r, -1, 1);
                uint16_t pg[2 * 3 * 37];
                for (int64_t i = 0; i < N; i++) pg[i] = to_bf(0.25 * (double)(i % 4));
                for (int badd = 0; badd < 2; badd++) {
                    memcpy(n.in_grad[0], pg, sizeof pg);
                    int32_t breq[1] = {badd ? MXP_REQ_ADD : MXP_REQ_WRITE};
                    cr_assert_eq(fh_node_backward(&n, breq), 0, "%s", fh_error());
                    for (int64_t i = 0; i < N; i++) {
                        if (i == 7) continue;
                        double y = bfv(n.out[0], i), g = bfv(n.out_grad[0], i), dx;
                        if (t == 0) dx = y > 0 ? g : 0;
                        else if (t == 1) dx = g * (1 - y * y);
                        else if (t == 2) dx = g * y * (1 - y);
                        else dx = g * -expm1(-y);
                        if (badd) dx += bfv(pg, i);
                        if (t == 0 && !badd) cr_assert_eq(bfv(n.in_grad[0], i), dx, "relu backward [%lld]", (long long)i);
                        else close_to("backward", bfv(n.in_grad[0], i), dx, 1.0, i);
                    }
                }
            }
            fh_node_free(&n);
        }
}

/* Pooling on bf16 (float32 copies inside): ResNet's global average pool
 * and a 3x3/2 max pool with padding, forward and backward, and the fused
 * _mxp_ReLUPooling (2x2/2), req write and add. */
Test(bf16_ops, pooling, .init = setup, .fini = teardown) {
    const char *const kws[] = {"global_pool=True pool_type=avg kernel=(1,1)", "pool_type=max kernel=(3,3) stride=(2,2) pad=(1,1)",
                               "pool_type=max kernel=(2,2) stride=(2,2)"};
    for (int t = 0; t < 3; t++) {
        int64_t d[4] = {2, 3, 8, 7}, H = 8, W = 7, P = 6;
        fh_node n;
        tu_node(&n, pack, t == 2 ? "_mxp_ReLUPooling" : "Pooling", kws[t], MXP_DTYPE_BF16, 4, d, 1);
        int64_t Ho = n.out_shape[0].dims[2], Wo = n.out_shape[0].dims[3], kh = t == 0 ? H : t == 1 ? 3 : 2;
        int64_t kw = t == 0 ? W : kh, s = t == 0 ? 1 : 2, pad = t == 1 ? 1 : 0;
        uint64_t r = 3 + (uint64_t)t;
        fillh(n.in[0], P * H * W, &r, -2, 2);
        cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
        fillh(n.out_grad[0], P * Ho * Wo, &r, -1, 1);
        cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
        double *dx = calloc((size_t)(P * H * W), sizeof(double));
        for (int64_t p = 0; p < P; p++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    double best = t == 2 ? 0 : -INFINITY, sum = 0;
                    int64_t at = -1, cnt = 0;
                    for (int64_t h = oh * s - pad; h < oh * s - pad + kh; h++)
                        for (int64_t w = ow * s - pad; w < ow * s - pad + kw; w++) {
                            if (h < 0 || w < 0 || h >= H || w >= W) { cnt++; continue; }
                            double v = bfv(n.in[0], (p * H + h) * W + w);
                            sum += v;
                            cnt++;
                            if (v > best) best = v, at = (p * H + h) * W + w;
                        }
                    double y = t == 0 ? sum / (double)cnt : best, g = bfv(n.out_grad[0], (p * Ho + oh) * Wo + ow);
                    close_to("pool forward", bfv(n.out[0], (p * Ho + oh) * Wo + ow), y, 1.0, oh);
                    if (t == 0)
                        for (int64_t i = 0; i < H * W; i++) dx[p * H * W + i] += g / (double)cnt;
                    else if (at >= 0) dx[at] += g;
                }
        for (int64_t i = 0; i < P * H * W; i++) close_to("pool backward", bfv(n.in_grad[0], i), dx[i], 1.0, i);
        /* req add, forward and backward: the float32 sum rounded once */
        int64_t no = P * Ho * Wo;
        uint16_t *y0 = malloc((size_t)no * 2), *g0 = malloc((size_t)(P * H * W) * 2);
        memcpy(y0, n.out[0], (size_t)no * 2);
        memcpy(g0, n.in_grad[0], (size_t)(P * H * W) * 2);
        int32_t add[1] = {MXP_REQ_ADD};
        cr_assert_eq(fh_node_forward(&n, 1, add), 0, "%s", fh_error());
        for (int64_t i = 0; i < no; i++) close_to("pool forward (add)", bfv(n.out[0], i), 2 * bfv(y0, i), 1.0, i);
        cr_assert_eq(fh_node_backward(&n, add), 0, "%s", fh_error());
        for (int64_t i = 0; i < P * H * W; i++) close_to("pool backward (add)", bfv(n.in_grad[0], i), 2 * bfv(g0, i), 1.0, i);
        free(y0); free(g0);
        free(dx);
        fh_node_free(&n);
    }
}
