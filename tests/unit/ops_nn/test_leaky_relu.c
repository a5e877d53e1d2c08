/* test_leaky_relu.c — LeakyReLU leaky/elu/selu/gelu/prelu: a table
 * (op_table.h, every impl) of forward against float64 formulas in float32
 * and float64 with float64 finite differences for data; prelu's gamma
 * shape inference, forward and gradients; rrelu refused. */
#include <string.h>
#include "nn_test_util.h"
#include "op_table.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

static double r_leaky(double x) { return x > 0 ? x : 0.3 * x; }
static double r_elu(double x) { return x > 0 ? x : 0.3 * (exp(x) - 1); }
static double r_selu(double x) { return 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * (exp(x) - 1)); }
static double r_gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }

#define LRELU(t, fn)                                                                                       \
    {.op = "LeakyReLU", .kw = {"act_type", t, "slope", "0.3", NULL}, .n_in = 1, .in = {OT_SHAPE(6, 7)},     \
     .lo = -3, .hi = 3, .seed = 5, .unary = fn, .atol32 = 1e-6, .rtol32 = 1e-6, .atol64 = 1e-13,            \
     .rtol64 = 1e-13, .fd_mask = 1, .fd_atol = 1e-6, .fd_rtol = 1e-6}

static const ot_row rows[] = {LRELU("leaky", r_leaky), LRELU("elu", r_elu), LRELU("selu", r_selu),
                              LRELU("gelu", r_gelu)};

Test(leaky_relu, table, .init = setup, .fini = teardown) {
    int runs = ot_run(pack, rows, OT_LEN(rows));
    cr_assert_geq(runs, 4 * 2, "%d runs", runs);
}

Test(leaky_relu, prelu, .init = setup, .fini = teardown) {
    int64_t d[4] = {2, 3, 4, 5};
    fh_node n;
    tu_node(&n, pack, "LeakyReLU", "act_type=prelu", MXP_DTYPE_F64, 4, d, 1);
    cr_assert_eq(n.n_in, 2);
    cr_assert_eq(n.in_shape[1].ndim, 1); cr_assert_eq(n.in_shape[1].dims[0], 3);
    uint64_t r = 6;
    tu_fill(n.in[0], MXP_DTYPE_F64, 120, &r, -2, 2);
    tu_fill(n.in[1], MXP_DTYPE_F64, 3, &r, 0.1, 0.5);
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0);
    for (int i = 0; i < 120; i++) {
        double x = ((double *)n.in[0])[i], g = ((double *)n.in[1])[(i / 20) % 3];
        cr_assert(fabs(((double *)n.out[0])[i] - (x > 0 ? x : g * x)) < 1e-14);
    }
    tu_fill(n.out_grad[0], MXP_DTYPE_F64, 120, &r, -1, 1);
    int check[2] = {1, 1};
    tu_fd_check(&n, 1, check, 1e-6);
    fh_node_free(&n);
    cr_assert_lt(fh_node_init(&n, pack, "LeakyReLU", "default", "act_type=rrelu", MXP_DTYPE_F32), 0);
    fh_node_free(&n);
}
