/* impl_ref.c — reference-counted implementation handles that pin packs.
 *
 * A pack's pin count (p->pins, atomic) is the number of live impl refs
 * into it (as impl pack or as the op's defining pack).  While a reload is
 * under way (p->reloading) new pins wait; reload.c waits for the count to
 * drop to zero ("drain") before fini/dlclose.  The fast path — pack not
 * reloading — is two atomic operations and no lock: increment, then
 * re-check the flag (a Dekker-style handshake with reload, which sets the
 * flag and then reads the count; both are sequentially consistent).
 * A ref also copies the def/impl pointers current at acquisition, so work
 * in flight keeps the impl it started with even if the policy changes. */
#include "plugin/plugin_impl.h"
#include "base/env.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t g_pin_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_pin_cv = PTHREAD_COND_INITIALIZER;

static long pin_timeout_ms(void) {
    return mxp__env_int("MXP_RELOAD_TIMEOUT_MS", 1, 86400000L, 10000);
}

static void deadline_in(struct timespec *ts, long ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

void mxp__pack_notify(void) {
    pthread_mutex_lock(&g_pin_mu);
    pthread_cond_broadcast(&g_pin_cv);
    pthread_mutex_unlock(&g_pin_mu);
}

/* Pin scopes: a call that may take several pins on one pack (a node's def,
 * then its impl; an executor's nodes one after another) runs inside one.
 * Inside, pins never wait for a reload (waiting while holding the first
 * pin would deadlock with a reload waiting for it); instead the reload
 * waits until no thread is inside a scope (mxp__pins_in_scope) before it
 * swaps.  A waiting entry first waits for pending reloads, holding no pin
 * (the caller's contract), so a new step never starts on a pack being
 * swapped.  Entry is a Dekker handshake with reload.c: increment, then
 * look at the pending count (both sequentially consistent). */
static atomic_long g_in_scope;
static _Thread_local int tl_scope_depth;

void mxp__pin_scope_enter(int wait_for_reloads) {
    if (tl_scope_depth++) return;
    for (;;) {
        atomic_fetch_add(&g_in_scope, 1);
        if (!wait_for_reloads || !mxp__reload_pending()) return;
        atomic_fetch_sub(&g_in_scope, 1);
        mxp__pack_notify();
        pthread_mutex_lock(&g_pin_mu);
        while (mxp__reload_pending()) {
            struct timespec ts;
            deadline_in(&ts, 50);
            pthread_cond_timedwait(&g_pin_cv, &g_pin_mu, &ts);
        }
        pthread_mutex_unlock(&g_pin_mu);
    }
}

void mxp__pin_scope_leave(void) {
    if (--tl_scope_depth) return;
    atomic_fetch_sub(&g_in_scope, 1);
    if (mxp__reload_pending()) mxp__pack_notify();
}

long mxp__pins_in_scope(void) { return atomic_load(&g_in_scope); }

int mxp__pack_pin(mxp_pack *p) {
    if (!atomic_load(&p->reloading)) {
        atomic_fetch_add(&p->pins, 1);
        if (!atomic_load(&p->reloading)) return MXP_OK;
        if (tl_scope_depth) return MXP_OK; /* the reload waits for this scope */
        mxp__pack_unpin(p);
    } else if (tl_scope_depth) {
        atomic_fetch_add(&p->pins, 1);
        return MXP_OK;
    }
    struct timespec ts;
    deadline_in(&ts, pin_timeout_ms());
    pthread_mutex_lock(&g_pin_mu);
    int rc = 0;
    for (;;) {
        while (atomic_load(&p->reloading) && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&g_pin_cv, &g_pin_mu, &ts);
        if (atomic_load(&p->reloading)) {
            pthread_mutex_unlock(&g_pin_mu);
            return mxp__error(MXP_EBUSY, "pack '%s': still reloading after %ld ms", p->man->name, pin_timeout_ms());
        }
        atomic_fetch_add(&p->pins, 1);
        if (!atomic_load(&p->reloading)) break;
        atomic_fetch_sub(&p->pins, 1);
        pthread_cond_broadcast(&g_pin_cv);
    }
    pthread_mutex_unlock(&g_pin_mu);
    return MXP_OK;
}

void mxp__pack_unpin(mxp_pack *p) {
    if (!p) return;
    long left = atomic_fetch_sub(&p->pins, 1) - 1;
    MXP_ASSERT(left >= 0);
    if (left == 0 && atomic_load(&p->reloading)) mxp__pack_notify();
}

int mxp__pack_wait_unpinned(mxp_pack *p, long ms) {
    struct timespec ts;
    deadline_in(&ts, ms);
    pthread_mutex_lock(&g_pin_mu);
    int rc = 0;
    while ((atomic_load(&p->pins) > 0 || atomic_load(&g_in_scope) > 0) && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&g_pin_cv, &g_pin_mu, &ts);
    int none = atomic_load(&p->pins) == 0 && atomic_load(&g_in_scope) == 0;
    pthread_mutex_unlock(&g_pin_mu);
    return none;
}

int mxp__pack_drain(mxp_pack *p, long timeout_ms) {
    struct timespec ts;
    deadline_in(&ts, timeout_ms);
    pthread_mutex_lock(&g_pin_mu);
    int rc = 0;
    while (atomic_load(&p->pins) > 0 && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&g_pin_cv, &g_pin_mu, &ts);
    long left = atomic_load(&p->pins);
    pthread_mutex_unlock(&g_pin_mu);
    if (left > 0)
        return mxp__error(MXP_EBUSY, "pack '%s': %ld implementation reference(s) still held after %ld ms "
                          "(in-flight work, or bound executors that have not run since the change)",
                          p->man->name, left, timeout_ms);
    return MXP_OK;
}

int mxp__impl_ref_acquire(mxp_impl_entry *e, mxp_impl_ref **out) {
    *out = NULL;
    mxp_pack *ip = e->pack, *dp = e->op->pack;
    int rc = mxp__pack_pin(ip);
    if (rc) return rc;
    if (dp && dp != ip && (rc = mxp__pack_pin(dp))) {
        mxp__pack_unpin(ip);
        return rc;
    }
    mxp__registry_rdlock();
    const mxp_op_impl *impl = e->impl;
    const mxp_op_def *def = e->op->def;
    mxp__registry_unlock();
    if (!impl || !def) {
        mxp__pack_unpin(ip);
        if (dp && dp != ip) mxp__pack_unpin(dp);
        return mxp__error(MXP_ENOENT, "op '%s': impl '%s' (%s) is not loaded%s", e->op->name, e->name, e->device,
                          !def ? " (the op's defining pack is not loaded)" : "");
    }
    mxp_impl_ref *r = calloc(1, sizeof *r);
    if (!r) {
        mxp__pack_unpin(ip);
        if (dp && dp != ip) mxp__pack_unpin(dp);
        return mxp__error_oom("impl ref");
    }
    atomic_init(&r->refs, 1);
    r->op = e->op;
    r->entry = e;
    r->def = def;
    r->impl = impl;
    r->impl_pack = ip;
    r->def_pack = (dp && dp != ip) ? dp : NULL;
    r->generation = mxp_registry_generation();
    *out = r;
    return MXP_OK;
}

mxp_impl_ref *mxp__impl_ref_retain(mxp_impl_ref *r) {
    if (r) atomic_fetch_add(&r->refs, 1);
    return r;
}

void mxp__impl_ref_release(mxp_impl_ref *r) {
    if (!r) return;
    if (atomic_fetch_sub(&r->refs, 1) != 1) return;
    mxp__pack_unpin(r->impl_pack);
    if (r->def_pack) mxp__pack_unpin(r->def_pack);
    free(r);
}
