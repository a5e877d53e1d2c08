/* trace.c — the session's events as Chrome-trace JSON (the "JSON Object
 * Format" read by chrome://tracing, Perfetto and speedscope).
 *
 * Layout: {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}.
 * Times are microseconds from the session's start with three decimals, so
 * they keep the recorded nanoseconds exactly.  One process ("mxplug"), one
 * lane per recording thread (thread_name / thread_sort_index metadata);
 * slices are "X" events, queue waits and KVStore transfers async "b"/"e"
 * pairs (they overlap), pool counters "C" events.  Every string is escaped
 * here.  Not here: recording (profiler.c). */
#include "profiler_impl.h"

#include "base/base.h"

#include <inttypes.h>
#include <mxplug/base.h>
#include <unistd.h>

static void put_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* ns -> "us.nnn" (exact). */
static void put_us(FILE *f, int64_t ns) {
    if (ns < 0) {
        fputc('-', f);
        ns = -ns;
    }
    fprintf(f, "%" PRId64 ".%03d", ns / 1000, (int)(ns % 1000));
}

static void head(FILE *f, const char *ph, const prof_event *e, int pid, int64_t ts) {
    fprintf(f, ",\n{\"ph\":\"%s\",\"cat\":\"%s\",\"name\":", ph, mxp__prof_cat_names[e->cat]);
    put_str(f, e->name);
    fprintf(f, ",\"pid\":%d,\"tid\":%d,\"ts\":", pid, e->tid);
    put_us(f, ts);
}

int mxp__prof_write_trace(FILE *f, void *unused) {
    (void)unused;
    int pid = (int)getpid();
    int64_t t0 = mxp__prof.t_start;
    fprintf(f, "{\"traceEvents\":[\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,"
               "\"args\":{\"name\":\"mxplug\"}}", pid);
    mxp__mutex_lock(&mxp__prof.threads_mu);
    for (int i = 0; i < mxp__prof.n_threads; i++) {
        const prof_thread *t = &mxp__prof.threads[i];
        fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", pid,
                t->tid);
        put_str(f, t->name);
        fprintf(f, "}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,"
                   "\"args\":{\"sort_index\":%d}}", pid, t->tid, t->tid);
    }
    mxp__mutex_unlock(&mxp__prof.threads_mu);
    uint64_t end = mxp__prof_end_locked(), n_written = 0;
    for (uint64_t i = mxp__prof.base; i < end; i++) {
        const prof_event *e = mxp__prof_event_locked(i);
        if (!e || e->ts < t0) continue; /* a straggler of the previous session */
        int64_t ts = e->ts - t0;
        n_written++;
        switch (e->type) {
        case PROF_EV_SLICE:
            head(f, "X", e, pid, ts);
            fputs(",\"dur\":", f);
            put_us(f, e->dur);
            fputs(",\"args\":{", f);
            if (e->cat == PROF_CAT_OP) {
                fputs("\"node\":", f);
                put_str(f, e->node);
                fputs(",\"impl\":", f);
                put_str(f, e->impl);
                fputs(",\"shapes\":", f);
                put_str(f, e->args);
                fprintf(f, ",\"bytes\":%" PRIu64, e->v0);
            } else if (e->cat == PROF_CAT_ENGINE || (e->cat == PROF_CAT_COPY && !e->args[0])) {
                fputs("\"queue_wait_us\":", f);
                put_us(f, (int64_t)e->v0);
            } else {
                fputs("\"detail\":", f);
                put_str(f, e->args);
                if (e->cat == PROF_CAT_COPY) fprintf(f, ",\"bytes\":%" PRIu64, e->v0);
            }
            fputs("}}", f);
            break;
        case PROF_EV_ASYNC:
            head(f, "b", e, pid, ts);
            fprintf(f, ",\"id\":\"0x%" PRIx64 "\",\"args\":{\"track\":", i);
            put_str(f, e->impl);
            if (e->args[0]) {
                fputs(",\"detail\":", f);
                put_str(f, e->args);
            }
            fputs("}}", f);
            head(f, "e", e, pid, ts + e->dur);
            fprintf(f, ",\"id\":\"0x%" PRIx64 "\"}", i);
            break;
        case PROF_EV_COUNTER:
            head(f, "C", e, pid, ts);
            fprintf(f, ",\"args\":{\"in_use\":%" PRIu64 ",\"pooled\":%" PRIu64 "}}", e->v0, e->v1);
            break;
        default:
            break;
        }
    }
    fprintf(f, "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"mxplug\":");
    put_str(f, mxp_version());
    fprintf(f, ",\"events\":%" PRIu64 ",\"dropped_events\":%" PRIu64 ",\"wall_us\":", n_written,
            (uint64_t)atomic_load(&mxp__prof.dropped));
    put_us(f, mxp__prof_wall_locked());
    fputs("}}\n", f);
    return MXP_OK;
}
