/* The int8 GEMM: exact int32 sums of products of 8-bit integers, for
 * cn_matmul_integer, the ONNX integer ops and int8 inference (src/ops/
 * quant.c). Operands are widened to int16 rows first (with their zero
 * points subtracted, so u8 and i8 of either side take one path), then
 * multiplied pairwise into int32: vpmaddwd and vpaddd on AVX2 (no
 * saturation, unlike vpmaddubsw), or, at the avx512 level on a CPU with
 * AVX512_VNNI (cn_isa_vnni), vpdpwssd, which does both in one instruction
 * on 16 columns at once, from the same packing and with the same results
 * (CN_ISA=avx2 or cn_isa_set runs the AVX2 kernel instead; a -march=native
 * build for such a CPU has one level and runs it always). Not vpdpbusd
 * (u8 times i8 bytes): the widened values, zero points taken away, span
 * -255..255. No AMX path. */
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
/* Its two halves, for data quantised in pieces: the scale of n values,
 * and dst[k] = round-half-even(x[k] / scale) for a scale it gave. */
float cn_qgemm_scale(const float *x, int64_t n);
void cn_qgemm_quantize_by(int16_t *dst, const float *x, int64_t n, float scale);
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

/* Columns per panel of packed B: the kernel's width. */
#define CN_QGEMM_NR 16

/* Packed B is panels of CN_QGEMM_NR columns; within a panel, for each pair
 * of k, the columns' two values side by side (k even, k odd), so one
 * vpmaddwd of a broadcast pair of A by a vector gives 8 columns' partial
 * sums (one vpdpwssd on a zmm, 16) and no horizontal sums are needed.
 * int16 elements of B packed: */
static inline int64_t cn_qgemm_packed_len(int64_t N, int64_t K) {
    return (N + CN_QGEMM_NR - 1) / CN_QGEMM_NR * cn_qgemm_kpad(K) * CN_QGEMM_NR;
}
/* All of B's panels into dst (cn_qgemm_packed_len elements), zeros past N
 * and K: weights packed once, for cn_qgemm_packed. The kernels read a
 * panel's rows as whole 64-byte vectors (AVX-512; 32 bytes on AVX2), so dst
 * should be CN_ALIGN-aligned (tensors' storage is): a vector across two
 * cache lines costs two loads (20 to 25% of the VNNI kernel's speed here).
 * A panel's length, kp * CN_QGEMM_NR int16, is a multiple of 64 bytes. */
void cn_qgemm_pack_b(int16_t *dst, const cn_qgemm_b *B, int64_t N, int64_t K);
/* A CN_ALIGN-aligned buffer for one panel of kp rows (free it with free),
 * or NULL. */
int16_t *cn_qgemm_panel_alloc(int64_t kp);
/* One panel gathered from int16 data (a convolution's patches): column j
 * of row k is base[koff[k] + coff[j]], K rows, zeros from K to kp. Where
 * columns' data lie side by side (coff[j + 1] = coff[j] + 1) they are read
 * 16 at a time, so base[koff[k] + coff[j0] - j0 + i] must be readable for
 * i < 16 when such a run starts at column j0. */
void cn_qgemm_pack_gather(int16_t *panel, int64_t K, int64_t kp, const int16_t *base,
                          const int64_t *koff, const int64_t *coff);

/* What becomes of the sums s(m, n): int32 c[m * ld + n] = s when c is set,
 * else f32 y[m * ld + n] = s * s1 * s2 + bias (in that order, the same
 * bits as scaling the int32 sums afterwards and adding the bias then),
 * where s1 is the row's scale row_scale[m * row_step] and s2 the column's
 * col_scale[n * col_step], or the other way round when col_first; bias is
 * bias[m] when bias_by_row, else bias[n], or none when NULL. */
typedef struct cn_qgemm_out {
    int32_t *c;
    float *y;
    int64_t ld;
    const float *row_scale, *col_scale, *bias;
    int64_t row_step, col_step;
    bool col_first, bias_by_row;
} cn_qgemm_out;

/* Rows m < M of A (kp int16 each) times one packed panel, into output
 * columns n0 .. n0 + nn - 1 (nn <= CN_QGEMM_NR; the panel's other columns
 * are computed and dropped). */
void cn_qgemm_panel(int64_t M, int64_t kp, const int16_t *A, const int16_t *panel, int64_t n0,
                    int nn, const cn_qgemm_out *o);

/* The kernel cn_qgemm_panel runs at the active level: "avx512-vnni",
 * "avx2" or "portable". */
const char *cn_qgemm_kernel(void);

/* A [M, kp] times packed B (cn_qgemm_pack_b) for m < M, n < N, int32 sums
 * exact while each fits (a product of two widened 8-bit values is below
 * 2^17), threads over panels. */
void cn_qgemm_packed(int64_t M, int64_t N, int64_t K, const int16_t *A, const int16_t *Bp,
                     const cn_qgemm_out *o);

/* The sums over k < K of A[m * kp + k] * B(n, k), for m < M, n < N (A's
 * rows kp = cn_qgemm_kpad(K) long, zero padded) into o, B packed panel by
 * panel by the thread that uses it (an operand used once). 0, or
 * CN_ENOMEM. */
int cn_qgemm(int64_t M, int64_t N, int64_t K, const int16_t *A, const cn_qgemm_b *B,
             const cn_qgemm_out *o);

#endif
