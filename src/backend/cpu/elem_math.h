/* One-element formulas shared by the unary and binary kernels (unary.c,
 * binary.c) and the fused elementwise kernel (fused_kernels.c), so a fused
 * expression gives the same bits as the ops run one by one. The f32
 * transcendental functions are vmath.h's; these are the f64 ones (libm) and
 * the selects. */
#ifndef CN_CPU_ELEM_MATH_H
#define CN_CPU_ELEM_MATH_H

#include "vmath.h"

#include <math.h>

static inline double un_sigmoid(double v) {
    double e = exp(-fabs(v)); /* never overflows */
    return (v >= 0 ? 1.0 : e) / (1.0 + e);
}
static inline double un_silu(double v) { return v == -INFINITY ? -0.0 : v * un_sigmoid(v); }
static inline double un_gelu(double v) {
    return v == -INFINITY ? -0.0 : 0.5 * v * erfc(v * -0.70710678118654752440);
}
static inline double un_gelu_tanh(double v) {
    double z = 1.5957691216057307117 * (v + 0.044715 * (v * v * v)); /* 2 sqrt(2/pi) (...) */
    return v == -INFINITY ? -0.0 : v * un_sigmoid(z);
}
static inline double un_softplus(double v, double beta, double threshold) {
    double z = v * beta;
    if (z > threshold) return v;
    return ((z > 0 ? z : 0.0) + log1p(exp(-fabs(z)))) / beta;
}
static inline double un_elu(double v, double alpha) { return v > 0 ? v : alpha * expm1(v); }

/* Bounds are applied one after the other, so lo > hi gives hi (PyTorch);
 * NaN passes both comparisons. */
static inline float un_clampf(float v, float lo, float hi) {
    float y = cn_vsel(v < lo, lo, v);
    return cn_vsel(y > hi, hi, y);
}
static inline double un_clamp(double v, double lo, double hi) {
    double y = cn_vseld(v < lo, lo, v);
    return cn_vseld(y > hi, hi, y);
}

/* NaN wins in maximum/minimum (like torch); on ties the first operand is
 * kept, so maximum(-0, 0) is -0 as in torch. */
#define FMAX(a, b) ((b) > (a) || (b) != (b) ? (b) : (a))
#define FMIN(a, b) ((b) < (a) || (b) != (b) ? (b) : (a))

#endif
