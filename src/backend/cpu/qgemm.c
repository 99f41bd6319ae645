/* The int8 GEMM (qgemm.h): a portable loop, and an AVX2 one picked at run
 * time through cn_isa(). Both give the same int32 sums. */
#include "qgemm.h"
#include "../../core/isa.h"

#include <math.h>

/* Columns (rows of B) per block: the unit of the split over threads. */
#define NR 4

void cn_qgemm_widen(int16_t *dst, int64_t rows, int64_t K, int64_t kp, const void *src,
                    bool is_signed, int64_t rs, int64_t ks, const int32_t *zp, int64_t zs) {
    for (int64_t r = 0; r < rows; r++) {
        int16_t *d = dst + r * kp;
        int32_t z = zp ? zp[r * zs] : 0;
        if (is_signed) {
            const int8_t *s = (const int8_t *)src + r * rs;
            for (int64_t k = 0; k < K; k++) d[k] = (int16_t)(s[k * ks] - z);
        } else {
            const uint8_t *s = (const uint8_t *)src + r * rs;
            for (int64_t k = 0; k < K; k++) d[k] = (int16_t)(s[k * ks] - z);
        }
        for (int64_t k = K; k < kp; k++) d[k] = 0;
    }
}

void cn_qgemm_quantize_rows(int16_t *dst, float *scale, int64_t rows, int64_t K, int64_t kp,
                            const float *x, int64_t rs) {
    for (int64_t r = 0; r < rows; r++) {
        const float *s = x + r * rs;
        int16_t *d = dst + r * kp;
        float m = 0;
        for (int64_t k = 0; k < K; k++) m = fmaxf(m, fabsf(s[k]));
        /* A NaN or infinite input gives a NaN scale, so the row's outputs
         * are NaN rather than quietly finite. */
        float sc = m > 0 ? m / 127.0f : isfinite(m) ? 1.0f : NAN;
        float inv = 1.0f / sc;
        scale[r] = sc;
        for (int64_t k = 0; k < K; k++) {
            float q = nearbyintf(s[k] * inv);
            d[k] = (int16_t)(q > 127.0f ? 127 : q < -127.0f ? -127 : q == q ? q : 0);
        }
        for (int64_t k = K; k < kp; k++) d[k] = 0;
    }
}

typedef struct qgemm_ctx {
    int64_t M, N, kp, ldc;
    const int16_t *A, *B;
    int32_t *C;
} qgemm_ctx;

static void qgemm_ref(const qgemm_ctx *c, int64_t n0, int64_t n1) {
    for (int64_t m = 0; m < c->M; m++) {
        const int16_t *a = c->A + m * c->kp;
        for (int64_t n = n0; n < n1; n++) {
            const int16_t *b = c->B + n * c->kp;
            int32_t s = 0;
            for (int64_t k = 0; k < c->kp; k++) s += (int32_t)a[k] * b[k];
            c->C[m * c->ldc + n] = s;
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_QGEMM_AVX2 1

#define MR 3

__attribute__((target("avx2"))) static inline int32_t hsum_avx2(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* Blocks of MR rows of A by NR rows of B: 12 accumulators, 3 A vectors and
 * one B vector at a time fill the 16 ymm registers. Rows past the edge
 * repeat the last one (computed, not stored). */
__attribute__((target("avx2"))) static void qgemm_avx2(const qgemm_ctx *c, int64_t n0,
                                                       int64_t n1) {
    const int64_t kp = c->kp;
    for (int64_t n = n0; n < n1; n += NR) {
        int nn = (int)(n1 - n < NR ? n1 - n : NR);
        const int16_t *b[NR];
        for (int j = 0; j < NR; j++) b[j] = c->B + (n + (j < nn ? j : nn - 1)) * kp;
        for (int64_t m = 0; m < c->M; m += MR) {
            int mm = (int)(c->M - m < MR ? c->M - m : MR);
            const int16_t *a[MR];
            for (int i = 0; i < MR; i++) a[i] = c->A + (m + (i < mm ? i : mm - 1)) * kp;
            __m256i acc[MR][NR];
            for (int i = 0; i < MR; i++)
                for (int j = 0; j < NR; j++) acc[i][j] = _mm256_setzero_si256();
            for (int64_t k = 0; k < kp; k += CN_QGEMM_KSTEP) {
                __m256i va[MR];
                for (int i = 0; i < MR; i++) va[i] = _mm256_loadu_si256((const __m256i *)(a[i] + k));
                for (int j = 0; j < NR; j++) {
                    __m256i vb = _mm256_loadu_si256((const __m256i *)(b[j] + k));
                    for (int i = 0; i < MR; i++)
                        acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(va[i], vb));
                }
            }
            for (int i = 0; i < mm; i++)
                for (int j = 0; j < nn; j++) c->C[(m + i) * c->ldc + n + j] = hsum_avx2(acc[i][j]);
        }
    }
}
#endif

static void qgemm_range(void *p, int64_t begin, int64_t end) {
    const qgemm_ctx *c = p;
    int64_t n0 = begin * NR, n1 = end * NR < c->N ? end * NR : c->N;
#ifdef HAVE_QGEMM_AVX2
    if (cn_isa() >= CN_ISA_AVX2) {
        qgemm_avx2(c, n0, n1);
        return;
    }
#endif
    qgemm_ref(c, n0, n1);
}

void cn_qgemm(int64_t M, int64_t N, int64_t kp, const int16_t *A, const int16_t *B, int32_t *C,
              int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    qgemm_ctx c = {M, N, kp, ldc, A, B, C};
    int64_t blocks = (N + NR - 1) / NR;
    /* About 64k multiply-adds per chunk at least, so small products stay on
     * one thread. */
    int64_t per_block = NR * M * (kp ? kp : 1);
    int64_t grain = per_block >= 65536 ? 1 : 65536 / per_block;
    cn_parallel_for(blocks, grain, qgemm_range, &c);
}
