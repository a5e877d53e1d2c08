/* profiler_impl.h — private to runtime/src/profiler/: the event record, the
 * session's buffer and the thread table shared by profiler.c (recording,
 * sessions, API), trace.c (Chrome-trace JSON) and summary.c (per-op table).
 *
 * The buffer: events are fixed-size records in chunks of PROF_CHUNK, found
 * through a ring of chunk pointers by the event's index.  A recorder loads
 * the session's limit, then claims an index with one atomic add (so a claim
 * made under a new limit is always in the new session), drops the event
 * when the index is past the limit, else writes the record and publishes it
 * by storing `ready` (release).  Readers (dump, table) take g_prof.mu, read
 * [base, min(claimed, limit)) and wait for `ready` on each slot.  A new
 * session (start, dumps with reset) sets base to the claimed count, waits
 * for the old session's claimed slots to be published and frees the chunks
 * that lie wholly before the new base; every index ever claimed is unique,
 * and a session spans fewer indices than the ring holds, so a chunk is
 * written by one session only. */
#ifndef MXP_PROFILER_PROFILER_IMPL_H
#define MXP_PROFILER_PROFILER_IMPL_H

#include "profiler.h"

#include <pthread.h>

#include "base/mutex.h"
#include <stdint.h>
#include <stdio.h>

enum { PROF_EV_SLICE = 1, PROF_EV_ASYNC = 2, PROF_EV_COUNTER = 3 };
/* Categories, printed as the events' "cat". */
enum { PROF_CAT_OP = 0, PROF_CAT_ENGINE, PROF_CAT_COPY, PROF_CAT_QUEUE, PROF_CAT_MEMORY, PROF_CAT_IO,
       PROF_CAT_COMM, PROF_CAT_COUNT };
extern const char *const mxp__prof_cat_names[PROF_CAT_COUNT];

typedef struct prof_event {
    _Atomic uint32_t ready;  /* 1 once the record below is complete */
    uint8_t type;            /* PROF_EV_* */
    uint8_t cat;             /* PROF_CAT_* */
    uint8_t backward;        /* op events */
    uint8_t pad_;
    int32_t tid;             /* lane (thread table id) */
    int64_t ts, dur;         /* ns, CLOCK_MONOTONIC; dur 0 for counters */
    uint64_t v0, v1;         /* op/copy: bytes; counter: in_use, pooled */
    char name[48];
    char impl[24];           /* op: impl; async: track; counter: device */
    char node[32];           /* op: node name ("" when imperative) */
    char args[120];          /* op: shapes; engine: "" ; others: detail */
} prof_event;

enum { PROF_CHUNK = 8192, PROF_RING = 16384 };
enum { PROF_MAX_EVENTS_LIMIT = 100000000, PROF_DEFAULT_MAX_EVENTS = 1000000 };
_Static_assert((uint64_t)PROF_MAX_EVENTS_LIMIT + PROF_CHUNK <= (uint64_t)PROF_CHUNK * PROF_RING,
               "a session must fit in the chunk ring");

typedef struct prof_thread {
    int tid;
    char name[48];
} prof_thread;

typedef struct prof_state {
    mxp__mutex mu;               /* sessions, config, dump, thread table */
    int config_mask;             /* kinds recorded while running */
    char *filename;              /* mxp_profiler_dump's target */
    uint64_t max_events;
    int have_session, running;
    int64_t t_start, t_stop;     /* ns; t_stop 0 while running */
    uint64_t base;               /* first index of the session */
    _Atomic uint64_t limit;      /* base + max_events */
    _Atomic uint64_t claimed;    /* indices handed out, ever */
    _Atomic uint64_t dropped;    /* this session's events past the limit */
    _Atomic(prof_event *) ring[PROF_RING];
    mxp__mutex threads_mu;       /* the thread table */
    prof_thread *threads;
    int n_threads, cap_threads;
} prof_state;

extern prof_state mxp__prof;

/* Readers, with mxp__prof.mu held: the session's published event i
 * (base <= i < end), or NULL if it never got written (dropped). */
uint64_t mxp__prof_end_locked(void);
const prof_event *mxp__prof_event_locked(uint64_t i);
/* The session's wall time so far (ns), mu held. */
int64_t mxp__prof_wall_locked(void);

/* trace.c: write the session as Chrome-trace JSON (mu held). */
int mxp__prof_write_trace(FILE *f, void *unused);
/* summary.c: the per-op table (mu held); *out malloc'd. */
int mxp__prof_table_locked(char **out);

#endif /* MXP_PROFILER_PROFILER_IMPL_H */
