/* allreduce.c — the MPI side of kvstore-dist: setting MPI up and down on
 * the communication thread, the broadcast of init values, and the sum of a
 * bucket of keys over all ranks.
 *
 * The sum is a reduce-scatter by all-to-all followed by an all-gather (the
 * same bytes on the wire as a ring allreduce: 2(N-1)/N of the buffer per
 * rank).  It is not MPI_Allreduce because MPI_Allreduce may associate the
 * additions differently on different ranks and for different message sizes
 * (Open MPI switches algorithms by size): here element i is always summed
 * as ((x0 + x1) + x2) ... on the rank owning its chunk, so weights stay
 * bit-identical across workers and fusing keys into buckets changes no bit.
 * Counts passed to MPI are int: a chunk over 2^31 - 1 elements is refused.
 *
 * Not here: negotiation, timeouts (comm.c). */
#include "ps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

MPI_Datatype kvd_mpi_type(int32_t dtype) {
    switch (dtype) {
    case MXP_DTYPE_F32: return MPI_FLOAT;
    case MXP_DTYPE_F64: return MPI_DOUBLE;
    case MXP_DTYPE_I32: return MPI_INT32_T;
    case MXP_DTYPE_I64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL;
    }
}

int kvd_mpi_setup(kvd_comm *c) {
    kvd_store *s = c->s;
    int provided = 0, inited = 0;
    MPI_Initialized(&inited);
    if (inited) {
        snprintf(s->init_msg, sizeof s->init_msg, "kvstore dist_sync: MPI is already initialised in this process "
                 "(one dist store per process, created once)");
        return MXP_EMISUSE;
    }
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        snprintf(s->init_msg, sizeof s->init_msg, "kvstore dist_sync: MPI_Init_thread failed (run under mpirun)");
        return MXP_ENET;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &s->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &s->size);
    MPI_Comm_dup(MPI_COMM_WORLD, &c->data);
    MPI_Comm_dup(MPI_COMM_WORLD, &c->ctrl);
    MPI_Comm_set_errhandler(c->data, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(c->ctrl, MPI_ERRORS_RETURN);
    enum { HN = 64 };
    char me[HN] = "";
    gethostname(me, HN - 1);
    char *all = calloc((size_t)s->size, HN);
    s->hosts = calloc((size_t)s->size, sizeof *s->hosts);
    s->pids = calloc((size_t)s->size, sizeof *s->pids);
    if (!all || !s->hosts || !s->pids) {
        free(all);
        snprintf(s->init_msg, sizeof s->init_msg, "kvstore dist_sync: out of memory");
        return MXP_ENOMEM;
    }
    int pid = (int)getpid();
    MPI_Request rq[2];
    MPI_Iallgather(me, HN, MPI_CHAR, all, HN, MPI_CHAR, c->ctrl, &rq[0]);
    MPI_Iallgather(&pid, 1, MPI_INT, s->pids, 1, MPI_INT, c->ctrl, &rq[1]);
    int rc = kvd_wait(c, 2, rq, "start-up (exchange of host names)");
    for (int r = 0; rc == MXP_OK && r < s->size; r++) {
        all[(size_t)r * HN + HN - 1] = 0;
        if (!(s->hosts[r] = strdup(all + (size_t)r * HN))) rc = MXP_ENOMEM;
    }
    free(all);
    if (rc) snprintf(s->init_msg, sizeof s->init_msg, "%s", s->broken_msg[0] ? s->broken_msg : "out of memory");
    return rc;
}

void kvd_mpi_teardown(kvd_comm *c) {
    MPI_Comm_free(&c->data);
    MPI_Comm_free(&c->ctrl);
    MPI_Finalize();
}

int kvd_bcast(kvd_comm *c, void *data, int64_t count, int32_t dtype, const char *what) {
    MPI_Datatype t = kvd_mpi_type(dtype);
    if (t == MPI_DATATYPE_NULL || count > 0x7fffffff) return MXP_EUNSUPPORTED;
    MPI_Request rq;
    MPI_Ibcast(data, (int)count, t, 0, c->data, &rq);
    return kvd_wait(c, 1, &rq, what);
}

static int grow_scratch(kvd_comm *c, size_t bytes) {
    if (bytes <= c->scratch_bytes) return MXP_OK;
    void *p = realloc(c->scratch, bytes);
    if (!p) return MXP_ENOMEM;
    c->scratch = p;
    c->scratch_bytes = bytes;
    return MXP_OK;
}

#define SUM_CHUNKS(T)                                                        \
    do {                                                                     \
        T *dst = (T *)data + start[me];                                      \
        const T *src = recv;                                                 \
        for (int64_t i = 0; i < mine; i++) {                                 \
            T acc = src[i];                                                  \
            for (int r = 1; r < n; r++) acc += src[(int64_t)r * mine + i];   \
            dst[i] = acc;                                                    \
        }                                                                    \
    } while (0)

/* Sum in place, with `recv` scratch space of size * chunk elements. */
static int allreduce_with(kvd_comm *c, void *data, int64_t count, int32_t dtype, void *recv, const char *what) {
    kvd_store *s = c->s;
    int n = s->size, me = s->rank;
    MPI_Datatype t = kvd_mpi_type(dtype);
    int *cnt = calloc((size_t)n * 4, sizeof *cnt);
    int64_t *start = calloc((size_t)n + 1, sizeof *start);
    if (!cnt || !start) {
        free(cnt), free(start);
        return MXP_ENOMEM;
    }
    int *dsp = cnt + n, *rcnt = cnt + 2 * n, *rdsp = cnt + 3 * n;
    for (int r = 0; r <= n; r++) start[r] = count * r / n;
    int64_t mine = start[me + 1] - start[me];
    for (int r = 0; r < n; r++) {
        cnt[r] = (int)(start[r + 1] - start[r]);
        dsp[r] = (int)start[r];
        rcnt[r] = (int)mine;
        rdsp[r] = (int)(mine * r);
    }
    MPI_Request rq;
    MPI_Ialltoallv(data, cnt, dsp, t, recv, rcnt, rdsp, t, c->data, &rq);
    int rc = kvd_wait(c, 1, &rq, what);
    if (rc == MXP_OK) {
        switch (dtype) {
        case MXP_DTYPE_F32: SUM_CHUNKS(float); break;
        case MXP_DTYPE_F64: SUM_CHUNKS(double); break;
        case MXP_DTYPE_I32: SUM_CHUNKS(int32_t); break;
        default: SUM_CHUNKS(int64_t); break;
        }
        MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, cnt, dsp, t, c->data, &rq);
        rc = kvd_wait(c, 1, &rq, what);
    }
    free(cnt);
    free(start);
    return rc;
}

int kvd_allreduce(kvd_comm *c, void *data, int64_t count, int32_t dtype, const char *what) {
    kvd_store *s = c->s;
    if (s->size == 1 || count == 0) return MXP_OK;
    size_t es = mxp_dtype_size(dtype);
    int64_t chunk = (count + s->size - 1) / s->size;
    if (kvd_mpi_type(dtype) == MPI_DATATYPE_NULL || count > 0x7fffffffLL) return MXP_EUNSUPPORTED;
    if (grow_scratch(c, (size_t)chunk * (size_t)s->size * es)) return MXP_ENOMEM;
    return allreduce_with(c, data, count, dtype, c->scratch, what);
}

int kvd_allreduce_bucket(kvd_comm *c, kvd_req **reqs, int n) {
    kvd_store *s = c->s;
    char what[192], lb[128];
    kvd_key_label(s, reqs[0]->key, lb, sizeof lb);
    snprintf(what, sizeof what, "sum of %s%s", lb, n > 1 ? " and the keys fused with it" : "");
    if (n == 1) return kvd_allreduce(c, reqs[0]->data, reqs[0]->count, reqs[0]->dtype, what);
    size_t es = mxp_dtype_size(reqs[0]->dtype);
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += reqs[i]->count;
    int64_t chunk = (total + s->size - 1) / s->size;
    size_t fused = (size_t)total * es, recv = (size_t)chunk * (size_t)s->size * es;
    if (total > 0x7fffffffLL) return MXP_EUNSUPPORTED;
    if (grow_scratch(c, fused + recv)) return MXP_ENOMEM;
    char *buf = c->scratch;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        memcpy(buf + off, reqs[i]->data, (size_t)reqs[i]->count * es);
        off += (size_t)reqs[i]->count * es;
    }
    int rc = s->size == 1 ? MXP_OK : allreduce_with(c, buf, total, reqs[0]->dtype, buf + fused, what);
    off = 0;
    for (int i = 0; rc == MXP_OK && i < n; i++) {
        memcpy(reqs[i]->data, buf + off, (size_t)reqs[i]->count * es);
        off += (size_t)reqs[i]->count * es;
    }
    return rc;
}
