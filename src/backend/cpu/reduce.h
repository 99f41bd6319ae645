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

/* Integer inputs reach the kernels as i64 (exact for every integer dtype;
 * the result is stored back in the output's dtype): x converted to a new
 * contiguous i64 tensor when it is an integer or bool tensor of another
 * dtype, else x retained. NULL after cn_fail. */
cn_tensor *cn_cpu_widen_i64(cn_tensor *x);

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

#endif
