/* param_access.c — typed reads of an op's parsed parameters by name
 * (ABI 1.1: mxp_op_params, mxp_host.param_get).
 *
 * An impl of an op another pack defines receives that pack's private param
 * struct; the host pairs it with the op's schema in an mxp_op_params record
 * (mxp__op_params_record, filled wherever impl args are built) and serves
 * host.param_get: find the def by name, check the declared type, copy the
 * value out.  It reads only: it never parses strings (params.c does) and
 * never keeps the record.  Enum values are returned as the choice's name,
 * because the index order is the defining pack's private business.
 * Invariant: a record is only read during the callback it was passed to,
 * while the impl ref that owns def and values lives. */
#include "plugin/plugin_impl.h"

#include <stdio.h>
#include <string.h>

void mxp__op_params_record(const mxp_op_def *def, const void *values, mxp_op_params *out) {
    memset(out, 0, sizeof *out);
    out->hdr = (mxp_header)MXP_HEADER(mxp_op_params);
    out->op_name = def ? def->name : NULL;
    out->defs = def && def->n_params ? def->params : NULL;
    out->n_defs = out->defs ? def->n_params : 0;
    out->values = values;
}

/* "kernel, stride, ..." for the not-found message. */
static void list_names(const mxp_op_params *p, char *buf, size_t cap) {
    size_t off = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < p->n_defs && off + 1 < cap; i++) {
        const mxp_param_def *d = MXP_ARRAY_AT(mxp_param_def, p->defs, i);
        int w = snprintf(buf + off, cap - off, "%s%s", i ? ", " : "", d->name ? d->name : "?");
        if (w < 0) break;
        off += (size_t)w;
    }
    if (off >= cap && cap > 4) memcpy(buf + cap - 4, "...", 4);
}

static size_t value_size(int32_t type) {
    switch (type) {
    case MXP_PARAM_INT: return sizeof(int64_t);
    case MXP_PARAM_FLOAT: return sizeof(double);
    case MXP_PARAM_BOOL: case MXP_PARAM_DTYPE: return sizeof(int32_t);
    case MXP_PARAM_SHAPE: return sizeof(mxp_param_shape);
    case MXP_PARAM_OPT_INT: return sizeof(mxp_param_opt_int);
    case MXP_PARAM_OPT_FLOAT: return sizeof(mxp_param_opt_float);
    default: return 0; /* ENUM and STRING are converted */
    }
}

int mxp__param_get(const mxp_op_params *p, const char *name, int32_t type, void *out) {
    if (!p || !name || !out)
        return mxp__error(MXP_EINVAL, "param_get: %s is NULL", !p ? "the record" : !name ? "name" : "out");
    if (p->hdr.struct_size < offsetof(mxp_op_params, values) + sizeof p->values || p->hdr.abi_major != MXP_ABI_MAJOR ||
        (p->n_defs && !p->defs) || !p->values)
        return mxp__error(MXP_EINVAL, "param_get '%s': not a parameter record from this host", name);
    const char *op = p->op_name ? p->op_name : "?";
    const mxp_param_def *d = NULL;
    for (uint32_t i = 0; i < p->n_defs && !d; i++) {
        const mxp_param_def *c = MXP_ARRAY_AT(mxp_param_def, p->defs, i);
        if (c->name && !strcmp(c->name, name)) d = c;
    }
    if (!d) {
        char names[512];
        list_names(p, names, sizeof names);
        return mxp__error(MXP_ENOENT, "op '%s' has no parameter '%s' (its parameters: %s)", op, name,
                          p->n_defs ? names : "none");
    }
    if (d->type != type)
        return mxp__error(MXP_ETYPE, "op '%s': parameter '%s' is of type %s, read as %s", op, name,
                          mxp__params_type_name(d->type), mxp__params_type_name(type));
    const char *src = (const char *)p->values + d->offset;
    if (type == MXP_PARAM_ENUM) {
        int32_t idx;
        memcpy(&idx, src, sizeof idx);
        int32_t n = 0;
        while (d->choices && d->choices[n]) n++;
        if (idx < 0 || idx >= n)
            return mxp__error(MXP_EINTERNAL, "op '%s': parameter '%s' holds choice %d of %d", op, name, (int)idx, (int)n);
        *(const char **)out = d->choices[idx];
        return MXP_OK;
    }
    if (type == MXP_PARAM_STRING) {
        const char *str;
        memcpy(&str, src, sizeof str);
        *(const char **)out = str;
        return MXP_OK;
    }
    size_t sz = value_size(type);
    if (!sz) return mxp__error(MXP_EINVAL, "op '%s': parameter '%s' has unknown type %d", op, name, (int)type);
    memcpy(out, src, sz);
    return MXP_OK;
}
