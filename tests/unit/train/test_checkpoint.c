/* test_checkpoint.c — checkpoint files (runtime/src/train/checkpoint.c):
 * PREFIX-%04d.params with arg:/aux: keys, written and read back
 * (values, names, split), the keys checked in the raw file as MXNet's
 * loader sees them (mxp_ndarray_load), naming, and a foreign key refused. */
#include "train_test_util.h"

TestSuite(train_checkpoint, .init = trt_setup, .fini = trt_teardown);

Test(train_checkpoint, params_round_trip_with_mxnet_keys) {
    float w[6] = {1, 2, 3, 4, 5, 6}, b[3] = {-1, 0.5f, 7}, mm[2] = {0.25f, 0.75f};
    int64_t ws[2] = {2, 3};
    mxp_ndarray *args[2] = {trt_f32(ws, 2, w), trt_vec(3, b)};
    mxp_ndarray *auxs[1] = {trt_vec(2, mm)};
    const char *an[2] = {"fc1_weight", "fc1_bias"}, *xn[1] = {"bn_moving_mean"};
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s/mlp", trt_dir);
    cr_assert_eq(mxp_checkpoint_save_params(prefix, 3, 2, an, args, 1, xn, auxs), MXP_OK, "%s", mxp_last_error());
    char path[256];
    cr_assert_eq(mxp_checkpoint_path(prefix, 3, "params", path, sizeof path), MXP_OK);
    char want[256];
    snprintf(want, sizeof want, "%s/mlp-0003.params", trt_dir);
    cr_assert_str_eq(path, want);
    cr_assert_eq(access(path, R_OK), 0);
    /* Raw keys, in order. */
    int n = 0;
    mxp_ndarray **arrs = NULL;
    char **names = NULL;
    cr_assert_eq(mxp_ndarray_load(path, &n, &arrs, &names), MXP_OK);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(names[0], "arg:fc1_weight");
    cr_assert_str_eq(names[1], "arg:fc1_bias");
    cr_assert_str_eq(names[2], "aux:bn_moving_mean");
    mxp_ndarray_list_free(n, arrs, names);
    /* Split load. */
    int na, nx;
    char **ann, **xnn;
    mxp_ndarray **aa, **xa;
    cr_assert_eq(mxp_checkpoint_load_params(prefix, 3, &na, &ann, &aa, &nx, &xnn, &xa), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(na, 2);
    cr_assert_eq(nx, 1);
    cr_assert_str_eq(ann[0], "fc1_weight");
    cr_assert_str_eq(ann[1], "fc1_bias");
    cr_assert_str_eq(xnn[0], "bn_moving_mean");
    cr_assert_eq(mxp_ndarray_ndim(aa[0]), 2);
    cr_assert_eq(mxp_ndarray_shape(aa[0])[1], 3);
    float *g0 = trt_get(aa[0]), *g1 = trt_get(aa[1]), *g2 = trt_get(xa[0]);
    cr_assert_eq(memcmp(g0, w, sizeof w), 0);
    cr_assert_eq(memcmp(g1, b, sizeof b), 0);
    cr_assert_eq(memcmp(g2, mm, sizeof mm), 0);
    free(g0), free(g1), free(g2);
    mxp_ndarray_list_free(na, aa, ann);
    mxp_ndarray_list_free(nx, xa, xnn);
    mxp_ndarray_release(args[0]), mxp_ndarray_release(args[1]), mxp_ndarray_release(auxs[0]);
}

Test(train_checkpoint, naming_and_foreign_keys) {
    char buf[64];
    cr_assert_eq(mxp_checkpoint_path("a/b", 12, "states", buf, sizeof buf), MXP_OK);
    cr_assert_str_eq(buf, "a/b-0012.states");
    cr_assert_eq(mxp_checkpoint_path("a/b", 12, "symbol", buf, sizeof buf), MXP_OK);
    cr_assert_str_eq(buf, "a/b-symbol.json");
    cr_assert_eq(mxp_checkpoint_path("a/b", 1, "weights", buf, sizeof buf), MXP_EINVAL);
    cr_assert_eq(mxp_checkpoint_path("a/b", 1, "params", buf, 8), MXP_EINVAL);
    /* A plain dict file (Gluon's bare names) is not a checkpoint. */
    float x = 1;
    mxp_ndarray *a = trt_vec(1, &x);
    const char *nm[1] = {"dense0_weight"};
    char path[128], prefix[128];
    snprintf(prefix, sizeof prefix, "%s/g", trt_dir);
    snprintf(path, sizeof path, "%s-0000.params", prefix);
    cr_assert_eq(mxp_ndarray_save(path, 1, &a, nm), MXP_OK);
    int na, nx;
    char **ann, **xnn;
    mxp_ndarray **aa, **xa;
    cr_assert_eq(mxp_checkpoint_load_params(prefix, 0, &na, &ann, &aa, &nx, &xnn, &xa), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "dense0_weight"), "%s", mxp_last_error());
    cr_assert_eq(mxp_checkpoint_load_params(prefix, 9, &na, &ann, &aa, &nx, &xnn, &xa), MXP_EIO);
    mxp_ndarray_release(a);
}
