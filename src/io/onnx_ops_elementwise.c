/* ONNX elementwise ops: unary maths and activations, arithmetic with
 * broadcasting, comparisons and logic, casts. ONNX requires both operands of
 * a binary op to have one dtype, so Chutney's promotion never changes a
 * result's dtype; where a Chutney op computes integers in float (Div, Pow)
 * the result is brought back to the ONNX dtype. */
#include "onnx_internal.h"

#ifdef CN_HAVE_ONNX
#include <math.h>

static bool is_int(cn_dtype dt) { return dt == CN_I32 || dt == CN_I64 || dt == CN_U8; }
static bool is_float(cn_dtype dt) { return cn_dtype_is_float(dt); }

/* Float-only maths: refuse integer inputs instead of computing in f32,
 * since ONNX defines these ops on floats only. */
static int need_float(onnx_ctx *c, cn_tensor *x) {
    if (!is_float(cn_tensor_dtype(x)))
        return onnx_unsup(c, "dtype %s (float inputs only)", cn_dtype_name(cn_tensor_dtype(x)));
    return 0;
}

static cn_tensor *sc(cn_tensor *x, double v) { return onnx_scalar_like(x, v); }

/* ---- unary ---- */

#define UNARY_FLOAT(hname, expr)                                                                   \
    H(hname) {                                                                                     \
        UNUSED;                                                                                    \
        cn_tensor *x = in[0];                                                                      \
        if (need_float(c, x) < 0) return CN_EUNSUPPORTED;                                          \
        DONE(expr);                                                                                \
    }
#define UNARY_ANY(hname, expr)                                                                     \
    H(hname) {                                                                                     \
        UNUSED;                                                                                    \
        cn_tensor *x = in[0];                                                                      \
        DONE(expr);                                                                                \
    }

UNARY_FLOAT(h_exp, cn_exp(x))
UNARY_FLOAT(h_log, cn_log(x))
UNARY_FLOAT(h_sqrt, cn_sqrt(x))
UNARY_FLOAT(h_reciprocal, cn_reciprocal(x))
UNARY_FLOAT(h_sin, cn_sin(x))
UNARY_FLOAT(h_cos, cn_cos(x))
UNARY_FLOAT(h_tan, cn_tan(x))
UNARY_FLOAT(h_atan, cn_atan(x))
UNARY_FLOAT(h_asin, cn_asin(x))
UNARY_FLOAT(h_acos, cn_acos(x))
UNARY_FLOAT(h_asinh, cn_asinh(x))
UNARY_FLOAT(h_acosh, cn_acosh(x))
UNARY_FLOAT(h_atanh, cn_atanh(x))
UNARY_FLOAT(h_sinh, cn_sinh(x))
UNARY_FLOAT(h_cosh, cn_cosh(x))
UNARY_FLOAT(h_tanh, cn_tanh(x))
UNARY_FLOAT(h_sigmoid, cn_sigmoid(x))
UNARY_FLOAT(h_erf, cn_erf(x))
UNARY_FLOAT(h_floor, cn_floor(x))
UNARY_FLOAT(h_ceil, cn_ceil(x))
UNARY_FLOAT(h_round, cn_round(x))
UNARY_FLOAT(h_softsign, cn_div(x, cn_add_scalar(cn_abs(x), 1)))
UNARY_FLOAT(h_isnan, cn_ne(x, x))
/* Gelu (opset 20): approximate "none" (the erf form) or "tanh". */
H(h_gelu) {
    UNUSED;
    cn_tensor *x = in[0];
    if (need_float(c, x) < 0) return CN_EUNSUPPORTED;
    char ab[16];
    const char *a = onnx_attr_str(n, "approximate", "none", ab, sizeof ab);
    if (strcmp(a, "none") && strcmp(a, "tanh")) return onnx_unsup(c, "approximate '%s'", a);
    DONE(cn_gelu(x, !strcmp(a, "tanh")));
}
UNARY_ANY(h_abs, cn_abs(x))
UNARY_ANY(h_neg, cn_neg(x))
UNARY_ANY(h_sign, cn_cast(cn_sign(x), cn_tensor_dtype(x)))
UNARY_ANY(h_relu, cn_relu(x))
UNARY_ANY(h_not, cn_logical_not(x))

H(h_identity) {
    UNUSED;
    DONE(in[0]);
}

/* Softplus is log(1 + e^x) with no cut-off: an infinite threshold. */
UNARY_FLOAT(h_softplus, cn_softplus(x, 1.0, INFINITY))
/* Mish (opset 18): x tanh(softplus(x)). */
UNARY_FLOAT(h_mish, cn_mul(x, cn_tanh(cn_softplus(x, 1.0, INFINITY))))

H(h_elu) {
    UNUSED;
    if (need_float(c, in[0]) < 0) return CN_EUNSUPPORTED;
    DONE(cn_elu(in[0], onnx_attr_float(n, "alpha", 1.0)));
}

H(h_leaky_relu) {
    UNUSED;
    if (need_float(c, in[0]) < 0) return CN_EUNSUPPORTED;
    DONE(cn_leaky_relu(in[0], onnx_attr_float(n, "alpha", 0.01)));
}

H(h_selu) {
    UNUSED;
    cn_tensor *x = in[0];
    if (need_float(c, x) < 0) return CN_EUNSUPPORTED;
    double alpha = onnx_attr_float(n, "alpha", 1.67326319217681884765625);
    double gamma = onnx_attr_float(n, "gamma", 1.05070102214813232421875);
    DONE(cn_mul_scalar(cn_elu(x, alpha), gamma));
}

H(h_celu) {
    UNUSED;
    cn_tensor *x = in[0];
    if (need_float(c, x) < 0) return CN_EUNSUPPORTED;
    double a = onnx_attr_float(n, "alpha", 1.0);
    /* max(0, x) + min(0, a (e^(x/a) - 1)) */
    cn_tensor *neg = cn_mul_scalar(cn_expm1(cn_div_scalar(x, a)), a);
    DONE(cn_add(cn_relu(x), cn_minimum(neg, sc(x, 0))));
}

H(h_hard_sigmoid) {
    UNUSED;
    cn_tensor *x = in[0];
    if (need_float(c, x) < 0) return CN_EUNSUPPORTED;
    double alpha = onnx_attr_float(n, "alpha", 0.2), beta = onnx_attr_float(n, "beta", 0.5);
    DONE(cn_clamp(cn_add_scalar(cn_mul_scalar(x, alpha), beta), 0, 1));
}

H(h_hard_swish) {
    UNUSED;
    cn_tensor *x = in[0];
    if (need_float(c, x) < 0) return CN_EUNSUPPORTED;
    DONE(cn_mul(x, cn_clamp(cn_add_scalar(cn_mul_scalar(x, 1.0 / 6), 0.5), 0, 1)));
}

H(h_thresholded_relu) {
    UNUSED;
    cn_tensor *x = in[0];
    if (need_float(c, x) < 0) return CN_EUNSUPPORTED;
    double alpha = onnx_attr_float(n, "alpha", 1.0);
    DONE(cn_where(cn_gt(x, sc(x, alpha)), x, sc(x, 0)));
}

H(h_shrink) {
    UNUSED;
    cn_tensor *x = in[0];
    double bias = onnx_attr_float(n, "bias", 0.0), l = onnx_attr_float(n, "lambd", 0.5);
    cn_tensor *lo = cn_cast(cn_add_scalar(x, bias), cn_tensor_dtype(x));
    cn_tensor *hi = cn_cast(cn_sub_scalar(x, bias), cn_tensor_dtype(x));
    DONE(cn_where(cn_lt(cn_cast(x, CN_F64), cn_scalar(CN_F64, -l)), lo,
                  cn_where(cn_gt(cn_cast(x, CN_F64), cn_scalar(CN_F64, l)), hi, sc(x, 0))));
}

H(h_isinf) {
    UNUSED;
    cn_tensor *x = in[0];
    if (need_float(c, x) < 0) return CN_EUNSUPPORTED;
    bool neg = onnx_attr_int(n, "detect_negative", 1), pos = onnx_attr_int(n, "detect_positive", 1);
    cn_tensor *p = cn_eq(x, sc(x, INFINITY)), *m = cn_eq(x, sc(x, -INFINITY));
    if (pos && neg) DONE(cn_logical_or(p, m));
    if (pos) DONE(p);
    if (neg) DONE(m);
    DONE(cn_zeros_like(p));
}

H(h_prelu) {
    UNUSED;
    cn_tensor *x = in[0], *slope = in[1];
    if (need_float(c, x) < 0) return CN_EUNSUPPORTED;
    /* Before opset 7 a [C] slope meant per channel; numpy rules after. */
    if (c->opset_of_node < 7 && cn_ndim(slope) == 1 && cn_ndim(x) > 2 && cn_dim(slope, 0) > 1)
        slope = cn_reshape(slope, 2, (int64_t[]){cn_dim(slope, 0), 1});
    if (c->opset_of_node < 7 && cn_ndim(slope) >= 1 && cn_ndim(x) > 2 && cn_ndim(slope) < cn_ndim(x) - 1) {
        int64_t shp[CN_MAX_DIMS];
        int r = cn_ndim(slope);
        for (int i = 0; i < r; i++) shp[i] = cn_dim(slope, i);
        for (int i = r; i < cn_ndim(x) - 1; i++) shp[i] = 1;
        slope = cn_reshape(slope, cn_ndim(x) - 1, shp);
    }
    DONE(cn_where(cn_lt(x, sc(x, 0)), cn_mul(x, slope), x));
}

H(h_clip) {
    UNUSED;
    cn_tensor *x = in[0];
    cn_dtype dt = cn_tensor_dtype(x);
    if (c->opset_of_node < 11) {
        double lo = onnx_attr_float(n, "min", -INFINITY), hi = onnx_attr_float(n, "max", INFINITY);
        DONE(cn_clamp(x, lo, hi));
    }
    cn_tensor *y = x;
    if (nin > 1 && in[1]) y = cn_maximum(y, in[1]);
    if (nin > 2 && in[2]) y = cn_minimum(y, in[2]);
    DONE(cn_cast(y, dt));
}

/* Dropout of a module (onnx_ctx.trainable): masks drawn in training
 * (as an op, so a static program draws a new one each run), whatever the
 * file's training_mode says; the identity in evaluation. */
static int dropout_trainable(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor **in, int nin,
                             cn_tensor **out, int nout) {
    double p = c->opset_of_node < 12 ? onnx_attr_float(n, "ratio", 0.5) : 0.5;
    if (nin > 1 && in[1] && onnx_const_scalar(c, in[1], "ratio", &p) < 0) return CN_EINVAL;
    if (!(p >= 0 && p < 1)) return onnx_bad(c, "ratio %g is not in [0, 1)", p);
    cn_tensor *x = in[0];
    if (!c->training || p == 0) {
        out[0] = x;
        if (nout > 1) out[1] = cn_cast(onnx_full_like(x, 1), CN_BOOL);
        return out[0] && (nout < 2 || out[1]) ? 0 : CN_EINVAL;
    }
    cn_tensor *keep = cn_bernoulli(onnx_full_like(x, 1 - p));
    out[0] = cn_mul(x, cn_mul_scalar(keep, 1 / (1 - p)));
    if (nout > 1) out[1] = cn_cast(keep, CN_BOOL);
    return out[0] && (nout < 2 || out[1]) ? 0 : CN_EINVAL;
}

H(h_dropout) {
    UNUSED;
    if (c->trainable) return dropout_trainable(c, n, in, nin, out, nout);
    if (c->opset_of_node < 7 && onnx_attr_int(n, "is_test", 0) == 0)
        return onnx_unsup(c, "training mode (is_test = 0)");
    if (nin > 2 && in[2]) {
        double t, ratio = 0.5;
        if (onnx_const_scalar(c, in[2], "training_mode", &t) < 0) return CN_EUNSUPPORTED;
        /* Training with ratio 0 keeps everything: the identity again. */
        if (t != 0 && nin > 1 && in[1] && !cn_is_symbolic_tensor(in[1]) &&
            onnx_const_scalar(c, in[1], "ratio", &ratio) < 0)
            return CN_EINVAL;
        if (t != 0 && nin > 1 && in[1] && cn_is_symbolic_tensor(in[1]))
            return onnx_unsup(c, "input 'ratio' is computed at run time (in training mode only a "
                                 "constant ratio of 0 is supported)");
        if (t != 0 && ratio != 0) return onnx_unsup(c, "training mode (random masks)");
    }
    out[0] = in[0];
    if (nout > 1) out[1] = cn_cast(onnx_full_like(in[0], 1), CN_BOOL);
    return 0;
}

/* ---- binary ---- */

/* Before opset 7, binary ops broadcast only with broadcast = 1, B aligned at
 * `axis` of A (default: trailing). */
static int legacy_bcast(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor **a, cn_tensor **b) {
    if (c->opset_of_node >= 7 || !*a || !*b) return 0;
    if (!onnx_attr_int(n, "broadcast", 0)) return 0;
    const Onnx__AttributeProto *ax = onnx_attr(n, "axis");
    if (!ax) return 0;
    int ra = cn_ndim(*a), rb = cn_ndim(*b);
    int axis = onnx_axis(c, ax->i, ra, "axis");
    if (axis < 0) return CN_EINVAL;
    if (axis + rb > ra) return onnx_bad(c, "B of rank %d does not fit at axis %d of rank %d", rb, axis, ra);
    int64_t shp[CN_MAX_DIMS];
    for (int i = 0; i < ra - axis; i++) shp[i] = i < rb ? cn_dim(*b, i) : 1;
    *b = cn_reshape(*b, ra - axis, shp);
    return *b ? 0 : CN_EINVAL;
}

#define BINARY(hname, expr)                                                                        \
    H(hname) {                                                                                     \
        UNUSED;                                                                                    \
        cn_tensor *a = in[0], *b = in[1];                                                          \
        if (legacy_bcast(c, n, &a, &b) < 0) return CN_EINVAL;                                      \
        DONE(expr);                                                                                \
    }

BINARY(h_add, cn_add(a, b))
BINARY(h_sub, cn_sub(a, b))
BINARY(h_mul, cn_mul(a, b))
BINARY(h_equal, cn_eq(a, b))
BINARY(h_less, cn_lt(a, b))
BINARY(h_greater, cn_gt(a, b))
BINARY(h_less_equal, cn_le(a, b))
BINARY(h_greater_equal, cn_ge(a, b))
BINARY(h_and, cn_logical_and(a, b))
BINARY(h_or, cn_logical_or(a, b))
BINARY(h_xor, cn_logical_xor(a, b))

/* Integers divide truncating toward zero (C's rule, as the ONNX reference). */
static cn_tensor *int_div(cn_tensor *a, cn_tensor *b, cn_dtype dt) {
    cn_tensor *q = cn_div(cn_cast(a, CN_F64), cn_cast(b, CN_F64));
    return cn_cast(q, dt); /* the float -> int cast truncates */
}

H(h_div) {
    UNUSED;
    cn_tensor *a = in[0], *b = in[1];
    if (legacy_bcast(c, n, &a, &b) < 0) return CN_EINVAL;
    cn_dtype dt = cn_tensor_dtype(a);
    if (is_int(dt)) DONE(int_div(a, b, dt));
    DONE(cn_div(a, b));
}

H(h_pow) {
    UNUSED;
    cn_tensor *a = in[0], *b = in[1];
    if (legacy_bcast(c, n, &a, &b) < 0) return CN_EINVAL;
    cn_dtype dt = cn_tensor_dtype(a);
    if (is_int(dt)) DONE(cn_cast(cn_round(cn_pow(cn_cast(a, CN_F64), cn_cast(b, CN_F64))), dt));
    DONE(cn_cast(cn_pow(a, cn_cast(b, dt)), dt));
}

H(h_mod) {
    UNUSED;
    cn_tensor *a = in[0], *b = in[1];
    cn_dtype dt = cn_tensor_dtype(a);
    bool fmod = onnx_attr_int(n, "fmod", 0);
    if (!fmod && is_float(dt)) return onnx_bad(c, "fmod must be 1 for float inputs");
    cn_tensor *a64 = cn_cast(a, CN_F64), *b64 = cn_cast(b, CN_F64);
    cn_tensor *q = cn_div(a64, b64);
    /* fmod: the remainder has the dividend's sign (truncated quotient);
     * otherwise the divisor's (floored quotient), as Python's %. */
    if (fmod) q = cn_cast(cn_cast(q, CN_I64), CN_F64);
    else q = cn_floor(q);
    DONE(cn_cast(cn_sub(a64, cn_mul(b64, q)), dt));
}

/* Max, Min, Sum, Mean: variadic, with numpy broadcasting. */
static int variadic(cn_tensor **in, int nin, cn_tensor **out,
                    cn_tensor *(*f)(cn_tensor *, cn_tensor *)) {
    cn_tensor *acc = in[0];
    for (int i = 1; i < nin; i++) acc = f(acc, in[i]);
    DONE(cn_cast(acc, cn_tensor_dtype(in[0])));
}

H(h_max) {
    UNUSED;
    return variadic(in, nin, out, cn_maximum);
}
H(h_min) {
    UNUSED;
    return variadic(in, nin, out, cn_minimum);
}
H(h_sum) {
    UNUSED;
    return variadic(in, nin, out, cn_add);
}
H(h_mean) {
    UNUSED;
    if (variadic(in, nin, out, cn_add) < 0) return CN_EINVAL;
    DONE(cn_div_scalar(out[0], nin));
}

H(h_where) {
    UNUSED;
    DONE(cn_where(in[0], in[1], in[2]));
}

/* ---- casts ---- */

H(h_cast) {
    UNUSED;
    int64_t to = onnx_attr_int(n, "to", 0);
    int dt = onnx_dtype((int32_t)to);
    if (dt < 0) return onnx_unsup(c, "cast to %s", onnx_dtype_name((int32_t)to));
    DONE(cn_cast(in[0], (cn_dtype)dt));
}

H(h_cast_like) {
    UNUSED;
    DONE(cn_cast(in[0], cn_tensor_dtype(in[1])));
}

#define BIN_ATTRS "broadcast,axis,consumed_inputs"
#define LIM_LEGACY "before opset 7: broadcast with axis (legacy alignment)"

const onnx_op_entry cn_onnx_ops_elementwise[] = {
    {"Abs", h_abs, "consumed_inputs", 1, 1, 1, ""},
    {"Neg", h_neg, "consumed_inputs", 1, 1, 1, ""},
    {"Sign", h_sign, "", 1, 1, 1, ""},
    {"Exp", h_exp, "consumed_inputs", 1, 1, 1, "float inputs"},
    {"Log", h_log, "consumed_inputs", 1, 1, 1, "float inputs"},
    {"Sqrt", h_sqrt, "consumed_inputs", 1, 1, 1, "float inputs"},
    {"Reciprocal", h_reciprocal, "consumed_inputs", 1, 1, 1, "float inputs"},
    {"Sin", h_sin, "", 1, 1, 1, "float inputs"},
    {"Cos", h_cos, "", 1, 1, 1, "float inputs"},
    {"Tan", h_tan, "", 1, 1, 1, "float inputs"},
    {"Asin", h_asin, "", 1, 1, 1, "float inputs"},
    {"Acos", h_acos, "", 1, 1, 1, "float inputs"},
    {"Atan", h_atan, "", 1, 1, 1, "float inputs"},
    {"Asinh", h_asinh, "", 1, 1, 1, "float inputs"},
    {"Acosh", h_acosh, "", 1, 1, 1, "float inputs"},
    {"Atanh", h_atanh, "", 1, 1, 1, "float inputs"},
    {"Sinh", h_sinh, "", 1, 1, 1, "float inputs"},
    {"Cosh", h_cosh, "", 1, 1, 1, "float inputs"},
    {"Tanh", h_tanh, "consumed_inputs", 1, 1, 1, "float inputs"},
    {"Sigmoid", h_sigmoid, "consumed_inputs", 1, 1, 1, "float inputs"},
    {"Erf", h_erf, "", 1, 1, 1, "float inputs"},
    {"Gelu", h_gelu, "approximate", 1, 1, 1, "float inputs"},
    {"Floor", h_floor, "consumed_inputs", 1, 1, 1, "float inputs"},
    {"Ceil", h_ceil, "consumed_inputs", 1, 1, 1, "float inputs"},
    {"Round", h_round, "", 1, 1, 1, "float inputs"},
    {"Relu", h_relu, "consumed_inputs", 1, 1, 1, ""},
    {"Not", h_not, "", 1, 1, 1, ""},
    {"Identity", h_identity, "", 1, 1, 1, "tensors only (no sequences or optionals)"},
    {"Softplus", h_softplus, "", 1, 1, 1, "float inputs"},
    {"Softsign", h_softsign, "", 1, 1, 1, "float inputs"},
    {"Mish", h_mish, "", 1, 1, 1, "float inputs"},
    {"Elu", h_elu, "alpha,consumed_inputs", 1, 1, 1, "float inputs"},
    {"LeakyRelu", h_leaky_relu, "alpha,consumed_inputs", 1, 1, 1, "float inputs"},
    {"Selu", h_selu, "alpha,gamma,consumed_inputs", 1, 1, 1, "float inputs"},
    {"Celu", h_celu, "alpha", 1, 1, 1, "float inputs"},
    {"HardSigmoid", h_hard_sigmoid, "alpha,beta,consumed_inputs", 1, 1, 1, "float inputs"},
    {"HardSwish", h_hard_swish, "", 1, 1, 1, "float inputs"},
    {"ThresholdedRelu", h_thresholded_relu, "alpha", 1, 1, 1, "float inputs"},
    {"Shrink", h_shrink, "bias,lambd", 1, 1, 1, ""},
    {"IsNaN", h_isnan, "", 1, 1, 1, "float inputs"},
    {"IsInf", h_isinf, "detect_negative,detect_positive", 1, 1, 1, "float inputs"},
    {"PRelu", h_prelu, "consumed_inputs", 2, 2, 1, "float inputs"},
    {"Clip", h_clip, "min,max,consumed_inputs", 1, 3, 1, ""},
    {"Dropout", h_dropout, "ratio,is_test,seed,consumed_inputs", 1, 3, 2, "training only in a trainable load (else training_mode a constant false, or ratio 0)"},
    {"Add", h_add, BIN_ATTRS, 2, 2, 1, ""},
    {"Sub", h_sub, BIN_ATTRS, 2, 2, 1, ""},
    {"Mul", h_mul, BIN_ATTRS, 2, 2, 1, ""},
    {"Div", h_div, BIN_ATTRS, 2, 2, 1, "integers divide through f64 (exact below 2^53)"},
    {"Pow", h_pow, BIN_ATTRS, 2, 2, 1, "integer powers through f64"},
    {"Mod", h_mod, "fmod", 2, 2, 1, "computed through f64"},
    {"Max", h_max, "consumed_inputs", 1, ONNX_MAX_INPUTS, 1, ""},
    {"Min", h_min, "consumed_inputs", 1, ONNX_MAX_INPUTS, 1, ""},
    {"Sum", h_sum, "consumed_inputs", 1, ONNX_MAX_INPUTS, 1, ""},
    {"Mean", h_mean, "consumed_inputs", 1, ONNX_MAX_INPUTS, 1, ""},
    {"Equal", h_equal, BIN_ATTRS, 2, 2, 1, ""},
    {"Less", h_less, BIN_ATTRS, 2, 2, 1, ""},
    {"Greater", h_greater, BIN_ATTRS, 2, 2, 1, ""},
    {"LessOrEqual", h_less_equal, "", 2, 2, 1, ""},
    {"GreaterOrEqual", h_greater_equal, "", 2, 2, 1, ""},
    {"And", h_and, BIN_ATTRS, 2, 2, 1, ""},
    {"Or", h_or, BIN_ATTRS, 2, 2, 1, ""},
    {"Xor", h_xor, BIN_ATTRS, 2, 2, 1, ""},
    {"Where", h_where, "", 3, 3, 1, ""},
    /* saturate (opset 19) concerns float8 targets only, which are refused */
    {"Cast", h_cast, "to,saturate", 1, 1, 1, "to and from f32, f64, f16, bf16, i32, i64, u8, i8, bool"},
    {"CastLike", h_cast_like, "saturate", 2, 2, 1, ""},
    {NULL, NULL, NULL, 0, 0, 0, NULL},
};

#endif /* CN_HAVE_ONNX */
