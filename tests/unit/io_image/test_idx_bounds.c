/* test_idx_bounds.c — idx_load (plugins/io-image/src/idx_file.c) streams
 * gzip data into one buffer of the size the header declares, checked
 * first against what the file can hold (issue 12 §3): a small gzip file
 * whose header declares 1000 labels but which inflates to 64 MiB is refused
 * at the declared end, so the process's peak memory stays far below the
 * inflated size; a header declaring more than the compressed bytes can
 * inflate to is refused before inflating; truncated, corrupt (bad deflate
 * data, bad CRC) and trailing-garbage streams are errors naming the file
 * and the byte offset.  The gzip files come from Python's gzip/zlib
 * modules (an independent writer) run at test time, and from zlib's gzip
 * writer.  A FIFO is refused without blocking.  The pack's sources are
 * compiled into this test. */
#include <criterion/criterion.h>

/* Both files have a static fail(): one name each in this translation unit. */
#define fail idx_parse_fail
#include "../../../plugins/io-image/src/idx.c"
#undef fail
#include "../../../plugins/io-image/src/idx_file.c"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char dir[64];
static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/mxp-idx-XXXXXX");
    cr_assert(mkdtemp(dir));
}
static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) { /* harmless */ }
}
TestSuite(idx_bounds, .init = setup, .fini = teardown, .timeout = 60);

static long peak_kib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

Test(idx_bounds, gzip_inflating_past_the_declared_size_is_refused_early) {
    char path[128];
    snprintf(path, sizeof path, "%s/bomb-labels-idx1-ubyte.gz", dir);
    gzFile gz = gzopen(path, "wb1");
    cr_assert(gz);
    const uint8_t hdr[8] = {0, 0, 8, 1, 0, 0, 0x03, 0xe8}; /* labels, 1000 items */
    cr_assert_eq(gzwrite(gz, hdr, 8), 8);
    static uint8_t zeros[1 << 20];
    for (int i = 0; i < 64; i++) cr_assert_eq(gzwrite(gz, zeros, sizeof zeros), (int)sizeof zeros);
    gzclose(gz);
    long before = peak_kib();
    idx_file f;
    char err[512];
    int rc = idx_load(path, IDX_MAGIC_LABELS, &f, err, sizeof err);
    cr_assert_neq(rc, MXP_OK, "a file with 64 MiB more data than declared loaded");
    cr_assert(strstr(err, "bomb-labels") && strstr(err, "1008"), "%s", err);
    long grew = peak_kib() - before;
    cr_assert_lt(grew, 16 * 1024, "peak memory grew by %ld KiB reading a file declaring 1008 bytes", grew);
}

Test(idx_bounds, exact_file_still_loads) {
    char path[128];
    snprintf(path, sizeof path, "%s/ok-labels-idx1-ubyte.gz", dir);
    gzFile gz = gzopen(path, "wb");
    cr_assert(gz);
    const uint8_t b[8 + 5] = {0, 0, 8, 1, 0, 0, 0, 5, 1, 2, 3, 4, 5};
    cr_assert_eq(gzwrite(gz, b, sizeof b), (int)sizeof b);
    gzclose(gz);
    idx_file f;
    char err[512];
    cr_assert_eq(idx_load(path, IDX_MAGIC_LABELS, &f, err, sizeof err), MXP_OK, "%s", err);
    cr_assert_eq(f.view.dims[0], 5);
    cr_assert_eq(f.view.data[4], 5);
    idx_file_free(&f);
}

Test(idx_bounds, fifo_is_refused_without_blocking) {
    char path[128];
    snprintf(path, sizeof path, "%s/fifo-labels", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    idx_file f;
    char err[512];
    cr_assert_neq(idx_load(path, IDX_MAGIC_LABELS, &f, err, sizeof err), MXP_OK);
    cr_assert(strstr(err, "not a regular file"), "%s", err);
}

/* Run a Python snippet with sys.argv[1] = path (the test's gzip writer). */
static void py_write(const char *path, const char *script) {
    char sp[160], cmd[512];
    snprintf(sp, sizeof sp, "%s/gen.py", dir);
    FILE *f = fopen(sp, "w");
    cr_assert(f);
    fputs("import gzip, io, struct, sys, zlib\np = sys.argv[1]\n", f);
    fputs(script, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s'", sp, path);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static int load_labels(const char *name, const char *script, idx_file *f, char *err, size_t errlen) {
    char path[160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    py_write(path, script);
    return idx_load(path, IDX_MAGIC_LABELS, f, err, errlen);
}

Test(idx_bounds, python_gzip_with_file_name_and_two_members_loads_exactly) {
    idx_file f;
    char err[512];
    /* FNAME/MTIME header fields (GzipFile), then a second member. */
    int rc = load_labels("two-members.gz",
                         "data = bytes((i * 7) % 251 for i in range(300))\n"
                         "raw = struct.pack('>II', 0x801, 300) + data\n"
                         "b = io.BytesIO()\n"
                         "with gzip.GzipFile(filename='labels', mode='wb', fileobj=b, mtime=12345) as g: g.write(raw[:100])\n"
                         "open(p, 'wb').write(b.getvalue() + gzip.compress(raw[100:]))\n",
                         &f, err, sizeof err);
    cr_assert_eq(rc, MXP_OK, "%s", err);
    cr_assert_eq(f.view.count, 300);
    cr_assert_eq(f.len, 308);
    for (int i = 0; i < 300; i++) cr_assert_eq(f.view.data[i], (i * 7) % 251, "label %d", i);
    idx_file_free(&f);
    /* Trailing zero padding is ignored, as gunzip does. */
    rc = load_labels("padded.gz", "open(p, 'wb').write(gzip.compress(struct.pack('>II', 0x801, 3) + b'abc') + bytes(100))\n",
                     &f, err, sizeof err);
    cr_assert_eq(rc, MXP_OK, "%s", err);
    cr_assert_eq(f.view.data[2], 'c');
    idx_file_free(&f);
}

Test(idx_bounds, declared_size_beyond_what_the_gzip_can_hold_is_refused_before_inflating) {
    idx_file f;
    char err[512];
    /* 47 MB declared, about 60 bytes of gzip: deflate cannot expand that far. */
    int rc = load_labels("claims-47mb.gz", "open(p, 'wb').write(gzip.compress(struct.pack('>II', 0x801, 47000000) + bytes(1000)))\n",
                         &f, err, sizeof err);
    cr_assert_eq(rc, MXP_EFORMAT);
    cr_assert(strstr(err, "claims-47mb.gz") && strstr(err, "47000000 item(s)") && strstr(err, "inflate to at most"),
              "%s", err);
}

Test(idx_bounds, truncated_stream_costs_no_more_than_the_declared_size) {
    idx_file f;
    char err[512];
    /* 8 MB declared; the gzip (random bytes, so about 4 MB of it) holds 4 MB. */
    long before = peak_kib();
    int rc = load_labels("half.gz",
                         "import random\nrandom.seed(5)\n"
                         "open(p, 'wb').write(gzip.compress(struct.pack('>II', 0x801, 8000000) + random.randbytes(4000000), 1))\n",
                         &f, err, sizeof err);
    long grew = peak_kib() - before;
    cr_assert_eq(rc, MXP_EFORMAT);
    cr_assert(strstr(err, "half.gz") && strstr(err, "truncated IDX data") && strstr(err, "8000000 item(s)") &&
                  strstr(err, "decompressed byte offset 4000008"),
              "%s", err);
    cr_assert_lt(grew, 8000 + 4096, "peak memory grew by %ld KiB for an 8 MB declaration", grew);
}

Test(idx_bounds, corrupt_and_cut_streams_name_the_file_offset) {
    idx_file f;
    char err[512];
    /* A flipped bit in the deflate data. */
    int rc = load_labels("flipped.gz",
                         "import random\nrandom.seed(1)\n"
                         "z = bytearray(gzip.compress(struct.pack('>II', 0x801, 5000) + random.randbytes(5000)))\n"
                         "z[40] ^= 0xff\nopen(p, 'wb').write(z)\n",
                         &f, err, sizeof err);
    cr_assert_eq(rc, MXP_EFORMAT);
    cr_assert(strstr(err, "flipped.gz") && strstr(err, "corrupt gzip data") && strstr(err, "at byte offset"), "%s",
              err);
    /* A wrong CRC-32 in the trailer: all the data inflates, the check fails. */
    rc = load_labels("badcrc.gz",
                     "z = bytearray(gzip.compress(struct.pack('>II', 0x801, 10) + bytes(range(10))))\n"
                     "z[-8] ^= 1\nopen(p, 'wb').write(z)\n",
                     &f, err, sizeof err);
    cr_assert_eq(rc, MXP_EFORMAT);
    cr_assert(strstr(err, "badcrc.gz") && strstr(err, "corrupt gzip data") && strstr(err, "decompressed byte offset 18"),
              "%s", err);
    /* Cut inside the compressed data. */
    rc = load_labels("cut.gz",
                     "import random\nrandom.seed(2)\n"
                     "z = gzip.compress(struct.pack('>II', 0x801, 5000) + random.randbytes(5000))\n"
                     "open(p, 'wb').write(z[:len(z) // 2])\n",
                     &f, err, sizeof err);
    cr_assert_eq(rc, MXP_EFORMAT);
    cr_assert(strstr(err, "cut.gz") && strstr(err, "truncated gzip data") && strstr(err, "byte offset"), "%s", err);
    /* Bytes after the last member that are neither a member nor padding. */
    rc = load_labels("garbage.gz",
                     "open(p, 'wb').write(gzip.compress(struct.pack('>II', 0x801, 3) + b'abc') + b'junk')\n", &f,
                     err, sizeof err);
    cr_assert_eq(rc, MXP_EFORMAT);
    cr_assert(strstr(err, "garbage.gz") && strstr(err, "unexpected bytes after the gzip data"), "%s", err);
}

Test(idx_bounds, plain_file_is_read_from_its_size) {
    idx_file f;
    char err[512];
    int rc = load_labels("plain", "open(p, 'wb').write(struct.pack('>II', 0x801, 4) + b'wxyz')\n", &f, err, sizeof err);
    cr_assert_eq(rc, MXP_OK, "%s", err);
    cr_assert_eq(f.len, 12);
    cr_assert_eq(f.view.data[3], 'z');
    idx_file_free(&f);
    rc = load_labels("plain-long", "open(p, 'wb').write(struct.pack('>II', 0x801, 3) + b'wxyz')\n", &f, err, sizeof err);
    cr_assert_eq(rc, MXP_EFORMAT);
    cr_assert(strstr(err, "plain-long") && strstr(err, "1 unexpected trailing byte(s) at byte offset 11"), "%s", err);
}
