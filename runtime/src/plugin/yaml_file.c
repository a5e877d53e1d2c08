/* yaml_file.c — per-user YAML files cached by (path, mtime): their path,
 * the staleness stamp, a guarded parse, their directory, and the one
 * quoting routine their writers use (yaml_file.h).
 * Used by user_config.c and tune_cache.c; no state of its own. */
#include "plugin/yaml_file.h"
#include "plugin/yaml_guard.h"

#include <mxplug/fileio.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int mxp__user_file_path(const char *xdg_var, const char *home_dir, const char *name, char *buf, size_t cap) {
    const char *x = getenv(xdg_var);
    if (x && *x) return snprintf(buf, cap, "%s/mxplug/%s", x, name) < (int)cap ? 0 : -1;
    const char *h = getenv("HOME");
    if (!h || !*h) return -1;
    return snprintf(buf, cap, "%s/%s/mxplug/%s", h, home_dir, name) < (int)cap ? 0 : -1;
}

static struct timespec mtime_of(const char *path) {
    struct stat st;
    struct timespec mt = {0, 0};
    if (stat(path, &st) == 0) mt = st.st_mtim;
    return mt;
}

int mxp__file_stamp_changed(mxp__file_stamp *s, const char *path) {
    struct timespec mt = mtime_of(path);
    if (s->valid && !strcmp(path, s->path) && mt.tv_sec == s->mtime.tv_sec && mt.tv_nsec == s->mtime.tv_nsec)
        return 0;
    snprintf(s->path, sizeof s->path, "%s", path);
    s->mtime = mt;
    s->valid = 1;
    return 1;
}

void mxp__file_stamp_touch(mxp__file_stamp *s, const char *path) {
    if (s->valid && !strcmp(path, s->path)) s->mtime = mtime_of(path);
}

void mxp__file_stamp_clear(mxp__file_stamp *s) { memset(s, 0, sizeof *s); }

int mxp__yaml_file_load(const char *path, const char *what, size_t max_bytes, yaml_document_t *doc,
                        int *out_found) {
    *out_found = 0;
    if (access(path, F_OK) != 0) return MXP_OK;
    FILE *f = NULL;
    int rc = mxp_file_open_read(path, what, max_bytes, &f, NULL);
    if (!rc && (rc = mxp__yaml_guard_file(f, what, path))) fclose(f);
    if (rc) return rc;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        fclose(f);
        return mxp__error_oom(what);
    }
    yaml_parser_set_input_file(&parser, f);
    if (!yaml_parser_load(&parser, doc))
        rc = mxp__error(MXP_EFORMAT, "%s %s:%zu:%zu: malformed YAML: %s", what, path, parser.problem_mark.line + 1,
                        parser.problem_mark.column + 1, parser.problem ? parser.problem : "parse error");
    else
        *out_found = 1;
    yaml_parser_delete(&parser);
    fclose(f);
    return rc;
}

int mxp__mkdirs_for(const char *path, const char *what) {
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return mxp__error(MXP_EIO, "%s '%s': path too long", what, path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) && errno != EEXIST)
            return mxp__error(MXP_EIO, "%s '%s': cannot create its directory: %s", what, path, strerror(errno));
        *p = '/';
    }
    return MXP_OK;
}

/* One UTF-8 sequence at s: its code point and length, or -1 when invalid
 * (overlong, surrogate, beyond U+10FFFF, cut short). */
static int utf8_decode(const unsigned char *s, uint32_t *cp) {
    int n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
    if (!n || s[0] >= 0xf8) return -1;
    uint32_t c = s[0] & (0x7fu >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return -1;
        c = c << 6 | (s[i] & 0x3fu);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min[n] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return -1;
    *cp = c;
    return n;
}

int mxp__yaml_put_quoted(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        if (*p == '"' || *p == '\\') {
            fprintf(f, "\\%c", *p++);
        } else if (*p >= 0x20 && *p < 0x7f) {
            fputc(*p++, f);
        } else if (*p < 0x80) {
            fprintf(f, "\\x%02x", *p++);
        } else {
            uint32_t c;
            int n = utf8_decode(p, &c);
            if (n < 0) return -1;
            fprintf(f, c <= 0xffff ? "\\u%04x" : "\\U%08x", (unsigned)c);
            p += n;
        }
    }
    fputc('"', f);
    return 0;
}
