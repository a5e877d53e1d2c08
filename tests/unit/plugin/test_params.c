/* test_params.c — MXNet's parameter value grammar into a param struct. */
#include <criterion/criterion.h>

#include "plugin/plugin_impl.h"

#include <math.h>
#include <string.h>

typedef struct P {
    int64_t i;
    double f;
    int32_t b;
    int32_t e;
    const char *s;
    int32_t dt;
    int32_t pad;
    mxp_param_shape sh;
    mxp_param_opt_int oi;
    mxp_param_opt_float of;
    mxp_param_shape req;
} P;

static const char *const acts[] = {"relu", "sigmoid", "tanh", NULL};
static const mxp_param_def defs[] = {
    MXP_PARAM("i", MXP_PARAM_INT, MXP_PARAM_HAS_MIN | MXP_PARAM_HAS_MAX, P, i, "3", 1, 10, NULL, "int"),
    MXP_PARAM("f", MXP_PARAM_FLOAT, 0, P, f, "1e-05", 0, 0, NULL, "float"),
    MXP_PARAM("b", MXP_PARAM_BOOL, 0, P, b, "False", 0, 0, NULL, "bool"),
    MXP_PARAM("e", MXP_PARAM_ENUM, 0, P, e, "tanh", 0, 0, acts, "enum"),
    MXP_PARAM("s", MXP_PARAM_STRING, 0, P, s, "hello", 0, 0, NULL, "string"),
    MXP_PARAM("dt", MXP_PARAM_DTYPE, 0, P, dt, "float32", 0, 0, NULL, "dtype"),
    MXP_PARAM("sh", MXP_PARAM_SHAPE, MXP_PARAM_HAS_MIN, P, sh, "()", -1, 0, NULL, "shape"),
    MXP_PARAM("oi", MXP_PARAM_OPT_INT, 0, P, oi, "None", 0, 0, NULL, "opt int"),
    MXP_PARAM("of", MXP_PARAM_OPT_FLOAT, 0, P, of, NULL, 0, 0, NULL, "opt float"),
    MXP_PARAM("kernel", MXP_PARAM_SHAPE, MXP_PARAM_REQUIRED, P, req, NULL, 0, 0, NULL, "required"),
};
#define N (uint32_t)(sizeof defs / sizeof defs[0])

static int parse(P *p, int n, const char *const *k, const char *const *v) {
    memset(p, 0, sizeof *p);
    return mxp__params_parse(defs, N, k, v, (uint32_t)n, p, "op 'Convolution'");
}

Test(params, defaults_and_required) {
    P p;
    const char *k[] = {"kernel"}, *v[] = {"(3, 3)"};
    cr_assert_eq(parse(&p, 1, k, v), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(p.i, 3);
    cr_expect_float_eq(p.f, 1e-05, 1e-15);
    cr_expect_eq(p.b, 0);
    cr_expect_eq(p.e, 2);
    cr_expect_str_eq(p.s, "hello");
    cr_expect_eq(p.dt, MXP_DTYPE_F32);
    cr_expect_eq(p.sh.has_value, 1);
    cr_expect_eq(p.sh.ndim, 0);
    cr_expect_eq(p.oi.has_value, 0);
    cr_expect_eq(p.of.has_value, 0);
    cr_expect_eq(p.req.ndim, 2);
    cr_expect_eq(p.req.dims[0], 3);
    cr_expect_eq(p.req.dims[1], 3);
    mxp__params_free(defs, N, &p);
    cr_expect_null(p.s);

    cr_expect_eq(parse(&p, 0, NULL, NULL), MXP_EINVAL);
    cr_expect(strstr(mxp_last_error(), "op 'Convolution': required parameter 'kernel'"), "%s", mxp_last_error());
}

typedef struct { const char *key, *val; int ok; } kase;

Test(params, value_grammar) {
    static const kase cases[] = {
        {"i", "7", 1}, {"i", " 10 ", 1}, {"i", "4.0", 1}, {"i", "4.5", 0}, {"i", "abc", 0}, {"i", "", 0},
        {"i", "0", 0}, {"i", "11", 0},
        {"f", "inf", 1}, {"f", "-inf", 1}, {"f", "1e-05", 1}, {"f", "0.5", 1}, {"f", "1.5x", 0}, {"f", "nan", 1},
        {"b", "True", 1}, {"b", "False", 1}, {"b", "true", 1}, {"b", "1", 1}, {"b", "0", 1}, {"b", "yes", 0},
        {"e", "relu", 1}, {"e", "'sigmoid'", 1}, {"e", "softrelu", 0},
        {"dt", "float16", 1}, {"dt", "int32", 1}, {"dt", "None", 1}, {"dt", "float7", 0},
        {"sh", "(5, 5)", 1}, {"sh", "(5,)", 1}, {"sh", "5", 1}, {"sh", "()", 1}, {"sh", "[2,3]", 1},
        {"sh", "None", 1}, {"sh", "(-1, 0)", 1}, {"sh", "(-2,)", 0}, {"sh", "abc", 0}, {"sh", "(1,,2)", 0},
        {"sh", "(1 2)", 0}, {"sh", "(1, 2", 0}, {"sh", "5,", 0}, {"sh", "(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17)", 0},
        {"oi", "None", 1}, {"oi", "-3", 1}, {"oi", "x", 0}, {"of", "None", 1}, {"of", "0.25", 1}, {"of", "y", 0},
        {"s", "anything (at all)", 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        P p;
        const char *k[] = {"kernel", cases[c].key}, *v[] = {"(1,1)", cases[c].val};
        int rc = parse(&p, 2, k, v);
        if (cases[c].ok) {
            cr_expect_eq(rc, MXP_OK, "%s='%s' should parse: %s", cases[c].key, cases[c].val, mxp_last_error());
            mxp__params_free(defs, N, &p);
        } else {
            cr_expect_eq(rc, MXP_EINVAL, "%s='%s' should fail", cases[c].key, cases[c].val);
            cr_expect(strstr(mxp_last_error(), "op 'Convolution': parameter '"), "%s", mxp_last_error());
        }
    }
}

Test(params, parsed_values) {
    P p;
    const char *k[] = {"kernel", "sh", "e", "oi", "of", "b", "dt", "f"};
    const char *v[] = {"[2,3]", "(5,)", "sigmoid", "-4", "0.25", "True", "uint8", "-inf"};
    cr_assert_eq(parse(&p, 8, k, v), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(p.req.ndim, 2);
    cr_expect_eq(p.req.dims[1], 3);
    cr_expect_eq(p.sh.ndim, 1);
    cr_expect_eq(p.sh.dims[0], 5);
    cr_expect_eq(p.e, 1);
    cr_expect_eq(p.oi.has_value, 1);
    cr_expect_eq(p.oi.value, -4);
    cr_expect_float_eq(p.of.value, 0.25, 0);
    cr_expect_eq(p.b, 1);
    cr_expect_eq(p.dt, MXP_DTYPE_U8);
    cr_expect(isinf(p.f) && p.f < 0);
    mxp__params_free(defs, N, &p);
}

Test(params, error_messages) {
    P p;
    const char *k1[] = {"kernel"}, *v1[] = {"abc"};
    cr_expect_eq(parse(&p, 1, k1, v1), MXP_EINVAL);
    cr_expect_str_eq(mxp_last_error(), "op 'Convolution': parameter 'kernel': cannot parse 'abc' as shape");
    const char *k2[] = {"kernel", "nope"}, *v2[] = {"3", "1"};
    cr_expect_eq(parse(&p, 2, k2, v2), MXP_EINVAL);
    cr_expect(strstr(mxp_last_error(), "unknown parameter 'nope'"), "%s", mxp_last_error());
    const char *k3[] = {"kernel", "i"}, *v3[] = {"3", "42"};
    cr_expect_eq(parse(&p, 2, k3, v3), MXP_EINVAL);
    cr_expect(strstr(mxp_last_error(), "parameter 'i': value '42' is out of range [1, 10]"), "%s", mxp_last_error());
    const char *k4[] = {"kernel", "e"}, *v4[] = {"3", "gelu"};
    cr_expect_eq(parse(&p, 2, k4, v4), MXP_EINVAL);
    cr_expect(strstr(mxp_last_error(), "'relu', 'sigmoid', 'tanh'"), "%s", mxp_last_error());
    const char *k5[] = {"kernel", "kernel"}, *v5[] = {"3", "3"};
    cr_expect_eq(parse(&p, 2, k5, v5), MXP_EINVAL);
    cr_expect(strstr(mxp_last_error(), "twice"), "%s", mxp_last_error());
}

Test(params, format_round_trip) {
    P p;
    const char *k[] = {"kernel", "sh", "f", "b", "e", "oi", "dt"};
    const char *v[] = {"(3,3)", "[7]", "0.1", "1", "relu", "None", "float64"};
    cr_assert_eq(parse(&p, 7, k, v), MXP_OK, "%s", mxp_last_error());
    const char *expect[N] = {"3", "0.1", "True", "relu", "hello", "float64", "(7,)", "None", "None", "(3, 3)"};
    for (uint32_t i = 0; i < N; i++) {
        char buf[128];
        cr_assert_eq(mxp__params_format(&defs[i], &p, buf, sizeof buf), MXP_OK);
        cr_expect_str_eq(buf, expect[i], "param %s", defs[i].name);
        /* And it parses back to the same formatted text. */
        P q;
        memcpy(&q, &p, sizeof q);
        q.s = NULL;
        if (defs[i].type != MXP_PARAM_STRING) {
            cr_assert_eq(mxp__params_parse_value(&defs[i], buf, (char *)&q + defs[i].offset, "t"), MXP_OK, "%s", buf);
            char buf2[128];
            mxp__params_format(&defs[i], &q, buf2, sizeof buf2);
            cr_expect_str_eq(buf2, buf);
        }
    }
    mxp__params_free(defs, N, &p);
}

/* A denormal is a value, not a syntax error: it reached the optimizer as
 * "cannot parse '9.99e-321' as float". */
Test(params, denormal_float_is_a_value) {
    P p;
    const char *k[] = {"kernel", "f"}, *v[] = {"3", "1e-320"};
    cr_assert_eq(parse(&p, 2, k, v), MXP_OK, "%s", mxp_last_error());
    cr_expect(p.f > 0 && p.f < 2.3e-308, "%g", p.f);
    cr_expect_float_eq(p.f, 1e-320, 1e-323);
    mxp__params_free(defs, N, &p);
    const char *v2[] = {"3", "1e-3x"};
    cr_expect_eq(parse(&p, 2, k, v2), MXP_EINVAL);
}
