/* Gradient cases for the unary elementwise ops (src/ops/unary.c). Inputs
 * keep clear of kinks and steps, where a central difference means nothing;
 * the conventions there are tested in test_grad_unary.c. */
#include <math.h>

#define GCU(NAME, EXPR)                                                                            \
    static cn_tensor *gcf_##NAME(cn_tensor **x) { return (EXPR); }

GCU(neg, cn_neg(x[0]))
GCU(abs, cn_abs(x[0]))
GCU(sign, cn_sign(x[0]))
GCU(exp, cn_exp(x[0]))
GCU(log, cn_log(x[0]))
GCU(log1p, cn_log1p(x[0]))
GCU(expm1, cn_expm1(x[0]))
GCU(sqrt, cn_sqrt(x[0]))
GCU(rsqrt, cn_rsqrt(x[0]))
GCU(square, cn_square(x[0]))
GCU(reciprocal, cn_reciprocal(x[0]))
GCU(sin, cn_sin(x[0]))
GCU(cos, cn_cos(x[0]))
GCU(tanh, cn_tanh(x[0]))
GCU(sigmoid, cn_sigmoid(x[0]))
GCU(relu, cn_relu(x[0]))
GCU(leaky_relu, cn_leaky_relu(x[0], 0.01))
GCU(leaky_relu_02, cn_leaky_relu(x[0], 0.2))
GCU(leaky_relu_neg, cn_leaky_relu(x[0], -0.5))
GCU(elu, cn_elu(x[0], 1.0))
GCU(elu_03, cn_elu(x[0], 0.3))
GCU(elu_neg, cn_elu(x[0], -1.5))
GCU(gelu, cn_gelu(x[0], false))
GCU(gelu_tanh, cn_gelu(x[0], true))
GCU(silu, cn_silu(x[0]))
GCU(softplus, cn_softplus(x[0], 1, 20))
GCU(softplus_b2, cn_softplus(x[0], 2, 1)) /* linear where x > 0.5 */
GCU(softplus_bneg, cn_softplus(x[0], -1.5, 1)) /* linear where x < -2/3 */
GCU(erf, cn_erf(x[0]))
GCU(floor, cn_floor(x[0]))
GCU(ceil, cn_ceil(x[0]))
GCU(round, cn_round(x[0]))
GCU(clamp, cn_clamp(x[0], -0.5, 0.5))
GCU(clamp_lo, cn_clamp(x[0], -0.3, INFINITY))
GCU(clamp_hi, cn_clamp(x[0], -INFINITY, 0.2))
GCU(clamp_none, cn_clamp(x[0], -INFINITY, INFINITY))
GCU(clamp_crossed, cn_clamp(x[0], 0.5, -0.5)) /* lo > hi: constant hi */
/* the compositions of src/ops/trig.c (atan's three branches: |x| below
 * 0.41, to 2.41, above) */
GCU(tan, cn_tan(x[0]))
GCU(asin, cn_asin(x[0]))
GCU(acos, cn_acos(x[0]))
GCU(atan, cn_atan(x[0]))
GCU(atan2, cn_atan2(x[0], x[1]))
GCU(sinh, cn_sinh(x[0]))
GCU(cosh, cn_cosh(x[0]))
GCU(asinh, cn_asinh(x[0]))
GCU(acosh, cn_acosh(x[0]))
GCU(atanh, cn_atanh(x[0]))

#undef GCU

#define GCU_IN(lo, hi) {{GC_SHAPE(3, 4), lo, hi}}
#define GCU_GAP(lo, hi, gap) {{GC_SHAPE(3, 4), lo, hi, gap}}

static const grad_case grad_cases_unary[] = {
    {"neg", "3x4", 1, GCU_IN(-2, 2), gcf_neg},
    {"abs", "away from 0", 1, GCU_GAP(-2, 2, 0.05), gcf_abs},
    {"sign", "away from 0", 1, GCU_GAP(-2, 2, 0.05), gcf_sign},
    {"exp", "3x4", 1, GCU_IN(-2, 2), gcf_exp},
    {"exp", "rank 0", 1, {{.ndim = 0, .lo = -1, .hi = 1}}, gcf_exp},
    {"exp", "0x3", 1, {{GC_SHAPE(0, 3), -1, 1}}, gcf_exp},
    {"log", "x > 0", 1, GCU_IN(0.2, 3), gcf_log},
    {"log1p", "x > -1", 1, GCU_IN(-0.6, 2), gcf_log1p},
    {"expm1", "3x4", 1, GCU_IN(-2, 2), gcf_expm1},
    {"sqrt", "x > 0", 1, GCU_IN(0.2, 3), gcf_sqrt},
    {"rsqrt", "x > 0", 1, GCU_IN(0.2, 3), gcf_rsqrt},
    {"square", "3x4", 1, GCU_IN(-2, 2), gcf_square},
    {"reciprocal", "away from 0", 1, GCU_GAP(-2, 2, 0.3), gcf_reciprocal},
    {"sin", "3x4", 1, GCU_IN(-4, 4), gcf_sin},
    {"cos", "3x4", 1, GCU_IN(-4, 4), gcf_cos},
    {"tanh", "3x4", 1, GCU_IN(-2.5, 2.5), gcf_tanh},
    {"sigmoid", "3x4", 1, GCU_IN(-4, 4), gcf_sigmoid},
    {"relu", "away from 0", 1, GCU_GAP(-1, 1, 0.05), gcf_relu},
    {"leaky_relu", "slope 0.01", 1, GCU_GAP(-1, 1, 0.05), gcf_leaky_relu},
    {"leaky_relu", "slope 0.2", 1, GCU_GAP(-1, 1, 0.05), gcf_leaky_relu_02},
    {"leaky_relu", "slope -0.5", 1, GCU_GAP(-1, 1, 0.05), gcf_leaky_relu_neg},
    {"elu", "alpha 1", 1, GCU_GAP(-3, 2, 0.05), gcf_elu},
    {"elu", "alpha 0.3", 1, GCU_GAP(-3, 2, 0.05), gcf_elu_03},
    {"elu", "alpha -1.5", 1, GCU_GAP(-3, 2, 0.05), gcf_elu_neg},
    {"gelu", "erf", 1, GCU_IN(-4, 4), gcf_gelu},
    {"gelu", "tanh", 1, GCU_IN(-4, 4), gcf_gelu_tanh},
    {"silu", "3x4", 1, GCU_IN(-5, 5), gcf_silu},
    {"softplus", "beta 1, threshold 20", 1, GCU_IN(-4, 4), gcf_softplus},
    {"softplus", "beta 2, threshold 1, curved part", 1, GCU_IN(-2, 0.45), gcf_softplus_b2},
    {"softplus", "beta 2, threshold 1, linear part", 1, GCU_IN(0.55, 2), gcf_softplus_b2},
    {"softplus", "beta -1.5, threshold 1, curved part", 1, GCU_IN(-0.6, 2), gcf_softplus_bneg},
    {"softplus", "beta -1.5, threshold 1, linear part", 1, GCU_IN(-2, -0.7), gcf_softplus_bneg},
    {"erf", "3x4", 1, GCU_IN(-2.5, 2.5), gcf_erf},
    /* steps at integers (halves for round): random f64 values are never
     * within eps of one */
    {"floor", "3x4", 1, GCU_IN(-3, 3), gcf_floor},
    {"ceil", "3x4", 1, GCU_IN(-3, 3), gcf_ceil},
    {"round", "3x4", 1, GCU_IN(-3, 3), gcf_round},
    {"clamp", "lo and hi", 1, GCU_IN(-1, 1), gcf_clamp},
    {"clamp", "lo only", 1, GCU_IN(-1, 1), gcf_clamp_lo},
    {"clamp", "hi only", 1, GCU_IN(-1, 1), gcf_clamp_hi},
    {"clamp", "no bound", 1, GCU_IN(-1, 1), gcf_clamp_none},
    {"clamp", "lo > hi", 1, GCU_IN(-1, 1), gcf_clamp_crossed},
    {"tan", "3x4", 1, GCU_IN(-1.2, 1.2), gcf_tan},
    {"asin", "3x4", 1, GCU_IN(-0.9, 0.9), gcf_asin},
    {"acos", "3x4", 1, GCU_IN(-0.9, 0.9), gcf_acos},
    {"atan", "3x4", 1, GCU_IN(-5, 5), gcf_atan},
    {"atan2", "x away from 0", 2, {{GC_SHAPE(3, 4), -2, 2}, {GC_SHAPE(3, 4), -2, 2, 0.1}}, gcf_atan2},
    {"sinh", "3x4", 1, GCU_IN(-2, 2), gcf_sinh},
    {"cosh", "3x4", 1, GCU_IN(-2, 2), gcf_cosh},
    {"asinh", "3x4", 1, GCU_IN(-3, 3), gcf_asinh},
    {"acosh", "x > 1", 1, GCU_IN(1.2, 4), gcf_acosh},
    {"atanh", "3x4", 1, GCU_IN(-0.9, 0.9), gcf_atanh},
};

#undef GCU_IN
#undef GCU_GAP
