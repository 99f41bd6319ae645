/* The int8 GEMM (qgemm.h): a portable loop, and an AVX2 one picked at run
 * time through cn_isa(). Both give the same int32 sums. */
#include "qgemm.h"
#include "../../core/isa.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

/* Columns per panel of packed B: the unit of the split over threads. */
#define NR 16

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

/* Half to even in the default rounding mode, for |x| < 2^22 (a library
 * call per element otherwise); larger values are clamped anyway. */
static inline float round_even(float x) {
    return fabsf(x) < 0x1p22f ? (x + 0x1.8p23f) - 0x1.8p23f : x;
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

CN_HOT_FN(quantize, (int16_t *d, const float *x, int64_t n, float inv), (d, x, n, inv)) {
    for (int64_t k = 0; k < n; k++) {
        float q = round_even(x[k] * inv);
        q = q > 127.0f ? 127.0f : q;
        q = q < -127.0f ? -127.0f : q;
        d[k] = (int16_t)(q == q ? q : 0);
    }
}

float cn_qgemm_quantize(int16_t *dst, const float *x, int64_t n) {
    uint32_t bits;
    absmax_bits(x, n, &bits);
    float m;
    memcpy(&m, &bits, 4);
    /* A NaN or infinite input gives a NaN scale, so the outputs it feeds
     * are NaN rather than quietly finite. */
    float sc = bits >= 0x7f800000u ? NAN : m > 0 ? m / 127.0f : 1.0f;
    quantize(dst, x, n, 1.0f / sc);
    return sc;
}

void cn_qgemm_quantize_rows(int16_t *dst, float *scale, int64_t rows, int64_t K, int64_t kp,
                            const float *x, int64_t rs) {
    for (int64_t r = 0; r < rows; r++) {
        scale[r] = cn_qgemm_quantize(dst + r * kp, x + r * rs, K);
        for (int64_t k = K; k < kp; k++) dst[r * kp + k] = 0;
    }
}

/* B is packed in panels of NR columns: for each pair of k, the NR columns'
 * two values side by side (32 int16, two vectors), so one vpmaddwd of a
 * broadcast pair of A by a vector gives 8 columns' partial sums and no
 * horizontal sums are needed. */
typedef struct qgemm_ctx {
    int64_t M, N, K, kp, ldc;
    const int16_t *A;
    const cn_qgemm_b *B;
    int32_t *C;
    _Atomic bool failed;
} qgemm_ctx;

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

static void qgemm_ref(const qgemm_ctx *c, const int16_t *bp, int64_t p) {
    int64_t kq = c->kp / 2;
    for (int64_t m = 0; m < c->M; m++) {
        const int16_t *a = c->A + m * c->kp;
        int32_t s[NR] = {0};
        for (int64_t q = 0; q < kq; q++) {
            const int16_t *b = bp + q * 2 * NR;
            for (int j = 0; j < NR; j++)
                s[j] += (int32_t)a[2 * q] * b[2 * j] + (int32_t)a[2 * q + 1] * b[2 * j + 1];
        }
        for (int j = 0; j < NR && p * NR + j < c->N; j++) c->C[m * c->ldc + p * NR + j] = s[j];
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_QGEMM_AVX2 1

/* Rows of A per block: 8 accumulators, two B vectors and four broadcasts
 * fit the 16 ymm registers (6 rows spill accumulators to the stack). */
#define MR 4

__attribute__((target("avx2"))) static void qgemm_avx2(const qgemm_ctx *c, const int16_t *bp,
                                                       int64_t p) {
    const int64_t kq = c->kp / 2;
    {
        int64_t n = p * NR, nn = c->N - n < NR ? c->N - n : NR;
        for (int64_t m = 0; m < c->M; m += MR) {
            int mm = (int)(c->M - m < MR ? c->M - m : MR);
            /* Rows past the edge repeat the last one (computed, not stored). */
            const int16_t *a[MR];
            for (int i = 0; i < MR; i++) a[i] = c->A + (m + (i < mm ? i : mm - 1)) * c->kp;
            __m256i acc[MR][2];
            for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
            for (int64_t q = 0; q < kq; q++) {
                __m256i b0 = _mm256_loadu_si256((const __m256i *)(bp + q * 2 * NR));
                __m256i b1 = _mm256_loadu_si256((const __m256i *)(bp + q * 2 * NR + 16));
                for (int i = 0; i < MR; i++) {
                    int32_t pair;
                    memcpy(&pair, a[i] + 2 * q, 4);
                    __m256i va = _mm256_set1_epi32(pair);
                    acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(va, b0));
                    acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(va, b1));
                }
            }
            for (int i = 0; i < mm; i++) {
                int32_t *out = c->C + (m + i) * c->ldc + n;
                if (nn == NR) {
                    _mm256_storeu_si256((__m256i *)out, acc[i][0]);
                    _mm256_storeu_si256((__m256i *)(out + 8), acc[i][1]);
                } else {
                    int32_t t[NR];
                    _mm256_storeu_si256((__m256i *)t, acc[i][0]);
                    _mm256_storeu_si256((__m256i *)(t + 8), acc[i][1]);
                    memcpy(out, t, sizeof(int32_t) * (size_t)nn);
                }
            }
        }
    }
}
#endif

static void qgemm_range(void *p, int64_t begin, int64_t end) {
    qgemm_ctx *c = p;
    int16_t *bp = malloc(sizeof(int16_t) * (size_t)(c->kp * NR));
    if (!bp) {
        c->failed = true;
        return;
    }
    for (int64_t panel = begin; panel < end; panel++) {
        pack_panel(bp, c->B, c->N, c->K, c->kp, panel);
#ifdef HAVE_QGEMM_AVX2
        if (cn_isa() >= CN_ISA_AVX2) {
            qgemm_avx2(c, bp, panel);
            continue;
        }
#endif
        qgemm_ref(c, bp, panel);
    }
    free(bp);
}

int cn_qgemm(int64_t M, int64_t N, int64_t K, const int16_t *A, const cn_qgemm_b *B, int32_t *C,
             int64_t ldc) {
    if (M <= 0 || N <= 0) return 0;
    int64_t kp = cn_qgemm_kpad(K), panels = (N + NR - 1) / NR;
    qgemm_ctx c = {M, N, K, kp, ldc, A, B, C, false};
    /* About 64k multiply-adds per chunk at least, so small products stay on
     * one thread. */
    int64_t per_panel = NR * M * (kp ? kp : 1);
    cn_parallel_for(panels, per_panel >= 65536 ? 1 : 65536 / per_panel, qgemm_range, &c);
    return c.failed ? CN_ENOMEM : 0;
}
