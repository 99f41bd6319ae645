/* Scaled dot-product attention on the CPU: what attention.c (the entries,
 * operand geometry, threads, dropout bits) and attention_tiles.h (the tile
 * loops, once per float type) share. */
#ifndef CN_CPU_ATTENTION_H
#define CN_CPU_ATTENTION_H

#include "../../core/core.h"

/* Tiles: blocks of sdpa_keys(g) keys everywhere, and of SDPA_ROWS query
 * rows but in the forward pass (up to SDPA_MAX_ROWS rows there: fwd_rows
 * in attention.c; a row's result does not depend on the rows beside it).
 * The forward pass and the query-side gradient take one block of rows per
 * task and walk the key blocks; the key-side gradient takes one block of
 * keys per task and walks the row blocks; the one-pass gradient (all of q,
 * k and v) takes a whole batch index. Sizes fixed by the geometry and the
 * same blocks in every scheme, so each output element is summed in the
 * same order whatever the thread count and whichever scheme ran. A score
 * block is at most 65536 elements (256 KiB in f32): it stays in L2 next to
 * the panels the GEMMs read. */
#define SDPA_ROWS 64
#define SDPA_MAX_ROWS 256
#define SDPA_KEYS_MAX 256
/* Rows of the scratch panels: query rows or keys, whichever is more. */
#define SDPA_BUF_ROWS (SDPA_MAX_ROWS > SDPA_KEYS_MAX ? SDPA_MAX_ROWS : SDPA_KEYS_MAX)

/* An operand [batch..., rows, cols]: element (b, r, c) at p + off(b) + r rs
 * + c cs (elements), where off(b) sums the batch index times bs over the
 * result's batch axes (0 for broadcast ones). */
typedef struct sdpa_mat {
    const char *p;
    int64_t bs[CN_MAX_DIMS];
    int64_t rs, cs;
} sdpa_mat;

typedef struct sdpa_geom {
    cn_dtype dt;
    int nb; /* batch axes of the result */
    int64_t bshape[CN_MAX_DIMS];
    int64_t B, L, S, E, Ev;
    double scale;
    bool causal;
    int mask;                   /* 0 none, 1 bool, 2 float */
    sdpa_mat q, k, v, m, y, dy; /* y, dy: the backward's forward output and its gradient */
    bool drop;
    uint64_t key;  /* dropout: Philox key, counter (b L + i) S + j */
    uint32_t thr;  /* keep where the draw's top 24 bits are below this */
    double dscale; /* 1 / (1 - p) */
    char *out;     /* the result, contiguous */
    int64_t ow;    /* its row length */
    int64_t orows; /* its rows per batch index */
    int64_t kv0;   /* backward: the row of k's and v's gradients' first key */
    int part;      /* backward: 0 dq, 1 dq and dmask, 2 dk and dv, 3 all three */
    const void *D; /* part 2: rowsum(dO O) - dlse per (b, i), [B L] */
} sdpa_geom;

/* Keys per block: SDPA_KEYS_MAX without a mask, so that sequences of up
 * to 256 keys (ViT-B/16's 197) take one block, with no running maximum
 * to rescale by (the forward pass 1.08x faster at 197 keys, 1.1x at 512
 * and 1024); 128 with the causal mask, where a key block's gradient
 * computes the masked part of every row block it meets (256 made a
 * 256-key causal forward + backward 1.18x slower), and with any other
 * mask, so that causal attention and its mask written out give the same
 * bits. */
static inline int64_t sdpa_keys(const sdpa_geom *g) {
    return g->causal || g->mask ? 128 : SDPA_KEYS_MAX;
}

/* Offsets of one batch index's matrices. */
typedef struct sdpa_off {
    int64_t q, k, v, m, y, dy;
} sdpa_off;

void cn_sdpa_offsets(const sdpa_geom *g, int64_t b, sdpa_off *o);
/* keep[c] = 1 when the dropout draw of score (b, i, j0 + c) keeps it, for
 * c in [0, n). */
void cn_sdpa_keep_bits(const sdpa_geom *g, int64_t b, int64_t i, int64_t j0, int64_t n,
                       uint8_t *keep);

/* The per-type tile loops (attention_tiles.h). Each handles one task; the
 * scratch buffers come from the caller (sizes in attention.c). */
typedef struct sdpa_scratch {
    void *s, *p, *tmp, *acc, *acc2, *rowa, *rowb, *rowc;
    uint8_t *keep;
} sdpa_scratch;

int cn_sdpa_fwd_f32(const sdpa_geom *g, int64_t b, int64_t i0, int64_t bm, sdpa_scratch *w);
int cn_sdpa_fwd_f64(const sdpa_geom *g, int64_t b, int64_t i0, int64_t bm, sdpa_scratch *w);
int cn_sdpa_dq_f32(const sdpa_geom *g, int64_t b, int64_t i0, int64_t bm, sdpa_scratch *w);
int cn_sdpa_dq_f64(const sdpa_geom *g, int64_t b, int64_t i0, int64_t bm, sdpa_scratch *w);
int cn_sdpa_dkv_f32(const sdpa_geom *g, int64_t b, int64_t j0, int64_t bn, sdpa_scratch *w);
int cn_sdpa_dkv_f64(const sdpa_geom *g, int64_t b, int64_t j0, int64_t bn, sdpa_scratch *w);
/* The one-pass gradient of batch index b (part 3): dq, dk and dv. */
int cn_sdpa_dall_f32(const sdpa_geom *g, int64_t b, sdpa_scratch *w);
int cn_sdpa_dall_f64(const sdpa_geom *g, int64_t b, sdpa_scratch *w);
/* D for rows [r0, r1) of the flattened [B L]. */
void cn_sdpa_rowd_f32(const sdpa_geom *g, int64_t r0, int64_t r1, void *D);
void cn_sdpa_rowd_f64(const sdpa_geom *g, int64_t r0, int64_t r1, void *D);

#endif
