/* test_conv_reproducible.c — every Convolution impl gives bitwise the same
 * gradients whatever the thread budget, so a training run (and a resumed
 * one) does not depend on how many cores it had.  Impls that sum partial
 * weight gradients must cut the work into parts that do not depend on the
 * thread count or on which thread ran what.
 *
 * The thread budget is read once per process, so a child process computes
 * the gradients with MXP_NUM_THREADS=1 and this process with 3; both run
 * gemm, direct, winograd and strip on one 3x3/pad-1 layer big enough to
 * give several chunks of work (32 pixels wide: strip's row limit), and
 * the gradients must be identical bytes.  The weight gradient is also
 * checked against a float64 plain-loop reference, so two equally wrong
 * results cannot pass. */
#include "op_test_util.h"

#include "op/op.h"

#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define RN 8
#define RC 16
#define RH 64
#define RW 32
#define RM 16
#define NX (RN * RC * RH * RW)
#define NW (RM * RC * 9)
#define NY (RN * RM * RH * RW)
#define NG (NX + NW + RM) /* dx, dw, db */

static const char *const k_impls[] = {"gemm", "direct", "winograd", "strip"};
#define N_IMPLS 4

TestSuite(conv_reproducible, .init = opx_setup, .fini = opx_teardown, .timeout = 120);

typedef struct inputs { double x[NX], w[NW], b[RM], dy[NY]; } inputs;

static void make_inputs(inputs *in) {
    opx_fill(in->x, NX, 41, -1, 1);
    opx_fill(in->w, NW, 42, -0.3, 0.3);
    opx_fill(in->b, RM, 43, -0.1, 0.1);
    opx_fill(in->dy, NY, 44, -1, 1);
    for (int i = 0; i < NX; i++) in->x[i] = (float)in->x[i];
    for (int i = 0; i < NY; i++) in->dy[i] = (float)in->dy[i];
}

/* Gradients (dx, dw, db, as float32) of every impl, in k_impls order.
 * Returns 0 on success; no Criterion asserts, so a child can use it. */
static int all_gradients(const inputs *in, float *out) {
    static const char *const keys[] = {"kernel", "pad", "num_filter"};
    static const char *const vals[] = {"(3, 3)", "(1, 1)", "16"};
    int64_t sx[4] = {RN, RC, RH, RW}, sw[4] = {RM, RC, 3, 3}, sb[1] = {RM}, sy[4] = {RN, RM, RH, RW};
    const int64_t *shapes[3] = {sx, sw, sb};
    const int nd[3] = {4, 4, 1};
    const double *src[3] = {in->x, in->w, in->b};
    mxp_ndarray *arg[3] = {0}, *grad[3] = {0}, *y = NULL, *og = NULL;
    mxp__node *node = NULL;
    int rc = MXP_OK;
    for (int i = 0; i < 3 && !rc; i++) {
        rc = mxp_ndarray_create(shapes[i], nd[i], MXP_DTYPE_F32, opx_cpu, &arg[i]);
        if (!rc) rc = mxp_ndarray_create(shapes[i], nd[i], MXP_DTYPE_F32, opx_cpu, &grad[i]);
        if (!rc) {
            int64_t n = mxp_ndarray_size(arg[i]);
            float *f = malloc((size_t)n * sizeof *f);
            for (int64_t k = 0; k < n; k++) f[k] = (float)src[i][k];
            rc = mxp_ndarray_sync_copy_from(arg[i], f, (size_t)n * sizeof *f);
            free(f);
        }
    }
    if (!rc) rc = mxp_ndarray_create(sy, 4, MXP_DTYPE_F32, opx_cpu, &y);
    if (!rc) rc = mxp_ndarray_create(sy, 4, MXP_DTYPE_F32, opx_cpu, &og);
    if (!rc) {
        float *f = malloc(NY * sizeof *f);
        for (int k = 0; k < NY; k++) f[k] = (float)in->dy[k];
        rc = mxp_ndarray_sync_copy_from(og, f, NY * sizeof *f);
        free(f);
    }
    if (!rc) rc = mxp__node_create("Convolution", 3, keys, vals, &node);
    if (!rc) {
        mxp_shape is[3], os = {.ndim = -1};
        int32_t it[3] = {MXP_DTYPE_F32, MXP_DTYPE_F32, MXP_DTYPE_F32}, ot = MXP_DTYPE_UNKNOWN;
        for (int i = 0; i < 3; i++) {
            is[i].ndim = nd[i];
            for (int k = 0; k < nd[i]; k++) is[i].dims[k] = shapes[i][k];
        }
        rc = mxp__node_infer(node, is, it, &os, &ot, NULL, NULL);
    }
    for (int m = 0; m < N_IMPLS && !rc; m++) {
        rc = mxp_op_set_impl("Convolution", k_impls[m]);
        if (!rc) rc = mxp__node_forward(node, arg, &y, NULL, NULL, 1);
        if (!rc) rc = mxp__node_backward(node, &og, arg, &y, grad, NULL, NULL);
        float *o = out + (size_t)m * NG;
        if (!rc) rc = mxp_ndarray_sync_copy_to(grad[0], o, NX * sizeof(float));
        if (!rc) rc = mxp_ndarray_sync_copy_to(grad[1], o + NX, NW * sizeof(float));
        if (!rc) rc = mxp_ndarray_sync_copy_to(grad[2], o + NX + NW, RM * sizeof(float));
        if (!rc && strcmp(mxp__node_impl_name(node), k_impls[m])) rc = MXP_EINVAL;
    }
    mxp__node_free(node);
    for (int i = 0; i < 3; i++) {
        mxp_ndarray_release(arg[i]);
        mxp_ndarray_release(grad[i]);
    }
    mxp_ndarray_release(y);
    mxp_ndarray_release(og);
    return rc;
}

/* dw[m][c][u][v] = sum_n,i,j dy[n][m][i][j] * x[n][c][i+u-1][j+v-1], float64. */
static void reference_dw(const inputs *in, double *dw) {
    memset(dw, 0, NW * sizeof *dw);
    for (int n = 0; n < RN; n++)
        for (int m = 0; m < RM; m++)
            for (int c = 0; c < RC; c++)
                for (int u = 0; u < 3; u++)
                    for (int v = 0; v < 3; v++) {
                        double s = 0;
                        for (int i = 0; i < RH; i++) {
                            int hi = i + u - 1;
                            if (hi < 0 || hi >= RH) continue;
                            const double *dyr = in->dy + ((n * RM + m) * RH + i) * RW;
                            const double *xr = in->x + ((n * RC + c) * RH + hi) * RW;
                            for (int j = 0; j < RW; j++) {
                                int wj = j + v - 1;
                                if (wj >= 0 && wj < RW) s += dyr[j] * xr[wj];
                            }
                        }
                        dw[((m * RC + c) * 3 + u) * 3 + v] += s;
                    }
}

/* Child mode: this binary re-executed with MXP_REPRO_OUT set computes the
 * gradients, writes them there and exits before Criterion starts.  The
 * child is a fresh exec, not a bare fork: allocator locks other threads
 * held at a fork (Criterion's, or a sanitizer's) cannot follow it. */
__attribute__((constructor)) static void repro_child(void) {
    const char *path = getenv("MXP_REPRO_OUT");
    if (!path) return;
    static inputs in;
    make_inputs(&in);
    size_t bytes = (size_t)N_IMPLS * NG * sizeof(float);
    float *g = malloc(bytes);
    int ok = g && all_gradients(&in, g) == MXP_OK;
    FILE *f = ok ? fopen(path, "wb") : NULL;
    ok = f && fwrite(g, 1, bytes, f) == bytes;
    if (f) ok = (fclose(f) == 0) && ok;
    if (!ok) fprintf(stderr, "1-thread child: %s\n", mxp_last_error());
    free(g);
    mxp_engine_shutdown();
    _exit(ok ? 0 : 1); /* no atexit work (or leak report) of a test process */
}

Test(conv_reproducible, gradients_do_not_depend_on_the_thread_count) {
    static inputs in;
    make_inputs(&in);
    char path[160];
    snprintf(path, sizeof path, "%s/one_thread.bin", opx_dir);
    size_t bytes = (size_t)N_IMPLS * NG * sizeof(float);

    /* The child's environment: ours plus the two settings, built before
     * the fork (the child only calls execve). */
    size_t ne = 0;
    while (environ[ne]) ne++;
    char **envp = calloc(ne + 3, sizeof *envp);
    cr_assert(envp);
    size_t k = 0;
    for (size_t i = 0; i < ne; i++)
        if (strncmp(environ[i], "MXP_NUM_THREADS=", 16) && strncmp(environ[i], "MXP_REPRO_OUT=", 14)) envp[k++] = environ[i];
    char out_kv[200];
    snprintf(out_kv, sizeof out_kv, "MXP_REPRO_OUT=%s", path);
    envp[k++] = "MXP_NUM_THREADS=1";
    envp[k++] = out_kv;
    char *const argv[] = {"test_conv_reproducible", NULL};
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork failed");
    if (pid == 0) {
        execve("/proc/self/exe", argv, envp);
        _exit(127);
    }
    free(envp);
    setenv("MXP_NUM_THREADS", "3", 1);
    float *many = malloc(bytes), *one = malloc(bytes);
    cr_assert(many && one);
    cr_assert_eq(all_gradients(&in, many), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_num_threads(), 3);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the 1-thread child failed");
    FILE *f = fopen(path, "rb");
    cr_assert(f, "no output from the 1-thread child");
    cr_assert_eq(fread(one, 1, bytes, f), bytes);
    fclose(f);

    static double ref[NW];
    reference_dw(&in, ref);
    double rn = 0;
    for (int k = 0; k < NW; k++) rn += ref[k] * ref[k];
    for (int m = 0; m < N_IMPLS; m++) {
        const float *a = many + (size_t)m * NG, *b = one + (size_t)m * NG;
        cr_expect(!memcmp(a, b, NX * sizeof(float)), "%s: data gradient differs between 3 threads and 1",
                  k_impls[m]);
        cr_expect(!memcmp(a + NX, b + NX, NW * sizeof(float)), "%s: weight gradient differs between 3 threads and 1",
                  k_impls[m]);
        cr_expect(!memcmp(a + NX + NW, b + NX + NW, RM * sizeof(float)),
                  "%s: bias gradient differs between 3 threads and 1", k_impls[m]);
        double en = 0;
        for (int k = 0; k < NW; k++) en += (a[NX + k] - ref[k]) * (a[NX + k] - ref[k]);
        double rel = sqrt(en / rn);
        cr_expect_leq(rel, 1e-4, "%s: weight gradient vs float64 reference: relative error %g", k_impls[m], rel);
    }
    free(many);
    free(one);
}
