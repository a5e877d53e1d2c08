/* test_softmax.c — softmax / log_softmax over several axes with
 * temperature: forward against a float64 reference, backward by float64
 * finite differences. */
#include <string.h>
#include "nn_test_util.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

Test(softmax, forward_fd, .init = setup, .fini = teardown) {
    const char *ops[] = {"softmax", "log_softmax"};
    const int axes[] = {-1, 0, 1};
    for (int o = 0; o < 2; o++) for (int ai = 0; ai < 3; ai++) for (int ti = 0; ti < 2; ti++) {
        char kw[100]; snprintf(kw, sizeof kw, "axis=%d%s", axes[ai], ti ? " temperature=2.5" : "");
        double T = ti ? 2.5 : 1.0;
        int64_t d[3] = {3, 4, 5};
        fh_node n;
        tu_node(&n, pack, ops[o], kw, MXP_DTYPE_F64, 3, d, 1);
        uint64_t r = 1;
        tu_fill(n.in[0], MXP_DTYPE_F64, 60, &r, -3, 3);
        double *x = n.in[0], y[60];
        int ax = axes[ai] < 0 ? 2 : axes[ai];
        int64_t st[3] = {20, 5, 1};
        for (int64_t i = 0; i < 60; i++) {
            int64_t coord = (i / st[ax]) % d[ax], base = i - coord * st[ax];
            double mx = -1e300, s = 0;
            for (int64_t k = 0; k < d[ax]; k++) if (x[base + k * st[ax]] / T > mx) mx = x[base + k * st[ax]] / T;
            for (int64_t k = 0; k < d[ax]; k++) s += exp(x[base + k * st[ax]] / T - mx);
            y[i] = o ? x[i] / T - mx - log(s) : exp(x[i] / T - mx) / s;
        }
        cr_assert_eq(fh_node_forward(&n, 1, NULL), 0);
        cr_assert_leq(tu_relerr(n.out[0], MXP_DTYPE_F64, y, 60), 1e-13, "%s %s", ops[o], kw);
        tu_fill(n.out_grad[0], MXP_DTYPE_F64, 60, &r, -1, 1);
        int check[1] = {1};
        tu_fd_check(&n, 1, check, 1e-6);
        fh_node_free(&n);
    }
}

Test(softmax, float32, .init = setup, .fini = teardown) {
    int64_t d[2] = {7, 300};
    fh_node n;
    tu_node(&n, pack, "softmax", "", MXP_DTYPE_F32, 2, d, 1);
    uint64_t r = 2;
    tu_fill(n.in[0], MXP_DTYPE_F32, 2100, &r, -20, 20);
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0);
    for (int i = 0; i < 7; i++) {
        double s = 0;
        for (int k = 0; k < 300; k++) s += ((float *)n.out[0])[i * 300 + k];
        cr_assert(fabs(s - 1) < 1e-5);
    }
    fh_node_free(&n);
}
