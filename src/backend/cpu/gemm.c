/* Matrix products: BLAS for f32/f64 when available, else (and for integers)
 * the built-in kernels below.
 *
 * The built-in f32/f64 GEMM is the classic Goto/BLIS scheme: C is cut into
 * one rectangle per thread; within it, blocks of B (kc x nc) and A (mc x kc)
 * are packed into panels laid out in the order the micro-kernel reads them
 * (zero-padded to whole tiles; A's rows all at once where B was packed
 * beforehand: gemm_rect), and an MR x NR register tile of C is
 * accumulated over kc with MR broadcasts of A and NR/VL vector loads of B per
 * step. The tile is plain C: GCC keeps acc[][] in registers and vectorises
 * the NR loop, and CN_HOT_FN compiles it for AVX2 and AVX-512 as well. On this
 * project's machines it runs at 0.9-1.0x OpenBLAS's sgemm/dgemm on one
 * core (bench/bench_gemm).
 *
 * Every element of C is summed in the same order (k blocks depend only on k)
 * whatever the thread count or its place in a tile, so results do not depend
 * on the number of threads. For the same reason an operand may be packed
 * once beforehand (cn_gemm_pack: a program's constant weights) and read
 * from its panels instead, with the same bits. */
#include "gemm.h"

#include "../../core/isa.h"

#include <ctype.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CN_HAVE_CBLAS
#include <cblas.h>
#endif

/* ISO C mode (-std=c11) turns off floating-point contraction, and an FMA is
 * the whole point of the micro-kernel. GCC would also turn packing's short
 * row copies back into memcpy calls (see copy_rows). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast", "no-tree-loop-distribute-patterns")
#elif defined(__clang__)
#pragma clang fp contract(fast)
#endif

static inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t iabs(int64_t a) { return a < 0 ? -a : a; }
static inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t round_up(int64_t a, int64_t b) { return cdiv(a, b) * b; }

/* ------------------------------------------------------------------------ */
/* Packing                                                                  */
/* ------------------------------------------------------------------------ */

/* dst[p*w + r] = s[r*rs + p] for G rows of unit stride: a transpose. With
 * the rows of dst contiguous (w == G) GCC turns it into vector shuffles;
 * otherwise it goes through tmp, G elements at a time. */
#define DEFINE_INTERLEAVE(T, SFX, G)                                                               \
    CN_HOT_FN(interleave##G##_##SFX,                                                               \
              (int64_t kc, const T *restrict s, int64_t rs, T *restrict dst, int w),               \
              (kc, s, rs, dst, w)) {                                                               \
        if (w == (G)) {                                                                            \
            for (int64_t p = 0; p < kc; p++)                                                       \
                for (int r = 0; r < (G); r++) dst[p * (G) + r] = s[r * rs + p];                    \
            return;                                                                                \
        }                                                                                          \
        T tmp[(G) * 64];                                                                           \
        for (int64_t p0 = 0; p0 < kc; p0 += 64) {                                                  \
            int64_t len = imin(64, kc - p0);                                                       \
            for (int64_t p = 0; p < len; p++)                                                      \
                for (int r = 0; r < (G); r++) tmp[p * (G) + r] = s[r * rs + p0 + p];               \
            for (int64_t p = 0; p < len; p++)                                                      \
                memcpy(dst + (p0 + p) * w, tmp + p * (G), sizeof(T) * (G));                        \
        }                                                                                          \
    }

/* Rows [0, rows) x columns [0, kc) of a matrix (element (i, p) at
 * src[i*rs + p*cs]) into panels of w rows, each stored k-major
 * (dst[panel*w*kc + p*w + r]) and padded with zeros to w rows. A is packed
 * as is; B is packed as B^T, so its panels hold w columns. Row-major A and
 * B^T (cs == 1) need the transpose, 8 or 4 rows at a time. */
#define DEFINE_PACK(T, SFX)                                                                        \
    DEFINE_INTERLEAVE(T, SFX, 8)                                                                   \
    DEFINE_INTERLEAVE(T, SFX, 4)                                                                   \
    /* w rows of unit stride, kc deep: a copy of w elements per p, inline                         \
     * (a memcpy call per 24 floats was 6% of MobileNetV2, whose 1x1                              \
     * convolutions pack their activations this way). */                                         \
    CN_HOT_FN(copy_rows_##SFX, (int64_t kc, int w, const T *restrict s, int64_t cs,               \
                                T *restrict dst),                                                  \
              (kc, w, s, cs, dst)) {                                                               \
        for (int64_t p = 0; p < kc; p++)                                                           \
            for (int z = 0; z < w; z++) dst[p * w + z] = s[p * cs + z];                            \
    }                                                                                              \
    static void pack_##SFX(int64_t rows, int64_t kc, int w, const void *src_, int64_t rs,         \
                           int64_t cs, void *dst_) {                                               \
        const T *src = src_;                                                                       \
        T *dst = dst_;                                                                             \
        for (int64_t i = 0; i < rows; i += w, dst += w * kc) {                                     \
            int64_t h = imin(w, rows - i), r = 0;                                                  \
            const T *s = src + i * rs;                                                             \
            if (rs == 1 && h == w) {                                                               \
                copy_rows_##SFX(kc, w, s, cs, dst);                                                \
                continue;                                                                          \
            }                                                                                      \
            if (cs == 1) {                                                                         \
                for (; r + 8 <= h; r += 8) interleave8_##SFX(kc, s + r * rs, rs, dst + r, w);      \
                for (; r + 4 <= h; r += 4) interleave4_##SFX(kc, s + r * rs, rs, dst + r, w);      \
            }                                                                                      \
            for (; r < h; r++) {                                                                   \
                const T *row = s + r * rs;                                                         \
                for (int64_t p = 0; p < kc; p++) dst[p * w + r] = row[p * cs];                     \
            }                                                                                      \
            for (int64_t p = 0; p < kc; p++)                                                       \
                for (int64_t z = h; z < w; z++) dst[p * w + z] = 0;                                \
        }                                                                                          \
    }

DEFINE_PACK(float, f32)
DEFINE_PACK(double, f64)

/* ------------------------------------------------------------------------ */
/* Register tiles                                                           */
/* ------------------------------------------------------------------------ */

/* C[mc x nc] = (add ? C : 0) + Ap * Bp over packed blocks, then, where eo
 * is given (k's last block), each panel of MR rows gets eo's bias and
 * bounds (cn_gemm_out), row0 being C's row of the block's first. Each A
 * panel (MR x kc) stays in L1 while the tiles sweep the whole B block,
 * which is sized to stay in L2. acc[][] stays in registers only while
 * every index into it is a constant after unrolling, so a partial tile at
 * the edge is computed whole into tmp and then copied. Each tile
 * prefetches up to pf_lines of the pf_n cache lines from pf on (the next
 * block of a packed B or A: gemm_rect), a few every GEMM_PREFETCH_K steps
 * of k.
 * NR must exceed 16 elements: shorter loops are unrolled before the
 * vectoriser sees them, and the unrolled code is not vectorised. */
/* Steps of k between a tile's prefetches. Issued all at once before the
 * tile, the prefetches of weights coming from memory stalled it: the
 * instruction after them held 7% of the tile's samples in the BERT
 * encoder, and 128 x 3072 x 768 against 32 packs of B in turn ran 7-10%
 * slower than with them spread over its steps. A tile with nothing to
 * prefetch keeps the plain loop over k: cut in steps where there was
 * nothing to prefetch, it ran products with A packed beforehand and in
 * the caches (a convolution's weights past the first block of columns)
 * 6-10% slower. */
#define GEMM_PREFETCH_K 16

#define DEFINE_TILE(NAME, T, MR, NR)                                                               \
    CN_HOT_FN(NAME,                                                                                \
              (int64_t mc, int64_t nc, int64_t kc, const void *ap_, const void *bp_, void *c_,     \
               int64_t ldc, bool add, const cn_gemm_out *eo, int64_t row0, const char *pf,           \
               int64_t pf_n, int64_t pf_lines),                                                    \
              (mc, nc, kc, ap_, bp_, c_, ldc, add, eo, row0, pf, pf_n, pf_lines)) {                \
        const T *ap = ap_, *bp = bp_;                                                              \
        T *c = c_;                                                                                 \
        T tmp[(MR) * (NR)];                                                                        \
        int64_t pl = 0; /* lines of pf prefetched so far */                                       \
        for (int64_t i = 0; i < mc; i += (MR)) {                                                   \
            for (int64_t j = 0; j < nc; j += (NR)) {                                               \
                int64_t npf = imin(pf_lines, pf_n - pl);                                           \
                const int64_t per = cdiv(npf, cdiv(kc, GEMM_PREFETCH_K));                          \
                const T *restrict a = ap + i * kc, *restrict b = bp + j * kc;                      \
                T acc[MR][NR];                                                                     \
                for (int r = 0; r < (MR); r++)                                                     \
                    for (int s = 0; s < (NR); s++) acc[r][s] = 0;                                  \
                if (npf > 0) {                                                                     \
                    for (int64_t p0 = 0; p0 < kc; p0 += GEMM_PREFETCH_K) {                         \
                        for (int64_t q = 0; q < per && npf > 0; q++, npf--, pl++)                  \
                            __builtin_prefetch(pf + pl * 64, 0, 2);                                \
                        const int64_t pe = imin(kc, p0 + GEMM_PREFETCH_K);                         \
                        for (int64_t p = p0; p < pe; p++, a += (MR), b += (NR))                    \
                            for (int r = 0; r < (MR); r++)                                         \
                                for (int s = 0; s < (NR); s++) acc[r][s] += a[r] * b[s];           \
                    }                                                                              \
                } else {                                                                           \
                    for (int64_t p = 0; p < kc; p++, a += (MR), b += (NR))                         \
                        for (int r = 0; r < (MR); r++)                                             \
                            for (int s = 0; s < (NR); s++) acc[r][s] += a[r] * b[s];               \
                }                                                                                  \
                bool full = mc - i >= (MR) && nc - j >= (NR);                                      \
                T *o = full ? c + i * ldc + j : tmp;                                               \
                int64_t ld = full ? ldc : (NR);                                                    \
                if (full && add) {                                                                 \
                    for (int r = 0; r < (MR); r++)                                                 \
                        for (int s = 0; s < (NR); s++) o[r * ld + s] += acc[r][s];                 \
                } else {                                                                           \
                    for (int r = 0; r < (MR); r++)                                                 \
                        for (int s = 0; s < (NR); s++) o[r * ld + s] = acc[r][s];                  \
                }                                                                                  \
                if (full) continue;                                                                \
                int64_t h = imin(MR, mc - i), w = imin(NR, nc - j);                                \
                for (int64_t r = 0; r < h; r++) {                                                  \
                    T *cr = c + (i + r) * ldc + j;                                                 \
                    for (int64_t s = 0; s < w; s++)                                                \
                        cr[s] = add ? cr[s] + tmp[r * (NR) + s] : tmp[r * (NR) + s];               \
                }                                                                                  \
            }                                                                                      \
            /* The panel's rows are final (and in L1): the bias and bounds. */                     \
            if (eo) out_panel(c + i * ldc, imin(MR, mc - i), nc, ldc, eo, row0 + i, sizeof(T));    \
        }                                                                                          \
    }

/* eo on rows [0, h) x [0, w) of o (row stride ld), eo's bias starting at
 * o's first row: each step its own IEEE operation, in the order of the
 * unfused ops (a bias add, then maximum and minimum with the bounds, each
 * written bound > v ? bound : v, which keeps a NaN). */
#define DEFINE_OUT_ROWS(T, SFX)                                                                    \
    CN_HOT_FN(out_rows_##SFX, (T *o, int64_t h, int64_t w, int64_t ld, const cn_gemm_out *eo),    \
              (o, h, w, ld, eo)) {                                                                 \
        const T lo = (T)eo->lo, hi = (T)eo->hi;                                                    \
        const T *bias = eo->bias;                                                                  \
        for (int64_t r = 0; r < h; r++) {                                                          \
            T *restrict or_ = o + r * ld;                                                          \
            if (bias && eo->clamp) { /* one pass */                                                \
                const T br = bias[r];                                                              \
                for (int64_t s = 0; s < w; s++) {                                                  \
                    T v = or_[s] + br;                                                             \
                    v = lo > v ? lo : v;                                                           \
                    or_[s] = hi < v ? hi : v;                                                      \
                }                                                                                  \
            } else if (bias) {                                                                     \
                const T br = bias[r];                                                              \
                for (int64_t s = 0; s < w; s++) or_[s] = or_[s] + br;                              \
            } else if (eo->clamp) {                                                                \
                for (int64_t s = 0; s < w; s++) {                                                  \
                    T v = or_[s];                                                                  \
                    v = lo > v ? lo : v;                                                           \
                    or_[s] = hi < v ? hi : v;                                                      \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
DEFINE_OUT_ROWS(float, f32)
DEFINE_OUT_ROWS(double, f64)

/* h rows of a tile's panel at o (C's rows from row0 on), w wide. A call,
 * not inlined: inlined, the bounds slowed the tile's own loop by 5% on
 * products with partial tiles (960 x 49 x 160). */
static __attribute__((noinline)) void out_panel(void *o, int64_t h, int64_t w, int64_t ld,
                                                const cn_gemm_out *eo, int64_t row0, size_t es) {
    cn_gemm_out e = *eo;
    if (e.bias) e.bias = (const char *)e.bias + (size_t)row0 * es;
    if (es == sizeof(float)) out_rows_f32(o, h, w, ld, &e);
    else out_rows_f64(o, h, w, ld, &e);
}

/* AVX-512 (32 vector registers). */
DEFINE_TILE(tile_f32_8x32, float, 8, 32)
DEFINE_TILE(tile_f32_7x32, float, 7, 32)
DEFINE_TILE(tile_f32_6x64, float, 6, 64)
DEFINE_TILE(tile_f64_8x24, double, 8, 24)
DEFINE_TILE(tile_f64_6x32, double, 6, 32)
/* AVX2 (16 registers): 12 and 10 accumulators, leaving registers for B.
 * Also the portable default. */
DEFINE_TILE(tile_f32_4x24, float, 4, 24)
DEFINE_TILE(tile_f64_2x20, double, 2, 20)

typedef void (*tile_fn)(int64_t mc, int64_t nc, int64_t kc, const void *ap, const void *bp,
                        void *c, int64_t ldc, bool add, const cn_gemm_out *eo, int64_t row0,
                        const char *pf, int64_t pf_n, int64_t pf_lines);

typedef struct tile_def {
    const char *name;
    int mr, nr;
    int64_t kc, mc, nc; /* block sizes: mc a multiple of mr, nc of nr; kc x nc fits L2 */
    tile_fn run;
} tile_def;

static const tile_def tiles_f32[] = {
    {"8x32", 8, 32, 256, 96, 512, tile_f32_8x32},
    {"6x64", 6, 64, 256, 96, 1024, tile_f32_6x64},
    {"4x24", 4, 24, 256, 96, 1032, tile_f32_4x24},
    /* 8x32's panels of B (the same kc and NR: a B packed for 8x32 serves
     * it), for products whose rows fill whole tiles of 7 but not of 8
     * (gemm_blocked) */
    {"7x32", 7, 32, 256, 91, 512, tile_f32_7x32},
};
#define TILE_F32_8x32 0
#define TILE_F32_7x32 3
static const tile_def tiles_f64[] = {
    {"8x24", 8, 24, 256, 48, 504, tile_f64_8x24},
    {"6x32", 6, 32, 256, 48, 512, tile_f64_6x32},
    {"2x20", 2, 20, 256, 48, 500, tile_f64_2x20},
};
#define NTILES(t) ((int)(sizeof(t) / sizeof((t)[0])))

/* The tiles run as the active level's variant (isa.h), or as the build's
 * target where that is AVX-512 already. */
static bool wide_vectors(void) {
#ifdef __AVX512F__
    return true;
#else
    return cn_isa() == CN_ISA_AVX512;
#endif
}

static int forced_f32 = -1, forced_f64 = -1;

static const tile_def *pick_tile(cn_dtype dt) {
    bool wide = wide_vectors();
    if (dt == CN_F32) return &tiles_f32[forced_f32 >= 0 ? forced_f32 : wide ? 0 : 2];
    return &tiles_f64[forced_f64 >= 0 ? forced_f64 : wide ? 0 : 2];
}

const char *cn_gemm_select_tile(cn_dtype dt, int i) {
    if (dt != CN_F32 && dt != CN_F64) return NULL;
    int n = dt == CN_F32 ? NTILES(tiles_f32) : NTILES(tiles_f64);
    if (i < -1 || i >= n) return NULL;
    *(dt == CN_F32 ? &forced_f32 : &forced_f64) = i;
    return pick_tile(dt)->name;
}

void cn_gemm_tile_dims(cn_dtype dt, int *mr, int *nr) {
    const tile_def *t = pick_tile(dt);
    *mr = t->mr;
    *nr = t->nr;
}

/* ------------------------------------------------------------------------ */
/* The blocked GEMM                                                         */
/* ------------------------------------------------------------------------ */

typedef struct gemm_plan {
    const tile_def *t;
    void (*pack)(int64_t rows, int64_t kc, int w, const void *src, int64_t rs, int64_t cs,
                 void *dst);
    size_t es;
    int64_t m, n, k, kc, mc, nc;
    const char *a, *b;
    char *c;
    int64_t rsa, csa, rsb, csb, ldc;
    /* An operand packed beforehand (cn_gemm_pack), or NULL: packed here,
     * block by block. Its rows are padded to whole panels: apad, bpad. */
    const char *apk, *bpk;
    int64_t apad, bpad;
    const cn_gemm_out *eo; /* or NULL */
    int pm, pn;       /* threads' grid over C: pm row parts x pn column parts */
    bool a_whole;     /* each slot packs its rows of A once, every k block (gemm_rect) */
    char *work;       /* per slot: an A block (or all of its rows of A), then a B block */
    size_t slot_bytes, a_bytes; /* a slot's, and its A part's */
} gemm_plan;

/* The largest block of a packed B whose successor is prefetched: with two
 * blocks of a megabyte each in a 2 MB L2, prefetching was no faster. */
#define GEMM_PREFETCH_MAX_BYTES (512 << 10)

/* The most bytes of A a slot packs whole (gemm_rect). */
#define GEMM_WHOLE_A_BYTES (4 << 20)

/* C[i0:i1, j0:j1], serially, with this slot's buffers. */
static void gemm_rect(const gemm_plan *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                      char *abuf, char *bbuf) {
    const tile_def *t = g->t;
    size_t es = g->es;
    /* Equal blocks, so no thin last block wastes a pass over the other operand. */
    int64_t mc = round_up(cdiv(i1 - i0, cdiv(i1 - i0, g->mc)), t->mr);
    int64_t nc = round_up(cdiv(j1 - j0, cdiv(j1 - j0, g->nc)), t->nr);
    /* With B packed beforehand and several blocks of columns, A's rows are
     * packed once, every k block laid out as a packed operand's (block pc
     * from row pc * apad on), rather than once per block of columns (the
     * repacking was 3% of ViT-B/16's samples; it and the BERT encoder ran
     * 2% faster at 1 thread). */
    const int64_t apad = round_up(i1 - i0, t->mr);
    if (g->a_whole)
        for (int64_t pc = 0; pc < g->k; pc += g->kc)
            g->pack(i1 - i0, imin(g->kc, g->k - pc), t->mr,
                    g->a + (i0 * g->rsa + pc * g->csa) * (int64_t)es, g->rsa, g->csa,
                    abuf + (size_t)(pc * apad) * es);
    for (int64_t jc = j0; jc < j1; jc += nc) {
        int64_t nb = imin(nc, j1 - jc);
        for (int64_t pc = 0; pc < g->k; pc += g->kc) {
            int64_t kb = imin(g->kc, g->k - pc);
            /* A packed operand holds block pc's panels from row pc * pad on,
             * panel by panel, each kb deep: the same bytes packing gives. */
            const char *bp = bbuf, *pf = NULL;
            int64_t pf_n = 0, pf_lines = 0; /* lines left to prefetch, and per tile */
            if (g->bpk) {
                bp = g->bpk + (size_t)(pc * g->bpad + jc * kb) * es;
                /* The next block of a packed B (a model's weights, which come
                 * from memory) is read into the caches a few lines a tile
                 * while this one is multiplied: otherwise the first panel
                 * of A to sweep a block waits on one core's bandwidth.
                 * Only blocks of at most GEMM_PREFETCH_MAX_BYTES (the
                 * AVX-512 f32 tile's blocks, 256 x 512, are 512 KB for
                 * this): ViT-B/16 6% faster, BERT 5%; the prefetch with
                 * blocks of 1024 columns, or those blocks alone, 0-2%. */
                int64_t pn = pc + kb, jn = jc;
                if (pn >= g->k) pn = 0, jn = jc + nc;
                if (jn < j1 && kb * nb * (int64_t)es <= GEMM_PREFETCH_MAX_BYTES) {
                    int64_t kn = imin(g->kc, g->k - pn), nn = imin(nc, j1 - jn);
                    pf = g->bpk + (size_t)(pn * g->bpad + jn * kn) * es;
                    pf_n = cdiv(round_up(nn, t->nr) * kn * (int64_t)es, 64);
                    pf_lines = cdiv(pf_n, cdiv(i1 - i0, t->mr) * cdiv(nb, t->nr));
                }
            } else {
                g->pack(nb, kb, t->nr, g->b + (pc * g->rsb + jc * g->csb) * (int64_t)es,
                        g->csb, g->rsb, bbuf);
            }
            for (int64_t ic = i0; ic < i1; ic += mc) {
                int64_t mb = imin(mc, i1 - ic);
                const char *ap = abuf;
                if (g->apk)
                    ap = g->apk + (size_t)(pc * g->apad + ic * kb) * es;
                else if (g->a_whole)
                    ap = abuf + (size_t)(pc * apad + (ic - i0) * kb) * es;
                else
                    g->pack(mb, kb, t->mr, g->a + (ic * g->rsa + pc * g->csa) * (int64_t)es,
                            g->rsa, g->csa, abuf);
                if (g->apk && !g->bpk && jc == j0) {
                    /* A packed beforehand (a convolution's weights) comes
                     * from memory on the first block of columns: its next
                     * block, the rows after these or the next k block's
                     * first, is prefetched as B's is above. The blocks lie
                     * one after the other in the pack. Later blocks of
                     * columns find A in the caches. */
                    int64_t in = ic + mc, pn = pc;
                    if (in >= i1) in = i0, pn = pc + kb;
                    pf = NULL, pf_n = pf_lines = 0;
                    if (pn < g->k) {
                        int64_t kn = imin(g->kc, g->k - pn), mn = imin(mc, i1 - in);
                        pf = g->apk + (size_t)(pn * g->apad + in * kn) * es;
                        pf_n = cdiv(round_up(mn, t->mr) * kn * (int64_t)es, 64);
                        pf_lines = cdiv(pf_n, cdiv(mb, t->mr) * cdiv(nb, t->nr));
                    }
                }
                t->run(mb, nb, kb, ap, bp, g->c + (size_t)(ic * g->ldc + jc) * es, g->ldc,
                       pc > 0, pc + kb == g->k ? g->eo : NULL, ic, pf, pf_n, pf_lines);
                /* pf moves on only while lines remain: past the last one
                 * it could point beyond the pack. */
                int64_t done = imin(pf_n, pf_lines * cdiv(mb, t->mr) * cdiv(nb, t->nr));
                pf_n -= done;
                if (pf_n > 0) pf += done * 64;
            }
        }
    }
}

/* Start of part q of [0, total) cut into parts at multiples of unit. */
static int64_t part_start(int64_t total, int64_t unit, int parts, int q) {
    int64_t units = cdiv(total, unit);
    return imin(total, units * q / parts * unit);
}

static void gemm_slots(void *ctx, int64_t s0, int64_t s1) {
    const gemm_plan *g = ctx;
    for (int64_t s = s0; s < s1; s++) {
        int r = (int)(s / g->pn), q = (int)(s % g->pn);
        int64_t i0 = part_start(g->m, g->t->mr, g->pm, r), i1 = part_start(g->m, g->t->mr, g->pm, r + 1);
        int64_t j0 = part_start(g->n, g->t->nr, g->pn, q), j1 = part_start(g->n, g->t->nr, g->pn, q + 1);
        if (i0 >= i1 || j0 >= j1) continue;
        char *abuf = g->work + (size_t)s * g->slot_bytes;
        char *bbuf = abuf + g->a_bytes;
        gemm_rect(g, i0, i1, j0, j1, abuf, bbuf);
    }
}

/* Multiply-adds below which another thread does not pay for its wake-up. */
#define GEMM_MACS_PER_THREAD (1 << 18)

/* The thread grid: as many threads as the work deserves, arranged to keep
 * each thread's rectangle close to square (the least packing per thread). */
static void plan_grid(gemm_plan *g) {
    int nt = cn_in_parallel_region() ? 1 : cn_get_num_threads();
    double macs = (double)g->m * (double)g->n * (double)g->k;
    int64_t want = (int64_t)(macs / GEMM_MACS_PER_THREAD);
    if (want < nt) nt = want < 1 ? 1 : (int)want;
    int64_t mt = cdiv(g->m, g->t->mr), nt_cols = cdiv(g->n, g->t->nr);
    g->pm = g->pn = 1;
    double best = -1;
    for (int pm = 1; pm <= nt; pm++) {
        if (nt % pm) continue;
        int pn = nt / pm;
        if (pm > mt || pn > nt_cols) continue;
        double cost = (double)cdiv(mt, pm) * g->t->mr + (double)cdiv(nt_cols, pn) * g->t->nr;
        if (best < 0 || cost < best) {
            best = cost;
            g->pm = pm;
            g->pn = pn;
        }
    }
}

/* k in equal blocks of at most the tile's kc: a pack made beforehand
 * relies on the cut depending on k alone. */
static int64_t k_block(const tile_def *t, int64_t k) { return cdiv(k, cdiv(k, t->kc)); }

static int gemm_blocked(cn_dtype dt, int64_t m, int64_t n, int64_t k, const void *a, int64_t rsa,
                        int64_t csa, const void *b, int64_t rsb, int64_t csb, void *c,
                        int64_t ldc, const void *apk, const void *bpk, const cn_gemm_out *eo) {
    gemm_plan g = {0};
    g.apk = apk, g.bpk = bpk;
    g.eo = eo;
    g.t = pick_tile(dt);
    /* Rows that the 8-row tile leaves a partial panel of and 7-row tiles
     * fill with less padding (the 49 pixels of a 7x7 plane in a 1x1
     * convolution made transposed: conv.c) take the 7-row tile, where A is
     * packed here. Each element's sum is the same either way. */
    if (!apk && forced_f32 < 0 && g.t == &tiles_f32[TILE_F32_8x32] &&
        cdiv(m, 7) * 7 < cdiv(m, 8) * 8)
        g.t = &tiles_f32[TILE_F32_7x32];
    g.es = cn_dsize(dt);
    g.pack = dt == CN_F32 ? pack_f32 : pack_f64;
    g.m = m, g.n = n, g.k = k;
    g.a = a, g.b = b, g.c = c;
    g.rsa = rsa, g.csa = csa, g.rsb = rsb, g.csb = csb, g.ldc = ldc;
    g.kc = k_block(g.t, k);
    plan_grid(&g);
    /* The largest blocks any rectangle uses (multiples of the tile). */
    g.mc = imin(g.t->mc, round_up(cdiv(m, g.pm), g.t->mr));
    g.nc = imin(g.t->nc, round_up(cdiv(n, g.pn), g.t->nr));
    g.apad = round_up(m, g.t->mr), g.bpad = round_up(n, g.t->nr);
    /* A whole per slot where B is packed, the columns take several blocks
     * and A's part is at most GEMM_WHOLE_A_BYTES. */
    int64_t a_rows = round_up(cdiv(m, g.pm), g.t->mr);
    g.a_whole = !apk && bpk && cdiv(n, g.pn) > g.nc &&
                (size_t)(a_rows * k) * g.es <= GEMM_WHOLE_A_BYTES;
    g.a_bytes = (size_t)(g.a_whole ? a_rows * k : (apk ? 0 : g.mc) * g.kc) * g.es;
    g.slot_bytes = g.a_bytes + (size_t)((bpk ? 0 : g.nc) * g.kc) * g.es;
    g.slot_bytes = (g.slot_bytes + CN_ALIGN - 1) / CN_ALIGN * CN_ALIGN;
    if (!g.slot_bytes) g.slot_bytes = CN_ALIGN; /* both operands packed */
    int slots = g.pm * g.pn;
    g.work = cn_alloc(g.slot_bytes * (size_t)slots);
    if (!g.work) return cn_failc(CN_ENOMEM, "matmul: out of memory for packing buffers");
    cn_parallel_for(slots, 1, gemm_slots, &g);
    cn_free(g.work);
    return CN_OK;
}

/* ------------------------------------------------------------------------ */
/* Matrix-vector products                                                   */
/* ------------------------------------------------------------------------ */

/* With one side of C a single row or column, a tile would be mostly padding.
 * dots: out[i*so] = sum_p mat[i*rs + p] * x[p] (rows with unit stride; 32
 * partial sums, combined in a fixed order). axpy: out[j] = sum_p x[p*sx] *
 * mat[p*rs + j] (rows of mat added into out). */
#define DEFINE_GEMV(T, SFX)                                                                        \
    typedef struct gemv_##SFX {                                                                    \
        int64_t k, rs, sx, so;                                                                     \
        const T *mat, *x;                                                                          \
        T *out;                                                                                    \
    } gemv_##SFX;                                                                                  \
                                                                                                   \
    CN_HOT_FN(dots_##SFX, (void *ctx, int64_t i0, int64_t i1), (ctx, i0, i1)) {                    \
        const gemv_##SFX *g = ctx;                                                                 \
        int64_t k = g->k;                                                                          \
        const T *restrict x = g->x;                                                                \
        for (int64_t i = i0; i < i1; i++) {                                                        \
            const T *restrict r = g->mat + i * g->rs;                                              \
            T acc[32];                                                                             \
            for (int l = 0; l < 32; l++) acc[l] = 0;                                               \
            int64_t p = 0;                                                                         \
            for (; p + 32 <= k; p += 32)                                                           \
                for (int l = 0; l < 32; l++) acc[l] += r[p + l] * x[p + l];                        \
            for (int l = 0; p < k; p++, l++) acc[l] += r[p] * x[p];                                \
            for (int w = 16; w > 0; w /= 2)                                                        \
                for (int l = 0; l < w; l++) acc[l] += acc[l + w];                                  \
            g->out[i * g->so] = acc[0];                                                            \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    CN_HOT_FN(axpy_##SFX, (void *ctx, int64_t j0, int64_t j1), (ctx, j0, j1)) {                    \
        const gemv_##SFX *g = ctx;                                                                 \
        T *restrict o = g->out + j0;                                                               \
        int64_t w = j1 - j0;                                                                       \
        for (int64_t j = 0; j < w; j++) o[j] = 0;                                                  \
        for (int64_t p = 0; p < g->k; p++) {                                                       \
            T xp = g->x[p * g->sx];                                                                \
            const T *restrict r = g->mat + p * g->rs + j0;                                         \
            for (int64_t j = 0; j < w; j++) o[j] += xp * r[j];                                     \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    static int gemv_run_##SFX(bool dot_form, int64_t len, int64_t k, const T *mat, int64_t rs,     \
                              const T *x, int64_t sx, T *out, int64_t so) {                        \
        T *xc = NULL;                                                                              \
        if (dot_form && sx != 1) { /* the dot loop wants x contiguous */                          \
            xc = cn_alloc(sizeof(T) * (size_t)k);                                                  \
            if (!xc) return cn_failc(CN_ENOMEM, "matmul: out of memory");                         \
            for (int64_t p = 0; p < k; p++) xc[p] = x[p * sx];                                     \
            x = xc;                                                                                \
            sx = 1;                                                                                \
        }                                                                                          \
        gemv_##SFX g = {k, rs, sx, so, mat, x, out};                                               \
        int64_t grain = imax(16, (1 << 16) / imax(k, 1));                                         \
        if (cn_in_parallel_region()) grain = len;                                                  \
        cn_parallel_for(len, grain, dot_form ? dots_##SFX : axpy_##SFX, &g);                       \
        cn_free(xc);                                                                               \
        return CN_OK;                                                                              \
    }

DEFINE_GEMV(float, f32)
DEFINE_GEMV(double, f64)

/* A product with m = 1 or n = 1 whose matrix has a unit stride: 1 if done
 * (or failed, in *rc), 0 if the blocked GEMM should take it. */
static int try_gemv(cn_dtype dt, int64_t m, int64_t n, int64_t k, const char *a, int64_t rsa,
                    int64_t csa, const char *b, int64_t rsb, int64_t csb, char *c, int64_t ldc,
                    int *rc) {
    bool dot_form;
    int64_t len, rs, sx, so;
    const char *mat, *x;
    if (n == 1 && (csa == 1 || (rsa == 1 && ldc == 1))) {
        len = m, mat = a, x = b, sx = rsb, so = ldc;
        dot_form = csa == 1;
        rs = dot_form ? rsa : csa;
    } else if (m == 1 && (rsb == 1 || csb == 1)) {
        len = n, mat = b, x = a, sx = csa, so = 1;
        dot_form = csb != 1;
        rs = dot_form ? csb : rsb;
    } else {
        return 0;
    }
    if (dt == CN_F32)
        *rc = gemv_run_f32(dot_form, len, k, (const float *)mat, rs, (const float *)x, sx,
                           (float *)c, so);
    else
        *rc = gemv_run_f64(dot_form, len, k, (const double *)mat, rs, (const double *)x, sx,
                           (double *)c, so);
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Integers                                                                 */
/* ------------------------------------------------------------------------ */

/* Rows of C as sums of rows of B scaled by elements of A, in blocks of B that
 * stay in cache. U is the unsigned type of the same width: products wrap, as
 * in PyTorch, instead of overflowing (undefined for signed types). B's rows
 * have unit stride. */
#define IGEMM_KB 64
#define IGEMM_NB 512

typedef struct igemm {
    int64_t n, k, rsa, csa, rsb, ldc;
    const void *a, *b;
    void *c;
} igemm;

#define DEFINE_IGEMM(U, SFX)                                                                       \
    CN_HOT_FN(igemm_##SFX, (void *ctx, int64_t i0, int64_t i1), (ctx, i0, i1)) {                   \
        const igemm *g = ctx;                                                                      \
        const U *a = g->a, *b = g->b;                                                              \
        U *c = g->c;                                                                               \
        for (int64_t jc = 0; jc < g->n; jc += IGEMM_NB) {                                          \
            int64_t nb = imin(IGEMM_NB, g->n - jc);                                                \
            for (int64_t i = i0; i < i1; i++)                                                      \
                memset(c + i * g->ldc + jc, 0, sizeof(U) * (size_t)nb);                            \
            for (int64_t pc = 0; pc < g->k; pc += IGEMM_KB) {                                      \
                int64_t kb = imin(IGEMM_KB, g->k - pc);                                            \
                for (int64_t i = i0; i < i1; i++) {                                                \
                    U *restrict cr = c + i * g->ldc + jc;                                          \
                    for (int64_t p = pc; p < pc + kb; p++) {                                       \
                        U av = a[i * g->rsa + p * g->csa];                                         \
                        const U *restrict br = b + p * g->rsb + jc;                                \
                        for (int64_t j = 0; j < nb; j++) cr[j] += (U)(av * br[j]);                 \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

DEFINE_IGEMM(uint8_t, u8)
DEFINE_IGEMM(uint32_t, u32)
DEFINE_IGEMM(uint64_t, u64)

static int gemm_int(cn_dtype dt, int64_t m, int64_t n, int64_t k, const void *a, int64_t rsa,
                    int64_t csa, const void *b, int64_t rsb, int64_t csb, void *c, int64_t ldc) {
    size_t es = cn_dsize(dt);
    void *bc = NULL;
    if (csb != 1 && n > 1) { /* the row loop wants B's rows contiguous */
        bc = cn_alloc(es * (size_t)(k * n));
        if (!bc) return cn_failc(CN_ENOMEM, "matmul: out of memory");
        for (int64_t p = 0; p < k; p++)
            for (int64_t j = 0; j < n; j++)
                memcpy((char *)bc + (size_t)(p * n + j) * es,
                       (const char *)b + (p * rsb + j * csb) * (int64_t)es, es);
        b = bc;
        rsb = n;
    }
    igemm g = {n, k, rsa, csa, rsb, ldc, a, b, c};
    cn_range_fn fn = es == 1 ? igemm_u8 : es == 4 ? igemm_u32 : igemm_u64;
    int64_t grain = imax(1, (1 << 16) / imax(1, n * k));
    cn_parallel_for(m, grain, fn, &g);
    cn_free(bc);
    return CN_OK;
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                             */
/* ------------------------------------------------------------------------ */

static void zero_c(cn_dtype dt, int64_t m, int64_t n, void *c, int64_t ldc) {
    size_t es = cn_dsize(dt);
    for (int64_t i = 0; i < m; i++) memset((char *)c + (size_t)(i * ldc) * es, 0, es * (size_t)n);
}

/* A stride along an axis of size 1 is never used: make it 1, which lets the
 * unit-stride paths take vectors and single rows whatever their layout. */
static void normalize_strides(int64_t m, int64_t n, int64_t k, int64_t *rsa, int64_t *csa,
                              int64_t *rsb, int64_t *csb) {
    if (m == 1) *rsa = 1;
    if (n == 1) *csb = 1;
    if (k == 1) *csa = *rsb = 1;
}

int cn_gemm_builtin(cn_dtype dt, int64_t m, int64_t n, int64_t k, const void *a, int64_t rsa,
                    int64_t csa, const void *b, int64_t rsb, int64_t csb, void *c, int64_t ldc) {
    if (m <= 0 || n <= 0) return CN_OK;
    normalize_strides(m, n, k, &rsa, &csa, &rsb, &csb);
    if (k <= 0) {
        zero_c(dt, m, n, c, ldc);
        return CN_OK;
    }
    if (dt == CN_F32 || dt == CN_F64) {
        int rc = CN_OK;
        if (try_gemv(dt, m, n, k, a, rsa, csa, b, rsb, csb, c, ldc, &rc)) return rc;
        return gemm_blocked(dt, m, n, k, a, rsa, csa, b, rsb, csb, c, ldc, NULL, NULL, NULL);
    }
    if (dt == CN_I32 || dt == CN_I64 || dt == CN_U8)
        return gemm_int(dt, m, n, k, a, rsa, csa, b, rsb, csb, c, ldc);
    return cn_failc(CN_EUNSUPPORTED, "matmul: no kernel for %s", cn_dtype_name(dt));
}

/* ------------------------------------------------------------------------ */
/* Operands packed once                                                     */
/* ------------------------------------------------------------------------ */

struct cn_gemm_pack {
    cn_dtype dt;
    bool b_side;
    const tile_def *t;   /* packed for this tile's panels and kc */
    int64_t rows, k;     /* m (A) or n (B), and k */
    int64_t pad;         /* rows rounded up to whole panels */
    int64_t count, gstride;
    const char *src;     /* what was packed, with gemm's strides for its side */
    int64_t rs, cs;
    const cn_storage *sto;
    uint32_t version;    /* sto's when packed */
    size_t mat_bytes;    /* one matrix's panels */
    char *data;
    void *key;           /* an opaque pack's key (t is NULL then), else NULL */
    size_t key_bytes;
};

cn_gemm_pack *cn_gemm_pack_new(cn_dtype dt, bool b_side, int64_t rows, int64_t k,
                               const cn_tensor *t, const void *src, int64_t rs, int64_t cs,
                               int64_t count, int64_t gstride) {
    if ((dt != CN_F32 && dt != CN_F64) || rows < 1 || k < 1 || count < 1) {
        cn_failc(CN_EINVAL, "gemm_pack: nothing to pack (%s, %lld x %lld)", cn_dtype_name(dt),
                 (long long)rows, (long long)k);
        return NULL;
    }
    cn_gemm_pack *pk = calloc(1, sizeof *pk);
    if (!pk) return cn_fail("gemm_pack: out of memory");
    const tile_def *tl = pick_tile(dt);
    int w = b_side ? tl->nr : tl->mr;
    size_t es = cn_dsize(dt);
    *pk = (cn_gemm_pack){dt, b_side, tl, rows, k, round_up(rows, w), count, gstride,
                         src, rs, cs, t ? t->storage : NULL,
                         t && t->storage ? t->storage->version : 0, 0, NULL, NULL, 0};
    pk->mat_bytes = (size_t)(pk->pad * k) * es;
    pk->data = cn_alloc(pk->mat_bytes * (size_t)count);
    if (!pk->data) {
        long long bytes = (long long)(pk->mat_bytes * (size_t)count);
        free(pk);
        return cn_fail("gemm_pack: out of memory for %lld bytes", bytes);
    }
    void (*pack)(int64_t, int64_t, int, const void *, int64_t, int64_t, void *) =
        dt == CN_F32 ? pack_f32 : pack_f64;
    /* Panels run along the rows of A and the columns of B. */
    int64_t prs = b_side ? cs : rs, pcs = b_side ? rs : cs;
    int64_t kc = k_block(tl, k);
    for (int64_t g = 0; g < count; g++) {
        const char *m = (const char *)src + (size_t)(g * gstride) * es;
        char *d = pk->data + pk->mat_bytes * (size_t)g;
        for (int64_t pc = 0; pc < k; pc += kc)
            pack(rows, imin(kc, k - pc), w, m + (pc * pcs) * (int64_t)es, prs, pcs,
                 d + (size_t)(pc * pk->pad) * es);
    }
    return pk;
}

cn_gemm_pack *cn_gemm_pack_opaque(const cn_tensor *t, size_t bytes, const void *key,
                                  size_t key_bytes) {
    cn_gemm_pack *pk = calloc(1, sizeof *pk);
    if (!pk || !(pk->key = malloc(key_bytes ? key_bytes : 1)) || !(pk->data = cn_alloc(bytes))) {
        cn_gemm_pack_free(pk);
        return cn_fail("gemm_pack: out of memory for %zu bytes", bytes);
    }
    memcpy(pk->key, key, key_bytes);
    pk->key_bytes = key_bytes;
    pk->dt = (cn_dtype)t->dtype;
    pk->src = cn_t_ptr(t);
    pk->sto = t->storage;
    pk->version = t->storage ? t->storage->version : 0;
    pk->mat_bytes = bytes;
    pk->count = 1;
    return pk;
}

void *cn_gemm_pack_opaque_data(const cn_gemm_pack *pk, const void *key, size_t key_bytes) {
    if (!pk || !pk->key || pk->key_bytes != key_bytes || memcmp(pk->key, key, key_bytes))
        return NULL;
    return pk->data;
}

void cn_gemm_pack_free(cn_gemm_pack *pk) {
    if (!pk) return;
    cn_free(pk->data);
    free(pk->key);
    free(pk);
}

size_t cn_gemm_pack_bytes(const cn_gemm_pack *pk) {
    return pk ? pk->mat_bytes * (size_t)pk->count : 0;
}

bool cn_gemm_pack_holds(const cn_gemm_pack *pk, const cn_tensor *t) {
    return pk && t && t->storage == pk->sto && t->storage->version == pk->version &&
           (const char *)cn_t_ptr(t) == pk->src;
}

bool cn_gemm_pack_current(const cn_gemm_pack *pk, const cn_tensor *t) {
    return cn_gemm_pack_holds(pk, t) && !pk->key && pk->t == pick_tile(pk->dt);
}

bool cn_gemm_pack_made_as(const cn_gemm_pack *pk, bool b_side, int64_t rows, int64_t k,
                          int64_t rs, int64_t cs, int64_t count, int64_t gstride) {
    return pk && !pk->key && pk->b_side == b_side && pk->rows == rows && pk->k == k &&
           pk->rs == rs && pk->cs == cs && pk->count == count && pk->gstride == gstride;
}

int cn_gemm_packed(cn_dtype dt, int64_t m, int64_t n, int64_t k, const void *a, int64_t rsa,
                   int64_t csa, const void *b, int64_t rsb, int64_t csb, void *c, int64_t ldc,
                   const cn_gemm_pack *pk, int64_t g, const cn_gemm_out *eo) {
    /* Exactly the operand the pack holds, or the products that do not pack
     * (vectors: try_gemv), go the usual way: the same bits either way. */
    bool bs = pk && pk->b_side;
    const void *op = bs ? b : a;
    int64_t rows = bs ? n : m, rs = bs ? rsb : rsa, cs = bs ? csb : csa;
    bool use = pk && pk->dt == dt && pk->t == pick_tile(dt) && g >= 0 && g < pk->count &&
               rows == pk->rows && k == pk->k && rs == pk->rs && cs == pk->cs &&
               op == pk->src + (size_t)(g * pk->gstride) * cn_dsize(dt);
    /* The blocked path is the one cn_gemm_builtin takes for these too
     * (f32/f64, neither side a vector, k > 0). */
    if (!(dt == CN_F32 || dt == CN_F64) || m <= 1 || n <= 1 || k <= 0) {
        int rc = cn_gemm_builtin(dt, m, n, k, a, rsa, csa, b, rsb, csb, c, ldc);
        if (rc == CN_OK && eo && m > 0 && n > 0) cn_gemm_out_apply(dt, c, m, n, ldc, eo);
        return rc;
    }
    normalize_strides(m, n, k, &rsa, &csa, &rsb, &csb);
    const char *data = use ? pk->data + pk->mat_bytes * (size_t)g : NULL;
    return gemm_blocked(dt, m, n, k, a, rsa, csa, b, rsb, csb, c, ldc, bs ? NULL : data,
                        bs ? data : NULL, eo);
}

void cn_gemm_out_apply(cn_dtype dt, void *c, int64_t m, int64_t n, int64_t ldc,
                       const cn_gemm_out *eo) {
    if (dt == CN_F32) out_rows_f32(c, m, n, ldc, eo);
    else if (dt == CN_F64) out_rows_f64(c, m, n, ldc, eo);
}

/* The output bounds offered to the step the calling thread runs. */
static _Thread_local cn_gemm_out *step_out;

cn_gemm_out *cn_gemm_out_offer(cn_gemm_out *eo) {
    cn_gemm_out *prev = step_out;
    step_out = eo;
    return prev;
}

bool cn_gemm_out_take(cn_gemm_out *eo) {
    if (!step_out) return false;
    *eo = *step_out;
    step_out->taken = true;
    step_out = NULL;
    return true;
}

/* The pack of the step the calling thread runs (set around its kernel). */
static _Thread_local const cn_gemm_pack *step_pack;

const cn_gemm_pack *cn_gemm_pack_set_step(const cn_gemm_pack *pk) {
    const cn_gemm_pack *prev = step_pack;
    step_pack = pk;
    return prev;
}

const cn_gemm_pack *cn_gemm_pack_step(void) { return step_pack; }

#ifdef CN_HAVE_CBLAS

/* How BLAS can read a rows x cols operand in row-major terms: CblasNoTrans
 * (unit column stride) or CblasTrans (unit row stride) with *ld, or -1 when
 * neither works (a stride that is negative, or rows that overlap). A stride
 * along an axis of size 1 is never used, so it may be anything. */
static int blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int64_t *ld) {
    if ((cs == 1 || cols == 1) && (rows == 1 || rs >= imax(1, cols))) {
        *ld = rows == 1 ? imax(1, cols) : rs;
        return CblasNoTrans;
    }
    if ((rs == 1 || rows == 1) && (cols == 1 || cs >= imax(1, rows))) {
        *ld = cols == 1 ? imax(1, rows) : cs;
        return CblasTrans;
    }
    return -1;
}

/* A row-major copy of a rows x cols operand, for BLAS. */
static void *copy_dense(cn_dtype dt, int64_t rows, int64_t cols, const void *src, int64_t rs,
                        int64_t cs) {
    void *dst = cn_alloc(cn_dsize(dt) * (size_t)(rows * cols));
    if (!dst) return cn_fail("matmul: out of memory");
    if (dt == CN_F32) {
        float *d = dst;
        const float *s = src;
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) d[i * cols + j] = s[i * rs + j * cs];
    } else {
        double *d = dst;
        const double *s = src;
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) d[i * cols + j] = s[i * rs + j * cs];
    }
    return dst;
}

static bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* One BLAS call on the calling thread: c (m x n) = a (m x k) b (k x n), with
 * a and b in BLAS layout (ta/tb, lda/ldb). */
static void blas_call(cn_dtype dt, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *a,
                      int64_t lda, const void *b, int64_t ldb, void *c, int64_t ldc) {
    int M = (int)m, N = (int)n, K = (int)k;
    if (dt == CN_F32)
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, a, (int)lda, b, (int)ldb, 0.0f, c,
                    (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, a, (int)lda, b, (int)ldb, 0.0, c,
                    (int)ldc);
}

typedef struct blas_split {
    cn_dtype dt;
    int ta, tb;
    int64_t m, n, k, lda, ldb, ldc;
    const char *a, *b;
    char *c;
    bool by_rows; /* split the rows of c (else its columns) */
    int64_t block; /* rows or columns per task, a multiple of the kernel's tile */
} blas_split;

static void blas_part(void *ctx, int64_t begin, int64_t end) {
    const blas_split *s = ctx;
    size_t es = cn_dsize(s->dt);
    for (int64_t t = begin; t < end; t++) {
        int64_t lo = t * s->block, hi = lo + s->block;
        if (s->by_rows) {
            if (hi > s->m) hi = s->m;
            /* rows lo..hi of a: NoTrans rows, or Trans (k x m stored) columns */
            const char *a = s->a + (size_t)(s->ta == CblasNoTrans ? lo * s->lda : lo) * es;
            blas_call(s->dt, s->ta, s->tb, hi - lo, s->n, s->k, a, s->lda, s->b, s->ldb,
                      s->c + (size_t)(lo * s->ldc) * es, s->ldc);
        } else {
            if (hi > s->n) hi = s->n;
            const char *b = s->b + (size_t)(s->tb == CblasNoTrans ? lo : lo * s->ldb) * es;
            blas_call(s->dt, s->ta, s->tb, s->m, hi - lo, s->k, s->a, s->lda, b, s->ldb,
                      s->c + (size_t)lo * es, s->ldc);
        }
    }
}

/* Products smaller than this many multiply-adds stay on one thread. */
#define BLAS_SPLIT_MACS (1 << 17)
/* Rows (or columns) of c per BLAS call below which a call's packing of the
 * other operand shows: 256 rows lose ~1% of a 1024^3 product against 512
 * on one core, 128 rows 12% (OpenBLAS 0.3.21, Zen 4). */
#define BLAS_MIN_BLOCK 256

static int gemm_blas(cn_dtype dt, int64_t m, int64_t n, int64_t k, const void *a, int64_t rsa,
                     int64_t csa, const void *b, int64_t rsb, int64_t csb, void *c, int64_t ldc) {
    int nt = cn_get_num_threads(); /* the first call also tells OpenBLAS */
    int64_t lda, ldb;
    int ta = blas_layout(m, k, rsa, csa, &lda), tb = blas_layout(k, n, rsb, csb, &ldb);
    void *ac = NULL, *bc = NULL;
    if (ta < 0) {
        if (!(ac = copy_dense(dt, m, k, a, rsa, csa))) return CN_ENOMEM;
        a = ac, ta = CblasNoTrans, lda = k, rsa = k, csa = 1;
    }
    if (tb < 0) {
        if (!(bc = copy_dense(dt, k, n, b, rsb, csb))) {
            cn_free(ac);
            return CN_ENOMEM;
        }
        b = bc, tb = CblasNoTrans, ldb = n, rsb = n, csb = 1;
    }
    int M = (int)m, N = (int)n, K = (int)k;
    if (n == 1) {
        /* c = A b: A is m x k, stored as itself (NoTrans) or as its transpose. */
        int rows = ta == CblasNoTrans ? M : K, cols = ta == CblasNoTrans ? K : M;
        if (dt == CN_F32)
            cblas_sgemv(CblasRowMajor, ta, rows, cols, 1.0f, a, (int)lda, b, (int)rsb, 0.0f, c,
                        (int)ldc);
        else
            cblas_dgemv(CblasRowMajor, ta, rows, cols, 1.0, a, (int)lda, b, (int)rsb, 0.0, c,
                        (int)ldc);
    } else if (m == 1) {
        /* c^T = B^T a^T: B is k x n; B^T is read with the opposite flag. */
        int tr = tb == CblasNoTrans ? CblasTrans : CblasNoTrans;
        int rows = tb == CblasNoTrans ? K : N, cols = tb == CblasNoTrans ? N : K;
        if (dt == CN_F32)
            cblas_sgemv(CblasRowMajor, tr, rows, cols, 1.0f, b, (int)ldb, a, (int)csa, 0.0f, c,
                        1);
        else
            cblas_dgemv(CblasRowMajor, tr, rows, cols, 1.0, b, (int)ldb, a, (int)csa, 0.0, c, 1);
    } else if (nt > 1 && !cn_in_parallel_region() &&
               (double)m * (double)n * (double)k >= BLAS_SPLIT_MACS) {
        /* Split the larger side of c into two blocks per thread, so that a
         * worker that is late costs half its share, not all of it; but into
         * one per thread where two would be under BLAS_MIN_BLOCK: each call
         * packs the whole of the other operand again, which at 128 rows
         * cost 12% of a 1024^3 product on one core (8 calls against 2).
         * Rounded to 16 rows/columns so the kernel's tiles stay whole, at
         * least 32. Each element of c is still one BLAS dot product over
         * all of k. */
        blas_split sp = {dt, ta, tb, m, n, k, lda, ldb, ldc, a, b, c, m >= n, 0};
        int64_t side = sp.by_rows ? m : n;
        int64_t block = cdiv(side, 2 * (int64_t)nt);
        if (block < BLAS_MIN_BLOCK) block = cdiv(side, nt);
        block = round_up(block, 16);
        if (block < 32) block = 32;
        sp.block = block;
        int64_t tasks = (side + block - 1) / block;
        cn_parallel_for(tasks, 1, blas_part, &sp);
    } else {
        blas_call(dt, ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
    }
    cn_free(ac);
    cn_free(bc);
    return CN_OK;
}

/* BLAS takes int sizes, and vectors (gemv) with positive increments. */
static bool blas_can(int64_t m, int64_t n, int64_t k, int64_t rsa, int64_t csa, int64_t rsb,
                     int64_t csb, int64_t ldc) {
    if (!fits_int(m) || !fits_int(n) || !fits_int(k) || !fits_int(ldc)) return false;
    if (!fits_int(imax(imax(iabs(rsa), iabs(csa)), imax(iabs(rsb), iabs(csb))))) return false;
    if (n == 1 && (rsb < 1 || ldc < 1)) return false;
    if (m == 1 && n != 1 && csa < 1) return false;
    return true;
}

#endif

/* OpenBLAS's cores (its dynamic.c) without AVX2+FMA kernels: SSE-era
 * cores, Sandy Bridge (AVX without FMA), AMD before Excavator. */
static const char *const narrow_cores[] = {
    "katmai",  "coppermine", "northwood",    "prescott",  "banias",     "atom",     "core2",
    "penryn",  "dunnington", "nehalem",      "athlon",    "opteron",    "opteron_sse3",
    "barcelona", "nano",     "bobcat",       "sandybridge", "bulldozer", "piledriver",
    "steamroller", "generic"};

bool cn_gemm_blas_core_narrow(const char *name) {
    if (!name) return false;
    for (size_t i = 0; i < sizeof narrow_cores / sizeof narrow_cores[0]; i++) {
        const char *p = name, *q = narrow_cores[i];
        while (*p && tolower((unsigned char)*p) == *q) p++, q++;
        if (!*p && !*q) return true;
    }
    return false;
}

#ifdef CN_HAVE_OPENBLAS
char *openblas_get_corename(void);
#endif

bool cn_gemm_blas_choose(const char *env, bool have_blas, const char *core, int isa, char *why,
                         size_t why_size) {
    const char *lib = core ? "OpenBLAS" : "BLAS";
    bool forced_blas = env && !strcmp(env, "blas"), forced_builtin = env && !strcmp(env, "builtin");
    if (!have_blas) {
        snprintf(why, why_size, "built-in (no BLAS in this build%s)",
                 forced_blas ? "; CN_GEMM=blas ignored" : "");
        return false;
    }
    if (forced_builtin) {
        snprintf(why, why_size, "built-in (CN_GEMM=builtin)");
        return false;
    }
    if (forced_blas) {
        snprintf(why, why_size, "%s (CN_GEMM=blas)", lib);
        return true;
    }
    /* Anything else in CN_GEMM is named, so a typo does not pass unseen. */
    char note[64] = "";
    if (env && *env) snprintf(note, sizeof note, "; CN_GEMM=%.20s not understood", env);
    if (isa >= CN_ISA_AVX2 && cn_gemm_blas_core_narrow(core)) {
        snprintf(why, why_size,
                 "built-in (OpenBLAS runs this CPU with %s's kernels, without AVX2+FMA; "
                 "CN_GEMM=blas overrides%s)", core, note);
        return false;
    }
    if (core) snprintf(why, why_size, "OpenBLAS (%s kernels%s)", core, note);
    else snprintf(why, why_size, "BLAS%s%s%s", *note ? " (" : "", *note ? note + 2 : "",
                  *note ? ")" : "");
    return true;
}

/* Decided once, on the first product or question. */
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static bool blas_use;
static char blas_why[192];

static void blas_decide(void) {
    const char *core = NULL;
    bool have = false;
#ifdef CN_HAVE_CBLAS
    have = true;
#endif
#ifdef CN_HAVE_OPENBLAS
    core = openblas_get_corename();
#endif
    blas_use = cn_gemm_blas_choose(getenv("CN_GEMM"), have, core, cn_isa(), blas_why,
                                   sizeof blas_why);
}

bool cn_gemm_uses_blas(const char **why) {
    pthread_once(&blas_once, blas_decide);
    if (why) *why = blas_why;
    return blas_use;
}

const char *cn_cpu_gemm(void) {
    const char *why;
    cn_gemm_uses_blas(&why);
    return why;
}

int cn_gemm(cn_dtype dt, int64_t m, int64_t n, int64_t k, const void *a, int64_t rsa, int64_t csa,
            const void *b, int64_t rsb, int64_t csb, void *c, int64_t ldc) {
    normalize_strides(m, n, k, &rsa, &csa, &rsb, &csb);
#ifdef CN_HAVE_CBLAS
    if ((dt == CN_F32 || dt == CN_F64) && m > 0 && n > 0 && k > 0 && cn_gemm_uses_blas(NULL) &&
        blas_can(m, n, k, rsa, csa, rsb, csb, ldc))
        return gemm_blas(dt, m, n, k, a, rsa, csa, b, rsb, csb, c, ldc);
#endif
    return cn_gemm_builtin(dt, m, n, k, a, rsa, csa, b, rsb, csb, c, ldc);
}
