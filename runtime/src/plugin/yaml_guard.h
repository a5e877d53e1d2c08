/* yaml_guard.h — the pre-pass every YAML file mxplug reads goes through
 * (yaml_guard.c): no anchors or aliases, nesting at most
 * MXP__YAML_MAX_DEPTH.  Syntax errors are left to the real parse. */
#ifndef MXP_PLUGIN_YAML_GUARD_H
#define MXP_PLUGIN_YAML_GUARD_H

#include "base/base.h"

#include <stddef.h>
#include <stdio.h>

/* Deeper than any mxplug file needs (a manifest is about 6 levels). */
#define MXP__YAML_MAX_DEPTH 32

/* MXP_OK, or MXP_EFORMAT naming `what` (e.g. "manifest"), path:line:col and
 * the offence. */
int mxp__yaml_guard_string(const char *buf, size_t len, const char *what, const char *path);
/* The same over a stream, which is rewound to its start on success. */
int mxp__yaml_guard_file(FILE *f, const char *what, const char *path);

#endif /* MXP_PLUGIN_YAML_GUARD_H */
