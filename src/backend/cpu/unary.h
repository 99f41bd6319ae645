/* CPU kernels of the unary elementwise family (src/ops/unary.c). */
#ifndef CN_CPU_UNARY_H
#define CN_CPU_UNARY_H

#include "../../core/core.h"

typedef enum cn_unary_kind {
    CN_UN_NEG,
    CN_UN_ABS,
    CN_UN_SIGN,
    CN_UN_EXP,
    CN_UN_LOG,
    CN_UN_LOG1P,
    CN_UN_EXPM1,
    CN_UN_SQRT,
    CN_UN_RSQRT,
    CN_UN_SQUARE,
    CN_UN_RECIPROCAL,
    CN_UN_SIN,
    CN_UN_COS,
    CN_UN_TANH,
    CN_UN_SIGMOID,
    CN_UN_RELU,
    CN_UN_LEAKY_RELU, /* p0: negative slope */
    CN_UN_ELU,        /* p0: alpha */
    CN_UN_GELU,       /* erf form */
    CN_UN_GELU_TANH,  /* tanh form */
    CN_UN_SILU,
    CN_UN_SOFTPLUS, /* p0: beta (not 0), p1: threshold */
    CN_UN_ERF,
    CN_UN_FLOOR,
    CN_UN_CEIL,
    CN_UN_ROUND, /* half to even */
    CN_UN_CLAMP, /* p0: lo, p1: hi (+-inf: none; NaN not allowed) */
    CN_UN_LOGICAL_NOT,
    CN_UN_COUNT
} cn_unary_kind;

/* out = kind(x), elementwise; out contiguous, of x's shape. x is f32 or f64
 * for every kind; also i32, i64 and u8 for neg, abs, sign, square, relu,
 * leaky_relu, clamp, floor, ceil and round (out of x's dtype; floor, ceil
 * and round are the identity there, neg, abs and square wrap around like
 * PyTorch, leaky_relu truncates x * slope toward zero and clamp rounds its
 * bounds inward); any dtype for logical_not (out bool). Returns 0, or a
 * negative status after cn_fail naming `name` for a dtype without a kernel. */
int cn_cpu_unary(const char *name, cn_unary_kind kind, cn_tensor *out, const cn_tensor *x,
                 double p0, double p1);

#endif
