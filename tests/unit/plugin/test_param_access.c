/* test_param_access.c — typed reads of an op's parsed parameters by name
 * (ABI 1.1: mxp_op_params + host.param_get, through the mxp_param_get_*
 * helpers a pack uses).  The record is built from ops-nn's real
 * Convolution definition and kwargs parsed by the host, exactly as impl
 * args carry it; every value read back is compared with the kwargs written
 * here (and with MXNet's documented defaults for the unset ones).  Wrong
 * names and wrong types must fail with MXP_ENOENT / MXP_ETYPE and a message
 * naming the op and the parameter. */
#include "plugin_test_util.h"

#include "plugin/plugin_impl.h"

#include <mxp/host.h>

static const mxp_op_def *g_def;

static void setup(void) {
    setenv("MXP_MANIFEST", MXP_BUILD_DIR "/plugins/manifest.yaml", 1);
    unsetenv("MXP_PLUGIN_PATH");
    unsetenv("MXP_PACKS");
    const mxp_op *op = mxp_op_find("Convolution");
    cr_assert(op, "Convolution not in the build manifest: %s", mxp_last_error());
    cr_assert_eq(mxp__op_ensure_def((struct mxp_op *)op, &g_def), MXP_OK, "%s", mxp_last_error());
}

TestSuite(param_access, .init = setup);

static void *parse(const char *const *keys, const char *const *vals, int n) {
    void *params = NULL;
    cr_assert_eq(mxp__op_params_new(g_def, keys, vals, n, &params), MXP_OK, "%s", mxp_last_error());
    return params;
}

static void expect_shape(const mxp_host *h, const mxp_op_params *p, const char *name, int64_t d0, int64_t d1) {
    mxp_param_shape s;
    memset(&s, 0x5a, sizeof s);
    cr_assert_eq(mxp_param_get_shape(h, p, name, &s), MXP_OK, "%s: %s", name, mxp_last_error());
    cr_expect_eq(s.has_value, 1, "%s", name);
    cr_expect_eq(s.ndim, 2, "%s", name);
    cr_expect_eq(s.dims[0], d0, "%s[0] = %lld", name, (long long)s.dims[0]);
    cr_expect_eq(s.dims[1], d1, "%s[1] = %lld", name, (long long)s.dims[1]);
}

Test(param_access, every_convolution_parameter_as_given) {
    const char *k[] = {"kernel", "stride", "dilate", "pad", "num_filter", "num_group", "no_bias", "layout",
                       "workspace", "cudnn_tune", "cudnn_off"};
    const char *v[] = {"(3, 2)", "(2, 1)", "(1, 3)", "(1, 0)", "6", "3", "True", "NCHW", "256", "fastest", "1"};
    void *params = parse(k, v, 11);
    mxp_op_params rec;
    mxp__op_params_record(g_def, params, &rec);
    const mxp_host *h = mxp__host_table();
    cr_assert(MXP_HAS_FIELD(h, mxp_host, param_get) && h->param_get);
    cr_expect_str_eq(rec.op_name, "Convolution");
    expect_shape(h, &rec, "kernel", 3, 2);
    expect_shape(h, &rec, "stride", 2, 1);
    expect_shape(h, &rec, "dilate", 1, 3);
    expect_shape(h, &rec, "pad", 1, 0);
    int64_t i = -1;
    cr_assert_eq(mxp_param_get_int(h, &rec, "num_filter", &i), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(i, 6);
    cr_assert_eq(mxp_param_get_int(h, &rec, "num_group", &i), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(i, 3);
    cr_assert_eq(mxp_param_get_int(h, &rec, "workspace", &i), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(i, 256);
    int32_t b = -1;
    cr_assert_eq(mxp_param_get_bool(h, &rec, "no_bias", &b), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(b, 1);
    cr_assert_eq(mxp_param_get_bool(h, &rec, "cudnn_off", &b), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(b, 1);
    const char *e = NULL;
    cr_assert_eq(mxp_param_get_enum(h, &rec, "layout", &e), MXP_OK, "%s", mxp_last_error());
    cr_expect_str_eq(e, "NCHW");
    cr_assert_eq(mxp_param_get_enum(h, &rec, "cudnn_tune", &e), MXP_OK, "%s", mxp_last_error());
    cr_expect_str_eq(e, "fastest");
    mxp__op_params_free(g_def, params);
}

/* Unset parameters read as MXNet's defaults, after the defining op's
 * check_params filled stride/dilate/pad for a 2-D kernel. */
Test(param_access, defaults_after_check_params) {
    const char *k[] = {"kernel", "num_filter"};
    const char *v[] = {"(5,5)", "20"};
    void *params = parse(k, v, 2);
    mxp_op_params rec;
    mxp__op_params_record(g_def, params, &rec);
    const mxp_host *h = mxp__host_table();
    expect_shape(h, &rec, "kernel", 5, 5);
    expect_shape(h, &rec, "stride", 1, 1);
    expect_shape(h, &rec, "dilate", 1, 1);
    expect_shape(h, &rec, "pad", 0, 0);
    int64_t i = -1;
    cr_assert_eq(mxp_param_get_int(h, &rec, "num_group", &i), MXP_OK);
    cr_expect_eq(i, 1);
    cr_assert_eq(mxp_param_get_int(h, &rec, "num_filter", &i), MXP_OK);
    cr_expect_eq(i, 20);
    int32_t b = -1;
    cr_assert_eq(mxp_param_get_bool(h, &rec, "no_bias", &b), MXP_OK);
    cr_expect_eq(b, 0);
    const char *e = NULL;
    cr_assert_eq(mxp_param_get_enum(h, &rec, "layout", &e), MXP_OK);
    cr_expect_str_eq(e, "None");
    mxp__op_params_free(g_def, params);
}

Test(param_access, wrong_name_and_wrong_type_are_errors) {
    const char *k[] = {"kernel", "num_filter"};
    const char *v[] = {"(3,3)", "8"};
    void *params = parse(k, v, 2);
    mxp_op_params rec;
    mxp__op_params_record(g_def, params, &rec);
    const mxp_host *h = mxp__host_table();
    int64_t i = 12345;
    cr_expect_eq(mxp_param_get_int(h, &rec, "num_filters", &i), MXP_ENOENT);
    cr_expect(strstr(mxp_last_error(), "'num_filters'") && strstr(mxp_last_error(), "Convolution") &&
              strstr(mxp_last_error(), "num_filter, num_group"), "%s", mxp_last_error());
    cr_expect_eq(i, 12345, "a failed read leaves out alone");
    cr_expect_eq(mxp_param_get_int(h, &rec, "kernel", &i), MXP_ETYPE);
    cr_expect(strstr(mxp_last_error(), "'kernel'") && strstr(mxp_last_error(), "shape") &&
              strstr(mxp_last_error(), "int"), "%s", mxp_last_error());
    double d;
    cr_expect_eq(mxp_param_get_float(h, &rec, "num_filter", &d), MXP_ETYPE);
    const char *e;
    cr_expect_eq(mxp_param_get_enum(h, &rec, "no_bias", &e), MXP_ETYPE);
    cr_expect(strstr(mxp_last_error(), "boolean"), "%s", mxp_last_error());
    mxp_param_shape s;
    cr_expect_eq(mxp_param_get_shape(h, &rec, "layout", &s), MXP_ETYPE);
    /* Misuse. */
    cr_expect_eq(h->param_get(NULL, "kernel", MXP_PARAM_SHAPE, &s), MXP_EINVAL);
    cr_expect_eq(h->param_get(&rec, NULL, MXP_PARAM_SHAPE, &s), MXP_EINVAL);
    cr_expect_eq(h->param_get(&rec, "kernel", MXP_PARAM_SHAPE, NULL), MXP_EINVAL);
    mxp_op_params bad = rec;
    bad.hdr.struct_size = 8;
    cr_expect_eq(h->param_get(&bad, "kernel", MXP_PARAM_SHAPE, &s), MXP_EINVAL);
    mxp__op_params_free(g_def, params);
}

/* A SimpleOp's expanded schema ("scalar" appended by the host) reads too. */
Test(param_access, simple_op_scalar) {
    const mxp_op *op = mxp_op_find("_plus_scalar");
    cr_assert(op, "_plus_scalar: %s", mxp_last_error());
    const mxp_op_def *def = NULL;
    cr_assert_eq(mxp__op_ensure_def((struct mxp_op *)op, &def), MXP_OK, "%s", mxp_last_error());
    const char *k[] = {"scalar"}, *v[] = {"2.5"};
    void *params = NULL;
    cr_assert_eq(mxp__op_params_new(def, k, v, 1, &params), MXP_OK, "%s", mxp_last_error());
    mxp_op_params rec;
    mxp__op_params_record(def, params, &rec);
    double d = 0;
    cr_assert_eq(mxp_param_get_float(mxp__host_table(), &rec, "scalar", &d), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(d, 2.5);
    mxp__op_params_free(def, params);
}
