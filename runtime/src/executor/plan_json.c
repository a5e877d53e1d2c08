/* plan_json.c — mxp_executor_memory_plan_json: the bound executor's memory
 * plan as JSON for tools that draw it (`mxplug viz --plan`).
 *
 * Reports what graph/plan.c decided, never re-plans: the program's steps in
 * run order (forward, backward, gradient sums), the storage blocks with
 * their bytes, and every planned value with its block and its lifetime —
 * the step that writes it first and the last step that reads it (a value
 * never read lives for its own step only, as plan.c frees it).
 * Not here: planning (graph/plan.c), drawing (tools/mxplug/viz_plan.c). */
#include "executor/executor.h"

#include <stdlib.h>
#include <string.h>

static void put_json_str(mxp__strbuf *s, const char *t) {
    mxp__strbuf_addf(s, "\"");
    for (const unsigned char *p = (const unsigned char *)t; *p; p++) {
        if (*p == '"' || *p == '\\') mxp__strbuf_addf(s, "\\%c", *p);
        else if (*p < 0x20) mxp__strbuf_addf(s, "\\u%04x", *p);
        else mxp__strbuf_addf(s, "%c", *p);
    }
    mxp__strbuf_addf(s, "\"");
}

/* The name of a step: "conv1 (Convolution)", "conv1 (_backward_Convolution)",
 * "sum: grad of fc1_output". */
static void step_name(const mxp_executor *ex, const mxp__step *st, char *buf, size_t cap) {
    if (st->kind == MXP_STEP_SUM) {
        char e[MXP_NAME_MAX * 2];
        mxp__igraph_entry_name(ex->g, st->entry, e, sizeof e);
        snprintf(buf, cap, "sum: grad of %s", e);
        return;
    }
    const gnode *n = ex->g->nodes[st->node].g;
    snprintf(buf, cap, "%s (%s%s)", n->name, st->kind == MXP_STEP_BWD ? "_backward_" : "", n->op ? n->op : "?");
}

int mxp_executor_memory_plan_json(const mxp_executor *ex, char **out) {
    if (out) *out = NULL;
    if (!ex || !out) return mxp__error(MXP_EMISUSE, "mxp_executor_memory_plan_json: NULL argument");
    const mxp__program *p = ex->prog;
    const mxp__plan *pl = ex->plan;
    if (!p || !pl) return mxp__error(MXP_EINVAL, "mxp_executor_memory_plan_json: the executor has no plan");
    int nv = p->n_values;
    int *first = malloc(((size_t)nv + 1) * sizeof *first), *last = malloc(((size_t)nv + 1) * sizeof *last);
    int cap = 64;
    for (int s = 0; s < p->n_steps; s++) {
        const mxp__step *st = &p->steps[s];
        int k = 2 * (st->n_in + st->n_out) + st->n_aux + 4;
        if (k > cap) cap = k;
    }
    int *buf = malloc((size_t)cap * sizeof *buf);
    if (!first || !last || !buf) {
        free(first);
        free(last);
        free(buf);
        return mxp__error_oom("memory plan json");
    }
    for (int v = 0; v < nv; v++) first[v] = last[v] = -1;
    for (int s = 0; s < p->n_steps; s++) {
        int n = mxp__step_writes(&p->steps[s], buf, cap);
        for (int i = 0; i < n; i++)
            if (first[buf[i]] < 0) first[buf[i]] = s;
        n = mxp__step_reads(&p->steps[s], buf, cap);
        for (int i = 0; i < n; i++) last[buf[i]] = s;
    }
    mxp__strbuf s = {0};
    mxp__strbuf_addf(&s, "{\"planned_bytes\": %llu, \"naive_bytes\": %llu, \"n_forward_steps\": %d,\n\"steps\": [",
                     (unsigned long long)pl->planned_bytes, (unsigned long long)pl->naive_bytes, p->n_fwd_steps);
    char name[MXP_NAME_MAX * 3];
    for (int k = 0; k < p->n_steps; k++) {
        step_name(ex, &p->steps[k], name, sizeof name);
        mxp__strbuf_addf(&s, "%s\n  ", k ? "," : "");
        put_json_str(&s, name);
    }
    mxp__strbuf_addf(&s, "],\n\"blocks\": [");
    for (int b = 0; b < pl->n_blocks; b++)
        mxp__strbuf_addf(&s, "%s{\"bytes\": %llu, \"dtype\": \"%s\"}", b ? ", " : "",
                         (unsigned long long)pl->block_bytes[b], mxp_dtype_name(pl->block_dtype[b]));
    mxp__strbuf_addf(&s, "],\n\"values\": [");
    int n_out = 0;
    for (int v = 0; v < nv; v++) {
        const mxp__value *val = &p->values[v];
        if (pl->value_block[v] < 0) continue;
        char e[MXP_NAME_MAX * 2];
        mxp__igraph_entry_name(ex->g, val->entry, e, sizeof e);
        if (val->kind == MXP_VAL_GRAD) snprintf(name, sizeof name, "grad of %s", e);
        else snprintf(name, sizeof name, "%s", e);
        int lo = first[v], hi = last[v] >= lo ? last[v] : lo;
        mxp__strbuf_addf(&s, "%s\n  {\"name\": ", n_out++ ? "," : "");
        put_json_str(&s, name);
        mxp__strbuf_addf(&s, ", \"kind\": \"%s\", \"block\": %d, \"bytes\": %llu, \"first\": %d, \"last\": %d}",
                         val->kind == MXP_VAL_GRAD ? "grad" : "out", pl->value_block[v],
                         (unsigned long long)mxp__value_bytes(val), lo, hi);
    }
    mxp__strbuf_addf(&s, "]}\n");
    free(first);
    free(last);
    free(buf);
    if (s.oom || !s.buf) {
        free(s.buf);
        return mxp__error_oom("memory plan json");
    }
    *out = s.buf;
    return MXP_OK;
}
