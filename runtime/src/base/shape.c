/* shape.c — small helpers on mxp_shape shared by the op runtime, the graph
 * passes and SimpleOp expansion: completeness, equality, and the printed
 * form MXNet uses in messages ("(2, 3)", "(5,)", "?" for an unknown rank). */
#include "base.h"

#include <stdio.h>

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
