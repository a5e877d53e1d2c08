/* op_table.h — table-driven op tests on the fake host (fake_host.h), after
 * ggml's test-backend-ops: one row per op and case, run against every
 * registered impl of the op on every device the host offers (the CPU
 * here; a GPU host adds its device and its impls join the same rows).
 *
 * A row (ot_row) names the op, its kwargs, the input shapes and value
 * range, an independent reference (a float64 function per element, or a
 * whole-output function), the dtypes to run and their tolerances, and
 * which inputs get a finite-difference gradient check.  For each device,
 * impl and dtype the runner fills the inputs from the row's seed, runs
 * forward, and compares every output value with the reference computed in
 * float64 from the same (dtype-rounded) inputs; float32 references are
 * rounded to float32 first, as the kernels' results are.  Then, in
 * float64, central differences of sum(out * w) against the impl's
 * backward (fh_grad_check, which also checks req add).  An impl whose
 * `supports` refuses the case is skipped, but every row must run on at
 * least one impl per dtype, so a table cannot pass by running nothing.
 *
 * ot_run_file runs the generated case files (tests/data/ops/ *_cases.txt,
 * numpy/PyTorch values; format in gen_ops_ext_cases.py) through the same
 * per-impl loop.  Assertions are Criterion's: call from a Test body.
 * Format of the rows and how to add one: docs/testing.md. */
#ifndef MXP_TESTS_OP_TABLE_H
#define MXP_TESTS_OP_TABLE_H

#include "fake_host.h"

#define OT_MAX_IN 4
#define OT_MAX_KW 8

enum { OT_F32 = 1, OT_F64 = 2 };

typedef struct ot_shape {
    int ndim;
    int64_t dims[MXP_MAX_NDIM];
} ot_shape;

/* Whole-output reference: fill out[0..n_out) (float64, shaped as the op
 * shaped them; the row's out_shape, when given, is checked first). */
typedef struct ot_ref_args {
    const char *const *kw;
    int n_in;
    const fh_arr *in; /* float64 copies of the inputs the op saw */
    int n_out;
    fh_arr *out;
    const void *data; /* the row's ref_data */
} ot_ref_args;

typedef struct ot_row {
    const char *op;                      /* name or alias                        */
    const char *kw[2 * OT_MAX_KW + 1];   /* key, value, ..., NULL                */
    int n_in;
    ot_shape in[OT_MAX_IN];
    double lo, hi;                       /* inputs uniform in [lo, hi)           */
    uint64_t seed;
    /* one reference, per element or whole: */
    double (*unary)(double);             /* out[i] = unary(in0[i])               */
    double (*binary)(double, double);    /* out[i] = binary(in0[i], in1[i]) (numpy broadcasting) */
    void (*ref)(const ot_ref_args *a);
    const void *ref_data;                /* handed to ref (a case struct)       */
    ot_shape out_shape;                  /* checked when ndim > 0                */
    uint32_t dtypes;                     /* OT_F32 | OT_F64; 0 = both            */
    double atol64, rtol64, atol32, rtol32; /* 0 = 1e-12/1e-12 and 1e-6/1e-5      */
    uint32_t fd_mask;                    /* inputs checked by finite differences */
    double fd_atol, fd_rtol;             /* 0 = 1e-6 / 1e-5                      */
    void (*prep)(fh_arr *in, int n_in);  /* adjust float64 inputs (kinks, ...)   */
} ot_row;

/* Runs every row; returns the number of (row, device, impl, dtype) runs. */
int ot_run(fh_pack *p, const ot_row *rows, size_t n_rows);
/* The cases of `path` whose pack is `pack`; returns the count of cases. */
int ot_run_file(fh_pack *p, const char *path, const char *pack);

#define OT_SHAPE(...) {sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}}
#define OT_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif /* MXP_TESTS_OP_TABLE_H */
