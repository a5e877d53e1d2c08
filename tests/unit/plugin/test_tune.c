/* test_tune.c — the 'tune' policy (tune.c) on the plugin_sel fixture's
 * psel_scale (impls fast/mid/slow; fast refuses > 100 elements): the first
 * choice for a signature is timed and saved to $XDG_CACHE_HOME/mxplug/
 * tune.yaml with the fastest as its choice; the same signature is then
 * answered from memory, and a fresh process (the mxplug CLI, with
 * MXP_TUNE_NO_TIMING=1) reads the choice from the file; the file is the
 * source of truth (an edited choice is obeyed); a corrupt file is ignored
 * with a warning naming file:line and rewritten; explain shows the result.
 * A training configuration is timed with only the input gradients the
 * step asks for (psel_wmul: the pick flips when the data gradient is not
 * wanted, and the key carries the mask), which a bound executor sets.
 * Timing values themselves are never asserted. */
#include "plugin_test_util.h"

#include "plugin/plugin_impl.h"

#include <mxplug/executor.h>
#include <mxplug/symbol.h>

#include <sys/stat.h>

static char *g_dir;
static char g_cache[1024], g_file[1100];

static void setup(void) {
    g_dir = tu_tmpdir();
    char *m = tu_psel_manifest(g_dir);
    setenv("MXP_MANIFEST", m, 1);
    free(m);
    unsetenv("MXP_PLUGIN_PATH");
    unsetenv("MXP_PACKS");
    unsetenv("MXP_IMPL_psel_scale");
    unsetenv("MXP_TUNE_NO_TIMING");
    snprintf(g_cache, sizeof g_cache, "%s/cache", g_dir);
    snprintf(g_file, sizeof g_file, "%s/mxplug/tune.yaml", g_cache);
    setenv("XDG_CACHE_HOME", g_cache, 1);
    mxp__tune_reset();
    cr_assert_eq(mxp_registry_init(), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_op_set_impl("psel_scale", "tune"), MXP_OK, "%s", mxp_last_error());
}
static void teardown(void) {
    mxp_log_set_sink(NULL, NULL);
    mxp_registry_shutdown();
    mxp__tune_reset();
    unsetenv("XDG_CACHE_HOME");
    tu_rmrf(g_dir);
    free(g_dir);
}
TestSuite(tune, .init = setup, .fini = teardown);

/* Select op's impl for q (tune runs here on a cache miss), free params;
 * the chosen impl's name, in a buffer the next call overwrites. */
static const char *selected_name(struct mxp_op *op, const mxp_op_def *def, void *params, const mxp_select_query *q) {
    mxp_impl_ref *ref = NULL;
    int rc = mxp__select_impl(op, q, &ref, NULL);
    mxp__op_params_free(def, params);
    cr_assert_eq(rc, MXP_OK, "%s", mxp_last_error());
    static char name[64];
    snprintf(name, sizeof name, "%s", ref->impl->impl_name);
    mxp__impl_ref_release(ref);
    return name;
}

/* psel_scale (factor 2) on n floats on the CPU: its op, definition,
 * params (the caller frees them) and a query over them (q points into s). */
typedef struct scale_query {
    struct mxp_op *op;
    const mxp_op_def *def;
    void *params;
    mxp_shape in, out;
    int32_t dt;
    mxp_select_query q;
} scale_query;

static void scale_query_init(scale_query *s, int64_t n) {
    s->op = mxp__registry_find_op("psel_scale");
    cr_assert(s->op);
    cr_assert_eq(mxp__op_ensure_def(s->op, &s->def), MXP_OK, "%s", mxp_last_error());
    const char *k[] = {"factor"}, *v[] = {"2"};
    cr_assert_eq(mxp__op_params_new(s->def, k, v, 1, &s->params), MXP_OK, "%s", mxp_last_error());
    s->in = s->out = (mxp_shape){1, 0, {n}};
    s->dt = MXP_DTYPE_F32;
    s->q = (mxp_select_query){s->params, {MXP_DEV_CPU, 0}, "cpu", 1, 1, 0, 0, &s->in, &s->out, NULL, &s->dt, &s->dt,
                              NULL, NULL, NULL};
}

static const char *choose(int64_t n) {
    scale_query s;
    scale_query_init(&s, n);
    return selected_name(s.op, s.def, s.params, &s.q);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = calloc(1, 1 << 16);
    size_t n = fread(b, 1, (1 << 16) - 1, f);
    b[n] = '\0';
    fclose(f);
    return b;
}

/* The times_ms of the (only) entry for n elements, from the file. */
static int read_times(const char *text, double *mid, double *slow, char *choice) {
    const char *c = strstr(text, "choice: \"");
    const char *t = strstr(text, "times_ms: {");
    if (!c || !t) return -1;
    sscanf(c + 9, "%63[^\"]", choice);
    const char *m = strstr(t, "\"mid\": "), *s = strstr(t, "\"slow\": ");
    if (!m || !s) return -1;
    *mid = strtod(m + 7, NULL);
    *slow = strtod(s + 8, NULL);
    return 0;
}

Test(tune, first_use_times_and_saves_the_fastest_then_reuses_it) {
    unsigned long t0 = mxp__tune_timing_runs();
    const char *got = choose(5000);
    char first[64];
    snprintf(first, sizeof first, "%s", got);
    unsigned long t1 = mxp__tune_timing_runs();
    /* Two candidates (fast refuses 5000 elements), two passes of warm-up +
     * 5 runs each, up to 41 for an op this fast (tune.c: TUNE_MAX_RUNS);
     * slow (16x mid's work) is dropped after the first pass. */
    cr_expect(t1 - t0 >= 3 * (1 + 5) && t1 - t0 <= 2 * 2 * (1 + 41), "timed %lu forward calls", t1 - t0);
    char *text = slurp(g_file);
    cr_assert(text, "no cache file at %s", g_file);
    double mid, slow;
    char choice[64] = "";
    cr_assert_eq(read_times(text, &mid, &slow, choice), 0, "%s", text);
    cr_expect_str_eq(choice, first);
    /* The cache prints times rounded; equal printed times may hide a
     * difference tune saw, so a tie accepts either choice. */
    if (mid != slow)
        cr_expect_str_eq(choice, mid < slow ? "mid" : "slow", "mid %g ms, slow %g ms", mid, slow);
    else
        cr_expect(!strcmp(choice, "mid") || !strcmp(choice, "slow"), "choice '%s' at a tie (%g ms)", choice, mid);
    cr_expect(strstr(text, "psel_scale|cpu:0|train=0|threads="), "%s", text);
    cr_expect(strstr(text, "impls=mid,slow|params=factor=2"), "%s", text);
    cr_expect(strstr(text, "in=float32(5000)|out=float32(5000)"), "%s", text);
    cr_expect(!strstr(text, "\"fast\""), "fast refused and must not be timed: %s", text);
    free(text);
    /* Same signature: no timing. */
    cr_expect_str_eq(choose(5000), first);
    cr_expect_eq(mxp__tune_timing_runs(), t1);
    /* Another signature: timed again, and both entries are kept. */
    choose(6000);
    cr_expect_gt(mxp__tune_timing_runs(), t1);
    text = slurp(g_file);
    cr_expect(strstr(text, "float32(5000)") && strstr(text, "float32(6000)"), "%s", text);
    free(text);
}

/* Replace the choice in the file (the only entry) by `to`. */
static void edit_choice(const char *to) {
    char *text = slurp(g_file);
    cr_assert(text);
    char *c = strstr(text, "choice: \"");
    cr_assert(c);
    char *end = strchr(c + 9, '"');
    FILE *f = fopen(g_file, "w");
    cr_assert(f);
    fprintf(f, "%.*s%s%s", (int)(c + 9 - text), text, to, end);
    fclose(f);
    free(text);
}

Test(tune, the_file_is_read_by_a_fresh_process_without_timing) {
    char first[64];
    snprintf(first, sizeof first, "%s", choose(5000));
    /* Make the file say the other one: only reading it can give that. */
    const char *other = !strcmp(first, "mid") ? "slow" : "mid";
    edit_choice(other);
    /* This process, cache forgotten: reads the file, times nothing. */
    mxp__tune_reset();
    unsigned long t = mxp__tune_timing_runs();
    cr_expect_str_eq(choose(5000), other);
    cr_expect_eq(mxp__tune_timing_runs(), t);
    /* A second process, where timing is an error-free no-op that would
     * fall back to auto ('mid'): it must report the cached choice. */
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "MXP_IMPL_psel_scale=tune MXP_TUNE_NO_TIMING=1 '%s/bin/mxplug' info psel_scale --why "
             "--shape data=5000 --param factor=2 2>&1",
             MXP_BUILD_DIR);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    char out[8192];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    cr_expect_eq(pclose(p), 0, "%s", out);
    char want[128];
    snprintf(want, sizeof want, "%-12s CHOSEN (tune: '%s' from the cache", other, other);
    cr_expect(strstr(out, want), "want '%s' in:\n%s", want, out);
    /* And with the cache gone, the no-timing process falls back to auto. */
    cr_assert_eq(unlink(g_file), 0);
    p = popen(cmd, "r");
    cr_assert(p);
    n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    pclose(p);
    cr_expect(strstr(out, "not timed (timing forbidden by MXP_TUNE_NO_TIMING"), "%s", out);
    cr_expect(strstr(out, "mid          CHOSEN"), "%s", out);
}

static char g_warn[2048];
static void sink(int level, const char *cat, const char *msg, void *user) {
    (void)cat;
    (void)user;
    if (level == MXP_LOG_WARN && strstr(msg, "tune cache")) snprintf(g_warn, sizeof g_warn, "%s", msg);
}

Test(tune, corrupt_cache_is_reported_ignored_and_rewritten) {
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/mxplug", g_cache);
    cr_assert_eq(mkdir(g_cache, 0755), 0);
    cr_assert_eq(mkdir(dir, 0755), 0);
    FILE *f = fopen(g_file, "w");
    cr_assert(f);
    fputs("version: 1\nentries:\n  - op: psel_scale\n    signature: [unclosed\n", f);
    fclose(f);
    g_warn[0] = '\0';
    mxp_log_set_sink(sink, NULL);
    unsigned long t = mxp__tune_timing_runs();
    char got[64]; /* a copy: choose's buffer is rewritten by the next call */
    snprintf(got, sizeof got, "%s", choose(5000));
    mxp_log_set_sink(NULL, NULL);
    cr_expect(!strcmp(got, "mid") || !strcmp(got, "slow"), "%s", got);
    cr_expect_gt(mxp__tune_timing_runs(), t, "a corrupt cache must not count as a hit");
    char want[1200];
    snprintf(want, sizeof want, "%s:5:", g_file);
    cr_expect(strstr(g_warn, want), "warning '%s' should name %s", g_warn, want);
    /* Rewritten as a valid cache holding the new result. */
    mxp__tune_reset();
    t = mxp__tune_timing_runs();
    cr_expect_str_eq(choose(5000), got);
    cr_expect_eq(mxp__tune_timing_runs(), t);
    /* A structurally wrong file (valid YAML) names its line too. */
    f = fopen(g_file, "w");
    fputs("version: 1\nentries:\n  - op: psel_scale\n    choice: mid\n    times_ms: {mid: fast}\n", f);
    fclose(f);
    mxp__tune_reset();
    g_warn[0] = '\0';
    mxp_log_set_sink(sink, NULL);
    choose(5000);
    mxp_log_set_sink(NULL, NULL);
    snprintf(want, sizeof want, "%s:5:", g_file);
    cr_expect(strstr(g_warn, want), "warning '%s' should name %s", g_warn, want);
}

/* Fallback answers (ABI 1.3) are tune candidates, listed after the
 * outright ones: untimed (MXP_TUNE_NO_TIMING, no cache), tune takes the
 * first outright candidate as auto would, not the higher-ranked fallback. */
Test(tune, fallbacks_are_candidates_after_the_outright_ones) {
    setenv("MXP_TUNE_NO_TIMING", "1", 1);
    char *rep = NULL;
    const char *shapes[] = {"data=80"};
    const char *k[] = {"factor"}, *v[] = {"2"};
    cr_assert_eq(mxp_op_explain("psel_scale", "cpu", shapes, 1, k, v, 1, &rep), MXP_OK, "%s", mxp_last_error());
    unsetenv("MXP_TUNE_NO_TIMING");
    cr_expect(strstr(rep, "accepts as a fallback: a tune candidate"), "%s", rep);
    const char *ch = strstr(rep, "CHOSEN"), *line = ch;
    cr_assert(ch, "%s", rep);
    while (line > rep && line[-1] != '\n') line--;
    while (*line == ' ') line++;
    cr_expect(!strncmp(line, "mid ", 4), "the untimed choice should be mid: %s", rep);
    free(rep);
}

Test(tune, explain_reports_the_tune_result) {
    char *rep = NULL;
    const char *shapes[] = {"data=5000"};
    const char *k[] = {"factor"}, *v[] = {"2"};
    cr_assert_eq(mxp_op_explain("psel_scale", "cpu", shapes, 1, k, v, 1, &rep), MXP_OK, "%s", mxp_last_error());
    cr_expect(strstr(rep, "policy 'tune' (from api)"), "%s", rep);
    cr_expect(strstr(rep, "fast") && strstr(rep, "refused"), "%s", rep);
    cr_expect(strstr(rep, "accepts: a tune candidate"), "%s", rep);
    cr_expect(strstr(rep, "CHOSEN (tune: '") && strstr(rep, "timed now (mid "), "%s", rep);
    /* slow does 16x mid's work: over twice the fastest, so not re-timed;
     * the saved times agree with that. */
    cr_expect(strstr(rep, "timed in the first pass only (over 2x the fastest): 'slow'"), "%s", rep);
    char *text = slurp(g_file);
    double mid, slow;
    char choice[64] = "";
    cr_assert(text && read_times(text, &mid, &slow, choice) == 0, "%s", text ? text : "(no cache file)");
    cr_expect(slow > 2 * mid && !strcmp(choice, "mid"), "mid %g ms, slow %g ms, choice %s", mid, slow, choice);
    free(text);
    free(rep);
    cr_assert_eq(mxp_op_explain("psel_scale", "cpu", shapes, 1, k, v, 1, &rep), MXP_OK, "%s", mxp_last_error());
    cr_expect(strstr(rep, "from the cache"), "%s", rep);
    free(rep);
    /* One candidate only: nothing to time. */
    const char *v0[] = {"0"}; /* mid refuses factor 0, fast > 100 elements */
    cr_assert_eq(mxp_op_explain("psel_scale", "cpu", shapes, 1, k, v0, 1, &rep), MXP_OK, "%s", mxp_last_error());
    cr_expect(strstr(rep, "not timed (only one candidate accepts"), "%s", rep);
    free(rep);
}

/* Tune times on scratch aligned like the runtime's storage (64 bytes):
 * psel_scale's impls refuse anything else, so a misaligned scratch tensor
 * would leave both candidates untimed and nothing saved.  2^17 floats:
 * above malloc's mmap threshold, where calloc's blocks sit 16 bytes past
 * a page boundary (what misjudged the 1x1 convolution's kernels). */
Test(tune, candidates_are_timed_on_64_byte_aligned_scratch) {
    char *rep = NULL;
    const char *shapes[] = {"data=131072"};
    const char *k[] = {"factor"}, *v[] = {"2"};
    cr_assert_eq(mxp_op_explain("psel_scale", "cpu", shapes, 1, k, v, 1, &rep), MXP_OK, "%s", mxp_last_error());
    cr_expect(strstr(rep, "timed now (mid "), "%s", rep);
    cr_expect(!strstr(rep, "not timed") && !strstr(rep, "aligned"), "%s", rep);
    char *text = slurp(g_file);
    double mid = 0, slow = 0;
    char choice[64] = "";
    cr_assert(text && read_times(text, &mid, &slow, choice) == 0, "%s", text ? text : "(no cache file)");
    cr_expect(mid > 0 && slow > 0 && !strcmp(choice, "mid"), "mid %g ms, slow %g ms, choice %s", mid, slow, choice);
    free(text);
    free(rep);
}

/* The drop after the first pass goes by a candidate's FASTEST run, not its
 * median: slow with PSEL_SLOW_NOISE=1 does mid's work in 2 runs of 5, so
 * its median is ~16x mid's but its fastest runs are mid's.  It must be
 * timed again (load hitting most runs of the real winner must not get it
 * dropped unseen), and its median still loses. */
Test(tune, a_candidate_with_fast_runs_is_timed_again_despite_a_slow_median) {
    setenv("PSEL_SLOW_NOISE", "1", 1);
    char *rep = NULL;
    const char *shapes[] = {"data=20000"};
    const char *k[] = {"factor"}, *v[] = {"2"};
    int rc = mxp_op_explain("psel_scale", "cpu", shapes, 1, k, v, 1, &rep);
    unsetenv("PSEL_SLOW_NOISE");
    cr_assert_eq(rc, MXP_OK, "%s", mxp_last_error());
    cr_expect(strstr(rep, "timed now (mid "), "%s", rep);
    cr_expect(!strstr(rep, "timed in the first pass only"), "slow has fast runs and must be timed again: %s", rep);
    char *text = slurp(g_file);
    double mid = 0, slow = 0;
    char choice[64] = "";
    cr_assert(text && read_times(text, &mid, &slow, choice) == 0, "%s", text ? text : "(no cache file)");
    cr_expect(slow > mid && !strcmp(choice, "mid"), "mid %g ms, slow %g ms, choice %s", mid, slow, choice);
    free(text);
    free(rep);
}

/* Two candidates within 2x of each other after the passes are timed again
 * run by run in turn, and the median ratio of those rounds decides: slow
 * with PSEL_SLOW_NOISE=2 does mid's work, so the duel always runs; the
 * note names the pair and the ratio, and the choice must follow the ratio
 * (a tie keeps the auto order, mid first). */
Test(tune, a_close_call_is_decided_by_runs_in_turn) {
    setenv("PSEL_SLOW_NOISE", "2", 1);
    char *rep = NULL;
    const char *shapes[] = {"data=20000"};
    const char *k[] = {"factor"}, *v[] = {"2"};
    unsigned long t0 = mxp__tune_timing_runs();
    int rc = mxp_op_explain("psel_scale", "cpu", shapes, 1, k, v, 1, &rep);
    unsigned long runs = mxp__tune_timing_runs() - t0;
    unsetenv("PSEL_SLOW_NOISE");
    cr_assert_eq(rc, MXP_OK, "%s", mxp_last_error());
    const char *d = strstr(rep, "timed again in turn, ");
    cr_assert(d, "%s", rep);
    char first[16] = "", second[16] = "";
    int rounds = 0;
    double ratio = 0;
    const char *pair = d;
    while (pair > rep && strncmp(pair, "; '", 3)) pair--;
    cr_assert_eq(sscanf(pair, "; '%15[a-z]' and '%15[a-z]' timed again in turn, %d rounds: median ratio %lf", first, second,
                        &rounds, &ratio), 4, "%s", rep);
    cr_expect(rounds >= 5, "%d rounds: %s", rounds, rep);
    /* 2 candidates x 2 passes of a warm-up + >= 5 runs, then 2 warm-ups + 2 per round */
    cr_expect(runs >= 4 * 6 + 2 + 2 * (unsigned long)rounds, "%lu timing runs, %d rounds", runs, rounds);
    char *text = slurp(g_file);
    double mid = 0, slow = 0;
    char choice[64] = "";
    cr_assert(text && read_times(text, &mid, &slow, choice) == 0, "%s", text ? text : "(no cache file)");
    const char *want = ratio > 1 ? second : ratio < 1 ? first : "mid";
    cr_expect_str_eq(choice, want, "ratio %g of '%s' to '%s': %s", ratio, first, second, rep);
    free(text);
    free(rep);
}

/* The duel itself measures: slow really does 16x mid's work, so mid/slow
 * must come out well below 1 and slow/mid well above, whichever goes
 * first. */
static mxp_impl_ref *ref_named(struct mxp_op *op, mxp_select_query *q, const char *name) {
    q->policy = name;
    mxp_impl_ref *ref = NULL;
    cr_assert_eq(mxp__select_impl(op, q, &ref, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_str_eq(ref->impl->impl_name, name);
    return ref;
}

Test(tune, a_duel_measures_the_ratio_of_the_two_candidates) {
    scale_query s;
    scale_query_init(&s, 20000);
    mxp_impl_ref *mid = ref_named(s.op, &s.q, "mid"), *slow = ref_named(s.op, &s.q, "slow");
    s.q.policy = NULL;
    double r1 = 0, r2 = 0, a = 0, b = 0;
    int n1 = 0, n2 = 0;
    cr_assert_eq(mxp__tune_duel("psel_scale", mid, slow, &s.q, &r1, &a, &b, &n1), MXP_OK, "%s", mxp_last_error());
    cr_expect(n1 >= 5 && a > 0 && b > a, "%d rounds, mid %g ms, slow %g ms", n1, a, b);
    cr_assert_eq(mxp__tune_duel("psel_scale", slow, mid, &s.q, &r2, &a, &b, &n2), MXP_OK, "%s", mxp_last_error());
    cr_expect(r1 < 0.5 && r2 > 2, "mid/slow %g, slow/mid %g", r1, r2);
    mxp__impl_ref_release(mid);
    mxp__impl_ref_release(slow);
    mxp__op_params_free(s.def, s.params);
}

/* ------------------------------------------------------------ input-gradient mask
 * psel_wmul's "dgrad_slow" (cheap forward and weight gradient, data
 * gradient 512x the work) against "fwd_slow" (forward 32x, cheap
 * gradients): forward + every gradient costs about 514 vs 34 passes,
 * forward + the weight gradient only 2 vs 33.  A training step that never needs the data
 * gradient (a first layer) must be tuned on the latter. */
static const char *choose_wmul(int64_t n, const uint8_t *in_grad) {
    struct mxp_op *op = mxp__registry_find_op("psel_wmul");
    cr_assert(op);
    const mxp_op_def *def;
    cr_assert_eq(mxp__op_ensure_def(op, &def), MXP_OK, "%s", mxp_last_error());
    void *params = NULL;
    cr_assert_eq(mxp__op_params_new(def, NULL, NULL, 0, &params), MXP_OK, "%s", mxp_last_error());
    mxp_shape sh[2] = {{1, 0, {n}}, {1, 0, {n}}};
    int32_t dt[2] = {MXP_DTYPE_F32, MXP_DTYPE_F32};
    mxp_select_query q = {params, {MXP_DEV_CPU, 0}, "cpu", 2, 1, 0, 1, sh, sh, NULL, dt, dt, NULL, NULL, in_grad};
    return selected_name(op, def, params, &q);
}

static int count_of(const char *text, const char *what) {
    int c = 0;
    for (const char *p = text; (p = strstr(p, what)); p++) c++;
    return c;
}

Test(tune, training_is_timed_with_only_the_input_gradients_the_step_asks_for) {
    cr_assert_eq(mxp_op_set_impl("psel_wmul", "tune"), MXP_OK, "%s", mxp_last_error());
    const uint8_t all[2] = {1, 1}, weight_only[2] = {0, 1};
    char with_all[64], without_data[64];
    snprintf(with_all, sizeof with_all, "%s", choose_wmul(16384, NULL));
    snprintf(without_data, sizeof without_data, "%s", choose_wmul(16384, weight_only));
    cr_expect_str_eq(with_all, "fwd_slow", "forward + both gradients: 514 vs 34 passes of work");
    cr_expect_str_eq(without_data, "dgrad_slow", "forward + weight gradient: 2 vs 33 passes of work");
    char *text = slurp(g_file);
    cr_assert(text, "no cache file at %s", g_file);
    /* Two entries; only the reduced one carries the mask in its key. */
    cr_expect_eq(count_of(text, "psel_wmul|cpu:0|train=1|"), 2, "%s", text);
    cr_expect_eq(count_of(text, "|in_grad="), 1, "%s", text);
    cr_expect(strstr(text, "|aux=|in_grad=0,1"), "%s", text);
    free(text);
    /* "All" spelled out is the unmasked key: answered from the cache. */
    unsigned long t0 = mxp__tune_timing_runs();
    cr_expect_str_eq(choose_wmul(16384, all), with_all);
    cr_expect_eq(mxp__tune_timing_runs(), t0, "an all-gradients mask must hit the unmasked entry");
}

/* A bound executor whose `data` has no gradient tells the node before its
 * first bind: the tune entry is the reduced one. */
Test(tune, the_executor_tells_tune_which_input_gradients_backward_writes) {
    cr_assert_eq(mxp_op_set_impl("psel_wmul", "tune"), MXP_OK, "%s", mxp_last_error());
    const char *json = "{\"nodes\": ["
                       "{\"op\": \"null\", \"name\": \"data\", \"inputs\": []},"
                       "{\"op\": \"null\", \"name\": \"w\", \"inputs\": []},"
                       "{\"op\": \"psel_wmul\", \"name\": \"m\", \"inputs\": [[0, 0, 0], [1, 0, 0]]}"
                       "], \"arg_nodes\": [0, 1], \"heads\": [[2, 0, 0]]}";
    mxp_symbol *s = NULL;
    cr_assert_eq(mxp_symbol_load_json(json, &s), MXP_OK, "%s", mxp_last_error());
    const char *names[] = {"data"};
    mxp_shape shapes[1] = {{.ndim = 1, .dims = {4096}}};
    mxp_executor *ex = NULL;
    cr_assert_eq(mxp_executor_simple_bind(s, (mxp_device){MXP_DEV_CPU, 0}, 1, names, shapes, MXP_REQ_WRITE, 1, names,
                                          &ex),
                 MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    char *text = slurp(g_file);
    cr_assert(text, "no cache file at %s", g_file);
    cr_expect_eq(count_of(text, "psel_wmul|cpu:0|train=1|"), 1, "%s", text);
    cr_expect(strstr(text, "in=float32(4096);float32(4096)|out=float32(4096)|aux=|in_grad=0,1"), "%s", text);
    free(text);
    mxp_executor_free(ex);
    mxp_symbol_release(s);
}
