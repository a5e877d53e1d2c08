/* pack.c — the ops-basic pack descriptor and init: saves the host table
 * (ob_host) and registers every family.  mxp_plugin_v1 is the only symbol
 * the library exports (-fvisibility=hidden). */
#include "common.h"

static int ob_init(const mxp_plugin_init_args *a) {
    ob_host = a->host;
    int (*const regs[])(mxp_registrar *) = {
        ob_reg_unary, ob_reg_binary, ob_reg_scalar, ob_reg_reduce, ob_reg_dot,
        ob_reg_shape, ob_reg_join, ob_reg_index, ob_reg_cast, ob_reg_init,
        ob_reg_random, ob_reg_sum_n, ob_reg_optimizer, ob_reg_math_ext, ob_reg_shape_ext, ob_reg_index_ext,
        ob_reg_reduce_ext,
    };
    for (size_t i = 0; i < sizeof regs / sizeof regs[0]; i++) {
        int rc = regs[i](a->registrar);
        if (rc) return rc;
    }
    return MXP_OK;
}

static void ob_fini(const mxp_plugin_fini_args *a) {
    (void)a;
    ob_host = NULL;
}

static const mxp_plugin_desc ob_desc = {
    MXP_HEADER(mxp_plugin_desc), 0, 0, 0, "ops-basic", "0.1.0",
    "Basic operators with MXNet 1.x names: elementwise, broadcast, scalar, reduce, dot, "
    "shape, join, index, cast, init, random, ElementWiseSum, optimizer updates",
    "Apache-2.0", ob_init, ob_fini,
};

MXP_PLUGIN_DEFINE(ob_desc)
