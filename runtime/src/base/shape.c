/* shape.c — small helpers on mxp_shape shared by the op runtime, the graph
 * passes and SimpleOp expansion: completeness, equality, the printed form
 * MXNet uses in messages ("(2, 3)", "(5,)", "?" for an unknown rank), and
 * the one tuple parser behind both op parameters and variables' __shape__
 * (so "(8L, 3L)" written by Python 2 reads the same in both places). */
#include "base.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int mxp__shape_known(const mxp_shape *s) {
    if (s->ndim < 0) return 0;
    for (int i = 0; i < s->ndim; i++)
        if (s->dims[i] <= 0) return 0;
    return 1;
}

int mxp__shape_eq(const mxp_shape *a, const mxp_shape *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i]) return 0;
    return 1;
}

void mxp__shape_str(const mxp_shape *s, char *buf, size_t cap) {
    if (s->ndim < 0) {
        snprintf(buf, cap, "?");
        return;
    }
    size_t off = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < s->ndim && off < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, "%s%lld", i ? ", " : "", (long long)s->dims[i]);
    if (off < cap) snprintf(buf + off, cap - off, s->ndim == 1 ? ",)" : ")");
}

int mxp__tuple_parse(const char *txt, int64_t *dims, int cap, int *out_n) {
    *out_n = 0;
    if (!txt) return MXP_EINVAL;
    const char *p = txt;
    while (*p == ' ' || *p == '\t') p++;
    char close = *p == '(' ? ')' : *p == '[' ? ']' : 0;
    if (close) p++;
    int n = 0, trailing_comma = 0;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (close ? *p == close : *p == '\0') break;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno) return MXP_EINVAL;
        if (*end == 'L' || *end == 'l') end++; /* Python 2 long: "3L" */
        if (n == cap) return MXP_EFORMAT;
        dims[n++] = v;
        p = end;
        while (*p == ' ' || *p == '\t') p++;
        trailing_comma = *p == ',';
        if (trailing_comma) { p++; continue; }
        if (close ? *p == close : *p == '\0') break;
        return MXP_EINVAL;
    }
    if (close) p++;
    while (*p == ' ' || *p == '\t') p++;
    if (*p != '\0') return MXP_EINVAL;
    /* A bare list needs a value and no dangling comma: "5", not "" or "5,". */
    if (!close && (n == 0 || trailing_comma)) return MXP_EINVAL;
    *out_n = n;
    return MXP_OK;
}
