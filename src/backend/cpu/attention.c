/* Scaled dot-product attention on the CPU: the kernel entries of
 * scaled_dot_product_attention and its backward op (src/ops/attention.c
 * defines both), flash-attention style.
 *
 * The work is split into tasks of one batch index (all batch axes
 * flattened, heads included) and one block of query rows (forward, and the
 * q / mask gradient) or of keys (the k and v gradient), or of a whole batch
 * index (the one-pass gradient of q, k and v), run on the pool; each task
 * streams over the other side in fixed blocks (attention_tiles.h) with a
 * few buffers of at most 256 rows, so memory is O(tasks in flight x block x
 * (E + Ev)) and never the L x S scores. Each output row belongs to one task
 * and is summed in a fixed order, so the results do not depend on the
 * thread count.
 *
 * q, k, v (and the backward's y and dy) are read in place when their rows
 * have unit stride (what the GEMM needs); other layouts are copied once.
 * Batch axes may broadcast (stride 0), and the mask is read through its
 * strides, so a [L, S] mask shared by every head is never expanded. */
#include "attention.h"

#include "kernels.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

/* An operand's strides over the result's nb batch axes (right-aligned;
 * broadcast axes and missing leading ones read stride 0). */
static void mat_of(const cn_tensor *t, int nb, sdpa_mat *m) {
    int r = t->ndim, tb = r > 2 ? r - 2 : 0;
    m->p = (const char *)cn_t_ptr(t);
    for (int d = 0; d < nb; d++) {
        int td = d - (nb - tb);
        m->bs[d] = td >= 0 && t->shape[td] != 1 ? t->strides[td] : 0;
    }
    m->rs = r >= 2 && t->shape[r - 2] != 1 ? t->strides[r - 2] : 0;
    m->cs = r >= 1 && t->shape[r - 1] != 1 ? t->strides[r - 1] : 0;
}

/* Can the GEMM read t's matrices in place (unit-stride rows)? */
static bool gemm_ready(const cn_tensor *t) {
    int r = t->ndim;
    int64_t rows = t->shape[r - 2], cols = t->shape[r - 1];
    return (cols <= 1 || t->strides[r - 1] == 1) &&
           (rows <= 1 || t->strides[r - 2] >= (cols > 1 ? cols : 1));
}

/* t, or a contiguous copy of it kept in *own. */
static const cn_tensor *readable(cn_tensor *t, cn_tensor **own) {
    if (gemm_ready(t)) return t;
    return *own = cn_t_contiguous(t);
}

void cn_sdpa_offsets(const sdpa_geom *g, int64_t b, sdpa_off *o) {
    memset(o, 0, sizeof *o);
    for (int d = g->nb - 1; d >= 0; d--) {
        int64_t n = g->bshape[d], i = b % n;
        b /= n;
        o->q += i * g->q.bs[d];
        o->k += i * g->k.bs[d];
        o->v += i * g->v.bs[d];
        o->m += i * g->m.bs[d];
        o->y += i * g->y.bs[d];
        o->dy += i * g->dy.bs[d];
    }
}

/* Score (b, i, j) is kept when the top 24 bits of word (c mod 4) of
 * Philox(key, c / 4), c = (b L + i) S + j, are below thr: one Philox call
 * serves four neighbouring scores, and the GPU kernels use the same rule. */
void cn_sdpa_keep_bits(const sdpa_geom *g, int64_t b, int64_t i, int64_t j0, int64_t n,
                       uint8_t *keep) {
    uint64_t idx = (uint64_t)(b * g->L + i) * (uint64_t)g->S + (uint64_t)j0;
    int64_t c = 0;
    while (c < n) {
        uint32_t w[4];
        cn_philox(g->key, idx >> 2, w);
        for (unsigned lane = (unsigned)(idx & 3); lane < 4 && c < n; lane++, c++, idx++)
            keep[c] = (w[lane] >> 8) < g->thr;
    }
}

/* The geometry of either op: q, k, v are in[0..2]; the backward's y and
 * dy in[3], in[4]; the mask at mask_base when has_mask, the seed after it
 * when dropout_p > 0. Copies made for the GEMM go to own[0..4]. */
static int setup(sdpa_geom *g, cn_tensor *const *in, const cn_attrs *a, cn_tensor *out,
                 int mask_base, cn_tensor **own) {
    memset(g, 0, sizeof *g);
    g->dt = (cn_dtype)out->dtype;
    g->nb = out->ndim - 2;
    g->B = 1;
    for (int d = 0; d < g->nb; d++) g->B *= g->bshape[d] = out->shape[d];
    const cn_tensor *q = in[0], *k = in[1], *v = in[2];
    g->L = q->shape[q->ndim - 2];
    g->E = q->shape[q->ndim - 1];
    g->S = k->shape[k->ndim - 2];
    g->Ev = v->shape[v->ndim - 1];
    g->scale = a->f[0] > 0 ? a->f[0] : g->E > 0 ? 1 / sqrt((double)g->E) : 1;
    g->causal = a->i[0] != 0;
    sdpa_mat *mats[5] = {&g->q, &g->k, &g->v, &g->y, &g->dy};
    for (int i = 0; i < (mask_base > 3 ? 5 : 3); i++) {
        const cn_tensor *t = readable(in[i], &own[i]);
        if (!t) return CN_ENOMEM;
        mat_of(t, g->nb, mats[i]);
    }
    int at = mask_base;
    if (a->i[1]) {
        const cn_tensor *m = in[at++];
        g->mask = m->dtype == CN_BOOL ? 1 : 2;
        mat_of(m, g->nb, &g->m);
    }
    double p = a->f[1];
    if (p > 0) {
        const cn_tensor *s = in[at];
        const float *bits = (const float *)cn_t_ptr(s);
        for (int t = 0; t < 64; t++)
            if (bits[t * s->strides[0]] != 0) g->key |= UINT64_C(1) << t;
        g->drop = true;
        g->thr = (uint32_t)ceil((1 - p) * 16777216.0);
        g->dscale = p < 1 ? 1 / (1 - p) : 0;
    }
    g->out = (char *)cn_t_ptr(out);
    g->ow = out->shape[out->ndim - 1];
    g->orows = out->shape[out->ndim - 2];
    return CN_OK;
}

enum { JOB_FWD, JOB_DQ, JOB_DKV, JOB_ALL };

typedef struct sdpa_job {
    const sdpa_geom *g;
    int kind;
    int64_t block, rows, nblk; /* rows per task, rows in all (L or S), tasks per batch index */
    atomic_int rc;
} sdpa_job;

static int run_task(const sdpa_job *j, int64_t t, sdpa_scratch *w) {
    const sdpa_geom *g = j->g;
    int64_t b = t / j->nblk, r0 = t % j->nblk * j->block;
    int64_t n = j->rows - r0 < j->block ? j->rows - r0 : j->block;
    bool f32 = g->dt == CN_F32;
    switch (j->kind) {
    case JOB_FWD: return f32 ? cn_sdpa_fwd_f32(g, b, r0, n, w) : cn_sdpa_fwd_f64(g, b, r0, n, w);
    case JOB_DQ: return f32 ? cn_sdpa_dq_f32(g, b, r0, n, w) : cn_sdpa_dq_f64(g, b, r0, n, w);
    case JOB_DKV: return f32 ? cn_sdpa_dkv_f32(g, b, r0, n, w) : cn_sdpa_dkv_f64(g, b, r0, n, w);
    default: return f32 ? cn_sdpa_dall_f32(g, b, w) : cn_sdpa_dall_f64(g, b, w);
    }
}

/* Tasks [t0, t1) with one set of buffers. */
static void run_chunk(void *ctx, int64_t t0, int64_t t1) {
    sdpa_job *j = ctx;
    const sdpa_geom *g = j->g;
    size_t es = cn_dsize(g->dt);
    size_t wide = (size_t)(g->E > g->Ev ? g->E : g->Ev);
    size_t blk = SDPA_MAX_ROWS * SDPA_KEYS_MAX * es, panel = SDPA_BUF_ROWS * wide * es,
           row = SDPA_BUF_ROWS * es;
    blk = (blk + 63) / 64 * 64, panel = (panel + 63) / 64 * 64, row = (row + 63) / 64 * 64;
    char *mem = cn_alloc(2 * blk + 3 * panel + 3 * row + SDPA_KEYS_MAX);
    if (!mem) {
        atomic_store(&j->rc, CN_ENOMEM);
        return;
    }
    sdpa_scratch w = {mem,
                      mem + blk,
                      mem + 2 * blk,
                      mem + 2 * blk + panel,
                      mem + 2 * blk + 2 * panel,
                      mem + 2 * blk + 3 * panel,
                      mem + 2 * blk + 3 * panel + row,
                      mem + 2 * blk + 3 * panel + 2 * row,
                      (uint8_t *)mem + 2 * blk + 3 * panel + 3 * row};
    for (int64_t t = t0; t < t1; t++) {
        int rc = run_task(j, t, &w);
        if (rc < 0) {
            atomic_store(&j->rc, rc);
            break;
        }
    }
    cn_free(mem);
}

static int run_tasks(const sdpa_geom *g, int kind, int64_t block, int64_t rows) {
    sdpa_job j = {g, kind, block, rows, (rows + block - 1) / block, 0};
    int64_t n = g->B * j.nblk;
    if (n > 0) cn_parallel_for(n, 1, run_chunk, &j);
    int rc = atomic_load(&j.rc);
    /* The workers' messages stay on their threads: say it here. */
    return rc < 0 ? cn_failc(rc, "scaled_dot_product_attention: out of memory for the tiles") : 0;
}

static void release_all(cn_tensor **own, int n) {
    for (int i = 0; i < n; i++) cn_release(own[i]);
}

/* Query rows per task of the forward pass: equal blocks of at most
 * SDPA_MAX_ROWS rows, a multiple of 8 (the GEMM tile's rows), or of at
 * most SDPA_ROWS where the larger ones would give fewer than 8 tasks.
 * Each block packs every key and value again for its GEMMs, so fewer,
 * fuller blocks pack less: ViT-B/16's 197 rows were 64 + 64 + 64 + 5, the
 * last block packing all keys and values for five rows, then 104 + 93;
 * all 197 in one block ran its 12 heads 5% faster at 1 thread. With the
 * causal mask a block computes the scores of every key up to its last row
 * for all its rows, so larger blocks compute more of the masked triangle (at
 * L = 128 one block of 128 rows computes 16384 scores, two of 64 rows
 * 12288): blocks of at most 64 there. The choice reads the shapes alone:
 * a block of one row takes the GEMM's matrix-vector path, whose sums run
 * in another order, so a thread-dependent choice could change bits. */
static int64_t fwd_rows(const sdpa_geom *g) {
    int64_t nb = (g->L + SDPA_MAX_ROWS - 1) / SDPA_MAX_ROWS;
    if (g->causal || g->B * nb < 8) nb = (g->L + SDPA_ROWS - 1) / SDPA_ROWS;
    if (nb < 1) nb = 1;
    int64_t rows = (g->L + nb - 1) / nb;
    rows = (rows + 7) / 8 * 8;
    if (rows > SDPA_MAX_ROWS) rows = SDPA_MAX_ROWS;
    return rows > 0 ? rows : 1;
}

int cn_cpu_k_sdpa(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out) {
    (void)id, (void)nin;
    sdpa_geom g;
    cn_tensor *own[5] = {NULL};
    int rc = setup(&g, in, a, out, 3, own);
    if (rc == 0) rc = run_tasks(&g, JOB_FWD, fwd_rows(&g), g.L);
    release_all(own, 5);
    return rc;
}

typedef struct rowd_job {
    const sdpa_geom *g;
    void *D;
} rowd_job;

static void rowd_chunk(void *ctx, int64_t r0, int64_t r1) {
    rowd_job *j = ctx;
    if (j->g->dt == CN_F32)
        cn_sdpa_rowd_f32(j->g, r0, r1, j->D);
    else
        cn_sdpa_rowd_f64(j->g, r0, r1, j->D);
}

/* part 0/1: the query side (dq, and the float mask's dS), one task per
 * block of rows. part 2: the key side (dk, dv), one task per block of keys,
 * after D of every row. part 3: all three into [dq; dk dv] (rows L + S):
 * with a batch index per thread at least, one task per batch index walks
 * the blocks once (flash attention's backward: five GEMMs per block);
 * with fewer, the query and key sides run as parts 0 and 2 (seven GEMMs
 * per block, but every thread busy). Both give the same bits. */
int cn_cpu_k_sdpa_backward(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                           cn_tensor *out) {
    (void)id, (void)nin;
    sdpa_geom g;
    cn_tensor *own[5] = {NULL};
    int rc = setup(&g, in, a, out, 5, own);
    g.part = (int)a->i[2];
    g.kv0 = g.part == 3 ? g.L : 0;
    if (rc == 0 && g.part < 2) {
        rc = run_tasks(&g, JOB_DQ, SDPA_ROWS, g.L);
    } else if (rc == 0) {
        /* D of every query row first: each key block reads all of them. */
        void *D = cn_alloc(cn_dsize(g.dt) * (size_t)(g.B * g.L));
        if (!D) {
            rc = cn_failc(CN_ENOMEM, "scaled_dot_product_attention_backward: out of memory");
        } else {
            rowd_job rj = {&g, D};
            if (g.B * g.L > 0) cn_parallel_for(g.B * g.L, 256, rowd_chunk, &rj);
            g.D = D;
            if (g.part == 3 && g.B >= cn_get_num_threads()) {
                rc = run_tasks(&g, JOB_ALL, 1, 1);
            } else {
                if (g.part == 3) rc = run_tasks(&g, JOB_DQ, SDPA_ROWS, g.L);
                if (rc == 0) rc = run_tasks(&g, JOB_DKV, sdpa_keys(&g), g.S);
            }
            cn_free(D);
        }
    }
    release_all(own, 5);
    return rc;
}
