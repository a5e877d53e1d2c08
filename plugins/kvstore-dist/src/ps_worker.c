/* ps_worker.c — the dist_async communication thread: MPI set-up, the
 * role of this rank (ps.h), and on a worker the loop that turns queued
 * requests into messages to the servers.  A server rank runs ps_serve
 * (ps_server.c) instead.
 *
 * Worker requests:
 *   push, pull   asynchronous: posted at once (no negotiation, no barrier
 *                with other workers) and completed, in any order, when MPI
 *                is done with them; each gets 3/4 of MXP_KV_TIMEOUT, then
 *                the peers are pinged and the silent ones named.
 *   init         collective over the workers: sizes checked, worker 0
 *                sends its value to the owning servers and waits for their
 *                acks, tells the other workers the outcome, then every
 *                worker pulls the value.
 *   set_updater  worker 0 sends it to every server, waits for their acks
 *                and tells the other workers, so no push reaches a server
 *                before its updater.
 *   barrier      the workers only (servers take no part).
 *   shutdown     STOP to every server, then every rank meets in a final
 *                barrier before MPI_Finalize.
 * Synchronous requests run after the pushes and pulls queued before them
 * are done, so a push before a barrier has left this process.
 * Invariant: every MPI call of the process happens on this thread. */
#include "ps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void nap_us(long us) {
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

int ps_wait_alive(kvd_comm *c, int n, MPI_Request *reqs, const char *what) {
    kvd_store *s = c->s;
    double t0 = kvd_now(), last = t0, period = 0.75 * s->timeout_ms / 1000.0;
    for (long spin = 0;; spin++) {
        int flag = 0;
        if (MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s rank %d (host %s): %s failed in MPI", kvd_name(s), s->rank,
                     s->hosts[s->rank], what);
            kvd_probe_peers(c, 0.2 * s->timeout_ms / 1000.0, msg, sizeof msg);
            kvd_set_broken(s, msg);
            return MXP_ENET;
        }
        if (flag) return MXP_OK;
        if ((spin & 15) == 0) kvd_serve_pings(c);
        double now = kvd_now();
        if (now - last > period) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s rank %d (host %s): %s waited %.1f s", kvd_name(s), s->rank,
                     s->hosts[s->rank], what, now - t0);
            if (kvd_probe_peers(c, 0.2 * s->timeout_ms / 1000.0, msg, sizeof msg)) {
                kvd_set_broken(s, msg);
                return MXP_ETIMEDOUT;
            }
            last = kvd_now(); /* everyone is alive: a slower peer, keep waiting */
        }
        if (spin > 200) nap_us(spin > 2000 ? 200 : 20);
    }
}

/* ------------------------------------------------------------ set-up */

static int ps_setup(kvd_comm *c) {
    kvd_store *s = c->s;
    int S = s->n_servers;
    if (S < 1 || S >= s->size) {
        snprintf(s->init_msg, sizeof s->init_msg,
                 "kvstore dist_async: %d ranks and MXP_KV_NUM_SERVERS=%d: there must be at least one server and one "
                 "worker (the last MXP_KV_NUM_SERVERS ranks serve, the others train; e.g. mpirun -np 3 with 1 "
                 "server gives 2 workers)", s->size, S);
        return MXP_EINVAL;
    }
    s->n_workers = s->size - S;
    s->role = s->rank >= s->n_workers;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &c->ps) != MPI_SUCCESS ||
        MPI_Comm_split(MPI_COMM_WORLD, s->role ? MPI_UNDEFINED : 0, s->rank, &c->workers) != MPI_SUCCESS) {
        snprintf(s->init_msg, sizeof s->init_msg, "kvstore dist_async: cannot create the communicators");
        return MXP_ENET;
    }
    MPI_Comm_set_errhandler(c->ps, MPI_ERRORS_RETURN);
    if (c->workers != MPI_COMM_NULL) MPI_Comm_set_errhandler(c->workers, MPI_ERRORS_RETURN);
    return MXP_OK;
}

/* ------------------------------------------------------------ push / pull */

typedef struct ps_op {
    struct ps_op *next;
    kvd_req *r;
    int n_rq;
    double t0;
    MPI_Request *rq;         /* [2 * parts]                                */
    ps_hdr *hdr;             /* [parts]                                    */
} ps_op;

/* Post the messages of a push or pull (init refused slices over 2 GiB);
 * NULL when out of memory. */
static ps_op *start_op(kvd_comm *c, kvd_req *r) {
    kvd_store *s = c->s;
    int S = s->n_servers, server[S > 0 ? S : 1];
    int64_t off[S > 0 ? S : 1], cnt[S > 0 ? S : 1];
    int parts = ps_slices(s, r->key, r->count, server, off, cnt);
    ps_op *op = calloc(1, sizeof *op + (size_t)parts * (2 * sizeof(MPI_Request) + sizeof(ps_hdr)));
    if (!op) return NULL;
    op->rq = (MPI_Request *)(op + 1);
    op->hdr = (ps_hdr *)(op->rq + 2 * parts);
    op->r = r;
    op->t0 = kvd_now();
    size_t es = mxp_dtype_size(r->dtype);
    for (int i = 0; i < parts; i++) {
        int dst = ps_server_rank(s, server[i]);
        ps_hdr *h = &op->hdr[i];
        *h = (ps_hdr){.op = r->kind == KVD_PUSH ? PS_PUSH : PS_PULL, .key = r->key, .dtype = r->dtype,
                      .total = r->count, .offset = off[i], .count = cnt[i]};
        char *slice = (char *)r->data + (size_t)off[i] * es;
        int bytes = (int)((size_t)cnt[i] * es);
        if (r->kind == KVD_PULL) MPI_Irecv(slice, bytes, MPI_BYTE, dst, TAG_DATA, c->ps, &op->rq[op->n_rq++]);
        MPI_Isend(h, (int)sizeof *h, MPI_BYTE, dst, TAG_REQ, c->ps, &op->rq[op->n_rq++]);
        if (r->kind == KVD_PUSH && bytes) MPI_Isend(slice, bytes, MPI_BYTE, dst, TAG_REQ, c->ps, &op->rq[op->n_rq++]);
    }
    return op;
}

/* Poll the in-flight operations; completes the finished ones.  Returns an
 * error (store broken) when one failed or ran out of time. */
static int poll_ops(kvd_comm *c, ps_op **list) {
    kvd_store *s = c->s;
    double limit = 0.75 * s->timeout_ms / 1000.0;
    for (ps_op **pp = list; *pp;) {
        ps_op *op = *pp;
        int flag = 0, err = MPI_Testall(op->n_rq, op->rq, &flag, MPI_STATUSES_IGNORE) != MPI_SUCCESS;
        double el = kvd_now() - op->t0;
        if (err || (!flag && el > limit)) {
            char msg[512], lb[128];
            kvd_key_label(s, op->r->key, lb, sizeof lb);
            snprintf(msg, sizeof msg, "%s rank %d (host %s): %s of %s %s", kvd_name(s), s->rank, s->hosts[s->rank],
                     op->r->kind == KVD_PUSH ? "push" : "pull", lb, err ? "failed in MPI" : "got no answer from its servers");
            kvd_probe_peers(c, 0.2 * s->timeout_ms / 1000.0, msg, sizeof msg);
            kvd_set_broken(s, msg);
            return err ? MXP_ENET : MXP_ETIMEDOUT;
        }
        if (flag) {
            *pp = op->next;
            kvd_finish(s, op->r, MXP_OK, NULL);
            free(op);
        } else {
            pp = &op->next;
        }
    }
    return MXP_OK;
}

static int drain_ops(kvd_comm *c, ps_op **list) {
    for (long spin = 0; *list; spin++) {
        int rc = poll_ops(c, list);
        if (rc) return rc;
        if ((spin & 15) == 0) kvd_serve_pings(c);
        if (*list && spin > 200) nap_us(20);
    }
    return MXP_OK;
}

/* ------------------------------------------------------------ sync requests */

/* Worker 0 sends hdr (+ body) to every server in `servers` and collects
 * their acks; then every worker learns the outcome (status and message). */
static int send_and_ack(kvd_comm *c, int n, const int *servers, const ps_hdr *hdrs, const void *body,
                        int64_t body_len, void *const *data, const int64_t *data_bytes, char *err, size_t cap,
                        const char *what) {
    kvd_store *s = c->s;
    struct { int32_t status; char msg[PS_ERR_BYTES]; } outcome = {0, ""};
    int rc = MXP_OK;
    if (s->rank == 0) {
        MPI_Request *rq = calloc((size_t)n * 5, sizeof *rq);
        char *acks = calloc((size_t)n, 4 + PS_ERR_BYTES);
        if (!rq || !acks) {
            free(rq), free(acks);
            return MXP_ENOMEM;
        }
        int k = 0;
        for (int i = 0; i < n; i++) {
            int dst = ps_server_rank(s, servers[i]);
            MPI_Irecv(acks + (size_t)i * (4 + PS_ERR_BYTES), 4 + PS_ERR_BYTES, MPI_BYTE, dst, TAG_ACK, c->ps, &rq[k++]);
            MPI_Isend(&hdrs[i], (int)sizeof hdrs[i], MPI_BYTE, dst, TAG_REQ, c->ps, &rq[k++]);
            if (body_len) MPI_Isend(body, (int)body_len, MPI_BYTE, dst, TAG_REQ, c->ps, &rq[k++]);
            if (data && data_bytes[i]) MPI_Isend(data[i], (int)data_bytes[i], MPI_BYTE, dst, TAG_REQ, c->ps, &rq[k++]);
        }
        rc = kvd_wait(c, k, rq, what);
        for (int i = 0; rc == MXP_OK && i < n && !outcome.status; i++) {
            const char *a = acks + (size_t)i * (4 + PS_ERR_BYTES);
            memcpy(&outcome.status, a, 4);
            if (outcome.status)
                snprintf(outcome.msg, sizeof outcome.msg, "server rank %d: %.*s", ps_server_rank(s, servers[i]),
                         PS_ERR_BYTES - 1, a + 4);
        }
        free(rq), free(acks);
        if (rc) return rc;
    }
    if (s->n_workers > 1) {
        MPI_Request rq;
        MPI_Ibcast(&outcome, (int)sizeof outcome, MPI_BYTE, 0, c->workers, &rq);
        if ((rc = ps_wait_alive(c, 1, &rq, what))) return rc;
    }
    if (outcome.status) snprintf(err, cap, "%s: %s", kvd_name(s), outcome.msg);
    return outcome.status;
}

static int do_init(kvd_comm *c, kvd_req *r, char *err, size_t cap) {
    kvd_store *s = c->s;
    int64_t mine[4] = {r->count, -r->count, r->dtype, -r->dtype}, agg[4];
    MPI_Request rq;
    MPI_Iallreduce(mine, agg, 4, MPI_INT64_T, MPI_MAX, c->workers, &rq);
    int rc = ps_wait_alive(c, 1, &rq, "init (size check)");
    if (rc) return rc;
    if (agg[0] != -agg[1] || agg[2] != -agg[3]) {
        snprintf(err, cap, "%s: init of key #%d: workers disagree on its size or dtype (%lld..%lld elements, dtype "
                 "%lld..%lld): every worker must init the same keys in the same order", kvd_name(s), r->key,
                 (long long)-agg[1], (long long)agg[0], (long long)-agg[3], (long long)agg[2]);
        return MXP_ESHAPE;
    }
    int S = s->n_servers, server[S];
    int64_t off[S], cnt[S], bytes[S];
    void *data[S];
    ps_hdr hdr[S];
    int parts = ps_slices(s, r->key, r->count, server, off, cnt);
    size_t es = mxp_dtype_size(r->dtype);
    char name[256] = "";
    pthread_mutex_lock(&s->lock);
    if (s->keys[r->key].is_str) snprintf(name, sizeof name, "%s", s->keys[r->key].skey);
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < parts; i++) {
        bytes[i] = cnt[i] * (int64_t)es;
        if (bytes[i] > 0x7fffffffLL) {
            snprintf(err, cap, "%s: init of key #%d: a slice of %lld bytes is over MPI's 2 GiB message (raise "
                     "MXP_KV_NUM_SERVERS)", kvd_name(s), r->key, (long long)bytes[i]);
            return MXP_EUNSUPPORTED;
        }
        data[i] = (char *)r->data + (size_t)off[i] * es;
        hdr[i] = (ps_hdr){.op = PS_INIT, .key = r->key, .dtype = r->dtype, .name_len = (int32_t)strlen(name),
                          .total = r->count, .offset = off[i], .count = cnt[i]};
    }
    rc = send_and_ack(c, parts, server, hdr, name, (int64_t)strlen(name), data, bytes, err, cap, "init (to the servers)");
    if (rc) return rc;
    pthread_mutex_lock(&s->lock);
    s->keys[r->key].count = r->count;
    s->keys[r->key].dtype = r->dtype;
    s->n_keys = r->key + 1;
    pthread_mutex_unlock(&s->lock);
    /* Every worker (0 included) now pulls the servers' value. */
    kvd_req pull = *r;
    pull.kind = KVD_PULL;
    ps_op *op = start_op(c, &pull);
    if (!op) return MXP_ENOMEM;
    rc = kvd_wait(c, op->n_rq, op->rq, "init (pull)");
    free(op);
    return rc;
}

static int do_updater(kvd_comm *c, kvd_req *r, char *err, size_t cap) {
    kvd_store *s = c->s;
    int S = s->n_servers, server[S];
    ps_hdr hdr[S];
    for (int i = 0; i < S; i++) {
        server[i] = i;
        hdr[i] = (ps_hdr){.op = PS_UPDATER, .key = -1, .name_len = (int32_t)r->blob_len};
    }
    return send_and_ack(c, S, server, hdr, r->blob, r->blob_len, NULL, NULL, err, cap, "set_updater");
}

static int do_stop(kvd_comm *c) {
    kvd_store *s = c->s;
    int S = s->n_servers;
    ps_hdr h = {.op = PS_STOP, .key = -1};
    MPI_Request rq[S];
    for (int i = 0; i < S; i++) MPI_Isend(&h, (int)sizeof h, MPI_BYTE, ps_server_rank(s, i), TAG_REQ, c->ps, &rq[i]);
    int rc = kvd_wait(c, S, rq, "shutdown (stopping the servers)");
    if (rc) return rc;
    MPI_Request b;
    MPI_Ibarrier(c->ctrl, &b);
    return ps_wait_alive(c, 1, &b, "shutdown (waiting for every worker and server)");
}

/* ------------------------------------------------------------ the loop */

static kvd_req *take(kvd_store *s, int block_ms) {
    pthread_mutex_lock(&s->lock);
    if (!s->head && block_ms > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)block_ms * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&s->cond, &s->lock, &ts);
    }
    kvd_req *r = s->head;
    s->head = s->tail = NULL;
    pthread_mutex_unlock(&s->lock);
    return r;
}

static void fail_list(kvd_store *s, kvd_req *r, int status, const char *msg) {
    while (r) {
        kvd_req *n = r->next;
        kvd_finish(s, r, status, msg);
        r = n;
    }
}

static int worker_loop(kvd_comm *c) {
    kvd_store *s = c->s;
    ps_op *inflight = NULL;
    kvd_req *queue = NULL, *shutdown = NULL;
    int rc = MXP_OK;
    while (rc == MXP_OK && !shutdown) {
        kvd_req *got = take(s, inflight || queue ? 0 : 1);
        kvd_req **tail = &queue;
        while (*tail) tail = &(*tail)->next;
        *tail = got;
        kvd_serve_pings(c);
        while (rc == MXP_OK && queue && !shutdown) {
            kvd_req *r = queue;
            queue = r->next;
            r->next = NULL;
            if (r->kind == KVD_PUSH || r->kind == KVD_PULL) {
                ps_op *op = start_op(c, r);
                if (!op) {
                    kvd_set_broken(s, "kvstore dist_async: out of memory in the communication thread");
                    kvd_finish(s, r, MXP_ENOMEM, s->broken_msg);
                    rc = MXP_ENOMEM;
                    break;
                }
                op->next = inflight;
                inflight = op;
                continue;
            }
            if ((rc = drain_ops(c, &inflight))) {
                kvd_finish(s, r, rc, s->broken_msg);
                break;
            }
            char err[512] = "";
            int st = MXP_OK;
            if (r->kind == KVD_INIT) st = do_init(c, r, err, sizeof err);
            else if (r->kind == KVD_UPDATER) st = do_updater(c, r, err, sizeof err);
            else if (r->kind == KVD_BARRIER) {
                MPI_Request b;
                MPI_Ibarrier(c->workers, &b);
                st = ps_wait_alive(c, 1, &b, "barrier");
            } else if (r->kind == KVD_SHUTDOWN) {
                shutdown = r;
                break;
            } else {
                st = MXP_EINTERNAL;
                snprintf(err, sizeof err, "kvstore dist_async: request kind %d is not for this store", r->kind);
            }
            if (st && !err[0]) { /* a transport failure: the store is broken */
                kvd_finish(s, r, st, s->broken_msg);
                rc = st;
            } else {
                kvd_finish(s, r, st, err[0] ? err : NULL); /* a usage error leaves the store usable */
            }
        }
        if (rc == MXP_OK) rc = poll_ops(c, &inflight);
    }
    if (rc == MXP_OK && shutdown) {
        rc = drain_ops(c, &inflight);
        if (rc == MXP_OK) rc = do_stop(c);
    }
    char msg[512];
    pthread_mutex_lock(&s->lock);
    snprintf(msg, sizeof msg, "%s", s->broken ? s->broken_msg : "kvstore dist_async: the store was shut down");
    s->stopped = 1; /* later requests fail in kvd_enqueue */
    kvd_req *late = s->head;
    s->head = s->tail = NULL;
    pthread_mutex_unlock(&s->lock);
    while (inflight) { /* only after a failure; MPI may still hold their buffers */
        ps_op *op = inflight;
        inflight = op->next;
        kvd_finish(s, op->r, rc ? rc : MXP_ECANCELED, msg);
    }
    fail_list(s, queue, rc ? rc : MXP_ECANCELED, msg);
    fail_list(s, late, rc ? rc : MXP_ECANCELED, msg);
    if (shutdown) kvd_finish(s, shutdown, rc, rc ? msg : NULL);
    return rc;
}

void *kvd_ps_main(void *arg) {
    kvd_comm *c = arg;
    kvd_store *s = c->s;
    c->ps = c->workers = MPI_COMM_NULL;
    int rc = kvd_mpi_setup(c);
    if (rc == MXP_OK && (rc = ps_setup(c))) {
        /* A configuration every rank shares (the rank count, the
         * environment): all fail alike, so MPI can end cleanly. */
        if (c->ps != MPI_COMM_NULL) MPI_Comm_free(&c->ps);
        if (c->workers != MPI_COMM_NULL) MPI_Comm_free(&c->workers);
        kvd_mpi_teardown(c);
    }
    pthread_mutex_lock(&s->lock);
    s->init_status = rc;
    s->started = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (rc) return NULL;
    if (s->role) {
        rc = ps_serve(c);
        pthread_mutex_lock(&s->lock);
        s->served = 1;
        s->stopped = 1;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
    } else {
        rc = worker_loop(c);
    }
    if (rc == MXP_OK) { /* after a failure MPI_Finalize would wait for the dead peer */
        MPI_Comm_free(&c->ps);
        if (c->workers != MPI_COMM_NULL) MPI_Comm_free(&c->workers);
        kvd_mpi_teardown(c);
    }
    return NULL;
}
