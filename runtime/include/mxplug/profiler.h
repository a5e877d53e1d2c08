/* mxplug/profiler.h — what ran, where and for how long: a Chrome-trace /
 * Perfetto JSON file and a per-op table (MXNet's mx.profiler, the view of
 * torch.profiler's key_averages()).
 * Part of mxplug.h; include <mxplug.h> rather than this file.
 *
 * While the profiler runs, the runtime records (each kind can be chosen with
 * mxp_profiler_set_config):
 *   ops      every op run by a pack — forward and backward (named
 *            "_backward_OP", as MXNet does) — with its node, implementation,
 *            tensor shapes and bytes, on the lane of the thread that ran it
 *            (one lane per engine worker; the caller's thread under the
 *            naive engine);
 *   api      every engine function around them (name, lane) with the time
 *            it waited in its lane's queue once its inputs were ready, and
 *            copies between arrays with their bytes;
 *   memory   each device pool's bytes in use and bytes cached, as counter
 *            tracks (one sample per allocation and free);
 *   io       data-iterator prefetch (a lane of its own) and the caller's
 *            waits for a batch, KVStore transport operations (a "kvstore"
 *            track, from the hand-off to the completion).
 * Events go to one bounded in-memory buffer (max_events, default 1,000,000,
 * about 270 MiB when full; the buffer grows as it is used); later events
 * are dropped and counted, and the dump and the table say how many.
 *
 * MXP_PROFILE=trace.json in the environment starts the profiler with every
 * kind when the library loads and writes the trace when the process exits
 * (MXP_PROFILE_SUMMARY=1 also prints the table on stderr then).
 * Off, the cost is one predictable branch per op.  Thread-safe. */
#ifndef MXPLUG_PROFILER_H
#define MXPLUG_PROFILER_H

#include <mxplug/base.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Configure the profiler, as MXNet's profiler.set_config(**kwargs).
 * keys/vals[0..n): copied.  Keys:
 *   filename            the trace mxp_profiler_dump writes ("profile.json")
 *   profile_all         0/1: every kind below
 *   profile_symbolic    0/1: op events (executor and imperative ops run the
 *   profile_imperative  same path, so either key selects both)
 *   profile_api         0/1: engine functions, queue waits, copies
 *   profile_memory      0/1: storage counters
 *   profile_io          0/1: iterator and KVStore lanes (mxplug's own key)
 *   aggregate_stats     0/1: accepted; the table is always available
 *   max_events          events kept per session (1 .. 100,000,000)
 * Kinds not named keep their value; the defaults are all kinds on.
 * Returns MXP_OK, MXP_EINVAL (unknown key, bad value: named), MXP_EBUSY
 * (the profiler is running; stop it first). */
MXP_API int mxp_profiler_set_config(int n, const char *const *keys, const char *const *vals);

/* Start a session: earlier events are discarded, times count from now.
 * Returns MXP_OK (also when already running: nothing changes). */
MXP_API int mxp_profiler_start(void);

/* Stop recording; the session's events stay until the next start.
 * Returns MXP_OK (also when not running). */
MXP_API int mxp_profiler_stop(void);

/* 1 while the profiler records, else 0. */
MXP_API int mxp_profiler_is_running(void);

/* Write the session's events as Chrome-trace JSON to the configured
 * filename (mxp_profiler_dump) or to `path` (mxp_profiler_dump_file),
 * atomically (mxp_file_write_atomic).  Works while running (the events so
 * far) and after stop.  Returns MXP_OK, MXP_EINVAL (no session yet),
 * MXP_EIO naming the file. */
MXP_API int mxp_profiler_dump(void);
MXP_API int mxp_profiler_dump_file(const char *path);

/* The per-op table of the session so far: one row per op and
 * implementation (forward and backward separately) with calls, total,
 * mean, min and max milliseconds and the total's share of the session's
 * wall time, sorted by total.  Rows sum the op events of the trace exactly
 * (the same events, the same durations).  reset: 1 also discards the
 * events so far (the session goes on from an empty buffer).
 * out: NUL-terminated text, free with mxp_free.  Returns MXP_OK,
 * MXP_EINVAL (no session yet), MXP_ENOMEM. */
MXP_API int mxp_profiler_dumps(int reset, char **out);

#ifdef __cplusplus
}
#endif
#endif /* MXPLUG_PROFILER_H */
