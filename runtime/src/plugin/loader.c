/* loader.c — open a pack and bring it to LOADED: dependencies first,
 * sha256 check, dlopen(RTLD_NOW | RTLD_LOCAL), dlsym("mxp_plugin_v1"),
 * validation of the static descriptor BEFORE any other pack code runs
 * (struct_size, ABI major, min_host_minor, name), then init with the host
 * table and a staging registrar, validation and an all-or-nothing publish
 * (registrar.c).  Any failure rolls back (dlclose) and is recorded as the
 * pack's state FAILED with a reason naming the pack and its file; the rest
 * of the runtime keeps working.
 *
 * State machine (under load_lock): NOT_LOADED -> LOADING -> LOADED | FAILED;
 * LOADED -> NOT_LOADED by mxp__pack_unload_locked (reload, shutdown).  A
 * pack met again while LOADING is a dependency cycle.  Packs are never
 * dlclosed at process exit (shutdown passes do_dlclose = 0), because
 * atexit handlers or TLS destructors of a pack may still run. */
#include "plugin/plugin_impl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>



int mxp__loader_open(const char *path, const char *name_expect, void **out_handle,
                     const mxp_plugin_desc **out_desc) {
    *out_handle = NULL;
    *out_desc = NULL;
    const char *who = name_expect ? name_expect : "?";
    struct stat st;
    if (stat(path, &st) != 0)
        return mxp__error(MXP_ENOENT, "pack '%s' (%s): library not found", who, path);
    /* dlopen of a FIFO blocks forever; of a device, reads it. */
    if (!S_ISREG(st.st_mode)) {
        int rc = mxp_file_check_regular(path, "library", 0, NULL);
        return mxp__error_prefix(rc ? rc : MXP_EIO, "pack '%s'", who);
    }
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        return mxp__error(MXP_EPLUGIN, "pack '%s' (%s): cannot load: %s", who, path, e ? e : "dlopen failed");
    }
    dlerror();
    mxp_plugin_entry_fn entry;
    void *sym = dlsym(h, MXP_PLUGIN_ENTRY_NAME);
    memcpy(&entry, &sym, sizeof entry);
    if (!sym) {
        int other = 0;
        for (int v = 0; v < 10 && !other; v++) {
            char nm[32];
            snprintf(nm, sizeof nm, "mxp_plugin_v%d", v);
            if (v != MXP_ABI_MAJOR && dlsym(h, nm)) other = v ? v : -1;
        }
        dlclose(h);
        if (other > 0)
            return mxp__error(MXP_EABI, "pack '%s' (%s): built for plugin ABI %d.x (entry mxp_plugin_v%d), "
                              "host supports ABI %d.%d", who, path, other, other, MXP_ABI_MAJOR, MXP_ABI_MINOR);
        return mxp__error(MXP_EABI, "pack '%s' (%s): no entry symbol '%s' (not an mxplug pack?)", who, path,
                          MXP_PLUGIN_ENTRY_NAME);
    }
    const mxp_plugin_desc *d = entry();
    int rc = MXP_OK;
    if (!d) {
        rc = mxp__error(MXP_EABI, "pack '%s' (%s): %s() returned NULL", who, path, MXP_PLUGIN_ENTRY_NAME);
    } else if (d->hdr.struct_size < sizeof(mxp_header)) {
        rc = mxp__error(MXP_EABI, "pack '%s' (%s): descriptor struct_size %u is too small", who, path,
                        (unsigned)d->hdr.struct_size);
    } else if (d->hdr.abi_major != MXP_ABI_MAJOR) {
        rc = mxp__error(MXP_EABI, "pack '%s' (%s): built for plugin ABI %u.%u, host supports ABI %d.%d "
                        "(different major version)", who, path, d->hdr.abi_major, d->hdr.abi_minor,
                        MXP_ABI_MAJOR, MXP_ABI_MINOR);
    } else if (!MXP_HAS_FIELD(d, mxp_plugin_desc, init)) {
        rc = mxp__error(MXP_EABI, "pack '%s' (%s): descriptor struct_size %u does not cover the ABI 1.0 "
                        "fields (%zu bytes)", who, path, (unsigned)d->hdr.struct_size,
                        offsetof(mxp_plugin_desc, init) + sizeof(void *));
    } else if (d->min_host_minor > MXP_ABI_MINOR) {
        rc = mxp__error(MXP_EABI, "pack '%s' (%s): needs host ABI %d.%u or newer, host is ABI %d.%d", who,
                        path, MXP_ABI_MAJOR, d->min_host_minor, MXP_ABI_MAJOR, MXP_ABI_MINOR);
    } else if (!d->name || !*d->name) {
        rc = mxp__error(MXP_EABI, "pack '%s' (%s): descriptor has no name", who, path);
    } else if (name_expect && strcmp(d->name, name_expect)) {
        rc = mxp__error(MXP_EABI, "pack '%s' (%s): descriptor names the pack '%s', manifest says '%s'", who,
                        path, d->name, name_expect);
    } else if (!d->init) {
        rc = mxp__error(MXP_EABI, "pack '%s' (%s): descriptor has no init function", who, path);
    }
    if (rc) {
        dlclose(h);
        return rc;
    }
    *out_handle = h;
    *out_desc = d;
    return MXP_OK;
}

static int fail(mxp_pack *p, int rc) {
    mxp__pack_set_state(p, PACK_FAILED, "%s", mxp_last_error());
    MXP_LOGE("plugin", "%s", mxp_last_error());
    return rc;
}

static int load_locked(mxp_pack *p) {
    mxp__registry_rdlock();
    int state = p->state;
    char reason[sizeof p->reason];
    memcpy(reason, p->reason, sizeof reason);
    mxp__registry_unlock();
    const char *name = p->man->name, *lib = p->man->library;
    switch (state) {
    case PACK_LOADED: return MXP_OK;
    case PACK_UNAVAILABLE: return mxp__error(MXP_EUNSUPPORTED, "pack '%s' (%s) is unavailable: %s", name, lib, reason);
    case PACK_FAILED: return mxp__error(MXP_EPLUGIN, "%s", reason);
    case PACK_LOADING:
        return mxp__error(MXP_EPLUGIN, "pack '%s' (%s): dependency cycle (it depends on itself through its dependencies)",
                          name, lib);
    default: break;
    }
    mxp__pack_set_state(p, PACK_LOADING, NULL);
    for (int i = 0; i < p->man->n_depends; i++) {
        const char *dn = p->man->depends[i];
        mxp__registry_rdlock();
        mxp_pack *dp = mxp__registry_find_pack_locked(dn);
        mxp__registry_unlock();
        if (!dp) return fail(p, mxp__error(MXP_ENOENT, "pack '%s' (%s): depends on pack '%s', which is in no manifest",
                                           name, lib, dn));
        int rc = load_locked(dp);
        if (rc) return fail(p, mxp__error_prefix(rc, "pack '%s' (%s): dependency '%s'", name, lib, dn));
    }
    if (p->man->sha256) {
        char hex[65];
        int rc = mxp__sha256_file(lib, hex);
        if (rc && access(lib, F_OK) != 0)
            return fail(p, mxp__error(MXP_ENOENT, "pack '%s' (%s): library not found (sha256 check)", name, lib));
        if (rc) return fail(p, mxp__error_prefix(rc, "pack '%s' (sha256 check)", name));
        if (strcmp(hex, p->man->sha256))
            return fail(p, mxp__error(MXP_EPLUGIN, "pack '%s' (%s): sha256 mismatch: manifest says %s, file is %s",
                                      name, lib, p->man->sha256, hex));
    }
    void *h;
    const mxp_plugin_desc *d;
    int rc = mxp__loader_open(lib, name, &h, &d);
    if (rc) return fail(p, rc);
    mxp_stage *st;
    rc = mxp__stage_create(p, name, &st);
    if (rc) {
        dlclose(h);
        return fail(p, rc);
    }
    mxp_plugin_init_args ia = {MXP_HEADER(mxp_plugin_init_args), mxp__host_table(), mxp__stage_registrar(st), lib};
    mxp__error_clear();
    rc = d->init(&ia);
    if (rc != MXP_OK) {
        const char *msg = mxp_last_error();
        char copy[1024];
        snprintf(copy, sizeof copy, "%s", *msg ? msg : "(the pack gave no message)");
        mxp__stage_free(st);
        dlclose(h);
        return fail(p, mxp__error(rc < 0 ? rc : MXP_EPLUGIN, "pack '%s' (%s): init failed (%s): %s", name, lib,
                                  mxp_status_name(rc), copy));
    }
    rc = mxp__stage_validate(st);
    if (!rc) {
        p->handle = h;
        p->desc = d;
        rc = mxp__stage_publish(st);
        if (rc) {
            p->handle = NULL;
            p->desc = NULL;
        }
    }
    if (rc) {
        char copy[1024];
        snprintf(copy, sizeof copy, "%s", mxp_last_error());
        if (MXP_HAS_FIELD(d, mxp_plugin_desc, fini) && d->fini) {
            mxp_plugin_fini_args fa = {MXP_HEADER(mxp_plugin_fini_args), mxp__host_table()};
            d->fini(&fa);
        }
        mxp__stage_free(st);
        dlclose(h);
        return fail(p, mxp__error(rc, "pack '%s' (%s): registration rolled back: %s", name, lib, copy));
    }
    /* Its counters go public with its registrations (none left from an
     * earlier load: unload took them). */
    mxp__stat_set_free(mxp__pack_stats_swap(p, mxp__stage_take_stats(st)));
    mxp__stage_free(st);
    mxp__registry_wrlock();
    p->desc_major = d->hdr.abi_major;
    p->desc_minor = d->hdr.abi_minor;
    p->desc_min_host_minor = d->min_host_minor;
    mxp__pack_set_loaded_version_locked(p, d->version);
    p->state = PACK_LOADED;
    p->reason[0] = '\0';
    mxp__registry_unlock();
    mxp__registry_bump();
    MXP_LOGI("plugin", "loaded pack '%s' %s (%s)", name, d->version ? d->version : "", lib);
    return MXP_OK;
}

int mxp__pack_load(mxp_pack *p) {
    int rc = mxp__registry_ensure();
    if (rc) return rc;
    /* Fast path: already loaded.  Not while a reload is under way: between
     * its unpublish and its new load the state still reads LOADED but the
     * pack's defs are gone, so callers must queue on the load lock, which
     * the reload holds until the new defs are published. */
    mxp__registry_rdlock();
    int st = p->state;
    mxp__registry_unlock();
    if (st == PACK_LOADED && !atomic_load(&p->reloading)) return MXP_OK;
    mxp__registry_load_lock();
    rc = load_locked(p);
    mxp__registry_load_unlock();
    return rc;
}

void mxp__pack_unload_locked(mxp_pack *p, int do_dlclose) {
    MXP_ASSERT(mxp__registry_load_held());
    if (p->state != PACK_LOADED) return;
    const mxp_plugin_desc *d = p->desc;
    mxp__stage_unpublish(p);
    if (d && MXP_HAS_FIELD(d, mxp_plugin_desc, fini) && d->fini) {
        mxp_plugin_fini_args fa = {MXP_HEADER(mxp_plugin_fini_args), mxp__host_table()};
        d->fini(&fa);
    }
    if (do_dlclose && p->handle) dlclose(p->handle);
    /* After fini: the pack may count until it returns. */
    mxp__stat_set_free(mxp__pack_stats_swap(p, NULL));
    mxp__registry_wrlock();
    p->handle = NULL;
    p->desc = NULL;
    p->state = PACK_NOT_LOADED;
    mxp__registry_unlock();
    mxp__registry_bump();
}
