/* reload.c — mxp_pack_reload: replace a loaded pack by its file on disk
 * while the process runs.
 *
 * Steps: mark the pack reloading (new impl refs wait, see impl_ref.c) and
 * bump the registry generation, so that holders notice; wait until every
 * impl ref into the pack is released (in-flight calls finish on the impl
 * they started with; a bound executor or node runtime holds a ref between
 * forwards and must release it when it sees the generation change — the
 * node runtime does so at its next forward, i.e. it re-resolves lazily);
 * then, under the load lock: unpublish, fini, dlclose, dlopen, validate,
 * init, publish; clear the flag and bump the generation again.
 * The wait is bounded by $MXP_RELOAD_TIMEOUT_MS (default 10 s): on timeout
 * the reload is abandoned with MXP_EBUSY and the old pack stays in service.
 * A pack that is not loaded (or FAILED) is simply (re)loaded. */
#include "plugin/plugin.h"

#include <stdlib.h>
#include <string.h>



int mxp_pack_reload(const char *name) {
    int rc = mxp__registry_ensure();
    if (rc) return rc;
    if (!name) return mxp__error(MXP_EMISUSE, "mxp_pack_reload: NULL name");
    mxp__registry_rdlock();
    mxp_pack *p = mxp__registry_find_pack_locked(name);
    int state = p ? p->state : -1;
    mxp__registry_unlock();
    if (!p) return mxp__error(MXP_ENOENT, "pack '%s': not in any manifest", name);
    if (state == PACK_UNAVAILABLE) return mxp__pack_load(p); /* reports why */
    if (state != PACK_LOADED) {
        mxp__registry_load_lock();
        mxp__registry_wrlock();
        if (p->state == PACK_FAILED) p->state = PACK_NOT_LOADED;
        mxp__registry_unlock();
        mxp__registry_load_unlock();
        return mxp__pack_load(p);
    }
    int expect = 0;
    if (!atomic_compare_exchange_strong(&p->reloading, &expect, 1))
        return mxp__error(MXP_EBUSY, "pack '%s': a reload is already in progress", name);
    mxp__registry_bump();
    const char *s = getenv("MXP_RELOAD_TIMEOUT_MS");
    long timeout = s && atol(s) > 0 ? atol(s) : 10000;
    rc = mxp__pack_drain(p, timeout);
    if (rc) {
        atomic_store(&p->reloading, 0);
        mxp__pack_notify();
        return mxp__error_prefix(rc, "reloading pack '%s' (%s)", name, p->man->library);
    }
    mxp__registry_load_lock();
    mxp__pack_unload_locked(p, 1);
    rc = mxp__pack_load(p);
    mxp__registry_load_unlock();
    atomic_store(&p->reloading, 0);
    mxp__pack_notify();
    mxp__registry_bump();
    if (rc) return mxp__error_prefix(rc, "reloading pack '%s'", name);
    MXP_LOGI("plugin", "reloaded pack '%s' (%s)", name, p->man->library);
    return MXP_OK;
}
