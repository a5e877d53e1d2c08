/* cmd_im2rec.c — `mxplug im2rec`: MXNet's tools/im2rec.py in C.
 *
 *   mxplug im2rec --list [--recursive] [--exts .jpg,.jpeg,.png] [--chunks N]
 *                 [--train-ratio R] [--test-ratio R] [--no-shuffle] PREFIX ROOT
 *       makes PREFIX.lst ("index<TAB>label<TAB>relative path"); with
 *       --recursive each sub-folder of ROOT is a label (sorted names, 0..),
 *       else every image directly in ROOT gets label 0.  Shuffled with a
 *       fixed seed unless --no-shuffle; ratios < 1 split into PREFIX_train,
 *       _val, _test; --chunks N splits into PREFIX_0.. first.
 *   mxplug im2rec [--resize N] [--center-crop] [--quality Q]
 *                 [--encoding .jpg|.png] [--pass-through] [--color 1|0]
 *                 [--num-thread N] PREFIX ROOT
 *       packs PREFIX.lst's images (paths relative to ROOT) into PREFIX.rec
 *       and PREFIX.idx (record key = the list's index).  A file that cannot
 *       be read or decoded is skipped with a warning naming it and counted.
 *   mxplug im2rec --from-mnist DIR OUT_PREFIX [--set train|t10k]
 *                 [--encoding .png|.jpg] [--quality Q] [--limit N]
 *       turns an IDX data set (MNIST, Fashion-MNIST) into image records,
 *       so tests and the demo get images without downloads.
 * Images go through the io-image pack's codec (img_codec.c, linked in by
 * tool.mk): JPEG with libjpeg-turbo, PNG with libpng.  Records are written
 * in list order whatever --num-thread is (workers encode a window of
 * records, the main thread writes them in order).  A progress line (records/s,
 * ETA) is drawn on stderr when it is a terminal. */
#include "cli.h"
#include "progress.h"

#include "../../plugins/io-image/src/idx.h"
#include "../../plugins/io-image/src/img_codec.h"
#include "../../plugins/io-image/src/img_list.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *CMD = "im2rec";

typedef struct opts {
    int list, recursive, shuffle, chunks;
    double train_ratio, test_ratio;
    const char *exts;
    int resize, center_crop, quality, png, pass_through, color, threads;
    const char *from_mnist, *mnist_set;
    long limit;
    const char *prefix, *root;
} opts;

/* ---------------------------------------------------------- list mode */
typedef struct item {
    char *path; /* relative to root */
    float label;
} item;

typedef struct items {
    item *v;
    size_t n, cap;
} items;

static int has_ext(const char *name, const char *exts) {
    const char *dot = strrchr(name, '.');
    if (!dot) return 0;
    size_t n = strlen(dot);
    for (const char *p = exts; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && !strncasecmp(p, dot, n)) return 1;
        p += l + (e ? 1 : 0);
    }
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted entry names of dir (files or directories). */
static char **list_dir(const char *dir, int want_dirs, size_t *n) {
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    size_t cap = 16;
    char **v = malloc(cap * sizeof *v);
    struct dirent *e;
    while (v && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(full, &st) != 0) continue;
        if (want_dirs ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) continue;
        if (*n == cap) {
            char **t = realloc(v, 2 * cap * sizeof *v);
            if (!t) break;
            v = t;
            cap *= 2;
        }
        v[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    if (v) qsort(v, *n, sizeof *v, cmp_str);
    return v;
}

static void add_item(items *it, const char *path, float label) {
    if (it->n == it->cap) {
        it->cap = it->cap ? 2 * it->cap : 256;
        item *t = realloc(it->v, it->cap * sizeof *t);
        if (!t) return;
        it->v = t;
    }
    it->v[it->n].path = strdup(path);
    it->v[it->n].label = label;
    it->n++;
}

/* Files (recursively) under root/rel, sorted, with `label`. */
static void walk(const char *root, const char *rel, const char *exts, float label, items *out) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s%s%s", root, *rel ? "/" : "", rel);
    size_t nf, nd;
    char **files = list_dir(dir, 0, &nf);
    for (size_t i = 0; i < nf; i++) {
        if (has_ext(files[i], exts)) {
            char p[4096];
            snprintf(p, sizeof p, "%s%s%s", rel, *rel ? "/" : "", files[i]);
            add_item(out, p, label);
        }
        free(files[i]);
    }
    free(files);
    char **dirs = list_dir(dir, 1, &nd);
    for (size_t i = 0; i < nd; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s%s%s", rel, *rel ? "/" : "", dirs[i]);
        walk(root, p, exts, label, out);
        free(dirs[i]);
    }
    free(dirs);
}

static uint64_t mix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int write_lst(const char *path, const items *v, size_t from, size_t to) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        cli_err("%s: cannot create '%s': %s", CMD, path, strerror(errno));
        return CLI_FAIL;
    }
    for (size_t i = from; i < to; i++) fprintf(f, "%zu\t%g\t%s\n", i, (double)v->v[i].label, v->v[i].path);
    int bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        cli_err("%s: cannot write '%s': %s", CMD, path, strerror(errno));
        remove(tmp);
        return CLI_FAIL;
    }
    printf("%s: %zu images\n", path, to - from);
    return CLI_OK;
}

static int make_list(const opts *o) {
    items v = {0};
    if (o->recursive) {
        size_t nd;
        char **dirs = list_dir(o->root, 1, &nd);
        if (!dirs) {
            cli_err("%s: cannot read folder '%s': %s", CMD, o->root, strerror(errno));
            return CLI_FAIL;
        }
        for (size_t i = 0; i < nd; i++) {
            walk(o->root, dirs[i], o->exts, (float)i, &v);
            free(dirs[i]);
        }
        free(dirs);
    } else {
        size_t nf;
        char **files = list_dir(o->root, 0, &nf);
        if (!files) {
            cli_err("%s: cannot read folder '%s': %s", CMD, o->root, strerror(errno));
            return CLI_FAIL;
        }
        for (size_t i = 0; i < nf; i++) {
            if (has_ext(files[i], o->exts)) add_item(&v, files[i], 0);
            free(files[i]);
        }
        free(files);
    }
    if (o->shuffle) { /* fixed seed, as im2rec.py's random.seed(100) */
        uint64_t s = 100;
        for (size_t i = v.n; i > 1; i--) {
            size_t j = (size_t)(mix(&s) % i);
            item t = v.v[i - 1];
            v.v[i - 1] = v.v[j];
            v.v[j] = t;
        }
    }
    int rc = CLI_OK;
    size_t per = (v.n + (size_t)o->chunks - 1) / (size_t)o->chunks;
    for (int c = 0; c < o->chunks && rc == CLI_OK; c++) {
        size_t a = (size_t)c * per, b = a + per > v.n ? v.n : a + per;
        if (a > b) a = b;
        char base[4096];
        if (o->chunks > 1) snprintf(base, sizeof base, "%s_%d", o->prefix, c);
        else snprintf(base, sizeof base, "%s", o->prefix);
        size_t n = b - a;
        size_t n_test = (size_t)(n * o->test_ratio), n_train = (size_t)(n * o->train_ratio);
        char p[4200];
        if (o->train_ratio >= 1.0 && o->test_ratio <= 0) {
            snprintf(p, sizeof p, "%s.lst", base);
            rc = write_lst(p, &v, a, b);
            continue;
        }
        if (n_test) {
            snprintf(p, sizeof p, "%s_test.lst", base);
            rc = write_lst(p, &v, a, a + n_test);
        }
        if (rc == CLI_OK) {
            snprintf(p, sizeof p, "%s_train.lst", base);
            rc = write_lst(p, &v, a + n_test, a + n_test + n_train);
        }
        if (rc == CLI_OK && n_test + n_train < n) {
            snprintf(p, sizeof p, "%s_val.lst", base);
            rc = write_lst(p, &v, a + n_test + n_train, b);
        }
    }
    for (size_t i = 0; i < v.n; i++) free(v.v[i].path);
    free(v.v);
    return rc;
}

/* ---------------------------------------------------------- pack mode */
typedef struct job {
    uint64_t key;
    float labels[16];
    int n_labels;
    char *path;          /* file mode                             */
    const uint8_t *px;   /* MNIST mode: gray rows x cols          */
    int pw, ph;
    uint8_t *out;        /* encoded image                         */
    size_t out_n;
    char err[512];       /* set when skipped                      */
} job;

typedef struct pool {
    const opts *o;
    job *jobs;
    size_t n;
    size_t next;
    pthread_mutex_t mu;
} pool;

static int read_file(const char *path, uint8_t **out, size_t *n, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, len = 0, got;
    uint8_t *b = malloc(cap);
    while (b && (got = fread(b + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            uint8_t *t = realloc(b, cap * 2);
            if (!t) {
                free(b);
                b = NULL;
                break;
            }
            b = t;
            cap *= 2;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!b || bad) {
        free(b);
        snprintf(err, errlen, "cannot read");
        return -1;
    }
    *out = b;
    *n = len;
    return 0;
}

static void process(const opts *o, img_dec *dec, job *j) {
    uint8_t *file = NULL;
    size_t n = 0;
    img_u8 src = {0};
    int box[4];
    if (j->path) {
        char full[4200];
        snprintf(full, sizeof full, "%s/%s", o->root, j->path);
        if (read_file(full, &file, &n, j->err, sizeof j->err)) return;
        int w, h;
        char fmt;
        if (img_probe(dec, file, n, &w, &h, &fmt, j->err, sizeof j->err)) goto done;
        if (o->pass_through) {
            j->out = file;
            j->out_n = n;
            return;
        }
        if (img_decode(dec, file, n, o->color ? 3 : 1, NULL, &src, box, j->err, sizeof j->err)) goto done;
    } else {
        src.px = (uint8_t *)j->px;
        src.w = j->pw;
        src.h = j->ph;
        src.c = 1;
        box[0] = box[1] = 0;
        box[2] = src.w;
        box[3] = src.h;
    }
    /* center crop to a square, then resize the shorter side */
    if (o->center_crop) {
        int s = src.w < src.h ? src.w : src.h;
        box[0] = (src.w - s) / 2;
        box[1] = (src.h - s) / 2;
        box[2] = box[3] = s;
    }
    img_u8 dst = {0, box[2], box[3], src.c};
    if (o->resize > 0) {
        double sc = (double)o->resize / (box[2] < box[3] ? box[2] : box[3]);
        dst.w = box[2] <= box[3] ? o->resize : (int)floor(box[2] * sc + 0.5);
        dst.h = box[3] <= box[2] ? o->resize : (int)floor(box[3] * sc + 0.5);
    }
    dst.px = malloc((size_t)dst.w * (size_t)dst.h * (size_t)dst.c);
    if (!dst.px) {
        snprintf(j->err, sizeof j->err, "out of memory");
        goto done;
    }
    img_resize(&src, box, &dst, o->resize > 0 && dst.w < box[2] ? 3 : 1);
    if (o->png) img_encode_png(&dst, &j->out, &j->out_n, j->err, sizeof j->err);
    else img_encode_jpeg(&dst, o->quality, &j->out, &j->out_n, j->err, sizeof j->err);
    free(dst.px);
done:
    free(file);
}

static void *worker(void *arg) {
    pool *p = arg;
    img_dec *dec = img_dec_new();
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t i = p->next++;
        pthread_mutex_unlock(&p->mu);
        if (i >= p->n) break;
        if (!dec) snprintf(p->jobs[i].err, sizeof p->jobs[i].err, "out of memory for a decoder");
        else process(p->o, dec, &p->jobs[i]);
    }
    img_dec_free(dec);
    return NULL;
}

/* Encode jobs[0..n) on o->threads threads, then write them in order. */
static int run_window(const opts *o, job *jobs, size_t n, mxp_recordio *w, size_t *written, size_t *skipped) {
    pool p = {o, jobs, n, 0, PTHREAD_MUTEX_INITIALIZER};
    int nt = o->threads < 1 ? 1 : o->threads;
    pthread_t th[64];
    int started = 0;
    for (int t = 1; t < nt && t < 64; t++)
        if (pthread_create(&th[started], NULL, worker, &p) == 0) started++;
    worker(&p);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    int rc = CLI_OK;
    for (size_t i = 0; i < n; i++) {
        job *j = &jobs[i];
        if (!j->out) {
            fprintf(stderr, "\r\033[Kmxplug im2rec: warning: skipping '%s': %s\n", j->path ? j->path : "(image)", j->err);
            (*skipped)++;
        } else if (rc == CLI_OK) {
            mxp_recordio_header h = {0, 0, j->key, 0};
            if (j->n_labels == 1) h.label = j->labels[0];
            else h.flag = (uint32_t)j->n_labels;
            int s = mxp_recordio_write_image(w, &h, j->n_labels == 1 ? NULL : j->labels, j->out, j->out_n);
            if (s != MXP_OK) rc = cli_fail(s, "%s: writing record %llu", CMD, (unsigned long long)j->key);
            else (*written)++;
        }
        free(j->out);
        j->out = NULL;
    }
    return rc;
}

typedef struct progress_line {
    int live;
    double t0, last;
} progress_line;

static void draw(progress_line *pl, size_t done, size_t total) {
    if (!pl->live) return;
    double now = progress_now();
    if (now - pl->last < 0.1 && done < total) return;
    pl->last = now;
    double rate = done / (now - pl->t0 > 1e-9 ? now - pl->t0 : 1e-9);
    char eta[32];
    progress_fmt_eta(rate > 0 ? (double)(total - done) / rate : 0, eta, sizeof eta);
    fprintf(stderr, "\r\033[Kim2rec %zu/%zu  %.0f records/s  ETA %s", done, total, rate, eta);
    fflush(stderr);
}

static int open_out(const opts *o, const char *prefix, mxp_recordio **w) {
    char rec[4200], idx[4200];
    snprintf(rec, sizeof rec, "%s.rec", prefix);
    snprintf(idx, sizeof idx, "%s.idx", prefix);
    int s = mxp_recordio_open_write(rec, idx, w);
    (void)o;
    return s == MXP_OK ? CLI_OK : cli_fail(s, "%s: creating '%s'", CMD, rec);
}

static int finish(mxp_recordio *w, const char *prefix, size_t written, size_t skipped, progress_line *pl,
                  double t0, int rc) {
    if (pl->live) fprintf(stderr, "\r\033[K");
    int s = mxp_recordio_close(w);
    if (rc == CLI_OK && s != MXP_OK) rc = cli_fail(s, "%s: closing '%s.rec'", CMD, prefix);
    if (rc == CLI_OK)
        printf("%s.rec: %zu records, %zu skipped, %.1f s\n", prefix, written, skipped, progress_now() - t0);
    return rc; /* skipped images are warnings, as in im2rec.py */
}

#define WINDOW 1024

static int pack_list(const opts *o) {
    char lst[4200];
    snprintf(lst, sizeof lst, "%s.lst", o->prefix);
    FILE *f = fopen(lst, "r");
    if (!f) {
        cli_err("%s: cannot open '%s': %s (make it with --list)", CMD, lst, strerror(errno));
        return CLI_FAIL;
    }
    fclose(f);
    img_list list;
    char err[1200];
    if (img_list_load(lst, &list, err, sizeof err)) {
        cli_err("%s: %s", CMD, err);
        return CLI_FAIL;
    }
    size_t n = list.n;
    int rc = CLI_OK;
    job *jobs = calloc(n ? n : 1, sizeof *jobs);
    if (!jobs) rc = cli_fail(MXP_ENOMEM, "%s: out of memory for %zu images", CMD, n);
    for (size_t i = 0; rc == CLI_OK && i < n; i++) {
        const img_list_entry *e = &list.v[i];
        if (e->n_labels > 16) {
            cli_err("%s: %s line %zu: %u labels (at most 16)", CMD, lst, e->line, e->n_labels);
            rc = CLI_FAIL;
            break;
        }
        jobs[i].key = e->key;
        jobs[i].n_labels = (int)e->n_labels;
        memcpy(jobs[i].labels, list.labels + e->first_label, e->n_labels * sizeof(float));
        jobs[i].path = e->path; /* owned by the list */
    }
    mxp_recordio *w = NULL;
    if (rc == CLI_OK) rc = open_out(o, o->prefix, &w);
    size_t written = 0, skipped = 0;
    progress_line pl = {isatty(fileno(stderr)), progress_now(), 0};
    double t0 = pl.t0;
    for (size_t a = 0; rc == CLI_OK && a < n; a += WINDOW) {
        size_t m = n - a < WINDOW ? n - a : WINDOW;
        rc = run_window(o, jobs + a, m, w, &written, &skipped);
        draw(&pl, a + m, n);
    }
    if (w) rc = finish(w, o->prefix, written, skipped, &pl, t0, rc);
    free(jobs);
    img_list_free(&list);
    return rc;
}

static int pack_mnist(const opts *o) {
    char img[4200], lab[4200], err[512];
    idx_file fi, fl;
    snprintf(img, sizeof img, "%s/%s-images-idx3-ubyte", o->from_mnist, o->mnist_set);
    if (access(img, R_OK) != 0) strcat(img, ".gz");
    snprintf(lab, sizeof lab, "%s/%s-labels-idx1-ubyte", o->from_mnist, o->mnist_set);
    if (access(lab, R_OK) != 0) strcat(lab, ".gz");
    if (idx_load(img, IDX_MAGIC_IMAGES, &fi, err, sizeof err) != 0) {
        cli_err("%s --from-mnist: %s", CMD, err);
        return CLI_FAIL;
    }
    if (idx_load(lab, IDX_MAGIC_LABELS, &fl, err, sizeof err) != 0) {
        idx_file_free(&fi);
        cli_err("%s --from-mnist: %s", CMD, err);
        return CLI_FAIL;
    }
    int rc = CLI_OK;
    size_t n = (size_t)fi.view.count;
    if (fl.view.count != fi.view.count) {
        cli_err("%s --from-mnist: %s has %zu images but %s has %llu labels", CMD, img, n, lab,
                (unsigned long long)fl.view.count);
        rc = CLI_FAIL;
    }
    if (o->limit > 0 && (size_t)o->limit < n) n = (size_t)o->limit;
    mxp_recordio *w = NULL;
    if (rc == CLI_OK) rc = open_out(o, o->prefix, &w);
    job *jobs = calloc(WINDOW, sizeof *jobs);
    if (!jobs) rc = CLI_FAIL;
    size_t written = 0, skipped = 0;
    progress_line pl = {isatty(fileno(stderr)), progress_now(), 0};
    double t0 = pl.t0;
    for (size_t a = 0; rc == CLI_OK && a < n; a += WINDOW) {
        size_t m = n - a < WINDOW ? n - a : WINDOW;
        for (size_t i = 0; i < m; i++) {
            job *j = &jobs[i];
            memset(j, 0, sizeof *j);
            j->key = a + i;
            j->n_labels = 1;
            j->labels[0] = fl.view.data[a + i];
            j->px = fi.view.data + (a + i) * fi.view.item_size;
            j->pw = (int)fi.view.dims[2];
            j->ph = (int)fi.view.dims[1];
        }
        rc = run_window(o, jobs, m, w, &written, &skipped);
        draw(&pl, a + m, n);
    }
    if (w) rc = finish(w, o->prefix, written, skipped, &pl, t0, rc);
    free(jobs);
    idx_file_free(&fi);
    idx_file_free(&fl);
    return rc;
}

static void usage(void) {
    printf("usage: mxplug im2rec --list [--recursive] [--exts .jpg,.jpeg,.png] [--chunks N]\n"
           "                    [--train-ratio R] [--test-ratio R] [--no-shuffle] PREFIX ROOT\n"
           "       mxplug im2rec [--resize N] [--center-crop] [--quality Q] [--encoding .jpg|.png]\n"
           "                    [--pass-through] [--color 1|0] [--num-thread N] PREFIX ROOT\n"
           "       mxplug im2rec --from-mnist DIR OUT_PREFIX [--set train|t10k] [--encoding .png|.jpg]\n"
           "                    [--quality Q] [--resize N] [--limit N] [--num-thread N]\n"
           "List mode writes PREFIX.lst (index, label, path; one label per sub-folder with --recursive).\n"
           "Pack mode reads PREFIX.lst and writes PREFIX.rec + PREFIX.idx (MXNet RecordIO).\n");
}

int cmd_im2rec(int argc, char **argv) {
    opts o = {.shuffle = 1, .chunks = 1, .train_ratio = 1.0, .exts = ".jpeg,.jpg,.png", .resize = 0,
              .quality = 95, .color = 1, .threads = 1, .mnist_set = "train"};
    const char *pos[2] = {0};
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VAL() do { if (!v) return cli_usage_error(CMD, "%s needs a value", a); i++; } while (0)
        if (cli_is_help(a)) {
            usage();
            return CLI_OK;
        } else if (!strcmp(a, "--list")) o.list = 1;
        else if (!strcmp(a, "--recursive")) o.recursive = 1;
        else if (!strcmp(a, "--no-shuffle")) o.shuffle = 0;
        else if (!strcmp(a, "--shuffle")) o.shuffle = 1;
        else if (!strcmp(a, "--center-crop")) o.center_crop = 1;
        else if (!strcmp(a, "--pass-through")) o.pass_through = 1;
        else if (!strcmp(a, "--exts")) { NEED_VAL(); o.exts = v; }
        else if (!strcmp(a, "--chunks")) { NEED_VAL(); o.chunks = atoi(v); }
        else if (!strcmp(a, "--train-ratio")) { NEED_VAL(); o.train_ratio = atof(v); }
        else if (!strcmp(a, "--test-ratio")) { NEED_VAL(); o.test_ratio = atof(v); }
        else if (!strcmp(a, "--resize")) { NEED_VAL(); o.resize = atoi(v); }
        else if (!strcmp(a, "--quality")) { NEED_VAL(); o.quality = atoi(v); }
        else if (!strcmp(a, "--color")) { NEED_VAL(); o.color = atoi(v); }
        else if (!strcmp(a, "--num-thread")) { NEED_VAL(); o.threads = atoi(v); }
        else if (!strcmp(a, "--set")) { NEED_VAL(); o.mnist_set = v; }
        else if (!strcmp(a, "--limit")) { NEED_VAL(); o.limit = atol(v); }
        else if (!strcmp(a, "--from-mnist")) { NEED_VAL(); o.from_mnist = v; }
        else if (!strcmp(a, "--encoding")) {
            NEED_VAL();
            if (!strcmp(v, ".png") || !strcmp(v, "png")) o.png = 1;
            else if (!strcmp(v, ".jpg") || !strcmp(v, "jpg") || !strcmp(v, ".jpeg")) o.png = 0;
            else return cli_usage_error(CMD, "--encoding '%s': use .jpg or .png", v);
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error(CMD, "unknown option '%s'", a);
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            return cli_usage_error(CMD, "unexpected argument '%s'", a);
        }
#undef NEED_VAL
    }
    if (o.chunks < 1) return cli_usage_error(CMD, "--chunks must be >= 1");
    if (o.quality < 1 || o.quality > 100) return cli_usage_error(CMD, "--quality must be in [1, 100]");
    if (o.threads < 1 || o.threads > 64) return cli_usage_error(CMD, "--num-thread must be in [1, 64]");
    if (o.color != 0 && o.color != 1) return cli_usage_error(CMD, "--color must be 1 (RGB) or 0 (gray)");
    if (o.train_ratio < 0 || o.train_ratio > 1 || o.test_ratio < 0 || o.test_ratio + o.train_ratio > 1.0 + 1e-9)
        return cli_usage_error(CMD, "--train-ratio and --test-ratio must be in [0, 1] with a sum <= 1");
    if (o.from_mnist) {
        if (npos != 1) return cli_usage_error(CMD, "--from-mnist DIR needs one OUT_PREFIX");
        if (strcmp(o.mnist_set, "train") && strcmp(o.mnist_set, "t10k"))
            return cli_usage_error(CMD, "--set must be train or t10k");
        o.prefix = pos[0];
        o.color = 0;
        return pack_mnist(&o);
    }
    if (npos != 2) return cli_usage_error(CMD, "PREFIX and ROOT are required");
    o.prefix = pos[0];
    o.root = pos[1];
    return o.list ? make_list(&o) : pack_list(&o);
}
