/* pack_stats.c — counters a pack publishes (ABI 1.2, <mxp/stats.h>): the
 * registrar's add_stat, the set a stage collects and a pack entry
 * publishes, and the public readers (mxp_pack_stats, mxp_pack_stat_value).
 *
 * Each counter is a host-owned cell (one 64-byte line, so counters bumped
 * by different threads never share a line) whose first 8 bytes the pack
 * updates with relaxed atomic builtins; the host reads them the same way.
 * The names, units and docs are host copies.  Lifetime:
 *   - a stage owns the cells its init registered; a failed or refused
 *     load (or a rolled-back reload) frees them with the stage, after the
 *     new copy's fini;
 *   - a successful load or reload moves them to the pack entry
 *     (mxp__pack_stats_swap, under the table write lock); the previous
 *     set is freed by the caller only after the old library's fini and
 *     dlclose, so neither the old code nor a reader ever touches freed
 *     cells;
 *   - readers copy values and strings under the table read lock, so a
 *     swap (write lock) waits for them and a snapshot is never torn
 *     between two builds.
 * Not here: when loads and reloads happen (loader.c, reload.c). */
#include "plugin/plugin_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAT_CELL 64          /* bytes per cell: one cache line          */
#define STAT_NAME_MAX 127
#define STAT_MAX_PER_PACK 4096

typedef struct stat_entry {
    char *name, *unit, *doc;
    int32_t kind;
    uint32_t flags;
    uint64_t *cell;           /* STAT_CELL bytes, STAT_CELL-aligned      */
} stat_entry;

struct mxp__stat_set {
    stat_entry *v;
    int n, cap;
};

void mxp__stat_set_free(mxp__stat_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) {
        free(s->v[i].name);
        free(s->v[i].unit);
        free(s->v[i].doc);
        free(s->v[i].cell);
    }
    free(s->v);
    free(s);
}

static int name_ok(const char *n) {
    size_t len = strlen(n);
    if (!len || len > STAT_NAME_MAX) return 0;
    for (size_t i = 0; i < len; i++) {
        char c = n[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-'))
            return 0;
    }
    return 1;
}

static const char *kind_unit(int32_t kind, const char *unit) {
    if (kind == MXP_STAT_BYTES) return "bytes";
    if (kind == MXP_STAT_NANOS) return "ns";
    return unit && *unit ? unit : "count";
}

int mxp__stat_set_add(mxp__stat_set **set, const char *pack_name, const mxp_stat_def *def, mxp_stat **out) {
    *out = NULL;
    const char *pn = pack_name ? pack_name : "?";
    if (!def) return mxp__error(MXP_EINVAL, "pack '%s': add_stat: NULL definition", pn);
    if (def->hdr.abi_major != MXP_ABI_MAJOR)
        return mxp__error(MXP_EABI, "pack '%s': counter definition built for ABI %u.%u, host is %d.%d", pn,
                          def->hdr.abi_major, def->hdr.abi_minor, MXP_ABI_MAJOR, MXP_ABI_MINOR);
    if (def->hdr.struct_size < offsetof(mxp_stat_def, flags) + sizeof def->flags)
        return mxp__error(MXP_EABI, "pack '%s': counter definition: struct_size %u smaller than ABI 1.2's %zu", pn,
                          (unsigned)def->hdr.struct_size, offsetof(mxp_stat_def, flags) + sizeof def->flags);
    /* Fields past the writer's struct_size are absent (NULL). */
    const char *unit = MXP_HAS_FIELD(def, mxp_stat_def, unit) ? def->unit : NULL;
    const char *doc = MXP_HAS_FIELD(def, mxp_stat_def, doc) ? def->doc : NULL;
    if (!def->name || !name_ok(def->name))
        return mxp__error(MXP_EINVAL, "pack '%s': counter name '%s': use 1 to %d letters, digits, '_', '.' or '-'",
                          pn, def->name ? def->name : "(null)", STAT_NAME_MAX);
    if (def->kind < MXP_STAT_COUNT || def->kind > MXP_STAT_NANOS)
        return mxp__error(MXP_EINVAL, "pack '%s': counter '%s': unknown kind %d (MXP_STAT_COUNT 1, BYTES 2, NANOS 3)",
                          pn, def->name, def->kind);
    if (def->flags & ~MXP_STAT_GAUGE)
        return mxp__error(MXP_EINVAL, "pack '%s': counter '%s': unknown flags 0x%x", pn, def->name,
                          (unsigned)(def->flags & ~MXP_STAT_GAUGE));
    mxp__stat_set *s = *set;
    if (!s && !(s = *set = calloc(1, sizeof *s))) return mxp__error_oom("pack counters");
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i].name, def->name))
            return mxp__error(MXP_EEXIST, "pack '%s': counter '%s' registered twice", pn, def->name);
    if (s->n >= STAT_MAX_PER_PACK)
        return mxp__error(MXP_EINVAL, "pack '%s': more than %d counters", pn, STAT_MAX_PER_PACK);
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 8;
        stat_entry *v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v) return mxp__error_oom("pack counters");
        s->v = v;
        s->cap = cap;
    }
    stat_entry e = {0};
    e.kind = def->kind;
    e.flags = def->flags;
    e.name = strdup(def->name);
    e.unit = strdup(kind_unit(def->kind, unit));
    e.doc = strdup(doc ? doc : "");
    e.cell = aligned_alloc(STAT_CELL, STAT_CELL);
    if (!e.name || !e.unit || !e.doc || !e.cell) {
        free(e.name);
        free(e.unit);
        free(e.doc);
        free(e.cell);
        return mxp__error_oom("pack counters");
    }
    memset(e.cell, 0, STAT_CELL);
    s->v[s->n++] = e;
    *out = (mxp_stat *)(void *)e.cell;
    return MXP_OK;
}

int mxp__stat_set_count(const mxp__stat_set *s) { return s ? s->n : 0; }

mxp__stat_set *mxp__pack_stats_swap(mxp_pack *p, mxp__stat_set *set) {
    mxp__registry_wrlock();
    mxp__stat_set *old = p->stats;
    p->stats = set;
    mxp__registry_unlock();
    return old;
}

/* ------------------------------------------------------------ public */
int mxp_pack_stats(const mxp_pack *p, mxp_pack_stat **out_stats, int *out_count) {
    if (out_stats) *out_stats = NULL;
    if (out_count) *out_count = 0;
    if (!p || !out_stats || !out_count) return mxp__error(MXP_EMISUSE, "mxp_pack_stats: NULL argument");
    mxp__registry_rdlock();
    const mxp__stat_set *s = p->stats;
    int n = s ? s->n : 0;
    if (n <= 0) {
        mxp__registry_unlock();
        return MXP_OK;
    }
    size_t strings = 0;
    for (int i = 0; i < n; i++)
        strings += strlen(s->v[i].name) + strlen(s->v[i].unit) + strlen(s->v[i].doc) + 3;
    mxp_pack_stat *v = malloc((size_t)n * sizeof *v + strings);
    if (!v) {
        mxp__registry_unlock();
        return mxp__error_oom("pack counters");
    }
    char *w = (char *)(v + n);
    for (int i = 0; i < n; i++) {
        const stat_entry *e = &s->v[i];
        const char *src[3] = {e->name, e->unit, e->doc};
        const char **dst[3] = {&v[i].name, &v[i].unit, &v[i].doc};
        for (int k = 0; k < 3; k++) {
            size_t len = strlen(src[k]) + 1;
            memcpy(w, src[k], len);
            *dst[k] = w;
            w += len;
        }
        v[i].kind = e->kind;
        v[i].gauge = (e->flags & MXP_STAT_GAUGE) != 0;
        v[i].value = __atomic_load_n(e->cell, __ATOMIC_RELAXED);
    }
    mxp__registry_unlock();
    *out_stats = v;
    *out_count = n;
    return MXP_OK;
}

void mxp_pack_stats_free(mxp_pack_stat *stats) { free(stats); }

int mxp_pack_stat_value(const mxp_pack *p, const char *name, uint64_t *out_value) {
    if (out_value) *out_value = 0;
    if (!p || !name || !out_value) return mxp__error(MXP_EMISUSE, "mxp_pack_stat_value: NULL argument");
    char list[512] = "";
    size_t off = 0;
    int found = 0;
    mxp__registry_rdlock();
    const mxp__stat_set *s = p->stats;
    for (int i = 0; s && i < s->n && !found; i++)
        if (!strcmp(s->v[i].name, name)) {
            *out_value = __atomic_load_n(s->v[i].cell, __ATOMIC_RELAXED);
            found = 1;
        }
    for (int i = 0; s && i < s->n && !found && off < sizeof list; i++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s'%s'", i ? ", " : "", s->v[i].name);
    int loaded = p->state == PACK_LOADED;
    mxp__registry_unlock();
    if (found) return MXP_OK;
    return mxp__error(MXP_ENOENT, "pack '%s': no counter '%s' (%s%s)", p->man->name, name,
                      !loaded ? "the pack is not loaded" : *list ? "it publishes " : "it publishes none",
                      loaded ? list : "");
}
