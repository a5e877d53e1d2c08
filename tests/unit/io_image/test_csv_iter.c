/* test_csv_iter.c — the io-image pack's CSVIter through the public
 * iterator API (mxp_iter_create, the build tree's manifest).
 *
 * CSV files are written here with fprintf from values computed here (data
 * row r, column c = r * 10 + c / 4; label r = r % 3), so each batch is
 * checked element by element.  Covers MXNet's shapes ((batch, *data_shape),
 * (batch,) for label_shape (1,)), file order, the wrapped last batch and
 * its pad, zero labels without label_csv, a (2,) label shape, and errors
 * naming file, line and column. */
#include <criterion/criterion.h>
#include <mxplug.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[64];

static void setup(void) {
    setenv("MXP_MANIFEST", MXP_BUILD_DIR "/plugins/manifest.yaml", 1);
    unsetenv("MXP_PLUGIN_PATH");
    unsetenv("MXP_PACKS");
    snprintf(g_dir, sizeof g_dir, "/tmp/mxp-csv-test-XXXXXX");
    cr_assert(mkdtemp(g_dir));
}

static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd)) { /* harmless */ }
}

TestSuite(csv_iter, .init = setup, .fini = teardown);

static float dval(int r, int c) { return (float)r * 10.0f + (float)c / 4.0f; }

/* rows x cols data file; label file of rows x lcols (lcols 0: none). */
static void write_files(int rows, int cols, int lcols, char *dpath, char *lpath) {
    sprintf(dpath, "%s/data.csv", g_dir);
    FILE *f = fopen(dpath, "w");
    cr_assert(f);
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < cols; c++) fprintf(f, "%s%g", c ? "," : "", (double)dval(r, c));
        fprintf(f, r == 2 ? "\r\n\n" : "\n"); /* a CRLF and a blank line on the way */
    }
    fclose(f);
    if (!lcols) return;
    sprintf(lpath, "%s/label.csv", g_dir);
    f = fopen(lpath, "w");
    cr_assert(f);
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < lcols; c++) fprintf(f, "%s%d", c ? ", " : "", r % 3 + c);
        fprintf(f, "\n");
    }
    fclose(f);
}

static mxp_iter *create(int n, const char *const *k, const char *const *v) {
    mxp_iter *it = NULL;
    cr_assert_eq(mxp_iter_create("CSVIter", n, k, v, &it), MXP_OK, "%s", mxp_last_error());
    return it;
}

static float *read_all(mxp_ndarray *a, size_t *n) {
    *n = mxp_ndarray_nbytes(a) / sizeof(float);
    float *buf = malloc(mxp_ndarray_nbytes(a) + 4);
    cr_assert(buf);
    cr_assert_eq(mxp_ndarray_sync_copy_to(a, buf, mxp_ndarray_nbytes(a)), MXP_OK, "%s", mxp_last_error());
    return buf;
}

Test(csv_iter, batches_in_file_order_with_a_wrapped_last_batch) {
    char d[128], l[128];
    write_files(10, 6, 1, d, l);
    const char *k[] = {"data_csv", "data_shape", "label_csv", "batch_size"};
    const char *v[] = {d, "(2,3)", l, "4"};
    mxp_iter *it = create(4, k, v);
    const char *name;
    int nd;
    const int64_t *shape;
    int32_t dt;
    cr_assert_eq(mxp_iter_provide_data(it, 0, &name, &nd, &shape, &dt), MXP_OK);
    cr_assert_str_eq(name, "data");
    cr_assert_eq(nd, 3);
    cr_assert(shape[0] == 4 && shape[1] == 2 && shape[2] == 3);
    cr_assert_eq(mxp_iter_provide_label(it, 0, &name, &nd, &shape, &dt), MXP_OK);
    cr_assert_str_eq(name, "softmax_label");
    cr_assert_eq(nd, 1, "label_shape (1,) gives (batch,)");
    int batches = 0, row = 0;
    for (;;) {
        int has = 0;
        cr_assert_eq(mxp_iter_next(it, &has), MXP_OK, "%s", mxp_last_error());
        if (!has) break;
        size_t n, nl;
        float *x = read_all(mxp_iter_data(it, 0), &n);
        float *y = read_all(mxp_iter_label(it, 0), &nl);
        cr_assert_eq(n, 24);
        cr_assert_eq(nl, 4);
        for (int j = 0; j < 4; j++, row++) {
            int r = row % 10; /* the last batch wraps to rows 0 and 1 */
            for (int c = 0; c < 6; c++) cr_assert_float_eq(x[j * 6 + c], dval(r, c), 0, "row %d col %d", r, c);
            cr_assert_float_eq(y[j], (float)(r % 3), 0);
        }
        cr_assert_eq(mxp_iter_pad(it), batches == 2 ? 2 : 0);
        free(x);
        free(y);
        batches++;
    }
    cr_assert_eq(batches, 3);
    /* A second epoch starts again at row 0. */
    cr_assert_eq(mxp_iter_reset(it), MXP_OK);
    int has = 0;
    cr_assert_eq(mxp_iter_next(it, &has), MXP_OK);
    cr_assert(has);
    size_t n;
    float *x = read_all(mxp_iter_data(it, 0), &n);
    cr_assert_float_eq(x[7], dval(1, 1), 0);
    free(x);
    mxp_iter_free(it);
}

Test(csv_iter, zero_labels_without_label_csv_and_a_2d_label_shape) {
    char d[128], l[128];
    write_files(4, 3, 2, d, l);
    const char *k1[] = {"data_csv", "data_shape", "batch_size"};
    const char *v1[] = {d, "(3,)", "2"};
    mxp_iter *it = create(3, k1, v1);
    int has = 0;
    cr_assert_eq(mxp_iter_next(it, &has), MXP_OK);
    size_t nl;
    float *y = read_all(mxp_iter_label(it, 0), &nl);
    cr_assert_eq(nl, 2);
    cr_assert(y[0] == 0.0f && y[1] == 0.0f);
    free(y);
    mxp_iter_free(it);

    const char *k2[] = {"data_csv", "data_shape", "label_csv", "label_shape", "batch_size"};
    const char *v2[] = {d, "(3,)", l, "(2,)", "2"};
    it = create(5, k2, v2);
    const char *name;
    int nd;
    const int64_t *shape;
    int32_t dt;
    cr_assert_eq(mxp_iter_provide_label(it, 0, &name, &nd, &shape, &dt), MXP_OK);
    cr_assert(nd == 2 && shape[0] == 2 && shape[1] == 2);
    cr_assert_eq(mxp_iter_next(it, &has), MXP_OK);
    y = read_all(mxp_iter_label(it, 0), &nl);
    cr_assert(y[0] == 0 && y[1] == 1 && y[2] == 1 && y[3] == 2, "%g %g %g %g", y[0], y[1], y[2], y[3]);
    free(y);
    mxp_iter_free(it);
}

static void expect_error(const char *text, const char *shape, const char *want1, const char *want2) {
    char d[128];
    sprintf(d, "%s/bad.csv", g_dir);
    FILE *f = fopen(d, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
    const char *k[] = {"data_csv", "data_shape", "batch_size"};
    const char *v[] = {d, shape, "2"};
    mxp_iter *it = NULL;
    cr_assert_neq(mxp_iter_create("CSVIter", 3, k, v, &it), MXP_OK, "'%s' was accepted", text);
    cr_assert_null(it);
    cr_assert(strstr(mxp_last_error(), want1), "%s", mxp_last_error());
    cr_assert(strstr(mxp_last_error(), want2), "%s", mxp_last_error());
}

Test(csv_iter, errors_name_file_line_and_column) {
    expect_error("1,2,3\n4,5\n", "(3,)", "bad.csv line 2", "2 value(s), the shape needs 3");
    expect_error("1,2,3\n4,x,6\n", "(3,)", "bad.csv line 2 column 2", "not a finite number");
    expect_error("1,2,3\n4,5,6;\n", "(3,)", "line 2 column 3", "unexpected ';'");
    expect_error("1,2,nan\n", "(3,)", "line 1 column 3", "not a finite number");
    expect_error("\n\n", "(3,)", "holds no row", "bad.csv");
    expect_error("1,2,3\n", "(0,3)", "data_shape", "positive");

    char d[128], l[128];
    write_files(5, 2, 1, d, l);
    FILE *f = fopen(l, "a");
    fputs("1\n", f);
    fclose(f);
    const char *k[] = {"data_csv", "data_shape", "label_csv", "batch_size"};
    const char *v[] = {d, "(2,)", l, "2"};
    mxp_iter *it = NULL;
    cr_assert_eq(mxp_iter_create("CSVIter", 4, k, v, &it), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "holds 5 row(s)") && strstr(mxp_last_error(), "holds 6"), "%s",
              mxp_last_error());
    const char *v2[] = {"/nonexistent/x.csv", "(2,)", l, "2"};
    cr_assert_eq(mxp_iter_create("CSVIter", 4, k, v2, &it), MXP_EIO);
    cr_assert(strstr(mxp_last_error(), "/nonexistent/x.csv"), "%s", mxp_last_error());
}
