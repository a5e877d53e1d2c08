/* op_cases.h — runs the table of reference cases in a text file written by
 * a generator script (tests/data/ops/gen_ops_ext_cases.py: numpy/PyTorch
 * values) against a pack loaded with pack_harness: one row per op and
 * case, so many ops cost little test code.  Per case: forward in float64
 * (tight tolerance) and float32 (loose), every output's shape and values;
 * then finite-difference gradients of the inputs named by the case's mask,
 * and, where the case gives "igrad" lines, the input gradients themselves
 * for its "og" out_grads (ones by default).
 * Header-only (static): each test binary includes it once.
 * Format: see the generator's docstring. */
#ifndef MXP_TESTS_OP_CASES_H
#define MXP_TESTS_OP_CASES_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pack_harness.h"

#define OC_MAX_KW 16

typedef struct oc_case {
    char op[64], pack[32];
    unsigned mask;
    int n_kw;
    char kwbuf[OC_MAX_KW][2][64];
    const char *kw[2 * OC_MAX_KW + 1];
    int n_in, n_out, n_og, n_igrad;
    ph_arr in[PH_MAX_IO], out[PH_MAX_IO], og[PH_MAX_IO], igrad[PH_MAX_IO];
} oc_case;

/* "<ndim> d0 .. | v0 v1 ..." into a float64 array. */
static ph_arr oc_parse_arr(char *s) {
    char *p = s, *end;
    int nd = (int)strtol(p, &end, 10);
    int64_t shape[MXP_MAX_NDIM];
    p = end;
    for (int i = 0; i < nd; i++) {
        shape[i] = strtoll(p, &end, 10);
        p = end;
    }
    ph_arr a = ph_arr_new(MXP_DTYPE_F64, nd, shape);
    p = strchr(p, '|');
    cr_assert(p, "op case: '|' missing in '%s'", s);
    p++;
    for (int64_t i = 0; i < ph_numel(&a); i++) {
        double v = strtod(p, &end);
        cr_assert(end != p, "op case: value %lld missing", (long long)i);
        ph_set(&a, i, v);
        p = end;
    }
    return a;
}

static void oc_free(oc_case *c) {
    for (int i = 0; i < c->n_in; i++) ph_arr_free(&c->in[i]);
    for (int i = 0; i < c->n_out; i++) ph_arr_free(&c->out[i]);
    for (int i = 0; i < c->n_og; i++) ph_arr_free(&c->og[i]);
    for (int i = 0; i < c->n_igrad; i++) ph_arr_free(&c->igrad[i]);
}

/* Backward with the case's out_grads (ones where none is given); the input
 * gradients must equal the igrad lines (loss heads, whose gradient is not
 * the derivative of their output, are checked this way). */
static void oc_check_backward(ph_pack *P, oc_case *c) {
    ph_arr out[PH_MAX_IO], og[PH_MAX_IO], ig[PH_MAX_IO];
    memset(out, 0, sizeof out);
    memset(ig, 0, sizeof ig);
    int n_out = 0;
    cr_assert_eq(ph_forward(P, c->op, c->kw, c->n_in, c->in, &n_out, out, MXP_REQ_WRITE), 0, "%s: %s", c->op,
                 ph_last_error());
    for (int k = 0; k < n_out; k++) {
        og[k] = ph_arr_new(MXP_DTYPE_F64, out[k].ndim, out[k].shape);
        for (int64_t i = 0; i < ph_numel(&og[k]); i++) ph_set(&og[k], i, k < c->n_og ? ph_get(&c->og[k], i) : 1.0);
    }
    cr_assert_eq(ph_backward(P, c->op, c->kw, c->n_in, c->in, n_out, out, og, ig, NULL), 0, "%s backward: %s", c->op,
                 ph_last_error());
    for (int k = 0; k < c->n_igrad; k++)
        for (int64_t i = 0; i < ph_numel(&c->igrad[k]); i++) {
            double a = ph_get(&ig[k], i), b = ph_get(&c->igrad[k], i);
            cr_assert(fabs(a - b) <= 1e-10 + 1e-9 * fabs(b), "%s in_grad %d [%lld] = %.12g, want %.12g", c->op, k,
                      (long long)i, a, b);
        }
    for (int k = 0; k < n_out; k++) ph_arr_free(&out[k]), ph_arr_free(&og[k]);
    for (int k = 0; k < c->n_in; k++) ph_arr_free(&ig[k]);
}

static ph_arr oc_to_f32(const ph_arr *a) {
    ph_arr b = ph_arr_new(MXP_DTYPE_F32, a->ndim, a->shape);
    for (int64_t i = 0; i < ph_numel(a); i++) ph_set(&b, i, ph_get(a, i));
    return b;
}

static void oc_check_forward(ph_pack *P, oc_case *c, int f32) {
    ph_arr in[PH_MAX_IO], got[PH_MAX_IO];
    memset(got, 0, sizeof got);
    for (int i = 0; i < c->n_in; i++) in[i] = f32 ? oc_to_f32(&c->in[i]) : c->in[i];
    int n_out = 0;
    int rc = ph_forward(P, c->op, c->kw, c->n_in, in, &n_out, got, MXP_REQ_WRITE);
    cr_assert_eq(rc, 0, "%s %s: forward failed: %s", c->op, f32 ? "f32" : "f64", ph_last_error());
    cr_assert_geq(n_out, c->n_out, "%s: %d outputs, want %d", c->op, n_out, c->n_out);
    double atol = f32 ? 2e-5 : 1e-10, rtol = f32 ? 2e-4 : 1e-9;
    for (int k = 0; k < c->n_out; k++) {
        const ph_arr *w = &c->out[k], *g = &got[k];
        cr_assert_eq(g->ndim, w->ndim, "%s output %d: rank %d, want %d", c->op, k, g->ndim, w->ndim);
        for (int d = 0; d < w->ndim; d++)
            cr_assert_eq(g->shape[d], w->shape[d], "%s output %d: dim %d is %lld, want %lld", c->op, k, d,
                         (long long)g->shape[d], (long long)w->shape[d]);
        for (int64_t i = 0; i < ph_numel(w); i++) {
            double a = ph_get(g, i), b = ph_get(w, i);
            cr_assert(fabs(a - b) <= atol + rtol * fabs(b), "%s (%s) output %d [%lld] = %.12g, want %.12g", c->op,
                      f32 ? "f32" : "f64", k, (long long)i, a, b);
        }
    }
    for (int k = 0; k < n_out; k++) ph_arr_free(&got[k]);
    if (f32)
        for (int i = 0; i < c->n_in; i++) ph_arr_free(&in[i]);
}

/* Runs every case of `path` whose pack is `pack`; returns the count. */
static int oc_run_file(ph_pack *P, const char *path, const char *pack) {
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    static char line[1 << 16];
    oc_case c;
    int in_case = 0, ran = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "case ", 5)) {
            memset(&c, 0, sizeof c);
            char *save = NULL, *tok = strtok_r(line + 5, " ", &save);
            snprintf(c.op, sizeof c.op, "%s", tok);
            snprintf(c.pack, sizeof c.pack, "%s", strtok_r(NULL, " ", &save));
            c.mask = (unsigned)strtoul(strtok_r(NULL, " ", &save), NULL, 10);
            while ((tok = strtok_r(NULL, " ", &save)) && c.n_kw < OC_MAX_KW) {
                char *eq = strchr(tok, '=');
                cr_assert(eq, "kwarg '%s' lacks '='", tok);
                *eq = 0;
                snprintf(c.kwbuf[c.n_kw][0], 64, "%s", tok);
                snprintf(c.kwbuf[c.n_kw][1], 64, "%s", eq + 1);
                c.n_kw++;
            }
            in_case = 1;
        } else if (in_case && !strncmp(line, "in ", 3)) {
            c.in[c.n_in++] = oc_parse_arr(line + 3);
        } else if (in_case && !strncmp(line, "out ", 4)) {
            c.out[c.n_out++] = oc_parse_arr(line + 4);
        } else if (in_case && !strncmp(line, "og ", 3)) {
            c.og[c.n_og++] = oc_parse_arr(line + 3);
        } else if (in_case && !strncmp(line, "igrad ", 6)) {
            c.igrad[c.n_igrad++] = oc_parse_arr(line + 6);
        } else if (in_case && !strcmp(line, "end")) {
            in_case = 0;
            if (strcmp(c.pack, pack)) {
                oc_free(&c);
                continue;
            }
            for (int i = 0; i < c.n_kw; i++) {
                c.kw[2 * i] = c.kwbuf[i][0];
                c.kw[2 * i + 1] = c.kwbuf[i][1];
            }
            c.kw[2 * c.n_kw] = NULL;
            oc_check_forward(P, &c, 0);
            oc_check_forward(P, &c, 1);
            if (c.n_igrad) oc_check_backward(P, &c);
            if (c.mask)
                cr_assert_eq(ph_grad_check(P, c.op, c.kw, c.n_in, c.in, c.mask, 1e-6, 1e-6, 1e-5), 0,
                             "%s gradient: %s", c.op, ph_last_error());
            oc_free(&c);
            ran++;
        }
    }
    fclose(f);
    return ran;
}

#endif /* MXP_TESTS_OP_CASES_H */
