/* temp_space.c — per-device temporary workspace, handed out round-robin.
 *
 * Each device has n copies (MXP_CPU_TEMP_COPY, default 4, for CPU types;
 * MXP_GPU_TEMP_COPY, default 1, otherwise; at most MAX_COPIES).  A copy is
 * {storage block, engine var}.  acquire() runs at push time: it picks the
 * next copy, and if the copy is too small it allocates a larger block at
 * once and pushes an engine op that writes the copy's var and frees the old
 * block.  Because every user lists the var as a mutate var, users that got
 * the old pointer run before that free, users that get the new one after.
 * Buffers only grow (as MXNet's).
 *
 * Locking: one mutex for the device table and the copies; acquire is cheap
 * (no device work except a rare allocation). */
#include "resource.h"
#include "base/mutex.h"
#include "base/env.h"

#include "storage/storage.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COPIES 64

typedef struct temp_copy {
    mxp_storage_block blk;
    mxp_var *var;
} temp_copy;

typedef struct temp_dev {
    struct temp_dev *next;
    mxp_device dev;
    int n_copies;
    unsigned cursor;
    temp_copy copies[MAX_COPIES];
} temp_dev;

static mxp__mutex temp_mu = MXP__MUTEX_INIT;
static temp_dev *temp_devs;

static int env_copies(mxp_device dev) {
    int cpu = dev.type == MXP_DEV_CPU || dev.type == MXP_DEV_CPU_PINNED || dev.type == MXP_DEV_CPU_SHARED;
    const char *name = cpu ? "MXP_CPU_TEMP_COPY" : "MXP_GPU_TEMP_COPY";
    return (int)mxp__env_int(name, 1, MAX_COPIES, cpu ? 4 : 1);
}

static int free_block_fn(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    mxp__storage_free((mxp_storage_block *)arg);
    return MXP_OK;
}

/* Free a block after every op pushed so far on `var`. */
static int deferred_free(mxp_var *var, mxp_storage_block blk) {
    mxp_storage_block *arg = malloc(sizeof *arg);
    if (!arg) return mxp__error_oom("temp space free");
    *arg = blk;
    mxp_engine_push_args a = {0};
    a.sync_fn = free_block_fn;
    a.arg = arg;
    a.free_arg = free;
    a.mutate_vars = &var;
    a.n_mutate = 1;
    a.device = blk.dev;
    a.prop = MXP_FN_NO_SKIP; /* must free even when an earlier user failed */
    a.name = "temp_space_free";
    int rc = mxp_engine_push(&a);
    if (rc != MXP_OK) free(arg);
    return rc;
}

/* The copy to use under temp_mu: `same` (a var a previous acquire
 * returned) or the next in turn; grown to >= bytes. */
static int acquire_locked(mxp_device dev, size_t bytes, const mxp_var *same, mxp_temp_space *out) {
    MXP_ASSERT(mxp__mutex_held(&temp_mu));
    temp_dev *td = temp_devs;
    while (td && !(td->dev.type == dev.type && td->dev.id == dev.id)) td = td->next;
    if (!td && same) return mxp__error(MXP_ENOENT, "temp space: no copy with that var (released?)");
    if (!td) {
        if (!mxp__storage_backend(dev.type))
            return mxp__error(MXP_EINVAL, "temp space: unknown device type %d", (int)dev.type);
        td = calloc(1, sizeof *td);
        if (!td) return mxp__error_oom("temp space");
        td->dev = dev;
        td->n_copies = env_copies(dev);
        td->next = temp_devs;
        temp_devs = td;
    }
    temp_copy *c = NULL;
    if (same) {
        for (int i = 0; i < td->n_copies && !c; i++)
            if (td->copies[i].var == same) c = &td->copies[i];
        if (!c) return mxp__error(MXP_ENOENT, "temp space: no copy with that var (released?)");
    } else {
        c = &td->copies[td->cursor++ % (unsigned)td->n_copies];
    }
    int rc = MXP_OK;
    if (!c->var) rc = mxp_engine_new_var(&c->var);
    if (rc == MXP_OK && c->blk.size < bytes) {
        mxp_storage_block nb;
        rc = mxp__storage_alloc(dev, bytes, &nb);
        if (rc == MXP_OK) {
            if (c->blk.ptr && (rc = deferred_free(c->var, c->blk)) != MXP_OK) {
                mxp__storage_free(&nb); /* keep the old buffer; nothing changed */
            } else {
                c->blk = nb;
            }
        }
    }
    if (rc == MXP_OK) {
        out->ptr = bytes ? c->blk.ptr : NULL;
        out->size = bytes ? c->blk.size : 0;
        out->var = c->var;
    }
    return rc;
}

int mxp__temp_space_acquire(mxp_device dev, size_t bytes, mxp_temp_space *out) {
    if (!out) return mxp__error(MXP_EMISUSE, "mxp__temp_space_acquire: NULL out");
    memset(out, 0, sizeof *out);
    mxp__mutex_lock(&temp_mu);
    int rc = acquire_locked(dev, bytes, NULL, out);
    mxp__mutex_unlock(&temp_mu);
    return rc;
}

int mxp__temp_space_acquire_same(mxp_device dev, size_t bytes, const mxp_var *var, mxp_temp_space *out) {
    if (!out || !var) return mxp__error(MXP_EMISUSE, "mxp__temp_space_acquire_same: NULL argument");
    memset(out, 0, sizeof *out);
    mxp__mutex_lock(&temp_mu);
    int rc = acquire_locked(dev, bytes, var, out);
    mxp__mutex_unlock(&temp_mu);
    return rc;
}

void mxp__temp_space_release_all(void) {
    mxp__mutex_lock(&temp_mu);
    temp_dev *td = temp_devs;
    temp_devs = NULL;
    mxp__mutex_unlock(&temp_mu);
    while (td) {
        for (int i = 0; i < td->n_copies; i++) {
            temp_copy *c = &td->copies[i];
            if (c->blk.ptr && (!c->var || deferred_free(c->var, c->blk) != MXP_OK)) {
                /* No engine to order the free: wait for everything instead. */
                mxp_engine_wait_for_all();
                mxp__storage_free(&c->blk);
            }
            if (c->var) mxp_engine_delete_var(c->var);
        }
        temp_dev *next = td->next;
        free(td);
        td = next;
    }
}
