/* profiler.c — recording events and the mxp_profiler_* entry points:
 * configuration, sessions (start / stop / reset), the event buffer
 * (profiler_impl.h explains its claim/publish protocol), the thread table,
 * the recorders the runtime's hooks call, and MXP_PROFILE (start when the
 * library loads, dump when the process exits).
 *
 * State machine (under mxp__prof.mu): no session -> running (start) ->
 * stopped (stop) -> running (start: a new session).  mxp__prof_mask is the
 * configured kinds while running and 0 otherwise; it is the only thing a
 * hook reads while the profiler is off.
 * Not here: the JSON (trace.c), the table (summary.c). */
#include "profiler_impl.h"

#include "base/base.h"
#include "base/env.h"

#include <mxplug/fileio.h>
#include <mxplug/profiler.h>

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

atomic_int mxp__prof_mask;
prof_state mxp__prof = {
    .mu = MXP__MUTEX_INIT,
    .threads_mu = MXP__MUTEX_INIT,
    .config_mask = MXP__PROF_OPS | MXP__PROF_API | MXP__PROF_MEMORY | MXP__PROF_IO,
    .max_events = PROF_DEFAULT_MAX_EVENTS,
};

const char *const mxp__prof_cat_names[PROF_CAT_COUNT] = {"op", "engine", "copy", "queue", "memory", "io",
                                                         "kvstore"};

int64_t mxp__prof_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* ------------------------------------------------------------ threads */

static _Thread_local int tl_tid;
static _Thread_local char tl_name[48];

static void copy_str(char *dst, size_t cap, const char *src) {
    if (!src) src = "";
    size_t n = strlen(src);
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

void mxp__prof_thread_name(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl_name, sizeof tl_name, fmt, ap);
    va_end(ap);
    if (!tl_tid) return;
    mxp__mutex_lock(&mxp__prof.threads_mu);
    for (int i = 0; i < mxp__prof.n_threads; i++)
        if (mxp__prof.threads[i].tid == tl_tid) copy_str(mxp__prof.threads[i].name, sizeof tl_name, tl_name);
    mxp__mutex_unlock(&mxp__prof.threads_mu);
}

/* The calling thread's lane id, registered on its first event. */
static int thread_id(void) {
    if (tl_tid) return tl_tid;
    mxp__mutex_lock(&mxp__prof.threads_mu);
    if (mxp__prof.n_threads == mxp__prof.cap_threads) {
        int cap = mxp__prof.cap_threads ? mxp__prof.cap_threads * 2 : 16;
        prof_thread *t = realloc(mxp__prof.threads, (size_t)cap * sizeof *t);
        if (!t) {
            mxp__mutex_unlock(&mxp__prof.threads_mu);
            return 0; /* lane 0: "unnamed"; retried on the next event */
        }
        mxp__prof.threads = t;
        mxp__prof.cap_threads = cap;
    }
    int id = mxp__prof.n_threads + 1;
    prof_thread *t = &mxp__prof.threads[mxp__prof.n_threads++];
    t->tid = id;
    if (tl_name[0]) copy_str(t->name, sizeof t->name, tl_name);
    else if (getpid() == (pid_t)gettid()) snprintf(t->name, sizeof t->name, "main thread");
    else snprintf(t->name, sizeof t->name, "thread %d", id);
    mxp__mutex_unlock(&mxp__prof.threads_mu);
    tl_tid = id;
    return id;
}

/* ------------------------------------------------------------ the buffer */

static prof_event *slot_at(uint64_t i, int create) {
    _Atomic(prof_event *) *cp = &mxp__prof.ring[(i / PROF_CHUNK) % PROF_RING];
    prof_event *c = atomic_load_explicit(cp, memory_order_acquire);
    if (!c && create) {
        prof_event *n = calloc(PROF_CHUNK, sizeof *n);
        if (!n) return NULL;
        prof_event *expect = NULL;
        if (atomic_compare_exchange_strong_explicit(cp, &expect, n, memory_order_acq_rel, memory_order_acquire)) c = n;
        else {
            free(n);
            c = expect;
        }
    }
    return c ? &c[i % PROF_CHUNK] : NULL;
}

/* A fresh record for the calling thread, or NULL (dropped). */
static prof_event *claim(int type, int cat) {
    uint64_t lim = atomic_load(&mxp__prof.limit);
    uint64_t i = atomic_fetch_add(&mxp__prof.claimed, 1);
    prof_event *e = i < lim ? slot_at(i, 1) : NULL;
    if (!e) {
        atomic_fetch_add_explicit(&mxp__prof.dropped, 1, memory_order_relaxed);
        return NULL;
    }
    e->type = (uint8_t)type;
    e->cat = (uint8_t)cat;
    e->tid = thread_id();
    return e;
}

static void publish(prof_event *e) { atomic_store_explicit(&e->ready, 1, memory_order_release); }

uint64_t mxp__prof_end_locked(void) {
    MXP_ASSERT(mxp__mutex_held(&mxp__prof.mu));
    uint64_t c = atomic_load(&mxp__prof.claimed), l = atomic_load(&mxp__prof.limit);
    return c < l ? c : l;
}

/* Wait (a recorder is between claim and publish: a few hundred ns unless
 * it was preempted) for slot i; NULL if its chunk never came (dropped). */
const prof_event *mxp__prof_event_locked(uint64_t i) {
    MXP_ASSERT(mxp__mutex_held(&mxp__prof.mu));
    const prof_event *e = slot_at(i, 0);
    for (int spin = 0; spin < 2000000; spin++) {
        if (!e) e = slot_at(i, 0);
        if (e && atomic_load_explicit(&e->ready, memory_order_acquire)) return e;
        sched_yield();
    }
    return NULL;
}

int64_t mxp__prof_wall_locked(void) {
    MXP_ASSERT(mxp__mutex_held(&mxp__prof.mu));
    int64_t end = mxp__prof.running || !mxp__prof.t_stop ? mxp__prof_now() : mxp__prof.t_stop;
    return end - mxp__prof.t_start;
}

/* Begin a new window of events at the current claim count (mu held). */
static void rebase_locked(void) {
    MXP_ASSERT(mxp__mutex_held(&mxp__prof.mu));
    uint64_t old_base = mxp__prof.base, old_end = mxp__prof_end_locked();
    uint64_t base = atomic_load(&mxp__prof.claimed);
    atomic_store(&mxp__prof.limit, base + mxp__prof.max_events);
    /* Claims made before the limit moved publish their slot (or drop). */
    for (uint64_t i = old_base; i < old_end; i++) (void)mxp__prof_event_locked(i);
    for (uint64_t c = old_base / PROF_CHUNK; c < base / PROF_CHUNK; c++) {
        prof_event *p = atomic_exchange(&mxp__prof.ring[c % PROF_RING], NULL);
        free(p);
    }
    mxp__prof.base = base;
    atomic_store(&mxp__prof.dropped, 0);
}

/* ------------------------------------------------------------ recorders */

static const char *dev_type_name(int32_t type) {
    switch (type) {
    case MXP_DEV_CPU: return "cpu";
    case MXP_DEV_GPU: return "gpu";
    case MXP_DEV_CPU_PINNED: return "cpu_pinned";
    case MXP_DEV_CPU_SHARED: return "cpu_shared";
    default: return "device";
    }
}

/* Decimal digits of v at p (no snprintf: this runs per op while profiling). */
static char *put_u64(char *p, uint64_t v) {
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) *p++ = tmp[--n];
    return p;
}

/* "[64,1,28,28]" appended at p (< end); returns the new end of text. */
static char *put_shape(char *p, char *end, const mxp_tensor *t) {
    if (p >= end - 1) return p;
    if (!t->data) {
        *p++ = '-';
        *p = '\0';
        return p;
    }
    *p++ = '[';
    for (int d = 0; d < t->ndim && p < end - 24; d++) {
        if (d) *p++ = ',';
        p = put_u64(p, t->shape[d] > 0 ? (uint64_t)t->shape[d] : 0);
    }
    if (p < end - 1) *p++ = ']';
    *p = '\0';
    return p;
}

/* "; LABEL[..] [..]" (no "; " at the start of the text). */
static char *put_group(char *start, char *p, char *end, const char *label, const mxp_tensor *t, uint32_t n,
                       uint64_t *bytes) {
    size_t ll = strlen(label);
    if (!n || p + ll + 8 >= end) return p;
    if (p != start) {
        *p++ = ';';
        *p++ = ' ';
    }
    memcpy(p, label, ll);
    p += ll;
    *p = '\0';
    for (uint32_t i = 0; i < n && p < end - 2; i++) {
        if (i) *p++ = ' ';
        p = put_shape(p, end, &t[i]);
        if (t[i].data) *bytes += (uint64_t)mxp_tensor_numel(&t[i]) * mxp_dtype_size(t[i].dtype);
    }
    return p;
}

void mxp__prof_op(const char *op, int backward, const char *label, const char *impl, const mxp_tensor *t,
                  uint32_t n_in, uint32_t n_out, uint32_t n_aux, int64_t t0, int64_t t1) {
    prof_event *e = claim(PROF_EV_SLICE, PROF_CAT_OP);
    if (!e) return;
    e->ts = t0;
    e->dur = t1 - t0;
    e->backward = (uint8_t)(backward != 0);
    if (backward) snprintf(e->name, sizeof e->name, "_backward_%s", op);
    else copy_str(e->name, sizeof e->name, op);
    copy_str(e->impl, sizeof e->impl, impl);
    /* Executor labels are "NODE (OP)": keep NODE. */
    e->node[0] = '\0';
    size_t ll = label ? strlen(label) : 0, ol = strlen(op);
    if (ll > ol + 3 && label[ll - 1] == ')' && !strncmp(label + ll - ol - 1, op, ol) && label[ll - ol - 2] == '(') {
        size_t n = ll - ol - 3;
        if (n >= sizeof e->node) n = sizeof e->node - 1;
        memcpy(e->node, label, n);
        e->node[n] = '\0';
    } else if (label && strcmp(label, op)) {
        copy_str(e->node, sizeof e->node, label);
    }
    uint64_t bytes = 0;
    char *p = e->args, *end = e->args + sizeof e->args;
    *p = '\0';
    if (!backward) {
        p = put_group(e->args, p, end, "in ", t, n_in, &bytes);
        p = put_group(e->args, p, end, "out ", t + n_in, n_out, &bytes);
        p = put_group(e->args, p, end, "aux ", t + n_in + n_out, n_aux, &bytes);
    } else {
        p = put_group(e->args, p, end, "in ", t + n_out, n_in, &bytes);
        p = put_group(e->args, p, end, "out ", t + n_out + n_in, n_out, &bytes);
        p = put_group(e->args, p, end, "ograd ", t, n_out, &bytes);
        p = put_group(e->args, p, end, "igrad ", t + 2 * n_out + n_in, n_in, &bytes);
        p = put_group(e->args, p, end, "aux ", t + 2 * n_out + 2 * n_in, n_aux, &bytes);
    }
    e->v0 = bytes;
    publish(e);
}

void mxp__prof_engine(const char *name, int copy, int64_t ready, int64_t start, int64_t end) {
    prof_event *e = claim(PROF_EV_SLICE, copy ? PROF_CAT_COPY : PROF_CAT_ENGINE);
    if (e) {
        e->ts = start;
        e->dur = end - start;
        copy_str(e->name, sizeof e->name, name);
        e->impl[0] = e->node[0] = e->args[0] = '\0';
        e->v0 = ready && start > ready ? (uint64_t)(start - ready) : 0;
        publish(e);
    }
    if (!ready || start <= ready) return;
    prof_event *q = claim(PROF_EV_ASYNC, PROF_CAT_QUEUE);
    if (!q) return;
    q->ts = ready;
    q->dur = start - ready;
    copy_str(q->name, sizeof q->name, name);
    copy_str(q->impl, sizeof q->impl, "engine queue");
    q->node[0] = q->args[0] = '\0';
    publish(q);
}

void mxp__prof_copy(size_t bytes, int32_t src_dev_type, int32_t src_dev_id, int32_t dst_dev_type,
                    int32_t dst_dev_id, int64_t t0, int64_t t1) {
    prof_event *e = claim(PROF_EV_SLICE, PROF_CAT_COPY);
    if (!e) return;
    e->ts = t0;
    e->dur = t1 - t0;
    copy_str(e->name, sizeof e->name, "copy");
    e->impl[0] = e->node[0] = '\0';
    snprintf(e->args, sizeof e->args, "%s(%d) -> %s(%d)", dev_type_name(src_dev_type), (int)src_dev_id,
             dev_type_name(dst_dev_type), (int)dst_dev_id);
    e->v0 = bytes;
    publish(e);
}

void mxp__prof_memory(int32_t dev_type, int32_t dev_id, uint64_t in_use, uint64_t pooled) {
    prof_event *e = claim(PROF_EV_COUNTER, PROF_CAT_MEMORY);
    if (!e) return;
    e->ts = mxp__prof_now();
    e->dur = 0;
    snprintf(e->name, sizeof e->name, "memory %s(%d)", dev_type_name(dev_type), (int)dev_id);
    e->impl[0] = e->node[0] = e->args[0] = '\0';
    e->v0 = in_use;
    e->v1 = pooled;
    publish(e);
}

void mxp__prof_span(const char *cat, const char *name, const char *detail, int64_t t0, int64_t t1) {
    prof_event *e = claim(PROF_EV_SLICE, cat && !strcmp(cat, "kvstore") ? PROF_CAT_COMM : PROF_CAT_IO);
    if (!e) return;
    e->ts = t0;
    e->dur = t1 - t0;
    copy_str(e->name, sizeof e->name, name);
    e->impl[0] = e->node[0] = '\0';
    copy_str(e->args, sizeof e->args, detail);
    e->v0 = 0;
    publish(e);
}

void mxp__prof_async(const char *track, const char *name, const char *detail, int64_t t0, int64_t t1) {
    prof_event *e = claim(PROF_EV_ASYNC, PROF_CAT_COMM);
    if (!e) return;
    e->ts = t0;
    e->dur = t1 - t0;
    copy_str(e->name, sizeof e->name, name);
    copy_str(e->impl, sizeof e->impl, track);
    e->node[0] = '\0';
    copy_str(e->args, sizeof e->args, detail);
    e->v0 = 0;
    publish(e);
}

/* ------------------------------------------------------------ API */

static int parse_flag(const char *key, const char *val, int *out) {
    if (!strcmp(val, "1") || !strcasecmp(val, "true") || !strcasecmp(val, "on")) *out = 1;
    else if (!strcmp(val, "0") || !strcasecmp(val, "false") || !strcasecmp(val, "off")) *out = 0;
    else return mxp__error(MXP_EINVAL, "profiler: '%s' must be 0 or 1, not '%s'", key, val);
    return MXP_OK;
}

int mxp_profiler_set_config(int n, const char *const *keys, const char *const *vals) {
    if (n < 0 || (n > 0 && (!keys || !vals))) return mxp__error(MXP_EMISUSE, "mxp_profiler_set_config: NULL keys");
    mxp__mutex_lock(&mxp__prof.mu);
    int rc = MXP_OK;
    if (mxp__prof.running) {
        rc = mxp__error(MXP_EBUSY, "profiler: set_config while it runs (call mxp_profiler_stop first)");
        goto out;
    }
    /* Validate everything before changing anything. */
    int mask = mxp__prof.config_mask;
    uint64_t max_events = mxp__prof.max_events;
    const char *filename = NULL;
    for (int i = 0; i < n && !rc; i++) {
        const char *k = keys[i], *v = vals[i];
        if (!k || !v) { rc = mxp__error(MXP_EMISUSE, "profiler: NULL key or value at %d", i); break; }
        int flag = 0, bit = 0;
        if (!strcmp(k, "filename")) {
            if (!*v) rc = mxp__error(MXP_EINVAL, "profiler: empty filename");
            filename = v;
            continue;
        } else if (!strcmp(k, "max_events")) {
            char *endp = NULL;
            long long m = strtoll(v, &endp, 10);
            if (!*v || *endp || m < 1 || m > PROF_MAX_EVENTS_LIMIT)
                rc = mxp__error(MXP_EINVAL, "profiler: max_events must be an integer in 1..%d, not '%s'",
                                PROF_MAX_EVENTS_LIMIT, v);
            else max_events = (uint64_t)m;
            continue;
        } else if (!strcmp(k, "profile_all")) bit = MXP__PROF_OPS | MXP__PROF_API | MXP__PROF_MEMORY | MXP__PROF_IO;
        else if (!strcmp(k, "profile_symbolic") || !strcmp(k, "profile_imperative")) bit = MXP__PROF_OPS;
        else if (!strcmp(k, "profile_api")) bit = MXP__PROF_API;
        else if (!strcmp(k, "profile_memory")) bit = MXP__PROF_MEMORY;
        else if (!strcmp(k, "profile_io")) bit = MXP__PROF_IO;
        else if (!strcmp(k, "aggregate_stats")) bit = 0;
        else {
            rc = mxp__error(MXP_EINVAL,
                            "profiler: unknown config key '%s' (known: filename, profile_all, profile_symbolic, "
                            "profile_imperative, profile_api, profile_memory, profile_io, aggregate_stats, "
                            "max_events)", k);
            break;
        }
        if ((rc = parse_flag(k, v, &flag))) break;
        mask = flag ? mask | bit : mask & ~bit;
    }
    if (!rc && filename) {
        char *f = strdup(filename);
        if (!f) rc = mxp__error_oom("profiler filename");
        else {
            free(mxp__prof.filename);
            mxp__prof.filename = f;
        }
    }
    if (!rc) {
        mxp__prof.config_mask = mask;
        mxp__prof.max_events = max_events;
    }
out:
    mxp__mutex_unlock(&mxp__prof.mu);
    return rc;
}

int mxp_profiler_start(void) {
    mxp__mutex_lock(&mxp__prof.mu);
    if (!mxp__prof.running) {
        rebase_locked();
        mxp__prof.have_session = 1;
        mxp__prof.running = 1;
        mxp__prof.t_start = mxp__prof_now();
        mxp__prof.t_stop = 0;
        atomic_store(&mxp__prof_mask, mxp__prof.config_mask);
    }
    mxp__mutex_unlock(&mxp__prof.mu);
    return MXP_OK;
}

int mxp_profiler_stop(void) {
    mxp__mutex_lock(&mxp__prof.mu);
    if (mxp__prof.running) {
        atomic_store(&mxp__prof_mask, 0);
        mxp__prof.running = 0;
        mxp__prof.t_stop = mxp__prof_now();
    }
    mxp__mutex_unlock(&mxp__prof.mu);
    return MXP_OK;
}

int mxp_profiler_is_running(void) { return atomic_load(&mxp__prof_mask) != 0; }

int mxp_profiler_dump_file(const char *path) {
    if (!path || !*path) return mxp__error(MXP_EINVAL, "mxp_profiler_dump_file: no file name");
    mxp__mutex_lock(&mxp__prof.mu);
    int rc;
    if (!mxp__prof.have_session) rc = mxp__error(MXP_EINVAL, "profiler: nothing to dump (never started)");
    else rc = mxp_file_write_atomic(path, "profiler trace", mxp__prof_write_trace, NULL);
    mxp__mutex_unlock(&mxp__prof.mu);
    return rc;
}

int mxp_profiler_dump(void) {
    mxp__mutex_lock(&mxp__prof.mu);
    char *f = strdup(mxp__prof.filename ? mxp__prof.filename : "profile.json");
    mxp__mutex_unlock(&mxp__prof.mu);
    if (!f) return mxp__error_oom("profiler filename");
    int rc = mxp_profiler_dump_file(f);
    free(f);
    return rc;
}

int mxp_profiler_dumps(int reset, char **out) {
    if (!out) return mxp__error(MXP_EMISUSE, "mxp_profiler_dumps: out is NULL");
    *out = NULL;
    mxp__mutex_lock(&mxp__prof.mu);
    int rc;
    if (!mxp__prof.have_session) rc = mxp__error(MXP_EINVAL, "profiler: no table (never started)");
    else rc = mxp__prof_table_locked(out);
    if (!rc && reset) {
        rebase_locked();
        mxp__prof.t_start = mxp__prof_now();
        if (!mxp__prof.running) mxp__prof.t_stop = mxp__prof.t_start;
    }
    mxp__mutex_unlock(&mxp__prof.mu);
    return rc;
}

/* ------------------------------------------------------------ MXP_PROFILE */

static pid_t env_pid;

/* The trace of MXP_PROFILE, written when the process that started it exits
 * (a fork child does not overwrite its parent's file). */
static void dump_at_exit(void) {
    if (getpid() != env_pid) return;
    mxp_profiler_stop();
    if (mxp_profiler_dump() != MXP_OK) fprintf(stderr, "mxplug: MXP_PROFILE: %s\n", mxp_last_error());
    if (mxp__env_bool("MXP_PROFILE_SUMMARY", 0)) {
        char *t = NULL;
        if (mxp_profiler_dumps(0, &t) == MXP_OK) fputs(t, stderr);
        free(t);
    }
}

/* "%p" in MXP_PROFILE becomes the process id (one file per rank). */
static char *expand_pid(const char *v) {
    size_t n = strlen(v);
    char *s = malloc(n * 8 + 1);
    if (!s) return NULL;
    char *o = s;
    for (const char *p = v; *p; p++) {
        if (p[0] == '%' && p[1] == 'p') {
            o += sprintf(o, "%d", (int)getpid());
            p++;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return s;
}

__attribute__((constructor)) static void profile_from_env(void) {
    const char *v = getenv("MXP_PROFILE");
    if (!v || !*v) return;
    char *f = expand_pid(v);
    if (!f) return;
    mxp__prof.filename = f;
    long m = mxp__env_int("MXP_PROFILE_MAX_EVENTS", 1, PROF_MAX_EVENTS_LIMIT, PROF_DEFAULT_MAX_EVENTS);
    mxp__prof.max_events = (uint64_t)m;
    env_pid = getpid();
    atexit(dump_at_exit);
    mxp_profiler_start();
}
