/* test_fileio.c — <mxplug/fileio.h> (runtime/src/base/fileio.c):
 *   - mxp_file_open_read refuses a FIFO (without blocking: no writer ever
 *     opens it), a directory, a character device and a file over the cap,
 *     naming the file and what it is; reads a regular file with its size;
 *   - mxp_file_write_atomic replaces (a hard link keeps the old content),
 *     and on a failing writer leaves the target and no temporary;
 *   - mxp_file_remove_stale_tmp removes only temporaries of dead processes;
 *   - mxp_size_of_shape: overflow of the element count, of the byte count,
 *     negative dims, too many dims; exact values otherwise. */
#include <criterion/criterion.h>

#include <mxplug.h>

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];
static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/mxp-fileio-XXXXXX");
    cr_assert(mkdtemp(dir));
}
static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) { /* harmless */ }
}
TestSuite(fileio, .init = setup, .fini = teardown, .timeout = 30);

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

Test(fileio, open_read_refuses_what_is_not_a_regular_file) {
    char fifo[128];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    FILE *f = (FILE *)1;
    cr_assert_eq(mxp_file_open_read(fifo, "manifest", 0, &f, NULL), MXP_EIO);
    cr_assert_null(f);
    cr_assert(strstr(mxp_last_error(), fifo) && strstr(mxp_last_error(), "a FIFO"), "%s", mxp_last_error());
    cr_assert(strstr(mxp_last_error(), "manifest"), "%s", mxp_last_error());
    cr_assert_eq(mxp_file_open_read(dir, "manifest", 0, &f, NULL), MXP_EIO);
    cr_assert(strstr(mxp_last_error(), "a directory"), "%s", mxp_last_error());
    cr_assert_eq(mxp_file_open_read("/dev/zero", "library", 0, &f, NULL), MXP_EIO);
    cr_assert(strstr(mxp_last_error(), "a character device"), "%s", mxp_last_error());
    cr_assert_eq(mxp_file_check_regular("/dev/zero", "library", 0, NULL), MXP_EIO);
    cr_assert_eq(mxp_file_check_regular(fifo, "library", 0, NULL), MXP_EIO);
    char missing[128];
    snprintf(missing, sizeof missing, "%s/missing", dir);
    cr_assert_eq(mxp_file_open_read(missing, "x", 0, &f, NULL), MXP_EIO);
    cr_assert(strstr(mxp_last_error(), "No such file"), "%s", mxp_last_error());
}

Test(fileio, open_read_gives_the_size_and_honours_the_cap) {
    char p[128];
    snprintf(p, sizeof p, "%s/ten", dir);
    write_text(p, "0123456789");
    FILE *f = NULL;
    uint64_t size = 0;
    cr_assert_eq(mxp_file_open_read(p, "x", 10, &f, &size), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(size, 10);
    char buf[16] = {0};
    cr_assert_eq(fread(buf, 1, sizeof buf, f), 10);
    cr_assert_str_eq(buf, "0123456789");
    fclose(f);
    cr_assert_eq(mxp_file_open_read(p, "x", 9, &f, &size), MXP_EFORMAT);
    cr_assert_null(f);
    cr_assert(strstr(mxp_last_error(), "10 bytes") && strstr(mxp_last_error(), "limit of 9"), "%s", mxp_last_error());
}

static int put_new(FILE *f, void *ctx) {
    fputs((const char *)ctx, f);
    return MXP_OK;
}
static int put_then_fail(FILE *f, void *ctx) {
    (void)ctx;
    fputs("half", f);
    return MXP_EFORMAT;
}

static int count_entries(const char *d) {
    DIR *dd = opendir(d);
    cr_assert(dd);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dd)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(dd);
    return n;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    cr_assert(f);
    static char b[256];
    size_t n = fread(b, 1, sizeof b - 1, f);
    b[n] = 0;
    fclose(f);
    return b;
}

Test(fileio, write_atomic_replaces_and_cleans_up) {
    char p[128], l[128];
    snprintf(p, sizeof p, "%s/target", dir);
    snprintf(l, sizeof l, "%s/link", dir);
    write_text(p, "old");
    cr_assert_eq(link(p, l), 0);
    cr_assert_eq(mxp_file_write_atomic(p, "test file", put_new, "new"), MXP_OK, "%s", mxp_last_error());
    cr_assert_str_eq(slurp(p), "new");
    cr_assert_str_eq(slurp(l), "old", "rewritten in place instead of replaced");
    cr_assert_eq(count_entries(dir), 2, "a temporary was left behind");
    cr_assert_eq(mxp_file_write_atomic(p, "test file", put_then_fail, NULL), MXP_EFORMAT);
    cr_assert_str_eq(slurp(p), "new", "a failed write touched the target");
    cr_assert_eq(count_entries(dir), 2, "a failed write left its temporary");
    char nodir[160];
    snprintf(nodir, sizeof nodir, "%s/missing/target", dir);
    cr_assert_eq(mxp_file_write_atomic(nodir, "test file", put_new, "x"), MXP_EIO);
    cr_assert(strstr(mxp_last_error(), "No such file or directory"), "%s", mxp_last_error());
}

Test(fileio, remove_stale_tmp_only_of_dead_writers) {
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) _exit(0);
    cr_assert_eq(waitpid(child, NULL, 0), child);
    char dead[160], live[160], plain[160], prefix[128];
    snprintf(prefix, sizeof prefix, "%s/m-", dir);
    snprintf(dead, sizeof dead, "%s/m-0001.params.tmp.%ld.3", dir, (long)child);
    snprintf(live, sizeof live, "%s/m-0001.states.tmp.%ld.0", dir, (long)getppid());
    snprintf(plain, sizeof plain, "%s/m-0001.params", dir);
    write_text(dead, "x");
    write_text(live, "x");
    write_text(plain, "x");
    int removed = -1;
    cr_assert_eq(mxp_file_remove_stale_tmp(prefix, &removed), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(removed, 1);
    cr_assert_neq(access(dead, F_OK), 0);
    cr_assert_eq(access(live, F_OK), 0);
    cr_assert_eq(access(plain, F_OK), 0);
}

Test(fileio, size_of_shape_is_overflow_checked) {
    int64_t n = -1;
    size_t b = 1;
    int64_t s1[] = {2305843009213693953LL}; /* 2^61 + 1: * 8 + 8 wraps */
    cr_assert_eq(mxp_size_of_shape("data", s1, 1, 8, 8, &n, &b), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "data"), "%s", mxp_last_error());
    cr_assert_eq(n, 0);
    int64_t s2[] = {1LL << 32, 1LL << 32}; /* 2^64 elements */
    cr_assert_eq(mxp_size_of_shape("x", s2, 2, 1, 0, NULL, NULL), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "overflows"), "%s", mxp_last_error());
    int64_t s3[] = {3, -1};
    cr_assert_eq(mxp_size_of_shape("x", s3, 2, 4, 0, NULL, NULL), MXP_EINVAL);
    int64_t s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    cr_assert_eq(mxp_size_of_shape("x", s9, 9, 4, 0, NULL, NULL), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "9 dimensions"), "%s", mxp_last_error());
    int64_t s4[] = {3, 5, 7};
    cr_assert_eq(mxp_size_of_shape("x", s4, 3, 4, 8, &n, &b), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(n, 105);
    cr_assert_eq(b, 105 * 4 + 8);
    int64_t s5[] = {0, INT64_MAX}; /* zero elements, whatever follows */
    cr_assert_eq(mxp_size_of_shape("x", s5, 2, 4, 0, &n, &b), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(n, 0);
    cr_assert_eq(mxp_size_of_shape("x", NULL, 0, 4, 0, &n, &b), MXP_OK);
    cr_assert_eq(n, 1);
}
