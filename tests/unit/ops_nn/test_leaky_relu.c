/* test_leaky_relu.c — LeakyReLU leaky/elu/selu/gelu/prelu: forward against
 * float64 formulas, float64 finite differences for data (and prelu gamma),
 * prelu gamma shape inference, rrelu refused. */
#include <string.h>
#include "nn_test_util.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

static double ref(const char *t, double x, double slope) {
    if (!strcmp(t, "leaky")) return x > 0 ? x : slope * x;
    if (!strcmp(t, "elu")) return x > 0 ? x : slope * (exp(x) - 1);
    if (!strcmp(t, "selu")) return 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * (exp(x) - 1));
    return 0.5 * x * (1 + erf(x / sqrt(2.0))); /* gelu */
}

Test(leaky_relu, forward_fd, .init = setup, .fini = teardown) {
    const char *ts[] = {"leaky", "elu", "selu", "gelu"};
    for (int t = 0; t < 4; t++) for (int dti = 0; dti < 2; dti++) {
        int32_t dt = dti ? MXP_DTYPE_F64 : MXP_DTYPE_F32;
        char kw[80]; snprintf(kw, sizeof kw, "act_type=%s slope=0.3", ts[t]);
        int64_t d[2] = {6, 7};
        fh_node n;
        tu_node(&n, pack, "LeakyReLU", kw, dt, 2, d, 1);
        uint64_t r = 5;
        tu_fill(n.in[0], dt, 42, &r, -3, 3);
        double y[42];
        for (int i = 0; i < 42; i++) y[i] = ref(ts[t], tu_get(n.in[0], dt, i), 0.3);
        cr_assert_eq(fh_node_forward(&n, 1, NULL), 0);
        cr_assert_leq(tu_relerr(n.out[0], dt, y, 42), dt == MXP_DTYPE_F32 ? 1e-6 : 1e-13, "%s", kw);
        if (dt == MXP_DTYPE_F64) {
            tu_fill(n.out_grad[0], dt, 42, &r, -1, 1);
            int check[1] = {1};
            tu_fd_check(&n, 1, check, 1e-6);
        }
        fh_node_free(&n);
    }
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
