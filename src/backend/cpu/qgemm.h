/* The int8 GEMM: exact int32 sums of products of 8-bit integers, for
 * cn_matmul_integer, the ONNX integer ops and int8 inference (src/ops/
 * quant.c). Operands are widened to int16 rows first (with their zero
 * points subtracted, so u8 and i8 of either side take one path), then
 * multiplied pairwise into int32 (vpmaddwd on AVX2: no saturation, unlike
 * vpmaddubsw). No VNNI (vpdpbusd) path: the CPUs this was written on lack
 * it, and an untested kernel is not shipped. */
#ifndef CN_BACKEND_CPU_QGEMM_H
#define CN_BACKEND_CPU_QGEMM_H

#include "../../core/core.h"

/* Rows are padded with zeros to a multiple of this many int16: the kernel
 * takes k in pairs. */
#define CN_QGEMM_KSTEP 2

static inline int64_t cn_qgemm_kpad(int64_t k) {
    return (k + CN_QGEMM_KSTEP - 1) / CN_QGEMM_KSTEP * CN_QGEMM_KSTEP;
}

/* dst[r * kp + k] = src[r * rs + k * ks] - zp[r * zs] for r < rows, k < K
 * (0 beyond K); src is u8 (is_signed false) or i8. zp may be NULL. */
void cn_qgemm_widen(int16_t *dst, int64_t rows, int64_t K, int64_t kp, const void *src,
                    bool is_signed, int64_t rs, int64_t ks, const int32_t *zp, int64_t zs);

/* Symmetric int8 quantisation of n f32 values with one scale, max |x| /
 * 127 (1 when all are 0, NaN when one is NaN or infinite), which it
 * returns: dst[k] = round-half-even(x[k] / scale). */
float cn_qgemm_quantize(int16_t *dst, const float *x, int64_t n);
/* Symmetric int8 quantisation of rows of f32 values, one scale per row:
 * dst row r (kp int16, zero padded) = round-half-even(x / scale[r]) with
 * scale[r] = max |x| / 127 (1 for a row of zeros). */
void cn_qgemm_quantize_rows(int16_t *dst, float *scale, int64_t rows, int64_t K, int64_t kp,
                            const float *x, int64_t rs);

/* The right operand: element (n, k) is data[n * rs + k * ks] - zp[n * zs]
 * (zp may be NULL: 0), data u8 (is_signed false) or i8. */
typedef struct cn_qgemm_b {
    const void *data;
    bool is_signed;
    int64_t rs, ks;
    const int32_t *zp;
    int64_t zs;
} cn_qgemm_b;

/* C[m * ldc + n] = sum over k < K of A[m * kp + k] * B(n, k), for m < M,
 * n < N (A's rows kp = cn_qgemm_kpad(K) long, zero padded): int32, exact
 * while each sum fits (a product of two widened 8-bit values is below
 * 2^17). Threads over panels of 16 columns, each widened and packed by
 * the thread that uses it. 0, or CN_ENOMEM. */
int cn_qgemm(int64_t M, int64_t N, int64_t K, const int16_t *A, const cn_qgemm_b *B, int32_t *C,
             int64_t ldc);

#endif
