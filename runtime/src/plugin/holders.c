/* holders.c — long-lived users of pack code that a reload can ask to let go.
 *
 * A bound executor keeps impl instances (and through them pins on packs)
 * between its calls, so that a training step creates nothing.  A reload
 * must wait for those pins, but it must not wait for the application's next
 * call: the executor may be idle (an evaluation executor beside a training
 * one), or it may be mid-pair (forward done, backward to come), where
 * dropping its instances would split a forward from its backward.
 *
 * So each such owner registers a holder: a mutex it holds during each of
 * its calls (mxp__holder_enter / _leave), a `busy` flag it sets between a
 * training forward and its backward, and a release callback that drops
 * everything that pins packs (the next call re-resolves and recreates).
 * Who releases, and when:
 *   - the owner itself, entering a call or leaving one while not busy, when
 *     a reload is pending: its step boundary;
 *   - the reloading thread (mxp__holders_revoke_idle), for holders that are
 *     neither in a call (try-lock) nor busy.
 * The reloading thread only try-locks holders (an owner blocked in a call
 * waiting for the reload must not deadlock it) and retries while it drains.
 * Lock order: g_mu, then a holder's mu (try-lock only). */
#include "plugin/plugin_impl.h"

#include <stdlib.h>

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static mxp__holder *g_first;
static atomic_int g_pending; /* reloads between their quiesce and swap */

void mxp__holder_register(mxp__holder *h, void (*release)(void *owner), void *owner) {
    mxp__mutex_init(&h->mu);
    h->busy = 0;
    h->release = release;
    h->owner = owner;
    pthread_mutex_lock(&g_mu);
    h->prev = NULL;
    h->next = g_first;
    if (g_first) g_first->prev = h;
    g_first = h;
    pthread_mutex_unlock(&g_mu);
}

void mxp__holder_unregister(mxp__holder *h) {
    if (!h->release) return; /* never registered */
    pthread_mutex_lock(&g_mu);
    if (h->prev) h->prev->next = h->next;
    else g_first = h->next;
    if (h->next) h->next->prev = h->prev;
    pthread_mutex_unlock(&g_mu);
    mxp__mutex_destroy(&h->mu);
    h->release = NULL;
}

int mxp__reload_pending(void) { return atomic_load(&g_pending) > 0; }

void mxp__reload_pending_add(int delta) {
    atomic_fetch_add(&g_pending, delta);
    if (delta < 0) mxp__pack_notify();
}

void mxp__holder_enter(mxp__holder *h, int boundary) {
    mxp__mutex_lock(&h->mu);
    if (boundary) h->busy = 0; /* a new step: an unfinished pair is abandoned */
    if (!h->busy && mxp__reload_pending()) h->release(h->owner);
    /* A step not tied to held instances waits out pending reloads (holding
     * nothing now); a backward must finish on what its forward pinned. */
    mxp__pin_scope_enter(!h->busy);
}

void mxp__holder_leave(mxp__holder *h, int busy) {
    h->busy = busy;
    if (!busy && mxp__reload_pending()) h->release(h->owner);
    mxp__pin_scope_leave();
    mxp__mutex_unlock(&h->mu);
}

int mxp__holders_revoke_idle(void) {
    int n = 0;
    pthread_mutex_lock(&g_mu);
    for (mxp__holder *h = g_first; h; h = h->next) {
        if (mxp__mutex_trylock(&h->mu)) continue; /* in a call: it releases at its boundary */
        if (!h->busy) {
            h->release(h->owner);
            n++;
        }
        mxp__mutex_unlock(&h->mu);
    }
    pthread_mutex_unlock(&g_mu);
    return n;
}
