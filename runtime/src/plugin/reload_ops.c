/* reload_ops.c — what a reload does to the op tables when the rebuilt pack
 * defines a different set of ops and impls.
 *
 * Ops the new build adds appear through the ordinary publish.  Ops and
 * impls it no longer registers are removed after the swap: their entries
 * leave the op list and the name map (mxp_op_find, mxp_op_at, `mxplug
 * list` no longer show them; a symbol naming one fails to load, naming
 * it) and go to the registry's retired lists, so pointers to them held
 * elsewhere (a loaded symbol, an invoke cache's node) stay valid and
 * report "no longer defined" when used.  A later build that defines the
 * op again brings the same entry back (registrar.c), with its per-impl
 * call counts.
 *
 * Refusal: dropping an op out from under a bound executor would make its
 * next forward fail mid-training, so a reload is refused (MXP_EBUSY, the
 * old build stays in service) while any node of a long-lived owner — a
 * bound executor or an optimizer (op.h, mxp__node_set_bound) — exists for
 * an op the new build drops.  reload.c checks twice: right after preparing
 * the new build (fail fast, no stall), and again after quiescing, under
 * the load lock, just before the swap.  The second check is race-free: a
 * node counts itself (op->bound) while it holds a pin on the defining
 * pack, so a node created before the quiesce is counted by the time the
 * pins drained, and one created later waits for the reload and then finds
 * the op gone.  Invoke caches and tapes are not owners: their nodes are
 * rebuilt on use, and fail then with a clear message.
 * Not here: dropped aliases of ops that stay (they keep resolving). */
#include "plugin/plugin_impl.h"

#include <stdio.h>
#include <string.h>

static int staged_defines(const mxp_stage *s, const char *name) {
    for (int i = 0; i < mxp__stage_n_ops(s); i++)
        if (!strcmp(mxp__stage_op(s, i)->name, name)) return 1;
    return 0;
}

int mxp__reload_check_dropped(mxp_pack *p, const mxp_stage *s) {
    char list[1024] = "";
    size_t off = 0;
    int n_ops = 0;
    mxp__registry_rdlock();
    for (int i = 0; i < mxp__g_reg.n_ops; i++) {
        struct mxp_op *op = mxp__g_reg.ops[i];
        if (op->pack != p || staged_defines(s, op->name)) continue;
        long users = atomic_load(&op->bound);
        if (!users) continue;
        n_ops++;
        if (off < sizeof list)
            off += (size_t)snprintf(list + off, sizeof list - off, "%s'%s' (%ld node%s)", n_ops > 1 ? ", " : "",
                                    op->name, users, users == 1 ? "" : "s");
    }
    mxp__registry_unlock();
    if (!n_ops) return MXP_OK;
    return mxp__error(MXP_EBUSY, "the new build no longer defines op%s %s, still used by bound executors or "
                      "optimizers; free them (or rebind without %s) before reloading",
                      n_ops == 1 ? "" : "s", list, n_ops == 1 ? "it" : "them");
}

int mxp__reload_remove_dropped(mxp_pack *p) {
    int removed = 0;
    mxp__registry_wrlock();
    /* Ops p defined that the new build does not (their def stayed NULL at
     * publish), with their impl entries (a build that defines the op again
     * finds them, and their call counts, where they were); backwards:
     * retiring shifts the list. */
    for (int i = mxp__g_reg.n_ops - 1; i >= 0; i--) {
        struct mxp_op *op = mxp__g_reg.ops[i];
        if (op->pack != p || op->def) continue;
        MXP_LOGI("plugin", "reload of pack '%s': op '%s' is no longer defined; removed", p->man->name, op->name);
        mxp__registry_retire_op_locked(op);
        removed++;
    }
    /* Impls of p, of the ops that stay, the new build did not register. */
    for (int i = 0; i < mxp__g_reg.n_ops; i++) {
        struct mxp_op *op = mxp__g_reg.ops[i];
        for (int k = op->n_impls - 1; k >= 0; k--) {
            mxp_impl_entry *e = op->impls[k];
            if (e->pack != p || e->impl) continue;
            MXP_LOGI("plugin", "reload of pack '%s': impl '%s' (%s) of op '%s' is no longer provided; removed",
                     p->man->name, e->name, e->device, op->name);
            mxp__registry_retire_impl_locked(op, e);
            removed++;
        }
    }
    mxp__registry_unlock();
    return removed;
}
