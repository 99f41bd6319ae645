/* CPU kernels of the reduction family (src/ops/reduce.c) and of softmax,
 * log_softmax and cumsum (src/ops/softmax.c). */
#ifndef CN_CPU_REDUCE_H
#define CN_CPU_REDUCE_H

#include "../../core/core.h"

typedef enum cn_reduce_kind {
    CN_RED_SUM,
    CN_RED_MEAN,
    CN_RED_PROD,
    CN_RED_MAX,
    CN_RED_MIN,
    CN_RED_VAR,
    CN_RED_STD,
    CN_RED_LOGSUMEXP,
    CN_RED_NORM,
    CN_RED_ARGMAX,
    CN_RED_ARGMIN,
    CN_RED_COUNT
} cn_reduce_kind;

/* out = the `kind` reduction of x over axes[0..naxes) (sorted, distinct).
 * out is contiguous with x's shape less those axes (or with them as size 1)
 * and the dtype infer chose. x has any strides and is f32, f64 or i64 (the
 * op layer widens other integer types); the float-only kinds take f32/f64.
 * param: the correction of var/std, p of norm (> 0, INFINITY for max |x|).
 * argmax/argmin take exactly one axis, or none for a rank-0 x. The result is
 * bit-identical for any thread count. Returns 0 or a negative status. */
int cn_cpu_reduce(const char *name, cn_reduce_kind kind, cn_tensor *out, const cn_tensor *x,
                  const int64_t *axes, int naxes, double param);

/* out = softmax (or log_softmax) of x along axis; x f32 or f64, out of the
 * same shape and dtype, contiguous. */
int cn_cpu_softmax(const char *name, bool log, cn_tensor *out, cn_tensor *x, int axis);

/* out = running sums of x along axis; x f32, f64 or i64 (out the same
 * dtype), float sums accumulated in double like PyTorch. */
int cn_cpu_cumsum(const char *name, cn_tensor *out, cn_tensor *x, int axis);

/* ---- helpers shared by the kernels (reduce.c, softmax.c) ---- */

/* max/min where NaN wins: once a NaN is in, it stays. */
#define CN_NANMAX(a, v) (((v) > (a) || (v) != (v)) ? (v) : (a))
#define CN_NANMIN(a, v) (((v) < (a) || (v) != (v)) ? (v) : (a))
#define CN_ADD(a, v) ((a) + (v))

/* Fold 32 lanes a[] into h[0..4) with OP, halving level by level as the
 * vector width does, so the compiler keeps it in vector registers (a loop
 * over the lanes one by one is a long, branchy chain). */
#define CN_FOLD32_TO4(T, a, h, OP)                                                                 \
    do {                                                                                           \
        T b16_[16], b8_[8];                                                                        \
        for (int k_ = 0; k_ < 16; k_++) b16_[k_] = OP(a[k_], a[k_ + 16]);                          \
        for (int k_ = 0; k_ < 8; k_++) b8_[k_] = OP(b16_[k_], b16_[k_ + 8]);                       \
        for (int k_ = 0; k_ < 4; k_++) h[k_] = OP(b8_[k_], b8_[k_ + 4]);                           \
    } while (0)

/* e^x in f32, written so loops over it vectorise (libm's expf is a call per
 * element). x = k ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), e^r
 * by its Taylor series to degree 7 (truncation error 5e-9), and 2^k applied
 * in two halves so results near the overflow and underflow limits,
 * subnormals included, come out right. NaN propagates. Within 2 ulp. */
static inline float cn_exp_f32(float x) {
    x = x < -104.0f ? -104.0f : x; /* e^-104 rounds to 0 */
    x = x > 89.0f ? 89.0f : x;     /* e^89 overflows to inf */
    const float shifter = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float t = x * 1.44269504088896341f + shifter;
    float kf = t - shifter;
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    int32_t k = (int32_t)(tb - 0x4B400000u); /* the integer in t's low mantissa bits */
    float r = (x - kf * 0.693359375f) - kf * -2.12194440e-4f;
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t k1 = k / 2, k2 = k - k1;
    uint32_t b1 = (uint32_t)(k1 + 127) << 23, b2 = (uint32_t)(k2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    return p * s1 * s2;
}

#endif
