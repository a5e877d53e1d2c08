/* ps_server.c — a dist_async server: holds its slices of the keys (ps.h
 * says which) and runs the updater on them as pushes arrive, answering
 * pulls with the current values.  No barrier between workers: each push is
 * applied when it arrives (MXNet's async mode: updates of one key are
 * atomic, their order across workers is arrival order).
 *
 * The updater is an in-place update op named by the workers (set_updater:
 * sgd_update, sgd_mom_update, adam_update or rmsprop_update) run through
 * host.invoke on the slice, with the optimizer's state slices (zeros at the
 * first push) and mxp_optimizer's bookkeeping per key: wd only for string
 * keys ending in _weight / _gamma (and every int key), Adam's bias
 * correction folded into lr with the key's update count.  Without an
 * updater a push replaces the stored slice (the front end's "no updater"
 * rule).
 *
 * Liveness: a worker silent for 3/4 of MXP_KV_TIMEOUT is pinged (with
 * every peer); one that does not answer breaks the server with a message
 * naming it, and run_server returns that error (the process exits non-zero
 * and mpirun ends the job).  Not here: the worker side (ps_worker.c). */
#include "ps.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct ps_slot {
    int used;
    int64_t total, offset, count;
    int32_t dtype;
    char *name;              /* string key, NULL for int keys              */
    void *w;                 /* the slice's value                          */
    void *st[2];             /* optimizer states (created at first update) */
    int64_t updates;
} ps_slot;

typedef struct ps_reply {
    struct ps_reply *next;
    MPI_Request rq;
    char buf[];
} ps_reply;

/* Update ops the servers run and their number of state arrays. */
static const struct { const char *op; int n_state; } known_ops[] = {
    {"sgd_update", 0}, {"sgd_mom_update", 1}, {"adam_update", 2}, {"rmsprop_update", 1},
};

typedef struct server {
    kvd_comm *c;
    kvd_store *s;
    ps_slot *slots;
    int cap;
    char *blob;              /* updater: op\0k1\0v1\0...                   */
    const char *op;
    int n_state;
    const char **keys, **vals;
    int n_kw;
    ps_reply *replies;
    double *last_heard;      /* [n_workers]                                */
    char *stopped;           /* [n_workers]                                */
    int n_stopped;
    void *scratch;
    size_t scratch_bytes;
} server;

static void nap_us(long us) {
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

static int fail(server *sv, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(server *sv, int status, const char *fmt, ...) {
    char msg[512];
    int len = snprintf(msg, sizeof msg, "kvstore dist_async server rank %d (host %s): ", sv->s->rank,
                       sv->s->hosts[sv->s->rank]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + len, sizeof msg - (size_t)len, fmt, ap);
    va_end(ap);
    kvd_set_broken(sv->s, msg);
    return status;
}

static void *scratch(server *sv, size_t bytes) {
    if (bytes > sv->scratch_bytes) {
        void *p = realloc(sv->scratch, bytes);
        if (!p) return NULL;
        sv->scratch = p;
        sv->scratch_bytes = bytes;
    }
    return sv->scratch ? sv->scratch : (sv->scratch = malloc(1));
}

/* Receive src's next body message of `bytes` into buf. */
static int recv_body(server *sv, int src, void *buf, int64_t bytes, const char *what) {
    if (bytes > 0x7fffffffLL) return fail(sv, MXP_EUNSUPPORTED, "%s: a slice over 2 GiB (%lld bytes)", what, (long long)bytes);
    MPI_Request rq;
    MPI_Irecv(buf, (int)bytes, MPI_BYTE, src, TAG_REQ, sv->c->ps, &rq);
    return kvd_wait(sv->c, 1, &rq, what);
}

static void send_ack(server *sv, int dst, int32_t status, const char *msg) {
    ps_reply *r = calloc(1, sizeof *r + 4 + PS_ERR_BYTES);
    if (!r) return; /* the worker times out naming this server */
    memcpy(r->buf, &status, 4);
    snprintf(r->buf + 4, PS_ERR_BYTES, "%s", msg ? msg : "");
    MPI_Isend(r->buf, status ? 4 + PS_ERR_BYTES : 4, MPI_BYTE, dst, TAG_ACK, sv->c->ps, &r->rq);
    r->next = sv->replies;
    sv->replies = r;
}

/* Free the replies MPI is done with; with wait, wait for all of them. */
static int reap_replies(server *sv, int wait) {
    int rc = MXP_OK;
    for (ps_reply **pp = &sv->replies; *pp;) {
        ps_reply *r = *pp;
        int flag = 0;
        if (wait) rc = rc ? rc : kvd_wait(sv->c, 1, &r->rq, "sending replies");
        else MPI_Test(&r->rq, &flag, MPI_STATUS_IGNORE);
        if (wait || flag) {
            *pp = r->next;
            if (!wait || rc == MXP_OK) free(r);
        } else {
            pp = &r->next;
        }
    }
    return rc;
}

static ps_slot *slot_for(server *sv, const ps_hdr *h) {
    if (h->key < 0 || h->key >= sv->cap || !sv->slots[h->key].used) return NULL;
    ps_slot *sl = &sv->slots[h->key];
    return sl->offset == h->offset && sl->count == h->count && sl->dtype == h->dtype ? sl : NULL;
}

static int on_init(server *sv, int src, const ps_hdr *h) {
    size_t es = mxp_dtype_size(h->dtype);
    char *name = NULL;
    if (h->name_len > 0) {
        if (!(name = calloc(1, (size_t)h->name_len + 1))) return fail(sv, MXP_ENOMEM, "out of memory");
        int rc = recv_body(sv, src, name, h->name_len, "init (key name)");
        if (rc) return free(name), rc;
    }
    void *w = malloc(h->count ? (size_t)h->count * es : 1);
    if (!w) return free(name), fail(sv, MXP_ENOMEM, "out of memory for a key of %lld elements", (long long)h->count);
    int rc = h->count ? recv_body(sv, src, w, h->count * (int64_t)es, "init (value)") : MXP_OK;
    if (rc) return free(name), free(w), rc;
    if (h->key >= sv->cap) {
        int cap = sv->cap ? sv->cap : 64;
        while (cap <= h->key) cap *= 2;
        ps_slot *n = realloc(sv->slots, (size_t)cap * sizeof *n);
        if (!n) return free(name), free(w), fail(sv, MXP_ENOMEM, "out of memory");
        memset(n + sv->cap, 0, (size_t)(cap - sv->cap) * sizeof *n);
        sv->slots = n;
        sv->cap = cap;
    }
    ps_slot *sl = &sv->slots[h->key];
    if (sl->used) { /* the front end refuses a second init; keep the first */
        free(name), free(w);
        send_ack(sv, src, MXP_EEXIST, "the key is already initialised on the server");
        return MXP_OK;
    }
    *sl = (ps_slot){.used = 1, .total = h->total, .offset = h->offset, .count = h->count, .dtype = h->dtype,
                    .name = name, .w = w};
    send_ack(sv, src, MXP_OK, NULL);
    return MXP_OK;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static double kw_num(const server *sv, const char *key, double dflt) {
    for (int i = 0; i < sv->n_kw; i++)
        if (!strcmp(sv->keys[i], key)) return strtod(sv->vals[i], NULL);
    return dflt;
}

/* The updater on one slice: w = op(w, grad, states...). */
static int apply(server *sv, ps_slot *sl, void *grad) {
    size_t bytes = (size_t)sl->count * mxp_dtype_size(sl->dtype);
    if (!sv->op) {
        memcpy(sl->w, grad, bytes);
        return MXP_OK;
    }
    for (int k = 0; k < sv->n_state; k++)
        if (!sl->st[k] && !(sl->st[k] = calloc(1, bytes ? bytes : 1)))
            return fail(sv, MXP_ENOMEM, "out of memory for optimizer states of %lld elements", (long long)sl->count);
    sl->updates++;
    double lr = kw_num(sv, "lr", 0.01);
    if (!strcmp(sv->op, "adam_update")) {
        double t = (double)sl->updates;
        lr *= sqrt(1.0 - pow(kw_num(sv, "beta2", 0.999), t)) / (1.0 - pow(kw_num(sv, "beta1", 0.9), t));
    }
    int zero_wd = sl->name && !ends_with(sl->name, "_weight") && !ends_with(sl->name, "_gamma");
    enum { MAXKW = 24 };
    const char *keys[MAXKW + 2], *vals[MAXKW + 2];
    char lr_s[32];
    snprintf(lr_s, sizeof lr_s, "%.17g", lr);
    int n = 0;
    for (int i = 0; i < sv->n_kw && n < MAXKW; i++) {
        keys[n] = sv->keys[i];
        vals[n] = !strcmp(sv->keys[i], "lr") ? lr_s : zero_wd && !strcmp(sv->keys[i], "wd") ? "0" : sv->vals[i];
        n++;
    }
    mxp_tensor t[4];
    int64_t shape = sl->count;
    void *data[4] = {sl->w, grad, sl->st[0], sl->st[1]};
    for (int i = 0; i < 2 + sv->n_state; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].hdr = (mxp_header)MXP_HEADER(mxp_tensor);
        t[i].data = data[i];
        t[i].dtype = sl->dtype;
        t[i].ndim = 1;
        t[i].shape = &shape;
        t[i].device = (mxp_device){MXP_DEV_CPU, 0};
    }
    int rc = kvd_host->invoke(sv->op, (uint32_t)(2 + sv->n_state), t, 1, &t[0], keys, vals, (uint32_t)n);
    if (rc) {
        return fail(sv, rc, "the updater %s failed on key #%d (%lld elements, status %d)", sv->op,
                    (int)(sl - sv->slots), (long long)sl->count, rc);
    }
    return MXP_OK;
}

static int on_push(server *sv, int src, const ps_hdr *h) {
    ps_slot *sl = slot_for(sv, h);
    if (!sl) return fail(sv, MXP_EINTERNAL, "push of key #%d that this server does not hold (or of another slice)", h->key);
    size_t bytes = (size_t)h->count * mxp_dtype_size(h->dtype);
    void *g = scratch(sv, bytes);
    if (!g) return fail(sv, MXP_ENOMEM, "out of memory for a push of %lld elements", (long long)h->count);
    int rc = h->count ? recv_body(sv, src, g, (int64_t)bytes, "push (value)") : MXP_OK;
    return rc ? rc : apply(sv, sl, g);
}

static int on_pull(server *sv, int src, const ps_hdr *h) {
    ps_slot *sl = slot_for(sv, h);
    if (!sl) return fail(sv, MXP_EINTERNAL, "pull of key #%d that this server does not hold (or of another slice)", h->key);
    size_t bytes = (size_t)h->count * mxp_dtype_size(h->dtype);
    ps_reply *r = malloc(sizeof *r + bytes);
    if (!r) return fail(sv, MXP_ENOMEM, "out of memory for a pull of %lld elements", (long long)h->count);
    memcpy(r->buf, sl->w, bytes); /* a copy: a later push may update w while this is in flight */
    MPI_Isend(r->buf, (int)bytes, MPI_BYTE, src, TAG_DATA, sv->c->ps, &r->rq);
    r->next = sv->replies;
    sv->replies = r;
    return MXP_OK;
}

static int on_updater(server *sv, int src, const ps_hdr *h) {
    char *blob = calloc(1, (size_t)h->name_len + 2);
    if (!blob) return fail(sv, MXP_ENOMEM, "out of memory");
    int rc = h->name_len ? recv_body(sv, src, blob, h->name_len, "set_updater") : MXP_OK;
    if (rc) return free(blob), rc;
    int n_state = -1;
    for (size_t i = 0; i < sizeof known_ops / sizeof *known_ops; i++)
        if (!strcmp(blob, known_ops[i].op)) n_state = known_ops[i].n_state;
    if (n_state < 0) {
        char msg[PS_ERR_BYTES];
        snprintf(msg, sizeof msg, "the servers run sgd_update, sgd_mom_update, adam_update or rmsprop_update, not '%s'",
                 blob);
        free(blob);
        send_ack(sv, src, MXP_EUNSUPPORTED, msg);
        return MXP_OK;
    }
    /* Split op\0k1\0v1\0... into arrays (pointing into blob). */
    int n = 0;
    for (int64_t i = 0; i < h->name_len; i++) n += blob[i] == 0;
    const char **kv = calloc((size_t)n + 1, sizeof *kv);
    if (!kv) return free(blob), fail(sv, MXP_ENOMEM, "out of memory");
    int m = 0;
    for (char *p = blob + strlen(blob) + 1; p < blob + h->name_len; p += strlen(p) + 1) kv[m++] = p;
    free(sv->blob);
    free(sv->keys);
    free(sv->vals);
    sv->blob = blob;
    sv->op = blob;
    sv->n_state = n_state;
    sv->n_kw = m / 2;
    sv->keys = calloc((size_t)sv->n_kw + 1, sizeof *sv->keys);
    sv->vals = calloc((size_t)sv->n_kw + 1, sizeof *sv->vals);
    if (!sv->keys || !sv->vals) return free(kv), fail(sv, MXP_ENOMEM, "out of memory");
    for (int i = 0; i < sv->n_kw; i++) sv->keys[i] = kv[2 * i], sv->vals[i] = kv[2 * i + 1];
    free(kv);
    send_ack(sv, src, MXP_OK, NULL);
    return MXP_OK;
}

/* Ping the peers when a worker that has not stopped was silent for 3/4 of
 * the timeout; a silent peer breaks the server. */
static int check_workers(server *sv, double *last_probe) {
    kvd_store *s = sv->s;
    double now = kvd_now(), limit = 0.75 * s->timeout_ms / 1000.0;
    if (now - *last_probe < limit) return MXP_OK;
    int quiet = 0;
    for (int r = 0; r < s->n_workers; r++) quiet |= !sv->stopped[r] && now - sv->last_heard[r] > limit;
    if (!quiet) return MXP_OK;
    char msg[512];
    snprintf(msg, sizeof msg, "kvstore dist_async server rank %d (host %s): no request from some workers for %.1f s",
             s->rank, s->hosts[s->rank], limit);
    int silent = kvd_probe_peers(sv->c, 0.2 * s->timeout_ms / 1000.0, msg, sizeof msg);
    *last_probe = kvd_now();
    if (!silent) return MXP_OK;
    kvd_set_broken(s, msg);
    return MXP_ETIMEDOUT;
}

int ps_serve(kvd_comm *c) {
    kvd_store *s = c->s;
    server sv = {.c = c, .s = s};
    sv.last_heard = calloc((size_t)s->n_workers, sizeof *sv.last_heard);
    sv.stopped = calloc((size_t)s->n_workers, 1);
    if (!sv.last_heard || !sv.stopped) {
        free(sv.last_heard), free(sv.stopped);
        kvd_set_broken(s, "kvstore dist_async server: out of memory");
        return MXP_ENOMEM;
    }
    double t0 = kvd_now(), last_probe = t0;
    for (int r = 0; r < s->n_workers; r++) sv.last_heard[r] = t0;
    int rc = MXP_OK;
    long idle = 0;
    while (rc == MXP_OK && sv.n_stopped < s->n_workers) {
        kvd_serve_pings(c);
        reap_replies(&sv, 0);
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_REQ, c->ps, &flag, &st) != MPI_SUCCESS) {
            rc = fail(&sv, MXP_ENET, "MPI_Iprobe failed");
            break;
        }
        if (!flag) {
            rc = check_workers(&sv, &last_probe);
            if (++idle > 200) nap_us(idle > 5000 ? 200 : 20);
            continue;
        }
        idle = 0;
        int src = st.MPI_SOURCE;
        ps_hdr h;
        MPI_Recv(&h, (int)sizeof h, MPI_BYTE, src, TAG_REQ, c->ps, MPI_STATUS_IGNORE);
        if (src < s->n_workers) sv.last_heard[src] = kvd_now();
        switch (h.op) {
        case PS_INIT: rc = on_init(&sv, src, &h); break;
        case PS_PUSH: rc = on_push(&sv, src, &h); break;
        case PS_PULL: rc = on_pull(&sv, src, &h); break;
        case PS_UPDATER: rc = on_updater(&sv, src, &h); break;
        case PS_STOP:
            if (src < s->n_workers && !sv.stopped[src]) sv.stopped[src] = 1, sv.n_stopped++;
            break;
        default: rc = fail(&sv, MXP_EINTERNAL, "unknown request %d from rank %d", h.op, src);
        }
    }
    if (rc == MXP_OK) rc = reap_replies(&sv, 1);
    if (rc == MXP_OK) {
        /* Every process leaves together (MPI_Finalize is collective). */
        MPI_Request rq;
        MPI_Ibarrier(c->ctrl, &rq);
        rc = ps_wait_alive(c, 1, &rq, "shutdown (waiting for every worker and server)");
    }
    for (int k = 0; k < sv.cap; k++) {
        free(sv.slots[k].name), free(sv.slots[k].w);
        free(sv.slots[k].st[0]), free(sv.slots[k].st[1]);
    }
    while (sv.replies) { /* only after a failure: MPI may still hold them, so leak rather than free */
        ps_reply *r = sv.replies;
        sv.replies = r->next;
        if (rc == MXP_OK) free(r);
    }
    free(sv.slots), free(sv.blob), free(sv.keys), free(sv.vals);
    free(sv.last_heard), free(sv.stopped), free(sv.scratch);
    return rc;
}
