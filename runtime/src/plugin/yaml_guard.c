/* yaml_guard.c — a cheap event-level pass over a YAML text before libyaml
 * builds its document tree (manifests, the user config, the tune cache).
 * It refuses what those files never need and what makes a small file cost a
 * lot: anchors and aliases (a 130 KB "billion laughs" manifest reached
 * 280 MB and a million warnings, because every alias is walked again) and
 * nesting deeper than MXP__YAML_MAX_DEPTH (libyaml's handling of deep
 * nesting is quadratic: 100 KB took 6 s).  The pass stops at the first
 * offence, so its own cost is linear in the bytes before it.
 * Not here: the schema of each file (manifest.c, select.c, tune.c). */
#include "plugin/yaml_guard.h"

#include <yaml.h>

static int guard(yaml_parser_t *p, const char *what, const char *path, int max_depth) {
    int depth = 0, rc = MXP_OK;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(p, &ev)) {
            /* Syntax errors are left to the real parse, which reports them
             * with its own context. */
            return MXP_OK;
        }
        const char *anchor = NULL;
        switch (ev.type) {
        case YAML_ALIAS_EVENT:
            rc = mxp__error(MXP_EFORMAT, "%s %s:%zu:%zu: YAML aliases (*%s) are not allowed here", what, path,
                            ev.start_mark.line + 1, ev.start_mark.column + 1, (const char *)ev.data.alias.anchor);
            break;
        case YAML_SCALAR_EVENT: anchor = (const char *)ev.data.scalar.anchor; break;
        case YAML_SEQUENCE_START_EVENT:
            anchor = (const char *)ev.data.sequence_start.anchor;
            depth++;
            break;
        case YAML_MAPPING_START_EVENT:
            anchor = (const char *)ev.data.mapping_start.anchor;
            depth++;
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: depth--; break;
        default: break;
        }
        if (rc == MXP_OK && anchor)
            rc = mxp__error(MXP_EFORMAT, "%s %s:%zu:%zu: YAML anchors (&%s) are not allowed here", what, path,
                            ev.start_mark.line + 1, ev.start_mark.column + 1, anchor);
        if (rc == MXP_OK && depth > max_depth)
            rc = mxp__error(MXP_EFORMAT, "%s %s:%zu:%zu: nesting deeper than %d levels", what, path,
                            ev.start_mark.line + 1, ev.start_mark.column + 1, max_depth);
        int end = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
        if (rc || end) return rc;
    }
}

int mxp__yaml_guard_string(const char *buf, size_t len, const char *what, const char *path) {
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) return mxp__error_oom("YAML parser");
    yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
    int rc = guard(&p, what, path, MXP__YAML_MAX_DEPTH);
    yaml_parser_delete(&p);
    return rc;
}

int mxp__yaml_guard_file(FILE *f, const char *what, const char *path) {
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) return mxp__error_oom("YAML parser");
    yaml_parser_set_input_file(&p, f);
    int rc = guard(&p, what, path, MXP__YAML_MAX_DEPTH);
    yaml_parser_delete(&p);
    if (rc == MXP_OK && fseek(f, 0, SEEK_SET) != 0)
        rc = mxp__error(MXP_EIO, "%s %s: cannot rewind after checking it", what, path);
    clearerr(f);
    return rc;
}
