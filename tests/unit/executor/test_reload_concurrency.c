/* test_reload_concurrency.c — mxp_pack_reload while a bound network trains.
 *
 * A LeNet-shaped net (conv 5x5 -> fx_tag -> relu -> max pool -> conv 3x3 ->
 * relu -> max pool -> flatten -> fc -> softmax) is bound once and trained
 * with SGD on a fixed synthetic 10-class problem.  fx_tag comes from the
 * fixture pack "fx-reload" (tests/fixtures/packs/fx_reload_tag.h): identity,
 * with an aux state holding [build tag, forwards run by that copy of the
 * library].  Mid-training another thread renames a rebuilt library (tag 2)
 * into place and calls mxp_pack_reload; later a broken rebuild (init fails).
 * Checked, with no rebind:
 *   - every step that starts after the reload returned runs the new build
 *     (tag 2, and its own call counter starting at 1), every step before
 *     the reload started the old one;
 *   - the loss keeps falling across the reload (the weights stay);
 *   - mxp_pack_version reports the loaded library's version (2.0.0);
 *   - the broken rebuild is refused with its init error, the old build
 *     stays in service (tag 2, counter continuing), version unchanged.
 * Also: mxp_invoke of the pack's op and loading a symbol that uses it, on
 * other threads during repeated reloads, never see "unknown op" or "no
 * implementation" (issue 12's reload races).  The stall a reload causes
 * is printed (step times), never asserted.  Runs under TSan too. */
#include "../op/op_test_util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>

#define FXR_V1 MXP_BUILD_DIR "/tests/fixtures/reload_v1.so"
#define FXR_V2 MXP_BUILD_DIR "/tests/fixtures/reload_v2.so"
#define FXR_BAD MXP_BUILD_DIR "/tests/fixtures/reload_bad.so"

static char g_dir[64], g_lib[128];

static void copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    cr_assert(in && out, "copy %s -> %s", from, to);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) cr_assert_eq(fwrite(buf, 1, n, out), n);
    fclose(in);
    cr_assert_eq(fclose(out), 0);
}

/* What a rebuild does: write next to the target, rename over it (never
 * overwrite a mapped file in place). */
static void install(const char *so) {
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", g_lib);
    copy_file(so, tmp);
    cr_assert_eq(rename(tmp, g_lib), 0);
}

static void setup(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/mxp-reload-XXXXXX");
    cr_assert(mkdtemp(g_dir));
    snprintf(g_lib, sizeof g_lib, "%s/libfx-reload.so", g_dir);
    copy_file(FXR_V1, g_lib);
    char path[128];
    snprintf(path, sizeof path, "%s/manifest.yaml", g_dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "manifest_version: 1\n"
               "packs:\n"
               "  - name: fx-reload\n"
               "    version: 1.0.0\n"
               "    library: libfx-reload.so\n"
               "    provides:\n"
               "      ops:\n"
               "        - name: fx_tag\n"
               "          impls: [{name: default, device: cpu, rank: 256}]\n");
    fclose(f);
    char env[512];
    snprintf(env, sizeof env, "%s:%s", OPX_BUILD_MANIFEST, path);
    setenv("MXP_MANIFEST", env, 1);
    unsetenv("MXP_PLUGIN_PATH");
    unsetenv("MXP_PACKS");
    setenv("MXP_RELOAD_TIMEOUT_MS", "20000", 1);
}

static void teardown(void) {
    mxp_engine_wait_for_all();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd)) { /* harmless */ }
}

TestSuite(pack_reload, .init = setup, .fini = teardown);

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------ the net */
#define B 16
#define IMG 16
#define CLASSES 10

static const char *net_json =
    "{\"nodes\": ["
    "{\"op\": \"null\", \"name\": \"data\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"conv1_weight\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"conv1_bias\", \"inputs\": []},"
    "{\"op\": \"Convolution\", \"name\": \"conv1\", \"attrs\": {\"kernel\": \"(5, 5)\", \"num_filter\": \"6\"},"
    " \"inputs\": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"tag1_tag\", \"inputs\": []},"
    "{\"op\": \"fx_tag\", \"name\": \"tag1\", \"inputs\": [[3, 0, 0], [4, 0, 0]]},"
    "{\"op\": \"Activation\", \"name\": \"relu1\", \"attrs\": {\"act_type\": \"relu\"}, \"inputs\": [[5, 0, 0]]},"
    "{\"op\": \"Pooling\", \"name\": \"pool1\", \"attrs\": {\"kernel\": \"(2, 2)\", \"pool_type\": \"max\","
    " \"stride\": \"(2, 2)\"}, \"inputs\": [[6, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"conv2_weight\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"conv2_bias\", \"inputs\": []},"
    "{\"op\": \"Convolution\", \"name\": \"conv2\", \"attrs\": {\"kernel\": \"(3, 3)\", \"num_filter\": \"8\"},"
    " \"inputs\": [[7, 0, 0], [8, 0, 0], [9, 0, 0]]},"
    "{\"op\": \"Activation\", \"name\": \"relu2\", \"attrs\": {\"act_type\": \"relu\"}, \"inputs\": [[10, 0, 0]]},"
    "{\"op\": \"Pooling\", \"name\": \"pool2\", \"attrs\": {\"kernel\": \"(2, 2)\", \"pool_type\": \"max\","
    " \"stride\": \"(2, 2)\"}, \"inputs\": [[11, 0, 0]]},"
    "{\"op\": \"Flatten\", \"name\": \"flat\", \"inputs\": [[12, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"fc_weight\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"fc_bias\", \"inputs\": []},"
    "{\"op\": \"FullyConnected\", \"name\": \"fc\", \"attrs\": {\"num_hidden\": \"10\"},"
    " \"inputs\": [[13, 0, 0], [14, 0, 0], [15, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"softmax_label\", \"inputs\": []},"
    "{\"op\": \"SoftmaxOutput\", \"name\": \"softmax\", \"inputs\": [[16, 0, 0], [17, 0, 0]]}"
    "], \"arg_nodes\": [0, 1, 2, 4, 8, 9, 14, 15, 17], \"heads\": [[18, 0, 0]]}";

/* Ten fixed templates; a sample is its class template plus noise. */
#define N_BATCHES 6
static float g_x[N_BATCHES][B * IMG * IMG], g_y[N_BATCHES][B];

static void make_data(void) {
    static double tmpl[CLASSES][IMG * IMG], noise[B * IMG * IMG];
    for (int c = 0; c < CLASSES; c++) opx_fill(tmpl[c], IMG * IMG, 100 + (uint64_t)c, -1, 1);
    for (int b = 0; b < N_BATCHES; b++) {
        opx_fill(noise, B * IMG * IMG, 500 + (uint64_t)b, -0.5, 0.5);
        for (int i = 0; i < B; i++) {
            int c = (b * B + i * 7) % CLASSES;
            g_y[b][i] = (float)c;
            for (int k = 0; k < IMG * IMG; k++) g_x[b][i * IMG * IMG + k] = (float)(tmpl[c][k] + noise[i * IMG * IMG + k]);
        }
    }
}

typedef struct trainer {
    mxp_symbol *sym;
    mxp_executor *ex;
    mxp_optimizer *opt;
    int n_args;
    const char *const *arg_names;
    mxp_ndarray *const *args, *const *grads;
    int data_i, label_i;
    mxp_ndarray *tag; /* tag1's aux state */
} trainer;

static void trainer_init(trainer *t) {
    memset(t, 0, sizeof *t);
    make_data();
    cr_assert_eq(mxp_symbol_load_json(net_json, &t->sym), MXP_OK, "%s", mxp_last_error());
    const char *names[] = {"data", "softmax_label"};
    mxp_shape shapes[2] = {{.ndim = 4, .dims = {B, 1, IMG, IMG}}, {.ndim = 1, .dims = {B}}};
    cr_assert_eq(mxp_executor_simple_bind(t->sym, opx_cpu, 2, names, shapes, MXP_REQ_WRITE, 2, names, &t->ex), MXP_OK,
                 "%s", mxp_last_error());
    int n_aux;
    mxp_ndarray *const *aux;
    cr_assert_eq(mxp_executor_aux(t->ex, &n_aux, &aux), MXP_OK);
    cr_assert_eq(n_aux, 1);
    t->tag = aux[0];
    cr_assert_eq(mxp_symbol_list_arguments(t->sym, &t->n_args, &t->arg_names), MXP_OK);
    int n;
    cr_assert_eq(mxp_executor_args(t->ex, &n, &t->args), MXP_OK);
    cr_assert_eq(mxp_executor_grads(t->ex, &n, &t->grads), MXP_OK);
    t->data_i = t->label_i = -1;
    mxp_init xav = mxp_init_xavier(0, 0, 2.0);
    for (int i = 0; i < t->n_args; i++) {
        if (!strcmp(t->arg_names[i], "data")) t->data_i = i;
        else if (!strcmp(t->arg_names[i], "softmax_label")) t->label_i = i;
        else if (strstr(t->arg_names[i], "bias")) cr_assert_eq(mxp_ndarray_fill(t->args[i], 0.0), MXP_OK);
        else cr_assert_eq(mxp_init_array(&xav, t->args[i]), MXP_OK, "%s", mxp_last_error());
    }
    cr_assert(t->data_i >= 0 && t->label_i >= 0);
    const char *k[] = {"learning_rate", "momentum"}, *v[] = {"0.01", "0.9"};
    cr_assert_eq(mxp_optimizer_create("sgd", 2, k, v, &t->opt), MXP_OK, "%s", mxp_last_error());
}

static void trainer_free(trainer *t) {
    mxp_executor_free(t->ex);
    mxp_optimizer_free(t->opt);
    mxp_symbol_release(t->sym);
}

/* One SGD step on batch b; returns the batch's mean cross-entropy (from the
 * forward of this step) and the tag aux [build, count]. */
static double train_step(trainer *t, int b, double tag[2]) {
    cr_assert_eq(mxp_ndarray_sync_copy_from(t->args[t->data_i], g_x[b], sizeof g_x[b]), MXP_OK);
    cr_assert_eq(mxp_ndarray_sync_copy_from(t->args[t->label_i], g_y[b], sizeof g_y[b]), MXP_OK);
    cr_assert_eq(mxp_executor_forward(t->ex, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_backward(t->ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    for (int i = 0; i < t->n_args; i++)
        if (t->grads[i])
            cr_assert_eq(mxp_optimizer_update(t->opt, i, t->arg_names[i], t->args[i], t->grads[i]), MXP_OK, "%s",
                         mxp_last_error());
    int n_out;
    mxp_ndarray *const *outs;
    cr_assert_eq(mxp_executor_outputs(t->ex, &n_out, &outs), MXP_OK);
    float prob[B * CLASSES];
    cr_assert_eq(mxp_ndarray_sync_copy_to(outs[0], prob, sizeof prob), MXP_OK, "%s", mxp_last_error());
    double loss = 0;
    for (int i = 0; i < B; i++) loss -= log(fmax(prob[i * CLASSES + (int)g_y[b][i]], 1e-12));
    float tg[2];
    cr_assert_eq(mxp_ndarray_sync_copy_to(t->tag, tg, sizeof tg), MXP_OK, "%s", mxp_last_error());
    tag[0] = tg[0];
    tag[1] = tg[1];
    return loss / B;
}

/* ------------------------------------------------------------ reloader */
typedef struct reloader {
    atomic_int go;        /* 1: install v2 and reload; 2: install the broken build and reload */
    atomic_int started, done;
    int rc;
    char err[1024];
    double ms;
} reloader;

static void *reload_main(void *arg) {
    reloader *r = arg;
    while (!atomic_load(&r->go)) sched_yield();
    install(atomic_load(&r->go) == 1 ? FXR_V2 : FXR_BAD);
    atomic_store(&r->started, 1);
    double t0 = now_ms();
    r->rc = mxp_pack_reload("fx-reload");
    r->ms = now_ms() - t0;
    snprintf(r->err, sizeof r->err, "%s", r->rc ? mxp_last_error() : "");
    atomic_store(&r->done, 1);
    return NULL;
}

static void median_max(const double *v, int n, double *med, double *max) {
    double *s = malloc((size_t)n * sizeof *s + 1);
    cr_assert(s);
    memcpy(s, v, (size_t)n * sizeof *v);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && s[j] < s[j - 1]; j--) {
            double x = s[j];
            s[j] = s[j - 1];
            s[j - 1] = x;
        }
    *med = s[n / 2];
    *max = s[n - 1];
    free(s);
}

/* Train while a reload (kind 1: good, 2: broken) runs on another thread,
 * from step `at`: at least `steps` steps, and on until `tail` steps have
 * started after the reload returned (at most MAX_STEPS: a reload that never
 * returns fails the test).  Returns the index of the first step that
 * started after the reload returned; *n_steps the steps run. */
#define MAX_STEPS 2000
static int train_through_reload(trainer *t, int kind, int at, int steps, int tail, double *loss, double (*tags)[2],
                                int *after, double *step_ms, reloader *r, int *n_steps) {
    memset(r, 0, sizeof *r);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, reload_main, r), 0);
    int first_after = -1, s;
    for (s = 0; s < MAX_STEPS && (s < steps || first_after < 0 || s < first_after + tail); s++) {
        if (s == at) atomic_store(&r->go, kind); /* and keep training meanwhile */
        after[s] = atomic_load(&r->done);
        if (after[s] && first_after < 0) first_after = s;
        double t0 = now_ms();
        loss[s] = train_step(t, s % N_BATCHES, tags[s]);
        step_ms[s] = now_ms() - t0;
    }
    pthread_join(th, NULL);
    *n_steps = s;
    return first_after;
}

Test(pack_reload, rebuilt_pack_swapped_in_mid_training_and_a_broken_one_rolled_back, .timeout = 300) {
    trainer t;
    trainer_init(&t);
    const mxp_pack *pk = mxp_pack_find("fx-reload");
    cr_assert(pk);
    enum { AT = 10 };
    static double loss[MAX_STEPS], tags[MAX_STEPS][2], ms[MAX_STEPS];
    static int after[MAX_STEPS];
    reloader r;
    int STEPS;
    int first = train_through_reload(&t, 1, AT, 30, 12, loss, tags, after, ms, &r, &STEPS);
    cr_assert_eq(r.rc, MXP_OK, "reload: %s", r.err);
    cr_assert(first >= AT && first < STEPS, "the reload finished within the run (first step after: %d)", first);
    int first2 = -1;
    for (int s = 0; s < STEPS; s++) {
        if (s < AT) cr_expect_eq(tags[s][0], 1.0, "step %d ran build %g", s, tags[s][0]);
        if (after[s]) cr_expect_eq(tags[s][0], 2.0, "step %d started after the reload but ran build %g", s, tags[s][0]);
        if (tags[s][0] == 2.0 && first2 < 0) first2 = s;
        if (first2 >= 0) cr_expect_eq(tags[s][0], 2.0, "step %d went back to build %g", s, tags[s][0]);
    }
    cr_assert(first2 >= 0 && first2 <= first);
    fprintf(stderr, "pack_reload: reload requested before step %d, new build from step %d, reload returned before step %d\n",
            AT, first2, first);
    first = first2;
    cr_expect_eq(tags[first][1], 1.0, "the new build's counter starts afresh (got %g)", tags[first][1]);
    cr_expect_eq(tags[STEPS - 1][1], (double)(STEPS - first), "then counts every step");
    cr_expect_str_eq(mxp_pack_version(pk), "2.0.0");
    /* Loss keeps falling: the last steps are below those before the reload,
     * which are below the first ones (the weights were kept). */
    double early = 0, mid = 0, late = 0;
    for (int s = 0; s < N_BATCHES; s++) {
        early += loss[s];
        mid += loss[AT - N_BATCHES + s];
        late += loss[STEPS - N_BATCHES + s];
    }
    cr_expect_lt(mid, early, "loss fell before the reload (%g -> %g)", early / N_BATCHES, mid / N_BATCHES);
    cr_expect_lt(late, mid, "loss kept falling after the reload (%g -> %g)", mid / N_BATCHES, late / N_BATCHES);
    cr_expect_lt(loss[first], loss[0], "no restart from the initial weights");
    double med, max;
    median_max(ms + 1, STEPS - 1, &med, &max); /* step 0 loads the packs */
    fprintf(stderr, "pack_reload: mxp_pack_reload took %.2f ms; step times after step 0: median %.2f ms, longest "
            "%.2f ms; the first step on the new build (%d) took %.2f ms, the one before %.2f ms\n", r.ms, med, max,
            first, ms[first], ms[first - 1]);

    /* A broken rebuild: refused, the running build stays. */
    int n2;
    first = train_through_reload(&t, 2, 3, 12, 3, loss, tags, after, ms, &r, &n2);
    cr_assert_neq(r.rc, MXP_OK, "a broken rebuild must be refused");
    cr_expect(strstr(r.err, "deliberately broken") && strstr(r.err, "stays in service"), "%s", r.err);
    for (int s = 0; s < n2; s++) cr_expect_eq(tags[s][0], 2.0, "step %d ran build %g after a failed reload", s, tags[s][0]);
    cr_expect_eq(tags[n2 - 1][1], tags[0][1] + n2 - 1, "the running build's counter continued");
    cr_expect_str_eq(mxp_pack_version(pk), "2.0.0");
    /* And the next good rebuild goes in. */
    install(FXR_V1);
    cr_assert_eq(mxp_pack_reload("fx-reload"), MXP_OK, "%s", mxp_last_error());
    double tg[2];
    train_step(&t, 0, tg);
    cr_expect_eq(tg[0], 1.0);
    cr_expect_eq(tg[1], 1.0);
    cr_expect_str_eq(mxp_pack_version(pk), "1.0.0");
    trainer_free(&t);
}

/* An idle bound executor (not running) does not hold a reload up. */
Test(pack_reload, idle_executor_does_not_block, .timeout = 120) {
    trainer t;
    trainer_init(&t);
    double tg[2];
    train_step(&t, 0, tg);
    cr_expect_eq(tg[0], 1.0);
    setenv("MXP_RELOAD_TIMEOUT_MS", "5000", 1);
    install(FXR_V2);
    cr_assert_eq(mxp_pack_reload("fx-reload"), MXP_OK, "%s", mxp_last_error());
    train_step(&t, 1, tg);
    cr_expect_eq(tg[0], 2.0);
    trainer_free(&t);
}

/* ------------------------------------------------------------ races */
typedef struct user {
    atomic_int stop;
    int failures;
    long runs;
    char err[512];
    int mode; /* 0: mxp_invoke fx_tag; 1: load a symbol using fx_tag */
} user;

static void *user_main(void *arg) {
    user *u = arg;
    int64_t shape[1] = {4};
    while (!atomic_load(&u->stop)) {
        int rc;
        if (u->mode == 0) {
            mxp_ndarray *x = NULL, *outs[2] = {NULL, NULL};
            rc = mxp_ndarray_create(shape, 1, MXP_DTYPE_F32, opx_cpu, &x);
            if (!rc) rc = mxp_ndarray_fill(x, 3.0);
            int n_out = 2;
            if (!rc) rc = mxp_invoke("fx_tag", 1, &x, &n_out, outs, 0, NULL, NULL);
            if (!rc) rc = mxp_ndarray_wait_to_read(outs[0]);
            float v[4] = {0};
            if (!rc) rc = mxp_ndarray_sync_copy_to(outs[0], v, sizeof v);
            if (!rc && v[2] != 3.0f) rc = MXP_EINTERNAL; /* mxp_last_error() is then stale: say so */
            if (rc == MXP_EINTERNAL && !u->failures) snprintf(u->err, sizeof u->err, "fx_tag gave %g, not 3", v[2]);
            mxp_ndarray_release(x);
            mxp_ndarray_release(outs[0]);
            mxp_ndarray_release(outs[1]);
        } else {
            mxp_symbol *s = NULL;
            rc = mxp_symbol_load_json(net_json, &s);
            mxp_symbol_release(s);
        }
        if (rc && !u->failures++ && rc != MXP_EINTERNAL) snprintf(u->err, sizeof u->err, "%s", mxp_last_error());
        u->runs++;
    }
    return NULL;
}

Test(pack_reload, invoke_and_symbol_load_during_reloads, .timeout = 300) {
    user u[2];
    pthread_t th[2];
    memset(u, 0, sizeof u);
    for (int i = 0; i < 2; i++) {
        u[i].mode = i;
        cr_assert_eq(pthread_create(&th[i], NULL, user_main, &u[i]), 0);
    }
    for (int k = 0; k < 8; k++) {
        install(k % 2 ? FXR_V1 : FXR_V2);
        cr_expect_eq(mxp_pack_reload("fx-reload"), MXP_OK, "reload %d: %s", k, mxp_last_error());
    }
    for (int i = 0; i < 2; i++) {
        atomic_store(&u[i].stop, 1);
        pthread_join(th[i], NULL);
    }
    for (int i = 0; i < 2; i++) {
        cr_expect_eq(u[i].failures, 0, "%s: %d of %ld failed, first: %s", i ? "symbol load" : "invoke",
                     u[i].failures, u[i].runs, u[i].err);
        cr_expect_gt(u[i].runs, 0);
    }
}
