/* profiler/profiler.h — the hooks other runtime modules call to record
 * events while the profiler runs (public face: mxplug/profiler.h).
 *
 * The contract for callers on hot paths: test mxp__prof_on(KIND) first —
 * one relaxed load of a global and a branch that is never taken while the
 * profiler is off — and call a recorder only when it is set.  Recorders
 * take their times from mxp__prof_now() (CLOCK_MONOTONIC, ns), copy every
 * string they are given (callers' names may die right after) and never
 * fail: an event that does not fit is dropped and counted.
 * Threads: any thread may record; a thread's lane in the trace is named by
 * mxp__prof_thread_name (engine workers, the iterator's prefetch thread) or
 * "thread N" otherwise.
 * Not here: the event buffer (profiler.c), the JSON (trace.c), the table
 * (summary.c): profiler_impl.h. */
#ifndef MXP_PROFILER_PROFILER_H
#define MXP_PROFILER_PROFILER_H

#include <mxp/tensor.h>

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Kinds of events (bits of mxp__prof_mask). */
enum {
    MXP__PROF_OPS = 1,     /* pack forward/backward calls              */
    MXP__PROF_API = 2,     /* engine functions, queue waits, copies    */
    MXP__PROF_MEMORY = 4,  /* storage pool counters                    */
    MXP__PROF_IO = 8,      /* iterator prefetch, KVStore transport     */
};

/* The kinds being recorded now; 0 while the profiler is off. */
extern atomic_int mxp__prof_mask;

static inline int mxp__prof_on(int kind) {
    return __builtin_expect(atomic_load_explicit(&mxp__prof_mask, memory_order_relaxed) & kind, 0);
}

int64_t mxp__prof_now(void);

/* Name the calling thread's lane (printf-style, at most 47 bytes kept).
 * Cheap; call it when a thread starts, whether or not the profiler runs. */
void mxp__prof_thread_name(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One pack call: op is the definition's name, label the node's ("NODE (OP)"
 * for executor nodes, else the op name), impl the implementation.  t[0..n)
 * are the tensors passed, in the run's order: forward in|out|aux, backward
 * out_grad|in|out|in_grad|aux (data NULL: absent); n_in/n_out/n_aux give
 * the roles. */
void mxp__prof_op(const char *op, int backward, const char *label, const char *impl, const mxp_tensor *t,
                  uint32_t n_in, uint32_t n_out, uint32_t n_aux, int64_t t0, int64_t t1);

/* One engine function run on this thread: ready = when its last input
 * became available (0: unknown), [start, end) its run.  copy: a copy lane. */
void mxp__prof_engine(const char *name, int copy, int64_t ready, int64_t start, int64_t end);

/* A copy of `bytes` between devices, on this thread. */
void mxp__prof_copy(size_t bytes, int32_t src_dev_type, int32_t src_dev_id, int32_t dst_dev_type,
                    int32_t dst_dev_id, int64_t t0, int64_t t1);

/* A device pool's counters after an allocation or a free. */
void mxp__prof_memory(int32_t dev_type, int32_t dev_id, uint64_t in_use, uint64_t pooled);

/* A span on this thread's lane (cat: "io", ...). */
void mxp__prof_span(const char *cat, const char *name, const char *detail, int64_t t0, int64_t t1);

/* A span on a track of its own that may overlap others (async event):
 * KVStore transfers.  track names the track ("kvstore"). */
void mxp__prof_async(const char *track, const char *name, const char *detail, int64_t t0, int64_t t1);

#endif /* MXP_PROFILER_PROFILER_H */
