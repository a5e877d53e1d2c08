/* param_text.c — the printable form of one parameter schema entry (type,
 * default, range, choices, doc), as `mxplug info` and the Python docstrings
 * show it.  Shared by ops (registry.c caches it per op) and by iterators
 * (feature_query.c).  Every string is a heap copy, so the text outlives a
 * reload of the pack whose schema it came from. */
#include "plugin/plugin_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dupf(const char *fmt, ...) MXP_PRINTF(1, 2);
static char *dupf(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return strdup(buf);
}

int mxp__param_text_fill(mxp_param_text *t, const mxp_param_def *d) {
    memset(t, 0, sizeof *t);
    t->name = strdup(d->name ? d->name : "");
    t->type = strdup(mxp__params_type_name(d->type));
    t->dflt = strdup((d->flags & MXP_PARAM_REQUIRED) ? "required" : d->default_value ? d->default_value : "None");
    char lo[40] = "-inf", hi[40] = "inf";
    if (d->flags & MXP_PARAM_HAS_MIN) snprintf(lo, sizeof lo, "%.10g", d->min);
    if (d->flags & MXP_PARAM_HAS_MAX) snprintf(hi, sizeof hi, "%.10g", d->max);
    t->range = (d->flags & (MXP_PARAM_HAS_MIN | MXP_PARAM_HAS_MAX))
                   ? dupf("%s%s, %s%s", (d->flags & MXP_PARAM_HAS_MIN) ? "[" : "(", lo, hi,
                          (d->flags & MXP_PARAM_HAS_MAX) ? "]" : ")")
                   : strdup("");
    char ch[1024] = "";
    if (d->type == MXP_PARAM_ENUM && d->choices) {
        size_t off = (size_t)snprintf(ch, sizeof ch, "{");
        for (int c = 0; d->choices[c] && off < sizeof ch; c++)
            off += (size_t)snprintf(ch + off, sizeof ch - off, "%s'%s'", c ? ", " : "", d->choices[c]);
        if (off < sizeof ch) snprintf(ch + off, sizeof ch - off, "}");
    }
    t->choices = strdup(ch);
    t->doc = strdup(d->doc ? d->doc : "");
    if (!t->name || !t->type || !t->dflt || !t->range || !t->choices || !t->doc) {
        mxp__param_text_clear(t);
        return mxp__error(MXP_ENOMEM, "parameter '%s': out of memory for its text", d->name ? d->name : "?");
    }
    return MXP_OK;
}

void mxp__param_text_clear(mxp_param_text *t) {
    if (!t) return;
    free(t->name); free(t->type); free(t->dflt); free(t->range); free(t->choices); free(t->doc);
    memset(t, 0, sizeof *t);
}

void mxp__param_text_out(const mxp_param_text *t, const char **out_name, const char **out_type,
                         const char **out_default, const char **out_range, const char **out_choices,
                         const char **out_doc) {
    if (out_name) *out_name = t ? t->name : NULL;
    if (out_type) *out_type = t ? t->type : NULL;
    if (out_default) *out_default = t ? t->dflt : NULL;
    if (out_range) *out_range = t ? t->range : NULL;
    if (out_choices) *out_choices = t ? t->choices : NULL;
    if (out_doc) *out_doc = t ? t->doc : NULL;
}
