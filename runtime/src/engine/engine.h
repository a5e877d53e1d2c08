/* engine/engine.h — the engine module's interface to the rest of the runtime
 * (packs reach it through the host table).  The public API is
 * <mxplug/engine.h>; this adds what other runtime modules need:
 *   - a hook run once at the start of every engine worker and parallel_for
 *     helper thread (the ops pack uses it to call openblas_set_num_threads(1),
 *     because OpenBLAS's own pool must never run inside engine workers);
 *   - device hooks, so a device pack can give its device type worker streams
 *     (a worker pool per (device type, id) is created lazily on first push);
 *   - mxp__parallel_for (parallel.h), intra-op parallelism under the shared
 *     thread budget;
 *   - fork hooks, so modules that keep locks (storage) are quiesced around
 *     fork() without the engine including them (no upward edge).
 * Not here: the scheduling machinery (engine_impl.h). */
#ifndef MXP_ENGINE_ENGINE_H
#define MXP_ENGINE_ENGINE_H

#include "base/base.h"
#include "engine/parallel.h"

#include <stdbool.h>

/* Set (or with NULL clear) the function every engine thread calls once when
 * it starts, after flush-to-zero is set.  Threads already running are not
 * affected, so call it before the first push (pack load time).  Thread-safe. */
void mxp__engine_set_worker_init(void (*fn)(void));

/* How a non-CPU device type gets workers.  All slots optional. */
typedef struct mxp__engine_device_hooks {
    int normal_workers;   /* per device id; <= 0 means 2 */
    int copy_workers;     /* per device id; <= 0 means 1 */
    /* Called on the worker thread before its first function; *out_stream is
     * passed as mxp_run_ctx.stream.  lane: 0 normal, 1 prioritized, 2 copy. */
    int (*stream_create)(mxp_device dev, int lane, void **out_stream);
    void (*stream_destroy)(mxp_device dev, void *stream);
} mxp__engine_device_hooks;

/* Register workers for a device type (not CPU types, which are built in).
 * hooks is copied.  Returns MXP_EINVAL for a CPU type or NULL, MXP_EEXIST if
 * already registered. */
int mxp__engine_register_device(int32_t dev_type, const mxp__engine_device_hooks *hooks);

/* Internal: the registered hooks for a device type, or NULL. */
const mxp__engine_device_hooks *mxp__engine_device_hooks_for(int32_t dev_type);

/* Internal: the worker-init hook currently set (may be NULL). */
void mxp__engine_run_worker_init(void);

/* Number of writes pushed on var so far (counted at push, not completion):
 * a value that differs from an earlier reading means the data was (or is
 * about to be) overwritten since.  Autograd checks recorded inputs with it. */
uint64_t mxp__engine_var_writes_pushed(const mxp_var *v);

/* The version a pack sees in mxp_tensor.version (mxp/tensor.h): changes on
 * every completed write of var, and differs between vars — the var's
 * creation number in the high 40 bits, its write count (mod 2^24) in the
 * low 24 — so a pooled address reused by another array never repeats an
 * earlier (data, version) pair.  mxp_engine_var_version alone counts from 0
 * in every var: a pack caching packed weights by it would have taken a
 * stale pack for a new weight at a reused address. */
uint64_t mxp__engine_var_stamp(const mxp_var *v);
/* A version no var's stamp and no other call returns: for scratch tensors
 * handed to a pack outside a var (tune's timing runs). */
uint64_t mxp__engine_new_stamp(void);

/* A var's write hook: work that must run before the var's next write —
 * the KVStore's copy-on-write of a sum it left in the caller's array
 * (kvstore.c, lazy store).  An armed hook fires once, on the thread that
 * pushes the next write on the var (any push path, wait_to_write and the
 * free of the array's chunk included), before that write is registered:
 * whatever fire() pushes orders before the write.  fire() may push but
 * must not wait; it owns nothing of the hook (the armer frees it).
 * One hook per var. */
typedef struct mxp__var_write_hook mxp__var_write_hook;
struct mxp__var_write_hook {
    void (*fire)(mxp__var_write_hook *self);
};
/* Arm h on v; a hook armed there before is fired first. */
void mxp__engine_var_arm_write_hook(mxp_var *v, mxp__var_write_hook *h);
/* Take h back off v if it is still armed there: true; false when a write
 * took it (fire() has run or is running on that thread). */
bool mxp__engine_var_disarm_write_hook(mxp_var *v, mxp__var_write_hook *h);

/* mxp_engine_push (args at this library's size), for work the caller
 * judged tiny — smaller than handing it to a worker and back (a 1-element
 * imperative op, freeing an array): when the push finds every var free
 * (nothing pending on them) and the calling thread is not inside an engine
 * function, the function runs here before the call returns, as PyTorch
 * eager runs ops; otherwise it queues as any push.  Only synchronous
 * functions on the CPU compute lane.  Ordering, versions and errors are
 * the engine's as for a worker's run (threaded.c, run_on_pusher). */
int mxp__engine_push_here(const mxp_engine_push_args *args);
/* As mxp__engine_push_here, for a caller whose var lists are known good:
 * no NULL var, none listed twice or in both lists (the invoke cache's
 * prepared forward: distinct inputs read, fresh outputs written). */
int mxp__engine_push_here_distinct(const mxp_engine_push_args *args);

/* mxp_engine_push (args at this library's size) of an asynchronous
 * function that only hands work to another thread and returns at once (a
 * KVStore transport's pushpull: a queue append).  When the last of its
 * vars is granted on an engine worker (the op writing its input just
 * completed there), it runs right there, before that worker's next op,
 * instead of being queued for another worker: with one core per process,
 * each queued hand-off woke a second worker that preempted the compute
 * one.  Made ready anywhere else (at its push, on a transport's thread)
 * it queues as a push with the same args would.  Ordering, versions and
 * errors are the engine's as for a worker's run. */
int mxp__engine_push_handoff(const mxp_engine_push_args *args);

/* Per thread: while on (returns the previous setting), a CPU compute
 * block this thread pushes that is ready at its push (every var free) runs
 * here, before the push returns, instead of going to a worker — as the
 * naive engine runs everything, but only for this thread's ready work; a
 * block that must wait for others still goes to a worker when ready.  For
 * a driver that waits for its steps anyway (a training loop): a small
 * net's step is a chain of ops of tens of microseconds, and each hand-off
 * to a worker and back costs a wake-up, which on a loaded machine is worth
 * more than the op (the MLP: 2x samples/s).  Only synchronous functions,
 * never inside an engine function; parallel_for inside the function still
 * spreads one op over the budget's helpers. */
int mxp__engine_pusher_runs_ready(int on);

/* What mxp_engine_delete_var does once the var's turn comes, done now when
 * it has come already: if no function reads, writes or waits on v, free it
 * and return true; else leave it (false: delete it the usual way).  The
 * caller guarantees nothing pushes on v any more (its last user is gone),
 * so an idle var stays idle.  An error the var carries unraised goes with
 * it, as with delete_var (wait_for_all still reports it). */
bool mxp__engine_var_free_if_idle(mxp_var *v);

/* Wait until every function pushed so far (and any pushed meanwhile) has
 * completed; errors they recorded stay for a later wait to report.
 * MXP_EBUSY from inside an engine function (waiting there would deadlock). */
int mxp__engine_drain(void);

/* Functions pushed and not yet completed (0 when no engine exists). */
int64_t mxp__engine_in_flight(void);

/* fork(): a module below or beside the engine whose locks a thread outside
 * the engine may hold (storage's pools) registers them here, so the engine
 * needs no knowledge of it.  `before` runs last in the engine's prepare
 * handler (once no engine work runs, the engine's own locks held); `after`
 * runs in parent and child alike, before the engine's own locks are
 * released, in the reverse order of registration.  At most
 * MXP__ENGINE_FORK_HOOKS_MAX pairs (MXP_ENOMEM beyond).  Register before
 * the module takes its locks for the first time (pthread_once): hooks are
 * never removed.  Thread-safe. */
#define MXP__ENGINE_FORK_HOOKS_MAX 8
int mxp__engine_register_fork_hooks(void (*before)(void), void (*after)(void));

#endif /* MXP_ENGINE_ENGINE_H */
