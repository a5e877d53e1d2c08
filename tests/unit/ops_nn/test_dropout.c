/* test_dropout.c — Dropout: training mask values and rate, y = x * mask,
 * dx = dy * mask, identity at inference (mode=training) and active at
 * inference with mode=always, mask shared along `axes`, p=0. */
#include <string.h>
#include "nn_test_util.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

Test(dropout, train_and_infer, .init = setup, .fini = teardown) {
    for (int dti = 0; dti < 2; dti++) {
        int32_t dt = dti ? MXP_DTYPE_F64 : MXP_DTYPE_F32;
        int64_t d[2] = {100, 100};
        fh_node n;
        tu_node(&n, pack, "Dropout", "p=0.3", dt, 2, d, 1);
        cr_assert(n.def->resources & MXP_RESOURCE_RANDOM);
        uint64_t r = 1;
        tu_fill(n.in[0], dt, 10000, &r, 0.5, 1);
        tu_fill(n.out_grad[0], dt, 10000, &r, -1, 1);
        cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
        int zeros = 0;
        for (int i = 0; i < 10000; i++) {
            double m = tu_get(n.out[1], dt, i), x = tu_get(n.in[0], dt, i), y = tu_get(n.out[0], dt, i);
            cr_assert(m == 0 || fabs(m - 1 / 0.7) < 1e-6, "mask %g", m);
            zeros += m == 0;
            cr_assert(fabs(y - x * m) < 1e-6);
        }
        cr_assert(zeros > 2700 && zeros < 3300, "dropped %d of 10000", zeros);
        cr_assert_eq(fh_node_backward(&n, NULL), 0);
        for (int i = 0; i < 10000; i++)
            cr_assert(fabs(tu_get(n.in_grad[0], dt, i) - tu_get(n.out_grad[0], dt, i) * tu_get(n.out[1], dt, i)) < 1e-6);
        /* inference: identity */
        cr_assert_eq(fh_node_forward(&n, 0, NULL), 0);
        for (int i = 0; i < 10000; i++) cr_assert_eq(tu_get(n.out[0], dt, i), tu_get(n.in[0], dt, i));
        fh_node_free(&n);
    }
}

Test(dropout, always_and_axes, .init = setup, .fini = teardown) {
    int64_t d[3] = {4, 50, 6};
    fh_node n;
    tu_node(&n, pack, "Dropout", "p=0.5 mode=always axes=(1,)", MXP_DTYPE_F32, 3, d, 0);
    uint64_t r = 2;
    tu_fill(n.in[0], MXP_DTYPE_F32, 1200, &r, 1, 2);
    cr_assert_eq(fh_node_forward(&n, 0, NULL), 0, "%s", fh_error());
    const float *m = n.out[1];
    int zeros = 0;
    for (int i = 0; i < 4; i++) for (int k = 0; k < 6; k++) {
        for (int j = 1; j < 50; j++) cr_assert_eq(m[(i * 50 + j) * 6 + k], m[(i * 50) * 6 + k], "mask varies along axis 1");
        zeros += m[(i * 50) * 6 + k] == 0;
    }
    cr_assert(zeros > 0 && zeros < 24, "zeros %d", zeros);
    fh_node_free(&n);
    tu_node(&n, pack, "Dropout", "p=0", MXP_DTYPE_F32, 3, d, 1);
    tu_fill(n.in[0], MXP_DTYPE_F32, 1200, &r, 1, 2);
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0);
    for (int i = 0; i < 1200; i++) cr_assert_eq(((float *)n.out[0])[i], ((float *)n.in[0])[i]);
    fh_node_free(&n);
}
