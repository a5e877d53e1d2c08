/* mxp/stats.h — counters a pack publishes to the application (since ABI
 * 1.2): "which impl ran, how often, how many bytes, how long", without a
 * fake op.  The runtime already counts calls and time per implementation
 * (mxp_op_impl_stats); these are the pack's own numbers (tiles computed,
 * bytes packed, cache hits, time in a phase), read with mxp_pack_stats()
 * (mxplug/registry.h) and printed by `mxplug packs --stats` and
 * `mxplug train --stats`.
 *
 * How a pack uses them:
 *   - during init, register each counter through the registrar
 *     (mxp_registrar_add_stat in host.h): name, kind, unit, doc.  The host
 *     returns a pointer to a counter cell it owns (64-byte aligned, one
 *     per cache line, zero);
 *   - keep the pointer in a static and bump it from any thread with
 *     mxp_stat_add (one relaxed atomic add, no call into the host) or set a
 *     level with mxp_stat_set (MXP_STAT_GAUGE);
 *   - nothing to free: the host frees the cells after the pack's fini.
 * The host owns the memory, so it never reads a pack's memory to report a
 * counter and never reads an unloaded library's; a reload replaces the
 * pack's counters by those the new build registers (starting at zero), and
 * a refused or rolled-back load publishes none of its counters.
 * A host older than 1.2 has no add_stat slot: mxp_registrar_add_stat then
 * succeeds with a NULL cell, and mxp_stat_add/set on NULL do nothing, so a
 * pack needs no branch of its own (nor min_host_minor = 2) to count.
 * Since ABI 1.2. */
#ifndef MXP_STATS_H
#define MXP_STATS_H

#include <mxp/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a counter measures; decides the unit the host prints. */
typedef enum mxp_stat_kind {
    MXP_STAT_COUNT = 1, /* events or items; `unit` names them ("calls")   */
    MXP_STAT_BYTES = 2, /* bytes                                           */
    MXP_STAT_NANOS = 3  /* nanoseconds of time spent                       */
} mxp_stat_kind;

/* mxp_stat_def.flags */
#define MXP_STAT_GAUGE 0x1u /* a level the pack sets (mxp_stat_set), not a
                               running total                                */

/* One counter, as registered.  The host copies every string. */
typedef struct mxp_stat_def {
    mxp_header hdr;       /* MXP_HEADER(mxp_stat_def)                       */
    const char *name;     /* unique in the pack; letters, digits, '_', '.',
                             '-', at most 127 bytes ("conv_naive.macs")     */
    int32_t kind;         /* mxp_stat_kind                                  */
    uint32_t flags;       /* MXP_STAT_GAUGE or 0                            */
    const char *unit;     /* (optional) what a COUNT counts: "calls",
                             "multiply-adds"; ignored for BYTES and NANOS   */
    const char *doc;      /* (optional) one line                            */
} mxp_stat_def;

/* A counter cell (host memory).  Opaque, except that its first 8 bytes are
 * the value, read and written only with the atomic helpers below. */
typedef struct mxp_stat mxp_stat;

/* Add n to a running total: one relaxed atomic add.  NULL: no-op. */
static inline void mxp_stat_add(mxp_stat *s, uint64_t n) {
    if (s) __atomic_fetch_add((uint64_t *)(void *)s, n, __ATOMIC_RELAXED);
}
/* Set a level (MXP_STAT_GAUGE counters).  NULL: no-op. */
static inline void mxp_stat_set(mxp_stat *s, uint64_t v) {
    if (s) __atomic_store_n((uint64_t *)(void *)s, v, __ATOMIC_RELAXED);
}
/* The current value (0 for NULL). */
static inline uint64_t mxp_stat_get(const mxp_stat *s) {
    return s ? __atomic_load_n((const uint64_t *)(const void *)s, __ATOMIC_RELAXED) : 0;
}

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
_Static_assert(offsetof(mxp_stat_def, name) == 8, "layout is frozen");
_Static_assert(offsetof(mxp_stat_def, kind) == 16, "layout is frozen");
_Static_assert(offsetof(mxp_stat_def, unit) == 24, "layout is frozen");
_Static_assert(offsetof(mxp_stat_def, doc) == 32, "layout is frozen");
_Static_assert(sizeof(mxp_stat_def) == 40, "layout is frozen");
#endif

#ifdef __cplusplus
}
#endif
#endif /* MXP_STATS_H */
