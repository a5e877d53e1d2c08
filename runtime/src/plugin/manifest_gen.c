/* manifest_gen.c — mxp_pack_manifest_gen: load a .so into a scratch
 * registrar (validated like a real load, never published) and write its
 * manifest entry (docs/manifest.md): one YAML list item with name, version,
 * abi, library (the file's basename: fragments live next to their .so in
 * the build tree), load: lazy, and provides (ops with aliases and impls;
 * impls of other packs' ops; devices, kvstores, iterators).
 * The pack's fini is called and the handle closed before returning. */
#include "plugin/plugin_impl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Quote a scalar when YAML would misread it. */
static const char *q(const char *s, char *buf, size_t cap) {
    int plain = *s != '\0';
    for (const char *p = s; *p && plain; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
              *p == '-' || *p == '.'))
            plain = 0;
    if (plain && (s[0] == '-' || s[0] == '.')) plain = 0;
    if (plain && (!strcmp(s, "true") || !strcmp(s, "false") || !strcmp(s, "null") || !strcmp(s, "yes") || !strcmp(s, "no")))
        plain = 0;
    if (plain) return s;
    size_t o = 0;
    buf[o++] = '"';
    for (const char *p = s; *p && o + 3 < cap; p++) {
        if (*p == '"' || *p == '\\') buf[o++] = '\\';
        buf[o++] = *p;
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

/* An impl of an op that neither this pack nor any pack in the manifests
 * defines could never load (the loader refuses orphans): say so now. */
static int check_orphans(mxp_stage *st, const char *pack, const char *lib) {
    int n_ops = mxp__stage_n_ops(st), n_impls = mxp__stage_n_impls(st);
    for (int i = 0; i < n_impls; i++) {
        const char *opn = mxp__stage_impl(st, i)->op_name;
        int own = 0;
        for (int k = 0; k < n_ops && !own; k++) own = !strcmp(mxp__stage_op(st, k)->name, opn);
        if (own) continue;
        if (mxp__registry_ensure()) return mxp__error_prefix(MXP_EPLUGIN, "manifest gen");
        struct mxp_op *op = mxp__registry_find_op(opn);
        if (!op || !op->pack)
            return mxp__error(MXP_ENOENT, "pack '%s' (%s): impl '%s' is for op '%s', which neither this pack nor any "
                              "pack in the manifests defines (misspelled?  `mxplug list` shows the known ops; "
                              "MXP_PLUGIN_PATH / MXP_MANIFEST add manifests)", pack, lib,
                              mxp__stage_impl(st, i)->impl_name, opn);
    }
    return MXP_OK;
}

int mxp_pack_manifest_gen(const char *library_path, char **out_yaml) {
    if (out_yaml) *out_yaml = NULL;
    if (!library_path || !out_yaml) return mxp__error(MXP_EMISUSE, "mxp_pack_manifest_gen: NULL argument");
    /* A bare name is a file in the current directory (dlopen would search
     * the system's library path instead). */
    char local[4096];
    if (!strchr(library_path, '/')) {
        snprintf(local, sizeof local, "./%s", library_path);
        library_path = local;
    }
    void *h;
    const mxp_plugin_desc *d;
    int rc = mxp__loader_open(library_path, NULL, &h, &d);
    if (rc) return rc;
    mxp_stage *st;
    rc = mxp__stage_create(NULL, d->name, &st);
    if (rc) {
        dlclose(h);
        return rc;
    }
    mxp_plugin_init_args ia = {MXP_HEADER(mxp_plugin_init_args), mxp__host_table(), mxp__stage_registrar(st), library_path};
    mxp__error_clear();
    rc = d->init(&ia);
    int init_ok = rc == MXP_OK;
    if (rc) rc = mxp__error(rc < 0 ? rc : MXP_EPLUGIN, "pack '%s' (%s): init failed: %s", d->name, library_path,
                            *mxp_last_error() ? mxp_last_error() : "(no message)");
    else if ((rc = mxp__stage_validate(st))) rc = mxp__error_prefix(rc, "%s", library_path);
    else rc = check_orphans(st, d->name, library_path);
    mxp__strbuf o = {NULL, 0, 0, 0};
    if (!rc) {
        char b1[256], b2[256], b3[256];
        const char *base = strrchr(library_path, '/');
        base = base ? base + 1 : library_path;
        mxp__strbuf_addf(&o, "- name: %s\n", q(d->name, b1, sizeof b1));
        mxp__strbuf_addf(&o, "  version: %s\n", q(d->version ? d->version : "0.0.0", b1, sizeof b1));
        mxp__strbuf_addf(&o, "  abi: {major: %u, minor: %u, min_host_minor: %u}\n", d->hdr.abi_major, d->hdr.abi_minor,
            d->min_host_minor);
        mxp__strbuf_addf(&o, "  library: %s\n", q(base, b1, sizeof b1));
        mxp__strbuf_addf(&o, "  load: lazy\n");
        int n_ops = mxp__stage_n_ops(st), n_impls = mxp__stage_n_impls(st);
        int n_other = 0;
        for (int i = 0; i < n_impls; i++) {
            int own = 0;
            for (int k = 0; k < n_ops && !own; k++)
                own = !strcmp(mxp__stage_op(st, k)->name, mxp__stage_impl(st, i)->op_name);
            n_other += !own;
        }
        int nf[4] = {0, mxp__stage_n_features(st, MXP_FEATURE_DEVICE), mxp__stage_n_features(st, MXP_FEATURE_KVSTORE),
                     mxp__stage_n_features(st, MXP_FEATURE_ITER)};
        mxp__strbuf_addf(&o, "  provides:\n");
        if (n_ops) mxp__strbuf_addf(&o, "    ops:\n");
        for (int k = 0; k < n_ops; k++) {
            const mxp_op_def *od = mxp__stage_op(st, k);
            mxp__strbuf_addf(&o, "      - name: %s\n", q(od->name, b1, sizeof b1));
            if (od->aliases && od->aliases[0]) {
                mxp__strbuf_addf(&o, "        aliases: [");
                for (int a = 0; od->aliases[a]; a++) mxp__strbuf_addf(&o, "%s%s", a ? ", " : "", q(od->aliases[a], b1, sizeof b1));
                mxp__strbuf_addf(&o, "]\n");
            }
            int any = 0;
            for (int i = 0; i < n_impls; i++) {
                const mxp_op_impl *im = mxp__stage_impl(st, i);
                if (strcmp(im->op_name, od->name)) continue;
                if (!any++) mxp__strbuf_addf(&o, "        impls:\n");
                mxp__strbuf_addf(&o, "          - {name: %s, device: %s, rank: %d}\n", q(im->impl_name, b2, sizeof b2),
                    q(im->device, b3, sizeof b3), im->rank);
            }
            if (!any) mxp__strbuf_addf(&o, "        impls: []\n");
        }
        if (n_other) mxp__strbuf_addf(&o, "    impls:\n");
        for (int i = 0; i < n_impls; i++) {
            const mxp_op_impl *im = mxp__stage_impl(st, i);
            int own = 0;
            for (int k = 0; k < n_ops && !own; k++) own = !strcmp(mxp__stage_op(st, k)->name, im->op_name);
            if (own) continue;
            mxp__strbuf_addf(&o, "      - {op: %s, name: %s, device: %s, rank: %d}\n", q(im->op_name, b1, sizeof b1),
                q(im->impl_name, b2, sizeof b2), q(im->device, b3, sizeof b3), im->rank);
        }
        static const char *keys[4] = {"", "devices", "kvstores", "iterators"};
        for (int kind = 1; kind <= 3; kind++) {
            if (!nf[kind]) continue;
            mxp__strbuf_addf(&o, "    %s: [", keys[kind]);
            for (int i = 0; i < nf[kind]; i++)
                mxp__strbuf_addf(&o, "%s%s", i ? ", " : "", q(mxp__stage_feature_name(st, kind, i), b1, sizeof b1));
            mxp__strbuf_addf(&o, "]\n");
        }
        if (!n_ops && !n_other && !nf[1] && !nf[2] && !nf[3]) mxp__strbuf_addf(&o, "    {}\n");
        if (o.oom) rc = mxp__error_oom("manifest gen");
    }
    if (init_ok && MXP_HAS_FIELD(d, mxp_plugin_desc, fini) && d->fini) {
        mxp_plugin_fini_args fa = {MXP_HEADER(mxp_plugin_fini_args), mxp__host_table()};
        d->fini(&fa);
    }
    mxp__stage_free(st);
    dlclose(h);
    if (rc) {
        free(o.buf);
        return rc;
    }
    *out_yaml = o.buf;
    return MXP_OK;
}
