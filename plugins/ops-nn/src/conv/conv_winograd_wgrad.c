/* conv_winograd_wgrad.c — weight and bias gradients of the winograd
 * Convolution impl (float32, 3x3, stride 1, pad <= 2; see conv_winograd.c).
 *
 * Weight gradient in the winograd domain: with the forward tile
 * y = Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A, the gradient of g is Gᵀ[Σ_tiles (A dy Aᵀ) ⊙
 * (Bᵀ d B)]G.  Per chunk of output tiles and group:
 *   Vt[xi][t][c]  = (Bᵀ d B)[xi]      lane = input channel (16 at a time)
 *   D[xi][mb][t][i] = (A dy Aᵀ)[xi]   lane = output channel, stored as
 *                                     8-channel blocks for broadcasting
 *   dU[xi][m][c] += Σ_t D · Vt        36 GEMMs (8 x Cg, K = tiles) with the
 *                                     same register-blocked kernel as forward
 * Chunks are pulled from an atomic counter by P partitions (P = thread
 * budget), each accumulating into its own dU, so no two threads write one
 * value; the partitions are summed and transformed back (Gᵀ dU G) at the
 * end, in parallel over output channels.  If fewer threads show up than
 * partitions, the first partition drains the counter and the others stay
 * zero, so the result does not depend on scheduling.
 * Bias gradient: per output channel, sums of dy in 16 float lanes per
 * plane, added across samples in double. */
#include "conv.h"
#include "conv_winograd.h"

/* multiplications, not divisions (no -ffast-math to turn them into each other) */
#define K6 (1.0f / 6.0f)
#define K12 (1.0f / 12.0f)
#define K24 (1.0f / 24.0f)

#include <stdatomic.h>

typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));

typedef struct gjob {
    const wplan *p;
    const float *x, *dy;
    float *part;            /* [P][G][36][Mgp][Cgp] */
    int64_t Cgp;
    uint64_t part_n;        /* floats per partition */
    _Atomic int64_t next;   /* next chunk */
} gjob;

/* tmp[(r*4+c)*16 + l] = dy[n][m0+l][oh+r][ow+c] (zero outside or m >= Mg). */
static void gather_dy(const wplan *p, const float *dy, int64_t g, int64_t m0, const wtile *t, float *tmp) {
    int64_t plane = p->Ho * p->Wo;
    int64_t nl = p->Mg - m0 < 16 ? p->Mg - m0 : 16;
    int64_t nr = p->Ho - t->oh < 4 ? p->Ho - t->oh : 4, nc = p->Wo - t->ow < 4 ? p->Wo - t->ow : 4;
    if (nl < 16 || nr < 4 || nc < 4) memset(tmp, 0, 16 * 16 * sizeof(float));
    for (int64_t l = 0; l < nl; l++) {
        const float *s = dy + (t->n * p->M + g * p->Mg + m0 + l) * plane + t->oh * p->Wo + t->ow;
        for (int64_t r = 0; r < nr; r++, s += p->Wo)
            for (int64_t c = 0; c < nc; c++) tmp[(r * 4 + c) * 16 + l] = s[c];
    }
}

static void part_range(void *arg, int64_t b, int64_t e) {
    gjob *j = arg; const wplan *p = j->p;
    int64_t tc = p->tc, Cgp = j->Cgp, plane = p->H * p->W;
    uint64_t nV = 36ull * (uint64_t)(tc * Cgp), nD = 36ull * (uint64_t)(p->Mgp * tc);
    float *buf = nn_alloc((nV + nD + 2 * 36 * 16) * sizeof(float) + (uint64_t)tc * sizeof(wtile));
    if (!buf) return; /* cannot report from a chunk; the host pool does not fail in practice */
    float *Vt = buf, *D = Vt + nV, *tmp = D + nD, *tmp2 = tmp + 36 * 16;
    wtile *tl = (wtile *)(void *)(tmp2 + 36 * 16);
    for (int64_t part = b; part < e; part++) {
        float *dU = j->part + part * j->part_n;
        memset(dU, 0, j->part_n * sizeof(float));
        int64_t ch;
        while ((ch = atomic_fetch_add(&j->next, 1)) < p->nchunk) {
            int64_t t0 = ch * tc, nt = p->T - t0 < tc ? p->T - t0 : tc;
            wino_tiles_decode(p, t0, nt, tl);
            for (int64_t g = 0; g < p->G; g++) {
                for (int64_t i = 0; i < nt; i++) {
                    for (int64_t c0 = 0; c0 < Cgp; c0 += 16) {
                        int64_t nl = p->Cg - c0 < 16 ? p->Cg - c0 : 16;
                        if (nl < 16) memset(tmp, 0, 36 * 16 * sizeof(float));
                        for (int64_t l = 0; l < nl; l++)
                            wino_gather6(p, j->x + (tl[i].n * p->C + g * p->Cg + c0 + l) * plane, &tl[i], tmp + l);
                        wino_in_tf(tmp, Vt + i * Cgp + c0, tc * Cgp);
                    }
                    for (int64_t m0 = 0; m0 < p->Mgp; m0 += 16) {
                        gather_dy(p, j->dy, g, m0, &tl[i], tmp);
                        wino_dy_tf(tmp, tmp2, 16);
                        int64_t mb = m0 / 8;
                        for (int xi = 0; xi < 36; xi++) {
                            memcpy(D + ((xi * p->nmb + mb) * tc + i) * 8, tmp2 + xi * 16, 8 * sizeof(float));
                            if (mb + 1 < p->nmb)
                                memcpy(D + ((xi * p->nmb + mb + 1) * tc + i) * 8, tmp2 + xi * 16 + 8, 8 * sizeof(float));
                        }
                    }
                }
                for (int xi = 0; xi < 36; xi++)
                    for (int64_t mb = 0; mb < p->nmb; mb++)
                        wino_gemm8(nt, D + (xi * p->nmb + mb) * tc * 8, Vt + xi * tc * Cgp, Cgp,
                                   dU + ((g * 36 + xi) * p->Mgp + mb * 8) * Cgp, Cgp, Cgp, 1);
            }
        }
    }
    nn_free(buf);
}

typedef struct rjob { const gjob *j; int64_t P; float *dw; int32_t req; } rjob;

/* dw[g*Mg+m][c] = Gᵀ (Σ_parts dU[g][·][m][c]) G for items (g, m). */
static void reduce_range(void *arg, int64_t b, int64_t e) {
    const rjob *r = arg; const gjob *j = r->j; const wplan *p = j->p;
    int64_t Cgp = j->Cgp;
    for (int64_t it = b; it < e; it++) {
        int64_t g = it / p->Mg, m = it % p->Mg;
        for (int64_t c = 0; c < p->Cg; c++) {
            float u[36], t[6][3];
            for (int xi = 0; xi < 36; xi++) {
                float s = 0.0f;
                for (int64_t q = 0; q < r->P; q++) s += j->part[q * j->part_n + ((g * 36 + xi) * p->Mgp + m) * Cgp + c];
                u[xi] = s;
            }
            for (int i = 0; i < 6; i++) { /* t = u G (6x3) */
                const float *v = u + i * 6;
                t[i][0] = v[0]  * 0.25f - v[1] * K6 - v[2] * K6 + v[3] * K24 + v[4] * K24;
                t[i][1] = -v[1] * K6 + v[2] * K6 + v[3] * K12 - v[4] * K12;
                t[i][2] = -v[1] * K6 - v[2] * K6 + v[3] * K6 + v[4] * K6 + v[5];
            }
            float *d = r->dw + ((g * p->Mg + m) * p->Cg + c) * 9;
            for (int q = 0; q < 3; q++) { /* dW = Gᵀ t */
                float k0 = t[0][q]  * 0.25f - t[1][q] * K6 - t[2][q] * K6 + t[3][q] * K24 + t[4][q] * K24;
                float k1 = -t[1][q] * K6 + t[2][q] * K6 + t[3][q] * K12 - t[4][q] * K12;
                float k2 = -t[1][q] * K6 - t[2][q] * K6 + t[3][q] * K6 + t[4][q] * K6 + t[5][q];
                NN_STORE(r->req, d[q], k0);
                NN_STORE(r->req, d[3 + q], k1);
                NN_STORE(r->req, d[6 + q], k2);
            }
        }
    }
}

int wino_weight_grad(const mxp_op_ctx *ctx, const wplan *p, const float *x, const float *dy, float *dw, int32_t req) {
    gjob j;
    memset(&j, 0, sizeof j);
    j.p = p; j.x = x; j.dy = dy; j.Cgp = (p->Cg + 15) / 16 * 16;
    j.part_n = 36ull * (uint64_t)(p->G * p->Mgp * j.Cgp);
    int64_t P = nn_host && nn_host->num_threads ? nn_host->num_threads() : 1;
    if (P < 1) P = 1;
    if (P > p->nchunk) P = p->nchunk;
    j.part = nn_alloc((uint64_t)P * j.part_n * sizeof(float));
    if (!j.part) return NN_ERR(MXP_ENOMEM, "Convolution(winograd): no memory for weight-gradient partials");
    atomic_init(&j.next, 0);
    int st = nn_parallel(ctx, P, 1, part_range, &j);
    if (st == MXP_OK) {
        rjob r = { &j, P, dw, req };
        st = nn_parallel(ctx, p->G * p->Mg, 4, reduce_range, &r);
    }
    nn_free(j.part);
    return st;
}

typedef struct bjob { int64_t N, M, P; const float *dy; float *db; int32_t req; } bjob;

static void bias_range(void *arg, int64_t b, int64_t e) {
    const bjob *j = arg;
    for (int64_t m = b; m < e; m++) {
        double acc = 0;
        for (int64_t n = 0; n < j->N; n++) {
            const float *s = j->dy + (n * j->M + m) * j->P;
            v16 v = {0};
            int64_t q = 0;
            for (; q + 16 <= j->P; q += 16) v += *(const v16u *)(const void *)(s + q);
            float f = 0.0f;
            for (; q < j->P; q++) f += s[q];
            for (int l = 0; l < 16; l++) f += v[l];
            acc += f;
        }
        NN_STORE(j->req, j->db[m], (float)acc);
    }
}

int wino_bias_grad(const mxp_op_ctx *ctx, int64_t N, int64_t M, int64_t P, const float *dy, float *db, int32_t req) {
    bjob j = { N, M, P, dy, db, req };
    return nn_parallel(ctx, M, 4, bias_range, &j);
}
