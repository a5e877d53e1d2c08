/* var.c — the per-variable dependency state machine and error records.
 *
 * The state machine is described in engine_impl.h.  Every transition runs
 * under the var's spinlock and only moves list pointers and counters; the
 * blocks it makes ready are triggered (mxp__eng_blk_decr) after the lock is
 * dropped, so dispatching work never happens under a var lock.
 * Transitions: mxp__eng_var_append_read, mxp__eng_var_append_write (push),
 * mxp__eng_var_complete_read, mxp__eng_var_complete_write (completion).
 * Not here: what runs a block, queues, the public API. */
#include "engine_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ errors */

err_rec *mxp__eng_err_new(int status, const char *op_name, const char *why) {
    if (!why || !*why) why = mxp_status_str(status);
    int n = snprintf(NULL, 0, "op '%s' failed: %s", op_name, why);
    err_rec *e = malloc(sizeof *e + (size_t)n + 1);
    if (!e) return NULL;
    atomic_init(&e->refs, 1);
    atomic_init(&e->raised, 0);
    e->status = status;
    snprintf(e->msg, (size_t)n + 1, "op '%s' failed: %s", op_name, why);
    return e;
}

void mxp__eng_err_ref(err_rec *e) {
    if (e) atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
}

void mxp__eng_err_unref(err_rec *e) {
    if (e && atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1) free(e);
}

/* ------------------------------------------------------------ vars */

static eng_vblk *vblk_new(eng_engine *e, eng_blk *b, bool write) {
    eng_vblk *vb = mxp__eng_pool_get(&e->pools[POOL_VBLK]);
    if (!vb) mxp__fatal("engine: out of memory for a dependency block");
    vb->next = NULL;
    vb->blk = b;
    vb->write = write;
    return vb;
}

static void enqueue(mxp_var *v, eng_vblk *vb) {
    if (v->qtail) v->qtail->next = vb; else v->qhead = vb;
    v->qtail = vb;
}

void mxp__eng_var_append_read(mxp_var *v, eng_blk *b, eng_engine *e) {
    eng_spin_lock(&v->lock);
    if (!v->writing && !v->qhead) {
        v->nreads++;
        eng_spin_unlock(&v->lock);
        mxp__eng_blk_decr(b, e);
        return;
    }
    eng_spin_unlock(&v->lock);
    /* Allocate outside the lock, then re-check: the state may have changed. */
    eng_vblk *vb = vblk_new(e, b, false);
    eng_spin_lock(&v->lock);
    if (!v->writing && !v->qhead) {
        v->nreads++;
        eng_spin_unlock(&v->lock);
        mxp__eng_pool_put(&e->pools[POOL_VBLK], vb);
        mxp__eng_blk_decr(b, e);
        return;
    }
    enqueue(v, vb);
    eng_spin_unlock(&v->lock);
}

void mxp__eng_var_append_write(mxp_var *v, eng_blk *b, eng_engine *e) {
    eng_spin_lock(&v->lock);
    mxp__eng_var_count_write(v);
    if (!v->writing && v->nreads == 0 && !v->qhead) {
        v->writing = true;
        eng_spin_unlock(&v->lock);
        mxp__eng_blk_decr(b, e);
        return;
    }
    eng_spin_unlock(&v->lock);
    eng_vblk *vb = vblk_new(e, b, true);
    eng_spin_lock(&v->lock);
    if (!v->writing && v->nreads == 0 && !v->qhead) {
        v->writing = true;
        eng_spin_unlock(&v->lock);
        mxp__eng_pool_put(&e->pools[POOL_VBLK], vb);
        mxp__eng_blk_decr(b, e);
        return;
    }
    enqueue(v, vb);
    eng_spin_unlock(&v->lock);
}

void mxp__eng_var_complete_read(mxp_var *v, eng_engine *e) {
    eng_vblk *w = NULL;
    eng_spin_lock(&v->lock);
    MXP_ASSERT(v->nreads > 0);
    if (--v->nreads == 0 && v->qhead) {
        w = v->qhead;
        MXP_ASSERT(w->write);
        v->qhead = w->next;
        if (!v->qhead) v->qtail = NULL;
        v->writing = true;
    }
    eng_spin_unlock(&v->lock);
    if (w) {
        eng_blk *b = w->blk;
        mxp__eng_pool_put(&e->pools[POOL_VBLK], w);
        mxp__eng_blk_decr(b, e);
    }
}

void mxp__eng_var_complete_write(mxp_var *v, err_rec *err, eng_engine *e) {
    eng_vblk *reads = NULL, *w = NULL;
    err_rec *old;
    eng_spin_lock(&v->lock);
    MXP_ASSERT(v->writing);
    v->writing = false;
    /* Changed only under the lock: a plain store, not a locked add. */
    atomic_store_explicit(&v->version, atomic_load_explicit(&v->version, memory_order_relaxed) + 1,
                          memory_order_release);
    /* Only a completing writer replaces the record, and no reader of this
     * var runs now, so readers may load it without the lock. */
    old = atomic_load_explicit(&v->err, memory_order_relaxed);
    if (old != err) {
        mxp__eng_err_ref(err);
        atomic_store_explicit(&v->err, err, memory_order_release);
    } else {
        old = NULL;
    }
    if (v->qhead && !v->qhead->write) {
        /* Detach the run of reads at the head; they are ours alone now. */
        eng_vblk *first = v->qhead, *last = first;
        int n = 1;
        while (last->next && !last->next->write) { last = last->next; n++; }
        v->qhead = last->next;
        if (!v->qhead) v->qtail = NULL;
        last->next = NULL;
        v->nreads += n;
        reads = first;
    } else if (v->qhead) {
        w = v->qhead;
        v->qhead = w->next;
        if (!v->qhead) v->qtail = NULL;
        v->writing = true;
    }
    eng_spin_unlock(&v->lock);
    mxp__eng_err_unref(old);
    while (reads) {
        eng_vblk *nx = reads->next;
        eng_blk *b = reads->blk;
        mxp__eng_pool_put(&e->pools[POOL_VBLK], reads);
        mxp__eng_blk_decr(b, e);
        reads = nx;
    }
    if (w) {
        eng_blk *b = w->blk;
        mxp__eng_pool_put(&e->pools[POOL_VBLK], w);
        mxp__eng_blk_decr(b, e);
    }
}

err_rec *mxp__eng_var_error(mxp_var *v) {
    eng_spin_lock(&v->lock);
    err_rec *r = atomic_load_explicit(&v->err, memory_order_acquire);
    if (r && atomic_load_explicit(&r->raised, memory_order_acquire)) r = NULL;
    mxp__eng_err_ref(r);
    eng_spin_unlock(&v->lock);
    return r;
}

bool mxp__eng_var_write_idle(mxp_var *v) {
    eng_spin_lock(&v->lock);
    /* By the invariant, a non-empty queue while no write runs starts with a
     * write, so "no write pending" is exactly this. */
    bool idle = !v->writing && !v->qhead;
    eng_spin_unlock(&v->lock);
    return idle;
}

bool mxp__engine_var_free_if_idle(mxp_var *v) {
    if (!v) return false;
    eng_spin_lock(&v->lock);
    /* Idle: no read or write runs and none waits.  A completing function
     * touches its var only under this lock (var.c), so once we see it idle
     * nobody else will, and the caller promised no further push. */
    bool idle = v->nreads == 0 && !v->writing && !v->qhead;
    eng_spin_unlock(&v->lock);
    if (idle) mxp__eng_var_free(v);
    return idle;
}

void mxp__eng_var_free(mxp_var *v) {
    if (!v) return;
    mxp__eng_err_unref(atomic_load_explicit(&v->err, memory_order_relaxed));
    free(v);
}

void mxp__engine_var_arm_write_hook(mxp_var *v, mxp__var_write_hook *h) {
    mxp__var_write_hook *old = atomic_exchange_explicit(&v->write_hook, h, memory_order_acq_rel);
    if (old) old->fire(old);
}

bool mxp__engine_var_disarm_write_hook(mxp_var *v, mxp__var_write_hook *h) {
    mxp__var_write_hook *want = h;
    return atomic_compare_exchange_strong_explicit(&v->write_hook, &want, NULL, memory_order_acq_rel,
                                                   memory_order_acquire);
}

static _Atomic uint64_t uids_given;

uint64_t mxp__eng_next_uid(void) { return atomic_fetch_add_explicit(&uids_given, 1, memory_order_relaxed) + 1; }

uint64_t mxp__engine_new_stamp(void) { return mxp__eng_next_uid() << 24; }

uint64_t mxp__engine_var_stamp(const mxp_var *v) {
    if (!v) return 0;
    uint64_t writes = atomic_load_explicit(&((mxp_var *)v)->version, memory_order_acquire);
    return (v->uid << 24) | (writes & ((UINT64_C(1) << 24) - 1));
}

uint64_t mxp__engine_var_writes_pushed(const mxp_var *v) {
    return v ? atomic_load_explicit(&((mxp_var *)v)->writes_pushed, memory_order_relaxed) : 0;
}
