/* kvstore/lazy_store.c — the store's copy of a dist_sync in-place pushpull's
 * sum, made only when something needs it (copy-on-write).
 *
 * pushpull_in_place (kvstore.c) sums a key over the workers in the
 * caller's out array.  A later pull must return that sum, so it used to be
 * copied out -> stored right after, on every pushpull: a memcpy of the
 * whole key that ran while the caller woke up to read out (on one core
 * per worker, 16 MiB: ~1.3 ms of a ~10 ms pushpull).  Instead the entry
 * remembers that its value lives in out (holding a reference to it) and
 * arms a write hook on out's var (engine.h).  The copy out -> stored is
 * pushed by whichever comes first:
 *   - the next write pushed on out (the caller overwriting it, a
 *     wait_to_write, another key summed into the same array): the engine
 *     fires the hook before registering that write, so the copy reads the
 *     sum;
 *   - the next push or pull of the key (mxp__kv_lazy_settle(e, 1)).
 * The next in-place pushpull of the key drops the pending copy
 * (settle(e, 0)): its sum replaces the stored value anyway.  So a loop
 * that pushpulls a key and never pulls it copies nothing.
 *
 * Invariants: at most one pending copy per entry (e->lazy); the entry's
 * owner (the kvstore API's caller) alone arms and settles; fire() runs on
 * whatever thread pushes the write and only pushes the copy and publishes
 * `fired`; the reference to out keeps its var alive while armed.  A copy
 * that could not be pushed (out of memory) is reported by the next
 * push or pull of the key, naming it. */
#include "kvstore/kvstore_impl.h"

#include "engine/engine.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

struct kv_lazy {
    mxp__var_write_hook hook; /* first: fire() gets &hook                   */
    const kv_entry *e;
    mxp_ndarray *src;         /* the caller's out (a reference of ours)     */
    int priority;
    atomic_int fired;         /* 0 armed, 1 copy pushed, 2 push failed      */
};

static void lazy_fire(mxp__var_write_hook *h) {
    struct kv_lazy *l = (struct kv_lazy *)h;
    int rc = mxp__kv_push_copy(l->e, l->src, l->e->stored, l->priority, "store");
    atomic_store_explicit(&l->fired, rc == MXP_OK ? 1 : 2, memory_order_release);
}

int mxp__kv_lazy_arm(kv_entry *e, mxp_ndarray *out, int priority) {
    struct kv_lazy *l = calloc(1, sizeof *l);
    if (!l) return mxp__kv_push_copy(e, out, e->stored, priority, "store"); /* the eager copy */
    l->hook.fire = lazy_fire;
    l->e = e;
    l->src = mxp_ndarray_retain(out);
    l->priority = priority;
    e->lazy = l;
    mxp__engine_var_arm_write_hook(mxp_ndarray_var(out), &l->hook);
    return MXP_OK;
}

int mxp__kv_lazy_settle(kv_entry *e, int copy) {
    struct kv_lazy *l = e->lazy;
    if (!l) return MXP_OK;
    e->lazy = NULL;
    int rc = MXP_OK;
    if (mxp__engine_var_disarm_write_hook(mxp_ndarray_var(l->src), &l->hook)) {
        if (copy) rc = mxp__kv_push_copy(e, l->src, e->stored, l->priority, "store");
    } else {
        /* A write on out took the hook: its fire() pushes the copy now (a
         * few microseconds) on that thread. */
        int f;
        while (!(f = atomic_load_explicit(&l->fired, memory_order_acquire))) sched_yield();
        if (f == 2)
            rc = mxp__error(MXP_ENOMEM, "kvstore %s: the copy of its last pushpull's sum into the store could not "
                            "be queued (out of memory); that value is lost", e->label);
    }
    mxp_ndarray_release(l->src);
    free(l);
    return rc;
}
