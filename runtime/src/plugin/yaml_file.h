/* yaml_file.h — what the plugin module's per-user YAML files share: the
 * user config (user_config.c, $XDG_CONFIG_HOME/mxplug/config.yaml) and the
 * tune cache (tune_cache.c, $XDG_CACHE_HOME/mxplug/tune.yaml).  Each keeps
 * a parsed copy in memory and re-reads the file only when its path or mtime
 * changed; this is the one helper for that:
 *   mxp__user_file_path   $XDG_<KIND>_HOME/mxplug/NAME, else ~/.DIR/mxplug/NAME
 *   mxp__file_stamp_*     (path, mtime) of the last read: stale or not
 *   mxp__yaml_file_load   read + guard (yaml_guard.h) + parse into a document
 *   mxp__mkdirs_for       create the directories above a file to be written
 *   mxp__yaml_put_quoted  write a string as a YAML double-quoted scalar
 * Not here: what the documents mean, locking (each caller holds its own
 * mutex around its stamp and table), atomic writes (mxp_file_write_atomic). */
#ifndef MXP_PLUGIN_YAML_FILE_H
#define MXP_PLUGIN_YAML_FILE_H

#include "base/base.h"

#include <yaml.h>

#include <stddef.h>
#include <stdio.h>
#include <time.h>

/* "$<xdg_var>/mxplug/<name>" when that variable is set and not empty, else
 * "$HOME/<home_dir>/mxplug/<name>".  0, or -1 when neither is set or buf is
 * too small. */
int mxp__user_file_path(const char *xdg_var, const char *home_dir, const char *name, char *buf, size_t cap);

/* Which file a cached parse came from and its mtime then (a missing file has
 * mtime 0).  Zero-initialised = nothing read yet. */
typedef struct mxp__file_stamp {
    char path[1024];
    struct timespec mtime;
    int valid;
} mxp__file_stamp;

/* 1 when `path` is not the file *s describes (another path, another mtime,
 * or nothing recorded): *s is updated to describe it, and the caller
 * re-reads.  0 when unchanged. */
int mxp__file_stamp_changed(mxp__file_stamp *s, const char *path);
/* Record the file's current mtime when *s is about `path` (after the
 * caller's own write: not news to it). */
void mxp__file_stamp_touch(mxp__file_stamp *s, const char *path);
/* Forget: the next mxp__file_stamp_changed reports a change. */
void mxp__file_stamp_clear(mxp__file_stamp *s);

/* Read and parse the YAML file at path (at most max_bytes) into *doc.
 * MXP_OK with *out_found 0 (doc untouched) when the file does not exist;
 * with *out_found 1 the caller owns *doc (yaml_document_delete).  Errors
 * name `what` and the place: MXP_EIO (cannot read), MXP_EFORMAT
 * ("PATH:LINE:COL: malformed YAML: why", or yaml_guard's refusal). */
int mxp__yaml_file_load(const char *path, const char *what, size_t max_bytes, yaml_document_t *doc,
                        int *out_found);

/* Create the directories above the file `path` (mkdir -p of its dirname).
 * MXP_OK or MXP_EIO "WHAT 'PATH': cannot create its directory: why". */
int mxp__mkdirs_for(const char *path, const char *what);

/* Write s as a YAML double-quoted scalar that reads back as exactly s:
 * printable ASCII as is, '"' and '\\' escaped, every other character as
 * \xNN, \uXXXX or \UXXXXXXXX (so the file is ASCII whatever s holds; a raw
 * U+0085 or U+2028 would read back as a line break, a raw C1 control not at
 * all).  Returns 0, or -1 (nothing sensible written) when s is not UTF-8. */
int mxp__yaml_put_quoted(FILE *f, const char *s);

#endif /* MXP_PLUGIN_YAML_FILE_H */
