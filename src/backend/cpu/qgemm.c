/* The int8 GEMM (qgemm.h): a portable loop, an AVX2 one and an AVX512_VNNI
 * one, picked at run time through cn_isa() and cn_isa_vnni(). All give the
 * same int32 sums, and the same f32 outputs from them. */
#include "qgemm.h"
#include "../../core/isa.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

/* Element i of 8-bit data (the loops' branch on is_signed is hoisted by
 * the compiler). */
static inline int32_t q8_at(const void *d, bool is_signed, int64_t i) {
    return is_signed ? ((const int8_t *)d)[i] : ((const uint8_t *)d)[i];
}

void cn_qgemm_widen(int16_t *dst, int64_t rows, int64_t K, int64_t kp, const void *src,
                    bool is_signed, int64_t rs, int64_t ks, const int32_t *zp, int64_t zs) {
    for (int64_t r = 0; r < rows; r++) {
        int16_t *d = dst + r * kp;
        int32_t z = zp ? zp[r * zs] : 0;
        for (int64_t k = 0; k < K; k++) d[k] = (int16_t)(q8_at(src, is_signed, r * rs + k * ks) - z);
        for (int64_t k = K; k < kp; k++) d[k] = 0;
    }
}

/* max |x| as its bits: for non-negative floats the integer order is the
 * float order, and an integer max the AVX2 variant vectorises (a float
 * one it may not reorder). Infinities and NaN are the values from
 * 0x7f800000 up. */
CN_HOT_FN(absmax_bits, (const float *x, int64_t n, uint32_t *out), (x, n, out)) {
    uint32_t m = 0;
    for (int64_t k = 0; k < n; k++) {
        uint32_t u;
        memcpy(&u, &x[k], 4);
        u &= 0x7fffffffu;
        m = u > m ? u : m;
    }
    *out = m;
}

/* Clamped first, so that adding and taking away 1.5 * 2^23 rounds half to
 * even (in the default rounding mode) for every value, and NaN becomes 0
 * (a clamp of the rounded value gives the same integers, the bounds being
 * integers). */
static inline int16_t quantize1(float x, float inv) {
    float q = x * inv;
    q = q == q ? q : 0.0f;
    q = q > 127.0f ? 127.0f : q;
    q = q < -127.0f ? -127.0f : q;
    return (int16_t)((q + 0x1.8p23f) - 0x1.8p23f);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_QGEMM_AVX2 1

/* quantize1 on 8 values. */
__attribute__((target("avx2"))) static inline __m256i quantize8(const float *x, __m256 inv) {
    __m256 q = _mm256_mul_ps(_mm256_loadu_ps(x), inv);
    q = _mm256_and_ps(q, _mm256_cmp_ps(q, q, _CMP_ORD_Q)); /* NaN: 0 */
    q = _mm256_max_ps(_mm256_min_ps(q, _mm256_set1_ps(127.0f)), _mm256_set1_ps(-127.0f));
    const __m256 magic = _mm256_set1_ps(0x1.8p23f);
    return _mm256_cvttps_epi32(_mm256_sub_ps(_mm256_add_ps(q, magic), magic));
}

/* quantize1 on every value when n >= 8, 16 at a time (GCC does not
 * vectorise its selects) and the last 8 again over the ones before: the
 * rows of a convolution's image are short. Returns how many it did. */
__attribute__((target("avx2"))) static int64_t quantize_avx2(int16_t *d, const float *x,
                                                             int64_t n, float inv) {
    const __m256 vinv = _mm256_set1_ps(inv);
    int64_t k = 0;
    for (; k + 16 <= n; k += 16) {
        /* packs works within 128-bit lanes: 0-3, 8-11, 4-7, 12-15. */
        __m256i p = _mm256_packs_epi32(quantize8(x + k, vinv), quantize8(x + k + 8, vinv));
        _mm256_storeu_si256((__m256i *)(d + k), _mm256_permute4x64_epi64(p, 0xd8));
    }
    for (; k < n && n >= 8; k += 8) {
        k = k + 8 <= n ? k : n - 8;
        __m256i i = quantize8(x + k, vinv);
        __m128i p = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
        _mm_storeu_si128((__m128i *)(d + k), p);
    }
    return n >= 8 ? n : 0;
}
#endif

static void quantize(int16_t *d, const float *x, int64_t n, float inv) {
    int64_t k = 0;
#ifdef HAVE_QGEMM_AVX2
    if (cn_isa() >= CN_ISA_AVX2) k = quantize_avx2(d, x, n, inv);
#endif
    for (; k < n; k++) d[k] = quantize1(x[k], inv);
}

float cn_qgemm_scale(const float *x, int64_t n) {
    uint32_t bits;
    absmax_bits(x, n, &bits);
    float m;
    memcpy(&m, &bits, 4);
    /* A NaN or infinite input gives a NaN scale, so the outputs it feeds
     * are NaN rather than quietly finite. */
    return bits >= 0x7f800000u ? NAN : m > 0 ? m / 127.0f : 1.0f;
}

void cn_qgemm_quantize_by(int16_t *dst, const float *x, int64_t n, float scale) {
    quantize(dst, x, n, 1.0f / scale);
}

float cn_qgemm_quantize(int16_t *dst, const float *x, int64_t n) {
    float sc = cn_qgemm_scale(x, n);
    cn_qgemm_quantize_by(dst, x, n, sc);
    return sc;
}

void cn_qgemm_quantize_rows(int16_t *dst, float *scale, int64_t rows, int64_t K, int64_t kp,
                            const float *x, int64_t rs) {
    for (int64_t r = 0; r < rows; r++) {
        scale[r] = cn_qgemm_quantize(dst + r * kp, x + r * rs, K);
        for (int64_t k = K; k < kp; k++) dst[r * kp + k] = 0;
    }
}

#define NR CN_QGEMM_NR

/* Panel p of B into d (kp / 2 pairs of NR columns), zeros past N and K. */
static void pack_panel(int16_t *d, const cn_qgemm_b *B, int64_t N, int64_t K, int64_t kp,
                       int64_t p) {
    memset(d, 0, sizeof(int16_t) * (size_t)(kp * NR));
    for (int64_t j = 0; j < NR && p * NR + j < N; j++) {
        int64_t n = p * NR + j;
        int32_t z = B->zp ? B->zp[n * B->zs] : 0;
        int16_t *o = d + 2 * j;
        for (int64_t k = 0; k < K; k++)
            o[(k >> 1) * 2 * NR + (k & 1)] =
                (int16_t)(q8_at(B->data, B->is_signed, n * B->rs + k * B->ks) - z);
    }
}

int16_t *cn_qgemm_panel_alloc(int64_t kp) {
    void *p = NULL;
    size_t n = sizeof(int16_t) * (size_t)(kp * NR);
    return posix_memalign(&p, CN_ALIGN, n ? n : CN_ALIGN) == 0 ? p : NULL;
}

void cn_qgemm_pack_b(int16_t *dst, const cn_qgemm_b *B, int64_t N, int64_t K) {
    int64_t kp = cn_qgemm_kpad(K);
    for (int64_t p = 0; p * NR < N; p++) pack_panel(dst + p * kp * NR, B, N, K, kp, p);
}

/* Row m's outputs n0 .. n0 + nn - 1 from its NR sums s. */
static void store_row(const cn_qgemm_out *o, int64_t m, int64_t n0, int nn, const int32_t *s) {
    if (o->c) {
        memcpy(o->c + m * o->ld + n0, s, sizeof(int32_t) * (size_t)nn);
        return;
    }
    float *y = o->y + m * o->ld + n0, rs = o->row_scale[m * o->row_step];
    for (int j = 0; j < nn; j++) {
        float cs = o->col_scale[(n0 + j) * o->col_step];
        y[j] = o->col_first ? (float)s[j] * cs * rs : (float)s[j] * rs * cs;
        if (o->bias) y[j] += o->bias[o->bias_by_row ? m : n0 + j];
    }
}

static void panel_ref(int64_t M, int64_t kp, const int16_t *A, const int16_t *bp, int64_t n0,
                      int nn, const cn_qgemm_out *o) {
    for (int64_t m = 0; m < M; m++) {
        const int16_t *a = A + m * kp;
        int32_t s[NR] = {0};
        for (int64_t q = 0; q < kp / 2; q++) {
            const int16_t *b = bp + q * 2 * NR;
            for (int j = 0; j < NR; j++)
                s[j] += (int32_t)a[2 * q] * b[2 * j] + (int32_t)a[2 * q + 1] * b[2 * j + 1];
        }
        store_row(o, m, n0, nn, s);
    }
}

#ifdef HAVE_QGEMM_AVX2
/* Rows of A per block: 8 accumulators, two B vectors and four broadcasts
 * fit the 16 ymm registers (6 rows spill accumulators to the stack). The
 * kernel's loop names its 4 x 2 sums. */
#define MR 4

/* Eight sums as floats times the row's and the columns' scales, in the
 * order store_row multiplies them. */
__attribute__((target("avx2"))) static inline __m256 scale8(__m256i acc, __m256 rs, __m256 cs,
                                                            bool col_first) {
    __m256 f = _mm256_cvtepi32_ps(acc);
    return col_first ? _mm256_mul_ps(_mm256_mul_ps(f, cs), rs)
                     : _mm256_mul_ps(_mm256_mul_ps(f, rs), cs);
}

/* The first n (0..16) of 16 32-bit lanes v[0], v[1] to out, without a
 * library call (a partial panel is a convolution's every row end). */
__attribute__((target("avx2"))) static inline void store_lanes(void *out, const __m256 *v,
                                                               int n) {
    float *o = out;
    int i = 0;
    for (; n >= 8; n -= 8) _mm256_storeu_ps(o + 8 * i, v[i]), i++;
    if (n == 0) return;
    o += 8 * i;
    __m128 h = _mm256_castps256_ps128(v[i]);
    if (n >= 4) {
        _mm_storeu_ps(o, h);
        h = _mm256_extractf128_ps(v[i], 1);
        o += 4, n -= 4;
    }
    if (n >= 2) {
        _mm_storel_pi((__m64 *)o, h);
        h = _mm_movehl_ps(h, h);
        o += 2, n -= 2;
    }
    if (n) _mm_store_ss(o, h);
}

__attribute__((target("avx2"))) static void panel_avx2(int64_t M, int64_t kp, const int16_t *A,
                                                       const int16_t *bp, int64_t n0, int nn,
                                                       const cn_qgemm_out *o) {
    const int64_t kq = kp / 2;
    /* The columns' scales and biases, for float outputs. */
    __m256 cs[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, cb[2] = {cs[0], cs[1]};
    if (!o->c) {
        float t[NR], u[NR];
        for (int j = 0; j < NR; j++) {
            int64_t n = n0 + (j < nn ? j : 0);
            t[j] = o->col_scale[n * o->col_step];
            u[j] = o->bias && !o->bias_by_row ? o->bias[n] : 0.0f;
        }
        cs[0] = _mm256_loadu_ps(t), cs[1] = _mm256_loadu_ps(t + 8);
        cb[0] = _mm256_loadu_ps(u), cb[1] = _mm256_loadu_ps(u + 8);
    }
    for (int64_t m = 0; m < M; m += MR) {
        int mm = (int)(M - m < MR ? M - m : MR);
        /* Rows past the edge repeat the last one (computed, not stored). */
        const int16_t *a[MR];
        for (int i = 0; i < MR; i++) a[i] = A + (m + (i < mm ? i : mm - 1)) * kp;
        /* Named sums, not an array: with an array GCC computes the eight
         * products first and moves each sum back into its register after
         * every pair of k (7 moves in 32 instructions); named, the loop is
         * 25, and 5 to 10% faster here. */
        __m256i s00 = _mm256_setzero_si256(), s01 = s00, s10 = s00, s11 = s00, s20 = s00,
                s21 = s00, s30 = s00, s31 = s00;
        for (int64_t q = 0; q < kq; q++) {
            __m256i b0 = _mm256_loadu_si256((const __m256i *)(bp + q * 2 * NR));
            __m256i b1 = _mm256_loadu_si256((const __m256i *)(bp + q * 2 * NR + 16));
            int32_t p0, p1, p2, p3;
            memcpy(&p0, a[0] + 2 * q, 4), memcpy(&p1, a[1] + 2 * q, 4);
            memcpy(&p2, a[2] + 2 * q, 4), memcpy(&p3, a[3] + 2 * q, 4);
            __m256i v0 = _mm256_set1_epi32(p0), v1 = _mm256_set1_epi32(p1);
            s00 = _mm256_add_epi32(s00, _mm256_madd_epi16(v0, b0));
            s01 = _mm256_add_epi32(s01, _mm256_madd_epi16(v0, b1));
            s10 = _mm256_add_epi32(s10, _mm256_madd_epi16(v1, b0));
            s11 = _mm256_add_epi32(s11, _mm256_madd_epi16(v1, b1));
            __m256i v2 = _mm256_set1_epi32(p2), v3 = _mm256_set1_epi32(p3);
            s20 = _mm256_add_epi32(s20, _mm256_madd_epi16(v2, b0));
            s21 = _mm256_add_epi32(s21, _mm256_madd_epi16(v2, b1));
            s30 = _mm256_add_epi32(s30, _mm256_madd_epi16(v3, b0));
            s31 = _mm256_add_epi32(s31, _mm256_madd_epi16(v3, b1));
        }
        __m256i acc[MR][2] = {{s00, s01}, {s10, s11}, {s20, s21}, {s30, s31}};
        for (int i = 0; i < mm; i++) {
            __m256 v[2];
            if (o->c) {
                v[0] = _mm256_castsi256_ps(acc[i][0]), v[1] = _mm256_castsi256_ps(acc[i][1]);
                store_lanes(o->c + (m + i) * o->ld + n0, v, nn);
                continue;
            }
            __m256 rs = _mm256_set1_ps(o->row_scale[(m + i) * o->row_step]);
            v[0] = scale8(acc[i][0], rs, cs[0], o->col_first);
            v[1] = scale8(acc[i][1], rs, cs[1], o->col_first);
            if (o->bias) {
                bool by_row = o->bias_by_row;
                __m256 rb = by_row ? _mm256_set1_ps(o->bias[m + i]) : _mm256_setzero_ps();
                v[0] = _mm256_add_ps(v[0], by_row ? rb : cb[0]);
                v[1] = _mm256_add_ps(v[1], by_row ? rb : cb[1]);
            }
            store_lanes(o->y + (m + i) * o->ld + n0, v, nn);
        }
    }
}

/* A -march=native build (CHUTNEY_NATIVE) whose target has AVX512_VNNI
 * compiles no avx512 level (isa.h) and runs this kernel at its one level. */
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) &&                    \
    defined(__AVX512VNNI__)
#define QGEMM_TARGET_VNNI 1
#endif
#if (defined(CN_ISA_HAVE_AVX512) || defined(QGEMM_TARGET_VNNI)) &&                                \
    (defined(__clang__) ? __clang_major__ >= 6 : __GNUC__ >= 8)
#define HAVE_QGEMM_VNNI 1
/* The AVX-512 level's features and AVX512_VNNI. */
#define VNNI_FN                                                                                    \
    __attribute__((target("avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx512vnni,avx2,fma,bmi,"  \
                          "bmi2")))

/* Rows per block: 8, in two sets of sums that take turns over the pairs
 * of k. vpdpwssd multiplies and accumulates in one instruction but with a
 * latency of several cycles, so a sum can take a product only every few
 * cycles; 16 independent sums (of the 32 zmm) keep it busy. The sets are
 * added at the end: integer sums, so the order does not change them.
 * Blocks of 1 to 4 rows take a 4-row variant. */
#define VNNI_MR 8
/* Beyond 2 * VNNI_KC pairs of k (K > 1024, a panel over 32 KB), panel_vnni
 * takes K in chunks of VNNI_KC pairs (16 KB of the panel) and the rows in
 * groups of VNNI_MG (their 4 KB of sums on the stack): at 64 x 2048 x 1024
 * the whole panel did not stay in the 48 KB L1, 281 GOP/s against 320 in
 * chunks; at K = 1024 and below the chunks cost 1 to 5%. */
#define VNNI_KC 256
#define VNNI_MG 64

/* A pair of int16 read as one int32 (the A rows' type is int16). */
typedef int32_t vnni_pair __attribute__((may_alias));

/* Sums named, not in arrays: with arrays GCC copies each sum to another
 * register (and some to the stack) after every product, as it did in
 * panel_avx2's loop. With the intrinsic, named or not, GCC 12 still copies
 * every sum to another register and back around each vpdpwssd (16
 * vmovdqa a step), so the instruction is written out: x += the products of
 * b's pairs with row a's pair q broadcast to all 16 lanes from memory
 * (AT&T order: the broadcast operand, b, the sum). VNNI_SUMS4(x, 0, 1,
 * 2, 3) declares x0 .. x3 = 0; VNNI_DP4(x, q) adds rows 0 .. 3's products
 * with pair q into x0 .. x3 (VNNI_DP4_HI rows 4 .. 7), b holding the
 * panel's pair q. */
#define VNNI_DP(x, i, q)                                                                          \
    __asm__("vpdpwssd %1%{1to16%}, %2, %0"                                                        \
            : "+v"(x##i)                                                                          \
            : "m"(*(const vnni_pair *)(a[i] + 2 * (q))), "v"(b))
#define VNNI_Z _mm512_setzero_si512()
#define VNNI_SUMS4(x, i, j, k, l) __m512i x##i = VNNI_Z, x##j = VNNI_Z, x##k = VNNI_Z, x##l = VNNI_Z
#define VNNI_DP4(x, q)                                                                            \
    VNNI_DP(x, 0, q);                                                                              \
    VNNI_DP(x, 1, q);                                                                              \
    VNNI_DP(x, 2, q);                                                                              \
    VNNI_DP(x, 3, q)
#define VNNI_DP4_HI(x, q)                                                                         \
    VNNI_DP(x, 4, q);                                                                              \
    VNNI_DP(x, 5, q);                                                                              \
    VNNI_DP(x, 6, q);                                                                              \
    VNNI_DP(x, 7, q)
#define VNNI_PANEL(q) _mm512_loadu_si512(bp + (q) * 2 * NR)

/* The sums of `rows` rows a[i] (8, or 4: a constant where it is inlined)
 * over kq pairs of k with the panel's 16 columns into s[0 .. rows): per
 * pair of k, one load of the panel and one vpdpwssd per row with the
 * row's pair broadcast from memory. */
VNNI_FN static inline __attribute__((always_inline)) void sums_vnni(int64_t kq,
                                                                    const int16_t *const *a,
                                                                    const int16_t *bp, __m512i *s,
                                                                    const int rows) {
    VNNI_SUMS4(x, 0, 1, 2, 3);
    VNNI_SUMS4(x, 4, 5, 6, 7);
    VNNI_SUMS4(y, 0, 1, 2, 3);
    VNNI_SUMS4(y, 4, 5, 6, 7);
    int64_t q = 0;
    for (; q + 2 <= kq; q += 2) {
        __m512i b = VNNI_PANEL(q);
        VNNI_DP4(x, q);
        if (rows == 8) {
            VNNI_DP4_HI(x, q);
        }
        b = VNNI_PANEL(q + 1);
        VNNI_DP4(y, q + 1);
        if (rows == 8) {
            VNNI_DP4_HI(y, q + 1);
        }
    }
    if (q < kq) {
        __m512i b = VNNI_PANEL(q);
        VNNI_DP4(x, q);
        if (rows == 8) {
            VNNI_DP4_HI(x, q);
        }
    }
    s[0] = _mm512_add_epi32(x0, y0), s[1] = _mm512_add_epi32(x1, y1);
    s[2] = _mm512_add_epi32(x2, y2), s[3] = _mm512_add_epi32(x3, y3);
    if (rows == 8) {
        s[4] = _mm512_add_epi32(x4, y4), s[5] = _mm512_add_epi32(x5, y5);
        s[6] = _mm512_add_epi32(x6, y6), s[7] = _mm512_add_epi32(x7, y7);
    }
}

/* Row m's sums s to its outputs, the columns past the panel's nn masked
 * off; in f32, scaled and biased in store_row's order. */
VNNI_FN static inline void store_vnni(const cn_qgemm_out *o, int64_t m, int64_t n0,
                                      __mmask16 mask, __m512i s, __m512 cs, __m512 cb) {
    if (o->c) {
        _mm512_mask_storeu_epi32(o->c + m * o->ld + n0, mask, s);
        return;
    }
    __m512 rs = _mm512_set1_ps(o->row_scale[m * o->row_step]), f = _mm512_cvtepi32_ps(s);
    f = o->col_first ? _mm512_mul_ps(_mm512_mul_ps(f, cs), rs)
                     : _mm512_mul_ps(_mm512_mul_ps(f, rs), cs);
    if (o->bias) f = _mm512_add_ps(f, o->bias_by_row ? _mm512_set1_ps(o->bias[m]) : cb);
    _mm512_mask_storeu_ps(o->y + m * o->ld + n0, mask, f);
}

/* panel_avx2 with AVX512_VNNI: a zmm holds the panel's 16 columns for one
 * pair of k, and vpdpwssd does vpmaddwd's products and vpaddd's sum in
 * one instruction, with the same int32 results (it does not saturate,
 * unlike vpdpwssds, which is not used). */
VNNI_FN static void panel_vnni(int64_t M, int64_t kp, const int16_t *A, const int16_t *bp,
                               int64_t n0, int nn, const cn_qgemm_out *o) {
    const int64_t kq = kp / 2;
    const __mmask16 mask = (__mmask16)(nn >= NR ? 0xffffu : (1u << nn) - 1u);
    __m512 cs = _mm512_setzero_ps(), cb = cs;
    if (!o->c) {
        float t[NR], u[NR];
        for (int j = 0; j < NR; j++) {
            int64_t n = n0 + (j < nn ? j : 0);
            t[j] = o->col_scale[n * o->col_step];
            u[j] = o->bias && !o->bias_by_row ? o->bias[n] : 0.0f;
        }
        cs = _mm512_loadu_ps(t), cb = _mm512_loadu_ps(u);
    }
    if (kq <= 2 * VNNI_KC) {
        for (int64_t m = 0; m < M; m += VNNI_MR) {
            int mm = (int)(M - m < VNNI_MR ? M - m : VNNI_MR);
            /* Rows past the edge repeat the last one (computed, not
             * stored). */
            const int16_t *a[VNNI_MR];
            for (int i = 0; i < VNNI_MR; i++) a[i] = A + (m + (i < mm ? i : mm - 1)) * kp;
            __m512i s[VNNI_MR];
            if (mm > 4) sums_vnni(kq, a, bp, s, 8);
            else sums_vnni(kq, a, bp, s, 4);
            for (int i = 0; i < mm; i++) store_vnni(o, m + i, n0, mask, s[i], cs, cb);
        }
        return;
    }
    /* A long K: groups of up to VNNI_MG rows, their sums kept in part over
     * chunks of VNNI_KC pairs of k, so that a chunk of the panel stays in
     * L1 while each block of the group's rows streams by. */
    __m512i part[VNNI_MG];
    for (int64_t m0 = 0; m0 < M; m0 += VNNI_MG) {
        int mg = (int)(M - m0 < VNNI_MG ? M - m0 : VNNI_MG);
        for (int64_t q0 = 0; q0 < kq; q0 += VNNI_KC) {
            int64_t qn = kq - q0 < VNNI_KC ? kq - q0 : VNNI_KC;
            for (int m = 0; m < mg; m += VNNI_MR) {
                int mm = mg - m < VNNI_MR ? mg - m : VNNI_MR;
                const int16_t *a[VNNI_MR];
                for (int i = 0; i < VNNI_MR; i++)
                    a[i] = A + (m0 + m + (i < mm ? i : mm - 1)) * kp + 2 * q0;
                __m512i s[VNNI_MR];
                if (mm > 4) sums_vnni(qn, a, bp + q0 * 2 * NR, s, 8);
                else sums_vnni(qn, a, bp + q0 * 2 * NR, s, 4);
                for (int i = 0; i < mm; i++)
                    part[m + i] = q0 ? _mm512_add_epi32(part[m + i], s[i]) : s[i];
            }
        }
        for (int i = 0; i < mg; i++) store_vnni(o, m0 + i, n0, mask, part[i], cs, cb);
    }
}
#endif

/* Runs of columns whose data lie side by side: column j of a run starting
 * at column j0 reads from off[run] + j, where off = coff[j0] - j0. At most
 * MAX_RUNS are gathered with vector loads and blends (16 pixels of a
 * convolution's output span at most 3 of its rows when they are 8 or more
 * wide); more take the scalar loop. */
#define MAX_RUNS 4

typedef struct col_runs {
    int n;
    int64_t off[MAX_RUNS];
    int16_t mask[MAX_RUNS][NR]; /* -1 on the run's columns */
} col_runs;

static bool find_runs(col_runs *r, const int64_t *coff) {
    r->n = 0;
    for (int j = 0; j < NR; j++) {
        if (j == 0 || coff[j] != coff[j - 1] + 1) {
            if (r->n == MAX_RUNS) return false;
            r->off[r->n] = coff[j] - j;
            memset(r->mask[r->n], 0, sizeof r->mask[0]);
            r->n++;
        }
        r->mask[r->n - 1][j] = -1;
    }
    return true;
}

/* Row k of the panel's 16 columns: the first run's load, the others
 * blended in. */
__attribute__((target("avx2"))) static inline __m256i gather16(const int16_t *row,
                                                               const col_runs *r) {
    __m256i v = _mm256_loadu_si256((const __m256i *)(row + r->off[0]));
    for (int i = 1; i < r->n; i++)
        v = _mm256_blendv_epi8(v, _mm256_loadu_si256((const __m256i *)(row + r->off[i])),
                               _mm256_loadu_si256((const __m256i *)r->mask[i]));
    return v;
}

__attribute__((target("avx2"))) static void gather_avx2(int16_t *panel, int64_t K, int64_t kp,
                                                        const int16_t *base, const int64_t *koff,
                                                        const col_runs *r) {
    for (int64_t k = 0; k < kp; k += 2) {
        __m256i x = gather16(base + koff[k], r);
        __m256i y = k + 1 < K ? gather16(base + koff[k + 1], r) : _mm256_setzero_si256();
        /* unpack works within 128-bit lanes: lo holds columns 0-3 and 8-11,
         * hi 4-7 and 12-15. */
        __m256i lo = _mm256_unpacklo_epi16(x, y), hi = _mm256_unpackhi_epi16(x, y);
        _mm256_storeu_si256((__m256i *)(panel + k * NR), _mm256_permute2x128_si256(lo, hi, 0x20));
        _mm256_storeu_si256((__m256i *)(panel + k * NR + 16),
                            _mm256_permute2x128_si256(lo, hi, 0x31));
    }
}
#endif

void cn_qgemm_pack_gather(int16_t *panel, int64_t K, int64_t kp, const int16_t *base,
                          const int64_t *koff, const int64_t *coff) {
#ifdef HAVE_QGEMM_AVX2
    col_runs r;
    if (cn_isa() >= CN_ISA_AVX2 && find_runs(&r, coff)) {
        gather_avx2(panel, K, kp, base, koff, &r);
        return;
    }
#endif
    for (int64_t k = 0; k < kp; k += 2) {
        int16_t *d = panel + k * NR;
        for (int j = 0; j < NR; j++) {
            d[2 * j] = base[koff[k] + coff[j]];
            d[2 * j + 1] = k + 1 < K ? base[koff[k + 1] + coff[j]] : 0;
        }
    }
}

/* The kernel for the active level: VNNI at avx512 where the CPU has it,
 * or always where the build's target has it. */
enum { K_REF, K_AVX2, K_VNNI };

static int kernel_kind(void) {
#if defined(HAVE_QGEMM_VNNI) && defined(QGEMM_TARGET_VNNI)
    return K_VNNI;
#else
#ifdef HAVE_QGEMM_VNNI
    if (cn_isa_vnni()) return K_VNNI;
#endif
#ifdef HAVE_QGEMM_AVX2
    if (cn_isa() >= CN_ISA_AVX2) return K_AVX2;
#endif
    return K_REF;
#endif
}

const char *cn_qgemm_kernel(void) {
    static const char *const names[] = {"portable", "avx2", "avx512-vnni"};
    return names[kernel_kind()];
}

void cn_qgemm_panel(int64_t M, int64_t kp, const int16_t *A, const int16_t *panel, int64_t n0,
                    int nn, const cn_qgemm_out *o) {
    switch (kernel_kind()) {
#ifdef HAVE_QGEMM_VNNI
    case K_VNNI: panel_vnni(M, kp, A, panel, n0, nn, o); return;
#endif
#ifdef HAVE_QGEMM_AVX2
    case K_AVX2: panel_avx2(M, kp, A, panel, n0, nn, o); return;
#endif
    default: panel_ref(M, kp, A, panel, n0, nn, o);
    }
}

typedef struct qgemm_ctx {
    int64_t M, N, K, kp;
    const int16_t *A;
    const cn_qgemm_b *B; /* packed on the fly, or: */
    const int16_t *Bp;
    cn_qgemm_out out;
    _Atomic bool failed;
} qgemm_ctx;

static void qgemm_range(void *p, int64_t begin, int64_t end) {
    qgemm_ctx *c = p;
    int16_t *bp = NULL;
    if (!c->Bp && !(bp = cn_qgemm_panel_alloc(c->kp))) {
        c->failed = true;
        return;
    }
    for (int64_t panel = begin; panel < end; panel++) {
        if (bp) pack_panel(bp, c->B, c->N, c->K, c->kp, panel);
        int64_t n0 = panel * NR;
        cn_qgemm_panel(c->M, c->kp, c->A, bp ? bp : c->Bp + panel * c->kp * NR, n0,
                       (int)(c->N - n0 < NR ? c->N - n0 : NR), &c->out);
    }
    free(bp);
}

static int qgemm_run(qgemm_ctx *c) {
    if (c->M <= 0 || c->N <= 0) return 0;
    /* About 64k multiply-adds per chunk at least, so small products stay on
     * one thread. */
    int64_t per_panel = NR * c->M * (c->kp ? c->kp : 1);
    cn_parallel_for((c->N + NR - 1) / NR, per_panel >= 65536 ? 1 : 65536 / per_panel, qgemm_range,
                    c);
    return c->failed ? CN_ENOMEM : 0;
}

void cn_qgemm_packed(int64_t M, int64_t N, int64_t K, const int16_t *A, const int16_t *Bp,
                     const cn_qgemm_out *o) {
    qgemm_ctx c = {M, N, K, cn_qgemm_kpad(K), A, NULL, Bp, *o, false};
    qgemm_run(&c);
}

int cn_qgemm(int64_t M, int64_t N, int64_t K, const int16_t *A, const cn_qgemm_b *B,
             const cn_qgemm_out *o) {
    qgemm_ctx c = {M, N, K, cn_qgemm_kpad(K), A, B, NULL, *o, false};
    return qgemm_run(&c);
}
