/* op_table.c — the table runner of op_table.h: for each row, each device of
 * the fake host and each impl of the op on it (a SimpleOp is its own one
 * impl), forward in each dtype against the row's float64 reference, then
 * finite-difference gradients in float64; and the generated case files
 * through the same loop.  Failures are Criterion assertions naming the
 * op, impl, dtype and element. */
#include "op_table.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OT_MAX_IMPLS 32

typedef struct ot_cands {
    int n;
    char spec[OT_MAX_IMPLS][2 * MXP_NAME_MAX];
} ot_cands;

static const char *device_name(mxp_device d) { return d.type == MXP_DEV_CPU ? "cpu" : "gpu"; }

/* The op specs ("Name" or "Name@impl") to run on device d. */
static void candidates(const fh_pack *p, const char *op, mxp_device d, ot_cands *c) {
    c->n = 0;
    if (fh_simple(p, op)) {
        if (d.type == MXP_DEV_CPU) snprintf(c->spec[c->n++], sizeof c->spec[0], "%s", op);
        return;
    }
    const mxp_op_def *def = fh_op_def(p, op);
    cr_assert(def, "op table: op '%s' is not registered by the pack", op);
    for (int i = 0; i < fh_n_impls(p) && c->n < OT_MAX_IMPLS; i++) {
        const mxp_op_impl *im = fh_impl_at(p, i);
        const char *dev = im->device ? im->device : "cpu";
        if (strcmp(im->op_name, def->name) || strcmp(dev, device_name(d))) continue;
        snprintf(c->spec[c->n++], sizeof c->spec[0], "%s@%s", def->name, im->impl_name);
    }
}

static int close_enough(double got, double want, double atol, double rtol) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

/* Offset into input `a` of output element `i` (numpy broadcasting). */
static int64_t bcast_offset(const fh_arr *a, const fh_arr *out, int64_t i) {
    int64_t off = 0, stride = 1;
    for (int d = out->ndim - 1, k = a->ndim - 1; d >= 0; d--, k--) {
        int64_t idx = i % out->shape[d];
        i /= out->shape[d];
        if (k < 0) continue;
        if (a->shape[k] != 1) off += idx * stride;
        stride *= a->shape[k];
    }
    return off;
}

static void reference(const ot_row *r, int n_in, const fh_arr *in, int n_out, fh_arr *out) {
    if (r->ref) {
        ot_ref_args a = {r->kw, n_in, in, n_out, out, r->ref_data};
        r->ref(&a);
        return;
    }
    for (int64_t i = 0; i < fh_numel(&out[0]); i++) {
        double x = fh_get(&in[0], bcast_offset(&in[0], &out[0], i));
        double v = r->unary ? r->unary(x) : r->binary(x, fh_get(&in[1], bcast_offset(&in[1], &out[0], i)));
        fh_set(&out[0], i, v);
    }
}

static void check_forward(fh_pack *p, const ot_row *r, const char *spec, int32_t dtype, const fh_arr *in64) {
    int f32 = dtype == MXP_DTYPE_F32;
    fh_arr in[OT_MAX_IN], seen[OT_MAX_IN], got[FH_MAX_IO], want[FH_MAX_IO];
    memset(got, 0, sizeof got);
    for (int k = 0; k < r->n_in; k++) {
        in[k] = fh_arr_cast(&in64[k], dtype);
        seen[k] = fh_arr_cast(&in[k], MXP_DTYPE_F64);
    }
    int n_out = 0;
    int rc = fh_forward(p, spec, r->kw, r->n_in, in, &n_out, got, MXP_REQ_WRITE);
    cr_assert_eq(rc, 0, "%s (%s): forward failed (%d): %s", spec, f32 ? "f32" : "f64", rc, fh_error());
    if (r->out_shape.ndim > 0) {
        cr_assert_eq(got[0].ndim, r->out_shape.ndim, "%s: output rank %d, want %d", spec, got[0].ndim,
                     r->out_shape.ndim);
        for (int d = 0; d < r->out_shape.ndim; d++)
            cr_assert_eq(got[0].shape[d], r->out_shape.dims[d], "%s: output dim %d is %lld, want %lld", spec, d,
                         (long long)got[0].shape[d], (long long)r->out_shape.dims[d]);
    }
    int n_ref = r->ref ? n_out : 1;
    for (int k = 0; k < n_ref; k++) want[k] = fh_arr_new(MXP_DTYPE_F64, got[k].ndim, got[k].shape);
    reference(r, r->n_in, seen, n_ref, want);
    double atol = f32 ? (r->atol32 > 0 ? r->atol32 : 1e-6) : (r->atol64 > 0 ? r->atol64 : 1e-12);
    double rtol = f32 ? (r->rtol32 > 0 ? r->rtol32 : 1e-5) : (r->rtol64 > 0 ? r->rtol64 : 1e-12);
    for (int k = 0; k < n_ref; k++) {
        cr_assert_eq(got[k].dtype, dtype, "%s: output %d dtype %d, want %d", spec, k, got[k].dtype, dtype);
        for (int64_t i = 0; i < fh_numel(&want[k]); i++) {
            double w = fh_get(&want[k], i), g = fh_get(&got[k], i);
            if (f32) w = (float)w;
            cr_assert(close_enough(g, w, atol, rtol), "%s (%s) output %d [%lld] = %.12g, want %.12g", spec,
                      f32 ? "f32" : "f64", k, (long long)i, g, w);
        }
    }
    for (int k = 0; k < n_ref; k++) fh_arr_free(&want[k]);
    for (int k = 0; k < n_out; k++) fh_arr_free(&got[k]);
    for (int k = 0; k < r->n_in; k++) fh_arr_free(&in[k]), fh_arr_free(&seen[k]);
}

/* 1 when the impl behind spec runs this case, 0 when its `supports`
 * refuses it (MXP_EUNSUPPORTED from the fake host's prepare step). */
static int runs_case(fh_pack *p, const ot_row *r, const char *spec, int32_t dtype, const fh_arr *in64) {
    fh_arr in[OT_MAX_IN], out[FH_MAX_IO];
    memset(out, 0, sizeof out);
    for (int k = 0; k < r->n_in; k++) in[k] = fh_arr_cast(&in64[k], dtype);
    int n_out = 0;
    int rc = fh_forward(p, spec, r->kw, r->n_in, in, &n_out, out, MXP_REQ_WRITE);
    for (int k = 0; k < n_out; k++) fh_arr_free(&out[k]);
    for (int k = 0; k < r->n_in; k++) fh_arr_free(&in[k]);
    return rc != MXP_EUNSUPPORTED;
}

static int run_row(fh_pack *p, const ot_row *r) {
    cr_assert(r->n_in <= OT_MAX_IN, "op table: %s has %d inputs", r->op, r->n_in);
    cr_assert(r->unary || r->binary || r->ref, "op table: %s has no reference", r->op);
    fh_arr in64[OT_MAX_IN];
    for (int k = 0; k < r->n_in; k++) {
        in64[k] = fh_arr_new(MXP_DTYPE_F64, r->in[k].ndim, r->in[k].dims);
        fh_fill_uniform(&in64[k], r->seed + 1 + (uint64_t)k, r->lo, r->hi);
    }
    if (r->prep) r->prep(in64, r->n_in);
    uint32_t dtypes = r->dtypes ? r->dtypes : OT_F32 | OT_F64;
    int runs = 0;
    for (int dt = 0; dt < 2; dt++) {
        if (!(dtypes & (dt ? OT_F64 : OT_F32))) continue;
        int32_t dtype = dt ? MXP_DTYPE_F64 : MXP_DTYPE_F32;
        int ran = 0;
        for (int d = 0; d < fh_n_devices(); d++) {
            ot_cands c;
            candidates(p, r->op, fh_device_at(d), &c);
            for (int k = 0; k < c.n; k++) {
                if (!runs_case(p, r, c.spec[k], dtype, in64)) continue;
                check_forward(p, r, c.spec[k], dtype, in64);
                if (dtype == MXP_DTYPE_F64 && r->fd_mask)
                    cr_assert_eq(fh_grad_check(p, c.spec[k], r->kw, r->n_in, in64, r->fd_mask, 1e-6,
                                               r->fd_atol > 0 ? r->fd_atol : 1e-6, r->fd_rtol > 0 ? r->fd_rtol : 1e-5),
                                 0, "%s gradient: %s", c.spec[k], fh_error());
                ran++;
            }
        }
        cr_assert_gt(ran, 0, "op table: no impl of %s runs the case in %s", r->op, dt ? "float64" : "float32");
        runs += ran;
    }
    for (int k = 0; k < r->n_in; k++) fh_arr_free(&in64[k]);
    return runs;
}

int ot_run(fh_pack *p, const ot_row *rows, size_t n_rows) {
    int runs = 0;
    for (size_t i = 0; i < n_rows; i++) runs += run_row(p, &rows[i]);
    return runs;
}

/* ------------------------------------------------------ generated files */
#define OC_MAX_KW 16

typedef struct oc_case {
    char op[64], pack[32];
    unsigned mask;
    int n_kw;
    char kwbuf[OC_MAX_KW][2][64];
    const char *kw[2 * OC_MAX_KW + 1];
    int n_in, n_out, n_og, n_igrad;
    fh_arr in[FH_MAX_IO], out[FH_MAX_IO], og[FH_MAX_IO], igrad[FH_MAX_IO];
} oc_case;

/* "<ndim> d0 .. | v0 v1 ..." into a float64 array. */
static fh_arr oc_parse_arr(char *s) {
    char *p = s, *end;
    int nd = (int)strtol(p, &end, 10);
    int64_t shape[MXP_MAX_NDIM];
    p = end;
    for (int i = 0; i < nd; i++) {
        shape[i] = strtoll(p, &end, 10);
        p = end;
    }
    fh_arr a = fh_arr_new(MXP_DTYPE_F64, nd, shape);
    p = strchr(p, '|');
    cr_assert(p, "op case: '|' missing in '%s'", s);
    p++;
    for (int64_t i = 0; i < fh_numel(&a); i++) {
        double v = strtod(p, &end);
        cr_assert(end != p, "op case: value %lld missing", (long long)i);
        fh_set(&a, i, v);
        p = end;
    }
    return a;
}

static void oc_free(oc_case *c) {
    for (int i = 0; i < c->n_in; i++) fh_arr_free(&c->in[i]);
    for (int i = 0; i < c->n_out; i++) fh_arr_free(&c->out[i]);
    for (int i = 0; i < c->n_og; i++) fh_arr_free(&c->og[i]);
    for (int i = 0; i < c->n_igrad; i++) fh_arr_free(&c->igrad[i]);
}

/* Backward with the case's out_grads (ones where none is given); the input
 * gradients must equal the igrad lines (loss heads, whose gradient is not
 * the derivative of their output, are checked this way). */
static void oc_check_backward(fh_pack *P, const char *spec, oc_case *c) {
    fh_arr out[FH_MAX_IO], og[FH_MAX_IO], ig[FH_MAX_IO];
    memset(out, 0, sizeof out);
    memset(ig, 0, sizeof ig);
    int n_out = 0;
    cr_assert_eq(fh_forward(P, spec, c->kw, c->n_in, c->in, &n_out, out, MXP_REQ_WRITE), 0, "%s: %s", spec,
                 fh_error());
    for (int k = 0; k < n_out; k++) {
        og[k] = fh_arr_new(MXP_DTYPE_F64, out[k].ndim, out[k].shape);
        for (int64_t i = 0; i < fh_numel(&og[k]); i++) fh_set(&og[k], i, k < c->n_og ? fh_get(&c->og[k], i) : 1.0);
    }
    cr_assert_eq(fh_backward(P, spec, c->kw, c->n_in, c->in, n_out, out, og, ig, NULL), 0, "%s backward: %s", spec,
                 fh_error());
    for (int k = 0; k < c->n_igrad; k++)
        for (int64_t i = 0; i < fh_numel(&c->igrad[k]); i++) {
            double a = fh_get(&ig[k], i), b = fh_get(&c->igrad[k], i);
            cr_assert(fabs(a - b) <= 1e-10 + 1e-9 * fabs(b), "%s in_grad %d [%lld] = %.12g, want %.12g", spec, k,
                      (long long)i, a, b);
        }
    for (int k = 0; k < n_out; k++) fh_arr_free(&out[k]), fh_arr_free(&og[k]);
    for (int k = 0; k < c->n_in; k++) fh_arr_free(&ig[k]);
}

/* Forward in float64 (tight tolerance) and float32 (loose): every output's
 * shape and values. */
static void oc_check_forward(fh_pack *P, const char *spec, oc_case *c, int f32) {
    fh_arr in[FH_MAX_IO], got[FH_MAX_IO];
    memset(got, 0, sizeof got);
    for (int i = 0; i < c->n_in; i++) in[i] = f32 ? fh_arr_cast(&c->in[i], MXP_DTYPE_F32) : c->in[i];
    int n_out = 0;
    int rc = fh_forward(P, spec, c->kw, c->n_in, in, &n_out, got, MXP_REQ_WRITE);
    cr_assert_eq(rc, 0, "%s %s: forward failed: %s", spec, f32 ? "f32" : "f64", fh_error());
    cr_assert_geq(n_out, c->n_out, "%s: %d outputs, want %d", spec, n_out, c->n_out);
    double atol = f32 ? 2e-5 : 1e-10, rtol = f32 ? 2e-4 : 1e-9;
    for (int k = 0; k < c->n_out; k++) {
        const fh_arr *w = &c->out[k], *g = &got[k];
        cr_assert_eq(g->ndim, w->ndim, "%s output %d: rank %d, want %d", spec, k, g->ndim, w->ndim);
        for (int d = 0; d < w->ndim; d++)
            cr_assert_eq(g->shape[d], w->shape[d], "%s output %d: dim %d is %lld, want %lld", spec, k, d,
                         (long long)g->shape[d], (long long)w->shape[d]);
        for (int64_t i = 0; i < fh_numel(w); i++) {
            double a = fh_get(g, i), b = fh_get(w, i);
            cr_assert(fabs(a - b) <= atol + rtol * fabs(b), "%s (%s) output %d [%lld] = %.12g, want %.12g", spec,
                      f32 ? "f32" : "f64", k, (long long)i, a, b);
        }
    }
    for (int k = 0; k < n_out; k++) fh_arr_free(&got[k]);
    if (f32)
        for (int i = 0; i < c->n_in; i++) fh_arr_free(&in[i]);
}

static void oc_run_case(fh_pack *P, oc_case *c) {
    int ran = 0;
    for (int d = 0; d < fh_n_devices(); d++) {
        ot_cands cands;
        candidates(P, c->op, fh_device_at(d), &cands);
        for (int k = 0; k < cands.n; k++) {
            const char *spec = cands.spec[k];
            fh_arr out[FH_MAX_IO];
            memset(out, 0, sizeof out);
            int n_out = 0;
            int rc = fh_forward(P, spec, c->kw, c->n_in, c->in, &n_out, out, MXP_REQ_WRITE);
            for (int i = 0; i < n_out; i++) fh_arr_free(&out[i]);
            if (rc == MXP_EUNSUPPORTED) continue;
            oc_check_forward(P, spec, c, 0);
            oc_check_forward(P, spec, c, 1);
            if (c->n_igrad) oc_check_backward(P, spec, c);
            if (c->mask)
                cr_assert_eq(fh_grad_check(P, spec, c->kw, c->n_in, c->in, c->mask, 1e-6, 1e-6, 1e-5), 0,
                             "%s gradient: %s", spec, fh_error());
            ran++;
        }
    }
    cr_assert_gt(ran, 0, "op case %s: no impl runs it", c->op);
}

int ot_run_file(fh_pack *P, const char *path, const char *pack) {
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
            oc_run_case(P, &c);
            oc_free(&c);
            ran++;
        }
    }
    fclose(f);
    return ran;
}
