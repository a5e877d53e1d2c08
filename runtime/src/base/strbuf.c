/* strbuf.c — a growable NUL-terminated string for reports, manifests and
 * signatures built piece by piece.  A failed allocation sets `oom` and
 * makes later appends no-ops, so callers check once at the end. */
#include "base.h"

#include <stdio.h>
#include <stdlib.h>

void mxp__strbuf_vaddf(mxp__strbuf *s, const char *fmt, va_list ap) {
    if (s->oom) return;
    for (;;) {
        va_list cp;
        va_copy(cp, ap);
        int n = s->buf ? vsnprintf(s->buf + s->len, s->cap - s->len, fmt, cp) : -1;
        va_end(cp);
        if (n >= 0 && s->len + (size_t)n < s->cap) {
            s->len += (size_t)n;
            return;
        }
        size_t ncap = s->cap ? s->cap * 2 : 512;
        if (n >= 0 && ncap < s->len + (size_t)n + 1) ncap = s->len + (size_t)n + 1;
        char *nb = realloc(s->buf, ncap);
        if (!nb) {
            s->oom = 1;
            return;
        }
        s->buf = nb;
        s->cap = ncap;
        s->buf[s->len] = '\0';
    }
}

void mxp__strbuf_addf(mxp__strbuf *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mxp__strbuf_vaddf(s, fmt, ap);
    va_end(ap);
}
