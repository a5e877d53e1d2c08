/* allreduce.c — the MPI side of kvstore-dist: setting MPI up and down on
 * the communication thread, the broadcast of init values, and the entry of
 * a bucket's sum (pipeline.c does it, on the keys' own memory).
 *
 * The sum is not MPI_Allreduce because MPI_Allreduce may associate the
 * additions differently on different ranks and for different message sizes
 * (Open MPI switches algorithms by size): pipeline.c always sums element i
 * as ((x0 + x1) + x2) ... on the rank owning it, so weights stay
 * bit-identical across workers and fusing keys into buckets changes no bit.
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

/* Open MPI's shared-memory transport (vader; "sm" from Open MPI 5) moves a
 * message above its eager limit with one copy by default: the receiver
 * reads the sender's memory with process_vm_readv (CMA), which pins every
 * 4 KiB page of the sender's buffer on each call.  On this machine (a VM)
 * the pinning costs more than the copy it saves: with the copy through
 * the transport's shared fragments instead (single_copy_mechanism none),
 * LeNet's 1.7 MB bucket, 2 workers of one core each, took a median
 * 183-204 us against 262-349 us with CMA (the MPI calls that do phase A's
 * copies 79-94 against 122-188 us), and a pushpull on shared memory
 * (bench-kvstore's median per run, 2 runs each) 1.64 MiB 128-133 against
 * 176-178 us, 16 MiB 6.7-7.1 against 5.4-5.7 GB/s, 64 MiB 7.2-7.9 against
 * 5.4-5.5 GB/s.  So that is the default here, set before MPI_Init only
 * where the user chose nothing: `mpirun --mca
 * btl_vader_single_copy_mechanism cma` (which mpirun passes to the ranks
 * as this very variable) keeps CMA.  Other MPI libraries are left alone.
 * setenv is not safe against a getenv on another thread at the same
 * moment: it runs once per process, while the store is being created,
 * before training starts. */
static void prefer_shared_fragments(void) {
    char v[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    if (MPI_Get_library_version(v, &len) != MPI_SUCCESS || strncmp(v, "Open MPI v", 10) != 0) return;
    int major = atoi(v + 10);
    if (getenv("OMPI_MCA_btl_vader_single_copy_mechanism") || getenv("OMPI_MCA_btl_sm_single_copy_mechanism")) return;
    setenv(major >= 5 ? "OMPI_MCA_btl_sm_single_copy_mechanism" : "OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
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
    prefer_shared_fragments();
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

int kvd_allreduce_bucket(kvd_comm *c, kvd_req **reqs, int n) {
    kvd_store *s = c->s;
    char what[192], lb[128];
    kvd_key_label(s, reqs[0]->key, lb, sizeof lb);
    snprintf(what, sizeof what, "sum of %s%s", lb, n > 1 ? " and the keys fused with it" : "");
    kvd_region stack[16], *rg = n <= 16 ? stack : malloc((size_t)n * sizeof *rg);
    if (!rg) return MXP_ENOMEM;
    for (int i = 0; i < n; i++) rg[i] = (kvd_region){reqs[i]->data, reqs[i]->count};
    double t0 = kvd_now();
    int rc = kvd_allreduce_regions(c, rg, n, reqs[0]->dtype, what);
    c->st.sums++;
    c->st.sum_s += kvd_now() - t0;
    if (rg != stack) free(rg);
    return rc;
}
