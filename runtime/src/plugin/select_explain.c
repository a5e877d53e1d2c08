/* select_explain.c — mxp_op_explain (`mxplug info OP --why`): for one
 * configuration given as "name=d1,d2" input shapes, kwargs and a device,
 * which implementation the op's policy chooses and why each other one is
 * not.  The shapes of outputs and aux states are inferred first, so
 * supports() sees a whole configuration.  The report itself is written by
 * select.c's selection as it decides (one account, never a second
 * reasoning that could disagree); this file builds the query and frames it.
 * Calls into pack code go through opdef.h. */
#include "plugin/plugin_impl.h"

#include <mxplug/fileio.h>

#include <errno.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parse "name=d1,d2,..." into the shape of the input so named. */
static int explain_shape(const char *op, const char *spec, char (*names)[MXP_NAME_MAX], int n_in, mxp_shape *sh) {
    const char *eq = spec ? strchr(spec, '=') : NULL;
    if (!eq) return mxp__error(MXP_EINVAL, "explain: shape '%s' is not name=d1,d2,...", spec ? spec : "(null)");
    int idx = -1;
    for (int i = 0; i < n_in; i++)
        if (strlen(names[i]) == (size_t)(eq - spec) && !strncmp(names[i], spec, (size_t)(eq - spec))) idx = i;
    if (idx < 0) return mxp__error(MXP_EINVAL, "explain: op '%s' has no input named '%.*s'", op, (int)(eq - spec), spec);
    mxp_shape *t = &sh[idx];
    t->ndim = 0;
    /* Strict: digits and ',' only, at most MXP_MAX_NDIM, no overflow (a
     * negative, a 12th dimension or "1,x" was silently dropped before). */
    for (const char *p = eq + 1; *p;) {
        char *end;
        errno = 0;
        long long v = *p >= '0' && *p <= '9' ? strtoll(p, &end, 10) : -1;
        if (v < 0 || errno == ERANGE || (*end && *end != ',') || (*end == ',' && !end[1]))
            return mxp__error(MXP_EINVAL, "explain: shape '%s': dimensions are integers >= 0 separated by ','", spec);
        if (t->ndim == MXP_MAX_NDIM)
            return mxp__error(MXP_EINVAL, "explain: shape '%s': more than %d dimensions", spec, MXP_MAX_NDIM);
        t->dims[t->ndim++] = v;
        p = *end == ',' ? end + 1 : end;
    }
    return mxp_size_of_shape(spec, t->dims, t->ndim, 1, 0, NULL, NULL);
}

int mxp_op_explain(const char *op_name, const char *device, const char *const *shapes, int n_shapes,
                   const char *const *keys, const char *const *vals, int n_kwargs, char **out_report) {
    if (out_report) *out_report = NULL;
    if (!op_name || !out_report) return mxp__error(MXP_EMISUSE, "mxp_op_explain: NULL argument");
    mxp__opdef od;
    int rc = mxp__opdef_acquire(op_name, &od);
    if (rc) return rc;
    const mxp_op_def *def = od.def;
    void *params = NULL;
    char (*names)[MXP_NAME_MAX] = calloc(3 * 64, MXP_NAME_MAX);
    mxp_shape *sh = calloc(3 * 64, sizeof *sh);
    int32_t *dt = calloc(3 * 64, sizeof *dt);
    int n_in = 0, n_out = 0, n_aux = 0;
    if (!names || !sh || !dt) rc = mxp__error_oom("explain");
    if (!rc) rc = mxp__op_params_new(def, keys, vals, n_kwargs, &params);
    if (!rc) rc = mxp__op_list_names_def(def, params, 0, names, 64, &n_in);
    if (!rc) rc = mxp__op_list_names_def(def, params, 1, names + 64, 64, &n_out);
    if (!rc) rc = mxp__op_list_names_def(def, params, 2, names + 128, 64, &n_aux);
    int shapes_known = 0;
    if (!rc) {
        for (int i = 0; i < 3 * 64; i++) { sh[i].ndim = -1; dt[i] = MXP_DTYPE_F32; }
        for (int s = 0; s < n_shapes && !rc; s++) rc = explain_shape(od.name, shapes[s], names, n_in, sh);
        if (!rc) {
            char who[MXP_NAME_MAX + 8];
            snprintf(who, sizeof who, "op '%s'", od.name);
            int irc = mxp__opdef_infer_shape(def, params, who, (uint32_t)n_in, (uint32_t)n_out, (uint32_t)n_aux, sh,
                                             sh + 64, sh + 128);
            shapes_known = irc == MXP_OK;
            if (irc < 0 && irc != MXP_EINCOMPLETE) rc = irc;
        }
    }
    char *rep_text = NULL;
    if (!rc) {
        mxp_select_query q;
        memset(&q, 0, sizeof q);
        q.params = params;
        q.device_name = device ? device : "cpu";
        q.device.type = mxp__registry_device_type(q.device_name);
        q.n_in = (uint32_t)n_in; q.n_out = (uint32_t)n_out; q.n_aux = (uint32_t)n_aux;
        q.in_shapes = sh; q.out_shapes = sh + 64; q.aux_shapes = sh + 128;
        q.in_dtypes = dt; q.out_dtypes = dt + 64; q.aux_dtypes = dt + 128;
        mxp_impl_ref *ref = NULL;
        int src = mxp__select_impl(od.op, &q, &ref, &rep_text);
        mxp__impl_ref_release(ref);
        mxp__strbuf R = {0};
        mxp__strbuf_addf(&R, "%s", rep_text ? rep_text : "");
        if (!shapes_known) mxp__strbuf_addf(&R, "  (shapes incomplete: supports() saw unknown shapes)\n");
        if (src) mxp__strbuf_addf(&R, "  result: %s\n", mxp_last_error());
        free(rep_text);
        *out_report = R.buf ? R.buf : strdup("");
    }
    if (params) mxp__op_params_free(def, params);
    free(names); free(sh); free(dt);
    mxp__opdef_release(&od);
    return rc;
}
