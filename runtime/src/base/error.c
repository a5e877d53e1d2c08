/* error.c — status names and the per-thread last-error message.
 *
 * The message lives in a fixed thread-local buffer, so reporting (including
 * out-of-memory) never allocates and a message can never leak.  A message is
 * per thread: work that fails on an engine worker copies its message into the
 * error record of the variables it writes (engine module). */
#include "base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERROR_MSG_CAP 1024

static _Thread_local char last_error[ERROR_MSG_CAP];

const char *mxp_last_error(void) { return last_error; }

const char *mxp_status_name(int status) {
    switch (status) {
#define NAME_CASE_(name, value, text) case value: return "MXP_" #name;
        MXP_STATUS_MAP(NAME_CASE_)
#undef NAME_CASE_
    default: return "MXP_E?";
    }
}

const char *mxp_status_str(int status) {
    switch (status) {
#define TEXT_CASE_(name, value, text) case value: return text;
        MXP_STATUS_MAP(TEXT_CASE_)
#undef TEXT_CASE_
    default: return "unknown status";
    }
}

int mxp__errorv(int status, const char *fmt, va_list ap) {
    /* Format into a temporary: callers may pass mxp_last_error() itself as an
     * argument ("loading '%s': %s", name, mxp_last_error()), and vsnprintf
     * into the buffer it reads from would be undefined. */
    char msg[ERROR_MSG_CAP];
    vsnprintf(msg, sizeof msg, fmt, ap);
    memcpy(last_error, msg, strlen(msg) + 1);
    return status;
}

int mxp__error(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mxp__errorv(status, fmt, ap);
    va_end(ap);
    return status;
}

int mxp__error_prefix(int status, const char *fmt, ...) {
    char prefix[ERROR_MSG_CAP];
    char old[ERROR_MSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    /* Truncation keeps the start of the message, which names the object. */
    int n = snprintf(last_error, sizeof last_error, "%s: %s", prefix,
                     old[0] ? old : mxp_status_str(status));
    (void)n;
    return status;
}

int mxp__error_oom(const char *what) {
    /* No formatting that could allocate: copy fixed pieces.  `what` may
     * point into last_error (memmove), and NULL/"" gives "out of memory". */
    static const char prefix[] = "out of memory: ";
    size_t n = sizeof prefix - 1;
    size_t w = what ? strlen(what) : 0;
    if (w == 0) {
        memcpy(last_error, prefix, n - 2);
        last_error[n - 2] = '\0';
        return MXP_ENOMEM;
    }
    if (w > sizeof last_error - n - 1) w = sizeof last_error - n - 1;
    memmove(last_error + n, what, w);
    memcpy(last_error, prefix, n);
    last_error[n + w] = '\0';
    return MXP_ENOMEM;
}

void mxp__error_clear(void) { last_error[0] = '\0'; }

_Noreturn void mxp__fatal(const char *fmt, ...) {
    char msg[ERROR_MSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mxp_log(MXP_LOG_ERROR, "fatal", "%s", msg);
    abort();
}
