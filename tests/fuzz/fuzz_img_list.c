/* fuzz_img_list.c — libFuzzer harness for the .lst reader of io-image
 * (plugins/io-image/src/img_list.c: ImageIter's path_imglist and `mxplug
 * im2rec` pack mode).  The input is the file's bytes, handed to
 * img_list_load through a memfd (/proc/self/fd/N: a regular file, no disk).
 * Properties, checked against an independent split of the input at '\n'
 * (trailing '\r's stripped, empty lines skipped):
 *   - no crash, leak or sanitizer report;
 *   - a failure returns -1 with a message naming the file and a line, and
 *     leaves the list empty;
 *   - a success has one entry per non-empty line, in order, with its line
 *     number, the index column digits (after optional leading white
 *     space, as Python's int() takes it), >= 1 finite label laid out
 *     consecutively in the shared label array, and a non-empty path equal
 *     to the line's last tab-separated field. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include "../../plugins/io-image/src/img_list.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The non-empty lines of data: start offsets and lengths (after '\r's). */
typedef struct piece { size_t off, len, lineno; } piece;

static size_t split_lines(const uint8_t *data, size_t size, piece *out) {
    size_t n = 0, lineno = 0;
    for (size_t s = 0; s < size;) {
        const uint8_t *nl = memchr(data + s, '\n', size - s);
        size_t e = nl ? (size_t)(nl - data) : size, l = e - s;
        lineno++;
        while (l && (data[s + l - 1] == '\r' || data[s + l - 1] == '\n')) l--;
        if (l) out[n++] = (piece){s, l, lineno};
        s = e + 1;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 16)) return 0;
    int fd = memfd_create("fuzz.lst", MFD_CLOEXEC);
    if (fd < 0) abort();
    if (size && write(fd, data, size) != (ssize_t)size) abort();
    char path[64], err[512];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    img_list l;
    err[0] = 0;
    int rc = img_list_load(path, &l, err, sizeof err);
    close(fd);
    if (rc) {
        /* a memfd always opens and reads: only a malformed line fails */
        if (rc != -1 || strncmp(err, "'/proc/self/fd/", 15) || !strstr(err, " line ")) abort();
        if (l.n || l.v || l.labels) abort();
        return 0;
    }
    piece *pc = malloc((size + 1) * sizeof *pc);
    if (!pc) abort();
    size_t np = split_lines(data, size, pc), next_label = 0;
    if (l.n != np) abort();
    for (size_t i = 0; i < np; i++) {
        const img_list_entry *e = &l.v[i];
        const char *line = (const char *)data + pc[i].off;
        if (e->line != pc[i].lineno || e->n_labels < 1 || e->first_label != next_label) abort();
        if (memchr(line, 0, pc[i].len)) abort(); /* a NUL inside a line must have failed */
        size_t k = 0;
        while (k < pc[i].len && line[k] != '\t') k++;
        if (k == 0 || k == pc[i].len) abort();
        size_t j = 0; /* the index: optional leading white space, then digits only */
        while (j < k && (line[j] == ' ' || line[j] == '\r' || line[j] == '\v' || line[j] == '\f')) j++;
        if (j == k) abort();
        for (; j < k; j++) if (line[j] < '0' || line[j] > '9') abort();
        size_t last = pc[i].len;
        while (last > 0 && line[last - 1] != '\t') last--;
        size_t plen = pc[i].len - last;
        if (plen == 0 || strlen(e->path) != plen || memcmp(e->path, line + last, plen)) abort();
        for (uint32_t j = 0; j < e->n_labels; j++) if (!isfinite(l.labels[e->first_label + j])) abort();
        next_label += e->n_labels;
    }
    free(pc);
    img_list_free(&l);
    return 0;
}
