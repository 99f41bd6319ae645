/* Max pooling over 2x2 windows, stride 2, f32 (see pool_max2x2.h).
 *
 * The general kernel (pool.c) walks one output row at a time, and a CNN's
 * rows are short (14 or 7 outputs): the vectorised loop hardly ran, the
 * scalar remainder branched on the data, and the backward pass zeroed dx
 * and then scattered into it. Here a row is cut into chunks of L outputs
 * (L = 8, or 4 for rows of 4 to 7), the last chunk overlapping the one
 * before it instead of leaving a remainder; every store is a plain write,
 * so writing an output twice is harmless. Each chunk reads the two input
 * rows as 2L adjacent floats, splits even and odd columns with shuffles and
 * picks the maximum of each window with compares and selects, no branches.
 * The backward pass writes every element of dx once: the gradient at the
 * window's maximum, zeros at its other three taps (windows do not overlap),
 * so dx needs no clearing and no scatter.
 *
 * Taps are taken in PyTorch's order (top-left, top-right, bottom-left,
 * bottom-right); a later tap wins when it is greater or NaN, so a window
 * keeps its first maximum and its last NaN, as in pool.c.
 *
 * Written with the GCC/clang vector extensions, which every target lowers
 * (two SSE or NEON registers per vector where there is no 256-bit unit);
 * other compilers take pool.c's general path. */
#include "pool_max2x2.h"

#if defined(__GNUC__)

typedef float f8 __attribute__((vector_size(32)));
typedef int32_t i8 __attribute__((vector_size(32)));
typedef float f4 __attribute__((vector_size(16)));
typedef int32_t i4 __attribute__((vector_size(16)));

#if defined(__clang__)
#define SHUF8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#define SHUF4(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define SHUF8(a, b, ...) __builtin_shuffle(a, b, (i8){__VA_ARGS__})
#define SHUF4(a, b, ...) __builtin_shuffle(a, b, (i4){__VA_ARGS__})
#endif

#define EVEN8(lo, hi) SHUF8(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14)
#define ODD8(lo, hi) SHUF8(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15)
#define ILV_LO8(a, b) SHUF8(a, b, 0, 8, 1, 9, 2, 10, 3, 11)
#define ILV_HI8(a, b) SHUF8(a, b, 4, 12, 5, 13, 6, 14, 7, 15)
#define EVEN4(lo, hi) SHUF4(lo, hi, 0, 2, 4, 6)
#define ODD4(lo, hi) SHUF4(lo, hi, 1, 3, 5, 7)
#define ILV_LO4(a, b) SHUF4(a, b, 0, 4, 1, 5)
#define ILV_HI4(a, b) SHUF4(a, b, 2, 6, 3, 7)

/* Macros rather than functions: vectors passed by value would change the
 * calling convention between the ISA variants (and GCC warns about it). */

/* m (F) and k (I, 0..3) = the maxima and their taps of the L windows whose
 * top-left taps are r0[0], r0[2], ..., r0[2L - 2]; r1 is the row below. */
#define WINDOWS(F, I, L, EVEN, ODD, r0, r1, m, k)                                                  \
    do {                                                                                           \
        F lo_, hi_, t0_, t1_, t2_, t3_;                                                            \
        memcpy(&lo_, (r0), sizeof lo_);                                                            \
        memcpy(&hi_, (r0) + L, sizeof hi_);                                                        \
        t0_ = EVEN(lo_, hi_);                                                                      \
        t1_ = ODD(lo_, hi_);                                                                       \
        memcpy(&lo_, (r1), sizeof lo_);                                                            \
        memcpy(&hi_, (r1) + L, sizeof hi_);                                                        \
        t2_ = EVEN(lo_, hi_);                                                                      \
        t3_ = ODD(lo_, hi_);                                                                       \
        I take_;                                                                                   \
        m = t0_;                                                                                   \
        k = (I){0};                                                                                \
        take_ = (t1_ > m) | (t1_ != t1_);                                                          \
        m = (F)((take_ & (I)t1_) | (~take_ & (I)m));                                               \
        k = (take_ & 1) | (~take_ & k);                                                            \
        take_ = (t2_ > m) | (t2_ != t2_);                                                          \
        m = (F)((take_ & (I)t2_) | (~take_ & (I)m));                                               \
        k = (take_ & 2) | (~take_ & k);                                                            \
        take_ = (t3_ > m) | (t3_ != t3_);                                                          \
        m = (F)((take_ & (I)t3_) | (~take_ & (I)m));                                               \
        k = (take_ & 3) | (~take_ & k);                                                            \
    } while (0)

/* One row of OW >= L outputs (output row oh): yr[0..OW) the maxima, ir[0..OW)
 * their flat positions in the plane (either may be NULL). */
#define FWD_ROW(F, I, L, EVEN, ODD)                                                                \
    for (int64_t o_ = 0; o_ < OW; o_ += L) {                                                       \
        const int64_t s_ = o_ + L <= OW ? o_ : OW - L;                                             \
        F m_;                                                                                      \
        I k_;                                                                                      \
        WINDOWS(F, I, L, EVEN, ODD, r0 + 2 * s_, r1 + 2 * s_, m_, k_);                             \
        if (yr) memcpy(yr + s_, &m_, sizeof m_);                                                   \
        for (int l_ = 0; ir && l_ < L; l_++)                                                       \
            ir[s_ + l_] = (2 * oh + (k_[l_] >> 1)) * W + 2 * (s_ + l_) + (k_[l_] & 1);             \
    }

/* One row of OW >= L outputs of the backward pass: the gradients g[0..OW)
 * into rows d0 and d1 of dx, columns [0, 2 OW). */
#define BWD_ROW(F, I, L, EVEN, ODD, ILV_LO, ILV_HI)                                                \
    for (int64_t o_ = 0; o_ < OW; o_ += L) {                                                       \
        const int64_t s_ = o_ + L <= OW ? o_ : OW - L;                                             \
        F m_, g_, e_[4];                                                                           \
        I k_;                                                                                      \
        WINDOWS(F, I, L, EVEN, ODD, r0 + 2 * s_, r1 + 2 * s_, m_, k_);                             \
        (void)m_;                                                                                  \
        memcpy(&g_, gr + s_, sizeof g_);                                                           \
        for (int t_ = 0; t_ < 4; t_++) e_[t_] = (F)((I)g_ & (k_ == t_));                           \
        F out_ = ILV_LO(e_[0], e_[1]);                                                             \
        memcpy(d0 + 2 * s_, &out_, sizeof out_);                                                   \
        out_ = ILV_HI(e_[0], e_[1]);                                                               \
        memcpy(d0 + 2 * s_ + L, &out_, sizeof out_);                                               \
        out_ = ILV_LO(e_[2], e_[3]);                                                               \
        memcpy(d1 + 2 * s_, &out_, sizeof out_);                                                   \
        out_ = ILV_HI(e_[2], e_[3]);                                                               \
        memcpy(d1 + 2 * s_ + L, &out_, sizeof out_);                                               \
    }

bool cn_max2x2_applies(const cn_pool_geom *g, int64_t xw, int64_t gw) {
    return g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->ph == 0 && g->pw == 0 &&
           g->dh == 1 && g->dw == 1 && xw == 1 && gw == 1 && g->OW >= 4 &&
           2 * g->OH <= g->H && 2 * g->OW <= g->W;
}

CN_HOT_FN(fwd_planes,
          (const cn_pool_geom *g, const float *x, int64_t xn, int64_t xc, int64_t xh, int64_t b,
           int64_t e, float *y, int64_t *idx),
          (g, x, xn, xc, xh, b, e, y, idx)) {
    const int64_t C = g->C, OH = g->OH, OW = g->OW, W = g->W;
    for (int64_t p = b; p < e; p++) {
        const float *xp = x + (p / C) * xn + (p % C) * xc;
        for (int64_t oh = 0; oh < OH; oh++) {
            const float *r0 = xp + 2 * oh * xh, *r1 = r0 + xh;
            float *yr = y ? y + (p * OH + oh) * OW : NULL;
            int64_t *ir = idx ? idx + (p * OH + oh) * OW : NULL;
            if (OW >= 8) {
                FWD_ROW(f8, i8, 8, EVEN8, ODD8)
            } else {
                FWD_ROW(f4, i4, 4, EVEN4, ODD4)
            }
        }
    }
}

CN_HOT_FN(bwd_planes,
          (const cn_pool_geom *g, const float *x, int64_t xn, int64_t xc, int64_t xh,
           const float *dy, int64_t gn, int64_t gc, int64_t gh, int64_t b, int64_t e, float *dx),
          (g, x, xn, xc, xh, dy, gn, gc, gh, b, e, dx)) {
    const int64_t C = g->C, OH = g->OH, OW = g->OW, H = g->H, W = g->W;
    for (int64_t p = b; p < e; p++) {
        const float *xp = x + (p / C) * xn + (p % C) * xc;
        const float *gp = dy + (p / C) * gn + (p % C) * gc;
        float *dp = dx + p * H * W;
        for (int64_t oh = 0; oh < OH; oh++) {
            const float *r0 = xp + 2 * oh * xh, *r1 = r0 + xh, *gr = gp + oh * gh;
            float *d0 = dp + 2 * oh * W, *d1 = d0 + W;
            if (OW >= 8) {
                BWD_ROW(f8, i8, 8, EVEN8, ODD8, ILV_LO8, ILV_HI8)
            } else {
                BWD_ROW(f4, i4, 4, EVEN4, ODD4, ILV_LO4, ILV_HI4)
            }
            /* an odd width leaves the last column outside every window */
            for (int64_t w = 2 * OW; w < W; w++) d0[w] = d1[w] = 0;
        }
        if (2 * OH < H) memset(dp + 2 * OH * W, 0, sizeof(float) * (size_t)((H - 2 * OH) * W));
    }
}

void cn_max2x2_fwd_f32(const cn_pool_geom *g, const float *x, int64_t xn, int64_t xc, int64_t xh,
                       int64_t b, int64_t e, float *y, int64_t *idx) {
    fwd_planes(g, x, xn, xc, xh, b, e, y, idx);
}

void cn_max2x2_bwd_f32(const cn_pool_geom *g, const float *x, int64_t xn, int64_t xc, int64_t xh,
                       const float *dy, int64_t gn, int64_t gc, int64_t gh, int64_t b, int64_t e,
                       float *dx) {
    bwd_planes(g, x, xn, xc, xh, dy, gn, gc, gh, b, e, dx);
}

#else /* no vector extensions: pool.c's general path does all of it */

bool cn_max2x2_applies(const cn_pool_geom *g, int64_t xw, int64_t gw) {
    (void)g, (void)xw, (void)gw;
    return false;
}

void cn_max2x2_fwd_f32(const cn_pool_geom *g, const float *x, int64_t xn, int64_t xc, int64_t xh,
                       int64_t b, int64_t e, float *y, int64_t *idx) {
    (void)g, (void)x, (void)xn, (void)xc, (void)xh, (void)b, (void)e, (void)y, (void)idx;
}

void cn_max2x2_bwd_f32(const cn_pool_geom *g, const float *x, int64_t xn, int64_t xc, int64_t xh,
                       const float *dy, int64_t gn, int64_t gc, int64_t gh, int64_t b, int64_t e,
                       float *dx) {
    (void)g, (void)x, (void)xn, (void)xc, (void)xh, (void)dy, (void)gn, (void)gc, (void)gh;
    (void)b, (void)e, (void)dx;
}

#endif
