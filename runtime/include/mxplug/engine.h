/* mxplug/engine.h — the dependency engine (the seed's Engine, in C).
 * Part of mxplug.h; include <mxplug.h> rather than this file.
 *
 * A function is pushed with the variables it reads (const_vars) and writes
 * (mutate_vars).  Guarantee: two functions that share a variable that at
 * least one of them writes run in push order; readers of the same version
 * may run in parallel.  Every push returns at once.  Pushing from several
 * threads is safe.  Errors are values: a failing function marks the
 * variables it writes; dependants are skipped (unless MXP_FN_NO_SKIP) and
 * inherit the error; mxp_engine_wait_for_var returns it with a message that
 * names the op.
 *
 * The process has one engine, created on first use.  MXP_ENGINE_TYPE picks
 * it: "threaded" (default: per-device workers with separate lanes for
 * prioritized and copy work) or "naive" (runs every push synchronously on
 * the caller's thread, for debugging).  MXP_NUM_THREADS sets the thread
 * budget shared by engine workers and intra-op parallel_for. */
#ifndef MXPLUG_ENGINE_H
#define MXPLUG_ENGINE_H

#include <mxplug/base.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mxp_var mxp_var;             /* a dependency variable        */
typedef struct mxp_engine_op mxp_engine_op; /* a pre-created operator       */

/* Function properties (MXNet's FnProperty, same numbers, plus NO_SKIP). */
typedef enum mxp_fn_prop {
    MXP_FN_NORMAL          = 0,
    MXP_FN_COPY_FROM_DEV   = 1, /* copy lane */
    MXP_FN_COPY_TO_DEV     = 2, /* copy lane */
    MXP_FN_PRIORITIZED     = 3, /* priority lane, ordered by priority */
    MXP_FN_ASYNC           = 4, /* completes through the callback, later */
    MXP_FN_DELETE_VAR      = 5, /* internal: deletes a var */
    MXP_FN_DEV_PRIORITIZED = 6,
    MXP_FN_NO_SKIP         = 7  /* runs even when an input carries an error */
} mxp_fn_prop;

/* What a running function is told about where it runs. */
typedef struct mxp_run_ctx {
    uint32_t struct_size;  /* the library's sizeof (mxplug/base.h) */
    mxp_device device;
    void *stream;   /* device stream of this worker, NULL on CPU */
    int32_t worker; /* worker index within the engine, for diagnostics */
    int32_t reserved;
} mxp_run_ctx;

/* Completion of an async function: call done(token, status, message) exactly
 * once, from any thread.  message may be NULL when status is MXP_OK; it is
 * copied. */
typedef void (*mxp_engine_done_fn)(void *token, int status, const char *message);
typedef struct mxp_engine_callback {
    mxp_engine_done_fn done;
    void *token;
} mxp_engine_callback;

/* A synchronous function: returns a status; on failure the message in
 * mxp_last_error() of the worker thread is recorded with the error. */
typedef int (*mxp_engine_sync_fn)(void *arg, const mxp_run_ctx *ctx);
/* An asynchronous function: must eventually call cb.done. */
typedef void (*mxp_engine_async_fn)(void *arg, const mxp_run_ctx *ctx, mxp_engine_callback cb);

/* Optional: called once after the function ran (or was skipped), on the
 * worker thread, to release `arg`. */
typedef void (*mxp_engine_free_fn)(void *arg);

/* Everything a push needs.  Start from MXP_STRUCT_INIT(mxp_engine_push_args)
 * (or zero) and fill what you use. */
typedef struct mxp_engine_push_args {
    uint32_t struct_size;          /* sizeof as compiled (mxplug/base.h) */
    mxp_engine_sync_fn sync_fn;    /* exactly one of sync_fn, async_fn */
    mxp_engine_async_fn async_fn;
    void *arg;
    mxp_engine_free_fn free_arg;   /* optional */
    mxp_var *const *const_vars;    /* read dependencies (duplicates allowed) */
    int n_const;
    mxp_var *const *mutate_vars;   /* write dependencies (duplicates allowed) */
    int n_mutate;
    mxp_device device;             /* where it runs; {0,0} means CPU 0 */
    int prop;                      /* mxp_fn_prop */
    int priority;                  /* larger runs earlier in priority lanes */
    const char *name;              /* op name for errors and profiling; copied */
} mxp_engine_push_args;

/* Create a variable.  out: new var (owned by the caller; give it back with
 * mxp_engine_delete_var).  Thread-safe. */
MXP_API int mxp_engine_new_var(mxp_var **out);

/* Delete a variable after every function pushed so far that uses it has
 * completed.  NULL is a no-op. */
MXP_API void mxp_engine_delete_var(mxp_var *var);

/* Push a function.  Returns MXP_EINVAL for bad arguments (nothing is
 * pushed then); otherwise MXP_OK, and the function's own failure is
 * reported through its mutate vars. */
MXP_API int mxp_engine_push(const mxp_engine_push_args *args);

/* Pre-created operators: vars and properties fixed once, no allocation per
 * push.  args->arg is passed at every run; free_arg runs at delete (after
 * the op's in-flight pushes).  A pre-created op may be pushed again before
 * its previous pushes completed; the var rules order them.  A push of an
 * op whose runs so far were tiny (under 0.5 us on average) or that never
 * ran, with all its vars free, runs the function on the pushing thread
 * before the push returns (docs/engine.md); a function must not assume it
 * runs on an engine worker. */
MXP_API int mxp_engine_new_op(const mxp_engine_push_args *args, mxp_engine_op **out);
MXP_API int mxp_engine_push_op(mxp_engine_op *op, int priority);
/* Push a pre-created op with an argument of this push's own: the function
 * gets `arg` (not the op's), and release(arg), if not NULL, is called
 * exactly once after this push ran or was skipped (on the thread that
 * completes it, before the op's vars let dependants go).  Pushes are
 * ordered by the op's vars, so arguments reach the function in push order
 * however many are in flight.  On an error return nothing was pushed and
 * the caller still owns `arg`. */
MXP_API int mxp_engine_push_op_arg(mxp_engine_op *op, int priority, void *arg, mxp_engine_free_fn release);
/* Delete after every push of it has completed.  NULL is a no-op. */
MXP_API void mxp_engine_delete_op(mxp_engine_op *op);

/* Block until every function pushed so far that writes `var` has completed.
 * Returns the error the var carries (then clears it, so it is raised once,
 * also across the other vars the failing op wrote), with mxp_last_error()
 * naming the failing op ("op 'Convolution' failed: ..."); MXP_OK otherwise.
 * From inside an engine function it returns MXP_EMISUSE instead of blocking
 * (that would deadlock). */
MXP_API int mxp_engine_wait_for_var(mxp_var *var);

/* Block until everything pushed so far has completed (including work pushed
 * from inside functions meanwhile).  Returns the first error any function
 * raised since the last wait_for_all and not yet returned by a wait (then
 * clears them).  MXP_EMISUSE from inside an engine function. */
MXP_API int mxp_engine_wait_for_all(void);

/* Version of a var: incremented after every completed write. */
MXP_API uint64_t mxp_engine_var_version(const mxp_var *var);

/* Which engine runs: "naive" or "threaded".  Creates it if needed. */
MXP_API const char *mxp_engine_type(void);

/* The thread budget (MXP_NUM_THREADS, default: number of cores). */
MXP_API int mxp_num_threads(void);

/* Wait for all work, stop the workers and free the engine.  A later engine
 * call creates a new one.  Safe to call when none exists. */
MXP_API void mxp_engine_shutdown(void);

#ifdef __cplusplus
}
#endif
#endif /* MXPLUG_ENGINE_H */
