/* opinfo.c — an op's definition and the params parsed from a node's kwargs,
 * with the defining pack pinned for as long as the caller needs them (one
 * pass: symbol creation, shape or type inference, program building).
 * Reserved "__x__" keys are attributes, not parameters, and are skipped.
 * Nothing is kept across calls, so symbols never block a pack reload. */
#include "graph/graph.h"

#include "plugin/plugin.h"

#include <stdlib.h>
#include <string.h>

int mxp__opinfo_open(const char *op_name, int n_kwargs, const char *const *keys, const char *const *vals,
                     mxp__opinfo *out) {
    memset(out, 0, sizeof *out);
    int rc = mxp__registry_ensure();
    if (rc) return rc;
    struct mxp_op *op = mxp__registry_find_op(op_name);
    if (!op) return mxp__error(MXP_ENOENT, "op '%s': not registered", op_name);
    const mxp_op_def *def = NULL;
    if ((rc = mxp__op_ensure_def(op, &def))) return rc;
    mxp__registry_rdlock();
    mxp_pack *p = op->pack;
    mxp__registry_unlock();
    if (!p) return mxp__error(MXP_ENOENT, "op '%s': no defining pack", op_name);
    if ((rc = mxp__pack_pin(p))) return mxp__error_prefix(rc, "op '%s'", op_name);
    mxp__registry_rdlock();
    def = op->def;
    mxp__registry_unlock();
    if (!def) {
        mxp__pack_unpin(p);
        return mxp__error(MXP_ENOENT, "op '%s': its defining pack is not loaded", op_name);
    }
    /* Drop the reserved attributes before parsing. */
    const char **k = calloc((size_t)n_kwargs + 1, sizeof *k), **v = calloc((size_t)n_kwargs + 1, sizeof *v);
    if (!k || !v) {
        free(k);
        free(v);
        mxp__pack_unpin(p);
        return mxp__error_oom("op params");
    }
    int m = 0;
    for (int i = 0; i < n_kwargs; i++) {
        if (!strncmp(keys[i], "__", 2)) continue;
        k[m] = keys[i];
        v[m++] = vals[i];
    }
    void *params = NULL;
    rc = mxp__op_params_new(def, k, v, m, &params);
    free(k);
    free(v);
    if (rc) {
        mxp__pack_unpin(p);
        return rc;
    }
    out->op = op;
    out->pinned = p;
    out->def = def;
    out->params = params;
    return MXP_OK;
}

void mxp__opinfo_close(mxp__opinfo *oi) {
    if (!oi) return;
    if (oi->params) mxp__op_params_free(oi->def, oi->params);
    if (oi->pinned) mxp__pack_unpin(oi->pinned);
    memset(oi, 0, sizeof *oi);
}
