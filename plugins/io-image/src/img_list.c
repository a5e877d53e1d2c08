/* img_list.c — the .lst reader (img_list.h).  Reads the whole file with
 * getline, splits each line at tabs in place, and keeps every entry's
 * labels in one growing float array.  No state between calls. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getline */
#endif
#include "img_list.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void img_list_free(img_list *l) {
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) free(l->v[i].path);
    free(l->v);
    free(l->labels);
    memset(l, 0, sizeof *l);
}

/* Parse one line (modified in place) into e's key and labels (appended to
 * *labels).  Returns 0, or -1 with what (a static description). */
static int parse_line(char *line, img_list_entry *e, float **labels, size_t *n_labels, size_t *cap_labels,
                      const char **what) {
    char *last_tab = strrchr(line, '\t');
    if (!last_tab) {
        *what = "expected 'index<TAB>label[<TAB>label...]<TAB>path' (no tab)";
        return -1;
    }
    *last_tab = 0;
    const char *path = last_tab + 1;
    if (!*path) {
        *what = "the path (last field) is empty";
        return -1;
    }
    char *tab = strchr(line, '\t');
    if (!tab) {
        *what = "expected 'index<TAB>label[<TAB>label...]<TAB>path' (no label)";
        return -1;
    }
    *tab = 0;
    char *end;
    errno = 0;
    /* strtoull skips leading white space (Python's int() in MXNet's
     * read_list does too) and then takes a sign, negating: " -1" would be
     * 2^64-1, so the first non-space character must be a digit */
    const char *d = line;
    while (*d == ' ' || *d == '\r' || *d == '\v' || *d == '\f') d++;
    if (*d < '0' || *d > '9') {
        *what = "the index (first field) is not a non-negative integer";
        return -1;
    }
    e->key = strtoull(line, &end, 10);
    if (*end || errno) {
        *what = "the index (first field) is not a non-negative integer";
        return -1;
    }
    e->first_label = *n_labels;
    e->n_labels = 0;
    for (char *f = tab + 1;;) {
        char *next = strchr(f, '\t');
        if (next) *next = 0;
        float v = strtof(f, &end);
        if (!*f || *end || !isfinite(v)) {
            *what = "a label is not a finite number";
            return -1;
        }
        if (*n_labels == *cap_labels) {
            size_t c = *cap_labels ? 2 * *cap_labels : 1024;
            float *t = realloc(*labels, c * sizeof *t);
            if (!t) {
                *what = "out of memory";
                return -1;
            }
            *labels = t;
            *cap_labels = c;
        }
        (*labels)[(*n_labels)++] = v;
        e->n_labels++;
        if (!next) break;
        f = next + 1;
    }
    if (!(e->path = strdup(path))) {
        *what = "out of memory";
        return -1;
    }
    return 0;
}

int img_list_load(const char *path, img_list *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        snprintf(err, errlen, "'%s' is not a regular file", path);
        return -2;
    }
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) close(fd);
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(e));
        return -2;
    }
    char *line = NULL;
    size_t line_cap = 0, cap = 0, n_labels = 0, cap_labels = 0, lineno = 0;
    ssize_t got;
    int rc = 0;
    while ((got = getline(&line, &line_cap, f)) >= 0) {
        lineno++;
        size_t l = (size_t)got;
        while (l && (line[l - 1] == '\n' || line[l - 1] == '\r')) line[--l] = 0;
        if (!l) continue;
        if (strlen(line) != l) {
            snprintf(err, errlen, "'%s' line %zu: a NUL byte inside the line", path, lineno);
            rc = -1;
            break;
        }
        if (out->n == cap) {
            size_t c = cap ? 2 * cap : 256;
            img_list_entry *t = realloc(out->v, c * sizeof *t);
            if (!t) {
                snprintf(err, errlen, "'%s' line %zu: out of memory", path, lineno);
                rc = -1;
                break;
            }
            out->v = t;
            cap = c;
        }
        img_list_entry *e = &out->v[out->n];
        memset(e, 0, sizeof *e);
        e->line = lineno;
        const char *what = NULL;
        if (parse_line(line, e, &out->labels, &n_labels, &cap_labels, &what)) {
            snprintf(err, errlen, "'%s' line %zu: %s", path, lineno, what);
            rc = -1;
            break;
        }
        out->n++;
    }
    if (!rc && ferror(f)) {
        snprintf(err, errlen, "reading '%s' failed", path);
        rc = -2;
    }
    free(line);
    fclose(f);
    if (rc) img_list_free(out);
    return rc;
}
