/* checkpoint.c — checkpoint files as mx.model.save_checkpoint writes them:
 * PREFIX-%04d.params holding "arg:<name>" and "aux:<name>" arrays in
 * MXNet's .params format (mxp_ndarray_save), and their loading split by
 * prefix.  PREFIX-%04d.states (optimizer states, mxp_optimizer_save_states)
 * and PREFIX-symbol.json share the naming helper.  mxp_checkpoint_prepare
 * checks, before any training, that the prefix can be written, and removes
 * temporaries a killed earlier run left for the same prefix. */
#include "train/train.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mxp_checkpoint_path(const char *prefix, int epoch, const char *what, char *buf, size_t cap) {
    if (!prefix || !what || !buf || !cap) return mxp__error(MXP_EINVAL, "mxp_checkpoint_path: NULL argument");
    int n;
    if (!strcmp(what, "symbol")) n = snprintf(buf, cap, "%s-symbol.json", prefix);
    else if (!strcmp(what, "params") || !strcmp(what, "states")) n = snprintf(buf, cap, "%s-%04d.%s", prefix, epoch, what);
    else return mxp__error(MXP_EINVAL, "mxp_checkpoint_path: '%s' is not params, states or symbol", what);
    if (n < 0 || (size_t)n >= cap) return mxp__error(MXP_EINVAL, "checkpoint path for '%s' is too long", prefix);
    return MXP_OK;
}

int mxp_checkpoint_save_params(const char *prefix, int epoch, int n_arg, const char *const *arg_names,
                               mxp_ndarray *const *args, int n_aux, const char *const *aux_names,
                               mxp_ndarray *const *auxs) {
    char path[4096];
    int rc = mxp_checkpoint_path(prefix, epoch, "params", path, sizeof path);
    if (rc) return rc;
    if (n_arg < 0 || n_aux < 0 || (n_arg && (!arg_names || !args)) || (n_aux && (!aux_names || !auxs)))
        return mxp__error(MXP_EINVAL, "mxp_checkpoint_save_params: bad arrays");
    int n = n_arg + n_aux;
    mxp_ndarray **arrs = calloc((size_t)(n ? n : 1), sizeof *arrs);
    char **names = calloc((size_t)(n ? n : 1), sizeof *names);
    if (!arrs || !names) {
        free(arrs);
        free(names);
        return mxp__error_oom("checkpoint");
    }
    for (int i = 0; i < n && rc == MXP_OK; i++) {
        const char *nm = i < n_arg ? arg_names[i] : aux_names[i - n_arg];
        arrs[i] = i < n_arg ? args[i] : auxs[i - n_arg];
        size_t len = strlen(nm ? nm : "") + 5;
        names[i] = malloc(len);
        if (!names[i] || !nm || !arrs[i]) rc = names[i] ? mxp__error(MXP_EINVAL, "checkpoint: NULL name or array %d", i)
                                                          : mxp__error_oom("checkpoint");
        else snprintf(names[i], len, "%s:%s", i < n_arg ? "arg" : "aux", nm);
    }
    if (rc == MXP_OK) rc = mxp_ndarray_save(path, n, arrs, (const char *const *)names);
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free(arrs);
    return rc;
}

int mxp_checkpoint_load_params(const char *prefix, int epoch, int *out_n_arg, char ***out_arg_names,
                               mxp_ndarray ***out_args, int *out_n_aux, char ***out_aux_names,
                               mxp_ndarray ***out_auxs) {
    if (!out_n_arg || !out_arg_names || !out_args || !out_n_aux || !out_aux_names || !out_auxs)
        return mxp__error(MXP_EINVAL, "mxp_checkpoint_load_params: NULL out");
    *out_n_arg = *out_n_aux = 0;
    *out_arg_names = *out_aux_names = NULL;
    *out_args = *out_auxs = NULL;
    char path[4096];
    int rc = mxp_checkpoint_path(prefix, epoch, "params", path, sizeof path);
    if (rc) return rc;
    int n = 0;
    mxp_ndarray **arrs = NULL;
    char **names = NULL;
    if ((rc = mxp_ndarray_load(path, &n, &arrs, &names))) return rc;
    if (n && !names) {
        mxp_ndarray_list_free(n, arrs, names);
        return mxp__error(MXP_EFORMAT, "'%s': arrays without names are not a checkpoint", path);
    }
    char **an = calloc((size_t)n + 1, sizeof *an), **xn = calloc((size_t)n + 1, sizeof *xn);
    mxp_ndarray **aa = calloc((size_t)n + 1, sizeof *aa), **xa = calloc((size_t)n + 1, sizeof *xa);
    int na = 0, nx = 0;
    if (!an || !xn || !aa || !xa) rc = mxp__error_oom("checkpoint");
    for (int i = 0; i < n && rc == MXP_OK; i++) {
        int is_arg = !strncmp(names[i], "arg:", 4), is_aux = !strncmp(names[i], "aux:", 4);
        if (!is_arg && !is_aux) {
            rc = mxp__error(MXP_EFORMAT, "'%s': key '%s' has neither 'arg:' nor 'aux:'", path, names[i]);
            break;
        }
        /* The same key twice: MXNet's load fills a dict, so the last one
         * wins.  Replace the earlier entry in place (order of first sight). */
        char **ln = is_arg ? an : xn;
        mxp_ndarray **la = is_arg ? aa : xa;
        int ln_n = is_arg ? na : nx, dup = -1;
        for (int k = 0; k < ln_n && dup < 0; k++)
            if (!strcmp(ln[k], names[i] + 4)) dup = k;
        if (dup >= 0) {
            MXP_LOGW("train", "'%s': key '%s' appears more than once; the last one is used (as MXNet does)", path,
                     names[i]);
            mxp_ndarray_release(la[dup]);
            la[dup] = mxp_ndarray_retain(arrs[i]);
            continue;
        }
        char *nm = strdup(names[i] + 4);
        if (!nm) {
            rc = mxp__error_oom("checkpoint");
            break;
        }
        if (is_arg) {
            an[na] = nm;
            aa[na++] = mxp_ndarray_retain(arrs[i]);
        } else {
            xn[nx] = nm;
            xa[nx++] = mxp_ndarray_retain(arrs[i]);
        }
    }
    mxp_ndarray_list_free(n, arrs, names);
    if (rc != MXP_OK) {
        mxp_ndarray_list_free(na, aa, an);
        mxp_ndarray_list_free(nx, xa, xn);
        return rc;
    }
    *out_n_arg = na;
    *out_arg_names = an;
    *out_args = aa;
    *out_n_aux = nx;
    *out_aux_names = xn;
    *out_auxs = xa;
    return MXP_OK;
}

int mxp_checkpoint_prepare(const char *prefix) {
    if (!prefix || !*prefix) return mxp__error(MXP_EINVAL, "checkpoint prefix: empty");
    /* The longest name written: PREFIX-NNNN.params.tmp.PID.N */
    char probe[PATH_MAX];
    int n = snprintf(probe, sizeof probe, "%s-0000.params.tmp.%ld.probe", prefix, (long)getpid());
    const char *slash = strrchr(prefix, '/');
    size_t base_len = strlen(slash ? slash + 1 : prefix) + sizeof "-0000.params.tmp.4294967295.4294967295";
    if (n < 0 || (size_t)n >= sizeof probe || base_len > NAME_MAX)
        return mxp__error(MXP_EINVAL, "checkpoint prefix '%s': %s", prefix, strerror(ENAMETOOLONG));
    /* Create and remove a file beside the checkpoints: the OS's own answer
     * (missing directory, permission, read-only file system, ...). */
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return mxp__error(MXP_EIO, "checkpoint prefix '%s': cannot create files there: %s", prefix, strerror(errno));
    close(fd);
    unlink(probe);
    /* Only this prefix's files (PREFIX-...), not those of PREFIX2. */
    char dash[PATH_MAX];
    snprintf(dash, sizeof dash, "%s-", prefix);
    int removed = 0;
    int rc = mxp_file_remove_stale_tmp(dash, &removed);
    if (rc == MXP_OK && removed)
        MXP_LOGW("train", "checkpoint prefix '%s': removed %d temporary file(s) left by an interrupted run", prefix,
                 removed);
    return rc;
}
