/* Direct depthwise convolution (see conv.h): one input channel per group and
 * a few output channels per group (the multiplier, Og = O / C), as in
 * MobileNet, EfficientNet and ConvNeXt. im2col + GEMM runs these as
 * products with one row (M = 1) behind a copy of the image per tap; here
 * each is a small stencil over one plane.
 *
 * The three products share one kernel, `stencil`:
 *   out[r][c] = b + sum over planes q, taps (i, j) of
 *               k_q[i][j] P_q[r sh + i dh][c sw + j dw]
 * where P_q is the input plane copied into a buffer with its zero padding
 * around it, tall and wide enough that no tap needs a bounds check (the
 * forward product's aligned-rows kernel reads some planes in place
 * instead, DEFINE_AROWS_ONE):
 *   fwd:   P = x's plane, padded by (ph, pw); k = w's taps.
 *   dgrad: P = dy's planes of the group with sh - 1 zero rows (sw - 1 zero
 *          columns) between theirs, padded by (KH - 1) dh - ph and
 *          (KW - 1) dw - pw (negative: cropped); k = w's taps reversed;
 *          stride 1. On a stride-2 layer three products in four are of
 *          zeros; that keeps one kernel for every stride, and
 *          bench/bench_dwconv had it level with oneDNN there at batch 1
 *          in two runs of three.
 *   wgrad: per tap, the sum over samples and output pixels of
 *          dy[oh][ow] P[oh sh + i dh][ow sw + j dw], in VL lanes that a
 *          fixed tree adds up at the end.
 * Outputs are made in blocks of RB rows x one vector of VL columns held in
 * registers (the buffers are as wide as the columns rounded up to VL),
 * written with GCC's vector extensions (as pool_max2x2.c: GCC's own
 * vectoriser kept the block's sums in scalar registers) and compiled for
 * each CN_HOT_FN level (32-byte vectors, and for f32 at the AVX-512 level
 * 64-byte ones where a plane's rows are wide enough: f32_fn); other
 * compilers take the GEMM path. Forward products at stride 1 or 2 on
 * narrow planes take the aligned-rows kernel instead (DEFINE_AROWS_ONE:
 * each padded row loaded once and shifted in registers), GCC only.
 * Products are contracted to FMAs, as in conv.c, so the default level's
 * bits differ from the others' in the last place.
 *
 * Every output element is summed on one thread in one order (bias, planes,
 * taps in row order; the weight gradient: samples in order, then the lanes'
 * tree), so the bits do not depend on the thread count. A product with a
 * zero of the padding adds exactly 0 (unless the weight is inf or NaN,
 * which the reference loops would skip). */
#include "conv.h"
#include "epilogue.h"
#include "gemm.h"

#include <stdatomic.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast")
#endif

#if defined(__GNUC__)

/* A register block is RB output rows by one 32-byte vector of columns
 * (VL = 8 floats or 4 doubles): RB independent sums in flight. 7 rows (the
 * planes of these networks have 112, 56, 28, 14 or 7) measured no faster
 * on wide planes (the compiler runs out of registers for their addresses),
 * but where a row is less than two vectors (block2 does not apply) 3x3
 * blocks of RB_NARROW rows ran 1.1-1.2x faster: 4 sums in flight had left
 * the multiply-adds waiting on each other. Planes of fewer rows go one row
 * at a time. */
#define RB 4
#define RB_NARROW 7
/* Taps of a kernel row whose weight-gradient sums run side by side. */
#define WJ 7
/* Output rows per band of a forward plane (fwd_items): a multiple of RB;
 * and the size of plane buffer from which planes go in bands. */
#define BAND 8
#define BAND_MIN_BYTES (32 << 10)

bool cn_dw_conv_takes(const cn_conv_geom *g) {
    return g->groups == g->C && g->C > 0 && g->O <= CN_DW_MAX_MULT * g->C;
}

/* The stencil's geometry (see the header comment). */
typedef struct stencil {
    int64_t OH, OW, OWr; /* outputs; OWr = OW rounded up to the vector */
    int64_t KH, KW, sh, sw, dh, dw;
    int64_t Hp, Wp;      /* the padded plane */
    /* Its layout: rows Wr apart, Wr = Wp; or, for a forward product with a
     * column stride of 2 (and no column dilation), each row split into its
     * even columns and then its odd ones, Wh each (Wr = 2 Wh), so that
     * every tap reads a plain vector where it would pick every other
     * element out of two (a shuffle per tap: such layers ran at a third of
     * the stride-1 ones' speed per multiply-add). */
    int64_t Wr, Wh;
} stencil;

static stencil stencil_of(int64_t OH, int64_t OW, const cn_conv_geom *g, int64_t sh, int64_t sw,
                          int64_t VL) {
    stencil s = {OH, OW, (OW + VL - 1) / VL * VL, g->KH, g->KW, sh, sw, g->dh, g->dw, 0, 0, 0, 0};
    s.Hp = OH > 0 ? (OH - 1) * sh + (g->KH - 1) * g->dh + 1 : 0;
    s.Wp = OW > 0 ? (s.OWr - 1) * sw + (g->KW - 1) * g->dw + 1 : 0;
    s.Wr = s.Wp;
    return s;
}

/* The forward product's layout: stride-2 columns split (see stencil). */
static void split_columns(stencil *s) {
    if (s->sw != 2 || s->dw != 1) return;
    s->Wh = (s->Wp + 1) / 2;
    s->Wr = 2 * s->Wh;
}

/* Where tap (i, j) of a block's first output is, from the block's origin
 * in a plane; sw 0: rows split into even and odd columns, tap j in half
 * j & 1 (a column stride of 2). */
static inline __attribute__((always_inline)) int64_t tap_offset(const stencil *s, int64_t sw,
                                                                int64_t i, int64_t j) {
    return i * s->dh * s->Wr + (sw == 0 ? (j & 1) * s->Wh + (j >> 1) : j * s->dw);
}

/* A zeroed buffer, or NULL. */
static void *zalloc(size_t nbytes) {
    void *p = cn_alloc(nbytes);
    if (p) memset(p, 0, nbytes);
    return p;
}

/* Elements a plane buffer holds past Hp x Wp: a stride-2 load reads two
 * vectors, one element beyond the last it keeps, and the split copy's
 * masked vector of a narrow odd half writes up to a vector of zeros past
 * the last row (pad_plane_split). */
#define SLACK 32

#if defined(__clang__)
#define EVEN_f32(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14)
#define EVEN_f32z(a, b)                                                                            \
    __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
#define EVEN_f64(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6)
#else
#define EVEN_f32(a, b) __builtin_shuffle(a, b, (vi_f32){0, 2, 4, 6, 8, 10, 12, 14})
#define EVEN_f32z(a, b)                                                                            \
    __builtin_shuffle(a, b, (vi_f32z){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30})
#define EVEN_f64(a, b) __builtin_shuffle(a, b, (vi_f64){0, 2, 4, 6})
/* The odd lanes of a and b side by side (EVEN's other half). */
#define ODD_f32(a, b) __builtin_shuffle(a, b, (vi_f32){1, 3, 5, 7, 9, 11, 13, 15})
#define ODD_f32z(a, b)                                                                             \
    __builtin_shuffle(a, b, (vi_f32z){1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31})
#define ODD_f64(a, b) __builtin_shuffle(a, b, (vi_f64){1, 3, 5, 7})
/* Lanes j .. j + VL - 1 of a and b side by side (a two-source permute). */
#define IOTA_f32 ((vi_f32){0, 1, 2, 3, 4, 5, 6, 7})
#define IOTA_f32z ((vi_f32z){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
#define IOTA_f64 ((vi_f64){0, 1, 2, 3})
#define SHIFT(SFX, IT, a, b, j) __builtin_shuffle(a, b, IOTA_##SFX + (IT)(j))
#define DW_AROWS 1
/* Loops whose indices must be constants for the sums to stay in registers. */
#define UNROLL _Pragma("GCC unroll 32")
#endif

/* Macros rather than functions: vectors passed by value would change the
 * calling convention between the ISA variants (pool_max2x2.c). */
#define LD(SFX, p) (*(const vu_##SFX *)(const void *)(p))
#define ST(SFX, p, v) (*(vu_##SFX *)(void *)(p) = (v))
/* v = the VL elements p[0], p[sw], p[2 sw], ... */
#define LOAD_STRIDED(SFX, VL, v, p, sw)                                                            \
    do {                                                                                           \
        if ((sw) == 1) v = LD(SFX, p);                                                             \
        else if ((sw) == 2) v = EVEN_##SFX(LD(SFX, p), LD(SFX, (p) + VL));                         \
        else                                                                                       \
            for (int t_ = 0; t_ < VL; t_++) v[t_] = (p)[t_ * (sw)];                                \
    } while (0)

/* The stencil with a K x K kernel and a column stride of 1 or 2 as
 * constants: 1.3x faster than with them as variables for 5x5 and 7x7
 * (best of 100 passes, one thread), but 1.1x slower for 3x3, which
 * therefore stays on the general function. */
#define DEFINE_SQUARE(T, SFX, K)                                                                   \
    CN_HOT_FN(stencil##K##_##SFX, (const stencil *s, const T *P, int64_t nk, const T *k, T b,     \
                                   T *y),                                                          \
              (s, P, nk, k, b, y)) {                                                               \
        if (s->sw == 1) rows_##SFX(s, P, nk, k, b, 1, K, K, y);                                    \
        else if (s->Wh) rows_##SFX(s, P, nk, k, b, 0, K, K, y);                                    \
        else rows_##SFX(s, P, nk, k, b, 2, K, K, y);                                               \
    }

/* Where the aligned-rows kernel reads a plane: in x (f32 or f64), the
 * plane's H x W elements at x, its padding (top rows, left columns), and
 * how many elements of x lie before and after the plane, which a row's
 * whole vectors may read past its edges. */
typedef struct arows_src {
    const void *x;
    int64_t H, W, top, left;
    int64_t before, after;
} arows_src;

/* Whether the aligned-rows kernel at stride S with rows of NV vectors
 * reads x's rows in place rather than a padded copy P: all but stride 1
 * with one vector a row. The kernels and the caller (which makes P) both
 * go by it. */
#define AROWS_IN_PLACE(S, NV) ((S) != 1 || (NV) != 1)

#ifdef DW_AROWS
/* A forward product at stride S of 1 or 2 (rows and columns), without
 * dilation, K x K taps, whose padded rows fit NV vectors (at stride 2 each
 * half of a row, its even and its odd columns, does): blocks of R output
 * rows x NV vectors held in registers, each padded row the block reads
 * loaded once and shifted in registers for the K taps of its row (a
 * two-source permute), then added into each of the block's rows it
 * reaches. The rows come from P, the plane copied with its padding, rows
 * NV VL apart so that every load is aligned; or (AROWS_IN_PLACE) from x
 * itself, S NV whole vectors from the row's column -left on, split into
 * halves by permutes at stride 2, the lanes outside the plane zeroed (a
 * row whose vectors would reach outside x is copied first). The
 * stencil's loads at every tap had been unaligned, nearly all of them
 * across two cache lines for 64-byte vectors: MobileNetV2's 14x14
 * layers had run at half of ONNX Runtime's speed. Each output is summed
 * in the stencil's order (bias, then taps in row order) from the same
 * values, so the bits are the same. Needs OH >= R. */
#define DEFINE_AROWS_ONE(T, SFX, VL, IT, S, K, NV, R)                                              \
    AROWS_FN_##SFX(arows##S##_##K##_##NV##_##SFX,                                                  \
                   (const arows_src *src, const T *P, int64_t OH, int64_t OW, const T *k, T b,     \
                    const cn_gemm_out *eo, T *y),                                                  \
                   (src, P, OH, OW, k, b, eo, y)) {                                                \
        const int64_t end = OH * OW, H = src->H, W = src->W, left = src->left;                     \
        const int64_t Wh = (NV) * (VL), Wr = (S) * Wh; /* P's layout */                            \
        const T *x = (const T *)src->x;                                                            \
        /* The lanes of a row's vectors (of a half's, at stride 2) that hold                       \
         * an element of the plane: the others are its zero padding. */                            \
        vi_##SFX keep[S][NV];                                                                      \
        for (int h = 0; h < (S) && AROWS_IN_PLACE(S, NV); h++)                                     \
            for (int v = 0; v < (NV); v++)                                                         \
                for (int l = 0; l < (VL); l++) {                                                   \
                    const int64_t c = (S) * (v * (VL) + l) + h - left;                             \
                    keep[h][v][l] = c >= 0 && c < W ? -1 : 0;                                      \
                }                                                                                  \
        /* -0 + x is x for every x, a bound -0 included (+0 + -0 is +0) */                         \
        const v_##SFX lo = -(v_##SFX){0} + (T)(eo ? eo->lo : 0);                                   \
        const v_##SFX hi = -(v_##SFX){0} + (T)(eo ? eo->hi : 0);                                   \
        for (int64_t r0 = 0; r0 < OH; r0 += (R)) {                                                 \
            const int64_t r = imin(r0, OH - (R));                                                  \
            v_##SFX acc[R][NV];                                                                    \
            UNROLL for (int rr = 0; rr < (R); rr++)                                                \
                UNROLL for (int v = 0; v < (NV); v++) acc[rr][v] = (v_##SFX){0} + b;               \
            UNROLL for (int q = 0; q < (S) * ((R) - 1) + (K); q++) {                               \
                /* The padded row's vectors (at stride 2 its even columns'                         \
                 * and its odd columns'), read from x's row in S NV whole                          \
                 * vectors from its column -left on, the lanes outside the                         \
                 * plane zeroed; from a copy of the row where those vectors                        \
                 * would reach outside x. */                                                       \
                v_##SFX in[S][(NV) + 1];                                                           \
                const int64_t sr = (S) * r + q - src->top;                                         \
                UNROLL for (int h = 0; h < (S); h++) in[h][NV] = (v_##SFX){0};                     \
                if (!AROWS_IN_PLACE(S, NV)) { /* from P, a row every Wr */                         \
                    UNROLL for (int h = 0; h < (S); h++)                                           \
                        UNROLL for (int v = 0; v < (NV); v++)                                      \
                            in[h][v] = LD(SFX, P + ((S) * r + q) * Wr + h * Wh + v * (VL));        \
                } else if (sr < 0 || sr >= H) {                                                    \
                    UNROLL for (int h = 0; h < (S); h++)                                           \
                        UNROLL for (int v = 0; v < (NV); v++) in[h][v] = (v_##SFX){0};             \
                } else {                                                                           \
                    const T *row = x + sr * W, *base;                                              \
                    T copy[(S) * (NV) * (VL)];                                                     \
                    const uintptr_t first =                                                        \
                        (uintptr_t)row - (uintptr_t)(left * (int64_t)sizeof(T));                   \
                    if (left <= sr * W + src->before &&                                            \
                        (S) * (NV) * (VL) - left <= (H - sr) * W + src->after)                     \
                        base = (const T *)first;                                                   \
                    else {                                                                         \
                        for (int t = 0; t < (S) * (NV) * (VL); t++) {                              \
                            const int64_t c = t - left;                                            \
                            copy[t] = c >= 0 && c < W ? row[c] : 0;                                \
                        }                                                                          \
                        base = copy;                                                               \
                    }                                                                              \
                    UNROLL for (int v = 0; v < (NV); v++) {                                        \
                        if ((S) == 1) {                                                            \
                            in[0][v] = (v_##SFX)((vi_##SFX)LD(SFX, base + v * (VL)) & keep[0][v]); \
                            continue;                                                              \
                        }                                                                          \
                        const v_##SFX a0 = LD(SFX, base + 2 * v * (VL));                           \
                        const v_##SFX a1 = LD(SFX, base + 2 * v * (VL) + (VL));                    \
                        in[0][v] = (v_##SFX)((vi_##SFX)EVEN_##SFX(a0, a1) & keep[0][v]);           \
                        in[(S) - 1][v] = (v_##SFX)((vi_##SFX)ODD_##SFX(a0, a1) & keep[(S) - 1][v]); \
                    }                                                                              \
                }                                                                                  \
                UNROLL for (int j = 0; j < (K); j++) {                                             \
                    const int h = j % (S), o = j / (S);                                            \
                    v_##SFX sh[NV];                                                                \
                    UNROLL for (int v = 0; v < (NV); v++)                                          \
                        sh[v] = o ? SHIFT(SFX, IT, in[h][v], in[h][v + 1], o) : in[h][v];          \
                    UNROLL for (int i = 0; i < (K); i++) {                                         \
                        const int rr = (q - i) / (S);                                              \
                        if (q < i || (q - i) % (S) || rr >= (R)) continue;                         \
                        const v_##SFX wv = (v_##SFX){0} + k[i * (K) + j];                          \
                        UNROLL for (int v = 0; v < (NV); v++) acc[rr][v] += wv * sh[v];            \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
            /* The step's bounds (cn_gemm_out's: lo > v ? lo : v, then hi < v ?                    \
             * hi : v, which keep a NaN), here rather than in a pass of                            \
             * their own. A vector past the row's end is stored whole where                        \
             * what it writes past the row lies in the plane's later rows,                         \
             * which are stored after it. */                                                       \
            UNROLL for (int rr = 0; rr < (R); rr++)                                                \
                UNROLL for (int v = 0; v < (NV); v++) {                                            \
                    if (eo) {                                                                      \
                        vi_##SFX m = lo > acc[rr][v];                                              \
                        acc[rr][v] = (v_##SFX)((m & (vi_##SFX)lo) | (~m & (vi_##SFX)acc[rr][v]));  \
                        m = hi < acc[rr][v];                                                       \
                        acc[rr][v] = (v_##SFX)((m & (vi_##SFX)hi) | (~m & (vi_##SFX)acc[rr][v]));  \
                    }                                                                              \
                    const int64_t at = (r + rr) * OW + v * (VL), n = imin(VL, OW - v * (VL));      \
                    if (n == (VL) || at + (VL) <= end) ST(SFX, y + at, acc[rr][v]);                \
                    else                                                                           \
                        for (int t = 0; t < (VL); t++)                                             \
                            if (t < n) y[at + t] = acc[rr][v][t];                                  \
                }                                                                                  \
        }                                                                                          \
    }
/* 5x5 and 7x7 kernels with rows of two vectors were no faster than the
 * stencil (7x7 slower): their weights no longer fit the registers. 7x7
 * kernels with rows of one vector (ConvNeXt-T's three layers on 7x7 planes,
 * 1.25x faster) and f64 are left to the stencil too: fully unrolled, their
 * variants had made this file take four times as long to compile. */
#define DEFINE_AROWS(T, SFX, VL, IT)                                                               \
    DEFINE_AROWS_ONE(T, SFX, VL, IT, 1, 3, 1, 7)                                                   \
    DEFINE_AROWS_ONE(T, SFX, VL, IT, 1, 3, 2, 4)                                                   \
    DEFINE_AROWS_ONE(T, SFX, VL, IT, 1, 5, 1, 7)                                                   \
    DEFINE_AROWS_ONE(T, SFX, VL, IT, 2, 3, 1, 7)                                                   \
    DEFINE_AROWS_ONE(T, SFX, VL, IT, 2, 3, 2, 4)                                                   \
    DEFINE_AROWS_ONE(T, SFX, VL, IT, 2, 5, 1, 7)                                                   \
    typedef void (*arows_fn_##SFX)(const arows_src *src, const T *P, int64_t OH, int64_t OW,       \
                                   const T *k, T b, const cn_gemm_out *eo, T *y);                  \
    /* The kernel for a forward product, and its vectors per row (or half                          \
     * row: *nv), or NULL. */                                                                      \
    static arows_fn_##SFX arows_pick_##SFX(const cn_conv_geom *g, int *nv) {                       \
        static const arows_fn_##SFX fns[2][2][2] = {                                               \
            {{arows1_3_1_##SFX, arows1_3_2_##SFX}, {arows1_5_1_##SFX, NULL}},                      \
            {{arows2_3_1_##SFX, arows2_3_2_##SFX}, {arows2_5_1_##SFX, NULL}}};                     \
        const int64_t S = g->sh;                                                                   \
        if ((S != 1 && S != 2) || g->sw != S || g->dh != 1 || g->dw != 1 || g->KH != g->KW ||      \
            (g->KH != 3 && g->KH != 5))                                                            \
            return NULL;                                                                           \
        /* the padded row (at stride 2, each half of it) the outputs read */                      \
        const int64_t width = S == 1 ? g->OW + g->KW - 1 : g->OW + (g->KW - 1) / 2;                \
        const int n = width <= (VL) ? 1 : width <= 2 * (VL) ? 2 : 0;                               \
        if (!n || g->OH < (n == 1 ? 7 : 4)) return NULL;                                           \
        *nv = n;                                                                                   \
        return fns[S - 1][g->KH / 2 - 1][n - 1];                                                   \
    }
#else
#define DEFINE_AROWS(T, SFX, VL, IT) DEFINE_AROWS_NONE(T, SFX, VL, IT)
#endif
/* No aligned-rows kernels (f64, or not GCC). */
#define DEFINE_AROWS_NONE(T, SFX, VL, IT)                                                          \
    typedef void (*arows_fn_##SFX)(const arows_src *src, const T *P, int64_t OH, int64_t OW,      \
                                   const T *k, T b, const cn_gemm_out *eo, T *y);                 \
    static inline arows_fn_##SFX arows_pick_##SFX(const cn_conv_geom *g, int *nv) {                \
        (void)g, (void)nv;                                                                         \
        return NULL;                                                                               \
    }
#define DEFINE_AROWS_f32 DEFINE_AROWS
#define DEFINE_AROWS_f32z DEFINE_AROWS
/* The 64-byte f32 kernels run at the AVX-512 level only (f32_fn): only
 * that variant is compiled (the others, lowered to narrower vectors, had
 * been most of this file's compile time). */
#define AROWS_FN_f32 CN_HOT_FN
#if defined(__AVX512F__) || !defined(CN_ISA_HAVE_AVX512)
#define AROWS_FN_f32z CN_HOT_FN
#else
#define AROWS_FN_f32z(NAME, PARAMS, ARGS)                                                          \
    CN_ISA_INLINE_ void NAME##_body_ PARAMS;                                                       \
    CN_ISA_AVX512_DEF_(NAME, PARAMS, ARGS)                                                         \
    static void NAME PARAMS { NAME##_avx512_ ARGS; }                                               \
    CN_ISA_INLINE_ void NAME##_body_ PARAMS
#endif
#define DEFINE_AROWS_f64 DEFINE_AROWS_NONE
#define ARROWS_PICK(SFX, g, nv) arows_pick_##SFX(g, nv)

#define DEFINE_DW(T, SFX, VL, IT)                                                                  \
    typedef T v_##SFX __attribute__((vector_size(VL * sizeof(T))));                                \
    typedef T vu_##SFX __attribute__((vector_size(VL * sizeof(T)), aligned(1), may_alias));        \
    typedef IT vi_##SFX __attribute__((vector_size(VL * sizeof(T))));                              \
                                                                                                   \
    /* src [H, W]'s element (r, c) into P [Hp, Wp] at (top + r uh,                               \
     * left + c uw) where that lies inside rows [p0, p1). The rest of P is                        \
     * zeroed once when it is allocated: each plane writes the same places. */                   \
    static void pad_plane_##SFX(const T *src, int64_t H, int64_t W, int64_t uh, int64_t uw,       \
                                int64_t top, int64_t left, T *P, int64_t p0, int64_t p1,          \
                                int64_t Wp) {                                                      \
        int64_t r0 = imax(0, ceil_div(p0 - top, uh)), r1 = imin(H, ceil_div(p1 - top, uh));        \
        int64_t c0 = imax(0, ceil_div(-left, uw)), c1 = imin(W, ceil_div(Wp - left, uw));          \
        for (int64_t r = r0; r < r1; r++) {                                                        \
            const T *s = src + r * W;                                                              \
            T *d = P + (top + r * uh) * Wp + left;                                                 \
            if (uw == 1) memcpy(d + c0, s + c0, sizeof(T) * (size_t)imax(0, c1 - c0));             \
            else                                                                                   \
                for (int64_t c = c0; c < c1; c++) d[c * uw] = s[c];                                \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* The same into a plane whose rows are split into even and odd                               \
     * columns (stencil.Wh), for stride 1 (uh = uw = 1); a hot loop (in the                       \
     * baseline's 4-wide vectors it was 5% of MobileNetV2). Rows [p0, p1) of P. */               \
    CN_HOT_FN(pad_plane_split_##SFX, (const T *src, int64_t H, int64_t W, int64_t top,             \
                                      int64_t left, T *P, const stencil *s, int64_t p0,            \
                                      int64_t p1),                                                 \
              (src, H, W, top, left, P, s, p0, p1)) {                                              \
        int64_t r0 = imax(0, p0 - top), r1 = imin(H, p1 - top);                                    \
        int64_t c0 = imax(0, -left), c1 = imin(W, s->Wp - left);                                   \
        /* Padded column x = left + c goes to half x & 1, place x >> 1: the                        \
         * halves' places [e0, e1) and [o0, o1), each a loop GCC vectorises                        \
         * (reading every other element, writing in a row). */                                    \
        const int64_t x0 = left + c0, x1 = left + c1;                                              \
        const int64_t e0 = (x0 + 1) / 2, e1 = (x1 + 1) / 2, o0 = x0 / 2, o1 = x1 / 2;              \
        for (int64_t r = r0; r < r1; r++) {                                                        \
            const T *restrict sr = src + r * W;                                                    \
            T *restrict d = P + (top + r) * s->Wr;                                                 \
            /* Whole vectors, the last one ending at the half's end (an                            \
             * element written twice gets the same value), where GCC's                             \
             * loops peel elements for alignment and leave a scalar tail:                          \
             * a 56-wide stride-2 layer of 144 channels, timed alone, ran                          \
             * 1.15x faster.                                                                       \
             * Each reads one element past the last it keeps, which lies in                        \
             * the next row: the plane's last row takes the loops. */                              \
            if (r + 1 < H && e1 - e0 >= VL && o1 - o0 >= VL) {                                     \
                for (int64_t e = e0;; e += VL) {                                                   \
                    const int64_t u = imin(e, e1 - VL);                                            \
                    const T *p = sr + 2 * u - left;                                                \
                    ST(SFX, d + u, EVEN_##SFX(LD(SFX, p), LD(SFX, p + VL)));                       \
                    if (u == e1 - VL) break;                                                       \
                }                                                                                  \
                for (int64_t o = o0;; o += VL) {                                                   \
                    const int64_t u = imin(o, o1 - VL);                                            \
                    const T *p = sr + 2 * u + 1 - left;                                            \
                    ST(SFX, d + s->Wh + u, EVEN_##SFX(LD(SFX, p), LD(SFX, p + VL)));               \
                    if (u == o1 - VL) break;                                                       \
                }                                                                                  \
                continue;                                                                          \
            }                                                                                      \
            /* Halves narrower than a vector (planes of 14 and 28 columns):                        \
             * one vector each, its lanes past the half zeroed (the loops                          \
             * below had been 56% of a 576-channel 14-wide layer, which ran                        \
             * 1.44x faster this way, bench_dwconv --best). What they                              \
             * write past the half is zeros, in the padding of this row and                        \
             * the next (rows are filled in order, and the buffer has SLACK                        \
             * past its end) or in the odd half, which is written after. */                        \
            const int64_t avail = (H - r) * W; /* elements of the plane from sr on */              \
            if (e1 - e0 < VL && o1 - o0 < VL && 2 * e0 - left + 2 * VL <= avail &&                 \
                2 * o0 + 1 - left + 2 * VL <= avail) {                                             \
                vi_##SFX lane;                                                                     \
                for (int t = 0; t < VL; t++) lane[t] = t;                                          \
                const T *p = sr + 2 * e0 - left;                                                   \
                vi_##SFX v = (vi_##SFX)EVEN_##SFX(LD(SFX, p), LD(SFX, p + VL));                    \
                ST(SFX, d + e0, (v_##SFX)(v & (lane < (vi_##SFX){0} + (IT)(e1 - e0))));          \
                p = sr + 2 * o0 + 1 - left;                                                        \
                v = (vi_##SFX)EVEN_##SFX(LD(SFX, p), LD(SFX, p + VL));                             \
                ST(SFX, d + s->Wh + o0, (v_##SFX)(v & (lane < (vi_##SFX){0} + (IT)(o1 - o0))));   \
                continue;                                                                          \
            }                                                                                      \
            for (int64_t e = e0; e < e1; e++) d[e] = sr[2 * e - left];                             \
            for (int64_t o = o0; o < o1; o++) d[s->Wh + o] = sr[2 * o + 1 - left];                 \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* rb rows x VL columns of out (row stride ldy; the first ncol columns                        \
     * kept) from P at the block's origin; rb, sw, KH and KW are constants                        \
     * where the callers below pass them, so each shape compiles to its own                       \
     * loop. */                                                                                   \
    CN_ISA_INLINE_ void block_##SFX(const stencil *s, const T *P, int64_t nk, int64_t plane,      \
                                    const T *k, T b, int rb, int64_t sw, int64_t KH, int64_t KW,   \
                                    T *y, int64_t ldy, int64_t ncol) {                             \
        v_##SFX acc[RB_NARROW];                                                                    \
        for (int r = 0; r < rb; r++) acc[r] = (v_##SFX){0} + b;                                    \
        const int64_t rs = s->sh * s->Wr;                                                          \
        for (int64_t q = 0; q < nk; q++)                                                           \
            for (int64_t i = 0; i < KH; i++)                                                       \
                for (int64_t j = 0; j < KW; j++) {                                                 \
                    const v_##SFX wv = (v_##SFX){0} + k[(q * KH + i) * KW + j];                    \
                    const T *x = P + q * plane + tap_offset(s, sw, i, j);                          \
                    for (int r = 0; r < rb; r++) {                                                 \
                        v_##SFX xv;                                                                \
                        if (sw == 0) xv = LD(SFX, x + r * rs);                                     \
                        else LOAD_STRIDED(SFX, VL, xv, x + r * rs, sw);                            \
                        acc[r] += wv * xv;                                                         \
                    }                                                                              \
                }                                                                                  \
        /* A row narrower than the vector (ncol = ldy) is stored whole where                       \
         * what it writes past its end lies in the rows stored after it. */                       \
        const bool spill = ldy == ncol && 2 * ncol >= VL;                                          \
        for (int r = 0; r < rb; r++) {                                                             \
            if (ncol == VL || (spill && r + 1 < rb)) ST(SFX, y + r * ldy, acc[r]);                 \
            else                                                                                   \
                for (int t = 0; t < VL; t++)                                                       \
                    if (t < ncol) y[r * ldy + t] = acc[r][t];                                      \
        }                                                                                          \
    }                                                                                              \
    /* RB rows x 2 VL columns, stored whole, for unit-stride loads (sw 1,                         \
     * or 0: split rows): twice the independent sums of block, which were                         \
     * too few to hide the latency of the multiply-adds: 3x3 layers ran                           \
     * 1.2-1.4x faster (bench_dwconv --best), 5x5 and 7x7 ones 1.1-1.3x                           \
     * slower, so those keep block. */                                                            \
    CN_ISA_INLINE_ void block2_##SFX(const stencil *s, const T *P, int64_t nk, int64_t plane,     \
                                     const T *k, T b, int64_t sw, int64_t KH, int64_t KW, T *y,    \
                                     int64_t ldy) {                                                \
        v_##SFX acc[RB][2];                                                                        \
        for (int r = 0; r < RB; r++) acc[r][0] = acc[r][1] = (v_##SFX){0} + b;                     \
        const int64_t rs = s->sh * s->Wr;                                                          \
        for (int64_t q = 0; q < nk; q++)                                                           \
            for (int64_t i = 0; i < KH; i++)                                                       \
                for (int64_t j = 0; j < KW; j++) {                                                 \
                    const v_##SFX wv = (v_##SFX){0} + k[(q * KH + i) * KW + j];                    \
                    const T *x = P + q * plane + tap_offset(s, sw, i, j);                          \
                    for (int r = 0; r < RB; r++) {                                                 \
                        acc[r][0] += wv * LD(SFX, x + r * rs);                                     \
                        acc[r][1] += wv * LD(SFX, x + r * rs + VL);                                \
                    }                                                                              \
                }                                                                                  \
        for (int r = 0; r < RB; r++) {                                                             \
            ST(SFX, y + r * ldy, acc[r][0]);                                                       \
            ST(SFX, y + r * ldy + VL, acc[r][1]);                                                  \
        }                                                                                          \
    }                                                                                              \
    /* Rows in blocks of RB, the last block overlapping the one before it                         \
     * rather than leaving a remainder (an output written twice gets the                          \
     * same bits); columns likewise, once a row has a whole vector. */                            \
    CN_ISA_INLINE_ void rows_##SFX(const stencil *s, const T *P, int64_t nk, const T *k, T b,     \
                                   int64_t sw, int64_t KH, int64_t KW, T *y) {                     \
        const int64_t plane = s->Hp * s->Wr, OW = s->OW;                                           \
        const bool narrow = OW < 2 * VL && sw <= 1 && KH * KW <= 9 && s->OH >= RB_NARROW;         \
        const int rb = narrow ? RB_NARROW : s->OH >= RB ? RB : 1;                                  \
        for (int64_t r0 = 0; r0 < s->OH; r0 += rb) {                                               \
            const int64_t r = imin(r0, s->OH - rb);                                                \
            if (rb == RB && OW >= 2 * VL && sw <= 1 && KH * KW <= 9) {                             \
                for (int64_t c0 = 0; c0 < OW; c0 += 2 * VL) {                                      \
                    const int64_t c = imin(c0, OW - 2 * VL);                                       \
                    block2_##SFX(s, P + r * s->sh * s->Wr + c, nk, plane, k, b, sw, KH, KW,        \
                                 y + r * OW + c, OW);                                              \
                }                                                                                  \
                continue;                                                                          \
            }                                                                                      \
            for (int64_t c0 = 0; c0 < OW; c0 += VL) {                                              \
                const int64_t c = OW >= VL ? imin(c0, OW - VL) : 0;                                \
                const T *p = P + r * s->sh * s->Wr + c * (sw == 0 ? 1 : sw);                       \
                T *yb = y + r * OW + c;                                                            \
                int64_t ncol = imin(VL, OW);                                                       \
                if (narrow) {                                                                      \
                    block_##SFX(s, p, nk, plane, k, b, RB_NARROW, sw, KH, KW, yb, OW, ncol);       \
                    continue;                                                                      \
                }                                                                                  \
                if (rb == RB) block_##SFX(s, p, nk, plane, k, b, RB, sw, KH, KW, yb, OW, ncol);    \
                else block_##SFX(s, p, nk, plane, k, b, 1, sw, KH, KW, yb, OW, ncol);              \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* One function per kernel size, each a CN_HOT_FN of its own (all in                          \
     * one function, they ran slower). */                                                         \
    CN_HOT_FN(stencil_any_##SFX, (const stencil *s, const T *P, int64_t nk, const T *k, T b,      \
                                  T *y),                                                           \
              (s, P, nk, k, b, y)) {                                                               \
        if (s->sw == 1) rows_##SFX(s, P, nk, k, b, 1, s->KH, s->KW, y);                            \
        else if (s->Wh) rows_##SFX(s, P, nk, k, b, 0, s->KH, s->KW, y);                            \
        else if (s->sw == 2) rows_##SFX(s, P, nk, k, b, 2, s->KH, s->KW, y);                       \
        else rows_##SFX(s, P, nk, k, b, s->sw, s->KH, s->KW, y);                                   \
    }                                                                                              \
    DEFINE_SQUARE(T, SFX, 5)                                                                       \
    DEFINE_SQUARE(T, SFX, 7)                                                                       \
    DEFINE_AROWS_##SFX(T, SFX, VL, IT)                                                             \
    /* out [OH, OW] = b + the nk planes of P (each Hp x Wp) by the nk                             \
     * kernels k [nk, KH, KW]. */                                                                 \
    static void stencil_##SFX(const stencil *s, const T *P, int64_t nk, const T *k, T b, T *y) {   \
        const bool sq = s->KH == s->KW && s->sw <= 2;                                              \
        if (sq && s->KH == 5) stencil5_##SFX(s, P, nk, k, b, y);                                   \
        else if (sq && s->KH == 7) stencil7_##SFX(s, P, nk, k, b, y);                              \
        else stencil_any_##SFX(s, P, nk, k, b, y);                                                 \
    }                                                                                              \
                                                                                                   \
    /* fwd: item = (n, c), its Og output planes. */                                               \
    static void fwd_items_##SFX(void *ctx, int64_t i0, int64_t i1) {                               \
        dw_conv *d = ctx;                                                                          \
        const cn_conv_geom *g = d->g;                                                              \
        stencil s = stencil_of(g->OH, g->OW, g, g->sh, g->sw, VL);                                 \
        split_columns(&s);                                                                         \
        int nv = 0;                                                                                \
        const arows_fn_##SFX af = ARROWS_PICK(SFX, g, &nv);                                        \
        /* The kernel reads x's rows in place except at stride 1 with rows                        \
         * of one vector, where it reads a padded copy of the plane (reading                        \
         * in place, 7x7 planes ran 1.1x slower; stride 2 ran 1.4-1.6x                              \
         * faster in place than from a copy split into halves). */                                \
        const bool in_place = af && AROWS_IN_PLACE(g->sh, nv);                                      \
        if (af && !in_place) s.Wp = s.Wr = nv * (VL);                                              \
        T *P = in_place ? NULL : zalloc(sizeof(T) * (size_t)(s.Hp * s.Wr + SLACK));              \
        if (!in_place && !P) {                                                                     \
            atomic_store(&d->failed, 1);                                                           \
            return;                                                                                \
        }                                                                                          \
        const T *x = (const T *)d->x, *w = (const T *)d->w, *bias = (const T *)d->b;               \
        const int64_t OP = g->OH * g->OW;                                                          \
        const bool banded = (size_t)(s.Hp * s.Wr) * sizeof(T) > BAND_MIN_BYTES;                  \
        cn_epilogue_runs runs = {d->ep, 0, 0};                                                     \
        for (int64_t it = i0; it < i1; it++) {                                                     \
            const int64_t c = it % g->C;                                                           \
            const T *src = x + it * g->H * g->W;                                                   \
            T *y = (T *)d->out + it * d->Og * OP;                                                  \
            const int64_t HW = g->H * g->W;                                                        \
            const arows_src as = {src, g->H, g->W, g->ph, g->pw, it * HW,                          \
                                  (g->N * g->C - 1 - it) * HW};                                    \
            if (in_place) {                                                                        \
                for (int64_t q = 0; q < d->Og; q++) {                                              \
                    const int64_t o = c * d->Og + q;                                               \
                    af(&as, NULL, g->OH, g->OW, w + o * g->KH * g->KW, bias ? bias[o] : 0,         \
                       d->eo.clamp ? &d->eo : NULL, y + q * OP);                                   \
                }                                                                                  \
                if (d->ep) cn_epilogue_piece(&runs, it * d->Og * OP, (it + 1) * d->Og * OP);       \
                continue;                                                                          \
            }                                                                                      \
            /* A buffer larger than BAND_MIN_BYTES is filled and read in                           \
             * bands of output rows, the input rows each band reads padded                         \
             * just before it, so they are read back while in L1 (a 112-wide                       \
             * plane's buffer is 59 KB at stride 2): MobileNetV2's 96-channel                      \
             * 112-wide stride-2 layer ran 1.18x faster (with the rows split                       \
             * in whole vectors), its 32-channel stride-1 one 1.05x. Banded,                       \
             * planes of 28 rows and less ran up to 1.15x slower (a call's                         \
             * fixed cost); prefetching the next band's rows of x as well                          \
             * was slower. */                                                                      \
            int64_t filled = 0;                                                                    \
            for (int64_t r0 = 0, r1; r0 < g->OH; r0 = r1) {                                        \
                r1 = !banded || g->OH - r0 < 2 * BAND ? g->OH : r0 + BAND;                         \
                /* the padded rows the band reads: all Hp for the last */                          \
                const int64_t need = (r1 - 1) * s.sh + (s.KH - 1) * s.dh + 1;                      \
                if (s.Wh)                                                                          \
                    pad_plane_split_##SFX(src, g->H, g->W, g->ph, g->pw, P, &s, filled, need);     \
                else                                                                               \
                    pad_plane_##SFX(src, g->H, g->W, 1, 1, g->ph, g->pw, P, filled, need, s.Wp);   \
                filled = need;                                                                     \
                stencil band;                                                                      \
                const stencil *sb = &s;                                                            \
                if (banded) band = s, band.OH = r1 - r0, sb = &band;                               \
                for (int64_t q = 0; q < d->Og; q++) {                                              \
                    const int64_t o = c * d->Og + q;                                               \
                    T *yb = y + q * OP + r0 * g->OW;                                               \
                    if (af) { /* from P: stride 1 (a band's rows from its first on) */             \
                        af(&as, P + r0 * s.Wr, r1 - r0, g->OW, w + o * g->KH * g->KW,              \
                           bias ? bias[o] : 0, d->eo.clamp ? &d->eo : NULL, yb);                   \
                        continue;                                                                  \
                    }                                                                              \
                    stencil_##SFX(sb, P + r0 * s.sh * s.Wr, 1, w + o * g->KH * g->KW,              \
                                  bias ? bias[o] : 0, yb);                                         \
                    if (d->eo.clamp)                                                               \
                        cn_gemm_out_apply(sizeof(T) == 4 ? CN_F32 : CN_F64, yb, 1,                 \
                                          (r1 - r0) * g->OW, (r1 - r0) * g->OW, &d->eo);           \
                }                                                                                  \
            }                                                                                      \
            if (d->ep) cn_epilogue_piece(&runs, it * d->Og * OP, (it + 1) * d->Og * OP);           \
        }                                                                                          \
        cn_epilogue_flush(&runs);                                                                  \
        cn_free(P);                                                                                \
    }                                                                                              \
                                                                                                   \
    /* dgrad: item = (n, c), summing the group's Og planes of dy. */                              \
    static void dgrad_items_##SFX(void *ctx, int64_t i0, int64_t i1) {                             \
        dw_conv *d = ctx;                                                                          \
        const cn_conv_geom *g = d->g;                                                              \
        const int64_t KK = g->KH * g->KW;                                                          \
        stencil s = stencil_of(g->H, g->W, g, 1, 1, VL);                                           \
        size_t plane = (size_t)(s.Hp * s.Wp);                                                      \
        T *P = zalloc(sizeof(T) * ((size_t)d->Og * plane + SLACK + (size_t)(d->Og * KK)));       \
        if (!P) {                                                                                  \
            atomic_store(&d->failed, 1);                                                           \
            return;                                                                                \
        }                                                                                          \
        T *kf = P + (size_t)d->Og * plane + SLACK;                                                 \
        const T *dy = (const T *)d->dy, *w = (const T *)d->w, *bias = (const T *)d->b;             \
        for (int64_t it = i0; it < i1; it++) {                                                     \
            int64_t c = it % g->C;                                                                 \
            for (int64_t q = 0; q < d->Og; q++) {                                                  \
                const T *src = dy + (it * d->Og + q) * g->OH * g->OW;                              \
                pad_plane_##SFX(src, g->OH, g->OW, g->sh, g->sw, (g->KH - 1) * g->dh - g->ph,      \
                                (g->KW - 1) * g->dw - g->pw, P + (size_t)q * plane, 0, s.Hp,       \
                                s.Wp);                                                             \
                const T *wo = w + (c * d->Og + q) * KK;                                            \
                for (int64_t t = 0; t < KK; t++) kf[q * KK + t] = wo[KK - 1 - t];                  \
            }                                                                                      \
            stencil_##SFX(&s, P, d->Og, kf, bias ? bias[c] : 0,                                    \
                          (T *)d->out + it * g->H * g->W);                                         \
        }                                                                                          \
        cn_free(P);                                                                                \
    }

/* The weight gradient's functions, in 32-byte vectors only (see f32_fn). */
#define DEFINE_DW_WGRAD(T, SFX, VL)                                                                \
    /* lanes [KH KW, VL] += the weight gradient's terms of one plane: g is                        \
     * dy's plane [OH, OWr], zero past OW. Each tap's lane takes its terms                        \
     * in the order (oh, column); up to WJ taps of a kernel row are summed                        \
     * side by side, in registers, each dy vector loaded once for them. */                        \
    CN_ISA_INLINE_ void wlanes_body_##SFX(const stencil *s, const T *P, const T *g, T *lanes,     \
                                          int64_t sw) {                                            \
        const int64_t KW = s->KW;                                                                  \
        for (int64_t i = 0; i < s->KH; i++)                                                        \
            for (int64_t j0 = 0; j0 < KW; j0 += WJ) {                                              \
                const int64_t nj = imin(WJ, KW - j0);                                              \
                T *lp = lanes + (i * KW + j0) * VL;                                                \
                v_##SFX acc[WJ];                                                                   \
                for (int j = 0; j < WJ; j++) acc[j] = (v_##SFX){0};                                \
                for (int j = 0; j < WJ; j++)                                                       \
                    if (j < nj) acc[j] = LD(SFX, lp + j * VL);                                     \
                for (int64_t oh = 0; oh < s->OH; oh++) {                                           \
                    const T *x = P + (oh * s->sh + i * s->dh) * s->Wp + j0 * s->dw;                \
                    const T *gr = g + oh * s->OWr;                                                 \
                    for (int64_t c = 0; c < s->OWr; c += VL) {                                     \
                        const v_##SFX gv = LD(SFX, gr + c);                                        \
                        for (int j = 0; j < WJ; j++)                                               \
                            if (j < nj) {                                                          \
                                v_##SFX xv;                                                        \
                                LOAD_STRIDED(SFX, VL, xv, x + c * sw + j * s->dw, sw);             \
                                acc[j] += gv * xv;                                                 \
                            }                                                                      \
                    }                                                                              \
                }                                                                                  \
                for (int j = 0; j < WJ; j++)                                                       \
                    if (j < nj) ST(SFX, lp + j * VL, acc[j]);                                      \
            }                                                                                      \
    }                                                                                              \
    CN_HOT_FN(wlanes_##SFX, (const stencil *s, const T *P, const T *g, T *lanes),                 \
              (s, P, g, lanes)) {                                                                  \
        if (s->sw == 1) wlanes_body_##SFX(s, P, g, lanes, 1);                                      \
        else if (s->sw == 2) wlanes_body_##SFX(s, P, g, lanes, 2);                                 \
        else wlanes_body_##SFX(s, P, g, lanes, s->sw);                                             \
    }                                                                                              \
                                                                                                   \
    /* wgrad: item = c, the Og kernels of its group, over the whole batch. */                     \
    static void wgrad_items_##SFX(void *ctx, int64_t i0, int64_t i1) {                             \
        dw_conv *d = ctx;                                                                          \
        const cn_conv_geom *g = d->g;                                                              \
        const int64_t KK = g->KH * g->KW, P_ = g->OH * g->OW;                                      \
        stencil s = stencil_of(g->OH, g->OW, g, g->sh, g->sw, VL);                                 \
        const bool copy = s.OWr != g->OW;                                                          \
        const int64_t used = (g->OW - 1) * g->sw + (g->KW - 1) * g->dw + 1;                        \
        size_t np = (size_t)(s.Hp * s.Wp) + SLACK, ng = copy ? (size_t)(g->OH * s.OWr) : 0;        \
        T *P = zalloc(sizeof(T) * (np + ng + (size_t)(d->Og * KK * VL)));                        \
        if (!P) {                                                                                  \
            atomic_store(&d->failed, 1);                                                           \
            return;                                                                                \
        }                                                                                          \
        T *gbuf = P + np, *lanes = gbuf + ng;                                                      \
        const T *x = (const T *)d->x, *dy = (const T *)d->dy;                                      \
        for (int64_t c = i0; c < i1; c++) {                                                        \
            memset(lanes, 0, sizeof(T) * (size_t)(d->Og * KK * VL));                               \
            for (int64_t n = 0; n < g->N; n++) {                                                   \
                pad_plane_##SFX(x + (n * g->C + c) * g->H * g->W, g->H, g->W, 1, 1, g->ph, g->pw,  \
                                P, 0, s.Hp, s.Wp);                                                 \
                /* The lanes past OW multiply dy's zeros by the columns                       \
                 * right of the last window: zeros there too, so that an inf                   \
                 * or NaN no output reads does not make 0 * inf = NaN. */                       \
                if (copy && used < s.Wp)                                                           \
                    for (int64_t r = 0; r < s.Hp; r++)                                             \
                        memset(P + r * s.Wp + used, 0, sizeof(T) * (size_t)(s.Wp - used));         \
                for (int64_t q = 0; q < d->Og; q++) {                                              \
                    const T *gp = dy + ((n * g->C + c) * d->Og + q) * P_;                          \
                    if (copy) {                                                                    \
                        for (int64_t r = 0; r < g->OH; r++)                                        \
                            memcpy(gbuf + r * s.OWr, gp + r * g->OW, sizeof(T) * (size_t)g->OW);   \
                        gp = gbuf;                                                                 \
                    }                                                                              \
                    wlanes_##SFX(&s, P, gp, lanes + q * KK * VL);                                  \
                }                                                                                  \
            }                                                                                      \
            T *dw = (T *)d->out + c * d->Og * KK;                                                  \
            for (int64_t t = 0; t < d->Og * KK; t++) {                                             \
                T *l = lanes + t * VL;                                                             \
                for (int h = VL / 2; h > 0; h /= 2)                                                \
                    for (int u = 0; u < h; u++) l[u] += l[u + h];                                  \
                dw[t] = l[0];                                                                      \
            }                                                                                      \
        }                                                                                          \
        cn_free(P);                                                                                \
    }

typedef struct dw_conv {
    const cn_conv_geom *g;
    int64_t Og;
    const char *x, *w, *dy, *b;
    char *out;
    cn_gemm_out eo; /* fwd: the step's bounds (the bias is the stencil's), or none */
    cn_epilogue *ep; /* fwd: the step's epilogue, taken, or NULL */
    atomic_int failed;
} dw_conv;

DEFINE_DW(float, f32, 8, int32_t)
DEFINE_DW(double, f64, 4, int64_t)
DEFINE_DW_WGRAD(float, f32, 8)
DEFINE_DW_WGRAD(double, f64, 4)

/* f32 at the AVX-512 level in 64-byte vectors, for planes whose output
 * rows are wider than one 32-byte vector: such a row takes half as many
 * vectors, a block twice the columns per instruction. bench_dwconv --best
 * on an AVX-512 Xeon (docs/benchmarks.md): forward and input-gradient
 * products on rows of 14 to 112 columns 1.0-1.3x faster; on rows of 7
 * (one vector either way, less than half of the wide one used) 1.3-1.4x
 * slower, and the weight gradient slower on 10 of 13 layers (up to 2.2x),
 * so those keep the 32-byte vectors, but for forward products on the
 * aligned-rows kernel, where a padded row of 9 to 16 fits one 64-byte
 * vector (cn_dw_conv2d_fwd; 960 channels 7x7 1.4x faster). The sums are made in the same order either way: the
 * bits are those of the 32-byte code at the same level. */
#if defined(CN_ISA_HAVE_AVX512) || defined(__AVX512F__)
#define DW_WIDE 1
DEFINE_DW(float, f32z, 16, int32_t)
#endif

/* The f32 function of a product whose output rows are `width` wide, for
 * the active level. */
static cn_range_fn f32_fn(cn_range_fn narrow, cn_range_fn wide, int64_t width) {
    (void)wide, (void)width;
#if defined(__AVX512F__) /* the build's own target (CHUTNEY_NATIVE): every level is AVX-512 */
    if (width > 8) return wide;
#elif defined(DW_WIDE)
    if (width > 8 && cn_isa() == CN_ISA_AVX512) return wide;
#endif
    return narrow;
}
#ifndef DW_WIDE
#define fwd_items_f32z NULL
#define dgrad_items_f32z NULL
#endif

/* Runs fn over n items on the pool, on contiguous inputs (x, w, dy, b as
 * the product has them). */
static int run(const char *what, const cn_conv_geom *g, cn_dtype dt, int64_t n,
               const cn_tensor *x, const cn_tensor *w, const cn_tensor *dy, const cn_tensor *b,
               cn_tensor *out, bool take_out, cn_range_fn f32, cn_range_fn f64) {
    dw_conv d = {.g = g, .Og = g->O / g->C, .out = cn_t_ptr(out)};
    if (take_out && cn_gemm_out_take(&d.eo)) d.eo.bias = NULL;
    if (take_out) d.ep = cn_epilogue_take(out);
    atomic_init(&d.failed, 0);
    cn_tensor *own[4];
    d.x = cn_conv_dense(x, &own[0]);
    d.w = cn_conv_dense(w, &own[1]);
    d.dy = cn_conv_dense(dy, &own[2]);
    d.b = cn_conv_dense(b, &own[3]);
    int rc = CN_OK;
    if ((x && !d.x) || (w && !d.w) || (dy && !d.dy) || (b && !d.b)) rc = cn_conv_oom(what, g);
    else {
        cn_parallel_for(n, 1, dt == CN_F32 ? f32 : f64, &d);
        if (atomic_load(&d.failed)) rc = cn_conv_oom(what, g);
    }
    for (int k = 0; k < 4; k++) cn_release(own[k]);
    return rc;
}

int cn_dw_conv2d_fwd(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *w,
                     const cn_tensor *bias, cn_tensor *y) {
    if (g->OH == 0 || g->OW == 0) return CN_OK;
    /* Rows of 7 outputs whose padded rows fit one 64-byte vector take
     * those (the aligned-rows kernel, 9 loads and 63 multiply-adds a
     * block of 7 rows), not two 32-byte vectors a row. */
    int64_t width = g->OW;
#if defined(DW_WIDE) && defined(DW_AROWS)
    int nv = 0, nvz = 0;
    if (width <= 8 && (!ARROWS_PICK(f32, g, &nv) || nv > 1) && ARROWS_PICK(f32z, g, &nvz) &&
        nvz == 1)
        width = 9;
#endif
    return run("conv2d", g, (cn_dtype)y->dtype, g->N * g->C, x, w, NULL, bias, y, true,
               f32_fn(fwd_items_f32, fwd_items_f32z, width), fwd_items_f64);
}

int cn_dw_conv2d_dgrad(const cn_conv_geom *g, const cn_tensor *dy, const cn_tensor *w,
                       const cn_tensor *bias, cn_tensor *dx) {
    if (g->H == 0 || g->W == 0) return CN_OK;
    return run("conv_transpose2d", g, (cn_dtype)dx->dtype, g->N * g->C, NULL, w, dy, bias, dx,
               false, f32_fn(dgrad_items_f32, dgrad_items_f32z, g->W), dgrad_items_f64);
}

int cn_dw_conv2d_wgrad(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *dy,
                       cn_tensor *dw) {
    return run("conv2d_weight_grad", g, (cn_dtype)dw->dtype, g->C, x, NULL, dy, NULL, dw, false,
               wgrad_items_f32, wgrad_items_f64);
}

#else /* other compilers: the GEMM path */

bool cn_dw_conv_takes(const cn_conv_geom *g) {
    (void)g;
    return false;
}
int cn_dw_conv2d_fwd(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *w,
                     const cn_tensor *bias, cn_tensor *y) {
    (void)g, (void)x, (void)w, (void)bias, (void)y;
    return cn_failc(CN_EUNSUPPORTED, "conv2d: the direct depthwise kernel needs GCC or clang");
}
int cn_dw_conv2d_dgrad(const cn_conv_geom *g, const cn_tensor *dy, const cn_tensor *w,
                       const cn_tensor *bias, cn_tensor *dx) {
    (void)g, (void)dy, (void)w, (void)bias, (void)dx;
    return cn_failc(CN_EUNSUPPORTED, "conv_transpose2d: the direct depthwise kernel needs GCC or clang");
}
int cn_dw_conv2d_wgrad(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *dy,
                       cn_tensor *dw) {
    (void)g, (void)x, (void)dy, (void)dw;
    return cn_failc(CN_EUNSUPPORTED, "conv2d_weight_grad: the direct depthwise kernel needs GCC or clang");
}

#endif
