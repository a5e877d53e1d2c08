/* kvdist_comm.h — private to the communication thread's files (comm.c,
 * allreduce.c): the thread's MPI state and the polled, deadline-bounded
 * MPI helpers.  Everything declared here runs on the communication thread
 * only. */
#ifndef KVDIST_COMM_H
#define KVDIST_COMM_H

#include "kvdist.h"

#include <mpi.h>

typedef struct kvd_comm {
    kvd_store *s;
    MPI_Comm data;           /* sums and broadcasts                        */
    MPI_Comm ctrl;           /* negotiation, pings                         */
    kvd_req **bucket;        /* the bucket being filled                    */
    int bucket_cap;
    void *scratch;           /* fusion buffer + receive space              */
    size_t scratch_bytes;
    /* dist_sync's cached key set (comm.c): the keys agreed together last
     * time, small enough to ride along with the negotiation. */
    int *cache;              /* dense key indices, ascending               */
    int64_t *cache_bytes;    /* [n_cache] bytes of each                    */
    int n_cache, cap_cache;
    int64_t cache_total;     /* bytes of all of them                       */
    int idle_cycles;         /* cycles in a row where no rank had work     */
    int misses;              /* cycles in a row that carried it in vain    */
    uint64_t *cand;          /* the last agreed key bitmap (a candidate)   */
    int cand_words, cand_cap;
    MPI_Comm ps;             /* dist_async requests and replies            */
    MPI_Comm workers;        /* dist_async: the workers only (barrier)     */
} kvd_comm;

double kvd_now(void);
/* "key 3" / "key 'fc1_weight'" for key index k. */
void kvd_key_label(kvd_store *s, int k, char *buf, size_t cap);
/* Answer pending pings from peers (a live rank always answers). */
void kvd_serve_pings(kvd_comm *c);
/* Poll reqs until all complete, answering pings; past 3/4 of the timeout
 * (or on an MPI error) ping the peers, mark the store broken with a message
 * naming `what` and the silent ranks, and return MXP_ETIMEDOUT / MXP_ENET. */
int kvd_wait(kvd_comm *c, int n, MPI_Request *reqs, const char *what);
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
/* Sum the requests' arrays (one dtype) over all ranks, in place, through
 * one fused buffer when there are several. */
int kvd_allreduce_bucket(kvd_comm *c, kvd_req **reqs, int n);
/* Sum count elements over all ranks in place.  Every element is summed in
 * rank order (((x0 + x1) + x2) ...) by the rank that owns its chunk, then
 * gathered, so every rank gets the same bits whatever the fusion. */
int kvd_allreduce(kvd_comm *c, void *data, int64_t count, int32_t dtype, const char *what);

#endif /* KVDIST_COMM_H */
