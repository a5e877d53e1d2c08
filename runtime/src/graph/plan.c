/* plan.c — static memory planning for a program's internal values (op
 * outputs that are not heads, gradients and partial gradients), in the
 * manner of MXNet's PlanMemory pass.
 *
 * Walk the steps in order.  For each value a step writes first: share the
 * storage of an input the op allows inplace (forward_inplace /
 * backward_inplace, ElementWiseSum's first partial) when that input dies at
 * this step, nothing else lives in its block, and size and dtype match;
 * otherwise take a free block of the same dtype — the smallest big enough,
 * else the largest one, grown — or a new block.  After the step, values
 * whose last reader it was release their block (a block is free when no
 * live value uses it).  A value never read dies right after its step.
 * Freed storage is only reused by later steps, so no step ever reads and
 * writes the same bytes except through an inplace pair the op declared.
 * Externally bound values (arguments, aux states, gradients of arguments,
 * head gradients, zeros) and heads are not planned.
 * The planned total is the sum of block sizes; the naive total is the sum
 * of every planned value's size (what allocating each separately costs). */
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

int mxp__value_plannable(const mxp__value *v) {
    return (v->kind == MXP_VAL_OUT && !v->persistent) || v->kind == MXP_VAL_GRAD;
}

uint64_t mxp__value_bytes(const mxp__value *v) {
    uint64_t n = 1;
    for (int i = 0; i < v->shape.ndim; i++) n *= (uint64_t)(v->shape.dims[i] > 0 ? v->shape.dims[i] : 0);
    return n * mxp_dtype_size(v->dtype);
}

void mxp__plan_free(mxp__plan *pl) {
    if (!pl) return;
    free(pl->block_bytes);
    free(pl->block_dtype);
    free(pl->value_block);
    free(pl->inplace);
    free(pl);
}

typedef struct pstate {
    mxp__plan *pl;
    int cap_blocks;
    int *live;      /* [block] live values using it */
    int *free_list; /* free block ids */
    int n_free;
} pstate;

static int new_block(pstate *ps, uint64_t bytes, int32_t dt) {
    mxp__plan *pl = ps->pl;
    if (pl->n_blocks == ps->cap_blocks) {
        int cap = ps->cap_blocks ? 2 * ps->cap_blocks : 32;
        uint64_t *b = realloc(pl->block_bytes, (size_t)cap * sizeof *b);
        if (b) pl->block_bytes = b;
        int32_t *d = b ? realloc(pl->block_dtype, (size_t)cap * sizeof *d) : NULL;
        if (d) pl->block_dtype = d;
        int *l = d ? realloc(ps->live, (size_t)cap * sizeof *l) : NULL;
        if (l) ps->live = l;
        int *f = l ? realloc(ps->free_list, (size_t)cap * sizeof *f) : NULL;
        if (!f) return mxp__error_oom("memory plan");
        ps->free_list = f;
        ps->cap_blocks = cap;
    }
    pl->block_bytes[pl->n_blocks] = bytes;
    pl->block_dtype[pl->n_blocks] = dt;
    ps->live[pl->n_blocks] = 0;
    return pl->n_blocks++;
}

static int take_free(pstate *ps, uint64_t bytes, int32_t dt) {
    int best = -1, largest = -1;
    for (int i = 0; i < ps->n_free; i++) {
        int b = ps->free_list[i];
        if (ps->pl->block_dtype[b] != dt) continue;
        uint64_t sz = ps->pl->block_bytes[b];
        if (sz >= bytes && (best < 0 || sz < ps->pl->block_bytes[ps->free_list[best]])) best = i;
        if (largest < 0 || sz > ps->pl->block_bytes[ps->free_list[largest]]) largest = i;
    }
    int pick = best >= 0 ? best : largest;
    if (pick < 0) return -1;
    int b = ps->free_list[pick];
    ps->free_list[pick] = ps->free_list[--ps->n_free];
    if (ps->pl->block_bytes[b] < bytes) ps->pl->block_bytes[b] = bytes;
    return b;
}

static void release(pstate *ps, int b) {
    if (--ps->live[b] == 0) ps->free_list[ps->n_free++] = b;
}

static int add_pair(mxp__plan *pl, int from, int to) {
    int(*ip)[2] = realloc(pl->inplace, (size_t)(pl->n_inplace + 1) * sizeof *ip);
    if (!ip) return mxp__error_oom("memory plan");
    pl->inplace = ip;
    pl->inplace[pl->n_inplace][0] = from;
    pl->inplace[pl->n_inplace][1] = to;
    pl->n_inplace++;
    return MXP_OK;
}

/* Distinct ids of a list, in place; returns the new count. */
static int distinct(int *v, int n) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        int dup = 0;
        for (int j = 0; j < m && !dup; j++) dup = v[j] == v[i];
        if (!dup) v[m++] = v[i];
    }
    return m;
}

int mxp__plan_build(const mxp__program *p, int enabled, mxp__plan **out) {
    *out = NULL;
    mxp__plan *pl = calloc(1, sizeof *pl);
    pstate ps = {pl, 0, NULL, NULL, 0};
    int nv = p->n_values, rc = MXP_OK;
    int *uses = calloc((size_t)nv + 1, sizeof *uses);
    if (pl) pl->value_block = malloc(((size_t)nv + 1) * sizeof(int));
    int cap = 64;
    for (int s = 0; s < p->n_steps; s++) {
        const mxp__step *st = &p->steps[s];
        int k = 2 * (st->n_in + st->n_out) + st->n_aux + 4;
        if (k > cap) cap = k;
    }
    int *rd = malloc((size_t)cap * sizeof *rd), *wr = malloc((size_t)cap * sizeof *wr);
    uint8_t *src_taken = calloc((size_t)nv + 1, 1), *released = calloc((size_t)nv + 1, 1);
    if (!pl || !uses || !pl->value_block || !rd || !wr || !src_taken || !released) rc = mxp__error_oom("memory plan");
    for (int v = 0; v < nv && !rc; v++) {
        pl->value_block[v] = -1;
        if (mxp__value_plannable(&p->values[v])) pl->naive_bytes += mxp__value_bytes(&p->values[v]);
    }
    for (int s = 0; s < p->n_steps && !rc; s++) {
        int n = distinct(rd, mxp__step_reads(&p->steps[s], rd, cap));
        for (int i = 0; i < n; i++) uses[rd[i]]++;
    }
    for (int s = 0; s < p->n_steps && !rc; s++) {
        const mxp__step *st = &p->steps[s];
        int nr = distinct(rd, mxp__step_reads(st, rd, cap));
        int nw = distinct(wr, mxp__step_writes(st, wr, cap));
        for (int i = 0; i < nw && !rc; i++) {
            int v = wr[i];
            const mxp__value *val = &p->values[v];
            if (!mxp__value_plannable(val) || pl->value_block[v] >= 0) continue;
            uint64_t bytes = mxp__value_bytes(val);
            int b = -1;
            for (int k = 0; enabled && k < st->n_inplace && b < 0; k++) {
                int a = st->inplace[k][0];
                if (st->inplace[k][1] != v || a < 0 || src_taken[a]) continue;
                const mxp__value *av = &p->values[a];
                int ab = pl->value_block[a];
                if (!mxp__value_plannable(av) || ab < 0 || uses[a] != 1 || ps.live[ab] != 1) continue;
                if (mxp__value_bytes(av) != bytes || av->dtype != val->dtype) continue;
                b = ab;
                src_taken[a] = 1;
                rc = add_pair(pl, a, v);
            }
            if (b < 0 && enabled) b = take_free(&ps, bytes, val->dtype);
            if (b < 0) b = new_block(&ps, bytes, val->dtype);
            if (b < 0) {
                rc = b;
                break;
            }
            ps.live[b]++;
            pl->value_block[v] = b;
        }
        /* Deaths after the step: last readers, and values never read. */
        for (int i = 0; i < nr && !rc; i++) {
            int v = rd[i];
            if (pl->value_block[v] < 0 || released[v] || !mxp__value_plannable(&p->values[v])) continue;
            if (--uses[v] == 0) {
                released[v] = 1;
                release(&ps, pl->value_block[v]);
            }
        }
        for (int i = 0; i < nw && !rc; i++) {
            int v = wr[i];
            if (pl->value_block[v] >= 0 && mxp__value_plannable(&p->values[v]) && uses[v] == 0 && !released[v]) {
                released[v] = 1;
                release(&ps, pl->value_block[v]);
            }
        }
    }
    for (int b = 0; pl && b < pl->n_blocks; b++) pl->planned_bytes += pl->block_bytes[b];
    free(uses);
    free(rd);
    free(wr);
    free(src_taken);
    free(released);
    free(ps.live);
    free(ps.free_list);
    if (rc) {
        mxp__plan_free(pl);
        return rc;
    }
    *out = pl;
    return MXP_OK;
}
