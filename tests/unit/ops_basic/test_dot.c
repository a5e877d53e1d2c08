/* test_dot.c — dot and batch_dot with every transpose combination against
 * a triple loop, in float32 and float64; N-D dot shapes; gradients. */
#include "common_test.h"

TestSuite(dot, .init = ob_setup, .fini = ob_teardown);

/* A(M,K)·B(K,N) from stored arrays, ta/tb meaning stored transposed. */
static double ref(const fh_arr *a, const fh_arr *b, int ta, int tb, int64_t M, int64_t N, int64_t K,
                  int64_t i, int64_t j, int64_t boff_a, int64_t boff_b) {
    double s = 0;
    for (int64_t k = 0; k < K; k++) {
        double x = fh_get(a, boff_a + (ta ? k * M + i : i * K + k));
        double y = fh_get(b, boff_b + (tb ? j * K + k : k * N + j));
        s += x * y;
    }
    return s;
}

Test(dot, all_transposes) {
    int64_t M = 5, N = 4, K = 3;
    for (int dt = 0; dt < 2; dt++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                int32_t dtype = dt ? MXP_DTYPE_F64 : MXP_DTYPE_F32;
                fh_arr in[2] = {fh_arr_new(dtype, 2, ta ? SHAPE(K, M) : SHAPE(M, K)),
                                fh_arr_new(dtype, 2, tb ? SHAPE(N, K) : SHAPE(K, N))};
                fh_fill_uniform(&in[0], 1, -1, 1);
                fh_fill_uniform(&in[1], 2, -1, 1);
                const char *kw[] = {"transpose_a", ta ? "True" : "False", "transpose_b", tb ? "True" : "False", NULL};
                fh_arr y = run1("dot", kw, 2, in);
                cr_assert(y.ndim == 2 && y.shape[0] == M && y.shape[1] == N);
                for (int64_t i = 0; i < M; i++)
                    for (int64_t j = 0; j < N; j++)
                        cr_assert(close_to(fh_get(&y, i * N + j), ref(&in[0], &in[1], ta, tb, M, N, K, i, j, 0, 0), 1e-5, 1e-5));
                fh_arr_free(&y);
                if (dt) GRAD_OK("dot", kw, 2, in, 3);
                fh_arr_free(&in[0]); fh_arr_free(&in[1]);
                /* batch_dot */
                int64_t B = 3;
                fh_arr bin[2] = {fh_arr_new(dtype, 3, ta ? SHAPE(B, K, M) : SHAPE(B, M, K)),
                                 fh_arr_new(dtype, 3, tb ? SHAPE(B, N, K) : SHAPE(B, K, N))};
                fh_fill_uniform(&bin[0], 3, -1, 1);
                fh_fill_uniform(&bin[1], 4, -1, 1);
                y = run1("batch_dot", kw, 2, bin);
                cr_assert(y.ndim == 3 && y.shape[0] == B && y.shape[1] == M && y.shape[2] == N);
                for (int64_t b = 0; b < B; b++)
                    for (int64_t i = 0; i < M; i++)
                        for (int64_t j = 0; j < N; j++)
                            cr_assert(close_to(fh_get(&y, (b * M + i) * N + j),
                                               ref(&bin[0], &bin[1], ta, tb, M, N, K, i, j, b * M * K, b * K * N), 1e-5, 1e-5));
                fh_arr_free(&y);
                if (dt) GRAD_OK("batch_dot", kw, 2, bin, 3);
                fh_arr_free(&bin[0]); fh_arr_free(&bin[1]);
            }
}

Test(dot, nd_and_vector_shapes) {
    fh_arr in[2] = {fh_arr_new(MXP_DTYPE_F64, 3, SHAPE(2, 3, 4)), fh_arr_new(MXP_DTYPE_F64, 2, SHAPE(4, 5))};
    fh_fill_uniform(&in[0], 5, -1, 1);
    fh_fill_uniform(&in[1], 6, -1, 1);
    fh_arr y = run1("dot", NULL, 2, in);
    cr_assert(y.ndim == 3 && y.shape[0] == 2 && y.shape[1] == 3 && y.shape[2] == 5);
    cr_assert(close_to(fh_get(&y, 7), ref(&in[0], &in[1], 0, 0, 6, 5, 4, 1, 2, 0, 0), 1e-12, 1e-12));
    fh_arr_free(&y);
    GRAD_OK("dot", NULL, 2, in, 3);
    fh_arr v[2] = {fh_arr_new(MXP_DTYPE_F64, 1, SHAPE(4)), fh_arr_new(MXP_DTYPE_F64, 1, SHAPE(4))};
    fh_fill_uniform(&v[0], 7, -1, 1);
    fh_fill_uniform(&v[1], 8, -1, 1);
    y = run1("dot", NULL, 2, v);
    cr_assert(y.ndim == 1 && y.shape[0] == 1);
    double s = 0;
    for (int i = 0; i < 4; i++) s += fh_get(&v[0], i) * fh_get(&v[1], i);
    cr_assert(close_to(fh_get(&y, 0), s, 1e-12, 1e-12));
    fh_arr_free(&y);
    fh_arr o[2] = {{0}};
    int n;
    fh_arr bad = fh_arr_new(MXP_DTYPE_F64, 2, SHAPE(3, 5));
    fh_arr pair[2] = {in[0], bad};
    cr_assert_neq(fh_forward(P, "dot", NULL, 2, pair, &n, o, MXP_REQ_WRITE), 0, "K mismatch");
    fh_arr_free(&bad);
    fh_arr_free(&in[0]); fh_arr_free(&in[1]); fh_arr_free(&v[0]); fh_arr_free(&v[1]);
}

Test(dot, req_add_accumulates) {
    fh_arr in[2] = {fh_arr_new(MXP_DTYPE_F32, 2, SHAPE(2, 2)), fh_arr_new(MXP_DTYPE_F32, 2, SHAPE(2, 2))};
    double a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    for (int i = 0; i < 4; i++) { fh_set(&in[0], i, a[i]); fh_set(&in[1], i, b[i]); }
    fh_arr out[2] = {fh_arr_new(MXP_DTYPE_F32, 2, SHAPE(2, 2))};
    for (int i = 0; i < 4; i++) fh_set(&out[0], i, 1);
    int n;
    cr_assert_eq(fh_forward(P, "dot", NULL, 2, in, &n, out, MXP_REQ_ADD), 0);
    double want[4] = {20, 23, 44, 51};
    for (int i = 0; i < 4; i++) cr_assert_eq(fh_get(&out[0], i), want[i]);
    fh_arr_free(&in[0]); fh_arr_free(&in[1]); fh_arr_free(&out[0]);
}

/* Products large enough (>= 6 MFLOP) to be split into column blocks (wide
 * output) or row blocks (tall output) on the harness's parallel_for, every
 * transpose combination, float32, against the float64 triple loop; a
 * sample of entries including both ends of every block boundary region. */
Test(dot, blocked_products) {
    const int64_t sizes[2][3] = {{40, 700, 150}, {650, 24, 200}}; /* M, N, K: wide, tall */
    for (int s = 0; s < 2; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                int64_t M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
                fh_arr in[2] = {fh_arr_new(MXP_DTYPE_F32, 2, ta ? SHAPE(K, M) : SHAPE(M, K)),
                                fh_arr_new(MXP_DTYPE_F32, 2, tb ? SHAPE(N, K) : SHAPE(K, N))};
                fh_fill_uniform(&in[0], 11, -1, 1);
                fh_fill_uniform(&in[1], 12, -1, 1);
                const char *kw[] = {"transpose_a", ta ? "True" : "False", "transpose_b", tb ? "True" : "False", NULL};
                fh_arr y = run1("dot", kw, 2, in);
                cr_assert(y.ndim == 2 && y.shape[0] == M && y.shape[1] == N);
                for (int64_t i = 0; i < M; i += (i % 16 == 15 || i % 16 == 0) ? 1 : 7)
                    for (int64_t j = 0; j < N; j += (j % 16 == 15 || j % 16 == 0) ? 1 : 5)
                        cr_assert(close_to(fh_get(&y, i * N + j), ref(&in[0], &in[1], ta, tb, M, N, K, i, j, 0, 0), 1e-4, 1e-4),
                                  "size %d ta %d tb %d at (%lld,%lld)", s, ta, tb, (long long)i, (long long)j);
                fh_arr_free(&y);
                fh_arr_free(&in[0]); fh_arr_free(&in[1]);
            }
}
