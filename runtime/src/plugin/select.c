/* select.c — choosing an implementation for an op.
 *
 * Policy per op, by precedence: the API (mxp_op_set_impl) > the
 * environment (MXP_IMPL_<Op>=<impl>) > the user config
 * ($XDG_CONFIG_HOME/mxplug/config.yaml, `impl: {Op: name}`, written by
 * mxp_config_set_impl) > "auto".
 *   auto  the highest rank whose supports() accepts (ties by impl name);
 *         packs are opened lazily in that order, so a lower-ranked pack is
 *         never loaded when a higher one accepts; an impl answering
 *         MXP_SUPPORTS_FALLBACK (ABI 1.3) is taken only when none accepts
 *         outright;
 *   tune  every candidate that accepts is asked, then tune.c picks the
 *         fastest for the signature (cached in tune.yaml, else timed now);
 *   NAME  that impl; an error if it does not exist for the device or
 *         refuses the configuration (the message carries its reason).
 * Also: mxp_op_list_names, policy checks.  Calls into pack code (supports,
 * params, names, inference) go through opdef.h.
 * Not here: the user config file (user_config.c), the --why report's
 * framing (select_explain.c: mxp_op_explain), timing (tune.c). */
#include "plugin/plugin_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ policy */
static _Thread_local char t_policy[256];

int mxp__select_policy(const char *op_name, const char **out_policy, const char **out_source) {
    *out_policy = "auto";
    *out_source = "default";
    struct mxp_op *op = mxp__registry_find_op(op_name);
    const char *canon = op ? mxp__op_name(op) : op_name;
    if (op && mxp__registry_op_api_policy(op, t_policy, sizeof t_policy)) {
        *out_policy = t_policy;
        *out_source = "api";
        return MXP_OK;
    }
    char env[160];
    snprintf(env, sizeof env, "MXP_IMPL_%s", canon);
    const char *e = getenv(env);
    if (e && *e) {
        snprintf(t_policy, sizeof t_policy, "%s", e);
        *out_policy = t_policy;
        *out_source = "env";
        return MXP_OK;
    }
    if (mxp__config_policy(canon, op_name, t_policy, sizeof t_policy)) {
        *out_policy = t_policy;
        *out_source = "config";
    }
    return MXP_OK;
}

int mxp_op_policy(const char *op_name, const char **out_policy, const char **out_source) {
    if (out_policy) *out_policy = NULL;
    if (out_source) *out_source = NULL;
    if (!op_name || !out_policy || !out_source) return mxp__error(MXP_EMISUSE, "mxp_op_policy: NULL argument");
    return mxp__select_policy(op_name, out_policy, out_source);
}

int mxp_op_set_impl(const char *op_name, const char *policy) {
    if (!op_name) return mxp__error(MXP_EMISUSE, "mxp_op_set_impl: NULL op name");
    struct mxp_op *op = mxp__registry_find_op(op_name);
    if (!op) return mxp__error(MXP_ENOENT, "op '%s': not registered", op_name);
    int rc = mxp__registry_op_set_api_policy(op, policy);
    if (rc) return rc;
    mxp__registry_bump();
    return MXP_OK;
}

/* ------------------------------------------------------------ choosing */
static int cmp_entry(const void *a, const void *b) {
    const mxp_impl_entry *x = *(mxp_impl_entry *const *)a, *y = *(mxp_impl_entry *const *)b;
    if (x->rank != y->rank) return x->rank > y->rank ? -1 : 1;
    return strcmp(x->name, y->name);
}

typedef mxp__strbuf report;
static void rep(report *r, const char *fmt, ...) MXP_PRINTF(2, 3);
static void rep(report *r, const char *fmt, ...) {
    if (!r) return;
    va_list ap;
    va_start(ap, fmt);
    mxp__strbuf_vaddf(r, fmt, ap);
    va_end(ap);
}

/* One item of a policy: 'auto', 'tune' or an impl name; appends to rp. */
static int select_one(struct mxp_op *op, const mxp_select_query *q, mxp_impl_ref **out, report *rp,
                      const char *policy, const char *src) {
    *out = NULL;
    const char *dev = q->device_name ? q->device_name : mxp__device_name(q->device.type);
    const char *op_name = mxp__op_name(op);
    int tune = !strcmp(policy, "tune");
    int fixed = strcmp(policy, "auto") && !tune;
    mxp_impl_entry **c;
    int nc;
    int crc = mxp__registry_op_impls(op, dev, &c, &nc);
    if (crc) return crc;
    qsort(c, (size_t)nc, sizeof *c, cmp_entry);
    char refusals[1024] = "";
    size_t roff = 0;
    int rc = MXP_OK, found_fixed = 0;
    mxp_impl_ref *chosen = NULL, *fallback = NULL;
    mxp_impl_ref **acc = tune ? calloc((size_t)(nc ? nc : 1), sizeof *acc) : NULL;
    int n_acc = 0, n_fb = 0; /* tune: outright candidates from acc[0] up, fallbacks from acc[nc - 1] down */
    if (tune && !acc) {
        free(c);
        return mxp__error_oom("select");
    }
    for (int i = 0; i < nc; i++) {
        mxp_impl_entry *e = c[i];
        if (fixed && strcmp(e->name, policy)) {
            rep(rp, "  %-12s rank %4d  pack %-14s  not chosen: policy names '%s'\n", e->name, e->rank,
                e->pack->man->name, policy);
            continue;
        }
        found_fixed = 1;
        if (chosen && !rp) continue;
        int lrc = mxp__pack_load(e->pack);
        mxp_pack *defining = mxp__registry_op_pack(op);
        if (!lrc && defining && defining != e->pack) lrc = mxp__pack_load(defining);
        mxp_impl_ref *ref = NULL;
        if (!lrc) lrc = mxp__impl_ref_acquire(e, &ref);
        if (lrc) {
            rep(rp, "  %-12s rank %4d  pack %-14s  unavailable: %s\n", e->name, e->rank, e->pack->man->name,
                mxp_last_error());
            if (roff < sizeof refusals)
                roff += (size_t)snprintf(refusals + roff, sizeof refusals - roff, "%s'%s': %s", roff ? "; " : "",
                                         e->name, mxp_last_error());
            if (fixed) rc = lrc;
            continue;
        }
        char reason[256];
        int s = mxp__opdef_supports(ref, q, reason, sizeof reason);
        if (s == MXP_SUPPORTS_FALLBACK && fixed) s = 1; /* named: it runs the configuration */
        if (s == MXP_SUPPORTS_FALLBACK && tune) {
            /* Timed like any other; listed after the outright ones, so
             * tune's untimed choice (index 0, as auto) is not a fallback. */
            rep(rp, "  %-12s rank %4d  pack %-14s  accepts as a fallback: a tune candidate\n", e->name, e->rank,
                e->pack->man->name);
            acc[nc - 1 - n_fb++] = ref;
            continue;
        }
        if (s == MXP_SUPPORTS_FALLBACK) {
            /* auto: kept (the highest-ranked one) in case no impl accepts outright. */
            int keep = !chosen && !fallback;
            rep(rp, "  %-12s rank %4d  pack %-14s  accepts as a fallback%s%s%s\n", e->name, e->rank,
                e->pack->man->name, reason[0] ? " (" : "", reason, reason[0] ? ")" : "");
            if (keep) fallback = ref;
            else mxp__impl_ref_release(ref);
            continue;
        }
        if (s == 1 && tune) {
            rep(rp, "  %-12s rank %4d  pack %-14s  accepts: a tune candidate\n", e->name, e->rank, e->pack->man->name);
            acc[n_acc++] = ref;
            continue;
        }
        if (s == 1 && chosen) {
            /* Explaining: every impl's answer, not only the winner's. */
            rep(rp, "  %-12s rank %4d  pack %-14s  accepts, not needed: a higher-ranked impl accepted\n", e->name,
                e->rank, e->pack->man->name);
            mxp__impl_ref_release(ref);
            continue;
        }
        if (s == 1) {
            rep(rp, "  %-12s rank %4d  pack %-14s  CHOSEN%s\n", e->name, e->rank, e->pack->man->name,
                fixed ? " (named by policy)" : " (highest rank that accepts)");
            chosen = ref;
            if (!rp) break;
            continue;
        }
        rep(rp, "  %-12s rank %4d  pack %-14s  refused: %s\n", e->name, e->rank, e->pack->man->name,
            reason[0] ? reason : "(no reason given)");
        if (chosen) {
            mxp__impl_ref_release(ref);
            continue;
        }
        if (roff < sizeof refusals)
            roff += (size_t)snprintf(refusals + roff, sizeof refusals - roff, "%s'%s' refused: %s", roff ? "; " : "",
                                     e->name, reason[0] ? reason : "(no reason given)");
        mxp__impl_ref_release(ref);
    }
    free(c);
    if (fallback && !chosen) {
        chosen = fallback;
        rep(rp, "  %-12s CHOSEN (the highest-ranked fallback: no impl accepted outright)\n", chosen->entry->name);
    } else if (fallback)
        mxp__impl_ref_release(fallback);
    if (n_fb) { /* the fallbacks, back in rank order, after the outright candidates */
        for (int i = 0; i < n_fb / 2; i++) {
            mxp_impl_ref *t = acc[nc - n_fb + i];
            acc[nc - n_fb + i] = acc[nc - 1 - i];
            acc[nc - 1 - i] = t;
        }
        memmove(acc + n_acc, acc + nc - n_fb, (size_t)n_fb * sizeof *acc);
        n_acc += n_fb;
    }
    if (tune && n_acc) {
        int idx = 0;
        char *note = NULL;
        int trc = mxp__tune_pick(op, q, acc, n_acc, &idx, rp ? &note : NULL);
        if (trc) rep(rp, "  tune failed (%s): choosing as auto\n", mxp_last_error());
        if (trc) idx = 0;
        chosen = acc[idx];
        rep(rp, "  %-12s CHOSEN (%s)\n", chosen->entry->name, note ? note : "tune");
        free(note);
        for (int i = 0; i < n_acc; i++)
            if (i != idx) mxp__impl_ref_release(acc[i]);
        mxp__error_clear();
    }
    free(acc);
    if (chosen) {
        *out = chosen;
        return MXP_OK;
    }
    if (fixed && !found_fixed)
        return mxp__error(MXP_ENOENT, "op '%s': implementation '%s' (policy from %s) does not exist for device '%s'",
                          op_name, policy, src, dev);
    if (fixed && rc) return mxp__error(rc, "op '%s': implementation '%s' (policy from %s): %s", op_name, policy, src, refusals);
    if (fixed)
        return mxp__error(MXP_EUNSUPPORTED, "op '%s': implementation '%s' (policy from %s) cannot run this configuration: %s",
                          op_name, policy, src, refusals);
    if (!nc) return mxp__error(MXP_ENOENT, "op '%s': no implementation for device '%s'", op_name, dev);
    return mxp__error(MXP_EUNSUPPORTED, "op '%s': no implementation for device '%s' accepts this configuration: %s",
                      op_name, dev, refusals);
}

/* A policy is one item or a preference list "winograd,direct,auto": the
 * first item that exists and accepts the configuration wins; 'auto' and
 * 'tune' choose among all impls and end the list.  q->policy (a node's
 * own: its __impl__ attribute, mxp_executor_set_impl) overrides the op's. */
int mxp__select_impl(struct mxp_op *op, const mxp_select_query *q, mxp_impl_ref **out, char **explain) {
    *out = NULL;
    if (explain) *explain = NULL;
    report R = {0}, *rp = explain ? &R : NULL;
    const char *dev = q->device_name ? q->device_name : mxp__device_name(q->device.type);
    const char *op_name = mxp__op_name(op);
    const char *pol, *src;
    if (q->policy && *q->policy) {
        pol = q->policy;
        src = "node";
    } else mxp__select_policy(op_name, &pol, &src);
    char policy[256], whole[256];
    snprintf(policy, sizeof policy, "%s", pol);
    snprintf(whole, sizeof whole, "%s", pol);
    rep(rp, "op '%s' on %s: policy '%s' (from %s)\n", op_name, dev, policy, src);
    char errs[1024] = "";
    size_t eoff = 0;
    int rc = MXP_ENOENT, n_items = 0;
    char *save = NULL;
    for (char *item = strtok_r(policy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        while (*item == ' ') item++;
        size_t len = strlen(item);
        while (len && item[len - 1] == ' ') item[--len] = '\0';
        if (!*item) continue;
        if (n_items++) rep(rp, " then '%s':\n", item);
        mxp__error_clear();
        rc = select_one(op, q, out, rp, item, src);
        if (!rc) break;
        if (eoff < sizeof errs)
            eoff += (size_t)snprintf(errs + eoff, sizeof errs - eoff, "%s%s", eoff ? " | " : "", mxp_last_error());
        if (!strcmp(item, "auto") || !strcmp(item, "tune")) break;
    }
    if (explain) *explain = R.buf ? R.buf : strdup("");
    else free(R.buf);
    if (!n_items) return mxp__error(MXP_EINVAL, "op '%s': empty implementation policy (from %s)", op_name, src);
    if (rc && n_items > 1)
        return mxp__error(rc, "op '%s': no item of policy '%s' (from %s) can run this: %s", op_name, whole, src, errs);
    return rc ? mxp__error(rc, "%s", errs) : MXP_OK;
}

int mxp_op_policy_check(const char *op_name, const char *policy) {
    if (!op_name || !policy) return mxp__error(MXP_EMISUSE, "mxp_op_policy_check: NULL argument");
    int rc = mxp__registry_ensure();
    if (rc) return rc;
    struct mxp_op *op = mxp__registry_find_op(op_name);
    if (!op) return mxp__error(MXP_ENOENT, "op '%s': not registered (see `mxplug list`)", op_name);
    char where[300];
    snprintf(where, sizeof where, "policy '%s'", policy);
    return mxp__registry_policy_check(op, policy, where);
}

extern char **environ;

int mxp_registry_check_policies(void) {
    int rc = mxp__registry_ensure();
    if (rc) return rc;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "MXP_IMPL_", 9)) continue;
        const char *eq = strchr(*e, '=');
        if (!eq || !eq[1]) continue;
        char name[160], where[200];
        snprintf(name, sizeof name, "%.*s", (int)(eq - *e - 9), *e + 9);
        snprintf(where, sizeof where, "%.*s", (int)(eq - *e), *e);
        struct mxp_op *op = mxp__registry_find_op(name);
        if (!op) return mxp__error(MXP_EINVAL, "%s: no op named '%s' (see `mxplug list`)", where, name);
        if ((rc = mxp__registry_policy_check(op, eq + 1, where))) return rc;
    }
    return mxp__config_check_policies();
}

int mxp_op_list_names(const mxp_op *cop, int which, const char *const *keys, const char *const *vals, int n_kwargs,
                      char (*names)[64], int capacity, int *out_count) {
    if (out_count) *out_count = 0;
    if (!cop || !out_count || (capacity > 0 && !names) || which < 0 || which > 2)
        return mxp__error(MXP_EMISUSE, "mxp_op_list_names: bad argument");
    /* Hold the def (defining pack pinned) while we call into it. */
    mxp__opdef od;
    int rc = mxp__opdef_acquire_op((struct mxp_op *)cop, &od);
    if (rc) return rc;
    void *params;
    rc = mxp__op_params_new(od.def, keys, vals, n_kwargs, &params);
    if (!rc) {
        rc = mxp__op_list_names_def(od.def, params, which, names, capacity, out_count);
        mxp__op_params_free(od.def, params);
    }
    mxp__opdef_release(&od);
    return rc;
}
