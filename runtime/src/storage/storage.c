/* storage.c — pooled device memory: size classes, per-device pools, the
 * backend registry, limits, retry on failure and statistics.
 *
 * Size classes (Round pool, as MXNet's RoundPower2 + RoundMultiple):
 *   bytes <= 2^ROUND_CUTOFF (16 MiB): next power of two, at least 64;
 *   above: next multiple of 16 MiB.  Classes above MAX_POOLED bytes are not
 *   cached (they go straight back to the device on free).
 * A pool caches freed blocks in one LIFO bucket per class, so a repeated
 * allocate/free pattern is served from the pool after its first round.
 * No splitting or coalescing: a block only ever serves its own class.
 *
 * Locking: `registry_mu` guards the pool list and the backend table;
 * each pool's `mu` guards its buckets and counters.  Device alloc/free are
 * called without a pool lock held except when releasing cached blocks
 * (release is rare and backends must be thread-safe anyway).
 *
 * Not here: engine-ordered freeing (ndarray frees through the engine),
 * cross-device copies (ndarray/copy.c), shared memory. */
#include "storage.h"
#include "base/mutex.h"
#include "engine/engine.h"
#include "profiler/profiler.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ROUND_CUTOFF   24                          /* 16 MiB */
#define MIN_CLASS_LOG  6                           /* 64 bytes */
#define N_POW2_CLASSES (ROUND_CUTOFF - MIN_CLASS_LOG + 1) /* 2^6 .. 2^24 */
#define N_LINEAR_CLASSES 1024                      /* 32 MiB .. 16 GiB */
#define N_CLASSES      (N_POW2_CLASSES + N_LINEAR_CLASSES)
#define LINEAR_STEP    ((size_t)1 << ROUND_CUTOFF)
#define MAX_POOLED     ((size_t)(N_LINEAR_CLASSES + 1) * LINEAR_STEP)
#define MAX_DEV_TYPES  64

typedef struct bucket {
    void **ptrs;
    size_t n, cap;
} bucket;

typedef struct pool {
    struct pool *next;
    mxp_device dev;
    mxp__mutex mu;
    int configured;  /* env read */
    int naive;
    uint64_t limit;  /* UINT64_MAX: none */
    bucket buckets[N_CLASSES];
    mxp_storage_stats st;
} pool;

static mxp__mutex registry_mu = MXP__MUTEX_INIT;
static pool *pools;
/* The pool of device {CPU, 0}, set once under registry_mu when it is
 * created (after the backends): every imperative op allocates there, and
 * pools are never unlinked or freed, so finding it needs no lock. */
static _Atomic(pool *) cpu0_pool;
static mxp_storage_backend backends[MAX_DEV_TYPES];
static int backends_init;

static _Atomic(mxp_storage_fail_hook) fail_hook;
static void *_Atomic fail_hook_user;

static pthread_once_t fork_hooks_once = PTHREAD_ONCE_INIT;

/* fork(): the engine's prepare handler calls this last, once no engine
 * work runs, so a thread outside the engine (a prefetcher, say) cannot be
 * inside a pool at the fork and leave the child a pool locked for good.
 * Registered with the engine (mxp__engine_register_fork_hooks) before
 * registry_mu is first taken, so the engine includes nothing of storage. */
static void before_fork(void) {
    mxp__mutex_lock(&registry_mu);
    for (pool *p = pools; p; p = p->next) mxp__mutex_lock(&p->mu);
}

static void after_fork(void) {
    for (pool *p = pools; p; p = p->next) mxp__mutex_unlock(&p->mu);
    mxp__mutex_unlock(&registry_mu);
}

static void register_fork_hooks(void) {
    if (mxp__engine_register_fork_hooks(before_fork, after_fork) != MXP_OK)
        MXP_LOGE("storage", "%s: pools are not locked around fork()", mxp_last_error());
}

/* Every path takes registry_mu through here, so the hooks exist first. */
static void lock_registry(void) {
    pthread_once(&fork_hooks_once, register_fork_hooks);
    mxp__mutex_lock(&registry_mu);
}


/* ------------------------------------------------------------ CPU backend */

static void *cpu_alloc(void *ctx, int32_t dev_id, size_t bytes, size_t align) {
    (void)ctx; (void)dev_id;
    void *p = NULL;
    if (posix_memalign(&p, align, bytes) != 0) return NULL;
    return p;
}

static void cpu_free(void *ctx, int32_t dev_id, void *ptr, size_t bytes) {
    (void)ctx; (void)dev_id; (void)bytes;
    free(ptr);
}

static void init_backends_locked(void) {
    MXP_ASSERT(mxp__mutex_held(&registry_mu));
    if (backends_init) return;
    backends[MXP_DEV_CPU] = (mxp_storage_backend){
        .name = "cpu", .ctx = NULL, .alloc = cpu_alloc, .free = cpu_free,
        .align = 64, .host_accessible = 1};
    /* Pinned and shared CPU memory are plain CPU memory until a pack says
     * otherwise; .params files name them and loads land on the CPU anyway. */
    backends[MXP_DEV_CPU_PINNED] = backends[MXP_DEV_CPU];
    backends[MXP_DEV_CPU_PINNED].name = "cpu_pinned";
    backends[MXP_DEV_CPU_SHARED] = backends[MXP_DEV_CPU];
    backends[MXP_DEV_CPU_SHARED].name = "cpu_shared";
    backends_init = 1;
}

/* ------------------------------------------------------------ size classes */

/* The smallest lg with 2^lg >= v (0 for v <= 1). */
static int ceil_log2(size_t v) { return v <= 1 ? 0 : (int)(sizeof(unsigned long long) * 8) - __builtin_clzll(v - 1); }

size_t mxp__storage_round(size_t bytes) {
    if (bytes <= ((size_t)1 << MIN_CLASS_LOG)) return (size_t)1 << MIN_CLASS_LOG;
    if (bytes <= LINEAR_STEP) return (size_t)1 << ceil_log2(bytes);
    if (bytes > SIZE_MAX - LINEAR_STEP) return bytes; /* cannot round; will fail */
    return (bytes + LINEAR_STEP - 1) / LINEAR_STEP * LINEAR_STEP;
}

/* Bucket index of a class size, or -1 when the class is not cached. */
static int class_index(size_t cls) {
    if (cls <= LINEAR_STEP) return ceil_log2(cls) - MIN_CLASS_LOG;
    if (cls > MAX_POOLED || cls % LINEAR_STEP) return -1;
    return (int)(N_POW2_CLASSES + cls / LINEAR_STEP - 2);
}

int mxp__storage_parse_size(const char *text, uint64_t *out) {
    if (out) *out = 0;
    if (!text || !out) return mxp__error(MXP_EMISUSE, "mxp__storage_parse_size: NULL argument");
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || errno || text[0] == '-')
        return mxp__error(MXP_EINVAL, "size '%s': expected a number with optional K/M/G/T suffix", text);
    int shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: return mxp__error(MXP_EINVAL, "size '%s': unknown suffix '%s' (use K, M, G or T)", text, end);
    }
    if (*end == 'b' || *end == 'B') end++; /* "512MB" */
    if (*end) return mxp__error(MXP_EINVAL, "size '%s': trailing characters '%s'", text, end);
    if (shift && v > (UINT64_MAX >> shift)) return mxp__error(MXP_EINVAL, "size '%s': too large", text);
    *out = (uint64_t)v << shift;
    return MXP_OK;
}

/* ------------------------------------------------------------ pools */

static void dev_name(mxp_device dev, char *buf, size_t cap) {
    const char *n = (dev.type >= 0 && dev.type < MAX_DEV_TYPES && backends[dev.type].alloc)
                        ? backends[dev.type].name : "device";
    snprintf(buf, cap, "%s(%d)", n ? n : "device", (int)dev.id);
}

static void configure_locked(pool *p) {
    MXP_ASSERT(mxp__mutex_held(&p->mu));
    if (p->configured) return;
    p->configured = 1;
    p->naive = 0;
    p->limit = UINT64_MAX;
    const char *t = getenv("MXP_MEM_POOL_TYPE");
    if (t && *t) {
        if (strcasecmp(t, "naive") == 0 || strcasecmp(t, "unpooled") == 0) p->naive = 1;
        else if (strcasecmp(t, "pooled") != 0 && strcasecmp(t, "round") != 0)
            MXP_LOGW("storage", "MXP_MEM_POOL_TYPE='%s' is not 'pooled' or 'naive'; using 'pooled'", t);
    }
    const char *l = getenv("MXP_MEM_POOL_LIMIT");
    if (l && *l) {
        uint64_t v;
        if (mxp__storage_parse_size(l, &v) == MXP_OK) p->limit = v;
        else MXP_LOGW("storage", "MXP_MEM_POOL_LIMIT: %s; using no limit", mxp_last_error());
    }
    p->st.bytes_limit = p->limit;
}

/* Find or create the pool of a device.  NULL with an error set on failure. */
static pool *get_pool(mxp_device dev, int create, const mxp_storage_backend **out_be) {
    if (dev.type == MXP_DEV_CPU && dev.id == 0) {
        pool *c = atomic_load_explicit(&cpu0_pool, memory_order_acquire);
        if (c) {
            if (out_be) *out_be = &backends[MXP_DEV_CPU]; /* never unregistered */
            return c;
        }
    }
    lock_registry();
    init_backends_locked();
    if (dev.type <= 0 || dev.type >= MAX_DEV_TYPES || !backends[dev.type].alloc || dev.id < 0) {
        mxp__mutex_unlock(&registry_mu);
        mxp__error(MXP_EINVAL, "storage: no memory backend for device type %d id %d "
                   "(is its device pack loaded?)", (int)dev.type, (int)dev.id);
        return NULL;
    }
    if (out_be) *out_be = &backends[dev.type];
    pool *p = pools;
    while (p && !(p->dev.type == dev.type && p->dev.id == dev.id)) p = p->next;
    if (!p && create) {
        p = calloc(1, sizeof *p);
        if (!p) {
            mxp__mutex_unlock(&registry_mu);
            mxp__error_oom("storage pool");
            return NULL;
        }
        p->dev = dev;
        mxp__mutex_init(&p->mu);
        p->next = pools;
        pools = p;
        if (dev.type == MXP_DEV_CPU && dev.id == 0) atomic_store_explicit(&cpu0_pool, p, memory_order_release);
    }
    mxp__mutex_unlock(&registry_mu);
    if (!p && !create) mxp__error(MXP_ENOENT, "storage: device has no pool yet");
    return p;
}

/* Give every cached block of a pool back to its device.  Pool lock held. */
static uint64_t release_cached_locked(pool *p, const mxp_storage_backend *be) {
    MXP_ASSERT(mxp__mutex_held(&p->mu));
    uint64_t released = 0;
    for (int c = 0; c < N_CLASSES; c++) {
        bucket *b = &p->buckets[c];
        size_t cls = c < N_POW2_CLASSES ? (size_t)1 << (c + MIN_CLASS_LOG)
                                        : (size_t)(c - N_POW2_CLASSES + 2) * LINEAR_STEP;
        for (size_t i = 0; i < b->n; i++) {
            be->free(be->ctx, p->dev.id, b->ptrs[i], cls);
            released += cls;
            p->st.n_releases++;
        }
        b->n = 0;
        free(b->ptrs);
        b->ptrs = NULL;
        b->cap = 0;
    }
    p->st.bytes_pooled -= released;
    return released;
}

/* Evict cached blocks, largest classes first, until `need` more bytes fit
 * under the limit.  Pool lock held. */
static void evict_for_locked(pool *p, const mxp_storage_backend *be, uint64_t need) {
    MXP_ASSERT(mxp__mutex_held(&p->mu));
    for (int c = N_CLASSES - 1; c >= 0 && p->st.bytes_pooled + need > p->limit; c--) {
        bucket *b = &p->buckets[c];
        size_t cls = c < N_POW2_CLASSES ? (size_t)1 << (c + MIN_CLASS_LOG)
                                        : (size_t)(c - N_POW2_CLASSES + 2) * LINEAR_STEP;
        while (b->n && p->st.bytes_pooled + need > p->limit) {
            be->free(be->ctx, p->dev.id, b->ptrs[--b->n], cls);
            p->st.bytes_pooled -= cls;
            p->st.n_releases++;
        }
    }
}

static void *device_alloc(pool *p, const mxp_storage_backend *be, size_t bytes) {
    mxp_storage_fail_hook hook = atomic_load(&fail_hook);
    if (hook && hook(p->dev, bytes, atomic_load(&fail_hook_user))) return NULL;
    return be->alloc(be->ctx, p->dev.id, bytes, be->align ? be->align : 64);
}

int mxp__storage_alloc(mxp_device dev, size_t bytes, mxp_storage_block *out) {
    if (!out) return mxp__error(MXP_EMISUSE, "mxp__storage_alloc: NULL out");
    memset(out, 0, sizeof *out);
    out->dev = dev;
    const mxp_storage_backend *be = NULL;
    pool *p = get_pool(dev, 1, &be);
    if (!p) return MXP_EINVAL;
    if (bytes == 0) return MXP_OK;

    mxp__mutex_lock(&p->mu);
    configure_locked(p);
    size_t align = be->align ? be->align : 64;
    size_t cls = p->naive ? (bytes + align - 1) / align * align : mxp__storage_round(bytes);
    if (cls < bytes) { /* overflow in rounding */
        mxp__mutex_unlock(&p->mu);
        char dn[64];
        dev_name(dev, dn, sizeof dn);
        return mxp__error(MXP_ENOMEM, "storage: out of memory on %s: %zu bytes is too large", dn, bytes);
    }
    int idx = p->naive ? -1 : class_index(cls);
    if (idx >= 0 && p->buckets[idx].n) {
        out->ptr = p->buckets[idx].ptrs[--p->buckets[idx].n];
        out->size = cls;
        p->st.bytes_pooled -= cls;
        p->st.bytes_in_use += cls;
        if (p->st.bytes_in_use > p->st.bytes_peak) p->st.bytes_peak = p->st.bytes_in_use;
        p->st.n_hits++;
        uint64_t in_use = p->st.bytes_in_use, pooled = p->st.bytes_pooled;
        mxp__mutex_unlock(&p->mu);
        if (mxp__prof_on(MXP__PROF_MEMORY)) mxp__prof_memory(dev.type, dev.id, in_use, pooled);
        return MXP_OK;
    }
    p->st.n_misses++;
    mxp__mutex_unlock(&p->mu);

    void *ptr = device_alloc(p, be, cls);
    uint64_t released = 0;
    if (!ptr) {
        /* Out of device memory: cached blocks are the only thing we can give
         * back; then try once more (MXNet's ReleaseAll-and-retry). */
        mxp__mutex_lock(&p->mu);
        p->st.n_failures++;
        released = release_cached_locked(p, be);
        mxp__mutex_unlock(&p->mu);
        ptr = device_alloc(p, be, cls);
    }
    mxp__mutex_lock(&p->mu);
    if (!ptr) {
        p->st.n_failures++;
        mxp_storage_stats st = p->st;
        mxp__mutex_unlock(&p->mu);
        char dn[64], lim[32];
        dev_name(dev, dn, sizeof dn);
        if (st.bytes_limit == UINT64_MAX) snprintf(lim, sizeof lim, "none");
        else snprintf(lim, sizeof lim, "%llu", (unsigned long long)st.bytes_limit);
        return mxp__error(MXP_ENOMEM,
                          "storage: out of memory on %s: allocating %zu bytes (class %zu) failed "
                          "after releasing %llu pooled bytes and retrying; in use %llu, peak %llu, "
                          "pooled %llu, pool limit %s bytes",
                          dn, bytes, cls, (unsigned long long)released,
                          (unsigned long long)st.bytes_in_use, (unsigned long long)st.bytes_peak,
                          (unsigned long long)st.bytes_pooled, lim);
    }
    p->st.bytes_in_use += cls;
    if (p->st.bytes_in_use > p->st.bytes_peak) p->st.bytes_peak = p->st.bytes_in_use;
    uint64_t in_use = p->st.bytes_in_use, pooled = p->st.bytes_pooled;
    mxp__mutex_unlock(&p->mu);
    if (mxp__prof_on(MXP__PROF_MEMORY)) mxp__prof_memory(dev.type, dev.id, in_use, pooled);
    out->ptr = ptr;
    out->size = cls;
    return MXP_OK;
}

void mxp__storage_free(const mxp_storage_block *block) {
    if (!block || !block->ptr) return;
    const mxp_storage_backend *be = NULL;
    pool *p = get_pool(block->dev, 0, &be);
    MXP_ASSERT(p != NULL);
    if (!p) return;
    size_t cls = block->size;
    mxp__mutex_lock(&p->mu);
    MXP_ASSERT(p->st.bytes_in_use >= cls);
    p->st.bytes_in_use -= cls;
    int idx = p->naive ? -1 : class_index(cls);
    int cached = 0;
    if (idx >= 0 && cls <= p->limit) {
        if (p->st.bytes_pooled + cls > p->limit) evict_for_locked(p, be, cls);
        bucket *b = &p->buckets[idx];
        if (b->n == b->cap) {
            size_t ncap = b->cap ? b->cap * 2 : 8;
            void **np = realloc(b->ptrs, ncap * sizeof *np);
            if (np) { b->ptrs = np; b->cap = ncap; }
        }
        if (b->n < b->cap) {
            b->ptrs[b->n++] = block->ptr;
            p->st.bytes_pooled += cls;
            cached = 1;
        }
    }
    if (!cached) p->st.n_releases++;
    uint64_t in_use = p->st.bytes_in_use, pooled = p->st.bytes_pooled;
    mxp__mutex_unlock(&p->mu);
    if (mxp__prof_on(MXP__PROF_MEMORY)) mxp__prof_memory(block->dev.type, block->dev.id, in_use, pooled);
    if (!cached) be->free(be->ctx, block->dev.id, block->ptr, cls);
}

/* ------------------------------------------------------------ public API */

int mxp_storage_stats_get(mxp_device dev, mxp_storage_stats *caller) {
    if (!caller) return mxp__error(MXP_EMISUSE, "mxp_storage_stats_get: NULL out");
    mxp_storage_stats st;
    memset(&st, 0, sizeof st);
    st.bytes_limit = UINT64_MAX;
    lock_registry();
    pool *p = pools;
    while (p && !(p->dev.type == dev.type && p->dev.id == dev.id)) p = p->next;
    mxp__mutex_unlock(&registry_mu);
    if (p) {
        mxp__mutex_lock(&p->mu);
        st = p->st;
        if (!p->configured) st.bytes_limit = UINT64_MAX;
        mxp__mutex_unlock(&p->mu);
    }
    /* Only what the caller's version of the struct holds. */
    mxp__app_struct_out(caller, &st, sizeof st, MXP__SIZE_THROUGH(mxp_storage_stats, n_failures));
    return MXP_OK;
}

int mxp_storage_release_all(mxp_device dev) {
    const mxp_storage_backend *be = NULL;
    lock_registry();
    pool *p = pools;
    while (p && !(p->dev.type == dev.type && p->dev.id == dev.id)) p = p->next;
    if (p) be = &backends[dev.type];
    mxp__mutex_unlock(&registry_mu);
    if (!p) return MXP_OK;
    mxp__mutex_lock(&p->mu);
    release_cached_locked(p, be);
    mxp__mutex_unlock(&p->mu);
    return MXP_OK;
}


void mxp__storage_reset(void) {
    lock_registry();
    init_backends_locked();
    for (pool *p = pools; p; p = p->next) {
        mxp__mutex_lock(&p->mu);
        release_cached_locked(p, &backends[p->dev.type]);
        uint64_t in_use = p->st.bytes_in_use;
        if (in_use == 0) memset(&p->st, 0, sizeof p->st);
        p->configured = 0;
        mxp__mutex_unlock(&p->mu);
    }
    mxp__mutex_unlock(&registry_mu);
}

void mxp__storage_set_fail_hook(mxp_storage_fail_hook hook, void *user) {
    atomic_store(&fail_hook_user, user);
    atomic_store(&fail_hook, hook);
}

/* ------------------------------------------------------------ registry */

int mxp__storage_register_device(int32_t dev_type, const mxp_storage_backend *backend) {
    if (dev_type <= 0 || dev_type >= MAX_DEV_TYPES)
        return mxp__error(MXP_EINVAL, "storage: device type %d out of range 1..%d", (int)dev_type,
                          MAX_DEV_TYPES - 1);
    if (!backend || !backend->alloc || !backend->free)
        return mxp__error(MXP_EINVAL, "storage: backend for device type %d lacks alloc/free",
                          (int)dev_type);
    if (backend->align && (backend->align & (backend->align - 1)))
        return mxp__error(MXP_EINVAL, "storage: backend '%s': alignment %zu is not a power of two",
                          backend->name ? backend->name : "?", backend->align);
    lock_registry();
    init_backends_locked();
    for (pool *p = pools; p; p = p->next) {
        if (p->dev.type != dev_type) continue;
        mxp__mutex_lock(&p->mu);
        int busy = p->st.bytes_in_use || p->st.bytes_pooled;
        mxp__mutex_unlock(&p->mu);
        if (busy) {
            mxp__mutex_unlock(&registry_mu);
            return mxp__error(MXP_EBUSY, "storage: device type %d has memory allocated; "
                              "cannot replace its backend", (int)dev_type);
        }
    }
    backends[dev_type] = *backend;
    if (!backends[dev_type].name) backends[dev_type].name = "device";
    if (!backends[dev_type].align) backends[dev_type].align = 64;
    mxp__mutex_unlock(&registry_mu);
    return MXP_OK;
}

int mxp__storage_unregister_device(int32_t dev_type) {
    if (dev_type == MXP_DEV_CPU || dev_type <= 0 || dev_type >= MAX_DEV_TYPES)
        return mxp__error(MXP_EINVAL, "storage: cannot unregister device type %d", (int)dev_type);
    lock_registry();
    init_backends_locked();
    for (pool *p = pools; p; p = p->next) {
        if (p->dev.type != dev_type) continue;
        mxp__mutex_lock(&p->mu);
        uint64_t in_use = p->st.bytes_in_use;
        mxp__mutex_unlock(&p->mu);
        if (in_use) {
            mxp__mutex_unlock(&registry_mu);
            return mxp__error(MXP_EBUSY, "storage: device type %d still has %llu bytes in use",
                              (int)dev_type, (unsigned long long)in_use);
        }
    }
    /* Detach the backend first, then give cached blocks back without
     * registry_mu: a device's free may itself allocate or free host memory
     * through this module (a pack's arena lives in host memory). */
    mxp_storage_backend be = backends[dev_type];
    memset(&backends[dev_type], 0, sizeof backends[dev_type]);
    pool *head = pools; /* pools are only ever prepended, never unlinked */
    mxp__mutex_unlock(&registry_mu);
    if (be.alloc) {
        for (pool *p = head; p; p = p->next) {
            if (p->dev.type != dev_type) continue;
            mxp__mutex_lock(&p->mu);
            release_cached_locked(p, &be);
            mxp__mutex_unlock(&p->mu);
        }
    }
    return MXP_OK;
}

const mxp_storage_backend *mxp__storage_backend(int32_t dev_type) {
    /* Once the CPU pool exists the backends are initialized, and the CPU's
     * entry is never unregistered (its address is fixed). */
    if (dev_type == MXP_DEV_CPU && atomic_load_explicit(&cpu0_pool, memory_order_acquire))
        return &backends[MXP_DEV_CPU];
    lock_registry();
    init_backends_locked();
    const mxp_storage_backend *be =
        (dev_type > 0 && dev_type < MAX_DEV_TYPES && backends[dev_type].alloc) ? &backends[dev_type] : NULL;
    mxp__mutex_unlock(&registry_mu);
    return be;
}
