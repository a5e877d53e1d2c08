/* tune.c — the `tune` implementation policy: time every candidate the
 * first time a signature is seen, keep the fastest, persist the choice.
 *
 * select.c hands over the candidates that accept a configuration (refs in
 * auto order: rank, then name).  mxp__tune_pick builds the signature —
 * op, device, is_train, thread budget (mxp_num_threads), CPU model
 * (/proc/cpuinfo "model name"; $MXP_CPUINFO for tests), the packs'
 * name@version, the candidates' names, every parameter formatted
 * canonically (mxp__params_format, all of the schema, defaults included)
 * and the dtypes and shapes of inputs, outputs and aux states — and looks
 * it up in the cache (tune_cache.c).  On a miss it times each candidate
 * (tune_time.c: the production path of opdef.h on scratch tensors) in
 * TUNE_PASSES passes over the candidates (alternating order; the lowest
 * median of each counts; a candidate whose fastest first-pass run is over
 * TUNE_DROP_RATIO x the fastest median is not timed again; the two
 * with the fastest runs, within TUNE_DUEL_RATIO, are then timed run by run in turn and
 * the median ratio of those rounds decides), keeps the fastest and saves
 * it.  A candidate
 * whose timing fails is skipped; when none could be timed (or
 * $MXP_TUNE_NO_TIMING forbids timing) the auto choice (index 0) is used
 * and nothing is recorded.  Candidates on a device are timed there
 * (tune_device.c).  Not here: which candidates accept (select.c).
 * Thread-safe: timing runs outside the cache's lock (two threads may time
 * the same signature; both results agree in kind and the later write
 * wins). */
#include "plugin/plugin_impl.h"
#include "base/env.h"

#include <mxplug/engine.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TUNE_PASSES 2
#define TUNE_DROP_RATIO 2.0
/* The runner-up (by fastest run) within TUNE_DUEL_RATIO of the best gets a
 * duel with it (mxp__tune_duel: run by run in turn, the median ratio
 * decides): on a loaded machine one disturbed block of runs decided picks
 * that differ by less than the load's noise (bench/conv's lines moved
 * between runs only because tune picked differently), and a burst of load
 * over both passes of winograd's training step once made tune pick direct
 * at half its speed (9.44 against 11.61 ms timed, 5.09 against 2.78 ms on
 * bench/conv). */
#define TUNE_DUEL_RATIO 2.0

/* ------------------------------------------------------------ signature */

static void cpu_model(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown");
    const char *path = getenv("MXP_CPUINFO");
    FILE *f = fopen(path && *path ? path : "/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10)) continue;
        char *c = strchr(line, ':');
        if (!c) continue;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        size_t n = strcspn(c, "\r\n");
        /* '|' separates signature fields. */
        snprintf(buf, cap, "%.*s", (int)n, c);
        for (char *p = buf; *p; p++)
            if (*p == '|') *p = '/';
        break;
    }
    fclose(f);
}

static void add_tensors(mxp__strbuf *s, const char *what, uint32_t n, const mxp_shape *sh, const int32_t *dt) {
    mxp__strbuf_addf(s, "|%s=", what);
    for (uint32_t i = 0; i < n; i++) {
        mxp__strbuf_addf(s, "%s%s(", i ? ";" : "", dt ? mxp_dtype_name(dt[i]) : "?");
        for (int k = 0; sh && k < sh[i].ndim; k++) mxp__strbuf_addf(s, "%s%lld", k ? "," : "", (long long)sh[i].dims[k]);
        mxp__strbuf_addf(s, ")");
    }
}

static char *make_signature(const char *op_name, const mxp_select_query *q, mxp_impl_ref *const *refs, int n) {
    mxp__strbuf s = {0};
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    const char *dev = q->device_name ? q->device_name : mxp__device_name(q->device.type);
    mxp__strbuf_addf(&s, "%s|%s:%d|train=%d|threads=%d|cpu=%s|packs=", op_name, dev, (int)q->device.id, q->is_train ? 1 : 0,
           mxp_num_threads(), cpu);
    const mxp_pack *seen[65];
    int n_seen = 0;
    for (int i = -1; i < n; i++) {
        const mxp_pack *p = i < 0 ? refs[0]->def_pack : refs[i]->impl_pack;
        int dup = 0;
        for (int k = 0; k < n_seen; k++) dup |= seen[k] == p;
        if (dup || !p || n_seen == 64) continue;
        seen[n_seen++] = p;
        mxp__strbuf_addf(&s, "%s%s@%s", n_seen > 1 ? "," : "", p->man->name, p->man->version ? p->man->version : "?");
    }
    /* Candidate names in name order (refs come in rank order). */
    mxp__strbuf_addf(&s, "|impls=");
    int used[64] = {0};
    for (int k = 0; k < n && k < 64; k++) {
        int best = -1;
        for (int i = 0; i < n && i < 64; i++)
            if (!used[i] && (best < 0 || strcmp(refs[i]->entry->name, refs[best]->entry->name) < 0)) best = i;
        used[best] = 1;
        mxp__strbuf_addf(&s, "%s%s", k ? "," : "", refs[best]->entry->name);
    }
    mxp__strbuf_addf(&s, "|params=");
    const mxp_op_def *def = refs[0]->def;
    for (uint32_t i = 0; def && q->params && i < def->n_params; i++) {
        const mxp_param_def *pd = mxp__param_def_at(def->params, i);
        char val[512];
        if (mxp__params_format(pd, q->params, val, sizeof val)) snprintf(val, sizeof val, "?");
        mxp__strbuf_addf(&s, "%s%s=%s", i ? ";" : "", pd->name, val);
    }
    add_tensors(&s, "in", q->n_in, q->in_shapes, q->in_dtypes);
    add_tensors(&s, "out", q->n_out, q->out_shapes, q->out_dtypes);
    add_tensors(&s, "aux", q->n_aux, q->aux_shapes, q->aux_dtypes);
    /* Only a known subset of input gradients is part of the key: with all
     * (or unknown) the signature is the one older caches hold. */
    int all = 1;
    for (uint32_t i = 0; q->is_train && q->in_grad && i < q->n_in; i++) all &= q->in_grad[i] != 0;
    if (!all) {
        mxp__strbuf_addf(&s, "|in_grad=");
        for (uint32_t i = 0; i < q->n_in; i++) mxp__strbuf_addf(&s, "%s%d", i ? "," : "", q->in_grad[i] ? 1 : 0);
    }
    for (char *p = s.buf; p && *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return s.buf;
}

static int timing_forbidden(void) {
    return mxp__env_bool("MXP_TUNE_NO_TIMING", 0);
}

/* ------------------------------------------------------------ pick */
static void note_times(mxp__strbuf *s, const mxp__tune_entry *e) {
    for (int i = 0; i < e->n_times; i++) mxp__strbuf_addf(s, "%s%s %.3f ms", i ? ", " : "", e->names[i], e->ms[i]);
}

int mxp__tune_pick(struct mxp_op *op, const mxp_select_query *q, mxp_impl_ref *const *refs, int n, int *out_index,
                   char **out_note) {
    *out_index = 0;
    if (out_note) *out_note = NULL;
    const char *op_name = mxp__op_name(op);
    if (n <= 0) return mxp__error(MXP_EINVAL, "tune: no candidates");
    mxp__strbuf note = {0};
    char *sig = make_signature(op_name, q, refs, n);
    if (!sig) return mxp__error_oom("tune signature");
    char path[1024] = "";
    if (mxp__tune_cache_path(path, sizeof path)) snprintf(path, sizeof path, "(no cache: XDG_CACHE_HOME and HOME unset)");
    /* Cached? */
    mxp__tune_entry hit;
    int idx = -1;
    if (mxp__tune_cache_find(sig, &hit)) {
        for (int i = 0; i < n; i++)
            if (!strcmp(refs[i]->entry->name, hit.choice)) idx = i;
        if (idx >= 0) {
            mxp__strbuf_addf(&note, "tune: '%s' from the cache %s (", hit.choice, path);
            note_times(&note, &hit);
            mxp__strbuf_addf(&note, ")");
        }
        mxp__tune_entry_free(&hit);
    }
    if (idx >= 0) {
        MXP_LOGD("plugin", "op '%s': tune cache hit: %s", op_name, refs[idx]->entry->name);
        *out_index = idx;
        free(sig);
        if (out_note) *out_note = note.buf; else free(note.buf);
        return MXP_OK;
    }
    free(note.buf);
    note = (mxp__strbuf){0};
    const char *dev = q->device_name ? q->device_name : mxp__device_name(q->device.type);
    /* Any device: scratch, stream and completion come from tune_device.c. */
    if (timing_forbidden() || n == 1) {
        const char *why = n == 1 ? "only one candidate accepts" : "timing forbidden by MXP_TUNE_NO_TIMING";
        mxp__strbuf_addf(&note, "tune: not timed (%s, device %s): '%s' as auto", why, dev, refs[0]->entry->name);
        free(sig);
        if (out_note) *out_note = note.buf; else free(note.buf);
        return MXP_OK;
    }
    /* Time every candidate. */
    mxp__tune_entry e = {0};
    e.op = (char *)op_name;
    e.sig = sig;
    e.names = calloc((size_t)n, sizeof *e.names);
    e.ms = calloc((size_t)n, sizeof *e.ms);
    double *ms = calloc((size_t)n, sizeof *ms);      /* per candidate, -1: not timed */
    double *fastest = calloc((size_t)n, sizeof *ms); /* its fastest run of pass 0 */
    double *lowest = calloc((size_t)n, sizeof *ms);  /* its fastest run of all passes */
    if (!e.names || !e.ms || !ms || !fastest || !lowest) {
        free(e.names);
        free(e.ms);
        free(ms);
        free(fastest);
        free(lowest);
        free(sig);
        return mxp__error_oom("tune");
    }
    int best = -1;
    double best_ms = 0;
    mxp__strbuf failed = {0}, dropped = {0};
    /* TUNE_PASSES passes, in alternating order, each candidate keeping its
     * lowest median: interference from elsewhere only ever adds time, and a
     * drift in machine load does not favour whoever ran first. */
    for (int i = 0; i < n; i++) ms[i] = -1;
    double first_best = -1; /* fastest time of pass 0 */
    for (int pass = 0; pass < TUNE_PASSES; pass++) {
        if (pass == 1)
            for (int i = 0; i < n; i++)
                if (ms[i] >= 0 && (first_best < 0 || ms[i] < first_best)) first_best = ms[i];
        for (int k = 0; k < n; k++) {
            int i = pass % 2 ? n - 1 - k : k;
            if (pass > 0 && ms[i] < 0) continue; /* failed before */
            /* A clear loser is not timed again: interference only adds
             * time, so a candidate whose FASTEST run is over
             * TUNE_DROP_RATIO x the fastest median is not a close call,
             * and re-timing it is what makes tuning slow.  Its median is
             * not enough: load that hits half of a candidate's few runs
             * doubles it, and the real winner was then never timed again. */
            if (pass > 0 && fastest[i] > TUNE_DROP_RATIO * first_best) {
                mxp__strbuf_addf(&dropped, "%s'%s'", dropped.buf ? ", " : "", refs[i]->entry->name);
                continue;
            }
            double t;
            double t_min = 0;
            int trc = mxp__tune_time_one(op_name, refs[i], q, &t, &t_min);
            if (trc) {
                MXP_LOGW("plugin", "op '%s': tune could not time impl '%s': %s", op_name, refs[i]->entry->name,
                         mxp_last_error());
                mxp__strbuf_addf(&failed, "; '%s' not timed: %s", refs[i]->entry->name, mxp_last_error());
                ms[i] = -1;
                continue;
            }
            if (pass == 0) fastest[i] = t_min;
            if (pass == 0 || t_min < lowest[i]) lowest[i] = t_min;
            if (pass == 0 || t < ms[i]) ms[i] = t;
        }
    }
    /* The two with the fastest runs, when the runner-up's is within
     * TUNE_DUEL_RATIO of the best's, are timed again run by run in turn
     * (mxp__tune_duel) and the median ratio of the rounds decides: each
     * pass above times a candidate in a block of its own, which a burst of
     * load can hit whole.  The pair goes by fastest runs, not medians:
     * winograd's training step once had a pass median of 7.8 ms with runs
     * of 2.4 and 3.1 in it (burst load) and was left out of a duel between
     * direct (5.7) and strip. */
    int duel_a = -1, duel_b = -1, duel_rounds = 0, duel_pick = -1;
    double duel_ratio = 1, duel_a_ms = 0, duel_b_ms = 0;
    for (int i = 0; i < n; i++) {
        if (ms[i] < 0) continue;
        if (duel_a < 0 || lowest[i] < lowest[duel_a]) duel_b = duel_a, duel_a = i;
        else if (duel_b < 0 || lowest[i] < lowest[duel_b]) duel_b = i;
    }
    if (duel_b >= 0 && lowest[duel_b] <= TUNE_DUEL_RATIO * lowest[duel_a]) {
        /* The table keeps the passes' medians; the note gives the duel's. */
        if (mxp__tune_duel(op_name, refs[duel_a], refs[duel_b], q, &duel_ratio, &duel_a_ms, &duel_b_ms,
                           &duel_rounds) == MXP_OK && duel_rounds > 0) {
            /* The ratio decides at the precision the note shows it (3
             * decimals): a gap below 0.05% is noise, and a note saying
             * "median ratio 1.000" must not pick the slower-ranked one.
             * Strictly faster wins: a tie keeps the auto order. */
            duel_ratio = round(duel_ratio * 1000.0) / 1000.0;
            int b_wins = duel_ratio > 1 || (duel_ratio == 1 && duel_b < duel_a);
            duel_pick = b_wins ? duel_b : duel_a;
        } else
            duel_rounds = 0;
        mxp__error_clear();
    }
    for (int i = 0; i < n; i++) {
        if (ms[i] < 0) continue;
        e.names[e.n_times] = (char *)refs[i]->entry->name;
        e.ms[e.n_times++] = ms[i];
        /* Strictly faster wins: a tie keeps the auto order. */
        if (best < 0 || ms[i] < best_ms) {
            best = i;
            best_ms = ms[i];
        }
    }
    if (duel_pick >= 0) best = duel_pick; /* the rounds' ratio, not two medians, decides */
    free(ms);
    free(fastest);
    free(lowest);
    mxp__error_clear();
    if (best < 0) {
        mxp__strbuf_addf(&note, "tune: no candidate could be timed: '%s' as auto%s", refs[0]->entry->name,
               failed.buf ? failed.buf : "");
        *out_index = 0;
    } else {
        e.choice = (char *)refs[best]->entry->name;
        *out_index = best;
        int wrc = mxp__tune_cache_save(&e);
        mxp__strbuf_addf(&note, "tune: '%s' timed now (", e.choice);
        note_times(&note, &e);
        mxp__strbuf_addf(&note, ")%s", q->is_train ? "; runs are forward+backward (training)" : "");
        if (duel_rounds)
            mxp__strbuf_addf(&note, "; '%s' and '%s' timed again in turn, %d rounds: median ratio %.3f (medians %.3f, %.3f ms)",
                             refs[duel_a]->entry->name, refs[duel_b]->entry->name, duel_rounds, duel_ratio, duel_a_ms,
                             duel_b_ms);
        if (dropped.buf)
            mxp__strbuf_addf(&note, "; timed in the first pass only (over %gx the fastest): %s", TUNE_DROP_RATIO,
                             dropped.buf);
        mxp__strbuf_addf(&note, "%s%s", failed.buf ? failed.buf : "", wrc ? "; not saved: " : "; saved to ");
        mxp__strbuf_addf(&note, "%s", wrc ? mxp_last_error() : path);
        if (wrc) MXP_LOGW("plugin", "op '%s': tune result not saved: %s", op_name, mxp_last_error());
        mxp__error_clear();
        MXP_LOGI("plugin", "op '%s': tune chose '%s'", op_name, e.choice);
    }
    free(failed.buf);
    free(dropped.buf);
    free(e.names);
    free(e.ms);
    free(sig);
    if (out_note) *out_note = note.buf; else free(note.buf);
    return MXP_OK;
}
