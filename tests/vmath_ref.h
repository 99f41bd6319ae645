/* References in double for the f32 math of src/backend/cpu/vmath.h, shared
 * by tests/test_isa.c and bench/bench_vmath_ulp.c, and the ulp distance
 * both count in. At +-inf, where a formula is inf/inf or inf*0, the limit. */
#ifndef CN_TEST_VMATH_REF_H
#define CN_TEST_VMATH_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline double ref_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static inline double ref_silu(double x) { return x == -INFINITY ? -0.0 : x / (1 + exp(-x)); }
static inline double ref_gelu(double x) {
    return x == -INFINITY ? -0.0 : 0.5 * x * erfc(-x / sqrt(2.0));
}
static inline double ref_gelu_tanh(double x) {
    if (x == -INFINITY) return -0.0;
    double u = sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x);
    return x / (1 + exp(-2 * u));
}
static inline double ref_softplus(double x) { return x > 20 ? x : log1p(exp(x)); }
static inline double ref_elu(double x) { return x > 0 ? x : expm1(x); }
static inline double ref_rsqrt(double x) { return 1 / sqrt(x); }

/* Floats in an order where neighbours differ by 1 (-0 and +0 are 0 apart). */
static inline int64_t ref_ordered(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x80000000u) ? -(int64_t)(u & 0x7fffffffu) : (int64_t)u;
}

#endif
