/* defer.c — dist_sync's step batching for a communication thread that
 * shares its core with compute: learn the set of keys a training step
 * pushes, and tell comm.c to hold a partial set until the whole set is
 * queued, so a step costs one negotiation and one bucket sum at the end of
 * the backward instead of several rounds spread over it.
 *
 * Why: with one core per worker (mpirun --bind-to core, one engine
 * thread) nothing overlaps — the sum of fc1's gradient during the
 * backward of conv2 takes the core from that backward — but every round
 * spread over the backward costs wake-ups of the communication thread
 * that preempt the compute thread (context switches, its cache), polls
 * while the peer is still behind, and a pipelined sum whose every
 * message waits for the peer's communication thread to get its busy core.
 * Held to the end of the step, the round runs while both workers' compute
 * threads wait for it anyway.  With a core of its own the thread keeps
 * summing while the backward runs (deferral off).
 *
 * Learning: a round is the pushpulls taken since the last repeated key
 * (a key pushed again starts the next round: a training step pushes each
 * gradient once); two equal rounds in a row make the set, and its span
 * (first to last push of the round) bounds a hold: a hold ends when the
 * set is complete, when something outside the set or a sync request
 * (init, barrier, shutdown) is pending, or after 3 x span + 1 ms (a miss;
 * a set whose span makes that more than HOLD_MAX_S is never held).
 * SET_MISSES misses in a row drop the set (relearned from later rounds);
 * the DROPS-th drop turns deferral off for the store's life (a program
 * whose next push waits for the previous sum: each hold would only time
 * out).  At most one hold per round: after a hold, the keys still to come
 * in that round go through at once.
 *
 * MXP_KV_DEFER: 1 on, 0 off, unset/auto: on when the communication thread
 * may run on one CPU only (its affinity, e.g. mpirun --bind-to core); any
 * other value is warned about and taken as auto.
 *
 * Only the communication thread calls these; the decisions are local
 * (each rank holds its own pushes; the negotiation agrees as always), so
 * they change timing, never which keys are summed together or their bits. */
#include "kvdist_comm.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

enum { SET_MISSES = 3, DROPS = 2 };
/* A step whose pushes spread over more than this is not held (a long
 * backward gains little from one round less, and a hold must stay short
 * next to MXP_KV_TIMEOUT: it answers no pings). */
#define HOLD_MAX_S 0.25

void kvd_defer_setup(kvd_defer *d, const kvd_store *s) {
    memset(d, 0, sizeof *d);
    if (s->async || s->size < 2) return;
    const char *e = getenv("MXP_KV_DEFER");
    if (e && (!strcmp(e, "0") || !strcmp(e, "1"))) {
        d->on = e[0] == '1';
        return;
    }
    if (e && *e && strcmp(e, "auto") != 0)
        kvd_host->log(MXP_LOG_WARN, "kvstore-dist", "MXP_KV_DEFER='%s' is not 1, 0 or auto: using auto", e);
    cpu_set_t cs;
    CPU_ZERO(&cs);
    d->on = sched_getaffinity(0, sizeof cs, &cs) == 0 && CPU_COUNT(&cs) == 1;
}

void kvd_defer_free(kvd_defer *d) {
    free(d->round);
    free(d->prev);
    free(d->set);
    free(d->missing);
    d->round = d->prev = d->set = d->missing = NULL;
    d->words = 0;
}

/* Grow the bitmaps to cover key k (new words zero). */
static int grow(kvd_defer *d, int k) {
    int need = k / 64 + 1;
    if (need <= d->words) return 0;
    uint64_t **maps[4] = {&d->round, &d->prev, &d->set, &d->missing};
    for (int i = 0; i < 4; i++) {
        uint64_t *m = realloc(*maps[i], (size_t)need * 8);
        if (!m) return -1;
        memset(m + d->words, 0, (size_t)(need - d->words) * 8);
        *maps[i] = m;
    }
    d->words = need;
    return 0;
}

static int popcount(const uint64_t *m, int words) {
    int n = 0;
    for (int w = 0; w < words; w++) n += __builtin_popcountll(m[w]);
    return n;
}

void kvd_defer_note(kvd_defer *d, int key, double t_enq) {
    if (!d->on || key < 0) return;
    if (grow(d, key)) {
        d->on = 0; /* out of memory: no deferral, nothing else changes */
        return;
    }
    uint64_t bit = 1ull << (key % 64);
    if (d->round[key / 64] & bit) { /* a repeated key: the round is over */
        double span = d->round_t1 - d->round_t0;
        if (!memcmp(d->round, d->prev, (size_t)d->words * 8)) {
            memcpy(d->set, d->round, (size_t)d->words * 8);
            d->n_set = popcount(d->set, d->words);
            d->span = span > d->prev_span ? span : d->prev_span;
        }
        memcpy(d->prev, d->round, (size_t)d->words * 8);
        d->prev_span = span;
        memset(d->round, 0, (size_t)d->words * 8);
        d->armed = 1;
    }
    int empty = 1;
    for (int w = 0; w < d->words && empty; w++) empty = !d->round[w];
    if (empty) d->round_t0 = t_enq;
    d->round[key / 64] |= bit;
    d->round_t1 = t_enq;
}

double kvd_defer_bound(const kvd_defer *d) {
    double b = 3.0 * d->span + 1e-3;
    return b <= HOLD_MAX_S ? b : 0.0;
}

void kvd_defer_end(kvd_defer *d, int missed) {
    d->armed = 0;
    if (!missed) {
        d->misses = 0;
        return;
    }
    d->timeouts++;
    if (++d->misses < SET_MISSES) return;
    d->misses = 0;
    d->n_set = 0;
    if (d->set) memset(d->set, 0, (size_t)d->words * 8);
    if (++d->drops >= DROPS) d->on = 0;
}
