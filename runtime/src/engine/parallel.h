/* engine/parallel.h — intra-op parallelism under the runtime's thread budget.
 *
 * The runtime owns the cores: one budget, MXP_NUM_THREADS (default: online
 * cores), is shared by engine CPU workers and by mxp__parallel_for.  A global
 * count of busy threads ("slots") keeps the threads actively computing at or
 * under the budget: an engine compute worker holds a slot while it runs a
 * function; mxp__parallel_for borrows only the slots that are free (at the
 * start, or released while its chunks last) and runs the rest of the range
 * itself, so it never nests a second pool and never oversubscribes.  Helpers are a small set of threads owned by
 * this module (budget - 1 of them), started on first need.
 * Not here: the engine's queues. */
#ifndef MXP_ENGINE_PARALLEL_H
#define MXP_ENGINE_PARALLEL_H

#include <stdint.h>

/* Run fn(arg, begin, end) over [0, n) in chunks of at least `grain`
 * (grain <= 0 means 1).  Chunks run on the calling thread and on as many
 * helper threads as the budget has free slots, now or while chunks remain;
 * may run everything inline.  fn must be safe to call concurrently on disjoint ranges.
 * Returns when every chunk has run.  Callable from engine workers (the
 * normal case: an op's kernel) and from any other thread.  Returns MXP_OK,
 * or MXP_EINVAL for n < 0 or fn NULL. */
int mxp__parallel_for(int64_t n, int64_t grain,
                      void (*fn)(void *arg, int64_t begin, int64_t end), void *arg);

/* The budget (same as mxp_num_threads()). */
int mxp__parallel_budget(void);

/* Slot accounting used by engine workers. */
int mxp__parallel_try_acquire(int k);   /* take up to k free slots; returns how many */
void mxp__parallel_acquire_one(void);   /* block (yielding) until one slot is free */
void mxp__parallel_release(int k);
int mxp__parallel_busy(void);           /* slots held now (diagnostics, tests) */

/* Set flush-to-zero / denormals-are-zero on the calling thread (x86 SSE). */
void mxp__parallel_set_ftz(void);

/* Fork child / shutdown: forget or join helper threads. */
void mxp__parallel_shutdown(void);
void mxp__parallel_before_fork(void);
void mxp__parallel_after_fork_parent(void);
void mxp__parallel_after_fork_child(void);

#endif /* MXP_ENGINE_PARALLEL_H */
