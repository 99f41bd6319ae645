/* References in double for the f32 math of src/backend/cpu/vmath.h, the
 * public ops that compute it (as one signature), and the ulp distance, shared
 * by tests/test_isa.c and bench/bench_vmath_ulp.c. At +-inf, where a
 * formula is inf/inf or inf*0, the reference is the limit. */
#ifndef CN_TEST_VMATH_REF_H
#define CN_TEST_VMATH_REF_H

#include <chutney.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef cn_tensor *(*apply_fn)(cn_tensor *x);
typedef double (*ref_fn)(double x);

static inline cn_tensor *a_exp(cn_tensor *x) { return cn_exp(x); }
static inline cn_tensor *a_expm1(cn_tensor *x) { return cn_expm1(x); }
static inline cn_tensor *a_log(cn_tensor *x) { return cn_log(x); }
static inline cn_tensor *a_log1p(cn_tensor *x) { return cn_log1p(x); }
static inline cn_tensor *a_tanh(cn_tensor *x) { return cn_tanh(x); }
static inline cn_tensor *a_sigmoid(cn_tensor *x) { return cn_sigmoid(x); }
static inline cn_tensor *a_silu(cn_tensor *x) { return cn_silu(x); }
static inline cn_tensor *a_erf(cn_tensor *x) { return cn_erf(x); }
static inline cn_tensor *a_gelu(cn_tensor *x) { return cn_gelu(x, false); }
static inline cn_tensor *a_gelu_tanh(cn_tensor *x) { return cn_gelu(x, true); }
static inline cn_tensor *a_softplus(cn_tensor *x) { return cn_softplus(x, 1, 20); }
static inline cn_tensor *a_rsqrt(cn_tensor *x) { return cn_rsqrt(x); }

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
