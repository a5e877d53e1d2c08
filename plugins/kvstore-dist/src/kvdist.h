/* kvdist.h — shared between the kvstore-dist pack's files: the store, its
 * key table, the request queue the front end fills and the communication
 * thread drains.
 *
 * Threads: the host's threads (the caller of create/init/barrier, engine
 * workers calling pushpull) only enqueue requests and wait on their own
 * completion; one communication thread per process (comm.c) makes every
 * MPI call, from MPI_Init_thread to MPI_Finalize, so MPI needs only
 * MPI_THREAD_FUNNELED and no engine worker ever blocks in MPI.
 *
 * Invariants: keys get dense indices in init order, the same on every
 * rank (init is collective and synchronous); n_keys changes only on the
 * communication thread, in the same cycle on every rank.  Once `broken` is
 * set (a timeout, a dead peer, an MPI error), every pending and later
 * request fails with `broken_msg`, and MPI_Finalize is skipped (it would
 * wait for the dead peer). */
#ifndef KVDIST_H
#define KVDIST_H

#include <mxp/plugin.h>

#include <pthread.h>
#include <stdint.h>

typedef enum kvd_kind {
    KVD_INIT = 0, KVD_PUSHPULL = 1, KVD_BARRIER = 2, KVD_SHUTDOWN = 3,
    /* dist_async (ps_worker.c) */
    KVD_PUSH = 4, KVD_PULL = 5, KVD_UPDATER = 6
} kvd_kind;

/* A request from a host thread.  Synchronous requests (init, barrier,
 * shutdown) are waited on through `done`; pushpull completes through the
 * front end's callback. */
typedef struct kvd_req {
    struct kvd_req *next;
    int kind;
    int key;                 /* dense key index (init: the new key's)      */
    void *data;              /* element 0                                 */
    int64_t count;
    int32_t dtype;
    mxp_complete_fn complete;
    void *token;
    double t_enq;            /* when it was queued (kvd_now)              */
    const char *blob;        /* KVD_UPDATER: op\0k1\0v1\0... (caller's)    */
    int64_t blob_len;
    /* synchronous requests */
    int finished;
    int status;
    char msg[512];
} kvd_req;

typedef struct kvd_key {
    int is_str;
    int64_t ikey;
    char *skey;
    int64_t count;
    int32_t dtype;
} kvd_key;

typedef struct kvd_store {
    /* Set at create, read-only after. */
    int rank, size;
    int32_t timeout_ms;
    int64_t bucket_bytes;
    int64_t segment_bytes;   /* pipelined sum's unit (pipeline.c)          */
    char **hosts;            /* [size] host name of each rank              */
    int *pids;               /* [size]                                     */
    /* Guarded by lock. */
    pthread_mutex_t lock;
    pthread_cond_t cond;     /* signalled on enqueue and on completion     */
    kvd_req *head, *tail;    /* queued, not yet taken by the comm thread   */
    kvd_key *keys;
    int n_keys, cap_keys;
    int broken;
    char broken_msg[512];
    /* A held step (defer.c): the set's keys not yet queued; a pushpull
     * of one of them clears its bit and wakes the comm thread only when
     * it was the last (defer_left).  NULL: every enqueue wakes it. */
    uint64_t *defer_missing;
    int defer_words, defer_left;
    int started, stopped;
    pthread_t thread;
    int init_status;         /* MPI_Init result, reported to create        */
    char init_msg[512];
    /* dist_async (set at create / by the comm thread before `started`):
     * ranks [0, n_workers) are workers, the last n_servers are servers. */
    int async;
    int role;                /* 0 worker, 1 server                         */
    int n_workers, n_servers;
    int64_t big_bound;       /* arrays of >= this many elements are sliced */
    int served;              /* a server's loop ended (status in init_*)   */
} kvd_store;

extern const mxp_host *kvd_host;

/* comm.c: start the communication thread (MPI_Init on it) and wait until
 * it is up; stop it (collective shutdown, MPI_Finalize unless broken). */
int kvd_comm_start(kvd_store *s);
void kvd_comm_stop(kvd_store *s);
/* Queue a request (the comm thread takes it at its next cycle).  When the
 * store is broken, fails the request at once. */
void kvd_enqueue(kvd_store *s, kvd_req *r);
/* Queue a synchronous request and wait for it; returns its status (with
 * host.set_error called on failure). */
int kvd_run_sync(kvd_store *s, kvd_req *r);
/* Complete a request (pushpull/push/pull: the callback, then free; others:
 * wake the waiter); mark the store broken (first cause wins). */
void kvd_finish(kvd_store *s, kvd_req *r, int status, const char *msg);
void kvd_set_broken(kvd_store *s, const char *msg);

/* ps_worker.c / ps_server.c: the dist_async communication thread (worker
 * or server by rank), started by kvd_comm_start when s->async. */
void *kvd_ps_main(void *comm);

#endif /* KVDIST_H */
