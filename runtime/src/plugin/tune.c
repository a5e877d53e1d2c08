/* tune.c — the `tune` implementation policy: time every candidate the
 * first time a signature is seen, keep the fastest, persist the choice.
 *
 * select.c hands over the candidates that accept a configuration (refs in
 * auto order: rank, then name).  mxp__tune_pick builds the signature —
 * op, device, is_train, thread budget (mxp_num_threads), CPU model
 * (/proc/cpuinfo "model name"; $MXP_CPUINFO for tests), the packs'
 * name@version, the candidates' names, every parameter formatted
 * canonically (mxp__params_format, all of the schema, defaults included)
 * and the dtypes and shapes of inputs, outputs and aux states — and looks
 * it up in the cache.  On a miss it times each candidate on the calling
 * thread, synchronously, without the engine, through the production path
 * of opdef.h: an instance (workspace + create) as a node binds one, then
 * mxp__inst_run — the ctx, parallel_for and args the engine's runs get —
 * on scratch tensors of the node's shapes (inputs uniform in
 * [0, 1), aux 1.0), one warm-up and TUNE_RUNS timed runs (more for a
 * fast configuration, fewer for a slow one), median, in
 * TUNE_PASSES passes over the candidates (alternating order; the lowest
 * median of each counts); for a
 * training signature (is_train) each run is forward + backward (every
 * input gradient written), as a training step pays for both.  A
 * candidate whose timing fails is skipped; when none could be timed (or
 * the device is not the CPU, or the impl is asynchronous, or
 * $MXP_TUNE_NO_TIMING forbids timing) the auto choice (index 0) is used and
 * nothing is recorded.
 *
 * Cache: $XDG_CACHE_HOME/mxplug/tune.yaml (else ~/.cache/mxplug/tune.yaml):
 *   version: 1
 *   entries:
 *     - op: Convolution
 *       signature: "Convolution|cpu|train=0|threads=2|..."
 *       choice: gemm
 *       times_ms: {direct: 1.234, gemm: 0.812}
 * Read once per (path, mtime); written after every new result by merging
 * the file's current entries with ours (ours win), into a temporary file
 * renamed over the old one, so readers never see half a file.  A corrupt
 * file is ignored with a warning naming file:line and is rewritten at the
 * next save.  Not here: which candidates accept (select.c).
 * Thread-safe: one mutex guards the table and the file; timing runs
 * outside it (two threads may time the same signature; both results agree
 * in kind and the later write wins). */
#include "plugin/plugin_impl.h"
#include "plugin/tune_device.h"
#include "base/env.h"
#include "plugin/yaml_guard.h"

#include <mxplug/engine.h>

#include <yaml.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TUNE_RUNS 5
/* A fast configuration gets more runs, up to about TUNE_FAST_MS of timing
 * per candidate and pass: the median of 5 runs of a 0.2 ms op moved by
 * more than the gap between two impls. */
#define TUNE_MAX_RUNS 41
#define TUNE_FAST_MS 10.0
#define TUNE_PASSES 2

typedef struct tune_entry {
    char *op, *sig, *choice;
    int n_times;
    char **names;
    double *ms;
} tune_entry;

typedef struct tune_table {
    tune_entry *v;
    int n;
} tune_table;

static pthread_mutex_t g_tune_mu = PTHREAD_MUTEX_INITIALIZER;
static tune_table g_tab;              /* entries read or made             */
static char g_tab_path[1024];         /* file g_tab was read from         */
static struct timespec g_tab_mtime;
static int g_tab_loaded;
static atomic_ulong g_timing_runs;    /* timed forward calls (tests)      */

unsigned long mxp__tune_timing_runs(void) { return atomic_load(&g_timing_runs); }

/* ------------------------------------------------------------ table */
static void entry_free(tune_entry *e) {
    free(e->op);
    free(e->sig);
    free(e->choice);
    for (int i = 0; i < e->n_times; i++) free(e->names[i]);
    free(e->names);
    free(e->ms);
    memset(e, 0, sizeof *e);
}

static void table_clear(tune_table *t) {
    for (int i = 0; i < t->n; i++) entry_free(&t->v[i]);
    free(t->v);
    t->v = NULL;
    t->n = 0;
}

static tune_entry *table_find(tune_table *t, const char *sig) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->v[i].sig, sig)) return &t->v[i];
    return NULL;
}

/* Deep copy of e into t (replacing an entry of the same signature). */
static int table_put(tune_table *t, const tune_entry *e) {
    tune_entry c = {0};
    c.op = strdup(e->op);
    c.sig = strdup(e->sig);
    c.choice = strdup(e->choice);
    c.names = calloc((size_t)e->n_times + 1, sizeof *c.names);
    c.ms = calloc((size_t)e->n_times + 1, sizeof *c.ms);
    int ok = c.op && c.sig && c.choice && c.names && c.ms;
    for (int i = 0; ok && i < e->n_times; i++) {
        if (!(c.names[i] = strdup(e->names[i]))) ok = 0;
        c.ms[i] = e->ms[i];
        c.n_times = i + 1;
    }
    if (!ok) {
        entry_free(&c);
        return mxp__error_oom("tune cache");
    }
    tune_entry *old = table_find(t, e->sig);
    if (old) {
        entry_free(old);
        *old = c;
        return MXP_OK;
    }
    tune_entry *v = realloc(t->v, ((size_t)t->n + 1) * sizeof *v);
    if (!v) {
        entry_free(&c);
        return mxp__error_oom("tune cache");
    }
    t->v = v;
    t->v[t->n++] = c;
    return MXP_OK;
}

/* ------------------------------------------------------------ file */
int mxp__tune_cache_path(char *buf, size_t cap) {
    const char *x = getenv("XDG_CACHE_HOME");
    if (x && *x) return snprintf(buf, cap, "%s/mxplug/tune.yaml", x) < (int)cap ? 0 : -1;
    const char *h = getenv("HOME");
    if (!h || !*h) return -1;
    return snprintf(buf, cap, "%s/.cache/mxplug/tune.yaml", h) < (int)cap ? 0 : -1;
}

static const char *scalar(yaml_document_t *d, yaml_node_t *n) {
    (void)d;
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* Parse one entry mapping into e (fields borrowed from the document are
 * copied by table_put).  Returns 0, or -1 with *bad the offending node. */
static int read_entry(yaml_document_t *d, yaml_node_t *m, tune_table *t, yaml_node_t **bad) {
    *bad = m;
    if (m->type != YAML_MAPPING_NODE) return -1;
    tune_entry e = {0};
    char *names[64];
    double ms[64];
    e.names = names;
    e.ms = ms;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(d, p->key), *v = yaml_document_get_node(d, p->value);
        const char *ks = scalar(d, k);
        *bad = v;
        if (!ks) return -1;
        if (!strcmp(ks, "op")) e.op = (char *)scalar(d, v);
        else if (!strcmp(ks, "signature")) e.sig = (char *)scalar(d, v);
        else if (!strcmp(ks, "choice")) e.choice = (char *)scalar(d, v);
        else if (!strcmp(ks, "times_ms")) {
            if (v->type != YAML_MAPPING_NODE) return -1;
            for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top; q++) {
                yaml_node_t *qk = yaml_document_get_node(d, q->key), *qv = yaml_document_get_node(d, q->value);
                const char *name = scalar(d, qk), *val = scalar(d, qv);
                char *end;
                *bad = qv;
                if (!name || !val || e.n_times >= 64) return -1;
                double x = strtod(val, &end);
                if (end == val || *end) return -1;
                names[e.n_times] = (char *)name;
                ms[e.n_times++] = x;
            }
        }
    }
    *bad = m;
    if (!e.op || !e.sig || !e.choice || !*e.choice) return -1;
    return table_put(t, &e) ? -1 : 0;
}

/* Read path into t (cleared first).  Missing file: empty, 0.  Corrupt:
 * warning naming file:line, t left empty, returns 1. */
static int cache_read(const char *path, tune_table *t) {
    table_clear(t);
    if (access(path, F_OK) != 0) return 0;
    FILE *f = NULL;
    if (mxp_file_open_read(path, "tune cache", 64u << 20, &f, NULL)) {
        MXP_LOGW("plugin", "%s; ignoring it", mxp_last_error());
        return 1;
    }
    if (mxp__yaml_guard_file(f, "tune cache", path)) {
        MXP_LOGW("plugin", "%s; ignoring the file (it is rewritten at the next tune)", mxp_last_error());
        fclose(f);
        return 1;
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        fclose(f);
        return 1;
    }
    yaml_parser_set_input_file(&parser, f);
    int bad = 0;
    size_t line = 0;
    const char *why = "";
    if (!yaml_parser_load(&parser, &doc)) {
        bad = 1;
        line = parser.problem_mark.line + 1;
        why = parser.problem ? parser.problem : "malformed YAML";
        MXP_LOGW("plugin", "tune cache %s:%zu: %s; ignoring the file (it is rewritten at the next tune)", path, line,
                 why);
        yaml_parser_delete(&parser);
        fclose(f);
        return 1;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    yaml_node_t *badnode = root;
    if (!root) { /* empty file */
    } else if (root->type != YAML_MAPPING_NODE) {
        bad = 1;
        why = "the cache must be a mapping with 'version' and 'entries'";
    } else {
        for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top && !bad; p++) {
            yaml_node_t *k = yaml_document_get_node(&doc, p->key), *v = yaml_document_get_node(&doc, p->value);
            const char *ks = scalar(&doc, k);
            badnode = v;
            if (ks && !strcmp(ks, "version")) {
                const char *vs = scalar(&doc, v);
                if (!vs || strcmp(vs, "1")) {
                    bad = 1;
                    why = "unknown cache version (expected 1)";
                }
            } else if (ks && !strcmp(ks, "entries")) {
                if (v->type == YAML_SCALAR_NODE && !v->data.scalar.length) continue;
                if (v->type != YAML_SEQUENCE_NODE) {
                    bad = 1;
                    why = "'entries' must be a list";
                    continue;
                }
                for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
                    if (read_entry(&doc, yaml_document_get_node(&doc, *it), t, &badnode)) {
                        bad = 1;
                        why = "malformed entry (needs op, signature, choice and numeric times_ms)";
                        break;
                    }
                }
            }
        }
    }
    if (bad) {
        line = badnode ? badnode->start_mark.line + 1 : 1;
        MXP_LOGW("plugin", "tune cache %s:%zu: %s; ignoring the file (it is rewritten at the next tune)", path, line,
                 why);
        table_clear(t);
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    fclose(f);
    return bad;
}

/* Make sure g_tab reflects the file (g_tune_mu held). */
static void cache_refresh(void) {
    char path[1024];
    if (mxp__tune_cache_path(path, sizeof path)) {
        if (g_tab_loaded && g_tab_path[0]) table_clear(&g_tab);
        g_tab_path[0] = '\0';
        g_tab_loaded = 1;
        return;
    }
    struct stat st;
    struct timespec mt = {0, 0};
    if (stat(path, &st) == 0) mt = st.st_mtim;
    if (g_tab_loaded && !strcmp(path, g_tab_path) && mt.tv_sec == g_tab_mtime.tv_sec &&
        mt.tv_nsec == g_tab_mtime.tv_nsec)
        return;
    /* Entries made in this process under the same path survive a re-read
     * (another process rewrote the file): merge them back. */
    tune_table mine = {0};
    if (g_tab_loaded && !strcmp(path, g_tab_path)) {
        mine = g_tab;
        g_tab.v = NULL;
        g_tab.n = 0;
    }
    cache_read(path, &g_tab);
    for (int i = 0; i < mine.n; i++)
        if (!table_find(&g_tab, mine.v[i].sig)) table_put(&g_tab, &mine.v[i]);
    table_clear(&mine);
    snprintf(g_tab_path, sizeof g_tab_path, "%s", path);
    g_tab_mtime = mt;
    g_tab_loaded = 1;
}

static int mkdirs(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) && errno != EEXIST) return -1;
        *p = '/';
    }
    return 0;
}

/* YAML double-quoted scalar. */
static void put_quoted(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\x%02x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* The cache file's content: every entry of the table `vt`. */
static int cache_put(FILE *f, void *vt) {
    const tune_table *t = vt;
    fprintf(f, "# mxplug tune cache: the fastest implementation per op signature, written by\n"
               "# the 'tune' policy.  Safe to delete; entries are re-timed when missing.\n"
               "version: 1\nentries:%s\n", t->n ? "" : " []");
    for (int i = 0; i < t->n; i++) {
        const tune_entry *e = &t->v[i];
        fputs("  - op: ", f);
        put_quoted(f, e->op);
        fputs("\n    signature: ", f);
        put_quoted(f, e->sig);
        fputs("\n    choice: ", f);
        put_quoted(f, e->choice);
        fputs("\n    times_ms: {", f);
        for (int k = 0; k < e->n_times; k++) {
            fputs(k ? ", " : "", f);
            put_quoted(f, e->names[k]);
            fprintf(f, ": %.6g", e->ms[k]);
        }
        fputs("}\n", f);
    }
    return MXP_OK;
}

/* Merge the file's entries with g_tab and write atomically (g_tune_mu held). */
static int cache_write(void) {
    char path[1024];
    if (mxp__tune_cache_path(path, sizeof path))
        return mxp__error(MXP_EINVAL, "tune cache: neither XDG_CACHE_HOME nor HOME is set");
    tune_table disk = {0};
    cache_read(path, &disk);
    for (int i = 0; i < g_tab.n; i++) table_put(&disk, &g_tab.v[i]);
    int rc = MXP_OK;
    if (mkdirs(path)) rc = mxp__error(MXP_EIO, "tune cache '%s': cannot create its directory: %s", path, strerror(errno));
    if (!rc) rc = mxp_file_write_atomic(path, "tune cache", cache_put, &disk);
    table_clear(&disk);
    if (!rc) {
        /* Our own write is not news: remember its mtime. */
        struct stat st;
        if (stat(path, &st) == 0 && !strcmp(path, g_tab_path)) g_tab_mtime = st.st_mtim;
    }
    return rc;
}

void mxp__tune_reset(void) {
    pthread_mutex_lock(&g_tune_mu);
    table_clear(&g_tab);
    g_tab_loaded = 0;
    g_tab_path[0] = '\0';
    pthread_mutex_unlock(&g_tune_mu);
}

/* ------------------------------------------------------------ signature */

static void cpu_model(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown");
    const char *path = getenv("MXP_CPUINFO");
    FILE *f = fopen(path && *path ? path : "/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10)) continue;
        char *c = strchr(line, ':');
        if (!c) continue;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        size_t n = strcspn(c, "\r\n");
        /* '|' separates signature fields. */
        snprintf(buf, cap, "%.*s", (int)n, c);
        for (char *p = buf; *p; p++)
            if (*p == '|') *p = '/';
        break;
    }
    fclose(f);
}

static void add_tensors(mxp__strbuf *s, const char *what, uint32_t n, const mxp_shape *sh, const int32_t *dt) {
    mxp__strbuf_addf(s, "|%s=", what);
    for (uint32_t i = 0; i < n; i++) {
        mxp__strbuf_addf(s, "%s%s(", i ? ";" : "", dt ? mxp_dtype_name(dt[i]) : "?");
        for (int k = 0; sh && k < sh[i].ndim; k++) mxp__strbuf_addf(s, "%s%lld", k ? "," : "", (long long)sh[i].dims[k]);
        mxp__strbuf_addf(s, ")");
    }
}

static char *make_signature(const char *op_name, const mxp_select_query *q, mxp_impl_ref *const *refs, int n) {
    mxp__strbuf s = {0};
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    const char *dev = q->device_name ? q->device_name : mxp__device_name(q->device.type);
    mxp__strbuf_addf(&s, "%s|%s:%d|train=%d|threads=%d|cpu=%s|packs=", op_name, dev, (int)q->device.id, q->is_train ? 1 : 0,
           mxp_num_threads(), cpu);
    const mxp_pack *seen[65];
    int n_seen = 0;
    for (int i = -1; i < n; i++) {
        const mxp_pack *p = i < 0 ? refs[0]->def_pack : refs[i]->impl_pack;
        int dup = 0;
        for (int k = 0; k < n_seen; k++) dup |= seen[k] == p;
        if (dup || !p || n_seen == 64) continue;
        seen[n_seen++] = p;
        mxp__strbuf_addf(&s, "%s%s@%s", n_seen > 1 ? "," : "", p->man->name, p->man->version ? p->man->version : "?");
    }
    /* Candidate names in name order (refs come in rank order). */
    mxp__strbuf_addf(&s, "|impls=");
    int used[64] = {0};
    for (int k = 0; k < n && k < 64; k++) {
        int best = -1;
        for (int i = 0; i < n && i < 64; i++)
            if (!used[i] && (best < 0 || strcmp(refs[i]->entry->name, refs[best]->entry->name) < 0)) best = i;
        used[best] = 1;
        mxp__strbuf_addf(&s, "%s%s", k ? "," : "", refs[best]->entry->name);
    }
    mxp__strbuf_addf(&s, "|params=");
    const mxp_op_def *def = refs[0]->def;
    for (uint32_t i = 0; def && q->params && i < def->n_params; i++) {
        const mxp_param_def *pd = mxp__param_def_at(def->params, i);
        char val[512];
        if (mxp__params_format(pd, q->params, val, sizeof val)) snprintf(val, sizeof val, "?");
        mxp__strbuf_addf(&s, "%s%s=%s", i ? ";" : "", pd->name, val);
    }
    add_tensors(&s, "in", q->n_in, q->in_shapes, q->in_dtypes);
    add_tensors(&s, "out", q->n_out, q->out_shapes, q->out_dtypes);
    add_tensors(&s, "aux", q->n_aux, q->aux_shapes, q->aux_dtypes);
    for (char *p = s.buf; p && *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return s.buf;
}

/* ------------------------------------------------------------ timing */
static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void fill_values(void *p, int32_t dt, int64_t n, double constant, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        double v = constant;
        if (constant < 0) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            v = (double)(s >> 11) / 9007199254740992.0;
        }
        if (dt == MXP_DTYPE_F32) ((float *)p)[i] = (float)v;
        else if (dt == MXP_DTYPE_F64) ((double *)p)[i] = v;
    }
}

/* Median forward (training: forward + backward) time of one candidate in
 * ms (MXP_OK), or an error.  The instance and the runs are the node
 * runtime's (opdef.h); only the tensors are scratch — on a device the host
 * cannot reach (a GPU), copied into the device's memory, with a stream and
 * waiting for asynchronous impls to complete (tune_device.c). */
static int time_one(const char *op_name, mxp_impl_ref *ref, const mxp_select_query *q, double *out_ms) {
    *out_ms = 0;
    mxp__inst *inst = NULL;
    int rc = mxp__inst_create(mxp__impl_ref_retain(ref), q, (void *)q->params, 0, &inst);
    if (rc) return rc;
    mxp__tune_dev td;
    rc = mxp__tune_dev_begin(q->device, &td);
    if (rc) {
        mxp__inst_release(inst);
        return rc;
    }
    const mxp_op_def *def = mxp__inst_def(inst);
    uint32_t n_in = q->n_in, n_out = q->n_out, n_aux = q->n_aux, nt = n_in + n_out + n_aux;
    mxp_tensor *t = calloc((size_t)nt + 1, sizeof *t);
    int32_t *req = calloc((size_t)n_out + 1, sizeof *req);
    if (!t || !req) rc = mxp__error_oom("tune");
    for (uint32_t i = 0; i < nt && !rc; i++) {
        const mxp_shape *sh = &inst->shapes[i];
        int32_t dt = inst->dtypes[i];
        int64_t numel = 1;
        for (int k = 0; k < sh->ndim; k++) numel *= sh->dims[k];
        size_t es = mxp_dtype_size(dt);
        if (sh->ndim < 0 || numel < 0 || !es) {
            rc = mxp__error(MXP_ESHAPE, "tensor %u of unknown shape or dtype", i);
            break;
        }
        t[i].hdr = (mxp_header)MXP_HEADER(mxp_tensor);
        t[i].data = calloc((size_t)numel * es + 64, 1);
        if (!t[i].data) {
            rc = mxp__error_oom("tune scratch");
            break;
        }
        t[i].dtype = dt;
        t[i].ndim = sh->ndim;
        t[i].shape = sh->dims;
        t[i].device = q->device;
        t[i].version = 1;
        if (i < n_in) fill_values(t[i].data, dt, numel, -1, i + 1);
        else if (i >= n_in + n_out) fill_values(t[i].data, dt, numel, 1.0, 0);
        rc = mxp__tune_dev_move(&td, &t[i].data, (size_t)numel * es + 64);
    }
    for (uint32_t i = 0; i < n_out && req; i++) req[i] = MXP_REQ_WRITE;
    /* Training signature: time forward + backward (all gradients), since
     * that is what a training step pays for.  Backward's tensors are laid
     * out as the node runtime's: [out_grad | in | out | in_grad | aux]. */
    int bwd = q->is_train && mxp__inst_has_backward(inst) && !(def->flags & MXP_OP_NO_GRADIENT);
    uint32_t nb = 2 * n_out + 2 * n_in + n_aux;
    mxp_tensor *bt = bwd && !rc ? calloc((size_t)nb + 1, sizeof *bt) : NULL;
    int32_t *breq = bwd && !rc ? calloc((size_t)n_in + 1, sizeof *breq) : NULL;
    if (bwd && !rc && (!bt || !breq)) rc = mxp__error_oom("tune");
    for (uint32_t i = 0; bwd && !rc && i < n_in + n_out; i++) bt[n_out + i] = t[i]; /* in | out */
    for (uint32_t i = 0; bwd && !rc && i < n_aux; i++) bt[2 * n_out + 2 * n_in + i] = t[n_in + n_out + i];
    for (uint32_t i = 0; bwd && !rc && i < n_out + n_in; i++) {
        /* out_grad[i] like output i; in_grad[i] like input i. */
        const mxp_tensor *like = i < n_out ? &t[n_in + i] : &t[i - n_out];
        mxp_tensor *g = i < n_out ? &bt[i] : &bt[2 * n_out + n_in + (i - n_out)];
        size_t bytes = (size_t)mxp_tensor_numel(like) * mxp_dtype_size(like->dtype);
        *g = *like;
        if (!(g->data = calloc(bytes + 64, 1))) rc = mxp__error_oom("tune scratch");
        else if (i < n_out) fill_values(g->data, like->dtype, mxp_tensor_numel(like), -1, 100 + i);
        if (g->data && !rc) rc = mxp__tune_dev_move(&td, &g->data, bytes + 64);
    }
    for (uint32_t i = 0; breq && i < n_in; i++) breq[i] = MXP_REQ_WRITE;
    void *ws = NULL;
    uint64_t ws_bytes = inst->workspace_bytes;
    if (!rc && ws_bytes && !(ws = aligned_alloc(64, (ws_bytes + 63) / 64 * 64))) rc = mxp__error_oom("tune workspace");
    if (!rc && ws) rc = mxp__tune_dev_move(&td, &ws, (ws_bytes + 63) / 64 * 64);
    mxp_rng rng;
    memset(&rng, 0, sizeof rng);
    int has_rng = 0;
    if (!rc && (def->resources & MXP_RESOURCE_RANDOM)) {
        rc = mxp__rng_reserve(q->device, 1u << 20, &rng.stream);
        has_rng = !rc;
    }
    double times[TUNE_MAX_RUNS];
    int runs = 0;
    if (!rc) {
        mxp__run fr = {.is_train = q->is_train ? 1 : 0,
                       .dev = q->device,
                       .stream = td.stream,
                       .t = t,
                       .req = req,
                       .ws = ws,
                       .ws_bytes = ws_bytes,
                       .rng = has_rng ? &rng : NULL,
                       .label = op_name};
        mxp__run br = fr;
        br.backward = 1;
        br.t = bt;
        br.req = breq;
        mxp_op_ctx ctx;
        int total = 1 + TUNE_RUNS;
        for (int r = 0; r < total && !rc; r++) {
            double t0 = now_ms();
            rc = mxp__tune_run(inst, &fr, &ctx);
            if (!rc && bwd) rc = mxp__tune_run(inst, &br, &ctx);
            double dt = now_ms() - t0;
            atomic_fetch_add(&g_timing_runs, 1);
            if (rc) break;
            if (r == 0) {
                /* A slow configuration: fewer runs keep tuning bounded. */
                if (dt > 500) total = 2;
                else if (dt > 100) total = 4;
                else if (dt * TUNE_MAX_RUNS < TUNE_FAST_MS) total = 1 + TUNE_MAX_RUNS;
                else if (dt * TUNE_RUNS < TUNE_FAST_MS) total = 1 + (int)(TUNE_FAST_MS / dt);
                continue;
            }
            times[runs++] = dt;
        }
    }
    mxp__inst_release(inst);
    mxp__tune_dev_end(&td); /* host pointers back in t, bt and ws */
    free(ws);
    for (uint32_t i = 0; bt && i < n_out; i++) free(bt[i].data);
    for (uint32_t i = 0; bt && i < n_in; i++) free(bt[2 * n_out + n_in + i].data);
    free(bt);
    free(breq);
    for (uint32_t i = 0; t && i < nt; i++) free(t[i].data);
    free(t);
    free(req);
    if (rc) return rc;
    qsort(times, (size_t)runs, sizeof *times, cmp_double);
    *out_ms = runs ? times[runs / 2] : 0;
    return MXP_OK;
}

static int timing_forbidden(void) {
    return mxp__env_bool("MXP_TUNE_NO_TIMING", 0);
}

/* ------------------------------------------------------------ pick */
static void note_times(mxp__strbuf *s, const tune_entry *e) {
    for (int i = 0; i < e->n_times; i++) mxp__strbuf_addf(s, "%s%s %.3f ms", i ? ", " : "", e->names[i], e->ms[i]);
}

int mxp__tune_pick(struct mxp_op *op, const mxp_select_query *q, mxp_impl_ref *const *refs, int n, int *out_index,
                   char **out_note) {
    *out_index = 0;
    if (out_note) *out_note = NULL;
    const char *op_name = mxp__op_name(op);
    if (n <= 0) return mxp__error(MXP_EINVAL, "tune: no candidates");
    mxp__strbuf note = {0};
    char *sig = make_signature(op_name, q, refs, n);
    if (!sig) return mxp__error_oom("tune signature");
    char path[1024] = "";
    if (mxp__tune_cache_path(path, sizeof path)) snprintf(path, sizeof path, "(no cache: XDG_CACHE_HOME and HOME unset)");
    /* Cached? */
    pthread_mutex_lock(&g_tune_mu);
    cache_refresh();
    tune_entry *hit = table_find(&g_tab, sig);
    int idx = -1;
    if (hit)
        for (int i = 0; i < n; i++)
            if (!strcmp(refs[i]->entry->name, hit->choice)) idx = i;
    if (idx >= 0) {
        mxp__strbuf_addf(&note, "tune: '%s' from the cache %s (", hit->choice, path);
        note_times(&note, hit);
        mxp__strbuf_addf(&note, ")");
    }
    pthread_mutex_unlock(&g_tune_mu);
    if (idx >= 0) {
        MXP_LOGD("plugin", "op '%s': tune cache hit: %s", op_name, refs[idx]->entry->name);
        *out_index = idx;
        free(sig);
        if (out_note) *out_note = note.buf; else free(note.buf);
        return MXP_OK;
    }
    free(note.buf);
    note = (mxp__strbuf){0};
    const char *dev = q->device_name ? q->device_name : mxp__device_name(q->device.type);
    /* Any device: scratch, stream and completion come from tune_device.c. */
    if (timing_forbidden() || n == 1) {
        const char *why = n == 1 ? "only one candidate accepts" : "timing forbidden by MXP_TUNE_NO_TIMING";
        mxp__strbuf_addf(&note, "tune: not timed (%s, device %s): '%s' as auto", why, dev, refs[0]->entry->name);
        free(sig);
        if (out_note) *out_note = note.buf; else free(note.buf);
        return MXP_OK;
    }
    /* Time every candidate. */
    tune_entry e = {0};
    e.op = (char *)op_name;
    e.sig = sig;
    e.names = calloc((size_t)n, sizeof *e.names);
    e.ms = calloc((size_t)n, sizeof *e.ms);
    double *ms = calloc((size_t)n, sizeof *ms); /* per candidate, -1: not timed */
    if (!e.names || !e.ms || !ms) {
        free(e.names);
        free(e.ms);
        free(ms);
        free(sig);
        return mxp__error_oom("tune");
    }
    int best = -1;
    double best_ms = 0;
    mxp__strbuf failed = {0};
    /* TUNE_PASSES passes, in alternating order, each candidate keeping its
     * lowest median: interference from elsewhere only ever adds time, and a
     * drift in machine load does not favour whoever ran first. */
    for (int i = 0; i < n; i++) ms[i] = -1;
    for (int pass = 0; pass < TUNE_PASSES; pass++)
        for (int k = 0; k < n; k++) {
            int i = pass % 2 ? n - 1 - k : k;
            if (pass > 0 && ms[i] < 0) continue; /* failed before */
            double t;
            int trc = time_one(op_name, refs[i], q, &t);
            if (trc) {
                MXP_LOGW("plugin", "op '%s': tune could not time impl '%s': %s", op_name, refs[i]->entry->name,
                         mxp_last_error());
                mxp__strbuf_addf(&failed, "; '%s' not timed: %s", refs[i]->entry->name, mxp_last_error());
                ms[i] = -1;
                continue;
            }
            if (pass == 0 || t < ms[i]) ms[i] = t;
        }
    for (int i = 0; i < n; i++) {
        if (ms[i] < 0) continue;
        e.names[e.n_times] = (char *)refs[i]->entry->name;
        e.ms[e.n_times++] = ms[i];
        /* Strictly faster wins: a tie keeps the auto order. */
        if (best < 0 || ms[i] < best_ms) {
            best = i;
            best_ms = ms[i];
        }
    }
    free(ms);
    mxp__error_clear();
    if (best < 0) {
        mxp__strbuf_addf(&note, "tune: no candidate could be timed: '%s' as auto%s", refs[0]->entry->name,
               failed.buf ? failed.buf : "");
        *out_index = 0;
    } else {
        e.choice = (char *)refs[best]->entry->name;
        *out_index = best;
        pthread_mutex_lock(&g_tune_mu);
        cache_refresh();
        int prc = table_put(&g_tab, &e);
        int wrc = prc ? prc : cache_write();
        pthread_mutex_unlock(&g_tune_mu);
        mxp__strbuf_addf(&note, "tune: '%s' timed now (", e.choice);
        note_times(&note, &e);
        mxp__strbuf_addf(&note, ")%s%s%s", q->is_train ? "; runs are forward+backward (training)" : "",
               failed.buf ? failed.buf : "", wrc ? "; not saved: " : "; saved to ");
        mxp__strbuf_addf(&note, "%s", wrc ? mxp_last_error() : path);
        if (wrc) MXP_LOGW("plugin", "op '%s': tune result not saved: %s", op_name, mxp_last_error());
        mxp__error_clear();
        MXP_LOGI("plugin", "op '%s': tune chose '%s'", op_name, e.choice);
    }
    free(failed.buf);
    free(e.names);
    free(e.ms);
    free(sig);
    if (out_note) *out_note = note.buf; else free(note.buf);
    return MXP_OK;
}
