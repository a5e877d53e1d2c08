/* kvdist_comm.h — private to the communication thread's files (comm.c,
 * allreduce.c): the thread's MPI state and the polled, deadline-bounded
 * MPI helpers.  Everything declared here runs on the communication thread
 * only. */
#ifndef KVDIST_COMM_H
#define KVDIST_COMM_H

#include "kvdist.h"

#include <mpi.h>

/* MXP_KV_STATS=1: the communication thread's counters, printed to stderr
 * when the store is freed (dist_sync). */
typedef struct kvd_stats {
    long cycles, work_cycles; /* negotiations; those with work pending here */
    double neg_s;            /* waiting in negotiations (for the peers)    */
    long sums;               /* buckets summed by pipeline.c               */
    double sum_s;
    long cached_keys;        /* keys summed from the negotiation's block   */
    long tails;              /* held steps released and summed             */
    double tail_neg_s;       /* their negotiation waits (for a later peer) */
    double tail_s;           /* release to the end of their sums           */
    double step_neg_s;       /* the released step's negotiation waits so far */
    /* The first KVD_TAIL_SAMPLES released steps, each: release to last
     * sum, and its negotiation waits (us), for the printed medians (the
     * means carry the first steps' waits for the peer's convolution
     * tuning, tens of ms). */
#define KVD_TAIL_SAMPLES 4096
    float tail_us[KVD_TAIL_SAMPLES], wait_us[KVD_TAIL_SAMPLES];
} kvd_stats;

/* defer.c: a training step's pushes held until the step's whole key set
 * is queued (a communication thread that shares its core with compute). */
typedef struct kvd_defer {
    int on;                  /* MXP_KV_DEFER, or auto: one CPU              */
    int words;               /* of each bitmap                             */
    uint64_t *round, *prev;  /* keys taken in this round / the last one    */
    uint64_t *set;           /* the learned step set (n_set keys)          */
    uint64_t *missing;       /* comm.c's scratch: set keys not yet queued  */
    int n_set;
    double round_t0, round_t1; /* first / last push of this round          */
    double prev_span, span;  /* the last round's span; the set's           */
    int armed;               /* a round began since the last hold          */
    int misses, drops;
    long holds, timeouts;    /* MXP_KV_STATS                               */
} kvd_defer;

void kvd_defer_setup(kvd_defer *d, const kvd_store *s);
void kvd_defer_free(kvd_defer *d);
/* A pushpull of `key` taken from the queue (t_enq: when it was queued). */
void kvd_defer_note(kvd_defer *d, int key, double t_enq);
/* How long a hold may last from the first held push (seconds); 0: the
 * set is not held. */
double kvd_defer_bound(const kvd_defer *d);
/* A hold ended: complete (missed 0) or timed out (missed 1). */
void kvd_defer_end(kvd_defer *d, int missed);

typedef struct kvd_comm {
    kvd_store *s;
    MPI_Comm data;           /* sums and broadcasts                        */
    MPI_Comm ctrl;           /* negotiation, pings                         */
    kvd_req **bucket;        /* the bucket being filled                    */
    int bucket_cap;
    void *scratch;           /* receive space of the sums (pipeline.c)     */
    size_t scratch_bytes;
    /* dist_sync's ride-along keys (comm.c): small keys agreed in two
     * cycles, whose values travel inside the negotiation. */
    int *cache;              /* dense key indices, ascending               */
    int64_t *cache_bytes;    /* [n_cache] bytes of each, rounded up to 8   */
    int n_cache, cap_cache;
    int64_t cache_total;     /* bytes of all of them (a multiple of 8)     */
    int idle_cycles;         /* cycles in a row where no rank had work     */
    long neg_cap_us;         /* MXP_KV_NEG_NAP_US (comm.c, wait_negotiation) */
    int misses;              /* cycles in a row whose block summed nothing */
    uint8_t *seen;           /* [cap_seen] cycles each key was agreed in, up to 2 */
    int cap_seen;
    uint64_t *recent;        /* RECENT_SETS agreed key sets, recent_words each */
    int recent_words, n_recent, next_recent;
    MPI_Comm ps;             /* dist_async requests and replies            */
    MPI_Comm workers;        /* dist_async: the workers only (barrier)     */
    kvd_stats st;
    kvd_defer defer;
    double released;         /* when a held step was released (0: none)   */
} kvd_comm;

double kvd_now(void);
/* A short scheduler slice for the calling thread (comm.c explains). */
void kvd_short_slice(void);
/* "key 3" / "key 'fc1_weight'" for key index k. */
void kvd_key_label(kvd_store *s, int k, char *buf, size_t cap);
/* Answer pending pings from peers (a live rank always answers). */
void kvd_serve_pings(kvd_comm *c);
/* Poll reqs until all complete, answering pings; past 3/4 of the timeout
 * (or on an MPI error) ping the peers, mark the store broken with a message
 * naming `what` and the silent ranks, and return MXP_ETIMEDOUT / MXP_ENET. */
int kvd_wait(kvd_comm *c, int n, MPI_Request *reqs, const char *what);
/* kvd_wait that polls at once (then every 15 us) for the first spin_s
 * seconds: for data both sides are already moving. */
int kvd_wait_spin(kvd_comm *c, int n, MPI_Request *reqs, const char *what, double spin_s);
/* Between two polls of a wait that has lasted waited_s: within spin_s
 * poll at once (50 us), then every 15 us; after it nap in proportion to
 * the wait (20 us .. 1 ms).  For MXP_KV_HOT_US after a held step was
 * released (comm.c, defer.c) it never naps. */
void kvd_pause(double waited_s, double spin_s);
/* Break the store after an MPI error / after waited_s without completion
 * of `what`, naming the peers that do not answer a ping; return
 * MXP_ENET / MXP_ETIMEDOUT. */
int kvd_fail_mpi(kvd_comm *c, int mpi_rc, const char *what);
int kvd_fail_timeout(kvd_comm *c, const char *what, double waited_s);
/* Ping every peer, wait up to window_s, append the silent ones to msg
 * (or a note that all answered); returns how many were silent. */
int kvd_probe_peers(kvd_comm *c, double window_s, char *msg, size_t cap);
/* "kvstore dist_sync" / "kvstore dist_async": the prefix of messages. */
const char *kvd_name(const kvd_store *s);

/* allreduce.c */
/* MPI_Init_thread, communicators, every rank's host and pid.  On failure
 * fills s->init_msg and returns a status. */
int kvd_mpi_setup(kvd_comm *c);
void kvd_mpi_teardown(kvd_comm *c);
/* Broadcast count elements from rank 0. */
int kvd_bcast(kvd_comm *c, void *data, int64_t count, int32_t dtype, const char *what);
/* Sum the requests' arrays (one dtype) over all ranks, in place. */
int kvd_allreduce_bucket(kvd_comm *c, kvd_req **reqs, int n);

/* pipeline.c */
typedef struct kvd_region {
    char *ptr;
    int64_t count;
} kvd_region;
/* Sum the regions (one virtual array of one dtype) over all ranks in
 * place.  Every element is summed in rank order (((x0 + x1) + x2) ...) by
 * the rank that owns its piece, then copied to the others, so every rank
 * gets the same bits whatever the fusion. */
int kvd_allreduce_regions(kvd_comm *c, const kvd_region *rg, int n_rg, int32_t dtype, const char *what);

#endif /* KVDIST_COMM_H */
