/* mutex.c — the per-thread tag behind mxp__mutex_held (mutex.h): the
 * address of a thread-local byte, unique among live threads and never 0.
 * A thread that exits while holding an mxp__mutex is a bug of its own; its
 * tag may then be reused by a later thread, as its stack would be. */
#include "base/mutex.h"

static _Thread_local char t_tag;

uintptr_t mxp__thread_tag(void) { return (uintptr_t)&t_tag; }
