/* fuzz_iter_create.c — libFuzzer harness for data iterator creation with
 * MXNet kwargs: MNISTIter, CSVIter, ImageRecordIter and
 * ImageRecordUInt8Iter through mxp_iter_create (the runtime's schema
 * parsing of every value, then the io-image pack's create), then a few
 * batches.  The pack is a copy built with the fuzz flags (coverage,
 * ASan/UBSan; plugins/io-image/pack.mk) and found through its own manifest
 * next to this binary (fuzz/iter-packs/manifest.yaml).
 *
 * Input: text lines.  The first names the iterator (anything else picks
 * one by its first byte); each further line is KEY=VALUE, replacing the
 * default of that key or added to the kwargs.  Values of path keys (image,
 * label, data_csv, label_csv, path_imgrec, path_imgidx, path_imglist,
 * mean_img) name a fixture: a plain name ([A-Za-z0-9._-], no "..") is
 * looked up in the harness's temporary directory, anything else becomes a
 * name that does not exist there, so no file outside it is ever read or
 * written.  The fixtures (made at start, removed at exit): MNIST IDX files
 * of 20 5x5 images, plain and gzipped, one cut short; CSV data and labels;
 * a RecordIO file of 12 PNG images with its .idx; an empty file.
 * Requests for batches over 256 samples or 4 Mi elements (batch_size x
 * data_shape), or over 1024 threads, buffers or pixels of resize, are
 * skipped: that work and memory is what the caller asked for (a batch of
 * 8922 over 12 records decodes 8922 images per batch: 13 s a unit).
 *
 * Properties, besides no crash, leak, UB or hang: a refusal has a message;
 * an acceptance has data and label entries whose shapes have the batch
 * size on axis 0, and up to 8 batches (two epochs) come back without a
 * crash, each pad within [0, batch); every sample of a batch is the
 * fixture sample its index names (MNIST pixels / 256 and labels, CSV rows
 * and labels, record labels), whatever shuffling, sharding and padding. Seeds: tests/fuzz/corpus/iter_create/. */
#include <mxplug.h>

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_dir[64];
static uint8_t g_px[20 * 25]; /* the MNIST fixture's pixels */

static void quiet(int level, const char *cat, const char *msg, void *user) {
    (void)level;
    (void)cat;
    (void)msg;
    (void)user;
}

/* ------------------------------------------------------------ fixtures */
static void put(const char *name, const void *data, size_t n, int gz) {
    char path[160];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    if (gz) {
        gzFile f = gzopen(path, "wb");
        if (!f || (n && gzwrite(f, data, (unsigned)n) != (int)n) || gzclose(f) != Z_OK) abort();
        return;
    }
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f)) abort();
}

static void be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static size_t chunk(uint8_t *out, const char *type, const uint8_t *data, uint32_t n) {
    be32(out, n);
    memcpy(out + 4, type, 4);
    if (n) memcpy(out + 8, data, n);
    be32(out + 8 + n, (uint32_t)crc32(0, out + 4, n + 4));
    return 12 + n;
}

/* An 8-bit RGB PNG of w x h (w, h <= 16), stored through zlib. */
static size_t png(int w, int h, int k, uint8_t *out) {
    uint8_t raw[16 * (1 + 16 * 3)], z[1024], ihdr[13] = {0};
    size_t rn = 0;
    for (int y = 0; y < h; y++) {
        raw[rn++] = 0;
        for (int x = 0; x < w; x++) raw[rn++] = (uint8_t)(20 * x), raw[rn++] = (uint8_t)(20 * y), raw[rn++] = (uint8_t)k;
    }
    uLongf zn = sizeof z;
    if (compress(z, &zn, raw, rn) != Z_OK) abort();
    memcpy(out, "\x89PNG\r\n\x1a\n", 8);
    be32(ihdr, (uint32_t)w);
    be32(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8, ihdr[9] = 2;
    size_t n = 8 + chunk(out + 8, "IHDR", ihdr, 13);
    n += chunk(out + n, "IDAT", z, (uint32_t)zn);
    return n + chunk(out + n, "IEND", NULL, 0);
}

static void make_fixtures(void) {
    enum { N = 20, R = 5, C = 5 };
    uint8_t img[16 + N * R * C], lab[8 + N];
    be32(img, 0x803), be32(img + 4, N), be32(img + 8, R), be32(img + 12, C);
    for (int i = 0; i < N * R * C; i++) img[16 + i] = g_px[i] = (uint8_t)(i * 37);
    be32(lab, 0x801), be32(lab + 4, N);
    for (int i = 0; i < N; i++) lab[8 + i] = (uint8_t)(i % 10);
    put("img", img, sizeof img, 0);
    put("lab", lab, sizeof lab, 0);
    put("img.gz", img, sizeof img, 1);
    put("lab.gz", lab, sizeof lab, 1);
    put("img-cut", img, sizeof img - 7, 0);
    put("empty", "", 0, 0);
    char csv[4096], lcsv[512];
    size_t o = 0, lo = 0;
    for (int r = 0; r < N; r++) {
        for (int c = 0; c < 6; c++) o += (size_t)snprintf(csv + o, sizeof csv - o, "%s%d.%d", c ? "," : "", r, c);
        o += (size_t)snprintf(csv + o, sizeof csv - o, "\n");
        lo += (size_t)snprintf(lcsv + lo, sizeof lcsv - lo, "%d\n", r % 3);
    }
    put("data.csv", csv, o, 0);
    put("label.csv", lcsv, lo, 0);
    char rec[160], idx[160];
    snprintf(rec, sizeof rec, "%s/img.rec", g_dir);
    snprintf(idx, sizeof idx, "%s/img.idx", g_dir);
    mxp_recordio *w = NULL;
    if (mxp_recordio_open_write(rec, idx, &w)) abort();
    for (int k = 0; k < 12; k++) {
        uint8_t p[2048];
        size_t n = png(6 + k % 5, 4 + k % 7, k, p);
        mxp_recordio_header h = {0, (float)(k % 4), (uint64_t)k, 0};
        if (mxp_recordio_write_image(w, &h, NULL, p, n)) abort();
    }
    if (mxp_recordio_close(w)) abort();
}

static void cleanup(void) {
    char cmd[128];
    mxp_engine_wait_for_all();
    if (!g_dir[0]) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd)) { /* best effort */ }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    /* This binary's iter-packs/manifest.yaml: the instrumented io-image. */
    char self[4096], man[4200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) abort();
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (!slash) abort();
    *slash = 0;
    snprintf(man, sizeof man, "%s/iter-packs/manifest.yaml", self);
    if (access(man, R_OK)) {
        fprintf(stderr, "fuzz_iter_create: %s missing (built by make with the harness)\n", man);
        abort();
    }
    setenv("MXP_MANIFEST", man, 1);
    setenv("MXP_ENGINE_TYPE", "naive", 0);
    (void)argv;
    mxp_log_set_sink(quiet, NULL);
    snprintf(g_dir, sizeof g_dir, "/tmp/mxp-fuzz-iter-XXXXXX");
    if (!mkdtemp(g_dir)) abort();
    atexit(cleanup);
    make_fixtures();
    return 0;
}

/* ------------------------------------------------------------- kwargs */
#define MAX_KW 48

typedef struct kwargs {
    char *keys[MAX_KW], *vals[MAX_KW];
    int n;
} kwargs;

static void kw_set(kwargs *kw, const char *k, size_t kn, const char *v, size_t vn) {
    int i = 0;
    while (i < kw->n && (strlen(kw->keys[i]) != kn || memcmp(kw->keys[i], k, kn))) i++;
    if (i == kw->n) {
        if (kw->n == MAX_KW) return;
        if (!(kw->keys[i] = strndup(k, kn))) abort();
        kw->vals[i] = NULL;
        kw->n++;
    }
    free(kw->vals[i]);
    if (!(kw->vals[i] = strndup(v, vn))) abort();
}

static void kw_free(kwargs *kw) {
    for (int i = 0; i < kw->n; i++) free(kw->keys[i]), free(kw->vals[i]);
    kw->n = 0;
}

static int is_path_key(const char *k) {
    static const char *const path_keys[] = {"image", "label", "data_csv", "label_csv", "path_imgrec",
                                            "path_imgidx", "path_imglist", "mean_img"};
    for (size_t i = 0; i < sizeof path_keys / sizeof *path_keys; i++)
        if (!strcmp(k, path_keys[i])) return 1;
    return 0;
}

/* A path value: a fixture in g_dir, or a name that does not exist there. */
static void confine_path(kwargs *kw, int i) {
    const char *v = kw->vals[i];
    if (!*v || !strcmp(v, "NULL")) return; /* "not given" for these params */
    int plain = strlen(v) < 64 && !strstr(v, "..");
    for (const char *p = v; plain && *p; p++) plain = isalnum((unsigned char)*p) || *p == '.' || *p == '_' || *p == '-';
    char buf[160];
    snprintf(buf, sizeof buf, "%s/%s", g_dir, plain ? v : "no-such-file");
    free(kw->vals[i]);
    if (!(kw->vals[i] = strdup(buf))) abort();
}

/* Elements asked for by a shape value "(a,b,...)" (saturating). */
static double shape_elems(const char *v) {
    double e = 1;
    for (const char *p = v; *p; p++)
        if (isdigit((unsigned char)*p)) {
            char *end;
            e *= strtod(p, &end);
            p = end - 1;
        }
    return e;
}

static const char *const ITERS[] = {"MNISTIter", "CSVIter", "ImageRecordIter", "ImageRecordUInt8Iter"};

static void defaults(int which, kwargs *kw) {
    static const char *const d[4][8][2] = {
        {{"image", "img"}, {"label", "lab"}, {"batch_size", "4"}, {"silent", "True"}},
        {{"data_csv", "data.csv"}, {"label_csv", "label.csv"}, {"data_shape", "(6,)"}, {"batch_size", "4"}},
        {{"path_imgrec", "img.rec"}, {"data_shape", "(3,4,4)"}, {"batch_size", "4"}, {"verbose", "False"},
         {"preprocess_threads", "1"}},
        {{"path_imgrec", "img.rec"}, {"data_shape", "(3,4,4)"}, {"batch_size", "4"}, {"verbose", "False"},
         {"preprocess_threads", "1"}},
    };
    for (int i = 0; i < 8 && d[which][i][0]; i++)
        kw_set(kw, d[which][i][0], strlen(d[which][i][0]), d[which][i][1], strlen(d[which][i][1]));
}

/* Which fixtures the kwargs name: what a batch's values must be. */
typedef struct expect {
    int mnist_px, mnist_lab; /* image = img[.gz], label = lab[.gz]          */
    int csv_data, csv_lab;   /* data_csv = data.csv, label_csv = label.csv */
    int rec_lab;             /* path_imgrec = img.rec, one label a record   */
} expect;

static int names(const kwargs *kw, const char *key, const char *a, const char *b) {
    for (int i = 0; i < kw->n; i++) {
        if (strcmp(kw->keys[i], key)) continue;
        const char *slash = strrchr(kw->vals[i], '/');
        const char *base = slash ? slash + 1 : kw->vals[i];
        return !strcmp(base, a) || (b && !strcmp(base, b));
    }
    return 0;
}

static const char *kw_get(const kwargs *kw, const char *key) {
    for (int i = 0; i < kw->n; i++)
        if (!strcmp(kw->keys[i], key)) return kw->vals[i];
    return NULL;
}

/* Every sample of the batch is the fixture sample its index names: MNIST
 * pixels / 256 and label, CSV row values and label, record labels.  Index
 * i of a batch is the sample's position in the whole file (shards too). */
static void check_values(mxp_iter *it, int which, const expect *e) {
    int64_t n = 0;
    const uint64_t *idx = mxp_iter_index(it, &n);
    if (!idx) return;
    mxp_ndarray *d = mxp_iter_data(it, 0), *l = mxp_iter_num_label(it) ? mxp_iter_label(it, 0) : NULL;
    int64_t dn = mxp_ndarray_size(d), ln = l ? mxp_ndarray_size(l) : 0;
    if (n < 1 || dn % n || (l && ln % n)) abort();
    float *dv = NULL, *lv = NULL;
    if (mxp_ndarray_dtype(d) == MXP_DTYPE_F32 && (dv = malloc((size_t)dn * sizeof *dv)) &&
        mxp_ndarray_sync_copy_to(d, dv, (size_t)dn * sizeof *dv))
        abort();
    if (l && mxp_ndarray_dtype(l) == MXP_DTYPE_F32 && (lv = malloc((size_t)ln * sizeof *lv)) &&
        mxp_ndarray_sync_copy_to(l, lv, (size_t)ln * sizeof *lv))
        abort();
    int64_t per = dn / n, lper = l ? ln / n : 0;
    for (int64_t j = 0; j < n; j++) {
        uint64_t r = idx[j];
        if (which == 0) {
            if (r >= 20) abort();
            if (e->mnist_px && dv && per == 25)
                for (int q = 0; q < 25; q++)
                    if (dv[j * 25 + q] != (float)g_px[r * 25 + q] / 256.0f) abort(); /* wrong pixels */
            if (e->mnist_lab && lv && lper == 1 && lv[j] != (float)(r % 10)) abort();
        } else if (which == 1) {
            if (r >= 20) abort();
            if (e->csv_data && dv && per == 6)
                for (int c = 0; c < 6; c++) {
                    char cell[16];
                    snprintf(cell, sizeof cell, "%d.%d", (int)r, c);
                    if (dv[j * 6 + c] != strtof(cell, NULL)) abort(); /* wrong row */
                }
            if (e->csv_lab && lv && lper == 1 && lv[j] != (float)(r % 3)) abort();
        } else if (e->rec_lab && lv && lper == 1) {
            if (r >= 12 || lv[j] != (float)(r % 4)) abort(); /* wrong record label */
        }
    }
    free(dv);
    free(lv);
}

static void run(mxp_iter *it, int which, const expect *e) {
    int64_t b = mxp_iter_batch_size(it);
    if (b < 1) abort();
    for (int k = 0; k < mxp_iter_num_data(it) + mxp_iter_num_label(it); k++) {
        int nd = 0;
        const int64_t *shp = NULL;
        int rc = k < mxp_iter_num_data(it) ? mxp_iter_provide_data(it, k, NULL, &nd, &shp, NULL)
                                           : mxp_iter_provide_label(it, k - mxp_iter_num_data(it), NULL, &nd, &shp, NULL);
        if (rc || nd < 1 || nd > MXP_MAX_NDIM || shp[0] != b) abort();
    }
    for (int epoch = 0, batches = 0; epoch < 2 && batches < 8; epoch++) {
        int has = 1;
        while (batches < 8) {
            if (mxp_iter_next(it, &has) != MXP_OK) {
                if (!mxp_last_error()[0]) abort();
                return;
            }
            if (!has) break;
            batches++;
            if (!mxp_iter_data(it, 0)) abort();
            int pad = mxp_iter_pad(it);
            if (pad < 0 || pad >= b) abort();
            check_values(it, which, e);
        }
        if (mxp_iter_reset(it) != MXP_OK) return;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    const char *s = (const char *)data, *end = s + size;
    const char *nl = memchr(s, '\n', size);
    size_t first = nl ? (size_t)(nl - s) : size;
    int which = -1;
    for (int i = 0; i < 4; i++)
        if (strlen(ITERS[i]) == first && !memcmp(s, ITERS[i], first)) which = i;
    if (which < 0) which = size ? data[0] % 4 : 0;
    kwargs kw = {0};
    defaults(which, &kw);
    for (const char *p = nl ? nl + 1 : end; p < end;) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e) e = end;
        const char *eq = memchr(p, '=', (size_t)(e - p));
        if (eq && !memchr(p, 0, (size_t)(e - p))) kw_set(&kw, p, (size_t)(eq - p), eq + 1, (size_t)(e - eq - 1));
        p = e + 1;
    }
    /* Memory the caller asks for (batch x shape, threads, buffers) is
     * theirs to ask: keep it small, so what is found is what a file or a
     * value made the code allocate on its own. */
    double batch = 1, elems = 1, big = 0;
    for (int i = 0; i < kw.n; i++) {
        if (is_path_key(kw.keys[i])) confine_path(&kw, i);
        double v = shape_elems(kw.vals[i]);
        if (!strcmp(kw.keys[i], "batch_size")) batch = v;
        else if (strstr(kw.keys[i], "shape")) elems = v > elems ? v : elems;
        else if (!strcmp(kw.keys[i], "prefetch_buffer") || !strcmp(kw.keys[i], "preprocess_threads") ||
                 !strcmp(kw.keys[i], "resize") || !strcmp(kw.keys[i], "label_width"))
            big = v > 1024 ? 1 : big;
    }
    if (big || batch > 256 || batch * elems > (1 << 22)) {
        kw_free(&kw);
        return 0;
    }
    mxp_iter *it = NULL;
    int rc = mxp_iter_create(ITERS[which], kw.n, (const char *const *)kw.keys, (const char *const *)kw.vals, &it);
    if (getenv("MXP_FUZZ_VERBOSE")) /* what each input did, for writing seeds */
        fprintf(stderr, "%s: %s\n", ITERS[which], rc ? mxp_last_error() : "created");
    if (rc != MXP_OK) {
        if (it || !mxp_last_error()[0]) abort();
    } else {
        const char *lw = kw_get(&kw, "label_width");
        expect e = {names(&kw, "image", "img", "img.gz"), names(&kw, "label", "lab", "lab.gz"),
                    names(&kw, "data_csv", "data.csv", NULL), names(&kw, "label_csv", "label.csv", NULL),
                    names(&kw, "path_imgrec", "img.rec", NULL) && (!lw || !strcmp(lw, "1"))};
        run(it, which, &e);
        mxp_iter_free(it);
    }
    kw_free(&kw);
    return 0;
}
