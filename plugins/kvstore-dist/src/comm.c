/* comm.c — the kvstore-dist communication thread: the only thread of the
 * process that calls MPI.  It initialises MPI, then runs cycles until every
 * rank asked to shut down:
 *   1. take the requests host threads queued (kvd_enqueue);
 *   2. negotiate: one allgather of a bitmap of what each rank has pending —
 *      one bit per key with a pushpull waiting, plus init, barrier and
 *      shutdown bits — so every rank learns what is pending on *all* ranks
 *      (the AND), whatever order its engine ran the pushes in (Horovod's
 *      negotiation), and who lacks what: an item pending here for 3/4 of
 *      the timeout while some rank never offers it fails naming that rank
 *      (a worker that stopped pushing, or workers pushing different keys);
 *      ride-along keys: small keys (<= SPEC_MAX_BYTES together) that
 *      were agreed in two earlier cycles ride along in the same allgather
 *      — each rank appends the values of those it has pending, with a bit
 *      per key — and every such key that all ranks sent is summed from it
 *      at once, in rank order (the same bits as step 3), saving the two
 *      rounds of the sum: a training step's small gradients (biases, a
 *      first conv layer's weights) cost one round.  The block is sent
 *      only while work is recent (SPEC_IDLE_CYCLES), so an idle store's
 *      cycles stay a few bytes;
 *   (held steps: on a core shared with compute, a part of the learned
 *   step key set is held here until the whole set is queued — defer.c —
 *   and the released step's waits poll without napping for MXP_KV_HOT_US,
 *   since the compute thread beside this one waits for them;)
 *   3. do the agreed work in key order: an init broadcasts rank 0's value;
 *      ready keys are fused into buckets of at most bucket_bytes (same
 *      dtype, consecutive key indices) and each bucket is summed over all
 *      ranks in place (pipeline.c); then barrier and shutdown complete.
 * Every MPI operation is non-blocking and polled against a deadline
 * (MXP_KV_TIMEOUT); while polling, the thread answers pings.  On a timeout
 * or MPI error it pings every peer and names those that do not answer
 * ("rank 2 (host vm, pid 1234)"), marks the store broken and fails every
 * pending and later request with that message.
 *
 * Not here: key lookup and the front end's ABI (pack.c), the sum itself
 * (pipeline.c). */
#include "kvdist_comm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { TAG_PING = 7101, TAG_PONG = 7102 };
/* The ride-along keys' limit, how many idle cycles (at most IDLE_CYCLE_MS
 * each) they keep riding along after the last work, and how many recently
 * agreed key sets are remembered (recent_set). */
enum { SPEC_MAX_BYTES = 64 << 10, SPEC_IDLE_CYCLES = 50, SPEC_MISSES = 8, IDLE_CYCLE_MS = 50, RECENT_SETS = 8 };
enum { BIT_SHUTDOWN = 0, BIT_BARRIER = 1, BIT_INIT = 2 };
/* How long a cycle woken by new work waits for the rest of its burst. */
enum { COALESCE_US = 30 };

const char *kvd_name(const kvd_store *s) { return s->async ? "kvstore dist_async" : "kvstore dist_sync"; }

double kvd_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nap_us(long us) {
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

void kvd_key_label(kvd_store *s, int k, char *buf, size_t cap) {
    /* Under the lock: an init on a host thread may grow the table. */
    pthread_mutex_lock(&s->lock);
    const kvd_key *e = &s->keys[k];
    if (e->is_str) snprintf(buf, cap, "key '%s'", e->skey);
    else snprintf(buf, cap, "key %lld", (long long)e->ikey);
    pthread_mutex_unlock(&s->lock);
}

/* ------------------------------------------------------------ liveness */

static const int ping_payload = 1;

void kvd_serve_pings(kvd_comm *c) {
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_PING, c->ctrl, &flag, &st) != MPI_SUCCESS || !flag) return;
        int v;
        MPI_Recv(&v, 1, MPI_INT, st.MPI_SOURCE, TAG_PING, c->ctrl, MPI_STATUS_IGNORE);
        MPI_Request rq;
        if (MPI_Isend(&ping_payload, 1, MPI_INT, st.MPI_SOURCE, TAG_PONG, c->ctrl, &rq) == MPI_SUCCESS)
            MPI_Request_free(&rq);
    }
}

/* Ping every peer and wait up to window_s for the answers; append the ones
 * that did not answer to msg.  Returns how many did not. */
int kvd_probe_peers(kvd_comm *c, double window_s, char *msg, size_t cap) {
    kvd_store *s = c->s;
    int n = s->size, silent = 0;
    MPI_Request *rq = calloc((size_t)n, sizeof *rq);
    int *got = calloc((size_t)n, sizeof *got), *vals = calloc((size_t)n, sizeof *vals);
    if (!rq || !got || !vals) {
        free(rq), free(got), free(vals);
        return 0;
    }
    for (int r = 0; r < n; r++) {
        rq[r] = MPI_REQUEST_NULL;
        if (r == s->rank) continue;
        MPI_Request sr;
        if (MPI_Isend(&ping_payload, 1, MPI_INT, r, TAG_PING, c->ctrl, &sr) == MPI_SUCCESS) MPI_Request_free(&sr);
        MPI_Irecv(&vals[r], 1, MPI_INT, r, TAG_PONG, c->ctrl, &rq[r]);
    }
    double end = kvd_now() + window_s;
    int pending;
    do {
        pending = 0;
        for (int r = 0; r < n; r++) {
            if (r == s->rank || got[r]) continue;
            int flag = 0;
            if (MPI_Test(&rq[r], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag) got[r] = 1;
            else pending++;
        }
        kvd_serve_pings(c);
        if (pending) nap_us(200);
    } while (pending && kvd_now() < end);
    size_t len = strlen(msg);
    for (int r = 0; r < n; r++) {
        if (r == s->rank || got[r]) continue;
        silent++;
        MPI_Cancel(&rq[r]);
        MPI_Request_free(&rq[r]);
        len += (size_t)snprintf(msg + len, len < cap ? cap - len : 0, "%s rank %d (host %s, pid %d)",
                                silent == 1 ? "; not answering:" : ",", r, s->hosts ? s->hosts[r] : "?",
                                s->pids ? s->pids[r] : -1);
        if (len >= cap) len = cap - 1;
    }
    if (!silent)
        snprintf(msg + len, len < cap ? cap - len : 0,
                 "; every peer answered a ping (a peer is alive but not in this operation: do all workers push "
                 "the same keys?)");
    else
        snprintf(msg + len, len < cap ? cap - len : 0, " — dead or stalled");
    free(rq), free(got), free(vals);
    return silent;
}

/* Mark the store broken with `msg` (first cause wins). */
void kvd_set_broken(kvd_store *s, const char *msg) {
    pthread_mutex_lock(&s->lock);
    if (!s->broken) {
        s->broken = 1;
        snprintf(s->broken_msg, sizeof s->broken_msg, "%s", msg);
    }
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

int kvd_fail_mpi(kvd_comm *c, int mpi_rc, const char *what) {
    kvd_store *s = c->s;
    char es[MPI_MAX_ERROR_STRING] = "";
    int el = 0;
    MPI_Error_string(mpi_rc, es, &el);
    char msg[512];
    snprintf(msg, sizeof msg, "%s rank %d (host %s): %s failed in MPI: %s", kvd_name(s), s->rank,
             s->hosts ? s->hosts[s->rank] : "?", what, es);
    kvd_probe_peers(c, 0.2 * s->timeout_ms / 1000.0, msg, sizeof msg);
    kvd_set_broken(s, msg);
    return MXP_ENET;
}

int kvd_fail_timeout(kvd_comm *c, const char *what, double waited_s) {
    kvd_store *s = c->s;
    char msg[512];
    snprintf(msg, sizeof msg, "%s rank %d (host %s): %s did not complete within %.1f s", kvd_name(s), s->rank,
             s->hosts ? s->hosts[s->rank] : "?", what, waited_s);
    kvd_probe_peers(c, 0.2 * s->timeout_ms / 1000.0, msg, sizeof msg);
    kvd_set_broken(s, msg);
    return MXP_ETIMEDOUT;
}

/* Until this time (kvd_now) the thread polls without napping: a held
 * step was just released (defer.c), so the compute thread that shares the
 * core waits for these very sums and the core is this thread's. */
static double hot_until;
static long hot_us; /* MXP_KV_HOT_US, read when the thread starts */

static int hot(void) { return hot_until > 0 && kvd_now() < hot_until; }

static void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

void kvd_pause(double waited_s, double spin_s) {
    if (hot()) {
        cpu_pause();
        return;
    }
    /* Within spin_s, a wait whose data is moving: poll again at once for
     * the first 50 us (back-to-back completions), then every 15 us.  A nap,
     * not sched_yield: on a loaded core a yielding thread waits for the
     * others' whole time slices (measured: 5-10x slower sums), while a
     * sleeper that wakes preempts them.  After spin_s nap for an eighth of
     * the time waited so far (20 us .. 1 ms): at most ~12% added latency,
     * and a comm thread waiting on a slow peer wakes tens of times per
     * cycle, not thousands — it shares a core with the compute workers. */
    if (waited_s < spin_s) {
        if (waited_s > 50e-6) nap_us(15);
        return;
    }
    long us = (long)(waited_s * 1e6 / 8);
    nap_us(us < 20 ? 20 : us > 1000 ? 1000 : us);
}

int kvd_wait(kvd_comm *c, int n, MPI_Request *reqs, const char *what) {
    return kvd_wait_spin(c, n, reqs, what, 0.0);
}

/* kvd_wait_spin; cap_us > 0: for the first CAP_WINDOW_MS of the wait,
 * nap at most cap_us between polls (wait_negotiation says why). */
enum { CAP_WINDOW_MS = 50 };
/* A wait polls without napping for its first POLL_FIRST_US.  A reply
 * from a peer that is already in the same operation (a negotiation, a
 * small sum, a barrier) comes within tens of microseconds, and on TCP it
 * moves only while this thread calls MPI.  It used to nap after 32 quick
 * polls (a few microseconds), at least 20 us, and both ranks napping in
 * turn made a 4 KiB pushpull on TCP loopback bimodal: medians of 26-32
 * or 179-188 us per bench run (raw MPI_Allreduce 18 us); now 27-29 us in
 * each of 4 runs at load 5 (28-55 us in whole bench runs at load 10-14).
 * A peer that is late costs this thread 100 us of polling, then naps as
 * before. */
enum { POLL_FIRST_US = 100 };
static int wait_polled(kvd_comm *c, int n, MPI_Request *reqs, const char *what, double spin_s, long cap_us) {
    kvd_store *s = c->s;
    double t0 = kvd_now();
    /* The operation gets 3/4 of the timeout and the probe 1/5, so the
     * error is raised within MXP_KV_TIMEOUT. */
    double limit = 0.75 * s->timeout_ms / 1000.0;
    for (long spin = 0;; spin++) {
        int flag = 0;
        int rc = MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) return kvd_fail_mpi(c, rc, what);
        if (flag) return MXP_OK;
        if ((spin & 15) == 0) kvd_serve_pings(c);
        double el = kvd_now() - t0;
        if (el > limit) return kvd_fail_timeout(c, what, el);
        /* The first POLL_FIRST_US of a wait poll without napping (see
         * there). */
        if (spin_s <= 0 && el < POLL_FIRST_US * 1e-6) continue;
        if (hot()) {
            cpu_pause();
            continue;
        }
        if (cap_us > 0 && el < CAP_WINDOW_MS * 1e-3 && el >= spin_s && el * 1e6 / 8 > (double)cap_us) nap_us(cap_us);
        else kvd_pause(el, spin_s);
    }
}

int kvd_wait_spin(kvd_comm *c, int n, MPI_Request *reqs, const char *what, double spin_s) {
    return wait_polled(c, n, reqs, what, spin_s, 0);
}

/* The negotiation's wait.  With work pending here it waits for a peer to
 * reach the same push: the peer is behind, still computing its step, and
 * whenever it arrives the round completes only at this rank's next poll.
 * Naps of an eighth of the wait (kvd_pause) grow to ~0.3 ms over the few
 * ms of skew between LeNet workers, and the step's last sum (conv1's
 * gradient, pushed at the end of the later rank's backward) waited for
 * the early rank's nap to end.  So with work pending the naps stop growing
 * at MXP_KV_NEG_NAP_US (default 50; 0: no cap) for the first CAP_WINDOW_MS
 * of the wait, then grow as usual (a peer slow for longer: evaluation, a
 * stall).  The polls cost the waiting rank, which is the early one: its
 * compute will wait for this very sum anyway.  Measured (LeNet, 2 workers,
 * one core each, 95 steps, machine loaded): from the later rank's last
 * push to the step's last completion, median 474 / 301 us uncapped,
 * 302 / 270 us at 100, 219 / 205 us at 30. */
static int wait_negotiation(kvd_comm *c, MPI_Request *rq, int work_here) {
    return wait_polled(c, 1, rq, "negotiation", 0.0, work_here ? c->neg_cap_us : 0);
}

/* ------------------------------------------------------------ requests */

static void finish_sync(kvd_store *s, kvd_req *r, int status, const char *msg) {
    pthread_mutex_lock(&s->lock);
    r->status = status;
    snprintf(r->msg, sizeof r->msg, "%s", msg ? msg : "");
    r->finished = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

void kvd_finish(kvd_store *s, kvd_req *r, int status, const char *msg) {
    if (r->kind == KVD_PUSHPULL || r->kind == KVD_PUSH || r->kind == KVD_PULL) {
        r->complete(r->token, status, msg);
        free(r);
    } else {
        finish_sync(s, r, status, msg);
    }
}

void kvd_enqueue(kvd_store *s, kvd_req *r) {
    r->next = NULL;
    r->t_enq = kvd_now();
    pthread_mutex_lock(&s->lock);
    if (s->broken || s->stopped) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", s->broken ? s->broken_msg : "kvstore dist_sync: the store was shut down");
        pthread_mutex_unlock(&s->lock);
        kvd_finish(s, r, s->broken ? MXP_ENET : MXP_EMISUSE, msg);
        return;
    }
    if (s->tail) s->tail->next = r;
    else s->head = r;
    s->tail = r;
    /* A held step (defer.c): the comm thread waits for the set's last
     * missing key; earlier ones need not preempt the compute thread. */
    int wake = 1;
    if (r->kind == KVD_PUSHPULL && s->defer_missing && r->key >= 0 && r->key / 64 < s->defer_words &&
        (s->defer_missing[r->key / 64] >> (r->key % 64) & 1)) {
        s->defer_missing[r->key / 64] &= ~(1ull << (r->key % 64));
        wake = --s->defer_left <= 0;
    }
    if (wake) pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

int kvd_run_sync(kvd_store *s, kvd_req *r) {
    r->finished = 0;
    kvd_enqueue(s, r);
    pthread_mutex_lock(&s->lock);
    while (!r->finished) pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
    if (r->status) kvd_host->set_error(r->status, "%s", r->msg);
    return r->status;
}

/* ------------------------------------------------------------ the cycle */

/* Local pending work, owned by the comm thread. */
typedef struct pending {
    kvd_req **by_key;        /* [cap] FIFO heads of pushpulls per key      */
    int cap;
    kvd_req *init, *barrier, *shutdown;
    kvd_req *later;          /* a second init/barrier while one waits      */
} pending;

static int grow_keys(pending *p, int n) {
    if (n <= p->cap) return 0;
    int cap = p->cap ? p->cap : 64;
    while (cap < n) cap *= 2;
    kvd_req **b = realloc(p->by_key, (size_t)cap * sizeof *b);
    if (!b) return -1;
    memset(b + p->cap, 0, (size_t)(cap - p->cap) * sizeof *b);
    p->by_key = b;
    p->cap = cap;
    return 0;
}

static void append(kvd_req **head, kvd_req *r) {
    r->next = NULL;
    while (*head) head = &(*head)->next;
    *head = r;
}

/* Take the queued requests into p; with none queued, first wait up to
 * block_s for one.  hold (a held step, defer.c): the set's keys not yet
 * pending, published for kvd_enqueue while this thread waits. */
static void take_queue(kvd_comm *c, pending *p, double block_s, uint64_t *hold, int hold_n) {
    kvd_store *s = c->s;
    pthread_mutex_lock(&s->lock);
    if (!s->head && block_s > 0) {
        if (hold) s->defer_missing = hold, s->defer_words = c->defer.words, s->defer_left = hold_n;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = (long)(block_s * 1e9);
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec += ns % 1000000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&s->cond, &s->lock, &ts);
        s->defer_missing = NULL;
    }
    kvd_req *r = s->head;
    s->head = s->tail = NULL;
    int nk = s->n_keys;
    pthread_mutex_unlock(&s->lock);
    while (r) {
        kvd_req *next = r->next;
        if (r->kind == KVD_PUSHPULL) {
            if (r->key < 0 || r->key >= nk || grow_keys(p, nk)) {
                kvd_finish(s, r, MXP_EINTERNAL, "kvstore: bad key index");
            } else {
                kvd_defer_note(&c->defer, r->key, r->t_enq);
                append(&p->by_key[r->key], r);
            }
        } else {
            kvd_req **slot = r->kind == KVD_INIT ? &p->init : r->kind == KVD_BARRIER ? &p->barrier : &p->shutdown;
            if (*slot) append(&p->later, r);
            else *slot = r;
        }
        r = next;
    }
    /* Promote deferred sync requests whose slot is free. */
    kvd_req **pp = &p->later;
    while (*pp) {
        kvd_req *q = *pp;
        kvd_req **slot = q->kind == KVD_INIT ? &p->init : q->kind == KVD_BARRIER ? &p->barrier : &p->shutdown;
        if (!*slot) {
            *pp = q->next;
            q->next = NULL;
            *slot = q;
        } else {
            pp = &q->next;
        }
    }
}

static int has_local_work(const pending *p, int nk) {
    if (p->init || p->barrier || p->shutdown) return 1;
    for (int k = 0; k < nk && k < p->cap; k++)
        if (p->by_key[k]) return 1;
    return 0;
}

/* Init: check every rank gives the key the same size and dtype, then
 * broadcast rank 0's value. */
static int do_init(kvd_comm *c, kvd_req *r, char *err, size_t cap) {
    kvd_store *s = c->s;
    int64_t mine[4] = {r->count, -r->count, r->dtype, -r->dtype}, agg[4];
    MPI_Request rq;
    MPI_Iallreduce(mine, agg, 4, MPI_INT64_T, MPI_MAX, c->ctrl, &rq);
    int rc = kvd_wait(c, 1, &rq, "init (size check)");
    if (rc) return rc;
    if (agg[0] != -agg[1] || agg[2] != -agg[3]) {
        snprintf(err, cap, "kvstore dist_sync: init of key #%d: workers disagree on its size or dtype (%lld..%lld "
                 "elements, dtype %lld..%lld): every worker must init the same keys in the same order",
                 r->key, (long long)-agg[1], (long long)agg[0], (long long)-agg[3], (long long)agg[2]);
        return MXP_ESHAPE;
    }
    rc = kvd_bcast(c, r->data, r->count, r->dtype, "init (broadcast)");
    if (rc) return rc;
    pthread_mutex_lock(&s->lock);
    s->keys[r->key].count = r->count;
    s->keys[r->key].dtype = r->dtype;
    s->n_keys = r->key + 1;
    pthread_mutex_unlock(&s->lock);
    return MXP_OK;
}

/* Allreduce the agreed keys, fused into buckets. */
static int do_keys(kvd_comm *c, pending *p, const uint64_t *agreed, int nk) {
    kvd_store *s = c->s;
    kvd_req **bucket = c->bucket;
    int nb = 0;
    int64_t bytes = 0;
    int32_t dtype = -1;
    for (int k = 0; k <= nk; k++) {
        kvd_req *r = NULL;
        if (k < nk && (agreed[1 + k / 64] >> (k % 64) & 1)) r = p->by_key[k];
        int64_t rb = r ? r->count * (int64_t)mxp_dtype_size(r->dtype) : 0;
        /* Close the bucket at the end, at a dtype change, or when r would
         * overflow it. */
        int close = nb && (k == nk || (r && (r->dtype != dtype || bytes + rb > s->bucket_bytes)));
        if (close) {
            int rc = kvd_allreduce_bucket(c, bucket, nb);
            if (rc && !s->broken) {
                char msg[256];
                snprintf(msg, sizeof msg, "kvstore dist_sync rank %d: cannot sum a bucket of %d keys (%lld bytes): %s",
                         s->rank, nb, (long long)bytes, rc == MXP_ENOMEM ? "out of memory" : "more than 64 ranks or an unsupported dtype");
                kvd_set_broken(s, msg);
            }
            for (int i = 0; i < nb; i++) {
                kvd_req *b = bucket[i];
                p->by_key[b->key] = b->next;
                kvd_finish(s, b, rc, rc ? s->broken_msg : NULL);
            }
            nb = 0;
            bytes = 0;
            if (rc) return rc;
        }
        if (r) {
            bucket[nb++] = r;
            bytes += rb;
            dtype = r->dtype;
        }
    }
    return MXP_OK;
}

static void fail_all(kvd_store *s, pending *p, int status) {
    char msg[512];
    pthread_mutex_lock(&s->lock);
    snprintf(msg, sizeof msg, "%s", s->broken_msg);
    kvd_req *q = s->head;
    s->head = s->tail = NULL;
    pthread_mutex_unlock(&s->lock);
    while (q) {
        kvd_req *n = q->next;
        kvd_finish(s, q, status, msg);
        q = n;
    }
    for (int k = 0; k < p->cap; k++)
        while (p->by_key[k]) {
            kvd_req *r = p->by_key[k];
            p->by_key[k] = r->next;
            kvd_finish(s, r, status, msg);
        }
    kvd_req *sync[3] = {p->init, p->barrier, p->shutdown};
    for (int i = 0; i < 3; i++)
        if (sync[i]) kvd_finish(s, sync[i], status, msg);
    while (p->later) {
        kvd_req *r = p->later;
        p->later = r->next;
        kvd_finish(s, r, status, msg);
    }
    p->init = p->barrier = p->shutdown = NULL;
}

/* An item pending here longer than 3/4 of the timeout that some rank does
 * not offer: mark the store broken naming those ranks. */
static int check_stale(kvd_store *s, const pending *p, const uint64_t *mine, const uint64_t *agreed,
                       const uint64_t *all, int need, size_t stride, int nk) {
    double now = kvd_now(), limit = 0.75 * s->timeout_ms / 1000.0;
    for (int bit = 0; bit < 64 * need; bit++) {
        int w = bit / 64;
        uint64_t m = 1ull << (bit % 64);
        if (!(mine[w] & m) || (agreed[w] & m)) continue;
        const kvd_req *r = NULL;
        char what[160];
        if (w == 0) {
            r = bit == BIT_SHUTDOWN ? p->shutdown : bit == BIT_BARRIER ? p->barrier : p->init;
            snprintf(what, sizeof what, "%s", bit == BIT_SHUTDOWN ? "shutdown (freeing the store)" :
                     bit == BIT_BARRIER ? "barrier" : "init of a key");
        } else {
            int k = bit - 64;
            if (k >= nk) continue;
            r = p->by_key[k];
            char lb[128];
            kvd_key_label(s, k, lb, sizeof lb);
            snprintf(what, sizeof what, "push of %s", lb);
        }
        if (!r || now - r->t_enq <= limit) continue;
        char msg[512];
        size_t len = (size_t)snprintf(msg, sizeof msg, "kvstore dist_sync rank %d (host %s): %s waited %.1f s for",
                                      s->rank, s->hosts[s->rank], what, now - r->t_enq);
        int named = 0;
        for (int q = 0; q < s->size && len < sizeof msg; q++) {
            if (all[(size_t)q * stride + (size_t)w] & m) continue;
            len += (size_t)snprintf(msg + len, sizeof msg - len, "%s rank %d (host %s, pid %d)", named++ ? "," : "", q,
                                    s->hosts[q], s->pids[q]);
        }
        if (len < sizeof msg)
            snprintf(msg + len, sizeof msg - len, ", which never offered it: a worker stopped pushing or failed, or "
                     "the workers push different keys");
        kvd_set_broken(s, msg);
        return MXP_ETIMEDOUT;
    }
    return MXP_OK;
}

#define SUM_RANKS(T)                                                         \
    do {                                                                     \
        T *d = r->data;                                                      \
        for (int64_t i = 0; i < r->count; i++) {                             \
            T acc = ((const T *)(base + off))[i];                            \
            for (int q = 1; q < n; q++) acc += ((const T *)(base + (size_t)q * stride * 8 + off))[i]; \
            d[i] = acc;                                                      \
        }                                                                    \
    } while (0)

/* The ride-along block after the negotiation's `need` words: `pw` words of
 * bits (cached key j present), then each cached key's value, 8-byte
 * aligned.  Every cached key that all ranks sent is summed in rank order
 * (((x0 + x1) + x2) ..., as pipeline.c), completed and taken out of
 * `agreed`.  Returns how many were; *offered: some rank sent one. */
static int sum_cached(kvd_comm *c, pending *p, const uint64_t *all, size_t stride, int need, int pw,
                      uint64_t *agreed, int *offered) {
    kvd_store *s = c->s;
    const char *base = (const char *)(all + need + pw);
    int n = s->size, done = 0;
    size_t off = 0;
    for (int j = 0; j < c->n_cache; off += (size_t)c->cache_bytes[j], j++) {
        int every = 1;
        for (int q = 0; q < n; q++) {
            int has = (int)(all[(size_t)q * stride + (size_t)need + (size_t)(j / 64)] >> (j % 64) & 1);
            every &= has;
            *offered |= has;
        }
        if (!every) continue;
        int k = c->cache[j];
        kvd_req *r = p->by_key[k]; /* set: this rank sent it */
        switch (r->dtype) {
        case MXP_DTYPE_F32: SUM_RANKS(float); break;
        case MXP_DTYPE_F64: SUM_RANKS(double); break;
        case MXP_DTYPE_I32: SUM_RANKS(int32_t); break;
        default: SUM_RANKS(int64_t); break;
        }
        c->st.cached_keys++;
        p->by_key[k] = r->next;
        agreed[1 + k / 64] &= ~(1ull << (k % 64));
        kvd_finish(s, r, MXP_OK, NULL);
        done++;
    }
    return done;
}

/* The ride-along keys: a key agreed in two cycles (a training loop's
 * gradient, a benchmark's key) is adopted while the keys fit in
 * SPEC_MAX_BYTES together (and in the fusion bucket, when fusion is
 * limited below that: MXP_KV_BUCKET_BYTES=0 lets one key ride alone).
 * They are all dropped after SPEC_MISSES cycles in a row whose block some
 * rank filled without any key being summed from it (pushes that never
 * meet).  The same decisions on every rank: they depend on gathered data
 * and key sizes only. */
static int64_t key_bytes(kvd_store *s, int k) { /* under the lock: an init may grow the table */
    return s->keys[k].count * (int64_t)mxp_dtype_size(s->keys[k].dtype);
}

static void drop_cache(kvd_comm *c) {
    c->n_cache = 0;
    c->cache_total = 0;
    c->misses = 0;
    if (c->seen) memset(c->seen, 0, (size_t)c->cap_seen);
}

static void adopt_key(kvd_comm *c, int k, int64_t bytes) {
    if (c->n_cache == c->cap_cache) {
        int cap = c->cap_cache ? 2 * c->cap_cache : 16;
        int *k2 = realloc(c->cache, (size_t)cap * sizeof *k2);
        if (k2) c->cache = k2;
        int64_t *b2 = k2 ? realloc(c->cache_bytes, (size_t)cap * sizeof *b2) : NULL;
        if (!b2) return; /* not adopted: its sums take the usual path */
        c->cache_bytes = b2;
        c->cap_cache = cap;
    }
    int j = c->n_cache;
    while (j > 0 && c->cache[j - 1] > k) { /* ascending key order */
        c->cache[j] = c->cache[j - 1];
        c->cache_bytes[j] = c->cache_bytes[j - 1];
        j--;
    }
    c->cache[j] = k;
    c->cache_bytes[j] = (bytes + 7) & ~(int64_t)7;
    c->n_cache++;
    c->cache_total += c->cache_bytes[j];
}

/* Remember an agreed key set (words of key bits) among the last
 * RECENT_SETS; the ring restarts when the key table grew a word. */
static void remember_set(kvd_comm *c, const uint64_t *keys, int words) {
    if (words != c->recent_words) {
        uint64_t *r = realloc(c->recent, (size_t)RECENT_SETS * (size_t)words * 8);
        if (!r) return;
        c->recent = r;
        c->recent_words = words;
        c->n_recent = c->next_recent = 0;
    }
    for (int i = 0; i < c->n_recent; i++)
        if (!memcmp(c->recent + (size_t)i * (size_t)words, keys, (size_t)words * 8)) return;
    memcpy(c->recent + (size_t)c->next_recent * (size_t)words, keys, (size_t)words * 8);
    c->next_recent = (c->next_recent + 1) % RECENT_SETS;
    if (c->n_recent < RECENT_SETS) c->n_recent++;
}

static void update_cache(kvd_comm *c, const uint64_t *agreed, int need, int nk) {
    kvd_store *s = c->s;
    int any = 0;
    for (int k = 0; k < nk && !any; k++) any = (int)(agreed[1 + k / 64] >> (k % 64) & 1);
    if (!any) return; /* a cycle with no keys (idle, a barrier) changes nothing */
    remember_set(c, agreed + 1, need - 1);
    if (nk > c->cap_seen) {
        uint8_t *w = realloc(c->seen, (size_t)nk);
        if (!w) return;
        memset(w + c->cap_seen, 0, (size_t)(nk - c->cap_seen));
        c->seen = w;
        c->cap_seen = nk;
    }
    int64_t limit = s->bucket_bytes < SPEC_MAX_BYTES ? s->bucket_bytes : SPEC_MAX_BYTES;
    pthread_mutex_lock(&s->lock);
    for (int k = 0; k < nk; k++) {
        if (!(agreed[1 + k / 64] >> (k % 64) & 1) || c->seen[k] >= 2) continue;
        if (++c->seen[k] < 2) continue;
        int64_t b = key_bytes(s, k), padded = (b + 7) & ~(int64_t)7;
        if (padded > SPEC_MAX_BYTES || (c->n_cache > 0 && c->cache_total + padded > limit)) continue;
        adopt_key(c, k, b);
    }
    pthread_mutex_unlock(&s->lock);
}

/* The pending pushpulls are exactly a key set agreed recently, and nothing
 * else (no init, barrier or shutdown) is pending: a burst that is complete,
 * with nothing more to wait for. */
static int pending_is_recent_set(const kvd_comm *c, const pending *p, int nk) {
    if (!c->n_recent || p->init || p->barrier || p->shutdown) return 0;
    int words = (nk + 63) / 64;
    if (words != c->recent_words) return 0;
    uint64_t have[words];
    memset(have, 0, sizeof have);
    for (int k = 0; k < nk && k < p->cap; k++)
        if (p->by_key[k]) have[k / 64] |= 1ull << (k % 64);
    for (int i = 0; i < c->n_recent; i++)
        if (!memcmp(c->recent + (size_t)i * (size_t)words, have, sizeof have)) return 1;
    return 0;
}

/* A microseconds knob from the environment: unset or empty gives dflt; a
 * value that is not a whole number in lo..hi is warned about (naming the
 * variable and value) and gives dflt, rather than silently 0 as strtol
 * would make it. */
static long env_us(const char *name, long dflt, long lo, long hi) {
    const char *e = getenv(name);
    if (!e || !*e) return dflt;
    char *end = NULL;
    errno = 0;
    long v = strtol(e, &end, 10);
    if (end == e || *end || errno || v < lo || v > hi) {
        kvd_host->log(MXP_LOG_WARN, "kvstore-dist", "%s='%s' is not a whole number of microseconds in %ld..%ld: "
                      "using %ld", name, e, lo, hi, dflt);
        return dflt;
    }
    return v;
}

/* Ask the scheduler for a short time slice on this thread (Linux >= 6.12,
 * EEVDF: sched_attr.sched_runtime of a normal task; no privilege needed;
 * older kernels ignore it).  The communication thread shares its core with
 * compute threads when a worker gets one core; it runs in bursts of tens
 * of microseconds between naps, and with the default slice a wake-up
 * waited for the running compute thread's slice (up to ~1.5 ms) before it
 * could take the core, so each round of a sum cost a slice on each rank.
 * A short slice lets it preempt at once (PREEMPT_SHORT) and run briefly.
 * MXP_KV_COMM_SLICE_US (default 100, 0: leave the default slice). */
void kvd_short_slice(void) {
    long us = env_us("MXP_KV_COMM_SLICE_US", 100, 0, 100000);
    if (us == 0) return;
    if (us < 100) us = 100; /* the kernel's range: 0.1 .. 100 ms */
    struct {
        uint32_t size, policy;
        uint64_t flags;
        int32_t nice;
        uint32_t priority;
        uint64_t runtime, deadline, period;
    } a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.policy = 0; /* SCHED_OTHER */
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0); /* this thread's nice (Linux) */
    if (errno) return;
    a.nice = nice;
    a.runtime = (uint64_t)us * 1000;
    (void)syscall(SYS_sched_setattr, 0, &a, 0u); /* best effort */
}

/* A held step (defer.c): while what is pending is a part of the learned
 * step set and nothing else, wait (blocked, not polling) for the rest of
 * the set, at most kvd_defer_bound() from the first held push. */
static void hold_step(kvd_comm *c, pending *p, int nk) {
    kvd_defer *d = &c->defer;
    if (!d->armed || !d->n_set || kvd_defer_bound(d) <= 0) return;
    int held = 0;
    for (;;) {
        if (p->init || p->barrier || p->shutdown || p->later) break;
        double first = 0;
        int any = 0, outside = 0, missing = 0;
        for (int w = 0; w < d->words; w++) d->missing[w] = d->set[w];
        for (int k = 0; k < nk && k < p->cap; k++) {
            if (!p->by_key[k]) continue;
            int in = k / 64 < d->words && (d->set[k / 64] >> (k % 64) & 1);
            if (!in) outside = 1;
            else d->missing[k / 64] &= ~(1ull << (k % 64));
            if (!any || p->by_key[k]->t_enq < first) first = p->by_key[k]->t_enq;
            any = 1;
        }
        if (!any || outside) break;
        for (int w = 0; w < d->words; w++) missing += __builtin_popcountll(d->missing[w]);
        if (!missing) break;
        double left = first + kvd_defer_bound(d) - kvd_now();
        if (left <= 0) {
            kvd_defer_end(d, 1);
            return;
        }
        if (!held) d->holds++;
        held = 1;
        take_queue(c, p, left, d->missing, missing);
    }
    if (held) {
        kvd_defer_end(d, 0);
        c->released = kvd_now();
        c->st.step_neg_s = 0;
        hot_until = c->released + (double)hot_us * 1e-6;
    } else if (d->armed && has_local_work(p, nk)) {
        d->armed = 0; /* this round's work goes now, unheld */
    }
}

static void *comm_main(void *arg) {
    kvd_comm *c = arg;
    kvd_store *s = c->s;
    pending p = {0};
    /* Naps of tens of microseconds mean what they say (the default timer
     * slack, 50 us, would stretch each one by that much). */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    kvd_short_slice();
    c->neg_cap_us = env_us("MXP_KV_NEG_NAP_US", 50, 0, 1000000);
    hot_us = env_us("MXP_KV_HOT_US", 3000, 0, 10000000);
    int rc = kvd_mpi_setup(c);
    if (!rc) kvd_defer_setup(&c->defer, s);
    pthread_mutex_lock(&s->lock);
    s->init_status = rc;
    s->started = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (rc) return NULL;
    uint64_t *mine = NULL, *agreed = NULL, *all = NULL;
    size_t all_cap = 0;
    int words = 0, finalize = 1;
    for (;;) {
        int nk = s->n_keys; /* only this thread changes it */
        /* Idle: sleep until local work is queued (the enqueue wakes this
         * thread at once), or IDLE_CYCLE_MS.  A cycle is only useful to a
         * peer when this rank has the same work pending, so an idle rank
         * need not cycle often: its timed-out cycles only let a peer's
         * stale-work check and ping answers go on.  (Cycling every 2 ms
         * cost each worker ~12% of its core in LeNet training with one
         * core per worker: every idle cycle made the earlier rank poll the
         * negotiation until the later one's timer fired.) */
        int had_work = has_local_work(&p, nk);
        take_queue(c, &p, had_work ? 0 : IDLE_CYCLE_MS * 1e-3, NULL, 0);
        /* Work after none: pushes come in bursts (a step's gradients, a
         * list of keys), and on a shared core the thread that queues them
         * is preempted by this wake-up; a short nap lets the rest of the
         * burst join this cycle instead of costing cycles of their own.
         * Not when what is pending is exactly a key set agreed recently
         * (a repeated push, complete: nothing to wait for). */
        if (!had_work && has_local_work(&p, nk) && !pending_is_recent_set(c, &p, nk)) {
            nap_us(COALESCE_US);
            take_queue(c, &p, 0, NULL, 0);
        }
        if (c->defer.on) hold_step(c, &p, nk);
        int need = 1 + (nk + 63) / 64;
        if (need > words) {
            uint64_t *m = realloc(mine, (size_t)need * 8), *a = m ? realloc(agreed, (size_t)need * 8) : NULL;
            if (m) mine = m;
            if (!m || !a) {
                kvd_set_broken(s, "kvstore dist_sync: out of memory in the communication thread");
                rc = MXP_ENOMEM;
                break;
            }
            agreed = a;
            words = need;
        }
        if (nk > c->bucket_cap) {
            kvd_req **b = realloc(c->bucket, (size_t)nk * sizeof *b);
            if (!b) {
                kvd_set_broken(s, "kvstore dist_sync: out of memory in the communication thread");
                rc = MXP_ENOMEM;
                break;
            }
            c->bucket = b;
            c->bucket_cap = nk;
        }
        /* The cached set rides along while work is recent (the same
         * decision on every rank: it depends on gathered data only). */
        int spec = c->n_cache > 0 && c->idle_cycles < SPEC_IDLE_CYCLES;
        int pw = spec ? (c->n_cache + 63) / 64 : 0;
        size_t stride = (size_t)need + (spec ? (size_t)pw + (size_t)c->cache_total / 8 : 0);
        if (stride > (size_t)words) {
            uint64_t *m = realloc(mine, stride * 8);
            if (!m) {
                kvd_set_broken(s, "kvstore dist_sync: out of memory in the communication thread");
                rc = MXP_ENOMEM;
                break;
            }
            mine = m;
            uint64_t *a = realloc(agreed, stride * 8);
            if (!a) {
                kvd_set_broken(s, "kvstore dist_sync: out of memory in the communication thread");
                rc = MXP_ENOMEM;
                break;
            }
            agreed = a;
            words = (int)stride;
        }
        memset(mine, 0, stride * 8);
        if (p.shutdown) mine[0] |= 1u << BIT_SHUTDOWN;
        if (p.barrier) mine[0] |= 1u << BIT_BARRIER;
        if (p.init) mine[0] |= 1u << BIT_INIT;
        for (int k = 0; k < nk && k < p.cap; k++)
            if (p.by_key[k]) mine[1 + k / 64] |= 1ull << (k % 64);
        if (spec) {
            uint64_t *bits = mine + need;
            char *vals = (char *)(mine + need + pw);
            size_t off = 0;
            for (int j = 0; j < c->n_cache; off += (size_t)c->cache_bytes[j], j++) {
                int k = c->cache[j];
                const kvd_req *r = k < p.cap ? p.by_key[k] : NULL;
                if (!r) continue;
                bits[j / 64] |= 1ull << (j % 64);
                memcpy(vals + off, r->data, (size_t)(r->count * (int64_t)mxp_dtype_size(r->dtype)));
            }
        }
        if (stride * (size_t)s->size > all_cap) {
            uint64_t *a = realloc(all, stride * (size_t)s->size * 8);
            if (!a) {
                kvd_set_broken(s, "kvstore dist_sync: out of memory in the communication thread");
                rc = MXP_ENOMEM;
                break;
            }
            all = a;
            all_cap = stride * (size_t)s->size;
        }
        MPI_Request rq;
        if (stride > 0x7fffffff) stride = need; /* not reached: the block is at most SPEC_MAX_BYTES */
        MPI_Iallgather(mine, (int)stride, MPI_UINT64_T, all, (int)stride, MPI_UINT64_T, c->ctrl, &rq);
        double t_neg = kvd_now();
        c->st.cycles++;
        c->st.work_cycles += has_local_work(&p, nk);
        if ((rc = wait_negotiation(c, &rq, has_local_work(&p, nk)))) break;
        c->st.neg_s += kvd_now() - t_neg;
        if (c->released > 0) {
            c->st.tail_neg_s += kvd_now() - t_neg;
            c->st.step_neg_s += kvd_now() - t_neg;
        }
        int any = 0;
        for (int w = 0; w < need; w++) {
            agreed[w] = ~0ull;
            for (int r = 0; r < s->size; r++) {
                agreed[w] &= all[(size_t)r * stride + (size_t)w];
                any |= all[(size_t)r * stride + (size_t)w] != 0;
            }
        }
        c->idle_cycles = any ? 0 : c->idle_cycles + 1;
        if ((rc = check_stale(s, &p, mine, agreed, all, need, stride, nk))) break;
        uint64_t agreed_keys[need]; /* this cycle's agreed set, for update_cache */
        memcpy(agreed_keys, agreed, (size_t)need * 8);
        if (spec) {
            int offered = 0;
            if (sum_cached(c, &p, all, stride, need, pw, agreed, &offered)) c->misses = 0;
            else if (offered && ++c->misses >= SPEC_MISSES) drop_cache(c);
        }
        update_cache(c, agreed_keys, need, nk);
        if (agreed[0] >> BIT_INIT & 1) {
            char err[512] = "";
            kvd_req *r = p.init;
            p.init = NULL;
            rc = do_init(c, r, err, sizeof err);
            if (rc && err[0]) {
                kvd_finish(s, r, rc, err); /* a usage error: the store stays usable */
                rc = MXP_OK;
            } else {
                kvd_finish(s, r, rc, rc ? s->broken_msg : NULL);
            }
            if (rc) break;
        }
        if ((rc = do_keys(c, &p, agreed, nk))) break;
        if (c->released > 0 && !has_local_work(&p, nk)) { /* the step's last sum */
            double took = kvd_now() - c->released;
            if (c->st.tails < KVD_TAIL_SAMPLES) {
                c->st.tail_us[c->st.tails] = (float)(took * 1e6);
                c->st.wait_us[c->st.tails] = (float)(c->st.step_neg_s * 1e6);
            }
            c->st.tails++;
            c->st.tail_s += took;
            c->st.step_neg_s = 0;
            c->released = 0;
        }
        if (agreed[0] >> BIT_BARRIER & 1) {
            kvd_finish(s, p.barrier, MXP_OK, NULL);
            p.barrier = NULL;
        }
        if (agreed[0] >> BIT_SHUTDOWN & 1) break;
    }
    if (rc) {
        finalize = 0;
        fail_all(s, &p, rc);
    }
    if (finalize) kvd_mpi_teardown(c);
    pthread_mutex_lock(&s->lock);
    s->stopped = 1;
    pthread_mutex_unlock(&s->lock);
    if (p.shutdown) kvd_finish(s, p.shutdown, MXP_OK, NULL);
    p.shutdown = NULL;
    fail_all(s, &p, MXP_ECANCELED);
    free(mine);
    free(agreed);
    free(all);
    free(p.by_key);
    return NULL;
}

static kvd_comm g_comm;

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Median of v[0..n) (sorts it); 0 for none. */
static double median_us(float *v, long n) {
    if (n <= 0) return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_float);
    return n % 2 ? v[n / 2] : 0.5 * ((double)v[n / 2 - 1] + v[n / 2]);
}

static int env_flag(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

int kvd_comm_start(kvd_store *s) {
    memset(&g_comm, 0, sizeof g_comm);
    g_comm.s = s;
    if (pthread_create(&s->thread, NULL, s->async ? kvd_ps_main : comm_main, &g_comm))
        return kvd_host->set_error(MXP_ENOMEM, "kvstore dist_sync: cannot start the communication thread");
    pthread_setname_np(s->thread, "mxp-kv-comm"); /* for top -H, perf, /proc/PID/task */
    pthread_mutex_lock(&s->lock);
    while (!s->started) pthread_cond_wait(&s->cond, &s->lock);
    int rc = s->init_status;
    pthread_mutex_unlock(&s->lock);
    if (rc) {
        pthread_join(s->thread, NULL);
        return kvd_host->set_error(rc, "%s", s->init_msg);
    }
    return MXP_OK;
}

void kvd_comm_stop(kvd_store *s) {
    kvd_req r;
    memset(&r, 0, sizeof r);
    r.kind = KVD_SHUTDOWN;
    /* A dist_async server's thread ends when its workers stopped. */
    if (!(s->async && s->role)) kvd_run_sync(s, &r);
    pthread_join(s->thread, NULL);
    if (!s->async && env_flag("MXP_KV_STATS")) {
        kvd_stats *t = &g_comm.st;
        long ns = t->tails < KVD_TAIL_SAMPLES ? t->tails : KVD_TAIL_SAMPLES;
        double tail_med = median_us(t->tail_us, ns), wait_med = median_us(t->wait_us, ns);
        fprintf(stderr, "%s rank %d: %ld negotiation cycles (%ld with local work), %.1f ms waiting in them; %ld bucket "
                "sums in %.1f ms (%.0f us each); %ld keys summed inside the negotiation; deferral %s: %ld steps held "
                "(%ld timed out), step set of %d keys; a released step took %.0f us to its last sum, %.0f us of it waiting "
                "for the peers (medians %.0f us, %.0f us)\n", kvd_name(s), s->rank,
                t->cycles, t->work_cycles, t->neg_s * 1e3, t->sums, t->sum_s * 1e3,
                t->sums ? t->sum_s / (double)t->sums * 1e6 : 0.0, t->cached_keys, g_comm.defer.on ? "on" : "off",
                g_comm.defer.holds, g_comm.defer.timeouts, g_comm.defer.n_set,
                t->tails ? t->tail_s / (double)t->tails * 1e6 : 0.0, t->tails ? t->tail_neg_s / (double)t->tails * 1e6 : 0.0,
                tail_med, wait_med);
    }
    free(g_comm.bucket);
    free(g_comm.scratch);
    free(g_comm.cache);
    free(g_comm.cache_bytes);
    free(g_comm.seen);
    free(g_comm.recent);
    kvd_defer_free(&g_comm.defer);
    g_comm.bucket = NULL;
    g_comm.scratch = NULL;
    g_comm.cache = NULL;
    g_comm.cache_bytes = NULL;
    g_comm.seen = NULL;
    g_comm.recent = NULL;
}
