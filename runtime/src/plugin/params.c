/* params.c — MXNet's parameter value grammar, parsed into a pack's own
 * parameter struct as described by its mxp_param_def array (mxp/params.h),
 * and formatted back ("(3, 3)", "True") for JSON save and `mxplug info`.
 *
 * Grammar per type: INT "3" "-1"; FLOAT "1e-05" "inf" "-inf" "nan";
 * BOOL True/False/true/false/1/0; ENUM a choice name; STRING anything;
 * DTYPE a dtype name ("float32") or None; SHAPE "(5, 5)" "(5,)" "5" "()"
 * "[2,3]" "None"; OPT_INT / OPT_FLOAT a value or "None".  Surrounding blanks
 * are ignored.  Every failure names the owner, the key and the value:
 *   op 'Convolution': parameter 'kernel': cannot parse 'abc' as shape
 * Invariant: on failure the struct holds no allocated strings (freed). */
#include "plugin/plugin_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const mxp_param_def *mxp__param_def_at(const mxp_param_def *defs, uint32_t i) {
    if (defs[0].hdr.struct_size < offsetof(mxp_param_def, doc) + sizeof(const char *))
        return &defs[i]; /* a smaller (older) writer never existed for 1.0: assume native */
    return MXP_ARRAY_AT(mxp_param_def, defs, i);
}

const char *mxp__params_type_name(int32_t type) {
    switch (type) {
    case MXP_PARAM_INT: return "int";
    case MXP_PARAM_FLOAT: return "float";
    case MXP_PARAM_BOOL: return "boolean";
    case MXP_PARAM_ENUM: return "enum";
    case MXP_PARAM_STRING: return "string";
    case MXP_PARAM_DTYPE: return "dtype";
    case MXP_PARAM_SHAPE: return "shape";
    case MXP_PARAM_OPT_INT: return "int or None";
    case MXP_PARAM_OPT_FLOAT: return "float or None";
    default: return "?";
    }
}

/* Trim into a bounded buffer. */
static int trimmed(const char *s, char *buf, size_t cap) {
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r')) n--;
    if (n >= cap) return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return 0;
}

static int bad(const mxp_param_def *d, const char *val, const char *as, const char *what) {
    return mxp__error(MXP_EINVAL, "%s: parameter '%s': cannot parse '%s' as %s", what, d->name, val, as);
}

static int parse_i64(const char *s, int64_t *out) {
    if (!*s) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) {
        /* Accept "3.0"-style integral floats as MXNet's Python front end emits them. */
        errno = 0;
        double d = strtod(s, &end);
        if (errno || *end || d != floor(d) || fabs(d) > 9.2e18) return -1;
        v = (long long)d;
    }
    *out = v;
    return 0;
}

static int parse_f64(const char *s, double *out) {
    if (!*s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* ERANGE also flags gradual underflow (1e-320 is a valid denormal) and
     * overflow to inf: both are values the range checks judge, not syntax
     * errors ('cannot parse' would be wrong). */
    if (*end) return -1;
    *out = v;
    return 0;
}

static int is_none(const char *s) { return !strcmp(s, "None") || !strcmp(s, "none"); }

static void range_text(const mxp_param_def *d, char *buf, size_t cap) {
    buf[0] = '\0';
    if (!(d->flags & (MXP_PARAM_HAS_MIN | MXP_PARAM_HAS_MAX))) return;
    char lo[40] = "-inf", hi[40] = "inf";
    if (d->flags & MXP_PARAM_HAS_MIN) snprintf(lo, sizeof lo, "%g", d->min);
    if (d->flags & MXP_PARAM_HAS_MAX) snprintf(hi, sizeof hi, "%g", d->max);
    snprintf(buf, cap, "%s%s, %s%s", (d->flags & MXP_PARAM_HAS_MIN) ? "[" : "(", lo, hi,
             (d->flags & MXP_PARAM_HAS_MAX) ? "]" : ")");
}

static int check_range(const mxp_param_def *d, double v, const char *val, const char *what) {
    if (((d->flags & MXP_PARAM_HAS_MIN) && !(v >= d->min)) ||
        ((d->flags & MXP_PARAM_HAS_MAX) && !(v <= d->max))) {
        char r[96];
        range_text(d, r, sizeof r);
        return mxp__error(MXP_EINVAL, "%s: parameter '%s': value '%s' is out of range %s", what,
                          d->name, val, r);
    }
    return MXP_OK;
}

static int parse_shape(const mxp_param_def *d, const char *s, mxp_param_shape *out, const char *what) {
    memset(out, 0, sizeof *out);
    if (is_none(s)) return MXP_OK;
    int n = 0;
    int rc = mxp__tuple_parse(s, out->dims, MXP_PARAM_SHAPE_MAX, &n);
    if (rc == MXP_EFORMAT)
        return mxp__error(MXP_EINVAL, "%s: parameter '%s': '%s' has more than %d dimensions", what,
                          d->name, s, MXP_PARAM_SHAPE_MAX);
    if (rc) return bad(d, s, "shape", what);
    out->ndim = n;
    out->has_value = 1;
    for (int i = 0; i < n; i++) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)out->dims[i]);
        int rc = check_range(d, (double)out->dims[i], v, what);
        if (rc) return rc;
    }
    return MXP_OK;
}

int mxp__params_parse_value(const mxp_param_def *d, const char *val, void *dst, const char *what) {
    char s[512];
    if (!val) return mxp__error(MXP_EINVAL, "%s: parameter '%s': NULL value", what, d->name);
    if (d->type != MXP_PARAM_STRING && trimmed(val, s, sizeof s))
        return mxp__error(MXP_EINVAL, "%s: parameter '%s': value too long", what, d->name);
    switch (d->type) {
    case MXP_PARAM_INT: {
        int64_t v;
        if (parse_i64(s, &v)) return bad(d, val, "int", what);
        int rc = check_range(d, (double)v, s, what);
        if (rc) return rc;
        memcpy(dst, &v, sizeof v);
        return MXP_OK;
    }
    case MXP_PARAM_FLOAT: {
        double v;
        if (parse_f64(s, &v)) return bad(d, val, "float", what);
        int rc = check_range(d, v, s, what);
        if (rc) return rc;
        memcpy(dst, &v, sizeof v);
        return MXP_OK;
    }
    case MXP_PARAM_BOOL: {
        int32_t v;
        if (!strcmp(s, "True") || !strcmp(s, "true") || !strcmp(s, "1")) v = 1;
        else if (!strcmp(s, "False") || !strcmp(s, "false") || !strcmp(s, "0")) v = 0;
        else return bad(d, val, "boolean", what);
        memcpy(dst, &v, sizeof v);
        return MXP_OK;
    }
    case MXP_PARAM_ENUM: {
        if (!d->choices) return mxp__error(MXP_EINVAL, "%s: parameter '%s': enum without choices", what, d->name);
        /* MXNet's Python front end quotes strings sometimes: accept 'relu'. */
        size_t n = strlen(s);
        if (n >= 2 && (s[0] == '\'' || s[0] == '"') && s[n - 1] == s[0]) {
            memmove(s, s + 1, n - 2);
            s[n - 2] = '\0';
        }
        for (int32_t i = 0; d->choices[i]; i++) {
            if (!strcmp(d->choices[i], s)) {
                memcpy(dst, &i, sizeof i);
                return MXP_OK;
            }
        }
        char list[256] = "";
        size_t off = 0;
        for (int i = 0; d->choices[i] && off < sizeof list; i++)
            off += (size_t)snprintf(list + off, sizeof list - off, "%s'%s'", i ? ", " : "", d->choices[i]);
        return mxp__error(MXP_EINVAL, "%s: parameter '%s': '%s' is not one of {%s}", what, d->name, val, list);
    }
    case MXP_PARAM_STRING: {
        char *copy = strdup(val);
        if (!copy) return mxp__error_oom("params");
        char *old;
        memcpy(&old, dst, sizeof old);
        free(old);
        memcpy(dst, &copy, sizeof copy);
        return MXP_OK;
    }
    case MXP_PARAM_DTYPE: {
        int32_t v = MXP_DTYPE_UNKNOWN;
        if (!is_none(s)) {
            int dt;
            if (mxp_dtype_from_name(s, &dt)) return bad(d, val, "dtype", what);
            v = dt;
        }
        memcpy(dst, &v, sizeof v);
        return MXP_OK;
    }
    case MXP_PARAM_SHAPE: {
        mxp_param_shape v;
        int rc = parse_shape(d, s, &v, what);
        if (rc) return rc;
        memcpy(dst, &v, sizeof v);
        return MXP_OK;
    }
    case MXP_PARAM_OPT_INT: {
        mxp_param_opt_int v = {0, 0, 0};
        if (!is_none(s)) {
            if (parse_i64(s, &v.value)) return bad(d, val, "int or None", what);
            int rc = check_range(d, (double)v.value, s, what);
            if (rc) return rc;
            v.has_value = 1;
        }
        memcpy(dst, &v, sizeof v);
        return MXP_OK;
    }
    case MXP_PARAM_OPT_FLOAT: {
        mxp_param_opt_float v = {0, 0, 0};
        if (!is_none(s)) {
            if (parse_f64(s, &v.value)) return bad(d, val, "float or None", what);
            int rc = check_range(d, v.value, s, what);
            if (rc) return rc;
            v.has_value = 1;
        }
        memcpy(dst, &v, sizeof v);
        return MXP_OK;
    }
    default:
        return mxp__error(MXP_EINVAL, "%s: parameter '%s': unknown parameter type %d", what, d->name, d->type);
    }
}

static size_t type_size(int32_t type) {
    switch (type) {
    case MXP_PARAM_INT: return 8;
    case MXP_PARAM_FLOAT: return 8;
    case MXP_PARAM_BOOL: case MXP_PARAM_ENUM: case MXP_PARAM_DTYPE: return 4;
    case MXP_PARAM_STRING: return sizeof(char *);
    case MXP_PARAM_SHAPE: return sizeof(mxp_param_shape);
    case MXP_PARAM_OPT_INT: return sizeof(mxp_param_opt_int);
    case MXP_PARAM_OPT_FLOAT: return sizeof(mxp_param_opt_float);
    default: return 0;
    }
}

int mxp__params_parse(const mxp_param_def *defs, uint32_t n_defs, const char *const *keys,
                      const char *const *vals, uint32_t n_kwargs, void *out_struct, const char *what) {
    char *base = out_struct;
    uint8_t seen[256];
    if (!what) what = "op";
    if (n_defs > sizeof seen) return mxp__error(MXP_EINVAL, "%s: more than %zu parameters", what, sizeof seen);
    if (n_kwargs && (!keys || !vals)) return mxp__error(MXP_EMISUSE, "%s: kwargs keys/vals NULL", what);
    if (n_defs && !base) return mxp__error(MXP_EMISUSE, "%s: no parameter struct", what);
    memset(seen, 0, sizeof seen);
    for (uint32_t k = 0; k < n_kwargs; k++) {
        if (!keys[k]) return mxp__error(MXP_EINVAL, "%s: NULL parameter name", what);
        uint32_t i;
        for (i = 0; i < n_defs; i++)
            if (!strcmp(mxp__param_def_at(defs, i)->name, keys[k])) break;
        if (i == n_defs) {
            mxp__params_free(defs, n_defs, base);
            return mxp__error(MXP_EINVAL, "%s: unknown parameter '%s'", what, keys[k]);
        }
        if (seen[i]) {
            mxp__params_free(defs, n_defs, base);
            return mxp__error(MXP_EINVAL, "%s: parameter '%s' given twice", what, keys[k]);
        }
        seen[i] = 1;
        const mxp_param_def *d = mxp__param_def_at(defs, i);
        int rc = mxp__params_parse_value(d, vals[k], base + d->offset, what);
        if (rc) {
            mxp__params_free(defs, n_defs, base);
            return rc;
        }
    }
    for (uint32_t i = 0; i < n_defs; i++) {
        if (seen[i]) continue;
        const mxp_param_def *d = mxp__param_def_at(defs, i);
        int rc = MXP_OK;
        if (d->flags & MXP_PARAM_REQUIRED) {
            rc = mxp__error(MXP_EINVAL, "%s: required parameter '%s' (%s) is missing", what, d->name,
                            mxp__params_type_name(d->type));
        } else if (d->default_value) {
            rc = mxp__params_parse_value(d, d->default_value, base + d->offset, what);
            if (rc) rc = mxp__error_prefix(rc, "%s: bad default of parameter '%s'", what, d->name);
        } else {
            memset(base + d->offset, 0, type_size(d->type));
            if (d->type == MXP_PARAM_DTYPE) {
                int32_t u = MXP_DTYPE_UNKNOWN;
                memcpy(base + d->offset, &u, sizeof u);
            }
        }
        if (rc) {
            mxp__params_free(defs, n_defs, base);
            return rc;
        }
    }
    return MXP_OK;
}

void mxp__params_free(const mxp_param_def *defs, uint32_t n_defs, void *params) {
    if (!defs || !params) return;
    for (uint32_t i = 0; i < n_defs; i++) {
        const mxp_param_def *d = mxp__param_def_at(defs, i);
        if (d->type != MXP_PARAM_STRING) continue;
        char *s;
        memcpy(&s, (char *)params + d->offset, sizeof s);
        free(s);
        s = NULL;
        memcpy((char *)params + d->offset, &s, sizeof s);
    }
}

static int fmt_double(double v, char *buf, size_t cap) {
    if (isinf(v)) return snprintf(buf, cap, v > 0 ? "inf" : "-inf");
    if (isnan(v)) return snprintf(buf, cap, "nan");
    /* Shortest %g that reads back exactly. */
    for (int prec = 6; prec <= 17; prec++) {
        char tmp[64];
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v) return snprintf(buf, cap, "%s", tmp);
    }
    return snprintf(buf, cap, "%.17g", v);
}

int mxp__params_format(const mxp_param_def *d, const void *params, char *buf, size_t cap) {
    const char *src = (const char *)params + d->offset;
    int n = 0;
    if (!cap) return mxp__error(MXP_EINVAL, "params_format: empty buffer");
    switch (d->type) {
    case MXP_PARAM_INT: { int64_t v; memcpy(&v, src, 8); n = snprintf(buf, cap, "%lld", (long long)v); break; }
    case MXP_PARAM_FLOAT: { double v; memcpy(&v, src, 8); n = fmt_double(v, buf, cap); break; }
    case MXP_PARAM_BOOL: { int32_t v; memcpy(&v, src, 4); n = snprintf(buf, cap, "%s", v ? "True" : "False"); break; }
    case MXP_PARAM_ENUM: {
        int32_t v; memcpy(&v, src, 4);
        int32_t nc = 0;
        while (d->choices && d->choices[nc]) nc++;
        n = snprintf(buf, cap, "%s", (v >= 0 && v < nc) ? d->choices[v] : "?");
        break;
    }
    case MXP_PARAM_STRING: { const char *s; memcpy(&s, src, sizeof s); n = snprintf(buf, cap, "%s", s ? s : ""); break; }
    case MXP_PARAM_DTYPE: {
        int32_t v; memcpy(&v, src, 4);
        const char *nm = mxp_dtype_name(v);
        n = snprintf(buf, cap, "%s", nm ? nm : "None");
        break;
    }
    case MXP_PARAM_SHAPE: {
        mxp_param_shape v; memcpy(&v, src, sizeof v);
        if (!v.has_value) { n = snprintf(buf, cap, "None"); break; }
        size_t off = 0;
        off += (size_t)snprintf(buf, cap, "(");
        for (int i = 0; i < v.ndim && off < cap; i++)
            off += (size_t)snprintf(buf + off, cap - off, "%s%lld", i ? ", " : "", (long long)v.dims[i]);
        if (off < cap) off += (size_t)snprintf(buf + off, cap - off, v.ndim == 1 ? ",)" : ")");
        n = (int)off;
        break;
    }
    case MXP_PARAM_OPT_INT: {
        mxp_param_opt_int v; memcpy(&v, src, sizeof v);
        n = v.has_value ? snprintf(buf, cap, "%lld", (long long)v.value) : snprintf(buf, cap, "None");
        break;
    }
    case MXP_PARAM_OPT_FLOAT: {
        mxp_param_opt_float v; memcpy(&v, src, sizeof v);
        n = v.has_value ? fmt_double(v.value, buf, cap) : snprintf(buf, cap, "None");
        break;
    }
    default: return mxp__error(MXP_EINVAL, "params_format: parameter '%s': unknown type", d->name);
    }
    if (n < 0 || (size_t)n >= cap)
        return mxp__error(MXP_EINVAL, "params_format: parameter '%s': buffer too small", d->name);
    return MXP_OK;
}
