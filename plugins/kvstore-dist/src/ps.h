/* ps.h — dist_async's parameter-server protocol on MPI point-to-point,
 * shared by the worker side (ps_worker.c) and the server side
 * (ps_server.c).  Everything here runs on the communication thread.
 *
 * Roles by rank: with N ranks and S = MXP_KV_NUM_SERVERS (default 1),
 * ranks 0..N-S-1 are workers (worker rank = MPI rank) and the last S ranks
 * are servers.  Ownership (ps-lite / MXNet's EncodeDefaultKey): a key of
 * fewer than big_bound elements (MXP_KV_BIGARRAY_BOUND, default 1e6, as
 * MXNET_KVSTORE_BIGARRAY_BOUND) lives whole on server (k * 9973) % S, k the
 * key's dense index; a larger one is cut into S contiguous slices, slice i
 * = [round(n*i/S), round(n*(i+1)/S)) on server i.
 *
 * Messages on comm `ps`, all with tag TAG_REQ from a worker to a server:
 * a header, then (when name_len > 0) name_len bytes, then (when count > 0
 * and the op carries data) count elements.  MPI keeps the order of one
 * sender's messages on one tag, so a server that received a header reads
 * that sender's next message as its body.  Replies go back on their own
 * tags: TAG_ACK (an int32 status, then on failure a 256-byte message) for
 * INIT and UPDATER, TAG_DATA (the slice's elements) for PULL, posted by
 * the worker in request order, so they match in order too.  A worker's
 * requests to one server are handled in the order sent: its pull sees its
 * earlier push. */
#ifndef KVDIST_PS_H
#define KVDIST_PS_H

#include "kvdist_comm.h"

enum { PS_INIT = 1, PS_PUSH = 2, PS_PULL = 3, PS_UPDATER = 4, PS_STOP = 5 };
enum { TAG_REQ = 7301, TAG_ACK = 7302, TAG_DATA = 7303 };
enum { PS_ERR_BYTES = 256 };

typedef struct ps_hdr {
    int32_t op;
    int32_t key;             /* dense key index                            */
    int32_t dtype;
    int32_t name_len;        /* bytes of the name / updater text after it  */
    int64_t total;           /* elements of the whole key                  */
    int64_t offset, count;   /* this slice                                 */
} ps_hdr;

/* The MPI rank of server i. */
static inline int ps_server_rank(const kvd_store *s, int i) { return s->n_workers + i; }

/* Slices of key k (dense index) of n elements: how many, and for each the
 * server index, offset and count (arrays of at least s->n_servers). */
static inline int ps_slices(const kvd_store *s, int k, int64_t n, int *server, int64_t *off, int64_t *cnt) {
    int S = s->n_servers;
    if (n < s->big_bound || S == 1) {
        server[0] = (int)(((int64_t)k * 9973) % S);
        off[0] = 0;
        cnt[0] = n;
        return 1;
    }
    for (int i = 0; i < S; i++) {
        int64_t a = (int64_t)((double)n * i / S + 0.5), b = (int64_t)((double)n * (i + 1) / S + 0.5);
        server[i] = i;
        off[i] = a;
        cnt[i] = b - a;
    }
    return S;
}

MPI_Datatype kvd_mpi_type(int32_t dtype);

/* Wait for reqs with no deadline while every peer answers pings: every
 * 3/4 of the timeout the peers are pinged, and a silent one breaks the
 * store (message naming it).  For waits that may legitimately be long
 * (a barrier behind a slower worker, a server waiting for its workers). */
int ps_wait_alive(kvd_comm *c, int n, MPI_Request *reqs, const char *what);

/* ps_server.c: the server loop (returns when every worker stopped, or on
 * failure with the store broken). */
int ps_serve(kvd_comm *c);

#endif /* KVDIST_PS_H */
