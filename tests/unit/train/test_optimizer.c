/* test_optimizer.c — optimizers (runtime/src/train/optimizer.c) step by
 * step against float64 reference loops written here from MXNet's
 * formulas (python/mxnet/optimizer/optimizer.py + the update ops), with
 * wd, rescale_grad and clip_gradient; MXNet's wd_mult rule (no decay on
 * biases); lr schedules (factor, multi-factor) alone and inside updates;
 * and save -> load of states continuing bit-identically, RNG included. */
#include "train_test_util.h"

TestSuite(train_optimizer, .init = trt_setup, .fini = trt_teardown);

#define N 7
static const float W0[N] = {0.5f, -1.25f, 2.0f, 0.03f, -0.7f, 1.5f, -3.0f};

static void grad_at(int step, float *g) {
    for (int i = 0; i < N; i++) g[i] = (float)(0.3 * sin(1.7 * i + 0.9 * step) + 0.05 * (i - 3) * (step + 1));
}

static double clip(double x, double c) { return c < 0 ? x : x > c ? c : x < -c ? -c : x; }

static void check_close(const float *got, const double *want, const char *what, int step) {
    for (int i = 0; i < N; i++)
        cr_assert(fabs(got[i] - want[i]) <= 2e-6 * (1 + fabs(want[i])), "%s step %d elem %d: %.9g vs %.9g", what, step,
                  i, got[i], want[i]);
}

typedef struct ref { double w[N], s0[N], s1[N]; } ref;

/* Runs `steps` updates of `opt` and of the reference `step_fn`. */
static void run(mxp_optimizer *opt, const char *name, int steps, ref *r,
                void (*step_fn)(ref *, const float *, int t, const void *), const void *hp, const char *what) {
    mxp_ndarray *w = trt_vec(N, W0);
    for (int i = 0; i < N; i++) r->w[i] = W0[i], r->s0[i] = 0, r->s1[i] = 0;
    for (int t = 1; t <= steps; t++) {
        float g[N];
        grad_at(t, g);
        mxp_ndarray *gd = trt_vec(N, g);
        cr_assert_eq(mxp_optimizer_update(opt, 0, name, w, gd), MXP_OK, "%s", mxp_last_error());
        step_fn(r, g, t, hp);
        float *got = trt_get(w);
        check_close(got, r->w, what, t);
        free(got);
        mxp_ndarray_release(gd);
    }
    mxp_ndarray_release(w);
}

typedef struct hp { double lr, wd, rescale, clip, mom, b1, b2, eps, g1, clipw; } hp;

static void sgd_ref(ref *r, const float *g, int t, const void *p) {
    const hp *h = p;
    (void)t;
    for (int i = 0; i < N; i++) {
        double gg = clip(h->rescale * g[i], h->clip);
        if (h->mom == 0) {
            r->w[i] = (1 - h->lr * h->wd) * r->w[i] - h->lr * gg;
        } else {
            r->s0[i] = h->mom * r->s0[i] - h->lr * h->wd * r->w[i] - h->lr * gg;
            r->w[i] += r->s0[i];
        }
    }
}

static void adam_ref(ref *r, const float *g, int t, const void *p) {
    const hp *h = p;
    double lr = h->lr * sqrt(1 - pow(h->b2, t)) / (1 - pow(h->b1, t));
    for (int i = 0; i < N; i++) {
        double gg = clip(h->rescale * g[i] + h->wd * r->w[i], h->clip);
        r->s0[i] = h->b1 * r->s0[i] + (1 - h->b1) * gg;
        r->s1[i] = h->b2 * r->s1[i] + (1 - h->b2) * gg * gg;
        r->w[i] -= lr * r->s0[i] / (sqrt(r->s1[i]) + h->eps);
    }
}

static void rms_ref(ref *r, const float *g, int t, const void *p) {
    const hp *h = p;
    (void)t;
    for (int i = 0; i < N; i++) {
        double gg = clip(h->rescale * g[i] + h->wd * r->w[i], h->clip);
        r->s0[i] = (1 - h->g1) * gg * gg + h->g1 * r->s0[i];
        r->w[i] -= h->lr * gg / sqrt(r->s0[i] + h->eps);
        if (h->clipw >= 0) r->w[i] = clip(r->w[i], h->clipw);
    }
}

Test(train_optimizer, sgd_plain_and_momentum) {
    mxp_optimizer *o = NULL;
    const char *k[] = {"learning_rate", "wd", "rescale_grad", "clip_gradient"};
    const char *v[] = {"0.1", "0.01", "0.5", "0.12"};
    cr_assert_eq(mxp_optimizer_create("sgd", 4, k, v, &o), MXP_OK, "%s", mxp_last_error());
    hp h = {.lr = 0.1, .wd = 0.01, .rescale = 0.5, .clip = 0.12};
    ref r;
    run(o, "fc_weight", 4, &r, sgd_ref, &h, "sgd");
    cr_assert_eq(mxp_optimizer_num_update(o), 4);
    mxp_optimizer_free(o);

    const char *k2[] = {"learning_rate", "momentum", "wd"};
    const char *v2[] = {"0.05", "0.9", "0.001"};
    cr_assert_eq(mxp_optimizer_create("sgd", 3, k2, v2, &o), MXP_OK);
    hp h2 = {.lr = 0.05, .wd = 0.001, .rescale = 1, .clip = -1, .mom = 0.9};
    run(o, "fc_weight", 5, &r, sgd_ref, &h2, "sgd_mom");
    mxp_optimizer_free(o);
}

Test(train_optimizer, adam_with_bias_correction) {
    mxp_optimizer *o = NULL;
    const char *k[] = {"learning_rate", "wd", "beta1", "beta2", "epsilon", "clip_gradient"};
    const char *v[] = {"0.01", "0.002", "0.8", "0.99", "1e-6", "0.2"};
    cr_assert_eq(mxp_optimizer_create("adam", 6, k, v, &o), MXP_OK, "%s", mxp_last_error());
    hp h = {.lr = 0.01, .wd = 0.002, .rescale = 1, .clip = 0.2, .b1 = 0.8, .b2 = 0.99, .eps = 1e-6};
    ref r;
    run(o, "conv_weight", 5, &r, adam_ref, &h, "adam");
    mxp_optimizer_free(o);
}

Test(train_optimizer, rmsprop) {
    mxp_optimizer *o = NULL;
    const char *k[] = {"learning_rate", "gamma1", "wd", "rescale_grad", "clip_weights"};
    const char *v[] = {"0.01", "0.95", "0.01", "2", "1.9"};
    cr_assert_eq(mxp_optimizer_create("rmsprop", 5, k, v, &o), MXP_OK, "%s", mxp_last_error());
    hp h = {.lr = 0.01, .wd = 0.01, .rescale = 2, .clip = -1, .g1 = 0.95, .eps = 1e-8, .clipw = 1.9};
    ref r;
    run(o, "x_gamma", 5, &r, rms_ref, &h, "rmsprop");
    mxp_optimizer_free(o);
}

Test(train_optimizer, weight_decay_only_on_weights_and_gammas) {
    mxp_optimizer *o = NULL;
    const char *k[] = {"learning_rate", "wd"};
    const char *v[] = {"0.1", "0.5"};
    cr_assert_eq(mxp_optimizer_create("sgd", 2, k, v, &o), MXP_OK);
    hp with = {.lr = 0.1, .wd = 0.5, .rescale = 1, .clip = -1}, without = with;
    without.wd = 0;
    ref r;
    run(o, "fc1_bias", 2, &r, sgd_ref, &without, "bias: no wd");
    mxp_optimizer_free(o);
    cr_assert_eq(mxp_optimizer_create("sgd", 2, k, v, &o), MXP_OK);
    run(o, NULL, 2, &r, sgd_ref, &with, "unnamed: wd");
    mxp_optimizer_free(o);
}

/* MXNet's lr_mult / wd_mult dicts (from __lr_mult__ / __wd_mult__): lr and
 * wd scaled per name; a wd_mult on a bias turns weight decay on. */
Test(train_optimizer, lr_and_wd_multipliers_by_name) {
    mxp_optimizer *o = NULL;
    const char *k[] = {"learning_rate", "wd", "momentum"};
    const char *v[] = {"0.1", "0.5", "0.9"};
    cr_assert_eq(mxp_optimizer_create("sgd", 3, k, v, &o), MXP_OK);
    cr_assert_eq(mxp_optimizer_set_lr_mult(o, "fc1_weight", 0.25), MXP_OK);
    cr_assert_eq(mxp_optimizer_set_wd_mult(o, "fc1_weight", 2.0), MXP_OK);
    cr_assert_eq(mxp_optimizer_set_wd_mult(o, "fc1_bias", 0.5), MXP_OK);
    hp w = {.lr = 0.025, .wd = 1.0, .rescale = 1, .clip = -1, .mom = 0.9};
    hp b = {.lr = 0.1, .wd = 0.25, .rescale = 1, .clip = -1, .mom = 0.9};
    hp plain = {.lr = 0.1, .wd = 0.5, .rescale = 1, .clip = -1, .mom = 0.9};
    ref r;
    run(o, "fc1_weight", 3, &r, sgd_ref, &w, "weight with lr_mult 0.25, wd_mult 2");
    mxp_optimizer_free(o);
    cr_assert_eq(mxp_optimizer_create("sgd", 3, k, v, &o), MXP_OK);
    cr_assert_eq(mxp_optimizer_set_wd_mult(o, "fc1_bias", 0.5), MXP_OK);
    cr_assert_eq(mxp_optimizer_set_lr_mult(o, "other_weight", 3.0), MXP_OK);
    run(o, "fc1_bias", 3, &r, sgd_ref, &b, "bias with wd_mult 0.5");
    mxp_optimizer_free(o);
    cr_assert_eq(mxp_optimizer_create("sgd", 3, k, v, &o), MXP_OK);
    cr_assert_eq(mxp_optimizer_set_lr_mult(o, "other_weight", 3.0), MXP_OK);
    run(o, "fc2_weight", 3, &r, sgd_ref, &plain, "unlisted weight");
    cr_assert_eq(mxp_optimizer_set_lr_mult(o, "x", -1.0), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "lr_mult"), "%s", mxp_last_error());
    mxp_optimizer_free(o);
}

Test(train_optimizer, schedules) {
    mxp_lr_schedule *f = NULL, *m = NULL;
    cr_assert_eq(mxp_lr_schedule_factor(10, 0.5, 0.02, &f), MXP_OK);
    /* MXNet: while num_update > count + step: lr *= factor. */
    cr_assert_eq(mxp_lr_schedule_lr(f, 0.1, 0), 0.1);
    cr_assert_eq(mxp_lr_schedule_lr(f, 0.1, 10), 0.1);
    cr_assert_eq(mxp_lr_schedule_lr(f, 0.1, 11), 0.1 * 0.5);
    cr_assert_eq(mxp_lr_schedule_lr(f, 0.1, 20), 0.1 * 0.5);
    cr_assert_eq(mxp_lr_schedule_lr(f, 0.1, 21), 0.1 * 0.5 * 0.5);
    cr_assert_eq(mxp_lr_schedule_lr(f, 0.1, 31), 0.02, "clamped at stop_factor_lr");
    cr_assert_eq(mxp_lr_schedule_lr(f, 0.1, 1000), 0.02);
    int64_t steps[3] = {3, 5, 9};
    cr_assert_eq(mxp_lr_schedule_multi_factor(3, steps, 0.1, &m), MXP_OK);
    cr_assert_eq(mxp_lr_schedule_lr(m, 1.0, 3), 1.0);
    cr_assert_eq(mxp_lr_schedule_lr(m, 1.0, 4), 1.0 * 0.1);
    cr_assert_eq(mxp_lr_schedule_lr(m, 1.0, 6), 1.0 * 0.1 * 0.1);
    cr_assert_eq(mxp_lr_schedule_lr(m, 1.0, 10), 1.0 * 0.1 * 0.1 * 0.1);
    int64_t bad[2] = {5, 5};
    mxp_lr_schedule *x = NULL;
    cr_assert_eq(mxp_lr_schedule_multi_factor(2, bad, 0.1, &x), MXP_EINVAL);
    cr_assert_eq(mxp_lr_schedule_factor(0, 0.1, 0, &x), MXP_EINVAL);
    mxp_lr_schedule_free(f);

    /* Inside an optimizer: plain SGD, grad 1, lr 1 then 0.1 after 3 updates. */
    mxp_optimizer *o = NULL;
    const char *k[] = {"learning_rate"};
    const char *v[] = {"1"};
    cr_assert_eq(mxp_optimizer_create("sgd", 1, k, v, &o), MXP_OK);
    mxp_optimizer_set_lr_schedule(o, m);
    float zero = 0, one = 1;
    mxp_ndarray *w = trt_vec(1, &zero), *g = trt_vec(1, &one);
    double want = 0;
    for (int t = 1; t <= 6; t++) {
        cr_assert_eq(mxp_optimizer_update(o, 0, "w_weight", w, g), MXP_OK);
        want -= t <= 3 ? 1.0 : t <= 5 ? 0.1 : 0.01;
        float *got = trt_get(w);
        cr_assert_float_eq(got[0], want, 1e-6, "step %d", t);
        free(got);
    }
    cr_assert_float_eq(mxp_optimizer_lr(o), 0.01, 1e-15);
    mxp_ndarray_release(w);
    mxp_ndarray_release(g);
    mxp_optimizer_free(o);
}

/* Two parameters, `steps` updates each, deterministic grads. */
static void train(mxp_optimizer *o, mxp_ndarray *w0, mxp_ndarray *w1, int from, int to) {
    for (int t = from; t < to; t++) {
        float g[N];
        grad_at(t, g);
        mxp_ndarray *gd = trt_vec(N, g);
        cr_assert_eq(mxp_optimizer_update(o, 0, "a_weight", w0, gd), MXP_OK, "%s", mxp_last_error());
        cr_assert_eq(mxp_optimizer_update(o, 2, "b_bias", w1, gd), MXP_OK, "%s", mxp_last_error());
        mxp_ndarray_release(gd);
    }
}

Test(train_optimizer, states_round_trip_continues_bit_identically) {
    const char *types[] = {"sgd", "adam", "rmsprop"};
    const char *k[] = {"learning_rate", "wd", "momentum"};
    const char *v[] = {"0.05", "0.01", "0.9"};
    for (int ti = 0; ti < 3; ti++) {
        int nk = ti == 0 ? 3 : 2;
        mxp_random_seed(5);
        mxp_optimizer *a = NULL, *b = NULL;
        cr_assert_eq(mxp_optimizer_create(types[ti], nk, k, v, &a), MXP_OK);
        mxp_ndarray *a0 = trt_vec(N, W0), *a1 = trt_vec(N, W0);
        train(a, a0, a1, 0, 3);
        /* Draw some random numbers so the RNG position matters. */
        mxp_init u = mxp_init_uniform(1);
        mxp_ndarray *r = trt_vec(N, NULL);
        cr_assert_eq(mxp_init_array(&u, r), MXP_OK);
        char path[128];
        snprintf(path, sizeof path, "%s/opt-%s.states", trt_dir, types[ti]);
        cr_assert_eq(mxp_optimizer_save_states(a, path), MXP_OK, "%s", mxp_last_error());
        float *w0s = trt_get(a0), *w1s = trt_get(a1);
        train(a, a0, a1, 3, 6);
        cr_assert_eq(mxp_init_array(&u, r), MXP_OK);
        float *ra = trt_get(r);

        /* A new process would re-seed, re-create, load weights and states. */
        mxp_random_seed(5);
        cr_assert_eq(mxp_optimizer_create(types[ti], nk, k, v, &b), MXP_OK);
        cr_assert_eq(mxp_optimizer_load_states(b, path), MXP_OK, "%s", mxp_last_error());
        cr_assert_eq(mxp_optimizer_num_update(b), 3);
        mxp_ndarray *b0 = trt_vec(N, w0s), *b1 = trt_vec(N, w1s);
        train(b, b0, b1, 3, 6);
        cr_assert_eq(mxp_init_array(&u, r), MXP_OK);
        float *rb = trt_get(r);
        float *x0 = trt_get(a0), *x1 = trt_get(a1), *y0 = trt_get(b0), *y1 = trt_get(b1);
        cr_assert_eq(memcmp(x0, y0, sizeof(float) * N), 0, "%s", types[ti]);
        cr_assert_eq(memcmp(x1, y1, sizeof(float) * N), 0, "%s", types[ti]);
        cr_assert_eq(memcmp(ra, rb, sizeof(float) * N), 0, "%s: RNG position restored", types[ti]);
        /* A state file of another optimizer type is refused. */
        mxp_optimizer *c = NULL;
        cr_assert_eq(mxp_optimizer_create(ti == 1 ? "sgd" : "adam", 0, NULL, NULL, &c), MXP_OK);
        cr_assert_eq(mxp_optimizer_load_states(c, path), MXP_EFORMAT);
        mxp_optimizer_free(c);
        /* Another seed is refused. */
        mxp_random_seed(6);
        cr_assert_eq(mxp_optimizer_create(types[ti], nk, k, v, &c), MXP_OK);
        cr_assert_eq(mxp_optimizer_load_states(c, path), MXP_EINVAL);
        mxp_optimizer_free(c);
        free(w0s), free(w1s), free(ra), free(rb), free(x0), free(x1), free(y0), free(y1);
        mxp_ndarray_release(a0), mxp_ndarray_release(a1), mxp_ndarray_release(b0), mxp_ndarray_release(b1), mxp_ndarray_release(r);
        mxp_optimizer_free(a);
        mxp_optimizer_free(b);
    }
}

Test(train_optimizer, create_errors) {
    mxp_optimizer *o = (mxp_optimizer *)1;
    cr_assert_eq(mxp_optimizer_create("lamb", 0, NULL, NULL, &o), MXP_EINVAL);
    cr_assert_null(o);
    const char *k[] = {"beta1"};
    const char *v[] = {"0.9"};
    cr_assert_eq(mxp_optimizer_create("sgd", 1, k, v, &o), MXP_EINVAL, "beta1 is Adam's");
    cr_assert(strstr(mxp_last_error(), "beta1"), "%s", mxp_last_error());
    const char *k2[] = {"momentum"};
    const char *v2[] = {"abc"};
    cr_assert_eq(mxp_optimizer_create("sgd", 1, k2, v2, &o), MXP_EINVAL);
}

/* The update op kept per parameter index must follow the arrays it is
 * given: the same index with a weight of another shape (and fresh grad
 * arrays every step) still updates exactly w -= lr * g. */
Test(train_optimizer, same_index_new_shape_is_updated_correctly) {
    mxp_optimizer *o = NULL;
    const char *k[] = {"learning_rate"};
    const char *v[] = {"0.5"};
    cr_assert_eq(mxp_optimizer_create("sgd", 1, k, v, &o), MXP_OK, "%s", mxp_last_error());
    float w7[N], g7[N], w3[3] = {1, 2, 3}, g3[3] = {0.25f, -1, 4};
    for (int i = 0; i < N; i++) w7[i] = W0[i], g7[i] = (float)i;
    mxp_ndarray *a = trt_vec(N, w7), *b = trt_vec(3, w3);
    for (int step = 0; step < 2; step++) {
        mxp_ndarray *ga = trt_vec(N, g7), *gb = trt_vec(3, g3);
        cr_assert_eq(mxp_optimizer_update(o, 0, "x_bias", a, ga), MXP_OK, "%s", mxp_last_error());
        cr_assert_eq(mxp_optimizer_update(o, 0, "x_bias", b, gb), MXP_OK, "%s", mxp_last_error());
        mxp_ndarray_release(ga);
        mxp_ndarray_release(gb);
    }
    float *ra = trt_get(a), *rb = trt_get(b);
    for (int i = 0; i < N; i++) cr_assert_float_eq(ra[i], W0[i] - 2 * 0.5 * g7[i], 1e-6, "a[%d]", i);
    for (int i = 0; i < 3; i++) cr_assert_float_eq(rb[i], w3[i] - 2 * 0.5 * g3[i], 1e-6, "b[%d]", i);
    free(ra);
    free(rb);
    mxp_ndarray_release(a);
    mxp_ndarray_release(b);
    mxp_optimizer_free(o);
}
