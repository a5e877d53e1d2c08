/* summary.c — the per-op table of a session (torch.profiler's
 * key_averages() view, MXNet's aggregate stats): one row per (event name,
 * impl) of the op events — "Convolution"/"gemm" and
 * "_backward_Convolution"/"gemm" are two rows — with calls, total, mean,
 * min and max milliseconds and total / wall time, sorted by total.
 *
 * Built from the same events the trace holds, so a row's total is the sum
 * of its events' durations (the profiler test checks it against the JSON).
 * Not here: recording (profiler.c), the JSON (trace.c). */
#include "profiler_impl.h"

#include "base/base.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct row {
    const char *name, *impl;  /* point into an event (stable while mu is held) */
    uint64_t calls;
    int64_t total, min, max;  /* ns */
} row;

typedef struct table {
    row *rows;
    size_t n, cap;
    int32_t *slots;           /* open addressing: row index + 1, 0 empty */
    size_t n_slots;
} table;

static uint64_t hash2(const char *a, const char *b) {
    uint64_t h = 1469598103934665603ULL;
    for (; *a; a++) h = (h ^ (unsigned char)*a) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL;
    for (; *b; b++) h = (h ^ (unsigned char)*b) * 1099511628211ULL;
    return h;
}

static int grow_slots(table *t) {
    size_t n = t->n_slots ? t->n_slots * 2 : 256;
    int32_t *s = calloc(n, sizeof *s);
    if (!s) return MXP_ENOMEM;
    for (size_t r = 0; r < t->n; r++) {
        size_t j = hash2(t->rows[r].name, t->rows[r].impl) & (n - 1);
        while (s[j]) j = (j + 1) & (n - 1);
        s[j] = (int32_t)r + 1;
    }
    free(t->slots);
    t->slots = s;
    t->n_slots = n;
    return MXP_OK;
}

static row *find_row(table *t, const prof_event *e) {
    if ((t->n + 1) * 2 > t->n_slots && grow_slots(t)) return NULL;
    size_t mask = t->n_slots - 1, j = hash2(e->name, e->impl) & mask;
    for (; t->slots[j]; j = (j + 1) & mask) {
        row *r = &t->rows[t->slots[j] - 1];
        if (!strcmp(r->name, e->name) && !strcmp(r->impl, e->impl)) return r;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        row *nr = realloc(t->rows, cap * sizeof *nr);
        if (!nr) return NULL;
        t->rows = nr;
        t->cap = cap;
    }
    row *r = &t->rows[t->n++];
    *r = (row){e->name, e->impl, 0, 0, INT64_MAX, 0};
    t->slots[j] = (int32_t)t->n;
    return r;
}

static int by_total(const void *a, const void *b) {
    const row *x = a, *y = b;
    if (x->total != y->total) return x->total < y->total ? 1 : -1;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->impl, y->impl);
}

static void put_ms(mxp__strbuf *s, int w, int64_t ns) {
    mxp__strbuf_addf(s, " %*" PRId64 ".%03d", w - 4, ns / 1000000, (int)((ns / 1000) % 1000));
}

int mxp__prof_table_locked(char **out) {
    MXP_ASSERT(mxp__mutex_held(&mxp__prof.mu));
    *out = NULL;
    table t = {0};
    uint64_t end = mxp__prof_end_locked(), calls = 0;
    int64_t t0 = mxp__prof.t_start;
    for (uint64_t i = mxp__prof.base; i < end; i++) {
        const prof_event *e = mxp__prof_event_locked(i);
        if (!e || e->ts < t0 || e->cat != PROF_CAT_OP || e->type != PROF_EV_SLICE) continue;
        row *r = find_row(&t, e);
        if (!r) {
            free(t.rows);
            free(t.slots);
            return mxp__error_oom("profiler table");
        }
        r->calls++;
        r->total += e->dur;
        if (e->dur < r->min) r->min = e->dur;
        if (e->dur > r->max) r->max = e->dur;
        calls++;
    }
    free(t.slots);
    if (t.n) qsort(t.rows, t.n, sizeof *t.rows, by_total);
    int64_t wall = mxp__prof_wall_locked();
    int wn = 4, wi = 4;
    for (size_t r = 0; r < t.n; r++) {
        int a = (int)strlen(t.rows[r].name), b = (int)strlen(t.rows[r].impl);
        if (a > wn) wn = a;
        if (b > wi) wi = b;
    }
    mxp__strbuf s = {0};
    mxp__strbuf_addf(&s, "Profile: %" PRId64 ".%03d ms wall, %" PRIu64 " op calls, %" PRIu64 " events dropped\n",
                     wall / 1000000, (int)((wall / 1000) % 1000), calls, (uint64_t)atomic_load(&mxp__prof.dropped));
    mxp__strbuf_addf(&s, "%-*s  %-*s %8s %12s %10s %10s %10s %7s\n", wn, "Name", wi, "Impl", "Calls", "Total ms",
                     "Mean ms", "Min ms", "Max ms", "% wall");
    for (size_t r = 0; r < t.n; r++) {
        const row *w = &t.rows[r];
        mxp__strbuf_addf(&s, "%-*s  %-*s %8" PRIu64, wn, w->name, wi, w->impl, w->calls);
        put_ms(&s, 12, w->total);
        put_ms(&s, 10, w->total / (int64_t)w->calls);
        put_ms(&s, 10, w->min);
        put_ms(&s, 10, w->max);
        mxp__strbuf_addf(&s, " %7.2f\n", wall > 0 ? 100.0 * (double)w->total / (double)wall : 0.0);
    }
    free(t.rows);
    if (s.oom || !s.buf) {
        free(s.buf);
        return mxp__error_oom("profiler table");
    }
    *out = s.buf;
    return MXP_OK;
}
