/* fileio.c — the file helpers of <mxplug/fileio.h>: opening only regular
 * files (checked on the opened descriptor, opened non-blocking so a FIFO
 * cannot stall the open itself), atomic replacement of a file (temporary in
 * the same directory, fsync, rename, directory fsync), removal of
 * temporaries whose writer died, and the overflow-checked size of a shape.
 * Not here: any file format (params.c, json.c, manifest.c, ... use these).
 * Invariant: on every failure of mxp_file_write_atomic the target is
 * untouched and no temporary of this call remains. */
#include "base/base.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

static int check_stat(const struct stat *st, const char *path, const char *what, uint64_t max_bytes,
                      uint64_t *out_size) {
    if (!S_ISREG(st->st_mode))
        return mxp__error(MXP_EIO, "%s '%s': is %s, not a regular file", what, path, kind_of(st->st_mode));
    if (max_bytes && (uint64_t)st->st_size > max_bytes)
        return mxp__error(MXP_EFORMAT, "%s '%s': %lld bytes, more than the limit of %llu", what, path,
                          (long long)st->st_size, (unsigned long long)max_bytes);
    if (out_size) *out_size = (uint64_t)st->st_size;
    return MXP_OK;
}

int mxp_file_check_regular(const char *path, const char *what, uint64_t max_bytes, uint64_t *out_size) {
    if (out_size) *out_size = 0;
    if (!what) what = "file";
    if (!path) return mxp__error(MXP_EMISUSE, "%s: NULL path", what);
    struct stat st;
    if (stat(path, &st) != 0)
        return mxp__error(MXP_EIO, "%s '%s': %s", what, path, strerror(errno));
    return check_stat(&st, path, what, max_bytes, out_size);
}

int mxp_file_open_read(const char *path, const char *what, uint64_t max_bytes, FILE **out, uint64_t *out_size) {
    if (out) *out = NULL;
    if (out_size) *out_size = 0;
    if (!what) what = "file";
    if (!path || !out) return mxp__error(MXP_EMISUSE, "mxp_file_open_read: NULL argument");
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return mxp__error(MXP_EIO, "%s '%s': cannot open: %s", what, path, strerror(errno));
    struct stat st;
    int rc = fstat(fd, &st) ? mxp__error(MXP_EIO, "%s '%s': %s", what, path, strerror(errno))
                            : check_stat(&st, path, what, max_bytes, out_size);
    if (rc == MXP_OK) {
        int fl = fcntl(fd, F_GETFL);
        if (fl == -1 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1)
            rc = mxp__error(MXP_EIO, "%s '%s': %s", what, path, strerror(errno));
    }
    FILE *f = rc ? NULL : fdopen(fd, "rb");
    if (rc == MXP_OK && !f) rc = mxp__error(MXP_EIO, "%s '%s': %s", what, path, strerror(errno));
    if (rc) {
        close(fd);
        if (out_size) *out_size = 0;
        return rc;
    }
    *out = f;
    return MXP_OK;
}

/* fsync the directory holding `path`, so the rename itself is durable. */
static int sync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    /* Some file systems cannot fsync a directory (EINVAL): nothing to do. */
    int r = fsync(fd) != 0 && errno != EINVAL && errno != EROFS ? -1 : 0;
    int e = errno;
    close(fd);
    errno = e;
    return r;
}

int mxp_file_write_atomic(const char *path, const char *what, mxp_file_writer writer, void *ctx) {
    if (!what) what = "file";
    if (!path || !*path || !writer) return mxp__error(MXP_EMISUSE, "mxp_file_write_atomic: NULL argument");
    static atomic_uint seq;
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 48);
    if (!tmp) return mxp__error_oom(what);
    snprintf(tmp, pl + 48, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&seq, 1));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        int rc = mxp__error(MXP_EIO, "%s '%s': cannot create '%s': %s", what, path, tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int rc = mxp__error(MXP_EIO, "%s '%s': %s", what, path, strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return rc;
    }
    int rc = writer(f, ctx);
    const char *step = NULL;
    if (rc == MXP_OK) {
        if (ferror(f) || fflush(f) != 0) step = "write";
        else if (fsync(fileno(f)) != 0) step = "fsync";
    }
    int e = errno;
    if (fclose(f) != 0 && rc == MXP_OK && !step) {
        step = "close";
        e = errno;
    }
    if (rc == MXP_OK && !step && rename(tmp, path) != 0) {
        step = "rename";
        e = errno;
    }
    if (rc == MXP_OK && step) {
        rc = mxp__error(MXP_EIO, "%s '%s': %s of '%s' failed: %s", what, path, step, tmp,
                        e ? strerror(e) : "I/O error");
    }
    if (rc != MXP_OK) {
        unlink(tmp);
    } else if (sync_dir(path) != 0) {
        /* The new content is in place; only its durability is in doubt. */
        rc = mxp__error(MXP_EIO, "%s '%s': fsync of its directory failed: %s", what, path, strerror(errno));
    }
    free(tmp);
    return rc;
}

/* NAME.tmp.PID.N -> PID, or 0 when `name` (starting with base) is not one. */
static long tmp_owner(const char *name) {
    const char *t = strstr(name, ".tmp.");
    const char *last = NULL;
    while (t) { /* the last ".tmp." is the writer's suffix */
        last = t;
        t = strstr(t + 1, ".tmp.");
    }
    if (!last) return 0;
    char *e;
    long pid = strtol(last + 5, &e, 10);
    if (pid <= 0 || *e != '.') return 0;
    const char *n = e + 1;
    if (!*n) return 0;
    for (; *n; n++)
        if (*n < '0' || *n > '9') return 0;
    return pid;
}

int mxp_file_remove_stale_tmp(const char *prefix, int *out_removed) {
    if (out_removed) *out_removed = 0;
    if (!prefix || !*prefix) return mxp__error(MXP_EMISUSE, "mxp_file_remove_stale_tmp: NULL prefix");
    const char *slash = strrchr(prefix, '/');
    char dir[PATH_MAX];
    const char *base = slash ? slash + 1 : prefix;
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == prefix) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - prefix), prefix);
    DIR *d = opendir(dir);
    if (!d) return mxp__error(MXP_EIO, "directory '%s': %s", dir, strerror(errno));
    size_t bl = strlen(base);
    int removed = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, base, bl) != 0) continue;
        long pid = tmp_owner(de->d_name + bl);
        if (!pid || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive (or not ours to judge) */
        char p[PATH_MAX];
        if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= sizeof p) continue;
        if (unlink(p) == 0) {
            removed++;
            MXP_LOGI("io", "removed '%s', left by process %ld that no longer runs", p, pid);
        }
    }
    closedir(d);
    if (out_removed) *out_removed = removed;
    return MXP_OK;
}

int mxp_size_of_shape(const char *what, const int64_t *shape, int ndim, size_t elem_size, size_t extra,
                      int64_t *out_elems, size_t *out_bytes) {
    if (out_elems) *out_elems = 0;
    if (out_bytes) *out_bytes = 0;
    if (!what) what = "shape";
    if (ndim < 0 || ndim > MXP_MAX_NDIM)
        return mxp__error(MXP_EINVAL, "%s: %d dimensions; at most %d are supported", what, ndim, MXP_MAX_NDIM);
    if (ndim && !shape) return mxp__error(MXP_EMISUSE, "%s: NULL shape", what);
    int64_t n = 1;
    int zero = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return mxp__error(MXP_EINVAL, "%s: dimension %d is %lld < 0", what, i, (long long)shape[i]);
        if (shape[i] == 0) zero = 1;
    }
    for (int i = 0; i < ndim && !zero; i++) {
        if (n > INT64_MAX / shape[i])
            return mxp__error(MXP_EINVAL, "%s: the element count overflows 64 bits at dimension %d (%lld)", what, i,
                              (long long)shape[i]);
        n *= shape[i];
    }
    if (zero) n = 0;
    size_t es = elem_size ? elem_size : 1;
    if ((uint64_t)n > (SIZE_MAX - extra) / es)
        return mxp__error(MXP_EINVAL, "%s: %lld elements of %zu bytes do not fit in memory", what, (long long)n, es);
    if (out_elems) *out_elems = n;
    if (out_bytes) *out_bytes = (size_t)n * elem_size + extra;
    return MXP_OK;
}
