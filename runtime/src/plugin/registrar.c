/* registrar.c — transactional registration.  The registrar a pack's init
 * receives only stages: each add_* copies the pack's struct into a
 * host-owned, zero-filled struct of the host's size (so later code reads
 * every field safely, whatever struct_size the pack was built with; fields
 * beyond the writer's struct_size read as 0/NULL = absent).  After init,
 * mxp__stage_validate checks the whole set — unique names, impls only for
 * ops someone defines, schema sanity (param offsets inside params_size,
 * names non-empty, defaults that parse), and declared-in-manifest versus
 * registered, naming every differing item — and mxp__stage_publish makes
 * it visible at once under the table write lock.  On any failure the
 * loader frees the stage and dlcloses: nothing of the pack stays behind.
 * mxp__stage_unpublish undoes a publish (unload / reload).  Counters a
 * pack registers (add_stat, ABI 1.2) are staged the same way and handed
 * to the pack entry by the loader (pack_stats.c). */
#include "plugin/plugin_impl.h"

#include "storage/storage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct staged_op {
    mxp_op_def *def;              /* host copy (or &simple->def)          */
    mxp_simple_expansion *simple; /* owner of def/impl for SimpleOps       */
} staged_op;

typedef struct staged_feature {
    int kind;
    void *def; /* host copy */
    const char *name;
} staged_feature;

struct mxp_stage {
    mxp_registrar reg;
    mxp_pack *pack;
    const mxp_man_pack *man;      /* checked against (reload: the new entry) */
    char *pack_name;
    staged_op *ops; int n_ops;
    mxp_op_impl **impls; int n_impls;
    mxp_simple_expansion **simples; int n_simples;
    staged_feature *feats; int n_feats;
    mxp__stat_set *stats;         /* counters (pack_stats.c), ABI 1.2     */
    int first_error;
    char first_msg[1024];
};

static int stage_err(mxp_stage *s, int rc) {
    if (!s->first_error) {
        s->first_error = rc;
        snprintf(s->first_msg, sizeof s->first_msg, "%s", mxp_last_error());
    }
    return rc;
}

/* Copy a boundary struct into a zeroed host-size buffer. */
static void *copy_struct(const void *src, size_t host_size) {
    const mxp_header *h = src;
    void *dst = calloc(1, host_size);
    if (!dst) return NULL;
    size_t n = h->struct_size < host_size ? h->struct_size : host_size;
    memcpy(dst, src, n);
    return dst;
}

static int check_hdr(mxp_stage *s, const mxp_header *h, size_t min_size, const char *what, const char *name) {
    if (!h) return stage_err(s, mxp__error(MXP_EINVAL, "pack '%s': %s: NULL definition", s->pack_name, what));
    if (h->abi_major != MXP_ABI_MAJOR)
        return stage_err(s, mxp__error(MXP_EABI, "pack '%s': %s '%s' built for ABI %u.%u, host is %d.%d",
                                       s->pack_name, what, name ? name : "?", h->abi_major, h->abi_minor,
                                       MXP_ABI_MAJOR, MXP_ABI_MINOR));
    if (h->struct_size < min_size)
        return stage_err(s, mxp__error(MXP_EABI, "pack '%s': %s '%s': struct_size %u smaller than ABI 1.0's %zu",
                                       s->pack_name, what, name ? name : "?", (unsigned)h->struct_size, min_size));
    return MXP_OK;
}

static mxp_stage *stage_of(mxp_registrar *r) { return (mxp_stage *)r->host_private; }

static int push_op(mxp_stage *s, mxp_op_def *def, mxp_simple_expansion *simple) {
    staged_op *v = realloc(s->ops, (size_t)(s->n_ops + 1) * sizeof *v);
    if (!v) return stage_err(s, mxp__error_oom("stage"));
    s->ops = v;
    v[s->n_ops].def = def;
    v[s->n_ops].simple = simple;
    s->n_ops++;
    return MXP_OK;
}

static int push_impl(mxp_stage *s, mxp_op_impl *impl) {
    mxp_op_impl **v = realloc(s->impls, (size_t)(s->n_impls + 1) * sizeof *v);
    if (!v) return stage_err(s, mxp__error_oom("stage"));
    s->impls = v;
    v[s->n_impls++] = impl;
    return MXP_OK;
}

static int add_op(mxp_registrar *r, const mxp_op_def *def) {
    mxp_stage *s = stage_of(r);
    int rc = check_hdr(s, def ? &def->hdr : NULL, offsetof(mxp_op_def, infer_shape) + sizeof(void *), "op",
                       def && def->hdr.struct_size > offsetof(mxp_op_def, name) ? def->name : NULL);
    if (rc) return rc;
    if (!def->name || !*def->name)
        return stage_err(s, mxp__error(MXP_EINVAL, "pack '%s': op definition without a name", s->pack_name));
    mxp_op_def *c = copy_struct(def, sizeof *c);
    if (!c) return stage_err(s, mxp__error_oom("stage"));
    rc = push_op(s, c, NULL);
    if (rc) free(c);
    return rc;
}

static int add_impl(mxp_registrar *r, const mxp_op_impl *impl) {
    mxp_stage *s = stage_of(r);
    int rc = check_hdr(s, impl ? &impl->hdr : NULL, offsetof(mxp_op_impl, forward) + sizeof(void *), "impl",
                       impl && impl->hdr.struct_size > offsetof(mxp_op_impl, impl_name) ? impl->impl_name : NULL);
    if (rc) return rc;
    if (!impl->op_name || !*impl->op_name || !impl->impl_name || !*impl->impl_name)
        return stage_err(s, mxp__error(MXP_EINVAL, "pack '%s': impl without op_name or impl_name", s->pack_name));
    if (!impl->forward)
        return stage_err(s, mxp__error(MXP_EINVAL, "pack '%s': impl '%s' of op '%s' has no forward", s->pack_name,
                                       impl->impl_name, impl->op_name));
    mxp_op_impl *c = copy_struct(impl, sizeof *c);
    if (!c) return stage_err(s, mxp__error_oom("stage"));
    if (!c->device || !*c->device) c->device = "cpu";
    rc = push_impl(s, c);
    if (rc) free(c);
    return rc;
}

static int add_simple_op(mxp_registrar *r, const mxp_simple_op_def *def) {
    mxp_stage *s = stage_of(r);
    int rc = check_hdr(s, def ? &def->hdr : NULL, offsetof(mxp_simple_op_def, forward) + sizeof(void *), "simple op",
                       def && def->hdr.struct_size > offsetof(mxp_simple_op_def, name) ? def->name : NULL);
    if (rc) return rc;
    mxp_simple_op_def *c = copy_struct(def, sizeof *c);
    if (!c) return stage_err(s, mxp__error_oom("stage"));
    mxp_simple_expansion *e;
    rc = mxp__simple_expand(c, &e);
    if (rc) {
        free(c);
        return stage_err(s, mxp__error_prefix(rc, "pack '%s'", s->pack_name));
    }
    /* The expansion owns c from now on (freed with it). */
    mxp_simple_expansion **v = realloc(s->simples, (size_t)(s->n_simples + 1) * sizeof *v);
    if (!v) {
        mxp__simple_free(e);
        return stage_err(s, mxp__error_oom("stage"));
    }
    s->simples = v;
    v[s->n_simples++] = e;
    e->define_op = 1;
    for (int i = 0; i < s->n_ops; i++)
        if (!strcmp(s->ops[i].def->name, c->name)) e->define_op = 0;
    if (e->define_op && (rc = push_op(s, &e->def, e))) return rc;
    return push_impl(s, &e->impl);
}

static int add_feature(mxp_registrar *r, int kind, const void *def, size_t host_size, size_t name_off,
                       size_t min_size, const char *what) {
    mxp_stage *s = stage_of(r);
    const mxp_header *h = def;
    int rc = check_hdr(s, h, min_size, what, NULL);
    if (rc) return rc;
    const char *name;
    memcpy(&name, (const char *)def + name_off, sizeof name);
    if (!name || !*name) return stage_err(s, mxp__error(MXP_EINVAL, "pack '%s': %s without a name", s->pack_name, what));
    void *c = copy_struct(def, host_size);
    staged_feature *v = realloc(s->feats, (size_t)(s->n_feats + 1) * sizeof *v);
    if (!c || !v) {
        free(c);
        if (v) s->feats = v;
        return stage_err(s, mxp__error_oom("stage"));
    }
    s->feats = v;
    v[s->n_feats].kind = kind;
    v[s->n_feats].def = c;
    v[s->n_feats].name = name;
    s->n_feats++;
    return MXP_OK;
}

static int add_device(mxp_registrar *r, const mxp_device_def *d) {
    return add_feature(r, MXP_FEATURE_DEVICE, d, sizeof *d, offsetof(mxp_device_def, name),
                       offsetof(mxp_device_def, user_data) + sizeof(void *), "device");
}
static int add_kvstore(mxp_registrar *r, const mxp_kvstore_def *d) {
    return add_feature(r, MXP_FEATURE_KVSTORE, d, sizeof *d, offsetof(mxp_kvstore_def, name),
                       offsetof(mxp_kvstore_def, name) + sizeof(void *), "kvstore");
}
static int add_iter(mxp_registrar *r, const mxp_iter_def *d) {
    return add_feature(r, MXP_FEATURE_ITER, d, sizeof *d, offsetof(mxp_iter_def, name),
                       offsetof(mxp_iter_def, name) + sizeof(void *), "iterator");
}

static int add_stat(mxp_registrar *r, const mxp_stat_def *def, mxp_stat **out) {
    mxp_stage *s = stage_of(r);
    if (!out) return stage_err(s, mxp__error(MXP_EINVAL, "pack '%s': add_stat: NULL out", s->pack_name));
    int rc = mxp__stat_set_add(&s->stats, s->pack_name, def, out);
    return rc ? stage_err(s, rc) : MXP_OK;
}

mxp__stat_set *mxp__stage_take_stats(mxp_stage *s) {
    mxp__stat_set *st = s->stats;
    s->stats = NULL;
    return st;
}

int mxp__stage_create(mxp_pack *p, const char *pack_name, mxp_stage **out) {
    *out = NULL;
    mxp_stage *s = calloc(1, sizeof *s);
    if (!s || !(s->pack_name = strdup(pack_name ? pack_name : "?"))) {
        free(s);
        return mxp__error_oom("stage");
    }
    s->pack = p;
    mxp_registrar r = {MXP_HEADER(mxp_registrar), s, add_op, add_impl, add_simple_op, add_device, add_kvstore, add_iter,
                       add_stat};
    s->reg = r;
    *out = s;
    return MXP_OK;
}

mxp_registrar *mxp__stage_registrar(mxp_stage *s) { return &s->reg; }
void mxp__stage_set_manifest(mxp_stage *s, const mxp_man_pack *man) { s->man = man; }

void mxp__stage_free(mxp_stage *s) {
    if (!s) return;
    for (int i = 0; i < s->n_ops; i++)
        if (!s->ops[i].simple) free(s->ops[i].def);
    for (int i = 0; i < s->n_impls; i++) {
        int owned = 1;
        for (int k = 0; k < s->n_simples; k++)
            if (s->impls[i] == &s->simples[k]->impl) owned = 0;
        if (owned) free(s->impls[i]);
    }
    for (int k = 0; k < s->n_simples; k++) mxp__simple_free(s->simples[k]);
    for (int i = 0; i < s->n_feats; i++) free(s->feats[i].def);
    mxp__stat_set_free(s->stats);
    free(s->ops); free(s->impls); free(s->simples); free(s->feats);
    free(s->pack_name);
    free(s);
}

int mxp__stage_n_ops(const mxp_stage *s) { return s->n_ops; }
const mxp_op_def *mxp__stage_op(const mxp_stage *s, int i) { return s->ops[i].def; }
int mxp__stage_n_impls(const mxp_stage *s) { return s->n_impls; }
const mxp_op_impl *mxp__stage_impl(const mxp_stage *s, int i) { return s->impls[i]; }
int mxp__stage_n_features(const mxp_stage *s, int kind) {
    int n = 0;
    for (int i = 0; i < s->n_feats; i++) n += s->feats[i].kind == kind;
    return n;
}
const char *mxp__stage_feature_name(const mxp_stage *s, int kind, int idx) {
    for (int i = 0; i < s->n_feats; i++)
        if (s->feats[i].kind == kind && idx-- == 0) return s->feats[i].name;
    return NULL;
}

/* ------------------------------------------------------------ validation */
static size_t param_size(int32_t type) {
    switch (type) {
    case MXP_PARAM_INT: case MXP_PARAM_FLOAT: return 8;
    case MXP_PARAM_BOOL: case MXP_PARAM_ENUM: case MXP_PARAM_DTYPE: return 4;
    case MXP_PARAM_STRING: return sizeof(char *);
    case MXP_PARAM_SHAPE: return sizeof(mxp_param_shape);
    case MXP_PARAM_OPT_INT: return sizeof(mxp_param_opt_int);
    case MXP_PARAM_OPT_FLOAT: return sizeof(mxp_param_opt_float);
    default: return 0;
    }
}

static int check_schema(mxp_stage *s, const mxp_op_def *d) {
    const char *pn = s->pack_name;
    if (!d->infer_shape)
        return mxp__error(MXP_EINVAL, "pack '%s': op '%s': no infer_shape", pn, d->name);
    if (d->n_params && !d->params)
        return mxp__error(MXP_EINVAL, "pack '%s': op '%s': n_params %u but no params", pn, d->name, d->n_params);
    if (d->n_params > 256)
        return mxp__error(MXP_EINVAL, "pack '%s': op '%s': too many params (%u)", pn, d->name, d->n_params);
    void *scratch = d->params_size ? calloc(1, d->params_size) : NULL;
    if (d->params_size && !scratch) return mxp__error_oom("schema check");
    int rc = MXP_OK;
    char what[160];
    snprintf(what, sizeof what, "pack '%s': op '%s'", pn, d->name);
    for (uint32_t i = 0; i < d->n_params && !rc; i++) {
        const mxp_param_def *p = mxp__param_def_at(d->params, i);
        size_t sz = param_size(p->type);
        if (!p->name || !*p->name) rc = mxp__error(MXP_EINVAL, "%s: parameter #%u has no name", what, i);
        else if (!sz) rc = mxp__error(MXP_EINVAL, "%s: parameter '%s': unknown type %d", what, p->name, p->type);
        else if ((uint64_t)p->offset + sz > d->params_size)
            rc = mxp__error(MXP_EINVAL, "%s: parameter '%s': offset %u + size %zu exceeds params_size %u", what,
                            p->name, p->offset, sz, d->params_size);
        else if (p->type == MXP_PARAM_ENUM && (!p->choices || !p->choices[0]))
            rc = mxp__error(MXP_EINVAL, "%s: enum parameter '%s' has no choices", what, p->name);
        else if (!(p->flags & MXP_PARAM_REQUIRED) && p->default_value) {
            rc = mxp__params_parse_value(p, p->default_value, (char *)scratch + p->offset, what);
            if (rc) rc = mxp__error_prefix(rc, "bad default '%s'", p->default_value);
        }
        for (uint32_t k = 0; k < i && !rc; k++)
            if (!strcmp(mxp__param_def_at(d->params, k)->name, p->name))
                rc = mxp__error(MXP_EINVAL, "%s: parameter '%s' defined twice", what, p->name);
    }
    if (scratch) {
        mxp__params_free(d->params, d->n_params, scratch);
        free(scratch);
    }
    return rc;
}

typedef struct strbuf { char buf[2048]; size_t len; int n; } strbuf;
static void sb_add(strbuf *b, const char *fmt, ...) MXP_PRINTF(2, 3);
static void sb_add(strbuf *b, const char *fmt, ...) {
    if (b->len >= sizeof b->buf - 1) return;
    if (b->n++) b->len += (size_t)snprintf(b->buf + b->len, sizeof b->buf - b->len, ", ");
    if (b->len >= sizeof b->buf - 1) return;
    va_list ap;
    va_start(ap, fmt);
    b->len += (size_t)vsnprintf(b->buf + b->len, sizeof b->buf - b->len, fmt, ap);
    va_end(ap);
}

static int staged_has_op(const mxp_stage *s, const char *name) {
    for (int i = 0; i < s->n_ops; i++)
        if (!strcmp(s->ops[i].def->name, name)) return 1;
    return 0;
}

static int staged_has_impl(const mxp_stage *s, const char *op, const char *name, const char *dev) {
    for (int i = 0; i < s->n_impls; i++)
        if (!strcmp(s->impls[i]->op_name, op) && !strcmp(s->impls[i]->impl_name, name) &&
            !strcmp(s->impls[i]->device, dev))
            return 1;
    return 0;
}

static int staged_has_feature(const mxp_stage *s, int kind, const char *name) {
    for (int i = 0; i < s->n_feats; i++)
        if (s->feats[i].kind == kind && !strcmp(s->feats[i].name, name)) return 1;
    return 0;
}

static int declared_impl(const mxp_man_pack *m, const char *op, const char *name, const char *dev) {
    for (int i = 0; i < m->n_ops; i++)
        for (int k = 0; k < m->ops[i].n_impls; k++)
            if (!strcmp(m->ops[i].name, op) && !strcmp(m->ops[i].impls[k].name, name) &&
                !strcmp(m->ops[i].impls[k].device, dev))
                return 1;
    for (int k = 0; k < m->n_impls; k++)
        if (!strcmp(m->impls[k].op, op) && !strcmp(m->impls[k].name, name) && !strcmp(m->impls[k].device, dev))
            return 1;
    return 0;
}

static int check_declared(mxp_stage *s) {
    const mxp_man_pack *m = s->man ? s->man : s->pack->man;
    strbuf miss = {.len = 0}, extra = {.len = 0};
    for (int i = 0; i < m->n_ops; i++) {
        if (!staged_has_op(s, m->ops[i].name)) sb_add(&miss, "op '%s'", m->ops[i].name);
        for (int k = 0; k < m->ops[i].n_impls; k++) {
            const mxp_man_impl *mi = &m->ops[i].impls[k];
            if (!staged_has_impl(s, m->ops[i].name, mi->name, mi->device))
                sb_add(&miss, "impl '%s' (%s) of op '%s'", mi->name, mi->device, m->ops[i].name);
        }
    }
    for (int k = 0; k < m->n_impls; k++)
        if (!staged_has_impl(s, m->impls[k].op, m->impls[k].name, m->impls[k].device))
            sb_add(&miss, "impl '%s' (%s) of op '%s'", m->impls[k].name, m->impls[k].device, m->impls[k].op);
    for (int i = 0; i < s->n_ops; i++) {
        int found = 0;
        for (int k = 0; k < m->n_ops && !found; k++) found = !strcmp(m->ops[k].name, s->ops[i].def->name);
        if (!found) sb_add(&extra, "op '%s'", s->ops[i].def->name);
    }
    for (int i = 0; i < s->n_impls; i++)
        if (!declared_impl(m, s->impls[i]->op_name, s->impls[i]->impl_name, s->impls[i]->device))
            sb_add(&extra, "impl '%s' (%s) of op '%s'", s->impls[i]->impl_name, s->impls[i]->device,
                   s->impls[i]->op_name);
    static const char *kn[] = {"", "device", "kvstore", "iterator"};
    for (int kind = 1; kind <= 3; kind++) {
        char **v = kind == 1 ? m->devices : kind == 2 ? m->kvstores : m->iterators;
        int n = kind == 1 ? m->n_devices : kind == 2 ? m->n_kvstores : m->n_iterators;
        for (int i = 0; i < n; i++)
            if (!staged_has_feature(s, kind, v[i])) sb_add(&miss, "%s '%s'", kn[kind], v[i]);
        for (int i = 0; i < s->n_feats; i++) {
            if (s->feats[i].kind != kind) continue;
            int found = 0;
            for (int k = 0; k < n && !found; k++) found = !strcmp(v[k], s->feats[i].name);
            if (!found) sb_add(&extra, "%s '%s'", kn[kind], s->feats[i].name);
        }
    }
    if (!miss.n && !extra.n) return MXP_OK;
    return mxp__error(MXP_EPLUGIN, "pack '%s': manifest (%s) and registration differ:%s%s%s%s", s->pack_name,
                      s->pack->manifest_path, miss.n ? " declared but not registered: " : "", miss.n ? miss.buf : "",
                      extra.n ? (miss.n ? "; registered but not declared: " : " registered but not declared: ") : "",
                      extra.n ? extra.buf : "");
}

int mxp__stage_validate(mxp_stage *s) {
    if (s->first_error) return mxp__error(s->first_error, "%s", s->first_msg);
    const char *pn = s->pack_name;
    for (int i = 0; i < s->n_ops; i++) {
        const mxp_op_def *d = s->ops[i].def;
        for (int k = 0; k < i; k++)
            if (!strcmp(s->ops[k].def->name, d->name))
                return mxp__error(MXP_EEXIST, "pack '%s': op '%s' registered twice", pn, d->name);
        int rc = check_schema(s, d);
        if (rc) return rc;
    }
    for (int i = 0; i < s->n_impls; i++) {
        const mxp_op_impl *im = s->impls[i];
        for (int k = 0; k < i; k++)
            if (!strcmp(s->impls[k]->op_name, im->op_name) && !strcmp(s->impls[k]->impl_name, im->impl_name) &&
                !strcmp(s->impls[k]->device, im->device))
                return mxp__error(MXP_EEXIST, "pack '%s': impl '%s' (%s) of op '%s' registered twice", pn,
                                  im->impl_name, im->device, im->op_name);
    }
    for (int i = 0; i < s->n_feats; i++)
        for (int k = 0; k < i; k++)
            if (s->feats[k].kind == s->feats[i].kind && !strcmp(s->feats[k].name, s->feats[i].name))
                return mxp__error(MXP_EEXIST, "pack '%s': '%s' registered twice", pn, s->feats[i].name);
    if (!s->pack) return MXP_OK; /* manifest gen: nothing to compare with */
    /* Against the registry. */
    int rc = MXP_OK;
    mxp__registry_rdlock();
    for (int i = 0; i < s->n_ops && !rc; i++) {
        const mxp_op_def *d = s->ops[i].def;
        struct mxp_op *op = mxp__registry_find_op_locked(d->name);
        if (op && op->pack && op->pack != s->pack)
            rc = mxp__error(MXP_EEXIST, "pack '%s' (%s): op '%s' is already defined by pack '%s' (%s)", pn,
                            s->pack->man->library, d->name, op->pack->man->name, op->pack->man->library);
        else if (op && strcmp(op->name, d->name))
            rc = mxp__error(MXP_EEXIST, "pack '%s': op '%s' is already an alias of op '%s'", pn, d->name, op->name);
    }
    for (int i = 0; i < s->n_impls && !rc; i++) {
        const mxp_op_impl *im = s->impls[i];
        if (staged_has_op(s, im->op_name)) continue;
        struct mxp_op *op = mxp__registry_find_op_locked(im->op_name);
        if (!op || !op->pack)
            rc = mxp__error(MXP_ENOENT, "pack '%s' (%s): impl '%s' is for op '%s', which no pack defines", pn,
                            s->pack->man->library, im->impl_name, im->op_name);
        else {
            mxp_impl_entry *e = mxp__registry_find_impl_locked(op, im->impl_name, im->device);
            if (e && e->pack != s->pack)
                rc = mxp__error(MXP_EEXIST, "pack '%s': impl '%s' (%s) of op '%s' is already provided by pack '%s'",
                                pn, im->impl_name, im->device, im->op_name, e->pack->man->name);
        }
    }
    /* The pack's own features (a reload validates the new copy while the old
     * one is still published) are replaced at publish, not conflicts. */
    for (int i = 0; i < s->n_feats && !rc; i++)
        for (int k = 0; k < mxp__g_reg.n_features; k++)
            if (mxp__g_reg.features[k].kind == s->feats[i].kind && mxp__g_reg.features[k].pack != s->pack &&
                !strcmp(mxp__g_reg.features[k].name, s->feats[i].name))
                rc = mxp__error(MXP_EEXIST, "pack '%s': '%s' is already registered by pack '%s'", pn,
                                s->feats[i].name, mxp__g_reg.features[k].pack->man->name);
    mxp__registry_unlock();
    if (rc) return rc;
    return check_declared(s);
}

/* ------------------------------------------------------------ publish */
int mxp__stage_publish(mxp_stage *s) {
    mxp_pack *p = s->pack;
    if (!p) return mxp__error(MXP_EMISUSE, "stage without a pack cannot be published");
    mxp_pub_op *ops = calloc((size_t)s->n_ops + 1, sizeof *ops);
    const mxp_op_impl **impls = calloc((size_t)s->n_impls + 1, sizeof *impls);
    const mxp_device_def **devs = calloc((size_t)s->n_feats + 1, sizeof *devs);
    const mxp_kvstore_def **kvs = calloc((size_t)s->n_feats + 1, sizeof *kvs);
    const mxp_iter_def **its = calloc((size_t)s->n_feats + 1, sizeof *its);
    __typeof__(mxp__g_reg.features) feats = NULL;
    if (!ops || !impls || !devs || !kvs || !its) goto oom;
    mxp__registry_wrlock();
    feats = realloc(mxp__g_reg.features, (size_t)(mxp__g_reg.n_features + s->n_feats + 1) * sizeof *feats);
    if (!feats) {
        mxp__registry_unlock();
        goto oom;
    }
    mxp__g_reg.features = feats;
    /* From here on nothing fails but entry allocation (reported, partial
     * entries are harmless: they hold no pack pointers). */
    for (int i = 0; i < s->n_ops; i++) {
        mxp_op_def *d = s->ops[i].def;
        struct mxp_op *op = mxp__registry_find_op_locked(d->name);
        if (!op) op = mxp__registry_unretire_op_locked(d->name, p); /* dropped by an earlier build */
        if (!op) op = mxp__registry_add_op_locked(d->name, p);
        if (!op) continue;
        /* Unlocked readers look at op->pack / e->pack / e->rank (stable
         * across reloads): write them only when they really change. */
        if (op->pack != p) op->pack = p;
        op->def = d;
        if (d->aliases)
            for (int a = 0; d->aliases[a]; a++) mxp__registry_add_alias_locked(op, d->aliases[a]);
        mxp__registry_cache_schema_locked(op);
        ops[i].def = d;
        ops[i].simple = s->ops[i].simple;
    }
    for (int i = 0; i < s->n_impls; i++) {
        mxp_op_impl *im = s->impls[i];
        struct mxp_op *op = mxp__registry_find_op_locked(im->op_name);
        if (!op) continue;
        mxp_impl_entry *e = mxp__registry_find_impl_locked(op, im->impl_name, im->device);
        if (!e) e = mxp__registry_add_impl_locked(op, im->impl_name, im->device, im->rank, p);
        if (!e) continue;
        e->impl = im;
        if (e->rank != im->rank) e->rank = im->rank;
        if (e->pack != p) e->pack = p;
        impls[i] = im;
    }
    int nd = 0, nk = 0, ni = 0;
    for (int i = 0; i < s->n_feats; i++) {
        struct mxp_feature *f = &mxp__g_reg.features[mxp__g_reg.n_features++];
        f->kind = s->feats[i].kind;
        f->def = s->feats[i].def;
        f->pack = p;
        f->dev_type = 0;
        if (f->kind == MXP_FEATURE_DEVICE) {
            mxp_device_def *d = s->feats[i].def;
            f->name = d->name;
            f->dev_type = d->type_hint > 0 ? d->type_hint : mxp__g_reg.next_dev_type++;
            devs[nd++] = d;
        } else if (f->kind == MXP_FEATURE_KVSTORE) {
            f->name = ((mxp_kvstore_def *)s->feats[i].def)->name;
            kvs[nk++] = s->feats[i].def;
        } else {
            f->name = ((mxp_iter_def *)s->feats[i].def)->name;
            its[ni++] = s->feats[i].def;
        }
    }
    p->ops = ops; p->n_ops = s->n_ops;
    p->impls = impls; p->n_impls = s->n_impls;
    p->simples = s->simples; p->n_simples = s->n_simples;
    p->devices = devs; p->n_devices = nd;
    p->kvstores = kvs; p->n_kvstores = nk;
    p->iters = its; p->n_iters = ni;
    mxp__registry_unlock();
    /* Device memory, copies and workers (device_glue.c). */
    for (int i = 0; i < nd; i++)
        mxp__device_glue_attach(s->pack_name, mxp__registry_device_type(devs[i]->name), devs[i]);
    /* Ownership moved to the pack. */
    s->n_ops = 0; s->n_impls = 0; s->n_simples = 0; s->n_feats = 0;
    s->simples = NULL;
    return MXP_OK;
oom:
    free(ops); free(impls); free(devs); free(kvs); free(its);
    return mxp__error_oom("publish");
}

int mxp__stage_unpublish(mxp_pack *p) {
    for (int i = 0; i < p->n_devices; i++) {
        int32_t t = MXP_DEV_UNKNOWN;
        mxp__registry_rdlock();
        for (int k = 0; k < mxp__g_reg.n_features; k++)
            if (mxp__g_reg.features[k].def == p->devices[i]) t = mxp__g_reg.features[k].dev_type;
        mxp__registry_unlock();
        mxp__device_glue_detach(p->man->name, t, p->devices[i]);
    }
    mxp__registry_wrlock();
    /* Retired ops too (reload_ops.c): one may come back with its impls. */
    int n_live = mxp__g_reg.n_ops;
    for (int i = 0; i < n_live + mxp__g_reg.n_retired_ops; i++) {
        struct mxp_op *op = i < n_live ? mxp__g_reg.ops[i] : mxp__g_reg.retired_ops[i - n_live];
        if (op->pack == p) op->def = NULL;
        for (int k = 0; k < op->n_impls; k++)
            if (op->impls[k]->pack == p) op->impls[k]->impl = NULL;
    }
    int w = 0;
    for (int i = 0; i < mxp__g_reg.n_features; i++)
        if (mxp__g_reg.features[i].pack != p) mxp__g_reg.features[w++] = mxp__g_reg.features[i];
    mxp__g_reg.n_features = w;
    mxp__registry_unlock();
    for (int i = 0; i < p->n_ops; i++)
        if (!p->ops[i].simple) free((void *)p->ops[i].def);
    for (int i = 0; i < p->n_impls; i++) {
        int owned = 1;
        for (int k = 0; k < p->n_simples; k++)
            if (p->impls[i] == &p->simples[k]->impl) owned = 0;
        if (owned) free((void *)p->impls[i]);
    }
    for (int k = 0; k < p->n_simples; k++) mxp__simple_free(p->simples[k]);
    for (int i = 0; i < p->n_devices; i++) free((void *)p->devices[i]);
    for (int i = 0; i < p->n_kvstores; i++) free((void *)p->kvstores[i]);
    for (int i = 0; i < p->n_iters; i++) free((void *)p->iters[i]);
    free(p->ops); free(p->impls); free(p->simples); free(p->devices); free(p->kvstores); free(p->iters);
    p->ops = NULL; p->impls = NULL; p->simples = NULL; p->devices = NULL; p->kvstores = NULL; p->iters = NULL;
    p->n_ops = p->n_impls = p->n_simples = p->n_devices = p->n_kvstores = p->n_iters = 0;
    return MXP_OK;
}
