/* test_softmax.c — softmax / log_softmax over several axes with
 * temperature: a table (op_table.h, every impl) of forward against a
 * float64 reference and backward by float64 finite differences; float32
 * rows of a long axis sum to 1. */
#include <string.h>
#include "nn_test_util.h"
#include "op_table.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

static const char *kw_value(const char *const *kw, const char *key, const char *dflt) {
    for (int k = 0; kw[k]; k += 2)
        if (!strcmp(kw[k], key)) return kw[k + 1];
    return dflt;
}

/* softmax (log_softmax with log=1) of a 3-d input along kw's axis, x / T. */
static void ref_softmax(const ot_ref_args *a, int log_form) {
    const fh_arr *in = &a->in[0];
    int ax = atoi(kw_value(a->kw, "axis", "-1"));
    if (ax < 0) ax += in->ndim;
    double T = atof(kw_value(a->kw, "temperature", "1"));
    int64_t st = 1;
    for (int d = in->ndim - 1; d > ax; d--) st *= in->shape[d];
    int64_t len = in->shape[ax];
    for (int64_t i = 0; i < fh_numel(in); i++) {
        int64_t base = i - ((i / st) % len) * st;
        double mx = -1e300, s = 0;
        for (int64_t k = 0; k < len; k++) mx = fmax(mx, fh_get(in, base + k * st) / T);
        for (int64_t k = 0; k < len; k++) s += exp(fh_get(in, base + k * st) / T - mx);
        double x = fh_get(in, i) / T;
        fh_set(&a->out[0], i, log_form ? x - mx - log(s) : exp(x - mx) / s);
    }
}
static void ref_plain(const ot_ref_args *a) { ref_softmax(a, 0); }
static void ref_log(const ot_ref_args *a) { ref_softmax(a, 1); }

#define SM(name, fn, axis, ...)                                                                               \
    {.op = name, .kw = {"axis", axis, __VA_ARGS__ NULL}, .n_in = 1, .in = {OT_SHAPE(3, 4, 5)}, .lo = -3,      \
     .hi = 3, .ref = fn, .dtypes = OT_F64, .atol64 = 1e-13, .rtol64 = 1e-13, .fd_mask = 1, .fd_atol = 1e-6, \
     .fd_rtol = 1e-6}
#define SM_AXES(name, fn)                                                                                     \
    SM(name, fn, "-1"), SM(name, fn, "0"), SM(name, fn, "1"), SM(name, fn, "-1", "temperature", "2.5", ),           \
        SM(name, fn, "0", "temperature", "2.5", ), SM(name, fn, "1", "temperature", "2.5", )

static const ot_row rows[] = {SM_AXES("softmax", ref_plain), SM_AXES("log_softmax", ref_log)};

Test(softmax, table, .init = setup, .fini = teardown) {
    int runs = ot_run(pack, rows, OT_LEN(rows));
    cr_assert_geq(runs, 12, "%d runs", runs);
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
