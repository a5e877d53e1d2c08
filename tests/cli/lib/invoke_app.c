/* invoke_app.c — an application built against an INSTALLED mxplug
 * (pkg-config mxplug) by tests/cli/third_party.sh: it runs the third-party
 * pack's ops through the registry with mxp_invoke and checks the values
 * against the formulas computed here.
 *   hardswish on [-5 .. 4.5]                   (new op from the pack)
 *   relu with policy "thirdparty" (mxp_op_set_impl), and the explain report
 *   naming it as chosen                         (extra impl of ops-basic's op)
 * Exit 0 on success; failures print what and why. */
#include <mxplug.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 20

static int fail(const char *what) {
    fprintf(stderr, "invoke_app: %s: %s\n", what, mxp_last_error());
    return 1;
}

/* out = op(x) on the CPU through mxp_invoke. */
static int run(const char *op, const float *x, float *out) {
    int64_t shape[1] = {N};
    mxp_ndarray *in = NULL, *res[1] = {NULL};
    mxp_device cpu = {MXP_DEV_CPU, 0};
    int n_out = 1;
    if (mxp_ndarray_create(shape, 1, MXP_DTYPE_F32, cpu, &in) != MXP_OK) return fail("create");
    if (mxp_ndarray_sync_copy_from(in, x, sizeof(float) * N) != MXP_OK) return fail("copy in");
    if (mxp_invoke(op, 1, &in, &n_out, res, 0, NULL, NULL) != MXP_OK) return fail(op);
    if (mxp_ndarray_sync_copy_to(res[0], out, sizeof(float) * N) != MXP_OK) return fail("copy out");
    mxp_ndarray_release(res[0]);
    mxp_ndarray_release(in);
    return 0;
}

int main(void) {
    float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = -5.0f + 0.5f * (float)i;

    if (run("hardswish", x, y)) return 1;
    for (int i = 0; i < N; i++) {
        double r6 = fmin(fmax((double)x[i] + 3.0, 0.0), 6.0);
        if (fabs(y[i] - x[i] * r6 / 6.0) > 1e-6) {
            fprintf(stderr, "invoke_app: hardswish(%g) = %g, want %g\n", x[i], y[i], x[i] * r6 / 6.0);
            return 1;
        }
    }

    if (mxp_op_set_impl("relu", "thirdparty") != MXP_OK) return fail("set_impl relu thirdparty");
    char *report = NULL;
    const char *shapes[1] = {"data=20"};
    if (mxp_op_explain("relu", "cpu", shapes, 1, NULL, NULL, 0, &report) != MXP_OK) return fail("explain");
    const char *line = strstr(report, "\n  thirdparty "); /* its row, not the header */
    const char *chosen = line ? strstr(line, "CHOSEN") : NULL;
    const char *eol = line ? strchr(line + 1, '\n') : NULL;
    if (!chosen || (eol && chosen > eol)) {
        fprintf(stderr, "invoke_app: thirdparty not chosen for relu:\n%s", report);
        free(report);
        return 1;
    }
    free(report);
    if (run("relu", x, y)) return 1;
    for (int i = 0; i < N; i++) {
        if (y[i] != (x[i] > 0 ? x[i] : 0.0f)) {
            fprintf(stderr, "invoke_app: relu(%g) = %g\n", x[i], y[i]);
            return 1;
        }
    }
    mxp_registry_shutdown();
    printf("invoke_app: hardswish and relu(thirdparty) ok\n");
    return 0;
}
