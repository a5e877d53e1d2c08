/* iter_harness.c — direct driver for data-iterator packs (see
 * iter_harness.h).  Test-only: allocation failures abort via the caller's
 * assertions (statuses are returned), nothing here is thread-safe, and the
 * fake host implements only set_error, log, num_threads and the params
 * slots; every other slot is NULL, which packs must treat as absent. */
#include "iter_harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static char g_error[1024];
static char g_log[1024];

static int fake_set_error(int32_t status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_error, sizeof g_error, fmt, ap);
    va_end(ap);
    return status;
}

static void fake_log(int32_t level, const char *category, const char *fmt, ...) {
    (void)level;
    (void)category;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_log, sizeof g_log, fmt, ap);
    va_end(ap);
}

static int32_t fake_num_threads(void) { return 1; }

static const mxp_host g_host = {
    .hdr = MXP_HEADER(mxp_host),
    .host_version = "test-harness",
    .set_error = fake_set_error,
    .log = fake_log,
    .num_threads = fake_num_threads,
    .parse_params = iter_harness_parse_params,
    .free_params = iter_harness_free_params,
};

const mxp_host *iter_harness_host(void) { return &g_host; }
const char *iter_harness_error(void) { return g_error; }
const char *iter_harness_log(void) { return g_log; }
void iter_harness_clear_error(void) { g_error[0] = '\0'; }

/* ------------------------------------------------------------ registrar */
static int reg_add_iter(mxp_registrar *r, const mxp_iter_def *def) {
    iter_harness *h = r->host_private;
    if (!def || !def->name || def->hdr.struct_size < sizeof(mxp_iter_def))
        return fake_set_error(MXP_EINVAL, "add_iter: bad definition");
    if (h->n_defs == ITER_HARNESS_MAX_DEFS) return fake_set_error(MXP_ENOMEM, "add_iter: too many");
    h->defs[h->n_defs++] = def;
    return MXP_OK;
}

int iter_harness_open(iter_harness *h, const char *so_path) {
    memset(h, 0, sizeof *h);
    iter_harness_clear_error();
    h->dl = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    if (!h->dl) return fake_set_error(MXP_ENOENT, "dlopen '%s': %s", so_path, dlerror());
    mxp_plugin_entry_fn entry;
    void *sym = dlsym(h->dl, MXP_PLUGIN_ENTRY_NAME);
    memcpy(&entry, &sym, sizeof entry); /* object -> function pointer */
    if (!entry) {
        iter_harness_close(h);
        return fake_set_error(MXP_EABI, "'%s' has no %s", so_path, MXP_PLUGIN_ENTRY_NAME);
    }
    h->desc = entry();
    if (!h->desc || h->desc->hdr.abi_major != MXP_ABI_MAJOR || !h->desc->init) {
        iter_harness_close(h);
        return fake_set_error(MXP_EABI, "'%s': bad descriptor", so_path);
    }
    mxp_registrar reg = {.hdr = MXP_HEADER(mxp_registrar), .host_private = h, .add_iter = reg_add_iter};
    mxp_plugin_init_args ia = {.hdr = MXP_HEADER(mxp_plugin_init_args), .host = &g_host,
                               .registrar = &reg, .library_path = so_path};
    int rc = h->desc->init(&ia);
    if (rc != MXP_OK) {
        iter_harness_close(h);
        return rc;
    }
    h->initialized = 1;
    return MXP_OK;
}

void iter_harness_close(iter_harness *h) {
    if (!h) return;
    if (h->dl) {
        if (h->initialized && h->desc->fini) {
            mxp_plugin_fini_args fa = {.hdr = MXP_HEADER(mxp_plugin_fini_args), .host = &g_host};
            h->desc->fini(&fa);
        }
        dlclose(h->dl);
    }
    memset(h, 0, sizeof *h);
}

const mxp_iter_def *iter_harness_find(const iter_harness *h, const char *name) {
    for (uint32_t i = 0; i < h->n_defs; i++)
        if (strcmp(h->defs[i]->name, name) == 0) return h->defs[i];
    return NULL;
}

/* --------------------------------------------------------------- params */
static int parse_one(const mxp_param_def *d, const char *val, void *out, const char *what) {
    char *slot = (char *)out + d->offset;
    char *end;
    switch (d->type) {
    case MXP_PARAM_INT: {
        errno = 0;
        long long v = strtoll(val, &end, 10);
        if (errno || end == val || *end)
            return fake_set_error(MXP_EINVAL, "%s '%s': '%s' is not an integer", what, d->name, val);
        if (((d->flags & MXP_PARAM_HAS_MIN) && (double)v < d->min) ||
            ((d->flags & MXP_PARAM_HAS_MAX) && (double)v > d->max))
            return fake_set_error(MXP_EINVAL, "%s '%s': %lld out of range", what, d->name, v);
        int64_t x = v;
        memcpy(slot, &x, sizeof x);
        return MXP_OK;
    }
    case MXP_PARAM_FLOAT: {
        errno = 0;
        double v = strtod(val, &end);
        if (errno || end == val || *end)
            return fake_set_error(MXP_EINVAL, "%s '%s': '%s' is not a number", what, d->name, val);
        if (((d->flags & MXP_PARAM_HAS_MIN) && v < d->min) || ((d->flags & MXP_PARAM_HAS_MAX) && v > d->max))
            return fake_set_error(MXP_EINVAL, "%s '%s': %g out of range", what, d->name, v);
        memcpy(slot, &v, sizeof v);
        return MXP_OK;
    }
    case MXP_PARAM_BOOL: {
        int32_t b;
        if (!strcasecmp(val, "true") || !strcmp(val, "1")) b = 1;
        else if (!strcasecmp(val, "false") || !strcmp(val, "0")) b = 0;
        else return fake_set_error(MXP_EINVAL, "%s '%s': '%s' is not a boolean", what, d->name, val);
        memcpy(slot, &b, sizeof b);
        return MXP_OK;
    }
    case MXP_PARAM_ENUM: {
        for (int32_t i = 0; d->choices && d->choices[i]; i++)
            if (!strcmp(d->choices[i], val)) {
                memcpy(slot, &i, sizeof i);
                return MXP_OK;
            }
        return fake_set_error(MXP_EINVAL, "%s '%s': '%s' is not one of its choices", what, d->name, val);
    }
    case MXP_PARAM_STRING: {
        char *old;
        memcpy(&old, slot, sizeof old);
        free(old);
        char *s = strdup(val);
        if (!s) return fake_set_error(MXP_ENOMEM, "%s '%s': out of memory", what, d->name);
        memcpy(slot, &s, sizeof s);
        return MXP_OK;
    }
    default:
        return fake_set_error(MXP_EUNSUPPORTED, "%s '%s': type %d not supported by the test harness", what,
                              d->name, d->type);
    }
}

void iter_harness_free_params(const mxp_param_def *defs, uint32_t n_defs, void *params) {
    if (!params) return;
    for (uint32_t i = 0; i < n_defs; i++) {
        const mxp_param_def *d = MXP_ARRAY_AT(mxp_param_def, defs, i);
        if (d->type != MXP_PARAM_STRING) continue;
        char *s;
        memcpy(&s, (char *)params + d->offset, sizeof s);
        free(s);
        s = NULL;
        memcpy((char *)params + d->offset, &s, sizeof s);
    }
}

int iter_harness_parse_params(const mxp_param_def *defs, uint32_t n_defs, const char *const *keys,
                              const char *const *vals, uint32_t n_kwargs, void *out, const char *what) {
    for (uint32_t k = 0; k < n_kwargs; k++) {
        int found = 0;
        for (uint32_t i = 0; i < n_defs && !found; i++)
            found = strcmp(MXP_ARRAY_AT(mxp_param_def, defs, i)->name, keys[k]) == 0;
        if (!found) return fake_set_error(MXP_EINVAL, "%s: unknown parameter '%s'", what, keys[k]);
    }
    for (uint32_t i = 0; i < n_defs; i++) {
        const mxp_param_def *d = MXP_ARRAY_AT(mxp_param_def, defs, i);
        const char *val = d->default_value;
        for (uint32_t k = 0; k < n_kwargs; k++)
            if (strcmp(d->name, keys[k]) == 0) val = vals[k]; /* last wins */
        if (!val) {
            if (d->flags & MXP_PARAM_REQUIRED) {
                iter_harness_free_params(defs, n_defs, out);
                return fake_set_error(MXP_EINVAL, "%s: required parameter '%s' missing", what, d->name);
            }
            continue;
        }
        int rc = parse_one(d, val, out, what);
        if (rc != MXP_OK) {
            iter_harness_free_params(defs, n_defs, out);
            return rc;
        }
    }
    return MXP_OK;
}

/* ------------------------------------------------------------- instance */
void iter_harness_destroy(iter_instance *inst) {
    if (!inst) return;
    if (inst->state && inst->def->destroy) {
        mxp_iter_destroy_args da = {.hdr = MXP_HEADER(mxp_iter_destroy_args), .user_data = inst->def->user_data,
                                    .state = inst->state};
        inst->def->destroy(&da);
    }
    if (inst->params) {
        iter_harness_free_params(inst->def->params, inst->def->n_params, inst->params);
        free(inst->params);
    }
    for (int i = 0; i < ITER_HARNESS_MAX_ENTRIES; i++) free(inst->bufs[i]);
    free(inst->index);
    memset(inst, 0, sizeof *inst);
}

int iter_harness_create(const mxp_iter_def *def, const char *const *keys, const char *const *vals,
                        uint32_t n_kwargs, iter_instance *inst) {
    memset(inst, 0, sizeof *inst);
    iter_harness_clear_error();
    inst->def = def;
    inst->params = calloc(1, def->params_size ? def->params_size : 1);
    if (!inst->params) return MXP_ENOMEM;
    int rc = iter_harness_parse_params(def->params, def->n_params, keys, vals, n_kwargs, inst->params, def->name);
    if (rc != MXP_OK) goto fail;
    mxp_iter_create_args ca = {.hdr = MXP_HEADER(mxp_iter_create_args), .params = inst->params,
                               .user_data = def->user_data};
    rc = def->create(&ca);
    if (rc != MXP_OK) goto fail;
    inst->state = ca.state;
    mxp_iter_provide_args pa = {.hdr = MXP_HEADER(mxp_iter_provide_args), .user_data = def->user_data,
                                .state = inst->state, .capacity = ITER_HARNESS_MAX_ENTRIES,
                                .names = inst->names, .shapes = inst->shapes, .dtypes = inst->dtypes};
    rc = def->provide(&pa);
    if (rc != MXP_OK) goto fail;
    if (pa.n_data + pa.n_label > ITER_HARNESS_MAX_ENTRIES) {
        rc = fake_set_error(MXP_EINVAL, "provide: too many entries");
        goto fail;
    }
    inst->n_data = pa.n_data;
    inst->n_label = pa.n_label;
    int64_t batch = 0;
    for (uint32_t i = 0; i < pa.n_data + pa.n_label; i++) {
        const mxp_shape *s = &inst->shapes[i];
        int64_t n = 1;
        for (int32_t d = 0; d < s->ndim; d++) {
            n *= s->dims[d];
            inst->shape_storage[i][d] = s->dims[d];
        }
        if (i == 0) batch = s->ndim > 0 ? s->dims[0] : 1;
        inst->numel[i] = n;
        uint32_t es = mxp_dtype_size(inst->dtypes[i]);
        /* Garbage-fill so a pack that leaves elements unwritten is caught. */
        inst->bufs[i] = malloc((size_t)(n * es) + 1);
        if (!inst->bufs[i]) {
            rc = MXP_ENOMEM;
            goto fail;
        }
        memset(inst->bufs[i], 0xA5, (size_t)(n * es));
        mxp_tensor *t = &inst->tensors[i];
        t->hdr = (mxp_header)MXP_HEADER(mxp_tensor);
        t->data = inst->bufs[i];
        t->dtype = inst->dtypes[i];
        t->ndim = s->ndim;
        t->shape = inst->shape_storage[i];
        t->device = (mxp_device){MXP_DEV_CPU, 0};
    }
    inst->index_capacity = (uint32_t)batch;
    inst->index = calloc((size_t)(batch ? batch : 1), sizeof *inst->index);
    if (!inst->index) {
        rc = MXP_ENOMEM;
        goto fail;
    }
    return MXP_OK;
fail:
    iter_harness_destroy(inst);
    return rc;
}

int iter_harness_reset(iter_instance *inst, uint64_t epoch) {
    mxp_iter_reset_args ra = {.hdr = MXP_HEADER(mxp_iter_reset_args), .user_data = inst->def->user_data,
                              .state = inst->state, .epoch = epoch};
    return inst->def->reset(&ra);
}

int iter_harness_next(iter_instance *inst, int with_index, int *has_batch, int *pad) {
    for (uint32_t i = 0; i < inst->n_data + inst->n_label; i++)
        memset(inst->bufs[i], 0xA5, (size_t)inst->numel[i] * mxp_dtype_size(inst->dtypes[i]));
    mxp_iter_next_args na = {.hdr = MXP_HEADER(mxp_iter_next_args), .user_data = inst->def->user_data,
                             .state = inst->state, .n_data = inst->n_data, .n_label = inst->n_label,
                             .data = &inst->tensors[0], .label = &inst->tensors[inst->n_data],
                             .has_batch = -1, .pad = -1,
                             .index = with_index ? inst->index : NULL,
                             .index_capacity = with_index ? inst->index_capacity : 0};
    int rc = inst->def->next(&na);
    *has_batch = na.has_batch;
    *pad = na.pad;
    return rc;
}

float *iter_harness_f32(const iter_instance *inst, uint32_t i) { return inst->bufs[i]; }
