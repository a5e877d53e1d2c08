/* opinfo.c — an op's definition and the params parsed from a node's kwargs,
 * with the defining pack pinned for as long as the caller needs them (one
 * pass: symbol creation, shape or type inference, program building).
 * Both come from plugin/opdef.h, the one path into pack code (reserved
 * "__x__" keys are attributes, not parameters, and are skipped there).
 * Nothing is kept across calls, so symbols never block a pack reload. */
#include "graph/graph.h"

#include <string.h>

int mxp__opinfo_open(const char *op_name, int n_kwargs, const char *const *keys, const char *const *vals,
                     mxp__opinfo *out) {
    memset(out, 0, sizeof *out);
    int rc = mxp__opdef_acquire(op_name, &out->od);
    if (rc) return rc;
    out->def = out->od.def;
    rc = mxp__op_params_new(out->def, keys, vals, n_kwargs, &out->params);
    if (rc) mxp__opinfo_close(out);
    return rc;
}

void mxp__opinfo_close(mxp__opinfo *oi) {
    if (!oi) return;
    if (oi->params) mxp__op_params_free(oi->def, oi->params);
    mxp__opdef_release(&oi->od);
    memset(oi, 0, sizeof *oi);
}
