/* Copies whose destination runs along one axis and whose source runs along
 * another (contiguous() of a transposed or permuted view): one output row
 * reads one element from each of as many source rows, a cache line each,
 * and with power-of-two row lengths those lines all fall in the same few
 * cache sets. Here the two axes are cut into 8 x 8 tiles, so each tile
 * reads eight source runs and writes eight destination runs, and the tiles
 * are visited in 256 x 256 blocks, so a block's rows stay in the caches and
 * the TLB. 1M f32 (1024 x 1024) went from 2 to 20-35 GB/s, 16M from 1 to
 * 10 GB/s (docs/benchmarks.md). */
#include "transpose.h"

#define TR_TILE 8
#define TR_BLOCK 256

/* dst[a * dsa + b] = CONV(src[a + b * ssb]) for a < na, b < nb (in
 * elements): a copy (CONV the identity), or a cast between f32 and bf16,
 * which autocast makes of every transposed weight it rounds. */
#define TR_BLOCK_FN(NAME, TD, TS, CONV)                                                            \
    CN_HOT_FN(NAME,                                                                                \
              (char *dst_, int64_t dsa, const char *src_, int64_t ssb, int64_t na, int64_t nb),    \
              (dst_, dsa, src_, ssb, na, nb)) {                                                    \
        TD *dst = (TD *)dst_;                                                                      \
        const TS *src = (const TS *)src_;                                                          \
        const int64_t fa = na - na % TR_TILE, fb = nb - nb % TR_TILE;                              \
        for (int64_t a0 = 0; a0 < fa; a0 += TR_TILE)                                               \
            for (int64_t b0 = 0; b0 < fb; b0 += TR_TILE) {                                         \
                TD *d = dst + a0 * dsa + b0;                                                       \
                const TS *s = src + a0 + b0 * ssb;                                                 \
                for (int a = 0; a < TR_TILE; a++)                                                  \
                    for (int b = 0; b < TR_TILE; b++) d[a * dsa + b] = CONV(s[a + b * ssb]);       \
            }                                                                                      \
        /* the edges: a right strip and a bottom strip */                                          \
        for (int64_t a = 0; a < na; a++)                                                           \
            for (int64_t b = a < fa ? fb : 0; b < nb; b++)                                         \
                dst[a * dsa + b] = CONV(src[a + b * ssb]);                                         \
    }

#define TR_SAME(x) (x)

TR_BLOCK_FN(tr_block_1, uint8_t, uint8_t, TR_SAME)
TR_BLOCK_FN(tr_block_2, uint16_t, uint16_t, TR_SAME)
TR_BLOCK_FN(tr_block_4, uint32_t, uint32_t, TR_SAME)
TR_BLOCK_FN(tr_block_8, uint64_t, uint64_t, TR_SAME)
TR_BLOCK_FN(tr_f32_to_bf16, uint16_t, float, cn_bf16_round)
TR_BLOCK_FN(tr_bf16_to_f32, float, uint16_t, cn_bf16_widen)

typedef struct tr_job {
    const cn_iter *it;
    int u, last;          /* the source's unit axis; the destination's */
    int64_t nba, nbb;     /* blocks along u and along last */
    size_t esd, ess;      /* element sizes of the destination and the source */
    void (*fn)(char *, int64_t, const char *, int64_t, int64_t, int64_t);
} tr_job;

/* Work items: (every index of the other axes) x blocks of u x blocks of
 * last, in that order. */
static void tr_items(void *ctx, int64_t begin, int64_t end) {
    const tr_job *j = ctx;
    const cn_iter *it = j->it;
    const int64_t esd = (int64_t)j->esd, ess = (int64_t)j->ess, per = j->nba * j->nbb;
    for (int64_t w = begin; w < end; w++) {
        int64_t outer = w / per, blk = w % per;
        int64_t a0 = blk / j->nbb * TR_BLOCK, b0 = blk % j->nbb * TR_BLOCK;
        int64_t doff = 0, soff = 0, rem = outer;
        for (int d = it->ndim - 1; d >= 0; d--) {
            if (d == j->u || d == j->last) continue;
            int64_t i = rem % it->shape[d];
            rem /= it->shape[d];
            doff += i * it->strides[0][d];
            soff += i * it->strides[1][d];
        }
        doff += a0 * it->strides[0][j->u] + b0;
        soff += a0 + b0 * it->strides[1][j->last];
        int64_t na = it->shape[j->u] - a0, nb = it->shape[j->last] - b0;
        j->fn(it->base[0] + doff * esd, it->strides[0][j->u], it->base[1] + soff * ess,
              it->strides[1][j->last], na < TR_BLOCK ? na : TR_BLOCK, nb < TR_BLOCK ? nb : TR_BLOCK);
    }
}

typedef struct tr_plain {
    void (*fn)(char *, int64_t, const char *, int64_t, int64_t, int64_t);
    int64_t na, nb, ssb, dsa, nbb;
    size_t es;
    const char *src;
    char *dst;
} tr_plain;

static void tr_plain_items(void *ctx, int64_t begin, int64_t end) {
    const tr_plain *j = ctx;
    for (int64_t w = begin; w < end; w++) {
        int64_t a0 = w / j->nbb * TR_BLOCK, b0 = w % j->nbb * TR_BLOCK;
        int64_t na = j->na - a0, nb = j->nb - b0;
        j->fn(j->dst + (size_t)(a0 * j->dsa + b0) * j->es, j->dsa,
              j->src + (size_t)(a0 + b0 * j->ssb) * j->es, j->ssb, na < TR_BLOCK ? na : TR_BLOCK,
              nb < TR_BLOCK ? nb : TR_BLOCK);
    }
}

bool cn_transpose_copy(size_t es, int64_t na, int64_t nb, const void *src, int64_t ssb, void *dst,
                       int64_t dsa) {
    tr_plain j = {NULL, na, nb, ssb, dsa, (nb + TR_BLOCK - 1) / TR_BLOCK, es, src, dst};
    switch (es) {
    case 1: j.fn = tr_block_1; break;
    case 2: j.fn = tr_block_2; break;
    case 4: j.fn = tr_block_4; break;
    case 8: j.fn = tr_block_8; break;
    default: return false;
    }
    int64_t items = (na + TR_BLOCK - 1) / TR_BLOCK * j.nbb;
    if (na * nb < 2 * CN_GRAIN_ELEMWISE) tr_plain_items(&j, 0, items);
    else cn_parallel_for(items, 1, tr_plain_items, &j);
    return true;
}

bool cn_copy_transposed(const cn_iter *it, cn_dtype dd, cn_dtype sd) {
    const int last = it->ndim - 1;
    if (it->nops != 2 || last < 1 || it->numel == 0 || it->strides[0][last] != 1) return false;
    const int64_t ss = it->strides[1][last];
    if (ss == 0 || ss == 1 || ss == -1) return false;
    int u = -1;
    for (int d = last - 1; d >= 0; d--)
        if (it->strides[1][d] == 1) {
            u = d;
            break;
        }
    /* Short runs on either side gain nothing from tiles. */
    if (u < 0 || it->shape[u] < TR_TILE || it->shape[last] < TR_TILE) return false;
    tr_job j = {it, u, last, (it->shape[u] + TR_BLOCK - 1) / TR_BLOCK,
                (it->shape[last] + TR_BLOCK - 1) / TR_BLOCK, cn_dsize(dd), cn_dsize(sd), NULL};
    if (dd == CN_BF16 && sd == CN_F32) j.fn = tr_f32_to_bf16;
    else if (dd == CN_F32 && sd == CN_BF16) j.fn = tr_bf16_to_f32;
    else if (dd != sd) return false;
    else switch (j.esd) {
        case 1: j.fn = tr_block_1; break;
        case 2: j.fn = tr_block_2; break;
        case 4: j.fn = tr_block_4; break;
        case 8: j.fn = tr_block_8; break;
        default: return false;
        }
    int64_t items = it->numel / (it->shape[u] * it->shape[last]) * j.nba * j.nbb;
    /* About CN_GRAIN_ELEMWISE elements per item or more. */
    int64_t per_item = it->numel / items;
    int64_t grain = per_item >= CN_GRAIN_ELEMWISE ? 1 : CN_GRAIN_ELEMWISE / per_item;
    if (it->numel < 2 * CN_GRAIN_ELEMWISE) tr_items(&j, 0, items);
    else cn_parallel_for(items, grain, tr_items, &j);
    return true;
}
