/* test_rng_engine.c — random numbers do not depend on the thread count:
 * two child processes run the same program (ops that reserve RNG ranges at
 * push time and generate when they run, on several arrays, interleaved)
 * with MXP_NUM_THREADS=1 and =2, and send their results back; they must be
 * bit-identical, and equal to the sequence computed directly from Philox. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "resource/resource.h"

enum { N_OPS = 24, PER_OP = 257 };

typedef struct gen_arg {
    mxp_rng_stream s;
    float *out;
} gen_arg;

static int gen_fn(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    gen_arg *g = arg;
    return mxp__rng_normal_f32(&g->s, 0, PER_OP, 0.0f, 1.0f, g->out);
}

/* Runs in a child: fills results[N_OPS][PER_OP]. */
static void run_program(float *results) {
    mxp_random_seed(2024);
    mxp_var *vars[4];
    for (int i = 0; i < 4; i++) cr_assert_eq(mxp_engine_new_var(&vars[i]), MXP_OK);
    for (int k = 0; k < N_OPS; k++) {
        gen_arg *g = malloc(sizeof *g);
        g->out = results + (size_t)k * PER_OP;
        /* Reservation happens HERE, at push time, in push order. */
        cr_assert_eq(mxp__rng_reserve((mxp_device){MXP_DEV_CPU, 0},
                                      mxp__rng_values_needed(MXP_RNG_NORMAL_F32, PER_OP), &g->s), MXP_OK);
        mxp_engine_push_args a = {0};
        a.sync_fn = gen_fn;
        a.arg = g;
        a.free_arg = free;
        a.mutate_vars = &vars[k % 4]; /* four independent chains: run in parallel */
        a.n_mutate = 1;
        a.name = "gen";
        cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    }
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    for (int i = 0; i < 4; i++) mxp_engine_delete_var(vars[i]);
}

static void run_child(const char *threads, float *results) {
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        setenv("MXP_NUM_THREADS", threads, 1);
        setenv("MXP_ENGINE_TYPE", "threaded", 1);
        float *r = calloc((size_t)N_OPS * PER_OP, sizeof *r);
        run_program(r);
        size_t bytes = (size_t)N_OPS * PER_OP * sizeof *r, off = 0;
        while (off < bytes) {
            ssize_t w = write(fds[1], (char *)r + off, bytes - off);
            if (w <= 0) _exit(2);
            off += (size_t)w;
        }
        _exit(0);
    }
    close(fds[1]);
    size_t bytes = (size_t)N_OPS * PER_OP * sizeof *results, off = 0;
    while (off < bytes) {
        ssize_t r = read(fds[0], (char *)results + off, bytes - off);
        cr_assert_gt(r, 0, "child (threads=%s) died", threads);
        off += (size_t)r;
    }
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

Test(rng_engine, same_numbers_with_1_and_2_threads) {
    size_t n = (size_t)N_OPS * PER_OP;
    float *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b), *ref = calloc(n, sizeof *ref);
    run_child("1", a);
    run_child("2", b);
    cr_assert_eq(memcmp(a, b, n * sizeof *a), 0, "results differ between 1 and 2 threads");
    /* Reference: the same reservations made sequentially, generated here. */
    mxp_random_seed(2024);
    for (int k = 0; k < N_OPS; k++) {
        mxp_rng_stream s;
        mxp__rng_reserve((mxp_device){MXP_DEV_CPU, 0}, mxp__rng_values_needed(MXP_RNG_NORMAL_F32, PER_OP), &s);
        mxp__rng_normal_f32(&s, 0, PER_OP, 0.0f, 1.0f, ref + (size_t)k * PER_OP);
    }
    cr_assert_eq(memcmp(a, ref, n * sizeof *a), 0);
    /* And the ops did not all get the same numbers. */
    cr_assert_neq(memcmp(a, a + PER_OP, PER_OP * sizeof *a), 0);
    free(a);
    free(b);
    free(ref);
}
