/* Unary elementwise ops: arithmetic, exponentials and logarithms, activation
 * functions, rounding, clamp and logical_not. One infer and one kernel serve
 * the whole family; op->impl points at the op's kind. */
#include "op.h"

#include "../backend/cpu/unary.h"

#include <inttypes.h>
#include <math.h>

static const cn_unary_kind un_kinds[CN_UN_COUNT] = {
#define K(k) [k] = k
    K(CN_UN_NEG),     K(CN_UN_ABS),        K(CN_UN_SIGN),      K(CN_UN_EXP),
    K(CN_UN_LOG),     K(CN_UN_LOG1P),      K(CN_UN_EXPM1),     K(CN_UN_SQRT),
    K(CN_UN_RSQRT),   K(CN_UN_SQUARE),     K(CN_UN_RECIPROCAL), K(CN_UN_SIN),
    K(CN_UN_COS),     K(CN_UN_TANH),       K(CN_UN_SIGMOID),   K(CN_UN_RELU),
    K(CN_UN_LEAKY_RELU), K(CN_UN_ELU),     K(CN_UN_GELU),      K(CN_UN_GELU_TANH),
    K(CN_UN_SILU),    K(CN_UN_SOFTPLUS),   K(CN_UN_ERF),       K(CN_UN_FLOOR),
    K(CN_UN_CEIL),    K(CN_UN_ROUND),      K(CN_UN_CLAMP),     K(CN_UN_LOGICAL_NOT),
#undef K
};

static cn_unary_kind kind_of(const cn_op_def *op) { return *(const cn_unary_kind *)op->impl; }

/* The attribute checks; the defaults live in the attrs tables below. */
static int check_attrs(const cn_op_def *op, const cn_attrs *a) {
    switch (kind_of(op)) {
    case CN_UN_GELU:
        if (a->i[0] != 0 && a->i[0] != 1)
            return cn_failc(CN_EINVAL, "%s: approximate is %" PRId64 ", not 0 (erf) or 1 (tanh)",
                            op->name, a->i[0]);
        break;
    case CN_UN_SOFTPLUS:
        if (a->f[0] == 0 || isnan(a->f[0]))
            return cn_failc(CN_EINVAL, "%s: beta is %g; it must be a nonzero number", op->name,
                            a->f[0]);
        if (isnan(a->f[1])) return cn_failc(CN_EINVAL, "%s: threshold is NaN", op->name);
        break;
    case CN_UN_CLAMP:
        if (isnan(a->f[0]) || isnan(a->f[1]))
            return cn_failc(CN_EINVAL,
                            "%s: lo = %g, hi = %g: a bound is NaN (use -inf / inf for none)",
                            op->name, a->f[0], a->f[1]);
        break;
    default: break;
    }
    return CN_OK;
}

/* Same shape out. Float functions give f32 for integer and bool inputs (the
 * dispatcher has cast them already; this holds for a static graph re-running
 * inference too); logical_not gives bool; the rest keep the dtype but have
 * no meaning for bool. */
static int unary_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                       cn_meta *m) {
    (void)nin;
    const cn_tensor *x = in[0];
    cn_dtype dt = (cn_dtype)x->dtype;
    if (kind_of(op) == CN_UN_LOGICAL_NOT) {
        dt = CN_BOOL;
    } else if (op->flags & CN_OPF_FLOAT_MATH) {
        if (!cn_dtype_is_float(dt)) dt = CN_F32;
    } else if (dt == CN_BOOL) {
        char b[160];
        return cn_failc(CN_EINVAL, "%s: x is %s; bool is not supported (cast it to a number type)",
                        op->name, cn_shape_str(x, b, sizeof b));
    }
    if (check_attrs(op, a) < 0) return CN_EINVAL;
    m->dtype = dt;
    m->ndim = x->ndim;
    memcpy(m->shape, x->shape, sizeof m->shape);
    return CN_OK;
}

static int unary_kernel(const cn_op_def *op, cn_tensor *const *in, int nin, const cn_attrs *a,
                        cn_tensor *out) {
    (void)nin;
    cn_unary_kind k = kind_of(op);
    if (k == CN_UN_GELU && a->i[0]) k = CN_UN_GELU_TANH;
    return cn_cpu_unary(op->name, k, out, in[0], a->f[0], a->f[1]);
}

#define FLOAT_FN CN_OPF_FLOAT_MATH

/* The trailing arguments are designated initializers: .doc, and .attrs for
 * the ops that have attributes. */
#define UNARY_OP(NAME, KIND, FLAGS, ONNX, ...)                                                     \
    const cn_op_def cn_opdef_##NAME = {                                                            \
        .name = #NAME,                                                                             \
        .ninputs = 1,                                                                              \
        .flags = CN_OPF_ELEMENTWISE | (FLAGS),                                                     \
        .infer = unary_infer,                                                                      \
        .cpu = unary_kernel,                                                                       \
        .onnx = ONNX,                                                                              \
        .impl = &un_kinds[KIND],                                                                   \
        __VA_ARGS__};

UNARY_OP(neg, CN_UN_NEG, 0, "Neg", .doc = "y = -x (integers wrap around)")
UNARY_OP(abs, CN_UN_ABS, 0, "Abs", .doc = "y = |x| (integers wrap around at the minimum)")
UNARY_OP(sign, CN_UN_SIGN, 0, "Sign",
         .doc = "y = 1 if x > 0, -1 if x < 0, 0 if x = 0, NaN if NaN")
UNARY_OP(exp, CN_UN_EXP, FLOAT_FN, "Exp", .doc = "y = e^x")
UNARY_OP(log, CN_UN_LOG, FLOAT_FN, "Log", .doc = "y = ln x")
UNARY_OP(log1p, CN_UN_LOG1P, FLOAT_FN, NULL, .doc = "y = ln(1 + x), accurate for small x")
UNARY_OP(expm1, CN_UN_EXPM1, FLOAT_FN, NULL, .doc = "y = e^x - 1, accurate for small x")
UNARY_OP(sqrt, CN_UN_SQRT, FLOAT_FN, "Sqrt", .doc = "y = sqrt(x)")
UNARY_OP(rsqrt, CN_UN_RSQRT, FLOAT_FN, NULL, .doc = "y = 1 / sqrt(x)")
UNARY_OP(square, CN_UN_SQUARE, 0, NULL, .doc = "y = x * x (integers wrap around)")
UNARY_OP(reciprocal, CN_UN_RECIPROCAL, FLOAT_FN, "Reciprocal", .doc = "y = 1 / x")
UNARY_OP(sin, CN_UN_SIN, FLOAT_FN, "Sin", .doc = "y = sin x")
UNARY_OP(cos, CN_UN_COS, FLOAT_FN, "Cos", .doc = "y = cos x")
UNARY_OP(tanh, CN_UN_TANH, FLOAT_FN, "Tanh", .doc = "y = tanh x")
UNARY_OP(sigmoid, CN_UN_SIGMOID, FLOAT_FN, "Sigmoid", .doc = "y = 1 / (1 + e^-x)")
UNARY_OP(relu, CN_UN_RELU, 0, "Relu", .doc = "y = max(x, 0) (NaN stays NaN)")
UNARY_OP(leaky_relu, CN_UN_LEAKY_RELU, 0, "LeakyRelu",
         .doc = "y = x if x > 0 else negative_slope * x (integers: truncated toward 0)",
         .attrs = {{"negative_slope", CN_ATTR_FLOAT, 0, 0.01}})
UNARY_OP(elu, CN_UN_ELU, FLOAT_FN, "Elu", .doc = "y = x if x > 0 else alpha * (e^x - 1)",
         .attrs = {{"alpha", CN_ATTR_FLOAT, 0, 1.0}})
UNARY_OP(gelu, CN_UN_GELU, FLOAT_FN, "Gelu",
         .doc = "y = x Phi(x) = x/2 (1 + erf(x / sqrt 2)); approximate: x/2 (1 + tanh(sqrt(2/pi) "
                "(x + 0.044715 x^3)))",
         .attrs = {{"approximate", CN_ATTR_BOOL, 0, 0}})
UNARY_OP(silu, CN_UN_SILU, FLOAT_FN, NULL, .doc = "y = x / (1 + e^-x)")
UNARY_OP(softplus, CN_UN_SOFTPLUS, FLOAT_FN, "Softplus",
         .doc = "y = ln(1 + e^(beta x)) / beta, or x where beta x > threshold",
         .attrs = {{"beta", CN_ATTR_FLOAT, 0, 1.0}, {"threshold", CN_ATTR_FLOAT, 1, 20.0}})
UNARY_OP(erf, CN_UN_ERF, FLOAT_FN, "Erf", .doc = "y = 2/sqrt(pi) * integral of e^-t^2 from 0 to x")
UNARY_OP(floor, CN_UN_FLOOR, 0, "Floor", .doc = "y = the largest integer <= x")
UNARY_OP(ceil, CN_UN_CEIL, 0, "Ceil", .doc = "y = the smallest integer >= x")
UNARY_OP(round, CN_UN_ROUND, 0, "Round",
         .doc = "y = x rounded to the nearest integer, half to even")
UNARY_OP(clamp, CN_UN_CLAMP, 0, "Clip",
         .doc = "y = min(max(x, lo), hi) (lo > hi gives hi; integers: bounds rounded inward)",
         .attrs = {{"lo", CN_ATTR_FLOAT, 0, -INFINITY}, {"hi", CN_ATTR_FLOAT, 1, INFINITY}})
/* Reads the truth value of every dtype itself, halves included. */
UNARY_OP(logical_not, CN_UN_LOGICAL_NOT, CN_OPF_NONDIFF | CN_OPF_NO_HALF, "Not",
         .doc = "y = (x == 0)")

/* ---- public functions ---- */

static cn_tensor *apply1(cn_op_id id, cn_tensor *x, const cn_attrs *a) {
    return cn_op_apply(id, &x, 1, a);
}

cn_tensor *cn_neg(cn_tensor *x) { return apply1(CN_OP_neg, x, NULL); }
cn_tensor *cn_abs(cn_tensor *x) { return apply1(CN_OP_abs, x, NULL); }
cn_tensor *cn_sign(cn_tensor *x) { return apply1(CN_OP_sign, x, NULL); }
cn_tensor *cn_exp(cn_tensor *x) { return apply1(CN_OP_exp, x, NULL); }
cn_tensor *cn_log(cn_tensor *x) { return apply1(CN_OP_log, x, NULL); }
cn_tensor *cn_log1p(cn_tensor *x) { return apply1(CN_OP_log1p, x, NULL); }
cn_tensor *cn_expm1(cn_tensor *x) { return apply1(CN_OP_expm1, x, NULL); }
cn_tensor *cn_sqrt(cn_tensor *x) { return apply1(CN_OP_sqrt, x, NULL); }
cn_tensor *cn_rsqrt(cn_tensor *x) { return apply1(CN_OP_rsqrt, x, NULL); }
cn_tensor *cn_square(cn_tensor *x) { return apply1(CN_OP_square, x, NULL); }
cn_tensor *cn_reciprocal(cn_tensor *x) { return apply1(CN_OP_reciprocal, x, NULL); }
cn_tensor *cn_sin(cn_tensor *x) { return apply1(CN_OP_sin, x, NULL); }
cn_tensor *cn_cos(cn_tensor *x) { return apply1(CN_OP_cos, x, NULL); }
cn_tensor *cn_tanh(cn_tensor *x) { return apply1(CN_OP_tanh, x, NULL); }
cn_tensor *cn_sigmoid(cn_tensor *x) { return apply1(CN_OP_sigmoid, x, NULL); }
cn_tensor *cn_relu(cn_tensor *x) { return apply1(CN_OP_relu, x, NULL); }
cn_tensor *cn_silu(cn_tensor *x) { return apply1(CN_OP_silu, x, NULL); }
cn_tensor *cn_erf(cn_tensor *x) { return apply1(CN_OP_erf, x, NULL); }
cn_tensor *cn_floor(cn_tensor *x) { return apply1(CN_OP_floor, x, NULL); }
cn_tensor *cn_ceil(cn_tensor *x) { return apply1(CN_OP_ceil, x, NULL); }
cn_tensor *cn_round(cn_tensor *x) { return apply1(CN_OP_round, x, NULL); }
cn_tensor *cn_logical_not(cn_tensor *x) { return apply1(CN_OP_logical_not, x, NULL); }

cn_tensor *cn_leaky_relu(cn_tensor *x, double negative_slope) {
    cn_attrs a = {0};
    a.f[0] = negative_slope;
    return apply1(CN_OP_leaky_relu, x, &a);
}

cn_tensor *cn_elu(cn_tensor *x, double alpha) {
    cn_attrs a = {0};
    a.f[0] = alpha;
    return apply1(CN_OP_elu, x, &a);
}

cn_tensor *cn_gelu(cn_tensor *x, bool approximate) {
    cn_attrs a = {0};
    a.i[0] = approximate;
    return apply1(CN_OP_gelu, x, &a);
}

cn_tensor *cn_softplus(cn_tensor *x, double beta, double threshold) {
    cn_attrs a = {0};
    a.f[0] = beta;
    a.f[1] = threshold;
    return apply1(CN_OP_softplus, x, &a);
}

cn_tensor *cn_clamp(cn_tensor *x, double lo, double hi) {
    cn_attrs a = {0};
    a.f[0] = lo;
    a.f[1] = hi;
    return apply1(CN_OP_clamp, x, &a);
}
