/* test_idx_bounds.c — idx_load (plugins/io-image/src/idx_file.c) allocates
 * from what the header declares, checked as data arrives (issue 12 §3): a
 * small gzip file whose header declares 1000 labels but which inflates to
 * 64 MiB is refused after reading little more than the declared size, so
 * the process's peak memory stays far below the inflated size (before, the
 * whole stream was read into memory first).  A FIFO is refused without
 * blocking.  The pack's sources are compiled into this test. */
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
