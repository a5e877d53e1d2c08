/* reload.c — mxp_pack_reload: replace a loaded pack by its file on disk
 * while the process runs, with bound executors in use, or keep the old one.
 *
 * Steps:
 *   1. prepare, with the old pack in service: re-read the pack's manifest
 *      entry (a rebuild may add or remove ops); open a private copy of the
 *      new library (glibc's dlopen returns the already-loaded object for a
 *      path or a file it knows, even when the file was replaced), check
 *      its descriptor, run its init against a staging registrar and
 *      validate what it registered against the new entry.  Any failure
 *      here is a rollback by construction: the new copy is closed, the old
 *      one never stopped, and the error says why.
 *   2. quiesce: mark the pack reloading (new pins wait, impl_ref.c), bump
 *      the registry generation, and wait until every pin on the pack is
 *      released.  Long-lived holders (bound executors: holders.c) drop
 *      their instances at their next step boundary, or at once when idle
 *      (this thread revokes idle holders while it waits); in-flight work
 *      drains through the engine.  Bounded by $MXP_RELOAD_TIMEOUT_MS
 *      (default 10000): on timeout the new copy is discarded, MXP_EBUSY.
 *   3. swap, under the load lock: unpublish the old registrations, publish
 *      the staged ones, remove the ops and impls the new build dropped
 *      (reload_ops.c), fini + dlclose the old library, then hand the pack
 *      the new build's counters (pack_stats.c) and free the old ones;
 *      clear the flag and bump the generation, so holders re-resolve to
 *      the new code.
 * An op the new build drops while a bound executor or optimizer has a node
 * of it refuses the reload, checked after step 1 and again just before
 * the swap (reload_ops.c).  A pack that is not loaded (or FAILED) is simply
 * (re)loaded. */
#include "plugin/plugin_impl.h"
#include "base/env.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long reload_timeout_ms(void) {
    return mxp__env_int("MXP_RELOAD_TIMEOUT_MS", 1, 86400000L, 10000);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Re-read p's manifest and find p's entry in it.  The parsed manifest is
 * kept by the registry (old entries stay valid: applications may hold
 * strings from them). */
static int reread_entry(mxp_pack *p, mxp_man_pack **out) {
    *out = NULL;
    mxp_manifest *m = NULL;
    int rc = mxp__manifest_parse_file(p->manifest_path, &m);
    if (rc) return mxp__error_prefix(rc, "re-reading the manifest");
    for (int i = 0; i < m->n_packs; i++)
        if (!strcmp(m->packs[i].name, p->man->name)) *out = &m->packs[i];
    if (!*out) {
        mxp__manifest_free(m);
        return mxp__error(MXP_ENOENT, "manifest %s no longer lists the pack", p->manifest_path);
    }
    rc = mxp__registry_keep_manifest(m);
    if (rc) *out = NULL;
    return rc;
}

/* A private copy of the library to dlopen: next to it, else in $TMPDIR.
 * A copy, not a link: glibc also recognises a loaded object by its file's
 * device and inode, and would hand back the running copy (its init run
 * again under its users).  The caller unlinks it once dlopen has mapped it. */
static int copy_to(const char *lib, const char *dst) {
    int in = open(lib, O_RDONLY | O_CLOEXEC);
    if (in < 0) return mxp__error(errno == ENOENT ? MXP_ENOENT : MXP_EIO, "library %s: %s", lib, strerror(errno));
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
    if (out < 0) {
        int e = errno;
        close(in);
        return mxp__error(MXP_EIO, "copying %s to %s: %s", lib, dst, strerror(e));
    }
    char chunk[65536];
    ssize_t r;
    int rc = MXP_OK;
    while ((r = read(in, chunk, sizeof chunk)) > 0)
        if (write(out, chunk, (size_t)r) != r) {
            rc = mxp__error(MXP_EIO, "copying %s to %s: %s", lib, dst, strerror(errno));
            break;
        }
    if (r < 0 && !rc) rc = mxp__error(MXP_EIO, "reading %s: %s", lib, strerror(errno));
    close(in);
    if (close(out) && !rc) rc = mxp__error(MXP_EIO, "copying %s to %s: %s", lib, dst, strerror(errno));
    if (rc) unlink(dst);
    return rc;
}

static int alias_library(const char *lib, char *buf, size_t cap) {
    static atomic_uint seq;
    unsigned n = atomic_fetch_add(&seq, 1);
    const char *slash = strrchr(lib, '/');
    int dir_len = slash ? (int)(slash - lib) : 1;
    const char *base = slash ? slash + 1 : lib;
    snprintf(buf, cap, "%.*s/.%s.reload-%ld-%u", dir_len, slash ? lib : ".", base, (long)getpid(), n);
    int rc = copy_to(lib, buf);
    if (rc != MXP_EIO) return rc; /* done, or the library is missing */
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, cap, "%s/mxp-reload-%ld-%u-%s", tmp && *tmp ? tmp : "/tmp", (long)getpid(), n, base);
    return copy_to(lib, buf);
}

typedef struct prepared {
    mxp_man_pack *man;
    void *handle;
    const mxp_plugin_desc *desc;
    mxp_stage *stage;
    int inited;
} prepared;

static void discard(prepared *np) {
    if (np->inited && MXP_HAS_FIELD(np->desc, mxp_plugin_desc, fini) && np->desc->fini) {
        mxp_plugin_fini_args fa = {MXP_HEADER(mxp_plugin_fini_args), mxp__host_table()};
        np->desc->fini(&fa);
    }
    mxp__stage_free(np->stage);
    if (np->handle) dlclose(np->handle);
    memset(np, 0, sizeof *np);
}

/* Step 1: the new copy, initialised and validated, nothing published. */
static int prepare(mxp_pack *p, prepared *np) {
    memset(np, 0, sizeof *np);
    const char *name = p->man->name;
    int rc = reread_entry(p, &np->man);
    if (rc) return rc;
    const char *lib = np->man->library;
    if (np->man->sha256) {
        char hex[65];
        if (mxp__sha256_file(lib, hex)) return mxp__error(MXP_ENOENT, "library %s not found (sha256 check)", lib);
        if (strcmp(hex, np->man->sha256))
            return mxp__error(MXP_EPLUGIN, "%s: sha256 mismatch: manifest says %s, file is %s", lib,
                              np->man->sha256, hex);
    }
    char alias[4096];
    if ((rc = alias_library(lib, alias, sizeof alias))) return rc;
    rc = mxp__loader_open(alias, name, &np->handle, &np->desc);
    unlink(alias);
    if (rc) return rc;
    if ((rc = mxp__stage_create(p, name, &np->stage))) {
        discard(np);
        return rc;
    }
    mxp__stage_set_manifest(np->stage, np->man);
    mxp_plugin_init_args ia = {MXP_HEADER(mxp_plugin_init_args), mxp__host_table(), mxp__stage_registrar(np->stage),
                               lib};
    mxp__error_clear();
    rc = np->desc->init(&ia);
    if (rc != MXP_OK) {
        char copy[1024];
        snprintf(copy, sizeof copy, "%s", *mxp_last_error() ? mxp_last_error() : "(the pack gave no message)");
        discard(np);
        return mxp__error(rc < 0 ? rc : MXP_EPLUGIN, "%s: init failed (%s): %s", lib, mxp_status_name(rc), copy);
    }
    np->inited = 1;
    if ((rc = mxp__stage_validate(np->stage))) {
        char copy[1024];
        snprintf(copy, sizeof copy, "%s", mxp_last_error());
        discard(np);
        return mxp__error(rc, "%s: %s", lib, copy);
    }
    return MXP_OK;
}

/* Step 2: wait for pins to go, revoking idle holders meanwhile. */
static int quiesce(mxp_pack *p, long timeout_ms) {
    double deadline = now_ms() + (double)timeout_ms;
    for (;;) {
        mxp__holders_revoke_idle();
        if (atomic_load(&p->pins) == 0 && mxp__pins_in_scope() == 0) return MXP_OK;
        double left = deadline - now_ms();
        if (left <= 0) break;
        /* Wakes on the last unpin; the short period re-checks idle holders. */
        if (mxp__pack_wait_unpinned(p, left < 2 ? 1 : 2)) return MXP_OK;
    }
    return mxp__error(MXP_EBUSY, "pack '%s': %ld implementation reference(s) still held, %ld call(s) in progress "
                      "after %ld ms (work in flight, or an executor between a forward and its backward)",
                      p->man->name, (long)atomic_load(&p->pins), mxp__pins_in_scope(), timeout_ms);
}

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
    if (!atomic_compare_exchange_strong(&p->reload_claimed, &expect, 1))
        return mxp__error(MXP_EBUSY, "pack '%s': a reload is already in progress", name);
    double t0 = now_ms();
    const char *old_lib = p->man->library;
    prepared np;
    rc = prepare(p, &np);
    if (!rc && (rc = mxp__reload_check_dropped(p, np.stage))) discard(&np);
    if (rc) {
        atomic_store(&p->reload_claimed, 0);
        return mxp__error_prefix(rc, "reloading pack '%s' (the loaded version stays in service)", name);
    }
    double t1 = now_ms();
    /* Quiesce. */
    atomic_store(&p->reloading, 1);
    mxp__reload_pending_add(1);
    mxp__registry_bump();
    long timeout = reload_timeout_ms();
    rc = quiesce(p, timeout);
    /* Binds that raced with step 1 are counted by now (reload_ops.c); the
     * load lock keeps new loads out until the swap is done. */
    if (!rc) {
        mxp__registry_load_lock();
        rc = mxp__reload_check_dropped(p, np.stage);
        if (rc) mxp__registry_load_unlock();
    }
    if (rc) {
        char copy[1024];
        snprintf(copy, sizeof copy, "%s", mxp_last_error());
        atomic_store(&p->reloading, 0);
        mxp__reload_pending_add(-1);
        discard(&np);
        atomic_store(&p->reload_claimed, 0);
        mxp__registry_bump();
        return mxp__error(rc, "reloading pack '%s' (%s): %s; the loaded version stays in service", name, old_lib,
                          copy);
    }
    double t2 = now_ms();
    /* Swap (the load lock is held since the check above). */
    const mxp_plugin_desc *old = p->desc;
    void *old_handle = p->handle;
    mxp__stage_unpublish(p);
    rc = mxp__stage_publish(np.stage);
    if (rc) {
        /* Only allocation can fail here; the old code is unpublished but
         * still mapped: put it back the way a fresh load would. */
        char copy[1024];
        snprintf(copy, sizeof copy, "%s", mxp_last_error());
        discard(&np);
        if (old && MXP_HAS_FIELD(old, mxp_plugin_desc, fini) && old->fini) {
            mxp_plugin_fini_args fa = {MXP_HEADER(mxp_plugin_fini_args), mxp__host_table()};
            old->fini(&fa);
        }
        if (old_handle) dlclose(old_handle);
        mxp__registry_wrlock();
        p->handle = NULL;
        p->desc = NULL;
        p->state = PACK_NOT_LOADED;
        mxp__registry_unlock();
        int rl = mxp__pack_load(p);
        mxp__registry_load_unlock();
        atomic_store(&p->reloading, 0);
        mxp__reload_pending_add(-1);
        atomic_store(&p->reload_claimed, 0);
        mxp__registry_bump();
        return mxp__error(rc, "reloading pack '%s': publishing the new version failed (%s); %s", name, copy,
                          rl ? "the old version could not be loaded again" : "the old version was loaded again");
    }
    int n_removed = mxp__reload_remove_dropped(p);
    if (old && MXP_HAS_FIELD(old, mxp_plugin_desc, fini) && old->fini) {
        mxp_plugin_fini_args fa = {MXP_HEADER(mxp_plugin_fini_args), mxp__host_table()};
        old->fini(&fa);
    }
    if (old_handle) dlclose(old_handle);
    /* The old build's counters go with it (it can no longer bump them). */
    mxp__stat_set_free(mxp__pack_stats_swap(p, mxp__stage_take_stats(np.stage)));
    mxp__stage_free(np.stage);
    mxp__registry_wrlock();
    p->handle = np.handle;
    p->desc = np.desc;
    p->man = np.man;
    p->desc_major = np.desc->hdr.abi_major;
    p->desc_minor = np.desc->hdr.abi_minor;
    p->desc_min_host_minor = np.desc->min_host_minor;
    mxp__pack_set_loaded_version_locked(p, np.desc->version);
    p->reloads++;
    mxp__registry_unlock();
    mxp__registry_load_unlock();
    atomic_store(&p->reloading, 0);
    mxp__reload_pending_add(-1);
    atomic_store(&p->reload_claimed, 0);
    mxp__registry_bump();
    double t3 = now_ms();
    MXP_LOGI("plugin", "reloaded pack '%s' %s (%s): prepare %.1f ms, quiesce %.1f ms, swap %.1f ms; %d op/impl "
             "entr%s removed", name, np.desc->version ? np.desc->version : "", p->man->library, t1 - t0, t2 - t1,
             t3 - t2, n_removed, n_removed == 1 ? "y" : "ies");
    return MXP_OK;
}
